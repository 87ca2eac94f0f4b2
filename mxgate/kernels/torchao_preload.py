"""Imported by a fork server whose workers include several torchao backends
(``isolation.shared_preloads``): torchao's MX formats once, without its import-time noise, so
that each worker forked from it does not pay about a second of CPU to import them again.

Where torchao is not installed nothing happens (its backends say so without importing it). An
import that fails ends the server, silently: a half-done import could leave state behind that a
worker's own import would trip over. The gate then spawns each worker, which imports torchao in
a fresh interpreter and reports why it cannot, as it would with no preload."""

import contextlib
import importlib.util
import io
import os

if importlib.util.find_spec("torchao") is not None:
    from mxgate.kernels.quiet import quiet_import

    try:
        with contextlib.redirect_stderr(io.StringIO()):  # what quiet_import re-emits on failure
            quiet_import("torchao.prototype.mx_formats")
    except BaseException:  # noqa: BLE001 - never the server's to report: each worker imports it again
        os._exit(1)
