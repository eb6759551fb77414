"""What the service reads and answers, as pure functions: requests checked field by field (a bad one is a
`BadRequest` naming the field), the judge's answers written in SandboxFusion's /run_code schema and in
`codefu judge`'s record.

SandboxFusion's /run_code (the schema verl's and ROLL's sandbox clients speak):

    request:  {code, language, stdin?, compile_timeout?, run_timeout?, memory_limit_MB?, files?, fetch_files?}
    response: {status: Success | Failed | SandboxError, message, compile_result, run_result, files, ...}
              where a result is {status: Finished | TimeLimitExceeded | Error, execution_time, return_code,
              stdout, stderr}

"Success" means the program compiled and exited 0 within its limits; "Failed" is anything the program did
(compile error, non-zero exit, a limit hit); "SandboxError" is ours alone. Timeouts are CPU seconds
(the wall clock gets 3x + 1 s, for programs that sleep); memory is the sandbox's cgroup limit.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from codefu.data.schema import row_to_problem
from codefu.data.sources.jsonl import RowError, parse_problem
from codefu.judge.checker import python_checker_refusal
from codefu.judge.extract import Program
from codefu.judge.judge import SingleRun
from codefu.judge.rewards import compute_reward, reward_spec, untested_problems
from codefu.judge.sandbox import Limits
from codefu.types import LANGUAGES, CheckerSpec, Problem, Verdict, checker_files_error

MIN_MEMORY_MB = 1  # below it the sandbox itself cannot start: our SandboxError for the request's mistake
MAX_JSON_DEPTH = 64  # requests nest 4 or 5 levels; a deeper one would only reach recursion limits later


class BadRequest(ValueError):
    """The request's fault: answered 4xx with this message (`status`: 400, 403, 404 or 413)."""

    MAX_CHARS = 1000  # messages quote what was sent, which may be megabytes

    def __init__(self, message: str, status: int = 400):
        super().__init__(message if len(message) <= self.MAX_CHARS else message[: self.MAX_CHARS] + "...")
        self.status = status


@dataclass(frozen=True)
class ServiceLimits:
    """What one request may ask for; over it is a 4xx naming the field, never a silent cut."""

    max_body_bytes: int = 64 << 20  # a CodeContests problem's hidden tests can be tens of MB
    max_code_bytes: int = 256 << 10
    max_run_timeout_s: float = 60.0
    max_compile_timeout_s: float = 60.0
    default_memory_mb: int = 1024  # SandboxFusion's memory_limit_MB of -1 ("no limit") gets this
    max_memory_mb: int = 4096
    max_output_bytes: int = 16 << 20  # stdout returned; a program printing more gets "Failed"
    max_files: int = 16
    max_tests: int = 1000  # of an inline /judge problem; CodeContests' largest have about 250


DEFAULT_LIMITS = ServiceLimits()


@dataclass(frozen=True)
class RunCodeRequest:
    program: Program
    stdin: str
    compile_timeout_s: float
    limits: Limits
    files: dict[str, str] = field(default_factory=dict)


def parse_run_code(body: Any, limits: ServiceLimits) -> RunCodeRequest:
    """A /run_code body as SandboxFusion's clients send it; unknown fields are ignored (clients add
    their own), known ones are checked."""
    obj = _object(body)
    code = _string(obj, "code", required=True)
    if len(code.encode("utf-8", errors="replace")) > limits.max_code_bytes:
        raise BadRequest(f"code: {len(code)} characters, over the {limits.max_code_bytes}-byte limit", 413)
    language = _string(obj, "language", required=True)
    if language not in LANGUAGES:
        raise BadRequest(f"language: {_show(language)} is not supported; use one of {', '.join(LANGUAGES)}")
    stdin = _string(obj, "stdin") or ""
    compile_s = _seconds(obj, "compile_timeout", 10.0, limits.max_compile_timeout_s)
    run_s = _seconds(obj, "run_timeout", 10.0, limits.max_run_timeout_s)
    memory = _memory_bytes(obj.get("memory_limit_MB"), limits)
    fetch = obj.get("fetch_files") or []
    if fetch:
        raise BadRequest("fetch_files: returning files the program wrote is not supported; send []")
    run_limits = Limits(run_s, run_s * 3 + 1, memory, limits.max_output_bytes)
    return RunCodeRequest(Program(language, code), stdin, compile_s, run_limits, _files(obj, limits))


