"""The rollout actor on a local Ray cluster: same completions as the engine in-process, weight sync (also
while a generation runs)."""

import functools
import threading
import time

import ray
import torch

from codefu.models.tiny import tiny_model, tiny_tokenizer
from codefu.rollout import EngineConfig, NativeEngine, SamplingParams, TransformersEngine
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


def rare_eos(model):
    """`model` whose samples run ~3.5x longer: its logits (std ~0.15 at random init) spread 10x, EOS's
    fixed at 0, so EOS is sampled ~1/430 a step instead of ~1/128 (measured on random contexts). A long
    tail of decode steps, so that a call made during a generation comes back before it ends even on a
    loaded machine. Positions up to 4,096: the native engine caps a sequence at the model's
    max_position_embeddings (512 would end every sample at ~508 tokens)."""
    model.config.max_position_embeddings = 4096
    with torch.no_grad():
        model.lm_head.weight.mul_(10.0)
        model.lm_head.weight[model.config.eos_token_id] = 0.0
    return model


class Streamed(threading.Thread):
    """An actor's generate_stream read on a thread of its own: the batches, and when each came."""

    def __init__(self, actor, prompts, sampling) -> None:
        super().__init__(daemon=True)
        self.refs = actor.generate_stream.remote(prompts, sampling)
        self.batches: list[tuple[float, list]] = []
        self.first = threading.Event()

    def run(self) -> None:
        for ref in self.refs:
            self.batches.append((time.monotonic(), ray.get(ref)))
            self.first.set()

    def completions(self) -> list:
        self.join(180)  # a long stream on a loaded 2-core machine
        assert not self.is_alive()
        return [c for _, batch in self.batches for c in batch]


def test_weights_in_flight_through_the_actor(local_ray):
    """load_weights_in_flight while a generate_stream runs: the native engine takes the weights at a step
    boundary (the call returns before the stream ends; completions carry both versions, policy_version
    their oldest token's); the transformers engine cannot be interrupted: the call returns only after the
    generation, whose completions are all of the version it started with and untouched by the load."""
    new_state = tiny_model(seed=1).state_dict()
    # 16 samples of up to 4 + 2,000 tokens: 2,016 of the cache's 2,048 blocks, none preempted
    config = EngineConfig(model="(in memory)", engine="native", kv_cache_tokens=32768)
    long_state = rare_eos(tiny_model(seed=1)).state_dict()
    hf_factory = functools.partial(TransformersEngine, tiny_model(seed=0), tiny_tokenizer(), batch_size=2)
    native_factory = functools.partial(NativeEngine.from_hf_model, rare_eos(tiny_model(seed=0)), None, config)
    native, hf = make_rollout_actor(native_factory), make_rollout_actor(hf_factory)  # both start at once
    accepts = ray.get([native.accepts_weights_in_flight.remote(), hf.accepts_weights_in_flight.remote()])
    assert accepts == [True, False]

    # with this seed the first sample ends at 4 tokens and the rest run hundreds to thousands more (seconds
    # on an idle machine, under the new weights too): the load, sent after the first, has that long to
    # come back
    long = SamplingParams(n=16, temperature=1.0, max_new_tokens=2000, seed=0)
    stream = Streamed(native, [[1, 40, 41, 42]], long)
    stream.start()
    assert stream.first.wait(60)
    ray.get(native.load_weights_in_flight.remote(long_state, 1))
    loaded_at = time.monotonic()
    out = stream.completions()
    # it did not wait for the stream (timing: a failure says by how much, and where the batches came)
    came = [round(t - loaded_at, 2) for t, _ in stream.batches]
    assert loaded_at < stream.batches[-1][0], f"batches came at {came} s from the load's return"
    assert all(c.token_versions == [0] * c.num_tokens for c in stream.batches[0][1])
    versions = [(c.num_tokens, c.token_versions.index(1) if 1 in c.token_versions else None) for c in out]
    assert any(set(c.token_versions) == {0, 1} for c in out), f"(tokens, first of version 1): {versions}"
    assert all(c.policy_version == min(c.token_versions) for c in out)
    after = ray.get(native.generate.remote([[1, 40, 41, 42]], SAMPLING))
    assert all(c.policy_version == 1 and set(c.token_versions) == {1} for c in after)
    ray.kill(native)

    sampling = SamplingParams(n=6, temperature=1.0, max_new_tokens=100, seed=0)  # 3 batches of 2
    stream = Streamed(hf, [[1, 40, 41, 42]], sampling)
    stream.start()
    assert stream.first.wait(60)
    ray.get(hf.load_weights_in_flight.remote(new_state, 1))
    loaded_at = time.monotonic()
    out = stream.completions()
    assert len(stream.batches) == 3 and loaded_at > stream.batches[-1][0]  # after the whole stream
    assert all(c.policy_version == 0 and c.token_versions is None for c in out)
    expected = RolloutWorker(hf_factory).generate([[1, 40, 41, 42]], sampling)  # old weights throughout
    assert summary(sorted(out, key=lambda c: c.sample_index)) == summary(expected)
    after = ray.get(hf.generate.remote([[1, 40, 41, 42]], sampling))
    assert all(c.policy_version == 1 for c in after) and summary(after) != summary(expected)
    ray.kill(hf)
