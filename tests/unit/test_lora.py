"""LoRA (codefu.models.lora): the adapted layer, adding and merging adapters, errors that name their key,
PEFT's file format both ways, and the engines' adapter sync over many syncs: the native engine computes
the adapters beside its weights (unmerged, as the trainer does), the transformers engine merges them from
an exact base copy (no drift) (CPU, tiny models)."""

from __future__ import annotations

import json

import peft
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from codefu.models.lora import (
    AdapterMerger,
    AdapterWeights,
    LoRALinear,
    adapter_layers,
    adapters_disabled,
    add_adapters,
    is_adapter_key,
    load_peft_adapter,
    merge_adapters,
    peft_config,
    save_peft_adapter,
    split_adapters,
)
from codefu.models.lora_config import ADAPTER_CONFIG, ADAPTER_WEIGHTS, DEFAULT_TARGET_MODULES, LoRAConfig
from codefu.models.tiny import tiny_model
from codefu.rollout import EngineConfig, NativeEngine, SamplingParams
from codefu.rollout.hf_engine import TransformersEngine
from codefu.rollout.native.model import AdaptableLinear
from helpers.native_models import forward_logprobs, tiny_hf
from helpers.threads import one_thread  # noqa: F401 (autouse: one intra-op thread)

IDS = torch.tensor([[1, 17, 40, 99, 3, 64, 12, 7, 101, 55]])
PROMPTS = [[11, 12, 13], [7, 8, 9, 10, 11, 12, 13, 14, 15]]
SYNCS = 50


