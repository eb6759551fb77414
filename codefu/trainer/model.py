"""The policy model: a causal LM (loaded by `codefu.models.load_model`) wrapped to give token log-probs in
chunks, and sharded with FSDP2.

`PolicyModel` is the FSDP root: its forward runs the decoder, then the lm_head one chunk of positions at a
time (each chunk checkpointed), so a (B, T, V) logits tensor never exists -- for a 16k-token sequence and a
152k vocabulary that would be 4.9 GB in bf16 and 10 GB in fp32.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard
from torch.utils.checkpoint import checkpoint

from codefu.algo.logprobs import entropy_from_logits, linear_token_logprobs, token_logprobs_from_logits
from codefu.models.loading import DTYPE_BY_NAME, load_model, native_dtype_name, warn_if_slow_on_cpu
from codefu.models.lora import add_adapters
from codefu.trainer.config import TrainerConfig
from codefu.trainer.distributed import make_mesh
from codefu.trainer.packing import PackedLayout, enable_packing, packed_attention_mask
from codefu.trainer.sequence_parallel import SeqShard, enable_sequence_parallel, token_window

log = logging.getLogger(__name__)


def compute_dtype(cfg: TrainerConfig, device: torch.device) -> torch.dtype:
    """The config's dtype; "auto": bf16 where the device computes it natively, else fp32."""
    if cfg.dtype == "auto":
        return DTYPE_BY_NAME[native_dtype_name(device)]
    dtype = DTYPE_BY_NAME[cfg.dtype]
    if device.type == "cpu":
        warn_if_slow_on_cpu(dtype)
    return dtype


def load_policy(cfg: TrainerConfig) -> tuple[nn.Module, Any]:
    """(model, tokenizer or None) as `cfg` names them, on the CPU in `cfg.master_dtype`."""
    return load_model(cfg.model, cfg.gguf_file, cfg.master_dtype, cfg.tokenizer, cfg.attn_implementation)


