"""Users' own problems, one JSON object per line (schema in docs/data.md).

{"name": "sum", "statement": "Read a and b, print a+b.",
 "public_tests": [{"input": "1 2\\n", "output": "3\\n"}],
 "tests": [{"input": "5 7\\n", "output": "12\\n"}, ...],       # hidden tests ("private_tests" too)
 "time_limit_s": 1.0, "memory_limit_bytes": 268435456,        # optional: 2 s, 256 MiB
 "rating": 800, "language": "cpp", "split": "train",           # optional
 "checker": {"kind": "python", "source": "mypkg.checkers:sum"}, # optional; a program: "program", its
   source, "language" and "files" ({"testlib.h": "..."}, placed beside it)
 "prompt": [{"role": "user", "content": "..."}], "extra": {}}  # optional
"""

from __future__ import annotations

import glob
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from codefu.data.raw import Malformed, RawProblem
from codefu.errors import CodefuError
from codefu.types import LANGUAGES, CheckerSpec, Problem, TestCase, checker_files_error

_KNOWN = {
    "name", "statement", "public_tests", "tests", "private_tests", "generated_tests", "time_limit_s",
    "memory_limit_bytes", "rating", "language", "split", "checker", "prompt", "extra", "source",
    "input_file", "output_file", "solutions", "wrong_solutions",
}  # fmt: skip
_TO_EXTRA = ("solutions", "wrong_solutions")  # reference material, kept in Problem.extra


class RowError(ValueError):
    """A bad value in one row; `column` names the field."""

    def __init__(self, column: str, message: str) -> None:
        super().__init__(message)
        self.column = column


def _tests(obj: dict[str, Any], key: str) -> list[TestCase]:
    v = obj.get(key) or []
    if not isinstance(v, list):
        raise RowError(key, "must be a list of {input, output}")
    out = []
    for i, t in enumerate(v):
        if not (isinstance(t, dict) and isinstance(t.get("input"), str) and isinstance(t.get("output"), str)):
            raise RowError(key, f'test {i} must be {{"input": str, "output": str}}')
        out.append(TestCase(t["input"], t["output"]))
    return out


def _checker(v: Any) -> CheckerSpec | None:
    if v is None:
        return None
    if not isinstance(v, dict) or v.get("kind") not in ("python", "program") or not v.get("source"):
        raise RowError(
            "checker", 'must be {"kind": "python"|"program", "source": str[, "language"][, "files"]}'
        )
    files = v.get("files") or {}
    if (error := checker_files_error(files)) is not None:
        raise RowError("checker", error)
    language = v.get("language", "cpp")
    return CheckerSpec(kind=v["kind"], source=v["source"], language=language, files=dict(files))


def _number(obj: dict[str, Any], key: str, default: float | None) -> Any:
    v = obj.get(key, default)
    if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
        raise RowError(key, f"must be a number, not {v!r}")
    return v


def parse_problem(obj: Any, fallback_name: str) -> Problem:
    """One JSON object as a `Problem`; raises RowError naming the bad field."""
    if not isinstance(obj, dict):
        raise RowError("-", "a line must hold a JSON object")
    unknown = sorted(set(obj) - _KNOWN)
    if unknown:
        raise RowError(unknown[0], f"unknown field (known: {', '.join(sorted(_KNOWN))})")
    if not isinstance(obj.get("statement"), str):
        raise RowError("statement", "required, a string")
    language = obj.get("language", "cpp")
    if language not in LANGUAGES:
        raise RowError("language", f"must be one of {LANGUAGES}")
    rating = _number(obj, "rating", None)
    return Problem(
        name=str(obj.get("name") or fallback_name),
        statement=obj["statement"],
        public_tests=_tests(obj, "public_tests"),
        private_tests=_tests(obj, "tests" if "tests" in obj else "private_tests"),
        time_limit_s=float(_number(obj, "time_limit_s", 2.0)),
        memory_limit_bytes=int(_number(obj, "memory_limit_bytes", 256 * 1024 * 1024)),
        rating=int(rating) if rating else None,
        preferred_language=language,
        checker=_checker(obj.get("checker")),
        source=str(obj.get("source") or "jsonl"),
        prompt=obj.get("prompt"),
        extra={**(obj.get("extra") or {}), **{k: obj[k] for k in _TO_EXTRA if k in obj}},
    )


