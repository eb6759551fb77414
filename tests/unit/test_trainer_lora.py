"""The trainer with LoRA (trainer.lora) on one rank (gloo, CPU): only the adapters train, the reference is
the model with its adapters off, checkpoints hold the adapters only (plus PEFT's folder), a checkpoint of
other adapters (or none) is refused naming trainer.lora, exports (merged or adapter) load in transformers /
PEFT, and the adapter sync carries HF names and alpha / rank."""

from __future__ import annotations

import json
import math
from pathlib import Path

import peft
import pytest
import torch
import torch.distributed.checkpoint as dcp
from safetensors.torch import load_file
from torch.distributed.tensor import DTensor
from transformers import AutoModelForCausalLM

from codefu.models.lora import is_adapter_key
from codefu.models.lora_config import ADAPTER_CONFIG, ADAPTER_WEIGHTS, LoRAConfig
from codefu.models.tiny import save_tiny_model
from codefu.rollout.hf_engine import TransformersEngine
from codefu.trainer import TrainerConfig, TrainerWorker
from codefu.trainer.checkpoint import EXPORT_MARKER
from codefu.trainer.testing import random_batch
from helpers.native_models import batch_logprobs

VOCAB = 128
RANK = 4
# per layer: q (64+64), k (64+32), v (64+32), o (64+64), gate (64+128), up (64+128), down (128+64) = 1024 * r
ADAPTER_NUMEL = 2 * 1024 * RANK
MODULES = [
    f"model.layers.{i}.{m}"
    for i in range(2)
    for m in [f"self_attn.{x}_proj" for x in "qkvo"] + [f"mlp.{x}_proj" for x in ("gate", "up", "down")]
]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)


def make_worker(model_dir, lora: LoRAConfig | None = None, **overrides) -> TrainerWorker:
    base = dict(
        model=str(model_dir),
        lr=1e-2,
        mini_batch_size=2,
        micro_batch_tokens=24,
        lora=LoRAConfig(rank=RANK) if lora is None else lora,
    )
    return TrainerWorker(TrainerConfig(**(base | overrides)))


def filled(w: TrainerWorker, seed: int):
    b = random_batch(4, 12, VOCAB, prompt_len=3, min_len=6, seed=seed)
    b.old_logprobs = w.compute_logprobs(b)
    return b


def full(p) -> torch.Tensor:
    return (p.full_tensor() if isinstance(p, DTensor) else p.detach()).clone()


def params(w: TrainerWorker, adapters: bool) -> dict[str, torch.Tensor]:
    return {n: full(p) for n, p in w.model.named_parameters() if is_adapter_key(n) == adapters}


@pytest.fixture(scope="module")
def plain_logprobs(tiny_dir):
    """A plain (LoRA off) worker's log-probs of the batch of seed 1: the reference."""
    w = make_worker(tiny_dir, lora=LoRAConfig())
    return w.compute_logprobs(random_batch(4, 12, VOCAB, prompt_len=3, min_len=6, seed=1))


def test_only_the_adapters_train(tiny_dir):
    w = make_worker(tiny_dir)
    in_optimizer = [p for g in w.optimizer.param_groups for p in g["params"]]
    named = dict(w.model.named_parameters())
    adapter_params = [p for n, p in named.items() if is_adapter_key(n)]
    assert len(in_optimizer) == len(adapter_params) == 2 * len(MODULES)
    assert {id(p) for p in in_optimizer} == {id(p) for p in adapter_params}
    assert sum(p.numel() for p in in_optimizer) == ADAPTER_NUMEL
    assert all(not p.requires_grad for n, p in named.items() if not is_adapter_key(n))

    base_before, adapters_before = params(w, False), params(w, True)
    assert len(base_before) > 0
    batch = filled(w, 1)
    w.update(batch)
    assert w.step == 2
    for n, v in params(w, False).items():
        assert torch.equal(v, base_before[n]), n
    for n, v in params(w, True).items():
        assert not torch.equal(v, adapters_before[n]), n
    # AdamW state exists for the adapters only
    assert len(w.optimizer.state) == len(adapter_params)

    # the synced weights are the merged ones: the adapted layers moved, the rest is the HF model's
    original = AutoModelForCausalLM.from_pretrained(tiny_dir).state_dict()
    synced = w.state_dict_for_sync()
    assert set(synced) == set(original)
    for k, v in synced.items():
        adapted = k.removesuffix(".weight") in MODULES
        assert torch.equal(v, original[k]) != adapted, k


