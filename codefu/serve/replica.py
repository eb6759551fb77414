"""The judge replicas behind the service: `JudgeReplica` (a plain class: a `Judge` on the CPUs it holds)
and `JudgeDeployment`, the thin Ray Serve deployment around it, one replica per node.

The deployment's methods are async so that a replica takes up to `max_ongoing_requests` calls at once
while a thread pool the size of its CPUs does the work; a call cancelled by the service (its client
went away) stops judging further tests.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import ray
from ray import serve

from codefu.judge.judge import Judge, JudgeConfig
from codefu.serve.protocol import RunCodeRequest, run_code_response
from codefu.types import Problem, Verdict

DEPLOYMENT = "codefu-judge"


class JudgeReplica:
    def __init__(self, config: JudgeConfig):
        self.judge_ = Judge(config)
        self.workers = self.judge_.workers

    def run_code(self, request: RunCodeRequest, cancel: threading.Event | None = None) -> dict[str, Any]:
        run = self.judge_.run_once(
            request.program,
            request.stdin,
            request.limits,
            request.compile_timeout_s,
            request.files,
            output_chars=request.limits.file_size_bytes,
            cancel=cancel,
        )
        return run_code_response(run, request.program.language)

    def judge(self, problem: Problem, response: str, cancel: threading.Event | None = None) -> Verdict:
        return self.judge_.judge(problem, response, cancel)

    def close(self) -> None:
        self.judge_.close()


@serve.deployment(name=DEPLOYMENT)
class JudgeDeployment:
    """Answers carry the replica's node address (the service's X-Codefu-Node header)."""

    def __init__(self, config: JudgeConfig):
        self.replica = JudgeReplica(config)
        self.node = ray.util.get_node_ip_address()
        self.pool = ThreadPoolExecutor(self.replica.workers, thread_name_prefix="serve-judge")
        self.running: set[threading.Event] = set()  # the cancel events of the calls in progress

    async def run_code(self, request: RunCodeRequest) -> tuple[dict[str, Any], str]:
        return await self._cancellable(self.replica.run_code, request), self.node

    async def judge(self, problem: Problem, response: str) -> tuple[Verdict, str]:
        return await self._cancellable(self.replica.judge, problem, response), self.node

    async def _cancellable(self, work: Any, *args: Any) -> Any:
        """`work(*args, cancel)` on the pool; the call cancelled (its client left) sets `cancel`: the
        test running is killed and no further one starts."""
        cancel = threading.Event()
        self.running.add(cancel)
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self.pool, work, *args, cancel)
        except asyncio.CancelledError:
            cancel.set()
            raise
        finally:
            self.running.discard(cancel)

    def __del__(self) -> None:  # Serve's shutdown hook: sandboxes closed, their processes reaped
        for cancel in list(self.running):  # the service is stopping: no test waits out its limits
            cancel.set()
        self.pool.shutdown(wait=True, cancel_futures=True)
        self.replica.close()
