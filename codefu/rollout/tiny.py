"""A tiny Llama and a character-level tokenizer with a ChatML template, built locally (no downloads).

For tests and toy tasks: `tiny_model(seed)` is a random-init 2-layer LlamaForCausalLM (vocab 128,
EOS 2, BOS 1, pad 0); `tiny_tokenizer()` maps each printable ASCII character (and newline) to one id and
knows the special tokens <pad> <s> </s> <|im_start|> <|im_end|> <unk>.
"""

from __future__ import annotations

from typing import Any

import torch

VOCAB_SIZE = 128
SPECIALS = ["<pad>", "<s>", "</s>", "<|im_start|>", "<|im_end|>", "<unk>"]  # ids 0..5
CHATML_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def tiny_config(**overrides: Any) -> Any:
    """The trainer's TINY_LLAMA (one tiny architecture for every test) with this tokenizer's special ids."""
    from transformers import LlamaConfig

    from codefu.trainer.testing import TINY_LLAMA

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
