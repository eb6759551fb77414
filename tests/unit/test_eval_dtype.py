"""`codefu eval --dtype auto`: a run's model in its run's rollout dtype, else the device's native one."""

from pathlib import Path

from codefu.orchestrator.eval_cli import choose_dtype, run_rollout_dtype


def test_a_named_dtype_is_used_as_is() -> None:
    run = ("bfloat16", Path("r/config.yaml"))
    assert choose_dtype("float16", "cpu", run, "float32") == ("float16", "given by --dtype")


def test_auto_takes_the_runs_rollout_dtype() -> None:
    dtype, why = choose_dtype("auto", "cpu", ("bfloat16", Path("r/config.yaml")), "float32")
    assert (dtype, why) == ("bfloat16", "the rollout dtype of the model's run, r/config.yaml")


def test_auto_without_a_run_is_the_devices_native_dtype() -> None:
    assert choose_dtype("auto", "cuda:1", None, "bfloat16") == ("bfloat16", "auto: bf16 is native on cuda:1")
    assert choose_dtype("auto", "cpu", None, "bfloat16")[0] == "bfloat16"  # AMX / AVX512-BF16
    dtype, why = choose_dtype("auto", "cpu", None, "float32")
    assert dtype == "float32" and why.startswith("auto: no native bf16 on cpu")
    # a run that sampled in auto chose by its device: so does the evaluation, by its own
    dtype, why = choose_dtype("auto", "cpu", ("auto", Path("r/config.yaml")), "float32")
    assert dtype == "float32" and why.endswith("; the model's run sampled in auto, r/config.yaml")


def test_run_rollout_dtype_reads_the_runs_config(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "checkpoints" / "step_00000002" / "hf").mkdir(parents=True)
    (run / "model").mkdir()
    assert run_rollout_dtype(str(run / "model")) is None  # no config.yaml: not known
    (run / "config.yaml").write_text("rollout:\n  n: 4\n  dtype: bfloat16\ntrainer:\n  dtype: float32\n")
    expected = ("bfloat16", run / "config.yaml")
    assert run_rollout_dtype(str(run / "model")) == expected
    assert run_rollout_dtype(str(run / "checkpoints" / "step_00000002" / "hf")) == expected
    assert run_rollout_dtype(str(run)) is None  # not a model directory of the run
    (run / "config.yaml").write_text("rollout: [not, a, section]\n")
    assert run_rollout_dtype(str(run / "model")) is None
