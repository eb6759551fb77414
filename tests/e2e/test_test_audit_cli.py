"""`codefu audit-tests` on bad material, in the real sandbox: a broken expected output flags the problem
(and --drop-broken leaves it out), a correct solution that does not compile and a problem without
solutions are counted with their reasons, and a reference that loops on a generated input gives no test."""

import json

import pytest

from codefu.cli import main
from codefu.data.loader import load_problems

DOUBLE = "print(2 * int(input()))\n"
TESTS = [{"input": f"{i}\n", "output": f"{2 * i}\n"} for i in (0, 1, 2, 4, 5)]


def problem(name: str, **kw) -> dict:
    return {"name": name, "statement": "Print 2n.", "private_tests": TESTS, "time_limit_s": 1, **kw}


PROBLEMS = [
    # test 1 expects 3, not 2: the correct solution fails it
    problem(
        "broken",
        private_tests=[*TESTS[:1], {"input": "1\n", "output": "3\n"}, *TESTS[2:]],
        solutions={"python": DOUBLE},
    ),
    problem("no-compile", solutions={"cpp": "int main( {", "python": DOUBLE}),
    problem("no-solutions"),
    # the reference loops on 3, the one new input in range: it is rejected, never a test
    problem(
        "loops-on-3",
        solutions={"python": "n = int(input())\nwhile n == 3:\n    pass\nprint(2 * n)\n"},
        wrong_solutions=[{"language": "python", "source": "print(2 * int(input()) + 1)\n"}],
    ),
]


def test_bad_material_is_counted_not_raised(tmp_path):
    dataset, report, out = tmp_path / "p.jsonl", tmp_path / "audit.json", tmp_path / "out.jsonl"
    dataset.write_text("".join(json.dumps(p) + "\n" for p in PROBLEMS))
    argv = ["audit-tests", str(dataset), "--out", str(report), "--augment-tests", "2", "--rounds", "1"]
    assert main([*argv, "--drop-broken", "--dataset-out", str(out)]) == 0
    r = json.loads(report.read_text())
    by_name = {p["name"]: p for p in r["problems"]}
    assert by_name["broken"]["flags"] == [
        "correct solution 0 (python) fails: 1 x WRONG_ANSWER wrong answer (a broken expected output?)"
    ]
    assert by_name["broken"]["correct"][0]["failures"] == {"WRONG_ANSWER": 1}
    assert (
        by_name["no-compile"]["correct"][0]["status"] == "COMPILE_ERROR"
        and by_name["no-compile"]["flags"] == []
    )
    assert by_name["no-solutions"]["flags"] == ["not audited: no solution the judge can run"]
    loops = by_name["loops-on-3"]["augment"]
    assert loops["rejected"] == {"reference: over the cpu limit": 1} and loops["added"] == 0
    s = r["summary"]["jsonl"]
    assert (s["problems"], s["audited"], s["broken"], s["correct_not_compiling"]) == (4, 3, 1, 1)
    assert r["dropped"] == [{"name": "broken", "reason": "a correct solution fails its tests"}]
    assert [p.name for p in load_problems(out)] == ["no-compile", "no-solutions", "loops-on-3"]


@pytest.mark.parametrize(
    "argv, says",
    [
        (["starter", "--augment-tests", "-1"], "--augment-tests -1: must be >= 0"),
        (["starter", "--dataset-out", "x.parquet"], "--dataset-out x.parquet: must be a .jsonl"),
        (["/no/such.jsonl"], "/no/such.jsonl"),
    ],
)
def test_bad_flags_are_refused_before_anything_runs(capsys, argv, says):
    assert main(["audit-tests", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("codefu audit-tests: error: ") and says in err
