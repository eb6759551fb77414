"""Builds codefu/data/starter/problems.jsonl from the definitions in tools/starter/specs/.

    python tools/starter/build.py [--out PATH] [--jobs N]

For every problem: generates the private inputs with the problem's fixed seed, runs the Python
reference to get the expected outputs, checks that the C++ reference prints the same tokens, checks the
size limits, and writes one JSON object per line. Deterministic: rebuilding gives the same file. A
problem with a level (the ladder's 1-4, the middle level 5) gets a last key "extra": {"level": N}; the
others have no "extra".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    JSONL,
    MAX_SET_BYTES,
    MAX_TEST_BYTES,
    MEMORY_LIMIT,
    RATING,
    Runner,
    Spec,
    statement,
    tokens_equal,
)
from specs import ALL  # noqa: E402

REF_TIMEOUT_S = 10.0  # generous: timing is validate.py's business


def build_one(spec: Spec, runner: Runner) -> dict:
    py = runner.prepare("python", spec.python)
    cpp = runner.prepare("cpp", spec.cpp)
    private_inputs = spec.gen(spec.rng())
    if len(private_inputs) < 10:
        raise ValueError(f"{spec.name}: only {len(private_inputs)} private tests")

    def solve(inp: str) -> str:
        r = runner.run(py, inp, REF_TIMEOUT_S)
        if r.returncode != 0:
            raise RuntimeError(f"{spec.name}: python reference failed on {inp[:80]!r}: {r.stderr[-500:]!r}")
        c = runner.run(cpp, inp, REF_TIMEOUT_S)
        if c.returncode != 0:
            raise RuntimeError(f"{spec.name}: C++ reference failed on {inp[:80]!r}: {c.stderr[-500:]!r}")
        if not tokens_equal(r.stdout, c.stdout):
            raise RuntimeError(
                f"{spec.name}: references disagree on {inp[:80]!r}: "
                f"python {r.stdout[:80]!r} vs cpp {c.stdout[:80]!r}"
            )
        out = r.stdout.decode()
        if not out.split():
            raise RuntimeError(f"{spec.name}: empty expected output on {inp[:80]!r}")
        if len(inp.encode()) + len(out.encode()) > MAX_TEST_BYTES:
            raise ValueError(f"{spec.name}: test over {MAX_TEST_BYTES} bytes")
        return out

    public = [{"input": i, "output": solve(i)} for i in spec.public]
    private = [{"input": i, "output": solve(i)} for i in private_inputs]
    seen = {t["input"] for t in public}
    dup = [t["input"][:40] for t in private if t["input"] in seen]
    if dup:
        print(f"warning: {spec.name}: public examples repeated as private tests: {dup}", file=sys.stderr)
    record = {
        "name": spec.name,
        "statement": statement(spec, [(t["input"], t["output"]) for t in public]),
        "rating": RATING,
        "time_limit_s": spec.time_limit_s,
        "memory_limit_bytes": MEMORY_LIMIT,
        "public_tests": public,
        "private_tests": private,
        "solutions": {"cpp": spec.cpp, "python": spec.python},
        "wrong_solutions": [
            {"language": w.language, "source": w.source, "flaw": w.flaw} for w in spec.wrong
        ],
    }
    if spec.level is not None:
        record["extra"] = {"level": spec.level}
    return record


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=JSONL)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()

    names = [s.name for s in ALL]
    if len(set(names)) != len(names):
        raise SystemExit(f"duplicate problem names: {sorted(n for n in names if names.count(n) > 1)}")
    prefixes = sorted((a, b) for a in names for b in names if a != b and b.startswith(a))
    if prefixes:
        raise SystemExit(f"a problem name is a prefix of another: {prefixes}")
    runner = Runner()
    try:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            records = list(pool.map(lambda s: build_one(s, runner), ALL))
    finally:
        runner.close()
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    size = len(text.encode())
    if size > MAX_SET_BYTES:
        raise SystemExit(f"problem set is {size} bytes, over the {MAX_SET_BYTES} limit")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    n_tests = sum(len(r["public_tests"]) + len(r["private_tests"]) for r in records)
    print(f"wrote {len(records)} problems, {n_tests} tests, {size / 1024:.0f} KiB -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
