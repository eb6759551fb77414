"""The cluster layout is a pure function: config -> bundles, which actor goes in which bundle, needs per role;
a too-small cluster fails fast naming what is missing."""

from collections import Counter

import pytest

from codefu.errors import CodefuError
from codefu.orchestrator.layout import SLIVER, ResourcesConfig, check_layout, make_layout


def assert_consistent(layout, res: ResourcesConfig, kl: bool) -> None:
    """Every actor has exactly one slot, every slot fits its bundle, and the role totals add up."""
    counts = Counter(s.role for s in layout.slots)
    assert counts == Counter(
        {"trainer": res.trainer_ranks, "rollout": res.rollout_workers}
        | ({"reference": res.trainer_ranks} if kl else {})
    )
    for role in counts:
        assert [s.index for s in layout.slots_of(role)] == list(range(counts[role]))
    for i, b in enumerate(layout.bundles):
        inside = [s for s in layout.slots if s.bundle == i]
        assert inside, f"bundle {i} is empty"
        assert sum(s.gpus for s in inside) <= b.gpus + 1e-9 and sum(s.cpus for s in inside) <= b.cpus + 1e-9
    for r in layout.roles:
        if r.role != "judge":
            assert r.total_gpus == pytest.approx(sum(s.gpus for s in layout.slots_of(r.role)))


def test_cpu_default_plan():
    layout = make_layout(ResourcesConfig(), kl_enabled=False)
    assert [r.role for r in layout.roles] == ["trainer", "rollout", "judge"]  # no reference without KL
    assert layout.gpus == 0 and layout.cpus == 3
    # the same path as on GPUs: one CPU bundle holding the rank and its rollout worker
    assert [b.resources() for b in layout.bundles] == [{"CPU": 2.0}]
    assert [(s.role, s.bundle) for s in layout.slots] == [("trainer", 0), ("rollout", 0)]
    check_layout(layout, {"CPU": 3})


@pytest.mark.parametrize("gpus", [1, 2, 4, 8])
@pytest.mark.parametrize("kl", [False, True])
def test_colocated_one_bundle_per_gpu(gpus, kl):
    res = ResourcesConfig(trainer_ranks=gpus, gpus_per_rank=1, cpus_per_rank=2, rollout_workers=gpus)
    layout = make_layout(res, kl_enabled=kl)
    assert_consistent(layout, res, kl)
    assert layout.strategy == "PACK" and layout.gpus == gpus
    assert [b.resources() for b in layout.bundles] == [{"CPU": 2 + 1 + 2 * kl, "GPU": 1.0}] * gpus
    for i in range(gpus):  # rank i, its reference rank and rollout worker i share GPU i
        inside = {(s.role, s.index) for s in layout.slots if s.bundle == i}
        assert inside == {("trainer", i), ("rollout", i)} | ({("reference", i)} if kl else set())
    assert layout.slots_of("trainer")[0].gpus == pytest.approx(1 - SLIVER * (1 + kl))
    assert all(s.gpus == SLIVER for s in layout.slots if s.role != "trainer")
    check_layout(layout, {"CPU": 64, "GPU": gpus}, [{"CPU": 64, "GPU": gpus}])


def test_colocated_with_fewer_rollout_workers_than_ranks():
    res = ResourcesConfig(trainer_ranks=4, gpus_per_rank=1, rollout_workers=2)
    layout = make_layout(res, kl_enabled=True)
    assert_consistent(layout, res, kl=True)
    assert [s.bundle for s in layout.slots_of("rollout")] == [0, 1] and len(layout.bundles) == 4


@pytest.mark.parametrize("gpus", [2, 4, 8])
def test_split_mode_rollout_on_gpus_of_its_own(gpus):
    half = gpus // 2
    res = ResourcesConfig(
        trainer_ranks=half, gpus_per_rank=1, rollout_workers=half, gpus_per_rollout_worker=1, colocate=False
    )
    layout = make_layout(res, kl_enabled=True)
    assert_consistent(layout, res, kl=True)
    assert layout.gpus == gpus and len(layout.bundles) == gpus
    assert [s.bundle for s in layout.slots_of("trainer")] == list(range(half))
    assert [s.bundle for s in layout.slots_of("reference")] == list(range(half))  # beside its trainer rank
    assert [s.bundle for s in layout.slots_of("rollout")] == list(range(half, gpus))
    assert all(s.gpus == 1 for s in layout.slots_of("rollout"))
    check_layout(layout, {"CPU": 64, "GPU": gpus})


def test_split_mode_with_tensor_parallel_engines_needs_nodes_that_hold_them():
    res = ResourcesConfig(
        trainer_ranks=4, gpus_per_rank=1, rollout_workers=2, gpus_per_rollout_worker=2, colocate=False
    )
    layout = make_layout(res, kl_enabled=False)
    assert layout.gpus == 8 and [b.gpus for b in layout.bundles] == [1, 1, 1, 1, 2, 2]
    check_layout(layout, {"CPU": 16, "GPU": 8}, [{"CPU": 8, "GPU": 4}, {"CPU": 8, "GPU": 4}])
    one_gpu_nodes = [{"CPU": 2, "GPU": 1}] * 8
    with pytest.raises(
        CodefuError, match=r"bundle 4 \(rollout 0: 1 CPUs, 2 GPUs on one node\) fits on no node"
    ):
        check_layout(layout, {"CPU": 16, "GPU": 8}, one_gpu_nodes)


