"""The gate's report files: held by one live run at a time, and written whole or not at all.

A run takes a lock file beside each report path before anything runs (``hold``); a second
live run that names the same path is refused in one line (exit 2) instead of racing the first
for the file. Reports are written to a temporary file in the same folder and moved into place
(``write_atomically``), so a reader never sees half a report.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

SUFFIX = ".mxgate-lock"


class Held(Exception):
    """Another live run holds this report path."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def hold(path: str) -> Path:
    """Take the lock of report ``path`` for this process; Held when another live run has it."""
    lock = Path(os.path.abspath(path) + SUFFIX)
    for _ in range(3):
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            try:
                owner = int(lock.read_text(encoding="utf-8").strip() or "0")
            except (OSError, ValueError):
                owner = 0
            if owner == os.getpid():
                return lock
            if owner and _alive(owner):
                raise Held(f"another mxgate run (pid {owner}) is writing this report; wait for it to end or "
                           f"choose another path (lock file {lock.name})") from None
            lock.unlink(missing_ok=True)  # left by a run that died: take it over
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()}\n")
        return lock
    raise Held(f"could not take the lock file {lock} (another run keeps taking it)")


def release(lock: Path) -> None:
    try:
        if int(lock.read_text(encoding="utf-8").strip() or "0") == os.getpid():
            lock.unlink()
    except (OSError, ValueError):
        pass


def write_atomically(path: str | Path, text: str) -> None:
    target = Path(path)
    fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent or ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # as a plain open() would have made it
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def partial_path(path: str) -> str:
    """A temporary path beside ``path`` for a report another plugin writes (pytest's JUnit XML)."""
    target = Path(os.path.abspath(path))
    return str(target.with_name(f".{target.name}.{os.getpid()}.partial"))


def finish(pending: list[tuple[str, str]], locks: list[Path]) -> None:
    """Move reports written to temporary paths into place, then release this run's locks."""
    for temporary, final in pending:
        if os.path.exists(temporary):
            os.replace(temporary, final)
    for lock in locks:
        release(lock)
