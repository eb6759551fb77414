"""TACO, APPS, LiveCodeBench and open-r1/codeforces on fixture files in each dataset's published schema and
layout (tests/data/sources/, written by its build.py; each row's comment there says what it is for), and
`prepare` reading several sources in one run: counts per source, details with an example each, the date
cut, duplicates across sources, and checkers and function-call problems carried through to the parquet."""

from __future__ import annotations

import base64
import json
import pickle
import zlib
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from codefu.cli import build_parser, main
from codefu.data.config import PrepareConfig, SourceInput, pair_sources
from codefu.data.loader import load_problems
from codefu.data.prepare import TABLE_SOURCES, prepare
from codefu.data.raw import Malformed, RawProblem
from codefu.data.sources import livecodebench as lcb
from codefu.errors import CodefuError
from codefu.types import CheckerSpec, FunctionSpec
from codefu.types import TestCase as Case

FIX = Path(__file__).resolve().parents[1] / "data" / "sources"
SUM = "Given two integers a and b, print their sum."  # how TACO's train row 5 and APPS' train/0 begin
MIB = 1 << 20


def read(name: str, spec: Path | None = None) -> tuple[dict[str, RawProblem], set[tuple]]:
    """A source's good rows by source id, and its malformed rows as (file name, row, column)."""
    items = list(TABLE_SOURCES[name](str(spec or FIX / name)))
    good = {i.source_id: i for i in items if isinstance(i, RawProblem)}
    bad = {(Path(i.file).name, i.row, i.column) for i in items if isinstance(i, Malformed)}
    assert len(good) + len(bad) == len(items)
    return good, bad


def run(tmp_path: Path, *sources: tuple[str, str | Path], **kw) -> tuple:
    (first, spec), *more = sources
    cfg = PrepareConfig(source=first, input=str(spec), out=str(tmp_path / "out"), keep_unrated=True,
                        more_sources=tuple(SourceInput(s, str(i)) for s, i in more), **kw)  # fmt: skip
    return prepare(cfg, progress=False), tmp_path / "out"


def written(out: Path) -> list[dict]:
    return [row for f in sorted(out.rglob("*.parquet")) for row in pq.read_table(f).to_pylist()]


def test_taco_rows_from_its_arrow_and_parquet_files():
    good, bad = read("taco")
    bargain = good["https://codeforces.com/problemset/problem/1422/C"]
    p = bargain.problem
    assert bargain.split == "train" and p.source == "taco" and p.public_tests == []
    assert p.private_tests == [Case("107\n", "42\n"), Case("100500100500\n", "428101984\n")]
    assert (p.time_limit_s, p.memory_limit_bytes, p.rating) == (1.0, 256 * MIB, 1600)
    assert bargain.difficulty == "MEDIUM_HARD" and bargain.date == "2020-10-04"
    inversions = good["Inversions"]
    assert inversions.split == "test" and inversions.problem.rating == 2000
    assert (inversions.problem.time_limit_s, inversions.problem.memory_limit_bytes) == (2.0, 512 * MIB)
    lines = good["Lines"].problem  # UNKNOWN_DIFFICULTY, no limits, tests as lists of lines
    assert lines.rating is None and (lines.time_limit_s, lines.memory_limit_bytes) == (2.0, 256 * MIB)
    assert lines.private_tests == [Case("3\n1 2 3", "1\n2\n3")] and good["Lines"].date == ""
    assert (good["Sum"].problem.time_limit_s, good["Sum"].problem.memory_limit_bytes) == (0.5, 64 * MIB)
    add = good["https://www.codewars.com/kata/add"].problem  # a function call: JSON arguments in, value out
    assert add.function == FunctionSpec("add", "def add(a, b):\n\t", unwrap_singleton=True)
    assert (
        add.private_tests == [Case("[1, 2]", "3"), Case("[3, 4]", "7")] and add.preferred_language == "python"
    )
    assert [r.problem.function is not None for r in good.values()].count(True) == 2  # and test's maxProfit
    assert all(r.unsupported is None for r in good.values())
    assert bad == {
        ("test-00000-of-00001.parquet", 2, "difficulty"),
        ("data-00000-of-00001.arrow", 2, "input_output"),
        ("data-00000-of-00001.arrow", 3, "time_limit"),
    }


