"""The native rollout engine against transformers on tiny random Llama and Qwen2 models (CPU, fp32):
greedy tokens, log-probs under sampling, prefix sharing, preemption, seeds, weight sync, colocation."""

from __future__ import annotations

import pytest
import torch

from codefu.rollout import EngineConfig, NativeEngine, SamplingParams
from codefu.rollout.actor import build_engine
from codefu.rollout.follow_ups import FollowUp, FollowUps
from codefu.rollout.native.cuda_graphs import DecodeGraphs, batch_buckets
from codefu.rollout.native.engine import PENDING
from helpers.native_models import forward_logprobs, hf_greedy, tiny_hf
from helpers.stops import pick_stops
from helpers.threads import one_thread  # noqa: F401 (autouse: one intra-op thread)

BLOCK = 16
# lengths 3, 16 (exactly one block), 21, 32 (two blocks), 9: partial and full last blocks
PROMPTS = [
    [11, 12, 13],
    list(range(100, 116)),
    list(range(200, 221)),
    list(range(300, 332)),
    [7, 8, 9, 10, 11, 12, 13, 14, 15],
]


def make_engine(hf, kv_cache_tokens: int = 4096, **knobs) -> NativeEngine:
    config = EngineConfig(model="(in memory)", engine="native", kv_cache_tokens=kv_cache_tokens, **knobs)
    return NativeEngine.from_hf_model(hf, None, config)


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def hf(request):
    return tiny_hf(request.param)


@pytest.fixture(scope="module")
def engine(hf):
    return make_engine(hf)


def test_greedy_is_token_identical_to_transformers_with_stops(hf, engine):
    # stop tokens that transformers' greedy output hits at different steps of different prompts
    stop = pick_stops([hf_greedy(hf, p, 12) for p in PROMPTS])
    out = engine.generate(
        PROMPTS, SamplingParams(n=2, temperature=0.0, max_new_tokens=12, stop_token_ids=stop)
    )
    assert [(c.prompt_index, c.sample_index) for c in out] == [(p, s) for p in range(5) for s in range(2)]
    reasons = set()
    for c in out:
        ref = hf_greedy(hf, PROMPTS[c.prompt_index], 12, stop)
        assert c.token_ids == ref, c.prompt_index
        assert c.prompt_ids == PROMPTS[c.prompt_index]
        stopped = ref[-1] in stop
        assert c.finish_reason == ("stop" if stopped else "length")
        reasons.add(c.finish_reason)
        torch.testing.assert_close(
            torch.tensor(c.logprobs), forward_logprobs(hf, c.prompt_ids, c.token_ids, 1.0), atol=1e-4, rtol=0
        )
    assert reasons == {"stop", "length"}
    assert len({len(c.token_ids) for c in out if c.finish_reason == "stop"}) >= 2
    # each prompt's prefill ran once for its n = 2 samples
    assert engine.last_stats["prefill_tokens"] == sum(len(p) for p in PROMPTS)
    assert engine.allocator.num_free == engine.num_blocks


def test_model_config_eos_stops():
    hf = tiny_hf("llama")
    eos = hf_greedy(hf, PROMPTS[0], 10)[5]
    hf.config.eos_token_id = eos
    engine = make_engine(hf)
    out = engine.generate([PROMPTS[0]], SamplingParams(temperature=0.0, max_new_tokens=10))[0]
    assert out.token_ids == hf_greedy(hf, PROMPTS[0], 10, (eos,))
    assert out.finish_reason == "stop" and out.token_ids[-1] == eos


