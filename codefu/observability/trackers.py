"""Experiment trackers as sinks: MLflow and Weights & Biases (TensorBoard and the console are in sinks.py
and console.py). Each takes the same per-step record as every other sink.

Resuming: a tracker run cannot forget the steps a crashed session logged after its last checkpoint, so a
resumed session opens a *new* tracker run and first replays the steps kept in metrics.jsonl (those
<= the checkpoint's step), then logs on. The newest tracker run of a codefu run therefore holds exactly
what metrics.jsonl holds; the crashed session's run stays as it was, tagged with the run directory.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from codefu.errors import CodefuError
from codefu.observability.config import MlflowConfig, WandbConfig
from codefu.observability.sinks import SinkBase

Record = Mapping[str, Any]  # a metrics.jsonl record: step, time, then metric: float | None


def flatten_config(config: Any, prefix: str = "") -> dict[str, Any]:
    """A dataclass or mapping as {"section.key": value}; lists and None as JSON text, other scalars kept."""
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        config = dataclasses.asdict(config)
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, Mapping) or (dataclasses.is_dataclass(value) and not isinstance(value, type)):
            out |= flatten_config(value, f"{prefix}{key}.")
        elif isinstance(value, list | tuple) or value is None:
            out[f"{prefix}{key}"] = json.dumps(value)
        else:
            out[f"{prefix}{key}"] = value
    return out


def nested_config(config: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return dataclasses.asdict(config)
    return dict(config or {})


def mlflow_key(key: str) -> str:
    """An MLflow-legal metric name: letters, digits, `_ - . / :` and spaces; `@` becomes `_at_`
    (`eval/pass@8` -> `eval/pass_at_8`), anything else `_`."""
    return re.sub(r"[^\w\-./: ]", "_", key.replace("@", "_at_"))


def _values(record: Record) -> dict[str, float]:
    """The metrics of a metrics.jsonl record (null, a non-finite value written by JSON, as NaN)."""
    return {k: math.nan if v is None else float(v) for k, v in record.items() if k not in ("step", "time")}


def _need(module: str, tracker: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise CodefuError(
            f"observability.trackers lists {tracker!r} but the {module} package is not installed: "
            "pip install 'codefu[trackers]'"
        ) from None


def _is_local(uri: str) -> bool:
    return "://" not in uri or uri.startswith("file:")


class MlflowSink(SinkBase):
    """One MLflow run per session: metrics by step (keys through `mlflow_key`), the run config as params,
    tags codefu.run_dir and, when resumed, codefu.resumed_from_step."""

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        cfg: MlflowConfig,
        params: Mapping[str, Any],
        replay: Sequence[Record] = (),
        resume_step: int | None = None,
    ) -> None:
        _need("mlflow", "mlflow")
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        run_dir = Path(run_dir).resolve()
        self.tracking_uri = cfg.tracking_uri or (run_dir / "mlruns").as_uri()
        if _is_local(self.tracking_uri):
            # MLflow 3 refuses its file store unless asked: it is the one backend that works offline
            # without a database (mlflow-skinny brings no SQLAlchemy).
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.client = MlflowClient(tracking_uri=self.tracking_uri)
        exp = self.client.get_experiment_by_name(cfg.experiment)
        exp_id = exp.experiment_id if exp else self.client.create_experiment(cfg.experiment)
        tags = {"codefu.run_dir": str(run_dir)}
        if resume_step:
            tags["codefu.resumed_from_step"] = str(resume_step)
        run = self.client.create_run(exp_id, run_name=cfg.run_name or run_dir.name, tags=tags)
        self.run_id: str = run.info.run_id
        items = [Param(k, str(v)[:6000]) for k, v in params.items()]
        for i in range(0, len(items), 100):  # MLflow takes at most 100 params per batch
            self.client.log_batch(self.run_id, params=items[i : i + 100])
        for rec in replay:
            self._log(int(rec["step"]), _values(rec), float(rec.get("time") or time.time()))

    def _log(self, step: int, metrics: Mapping[str, float], unix_time: float) -> None:
        from mlflow.entities import Metric

        ms = int(unix_time * 1000)
        items = [Metric(mlflow_key(k), float(v), ms, step) for k, v in metrics.items()]
        for i in range(0, len(items), 1000):  # MLflow takes at most 1000 metrics per batch
            self.client.log_batch(self.run_id, metrics=items[i : i + 1000])

    def write(self, step: int, metrics: Mapping[str, float]) -> None:
        self._log(int(step), metrics, time.time())

    def close(self) -> None:
        self.client.set_terminated(self.run_id)


class WandbSink(SinkBase):
    """One W&B run per session (offline by default: files under RUN_DIR/wandb), grouped by the run
    directory's name; the run config as the W&B config."""

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        cfg: WandbConfig,
        config: Mapping[str, Any],
        replay: Sequence[Record] = (),
        resume_step: int | None = None,
    ) -> None:
        wandb = _need("wandb", "wandb")
        run_dir = Path(run_dir).resolve()
        self.run = wandb.init(
            project=cfg.project,
            entity=cfg.entity,
            dir=str(run_dir),
            mode=cfg.mode,
            name=cfg.run_name or run_dir.name,
            group=run_dir.name,
            config=dict(config),
            notes=f"resumed from step {resume_step}" if resume_step else None,
            reinit="create_new",  # several sinks in one process each get their own run
            # the console line is already in the driver's log; leave stdout alone (Ray forwards it too)
            settings=wandb.Settings(console="off", silent=True),
        )
        self.run_id: str = self.run.id
        for rec in replay:
            self.run.log(_values(rec), step=int(rec["step"]))

    def write(self, step: int, metrics: Mapping[str, float]) -> None:
        self.run.log({k: float(v) for k, v in metrics.items()}, step=int(step))

    def close(self) -> None:
        self.run.finish()