def test_taco_arrow_in_file_format_reads_the_same(tmp_path):
    stream = FIX / "taco" / "train" / "data-00000-of-00001.arrow"
    with pa.memory_map(str(stream)) as f:
        table = pa.ipc.open_stream(f).read_all()
    path = tmp_path / "train" / "data-00000-of-00001.arrow"
    path.parent.mkdir()
    with pa.OSFile(str(path), "wb") as f, pa.ipc.new_file(f, table.schema) as w:
        w.write_table(table)
    assert read("taco", path)[0].keys() == read("taco", stream)[0].keys()


def test_apps_rows_and_skips():
    good, bad = read("apps")
    first = good["train/0"]
    assert first.problem.private_tests == [Case("1 2\n", "3\n")] and first.problem.rating == 800
    assert first.difficulty == "introductory" and first.problem.name == "apps-train-0"
    assert (first.problem.time_limit_s, first.problem.memory_limit_bytes) == (2.0, 256 * MIB)
    assert good["test/0"].split == "test" and good["test/0"].problem.rating == 1400  # ids restart per split
    assert good["train/5"].problem.rating == 2000
    profit = good["train/1"].problem
    assert profit.function is not None and profit.function.entry_point == "maxProfit"
    assert profit.function.starter_code.startswith("class Solution:") and profit.function.unwrap_singleton
    assert profit.private_tests == [Case("[[7, 1, 5, 3, 6, 4]]", "5")]  # one argument: the list
    assert good["train/2"].problem.private_tests == []  # input_output "": no_private_tests later
    assert bad == {("test.jsonl", 2, "question"), ("train.jsonl", 4, "input_output"), ("train.jsonl", 5, "-")}


def test_livecodebench_plain_and_compressed_private_tests_decode():
    good, bad = read("livecodebench")
    plain = good["abc301_a"]
    assert plain.problem.private_tests == [Case("3\n1 2 3\n", "6\n")]
    assert plain.problem.public_tests == [Case("2\n1 2\n", "3\n")]
    assert plain.date == "2023-05-13" and plain.split == "test" and plain.problem.rating == 800
    assert good["1873_A"].problem.private_tests == [Case("2\n4 5\n", "9\n"), Case("1\n0\n", "0\n")]
    assert good["abc330_b"].problem.private_tests == [Case("2\n10 20\n", "30\n")]
    assert good["abc330_b"].problem.rating == 2000 and good["abc330_b"].difficulty == "hard"
    functional = good["2848"].problem  # one JSON argument per input line -> a JSON array of arguments
    assert functional.function == FunctionSpec("numberOfPoints", "") and good["2848"].unsupported is None
    assert functional.public_tests == [Case("[[[3, 6], [1, 5]]]", "7")]
    assert functional.private_tests == [Case("[[[1, 3]]]", "3")]
    assert bad == {
        ("test2.jsonl", 2, "private_test_cases"),  # base64, but not zlib
        ("test2.jsonl", 3, "contest_date"),
        ("test2.jsonl", 4, "private_test_cases"),  # a pickle that needs a global
    }


def test_private_test_decoding_refuses_objects_bombs_and_truncation(monkeypatch):
    tests = [{"input": "1\n", "output": "1\n", "testtype": "stdin"}]
    packed = zlib.compress(pickle.dumps(json.dumps(tests)))
    assert lcb.decode_private_tests(base64.b64encode(packed).decode()) == tests
    assert lcb.decode_private_tests(json.dumps(tests)) == tests
    with pytest.raises(ValueError, match="refusing builtins.print"):
        lcb.decode_private_tests(base64.b64encode(zlib.compress(pickle.dumps(print))).decode())
    with pytest.raises(ValueError, match="truncated"):
        lcb.decode_private_tests(base64.b64encode(packed[:-4]).decode())
    monkeypatch.setattr(lcb, "MAX_DECODED_BYTES", 10)
    with pytest.raises(ValueError, match="more than 10 bytes"):
        lcb.decode_private_tests(base64.b64encode(packed).decode())