def _memory_bytes(memory_mb: Any, limits: ServiceLimits) -> int:
    """SandboxFusion's memory_limit_MB in bytes: absent, null or <= 0 ("no limit" there) is the service's
    default; a fraction of a MB is kept (1.5 is 1.5 MiB), under MIN_MEMORY_MB is refused."""
    mb = -1 if memory_mb is None else _number(memory_mb, "memory_limit_MB")
    if mb <= 0:
        return limits.default_memory_mb << 20
    if mb < MIN_MEMORY_MB:
        raise BadRequest(f"memory_limit_MB: {mb:g} is under the {MIN_MEMORY_MB} MB a sandbox needs")
    if mb > limits.max_memory_mb:
        raise BadRequest(f"memory_limit_MB: {mb:g} is over this service's limit of {limits.max_memory_mb}")
    return int(mb * (1 << 20))


def run_code_response(run: SingleRun, language: str) -> dict[str, Any]:
    """SandboxFusion's answer for one compile-and-run."""
    if run.error:
        return _response("SandboxError", f"the sandbox failed: {run.error}", None, None)
    if not run.compiled:
        over = run.compile_over_limit
        status, code = ("TimeLimitExceeded", None) if over else ("Finished", 1)
        compile_result = _result(status, run.compile_s, code, "", run.compile_output)
        return _response("Failed", "compilation failed", compile_result, None)
    compile_result = None
    if language != "python":  # SandboxFusion runs Python without a compile step
        compile_result = _result("Finished", run.compile_s, 0, "", run.compile_output)
    r = run.run
    assert r is not None
    if r.limit in ("cpu", "wall"):
        which = "CPU" if r.limit == "cpu" else "wall-clock"
        result = _result("TimeLimitExceeded", r.wall_s, None, run.stdout, run.stderr)
        return _response("Failed", f"{which} time limit exceeded", compile_result, result)
    result = _result("Finished", r.wall_s, r.exit_code, run.stdout, run.stderr)
    if r.limit == "memory":
        return _response("Failed", "memory limit exceeded", compile_result, result)
    if r.limit == "output" or run.output_cut:
        return _response("Failed", "output limit exceeded", compile_result, result)
    if r.exit_code != 0:
        return _response("Failed", r.note or f"exit status {r.exit_code}", compile_result, result)
    return _response("Success", "", compile_result, result)


def _response(status: str, message: str, compile_result, run_result) -> dict[str, Any]:
    return {
        "status": status,
        "message": message,
        "compile_result": compile_result,
        "run_result": run_result,
        "executor_pod_name": None,
        "files": {},
    }


def _result(status: str, seconds: float, code: int | None, stdout: str, stderr: str) -> dict[str, Any]:
    return {
        "status": status,
        "execution_time": round(seconds, 6),
        "return_code": code,
        "stdout": stdout,
        "stderr": stderr,
    }


# ---- /judge ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JudgeRequest:
    problem: Problem
    response: str


def parse_judge(
    body: Any,
    dataset: list[Problem] | None,
    reward: str,
    limits: ServiceLimits = DEFAULT_LIMITS,
    python_checkers: Collection[str] = (),
) -> JudgeRequest:
    """A /judge body: {"response": text, and the problem as ONE of
    "name" or "index" (a problem of the service's --dataset), "problem" (an object in the problems-JSONL
    schema of `codefu prepare`), or "ground_truth" (a verl row's reward_model.ground_truth, with its
    optional "extra_info" and "data_source")}; "reward", if given, must be the service's.

    A problem sent inline is the client's: it is held to `limits` as /run_code is (`_check_inline`) and
    may name a python checker only if it is built in or in `python_checkers` (else 403). A --dataset
    problem is the operator's and is judged as it is."""
    obj = _object(body)
    response = obj.get("response")
    if not isinstance(response, str):
        raise BadRequest(f"response: expected the model's text as a string, got {_kind(response)}")
    asked = obj.get("reward")
    if asked is not None and asked != reward:
        raise BadRequest(f"reward: this service judges with {reward!r} (serve --reward), not {_show(asked)}")
    given = [k for k in ("name", "index", "problem", "ground_truth") if k in obj]
    if len(given) != 1:
        what = "none" if not given else " and ".join(given)
        raise BadRequest(f"give the problem as one of name, index, problem or ground_truth (got {what})")
    key = given[0]
    if key in ("name", "index"):
        return JudgeRequest(_from_dataset(obj, key, dataset), response)
    problem = _inline_problem(obj, key)
    _check_inline(problem, _FORMS[key], reward, limits, python_checkers)
    return JudgeRequest(problem, response)