@pytest.mark.parametrize(
    "temperature, top_k, top_p", [(0.7, 50, 0.9), (1.3, 0, 0.8)], ids=["t07-topk-topp", "t13-topp"]
)
def test_sampled_logprobs_equal_the_trainers(hf, engine, temperature, top_k, top_p):
    sampling = SamplingParams(
        n=3, temperature=temperature, top_k=top_k, top_p=top_p, max_new_tokens=10, seed=5
    )
    out = engine.generate(PROMPTS, sampling)
    assert len(out) == 15
    for c in out:
        expected = forward_logprobs(hf, c.prompt_ids, c.token_ids, temperature)
        torch.testing.assert_close(torch.tensor(c.logprobs), expected, atol=1e-4, rtol=0)
        with torch.no_grad():
            ids = torch.tensor([c.prompt_ids + c.token_ids])
            logits = hf(input_ids=ids).logits[0, len(c.prompt_ids) - 1 : -1] / temperature
        for t, tok in enumerate(c.token_ids):
            if top_k:
                assert int((logits[t] > logits[t, tok]).sum()) < top_k
            probs = torch.softmax(logits[t], dim=-1)
            assert float(probs[probs > probs[tok]].sum()) < top_p + 1e-5
    # the samples of one prompt differ (they are independent draws from one shared prefill)
    assert len({tuple(c.token_ids) for c in out[:3]}) > 1


def test_same_seed_same_samples_and_the_global_rng_is_untouched(engine):
    sampling = SamplingParams(n=2, temperature=1.0, max_new_tokens=8, seed=11)
    state = torch.get_rng_state()
    first = engine.generate(PROMPTS, sampling)
    again = engine.generate(PROMPTS, sampling)
    assert torch.equal(torch.get_rng_state(), state)
    assert [c.token_ids for c in again] == [c.token_ids for c in first]
    assert [c.logprobs for c in again] == [c.logprobs for c in first]
    other = engine.generate(PROMPTS, SamplingParams(n=2, temperature=1.0, max_new_tokens=8, seed=12))
    assert [c.token_ids for c in other] != [c.token_ids for c in first]


def test_samples_share_the_prompt_blocks(engine):
    n = 4
    engine.start(PROMPTS[2:4], SamplingParams(n=n, temperature=1.0, max_new_tokens=4, seed=0))
    engine.step()  # the prefill of both prompts
    running = engine.scheduler.running
    assert len(running) == 2 * n
    refs = engine.allocator.refcount
    for group in (running[:n], running[n:]):
        length = group[0].num_tokens - 1  # the prompt (one token sampled since)
        full = length // BLOCK
        tables = [s.block_table for s in group]
        assert all(t[:full] == tables[0][:full] for t in tables)  # full blocks: the same ids
        assert all(refs[b] == n for b in tables[0][:full])
        if length % BLOCK:  # the partial last block: one copy per sample, same contents
            lasts = [t[full] for t in tables]
            assert len(set(lasts)) == n and all(refs[b] == 1 for b in lasts)
            assert engine.cache is not None
            data = engine.cache.data
            for b in lasts[1:]:
                assert torch.equal(data[:, :, b], data[:, :, lasts[0]])
        else:
            assert all(len(t) == full for t in tables)
    while not engine.done:
        engine.step()
    assert engine.allocator.num_free == engine.num_blocks
    assert all(r == 0 for r in engine.allocator.refcount)


def test_a_small_cache_preempts_and_gives_the_same_greedy_outputs(hf, engine):
    sampling = SamplingParams(n=3, temperature=0.0, max_new_tokens=30)
    big = engine.generate(PROMPTS, sampling)
    assert engine.last_stats["preemptions"] == 0
    small = make_engine(hf, kv_cache_tokens=8 * BLOCK)  # 8 blocks; 15 sequences need ~40
    out = small.generate(PROMPTS, sampling)
    assert small.last_stats["preemptions"] > 0
    assert [c.token_ids for c in out] == [c.token_ids for c in big]
    torch.testing.assert_close(
        torch.tensor([c.logprobs for c in out]), torch.tensor([c.logprobs for c in big]), atol=1e-4, rtol=0
    )
    assert small.allocator.num_free == small.num_blocks
    # recomputed prefills cost extra prefill tokens
    assert small.last_stats["prefill_tokens"] > engine.last_stats["prefill_tokens"]


