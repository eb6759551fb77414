"""LoRA (trainer.lora) over several ranks on CPU (gloo), ranks spawned with torch.multiprocessing -- no Ray.

- FSDP2: 2 ranks x 1 micro-batch per mini-batch train the same adapters as 1 rank x 2 micro-batches over
  two updates (ppo_epochs 2, a KL term against the adapter-free model), the frozen base weights stay as
  loaded on every rank, and `adapters_for_sync` on rank 0 gives the 1-rank worker's tensors;
- a LoRA checkpoint (adapters and their optimizer state only) saved at 2 ranks resumes at 1 rank to the
  same next update;
- Ulysses sequence parallelism (sp=2 on 2 ranks): the same log-probs with adapters on and off, the same
  adapter gradients and the same adapters after an update as 1 rank.

The 1-rank side runs in this pytest process (a single-rank gloo group); the 2-rank side in spawned
processes that write their results to files in tmp_path.
"""

import dataclasses
from pathlib import Path

import pytest
import torch
from torch.distributed.tensor import DTensor

from codefu.models.lora import is_adapter_key
from codefu.models.lora_config import LoRAConfig
from codefu.models.tiny import save_tiny_model
from codefu.trainer import Batch, TrainerConfig, TrainerWorker
from codefu.trainer.testing import random_batch
from helpers.ranks import end_rank, equal_split_config, spawn_ranks, start_rank
from helpers.seq_parallel import MODELS
from helpers.seq_parallel import batch as sp_batch
from helpers.seq_parallel import config as sp_base_config

VOCAB = 128
LEN = 12
LORA = LoRAConfig(rank=4, alpha=16.0)
# 2 layers x 7 projections of the tiny model, lora_A and lora_B each
N_ADAPTER_TENSORS = 2 * 7 * 2


def config(model_dir: Path) -> TrainerConfig:
    return equal_split_config(model_dir, LEN, lr=1e-2, lora=LORA)


def sp_config(model_dir: Path, sp: int) -> TrainerConfig:
    return dataclasses.replace(sp_base_config(model_dir, sp, "token-mean"), lr=1e-2, lora=LORA)


def raw_batch(seed: int) -> Batch:
    return random_batch(8, LEN, VOCAB, prompt_len=3, seed=seed)  # all rows full length: packing is exact


def fill(w: TrainerWorker, b: Batch) -> dict[str, torch.Tensor]:
    """old and ref log-probs from the current model, as the loop takes them (every rank calls)."""
    b.old_logprobs = w.compute_logprobs(b)
    b.ref_logprobs = w.compute_logprobs(b, adapters=False)
    return {"old": b.old_logprobs.clone(), "ref": b.ref_logprobs.clone()}


def full(p) -> torch.Tensor:
    return (p.full_tensor() if isinstance(p, DTensor) else p.detach()).clone()


def params(w: TrainerWorker, adapters: bool) -> dict[str, torch.Tensor]:
    """Full parameters (a collective: every rank calls), the adapters or the base."""
    return {n: full(p) for n, p in w.model.named_parameters() if is_adapter_key(n) == adapters}


def adapters(w: TrainerWorker) -> dict[str, torch.Tensor] | None:
    a = w.adapters_for_sync()  # a collective; rank 0 only
    if a is None:
        return None
    assert a.scaling == LORA.scaling
    return a.tensors


def train_two_updates(w: TrainerWorker, save_to: Path | None = None) -> dict:
    """Two updates, each with old/ref log-probs taken right before it; optionally a checkpoint between."""
    base0 = params(w, adapters=False)
    out: dict = {"logprobs": [], "metrics": []}
    for i, seed in enumerate((1, 2)):
        b = raw_batch(seed)
        out["logprobs"].append(fill(w, b))
        out["metrics"].append(w.update(b))
        out[f"adapters{i + 1}"] = params(w, adapters=True)
        if i == 0 and save_to is not None:
            w.save(save_to, extra_state={"saved_by": "2 ranks"})
    base1 = params(w, adapters=False)
    assert base0.keys() == base1.keys() and base0
    out["base_unchanged"] = {k: torch.equal(base0[k], base1[k]) for k in base0}
    out["base"] = base1
    out["sync"] = adapters(w)
    out["step"] = w.step
    return out


