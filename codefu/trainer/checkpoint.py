"""Checkpoints: sharded, resumable at any world size (torch.distributed.checkpoint), and HF exports.

Layout of one checkpoint (`<root>/step_00000042/`):
  .metadata, __*_*.distcp   DCP: model + AdamW state, sharded; DCP reshards on load, so a checkpoint
                            written by N ranks loads on M ranks
  trainer_state.pt          step, LR scheduler, saved world size, the caller's extra_state and settings
                            (rank 0)
  rng_rank<r>.pt            python / numpy / torch (+ CUDA) RNG states of rank r
  (write_extra's files)     e.g. LoRA's PEFT adapter folder `adapter/`

Every rank writes into `<path>.tmp`; after a barrier rank 0 renames it to `<path>`, so a crash mid-save
leaves the previous checkpoints untouched (a leftover `.tmp` is ignored and overwritten). With several
machines, `root` must be on a filesystem all of them share.
"""

from __future__ import annotations

import contextlib
import json
import pickle
import random
import re
import shutil
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import Tensor, nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict

from codefu.models import write_hf_model
from codefu.models.lora import adapter_shapes_differ, is_adapter_key

STATE_FILE = "trainer_state.pt"
FORMAT_VERSION = 1
_STEP_DIR = re.compile(r"^step_(\d+)$")


def checkpoint_path(root: str | Path, step: int) -> Path:
    return Path(root) / f"step_{step:08d}"


def is_checkpoint(path: str | Path) -> bool:
    return (Path(path) / STATE_FILE).is_file()


def list_checkpoints(root: str | Path) -> list[Path]:
    """Complete checkpoints under `root`, oldest first (by step)."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = [
        (int(m.group(1)), p) for p in root.iterdir() if (m := _STEP_DIR.match(p.name)) and is_checkpoint(p)
    ]
    return [p for _, p in sorted(found)]


def latest_checkpoint(root: str | Path) -> Path | None:
    ckpts = list_checkpoints(root)
    return ckpts[-1] if ckpts else None


def prune_checkpoints(root: str | Path, keep_last: int) -> list[Path]:
    """Delete all but the newest `keep_last` checkpoints under root (one rank). Returns the removed."""
    return _remove(list_checkpoints(root)[:-keep_last] if keep_last > 0 else [])


def remove_checkpoints(root: str | Path) -> list[Path]:
    """Delete every checkpoint under root (one rank). Returns the removed."""
    return _remove(list_checkpoints(root))


def _remove(paths: list[Path]) -> list[Path]:
    for p in paths:
        shutil.rmtree(p, ignore_errors=True)
    return paths


def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


def save_checkpoint(
    path: str | Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    step: int,
    extra_state: dict[str, Any] | None = None,
    settings: dict[str, Any] | None = None,
    write_extra: Callable[[Path], Any] | None = None,
) -> Path:
    """Write a checkpoint to `path` atomically (all ranks call it). Returns `path`.

    `settings`: config values (by their key, e.g. "trainer.lora.alpha") a resume must have the same
    (`load_checkpoint` compares them). `write_extra(tmp)`: called on every rank (it may be a collective)
    to write more files into the checkpoint's folder before the rename makes it visible."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    rank = dist.get_rank()
    if rank == 0:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    dist.barrier()
    model_sd, optim_sd = get_state_dict(model, optimizer)
    dcp.save({"model": trained_only(model, model_sd), "optim": optim_sd}, checkpoint_id=str(tmp))
    torch.save(rng_state(), tmp / f"rng_rank{rank}.pt")
    if write_extra is not None:
        write_extra(tmp)
    if rank == 0:
        state = {
            "format_version": FORMAT_VERSION,
            "step": step,
            "scheduler": scheduler.state_dict(),
            "world_size": dist.get_world_size(),
            "extra_state": extra_state or {},
            "settings": settings or {},
        }
        torch.save(state, tmp / STATE_FILE)
    dist.barrier()  # every shard and RNG file is on disk before the rename makes the checkpoint visible
    if rank == 0:
        old = path.with_name(path.name + ".old")
        if path.exists():  # saving the same step twice: replace it, still never leaving no checkpoint
            shutil.rmtree(old, ignore_errors=True)
            path.rename(old)
        tmp.rename(path)
        shutil.rmtree(old, ignore_errors=True)
    dist.barrier()
    return path


