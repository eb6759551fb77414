"""Where the tests find vLLM: the Python of the environment scripts/setup.sh makes for vLLM's CPU build
(.venv-vllm), or $CODEFU_VLLM_PYTHON. Missing is a failure on the machines setup installs it on (Linux
x86_64 without an NVIDIA GPU, as CI), and a skip where setup leaves it out on purpose (a GPU machine
takes vLLM's CUDA build, `pip install 'codefu[vllm]'`, and CODEFU_VLLM_PYTHON then)."""

from __future__ import annotations

import os
import platform
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def vllm_python() -> str:
    python = os.environ.get("CODEFU_VLLM_PYTHON") or str(REPO / ".venv-vllm" / "bin" / "python")
    if Path(python).is_file():
        return python
    if shutil.which("nvidia-smi") or platform.machine() != "x86_64":
        pytest.skip(
            f"no vLLM environment at {python}: scripts/setup-vllm-cpu.sh leaves it out on this machine"
        )
    pytest.fail(
        f"no vLLM environment at {python}: ./scripts/setup.sh makes it (scripts/setup-vllm-cpu.sh), or "
        "point CODEFU_VLLM_PYTHON at a Python that has vLLM"
    )
