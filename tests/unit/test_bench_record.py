"""bench/record.py, the one writer of benchmark raw results: every field a figure needs to be traced (command,
commit, dirty tree, date, machine), the commit read from git, and where --out puts the file."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from helpers.bench_scripts import load_bench_script

record = load_bench_script("record")


def git(repo: Path, *argv: str) -> str:
    cmd = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *argv]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path, monkeypatch) -> Path:
    """A git repository of one commit, standing in for this one."""
    monkeypatch.delenv("CODEFU_COMMIT", raising=False)
    root = tmp_path / "repo"
    (root / "bench").mkdir(parents=True)
    (root / "bench" / "x.py").write_text("print(1)\n")
    git(root, "init", "-q")
    git(root, "add", "bench/x.py")
    git(root, "commit", "-q", "-m", "one")
    monkeypatch.setattr(record, "REPO", root)
    monkeypatch.setattr(record, "RESULTS", root / "docs" / "results")
    return root


def test_header_has_every_field_and_the_commit_from_git(repo):
    head = record.header([str(repo / "bench" / "x.py"), "--runs", "3", "a b"])
    assert set(head) == {"command", "commit", "dirty", "dirty_paths", "date", "machine"}
    assert head["command"] == "python bench/x.py --runs 3 'a b'"  # from the repository's root, quoted
    assert head["commit"] == git(repo, "rev-parse", "HEAD")
    assert head["dirty"] is False and head["dirty_paths"] == []
    assert head["date"].endswith("Z") and head["date"][:4].isdigit()
    machine = head["machine"]
    for key in ("cpu", "cores", "memory_gib", "kernel", "python", "torch", "cuda", "gpus", "load_avg"):
        assert key in machine, key
    assert machine["cores"] >= 1 and isinstance(machine["gpus"], list)


def test_a_changed_tracked_file_makes_the_tree_dirty(repo):
    (repo / "bench" / "x.py").write_text("print(2)\n")
    (repo / "untracked.txt").write_text("not counted\n")
    head = record.header(["bench/x.py"])
    assert head["dirty"] is True and head["dirty_paths"] == ["bench/x.py"]


def test_without_git_no_commit(tmp_path, monkeypatch):
    monkeypatch.delenv("CODEFU_COMMIT", raising=False)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    monkeypatch.setattr(record, "REPO", tmp_path)
    assert record.git_state() == (None, None)
    assert record.header(["bench/x.py"])["dirty"] is None


def test_the_environment_names_the_commit_where_gits_is_stale(repo, monkeypatch):
    # a copy whose .git is an older snapshot (the GPU machine's): the caller names the commit it sent
    (repo / "bench" / "x.py").write_text("print(2)\n")
    monkeypatch.setenv("CODEFU_COMMIT", "abc123")
    head = record.header(["bench/x.py"])
    assert head["commit"] == "abc123" and head["dirty"] is None and head["dirty_paths"] is None


def test_write_and_where_out_puts_the_file(repo, tmp_path):
    default = record.resolve_out(None, "judge")
    assert default.parent == repo / "docs" / "results"
    assert default.name.endswith("-judge.json") and default.name[:10].count("-") == 2
    full = record.header(["bench/x.py"]) | {"params": {"runs": 3}, "results": {"tests/s": 36.9}}
    assert record.write(default, full) == default
    assert json.loads(default.read_text()) == full
    again = record.resolve_out(None, "judge")  # an earlier run of the day is not overwritten
    assert again.name == default.name.replace(".json", "-2.json")
    assert record.resolve_out(tmp_path, "judge") == tmp_path / default.name  # a folder: the name in it
    assert record.resolve_out(tmp_path / "f.json", "judge") == tmp_path / "f.json"
    assert record.resolve_out("-", "judge") is None
    assert record.resolve_out(None, "judge", smoke=True) is None  # a smoke run only where --out says
    assert record.write(None, full) is None
