"""trainer.lora in the run's config: errors name the key and where its value came from, a LoRA run with a
KL term places no reference ranks, vLLM is refused, and the critic trains every weight (in fp32 master
weights)."""

from __future__ import annotations

import pytest

from codefu.config import load_config
from codefu.errors import CodefuError
from codefu.orchestrator.config import RunConfig, check_run_config
from codefu.orchestrator.roles import needs_reference, run_layout

CPU = "configs/cpu.yaml"


def load(*overrides: str) -> RunConfig:
    return load_config(RunConfig, CPU, list(overrides), check=check_run_config)


@pytest.mark.parametrize(
    "override, expected",
    [
        ("trainer.lora.rank=-1", "command line: trainer.lora.rank must be >= 0"),
        ("trainer.lora.alpha=0", "command line: trainer.lora.alpha must be > 0"),
        ("trainer.lora.dropout=1.5", "command line: trainer.lora.dropout must be in [0, 1)"),
        ("trainer.lora.dtype=float16", "command line: trainer.lora.dtype must be float32 or bfloat16"),
        ("trainer.lora.export=both", "command line: trainer.lora.export must be merged or adapter"),
        ("trainer.lora.target_modules=[]", "command line: trainer.lora.target_modules must name"),
        ("trainer.lora.rnk=4", "unknown key trainer.lora.rnk"),
    ],
)
def test_a_bad_lora_value_names_its_key_and_where_it_came_from(override, expected):
    with pytest.raises(CodefuError) as e:
        load(override)
    assert expected in str(e.value)


def test_lora_keys_load_from_the_command_line():
    cfg = load("trainer.lora.rank=16", "trainer.lora.target_modules=[q_proj,v_proj]", "trainer.lora.alpha=8")
    lora = cfg.trainer.lora
    assert (lora.rank, lora.target_modules, lora.scaling, lora.enabled) == (
        16,
        ["q_proj", "v_proj"],
        0.5,
        True,
    )
    assert not load().trainer.lora.enabled  # off by default


def test_a_lora_run_with_a_kl_term_places_no_reference_ranks():
    full = load("trainer.kl_coef=0.01")
    lora = load("trainer.kl_coef=0.01", "trainer.lora.rank=8")
    assert needs_reference(full) and needs_reference(lora)  # both need reference log-probs ...
    assert run_layout(full).need("reference") is not None
    assert run_layout(lora).need("reference") is None  # ... LoRA's come from the policy itself


def test_lora_with_the_vllm_engine_is_refused_with_the_key():
    with pytest.raises(CodefuError, match=r"trainer\.lora\.rank must be 0 with rollout\.engine vllm"):
        load("trainer.lora.rank=8", "rollout.engine=vllm")


def test_the_critic_trains_every_weight_whatever_trainer_lora_says():
    cfg = load("trainer.lora.rank=8", "algo.estimator=ppo")
    assert cfg.trainer.lora.enabled
    assert not cfg.critic.trainer_config(cfg.trainer).lora.enabled


def test_the_critic_keeps_fp32_master_weights_beside_a_bf16_lora_base():
    cfg = load("trainer.lora.rank=8", "trainer.master_dtype=bfloat16", "algo.estimator=ppo")
    assert cfg.trainer.master_dtype == "bfloat16"  # the policy's frozen base
    assert cfg.critic.trainer_config(cfg.trainer).master_dtype == "float32"  # a full copy that trains
    full = load("trainer.master_dtype=bfloat16", "algo.estimator=ppo")
    assert full.critic.trainer_config(full.trainer).master_dtype == "bfloat16"  # as asked, without LoRA


def test_lora_on_the_native_engine_refuses_targets_beside_the_projections():
    with pytest.raises(
        CodefuError, match=r"trainer\.lora\.target_modules must be within .* rollout\.engine native"
    ):
        load("trainer.lora.rank=8", "rollout.engine=native", "trainer.lora.target_modules=[q_proj,lm_head]")
    # the projections, by their leaf or a longer name, are fine
    cfg = load(
        "trainer.lora.rank=8", "rollout.engine=native", "trainer.lora.target_modules=[self_attn.q_proj]"
    )
    assert cfg.trainer.lora.target_modules == ["self_attn.q_proj"]
