"""``txviz lab``: list the variant zoo and (re)train it, with a progress line per logged step.

    txviz lab list --json
    txviz lab train --variant mqa --variant alibi --steps 600 --out /tmp/zoo
    txviz lab train --all                     # rebuilds assets/zoo (a few minutes per variant)
"""

from __future__ import annotations

import sys
from pathlib import Path


def _progress_line(name: str, report) -> None:
    aux = "" if report.aux_loss is None else f"  aux {report.aux_loss:.3f}"
    print(f"[{name}] step {report.step:5d}/{report.steps}  loss {report.loss:.4f}{aux}  lr {report.lr:.2e}  "
          f"{report.tokens_per_second / 1000:5.1f}k tok/s  {report.seconds:6.1f} s", file=sys.stderr, flush=True)


def cmd_lab_list(args) -> dict:
    from txviz.lab.zoo import listing
    return {"root": str(args.out), "variants": listing(Path(args.out))}


def cmd_lab_train(args) -> dict:
    import torch

    from txviz.lab.zoo import VARIANTS, train_zoo
    if not args.all and not args.variant:
        raise ValueError("name a variant with --variant NAME (repeatable) or train every one with --all")
    torch.set_num_threads(args.threads)
    names = list(VARIANTS) if args.all else args.variant
    rows = train_zoo(names, Path(args.out), args.steps, progress=None if args.json else _progress_line)
    return {"out": str(args.out), "steps": args.steps, "variants": rows}


def add_lab_commands(sub) -> None:
    """Register ``lab list`` and ``lab train`` on the top-level subparsers of txviz.cli."""
    from txviz.lab.zoo import DEFAULT_STEPS
    from txviz.loading.zoo import SHIPPED_ZOO

    lab = sub.add_parser("lab", help="the tiny trained variant zoo: list it, train it")
    lab_sub = lab.add_subparsers(dest="lab_command", required=True)
    p = lab_sub.add_parser("list", help="the variants, and the measured table of those trained")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--out", default=str(SHIPPED_ZOO), help="zoo directory (default: the shipped assets/zoo)")
    p.set_defaults(run=cmd_lab_list)
    p = lab_sub.add_parser("train", help="train variants on the story corpus (CPU, minutes each)")
    p.add_argument("--json", action="store_true", help="print one JSON object, no progress lines")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--variant", action="append", help="a variant name (repeatable); see `txviz lab list`")
    which.add_argument("--all", action="store_true", help="every variant")
    p.add_argument("--steps", type=int, default=DEFAULT_STEPS)
    p.add_argument("--out", default=str(SHIPPED_ZOO), help="writes OUT/<variant>/ (default: assets/zoo)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (tiny models gain little from more)")
    p.set_defaults(run=cmd_lab_train)
