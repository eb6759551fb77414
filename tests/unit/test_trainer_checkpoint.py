"""Checkpoints on one rank: resume gives the identical next update, atomic writes, keep-last, HF export.
Resuming at a different world size is tests/e2e/test_trainer_dist.py."""

import random
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.distributed.checkpoint.api import CheckpointException
from transformers import AutoModelForCausalLM

from codefu.models.tiny import save_tiny_model
from codefu.trainer import TrainerConfig, TrainerWorker
from codefu.trainer import checkpoint as ckpt
from codefu.trainer.testing import random_batch

VOCAB = 128


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)


def make_worker(model_dir, **overrides):
    base = dict(
        model=str(model_dir),
        lr=1e-3,
        adam_eps=1e-5,
        mini_batch_size=2,
        warmup_steps=2,
        schedule="cosine",
        total_steps=10,
        micro_batch_tokens=24,
        keep_last=2,
    )
    return TrainerWorker(TrainerConfig(**(base | overrides)))


def filled(w, seed):
    b = random_batch(4, 12, VOCAB, prompt_len=3, min_len=6, seed=seed)
    b.old_logprobs = w.compute_logprobs(b)
    return b


def test_resume_gives_identical_next_update(tiny_dir, tmp_path):
    a = make_worker(tiny_dir)
    a.update(filled(a, 1))
    path = a.save(tmp_path / "ckpt", extra_state={"loader": {"epoch": 3, "index": 17}})
    random.random(), np.random.rand(), torch.rand(1)  # RNG moves on after the save ...
    expected_rng = (random.random(), float(np.random.rand()))
    batch2 = filled(a, 2)
    m_a = a.update(batch2)

    b = make_worker(tiny_dir)  # a fresh worker (fresh optimizer, step 0), then resume
    random.seed(123)
    extra = b.load(tmp_path / "ckpt")  # the root: picks the latest
    random.random(), np.random.rand(), torch.rand(1)
    assert (random.random(), float(np.random.rand())) == expected_rng  # ... and is restored by load
    assert extra == {"loader": {"epoch": 3, "index": 17}}
    assert b.step == 2 and path.endswith("step_00000002")
    m_b = b.update(batch2)
    assert m_b["optim/lr"] == m_a["optim/lr"] and m_b["loss/total"] == m_a["loss/total"]
    sa, sb = a.state_dict_for_sync(), b.state_dict_for_sync()
    for k in sa:
        torch.testing.assert_close(sa[k], sb[k], atol=0, rtol=0, msg=k)


def test_keep_last_and_crashed_save_leaves_previous_intact(tiny_dir, tmp_path):
    w = make_worker(tiny_dir, keep_last=2)
    root = tmp_path / "ckpt"
    batch = filled(w, 3)
    for _ in range(3):
        w.update(batch)  # 2 steps each
        w.save(root)
    assert [p.name for p in ckpt.list_checkpoints(root)] == ["step_00000004", "step_00000006"]
    # a save that died half way: its .tmp directory is not a checkpoint and is ignored
    crashed = root / "step_00000008.tmp"
    crashed.mkdir()
    (crashed / ".metadata").write_bytes(b"partial")
    assert ckpt.latest_checkpoint(root).name == "step_00000006"
    w.load(root)
    assert w.step == 6
    w.update(batch)
    w.save(root)  # overwrites the leftover .tmp
    assert ckpt.latest_checkpoint(root).name == "step_00000008" and not crashed.exists()
    with pytest.raises(FileNotFoundError):
        w.load(tmp_path / "nothing")


def truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def zero_fill(path):
    path.write_bytes(bytes(path.stat().st_size))


def replace_by_folder(path):
    path.unlink()
    path.mkdir()


