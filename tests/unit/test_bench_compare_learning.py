"""bench/compare_learning.py: two learning records' pass@k compared problem by problem (pooled over each
arm's seeds), the Welch interval of their seed means, and records that cannot be compared refused."""

from __future__ import annotations

import json
import sys

import pytest

from helpers.bench_scripts import load_bench_script

compare_learning = load_bench_script("compare_learning")


def learning_record(seeds: list[dict[str, int]], base: dict[str, int], n: int = 4) -> dict:
    """A bench/learning.py record as far as the comparison reads it: accepted counts of n per problem."""
    evals = {"base": {"n": n, "per_problem": base}}
    evals |= {f"seed{i}": {"n": n, "per_problem": counts} for i, counts in enumerate(seeds)}
    params = {"split": "test", "n": n, "problems": len(base), "sampling": dict(SAMPLING)}
    return {"params": params, "evals": evals}


BASE = {"a": 0, "b": 0, "c": 1, "d": 0}
SAMPLING = {"temperature": 0.6, "max_new_tokens": 160, "dtype": "bfloat16"}


def test_an_arm_against_itself_shows_no_difference():
    rec = learning_record([{"a": 2, "b": 1, "c": 1, "d": 0}, {"a": 3, "b": 0, "c": 2, "d": 0}], BASE)
    r = compare_learning.compare(rec, rec, 1)
    assert r["diff"] == 0 and r["holds_zero"] and r["seed_means"]["welch"]["diff"] == 0
    assert r["ci95_problems_only"] == [0.0, 0.0]  # the same pooled rates on every problem
    # the seeds differ, and each arm's are drawn on their own: the interval has width, centred on 0
    low, high = r["ci95"]
    assert low < 0 < high and low == pytest.approx(-high, abs=0.02)


def test_the_difference_is_pooled_over_seeds_per_problem():
    a = learning_record([{"a": 0, "b": 0, "c": 1, "d": 0}] * 3, BASE)
    # B: problem a at 4/4, 2/4 and 0/4 over its seeds (mean 0.5); b at 1/4 and c at 2/4 in every seed
    b = learning_record(
        [
            {"a": 4, "b": 1, "c": 2, "d": 0},
            {"a": 2, "b": 1, "c": 2, "d": 0},
            {"a": 0, "b": 1, "c": 2, "d": 0},
        ],
        BASE,
    )
    r = compare_learning.compare(a, b, 1)
    assert r["per_problem"]["a"] == {"A": 0.0, "B": 0.5} and r["per_problem"]["b"] == {"A": 0.0, "B": 0.25}
    assert r["per_problem"]["c"] == {"A": 0.25, "B": 0.5} and r["per_problem"]["d"] == {"A": 0.0, "B": 0.0}
    assert r["diff"] == pytest.approx((0.5 + 0.25 + 0.25) / 4)
    assert (r["problems_B_better"], r["problems_B_worse"]) == (3, 0)
    low, high = r["ci95"]
    assert 0 < low <= r["diff"] <= high  # three of four problems up, none down: the interval excludes 0
    assert not r["holds_zero"]
    # B's seeds disagree on problem a: resampling them widens the interval beyond the problems' alone
    only_low, only_high = r["ci95_problems_only"]
    assert high - low > only_high - only_low
    # seeds of B: means 0.4375, 0.3125, 0.1875 against A's 0.0625 each
    welch = r["seed_means"]["welch"]
    assert welch["diff"] == pytest.approx(0.3125 - 0.0625)
    # B's seed means have variance 0.015625, A's none: 0.25 -+ t(2) 4.303 * sqrt(0.015625 / 3)
    assert welch["t_ci95"] == pytest.approx([0.25 - 0.31055, 0.25 + 0.31055], abs=1e-4)
    assert welch["df"] == pytest.approx(2.0)  # A has no spread: B's seeds alone, n - 1 = 2