def test_stop_tokens_with_preemption_and_one_step_lookahead(hf, engine):
    """The host learns of a stop token one step after it was sampled: by then the sequence may have run one
    more (discarded) step, reached its length cap, or been preempted. Outputs stay those of a roomy cache,
    nothing is left waiting, every block comes back."""
    stop = pick_stops([hf_greedy(hf, p, 30) for p in PROMPTS])
    sampling = SamplingParams(n=3, temperature=0.0, max_new_tokens=30, stop_token_ids=stop)
    big = engine.generate(PROMPTS, sampling)
    assert {c.finish_reason for c in big} == {"stop", "length"}
    assert all(c.token_ids[-1] in stop for c in big if c.finish_reason == "stop")
    small = make_engine(hf, kv_cache_tokens=8 * BLOCK)
    out = small.generate(PROMPTS, sampling)
    assert small.last_stats["preemptions"] > 0
    assert [(c.token_ids, c.finish_reason) for c in out] == [(c.token_ids, c.finish_reason) for c in big]
    assert all(len(c.logprobs) == len(c.token_ids) and PENDING not in c.token_ids for c in out)
    assert not small.scheduler.waiting and small.allocator.num_free == small.num_blocks
    assert small.last_stats["generated_tokens"] == sum(c.num_tokens for c in out)


def test_a_stop_token_as_the_last_allowed_token_is_a_stop(hf, engine):
    """Finished for length when launched, then found to be a stop token: the reason is "stop"."""
    prompt, greedy = next((p, g) for p in PROMPTS if (g := hf_greedy(hf, p, 3))[2] not in g[:2])
    sampling = SamplingParams(temperature=0.0, max_new_tokens=3, stop_token_ids=(greedy[2],))
    out = engine.generate([prompt], sampling)
    assert out[0].token_ids == greedy and out[0].finish_reason == "stop"


def test_max_num_seqs_limits_the_batch_and_keeps_outputs(hf, engine):
    sampling = SamplingParams(n=2, temperature=0.0, max_new_tokens=6)
    narrow = make_engine(hf, max_num_seqs=3)
    out = narrow.generate(PROMPTS, sampling)
    assert [c.token_ids for c in out] == [c.token_ids for c in engine.generate(PROMPTS, sampling)]
    st = narrow.last_stats
    assert st["decode_batch_sum"] <= 3 * st["decode_steps"]


def test_stats(engine):
    out = engine.generate(PROMPTS[:2], SamplingParams(n=2, temperature=0.0, max_new_tokens=5))
    st = engine.last_stats
    assert st["generated_tokens"] == sum(c.num_tokens for c in out) == 20
    assert st["decode_steps"] == 4 and st["decode_batch_sum"] == 16
    # step k (k = 1..4) of a prompt of length P attends to P + k tokens, for 2 samples each
    assert st["decode_context_sum"] == sum(2 * (len(p) + k) for p in PROMPTS[:2] for k in range(1, 5))
    assert st["prefill_s"] > 0 and st["decode_s"] > 0 and st["tokens_per_s"] > 0


def test_load_weights_in_place_changes_outputs():
    first, second = tiny_hf("llama", seed=0), tiny_hf("llama", seed=1)
    engine = make_engine(first)
    sampling = SamplingParams(temperature=0.0, max_new_tokens=8)
    ptrs = [p.data_ptr() for p in engine.model.parameters()]
    state = second.state_dict()
    state.pop("lm_head.weight", None)  # the tied alias may be absent
    engine.load_weights(state)
    assert [p.data_ptr() for p in engine.model.parameters()] == ptrs
    out = engine.generate(PROMPTS, sampling)
    assert [c.token_ids for c in out] == [hf_greedy(second, p, 8) for p in PROMPTS]
    assert [c.token_ids for c in out] != [hf_greedy(first, p, 8) for p in PROMPTS]
    with pytest.raises(KeyError, match="not model keys: \\['model.bogus'\\]"):
        engine.load_weights(state | {"model.bogus": torch.zeros(1)})
    partial = dict(state)
    partial.pop("model.layers.1.mlp.up_proj.weight")
    with pytest.raises(KeyError, match="missing: \\['model.layers.1.mlp.up_proj.weight'\\]"):
        engine.load_weights(partial)
    with pytest.raises(ValueError, match="model.norm.weight"):
        engine.load_weights(state | {"model.norm.weight": torch.zeros(3)})


