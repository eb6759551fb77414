"""`codefu prepare`: turn a dataset into verl-schema parquet per difficulty bucket and split."""

from __future__ import annotations

import argparse
from pathlib import Path

from codefu.data.config import PrepareConfig, pair_sources, parse_buckets
from codefu.data.prepare import prepare
from codefu.data.sources import SOURCES
from codefu.data.templates import available
from codefu.errors import check_flags


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "prepare",
        help="dataset -> verl-schema parquet per difficulty bucket and split",
        description="Filter a dataset of programming problems, split it into difficulty buckets and write "
        "OUT/<bucket>/<split>.parquet (verl schema) plus OUT/manifest.json. See docs/data.md.",
    )
    p.add_argument(
        "--source",
        action="append",
        choices=SOURCES,
        help="dataset of each --input, in order; one --source applies to all inputs (default code_contests)",
    )
    p.add_argument(
        "--input",
        action="append",
        required=True,
        help="file, directory or glob; code_contests also hf:deepmind/code_contests; repeat to read several "
        "datasets in one run (a statement kept from an earlier one is a duplicate in a later one)",
    )
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--buckets", default=None, help="comma-separated bucket names (default: easy,hard,expert)")
    p.add_argument(
        "--bucket-range", action="append", metavar="NAME=LO-HI", help="define or redefine a bucket"
    )
    p.add_argument("--splits", default=None, help="comma-separated source splits to read (default: all)")
    p.add_argument("--language", default="cpp", choices=("cpp", "python"))
    p.add_argument("--template", default=None, help=f"template name ({', '.join(available())}) or YAML path")
    p.add_argument("--template-seed", type=int, default=0)
    p.add_argument(
        "--include-generated", action="store_true", help="add generated tests after the private ones"
    )
    p.add_argument(
        "--keep-solutions",
        type=int,
        default=0,
        metavar="N",
        help="keep up to N correct and N incorrect solutions per problem in extra_info (codefu audit-tests)",
    )
    p.add_argument("--max-tests", type=int, default=250, help="hidden tests per problem at most")
    p.add_argument("--max-test-bytes", type=int, default=1 << 20, help="input+output bytes per test at most")
    p.add_argument("--min-rating", type=int, default=800)
    p.add_argument(
        "--after", default=None, metavar="YYYY-MM-DD", help="keep only problems dated on or after this day"
    )
    p.add_argument("--keep-unrated", action="store_true", help='keep unrated problems in bucket "unrated"')
    p.add_argument("--strict", action="store_true", help="a malformed row is an error, not a counted drop")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    check_flags(
        args,
        [
            ("out", out.is_dir() or not out.exists(), "a folder (new or existing), not a file"),
            ("max_tests", args.max_tests >= 1, ">= 1"),
            ("keep_solutions", args.keep_solutions >= 0, ">= 0"),
            ("max_test_bytes", args.max_test_bytes >= 1, ">= 1"),
        ],
    )
    first, *more = pair_sources(args.source, args.input)
    cfg = PrepareConfig(
        source=first.source,
        input=first.input,
        more_sources=tuple(more),
        out=args.out,
        buckets=parse_buckets(args.buckets, args.bucket_range),
        splits=tuple(s.strip() for s in args.splits.split(",") if s.strip()) if args.splits else None,
        language=args.language,
        template=args.template,
        template_seed=args.template_seed,
        include_generated=args.include_generated,
        keep_solutions=args.keep_solutions,
        max_tests=args.max_tests,
        max_test_bytes=args.max_test_bytes,
        min_rating=args.min_rating,
        after=args.after,
        keep_unrated=args.keep_unrated,
        strict=args.strict,
    )
    report = prepare(cfg)
    print(report.table())
    print(f"\nwrote {len(report.outputs)} files and manifest.json to {cfg.out} in {report.seconds:.1f} s")
    return 0
