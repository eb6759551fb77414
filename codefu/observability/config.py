"""What a run reports to, chosen in the run config's `observability:` section.

    observability:
      trackers: [tensorboard, console, mlflow]   # metrics.jsonl is always written
      mlflow: {experiment: codefu}               # tracking_uri null: a file store in RUN_DIR/mlruns
      prometheus: {ray: true, port: 9464}        # Ray's metrics agent, and /metrics on the driver

One metrics record per step feeds every tracker (see `codefu.observability.setup.open_sinks`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from codefu.errors import CodefuError

Tracker = Literal["tensorboard", "console", "mlflow", "wandb"]
TRACKERS: tuple[str, ...] = ("tensorboard", "console", "mlflow", "wandb")


@dataclass
class MlflowConfig:
    tracking_uri: str | None = None
    """None: a local file store in RUN_DIR/mlruns (works offline; `mlflow ui --backend-store-uri
    RUN_DIR/mlruns`). Else any MLflow URI, e.g. http://mlflow:5000."""
    experiment: str = "codefu"
    run_name: str | None = None
    """None: the run directory's name."""


@dataclass
class WandbConfig:
    project: str = "codefu"
    entity: str | None = None
    mode: Literal["offline", "online"] = "offline"
    """offline: files under RUN_DIR/wandb only (`wandb sync RUN_DIR/wandb/offline-run-*` uploads later)."""
    run_name: str | None = None
    """None: the run directory's name."""


@dataclass
class PrometheusConfig:
    ray: bool = True
    """Export through Ray's metrics API: each node's metrics agent serves them beside Ray's own system
    metrics (GPU memory included) at the node's metrics export port, named `ray_codefu_*` (the shipped
    scrape config strips the `ray_`)."""
    port: int | None = None
    """Also serve /metrics from the driver on this port (0: any free port); None: no driver endpoint."""
    host: str = "127.0.0.1"
    """Address the driver endpoint binds to; 0.0.0.0 to be scraped from another machine."""
    final_scrape_s: float = 0.0
    """At the end of the run, keep the driver endpoint up to this long until a scrape has read the last
    step (set it a little above the scrape interval for short runs); 0: close at once."""


@dataclass
class ObservabilityConfig:
    trackers: list[Tracker] = field(default_factory=lambda: ["tensorboard", "console"])
    """Where each step's metrics go besides metrics.jsonl (always written): tensorboard, console, mlflow,
    wandb (the last two need `pip install 'codefu[trackers]'`)."""
    mlflow: MlflowConfig = field(default_factory=MlflowConfig)
    wandb: WandbConfig = field(default_factory=WandbConfig)
    prometheus: PrometheusConfig = field(default_factory=PrometheusConfig)


def check_observability(cfg: ObservabilityConfig) -> None:
    """CodefuError naming the key for what the loader's types cannot catch."""
    seen: set[str] = set()
    for i, name in enumerate(cfg.trackers):
        if name not in TRACKERS:
            raise CodefuError(f"observability.trackers[{i}]: unknown tracker {name!r} (known: {TRACKERS})")
        if name in seen:
            raise CodefuError(f"observability.trackers[{i}]: {name!r} is listed twice")
        seen.add(name)
    port = cfg.prometheus.port
    if port is not None and not 0 <= port <= 65535:
        raise CodefuError(f"observability.prometheus.port: {port} is not a TCP port (0-65535, 0: any free)")
    if cfg.prometheus.final_scrape_s < 0:
        raise CodefuError(f"observability.prometheus.final_scrape_s: {cfg.prometheus.final_scrape_s} < 0")
