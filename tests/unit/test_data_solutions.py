"""Known-correct and known-incorrect programs (codefu.data.solutions): read in every dataset's shape, and
kept by `prepare --keep-solutions` in extra_info, capped, so the test audit can read a prepared file."""

from codefu.data.config import PrepareConfig
from codefu.data.loader import load_problems
from codefu.data.prepare import prepare
from codefu.data.solutions import MAX_SOLUTION_CHARS, kept_solutions, parse_solutions, solutions_of
from codefu.data.synthetic import cc_row, write_cc_parquet
from codefu.types import Problem


def test_solutions_in_every_shape():
    starter, left = parse_solutions({"cpp": "int main(){}", "python": "print(1)"})
    assert [s.language for s in starter] == ["cpp", "python"] and left == 0
    # CodeContests: 1 Python 2 and 4 Java are left out (the judge runs C++ and Python 3)
    cc, left = parse_solutions({"language": [1, 2, 3, 4], "solution": ["a", "b", "c", "d"]})
    assert [(s.language, s.source) for s in cc] == [("cpp", "b"), ("python", "c")] and left == 2
    listed, left = parse_solutions([{"language": "cpp", "source": "x", "flaw": "int overflow"}, "junk"])
    assert listed[0].flaw == "int overflow" and left == 1
    assert parse_solutions('[{"language": "python", "solution": "print(2)"}]')[0][0].source == "print(2)"
    assert parse_solutions("not json") == ([], 1) and parse_solutions(None) == ([], 0)
    p = Problem("p", "", [], [], extra={"solutions": {"cpp": "a"}, "incorrect_solutions": {"python": "b"}})
    correct, wrong, left = solutions_of(p)
    assert [s.source for s in correct] == ["a"] and [s.source for s in wrong] == ["b"] and left == 0


def test_kept_solutions_are_capped():
    long = "x" * (MAX_SOLUTION_CHARS + 1)
    p = Problem(
        "p", "", [], [], extra={"solutions": {"language": [2, 2, 3, 2], "solution": ["a", long, "b", "c"]}}
    )
    assert kept_solutions(p, 2) == {
        "solutions": [{"language": "cpp", "source": "a"}, {"language": "python", "source": "b"}]
    }
    assert kept_solutions(p, 0) == {}


def test_prepare_keeps_solutions_for_the_audit(tmp_path):
    right = {"language": [2, 3], "solution": ["int main(){}", "print(1)"]}
    wrong = {"language": [1, 3], "solution": ["print 1", "print(2)"]}
    rows = [cc_row(i, solutions=right, incorrect_solutions=wrong) for i in range(3)]
    write_cc_parquet(tmp_path / "cc" / "train-00000-of-00001.parquet", rows)
    for keep in (0, 1):
        out = tmp_path / f"out{keep}"
        prepare(PrepareConfig(input=str(tmp_path / "cc"), out=str(out), keep_solutions=keep), progress=False)
        problems = load_problems(out)
        assert len(problems) == 3
        correct, incorrect, _ = solutions_of(problems[0])
        if keep == 0:
            assert (correct, incorrect) == ([], [])
        else:
            assert [(s.language, s.source) for s in correct] == [("cpp", "int main(){}")]
            assert [(s.language, s.source) for s in incorrect] == [("python", "print(2)")]
