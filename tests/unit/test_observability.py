"""codefu.observability: metric reduction, sinks (JSONL, TensorBoard, console), pass@k."""

import itertools
import json
import math
import os
import signal
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import pytest

from codefu.observability import (
    JsonlSink,
    MetricsSink,
    MultiSink,
    StepTimer,
    by_bucket,
    check_names,
    format_step_line,
    merge_metrics,
    pass_at_k,
    pass_at_k_table,
    passk_metrics,
    read_metrics,
    reduce_step_metrics,
    reduction_of,
    summary_stats,
    verdict_metrics,
    weighted_mean,
)
from codefu.observability import metrics as M
from codefu.observability.console import ConsoleSink
from codefu.types import Status

REPO = Path(__file__).resolve().parents[2]

# ---------------------------------------------------------------------------------------------- pass@k


def brute_pass_at_k(n: int, c: int, k: int) -> Fraction:
    """The definition: the share of the k-subsets of n samples (c correct) that hold a correct one."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return Fraction(sum(any(samples[i] for i in s) for s in subsets), len(subsets))


def test_pass_at_k_matches_the_combinatorial_definition():
    for n in range(1, 8):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(float(brute_pass_at_k(n, c, k)), abs=1e-12), (
                    n,
                    c,
                    k,
                )


def test_pass_at_k_edges():
    assert pass_at_k(10, 0, 1) == 0.0
    assert pass_at_k(10, 0, 10) == 0.0
    assert pass_at_k(10, 10, 1) == 1.0
    assert pass_at_k(10, 3, 8) == 1.0  # n - c < k: every draw holds a correct one
    assert pass_at_k(8, 3, 1) == pytest.approx(3 / 8)  # pass@1 is the plain accuracy
    for bad in [(4, 0, 5), (4, 1, 0), (4, 5, 1), (4, -1, 1), (0, 0, 1)]:
        with pytest.raises(ValueError):
            pass_at_k(*bad)


def test_pass_at_k_is_stable_for_large_n():
    # the binomials would overflow a float; the product form does not
    n, c, k = 2000, 7, 100
    exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    assert pass_at_k(n, c, k) == pytest.approx(float(exact), rel=1e-12)
    assert pass_at_k(1000, 1, 1) == pytest.approx(0.001)


def test_pass_at_k_table_averages_over_problems():
    results = {"a": [True, False, False, False], "b": [False] * 4, "c": [True, True, False, True, False]}
    table = pass_at_k_table(results, [2, 1])
    assert list(table) == [1, 2]
    assert table[1] == pytest.approx((1 / 4 + 0 + 3 / 5) / 3)
    assert table[2] == pytest.approx((pass_at_k(4, 1, 2) + 0 + pass_at_k(5, 3, 2)) / 3)
    with pytest.raises(ValueError, match="'a'"):
        pass_at_k_table(results, [5])
    with pytest.raises(ValueError):
        pass_at_k_table({}, [1])


def test_by_bucket_groups_problems():
    results = {"p1": [True, True], "p2": [False, False], "p3": [True, False], "p4": [False, True]}
    buckets = {"p1": "easy", "p2": "hard", "p3": "hard", "p4": "easy"}
    table = by_bucket(results, buckets, [1, 2])
    assert list(table) == ["easy", "hard"]
    assert table["easy"] == {1: pytest.approx(0.75), 2: pytest.approx(1.0)}
    assert table["hard"] == {1: pytest.approx(0.25), 2: pytest.approx(0.5)}
    assert by_bucket(results, lambda name: "all", [1]) == {"all": {1: pytest.approx(0.5)}}
    with pytest.raises(ValueError, match="p2"):
        by_bucket(results, {"p1": "easy"}, [1])
    names = passk_metrics(pass_at_k_table(results, [1, 2]), table)
    assert set(names) == {
        "eval/pass@1",
        "eval/pass@2",
        "eval/pass@1/easy",
        "eval/pass@2/easy",
        "eval/pass@1/hard",
        "eval/pass@2/hard",
    }
    check_names(names)


# ---------------------------------------------------------------------------------------------- metrics


def test_reduction_rule():
    assert reduction_of("policy/ratio_max") == "max"
    assert reduction_of("reward/max") == "max"
    assert reduction_of("rollout/response_len_min") == "min"
    assert reduction_of("judge/count") == "sum"
    assert reduction_of("perf/tokens_sum") == "sum"
    assert reduction_of("reward/mean") == "mean"
    assert reduction_of("loss/checksum") == "mean"  # a word that merely ends in "sum"


def test_reduce_step_metrics():
    records = [
        {"loss/pg": 1.0, "policy/ratio_max": 1.5, "judge/count": 4.0, "reward/min": 0.0},
        {"loss/pg": 3.0, "policy/ratio_max": 1.2, "judge/count": 6.0, "reward/min": -1.0, "loss/kl": 0.5},
    ]
    out = reduce_step_metrics(records)
    assert out == {
        "loss/pg": 2.0,
        "policy/ratio_max": 1.5,
        "judge/count": 10.0,
        "reward/min": -1.0,
        "loss/kl": 0.5,
    }
    weighted = reduce_step_metrics(records, weights=[1, 3])
    assert weighted["loss/pg"] == pytest.approx(2.5)
    assert weighted["loss/kl"] == 0.5  # only the second record has it
    assert math.isnan(reduce_step_metrics([{"loss/pg": 1.0}, {"loss/pg": math.nan}])["loss/pg"])
    assert math.isnan(reduce_step_metrics([{"a/x_max": math.nan}, {"a/x_max": 1.0}])["a/x_max"])
    assert reduce_step_metrics([]) == {}
    with pytest.raises(ValueError):
        reduce_step_metrics(records, weights=[1])


def test_weighted_mean():
    assert weighted_mean([1.0, 2.0, 4.0]) == pytest.approx(7 / 3)
    assert weighted_mean([1.0, 2.0], [3.0, 1.0]) == pytest.approx(1.25)
    assert math.isnan(weighted_mean([]))
    assert math.isnan(weighted_mean([1.0], [0.0]))
    with pytest.raises(ValueError):
        weighted_mean([1.0], [-1.0])


def test_summary_stats():
    assert summary_stats([1.0, 3.0], "reward/") == {
        "reward/mean": 2.0,
        "reward/std": 1.0,
        "reward/min": 1.0,
        "reward/max": 3.0,
    }
    assert set(summary_stats([5], "rollout/response_len_")) == {
        "rollout/response_len_mean",
        "rollout/response_len_std",
        "rollout/response_len_min",
        "rollout/response_len_max",
    }
    assert summary_stats([], "reward/") == {}


def test_verdict_metrics():
    statuses = [Status.ACCEPTED, Status.ACCEPTED, Status.WRONG_ANSWER, "TIME_LIMIT", Status.SANDBOX_ERROR]
    out = verdict_metrics(statuses)
    assert out["judge/verdict/AC"] == pytest.approx(0.4)
    assert out["judge/verdict/WA"] == pytest.approx(0.2)
    assert out["judge/verdict/TL"] == pytest.approx(0.2)
    assert out["judge/verdict/SE"] == pytest.approx(0.2)
    assert out["judge/verdict/CE"] == 0.0
    assert sum(out[f"judge/verdict/{c}"] for c in M.VERDICT_CODES.values()) == pytest.approx(1.0)
    assert out[M.PASS_RATE] == pytest.approx(0.5)  # SANDBOX_ERROR is not the model's: 2 AC of 4 scored
    assert out[M.JUDGE_COUNT] == 5.0
    empty = verdict_metrics([])
    assert empty[M.PASS_RATE] == 0.0 and empty[M.JUDGE_COUNT] == 0.0
    assert set(empty) == set(out)
    check_names(out)


def test_merge_and_check_names():
    assert merge_metrics({"a/x": 1.0}, {"b/y": 2.0}) == {"a/x": 1.0, "b/y": 2.0}
    with pytest.raises(ValueError, match="reward/mean"):
        merge_metrics({"reward/mean": 1.0}, {"reward/mean": 2.0})
    check_names(["reward/mean", "optim/lr", "timing/step_s", "eval/pass@1/easy"])
    with pytest.raises(ValueError, match="'bogus/x'.*'nonamespace'|'nonamespace'.*'bogus/x'"):
        check_names(["reward/mean", "bogus/x", "nonamespace", "loss/"])


def test_step_timer_accumulates(monkeypatch):
    clock = iter([0.0, 1.0, 3.0, 10.0, 10.5, 12.0])
    monkeypatch.setattr(M.time, "perf_counter", lambda: next(clock))
    timer = StepTimer()  # start 0.0
    with timer.phase("generate"):  # 1.0 -> 3.0
        pass
    with timer.phase("generate"):  # 10.0 -> 10.5: a second round adds up
        pass
    timer.add("judge_tail", 0.25)  # measured elsewhere (phases overlapping in time)
    timer.add("generate", 1.0)
    assert timer.metrics() == {"timing/generate_s": 3.5, "timing/judge_tail_s": 0.25, "timing/step_s": 12.0}


# ---------------------------------------------------------------------------------------------- console

FULL = {
    M.REWARD_MEAN: 0.4123,
    M.PASS_RATE: 0.375,
    M.RESPONSE_LEN: 412.3,
    M.KL: 0.0012,
    M.ENTROPY: 0.853,
    M.CLIP_FRAC: 0.021,
    M.TIME_STEP: 48.21,
    M.TIME_GENERATE: 30.1,
    M.TIME_JUDGE: 9.8,
    M.TIME_JUDGE_TAIL: 0.42,
    M.TIME_TRAIN: 7.6,
    M.TIME_SYNC: 0.7,
    **verdict_metrics(
        ["ACCEPTED"] * 6
        + ["WRONG_ANSWER"] * 4
        + ["TIME_LIMIT", "RUNTIME_ERROR", "RUNTIME_ERROR", "COMPILE_ERROR", "NO_CODE", "MEMORY_LIMIT"]
    ),
}


def test_console_line_with_all_metrics():
    line = format_step_line(12, FULL, total_steps=100)
    assert line == (
        "step  12/100 | reward +0.412 | pass  37.5% | AC  38 WA  25 TL   6 RE  12 CE   6 NC   6 ot   6"
        " | len   412 | kl 1.20e-03 | ent 0.853 | clip 0.021 | time  48.2s gen  30.1 judge   9.8 tail   0.4"
        " train   7.6 sync   0.7"
    )


def test_console_line_missing_metrics_print_dashes_at_the_same_width():
    full = format_step_line(7, FULL, total_steps=100)
    empty = format_step_line(7, {}, total_steps=100)
    assert empty == (
        "step   7/100 | reward      - | pass      - | AC   - WA   - TL   - RE   - CE   - NC   - ot   -"
        " | len     - | kl        - | ent     - | clip     - | time     -  gen     - judge     - tail     -"
        " train     - sync     -"
    )
    assert len(empty) == len(full)
    # columns line up: every "|" at the same place
    assert [i for i, ch in enumerate(empty) if ch == "|"] == [i for i, ch in enumerate(full) if ch == "|"]
    partial = {M.REWARD_MEAN: -1.0, M.TIME_STEP: 3.25}
    line = format_step_line(7, partial, total_steps=100)
    assert "reward -1.000" in line and "pass      -" in line and "time   3.2s gen     -" in line
    assert len(line) == len(full)
    assert format_step_line(3, {}).startswith("step     3 | reward      -")


def test_console_sink_prints_one_line_per_step():
    lines: list[str] = []
    with ConsoleSink(total_steps=10, out=lines.append) as sink:
        sink.write(1, FULL)
        sink.write(2, {})
    assert lines == [format_step_line(1, FULL, 10), format_step_line(2, {}, 10)]


# ---------------------------------------------------------------------------------------------- JSONL


def steps_in(run_dir: Path) -> list[int]:
    return [r["step"] for r in read_metrics(run_dir)]


def test_jsonl_sink_writes_one_object_per_step(tmp_path, monkeypatch):
    fsyncs: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd)))
    with JsonlSink(tmp_path) as sink:
        sink.write(1, {"reward/mean": 0.25, "loss/pg": -1.5})
        sink.write(2, {"reward/mean": 0.5, "optim/grad_norm": math.inf, "loss/pg": math.nan})
        assert len(fsyncs) == 2  # one per line
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 2
    first = json.loads(lines[0])
    assert first["step"] == 1 and first["reward/mean"] == 0.25 and first["loss/pg"] == -1.5
    assert isinstance(first["time"], float)
    second = json.loads(lines[1])
    assert second["optim/grad_norm"] is None and second["loss/pg"] is None  # strict JSON: no NaN/Infinity
    assert "NaN" not in lines[1] and "Infinity" not in lines[1]


def test_jsonl_sink_refuses_repeated_steps_and_reserved_names(tmp_path):
    with JsonlSink(tmp_path) as sink:
        sink.write(5, {"reward/mean": 0.0})
        with pytest.raises(ValueError, match="steps must increase"):
            sink.write(5, {"reward/mean": 0.0})
        with pytest.raises(ValueError, match="steps must increase"):
            sink.write(4, {"reward/mean": 0.0})
        with pytest.raises(ValueError, match="reserved"):
            sink.write(6, {"step": 1.0})
    with JsonlSink(tmp_path) as sink:  # a new sink on the same file continues after its last step
        with pytest.raises(ValueError):
            sink.write(5, {})
        sink.write(6, {})
    assert steps_in(tmp_path) == [5, 6]


def test_jsonl_sink_resume_keeps_steps_up_to_the_checkpoint(tmp_path):
    with JsonlSink(tmp_path) as sink:
        for step in range(1, 8):
            sink.write(step, {"reward/mean": step / 10})
    with JsonlSink(tmp_path, resume_step=4) as sink:
        assert steps_in(tmp_path) == [1, 2, 3, 4]
        for step in range(5, 10):
            sink.write(step, {"reward/mean": -step / 10})
    records = read_metrics(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in records] == list(range(1, 10))
    assert [r["reward/mean"] for r in records] == [s / 10 for s in range(1, 5)] + [
        -s / 10 for s in range(5, 10)
    ]
    assert not (tmp_path / "metrics.jsonl.tmp").exists()
    with JsonlSink(tmp_path / "fresh", resume_step=3) as sink:  # resuming with no file yet is fine
        sink.write(4, {})
    assert steps_in(tmp_path / "fresh") == [4]


def test_jsonl_sink_drops_a_torn_last_line(tmp_path):
    with JsonlSink(tmp_path) as sink:
        sink.write(1, {"reward/mean": 0.1})
        sink.write(2, {"reward/mean": 0.2})
    path = tmp_path / "metrics.jsonl"
    with open(path, "a") as f:
        f.write('{"step": 3, "time": 17000.0, "reward/me')  # killed mid-write
    assert steps_in(tmp_path) == [1, 2]  # the reader skips it
    with JsonlSink(tmp_path) as sink:  # no resume: the torn line is dropped, not glued to the next one
        sink.write(3, {"reward/mean": 0.3})
    assert path.read_text().count("\n") == 3
    assert [json.loads(line)["step"] for line in path.read_text().splitlines()] == [1, 2, 3]


KILLED_WRITER = """
import sys, time
from codefu.observability import JsonlSink
sink = JsonlSink(sys.argv[1])
step = 0
while True:
    step += 1
    sink.write(step, {"reward/mean": step / 1000, "loss/pg": -step / 1000})
    time.sleep(0.002)
