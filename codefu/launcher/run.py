"""Bring-up: the head and worker sides of `codefu launch`.

Head: start Ray -> wait until every planned node has registered -> run the entrypoint with RAY_ADDRESS
set, its output streaming to ours -> publish the outcome -> wait for the workers to read it -> stop Ray
-> exit with the entrypoint's status.

Worker: reach the head (bounded retries) -> start Ray joined to it -> wait for the outcome -> acknowledge
it -> stop Ray -> exit with the same status. A worker that loses the head exits EXIT_HEAD_LOST; one whose
own Ray dies keeps waiting for the outcome (the job may well finish without it).

SIGTERM or SIGINT (SageMaker stops a job with SIGTERM): the head forwards it to the entrypoint, kills it
after `stop_grace_s`, publishes its status and stops Ray; a worker stops its Ray and exits 128 + signal.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from contextlib import suppress

from codefu.errors import CodefuError
from codefu.launcher.config import LaunchConfig
from codefu.launcher.gcs import Gcs, GcsUnavailable
from codefu.launcher.plan import ClusterPlan, NodeView, missing_nodes
from codefu.launcher.protocol import (
    ACK_PREFIX,
    EXIT_HEAD_LOST,
    EXIT_LAUNCH_FAILED,
    OUTCOME_KEY,
    Outcome,
    ack_key,
    describe,
    exit_status,
)
from codefu.launcher.ray_node import (
    RayNode,
    die_with_parent,
    ip_towards,
    log_path,
    port_open,
    ray_env,
    ray_start_argv,
    resolve,
)

log = logging.getLogger("codefu.launcher")


class Stopped(Exception):
    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class Signals:
    """Records SIGTERM/SIGINT instead of dying on them, so every phase can shut down in order."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._event = threading.Event()
        self._previous: dict[int, object] = {}

    def __enter__(self) -> Signals:
        for s in (signal.SIGTERM, signal.SIGINT):
            self._previous[s] = signal.signal(s, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)

    def _handle(self, signum: int, frame) -> None:
        # No logging here: the handler may interrupt a log call holding the same stream.
        self.signum = signum
        self._event.set()

    def check(self) -> None:
        if self.signum is not None:
            raise Stopped(self.signum)

    def wait(self, seconds: float) -> bool:
        """Sleep until a signal arrives or `seconds` pass; True if a signal arrived."""
        return self._event.wait(seconds)

    def sleep(self, seconds: float) -> None:
        """Sleep, but raise Stopped as soon as a signal arrives."""
        self.wait(seconds)
        self.check()


def launch(plan: ClusterPlan, cfg: LaunchConfig, command: list[str]) -> int:
    # The launcher talks to the GCS itself, so it needs the same authentication settings as Ray.
    os.environ.update(ray_env(cfg, os.environ))
    with Signals() as signals:
        try:
            if plan.role == "head":
                return run_head(plan, cfg, command, signals)
            return run_worker(plan, cfg, signals)
        except Stopped as e:
            log.info("stopped by %s", signal.Signals(e.signum).name)
            return 128 + e.signum


# ---- head -----------------------------------------------------------------------------------------


def run_head(plan: ClusterPlan, cfg: LaunchConfig, command: list[str], signals: Signals) -> int:
    node_ip = cfg.node_ip or head_ip(plan)
    address = f"{node_ip}:{cfg.port}"
    env = dict(os.environ)
    node = RayNode(ray_start_argv(plan, cfg, node_ip, address), env, log_path(cfg, plan.this_host))
    log.info("head of %d node(s) at %s; Ray's output goes to %s", plan.num_nodes, address, node.log)
    node.start()
    gcs: Gcs | None = None
    outcome = Outcome(EXIT_LAUNCH_FAILED, "the head failed before the entrypoint ran")
    try:
        gcs = connect(node, address, plan.this_host, cfg.start_timeout_s, signals)
        wait_for_nodes(plan, gcs, node, cfg, signals)
        code = run_entrypoint(command, {**env, "RAY_ADDRESS": address}, cfg, signals, DepartureLog(plan, gcs))
        reason = f"the entrypoint ended with {describe(code)}" if command else "the cluster was stopped"
        outcome = Outcome(code, reason)
        log.info("%s", outcome.reason)
        return code
    except Stopped as e:
        outcome = Outcome(128 + e.signum, f"the head was stopped by {signal.Signals(e.signum).name}")
        raise
    except CodefuError as e:
        outcome = Outcome(EXIT_LAUNCH_FAILED, f"launch failed on the head: {e}")
        raise
    finally:
        if gcs is not None and plan.workers:
            release_workers(plan, gcs, outcome, cfg.release_timeout_s)
        node.stop()


def head_ip(plan: ClusterPlan) -> str:
    ip = resolve(plan.head)
    if ip is None and not plan.workers:
        return "127.0.0.1"  # a cluster of one machine needs no name
    if ip is None:
        raise CodefuError(f"the head's own name {plan.head!r} does not resolve; pass --node-ip")
    if ip.startswith("127.") and plan.workers:
        # /etc/hosts often maps the machine's own name to loopback; use the interface facing a worker.
        peer = resolve(plan.workers[0])
        if peer is None:
            raise CodefuError(f"{plan.head!r} resolves to {ip}, which workers cannot reach; pass --node-ip")
        ip = ip_towards(peer)
    return ip


