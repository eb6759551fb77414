"""codefu: reinforcement learning for code LLMs, rewarded by compiling and running their programs."""

__version__ = "0.1.0"