@dataclass(frozen=True)
class _Form:
    """How one form of inline problem spells its fields, as a 4xx names them."""

    key: str
    time: str
    memory: str
    checker: str


_FORMS = {
    "problem": _Form("problem", "time_limit_s", "memory_limit_bytes", "problem.checker"),
    # a verl row keeps its checker beside the ground truth, in extra_info
    "ground_truth": _Form("ground_truth", "time_limit", "memory_limit_bytes", "extra_info.checker"),
}
# what the dataset-row parsers raise on a value of the wrong shape (OverflowError: an integer too large
# for a float, which _finite_limits refuses first where the parsers convert limits)
_ROW_ERRORS = (ValueError, KeyError, TypeError, AttributeError, OverflowError)


def _inline_problem(obj: dict[str, Any], key: str) -> Problem:
    """The problem of a body's "problem" or "ground_truth" (+ "extra_info", "data_source")."""
    form = _FORMS[key]
    if key == "problem":
        raw = _object(obj["problem"], "problem")
        _finite_limits(raw, form)
        try:
            return parse_problem(raw, "request")
        except RowError as e:
            raise BadRequest(f"problem.{e.column}: {e}") from None
        except _ROW_ERRORS as e:
            raise BadRequest(f"problem: {e}") from None
    ground_truth = obj["ground_truth"]
    if isinstance(ground_truth, str):  # verl stores it as JSON text: read under the body's own rules
        ground_truth = _load_json(ground_truth, "ground_truth")
    ground_truth = _json_texts_read(ground_truth, "ground_truth")
    if isinstance(ground_truth, dict):
        _finite_limits(ground_truth, form)
    row = {
        "data_source": _string(obj, "data_source") or "",
        "reward_model": {"ground_truth": ground_truth},
        "extra_info": _json_texts_read(obj.get("extra_info"), "extra_info"),
    }
    try:
        return row_to_problem(row, fallback_name="request")
    except _ROW_ERRORS as e:
        raise BadRequest(f"ground_truth: not a problem's ({type(e).__name__}: {e})") from None


# fields of a verl row that may hold JSON text, which the row parser reads with Python's json as it is
_JSON_TEXTS = {"ground_truth": ("public_tests", "private_tests"), "extra_info": ("checker", "function")}


def _json_texts_read(value: Any, where: str) -> Any:
    """`value` (a verl row's ground truth or extra_info) with its JSON text fields read under the body's
    own rules (`_load_json`); blank ones are left to the row parser, which reads them as absent."""
    if not isinstance(value, dict):
        return value  # the row parser refuses it, naming what it got
    texts = {k: v for k in _JSON_TEXTS[where] if isinstance(v := value.get(k), str) and v.strip()}
    return value | {k: _load_json(v, f"{where}.{k}") for k, v in texts.items()}


def _finite_limits(raw: dict[str, Any], form: _Form) -> None:
    """The numbers of an inline problem's limit fields (a number, or CodeContests' {seconds, nanos}) must
    be finite and fit a float: the row parsers convert them unguarded. Strings go on to the parsers,
    which read numeric ones as CodeContests' files have them."""
    for name in (form.time, form.memory):
        value = raw.get(name)
        for part, v in value.items() if isinstance(value, dict) else [("", value)]:
            if isinstance(v, int | float):  # bools too, which _number refuses
                _number(v, ".".join(filter(None, (form.key, name, part))))


def _check_inline(
    problem: Problem, form: _Form, reward: str, limits: ServiceLimits, python_checkers: Collection[str]
) -> None:
    """What the row parsers let through but an inline problem may not be."""
    _check_tests(problem, form, reward, limits)
    _check_limits(problem, form, limits)
    if problem.checker is not None:
        _check_checker(problem.checker, form.checker, limits, python_checkers)


