"""`prepare` end to end on CodeContests-schema parquet built here: filters, buckets, output schema,
round trip through the loader, manifest, and what happens on bad input."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from codefu.data.config import PrepareConfig
from codefu.data.filters import REASONS
from codefu.data.loader import load_problems
from codefu.data.prepare import Pipeline, open_sources, prepare, resolve_template
from codefu.data.schema import SCHEMA
from codefu.data.synthetic import cc_row, cc_tests, write_cc_parquet
from codefu.data.writer import sha256_file
from codefu.errors import CodefuError

CODEFU = Path(__file__).parents[2].parent / "shared/data/codefu-easy"
MULTI = " If there are multiple answers, print any of them."

# One row per drop reason, named by the reason it must be dropped for.
DROPS = {
    "bad_description": dict(description="short"),
    "file_io": dict(input_file="input.txt", output_file="output.txt"),
    "bad_limits": dict(time_limit=None),
    "missing_rating": dict(cf_rating=0),
    "rating_too_low": dict(cf_rating=700),
    "no_private_tests": dict(private_tests=cc_tests([])),
    "multiple_answers": dict(description=cc_row(0)["description"] + MULTI),
    "tests_too_large": dict(private_tests=cc_tests([("9" * 2000, "1\n")])),
    "no_bucket": dict(cf_rating=1050),
}
# Ratings at every bucket edge, and the bucket each must land in.
EDGES = {800: "easy", 1000: "easy", 1100: "hard", 2200: "hard", 2300: "expert", 3500: "expert"}


def fixture_rows() -> list[dict]:
    rows = [cc_row(i, cf_rating=r) for i, r in enumerate(EDGES)]
    rows += [cc_row(100 + i, **kw) for i, kw in enumerate(DROPS.values())]
    rows.append(cc_row(200, name="dup", description=rows[0]["description"].upper()))  # duplicate of row 0
    rows.append(cc_row(201, public_tests={"input": ["1\n", "2\n"], "output": ["1\n"]}))  # malformed
    rows.append(cc_row(202, private_tests={"input": ["1\n", None], "output": ["1\n", "2\n"]}))  # malformed
    return rows


def build(tmp_path: Path, rows: list[dict] | None = None, group: int = 4) -> Path:
    src = tmp_path / "cc"
    write_cc_parquet(src / "train-00000-of-00001.parquet", rows or fixture_rows(), row_group_size=group)
    write_cc_parquet(src / "test-00000-of-00001.parquet", [cc_row(300 + i, cf_rating=900) for i in range(3)])
    return src


def run(tmp_path: Path, **kw) -> tuple:
    src = kw.pop("src", None) or build(tmp_path)
    cfg = PrepareConfig(input=str(src), out=str(tmp_path / "out"), max_test_bytes=1000, **kw)
    return prepare(cfg, progress=False), tmp_path / "out"


def test_every_filter_counts_its_reason_and_buckets_get_their_edges(tmp_path):
    report, out = run(tmp_path)
    expected = {reason: 1 for reason in DROPS} | {"duplicate": 1, "malformed": 2}
    others = {"unsupported", "too_old", "undated"}  # need other sources: tests/unit/test_data_sources_more.py
    assert dict(report.dropped) == expected and set(expected) | others == set(REASONS)
    assert report.rows_read == len(fixture_rows()) + 3
    assert report.kept == len(EDGES) + 3
    assert dict(report.written) == {("easy", "train"): 2, ("hard", "train"): 2, ("expert", "train"): 2,
                                    ("easy", "test"): 3}  # fmt: skip
    for rating, bucket in EDGES.items():
        assert rating in {p.rating for p in load_problems(out / bucket / "train.parquet")}
    table = report.table()
    assert "rows read" in table and "malformed" in table and "expert" in table


def _pairs(d: dict) -> list[tuple[str, str]]:
    return list(zip(d["input"], d["output"], strict=True))


def test_round_trip_prepare_load_same_problems(tmp_path):
    rows = [cc_row(i, cf_rating=800 + 100 * (i % 3), time_limit={"seconds": 1, "nanos": 500_000_000})
            for i in range(10)]  # fmt: skip
    _, out = run(tmp_path, src=build(tmp_path, rows))
    loaded = load_problems(out / "easy" / "train.parquet")
    assert [p.name for p in loaded] == [r["name"] for r in rows]
    for p, r in zip(loaded, rows, strict=True):
        assert p.statement == r["description"] and p.rating == r["cf_rating"]
        assert [(t.input, t.output) for t in p.private_tests] == _pairs(r["private_tests"])
        assert [(t.input, t.output) for t in p.public_tests] == _pairs(r["public_tests"])
        assert p.time_limit_s == 1.5 and p.memory_limit_bytes == 256_000_000 and p.source == "code_contests"
        assert (
            p.extra["bucket"] == "easy" and p.extra["split"] == "train" and p.extra["source_id"] == r["name"]
        )
    assert [p.extra["index"] for p in loaded] == list(range(10))
    # The loaded problems are exactly those the pipeline produced (prompt, limits, tests, language...).
    cfg = PrepareConfig(input=str(tmp_path / "cc"), out="unused", max_test_bytes=1000)
    pipeline = Pipeline(cfg, resolve_template(cfg))
    produced = [pipeline.process(raw)[0] for raw in open_sources(cfg)[0] if raw.split == "train"]
    assert [replace(p, extra={}) for p in loaded] == [replace(p, extra={}) for p in produced]


@pytest.mark.skipif(not CODEFU.is_dir(), reason=f"CodeFu sample data not present at {CODEFU}")
def test_output_schema_matches_codefu_published_file(tmp_path):
    _, out = run(tmp_path, template="codefu")
    ours = pq.read_schema(out / "easy" / "train.parquet")
    theirs = pq.read_schema(CODEFU / "train.parquet")
    assert ours.remove_metadata() == SCHEMA
    for name in theirs.names:
        assert ours.field(name).type == theirs.field(name).type, name
    row = pq.read_table(out / "easy" / "train.parquet").to_pylist()[0]
    assert row["ability"] == "coding-cp" and row["reward_model"]["style"] == "rule"
    content = row["prompt"][0]["content"]
    assert content.startswith("<|im_start|>user\n") and content.endswith("\n<|im_start|>assistant\n")
    assert "\n\nProblem:\n" + row["extra_info"]["statement"] + "\n<|im_start|>" in content
    sample = {
        r["prompt"][0]["content"].split("\n")[1] for r in pq.read_table(CODEFU / "train.parquet").to_pylist()
    }
    assert sample == _template_instructions()  # the template carries exactly CodeFu's 60 instructions
    assert content.split("\n")[1] in sample


def _template_instructions() -> set[str]:
    import yaml

    from codefu.data.templates import TEMPLATE_DIR

    return set(yaml.safe_load((TEMPLATE_DIR / "codefu.yaml").read_text())["variants"]["instruction"])


def test_python_template_and_language_mismatch(tmp_path):
    _, out = run(tmp_path, language="python")
    (p, *_) = load_problems(out / "easy" / "train.parquet")
    assert "```python" in p.prompt[0]["content"] and p.preferred_language == "python"
    with pytest.raises(CodefuError, match="template 'codefu' asks for cpp, but --language is python"):
        run(tmp_path, language="python", template="codefu")
    with pytest.raises(CodefuError, match="unknown prompt template 'nope'"):
        run(tmp_path, template="nope")


def test_generated_tests_cap_and_bucket_selection(tmp_path):
    generated = cc_tests([(f"{i}\n", f"{i}\n") for i in range(9)])
    rows = [cc_row(0, private_tests=cc_tests([("1\n", "1\n")]), generated_tests=generated)]
    src = build(tmp_path, rows)
    report, out = run(tmp_path, src=src, include_generated=True, max_tests=5, splits=("train",))
    (p,) = load_problems(out / "easy" / "train.parquet")
    assert [t.input for t in p.private_tests] == ["1\n", "0\n", "2\n", "3\n", "4\n"]  # "1\n" once
    assert report.rows_read == 1 and not (out / "easy" / "test.parquet").exists()
    report, _ = run(tmp_path, src=src, splits=("test",))
    assert dict(report.written) == {("easy", "test"): 3}


def test_manifest_records_config_counts_and_hashes(tmp_path):
    report, out = run(tmp_path)
    m = json.loads((out / "manifest.json").read_text())
    assert m["counts"]["kept"] == report.kept and m["counts"]["dropped"]["malformed"] == 2
    assert m["config"]["max_test_bytes"] == 1000 and m["template"]["name"] == "cpp"
    assert len(m["template"]["sha256"]) == 64
    for s in m["sources"]:
        assert s["sha256"] == sha256_file(Path(s["path"]))
    for o in m["outputs"]:
        assert (
            o["sha256"] == sha256_file(out / o["path"])
            and pq.read_metadata(out / o["path"]).num_rows == o["rows"]
        )
    assert [p.name for p in out.rglob(".*")] == []  # no temp files left


def test_strict_malformed_row_is_an_error_and_nothing_is_written(tmp_path):
    with pytest.raises(
        CodefuError, match=r"train-00000-of-00001\.parquet, row 16, column 'public_tests': 2 inputs but 1"
    ):
        run(tmp_path, strict=True, flush_rows=1)  # rows reach the temp files before the error
    assert (tmp_path / "out" / "easy").is_dir()  # the test split was written before the bad row...
    assert [p for p in (tmp_path / "out").rglob("*") if p.is_file()] == []  # ...and removed


def test_failure_keeps_the_previous_outputs_intact(tmp_path):
    _, out = run(tmp_path)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    src = tmp_path / "cc" / "train-00000-of-00001.parquet"
    src.write_bytes(src.read_bytes()[:-100])  # truncated footer: the file cannot be opened
    with pytest.raises(
        CodefuError, match=r"train-00000-of-00001\.parquet, row 0, column '\*': not a readable"
    ):
        run(tmp_path, src=tmp_path / "cc")
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_missing_column_names_file_and_column(tmp_path):
    src = tmp_path / "cc"
    src.mkdir()
    table = pq.read_table(write_cc_parquet(tmp_path / "full.parquet", [cc_row(0)])).drop_columns(
        ["private_tests"]
    )
    pq.write_table(table, src / "train.parquet")
    with pytest.raises(CodefuError, match=r"train\.parquet, row 0, column 'private_tests': column missing"):
        run(tmp_path, src=src)


def test_corrupt_row_group_is_dropped_as_malformed_or_an_error_when_strict(tmp_path):
    src = build(tmp_path, [cc_row(i) for i in range(8)], group=4)
    path = src / "train-00000-of-00001.parquet"
    col = next(
        pq.ParquetFile(path).metadata.row_group(1).column(c)
        for c in range(20)
        if pq.ParquetFile(path).metadata.row_group(1).column(c).path_in_schema == "description"
    )
    data = bytearray(path.read_bytes())
    for k in range(col.data_page_offset + 10, col.data_page_offset + col.total_compressed_size):
        data[k] ^= 0xFF
    path.write_bytes(bytes(data))
    report, _ = run(tmp_path, src=src)
    assert report.dropped["malformed"] == 4 and report.written[("easy", "train")] == 4
    with pytest.raises(CodefuError, match=r"row 4-7, column '\*': row group 1 unreadable"):
        run(tmp_path, src=src, strict=True)


def test_duplicates_across_splits_are_kept_in_test(tmp_path):
    src = tmp_path / "cc"
    write_cc_parquet(src / "train-0.parquet", [cc_row(0), cc_row(1)])
    write_cc_parquet(src / "test-0.parquet", [cc_row(1, name="same statement, test copy")])
    report, out = run(tmp_path, src=src)
    assert report.dropped["duplicate"] == 1
    assert [p.name for p in load_problems(out / "easy" / "test.parquet")] == ["same statement, test copy"]
    assert len(load_problems(out / "easy" / "train.parquet")) == 1


def test_jsonl_source_through_the_pipeline_keeps_checked_multiple_answer_problems(tmp_path):
    base = {"statement": cc_row(0)["description"] + MULTI, "tests": [{"input": "1\n", "output": "1\n"}],
            "rating": 800}  # fmt: skip
    lines = [
        {**base, "name": "checked", "checker": {"kind": "python", "source": "m:f"}},
        {**base, "name": "unchecked", "statement": base["statement"] + " (other)"},
        {**base, "name": "bad", "tests": "nope"},
    ]
    (tmp_path / "mine.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    cfg = PrepareConfig(source="jsonl", input=str(tmp_path / "mine.jsonl"), out=str(tmp_path / "out"))
    report = prepare(cfg, progress=False)
    assert report.kept == 1 and report.dropped["multiple_answers"] == 1 and report.dropped["malformed"] == 1
    (p,) = load_problems(tmp_path / "out" / "easy" / "train.parquet")
    assert p.name == "checked" and p.checker is not None and p.checker.source == "m:f" and p.source == "jsonl"
