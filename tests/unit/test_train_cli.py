"""What `codefu train` loads before Ray starts: problem splits, and bad configs refused with a message."""

import subprocess
import sys

from codefu.orchestrator.cli import load_splits
from codefu.orchestrator.config import DataConfig, RunConfig


def test_starter_split_is_seeded_and_disjoint():
    train, val = load_splits(RunConfig(data=DataConfig(val_fraction=0.2, seed=3)))
    again, val_again = load_splits(RunConfig(data=DataConfig(val_fraction=0.2, seed=3)))
    assert [p.name for p in val] == [p.name for p in val_again]
    assert not {p.name for p in train} & {p.name for p in val}
    assert len(val) == int(0.2 * (len(train) + len(val)))
    assert {p.preferred_language for p in train} == {"python"}  # no prompt of their own: data.language


def test_dataset_files(codefu_easy):
    train, val = load_splits(RunConfig(data=DataConfig(train=str(codefu_easy / "train.parquet"),
                                                       val=str(codefu_easy / "test.parquet"))))
    assert (len(train), len(val)) == (808, 32)
    assert train[0].prompt is not None and train[0].preferred_language == "cpp"


def test_bad_override_and_existing_run_dir(tmp_path):
    def train(*args):
        return subprocess.run([sys.executable, "-m", "codefu", "train", *args], capture_output=True, text=True,
                              timeout=120)

    r = train("--run-dir", str(tmp_path / "a"), "rollout.nn=3")
    assert r.returncode == 2 and "unknown key rollout.nn" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "config.yaml").write_text("{}\n")
    r = train("--run-dir", str(tmp_path / "b"))
    assert r.returncode == 2 and "already holds a run" in r.stderr
    r = train("--resume", str(tmp_path / "nothing"))
    assert r.returncode == 2 and "not a codefu run directory" in r.stderr