def load_checkpoint(
    path: str | Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    settings: dict[str, Any] | None = None,
) -> tuple[int, dict[str, Any]]:
    """Load a checkpoint written at any world size into this (already sharded) model and its optimizer.
    Returns (step, extra_state). Rank r restores the RNG state of saved rank r % saved_world_size.
    `settings`: this run's values of what `save_checkpoint` recorded (`check_settings_match`)."""
    path = Path(path)
    with readable(path, STATE_FILE, torch_saved=True):
        meta = torch.load(path / STATE_FILE, weights_only=False)
    # get_state_dict initializes AdamW's state (a zero-lr step) so DCP knows what to read into
    model_sd, optim_sd = get_state_dict(model, optimizer)
    state = {"model": trained_only(model, model_sd), "optim": optim_sd}
    check_adapters_match(path, state["model"])
    check_settings_match(path, meta.get("settings", {}), settings or {})
    with readable(path, "the sharded model and optimizer state (.metadata, *.distcp)"):
        dcp.load(state, checkpoint_id=str(path))
    # LoRA: only the adapters were saved; the frozen base is the model's own (trainer.model). Full
    # fine-tuning loads every key strictly, as it always did
    options = StateDictOptions(strict=state["model"] is model_sd)
    set_state_dict(
        model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"], options=options
    )
    scheduler.load_state_dict(meta["scheduler"])
    src = dist.get_rank() % meta["world_size"]
    with readable(path, f"rng_rank{src}.pt", torch_saved=True):
        set_rng_state(torch.load(path / f"rng_rank{src}.pt", weights_only=False))
    return int(meta["step"]), meta["extra_state"]


class CheckpointRefused(ValueError):
    """A checkpoint this run cannot resume from, by codefu's own checks: the message names the checkpoint
    and why (a setting that differs, tensors that do not fit this model, a file this user may not read, a
    damaged file)."""


class DamagedCheckpoint(CheckpointRefused):
    """A checkpoint file missing or unreadable (a copy cut short, a full disk): an earlier one may serve."""


#: what DCP says when a checkpoint's tensors do not fit the model they are loaded into
_DOES_NOT_FIT = re.compile(r"size mismatch|missing key|unexpected key", re.IGNORECASE)


def _unreadable(error: BaseException) -> bool:
    """Whether `error` is a reader's failure on a file's bytes (missing, cut short, not what it claims).
    Other OSErrors (an I/O error, a stale network handle, too many open files) say nothing about the bytes:
    moving the checkpoint aside on one of them could throw a good one away."""
    missing = FileNotFoundError | IsADirectoryError | NotADirectoryError
    if isinstance(error, missing | EOFError | pickle.UnpicklingError | zipfile.BadZipFile):
        return True
    if isinstance(error, AssertionError) and "metadata read failed" in str(error):  # dcp.load's .metadata
        return True
    return isinstance(error, RuntimeError) and "PytorchStreamReader" in str(error)  # torch.load's zip reader


def _not_a_torch_save(file: Path) -> bool:
    """Whether `file` cannot be what torch.save wrote (always a zip archive): a file cut short loses the
    archive's directory at its end, and torch.load then fails with whatever its reader met first (a seek
    before the start, an OSError EINVAL; all zeros: a KeyError of the legacy format)."""
    try:
        return file.is_file() and not zipfile.is_zipfile(file)
    except OSError:  # an I/O error reading it says nothing about its bytes
        return False


def _reason(error: BaseException) -> str:
    return type(error).__name__ + (f": {str(error)[:300]}" if str(error) else "")


@contextlib.contextmanager
def readable(path: Path, what: str, torch_saved: bool = False) -> Iterator[None]:
    """Reading `what` of checkpoint `path`: a file missing or unreadable as a DamagedCheckpoint, a file this
    user may not read or tensors that do not fit this model as a CheckpointRefused, each naming the
    checkpoint, instead of pickle's or DCP's own error (DCP wraps every rank's in a CheckpointException, a
    BaseException). Anything else (out of memory, a peer rank gone, a storage error) passes unchanged: it
    says nothing about the checkpoint. `torch_saved`: `what` is a file of `path` that torch.save wrote, so
    that one cut short is told from a reader's other failures."""
    try:
        yield
    except BaseException as e:
        failures = getattr(e, "failures", None)  # DCP: {rank: (the reader's exception, its traceback)}
        causes = [f[0] for f in failures.values()] if isinstance(failures, dict) and failures else [e]
        if all(_unreadable(c) for c in causes) or (torch_saved and _not_a_torch_save(path / what)):
            raise DamagedCheckpoint(
                f"checkpoint {path} is damaged: {what} cannot be read ({_reason(causes[0])})"
            ) from e
        denied = [c for c in causes if isinstance(c, PermissionError)]
        if denied:
            raise CheckpointRefused(
                f"checkpoint {path}: {what} cannot be read by this user ({_reason(denied[0])}); "
                "give it read access and resume again"
            ) from e
        fit = [c for c in causes if _DOES_NOT_FIT.search(str(c))]
        if fit:
            raise CheckpointRefused(
                f"checkpoint {path} does not fit this run's model ({what}: {_reason(fit[0])}): it was "
                "written for another trainer.model; resume with the model it was trained from, or start a "
                "new run"
            ) from e
        raise


