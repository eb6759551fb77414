"""The judge: response -> program -> compile once -> run the selected tests in the sandbox -> verdict.

`Judge.judge` never raises on model output: whatever the response holds, the answer is a `Verdict`. A
failure of our own (sandbox, disk, a broken checker) is `SANDBOX_ERROR`, logged with its traceback.
"""

from __future__ import annotations

import logging
import os
import queue
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from codefu.judge.arrivals import Arrivals
from codefu.judge.checker import (
    CheckerOutcome,
    interpret_checker_exit,
    load_python_checker,
    outputs_match,
    python_checker_refusal,
)
from codefu.judge.extract import Program, extract_program
from codefu.judge.function_call import check_output, harnessed, install_harness, language_error
from codefu.judge.inputs import InputFiles
from codefu.judge.languages import BOX, CompileConfig, Compiled, Compiler, read_head
from codefu.judge.rewards import reward_spec, select_tests
from codefu.judge.runner import WarmSessions, open_sandbox, open_session
from codefu.judge.sandbox import Limits, Mount, RunResult, SandboxConfig, check_reachable, make_work_dir
from codefu.types import Problem, Status, TestCase, TestResult, Verdict, checker_files_error

log = logging.getLogger(__name__)

STDERR_CHARS = 500
ARRIVAL_POLL_S = 0.05  # how soon a submission that arrives while others are judged is started
OUTPUT_CHARS = 500  # stdout kept on a verdict's first failing test (TestResult.output): self-repair feedback
# A sandbox that fails on a test (it did not start, or its runner could not start the program or died
# between tests) is tried again in a fresh one before the test is SANDBOX_ERROR: such failures are
# transient under load (fork's EAGAIN at a process limit, a mount namespace slow to set up), and nothing
# of the program ran, so a second try judges the same thing.
SANDBOX_ATTEMPTS = 3
SANDBOX_RETRY_PAUSE_S = 0.2  # times the attempt number: the moment of pressure may need to pass
# Runs a Python checker program: an uncaught exception would exit 1, which testlib reads as "wrong answer",
# so it exits 3 (_fail) instead; the script's folder (its extra files) is importable as when run directly.
PYTHON_CHECKER = """\
import os, runpy, sys, traceback
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(sys.argv[0]))
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit:
    raise
except BaseException as e:
    sys.stderr.write(f"checker raised {type(e).__name__}: {e}\\n")
    traceback.print_exc()
    sys.exit(3)
"""


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
    checker_time_s: float = 10.0
    """CPU-time limit of a problem's checker program on one test (at least twice the problem's time
    limit; wall clock: twice that plus 1 s). A checker over a limit is our error (SANDBOX_ERROR)."""
    checker_memory_bytes: int = 1 << 30
    checker_compile_time_s: float = 60.0
    """Compile-time limit of a checker program (compiled once per judge; a real testlib.h is large)."""
    max_source_bytes: int = 256 << 10
    python_checkers: list[str] = field(default_factory=list)
    """`python` checkers ("package.module:function") this judge may import and call, besides codefu's
    built-ins: the operator's code, run in the judge's process. A problem naming any other gets
    SANDBOX_ERROR and its program is not run; loaders refuse such a problem up front."""
    work_dir: str | None = None
    """Where programs, inputs and precompiled headers live (default: a private folder in $TMPDIR)."""
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    compile: CompileConfig = field(default_factory=CompileConfig)


@dataclass
class SingleRun:
    """A program compiled and run once on one input (`Judge.run_once`; the service's /run_code)."""

    compiled: bool  # False: a compile error (run is None)
    compile_output: str = ""
    compile_over_limit: bool = False  # the compiler ran out of time or memory
    compile_s: float = 0.0  # ~0 when the compile cache had the program
    run: RunResult | None = None
    stdout: str = ""
    stderr: str = ""
    output_cut: bool = False  # stdout held more than the `output_chars` returned
    error: str = ""  # our own failure (the sandbox could not run it): nothing about the program


