"""The service's HTTP front: checks each request (token, size, JSON, fields) and hands the work to the
judge replicas through a Ray Serve handle.

    POST /run_code   SandboxFusion's compile-and-run (codefu.serve.protocol)
    POST /judge      one response against a problem's tests: the verdict as `codefu judge` writes it
    GET  /health     the process answers (no token needed)
    GET  /ready      the replicas are up (no token needed)
    GET  /metrics    Prometheus: requests, verdicts, requests in flight, latency

Backpressure: at most `max_pending` requests are in the service at once (queued at the replicas or
running); one more is answered 503 with Retry-After at once instead of waiting behind them. A client
that disconnects has its call cancelled: its submission starts no further test, and no sandbox
outlives the limits of the test already running.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from ray.serve.exceptions import BackPressureError
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from codefu.serve.protocol import (
    BadRequest,
    ServiceLimits,
    parse_json,
    parse_judge,
    parse_run_code,
    verdict_record,
)
from codefu.types import Problem, Status, Verdict

log = logging.getLogger(__name__)
NODE_HEADER = "X-Codefu-Node"  # the address of the node whose replica answered


@dataclass
class ServiceSettings:
    reward: str = "codefu"
    token: str | None = None  # set: every request but /health and /ready needs "Authorization: Bearer <it>"
    max_pending: int = 64
    retry_after_s: int = 1
    limits: ServiceLimits = field(default_factory=ServiceLimits)


class Busy(Exception):
    pass


class Unauthorized(Exception):
    pass


class ClientGone(Exception):
    pass


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "codefu_serve_requests",
            "HTTP requests by endpoint and status code",
            ["endpoint", "code"],
            registry=self.registry,
        )
        self.outcomes = Counter(
            "codefu_serve_outcomes",
            "Answers by endpoint and outcome (/judge: the verdict; /run_code: SandboxFusion's status)",
            ["endpoint", "outcome"],
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "codefu_serve_in_flight", "Requests queued at or running on the replicas", registry=self.registry
        )
        self.latency = Histogram(
            "codefu_serve_request_seconds",
            "Time from request to answer",
            ["endpoint"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
            registry=self.registry,
        )


def build_app(
    backend: Any,
    settings: ServiceSettings,
    dataset: list[Problem] | None = None,
    ready: Callable[[], Awaitable[dict[str, Any]]] | None = None,
) -> Starlette:
    """`backend` is the judge deployment's handle (`backend.run_code.remote(request)` and
    `backend.judge.remote(problem, response)` answer (result, node)); `ready()` describes the replicas,
    raising while they are not up."""
    metrics = Metrics()
    state = {"in_flight": 0}

    async def handle(request: Request, endpoint: str, work: Callable[[Any], Awaitable[tuple[Any, str]]]):
        start = time.monotonic()
        admitted = False
        headers: dict[str, str] = {}
        try:
            _authorize(request, settings.token)
            if state["in_flight"] >= settings.max_pending:
                raise Busy
            state["in_flight"] += 1
            metrics.in_flight.set(state["in_flight"])
            admitted = True
            body = parse_json(await _read_body(request, settings.limits.max_body_bytes))
            answer, node = await _unless_gone(request, await work(body))
            headers[NODE_HEADER] = node
            status, content = 200, answer
        except BadRequest as e:
            status, content = e.status, {"error": str(e)}
        except Unauthorized:
            status, content = 401, {"error": "missing or wrong bearer token (Authorization: Bearer <token>)"}
            headers["WWW-Authenticate"] = "Bearer"
        except Busy:
            status, content = 503, {"error": f"busy: {settings.max_pending} requests in flight; retry later"}
            headers["Retry-After"] = str(settings.retry_after_s)
        except (ClientGone, ClientDisconnect):
            status, content = 499, {"error": "client closed the request"}
        except BackPressureError:
            status, content = 503, {"error": "busy: the replicas' queues are full; retry later"}
            headers["Retry-After"] = str(settings.retry_after_s)
        except Exception as e:  # noqa: BLE001 - ours, never the request's: logged, answered as such
            log.exception("%s failed", endpoint)
            status, content = 500, {"error": f"the service failed: {type(e).__name__}: {e}"[:1000]}
        finally:
            if admitted:
                state["in_flight"] -= 1
                metrics.in_flight.set(state["in_flight"])
        metrics.requests.labels(endpoint, str(status)).inc()
        if status == 200:  # /run_code's SandboxFusion status or /judge's verdict
            metrics.outcomes.labels(endpoint, str(content.get("status", ""))).inc()
        metrics.latency.labels(endpoint).observe(time.monotonic() - start)
        return JSONResponse(content, status_code=status, headers=headers)

    async def run_code(request: Request) -> Response:
        async def work(body):
            parsed = parse_run_code(body, settings.limits)
            return backend.run_code.remote(parsed)

        return await handle(request, "run_code", work)

    async def judge(request: Request) -> Response:
        async def work(body):
            parsed = parse_judge(body, dataset, settings.reward)
            return _Recorded(backend.judge.remote(parsed.problem, parsed.response), parsed.problem, settings)

        return await handle(request, "judge", work)

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readiness(request: Request) -> Response:
        if ready is None:
            return JSONResponse({"ready": True})
        try:
            return JSONResponse({"ready": True, **await ready()})
        except Exception as e:  # noqa: BLE001 - not ready, and why
            return JSONResponse({"ready": False, "error": str(e)[:500]}, status_code=503)

    async def metrics_page(request: Request) -> Response:
        try:
            _authorize(request, settings.token)
        except Unauthorized:
            error = {"error": "missing or wrong bearer token"}
            return JSONResponse(error, 401, {"WWW-Authenticate": "Bearer"})
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    routes = [
        Route("/run_code", run_code, methods=["POST"]),
        Route("/judge", judge, methods=["POST"]),
        Route("/health", health, methods=["GET"]),
        Route("/ready", readiness, methods=["GET"]),
        Route("/metrics", metrics_page, methods=["GET"]),
    ]
    return Starlette(routes=routes)


class _Recorded:
    """The judge's (verdict, node) as (`codefu judge`'s record, node); cancels like the call it wraps."""

    def __init__(self, call: Any, problem: Problem, settings: ServiceSettings):
        self.call, self.problem, self.settings = call, problem, settings

    def cancel(self) -> None:
        self.call.cancel()

    def __await__(self):
        return self._answer().__await__()

    async def _answer(self) -> tuple[dict[str, Any], str]:
        try:
            verdict, node = await self.call
        except BackPressureError:
            raise
        except Exception as e:  # noqa: BLE001 - a replica lost mid-call: ours, so SANDBOX_ERROR
            log.warning("a judge replica failed: %s", e)
            verdict, node = Verdict(Status.SANDBOX_ERROR, message=f"judge replica failed: {e}"[:1000]), ""
        return verdict_record(self.problem, verdict, self.settings.reward), node


def _authorize(request: Request, token: str | None) -> None:
    if token is None:
        return
    given = request.headers.get("authorization", "")
    scheme, _, value = given.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), token.encode()):
        raise Unauthorized


async def _read_body(request: Request, most: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > most:
        raise BadRequest(f"the body is {declared} bytes, over this service's limit of {most}", 413)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > most:
            raise BadRequest(f"the body is over this service's limit of {most} bytes", 413)
        chunks.append(chunk)
    return b"".join(chunks)


async def _unless_gone(request: Request, call: Any) -> tuple[Any, str]:
    """The call's answer; if the client disconnects first, the call is cancelled and ClientGone raised."""

    async def answer():
        return await call

    async def disconnected():
        while (await request.receive())["type"] != "http.disconnect":
            pass

    answering, gone = asyncio.ensure_future(answer()), asyncio.ensure_future(disconnected())
    try:
        done, _ = await asyncio.wait({answering, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if answering in done:
        return answering.result()
    call.cancel()
    answering.cancel()
    raise ClientGone
