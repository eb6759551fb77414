"""The native engine's model against transformers' implementation of each family it serves, on tiny
random configs in fp32 (CPU): Qwen3 (per-head q/k norms), Mistral, Llama 3.x RoPE scaling, and the other
fixed-table RoPE types, and Llama and Qwen2 themselves; prefill logits, greedy tokens and sampled
log-probs; the limits as clear errors. (Llama and Qwen2 get the full engine suite in
test_native_engine.py.)"""

from __future__ import annotations

import pytest
import torch

from codefu.rollout import EngineConfig, NativeEngine, SamplingParams
from codefu.rollout.native.attention import AttentionMetadata
from codefu.rollout.native.kv_cache import KVCache
from codefu.rollout.native.model import ModelSpec, NativeCausalLM, default_inv_freq
from helpers.native_models import forward_logprobs, hf_greedy, tiny_hf
from helpers.threads import one_thread  # noqa: F401 (autouse: one intra-op thread)

PROMPTS = [[11, 12, 13], list(range(100, 140)), list(range(200, 221))]

#: name -> (family, config overrides). Scaled RoPE types with a small original context, so the scaling
#: touches the frequencies these short sequences use.
VARIANTS = {
    "llama": ("llama", {}),
    "qwen2": ("qwen2", {}),
    "qwen3": ("qwen3", {}),
    "qwen3-attention-bias": ("qwen3", dict(attention_bias=True, tie_word_embeddings=False)),
    "mistral": ("mistral", {}),
    "mistral-window-longer-than-the-engine": ("mistral", dict(sliding_window=512)),
    "llama3-rope": (
        "llama",
        dict(
            rope_parameters=dict(
                rope_type="llama3",
                rope_theta=10000.0,
                factor=8.0,
                low_freq_factor=1.0,
                high_freq_factor=4.0,
                original_max_position_embeddings=32,
            )
        ),
    ),
    "llama-linear-rope": (
        "llama",
        dict(rope_parameters=dict(rope_type="linear", rope_theta=10000.0, factor=4.0)),
    ),
    "qwen3-yarn-rope": (
        "qwen3",
        dict(
            rope_parameters=dict(
                rope_type="yarn", rope_theta=10000.0, factor=4.0, original_max_position_embeddings=64
            )
        ),
    ),
}


@pytest.fixture(scope="module", params=list(VARIANTS))
def hf(request):
    family, overrides = VARIANTS[request.param]
    return tiny_hf(family, **overrides)


def make_engine(hf, **knobs) -> NativeEngine:
    config = EngineConfig(model="(in memory)", engine="native", kv_cache_tokens=2048, **knobs)
    return NativeEngine.from_hf_model(hf, None, config)


def test_prefill_logits_equal_transformers(hf):
    model = NativeCausalLM.build(hf.config, torch.float32, "cpu", max_len=256)
    model.load_weights(hf.state_dict())
    spec = model.spec
    cache = KVCache(spec.num_layers, 4, 16, spec.num_kv_heads, spec.head_dim, torch.float32, "cpu")
    for i, layer in enumerate(model.layers):
        layer.self_attn.k_cache, layer.self_attn.v_cache = cache.layer(i)
    ids = torch.tensor(PROMPTS[1])
    meta = AttentionMetadata(is_prefill=True, slot_mapping=torch.arange(len(ids)))
    ours = model.logits(model(ids, torch.arange(len(ids)), meta))
    with torch.no_grad():
        ref = hf(input_ids=ids[None]).logits[0]
    torch.testing.assert_close(ours, ref, atol=2e-5, rtol=0)


def test_greedy_decode_is_token_identical_and_sampled_logprobs_are_the_trainers(hf):
    engine = make_engine(hf)
    greedy = engine.generate(PROMPTS, SamplingParams(n=1, temperature=0.0, max_new_tokens=16))
    for c in greedy:
        assert c.token_ids == hf_greedy(hf, c.prompt_ids, 16), c.prompt_index
    sampled = engine.generate(PROMPTS, SamplingParams(n=2, temperature=0.9, max_new_tokens=16, seed=3))
    for c in sampled:
        expected = forward_logprobs(hf, c.prompt_ids, c.token_ids, 0.9)
        torch.testing.assert_close(torch.tensor(c.logprobs), expected, atol=1e-4, rtol=0)


def test_the_family_specific_parts_are_in_use():
    """Each variant differs from plain Llama where it should, so the comparisons above test something."""
    qwen3 = ModelSpec.from_hf(tiny_hf("qwen3").config)
    assert qwen3.qk_norm and not qwen3.qkv_bias and qwen3.head_dim == 24
    biased = ModelSpec.from_hf(tiny_hf("qwen3", attention_bias=True).config)
    assert biased.qkv_bias and biased.o_bias
    mistral = ModelSpec.from_hf(tiny_hf("mistral", sliding_window=512).config)
    assert not (mistral.qk_norm or mistral.qkv_bias or mistral.o_bias) and mistral.sliding_window == 512
    default = tuple(default_inv_freq(10000.0, 16).tolist())
    for name in ("llama3-rope", "llama-linear-rope", "qwen3-yarn-rope"):
        family, overrides = VARIANTS[name]
        spec = ModelSpec.from_hf(tiny_hf(family, **overrides).config)
        assert spec.rope_inv_freq != tuple(default_inv_freq(10000.0, spec.head_dim).tolist()), name
    assert ModelSpec.from_hf(tiny_hf("llama").config).rope_inv_freq == default
    yarn = ModelSpec.from_hf(tiny_hf("qwen3", **VARIANTS["qwen3-yarn-rope"][1]).config)
    assert yarn.rope_attention_scaling > 1.0  # yarn's mscale on cos/sin


def test_limits_are_clear_errors():
    config = tiny_hf(
        "llama", rope_parameters=dict(rope_type="dynamic", rope_theta=10000.0, factor=2.0)
    ).config
    with pytest.raises(ValueError, match="rope type 'dynamic' is not implemented"):
        NativeCausalLM.build(config, torch.float32, "cpu")
    windowed = tiny_hf("mistral", sliding_window=64)
    with pytest.raises(ValueError, match="sliding_window 64 is shorter than the longest sequence \\(256\\)"):
        make_engine(windowed)
    # capped at the window, the window changes nothing: the engine runs, and equals transformers
    engine = make_engine(windowed, max_model_len=64)
    out = engine.generate([PROMPTS[0]], SamplingParams(temperature=0.0, max_new_tokens=8))
    assert out[0].token_ids == hf_greedy(windowed, PROMPTS[0], 8)
    sliding_qwen3 = tiny_hf("qwen3", use_sliding_window=True, sliding_window=32, max_window_layers=0)
    with pytest.raises(ValueError, match="sliding_window 32"):
        make_engine(sliding_qwen3)
    quiet_qwen3 = tiny_hf("qwen3", use_sliding_window=False, sliding_window=32)
    assert ModelSpec.from_hf(quiet_qwen3.config).sliding_window is None
    with pytest.raises(ValueError, match="model_type 'gemma3_text' is not supported"):
        from transformers import Gemma3TextConfig

        ModelSpec.from_hf(Gemma3TextConfig())