def test_untied_model_needs_its_lm_head():
    hf = tiny_hf("qwen2")
    engine = make_engine(hf)
    state = hf.state_dict()
    state.pop("lm_head.weight")
    with pytest.raises(KeyError, match="lm_head.weight"):
        engine.load_weights(state)


def test_release_and_resume_memory(hf, engine):
    sampling = SamplingParams(n=2, temperature=0.0, max_new_tokens=6)
    before = engine.generate(PROMPTS, sampling)
    engine.release_memory()
    assert engine.cache is None and all(layer.self_attn.k_cache is None for layer in engine.model.layers)
    after = engine.generate(PROMPTS, sampling)  # resumes by itself
    assert engine.cache is not None
    assert [c.token_ids for c in after] == [c.token_ids for c in before]


def test_released_weights_refuse_to_run_until_loaded_again(hf):
    engine = make_engine(hf)
    sampling = SamplingParams(n=2, temperature=0.0, max_new_tokens=6)
    before = engine.generate(PROMPTS, sampling)
    state = {k: v.clone() for k, v in hf.state_dict().items()}
    engine.release_memory(weights=True)  # a colocated trainer's turn: its sync brings them
    assert all(p.numel() == 0 for p in engine.model.parameters())
    assert engine.model.rotary.cos.numel() > 0  # tables, not weights: they stay
    with pytest.raises(RuntimeError, match="weights were released .* load_weights before generate"):
        engine.generate(PROMPTS, sampling)
    with pytest.raises(KeyError, match="missing"):
        engine.load_weights({k: v for k, v in state.items() if "layers.0." not in k})
    name = next(k for k in state if k.endswith("o_proj.weight"))
    with pytest.raises(ValueError, match="o_proj"):
        engine.load_weights(state | {name: state[name][:, :-1]})
    assert engine.model.weights_dropped  # a failed load leaves no half-filled memory that looks loaded
    engine.load_weights(state)
    assert [c.token_ids for c in engine.generate(PROMPTS, sampling)] == [c.token_ids for c in before]
    engine.release_memory(weights=True)
    engine.release_memory(weights=True)  # twice: still the shapes to allocate again
    engine.load_weights(state)
    assert [c.token_ids for c in engine.generate(PROMPTS, sampling)] == [c.token_ids for c in before]


def test_limits_are_clear_errors(hf):
    engine = make_engine(hf, kv_cache_tokens=2 * BLOCK)
    assert engine.max_model_len == 2 * BLOCK  # capped by the cache
    with pytest.raises(ValueError, match="cannot fit even alone"):
        engine.generate([list(range(1, 40))], SamplingParams(max_new_tokens=2))
    with pytest.raises(ValueError, match="max_model_len=100 does not fit the KV cache"):
        make_engine(hf, kv_cache_tokens=2 * BLOCK, max_model_len=100)
    # a sequence that reaches max_model_len ends with "length"
    out = engine.generate([list(range(1, 30))], SamplingParams(temperature=0.0, max_new_tokens=50))[0]
    assert len(out.token_ids) == 3 and out.finish_reason == "length"


def test_build_engine_dispatches_on_the_kind(tmp_path):
    hf = tiny_hf("llama")
    hf.save_pretrained(tmp_path)
    engine = build_engine(EngineConfig(model=str(tmp_path), engine="native", kv_cache_tokens=256))
    assert isinstance(engine, NativeEngine)
    out = engine.generate([PROMPTS[0]], SamplingParams(temperature=0.0, max_new_tokens=5))
    assert out[0].token_ids == hf_greedy(hf, PROMPTS[0], 5)
    with pytest.raises(ValueError, match="unknown rollout engine 'vlm': expected one of auto, native, vllm"):
        build_engine(EngineConfig(model=str(tmp_path), engine="vlm"))
    assert isinstance(build_engine(EngineConfig(model=str(tmp_path), engine="auto")), NativeEngine)


