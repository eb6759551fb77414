"""Llama / Qwen2 decoder-only models in plain torch, for the native engine.

Built from a transformers config (LlamaConfig, Qwen2Config: Qwen2.5, DeepSeek-R1-Distill-Qwen, SmolLM2,
...), loaded from HF-named tensors. The forward takes the tokens of one engine step laid out flat, [T],
with their positions and an `AttentionMetadata`; every matmul runs on all T tokens at once. q/k/v are one
matmul and gate/up another (fewer kernel launches). The numerics mirror transformers' (RMSNorm in fp32,
RoPE tables in fp32, logits in the model dtype then fp32) so greedy outputs match token for token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from codefu.rollout.native.attention import AttentionMetadata, attention

SUPPORTED = ("llama", "qwen2")


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
    rope_theta: float
    max_position_embeddings: int
    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool
    tie_word_embeddings: bool

    @classmethod
    def from_hf(cls, config: Any) -> ModelSpec:
        model_type = getattr(config, "model_type", None)
        if model_type not in SUPPORTED:
            raise ValueError(f"native engine: model_type {model_type!r} is not supported (only {SUPPORTED})")
        act = getattr(config, "hidden_act", "silu")
        if act != "silu":
            raise ValueError(f"native engine: hidden_act {act!r} is not supported (only 'silu')")
        if model_type == "qwen2" and getattr(config, "use_sliding_window", False):
            layer_types = getattr(config, "layer_types", None) or ["sliding_attention"]
            if "sliding_attention" in layer_types:
                raise ValueError(
                    "native engine: sliding-window attention (use_sliding_window) is not supported"
                )
        heads = config.num_attention_heads
        kv_heads = getattr(config, "num_key_value_heads", None) or heads
        if heads % kv_heads:
            raise ValueError(
                f"native engine: {heads} attention heads is not a multiple of {kv_heads} KV heads"
            )
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        attention_bias = bool(getattr(config, "attention_bias", False))
        return cls(
            vocab_size=config.vocab_size,
            hidden_size=config.hidden_size,
            intermediate_size=config.intermediate_size,
            num_layers=config.num_hidden_layers,
            num_heads=heads,
            num_kv_heads=kv_heads,
            head_dim=head_dim,
            rms_norm_eps=config.rms_norm_eps,
            rope_theta=rope_theta(config),
            max_position_embeddings=config.max_position_embeddings,
            qkv_bias=model_type == "qwen2" or attention_bias,
            o_bias=model_type == "llama" and attention_bias,
            mlp_bias=bool(getattr(config, "mlp_bias", False)),
            tie_word_embeddings=bool(getattr(config, "tie_word_embeddings", False)),
        )


def rope_theta(config: Any) -> float:
    """The RoPE base of a config whose rope type is the default one; other rope types are an error.

    transformers 5 keeps both in `config.rope_parameters`; older versions use `rope_theta` and
    `rope_scaling`."""
    params = getattr(config, "rope_parameters", None) or {}
    scaling = getattr(config, "rope_scaling", None) or {}
    rope_type = params.get("rope_type") or scaling.get("rope_type") or scaling.get("type") or "default"
    if rope_type != "default":
        raise ValueError(
            f"native engine: rope type {rope_type!r} is not implemented (only the default RoPE); "
            "use rollout.engine=transformers for this model"
        )
    theta = params.get("rope_theta", getattr(config, "rope_theta", None))
    if theta is None:
        raise ValueError("native engine: the config has no rope_theta")
    return float(theta)


class RMSNorm(nn.Module):
    """x / rms(x) * weight, computed in fp32 and cast back (as transformers does)."""

    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(size))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


class Rotary(nn.Module):
    """cos/sin tables [max_len, D], computed and kept in fp32 (as transformers does), and their use."""

    def __init__(self, head_dim: int, theta: float, max_len: int) -> None:
        super().__init__()
        self.head_dim, self.theta, self.max_len = head_dim, theta, max_len
        self.register_buffer("cos", torch.empty(max_len, head_dim), persistent=False)
        self.register_buffer("sin", torch.empty(max_len, head_dim), persistent=False)

    def init_tables(self, device: torch.device | str) -> None:
        d = self.head_dim
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
        freqs = torch.outer(torch.arange(self.max_len, dtype=torch.float32), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.cos, self.sin = emb.cos().to(device), emb.sin().to(device)

    def forward(self, x: Tensor, positions: Tensor) -> Tensor:
        """x [T, H, D] rotated by each token's position [T]."""
        cos = self.cos[positions].to(x.dtype)[:, None, :]
        sin = self.sin[positions].to(x.dtype)[:, None, :]
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rotated * sin


