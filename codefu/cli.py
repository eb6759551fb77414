"""The `codefu` command: one subcommand per role, each defined beside the code it drives."""

from __future__ import annotations

import argparse
import sys

from codefu.errors import CodefuError


def build_parser() -> argparse.ArgumentParser:
    from codefu.data import cli as data_cli
    from codefu.judge import audit_cli
    from codefu.judge import cli as judge_cli
    from codefu.launcher import cli as launch_cli
    from codefu.observability import cli as report_cli
    from codefu.orchestrator import cli as train_cli
    from codefu.orchestrator import eval_cli
    from codefu.serve import cli as serve_cli

    parser = argparse.ArgumentParser(prog="codefu", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    train_cli.add_parser(sub)
    eval_cli.add_parser(sub)
    judge_cli.add_parser(sub)
    audit_cli.add_parser(sub)
    serve_cli.add_parser(sub)
    data_cli.add_parser(sub)
    launch_cli.add_parser(sub)
    report_cli.add_parser(sub)
    return parser


def cli_flags() -> list[str]:
    """Every subcommand's options and positionals (`codefu train --config`, ...), for the frozen test of
    the public surface."""
    out = []
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in sorted(sub.choices.items()):
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            out.append(f"codefu {name} {' '.join(action.option_strings) or action.dest}")
    return out


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; `key=value` overrides may come before and after options (`codefu train --config
    C a=1 --run-dir D b=2`: argparse alone takes positionals in one run only), later ones winning."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and hasattr(args, "overrides") and all("=" in e and not e.startswith("-") for e in extra):
        args.overrides = [*args.overrides, *extra]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        return int(args.run(args) or 0)
    except CodefuError as e:
        print(f"codefu {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"codefu {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
