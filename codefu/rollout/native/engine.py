"""`NativeEngine`: our own rollout engine (nano-vllm style) on a paged KV cache with continuous batching.

    engine = NativeEngine.from_config(EngineConfig(model="path", engine="native", device="cuda"))
    completions = engine.generate(prompt_ids, SamplingParams(n=8, temperature=1.0, seed=step))
    engine.load_weights(trainer_state, version=1)  # in place, HF names; tokens sampled after carry version 1
    engine.update_weights_in_flight(state, 2)      # from another thread while generate_stream runs
    engine.release_memory()                  # colocated trainer's turn: the KV cache is freed
    engine.last_stats                        # prefill tokens, decode steps, preemptions, seconds, ...

One `generate` = add every prompt as a cohort of n sequences, then `step()` until all are done
(`generate_stream` with a `FollowUps` inbox also adds, between steps, the prompts put there meanwhile).
A step is a prefill (newly admitted cohorts, each prompt run once) or a decode (every running sequence,
one token); see scheduler.py. The KV blocks of finished sequences stay in a prefix cache (kv_cache.py)
until their memory is needed or new weights arrive: a prompt that begins with the tokens of an earlier
sequence (a self-repair turn: the conversation so far, then the feedback) is prefilled from where they
end.
Sampling runs on the device with a seeded generator (codefu.rollout.sampling), so the
same seed, prompts and engine settings give the same samples. Decode steps replay CUDA graphs on GPU.

Weights updated in flight (asynchronous RL, PipelineRL style): `update_weights_in_flight`, from another
thread, hands new weights to a running `generate_stream`, which loads them at its next step boundary and
goes on: the running sequences keep their tokens and their K/V (written by the older weights: stale, as
PipelineRL keeps them; recomputing them would cost a prefill of every running context), and each token
carries the version of the weights that sampled it (`Completion.token_versions`). The weights are copied
in place (NativeCausalLM.load_weights: same storage, same addresses), so the captured CUDA graphs, which
read the weights through their addresses, stay valid and run the new weights.

The host runs one step ahead of the device: `step()` schedules and launches step t+1, and only then
waits for step t's sampled tokens and takes them in, so the scheduling and input building of the next
step overlap the device's work (on a GPU that host work was a fifth of a decode step). Step t+1 reads its
input tokens from a device buffer that step t's sampler wrote (one slot per running sequence), and each
sequence holds a placeholder for its token in flight. The price: a sequence that samples a stop token at
step t runs one extra (discarded) decode at step t+1; outputs are unchanged (the samples of a step depend
on its batch only through the random draws, so a seed gives the same samples for the same settings).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from codefu.models import DTYPE_BY_NAME, resolve_dtype_name
from codefu.rollout.engine import EngineConfig, eos_ids, in_prompt_order, load_for_engine
from codefu.rollout.follow_ups import FollowUp, FollowUps
from codefu.rollout.native.attention import AttentionMetadata
from codefu.rollout.native.cuda_graphs import DecodeGraphs
from codefu.rollout.native.host_tables import SHARED_GROUP_MAX, HostBlockTables, shared_prefix_groups
from codefu.rollout.native.kv_cache import BlockAllocator, KVCache, PrefixCache
from codefu.rollout.native.model import NativeCausalLM
from codefu.rollout.native.scheduler import Cohort, DecodeStep, PrefillStep, Scheduler, Sequence
from codefu.rollout.sampling import make_generator, sample_step
from codefu.rollout.types import Completion, SamplingParams

log = logging.getLogger(__name__)

#: rows of a decode step's packed input before the block tables (cuda_graphs.py): token slots, positions,
#: K/V slots, context lengths, shared-prefix lengths, shared-prefix group sizes
HEADER_ROWS = 6
PENDING = -1  # a sequence's token still in flight (sampled on the device, not yet read by the host)
DEFAULT_MAX_MODEL_LEN = 32768  # when the config does not say: the model's own limit, capped here


def default_max_model_len(hf_config: Any) -> int:
    """The prompt + response cap when rollout.max_model_len is unset (every engine uses it)."""
    return min(hf_config.max_position_embeddings, DEFAULT_MAX_MODEL_LEN)


MIN_PREFILL_TOKENS = 8192  # token budget of one prefill step (at least max_model_len: no chunked prefill)


@dataclass
class LaunchedStep:
    """A step whose sampled tokens are on their way to the host."""

    seqs: list[Sequence]
    indices: list[int]  # where each sequence's token goes in seq.tokens (its placeholder)
    host: Tensor  # (2, >= len(seqs)) float64: tokens (exact in float64), log-probs; pinned on CUDA
    ready: torch.cuda.Event | None  # recorded after the copy (None on CPU: the copy was synchronous)
    is_prefill: bool


@dataclass
class HandedOver:
    """Weights handed to the generating thread (`update_weights_in_flight`); `loaded` is set once it tried."""

    state: dict[str, Tensor] | None
    version: int | None
    loaded: threading.Event
    error: BaseException | None = None


class NativeEngine:
    """A `RolloutEngine` on `NativeCausalLM` (Llama / Qwen2 families).

    hf_config: the transformers config; state: HF-named weights; tokenizer: for decoding and EOS (may be
    None); generation_config: its eos_token_id also stops (as in TransformersEngine). `config` gives the
    device, dtype and the native knobs (block_size, gpu_memory_fraction, kv_cache_tokens, max_num_seqs,
    max_model_len, cuda_graphs)."""

    def __init__(
        self,
        config: EngineConfig,
        hf_config: Any,
        state: dict[str, Tensor],
        tokenizer: Any = None,
        generation_config: Any = None,
    ) -> None:
        if config.dtype not in (*DTYPE_BY_NAME, "auto"):
            raise ValueError(f"dtype must be auto or one of {sorted(DTYPE_BY_NAME)}, got {config.dtype!r}")
        for name in ("block_size", "max_num_seqs", "kv_cache_tokens"):
            if getattr(config, name) < 1:
                raise ValueError(f"EngineConfig.{name} must be >= 1, got {getattr(config, name)}")
        if not 0 < config.gpu_memory_fraction <= 1:
            raise ValueError(
                f"EngineConfig.gpu_memory_fraction must be in (0, 1], got {config.gpu_memory_fraction}"
            )
        self.config = config
        self.device = torch.device(config.device)
        self.dtype = DTYPE_BY_NAME[resolve_dtype_name(config.dtype, config.device)]
        self.tokenizer = tokenizer
        self.block_size = config.block_size
        # groups of sequences sharing a prompt's pages, found on the host each decode step (rows 4-5 of its
        # packed input, read only then); only the Triton kernel uses them (the torch path needs no groups)
        self.shared_prefix = config.shared_prefix_attention
        requested = config.max_model_len or default_max_model_len(hf_config)
        self.model = NativeCausalLM.build(hf_config, self.dtype, self.device, max_len=requested)
        self.model.load_weights(state)
        self.version = 0  # of the weights held (load_weights): every token sampled carries it
        # weights handed over while generate_stream runs (see update_weights_in_flight):
        # `_loads_wait_for_a_step` says whether the loop takes them between its steps (else the caller
        # loads them at once)
        self._weights_lock = threading.Lock()
        self._handed_over: list[HandedOver] = []
        self._loads_wait_for_a_step = False
        self._loop_thread: int | None = None  # the thread that runs the stream's steps
        self._seqs: list[Sequence] = []
        self.eos_ids = eos_ids(generation_config, hf_config, tokenizer)
        self.max_prefill_tokens = max(requested, MIN_PREFILL_TOKENS)
        self._activation_peak: int | None = None  # measured when the cache is sized by the memory budget
        self.num_blocks = self.planned_blocks = self._plan_cache_blocks()
        capacity = self.num_blocks * self.block_size
        if config.max_model_len is not None and config.max_model_len > capacity:
            raise ValueError(
                f"max_model_len={config.max_model_len} does not fit the KV cache ({capacity} tokens): "
                "raise gpu_memory_fraction (GPU) or kv_cache_tokens (CPU), or lower max_model_len"
            )
        self.max_model_len = min(requested, capacity)
        self.max_blocks_per_seq = -(-self.max_model_len // self.block_size)
        self.cache: KVCache | None = None
        self.graphs: DecodeGraphs | None = None
        # the last sampled token of each running sequence, by its slot (its host block-table row); the
        # extra slot feeds the padded columns of a graph's batch
        self.last_tokens = torch.zeros(config.max_num_seqs + 1, dtype=torch.long, device=self.device)
        pin = self.device.type == "cuda"
        rows = HEADER_ROWS + self.max_blocks_per_seq
        # two of each, used in turn: a buffer is refilled only after the step that used it has finished
        batch = config.max_num_seqs
        self._inputs = [torch.empty(rows * batch, dtype=torch.long, pin_memory=pin) for _ in "ab"]
        self._outputs = [torch.empty(2 * batch, dtype=torch.float64, pin_memory=pin) for _ in "ab"]
        self._turn = 0
        self._in_flight: LaunchedStep | None = None
        self.last_stats: dict[str, float] = {}
        self.allocator: BlockAllocator | None = None  # with the cache: made by resume_memory
        self.resume_memory()
        log.info(
            "native engine: %d KV blocks x %d tokens, max_model_len %d, max_num_seqs %d, cuda graphs %s",
            self.num_blocks,
            self.block_size,
            self.max_model_len,
            config.max_num_seqs,
            self.graphs is not None,
        )

    # ---- building -------------------------------------------------------------------------------
    @classmethod
    def from_config(cls, config: EngineConfig) -> NativeEngine:
        """Load the model with transformers once (HF folder, .gguf, hub id), take its config and weights."""
        hf_model, tokenizer = load_for_engine(config)
        return cls.from_hf_model(hf_model, tokenizer, config)

    @classmethod
    def from_hf_model(cls, hf_model: Any, tokenizer: Any, config: EngineConfig) -> NativeEngine:
        """From a transformers model object (its weights are copied; the object can be dropped after)."""
        return cls(
            config,
            hf_model.config,
            hf_model.state_dict(),
            tokenizer,
            getattr(hf_model, "generation_config", None),
        )

    def _plan_cache_blocks(self) -> int:
        """KV blocks: `kv_cache_tokens` on CPU; on GPU what `gpu_memory_fraction` of the total memory leaves
        after what is in use now (weights, other processes) and the measured peak of a prefill step."""
        if self.device.type != "cuda":
            return -(-self.config.kv_cache_tokens // self.block_size)
        self._activation_peak = self._profile_peak()
        return self._blocks_that_fit()

    def _blocks_that_fit(self) -> int:
        """KV blocks that `gpu_memory_fraction` of the GPU's total memory leaves after everything in use now
        (by every process: a colocated trainer's weights and optimizer state count) and the prefill peak."""
        spec = self.model.spec
        per_block = KVCache.bytes_per_block(
            spec.num_layers, self.block_size, spec.num_kv_heads, spec.head_dim, self.dtype
        )
        activation = self._activation_peak or 0
        free, total = torch.cuda.mem_get_info(self.device)
        budget = total * self.config.gpu_memory_fraction - (total - free) - activation
        blocks = int(budget // per_block) - 1  # one scratch block
        if blocks < 1:
            raise RuntimeError(
                f"native engine: no GPU memory left for the KV cache ({(total - free) / 2**30:.1f} GiB used, "
                f"prefill peak {activation / 2**30:.1f} GiB, fraction {self.config.gpu_memory_fraction}): "
                "raise gpu_memory_fraction or lower max_model_len"
            )
        return blocks

    @torch.no_grad()
    def _profile_peak(self) -> int:
        """Bytes a full prefill step and the sampler on max_num_seqs rows take on top of the weights."""
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(self.device)
        before = torch.cuda.memory_allocated(self.device)
        spec = self.model.spec
        scratch = KVCache(
            spec.num_layers, 1, self.block_size, spec.num_kv_heads, spec.head_dim, self.dtype, self.device
        )
        self._attach(scratch)
        tokens = self.max_prefill_tokens
        ids = torch.zeros(tokens, dtype=torch.long, device=self.device)
        positions = torch.arange(tokens, device=self.device) % self.model.rotary.max_len
        meta = AttentionMetadata(True, positions % self.block_size)
        hidden = self.model(ids, positions, meta)
        logits = self.model.logits(hidden[-1:]).expand(self.config.max_num_seqs, -1).contiguous()
        del hidden
        generator = make_generator(self.device, 0)
        sample_step(logits, SamplingParams(temperature=0.7, top_p=0.9, top_k=50), generator)
        del logits
        self._attach(None)
        peak = torch.cuda.max_memory_allocated(self.device) - before
        torch.cuda.empty_cache()
        return peak

    # ---- memory (colocation) --------------------------------------------------------------------
    def release_memory(self, weights: bool = False) -> None:
        """Free the KV cache and the CUDA graphs that point into it; with `weights`, the weights too (a
        colocated trainer's next sync fills them again: `generate` refuses to run before)."""
        self.graphs = None
        self._attach(None)
        self.cache = None
        if weights:
            self.model.drop_weights()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def resume_memory(self) -> None:
        """Allocate the KV cache again (the size planned at build time, or less if less fits now); each
        CUDA graph is captured again at its first use (they hold the cache's addresses)."""
        if self.model.weights_dropped:
            raise RuntimeError(
                "native engine: its weights were released (release_memory(weights=True)) and not loaded "
                "again: load_weights before generate"
            )
        if self.cache is not None:
            return
        if self._activation_peak is not None:
            # a colocated trainer may hold more now than when the engine was built (optimizer state is
            # created at its first step): take what fits, never more than planned, instead of an OOM
            fits = min(self._blocks_that_fit(), self.planned_blocks)
            if fits * self.block_size < self.max_model_len:
                raise RuntimeError(
                    f"native engine: the KV cache no longer fits one sequence of max_model_len "
                    f"{self.max_model_len} ({fits} blocks fit now, {self.planned_blocks} at build time): "
                    "something else on this GPU holds more memory; lower max_model_len or the "
                    "trainer's footprint, or raise gpu_memory_fraction"
                )
            if abs(fits - self.num_blocks) > 0.05 * self.num_blocks:  # small drifts are not news
                log.warning(
                    "native engine: KV cache %d -> %d blocks (GPU memory in use by others changed)",
                    self.num_blocks,
                    fits,
                )
            self.num_blocks = fits
        spec = self.model.spec
        self._pad = self._pad_column().numpy()  # its scratch block id is num_blocks: set once per cache
        self.cache = KVCache(
            spec.num_layers,
            self.num_blocks,
            self.block_size,
            spec.num_kv_heads,
            spec.head_dim,
            self.dtype,
            self.device,
        )
        self._attach(self.cache)
        self.allocator = self._new_allocator()
        if self.device.type == "cuda" and self.config.cuda_graphs:
            self.graphs = self._new_graphs()

    def _new_graphs(self) -> DecodeGraphs:
        with torch.no_grad():
            return DecodeGraphs(
                self._decode_forward, self.config.max_num_seqs, torch.from_numpy(self._pad), self.device
            )

    def _new_allocator(self) -> BlockAllocator:
        prefix_cache = PrefixCache(self.block_size) if self.config.prefix_caching else None
        return BlockAllocator(self.num_blocks, prefix_cache)

    def _attach(self, cache: KVCache | None) -> None:
        for i, layer in enumerate(self.model.layers):
            layer.self_attn.k_cache, layer.self_attn.v_cache = cache.layer(i) if cache else (None, None)

    # ---- the interface --------------------------------------------------------------------------
    def generate(self, prompts: list[list[int]], sampling: SamplingParams) -> list[Completion]:
        """len(prompts) * sampling.n completions, result[i * n + j] = sample j of prompt i."""
        return in_prompt_order(self.generate_stream(prompts, sampling))

    def generate_stream(
        self, prompts: list[list[int]], sampling: SamplingParams, follow_ups: FollowUps | None = None
    ) -> Iterator[list[Completion]]:
        """The completions of `generate`, each yielded at the step its last token came in (in batches of
        the sequences that finished at one step): the judge can start on them while the rest decode.

        With `follow_ups`, prompts put there while this runs join the running batch (one sample each,
        admitted like any waiting work; a self-repair turn finds the conversation so far in the prefix
        cache), and the stream ends only when the inbox is closed and everything in it is done.

        Weights handed over meanwhile (`update_weights_in_flight`, another thread) load between two steps;
        the tokens sampled after carry their version (see load_weights)."""
        for i, p in enumerate(prompts):
            self._check_prompt(p, f"prompt {i}")
        self._take_weights_between_steps(True)  # weights handed over now wait for a step boundary
        try:
            t0 = time.perf_counter()
            self.resume_memory()
            resume_s = time.perf_counter() - t0  # 0 unless the cache was released: its allocation
            self.start(prompts, sampling)
            self.last_stats["resume_s"] = resume_s
            finishing: list[Sequence] = []  # finished, the last token perhaps still on its way to the host
            taking = follow_ups is not None  # until the inbox closes
            while True:
                if follow_ups is not None and follow_ups.aborted:
                    return  # the caller gave up: what runs is dropped (the next start() resets the blocks)
                if follow_ups is not None and follow_ups.interrupted:
                    self.add(follow_ups.take(wait=False) or [])  # put, not yet taken: handed back too
                    yield self._interrupted(finishing)  # (the next start() resets the blocks)
                    return
                if taking:
                    idle = self.done  # nothing to do until one comes: new weights load meanwhile
                    if idle:
                        self._take_weights_between_steps(False)
                    arrived = follow_ups.take(wait=idle)
                    if idle:
                        self._take_weights_between_steps(True)
                    if arrived is None:
                        taking = False  # closed: what is running is all there is
                    else:
                        self.add(arrived)
                if self.done:
                    if not taking:
                        break
                    continue
                if self._handed_over:  # read without the lock: a list just handed over waits one step
                    self._load_handed_over()
                self.step()
                finishing += self.scheduler.finished
                self.scheduler.finished.clear()
                done = [s for s in finishing if _complete(s)]
                if done:
                    finishing = [s for s in finishing if not _complete(s)]
                    yield [self._completion(s) for s in done]
                    self._loop_thread = threading.get_ident()  # the consumer's: it may change between yields
        finally:
            self._take_weights_between_steps(False)  # what is handed over from now on loads at once

    def _interrupted(self, finishing: list[Sequence]) -> list[Completion]:
        """Every sequence not yet handed out, at an interrupt: the step in flight taken in first (no token
        is left pending), the finished ones as they are, the others with finish_reason "interrupted" and
        the tokens they have (a preempted or waiting one perhaps none)."""
        if self._in_flight is not None:
            previous, self._in_flight = self._in_flight, None
            self._take_in(previous)
        finishing = finishing + self.scheduler.finished
        self.scheduler.finished.clear()
        out = [self._completion(s) for s in finishing]
        for s in (s for s in self._seqs if s.finish_reason is None):
            c = self._completion(s)
            c.finish_reason = "interrupted"
            out.append(c)
        self.scheduler.waiting.clear()
        self.scheduler.running.clear()
        return out

    def _check_prompt(self, prompt: list[int], name: str) -> None:
        if len(prompt) == 0:
            raise ValueError(f"{name} is empty")
        if len(prompt) >= self.max_model_len:
            raise ValueError(
                f"{name} has {len(prompt)} tokens: it cannot fit even alone (max_model_len "
                f"{self.max_model_len}, KV cache {self.num_blocks * self.block_size} tokens)"
            )

    def _completion(self, s: Sequence) -> Completion:
        return Completion(
            prompt_index=s.prompt_index,
            sample_index=s.sample_index,
            prompt_ids=list(s.prompt),
            token_ids=s.tokens,
            text=self._detokenize(s.tokens),
            logprobs=s.logprobs,
            finish_reason="stop" if s.finish_reason == "stop" else "length",
            token_versions=s.versions,
        )

    def load_weights(self, state: dict[str, Tensor] | None, version: int | None = None) -> None:
        """Copy HF-named tensors into the model in place (see NativeCausalLM.load_weights); tokens sampled
        from now on carry `version` (None: the version stays). `state` None: the weights held are
        `version` too (only the label changes; the prefix cache stays valid).

        Only between steps: when no generation runs, or on the thread that runs it (a stream paused at a
        yield); from any other thread use `update_weights_in_flight`. Within a generation the step in
        flight is taken in first (its tokens were sampled by the old weights, and carry their version);
        the running sequences keep their K/V blocks, marked stale; the prefix cache forgets every block,
        also those running sequences hold: a prompt admitted later must not start from K/V of the old
        weights (a stale sequence's blocks do not go back to the cache when it ends)."""
        if state is not None:
            if self._in_flight is not None:
                previous, self._in_flight = self._in_flight, None
                self._take_in(previous)
            layout = self.model.adapter_layout_version
            self.model.load_weights(state)
            if self.model.adapter_layout_version != layout and self.graphs is not None:
                # LoRA adapters came, went or changed shape: graphs captured without them would replay
                # the old forward; new ones are captured per batch size at their first use
                self.graphs = self._new_graphs()
            for seq in self._seqs:
                seq.stale_kv = bool(seq.block_table)  # running: its K/V are the old weights'
            if self.allocator is not None:
                self.allocator.drop_cache()  # K/V of the old weights
        if version is not None:
            self.version = version

    def update_weights_in_flight(self, state: dict[str, Tensor] | None, version: int | None = None) -> None:
        """`load_weights` from any thread, also while `generate_stream` runs on another: the running
        stream loads them at its next step boundary and goes on with them (see load_weights); this call
        returns once they are loaded (and raises what loading raised). With no generation running, or
        from the thread that runs it, they load at once."""
        with self._weights_lock:
            if not self._loads_wait_for_a_step or threading.get_ident() == self._loop_thread:
                # nothing runs, or the stream that runs is paused at a yield on this very thread: a step
                # boundary (waiting for itself would never end)
                self.load_weights(state, version)
                return
            handed = HandedOver(state, version, threading.Event())
            self._handed_over.append(handed)
        handed.loaded.wait()
        if handed.error is not None:
            raise handed.error

    @property
    def weights_pending(self) -> bool:
        """Weights were handed over (update_weights_in_flight) and wait for the next step boundary."""
        return bool(self._handed_over)

    def _take_weights_between_steps(self, generating: bool) -> None:
        """Whether this thread (the stream's) loads weights handed over between its steps (`generating`),
        or their callers load them at once (no step will run until this thread says so again). What
        was handed over already is loaded now."""
        with self._weights_lock:
            self._loads_wait_for_a_step = generating
            self._loop_thread = threading.get_ident() if generating else None
            self._load_handed_over_locked()

    def _load_handed_over(self) -> None:
        with self._weights_lock:
            self._load_handed_over_locked()

    def _load_handed_over_locked(self) -> None:
        """Load what was handed over, in order; each caller hears how its load went."""
        handed, self._handed_over = self._handed_over, []
        for h in handed:
            try:
                self.load_weights(h.state, h.version)
            except Exception as error:  # the caller's to raise: the stream goes on with what it has
                h.error = error
            finally:
                h.loaded.set()

    # ---- stepping (public so tests can look between steps) ---------------------------------------
    def start(self, prompts: list[list[int]], sampling: SamplingParams) -> None:
        """Queue every prompt as one cohort of n sequences; reset the stats."""
        self.sampling = sampling
        self.generator = make_generator(self.device, sampling.seed)
        self.stop_ids = self.eos_ids | set(sampling.stop_token_ids)
        assert self.allocator is not None, "resume_memory() first"
        if any(self.allocator.refcount):  # an earlier call stopped midway: its blocks are not coming back
            self.allocator = self._new_allocator()
        self.scheduler = Scheduler(
            self.allocator, self.block_size, self.config.max_num_seqs, self.max_prefill_tokens
        )
        self.host_tables = HostBlockTables(self.config.max_num_seqs, self.max_blocks_per_seq, self.num_blocks)
        self._in_flight = None
        n = sampling.n
        self._seqs = [Sequence(i * n + j, i, j, list(p)) for i, p in enumerate(prompts) for j in range(n)]
        for i in range(len(prompts)):
            self.scheduler.add(Cohort(self._seqs[i * n : (i + 1) * n]))
        self.last_stats = dict.fromkeys(
            ["prefill_tokens", "cached_tokens", "decode_steps", "decode_batch_sum", "decode_context_sum",
             "decode_shared_tokens", "preemptions", "prefill_s", "decode_s", "decode_wait_s",
             "graph_capture_s", "generated_tokens", "tokens_per_s"],
            0.0,
        )  # fmt: skip
        self.last_stats["kv_cache_tokens"] = float(self.num_blocks * self.block_size)

    def add(self, follow_ups: list[FollowUp]) -> None:
        """Queue prompts that arrived after `start`, one sequence each (prompt_index: the follow-up's)."""
        for f in follow_ups:
            if f.response is not None and f.response.prompt_ids != f.prompt:
                raise ValueError(f"follow-up {f.index}: the response it continues is not of its prompt")
            so_far = [] if f.response is None else f.response.token_ids
            self._check_prompt(f.prompt + so_far, f"follow-up {f.index}")
        for f in follow_ups:
            seq = Sequence(len(self._seqs), f.index, 0, list(f.prompt))
            if f.response is not None:  # an interrupted sample, prefilled with what it wrote (recomputed)
                r = f.response
                seq.tokens, seq.logprobs = list(r.token_ids), list(r.logprobs)
                seq.versions = list(r.token_versions or [r.policy_version or 0] * len(r.token_ids))
            self._seqs.append(seq)
            self.scheduler.add(Cohort([seq]), first=f.first)

    @property
    def done(self) -> bool:
        """Nothing waiting, running or in flight."""
        return self.scheduler.done and self._in_flight is None

    @torch.no_grad()
    def step(self) -> None:
        """Schedule and launch the next step (if any), then take in the previous step's tokens."""
        t0 = time.perf_counter()
        launched = None
        context = 0
        if not self.scheduler.done:
            work = self.scheduler.schedule()
            if isinstance(work, PrefillStep):  # tokens prefilled, counted before the placeholders
                context = sum(g.length - g.cached for g in work.cohorts)
                self.last_stats["cached_tokens"] += sum(g.cached for g in work.cohorts)
            launched = self._launch(work)
        previous, self._in_flight = self._in_flight, launched
        t_wait = time.perf_counter()
        if previous is not None:
            self._take_in(previous)
        wait = time.perf_counter() - t_wait  # mostly the device finishing `previous`
        self._account(launched, previous, context, time.perf_counter() - t0, wait)

    # ---- internals -------------------------------------------------------------------------------
    def _launch(self, work: PrefillStep | DecodeStep) -> LaunchedStep:
        """Run the forward and the sampler (asynchronously on a GPU), start the copy of the tokens to the
        host, and give each sequence a placeholder; sequences that reach a length limit finish now."""
        if isinstance(work, PrefillStep):
            seqs, slots, logits = self._prefill(work)
        else:
            seqs, slots, logits = self._decode(work)
        tokens, logprobs = sample_step(logits, self.sampling, self.generator)
        self.last_tokens[slots] = tokens  # the next step's inputs, without a trip through the host
        host = self._outputs[self._turn][: 2 * len(seqs)].view(2, len(seqs))  # contiguous (see _decode)
        self._turn ^= 1
        host.copy_(torch.stack([tokens.double(), logprobs.double()]), non_blocking=True)
        ready = None
        if self.device.type == "cuda":
            ready = torch.cuda.Event()
            ready.record()
        indices = []
        for seq in seqs:
            indices.append(len(seq.tokens))
            seq.tokens.append(PENDING)
            seq.logprobs.append(math.nan)
            seq.versions.append(self.version)  # the weights this launch ran (loads wait for a boundary)
            if len(seq.tokens) >= self.sampling.max_new_tokens or seq.num_tokens >= self.max_model_len:
                self.scheduler.finish(seq, "length")
        return LaunchedStep(seqs, indices, host, ready, isinstance(work, PrefillStep))

    def _take_in(self, step: LaunchedStep) -> None:
        """Wait for a launched step's tokens; fill the placeholders; finish sequences that stopped."""
        if step.ready is not None:
            step.ready.synchronize()
        tokens, logprobs = step.host.tolist()
        generated = 0
        for seq, index, token, logprob in zip(step.seqs, step.indices, tokens, logprobs, strict=True):
            if index >= len(seq.tokens):  # cut off: the sequence stopped at an earlier token
                continue
            token = int(token)
            seq.tokens[index], seq.logprobs[index] = token, logprob
            generated += 1
            if token in self.stop_ids:
                # a token launched after the stop
                del seq.tokens[index + 1 :], seq.logprobs[index + 1 :], seq.versions[index + 1 :]
                self.scheduler.finish(seq, "stop")
        self.last_stats["generated_tokens"] += generated

    def _prefill(self, work: PrefillStep) -> tuple[list[Sequence], Tensor, Tensor]:
        """Run each cohort's prefix once, from its first token the prefix cache did not have; every
        sequence of a cohort samples from its last position."""
        ids, positions, slots, pad_index, last = [], [], [], [], []
        key_slots, key_pad_index = [], []
        width = max(g.length - g.cached for g in work.cohorts)
        key_len = max(g.length for g in work.cohorts)
        after_cached = any(g.cached for g in work.cohorts)
        bs = self.block_size
        for row, cohort in enumerate(work.cohorts):
            prefix, table, start = cohort.prefix, cohort.seqs[0].block_table, cohort.cached
            row_slots = [table[p // bs] * bs + p % bs for p in range(len(prefix))]
            ids += prefix[start:]
            positions += range(start, len(prefix))
            slots += row_slots[start:]
            pad_index += range(row * width, row * width + len(prefix) - start)
            last.append(len(ids) - 1)
            if after_cached:
                key_slots += row_slots
                key_pad_index += range(row * key_len, row * key_len + len(prefix))
        # a preempted sequence waits at least one step, by which time its token in flight was taken in
        assert PENDING not in ids, "a prefill with a token still in flight"
        dev = self.device
        batch = len(work.cohorts)
        padded = batch > 1 or after_cached
        meta = AttentionMetadata(
            is_prefill=True,
            slot_mapping=torch.tensor(slots, dtype=torch.long).to(dev),
            pad_index=torch.tensor(pad_index, dtype=torch.long).to(dev) if padded else None,
            batch=batch,
            max_len=width,
        )
        if after_cached:
            # query column j of a row that starts at position s is position s + j: it sees keys 0..s + j
            query_pos = torch.tensor([g.cached for g in work.cohorts])[:, None] + torch.arange(width)[None, :]
            meta.key_mask = (torch.arange(key_len)[None, None, :] <= query_pos[:, :, None])[:, None].to(dev)
            meta.key_slots = torch.tensor(key_slots, dtype=torch.long).to(dev)
            meta.key_pad_index = torch.tensor(key_pad_index, dtype=torch.long).to(dev)
            meta.key_len = key_len
        hidden = self.model(torch.tensor(ids).to(dev), torch.tensor(positions).to(dev), meta)
        assert self.cache is not None
        self.cache.copy_blocks([s for s, _ in work.copies], [d for _, d in work.copies])
        logits = self.model.logits(hidden[torch.tensor(last).to(dev)])  # (cohorts, V)
        counts = torch.tensor([len(g.seqs) for g in work.cohorts]).to(dev)
        seqs = [s for g in work.cohorts for s in g.seqs]
        live = {s.seq_id for s in self.scheduler.running}
        token_slots = torch.tensor(self.host_tables.rows(seqs, live)).to(dev)
        return seqs, token_slots, logits.repeat_interleave(counts, dim=0, output_size=len(seqs))

    def _decode(self, work: DecodeStep) -> tuple[list[Sequence], Tensor, Tensor]:
        """One token per running sequence: the graph of the batch's bucket, or the eager forward. The
        inputs go to the device from a pinned buffer without waiting for the device (which may still
        run the previous step)."""
        seqs = work.seqs
        assert seqs, "decode step with nothing running"
        bucket = self.graphs.bucket(len(seqs)) if self.graphs is not None else None
        # block-table width: this batch's longest table (a graph's buffer keeps stale ids past it, which
        # attention ignores: it reads only context_lens tokens)
        n, width = len(seqs), max(len(s.block_table) for s in seqs)
        # contiguous: a strided pinned slice is copied through a pageable temporary, and such a copy
        # makes the host wait for the device to finish everything queued before it
        cols = bucket or n
        packed = self._inputs[self._turn][: (HEADER_ROWS + width) * cols].view(HEADER_ROWS + width, cols)
        packed_np = packed.numpy()
        packed_np[:, n:] = self._pad[: HEADER_ROWS + width, None]
        pos = np.fromiter((s.num_tokens - 1 for s in seqs), dtype=np.int64, count=n)
        rows, tables = self.host_tables.gather(seqs, width)  # (n, width)
        packed_np[0, :n] = rows  # each sequence's slot in last_tokens: its input token is there
        packed_np[1, :n] = pos
        packed_np[2, :n] = (
            tables[np.arange(n), pos // self.block_size] * self.block_size + pos % self.block_size
        )
        packed_np[3, :n] = pos + 1
        if self.shared_prefix:
            shared, sizes = shared_prefix_groups(tables, pos + 1, self.block_size, SHARED_GROUP_MAX)
            packed_np[4, :n], packed_np[5, :n] = shared, sizes
            # context-token reads avoided: a group of n sharing S tokens reads them once, not n times
            self.last_stats["decode_shared_tokens"] += float(np.dot(np.maximum(sizes - 1, 0), shared))
        packed_np[HEADER_ROWS:, :n] = tables.T
        if bucket is not None:
            assert self.graphs is not None
            captured = self.graphs.capture_s
            hidden = self.graphs.run(packed, len(seqs))
            self.last_stats["graph_capture_s"] += self.graphs.capture_s - captured
            token_slots = self.graphs.packed[0, :n]
        else:
            on_device = packed.to(self.device, non_blocking=True)
            hidden = self._decode_forward(on_device)
            token_slots = on_device[0, :n]
        # the lm_head runs outside the graphs: (bucket, V) fp32 logits kept per graph would cost GBs
        return seqs, token_slots, self.model.logits(hidden)

    def _decode_forward(self, packed: Tensor) -> Tensor:
        """packed [HEADER_ROWS + W, B] (see cuda_graphs.py; row 0: token slots) -> final hidden states
        [B, hidden]. No host reads, so it can be captured in a CUDA graph."""
        meta = AttentionMetadata(
            is_prefill=False,
            slot_mapping=packed[2],
            block_tables=packed[HEADER_ROWS:].t().to(torch.int32, memory_format=torch.contiguous_format),
            context_lens=packed[3].to(torch.int32),
        )
        if self.shared_prefix:
            meta.shared_lens, meta.group_sizes = packed[4].to(torch.int32), packed[5].to(torch.int32)
        return self.model(self.last_tokens[packed[0]], packed[1], meta)

    def _pad_column(self) -> Tensor:
        """A padded decode column [HEADER_ROWS + max blocks per sequence]: the spare token slot at position
        0, written to and reading the scratch block, in no shared-prefix group (a narrower batch takes its
        first HEADER_ROWS + width rows)."""
        scratch = self.num_blocks  # KVCache's extra block
        column = torch.full((HEADER_ROWS + self.max_blocks_per_seq,), scratch, dtype=torch.long)
        column[:HEADER_ROWS] = torch.tensor([self.config.max_num_seqs, 0, scratch * self.block_size, 1, 0, 0])
        return column

    def _account(
        self,
        launched: LaunchedStep | None,
        previous: LaunchedStep | None,
        prefilled: int,
        seconds: float,
        wait: float,
    ) -> None:
        """A step's time goes to the kind of work it launched (at the end: of the last one it waited for)."""
        st = self.last_stats
        kind = launched or previous
        if kind is not None and kind.is_prefill:
            st["prefill_tokens"] += prefilled
            st["prefill_s"] += seconds
        elif kind is not None:
            st["decode_s"] += seconds
            st["decode_wait_s"] += wait  # decode_s minus this: host time the device may sit idle
        if launched is not None and not launched.is_prefill:
            st["decode_steps"] += 1
            st["decode_batch_sum"] += len(launched.seqs)
            # each sequence attends to its whole context: its length with the new placeholder, minus one
            st["decode_context_sum"] += sum(s.num_tokens - 1 for s in launched.seqs)
        st["preemptions"] = float(self.scheduler.num_preemptions)
        total = st["prefill_s"] + st["decode_s"]
        st["tokens_per_s"] = st["generated_tokens"] / total if total > 0 else 0.0

    def _detokenize(self, tokens: list[int]) -> str:
        return self.tokenizer.decode(tokens, skip_special_tokens=True) if self.tokenizer is not None else ""


def _complete(seq: Sequence) -> bool:
    """Finished, with its last token taken in (a length cap finishes a sequence at launch, before its
    last token reaches the host)."""
    return seq.finish_reason is not None and (not seq.tokens or seq.tokens[-1] != PENDING)


__all__ = ["NativeEngine"]
