"""`PrepareConfig`: everything `codefu prepare` does is decided by these fields (saved in the manifest)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date

from codefu.errors import CodefuError
from codefu.types import Language


@dataclass(frozen=True)
class Bucket:
    """A difficulty bucket: Codeforces ratings lo..hi, both inclusive."""

    name: str
    lo: int
    hi: int

    def contains(self, rating: int) -> bool:
        return self.lo <= rating <= self.hi


DEFAULT_BUCKETS = (Bucket("easy", 800, 1000), Bucket("hard", 1100, 2200), Bucket("expert", 2300, 3500))
UNRATED = "unrated"  # bucket of problems without a rating, when keep_unrated is set


def rating_bucket(rating: int, buckets: Sequence[Bucket] = DEFAULT_BUCKETS) -> str:
    """The bucket of a rating for a dataset without buckets (`codefu eval`): the first of `buckets` (in rising
    order) whose upper bound is at or above it, the last one past them all. Every rating gets one, a rating
    in a gap between two the upper one; `codefu prepare` instead drops a rating no bucket contains."""
    return next((b.name for b in buckets if rating <= b.hi), buckets[-1].name)


@dataclass(frozen=True)
class SourceInput:
    """One dataset to read in a run: the source module that reads it and its file, directory or glob."""

    source: str
    input: str


@dataclass
class PrepareConfig:
    source: str = "code_contests"
    """Which dataset module reads `input`: one of codefu.data.sources.SOURCES (code_contests, jsonl, taco,
    apps, livecodebench, codeforces)."""
    input: str = ""
    """A file, a directory, or a glob of input files; for code_contests also "hf:deepmind/code_contests"
    (streams from the Hugging Face hub; needs the `datasets` package and network)."""
    more_sources: tuple[SourceInput, ...] = ()
    """Further datasets read in the same run, after `source`/`input`, in this order. A statement seen in
    an earlier one is dropped from a later one as `duplicate`."""
    out: str = ""
    """Output directory: OUT/<bucket>/<split>.parquet and OUT/manifest.json."""
    buckets: tuple[Bucket, ...] = DEFAULT_BUCKETS
    """Difficulty buckets to write; a problem whose rating falls in none is dropped as `no_bucket`."""
    splits: tuple[str, ...] | None = None
    """Source splits to read (CodeContests: train, valid, test); None reads all."""
    language: Language = "cpp"
    """Language the prompt asks for; recorded as each problem's preferred language."""
    template: str | None = None
    """Prompt template: a name in codefu/data/templates (cpp, python, codefu) or a path to a YAML file;
    None picks the template named after `language`."""
    template_seed: int = 0
    """Seed for templates with variants (which variant a problem gets depends only on seed and name)."""
    min_rating: int = 800
    """Problems rated below this are dropped as `rating_too_low`."""
    after: str | None = None
    """YYYY-MM-DD: keep only problems dated on or after it (contest date; LiveCodeBench, TACO and
    open-r1/codeforces have one). Earlier ones are dropped as `too_old`, undated ones as `undated`."""
    keep_unrated: bool = False
    """Keep problems without a rating (CodeContests' non-Codeforces problems) in bucket "unrated"
    instead of dropping them as `missing_rating`."""
    include_generated: bool = False
    """Add CodeContests' generated tests to the hidden tests, after the private ones."""
    keep_solutions: int = 0
    """Known-correct and known-incorrect programs kept per problem (each, at most; C++ and Python 3, each
    under 64 KiB) in extra_info.solutions / wrong_solutions, for `codefu audit-tests`; 0: none. Read from
    CodeContests' solutions / incorrect_solutions and problems JSONL's solutions / wrong_solutions."""
    max_tests: int = 250
    """Cap on hidden tests per problem (private first, then generated). CodeFu's largest had 250."""
    max_test_bytes: int = 1 << 20
    """A hidden test whose input+output exceed this is left out; a public test over it, or a problem
    left with no hidden tests, drops the problem as `tests_too_large`."""
    min_description_chars: int = 40
    """Shorter statements are dropped as `bad_description`."""
    max_description_chars: int = 50_000
    """Longer statements are dropped as `bad_description`."""
    max_time_limit_s: float = 60.0
    """Time limits outside (0, this] are dropped as `bad_limits`."""
    min_memory_bytes: int = 1 << 20
    """Memory limits below this (or above max_memory_bytes) are dropped as `bad_limits`."""
    max_memory_bytes: int = 16 << 30
    """See min_memory_bytes."""
    strict: bool = False
    """Any dropped row is an error naming file, row and column, instead of a counted drop."""
    batch_rows: int = 64
    """Rows converted to Python at a time (memory is bounded by a row group plus this many rows)."""
    flush_rows: int = 256
    """Output rows buffered per bucket/split before a row group is written."""
    extra: dict[str, str] = field(default_factory=dict)
    """Free-form notes copied into the manifest."""

    def inputs(self) -> list[SourceInput]:
        """Every dataset of the run, in reading order."""
        first = [SourceInput(self.source, self.input)] if self.input else []
        return first + list(self.more_sources)

    def __post_init__(self) -> None:
        if self.after is not None:
            try:
                date.fromisoformat(self.after)
            except ValueError:
                raise CodefuError(f"after must be a date YYYY-MM-DD, not {self.after!r}") from None
        if self.max_tests < 1:
            raise CodefuError(f"max_tests must be at least 1, not {self.max_tests}")
        names = [b.name for b in self.buckets]
        if len(set(names)) != len(names) or UNRATED in names:
            raise CodefuError(f"bucket names must be unique and not {UNRATED!r}: {names}")
        for b in self.buckets:
            if b.lo > b.hi:
                raise CodefuError(f"bucket {b.name}: lower bound {b.lo} is above upper bound {b.hi}")


def parse_buckets(selected: str | None, ranges: list[str] | None = None) -> tuple[Bucket, ...]:
    """`--bucket-range name=lo-hi` entries (added to or replacing the defaults), then `--buckets a,b`
    picks some of them in that order."""
    known = {b.name: b for b in DEFAULT_BUCKETS}
    for spec in ranges or []:
        try:
            name, span = spec.split("=", 1)
            lo, hi = (int(x) for x in span.split("-", 1))
        except ValueError:
            raise CodefuError(f"--bucket-range {spec!r}: expected NAME=LO-HI, e.g. mid=1100-1600") from None
        known[name.strip()] = Bucket(name.strip(), lo, hi)
    if not selected:
        return tuple(known.values())
    out = []
    for name in (n.strip() for n in selected.split(",") if n.strip()):
        if name not in known:
            raise CodefuError(f"--buckets: unknown bucket {name!r} (known: {', '.join(known)})")
        out.append(known[name])
    return tuple(out)


def pair_sources(sources: list[str] | None, inputs: list[str]) -> tuple[SourceInput, ...]:
    """`--source`/`--input` given several times: paired in order; one `--source` (or none: code_contests)
    applies to every `--input`."""
    sources = sources or ["code_contests"]
    if len(sources) == 1:
        sources = sources * len(inputs)
    if len(sources) != len(inputs):
        raise CodefuError(
            f"{len(sources)} --source but {len(inputs)} --input: give one --source for all inputs, "
            "or one per --input, in the same order"
        )
    return tuple(SourceInput(s, i) for s, i in zip(sources, inputs, strict=True))