class EagerGraphs(DecodeGraphs):
    """DecodeGraphs on CPU: `capture` records a replay that runs the forward on the static buffer, so the
    capture at first use, the padding to buckets and the partly refreshed block-table rows of `run` are
    exercised without CUDA."""

    def __init__(self, forward, max_batch: int, pad_column: torch.Tensor) -> None:
        self.forward, self.buckets = forward, batch_buckets(max_batch)
        self.pad = pad_column[:, None]
        self.packed = self.pad.repeat(1, max_batch).contiguous()
        self.staging = torch.empty_like(self.packed).view(-1)
        self.graphs, self.outputs, self.capture_s = {}, {}, 0.0
        self.replays: list[int] = []
        self.captured: list[int] = []
        self.calls: list[tuple[int, int]] = []  # (batch, bucket)

    def capture(self, bs: int) -> None:
        self.captured.append(bs)
        outer = self

        class Replay:
            def replay(self) -> None:
                outer.replays.append(bs)
                outer.outputs[bs] = outer.forward(outer.packed[:, :bs])

        self.graphs[bs] = Replay()

    def run(self, packed: torch.Tensor, batch: int) -> torch.Tensor:
        self.calls.append((batch, packed.shape[1]))
        return super().run(packed, batch)


def test_decode_through_padded_buckets_gives_the_eager_outputs(hf, engine):
    stop = pick_stops([hf_greedy(hf, p, 10) for p in PROMPTS])
    sampling = SamplingParams(n=3, temperature=0.0, max_new_tokens=10, stop_token_ids=stop)
    bucketed = make_engine(hf, max_num_seqs=8)  # 15 sequences, 8 at a time, some stop early
    bucketed.graphs = EagerGraphs(bucketed._decode_forward, 8, bucketed._pad_column())
    assert bucketed.graphs.buckets == [1, 2, 4, 8]
    out = bucketed.generate(PROMPTS, sampling)
    assert [c.token_ids for c in out] == [c.token_ids for c in engine.generate(PROMPTS, sampling)]
    calls = bucketed.graphs.calls
    assert (8, 8) in calls and any(batch < bucket for batch, bucket in calls)  # full and padded batches
    assert bucketed.graphs.replays == [bucket for _, bucket in calls]
    # each bucket captured once, when a batch first needed it: only those the thinning batch used
    assert bucketed.graphs.captured == list(dict.fromkeys(bucket for _, bucket in calls))


class RefitEngine(NativeEngine):
    """The re-fit policy of resume_memory without a GPU: what "fits now" is given (on a GPU it is measured
    from torch.cuda.mem_get_info; tests/gpu covers that measurement)."""

    fits_now = 0

    def _plan_cache_blocks(self) -> int:
        self._activation_peak = 0  # as a GPU engine, whose cache is sized by the memory budget
        return super()._plan_cache_blocks()

    def _blocks_that_fit(self) -> int:
        return self.fits_now or self.planned_blocks


def test_resume_takes_what_fits_up_to_the_plan_and_says_when_nothing_does(hf, engine):
    sampling = SamplingParams(n=2, temperature=0.0, max_new_tokens=12)
    refit = RefitEngine.from_hf_model(
        hf,
        None,
        EngineConfig(model="(in memory)", engine="native", kv_cache_tokens=64 * BLOCK, max_model_len=128),
    )
    expected = [c.token_ids for c in engine.generate(PROMPTS, sampling)]
    planned = refit.planned_blocks
    refit.release_memory()
    refit.fits_now = planned // 2  # a colocated trainer took memory meanwhile
    assert [c.token_ids for c in refit.generate(PROMPTS, sampling)] == expected
    assert refit.num_blocks == planned // 2 and refit.cache.data.shape[2] == planned // 2 + 1
    refit.release_memory()
    refit.fits_now = 10 * planned  # it gave memory back: never more than planned
    refit.generate(PROMPTS, sampling)
    assert refit.num_blocks == planned
    refit.release_memory()
    refit.fits_now = 128 // BLOCK - 1  # less than one max_model_len sequence
    with pytest.raises(RuntimeError, match="no longer fits one sequence of max_model_len 128"):
        refit.generate(PROMPTS, sampling)
    assert refit.cache is None


