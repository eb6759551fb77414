"""weight_sync: one flat buffer with a layout; what the engine opens equals what the trainer packed."""

from __future__ import annotations

import pickle

import pytest
import torch

from codefu.models.weights import FlatLayout, pack_weights


def test_pack_share_open_round_trip_converts_dtype_and_keeps_shapes():
    torch.manual_seed(0)
    named = [("a.weight", torch.randn(3, 4)), ("b.bias", torch.randn(5)), ("c", torch.randn(2, 1, 3))]
    packed = pack_weights(named, torch.bfloat16, "cpu")
    assert packed.flat.numel() == 12 + 5 + 6 and packed.flat.dtype == torch.bfloat16
    shared = pickle.loads(pickle.dumps(packed.share()))  # what crosses to the engine's process
    opened = shared.open()
    assert list(opened) == ["a.weight", "b.bias", "c"]
    for name, t in named:
        assert opened[name].shape == t.shape and opened[name].dtype == torch.bfloat16
        torch.testing.assert_close(opened[name], t.to(torch.bfloat16))


def test_layout_views_are_views_and_a_wrong_buffer_is_an_error():
    layout = FlatLayout.of([("x", (2, 2)), ("y", (3,))])
    flat = torch.zeros(7)
    views = layout.views(flat)
    views["y"].fill_(1.0)
    assert flat.tolist() == [0, 0, 0, 0, 1, 1, 1]
    with pytest.raises(ValueError, match="6 elements, the layout 7"):
        layout.views(torch.zeros(6))
