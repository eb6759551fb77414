"""`codefu report RUN_DIR`: one self-contained HTML page (plots embedded as PNG data URIs, no script, no
network) that explains a run: reward and pass rate, the training pass rate per step with its rolling mean,
the training pass rate per dataset source (a run mixing datasets), validation pass@k (with its bootstrap
interval where the run logs one), the verdict mix, response length, KL / entropy / clip fraction, time per
phase, throughput, and the config it ran with.

It reads only files: RUN_DIR/metrics.jsonl (a torn last line of a run still writing is skipped; other
unreadable lines are skipped too, their numbers kept in `RunData.skipped` for a warning),
RUN_DIR/config.yaml and the step numbers under RUN_DIR/checkpoints/, so it works on a finished run and
on one still running (the page says which). The page is written through a temporary file and a rename:
a browser reloading it never sees half a page.
"""

from __future__ import annotations

import base64
import html
import io
import math
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from codefu.errors import CodefuError
from codefu.observability import metrics as M
from codefu.observability.passk import ci_keys
from codefu.observability.sinks import METRICS_FILE, read_metrics_checked

CONFIG_FILE = "config.yaml"
REPORT_FILE = "report.html"

#: One color per verdict code, kept across plots and runs.
VERDICT_COLORS = {
    "AC": "#2ca02c",
    "WA": "#d62728",
    "TL": "#ff7f0e",
    "ML": "#9467bd",
    "RE": "#8c564b",
    "OL": "#e377c2",
    "CE": "#7f7f7f",
    "NC": "#bcbd22",
    "SE": "#17becf",
}
PHASES = ("generate", "judge", "judge_tail", "train", "sync")
#: Steps in the training pass rate's rolling mean.
ROLLING_WINDOW = 5


@dataclass
class RunData:
    run_dir: Path
    records: list[dict[str, Any]]
    config_text: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    checkpoints: list[int] = field(default_factory=list)
    mtime: float | None = None  # when metrics.jsonl was last written
    skipped: list[int] = field(default_factory=list)  # unreadable lines of metrics.jsonl (from 1)


def load_run(run_dir: str | os.PathLike[str]) -> RunData:
    """The files of a run directory; CodefuError naming the path when it is not one."""
    root = Path(run_dir)
    if not root.is_dir():
        raise CodefuError(f"{root}: no such run directory")
    metrics, config = root / METRICS_FILE, root / CONFIG_FILE
    if not metrics.exists() and not config.exists():
        raise CodefuError(f"{root}: not a codefu run directory (neither {METRICS_FILE} nor {CONFIG_FILE})")
    data = RunData(root, [])
    if metrics.exists():
        data.records, data.skipped = read_metrics_checked(metrics)
        data.mtime = metrics.stat().st_mtime
        if data.skipped and not data.records:
            raise CodefuError(f"{metrics}: no readable line ({skipped_lines(data)})")
    if config.exists():
        data.config_text = config.read_text()
        try:
            loaded = yaml.safe_load(data.config_text)
        except yaml.YAMLError as e:
            raise CodefuError(f"{config}: not valid YAML ({e})") from None
        data.config = loaded if isinstance(loaded, dict) else {}
    data.checkpoints = sorted(
        int(m.group(1))
        for p in (root / "checkpoints").glob("step_*")
        if (m := re.fullmatch(r"step_(\d+)", p.name)) and p.is_dir()
    )
    return data


def skipped_lines(data: RunData, shown: int = 5) -> str:
    """'2 unreadable lines skipped: runs/a/metrics.jsonl:3, runs/a/metrics.jsonl:7' (the first `shown`)."""
    where = [f"{data.run_dir / METRICS_FILE}:{n}" for n in data.skipped[:shown]]
    more = f" and {len(data.skipped) - shown} more" if len(data.skipped) > shown else ""
    plural = "s" if len(data.skipped) > 1 else ""
    return f"{len(data.skipped)} unreadable line{plural} skipped: {', '.join(where)}{more}"


def series(records: Sequence[Mapping[str, Any]], key: str) -> tuple[list[int], list[float]]:
    """(steps, values) of the records holding a finite `key`."""
    steps, values = [], []
    for r in records:
        v = r.get(key)
        if v is not None and math.isfinite(float(v)):
            steps.append(int(r["step"]))
            values.append(float(v))
    return steps, values


