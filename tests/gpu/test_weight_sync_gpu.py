"""Colocated weight sync on one GPU through CUDA IPC (bench/weight_sync.py --check): after one sync the
engine, started from other random weights, decodes exactly like an engine built from the trainer's."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

ROOT = Path(__file__).resolve().parents[2]


def test_ipc_sync_puts_the_trainers_weights_into_the_engine():
    # the engines size their KV cache from the GPU's free memory: give back what earlier tests cached
    gc.collect()
    torch.cuda.empty_cache()
    cmd = [
        sys.executable,
        str(ROOT / "bench" / "weight_sync.py"),
        "--model",
        "tiny",
        "--check",
        "--repeats",
        "2",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "equal the trainer's model: [True, True]" in proc.stdout
