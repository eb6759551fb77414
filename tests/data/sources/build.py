"""Write the fixture files of tests/unit/test_data_sources_more.py: a few rows of each dataset in its
published schema and file layout (nothing can be downloaded here), good rows and bad ones.

    python tests/data/sources/build.py

TACO: arrow stream (as `datasets.save_to_disk` wrote BAAI/TACO) for train, parquet (the hub's conversion)
for test, every column a string. APPS: train.jsonl / test.jsonl as codeparrot/apps. LiveCodeBench:
test.jsonl / test2.jsonl as livecodebench/code_generation_lite, private tests both as JSON text and as
base64(zlib(pickle(json))) like the published files. open-r1/codeforces: data/{train,test}-*.parquet with
its full schema. The comment on each row says what the test expects of it.
"""

from __future__ import annotations

import base64
import json
import pickle
import zlib
from fractions import Fraction
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent

SUM = ("Given two integers a and b, print their sum.\n\n-----Input-----\n\nOne line with a and b "
       "(0 <= a, b <= 10^9).\n\n-----Output-----\n\nPrint a + b.")  # fmt: skip
BARGAIN = ("Sasha names a price n, Vova removes a non-empty substring of its digits. Print the sum of "
           "all resulting prices modulo 10^9 + 7.\n\n-----Input-----\n\nThe integer n.\n\n"
           "-----Output-----\n\nThe sum modulo 10^9 + 7.")  # fmt: skip

TACO_COLUMNS = ("question", "solutions", "starter_code", "input_output", "difficulty", "raw_tags", "name",
                "source", "tags", "skill_types", "url", "Expected Auxiliary Space", "time_limit", "date",
                "picture_num", "memory_limit", "Expected Time Complexity")  # fmt: skip


def io(inputs: list[Any], outputs: list[Any], fn_name: str | None = None) -> str:
    d: dict[str, Any] = {"inputs": inputs, "outputs": outputs}
    if fn_name:
        d["fn_name"] = fn_name
    return json.dumps(d)


def taco(question: str, input_output: str, difficulty: str, **kw: str | None) -> dict[str, str | None]:
    row: dict[str, str | None] = dict.fromkeys(TACO_COLUMNS)
    row.update(question=question, input_output=input_output, difficulty=difficulty, solutions='["print(1)"]',
               starter_code="", raw_tags="['math']", tags="['Mathematics']", skill_types="[]",
               picture_num="0", source="codeforces")  # fmt: skip
    row.update(kw)
    return row


TACO_TRAIN = [
    # 0: good; MEDIUM_HARD -> 1600; 1 s, 256 MiB; dated
    taco(BARGAIN, io(["107\n", "100500100500\n"], ["42\n", "428101984\n"]), "MEDIUM_HARD",
         url="https://codeforces.com/problemset/problem/1422/C", time_limit="1 second",
         memory_limit="256 megabytes", date="2020-10-04"),
    # 1: function call -> unsupported
    taco("Write a function add(a, b) that returns the sum of the two numbers a and b.",
         io([[1, 2], [3, 4]], [3, 7], "add"), "EASY", starter_code="def add(a, b):\n\t",
         source="codewars", url="https://www.codewars.com/kata/add"),
    # 2: truncated JSON -> malformed input_output
    taco(SUM + " (variant 2)", '{"inputs": ["1 2\\n"], "outputs": ', "EASY"),
    # 3: unreadable time limit -> malformed time_limit
    taco(SUM + " (variant 3)", io(["1 2\n"], ["3\n"]), "EASY", time_limit="two seconds"),
    # 4: unrated, no limits (defaults), tests as lists of lines
    taco("Print the numbers of a list one per line, in the order given. The first line holds n.",
         io([["3", "1 2 3"]], [["1", "2", "3"]]), "UNKNOWN_DIFFICULTY", name="Lines"),
    # 5: the statement of APPS' train problem 0 (TACO includes APPS): EASY -> 800, 0.5 s, 64 MiB
    taco(SUM, io(["1 2\n", "5 7\n"], ["3\n", "12\n"]), "EASY", name="Sum", time_limit="0.5 seconds",
         memory_limit="64 megabytes", date="2013-02-16"),
]  # fmt: skip
TACO_TEST = [
    # 0: good; HARD -> 2000; 2 s, 512 MiB
    taco("Count the inversions of a permutation p of length n, and print their number modulo 998244353.",
         io(["3\n3 1 2\n"], ["2\n"]), "HARD", name="Inversions", time_limit="2 seconds",
         memory_limit="512 megabytes", date="2021-03-01"),
    # 1: LeetCode-style function call -> unsupported
    taco("Given the array prices, return the maximum profit of one buy and one later sell.",
         io([[[7, 1, 5]]], [4], "maxProfit"), "VERY_HARD", source="leetcode",
         starter_code="class Solution:\n    def maxProfit(self, prices):\n"),
    # 2: unknown label -> malformed difficulty
    taco(SUM + " (variant 4)", io(["1 2\n"], ["3\n"]), "IMPOSSIBLE"),
]  # fmt: skip


