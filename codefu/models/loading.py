"""Loading a causal LM and its tokenizer, the same way for the trainer and every rollout engine."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn

log = logging.getLogger(__name__)

DTYPE_BY_NAME = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def warn_if_slow_on_cpu(dtype: torch.dtype) -> None:
    """bf16 on a CPU without native bf16 (AMX, AVX512-BF16) is emulated: slower than fp32, not faster."""
    if dtype == torch.bfloat16 and not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        log.warning(
            "bfloat16 on a CPU without native bf16 support runs slower than float32: "
            "set trainer.dtype / rollout.dtype to float32"
        )


def resolve_source(model: str, gguf_file: str | None = None) -> tuple[str, str | None]:
    """(directory or hub id, gguf file name or None) for `from_pretrained`."""
    path = Path(model)
    if path.suffix == ".gguf":
        if not path.is_file():
            raise FileNotFoundError(f"GGUF file {path} does not exist")
        return str(path.parent), path.name
    return model, gguf_file


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
