"""The test audit on the Ray judge pool, as rewards are judged: verdicts through `judge_many`, reference
answers through the pool's `run_once`; the generated test that kills the survivor is found."""

from codefu.judge.audit import AuditConfig, audit_judge_config, audit_problems
from codefu.judge.extract import Program
from codefu.judge.judge import run_limits
from codefu.judge.pool import PoolConfig, RayJudgePool
from codefu.types import Problem, TestCase

RIGHT = {"python": "print(2 * int(input()))\n"}
WRONG = [{"language": "python", "source": "n = int(input())\nprint(2 * n + (n == 3))\n", "flaw": "n = 3"}]
# every value from 0 to 5 but 3: the wrong solution passes all, and 3 is the only new input in range
PROBLEM = Problem(
    "double",
    "",
    [],
    [TestCase(f"{i}\n", f"{2 * i}\n") for i in (0, 1, 2, 4, 5)],
    time_limit_s=2,
    extra={"solutions": RIGHT, "wrong_solutions": WRONG},
)


def test_audit_on_the_pool_finds_the_killing_test(local_ray):
    pool = RayJudgePool(audit_judge_config(), PoolConfig())
    try:
        run = pool.run_once(
            Program("python", RIGHT["python"]), "21\n", run_limits(pool.judge_config, PROBLEM, "python")
        )
        assert run.compiled and run.stdout == "42\n"
        config = AuditConfig(augment_tests=2, candidates=8, rounds=1)
        [(audit, augmented)] = audit_problems([PROBLEM], pool, config, parallel=2)
    finally:
        pool.close()
    assert [r.status for r in audit.correct] == ["ACCEPTED"]
    assert [r.index for r in audit.survivors] == [0]
    assert audit.augment.added == 1 and audit.augment.survivors_after == []
    assert augmented.private_tests[-1] == TestCase("3\n", "6\n")
    assert augmented.extra["generated_tests"] == 1
    assert "killed by a generated test" in audit.flags()[0]
