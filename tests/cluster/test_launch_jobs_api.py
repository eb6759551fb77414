"""An existing cluster: `codefu launch` with no entrypoint keeps Ray up; jobs go in through Ray's job API
(`ray job submit`, as docs/launcher.md shows); SIGTERM takes the cluster down cleanly."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from codefu.data.starter import load_starter_problems, starter_path

pytestmark = pytest.mark.slow  # minutes of Ray start-ups: the slow tier (`-m slow`)

RAY = str(Path(sys.executable).with_name("ray"))


def test_jobs_are_submitted_to_a_running_cluster(netns_cluster, tmp_path):
    cluster = netns_cluster(1)
    head = cluster.hosts[0]
    launcher = cluster.launch(head, "--env=local", f"--node-ip={head.ip}")
    deadline = time.monotonic() + 180
    while "cluster up, no entrypoint" not in launcher.output():
        assert launcher.proc.poll() is None and time.monotonic() < deadline, launcher.output()
        time.sleep(0.5)

    problems = load_starter_problems()[:3]
    responses = tmp_path / "responses.jsonl"
    rows = [
        {"name": p.name, "response": f"```python\n{p.extra['solutions']['python']}\n```"} for p in problems
    ]
    wrong = problems[0].extra["wrong_solutions"][0]  # C++ with a 32-bit overflow: a wrong answer
    rows.append({"name": problems[0].name, "response": f"```{wrong['language']}\n{wrong['source']}\n```"})
    responses.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "verdicts.jsonl"
    judge = [sys.executable, "-m", "codefu.cli", "judge", "--dataset", str(starter_path())]
    judge += ["--responses", str(responses), "--out", str(out), "--ray"]
    submit = [
        RAY,
        "job",
        "submit",
        f"--address=http://{head.ip}:8265",
        "--submission-id=judge-1",
        "--",
        *judge,
    ]
    # the client authenticates like every Ray process of the cluster: same token, token mode
    job = cluster.run(head, submit, "submit", env={"RAY_AUTH_MODE": "token"})
    assert job.wait(300) == 0, job.output()
    assert "succeeded" in job.output()
    assert [json.loads(line)["status"] for line in out.read_text().splitlines()] == [
        "ACCEPTED",
        "ACCEPTED",
        "ACCEPTED",
        "WRONG_ANSWER",
    ]

    launcher.proc.send_signal(signal.SIGTERM)
    try:
        assert launcher.wait(60) == 0, launcher.output()
    except subprocess.TimeoutExpired:
        raise AssertionError(f"SIGTERM did not stop the launcher\n{launcher.output()}") from None
    assert "received SIGTERM: stopping the cluster" in launcher.output()
    assert cluster.wait_empty() == {}
