"""`codefu train` as a subprocess on a tiny model: its folder and the overrides that make a run on the
starter problems take seconds."""

from __future__ import annotations

from pathlib import Path

from codefu.models.tiny import save_tiny_model, tiny_tokenizer


def tiny_train_overrides(folder: Path) -> list[str]:
    """Save a tiny model (and the tiny tokenizer) in `folder`; `key=value` overrides of a run on it: 2
    problems x 2 samples of 8 tokens a step, one test each, float32 (on a CPU without native bf16 the
    default bf16 adds a (right) warning per actor)."""
    model = save_tiny_model(folder, max_position_embeddings=4096)  # the starter prompts fit
    tiny_tokenizer().save_pretrained(model)
    return [
        f"trainer.model={model}",
        "data.prompts_per_step=2",
        "rollout.n=2",
        "rollout.max_new_tokens=8",
        "judge.max_tests=1",
        "data.max_prompt_tokens=4000",
        "trainer.dtype=float32",
        "rollout.dtype=float32",
    ]