def test_the_stream_gives_each_completion_at_the_step_it_finishes(hf, engine):
    """generate_stream: generate's completions, each as soon as its last token is in (a judge can start on
    it while the rest decode): shorter ones in earlier batches, with a small cache (preemption) too."""
    stop = pick_stops([hf_greedy(hf, p, 30) for p in PROMPTS])
    sampling = SamplingParams(n=3, temperature=0.0, max_new_tokens=30, stop_token_ids=stop)
    whole = engine.generate(PROMPTS, sampling)
    for eng in (engine, make_engine(hf, kv_cache_tokens=8 * BLOCK)):
        batches = list(eng.generate_stream(PROMPTS, sampling))
        streamed = sorted((c for b in batches for c in b), key=lambda c: (c.prompt_index, c.sample_index))
        key = [(c.prompt_index, c.sample_index, c.token_ids, c.finish_reason) for c in whole]
        assert [(c.prompt_index, c.sample_index, c.token_ids, c.finish_reason) for c in streamed] == key
        if eng is engine:  # the same schedule: the same numbers (preemption changes batches, not tokens)
            assert [c.logprobs for c in streamed] == [c.logprobs for c in whole]
        assert len(batches) > 1 and all(batches)
        assert all(PENDING not in c.token_ids for b in batches for c in b)
    roomy = list(engine.generate_stream(PROMPTS, sampling))  # one prefill, then every sequence decodes
    longest_so_far = 0
    for batch in roomy:
        assert min(c.num_tokens for c in batch) >= longest_so_far
        longest_so_far = max(c.num_tokens for c in batch)


