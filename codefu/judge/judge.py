"""The judge: response -> program -> compile once -> run the selected tests in the sandbox -> verdict.

`Judge.judge` never raises on model output: whatever the response holds, the answer is a `Verdict`. A
failure of our own (sandbox, disk, a broken checker) is `SANDBOX_ERROR`, logged with its traceback.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path

from codefu.judge.checker import load_python_checker, outputs_match
from codefu.judge.extract import Program, extract_program
from codefu.judge.languages import CompileConfig, Compiled, Compiler, read_head
from codefu.judge.rewards import reward_spec, select_tests
from codefu.judge.runner import open_sandbox, open_session
from codefu.judge.sandbox import Limits, Mount, RunResult, SandboxConfig, make_work_dir
from codefu.types import Problem, Status, TestCase, TestResult, Verdict

log = logging.getLogger(__name__)

STDERR_CHARS = 500


@dataclass
class JudgeConfig:
    reward: str = "codefu"
    """codefu | codefu_code | codefu_stage1 | binary (see codefu.judge.rewards)."""
    max_tests: int | None = None
    """Tests per submission at most (None: all); the largest inputs are always among them."""
    seed: int = 0
    """Seeds which tests are sampled when max_tests cuts."""
    early_stop: bool | None = None
    """Stop at the first failing test; None: when the reward only needs all-pass."""
    workers: int = 0
    """Sandboxes running at once (0: one per CPU)."""
    time_scale: float = 1.0
    """CPU-time limit = problem time limit x this."""
    wall_scale: float = 3.0
    """Wall-clock limit = CPU-time limit x this + 1 s (catches sleeping and blocked programs)."""
    judge_identical_once: bool = True
    """Identical programs for the same problem in one batch (`judge_many`) are run once and share the
    verdict, marked `reused`. Exact for deterministic programs; a program whose output depends on
    randomness or timing gets one draw for all its copies."""
    python_time_scale: float = 1.0
    """Extra factor on the time limit for Python solutions (CodeContests limits are set for C++)."""
    output_limit_bytes: int = 64 << 20
    float_tol: float = 1e-6
    max_source_bytes: int = 256 << 10
    work_dir: str | None = None
    """Where programs, inputs and precompiled headers live (default: a private folder in $TMPDIR)."""
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    compile: CompileConfig = field(default_factory=CompileConfig)


class Judge:
    """Thread-safe; `judge_many` spreads submissions and their tests over `workers` sandboxes."""

    def __init__(self, config: JudgeConfig | None = None):
        self.config = config or JudgeConfig()
        self.spec = reward_spec(self.config.reward)
        self.workers = self.config.workers or os.cpu_count() or 1
        self.root = make_work_dir(self.config.work_dir)
        self.sandbox = open_sandbox(self.config.sandbox, self.root)
        self.run_dir = self.root / f"run-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.run_dir.mkdir(mode=0o711)
        (self.run_dir / "inputs").mkdir()
        (self.run_dir / "io").mkdir()
        self.compiler = Compiler(self.config.compile, self.sandbox, self.run_dir, self.root / "pch")
        self._tests_pool = ThreadPoolExecutor(self.workers, thread_name_prefix="judge-test")
        self._submissions_pool = ThreadPoolExecutor(self.workers, thread_name_prefix="judge-sub")

    # ---- public -------------------------------------------------------------------------------------

    def judge(self, problem: Problem, response: str) -> Verdict:
        start = time.monotonic()
        try:
            verdict = self._judge(problem, response)
        except Exception as e:  # noqa: BLE001 - our failure, reported as such, never raised to the caller
            log.exception("judge failed on problem %r", problem.name)
            verdict = Verdict(Status.SANDBOX_ERROR, message=f"{type(e).__name__}: {e}"[:1000])
        verdict.time_s = time.monotonic() - start
        return verdict

    def judge_many(self, items: Iterable[tuple[Problem, str]]) -> Iterator[tuple[int, Verdict]]:
        """Judge every (problem, response); yields (position, verdict) as each finishes."""
        if self.config.judge_identical_once:
            return judge_identical_once(items, self._judge_each)
        return self._judge_each(items)

    def _judge_each(self, items: Iterable[tuple[Problem, str]]) -> Iterator[tuple[int, Verdict]]:
        futures = {self._submissions_pool.submit(self.judge, p, r): i for i, (p, r) in enumerate(items)}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in done:
                yield futures[f], f.result()

    def close(self) -> None:
        self._submissions_pool.shutdown(wait=True, cancel_futures=True)
        self._tests_pool.shutdown(wait=True, cancel_futures=True)
        self.sandbox.close()
        shutil.rmtree(self.run_dir, ignore_errors=True)

    def __enter__(self) -> Judge:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- one submission ---------------------------------------------------------------------------

    def _judge(self, problem: Problem, response: str) -> Verdict:
        program = extract_program(response, problem.preferred_language)
        if program is None:
            return Verdict(Status.NO_CODE, message="no program found in the response")
        tests = select_tests(problem, self.spec.tests, self.config.max_tests, self.config.seed)
        total = len(tests)
        size = len(program.source.encode("utf-8", errors="replace"))
        if size > self.config.max_source_bytes:
            message = f"source is {size} bytes, over the {self.config.max_source_bytes}-byte limit"
            return Verdict(
                Status.COMPILE_ERROR, total=total, language=program.language, compile_output=message
            )
        if not tests:
            return Verdict(Status.SANDBOX_ERROR, language=program.language, message="problem has no tests")
        with self.compiler.compiled(program) as compiled:
            if not compiled.ok:
                return Verdict(
                    Status.COMPILE_ERROR,
                    total=total,
                    language=program.language,
                    compile_output=compiled.message,
                )
            results = self._run_tests(problem, program, compiled, tests)
        passed = sum(r.status is Status.ACCEPTED for r in results if r is not None)
        first_failure = next(
            (i for i, r in enumerate(results) if r is not None and r.status is not Status.ACCEPTED), None
        )
        if any(r is not None and r.status is Status.SANDBOX_ERROR for r in results):
            status = Status.SANDBOX_ERROR
        else:
            status = Status.ACCEPTED if first_failure is None else results[first_failure].status
        return Verdict(
            status,
            passed=passed,
            total=total,
            language=program.language,
            tests=[r for r in results if r is not None],
            first_failure=first_failure,
            compile_output=compiled.message,
            message=results[first_failure].message if first_failure is not None else "",
        )

    def _run_tests(
        self, problem: Problem, program: Program, compiled: Compiled, tests: list[TestCase]
    ) -> list[TestResult | None]:
        """Results in test order; None for tests skipped after an early stop."""
        early_stop = self.spec.all_or_nothing if self.config.early_stop is None else self.config.early_stop
        scale = self.config.time_scale * (
            self.config.python_time_scale if program.language == "python" else 1
        )
        cpu = problem.time_limit_s * scale
        limits = Limits(
            cpu, cpu * self.config.wall_scale + 1, problem.memory_limit_bytes, self.config.output_limit_bytes
        )
        results: list[TestResult | None] = [None] * len(tests)
        lock = threading.Lock()
        next_test, stop = 0, False

        def take() -> int | None:
            nonlocal next_test
            with lock:
                if stop or next_test >= len(tests):
                    return None
                next_test += 1
                return next_test - 1

        def worker() -> None:
            """One sandbox session that takes tests in order until none are left (or one failed)."""
            nonlocal stop
            session = None
            try:
                while (i := take()) is not None:
                    if session is None or session.dead:
                        if session is not None:
                            session.close()
                        session = self._open_session(compiled, limits)
                    run = session.run if session is not None else None
                    results[i] = self._run_test(problem, tests[i], limits, run)
                    if early_stop and results[i].status is not Status.ACCEPTED:
                        with lock:
                            stop = True
            finally:
                if session is not None:
                    session.close()

        # Tests are taken in order by up to `workers` sessions; with early stop, a failure stops the
        # others from taking more (at most `workers` tests run ahead of it).
        sessions = [self._tests_pool.submit(worker) for _ in range(min(self.workers, len(tests)))]
        for f in sessions:
            f.result()
        return results

    def _open_session(self, compiled: Compiled, limits: Limits):
        """A sandbox for the tests of one submission, or None if it cannot start (logged; its tests are
        then SANDBOX_ERROR)."""
        try:
            return open_session(self.sandbox, compiled.run_argv, compiled.mounts, limits)
        except Exception:  # noqa: BLE001
            log.exception("cannot start a sandbox")
            return None

    def _run_test(
        self,
        problem: Problem,
        test: TestCase,
        limits: Limits,
        run: Callable[[Path, Path, Path, Limits], RunResult] | None,
    ) -> TestResult:
        if run is None:
            return TestResult(Status.SANDBOX_ERROR, message="the sandbox could not start")
        try:
            return self._run_test_unsafe(problem, test, limits, run)
        except Exception as e:  # noqa: BLE001
            log.exception("test run failed")
            return TestResult(Status.SANDBOX_ERROR, message=f"{type(e).__name__}: {e}"[:STDERR_CHARS])

    def _run_test_unsafe(
        self, problem: Problem, test: TestCase, limits: Limits, run: Callable[..., RunResult]
    ) -> TestResult:
        stdin = self._input_file(test.input)
        name = uuid.uuid4().hex
        out, err = self.run_dir / "io" / f"{name}.out", self.run_dir / "io" / f"{name}.err"
        try:
            r = run(stdin, out, err, limits)
            stderr = read_head(err, STDERR_CHARS)
            result = TestResult(Status.ACCEPTED, r.cpu_s, r.wall_s, r.memory_bytes, r.exit_code, stderr)
            if r.limit in ("cpu", "wall"):
                result.status = Status.TIME_LIMIT
                result.message = f"{'CPU' if r.limit == 'cpu' else 'wall-clock'} time limit exceeded"
            elif r.limit == "memory":
                result.status = Status.MEMORY_LIMIT
            elif r.limit == "output" or max(out.stat().st_size, err.stat().st_size) >= limits.file_size_bytes:
                # Python ignores SIGXFSZ: its writes fail with EFBIG instead, leaving a file at the cap
                result.status = Status.OUTPUT_LIMIT
            elif r.exit_code != 0:
                result.status = Status.RUNTIME_ERROR
                note = f" ({r.note})" if r.note else ""
                result.message = f"exit status {r.exit_code}{note}\n{stderr}"[:STDERR_CHARS]
            elif not self._check(problem, test, out):
                result.status = Status.WRONG_ANSWER
            if r.note and not result.message:
                result.message = r.note
            return result
        finally:
            out.unlink(missing_ok=True)
            err.unlink(missing_ok=True)

    # ---- checking ---------------------------------------------------------------------------------

    def _check(self, problem: Problem, test: TestCase, output: Path) -> bool:
        actual = output.read_bytes().decode("utf-8", errors="replace")
        checker = problem.checker
        if checker is None:
            return outputs_match(test.output, actual, self.config.float_tol)
        if checker.kind == "python":
            return bool(load_python_checker(checker.source)(test.input, test.output, actual))
        return self._run_checker_program(problem, test, output)

    def _run_checker_program(self, problem: Problem, test: TestCase, output: Path) -> bool:
        assert problem.checker is not None
        program = Program(problem.checker.language, problem.checker.source)
        with self.compiler.compiled(program) as checker:
            if not checker.ok:
                raise RuntimeError(f"checker of {problem.name!r} does not compile: {checker.message[:300]}")
            case = Path(tempfile.mkdtemp(dir=self.run_dir / "io"))
            try:
                (case / "input.txt").write_text(test.input)
                (case / "answer.txt").write_text(test.output)
                shutil.copyfile(output, case / "output.txt")
                case.chmod(0o755)
                for f in case.iterdir():
                    f.chmod(0o644)
                argv = [*checker.run_argv, "/check/input.txt", "/check/output.txt", "/check/answer.txt"]
                cpu = max(10.0, problem.time_limit_s * 2)
                limits = Limits(cpu, cpu * 2, 1 << 30, self.config.output_limit_bytes)
                mounts = [*checker.mounts, Mount(case, "/check")]
                r = self.sandbox.run(argv, limits, mounts, case / "checker.out", case / "checker.err")
                if r.limit is not None:
                    raise RuntimeError(f"checker of {problem.name!r} exceeded its {r.limit} limit")
                return r.exit_code == 0
            finally:
                shutil.rmtree(case, ignore_errors=True)

    def _input_file(self, text: str) -> Path:
        """Test inputs are written once per judge and shared by every run of that test."""
        data = text.encode("utf-8", errors="replace")
        path = self.run_dir / "inputs" / hashlib.sha256(data).hexdigest()
        if not path.exists():
            tmp = path.with_name(f"{path.name}.{threading.get_ident()}.tmp")
            tmp.write_bytes(data)
            tmp.replace(path)
        return path


def judge_identical_once(
    items: Iterable[tuple[Problem, str]],
    judge_many: Callable[[list[tuple[Problem, str]]], Iterator[tuple[int, Verdict]]],
) -> Iterator[tuple[int, Verdict]]:
    """`judge_many` over the distinct (problem, program) pairs of `items` only; every other position gets
    a copy of its twin's verdict (marked `reused`) when the twin's arrives.

    Samples of a GRPO group converge on the same program as training sharpens the policy (most of a
    group's n, late in a run), and responses that differ only in prose around the code are the same
    submission: judging each copy again would only repeat the same runs. Problems are told apart by
    identity (the same object for the samples of one prompt), programs by what the judge would extract.
    """
    items = list(items)
    first: dict[tuple, int] = {}
    twins: dict[int, list[int]] = {}
    unique: list[int] = []
    for i, (problem, response) in enumerate(items):
        program = extract_program(response, problem.preferred_language)
        key = (id(problem), None if program is None else (program.language, program.source))
        if key in first:
            twins[first[key]].append(i)
        else:
            first[key] = i
            twins[i] = []
            unique.append(i)
    for j, verdict in judge_many([items[i] for i in unique]):
        i = unique[j]
        yield i, verdict
        for twin in twins[i]:
            yield twin, replace(verdict, tests=list(verdict.tests), time_s=0.0, reused=True)
