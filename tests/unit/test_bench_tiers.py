"""bench/tiers.py reads pytest's own output: the summary's counts and the --durations table, taken from
a real pytest run of a small test file with a pass, a failure, a skip and an error, and from the other
summary lines pytest writes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.bench_scripts import load_bench_script

tiers = load_bench_script("tiers")

TESTS = """
import time
import pytest

@pytest.fixture
def broken():
    raise RuntimeError("fixture fails")

def test_slow():
    time.sleep(0.3)

@pytest.mark.parametrize("x", ["a b"])
def test_fast(x):
    pass

def test_fails():
    assert "1 passed in 0.01s" == "x"  # a line like a summary, in the failure report

def test_skipped():
    pytest.skip("not here")

def test_errors(broken):
    pass
"""


def pytest_output(folder: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args]
    return subprocess.run(cmd, cwd=folder, capture_output=True, text=True, env=env).stdout


@pytest.mark.parametrize("quiet", [True, False], ids=["-q", "plain"])
def test_counts_and_slowest_from_a_real_pytest_run(tmp_path, quiet):
    (tmp_path / "test_sample.py").write_text(TESTS)
    out = pytest_output(tmp_path, *(["-q"] if quiet else []), "--durations=3", "test_sample.py")
    assert tiers.summary_counts(out) == {"failed": 1, "passed": 2, "skipped": 1, "error": 1}
    slow = tiers.slowest(out)
    assert slow[0]["test"] == "test_sample.py::test_slow" and slow[0]["phase"] == "call"
    assert slow[0]["s"] >= 0.3
    assert len(slow) <= 3


def test_a_run_of_only_skips_and_one_that_ran_nothing(tmp_path):
    (tmp_path / "test_skips.py").write_text("import pytest\n\ndef test_a():\n    pytest.skip('no')\n")
    assert tiers.summary_counts(pytest_output(tmp_path, "-q", "test_skips.py")) == {"skipped": 1}
    assert tiers.summary_counts(pytest_output(tmp_path, "-q", "-k", "nothing", "test_skips.py")) == {
        "deselected": 1
    }
    (tmp_path / "empty").mkdir()
    assert tiers.summary_counts(pytest_output(tmp_path / "empty", "-q")) == {}


def test_no_summary_is_none_and_a_signal_is_128_plus_it():
    assert tiers.summary_counts("ERROR: file or directory not found: nowhere\n") is None
    assert tiers.exit_status(-9) == 137 and tiers.exit_status(1) == 1 and tiers.exit_status(0) == 0
