"""What `codefu train` loads before Ray starts: problem splits, and bad configs refused with a message."""

import re
import subprocess
import sys

import pytest
import yaml

from codefu.data.starter import load_starter_problems
from codefu.errors import CodefuError
from codefu.orchestrator.cli import load_splits
from codefu.orchestrator.config import DataConfig, RunConfig, check_run_config
from codefu.orchestrator.loop import fit_prompts


def test_starter_split_is_the_recorded_one_and_disjoint():
    from codefu.data.starter import starter_split

    recorded = starter_split()
    train, val = load_splits(RunConfig(data=DataConfig(val_fraction=0.5, seed=3)))  # neither changes it
    # the loop trains on train and validates on validation; test is never loaded for a run
    assert [p.name for p in val] == recorded["validation"] and [p.name for p in train] == recorded["train"]
    assert not {p.name for p in train + val} & set(recorded["test"])
    assert {p.preferred_language for p in train} == {"python"}  # no prompt of their own: data.language


def test_dataset_split_by_fraction_is_seeded(tmp_path):
    from codefu.data.starter import starter_path

    cfg = RunConfig(data=DataConfig(train=str(starter_path()), val_fraction=0.2, seed=3))
    train, val = load_splits(cfg)
    again, val_again = load_splits(cfg)
    assert [p.name for p in val] == [p.name for p in val_again]
    assert not {p.name for p in train} & {p.name for p in val}
    assert len(val) == int(0.2 * (len(train) + len(val)))


def test_dataset_files(codefu_easy):
    train, val = load_splits(
        RunConfig(
            data=DataConfig(train=str(codefu_easy / "train.parquet"), val=str(codefu_easy / "test.parquet"))
        )
    )
    assert (len(train), len(val)) == (808, 32)
    assert train[0].prompt is not None and train[0].preferred_language == "cpp"


def test_bad_override_and_existing_run_dir(tmp_path):
    def train(*args):
        return subprocess.run(
            [sys.executable, "-m", "codefu", "train", *args], capture_output=True, text=True, timeout=120
        )

    r = train("--run-dir", str(tmp_path / "a"), "rollout.nn=3")
    assert r.returncode == 2 and "unknown key rollout.nn" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "config.yaml").write_text("{}\n")
    r = train("--run-dir", str(tmp_path / "b"))
    assert r.returncode == 2 and "already holds a run" in r.stderr
    r = train("--resume", str(tmp_path / "nothing"))
    assert r.returncode == 2 and "not a codefu run directory" in r.stderr


@pytest.mark.parametrize(
    "override, key",
    [
        ("rollout.n=0", "rollout.n"),
        ("data.val_fraction=1.0", "data.val_fraction"),
        ("rollout.top_p=0", "rollout.top_p"),
        ("data.max_prompt_tokens=0", "data.max_prompt_tokens"),
        ("loop.save_every=-1", "loop.save_every"),
        ("algo.overlong_buffer=100000", "algo.overlong_buffer"),  # more than rollout.max_new_tokens
        ("algo.overlong_penalty=-1", "algo.overlong_penalty"),
        ("algo.gamma=1.5", "algo.gamma"),
        ("algo.lam=-0.1", "algo.lam"),
        ("algo.lam=.nan", "algo.lam"),
        ("algo.kl_reward_coef=0.1", "algo.kl_reward_coef"),  # the default estimator is grpo: no critic
        ("critic.lr=0", "critic.lr"),
        ("critic.value_clip=-1", "critic.value_clip"),
        ("critic.pretrain_steps=-1", "critic.pretrain_steps"),
        ("rollout.engine=vlm", "rollout.engine"),
    ],
)
def test_out_of_range_values_are_refused_naming_the_key(override, key):
    cfg = RunConfig()
    check_run_config(cfg)  # the defaults pass
    section, field = override.split("=")[0].split(".")
    setattr(getattr(cfg, section), field, yaml.safe_load(override.split("=")[1]))
    with pytest.raises(CodefuError, match=rf"^{re.escape(key)} must be"):
        check_run_config(cfg)