def test_codeforces_checker_limits_and_skips():
    good, bad = read("codeforces")
    a = good["1000/A"]
    p = a.problem
    assert (p.time_limit_s, p.memory_limit_bytes, p.rating) == (1.0, 256 * MIB, 1200)
    assert p.name == "1000/A. Triangular" and p.checker is None and a.date == "2020-09-13"
    assert p.public_tests == [Case("3\n", "6\n")]
    assert p.private_tests == [Case("3\n", "6\n"), Case("4\n", "10\n")]
    assert "\n\nInput\n\nThe only line contains" in p.statement
    assert "\n\nExample\n\nInput\n\n3\n\nOutput\n\n6" in p.statement
    pair = good["1001/B"].problem
    assert pair.checker is not None and (pair.checker.kind, pair.checker.language) == ("program", "cpp")
    assert "registerTestlibCmd" in pair.checker.source and pair.memory_limit_bytes == 512 * MIB
    assert good["1002/C"].unsupported.kind == "interactive problem"
    assert good["1003/D"].unsupported.kind == "not executable"
    assert good["1004/E"].input_file == "input.txt"  # input_mode "file": dropped as file_io
    assert good["1006/G"].problem.rating is None
    assert good["2000/A"].split == "test" and good["2000/A"].date == "2024-05-29"
    assert bad == {("train-00000-of-00001.parquet", 5, "examples")}


def test_several_sources_in_one_run_count_per_source_and_nothing_is_lost(tmp_path):
    names = ("taco", "apps", "livecodebench", "codeforces")
    report, out = run(tmp_path, *((name, FIX / name) for name in names))
    assert report.sources == {
        "taco": Counter(rows_read=9, kept=4, malformed=3, unsupported=2),
        "apps": Counter(rows_read=8, kept=2, malformed=3, unsupported=1, no_private_tests=1, duplicate=1),
        "livecodebench": Counter(rows_read=7, kept=3, malformed=3, unsupported=1),
        "codeforces": Counter(rows_read=9, kept=4, unsupported=2, file_io=1, malformed=1, multiple_answers=1),
    }
    assert report.rows_read == 33 and report.rows_read == report.kept + sum(report.dropped.values())
    assert report.details[("apps", "duplicate", "kept from taco")] == 1
    assert report.details[("taco", "unsupported", "function-call problem")] == 2
    assert report.details[("livecodebench", "malformed", "column 'private_test_cases'")] == 2
    example = report.examples[("taco", "unsupported", "function-call problem")]  # the default run is C++
    assert "fn_name=maxProfit" in example and "--language python" in example
    assert report.details[("livecodebench", "unsupported", "function-call problem")] == 1
    table = report.table()
    assert "livecodebench" in table.splitlines()[0] and "kept from taco" in table
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["sources"]["apps"]["dropped"] == {
        "malformed": 3, "unsupported": 1, "no_private_tests": 1, "duplicate": 1
    }  # fmt: skip
    assert {s["source"] for s in manifest["sources"]} == set(names)
    rows = written(out)
    assert Counter(r["data_source"] for r in rows) == dict(zip(names, (4, 2, 3, 4), strict=True))
    info = {r["reward_model"]["ground_truth"]["name"]: r["extra_info"] for r in rows}
    assert info["Sum"]["difficulty"] == "EASY" and info["Sum"]["date"] == "2013-02-16"
    assert info["Problem 1873_A"]["date"] == "2023-09-21" and info["apps-train-5"]["date"] is None


def test_a_generated_checker_round_trips_through_the_parquet(tmp_path):
    _, out = run(tmp_path, ("codeforces", FIX / "codeforces"))
    loaded = {p.name: p for p in load_problems(out)}
    source = read("codeforces")[0]["1001/B"].problem.checker.source
    assert loaded["1001/B. Pair"].checker == CheckerSpec(kind="program", source=source, language="cpp")
    assert loaded["1000/A. Triangular"].checker is None and loaded["1001/B. Pair"].source == "codeforces"
    assert loaded["2000/A. Cube"].extra["date"] == "2024-05-29"


def test_function_call_problems_are_kept_for_python_with_a_function_prompt(tmp_path):
    sources = ("taco", FIX / "taco"), ("apps", FIX / "apps"), ("livecodebench", FIX / "livecodebench")
    report, out = run(tmp_path, *sources, language="python")
    assert all(report.sources[name]["unsupported"] == 0 for name in ("taco", "apps", "livecodebench"))
    loaded = {p.name: p for p in load_problems(out)}
    functions = {name: p for name, p in loaded.items() if p.function is not None}
    assert sorted(functions) == ["Problem 2848", "apps-train-1", "https://www.codewars.com/kata/add",
                                 "test-00000-of-00001-1"]  # fmt: skip
    add = functions["https://www.codewars.com/kata/add"]
    assert add.function == FunctionSpec("add", "def add(a, b):\n\t", unwrap_singleton=True)
    assert add.preferred_language == "python" and add.private_tests[0] == Case("[1, 2]", "3")
    prompt = add.prompt[0]["content"]
    assert "Complete the function `add`" in prompt and "```python\ndef add(a, b):\n```" in prompt
    assert "standard input and writes" not in prompt  # not the stdin instructions
    assert loaded["Problem 2848"].function == FunctionSpec("numberOfPoints", "")
    assert "# a function named numberOfPoints" in loaded["Problem 2848"].prompt[0]["content"]  # no starter
    assert (
        loaded["Inversions"].function is None
        and "standard input" in loaded["Inversions"].prompt[0]["content"]
    )