def test_the_reference_is_the_model_without_adapters(tiny_dir, plain_logprobs):
    w = make_worker(tiny_dir)
    batch = filled(w, 1)
    ref = w.compute_logprobs(batch, adapters=False)
    torch.testing.assert_close(ref, plain_logprobs, atol=0, rtol=0)
    torch.testing.assert_close(batch.old_logprobs, plain_logprobs, atol=0, rtol=0)  # B = 0: no change yet
    # and what transformers computes on the saved model (the alignment of the trainer's log-probs)
    torch.testing.assert_close(
        batch_logprobs(AutoModelForCausalLM.from_pretrained(tiny_dir), batch), ref, atol=1e-5, rtol=0
    )
    w.update(batch)
    torch.testing.assert_close(w.compute_logprobs(batch, adapters=False), plain_logprobs, atol=0, rtol=0)
    moved = w.compute_logprobs(batch)
    assert (moved - plain_logprobs).abs().max() > 1e-2
    w.update(filled(w, 2))
    torch.testing.assert_close(w.compute_logprobs(batch, adapters=False), plain_logprobs, atol=0, rtol=0)
    assert not torch.equal(w.compute_logprobs(batch), moved)


def test_kl_to_the_adapter_free_reference(tiny_dir):
    w = make_worker(tiny_dir, kl_coef=0.5)
    batch = filled(w, 1)
    batch.ref_logprobs = w.compute_logprobs(batch, adapters=False)
    m1 = w.update(batch)
    # the first optimizer step has policy == reference (KL 0), the second one has moved
    assert m1["loss/kl"] > 0 and math.isfinite(m1["loss/total"])
    torch.testing.assert_close(m1["loss/total"], m1["loss/pg"] + 0.5 * m1["loss/kl"], atol=1e-5, rtol=0)
    m2 = w.update(batch)
    assert m2["loss/kl"] > m1["loss/kl"]
    torch.testing.assert_close(w.compute_logprobs(batch, adapters=False), batch.ref_logprobs, atol=0, rtol=0)


def test_dropout_is_off_in_logprob_passes(tiny_dir):
    w = make_worker(tiny_dir, lora=LoRAConfig(rank=RANK, dropout=0.5))
    batch = filled(w, 1)
    w.update(batch)
    first = w.compute_logprobs(batch)
    assert torch.equal(first, w.compute_logprobs(batch))
    merged = AutoModelForCausalLM.from_pretrained(tiny_dir)
    merged.load_state_dict(w.state_dict_for_sync())
    torch.testing.assert_close(batch_logprobs(merged, batch), first, atol=1e-5, rtol=0)


def test_resume_gives_identical_next_update_from_adapters_only(tiny_dir, tmp_path):
    a = make_worker(tiny_dir)
    a.update(filled(a, 1))
    path = a.save(tmp_path / "ckpt", extra_state={"loader": {"index": 5}})
    batch2 = filled(a, 2)
    m_a = a.update(batch2)

    b = make_worker(tiny_dir)
    assert b.load(tmp_path / "ckpt") == {"loader": {"index": 5}}
    assert b.step == 2
    torch.testing.assert_close(b.compute_logprobs(batch2), batch2.old_logprobs, atol=0, rtol=0)
    m_b = b.update(batch2)
    assert m_b["optim/lr"] == m_a["optim/lr"] and m_b["loss/total"] == m_a["loss/total"]
    for which in (True, False):
        pa, pb = params(a, which), params(b, which)
        for k in pa:
            torch.testing.assert_close(pa[k], pb[k], atol=0, rtol=0, msg=k)

    # the checkpoint holds the adapters (and their AdamW state), no base weight
    meta = dcp.FileSystemReader(path).read_metadata().state_dict_metadata
    model_keys = sorted(k for k in meta if k.startswith("model."))
    assert model_keys == sorted(f"model.lm.{m}.{x}" for m in MODULES for x in ("lora_A", "lora_B"))
    weight_like = [k for k in meta if ".lm." in k or k.startswith("model.")]
    assert weight_like and all(".lora_A" in k or ".lora_B" in k for k in weight_like), weight_like
    assert not any("embed_tokens" in k or "lm_head" in k or "norm" in k for k in meta)

    # beside it, PEFT's adapter folder of the saved adapters (step 2, before a's second update)
    adapter = tmp_path / "ckpt" / "step_00000002" / "adapter"
    assert sorted(p.name for p in adapter.iterdir()) == sorted([ADAPTER_CONFIG, ADAPTER_WEIGHTS])
    config = json.loads((adapter / ADAPTER_CONFIG).read_text())
    assert config["r"] == RANK and config["base_model_name_or_path"] == str(tiny_dir)
    loaded = peft.PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_dir), str(adapter))
    torch.testing.assert_close(batch_logprobs(loaded.eval(), batch2), batch2.old_logprobs, atol=1e-5, rtol=0)


