"""The service's HTTP front: checks each request (token, size, JSON, fields) and hands the work to the
judge replicas through a Ray Serve handle.

    POST /run_code   SandboxFusion's compile-and-run (codefu.serve.protocol)
    POST /judge      one response against a problem's tests: the verdict as `codefu judge` writes it
    GET  /health     the process answers (no token needed)
    GET  /ready      the replicas are up (no token needed)
    GET  /metrics    Prometheus: requests, verdicts, requests in flight, latency

Every client is untrusted (docs/serve.md, "Threat model"):
- bodies: a body must arrive within `body_timeout_s`, with no gap over `body_idle_s`, or the request is
  408; bodies being read or parsed hold at most `max_body_memory_bytes` of the front's memory between
  them (those over SMALL_BODY; the small ones a pool of their own, so large uploads that stall hold up
  only other large ones). A request waits for its share before its body is read, so TCP holds the rest
  back. Bodies are read into one buffer and freed once decoded, and parsed off the event loop, so
  /health answers while large uploads are parsed;
- backpressure: at most `max_pending` requests are in the service at once (queued at the replicas or
  running), counted once their body is read: uploads that stall count against no one. One more is
  answered 503 with Retry-After at once instead of waiting behind them;
- a client that disconnects has its call cancelled: its submission starts no further test and the test
  running in its sandbox is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
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
    JudgeRequest,
    RunCodeRequest,
    ServiceLimits,
    decode_body,
    parse_json_text,
    parse_judge,
    parse_run_code,
    verdict_record,
)
from codefu.types import Problem, Status, Verdict

log = logging.getLogger(__name__)
NODE_HEADER = "X-Codefu-Node"  # the address of the node whose replica answered
INLINE_PARSE_BYTES = 64 << 10  # smaller bodies are parsed on the event loop: a thread hop costs more
SMALL_BODY = 1 << 20  # a body declared up to this size takes its memory from the small bodies' pool
SMALL_BODIES_MEMORY = 64 << 20


@dataclass
class ServiceSettings:
    reward: str = "codefu"
    token: str | None = None  # set: every request but /health and /ready needs "Authorization: Bearer <it>"
    max_pending: int = 64
    retry_after_s: int = 1
    limits: ServiceLimits = field(default_factory=ServiceLimits)
    python_checkers: frozenset[str] = frozenset()  # the operator's (--python-checker), besides built-ins
    body_timeout_s: float = 60.0  # a body must arrive whole within this (64 MB at ~1 MB/s)
    body_idle_s: float = 10.0  # ... with no gap longer than this
    max_body_memory_bytes: int = 0  # large bodies being read or parsed hold this (0: max_body_bytes)


class Busy(Exception):
    pass


class BodyMemory:
    """The front's memory for request bodies, in bytes: a request holds its body's declared length (the
    largest allowed when none is declared) while the body is read and parsed. Waiters are served first
    come, first served, so a large body is not starved by small ones."""

    def __init__(self, total: int):
        self.total, self.free = total, total
        self._waiters: list[tuple[int, asyncio.Future]] = []

    @contextlib.asynccontextmanager
    async def hold(self, size: int, timeout_s: float) -> AsyncIterator[None]:
        size = min(size, self.total)
        if self._waiters or self.free < size:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append((size, waiter))
            try:
                await asyncio.wait_for(asyncio.shield(waiter), timeout_s)
            except BaseException:
                self._leave(size, waiter)
                raise
        else:
            self.free -= size
        try:
            yield
        finally:
            self.free += size
            self._wake()

    def _leave(self, size: int, waiter: asyncio.Future) -> None:
        if waiter.done() and not waiter.cancelled():  # granted as it timed out: give it back
            self.free += size
        else:
            self._waiters.remove((size, waiter))
            waiter.cancel()
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self._waiters[0][0] <= self.free:
            size, waiter = self._waiters.pop(0)
            self.free -= size
            waiter.set_result(None)


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
    # two pools, so that uploads of large bodies that stall hold up other large ones only
    small_bodies = BodyMemory(SMALL_BODIES_MEMORY)
    large_bodies = BodyMemory(settings.max_body_memory_bytes or settings.limits.max_body_bytes)

    async def handle(
        request: Request, endpoint: str, parse: Callable[[Any], Any], call: Callable[[Any], Any]
    ) -> Response:
        """`parse(body)` checks the JSON body (run off the event loop: bodies can be tens of MB);
        `call(parsed)` sends it to the replicas, answering an awaitable of (answer, node)."""
        start = time.monotonic()
        admitted = False
        headers: dict[str, str] = {}
        try:
            _authorize(request, settings.token)
            if state["in_flight"] >= settings.max_pending:
                raise Busy  # no use reading a body that would not be admitted
            declared = _declared_size(request, settings.limits.max_body_bytes)
            size = settings.limits.max_body_bytes if declared is None else declared  # chunked: the most
            try:
                bodies = small_bodies if size <= SMALL_BODY else large_bodies
                async with bodies.hold(size, settings.body_timeout_s):
                    body = [await _read_body(request, settings, declared)]
                    if len(body[0]) <= INLINE_PARSE_BYTES:
                        parsed = _parsed(parse, body)
                    else:  # a thread of its own: parsing megabytes would stall every other request
                        parsed = await asyncio.to_thread(_parsed, parse, body)
                    if state["in_flight"] >= settings.max_pending:
                        raise Busy
                    state["in_flight"] += 1
                    metrics.in_flight.set(state["in_flight"])
                    admitted = True
                    pending = call(parsed)
                    del parsed
            except TimeoutError:  # the body's share of memory did not come in time
                raise Busy from None
            answer, node = await _unless_gone(request, pending)
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
        def parse(body: Any) -> RunCodeRequest:
            return parse_run_code(body, settings.limits)

        return await handle(request, "run_code", parse, backend.run_code.remote)

    async def judge(request: Request) -> Response:
        def parse(body: Any) -> JudgeRequest:
            return parse_judge(body, dataset, settings.reward, settings.limits, settings.python_checkers)

        def call(parsed: JudgeRequest) -> _Recorded:
            return _Recorded(backend.judge.remote(parsed.problem, parsed.response), parsed.problem, settings)

        return await handle(request, "judge", parse, call)

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


def _parsed(parse: Callable[[Any], Any], body: list[bytearray]) -> Any:
    """`parse` of the JSON in `body`'s one item, which is taken out: the bytes are freed once decoded, so
    a body's bytes, text and parsed value are never all held at once."""
    text = decode_body(body.pop())
    return parse(parse_json_text(text))


