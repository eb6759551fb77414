"""Per-step metrics in the Prometheus text format, by two paths that carry the same series:

- **Ray** (`observability.prometheus.ray`): `ray.util.metrics` gauges and counters, recorded by the
  driver's core worker and served by the node's metrics agent at its metrics export port, beside Ray's
  own system metrics (CPU, memory, GPU memory per node). Ray prefixes every name with `ray_`; the
  shipped scrape config (deploy/prometheus/prometheus.yml) strips it, so dashboards see one name.
- **Driver** (`observability.prometheus.port`): a /metrics endpoint served by the driver itself with
  `prometheus_client`, for a single machine without Ray's metrics agent.

Names follow Prometheus conventions (`prometheus_series` maps a JSONL key to a name and labels):

    reward/mean                 codefu_reward_mean
    judge/verdict/AC            codefu_judge_verdict_ratio{status="AC"}
    timing/generate_s           codefu_step_seconds{phase="generate"}
    timing/step_s               codefu_step_duration_seconds
    eval/pass@8/hard            codefu_eval_pass_at_k{k="8",bucket="hard"}    (bucket="all" without one)
    rollout/tokens_per_s        codefu_rollout_tokens_per_second

plus counters `codefu_judge_verdicts_total{status}`, `codefu_judge_submissions_total` and the gauge
`codefu_step`. Every series carries `run` (the run directory's name), so runs can share a Prometheus.
Gauges hold the last step's value; counters add each step's verdicts (they restart at 0 with a resumed
driver, which Prometheus's rate() handles as a counter reset).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codefu.errors import CodefuError
from codefu.observability import metrics as M
from codefu.observability.sinks import SinkBase

log = logging.getLogger(__name__)

PREFIX = "codefu"
TARGETS_FILE = "prometheus_targets.json"
VERDICTS_TOTAL = f"{PREFIX}_judge_verdicts_total"
SUBMISSIONS_TOTAL = f"{PREFIX}_judge_submissions_total"
STEP = f"{PREFIX}_step"
QUEUE_DEPTH = f"{PREFIX}_judge_queue_depth"
IN_FLIGHT = f"{PREFIX}_judge_in_flight"

_VALID_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")


@dataclass(frozen=True)
class Series:
    """One Prometheus time series: a metric name and its labels (sorted by label name)."""

    name: str
    labels: tuple[tuple[str, str], ...] = ()

    @property
    def label_names(self) -> tuple[str, ...]:
        return tuple(k for k, _ in self.labels)


def _snake(text: str) -> str:
    return re.sub(r"_+", "_", re.sub(r"[^a-zA-Z0-9_]", "_", text)).strip("_")


def prometheus_series(key: str) -> Series:
    """The series of a namespaced metric key (see the module docstring). Pure; ValueError for a key that
    is not `namespace/name`."""
    ns, sep, rest = key.partition("/")
    if not sep or not ns or not rest:
        raise ValueError(f"metric key {key!r} is not namespace/name")
    if key.startswith(M.VERDICT_PREFIX):
        return Series(f"{PREFIX}_judge_verdict_ratio", (("status", rest.partition("/")[2]),))
    if key == M.TIME_STEP:
        return Series(f"{PREFIX}_step_duration_seconds")
    if ns == "timing" and rest.endswith("_s"):
        return Series(f"{PREFIX}_step_seconds", (("phase", rest[:-2]),))
    m = re.fullmatch(r"pass@(\d+)(?:/(.+))?", rest)
    if ns == "eval" and m:
        return Series(f"{PREFIX}_eval_pass_at_k", (("bucket", m.group(2) or "all"), ("k", m.group(1))))
    name = _snake(f"{ns}_{rest}")
    if name.endswith("_per_s"):
        name = name[: -len("s")] + "second"
    elif name.endswith("_s"):
        name += "econds"  # the base unit, spelled out
    return Series(f"{PREFIX}_{name}")


def gauge_samples(step: int, metrics: Mapping[str, float]) -> dict[Series, float]:
    """One step's gauges: every metric by `prometheus_series`, plus `codefu_step`. ValueError naming the
    keys when two map to the same series, or when one name would get two different label sets."""
    out: dict[Series, float] = {Series(STEP): float(step)}
    source: dict[Series, str] = {}
    names: dict[str, tuple[tuple[str, ...], str]] = {STEP: ((), "step")}
    for key, value in metrics.items():
        series = prometheus_series(key)
        if series in source:
            raise ValueError(f"metrics {source[series]!r} and {key!r} map to one series {series}")
        known = names.setdefault(series.name, (series.label_names, key))
        if known[0] != series.label_names:
            raise ValueError(
                f"{series.name}: labels {known[0]} from {known[1]!r} but {series.label_names} from {key!r}"
            )
        source[series] = key
        out[series] = float(value)
    return out


def verdict_counts(metrics: Mapping[str, float]) -> dict[str, int]:
    """{code: samples} of one step, from its verdict fractions and `judge/count` ({} without a count)."""
    n = metrics.get(M.JUDGE_COUNT)
    if n is None or not math.isfinite(float(n)):
        return {}
    out = {}
    for code in M.VERDICT_CODES.values():
        frac = metrics.get(M.VERDICT_PREFIX + code)
        if frac is not None and math.isfinite(float(frac)):
            out[code] = round(float(frac) * float(n))
    return out


def counter_increments(metrics: Mapping[str, float]) -> dict[Series, float]:
    """What one step adds to the counters: verdicts by status and submissions judged."""
    counts = verdict_counts(metrics)
    if not counts:
        return {}
    out = {Series(VERDICTS_TOTAL, (("status", code),)): float(c) for code, c in counts.items()}
    out[Series(SUBMISSIONS_TOTAL)] = float(sum(counts.values()))
    return out


_HELP = {
    STEP: "the last training step written",
    VERDICTS_TOTAL: "submissions judged, by verdict code (AC, WA, TL, ML, RE, OL, CE, NC, SE)",
    SUBMISSIONS_TOTAL: "submissions judged",
    QUEUE_DEPTH: "submissions waiting for a judge worker",
    IN_FLIGHT: "submissions being judged",
}


def with_run(series: Series, run: str) -> Series:
    return Series(series.name, tuple(sorted((*series.labels, ("run", run)))))


class DriverExporter:
    """/metrics served by the driver (prometheus_client, its own registry): the latest snapshot.

    final_scrape_s: close() waits up to this long for a scrape that reads the last values, so the final
    step of a run shorter than the scrape interval still reaches Prometheus (0: close at once)."""

    def __init__(self, host: str, port: int, final_scrape_s: float = 0.0) -> None:
        from prometheus_client import CollectorRegistry, start_http_server

        self._gauges: dict[Series, float] = {}
        self._counters: dict[Series, float] = {}
        self._help: dict[str, str] = {}
        self._updates = self._scraped = 0  # updates made; updates the last scrape saw
        self._cond = threading.Condition()  # collect() runs in the server's thread
        self.final_scrape_s = final_scrape_s
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self)  # type: ignore[arg-type]  # a Collector: collect() below
        try:
            self.server, self.thread = start_http_server(port, addr=host, registry=registry)
        except OSError as e:
            raise CodefuError(
                f"observability.prometheus.port: cannot serve /metrics on {host}:{port} ({e.strerror})"
            ) from None
        self.address = f"{host}:{self.server.server_port}"

    def set(self, gauges: Mapping[Series, float], help_text: Mapping[str, str]) -> None:
        with self._cond:
            self._gauges.update(gauges)
            self._help.update(help_text)
            self._updates += 1

    def inc(self, counters: Mapping[Series, float]) -> None:
        with self._cond:
            for s, v in counters.items():
                self._counters[s] = self._counters.get(s, 0.0) + v
            self._updates += 1

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        with self._cond:
            snapshot = [(GaugeMetricFamily, dict(self._gauges)), (CounterMetricFamily, dict(self._counters))]
            help_text = dict(self._help)
            self._scraped = self._updates
            self._cond.notify_all()
        for family_type, values in snapshot:
            by_name: dict[str, list[tuple[Series, float]]] = {}
            for s, v in values.items():
                by_name.setdefault(s.name, []).append((s, v))
            for name, items in sorted(by_name.items()):
                family = family_type(
                    name, help_text.get(name, _HELP.get(name, name)), labels=list(items[0][0].label_names)
                )
                for s, v in items:
                    family.add_metric([lv for _, lv in s.labels], v)
                yield family

    def close(self) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._scraped >= self._updates, timeout=self.final_scrape_s)
        self.server.shutdown()
        self.server.server_close()


# One ray.util.metrics object per name in a process: Ray keeps them process-wide.
_RAY_METRICS: dict[str, Any] = {}


class RayExporter:
    """The same series through `ray.util.metrics`, served by the node's metrics agent."""

    def _metric(self, kind: str, series: Series, help_text: str) -> Any:
        from ray.util import metrics as ray_metrics

        metric = _RAY_METRICS.get(series.name)
        if metric is None:
            cls = ray_metrics.Counter if kind == "counter" else ray_metrics.Gauge
            metric = cls(series.name, description=help_text, tag_keys=series.label_names)
            _RAY_METRICS[series.name] = metric
        return metric

    def set(self, gauges: Mapping[Series, float], help_text: Mapping[str, str]) -> None:
        for s, v in gauges.items():
            if math.isfinite(v):  # Ray's exporter leaves a NaN gauge out anyway; say so here
                self._metric("gauge", s, help_text.get(s.name, _HELP.get(s.name, s.name))).set(
                    v, tags=dict(s.labels)
                )

    def inc(self, counters: Mapping[Series, float]) -> None:
        for s, v in counters.items():
            if v > 0:  # Ray's Counter.inc refuses 0
                self._metric("counter", s, _HELP.get(s.name, s.name)).inc(v, tags=dict(s.labels))

    def close(self) -> None:
        pass


