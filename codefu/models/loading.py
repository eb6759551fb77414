"""Loading a causal LM and its tokenizer, the same way for the trainer and every rollout engine."""

from __future__ import annotations

import logging
import sys
from typing import Any

import torch
from torch import nn

from codefu.models.sources import DTYPE_NAMES, resolve_source

log = logging.getLogger(__name__)

DTYPE_BY_NAME = {name: getattr(torch, name) for name in DTYPE_NAMES}


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bf16 natively (AMX, AVX512-BF16); elsewhere bf16 is emulated."""
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def native_dtype_name(device: torch.device | str) -> str:
    """bfloat16 where it is computed natively (a GPU; a CPU with AMX or AVX512-BF16), else float32:
    what a dtype of "auto" means. Emulated bf16 is not a saving: ~100x slower matmuls than fp32 on a
    2-core AMD EPYC without it (docs/LOG.md, 2026-12-06)."""
    kind = torch.device(device).type
    native = kind == "cuda" or (kind == "cpu" and cpu_has_native_bf16())
    return "bfloat16" if native else "float32"


def resolve_dtype_name(name: str, device: torch.device | str) -> str:
    """A configured dtype name with "auto" replaced by `native_dtype_name(device)`."""
    return native_dtype_name(device) if name == "auto" else name


def warn_if_slow_on_cpu(dtype: torch.dtype) -> None:
    """bf16 on a CPU without native bf16 (AMX, AVX512-BF16) is emulated: slower than fp32, not faster."""
    if dtype == torch.bfloat16 and not cpu_has_native_bf16():
        log.warning(
            "bfloat16 on a CPU without native bf16 support runs slower than float32: "
            "set trainer.dtype / rollout.dtype to float32"
        )


def load_model(
    model: str,
    gguf_file: str | None = None,
    dtype: str = "float32",
    tokenizer: str | None = None,
    attn_implementation: str | None = None,
) -> tuple[nn.Module, Any]:
    """(model, tokenizer or None) on the CPU in `dtype`.

    `model` is an HF folder, a .gguf file or a hub id (a path that does not exist locally; downloads, so it
    needs network). A GGUF is dequantised by transformers (needs the `gguf` package) and its tokenizer is
    read from the same file. A bare weights folder (a random-init test model) has no tokenizer: None,
    unless `tokenizer` names one.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    if not model:
        raise ValueError("no model given: an HF directory, a .gguf file or a hub id")
    if dtype not in DTYPE_BY_NAME:
        raise ValueError(f"dtype must be one of {sorted(DTYPE_BY_NAME)}, got {dtype!r}")
    if not sys.stderr.isatty():
        # in a Ray actor each bar refresh becomes a forwarded log line: hundreds per model load
        hf_logging.disable_progress_bar()
    source, gguf = resolve_source(model, gguf_file)
    kwargs: dict[str, Any] = {"dtype": DTYPE_BY_NAME[dtype]}
    if gguf is not None:
        kwargs["gguf_file"] = gguf
    if attn_implementation is not None:
        kwargs["attn_implementation"] = attn_implementation
    lm = AutoModelForCausalLM.from_pretrained(source, **kwargs)
    try:
        tok = AutoTokenizer.from_pretrained(tokenizer or source, **({"gguf_file": gguf} if gguf else {}))
    except (OSError, ValueError, TypeError):
        if tokenizer is not None:
            raise
        tok = None
    log.info("loaded %s%s as %s", model, f" ({gguf})" if gguf else "", dtype)
    return lm, tok
