"""All starter-problem definitions, in the order they are written to problems.jsonl."""

from __future__ import annotations

from common import Spec

from specs import ladder, lists, middle, numbers, strings

ALL: list[Spec] = [*numbers.SPECS, *strings.SPECS, *lists.SPECS, *ladder.SPECS, *middle.SPECS]
