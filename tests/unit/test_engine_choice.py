"""`rollout.engine: auto`: the native engine where its model code serves the architecture, else vLLM
where installed, else transformers; the run's summary says which and why, and the choice is written to
the run's config (a resumed run keeps it)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from codefu.errors import CodefuError
from codefu.orchestrator.cli import config_summary, resolve_engine
from codefu.orchestrator.config import RolloutConfig, RunConfig, TrainerConfig
from codefu.rollout import vllm_engine
from codefu.rollout.choice import choose_engine
from codefu.rollout.settings import EngineSettings
from helpers.native_models import tiny_hf


def saved(tmp_path, kind, **overrides) -> str:
    path = tmp_path / kind
    tiny_hf(kind, **overrides).save_pretrained(path)
    return str(path)


def test_a_model_the_native_engine_serves_gets_it(tmp_path):
    for kind in ("llama", "qwen2", "qwen3", "mistral"):
        assert choose_engine(EngineSettings(engine="auto"), saved(tmp_path, kind)) == (
            "native",
            f"auto: the native engine serves model_type {kind!r}",
        )


def test_an_explicit_engine_is_kept(tmp_path):
    assert choose_engine(EngineSettings(engine="transformers"), "anything") == (
        "transformers",
        "rollout.engine",
    )


def test_otherwise_vllm_where_installed_else_transformers_saying_why(tmp_path, monkeypatch):
    from transformers import GPT2Config, GPT2LMHeadModel

    gpt2 = tmp_path / "gpt2"
    GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=100)).save_pretrained(gpt2)
    # no vLLM in this Python and no .venv-vllm beside it
    monkeypatch.setattr(vllm_engine, "vllm_importable", lambda: False)
    monkeypatch.setattr(vllm_engine, "SETUP_PYTHON", tmp_path / "no-venv" / "python")
    engine, why = choose_engine(EngineSettings(engine="auto"), str(gpt2))
    assert engine == "transformers"
    assert "model_type 'gpt2' is not supported" in why and "vLLM is not installed: pip install" in why
    # a sliding window shorter than the sequences: not native either, and the reason says how to get it
    windowed = saved(tmp_path, "mistral", sliding_window=64)
    engine, why = choose_engine(EngineSettings(engine="auto"), windowed)
    assert engine == "transformers" and "sliding_window 64" in why
    assert choose_engine(EngineSettings(engine="auto", max_model_len=64), windowed)[0] == "native"
    monkeypatch.setattr(vllm_engine, "vllm_importable", lambda: True)
    engine, why = choose_engine(EngineSettings(engine="auto"), str(gpt2))
    assert engine == "vllm" and why.endswith("vLLM is installed")
    # but not with top-p / top-k on: vLLM's log-probs would not be the trainer's
    engine, why = choose_engine(RolloutConfig(engine="auto", top_p=0.9), str(gpt2))
    assert engine == "transformers" and "vLLM renormalises the log-probs" in why


def test_the_run_resolves_auto_once_and_says_why(tmp_path):
    cfg = RunConfig(
        trainer=TrainerConfig(model=saved(tmp_path, "qwen3")), rollout=RolloutConfig(engine="auto")
    )
    resolved, why = resolve_engine(cfg)
    assert resolved.rollout.engine == "native" and cfg.rollout.engine == "auto"
    summary = config_summary(resolved, tmp_path / "run", why)
    assert "native engine on cpu" in summary
    assert "rollout engine: native (auto: the native engine serves model_type 'qwen3')" in summary
    explicit = replace(cfg, rollout=replace(cfg.rollout, engine="transformers"))
    assert resolve_engine(explicit)[0].rollout.engine == "transformers"
    assert "rollout engine:" not in config_summary(explicit, tmp_path / "run")
    missing = replace(cfg, trainer=replace(cfg.trainer, model=str(tmp_path / "nothing")))
    with pytest.raises(CodefuError, match="rollout.engine auto: cannot read the config of"):
        resolve_engine(missing)
