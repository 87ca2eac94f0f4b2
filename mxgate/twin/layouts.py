"""The oracle's layouts, which run on torch tensors themselves: ``get("aiter-fp4-kv")`` is
``mxgate.oracle.layouts.get("aiter-fp4-kv")`` (``new_buffer(device=...)``, ``scatter`` and
``gather`` on tensors). Kept only while twin modules still import them from here."""

from mxgate.oracle.layouts import get, names

__all__ = ["get", "names"]
