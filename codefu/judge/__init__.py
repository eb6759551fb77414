"""The judge: extract a program from a model response, compile it once, run hidden tests in a sandbox,
and turn the verdict into a reward."""

from codefu.judge.judge import Judge, JudgeConfig
from codefu.judge.rewards import REWARDS, compute_reward

__all__ = ["Judge", "JudgeConfig", "REWARDS", "compute_reward"]
