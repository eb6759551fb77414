"""How strong are a problem's tests? The audit runs its known-correct and known-incorrect solutions on them
in the sandbox: a correct solution that fails flags a broken test (or limits too tight), an incorrect one
that passes every test flags weak tests, a reward a wrong program can collect. Augmentation then makes new
inputs from the problem's own by shape-keeping mutations, keeps one only where every correct solution runs
within the limits and agrees on its answer (the reference's output, checked by the problem's checker), and
adds the ones that make surviving incorrect solutions fail first.

Everything runs through the judge (`Judge` on this machine, `RayJudgePool` on a cluster): `judge_many` for
verdicts, `run_once` for the reference answers. Mutation and selection are pure functions of a seeded
`random.Random`. Nothing here raises on a problem's material: a solution that does not compile, a
problem without a correct solution, a run that fails: each is counted with its reason.
"""

from __future__ import annotations

import hashlib
import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol

from codefu.data.solutions import Solution, solutions_of
from codefu.judge.extract import Program
from codefu.judge.input_mutations import candidate_inputs, choose_tests, join_lines, split_lines
from codefu.judge.judge import JudgeConfig, SingleRun, run_limits
from codefu.judge.sandbox import Limits
from codefu.types import Problem, Status, TestCase, Verdict

log = logging.getLogger(__name__)

LIMIT_STATUSES = {Status.TIME_LIMIT, Status.MEMORY_LIMIT, Status.OUTPUT_LIMIT}


class JudgeLike(Protocol):
    """What the audit needs of a judge: `Judge` and `RayJudgePool` both have it."""

    def judge_many(self, items: Iterable[tuple[Problem, str]]) -> Iterator[tuple[int, Verdict]]: ...

    def run_once(self, program: Program, stdin: str, limits: Limits) -> SingleRun: ...


def audit_judge_config(**overrides: Any) -> JudgeConfig:
    """The judge the audit needs: every test (public and private), no early stop, no test sampling."""
    return JudgeConfig(**{**overrides, "reward": "binary", "early_stop": False, "max_tests": None})


# ---- solutions --------------------------------------------------------------------------------------


def as_response(s: Solution) -> str:
    return f"```{s.language}\n{s.source}\n```"


def problem_rng(problem: Problem, seed: int) -> random.Random:
    digest = hashlib.sha256(f"audit\0{problem.name}\0{seed}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "little"))


# ---- the audit --------------------------------------------------------------------------------------


@dataclass
class SolutionRun:
    """One solution on a problem's tests."""

    index: int  # in the problem's correct or incorrect solutions
    language: str
    status: str  # the verdict's
    passed: int
    total: int
    failures: dict[str, int] = field(default_factory=dict)  # failing tests by status
    flaw: str = ""
    message: str = ""  # compiler output or our own error, cut short

    @property
    def ran(self) -> bool:
        """It compiled and the sandbox judged every test."""
        return self.status not in (Status.COMPILE_ERROR, Status.NO_CODE, Status.SANDBOX_ERROR)


@dataclass
class AugmentStats:
    candidates: int = 0  # new inputs offered
    verified: int = 0  # every correct solution ran within the limits and agreed
    rejected: dict[str, int] = field(default_factory=dict)  # why the others were not kept
    added: int = 0
    survivors_after: list[int] = field(default_factory=list)  # incorrect solutions passing every test


@dataclass
class ProblemAudit:
    name: str
    source: str
    tests: int
    correct: list[SolutionRun] = field(default_factory=list)
    incorrect: list[SolutionRun] = field(default_factory=list)
    left_out: int = 0  # solutions in a language the judge does not run, or empty
    skipped: str = ""  # why the problem was not audited
    augment: AugmentStats | None = None
    seconds: float = 0.0

    @property
    def broken(self) -> list[SolutionRun]:
        """Correct solutions that compile and yet fail a test: a broken test, or limits too tight."""
        return [r for r in self.correct if r.ran and r.status != Status.ACCEPTED]

    @property
    def survivors(self) -> list[SolutionRun]:
        """Incorrect solutions that pass every test: the tests are weak."""
        return [r for r in self.incorrect if r.status == Status.ACCEPTED]

    def flags(self) -> list[str]:
        out = []
        for r in self.broken:
            out.append(f"correct solution {r.index} ({r.language}) fails: {failure_reason(r)}")
        for r in self.survivors:
            after = ""
            if self.augment is not None:
                killed = r.index not in self.augment.survivors_after
                after = "; killed by a generated test" if killed else "; still passes the generated tests"
            why = f": {r.flaw}" if r.flaw else ""
            out.append(f"incorrect solution {r.index} ({r.language}) passes all {r.total} tests{why}{after}")
        if self.skipped:
            out.append(f"not audited: {self.skipped}")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "flags": self.flags()}


