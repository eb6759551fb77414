"""bench/test_tiers.py reads pytest's own output: the summary's counts and the --durations table, taken
from a real pytest run of a small test file with a pass, a failure, a skip and an error."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
spec = importlib.util.spec_from_file_location("bench_test_tiers", REPO / "bench" / "test_tiers.py")
assert spec is not None and spec.loader is not None
tiers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tiers)

TESTS = """
import time
import pytest

@pytest.fixture
def broken():
    raise RuntimeError("fixture fails")

def test_slow():
    time.sleep(0.3)

def test_fast():
    pass

def test_fails():
    assert 1 == 2

def test_skipped():
    pytest.skip("not here")

def test_errors(broken):
    pass
"""


def test_counts_and_slowest_from_a_real_pytest_run(tmp_path):
    (tmp_path / "test_sample.py").write_text(TESTS)
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=3", "test_sample.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    ).stdout
    assert tiers.summary_counts(out) == {"failed": 1, "passed": 2, "skipped": 1, "error": 1}
    slow = tiers.slowest(out)
    assert slow[0]["test"] == "test_sample.py::test_slow" and slow[0]["phase"] == "call"
    assert slow[0]["s"] >= 0.3
    assert len(slow) <= 3


def test_no_summary_gives_no_counts():
    assert tiers.summary_counts("ERROR: file or directory not found: nowhere\n") == {}
