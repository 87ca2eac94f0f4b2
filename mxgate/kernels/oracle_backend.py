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
            "e2m1.decode": Op("e2m1.decode", p, oracle.decode_e2m1),
            "e8m0.scale": Op("e8m0.scale", p, lambda amax: oracle.e8m0_scale(amax, p)),
            "ue8m0.round": Op("ue8m0.round", p, lambda s: oracle.scales.ue8m0_round(s, oracle.profiles.get(p).ue8m0_rounding)),
            "fp4_indexer.quantize": Op("fp4_indexer.quantize", p, lambda x: oracle.quantize_mx(_bf16_f32(x), p)),
            "aiter-fp4-kv.store": Op("aiter-fp4-kv.store", p, self._aiter_store),
            "sglang-page68.store": Op("sglang-page68.store", p, self._page68_store),
            "sglang-page8.store": Op("sglang-page8.store", p, self._page8_store),
            "sglang-page68.gather": Op("sglang-page68.gather", p, _page68_gather),
        }
        if importlib.util.find_spec("mxgate.oracle.ops") is not None:
            table.update(_op_level(p))
        return table


    def _aiter_store(self, k_bf16: np.ndarray, slots: np.ndarray, kv_cache: np.ndarray, kv_scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self._split_store("aiter-fp4-kv", k_bf16, slots, kv_cache, kv_scale)

    def _page8_store(self, k_bf16: np.ndarray, slots: np.ndarray, kv_cache: np.ndarray, kv_scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self._split_store("sglang-page8", k_bf16, slots, kv_cache, kv_scale)

    def _split_store(self, layout: str, k_bf16: np.ndarray, slots: np.ndarray, kv_cache: np.ndarray, kv_scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Quantize K rows and scatter them through a payload layout and its ``-scale`` companion."""
        packed, e8m0 = oracle.quantize_mx(_bf16_f32(k_bf16), self.profile)
        cache, scale = kv_cache.copy(), kv_scale.copy()
        oracle.layouts.get(layout).scatter(cache, packed, slots=slots)
        oracle.layouts.get(f"{layout}-scale").scatter(scale, e8m0, slots=slots)
        return cache, scale

    def _page68_store(self, k_bf16: np.ndarray, slots: np.ndarray, cache: np.ndarray) -> np.ndarray:
        packed, e8m0 = oracle.quantize_mx(_bf16_f32(k_bf16), self.profile)
        out = cache.copy()
        oracle.layouts.get("sglang-page68").scatter(out, packed, e8m0, slots=slots)
        return out


def _page68_gather(cache: np.ndarray, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    packed, e8m0 = oracle.layouts.get("sglang-page68").gather(cache, slots=slots)
    return packed, e8m0


def _bf16_f32(x: np.ndarray) -> np.ndarray:
    """bf16 given as ml_dtypes.bfloat16 or raw uint16 bits -> float32 (exact)."""
    if x.dtype == np.uint16:
        return oracle.bf16_to_f32(x)
    if x.dtype.name != "bfloat16":
        raise TypeError(f"x must be bf16 (ml_dtypes.bfloat16 or uint16 bit patterns), got {x.dtype}")
    return x.astype(np.float32)


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
        ("pa_mqa_logits_fp8.decode", "pa_mqa_logits_fp8"),
    ):
        function = getattr(ops, attr, None)
        if function is not None:
            found[op_name] = Op(op_name, profile, _bind_profile(function, profile))
    return found
