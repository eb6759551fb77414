"""Llama / Qwen2 / Qwen3 / Mistral decoder-only models in plain torch, for the native engine.

Built from a transformers config (LlamaConfig: Llama 2-3.x, SmolLM2; Qwen2Config: Qwen2.5,
DeepSeek-R1-Distill-Qwen; Qwen3Config: Qwen3 dense, with its per-head q/k RMSNorm; MistralConfig), loaded
from HF-named tensors. RoPE: the default, and the scaled types whose tables do not depend on the sequence
length (linear, llama3, yarn), built by transformers' own functions. Sliding-window attention is accepted
only where it changes nothing: a window at least as long as the engine's longest sequence.

The forward takes the tokens of one engine step laid out flat, [T], with their positions and an
`AttentionMetadata`; every matmul runs on all T tokens at once. q/k/v are one matmul and gate/up another
(fewer kernel launches). The numerics mirror transformers' (RMSNorm in fp32,
RoPE tables in fp32, logits in the model dtype then fp32) so greedy outputs match token for token.

The small ops between the matmuls are three fused ops (vLLM style): residual add + RMSNorm, RoPE + K/V
store, silu * up. On CUDA they are Triton kernels (triton_fused.py: a decode step of a small model is
otherwise ~45 tiny kernel launches per layer); elsewhere the torch references below, which define them
(the kernels round to the model dtype where these do). The residual stream therefore travels beside the
hidden states: each layer takes and returns (x, residual), and the next norm adds them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from codefu.models.lora import AdapterWeights
from codefu.rollout.native.attention import AttentionMetadata, attention, store_kv

SUPPORTED = ("llama", "qwen2", "qwen3", "mistral")
#: RoPE types whose cos/sin tables are fixed (dynamic and longrope change them with the sequence length)
ROPE_TYPES = ("default", "linear", "llama3", "yarn")


@dataclass(frozen=True)
class ModelSpec:
    """The few numbers of an HF config that the model needs (checked once, with clear errors)."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_inv_freq: tuple[float, ...]
    """RoPE's inverse frequencies, head_dim / 2 of them (scaled as the config's rope type says)."""
    rope_attention_scaling: float
    """The factor on RoPE's cos and sin (yarn's mscale; 1 otherwise)."""
    max_position_embeddings: int
    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool
    qk_norm: bool
    """Qwen3: an RMSNorm over each head of q and of k before RoPE."""
    sliding_window: int | None
    """The attention window of the config's sliding layers (None: none slide)."""
    tie_word_embeddings: bool

    @classmethod
    def from_hf(cls, config: Any) -> ModelSpec:
        model_type = getattr(config, "model_type", None)
        if model_type not in SUPPORTED:
            raise ValueError(f"native engine: model_type {model_type!r} is not supported (only {SUPPORTED})")
        act = getattr(config, "hidden_act", "silu")
        if act != "silu":
            raise ValueError(f"native engine: hidden_act {act!r} is not supported (only 'silu')")
        heads = config.num_attention_heads
        kv_heads = getattr(config, "num_key_value_heads", None) or heads
        if heads % kv_heads:
            raise ValueError(
                f"native engine: {heads} attention heads is not a multiple of {kv_heads} KV heads"
            )
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        attention_bias = bool(getattr(config, "attention_bias", False))
        inv_freq, attention_scaling = rope_tables(config, head_dim)
        return cls(
            vocab_size=config.vocab_size,
            hidden_size=config.hidden_size,
            intermediate_size=config.intermediate_size,
            num_layers=config.num_hidden_layers,
            num_heads=heads,
            num_kv_heads=kv_heads,
            head_dim=head_dim,
            rms_norm_eps=config.rms_norm_eps,
            rope_inv_freq=tuple(inv_freq.tolist()),
            rope_attention_scaling=float(attention_scaling),
            max_position_embeddings=config.max_position_embeddings,
            # Qwen2: q/k/v always biased, o never; Llama and Qwen3: all four as attention_bias says;
            # Mistral: none
            qkv_bias=model_type == "qwen2" or (model_type in ("llama", "qwen3") and attention_bias),
            o_bias=model_type in ("llama", "qwen3") and attention_bias,
            mlp_bias=bool(getattr(config, "mlp_bias", False)),
            qk_norm=model_type == "qwen3",
            sliding_window=sliding_window(config),
            tie_word_embeddings=bool(getattr(config, "tie_word_embeddings", False)),
        )