def randomize(model: nn.Module, seed: int, std: float = 0.05) -> None:
    """Nonzero random B (and new random A) in every adapter of `model`: a fresh adapter changes nothing."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, layer in adapter_layers(model):
            layer.lora_A.copy_(torch.randn(layer.lora_A.shape, generator=g) * 0.2)
            layer.lora_B.copy_(torch.randn(layer.lora_B.shape, generator=g) * std)


def adapted(cfg: LoRAConfig, seed: int = 0, adapter_seed: int = 1, **overrides) -> nn.Module:
    model = tiny_model(seed, **overrides)
    add_adapters(model, cfg)
    randomize(model, adapter_seed)
    return model


def logits(model: nn.Module, ids: torch.Tensor = IDS) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids).logits.float()


def random_adapters(
    shapes: dict[str, tuple[int, int]], rank: int, scaling: float, seed: int
) -> AdapterWeights:
    """Adapters for modules of (out, in) `shapes`, as a trainer would send them."""
    g = torch.Generator().manual_seed(seed)
    tensors = {}
    for module, (out, inp) in shapes.items():
        tensors[module + ".lora_A"] = torch.randn(rank, inp, generator=g) * 0.2
        tensors[module + ".lora_B"] = torch.randn(out, rank, generator=g) * 0.05
    return AdapterWeights(tensors, scaling)


def adapted_shapes(state: dict[str, torch.Tensor], targets=DEFAULT_TARGET_MODULES) -> dict[str, tuple]:
    return {
        k.removesuffix(".weight"): tuple(v.shape)
        for k, v in state.items()
        if k.endswith(".weight") and any(k.removesuffix(".weight").endswith("." + t) for t in targets)
    }


# ---- the layer ------------------------------------------------------------------------------------------


def test_fresh_adapter_is_the_base_and_disabled_adapter_stays_the_base():
    torch.manual_seed(0)
    base = nn.Linear(16, 24)
    x = torch.randn(3, 5, 16)
    expected = base(x)
    layer = LoRALinear(base, rank=4, scaling=2.0, dropout=0.0, dtype=torch.float32)
    assert layer.weight is base.weight and layer.bias is base.bias
    assert layer.lora_A.shape == (4, 16) and layer.lora_B.shape == (24, 4)
    assert layer.lora_A.abs().sum() > 0 and layer.lora_B.abs().sum() == 0  # B starts at zero
    assert torch.equal(layer(x), expected)
    with torch.no_grad():
        layer.lora_A.normal_()
        layer.lora_B.normal_()
    out = layer(x)
    want = expected + 2.0 * (x @ layer.lora_A.T @ layer.lora_B.T)
    torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(out, expected, atol=1e-3)
    with adapters_disabled(layer):
        assert torch.equal(layer(x), expected)
    assert torch.equal(layer(x), out)  # on again after the block
    with pytest.raises(RuntimeError, match="boom"), adapters_disabled(layer):
        raise RuntimeError("boom")
    assert layer.adapters_enabled  # on again after an exception too


def test_add_adapters_freezes_the_base_and_wraps_exactly_the_targets():
    model = tiny_model(0)
    before = dict(model.named_parameters())
    keys_before = set(model.state_dict())
    names = add_adapters(model, LoRAConfig(rank=4))
    expected = sorted(
        f"model.layers.{i}.{block}.{leaf}"
        for i in range(2)
        for block, leaves in [("self_attn", "qkvo"), ("mlp", ["gate", "up", "down"])]
        for leaf in [f"{x}_proj" for x in leaves]
    )
    assert names == expected and len(names) == 14
    assert sorted(n for n, _ in adapter_layers(model)) == expected
    assert not isinstance(model.lm_head, LoRALinear)  # not a target
    # the very Parameter objects, under the same names
    for name, p in model.named_parameters():
        if is_adapter_key(name):
            assert p.requires_grad and p.dtype == torch.float32, name
        else:
            assert p is before[name] and not p.requires_grad, name
    adapter_keys = {f"{n}.{k}" for n in expected for k in ("lora_A", "lora_B")}
    assert set(model.state_dict()) == keys_before | adapter_keys
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert sorted(trainable) == sorted(adapter_keys)
    # a fresh adapter changes nothing
    assert torch.equal(logits(model), logits(tiny_model(0)))


def test_add_adapters_suffix_targets_and_bf16_adapters():
    model = tiny_model(0)
    names = add_adapters(
        model, LoRAConfig(rank=2, target_modules=["self_attn.q_proj", "down_proj"], dtype="bfloat16")
    )
    assert names == sorted(
        [f"model.layers.{i}.self_attn.q_proj" for i in range(2)]
        + [f"model.layers.{i}.mlp.down_proj" for i in range(2)]
    )
    layer = model.get_submodule("model.layers.0.mlp.down_proj")
    assert layer.lora_A.dtype == layer.lora_B.dtype == torch.bfloat16 and layer.weight.dtype == torch.float32
    assert layer.scaling == 16.0  # alpha 32 / rank 2
    randomize(model, 3)
    assert logits(model).dtype == torch.float32  # runs with fp32 activations
    assert not torch.allclose(logits(model), logits(tiny_model(0)), atol=1e-4)


def test_bad_target_and_rank_errors_name_the_key():
    with pytest.raises(ValueError, match=r"trainer\.lora\.target_modules.*'qproj'"):
        add_adapters(tiny_model(0), LoRAConfig(rank=4, target_modules=["q_proj", "qproj"]))
    # k_proj is 64 in, 32 out (2 kv heads of 16): rank 33 does not fit it
    with pytest.raises(ValueError, match=r"trainer\.lora\.rank 33.*k_proj"):
        add_adapters(tiny_model(0), LoRAConfig(rank=33))
    add_adapters(tiny_model(0), LoRAConfig(rank=32))  # the largest that fits


@pytest.mark.parametrize(
    "bad, key",
    [
        (dict(rank=-1), "rank"),
        (dict(rank=4, alpha=0.0), "alpha"),
        (dict(rank=4, alpha=-2.0), "alpha"),
        (dict(rank=4, dropout=1.0), "dropout"),
        (dict(rank=4, dropout=-0.1), "dropout"),
        (dict(rank=4, dtype="float16"), "dtype"),
        (dict(rank=4, export="both"), "export"),
        (dict(rank=4, target_modules=[]), "target_modules"),
    ],
)
def test_lora_config_bad_values(bad, key):
    # the config loader turns "LoRAConfig: KEY must ..." into "trainer.lora.KEY must ..." (test_lora_config.py)
    with pytest.raises(ValueError, match=rf"LoRAConfig: {key} must"):
        LoRAConfig(**bad)


def test_lora_config_defaults():
    off = LoRAConfig()
    assert not off.enabled and off.scaling == 0.0
    on = LoRAConfig(rank=8, alpha=16, target_modules=("q_proj",))
    assert on.enabled and on.scaling == 2.0 and on.target_modules == ["q_proj"]


# ---- merging --------------------------------------------------------------------------------------------


def test_merged_plain_model_equals_the_adapted_model():
    cfg = LoRAConfig(rank=4, alpha=8)
    model = adapted(cfg)
    state = model.state_dict()
    snapshot = {k: v.clone() for k, v in state.items()}
    merged = merge_adapters(state, cfg.scaling)
    assert all(torch.equal(v, snapshot[k]) for k, v in model.state_dict().items())  # the input is not changed
    plain = tiny_model(5)  # other weights: all of them come from `merged`
    assert set(merged) == set(plain.state_dict())
    plain.load_state_dict(merged)
    want = logits(model)
    assert not torch.allclose(want, logits(tiny_model(0)), atol=1e-3)  # the adapters matter
    torch.testing.assert_close(logits(plain), want, atol=1e-5, rtol=1e-5)
    for k, v in merged.items():  # unadapted weights pass through untouched
        if not any(k.endswith(f"{t}.weight") for t in cfg.target_modules):
            assert torch.equal(v, snapshot[k]), k
        else:
            assert not torch.equal(v, snapshot[k]), k
    rest, adapters = split_adapters(state, cfg.scaling)
    assert not any(is_adapter_key(k) for k in rest) and adapters.scaling == 2.0
    assert adapters.modules() == sorted(n for n, _ in adapter_layers(model))


# ---- PEFT -----------------------------------------------------------------------------------------------


def test_peft_loads_our_adapter_folder_and_merges_alike(tmp_path):
    cfg = LoRAConfig(rank=4, alpha=8, target_modules=["q_proj", "v_proj", "o_proj", "up_proj", "down_proj"])
    ours = adapted(cfg)
    _, adapters = split_adapters(ours.state_dict(), cfg.scaling)
    base_dir = str(tmp_path / "base")  # a local base model folder: PEFT reads its config, no hub lookup
    tiny_model(0).save_pretrained(base_dir)
    path = save_peft_adapter(tmp_path / "adapter", adapters.tensors, cfg, base_model=base_dir)
    assert sorted(p.name for p in path.iterdir()) == sorted([ADAPTER_CONFIG, ADAPTER_WEIGHTS])
    assert not (tmp_path / "adapter.tmp").exists()
    assert json.loads((path / ADAPTER_CONFIG).read_text())["base_model_name_or_path"] == base_dir

    loaded = peft.PeftModel.from_pretrained(tiny_model(0), str(path)).eval()
    want = logits(ours)
    assert not torch.allclose(want, logits(tiny_model(0)), atol=1e-3)
    torch.testing.assert_close(logits(loaded), want, atol=1e-5, rtol=1e-5)

    theirs = loaded.merge_and_unload().state_dict()
    mine = merge_adapters(ours.state_dict(), cfg.scaling)
    assert set(theirs) == set(mine)
    for k in mine:
        torch.testing.assert_close(theirs[k], mine[k], atol=1e-6, rtol=1e-6, msg=k)

    # round trip through our reader, and PEFT's own folder read by it
    tensors, config = load_peft_adapter(path)
    assert config == json.loads(json.dumps(peft_config(cfg, base_dir)))
    assert set(tensors) == set(adapters.tensors)
    assert all(torch.equal(tensors[k], adapters.tensors[k]) for k in tensors)
    peft_model = peft.PeftModel.from_pretrained(tiny_model(0), str(path))
    peft_model.save_pretrained(tmp_path / "by_peft")
    # the very file layout PEFT writes (key names included)
    written = safe_open_keys(path / ADAPTER_WEIGHTS)
    assert written == safe_open_keys(tmp_path / "by_peft" / ADAPTER_WEIGHTS)
    assert "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight" in written
    tensors2, config2 = load_peft_adapter(tmp_path / "by_peft")
    assert set(tensors2) == set(adapters.tensors)
    assert all(torch.equal(tensors2[k], adapters.tensors[k]) for k in tensors2)
    assert config2["r"] == 4 and config2["lora_alpha"] == 8


def test_save_peft_adapter_replaces_an_old_folder(tmp_path):
    cfg = LoRAConfig(rank=2)
    first = split_adapters(adapted(cfg, adapter_seed=1).state_dict(), cfg.scaling)[1]
    second = split_adapters(adapted(cfg, adapter_seed=2).state_dict(), cfg.scaling)[1]
    save_peft_adapter(tmp_path / "a", first.tensors, cfg)
    save_peft_adapter(tmp_path / "a", second.tensors, cfg)
    tensors, _ = load_peft_adapter(tmp_path / "a")
    assert all(torch.equal(tensors[k], second.tensors[k]) for k in second.tensors)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a"]  # no .tmp / .old left


# ---- the engines' merger --------------------------------------------------------------------------------


def safe_open_keys(path) -> set[str]:
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        return set(f.keys())


def merger_targets() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "a.weight": torch.randn(24, 16, generator=g),
        "b.weight": torch.randn(16, 8, generator=g),
        "c.weight": torch.randn(12, 20, generator=g).T,  # a non-contiguous view (written through a copy)
        "c.bias": torch.randn(20, generator=g),
    }


def test_adapter_merger_has_no_drift():
    targets = merger_targets()
    original = {k: v.clone() for k, v in targets.items()}
    shapes = {k.removesuffix(".weight"): tuple(v.shape) for k, v in targets.items() if k.endswith(".weight")}
    sets = [random_adapters(shapes, rank=4, scaling=8.0, seed=s) for s in range(SYNCS)]
    merger = AdapterMerger()
    storage = {k: v.data_ptr() for k, v in targets.items()}
    merger.apply(targets, sets[0])
    once = {k: v.clone() for k, v in targets.items()}
    for s in sets[1:]:
        merger.apply(targets, s)
    merger.apply(targets, sets[0])
    for k in targets:
        assert torch.equal(targets[k], once[k]), k  # bitwise: each merge starts from the exact base
        assert targets[k].data_ptr() == storage[k], k  # written in place
    fresh = {k: v.clone() for k, v in original.items()}
    AdapterMerger().apply(fresh, sets[0])
    assert all(torch.equal(fresh[k], targets[k]) for k in targets)
    assert torch.equal(targets["c.bias"], original["c.bias"])
    for module in shapes:
        b, a = sets[0].delta(module, torch.device("cpu"), torch.float32)
        torch.testing.assert_close(targets[module + ".weight"], original[module + ".weight"] + b @ a)
    # forget: the weights now held are the new base
    merger.forget()
    merger.apply(targets, sets[0])
    b, a = sets[0].delta("a", torch.device("cpu"), torch.float32)
    torch.testing.assert_close(targets["a.weight"], original["a.weight"] + 2 * (b @ a), atol=1e-5, rtol=1e-5)


def test_adapter_merger_errors():
    targets = merger_targets()
    shapes = {"a": (24, 16), "b": (16, 8)}
    good = random_adapters(shapes, rank=2, scaling=1.0, seed=0)
    with pytest.raises(KeyError, match="'nope'"):
        AdapterMerger().apply(targets, random_adapters({"nope": (4, 4)}, 2, 1.0, 0))
    with pytest.raises(ValueError, match=r"the adapter of b is \(16 x 9\)"):
        AdapterMerger().apply(targets, random_adapters({"b": (16, 9)}, 2, 1.0, 0))
    with pytest.raises(ValueError, match="the adapter of a"):
        AdapterMerger().apply(targets, random_adapters({"a": (23, 16)}, 2, 1.0, 0))
    merger = AdapterMerger()
    merger.apply(targets, good)  # the failures above changed nothing that stops a good one
    assert set(merger.base) == {"a.weight", "b.weight"}


# ---- the engines ----------------------------------------------------------------------------------------


def native_engine(hf) -> NativeEngine:
    config = EngineConfig(model="(in memory)", engine="native", kv_cache_tokens=1024, dtype="float32")
    return NativeEngine.from_hf_model(hf, None, config)


def engine_logprobs(engine, merged_hf) -> tuple[float, list]:
    """The largest difference between the engine's sampled log-probs and those of `merged_hf`."""
    out = engine.generate(PROMPTS, SamplingParams(n=2, temperature=1.0, max_new_tokens=6, seed=3))
    worst = 0.0
    for c in out:
        want = forward_logprobs(merged_hf, c.prompt_ids, c.token_ids, 1.0)
        worst = max(worst, (torch.tensor(c.logprobs) - want).abs().max().item())
    return worst, [(c.token_ids, c.logprobs) for c in out]


