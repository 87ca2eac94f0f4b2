"""``mxgate profiles``: every named profile, its fields and who ships it; ``--variations``
writes docs/permitted-variations.md from the profiles and the known findings."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from mxgate.oracle import profiles

EPILOG = """exit status:
  0    the profiles were listed
  2    an unknown profile name (the valid names are listed), said in one line
  3    an internal error of mxgate (a bug; --debug shows the traceback)
  141  standard output was closed early (mxgate profiles | head -1): the rest is dropped
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("profiles", help="list the semantic profiles and their fields",
                            description=__doc__, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", nargs="?", help="show one profile (default: all)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--variations", action="store_true",
                        help="print docs/permitted-variations.md (every profile's differences from the neutral base "
                        "with its evidence, and the known findings)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    chosen = [profiles.get(args.name)] if args.name else [profiles.get(n) for n in profiles.names()]
    if args.variations:
        from mxgate.conformance import variations

        sys.stdout.write(variations.render())
    elif args.json:
        print(json.dumps([dataclasses.asdict(p) for p in chosen], indent=2, sort_keys=True))
    else:
        _print_text(chosen)
    # Output to a pipe is buffered: flush here so a reader that went away (head -1) shows as
    # BrokenPipeError inside the command, where mxgate.cli.main turns it into status 141,
    # not as a traceback while the interpreter shuts down.
    sys.stdout.flush()
    return 0


def _print_text(chosen: list[profiles.Profile]) -> None:
    hardware = profiles.hardware()
    for p in chosen:
        print(f"{p.name}: {p.shipped_by}")
        for key, value in p.as_dict().items():
            if key in profiles.DESCRIPTIVE_FIELDS:
                continue
            marker = "  *" if p is not hardware and key in p.differences(hardware) else "   "
            print(f"{marker} {key:<17} {value}")
        if p.notes:
            print(f"    note: {p.notes}")
        if p.evidence:
            print(f"    evidence: {p.evidence}")
        print()
    print("* = differs from the gfx950 hardware profile")
