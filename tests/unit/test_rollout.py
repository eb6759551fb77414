"""The transformers rollout engine on a tiny random Llama: left padding, log-probs, sampling, weight sync,
prompt encoding, and the log-prob mismatch metric."""

import copy
import math
from pathlib import Path

import pytest
import torch

from codefu.models.tiny import tiny_model, tiny_tokenizer
from codefu.orchestrator.roles import engine_metrics
from codefu.rollout import SamplingParams, TransformersEngine, encode_prompt, logprob_mismatch
from codefu.rollout.prompts import default_messages, is_prerendered, parse_chatml
from codefu.rollout.sampling import sample_from_scores
from codefu.types import Problem

CODEFU_EASY = Path(__file__).resolve().parents[2].parent / "shared/data/codefu-easy"
EOS = 2
PROMPTS = [[1, 40, 41, 42], [1, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59], [1, 60]]  # lengths 4, 11, 2


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


@pytest.fixture(scope="module")
def model():
    return tiny_model(seed=0)


@pytest.fixture(scope="module")
def engine(model, tokenizer):
    return TransformersEngine(model, tokenizer, batch_size=16)


def teacher_forced_logprobs(
    model, prompt: list[int], response: list[int], temperature: float
) -> torch.Tensor:
    """(R,) log_softmax(logits / T) of each response token from one unpadded forward pass."""
    ids = torch.tensor([prompt + response])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float()  # (P + R, V)
    scaled = logits[len(prompt) - 1 : len(prompt) + len(response) - 1] / temperature
    return torch.log_softmax(scaled, dim=-1).gather(-1, torch.tensor(response)[:, None]).squeeze(1)


@pytest.mark.parametrize("n", [1, 3], ids=["one-each", "shared-prefill"])
def test_greedy_equals_hf_generate_with_mixed_prompt_lengths(engine, model, n):
    """n > 1 runs each distinct prompt's prefill once and copies its KV cache to the n rows."""
    out = engine.generate(PROMPTS, SamplingParams(n=n, temperature=0.0, max_new_tokens=12))
    assert [c.prompt_index for c in out] == [i for i in range(3) for _ in range(n)]
    for c in out:
        prompt = PROMPTS[c.prompt_index]
        with torch.no_grad():  # each prompt alone, no padding at all
            ref = model.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=12)[0, len(prompt) :]
        assert c.token_ids == ref.tolist()
        assert c.prompt_ids == prompt
        expected = teacher_forced_logprobs(model, prompt, c.token_ids, 1.0)  # greedy: temperature 1
        torch.testing.assert_close(torch.tensor(c.logprobs), expected, atol=1e-4, rtol=0)


def test_sample_from_scores_follows_the_distribution_and_never_picks_excluded_tokens():
    scores = torch.tensor([0.0, 1.0, float("-inf"), 2.0, -1.0, float("-inf")]).repeat(40_000, 1)
    g = torch.Generator().manual_seed(0)
    tokens = sample_from_scores(scores, g)
    freq = torch.bincount(tokens, minlength=6).double() / len(tokens)
    expected = torch.softmax(scores[0].double(), dim=0)
    assert freq[2] == 0 and freq[5] == 0
    # 40k draws: the standard error of each frequency is below 0.0025
    torch.testing.assert_close(freq, expected, atol=0.01, rtol=0)
    only = torch.full((3, 6), float("-inf"))
    only[:, 4] = 0.0
    assert sample_from_scores(only, g).tolist() == [4, 4, 4]


def test_small_batches_give_the_same_greedy_tokens(model, tokenizer):
    prompts = PROMPTS * 2
    sampling = SamplingParams(temperature=0.0, max_new_tokens=8)
    big = TransformersEngine(model, tokenizer, batch_size=16).generate(prompts, sampling)
    small = TransformersEngine(model, tokenizer, batch_size=2).generate(prompts, sampling)
    assert [c.token_ids for c in small] == [c.token_ids for c in big]


