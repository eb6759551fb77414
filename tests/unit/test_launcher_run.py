"""The bring-up's pieces that need no cluster: `ray start` command lines and environment, the outcome
record, running and stopping the entrypoint and a node's process group, `codefu launch --dry-run`."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from codefu.cli import main
from codefu.launcher.config import LaunchConfig
from codefu.launcher.detect import from_hosts
from codefu.launcher.plan import NodeSpec, NodeView
from codefu.launcher.protocol import Outcome, describe, exit_status
from codefu.launcher.ray_node import RayNode, ray_env, ray_start_argv
from codefu.launcher.run import Signals, departed, run_entrypoint

NODES = [NodeSpec("a", "train", 8, 2), NodeSpec("b", "judge", None, None)]


def test_head_and_worker_command_lines():
    cfg = LaunchConfig(
        port=7000, object_store_memory=10**8, temp_dir="/tmp/x", ray_args=["--min-worker-port=2"]
    )
    head = ray_start_argv(from_hosts(NODES, "h", 0, []), cfg, "10.0.0.1", "10.0.0.1:7000")
    assert head[1:4] == ["start", "--block", "--disable-usage-stats"]
    for arg in (
        "--head",
        "--port=7000",
        "--include-dashboard=true",
        "--dashboard-port=8265",
        "--dashboard-host=0.0.0.0",
        "--metrics-export-port=8081",
        "--node-ip-address=10.0.0.1",
        "--num-cpus=8",
        "--num-gpus=2",
        "--object-store-memory=100000000",
        "--temp-dir=/tmp/x",
        "--labels=codefu-host=a,codefu-group=train",
        '--resources={"codefu-group-train": 1}',
    ):
        assert arg in head
    assert head[-1] == "--min-worker-port=2"
    worker = ray_start_argv(from_hosts(NODES, "h", 1, []), cfg, "10.0.0.2", "10.0.0.1:7000")
    assert "--address=10.0.0.1:7000" in worker and "--head" not in worker
    assert not [a for a in worker if a.startswith(("--dashboard", "--num-cpus", "--num-gpus"))]
    assert "--labels=codefu-host=b,codefu-group=judge" in worker


def test_environment_decides_authentication_the_same_on_every_host():
    cfg = LaunchConfig()
    assert ray_env(cfg, {})["RAY_AUTH_MODE"] == "disabled"
    assert ray_env(cfg, {"RAY_AUTH_TOKEN": "t"})["RAY_AUTH_MODE"] == "token"
    assert ray_env(cfg, {"RAY_AUTH_TOKEN_PATH": "/t"})["RAY_AUTH_MODE"] == "token"
    assert ray_env(cfg, {"RAY_AUTH_TOKEN": "t", "RAY_AUTH_MODE": "disabled"})["RAY_AUTH_MODE"] == "disabled"
    assert ray_env(LaunchConfig(auth="token"), {})["RAY_AUTH_MODE"] == "token"
    env = ray_env(LaunchConfig(prometheus_host="http://prom:9090", grafana_host="http://g:3000"), {"A": "1"})
    assert (env["RAY_PROMETHEUS_HOST"], env["RAY_GRAFANA_HOST"], env["A"]) == (
        "http://prom:9090",
        "http://g:3000",
        "1",
    )
    assert env["RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"] == "0"
    kept = ray_env(cfg, {"RAY_PROMETHEUS_HOST": "http://p", "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "5"})
    assert (kept["RAY_PROMETHEUS_HOST"], kept["RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"]) == ("http://p", "5")


def test_outcome_record_and_exit_statuses():
    outcome = Outcome(7, "the entrypoint ended with status 7")
    assert Outcome.decode(outcome.encode()) == outcome
    assert exit_status(-signal.SIGTERM) == 143 and exit_status(3) == 3
    assert describe(143) == "status 143 (SIGTERM)" and describe(1) == "status 1"


def test_departed_hosts():
    plan = from_hosts(NODES, "h", 0, [])
    view = [
        NodeView("1", "ip", False, {"codefu-host": "b"}, {}),
        NodeView("2", "ip", False, {"codefu-host": "a"}, {}),
        NodeView("3", "ip", True, {"codefu-host": "a"}, {}),  # a restarted: not gone
        NodeView("4", "ip", False, {"codefu-host": "stranger"}, {}),
    ]
    assert departed(plan, view) == {"b"}


def entrypoint(command: list[str], signal_first: int | None = None, grace: float = 30.0) -> int:
    signals = Signals()
    if signal_first is not None:
        signals._handle(signal_first, None)  # as if SIGTERM had arrived while it ran
    return run_entrypoint(
        command, dict(os.environ), LaunchConfig(stop_grace_s=grace, poll_s=0.2), signals, lambda: None
    )


def test_entrypoint_status_and_signal_forwarding(tmp_path):
    assert entrypoint(["sh", "-c", "exit 3"]) == 3
    marker = tmp_path / "got"
    trap = f"trap 'echo TERM > {marker}; exit 5' TERM; while :; do sleep 0.1; done"
    assert entrypoint(["sh", "-c", trap], signal.SIGTERM) == 5
    assert marker.read_text().strip() == "TERM"
    # a command that ignores SIGTERM is killed once the grace period is over
    assert entrypoint(["sh", "-c", "trap '' TERM; while :; do sleep 0.1; done"], signal.SIGTERM, 0.5) == 137


def test_entrypoint_that_cannot_start_is_a_clear_error():
    from codefu.errors import CodefuError

    with pytest.raises(CodefuError, match="cannot start the entrypoint 'no-such-program-xyz'"):
        entrypoint(["no-such-program-xyz"])


def test_stopping_a_node_ends_its_whole_process_group(tmp_path):
    pids = tmp_path / "pids"
    # a stand-in for `ray start --block`: it ignores SIGTERM and leaves a child behind
    script = f"trap '' TERM; sleep 60 & echo $$ $! > {pids}; wait"
    node = RayNode(["sh", "-c", script], dict(os.environ), tmp_path / "node.log")
    node.start()
    deadline = time.monotonic() + 10
    while not (pids.exists() and len(pids.read_text().split()) == 2) and time.monotonic() < deadline:
        time.sleep(0.05)
    shell, child = map(int, pids.read_text().split())
    assert node.returncode() is None
    node.stop(timeout_s=0.5)
    assert node.returncode() == -signal.SIGKILL
    # SIGKILL is delivered asynchronously: a killed process may still show as running for a moment
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in (shell, child)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [pid for pid in (shell, child) if alive(pid)] == []


def alive(pid: int) -> bool:
    """Running or sleeping: neither gone nor a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_dry_run_prints_the_plan(tmp_path, capsys, monkeypatch):
    for var in [v for v in os.environ if v.startswith(("SM_", "SLURM_", "CODEFU_"))]:
        monkeypatch.delenv(var)
    config = tmp_path / "resourceconfig.json"
    config.write_text(json.dumps({"current_host": "algo-2", "hosts": ["algo-1", "algo-2", "algo-3"]}))
    code = main(
        ["launch", "--dry-run", f"--sagemaker-config={config}", "--num-gpus=0", "--", "codefu", "train"]
    )
    assert code == 0
    plan = json.loads(capsys.readouterr().out)
    assert (plan["role"], plan["head"], plan["num_nodes"], plan["source"]) == (
        "worker",
        "algo-1",
        3,
        "sagemaker",
    )
    assert plan["head_address"] == "algo-1:6379"
    assert "--address=algo-1:6379" in plan["ray_start"] and "--num-gpus=0" in plan["ray_start"]
    assert plan["entrypoint"] is None  # workers run nothing

    code = main(["launch", "--dry-run", "--env=hosts", "--hosts=a,b", "--rank=0", "--", "codefu", "train"])
    plan = json.loads(capsys.readouterr().out)
    assert (code, plan["role"], plan["entrypoint"]) == (0, "head", ["codefu", "train"])


def test_bad_environment_is_reported_by_the_cli(tmp_path, capsys):
    code = main(["launch", "--dry-run", "--env=sagemaker", f"--sagemaker-config={tmp_path / 'missing.json'}"])
    assert code == 2
    assert "codefu launch: error: " in capsys.readouterr().err


def test_signals_are_recorded_not_fatal():
    before = signal.getsignal(signal.SIGTERM)
    with Signals() as signals:
        os.kill(os.getpid(), signal.SIGTERM)
        assert signals.wait(5.0)
        assert signals.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) == before


def test_ray_start_process_is_the_one_stopped(tmp_path):
    # `ray stop` would find every Ray on the machine; the node only ever signals its own child.
    node = RayNode(["sleep", "30"], dict(os.environ), tmp_path / "log")
    bystander = subprocess.Popen(["sleep", "30"])
    try:
        node.start()
        node.stop()
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()