def test_mismatched_checkpoints_are_refused_naming_trainer_lora(tiny_dir, tmp_path):
    lora = make_worker(tiny_dir)
    lora_ckpt = lora.save(tmp_path / "lora")
    plain = make_worker(tiny_dir, lora=LoRAConfig())
    plain_ckpt = plain.save(tmp_path / "plain")

    with pytest.raises(
        ValueError, match=r"trainer\.lora.*lora_A is \(4, \d+\) in the checkpoint, \(8, \d+\)"
    ):
        make_worker(tiny_dir, lora=LoRAConfig(rank=8)).load(lora_ckpt)
    with pytest.raises(ValueError, match=r"rank 4\): resume it with trainer\.lora\.rank=4"):
        plain.load(lora_ckpt)
    with pytest.raises(ValueError, match=r"no LoRA adapters.*trainer\.lora\.rank=0"):
        lora.load(plain_ckpt)
    with pytest.raises(
        ValueError, match=r"trainer\.lora.*down_proj.lora_A is in the checkpoint but not in this model"
    ):
        make_worker(tiny_dir, lora=LoRAConfig(rank=RANK, target_modules=["q_proj", "v_proj"])).load(lora_ckpt)
    assert lora.load(lora_ckpt) == {} and plain.load(plain_ckpt) == {}  # each its own: fine


def test_a_resume_names_its_base_model_by_place_not_by_spelling(tiny_dir, tmp_path, monkeypatch):
    """The base model given relative to one folder and absolute (or relative to another) is the same
    model: the resume goes on; another model is refused naming trainer.model."""
    monkeypatch.chdir(tiny_dir.parent)
    relative = make_worker(Path(tiny_dir.name))  # "model", from its parent folder
    ckpt = relative.save(tmp_path / "ckpt")
    monkeypatch.chdir(tmp_path)
    assert make_worker(tiny_dir.resolve()).load(ckpt) == {}
    other = save_tiny_model(tmp_path / "other", seed=0)
    with pytest.raises(
        ValueError, match=r"was written with trainer\.model='[^']*/model', this run has trainer"
    ):
        make_worker(other).load(ckpt)


def test_export_merged_is_a_plain_hf_model(tiny_dir, tmp_path):
    w = make_worker(tiny_dir, lora=LoRAConfig(rank=RANK, alpha=8))
    batch = filled(w, 1)
    w.update(batch)
    want = w.compute_logprobs(batch)
    out = w.export_hf(tmp_path / "merged")
    stored = load_file(str(tmp_path / "merged" / "model.safetensors"))
    assert not any("lora" in k for k in stored)
    exported = AutoModelForCausalLM.from_pretrained(out)
    assert not any("lora" in n for n, _ in exported.named_parameters())
    got = batch_logprobs(exported, batch)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    assert (got - w.compute_logprobs(batch, adapters=False)).abs().max() > 1e-2  # not the base


def test_export_adapter_is_a_peft_folder(tiny_dir, tmp_path):
    w = make_worker(tiny_dir, lora=LoRAConfig(rank=RANK, alpha=8, export="adapter"))
    batch = filled(w, 1)
    w.update(batch)
    out = w.export_hf(tmp_path / "adapter")
    assert sorted(p.name for p in (tmp_path / "adapter").iterdir()) == sorted(
        [ADAPTER_CONFIG, ADAPTER_WEIGHTS, EXPORT_MARKER]
    )
    model = peft.PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_dir), out).eval()
    torch.testing.assert_close(batch_logprobs(model, batch), w.compute_logprobs(batch), atol=1e-5, rtol=0)


