"""bench/learning.py's arithmetic: pass@k per problem from an eval record's counts, the paired difference
against the base model with its interval, and each seed run with its share of the cores."""

from __future__ import annotations

import argparse
import sys

import pytest

from helpers.bench_scripts import load_bench_script

learning = load_bench_script("learning")


def test_per_problem_pass_at_k_from_counts():
    result = {"n": 4, "per_problem": {"a": 0, "b": 1, "c": 4}}
    assert learning.per_problem(result, 1) == {"a": 0.0, "b": 0.25, "c": 1.0}
    assert learning.per_problem(result, 4) == {"a": 0.0, "b": 1.0, "c": 1.0}
    assert learning.per_problem(result, 2)["b"] == pytest.approx(0.5)  # 1 - C(3,2)/C(4,2)


def test_paired_difference_and_its_interval():
    base = {"a": 0.0, "b": 0.0, "c": 0.5, "d": 0.0}
    trained = {"a": 1.0, "b": 0.5, "c": 0.25, "d": 0.0}
    p = learning.paired(trained, base)
    assert p["trained"] == pytest.approx(0.4375) and p["base"] == pytest.approx(0.125)
    assert p["diff"] == pytest.approx(0.3125)
    assert (p["better"], p["worse"]) == (2, 1)
    low, high = p["ci95"]
    assert low <= p["diff"] <= high and low < 0.3125 < high
    # no change anywhere: a zero-width interval at 0, which includes no claim
    same = learning.paired(base, base)
    assert same["diff"] == 0 and same["ci95"] == [0.0, 0.0]


def test_seeds_at_once_share_the_cores(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(learning.os, "cpu_count", lambda: 16)
    assert learning.share_of_cores(3)["OMP_NUM_THREADS"] == "5"
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # the user's setting wins
    assert learning.share_of_cores(3)["OMP_NUM_THREADS"] == "2"


def test_finished_seeds_are_not_trained_again(tmp_path):
    run_dir = tmp_path / "seed0"
    assert learning.train_command("c.yaml", run_dir, 0, ["a=1"])[-2:] == ["loop.seed=0", "a=1"]
    (run_dir / "checkpoints" / "step_00000010").mkdir(parents=True)
    assert learning.train_command("c.yaml", run_dir, 0, [])[-2:] == ["--resume", str(run_dir)]
    (run_dir / "model").mkdir()
    (run_dir / "model" / "config.json").write_text("{}")
    assert learning.train_command("c.yaml", run_dir, 0, []) is None


def test_evaluations_skip_what_was_written_and_name_the_one_that_failed(tmp_path):
    args = argparse.Namespace(split="test", n=16, k="1,8", eval_batch_size=256, device="cuda", sandbox="none")
    sampling = {"temperature": 0.6, "max_new_tokens": 160, "dtype": "bfloat16"}
    cmd = learning.eval_command("m/model", tmp_path / "seed0.json", args, sampling)
    flags = dict(zip(cmd[4::2], cmd[5::2], strict=False))
    assert flags["--model"] == "m/model" and flags["--out"] == str(tmp_path / "seed0.json")
    assert (flags["--dtype"], flags["--temperature"], flags["--device"]) == ("bfloat16", "0.6", "cuda")
    (tmp_path / "seed0.json").write_text("{}")
    assert learning.eval_command("m/model", tmp_path / "seed0.json", args, sampling) is None
    # three at once: each writes its file; the one that fails is named, after the others finished
    write = "import sys, pathlib, time; time.sleep(0.3); pathlib.Path(sys.argv[1]).write_text('x')"
    commands = {
        "seed0": None,
        "seed1": [sys.executable, "-c", write, str(tmp_path / "a")],
        "seed2": [sys.executable, "-c", "raise SystemExit(3)"],
        "base": [sys.executable, "-c", write, str(tmp_path / "b")],
    }
    with pytest.raises(SystemExit, match=r"evaluation failed: seed2 \(exit 3\)$"):
        learning.run_at_once(commands, 2, "evaluation")
    assert (tmp_path / "a").exists() and (tmp_path / "b").exists()