def sweep_run_dirs(root: Path) -> None:
    """Remove the run folders under a judge's `root` whose process is gone (a judge killed before its
    `close`): its compile cache and inputs, which may be large."""
    for folder in root.glob("run-*-*"):
        pid = folder.name.split("-")[1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(folder, ignore_errors=True)


def output_at_cap(out: Path, err: Path, limits: Limits) -> bool:
    """A program that wrote up to its output limit: Python ignores SIGXFSZ (its writes fail with EFBIG
    and it exits 1), leaving a file at the cap where C++ is killed by the signal."""
    return max(out.stat().st_size, err.stat().st_size) >= limits.file_size_bytes


class Judge:
    """Thread-safe; `judge_many` spreads submissions and their tests over `workers` sandboxes."""

    def __init__(self, config: JudgeConfig | None = None):
        self.config = config or JudgeConfig()
        self.spec = reward_spec(self.config.reward)
        self.workers = self.config.workers or os.cpu_count() or 1
        self.root = make_work_dir(self.config.work_dir)
        sweep_run_dirs(self.root)
        check_reachable(self.root, self.config.sandbox)
        self.sandbox = open_sandbox(self.config.sandbox, self.root)
        self.run_dir = self.root / f"run-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.run_dir.mkdir(mode=0o711)
        (self.run_dir / "inputs").mkdir()
        self.inputs = InputFiles(self.run_dir / "inputs")
        (self.run_dir / "io").mkdir()
        self.compiler = Compiler(self.config.compile, self.sandbox, self.run_dir, self.root / "pch")
        self.harness_dir = install_harness(self.run_dir)  # for function-call problems
        self._tests_pool = ThreadPoolExecutor(self.workers, thread_name_prefix="judge-test")
        self._submissions_pool = ThreadPoolExecutor(self.workers, thread_name_prefix="judge-sub")
        self.warm_sessions = WarmSessions(self.sandbox, max_idle=self.workers * 4)  # for run_once

    # ---- public -------------------------------------------------------------------------------------

    def judge(self, problem: Problem, response: str, cancel: threading.Event | None = None) -> Verdict:
        """`cancel` set while judging: no further test starts (the service's client went away); the
        verdict is then SANDBOX_ERROR, never a judgement of the program."""
        start = time.monotonic()
        try:
            verdict = self._judge(problem, response, cancel)
            if cancel is not None and cancel.is_set():
                verdict = Verdict(Status.SANDBOX_ERROR, language=verdict.language, message="cancelled")
        except Exception as e:  # noqa: BLE001 - our failure, reported as such, never raised to the caller
            log.exception("judge failed on problem %r", problem.name)
            verdict = Verdict(Status.SANDBOX_ERROR, message=f"{type(e).__name__}: {e}"[:1000])
        verdict.time_s = time.monotonic() - start
        return verdict

    def judge_many(self, items: Iterable[tuple[Problem, str]]) -> Iterator[tuple[int, Verdict]]:
        """Judge every (problem, response); yields (position, verdict) as each finishes. `items` may arrive
        over time (a generator that waits for each completion to be decoded): each is judged as it comes."""
        if self.config.judge_identical_once:
            return judge_identical_once(items, self._judge_each)
        return self._judge_each(items)

    def _judge_each(self, items: Iterable[tuple[Problem, str]]) -> Iterator[tuple[int, Verdict]]:
        arrivals = Arrivals(items)  # items may still be arriving (completions being decoded)
        position: dict[Future[Verdict], int] = {}
        count = 0
        while not (arrivals.finished and not position):
            for p, r in arrivals.take():
                position[self._submissions_pool.submit(self.judge, p, r)] = count
                count += 1
            if not position:
                arrivals.wait(ARRIVAL_POLL_S)
                continue
            # while more may arrive, wake now and then to start them
            timeout = None if arrivals.finished else ARRIVAL_POLL_S
            done, _ = wait(list(position), timeout=timeout, return_when=FIRST_COMPLETED)
            for f in done:
                yield position.pop(f), f.result()

    def run_once(
        self,
        program: Program,
        stdin: str,
        limits: Limits,
        compile_time_s: float | None = None,
        files: dict[str, str] | None = None,
        output_chars: int = 1 << 20,
        cancel: threading.Event | None = None,
    ) -> SingleRun:
        """Compile `program` (once: the compile cache) with `files` beside it, run it on `stdin` under
        `limits` and return what it printed (stdout cut to `output_chars`, stderr to STDERR_CHARS x 8).
        The run takes a sandbox kept warm for the next run of the same program; with `files`, a fresh one
        whose working directory is the program's folder, where they lie. Python is not syntax-checked
        first: a syntax error shows as the run's exit status and traceback, as `python main.py` shows it.
        `cancel` set while it runs (the service's client left) kills the run in a warm sandbox at once;
        a run with `files` (a sandbox of its own) ends within its limits."""
        start = time.monotonic()
        try:
            with self.compiler.compiled(program, files, compile_time_s) as compiled:
                compile_s = time.monotonic() - start
                if not compiled.ok and program.language != "python":
                    return SingleRun(False, compiled.message, compiled.over_limit, compile_s)
                name = uuid.uuid4().hex
                out, err = self.run_dir / "io" / f"{name}.out", self.run_dir / "io" / f"{name}.err"
                try:
                    with self.inputs.hold(stdin) as stdin_file:
                        r = with_sandbox_retries(
                            lambda: self._run_once_in_sandbox(
                                compiled, bool(files), limits, stdin_file, out, err, cancel
                            )
                        )
                    if r.limit is None and output_at_cap(out, err, limits):
                        r.limit = "output"
                    stdout = read_head(out, output_chars)
                    cut = out.stat().st_size > len(stdout.encode("utf-8", errors="replace"))
                    return SingleRun(
                        True, "", False, compile_s, r, stdout, read_head(err, STDERR_CHARS * 8), cut
                    )
                finally:
                    out.unlink(missing_ok=True)
                    err.unlink(missing_ok=True)
        except Exception as e:  # noqa: BLE001 - our failure, reported as such
            log.exception("run_once failed")
            return SingleRun(False, error=f"{type(e).__name__}: {e}"[:1000])

    def _run_once_in_sandbox(
        self,
        compiled: Compiled,
        with_files: bool,
        limits: Limits,
        stdin: Path,
        out: Path,
        err: Path,
        cancel: threading.Event | None,
    ) -> RunResult:
        if with_files:  # the program reads them from its working directory, its own folder
            return self.sandbox.run(compiled.run_argv, limits, compiled.mounts, out, err, stdin, cwd=BOX)
        assert compiled.directory is not None
        argv, mounts, directory = compiled.run_argv, compiled.mounts, compiled.directory
        with self.warm_sessions.session(argv, mounts, directory, limits) as session:
            return session.run(stdin, out, err, limits, cancel)

    def close(self) -> None:
        self._submissions_pool.shutdown(wait=True, cancel_futures=True)
        self._tests_pool.shutdown(wait=True, cancel_futures=True)
        self.warm_sessions.close()
        self.sandbox.close()
        shutil.rmtree(self.run_dir, ignore_errors=True)

    def __enter__(self) -> Judge:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- one submission ---------------------------------------------------------------------------

    def _judge(self, problem: Problem, response: str, cancel: threading.Event | None = None) -> Verdict:
        if (refusal := python_checker_refusal(problem.checker, self.config.python_checkers)) is not None:
            return Verdict(Status.SANDBOX_ERROR, message=f"problem {problem.name!r}: {refusal}")
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
        if problem.function is not None and (error := language_error(program)) is not None:
            return Verdict(Status.COMPILE_ERROR, total=total, language=program.language, compile_output=error)
        with self.compiler.compiled(program) as compiled:
            if not compiled.ok:
                return Verdict(
                    Status.COMPILE_ERROR,
                    total=total,
                    language=program.language,
                    compile_output=compiled.message,
                )
            if problem.function is not None:  # run under the function-call harness
                compiled = harnessed(compiled, self.harness_dir, problem.function)
            results = self._run_tests(problem, program, compiled, tests, cancel)
        passed = sum(r.status is Status.ACCEPTED for r in results if r is not None)
        # a test a checker gave partial points counts as that fraction in the score
        score = sum(1.0 if r.status is Status.ACCEPTED else r.points or 0.0 for r in results if r is not None)
        first_failure = next(
            (i for i, r in enumerate(results) if r is not None and r.status is not Status.ACCEPTED), None
        )
        for i, r in enumerate(results):
            if r is not None and i != first_failure:
                r.output = ""  # a verdict carries one program output at most
        ours = next((r for r in results if r is not None and r.status is Status.SANDBOX_ERROR), None)
        if ours is not None:
            status, message = Status.SANDBOX_ERROR, ours.message
        elif first_failure is None:
            status, message = Status.ACCEPTED, ""
        else:
            status, message = results[first_failure].status, results[first_failure].message
        return Verdict(
            status,
            passed=passed,
            total=total,
            language=program.language,
            tests=[r for r in results if r is not None],
            first_failure=first_failure,
            compile_output=compiled.message,
            message=message,
            score=score,
        )

    def _run_tests(
        self,
        problem: Problem,
        program: Program,
        compiled: Compiled,
        tests: list[TestCase],
        cancel: threading.Event | None = None,
    ) -> list[TestResult | None]:
        """Results in test order; None for tests skipped after an early stop."""
        early_stop = self.spec.all_or_nothing if self.config.early_stop is None else self.config.early_stop
        limits = run_limits(self.config, problem, program.language)
        results: list[TestResult | None] = [None] * len(tests)
        lock = threading.Lock()
        next_test, stop = 0, False

        def take() -> int | None:
            nonlocal next_test
            with lock:
                if stop or next_test >= len(tests) or (cancel is not None and cancel.is_set()):
                    return None
                next_test += 1
                return next_test - 1

        def worker() -> None:
            """One sandbox session that takes tests in order until none are left (or one failed)."""
            nonlocal stop
            session = None

            def run(stdin: Path, out: Path, err: Path, limits: Limits) -> RunResult:
                """The test in this worker's sandbox, a new one if there is none or it is gone."""
                nonlocal session
                if session is None or session.dead:
                    if session is not None:
                        session.close()
                    session = self._open_session(compiled, limits)
                if session is None:
                    raise RuntimeError("the sandbox could not start")
                return session.run(stdin, out, err, limits, cancel)

            try:
                while (i := take()) is not None:
                    results[i] = self._run_test(problem, tests[i], limits, run)
                    status = results[i].status
                    # after our own failure (a broken checker, say) the verdict is SANDBOX_ERROR whatever
                    # the other tests give: don't spend a checker's limits on each of them
                    if status is Status.SANDBOX_ERROR or (early_stop and status is not Status.ACCEPTED):
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
        run: Callable[[Path, Path, Path, Limits], RunResult],
    ) -> TestResult:
        try:
            return self._run_test_unsafe(problem, test, limits, run)
        except Exception as e:  # noqa: BLE001
            log.exception("test run failed")
            return TestResult(Status.SANDBOX_ERROR, message=f"{type(e).__name__}: {e}"[:STDERR_CHARS])

    def _run_test_unsafe(
        self, problem: Problem, test: TestCase, limits: Limits, run: Callable[..., RunResult]
    ) -> TestResult:
        name = uuid.uuid4().hex
        out, err = self.run_dir / "io" / f"{name}.out", self.run_dir / "io" / f"{name}.err"
        try:
            with self.inputs.hold(test.input) as stdin:
                r = with_sandbox_retries(lambda: run(stdin, out, err, limits))
            stderr = read_head(err, STDERR_CHARS)
            result = TestResult(Status.ACCEPTED, r.cpu_s, r.wall_s, r.memory_bytes, r.exit_code, stderr)
            if r.limit in ("cpu", "wall"):
                result.status = Status.TIME_LIMIT
                result.message = f"{'CPU' if r.limit == 'cpu' else 'wall-clock'} time limit exceeded"
            elif r.limit == "memory":
                result.status = Status.MEMORY_LIMIT
            elif r.limit == "output" or output_at_cap(out, err, limits):
                result.status = Status.OUTPUT_LIMIT
            elif r.exit_code != 0:
                result.status = Status.RUNTIME_ERROR
                note = f" ({r.note})" if r.note else ""
                result.message = f"exit status {r.exit_code}{note}\n{stderr}"[:STDERR_CHARS]
            elif problem.function is not None:  # compared here, outside the sandbox
                result.status, note = check_output(test, out, problem.function, self.config.float_tol)
                result.message = note or result.message
            else:
                outcome = self._check(problem, test, out)
                result.status, result.points = outcome.status, outcome.points
                if outcome.message:
                    result.message = outcome.message
            if r.note and not result.message:
                result.message = r.note
            if result.status not in (Status.ACCEPTED, Status.SANDBOX_ERROR):
                result.output = read_head(out, OUTPUT_CHARS)  # `_judge` keeps the first failure's only
            return result
        finally:
            out.unlink(missing_ok=True)
            err.unlink(missing_ok=True)

    # ---- checking ---------------------------------------------------------------------------------

    def _check(self, problem: Problem, test: TestCase, output: Path) -> CheckerOutcome:
        checker = problem.checker
        if checker is not None and checker.kind == "program":
            return self._run_checker_program(problem, test, output)
        actual = output.read_bytes().decode("utf-8", errors="replace")
        if checker is None:
            ok = outputs_match(test.output, actual, self.config.float_tol)
        else:
            checker_fn = load_python_checker(checker.source, self.config.python_checkers)
            ok = bool(checker_fn(test.input, test.output, actual))
        return CheckerOutcome(Status.ACCEPTED if ok else Status.WRONG_ANSWER)

    def _run_checker_program(self, problem: Problem, test: TestCase, output: Path) -> CheckerOutcome:
        """Run the problem's checker (compiled once per judge, in the sandbox, under the checker limits)
        on one output; whatever goes wrong with the checker is SANDBOX_ERROR naming the problem."""
        spec = problem.checker
        assert spec is not None
        if (error := checker_files_error(spec.files)) is not None:
            message = f"checker of {problem.name!r}: {error}"
            return CheckerOutcome(Status.SANDBOX_ERROR, message[:STDERR_CHARS])
        program = Program(spec.language, spec.source)
        with self.compiler.compiled(program, spec.files, self.config.checker_compile_time_s) as checker:
            if not checker.ok:
                log.warning("checker of %r does not compile: %s", problem.name, checker.message[:300])
                message = f"checker of {problem.name!r} does not compile: {checker.message}"
                return CheckerOutcome(Status.SANDBOX_ERROR, message[:STDERR_CHARS])
            case = Path(tempfile.mkdtemp(dir=self.run_dir / "io"))
            try:
                (case / "input.txt").write_text(test.input)
                (case / "answer.txt").write_text(test.output)
                shutil.copyfile(output, case / "output.txt")
                case.chmod(0o755)
                for f in case.iterdir():
                    f.chmod(0o644)
                argv = checker.run_argv
                if spec.language == "python":  # [python, -B, script]
                    argv = [*argv[:-1], "-c", PYTHON_CHECKER, argv[-1]]
                argv = [*argv, "/check/input.txt", "/check/output.txt", "/check/answer.txt"]
                cpu = max(self.config.checker_time_s, problem.time_limit_s * 2)
                limits = Limits(
                    cpu, cpu * 2 + 1, self.config.checker_memory_bytes, self.config.output_limit_bytes
                )
                mounts = [*checker.mounts, Mount(case, "/check")]
                out, err = case / "checker.out", case / "checker.err"
                r = self.sandbox.run(argv, limits, mounts, out, err)
                # testlib writes its verdict to stderr; some checkers print it to stdout
                text = read_head(err, STDERR_CHARS).strip() or read_head(out, STDERR_CHARS)
                outcome = interpret_checker_exit(r.exit_code, text, r.limit, problem.name)
                if outcome.status is Status.SANDBOX_ERROR:
                    log.warning("%s", outcome.message)
                return outcome
            finally:
                shutil.rmtree(case, ignore_errors=True)


