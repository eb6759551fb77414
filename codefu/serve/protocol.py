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
from dataclasses import dataclass, field
from typing import Any

from codefu.data.schema import row_to_problem
from codefu.data.sources.jsonl import RowError, parse_problem
from codefu.judge.extract import Program
from codefu.judge.judge import SingleRun
from codefu.judge.rewards import compute_reward
from codefu.judge.sandbox import Limits
from codefu.types import LANGUAGES, Problem, Verdict, checker_files_error


class BadRequest(ValueError):
    """The request's fault: answered 4xx with this message (`status`: 400, 413 or 422)."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
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
        raise BadRequest(f"language: {language!r} is not supported; use one of {', '.join(LANGUAGES)}")
    stdin = _string(obj, "stdin") or ""
    compile_s = _seconds(obj, "compile_timeout", 10.0, limits.max_compile_timeout_s)
    run_s = _seconds(obj, "run_timeout", 10.0, limits.max_run_timeout_s)
    memory_mb = obj.get("memory_limit_MB", -1)
    if memory_mb is None:
        memory_mb = -1
    if not isinstance(memory_mb, int | float) or isinstance(memory_mb, bool):
        raise BadRequest(f"memory_limit_MB: expected a number, got {type(memory_mb).__name__}")
    if memory_mb <= 0:
        memory_mb = limits.default_memory_mb
    if memory_mb > limits.max_memory_mb:
        most = limits.max_memory_mb
        raise BadRequest(f"memory_limit_MB: {memory_mb} is over this service's limit of {most}")
    fetch = obj.get("fetch_files") or []
    if fetch:
        raise BadRequest("fetch_files: returning files the program wrote is not supported; send []")
    run_limits = Limits(run_s, run_s * 3 + 1, int(memory_mb) << 20, limits.max_output_bytes)
    return RunCodeRequest(Program(language, code), stdin, compile_s, run_limits, _files(obj, limits))


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


def parse_judge(body: Any, dataset: list[Problem] | None, reward: str) -> JudgeRequest:
    """A /judge body: {"response": text, and the problem as ONE of
    "name" or "index" (a problem of the service's --dataset), "problem" (an object in the problems-JSONL
    schema of `codefu prepare`), or "ground_truth" (a verl row's reward_model.ground_truth, with its
    optional "extra_info" and "data_source")}; "reward", if given, must be the service's."""
    obj = _object(body)
    response = obj.get("response")
    if not isinstance(response, str):
        raise BadRequest(f"response: expected the model's text as a string, got {_kind(response)}")
    asked = obj.get("reward")
    if asked is not None and asked != reward:
        raise BadRequest(f"reward: this service judges with {reward!r} (serve --reward), not {asked!r}")
    given = [k for k in ("name", "index", "problem", "ground_truth") if k in obj]
    if len(given) != 1:
        what = "none" if not given else " and ".join(given)
        raise BadRequest(f"give the problem as one of name, index, problem or ground_truth (got {what})")
    key = given[0]
    if key in ("name", "index"):
        return JudgeRequest(_from_dataset(obj, key, dataset), response)
    if key == "problem":
        try:
            problem = parse_problem(_object(obj["problem"], "problem"), "request")
        except RowError as e:
            raise BadRequest(f"problem.{e.column}: {e}") from None
        except (ValueError, KeyError, TypeError) as e:
            raise BadRequest(f"problem: {e}") from None
    else:
        row = {
            "data_source": obj.get("data_source") or "",
            "reward_model": {"ground_truth": obj["ground_truth"]},
            "extra_info": obj.get("extra_info"),
        }
        try:
            problem = row_to_problem(row, fallback_name="request")
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise BadRequest(f"ground_truth: not a problem's ({type(e).__name__}: {e})") from None
    if not problem.public_tests and not problem.private_tests:
        raise BadRequest(f"{key}: the problem has no tests")
    return JudgeRequest(problem, response)


def _from_dataset(obj: dict, key: str, dataset: list[Problem] | None) -> Problem:
    if dataset is None:
        raise BadRequest(f"{key}: this service has no dataset (codefu serve --dataset); send the problem")
    value = obj[key]
    if key == "index":
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < len(dataset):
            raise BadRequest(f"index: {value!r} is not a row of the dataset (0..{len(dataset) - 1})", 404)
        return dataset[value]
    found = next((p for p in dataset if p.name == value), None)
    if found is None:
        raise BadRequest(f"name: no problem named {value!r} in the dataset", 404)
    return found


def verdict_record(problem: Problem, verdict: Verdict, reward: str) -> dict[str, Any]:
    """One verdict as `codefu judge` writes it (its JSONL line, less the input's line number)."""
    return {"name": problem.name, "reward": compute_reward(verdict, reward), **verdict.to_dict()}


# ---- fields ---------------------------------------------------------------------------------------


def parse_json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadRequest(f"the body is not valid JSON ({e})") from None


def _object(v: Any, where: str = "the body") -> dict[str, Any]:
    if not isinstance(v, dict):
        raise BadRequest(f"{where}: expected a JSON object, got {_kind(v)}")
    return v


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
    if not isinstance(v, int | float) or isinstance(v, bool) or not v > 0:
        raise BadRequest(f"{key}: expected a positive number of seconds, got {v!r}")
    if v > most:
        raise BadRequest(f"{key}: {v} s is over this service's limit of {most:g} s")
    return float(v)


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
            raise BadRequest(f"files[{name!r}]: expected base64 text, got {_kind(content)}")
        try:
            out[name] = base64.b64decode(content, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise BadRequest(f"files[{name!r}]: not base64 of UTF-8 text") from None
    if (error := checker_files_error(out)) is not None:
        raise BadRequest(f"files: {error}")
    return out