def failure_reason(r: SolutionRun) -> str:
    """A correct solution's failing tests in words: wrong answers point at broken tests; limits at limits
    too tight for it."""
    parts = []
    for status, n in sorted(r.failures.items()):
        what = {
            Status.WRONG_ANSWER: "wrong answer (a broken expected output?)",
            Status.RUNTIME_ERROR: "runtime error (an input out of the constraints?)",
        }.get(Status(status), "over a limit" if Status(status) in LIMIT_STATUSES else status)
        parts.append(f"{n} x {status} {what}")
    return ", ".join(parts) or r.status


def _run(index: int, s: Solution, v: Verdict) -> SolutionRun:
    failures = Counter(t.status.value for t in v.tests if t.status is not Status.ACCEPTED)
    message = v.compile_output if v.status is Status.COMPILE_ERROR else v.message
    return SolutionRun(
        index, s.language, v.status.value, v.passed, v.total, dict(failures), s.flaw, message[:300]
    )


@dataclass
class AuditConfig:
    augment_tests: int = 0
    """Generated tests to add per problem at most (0: audit only)."""
    candidates: int = 24
    """New inputs tried per round of augmentation."""
    rounds: int = 3
    """Rounds of candidates at most (fewer once every survivor is killed and enough tests are kept)."""
    time_budget_s: float = 120.0
    """Wall time per problem: no new round (and no new reference run) starts after it."""
    seed: int = 0
    """Seeds the mutations (with the problem's name): the same seed offers the same candidates."""
    judge: JudgeConfig = field(default_factory=lambda: audit_judge_config())
    """The judge's settings (`audit_judge_config`): the limits reference answers are computed under."""


def audit_problem(problem: Problem, judge: JudgeLike, config: AuditConfig) -> tuple[ProblemAudit, Problem]:
    """The audit of one problem, and the problem with its generated tests added (marked in
    extra["generated_tests"]: how many of the private tests, at the end, were generated)."""
    start = time.monotonic()
    tests = [*problem.public_tests, *problem.private_tests]
    correct, incorrect, left_out = solutions_of(problem)
    audit = ProblemAudit(problem.name, problem.source or "unknown", len(tests), left_out=left_out)
    if problem.function is not None:
        audit.skipped = "a function-call problem (inputs are JSON arguments: not audited yet)"
    elif not tests:
        audit.skipped = "no tests"
    elif not correct and not incorrect:
        audit.skipped = "no solution the judge can run"
    if audit.skipped:
        audit.seconds = time.monotonic() - start
        return audit, problem
    verdicts = judge_all(judge, problem, [*correct, *incorrect])
    runs = [_run(i, s, v) for i, (s, v) in enumerate(zip(correct, verdicts, strict=False))]
    rest = zip(incorrect, verdicts[len(correct) :], strict=True)
    audit.correct, audit.incorrect = runs, [_run(i, s, v) for i, (s, v) in enumerate(rest)]
    if config.augment_tests > 0:
        problem = augment(problem, judge, config, audit, correct, incorrect, start)
    audit.seconds = time.monotonic() - start
    return audit, problem


def judge_all(judge: JudgeLike, problem: Problem, solutions: list[Solution]) -> list[Verdict]:
    out: dict[int, Verdict] = dict(judge.judge_many((problem, as_response(s)) for s in solutions))
    return [out[i] for i in range(len(solutions))]


