"""What a LoRA run leaves around the trainer (one rank, gloo, CPU): full fine-tuning's checkpoints of a
model with tied embeddings are what they were before LoRA (every key, strict loads), a LoRA checkpoint
records its base model and adapter settings and refuses another, its PEFT folder is inside the atomic
save, and an adapter export (trainer.lora.export: adapter) is a finished run's model for resume_point and
codefu eval."""

from __future__ import annotations

import json

import pytest
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.tensor import DTensor
from transformers import AutoModelForCausalLM

from codefu.errors import CodefuError
from codefu.models import model_problem
from codefu.models.lora_config import ADAPTER_CONFIG, ADAPTER_WEIGHTS, LoRAConfig
from codefu.models.tiny import save_tiny_model, tiny_tokenizer
from codefu.orchestrator.eval_cli import merged_adapter_model
from codefu.orchestrator.loop import FINAL_MODEL, resume_point
from codefu.trainer import TrainerConfig, TrainerWorker
from codefu.trainer.checkpoint import EXPORT_MARKER, STATE_FILE
from codefu.trainer.testing import random_batch
from helpers.native_models import batch_logprobs

VOCAB = 128
RANK = 4


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    path = save_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)
    tiny_tokenizer().save_pretrained(path)
    return path


def make_worker(model_dir, lora: LoRAConfig, **overrides) -> TrainerWorker:
    base = dict(model=str(model_dir), lr=1e-2, mini_batch_size=2, micro_batch_tokens=24, lora=lora)
    return TrainerWorker(TrainerConfig(**(base | overrides)))


def filled(w: TrainerWorker, seed: int):
    b = random_batch(4, 12, VOCAB, prompt_len=3, min_len=6, seed=seed)
    b.old_logprobs = w.compute_logprobs(b)
    return b


def weights(w: TrainerWorker) -> dict[str, torch.Tensor]:
    return {
        n: (p.full_tensor() if isinstance(p, DTensor) else p.detach()).clone()
        for n, p in w.model.named_parameters()
    }


# A. full fine-tuning of a model with tied embeddings: as before LoRA


def test_a_tied_full_fine_tuning_checkpoint_holds_every_key_and_resumes_bitwise(tmp_path):
    tied = save_tiny_model(tmp_path / "tied", seed=0, tie_word_embeddings=True)
    a = make_worker(tied, LoRAConfig())
    a.update(filled(a, 1))
    path = a.save(tmp_path / "ckpt", extra_state={"loader": {"index": 3}})
    batch2 = filled(a, 2)
    m_a = a.update(batch2)

    meta = dcp.FileSystemReader(path).read_metadata().state_dict_metadata
    # the tied head is saved under its own name too (named_parameters lists it once, the state dict twice)
    assert "model.lm.lm_head.weight" in meta and "model.lm.model.embed_tokens.weight" in meta

    b = make_worker(tied, LoRAConfig())
    assert b.load(tmp_path / "ckpt") == {"loader": {"index": 3}}
    torch.testing.assert_close(b.compute_logprobs(batch2), batch2.old_logprobs, atol=0, rtol=0)
    m_b = b.update(batch2)
    assert m_b["loss/total"] == m_a["loss/total"]
    wa, wb = weights(a), weights(b)
    assert wa.keys() == wb.keys()
    for k in wa:
        torch.testing.assert_close(wb[k], wa[k], atol=0, rtol=0, msg=k)


# B. a LoRA checkpoint records its base model and adapter settings


@pytest.fixture(scope="module")
def lora_ckpt(tiny_dir, tmp_path_factory):
    w = make_worker(tiny_dir, LoRAConfig(rank=RANK, alpha=8))
    w.update(filled(w, 1))
    return w.save(tmp_path_factory.mktemp("lora") / "ckpt")


def test_a_lora_checkpoint_records_the_base_model_and_the_adapter_settings(tiny_dir, lora_ckpt):
    settings = torch.load(f"{lora_ckpt}/{STATE_FILE}", weights_only=False)["settings"]
    assert settings["trainer.model"] == str(tiny_dir)
    assert settings["trainer.lora.alpha"] == 8 and settings["trainer.lora.rank"] == RANK
    assert settings["trainer.lora.dropout"] == 0.0
    assert settings["trainer.lora.target_modules"] == sorted(LoRAConfig().target_modules)
    assert make_worker(tiny_dir, LoRAConfig(rank=RANK, alpha=8)).load(lora_ckpt) == {}  # the same: fine


@pytest.mark.parametrize(
    "lora, key, saved, given",
    [
        (LoRAConfig(rank=RANK, alpha=16), "trainer.lora.alpha", "8", "16"),
        (LoRAConfig(rank=RANK, alpha=8, dropout=0.1), "trainer.lora.dropout", "0.0", "0.1"),
    ],
)
def test_other_lora_settings_are_refused_naming_the_key_and_both_values(
    tiny_dir, lora_ckpt, lora, key, saved, given
):
    with pytest.raises(ValueError, match=rf"{key}={saved}, this run has {key}={given}"):
        make_worker(tiny_dir, lora).load(lora_ckpt)


