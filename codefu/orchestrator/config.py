"""The run config: one dataclass per component, composed; loaded from YAML with dotted overrides.

codefu train --config configs/cpu.yaml rollout.n=4 trainer.kl_coef=0
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import ClassVar, Literal, get_args

from codefu.data.difficulty import DifficultyConfig
from codefu.data.mixing import TrainSource, check_train
from codefu.errors import CodefuError
from codefu.judge.judge import JudgeConfig
from codefu.judge.rewards import REWARDS
from codefu.models.lora_config import DEFAULT_TARGET_MODULES, LoRAConfig
from codefu.observability.config import ObservabilityConfig
from codefu.orchestrator.layout import WEIGHT_TRANSFERS, ResourcesConfig
from codefu.rollout.settings import ENGINES, EngineSettings
from codefu.trainer.config import TrainerConfig


@dataclass
class DataConfig:
    train: str | list[TrainSource] = "starter"
    """Problems to train on: "starter" (the bundled set's recorded train split) or a verl-schema
    parquet / problems JSONL path; or several datasets, a list of {path, weight}: each step's prompts are
    drawn from them in proportion to their weights (codefu/data/mixing.py, docs/data.md)."""
    val: str | None = None
    """Held-out problems the loop validates on; None: the starter set's recorded validation split
    (codefu/data/starter/split.json; its test split is for reported results only),
    or for another dataset `val_fraction` of its problems, fixed by `seed` (of each dataset of a list)."""
    val_fraction: float = 0.2
    """Share of a dataset held out when `val` is None (not used by the starter set: its split is fixed)."""
    prompts_per_step: int = 8
    seed: int = 0
    language: str = "python"
    """Language asked for when a problem brings no prompt of its own (the starter set)."""
    max_prompt_tokens: int | None = None
    """Skip problems whose encoded prompt is longer (logged with a count); None: no cap."""
    difficulty: DifficultyConfig = field(default_factory=DifficultyConfig)
    """The difficulty-aware sampler: problems at 0% or 100% over recent visits sit out a few epochs."""


@dataclass
class RolloutConfig(EngineSettings):
    """Sampling (below) and how the engine runs (`EngineSettings`: dtype, device, engine, batch_size, ...)."""

    n: int = 4
    """Samples per prompt (the GRPO group)."""
    temperature: float = 1.0
    """Also the temperature the trainer's log-probs use (one value, so the two always agree)."""
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int = 256
    """Tokens per response (per turn of a self-repair episode)."""
    turns: int = 1
    """Self-repair: turns per episode at most. A program that fails the problem's public tests (the
    statement's examples) gets the judge's feedback as a user turn and the model writes a new one, until
    the public tests pass or `turns` programs are written; the last is rewarded on the hidden tests.
    1: one response per sample, no feedback (docs/self-repair.md)."""
    max_episode_tokens: int | None = None
    """Self-repair: the tokens an episode may hold after its prompt, the model's and the feedback turns';
    a turn starts only when its feedback and a whole response of max_new_tokens fit. null: no bound but
    turns x max_new_tokens and the feedback turns' (each part cut to feedback_chars)."""
    feedback_chars: int = 400
    """Self-repair: each part of a feedback turn (compiler output, the failing example's input, expected
    output, the program's output, its error) is cut to this many characters, head and tail kept."""
    async_turns: bool = True
    """Self-repair: an episode's next turn joins the running generation as soon as its public-test check
    is back, while other episodes still decode (the native engine admits it into the running batch,
    its conversation so far from the prefix cache), and each episode is scored as it ends. It keeps the
    engine's batch fuller: ~30% fewer decode steps for the same work where decoding bounds the step, the
    same step time where the judge does (docs/benchmarks.md). Not reproducible for a seed: the batch a
    token is sampled in depends on when the judge answers. false: lock-step turns, every episode's turn
    t done and checked before any turn t + 1 starts (reproducible)."""
    stop_token_ids: list[int] = field(default_factory=list)
    """Token ids that end a response besides the tokenizer's end-of-sequence (kept in the response, like
    EOS), e.g. a chat template's end-of-turn token that is not the model's EOS."""


@dataclass
class AlgoConfig:
    estimator: Literal["grpo", "rloo", "reinforce_pp", "ppo"] = "grpo"
    """Advantages from the samples' rewards: grpo (normalised within the prompt's group), rloo (minus the
    mean of the group's other samples), reinforce_pp (REINFORCE++: whitened over the batch's tokens), ppo
    (GAE with a critic trained beside the policy: the `critic` section). docs/algo.md."""
    gamma: float = 1.0
    """ppo: GAE's discount per token (verl's default 1.0: the outcome reward reaches every token whole)."""
    lam: float = 1.0
    """ppo: GAE's lambda (1.0: Monte-Carlo returns minus the critic's baseline; lower trusts the critic
    more: less variance, more bias)."""
    kl_reward_coef: float = 0.0
    """ppo: a KL penalty in the reward instead of the loss: every response token's reward loses
    kl_reward_coef * (log pi_old - log pi_ref) (verl's use_kl_in_reward, "kl" estimator); needs the
    reference policy, which this turns on. 0: off."""
    norm_by_std: bool = True
    """GRPO: (r - mean) / (std + eps); False: r - mean (Dr. GRPO)."""
    adv_eps: float = 1e-6
    overlong_buffer: int = 0
    """DAPO's soft overlong punishment: a response longer than rollout.max_new_tokens - overlong_buffer
    tokens loses up to overlong_penalty of reward, linearly over the buffer; 0: off."""
    overlong_penalty: float = 1.0
    dynamic_sampling: bool = False
    """Drop groups whose samples all pass or all fail (no signal) and sample more prompts instead."""
    max_sampling_rounds: int = 3
    """Generation rounds per step at most when dynamic sampling refills the batch."""
    reward: str = "codefu"
    turn_cost: float = 0.0
    """Self-repair (rollout.turns > 1): each turn after the first costs this much reward, so a program
    right at once beats one repaired later. 0: off."""
    first_turn_bonus: float = 0.0
    """Self-repair: added to the reward of an episode whose first program passed (the public tests, and
    the hidden ones it is rewarded on), so the policy keeps solving without feedback. 0: off."""
    recompute_logprobs: bool = True
    """The trainer recomputes the sampled tokens' log-probs as the PPO "old" policy (and reports the
    rollout-vs-trainer mismatch); False saves that forward pass: the rollout's own are the old policy, or,
    with trainer.rollout_correction, the update's own forward is (docs/algo.md)."""


@dataclass
class CriticConfig:
    """PPO's critic (algo.estimator: ppo): a value model trained beside the policy, on the same batches.
    Every trainer setting not named here (dtype, micro-batches, mini-batches, epochs, grad clip, schedule,
    checkpoints kept) is the trainer's."""

    model: str | None = None
    """The value model's starting weights (an HF directory or .gguf, as trainer.model); None: the policy's.
    Its lm_head is dropped and a scalar value head, initialised to zero, put in its place."""
    lr: float = 1e-5
    """The critic's learning rate (verl's default): critics take larger steps than policies."""
    value_clip: float | None = 0.5
    """PPO's value clipping: a prediction may move at most this far from its value at sampling time before
    its error stops giving gradient (verl's cliprange_value); null: unclipped."""
    pretrain_steps: int = 0
    """Loop steps at the start in which only the critic trains and the policy waits (verl's critic_warmup),
    so the first policy updates use a critic that has seen some returns."""

    def trainer_config(self, trainer: TrainerConfig) -> TrainerConfig:
        """The critic's workers' config: the trainer's, with the critic's model and learning rate. With
        trainer.lora the critic still trains every weight of its own copy, so it keeps fp32 master weights
        (master_dtype float32) whatever trainer.master_dtype says: LoRA's bfloat16 is for the policy's
        frozen base, and a full copy stored in bf16 loses updates at small learning rates."""
        own_model = self.model is not None
        return replace(
            trainer,
            model=self.model if own_model else trainer.model,
            gguf_file=None if own_model else trainer.gguf_file,
            tokenizer=None if own_model else trainer.tokenizer,
            lr=self.lr,
            kl_coef=0.0,
            entropy_coef=0.0,
            lora=LoRAConfig(),  # the critic trains every weight of its own copy (and its value head)
            master_dtype="float32" if trainer.lora.enabled else trainer.master_dtype,
        )


LoopMode = Literal["sync", "one_step_off", "async"]


@dataclass
class LoopConfig:
    steps: int = 30
    val_every: int = 10
    """Validate every N steps (and at the end); 0: never."""
    val_n: int = 4
    """Samples per validation problem (pass@k for k <= val_n)."""
    save_every: int = 10
    """Checkpoint every N steps (and at the end); 0: only at the end."""
    hf_export: Literal["end", "every_save"] = "end"
    """The model in HF format (what `codefu eval` and transformers load): RUN_DIR/model at the end of the
    run; every_save: also beside each checkpoint (RUN_DIR/checkpoints/step_N/hf)."""
    keep_final_state: bool = True
    """Keep the last resumable checkpoint at the end (weights, optimizer: ~12 bytes per parameter), so a
    run can be extended; false: a finished run keeps RUN_DIR/model and its records only."""
    overlap_judge: bool = True
    """Send each completion to the judge as soon as the engine finishes it, so judging runs while the
    rest decode (timing/generate_s ends at the last token; timing/judge_tail_s is what judging adds after
    it). With lock-step self-repair (rollout.turns > 1, rollout.async_turns false) each turn's public-test
    checks overlap its decoding and the last programs are scored after the last turn; asynchronous turns
    always judge as they go. false: judge the whole batch after generation (timing/judge_s)."""
    seed: int = 0
    mode: LoopMode = "sync"
    """How sampling and training take turns. sync: each step samples with the weights of the step before
    (on-policy). one_step_off: the next step's samples are made while this one trains (verl's one-step-off
    pipeline: every sample is one policy version old). async: sampling runs up to loop.max_staleness steps
    ahead of training. Off-policy modes need the rollout workers beside the trainer, not in turns on its
    GPUs (resources.colocate: false); trainer.rollout_correction weighs the older samples back."""
    max_staleness: int | None = None
    """loop.mode async: the most policy versions between the weights that generated a sample and the
    weights that train on it (null: 2); sampling waits rather than run further ahead. Set only with
    async: sync is 0 and one_step_off 1 by definition."""
    over_provision: float = 0.0
    """Partial rollouts (APRIL): start this share more groups than a step trains on (0.5: 1.5 times
    data.prompts_per_step), train on the first data.prompts_per_step whose samples have all finished, and
    stop the rest: they are carried into the next step with the tokens they have, and go on there under
    the new weights, first in the queue, so no step waits for the longest samples of its new groups.
    Carried tokens are older than the weights that train on them: one version at most in sync mode,
    loop.max_staleness in async (a group that could not wait another step is waited for and trained);
    trainer.rollout_correction: token_truncate weighs them back (off by default, as in the off-policy
    modes). Needs rollout.engine native and rollout.turns 1. 0: off (each step waits for all its
    samples)."""
    weight_sync_timeout_s: float = 600.0
    """A weight load on rollout workers of their own (split placement: resources.colocate false, or any
    CPU run) that takes longer fails with an error naming the workers and their nodes, instead of hanging
    the run. (Colocated engines take the weights in place, through CUDA IPC, without this limit.)"""

    @property
    def staleness_bound(self) -> int:
        """The most policy versions a sample may be behind the weights that train on it."""
        if self.mode == "async":
            return 2 if self.max_staleness is None else self.max_staleness
        return 1 if self.mode == "one_step_off" else 0

    @property
    def carry_bound(self) -> int:
        """loop.over_provision: the most policy versions a carried sample's oldest token may be behind the
        weights that train on it (sync: 1, a sample stopped at the step before; async: the staleness
        bound); past it, the sample starts over."""
        return self.staleness_bound if self.mode == "async" else 1


@dataclass
class RunConfig:
    data: DataConfig = field(default_factory=DataConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    critic: CriticConfig = field(default_factory=CriticConfig)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    resources: ResourcesConfig = field(default_factory=ResourcesConfig)
    loop: LoopConfig = field(default_factory=LoopConfig)
    observability: ObservabilityConfig = field(default_factory=ObservabilityConfig)

    #: Keys set from another, so each knob has one owner: the judge computes the reward the algorithm
    #: uses, and the trainer's log-probs use the temperature the rollout sampled at.
    DERIVED: ClassVar[dict[str, str]] = {
        "judge.reward": "algo.reward",
        "trainer.temperature": "rollout.temperature",
    }

    def __post_init__(self) -> None:
        for key, owner in self.DERIVED.items():
            section, _, name = key.rpartition(".")
            setattr(getattr(self, section), name, attrgetter(owner)(self))


LOOP_MODES = get_args(LoopMode)


def check_run_config(cfg: RunConfig) -> None:
    """A CodefuError naming the first key whose value is out of range (the loader checks only types)."""
    d, r, lp, a, c, t, j = cfg.data, cfg.rollout, cfg.loop, cfg.algo, cfg.critic, cfg.trainer, cfg.judge
    res = cfg.resources
    rules = [
        ("data.prompts_per_step", d.prompts_per_step >= 1, ">= 1"),
        ("data.val_fraction", 0 <= d.val_fraction < 1, "in [0, 1)"),
        ("data.max_prompt_tokens", d.max_prompt_tokens is None or d.max_prompt_tokens >= 1, ">= 1 or null"),
        ("rollout.n", r.n >= 1, ">= 1"),
        # greedy decoding would give n copies of one response: no group to compare, and no log-probs
        ("rollout.temperature", r.temperature > 0, "> 0 (GRPO needs n different samples)"),
        ("rollout.top_p", 0 < r.top_p <= 1, "in (0, 1]"),
        ("rollout.top_k", r.top_k >= 0, ">= 0 (0: off)"),
        ("rollout.max_new_tokens", r.max_new_tokens >= 1, ">= 1"),
        ("rollout.batch_size", r.batch_size >= 1, ">= 1"),
        ("rollout.engine", r.engine in ENGINES, "one of " + ", ".join(ENGINES)),
        # vLLM renormalises log-probs over what top-k / top-p keep (codefu.rollout.vllm_engine)
        ("rollout.top_p", r.engine != "vllm" or r.top_p == 1.0, "1.0 with rollout.engine vllm"),
        ("rollout.top_k", r.engine != "vllm" or r.top_k == 0, "0 with rollout.engine vllm"),
        ("rollout.temperature", r.engine != "vllm" or r.temperature <= 2, "<= 2 with rollout.engine vllm"),
        ("rollout.turns", r.turns >= 1, ">= 1"),
        (
            "rollout.max_episode_tokens",
            r.max_episode_tokens is None or r.max_episode_tokens >= r.max_new_tokens,
            ">= rollout.max_new_tokens or null",
        ),
        ("rollout.feedback_chars", r.feedback_chars >= 1, ">= 1"),
        ("algo.turn_cost", a.turn_cost >= 0, ">= 0 (0: off)"),
        ("algo.first_turn_bonus", a.first_turn_bonus >= 0, ">= 0 (0: off)"),
        ("algo.max_sampling_rounds", a.max_sampling_rounds >= 1, ">= 1"),
        ("algo.overlong_buffer", 0 <= a.overlong_buffer <= r.max_new_tokens, "in [0, max_new_tokens]"),
        ("algo.overlong_penalty", a.overlong_penalty >= 0, ">= 0"),
        ("algo.gamma", 0 <= a.gamma <= 1, "in [0, 1]"),
        ("algo.lam", 0 <= a.lam <= 1, "in [0, 1]"),
        ("algo.kl_reward_coef", a.kl_reward_coef >= 0, ">= 0 (0: off)"),
        # a per-token KL reward needs per-token advantages: only GAE takes them
        ("algo.kl_reward_coef", a.kl_reward_coef == 0 or a.estimator == "ppo", "0 unless estimator is ppo"),
        ("algo.reward", a.reward in REWARDS, "one of " + ", ".join(REWARDS)),
        ("trainer.lr", t.lr > 0, "> 0"),
        ("trainer.betas", len(t.betas) == 2 and all(0 <= b < 1 for b in t.betas), "two numbers in [0, 1)"),
        ("trainer.adam_eps", t.adam_eps > 0, "> 0"),
        ("trainer.weight_decay", t.weight_decay >= 0, ">= 0"),
        ("trainer.total_steps", t.total_steps >= 0, ">= 0"),
        ("trainer.min_lr_ratio", 0 <= t.min_lr_ratio <= 1, "in [0, 1]"),
        ("trainer.clip_low", t.clip_low >= 0, ">= 0"),
        ("trainer.clip_high", t.clip_high >= 0, ">= 0"),
        ("trainer.kl_coef", t.kl_coef >= 0, ">= 0 (0: off)"),
        ("trainer.norm_length", t.norm_length >= 0, ">= 0 (0: the batch's padded length)"),
        ("trainer.logprob_chunk_tokens", t.logprob_chunk_tokens >= 1, ">= 1"),
        ("trainer.uncheckpointed_layers", t.uncheckpointed_layers >= 0, ">= 0"),
        (
            "trainer.lora.target_modules",
            not t.lora.enabled
            or r.engine != "native"
            or all(m.rsplit(".", 1)[-1] in DEFAULT_TARGET_MODULES for m in t.lora.target_modules),
            f"within {list(DEFAULT_TARGET_MODULES)} with rollout.engine native (its adapters go beside the "
            "attention and MLP projections)",
        ),
        (
            "trainer.lora.rank",
            not t.lora.enabled or r.engine != "vllm",
            "0 with rollout.engine vllm (a LoRA run syncs its adapters to the native or transformers engine)",
        ),
        (
            "trainer.rollout_correction",
            cfg.trainer.rollout_correction == "none" or a.recompute_logprobs or cfg.trainer.ppo_epochs == 1,
            "none with algo.recompute_logprobs false and trainer.ppo_epochs > 1 (pi_old comes from the "
            "update's first forward then)",
        ),
        ("judge.max_tests", j.max_tests is None or j.max_tests >= 1, ">= 1 or null (all)"),
        ("judge.workers", j.workers >= 0, ">= 0 (0: one per CPU)"),
        ("judge.time_scale", j.time_scale > 0, "> 0"),
        ("judge.wall_scale", j.wall_scale > 0, "> 0"),
        ("judge.python_time_scale", j.python_time_scale > 0, "> 0"),
        ("critic.lr", c.lr > 0, "> 0"),
        ("critic.value_clip", c.value_clip is None or c.value_clip >= 0, ">= 0 or null"),
        ("critic.pretrain_steps", c.pretrain_steps >= 0, ">= 0"),
        ("loop.steps", lp.steps >= 1, ">= 1"),
        ("loop.val_every", lp.val_every >= 0, ">= 0 (0: never)"),
        ("loop.val_n", lp.val_n >= 1, ">= 1"),
        ("loop.save_every", lp.save_every >= 0, ">= 0 (0: only at the end)"),
        ("loop.mode", lp.mode in LOOP_MODES, "one of " + ", ".join(LOOP_MODES)),
        ("loop.max_staleness", lp.max_staleness is None or lp.max_staleness >= 0, ">= 0 or null"),
        (
            "loop.max_staleness",
            lp.max_staleness is None or lp.mode == "async",
            "null unless loop.mode is async (sync is 0 and one_step_off 1 by definition)",
        ),
        ("loop.weight_sync_timeout_s", lp.weight_sync_timeout_s > 0, "> 0"),
        ("loop.over_provision", lp.over_provision >= 0, ">= 0 (0: off)"),
        (
            "loop.over_provision",
            lp.over_provision == 0 or r.engine == "native",
            "0 unless rollout.engine is native (the engine that stops mid-generation and goes on later)",
        ),
        ("loop.over_provision", lp.over_provision == 0 or r.turns == 1, "0 with rollout.turns > 1"),
        (
            "loop.over_provision",
            lp.over_provision == 0 or lp.mode == "sync" or lp.staleness_bound >= 2,
            "0 with loop.mode one_step_off, or async with loop.max_staleness < 2 (a sample written a "
            "version behind could never wait a step: every group would be waited for): use loop.mode "
            "sync, or async with loop.max_staleness >= 2",
        ),
        (
            "loop.over_provision",
            lp.over_provision == 0 or not a.dynamic_sampling,
            "0 with algo.dynamic_sampling (which samples more rounds for the groups it drops)",
        ),
        (
            "loop.mode",
            lp.mode == "sync" or not (cfg.resources.colocate and cfg.resources.gpus_per_rank > 0),
            "sync while resources.colocate is true on GPUs (rollout and training take turns there); to "
            "sample while training, set resources.colocate: false (on one GPU, give each a share: "
            "resources.gpus_per_rank: 0.5, resources.gpus_per_rollout_worker: 0.5)",
        ),
        ("resources.weight_transfer", res.weight_transfer in WEIGHT_TRANSFERS, "store or broadcast"),
        (
            "resources.weight_transfer",
            res.weight_transfer == "store" or not (res.colocate and res.gpus_per_rank > 0),
            "store while resources.colocate is true on GPUs (colocated engines take the weights in place, "
            "through CUDA IPC); broadcast is for rollout workers on GPUs of their own",
        ),
        (
            "resources.weight_transfer",
            res.weight_transfer == "store"
            or (res.gpus_per_rank == 0 and res.gpus_per_rollout_worker == 0)
            or (res.gpus_per_rank >= 1 and res.gpus_per_rollout_worker >= 1),
            "store where trainer ranks or rollout workers take a share of a GPU (NCCL cannot broadcast "
            "between two processes on one GPU): broadcast needs resources.gpus_per_rank and "
            "resources.gpus_per_rollout_worker >= 1",
        ),
    ]
    for key, ok, expected in rules:
        if not ok:
            value = attrgetter(key)(cfg)
            raise CodefuError(f"{key} must be {expected}, got {value!r}")
    d.difficulty.check("data.difficulty")
    check_train(d.train, "data.train")


def check_models(cfg: RunConfig) -> None:
    """A CodefuError naming trainer.model (or critic.model) when it names no model found on disk, in the
    Hugging Face cache or on the hub (codefu.models.model_problem): before a run starts anything."""
    from codefu.models import model_problem

    for key, model, gguf_file in [
        ("trainer.model", cfg.trainer.model, cfg.trainer.gguf_file),
        ("critic.model", cfg.critic.model, None),
    ]:
        if model is not None and (problem := model_problem(model, gguf_file)):
            raise CodefuError(f"{key} {model}: {problem}")