def test_a_rollout_correction_without_the_recompute_pass_needs_one_epoch():
    cfg = RunConfig()
    cfg.trainer.rollout_correction, cfg.algo.recompute_logprobs, cfg.trainer.ppo_epochs = (
        "token_mask",
        False,
        2,
    )
    with pytest.raises(
        CodefuError, match=r"^trainer.rollout_correction must be none with algo.recompute_logprobs"
    ):
        check_run_config(cfg)
    cfg.trainer.ppo_epochs = 1
    check_run_config(cfg)
    cfg.algo.recompute_logprobs, cfg.trainer.ppo_epochs = True, 2  # with the pass, any number of epochs
    check_run_config(cfg)


def test_ppo_turns_on_the_critic_and_a_kl_reward_the_reference():
    from codefu.orchestrator.roles import needs_reference, run_layout

    cfg = RunConfig()
    assert run_layout(cfg).need("critic") is None and not needs_reference(cfg)
    cfg.algo.estimator = "ppo"
    assert run_layout(cfg).need("critic").count == cfg.resources.trainer_ranks
    cfg.algo.kl_reward_coef = 0.05
    check_run_config(cfg)  # allowed with ppo
    assert needs_reference(cfg) and run_layout(cfg).need("reference") is not None
    # the critic's workers: the trainer's settings with the critic's model and learning rate
    cfg.trainer.model, cfg.trainer.micro_batch_tokens, cfg.critic.lr = "smollm2", 1234, 3e-5
    own = cfg.critic.trainer_config(cfg.trainer)
    assert (own.model, own.lr, own.micro_batch_tokens, own.kl_coef) == ("smollm2", 3e-5, 1234, 0.0)
    cfg.critic.model = "/models/value"
    assert cfg.critic.trainer_config(cfg.trainer).model == "/models/value"


def test_fit_prompts_drops_long_prompts_and_refuses_when_none_fit(caplog):
    problems = load_starter_problems()[:5]
    lengths = {id(p): 100 + 10 * i for i, p in enumerate(problems)}

    def encode(p):
        return [0] * lengths[id(p)]

    assert fit_prompts(problems, encode, None, "training") == problems
    kept = fit_prompts(problems, encode, 120, "training")
    assert kept == problems[:3]
    assert "2 of 5 training problems" in caplog.text
    with pytest.raises(CodefuError, match="data.max_prompt_tokens=99: no validation problem"):
        fit_prompts(problems, encode, 99, "validation")


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["algo.estimator=a2c"], "algo.estimator"),
        (["trainer.policy_loss=trpo"], "command line: trainer.policy_loss must be one of"),
        (
            ["trainer.policy_loss=cispo", "trainer.dual_clip=3"],
            "trainer.dual_clip is for policy_loss='ppo' only",
        ),
        (["trainer.policy_loss=gspo", "trainer.sp_degree=2"], "trainer.policy_loss='gspo' needs sp_degree 1"),
        (["trainer.dual_clip=0.5"], "command line: trainer.dual_clip must be > 1 or None, got 0.5"),
        (["trainer.rollout_correction=tis"], "trainer.rollout_correction must be one of"),
        (["trainer.rollout_correction_threshold=1"], "rollout_correction_threshold must be > 1"),
        (
            ["trainer.rollout_correction=token_mask", "trainer.policy_loss=gspo"],
            "rollout_correction is for policy_loss ppo or cispo",
        ),
        (
            ["trainer.rollout_correction=sequence_mask", "trainer.sp_degree=2"],
            "rollout_correction='sequence_mask' needs sp_degree 1",
        ),
    ],
)
def test_algorithm_choices_are_checked_when_the_config_loads(overrides, message):
    from codefu.config import load_config

    with pytest.raises(CodefuError, match=re.escape(message)):
        load_config(RunConfig, None, overrides)


def test_overrides_may_come_before_and_after_options():
    from codefu.cli import parse

    args = parse(
        [
            "train",
            "--config",
            "configs/cpu.yaml",
            "loop.steps=3",
            "--run-dir",
            "/tmp/r",
            "loop.seed=1",
            "loop.steps=4",
        ]
    )
    assert args.run_dir == "/tmp/r" and args.overrides == ["loop.steps=3", "loop.seed=1", "loop.steps=4"]
    with pytest.raises(SystemExit):  # anything else unknown is still an error
        parse(["train", "--config", "configs/cpu.yaml", "--run-dir", "/tmp/r", "--no-such-flag"])
    with pytest.raises(SystemExit):  # a command without overrides takes none
        parse(["report", "/tmp/r", "loop.steps=3"])