def augment(
    problem: Problem,
    judge: JudgeLike,
    config: AuditConfig,
    audit: ProblemAudit,
    correct: list[Solution],
    incorrect: list[Solution],
    start: float,
) -> Problem:
    """Verified generated tests, the ones that kill surviving incorrect solutions first (see module doc)."""
    stats = audit.augment = AugmentStats()
    survivors = {r.index for r in audit.survivors}
    stats.survivors_after = sorted(survivors)
    good = [s for s, r in zip(correct, audit.correct, strict=True) if r.status == Status.ACCEPTED]
    if not good:
        stats.rejected["no correct solution passes the problem's tests"] = 1
        return problem
    rivals = [i for i, r in enumerate(audit.incorrect) if r.ran]  # incorrect ones worth running
    reference = min(good, key=lambda s: s.language != "cpp")  # C++ first: the fastest reference
    limits = run_limits(config.judge, problem, reference.language)
    rng = problem_rng(problem, config.seed)
    inputs = [t.input for t in [*problem.public_tests, *problem.private_tests]]
    offered = {join_lines(split_lines(x)) for x in inputs}
    kept: list[TestCase] = []
    kills: list[frozenset[int]] = []
    rejected: Counter[str] = Counter()
    for _ in range(config.rounds):
        if time.monotonic() - start > config.time_budget_s:
            rejected["time budget spent before a round"] += 1
            break
        fresh = candidate_inputs(inputs, config.candidates, rng, offered)
        offered |= {join_lines(split_lines(x)) for x in fresh}
        stats.candidates += len(fresh)
        if not fresh:
            break
        answered = []
        for text in fresh:
            if time.monotonic() - start > config.time_budget_s:
                rejected["time budget"] += 1
                continue
            run = judge.run_once(Program(reference.language, reference.source), text, limits)
            if (why := reference_failure(run)) is not None:
                rejected[f"reference: {why}"] += 1
            else:
                answered.append(TestCase(text, run.stdout))
        if not answered:
            continue
        trial = replace(problem, public_tests=[], private_tests=answered)
        verdicts = judge_all(judge, trial, [*good, *(incorrect[i] for i in rivals)])
        agree, rivals_v = verdicts[: len(good)], verdicts[len(good) :]
        for k, test in enumerate(answered):
            if (why := disagreement(agree, k)) is not None:
                rejected[why] += 1
                continue
            kept.append(test)
            kills.append(frozenset(i for i, v in zip(rivals, rivals_v, strict=True) if killed(v, k)))
        if not survivors - frozenset().union(*kills) and len(kept) >= config.augment_tests:
            break
    stats.verified, stats.rejected = len(kept), dict(rejected)
    chosen = choose_tests(kills, survivors, config.augment_tests)
    stats.added = len(chosen)
    stats.survivors_after = sorted(survivors - frozenset().union(*(kills[i] for i in chosen)))
    if not chosen:
        return problem
    generated = [kept[i] for i in chosen]
    extra = {**problem.extra, "generated_tests": problem.extra.get("generated_tests", 0) + len(generated)}
    return replace(problem, private_tests=[*problem.private_tests, *generated], extra=extra)


def reference_failure(run: SingleRun) -> str | None:
    """Why a reference run gives no answer to trust, or None."""
    if run.error:
        return "sandbox error"
    if not run.compiled or run.run is None:
        return "does not compile"
    if run.run.limit is not None:
        return f"over the {run.run.limit} limit"
    if run.run.exit_code != 0:
        return "runtime error"
    if run.output_cut:
        return "output too long"
    return None


def disagreement(verdicts: list[Verdict], k: int) -> str | None:
    """Why test k of a trial is not verified by the correct solutions' verdicts on it, or None."""
    for v in verdicts:
        if len(v.tests) != v.total or v.status is Status.SANDBOX_ERROR:
            return "a correct solution was not judged on it (sandbox error)"
        status = v.tests[k].status
        if status in LIMIT_STATUSES:
            return "a correct solution goes over a limit"
        if status is not Status.ACCEPTED:
            return f"a correct solution differs from the reference's answer ({status.value})"
    return None


