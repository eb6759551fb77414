"""Two learning results side by side: does arm B reach arm A's held-out pass@k at the same number of samples?
(#44: `one_step_off` against `sync`; #45: LoRA against full fine-tuning.)

    python bench/compare_learning.py A.json B.json [--k 1,8] [--name NAME] [--out PATH]

A and B are bench/learning.py's records, evaluated alike: the same split, problems, samples per problem
and sampling settings, in every evaluation (refused otherwise, naming the field and the evaluation). Per
problem, each arm's pass@k is averaged over its seeds. The interval of the difference B - A (`ci95`;
`holds_zero` when it does) bootstraps both sources of chance at once: the problems (paired across the arms)
and, within each arm, its seeds; two arms that both trained vary from seed to seed, which an interval over
the problems alone (`ci95_problems_only`, bench/learning.py's against an untrained base) would leave out.
With 3 seeds an arm the seed part is crude (10 distinct draws; it sees ~2/3 of the seeds' variance), so
`seed_means` gives each arm's per-seed means and a Welch t-interval of their difference (the problems held
fixed) beside it: read both. An interval that holds 0 shows no difference, not equality: its lower end says
how large a loss the runs cannot exclude. Both arms' base-model evaluations are reported too: the same
model, they should agree within sampling noise.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import record  # noqa: E402
from bench.learning import paired, per_problem, t_975  # noqa: E402

MUST_MATCH = ("split", "n", "problems", "sampling")
RESAMPLES = 10_000


def seed_evals(rec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: ev for name, ev in rec["evals"].items() if name != "base"}


def check_comparable(a: dict[str, Any], b: dict[str, Any]) -> None:
    """ValueError naming what is not a learning record, the first params field that differs, or the
    evaluation whose samples per problem or problems differ from A's base evaluation."""
    for label, rec in (("A", a), ("B", b)):
        if (
            not isinstance(rec, dict)
            or not isinstance(rec.get("params"), dict)
            or "base" not in rec.get("evals", {})
        ):
            raise ValueError(f"{label} is not a bench/learning.py record (no params, or no evals.base)")
    for key in MUST_MATCH:
        if a["params"].get(key) != b["params"].get(key):
            raise ValueError(
                f"params.{key} differs: {a['params'].get(key)!r} in A, {b['params'].get(key)!r} in B"
            )
    reference = a["evals"]["base"]
    names = set(reference["per_problem"])
    for label, rec in (("A", a), ("B", b)):
        if not seed_evals(rec):
            raise ValueError(f"{label} holds no trained seed's evaluation (evals has only 'base')")
        for name, ev in rec["evals"].items():
            if ev.get("n") != reference["n"]:
                raise ValueError(f"{label}'s evals.{name}.n is {ev.get('n')!r}, A's base {reference['n']!r}")
            other = set(ev.get("per_problem", {}))
            if other != names:
                raise ValueError(
                    f"{label}'s evals.{name} has other problems than A's base: only there "
                    f"{sorted(other - names)}, missing {sorted(names - other)}"
                )


def pooled(by_seed: list[dict[str, float]]) -> dict[str, float]:
    """Each problem's pass@k averaged over the seeds (one {problem: pass@k} per seed)."""
    return {p: statistics.fmean(s[p] for s in by_seed) for p in by_seed[0]}


def problems_and_seeds_ci(
    a: list[dict[str, float]], b: list[dict[str, float]], resamples: int = RESAMPLES, seed: int = 0
) -> list[float]:
    """The 95% percentile interval of mean(B) - mean(A) when the problems (the same draw for both arms) and
    each arm's seeds are resampled with replacement. `a` and `b`: one {problem: pass@k} per seed."""
    names = sorted(a[0])
    ra = np.array([[s[p] for p in names] for s in a])  # seeds x problems
    rb = np.array([[s[p] for p in names] for s in b])
    rng = np.random.default_rng(seed)
    diffs = np.empty(resamples)
    for i in range(resamples):
        cols = rng.integers(len(names), size=len(names))
        rows_a = rng.integers(len(a), size=len(a))
        rows_b = rng.integers(len(b), size=len(b))
        diffs[i] = rb[np.ix_(rows_b, cols)].mean() - ra[np.ix_(rows_a, cols)].mean()
    low, high = np.percentile(diffs, [2.5, 97.5])
    return [float(low), float(high)]


