"""Print codefu's public surface: every run-config key with its type, then every CLI flag.

    python tools/public_surface.py > tests/data/public_surface.txt

tests/unit/test_public_surface.py compares the two, so that renaming or removing a key or a flag (what
users' configs and scripts depend on) is a decision recorded in that file, not an accident.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from codefu.cli import cli_flags  # noqa: E402
from codefu.config import config_keys  # noqa: E402
from codefu.orchestrator.config import RunConfig  # noqa: E402


def surface() -> list[str]:
    return ["# run config keys (codefu train --config FILE, key.sub=value)", *config_keys(RunConfig),
            "# command-line flags", *cli_flags()]


if __name__ == "__main__":
    print("\n".join(surface()))
