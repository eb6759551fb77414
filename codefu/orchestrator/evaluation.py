"""One evaluation path: n samples per problem from an engine, scored by the judge, gathered per problem.

`codefu eval` (a local engine of either backend and a local judge) and the loop's validation (the run's
rollout workers and judge pool) both call `sample_and_score`, with sampling options from the same
`SamplingParams` (temperature, top-p, top-k, new tokens, seed). A sample is a self-repair episode
(codefu.orchestrator.episodes) of up to `plan.turns` turns; with more than one, every turn's program is
judged on the hidden tests, so pass@1 after each turn can be read (`turn_metrics`, `turn_report`)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from codefu.observability.passk import bootstrap_mean_ci
from codefu.observability.progress import phase_bar
from codefu.orchestrator.episodes import EpisodePlan, run_episodes, turn_in_sequence
from codefu.orchestrator.scoring import Scorer
from codefu.rollout.types import Completion, SamplingParams
from codefu.types import Problem


@dataclass
class EpisodeResult:
    """One self-repair episode, as evaluated."""

    passed: list[bool]  # hidden tests: the program as it stood after turn t at [t - 1], t = 1 .. turns
    first_public: bool  # turn 1's program passed the public tests
    tokens: list[int]  # the model's tokens at each turn it took


@dataclass
class Evaluation:
    passed: dict[str, list[bool]]  # problem name -> accepted?, one entry per sample (its last program)
    statuses: Counter[str]  # verdict -> samples
    rewards: list[float]  # of every sample the judge scored (SANDBOX_ERROR has none)
    episodes: dict[str, list[EpisodeResult]] = field(default_factory=dict)  # with turns > 1 only
    turns: int = 1

    def accepted(self) -> dict[str, int]:
        return {name: sum(p) for name, p in self.passed.items()}


def sample_and_score(
    problems: list[Problem],
    encode: Callable[[Problem], list[int]],
    generate: Callable[[list[list[int]], SamplingParams], list[Completion]],
    scorer: Scorer,
    sampling: SamplingParams,
    prompts_per_call: int | None = None,
    label: str = "",
    plan: EpisodePlan | None = None,
    lines: bool = False,
) -> Evaluation:
    """`sampling.n` samples of every problem (`prompts_per_call` problems per `generate` call; None: all at
    once), scored together: episodes of `plan` (None: one turn). A progress bar (on a terminal) counts the
    samples generated; `lines`: where no bar shows, a line as generation starts and one as it ends."""
    plan = plan or EpisodePlan()
    per_call = prompts_per_call or max(1, len(problems))
    owners: list[Problem] = []
    episodes = []
    turn = turn_in_sequence(generate, scorer.check_public)
    total = len(problems) * sampling.n
    with phase_bar(f"generate{label}", total, "sample", lines=lines, leave=False) as bar:
        for start in range(0, len(problems), per_call):
            chunk = problems[start : start + per_call]
            prompts = [encode(p) for p in chunk]
            for e in run_episodes(chunk, prompts, sampling, plan, turn):
                owners.append(chunk[e.prompt_index])
                episodes.append(e)
            bar.update(len(chunk) * sampling.n)
    # every turn's program on the hidden tests (one per episode with one turn)
    judged = [(p, r.text) for p, e in zip(owners, episodes, strict=True) for r in e.responses]
    all_scores = scorer.score([p for p, _ in judged], [text for _, text in judged])
    passed: dict[str, list[bool]] = {p.name: [] for p in problems}
    results: dict[str, list[EpisodeResult]] = {p.name: [] for p in problems} if plan.turns > 1 else {}
    finals = []
    at = 0
    for problem, e in zip(owners, episodes, strict=True):
        scores = all_scores[at : at + e.turns]
        at += e.turns
        finals.append(scores[-1])
        passed[problem.name].append(scores[-1].passed)
        if plan.turns > 1:
            by_turn = [scores[min(t, e.turns) - 1].passed for t in range(1, plan.turns + 1)]
            first_public = bool(e.checks) and e.checks[0].passed
            tokens = [r.num_tokens for r in e.responses]
            results[problem.name].append(EpisodeResult(by_turn, first_public, tokens))
    return Evaluation(
        passed,
        Counter(s.status for s in finals),
        [s.reward for s in finals if s.reward is not None],
        results,
        plan.turns,
    )


# ---- self-repair figures (pure) --------------------------------------------------------------------------


def turn_metrics(result: Evaluation, seed: int = 0) -> dict[str, float]:
    """eval/turn{t}_pass@1 (with _ci_low, _ci_high: 95% bootstrap over problems) after each turn t of a
    self-repair evaluation; {} for one turn."""
    out: dict[str, float] = {}
    if result.turns == 1 or not result.episodes:
        return out
    for t in range(1, result.turns + 1):
        per_problem = [_mean([e.passed[t - 1] for e in eps]) for eps in result.episodes.values() if eps]
        key = f"eval/turn{t}_pass@1"
        out[key] = _mean(per_problem)
        out[f"{key}_ci_low"], out[f"{key}_ci_high"] = bootstrap_mean_ci(per_problem, seed=seed)
    return out


def first_public_pick(n: int, m: int, a: int, b: int, k: int) -> tuple[float, float]:
    """Sampling without feedback at the budget of k turns: draw up to k of a problem's n independent
    programs in random order and submit the first that passes the public tests (the last drawn if none
    does), as an episode stops at the first program that passes them. With m of the n passing the public
    tests, a of those m and b of the other n - m passing the hidden ones, and q_j = C(n-m, j) / C(n, j)
    the chance that the first j drawn all fail the public tests:

        P(submitted program correct) = (1 - q_k) * a / m + q_k * b / (n - m)
        E[programs drawn]            = sum_{j=0}^{k-1} q_j

    (the submission is uniform over the passing ones drawn, hence over all m). Exact over the draws, for
    1 <= k <= n. Returns both."""
    if not (1 <= k <= n and 0 <= m <= n and 0 <= a <= m and 0 <= b <= n - m):
        raise ValueError(
            f"need 1 <= k <= n, 0 <= a <= m <= n, 0 <= b <= n - m; got n={n}, m={m}, a={a}, b={b}, k={k}"
        )
    q = [1.0]
    for j in range(k):
        q.append(q[-1] * (n - m - j) / (n - j))
    correct = (1 - q[k]) * (a / m if m else 0.0) + q[k] * (b / (n - m) if n > m else 0.0)
    return correct, math.fsum(q[:k])


def turn_report(episodes: Mapping[str, Sequence[EpisodeResult]], turns: int, seed: int = 0) -> dict[str, Any]:
    """Self-repair against sampling at an equal budget, over the problems with episodes:

        {"turns": K, "problems": P,
         "pass@1_after_turn": {"1": {"pass@1": v, "ci95": [lo, hi]}, ..., "K": ...},
         "self_repair": {"pass@1": v, "ci95": [...], "tokens": model tokens per episode},
         "sampling": {"samples": K, "pass@1": v, "ci95": [...], "tokens": expected tokens},
         "diff": {"pass@1": self-repair - sampling, "ci95": [...]}}   # paired by problem

    "sampling" uses each episode's first turn as an independent sample (`first_public_pick` with k = K:
    k samples vs k turns); tokens are means over problems (sampling's: the expected programs drawn times
    the problem's mean first-turn tokens). Intervals: 95% bootstrap over problems. Needs at least K
    episodes per problem."""
    eps = {name: list(e) for name, e in sorted(episodes.items()) if e}
    short = [name for name, e in eps.items() if len(e) < turns]
    if not eps or short:
        raise ValueError(
            f"the comparison needs >= {turns} episodes of every problem (--n >= --turns); "
            f"too few for {short[:5] or 'every problem'}"
        )
    after = {t: [_mean([e.passed[t - 1] for e in es]) for es in eps.values()] for t in range(1, turns + 1)}
    picks, pick_tokens = [], []
    for es in eps.values():
        n, m = len(es), sum(e.first_public for e in es)
        a = sum(e.first_public and e.passed[0] for e in es)
        b = sum(not e.first_public and e.passed[0] for e in es)
        correct, drawn = first_public_pick(n, m, a, b, turns)
        picks.append(correct)
        pick_tokens.append(drawn * _mean([e.tokens[0] for e in es]))
    repair = after[turns]
    diff = [r - s for r, s in zip(repair, picks, strict=True)]
    return {
        "turns": turns,
        "problems": len(eps),
        "pass@1_after_turn": {str(t): _cell(v, seed) for t, v in after.items()},
        "self_repair": _cell(repair, seed)
        | {"tokens": _mean([_mean([sum(e.tokens) for e in es]) for es in eps.values()])},
        "sampling": {"samples": turns} | _cell(picks, seed) | {"tokens": _mean(pick_tokens)},
        "diff": _cell(diff, seed),
    }


def _cell(values: list[float], seed: int) -> dict[str, Any]:
    return {"pass@1": _mean(values), "ci95": list(bootstrap_mean_ci(values, seed=seed))}


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else float("nan")
