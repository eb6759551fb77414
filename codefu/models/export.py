"""Writing a model as a plain Hugging Face folder, which transformers, vLLM and our engines load: the
trainer's exports (codefu.trainer.checkpoint.export_hf) and the rollout engines' own copies of a GGUF."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch
from torch import Tensor


def write_hf_model(
    path: str | Path,
    state_dict: dict[str, Tensor],
    hf_config: Any,
    tokenizer: Any = None,
    extra_files: dict[str, str] | None = None,
) -> Path:
    """Write an HF model directory (config.json, generation_config.json when known, model.safetensors,
    tokenizer files, and `extra_files`: name -> text) from a full state dict with HF names, atomically: in
    PATH.tmp, then renamed into place (an earlier PATH moves aside first and is removed after).

    Tied weights (tie_word_embeddings) are written once, as transformers does; the file is one
    model.safetensors (transformers loads it whatever its size).
    """
    from safetensors.torch import save_file

    path = Path(path)
    tmp = fresh_sibling(path)
    tied = bool(getattr(hf_config, "tie_word_embeddings", False))
    tensors = {}
    for k, v in state_dict.items():
        if tied and k == "lm_head.weight":
            continue
        tensors[k] = v.detach().to("cpu").contiguous().clone()  # no shared storage (safetensors refuses it)
    save_file(tensors, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    dtype = next(iter(tensors.values())).dtype if tensors else torch.float32
    config_dict = hf_config.to_dict()
    # a policy loaded from a GGUF keeps its quantization config, but the tensors written here are plain
    # (dequantised): other loaders (vLLM) refuse a config that names a quantization the files lack
    config_dict.pop("quantization_config", None)
    config = hf_config.__class__.from_dict(config_dict)
    config.dtype = dtype
    config.use_cache = True  # the trainer turns the KV cache off; generation wants it
    config.save_pretrained(tmp)
    try:
        from transformers import GenerationConfig

        GenerationConfig.from_model_config(config).save_pretrained(tmp)
    except (ValueError, TypeError):
        pass  # optional: from_pretrained falls back to defaults
    if tokenizer is not None:
        tokenizer.save_pretrained(tmp)
    for name, text in (extra_files or {}).items():
        (tmp / name).write_text(text)
    return move_into_place(tmp, path)


def fresh_sibling(path: Path) -> Path:
    """An empty PATH.tmp to write a folder in before `move_into_place` (a leftover one is removed)."""
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def move_into_place(tmp: Path, path: Path) -> Path:
    """The finished folder `tmp` becomes `path`; an earlier `path` moves aside first and is removed after,
    so there is never a moment without a complete folder there."""
    old = path.with_name(path.name + ".old")
    if path.exists():
        shutil.rmtree(old, ignore_errors=True)
        path.rename(old)
    tmp.rename(path)
    shutil.rmtree(old, ignore_errors=True)
    return path


__all__ = ["fresh_sibling", "move_into_place", "write_hf_model"]