@pytest.mark.parametrize(
    "temperature, top_k, top_p",
    [(1.0, 5, 1.0), (0.7, 0, 0.5), (0.7, 20, 0.9)],
    ids=["t1-topk", "t07-topp", "t07-both"],
)
def test_sampled_logprobs_equal_teacher_forcing(engine, model, temperature, top_k, top_p):
    sampling = SamplingParams(
        n=2, temperature=temperature, top_k=top_k, top_p=top_p, max_new_tokens=16, seed=3
    )
    out = engine.generate(PROMPTS, sampling)
    assert len(out) == 6
    for c in out:
        prompt = PROMPTS[c.prompt_index]
        expected = teacher_forced_logprobs(model, prompt, c.token_ids, temperature)
        # full-vocabulary log-probs: top-k / top-p do not renormalise them
        torch.testing.assert_close(torch.tensor(c.logprobs), expected, atol=1e-4, rtol=0)
        # every sampled token was allowed by top-k / top-p
        ids = torch.tensor([prompt + c.token_ids])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float() / temperature
        for t, tok in enumerate(c.token_ids):
            rank = int((logits[t] > logits[t, tok]).sum())
            if top_k:
                assert rank < top_k
            if top_p < 1.0:
                probs = torch.softmax(logits[t], dim=-1)
                assert float(probs[probs > probs[tok]].sum()) < top_p + 1e-5


def test_n_samples_order_and_finish_reasons(engine):
    sampling = SamplingParams(n=16, temperature=1.0, max_new_tokens=40, seed=0)
    out = engine.generate(PROMPTS[:2], sampling)
    assert [(c.prompt_index, c.sample_index) for c in out] == [(p, s) for p in range(2) for s in range(16)]
    assert {c.finish_reason for c in out} == {"stop", "length"}
    for c in out:
        assert c.prompt_ids == PROMPTS[c.prompt_index]
        assert len(c.token_ids) == len(c.logprobs) >= 1
        assert all(lp <= 0 for lp in c.logprobs)
        if c.finish_reason == "stop":
            assert c.token_ids[-1] == EOS and EOS not in c.token_ids[:-1]
            assert len(c.token_ids) <= 40
        else:
            assert len(c.token_ids) == 40 and EOS not in c.token_ids


def test_stop_token_ids(engine, tokenizer):
    stops = tuple(range(6, 60))
    out = engine.generate(PROMPTS, SamplingParams(n=4, max_new_tokens=30, seed=1, stop_token_ids=stops))
    assert sum(c.finish_reason == "stop" for c in out) >= 10
    for c in out:
        hits = [i for i, t in enumerate(c.token_ids) if t in stops or t == EOS]
        if c.finish_reason == "stop":
            assert hits == [len(c.token_ids) - 1]
        else:
            assert hits == []
        assert c.text == tokenizer.decode(c.token_ids, skip_special_tokens=True)


def test_seeded_sampling_is_reproducible(engine):
    def run(seed):
        out = engine.generate(PROMPTS, SamplingParams(n=3, max_new_tokens=10, seed=seed, top_p=0.95))
        return [c.token_ids for c in out], [c.logprobs for c in out]

    rng_before = torch.get_rng_state()
    first = run(7)
    assert run(7) == first
    assert run(8)[0] != first[0]
    assert run(None)[0] != run(None)[0]
    assert torch.equal(torch.get_rng_state(), rng_before)  # the global RNG is left alone


def test_load_weights_switches_to_the_new_policy(model, tokenizer):
    new = tiny_model(seed=1)
    sampling = SamplingParams(n=2, max_new_tokens=10, seed=5)
    expected = TransformersEngine(new, tokenizer).generate(PROMPTS, sampling)
    engine = TransformersEngine(copy.deepcopy(model), tokenizer)
    before = engine.generate(PROMPTS, sampling)
    engine.load_weights({k: v.clone() for k, v in new.state_dict().items()})
    after = engine.generate(PROMPTS, sampling)
    assert [c.token_ids for c in after] == [c.token_ids for c in expected] != [c.token_ids for c in before]
    assert [c.logprobs for c in after] == [c.logprobs for c in expected]
    state = dict(new.state_dict())
    with pytest.raises(KeyError, match="missing"):
        engine.load_weights({k: v for k, v in state.items() if k != "lm_head.weight"})
    with pytest.raises(KeyError, match="not model keys"):
        engine.load_weights({**state, "extra.weight": torch.zeros(1)})