def merged_hf(kind: str, state: dict[str, torch.Tensor]):
    model = tiny_hf(kind, seed=7)
    model.load_state_dict(state)
    return model


def adapter_tensors(engine) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The native engine's adapter tensors, projection by projection (None where there are none)."""
    return [
        (m.lora_a, m.lora_b)
        for m in engine.model.modules()
        if isinstance(m, AdaptableLinear) and m.lora_a is not None
    ]


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_native_engine_applies_adapters_unmerged_without_drift(kind):
    """The native engine keeps its weights as loaded and computes the adapters beside them: its log-probs
    are the merged model's (fp32) after the 1st sync and after the 50th; back at the first adapters its
    samples are identical; a sync of the same shapes copies into the same tensors (CUDA graphs read them)."""
    hf = tiny_hf(kind)
    base = {k: v.clone() for k, v in hf.state_dict().items()}
    engine = native_engine(hf)
    shapes = adapted_shapes(base)
    assert len(shapes) == 14
    sets = [random_adapters(shapes, rank=4, scaling=8.0, seed=s) for s in range(SYNCS)]
    weights = {k: v.clone() for k, v in engine.model.hf_targets().items()}

    engine.load_weights(sets[0], version=1)
    assert engine.version == 1
    layout = engine.model.adapter_layout_version
    tensors = adapter_tensors(engine)
    assert len(tensors) == 4 * 2  # qkv, o, gate_up, down of each of the 2 layers
    err1, out1 = engine_logprobs(engine, merged_hf(kind, merge_adapters(base | sets[0].tensors, 8.0)))
    assert err1 < 1e-4

    for s in sets[1:]:
        engine.load_weights(s)
    err_last, _ = engine_logprobs(engine, merged_hf(kind, merge_adapters(base | sets[-1].tensors, 8.0)))
    assert err_last < 1e-4
    engine.load_weights(sets[0], version=SYNCS + 1)
    err50, out50 = engine_logprobs(engine, merged_hf(kind, merge_adapters(base | sets[0].tensors, 8.0)))
    assert err50 == err1 and out50 == out1  # bitwise what one sync gave
    assert engine.model.adapter_layout_version == layout  # same shapes: in place ...
    assert all(
        a.data_ptr() == a0.data_ptr() and b.data_ptr() == b0.data_ptr()
        for (a, b), (a0, b0) in zip(adapter_tensors(engine), tensors, strict=True)
    )  # ... the very tensors
    for k, v in engine.model.hf_targets().items():  # the weights were never touched
        assert torch.equal(v, weights[k]), k

    # another rank changes the layout; full weights are the whole policy: the adapters go
    engine.load_weights(random_adapters(shapes, rank=2, scaling=1.0, seed=0))
    assert engine.model.adapter_layout_version == layout + 1
    other = tiny_hf(kind, seed=1)
    engine.load_weights({k: v for k, v in other.state_dict().items() if k in weights})
    assert adapter_tensors(engine) == [] and engine.model.adapter_layout_version == layout + 2
    err_full, _ = engine_logprobs(engine, other)
    assert err_full < 1e-4


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_native_sync_of_the_same_layout_refills_what_a_fresh_load_builds(dtype):
    """A sync whose modules and ranks are those held copies into the held tensors instead of building
    them (`_refill_adapters`): bitwise what an engine loading those adapters afresh holds, in either
    dtype; a shape that does not fit takes the full path, which names the module, and copies nothing."""
    hf = tiny_hf("qwen2")
    shapes = adapted_shapes(
        hf.state_dict(), targets=("q_proj", "k_proj", "gate_proj", "up_proj", "down_proj")
    )
    config = EngineConfig(model="(in memory)", engine="native", kv_cache_tokens=1024, dtype=dtype)
    synced, fresh = (NativeEngine.from_hf_model(tiny_hf("qwen2"), None, config) for _ in range(2))
    first, second = (random_adapters(shapes, rank=4, scaling=3.0, seed=s) for s in (0, 1))
    synced.load_weights(first)
    held = [(a.data_ptr(), b.data_ptr()) for a, b in adapter_tensors(synced)]
    synced.load_weights(second)  # refilled
    fresh.load_weights(second)  # built
    assert [(a.data_ptr(), b.data_ptr()) for a, b in adapter_tensors(synced)] == held
    for (a, b), (a0, b0) in zip(adapter_tensors(synced), adapter_tensors(fresh), strict=True):
        assert torch.equal(a, a0) and torch.equal(b, b0)
    assert any(b.count_nonzero() < b.numel() for _, b in adapter_tensors(synced))  # off-diagonal zeros

    bad = dict(second.tensors)
    bad["model.layers.1.mlp.down_proj.lora_B"] = torch.zeros(9, 4)
    with pytest.raises(ValueError, match=r"the adapter of model.layers.1.mlp.down_proj is \(9 x"):
        synced.load_weights(AdapterWeights(bad, 3.0))
    for (a, b), (a0, b0) in zip(adapter_tensors(synced), adapter_tensors(fresh), strict=True):
        assert torch.equal(a, a0) and torch.equal(b, b0)  # untouched


