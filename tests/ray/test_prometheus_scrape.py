"""A real Prometheus (Debian's /usr/bin/prometheus, on loopback, temporary storage) scrapes a short toy
training run through both export paths and reads codefu metrics back through its HTTP API:

- the driver's /metrics (observability.prometheus.port), found through RUN_DIR/prometheus_targets.json;
- Ray's metrics agent of the run's local Ray node (observability.prometheus.ray), renamed ray_codefu_* by
  Ray and back to codefu_* by the shipped scrape config's relabelling.

Every scraped value is checked against metrics.jsonl; every expression of the Grafana dashboard must
parse in Prometheus, and the panels this run feeds must have data. The same run also had MLflow, W&B
(offline) and TensorBoard on: their records are read back and compared with metrics.jsonl, and
`codefu report` renders it.

The training runs in its own process (`python test_prometheus_scrape.py RUN_DIR RAY_METRICS_PORT`), with
its own Ray started with a known metrics export port; it stays up after training until the test has read
the Ray path, since Ray serves a process's metrics only while the process lives.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
STEPS = 4
PROMETHEUS = shutil.which("prometheus")


def child(run_dir: Path, ray_metrics_port: int) -> None:
    sys.path.insert(0, str(REPO / "tests"))  # run as a script: no conftest put the helpers on the path
    import ray

    from codefu.config import dump_yaml
    from codefu.models.tiny import tiny_tokenizer
    from codefu.observability.config import ObservabilityConfig, PrometheusConfig
    from codefu.orchestrator.loop import train
    from helpers.toy_loop import CharScorer, toy_config, toy_model_dir, toy_problems

    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        _metrics_export_port=ray_metrics_port,
    )
    cfg = toy_config(toy_model_dir(run_dir.parent / "model"), STEPS)
    cfg = replace(
        cfg,
        loop=replace(cfg.loop, val_every=2),
        observability=ObservabilityConfig(
            trackers=["tensorboard", "mlflow", "wandb", "console"],
            # final_scrape_s: the driver endpoint closes with the run; it waits for one last scrape first
            prometheus=PrometheusConfig(ray=True, port=0, final_scrape_s=120),
        ),
    )
    (run_dir / "config.yaml").write_text(dump_yaml(cfg))  # as `codefu train` saves it
    train(cfg, run_dir, toy_problems(), toy_problems()[:2], tiny_tokenizer(), CharScorer())
    (run_dir / "trained").write_text("")
    deadline = time.monotonic() + 300
    while not (run_dir / "stop").exists() and time.monotonic() < deadline:
        time.sleep(0.2)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prometheus_config(run_dir: Path) -> dict:
    """The shipped config's `codefu` job, pointed at this run's targets file, scraping every 500 ms. Ray
    lists its node by the machine's interface address; the test keeps every scrape on loopback."""
    shipped = yaml.safe_load((REPO / "deploy" / "prometheus" / "prometheus.yml").read_text())
    (job,) = [j for j in shipped["scrape_configs"] if j["job_name"] == "codefu"]
    job = dict(job, scrape_interval="500ms", scrape_timeout="500ms")
    job["file_sd_configs"] = [{"files": [str(run_dir / "prometheus_targets.json")], "refresh_interval": "1s"}]
    job["relabel_configs"] = [
        {
            "source_labels": ["__address__"],
            "regex": r"[^:]+:(\d+)",
            "target_label": "__address__",
            "replacement": "127.0.0.1:$1",
        }
    ]
    return {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"}, "scrape_configs": [job]}


class Prometheus:
    def __init__(self, port: int):
        self.base = f"http://127.0.0.1:{port}"

    def get(self, path: str, **params) -> dict:
        url = f"{self.base}{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict]:
        """An instant query, now or at the Unix time `at`."""
        params = {"query": expr} if at is None else {"query": expr, "time": f"{at:.3f}"}
        return self.get("/api/v1/query", **params)["result"]

    def wait(self, what: str, ready, deadline_s: float, proc: subprocess.Popen, log: Path):
        """Poll `ready()` until it returns a truthy value (a bound, not a timed assertion: the machine may
        be slow); fail with the child's log if the child died first."""
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            value = ready()
            if value:
                return value
            assert proc.poll() is None or (proc.returncode == 0 and what != "training"), (
                f"the training process ended ({proc.returncode}) while waiting for {what}:\n"
                + log.read_text()[-4000:]
            )
            time.sleep(0.5)
        raise AssertionError(f"no {what} after {deadline_s} s\n" + log.read_text()[-4000:])


def value_of(result: list[dict], **labels) -> float:
    hits = [r for r in result if all(r["metric"].get(k) == v for k, v in labels.items())]
    assert len(hits) == 1, (labels, result)
    return float(hits[0]["value"][1])


@pytest.mark.skipif(PROMETHEUS is None, reason="needs Debian's prometheus package (scripts/setup.sh)")
@pytest.mark.slow
def test_prometheus_scrapes_a_training_run(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump(prometheus_config(run_dir)))
    prom_port, ray_port = free_port(), free_port()
    prom_log, child_log = tmp_path / "prometheus.log", tmp_path / "train.log"
    prom = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
            "--log.level=warn",
        ],
        stdout=open(prom_log, "w"),
        stderr=subprocess.STDOUT,
    )
    env = dict(os.environ, RAY_metrics_report_interval_ms="1000", WANDB_SILENT="true")
    train = subprocess.Popen(
        [sys.executable, __file__, str(run_dir), str(ray_port)],
        stdout=open(child_log, "w"),
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
        cwd=REPO,
    )
    try:
        p = Prometheus(prom_port)
        p.wait("training", lambda: (run_dir / "trained").exists(), 540, train, child_log)
        from codefu.observability.sinks import read_metrics

        records = {r["step"]: r for r in read_metrics(run_dir)}
        assert sorted(records) == list(range(1, STEPS + 1))

        # Driver path: its endpoint is gone now, but every scrape it served is stored. Each pairs a step
        # with the reward of that step (one snapshot per scrape); the last step was scraped before close.
        def scraped(name: str) -> dict[float, float]:
            (series,) = p.query(f'{name}{{endpoint="driver",run="run"}}[1h]')
            return {float(t): float(v) for t, v in series["values"]}

        steps, rewards = scraped("codefu_step"), scraped("codefu_reward_mean")
        pairs = {int(steps[t]): rewards[t] for t in steps if t in rewards}
        assert STEPS in pairs, pairs
        for step, reward in pairs.items():
            assert reward == pytest.approx(records[step]["reward/mean"], rel=1e-9), (step, reward)
        judged = sum(r["judge/count"] for r in records.values())
        total = p.query('max_over_time(codefu_judge_submissions_total{endpoint="driver"}[1h])')
        assert value_of(total) == judged
        counts = {
            code: sum(round(r[f"judge/verdict/{code}"] * r["judge/count"]) for r in records.values())
            for code in ("AC", "WA", "TL", "ML", "RE", "OL", "CE", "NC", "SE")
        }
        by_status = p.query('max_over_time(codefu_judge_verdicts_total{endpoint="driver"}[1h])')
        assert {r["metric"]["status"]: float(r["value"][1]) for r in by_status} == counts  # zeros included

        # Ray path: the child's core worker still reports the last values through the metrics agent.
        p.wait(
            "the Ray path's last step",
            lambda: any(float(r["value"][1]) == STEPS for r in p.query('codefu_step{endpoint="ray"}')),
            120,
            train,
            child_log,
        )
        last = records[STEPS]
        assert value_of(p.query('codefu_reward_mean{endpoint="ray"}')) == pytest.approx(last["reward/mean"])
        assert value_of(p.query('codefu_eval_pass_at_k{endpoint="ray"}'), k="1", bucket="all") == (
            pytest.approx(last["eval/pass@1"])
        )
        assert value_of(p.query('codefu_step_seconds{endpoint="ray"}'), phase="generate") == (
            pytest.approx(last["timing/generate_s"])
        )
        verdicts = p.query('sum by (status) (codefu_judge_verdicts_total{endpoint="ray"})')
        # Ray's Counter cannot add 0, so a verdict never seen has no series on this path
        assert {r["metric"]["status"]: float(r["value"][1]) for r in verdicts} == {
            code: n for code, n in counts.items() if n
        }
        assert p.query("ray_codefu_reward_mean") == []  # renamed by the shipped relabelling

        # The Grafana dashboard: every expression parses; the panels this run feeds have data.
        dash = json.loads((REPO / "dashboards" / "codefu.json").read_text())
        fed = {
            "Step",
            "Pass rate (last step)",
            "Step time",
            "Reward and pass rate",
            "Validation pass@k",
            "Verdict mix",
            "Response length",
            "KL / entropy / clip fraction",
            "Time per phase",
            "Judge throughput",
            "Rollout tokens per second",
        }
        # evaluated at one moment of the Ray path (the driver's endpoint is gone, and a query 75 s later
        # found the Ray path's series gone too): once its judge counter has two samples within a minute,
        # so that the panels' rates over 1m have two points (the driver's was scraped only once in a run
        # of a few seconds)
        p.wait(
            "two samples of the Ray path's judge counter",
            lambda: any(
                float(r["value"][1]) >= 2
                for r in p.query('count_over_time(codefu_judge_submissions_total{endpoint="ray"}[1m])')
            ),
            120,
            train,
            child_log,
        )
        at = time.time()
        for panel in dash["panels"]:
            results = [
                p.query(t["expr"].replace("$run", ".*").replace("$__rate_interval", "1m"), at=at)
                for t in panel["targets"]
            ]
            if panel["title"] in fed:
                assert any(results), panel["title"]
    finally:
        (run_dir / "stop").write_text("")
        try:
            train.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(train.pid, signal.SIGKILL)
            train.wait()
        prom.terminate()
        try:
            prom.wait(timeout=30)
        except subprocess.TimeoutExpired:
            prom.kill()
            prom.wait()
    assert train.returncode == 0, child_log.read_text()[-4000:]

    check_trackers_and_report(run_dir)