def test_adapters_for_sync_names_scaling_and_an_engine_sync(tiny_dir):
    cfg = LoRAConfig(rank=RANK, alpha=16, target_modules=["q_proj", "down_proj"])
    w = make_worker(tiny_dir, lora=cfg)
    w.update(filled(w, 1))
    adapters = w.adapters_for_sync()
    modules = [m for m in MODULES if m.endswith(("q_proj", "down_proj"))]
    assert sorted(adapters.tensors) == sorted(f"{m}.{x}" for m in modules for x in ("lora_A", "lora_B"))
    assert adapters.modules() == sorted(modules)
    assert adapters.scaling == 16 / RANK == cfg.scaling
    own = params(w, True)
    for k, v in adapters.tensors.items():
        assert v.device.type == "cpu" and v.dtype == torch.float32
        assert torch.equal(v, own["lm." + k]), k
    assert adapters.tensors["model.layers.0.mlp.down_proj.lora_A"].shape == (RANK, 128)
    assert adapters.tensors["model.layers.0.mlp.down_proj.lora_B"].shape == (64, RANK)

    # an engine on the base model that takes them holds what the trainer's full sync would send
    engine = TransformersEngine(AutoModelForCausalLM.from_pretrained(tiny_dir), tokenizer=None)
    engine.load_weights(adapters)
    synced = w.state_dict_for_sync()
    for k, v in engine.model.state_dict().items():
        torch.testing.assert_close(v, synced[k], atol=0, rtol=0, msg=k)

    with pytest.raises(RuntimeError, match="without trainer.lora"):
        make_worker(tiny_dir, lora=LoRAConfig()).adapters_for_sync()


def test_bf16_adapters_train_and_sync_in_bf16(tiny_dir):
    w = make_worker(tiny_dir, lora=LoRAConfig(rank=RANK, dtype="bfloat16"))
    assert all(v.dtype == torch.bfloat16 for v in params(w, True).values())
    assert all(v.dtype == torch.float32 for v in params(w, False).values())
    batch = filled(w, 1)
    before = params(w, True)
    m = w.update(batch)
    assert math.isfinite(m["loss/total"])
    after = params(w, True)
    assert all(v.dtype == torch.bfloat16 for v in after.values())
    assert all(not torch.equal(after[k], before[k]) for k in after)
    adapters = w.adapters_for_sync()
    assert all(v.dtype == torch.bfloat16 for v in adapters.tensors.values())
    merged = AutoModelForCausalLM.from_pretrained(tiny_dir)
    merged.load_state_dict(w.state_dict_for_sync())
    torch.testing.assert_close(batch_logprobs(merged, batch), w.compute_logprobs(batch), atol=1e-4, rtol=0)


def test_an_adapter_on_the_lm_head_trains_and_exports_merged(tiny_dir, tmp_path):
    """lm_head as a target (an untied head): the log-prob pass runs the adapted head (the fused linear
    step, which reads only .weight, is not taken), and the merged export computes the same log-probs."""
    lora = LoRAConfig(rank=RANK, target_modules=["q_proj", "lm_head"])
    w = make_worker(tiny_dir, lora=lora)
    b = filled(w, 1)
    head_b = full(w.model.lm.lm_head.lora_B)
    w.update(b)
    assert not torch.equal(full(w.model.lm.lm_head.lora_B), head_b)  # the head's adapter trained
    w.export_hf(tmp_path / "merged")
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged", dtype=torch.float32)
    torch.testing.assert_close(batch_logprobs(merged, b), w.compute_logprobs(b), atol=1e-5, rtol=1e-5)


def test_an_adapter_on_a_head_tied_to_the_embeddings_is_refused(tmp_path):
    tied = save_tiny_model(tmp_path / "tied", seed=0, tie_word_embeddings=True)
    with pytest.raises(ValueError, match=r"trainer\.lora\.target_modules: lm_head shares its weight"):
        make_worker(tied, lora=LoRAConfig(rank=RANK, target_modules=["q_proj", "lm_head"]))
