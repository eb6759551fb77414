"""`codefu prepare` as a user runs it: a subprocess, real parquet in, a table and files out."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from codefu.data.loader import load_problems
from codefu.data.synthetic import cc_row, write_cc_parquet

REPO = Path(__file__).parents[2]


def prepare(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "codefu.cli", "prepare", *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=120)


def test_prepare_writes_buckets_and_prints_the_table(tmp_path):
    rows = [cc_row(i, cf_rating=r) for i, r in enumerate([800, 900, 1500, 2400, 700])]
    rows.append(cc_row(9, public_tests={"input": ["1\n"], "output": []}))
    write_cc_parquet(tmp_path / "in" / "train-00000-of-00001.parquet", rows)
    write_cc_parquet(tmp_path / "in" / "valid-00000-of-00001.parquet", [cc_row(20, cf_rating=1000)])
    out = tmp_path / "out"
    r = prepare("--input", str(tmp_path / "in"), "--out", str(out), "--buckets", "easy,hard",
                "--template", "codefu", "--max-tests", "1")  # fmt: skip
    assert r.returncode == 0, r.stderr
    lines = {line.split()[0]: line.split()[1:] for line in r.stdout.splitlines() if line.strip()}
    assert lines["rows"] == ["read", "7"] and lines["kept"] == ["4"]
    assert lines["rating_too_low"] == ["1"] and lines["malformed"] == ["1"] and lines["no_bucket"] == ["1"]
    assert lines["bucket"] == ["train", "valid", "total"]
    assert lines["easy"] == ["2", "1", "3"] and lines["hard"] == ["1", "0", "1"]
    assert "expert" not in lines
    assert "\r" not in r.stderr  # no progress bar when stderr is not a terminal
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*.parquet")) == [
        "easy/train.parquet", "easy/valid.parquet", "hard/train.parquet",
    ]  # fmt: skip
    easy = load_problems(out / "easy" / "train.parquet")
    assert [len(p.private_tests) for p in easy] == [1, 1]
    assert easy[0].prompt[0]["content"].startswith("<|im_start|>user\n")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["buckets"] == [
        {"name": "easy", "lo": 800, "hi": 1000}, {"name": "hard", "lo": 1100, "hi": 2200},
    ]  # fmt: skip


def test_bad_input_is_one_line_without_traceback(tmp_path):
    write_cc_parquet(
        tmp_path / "in" / "train.parquet",
        [cc_row(0), cc_row(1, private_tests={"input": ["1"], "output": None})],
    )
    r = prepare("--input", str(tmp_path / "in"), "--out", str(tmp_path / "out"), "--strict")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert "train.parquet, row 1, column 'private_tests': 1 inputs but 0 outputs" in r.stderr
    assert not (tmp_path / "out" / "manifest.json").exists()
    (tmp_path / "in" / "train.parquet").write_bytes(b"garbage")
    r = prepare("--input", str(tmp_path / "in"), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and "not a readable parquet file" in r.stderr and "Traceback" not in r.stderr
    r = prepare("--input", str(tmp_path / "in"), "--out", str(tmp_path / "out"), "--buckets", "medium")
    assert r.returncode == 2 and "unknown bucket 'medium'" in r.stderr
