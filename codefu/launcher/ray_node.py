"""This host's Ray: the `ray start` command line and environment (pure), and the process running them.

`ray start --block` stays in the foreground and owns every Ray process of its node, so SIGTERM to it
stops exactly this node's Ray. `ray stop` is never used: it kills every Ray process on the machine,
other users' clusters and other network namespaces' included.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path

from codefu.launcher.config import LaunchConfig
from codefu.launcher.plan import ClusterPlan
from codefu.node_labels import GROUP_LABEL, HOST_LABEL, group_resource


def ray_start_argv(plan: ClusterPlan, cfg: LaunchConfig, node_ip: str | None, head_address: str) -> list[str]:
    """`head_address` (host:port) is where workers join; the head ignores it."""
    node = plan.this_node
    argv = [_ray_executable(), "start", "--block", "--disable-usage-stats"]
    if plan.role == "head":
        argv += [
            "--head",
            f"--port={cfg.port}",
            "--include-dashboard=true",
            f"--dashboard-host={cfg.dashboard_host}",
            f"--dashboard-port={cfg.dashboard_port}",
        ]
    else:
        argv.append(f"--address={head_address}")
    if node_ip:
        argv.append(f"--node-ip-address={node_ip}")
    argv.append(f"--metrics-export-port={cfg.metrics_export_port}")
    if node.cpus is not None:
        argv.append(f"--num-cpus={node.cpus}")
    if node.gpus is not None:
        argv.append(f"--num-gpus={node.gpus}")
    if cfg.object_store_memory:
        argv.append(f"--object-store-memory={cfg.object_store_memory}")
    if cfg.temp_dir:
        argv.append(f"--temp-dir={cfg.temp_dir}")
    argv.append(f"--labels={HOST_LABEL}={node.host},{GROUP_LABEL}={node.group}")
    argv.append(f"--resources={json.dumps({group_resource(node.group): 1})}")
    return argv + list(cfg.ray_args)


def ray_env(cfg: LaunchConfig, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment of `ray start` and of the entrypoint (which must authenticate the same way)."""
    env = dict(environ)
    # Decided from what every host is given, never from a token file one host may have and another
    # not (Ray would turn authentication on for the head only, and workers could not join).
    env["RAY_AUTH_MODE"] = auth_mode(cfg.auth, environ)
    # Ray drains a node for 30 s on SIGTERM (for Serve); at the end of a job that only delays exit.
    env.setdefault("RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S", "0")
    # Ray's workers default to nice 15; the training job is what these hosts are for
    env.setdefault("RAY_worker_niceness", "0")
    if cfg.prometheus_host:
        env["RAY_PROMETHEUS_HOST"] = cfg.prometheus_host
    if cfg.grafana_host:
        env["RAY_GRAFANA_HOST"] = cfg.grafana_host
    return env


def auth_mode(choice: str, environ: Mapping[str, str]) -> str:
    if choice != "auto":
        return choice
    if environ.get("RAY_AUTH_MODE"):
        return environ["RAY_AUTH_MODE"]
    return "token" if environ.get("RAY_AUTH_TOKEN") or environ.get("RAY_AUTH_TOKEN_PATH") else "disabled"


def log_path(cfg: LaunchConfig, host: str) -> Path:
    return Path(cfg.temp_dir or tempfile.gettempdir()) / f"codefu-launch-{host}.log"


def resolve(host: str) -> str | None:
    """The IPv4 address of `host`, or None if it does not resolve (yet: cluster DNS may lag)."""
    try:
        return socket.gethostbyname(host)
    except OSError:
        return None


def ip_towards(peer_ip: str) -> str:
    """This host's address on the route to `peer_ip` (a UDP connect sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((peer_ip, 9))
        return s.getsockname()[0]


def port_open(ip: str, port: int, timeout_s: float = 2.0) -> bool:
    try:
        with socket.create_connection((ip, port), timeout=timeout_s):
            return True
    except OSError:
        return False


class RayNode:
    """`ray start --block` as a child in its own session; its output goes to a log file."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path):
        self.argv, self.env, self.log = argv, env, log
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                self.argv,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )

    def returncode(self) -> int | None:
        """None while Ray runs on this host."""
        return None if self.proc is None else self.proc.poll()

    def tail(self, lines: int = 15) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return ""
        return "\n".join("    " + line for line in text)

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM (Ray stops its processes), then SIGKILL to whatever of the session is left."""
        if self.proc is None:
            return
        pid = self.proc.pid
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        # Wait without reaping: while the leader is a zombie its id still names the process group,
        # so the SIGKILL below cannot reach anyone else's processes.
        while not _exited(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        self.proc.wait()


def _exited(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


# Resolved now, not in the forked child: the launcher has threads (the GCS client's), and a child of a
# threaded process must not take locks such as the dynamic loader's before it execs.
_prctl = getattr(ctypes.CDLL(None), "prctl", None)
PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In the child before exec: get SIGTERM if the launcher dies, so nothing outlives it."""
    if _prctl is not None:
        _prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))


def _ray_executable() -> str:
    """The `ray` of the Python running the launcher (containers often have several Pythons)."""
    beside = Path(sys.executable).with_name("ray")
    return str(beside) if beside.exists() else "ray"
