"""``mxgate vectors regen [--check] [--force] [--out DIR]`` and ``mxgate vectors verify [--dir DIR]``.

regen   rebuild every golden vector file deterministically; refuses to replace changed files
        without --force and prints a per-case diff summary first. --check compares only
        (exit 1 when the committed files are not what the oracle produces today).
verify  check every file against manifest.json (SHA-256 and size); exit 1 naming each bad file.

Also runnable alone: ``python -m mxgate.cli.vectors_cmd regen --check``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mxgate.vectors import generator, manifest


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``vectors`` (with ``regen`` and ``verify``) on an argparse subparsers object."""
    parser = subparsers.add_parser("vectors", help="regenerate or verify the golden vector files",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="vectors_command", metavar="{regen,verify}")
    sub.required = True
    regen = sub.add_parser("regen", help="regenerate the golden vectors deterministically")
    regen.add_argument("--check", action="store_true", help="only compare with the files on disk (CI drift check)")
    regen.add_argument("--force", action="store_true", help="replace files whose content changed")
    regen.add_argument("--out", type=Path, default=None, help="vector folder (default: the package's own data folder)")
    verify = sub.add_parser("verify", help="check every vector file against the manifest's SHA-256")
    verify.add_argument("--dir", dest="out", type=Path, default=None, help="vector folder (default: the package's own)")
    parser.set_defaults(run=run, func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Execute a parsed ``vectors`` command; returns the exit status."""
    command = getattr(args, "vectors_command", None)
    if command == "regen":
        return generator.regen(args.out, check=args.check, force=args.force)
    if command == "verify":
        return verify(args.out)
    raise ValueError(f"vectors command must be 'regen' or 'verify', got {command!r}")


def verify(directory: Path | None = None) -> int:
    directory = Path(directory) if directory is not None else generator.package_data_dir()
    note = generator.recover(directory)
    if note:
        print(note)
    statuses = manifest.verify_dir(directory)
    for s in statuses:
        print(f"{'ok  ' if s.ok else 'FAIL'} {s.name}: {s.message}")
    bad = [s for s in statuses if not s.ok]
    if bad:
        print(f"{len(bad)} vector file(s) failed verification in {directory}: {', '.join(s.name for s in bad)}")
        return 1
    print(f"all {len(statuses)} vector files verified in {directory}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m mxgate.cli.vectors_cmd regen ...``: the same as ``mxgate vectors regen ...``."""
    parser = argparse.ArgumentParser(prog="mxgate")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["vectors"] + list(sys.argv[1:] if argv is None else argv))
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
