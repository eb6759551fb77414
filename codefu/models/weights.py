"""Weight sync between processes on the same GPU: one flat buffer, shared through CUDA IPC.

A colocated trainer rank and rollout engine sit on one GPU in two processes. Sending the state dict
through Ray's object store copies every weight GPU -> CPU -> GPU (a 1.5B model's sync took ~30 s in the
first GPU runs). Instead the trainer packs the full weights, in the engine's dtype, into ONE contiguous
buffer on its GPU and hands out a CUDA IPC handle to it (a few hundred bytes through Ray); the engine
maps the buffer and copies each slice into its own parameters, device to device. One buffer means one
IPC mapping (opening one per tensor costs ~1 ms each, ~340 for a 7B model).

    trainer:  packed = pack_weights(named_tensors, dtype, device)   # PackedWeights, kept alive
              msg = packed.share()                                  # SharedWeights: picklable
    engine:   engine.load_weights(msg.open())                       # views into the mapped buffer
    trainer:  del packed                                            # after the engine has copied

The producer must keep its buffer alive until every consumer finished copying (the caller orders this:
`share`, then the engines' load, then the producer drops it). On CPU (tests, the laptop default) the same
contract works without IPC: `share` returns the buffer itself, which Ray pickles.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from codefu.models.lora import AdapterWeights


@dataclass(frozen=True)
class FlatLayout:
    """Where each tensor lives in the flat buffer: (name, shape, element offset)."""

    entries: tuple[tuple[str, tuple[int, ...], int], ...]
    numel: int

    @classmethod
    def of(cls, shapes: Iterable[tuple[str, torch.Size | tuple[int, ...]]]) -> FlatLayout:
        entries, offset = [], 0
        for name, shape in shapes:
            shape = tuple(int(d) for d in shape)
            entries.append((name, shape, offset))
            offset += math.prod(shape)
        return cls(tuple(entries), offset)

    def views(self, flat: Tensor) -> dict[str, Tensor]:
        """name -> a view of `flat` (no copy)."""
        if flat.numel() != self.numel:
            raise ValueError(f"weight buffer has {flat.numel()} elements, the layout {self.numel}")
        return {name: flat[o : o + math.prod(shape)].view(shape) for name, shape, o in self.entries}


@dataclass
class SharedWeights:
    """What crosses the process boundary: the layout plus a CUDA IPC handle (or, on CPU, the buffer)."""

    layout: FlatLayout
    handle: Any  # (rebuild function, args) from torch's CUDA IPC reduction; None on CPU
    buffer: Tensor | None = None  # CPU only
    adapter_scaling: float | None = None  # LoRA adapters, not weights (codefu.models.lora)

    def open(self) -> dict[str, Tensor] | AdapterWeights:
        """Map the producer's buffer (CUDA) and return name -> view (LoRA adapters: as `AdapterWeights`).
        Keep the result only while copying."""
        if self.handle is None:
            assert self.buffer is not None
            views = self.layout.views(self.buffer)
        else:
            rebuild, args = self.handle
            views = self.layout.views(rebuild(*args))
        return views if self.adapter_scaling is None else AdapterWeights(views, self.adapter_scaling)


@dataclass
class PackedWeights:
    flat: Tensor
    layout: FlatLayout
    adapter_scaling: float | None = None  # the buffer holds LoRA adapters with this scaling

    def share(self) -> SharedWeights:
        if self.flat.is_cuda:
            from torch.multiprocessing.reductions import reduce_tensor

            return SharedWeights(self.layout, reduce_tensor(self.flat), adapter_scaling=self.adapter_scaling)
        return SharedWeights(self.layout, None, self.flat, self.adapter_scaling)


def pack_weights(
    named: list[tuple[str, Tensor]], dtype: torch.dtype, device: torch.device | str
) -> PackedWeights:
    """Copy (name, tensor) pairs, converted to `dtype`, into one flat buffer on `device`.

    Tensors may be FSDP `DTensor`s: each is gathered in turn (a collective: call on every rank, same
    order), copied into its slice and freed before the next one, so the peak is the buffer plus one full
    parameter, not a second full copy of the model in the master dtype."""
    layout = FlatLayout.of((name, t.shape) for name, t in named)
    flat = torch.empty(layout.numel, dtype=dtype, device=device)
    views = layout.views(flat)
    for name, t in named:
        views[name].copy_(whole(t))
    return PackedWeights(flat, layout)


def whole(t: Tensor) -> Tensor:
    """The whole (unsharded) tensor: an FSDP `DTensor` gathered (a collective: call on every rank, in the
    same order), or its local tensor where one rank holds all of it (no gather: its per-call cost was
    ~0.1 ms x 392 adapters at 7B); a plain tensor as it is (detached)."""
    from torch.distributed.tensor import DTensor

    if isinstance(t, DTensor):
        return t.to_local() if t.device_mesh.size() == 1 else t.full_tensor()
    return t.detach()


__all__ = ["FlatLayout", "PackedWeights", "SharedWeights", "pack_weights", "whole"]
