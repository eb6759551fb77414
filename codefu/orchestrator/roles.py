"""The Ray actors of a run, placed by the plan, behind a handful of verbs the loop calls.

Every call goes to all ranks of a group (FSDP collectives need every rank) and reads rank 0's answer.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any, Protocol

import ray

from codefu.judge.pool import PoolConfig, RayJudgePool
from codefu.judge.rewards import compute_reward
from codefu.orchestrator.config import RunConfig
from codefu.orchestrator.plan import check_plan, make_plan
from codefu.rollout.actor import make_rollout_actor
from codefu.rollout.hf_engine import EngineConfig
from codefu.rollout.types import Completion, SamplingParams
from codefu.trainer.actor import make_trainer_group
from codefu.trainer.batch import Batch
from codefu.types import Problem, Status


@dataclass
class Score:
    reward: float | None  # None: the judge failed (SANDBOX_ERROR); left out of baselines and the loss
    passed: bool
    status: str


class Scorer(Protocol):
    def score(self, problems: list[Problem], responses: list[str]) -> list[Score]: ...

    def close(self) -> None: ...


class JudgeScorer:
    """Rewards from the sandboxed judge, spread over the cluster's CPUs."""

    def __init__(self, cfg: RunConfig):
        self.reward = cfg.algo.reward
        judge = replace(cfg.judge, reward=cfg.algo.reward)
        res = cfg.resources
        self.pool = RayJudgePool(judge, PoolConfig(cpus_per_node=res.judge_cpus, node_group=res.judge_group))

    def score(self, problems: list[Problem], responses: list[str]) -> list[Score]:
        verdicts = dict(self.pool.judge_many(zip(problems, responses, strict=True)))
        out = []
        for i in range(len(responses)):
            v = verdicts[i]
            out.append(Score(compute_reward(v, self.reward), v.status is Status.ACCEPTED, v.status.value))
        return out

    def close(self) -> None:
        self.pool.close()


class Roles:
    """Trainer ranks, the reference policy (only with a KL term), the rollout engine."""

    def __init__(self, cfg: RunConfig):
        kl = cfg.trainer.kl_coef > 0
        plan = make_plan(cfg.resources, kl_enabled=kl)
        check_plan(plan, ray.cluster_resources())
        # one temperature for sampling and for the trainer's log-probs (the rollout's convention)
        tcfg = replace(cfg.trainer, temperature=cfg.rollout.temperature)
        trainer, rollout = plan.need("trainer"), plan.need("rollout")
        assert trainer is not None and rollout is not None
        # On CPU the phases take turns, so each role may use every core while it runs.
        env = {"runtime_env": {"env_vars": {"OMP_NUM_THREADS": str(os.cpu_count() or 1)}}}
        options = env if plan.gpus == 0 else {}
        self.trainer = make_trainer_group(
            tcfg, trainer.count, num_gpus=trainer.gpus, num_cpus=trainer.cpus, **options
        )
        self.reference = None
        if kl:
            ref = plan.need("reference")
            assert ref is not None
            self.reference = make_trainer_group(
                tcfg, 1, frozen=True, num_gpus=ref.gpus, num_cpus=ref.cpus, **options
            )
        engine = EngineConfig(
            model=cfg.trainer.model,
            gguf_file=cfg.trainer.gguf_file,
            dtype=cfg.rollout.dtype,
            device=cfg.rollout.device,
            batch_size=cfg.rollout.batch_size,
        )
        self.rollout = make_rollout_actor(engine, num_cpus=rollout.cpus, num_gpus=rollout.gpus, **options)

    def generate(self, prompts: list[list[int]], sampling: SamplingParams) -> list[Completion]:
        return ray.get(self.rollout.generate.remote(prompts, sampling))

    def logprobs(self, batch_ref: Any, reference: bool = False) -> Any:
        group = self.reference if reference else self.trainer
        assert group is not None
        return ray.get([a.compute_logprobs.remote(batch_ref) for a in group])[0]

    def update(self, batch: Batch) -> dict[str, float]:
        ref = ray.put(batch)
        return ray.get([a.update.remote(ref) for a in self.trainer])[0]

    def sync_weights(self) -> None:
        state = ray.get([a.state_dict_for_sync.remote() for a in self.trainer])[0]
        ray.get(self.rollout.load_weights.remote(state))

    def save(self, root: str, step: int, extra_state: dict[str, Any]) -> str:
        return ray.get([a.save.remote(root, extra_state, step) for a in self.trainer])[0]

    def load(self, path: str) -> dict[str, Any]:
        return ray.get([a.load.remote(path) for a in self.trainer])[0]

    def export_hf(self, path: str) -> str:
        return ray.get([a.export_hf.remote(path) for a in self.trainer])[0]

    def close(self) -> None:
        for a in [*self.trainer, *(self.reference or []), self.rollout]:
            ray.kill(a)
