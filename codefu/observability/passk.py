"""pass@k, the unbiased estimator of Chen et al. 2021 ("Evaluating Large Language Models Trained on Code").

For one problem with n samples of which c are correct, the probability that at least one of k samples
drawn without replacement from the n is correct:

    pass@k = 1 - C(n - c, k) / C(n, k)
           = 1 - prod_{i = n - c + 1}^{n} (1 - k / i)        (the stable form: no huge binomials)

and 1 when n - c < k (every draw of k holds a correct sample). Averaged over problems it estimates the
pass@k of the model without the bias of "sample k, check any": n >= k samples per problem are drawn once
and reused for every k <= n.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence


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


def by_bucket(
    results: Mapping[str, Sequence[bool]],
    bucket_of: Mapping[str, str] | Callable[[str], str],
    ks: Iterable[int],
) -> dict[str, dict[int, float]]:
    """pass_at_k_table per difficulty bucket, keyed by bucket label in sorted order.

    bucket_of: problem name -> bucket label, as a mapping or a function; a problem missing from the
    mapping raises ValueError naming it (map it to e.g. "unknown" to keep it)."""
    ks = list(ks)
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
    return {label: pass_at_k_table(groups[label], ks) for label in sorted(groups)}


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
