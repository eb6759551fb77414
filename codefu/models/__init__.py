"""Models as files and tensors, shared by the trainer and the rollout engines (neither role imports the
other): the bundled default model, loading a causal LM (HF folder, GGUF, hub id), writing one as a plain HF
folder, the dtype names, the flat weight buffers of weight sync, and tiny models for tests."""

from codefu.models.bundled import BUNDLED_NAME, SMOLLM2_FILE, smollm2_gguf
from codefu.models.export import write_hf_model
from codefu.models.loading import (
    DTYPE_BY_NAME,
    load_model,
    model_problem,
    native_dtype_name,
    resolve_dtype_name,
    resolve_source,
    warn_if_slow_on_cpu,
)

__all__ = [
    "BUNDLED_NAME",
    "DTYPE_BY_NAME",
    "SMOLLM2_FILE",
    "load_model",
    "model_problem",
    "native_dtype_name",
    "resolve_dtype_name",
    "resolve_source",
    "smollm2_gguf",
    "warn_if_slow_on_cpu",
    "write_hf_model",
]
