"""The run's log file and the quiet console: which records and worker lines go where."""

from __future__ import annotations

import importlib
import io
import logging

import pytest

from codefu.observability.run_log import (
    RUN_LOG,
    WORKER_FORMAT,
    ConsoleFilter,
    WorkerOutput,
    format_worker_logs,
    ray_logging_options,
    start_run_log,
)


def record(name: str, level: int) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, "m", None, None)


def test_console_filter_keeps_codefu_and_errors():
    quiet, verbose = ConsoleFilter(False), ConsoleFilter(True)
    assert quiet.filter(record("codefu.orchestrator.loop", logging.INFO))
    assert quiet.filter(record("codefu", logging.WARNING))
    assert not quiet.filter(record("codefusion", logging.WARNING))  # a prefix, not a codefu logger
    assert not quiet.filter(record("ray._private.worker", logging.WARNING))
    assert not quiet.filter(record("transformers.modeling_utils", logging.WARNING))
    assert quiet.filter(record("ray", logging.ERROR))
    assert verbose.filter(record("ray._private.worker", logging.INFO))


@pytest.fixture
def root_restored():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for h in list(root.handlers):
        if h not in handlers:
            root.removeHandler(h)
            h.close()
    root.setLevel(level)


def test_start_run_log_routes_records(tmp_path, root_restored):
    console = io.StringIO()
    path = start_run_log(tmp_path, verbose=False, console=console)
    assert path == tmp_path / RUN_LOG
    logging.getLogger("codefu.test").info("ours")
    logging.getLogger("somelib.test").warning("a library's notice")
    logging.getLogger("other").error("someone's error")
    start_run_log(tmp_path, verbose=False, console=console)  # again (a resume): replaces, appends
    logging.getLogger("codefu.test").info("ours again")
    for h in logging.getLogger().handlers:
        h.flush()
    shown, logged = console.getvalue(), path.read_text()
    assert "ours" in shown and "someone's error" in shown and "a library's notice" not in shown
    assert shown.count("ours again") == 1  # the first call's handlers are gone
    for text in ("ours", "a library's notice", "someone's error", "ours again"):
        assert text in logged
    assert "WARNING somelib.test: a library's notice" in logged


def test_ray_logging_options_hand_ray_records_to_ours():
    ray_logger = logging.getLogger("ray")
    before = ray_logger.propagate
    try:
        options = ray_logging_options()
        assert ray_logger.propagate  # Ray's driver records reach the run log's handlers
        assert options["configure_logging"] is False and options["log_to_driver"] is True
        module, _, name = options["runtime_env"]["worker_process_setup_hook"].rpartition(".")
        assert getattr(importlib.import_module(module), name) is format_worker_logs
    finally:
        ray_logger.propagate = before


def test_worker_output_sends_every_line_to_the_file_and_codefu_warnings_to_the_console(tmp_path):
    console = io.StringIO()
    sink = WorkerOutput(tmp_path / RUN_LOG, verbose=False, console=console)
    sink(
        {
            "pid": 7,
            "actor_name": "JudgeWorker",
            "is_err": True,
            "lines": [
                "WARNING codefu.judge.sandbox: no cgroup",
                "[transformers] Ignoring clean_up_tokenization_spaces",
                "INFO codefu.rollout.actor: loaded",
            ],
        }
    )
    sink(
        {
            "pid": "autoscaler",
            "is_err": False,
            "lines": [
                "======== Autoscaler status ========",
                ":event_summary:Adding 1 node(s) of type worker.",
            ],
        }
    )
    sink({"pid": "raylet", "is_err": True, "lines": ["A worker died or was killed"]})
    sink.close()
    shown, logged = console.getvalue(), (tmp_path / RUN_LOG).read_text()
    assert shown.splitlines() == [
        "(JudgeWorker pid=7) WARNING codefu.judge.sandbox: no cgroup",
        "(autoscaler) Adding 1 node(s) of type worker.",
        "(raylet) A worker died or was killed",
    ]
    assert "(JudgeWorker pid=7) [transformers] Ignoring" in logged and "INFO codefu.rollout.actor" in logged
    assert "Autoscaler status" not in logged  # Ray's periodic table is not even worth the file


def test_worker_output_verbose_shows_everything(tmp_path):
    console = io.StringIO()
    sink = WorkerOutput(tmp_path / RUN_LOG, verbose=True, console=console)
    sink({"pid": 3, "task_name": "f", "is_err": False, "lines": ["hello", "world"]})
    sink.close()
    assert console.getvalue().splitlines() == ["(f pid=3) hello", "(f pid=3) world"]


def test_format_worker_logs_tags_lines_with_level_and_logger(capsys, root_restored):
    format_worker_logs()
    logging.getLogger("codefu.judge.sandbox").warning("no cgroup")
    err = capsys.readouterr().err
    assert "WARNING codefu.judge.sandbox: no cgroup" in err
    assert WORKER_FORMAT.startswith("%(levelname)s %(name)s")
