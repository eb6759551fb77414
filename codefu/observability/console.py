"""The one fixed-width console line per step.

    step  12/100 | reward +0.412 | pass  37.5% | AC  38 WA  25 TL   6 RE  12 CE   6 NC  12 ot   0
    | len   412 | kl 1.20e-03 | ent 0.853 | clip 0.021
    | time  48.2s gen  30.1 judge     - tail   0.4 train   7.6 sync   0.7

(one line; wrapped here). Every field has a fixed width, so the columns of successive lines align; a
metric the step does not have prints as "-" in its field. The verdict percentages are of all the step's
samples; "ot" is the other verdicts together (ML, OL and SE). With the judge overlapping decoding
(loop.overlap_judge) its time is "tail", what it adds after the last token; otherwise "judge". The
keys read are the constants in `codefu.observability.metrics`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from codefu.observability import metrics as M
from codefu.observability.sinks import SinkBase

#: The verdict codes that get their own column; the rest are summed into "ot".
CONSOLE_VERDICTS: tuple[str, ...] = ("AC", "WA", "TL", "RE", "CE", "NC")
MISSING = "-"


@dataclass(frozen=True)
class Field:
    label: str
    key: str
    fmt: str  # format spec for a present value
    width: int

    def render(self, metrics: Mapping[str, float]) -> str:
        value = metrics.get(self.key)
        text = MISSING if value is None else format(float(value), self.fmt)
        body = f"{text:>{self.width}}"
        return f"{self.label} {body}" if self.label else body


_FIELDS: tuple[Field, ...] = (
    Field("reward", M.REWARD_MEAN, "+.3f", 6),
    Field("pass", M.PASS_RATE, ".1%", 6),
)
_SHAPE: tuple[Field, ...] = (
    Field("len", M.RESPONSE_LEN, ".0f", 5),
    Field("kl", M.KL, ".2e", 8),
    Field("ent", M.ENTROPY, ".3f", 5),
    Field("clip", M.CLIP_FRAC, ".3f", 5),
)
_TIMES: tuple[Field, ...] = (
    Field("gen", M.TIME_GENERATE, ".1f", 5),
    Field("judge", M.TIME_JUDGE, ".1f", 5),
    Field("tail", M.TIME_JUDGE_TAIL, ".1f", 5),
    Field("train", M.TIME_TRAIN, ".1f", 5),
    Field("sync", M.TIME_SYNC, ".1f", 5),
)


def _verdict_mix(metrics: Mapping[str, float]) -> str:
    """ "AC 38 WA 25 ... ot  0": whole percentages of the step's samples, "-" where unknown."""
    parts = []
    for code in CONSOLE_VERDICTS:
        value = metrics.get(M.VERDICT_PREFIX + code)
        parts.append(f"{code} {MISSING if value is None else format(100 * float(value), '.0f'):>3}")
    others = [
        metrics[M.VERDICT_PREFIX + c]
        for c in M.VERDICT_CODES.values()
        if c not in CONSOLE_VERDICTS and M.VERDICT_PREFIX + c in metrics
    ]
    other = format(100 * math.fsum(others), ".0f") if others else MISSING
    parts.append(f"ot {other:>3}")
    return " ".join(parts)


def format_step_line(step: int, metrics: Mapping[str, float], total_steps: int | None = None) -> str:
    """The console line of one step (see the module docstring). Its width depends only on the number of
    digits of `total_steps` (of `step` beyond 99999 without it), never on which metrics are present
    (unless a value outgrows its field, e.g. a step of more than 99999 s)."""
    if total_steps is not None:
        width = len(str(total_steps))
        head = f"step {step:>{width}}/{total_steps}"
    else:
        head = f"step {step:>5}"
    time_total = Field("time", M.TIME_STEP, ".1f", 5).render(metrics)
    time_total += "s" if M.TIME_STEP in metrics else " "
    sections = [
        head,
        " | ".join(f.render(metrics) for f in _FIELDS),
        _verdict_mix(metrics),
        " | ".join(f.render(metrics) for f in _SHAPE),
        " ".join([time_total, *(f.render(metrics) for f in _TIMES)]),
    ]
    return " | ".join(sections)


class ConsoleSink(SinkBase):
    """Prints `format_step_line` for every step through `out` (default `print`; pass `tqdm.write` to keep
    a progress bar intact)."""

    def __init__(self, total_steps: int | None = None, out: Callable[[str], object] = print) -> None:
        self.total_steps = total_steps
        self.out = out

    def write(self, step: int, metrics: Mapping[str, float]) -> None:
        self.out(format_step_line(step, metrics, self.total_steps))

    def close(self) -> None:
        pass
