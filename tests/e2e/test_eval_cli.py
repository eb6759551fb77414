"""`codefu eval`: pass@k per bucket with the real judge, and the bucket table (pure)."""

import json
import subprocess
import sys

import pytest

from codefu.orchestrator.evaluate import bucket_of, passk_by_bucket
from codefu.rollout.tiny import tiny_model, tiny_tokenizer
from codefu.types import Problem


def test_passk_by_bucket_by_hand():
    # n=4: a problem solved 2/4 has pass@1 = 0.5, pass@4 = 1; one solved 0/4 has 0 and 0
    table = passk_by_bucket({"a": 2, "b": 0, "c": 4}, {"a": "easy", "b": "easy", "c": "hard"}, 4, [1, 4])
    assert table["easy"] == {"problems": 2, "pass@1": 0.25, "pass@4": 0.5}
    assert table["hard"] == {"problems": 1, "pass@1": 1.0, "pass@4": 1.0}
    assert table["all"]["problems"] == 3 and table["all"]["pass@1"] == pytest.approx(0.5)


def test_bucket_of():
    assert bucket_of(Problem("x", "", [], [], rating=800)) == "easy"
    assert bucket_of(Problem("x", "", [], [], rating=1500)) == "hard"
    assert bucket_of(Problem("x", "", [], [], rating=2600)) == "expert"
    assert bucket_of(Problem("x", "", [], [], extra={"bucket": "custom"})) == "custom"
    assert bucket_of(Problem("x", "", [], [])) == "all"


def test_eval_cli_on_starter_problems(tmp_path):
    model = tmp_path / "model"
    tiny_model(seed=0).save_pretrained(model)
    tiny_tokenizer().save_pretrained(model)
    out = tmp_path / "eval.json"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "codefu.cli",
            "eval",
            "--model",
            str(model),
            "--dataset",
            "starter",
            "--n",
            "2",
            "--k",
            "1,2",
            "--max-problems",
            "3",
            "--max-new-tokens",
            "8",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["buckets"]["easy"]["problems"] == 3 and set(result["buckets"]["easy"]) == {
        "problems",
        "pass@1",
        "pass@2",
    }
    assert sum(result["verdicts"].values()) == 6  # every sample judged (a random tiny model: no code)
    assert "pass@1" in r.stdout and "easy" in r.stdout


def test_eval_rejects_bad_k(tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "codefu.cli",
            "eval",
            "--model",
            "x",
            "--dataset",
            "starter",
            "--n",
            "2",
            "--k",
            "1,4",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "every k must be between 1 and --n 2" in r.stderr
