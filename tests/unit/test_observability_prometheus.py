"""codefu.observability.prometheus: key -> series mapping, counters from verdict fractions, the driver's
/metrics endpoint read over HTTP, the targets file, the shipped scrape config and Grafana dashboard."""

import json
import math
import re
import shutil
import subprocess
import threading
import urllib.request
from pathlib import Path

import pytest
import yaml

from codefu.observability import metrics as M
from codefu.observability.metrics import derived_metrics, summary_stats, verdict_metrics
from codefu.observability.passk import passk_metrics
from codefu.observability.prometheus import (
    DriverExporter,
    PrometheusSink,
    Series,
    counter_increments,
    gauge_samples,
    prometheus_series,
    set_judge_load,
    targets_groups,
    verdict_counts,
)
from codefu.types import Status

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "key, name, labels",
    [
        ("reward/mean", "codefu_reward_mean", {}),
        ("judge/pass_rate", "codefu_judge_pass_rate", {}),
        ("judge/verdict/AC", "codefu_judge_verdict_ratio", {"status": "AC"}),
        ("judge/verdict/SE", "codefu_judge_verdict_ratio", {"status": "SE"}),
        ("timing/generate_s", "codefu_step_seconds", {"phase": "generate"}),
        ("timing/update_s", "codefu_step_seconds", {"phase": "update"}),
        ("timing/step_s", "codefu_step_duration_seconds", {}),
        ("eval/pass@8", "codefu_eval_pass_at_k", {"k": "8", "bucket": "all"}),
        ("eval/pass@1/hard", "codefu_eval_pass_at_k", {"k": "1", "bucket": "hard"}),
        ("eval/reward_mean", "codefu_eval_reward_mean", {}),
        ("rollout/tokens_per_s", "codefu_rollout_tokens_per_second", {}),
        ("judge/submissions_per_s", "codefu_judge_submissions_per_second", {}),
        ("rollout/response_len_mean", "codefu_rollout_response_len_mean", {}),
        ("optim/grad_norm_max", "codefu_optim_grad_norm_max", {}),
        ("perf/wait_s", "codefu_perf_wait_seconds", {}),
        ("policy/ratio-max.x", "codefu_policy_ratio_max_x", {}),
    ],
)
def test_prometheus_series_names(key, name, labels):
    s = prometheus_series(key)
    assert (s.name, dict(s.labels)) == (name, labels)
    assert re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", s.name)
    assert list(s.label_names) == sorted(s.label_names)


@pytest.mark.parametrize("key", ["reward", "/mean", "reward/", ""])
def test_prometheus_series_refuses_keys_without_a_namespace(key):
    with pytest.raises(ValueError, match="namespace/name"):
        prometheus_series(key)


def realistic_step() -> dict[str, float]:
    """A record with every key the loop, the trainer and validation write today."""
    statuses = [Status.ACCEPTED] * 5 + [Status.WRONG_ANSWER] * 2 + [Status.SANDBOX_ERROR]
    m = verdict_metrics(statuses)
    m |= summary_stats([0.1, 0.5, 0.9], "reward/") | summary_stats([10, 20], "rollout/response_len_")
    m |= {
        "rollout/samples": 8.0,
        "rollout/kept_samples": 8.0,
        "rollout/stop_frac": 1.0,
        "rollout/logprob_diff_abs_mean": 1e-4,
        "rollout/logprob_diff_abs_max": 1e-3,
        "policy/advantage_abs_mean": 0.7,
        "loss/pg": 0.1,
        "loss/kl": 0.0,
        "loss/total": 0.1,
        "policy/entropy": 0.8,
        "policy/ratio_max": 1.1,
        "policy/clip_frac": 0.02,
        "policy/approx_kl": 1e-3,
        "policy/ratio_mean": 1.0,
        "optim/grad_norm": 1.0,
        "optim/grad_norm_max": 1.0,
        "optim/lr": 1e-6,
        "optim/skipped": 0.0,
        "optim/steps": 2.0,
        "perf/tokens": 300.0,
        "perf/response_tokens": 120.0,
        "timing/update_s": 3.0,
        "timing/generate_s": 10.0,
        "timing/judge_s": 4.0,
        "timing/train_s": 5.0,
        "timing/sync_s": 0.5,
        "timing/step_s": 20.0,
        "eval/reward_mean": 0.3,
    }
    m |= passk_metrics({1: 0.5, 4: 0.75}, {"easy": {1: 0.6, 4: 0.8}})
    # self-repair (rollout.turns 2): codefu.orchestrator.episodes.episode_metrics, turn shaping, validation
    m |= {
        "rollout/turns_mean": 1.5,
        "rollout/ended_early_frac": 0.5,
        "rollout/public_pass_turn1": 0.25,
        "rollout/feedback_tokens_mean": 120.0,
        "judge/pass_rate_turn1": 1.0,
        "judge/pass_rate_turn2": 0.5,
        "reward/turn_shaping": -0.05,
        "eval/turn1_pass@1": 0.3,
        "eval/turn1_pass@1_ci_low": 0.1,
        "eval/turn1_pass@1_ci_high": 0.5,
        "eval/turn2_pass@1": 0.4,
    }
    return m | derived_metrics(m)


