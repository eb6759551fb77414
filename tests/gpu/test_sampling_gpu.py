"""The GPU sampler (exponential race): draws follow softmax(scores), excluded tokens never win, a seed
repeats its draws.

    pytest tests/gpu/test_sampling_gpu.py -v          (on the GPU machine; skipped without CUDA)
"""

from __future__ import annotations

import pytest
import torch

from codefu.rollout.sampling import make_generator, sample_from_scores

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


def test_draws_follow_the_softmax_and_skip_excluded_tokens():
    scores = torch.tensor([2.0, 0.5, -1.0, float("-inf"), 1.0, 0.0], device="cuda")
    rows = 400_000
    draws = sample_from_scores(scores.expand(rows, -1).contiguous(), make_generator("cuda", 0))
    freq = torch.bincount(draws, minlength=6).double() / rows
    expected = torch.softmax(scores.double(), dim=-1)
    assert freq[3] == 0
    # 4 standard errors of a frequency near 0.5 over 400k draws is 0.003
    torch.testing.assert_close(freq, expected, atol=0.004, rtol=0)


def test_a_seed_repeats_its_draws_and_another_seed_does_not():
    scores = torch.randn(64, 151_936, device="cuda")
    first = sample_from_scores(scores, make_generator("cuda", 3))
    assert torch.equal(first, sample_from_scores(scores, make_generator("cuda", 3)))
    assert not torch.equal(first, sample_from_scores(scores, make_generator("cuda", 4)))