def test_load_weights_accepts_a_state_without_tied_aliases(tokenizer):
    tied = tiny_model(seed=0, tie_word_embeddings=True)
    other = tiny_model(seed=2, tie_word_embeddings=True)
    engine = TransformersEngine(tied, tokenizer)
    state = {k: v for k, v in other.state_dict().items() if k != "lm_head.weight"}  # as safetensors saves it
    engine.load_weights(state)
    assert torch.equal(tied.lm_head.weight, other.model.embed_tokens.weight)


def test_sampling_params_are_checked():
    for bad in ({"n": 0}, {"temperature": -1.0}, {"top_p": 0.0}, {"max_new_tokens": 0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            SamplingParams(**bad)


# ---- prompts ---------------------------------------------------------------------------------------------
def test_codefu_rows_are_not_wrapped_twice(tokenizer):
    if not CODEFU_EASY.is_dir():
        pytest.skip(f"{CODEFU_EASY} is not present")
    from codefu.data.loader import load_problems

    problems = load_problems(CODEFU_EASY / "test.parquet")[:4]
    im_start = tokenizer.convert_tokens_to_ids("<|im_start|>")
    for p in problems:
        assert is_prerendered(p.prompt)
        content = p.prompt[0]["content"]
        ids = encode_prompt(tokenizer, p)
        assert ids == tokenizer.encode(content, add_special_tokens=False)
        assert ids.count(im_start) == content.count("<|im_start|>") == 2  # user + assistant, no template
        text = tokenizer.decode(ids)
        assert text.startswith("<|im_start|>user\n") and text.endswith("<|im_start|>assistant\n")


def test_chat_messages_get_the_template(tokenizer):
    p = Problem("p", "Print 42.", [], [], prompt=[{"role": "user", "content": "Say hi"}])
    assert (
        tokenizer.decode(encode_prompt(tokenizer, p))
        == "<|im_start|>user\nSay hi<|im_end|>\n<|im_start|>assistant\n"
    )


def test_default_prompt_asks_for_the_preferred_language(tokenizer):
    for language in ("python", "cpp"):
        p = Problem("p", "Print 42.", [], [], preferred_language=language)
        messages = default_messages(p)
        assert messages[0]["role"] == "system" and f"```{language}" in messages[0]["content"]
        text = tokenizer.decode(encode_prompt(tokenizer, p))
        assert text.startswith("<|im_start|>system\n") and "Print 42." in text
        assert text.endswith("<|im_start|>assistant\n")


def test_parse_chatml_round_trip():
    text = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nSolve it\n<|im_start|>assistant\n"
    assert parse_chatml(text) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Solve it"},
    ]


# ---- metrics ---------------------------------------------------------------------------------------------
def test_logprob_mismatch_by_hand():
    rollout = torch.tensor([[-1.0, -2.0, 0.0]])
    trainer = torch.tensor([[-1.0, -1.5, 5.0]])
    mask = torch.tensor([[1, 1, 0]])
    m = logprob_mismatch(rollout, trainer, mask)
    # d = trainer - rollout on masked tokens = [0, 0.5]
    assert m["rollout/logprob_diff_abs_mean"] == pytest.approx(0.25)
    assert m["rollout/logprob_diff_abs_max"] == pytest.approx(0.5)
    assert m["rollout/logprob_diff_mean"] == pytest.approx(0.25)
    assert m["rollout/logprob_ratio_dev"] == pytest.approx((math.exp(0.5) - 1) / 2)
    assert m["rollout/logprob_kl_k3"] == pytest.approx((math.exp(0.5) - 1.5) / 2)
    assert m["rollout/logprob_tokens"] == 2
    empty = logprob_mismatch(rollout, trainer, torch.zeros_like(mask), prefix="")
    assert empty["logprob_diff_abs_max"] == 0.0 and empty["logprob_tokens"] == 0
    with pytest.raises(ValueError, match="shapes differ"):
        logprob_mismatch(rollout, trainer[:, :2], mask)


def test_from_pretrained_loads_a_saved_model(model, tokenizer, tmp_path):
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded = TransformersEngine.from_pretrained(str(tmp_path), batch_size=4)
    sampling = SamplingParams(temperature=0.0, max_new_tokens=6)
    expected = TransformersEngine(model, tokenizer).generate(PROMPTS, sampling)
    out = loaded.generate(PROMPTS, sampling)
    assert [c.token_ids for c in out] == [c.token_ids for c in expected]
    assert [c.text for c in out] == [c.text for c in expected]


def test_the_stream_gives_a_batch_at_a_time_and_the_same_samples(model, tokenizer):
    engine = TransformersEngine(model, tokenizer, batch_size=4)
    sampling = SamplingParams(n=3, temperature=1.0, max_new_tokens=5, seed=11)
    batches = list(engine.generate_stream(PROMPTS, sampling))
    assert [len(b) for b in batches] == [4, 4, 1]  # 9 sequences, batch_size 4
    streamed = sorted((c for b in batches for c in b), key=lambda c: (c.prompt_index, c.sample_index))
    whole = engine.generate(PROMPTS, sampling)
    assert [(c.prompt_index, c.sample_index, c.token_ids, c.logprobs) for c in streamed] == [
        (c.prompt_index, c.sample_index, c.token_ids, c.logprobs) for c in whole
    ]


def test_a_phases_engine_numbers_cover_every_call_in_it():
    """Self-repair in lock-step makes one generate call per turn: the phase's decode steps and mean batch
    are over all of them (not the last call's), per worker, and engines without numbers add nothing."""

    def stats(steps, batch_sum, cached=0.0, kv=1000.0, preempted=0.0, context=0.0, shared=0.0, resume=0.0):
        return {
            "decode_steps": steps,
            "decode_batch_sum": batch_sum,
            "cached_tokens": cached,
            "kv_cache_tokens": kv,
            "preemptions": preempted,
            "decode_context_sum": context,
            "decode_shared_tokens": shared,
            "resume_s": resume,
            "prefill_s": steps / 1000,
            "decode_s": steps / 100,
            "graph_capture_s": steps / 400,
        }

    turn1 = [stats(100, 6400, resume=0.5), stats(80, 4000, kv=900, resume=0.75)]  # two workers
    turn2 = [
        stats(50, 1000, cached=320, preempted=1, context=800, shared=600),
        stats(60, 1200, cached=160, context=200),
    ]
    m = engine_metrics([turn1, turn2])
    assert m["rollout/decode_shared_frac"] == 600 / 1000  # context tokens read once per group, of all
    assert m["rollout/decode_steps"] == 150  # worker 0: 100 + 50; worker 1: 140
    assert m["rollout/decode_batch_mean"] == (6400 + 4000 + 1000 + 1200) / (100 + 80 + 50 + 60)
    assert m["rollout/prefix_cached_tokens"] == 480 and m["rollout/preemptions"] == 1
    assert m["rollout/kv_cache_tokens"] == 900
    # seconds: the slowest worker's sum over the calls (worker 1 resumed slower, worker 0 decoded longer)
    assert m["rollout/resume_s"] == 0.75
    assert m["rollout/decode_s"] == pytest.approx(1.5) and m["rollout/prefill_s"] == pytest.approx(0.15)
    assert m["rollout/graph_capture_s"] == pytest.approx(150 / 400)
    assert engine_metrics([[{}, {}]]) == {} and engine_metrics([]) == {}