def test_native_engine_adapter_errors_name_the_module():
    hf = tiny_hf("llama")
    engine = native_engine(hf)
    with pytest.raises(KeyError, match="model.layers.5.self_attn.q_proj"):
        engine.load_weights(random_adapters({"model.layers.5.self_attn.q_proj": (64, 64)}, 2, 1.0, 0))
    with pytest.raises(KeyError, match="attention and MLP projections only"):
        engine.load_weights(random_adapters({"lm_head": (128, 64)}, 2, 1.0, 0))
    with pytest.raises(ValueError, match=r"the adapter of model.layers.0.mlp.down_proj is \(9 x"):
        engine.load_weights(random_adapters({"model.layers.0.mlp.down_proj": (9, 128)}, 2, 1.0, 0))
    assert adapter_tensors(engine) == []  # nothing half-loaded
    # adapters need no weights: they load while the weights are dropped (a colocated trainer's turn)
    engine.release_memory(weights=True)
    engine.load_weights(random_adapters(adapted_shapes(hf.state_dict()), 2, 1.0, 0))
    assert len(adapter_tensors(engine)) == 8


def test_native_engine_takes_a_trainer_side_adapted_state():
    """The trainer's side: the HF model with adapters (add_adapters) trained; the engine gets its
    split_adapters and computes the adapted model's log-probs."""
    hf = tiny_hf("qwen2")
    engine = native_engine(hf)
    cfg = LoRAConfig(rank=4, alpha=16)
    trainer = tiny_hf("qwen2")
    add_adapters(trainer, cfg)
    randomize(trainer, 9)
    _, adapters = split_adapters(trainer.state_dict(), cfg.scaling)
    engine.load_weights(adapters)
    err, _ = engine_logprobs(engine, trainer)  # the adapted model itself (not merged)
    assert err < 1e-4


