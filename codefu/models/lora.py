"""LoRA: low-rank adapters on a causal LM's linear layers, shared by the trainer (which trains them) and the
rollout engines (which take only them at a weight sync).

A wrapped layer computes `x W^T + b + scaling * (dropout(x) A^T) B^T` with A (rank, in), B (out, rank) and
scaling = alpha / rank. B starts at zero, so a fresh adapter changes nothing. The names are the HF module's
plus `.lora_A` / `.lora_B` (the base weight keeps its name), and on disk PEFT's layout
(`adapter_config.json`, `adapter_model.safetensors` with `base_model.model.<module>.lora_A.weight`), which
`peft.PeftModel.from_pretrained` loads.

An engine takes adapters by merging them into its own weights, each time from an exact copy of the base
weights it keeps (`AdapterMerger`): W = base + scaling * B A, never W += delta, so nothing drifts over many
syncs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from codefu.models.export import fresh_sibling, move_into_place
from codefu.models.lora_config import ADAPTER_CONFIG, ADAPTER_WEIGHTS, LoRAConfig

_PEFT_PREFIX = "base_model.model."


class LoRALinear(nn.Linear):
    """An nn.Linear with a low-rank adapter beside its (frozen) weight; `weight` and `bias` are the very
    parameters of the layer it replaces, so their names do not change."""

    def __init__(self, base: nn.Linear, rank: int, scaling: float, dropout: float, dtype: torch.dtype):
        nn.Module.__init__(self)
        self.in_features, self.out_features = base.in_features, base.out_features
        self.weight = base.weight
        self.bias = base.bias
        device = base.weight.device
        self.lora_A = nn.Parameter(torch.empty(rank, self.in_features, dtype=dtype, device=device))
        self.lora_B = nn.Parameter(torch.zeros(self.out_features, rank, dtype=dtype, device=device))
        if device.type != "meta":
            nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))  # PEFT's initialisation
        self.scaling = scaling
        self.lora_dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.adapters_enabled = True

    def forward(self, x: Tensor) -> Tensor:
        out = F.linear(x, self.weight, self.bias)
        if not self.adapters_enabled:
            return out
        low = F.linear(F.linear(self.lora_dropout(x), self.lora_A.to(x.dtype)), self.lora_B.to(x.dtype))
        return out + low * self.scaling

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, rank={self.lora_A.shape[0]}, scaling={self.scaling:g}"


def _matches(name: str, target: str) -> bool:
    return name == target or name.endswith("." + target)


def add_adapters(lm: nn.Module, cfg: LoRAConfig) -> list[str]:
    """Freeze every parameter of `lm` and replace each linear layer `cfg.target_modules` names by a
    `LoRALinear` (trainable adapters in cfg.dtype, on the layer's device). Returns the wrapped layers'
    names. ValueError naming the key: a target that matches no linear layer, or a rank larger than a
    layer's smaller side."""
    lm.requires_grad_(False)
    linear = {name: m for name, m in lm.named_modules() if isinstance(m, nn.Linear) and name}
    chosen = {name: m for name, m in linear.items() if any(_matches(name, t) for t in cfg.target_modules)}
    for target in cfg.target_modules:
        if not any(_matches(name, target) for name in chosen):
            leaves = sorted({name.rsplit(".", 1)[-1] for name in linear})
            raise ValueError(
                f"trainer.lora.target_modules: {target!r} matches no linear layer of {type(lm).__name__} "
                f"(its linear layers: {', '.join(leaves)})"
            )
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[cfg.dtype]
    embeddings = lm.get_input_embeddings() if hasattr(lm, "get_input_embeddings") else None
    for name, module in chosen.items():
        if embeddings is not None and module.weight is getattr(embeddings, "weight", None):
            raise ValueError(
                f"trainer.lora.target_modules: {name} shares its weight with the input embeddings "
                f"(tie_word_embeddings): a merged adapter would change both; leave it out"
            )
        smaller = min(module.in_features, module.out_features)
        if cfg.rank > smaller:
            raise ValueError(
                f"trainer.lora.rank {cfg.rank} is larger than {name} ({module.in_features} in, "
                f"{module.out_features} out): at most {smaller}"
            )
        parent_name, _, child = name.rpartition(".")
        parent = lm.get_submodule(parent_name) if parent_name else lm
        setattr(parent, child, LoRALinear(module, cfg.rank, cfg.scaling, cfg.dropout, dtype))
    return sorted(chosen)


def adapter_layers(model: nn.Module) -> Iterator[tuple[str, LoRALinear]]:
    for name, module in model.named_modules():
        if isinstance(module, LoRALinear):
            yield name, module


@contextmanager
def adapters_disabled(model: nn.Module) -> Iterator[None]:
    """The base model: every `LoRALinear` of `model` without its adapter inside the block."""
    layers = [m for _, m in adapter_layers(model)]
    for m in layers:
        m.adapters_enabled = False
    try:
        yield
    finally:
        for m in layers:
            m.adapters_enabled = True


def is_adapter_key(key: str) -> bool:
    return key.endswith((".lora_A", ".lora_B"))


@dataclass
class AdapterWeights:
    """What a weight sync sends with LoRA: the adapters (HF module name + ".lora_A" / ".lora_B" -> tensor)
    and their scaling. An engine's `load_weights` takes it in place of a full state dict."""

    tensors: dict[str, Tensor]
    scaling: float

    def modules(self) -> list[str]:
        return sorted(k.removesuffix(".lora_A") for k in self.tensors if k.endswith(".lora_A"))

    def delta(self, module: str, device: torch.device, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        """(scaling * B, A) of `module` on `device` in `dtype`: the weight's change is their product."""
        a = self.tensors[module + ".lora_A"].to(device=device, dtype=dtype)
        b = self.tensors[module + ".lora_B"].to(device=device, dtype=dtype)
        return b * self.scaling, a


def split_adapters(state: dict[str, Tensor], scaling: float) -> tuple[dict[str, Tensor], AdapterWeights]:
    """A state dict of a model with adapters -> (its other tensors, its adapters)."""
    adapters = {k: v for k, v in state.items() if is_adapter_key(k)}
    return {k: v for k, v in state.items() if k not in adapters}, AdapterWeights(adapters, scaling)


def merge_adapters(state: dict[str, Tensor], scaling: float) -> dict[str, Tensor]:
    """A state dict of a model with adapters -> the plain model's: each adapted weight W becomes
    W + scaling * B A (in fp32, then W's dtype), the adapter keys go."""
    base, adapters = split_adapters(state, scaling)
    for module in adapters.modules():
        w = base[module + ".weight"]
        b, a = adapters.delta(module, w.device, torch.float32)
        base[module + ".weight"] = torch.addmm(w.float(), b, a).to(w.dtype)
    return base


class AdapterMerger:
    """An engine's side of an adapter sync: writes base + scaling * B A into the engine's adapted weights,
    each time from an exact copy of their base values taken at the first sync (a merge never builds on the
    last one: no drift). `forget` after the engine loads full weights (a new base)."""

    def __init__(self) -> None:
        self.base: dict[str, Tensor] = {}

    def forget(self) -> None:
        self.base = {}

    @torch.no_grad()
    def apply(self, targets: dict[str, Tensor], adapters: AdapterWeights) -> None:
        """`targets`: the engine's weights by HF name (views it computes with, written in place)."""
        modules = adapters.modules()
        missing = [m for m in modules if m + ".weight" not in targets]
        if missing:
            raise KeyError(f"load_weights: adapters of layers the model does not have: {missing[:5]}")
        for module in modules:
            name = module + ".weight"
            view = targets[name]
            b, a = adapters.delta(module, view.device, view.dtype)
            if b.shape[0] != view.shape[0] or a.shape[1] != view.shape[1]:
                raise ValueError(
                    f"load_weights: the adapter of {module} is ({b.shape[0]} x {a.shape[1]}), the model's "
                    f"weight {tuple(view.shape)}"
                )
            base = self.base.get(name)
            if base is None:
                base = self.base[name] = view.clone()
            # one rounding to the weight's dtype (addmm accumulates in fp32); a copy for views addmm
            # cannot write into
            if view.is_contiguous():
                torch.addmm(base, b, a, out=view)
            else:
                view.copy_(torch.addmm(base, b, a))


# ---- PEFT's files -------------------------------------------------------------------------------------


def peft_config(cfg: LoRAConfig, base_model: str | None) -> dict[str, Any]:
    return {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base_model,
        "r": cfg.rank,
        "lora_alpha": cfg.alpha,
        "lora_dropout": cfg.dropout,
        "target_modules": list(cfg.target_modules),
        "bias": "none",
        "fan_in_fan_out": False,
        "inference_mode": True,
        "init_lora_weights": True,
        "use_rslora": False,
        "use_dora": False,
        "modules_to_save": None,
        "layers_to_transform": None,
        "layers_pattern": None,
        "rank_pattern": {},
        "alpha_pattern": {},
    }


def save_peft_adapter(
    path: str | Path, adapters: dict[str, Tensor], cfg: LoRAConfig, base_model: str | None = None
) -> Path:
    """Write PEFT's adapter folder (adapter_config.json, adapter_model.safetensors) from adapter tensors
    named as in `AdapterWeights`, atomically (PATH.tmp, then renamed)."""
    from safetensors.torch import save_file

    path = Path(path)
    tmp = fresh_sibling(path)
    tensors = {
        f"{_PEFT_PREFIX}{k}.weight": v.detach().to("cpu").contiguous().clone() for k, v in adapters.items()
    }
    save_file(tensors, str(tmp / ADAPTER_WEIGHTS), metadata={"format": "pt"})
    (tmp / ADAPTER_CONFIG).write_text(json.dumps(peft_config(cfg, base_model), indent=2) + "\n")
    return move_into_place(tmp, path)


def load_peft_adapter(path: str | Path) -> tuple[dict[str, Tensor], dict[str, Any]]:
    """PEFT's adapter folder -> (tensors named as in `AdapterWeights`, its adapter_config)."""
    from safetensors.torch import load_file

    path = Path(path)
    config = json.loads((path / ADAPTER_CONFIG).read_text())
    tensors = {}
    for k, v in load_file(str(path / ADAPTER_WEIGHTS)).items():
        name = k.removeprefix(_PEFT_PREFIX).removesuffix(".weight").replace(".default", "")
        tensors[name] = v
    return tensors, config


def adapter_shapes_differ(saved: dict[str, Sequence[int]], expected: dict[str, Sequence[int]]) -> str | None:
    """The first difference between a checkpoint's adapter shapes and this model's, in words; None if none."""
    for key in sorted(set(saved) | set(expected)):
        if key not in saved:
            return f"{key} is missing from the checkpoint"
        if key not in expected:
            return f"{key} is in the checkpoint but not in this model"
        if tuple(saved[key]) != tuple(expected[key]):
            return f"{key} is {tuple(saved[key])} in the checkpoint, {tuple(expected[key])} in this model"
    return None


__all__ = [
    "AdapterMerger",
    "AdapterWeights",
    "LoRALinear",
    "add_adapters",
    "adapter_layers",
    "adapter_shapes_differ",
    "adapters_disabled",
    "is_adapter_key",
    "load_peft_adapter",
    "merge_adapters",
    "peft_config",
    "save_peft_adapter",
    "split_adapters",
]
