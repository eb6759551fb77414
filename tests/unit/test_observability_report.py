"""codefu.observability.report and `codefu report`: what the page holds for a finished run, a run still
writing (torn last line, no validation yet), and what is refused."""

import base64
import re
import struct

import pytest

from codefu.cli import main
from codefu.config import dump_yaml
from codefu.observability.report import (
    ROLLING_WINDOW,
    SECTIONS,
    interval,
    load_run,
    pass_at_k_keys,
    plot_passk,
    plot_source_pass_rate,
    plot_train_pass_rate,
    render_html,
    render_plots,
    rolling_mean,
    run_status,
    series,
    source_keys,
    write_report,
)
from codefu.orchestrator.config import RunConfig
from helpers.report_runs import make_run


def images(page: str) -> list[tuple[str, bytes]]:
    found = re.findall(r'<img class="plot" alt="([^"]+)" src="data:image/png;base64,([^"]+)"', page)
    return [(alt, base64.b64decode(data)) for alt, data in found]


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_finished_run_has_every_plot_and_its_config(tmp_path):
    run = make_run(tmp_path / "run-x", steps=20)
    path = write_report(run)
    assert path == run / "report.html"
    page = path.read_text()
    imgs = images(page)
    assert [alt for alt, _ in imgs] == [s.title for s in SECTIONS]
    for _, data in imgs:
        w, h = png_size(data)
        assert w >= 600 and h >= 200
    assert "finished: 20 of 20 steps" in page
    assert "checkpoints at steps 10, 20" in page
    assert "val_every: 5" in page  # the config as saved
    assert "<script" not in page and "http://" not in page and "https://" not in page  # self-contained
    # the pass@k table of the last validation, with the interval where the run logged one
    assert re.search(r"at step 20:.*<th>pass@1</th><th>pass@4</th>.*<th>easy</th>", page, re.S)
    assert "<td>72.0% [54.0, 85.5]</td><td>90.0% [72.0, 100.0]</td>" in page  # p = 0.9 at step 20
    assert "<td>90.0%</td><td>90.0%</td>" in page  # easy: no interval logged
    assert "trailing mean over 5 steps" in page


def test_a_run_still_writing_reports_what_it_has(tmp_path):
    run = make_run(tmp_path / "live", steps=3, total=30, val_every=10)
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"step": 4, "time": 1, "reward/me')  # a write cut short
    page = write_report(run, tmp_path / "out" / "r.html").read_text()
    assert re.search(r"in progress or stopped: 3 of 30 steps, last written \d+ s ago", page)
    titles = [alt for alt, _ in images(page)]
    assert "Validation pass@k" not in titles and len(titles) == len(SECTIONS) - 1
    assert "no validation yet" in page
    assert "checkpoints at steps none yet" in page


def test_a_run_with_no_steps_yet(tmp_path):
    (tmp_path / "config.yaml").write_text(dump_yaml(RunConfig()))
    data = load_run(tmp_path)
    assert run_status(data) == "not started: 0 of 30 steps"
    page = render_html(data, render_plots(data.records))
    assert images(page) == [] and "no steps written yet" in page


def test_series_and_pass_at_k_keys_skip_missing_and_null_values():
    records = [{"step": 1, "a/b": 1.0}, {"step": 2, "a/b": None}, {"step": 3}, {"step": 4, "a/b": 4.0}]
    assert series(records, "a/b") == ([1, 4], [1.0, 4.0])
    recs = [
        {"step": 1, "eval/pass@8/hard": 0.1, "eval/pass@1": 0.2, "eval/pass@8": 0.3, "eval/reward_mean": 1}
    ]
    assert pass_at_k_keys(recs) == [
        (1, None, "eval/pass@1"),
        (8, None, "eval/pass@8"),
        (8, "hard", "eval/pass@8/hard"),
    ]