def _check_tests(problem: Problem, form: _Form, reward: str, limits: ServiceLimits) -> None:
    tests = len(problem.public_tests) + len(problem.private_tests)
    if tests > limits.max_tests:
        raise BadRequest(f"{form.key}: {tests} tests, over this service's limit of {limits.max_tests}", 413)
    if untested_problems([problem], reward):  # else the judge's own "no tests" error, SANDBOX_ERROR
        which = reward_spec(reward).tests
        raise BadRequest(
            f"{form.key}: the problem has no tests for the {reward} reward, which judges {which} tests"
        )


def _check_limits(problem: Problem, form: _Form, limits: ServiceLimits) -> None:
    """An inline problem's limits bind as a /run_code request's do: its tests run under them, so a time
    limit of 1e6 s or a petabyte of memory would be a way around the service's limits."""
    seconds, most_s = problem.time_limit_s, limits.max_run_timeout_s
    if not (math.isfinite(seconds) and 0 < seconds <= most_s):
        raise BadRequest(
            f"{form.key}.{form.time}: {seconds:g} s; a time limit must be over 0 and at most this "
            f"service's {most_s:g} s"
        )
    memory, least, most = problem.memory_limit_bytes, MIN_MEMORY_MB << 20, limits.max_memory_mb << 20
    if not least <= memory <= most:
        raise BadRequest(
            f"{form.key}.{form.memory}: {memory} bytes; a memory limit must be {least} to {most} bytes "
            f"({MIN_MEMORY_MB} to {limits.max_memory_mb} MB)"
        )


def _check_checker(
    checker: CheckerSpec, where: str, limits: ServiceLimits, python_checkers: Collection[str]
) -> None:
    """The row parsers take a checker's kind, source and language as given; the judge needs them right,
    and a python checker runs in the judge's own process, so only the operator's may."""
    if checker.kind not in ("python", "program"):
        raise BadRequest(f'{where}.kind: expected "python" or "program", got {_show(checker.kind)}')
    if not isinstance(checker.source, str) or not checker.source:
        raise BadRequest(f"{where}.source: expected a non-empty string, got {_kind(checker.source)}")
    if checker.language not in LANGUAGES:
        raise BadRequest(f"{where}.language: {_show(checker.language)} is not one of {', '.join(LANGUAGES)}")
    if len(checker.source.encode("utf-8", errors="replace")) > limits.max_code_bytes:
        raise BadRequest(f"{where}.source: over the {limits.max_code_bytes}-byte limit", 413)
    if (refusal := python_checker_refusal(checker, python_checkers)) is not None:
        raise BadRequest(f"{where}: {refusal}", 403)


def _from_dataset(obj: dict, key: str, dataset: list[Problem] | None) -> Problem:
    if dataset is None:
        raise BadRequest(f"{key}: this service has no dataset (codefu serve --dataset); send the problem")
    value = obj[key]
    if key == "index":
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < len(dataset):
            raise BadRequest(
                f"index: {_show(value)} is not a row of the dataset (0..{len(dataset) - 1})", 404
            )
        return dataset[value]
    found = next((p for p in dataset if p.name == value), None)
    if found is None:
        raise BadRequest(f"name: no problem named {_show(value)} in the dataset", 404)
    return found


def verdict_record(problem: Problem, verdict: Verdict, reward: str) -> dict[str, Any]:
    """One verdict as `codefu judge` writes it (its JSONL line, less the input's line number)."""
    return {"name": problem.name, "reward": compute_reward(verdict, reward), **verdict.to_dict()}


# ---- fields ---------------------------------------------------------------------------------------


def parse_json(raw: bytes | bytearray) -> Any:
    """The body as JSON in UTF-8 (RFC 8259), under `_load_json`'s rules."""
    return parse_json_text(decode_body(raw))


