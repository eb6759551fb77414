"""The staleness bookkeeping of the off-policy modes, as pure functions: the bound each mode means, the
config rules that name the key, the per-step staleness metrics, and the checks that refuse samples past the
bound or written with other weights than the workers were sent."""

from __future__ import annotations

import pytest

from codefu.errors import CodefuError
from codefu.orchestrator.config import LoopConfig, RunConfig, check_run_config
from codefu.orchestrator.episodes import Episode
from codefu.orchestrator.off_policy import check_bound, check_served
from codefu.orchestrator.samplers import Sampled, staleness_metrics
from codefu.rollout.types import Completion


def completion(version: int | None, tokens: int = 4) -> Completion:
    return Completion(0, 0, [1], [5] * tokens, "x", [0.0] * tokens, policy_version=version)


def sampled_of(*completions: Completion) -> Sampled:
    episodes = [Episode(c.prompt_index, c.sample_index, c.prompt_ids, [c]) for c in completions]
    return Sampled(completions=list(completions), episodes=episodes, all_episodes=episodes)


def test_each_mode_means_its_bound():
    assert LoopConfig().staleness_bound == 0
    assert LoopConfig(mode="one_step_off").staleness_bound == 1
    assert LoopConfig(mode="async").staleness_bound == 2
    assert LoopConfig(mode="async", max_staleness=0).staleness_bound == 0
    assert LoopConfig(mode="async", max_staleness=5).staleness_bound == 5


@pytest.mark.parametrize(
    "loop,message",
    [
        (LoopConfig(mode="later"), "loop.mode must be one of sync, one_step_off, async, got 'later'"),
        (LoopConfig(mode="async", max_staleness=-1), "loop.max_staleness must be >= 0"),
        (LoopConfig(max_staleness=1), "loop.max_staleness must be null unless loop.mode is async"),
        (LoopConfig(mode="one_step_off", max_staleness=1), "loop.max_staleness must be null unless"),
        (LoopConfig(weight_sync_timeout_s=0), "loop.weight_sync_timeout_s must be > 0"),
    ],
)
def test_bad_loop_settings_name_their_key(loop, message):
    with pytest.raises(CodefuError, match=message.replace("(", r"\(")):
        check_run_config(RunConfig(loop=loop))


def test_staleness_metrics_count_samples_and_tokens_per_version():
    got = staleness_metrics([completion(5, 2), completion(4, 6), completion(4, 2), completion(None)], step=5)
    assert got == {
        "async/staleness_mean": 2 / 3,
        "async/staleness_max": 1.0,
        "async/partial_samples": 0.0,
        "async/staleness_0_samples": 1 / 3,
        "async/staleness_0_tokens": 0.2,
        "async/staleness_1_samples": 2 / 3,
        "async/staleness_1_tokens": 0.8,
    }
    assert staleness_metrics([completion(None)], step=3) == {}


def test_a_sample_updated_mid_generation_counts_its_tokens_by_their_own_version():
    # 3 tokens of version 3 then 5 of version 4 (the weights came while it was written), masked feedback
    # tokens not counted; and a whole sample of version 4
    partial = Completion(0, 0, [1], [5] * 9, "x", [0.0] * 9, policy_version=3)
    partial.token_versions = [3, 3, 3, 3, 4, 4, 4, 4, 4]
    partial.loss_mask = [1, 1, 1, 0, 1, 1, 1, 1, 1]  # one feedback token (an episode's)
    got = staleness_metrics([partial, completion(4, 4)], step=4)
    assert got["async/staleness_max"] == 1.0 and got["async/staleness_mean"] == 0.5
    assert got["async/partial_samples"] == 0.5
    assert got["async/staleness_1_samples"] == 0.5 and got["async/staleness_0_samples"] == 0.5
    assert got["async/staleness_1_tokens"] == 3 / 12 and got["async/staleness_0_tokens"] == 9 / 12


def test_samples_past_the_bound_or_unversioned_are_refused():
    sampled = sampled_of(completion(3), completion(4))
    check_bound(sampled, step=5, bound=2)
    with pytest.raises(
        CodefuError, match="step 6 got samples of version 3, 3 versions behind; the bound is 2"
    ):
        check_bound(sampled, step=6, bound=2)
    with pytest.raises(CodefuError, match="step 3 got 1 samples without a policy version"):
        check_bound(sampled_of(completion(None), completion(3)), step=3, bound=2)


def test_samples_written_with_other_weights_than_were_sent_are_refused():
    check_served(sampled_of(completion(7), completion(7)), 9, 7, 7)
    updated = completion(7, 3)
    updated.token_versions = [7, 8, 8]  # weights 8 came in flight
    check_served(sampled_of(updated), 9, 7, 8)
    with pytest.raises(
        CodefuError,
        match=r"step 9: rollout workers wrote samples with weights \[6\] while they held versions 7 to 7",
    ):
        check_served(sampled_of(completion(7), completion(6)), 9, 7, 7)
    with pytest.raises(CodefuError, match=r"weights \[8\] while they held versions 7 to 7"):
        check_served(sampled_of(updated), 9, 7, 7)
    with pytest.raises(CodefuError, match="served other weights than it acknowledged"):
        check_served(sampled_of(completion(None)), 9, 7, 7)
