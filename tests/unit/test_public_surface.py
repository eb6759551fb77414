"""The public surface (run-config keys, CLI flags) is frozen in tests/data/public_surface.txt: a rename or
removal breaks users' configs and scripts, so it must be a decision (regenerate the file, say why in the
commit), never a side effect."""

import difflib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from public_surface import surface  # noqa: E402


def test_public_surface_is_the_recorded_one():
    recorded = (ROOT / "tests" / "data" / "public_surface.txt").read_text().splitlines()
    now = surface()
    diff = "\n".join(difflib.unified_diff(recorded, now, "recorded", "now", lineterm="", n=0))
    assert now == recorded, (
        "the public config keys or CLI flags changed; if on purpose, record it:\n"
        "  python tools/public_surface.py > tests/data/public_surface.txt\n" + diff
    )


def test_surface_lists_what_users_write():
    now = surface()
    # keys of nested sections, typed; derived keys (set from another) are not the user's to write
    assert "rollout.engine: a string" in now and "judge.sandbox.kind: one of 'bwrap', 'none'" in now
    assert not any(line.startswith(("judge.reward", "trainer.temperature")) for line in now)
    assert "codefu train --config" in now and "codefu eval --baseline" in now
