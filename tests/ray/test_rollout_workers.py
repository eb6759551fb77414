"""Several rollout workers behind one `generate`: whole GRPO groups per worker, completions back in order,
each worker's share exactly what that worker's engine draws for it; one weight sync reaches every worker."""

import functools
from dataclasses import replace

import pytest
import ray

from codefu.errors import CodefuError
from codefu.models.tiny import tiny_model, tiny_tokenizer
from codefu.orchestrator.roles import RolloutWorkers, split_prompts, worker_seed
from codefu.rollout import EngineConfig, NativeEngine, SamplingParams, TransformersEngine
from codefu.rollout.actor import RolloutWorker, make_rollout_actor
from helpers.ray_actors import kill_and_wait

PROMPTS = [[1, 40, 41, 42], [1, 50, 51], [1, 60], [1, 61, 62, 63, 64], [1, 70, 71]]
SAMPLING = SamplingParams(n=3, temperature=0.9, max_new_tokens=6, seed=5)


def summary(completions):
    return [(c.prompt_index, c.sample_index, tuple(c.prompt_ids), tuple(c.token_ids)) for c in completions]


def test_split_prompts_is_balanced_and_contiguous():
    assert split_prompts(5, 2) == [range(0, 3), range(3, 5)]
    assert split_prompts(8, 4) == [range(2 * i, 2 * i + 2) for i in range(4)]
    assert split_prompts(1, 3) == [range(0, 1), range(1, 1), range(1, 1)]
    assert worker_seed(7, 0) == 7 and worker_seed(7, 1) != 7 and worker_seed(None, 3) is None


def test_two_workers_generate_in_order_and_all_load_weights(local_ray):
    factory = functools.partial(TransformersEngine, tiny_model(seed=0), tiny_tokenizer(), batch_size=4)
    actors = [make_rollout_actor(factory, num_cpus=0.5) for _ in range(2)]
    try:
        workers = RolloutWorkers(actors)
        got = workers.generate(PROMPTS, SAMPLING)
        # complete and ordered exactly as one worker returns them: prompt by prompt, samples in order
        assert [(c.prompt_index, c.sample_index) for c in got] == [(p, s) for p in range(5) for s in range(3)]
        assert all(c.prompt_ids == PROMPTS[c.prompt_index] for c in got)

        # each worker's run (prompts 0-2, then 3-4) is what its engine draws with its seed
        local = RolloutWorker(factory)

        def expected():
            out = []
            for w, run in enumerate(split_prompts(len(PROMPTS), 2)):
                seed = worker_seed(SAMPLING.seed, w)
                part = local.generate(PROMPTS[run.start : run.stop], replace(SAMPLING, seed=seed))
                out += [replace(c, prompt_index=c.prompt_index + run.start) for c in part]
            return summary(out)

        assert summary(got) == expected()
        # a single worker (seed unchanged) gives its own, also complete and ordered, draw
        single = RolloutWorkers(actors[:1]).generate(PROMPTS, SAMPLING)
        assert summary(single) == summary(local.generate(PROMPTS, SAMPLING))

        # one state dict, put once, reaches both workers
        new_state = tiny_model(seed=1).state_dict()
        workers.load_weights(new_state)
        local.load_weights(new_state)
        after = workers.generate(PROMPTS, SAMPLING)
        assert summary(after) == expected() != summary(got)
        for w, actor in enumerate(actors):  # each worker on its own: the new weights, not the old
            s = replace(SAMPLING, seed=11 + w)
            remote = ray.get(actor.generate.remote(PROMPTS[:2], s))
            assert summary(remote) == summary(local.generate(PROMPTS[:2], s))
    finally:
        for a in actors:
            ray.kill(a)


def test_two_workers_stream_completions_as_they_finish(local_ray):
    """generate_stream: each worker's batches as its engine finishes them (here a batch of 4 sequences at a
    time), prompt indices counted over all prompts; together exactly what generate returns."""
    factory = functools.partial(TransformersEngine, tiny_model(seed=0), tiny_tokenizer(), batch_size=4)
    actors = [make_rollout_actor(factory, num_cpus=0.5) for _ in range(2)]
    try:
        workers = RolloutWorkers(actors)
        batches = list(workers.generate_stream(PROMPTS, SAMPLING))
        # worker 0: prompts 0-2 x 3 samples = 9 sequences (4 + 4 + 1); worker 1: 6 (4 + 2)
        assert sorted(len(b) for b in batches) == [1, 2, 4, 4, 4]
        streamed = sorted((c for b in batches for c in b), key=lambda c: (c.prompt_index, c.sample_index))
        assert summary(streamed) == summary(workers.generate(PROMPTS, SAMPLING))
    finally:
        for a in actors:
            ray.kill(a)


def native_factory():
    config = EngineConfig(model="(in memory)", engine="native", kv_cache_tokens=2048)
    return functools.partial(NativeEngine.from_hf_model, tiny_model(seed=0), tiny_tokenizer(), config)