"""


def test_jsonl_sink_survives_sigkill_and_resume_has_no_gaps_or_duplicates(tmp_path):
    path = tmp_path / "metrics.jsonl"
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(tmp_path)], env=env)
    try:
        deadline = time.monotonic() + 20
        while (not path.exists() or path.read_bytes().count(b"\n") < 20) and time.monotonic() < deadline:
            assert proc.poll() is None, "the writer died on its own"
            time.sleep(0.02)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    written = steps_in(tmp_path)
    assert len(written) >= 20 and written == list(range(1, len(written) + 1))
    with open(path, "ab") as f:
        f.write(b'{"step": 99999, "rew')  # as if the kill had cut a line short
    checkpoint = 10  # the driver resumes from its last checkpoint and redoes the later steps
    with JsonlSink(tmp_path, resume_step=checkpoint) as sink:
        for step in range(checkpoint + 1, len(written) + 6):
            sink.write(step, {"reward/mean": 1.0})
    lines = path.read_text().splitlines()
    steps = [json.loads(line)["step"] for line in lines]  # every line parses
    assert steps == list(range(1, len(written) + 6))


# ---------------------------------------------------------------------------------------------- TensorBoard


def read_tensorboard(log_dir: Path) -> dict[str, dict[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: {e.step: e.value for e in acc.Scalars(tag)} for tag in acc.Tags()["scalars"]}


def test_tensorboard_matches_jsonl(tmp_path):
    pytest.importorskip("tensorboard")
    from codefu.observability import TensorBoardSink

    steps = {
        s: {
            "reward/mean": 0.1 * s - 0.3,
            "judge/pass_rate": s / 7,
            "loss/pg": -0.01 * s**2,
            "timing/step_s": 1.5 + s,
        }
        for s in range(1, 6)
    }
    steps[4]["eval/pass@1"] = 0.625  # a metric only some steps have
    with MultiSink([JsonlSink(tmp_path), TensorBoardSink(tmp_path)]) as sink:
        for step, metrics in steps.items():
            sink.write(step, metrics)
    tb = read_tensorboard(tmp_path / "tensorboard")
    jsonl = read_metrics(tmp_path)
    from_jsonl: dict[str, dict[int, float]] = {}
    for rec in jsonl:
        for key, value in rec.items():
            if key not in ("step", "time"):
                from_jsonl.setdefault(key, {})[rec["step"]] = value
    assert (
        set(tb)
        == set(from_jsonl)
        == {"reward/mean", "judge/pass_rate", "loss/pg", "timing/step_s", "eval/pass@1"}
    )
    for tag, series in from_jsonl.items():
        assert list(tb[tag]) == list(series), tag
        for step, value in series.items():
            assert tb[tag][step] == pytest.approx(value, rel=1e-6, abs=1e-7), (tag, step)  # float32 in TB

    # resume from step 3: TensorBoard hides the old steps 4 and 5, the new ones replace them
    with TensorBoardSink(tmp_path, resume_step=3) as sink:
        for step in (4, 5):
            sink.write(step, {"reward/mean": 9.0})
    resumed = read_tensorboard(tmp_path / "tensorboard")
    assert resumed["reward/mean"] == {
        1: pytest.approx(-0.2),
        2: pytest.approx(-0.1),
        3: pytest.approx(0.0, abs=1e-7),
        4: 9.0,
        5: 9.0,
    }


# ---------------------------------------------------------------------------------------------- fan-out


class Recorder:
    def __init__(self, fail: bool = False) -> None:
        self.fail, self.steps, self.closed = fail, [], False

    def write(self, step, metrics):
        self.steps.append(step)
        if self.fail:
            raise RuntimeError("sink broke")

    def close(self):
        self.closed = True


def test_multi_sink_fans_out_and_reaches_every_sink_despite_errors():
    a, bad, b = Recorder(), Recorder(fail=True), Recorder()
    assert all(isinstance(s, MetricsSink) for s in (a, bad, b, MultiSink([])))
    sink = MultiSink([a, bad, b])
    with pytest.raises(RuntimeError, match="sink broke"):
        sink.write(1, {"reward/mean": 0.0})
    assert a.steps == bad.steps == b.steps == [1]
    sink.close()
    assert a.closed and bad.closed and b.closed