def test_every_metric_of_a_real_step_gets_its_own_series():
    metrics = realistic_step()
    gauges = gauge_samples(12, metrics)
    assert len(gauges) == len(metrics) + 1  # + codefu_step
    assert gauges[Series("codefu_step")] == 12.0
    assert gauges[Series("codefu_judge_verdict_ratio", (("status", "AC"),))] == pytest.approx(5 / 8)
    assert gauges[Series("codefu_eval_pass_at_k", (("bucket", "easy"), ("k", "4")))] == 0.8
    assert gauges[Series("codefu_step_seconds", (("phase", "judge"),))] == 4.0


def test_two_keys_on_one_series_or_clashing_labels_are_refused():
    with pytest.raises(ValueError, match="'reward/x_y'.*'reward/x/y'"):
        gauge_samples(1, {"reward/x_y": 1.0, "reward/x/y": 2.0})
    # a plain key whose name a labelled family already uses
    with pytest.raises(ValueError, match="codefu_step_seconds"):
        gauge_samples(1, {"timing/judge_s": 1.0, "step/seconds": 2.0})


def test_verdict_counts_and_counter_increments_from_fractions():
    statuses = [Status.ACCEPTED] * 3 + [Status.COMPILE_ERROR] * 4 + [Status.NO_CODE]
    m = verdict_metrics(statuses)
    assert verdict_counts(m) == {
        "AC": 3,
        "WA": 0,
        "TL": 0,
        "ML": 0,
        "RE": 0,
        "OL": 0,
        "CE": 4,
        "NC": 1,
        "SE": 0,
    }
    inc = counter_increments(m)
    assert inc[Series("codefu_judge_verdicts_total", (("status", "CE"),))] == 4
    assert inc[Series("codefu_judge_submissions_total")] == 8
    assert counter_increments({"reward/mean": 1.0}) == {}  # no judge/count: nothing to count


def test_derived_rates():
    m = {
        M.JUDGE_COUNT: 32.0,
        M.TIME_JUDGE: 8.0,
        M.RESPONSE_LEN: 100.0,
        M.KEPT_SAMPLES: 32.0,
        M.TIME_GENERATE: 16.0,
    }
    assert derived_metrics(m) == {M.JUDGE_PER_S: 4.0, M.ROLLOUT_TOKENS_PER_S: 200.0}
    # the loop's own count of generated tokens wins over mean x kept samples
    assert derived_metrics(m | {M.RESPONSE_TOKENS: 4000.0})[M.ROLLOUT_TOKENS_PER_S] == 250.0
    # a key the record already has is not replaced; missing, zero or NaN inputs give no rate
    assert M.JUDGE_PER_S not in derived_metrics(m | {M.JUDGE_PER_S: 1.0})
    assert derived_metrics({M.JUDGE_COUNT: 3.0, M.TIME_JUDGE: 0.0}) == {}
    assert derived_metrics({M.JUDGE_COUNT: math.nan, M.TIME_JUDGE: 1.0}) == {}
    assert derived_metrics({}) == {}
    # judging overlapped with decoding has no judge phase: the judge's busy time is the divisor (and
    # wins over timing/judge_s when a record has both)
    assert derived_metrics({M.JUDGE_COUNT: 32.0, M.JUDGE_BUSY: 2.0}) == {M.JUDGE_PER_S: 16.0}
    assert derived_metrics({M.JUDGE_COUNT: 32.0, M.JUDGE_BUSY: 2.0, M.TIME_JUDGE: 8.0}) == {
        M.JUDGE_PER_S: 16.0
    }