def test_a_worse_arm_is_told_apart_too():
    a = learning_record([{"a": 4, "b": 4, "c": 4, "d": 4}] * 3, BASE)
    b = learning_record([{"a": 0, "b": 1, "c": 0, "d": 0}] * 3, BASE)
    r = compare_learning.compare(a, b, 1)
    assert r["diff"] == pytest.approx(-(1 + 0.75 + 1 + 1) / 4) and r["ci95"][1] < 0 and not r["holds_zero"]


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda r: r["params"].update(n=8), "params.n differs"),
        (lambda r: r["params"].update(split="validation"), "params.split differs"),
        (
            lambda r: r["evals"]["base"]["per_problem"].pop("d"),
            "B's evals.base has other problems than A's base: only there [], missing ['d']",
        ),
        (lambda r: [r["evals"].pop(s) for s in ("seed0", "seed1")], "B holds no trained seed"),
        (lambda r: r["params"]["sampling"].update(temperature=1.0), "params.sampling differs"),
        (lambda r: r["evals"]["seed1"].update(n=8), "B's evals.seed1.n is 8, A's base 4"),
        (lambda r: r["evals"]["seed0"]["per_problem"].pop("c"), "B's evals.seed0 has other problems"),
        (lambda r: r.pop("params"), "B is not a bench/learning.py record"),
    ],
)
def test_records_that_cannot_be_compared_are_refused_naming_why(change, named):
    a = learning_record([{"a": 1, "b": 0, "c": 1, "d": 0}] * 2, BASE)
    b = json.loads(json.dumps(a))
    change(b)
    with pytest.raises(ValueError, match=named.replace("[", r"\[").replace("]", r"\]")):
        compare_learning.check_comparable(a, b)


def test_the_command_writes_a_record_and_says_whether_the_interval_holds_0(tmp_path, monkeypatch, capsys):
    a = learning_record([{"a": 0, "b": 0, "c": 1, "d": 0}] * 3, BASE)
    b = learning_record([{"a": 1, "b": 0, "c": 1, "d": 0}, {"a": 0, "b": 0, "c": 1, "d": 0}], BASE)
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    out = tmp_path / "cmp.json"
    argv = ["bench/compare_learning.py", str(tmp_path / "a.json"), str(tmp_path / "b.json")]
    monkeypatch.setattr(sys, "argv", [*argv, "--k", "1", "--out", str(out)])
    compare_learning.main()
    line = capsys.readouterr().out
    assert line.startswith("pass@1: A 0.062, B 0.094, B - A +0.031 [+0.000, ")  # B >= A on every problem
    assert line.rstrip().endswith("]: the interval holds 0: no difference shown")
    rec = json.loads(out.read_text())
    assert rec["results"]["pass@1"]["holds_zero"]
    assert rec["params"] == {"split": "test", "n": 4, "problems": 4, "sampling": SAMPLING, "ks": [1]}
    assert rec["arms"]["B"]["file"] == str(tmp_path / "b.json") and "commit" in rec
    b["params"]["n"] = 16
    (tmp_path / "b.json").write_text(json.dumps(b))
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exit_:
        compare_learning.main()
    assert exit_.value.code == 2
    assert "cannot be compared: params.n differs: 4 in A, 16 in B" in capsys.readouterr().err
    b["params"]["n"] = 4
    (tmp_path / "b.json").write_text(json.dumps(b))
    for bad, why in [("0,x", "not a comma-separated list"), ("1,5", "between 1 and the records' n (4)")]:
        monkeypatch.setattr(sys, "argv", [*argv, f"--k={bad}"])
        with pytest.raises(SystemExit):
            compare_learning.main()
        err = capsys.readouterr().err
        assert f"--k {bad}: " in err and why in err
    monkeypatch.setattr(sys, "argv", argv)
    (tmp_path / "b.json").write_text("{not json")
    with pytest.raises(SystemExit):
        compare_learning.main()
    assert f"B ({tmp_path / 'b.json'}): Expecting property name" in capsys.readouterr().err


def test_an_arm_better_on_every_problem_and_seed_is_told_apart(tmp_path, monkeypatch, capsys):
    a = learning_record([{"a": 0, "b": 0, "c": 1, "d": 0}] * 3, BASE)
    b = learning_record([{"a": 3, "b": 2, "c": 3, "d": 2}, {"a": 4, "b": 2, "c": 2, "d": 3}] * 2, BASE)
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    argv = ["bench/compare_learning.py", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--k", "1"]
    monkeypatch.setattr(sys, "argv", [*argv, "--out", "-"])
    compare_learning.main()
    line = capsys.readouterr().out
    assert "B - A +0.594" in line and line.rstrip().endswith("the interval excludes 0")
