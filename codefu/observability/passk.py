"""pass@k, the unbiased estimator of Chen et al. 2021 ("Evaluating Large Language Models Trained on Code").

For one problem with n samples of which c are correct, the probability that at least one of k samples
drawn without replacement from the n is correct:

    pass@k = 1 - C(n - c, k) / C(n, k)
           = 1 - prod_{i = n - c + 1}^{n} (1 - k / i)        (the stable form: no huge binomials)

and 1 when n - c < k (every draw of k holds a correct sample). Averaged over problems it estimates the
pass@k of the model without the bias of "sample k, check any": n >= k samples per problem are drawn once
and reused for every k <= n.

Intervals: a percentile bootstrap over PROBLEMS. With per-problem estimates x_1 .. x_P (x_p the pass@k of
problem p above) the score is their mean x̄ = (1/P) sum_p x_p. Draw B resamples of P problem indices with
replacement, i*_{b,1} .. i*_{b,P}, and take each one's mean

    x̄*_b = (1/P) sum_j x_{i*_{b,j}}                                     b = 1 .. B

the interval at confidence 1 - α is [the α/2 quantile, the 1 - α/2 quantile] of {x̄*_b}. It answers "how
far could the score move on another draw of problems like these, sampled again"; each x_p carries the
noise of its own n samples, so that noise is in the spread too. Problems are resampled in the sorted
order of their names from numpy's PCG64 seeded with `seed`: the same inputs and seed give the same
interval, whatever the order of the mapping. All x_p equal: the interval is that value, width 0.

A paired comparison of models A and B on the same problems bootstraps the per-problem differences
d_p = x^A_p - x^B_p (the same resampled problems for both): problem difficulty, shared by both, cancels,
so the interval of the difference is much narrower than the two intervals side by side suggest.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

#: Bootstrap resamples by default: the interval's ends move by well under 0.01 between seeds.
DEFAULT_RESAMPLES = 10_000
#: Problem indices drawn per chunk (8 bytes each), bounding the memory whatever resamples x problems is.
_CHUNK_INDICES = 1 << 21
#: Two per-problem values closer than this count as equal (pass@k of equal c/n can differ in the last bit).
_EQUAL_TOL = 1e-12
#: The interval's metric keys: {prefix}pass@{k}_ci_low[/{bucket}], {prefix}pass@{k}_ci_high[/{bucket}].
CI_LOW, CI_HIGH = "_ci_low", "_ci_high"


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k of one problem: n samples, c of them correct, 1 <= k <= n (else ValueError)."""
    if n < 1 or not 0 <= c <= n:
        raise ValueError(f"need n >= 1 and 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k} with n={n} samples")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def pass_at_k_table(results: Mapping[str, Sequence[bool]], ks: Iterable[int]) -> dict[int, float]:
    """{k: mean over problems of pass_at_k(n_p, c_p, k)} for results = {problem: [correct?, ...]}.

    Problems may have different sample counts; every one needs at least max(ks) samples (else ValueError
    naming it). No problems: ValueError."""
    ks = sorted(set(ks))
    if not results:
        raise ValueError("pass@k of no problems")
    if not ks:
        raise ValueError("no k given")
    short = [name for name, r in results.items() if len(r) < ks[-1]]
    if short:
        raise ValueError(f"pass@{ks[-1]} needs >= {ks[-1]} samples per problem; too few for {short[:5]}")
    counts = [(len(r), sum(bool(x) for x in r)) for r in results.values()]
    return {k: math.fsum(pass_at_k(n, c, k) for n, c in counts) / len(counts) for k in ks}


def group_by_bucket(
    results: Mapping[str, Sequence[bool]],
    bucket_of: Mapping[str, str] | Callable[[str], str],
) -> dict[str, dict[str, Sequence[bool]]]:
    """{bucket label: {problem: results}}, the labels in sorted order.

    bucket_of: problem name -> bucket label, as a mapping or a function; a problem missing from the
    mapping raises ValueError naming it (map it to e.g. "unknown" to keep it)."""
    lookup = bucket_of.get if isinstance(bucket_of, Mapping) else bucket_of
    groups: dict[str, dict[str, Sequence[bool]]] = defaultdict(dict)
    missing = []
    for name, r in results.items():
        label = lookup(name)
        if label is None:
            missing.append(name)
        else:
            groups[label][name] = r
    if missing:
        raise ValueError(f"no difficulty bucket for {len(missing)} problems, e.g. {missing[:5]}")
    return {label: groups[label] for label in sorted(groups)}