def ray_metrics_endpoints() -> list[str]:
    """host:port of every alive Ray node's metrics agent ([] when Ray is not initialized)."""
    import ray

    if not ray.is_initialized():
        return []
    return sorted(
        f"{n['NodeManagerAddress']}:{n['MetricsExportPort']}"
        for n in ray.nodes()
        if n.get("Alive") and n.get("MetricsExportPort")
    )


def targets_groups(driver: str | None, ray_nodes: Sequence[str]) -> list[dict[str, Any]]:
    """Prometheus file_sd target groups for a run: its driver endpoint and its Ray nodes' agents."""
    groups = []
    if driver:
        groups.append({"targets": [driver], "labels": {"endpoint": "driver"}})
    if ray_nodes:
        groups.append({"targets": list(ray_nodes), "labels": {"endpoint": "ray"}})
    return groups


# The sinks open in this process, for `set_judge_load` (the judge pool runs in the driver too).
_OPEN: list[PrometheusSink] = []


class PrometheusSink(SinkBase):
    """Each step's record as Prometheus gauges and counters through the given exporters; writes the
    run's scrape targets (file_sd format) to RUN_DIR/prometheus_targets.json."""

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        exporters: Sequence[DriverExporter | RayExporter],
        run: str | None = None,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.run = run or self.run_dir.resolve().name
        self.exporters = list(exporters)
        driver = next((e.address for e in self.exporters if isinstance(e, DriverExporter)), None)
        ray_nodes = ray_metrics_endpoints() if any(isinstance(e, RayExporter) for e in self.exporters) else []
        self.targets_path = self.run_dir / TARGETS_FILE
        self.run_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.targets_path.with_name(TARGETS_FILE + ".tmp")
        tmp.write_text(json.dumps(targets_groups(driver, ray_nodes), indent=1) + "\n")
        os.replace(tmp, self.targets_path)  # Prometheus re-reads it on change: never a half file
        _OPEN.append(self)

    def write(self, step: int, metrics: Mapping[str, float]) -> None:
        gauges = {with_run(s, self.run): v for s, v in gauge_samples(step, metrics).items()}
        help_text = {prometheus_series(k).name: f"codefu metric {k}" for k in metrics}
        counters = {with_run(s, self.run): v for s, v in counter_increments(metrics).items()}
        for e in self.exporters:
            e.set(gauges, help_text)
            e.inc(counters)

    def judge_load(self, queued: int, in_flight: int) -> None:
        gauges = {
            with_run(Series(QUEUE_DEPTH), self.run): float(queued),
            with_run(Series(IN_FLIGHT), self.run): float(in_flight),
        }
        for e in self.exporters:
            e.set(gauges, {})

    def close(self) -> None:
        if self in _OPEN:
            _OPEN.remove(self)
        for e in self.exporters:
            e.close()


def set_judge_load(queued: int, in_flight: int) -> None:
    """The judge's backlog now, for every open PrometheusSink of this process (none open: nothing).
    Meant for the judge pool's dispatch loop: `codefu_judge_queue_depth`, `codefu_judge_in_flight`."""
    for sink in list(_OPEN):
        sink.judge_load(queued, in_flight)


def open_prometheus(
    run_dir: str | os.PathLike[str],
    ray_path: bool,
    port: int | None,
    host: str = "127.0.0.1",
    final_scrape_s: float = 0.0,
) -> PrometheusSink | None:
    """A PrometheusSink for the chosen paths, or None when both are off. The Ray path needs Ray to be
    initialized (it is skipped, with a warning, when it is not)."""
    exporters: list[DriverExporter | RayExporter] = []
    if ray_path:
        import ray

        if ray.is_initialized():
            exporters.append(RayExporter())
        else:
            log.warning("observability.prometheus.ray: Ray is not initialized; no export through Ray")
    if port is not None:
        exporters.append(DriverExporter(host, port, final_scrape_s))
    if not exporters:
        return None
    try:
        return PrometheusSink(run_dir, exporters)
    except BaseException:
        for e in exporters:
            e.close()
        raise
