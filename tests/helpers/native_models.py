"""Tiny random transformers models of the families the native engine serves, and transformers' own
answers to compare the engine with (greedy tokens, the trainer's log-probs)."""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM, LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config

VOCAB = 1000
CONFIGS = {"llama": LlamaConfig, "qwen2": Qwen2Config, "qwen3": Qwen3Config, "mistral": MistralConfig}
#: what each family ties or biases unless overridden (the real models' choices)
DEFAULTS = {
    "llama": dict(tie_word_embeddings=True),
    "qwen2": dict(tie_word_embeddings=False),
    "qwen3": dict(tie_word_embeddings=True, head_dim=24),  # Qwen3's head_dim is not hidden / heads
    "mistral": dict(tie_word_embeddings=False, sliding_window=None),
}


def tiny_hf(kind: str, seed: int = 0, **overrides):
    """A 2-layer random `kind` model in fp32 on CPU. Weights the family initialises to a constant (biases
    to 0, norms to 1) are drawn at random too, so a wrong use of them shows."""
    spec = dict(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        initializer_range=0.3,  # the default 0.02 makes greedy repeat one token forever
        bos_token_id=None,
        pad_token_id=None,
        eos_token_id=None,
    )
    spec.update(DEFAULTS[kind])
    spec.update(overrides)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(CONFIGS[kind](**spec), dtype=torch.float32).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.normal_(0, 0.5)
            elif "q_norm" in name or "k_norm" in name:
                p.uniform_(0.5, 1.5)
    return model


def hf_greedy(hf, prompt: list[int], max_new: int, stop: tuple[int, ...] = ()) -> list[int]:
    """transformers' greedy continuation of `prompt` (on the model's device)."""
    device = next(hf.parameters()).device
    with torch.no_grad():
        out = hf.generate(
            torch.tensor([prompt], device=device),
            attention_mask=torch.ones(1, len(prompt), dtype=torch.long, device=device),
            do_sample=False,
            max_new_tokens=max_new,
            eos_token_id=list(stop) or None,
            pad_token_id=0,
        )
    return out[0, len(prompt) :].tolist()


def forward_logprobs(hf, prompt: list[int], response: list[int], temperature: float) -> torch.Tensor:
    """The trainer's quantity: log_softmax(logits / T) of each response token, one unpadded forward (fp32,
    on CPU)."""
    device = next(hf.parameters()).device
    with torch.no_grad():
        logits = hf(input_ids=torch.tensor([prompt + response], device=device)).logits[0].float().cpu()
    scaled = logits[len(prompt) - 1 : len(prompt) + len(response) - 1] / temperature
    return torch.log_softmax(scaled, dim=-1).gather(-1, torch.tensor(response)[:, None]).squeeze(1)


def batch_logprobs(model, batch) -> torch.Tensor:
    """The trainer's (B, T) log-probs of `batch` (a codefu Batch) from a plain HF (or PEFT) model: one
    unpadded forward per row, 0 outside the response."""
    out = torch.zeros(batch.input_ids.shape, dtype=torch.float32)
    with torch.no_grad():
        for i in range(batch.input_ids.shape[0]):
            n = int(batch.attention_mask[i].sum())
            ids = batch.input_ids[i, :n]
            lp = torch.log_softmax(model(input_ids=ids[None]).logits[0, :-1].float(), dim=-1)
            out[i, 1:n] = lp.gather(-1, ids[1:, None]).squeeze(1) * batch.response_mask[i, 1:n]
    return out
