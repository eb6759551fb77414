"""Observability: namespaced per-step metrics, their sinks (JSONL, TensorBoard, console, MLflow, W&B,
Prometheus), the run report, and pass@k.

See docs/observability.md for the metric names, the files written to the run directory, the console line,
the Prometheus names and the report.
"""

from codefu.observability.config import ObservabilityConfig
from codefu.observability.console import CONSOLE_VERDICTS, ConsoleSink, format_step_line
from codefu.observability.metrics import (
    NAMESPACES,
    VERDICT_CODES,
    StepTimer,
    check_names,
    derived_metrics,
    merge_metrics,
    reduce_step_metrics,
    reduction_of,
    summary_stats,
    verdict_metrics,
    weighted_mean,
)
from codefu.observability.passk import by_bucket, pass_at_k, pass_at_k_table, passk_metrics
from codefu.observability.prometheus import prometheus_series
from codefu.observability.report import write_report
from codefu.observability.setup import open_sinks
from codefu.observability.sinks import (
    METRICS_FILE,
    TENSORBOARD_DIR,
    JsonlSink,
    MetricsSink,
    MultiSink,
    SinkBase,
    TensorBoardSink,
    read_metrics,
)

__all__ = [
    "CONSOLE_VERDICTS",
    "METRICS_FILE",
    "NAMESPACES",
    "TENSORBOARD_DIR",
    "VERDICT_CODES",
    "ConsoleSink",
    "JsonlSink",
    "MetricsSink",
    "MultiSink",
    "ObservabilityConfig",
    "SinkBase",
    "StepTimer",
    "TensorBoardSink",
    "by_bucket",
    "check_names",
    "derived_metrics",
    "format_step_line",
    "merge_metrics",
    "open_sinks",
    "pass_at_k",
    "pass_at_k_table",
    "passk_metrics",
    "prometheus_series",
    "read_metrics",
    "reduce_step_metrics",
    "reduction_of",
    "summary_stats",
    "verdict_metrics",
    "weighted_mean",
    "write_report",
]
