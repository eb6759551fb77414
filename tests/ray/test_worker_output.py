"""A real Ray driver set up as `codefu train` does it: the actors' codefu warnings reach the console,
their other output and Ray's own start-up messages only the run's log file."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import logging, sys, time
    from pathlib import Path
    import ray
    from codefu.observability.run_log import RUN_LOG, ray_logging_options, route_worker_output, start_run_log

    run_dir = Path(sys.argv[1])
    start_run_log(run_dir)
    ray.init(num_cpus=1, include_dashboard=False, **ray_logging_options())
    route_worker_output(run_dir)

    @ray.remote
    class Noisy:
        def speak(self):
            logging.getLogger("codefu.judge.test").warning("a codefu warning")
            logging.getLogger("transformers.test").warning("a library warning")
            print("a plain print", flush=True)
            return 1

    assert ray.get(Noisy.remote().speak.remote()) == 1
    deadline = time.monotonic() + 60  # worker output reaches the driver asynchronously
    while "a plain print" not in (run_dir / RUN_LOG).read_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1)
    ray.shutdown()
    """
)


def test_actor_output_goes_to_the_run_log_and_only_codefu_warnings_to_the_console(tmp_path):
    r = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr
    console = r.stdout + r.stderr
    logged = (tmp_path / "train.log").read_text()
    assert "WARNING codefu.judge.test: a codefu warning" in console
    for noise in ("a library warning", "a plain print", "Started a local Ray instance"):
        assert noise not in console
        assert noise in logged
    assert "(Noisy pid=" in logged and "WARNING codefu.judge.test: a codefu warning" in logged