@pytest.mark.parametrize(
    ("damage", "named", "reader_error"),
    [
        (lambda p: (p / "trainer_state.pt").write_text("not a checkpoint"), "trainer_state.pt", "Unpickling"),
        (lambda p: truncate(p / "trainer_state.pt"), "trainer_state.pt", "PytorchStreamReader"),
        (lambda p: (p / "rng_rank0.pt").unlink(), "rng_rank0.pt", "FileNotFoundError"),
        # a file over ~4 KB cut short sends torch.load's reader before the file's start (OSError EINVAL)
        (lambda p: truncate(p / "rng_rank0.pt"), "rng_rank0.pt", "Error"),
        (lambda p: zero_fill(p / "rng_rank0.pt"), "rng_rank0.pt", "Error"),  # KeyError of the legacy format
        (lambda p: replace_by_folder(p / "rng_rank0.pt"), "rng_rank0.pt", "IsADirectoryError"),
        (lambda p: truncate(p / ".metadata"), ".metadata", "Error"),
        (lambda p: [f.write_bytes(b"") for f in p.glob("*.distcp")], "*.distcp", "Error"),
    ],
    ids=[
        "state-not-a-checkpoint",
        "state-cut-short",
        "rng-missing",
        "rng-cut-short",
        "rng-zeroed",
        "rng-a-folder",
        "metadata-cut-short",
        "shards-emptied",
    ],
)
def test_a_damaged_checkpoint_is_named_with_the_file(tiny_dir, tmp_path, damage, named, reader_error):
    w = make_worker(tiny_dir)
    w.update(filled(w, 1))
    path = Path(w.save(tmp_path / "ckpt"))
    damage(path)
    with pytest.raises(ckpt.DamagedCheckpoint) as caught:
        make_worker(tiny_dir).load(path)
    message = str(caught.value)
    assert f"checkpoint {path} is damaged" in message and named in message, message
    assert reader_error in message.split("cannot be read", 1)[1], message  # the reader's own error, kept


def test_a_checkpoint_of_another_model_is_not_called_damaged(tiny_dir, tmp_path):
    w = make_worker(tiny_dir)
    w.update(filled(w, 1))
    path = Path(w.save(tmp_path / "ckpt"))
    wider = save_tiny_model(tmp_path / "wider", seed=0, intermediate_size=192)
    with pytest.raises(ckpt.CheckpointRefused, match="written for another trainer.model") as caught:
        make_worker(wider).load(path)
    assert not isinstance(caught.value, ckpt.DamagedCheckpoint)
    assert "size mismatch" in str(caught.value).lower(), caught.value


def reading(path, *errors):
    """What `readable` makes of the reader's `errors`: one raised by the reader itself, several as DCP's
    CheckpointException gives them (one per rank). Root reads any file whatever its mode, so a test cannot
    make the reader itself meet a PermissionError: it is raised where the reader would raise it."""
    raised = (
        errors[0]
        if len(errors) == 1
        else CheckpointException("read", {r: (e, None) for r, e in enumerate(errors)})
    )
    with pytest.raises(BaseException) as caught, ckpt.readable(path, "trainer_state.pt"):
        raise raised
    return caught.value, raised


def test_what_is_called_damage_and_what_is_not(tmp_path):
    f = str(tmp_path / "trainer_state.pt")
    missing, denied = (
        FileNotFoundError(2, "No such file or directory", f),
        PermissionError(13, "Permission denied", f),
    )
    for errors in [(missing,), (missing, FileNotFoundError(2, "No such file or directory", f))]:
        error, _ = reading(tmp_path, *errors)
        assert isinstance(error, ckpt.DamagedCheckpoint), error
        expected = f"checkpoint {tmp_path} is damaged: trainer_state.pt cannot be read (FileNotFoundError"
        assert expected in str(error), error
    # a file this user may not read is not damage (moving the checkpoint aside would lose a good one):
    # refused, saying what to fix, also where only one rank was denied
    for errors in [(denied,), (denied, missing), (missing, denied)]:
        error, _ = reading(tmp_path, *errors)
        assert type(error) is ckpt.CheckpointRefused, error
        assert "trainer_state.pt cannot be read by this user (PermissionError" in str(error), error
        assert "read access" in str(error)
    # a storage error says nothing about the checkpoint's bytes: it passes unchanged
    for errors in [(OSError(5, "Input/output error", f),), (OSError(116, "Stale file handle", f), missing)]:
        error, raised = reading(tmp_path, *errors)
        assert error is raised


@pytest.mark.parametrize("tied", [False, True])
def test_hf_export_loads_in_plain_transformers_with_the_same_logits(tmp_path, tied):
    model_dir = save_tiny_model(tmp_path / "model", seed=1, tie_word_embeddings=tied)
    w = make_worker(model_dir, keep_last=0)
    w.update(filled(w, 4))  # exported weights must be the trained ones, not the loaded ones
    out = w.export_hf(tmp_path / "export", dtype=torch.float32)
    plain = AutoModelForCausalLM.from_pretrained(out)
    assert plain.config.tie_word_embeddings is tied
    batch = random_batch(3, 10, VOCAB, seed=5)
    with torch.no_grad():
        exported = plain(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
        w.model.unshard()  # gather the root's params to call the inner transformers model directly
        live = w.model.lm(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
        w.model.reshard()
    torch.testing.assert_close(exported, live, atol=1e-5, rtol=1e-5)
    trained = w.state_dict_for_sync()
    loaded = AutoModelForCausalLM.from_pretrained(model_dir).state_dict()
    assert not torch.equal(trained["model.norm.weight"], loaded["model.norm.weight"])
