"""PNG plots of a run for the docs: reward and pass rate, validation pass@k, verdict mix.

    python bench/plot_run.py RUN_DIR docs/img/cpu-default   # docs/img/cpu-default-{reward,pass-rate,...}.png

The same figures as `codefu report RUN_DIR` (which embeds them in one HTML page).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from codefu.observability.report import (  # noqa: E402
    load_run,
    plot_passk,
    plot_reward,
    plot_train_pass_rate,
    plot_verdicts,
    png,
)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", type=Path)
    p.add_argument("out_prefix", type=Path, help="path prefix of the PNG files")
    args = p.parse_args(argv)
    records = load_run(args.run_dir).records
    args.out_prefix.parent.mkdir(parents=True, exist_ok=True)
    plots = [
        ("reward", plot_reward),
        ("pass-rate", plot_train_pass_rate),
        ("passk", plot_passk),
        ("verdicts", plot_verdicts),
    ]
    for name, plot in plots:
        fig = plot(records)
        if fig is None:
            print(f"{name}: no data in {args.run_dir}")
            continue
        out = args.out_prefix.with_name(f"{args.out_prefix.name}-{name}.png")
        out.write_bytes(png(fig))
        print(out)


if __name__ == "__main__":
    main()
