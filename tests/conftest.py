import os
import shutil
import sys
from pathlib import Path

import pytest

# Triton decides at import whether its own library functions (tl.zeros, ...) are interpreted: without a
# GPU (CI, laptops) the only way to run a Triton kernel is its interpreter, so turn it on before anything
# imports triton (tests/unit/test_triton_decode.py runs the decode kernel that way). Machines with an
# NVIDIA driver keep compiled kernels for tests/gpu.
if shutil.which("nvidia-smi") is None:
    os.environ.setdefault("TRITON_INTERPRET", "1")

REPO = Path(__file__).resolve().parents[1]
# shared test helpers: `from helpers.toy_loop import ...` in any tier (and in the scripts tests start)
sys.path.insert(0, str(REPO / "tests"))
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def codefu_easy() -> Path:
    """The real CodeFu training problems (808 + 32), beside the repository as in CI."""
    path = SHARED_DATA / "codefu-easy"
    if not path.is_dir():
        pytest.skip(f"{path} is not present (it ships beside the repository, in shared/)")
    return path
