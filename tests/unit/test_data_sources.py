"""Sources (CodeContests rows as dicts, as the `datasets` path yields them), templates and schema helpers."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from codefu.data.raw import Malformed, RawProblem
from codefu.data.schema import limit_to_seconds, seconds_to_limit, statement_from_prompt
from codefu.data.sources.code_contests import CodeContestsSource, row_to_raw, split_of
from codefu.data.synthetic import cc_row, write_cc_parquet
from codefu.data.templates import available, load_template
from codefu.errors import CodefuError
from codefu.types import TestCase as Case


@pytest.mark.parametrize(
    "path, split",
    [
        ("data/train-00003-of-00039-e991a271dbfa9925.parquet", "train"),
        ("data/valid-00000-of-00001-5e672c5751f060d3.parquet", "valid"),
        ("data/test-00000-of-00001-9c49eeff30aacaa8.parquet", "test"),
        ("cc/test/part-0.parquet", "test"),
        ("elsewhere/shard.parquet", "train"),
    ],
)
def test_split_from_file_name(path, split):
    assert split_of(Path(path)) == split


def test_a_dict_row_becomes_a_raw_problem():
    raw = row_to_raw(cc_row(3, time_limit={"seconds": 1, "nanos": 250_000_000}), "valid", "f", 9, True)
    assert isinstance(raw, RawProblem) and raw.split == "valid" and raw.where == "f, row 9"
    p = raw.problem
    assert p.time_limit_s == 1.25 and p.rating == 800 and p.private_tests[0] == Case("2 3\n", "15\n")
    assert raw.generated_tests == [Case("4 4\n", "24\n")] and raw.source_id == p.name
    unrated = row_to_raw(
        cc_row(0, cf_rating=0, time_limit=None, memory_limit_bytes=None), "train", "f", 0, False
    )
    assert unrated.problem.rating is None and unrated.problem.time_limit_s == 0.0
    assert unrated.problem.memory_limit_bytes == 0 and unrated.generated_tests == []


@pytest.mark.parametrize(
    "override, column",
    [
        (dict(name=None), "name"),
        (dict(description=5), "description"),
        (dict(private_tests={"input": ["1"], "output": ["1", "2"]}), "private_tests"),
        (dict(public_tests={"input": [None], "output": ["1"]}), "public_tests"),
        (dict(public_tests=["1", "2"]), "public_tests"),
        (dict(time_limit={"seconds": "2"}), "time_limit"),
        (dict(cf_rating="800"), "cf_rating"),
        (dict(generated_tests={"input": "1", "output": "1"}), "generated_tests"),
    ],
)
def test_malformed_dict_rows_name_their_column(override, column):
    bad = row_to_raw(cc_row(0, **override), "train", "file.parquet", 4, True)
    assert isinstance(bad, Malformed) and bad.column == column
    assert str(bad).startswith(f"file.parquet, row 4, column '{column}': ")


def test_only_needed_columns_are_read(tmp_path):
    write_cc_parquet(tmp_path / "train.parquet", [cc_row(0)])
    src = CodeContestsSource(str(tmp_path), None, include_generated=False)
    assert "solutions" not in src.columns() and "generated_tests" not in src.columns()
    assert "generated_tests" in CodeContestsSource(str(tmp_path), None, include_generated=True).columns()
    assert src.count_rows() == 1 and [r.problem.name for r in src] == [cc_row(0)["name"]]


def test_glob_input_and_no_match(tmp_path):
    for split in ("train", "test"):
        write_cc_parquet(tmp_path / f"{split}-0.parquet", [cc_row(0)])
    assert [f.name for f in CodeContestsSource(str(tmp_path / "*.parquet"), None, False).files()] == [
        "test-0.parquet", "train-0.parquet",
    ]  # fmt: skip
    with pytest.raises(CodefuError, match="no .parquet files found"):
        CodeContestsSource(str(tmp_path / "nope*.parquet"), None, False)


@pytest.mark.skipif(importlib.util.find_spec("datasets") is not None, reason="datasets is installed here")
def test_hub_path_without_datasets_says_what_to_install():
    src = CodeContestsSource("hf:deepmind/code_contests", ("test",), False)
    assert src.files() == [] and src.count_rows() is None
    with pytest.raises(CodefuError, match="pip install datasets"):
        next(iter(src))


def test_templates_render_slots_once_and_pick_stable_variants():
    assert {"cpp", "python", "codefu"} <= set(available())
    cpp = load_template("cpp")
    (msg,) = cpp.render("Print {name} and {statement} literally.", "x")
    assert msg["role"] == "user" and msg["content"].endswith("Print {name} and {statement} literally.")
    codefu = load_template("codefu")
    picks = {codefu.render("S", f"p{i}")[0]["content"].split("\n")[1] for i in range(200)}
    assert len(picks) > 30  # spread over the 60 instructions
    assert codefu.render("S", "p1") == codefu.render("S", "p1")
    by_seed = {codefu.render("S", "p1", seed=s)[0]["content"] for s in range(10)}
    assert len(by_seed) > 1  # the seed changes the pick


def test_a_template_file_by_path_and_its_errors(tmp_path):
    good = tmp_path / "mine.yaml"
    good.write_text("name: mine\nlanguage: python\nmessages:\n  - {role: system, content: Be brief.}\n"
                    "  - {role: user, content: 'Task: {statement}'}\n")  # fmt: skip
    t = load_template(str(good))
    assert t.render("add", "n") == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Task: add"},
    ]
    bad = tmp_path / "bad.yaml"
    bad.write_text("messages:\n  - {role: user, content: no slot}\n")
    with pytest.raises(CodefuError, match="no message contains"):
        load_template(str(bad))


def test_limits_and_statement_helpers():
    assert seconds_to_limit(2.5) == {"nanos": 5e8, "seconds": 2.0}
    assert limit_to_seconds(seconds_to_limit(0.5), 2.0) == 0.5
    assert limit_to_seconds(None, 2.0) == 2.0 and limit_to_seconds({"seconds": 0, "nanos": 0}, 3.0) == 3.0
    prompt = [
        {
            "role": "user",
            "content": "<|im_start|>user\nDo it.\n\nProblem:\nAdd a and b.\n<|im_start|>assistant\n",
        }
    ]
    assert statement_from_prompt(prompt) == "Add a and b."