def apps(pid: int, question: str, input_output: str, difficulty: str, **kw: Any) -> dict[str, Any]:
    url = f"https://codeforces.com/problemset/problem/{pid}/A"
    return {"problem_id": pid, "question": question, "solutions": '["print(1)"]',
            "input_output": input_output, "difficulty": difficulty, "url": url, "starter_code": "",
            **kw}  # fmt: skip


APPS_TRAIN: list[Any] = [
    # line 1: same statement as TACO's train row 5 -> duplicate when TACO is read first
    apps(0, SUM, io(["1 2\n"], ["3\n"]), "introductory"),
    # line 2: function call -> unsupported
    apps(1, "Given the array prices, return the best profit of one buy followed by one sell.",
         io([[[7, 1, 5, 3, 6, 4]]], [5], "maxProfit"), "interview",
         starter_code="class Solution:\n    def maxProfit(self, prices: List[int]) -> int:\n"),
    # line 3: empty input_output -> no_private_tests
    apps(2, "Print the number of days in February of the given year y (1 <= y <= 9999).", "", "interview"),
    # line 4: 2 inputs, 1 output -> malformed input_output
    apps(3, SUM + " (apps 3)", io(["1 2\n", "3 4\n"], ["3\n"]), "interview"),
    # line 5: not JSON -> malformed "-"
    "{oops",
    # line 6: good; competition -> 2000
    apps(5, "Find the length of the longest strictly increasing subsequence of the n given integers.",
         io(["5\n1 3 2 4 5\n"], ["4\n"]), "competition"),
]  # fmt: skip
APPS_TEST: list[Any] = [
    # line 1: good; ids restart at 0 in test
    apps(0, "Print the greatest common divisor of the two given positive integers a and b.",
         io(["12 18\n"], ["6\n"]), "interview"),
    # line 2: no question -> malformed question
    {"problem_id": 1, "solutions": "[]", "input_output": io(["1\n"], ["1\n"]), "difficulty": "interview"},
]  # fmt: skip


def pack(tests: Any) -> str:
    """As LiveCodeBench publishes private tests: base64(zlib(pickle(json text)))."""
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests)))).decode()


def lcb(qid: str, platform: str, day: str, difficulty: str, public: list[dict[str, str]], private: str,
        **kw: str) -> dict[str, str]:  # fmt: skip
    return {"question_title": kw.pop("title", f"Problem {qid}"),
            "question_content": kw.pop("content", f"Problem {qid}: read n integers and print their sum. "
                                                  "The first line holds n, the second the integers."),
            "platform": platform, "question_id": qid, "contest_id": qid.split("_")[0],
            "contest_date": day, "starter_code": "", "difficulty": difficulty,
            "public_test_cases": json.dumps(public), "private_test_cases": private,
            "metadata": kw.pop("metadata", "{}"), **kw}  # fmt: skip


def stdin(i: str, o: str) -> dict[str, str]:
    return {"input": i, "output": o, "testtype": "stdin"}


