"""Imported by a fork server whose workers include several torchao backends
(``isolation.shared_preloads``): torchao's MX formats once, without its import-time noise, so
that each worker forked from it does not pay about a second of CPU to import them again. A
failure is left to the workers, whose own import reports it as that backend's load fault."""

from mxgate.kernels.quiet import quiet_import

try:
    quiet_import("torchao.prototype.mx_formats")
except Exception:  # noqa: BLE001 - never the server's fault: each worker imports it again and says why
    pass
