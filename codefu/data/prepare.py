"""The `codefu prepare` pipeline: source rows -> filters -> hidden tests -> bucket -> prompt -> verl parquet.

    report = prepare(PrepareConfig(input="data/code_contests", out="out/cc"))

Writes OUT/<bucket>/<split>.parquet and OUT/manifest.json (config, template, source file hashes, counts,
output hashes). Nothing appears under its final name unless the whole run succeeds. Several sources in one
run (`PrepareConfig.inputs()`) go through one pipeline, in order, so a statement kept from an earlier
source is a `duplicate` in a later one.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tqdm import tqdm

from codefu import __version__
from codefu.data.config import UNRATED, PrepareConfig, SourceInput
from codefu.data.filters import FILTERS, Deduplicator, first_reason, select_hidden_tests, unsupported_because
from codefu.data.raw import Malformed, RawProblem
from codefu.data.report import PrepareReport
from codefu.data.schema import problem_to_row
from codefu.data.solutions import kept_solutions
from codefu.data.sources import SOURCES, Source
from codefu.data.sources.apps import AppsSource
from codefu.data.sources.code_contests import CodeContestsSource
from codefu.data.sources.codeforces import CodeforcesSource
from codefu.data.sources.jsonl import JsonlSource
from codefu.data.sources.livecodebench import LiveCodeBenchSource
from codefu.data.sources.tables import TableSource
from codefu.data.sources.taco import TacoSource
from codefu.data.templates import Template, load_template
from codefu.data.writer import OutputWriter, sha256_file, write_json_atomic
from codefu.errors import CodefuError
from codefu.types import Problem

TABLE_SOURCES: dict[str, type[TableSource]] = {
    s.name: s for s in (TacoSource, AppsSource, LiveCodeBenchSource, CodeforcesSource)
}


def open_source(spec: SourceInput, cfg: PrepareConfig) -> Source:
    if spec.source == "code_contests":
        return CodeContestsSource(
            spec.input, cfg.splits, cfg.include_generated, cfg.batch_rows, cfg.keep_solutions > 0
        )
    if spec.source == "jsonl":
        return JsonlSource(spec.input, cfg.splits)
    if spec.source in TABLE_SOURCES:
        return TABLE_SOURCES[spec.source](spec.input, cfg.splits, cfg.batch_rows)
    raise CodefuError(f"unknown source {spec.source!r} (known: {', '.join(SOURCES)})")


def open_sources(cfg: PrepareConfig) -> list[Source]:
    """Every source of the run, opened (so a missing input fails before anything is read)."""
    if not cfg.inputs():
        raise CodefuError("no input given (--input)")
    return [open_source(spec, cfg) for spec in cfg.inputs()]


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


@dataclass(frozen=True)
class Drop:
    """Why a row is not written: a reason from filters.REASONS, and for some reasons what is behind it
    (the report counts reason and detail, and keeps the first example)."""

    reason: str
    detail: str = ""  # "function-call problem", "kept from taco", ...
    example: str = ""  # this row's message: "FILE, row N: ..."


class Pipeline:
    """Turns one source row into a finished `Problem` and its bucket, or a `Drop`."""

    def __init__(self, cfg: PrepareConfig, template: Template) -> None:
        self.cfg, self.template, self.dedupe = cfg, template, Deduplicator()

    def process(self, raw: RawProblem) -> tuple[Problem, str] | Drop:
        reason = first_reason(raw, self.cfg)
        if reason == "unsupported" and (why := unsupported_because(raw, self.cfg)) is not None:
            return Drop(reason, why.kind, f"{raw.where}: {why.message}")
        if reason:
            return Drop(reason)
        hidden = select_hidden_tests(raw, self.cfg)
        if hidden is None:
            return Drop("tests_too_large")
        bucket = bucket_of(raw.problem.rating, self.cfg)
        if bucket is None:
            return Drop("no_bucket")
        if (kept := self.dedupe.kept_by(raw)) is not None:
            return Drop("duplicate", f"kept from {kept}", f"{raw.where}: same statement as one from {kept}")
        p, seed = raw.problem, self.cfg.template_seed
        if p.function is not None:  # the prompt asks for the function, with the dataset's starter code
            f = p.function
            prompt = self.template.render_function(p.statement, p.name, f.entry_point, f.starter_code, seed)
        else:
            prompt = self.template.render(p.statement, p.name, seed)
        problem = replace(p, private_tests=hidden, preferred_language=self.cfg.language, prompt=prompt)
        return problem, bucket


def prepare(cfg: PrepareConfig, progress: bool | None = None) -> PrepareReport:
    """Run the pipeline; `progress` None shows a bar only when stderr is a terminal."""
    if not cfg.out:
        raise CodefuError("no output directory given (--out)")
    template = resolve_template(cfg)
    sources = open_sources(cfg)
    pipeline = Pipeline(cfg, template)
    report = PrepareReport(bucket_order=[b.name for b in cfg.buckets] + [UNRATED])
    out = Path(cfg.out)
    writer = OutputWriter(out, cfg.flush_rows)
    show = sys.stderr.isatty() if progress is None else progress
    started = time.perf_counter()
    try:
        with tqdm(total=_total_rows(sources), unit="rows", disable=not show, file=sys.stderr) as bar:
            for source in sources:
                for item in source:
                    _consume(item, source.name, pipeline, writer, report)
                    bar.update(item.rows if isinstance(item, Malformed) else 1)
        report.outputs = writer.close()
        report.seconds = time.perf_counter() - started
        out.mkdir(parents=True, exist_ok=True)
        write_json_atomic(out / "manifest.json", manifest(cfg, template, sources, report))
        writer.commit()
    except BaseException:
        writer.abort()
        raise
    return report


def _total_rows(sources: list[Source]) -> int | None:
    counts = [s.count_rows() for s in sources]
    return None if None in counts else sum(c or 0 for c in counts)


def _consume(
    item: RawProblem | Malformed, source: str, pipeline: Pipeline, writer: OutputWriter, report: PrepareReport
) -> None:
    if isinstance(item, Malformed):
        report.count(source, "rows_read", item.rows)
        if pipeline.cfg.strict:
            raise CodefuError(f"{item} (--strict: malformed rows are errors)")
        report.count(source, "malformed", item.rows)
        report.note(source, "malformed", f"column {item.column!r}", str(item), item.rows)
        return
    report.count(source, "rows_read")
    result = pipeline.process(item)
    if isinstance(result, Drop):
        report.count(source, result.reason)
        if result.detail:
            report.note(source, result.reason, result.detail, result.example)
        return
    problem, bucket = result
    index = writer.next_index(bucket, item.split)
    problem.extra = {
        **kept_solutions(problem, pipeline.cfg.keep_solutions),
        "split": item.split,
        "index": index,
        "bucket": bucket,
        "source_id": item.source_id,
    }
    row = problem_to_row(problem, item.split, index, bucket, item.source_id, item.date, item.difficulty)
    writer.add(bucket, item.split, row)
    report.count(source, "kept")
    report.written[(bucket, item.split)] += 1


def manifest(
    cfg: PrepareConfig, template: Template, sources: list[Source], report: PrepareReport
) -> dict[str, Any]:
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
            entry
            for source, spec in zip(sources, cfg.inputs(), strict=True)
            for entry in _source_files(source, spec)
        ],
        "counts": report.to_dict(),
        "outputs": report.outputs,
    }


def _source_files(source: Source, spec: SourceInput) -> list[dict[str, Any]]:
    files = [
        {"source": source.name, "path": str(f), "bytes": f.stat().st_size, "sha256": sha256_file(f)}
        for f in source.files()
    ]
    return files or [{"source": source.name, "path": spec.input}]
