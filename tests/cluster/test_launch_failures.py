"""How a multi-host launch ends when something goes wrong: a host never shows up, the job is stopped
with SIGTERM (as SageMaker stops it), the head dies. Every case ends on every host with a status and
a message, never a hang, and leaves no process behind."""

import os
import signal
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # minutes of Ray start-ups: the slow tier (`-m slow`)

TIMEOUTS = ["--join-timeout=120"]

# An entrypoint that reports it started, and on SIGTERM writes which signal it got and exits 5.
SLEEPER = """
import pathlib, signal, sys, time
marker = pathlib.Path(sys.argv[1])
def bye(signum, frame):
    marker.with_name("sigterm").write_text(str(signum))
    sys.exit(5)
signal.signal(signal.SIGTERM, bye)
marker.write_text("started")
time.sleep(600)
"""


def start_sleeper_cluster(netns_cluster, tmp_path: Path, *extra: str):
    cluster = netns_cluster(2)
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    started = tmp_path / "started"
    launched = [
        cluster.launch(
            h,
            f"--sagemaker-config={cluster.sagemaker_config(h)}",
            *TIMEOUTS,
            *extra,
            entrypoint=[sys.executable, str(script), str(started)],
        )
        for h in cluster.hosts
    ]
    deadline = time.monotonic() + 180
    # the entrypoint runs once the head sees every node, but a loaded machine can fail a worker's `ray
    # start` after its raylet registered (the launcher then retries the join): wait for the workers' own
    # word too, so the failures injected next hit a cluster that is really up
    while not started.exists() or not all("joined the head" in r.output() for r in launched[1:]):
        assert time.monotonic() < deadline, {r.host.name: r.output()[-2000:] for r in launched}
        time.sleep(0.5)
    return cluster, launched


def test_a_host_that_never_joins_fails_every_host_with_the_list(netns_cluster):
    cluster = netns_cluster(3)
    # algo-3 is in everyone's resourceconfig.json but never starts
    launched = [
        cluster.launch(
            h, f"--sagemaker-config={cluster.sagemaker_config(h)}", *TIMEOUTS, "--nodes-timeout=20"
        )
        for h in cluster.hosts[:2]
    ]
    codes = cluster.wait_all(launched, 240)
    logs = {r.host.name: r.output() for r in launched}
    assert codes == {"algo-1": 2, "algo-2": 2}, logs
    missing = "after 20 s the cluster is still incomplete: algo-3 (group homogeneousCluster) has not joined"
    assert f"codefu launch: error: {missing}" in logs["algo-1"]
    assert f"released by the head: launch failed on the head: {missing}; exiting 2" in logs["algo-2"]
    assert cluster.wait_empty() == {}


def test_sigterm_stops_the_entrypoint_and_the_cluster(netns_cluster, tmp_path):
    cluster, launched = start_sleeper_cluster(netns_cluster, tmp_path)
    for run in launched:  # SageMaker signals every host at once
        run.proc.send_signal(signal.SIGTERM)
    codes = cluster.wait_all(launched, 120)
    logs = {r.host.name: r.output() for r in launched}
    assert (tmp_path / "sigterm").read_text() == str(int(signal.SIGTERM))  # forwarded to the entrypoint
    assert codes == {"algo-1": 5, "algo-2": 128 + signal.SIGTERM}, logs
    assert "the entrypoint ended with status 5" in logs["algo-1"]
    assert cluster.wait_empty() == {}


def test_a_worker_gives_up_on_a_dead_head(netns_cluster, tmp_path):
    cluster, launched = start_sleeper_cluster(netns_cluster, tmp_path, "--head-lost-timeout=10")
    head, worker = cluster.hosts
    for pid in cluster.pids(head):  # the head machine dies: launcher, Ray, entrypoint
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    codes = cluster.wait_all(launched[1:], 120)
    log = launched[1].output()
    assert codes == {"algo-2": 3}, log
    assert "lost the head 10.231.0.1:6379: no answer for 10 s and no outcome published; exiting 3" in log
    assert cluster.wait_empty() == {}
