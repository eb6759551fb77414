"""The native rollout engine: Llama / Qwen2 in plain torch, a paged KV cache, continuous batching,
device-side sampling and CUDA graphs for decode (docs/rollout.md, "The native engine").

    engine = NativeEngine.from_config(EngineConfig(model="path", engine="native", device="cuda"))
"""

from codefu.rollout.native.engine import NativeEngine
from codefu.rollout.native.model import NativeCausalLM

__all__ = ["NativeCausalLM", "NativeEngine"]
