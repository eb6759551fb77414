"""Bad command-line input (issue #41, item 5): every command refuses it before it starts anything (Ray, a
run directory, a judge), in one line that names the flag or config key and the value, and exits 2."""

import json
import math

import pytest

from codefu.cli import main
from codefu.config import load_config
from codefu.data.starter import starter_path
from codefu.errors import CodefuError, check_flags
from codefu.models import model_problem
from codefu.orchestrator.config import RunConfig, check_run_config


def refused(capsys, *argv: str) -> str:
    """The one line `codefu ARGV` prints, checked to exit with 2 and print nothing else."""
    assert main(list(argv)) == 2
    out, err = capsys.readouterr()
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert f"codefu {argv[0]}: error: " in err and "Traceback" not in err
    return err.strip()


@pytest.fixture
def model_dir(tmp_path):
    """A folder that passes for an HF model before anything loads it (a config.json)."""
    path = tmp_path / "model"
    path.mkdir()
    (path / "config.json").write_text("{}")
    return path


@pytest.fixture
def untested(tmp_path):
    """The starter problems, the third without private tests: (path, its name)."""
    problems = [json.loads(line) for line in starter_path().read_text().splitlines()]
    problems[2]["private_tests"] = []
    path = tmp_path / "untested.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in problems))
    return path, problems[2]["name"]


# --- models: eval --model, trainer.model (cases 1 and 2) -----------------------------------------------


def test_model_problem_says_what_is_missing(tmp_path, model_dir, monkeypatch):
    assert model_problem(str(model_dir)) is None
    assert model_problem(str(tmp_path / "nope")) == "no such file or folder"
    assert model_problem(str(tmp_path / "nope.gguf")) == "no such file"
    assert model_problem(str(tmp_path)) == "not a model folder (no config.json in it)"
    assert model_problem(str(model_dir), gguf_file="m.gguf") == "not a model folder (no m.gguf in it)"
    assert model_problem("") is not None
    (tmp_path / "notes.txt").write_text("")
    assert model_problem(str(tmp_path / "notes.txt")).startswith("not a model")

    def offline(*args, **kwargs):
        raise OSError("no network")

    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "model_info", offline)
    assert model_problem("someone/no-such-model") == (
        "no such file or folder, nor a model in the local Hugging Face cache "
        "(the hub is unreachable: no network)"
    )


@pytest.mark.parametrize("kind", ["missing", "not a model"])
def test_eval_refuses_a_model_it_cannot_load(tmp_path, capsys, kind):
    model = tmp_path / "nope" if kind == "missing" else tmp_path
    line = refused(capsys, "eval", "--model", str(model), "--dataset", "starter", "--n", "2", "--k", "1")
    expected = "no such file or folder" if kind == "missing" else "not a model folder (no config.json in it)"
    assert line == f"codefu eval: error: --model {model}: {expected}"


@pytest.mark.parametrize("kind", ["missing", "not a model", "unknown name"])
def test_train_refuses_a_model_it_cannot_find_before_anything_starts(tmp_path, capsys, kind):
    model = {"missing": str(tmp_path / "nope"), "not a model": str(tmp_path), "unknown name": "nosuchmodel"}
    run_dir = tmp_path / "run"
    line = refused(capsys, "train", "--run-dir", str(run_dir), f"trainer.model={model[kind]}")
    assert line.startswith(f"codefu train: error: command line: trainer.model {model[kind]}: ")
    assert line.endswith("not a model folder (no config.json in it)") == (kind == "not a model")
    if kind == "unknown name":  # no network here: the cache, then one request, not a download's retries
        assert "no such file or folder, nor a model" in line
    assert not run_dir.exists()


# --- train: resume, max steps, range rules (cases 3, 8, 9, 15) --------------------------------------------


def test_resume_needs_a_checkpoint(tmp_path, capsys):
    failed = tmp_path / "failed"  # what a run that failed at start leaves: its config, no checkpoint
    failed.mkdir()
    (failed / "config.yaml").write_text("{}\n")
    line = refused(capsys, "train", "--resume", str(failed))
    assert line == (
        f"codefu train: error: --resume {failed}: no checkpoint to resume from (the run stopped before its "
        f"first save); to start it over: codefu train --config {failed}/config.yaml --run-dir NEW_DIR"
    )
    (failed / "model").mkdir()  # a finished run that kept no resumable state
    (failed / "model" / "codefu_export.json").write_text("{}")
    assert "is a finished run that kept no resumable state" in refused(
        capsys, "train", "--resume", str(failed)
    )
    assert sorted(p.name for p in failed.iterdir()) == ["config.yaml", "model"]  # nothing written


