"""For tests: a Triton module run by Triton's interpreter on CPU tensors (no GPU needed)."""

from __future__ import annotations

import importlib.util
import os
from types import ModuleType


def load_interpreted(name: str) -> ModuleType:
    """A fresh copy of module `name` (e.g. "codefu.rollout.native.triton_decode") imported with
    TRITON_INTERPRET=1: Triton decides at a kernel's definition whether it is interpreted, so the copy's
    kernels run on CPU while an already imported, compiled copy is left as it is."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ImportError(f"no module {name!r}")
    module = importlib.util.module_from_spec(spec)
    old = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        spec.loader.exec_module(module)
    finally:
        if old is None:
            del os.environ["TRITON_INTERPRET"]
        else:
            os.environ["TRITON_INTERPRET"] = old
    return module


__all__ = ["load_interpreted"]
