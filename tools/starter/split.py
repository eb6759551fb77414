"""Writes codefu/data/starter/split.json: the starter set's train / validation / test split, by problem.

    python tools/starter/split.py [--seed 0] [--pairs]

Near-copies never cross splits: problems whose reference solutions are a few tokens apart or whose
statements differ in a word or two (codefu/data/near_duplicates.py) form a family, and a family goes
whole to one split. Families of more than MAX_EVAL_FAMILY problems (templates such as "read n, print an
expression of n") train: in an evaluation split one idea would count many times. The rest are dealt per
level (the ladder's levels, the middle level, and the original problems as one more group) so that each
split gets its share of every level: a quarter test, a sixth validation, the rest train.

- train: what `codefu train` with `data.train: starter` trains on.
- validation: what the loop evaluates every `loop.val_every` steps, and what any tuning reads.
- test: read only for reported results (`codefu eval --split-file codefu/data/starter/split.json
  --split test`), never for choosing settings.

Deterministic: rerunning gives the same file. Rerun it when problems are added (tests/unit/
test_starter_split.py fails until then) and record in docs/LOG.md what moved; `--pairs` lists every
near-copy pair with its distances.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from codefu.data.near_duplicates import NearDuplicate, families, near_duplicate_pairs  # noqa: E402

JSONL = ROOT / "codefu" / "data" / "starter" / "problems.jsonl"
OUT = JSONL.with_name("split.json")
SHARES = {"test": 0.25, "validation": 1 / 6}  # train takes the rest
MAX_EVAL_FAMILY = 3


def level(record: dict) -> int:
    """The ladder or middle level; 0 for the original problems, which have none."""
    return int(record.get("extra", {}).get("level", 0))


def pairs_of(records: list[dict]) -> list[NearDuplicate]:
    """The near-copy pairs of the starter records, by their Python references and statements."""
    return near_duplicate_pairs(
        {r["name"]: r["solutions"]["python"] for r in records}, {r["name"]: r["statement"] for r in records}
    )


def split(records: list[dict], seed: int) -> dict[str, list[str]]:
    names = [r["name"] for r in records]
    pairs = pairs_of(records)
    levels = {r["name"]: level(r) for r in records}
    by_level: dict[int, list[list[str]]] = defaultdict(list)
    for family in families(names, pairs):
        by_level[min(levels[n] for n in family)].append(family)
    where: dict[str, str] = {}
    for lv in sorted(by_level):
        fams = by_level[lv]
        total = sum(len(f) for f in fams)
        targets = {part: share * total for part, share in SHARES.items()}
        counts = dict.fromkeys(SHARES, 0)
        order = sorted(fams, key=lambda f: hashlib.sha256(f"{seed}-{f[0]}".encode()).hexdigest())
        for family in order:
            part = "train"
            if len(family) <= MAX_EVAL_FAMILY:
                short = {
                    p: targets[p] - counts[p] for p in SHARES if counts[p] + len(family) <= targets[p] + 0.5
                }
                if short:
                    part = max(short, key=lambda p: short[p])
                    counts[part] += len(family)
            where.update(dict.fromkeys(family, part))
    return {part: [n for n in names if where[n] == part] for part in ("train", "validation", "test")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pairs", action="store_true", help="print every near-copy pair and write nothing")
    args = ap.parse_args()
    records = [json.loads(line) for line in JSONL.read_text().splitlines() if line.strip()]
    if args.pairs:
        for p in pairs_of(records):
            print(f"{p.a:24} {p.b:24} token edits {p.token_edits}  statement ratio {p.statement_ratio}")
        return
    result = split(records, args.seed)
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {OUT}: " + ", ".join(f"{len(v)} {k}" for k, v in result.items()))


if __name__ == "__main__":
    main()
