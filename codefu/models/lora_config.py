"""`trainer.lora`'s settings, torch-free so that a run config loads and is checked without torch (the
adapters themselves: codefu.models.lora)."""

from __future__ import annotations

from dataclasses import dataclass, field

#: the attention and MLP projections of Llama, Qwen2/3, Mistral (PEFT's names for them)
DEFAULT_TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
#: the files of PEFT's adapter folder
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"


@dataclass
class LoRAConfig:
    """`trainer.lora`: train low-rank adapters instead of the weights (off while rank is 0)."""

    rank: int = 0
    """Adapter rank r (A is r x in, B out x r); 0: LoRA off, every weight trains."""
    alpha: float = 32.0
    """The adapters' output is scaled by alpha / rank."""
    dropout: float = 0.0
    """Dropout on the adapters' input while training (not in log-prob passes)."""
    target_modules: list[str] = field(default_factory=lambda: list(DEFAULT_TARGET_MODULES))
    """Linear layers that get adapters, by the last part(s) of their name ("q_proj" matches
    model.layers.*.self_attn.q_proj; "self_attn.q_proj" too); each must match at least one layer."""
    dtype: str = "float32"
    """The adapters' stored dtype (their gradients and AdamW state): float32 or bfloat16, whatever the base
    weights' trainer.master_dtype (a frozen bf16 base with fp32 adapters is the usual choice)."""
    export: str = "merged"
    """What the run's HF export (model/) holds: merged (the adapters folded into the weights: a plain HF
    model) or adapter (PEFT's adapter folder only, for `PeftModel.from_pretrained` on the base model)."""

    @property
    def enabled(self) -> bool:
        return self.rank > 0

    @property
    def scaling(self) -> float:
        return self.alpha / self.rank if self.rank else 0.0

    def __post_init__(self) -> None:
        self.target_modules = list(self.target_modules)
        checks = [
            (self.rank >= 0, f"rank must be >= 0 (0: off), got {self.rank}"),
            (self.alpha > 0, f"alpha must be > 0, got {self.alpha}"),
            (0 <= self.dropout < 1, f"dropout must be in [0, 1), got {self.dropout}"),
            (bool(self.target_modules), "target_modules must name at least one linear layer"),
            (self.dtype in ("float32", "bfloat16"), f"dtype must be float32 or bfloat16, got {self.dtype!r}"),
            (self.export in ("merged", "adapter"), f"export must be merged or adapter, got {self.export!r}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(f"LoRAConfig: {message}")  # the config loader names it trainer.lora.*
