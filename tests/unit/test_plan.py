"""The cluster plan is a pure function: config -> needs per role; a too-small cluster fails fast."""

import pytest

from codefu.errors import CodefuError
from codefu.orchestrator.plan import ResourcesConfig, check_plan, make_plan


def test_cpu_default_plan():
    plan = make_plan(ResourcesConfig(), kl_enabled=False)
    assert [r.role for r in plan.roles] == ["trainer", "rollout", "judge"]  # no reference without KL
    assert plan.gpus == 0 and plan.cpus == 3
    check_plan(plan, {"CPU": 3})


def test_colocated_gpus_counted_once_per_rank():
    plan = make_plan(ResourcesConfig(trainer_ranks=8, gpus_per_rank=1, rollout_workers=8), kl_enabled=True)
    assert plan.need("reference").count == 1 and plan.need("rollout").count == 8
    # 8 GPUs in all: each rank's share plus the slivers of the actors beside it
    assert plan.gpus == pytest.approx(8 - 0.1 * 7)  # the reference sits beside rank 0 only
    assert all(r.gpus > 0 for r in plan.roles if r.role != "judge")
    check_plan(plan, {"CPU": 32, "GPU": 8})


def test_split_mode_needs_its_own_gpus():
    res = ResourcesConfig(trainer_ranks=4, gpus_per_rank=1, rollout_workers=4, gpus_per_rollout_worker=1,
                          colocate=False)
    plan = make_plan(res, kl_enabled=True)
    assert plan.gpus == 4 + 1 + 4
    with pytest.raises(CodefuError, match=r"9 GPUs needed \(trainer 4, reference 1, rollout 4\), the cluster has 8"):
        check_plan(plan, {"CPU": 64, "GPU": 8})


def test_error_lists_everything_missing_at_once():
    plan = make_plan(ResourcesConfig(trainer_ranks=2, gpus_per_rank=1, judge_cpus=16), kl_enabled=False)
    with pytest.raises(CodefuError) as e:
        check_plan(plan, {"CPU": 4})
    assert "CPUs needed" in str(e.value) and "GPUs needed" in str(e.value) and "judge 16" in str(e.value)


@pytest.mark.parametrize(
    "res,message",
    [
        (ResourcesConfig(trainer_ranks=0), "at least 1"),
        (ResourcesConfig(gpus_per_rank=-1), "cannot be negative"),
        (ResourcesConfig(trainer_ranks=1, gpus_per_rank=1, rollout_workers=2), "at most one rollout worker"),
    ],
)
def test_bad_resources(res, message):
    with pytest.raises(CodefuError, match=message):
        make_plan(res, kl_enabled=False)