@pytest.mark.parametrize("steps", ["0", "-1"])
def test_max_steps_must_be_positive(tmp_path, capsys, steps):
    line = refused(capsys, "train", "--run-dir", str(tmp_path / "run"), "--max-steps", steps)
    assert line == f"codefu train: error: --max-steps {steps}: must be >= 1"
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "override, message",
    [
        ("trainer.lr=-1", "trainer.lr must be > 0, got -1.0"),
        ("trainer.lr=0", "trainer.lr must be > 0, got 0.0"),
        ("trainer.adam_eps=0", "trainer.adam_eps must be > 0"),
        ("trainer.betas=[0.9, 1.5]", "trainer.betas must be two numbers in [0, 1)"),
        ("trainer.weight_decay=-0.1", "trainer.weight_decay must be >= 0"),
        ("trainer.min_lr_ratio=2", "trainer.min_lr_ratio must be in [0, 1]"),
        ("trainer.clip_high=-0.2", "trainer.clip_high must be >= 0"),
        ("trainer.kl_coef=-1", "trainer.kl_coef must be >= 0"),
        ("trainer.logprob_chunk_tokens=0", "trainer.logprob_chunk_tokens must be >= 1"),
        ("judge.max_tests=0", "judge.max_tests must be >= 1 or null"),
        ("judge.workers=-1", "judge.workers must be >= 0"),
        ("judge.time_scale=0", "judge.time_scale must be > 0"),
        ("algo.reward=nope", "algo.reward must be one of codefu"),
        ("algo.lam=.nan", "algo.lam must be a number, got nan"),  # NaN: refused by type, every float key
        ("trainer.lr=.nan", "trainer.lr must be a number, got nan"),
    ],
)
def test_out_of_range_keys_are_refused_naming_the_command_line(tmp_path, capsys, override, message):
    run_dir = tmp_path / "run"
    line = refused(capsys, "train", "--run-dir", str(run_dir), override)
    assert line.startswith(f"codefu train: error: command line: {message}")
    assert not run_dir.exists()


def test_the_default_config_passes_the_new_rules():
    check_run_config(RunConfig())
    for name in ("cpu.yaml", "gpu-1.5b.yaml", "gpu-7b.yaml", "codefu-7b.yaml", "gpu-smollm2.yaml"):
        check_run_config(load_config(RunConfig, starter_path().parents[3] / "configs" / name))


# --- where a config error comes from (case 16) ------------------------------------------------------------


def test_config_errors_name_the_file_as_written_or_the_command_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my.yaml").write_text("trainer:\n  lr: 0\n  dtype: float64x\n")
    line = refused(capsys, "train", "--config", "my.yaml", "trainer.dtype=float32")
    assert line == "codefu train: error: my.yaml: trainer.lr must be > 0, got 0.0"
    line = refused(capsys, "train", "--config", "./my.yaml")  # as typed, never made absolute
    assert line.startswith("codefu train: error: ./my.yaml: trainer.dtype must be one of (")
    assert line.endswith("got 'float64x'")
    line = refused(capsys, "train", "--config", "my.yaml", "trainer.dtype=float16", "trainer.lr=-2")
    assert line == "codefu train: error: command line: trainer.lr must be > 0, got -2.0"
    line = refused(capsys, "train", "rollout.nn=3")
    assert line.startswith("codefu train: error: command line: unknown key rollout.nn (known here: ")
    assert not (tmp_path / "runs").exists()


def test_the_default_config_is_named_as_the_docs_name_it():
    from codefu.orchestrator.cli import DEFAULT_CONFIG, DEFAULT_CONFIG_NAME

    def no_model(cfg):
        raise CodefuError(f"trainer.model {cfg.trainer.model}: refused here")

    with pytest.raises(CodefuError, match=r"^configs/cpu.yaml: trainer.model smollm2: refused here$"):
        load_config(RunConfig, DEFAULT_CONFIG, [], name=DEFAULT_CONFIG_NAME, check=no_model)
    with pytest.raises(CodefuError, match=r"^command line: trainer.model x: refused here$"):
        load_config(RunConfig, DEFAULT_CONFIG, ["trainer.model=x"], name=DEFAULT_CONFIG_NAME, check=no_model)


# --- problems without tests (case 10) ---------------------------------------------------------------------


def test_problems_without_tests_are_refused_where_they_load(tmp_path, capsys, model_dir, untested):
    path, name = untested
    no_tests = f"problem {name!r} has no private tests to judge with (reward codefu)"
    run_dir = tmp_path / "run"
    line = refused(
        capsys, "train", "--run-dir", str(run_dir), f"trainer.model={model_dir}", f"data.train={path}"
    )
    assert line == f"codefu train: error: data.train: {path}: {no_tests}"
    assert not run_dir.exists()
    line = refused(capsys, "eval", "--model", str(model_dir), "--dataset", str(path), "--n", "1", "--k", "1")
    assert line == f"codefu eval: error: --dataset {path}: {no_tests}"
    responses = tmp_path / "r.jsonl"
    responses.write_text(json.dumps({"index": 0, "response": "print(1)"}) + "\n")
    out = tmp_path / "v.jsonl"
    line = refused(capsys, "judge", "--dataset", str(path), "--responses", str(responses), "--out", str(out))
    assert line == f"codefu judge: error: --dataset {path}: {no_tests}"
    assert not out.exists()


