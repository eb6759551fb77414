"""Entrypoint of the multi-host weight-sync test: a trainer rank on this host's Ray node (the head's), a
rollout actor on another node; one update changes the trainer's weights, which go to the rollout actor
through Ray's object store as split mode syncs them (Roles.sync_weights); a second update's weights go
through a weight-broadcast group (resources.weight_transfer broadcast: gloo between the hosts); writes
what each side computed.

    python weight_sync_job.py --model DIR --out result.json

Each generation is greedy; its log-probs are compared with the trainer's (compute_logprobs) on the same
tokens: the same weights give the same numbers, to float rounding.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import ray
import torch
from ray.experimental import get_object_locations
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from codefu.orchestrator.batching import completions_to_batch
from codefu.rollout.actor import make_rollout_actor
from codefu.rollout.engine import EngineConfig
from codefu.rollout.types import SamplingParams
from codefu.trainer import TrainerConfig
from codefu.trainer.actor import make_trainer_ranks
from codefu.trainer.testing import random_batch

PROMPTS = [[1, 40, 41, 42], [1, 50, 51, 52, 53, 54, 55, 56], [1, 60]]
GREEDY = SamplingParams(temperature=0.0, max_new_tokens=12)
TIMEOUT_S = 180


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args()

    ray.init(address="auto", log_to_driver=False)
    here = ray.get_runtime_context().get_node_id()
    ip_of = {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]}
    there = next(node for node in sorted(ip_of) if node != here)
    on = lambda node: NodeAffinitySchedulingStrategy(node, soft=False)  # noqa: E731

    cfg = TrainerConfig(model=args.model, device="cpu", dtype="float32", lr=1e-2)
    (trainer,) = make_trainer_ranks(cfg, world_size=1, scheduling_strategy=on(here))
    rollout = make_rollout_actor(
        EngineConfig(model=args.model, device="cpu", dtype="float32"), scheduling_strategy=on(there)
    )
    get = lambda ref: ray.get(ref, timeout=TIMEOUT_S)  # noqa: E731
    get(trainer.ready.remote())
    placed = {
        "trainer": get(trainer.__ray_call__.remote(where)),
        "rollout": get(rollout.__ray_call__.remote(where)),
        "rollout_ping": get(rollout.ping.remote()),
    }

    def generate() -> list:
        return get(rollout.generate.remote(PROMPTS, GREEDY))

    def trainer_gap(completions: list) -> float:
        """Largest |engine log-prob - trainer log-prob| over the completions' tokens."""
        n = len(completions)  # the loop's own batching: the engine's log-probs become old_logprobs
        batch = completions_to_batch(completions, torch.zeros(n), torch.ones(n, dtype=torch.bool))
        trainer_lp = get(trainer.compute_logprobs.remote(batch))
        mask = batch.response_mask.bool()
        return float((trainer_lp[mask] - batch.old_logprobs[mask]).abs().max())

    before = generate()
    gap_at_start = trainer_gap(before)  # both loaded the same folder

    update = random_batch(4, 10, vocab_size=128, prompt_len=3, seed=0)
    update.old_logprobs = get(trainer.compute_logprobs.remote(update))
    metrics = get(trainer.update.remote(update))
    step = get(trainer.step.remote())
    gap_after_update = trainer_gap(before)  # the engine still has the old weights

    ref = trainer.state_dict_for_sync.remote()  # the path Roles.sync_weights takes in split mode
    get(rollout.load_weights.remote(ref))
    held_by = get_object_locations([ref])[ref]["node_ids"]
    after = generate()
    gap_after_sync = trainer_gap(after)

    # again through a broadcast group (resources.weight_transfer broadcast: gloo between the hosts)
    second = random_batch(4, 10, vocab_size=128, prompt_len=3, seed=1)
    second.old_logprobs = get(trainer.compute_logprobs.remote(second))
    get(trainer.update.remote(second))
    gap_after_second_update = trainer_gap(after)
    address = get(trainer.host_weight_group.remote(2, TIMEOUT_S))
    layout = get(trainer.weight_layout.remote())
    joined = [
        trainer.join_weight_group.remote(address),
        rollout.join_weight_group.remote(address, 1, layout, 60),
    ]
    get(joined)
    loaded = rollout.receive_weights.remote(2)
    get(trainer.broadcast_weights.remote())
    get(loaded)
    broadcast = generate()
    gap_after_broadcast = trainer_gap(broadcast)

    result = {
        "nodes": {node: ip_of[node] for node in sorted(ip_of)},
        "driver_node": here,
        "placed": placed,
        "trainer_step": step,
        "grad_norm": metrics.get("optim/grad_norm"),
        "gap_at_start": gap_at_start,
        "gap_after_update": gap_after_update,
        "gap_after_sync": gap_after_sync,
        "broadcast_from": address.host,
        "gap_after_second_update": gap_after_second_update,
        "gap_after_broadcast": gap_after_broadcast,
        "weights_held_by": sorted(ip_of[node] for node in held_by),
        "before": summary(before),
        "after": summary(after),
        "broadcast": summary(broadcast),
    }
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"weight_sync_job: gaps {gap_at_start:.2e} -> {gap_after_update:.2e} -> {gap_after_sync:.2e}")
    return 0


def where(_actor) -> dict:
    """Run in the actor's process (`__ray_call__`): its Ray node and its address there."""
    return {"node_id": ray.get_runtime_context().get_node_id(), "ip": ray.util.get_node_ip_address()}


def summary(completions: list) -> list:
    return [{"tokens": c.token_ids, "logprobs": c.logprobs} for c in completions]


if __name__ == "__main__":
    raise SystemExit(main())
