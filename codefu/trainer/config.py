"""TrainerConfig: everything the policy (and reference) trainer workers need, one documented field each."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from codefu.algo.choices import AGG_MODES, KL_KINDS, POLICY_LOSSES, ROLLOUT_CORRECTIONS
from codefu.models.lora_config import LoRAConfig
from codefu.models.sources import DTYPE_NAMES

DTYPES = ("auto", *DTYPE_NAMES)
SCHEDULES = ("constant", "cosine")
PACKINGS = ("padded", "shared_prefix")


@dataclass
class TrainerConfig:
    # --- model -----------------------------------------------------------------------------------
    model: str = ""
    """An HF model directory (config.json + *.safetensors), a `.gguf` file, or a hub id (needs network)."""
    gguf_file: str | None = None
    """File name of a GGUF inside `model` when `model` is a directory (or give the file's path)."""
    tokenizer: str | None = None
    """Where to load the tokenizer from; None = the same place as the model (a GGUF carries its own)."""
    attn_implementation: str | None = "sdpa"
    """Passed to transformers; "sdpa" (default), "eager", "flash_attention_2", ... None: transformers'."""
    device: str = "auto"
    """"auto" = cuda when available (this rank's GPU, LOCAL_RANK), else cpu."""
    dtype: str = "auto"
    """Compute dtype (FSDP param_dtype): "auto" = bfloat16 on a GPU or a CPU that computes it natively
    (AMX, AVX512-BF16), float32 on other CPUs (emulated bf16 is far slower). Reductions: fp32."""
    master_dtype: str = "float32"
    """Dtype of the stored (sharded) parameters, their gradients and AdamW state. float32 is standard mixed
    precision; "bfloat16" halves memory (pure-bf16 training, like a plain `model.bfloat16()` loop)."""
    gradient_checkpointing: bool = True
    """Recompute each decoder layer in backward (HF gradient checkpointing, non-reentrant)."""
    cpu_offload: bool = False
    """FSDP2 CPUOffloadPolicy: sharded params, grads and AdamW state live in (pinned) CPU memory; the AdamW
    step runs on the CPU. Lets a 7B policy with fp32 master weights train on one GPU."""
    offload_optimizer: bool = True
    """Colocated on a GPU: AdamW's state goes to pinned CPU memory while the engine generates (its KV cache
    gets that memory) and comes back for the update. Off the GPU, or in split mode, nothing moves."""
    offload_reference: bool = True
    """Colocated on a GPU: the reference policy's weights leave the GPU after its pass (the update gets
    their memory) and come back, from a pinned CPU copy made once, while the engine generates."""
    reshard_after_forward: bool = True
    """Free each layer's gathered params after forward (ZeRO-3); False keeps them until backward (ZeRO-2-like,
    faster, more memory)."""
    uncheckpointed_layers: int = 0
    """With gradient checkpointing, run the last N decoder layers without it: less recompute, more memory."""
    cuda_allocator: str | None = None
    """The CUDA allocator's settings in the trainer's processes (policy, reference, critic), as
    PYTORCH_CUDA_ALLOC_CONF writes them: "expandable_segments:True" lets an update near the card's limit
    reuse freed memory instead of failing over a fragmented cache. None: torch's default (or the variable
    as the environment sets it)."""
    compile: bool = False
    """torch.compile each decoder layer (before sharding, as torchtitan does): fused kernels, slower start."""
    sp_degree: int = 1
    """Ulysses sequence parallelism: ranks sharing each sequence, each holding 1/sp_degree of its tokens
    (attention all-to-alls over heads). Must divide the number of ranks (data parallel = ranks / sp_degree)
    and the model's attention heads; kv heads must be divisible by it or divide it (then replicated). For
    sequences too long for one GPU's activations; FSDP still shards the parameters over every rank."""

    lora: LoRAConfig = field(default_factory=LoRAConfig)
    """Low-rank adapters (LoRA): with lora.rank > 0 only they train (the optimizer holds only their state),
    the KL reference is the same model with the adapters switched off (no second copy), and a weight sync
    sends only them (docs/trainer.md#lora)."""

    # --- optimizer and schedule -------------------------------------------------------------------
    lr: float = 1e-6
    betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 1e-8
    weight_decay: float = 0.01
    """Decoupled (AdamW) weight decay, applied to every parameter (as verl)."""
    warmup_steps: int = 0
    """Optimizer steps of linear warmup from lr / (warmup_steps + 1) ... lr."""
    schedule: str = "constant"
    """After warmup: "constant", or "cosine" decay to lr * min_lr_ratio at `total_steps`."""
    total_steps: int = 0
    """Total optimizer steps (needed by "cosine")."""
    min_lr_ratio: float = 0.0
    grad_clip: float = 1.0
    """Clip the global gradient L2 norm (over all ranks) to this; <= 0: no clipping (norm logged)."""

    # --- the update --------------------------------------------------------------------------------
    ppo_epochs: int = 1
    """Passes over the batch per `update` call."""
    mini_batch_size: int = 0
    """Sequences (across all ranks) per optimizer step; 0 = the whole batch (one step per epoch). CodeFu's fix
    for length/reward collapse was a mini-batch at least 4x smaller than the batch."""
    micro_batch_tokens: int = 8192
    """Padded-token budget per micro-batch on one rank (rows x longest row); sequences are packed first-fit
    by decreasing length. A longer sequence gets a micro-batch of its own. With sp_degree > 1 a micro-batch
    of its sp group may hold sp_degree times as many (each rank holds 1/sp_degree of them)."""
    forward_micro_batch_tokens: int = 0
    """The same budget for the forward-only passes (old log-probs, the reference's, the critic's values):
    they keep no activations for a backward, so several times micro_batch_tokens usually fits; 0: the
    same as micro_batch_tokens."""
    packing: str = "padded"
    """How a micro-batch's rows are laid out. padded: right-padded rows (b x longest), SDPA's causal
    kernel. shared_prefix: the rows end to end in one row without padding, rows that begin alike (a
    prompt's n samples) computing their common prefix once, FlexAttention's block-sparse mask on CUDA
    (packing.py); exact, and the micro-batch budgets count the packed row's tokens. On GPU with n samples
    per prompt it saves (n - 1) prompts of compute per group; mini-batches then hold whole groups (as
    verl's do) and `shuffle` permutes groups. On CPU it uses a dense L x L mask (small micro-batches)."""
    shuffle: bool = True
    """Permute the batch (seeded by seed, step and epoch: the same on every rank and after a resume) before
    cutting it into mini-batches."""
    logprob_chunk_tokens: int = 1024
    """Token positions per chunk when computing log-probs from hidden states: the lm_head output for one chunk
    is the largest logits tensor that ever exists (1024 x 152k x 4 B = 0.6 GB in fp32)."""
    temperature: float = 1.0
    """Sampling temperature of the rollout; log-probs are computed from logits / temperature."""

    # --- the loss ------------------------------------------------------------------------------------
    loss_agg: str = "token-mean"
    """One of codefu.algo.choices.AGG_MODES; the denominator is always the whole mini-batch's (all
    micro-batches, all ranks)."""
    norm_length: int = 0
    """The constant length L of "seq-mean-token-sum-norm" (Dr. GRPO); 0 = the batch's padded length."""
    policy_loss: str = "ppo"
    """The policy-gradient loss: ppo (the clipped surrogate), gspo (a sequence-level ratio, clipped per
    sequence: use tiny clips such as 3e-4 / 4e-4), cispo (clipped, stop-gradient importance weights: every
    token keeps its gradient). docs/algo.md."""
    clip_low: float = 0.2
    clip_high: float = 0.2
    dual_clip: float | None = None
    """PPO's dual clip (policy_loss ppo only): a bound > 1 on the loss of negative-advantage tokens."""
    rollout_correction: str = "none"
    """Importance weights pi_old / pi_rollout on the policy term, for the rollout-trainer mismatch:
    token_truncate (TIS), token_mask (MIS), sequence_truncate, sequence_mask; none: off. With
    algo.recompute_logprobs false the trainer takes pi_old from its own forward (no extra pass; needs
    ppo_epochs 1). docs/algo.md."""
    rollout_correction_threshold: float = 2.0
    """C > 1: truncate weights at C, or mask those outside [1/C, C]."""
    kl_coef: float = 0.0
    """Weight of the KL penalty to the reference policy; 0 skips it (no reference log-probs needed)."""
    kl_kind: str = "k3"
    entropy_coef: float = 0.0
    """Weight of the entropy bonus (loss -= entropy_coef * entropy); entropy is always logged."""

    # --- reproducibility and checkpoints --------------------------------------------------------------
    seed: int = 0
    keep_last: int = 3
    """Checkpoints kept by `save` (older step_* directories are deleted); <= 0 keeps all."""

    # --- diagnostics -----------------------------------------------------------------------------------
    profile_dir: str | None = None
    """Where torch.profiler's tables of the `profile_calls` go: one text file per call and rank
    (ROLE_KIND_INDEX_rankR.txt, e.g. policy_update_2_rank0.txt), the operators and kernels by their time."""
    profile_calls: list[int] = field(default_factory=list)
    """Which calls to profile, counted from 0 in each trainer process and kind: a policy's updates and
    forward-only passes, the reference's passes (one of each a step, so in a run from step 0 the index
    is the step's)."""

    def __post_init__(self) -> None:
        self.betas = tuple(self.betas)  # YAML gives a list
        if isinstance(self.lora, dict):  # built from a plain dict (tests, Ray's options)
            self.lora = LoRAConfig(**self.lora)
        if self.profile_dir:  # the trainer's processes may not start in the driver's folder (Ray's workers)
            self.profile_dir = str(Path(self.profile_dir).resolve())
        checks = [
            (self.dtype in DTYPES, f"dtype must be one of {DTYPES}"),
            (self.master_dtype in DTYPES[1:], f"master_dtype must be one of {DTYPES[1:]}"),
            (self.schedule in SCHEDULES, f"schedule must be one of {SCHEDULES}"),
            (self.loss_agg in AGG_MODES, f"loss_agg must be one of {AGG_MODES}"),
            (self.kl_kind in KL_KINDS, f"kl_kind must be one of {KL_KINDS}"),
            (self.ppo_epochs >= 1, "ppo_epochs must be >= 1"),
            (self.sp_degree >= 1, "sp_degree must be >= 1"),
            (self.mini_batch_size >= 0, "mini_batch_size must be >= 0"),
            (self.micro_batch_tokens >= 1, "micro_batch_tokens must be >= 1"),
            (self.forward_micro_batch_tokens >= 0, "forward_micro_batch_tokens must be >= 0"),
            (not self.profile_calls or bool(self.profile_dir), "profile_calls needs profile_dir"),
            (all(i >= 0 for i in self.profile_calls), "profile_calls must be >= 0"),
            (self.warmup_steps >= 0, "warmup_steps must be >= 0"),
            (self.schedule != "cosine" or self.total_steps > 0, "schedule='cosine' needs total_steps > 0"),
            (self.temperature > 0, "temperature must be > 0"),
            (self.dual_clip is None or self.dual_clip > 1.0, "dual_clip must be > 1 or None"),
            (self.packing in PACKINGS, f"packing must be one of {PACKINGS}"),
            (self.packing == "padded" or self.sp_degree == 1, "packing='shared_prefix' needs sp_degree 1"),
            (self.policy_loss in POLICY_LOSSES, f"policy_loss must be one of {POLICY_LOSSES}"),
            (self.dual_clip is None or self.policy_loss == "ppo", "dual_clip is for policy_loss='ppo' only"),
            # a GSPO ratio averages over the whole sequence; a sequence-parallel rank holds a window of it
            (self.policy_loss != "gspo" or self.sp_degree == 1, "policy_loss='gspo' needs sp_degree 1"),
            (
                self.rollout_correction in ROLLOUT_CORRECTIONS,
                f"rollout_correction must be one of {ROLLOUT_CORRECTIONS}",
            ),
            (1 < self.rollout_correction_threshold < math.inf, "rollout_correction_threshold must be > 1"),
            # the weights multiply the policy term's mask, from which GSPO also takes its sequence ratio
            (
                self.rollout_correction == "none" or self.policy_loss != "gspo",
                "rollout_correction is for policy_loss ppo or cispo",
            ),
            # a sequence's weight multiplies all its tokens; a sequence-parallel rank holds a window of them
            (
                not self.rollout_correction.startswith("sequence") or self.sp_degree == 1,
                f"rollout_correction={self.rollout_correction!r} needs sp_degree 1",
            ),
        ]
        checks += [(ok, f"cuda_allocator: {m}") for ok, m in _allocator_setting_checks(self.cuda_allocator)]
        for ok, message in checks:
            if not ok:
                raise ValueError(f"TrainerConfig: {message}")


def _allocator_setting_checks(settings: str | None) -> list[tuple[bool, str]]:
    """`name:value` pairs joined by commas. The names are torch's to check (they vary between its
    versions): torch reports a name it does not know when a trainer process first allocates on the GPU."""
    if settings is None:
        return []
    named = [(item, item.split(":", 1)) for item in settings.split(",")]
    return [
        (len(pair) == 2 and all(pair), f"{item!r} is not name:value (e.g. expandable_segments:True)")
        for item, pair in named
    ]