def sp_run(w: TrainerWorker) -> dict:
    """One update on the sequence-parallel batch (fixed old/ref log-probs): the adapters' full gradients
    before the step, the log-probs with adapters on and off after it, and the adapters."""
    b = sp_batch()
    out: dict = {"grads": {}}
    out["before_on"] = w.compute_logprobs(b)
    out["before_off"] = w.compute_logprobs(b, adapters=False)
    clip = w._clip_gradients

    def capture() -> float:
        for name, p in w.model.named_parameters():
            if p.requires_grad:
                out["grads"][name] = full(p.grad)  # a collective
        return clip()

    w._clip_gradients = capture
    out["metrics"] = w.update(b)
    out["after_on"] = w.compute_logprobs(b)
    out["after_off"] = w.compute_logprobs(b, adapters=False)
    out["adapters"] = params(w, adapters=True)
    out["sync"] = adapters(w)
    return out


def _rank_main(rank: int, world_size: int, port: int, job: str, tmp: str) -> None:
    tmp = Path(tmp)
    start_rank(rank, world_size, port)
    if job == "fsdp":
        w = TrainerWorker(config(tmp / "llama"))
        result = train_two_updates(w, save_to=tmp / "ckpt_ws2")
        result["rank"] = rank
        torch.save(result, tmp / f"ws2_fsdp_rank{rank}.pt")
    elif job == "sp":
        w = TrainerWorker(sp_config(tmp / "qwen2", 2))
        assert w.grid.sp == 2
        result = sp_run(w)
        torch.save(result, tmp / f"ws2_sp_rank{rank}.pt")
    end_rank()


def assert_same(a: dict, b: dict, what: str, atol: float = 1e-6) -> None:
    assert a.keys() == b.keys(), what
    for k in a:
        torch.testing.assert_close(a[k], b[k], atol=atol, rtol=1e-5, msg=lambda s, k=k: f"{what}: {k}: {s}")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lora_dist")
    save_tiny_model(tmp / "llama", seed=0)
    save_tiny_model(tmp / "qwen2", seed=0, **MODELS["qwen2"])
    return tmp


@pytest.fixture(scope="module")
def fsdp_runs(models):
    """(2-rank results by rank, the 1-rank result)."""
    spawn_ranks(_rank_main, 2, "fsdp", str(models))
    ws2 = [torch.load(models / f"ws2_fsdp_rank{r}.pt") for r in range(2)]
    w = TrainerWorker(config(models / "llama"))
    assert w.world_size == 1
    b = raw_batch(1)
    assert len(w._my_micro_batches(b, list(range(4)), b.lengths().tolist())[0]) == 2  # 1 rank: 2 micro
    return ws2, train_two_updates(w)


def test_fsdp_lora_two_ranks_equal_one_rank(fsdp_runs):
    ws2, ws1 = fsdp_runs
    for r in range(2):
        assert len(ws2[r]["adapters2"]) == N_ADAPTER_TENSORS
        for i in (1, 2):
            assert_same(ws2[r][f"adapters{i}"], ws1[f"adapters{i}"], f"rank {r} after update {i}")
        for i in range(2):
            for k in ("old", "ref"):
                torch.testing.assert_close(
                    ws2[r]["logprobs"][i][k], ws1["logprobs"][i][k], atol=1e-6, rtol=1e-5
                )
    for i in range(2):
        assert ws1["metrics"][i]["optim/steps"] == 4 * (i + 1)
        for k in (
            "loss/total",
            "loss/pg",
            "loss/kl",
            "policy/entropy",
            "optim/grad_norm",
            "policy/clip_frac",
        ):
            assert ws2[0]["metrics"][i][k] == pytest.approx(ws1["metrics"][i][k], rel=1e-5, abs=1e-7), (i, k)
    # the comparisons are not vacuous: the adapters moved (B away from 0), the second update's reference
    # (adapters off) differs from its old log-probs (adapters on), so the KL term acted
    for name, t in ws1["adapters2"].items():
        if name.endswith(".lora_B"):
            assert t.abs().max() > 1e-4, name
    lp2 = ws1["logprobs"][1]
    assert (lp2["old"] - lp2["ref"]).abs().max() > 1e-3
    assert ws1["metrics"][1]["loss/kl"] > 0
    assert ws1["step"] == ws2[0]["step"] == 8


