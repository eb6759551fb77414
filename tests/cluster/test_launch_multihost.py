"""`codefu launch` across three hosts (network namespaces on a bridge), each with its own SageMaker
resourceconfig.json: Ray comes up across them, a judge job spreads over every host, every host exits
with the job's status, nothing is left running; and a host whose Ray dies mid-job does not sink it."""

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # minutes of Ray start-ups: the slow tier (`-m slow`)

JOB = str(Path(__file__).with_name("judge_job.py"))
TIMEOUTS = ["--join-timeout=180", "--nodes-timeout=180", "--head-lost-timeout=30"]


def test_three_hosts_run_a_judge_job_and_exit_with_its_status(netns_cluster, tmp_path):
    cluster = netns_cluster(3)
    out = tmp_path / "result.json"
    job = [sys.executable, JOB, "--out", str(out), "--problems", "9", "--exit-code", "7", "--group", "judge"]
    # a heterogeneous job: algo-1 in a "train" instance group, algo-2 and algo-3 in a "judge" group
    groups = {"train": ["algo-1"], "judge": ["algo-2", "algo-3"]}
    # workers first: they must wait for a head that is not up yet
    launched = [
        cluster.launch(
            h, f"--sagemaker-config={cluster.sagemaker_config(h, groups)}", *TIMEOUTS, entrypoint=job
        )
        for h in reversed(cluster.hosts)
    ]
    codes = cluster.wait_all(launched, 300)
    logs = {r.host.name: r.output() for r in launched}
    assert codes == {"algo-1": 7, "algo-2": 7, "algo-3": 7}, logs

    result = json.loads(out.read_text())
    ips = [h.ip for h in cluster.hosts]
    assert result["cluster_nodes"] == ips
    assert result["statuses"] == ["ACCEPTED"] * result["items"], result["messages"]
    compiles = result["compiles_by_node_at_end"]
    assert sorted(compiles) == ips
    assert all(n >= 1 for n in compiles.values()), compiles  # work landed on every host
    assert sum(compiles.values()) == result["items"]
    # work that asks for the judge group by label or by resource lands on judge hosts only
    judge_ips = {h.ip for h in cluster.hosts[1:]}
    for how in ("label", "resource"):
        assert result["placed_by_group"][how] and set(result["placed_by_group"][how]) <= judge_ips, result

    assert "all 3 node(s) registered" in logs["algo-1"]
    assert "the entrypoint ended with status 7" in logs["algo-1"]
    for worker in ("algo-2", "algo-3"):
        assert "joined the head at 10.231.0.1:6379" in logs[worker]
        assert "released by the head: the entrypoint ended with status 7; exiting 7" in logs[worker]
    assert cluster.wait_empty() == {}


def test_a_worker_whose_ray_dies_mid_job_does_not_sink_it(netns_cluster, tmp_path):
    cluster = netns_cluster(3)
    out, pause_dir = tmp_path / "result.json", tmp_path
    job = [sys.executable, JOB, "--out", str(out), "--problems", "12", "--pause-after", "3"]
    job += ["--pause-dir", str(pause_dir)]
    launched = [
        cluster.launch(h, f"--sagemaker-config={cluster.sagemaker_config(h)}", *TIMEOUTS, entrypoint=job)
        for h in cluster.hosts
    ]
    deadline = time.monotonic() + 240
    while not (pause_dir / "midway").exists():
        assert time.monotonic() < deadline, {r.host.name: r.output()[-2000:] for r in launched}
        assert all(r.proc.poll() is None for r in launched), {r.host.name: r.output() for r in launched}
        time.sleep(0.5)

    # algo-3's Ray dies hard (every process of the host but its launcher, judge actor included)
    victim = cluster.hosts[2]
    launcher_pid = launched[2].proc.pid
    killed = [pid for pid in cluster.pids(victim) if pid != launcher_pid]
    assert killed, "algo-3 runs no Ray processes to kill"
    for pid in killed:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    (pause_dir / "go").write_text("")

    codes = cluster.wait_all(launched, 300)
    logs = {r.host.name: r.output() for r in launched}
    assert codes == {"algo-1": 0, "algo-2": 0, "algo-3": 0}, logs
    result = json.loads(out.read_text())
    assert result["statuses"] == ["ACCEPTED"] * result["items"], result["messages"]
    assert result["judges_at_start"] == [h.ip for h in cluster.hosts]
    assert victim.ip not in result["compiles_by_node_at_end"]  # its work went to the other hosts
    assert "Ray on this host stopped" in logs["algo-3"]
    assert "released by the head: the entrypoint ended with status 0; exiting 0" in logs["algo-3"]
    assert cluster.wait_empty() == {}
