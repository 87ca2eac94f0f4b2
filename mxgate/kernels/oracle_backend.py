"""The oracle as a backend: checked against the exact model and the golden vectors."""

from __future__ import annotations

import importlib.util

import numpy as np

from mxgate import oracle
from mxgate.kernels.base import Backend, Op


class OracleBackend(Backend):
    description = "mxgate's pure-NumPy oracle (gfx950 hardware profile)"

    def __init__(self, device: str = "cpu", profile: str = "gfx950") -> None:
        self.device = device
        self.profile = profile

    def ops(self) -> dict[str, Op]:
        p = self.profile
        table = {
            "e2m1.encode": Op("e2m1.encode", p, lambda x: oracle.encode_e2m1(x, p)),
            "mx.quantize": Op("mx.quantize", p, lambda x: oracle.quantize_mx(x, p)),
            "e4m3fn.encode": Op("e4m3fn.encode", p, lambda x: oracle.encode_e4m3(x, "fn")),
            "e4m3fnuz.encode": Op("e4m3fnuz.encode", p, lambda x: oracle.encode_e4m3(x, "fnuz")),
            "e4m3fn.decode": Op("e4m3fn.decode", p, lambda c: oracle.decode_e4m3(c, "fn")),
            "e4m3fnuz.decode": Op("e4m3fnuz.decode", p, lambda c: oracle.decode_e4m3(c, "fnuz")),
            "bf16.round": Op("bf16.round", p, lambda x: oracle.bf16_bits(np.asarray(x, np.float32))),
            "e8m0.decode": Op("e8m0.decode", p, lambda c: oracle.decode_e8m0(c, p)),
        }
        if importlib.util.find_spec("mxgate.oracle.ops") is not None:
            table.update(_op_level(p))
        return table


def _bind_profile(function, profile: str):
    """Call an op-level oracle under this backend's profile unless the caller names one."""
    import inspect

    if "profile" not in inspect.signature(function).parameters:
        return function

    def run(*args, **kwargs):
        kwargs.setdefault("profile", profile)
        return function(*args, **kwargs)

    run.__name__ = getattr(function, "__name__", "op")
    run.__doc__ = function.__doc__
    return run


def _op_level(profile: str) -> dict[str, Op]:
    from mxgate.oracle import ops

    found: dict[str, Op] = {}
    for op_name, attr in (
        ("indexer_qk_rope_quant_and_cache", "indexer_qk_rope_quant_and_cache"),
        ("pa_mqa_logits_fp4.decode", "pa_mqa_logits_fp4"),
        ("pa_mqa_logits_fp4.prefill", "pa_mqa_logits_fp4_prefill"),
    ):
        function = getattr(ops, attr, None)
        if function is not None:
            found[op_name] = Op(op_name, profile, _bind_profile(function, profile))
    return found