def test_a_small_adapter_change_survives_in_a_bf16_native_engine():
    """Merged into bf16 weights, an adapter change below half a weight's rounding step vanishes from the
    weights (the engine would sample a policy the trainer does not compute); kept apart, the bf16 engine
    computes what the trainer's bf16 forward computes: the base output plus the adapters' output."""
    hf = tiny_hf("llama")
    config = EngineConfig(model="(in memory)", engine="native", kv_cache_tokens=1024, dtype="bfloat16")
    engine = NativeEngine.from_hf_model(hf, None, config)
    shapes = adapted_shapes(hf.state_dict())
    small = random_adapters(shapes, rank=4, scaling=1.0, seed=3)
    small = AdapterWeights(
        {k: v * (1e-2 if k.endswith("lora_B") else 1.0) for k, v in small.tensors.items()}, 1.0
    )
    merged = merge_adapters({k: v.clone() for k, v in hf.state_dict().items()} | small.tensors, 1.0)
    bf16_merge_lost = sum(
        int(torch.equal(merged[k].bfloat16(), v.bfloat16()))
        for k, v in hf.state_dict().items()
        if k in merged
    )
    assert bf16_merge_lost > 0  # some weights' change rounds away entirely in bf16 ...
    engine.load_weights(small)
    proj = engine.model.layers[0].mlp.down_proj  # bf16 weight, bf16 adapters beside it
    name = "model.layers.0.mlp.down_proj"
    x = torch.randn(64, proj.in_features, generator=torch.Generator().manual_seed(0)).bfloat16()
    a, b = small.tensors[name + ".lora_A"].bfloat16(), small.tensors[name + ".lora_B"].bfloat16()
    with torch.no_grad():
        # the trainer's bf16 forward (LoRALinear under FSDP's bf16 compute): base output + adapter output
        trainer = F.linear(x, proj.weight) + F.linear(F.linear(x, a), b)
        engine_out = proj(x)
        merged_out = F.linear(x, merged[name + ".weight"].bfloat16())
    truth = (x.float() @ merged[name + ".weight"].T).float()
    change = (trainer.float() - F.linear(x, proj.weight).float()).norm()
    assert change > 0  # the adapters do change the trainer's output
    # the engine computes what the trainer computes; a bf16 merge rounds the weights' change differently
    assert (engine_out.float() - trainer.float()).norm() < 0.25 * (
        merged_out.float() - trainer.float()
    ).norm()
    assert (engine_out.float() - truth).norm() <= (merged_out.float() - truth).norm() * 1.05