def connect(node: RayNode, address: str, host: str, timeout_s: float, signals: Signals) -> Gcs:
    """Wait until this host's `ray start` has registered its node with the GCS at `address`."""
    deadline = time.monotonic() + timeout_s
    ip, port = address.rsplit(":", 1)
    gcs, problem = None, "its port is closed"
    while True:
        if node.returncode() is not None:
            raise CodefuError(f"`ray start` on {host} exited with status {node.returncode()}:\n{node.tail()}")
        try:
            if gcs is None and port_open(ip, int(port)):
                gcs = Gcs(address)
            if gcs is not None:
                problem = "this node is not in its node table"
                if any(n.alive and n.host == host for n in gcs.nodes()):
                    return gcs
        except GcsUnavailable as e:
            problem = str(e)
        if time.monotonic() > deadline:
            raise CodefuError(
                f"Ray on {host} did not register with the GCS at {address} within {timeout_s:g} s "
                f"({problem}). Last lines of {node.log}:\n{node.tail()}"
            )
        signals.sleep(0.5)


def wait_for_nodes(plan: ClusterPlan, gcs: Gcs, node: RayNode, cfg: LaunchConfig, signals: Signals) -> None:
    deadline = time.monotonic() + cfg.nodes_timeout_s
    shown: list[str] = []
    while True:
        if node.returncode() is not None:
            raise CodefuError(f"Ray on the head exited with status {node.returncode()}:\n{node.tail()}")
        try:
            gaps = missing_nodes(plan, gcs.nodes())
        except GcsUnavailable as e:
            gaps = [f"the head's own GCS does not answer ({e})"]
        if not gaps:
            log.info("all %d node(s) registered", plan.num_nodes)
            return
        if gaps != shown:
            log.info("waiting for: %s", "; ".join(gaps))
            shown = gaps
        if time.monotonic() > deadline:
            raise CodefuError(
                f"after {cfg.nodes_timeout_s:g} s the cluster is still incomplete: {'; '.join(gaps)}"
            )
        signals.sleep(cfg.poll_s)


def run_entrypoint(
    command: list[str], env: dict[str, str], cfg: LaunchConfig, signals: Signals, tick: Callable[[], None]
) -> int:
    """Run `command` in its own process group, output inherited; signals are forwarded, not raised."""
    if not command:
        log.info("cluster up, no entrypoint: serving until SIGTERM or SIGINT")
        while not signals.wait(cfg.poll_s):
            tick()
        log.info("received %s: stopping the cluster", signal.Signals(signals.signum).name)
        return 0
    log.info("running the entrypoint: %s", " ".join(command))
    try:
        proc = subprocess.Popen(command, env=env, start_new_session=True, preexec_fn=die_with_parent)
    except OSError as e:
        raise CodefuError(f"cannot start the entrypoint {command[0]!r}: {e.strerror}") from None
    forwarded_at: float | None = None
    while True:
        try:
            return exit_status(proc.wait(timeout=cfg.poll_s))
        except subprocess.TimeoutExpired:
            pass
        if signals.signum is not None and forwarded_at is None:
            log.info("forwarding %s to the entrypoint", signal.Signals(signals.signum).name)
            _signal_group(proc.pid, signals.signum)
            forwarded_at = time.monotonic()
        elif forwarded_at is not None and time.monotonic() - forwarded_at > cfg.stop_grace_s:
            log.info("the entrypoint outlived %g s of grace: killing it", cfg.stop_grace_s)
            _signal_group(proc.pid, signal.SIGKILL)
            forwarded_at = float("inf")
        tick()


class DepartureLog:
    """Called while the entrypoint runs: logs planned hosts that leave the cluster (the log is where a
    user looks first when a job slows down or fails)."""

    def __init__(self, plan: ClusterPlan, gcs: Gcs, every_s: float = 5.0):
        self.plan, self.gcs, self.every_s = plan, gcs, every_s
        self.last = 0.0
        self.gone: set[str] = set()

    def __call__(self) -> None:
        if time.monotonic() - self.last < self.every_s:
            return
        self.last = time.monotonic()
        try:
            gone = departed(self.plan, self.gcs.nodes()) - self.gone
        except GcsUnavailable:
            return
        for host in sorted(gone):
            log.warning("%s left the cluster; Ray reschedules what it can on the others", host)
        self.gone |= gone


def departed(plan: ClusterPlan, nodes: list[NodeView]) -> set[str]:
    alive = {n.host for n in nodes if n.alive}
    return {n.host for n in nodes if not n.alive and n.host in {s.host for s in plan.nodes}} - alive


