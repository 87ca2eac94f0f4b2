"""``mxgate profiles``: every named profile, its fields and who ships it."""

from __future__ import annotations

import argparse
import json

from mxgate.oracle import profiles


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("profiles", help="list the semantic profiles and their fields")
    parser.add_argument("name", nargs="?", help="show one profile (default: all)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    chosen = [profiles.get(args.name)] if args.name else [profiles.get(n) for n in profiles.names()]
    if args.json:
        print(json.dumps([p.as_dict() for p in chosen], indent=2, sort_keys=True))
        return 0
    hardware = profiles.hardware()
    for p in chosen:
        print(f"{p.name}: {p.shipped_by}")
        for key, value in p.as_dict().items():
            if key in ("name", "shipped_by", "notes"):
                continue
            marker = "  *" if p is not hardware and key in p.differences(hardware) else "   "
            print(f"{marker} {key:<17} {value}")
        if p.notes:
            print(f"    note: {p.notes}")
        print()
    print("* = differs from the gfx950 hardware profile")
    return 0
