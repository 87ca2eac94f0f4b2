"""``mxgate backends``: every backend the gate can judge, where it comes from, whether it can run
here (and why not), and the ops it implements with their declared profiles."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

EPILOG = """exit status:
  0  listed
  2  usage error (a --backend spec that cannot be imported or is not a backend)"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("backends", help="list the backends: origin, availability, ops and profiles",
                            description=__doc__, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", action="append", default=[], metavar="module:attr",
                        help="also list this backend spec (repeatable)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--json", action="store_true", help="print the list as JSON")
    parser.add_argument("--ops", action="store_true",
                        help="print the op table instead: every canonical op, its inputs, outputs, comparison, "
                             "oracle reference and profile fields (Markdown; docs/ops/table.md)")
    parser.set_defaults(run=run)


def describe(name: str, device: str) -> dict[str, Any]:
    """One backend as the list shows it (never raises for a backend's own fault)."""
    from mxgate import kernels

    entry: dict[str, Any] = {"name": name, "origin": str(kernels.origin(name))}
    try:
        backend = kernels.get(name, device)
        status = backend.available()
        entry.update(available=bool(status), reason=status.reason, description=backend.description)
    except Exception as error:  # noqa: BLE001 - a broken adapter is listed with its error
        entry.update(available=False, reason=f"{type(error).__name__}: {error}", description="", ops={})
        return entry
    try:
        entry["ops"] = {op: spec.profile for op, spec in sorted(backend.ops().items())}
    except Exception as error:  # noqa: BLE001 - e.g. ops() needs the absent package
        entry["ops"] = {}
        entry["ops_error"] = f"{type(error).__name__}: {error}"
    return entry


def run(args: argparse.Namespace) -> int:
    if args.ops:
        from mxgate import op_table

        print(op_table.markdown(), end="", flush=True)
        return 0
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from mxgate import kernels

    for spec in args.backend:
        kernels.check_name(spec)
    names = kernels.names() + [s for s in dict.fromkeys(args.backend) if s not in kernels.names()]
    entries = [describe(name, args.device) for name in names]
    if args.json:
        print(json.dumps(entries, indent=1, sort_keys=True))
        return 0
    for e in entries:
        state = "available" if e["available"] else f"not supported here: {e['reason']}"
        print(f"{e['name']}  [{e['origin']}]  {state}")
        if e.get("description"):
            print(f"    {e['description']}")
        by_profile: dict[str, list[str]] = {}
        for op, profile in e["ops"].items():
            by_profile.setdefault(profile, []).append(op)
        for profile, ops in sorted(by_profile.items()):
            print(f"    {profile}: {', '.join(ops)}")
        if e.get("ops_error"):
            print(f"    ops not listed: {e['ops_error']}")
    return 0