def test_cpu_plan_gives_extra_rollout_workers_bundles_of_their_own():
    res = ResourcesConfig(rollout_workers=2)
    layout = make_layout(res, kl_enabled=False)
    assert_consistent(layout, res, kl=False)
    assert [s.bundle for s in layout.slots_of("rollout")] == [0, 1] and layout.gpus == 0


def test_split_mode_error_lists_every_role():
    res = ResourcesConfig(
        trainer_ranks=4, gpus_per_rank=1, rollout_workers=5, gpus_per_rollout_worker=1, colocate=False
    )
    layout = make_layout(res, kl_enabled=True)
    assert layout.gpus == 4 + 5  # the reference shares the trainers' GPUs
    with pytest.raises(
        CodefuError, match=r"9 GPUs needed \(trainer 3.6, reference 0.4, rollout 5\), the cluster has 8"
    ):
        check_layout(layout, {"CPU": 64, "GPU": 8})


def test_error_lists_everything_missing_at_once():
    layout = make_layout(ResourcesConfig(trainer_ranks=2, gpus_per_rank=1, judge_cpus=16), kl_enabled=False)
    with pytest.raises(CodefuError) as e:
        check_layout(layout, {"CPU": 4})
    assert "CPUs needed" in str(e.value) and "GPUs needed" in str(e.value) and "judge 16" in str(e.value)


@pytest.mark.parametrize(
    "res,sp,message",
    [
        (ResourcesConfig(trainer_ranks=0), 1, "at least 1"),
        (ResourcesConfig(gpus_per_rank=-1), 1, "cannot be negative"),
        (
            ResourcesConfig(trainer_ranks=1, gpus_per_rank=1, rollout_workers=2),
            1,
            "at most one rollout worker",
        ),
        (
            ResourcesConfig(trainer_ranks=6, gpus_per_rank=1),
            4,
            r"trainer_ranks=6 must be a multiple of trainer.sp_degree=4",
        ),
        (ResourcesConfig(gpus_per_rank=2), 1, r"gpus_per_rank=2: actors beside a trainer rank share its GPU"),
    ],
)
def test_bad_resources(res, sp, message):
    with pytest.raises(CodefuError, match=message):
        make_layout(res, kl_enabled=False, sp_degree=sp)


def test_sequence_parallel_plan():
    layout = make_layout(
        ResourcesConfig(trainer_ranks=8, gpus_per_rank=1, rollout_workers=8), False, sp_degree=4
    )
    assert len(layout.slots_of("trainer")) == 8  # sp does not change the ranks, only how they share sequences


@pytest.mark.parametrize("kl", [False, True])
def test_colocated_critic_sits_beside_each_trainer_rank(kl):
    res = ResourcesConfig(trainer_ranks=4, gpus_per_rank=1, rollout_workers=4)
    layout = make_layout(res, kl_enabled=kl, critic=True)
    assert len(layout.bundles) == 4 and layout.gpus == 4  # no GPU more than without a critic
    for i in range(4):
        here = {s.role: s for s in layout.slots if s.bundle == i}
        assert set(here) == {"trainer", "critic", "rollout"} | ({"reference"} if kl else set())
        assert here["critic"].index == i and here["critic"].gpus == pytest.approx(SLIVER)
        assert sum(s.gpus for s in here.values()) == pytest.approx(1.0)
    assert layout.need("critic").count == 4


def test_split_critic_gets_gpus_of_its_own():
    res = ResourcesConfig(trainer_ranks=2, gpus_per_rank=1, rollout_workers=2, critic_colocate=False)
    layout = make_layout(res, kl_enabled=False, critic=True)
    assert layout.gpus == 2 + 2
    critic = layout.slots_of("critic")
    assert [s.bundle for s in critic] == [2, 3] and all(s.gpus == 1 for s in critic)
    with pytest.raises(CodefuError, match=r"4 GPUs needed \(trainer 1.8, critic 2, rollout 0.2\)"):
        check_layout(layout, {"CPU": 64, "GPU": 2})


def test_no_critic_no_critic_slots():
    layout = make_layout(ResourcesConfig(trainer_ranks=2, gpus_per_rank=1), kl_enabled=True)
    assert layout.slots_of("critic") == [] and layout.need("critic") is None


def test_critic_on_cpu_adds_its_cpus():
    without = make_layout(ResourcesConfig(), kl_enabled=False)
    with_critic = make_layout(ResourcesConfig(), kl_enabled=False, critic=True)
    assert with_critic.cpus == without.cpus + 1 and with_critic.gpus == 0
