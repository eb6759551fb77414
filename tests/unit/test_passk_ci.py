"""codefu.observability.passk intervals: the percentile bootstrap over problems, paired comparisons, and
the interval metric keys. Every random draw is seeded: no assert here can flip between runs."""

import random

import numpy as np
import pytest

from codefu.observability.metrics import check_names
from codefu.observability.passk import (
    bootstrap_mean_ci,
    ci_keys,
    paired_difference,
    pass_at_k_ci,
    pass_at_k_table,
    passk_ci_metrics,
    passk_metrics_with_ci,
    per_problem_pass_at_k,
)
from codefu.observability.prometheus import gauge_samples
from codefu.observability.report import pass_at_k_keys


def sampled(problems: int, n: int, p: float | list[float], seed: int) -> dict[str, list[bool]]:
    """{problem: n Bernoulli(p_problem) draws}; p a list: each problem's p drawn from it uniformly."""
    rng = random.Random(seed)
    out = {}
    for i in range(problems):
        q = rng.choice(p) if isinstance(p, list) else p
        out[f"p{i:04d}"] = [rng.random() < q for _ in range(n)]
    return out


def test_the_interval_holds_the_point_estimate():
    for seed in range(5):
        results = sampled(30, 8, [0.05, 0.3, 0.7], seed)
        for k in (1, 4, 8):
            low, high = pass_at_k_ci(results, k, resamples=2000, seed=seed)
            assert low <= pass_at_k_table(results, [k])[k] <= high
            assert 0.0 <= low < high <= 1.0


def test_the_interval_shrinks_as_problems_grow():
    widths = []
    for problems in (20, 80, 320):
        low, high = pass_at_k_ci(sampled(problems, 4, [0.1, 0.5, 0.9], seed=1), 1, resamples=2000)
        widths.append(high - low)
    assert widths[0] > widths[1] > widths[2] > 0
    assert widths[0] / widths[2] == pytest.approx(4, rel=0.35)  # width ~ 1/sqrt(problems)


@pytest.mark.parametrize("correct", [0, 2, 4])
def test_all_problems_alike_give_a_zero_width_interval(correct):
    results = {f"p{i}": [True] * correct + [False] * (4 - correct) for i in range(50)}
    for k in (1, 2, 4):
        point = pass_at_k_table(results, [k])[k]
        assert pass_at_k_ci(results, k) == (point, point)
    assert bootstrap_mean_ci([0.25]) == (0.25, 0.25)


def test_two_problems_by_hand():
    # bootstrap means of {0, 1} are 0, 1/2, 1 with probability 1/4, 1/2, 1/4: the 95% ends are 0 and 1,
    # the 50% ends both 1/2
    assert bootstrap_mean_ci([0.0, 1.0]) == (0.0, 1.0)
    assert bootstrap_mean_ci([0.0, 1.0], confidence=0.4) == (0.5, 0.5)


def test_determinism_by_seed_and_not_by_mapping_order():
    results = sampled(40, 4, [0.2, 0.6], seed=2)
    first = pass_at_k_ci(results, 2, seed=7)
    assert pass_at_k_ci(results, 2, seed=7) == first
    assert pass_at_k_ci(dict(reversed(list(results.items()))), 2, seed=7) == first
    values = np.random.default_rng(0).random(50)  # continuous: another seed moves the ends
    assert bootstrap_mean_ci(values, seed=1) != bootstrap_mean_ci(values, seed=2)
    a, b = sampled(40, 4, 0.5, seed=3), sampled(40, 4, 0.4, seed=4)
    assert paired_difference(a, b, 1, seed=5) == paired_difference(a, b, 1, seed=5)


def test_more_resamples_than_one_chunk_are_deterministic_too():
    values = np.random.default_rng(0).random(4000)  # 4000 values: 524 resamples per chunk
    assert bootstrap_mean_ci(values, resamples=1200, seed=3) == bootstrap_mean_ci(
        values, resamples=1200, seed=3
    )


@pytest.mark.parametrize("k, true_value", [(1, 0.3), (2, 1 - 0.7**2), (4, (1 - 0.9**4 + 1 - 0.5**4) / 2)])
def test_coverage_of_a_known_binomial_case(k, true_value):
    # 300 evaluations of 40 problems x 4 samples; the k=4 case mixes two kinds of problem (p = 0.1 or 0.5,
    # half each), so its true pass@4 is the mean of 1 - (1 - p)^4 over them. A 95% interval should hold the
    # true value about 95% of the time (the percentile bootstrap runs a little narrow at 40 problems).
    p = [0.1, 0.5] if k == 4 else 0.3
    hits = 0
    trials = 300
    for t in range(trials):
        low, high = pass_at_k_ci(sampled(40, 4, p, seed=1000 * k + t), k, resamples=1000, seed=t)
        hits += low <= true_value <= high
    assert 0.89 <= hits / trials <= 0.99, hits / trials