def check_trackers_and_report(run_dir: Path) -> None:
    from codefu.observability.report import SECTIONS, write_report
    from codefu.observability.trackers import mlflow_key
    from helpers.trackers import (
        jsonl_values,
        read_mlflow,
        read_tensorboard,
        read_wandb_history,
        same,
    )

    expected = jsonl_values(run_dir)
    assert "eval/pass@4" in expected and "rollout/tokens_per_s" in expected
    (mlflow,) = read_mlflow(run_dir)
    ((_, wandb),) = read_wandb_history(run_dir)
    tensorboard = read_tensorboard(run_dir / "tensorboard")
    for key, by_step in expected.items():
        for name, got in (
            ("mlflow", mlflow["history"][mlflow_key(key)]),
            ("wandb", wandb[key]),
            ("tensorboard", tensorboard[key]),
        ):
            assert set(got) == set(by_step), (name, key)
            # TensorBoard keeps float32
            assert all(
                same(by_step[s], got[s])
                if name != "tensorboard"
                else got[s] == pytest.approx(by_step[s], rel=1e-6, abs=1e-7)
                for s in by_step
            ), (name, key)
    page = write_report(run_dir).read_text()
    assert page.count('<img class="plot"') == len(SECTIONS)
    assert f"finished: {STEPS} of {STEPS} steps" in page


if __name__ == "__main__":
    child(Path(sys.argv[1]), int(sys.argv[2]))