def run_limits(config: JudgeConfig, problem: Problem, language: str) -> Limits:
    """The limits a program in `language` runs a test of `problem` under: the problem's time limit x the
    judge's scales (CPU time; wall clock: that x wall_scale + 1 s), its memory limit, the output cap."""
    scale = config.time_scale * (config.python_time_scale if language == "python" else 1)
    cpu = problem.time_limit_s * scale
    return Limits(cpu, cpu * config.wall_scale + 1, problem.memory_limit_bytes, config.output_limit_bytes)


def with_sandbox_retries(run: Callable[[], RunResult]) -> RunResult:
    """`run()` (one program run in a sandbox), tried again after a pause when it raises, up to
    SANDBOX_ATTEMPTS times: a sandbox that raises ran nothing of the program (it did not start, its runner
    could not start the program or was gone); the last failure is raised."""
    for attempt in range(1, SANDBOX_ATTEMPTS):
        try:
            return run()
        except Exception as e:  # noqa: BLE001 - the sandbox's failure, ours: worth another try
            log.warning("the sandbox failed (%s: %s); trying again in a new one", type(e).__name__, e)
            time.sleep(SANDBOX_RETRY_PAUSE_S * attempt)
    return run()


def judge_identical_once(
    items: Iterable[tuple[Problem, str]],
    judge_many: Callable[[Iterable[tuple[Problem, str]]], Iterator[tuple[int, Verdict]]],
) -> Iterator[tuple[int, Verdict]]:
    """`judge_many` over the distinct (problem, program) pairs of `items` only; every other position gets
    a copy of its twin's verdict (marked `reused`) once the twin's is in. `items` may arrive over time
    (see Judge.judge_many): each goes on to `judge_many` as it comes, and a twin arriving after its
    first's verdict gets its copy at once, not when the next verdict comes (a self-repair episode may be
    waiting on it, the next items on that episode).

    Samples of a GRPO group converge on the same program as training sharpens the policy (most of a
    group's n, late in a run), and responses that differ only in prose around the code are the same
    submission: judging each copy again would only repeat the same runs. Problems are told apart by
    identity (the same object for the samples of one prompt), programs by what the judge would extract.
    """
    lock = threading.Lock()  # distinct() runs on the judge's arrivals thread (codefu.judge.arrivals)
    first: dict[tuple, int] = {}
    twins: dict[int, list[int]] = {}  # a first position -> twins waiting for its verdict
    unique: list[int] = []  # the positions judge_many sees, in its order
    verdicts: dict[int, Verdict] = {}  # first positions judged
    # what this generator gives, from two threads: ("judged", j, verdict) from judge_many (j: its
    # position there), ("late", i, verdict) for a twin that came after its first's verdict; then
    # ("end",), or ("error", exception)
    out: queue.Queue[tuple[Any, ...]] = queue.Queue()

    def reused(verdict: Verdict) -> Verdict:
        return replace(verdict, tests=list(verdict.tests), time_s=0.0, reused=True)

    def distinct() -> Iterator[tuple[Problem, str]]:
        for i, (problem, response) in enumerate(items):
            program = extract_program(response, problem.preferred_language)
            key = (id(problem), None if program is None else (program.language, program.source))
            with lock:
                if key in first:
                    f = first[key]
                    if f in verdicts:
                        out.put(("late", i, reused(verdicts[f])))
                    else:
                        twins[f].append(i)
                    continue
                first[key], twins[i] = i, []
                unique.append(i)
            yield problem, response

    def judge_distinct() -> None:
        try:
            for j, verdict in judge_many(distinct()):
                out.put(("judged", j, verdict))
            out.put(("end",))  # after every "late": distinct() was drained first
        except BaseException as e:  # noqa: BLE001 - raised to the consumer below
            out.put(("error", e))

    threading.Thread(target=judge_distinct, name="codefu-judge-distinct", daemon=True).start()
    while True:
        event = out.get()
        if event[0] == "end":
            return
        if event[0] == "error":
            raise event[1]
        _, position, verdict = event
        if event[0] == "late":
            yield position, verdict
            continue
        with lock:
            i = unique[position]
            verdicts[i] = verdict
            copies = twins.pop(i)
        yield i, verdict
        for twin in copies:
            yield twin, reused(verdict)
