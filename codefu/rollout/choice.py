"""Which engine serves a model when `rollout.engine` is "auto": the native engine where its model code
serves the architecture, else vLLM where installed (and no top-p / top-k cut), else transformers."""

from __future__ import annotations

from codefu.rollout.settings import EngineSettings


def choose_engine(settings: EngineSettings, model: str, gguf_file: str | None = None) -> tuple[str, str]:
    """(engine, why) for `settings.engine`: itself unless "auto"; then native where its model code serves
    the model's architecture (`codefu.rollout.native.model.check_supported`), else vLLM where it is
    installed, else transformers."""
    if settings.engine != "auto":
        return settings.engine, "rollout.engine"
    from transformers import AutoConfig

    from codefu.models import resolve_source
    from codefu.rollout.native.engine import default_max_model_len
    from codefu.rollout.native.model import check_supported
    from codefu.rollout.vllm_engine import vllm_problem, vllm_python_for

    source, gguf = resolve_source(model, gguf_file)
    config = AutoConfig.from_pretrained(source, **({"gguf_file": gguf} if gguf else {}))
    longest = settings.max_model_len or default_max_model_len(config)
    try:
        check_supported(config, longest)
    except ValueError as e:
        native_no = str(e).removeprefix("native engine: ")
    else:
        return "native", f"auto: the native engine serves model_type {config.model_type!r}"
    if getattr(settings, "top_p", 1.0) < 1.0 or getattr(settings, "top_k", 0) > 0:
        problem = "top-p / top-k are set, and vLLM renormalises the log-probs over what they keep"
    else:
        problem = vllm_problem(vllm_python_for(settings.vllm_python))
    if problem is None:
        return "vllm", f"auto: not the native engine ({native_no}); vLLM is installed"
    return "transformers", f"auto: not the native engine ({native_no}), not vLLM ({problem})"


__all__ = ["choose_engine"]
