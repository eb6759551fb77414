"""TrainerWorker.update and compute_logprobs on one rank, against a plain transformers reference.

One rank still goes through FSDP2 (a single-rank gloo group in this process), so these tests cover the same
code path as N ranks; tests/e2e/test_trainer_dist.py compares against 2 ranks.
"""

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM

import codefu.algo.loss as loss_mod
from codefu.algo import aggregate_loss, entropy_from_logits, kl_penalty, policy_loss
from codefu.models.tiny import save_tiny_model
from codefu.trainer import TrainerConfig, TrainerWorker
from codefu.trainer.testing import random_batch

VOCAB = 128


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)


def make_worker(model_dir, **overrides) -> TrainerWorker:
    # adam_eps 1e-5, not 1e-8: AdamW's first step is lr * g / (|g| + eps), which turns float noise in a
    # gradient entry near 0 (1e-10 from a different summation order) into a visible step when eps is tiny
    base = dict(
        # on a GPU machine too: the plain-PyTorch references here run on the CPU in fp32 (on CUDA, TF32
        # matmuls put the trainer's numbers outside these tolerances)
        device="cpu",
        model=str(model_dir),
        lr=1e-3,
        adam_eps=1e-5,
        weight_decay=0.01,
        grad_clip=1.0,
        micro_batch_tokens=4096,
    )
    return TrainerWorker(TrainerConfig(**(base | overrides)))


def params(w: TrainerWorker) -> dict[str, torch.Tensor]:
    return w.state_dict_for_sync(dtype=torch.float32)


def with_old_logprobs(w: TrainerWorker, batch, noise: float = 0.05, seed: int = 1):
    """old_logprobs = the current policy's plus noise, so ratios are not all 1 and clipping can happen."""
    g = torch.Generator().manual_seed(seed)
    lp = w.compute_logprobs(batch)
    batch.old_logprobs = lp + noise * torch.randn(lp.shape, generator=g) * batch.response_mask
    batch.ref_logprobs = lp - noise * torch.randn(lp.shape, generator=g) * batch.response_mask
    return batch


def reference_logprobs(model, batch):
    """Unchunked: full logits, fp32 log_softmax, gather; aligned like Batch.old_logprobs."""
    logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    lp = torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, batch.input_ids[:, 1:, None]).squeeze(-1)
    return F.pad(lp, (1, 0)), logits


def test_compute_logprobs_matches_unchunked_transformers(tiny_dir):
    batch = random_batch(6, 20, VOCAB, prompt_len=5, min_len=8, seed=2)
    w = make_worker(
        tiny_dir, logprob_chunk_tokens=7, micro_batch_tokens=40
    )  # many chunks, many micro-batches
    ref_model = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32)
    with torch.no_grad():
        ref, _ = reference_logprobs(ref_model, batch)
    got = w.compute_logprobs(batch)
    torch.testing.assert_close(got, ref * batch.response_mask, atol=1e-5, rtol=1e-5)
    assert (got[batch.response_mask == 0] == 0).all()
    frozen = TrainerWorker(w.cfg, frozen=True)
    torch.testing.assert_close(frozen.compute_logprobs(batch), got, atol=1e-6, rtol=1e-6)


def test_a_reference_offloaded_between_passes_gives_the_same_logprobs(tiny_dir):
    # colocated on a GPU the reference's weights leave between its passes (trainer.offload_reference):
    # the memory is freed in place (FSDP's shards keep their views) and filled again from a CPU copy
    batch = random_batch(4, 12, VOCAB, prompt_len=3, seed=2)
    reference = TrainerWorker(make_worker(tiny_dir).cfg, frozen=True)
    expected = reference.compute_logprobs(batch)
    weight_bytes = sum(p.numel() * p.element_size() for p in reference.model.parameters())
    moved = reference.offload_weights()
    assert moved["memory/reference_offloaded_gb"] * 2**30 >= weight_bytes
    assert all(p._local_tensor.untyped_storage().nbytes() == 0 for p in reference.model.parameters())
    assert reference.offload_weights() == {}  # twice: nothing more
    torch.testing.assert_close(reference.compute_logprobs(batch), expected, atol=0, rtol=0)  # reloads first
    reference.offload_weights()
    assert "timing/reference_reload_s" in reference.reload_weights()
    assert reference.reload_weights() == {}
    torch.testing.assert_close(reference.compute_logprobs(batch), expected, atol=0, rtol=0)
    with pytest.raises(RuntimeError, match="trained worker"):
        make_worker(tiny_dir).offload_weights()


