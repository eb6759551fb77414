"""`codefu train` as a person starts it: a short first screen (summary, one line per step), everything else
of Ray and the libraries in RUN_DIR/train.log, and a small run directory."""

from __future__ import annotations

import subprocess
import sys

from helpers.tiny_train import tiny_train_overrides


def test_first_screen_is_short_and_the_rest_is_in_the_log(tmp_path):
    run_dir = tmp_path / "run"
    # float32 (in them): the warning per actor bf16 adds on a CPU without native bf16 would count here
    # as an unexpected line of the screen
    overrides = [*tiny_train_overrides(tmp_path / "model"), "loop.steps=2", "loop.val_every=0"]
    r = subprocess.run(
        [sys.executable, "-m", "codefu", "train", "--run-dir", str(run_dir), *overrides],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    console = (r.stdout + r.stderr).splitlines()
    assert console[0].startswith(f"codefu train -> {run_dir}")
    assert [line.split("|")[0].strip() for line in console if line.startswith("step")] == [
        "step 1/2",
        "step 2/2",
    ]
    assert console[-1] == f"run directory: {run_dir}"
    # nothing but the summary (its first line and indented ones), the step lines and the last line
    others = [line for line in console[1:-1] if not line.startswith(("  ", "step "))]
    assert others == [], "\n".join(console)
    assert len(console) <= 20, "\n".join(console)
    logged = (run_dir / "train.log").read_text()
    assert "Started a local Ray instance" in logged
    size = sum(p.stat().st_size for p in run_dir.rglob("*") if p.is_file())
    assert size < 5 << 20, size  # a final model of a tiny model and the logs: no optimizer state kept
