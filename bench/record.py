"""The one writer of a benchmark's raw result: what ran, on which code, on which machine, when.

    from bench import record
    head = record.header()                       # at the start: command, commit, dirty, date, machine
    ...
    record.write(out, head | {"params": {...}, "results": {...}})

A bench script takes `--out` through `add_out_argument` and `resolve_out`: by default it writes
docs/results/<UTC date>-<name>.json (with a suffix -2, -3, ... rather than overwrite an earlier run of the
day); `--out DIR` writes that file name into DIR (on the GPU machine: `--out $OUT`); `--out FILE` writes
FILE; `--out -` writes nothing. A smoke run (a tiny model) writes only where --out says. Every figure that
README.md or docs/benchmarks.md quotes comes from such a file.

The commit is `git rev-parse HEAD` of this repository, `dirty` whether tracked files differ from it (and
`dirty_paths` which: other people's edits count too). `$CODEFU_COMMIT`, where set, is taken instead (dirty
then unknown: null): on the GPU machine the copy's .git is the session's first snapshot, so git there
names a stale commit and every later change as dirty; run there as `CODEFU_COMMIT=<sha> python bench/...`
with the commit sent. The machine: CPU model, cores, memory, kernel,
Python, torch and its CUDA, and the GPUs that `nvidia-smi` lists (read without creating a CUDA context, so
that a driver process holds no GPU memory its actors need).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "docs" / "results"
NO_OUT = "-"


def header(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """command, commit, dirty, dirty_paths, date (UTC) and machine, taken now (take it at the start of a run:
    someone may commit in this working tree while it runs)."""
    commit, dirty = git_state()
    return {
        "command": command(sys.argv if argv is None else argv),
        "commit": commit,
        "dirty": None if dirty is None else bool(dirty),
        "dirty_paths": dirty,
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine(),
    }


def write(path: Path | None, record: Mapping[str, Any]) -> Path | None:
    """Write `record` as indented JSON to `path` (folders made as needed); None writes nothing."""
    if path is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, default=str) + "\n")
    print(f"wrote {path}", file=sys.stderr)
    return path


def add_out_argument(parser: argparse.ArgumentParser, name: str, *aliases: str) -> None:
    """--out (and `aliases`, e.g. an older flag) as `resolve_out` reads it."""
    parser.add_argument(
        "--out",
        *aliases,
        dest="out",
        default=None,
        metavar="PATH",
        help=f"the raw result (JSON); default: docs/results/<UTC date>-{name}.json; a folder: that name "
        f"in it; '{NO_OUT}': none",
    )


def resolve_out(out: str | Path | None, name: str, smoke: bool = False) -> Path | None:
    """The file --out names (see the module docstring); `name` without date or .json."""
    if (out is None and smoke) or (out is not None and str(out) == NO_OUT):
        return None
    if out is not None and not Path(out).is_dir():
        return Path(out)
    folder = RESULTS if out is None else Path(out)
    stem = f"{datetime.now(UTC):%Y-%m-%d}-{name}"
    path, n = folder / f"{stem}.json", 1
    while path.exists():
        n += 1
        path = folder / f"{stem}-{n}.json"
    return path


def command(argv: Sequence[str]) -> str:
    """`python bench/x.py ARGS` as it could be typed again from the repository's root."""
    script = Path(argv[0]) if argv else Path("?")
    try:
        shown = script.resolve().relative_to(REPO).as_posix()
    except ValueError:
        shown = script.as_posix()
    return shlex.join(["python", shown, *argv[1:]])


def git_state() -> tuple[str | None, list[str] | None]:
    """(HEAD's commit, the tracked paths that differ from it); ($CODEFU_COMMIT, None) where that is set;
    (None, None) without git."""
    if os.environ.get("CODEFU_COMMIT"):
        return os.environ["CODEFU_COMMIT"], None
    head = _run(["git", "-C", str(REPO), "rev-parse", "HEAD"])
    if head is None:
        return None, None
    status = _run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"]) or ""
    return head.strip(), [line[3:] for line in status.splitlines() if line.strip()]


def machine() -> dict[str, Any]:
    """The machine a figure was measured on."""
    info: dict[str, Any] = {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_gib": _memory_gib(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
    }
    try:
        import torch

        info["torch"] = torch.__version__
        info["cuda"] = torch.version.cuda
    except ImportError:
        info["torch"] = info["cuda"] = None
    info["gpus"] = gpus()
    return info


def gpus() -> list[dict[str, Any]]:
    """Name, memory and driver of each GPU nvidia-smi lists ([] without one)."""
    if shutil.which("nvidia-smi") is None:
        return []
    fields = "name,memory.total,driver_version"
    out = _run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"])
    rows = []
    for line in (out or "").splitlines():
        name, mib, driver = (part.strip() for part in line.split(","))
        rows.append({"name": name, "memory_gib": round(float(mib) / 1024, 1), "driver": driver})
    return rows


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _run(argv: list[str]) -> str | None:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None