def test_duplicates_across_sources_keep_the_first_seen(tmp_path):
    report, _ = run(tmp_path, ("apps", FIX / "apps"), ("taco", FIX / "taco"))
    duplicates = {key: n for key, n in report.details.items() if key[1] == "duplicate"}
    assert duplicates == {("taco", "duplicate", "kept from apps"): 1}
    # normalised: case, spacing and punctuation do not matter
    mine = tmp_path / "mine.jsonl"
    statement = "  " + SUM.upper().replace(" ", "\n  ") + " -----INPUT----- One line with a and b "
    statement += "(0 <= a, b <= 10^9).\n-----Output-----\nPrint a + b."
    tests = [{"input": "1 2\n", "output": "3\n"}]
    mine.write_text(json.dumps({"statement": statement, "tests": tests, "rating": 800}))
    report, _ = run(tmp_path, ("taco", FIX / "taco"), ("jsonl", mine))
    assert report.sources["jsonl"] == Counter(rows_read=1, duplicate=1)
    assert report.details[("jsonl", "duplicate", "kept from taco")] == 1


def test_the_date_cut(tmp_path):
    sources = ("livecodebench", FIX / "livecodebench"), ("taco", FIX / "taco")
    report, out = run(tmp_path, *sources, after="2023-09-15")
    lcb_counts = Counter(rows_read=7, kept=2, too_old=1, unsupported=1, malformed=3)
    assert report.sources["livecodebench"] == lcb_counts
    assert report.sources["taco"] == Counter(rows_read=9, too_old=3, undated=1, unsupported=2, malformed=3)
    assert sorted(r["extra_info"]["date"] for r in written(out)) == ["2023-09-21", "2023-11-25"]
    assert json.loads((out / "manifest.json").read_text())["config"]["after"] == "2023-09-15"
    with pytest.raises(CodefuError, match="after must be a date YYYY-MM-DD"):
        PrepareConfig(after="2023/09/15")


def test_sources_and_inputs_pair_up_on_the_command_line(tmp_path, capsys):
    assert pair_sources(None, ["a"]) == (SourceInput("code_contests", "a"),)
    assert pair_sources(["taco"], ["a", "b"]) == (SourceInput("taco", "a"), SourceInput("taco", "b"))
    assert pair_sources(["taco", "apps"], ["a", "b"]) == (SourceInput("taco", "a"), SourceInput("apps", "b"))
    with pytest.raises(CodefuError, match="2 --source but 3 --input"):
        pair_sources(["taco", "apps"], ["a", "b", "c"])
    args = build_parser().parse_args(["prepare", "--input", "x", "--out", "o"])
    assert args.source is None and args.input == ["x"] and args.after is None
    argv = ["prepare", "--source", "taco", "--input", str(FIX / "taco"), "--source", "apps",
            "--input", str(FIX / "apps"), "--out", str(tmp_path / "out"), "--keep-unrated",
            "--after", "2000-01-01"]  # fmt: skip
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["total", "taco", "apps"]
    assert next(line.split() for line in lines if line.startswith("  undated")) == ["undated", "5", "1", "4"]


def test_files_of_another_dataset_or_none_are_errors(tmp_path):
    with pytest.raises(CodefuError, match="no .parquet/.arrow/.jsonl files found"):
        TABLE_SOURCES["taco"](str(tmp_path / "nothing*"))
    cf = FIX / "codeforces" / "data" / "test-00000-of-00001.parquet"
    pq.write_table(pq.read_table(cf), tmp_path / "cf.parquet")
    missing = r"cf\.parquet, row 0, column 'question': column missing \(not BAAI/TACO's"
    with pytest.raises(CodefuError, match=missing):
        list(TABLE_SOURCES["taco"](str(tmp_path / "cf.parquet")))
