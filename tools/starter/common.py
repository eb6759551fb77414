"""Shared pieces of the starter-problem generator: the problem definition, input helpers, runners.

Everything here uses the standard library only, so `build.py` and `validate.py` run anywhere
with python3 and g++.
"""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
JSONL = REPO / "codefu" / "data" / "starter" / "problems.jsonl"
RATING = 800
MEMORY_LIMIT = 256 * 1024 * 1024
MAX_TEST_BYTES = 200 * 1024  # input + output of one test
MAX_SET_BYTES = 4 * 1024 * 1024  # the whole JSONL
LEVELS = (1, 2, 3, 4, 5)  # the ladder's 1-4 (specs/ladder.py), then the middle level 5 (specs/middle.py)


def src(text: str) -> str:
    """Source code written indented inside a definition -> flush-left with one trailing newline."""
    return textwrap.dedent(text).strip("\n") + "\n"


@dataclass
class Wrong:
    language: str  # "cpp" | "python"
    source: str
    flaw: str  # one line


@dataclass
class Spec:
    """One starter problem, defined in tools/starter/specs/*.py.

    `gen(rng)` returns the private (hidden) test inputs, deterministic for the given rng; the expected
    outputs are produced by running the Python reference and cross-checked against the C++ one.
    `level` places a problem on the ladder of specs/ladder.py (1-4) or on the middle level of specs/middle.py
    (5); build.py writes it as {"extra": {"level": N}}, which the problems-JSONL schema keeps in
    Problem.extra. None: no level (the original problems).
    """

    name: str
    title: str
    legend: str
    input_spec: str
    output_spec: str
    constraints: list[str]
    cpp: str
    python: str
    wrong: list[Wrong]
    public: list[str]
    gen: Callable[[random.Random], list[str]]
    notes: list[str] = field(default_factory=list)  # optional explanation per public example
    time_limit_s: float = 1.0
    level: int | None = None

    def __post_init__(self) -> None:
        if self.level is not None and self.level not in LEVELS:
            raise ValueError(f"{self.name}: level must be one of {LEVELS}, not {self.level!r}")

    def rng(self) -> random.Random:
        return random.Random(f"codefu-starter:{self.name}")


# ---------------------------------------------------------------- input helpers


def line(*xs: object) -> str:
    return " ".join(str(x) for x in xs) + "\n"


def array_input(xs: list[int]) -> str:
    return f"{len(xs)}\n" + " ".join(str(x) for x in xs) + "\n"


def word(rng: random.Random, n: int, alphabet: str = "abcdefghijklmnopqrstuvwxyz") -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def rand_ints(rng: random.Random, n: int, lo: int, hi: int) -> list[int]:
    return [rng.randint(lo, hi) for _ in range(n)]


# ---------------------------------------------------------------- statement


def statement(spec: Spec, examples: list[tuple[str, str]]) -> str:
    parts = [
        f"# {spec.title}",
        spec.legend.strip(),
        "## Input",
        spec.input_spec.strip(),
        "## Output",
        spec.output_spec.strip(),
        "## Constraints",
        "\n".join(f"- {c}" for c in spec.constraints),
        "## Examples",
    ]
    for i, (inp, out) in enumerate(examples):
        block = (
            f"### Example {i + 1}\n\nInput:\n\n```\n{inp.rstrip()}\n```\n\n"
            f"Output:\n\n```\n{out.rstrip()}\n```"
        )
        if i < len(spec.notes) and spec.notes[i]:
            block += f"\n\n{spec.notes[i].strip()}"
        parts.append(block)
    return "\n\n".join(parts) + "\n"


# ---------------------------------------------------------------- comparison (the judge's rule)

_YES_NO = {b"yes", b"no"}


def tokens_equal(expected: bytes, actual: bytes, fold_all: bool = False) -> bool:
    """Whitespace-separated tokens; YES/NO compared case-insensitively (fold_all: every token)."""
    e, a = expected.split(), actual.split()
    if len(e) != len(a):
        return False
    for x, y in zip(e, a, strict=True):
        if x == y:
            continue
        if (fold_all or x.lower() in _YES_NO) and x.lower() == y.lower():
            continue
        return False
    return True


# ---------------------------------------------------------------- compiling and running


@dataclass
class RunResult:
    stdout: bytes
    stderr: bytes
    returncode: int | None  # None: killed for time
    wall_s: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


class Runner:
    """Compiles C++ once per distinct source (cached by hash) and runs programs on inputs."""

    def __init__(self, workdir: Path | None = None):
        self._tmp = None
        if workdir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="codefu-starter-")
            workdir = Path(self._tmp.name)
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)

    def prepare(self, language: str, source: str) -> list[str]:
        """Returns the command that runs `source`; raises RuntimeError on a compile error."""
        h = hashlib.sha256(f"{language}\0{source}".encode()).hexdigest()[:16]
        if language == "python":
            path = self.workdir / f"{h}.py"
            if not path.exists():
                path.write_text(source)
            return [sys.executable, "-S", str(path)]
        if language == "cpp":
            exe = self.workdir / f"{h}.bin"
            if not exe.exists():
                cpp = self.workdir / f"{h}.cpp"
                cpp.write_text(source)
                tmp_exe = self.workdir / f"{h}.{os.getpid()}.tmp"
                proc = subprocess.run(
                    ["g++", "-std=c++17", "-O2", "-pipe", "-o", str(tmp_exe), str(cpp)],
                    capture_output=True,
                    text=True,
                )
                if proc.returncode != 0:
                    raise RuntimeError(f"compile error:\n{proc.stderr[:2000]}")
                tmp_exe.replace(exe)
            return [str(exe)]
        raise ValueError(f"unknown language {language!r}")

    @staticmethod
    def run(cmd: list[str], stdin: str, timeout_s: float) -> RunResult:
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, input=stdin.encode(), capture_output=True, timeout=timeout_s)
        except subprocess.TimeoutExpired as e:
            return RunResult(e.stdout or b"", e.stderr or b"", None, time.perf_counter() - t0)
        return RunResult(proc.stdout, proc.stderr, proc.returncode, time.perf_counter() - t0)

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
