"""The verl parquet schema for code problems, and conversion between its rows and `Problem`.

One row (as CodeFu published it, plus our `extra_info`):

    data_source   str                      e.g. "code_contests"
    prompt        list[{content, role}]    chat messages, already rendered from a template
    ability       str                      "coding-cp"
    reward_model  {style: "rule", ground_truth: {cf_rating, memory_limit_bytes, name,
                   private_tests{input[], output[]}, public_tests{input[], output[]},
                   time_limit{nanos, seconds}}}
    extra_info    {split, index, bucket, source_id, statement, language, checker (JSON or null:
                   {kind, source, language[, files: {name: text}]}),
                   date (YYYY-MM-DD or null), difficulty (the source's label or null),
                   function (JSON or null: {entry_point, starter_code, unwrap_singleton}: a
                   function-call problem, whose test inputs are JSON argument arrays),
                   solutions, wrong_solutions (JSON or null: [{language, source[, flaw]}]: known-correct
                   and known-incorrect programs, from `prepare --keep-solutions`; codefu.data.solutions)}

Struct fields are in the order CodeFu's file has them (alphabetical), with the same types, so files we
write concatenate with theirs. Reading is tolerant: other verl code datasets omit fields, name test keys
`inputs`/`outputs`, store tests as a list of {input, output} records, or store `ground_truth` as a
JSON string; missing values get the `Problem` defaults.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pyarrow as pa

from codefu.types import LANGUAGES, CheckerSpec, FunctionSpec, Problem, TestCase, checker_files_error

ABILITY = "coding-cp"

_TESTS = pa.struct([("input", pa.list_(pa.string())), ("output", pa.list_(pa.string()))])
GROUND_TRUTH = pa.struct(
    [
        ("cf_rating", pa.int64()),
        ("memory_limit_bytes", pa.int64()),
        ("name", pa.string()),
        ("private_tests", _TESTS),
        ("public_tests", _TESTS),
        ("time_limit", pa.struct([("nanos", pa.float64()), ("seconds", pa.float64())])),
    ]
)
EXTRA_INFO = pa.struct(
    [
        ("split", pa.string()),
        ("index", pa.int64()),
        ("bucket", pa.string()),
        ("source_id", pa.string()),
        ("statement", pa.string()),
        ("language", pa.string()),
        ("checker", pa.string()),
        ("date", pa.string()),
        ("difficulty", pa.string()),
        ("function", pa.string()),  # rows written before it existed read as stdin problems
        ("solutions", pa.string()),  # `prepare --keep-solutions`: JSON [{language, source}] or null
        ("wrong_solutions", pa.string()),  # the same, known-incorrect (with "flaw" where known)
    ]
)
SCHEMA = pa.schema(
    [
        ("data_source", pa.string()),
        ("prompt", pa.list_(pa.struct([("content", pa.string()), ("role", pa.string())]))),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("ground_truth", GROUND_TRUTH), ("style", pa.string())])),
        ("extra_info", EXTRA_INFO),
    ]
)
_EXTRA_KEYS = {"statement", "language", "checker", "function"}  # extra_info keys that are Problem fields


def seconds_to_limit(t: float) -> dict[str, float]:
    """2.5 -> {"nanos": 5e8, "seconds": 2.0}, as CodeContests stores time limits."""
    seconds = float(int(t))
    return {"nanos": float(round((t - seconds) * 1e9)), "seconds": seconds}


def limit_to_seconds(v: Any, default: float) -> float:
    """{seconds, nanos} (either may be null), a number, or None -> seconds as a float."""
    if v is None:
        return default
    if isinstance(v, dict):
        s, n = v.get("seconds") or 0, v.get("nanos") or 0
        total = float(s) + float(n) / 1e9
        return total if total > 0 else default
    return float(v)


def _tests_dict(tests: list[TestCase]) -> dict[str, list[str]]:
    return {"input": [t.input for t in tests], "output": [t.output for t in tests]}


def problem_to_row(
    p: Problem, split: str, index: int, bucket: str, source_id: str, date: str = "", difficulty: str = ""
) -> dict[str, Any]:
    """One `Problem` (with its rendered prompt) as a verl row matching `SCHEMA`; an empty date or
    difficulty is written as null."""
    checker = None
    if p.checker is not None:
        c = p.checker
        spec: dict[str, Any] = {"kind": c.kind, "source": c.source, "language": c.language}
        if c.files:  # rows without extra files stay as they were before files existed
            spec["files"] = dict(c.files)
        checker = json.dumps(spec)
    return {
        "data_source": p.source,
        "prompt": [{"content": m["content"], "role": m["role"]} for m in (p.prompt or [])],
        "ability": ABILITY,
        "reward_model": {
            "style": "rule",
            "ground_truth": {
                "cf_rating": p.rating,
                "memory_limit_bytes": p.memory_limit_bytes,
                "name": p.name,
                "private_tests": _tests_dict(p.private_tests),
                "public_tests": _tests_dict(p.public_tests),
                "time_limit": seconds_to_limit(p.time_limit_s),
            },
        },
        "extra_info": {
            "split": split,
            "index": index,
            "bucket": bucket,
            "source_id": source_id,
            "statement": p.statement,
            "language": p.preferred_language,
            "checker": checker,
            "date": date or None,
            "difficulty": difficulty or None,
            "function": function_to_json(p.function),
            "solutions": _json_or_none(p.extra.get("solutions")),
            "wrong_solutions": _json_or_none(p.extra.get("wrong_solutions")),
        },
    }


def _json_or_none(v: Any) -> str | None:
    return None if not v else v if isinstance(v, str) else json.dumps(v)


def function_to_json(f: FunctionSpec | None) -> str | None:
    if f is None:
        return None
    return json.dumps(
        {"entry_point": f.entry_point, "starter_code": f.starter_code, "unwrap_singleton": f.unwrap_singleton}
    )


def function_from_json(v: Any) -> FunctionSpec | None:
    """extra_info.function (JSON text or an object); None/"" for stdin problems and older rows."""
    if not v:
        return None
    d = json.loads(v) if isinstance(v, str) else v
    entry = d.get("entry_point")
    if not isinstance(entry, str) or not entry.isidentifier():
        raise ValueError(f"function: entry_point must be a Python identifier, not {entry!r}")
    return FunctionSpec(entry, str(d.get("starter_code") or ""), bool(d.get("unwrap_singleton", False)))


def _as_str(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def parse_tests(v: Any) -> list[TestCase]:
    """{input[], output[]} / {inputs[], outputs[]} / [{input, output}, ...] / JSON of those / None."""
    if v is None:
        return []
    if isinstance(v, str):
        v = json.loads(v) if v.strip() else None
        return parse_tests(v)
    if isinstance(v, dict):
        ins = v.get("input", v.get("inputs")) or []
        outs = v.get("output", v.get("outputs")) or []
        if len(ins) != len(outs):
            raise ValueError(f"{len(ins)} test inputs but {len(outs)} outputs")
        return [TestCase(_as_str(i), _as_str(o)) for i, o in zip(ins, outs, strict=True)]
    if isinstance(v, list):
        return [TestCase(_as_str(t.get("input", "")), _as_str(t.get("output", ""))) for t in v]
    raise ValueError(f"tests must be a dict or a list, not {type(v).__name__}")


_CHAT_MARK = re.compile(r"<\|im_(start|end)\|>(user|assistant|system)?\n?")


def statement_from_prompt(prompt: list[dict[str, str]] | None) -> str:
    """Best effort for datasets without a stored statement: the last user message, chat markers
    removed, and only what follows "Problem:" when the message has that heading (CodeFu's prompts)."""
    users = [m.get("content") or "" for m in prompt or [] if m.get("role") == "user"]
    text = _CHAT_MARK.sub("", users[-1] if users else "")
    head = text.find("Problem:\n")
    if head >= 0:
        text = text[head + len("Problem:\n") :]
    return text.strip("\n")


def _checker(v: Any) -> CheckerSpec | None:
    if not v:
        return None
    d = json.loads(v) if isinstance(v, str) else v
    files = d.get("files") or {}  # rows written before checkers had files have none
    if (error := checker_files_error(files)) is not None:
        raise ValueError(f"checker: {error}")
    language = d.get("language", "cpp")
    return CheckerSpec(kind=d["kind"], source=d["source"], language=language, files=dict(files))


def row_to_problem(row: dict[str, Any], fallback_name: str) -> Problem:
    """A verl row (ours, CodeFu's or another code dataset's) as a `Problem`. Raises ValueError,
    KeyError or TypeError on a row it cannot read; the caller adds file and row to the message."""
    rm = row.get("reward_model") or {}
    gt = rm.get("ground_truth") if isinstance(rm, dict) else None
    if isinstance(gt, str):
        gt = json.loads(gt) if gt.strip() else {}
    gt = gt or {}
    extra = dict(row.get("extra_info") or {})
    prompt = [{"role": m["role"], "content": m["content"]} for m in row.get("prompt") or []] or None
    private = gt.get("private_tests")
    if private is None and "public_tests" not in gt:  # datasets with one pool of tests
        private = {k: gt[k] for k in ("input", "inputs", "output", "outputs") if k in gt} or None
    language = extra.get("language") or "cpp"
    rating = gt.get("cf_rating", gt.get("rating"))
    return Problem(
        name=gt.get("name") or extra.get("source_id") or fallback_name,
        statement=extra.get("statement") or statement_from_prompt(prompt),
        public_tests=parse_tests(gt.get("public_tests")),
        private_tests=parse_tests(private),
        time_limit_s=limit_to_seconds(gt.get("time_limit"), 2.0),
        memory_limit_bytes=int(gt.get("memory_limit_bytes") or 256 * 1024 * 1024),
        rating=int(rating) if rating else None,
        preferred_language=language if language in LANGUAGES else "cpp",
        checker=_checker(extra.get("checker")),
        function=function_from_json(extra.get("function")),
        source=row.get("data_source") or "",
        prompt=prompt,
        extra={k: v for k, v in extra.items() if k not in _EXTRA_KEYS},
    )
