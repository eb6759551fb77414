"""Problems in: dataset sources, filters, difficulty buckets, prompt templates, the loader (docs/data.md)."""

from codefu.data.config import Bucket, PrepareConfig
from codefu.data.loader import ProblemLoader, load_problems

__all__ = ["Bucket", "PrepareConfig", "ProblemLoader", "load_problems"]