def test_another_base_model_is_refused_naming_trainer_model(tiny_dir, lora_ckpt, tmp_path):
    other = save_tiny_model(tmp_path / "other", seed=1)  # same shapes: the adapter check passes
    with pytest.raises(ValueError, match=r"trainer\.model=.*tiny.*this run has trainer\.model=.*other"):
        make_worker(other, LoRAConfig(rank=RANK, alpha=8)).load(lora_ckpt)


def test_a_checkpoint_without_the_record_still_loads(tiny_dir, tmp_path):
    w = make_worker(tiny_dir, LoRAConfig(rank=RANK, alpha=8))
    path = w.save(tmp_path / "ckpt")
    state = torch.load(f"{path}/{STATE_FILE}", weights_only=False)
    del state["settings"]  # as written before the record
    torch.save(state, f"{path}/{STATE_FILE}")
    assert make_worker(tiny_dir, LoRAConfig(rank=RANK, alpha=16)).load(path) == {}


def test_the_peft_folder_is_written_before_the_checkpoint_becomes_visible(tiny_dir, tmp_path, monkeypatch):
    w = make_worker(tiny_dir, LoRAConfig(rank=RANK))

    def fail(path):
        raise OSError("disk full")

    monkeypatch.setattr(w, "save_adapter", fail)
    with pytest.raises(OSError, match="disk full"):
        w.save(tmp_path / "ckpt")
    assert not (tmp_path / "ckpt" / "step_00000000").exists()  # no checkpoint without its adapter folder
    monkeypatch.undo()
    path = w.save(tmp_path / "ckpt")
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["step_00000000"]
    assert sorted(p.name for p in (tmp_path / "ckpt" / "step_00000000" / "adapter").iterdir()) == sorted(
        [ADAPTER_CONFIG, ADAPTER_WEIGHTS]
    )
    assert make_worker(tiny_dir, LoRAConfig(rank=RANK)).load(path) == {}


# C. trainer.lora.export: adapter as a run's model


@pytest.fixture(scope="module")
def adapter_run(tiny_dir, tmp_path_factory):
    """A finished LoRA run's dir with its adapter export as RUN_DIR/model and no checkpoint left; the
    worker's log-probs of a batch, and the same run exported merged."""
    run = tmp_path_factory.mktemp("run")
    w = make_worker(tiny_dir, LoRAConfig(rank=RANK, alpha=8, export="adapter"))
    batch = filled(w, 1)
    w.update(batch)
    w.export_hf(run / FINAL_MODEL)
    w.cfg.lora.export = "merged"
    w.export_hf(run / "merged")
    return run, batch, w.compute_logprobs(batch)


def test_an_adapter_export_is_a_finished_runs_model_for_resume_point(adapter_run):
    run, _, _ = adapter_run
    assert (run / FINAL_MODEL / EXPORT_MARKER).is_file()
    assert json.loads((run / FINAL_MODEL / EXPORT_MARKER).read_text())["lora_adapter"] is True
    with pytest.raises(CodefuError, match="is a finished run that kept no resumable state"):
        resume_point(run)


def test_an_adapter_folder_as_a_model_is_named_for_what_it_is(adapter_run, tiny_dir):
    run, _, _ = adapter_run
    problem = model_problem(str(run / FINAL_MODEL))
    assert problem is not None
    assert f"LoRA adapters (trainer.lora.export: adapter) for the base model {tiny_dir}" in problem
    assert "trainer.lora.export: merged" in problem and "peft.PeftModel.from_pretrained" in problem


def test_eval_merges_an_adapter_folder_into_its_base(adapter_run, tmp_path):
    run, batch, want = adapter_run
    merged = merged_adapter_model("--model", str(run / FINAL_MODEL), tmp_path / "m", "float32")
    model = AutoModelForCausalLM.from_pretrained(merged, dtype=torch.float32)
    got = batch_logprobs(model, batch)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    exported = AutoModelForCausalLM.from_pretrained(run / "merged", dtype=torch.float32).state_dict()
    for k, v in model.state_dict().items():
        torch.testing.assert_close(v, exported[k], atol=0, rtol=0, msg=k)  # what export merged writes
    assert (merged / "tokenizer_config.json").is_file()  # the base's tokenizer goes with it


def test_eval_of_adapters_whose_base_is_gone_names_it(adapter_run, tmp_path):
    run, _, _ = adapter_run
    moved = tmp_path / "model"
    moved.mkdir()
    for name in (ADAPTER_CONFIG, ADAPTER_WEIGHTS):
        (moved / name).write_bytes((run / FINAL_MODEL / name).read_bytes())
    config = json.loads((moved / ADAPTER_CONFIG).read_text())
    config["base_model_name_or_path"] = str(tmp_path / "gone")
    (moved / ADAPTER_CONFIG).write_text(json.dumps(config))
    with pytest.raises(CodefuError, match=r"--model .*: LoRA adapters for the base model .*gone, which is"):
        merged_adapter_model("--model", str(moved), tmp_path / "m", "float32")
