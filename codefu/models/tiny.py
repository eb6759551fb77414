"""Tiny models and a character-level tokenizer with a ChatML template, built locally (no downloads).

For tests, toy tasks and benchmarks: `TINY_LLAMA` is the one tiny architecture of every test;
`save_tiny_model(path)` saves a random-init one as an HF folder; `tiny_model(seed)` is a random-init
2-layer LlamaForCausalLM (vocab 128, EOS 2, BOS 1, pad 0) for `tiny_tokenizer()`, which maps each
printable ASCII character (and newline) to one id and knows the special tokens <pad> <s> </s>
<|im_start|> <|im_end|> <unk>.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

#: A 2-layer Llama (vocab 128, hidden 64): ~0.1M parameters, builds in milliseconds.
TINY_LLAMA = dict(
    model_type="llama",
    vocab_size=128,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=512,
    tie_word_embeddings=False,
)


def save_tiny_model(path: str | Path, seed: int = 0, **overrides) -> Path:
    """A random-init TINY_LLAMA (plus overrides) saved with save_pretrained (fp32 safetensors) at `path`."""
    from transformers import AutoConfig, AutoModelForCausalLM

    spec = dict(TINY_LLAMA) | overrides
    config = AutoConfig.for_model(spec.pop("model_type"), **spec)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.save_pretrained(path)
    return Path(path)


VOCAB_SIZE = 128
SPECIALS = ["<pad>", "<s>", "</s>", "<|im_start|>", "<|im_end|>", "<unk>"]  # ids 0..5
CHATML_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def tiny_config(**overrides: Any) -> Any:
    """TINY_LLAMA with this tokenizer's special ids."""
    from transformers import LlamaConfig

    kwargs: dict[str, Any] = {k: v for k, v in TINY_LLAMA.items() if k != "model_type"}
    kwargs.update(vocab_size=VOCAB_SIZE, eos_token_id=2, bos_token_id=1, pad_token_id=0)
    kwargs.update(overrides)
    return LlamaConfig(**kwargs)


def tiny_model(seed: int = 0, **overrides: Any) -> Any:
    """A random-init LlamaForCausalLM in fp32, eval mode; the same seed gives the same weights."""
    from transformers import LlamaForCausalLM

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(tiny_config(**overrides))
    return model.eval()


def tiny_tokenizer() -> Any:
    """A PreTrainedTokenizerFast over VOCAB_SIZE ids: specials, "\\n", printable ASCII, then fillers."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    chars = ["\n"] + [chr(c) for c in range(32, 127)]
    tokens = SPECIALS + chars
    tokens += [f"<extra_{i}>" for i in range(VOCAB_SIZE - len(tokens))]
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens(SPECIALS + tokens[len(SPECIALS) + len(chars) :])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        chat_template=CHATML_TEMPLATE,
    )