@pytest.mark.parametrize(
    "agg,kl_coef,entropy_coef,per_token",
    [
        ("token-mean", 0.0, 0.0, False),
        ("seq-mean-token-mean", 0.1, 0.01, False),
        ("seq-mean-token-sum-norm", 0.2, 0.0, True),
    ],
)
def test_one_step_matches_plain_pytorch_reference(tiny_dir, agg, kl_coef, entropy_coef, per_token):
    """One optimizer step (mini-batch = batch) over several micro-batches equals: full-batch loss in plain
    transformers + PyTorch, clip_grad_norm_, AdamW. A flipped sign or a wrong normalization fails here."""
    batch = random_batch(6, 16, VOCAB, prompt_len=4, min_len=6, seed=5, per_token_advantages=per_token)
    cfg = dict(
        loss_agg=agg,
        kl_coef=kl_coef,
        kl_kind="k3",
        entropy_coef=entropy_coef,
        clip_high=0.28,
        micro_batch_tokens=32,
        logprob_chunk_tokens=5,
        grad_clip=0.5,
        norm_length=20,
    )
    w = make_worker(tiny_dir, **cfg)
    with_old_logprobs(w, batch)
    metrics = w.update(batch)

    model = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32)
    lp, logits = reference_logprobs(model, batch)
    mask = batch.response_mask.float()
    ref_agg = agg
    if agg == "seq-mean-token-sum-norm":  # Dr. GRPO with the constant length L = norm_length
        lp, mask = F.pad(lp, (0, 4)), F.pad(mask, (0, 4))  # pad T=16 to L=20
        batch.old_logprobs, batch.ref_logprobs = (
            F.pad(batch.old_logprobs, (0, 4)),
            F.pad(batch.ref_logprobs, (0, 4)),
        )
        if per_token:
            batch.advantages = F.pad(batch.advantages, (0, 4))
    loss, _ = policy_loss(lp, batch.old_logprobs, batch.advantages, mask, 0.2, 0.28, agg=ref_agg)
    if kl_coef:
        loss = loss + kl_coef * aggregate_loss(kl_penalty(lp, batch.ref_logprobs, "k3"), mask, ref_agg)
    if entropy_coef:
        ent = F.pad(entropy_from_logits(logits[:, :-1]), (1, 0))
        loss = loss - entropy_coef * aggregate_loss(
            ent, mask[:, :16], ref_agg if ref_agg != "seq-mean-token-sum-norm" else "seq-mean-token-sum-norm"
        )
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, eps=1e-5, weight_decay=0.01)
    opt.step()

    assert metrics["loss/total"] == pytest.approx(loss.item(), rel=1e-5, abs=1e-6)
    assert metrics["optim/grad_norm"] == pytest.approx(float(norm), rel=1e-4)
    got = params(w)
    for name, p in model.named_parameters():
        torch.testing.assert_close(
            got[name], p.detach(), atol=1e-6, rtol=1e-5, msg=lambda s, name=name: name + s
        )


def test_update_independent_of_micro_batch_budget(tiny_dir):
    """PPO epochs x mini-batches, different token budgets (1..all sequences per micro-batch): same weights."""
    batch = random_batch(8, 16, VOCAB, prompt_len=3, min_len=5, seed=7)
    results = []
    for budget in (16, 40, 4096):
        w = make_worker(tiny_dir, micro_batch_tokens=budget, mini_batch_size=4, ppo_epochs=2)
        with_old_logprobs(w, batch)
        m = w.update(batch)
        assert m["optim/steps"] == 4
        results.append((params(w), m["loss/total"]))
    for got, loss in results[1:]:
        assert loss == pytest.approx(results[0][1], rel=1e-5, abs=1e-6)
        for k, v in got.items():
            torch.testing.assert_close(v, results[0][0][k], atol=1e-6, rtol=1e-5, msg=lambda s, k=k: k + s)