class Attention(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = spec.num_heads, spec.num_kv_heads, spec.head_dim
        self.q_size = spec.num_heads * spec.head_dim
        self.kv_size = spec.num_kv_heads * spec.head_dim
        self.qkv_proj = nn.Linear(spec.hidden_size, self.q_size + 2 * self.kv_size, bias=spec.qkv_bias)
        self.o_proj = nn.Linear(self.q_size, spec.hidden_size, bias=spec.o_bias)
        self.scale = spec.head_dim**-0.5
        self.k_cache: Tensor | None = None  # [num_blocks, block_size, Hkv, D], set by the engine
        self.v_cache: Tensor | None = None

    def forward(self, x: Tensor, positions: Tensor, rotary: Rotary, meta: AttentionMetadata) -> Tensor:
        assert self.k_cache is not None and self.v_cache is not None, "no KV cache: call resume_memory()"
        q, k, v = self.qkv_proj(x).split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        q = rotary(q.view(-1, self.num_heads, self.head_dim), positions)
        k = rotary(k.view(-1, self.num_kv_heads, self.head_dim), positions)
        v = v.view(-1, self.num_kv_heads, self.head_dim)
        out = attention(q, k, v, self.k_cache, self.v_cache, meta, self.scale)
        return self.o_proj(out.reshape(-1, self.q_size))


class MLP(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.intermediate = spec.intermediate_size
        self.gate_up_proj = nn.Linear(spec.hidden_size, 2 * spec.intermediate_size, bias=spec.mlp_bias)
        self.down_proj = nn.Linear(spec.intermediate_size, spec.hidden_size, bias=spec.mlp_bias)

    def forward(self, x: Tensor) -> Tensor:
        gate, up = self.gate_up_proj(x).split(self.intermediate, dim=-1)
        return self.down_proj(F.silu(gate) * up)


class DecoderLayer(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(spec.hidden_size, spec.rms_norm_eps)
        self.self_attn = Attention(spec)
        self.post_attention_layernorm = RMSNorm(spec.hidden_size, spec.rms_norm_eps)
        self.mlp = MLP(spec)

    def forward(self, x: Tensor, positions: Tensor, rotary: Rotary, meta: AttentionMetadata) -> Tensor:
        x = x + self.self_attn(self.input_layernorm(x), positions, rotary, meta)
        return x + self.mlp(self.post_attention_layernorm(x))


class NativeCausalLM(nn.Module):
    """The decoder and lm_head. Parameters are created uninitialised (`load_weights` fills them)."""

    def __init__(self, spec: ModelSpec, max_len: int | None = None) -> None:
        super().__init__()
        self.spec = spec
        self.embed_tokens = nn.Embedding(spec.vocab_size, spec.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(spec) for _ in range(spec.num_layers))
        self.norm = RMSNorm(spec.hidden_size, spec.rms_norm_eps)
        self.rotary = Rotary(spec.head_dim, spec.rope_theta, max_len or spec.max_position_embeddings)
        if spec.tie_word_embeddings:
            self.lm_head_weight = self.embed_tokens.weight
        else:
            self.lm_head_weight = nn.Parameter(torch.empty(spec.vocab_size, spec.hidden_size))

    @classmethod
    def build(
        cls, config: Any, dtype: torch.dtype, device: torch.device | str, max_len: int | None = None
    ) -> NativeCausalLM:
        """An uninitialised model on `device` in `dtype` (no CPU copy, no random init)."""
        spec = ModelSpec.from_hf(config)
        with torch.device("meta"):
            model = cls(spec, max_len).to(dtype)
        model.to_empty(device=device)
        if spec.tie_word_embeddings:  # to_empty may have made two tensors of the one tied parameter
            model.lm_head_weight = model.embed_tokens.weight
        model.rotary.init_tables(device)
        return model.eval().requires_grad_(False)

    def forward(self, input_ids: Tensor, positions: Tensor, meta: AttentionMetadata) -> Tensor:
        """[T] tokens and positions -> [T, hidden] final hidden states (after the final norm)."""
        x = self.embed_tokens(input_ids)
        for layer in self.layers:
            x = layer(x, positions, self.rotary, meta)
        return self.norm(x)

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

    @torch.no_grad()
    def load_weights(self, state: dict[str, Tensor]) -> None:
        """Copy HF-named tensors into their slices in place (dtype/device converted by `copy_`; a tensor
        already on our GPU is copied there, no CPU round trip). Every name must be ours; every one of ours
        must be given, except lm_head.weight when it is tied to the embeddings."""
        targets = self.hf_targets()
        unexpected = sorted(set(state) - set(targets))
        if unexpected:
            raise KeyError(f"load_weights: not model keys: {unexpected[:5]} ({len(unexpected)} in all)")
        optional = {"lm_head.weight"} if self.spec.tie_word_embeddings else set()
        missing = sorted(set(targets) - set(state) - optional)
        if missing:
            raise KeyError(f"load_weights: model keys missing: {missing[:5]} ({len(missing)} in all)")
        for name, value in state.items():
            target = targets[name]
            if target.shape != value.shape:
                raise ValueError(
                    f"load_weights: {name} is {tuple(value.shape)}, the model's {tuple(target.shape)}"
                )
            target.copy_(value)


__all__ = ["ModelSpec", "NativeCausalLM", "rope_theta"]
