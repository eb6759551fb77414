"""codefu's judge as verl's custom reward function, in process: the verdicts and rewards `codefu train`
uses, for a verl run on the same data (verl-schema parquet written by `codefu prepare`, or CodeFu's).

    # verl config (ppo_trainer.yaml)
    custom_reward_function:
      path: <python3 -c "import codefu.judge.verl_reward as m; print(m.__file__)">
      name: compute_score
      reward_kwargs: {reward: codefu, max_tests: 10}     # optional

verl calls `compute_score(data_source, solution_str, ground_truth, extra_info)` once per response with
the row's `reward_model.ground_truth` and `extra_info`; the problem is read from them exactly as
`load_problems` reads a row (tests, limits, checker, function-call spec), judged in the sandbox
(bubblewrap, a compile per response, tests on every core of the process's judge), and the reward is
`codefu.judge.rewards`' by name. One judge per process, made at the first call.

With `url` (reward_kwargs: {url: "http://judge-host:8080"}), the response is judged by a `codefu serve`
service instead, through its /judge endpoint: the verl workers then need no sandbox, and the judging
spreads over the service's replicas. The service's own --reward, --max-tests and --seed apply there.
"""

from __future__ import annotations

import atexit
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Collection
from typing import Any

from codefu.data.schema import row_to_problem
from codefu.judge.checker import python_checker_refusal
from codefu.judge.judge import Judge, JudgeConfig
from codefu.judge.rewards import compute_reward
from codefu.types import Status

_lock = threading.Lock()
_judges: dict[tuple[int | None, int, tuple[str, ...]], Judge] = {}


def _judge(max_tests: int | None, seed: int, python_checkers: tuple[str, ...]) -> Judge:
    key = (max_tests, seed, python_checkers)
    with _lock:
        if key not in _judges:
            config = JudgeConfig(max_tests=max_tests, seed=seed, python_checkers=list(python_checkers))
            judge = Judge(config)
            atexit.register(judge.close)  # its sandbox sessions and children go with the process
            _judges[key] = judge
        return _judges[key]


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    reward: str = "codefu",
    max_tests: int | None = None,
    seed: int = 0,
    url: str | None = None,
    token: str | None = None,
    timeout_s: float = 600.0,
    python_checkers: Collection[str] = (),
) -> dict[str, Any]:
    """The reward of one response, with what the judge saw (verl logs the extra keys).

    Returns {"score": the reward (`reward`: codefu, codefu_code, codefu_stage1 or binary), "acc": accepted,
    "status": the verdict, "passed", "total": tests, "judge_error": True when the judge itself failed
    (SANDBOX_ERROR: never the response's fault; verl has no way to leave a sample out, so its score is 0)}.
    A response is untrusted input: any text gets a verdict. A `ground_truth` that is not a problem's
    (no tests, unreadable) raises ValueError naming the data source: that is the dataset's fault.
    With `url`, a `codefu serve` service judges (`token`: its bearer token); a busy service (503) is
    retried after its Retry-After until `timeout_s`; one that cannot be reached raises RuntimeError.
    `python_checkers` are the python checkers ("module:function", the operator's code) a row may name
    besides codefu's built-ins; a row naming another raises ValueError (with url: the service's
    --python-checker list applies).
    """
    if url is not None:
        if max_tests is not None or seed != 0 or python_checkers:
            raise ValueError(
                "compute_score: with url, the service's --max-tests, --seed and --python-checker apply; "
                "drop max_tests, seed and python_checkers"
            )
        body = {
            "response": solution_str if isinstance(solution_str, str) else "",
            "data_source": data_source,
            "ground_truth": ground_truth,
            "extra_info": extra_info,
            "reward": reward,
        }
        return _scored(_post_judge(url, body, token, timeout_s))
    row = {"data_source": data_source, "reward_model": {"ground_truth": ground_truth}}
    row["extra_info"] = extra_info
    try:
        problem = row_to_problem(row, fallback_name=f"{data_source} problem")
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"compute_score: a ground_truth of {data_source!r} is not a problem: {e}") from e
    if not problem.public_tests and not problem.private_tests:
        raise ValueError(f"compute_score: the ground_truth of {problem.name!r} ({data_source}) has no tests")
    if (refusal := python_checker_refusal(problem.checker, python_checkers)) is not None:
        raise ValueError(f"compute_score: {problem.name!r} ({data_source}): {refusal}")
    judge = _judge(max_tests, seed, tuple(sorted(python_checkers)))
    verdict = judge.judge(problem, solution_str if isinstance(solution_str, str) else "")
    record = {
        "reward": compute_reward(verdict, reward),
        "status": verdict.status.value,
        "passed": verdict.passed,
        "total": verdict.total,
    }
    return _scored(record)


def _scored(record: dict[str, Any]) -> dict[str, Any]:
    """verl's answer from a verdict record (`codefu judge`'s, or the service's /judge)."""
    score = record["reward"]
    return {
        "score": 0.0 if score is None else float(score),
        "acc": record["status"] == Status.ACCEPTED.value,
        "status": record["status"],
        "passed": record["passed"],
        "total": record["total"],
        "judge_error": score is None,
    }


def _post_judge(url: str, body: dict[str, Any], token: str | None, timeout_s: float) -> dict[str, Any]:
    data = json.dumps(body).encode()
    deadline = time.monotonic() + timeout_s
    while True:
        request = urllib.request.Request(url.rstrip("/") + "/judge", data=data, method="POST")
        request.add_header("Content-Type", "application/json")
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        left = deadline - time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=max(1.0, left)) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")[:500]
            if e.code == 503 and left > 0:  # busy: come back when it says
                time.sleep(min(float(e.headers.get("Retry-After") or 1), max(0.0, left)))
                continue
            where = f"compute_score: the judge service at {url}"
            if 400 <= e.code < 500:
                raise ValueError(f"{where} refused the request: {detail}") from None
            raise RuntimeError(f"{where} failed ({e.code}): {detail}") from None
        except (urllib.error.URLError, OSError) as e:
            raise RuntimeError(f"compute_score: cannot reach the judge service at {url}: {e}") from None