def test_per_micro_batch_mean_would_depend_on_the_split(tiny_dir, monkeypatch):
    """The TRL #3021 bug: dividing each micro-batch by its own token count makes the result depend on the
    budget. Proves the invariance test above can fail."""
    real = loss_mod.policy_loss
    monkeypatch.setattr(
        loss_mod, "policy_loss", lambda *a, normalizer=None, **k: real(*a, normalizer=None, **k)
    )
    batch = random_batch(8, 16, VOCAB, prompt_len=3, min_len=4, seed=7)
    out = []
    for budget in (16, 4096):
        w = make_worker(tiny_dir, micro_batch_tokens=budget)
        with_old_logprobs(w, batch)
        w.update(batch)
        out.append(params(w))
    diff = max(float((out[0][k] - out[1][k]).abs().max()) for k in out[0])
    assert diff > 1e-4


def test_update_raises_logprob_of_positive_advantage(tiny_dir):
    """Sign check: sequences with advantage +1 become more likely, those with -1 less likely."""
    batch = random_batch(4, 12, VOCAB, prompt_len=3, seed=11)
    batch.advantages = torch.tensor([1.0, -1.0, 1.0, -1.0])
    w = make_worker(tiny_dir, lr=1e-2, clip_low=10.0, clip_high=10.0)
    before = w.compute_logprobs(batch)
    batch.old_logprobs = before
    for _ in range(3):
        w.update(batch)
    delta = ((w.compute_logprobs(batch) - before) * batch.response_mask).sum(-1)
    assert (delta[[0, 2]] > 0).all() and (delta[[1, 3]] < 0).all(), delta


def test_kl_needs_reference_logprobs_and_frozen_worker_cannot_update(tiny_dir):
    batch = random_batch(2, 8, VOCAB, seed=1)
    w = make_worker(tiny_dir, kl_coef=0.1)
    batch.old_logprobs = w.compute_logprobs(batch)
    with pytest.raises(ValueError, match="ref_logprobs"):
        w.update(batch)
    with pytest.raises(RuntimeError, match="frozen"):
        TrainerWorker(w.cfg, frozen=True).update(batch)


def test_gradient_checkpointing_gives_the_same_update(tiny_dir):
    batch = random_batch(4, 12, VOCAB, prompt_len=3, seed=4)
    out = []
    for gc in (True, False):
        w = make_worker(tiny_dir, gradient_checkpointing=gc)
        assert w.model.lm.model.gradient_checkpointing is gc
        with_old_logprobs(w, batch)
        w.update(batch)
        out.append(params(w))
    for k in out[0]:
        torch.testing.assert_close(out[0][k], out[1][k], atol=1e-6, rtol=1e-5)


def test_compiled_checkpointed_layers_train_compiled_and_give_the_same_update(tiny_dir):
    """Newer transformers checkpoint a layer's forward inside its compiled call; without
    skip_fwd_side_effects_in_bwd_under_checkpoint dynamo broke the graph there and the layers trained eagerly."""
    from torch._dynamo.utils import counters

    batch = random_batch(4, 12, VOCAB, prompt_len=3, seed=4)
    eager = make_worker(tiny_dir, gradient_checkpointing=True)
    compiled = make_worker(tiny_dir, gradient_checkpointing=True, compile=True)
    breaks = sum(counters["graph_break"].values())
    updates = []
    for w in (eager, compiled):
        with_old_logprobs(w, batch)
        updates.append(w.update(batch))
    assert sum(counters["graph_break"].values()) == breaks, dict(counters["graph_break"])
    assert updates[0]["compile/update_graphs"] == 0
    assert updates[1]["compile/update_graphs"] >= 1  # the training pass, recompute included, compiled
    for k, v in params(eager).items():
        torch.testing.assert_close(params(compiled)[k], v, atol=1e-5, rtol=1e-4)
    with_old_logprobs(compiled, batch)
    assert compiled.update(batch)["compile/update_graphs"] == 0  # same shapes: no recompile