def test_transformers_engine_merges_adapters_without_drift():
    cfg = LoRAConfig(rank=4)
    engine = TransformersEngine(tiny_model(0), tokenizer=None)
    base = {k: v.clone() for k, v in engine.model.state_dict().items()}
    shapes = adapted_shapes(base)
    sets = [random_adapters(shapes, rank=4, scaling=cfg.scaling, seed=s) for s in range(SYNCS)]

    def fresh(adapters):
        model = tiny_model(3)
        model.load_state_dict(merge_adapters(base | adapters.tensors, adapters.scaling))
        return model

    engine.load_weights(sets[0])
    want = merge_adapters(base | sets[0].tensors, sets[0].scaling)
    own = engine.model.state_dict()
    assert set(own) == set(want)
    for k in own:
        torch.testing.assert_close(own[k], want[k], atol=0, rtol=0, msg=k)
    got1 = logits(engine.model)
    err1 = (got1 - logits(fresh(sets[0]))).abs().max().item()
    assert err1 < 1e-5
    assert not torch.allclose(got1, logits(tiny_model(0)), atol=1e-3)
    for s in sets[1:]:
        engine.load_weights(s)
    err_last = (logits(engine.model) - logits(fresh(sets[-1]))).abs().max().item()
    assert err_last < 1e-5
    engine.load_weights(sets[0])
    assert torch.equal(logits(engine.model), got1)
    for k, v in engine.model.state_dict().items():
        assert torch.equal(v, want[k]), k
    # generation runs on the merged weights: the sampled log-probs are the merged model's
    out = engine.generate(PROMPTS, SamplingParams(temperature=1.0, max_new_tokens=5, seed=0))
    for c in out:
        torch.testing.assert_close(
            torch.tensor(c.logprobs),
            forward_logprobs(fresh(sets[0]), c.prompt_ids, c.token_ids, 1.0),
            atol=1e-4,
            rtol=0,
        )

    # full weights: the new base
    other = {k: v.clone() for k, v in tiny_model(1).state_dict().items()}
    engine.load_weights(other)
    assert all(torch.equal(v, other[k]) for k, v in engine.model.state_dict().items())
    engine.load_weights(sets[2])
    want_other = merge_adapters(other | sets[2].tensors, sets[2].scaling)
    for k, v in engine.model.state_dict().items():
        torch.testing.assert_close(v, want_other[k], atol=0, rtol=0, msg=k)
    with pytest.raises(KeyError, match="model.layers.9.mlp.up_proj"):
        engine.load_weights(random_adapters({"model.layers.9.mlp.up_proj": (128, 64)}, 2, 1.0, 0))