def check_supported(config: Any, max_len: int) -> ModelSpec:
    """The spec of a model the native engine serves with sequences up to `max_len` tokens, or a ValueError
    that says why it cannot."""
    spec = ModelSpec.from_hf(config)
    if spec.sliding_window is not None and spec.sliding_window < max_len:
        raise ValueError(
            f"native engine: the model's sliding_window {spec.sliding_window} is shorter than the "
            f"longest sequence ({max_len}): sliding-window attention is not implemented; set "
            f"rollout.max_model_len <= {spec.sliding_window} (then the window changes nothing) or use "
            "rollout.engine=transformers"
        )
    return spec


def rope_tables(config: Any, head_dim: int) -> tuple[Tensor, float]:
    """(inverse frequencies [head_dim / 2] in fp32, the cos/sin scaling) of a config's RoPE, as
    transformers computes them; a rope type whose tables change with the sequence length is an error.

    transformers 5 keeps the type and base in `config.rope_parameters`; older versions use `rope_theta`
    and `rope_scaling`."""
    params = getattr(config, "rope_parameters", None) or {}
    scaling = getattr(config, "rope_scaling", None) or {}
    rope_type = params.get("rope_type") or scaling.get("rope_type") or scaling.get("type") or "default"
    if rope_type not in ROPE_TYPES:
        raise ValueError(
            f"native engine: rope type {rope_type!r} is not implemented (only {ROPE_TYPES}); "
            "use rollout.engine=transformers for this model"
        )
    if rope_type != "default":
        from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

        inv_freq, attention_scaling = ROPE_INIT_FUNCTIONS[rope_type](config, torch.device("cpu"))
        return inv_freq.float(), float(attention_scaling)
    theta = params.get("rope_theta", getattr(config, "rope_theta", None))
    if theta is None:
        raise ValueError("native engine: the config has no rope_theta")
    return default_inv_freq(float(theta), head_dim), 1.0


def default_inv_freq(theta: float, head_dim: int) -> Tensor:
    """The original RoPE's inverse frequencies [head_dim / 2], fp32."""
    return 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))


def sliding_window(config: Any) -> int | None:
    """The window of the config's sliding-attention layers, or None when no layer slides. Qwen2/Qwen3
    slide only with use_sliding_window (and then only the layers layer_types marks); Mistral's window
    applies to every layer whenever it is set."""
    window = getattr(config, "sliding_window", None)
    if not window:
        return None
    if config.model_type in ("qwen2", "qwen3"):
        if not getattr(config, "use_sliding_window", False):
            return None
        layer_types = getattr(config, "layer_types", None) or ["sliding_attention"]
        if "sliding_attention" not in layer_types:
            return None
    return int(window)


# ---- the fused ops: torch references and the dispatch to the Triton kernels ------------------------
def add_rms_norm_torch(
    x: Tensor, residual: Tensor | None, weight: Tensor, eps: float
) -> tuple[Tensor, Tensor]:
    """(weight * RMSNorm(x + residual), x + residual); without a residual, x itself is the sum. The add in
    the model dtype, the statistics in fp32, cast back before the weight (as transformers does)."""
    summed = x if residual is None else x + residual
    dtype = summed.dtype
    h = summed.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(dtype), summed


