"""Save a random-init model of a known architecture with the tiny character tokenizer, for smoke runs of
the loop on machines without real weights: python bench/make_random_model.py OUT [qwen2.5-1.5b|tiny]."""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.train_step import MODELS  # noqa: E402
from codefu.rollout.tiny import tiny_tokenizer  # noqa: E402


def save_random_model(out: Path, name: str, seed: int = 0, device: str = "cpu") -> int:
    """Save a random-init `name` (bench.train_step.MODELS) in bf16 with the tiny tokenizer; returns params."""
    from transformers import AutoConfig, AutoModelForCausalLM

    spec = dict(MODELS[name])
    config = AutoConfig.for_model(spec.pop("model_type"), **spec)
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.save_pretrained(out)
    tiny_tokenizer().save_pretrained(out)  # ids < 128: a smoke run, not a language model
    return sum(p.numel() for p in model.parameters())


if __name__ == "__main__":
    out, name = Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "qwen2.5-1.5b"
    n = save_random_model(out, name)
    print(f"saved {name} ({n / 1e9:.2f}B params) to {out}")
