"""Readers of what each tracker wrote (metrics.jsonl, MLflow, W&B, TensorBoard), for the trackers' tests."""

from __future__ import annotations

import json
import math
import os
import struct
import time
from pathlib import Path

import pytest

from codefu.observability.sinks import read_metrics


def jsonl_values(run_dir: Path) -> dict[str, dict[int, float | None]]:
    out: dict[str, dict[int, float | None]] = {}
    for rec in read_metrics(run_dir):
        for k, v in rec.items():
            if k not in ("step", "time"):
                out.setdefault(k, {})[rec["step"]] = v
    return out


def same(a: float | None, b: float) -> bool:
    return math.isnan(b) if a is None else b == pytest.approx(a, rel=1e-6)


def read_mlflow(run_dir: Path) -> list[dict]:
    from mlflow.tracking import MlflowClient

    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"  # as MlflowSink sets for its local file store
    client = MlflowClient(tracking_uri=(run_dir / "mlruns").resolve().as_uri())
    exp = client.get_experiment_by_name("codefu")
    runs = client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])
    out = []
    for run in runs:
        history = {
            k: {m.step: m.value for m in client.get_metric_history(run.info.run_id, k)}
            for k in run.data.metrics
        }
        out.append({"run": run, "history": history})
    return out


def read_wandb_history(run_dir: Path) -> list[tuple[dict, dict[str, dict[int, float]]]]:
    """(config, {key: {step: value}}) of every offline W&B run under run_dir, oldest first.

    W&B's writer is a separate service process: on a loaded machine a run's file was once still empty
    right after `finish()` returned (CI, 2026-11-29). Wait, boundedly, until every file holds its run."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return _read_wandb_history(run_dir)
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def read_tensorboard(log_dir: Path) -> dict[str, dict[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: {e.step: e.value for e in acc.Scalars(tag)} for tag in acc.Tags()["scalars"]}


W_AND_B_BLOCK = 32768  # the LevelDB-log layout of a .wandb file: 32 KiB blocks of 7-byte-header chunks


def read_wandb_records(path: Path):
    """The protobuf records of a W&B transaction log (.wandb), read without W&B's own reader (0.31 ships
    none in Python): a 7-byte file header, then LevelDB log chunks (crc32c, length, type)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B", data[:7]
    pos, buf = 7, b""
    while pos + 7 <= len(data):
        if W_AND_B_BLOCK - pos % W_AND_B_BLOCK < 7:  # a block's tail too short for a header is padding
            pos += W_AND_B_BLOCK - pos % W_AND_B_BLOCK
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        buf += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # FULL or LAST: a record is complete
            rec = pb.Record()
            rec.ParseFromString(buf)
            yield rec
            buf = b""


def _read_wandb_history(run_dir: Path) -> list[tuple[dict, dict[str, dict[int, float]]]]:
    out = []
    exited = 0
    started = []
    for path in sorted((run_dir / "wandb").glob("offline-run-*/run-*.wandb")):
        history: dict[str, dict[int, float]] = {}
        config: dict = {}
        for rec in read_wandb_records(path):
            kind = rec.WhichOneof("record_type")
            if kind == "history":
                items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in rec.history.item}
                step = int(items.pop("_step"))
                for k, v in items.items():
                    if not k.startswith("_"):
                        history.setdefault(k, {})[step] = float(v)
            elif kind == "run":
                config = {i.key: json.loads(i.value_json) for i in rec.run.config.update}
                started.append(rec.run.start_time.ToNanoseconds())
            elif kind == "exit":
                exited += 1
        out.append((config, history))
    assert len(started) == len(out) == exited, "a run file is not complete yet"
    return [o for _, o in sorted(zip(started, out, strict=True), key=lambda t: t[0])]
