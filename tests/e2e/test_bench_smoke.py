"""bench/judge.py and bench/prepare.py at a tiny size, as a person runs them: each exits 0 and writes its raw
result (bench/record.py) with the command, the commit, the machine, the parameters and every figure the docs
quote. Speed is not asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # ~40 s on 2 cores: real sandboxes, compiles, a prepare child

REPO = Path(__file__).resolve().parents[2]
HEADER = {"command", "commit", "dirty", "dirty_paths", "date", "machine", "params", "results"}


def run_bench(script: str, *argv: str) -> None:
    cmd = [sys.executable, str(REPO / "bench" / script), *argv]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_judge_bench_writes_its_figures(codefu_easy, tmp_path):
    out = tmp_path / "judge.json"
    run_bench("judge.py", "--runs", "3", "--tests-per-submission", "2", "--variants", "1", "--workers", "1",
              "--filter-repeats", "1", "--skip-reference", "--out", str(out))  # fmt: skip
    got = json.loads(out.read_text())
    assert set(got) == HEADER and got["command"].startswith("python bench/judge.py --runs 3")
    assert got["params"]["runs"] == 3 and got["params"]["workers"] == "1"
    results = got["results"]
    overhead = results["overhead_median_ms"]
    assert {"plain subprocess", "runner: per test in a running sandbox"} <= set(overhead)
    assert all(ms > 0 for ms in overhead.values())
    assert set(results["filter_ns_per_call"]) == {"getppid, filter on", "getppid, filter off"}
    (row,) = results["throughput"]  # one worker count, no reference
    assert row["how"] == "codefu judge, runner" and row["workers"] == 1
    assert row["submissions"] == 24 and row["accepted"] == 12  # each problem's correct and wrong program
    assert row["tests"] > 0 and row["tests/s"] > 0


def test_prepare_bench_writes_its_figures(tmp_path):
    out = tmp_path / "prepare.json"
    run_bench("prepare.py", "--problems", "200", "--out", str(out))
    got = json.loads(out.read_text())
    assert set(got) == HEADER and got["params"]["problems"] == 200
    results = got["results"]
    assert results["rows_read"] == 200 and 0 < results["kept"] <= 200
    assert results["rows_per_s"] > 0 and results["wall_s"] > 0 and results["peak_rss_mib"] > 0
    assert results["input_mb"] > 0 and results["output_mb"] > 0


def test_modes_bench_runs_each_mode_and_writes_their_steps(tmp_path):
    from helpers.tiny_train import tiny_train_overrides

    overrides = tiny_train_overrides(tmp_path / "model")
    out = tmp_path / "modes.json"
    cmd = [
        sys.executable,
        "bench/modes.py",
        "--config",
        "configs/cpu.yaml",
        "--steps",
        "2",
        "--out",
        str(out),
    ]
    r = subprocess.run([*cmd, "--", *overrides], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(out.read_text())
    assert got["command"].startswith("python bench/modes.py") and got["commit"]
    sync, off = got["results"]
    assert (sync["mode"], off["mode"]) == ("sync", "one_step_off")
    assert len(sync["step_s"]) == len(off["step_s"]) == 2 and all(
        s > 0 for s in sync["step_s"] + off["step_s"]
    )
    # the first step of either is on the start's weights; one_step_off's second is one version behind
    assert sync["staleness_mean"] == [0.0, 0.0] and off["staleness_mean"] == [0.0, 1.0]
    assert sync["speedup_vs_first"] == 1.0 and off["speedup_vs_first"] > 0