def problem_to_object(p: Problem) -> dict[str, Any]:
    """`p` as one line of this schema (`parse_problem` reads it back to an equal `Problem`): every test as
    hidden "private_tests"; extra["solutions"] / extra["wrong_solutions"] go back to the top level. A
    function-call problem has no field here: ValueError."""
    if p.function is not None:
        raise ValueError(f"problem {p.name!r} is a function-call problem: problems JSONL cannot hold it")
    obj: dict[str, Any] = {
        "name": p.name,
        "statement": p.statement,
        "public_tests": [{"input": t.input, "output": t.output} for t in p.public_tests],
        "private_tests": [{"input": t.input, "output": t.output} for t in p.private_tests],
        "time_limit_s": p.time_limit_s,
        "memory_limit_bytes": p.memory_limit_bytes,
        "language": p.preferred_language,
        "source": p.source,
    }
    if p.rating:
        obj["rating"] = p.rating
    if p.checker is not None:
        c = p.checker
        obj["checker"] = {"kind": c.kind, "source": c.source, "language": c.language, "files": dict(c.files)}
    if p.prompt:
        obj["prompt"] = p.prompt
    extra = {k: v for k, v in p.extra.items() if k not in _TO_EXTRA}
    if extra:
        obj["extra"] = extra
    obj.update({k: p.extra[k] for k in _TO_EXTRA if k in p.extra})
    return obj


def iter_objects(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number from 1, parsed JSON or a RowError) for each non-blank line."""
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as e:
                yield lineno, RowError("-", f"not valid JSON ({e.msg} at char {e.pos})")


def expand(spec: str, suffix: str) -> list[Path]:
    """A file, a directory (its *suffix files, recursively) or a glob -> sorted files; error if none."""
    p = Path(spec)
    if p.is_dir():
        files = sorted(p.rglob(f"*{suffix}"))
    elif p.exists():
        files = [p]
    else:
        files = sorted(Path(f) for f in glob.glob(spec, recursive=True))
    if not files:
        kind = f"{suffix} files" if suffix else "matching files"
        raise CodefuError(f"{spec}: no {kind} found (give a file, a directory or a glob)")
    return files


class JsonlSource:
    """Problems from JSONL files; every row goes through the same filters as CodeContests'."""

    name = "jsonl"

    def __init__(self, spec: str, splits: tuple[str, ...] | None = None) -> None:
        self._files = expand(spec, ".jsonl")
        self.splits = splits

    def files(self) -> list[Path]:
        return self._files

    def count_rows(self) -> int | None:
        return None

    def __iter__(self) -> Iterator[RawProblem | Malformed]:
        for path in self._files:
            for lineno, obj in iter_objects(path):
                yield from self._row(path, lineno, obj)

    def _row(self, path: Path, lineno: int, obj: Any) -> Iterator[RawProblem | Malformed]:
        split = str(obj.get("split") or "train") if isinstance(obj, dict) else "train"
        if self.splits and split not in self.splits:
            return
        try:
            if isinstance(obj, RowError):
                raise obj
            problem = parse_problem(obj, f"{path.stem}-{lineno}")
            generated = _tests(obj, "generated_tests")
        except RowError as e:
            yield Malformed(str(path), lineno, e.column, str(e), split)
            return
        yield RawProblem(
            problem=problem,
            split=split,
            source_id=problem.name,
            where=f"{path}, row {lineno}",
            generated_tests=generated,
            input_file=str(obj.get("input_file") or ""),
            output_file=str(obj.get("output_file") or ""),
        )
