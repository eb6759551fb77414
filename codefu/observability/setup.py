"""The sinks of a run, from its `observability:` config: one call in the training loop.

    sink = open_sinks(cfg.observability, run_dir, resume_step=start, total_steps=cfg.loop.steps,
                      run_config=cfg, out=tqdm.write)
    sink.write(step, metrics)      # metrics.jsonl, the trackers, Prometheus: the same record
    sink.close()

metrics.jsonl is always written (the run's record; `codefu report` reads it). Each record is first
completed with `derived_metrics` (judge and rollout throughput), so every sink sees the same keys.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from codefu.observability.config import ObservabilityConfig, check_observability
from codefu.observability.console import ConsoleSink
from codefu.observability.metrics import derived_metrics
from codefu.observability.prometheus import open_prometheus
from codefu.observability.sinks import (
    JsonlSink,
    MetricsSink,
    MultiSink,
    SinkBase,
    TensorBoardSink,
    read_metrics,
)
from codefu.observability.trackers import MlflowSink, WandbSink, flatten_config, nested_config


class DerivedSink(SinkBase):
    """Adds `derived_metrics` to each record before handing it on."""

    def __init__(self, inner: MetricsSink) -> None:
        self.inner = inner

    def write(self, step: int, metrics: Mapping[str, float]) -> None:
        self.inner.write(step, {**metrics, **derived_metrics(metrics)})

    def close(self) -> None:
        self.inner.close()


def open_sinks(
    cfg: ObservabilityConfig,
    run_dir: str | os.PathLike[str],
    resume_step: int | None = None,
    total_steps: int | None = None,
    run_config: Any = None,
    out: Callable[[str], object] = print,
) -> DerivedSink:
    """metrics.jsonl, then every tracker of `cfg.trackers` in order, then Prometheus when enabled.

    resume_step: None or 0 for a new run, N to continue after the checkpoint of step N (see `JsonlSink`;
    trackers replay the kept steps, see `codefu.observability.trackers`). run_config: the run's config
    dataclass, logged as MLflow params / the W&B config. If a sink fails to open, those already open are
    closed before the error propagates."""
    check_observability(cfg)
    sinks: list[MetricsSink] = []
    try:
        jsonl = JsonlSink(run_dir, resume_step)
        sinks.append(jsonl)
        replay = read_metrics(jsonl.path) if resume_step else []
        for name in cfg.trackers:
            if name == "tensorboard":
                sinks.append(TensorBoardSink(run_dir, resume_step))
            elif name == "console":
                sinks.append(ConsoleSink(total_steps, out=out))
            elif name == "mlflow":
                params = flatten_config(run_config) if run_config is not None else {}
                sinks.append(MlflowSink(run_dir, cfg.mlflow, params, replay, resume_step))
            elif name == "wandb":
                config = nested_config(run_config) if run_config is not None else {}
                sinks.append(WandbSink(run_dir, cfg.wandb, config, replay, resume_step))
        p = cfg.prometheus
        prom = open_prometheus(run_dir, p.ray, p.port, p.host, p.final_scrape_s)
        if prom is not None:
            sinks.append(prom)
    except BaseException:
        MultiSink(sinks).close()
        raise
    return DerivedSink(MultiSink(sinks))
