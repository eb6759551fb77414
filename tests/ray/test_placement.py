"""The layout's placement group on a local CPU Ray cluster (the same code path as on GPUs, with CPU bundles):
every actor starts in its bundle, trainer ranks rendezvous on rank 0's node, two rollout workers share
`generate`, the reference runs as many ranks as the policy, and a short run trains through all of it."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest
import ray
from ray.util import placement_group_table

from codefu.errors import CodefuError
from codefu.models.tiny import tiny_tokenizer
from codefu.observability.sinks import JsonlSink, read_metrics
from codefu.orchestrator import loop, roles
from codefu.orchestrator.layout import Bundle, Layout, ResourcesConfig, make_layout
from codefu.orchestrator.placement import reserve
from codefu.orchestrator.roles import Roles
from helpers.toy_loop import CharScorer, toy_config, toy_model_dir, toy_problems  # noqa: E402

# 2 ranks (+ 2 reference ranks) and 2 rollout workers in 2 bundles of 0.75 CPU: fits the 2-CPU test cluster
RESOURCES = ResourcesConfig(
    trainer_ranks=2, cpus_per_rank=0.25, rollout_workers=2, cpus_per_rollout_worker=0.25, judge_cpus=0
)


def config(tmp_path: Path, steps: int = 2):
    cfg = toy_config(toy_model_dir(tmp_path / "model"), steps)
    return replace(cfg, resources=RESOURCES, trainer=replace(cfg.trainer, kl_coef=0.01))


def bundle_cpus_free(pg) -> list[float]:
    free = ray.available_resources()
    return [free.get(f"CPU_group_{i}_{pg.id.hex()}", 0.0) for i in range(len(pg.bundle_specs))]


@pytest.mark.slow
def test_a_short_run_trains_through_the_placement_group(local_ray, tmp_path, monkeypatch):
    cfg = config(tmp_path)
    layout = make_layout(cfg.resources, kl_enabled=True)
    assert [b.resources() for b in layout.bundles] == [{"CPU": 0.75}] * 2
    seen: dict = {"generate": []}

    class CheckedRoles(Roles):
        """Roles as the loop builds them, looked at once every actor is up and at every generation."""

        def __init__(self, cfg):
            super().__init__(cfg)
            ray.get([a.step.remote() for a in [*self.trainer, *self.reference]])  # all ranks up: rendezvous
            seen["pg"], seen["table"] = self.pg, placement_group_table(self.pg)
            seen["free"] = bundle_cpus_free(self.pg)
            seen["sizes"] = (len(self.trainer), len(self.reference), len(self.rollout.actors))

        def generate_stream(self, prompts, sampling):  # the loop's one-turn path (loop.overlap_judge)
            got = []
            for batch in super().generate_stream(prompts, sampling):
                got += batch
                yield batch
            seen["generate"].append(
                sorted((c.prompt_index, c.sample_index) for c in got)
                == [(p, s) for p in range(len(prompts)) for s in range(sampling.n)]
            )

    monkeypatch.setattr(loop, "Roles", CheckedRoles)
    run_dir = tmp_path / "run"
    loop.train(cfg, run_dir, toy_problems(), [], tiny_tokenizer(), CharScorer(), sinks=[JsonlSink(run_dir)])
    rows = read_metrics(run_dir / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["loss/kl"] >= 0 and r["optim/steps"] >= 1 for r in rows)
    assert seen["sizes"] == (2, 2, 2)  # the reference has as many ranks as the policy
    table = seen["table"]
    assert table["state"] == "CREATED" and table["strategy"] == "PACK" and len(table["bundles"]) == 2
    # each bundle is used up by its rank, reference rank and rollout worker: they run inside it
    assert seen["free"] == pytest.approx([0.0, 0.0])
    assert seen["generate"] == [True, True]  # 2 workers, each step: every sample once
    assert placement_group_table(seen["pg"])["state"] == "REMOVED"  # released with the roles


def test_an_unreservable_group_fails_with_what_it_asked_for(local_ray):
    layout = Layout(roles=(), bundles=(Bundle(cpus=64, gpus=0),))
    with pytest.raises(
        Exception, match=r"could not reserve the placement group within 1 s \(bundles 0: 64 CPUs"
    ):
        reserve(layout, timeout_s=1)


def cpus_free_once_settled(expected: float, timeout_s: float = 60.0) -> float:
    """The cluster's free CPUs once they are back to `expected` or `timeout_s` has passed (a removed
    placement group's CPUs come back asynchronously)."""
    deadline = time.monotonic() + timeout_s
    while ray.available_resources().get("CPU", 0.0) < expected and time.monotonic() < deadline:
        time.sleep(0.5)
    return ray.available_resources().get("CPU", 0.0)


def test_roles_that_fail_to_start_hold_nothing(local_ray, tmp_path, monkeypatch):
    """The trainer and reference ranks are up when the rollout workers cannot start: the error comes out
    and the placement group, with every actor in it, is gone (the shared test cluster stayed full once)."""
    free = cpus_free_once_settled(ray.cluster_resources()["CPU"])
    assert free == ray.cluster_resources()["CPU"], "an earlier test left CPUs held"
    started = []

    def no_engine(*args, **kwargs):
        started.append(True)
        raise RuntimeError("no engine for this test")

    monkeypatch.setattr(roles, "make_rollout_actor", no_engine)
    groups_before = set(placement_group_table())
    with pytest.raises(RuntimeError, match="no engine for this test"):
        Roles(config(tmp_path))
    assert started  # it failed where it was meant to, after the trainer ranks started
    new = set(placement_group_table()) - groups_before
    assert len(new) == 1
    assert placement_group_table()[new.pop()]["state"] == "REMOVED"
    assert cpus_free_once_settled(free) == free


def test_a_run_that_fails_after_its_roles_started_gives_them_back(local_ray, tmp_path):
    """A resume from a damaged checkpoint fails in the trainer after every role started: the run raises
    and the cluster gets its CPUs back."""
    free = cpus_free_once_settled(ray.cluster_resources()["CPU"])
    assert free == ray.cluster_resources()["CPU"], "an earlier test left CPUs held"
    groups_before = set(placement_group_table())
    run_dir = tmp_path / "run"
    damaged = run_dir / "checkpoints" / "step_2"
    damaged.mkdir(parents=True)
    (damaged / "trainer_state.pt").write_text("not a checkpoint")
    # one line for the user, naming the checkpoint and the file: not pickle's error through Ray's
    with pytest.raises(
        CodefuError, match=r"cannot resume from .*step_2: .*damaged: trainer_state\.pt.*aside"
    ):
        loop.train(config(tmp_path), run_dir, toy_problems(), [], tiny_tokenizer(), CharScorer())
    new = set(placement_group_table()) - groups_before
    assert len(new) == 1  # the roles had started: it failed where it was meant to
    assert placement_group_table()[new.pop()]["state"] == "REMOVED"
    assert cpus_free_once_settled(free) == free