def test_chosen_calls_are_profiled_per_kind(tiny_dir, tmp_path):
    batch = random_batch(4, 12, VOCAB, prompt_len=3, seed=4)
    w = make_worker(tiny_dir, profile_dir=str(tmp_path), profile_calls=[1])
    for _ in range(2):
        with_old_logprobs(w, batch)  # one forward-only pass
        w.update(batch)
    TrainerWorker(w.cfg, frozen=True).compute_logprobs(batch)  # the reference's call 0: not profiled
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "policy_forward_1_rank0.txt",
        "policy_update_1_rank0.txt",
    ]
    for name in ("policy_forward_1_rank0.txt", "policy_update_1_rank0.txt"):
        text = (tmp_path / name).read_text()
        assert text.startswith("wall ") and "aten::" in text, text[:500]
    assert "autograd" in (tmp_path / "policy_update_1_rank0.txt").read_text().lower()  # the backward is in
    assert TrainerConfig(profile_dir="prof").profile_dir == str(Path.cwd() / "prof")  # for Ray's workers too
    with pytest.raises(ValueError, match="profile_calls needs profile_dir"):
        TrainerConfig(profile_calls=[0])
    with pytest.raises(ValueError, match="profile_calls must be >= 0"):
        TrainerConfig(profile_dir=str(tmp_path), profile_calls=[-1])


def test_forward_only_passes_take_their_own_budget(tiny_dir):
    batch = random_batch(6, 20, VOCAB, prompt_len=5, min_len=8, seed=2)
    small = make_worker(tiny_dir, micro_batch_tokens=40)
    big = make_worker(tiny_dir, micro_batch_tokens=40, forward_micro_batch_tokens=400)
    lengths = batch.lengths().tolist()
    rows = list(range(6))
    assert len(big._my_micro_batches(batch, rows, lengths, 400)[0]) == 1  # the whole batch in one forward
    assert len(small._my_micro_batches(batch, rows, lengths)[0]) > 1
    calls = {}
    for name, w in (("big", big), ("small", small)):
        forward = w._forward

        def counted(*args, name=name, forward=forward, **kwargs):
            calls[name] = calls.get(name, 0) + 1
            return forward(*args, **kwargs)

        w._forward = counted
    torch.testing.assert_close(
        big.compute_logprobs(batch), small.compute_logprobs(batch), atol=1e-5, rtol=1e-5
    )
    assert calls["big"] == 1 < calls["small"]
    with pytest.raises(ValueError, match="forward_micro_batch_tokens"):
        TrainerConfig(forward_micro_batch_tokens=-1)


@pytest.mark.parametrize("settings", ["expandable_segments", ":True", "expandable_segments:True,", ""])
def test_cuda_allocator_settings_must_be_name_value_pairs(settings):
    with pytest.raises(ValueError, match="cuda_allocator: .* is not name:value"):
        TrainerConfig(cuda_allocator=settings)


def test_cuda_allocator_settings_of_several_pairs_are_taken():
    cfg = TrainerConfig(cuda_allocator="expandable_segments:True,garbage_collection_threshold:0.8")
    assert cfg.cuda_allocator == "expandable_segments:True,garbage_collection_threshold:0.8"


def test_auto_dtype_is_bf16_only_where_it_is_native(monkeypatch):
    import codefu.models.loading as loading
    from codefu.trainer.model import compute_dtype

    monkeypatch.setattr(loading, "cpu_has_native_bf16", lambda: False)
    assert loading.native_dtype_name("cpu") == "float32" and loading.native_dtype_name("cuda:0") == "bfloat16"
    assert compute_dtype(TrainerConfig(dtype="auto"), torch.device("cpu")) == torch.float32
    assert loading.resolve_dtype_name("float16", "cpu") == "float16"
    monkeypatch.setattr(loading, "cpu_has_native_bf16", lambda: True)
    assert compute_dtype(TrainerConfig(dtype="auto"), torch.device("cpu")) == torch.bfloat16
    assert loading.resolve_dtype_name("auto", "cpu") == "bfloat16"