def by_bucket(
    results: Mapping[str, Sequence[bool]],
    bucket_of: Mapping[str, str] | Callable[[str], str],
    ks: Iterable[int],
) -> dict[str, dict[int, float]]:
    """pass_at_k_table per difficulty bucket, keyed by bucket label in sorted order (`group_by_bucket`:
    a problem without a bucket is a ValueError)."""
    ks = list(ks)
    return {label: pass_at_k_table(group, ks) for label, group in group_by_bucket(results, bucket_of).items()}


def passk_metrics(
    table: Mapping[int, float],
    buckets: Mapping[str, Mapping[int, float]] | None = None,
    prefix: str = "eval/",
) -> dict[str, float]:
    """Flat metric names for the sinks: {prefix}pass@{k}, and {prefix}pass@{k}/{bucket} per bucket."""
    out = {f"{prefix}pass@{k}": v for k, v in table.items()}
    for label, t in (buckets or {}).items():
        out |= {f"{prefix}pass@{k}/{label}": v for k, v in t.items()}
    return out


# ---- intervals ------------------------------------------------------------------------------------------


def per_problem_pass_at_k(results: Mapping[str, Sequence[bool]], k: int) -> dict[str, float]:
    """{problem: pass_at_k(n_p, c_p, k)} in the sorted order of the names, for results = {problem:
    [correct?, ...]}. ValueError for no problems, or naming the problems with fewer than k samples."""
    if not results:
        raise ValueError("pass@k of no problems")
    if k < 1:
        raise ValueError(f"need k >= 1, got k={k}")
    short = sorted(name for name, r in results.items() if len(r) < k)
    if short:
        raise ValueError(
            f"pass@{k} needs >= {k} samples per problem; {len(short)} problems have fewer, e.g. {short[:5]}"
        )
    return {
        name: pass_at_k(len(results[name]), sum(bool(x) for x in results[name]), k)
        for name in sorted(results)
    }