def decode_body(raw: bytes | bytearray) -> str:
    """The body's text: UTF-8, a byte-order mark (which some clients write) skipped."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise BadRequest(f"the body is not valid JSON (not UTF-8: {e.reason} at byte {e.start})") from None


def parse_json_text(text: str) -> Any:
    return _load_json(text, "the body")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400 reads as infinity
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")  # Python's json reads NaN and Infinity; JSON has neither


_DECODER = json.JSONDecoder(parse_float=_finite_float, parse_constant=_not_json)


def _load_json(text: str, where: str) -> Any:
    """JSON as every number, nesting and string the service reads can take: no NaN or Infinity (no
    check of a limit holds against NaN), no float out of range, no integer over Python's 4,300 digits,
    nesting at most MAX_JSON_DEPTH deep (deeper would raise RecursionError wherever it is walked next:
    the parser, the row parsers, Ray's pickling), no lone surrogate in a string."""
    try:
        value = _DECODER.decode(text)
    except RecursionError:
        raise BadRequest(f"{where} nests deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as e:  # JSONDecodeError, the hooks' refusals, int's digit limit
        raise BadRequest(f"{where} is not valid JSON ({e})") from None
    # nesting needs brackets: most bodies have too few to be deep, and skip the walk
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and _deeper_than(value, MAX_JSON_DEPTH):
        raise BadRequest(f"{where} nests deeper than {MAX_JSON_DEPTH} levels")
    # the text is UTF-8, so a surrogate can only come from an escape: most bodies have none
    if _SURROGATE_ESCAPE.search(text) and _has_lone_surrogate(value):
        raise BadRequest(f"{where} holds a lone UTF-16 surrogate (a \\ud800-\\udfff escape without its pair)")
    return value


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _has_lone_surrogate(value: Any) -> bool:
    """Whether a string in `value` holds half a surrogate pair: not text, so writing it into a test's
    files fails in the judge (a SANDBOX_ERROR for the request's mistake)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _deeper_than(value: Any, most: int) -> bool:
    """Whether JSON `value` nests more than `most` arrays and objects deep (without recursion)."""
    stack = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        v, depth = stack.pop()
        if depth > most:
            return True
        children = v.values() if isinstance(v, dict) else v
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


def _object(v: Any, where: str = "the body") -> dict[str, Any]:
    if not isinstance(v, dict):
        raise BadRequest(f"{where}: expected a JSON object, got {_kind(v)}")
    return v


def _show(v: Any, most: int = 60) -> str:
    """`v` as an error quotes it: the head of its repr, which may be megabytes."""
    text = repr(v)
    return text if len(text) <= most else f"{text[:most]}... ({len(text)} characters)"


def _kind(v: Any) -> str:
    return "null" if v is None else type(v).__name__


def _string(obj: dict, key: str, required: bool = False) -> str | None:
    v = obj.get(key)
    if v is None and not required:
        return None
    if not isinstance(v, str):
        raise BadRequest(f"{key}: expected a string, got {_kind(v)}" + (" (required)" if v is None else ""))
    return v


def _seconds(obj: dict, key: str, default: float, most: float) -> float:
    v = obj.get(key)
    if v is None:
        return default
    seconds = _number(v, key)
    if seconds <= 0:
        raise BadRequest(f"{key}: expected a positive number of seconds, got {_show(v)}")
    if seconds > most:
        raise BadRequest(f"{key}: {_show(v)} s is over this service's limit of {most:g} s")
    return seconds


def _number(value: Any, where: str) -> float:
    """A JSON number as a finite float. A bool is not one; an integer too large for a float is refused
    here, not an OverflowError where it is used."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadRequest(f"{where}: expected a number, got {_kind(value)}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise BadRequest(f"{where}: {_show(value)} is out of range")
    return number


def _files(obj: dict, limits: ServiceLimits) -> dict[str, str]:
    """SandboxFusion's files: {name: base64 content}, placed beside the program (plain names only)."""
    files = obj.get("files") or {}
    if not isinstance(files, dict):
        raise BadRequest(f"files: expected an object of name -> base64 content, got {_kind(files)}")
    if len(files) > limits.max_files:
        raise BadRequest(f"files: {len(files)} files, over this service's limit of {limits.max_files}")
    out: dict[str, str] = {}
    for name, content in files.items():
        if content is None:
            continue
        if not isinstance(content, str):
            raise BadRequest(f"files[{_show(name)}]: expected base64 text, got {_kind(content)}")
        try:
            out[name] = base64.b64decode(content, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise BadRequest(f"files[{_show(name)}]: not base64 of UTF-8 text") from None
    if (error := checker_files_error(out)) is not None:
        raise BadRequest(f"files: {error}")
    return out
