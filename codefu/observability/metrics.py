"""Metric names and the once-per-step reduction.

Every metric is a float under a namespaced key, ``namespace/name`` (see `NAMESPACES`). The training loop
collects records from its phases (rollout rounds, judge batches, trainer mini-batches), reduces them once
per step with `reduce_step_metrics`, and hands one flat ``dict[str, float]`` to the sinks.

Reduction rule, chosen by the key's last word (after the last ``/`` or ``_``):

    ...max                max over the records         e.g. policy/ratio_max, optim/grad_norm_max
    ...min                min over the records
    ...sum, ...count      sum over the records         e.g. judge/count
    anything else         (weighted) mean              e.g. reward/mean, loss/pg

A key missing from some records is reduced over the records that have it. NaN propagates (a NaN anywhere
gives NaN), so a broken value is visible instead of being averaged away.

`summary_stats` (mean/std/min/max of one list of values) and `verdict_metrics` (the verdict mix) compute
per-step statistics from the raw per-sample values; prefer them to averaging per-part statistics, which is
exact for means, sums and extrema but only approximate for a std.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol

from codefu.types import Problem, Status

#: The metric namespaces (ARCHITECTURE example 10, plus `optim/*` from the trainer).
NAMESPACES: tuple[str, ...] = (
    "rollout",
    "judge",
    "reward",
    "loss",
    "policy",
    "optim",
    "perf",
    "timing",
    "eval",
    "data",
)

# The keys the console line reads; the loop should emit these names.
REWARD_MEAN = "reward/mean"  # mean shaped reward over the step's scored samples
PASS_RATE = "judge/pass_rate"  # ACCEPTED / judged samples, SANDBOX_ERROR left out of both
VERDICT_PREFIX = "judge/verdict/"  # + short code: fraction of the step's samples with that verdict
JUDGE_COUNT = "judge/count"  # samples judged this step
JUDGE_REUSED = "judge/reused"  # fraction of the step's samples whose program was a twin's (judged once)
RESPONSE_LEN = "rollout/response_len_mean"  # mean response length in tokens
KL = "loss/kl"  # KL to the reference policy (the trainer's kl_penalty, aggregated like the loss)
ENTROPY = "policy/entropy"
CLIP_FRAC = "policy/clip_frac"
TIME_STEP = "timing/step_s"
TIME_GENERATE = "timing/generate_s"
TIME_JUDGE = "timing/judge_s"
TIME_JUDGE_TAIL = "timing/judge_tail_s"  # judging after the last token, when it overlaps decoding
TIME_TRAIN = "timing/train_s"
TIME_SYNC = "timing/sync_s"

# Rates the sinks add to each record (`derived_metrics`), from the keys above.
ROLLOUT_TOKENS_PER_S = "rollout/tokens_per_s"  # response tokens generated per second of the generate phase
JUDGE_PER_S = "judge/submissions_per_s"  # submissions judged per second the judge had work (JUDGE_BUSY)
JUDGE_BUSY = "judge/busy_s"  # seconds of the step's sampling in which a submission awaited its verdict
RESPONSE_TOKENS = "rollout/response_tokens"  # all response tokens generated this step, if the loop says
KEPT_SAMPLES = "rollout/kept_samples"

#: Short verdict codes, in the order they are shown.
VERDICT_CODES: dict[Status, str] = {
    Status.ACCEPTED: "AC",
    Status.WRONG_ANSWER: "WA",
    Status.TIME_LIMIT: "TL",
    Status.MEMORY_LIMIT: "ML",
    Status.RUNTIME_ERROR: "RE",
    Status.OUTPUT_LIMIT: "OL",
    Status.COMPILE_ERROR: "CE",
    Status.NO_CODE: "NC",
    Status.SANDBOX_ERROR: "SE",
}

_REDUCER = re.compile(r"(?:^|[/_])(max|min|sum|count)$")


def reduction_of(key: str) -> str:
    """How `reduce_step_metrics` combines `key`: "max", "min", "sum" or "mean" ("count" sums)."""
    m = _REDUCER.search(key)
    if m is None:
        return "mean"
    return "sum" if m.group(1) == "count" else m.group(1)


def weighted_mean(values: Sequence[float], weights: Sequence[float] | None = None) -> float:
    """sum(w * v) / sum(w); the plain mean without weights. NaN for no values or zero total weight."""
    if weights is None:
        weights = [1.0] * len(values)
    if len(weights) != len(values):
        raise ValueError(f"{len(values)} values but {len(weights)} weights")
    if any(w < 0 for w in weights):
        raise ValueError("weights must be >= 0")
    total = math.fsum(weights)
    if total == 0:
        return math.nan
    return math.fsum(w * v for v, w in zip(values, weights, strict=True) if w) / total


def reduce_step_metrics(
    records: Sequence[Mapping[str, float]], weights: Sequence[float] | None = None
) -> dict[str, float]:
    """Reduce several records of one step to one, key by key (see the module docstring for the rule).

    records: e.g. one dict per trainer mini-batch or per generation round. weights: one per record (e.g.
    its token or sample count), used by the means only; None weighs the records equally. Keys come out in
    the order first seen.
    """
    if weights is not None and len(weights) != len(records):
        raise ValueError(f"{len(records)} records but {len(weights)} weights")
    keys: dict[str, None] = {}
    for r in records:
        keys.update(dict.fromkeys(r))
    out: dict[str, float] = {}
    for key in keys:
        idx = [i for i, r in enumerate(records) if key in r]
        vals = [float(records[i][key]) for i in idx]
        how = reduction_of(key)
        if any(math.isnan(v) for v in vals):
            out[key] = math.nan
        elif how == "max":
            out[key] = max(vals)
        elif how == "min":
            out[key] = min(vals)
        elif how == "sum":
            out[key] = math.fsum(vals)
        else:
            out[key] = weighted_mean(vals, None if weights is None else [float(weights[i]) for i in idx])
    return out


def summary_stats(values: Iterable[float], prefix: str) -> dict[str, float]:
    """{prefix+"mean", prefix+"std", prefix+"min", prefix+"max"} of `values` (std without Bessel's
    correction); {} when there are none. E.g. summary_stats(rewards, "reward/") gives reward/mean, ...;
    summary_stats(lengths, "rollout/response_len_") gives rollout/response_len_mean, ..."""
    vals = [float(v) for v in values]
    if not vals:
        return {}
    mean = math.fsum(vals) / len(vals)
    var = math.fsum((v - mean) ** 2 for v in vals) / len(vals)
    return {
        f"{prefix}mean": mean,
        f"{prefix}std": math.sqrt(var),
        f"{prefix}min": min(vals),
        f"{prefix}max": max(vals),
    }


def verdict_metrics(statuses: Iterable[Status | str], prefix: str = "judge/") -> dict[str, float]:
    """The verdict mix of one step's samples.

    Returns `{prefix}verdict/<CODE>` for every code in `VERDICT_CODES` (the fraction of all samples, zeros
    included, so every step has the same keys), `{prefix}pass_rate` (ACCEPTED over the samples whose verdict
    is not SANDBOX_ERROR: an infrastructure failure is not the model's) and `{prefix}count`. Statuses may be
    `Status` members or their string values. No samples: every fraction is 0.
    """
    counts = Counter(Status(s) for s in statuses)
    n = sum(counts.values())
    out = {f"{prefix}verdict/{code}": counts[st] / n if n else 0.0 for st, code in VERDICT_CODES.items()}
    scored = n - counts[Status.SANDBOX_ERROR]
    out[f"{prefix}pass_rate"] = counts[Status.ACCEPTED] / scored if scored else 0.0
    out[f"{prefix}count"] = float(n)
    return out


SOURCE_PASS_RATE = "data/pass_rate/"  # + source: that source's pass rate this step (as judge/pass_rate)
SOURCE_PROMPTS = "data/prompts/"  # + source: distinct problems of that source sampled this step


class _Scored(Protocol):
    status: str
    """A verdict (`Status` value)."""


def source_name(problem: Problem) -> str:
    """The metric-key form of a problem's dataset source (`Problem.source`): "unknown" when it has none,
    characters other than letters, digits, `.`, `-` and `_` as `_`."""
    return re.sub(r"[^\w.\-]", "_", problem.source) or "unknown"


def source_metrics(problems: Sequence[Problem], scores: Sequence[_Scored]) -> dict[str, float]:
    """Per dataset source (`Problem.source`) of one step's samples (`problems[i]` owns `scores[i]`):
    `data/pass_rate/<source>` (ACCEPTED over the samples judged, SANDBOX_ERROR left out, as judge/pass_rate;
    NaN when none was judged) and `data/prompts/<source>` (distinct problems, by name). Sources in sorted
    order; no samples: {}."""
    if len(problems) != len(scores):
        raise ValueError(f"{len(problems)} problems but {len(scores)} scores")
    accepted: Counter[str] = Counter()
    judged: Counter[str] = Counter()
    names: dict[str, set[str]] = {}
    for p, s in zip(problems, scores, strict=True):
        src = source_name(p)
        names.setdefault(src, set()).add(p.name)
        judged[src] += Status(s.status) != Status.SANDBOX_ERROR
        accepted[src] += Status(s.status) == Status.ACCEPTED
    out: dict[str, float] = {}
    for src in sorted(names):
        out[SOURCE_PASS_RATE + src] = accepted[src] / judged[src] if judged[src] else math.nan
        out[SOURCE_PROMPTS + src] = float(len(names[src]))
    return out


def merge_metrics(*parts: Mapping[str, float]) -> dict[str, float]:
    """One dict from several; a key given twice is a naming bug and raises ValueError naming it."""
    out: dict[str, float] = {}
    for part in parts:
        dup = out.keys() & part.keys()
        if dup:
            raise ValueError(f"metric given twice: {sorted(dup)}")
        out.update(part)
    return out


def check_names(metrics: Iterable[str]) -> None:
    """Raise ValueError naming every key that is not `namespace/name` with a namespace in `NAMESPACES`."""
    bad = [k for k in metrics if k.partition("/")[0] not in NAMESPACES or not k.partition("/")[2]]
    if bad:
        raise ValueError(f"metric names outside the namespaces {NAMESPACES}: {bad}")


@dataclass
class StepTimer:
    """Wall time per phase of one step; a phase entered several times (e.g. extra generation rounds of
    dynamic sampling) accumulates.

        timer = StepTimer()
        with timer.phase("generate"):
            ...
        metrics |= timer.metrics()   # timing/generate_s, ..., timing/step_s (since the timer was made)
    """

    seconds: dict[str, float] = field(default_factory=dict)
    start: float = field(default_factory=lambda: time.perf_counter())

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - t0)

    def add(self, name: str, seconds: float) -> None:
        """Seconds measured elsewhere (e.g. phases that overlap in time) added to phase `name`."""
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def metrics(self, prefix: str = "timing/") -> dict[str, float]:
        out = {f"{prefix}{name}_s": s for name, s in self.seconds.items()}
        out[f"{prefix}step_s"] = time.perf_counter() - self.start
        return out


class BusyClock:
    """Seconds in which at least one piece of work was outstanding, counted once however many threads
    hand work in at a time: a judge's busy time while completions reach it as they are decoded (its
    phase then overlaps generation, so no phase of the step's timer is its time)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._outstanding = 0
        self._since = 0.0
        self._total = 0.0

    def begin(self, n: int = 1) -> None:
        with self._lock:
            if self._outstanding == 0 and n > 0:
                self._since = time.perf_counter()
            self._outstanding += n

    def end(self, n: int = 1) -> None:
        with self._lock:
            if self._outstanding <= 0 or n <= 0:
                return
            self._outstanding = max(0, self._outstanding - n)
            if self._outstanding == 0:
                self._total += time.perf_counter() - self._since

    @property
    def seconds(self) -> float:
        """Busy seconds so far, the running interval included."""
        with self._lock:
            running = time.perf_counter() - self._since if self._outstanding else 0.0
            return self._total + running


def derived_metrics(metrics: Mapping[str, float]) -> dict[str, float]:
    """Throughput rates computed from a step's record, for the keys it does not already hold:

    - `judge/submissions_per_s` = judge/count / judge/busy_s (the seconds in which the judge had a
      submission waiting for its verdict), or / timing/judge_s for a record without judge/busy_s
    - `rollout/tokens_per_s` = generated response tokens / timing/generate_s, the tokens being
      `rollout/response_tokens` when the record has it, else rollout/response_len_mean x
      rollout/kept_samples: exact without dynamic sampling, a lower bound with it (dropped groups'
      tokens are not counted, though their generation time is).

    A rate whose inputs are missing, non-finite, or whose time is 0 is left out."""

    def get(key: str) -> float | None:
        v = metrics.get(key)
        return float(v) if v is not None and math.isfinite(float(v)) else None

    def rate(amount: float | None, seconds: float | None) -> float | None:
        return amount / seconds if amount is not None and seconds else None

    tokens = get(RESPONSE_TOKENS)
    if tokens is None:
        mean, kept = get(RESPONSE_LEN), get(KEPT_SAMPLES)
        tokens = mean * kept if mean is not None and kept is not None else None
    rates = {
        JUDGE_PER_S: rate(get(JUDGE_COUNT), get(JUDGE_BUSY) or get(TIME_JUDGE)),
        ROLLOUT_TOKENS_PER_S: rate(tokens, get(TIME_GENERATE)),
    }
    return {k: v for k, v in rates.items() if v is not None and k not in metrics}