def test_fsdp_lora_base_weights_unchanged_on_every_rank(fsdp_runs, models):
    from transformers import AutoModelForCausalLM

    ws2, ws1 = fsdp_runs
    hf = {
        f"lm.{k}": v for k, v in AutoModelForCausalLM.from_pretrained(models / "llama").state_dict().items()
    }
    for what, run in [("rank 0", ws2[0]), ("rank 1", ws2[1]), ("1 rank", ws1)]:
        assert all(run["base_unchanged"].values()), (
            what,
            [k for k, ok in run["base_unchanged"].items() if not ok],
        )
        for k, v in run["base"].items():
            assert torch.equal(v, hf[k].to(v.dtype)), (what, k)


def test_fsdp_lora_adapters_for_sync_match(fsdp_runs):
    ws2, ws1 = fsdp_runs
    assert ws2[1]["sync"] is None  # rank 0 only
    got, ref = ws2[0]["sync"], ws1["sync"]
    assert len(ref) == N_ADAPTER_TENSORS
    assert all(not k.startswith("lm.") and k.endswith((".lora_A", ".lora_B")) for k in ref)
    assert_same(got, ref, "adapters_for_sync: rank 0 of 2 vs 1 rank")
    # the sync carries the trained adapters themselves (its names are the parameters' less "lm.")
    assert_same(ref, {k.removeprefix("lm."): v for k, v in ws1["adapters2"].items()}, "sync vs params")


def test_lora_checkpoint_at_two_ranks_resumes_at_one(fsdp_runs, models):
    ws2, _ = fsdp_runs
    w = TrainerWorker(config(models / "llama"))
    assert w.load(models / "ckpt_ws2") == {"saved_by": "2 ranks"}
    assert w.step == 4
    assert_same(params(w, adapters=True), ws2[0]["adapters1"], "loaded adapters")
    b = raw_batch(2)
    lp = fill(w, b)
    for k in ("old", "ref"):
        torch.testing.assert_close(lp[k], ws2[0]["logprobs"][1][k], atol=1e-6, rtol=1e-5)
    w.update(b)
    assert_same(params(w, adapters=True), ws2[0]["adapters2"], "resumed at 1 rank vs uninterrupted 2 ranks")
    assert_same(adapters(w), ws2[0]["sync"], "resumed sync vs 2 ranks")


def test_sequence_parallel_lora_equals_one_rank(models):
    spawn_ranks(_rank_main, 2, "sp", str(models))
    got = torch.load(models / "ws2_sp_rank0.pt")
    other = torch.load(models / "ws2_sp_rank1.pt")
    ref = sp_run(TrainerWorker(sp_config(models / "qwen2", 1)))
    what = "qwen2 + LoRA, 2 ranks sp=2 vs 1 rank"
    for k in ("before_on", "before_off", "after_on", "after_off"):
        torch.testing.assert_close(
            got[k], ref[k], atol=1e-6, rtol=1e-5, msg=lambda s, k=k: f"{what}: {k}: {s}"
        )
        torch.testing.assert_close(other[k], got[k], atol=0, rtol=0)  # all-reduced: every rank has them
    # only the adapters get gradients, every one of them (B=0 at the start: A's gradient is 0 exactly)
    assert ref["grads"].keys() == got["grads"].keys()
    assert len(ref["grads"]) == N_ADAPTER_TENSORS and all(is_adapter_key(k) for k in ref["grads"])
    for name, g in ref["grads"].items():
        if name.endswith(".lora_B"):
            assert g.abs().max() > 0, name
        torch.testing.assert_close(
            got["grads"][name], g, atol=1e-7, rtol=1e-5, msg=lambda s, n=name: f"{n}: {s}"
        )
    for k in ("loss/total", "loss/pg", "loss/kl", "policy/entropy", "optim/grad_norm"):
        assert got["metrics"][k] == pytest.approx(ref["metrics"][k], rel=1e-5, abs=1e-7), k
    assert_same(got["adapters"], ref["adapters"], f"{what}: adapters")
    assert_same(other["adapters"], ref["adapters"], f"{what}: adapters on rank 1")
    assert_same(got["sync"], ref["sync"], f"{what}: adapters_for_sync")
    # not vacuous: before the update adapters on == off (B = 0); after it they differ
    torch.testing.assert_close(ref["before_on"], ref["before_off"], atol=0, rtol=0)
    assert (ref["after_on"] - ref["after_off"]).abs().max() > 1e-3
    torch.testing.assert_close(ref["after_off"], ref["before_off"], atol=0, rtol=0)  # the base is untouched
