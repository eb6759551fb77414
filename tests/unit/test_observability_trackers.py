"""codefu.observability trackers: open_sinks from the config, and what MLflow, W&B (offline) and
TensorBoard hold afterwards, read back with their own readers and compared with metrics.jsonl, across a
resume."""

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from codefu.errors import CodefuError
from codefu.observability.config import ObservabilityConfig, PrometheusConfig
from codefu.observability.metrics import verdict_metrics
from codefu.observability.setup import open_sinks
from codefu.observability.sinks import read_metrics
from codefu.observability.trackers import flatten_config, mlflow_key
from codefu.types import Status
from helpers.trackers import jsonl_values, read_mlflow, read_tensorboard, read_wandb_history, same

NO_PROMETHEUS = PrometheusConfig(ray=False, port=None)


def step_metrics(step: int) -> dict[str, float]:
    statuses = [Status.ACCEPTED] * step + [Status.WRONG_ANSWER] * 3
    m = verdict_metrics(statuses) | {
        "reward/mean": 0.1 * step,
        "loss/kl": 1e-3 / step,
        "timing/judge_s": 2.0,
        "timing/step_s": 5.0,
    }
    if step % 2 == 0:
        m |= {"eval/pass@1": 0.05 * step, "eval/pass@4/easy": 0.1 * step}
    if step == 3:
        m["policy/entropy"] = math.nan  # written as null in metrics.jsonl
    return m


@dataclass
class Inner:
    lr: float = 1e-6
    tags: list[str] = field(default_factory=lambda: ["a", "b"])
    note: str | None = None


@dataclass
class FakeRunConfig:
    trainer: Inner = field(default_factory=Inner)
    steps: int = 6


def run_session(run_dir: Path, cfg: ObservabilityConfig, steps: range, resume_step: int | None = None):
    sink = open_sinks(
        cfg, run_dir, resume_step, total_steps=6, run_config=FakeRunConfig(), out=lambda s: None
    )
    try:
        for step in steps:
            sink.write(step, step_metrics(step))
    finally:
        sink.close()


def test_flatten_config_and_mlflow_keys():
    assert flatten_config(FakeRunConfig()) == {
        "trainer.lr": 1e-6,
        "trainer.tags": '["a", "b"]',
        "trainer.note": "null",
        "steps": 6,
    }
    assert mlflow_key("eval/pass@8/hard") == "eval/pass_at_8/hard"
    assert mlflow_key("judge/verdict/AC") == "judge/verdict/AC"
    assert mlflow_key("a b:c.d-e/f_g%h") == "a b:c.d-e/f_g_h"


def test_tracker_names_are_checked():
    with pytest.raises(CodefuError, match=r"observability.trackers\[1\].*'console' is listed twice"):
        open_sinks(ObservabilityConfig(["console", "console"], prometheus=NO_PROMETHEUS), "/nonexistent")
    with pytest.raises(CodefuError, match=r"observability.trackers\[0\].*unknown tracker 'neptune'"):
        open_sinks(ObservabilityConfig(["neptune"], prometheus=NO_PROMETHEUS), "/nonexistent")  # type: ignore[list-item]


def test_every_sink_gets_the_same_record_with_rates_added(tmp_path):
    lines: list[str] = []
    cfg = ObservabilityConfig(["console"], prometheus=NO_PROMETHEUS)
    sink = open_sinks(cfg, tmp_path, total_steps=6, out=lines.append)
    sink.write(1, step_metrics(1))
    sink.close()
    (rec,) = read_metrics(tmp_path)
    assert rec["judge/submissions_per_s"] == pytest.approx(4 / 2.0)  # judge/count 4 over 2 s
    assert len(lines) == 1 and lines[0].startswith("step 1/6 | reward +0.100 | pass  25.0%")


def test_mlflow_holds_what_metrics_jsonl_holds_and_a_resume_replays_the_kept_steps(tmp_path):
    pytest.importorskip("mlflow")
    run_dir = tmp_path / "run"
    cfg = ObservabilityConfig(["mlflow"], prometheus=NO_PROMETHEUS)
    run_session(run_dir, cfg, range(1, 6))  # "crashes" after step 5; its checkpoint was at step 2
    run_session(run_dir, cfg, range(3, 7), resume_step=2)
    expected = jsonl_values(run_dir)
    assert sorted(expected["reward/mean"]) == [1, 2, 3, 4, 5, 6]

    first, second = read_mlflow(run_dir)
    assert first["run"].info.status == second["run"].info.status == "FINISHED"
    assert second["run"].data.tags["codefu.resumed_from_step"] == "2"
    assert second["run"].data.tags["codefu.run_dir"] == str(run_dir.resolve())
    assert second["run"].data.params["trainer.lr"] == "1e-06"
    assert second["run"].data.params["trainer.tags"] == '["a", "b"]'
    history = second["history"]
    assert set(history) == {mlflow_key(k) for k in expected}
    for key, by_step in expected.items():
        got = history[mlflow_key(key)]
        assert set(got) == set(by_step), key
        assert all(same(by_step[s], got[s]) for s in by_step), (key, by_step, got)
    assert history["eval/pass_at_4/easy"] == {
        2: pytest.approx(0.2),
        4: pytest.approx(0.4),
        6: pytest.approx(0.6),
    }
    # the crashed session's run keeps what it logged (steps 1-5), untouched
    assert sorted(first["history"]["reward/mean"]) == [1, 2, 3, 4, 5]


