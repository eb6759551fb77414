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
"""

from __future__ import annotations

import atexit
import threading
from typing import Any

from codefu.data.schema import row_to_problem
from codefu.judge.judge import Judge, JudgeConfig
from codefu.judge.rewards import compute_reward
from codefu.types import Status

_lock = threading.Lock()
_judges: dict[tuple[int | None, int], Judge] = {}


def _judge(max_tests: int | None, seed: int) -> Judge:
    key = (max_tests, seed)
    with _lock:
        if key not in _judges:
            judge = Judge(JudgeConfig(max_tests=max_tests, seed=seed))
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
) -> dict[str, Any]:
    """The reward of one response, with what the judge saw (verl logs the extra keys).

    Returns {"score": the reward (`reward`: codefu, codefu_code, codefu_stage1 or binary), "acc": accepted,
    "status": the verdict, "passed", "total": tests, "judge_error": True when the judge itself failed
    (SANDBOX_ERROR: never the response's fault; verl has no way to leave a sample out, so its score is 0)}.
    A response is untrusted input: any text gets a verdict. A `ground_truth` that is not a problem's
    (no tests, unreadable) raises ValueError naming the data source: that is the dataset's fault.
    """
    row = {"data_source": data_source, "reward_model": {"ground_truth": ground_truth}}
    row["extra_info"] = extra_info
    try:
        problem = row_to_problem(row, fallback_name=f"{data_source} problem")
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"compute_score: a ground_truth of {data_source!r} is not a problem: {e}") from e
    if not problem.public_tests and not problem.private_tests:
        raise ValueError(f"compute_score: the ground_truth of {problem.name!r} ({data_source}) has no tests")
    verdict = _judge(max_tests, seed).judge(problem, solution_str if isinstance(solution_str, str) else "")
    score = compute_reward(verdict, reward)
    return {
        "score": 0.0 if score is None else float(score),
        "acc": verdict.status is Status.ACCEPTED,
        "status": verdict.status.value,
        "passed": verdict.passed,
        "total": verdict.total,
        "judge_error": score is None,
    }
