#!/usr/bin/env python3
"""Throwaway verifier for tests/data/codefu_easy_solutions.json.

For every fixture entry: compile (C++17, -O2) or run with python3 both the
correct and the wrong solution, execute all private tests of the problem
(row `index` of train.parquet) under the problem's time limit, compare
stdout to the expected output token by token (exact, except YES/NO which is
case-insensitive) and print a table.  Also reports whether the wrong
solution passes the public examples.

Exit status 0 iff every correct solution passes all private tests and every
wrong solution fails at least one private test.

Plain subprocess, no sandbox: only run it on the trusted fixture.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_FIXTURE = os.path.join(HERE, "..", "tests", "data", "codefu_easy_solutions.json")
DEFAULT_DATA = "/work/shared/data/codefu-easy/train.parquet"


def tokens_match(got: str, want: str) -> bool:
    g, w = got.split(), want.split()
    if len(g) != len(w):
        return False
    for a, b in zip(g, w, strict=True):
        if a == b:
            continue
        if a.upper() in ("YES", "NO") and a.upper() == b.upper():
            continue
        return False
    return True


def build(src: str, lang: str, workdir: str, tag: str):
    """Return argv to run the program, or raise on compile error."""
    if lang == "cpp":
        path = os.path.join(workdir, tag + ".cpp")
        exe = os.path.join(workdir, tag)
        with open(path, "w") as f:
            f.write(src)
        r = subprocess.run(["g++", "-std=c++17", "-O2", "-o", exe, path],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("compile error:\n" + r.stderr[:2000])
        return [exe]
    if lang == "python":
        path = os.path.join(workdir, tag + ".py")
        with open(path, "w") as f:
            f.write(src)
        return [sys.executable, path]
    raise ValueError(lang)


def run_one(argv, inp: str, want: str, tl: float):
    """Return (verdict, seconds). verdict in OK, WA, TLE, RE."""
    t0 = time.perf_counter()
    try:
        r = subprocess.run(argv, input=inp.encode(), capture_output=True, timeout=tl)
    except subprocess.TimeoutExpired:
        return "TLE", time.perf_counter() - t0
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        return "RE", dt
    return ("OK" if tokens_match(r.stdout.decode(errors="replace"), want) else "WA"), dt


def run_suite(argv, tests, tl, jobs):
    with ThreadPoolExecutor(max_workers=jobs) as ex:
        return list(ex.map(lambda io: run_one(argv, io[0], io[1], tl), tests))


def summarize(results):
    n_ok = sum(v == "OK" for v, _ in results)
    bad = sorted({v for v, _ in results if v != "OK"})
    tmax = max((t for _, t in results), default=0.0)
    return n_ok, bad, tmax


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixture", default=DEFAULT_FIXTURE)
    ap.add_argument("--data", default=DEFAULT_DATA)
    # Parallel runs on a small machine inflate wall times and cause spurious
    # TLEs; default to half the cores (1 on a 2-core box).
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    args = ap.parse_args()

    rows = pq.read_table(args.data).to_pylist()
    entries = json.load(open(args.fixture))
    size = os.path.getsize(args.fixture)

    header = (f"{'idx':>4} {'name':<38} {'lang':<6} {'tl':>4} {'#priv':>5} | "
              f"{'correct':<14} {'max_s':>5} | {'wrong(priv)':<18} {'wrong(pub)':<10} | verdict")
    print(header)
    print("-" * len(header))
    all_good = True
    seen = set()
    with tempfile.TemporaryDirectory() as wd:
        for e in entries:
            idx = e["index"]
            gt = rows[idx]["reward_model"]["ground_truth"]
            problems = []
            if gt["name"] != e["name"]:
                problems.append("name mismatch")
            if idx in seen:
                problems.append("duplicate index")
            seen.add(idx)
            tl = gt["time_limit"]["seconds"] + gt["time_limit"]["nanos"] / 1e9
            priv = list(zip(gt["private_tests"]["input"], gt["private_tests"]["output"], strict=True))
            pub = list(zip(gt["public_tests"]["input"], gt["public_tests"]["output"], strict=True))
            try:
                c_argv = build(e["correct"], e["language"], wd, f"c{idx}")
                w_argv = build(e["wrong"], e["language"], wd, f"w{idx}")
            except Exception as ex:  # compile error
                print(f"{idx:>4} {e['name'][:38]:<38} {e['language']:<6} COMPILE FAILURE: {ex}")
                all_good = False
                continue
            c_ok, c_bad, c_t = summarize(run_suite(c_argv, priv, tl, args.jobs))
            w_ok, w_bad, _ = summarize(run_suite(w_argv, priv, tl, args.jobs))
            wp_ok, _, _ = summarize(run_suite(w_argv, pub, tl, args.jobs))
            if c_ok != len(priv):
                problems.append("correct fails " + ",".join(c_bad))
            if w_ok == len(priv):
                problems.append("wrong passes all private")
            good = not problems
            all_good &= good
            c_str = f"{c_ok}/{len(priv)}" + ("" if not c_bad else " " + ",".join(c_bad))
            w_str = f"{w_ok}/{len(priv)}" + ("" if not w_bad else " " + ",".join(w_bad))
            print(f"{idx:>4} {e['name'][:38]:<38} {e['language']:<6} {tl:>4.1f} {len(priv):>5} | "
                  f"{c_str:<14} {c_t:>5.2f} | {w_str:<18} {f'{wp_ok}/{len(pub)}':<10} | "
                  f"{'PASS' if good else 'FAIL: ' + '; '.join(problems)}")
    langs = [e["language"] for e in entries]
    print("-" * len(header))
    print(f"entries={len(entries)} cpp={langs.count('cpp')} python={langs.count('python')} "
          f"fixture_bytes={size}")
    if size >= 200 * 1024:
        print("FAIL: fixture >= 200 KB")
        all_good = False
    print("ALL GOOD" if all_good else "SOME CHECKS FAILED")
    return 0 if all_good else 1


if __name__ == "__main__":
    sys.exit(main())
