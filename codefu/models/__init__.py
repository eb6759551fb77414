"""Models as files and tensors, shared by the trainer and the rollout engines (neither role imports the
other): the bundled default model, loading a causal LM (HF folder, GGUF, hub id), writing one as a plain HF
folder, the dtype names, the flat weight buffers of weight sync, and tiny models for tests."""

from codefu.lazy import lazy_exports

#: each public name -> its module (loaded on first use: the package imports no torch until then)
_EXPORTS = {
    "BUNDLED_NAME": "bundled",
    "DTYPE_BY_NAME": "loading",
    "SMOLLM2_FILE": "bundled",
    "load_model": "loading",
    "model_problem": "sources",
    "native_dtype_name": "loading",
    "resolve_dtype_name": "loading",
    "resolve_source": "sources",
    "smollm2_gguf": "bundled",
    "warn_if_slow_on_cpu": "loading",
    "write_hf_model": "export",
}
__getattr__, __all__ = lazy_exports(__name__, _EXPORTS)
