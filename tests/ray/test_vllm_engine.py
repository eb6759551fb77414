"""The vLLM rollout engine (vLLM's CPU build, in its own environment) through the rollout actor that
runs in that environment's Python, against transformers in this process: the engine contract (n samples
in order, log-probs of the trainer's convention, greedy tokens, stop tokens), weight sync in place checked
by log-prob agreement after one sync and after several, follow-ups, and the clear errors."""

from __future__ import annotations

import pytest
import ray
import torch

from codefu.models.tiny import tiny_tokenizer
from codefu.rollout import EngineConfig, SamplingParams
from codefu.rollout.actor import make_rollout_actor
from codefu.rollout.follow_ups import FollowUp
from codefu.rollout.vllm_engine import vllm_problem
from helpers.native_models import forward_logprobs, hf_greedy, tiny_hf
from helpers.stops import pick_stops
from helpers.vllm import vllm_python

pytestmark = pytest.mark.slow

# head_dim 32: vLLM's CPU attention takes 32, 64, 80, 96, 112, 128, 256 (not the tiny models' 16)
SIZE = dict(hidden_size=128, intermediate_size=192, max_position_embeddings=512)
PROMPTS = [[11, 12, 13], list(range(100, 140)), list(range(200, 221))]


def model(kind: str, seed: int = 0):
    return tiny_hf(kind, seed=seed, **SIZE)


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def served(request, local_ray, tmp_path_factory):
    """(transformers model, the actor serving it with vLLM)."""
    hf = model(request.param)
    folder = tmp_path_factory.mktemp(request.param)
    hf.save_pretrained(folder)
    tiny_tokenizer().save_pretrained(folder)
    config = EngineConfig(
        model=str(folder), engine="vllm", vllm_python=vllm_python(), dtype="float32", max_model_len=512
    )
    # no CPU reserved: actors other tests of this Ray cluster left behind must not keep it from starting
    actor = make_rollout_actor(config, num_cpus=0)
    assert ray.get(actor.ping.remote(), timeout=300)["engine"] == "VllmEngine"
    yield hf, actor
    ray.kill(actor)


def worst_logprob_gap(hf, completions, temperature: float) -> float:
    return max(
        float(
            (torch.tensor(c.logprobs) - forward_logprobs(hf, c.prompt_ids, c.token_ids, temperature))
            .abs()
            .max()
        )
        for c in completions
    )


def test_samples_in_order_with_the_trainers_logprobs(served):
    hf, actor = served
    out = ray.get(
        actor.generate.remote(PROMPTS, SamplingParams(n=3, temperature=0.8, max_new_tokens=16, seed=1))
    )
    assert [(c.prompt_index, c.sample_index) for c in out] == [(p, s) for p in range(3) for s in range(3)]
    eos = tiny_tokenizer().eos_token_id
    for c in out:
        assert c.prompt_ids == PROMPTS[c.prompt_index]
        ended = c.finish_reason == "stop" and c.token_ids[-1] == eos and eos not in c.token_ids[:-1]
        assert ended or (c.finish_reason == "length" and len(c.token_ids) == 16 and eos not in c.token_ids)
    assert len({tuple(c.token_ids) for c in out[:3]}) > 1  # independent samples of one prompt
    assert worst_logprob_gap(hf, out, 0.8) < 1e-4
    assert all(c.policy_version == 0 for c in out)


def test_greedy_tokens_and_stop_tokens_are_transformers(served):
    """Greedy equals transformers' with the same stops: the tokenizer's EOS (the engines stop at every
    EOS id of the model's configs and tokenizer) and stop tokens hit at different steps."""
    hf, actor = served
    eos = (tiny_tokenizer().eos_token_id,)
    full = [hf_greedy(hf, p, 16, eos) for p in PROMPTS]
    stop = pick_stops(full, min_ended=2)
    sampling = SamplingParams(n=1, temperature=0.0, max_new_tokens=16, stop_token_ids=stop)
    out = ray.get(actor.generate.remote(PROMPTS, sampling))
    reasons = set()
    for c in out:
        ref = hf_greedy(hf, PROMPTS[c.prompt_index], 16, stop + eos)
        assert c.token_ids == ref, c.prompt_index
        assert c.finish_reason == ("stop" if ref[-1] in stop + eos else "length")
        reasons.add(c.finish_reason)
    assert "stop" in reasons
    assert worst_logprob_gap(hf, out, 1.0) < 1e-4  # greedy reports temperature-1 log-probs


def test_weight_sync_in_place_keeps_the_logprobs_the_trainers(served):
    """After one sync and after several, the engine's log-probs are those of the weights sent (the
    prefix cache, filled by the old weights, must not serve the new ones)."""
    hf, actor = served
    kind = hf.config.model_type
    sampling = SamplingParams(n=2, temperature=1.0, max_new_tokens=12, seed=4)
    for version, seed in enumerate([1, 2, 3, 4, 0], start=1):
        new = model(kind, seed=seed)
        state = new.state_dict()
        if new.config.tie_word_embeddings and version % 2:
            del state["lm_head.weight"]  # a tied model's export holds the embeddings once: both must do
        ray.get(actor.load_weights.remote(state, version))
        out = ray.get(actor.generate.remote(PROMPTS, sampling))
        assert worst_logprob_gap(new, out, 1.0) < 1e-4, version
        assert {c.policy_version for c in out} == {version}
    # back at the first weights: the first test's samples again (same seed, same weights)
    again = ray.get(
        actor.generate.remote(PROMPTS, SamplingParams(n=3, temperature=0.8, max_new_tokens=16, seed=1))
    )
    assert worst_logprob_gap(hf, again, 0.8) < 1e-4


def test_follow_ups_come_after_the_batch(served):
    hf, actor = served
    sampling = SamplingParams(n=1, temperature=0.0, max_new_tokens=8)
    stream = actor.generate_stream.remote(PROMPTS[:2], sampling, "repair")
    first = ray.get(next(stream))
    follow_up = FollowUp(index=9, prompt=first[0].prompt_ids + first[0].token_ids + [5, 6])
    ray.get(actor.follow_up.remote("repair", [follow_up]))
    ray.get(actor.end_follow_ups.remote("repair"))
    rest = [c for ref in stream for c in ray.get(ref)]
    assert [c.prompt_index for c in first] == [0, 1] and [c.prompt_index for c in rest] == [9]
    assert rest[0].token_ids == hf_greedy(hf, rest[0].prompt_ids, 8, (tiny_tokenizer().eos_token_id,))


def test_top_p_is_refused_and_a_missing_vllm_is_named(served, tmp_path):
    _, actor = served
    with pytest.raises(ray.exceptions.RayTaskError, match="top_p=0.9.*renormalised"):
        ray.get(actor.generate.remote(PROMPTS, SamplingParams(top_p=0.9, max_new_tokens=4)))
    assert vllm_problem(vllm_python()) is None
    assert "does not exist" in vllm_problem(str(tmp_path / "python"))
    assert "cannot import" in vllm_problem("/usr/bin/python3")  # no vLLM, codefu or Ray there
