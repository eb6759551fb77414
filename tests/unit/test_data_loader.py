"""The loader: CodeFu's published files, other verl layouts, our JSONL, and the resumable order."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from codefu.data.loader import ProblemLoader, load_problems
from codefu.errors import CodefuError
from codefu.types import Problem
from codefu.types import TestCase as Case

CODEFU = Path(__file__).parents[2].parent / "shared/data/codefu-easy"
needs_codefu = pytest.mark.skipif(not CODEFU.is_dir(), reason=f"CodeFu sample data not present at {CODEFU}")


@needs_codefu
def test_reads_codefu_published_files():
    train, test = load_problems(CODEFU / "train.parquet"), load_problems(CODEFU / "test.parquet")
    assert (len(train), len(test)) == (808, 32)
    assert len(load_problems(CODEFU)) == 840
    p = next(p for p in train if p.name == "177_A2. Good Matrix Elements")
    assert p.rating == 800 and p.source == "code_contests" and p.preferred_language == "cpp"
    assert p.time_limit_s == 2.0 and p.memory_limit_bytes == 256_000_000
    assert p.public_tests[0] == Case("3\n1 2 3\n4 5 6\n7 8 9\n", "45")
    assert len(p.private_tests) >= 3 and p.private_tests[1].output == "225"
    # The statement is recovered from the Qwen-rendered prompt, without instruction or chat markers.
    assert p.statement.startswith("The Smart Beaver from ABBYY got hooked on square matrices.")
    assert p.statement.endswith("shown on the figure.")
    assert "<|im_start|>" not in p.statement and "<think>" not in p.statement
    assert p.prompt[0]["role"] == "user" and p.prompt[0]["content"].startswith("<|im_start|>user\n")
    assert {p.rating for p in train} == {800, 900, 1000}
    assert all(p.private_tests for p in train + test)
    assert any(p.time_limit_s == 0.5 for p in train)  # {seconds: 0, nanos: 5e8}


def _write(path: Path, rows: list[dict]) -> Path:
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def test_other_verl_layouts(tmp_path):
    gt_json = json.dumps({"inputs": ["1\n", "2\n"], "outputs": ["1\n", "4\n"]})
    rows = [
        {
            "data_source": "taco",
            "prompt": [{"role": "user", "content": "Square the number."}],
            "ability": "code",
            "reward_model": {"style": "rule", "ground_truth": gt_json},
            "extra_info": {"index": 7},
        }
    ]
    (p,) = load_problems(_write(tmp_path / "taco.parquet", rows))
    assert p.private_tests == [Case("1\n", "1\n"), Case("2\n", "4\n")] and p.public_tests == []
    assert p.statement == "Square the number." and p.source == "taco"
    assert p.name == "taco-0" and p.time_limit_s == 2.0 and p.rating is None
    assert p.extra == {"index": 7}

    tests_list = [{"input": "3\n", "output": "9\n", "testtype": "stdin"}]
    rows[0]["reward_model"]["ground_truth"] = json.dumps({"public_tests": tests_list, "name": "sq"})
    (q,) = load_problems(_write(tmp_path / "list.parquet", rows))
    assert q.name == "sq" and q.public_tests == [Case("3\n", "9\n")] and q.private_tests == []


def test_bad_parquet_rows_name_file_row_and_column(tmp_path):
    bad = [
        {"data_source": "x", "reward_model": {"ground_truth": json.dumps({"inputs": ["1"], "outputs": []})}}
    ]
    path = _write(
        tmp_path / "bad.parquet", [{"data_source": "x", "reward_model": {"ground_truth": "{}"}}] + bad
    )
    with pytest.raises(CodefuError, match=r"bad\.parquet, row 1, column 'reward_model'.*1 test inputs but 0"):
        load_problems(path)
    (tmp_path / "junk.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(CodefuError, match="junk.parquet: not a readable parquet file"):
        load_problems(tmp_path / "junk.parquet")
    with pytest.raises(CodefuError, match="no .* files"):
        load_problems(tmp_path / "nothing-*.parquet")


def test_jsonl_problems(tmp_path):
    path = tmp_path / "mine.jsonl"
    ok = {
        "name": "echo",
        "statement": "Print the input.",
        "public_tests": [{"input": "a\n", "output": "a\n"}],
        "tests": [{"input": "b\n", "output": "b\n"}],
        "time_limit_s": 1.5,
        "rating": 900,
        "checker": {"kind": "python", "source": "pkg.mod:check"},
        "language": "python",
        "solutions": {"python": "print(input())"},
    }
    path.write_text(json.dumps(ok) + "\n\n" + json.dumps({"statement": "No tests."}) + "\n")
    a, b = load_problems(path)
    assert a.private_tests == [Case("b\n", "b\n")] and a.time_limit_s == 1.5 and a.rating == 900
    assert a.checker.source == "pkg.mod:check" and a.preferred_language == "python"
    assert a.extra == {"solutions": {"python": "print(input())"}}
    assert b.name == "mine-3" and b.private_tests == [] and b.time_limit_s == 2.0
    path.write_text(json.dumps(ok) + "\n" + json.dumps({**ok, "tests": [{"input": 1}]}) + "\n")
    with pytest.raises(CodefuError, match=r"mine\.jsonl, line 2, field 'tests'"):
        load_problems(path)
    path.write_text("{not json\n")
    with pytest.raises(CodefuError, match=r"line 1.*not valid JSON"):
        load_problems(path)


def _problems(n: int) -> list[Problem]:
    return [Problem(f"p{i}", "s", [], [Case("", "")]) for i in range(n)]


def test_loader_order_is_seeded_and_covers_each_epoch():
    a = ProblemLoader(_problems(10), seed=1)
    first = [p.name for p in a.next_batch(10)]
    assert sorted(first) == sorted(f"p{i}" for i in range(10)) and first != [f"p{i}" for i in range(10)]
    assert [p.name for p in ProblemLoader(_problems(10), seed=1).next_batch(10)] == first
    assert [p.name for p in ProblemLoader(_problems(10), seed=2).next_batch(10)] != first
    second = [p.name for p in a.next_batch(10)]
    assert sorted(second) == sorted(first) and second != first  # epoch 1 is reshuffled
    assert [p.name for p in ProblemLoader(_problems(4), shuffle=False).next_batch(6)] == [
        "p0", "p1", "p2", "p3", "p0", "p1",
    ]  # fmt: skip


def test_loader_batches_cross_epochs_and_stop_after_the_last():
    loader = ProblemLoader(_problems(5), seed=0, epochs=2)
    sizes = [len(loader.next_batch(3)) for _ in range(5)]
    assert sizes == [3, 3, 3, 1, 0]
    assert loader.epoch == 2


def test_loader_resume_sees_the_same_order():
    reference = ProblemLoader(_problems(7), seed=3)
    expected = [p.name for _ in range(6) for p in reference.next_batch(4)]
    run = ProblemLoader(_problems(7), seed=3)
    seen = [p.name for _ in range(2) for p in run.next_batch(4)]
    state = json.loads(json.dumps(run.state_dict()))  # survives a checkpoint file
    resumed = ProblemLoader(_problems(7), seed=999)
    resumed.load_state_dict(state)
    seen += [p.name for _ in range(4) for p in resumed.next_batch(4)]
    assert seen == expected
    with pytest.raises(CodefuError, match="different problem set"):
        ProblemLoader(_problems(8)).load_state_dict(state)
    with pytest.raises(CodefuError, match="no problems"):
        ProblemLoader([])