def test_busy_clock_counts_overlapping_work_once(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(M.time, "perf_counter", lambda: now[0])
    clock = M.BusyClock()
    clock.begin()  # t=100: one outstanding
    now[0] = 101.0
    clock.begin(2)  # t=101: three
    now[0] = 102.0
    clock.end()
    assert clock.seconds == 2.0  # still running: the open interval counts
    now[0] = 103.0
    clock.end(2)  # t=103: idle after 3 s
    now[0] = 110.0
    assert clock.seconds == 3.0  # idle time does not count
    clock.end()  # more ends than begins: ignored, not negative
    clock.begin()
    now[0] = 111.5
    clock.end(5)
    assert clock.seconds == 4.5
    clock.begin(0)
    now[0] = 120.0
    assert clock.seconds == 4.5


def scrape(address: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    from prometheus_client.parser import text_string_to_metric_families

    text = urllib.request.urlopen(f"http://{address}/metrics", timeout=10).read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_driver_endpoint_serves_each_step_and_adds_counters(tmp_path):
    sink = PrometheusSink(tmp_path / "run-a", [DriverExporter("127.0.0.1", 0)])
    try:
        address = sink.exporters[0].address
        statuses = [Status.ACCEPTED] * 3 + [Status.WRONG_ANSWER]
        sink.write(1, verdict_metrics(statuses) | {"reward/mean": 0.25, "timing/judge_s": 2.0})
        sink.write(2, verdict_metrics(statuses[:2]) | {"reward/mean": math.nan})
        got = scrape(address)
        run = ("run", "run-a")
        assert got[("codefu_step", (run,))] == 2
        assert math.isnan(got[("codefu_reward_mean", (run,))])  # the last step's value, NaN included
        assert got[("codefu_step_seconds", (("phase", "judge"), run))] == 2.0  # step 2 had none: kept
        assert got[("codefu_judge_verdicts_total", (run, ("status", "AC")))] == 3 + 2
        assert got[("codefu_judge_verdicts_total", (run, ("status", "WA")))] == 1
        assert got[("codefu_judge_submissions_total", (run,))] == 6
        set_judge_load(queued=7, in_flight=3)
        got = scrape(address)
        assert got[("codefu_judge_queue_depth", (run,))] == 7
        assert got[("codefu_judge_in_flight", (run,))] == 3
    finally:
        sink.close()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://{address}/metrics", timeout=5)
    groups = json.loads((tmp_path / "run-a" / "prometheus_targets.json").read_text())
    assert groups == [{"targets": [address], "labels": {"endpoint": "driver"}}]
    set_judge_load(1, 1)  # no sink open any more: nothing to do, no error


def test_close_waits_for_a_scrape_of_the_last_step(tmp_path):
    exporter = DriverExporter("127.0.0.1", 0, final_scrape_s=60)
    sink = PrometheusSink(tmp_path, [exporter])
    sink.write(5, {"reward/mean": 0.5})
    closer = threading.Thread(target=sink.close)
    closer.start()
    closer.join(0.5)
    assert closer.is_alive()  # no scrape yet: close() is still waiting (it cannot end before one)
    seen = scrape(exporter.address)  # the endpoint still serves while close() waits
    closer.join(60)
    assert not closer.is_alive()
    assert seen[("codefu_step", (("run", tmp_path.name),))] == 5


def test_a_port_in_use_is_a_codefu_error():
    from codefu.errors import CodefuError

    first = DriverExporter("127.0.0.1", 0)
    try:
        port = int(first.address.rsplit(":", 1)[1])
        with pytest.raises(CodefuError, match=f"observability.prometheus.port.*{port}"):
            DriverExporter("127.0.0.1", port)
    finally:
        first.close()


def test_targets_groups():
    assert targets_groups(None, []) == []
    assert targets_groups("127.0.0.1:9464", ["10.0.0.1:8080", "10.0.0.2:8080"]) == [
        {"targets": ["127.0.0.1:9464"], "labels": {"endpoint": "driver"}},
        {"targets": ["10.0.0.1:8080", "10.0.0.2:8080"], "labels": {"endpoint": "ray"}},
    ]


# ---- the shipped scrape config and dashboard ---------------------------------------------------------

SCRAPE_CONFIG = REPO / "deploy" / "prometheus" / "prometheus.yml"
DASHBOARD = REPO / "dashboards" / "codefu.json"


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool comes with Debian's prometheus")
def test_scrape_config_is_valid_for_promtool():
    done = subprocess.run(["promtool", "check", "config", str(SCRAPE_CONFIG)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_scrape_config_strips_rays_prefix_from_codefu_metrics_only():
    cfg = yaml.safe_load(SCRAPE_CONFIG.read_text())
    jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
    assert set(jobs) == {"ray", "codefu"}
    for job in jobs.values():
        (rule,) = job["metric_relabel_configs"]
        # Prometheus anchors relabel regexes at both ends
        rx = re.compile(f"^(?:{rule['regex']})$")
        assert (
            rx.sub(rule["replacement"].replace("$1", r"\1"), "ray_codefu_reward_mean") == "codefu_reward_mean"
        )
        assert not rx.match("ray_node_gram_used")


def dashboard_exprs() -> list[str]:
    dash = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in dash["panels"] for t in p["targets"]]


def test_dashboard_reads_only_series_that_codefu_or_ray_export():
    dash = json.loads(DASHBOARD.read_text())
    assert {v["name"] for v in dash["templating"]["list"]} == {"datasource", "run"}
    assert len({p["id"] for p in dash["panels"]}) == len(dash["panels"])
    exported = {s.name for s in gauge_samples(1, realistic_step())}
    exported |= {s.name for s in counter_increments(realistic_step())}
    exported |= {"codefu_judge_queue_depth", "codefu_judge_in_flight"}
    # response length min / max: exported when the loop records them (summary_stats), as realistic_step does
    used = {n for e in dashboard_exprs() for n in re.findall(r"\b(codefu_[a-z_]+)\b", e)}
    assert used <= exported, used - exported
    titles = " ".join(p["title"].lower() for p in dash["panels"])
    for topic in (
        "reward",
        "pass@k",
        "verdict",
        "response length",
        "kl",
        "entropy",
        "clip",
        "phase",
        "judge throughput",
        "queue depth",
        "gpu memory",
    ):
        assert topic in titles, topic
