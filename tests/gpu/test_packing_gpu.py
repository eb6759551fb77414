"""Shared-prefix packing on CUDA (FlexAttention's block mask) against padded rows (SDPA's causal kernel):
the same log-probs, and updates that agree, eager and under trainer.compile, over batches whose packed
rows differ in length (the compiled kernels must follow new shapes)."""

from __future__ import annotations

import pytest
import torch

from codefu.models.tiny import save_tiny_model
from codefu.trainer import TrainerConfig, TrainerWorker
from codefu.trainer.packing import (
    _by_pieces,
    packed_attention,
    packed_attention_mask,
    packed_layout,
    prefix_groups,
)
from codefu.trainer.testing import grouped_batch

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

VOCAB = 512


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    # Qwen2-like proportions, small: GQA (8 query heads, 2 kv heads), head dim 64
    return save_tiny_model(
        tmp_path_factory.mktemp("m") / "model",
        seed=0,
        vocab_size=VOCAB,
        hidden_size=512,
        intermediate_size=1024,
        num_hidden_layers=3,
        num_attention_heads=8,
        num_key_value_heads=2,
        max_position_embeddings=4096,
    )


def batches():
    """Three batches of prompt groups whose packed rows differ in length (not multiples of 128)."""
    out = []
    for seed, (groups, prompt) in enumerate([(3, 200), (4, 333), (2, 517)]):
        b = grouped_batch(groups, 8, VOCAB, prompt_len=prompt, max_response=300, seed=seed)
        b.response_mask[1] = 0  # an untrained row
        out.append(b)
    return out


@pytest.mark.parametrize("compile", [False, True])
def test_packed_logprobs_and_update_match_padded(model_dir, compile):
    common = dict(model=str(model_dir), device="cuda", lr=1e-4, micro_batch_tokens=4096, compile=compile)
    padded = TrainerWorker(TrainerConfig(**common))
    packed = TrainerWorker(TrainerConfig(**common, packing="shared_prefix"))
    for b in batches():
        want = padded.compute_logprobs(b)
        got = packed.compute_logprobs(b)
        on = b.response_mask.bool()
        err = (got - want)[on].abs()
        # bf16 compute: two attention kernels, the same inputs
        assert float(err.mean()) < 0.01 and float(err.max()) < 0.15, (float(err.mean()), float(err.max()))
        assert (got[~on] == 0).all()
        b.old_logprobs = want
    b = batches()[0]
    b.old_logprobs = padded.compute_logprobs(b)
    m_padded, m_packed = padded.update(b), packed.update(b)
    assert m_packed["loss/total"] == pytest.approx(m_padded["loss/total"], rel=0.02, abs=1e-4)
    assert m_packed["optim/grad_norm"] == pytest.approx(m_padded["optim/grad_norm"], rel=0.02)
    assert m_packed["perf/computed_tokens"] < 0.6 * m_padded["perf/computed_tokens"]
    # after the step both models still agree (the same gradient, up to bf16)
    err = (packed.compute_logprobs(b) - padded.compute_logprobs(b))[b.response_mask.bool()].abs()
    assert float(err.mean()) < 0.01


@pytest.mark.parametrize("head_dim", [64, 128])
def test_flex_kernel_options_keep_the_attention(head_dim):
    """The compiled FlexAttention kernel under the options packing passes (no bounds checks, the tiles measured for this GPU) against SDPA piece by piece, in fp32 from the same bf16 inputs:
    outputs and the gradients of query, key and value; GQA 7:1 as Qwen2.5-7B's, rows that are not whole
    blocks until the padding."""
    batch = grouped_batch(3, 8, VOCAB, prompt_len=333, max_response=700, seed=4)
    lengths = batch.lengths().tolist()
    groups = prefix_groups(batch.input_ids, lengths, batch.response_mask, list(range(24)))
    layout = packed_layout(batch.input_ids, lengths, batch.response_mask, groups).to("cuda")
    L = layout.tokens
    mask = packed_attention_mask(layout)
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (
        torch.randn(1, h, L, head_dim, device="cuda", generator=g).bfloat16().requires_grad_()
        for h in (14, 2, 2)
    )
    d_out = torch.randn(1, L, 14, head_dim, device="cuda", generator=g).bfloat16()
    scale = head_dim**-0.5
    got = packed_attention(torch.nn.Module(), q, k, v, mask, scaling=scale)[0]
    got_grads = torch.autograd.grad(got, (q, k, v), d_out)
    leaves = [t.detach().float().requires_grad_() for t in (q, k, v)]
    pieces = layout.pieces.to("cuda")
    want = _by_pieces(*leaves, pieces, scale).transpose(1, 2)
    want_grads = torch.autograd.grad(want, leaves, d_out.float())
    for name, a, b in zip(("out", "dq", "dk", "dv"), (got, *got_grads), (want, *want_grads), strict=True):
        err = (a.detach().float() - b.detach()).abs()
        # bf16 inputs and outputs: a few bf16 steps of each value's size at most, and unbiased on average
        assert float(err.max()) < 0.05 * float(b.abs().max()), (name, float(err.max()))
        assert float(err.mean()) < 0.02 * float(b.abs().mean()) + 1e-4, (name, float(err.mean()))