def _declared_size(request: Request, most: int) -> int | None:
    """The body's declared length (413 over `most`); None when none is declared (chunked)."""
    declared = request.headers.get("content-length")
    if declared is None:
        return None
    if not declared.isdigit():  # uvicorn refuses these first; kept for any other server
        raise BadRequest(f"Content-Length: {declared[:40]!r} is not a number of bytes")
    if len(declared) > 18 or int(declared) > most:
        raise BadRequest(f"the body is {declared[:40]} bytes, over this service's limit of {most}", 413)
    return int(declared)


async def _read_body(request: Request, settings: ServiceSettings, declared: int | None) -> bytearray:
    """The whole body (with a declared size, one buffer of it filled in place: no copy of the chunks), or
    408 when it is slower than the settings allow, 413 when it grows past the limit.

    One timer rescheduled per chunk rather than a wait_for per chunk: a task per chunk ends in an
    exception whose traceback holds this frame, and so the buffer, until the cycle collector runs."""
    most = settings.limits.max_body_bytes if declared is None else declared  # h11 holds one to its length
    body = bytearray(declared or 0)
    size = 0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settings.body_timeout_s
    try:
        async with asyncio.timeout(min(deadline, loop.time() + settings.body_idle_s)) as timer:
            async for chunk in request.stream():
                if size + len(chunk) > most:
                    raise BadRequest(f"the body is over this service's limit of {most} bytes", 413)
                if declared is None:
                    body += chunk
                else:
                    body[size : size + len(chunk)] = chunk
                size += len(chunk)
                timer.reschedule(min(deadline, loop.time() + settings.body_idle_s))
    except TimeoutError:
        body.clear()
        raise BadRequest(
            f"the body did not arrive in time ({size} bytes read; the service allows "
            f"{settings.body_timeout_s:g} s for a body, with no gap over {settings.body_idle_s:g} s)",
            408,
        ) from None
    except BaseException:
        body.clear()
        raise
    del body[size:]  # a client that sent less than it declared
    return body


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
