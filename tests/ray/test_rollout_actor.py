"""The rollout actor on a local Ray cluster: same completions as the engine in-process, weight sync."""

import functools

import ray

from codefu.models.tiny import tiny_model, tiny_tokenizer
from codefu.rollout import SamplingParams, TransformersEngine
from codefu.rollout.actor import RolloutWorker, make_rollout_actor

PROMPTS = [[1, 40, 41, 42], [1, 50, 51, 52, 53, 54, 55, 56], [1, 60]]
SAMPLING = SamplingParams(n=2, temperature=0.8, top_p=0.9, max_new_tokens=12, seed=11)


def summary(completions):
    return [(c.prompt_index, c.sample_index, c.token_ids, c.finish_reason) for c in completions]


def test_actor_generates_like_the_engine_in_process(local_ray):
    factory = functools.partial(TransformersEngine, tiny_model(seed=0), tiny_tokenizer(), batch_size=8)
    local = RolloutWorker(factory)
    actor = make_rollout_actor(factory)
    assert ray.get(actor.ping.remote())["engine"] == "TransformersEngine"

    remote = ray.get(actor.generate.remote(PROMPTS, SAMPLING))
    expected = local.generate(PROMPTS, SAMPLING)
    assert summary(remote) == summary(expected)
    for r, e in zip(remote, expected, strict=True):
        assert max(abs(a - b) for a, b in zip(r.logprobs, e.logprobs, strict=True)) < 1e-4
        assert r.text == e.text

    new_state = tiny_model(seed=1).state_dict()
    ray.get(actor.load_weights.remote(new_state))
    local.load_weights(new_state)
    after = ray.get(actor.generate.remote(PROMPTS, SAMPLING))
    assert summary(after) == summary(local.generate(PROMPTS, SAMPLING)) != summary(remote)
    ray.kill(actor)
