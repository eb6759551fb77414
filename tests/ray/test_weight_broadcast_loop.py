"""resources.weight_transfer: broadcast on Ray with the toy task (gloo between the CPU processes): trainer
rank 0 sends each policy to every rollout worker in one collective. A sync run with two trainer ranks and
two workers gives the store's samples, rewards and weights exactly; the off-policy modes keep their
staleness bound with it; a worker that dies is named, not waited for."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from safetensors.torch import load_file

from codefu.errors import CodefuError
from codefu.models.lora_config import LoRAConfig
from codefu.models.tiny import tiny_tokenizer
from codefu.observability.sinks import JsonlSink, read_metrics
from codefu.orchestrator import loop
from codefu.orchestrator.roles import Roles
from helpers.toy_loop import CharScorer, on_each_sample, toy_config, toy_model_dir, toy_problems

# two trainer ranks (FSDP: every rank packs, rank 0 sends) and two workers (two receivers) in 2 CPUs
TWO_AND_TWO = {"trainer_ranks": 2, "cpus_per_rank": 0.5, "rollout_workers": 2, "cpus_per_rollout_worker": 0.5}


def run(
    tmp_path: Path, name: str, steps: int, transfer: str, rollout=None, trainer=None, **loop_keys
) -> list[dict]:
    cfg = toy_config(toy_model_dir(tmp_path / "model"), steps)
    if trainer:
        cfg = replace(cfg, trainer=replace(cfg.trainer, **trainer))
    resources = replace(cfg.resources, weight_transfer=transfer, **TWO_AND_TWO)
    cfg = replace(cfg, resources=resources, loop=replace(cfg.loop, **loop_keys))
    if rollout:
        cfg = replace(cfg, rollout=replace(cfg.rollout, **rollout))
    run_dir = tmp_path / name
    loop.train(cfg, run_dir, toy_problems(), [], tiny_tokenizer(), CharScorer(), sinks=[JsonlSink(run_dir)])
    return read_metrics(run_dir / "metrics.jsonl")


@pytest.mark.parametrize(
    "trainer",
    [
        None,
        pytest.param({"lora": LoRAConfig(rank=4, alpha=8), "lr": 0.05}, marks=pytest.mark.slow, id="lora"),
    ],
)
def test_a_broadcast_gives_the_stores_samples_rewards_and_weights(local_ray, tmp_path, trainer):
    """With trainer.lora only the adapters travel (the engines merge them into their weights)."""
    store = run(tmp_path, "store", 3, "store", trainer=trainer)
    broadcast = run(tmp_path, "broadcast", 3, "broadcast", trainer=trainer)
    keys = [
        "reward/mean",
        "rollout/response_tokens",
        "loss/pg",
        "policy/entropy",
        "rollout/logprob_diff_mean",
    ]
    assert [[r[k] for k in keys] for r in broadcast] == [[r[k] for k in keys] for r in store]
    # the steps differ (else the comparison shows nothing): each one's samples came from new weights
    assert len({r["rollout/response_tokens"] for r in store}) > 1 or len({r["loss/pg"] for r in store}) > 1
    # the engines sampled with the trainer's weights of each step: their log-probs are the trainer's
    assert all(r["rollout/logprob_diff_abs_max"] < 1e-4 for r in broadcast), broadcast
    a = load_file(tmp_path / "store" / "model" / "model.safetensors")
    b = load_file(tmp_path / "broadcast" / "model" / "model.safetensors")
    assert a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "rollout"),
    [
        ("one_step_off", None),
        ("async", {"engine": "native", "kv_cache_tokens": 16384, "max_new_tokens": 320}),
    ],
)
def test_off_policy_modes_keep_their_bound_with_a_broadcast(local_ray, tmp_path, monkeypatch, mode, rollout):
    """one_step_off with the transformers engine (each policy loaded after the generation it came during)
    and async with the native engine (loaded mid-generation): every sample within the bound, and the
    workers served each policy the trainer broadcast (a sample of every version but the last)."""
    seen: list[tuple[int, list[int]]] = []

    def see(step, sampled):
        seen.extend((step, c.token_versions or [c.policy_version]) for c in sampled.completions)

    on_each_sample(monkeypatch, see)
    broadcasts: list[int] = []  # (a test of the broadcast: no policy goes through the store instead)
    real = Roles.broadcast_weights
    monkeypatch.setattr(
        Roles, "broadcast_weights", lambda self, loads: broadcasts.append(1) or real(self, loads)
    )
    monkeypatch.setattr(Roles, "publish_weights", lambda self: pytest.fail("the store was used"))
    keys = {"mode": mode} | ({"max_staleness": 1} if mode == "async" else {})
    rows = run(tmp_path, mode, 5, "broadcast", rollout, **keys)
    assert len(rows) == 5
    for step, versions in seen:
        assert all(step - 1 <= v <= step for v in versions), (step, sorted(set(versions)))
    assert {v for _, versions in seen for v in versions} >= {0, 1, 2, 3}  # each broadcast was loaded
    assert all(r["async/staleness_max"] <= 1 for r in rows)
    assert len(broadcasts) >= 4


@pytest.mark.parametrize("dead", [0, 1])
def test_a_rollout_worker_that_dies_before_a_broadcast_is_named_with_its_node(
    local_ray, tmp_path, monkeypatch, dead
):
    real = loop.update

    def update_then_kill(cfg, roles, *args, **kwargs):
        import ray

        out = real(cfg, roles, *args, **kwargs)
        ray.kill(roles.rollout.actors[dead])  # the next sync broadcasts to a dead member
        return out

    monkeypatch.setattr(loop, "update", update_then_kill)
    named = rf"rollout worker {dead} \(node \d+\.\d+\.\d+\.\d+, node id \w+\) died"
    with pytest.raises(CodefuError, match=named):
        run(tmp_path, "killed", 3, "broadcast", weight_sync_timeout_s=60)
