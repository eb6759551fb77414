"""Writes codefu/data/starter/split.json: the starter set's fixed train / held-out split, by problem.

    python tools/starter/split.py [--heldout-share 0.25] [--seed 0]

A quarter of each level (the ladder's levels 1-4, and the original problems as one more group) is held
out, drawn with a fixed seed: held-out problems are never trained on by `codefu train` with
`data.train: starter`, and `codefu eval --split-file codefu/data/starter/split.json --split heldout`
measures them. Deterministic: rerunning gives the same file. Rerun it only with a reason (it changes what
every earlier held-out number measured) and record why in docs/LOG.md.
"""

from __future__ import annotations

import argparse
import json
import random
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
JSONL = ROOT / "codefu" / "data" / "starter" / "problems.jsonl"
OUT = JSONL.with_name("split.json")


def split(records: list[dict], share: float, seed: int) -> dict[str, list[str]]:
    groups: dict[int, list[str]] = defaultdict(list)
    for r in records:
        groups[int(r.get("extra", {}).get("level", 0))].append(r["name"])
    heldout: set[str] = set()
    for level in sorted(groups):
        names = sorted(groups[level])
        heldout |= set(random.Random(f"{seed}-{level}").sample(names, round(len(names) * share)))
    order = [r["name"] for r in records]
    return {"train": [n for n in order if n not in heldout], "heldout": [n for n in order if n in heldout]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--heldout-share", type=float, default=0.25)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    records = [json.loads(line) for line in JSONL.read_text().splitlines() if line.strip()]
    result = split(records, args.heldout_share, args.seed)
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {OUT}: {len(result['train'])} train, {len(result['heldout'])} held out")


if __name__ == "__main__":
    main()
