"""Reward shaping terms: pure functions that return a term to add to a sample's reward.

Formulas and sources are in docs/algo.md, "Overlong penalty".
"""

from __future__ import annotations

import math
import operator

import torch
from torch import Tensor


def _as_int(name: str, x: object) -> int:
    if isinstance(x, bool):
        raise ValueError(f"{name} must be an integer number of tokens, got {x!r}")
    try:
        return operator.index(x)  # int, numpy and 0-dim torch integers; not 20480.0
    except TypeError:
        raise ValueError(f"{name} must be an integer number of tokens, got {x!r}") from None


def overlong_penalty(lengths: Tensor, max_len: int, cache_len: int, factor: float) -> Tensor:
    """DAPO's soft overlong punishment (Yu et al. 2025, arXiv:2503.14476, eq. 13), times `factor`.

    With L a response's length and s = max_len - cache_len (the length that is free):
        0                                  L <= s
        (s - L) / cache_len * factor       s < L <= max_len          (linear from 0 down to -factor)
        -factor                            L > max_len
    With cache_len = 0 the middle case is empty: 0 up to max_len, then -factor (no division).
    verl's DAPO reward manager computes the same on [0, max_len] (it never sees L > max_len, its responses
    being cut there) and divides by zero for cache_len = 0.

    Args:
        lengths: response lengths in tokens, any shape, integer or float, each >= 0 (e.g. a list).
        max_len: the length from which the full penalty applies, >= 1 (DAPO: the generation limit).
        cache_len: the width of the linear ramp below max_len, 0 <= cache_len <= max_len.
        factor: the full penalty, finite and >= 0 (DAPO: 1.0).

    Returns:
        A tensor shaped like `lengths` of values in [-factor, 0], in the lengths' float dtype (float32 for
        integer lengths), computed in float64: a term to ADD to the reward.
    """
    max_len, cache_len = _as_int("max_len", max_len), _as_int("cache_len", cache_len)
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    if not 0 <= cache_len <= max_len:
        raise ValueError(f"cache_len must be in [0, max_len = {max_len}], got {cache_len}")
    if not (factor >= 0.0 and math.isfinite(factor)):  # also rejects NaN
        raise ValueError(f"factor must be a finite number >= 0, got {factor!r}")
    lengths = torch.as_tensor(lengths)
    if lengths.dtype == torch.bool or lengths.is_complex():
        raise ValueError(f"lengths must be integer or float, got {lengths.dtype}")
    out_dtype = lengths.dtype if lengths.is_floating_point() else torch.float32
    length = lengths.double()
    if not (length >= 0).all():  # also catches NaN
        raise ValueError("lengths must all be >= 0 (and not NaN)")
    free = max_len - cache_len
    ramp = (free - length) / max(cache_len, 1) * factor  # only used where free < L <= max_len: cache_len > 0
    out = torch.where(length <= free, 0.0, torch.where(length <= max_len, ramp, -factor))
    return out.to(out_dtype)