def welch(a: list[float], b: list[float]) -> dict[str, Any]:
    """mean(b) - mean(a) with its Welch t-interval (None with fewer than 2 values an arm or no spread)."""
    diff = statistics.fmean(b) - statistics.fmean(a)
    out: dict[str, Any] = {"diff": diff, "t_ci95": None, "df": None}
    if len(a) < 2 or len(b) < 2:
        return out
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    if va + vb == 0:
        return out
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = t_975(df) * math.sqrt(va + vb)
    return out | {"t_ci95": [diff - half, diff + half], "df": df}


def compare(a: dict[str, Any], b: dict[str, Any], k: int) -> dict[str, Any]:
    """The comparison at pass@k: pooled paired difference B - A, each arm's seed means, both bases."""
    by_seed = {  # each arm's {seed: {problem: pass@k}}, computed once
        label: {name: per_problem(ev, k) for name, ev in seed_evals(rec).items()}
        for label, rec in (("A", a), ("B", b))
    }
    pa, pb = pooled(list(by_seed["A"].values())), pooled(list(by_seed["B"].values()))
    diff = paired(pb, pa)
    ci = problems_and_seeds_ci(list(by_seed["A"].values()), list(by_seed["B"].values()))
    means = {
        label: {name: statistics.fmean(rates.values()) for name, rates in seeds.items()}
        for label, seeds in by_seed.items()
    }
    base = {
        label: statistics.fmean(per_problem(rec["evals"]["base"], k).values())
        for label, rec in (("A", a), ("B", b))
    }
    return {
        "A": diff["base"],
        "B": diff["trained"],
        "diff": diff["diff"],
        "ci95": ci,
        "holds_zero": ci[0] <= 0.0 <= ci[1],
        "ci95_problems_only": diff["ci95"],
        "problems_B_better": diff["better"],
        "problems_B_worse": diff["worse"],
        "seed_means": means | {"welch": welch(list(means["A"].values()), list(means["B"].values()))},
        "base": base,
        "per_problem": {p: {"A": round(pa[p], 4), "B": round(pb[p], 4)} for p in sorted(pa)},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a", type=Path, help="the reference arm's learning record (e.g. sync, full fine-tuning)")
    ap.add_argument("b", type=Path, help="the arm compared with it")
    ap.add_argument("--k", default="1,8", help="the pass@k compared, each 1 <= k <= n")
    ap.add_argument("--name", default="learning-comparison")
    record.add_out_argument(ap, "learning-comparison")
    args = ap.parse_args()
    head = record.header()
    recs = {}
    for label, path in (("A", args.a), ("B", args.b)):
        try:
            recs[label] = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            ap.error(f"{label} ({path}): {e}")
    try:
        check_comparable(recs["A"], recs["B"])
    except ValueError as e:
        ap.error(f"{args.a} and {args.b} cannot be compared: {e}")
    n = recs["A"]["params"]["n"]
    try:
        ks = [int(k) for k in args.k.split(",")]
    except ValueError:
        ap.error(f"--k {args.k}: not a comma-separated list of integers")
    if any(not 1 <= k <= n for k in ks):
        ap.error(f"--k {args.k}: each k must be between 1 and the records' n ({n})")
    results = {f"pass@{k}": compare(recs["A"], recs["B"], k) for k in ks}
    arms = {
        label: {
            "file": str(path),
            **{key: recs[label].get(key) for key in ("command", "commit", "date")},
            "overrides": recs[label]["params"].get("overrides"),
            "gpus": [g.get("name") for g in recs[label].get("machine", {}).get("gpus") or []],
        }
        for label, path in (("A", args.a), ("B", args.b))
    }
    params = {key: recs["A"]["params"].get(key) for key in MUST_MATCH} | {"ks": ks}
    record.write(
        record.resolve_out(args.out, args.name), head | {"params": params, "arms": arms, "results": results}
    )
    for k in ks:
        r = results[f"pass@{k}"]
        verdict = (
            "the interval holds 0: no difference shown" if r["holds_zero"] else "the interval excludes 0"
        )
        print(
            f"pass@{k}: A {r['A']:.3f}, B {r['B']:.3f}, B - A {r['diff']:+.3f} "
            f"[{r['ci95'][0]:+.3f}, {r['ci95'][1]:+.3f}]: {verdict}"
        )


if __name__ == "__main__":
    main()
