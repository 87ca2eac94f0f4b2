"""Triton's CPU interpreter, made cheaper where it does work whose result nothing reads.

Both changes leave every byte a kernel writes as it was (tests/test_sglang_adapter.py compares
the bytes with and without them); each is applied only where the interpreter has the names it
changes, and ``speed_up`` is what ``sources.env_scope`` calls before an interpreted launch.
"""

from __future__ import annotations

import inspect
import sys
import threading
from dataclasses import is_dataclass, replace
from typing import Any

_LOCK = threading.Lock()


def speed_up() -> None:
    """Apply both changes to the interpreter this process imported (no-op before it is imported)."""
    skip_dead_overflow_checks()
    patch_language_once_per_launch()


def skip_dead_overflow_checks() -> bool:
    """Stop the CPU interpreter computing integer-overflow checks that it then drops unread.

    With ``sanitize_overflow`` on (the interpreter's default), every integer add, sub and mul
    is done again in int64 and compared with the type's range, to feed ``device_assert``; that
    is a no-op unless the builder's ``options.debug``, which the interpreter never sets (the
    compiled path drops those asserts the same way without debug). The work was a quarter to a
    third of an sglang quantize call under the interpreter. Returns whether the checks are off;
    a triton without these names, or one in debug mode, is left as it is.
    """
    interpreter = sys.modules.get("triton.runtime.interpreter")
    builder = getattr(interpreter, "interpreter_builder", None)
    options = getattr(builder, "options", None)
    if options is None or not is_dataclass(options) or getattr(options, "debug", True):
        return False
    if getattr(options, "sanitize_overflow", None) is True:
        builder.options = replace(options, sanitize_overflow=False)
    return getattr(builder.options, "sanitize_overflow", None) is False


class _Unchanged:
    """The scope of a language patch that was skipped: nothing to put back."""

    def restore(self) -> None:
        pass


class _LaunchState(threading.local):
    patched: set[int] | None = None  # ids of the language modules patched in the launch running


_STATE = _LaunchState()


def patch_language_once_per_launch() -> bool:
    """Patch ``triton.language`` once per launch instead of once per device-function call.

    A launch (``GridExecutor.__call__``) patches the language modules its kernel sees, and every
    nested ``@triton.jit`` call patches the modules its own function sees again
    (``InterpretedFunction.__call__``; that scope is never restored). Inside one launch a module
    patched once stays patched with the same stateless wrappers, so a repeat only spends
    ``inspect.getmembers`` over triton.language: a third of an sglang quantize call. The first
    patch of each module in a launch still runs. Returns whether the wrappers are in place; a
    triton without these names is left as it is.
    """
    interpreter = sys.modules.get("triton.runtime.interpreter")
    executor = getattr(interpreter, "GridExecutor", None)
    patch = getattr(interpreter, "_patch_lang", None)
    if executor is None or patch is None or not hasattr(executor, "__call__"):
        return False
    with _LOCK:
        if getattr(patch, "_mxgate_once_per_launch", False):
            return True
        import triton.language as tl

        languages = (tl, tl.core)

        def patch_lang(fn: Any) -> Any:
            seen = {id(value) for value in fn.__globals__.values()
                    if inspect.ismodule(value) and any(value is lang for lang in languages)}
            patched = _STATE.patched
            if patched is not None and seen and seen <= patched:
                return _Unchanged()
            scope = patch(fn)
            if patched is not None:
                patched |= seen
            return scope

        launch = executor.__call__

        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            outer, _STATE.patched = _STATE.patched, set()
            try:
                return launch(self, *args, **kwargs)
            finally:
                _STATE.patched = outer

        patch_lang._mxgate_once_per_launch = True  # type: ignore[attr-defined]
        patch_lang._mxgate_original = patch  # type: ignore[attr-defined]
        call._mxgate_original = launch  # type: ignore[attr-defined]
        interpreter._patch_lang = patch_lang
        executor.__call__ = call
        return True


def undo_language_patch_once_per_launch() -> None:
    """Put the interpreter's own ``_patch_lang`` and launch back (for the tests' comparison)."""
    interpreter = sys.modules.get("triton.runtime.interpreter")
    if interpreter is None:
        return
    with _LOCK:
        patch = getattr(interpreter, "_patch_lang", None)
        if getattr(patch, "_mxgate_once_per_launch", False):
            interpreter._patch_lang = patch._mxgate_original
            interpreter.GridExecutor.__call__ = interpreter.GridExecutor.__call__._mxgate_original
