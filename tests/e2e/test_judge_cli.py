"""`codefu judge` as a user runs it: real parquet, real sandbox, output read back."""

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from helpers.served import processes_of

SOLUTIONS = json.loads((Path(__file__).parents[1] / "data" / "codefu_easy_solutions.json").read_text())


def codefu(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "codefu.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=600
    )


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_judge_cli_end_to_end(tmp_path, codefu_easy):
    cpp = next(s for s in SOLUTIONS if s["language"] == "cpp")
    python = next(s for s in SOLUTIONS if s["language"] == "python")
    responses = write_jsonl(
        tmp_path / "responses.jsonl",
        [
            {"index": cpp["index"], "response": f"```cpp\n{cpp['correct']}\n```"},
            {"index": cpp["index"], "response": f"```cpp\n{cpp['wrong']}\n```"},
            {"name": python["name"], "response": f"<code>\n{python['correct']}\n</code>"},
            {"index": 0, "response": "I give up."},
            {"index": 0, "response": "```cpp\nint main( {\n```"},
        ],
    )
    out = tmp_path / "out" / "verdicts.jsonl"
    r = codefu(
        "judge",
        "--dataset",
        str(codefu_easy / "train.parquet"),
        "--responses",
        str(responses),
        "--out",
        str(out),
        "--max-tests",
        "10",
    )
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["line"] for row in rows] == [1, 2, 3, 4, 5]
    assert [row["status"] for row in rows] == [
        "ACCEPTED",
        "WRONG_ANSWER",
        "ACCEPTED",
        "NO_CODE",
        "COMPILE_ERROR",
    ]
    assert [row["reward"] for row in rows][2:] == [1.0, -1.0, -0.5]
    assert rows[0]["passed"] == rows[0]["total"] == 10
    for row in rows:
        assert {"status", "passed", "total", "reward", "time_s", "tests"} <= row.keys()
    assert all(t["status"] == "ACCEPTED" for t in rows[0]["tests"])
    assert not (out.parent / "verdicts.jsonl.partial").exists()
    # the summary table
    assert "ACCEPTED" in r.stdout and "mean reward (codefu)" in r.stdout and "tests/s" in r.stdout


@pytest.mark.parametrize(
    "lines,message",
    [
        (['{"index": 99999, "response": "x"}'], "line 1: index 99999 is not a row of the dataset"),
        (['{"index": 0, "response": "x"}', "{not json"], "line 2: not valid JSON"),
        (['{"name": "no such problem", "response": "x"}'], "no problem named 'no such problem'"),
        (['{"index": 0}'], "line 1: 'response' must be a string"),
        (['{"response": "x"}'], "needs 'index'"),
        (["[1, 2]"], "expected an object"),
    ],
)
@pytest.mark.slow
def test_bad_responses_are_named(tmp_path, codefu_easy, lines, message):
    responses = write_jsonl(tmp_path / "responses.jsonl", lines)
    out = tmp_path / "verdicts.jsonl"
    r = codefu(
        "judge",
        "--dataset",
        str(codefu_easy / "test.parquet"),
        "--responses",
        str(responses),
        "--out",
        str(out),
    )
    assert r.returncode == 2
    assert message in r.stderr and str(responses) in r.stderr
    assert "Traceback" not in r.stderr
    assert not out.exists()


def test_unreadable_dataset(tmp_path):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"this is not parquet")
    responses = write_jsonl(tmp_path / "responses.jsonl", [{"index": 0, "response": "x"}])
    r = codefu(
        "judge", "--dataset", str(bad), "--responses", str(responses), "--out", str(tmp_path / "o.jsonl")
    )
    assert r.returncode == 2 and str(bad) in r.stderr and "Traceback" not in r.stderr


def test_the_judge_cli_leaves_no_process_behind(tmp_path, codefu_easy):
    # a program that spins to its time limit and one that leaves a sleeping orphan: once `codefu judge`
    # has exited, no process of its run (its own TMPDIR: sandboxes, runners, programs) is left
    tmp = tempfile.mkdtemp(prefix="cfj-", dir="/tmp")
    os.chmod(tmp, 0o755)  # the sandbox's user reaches the judge's folder inside it
    mark = f"{600 + os.getpid() % 1000}.{secrets.randbelow(10**6)}"  # the orphan's own command line
    orphan = f"import os\nif os.fork() == 0:\n    os.setsid()\n    os.execv('/bin/sleep', ['sleep', '{mark}'])\nprint(1)"
    responses = write_jsonl(
        tmp_path / "responses.jsonl",
        [
            {"index": 0, "response": "```cpp\nint main(){ volatile long x = 0; for(;;) x++; }\n```"},
            {"index": 0, "response": f"```python\n{orphan}\n```"},
        ],
    )
    try:
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "codefu",
                "judge",
                "--dataset",
                str(codefu_easy / "test.parquet"),
                "--responses",
                str(responses),
                "--out",
                str(tmp_path / "o.jsonl"),
                "--max-tests",
                "3",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "TMPDIR": tmp},
        )
        assert r.returncode == 0, r.stderr
        assert processes_of(tmp) == []
        orphans = [p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p) == f"sleep {mark}"]
        assert orphans == []
    finally:
        for pid in processes_of(tmp):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(tmp, ignore_errors=True)


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""
