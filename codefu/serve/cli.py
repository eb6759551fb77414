"""`codefu serve`: the judge as an HTTP service other RL frameworks can call (SandboxFusion's /run_code,
codefu's /judge), its replicas spread over every node of the Ray cluster.

Prints `listening on http://HOST:PORT` once it accepts requests; SIGTERM or SIGINT stops it cleanly
(requests in flight finish, replicas close their sandboxes). On a `codefu launch` cluster (RAY_ADDRESS)
it joins it; otherwise it starts a Ray of its own. The token can also come from CODEFU_SERVE_TOKEN, which
keeps it out of the process list.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import resource
import signal
from dataclasses import replace

from codefu.errors import CodefuError, check_flags
from codefu.judge.checker import check_python_checkers
from codefu.judge.cli import add_python_checker_flag, add_unsafe_no_sandbox_flag
from codefu.judge.rewards import REWARDS, check_tested
from codefu.serve.protocol import ServiceLimits

APP_NAME = "codefu-judge"
# SIGTERM to exit within 30 s: requests in flight get REQUESTS_SHUTDOWN_S to be answered (then their
# sandboxes are killed), Serve SHUTDOWN_TIMEOUT_S to stop the replicas, Ray the rest
REQUESTS_SHUTDOWN_S = 10
REPLICA_SHUTDOWN_S = 5
SHUTDOWN_TIMEOUT_S = 12
MIN_CONNECTIONS = 256  # sockets are cheap; the bound is there against floods of them


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve", help="serve the judge over HTTP (SandboxFusion /run_code, /judge)", description=__doc__
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    p.add_argument("--port", type=int, default=8080, help="port (0: any free one, as printed)")
    p.add_argument("--dataset", help="problems /judge may name by 'name' or 'index' (parquet/JSONL)")
    p.add_argument("--token", help="bearer token requests need (default: $CODEFU_SERVE_TOKEN)")
    p.add_argument("--reward", default="codefu", choices=sorted(REWARDS), help="the reward /judge answers")
    p.add_argument("--max-tests", type=int, default=None, help="tests per /judge submission at most")
    p.add_argument("--seed", type=int, default=0, help="seed of the test sample when --max-tests cuts")
    p.add_argument("--time-scale", type=float, default=1.0, help="multiply every problem's time limit")
    add_python_checker_flag(p)
    p.add_argument("--replicas", type=int, default=0, help="judge replicas (0: one per node with a CPU)")
    p.add_argument(
        "--cpus-per-replica",
        type=float,
        default=0,
        help="CPUs each replica reserves and runs sandboxes on (0: the smallest node's)",
    )
    p.add_argument(
        "--max-pending",
        type=int,
        default=0,
        help="requests in the service at once before it answers 503 (0: 32 per judge CPU, >= 256)",
    )
    p.add_argument("--max-body-mb", type=float, default=64, help="largest request body")
    p.add_argument("--max-run-timeout", type=float, default=60, help="largest run_timeout a request may ask")
    add_unsafe_no_sandbox_flag(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    check_flags(
        args,
        [
            ("port", 0 <= args.port <= 65535, "in 0..65535 (0: any free one)"),
            ("replicas", args.replicas >= 0, ">= 0 (0: one per node)"),
            ("cpus_per_replica", args.cpus_per_replica >= 0, ">= 0 (0: the smallest node's)"),
            ("max_pending", args.max_pending >= 0, ">= 0 (0: 32 per judge CPU, >= 256)"),
            ("max_body_mb", args.max_body_mb > 0, "> 0"),
            ("max_run_timeout", args.max_run_timeout > 0, "> 0"),
            ("time_scale", args.time_scale > 0, "> 0"),
            ("max_tests", args.max_tests is None or args.max_tests >= 1, ">= 1"),
        ],
    )
    dataset = None
    if args.dataset:
        from codefu.data.loader import load_problems

        dataset = load_problems(args.dataset)
        check_tested(dataset, args.reward, f"--dataset {args.dataset}")
        check_python_checkers(dataset, args.python_checkers, args.dataset)
    token = args.token or os.environ.get("CODEFU_SERVE_TOKEN") or None
    previous = signal.signal(signal.SIGTERM, _interrupt)  # while starting: stop as on Ctrl-C
    try:
        return asyncio.run(_serve(args, dataset, token))
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


async def _serve(args: argparse.Namespace, dataset, token: str | None) -> int:
    import ray
    import uvicorn
    from ray import serve

    from codefu.judge.judge import JudgeConfig, sweep_run_dirs
    from codefu.judge.sandbox import SandboxConfig, check_reachable, make_work_dir
    from codefu.serve.app import ServiceSettings, build_app
    from codefu.serve.replica import JudgeDeployment

    sandbox = SandboxConfig(kind="none" if args.unsafe_no_sandbox else "bwrap")
    work_dir = make_work_dir(None)
    check_reachable(work_dir, sandbox)  # here, with a clear message, not as a replica's traceback
    _raise_open_files_limit()
    joining = bool(os.environ.get("RAY_ADDRESS"))  # a `codefu launch` cluster; else a Ray of our own
    auth = os.environ.get("RAY_AUTH_MODE", "token")
    if not joining and auth.lower() != "token":  # Ray's ports listen on every interface (docs/serve.md)
        logging.getLogger(__name__).warning(
            "RAY_AUTH_MODE=%s: the service's Ray accepts peers without its token on every interface", auth
        )
    ray.init(
        address="auto" if joining else None,
        log_to_driver=False,
        ignore_reinit_error=True,
        **({} if joining else {"include_dashboard": False}),
    )  # nothing here uses a dashboard
    try:
        nodes = [n for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) >= 1]
        if not nodes:
            raise CodefuError("no Ray node with a CPU is alive: the judge needs at least one")
        cpus = args.cpus_per_replica or min(n["Resources"]["CPU"] for n in nodes)
        replicas = args.replicas or len(nodes)
        workers = max(1, int(cpus))
        judge = JudgeConfig(
            reward=args.reward,
            max_tests=args.max_tests,
            seed=args.seed,
            time_scale=args.time_scale,
            workers=workers,
            judge_identical_once=False,
            python_checkers=args.python_checkers,
            sandbox=sandbox,
        )
        # clients such as verl's send one request per test case, 64 at once, and do not retry a 503
        max_pending = args.max_pending or max(256, 32 * workers * replicas)
        serve.start(proxy_location="Disabled")  # this process is the HTTP front
        deployment = JudgeDeployment.options(
            num_replicas=replicas,
            max_replicas_per_node=1 if replicas <= len(nodes) else None,
            ray_actor_options={"num_cpus": cpus},
            # the front's admission (max_pending) is the only bound: requests wait in the replica's own
            # FIFO (its thread pool of `workers`), not in Serve's router, whose retries with backoff
            # cost CPU and left work idle (docs/benchmarks.md)
            max_ongoing_requests=max_pending,
            max_queued_requests=max_pending,
            graceful_shutdown_timeout_s=REPLICA_SHUTDOWN_S,
        )
        handle = serve.run(deployment.bind(judge), name=APP_NAME, route_prefix=None)

        async def ready() -> dict:
            status = serve.status().applications[APP_NAME].status
            if status != "RUNNING":
                raise RuntimeError(f"the judge application is {status}")
            return {"replicas": replicas, "workers_per_replica": workers}

        limits = replace(
            ServiceLimits(),
            max_body_bytes=int(args.max_body_mb * (1 << 20)),
            max_run_timeout_s=args.max_run_timeout,
        )
        settings = ServiceSettings(
            reward=args.reward,
            token=token,
            max_pending=max_pending,
            limits=limits,
            python_checkers=frozenset(args.python_checkers),
        )
        app = build_app(handle, settings, dataset, ready)
        config = uvicorn.Config(
            app,
            host=args.host,
            port=args.port,
            log_level="warning",
            timeout_graceful_shutdown=REQUESTS_SHUTDOWN_S,
            lifespan="off",
            # connections (idle keep-alives and stalled uploads included) past which uvicorn answers
            # its own bare 503 (no Retry-After, not JSON): room for max_pending requests in the replicas
            # and as many again arriving, and never so few that a small --max-pending meets it before
            # the front's own admission does (8 clients at once against --max-pending 2 did)
            limit_concurrency=max(4 * max_pending, MIN_CONNECTIONS),
        )
        server = _server_class()(config)
        announce = asyncio.create_task(_announce(server, args.host))
        await server.serve()  # returns after SIGTERM/SIGINT, once requests in flight are answered
        announce.cancel()
        return 0 if server.started else 1
    finally:
        try:  # bounded: under a process-group kill Ray's own processes may already be gone
            await asyncio.wait_for(asyncio.to_thread(serve.shutdown), SHUTDOWN_TIMEOUT_S)
        except TimeoutError:
            logging.getLogger(__name__).warning("Serve did not shut down in %d s", SHUTDOWN_TIMEOUT_S)
        finally:
            ray.shutdown()
            sweep_run_dirs(work_dir)  # the folders of replicas that did not close in time


def _raise_open_files_limit() -> None:
    """Each client holds a socket: the soft limit raised to the hard one (at most 65,536)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 1 << 16 if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def _server_class():
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's, except that a SIGTERM or SIGINT only stops serving: uvicorn would raise the
        signal again once stopped, killing the process before the replicas and Ray are shut down."""

        @contextlib.contextmanager
        def capture_signals(self):
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    return Server


async def _announce(server, host: str) -> None:
    while not server.started:
        await asyncio.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    print(f"listening on http://{host}:{port}", flush=True)