def test_a_reward_over_public_tests_too_takes_a_problem_with_only_those(untested):
    from codefu.data.loader import load_problems
    from codefu.judge.rewards import check_tested

    problems = load_problems(untested[0])
    check_tested(problems, "binary", "x")  # public+private: the public tests are there
    with pytest.raises(
        CodefuError, match=r"^x: problem '.*' has no private tests to judge with \(reward codefu\)$"
    ):
        check_tested(problems, "codefu", "x")


# --- flags of eval, judge, prepare, serve, launch (cases 4, 5, 6, 7, 11, 12, 13) -------------------------


@pytest.mark.parametrize(
    "argv, line",
    [
        (["eval", "--k", "abc"], "--k abc: must be comma-separated integers between 1 and --n 8"),
        (["eval", "--k", "1,9"], "--k 1,9: must be comma-separated integers between 1 and --n 8"),
        (["eval", "--n", "0", "--k", "1"], "--k 1: must be comma-separated integers between 1 and --n 0"),
        (["eval", "--max-problems", "-1"], "--max-problems -1: must be >= 1"),
        (["eval", "--batch-size", "0"], "--batch-size 0: must be >= 1"),
        (["eval", "--temperature", "nan"], "--temperature nan: must be > 0"),
        (["judge", "--workers", "-1"], "--workers -1: must be >= 0 (0: one per CPU)"),
        (["judge", "--time-scale", "0"], "--time-scale 0: must be > 0"),
        (["judge", "--max-tests", "0"], "--max-tests 0: must be >= 1"),
        (
            ["serve", "--cpus-per-replica", "-2"],
            "--cpus-per-replica -2: must be >= 0 (0: the smallest node's)",
        ),
        (["serve", "--max-body-mb", "-1"], "--max-body-mb -1: must be > 0"),
        (["serve", "--max-run-timeout", "0"], "--max-run-timeout 0: must be > 0"),
        (["serve", "--time-scale", "0"], "--time-scale 0: must be > 0"),
        (["serve", "--max-tests", "0"], "--max-tests 0: must be >= 1"),
        (["serve", "--port", "70000"], "--port 70000: must be in 0..65535 (0: any free one)"),
        (["launch", "--port", "99999"], "--port 99999: must be in 1..65535"),
        (["launch", "--dashboard-port", "0"], "--dashboard-port 0: must be in 1..65535"),
        (["launch", "--nodes-timeout", "-5"], "--nodes-timeout -5: must be > 0"),
        (["prepare", "--input", "x", "--max-tests", "0"], "--max-tests 0: must be >= 1"),
    ],
)
def test_bad_flags_are_refused_before_anything_starts(tmp_path, capsys, argv, line):
    required = {
        "eval": ["--model", "smollm2", "--dataset", "starter"],
        "judge": ["--dataset", "starter", "--responses", "r.jsonl", "--out", str(tmp_path / "v.jsonl")],
        "prepare": ["--out", str(tmp_path / "out")],
    }
    assert refused(capsys, *argv, *required.get(argv[0], [])) == f"codefu {argv[0]}: error: {line}"
    assert list(tmp_path.iterdir()) == []


def test_prepare_refuses_an_out_that_is_a_file(tmp_path, capsys):
    out = tmp_path / "taken"
    out.write_text("x")
    line = refused(capsys, "prepare", "--input", str(starter_path()), "--out", str(out))
    assert line == f"codefu prepare: error: --out {out}: must be a folder (new or existing), not a file"
    assert out.read_text() == "x"


def test_check_flags_fails_nan_and_shows_whole_floats_as_typed():
    class Args:
        time_scale = math.nan
        cpus = -2.0

    with pytest.raises(CodefuError, match=r"^--time-scale nan: must be > 0$"):
        check_flags(Args, [("time_scale", Args.time_scale > 0, "> 0")])
    with pytest.raises(CodefuError, match=r"^--cpus -2: must be >= 0$"):
        check_flags(Args, [("cpus", Args.cpus >= 0, ">= 0")])


# --- report (case 14) -------------------------------------------------------------------------------------


def test_report_warns_of_the_lines_it_skips(tmp_path, capsys):
    from helpers.report_runs import make_run

    run = make_run(tmp_path / "r", steps=3)
    metrics = run / "metrics.jsonl"
    lines = metrics.read_text().splitlines()
    lines[1:1] = ["{not json", '{"time": 1.0}']  # lines 2 and 3
    metrics.write_text("\n".join(lines) + '\n{"step": 9, "ti')  # and a torn last line: not counted
    assert main(["report", str(run)]) == 0
    out, err = capsys.readouterr()
    assert err == (f"codefu report: warning: 2 unreadable lines skipped: {metrics}:2, {metrics}:3\n")
    assert out.strip() == str(run / "report.html")
    metrics.write_text("{not json\n[1, 2]\n")
    line = refused(capsys, "report", str(run))
    assert line == (
        f"codefu report: error: {metrics}: no readable line (2 unreadable lines skipped: {metrics}:1, "
        f"{metrics}:2)"
    )
