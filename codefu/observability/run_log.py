"""The run's log file, and a console that shows codefu's own lines.

    start_run_log(run_dir, verbose=False)        # before anything logs: RUN_DIR/train.log gets everything
    ray.init(**ray_logging_options(), ...)       # Ray's driver messages go through the same handlers
    route_worker_output(run_dir, verbose=False)  # after ray.init: the actors' output too

Everything goes to RUN_DIR/train.log: every logger of the driver at INFO and above (Ray's, transformers'),
and every line the Ray workers print. The console gets codefu's own messages, anything at ERROR, and the
actors' codefu warnings (the sandbox running without isolation, say); Ray's start-up notices, library
warnings and C++ messages from torch stay in the file. `verbose` puts everything on the console as well.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

RUN_LOG = "train.log"
FILE_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
WORKER_FORMAT = "%(levelname)s %(name)s: %(message)s"
# a worker line worth a person's attention: a codefu warning or error (format WORKER_FORMAT, set up in
# every worker by `format_worker_logs`)
_WORKER_CONSOLE_LINE = re.compile(r"^(WARNING|ERROR|CRITICAL) codefu[.:]")
_HANDLER_NAME = "codefu-run-log"


class ConsoleFilter(logging.Filter):
    """codefu's records at INFO and above, any logger's at ERROR and above; everything when verbose."""

    def __init__(self, verbose: bool):
        super().__init__()
        self.verbose = verbose

    def filter(self, record: logging.LogRecord) -> bool:
        if self.verbose or record.levelno >= logging.ERROR:
            return True
        return record.name == "codefu" or record.name.startswith("codefu.")


def start_run_log(run_dir: Path, verbose: bool = False, console: TextIO | None = None) -> Path:
    """Route the driver's logging: all of it to RUN_DIR/train.log (appended on resume), codefu's to the
    console. Replaces what an earlier call installed; other handlers of the root logger stay."""
    path = run_dir / RUN_LOG
    root = logging.getLogger()
    for h in list(root.handlers):
        if getattr(h, "codefu_run_log", False):
            root.removeHandler(h)
            h.close()
    to_file = logging.FileHandler(path, encoding="utf-8")
    to_file.setFormatter(logging.Formatter(FILE_FORMAT))
    to_console = logging.StreamHandler(console or sys.stderr)
    to_console.setFormatter(logging.Formatter(WORKER_FORMAT))  # the actors' lines look the same
    to_console.addFilter(ConsoleFilter(verbose))
    for h in (to_file, to_console):
        h.codefu_run_log = True  # type: ignore[attr-defined]
        root.addHandler(h)
    root.setLevel(logging.INFO)
    _quiet_transformers()
    return path


def _quiet_transformers() -> None:
    """transformers prints through a handler of its own: send its records to the root logger instead."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    hf_logging.disable_default_handler()
    hf_logging.enable_propagation()


def ray_logging_options() -> dict[str, Any]:
    """ray.init arguments: no console handler of Ray's own on the driver (its records reach ours), and
    workers whose log lines carry level and logger (`format_worker_logs`), so codefu's warnings can be
    told from the rest. The caller merges `runtime_env` with its own."""
    logging.getLogger("ray").propagate = True
    return {
        "configure_logging": False,
        "log_to_driver": True,
        "runtime_env": {"worker_process_setup_hook": "codefu.observability.run_log.format_worker_logs"},
    }


def format_worker_logs() -> None:
    """Runs at the start of every Ray worker of a `codefu train` run: log records as 'LEVEL name: msg'."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(WORKER_FORMAT))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO if root.level == logging.NOTSET else root.level)
    _quiet_transformers()


class WorkerOutput:
    """Receives Ray's batches of worker output lines: each to the run log, the notable ones to the console."""

    def __init__(self, path: Path, verbose: bool, console: TextIO | None = None):
        self.file = path.open("a", encoding="utf-8")
        self.verbose = verbose
        self.console = console
        self._lock = threading.Lock()

    def __call__(self, batch: Mapping[str, Any]) -> None:
        pid = batch.get("pid")
        lines = [str(line) for line in batch.get("lines", ())]
        if pid == "autoscaler":
            # its periodic status tables are Ray's own bookkeeping; its events (a request that cannot
            # be scheduled, nodes added) are what Ray itself prints, and they matter
            lines = [line for line in lines if ":event_summary:" in line]
            lines = [line.split(":event_summary:", 1)[1].strip() for line in lines]
            who, notable = "(autoscaler)", lines
        elif pid == "raylet":
            who, notable = "(raylet)", lines  # e.g. a worker killed for memory: always shown
        else:
            actor = batch.get("actor_name") or batch.get("task_name")
            who = f"({actor} pid={pid})" if actor else f"(pid={pid}, {batch.get('ip', '?')})"
            notable = [line for line in lines if _WORKER_CONSOLE_LINE.match(line)]
        with self._lock:
            for line in lines:
                self.file.write(f"{who} {line}\n")
            self.file.flush()
            shown = lines if self.verbose else notable
            console = self.console or (sys.stderr if batch.get("is_err") else sys.stdout)
            for line in shown:
                print(f"{who} {line}", file=console, flush=True)

    def close(self) -> None:
        with self._lock:
            self.file.close()


def route_worker_output(run_dir: Path, verbose: bool = False) -> WorkerOutput | None:
    """After ray.init(log_to_driver=True): the workers' lines go to a WorkerOutput instead of Ray's printer.
    Uses Ray's (private) dispatcher of worker output; if a Ray version lacks it, Ray keeps printing them
    and this says so in the log (None)."""
    try:
        from ray._private.ray_logging import global_worker_stdstream_dispatcher as dispatcher
    except ImportError:
        logging.getLogger(__name__).warning("this Ray cannot route worker output: it stays on the console")
        return None
    sink = WorkerOutput(run_dir / RUN_LOG, verbose)
    dispatcher.remove_handler("ray_print_logs")
    dispatcher.remove_handler(_HANDLER_NAME)
    dispatcher.add_handler(_HANDLER_NAME, sink)
    return sink


__all__ = [
    "RUN_LOG",
    "ConsoleFilter",
    "WorkerOutput",
    "format_worker_logs",
    "ray_logging_options",
    "route_worker_output",
    "start_run_log",
]
