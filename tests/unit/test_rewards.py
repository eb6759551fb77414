import pytest

from codefu.judge.rewards import REWARDS, compute_reward, reward_spec, select_tests
from codefu.types import Problem, Status, TestCase, Verdict


def v(status, passed=0, total=4):
    return Verdict(status, passed=passed, total=total)


@pytest.mark.parametrize(
    "verdict,codefu,code,stage1,binary",
    [
        (v(Status.NO_CODE), -1.0, 0.0, -1.0, 0.0),
        (v(Status.COMPILE_ERROR), -0.5, 0.0, 0.0, 0.0),
        (v(Status.TIME_LIMIT, passed=2), 0.0, 0.0, 0.0, 0.0),
        (v(Status.WRONG_ANSWER, passed=1), 0.25, 0.0, 0.125, 0.0),  # 0.25 ** 1.5 = 0.125
        (v(Status.RUNTIME_ERROR, passed=0), 0.0, 0.0, 0.0, 0.0),
        (v(Status.MEMORY_LIMIT, passed=3), 0.75, 0.0, 0.75**1.5, 0.0),
        (v(Status.ACCEPTED, passed=4), 1.0, 1.0, 1.0, 1.0),
    ],
)
def test_reward_table(verdict, codefu, code, stage1, binary):
    assert compute_reward(verdict, "codefu") == pytest.approx(codefu)
    assert compute_reward(verdict, "codefu_code") == pytest.approx(code)
    assert compute_reward(verdict, "codefu_stage1") == pytest.approx(stage1)
    assert compute_reward(verdict, "binary") == pytest.approx(binary)


def test_sandbox_error_is_never_scored():
    for name in REWARDS:
        assert compute_reward(v(Status.SANDBOX_ERROR), name) is None


def test_unknown_reward_names_the_choices():
    with pytest.raises(ValueError, match="codefu_stage1"):
        reward_spec("nope")


def test_all_or_nothing_rewards_allow_early_stop():
    assert reward_spec("binary").all_or_nothing and reward_spec("codefu_code").all_or_nothing
    assert not reward_spec("codefu").all_or_nothing


def problem(n=20):
    private = [TestCase("x" * (i % 7 + 1) + f" {i}", str(i)) for i in range(n)]
    if n > 13:
        private[13] = TestCase("y" * 1000, "big")
        private[4] = TestCase("z" * 900, "big2")
    return Problem("p", "", [TestCase("pub", "1")], private)


def test_select_tests_is_deterministic_keeps_largest_and_order():
    p = problem()
    a = select_tests(p, "private", 8, seed=1)
    assert a == select_tests(p, "private", 8, seed=1)
    assert len(a) == 8
    assert p.private_tests[13] in a and p.private_tests[4] in a  # the two largest (budget // 4 = 2)
    positions = [p.private_tests.index(t) for t in a]
    assert positions == sorted(positions)
    others = {
        tuple(p.private_tests.index(t) for t in select_tests(p, "private", 8, seed=s)) for s in range(10)
    }
    assert len(others) > 1  # the seed changes the sample


def test_select_tests_sets_and_no_cut():
    p = problem(5)
    assert select_tests(p, "private", None, 0) == p.private_tests
    assert select_tests(p, "public+private", 100, 0) == p.public_tests + p.private_tests
    assert select_tests(p, "private", 0, 0) == []
