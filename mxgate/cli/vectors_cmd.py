"""``mxgate vectors regen [--check] [--force] [--out DIR]`` and ``mxgate vectors verify [--dir DIR]``.

regen   rebuild every golden vector file deterministically; refuses to replace changed files
        without --force and prints a per-case diff summary first. --check compares only
        (exit 1 when the committed files are not what the oracle produces today, a damaged
        file included); it builds in the system's temporary folder and writes nothing beside
        the data, so a read-only folder (an installed package) can be checked.
verify  check every file against manifest.json (SHA-256 and size); exit 1 naming each bad file.

Also runnable alone: ``python -m mxgate.cli.vectors_cmd regen --check``.

exit status:
  0    regen: written, or already what the oracle produces; verify: every file matches
  1    regen --check: the files differ from what the oracle produces today; regen: changed
       files not replaced (no --force), or the folder holds other entries; verify: a file
       is missing or its SHA-256 or size is not the manifest's
  2    bad usage, said in one line before any work: --out or --dir is not a folder
       (verify and regen --check need an existing one)
  3    an internal error of mxgate (a bug; --debug shows the traceback)
  141  standard output was closed before the report was written
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
    statuses = dict(epilog=__doc__[__doc__.index("exit status:"):],
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    regen = sub.add_parser("regen", help="regenerate the golden vectors deterministically", **statuses)
    regen.add_argument("--check", action="store_true", help="only compare with the files on disk (CI drift check)")
    regen.add_argument("--force", action="store_true", help="replace files whose content changed")
    regen.add_argument("--out", type=Path, default=None, help="vector folder (default: the package's own data folder)")
    verify = sub.add_parser("verify", help="check every vector file against the manifest's SHA-256", **statuses)
    verify.add_argument("--dir", dest="out", type=Path, default=None, help="vector folder (default: the package's own)")
    parser.set_defaults(run=run, func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Execute a parsed ``vectors`` command; returns the exit status."""
    command = getattr(args, "vectors_command", None)
    if command == "regen":
        _check_folder(args.out, "--out", must_exist=args.check)
        status = generator.regen(args.out, check=args.check, force=args.force)
    elif command == "verify":
        _check_folder(args.out, "--dir", must_exist=True)
        status = verify(args.out)
    else:
        raise ValueError(f"vectors command must be 'regen' or 'verify', got {command!r}")
    sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
    return status


def _check_folder(folder: Path | None, option: str, must_exist: bool) -> None:
    """A vector folder given on the command line: a folder, or (regen) one to be created.
    Without this a missing folder reads as "every file failed", status 1, like a real drift."""
    if folder is None:
        return
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{option}: {str(folder)!r} is not a folder")
    if must_exist and not folder.exists():
        raise ValueError(f"{option}: no such folder {str(folder)!r}")


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
    """``python -m mxgate.cli.vectors_cmd regen ...``: the same command, exit statuses and
    one-line errors as ``mxgate vectors regen ...``."""
    from mxgate.cli import main as cli_main

    return cli_main(["vectors", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(main())