def test_codefu_report_cli(tmp_path, capsys):
    run = make_run(tmp_path / "r", steps=2)
    assert main(["report", str(run), "--out", str(tmp_path / "x.html")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "x.html")
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert f"{tmp_path / 'missing'}: no such run directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty")]) == 2
    assert "not a codefu run directory" in capsys.readouterr().err
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.yaml").write_text("a: [")
    assert main(["report", str(tmp_path / "bad")]) == 2
    assert "config.yaml: not valid YAML" in capsys.readouterr().err


@pytest.mark.parametrize("section", SECTIONS, ids=lambda s: s.title)
def test_each_plot_is_none_without_its_metrics(section):
    assert section.plot([{"step": 1, "optim/lr": 1e-6}]) is None


def test_rolling_mean_by_hand():
    assert rolling_mean([0, 1, 2, 3, 4, 5, 6], window=5) == [0, 0.5, 1, 1.5, 2, 3, 4]
    assert rolling_mean([0.25], window=5) == [0.25] and rolling_mean([]) == []
    assert rolling_mean([1, 3], window=1) == [1, 3] and ROLLING_WINDOW == 5
    with pytest.raises(ValueError):
        rolling_mean([1], window=0)


def test_training_pass_rate_plot_draws_the_rate_and_its_rolling_mean():
    rates = [0.1, 0.3, 0.2, 0.4, 0.5, 0.3, 0.6, None, 0.7]  # step 8 lost its value (null in the file)
    records = [{"step": i + 1, "judge/pass_rate": r} for i, r in enumerate(rates)]
    fig = plot_train_pass_rate(records)
    raw, smooth = fig.axes[0].get_lines()
    assert list(raw.get_xdata()) == [1, 2, 3, 4, 5, 6, 7, 9]
    kept = [r for r in rates if r is not None]
    assert list(smooth.get_ydata()) == pytest.approx([100 * v for v in rolling_mean(kept)])
    assert smooth.get_ydata()[-1] == pytest.approx(100 * (0.4 + 0.5 + 0.3 + 0.6 + 0.7) / 5)
    assert "rolling mean (5 steps)" in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]


def test_validation_plot_draws_intervals_only_where_logged():
    from matplotlib.container import ErrorbarContainer

    records = [
        {
            "step": 5,
            "eval/pass@1": 0.2,
            "eval/pass@1_ci_low": 0.1,
            "eval/pass@1_ci_high": 0.3,
            "eval/pass@8": 0.5,
            "eval/pass@1/easy": 0.4,
        },
        {
            "step": 10,
            "eval/pass@1": 0.3,
            "eval/pass@1_ci_low": None,
            "eval/pass@1_ci_high": 0.4,
            "eval/pass@8": 0.6,
            "eval/pass@8_ci_low": 0.5,
            "eval/pass@8_ci_high": 0.7,
            "eval/pass@1/easy": 0.5,
        },
    ]
    assert interval(records[0], "eval/pass@1") == (0.1, 0.3)
    assert interval(records[1], "eval/pass@1") is None  # one end null: no bar
    assert interval(records[0], "eval/pass@1/easy") is None
    fig = plot_passk(records)
    bars = [c for c in fig.axes[0].containers if isinstance(c, ErrorbarContainer)]
    assert len(bars) == 2  # pass@1 at step 5, pass@8 at step 10; none for the bucket
    (seg,) = bars[0].lines[2][0].get_segments()
    assert seg.ravel().tolist() == pytest.approx([5, 10, 5, 30])
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["pass@1", "pass@8", "pass@1 easy"]  # the bars add no legend entry
    assert plot_passk([{"step": 1, "eval/pass@1_ci_low": 0.1, "eval/pass@1_ci_high": 0.2}]) is None


def test_pass_rate_per_source_plot_and_table(tmp_path):
    records = [
        {
            "step": 1,
            "data/pass_rate/taco": 0.2,
            "data/prompts/taco": 6.0,
            "data/pass_rate/cc": 0.5,
            "data/prompts/cc": 2.0,
        },
        {
            "step": 2,
            "data/pass_rate/taco": 0.4,
            "data/prompts/taco": 6.0,
            "data/pass_rate/cc": None,
            "data/prompts/cc": 2.0,
        },  # nothing of cc judged at step 2 (NaN, written as null)
        {
            "step": 3,
            "data/pass_rate/taco": 0.6,
            "data/prompts/taco": 5.0,
            "data/pass_rate/cc": 0.1,
            "data/prompts/cc": 3.0,
        },
    ]
    assert source_keys(records) == ["cc", "taco"]
    fig = plot_source_pass_rate(records)
    lines = fig.axes[0].get_lines()  # per source: the rate per step, then its trailing mean
    assert len(lines) == 4 and list(lines[0].get_xdata()) == [1, 3]
    assert list(lines[3].get_ydata()) == pytest.approx([20, 30, 40])
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["cc", "taco"]
    assert plot_source_pass_rate([{"step": 1, "data/pass_rate/x": None}]) is None

    run = make_run(tmp_path / "mix", steps=10, total=10)
    page = write_report(run).read_text()
    assert "Pass rate per source" in [alt for alt, _ in images(page)]
    # the table: last step's rate, the trailing mean, prompts over the run and their share (3:1)
    assert "<th>taco</th><td>50.0%</td><td>10</td><td>42.0%</td><td>60</td><td>75.0%</td>" in page
    assert "<th>code_contests</th><td>25.0%</td><td>10</td><td>21.0%</td><td>20</td><td>25.0%</td>" in page
