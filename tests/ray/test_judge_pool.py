"""The judge pool on a real local Ray cluster: same verdicts as the local judge, dead workers retried,
stuck submissions timed out."""

import threading

import pytest
import ray

from codefu.judge import JudgeConfig
from codefu.judge.pool import PoolConfig, RayJudgePool
from codefu.types import Problem, Status, TestCase
from helpers.arriving import judge_while_arriving

PROBLEM = Problem("double", "", [], [TestCase(f"{i}\n", f"{2 * i}\n") for i in range(6)], time_limit_s=2)
RIGHT = "```python\nprint(2 * int(input()))\n```"
WRONG = "```python\nn = int(input())\nprint(2 * n + (n == 3))\n```"
SLOW_RIGHT = "```python\nimport time\ntime.sleep(0.3)\nprint(2 * int(input()))\n```"


def test_pool_judges_like_the_local_judge(local_ray):
    pool = RayJudgePool(JudgeConfig(), PoolConfig(in_flight_per_worker=2))
    try:
        assert pool.capacity == 2
        items = [(PROBLEM, RIGHT), (PROBLEM, WRONG), (PROBLEM, "no code")] * 3
        verdicts = dict(pool.judge_many(items))
        assert sorted(verdicts) == list(range(9))
        for i, (_, response) in enumerate(items):
            expected = {RIGHT: Status.ACCEPTED, WRONG: Status.WRONG_ANSWER, "no code": Status.NO_CODE}[
                response
            ]
            assert verdicts[i].status is expected
        assert verdicts[1].passed == 5 and verdicts[1].first_failure == 3
        # each distinct program ran once; its twins (positions 3-8) share its verdict
        assert [verdicts[i].reused for i in range(9)] == [False] * 3 + [True] * 6
        assert verdicts[4].tests == verdicts[1].tests
    finally:
        pool.close()


def test_pool_keeps_to_its_instance_group(local_ray):
    pool = RayJudgePool(JudgeConfig(), PoolConfig(instance_group="cpu"))
    try:
        assert pool.capacity == 2
        assert next(iter(pool.judge_many([(PROBLEM, RIGHT)])))[1].status is Status.ACCEPTED
    finally:
        pool.close()
    with pytest.raises(RuntimeError, match="instance group 'gpu'"):
        RayJudgePool(JudgeConfig(), PoolConfig(instance_group="gpu"))


def test_dead_worker_is_replaced_and_work_retried(local_ray):
    pool = RayJudgePool(JudgeConfig(), PoolConfig(in_flight_per_worker=1))
    try:
        first_actor = pool.slots[0].actor
        results = {}
        # distinct programs: identical ones would be judged once
        stream = pool.judge_many([(PROBLEM, SLOW_RIGHT[:-3] + f"# {k}\n```") for k in range(6)])
        i, v = next(stream)
        results[i] = v
        ray.kill(first_actor, no_restart=True)  # submissions in flight on it die with it
        for i, v in stream:
            results[i] = v
        assert sorted(results) == list(range(6))
        assert all(v.status is Status.ACCEPTED for v in results.values()), [
            v.message for v in results.values()
        ]
        assert pool.slots[0].actor is not first_actor
    finally:
        pool.close()


def test_submission_timeout_is_a_sandbox_error(local_ray):
    sleeper = Problem("sleep", "", [], [TestCase("", "x")], time_limit_s=20)
    pool = RayJudgePool(JudgeConfig(), PoolConfig(submission_timeout_s=2))
    try:
        verdicts = dict(pool.judge_many([(sleeper, "```python\nimport time\ntime.sleep(30)\n```")]))
        assert verdicts[0].status is Status.SANDBOX_ERROR
        assert "timeout" in verdicts[0].message
    finally:
        pool.close()


def test_pool_judges_submissions_as_they_arrive(local_ray):
    pool = RayJudgePool(JudgeConfig(), PoolConfig())
    try:
        verdicts = judge_while_arriving(pool.judge_many, PROBLEM, [RIGHT, WRONG, "Again:\n" + RIGHT])
    finally:
        pool.close()
    assert [verdicts[i].status for i in range(3)] == [Status.ACCEPTED, Status.WRONG_ANSWER, Status.ACCEPTED]
    assert [verdicts[i].reused for i in range(3)] == [False, False, True]


def test_two_calls_at_once_share_the_slots_and_the_reported_load(local_ray):
    """Self-repair judges public-test checks and hidden-test scores at the same time, on two threads: each
    call gets all its verdicts, the pool never has more in flight than its slots hold (the in-flight count
    it reports is the slots'), and the backlog it reports is both calls' together: the short call ending
    does not report 0 while the long one works."""
    backlog, in_flight = [], []

    def on_load(queued, flying):
        backlog.append(queued + flying)
        in_flight.append(flying)

    pool = RayJudgePool(JudgeConfig(), PoolConfig(in_flight_per_worker=1), on_load=on_load)
    try:
        sizes = [2, 8]
        programs = [
            [(PROBLEM, SLOW_RIGHT[:-3] + f"# {c}-{k}\n```") for k in range(n)] for c, n in enumerate(sizes)
        ]
        results: list[dict] = [{}, {}]

        def judge(c):
            results[c] = dict(pool.judge_many(programs[c]))

        threads = [threading.Thread(target=judge, args=(c,)) for c in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads), "a call never ended"
        for c, n in enumerate(sizes):
            assert sorted(results[c]) == list(range(n))
            assert all(v.status is Status.ACCEPTED for v in results[c].values())
        limit = sum(s.workers for s in pool.slots) * pool.config.in_flight_per_worker
        assert 0 < max(in_flight) <= limit and all(s.in_flight == 0 for s in pool.slots)
        first_zero = backlog.index(0)
        assert all(b == 0 for b in backlog[first_zero:]), backlog  # 0 only once both are done
    finally:
        pool.close()