def test_conversations_put_each_follow_up_on_the_worker_of_the_turn_before(local_ray):
    """Self-repair turns as they come (rollout.async_turns): two native-engine workers stream their
    prompts' completions; a follow-up of each goes to the worker that wrote it, whose prefix cache holds
    the conversation so far, and is what a local engine writes for it; the streams end on close. Closing
    before anything came ends them too."""
    long_prompts = [[1, *range(40 + 20 * i, 58 + 20 * i)] for i in range(4)]  # 19 tokens: a full block
    greedy = SamplingParams(n=1, temperature=0.0, max_new_tokens=6)
    actors = [make_rollout_actor(native_factory(), num_cpus=0.5) for _ in range(2)]
    try:
        conversations = RolloutWorkers(actors).conversations(long_prompts, greedy)
        first, later, expected_cache = {}, {}, [0, 0]
        for batch in conversations:
            for c in batch:
                if c.prompt_index < len(long_prompts):
                    first[c.prompt_index] = c
                    index = len(long_prompts) + c.prompt_index
                    conversations.follow_up(index, c.prompt_ids + c.token_ids + [5, 6], after=c.prompt_index)
                    worker = 0 if c.prompt_index < 2 else 1  # split_prompts(4, 2)
                    expected_cache[worker] += (len(c.prompt_ids) + len(c.token_ids) - 1) // 16 * 16
                else:
                    later[c.prompt_index] = c
            if len(later) == len(long_prompts):
                conversations.close()
        assert sorted(first) == [0, 1, 2, 3] and sorted(later) == [4, 5, 6, 7]
        local = native_factory()()
        for index, c in later.items():
            before = first[index - len(long_prompts)]
            assert c.prompt_ids == before.prompt_ids + before.token_ids + [5, 6]
            assert c.token_ids == local.generate([c.prompt_ids], greedy)[0].token_ids
        cached = [ray.get(a.stats.remote())["cached_tokens"] for a in actors]
        assert cached == expected_cache and min(cached) > 0

        early = RolloutWorkers(actors).conversations(long_prompts, greedy)
        early.close()
        assert sorted(c.prompt_index for b in early for c in b) == [0, 1, 2, 3]
    finally:
        for a in actors:
            ray.kill(a)


def test_weights_carry_their_version_into_every_completion(local_ray):
    factory = functools.partial(TransformersEngine, tiny_model(seed=0), tiny_tokenizer(), batch_size=4)
    workers = RolloutWorkers([make_rollout_actor(factory, num_cpus=0.5) for _ in range(2)])
    try:
        assert {c.policy_version for c in workers.generate(PROMPTS, SAMPLING)} == {0}  # the model it loaded
        workers.load_weights(tiny_model(seed=1).state_dict(), version=3)
        assert {c.policy_version for c in workers.generate(PROMPTS, SAMPLING)} == {3}
        workers.load_weights(None, version=4)  # the same weights, the next version (a step without update)
        streamed = [c for batch in workers.generate_stream(PROMPTS, SAMPLING) for c in batch]
        assert len(streamed) == 15 and {c.policy_version for c in streamed} == {4}
    finally:
        for a in workers.actors:
            ray.kill(a)


def test_a_stalled_weight_load_fails_naming_the_worker_and_its_node(local_ray):
    factory = functools.partial(TransformersEngine, tiny_model(seed=0), tiny_tokenizer(), batch_size=64)
    workers = RolloutWorkers([make_rollout_actor(factory, num_cpus=0.5)])
    try:
        workers.generate(PROMPTS[:1], SAMPLING)  # started
        # a long generation holds the worker: a weight load queued behind it stalls past its limit
        busy = workers.actors[0].generate.remote(PROMPTS * 12, replace(SAMPLING, max_new_tokens=400))
        with pytest.raises(
            CodefuError,
            match=r"rollout workers 0 \(node \d+\.\d+\.\d+\.\d+, node id \w+\) did "
            r"not load the weights within 0.5 s \(loop.weight_sync_timeout_s\)",
        ):
            workers.load_weights(None, version=1, timeout_s=0.5)
        ray.get(busy)
    finally:
        ray.kill(workers.actors[0])


def test_a_dead_worker_is_reported_with_its_node(local_ray):
    factory = functools.partial(TransformersEngine, tiny_model(seed=0), tiny_tokenizer(), batch_size=4)
    workers = RolloutWorkers([make_rollout_actor(factory, num_cpus=0.5)])
    workers.generate(PROMPTS[:1], SAMPLING)
    kill_and_wait(workers.actors[0])
    with pytest.raises(
        CodefuError,
        match=r"rollout worker 0 \(node \d+\.\d+\.\d+\.\d+, node id \w+\) died "
        r"while asked to load the weights",
    ):
        workers.load_weights(None, version=1, timeout_s=30)
