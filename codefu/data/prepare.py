"""The `codefu prepare` pipeline: source rows -> filters -> hidden tests -> bucket -> prompt -> verl parquet.

    report = prepare(PrepareConfig(input="data/code_contests", out="out/cc"))

Writes OUT/<bucket>/<split>.parquet and OUT/manifest.json (config, template, source file hashes, counts,
output hashes). Nothing appears under its final name unless the whole run succeeds.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tqdm import tqdm

from codefu import __version__
from codefu.data.config import UNRATED, PrepareConfig
from codefu.data.filters import FILTERS, Deduplicator, first_reason, select_hidden_tests
from codefu.data.raw import Malformed, RawProblem
from codefu.data.report import PrepareReport
from codefu.data.schema import problem_to_row
from codefu.data.sources import Source
from codefu.data.sources.code_contests import CodeContestsSource
from codefu.data.sources.jsonl import JsonlSource
from codefu.data.templates import Template, load_template
from codefu.data.writer import OutputWriter, sha256_file, write_json_atomic
from codefu.errors import CodefuError
from codefu.types import Problem


def open_source(cfg: PrepareConfig) -> Source:
    if cfg.source == "code_contests":
        return CodeContestsSource(cfg.input, cfg.splits, cfg.include_generated, cfg.batch_rows)
    if cfg.source == "jsonl":
        return JsonlSource(cfg.input, cfg.splits)
    raise CodefuError(f"unknown source {cfg.source!r} (known: code_contests, jsonl)")


def resolve_template(cfg: PrepareConfig) -> Template:
    template = load_template(cfg.template or cfg.language)
    if template.language != cfg.language:
        raise CodefuError(
            f"template {template.name!r} asks for {template.language}, but --language is {cfg.language}"
        )
    return template


def bucket_of(rating: int | None, cfg: PrepareConfig) -> str | None:
    if rating is None:
        return UNRATED if cfg.keep_unrated else None
    return next((b.name for b in cfg.buckets if b.contains(rating)), None)


class Pipeline:
    """Turns one source row into a finished `Problem` and its bucket, or a drop reason."""

    def __init__(self, cfg: PrepareConfig, template: Template) -> None:
        self.cfg, self.template, self.dedupe = cfg, template, Deduplicator()

    def process(self, raw: RawProblem) -> tuple[Problem, str] | str:
        reason = first_reason(raw, self.cfg)
        if reason:
            return reason
        hidden = select_hidden_tests(raw, self.cfg)
        if hidden is None:
            return "tests_too_large"
        bucket = bucket_of(raw.problem.rating, self.cfg)
        if bucket is None:
            return "no_bucket"
        if reason := self.dedupe(raw):
            return reason
        p = raw.problem
        problem = replace(
            p,
            private_tests=hidden,
            preferred_language=self.cfg.language,
            prompt=self.template.render(p.statement, p.name, self.cfg.template_seed),
        )
        return problem, bucket


def prepare(cfg: PrepareConfig, progress: bool | None = None) -> PrepareReport:
    """Run the pipeline; `progress` None shows a bar only when stderr is a terminal."""
    if not cfg.out:
        raise CodefuError("no output directory given (--out)")
    template = resolve_template(cfg)
    source = open_source(cfg)
    pipeline = Pipeline(cfg, template)
    report = PrepareReport(bucket_order=[b.name for b in cfg.buckets] + [UNRATED])
    out = Path(cfg.out)
    writer = OutputWriter(out, cfg.flush_rows)
    show = sys.stderr.isatty() if progress is None else progress
    started = time.perf_counter()
    try:
        with tqdm(total=source.count_rows(), unit="rows", disable=not show, file=sys.stderr) as bar:
            for item in source:
                _consume(item, pipeline, writer, report)
                bar.update(item.rows if isinstance(item, Malformed) else 1)
        report.outputs = writer.close()
        report.seconds = time.perf_counter() - started
        out.mkdir(parents=True, exist_ok=True)
        write_json_atomic(out / "manifest.json", manifest(cfg, template, source, report))
        writer.commit()
    except BaseException:
        writer.abort()
        raise
    return report


def _consume(
    item: RawProblem | Malformed, pipeline: Pipeline, writer: OutputWriter, report: PrepareReport
) -> None:
    if isinstance(item, Malformed):
        report.rows_read += item.rows
        if pipeline.cfg.strict:
            raise CodefuError(f"{item} (--strict: malformed rows are errors)")
        report.dropped["malformed"] += item.rows
        return
    report.rows_read += 1
    result = pipeline.process(item)
    if isinstance(result, str):
        report.dropped[result] += 1
        return
    problem, bucket = result
    index = writer.next_index(bucket, item.split)
    problem.extra = {"split": item.split, "index": index, "bucket": bucket, "source_id": item.source_id}
    writer.add(bucket, item.split, problem_to_row(problem, item.split, index, bucket, item.source_id))
    report.kept += 1
    report.written[(bucket, item.split)] += 1


def manifest(cfg: PrepareConfig, template: Template, source: Source, report: PrepareReport) -> dict[str, Any]:
    return {
        "codefu_version": __version__,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "config": asdict(cfg),
        "filters": [f.__name__ for f in FILTERS] + ["select_hidden_tests", "bucket", "duplicate"],
        "template": {
            "name": template.name,
            "path": template.path,
            "sha256": template.sha256,
            "language": template.language,
            "chat_rendered": template.chat_rendered,
        },
        "sources": [
            {"path": str(f), "bytes": f.stat().st_size, "sha256": sha256_file(f)} for f in source.files()
        ]
        or [{"path": cfg.input}],
        "counts": report.to_dict(),
        "outputs": report.outputs,
    }