def bootstrap_mean_ci(
    values: Sequence[float],
    confidence: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> tuple[float, float]:
    """(low, high): the percentile bootstrap interval of the mean of `values` (see the module docstring),
    vectorised in numpy: 10k resamples of 1000 values take a fraction of a second. All values equal:
    (value, value). ValueError for no values, a non-finite one, confidence outside (0, 1) or
    resamples < 1."""
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise ValueError("a bootstrap interval of no values")
    if not np.isfinite(x).all():
        raise ValueError("a bootstrap interval of non-finite values")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    if x.min() == x.max():
        return float(x[0]), float(x[0])
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    per_chunk = max(1, _CHUNK_INDICES // x.size)
    for start in range(0, resamples, per_chunk):
        stop = min(resamples, start + per_chunk)
        means[start:stop] = x[rng.integers(0, x.size, size=(stop - start, x.size))].mean(axis=1)
    alpha = (1.0 - confidence) / 2
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return float(low), float(high)


def pass_at_k_ci(
    results: Mapping[str, Sequence[bool]],
    k: int,
    confidence: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> tuple[float, float]:
    """(low, high): the percentile bootstrap interval over problems of pass_at_k_table(results, [k])[k].

    Deterministic given the seed. ValueError for no problems, a problem with fewer than k samples (naming
    it), k < 1, or bad confidence / resamples."""
    return bootstrap_mean_ci(list(per_problem_pass_at_k(results, k).values()), confidence, resamples, seed)


def paired_difference(
    results_a: Mapping[str, Sequence[bool]],
    results_b: Mapping[str, Sequence[bool]],
    k: int,
    confidence: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> dict[str, Any]:
    """A - B in pass@k over the problems both have, with its paired bootstrap interval.

    Problems present in only one of the two are left out and counted (`only_a`, `only_b`): a run on a
    subset compares against a baseline on the whole set. No problem in common raises ValueError naming
    some of each side. Returns

        {"k": k, "problems": P (in common), "only_a": int, "only_b": int,
         "a": mean x^A_p, "b": mean x^B_p, "diff": mean d_p (= a - b),
         "ci_low": ..., "ci_high": ..., "confidence": confidence,
         "better": #{d_p > 0}, "worse": #{d_p < 0}, "equal": #{d_p = 0}}

    with d_p = x^A_p - x^B_p (|d_p| <= 1e-12 counts as equal); the interval resamples the same problems
    for A and B, i.e. it bootstraps the d_p. Each side needs >= k samples on every common problem."""
    common = sorted(results_a.keys() & results_b.keys())
    if not common:
        raise ValueError(
            f"no problem in common: A has {len(results_a)} (e.g. {sorted(results_a)[:3]}), "
            f"B has {len(results_b)} (e.g. {sorted(results_b)[:3]})"
        )
    try:
        xa = per_problem_pass_at_k({p: results_a[p] for p in common}, k)
    except ValueError as e:
        raise ValueError(f"A: {e}") from None
    try:
        xb = per_problem_pass_at_k({p: results_b[p] for p in common}, k)
    except ValueError as e:
        raise ValueError(f"B: {e}") from None
    d = [xa[p] - xb[p] for p in common]
    low, high = bootstrap_mean_ci(d, confidence, resamples, seed)
    return {
        "k": k,
        "problems": len(common),
        "only_a": len(results_a.keys() - results_b.keys()),
        "only_b": len(results_b.keys() - results_a.keys()),
        "a": math.fsum(xa.values()) / len(common),
        "b": math.fsum(xb.values()) / len(common),
        "diff": math.fsum(d) / len(common),
        "ci_low": low,
        "ci_high": high,
        "confidence": confidence,
        "better": sum(v > _EQUAL_TOL for v in d),
        "worse": sum(v < -_EQUAL_TOL for v in d),
        "equal": sum(abs(v) <= _EQUAL_TOL for v in d),
    }


def ci_keys(key: str) -> tuple[str, str]:
    """The interval keys of a pass@k metric key: "eval/pass@8" -> ("eval/pass@8_ci_low",
    "eval/pass@8_ci_high"); a bucket stays last, "eval/pass@8/hard" -> ("eval/pass@8_ci_low/hard", ...),
    so no reader of eval/pass@{k}[/{bucket}] mistakes an interval end for a bucket."""
    m = re.fullmatch(r"(.*pass@\d+)(/.+)?", key)
    if m is None:
        raise ValueError(f"{key!r} is not a pass@k key")
    head, bucket = m.group(1), m.group(2) or ""
    return f"{head}{CI_LOW}{bucket}", f"{head}{CI_HIGH}{bucket}"


def passk_ci_metrics(
    results: Mapping[str, Sequence[bool]],
    ks: Iterable[int],
    prefix: str = "eval/",
    bucket_of: Mapping[str, str] | Callable[[str], str] | None = None,
    confidence: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> dict[str, float]:
    """The interval ends only, under `ci_keys` of passk_metrics' names: {prefix}pass@{k}_ci_low,
    {prefix}pass@{k}_ci_high, and with `bucket_of` (as in by_bucket) the same per bucket,
    {prefix}pass@{k}_ci_low/{bucket}, ..."""
    ks = sorted(set(ks))
    groups: dict[str | None, Mapping[str, Sequence[bool]]] = {None: results}
    if bucket_of is not None:
        groups |= group_by_bucket(results, bucket_of)
    out: dict[str, float] = {}
    for label, group in groups.items():
        for k in ks:
            low_key, high_key = ci_keys(f"{prefix}pass@{k}" + (f"/{label}" if label else ""))
            out[low_key], out[high_key] = pass_at_k_ci(group, k, confidence, resamples, seed)
    return out


def passk_metrics_with_ci(
    results: Mapping[str, Sequence[bool]],
    ks: Iterable[int],
    prefix: str = "eval/",
    bucket_of: Mapping[str, str] | Callable[[str], str] | None = None,
    confidence: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> dict[str, float]:
    """passk_metrics of `results` (per bucket too with `bucket_of`) and their intervals, for the sinks:

    {"eval/pass@1": v, "eval/pass@1_ci_low": lo, "eval/pass@1_ci_high": hi, ...,
     "eval/pass@1/easy": ..., "eval/pass@1_ci_low/easy": ..., ...}"""
    ks = sorted(set(ks))
    buckets = by_bucket(results, bucket_of, ks) if bucket_of is not None else None
    out = passk_metrics(pass_at_k_table(results, ks), buckets, prefix)
    return out | passk_ci_metrics(results, ks, prefix, bucket_of, confidence, resamples, seed)
