"""Why near-copies may not cross splits: held-out pass rates of the earlier split by distance to training.

    python tools/starter/near_copy_evidence.py [--out docs/results/<date>-near-copy-evidence.json]

The starter split before 2026-12-06 (a random quarter per level, commit b750983) held out 20 problems. For
each, the token edit distance of its reference solution to the nearest training problem's
(codefu/data/near_duplicates.py); then, in every held-out evaluation recorded under docs/results/, the mean
pass@1 of the held-out problems within 2 tokens of a training problem against that of the others.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench import record  # noqa: E402
from codefu.data.near_duplicates import code_tokens, token_edits  # noqa: E402
from codefu.data.starter import load_starter_records  # noqa: E402

OLD_SPLIT_COMMIT = "b750983"
NEAR = 2  # the review's "within 2 Python tokens"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    record.add_out_argument(ap, "near-copy-evidence")
    args = ap.parse_args()
    head = record.header()
    old = json.loads(
        subprocess.run(
            ["git", "show", f"{OLD_SPLIT_COMMIT}:codefu/data/starter/split.json"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    tokens = {r["name"]: code_tokens(r["solutions"]["python"]) for r in load_starter_records()}
    nearest = {
        h: min((token_edits(tokens[h], tokens[t], 99), t) for t in old["train"]) for h in old["heldout"]
    }
    evals = {}
    for path in sorted((ROOT / "docs" / "results").glob("*heldout-eval.json")):
        result = json.loads(path.read_text())
        rate = {p: c / result["n"] for p, c in result["per_problem"].items()}
        near = [rate[p] for p in rate if nearest[p][0] <= NEAR]
        far = [rate[p] for p in rate if nearest[p][0] > NEAR]
        evals[path.name] = {
            "near_problems": len(near),
            "near_pass@1": statistics.fmean(near),
            "other_problems": len(far),
            "other_pass@1": statistics.fmean(far),
        }
        print(
            f"{path.name:48} within {NEAR}: {statistics.fmean(near):.3f} ({len(near)})  "
            f"others: {statistics.fmean(far):.3f} ({len(far)})"
        )
    out = record.resolve_out(args.out, "near-copy-evidence")
    record.write(
        out,
        head
        | {
            "params": {"old_split_commit": OLD_SPLIT_COMMIT, "near_tokens": NEAR},
            "results": {
                "nearest_training_problem": {
                    h: {"token_edits": d, "problem": t} for h, (d, t) in nearest.items()
                },
                "evals": evals,
            },
        },
    )


if __name__ == "__main__":
    main()