def trained_only(model: nn.Module, model_sd: dict[str, Any]) -> dict[str, Any]:
    """`model_sd` itself when every parameter trains (full fine-tuning: every key, a tied lm_head included,
    which `named_parameters` lists once); when some are frozen (LoRA froze the base), the entries of the
    trained ones (the adapters: the frozen base is not saved, it is trainer.model)."""
    if all(p.requires_grad for p in model.parameters()):
        return model_sd
    trained = {name for name, p in model.named_parameters() if p.requires_grad}
    return {k: v for k, v in model_sd.items() if k in trained}


#: settings that may name a file or folder: the same one written two ways (relative from another folder,
#: absolute) is the same setting
PATH_SETTINGS = ("trainer.model",)


def same_path(a: Any, b: Any) -> bool:
    """Whether `a` and `b` name one existing file or folder (relative ones from this process's folder)."""
    if not (isinstance(a, str) and isinstance(b, str) and a and b):
        return False
    pa, pb = Path(a).expanduser(), Path(b).expanduser()
    return pa.exists() and pb.exists() and pa.resolve() == pb.resolve()


def check_settings_match(path: Path, saved: dict[str, Any], current: dict[str, Any]) -> None:
    """A CheckpointRefused naming the first config key (e.g. trainer.lora.alpha, trainer.model) whose value
    this run gives differently from the checkpoint's record, with both values. Keys only one side has are not
    compared (a checkpoint from before the record, or one the adapter check has already refused)."""
    for key in sorted(saved.keys() & current.keys()):
        if saved[key] != current[key] and not (key in PATH_SETTINGS and same_path(saved[key], current[key])):
            raise CheckpointRefused(
                f"checkpoint {path} was written with {key}={saved[key]!r}, this run has {key}="
                f"{current[key]!r}: resume it with {key}={saved[key]!r}, or start a new run"
            )


def check_adapters_match(path: Path, model_sd: dict[str, Any]) -> None:
    """A CheckpointRefused naming trainer.lora when the checkpoint's LoRA adapters (or their absence) differ
    from this model's: before DCP fails on a shape or a missing key with a message that names neither."""
    with readable(path, ".metadata"):
        metadata = dcp.FileSystemReader(str(path)).read_metadata().state_dict_metadata
    saved = {
        k.removeprefix("model."): list(m.size)
        for k, m in metadata.items()
        if k.startswith("model.") and is_adapter_key(k) and hasattr(m, "size")
    }
    expected = {k: list(v.shape) for k, v in model_sd.items() if is_adapter_key(k)}
    if saved and not expected:
        rank = next(iter(sorted(saved.items())))[1][0]
        raise CheckpointRefused(
            f"checkpoint {path} holds LoRA adapters (rank {rank}): resume it with trainer.lora.rank={rank} "
            f"and its trainer.lora.target_modules"
        )
    if expected and not saved:
        raise CheckpointRefused(
            f"checkpoint {path} holds no LoRA adapters (written without trainer.lora): resume it with "
            f"trainer.lora.rank=0, or start a new run"
        )
    difference = adapter_shapes_differ(saved, expected)
    if difference:
        raise CheckpointRefused(
            f"checkpoint {path} does not match this run's trainer.lora (rank, target_modules): {difference}"
        )


EXPORT_MARKER = "codefu_export.json"  # in every HF export: what wrote it (and that it is complete)


def export_hf(path: str | Path, state_dict: dict[str, Tensor], hf_config: Any, tokenizer: Any = None) -> Path:
    """Write an HF model directory (`codefu.models.write_hf_model`: config.json, generation_config.json
    when known, model.safetensors, tokenizer files) with this format's marker; atomic like checkpoints.
    Call on one rank."""
    marker = {EXPORT_MARKER: json.dumps({"format_version": FORMAT_VERSION}) + "\n"}
    return write_hf_model(path, state_dict, hf_config, tokenizer, extra_files=marker)


def mark_adapter_export(path: str | Path) -> Path:
    """Put the export marker into a complete LoRA adapter export (PEFT's folder, trainer.lora.export:
    adapter), written last, so a finished run is recognised by it as by a model's. Call on one rank."""
    marker = Path(path) / EXPORT_MARKER
    marker.write_text(json.dumps({"format_version": FORMAT_VERSION, "lora_adapter": True}) + "\n")
    return marker