class Boom:
    """Pickled into one private payload: loading it would need a global, which must be refused."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (Fraction, (1, 2))


LCB_TEST = [
    # line 1: atcoder, private tests as plain JSON text; easy -> 800
    lcb("abc301_a", "atcoder", "2023-05-13T00:00:00", "easy", [stdin("2\n1 2\n", "3\n")],
        json.dumps([stdin("3\n1 2 3\n", "6\n")])),
    # line 2: leetcode functional -> unsupported (func_name from metadata)
    lcb("2848", "leetcode", "2023-09-10T00:00:00", "medium",
        [{"input": "[[3, 6], [1, 5]]", "output": "7", "testtype": "functional"}],
        pack([{"input": "[[1, 3]]", "output": "3", "testtype": "functional"}]),
        metadata='{"func_name": "numberOfPoints"}'),
    # line 3: codeforces, compressed private tests; medium -> 1400
    lcb("1873_A", "codeforces", "2023-09-21T00:00:00", "medium", [stdin("1\n5\n", "5\n")],
        pack([stdin("2\n4 5\n", "9\n"), stdin("1\n0\n", "0\n")])),
]  # fmt: skip
LCB_TEST2 = [
    # line 1: atcoder, compressed private tests; hard -> 2000
    lcb("abc330_b", "atcoder", "2023-11-25T00:00:00", "hard", [stdin("1\n7\n", "7\n")],
        pack([stdin("2\n10 20\n", "30\n")])),
    # line 2: base64 of text that is not zlib -> malformed private_test_cases
    lcb("abc331_a", "atcoder", "2023-12-02T00:00:00", "easy", [stdin("1\n1\n", "1\n")],
        base64.b64encode(b"not zlib at all").decode()),
    # line 3: not a date -> malformed contest_date
    lcb("abc332_a", "atcoder", "last tuesday", "easy", [stdin("1\n1\n", "1\n")], "[]"),
    # line 4: a pickle that needs a global (fractions.Fraction) -> refused, malformed private_test_cases
    lcb("abc333_a", "atcoder", "2023-12-16T00:00:00", "easy", [stdin("1\n1\n", "1\n")],
        base64.b64encode(zlib.compress(pickle.dumps(Boom()))).decode()),
]  # fmt: skip

_TESTS = pa.list_(pa.struct([("input", pa.string()), ("output", pa.string())]))
CF_SCHEMA = pa.schema([
    ("id", pa.string()), ("aliases", pa.list_(pa.string())), ("contest_id", pa.string()),
    ("contest_name", pa.string()), ("contest_type", pa.string()), ("contest_start", pa.int64()),
    ("contest_start_year", pa.int64()), ("index", pa.string()), ("time_limit", pa.float64()),
    ("memory_limit", pa.float64()), ("title", pa.string()), ("description", pa.string()),
    ("input_format", pa.string()), ("output_format", pa.string()), ("interaction_format", pa.string()),
    ("note", pa.string()), ("examples", _TESTS), ("editorial", pa.string()), ("rating", pa.int64()),
    ("tags", pa.list_(pa.string())), ("testset_size", pa.int64()), ("official_tests", _TESTS),
    ("official_tests_complete", pa.bool_()), ("input_mode", pa.string()), ("generated_checker", pa.string()),
    ("executable", pa.bool_()), ("generated_tests", pa.int64()),
])  # fmt: skip
CHECKER = """#include "testlib.h"
int main(int argc, char* argv[]) {
    registerTestlibCmd(argc, argv);
    int n = inf.readInt();
    int a = ouf.readInt(1, n), b = ouf.readInt(1, n);
    if (a + b != n + 1) quitf(_wa, "a + b = %d, not %d", a + b, n + 1);
    quitf(_ok, "ok");
}
"""


def cf(pid: str, title: str, rating: int | None, description: str, **kw: Any) -> dict[str, Any]:
    contest, index = pid.split("/")
    row: dict[str, Any] = {
        "id": pid, "aliases": None, "contest_id": contest, "contest_name": f"Codeforces Round {contest}",
        "contest_type": "CF", "contest_start": 1_600_000_000, "contest_start_year": 2020, "index": index,
        "time_limit": 1.0, "memory_limit": 256.0, "title": title, "description": description,
        "input_format": "The only line contains an integer n (1 <= n <= 10^5).",
        "output_format": "Print the answer.", "interaction_format": None, "note": None,
        "examples": [{"input": "3\n", "output": "6\n"}], "editorial": None, "rating": rating,
        "tags": ["math"], "testset_size": 2,
        "official_tests": [{"input": "3\n", "output": "6\n"}, {"input": "4\n", "output": "10\n"}],
        "official_tests_complete": True, "input_mode": "stdio", "generated_checker": None,
        "executable": True, "generated_tests": 0,
    }  # fmt: skip
    row.update(kw)
    return row


MULTI = "Find two numbers a and b from 1 to n with a + b = n + 1. If there are multiple answers, print any."
CF_TRAIN = [
    # 0: good; 1 s, 256 MiB, rating 1200, dated 2020-09-13 (contest_start)
    cf("1000/A", "Triangular", 1200, "Print the sum of the integers from 1 to n."),
    # 1: several answers, with a checker -> kept, checker carried through
    cf("1001/B", "Pair", 800, MULTI, generated_checker=CHECKER, time_limit=2.0, memory_limit=512.0,
       examples=[{"input": "3\n", "output": "1 3\n"}], official_tests=[{"input": "5\n", "output": "2 4\n"}]),
    # 2: interactive -> unsupported
    cf("1002/C", "Guess", 1500, "Guess the hidden number x from 1 to n with at most 30 queries.",
       interaction_format="Print '? y' to ask whether x >= y; read 1 or 0."),
    # 3: not executable -> unsupported
    cf("1003/D", "Broken", 1300, "Print the number of divisors of n, counting 1 and n themselves.",
       executable=False),
    # 4: reads input.txt -> file_io
    cf("1004/E", "Files", 1100, "Print the square of n, reading from and writing to files.",
       input_mode="file"),
    # 5: an example without output -> malformed examples
    cf("1005/F", "Nulls", 1100, "Print n times two, on one line, with no leading zeros at all.",
       examples=[{"input": "3\n", "output": None}]),
    # 6: unrated -> missing_rating
    cf("1006/G", "Unrated", None, "Print n modulo 7, where n is given on the only line of the input."),
    # 7: several answers, no checker -> multiple_answers
    cf("1007/H", "Pair again", 900, MULTI.replace("a + b", "b + a")),
]  # fmt: skip
CF_TEST = [
    # 0: good; rating 800; dated 2024-05-29
    cf("2000/A", "Cube", 800, "Print the cube of the integer n given on the only line of the input.",
       contest_start=1_717_000_000, examples=[{"input": "2\n", "output": "8\n"}],
       official_tests=[{"input": "3\n", "output": "27\n"}]),
]  # fmt: skip


def write_jsonl(path: Path, rows: list[Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))


def main() -> None:
    taco_schema = pa.schema([(c, pa.string()) for c in TACO_COLUMNS])
    arrow = HERE / "taco" / "train" / "data-00000-of-00001.arrow"
    arrow.parent.mkdir(parents=True, exist_ok=True)
    with pa.OSFile(str(arrow), "wb") as f, pa.ipc.new_stream(f, taco_schema) as w:
        w.write_table(pa.Table.from_pylist(TACO_TRAIN, schema=taco_schema))
    parquet = HERE / "taco" / "ALL" / "test-00000-of-00001.parquet"
    parquet.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(TACO_TEST, schema=taco_schema), parquet)
    write_jsonl(HERE / "apps" / "train.jsonl", APPS_TRAIN)
    write_jsonl(HERE / "apps" / "test.jsonl", APPS_TEST)
    write_jsonl(HERE / "livecodebench" / "test.jsonl", LCB_TEST)
    write_jsonl(HERE / "livecodebench" / "test2.jsonl", LCB_TEST2)
    for split, rows in (("train", CF_TRAIN), ("test", CF_TEST)):
        path = HERE / "codeforces" / "data" / f"{split}-00000-of-00001.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows, schema=CF_SCHEMA), path)


if __name__ == "__main__":
    main()
