"""What a model argument names (the bundled model, a .gguf file, an HF folder, PEFT's adapter folder, a hub
id) and whether `load_model` can load it: torch-free checks, so that the CLIs and the config check tell a
wrong model at once, before torch loads."""

from __future__ import annotations

import json
from pathlib import Path

from codefu.errors import CodefuError
from codefu.models.bundled import BUNDLED_NAME, smollm2_gguf
from codefu.models.lora_config import ADAPTER_CONFIG

#: the dtypes a model loads in, by name (codefu.models.loading: DTYPE_BY_NAME, torch's for each)
DTYPE_NAMES = ("float32", "bfloat16", "float16")


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
    path = Path(model)
    return (path / ADAPTER_CONFIG).is_file() and not (path / "config.json").is_file()


def adapter_base_model(model: str | Path) -> str | None:
    """The base model an adapter folder's adapter_config.json names (base_model_name_or_path), or None."""
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
