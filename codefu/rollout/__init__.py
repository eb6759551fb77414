"""Rollout: sample n responses per prompt with per-token log-probs; take new weights after each update.

    engine = TransformersEngine(model, tokenizer, batch_size=16)          # or .from_pretrained(path)
    # or NativeEngine.from_config(EngineConfig(model=path, engine="native", device="cuda"))
    prompt_ids = [encode_prompt(tokenizer, p) for p in problems]
    completions = engine.generate(prompt_ids, SamplingParams(n=4, temperature=1.0, max_new_tokens=160))
    engine.load_weights(trainer_state_dict)

See docs/rollout.md for the log-prob convention.
"""

from codefu.lazy import lazy_exports

#: each public name -> its module (loaded on first use: the package imports no torch until then)
_EXPORTS = {
    "Completion": "types",
    "EngineConfig": "engine",
    "EngineSettings": "settings",
    "FinishReason": "types",
    "NativeEngine": "native.engine",
    "RolloutEngine": "engine",
    "SamplingParams": "types",
    "TransformersEngine": "hf_engine",
    "default_messages": "prompts",
    "encode_prompt": "prompts",
    "is_prerendered": "prompts",
    "logprob_mismatch": "metrics",
}
__getattr__, __all__ = lazy_exports(__name__, _EXPORTS)