def total_steps(data: RunData) -> int | None:
    steps = data.config.get("loop", {}).get("steps") if isinstance(data.config.get("loop"), dict) else None
    return int(steps) if isinstance(steps, int) else None


def run_status(data: RunData, now: float | None = None) -> str:
    """ "finished", or where an unfinished run stands (it may be running or stopped: only the files say)."""
    last = data.records[-1]["step"] if data.records else 0
    total = total_steps(data)
    if total is not None and last >= total:
        return f"finished: {last} of {total} steps"
    of = f" of {total}" if total is not None else ""
    if data.mtime is None:
        return f"not started: 0{of} steps"
    ago = max(0.0, (time.time() if now is None else now) - data.mtime)
    return f"in progress or stopped: {last}{of} steps, last written {_duration(ago)} ago"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def pass_at_k_keys(records: Sequence[Mapping[str, Any]]) -> list[tuple[int, str | None, str]]:
    """(k, bucket or None, key) of every eval/pass@k key in the records, by bucket then k."""
    found = set()
    for r in records:
        for key in r:
            m = re.fullmatch(r"eval/pass@(\d+)(?:/(.+))?", key)
            if m:
                found.add((int(m.group(1)), m.group(2), key))
    return sorted(found, key=lambda t: (t[1] is not None, t[1] or "", t[0]))


def rolling_mean(values: Sequence[float], window: int = ROLLING_WINDOW) -> list[float]:
    """The trailing mean: out[i] = mean(values[max(0, i - window + 1) : i + 1]), so the first window - 1
    points average what there is so far. Over the values given (the steps that have the metric)."""
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    return [
        math.fsum(values[max(0, i - window + 1) : i + 1]) / (i + 1 - max(0, i - window + 1))
        for i in range(len(values))
    ]


def interval(row: Mapping[str, Any], key: str) -> tuple[float, float] | None:
    """(low, high) of a pass@k key's bootstrap interval in one record (`ci_keys`), None without both."""
    low, high = (row.get(k) for k in ci_keys(key))
    if low is None or high is None or not math.isfinite(float(low)) or not math.isfinite(float(high)):
        return None
    return float(low), float(high)


