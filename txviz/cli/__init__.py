"""The ``txviz`` command line: fetch, info, trace, generate, coref, patch, circuit, qk, memory, bench, lab — each with
``--json`` for scripts. This module assembles the parser and runs a command; each command (or family of
commands) lives in its own module beside it, with its arguments and what it does."""

from __future__ import annotations

import argparse
import json
import sys

TEXT_COMMANDS = ("generate", "coref", "patch", "circuit", "bench")  # these print their own text without --json


def build_parser() -> argparse.ArgumentParser:
    from txviz.cli import bench, circuit, coref, fetch, generate, memory, patch, trace
    from txviz.cli.model_options import add_model_options
    parser = argparse.ArgumentParser(prog="txviz", description="See inside a real decoder-only transformer.")
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help: str, *, model: bool = True) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help)
        p.add_argument("--json", action="store_true",
                       help="print one JSON object on one line (without it: the same object indented, or text for "
                            "generate, coref, patch and bench)")
        if model:
            add_model_options(p)
        return p

    for family in (fetch, trace, generate, coref, patch, circuit, memory, bench):
        family.register(command)
    from txviz.lab.cli import add_lab_commands
    add_lab_commands(sub)  # lab list / lab train
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result = args.run(args)
    except (ValueError, FileNotFoundError) as error:  # our errors are ValueErrors with a message for people
        if getattr(args, "json", False):
            print(json.dumps({"error": str(error), "type": type(error).__name__}))
        else:
            print(f"txviz: error: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result))
    elif args.command not in TEXT_COMMANDS:
        print(json.dumps(result, indent=2))
    return 0
