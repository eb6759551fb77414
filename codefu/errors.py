"""Errors that carry a message meant for the user (the CLI prints them without a traceback)."""

from __future__ import annotations

from collections.abc import Iterable


class CodefuError(Exception):
    """Bad input or configuration: the message names what is wrong and where."""


class SandboxUnavailable(CodefuError):
    """The sandbox cannot start on this machine; the message says how to fix it."""


def check_flags(args: object, rules: Iterable[tuple[str, bool, str]]) -> None:
    """A command's range rules, checked before it starts anything: the first rule (dest, ok, expected)
    that fails is a CodefuError naming the flag and its value, `--max-tests 0: must be >= 1`. Write `ok`
    so that NaN fails it (`x > 0`, not `not x <= 0`)."""
    for dest, ok, expected in rules:
        if not ok:
            value = getattr(args, dest)
            shown = f"{value:g}" if isinstance(value, float) else value  # -2, not -2.0, for "-2"
            raise CodefuError(f"--{dest.replace('_', '-')} {shown}: must be {expected}")