def test_a_later_turn_starts_after_the_conversation_so_far(hf):
    """A self-repair turn's prompt is the previous turn's prompt and response and a feedback turn: the
    prefix cache gives their K/V back instead of prefilling them again, and the outputs and log-probs are
    those of an engine without it. New weights drop what was cached."""
    sampling = SamplingParams(n=1, temperature=0.0, max_new_tokens=20)
    engines = {on: make_engine(hf, prefix_caching=on) for on in (True, False)}
    turn1 = {on: e.generate(PROMPTS, sampling) for on, e in engines.items()}
    assert [c.token_ids for c in turn1[True]] == [c.token_ids for c in turn1[False]]
    feedback = [[5, 6, 7, 8, 9]] * len(PROMPTS)
    conversations = [c.prompt_ids + c.token_ids + f for c, f in zip(turn1[True], feedback, strict=True)]
    turn2 = {on: e.generate(conversations, sampling) for on, e in engines.items()}
    assert [c.token_ids for c in turn2[True]] == [c.token_ids for c in turn2[False]]
    for a, b in zip(turn2[True], turn2[False], strict=True):
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4)
    cached, fresh = engines[True].last_stats, engines[False].last_stats
    # turn 1's full blocks whose K/V were all written: all but its last token (never run)
    expected = sum((c.num_tokens + len(c.prompt_ids) - 1) // BLOCK * BLOCK for c in turn1[True])
    assert cached["cached_tokens"] == expected > 0 and fresh["cached_tokens"] == 0
    assert cached["prefill_tokens"] == fresh["prefill_tokens"] - expected
    engines[True].load_weights(
        tiny_hf("qwen2", seed=1).state_dict()
        if hf.config.model_type == "qwen2"
        else tiny_hf("llama", seed=1).state_dict()
    )
    engines[True].generate(conversations, sampling)
    assert engines[True].last_stats["cached_tokens"] == 0  # K/V of the old weights: gone


def test_follow_ups_join_the_running_batch_and_the_stream_ends_when_closed(hf):
    """A follow-up put while the batch decodes (a self-repair turn as soon as its check is back) joins it
    at once, not after the batch: its completion comes before the batch's longest; it prefills from the
    prefix cache after the conversation so far, and its tokens are what a call of its own gives (greedy).
    The stream waits for follow-ups while idle and ends only when the inbox closes."""
    engine = make_engine(hf)
    stop = pick_stops([hf_greedy(hf, p, 40) for p in PROMPTS])
    sampling = SamplingParams(n=1, temperature=0.0, max_new_tokens=40, stop_token_ids=stop)
    inbox = FollowUps()
    order: list[tuple[int, int]] = []  # (prompt index, tokens written) in the order they came
    conversations: dict[int, list[int]] = {}
    for batch in engine.generate_stream(PROMPTS, sampling, inbox):
        for c in batch:
            order.append((c.prompt_index, len(c.token_ids)))
            written = (len(c.prompt_ids) + len(c.token_ids) - 1) // BLOCK * BLOCK  # K/V in full blocks
            if c.prompt_index < len(PROMPTS) and not conversations and written:  # the first: its next turn
                cached = written
                index = len(PROMPTS) + c.prompt_index
                conversations[index] = c.prompt_ids + c.token_ids + [5, 6, 7, 8, 9]
                inbox.put([FollowUp(index, conversations[index])])
            elif c.prompt_index >= len(PROMPTS):
                follow_up = c
                inbox.close()
    first = [i for i, _ in order if i < len(PROMPTS)]
    assert sorted(first) == list(range(len(PROMPTS)))
    # it did not wait for the batch: after it, one more step per token would be needed (the first token
    # of each comes from its prefill)
    longest = max(n for i, n in order if i < len(PROMPTS))
    assert engine.last_stats["decode_steps"] < (longest - 1) + (len(follow_up.token_ids) - 1), order
    assert follow_up.prompt_ids == conversations[follow_up.prompt_index] and follow_up.sample_index == 0
    assert engine.last_stats["cached_tokens"] == cached
    alone = make_engine(hf).generate([follow_up.prompt_ids], sampling)[0]
    assert follow_up.token_ids == alone.token_ids

    closed = FollowUps()
    closed.close()
    assert sorted(
        c.prompt_index for b in engine.generate_stream(PROMPTS[:2], sampling, closed) for c in b
    ) == [0, 1]
    aborted, got = FollowUps(), []
    for batch in engine.generate_stream(PROMPTS, sampling, aborted):  # the caller gives up at the first
        got += batch
        aborted.put([FollowUp(50, PROMPTS[0])])
        aborted.close(abort=True)
    assert len(got) < len(PROMPTS) and all(c.prompt_index != 50 for c in got)
    again = engine.generate(PROMPTS, sampling)  # the dropped sequences' blocks do not leak into the next call
    assert [c.token_ids for c in again] == [c.token_ids for c in engine.generate(PROMPTS, sampling)]
    too_long = FollowUps()
    too_long.put([FollowUp(99, list(range(1, 300)))])
    with pytest.raises(ValueError, match="follow-up 99 has 299 tokens"):
        list(engine.generate_stream(PROMPTS[:1], sampling, too_long))


def test_shared_prefix_attention_gives_the_outputs_of_reading_each_context(hf, monkeypatch):
    """The engine with the Triton decode kernel (interpreted on CPU): with `shared_prefix_attention` the
    samples of each prompt read the prompt's shared blocks as one group, without it each sample reads its
    whole context; the sampled tokens and their log-probs are the same. Prompts of 32 and 21 tokens (2
    and 1 shared blocks), 3 samples each, plus a short one with nothing to share."""
    from codefu.rollout.native import attention
    from codefu.rollout.native.testing import load_interpreted

    td = load_interpreted("codefu.rollout.native.triton_decode")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    groups_seen = []

    def kernel(*args, shared_lens=None, group_sizes=None):
        if group_sizes is not None:
            groups_seen.append(int((group_sizes > 1).sum()))
        return td.paged_decode_attention_triton(*args, shared_lens=shared_lens, group_sizes=group_sizes)

    monkeypatch.setattr(attention, "CPU_DECODE_KERNEL", kernel)
    prompts = [PROMPTS[3], PROMPTS[2], PROMPTS[0]]
    sampling = SamplingParams(n=3, temperature=1.0, max_new_tokens=6, seed=5)
    outputs = {}
    for shared in (True, False):
        engine = make_engine(hf, kv_cache_tokens=64 * BLOCK, shared_prefix_attention=shared)
        outputs[shared] = engine.generate(prompts, sampling)
    assert groups_seen and max(groups_seen) == 2  # the two longer prompts' samples, every step
    for a, b in zip(outputs[True], outputs[False], strict=True):
        assert a.token_ids == b.token_ids
        torch.testing.assert_close(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4, rtol=0)
