"""Several hosts on one machine: each host is a network namespace with its own address on a bridge, and
its own host names (/etc/netns/<ns>/hosts, which `ip netns exec` mounts over /etc/hosts), so Ray talks
across real interfaces as it would between instances. Needs root and iproute2 (CI has both).

Every process a test starts lives in one of the namespaces, so `ip netns pids` finds all of them: the
tests assert that nothing is left once the launchers exit, and teardown kills leftovers by pid before
deleting the namespaces, the bridge and the hosts files.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SUBNET = "10.231.0"  # private to the namespaces: nothing outside them routes to it


@dataclass
class Host:
    name: str  # algo-N, as SageMaker names hosts
    ns: str
    ip: str
    temp_dir: str  # Ray's session folder: short (unix socket paths) and distinct per host


@dataclass
class Launched:
    host: Host
    proc: subprocess.Popen
    log: Path

    def wait(self, timeout_s: float) -> int:
        return self.proc.wait(timeout=timeout_s)

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@dataclass
class Cluster:
    tag: str
    hosts: list[Host]
    workdir: Path
    env: dict[str, str]
    launched: list[Launched] = field(default_factory=list)

    def sagemaker_config(self, host: Host, groups: dict[str, list[str]] | None = None) -> Path:
        """This host's resourceconfig.json; `groups` (name -> hosts) makes a heterogeneous cluster."""
        import json

        names = [h.name for h in self.hosts]
        groups = groups or {"homogeneousCluster": names}
        current = next(g for g, members in groups.items() if host.name in members)
        config = {
            "current_host": host.name,
            "current_instance_type": "ml.c5.xlarge",
            "current_group_name": current,
            "hosts": names,
            "instance_groups": [
                {"instance_group_name": g, "instance_type": "ml.c5.xlarge", "hosts": members}
                for g, members in groups.items()
            ],
            "network_interface_name": "eth0",
        }
        path = self.workdir / host.name / "resourceconfig.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(config))
        return path

    def run(self, host: Host, argv: list[str], log_name: str, env: dict[str, str] | None = None) -> Launched:
        """Start `argv` inside the host's namespace, output to a log file."""
        log = self.workdir / f"{log_name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                ["ip", "netns", "exec", host.ns, *argv],  # execs argv: proc.pid is argv's own pid
                cwd=REPO,
                env={**self.env, **(env or {})},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        launched = Launched(host, proc, log)
        self.launched.append(launched)
        return launched

    def launch(self, host: Host, *args: str, entrypoint: list[str] | None = None) -> Launched:
        """`codefu launch` on `host` with small Ray nodes (1 CPU, 100 MB object store)."""
        argv = [
            sys.executable,
            "-m",
            "codefu.cli",
            "launch",
            "--num-cpus=1",
            "--object-store-memory=100000000",
        ]
        argv += [f"--temp-dir={host.temp_dir}", *args]
        if entrypoint:
            argv += ["--", *entrypoint]
        return self.run(host, argv, f"launch-{host.name}")

    def wait_all(self, launched: list[Launched], timeout_s: float) -> dict[str, int]:
        """Exit status by host; a launcher still running at the deadline fails the test (it hung)."""
        deadline = time.monotonic() + timeout_s
        codes = {}
        for run in launched:
            try:
                codes[run.host.name] = run.wait(max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                logs = "\n\n".join(f"== {r.host.name}\n{r.output()[-3000:]}" for r in launched)
                raise AssertionError(f"{run.host.name}'s launcher hung past {timeout_s} s\n{logs}") from None
        return codes

    def pids(self, host: Host) -> list[int]:
        return netns_pids(host.ns)

    def wait_empty(self, timeout_s: float = 30.0) -> dict[str, list[str]]:
        """Wait for every namespace to be empty; what is still running, by host, if not."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = {h.name: [_cmdline(p) for p in self.pids(h)] for h in self.hosts}
            left = {name: procs for name, procs in left.items() if procs}
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.5)


def netns_pids(ns: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:160]
    except OSError:
        return f"pid {pid} (gone)"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@pytest.fixture
def netns_cluster(tmp_path):
    """A factory: `netns_cluster(3)` gives a Cluster of hosts algo-1..algo-3 (algo-1 at .1, ...)."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 (ip netns) to build hosts out of network namespaces")
    tag = "cf" + secrets.token_hex(2)
    bridge = f"{tag}br"
    etc_netns = Path("/etc/netns")
    made_etc_netns = not etc_netns.exists()
    clusters: list[Cluster] = []
    created: list[Host] = []
    bridge_up = False

    def make(n: int) -> Cluster:
        nonlocal bridge_up
        _ip("link", "add", bridge, "type", "bridge")
        bridge_up = True
        _ip("link", "set", bridge, "up")
        hosts = [
            Host(f"algo-{i}", f"{tag}-{i}", f"{SUBNET}.{i}", f"/tmp/cfl-{tag}-{i}") for i in range(1, n + 1)
        ]
        hosts_file = "".join(f"{h.ip} {h.name}\n" for h in hosts)
        for i, h in enumerate(hosts, 1):
            _ip("netns", "add", h.ns)
            created.append(h)
            _ip("link", "add", f"{tag}v{i}", "type", "veth", "peer", "name", "eth0", "netns", h.ns)
            _ip("link", "set", f"{tag}v{i}", "master", bridge, "up")
            _ip("-n", h.ns, "link", "set", "lo", "up")
            _ip("-n", h.ns, "addr", "add", f"{h.ip}/24", "dev", "eth0")
            _ip("-n", h.ns, "link", "set", "eth0", "up")
            (etc_netns / h.ns).mkdir(parents=True, exist_ok=True)
            (etc_netns / h.ns / "hosts").write_text(f"127.0.0.1 localhost\n{hosts_file}")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "SM_", "SLURM_", "CODEFU_"))}
        # token authentication across the namespaces, as a real multi-host cluster should run
        env |= {"RAY_AUTH_TOKEN": secrets.token_hex(32), "PYTHONUNBUFFERED": "1"}
        cluster = Cluster(tag, hosts, tmp_path, env)
        clusters.append(cluster)
        return cluster

    try:
        yield make
    finally:
        for cluster in clusters:
            for launched in cluster.launched:
                if launched.proc.poll() is None:
                    _kill_group(launched.proc.pid)
                    launched.proc.wait()
        for h in created:
            deadline = time.monotonic() + 10
            while (pids := netns_pids(h.ns)) and time.monotonic() < deadline:
                for pid in pids:
                    _kill(pid)
                time.sleep(0.2)
            subprocess.run(["ip", "netns", "del", h.ns], capture_output=True)
            shutil.rmtree(etc_netns / h.ns, ignore_errors=True)
            shutil.rmtree(h.temp_dir, ignore_errors=True)
        if bridge_up:
            subprocess.run(["ip", "link", "del", bridge], capture_output=True)
        if made_etc_netns:
            try:
                etc_netns.rmdir()
            except OSError:
                pass  # another user's namespaces live there now


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