def build_model(config: Any, cfg: TrainerConfig, device: torch.device | str = "cpu") -> nn.Module:
    """A randomly initialized causal LM from an HF config (object or dict with "model_type"), built directly
    on `device` (on the GPU, so a 7B model needs neither 28 GB of CPU memory nor minutes of CPU init)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    if isinstance(config, dict):
        config = dict(config)
        config = AutoConfig.for_model(config.pop("model_type"), **config)
    if cfg.attn_implementation is not None:
        config._attn_implementation = cfg.attn_implementation
    with torch.device(device):
        return AutoModelForCausalLM.from_config(config, dtype=DTYPE_BY_NAME[cfg.master_dtype])


def decoder_layers(lm: nn.Module) -> nn.ModuleList:
    """The repeated transformer blocks (Llama, Qwen2, Mistral, ...: `lm.model.layers`)."""
    layers = getattr(lm.get_decoder(), "layers", None)
    if not isinstance(layers, nn.ModuleList):
        raise TypeError(f"{type(lm).__name__}: no decoder `layers` ModuleList to shard")
    return layers


def decoder_hidden_states(
    lm: nn.Module, shard: SeqShard, input_ids: Tensor, attention_mask: Tensor
) -> Tensor:
    """The final (normed) hidden states of this rank's positions [s, e) = shard.bounds(T) of whole
    (b, T) rows: (b, e - s, H)."""
    b, T = input_ids.shape
    right_padded = bool((attention_mask[:, 1:] <= attention_mask[:, :-1]).all())
    start, end = shard.bounds(T)
    # Right padding only: under the causal mask no real token attends to a pad, so the padding mask
    # changes nothing real, and without it SDPA runs its fused causal kernel instead of materializing a
    # (b, 1, T, T) mask (on CPU, the difference between flash and math attention).
    kwargs: dict[str, Any] = {}
    if shard.size > 1:
        if not right_padded:
            raise ValueError("sequence parallelism needs right-padded rows (attention_mask: 1s, then 0s)")
        # global positions for the rotary embedding; the Ulysses attention is causal over the full rows
        kwargs["position_ids"] = torch.arange(start, end, device=input_ids.device)[None].expand(b, -1)
    elif not right_padded:
        kwargs["attention_mask"] = attention_mask
    return lm.get_decoder()(
        input_ids=token_window(input_ids, start, end), use_cache=False, **kwargs
    ).last_hidden_state


def packed_hidden_states(lm: nn.Module, layout: PackedLayout) -> Tensor:
    """The final hidden states at `layout.src` of a packed row (packing.py): (N, H); (1, H) at position 0
    when N is 0, so that every rank still runs every module (FSDP's hooks)."""
    hidden = lm.get_decoder()(
        input_ids=layout.input_ids,
        position_ids=layout.position_ids,
        attention_mask=packed_attention_mask(layout),
        use_cache=False,
    ).last_hidden_state[0]
    return hidden[layout.src] if len(layout.src) else hidden[:1]


def unpack_outputs(values: Tensor, layout: PackedLayout, shape: tuple[int, int]) -> Tensor:
    """Per-output values (N,) into the (b, T) column layout of `PolicyModel.forward` (0 elsewhere). With
    N = 0, `values` is the stand-in output at position 0: kept in the graph with weight 0."""
    out = torch.zeros(shape, dtype=torch.float32, device=values.device)
    if not len(layout.src):
        return out + 0 * values.sum()
    return out.index_put((layout.dst_row, layout.dst_col), values.float())


class PolicyModel(nn.Module):
    """Causal LM -> per-token log-probs (and entropy), computing the lm_head in checkpointed chunks.

    `self.lm` is the unmodified transformers model, so state-dict keys are "lm." + the HF names. With
    sequence parallelism (`shard.size > 1`) each rank runs its slice of the token positions.
    """

    def __init__(
        self,
        lm: nn.Module,
        chunk_tokens: int = 1024,
        temperature: float = 1.0,
        shard: SeqShard | None = None,
        entropy_grad: bool = False,
        compile_head: bool = False,
    ):
        super().__init__()
        self.lm = lm
        self.chunk_tokens = chunk_tokens
        self.temperature = temperature
        self.shard = shard or SeqShard()
        # entropy as a metric only (no entropy bonus) lets a linear head run as one fused step
        self.entropy_grad = entropy_grad
        self.compile_head = compile_head

    def _head(self, hidden: Tensor, targets: Tensor, with_entropy: bool) -> tuple[Tensor, Tensor]:
        """hidden (b, c, H), targets (b, c) -> fp32 log-probs (b, c) and entropy (b, c) (0 if not asked)."""
        logits = self.lm.get_output_embeddings()(hidden)  # (b, c, V) in the compute dtype
        n = targets.numel()
        lp = token_logprobs_from_logits(logits, targets, chunk_size=max(n, 1), temperature=self.temperature)
        if with_entropy:
            ent = entropy_from_logits(logits, chunk_size=max(n, 1), temperature=self.temperature)
        else:
            ent = torch.zeros_like(lp)
        return lp, ent

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor,
        response_mask: Tensor,
        with_entropy: bool = False,
        layout: PackedLayout | None = None,
    ) -> tuple[Tensor, Tensor]:
        """input_ids, attention_mask, response_mask (b, T), whole rows on every rank -> (logprobs, entropy),
        fp32, each (b, e - s) for this rank's positions [s, e) = self.shard.bounds(T) ([0, T) without
        sequence parallelism).

        Column j holds log p(input_ids[:, s+j+1] | input_ids[:, :s+j+1]): the batch's log-prob column s+1+j,
        so `token_window(x, s + 1, e + 1)` cuts any (b, T) batch tensor to match (the last position predicts
        nothing: 0). Only the span of positions predicting response tokens is computed (the rest is 0):
        prompts cost no lm_head.

        With `layout` (trainer.packing: shared_prefix) the rows run as that packed row instead, and only
        the positions predicting `response_mask` tokens are computed (the same columns, 0 elsewhere).
        """
        if layout is not None:
            return self._packed(layout, tuple(input_ids.shape), with_entropy)
        b, T = input_ids.shape
        start, end = self.shard.bounds(T)
        hidden = decoder_hidden_states(self.lm, self.shard, input_ids, attention_mask)
        targets = token_window(input_ids, start + 1, end + 1)  # position p predicts token p + 1
        cols = token_window(response_mask, start + 1, end + 1).any(0).nonzero().flatten()
        # no response token here: one position anyway, so every rank uses the lm_head (FSDP's hooks)
        lo, hi = (int(cols[0]), int(cols[-1]) + 1) if len(cols) else (0, 1)
        lp, ent = self._chunked_head(hidden, targets, lo, hi, max(1, self.chunk_tokens // b), with_entropy)
        pad = (lo, end - start - hi)
        return F.pad(lp, pad), F.pad(ent, pad)

    def _chunked_head(
        self, hidden: Tensor, targets: Tensor, lo: int, hi: int, step: int, with_entropy: bool
    ) -> tuple[Tensor, Tensor]:
        """`_head` over positions [lo, hi) of hidden (b, c, H) and targets (b, c), `step` at a time:
        (log-probs, entropy), each (b, hi - lo). A linear head runs each chunk through
        `linear_token_logprobs` (the same values, one softmax pass each way instead of a checkpointed
        head's four), unless the entropy needs its gradient (an entropy bonus)."""
        head = self.lm.get_output_embeddings()
        # a LoRA head (trainer.lora targets lm_head) runs its own forward: the fused step reads only .weight
        fused = type(head) is nn.Linear and not (with_entropy and self.entropy_grad)
        b, H = hidden.shape[0], hidden.shape[-1]
        lps, ents = [], []
        for s in range(lo, hi, step):
            e = min(s + step, hi)
            if fused:
                lp, ent = linear_token_logprobs(
                    hidden[:, s:e].reshape(-1, H),
                    head.weight,
                    head.bias,
                    targets[:, s:e].reshape(-1),
                    self.temperature,
                    with_entropy,
                    self.compile_head,
                )
                lp, ent = lp.view(b, e - s), ent.view(b, e - s)
            else:
                args = (hidden[:, s:e], targets[:, s:e], with_entropy)
                # checkpointed: only the (b, c, H) slice is kept; the logits are recomputed in backward
                lp, ent = (
                    checkpoint(self._head, *args, use_reentrant=False)
                    if hidden.requires_grad
                    else self._head(*args)
                )
            lps.append(lp)
            ents.append(ent)
        return torch.cat(lps, 1), torch.cat(ents, 1)

    def _packed(
        self, layout: PackedLayout, shape: tuple[int, int], with_entropy: bool
    ) -> tuple[Tensor, Tensor]:
        hidden = packed_hidden_states(self.lm, layout)[None]  # (1, N, H)
        targets = layout.targets[None] if len(layout.src) else layout.input_ids[:, :1]
        lp, ent = self._chunked_head(hidden, targets, 0, hidden.shape[1], self.chunk_tokens, with_entropy)
        return unpack_outputs(lp[0], layout, shape), unpack_outputs(ent[0], layout, shape)


class ValueModel(nn.Module):
    """The critic: the policy's decoder with a scalar head in place of the lm_head -> per-token values.

    `self.lm` is the transformers model with its output embeddings replaced by nothing (a 152k x 1.5k
    lm_head is 15% of a 1.5B model, and a critic never uses it); `self.head` maps the final hidden state
    to V. The head starts at zero, so the first values are 0 and GAE starts from the reward-to-go.
    """

    def __init__(self, lm: nn.Module, shard: SeqShard | None = None):
        super().__init__()
        head_of_lm = lm.get_output_embeddings()
        for name, child in list(lm.named_children()):
            if child is head_of_lm:
                setattr(lm, name, nn.Identity())
        self.lm = lm
        hidden = lm.config.get_text_config().hidden_size
        dtype = next(lm.parameters()).dtype
        self.head = nn.Linear(hidden, 1, dtype=dtype)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)
        self.shard = shard or SeqShard()

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor,
        response_mask: Tensor,
        with_entropy: bool = False,
        layout: PackedLayout | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Like `PolicyModel.forward`, with values in place of log-probs: fp32 (b, e - s), column j holding
        V(input_ids[:, :s+j+1]), the value of the state in which batch column s+1+j was sampled (aligned as
        log-probs, cut batch tensors with `token_window(x, s + 1, e + 1)`). The second output is zeros (a
        critic has no entropy); `response_mask` is unused (every position is cheap: no lm_head), except
        with `layout`, which computes the values at response positions only."""
        if layout is not None:
            values = self.head(packed_hidden_states(self.lm, layout)).sum(-1, dtype=torch.float32)
            out = unpack_outputs(values, layout, tuple(input_ids.shape))
            return out, torch.zeros_like(out)
        hidden = decoder_hidden_states(self.lm, self.shard, input_ids, attention_mask)
        values = self.head(hidden).sum(-1, dtype=torch.float32)  # (b, c, 1) -> (b, c); not a view (FSDP)
        return values, torch.zeros_like(values)


def shard_model(model: nn.Module, cfg: TrainerConfig, device: torch.device) -> nn.Module:
    """FSDP2: `fully_shard` each decoder layer, then the root (embeddings, final norm, lm_head).

    Parameters are stored sharded in `cfg.master_dtype`, gathered in the compute dtype, and gradients are
    reduced in fp32. Works for any world size, including 1, and on CPU with gloo.
    """
    param_dtype = compute_dtype(cfg, device)
    mp = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32)
    kwargs: dict[str, Any] = {"mesh": make_mesh(device), "mp_policy": mp}
    if cfg.cpu_offload:
        kwargs["offload_policy"] = CPUOffloadPolicy(pin_memory=device.type == "cuda")
    if cfg.compile and hasattr(torch._dynamo.config, "skip_fwd_side_effects_in_bwd_under_checkpoint"):
        # newer transformers checkpoint a layer's `forward`, inside its compiled call: dynamo then breaks
        # the graph at a side effect (the output collector's variable) and the checkpointed layers train
        # eagerly. The recompute need not replay that side effect (nothing is collected in training);
        # torchtitan sets the same.
        torch._dynamo.config.skip_fwd_side_effects_in_bwd_under_checkpoint = True
    for layer in decoder_layers(model.lm):
        if cfg.compile:
            layer.compile()
        fully_shard(layer, reshard_after_forward=cfg.reshard_after_forward, **kwargs)
    # the root's params are needed again right at the start of backward: keeping them gathered is cheaper
    fully_shard(model, reshard_after_forward=False, **kwargs)
    return model


def prepare_model(
    lm: nn.Module,
    cfg: TrainerConfig,
    device: torch.device,
    frozen: bool = False,
    shard: SeqShard | None = None,
    value_head: bool = False,
) -> PolicyModel | ValueModel:
    """Wrap (a `PolicyModel`, or with `value_head` the critic's `ValueModel`), switch to Ulysses attention
    (sequence parallelism), enable gradient checkpointing (trainable models only), and shard."""
    lm.config.use_cache = False
    if cfg.lora.enabled and not frozen and not value_head:
        add_adapters(lm, cfg.lora)  # before sharding and compiling: the layers' final shape
    if shard is not None:
        enable_sequence_parallel(lm, decoder_layers(lm), shard)
    if cfg.packing == "shared_prefix":
        enable_packing(lm)
    if cfg.gradient_checkpointing and not frozen:
        # newer transformers renamed gradient_checkpointing_enable (the old name warns)
        if hasattr(lm, "activation_checkpointing_enable"):
            lm.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:
            lm.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if cfg.uncheckpointed_layers:
            # selective checkpointing: the last layers keep their activations (memory for less recompute)
            for layer in decoder_layers(lm)[-cfg.uncheckpointed_layers :]:
                layer.gradient_checkpointing = False
    if frozen:
        lm.requires_grad_(False)
    if value_head:
        return shard_model(ValueModel(lm, shard), cfg, device)
    policy = PolicyModel(
        lm, cfg.logprob_chunk_tokens, cfg.temperature, shard, cfg.entropy_coef != 0, cfg.compile
    )
    return shard_model(policy, cfg, device)