def test_wandb_offline_run_holds_what_metrics_jsonl_holds(tmp_path):
    pytest.importorskip("wandb")
    run_dir = tmp_path / "run"
    cfg = ObservabilityConfig(["wandb"], prometheus=NO_PROMETHEUS)
    run_session(run_dir, cfg, range(1, 5))
    run_session(run_dir, cfg, range(4, 7), resume_step=3)
    expected = jsonl_values(run_dir)
    (config1, first), (config2, second) = read_wandb_history(run_dir)
    assert config2["trainer"] == {"lr": 1e-6, "tags": ["a", "b"], "note": None}
    assert set(second) == set(expected)
    for key, by_step in expected.items():
        assert set(second[key]) == set(by_step), key
        assert all(same(by_step[s], second[key][s]) for s in by_step), (key, by_step, second[key])
    assert sorted(first["reward/mean"]) == [1, 2, 3, 4]


def test_tensorboard_from_open_sinks_matches_jsonl_across_a_resume(tmp_path):
    cfg = ObservabilityConfig(["tensorboard"], prometheus=NO_PROMETHEUS)
    run_session(tmp_path, cfg, range(1, 6))
    run_session(tmp_path, cfg, range(3, 7), resume_step=2)
    expected = jsonl_values(tmp_path)
    tb = read_tensorboard(tmp_path / "tensorboard")
    assert set(tb) == set(expected)
    for key, by_step in expected.items():
        assert set(tb[key]) == set(by_step), key
        assert all(same(by_step[s], tb[key][s]) for s in by_step), key


def test_a_tracker_that_fails_to_open_closes_the_sinks_opened_before_it(tmp_path, monkeypatch):
    cfg = ObservabilityConfig(["console", "mlflow"], prometheus=NO_PROMETHEUS)
    cfg.mlflow.tracking_uri = "nosuchscheme://x"
    pytest.importorskip("mlflow")
    with pytest.raises(Exception, match="nosuchscheme"):
        open_sinks(cfg, tmp_path)
    # the JSONL sink was closed: a new one can open and append at once
    run_session(tmp_path, ObservabilityConfig([], prometheus=NO_PROMETHEUS), range(1, 2))
    assert [r["step"] for r in read_metrics(tmp_path)] == [1]


def test_observability_config_from_yaml_and_its_errors(tmp_path):
    from codefu.config import load_config
    from codefu.orchestrator.config import RunConfig

    cfg = load_config(
        RunConfig, None, ["observability.trackers=[tensorboard,mlflow]", "observability.prometheus.port=0"]
    )
    assert cfg.observability.trackers == ["tensorboard", "mlflow"] and cfg.observability.prometheus.port == 0
    with pytest.raises(CodefuError, match=r"observability.trackers\[1\] must be one of"):
        load_config(RunConfig, None, ["observability.trackers=[console,tensorbord]"])
    with pytest.raises(CodefuError, match="unknown key observability.prometheus.prot"):
        load_config(RunConfig, None, ["observability.prometheus.prot=1"])
    bad_port = ObservabilityConfig([], prometheus=PrometheusConfig(ray=False, port=70000))
    with pytest.raises(CodefuError, match="observability.prometheus.port: 70000 is not a TCP port"):
        open_sinks(bad_port, tmp_path)


@pytest.mark.parametrize("tracker, module", [("mlflow", "mlflow"), ("wandb", "wandb")])
def test_a_tracker_without_its_package_says_how_to_install_it(tmp_path, monkeypatch, tracker, module):
    monkeypatch.setitem(sys.modules, module, None)  # as if not installed: importing it fails
    with pytest.raises(
        CodefuError,
        match=rf"lists '{tracker}' but the {module} package is not installed: "
        r"pip install 'codefu\[trackers\]'",
    ):
        open_sinks(ObservabilityConfig([tracker], prometheus=NO_PROMETHEUS), tmp_path)