def apply_rotary_torch(x: Tensor, positions: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """x [T, H, D] rotated by each token's position [T]: x * cos + cat(-x2, x1) * sin, with the fp32
    tables [max_len, D] cast to x's dtype first (as transformers does)."""
    cos = cos[positions].to(x.dtype)[:, None, :]
    sin = sin[positions].to(x.dtype)[:, None, :]
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def rope_and_store_kv_torch(
    qkv: Tensor,
    positions: Tensor,
    cos: Tensor,
    sin: Tensor,
    k_cache: Tensor,
    v_cache: Tensor,
    slot_mapping: Tensor,
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
) -> Tensor:
    """qkv [T, (Hq + 2 Hkv) * D] -> rotated q [T, Hq, D]; rotated k and v are stored in the paged caches
    at slot_mapping [T]."""
    q_size, kv_size = num_heads * head_dim, num_kv_heads * head_dim
    q, k, v = qkv.split([q_size, kv_size, kv_size], dim=-1)
    q = apply_rotary_torch(q.view(-1, num_heads, head_dim), positions, cos, sin)
    k = apply_rotary_torch(k.view(-1, num_kv_heads, head_dim), positions, cos, sin)
    store_kv(k, v.view(-1, num_kv_heads, head_dim), k_cache, v_cache, slot_mapping)
    return q


def silu_mul_torch(gate_up: Tensor) -> Tensor:
    """gate_up [T, 2 I] -> silu(gate) * up [T, I]."""
    gate, up = gate_up.chunk(2, dim=-1)
    return F.silu(gate) * up


@functools.cache
def _triton_fused() -> ModuleType | None:
    """codefu.rollout.native.triton_fused when it imports, else None."""
    try:
        from codefu.rollout.native import triton_fused
    except Exception:  # no triton, or no GPU compiler: the torch references still work
        return None
    return triton_fused


#: Tests only: a triton_fused module (loaded with TRITON_INTERPRET=1) to run on CPU tensors instead of
#: the torch references, so the model's Triton path can be checked without a GPU.
CPU_KERNELS: ModuleType | None = None


def _kernels(x: Tensor) -> ModuleType | None:
    """The Triton kernels for tensors like x (CUDA, and Triton imports), or None: the torch references."""
    return _triton_fused() if x.is_cuda else CPU_KERNELS


def add_rms_norm(x: Tensor, residual: Tensor | None, weight: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    """(normed, summed); see add_rms_norm_torch."""
    kernels = _kernels(x)
    fn = add_rms_norm_torch if kernels is None else kernels.add_rms_norm
    return fn(x, residual, weight, eps)


def rope_and_store_kv(
    qkv: Tensor,
    positions: Tensor,
    cos: Tensor,
    sin: Tensor,
    k_cache: Tensor,
    v_cache: Tensor,
    slot_mapping: Tensor,
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
) -> Tensor:
    """Rotated q; k and v stored; see rope_and_store_kv_torch."""
    kernels = _kernels(qkv)
    fn = rope_and_store_kv_torch if kernels is None else kernels.rope_and_store_kv
    return fn(qkv, positions, cos, sin, k_cache, v_cache, slot_mapping, num_heads, num_kv_heads, head_dim)


def silu_mul(gate_up: Tensor) -> Tensor:
    """silu(gate) * up; see silu_mul_torch."""
    kernels = _kernels(gate_up)
    return silu_mul_torch(gate_up) if kernels is None else kernels.silu_mul(gate_up)


# ---- the model ---------------------------------------------------------------------------------------
class RMSNorm(nn.Module):
    """The residual add and the RMSNorm after it, fused: (normed, summed) = norm(x, residual)."""

    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(size))
        self.eps = eps

    def forward(self, x: Tensor, residual: Tensor | None = None) -> tuple[Tensor, Tensor]:
        return add_rms_norm(x, residual, self.weight, self.eps)


class Rotary(nn.Module):
    """cos/sin tables [max_len, D], computed and kept in fp32 (as transformers does); rope_and_store_kv
    uses them."""

    def __init__(self, inv_freq: tuple[float, ...], attention_scaling: float, max_len: int) -> None:
        super().__init__()
        self.inv_freq, self.attention_scaling, self.max_len = inv_freq, attention_scaling, max_len
        head_dim = 2 * len(inv_freq)
        self.register_buffer("cos", torch.empty(max_len, head_dim), persistent=False)
        self.register_buffer("sin", torch.empty(max_len, head_dim), persistent=False)

    def init_tables(self, device: torch.device | str) -> None:
        inv_freq = torch.tensor(self.inv_freq, dtype=torch.float32)
        freqs = torch.outer(torch.arange(self.max_len, dtype=torch.float32), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos() * self.attention_scaling, emb.sin() * self.attention_scaling
        self.cos, self.sin = cos.to(device), sin.to(device)


class QKNorm(nn.Module):
    """Qwen3's RMSNorm over each head of q and of k (their own weights, [D] each), before RoPE: on the
    fused qkv [T, (Hq + 2 Hkv) * D], the q and k heads normed in one call (the two weights side by
    side, one row per head), v as it was."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.q_weight = nn.Parameter(torch.empty(spec.head_dim))
        self.k_weight = nn.Parameter(torch.empty(spec.head_dim))
        self.num_heads, self.num_kv_heads, self.head_dim = spec.num_heads, spec.num_kv_heads, spec.head_dim
        self.eps = spec.rms_norm_eps

    def forward(self, qkv: Tensor) -> Tensor:
        qk_size = (self.num_heads + self.num_kv_heads) * self.head_dim
        heads = qkv[:, :qk_size].reshape(-1, self.num_heads + self.num_kv_heads, self.head_dim)
        weight = torch.cat(
            (
                self.q_weight.expand(self.num_heads, self.head_dim),
                self.k_weight.expand(self.num_kv_heads, self.head_dim),
            )
        )
        normed = add_rms_norm_torch(heads, None, weight, self.eps)[0]
        return torch.cat((normed.flatten(1), qkv[:, qk_size:]), dim=-1)


class AdaptableLinear(nn.Linear):
    """nn.Linear with an optional low-rank term, LoRA's adapters kept apart from the weight (not merged:
    a bf16 weight would round small adapter changes away): x W^T + b + (x A^T) B^T, A [R, in], B [out, R]
    with the scaling folded in. The adapters of a fused projection (q, k and v) sit side by side in A's
    rows, each in its own block of B. A sync copies into the same tensors (CUDA graphs keep reading them)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__(in_features, out_features, bias=bias)
        self.lora_a: Tensor | None = None
        self.lora_b: Tensor | None = None

    def forward(self, x: Tensor) -> Tensor:
        out = F.linear(x, self.weight, self.bias)
        if self.lora_a is None or self.lora_b is None:
            return out
        return out + F.linear(F.linear(x, self.lora_a), self.lora_b)


class Attention(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = spec.num_heads, spec.num_kv_heads, spec.head_dim
        self.q_size = spec.num_heads * spec.head_dim
        self.kv_size = spec.num_kv_heads * spec.head_dim
        self.qkv_proj = AdaptableLinear(spec.hidden_size, self.q_size + 2 * self.kv_size, bias=spec.qkv_bias)
        self.o_proj = AdaptableLinear(self.q_size, spec.hidden_size, bias=spec.o_bias)
        self.scale = spec.head_dim**-0.5
        self.qk_norm = QKNorm(spec) if spec.qk_norm else None
        self.k_cache: Tensor | None = None  # [num_blocks, block_size, Hkv, D], set by the engine
        self.v_cache: Tensor | None = None

    def forward(self, x: Tensor, positions: Tensor, rotary: Rotary, meta: AttentionMetadata) -> Tensor:
        assert self.k_cache is not None and self.v_cache is not None, "no KV cache: call resume_memory()"
        qkv = self.qkv_proj(x)
        if self.qk_norm is not None:
            qkv = self.qk_norm(qkv)
        q = rope_and_store_kv(
            qkv,
            positions,
            rotary.cos,
            rotary.sin,
            self.k_cache,
            self.v_cache,
            meta.slot_mapping,
            self.num_heads,
            self.num_kv_heads,
            self.head_dim,
        )
        out = attention(q, self.k_cache, self.v_cache, meta, self.scale)  # over the K/V just stored
        return self.o_proj(out.reshape(-1, self.q_size))


class MLP(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.gate_up_proj = AdaptableLinear(spec.hidden_size, 2 * spec.intermediate_size, bias=spec.mlp_bias)
        self.down_proj = AdaptableLinear(spec.intermediate_size, spec.hidden_size, bias=spec.mlp_bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(silu_mul(self.gate_up_proj(x)))


class DecoderLayer(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(spec.hidden_size, spec.rms_norm_eps)
        self.self_attn = Attention(spec)
        self.post_attention_layernorm = RMSNorm(spec.hidden_size, spec.rms_norm_eps)
        self.mlp = MLP(spec)

    def forward(
        self, x: Tensor, residual: Tensor | None, positions: Tensor, rotary: Rotary, meta: AttentionMetadata
    ) -> tuple[Tensor, Tensor]:
        """(x, residual) -> (this layer's MLP output, the residual stream before it), vLLM style: the
        residual adds happen in the next norm, fused with it (None: the first layer, x is the stream)."""
        x, residual = self.input_layernorm(x, residual)
        x = self.self_attn(x, positions, rotary, meta)
        x, residual = self.post_attention_layernorm(x, residual)
        return self.mlp(x), residual


class NativeCausalLM(nn.Module):
    """The decoder and lm_head. Parameters are created uninitialised (`load_weights` fills them)."""

    def __init__(self, spec: ModelSpec, max_len: int | None = None) -> None:
        super().__init__()
        self.spec = spec
        self.embed_tokens = nn.Embedding(spec.vocab_size, spec.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(spec) for _ in range(spec.num_layers))
        self.norm = RMSNorm(spec.hidden_size, spec.rms_norm_eps)
        self.rotary = Rotary(
            spec.rope_inv_freq, spec.rope_attention_scaling, max_len or spec.max_position_embeddings
        )
        self._dropped_shapes: dict[str, torch.Size] = {}  # what drop_weights freed, to allocate again
        # bumped whenever adapters appear, go or change shape: captured CUDA graphs must be captured again
        self.adapter_layout_version = 0
        # (module, rank) of the adapters held, in load order: a sync with the same refills them in place
        self._adapter_modules: tuple[tuple[str, int], ...] = ()
        if spec.tie_word_embeddings:
            self.lm_head_weight = self.embed_tokens.weight
        else:
            self.lm_head_weight = nn.Parameter(torch.empty(spec.vocab_size, spec.hidden_size))

    @classmethod
    def build(
        cls, config: Any, dtype: torch.dtype, device: torch.device | str, max_len: int | None = None
    ) -> NativeCausalLM:
        """An uninitialised model on `device` in `dtype` (no CPU copy, no random init)."""
        spec = check_supported(config, max_len or config.max_position_embeddings)
        with torch.device("meta"):
            model = cls(spec, max_len).to(dtype)
        model.to_empty(device=device)
        if spec.tie_word_embeddings:  # to_empty may have made two tensors of the one tied parameter
            model.lm_head_weight = model.embed_tokens.weight
        model.rotary.init_tables(device)
        return model.eval().requires_grad_(False)

    def forward(self, input_ids: Tensor, positions: Tensor, meta: AttentionMetadata) -> Tensor:
        """[T] tokens and positions -> [T, hidden] final hidden states (after the final norm)."""
        x, residual = self.embed_tokens(input_ids), None
        for layer in self.layers:
            x, residual = layer(x, residual, positions, self.rotary, meta)
        return self.norm(x, residual)[0]

    def logits(self, hidden: Tensor) -> Tensor:
        """[N, hidden] -> [N, V] fp32 logits (the matmul in the model dtype, as transformers does)."""
        return F.linear(hidden, self.lm_head_weight).float()

    # ---- weights ---------------------------------------------------------------------------------
    def hf_targets(self) -> dict[str, Tensor]:
        """HF name -> the view of our parameter it fills (a slice of a fused q/k/v or gate/up matrix).
        Built on each call (cheap), so it never points at storage that `.to()` has replaced."""
        spec, t = self.spec, {}
        t["model.embed_tokens.weight"] = self.embed_tokens.weight
        t["model.norm.weight"] = self.norm.weight
        t["lm_head.weight"] = self.lm_head_weight
        q, kv = spec.num_heads * spec.head_dim, spec.num_kv_heads * spec.head_dim
        for i, layer in enumerate(self.layers):
            p = f"model.layers.{i}."
            attn, mlp = layer.self_attn, layer.mlp
            t[p + "input_layernorm.weight"] = layer.input_layernorm.weight
            t[p + "post_attention_layernorm.weight"] = layer.post_attention_layernorm.weight
            for kind in ["weight", "bias"] if spec.qkv_bias else ["weight"]:
                fused = getattr(attn.qkv_proj, kind)
                for name, (a, b) in zip("qkv", [(0, q), (q, q + kv), (q + kv, q + 2 * kv)], strict=True):
                    t[p + f"self_attn.{name}_proj.{kind}"] = fused[a:b]
            if attn.qk_norm is not None:
                t[p + "self_attn.q_norm.weight"] = attn.qk_norm.q_weight
                t[p + "self_attn.k_norm.weight"] = attn.qk_norm.k_weight
            t[p + "self_attn.o_proj.weight"] = attn.o_proj.weight
            if spec.o_bias:
                t[p + "self_attn.o_proj.bias"] = attn.o_proj.bias
            n = spec.intermediate_size
            for kind in ["weight", "bias"] if spec.mlp_bias else ["weight"]:
                fused = getattr(mlp.gate_up_proj, kind)
                t[p + f"mlp.gate_proj.{kind}"] = fused[:n]
                t[p + f"mlp.up_proj.{kind}"] = fused[n:]
                t[p + f"mlp.down_proj.{kind}"] = getattr(mlp.down_proj, kind)
        return {name: view.data for name, view in t.items()}

    @property
    def weights_dropped(self) -> bool:
        return bool(self._dropped_shapes)

    def drop_weights(self) -> None:
        """Free every parameter's memory (a colocated trainer's turn: its sync brings the next ones). The
        model cannot run until `load_weights` has filled them again; the rotary tables stay."""
        if self.weights_dropped:
            return
        self._dropped_shapes = {name: p.shape for name, p in self.named_parameters()}  # tied: listed once
        for p in self.parameters():
            p.data = p.data.new_empty(0)

    @torch.no_grad()
    def load_weights(self, state: dict[str, Tensor] | AdapterWeights) -> None:
        """Copy HF-named tensors into their slices in place (dtype/device converted by `copy_`; a tensor
        already on our GPU is copied there, no CPU round trip). Every name must be ours; every one of ours
        must be given, except lm_head.weight when it is tied to the embeddings. Dropped weights
        (`drop_weights`) get their memory back first, once the names are known to be complete.

        LoRA adapters (`AdapterWeights`) go beside the weights they adapt (`load_adapters`); full weights
        are the whole policy: adapters held go."""
        if isinstance(state, AdapterWeights):
            self.load_adapters(state)
            return
        targets = self.hf_targets()  # the names are known with the weights dropped too (empty views)
        unexpected = sorted(set(state) - set(targets))
        if unexpected:
            raise KeyError(f"load_weights: not model keys: {unexpected[:5]} ({len(unexpected)} in all)")
        optional = {"lm_head.weight"} if self.spec.tie_word_embeddings else set()
        missing = sorted(set(targets) - set(state) - optional)
        if missing:
            raise KeyError(f"load_weights: model keys missing: {missing[:5]} ({len(missing)} in all)")
        restored = self.weights_dropped
        if restored:
            for name, p in self.named_parameters():
                p.data = p.data.new_empty(self._dropped_shapes[name])
            self._dropped_shapes = {}
            targets = self.hf_targets()  # views of the new memory
        for name, value in state.items():
            if targets[name].shape != value.shape:
                if restored:
                    self.drop_weights()  # not half-filled memory that looks loaded
                raise ValueError(
                    f"load_weights: {name} is {tuple(value.shape)}, the model's {tuple(targets[name].shape)}"
                )
        for name, value in state.items():
            targets[name].copy_(value)
        self._set_adapters({})

    def adapter_slots(self) -> dict[str, tuple[AdaptableLinear, int, int]]:
        """HF module name -> (our projection, its rows [lo, hi) there): q/k/v in qkv_proj, gate/up in
        gate_up_proj, o_proj and down_proj whole."""
        spec, slots = self.spec, {}
        q, kv, n = spec.num_heads * spec.head_dim, spec.num_kv_heads * spec.head_dim, spec.intermediate_size
        for i, layer in enumerate(self.layers):
            p, attn, mlp = f"model.layers.{i}.", layer.self_attn, layer.mlp
            for name, (lo, hi) in zip("qkv", [(0, q), (q, q + kv), (q + kv, q + 2 * kv)], strict=True):
                slots[p + f"self_attn.{name}_proj"] = (attn.qkv_proj, lo, hi)
            slots[p + "self_attn.o_proj"] = (attn.o_proj, 0, attn.o_proj.out_features)
            slots[p + "mlp.gate_proj"] = (mlp.gate_up_proj, 0, n)
            slots[p + "mlp.up_proj"] = (mlp.gate_up_proj, n, 2 * n)
            slots[p + "mlp.down_proj"] = (mlp.down_proj, 0, mlp.down_proj.out_features)
        return slots

    @torch.no_grad()
    def load_adapters(self, adapters: AdapterWeights) -> None:
        """LoRA adapters (trainer.lora) beside the projections they adapt, unmerged; the weights stay
        as loaded. Projections without adapters in `adapters` lose theirs. Errors name the module."""
        slots = self.adapter_slots()
        modules = adapters.modules()
        if unknown := [m for m in modules if m not in slots]:
            raise KeyError(
                "load_weights: the native engine takes adapters on the attention and MLP projections "
                f"only (trainer.lora.target_modules), not {unknown[:5]}"
            )
        held = tuple((m, adapters.tensors[m + ".lora_A"].shape[0]) for m in modules)
        if held == self._adapter_modules and self._refill_adapters(adapters, slots):
            return
        grouped: dict[int, list[tuple[str, int, int]]] = {}
        for m in modules:
            linear, lo, hi = slots[m]
            grouped.setdefault(id(linear), []).append((m, lo, hi))
        dtype, device = self.embed_tokens.weight.dtype, self.embed_tokens.weight.device
        new: dict[int, tuple[AdaptableLinear, Tensor, Tensor]] = {}
        for parts in grouped.values():
            linear = slots[parts[0][0]][0]
            pieces = [adapters.delta(m, device, dtype) for m, _, _ in parts]  # (scaling * B, A) each
            for (m, lo, hi), (b, a) in zip(parts, pieces, strict=True):
                if a.shape[1] != linear.in_features or b.shape[0] != hi - lo:
                    raise ValueError(
                        f"load_weights: the adapter of {m} is ({b.shape[0]} x {a.shape[1]}), the model's "
                        f"weight ({hi - lo}, {linear.in_features})"
                    )
            lora_a = torch.cat([a for _, a in pieces])
            lora_b = torch.zeros(linear.out_features, lora_a.shape[0], dtype=dtype, device=device)
            col = 0
            for (_, lo, hi), (b, a) in zip(parts, pieces, strict=True):
                lora_b[lo:hi, col : col + a.shape[0]] = b
                col += a.shape[0]
            new[id(linear)] = (linear, lora_a, lora_b)
        self._set_adapters(new)
        self._adapter_modules = held

    def _refill_adapters(
        self, adapters: AdapterWeights, slots: dict[str, tuple[AdaptableLinear, int, int]]
    ) -> bool:
        """The adapters of the modules and ranks held now, copied into the tensors the projections hold
        (each A into its rows of lora_a, each B into its block of lora_b, then each lora_b scaled): the
        same tensors `load_adapters` builds, without building them (a sync's fixed cost: ~400 tensors at
        7B). False, nothing copied, where a shape does not fit (the full path then says which). The held
        tensors have this layout: `_adapter_modules` is set only with them, and cleared when they change."""
        pieces = []
        cols: dict[AdaptableLinear, int] = {}  # each projection's next column of lora_a / lora_b
        for m, rank in self._adapter_modules:
            linear, lo, hi = slots[m]
            a, b = adapters.tensors[m + ".lora_A"], adapters.tensors[m + ".lora_B"]
            if a.shape[1] != linear.in_features or b.shape != (hi - lo, rank):
                return False
            col = cols.setdefault(linear, 0)
            cols[linear] = col + rank
            pieces += [(linear.lora_a[col : col + rank], a), (linear.lora_b[lo:hi, col : col + rank], b)]
        for dst, src in pieces:
            dst.copy_(src)
        for linear in cols:
            linear.lora_b.mul_(adapters.scaling)  # its blocks off the diagonal are 0 and stay so
        return True

    def _set_adapters(self, new: dict[int, tuple[AdaptableLinear, Tensor, Tensor]]) -> None:
        """Every projection's adapters as `new` says (none where it says nothing): copied into the tensors
        a projection holds where the shapes agree (CUDA graphs read those), else replaced, and then the
        layout's version moves on."""
        changed = False
        self._adapter_modules = ()  # load_adapters records what it set
        for module in self.modules():
            if not isinstance(module, AdaptableLinear):
                continue
            if id(module) not in new:
                changed |= module.lora_a is not None
                module.lora_a = module.lora_b = None
                continue
            _, lora_a, lora_b = new[id(module)]
            if (
                module.lora_a is not None
                and module.lora_b is not None
                and (module.lora_a.shape == lora_a.shape and module.lora_b.shape == lora_b.shape)
            ):
                module.lora_a.copy_(lora_a)
                module.lora_b.copy_(lora_b)
            else:
                module.lora_a, module.lora_b = lora_a, lora_b
                changed = True
        if changed:
            self.adapter_layout_version += 1


__all__ = [
    "ModelSpec",
    "NativeCausalLM",
    "check_supported",
    "default_inv_freq",
    "rope_tables",
    "sliding_window",
]
