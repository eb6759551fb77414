"""TrainerWorker: one rank of the FSDP2 policy trainer (or, with frozen=True, of the reference policy).

A plain class: build it in any process whose default process group is up (`init_distributed`); the Ray
actor in actor.py only forwards calls. Every rank gets the same whole `Batch` and takes its own rows
(batch.py), so the only communication is FSDP's own, one all-reduce of the log-probs in
`compute_logprobs`, small metric/gradient-norm all-reduces in `update`, and, with sequence parallelism
(`sp_degree` > 1, sequence_parallel.py), the attention all-to-alls inside each sp group.

The update does not depend on how a mini-batch is split over ranks and micro-batches: every micro-batch's
loss is divided by the whole mini-batch's count (tokens for token-mean, sequences for the seq-mean modes),
so the micro-batch losses on all ranks add up to the mini-batch loss; the gradients are summed (FSDP's
1/world_size averaging is undone by scaling the loss by world_size).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections import defaultdict
from dataclasses import fields
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from torch.distributed.tensor import DTensor

from codefu.algo.loss import LossSettings, loss_normalizer, rl_loss
from codefu.models.lora import (
    AdapterWeights,
    adapter_layers,
    adapters_disabled,
    merge_adapters,
    save_peft_adapter,
)
from codefu.models.weight_broadcast import WeightBroadcast
from codefu.models.weights import FlatLayout, PackedWeights, SharedWeights, pack_weights, whole
from codefu.trainer import checkpoint as ckpt
from codefu.trainer.batch import Batch, pack_micro_batches, split_across_ranks
from codefu.trainer.config import TrainerConfig
from codefu.trainer.distributed import RankGrid, all_reduce, init_distributed, resolve_device, sp_group
from codefu.trainer.model import compute_dtype, load_policy, prepare_model
from codefu.trainer.packing import (
    BLOCK,
    PackedLayout,
    PrefixGroup,
    packed_layout,
    plan_micro_batches,
    prefix_groups,
    rows_of,
)
from codefu.trainer.profiling import CallProfiler
from codefu.trainer.sequence_parallel import SeqShard, token_window

# a micro-batch: batch rows (packing padded) or prefix groups (packing shared_prefix)
MicroBatch = list[int] | list[PrefixGroup]

# policy_loss metrics averaged over valid tokens (weighted by each micro-batch's valid tokens)
_TOKEN_MEAN_METRICS = ("clip_frac", "approx_kl", "ratio_mean")


def lr_lambda(cfg: TrainerConfig):
    """Multiplier of cfg.lr after `step` optimizer steps: linear warmup, then constant or cosine decay."""

    def f(step: int) -> float:
        if step < cfg.warmup_steps:
            return (step + 1) / (cfg.warmup_steps + 1)
        if cfg.schedule == "constant":
            return 1.0
        progress = min(1.0, (step - cfg.warmup_steps) / max(1, cfg.total_steps - cfg.warmup_steps))
        return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return f


def compiled_graphs() -> int:
    """How many graphs torch.compile has made in this process so far (dynamo's own count)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


class TrainerWorker:
    """One rank. Verbs: compute_logprobs, update, state_dict_for_sync, save, load, export_hf.

    The critic (critic.py) is a subclass with another model and loss: the hooks are `VALUE_HEAD`,
    `_check_update_batch`, `_micro_loss` and `_mini_batch_metrics`.

    Args:
        cfg: the trainer config (same on every rank).
        frozen: a reference policy: no optimizer, no gradient checkpointing, only `compute_logprobs`.
        model: an already built transformers causal LM (e.g. random init for benchmarks) instead of
            loading `cfg.model`; tokenizer goes with it.
    """

    #: the model is the critic's `ValueModel` (values) instead of the `PolicyModel` (log-probs)
    VALUE_HEAD = False
    #: the group of the optimizer's metrics (grad_norm, lr, skipped)
    OPTIM_METRICS = "optim"

    def __init__(
        self, cfg: TrainerConfig, frozen: bool = False, model: nn.Module | None = None, tokenizer: Any = None
    ):
        self.cfg = cfg
        self.frozen = frozen
        self.device = resolve_device(cfg.device)
        self.rank, self.world_size = init_distributed(device=cfg.device)
        # (dp, sp) grid: the sp ranks of one group train the same rows, each on its slice of the tokens
        self.grid = RankGrid(self.rank, self.world_size, cfg.sp_degree)
        self.shard = SeqShard(self.grid.sp_rank, self.grid.sp, sp_group(self.grid, self.device))
        torch.manual_seed(cfg.seed)
        if model is None:
            model, tokenizer = load_policy(cfg)
        self.tokenizer = tokenizer
        self.hf_config = model.config
        self.model = prepare_model(
            model, cfg, self.device, frozen=frozen, shard=self.shard, value_head=self.VALUE_HEAD
        )
        self.step = 0  # optimizer steps taken
        role = "reference" if frozen else "critic" if self.VALUE_HEAD else "policy"
        self.profiler = CallProfiler(cfg.profile_dir, cfg.profile_calls, role, self.rank, self.device)
        self._shared: PackedWeights | None = None  # weights lent to a colocated engine (share_weights)
        self._offloaded = False  # AdamW's state is in CPU memory (offload_optimizer)
        # a frozen model's weights: their storages and the CPU copy they come back from (offload_weights)
        self._weight_storages: list[torch.UntypedStorage] = []
        self._host_weights: list[Tensor] = []
        self._weights_offloaded = False
        self.optimizer: torch.optim.Optimizer | None = None
        self.scheduler: torch.optim.lr_scheduler.LRScheduler | None = None
        if not frozen:
            params = [p for p in self.model.parameters() if p.requires_grad]
            # fused: one kernel per parameter on GPU and CPU alike; the unfused CPU path takes ~10 passes
            # over memory and was 13 s of a 60 s SmolLM2 step on 2 cores (0.24 s fused)
            self.optimizer = torch.optim.AdamW(
                params,
                lr=cfg.lr,
                betas=cfg.betas,
                eps=cfg.adam_eps,
                weight_decay=cfg.weight_decay,
                fused=True,
            )
            self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lr_lambda(cfg))
        # the loss knobs are trainer keys of the same names
        self.loss_settings = LossSettings(**{f.name: getattr(cfg, f.name) for f in fields(LossSettings)})

    # ------------------------------------------------------------------------------------------------
    # the split of a batch into ranks and micro-batches (pure, identical on every rank)

    def _my_micro_batches(
        self, batch: Batch, rows: list[int], lengths: list[int], tokens: int | None = None
    ) -> tuple[list[MicroBatch], int]:
        """This rank's micro-batches and the number every rank must run (the max).

        `tokens`: the per-rank budget (default micro_batch_tokens). Rows are dealt to the dp groups; the sp
        ranks of a group get the same micro-batches, whose padded size may be sp times the per-rank
        budget (each rank holds 1/sp of it). A micro-batch is a list of batch rows (packing padded) or of
        prefix groups (shared_prefix, packing.py)."""
        dp, me = self.grid.dp, self.grid.dp_rank
        budget = (tokens or self.cfg.micro_batch_tokens) * self.grid.sp
        if self.cfg.packing == "shared_prefix":
            plan = plan_micro_batches(batch.input_ids, lengths, batch.response_mask, rows, budget, dp)
            return plan[me], max(1, max(len(p) for p in plan))
        sub = [lengths[i] for i in rows]
        parts = split_across_ranks(sub, dp)
        packed = [pack_micro_batches([sub[j] for j in p], budget) for p in parts]
        mine = [[rows[parts[me][k]] for k in mb] for mb in packed[me]]
        return mine, max(1, max(len(p) for p in packed))

    def _select(
        self, batch: Batch, micro: MicroBatch | None, lengths: list[int], filler_row: int
    ) -> tuple[Batch, PackedLayout | None, list[int]]:
        """A micro-batch on this rank's device: (its rows of `batch`, the packed layout or None, the rows).
        `micro` None: a stand-in of one row with every mask zeroed, for a rank with fewer micro-batches than
        another (it keeps FSDP's collectives in step and adds nothing)."""
        if micro is None:
            micro = [PrefixGroup(0, [filler_row])] if self.cfg.packing == "shared_prefix" else [filler_row]
            mb, layout, rows = self._select(batch, micro, lengths, filler_row)
            return mb.zero_weight(), layout, rows
        if self.cfg.packing == "padded":
            return batch.select(micro, self.device), None, list(micro)
        rows = rows_of(micro)
        multiple = BLOCK if self.device.type == "cuda" else 1  # FlexAttention's blocks; none on CPU
        layout = packed_layout(batch.input_ids, lengths, batch.response_mask, micro, multiple)
        return batch.select(rows, self.device), layout.to(self.device), rows

    def _forward(
        self, mb: Batch, with_entropy: bool, layout: PackedLayout | None = None
    ) -> tuple[Tensor, Tensor, tuple[int, int]]:
        """(log-probs, entropy) of this rank's token slice of `mb` (values, zeros for the critic), and the
        batch columns [lo, hi) they are (PolicyModel.forward): cut batch tensors with `token_window(x, lo,
        hi)`. `layout`: the rows run packed (packing.py)."""
        lp, ent = self.model(mb.input_ids, mb.attention_mask.long(), mb.response_mask, with_entropy, layout)
        start, end = self.shard.bounds(mb.input_ids.shape[1])
        return lp, ent, (start + 1, end + 1)

    # ------------------------------------------------------------------------------------------------
    # verbs

    def compute_logprobs(self, batch: Batch, adapters: bool = True) -> Tensor:
        """(B, T) fp32 log-probs of `batch.input_ids` under this model, aligned like `Batch.old_logprobs`;
        0 outside `response_mask`. Every rank computes its rows; the result is all-reduced to every rank.
        Offloaded weights (`offload_weights`) are brought back first. `adapters` False: the model without
        its LoRA adapters (trainer.lora), which is the KL reference."""
        self.reload_weights()
        with contextlib.nullcontext() if adapters else adapters_disabled(self.model):
            return self._per_token(batch)

    @torch.no_grad()
    def _per_token(self, batch: Batch) -> Tensor:
        """(B, T) fp32 of the model's first output (log-probs; the critic's values), 0 outside
        `response_mask`; all-reduced to every rank."""
        self.model.eval()
        B, T = batch.input_ids.shape
        # room past T for the padding of the last sp rank's slice (cut off at the end)
        out = torch.zeros(B, T + self.grid.sp + 1, dtype=torch.float32, device=self.device)
        rows = list(range(B))
        lengths = batch.lengths().tolist()
        # no activations are kept for a backward: forward-only passes may take bigger micro-batches
        budget = self.cfg.forward_micro_batch_tokens
        mine, n_micro = self._my_micro_batches(batch, rows, lengths, budget)
        with self.profiler.call("forward"):
            for i in range(n_micro):
                mb, layout, mb_rows = self._select(batch, mine[i] if i < len(mine) else None, lengths, 0)
                lp, _, (lo, hi) = self._forward(mb, False, layout)
                if i < len(mine):  # an extra pass only keeps FSDP's collectives in step with other ranks
                    out[mb_rows, lo:hi] = lp * token_window(mb.response_mask, lo, hi).to(lp.dtype)
        self.model.reshard()  # the root stays gathered after a no-grad forward; free it (and never go stale)
        self._give_back_cached_memory()
        # dp groups hold different rows, sp ranks different columns: the sum assembles the whole batch
        return all_reduce(out)[:, :T].cpu()

    def update(self, batch: Batch) -> dict[str, float]:
        """PPO epochs over mini-batches of `cfg.mini_batch_size` sequences; one optimizer step each.

        Needs batch.old_logprobs and batch.advantages (and batch.ref_logprobs when kl_coef > 0). Returns
        metrics averaged over the optimizer steps (`optim/grad_norm_max` and `policy/ratio_max`: maxima).
        """
        if self.optimizer is None:
            raise RuntimeError("update() on a frozen (reference) worker")
        self._check_update_batch(batch)
        self.reload_optimizer()
        t0 = time.perf_counter()
        graphs_before = compiled_graphs()
        retries_before = 0
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
            retries_before = torch.cuda.memory_stats(self.device).get("num_alloc_retries", 0)
        self.model.train()
        B = len(batch)
        mbs = self.cfg.mini_batch_size or B
        lengths = batch.lengths().tolist()
        totals: dict[str, float] = defaultdict(float)
        maxima: dict[str, float] = defaultdict(float)
        n_steps = 0
        with self.profiler.call("update"):
            for epoch in range(self.cfg.ppo_epochs):
                order = self._order(batch, lengths, epoch)
                for s in range(0, B, mbs):
                    stats = self._train_mini_batch(batch, order[s : s + mbs], lengths)
                    for k, v in stats.items():
                        if k.endswith("_max"):
                            maxima[k] = max(maxima[k], v)
                        else:
                            totals[k] += v
                    n_steps += 1
        metrics = {k: v / n_steps for k, v in totals.items()} | dict(maxima)
        metrics[f"{self.OPTIM_METRICS}/steps"] = float(self.step)
        metrics["timing/update_s"] = time.perf_counter() - t0
        # graphs torch.compile made during this update: past the first steps, each one is a recompile
        # (a new shape or a failed guard) that cost seconds of this update's time
        metrics["compile/update_graphs"] = float(compiled_graphs() - graphs_before)
        if self.device.type == "cuda":  # the room left for uncheckpointed_layers and larger micro-batches
            metrics["memory/update_peak_gb"] = torch.cuda.max_memory_allocated(self.device) / 2**30
            # reserved beyond the peak: the allocator's cached blocks (fragmentation) no one else can use
            metrics["memory/update_reserved_gb"] = torch.cuda.max_memory_reserved(self.device) / 2**30
            metrics["memory/gpu_free_gb"] = torch.cuda.mem_get_info(self.device)[0] / 2**30
            # each retry freed the allocator's whole cache and synchronised: a slow update near the card's
            # limit (a 7B step's update took 47 s instead of 32 s with 10 unchecked layers) shows here
            retries = torch.cuda.memory_stats(self.device).get("num_alloc_retries", 0) - retries_before
            metrics["memory/update_alloc_retries"] = float(retries)
        self._give_back_cached_memory()
        return metrics

    def _give_back_cached_memory(self) -> None:
        """The end of a pass: its cached activation blocks back to the GPU. A colocated engine sizes its KV
        cache from the free memory; a reference that kept them held ~11 GB at 7B, more each step as the
        shapes varied."""
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def _check_update_batch(self, batch: Batch) -> None:
        if batch.advantages is None:
            raise ValueError("update() needs batch.advantages")
        correction = self.cfg.rollout_correction != "none"
        if correction and batch.rollout_logprobs is None:
            raise ValueError(f"rollout_correction={self.cfg.rollout_correction!r} needs rollout_logprobs")
        if batch.old_logprobs is None and not (correction and self.cfg.ppo_epochs == 1):
            # without old log-probs each token's first forward is its pi_old: right only in one epoch
            raise ValueError(
                "update() needs batch.old_logprobs (or a rollout correction with ppo_epochs 1, which takes "
                "them from the update's own forward)"
            )
        if self.cfg.kl_coef > 0 and batch.ref_logprobs is None:
            raise ValueError("kl_coef > 0 needs batch.ref_logprobs (from the reference worker)")

    def _order(self, batch: Batch, lengths: list[int], epoch: int) -> list[int]:
        """One epoch's batch order, seeded by (seed, step, epoch): all ranks and a resumed run agree. With
        shared-prefix packing the rows of a prefix group stay together (the groups are permuted), so each
        mini-batch computes its groups' prefixes once."""
        n = len(batch)
        units: list[list[int]] = [[r] for r in range(n)]
        if self.cfg.packing == "shared_prefix":
            units = [g.rows for g in prefix_groups(batch.input_ids, lengths, batch.response_mask, range(n))]
        if self.cfg.shuffle:
            g = torch.Generator().manual_seed(self.cfg.seed * 1_000_003 + self.step * 1_009 + epoch)
            units = [units[i] for i in torch.randperm(len(units), generator=g).tolist()]
        return [r for u in units for r in u]

    def _train_mini_batch(self, batch: Batch, rows: list[int], lengths: list[int]) -> dict[str, float]:
        """Forward/backward every micro-batch of this rank's share of `rows`, then one optimizer step."""
        normalizer = loss_normalizer(batch.response_mask[rows], self.loss_settings)
        mine, n_micro = self._my_micro_batches(batch, rows, lengths)
        summed: dict[str, float] = defaultdict(float)  # over micro-batches here, then over ranks
        maxed: dict[str, float] = defaultdict(float)
        for i in range(n_micro):
            mb, layout, _ = self._select(batch, mine[i] if i < len(mine) else None, lengths, rows[0])
            loss, sums, maxima = self._micro_loss(mb, normalizer, layout)
            sums["perf/computed_tokens"] = float(layout.tokens if layout else mb.input_ids.numel())
            # FSDP averages gradients over all ranks; the normalizer already divides by the global count, and
            # each rank's loss covers only its rows and (with sp) its token slice: the ranks' losses add up to
            # the mini-batch loss, so the summed gradient is the 1-rank gradient
            (loss * self.world_size).backward()
            for k, v in sums.items():
                summed[k] += v
            for k, v in maxima.items():
                maxed[k] = max(maxed[k], v)
        grad_norm = self._clip_gradients()
        if math.isfinite(grad_norm):
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        self.step += 1
        # every rank ran n_micro micro-batches, so every rank has the same keys in the same order
        total = all_reduce(torch.tensor(list(summed.values()), dtype=torch.float64)).tolist()
        top = all_reduce(torch.tensor(list(maxed.values()) or [0.0], dtype=torch.float64), "max").tolist()
        g = self.OPTIM_METRICS
        out = {
            f"{g}/grad_norm": grad_norm,
            f"{g}/grad_norm_max": grad_norm,
            f"{g}/lr": self.scheduler.get_last_lr()[0],
            f"{g}/skipped": float(not math.isfinite(grad_norm)),
        }
        reduced = dict(zip(summed, total, strict=True)) | dict(zip(maxed, top[: len(maxed)], strict=True))
        return out | self._mini_batch_metrics(reduced, batch, rows)

    def _micro_loss(
        self, mb: Batch, normalizer: float, layout: PackedLayout | None = None
    ) -> tuple[Tensor, dict[str, float], dict[str, float]]:
        """One micro-batch's loss (this rank's token slice) and its metrics: (loss, sums, maxima), the sums
        added and the maxima maxed over the mini-batch's micro-batches and ranks."""
        cfg = self.cfg
        lp, ent, (lo, hi) = self._forward(mb, True, layout)
        adv = mb.advantages if mb.advantages.dim() == 1 else token_window(mb.advantages, lo, hi)
        ref = token_window(mb.ref_logprobs, lo, hi).to(lp) if cfg.kl_coef > 0 else None
        # no old log-probs (a rollout correction in one epoch): pi_old is this forward's policy (ratio 1),
        # the synced one for the first mini-batch; the importance weights then carry pi_old / pi_rollout
        old = lp.detach() if mb.old_logprobs is None else token_window(mb.old_logprobs, lo, hi).to(lp)
        rollout = None if mb.rollout_logprobs is None else token_window(mb.rollout_logprobs, lo, hi).to(lp)
        loss, m = rl_loss(
            lp,
            old,
            adv.to(lp),
            token_window(mb.response_mask, lo, hi).to(lp.dtype),
            mb.response_mask.sum(-1),
            normalizer,
            self.loss_settings,
            entropy=ent,
            ref_logprobs=ref,
            rollout_logprobs=rollout,
        )
        n_tok = m["valid_tokens"]
        sums = {
            "loss/pg": float(m["pg"]),
            "loss/kl": float(m["kl"]),
            "loss/total": float(loss.detach()),
            "policy/entropy": float(m["entropy"]),
            "perf/response_tokens": n_tok,
        } | {f"policy/{k}": m[k] * n_tok for k in _TOKEN_MEAN_METRICS}
        sums |= {k: v * n_tok for k, v in m.items() if k.startswith("rollout_is/")}  # token-weighted
        return loss, sums, {"policy/ratio_max": m["ratio_max"] if n_tok else 0.0}

    def _mini_batch_metrics(
        self, totals: dict[str, float], batch: Batch, rows: list[int]
    ) -> dict[str, float]:
        """The mini-batch's metrics from the summed (and maxed) `_micro_loss` metrics."""
        tokens = max(totals["perf/response_tokens"], 1.0)
        for k in totals:
            if k.startswith("rollout_is/") or k.removeprefix("policy/") in _TOKEN_MEAN_METRICS:
                totals[k] /= tokens
        return totals | {"perf/tokens": float(batch.attention_mask[rows].sum())}

    def _clip_gradients(self) -> float:
        """Global L2 norm of the gradients over all ranks (each FSDP shard counted once); scale them down to
        cfg.grad_clip when above it. Returns the norm before clipping (inf/nan when not finite)."""
        grads = [p.grad for p in self.model.parameters() if p.grad is not None]
        local = [g.to_local() if isinstance(g, DTensor) else g for g in grads]
        dev = local[0].device if local else self.device
        sq = torch.zeros((), dtype=torch.float32, device=dev)
        for g in local:
            sq += torch.linalg.vector_norm(g, dtype=torch.float32).square()
        norm = float(all_reduce(sq).sqrt())
        if self.cfg.grad_clip > 0 and math.isfinite(norm) and norm > self.cfg.grad_clip:
            torch._foreach_mul_(local, self.cfg.grad_clip / (norm + 1e-6))
        return norm

    # ------------------------------------------------------------------------------------------------
    # weights out, checkpoints

    def state_dict_for_sync(self, to_cpu: bool = True, dtype: torch.dtype | None = None) -> dict[str, Tensor]:
        """The full (unsharded) weights with HF names, in `dtype` (default: the compute dtype), for the
        rollout engine. A collective: call on every rank. to_cpu=True: on rank 0 only (others get {});
        to_cpu=False: on every rank, on its device."""
        opts = StateDictOptions(full_state_dict=True, cpu_offload=to_cpu)
        sd = get_model_state_dict(self.model, options=opts)
        dtype = dtype or compute_dtype(self.cfg, self.device)
        sd = {k.removeprefix("lm."): v for k, v in sd.items()}
        if self.cfg.lora.enabled:  # the adapters folded in (in fp32): the plain model's weights
            sd = merge_adapters(sd, self.cfg.lora.scaling) if sd else {}
        return {k: v.to(dtype) for k, v in sd.items()}

    def _adapter_params(self) -> list[tuple[str, Tensor]]:
        """The LoRA adapters' parameters (possibly sharded) by their sync names: HF module + ".lora_A" /
        ".lora_B"."""
        return [
            (f"{name.removeprefix('lm.')}.{key}", getattr(layer, key))
            for name, layer in adapter_layers(self.model)
            for key in ("lora_A", "lora_B")
        ]

    @torch.no_grad()
    def adapters_for_sync(self, to_cpu: bool = True) -> AdapterWeights | None:
        """The LoRA adapters, whole (unsharded), named by HF module + ".lora_A" / ".lora_B", in their own
        dtype, for an engine (codefu.models.lora.AdapterWeights) and PEFT's folder. A collective: call on
        every rank. to_cpu=True: on rank 0 only (others get None)."""
        if not self.cfg.lora.enabled:
            raise RuntimeError("adapters_for_sync() without trainer.lora")
        tensors = {}
        for name, p in self._adapter_params():
            full = whole(p)  # one rank's may be the parameter itself: a copy, never a view of it
            tensors[name] = full.to("cpu" if to_cpu else full.device, copy=True)
        if to_cpu and self.rank != 0:
            return None
        return AdapterWeights(tensors, self.cfg.lora.scaling)

    @torch.no_grad()
    def share_weights(self, dtype: torch.dtype | None = None) -> SharedWeights:
        """The full weights (HF names, `dtype`, default the compute dtype) packed into ONE buffer on this
        rank's device, shared with an engine on the same GPU through CUDA IPC (codefu/models/weights.py):
        no copy through the CPU. With LoRA, only the adapters (in their dtype). A collective: call on every
        rank. The buffer lives until `drop_shared_weights` (call it once the
        engines have loaded)."""
        self._shared = self._pack_for_sync(dtype)
        return self._shared.share()

    def drop_shared_weights(self) -> None:
        self._shared = None
        self._give_back_cached_memory()  # the buffer's memory to the engine's KV cache, not our cache

    def _sync_params(
        self, dtype: torch.dtype | None = None
    ) -> tuple[list[tuple[str, Tensor]], torch.dtype, float | None]:
        """What an engine takes, by HF name, the dtype it travels in and the LoRA scaling (None: full
        weights): the full weights in `dtype` (default: the compute dtype), or with LoRA only the adapters
        in their own dtype (the engine keeps its weights)."""
        if self.cfg.lora.enabled:
            named = self._adapter_params()
            return named, named[0][1].dtype, self.cfg.lora.scaling
        named = [(k.removeprefix("lm."), p) for k, p in self.model.named_parameters()]
        return named, dtype or compute_dtype(self.cfg, self.device), None

    def _pack_for_sync(self, dtype: torch.dtype | None = None) -> PackedWeights:
        """`_sync_params` packed into one buffer on this rank's device. A collective: call on every rank."""
        named, dtype, scaling = self._sync_params(dtype)
        packed = pack_weights(named, dtype, self.device)
        packed.adapter_scaling = scaling
        return packed

    def weight_layout(self) -> tuple[FlatLayout, torch.dtype, float | None]:
        """The layout, dtype and LoRA scaling (None: full weights) of what `broadcast_weights` sends, for
        the receivers' buffers; no copy."""
        named, dtype, scaling = self._sync_params()
        return FlatLayout.of((n, p.shape) for n, p in named), dtype, scaling

    @torch.no_grad()
    def broadcast_weights(self, group: WeightBroadcast | None) -> None:
        """What `share_weights` packs, sent by rank 0 through `group` (resources.weight_transfer:
        broadcast) to the rollout workers. A collective: call on every rank (only rank 0 has the group)."""
        if group is None:  # not rank 0: take part in each gather, in pack_weights' order, keep nothing
            for _, t in self._sync_params()[0]:
                whole(t)
            return
        packed = self._pack_for_sync()
        group.send(packed.flat)
        del packed
        self._give_back_cached_memory()

    # ------------------------------------------------------------------------------------------------
    # a frozen (reference) model's weights off the GPU between its passes

    def offload_weights(self) -> dict[str, float]:
        """Free the memory of a frozen model's weights (the reference policy between its passes: the
        update on the same GPU can use it); `reload_weights`, or the next `compute_logprobs`, brings them
        back from a CPU copy (pinned on a GPU) made at the first call: they never change, so nothing is
        copied out after that. Returns the bytes freed and the seconds it took; a no-op when offloaded."""
        if not self.frozen:
            raise RuntimeError("offload_weights() on a trained worker: its weights change at every step")
        if self._weights_offloaded:
            return {}
        t0 = time.perf_counter()
        if not self._weight_storages:
            self._weight_storages = _distinct_storages(self.model)
            pin = self.device.type == "cuda"
            self._host_weights = [
                torch.empty(s.nbytes(), dtype=torch.uint8, pin_memory=pin).copy_(_bytes_of(s))
                for s in self._weight_storages
            ]
        freed = sum(s.nbytes() for s in self._weight_storages)
        for storage in self._weight_storages:
            storage.resize_(0)  # every view of it (FSDP's flat shard, the DTensor) stays, without memory
        self._give_back_cached_memory()
        self._weights_offloaded = True
        seconds = time.perf_counter() - t0
        return {"memory/reference_offloaded_gb": freed / 2**30, "timing/reference_offload_s": seconds}

    def reload_weights(self) -> dict[str, float]:
        """The inverse of `offload_weights`; a no-op when the weights are in place."""
        if not self._weights_offloaded:
            return {}
        t0 = time.perf_counter()
        for storage, host in zip(self._weight_storages, self._host_weights, strict=True):
            storage.resize_(host.numel())
            _bytes_of(storage).copy_(host, non_blocking=True)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self._weights_offloaded = False
        return {"timing/reference_reload_s": time.perf_counter() - t0}

    # ------------------------------------------------------------------------------------------------
    # the optimizer's state off the GPU while a colocated engine generates

    def _optimizer_tensors(self) -> list[Tensor]:
        """The plain tensors holding AdamW's state (a DTensor's local shard), on whatever device."""
        assert self.optimizer is not None
        out = []
        for state in self.optimizer.state.values():
            for value in state.values():
                if isinstance(value, DTensor):
                    out.append(value._local_tensor)  # the shard itself; the DTensor wrapper stays as it is
                elif torch.is_tensor(value):
                    out.append(value)
        return out

    def offload_optimizer(self) -> dict[str, float]:
        """Move AdamW's state (2 x the parameters in the master dtype: 56 GB for a 7B model in fp32) to
        pinned CPU memory, so a colocated engine's KV cache can use it; `reload_optimizer` brings it back
        (update, save and load do it themselves). Gradients are already freed after each step. Returns the
        bytes moved and the seconds it took; nothing to do off the GPU, before the first step, or twice."""
        if self.optimizer is None or self.device.type != "cuda" or self._offloaded:
            return {}
        t0 = time.perf_counter()
        moved = 0
        for t in self._optimizer_tensors():
            if t.device.type == "cuda":
                host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
                host.copy_(t, non_blocking=True)
                t.data = host
                moved += host.numel() * host.element_size()
        torch.cuda.synchronize(self.device)
        torch.cuda.empty_cache()
        self._offloaded = moved > 0
        if not moved:
            return {}  # no state yet (before the first step)
        return {"memory/optimizer_offloaded_gb": moved / 2**30, "timing/offload_s": time.perf_counter() - t0}

    def reload_optimizer(self) -> dict[str, float]:
        """The inverse of `offload_optimizer`; a no-op when nothing is offloaded."""
        if not self._offloaded:
            return {}
        t0 = time.perf_counter()
        for t in self._optimizer_tensors():
            if t.device.type == "cpu":
                t.data = t.data.to(self.device, non_blocking=True)
        torch.cuda.synchronize(self.device)
        self._offloaded = False
        return {"timing/reload_s": time.perf_counter() - t0}

    def save(
        self, root: str | Path, extra_state: dict[str, Any] | None = None, name_step: int | None = None
    ) -> str:
        """Write a resumable sharded checkpoint `root/step_<n>` (all ranks; atomic), keep the last
        cfg.keep_last. n is `name_step` (the caller's step, e.g. the training loop's) or else the number of
        optimizer steps taken. Returns its path."""
        if self.optimizer is None:
            raise RuntimeError("save() on a frozen (reference) worker: it never changes")
        self.reload_optimizer()
        lora = self.cfg.lora.enabled
        path = ckpt.save_checkpoint(
            ckpt.checkpoint_path(root, self.step if name_step is None else name_step),
            self.model,
            self.optimizer,
            self.scheduler,
            self.step,
            extra_state,
            settings=self.resume_settings(),
            # beside the resumable state, inside the atomic rename: the adapters as PEFT reads them
            write_extra=(lambda tmp: self.save_adapter(tmp / "adapter")) if lora else None,
        )
        if self.rank == 0 and self.cfg.keep_last > 0:
            ckpt.prune_checkpoints(root, self.cfg.keep_last)
        dist.barrier()
        return str(path)

    def drop_checkpoints(self, root: str | Path) -> None:
        """Delete every checkpoint under `root` (rank 0; a collective like `save`)."""
        if self.rank == 0:
            ckpt.remove_checkpoints(root)
        dist.barrier()

    def load(self, path: str | Path) -> dict[str, Any]:
        """Resume from a checkpoint directory, or from the latest one under a root; any world size.
        Returns the caller's extra_state."""
        if self.optimizer is None:
            raise RuntimeError("load() on a frozen (reference) worker")
        self.reload_optimizer()
        path = Path(path)
        if not ckpt.is_checkpoint(path):
            latest = ckpt.latest_checkpoint(path)
            if latest is None:
                raise FileNotFoundError(f"no checkpoint in {path}")
            path = latest
        self.model.reshard()
        self.step, extra = ckpt.load_checkpoint(
            path, self.model, self.optimizer, self.scheduler, self.resume_settings()
        )
        return extra

    def resume_settings(self) -> dict[str, Any]:
        """What a checkpoint records beyond its tensors and a resume must give the same (by config key):
        with LoRA the base model (the checkpoint holds only the adapters) and the adapters' settings (alpha
        is in no tensor's shape); nothing for full fine-tuning, whose checkpoint holds every weight."""
        if not self.cfg.lora.enabled:
            return {}
        lora, model = self.cfg.lora, self.cfg.model
        if model and Path(model).expanduser().exists():  # a resume from another folder: the same model
            model = str(Path(model).expanduser().resolve())
        return {
            "trainer.model": model,
            "trainer.gguf_file": self.cfg.gguf_file,
            "trainer.lora.rank": lora.rank,
            "trainer.lora.alpha": lora.alpha,
            "trainer.lora.dropout": lora.dropout,
            "trainer.lora.target_modules": sorted(lora.target_modules),
        }

    def export_hf(self, path: str | Path, dtype: torch.dtype | None = None) -> str:
        """An HF directory (config, model.safetensors, tokenizer) that plain `from_pretrained` loads. dtype
        defaults to the compute dtype (bf16 on GPU). With trainer.lora.export adapter, PEFT's adapter folder
        instead (`save_adapter`). Both carry the export marker. A collective: call on every rank; rank 0
        writes."""
        if self.cfg.lora.enabled and self.cfg.lora.export == "adapter":
            self.save_adapter(path)  # PEFT's folder (no model: eval merges it into its base)
            if self.rank == 0:
                ckpt.mark_adapter_export(path)  # a finished run's, as a model export's
            dist.barrier()
            return str(path)
        sd = self.state_dict_for_sync(to_cpu=True, dtype=dtype)
        if self.rank == 0:
            ckpt.export_hf(path, sd, self.hf_config, self.tokenizer)
        dist.barrier()
        return str(path)

    def save_adapter(self, path: str | Path) -> str:
        """The LoRA adapters as PEFT's adapter folder (`peft.PeftModel.from_pretrained(base, path)` loads
        it on trainer.model). A collective: call on every rank; rank 0 writes."""
        adapters = self.adapters_for_sync(to_cpu=True)
        if self.rank == 0:
            assert adapters is not None
            save_peft_adapter(path, adapters.tensors, self.cfg.lora, self.cfg.model or None)
        dist.barrier()
        return str(path)


def _distinct_storages(model: nn.Module) -> list[torch.UntypedStorage]:
    """The storages behind a model's parameters (a DTensor's local shard), each once."""
    seen: dict[int, torch.UntypedStorage] = {}
    for p in model.parameters():
        local = p._local_tensor if isinstance(p, DTensor) else p.data
        storage = local.untyped_storage()
        seen.setdefault(storage.data_ptr(), storage)
    return list(seen.values())


def _bytes_of(storage: torch.UntypedStorage) -> Tensor:
    """A uint8 tensor over all of `storage` (for copying it whole, whatever its dtype and views)."""
    return torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)
