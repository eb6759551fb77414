"""Loading a causal LM and its tokenizer, the same way for the trainer and every rollout engine."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn

from codefu.errors import CodefuError
from codefu.models.bundled import BUNDLED_NAME, smollm2_gguf

log = logging.getLogger(__name__)

DTYPE_BY_NAME = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


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


def resolve_source(model: str, gguf_file: str | None = None) -> tuple[str, str | None]:
    """(directory or hub id, gguf file name or None) for `from_pretrained`."""
    path = Path(model)
    if path.suffix == ".gguf":
        if not path.is_file():
            raise FileNotFoundError(f"GGUF file {path} does not exist")
        return str(path.parent), path.name
    return model, gguf_file


def model_problem(model: str, gguf_file: str | None = None) -> str | None:
    """Why `model` names nothing `load_model` can load, or None when it does: `smollm2` (the bundled
    model), a .gguf file, an HF model folder (config.json, or `gguf_file`, in it), or a hub id in the
    local Hugging Face cache or, failing that, on the hub (one request: a typo, or a machine without
    network, is told at once rather than after a download's retries). For the CLIs, before they start."""
    if not model:
        return "no model given: an HF folder, a .gguf file, a hub id or smollm2"
    if model == BUNDLED_NAME:
        try:
            smollm2_gguf()
        except CodefuError as e:
            return str(e)
        return None
    path = Path(model)
    if path.suffix == ".gguf":
        return None if path.is_file() else "no such file"
    if path.is_dir():
        if gguf_file is None and is_adapter_folder(model):
            return adapter_folder_problem(model)
        wanted = gguf_file or "config.json"
        return None if (path / wanted).is_file() else f"not a model folder (no {wanted} in it)"
    if path.exists():
        return "not a model: give an HF model folder or a .gguf file"
    return _hub_problem(model, gguf_file)


def is_adapter_folder(model: str | Path) -> bool:
    """PEFT's LoRA adapter folder (adapter_config.json and no config.json): what a LoRA run exports with
    trainer.lora.export adapter (RUN_DIR/model, step_N/hf, step_N/adapter), not a model."""
    from codefu.models.lora import ADAPTER_CONFIG

    path = Path(model)
    return (path / ADAPTER_CONFIG).is_file() and not (path / "config.json").is_file()


def adapter_base_model(model: str | Path) -> str | None:
    """The base model an adapter folder's adapter_config.json names (base_model_name_or_path), or None."""
    from codefu.models.lora import ADAPTER_CONFIG

    try:
        base = json.loads((Path(model) / ADAPTER_CONFIG).read_text()).get("base_model_name_or_path")
    except (OSError, ValueError, AttributeError):
        return None
    return base if isinstance(base, str) and base else None


def adapter_folder_problem(model: str | Path) -> str:
    """Why an adapter folder is not a model: what it holds, for which base, and what to do instead."""
    base = adapter_base_model(model)
    return (
        f"PEFT's folder of LoRA adapters (trainer.lora.export: adapter) for the base model "
        f"{base or '(not named in its adapter_config.json)'}, not a whole model: export the run merged "
        f"(trainer.lora.export: merged), or load it with peft.PeftModel.from_pretrained(base, path)"
    )


def _hub_problem(repo_id: str, gguf_file: str | None) -> str | None:
    from huggingface_hub import model_info, try_to_load_from_cache
    from huggingface_hub.errors import RepositoryNotFoundError

    missing = "no such file or folder"
    try:
        if isinstance(try_to_load_from_cache(repo_id, gguf_file or "config.json"), str):
            return None
    except ValueError:  # not a hub id's shape (an absolute path, two slashes, ...): a path after all
        return missing
    try:
        model_info(repo_id, timeout=10)
    except RepositoryNotFoundError:
        return f"{missing}, nor a model of that name on the Hugging Face hub"
    except Exception as e:  # offline, no network, the hub down: nothing says the model is there
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        return f"{missing}, nor a model in the local Hugging Face cache (the hub is unreachable: {reason})"
    return None


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