def with_rates(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The records with `derived_metrics` filled in where a run written before them lacks them."""
    out = []
    for r in records:
        values = {k: v for k, v in r.items() if k not in ("step", "time") and v is not None}
        out.append({**r, **M.derived_metrics(values)})
    return out


# ---- plots: each returns a matplotlib Figure, or None when the run has none of its metrics -------------


def _figure(ncols: int = 1, height: float = 3.2) -> tuple[Any, list[Any]]:
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(9.5, height), dpi=100, layout="constrained")
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.set_xlabel("step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
    return fig, list(axes)


def _band(ax: Any, records: Sequence[Mapping[str, Any]], prefix: str, color: str, label: str) -> bool:
    """mean line with a ±std band and dotted min/max, for `prefix`mean/std/min/max; False without mean."""
    steps, mean = series(records, prefix + "mean")
    if not steps:
        return False
    ax.plot(steps, mean, color=color, marker="." if len(steps) < 30 else None, label=label)
    std = dict(zip(*series(records, prefix + "std"), strict=True))
    if std:
        s = [st for st in steps if st in std]
        m = [v for st, v in zip(steps, mean, strict=True) if st in std]
        ax.fill_between(
            s,
            [v - std[st] for st, v in zip(s, m, strict=True)],
            [v + std[st] for st, v in zip(s, m, strict=True)],
            color=color,
            alpha=0.2,
            label="± std",
        )
    for end in ("min", "max"):
        xs, ys = series(records, prefix + end)
        if xs:
            ax.plot(xs, ys, color=color, linestyle=":", linewidth=1, label=end)
    return True


def plot_reward(records: Sequence[Mapping[str, Any]]) -> Any | None:
    if not series(records, M.REWARD_MEAN)[0] and not series(records, M.PASS_RATE)[0]:
        return None
    fig, (ax,) = _figure()
    _band(ax, records, "reward/", "#1f77b4", "reward (mean)")
    ax.set_ylabel("reward")
    steps, rate = series(records, M.PASS_RATE)
    if steps:
        ax2 = ax.twinx()
        ax2.plot(steps, [100 * v for v in rate], color="#2ca02c", label="pass rate")
        ax2.set_ylabel("pass rate (%)")
        ax2.set_ylim(0, 100)
        ax2.legend(loc="upper right", fontsize=8)
    ax.legend(loc="upper left", fontsize=8)
    return fig


def plot_train_pass_rate(records: Sequence[Mapping[str, Any]]) -> Any | None:
    steps, rate = series(records, M.PASS_RATE)
    if not steps:
        return None
    fig, (ax,) = _figure()
    ax.plot(
        steps,
        [100 * v for v in rate],
        color="#2ca02c",
        alpha=0.45,
        linewidth=1,
        marker="." if len(steps) < 60 else None,
        label="per step",
    )
    ax.plot(
        steps,
        [100 * v for v in rolling_mean(rate)],
        color="#1a6b1a",
        linewidth=2.2,
        label=f"rolling mean ({ROLLING_WINDOW} steps)",
    )
    ax.set_ylabel("training pass rate (%)")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=8)
    return fig


def source_keys(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """The dataset sources with a `data/pass_rate/<source>` key in the records, sorted."""
    return sorted(
        {key[len(M.SOURCE_PASS_RATE) :] for r in records for key in r if key.startswith(M.SOURCE_PASS_RATE)}
    )


def plot_source_pass_rate(records: Sequence[Mapping[str, Any]]) -> Any | None:
    sources = [s for s in source_keys(records) if series(records, M.SOURCE_PASS_RATE + s)[0]]
    if not sources:
        return None
    fig, (ax,) = _figure()
    for i, source in enumerate(sources):
        steps, rate = series(records, M.SOURCE_PASS_RATE + source)
        ax.plot(steps, [100 * v for v in rate], color=f"C{i}", alpha=0.35, linewidth=1)
        ax.plot(steps, [100 * v for v in rolling_mean(rate)], color=f"C{i}", linewidth=2, label=source)
    ax.set_ylabel("training pass rate (%)")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=8, ncol=min(4, len(sources)))
    return fig


def plot_passk(records: Sequence[Mapping[str, Any]]) -> Any | None:
    keys = pass_at_k_keys(records)
    if not keys:
        return None
    fig, (ax,) = _figure()
    color = {k: f"C{i}" for i, k in enumerate(sorted({k for k, _, _ in keys}))}  # one color per k
    styles = dict(zip(sorted({b for _, b, _ in keys if b}), ["--", ":", "-.", (0, (5, 1))] * 8, strict=False))
    for k, bucket, key in keys:
        steps, values = series(records, key)
        label = f"pass@{k}" + (f" {bucket}" if bucket else "")
        ax.plot(
            steps,
            [100 * v for v in values],
            marker="o",
            color=color[k],
            linestyle=styles[bucket] if bucket else "-",
            label=label,
        )
        rows = {int(r["step"]): r for r in records}
        bars = [(s, v, ci) for s, v in zip(steps, values, strict=True) if (ci := interval(rows[s], key))]
        if bars:  # the 95% bootstrap interval over problems, where the run logs it
            ax.errorbar(
                [s for s, _, _ in bars],
                [100 * v for _, v, _ in bars],
                fmt="none",
                ecolor=color[k],
                capsize=3,
                alpha=0.7,
                yerr=[
                    [100 * max(0.0, v - lo) for _, v, (lo, _) in bars],
                    [100 * max(0.0, hi - v) for _, v, (_, hi) in bars],
                ],
            )
    ax.set_ylabel("validation pass@k (%)")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=8, ncol=3)
    return fig


def plot_verdicts(records: Sequence[Mapping[str, Any]]) -> Any | None:
    codes = [c for c in M.VERDICT_CODES.values() if series(records, M.VERDICT_PREFIX + c)[0]]
    if not codes:
        return None
    steps = [int(r["step"]) for r in records if any(r.get(M.VERDICT_PREFIX + c) is not None for c in codes)]
    rows = {int(r["step"]): r for r in records}
    stacks = [[100 * float(rows[s].get(M.VERDICT_PREFIX + c) or 0.0) for s in steps] for c in codes]
    fig, (ax,) = _figure()
    ax.stackplot(
        steps, stacks, labels=codes, colors=[VERDICT_COLORS.get(c, "#333333") for c in codes], alpha=0.85
    )
    ax.set_ylabel("share of samples (%)")
    ax.set_ylim(0, 100)
    ax.set_xlim(min(steps), max(steps) if len(steps) > 1 else min(steps) + 1)
    ax.legend(fontsize=8, ncol=len(codes), loc="upper center", bbox_to_anchor=(0.5, -0.22))
    return fig


def plot_length(records: Sequence[Mapping[str, Any]]) -> Any | None:
    if not series(records, M.RESPONSE_LEN)[0]:
        return None
    fig, (ax,) = _figure()
    _band(ax, records, "rollout/response_len_", "#9467bd", "mean")
    ax.set_ylabel("response length (tokens)")
    ax.legend(fontsize=8)
    return fig


def plot_policy(records: Sequence[Mapping[str, Any]]) -> Any | None:
    panels = [(M.KL, "KL to reference (loss/kl)"), (M.ENTROPY, "entropy"), (M.CLIP_FRAC, "clip fraction")]
    if not any(series(records, k)[0] for k, _ in panels):
        return None
    fig, axes = _figure(ncols=3)
    for ax, (key, title) in zip(axes, panels, strict=True):
        steps, values = series(records, key)
        ax.set_title(title, fontsize=10)
        if steps:
            ax.plot(steps, values, marker="." if len(steps) < 30 else None)
        else:
            ax.text(0.5, 0.5, f"no {key}", ha="center", va="center", transform=ax.transAxes)
    approx = series(records, "policy/approx_kl")
    if approx[0]:
        axes[0].plot(*approx, linestyle=":", label="policy/approx_kl (to old policy)")
        axes[0].legend(fontsize=7)
    return fig


def plot_phases(records: Sequence[Mapping[str, Any]]) -> Any | None:
    phases = [p for p in PHASES if series(records, f"timing/{p}_s")[0]]
    total_steps_, total = series(records, M.TIME_STEP)
    if not phases and not total_steps_:
        return None
    fig, (ax,) = _figure()
    if phases:
        steps = [int(r["step"]) for r in records if any(r.get(f"timing/{p}_s") is not None for p in phases)]
        rows = {int(r["step"]): r for r in records}
        stacks = [[float(rows[s].get(f"timing/{p}_s") or 0.0) for s in steps] for p in phases]
        ax.stackplot(steps, stacks, labels=phases, alpha=0.8)
    if total_steps_:
        ax.plot(total_steps_, total, color="black", linewidth=1, label="step total")
    ax.set_ylabel("seconds")
    ax.legend(fontsize=8, ncol=5)
    return fig


def plot_throughput(records: Sequence[Mapping[str, Any]]) -> Any | None:
    panels = [
        (M.JUDGE_PER_S, "judge: submissions / s"),
        (M.ROLLOUT_TOKENS_PER_S, "rollout: generated tokens / s"),
    ]
    if not any(series(records, k)[0] for k, _ in panels):
        return None
    fig, axes = _figure(ncols=2)
    for ax, (key, title) in zip(axes, panels, strict=True):
        ax.set_title(title, fontsize=10)
        steps, values = series(records, key)
        if steps:
            ax.plot(steps, values, marker="." if len(steps) < 30 else None, color="#8c564b")
        else:
            ax.text(0.5, 0.5, f"no {key}", ha="center", va="center", transform=ax.transAxes)
    return fig


@dataclass
class Section:
    title: str
    plot: Callable[[Sequence[Mapping[str, Any]]], Any | None]
    missing: str  # said instead of the plot when the run has none of its metrics
    note: str = ""


SECTIONS: tuple[Section, ...] = (
    Section(
        "Reward and pass rate",
        plot_reward,
        "no reward/mean or judge/pass_rate yet",
        "mean shaped reward over the step's scored samples; pass rate = AC / (samples − SE)",
    ),
    Section(
        "Training pass rate",
        plot_train_pass_rate,
        "no judge/pass_rate yet",
        "judge/pass_rate: accepted / judged samples of each step, every sample generated (dynamic "
        f"sampling's dropped groups too), sandbox errors left out; the thick line is its trailing mean "
        f"over {ROLLING_WINDOW} steps",
    ),
    Section(
        "Pass rate per source",
        plot_source_pass_rate,
        "no data/pass_rate/<source> metrics yet",
        "data/pass_rate/<source>: the training pass rate of each dataset source's samples (as "
        f"judge/pass_rate); thin: per step, thick: trailing mean over {ROLLING_WINDOW} steps. The table: "
        "the last step's rate, the trailing mean, and the prompts of each source over the run "
        "(data/prompts/<source>)",
    ),
    Section(
        "Validation pass@k",
        plot_passk,
        "no validation yet (loop.val_every, and at the end)",
        "unbiased pass@k on the held-out problems; one color per k, broken lines per difficulty bucket; "
        "error bars: the 95% bootstrap interval over problems, where the run logs it "
        "(eval/pass@k_ci_low, eval/pass@k_ci_high)",
    ),
    Section(
        "Verdict mix",
        plot_verdicts,
        "no judge/verdict/* metrics yet",
        "share of each step's samples by verdict (SE: sandbox error, ours, not the model's)",
    ),
    Section(
        "Response length",
        plot_length,
        "no rollout/response_len_mean yet",
        "tokens per response: the mean, its ± std band and min / max where the run records them",
    ),
    Section("KL, entropy, clip fraction", plot_policy, "no loss/kl, policy/entropy or policy/clip_frac yet"),
    Section(
        "Time per phase",
        plot_phases,
        "no timing/* metrics yet",
        "wall seconds per step, stacked by phase; the black line is the whole step",
    ),
    Section(
        "Throughput",
        plot_throughput,
        "no judge/submissions_per_s or rollout/tokens_per_s yet",
        "judge: submissions judged per second of the judge phase; rollout: response tokens per second "
        "of the generate phase",
    ),
)


def png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def render_plots(records: Sequence[Mapping[str, Any]]) -> list[tuple[Section, bytes | None]]:
    records = with_rates(records)  # matplotlib's Figure needs no pyplot and no display
    out = []
    for section in SECTIONS:
        fig = section.plot(records)
        out.append((section, None if fig is None else png(fig)))
    return out


# ---- the page -------------------------------------------------------------------------------------------

_SUMMARY_KEYS = (
    (M.REWARD_MEAN, "reward", "{:+.3f}"),
    (M.PASS_RATE, "pass rate", "{:.1%}"),
    (M.RESPONSE_LEN, "response length", "{:.0f}"),
    (M.KL, "KL", "{:.2e}"),
    (M.ENTROPY, "entropy", "{:.3f}"),
    (M.CLIP_FRAC, "clip fraction", "{:.3f}"),
    (M.TIME_STEP, "step time (s)", "{:.1f}"),
    (M.JUDGE_PER_S, "judge submissions/s", "{:.1f}"),
    (M.ROLLOUT_TOKENS_PER_S, "rollout generated tokens/s", "{:.0f}"),
)

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 960px; color: #222; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
.status { color: #555; } .note { color: #666; font-size: 0.9em; margin: 0.2em 0 0.5em; }
.missing { color: #999; font-style: italic; }
table { border-collapse: collapse; font-size: 0.9em; } td, th { padding: 2px 10px; text-align: right; }
th { text-align: left; } tr:nth-child(even) { background: #f4f4f4; }
img { max-width: 100%; height: auto; display: block; }
pre { background: #f6f6f6; padding: 0.8em; font-size: 0.8em; overflow-x: auto; }
"""


def _summary(records: Sequence[Mapping[str, Any]]) -> str:
    rows = []
    for key, label, fmt in _SUMMARY_KEYS:
        steps, values = series(records, key)
        if steps:
            first, last = fmt.format(values[0]), fmt.format(values[-1])
            rows.append(
                f"<tr><th>{html.escape(label)}</th><td>{first}</td><td>{last}</td>"
                f"<td>{steps[-1]}</td><td><code>{html.escape(key)}</code></td></tr>"
            )
    if not rows:
        return '<p class="missing">no steps written yet</p>'
    head = "<tr><th></th><th>first</th><th>last</th><th>at step</th><th>key</th></tr>"
    return f"<table>{head}{''.join(rows)}</table>"


def _passk_table(records: Sequence[Mapping[str, Any]]) -> str:
    keys = pass_at_k_keys(records)
    if not keys:
        return ""
    last = max(int(r["step"]) for r in records if any(r.get(key) is not None for _, _, key in keys))
    row = next(r for r in records if int(r["step"]) == last)
    ks = sorted({k for k, _, _ in keys})
    buckets = [None, *sorted({b for _, b, _ in keys if b is not None})]
    head = "".join(f"<th>pass@{k}</th>" for k in ks)
    lines = []
    for b in buckets:
        cells = []
        for k in ks:
            key = f"eval/pass@{k}" + (f"/{b}" if b else "")
            v, ci = row.get(key), interval(row, key)
            text = "-" if v is None else f"{100 * float(v):.1f}%"
            if v is not None and ci is not None:
                text += f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"
            cells.append(f"<td>{text}</td>")
        lines.append(f"<tr><th>{html.escape(b or 'all')}</th>{''.join(cells)}</tr>")
    return f'<p class="note">at step {last}:</p><table><tr><th></th>{head}</tr>{"".join(lines)}</table>'


def _source_table(records: Sequence[Mapping[str, Any]]) -> str:
    sources = [s for s in source_keys(records) if series(records, M.SOURCE_PASS_RATE + s)[0]]
    if not sources:
        return ""
    head = (
        "<tr><th>source</th><th>pass rate</th><th>at step</th>"
        f"<th>mean of last {ROLLING_WINDOW}</th><th>prompts</th><th>share</th></tr>"
    )
    prompts = {s: math.fsum(series(records, M.SOURCE_PROMPTS + s)[1]) for s in sources}
    total = math.fsum(prompts.values())
    lines = []
    for source in sources:
        steps, rate = series(records, M.SOURCE_PASS_RATE + source)
        share = f"{100 * prompts[source] / total:.1f}%" if total else "-"
        lines.append(
            f"<tr><th>{html.escape(source)}</th><td>{100 * rate[-1]:.1f}%</td><td>{steps[-1]}</td>"
            f"<td>{100 * rolling_mean(rate)[-1]:.1f}%</td><td>{prompts[source]:.0f}</td>"
            f"<td>{share}</td></tr>"
        )
    return f"<table>{head}{''.join(lines)}</table>"


def render_html(
    data: RunData, plots: Sequence[tuple[Section, bytes | None]], now: float | None = None
) -> str:
    """The page, from the run's files and the plots' PNG bytes (pure: no file is read)."""
    name = html.escape(data.run_dir.resolve().name)
    parts = [
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>codefu run {name}</title>',
        f"<style>{_CSS}</style></head><body>",
        f"<h1>codefu run <code>{name}</code></h1>",
        f'<p class="status">{html.escape(run_status(data, now))}; checkpoints at steps '
        f"{', '.join(map(str, data.checkpoints)) or 'none yet'}; report made "
        f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(now))}</p>",
        "<h2>Summary</h2>",
        _summary(with_rates(data.records)),
    ]
    for section, image in plots:
        parts.append(f"<h2>{html.escape(section.title)}</h2>")
        if section.note:
            parts.append(f'<p class="note">{html.escape(section.note)}</p>')
        if image is None:
            parts.append(f'<p class="missing">{html.escape(section.missing)}</p>')
        else:
            src = "data:image/png;base64," + base64.b64encode(image).decode()
            parts.append(f'<img class="plot" alt="{html.escape(section.title)}" src="{src}">')
        if section.plot is plot_passk:
            parts.append(_passk_table(data.records))
        if section.plot is plot_source_pass_rate:
            parts.append(_source_table(data.records))
    parts.append("<h2>Config</h2>")
    if data.config_text is None:
        parts.append(f'<p class="missing">no {CONFIG_FILE} in the run directory</p>')
    else:
        lines = data.config_text.count("\n")
        parts.append(
            f"<details open><summary>{CONFIG_FILE} ({lines} lines)</summary>"
            f"<pre>{html.escape(data.config_text)}</pre></details>"
        )
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write_report(
    run_dir: str | os.PathLike[str] | RunData, out: str | os.PathLike[str] | None = None
) -> Path:
    """Render the report of `run_dir` (or of its files, loaded) to `out` (default RUN_DIR/report.html);
    returns the path."""
    data = run_dir if isinstance(run_dir, RunData) else load_run(run_dir)
    page = render_html(data, render_plots(data.records))
    path = Path(out) if out is not None else data.run_dir / REPORT_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, path)
    return path
