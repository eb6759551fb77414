"""YAML configs with dotted overrides: every key and value checked, errors name the key and file."""

import pytest

from codefu.config import dump_yaml, from_dict, load_config
from codefu.errors import CodefuError
from codefu.judge import JudgeConfig


def test_defaults_yaml_and_overrides_compose(tmp_path):
    path = tmp_path / "judge.yaml"
    path.write_text("reward: binary\nmax_tests: 10\nsandbox:\n  max_processes: 32\n")
    cfg = load_config(
        JudgeConfig, path, ["max_tests=20", "compile.cpp_flags=[-O2, -std=c++20]", "time_scale=2"]
    )
    assert cfg.reward == "binary" and cfg.max_tests == 20 and cfg.time_scale == 2.0
    assert cfg.sandbox.max_processes == 32 and cfg.sandbox.kind == "bwrap"  # untouched keys keep defaults
    assert cfg.compile.cpp_flags == ["-O2", "-std=c++20"]
    assert isinstance(cfg.time_scale, float)


def test_round_trip_through_yaml(tmp_path):
    cfg = load_config(JudgeConfig, None, ["max_tests=7", "sandbox.cgroup=off"])
    path = tmp_path / "saved.yaml"
    path.write_text(dump_yaml(cfg))
    assert load_config(JudgeConfig, path) == cfg


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["max_test=3"], "unknown key max_test"),
        (["sandbox.cgroups=off"], "unknown key sandbox.cgroups"),
        (["max_tests=many"], "max_tests must be an integer or null, got 'many'"),
        (["sandbox.cgroup=v3"], "sandbox.cgroup must be one of 'auto', 'v1', 'v2', 'off'"),
        (["workers=1.5"], "workers must be an integer"),
        (["early_stop=maybe"], "early_stop must be true or false or null"),
        (["compile.cpp_flags=-O2"], "compile.cpp_flags must be a list"),
        (["reward"], "not of the form key.sub=value"),
        (["max_tests.x=1"], "max_tests must be an integer or null"),
        (["sandbox=3"], "sandbox must be a mapping"),
    ],
)
def test_bad_keys_and_values_are_named(overrides, message):
    with pytest.raises(CodefuError, match=message.replace("[", r"\[").replace("(", r"\(")):
        load_config(JudgeConfig, None, overrides)


def test_errors_name_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("rewrd: codefu\n")
    with pytest.raises(CodefuError, match=f"{path}: unknown key rewrd"):
        load_config(JudgeConfig, path)
    path.write_text("[1, 2]\n")
    with pytest.raises(CodefuError, match="must be a mapping"):
        load_config(JudgeConfig, path)
    path.write_text("a: [\n")
    with pytest.raises(CodefuError, match="not valid YAML"):
        load_config(JudgeConfig, path)
    with pytest.raises(CodefuError, match="cannot read config"):
        load_config(JudgeConfig, tmp_path / "missing.yaml")


def test_yaml_1_1_words_stay_strings(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("sandbox:\n  cgroup: off\nearly_stop: true\n")
    cfg = load_config(JudgeConfig, path)
    assert cfg.sandbox.cgroup == "off" and cfg.early_stop is True
    with pytest.raises(CodefuError, match="early_stop must be true or false or null, got 'yes'"):
        load_config(JudgeConfig, None, ["early_stop=yes"])


def test_exponent_floats_are_numbers(tmp_path):
    # YAML 1.1 wants a dot ("5.0e-5"); what people write is 5e-5, in a file and in an override
    path = tmp_path / "judge.yaml"
    path.write_text("time_scale: 2e0\n")
    cfg = load_config(JudgeConfig, path, ["float_tol=1e-9", "wall_scale=3E+1"])
    assert (cfg.time_scale, cfg.float_tol, cfg.wall_scale) == (2.0, 1e-9, 30.0)
    assert load_config(JudgeConfig, None, ["work_dir=e5"]).work_dir == "e5"  # not a number: a string


def test_from_dict_bool_is_not_an_int():
    with pytest.raises(CodefuError, match="seed must be an integer"):
        from_dict(JudgeConfig, {"seed": True})


@pytest.mark.parametrize("name", ["cpu.yaml", "gpu-1.5b.yaml", "codefu-7b.yaml"])
def test_shipped_run_configs_load(name):
    from pathlib import Path

    from codefu.orchestrator.config import RunConfig

    cfg = load_config(RunConfig, Path(__file__).parents[2] / "configs" / name)
    assert cfg.rollout.n >= 4 and cfg.loop.steps >= 30
    if name == "codefu-7b.yaml":  # the published recipe
        assert (cfg.rollout.n, cfg.trainer.mini_batch_size, cfg.trainer.lr) == (8, 32, 1e-5)
        assert (cfg.trainer.kl_coef, cfg.trainer.kl_kind, cfg.rollout.temperature) == (0.001, "k3", 1.0)


def test_each_run_knob_has_one_owner(tmp_path):
    from codefu.orchestrator.config import RunConfig, check_run_config

    cfg = load_config(RunConfig, None, ["algo.reward=binary", "rollout.temperature=0.7"])
    # the judge's reward and the trainer's temperature follow their owners...
    assert cfg.judge.reward == "binary" and cfg.trainer.temperature == 0.7
    # ...are not saved on their own, and a saved config loads back to the same run
    text = dump_yaml(cfg)
    assert "temperature: 0.7" in text and text.count("temperature") == 1 and text.count("reward: binary") == 1
    (tmp_path / "config.yaml").write_text(text)
    assert load_config(RunConfig, tmp_path / "config.yaml") == cfg
    # a config of an older version holds both, agreeing: it still loads
    assert load_config(RunConfig, None, ["judge.reward=codefu"]).judge.reward == "codefu"
    for override, written, owner in [
        ("judge.reward=binary", "judge.reward", "algo.reward"),
        ("trainer.temperature=0.5", "trainer.temperature", "rollout.temperature"),
    ]:
        with pytest.raises(CodefuError, match=f"{written} is not a setting of its own: it follows {owner}"):
            load_config(RunConfig, None, [override])
    # greedy sampling is refused where the user wrote it, not later by the trainer under its own key
    with pytest.raises(CodefuError, match=r"rollout.temperature must be > 0 .*got 0.0"):
        check_run_config(load_config(RunConfig, None, ["rollout.temperature=0"]))


def test_the_first_screen_of_a_run_is_short_and_names_what_was_set(tmp_path):
    from codefu.orchestrator.cli import config_summary
    from codefu.orchestrator.config import RunConfig

    cfg = load_config(RunConfig, None, ["trainer.model=/m.gguf", "rollout.n=8", "trainer.lr=5e-5"])
    text = config_summary(cfg, tmp_path / "run")
    lines = text.splitlines()
    assert len(lines) <= 6 and all(len(line) <= 110 for line in lines[2:])  # the first two hold paths
    assert f"full config: {tmp_path / 'run' / 'config.yaml'}" in lines[0] and "model: /m.gguf" in text
    assert "8 samples" in text and "rollout.n=8" in text and "trainer.lr=5e-05" in text
    assert "rollout.temperature" not in text  # left at its default: not listed