def killed(v: Verdict, k: int) -> bool:
    """Did an incorrect solution fail test k of a trial (a judgement of its own, not our error)?"""
    if len(v.tests) != v.total or v.status is Status.SANDBOX_ERROR:
        return False
    return v.tests[k].status is not Status.ACCEPTED


# ---- the report -------------------------------------------------------------------------------------


def summary(audits: list[ProblemAudit]) -> dict[str, dict[str, Any]]:
    """Per source: counts of problems, solutions and tests, and the reasons behind each flag."""
    out: dict[str, dict[str, Any]] = {}
    for a in audits:
        s = out.setdefault(
            a.source,
            {
                "problems": 0,
                "audited": 0,
                "skipped": {},
                "broken": 0,
                "weak": 0,
                "tests": 0,
                "correct": 0,
                "correct_failing": 0,
                "correct_not_compiling": 0,
                "incorrect": 0,
                "incorrect_passing": 0,
                "incorrect_not_compiling": 0,
                "correct_failures": {},
                "sandbox_errors": 0,
                "tests_added": 0,
                "incorrect_passing_after": 0,
                "augment_rejected": {},
            },
        )
        s["problems"] += 1
        if a.skipped:
            s["skipped"][a.skipped] = s["skipped"].get(a.skipped, 0) + 1
            continue
        s["audited"] += 1
        s["tests"] += a.tests
        s["broken"] += bool(a.broken)
        s["weak"] += bool(a.survivors)
        for kind, runs in (("correct", a.correct), ("incorrect", a.incorrect)):
            s[kind] += len(runs)
            s[f"{kind}_not_compiling"] += sum(r.status == Status.COMPILE_ERROR for r in runs)
            s["sandbox_errors"] += sum(r.status == Status.SANDBOX_ERROR for r in runs)
        s["correct_failing"] += len(a.broken)
        s["incorrect_passing"] += len(a.survivors)
        for r in a.broken:
            for status, n in r.failures.items():
                s["correct_failures"][status] = s["correct_failures"].get(status, 0) + n
        if a.augment is not None:
            s["tests_added"] += a.augment.added
            s["incorrect_passing_after"] += len(a.augment.survivors_after)
            for why, n in a.augment.rejected.items():
                s["augment_rejected"][why] = s["augment_rejected"].get(why, 0) + n
    return out


def summary_table(by_source: dict[str, dict[str, Any]], augmented: bool) -> str:
    head = f"{'source':<16}{'problems':>9}{'audited':>8}{'broken':>7}{'weak':>6}{'incorrect':>10}{'pass':>6}"
    if augmented:
        head += f"{'added':>7}{'pass after':>11}"
    rows = [head]
    for source, s in sorted(by_source.items()):
        row = (
            f"{source:<16}{s['problems']:>9}{s['audited']:>8}{s['broken']:>7}{s['weak']:>6}"
            f"{s['incorrect']:>10}{s['incorrect_passing']:>6}"
        )
        if augmented:
            row += f"{s['tests_added']:>7}{s['incorrect_passing_after']:>11}"
        rows.append(row)
    return "\n".join(rows)


def audit_problems(
    problems: list[Problem],
    judge: JudgeLike,
    config: AuditConfig,
    parallel: int,
    on_done: Callable[[ProblemAudit], None] | None = None,
) -> list[tuple[ProblemAudit, Problem]]:
    """`audit_problem` over `problems`, `parallel` at once (their runs share the judge's sandboxes), in
    the order given; a failure of ours on one problem is that problem's `skipped` reason, logged."""

    def one(problem: Problem) -> tuple[ProblemAudit, Problem]:
        try:
            return audit_problem(problem, judge, config)
        except Exception as e:  # noqa: BLE001 - ours, counted: one problem must not end the audit
            log.exception("audit of %r failed", problem.name)
            audit = ProblemAudit(problem.name, problem.source or "unknown", 0)
            audit.skipped = f"the audit failed: {type(e).__name__}: {e}"[:300]
            return audit, problem

    with ThreadPoolExecutor(max(1, parallel), thread_name_prefix="audit") as pool:
        futures = [pool.submit(one, p) for p in problems]
        for f in as_completed(futures):
            if on_done is not None:
                on_done(f.result()[0])
        return [f.result() for f in futures]
