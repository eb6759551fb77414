"""Save a random-init model of a known architecture with the tiny character tokenizer, for smoke runs of
the loop on machines without real weights: python bench/make_random_model.py OUT [qwen2.5-1.5b|tiny]."""

import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.train_step import MODELS  # noqa: E402
from codefu.models.tiny import tiny_tokenizer  # noqa: E402


def save_random_model(
    out: Path,
    arch: str | dict[str, Any],
    seed: int = 0,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.bfloat16,
) -> int:
    """Save a random-init model with the tiny tokenizer; returns its parameter count. `arch`: a name of
    bench.train_step.MODELS or such a dict (model_type plus config fields). Built on `device`: fast even
    for 7B on a GPU."""
    from transformers import AutoConfig, AutoModelForCausalLM

    spec = dict(MODELS[arch] if isinstance(arch, str) else arch)
    config = AutoConfig.for_model(spec.pop("model_type"), **spec)
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.save_pretrained(out)
    tiny_tokenizer().save_pretrained(out)  # ids < 128: the engines only need ids (unknown ones decode to "")
    return sum(p.numel() for p in model.parameters())


if __name__ == "__main__":
    out, name = Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "qwen2.5-1.5b"
    # on the GPU when there is one: a 7B model's random init takes minutes on the CPU
    n = save_random_model(out, name, device="cuda" if torch.cuda.is_available() else "cpu")
    print(f"saved {name} ({n / 1e9:.2f}B params) to {out}")
