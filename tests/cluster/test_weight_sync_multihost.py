"""Split mode across hosts (#44): `codefu launch` on two hosts (network namespaces on a bridge), a trainer
rank on the head's Ray node and a rollout actor on the other's; after one update the trainer's weights
reach the rollout engine through Ray's object store (Roles.sync_weights's path), and the engine's greedy
completions are then scored by the trainer to the same log-probs, as they were before the update; a second
update's weights go through a weight-broadcast group (resources.weight_transfer broadcast) the same way."""

import json
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # minutes of Ray start-ups: the slow tier (`-m slow`)

JOB = str(Path(__file__).with_name("weight_sync_job.py"))
TIMEOUTS = ["--join-timeout=180", "--nodes-timeout=180", "--head-lost-timeout=30"]
SAME = 1e-4  # engine vs trainer on the same fp32 weights: rounding only


def test_a_trainer_on_one_host_syncs_weights_to_a_rollout_actor_on_another(netns_cluster, tmp_path):
    from codefu.models.tiny import tiny_model, tiny_tokenizer

    model = tmp_path / "model"  # both hosts share this machine's filesystem
    tiny_model(seed=0).save_pretrained(model)
    tiny_tokenizer().save_pretrained(model)
    cluster = netns_cluster(2)
    out = tmp_path / "result.json"
    job = [sys.executable, JOB, "--model", str(model), "--out", str(out)]
    launched = [
        cluster.launch(h, f"--sagemaker-config={cluster.sagemaker_config(h)}", *TIMEOUTS, entrypoint=job)
        for h in reversed(cluster.hosts)
    ]
    codes = cluster.wait_all(launched, 300)
    logs = {r.host.name: r.output()[-4000:] for r in launched}
    assert codes == {"algo-1": 0, "algo-2": 0}, logs
    result = json.loads(out.read_text())

    head, worker = (h.ip for h in cluster.hosts)
    assert sorted(result["nodes"].values()) == [head, worker]
    trainer, rollout = result["placed"]["trainer"], result["placed"]["rollout"]
    assert trainer["node_id"] == result["driver_node"] and trainer["ip"] == head, result["placed"]
    assert rollout["node_id"] != trainer["node_id"] and rollout["ip"] == worker, result["placed"]
    assert result["placed"]["rollout_ping"]["engine"] == "TransformersEngine"
    # the state dict (~0.4 MB: in the store, not inlined) was made on the head and copied to the worker
    assert result["weights_held_by"] == [head, worker], result["weights_held_by"]

    assert result["trainer_step"] == 1
    assert result["gap_at_start"] < SAME, result  # same folder, same numbers
    assert result["gap_after_update"] > 100 * SAME, result  # the update changed the trainer's weights
    assert result["gap_after_sync"] < SAME, result  # the engine computes with the trainer's new weights
    before, after = result["before"], result["after"]
    assert len(before) == len(after) == 3
    # greedy completions change with the weights (deterministic: seeded model and update batch)
    assert [c["tokens"] for c in after] != [c["tokens"] for c in before], (before, after)
    # and again through a broadcast group: gloo from the head's trainer to the other host's engine
    assert result["broadcast_from"] == head
    assert result["gap_after_second_update"] > 100 * SAME, result
    assert result["gap_after_broadcast"] < SAME, result
    assert [c["tokens"] for c in result["broadcast"]] != [c["tokens"] for c in after]
    assert "all 2 node(s) registered" in logs["algo-1"]
    assert "the entrypoint ended with status 0" in logs["algo-1"]
    assert cluster.wait_empty() == {}