def release_workers(plan: ClusterPlan, gcs: Gcs, outcome: Outcome, timeout_s: float) -> None:
    """Publish the outcome, then wait (bounded) until every worker that joined has read it."""
    try:
        gcs.put(OUTCOME_KEY, outcome.encode())
        deadline = time.monotonic() + timeout_s
        # Hosts that never joined have no launcher polling this GCS (dead nodes' launchers may well be).
        waiting = {n.host for n in gcs.nodes()} & set(plan.workers)
        while waiting and time.monotonic() < deadline:
            waiting -= {k.removeprefix(ACK_PREFIX) for k in gcs.keys(ACK_PREFIX)}
            time.sleep(0.2)
    except GcsUnavailable as e:
        log.warning("could not tell the workers the outcome (%s); they will give up on the head", e)
        return
    if waiting:
        log.warning("released the cluster without hearing back from %s", ", ".join(sorted(waiting)))


# ---- worker ---------------------------------------------------------------------------------------


def run_worker(plan: ClusterPlan, cfg: LaunchConfig, signals: Signals) -> int:
    deadline = time.monotonic() + cfg.join_timeout_s
    address, gcs = reach_head(plan, cfg, deadline, signals)
    if (early := read_outcome(gcs)) is not None:
        return finish(plan, gcs, early)
    node_ip = cfg.node_ip or ip_towards(address.rsplit(":", 1)[0])
    node = RayNode(
        ray_start_argv(plan, cfg, node_ip, address), dict(os.environ), log_path(cfg, plan.this_host)
    )
    try:
        join(plan, node, address, deadline, signals)
        log.info("joined the head at %s as %s", address, node_ip)
        return wait_for_outcome(plan, gcs, node, cfg, signals)
    except Stopped:
        with suppress(GcsUnavailable):  # the head need not wait for a worker that is leaving
            gcs.put(ack_key(plan.this_host), b"stopped")
        raise
    finally:
        node.stop()


def reach_head(plan: ClusterPlan, cfg: LaunchConfig, deadline: float, signals: Signals) -> tuple[str, Gcs]:
    """Retry until the head's name resolves and its GCS answers, or fail at the deadline."""
    log.info("worker %s: waiting for the head %s:%d", plan.this_host, plan.head, cfg.port)
    problem = "its name does not resolve"
    while time.monotonic() < deadline:
        ip = resolve(plan.head)
        if ip is not None:
            problem = f"nothing answers at {ip}:{cfg.port}"
            if port_open(ip, cfg.port):
                try:
                    return f"{ip}:{cfg.port}", Gcs(f"{ip}:{cfg.port}")
                except GcsUnavailable as e:
                    problem = str(e)
        signals.sleep(2.0)
    raise CodefuError(
        f"could not reach the head {plan.head} within {cfg.join_timeout_s:g} s ({problem}): is it up, and "
        f"is port {cfg.port} open between the hosts?"
    )


def join(plan: ClusterPlan, node: RayNode, address: str, deadline: float, signals: Signals) -> None:
    """Start Ray joined to the head; a `ray start` that fails (the head still coming up) is retried."""
    attempt = 0
    while True:
        attempt += 1
        node.start()
        try:
            connect(node, address, plan.this_host, max(1.0, deadline - time.monotonic()), signals)
            return
        except CodefuError as e:
            node.stop()
            if time.monotonic() > deadline:
                raise CodefuError(f"could not join the head after {attempt} attempt(s): {e}") from None
            log.info("joining failed (attempt %d), retrying: %s", attempt, str(e).splitlines()[0])
            signals.sleep(3.0)


def wait_for_outcome(plan: ClusterPlan, gcs: Gcs, node: RayNode, cfg: LaunchConfig, signals: Signals) -> int:
    lost_since: float | None = None
    ray_gone_reported = False
    while True:
        signals.check()
        try:
            outcome = read_outcome(gcs)
            lost_since = None
        except GcsUnavailable as e:
            now = time.monotonic()
            if lost_since is None:
                log.warning("the head does not answer (%s); waiting up to %g s", e, cfg.head_lost_timeout_s)
                lost_since = now
            elif now - lost_since > cfg.head_lost_timeout_s:
                log.error(
                    "lost the head %s: no answer for %g s and no outcome published; exiting %d",
                    gcs.address,
                    cfg.head_lost_timeout_s,
                    EXIT_HEAD_LOST,
                )
                return EXIT_HEAD_LOST
            outcome = None
        if outcome is not None:
            return finish(plan, gcs, outcome)
        if node.returncode() is not None and not ray_gone_reported:
            log.warning(
                "Ray on this host stopped (status %s); it takes no more work, waiting for the head's "
                "outcome. Last lines of %s:\n%s",
                node.returncode(),
                node.log,
                node.tail(),
            )
            ray_gone_reported = True
        signals.sleep(cfg.poll_s)


def read_outcome(gcs: Gcs) -> Outcome | None:
    data = gcs.get(OUTCOME_KEY)
    return None if data is None else Outcome.decode(data)


def finish(plan: ClusterPlan, gcs: Gcs, outcome: Outcome) -> int:
    with suppress(GcsUnavailable):  # else the head stops anyway once its release timeout passes
        gcs.put(ack_key(plan.this_host), b"done")
    log.info("released by the head: %s; exiting %d", outcome.reason, outcome.exit_code)
    return outcome.exit_code


def _signal_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except ProcessLookupError:
        pass
