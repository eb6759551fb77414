"""Rollout: sample n responses per prompt with per-token log-probs; take new weights after each update.

    engine = TransformersEngine(model, tokenizer, batch_size=16)          # or .from_pretrained(path)
    # or NativeEngine.from_config(EngineConfig(model=path, engine="native", device="cuda"))
    prompt_ids = [encode_prompt(tokenizer, p) for p in problems]
    completions = engine.generate(prompt_ids, SamplingParams(n=4, temperature=1.0, max_new_tokens=160))
    engine.load_weights(trainer_state_dict)

See docs/rollout.md for the log-prob convention.
"""

from codefu.rollout.engine import EngineConfig, EngineSettings, RolloutEngine
from codefu.rollout.hf_engine import TransformersEngine
from codefu.rollout.metrics import logprob_mismatch
from codefu.rollout.native import NativeEngine
from codefu.rollout.prompts import default_messages, encode_prompt, is_prerendered
from codefu.rollout.types import Completion, FinishReason, SamplingParams

__all__ = [
    "Completion",
    "EngineConfig",
    "EngineSettings",
    "FinishReason",
    "NativeEngine",
    "RolloutEngine",
    "SamplingParams",
    "TransformersEngine",
    "default_messages",
    "encode_prompt",
    "is_prerendered",
    "logprob_mismatch",
]
