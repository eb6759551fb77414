"""Contracts of the rollout role: what to sample (`SamplingParams`) and what comes back (`Completion`).

Log-prob convention (the trainer computes the same quantity for the same tokens):

    logprobs[t] = log_softmax(logits_t / temperature)[token_ids[t]]     over the FULL vocabulary, in fp32

where logits_t are the model's raw logits for response position t (no repetition penalty, no other
processing). top-p / top-k only restrict which tokens can be sampled; they do NOT renormalise the
reported log-prob. Greedy decoding (temperature 0) reports log-probs under temperature 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# "interrupted": the caller stopped the generation before the sample ended (loop.over_provision carries it
# into the next step, where an engine that can continues it: FollowUp.response); never trained as it is
FinishReason = Literal["stop", "length", "interrupted"]


@dataclass(frozen=True)
class SamplingParams:
    """How to sample: one set of parameters for every prompt of a `generate` call."""

    n: int = 1  # completions per prompt
    temperature: float = 1.0  # 0: greedy (argmax); log-probs then use temperature 1
    top_p: float = 1.0  # nucleus sampling; 1.0: off
    top_k: int = 0  # keep the k most likely tokens; 0 or negative: off
    max_new_tokens: int = 256  # response length cap; a response that reaches it ends with "length"
    seed: int | None = None  # same seed + same prompts + same engine settings -> same samples; None: fresh
    stop_token_ids: tuple[int, ...] = ()  # extra stop tokens besides the tokenizer's/model's EOS

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"SamplingParams.n must be >= 1, got {self.n}")
        if self.temperature < 0:
            raise ValueError(f"SamplingParams.temperature must be >= 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"SamplingParams.top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise ValueError(f"SamplingParams.max_new_tokens must be >= 1, got {self.max_new_tokens}")
        object.__setattr__(self, "stop_token_ids", tuple(int(t) for t in self.stop_token_ids))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass
class Completion:
    """One sampled response to one prompt.

    Shapes: R = len(token_ids) = len(logprobs) <= max_new_tokens. token_ids ends with the stop token when
    finish_reason == "stop" (the token is kept, with its log-prob, so the policy learns to stop); nothing
    after it is kept.

    A self-repair episode (codefu.orchestrator.episodes) is one Completion too: token_ids then holds every
    turn's response with the feedback turns between them, `loss_mask` marks which tokens the model wrote
    (a feedback token has mask 0 and log-prob 0.0), and text, finish_reason are the last turn's.
    """

    prompt_index: int  # index into the `prompts` list given to generate
    sample_index: int  # 0 .. n-1 within the prompt
    prompt_ids: list[int]  # (P,) the prompt exactly as given, no padding
    token_ids: list[int]  # (R,) sampled response tokens
    text: str  # token_ids decoded, special tokens skipped
    logprobs: list[float]  # (R,) log-prob of each sampled token, see the module docstring
    finish_reason: FinishReason = "length"  # "stop": ended with EOS / a stop token; "length": hit the cap
    extra: dict[str, float] = field(default_factory=dict)  # engine-specific figures, if any
    loss_mask: list[int] | None = None  # (R,) 1: a token the model wrote (trained), 0: not; None: all 1
    # the version of the weights that wrote it, as the engine that wrote it reports (the rollout actor's
    # `load_weights(..., version)`; 0: the weights it started with): the OLDEST version among its tokens
    # (min(token_versions) when those are given); an episode's is its oldest turn's
    policy_version: int | None = None
    # (R,) the version of the weights that sampled each token: weights updated while it was generated
    # (asynchronous RL, the native engine's update_weights_in_flight) give a run of the old version, then
    # the new one (the tokens after an update attend to K/V written by the older weights, kept as
    # PipelineRL keeps them); None: every token is `policy_version`'s
    token_versions: list[int] | None = None

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def model_tokens(self) -> int:
        """Tokens the model wrote (all of them but an episode's feedback turns)."""
        return len(self.token_ids) if self.loss_mask is None else sum(self.loss_mask)
