"""`codefu train rollout.engine=vllm` on the bundled model (SmolLM2-135M, a GGUF dequantised once for
vLLM), in vLLM's CPU build: 2 small steps end to end; the engine's log-probs agree with the trainer's
recomputed ones before and after a weight sync; the run's config records the engine and its Python."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from helpers.vllm import vllm_python

pytestmark = pytest.mark.slow

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_two_steps_on_the_bundled_model_with_vllm(tmp_path):
    run_dir = tmp_path / "run"
    cmd = [
        sys.executable, "-m", "codefu", "train", "--run-dir", str(run_dir),
        "rollout.engine=vllm", f"rollout.vllm_python={vllm_python()}",
        "loop.steps=2", "data.prompts_per_step=2", "rollout.n=2", "rollout.max_new_tokens=32",
        "judge.max_tests=1", "loop.val_every=0", "loop.save_every=0",
        "algo.recompute_logprobs=true",  # the trainer's own log-probs beside the engine's
    ]  # fmt: skip
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert "vllm engine on cpu" in r.stdout
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [1, 2]
    for row in rows:  # step 1 on the start's weights, step 2 on the first sync's
        assert row["rollout/samples"] == 4 and row["rollout/logprob_tokens"] > 0
        # fp32 on both sides (dtype auto on a CPU without native bf16): kernel-order noise only
        assert row["rollout/logprob_diff_abs_max"] < 1e-3, row["rollout/logprob_diff_abs_max"]
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["rollout"]["engine"] == "vllm" and config["rollout"]["vllm_python"] == vllm_python()
    assert (run_dir / "model" / "config.json").exists()
    assert "quantization_config" not in json.loads((run_dir / "model" / "config.json").read_text())
    # the export loads in vLLM unchanged (and in transformers: tests/unit/test_trainer_gguf_smollm2.py)
    load = (
        "import os, sys; os.environ['VLLM_ENABLE_V1_MULTIPROCESSING'] = '0'; from vllm import LLM, SamplingParams; "
        "llm = LLM(model=sys.argv[1], dtype='float32', max_model_len=256, enforce_eager=True, "
        "kv_cache_memory_bytes=2**28); "
        "out = llm.generate(['def add(a, b):'], SamplingParams(max_tokens=4, temperature=0)); "
        "print('GENERATED', len(out[0].outputs[0].token_ids))"
    )
    r = subprocess.run(
        [vllm_python(), "-c", load, str(run_dir / "model")], capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0 and "GENERATED 4" in r.stdout, r.stdout[-1000:] + r.stderr[-3000:]