def test_paired_difference_of_a_clear_improvement_excludes_zero():
    a = sampled(60, 8, 0.6, seed=10)
    b = sampled(60, 8, 0.3, seed=11)
    d = paired_difference(a, b, 1)
    assert d["problems"] == 60 and d["only_a"] == d["only_b"] == 0 and d["k"] == 1
    assert d["diff"] == pytest.approx(d["a"] - d["b"])
    assert d["a"] == pytest.approx(pass_at_k_table(a, [1])[1])
    assert 0 < d["ci_low"] <= d["diff"] <= d["ci_high"]
    assert d["better"] + d["worse"] + d["equal"] == 60 and d["better"] > d["worse"]
    reverse = paired_difference(b, a, 1)
    assert reverse["ci_high"] < 0 and reverse["better"] == d["worse"]


def test_paired_difference_of_identical_models_includes_zero():
    a = sampled(60, 8, [0.1, 0.5, 0.9], seed=12)
    d = paired_difference(a, dict(a), 4)
    assert (d["diff"], d["ci_low"], d["ci_high"]) == (0.0, 0.0, 0.0)
    assert d["equal"] == 60 and d["better"] == d["worse"] == 0
    # two samplings of the same model: a spread around zero that holds it
    d = paired_difference(sampled(60, 8, 0.4, seed=13), sampled(60, 8, 0.4, seed=14), 1)
    assert d["ci_low"] < 0 < d["ci_high"]


def test_paired_difference_by_hand():
    a = {"x": [True, True], "y": [True, False], "z": [False, False], "only-a": [True, True]}
    b = {"x": [True, False], "y": [True, False], "z": [True, True], "only-b": [False, False]}
    d = paired_difference(a, b, 1)
    # pass@1: a = (1, 0.5, 0), b = (0.5, 0.5, 1) on x, y, z
    assert d["problems"] == 3 and d["only_a"] == 1 and d["only_b"] == 1
    assert d["diff"] == pytest.approx((0.5 + 0 - 1) / 3)
    assert (d["better"], d["worse"], d["equal"]) == (1, 1, 1)
    # equal c/n with different n is equal even where the float product differs in its last bit
    assert paired_difference({"x": [True, False]}, {"x": [True, True, False, False]}, 1)["equal"] == 1


def test_bad_input_raises_naming_the_problem():
    with pytest.raises(ValueError, match="no problems"):
        pass_at_k_ci({}, 1)
    with pytest.raises(ValueError, match=r"pass@4 needs >= 4 samples.*'short'"):
        pass_at_k_ci({"fine": [True] * 4, "short": [True, False]}, 4)
    with pytest.raises(ValueError, match="k >= 1"):
        pass_at_k_ci({"a": [True]}, 0)
    with pytest.raises(ValueError, match="confidence"):
        pass_at_k_ci({"a": [True]}, 1, confidence=95)
    with pytest.raises(ValueError, match="resamples"):
        pass_at_k_ci({"a": [True]}, 1, resamples=0)
    with pytest.raises(ValueError, match="no values"):
        bootstrap_mean_ci([])
    with pytest.raises(ValueError, match="non-finite"):
        bootstrap_mean_ci([0.5, float("nan")])
    with pytest.raises(ValueError, match=r"no problem in common.*'a'.*'b'"):
        paired_difference({"a": [True]}, {"b": [True]}, 1)
    with pytest.raises(ValueError, match=r"B: pass@2 needs >= 2 samples.*'a'"):
        paired_difference({"a": [True, True]}, {"a": [True]}, 2)
    # a problem only one side has is not checked: it is not compared
    assert paired_difference({"a": [True, True], "x": [True]}, {"a": [True, False]}, 2)["problems"] == 1


def test_per_problem_pass_at_k_is_sorted_by_name():
    assert per_problem_pass_at_k({"b": [True, False], "a": [True, True]}, 1) == {"a": 1.0, "b": 0.5}


def test_interval_metric_keys():
    results = sampled(12, 4, [0.2, 0.7], seed=20)
    buckets = {name: ("easy" if i % 2 else "hard") for i, name in enumerate(results)}
    m = passk_metrics_with_ci(results, [4, 1], bucket_of=buckets, resamples=500)
    assert set(m) == {
        f"eval/pass@{k}{end}{b}"
        for k in (1, 4)
        for end in ("", "_ci_low", "_ci_high")
        for b in ("", "/easy", "/hard")
    }
    check_names(m)
    for key in ("eval/pass@1", "eval/pass@4/easy"):
        low, high = ci_keys(key)
        assert m[low] <= m[key] <= m[high]
    assert ci_keys("eval/pass@8/hard") == ("eval/pass@8_ci_low/hard", "eval/pass@8_ci_high/hard")
    with pytest.raises(ValueError):
        ci_keys("eval/reward_mean")
    assert passk_ci_metrics(results, [1], resamples=500) == {
        k: v for k, v in m.items() if k in ("eval/pass@1_ci_low", "eval/pass@1_ci_high")
    }
    # the report's pass@k reader and the Prometheus names take them for what they are
    assert [key for _, _, key in pass_at_k_keys([{"step": 1, **m}])] == [
        "eval/pass@1",
        "eval/pass@4",
        "eval/pass@1/easy",
        "eval/pass@4/easy",
        "eval/pass@1/hard",
        "eval/pass@4/hard",
    ]
    names = {s.name for s in gauge_samples(1, m)}  # raises if two keys map to one series
    assert "codefu_eval_pass_1_ci_low" in names and "codefu_eval_pass_at_k" in names
