"""The oracle as a backend: checked against the exact model and the golden vectors."""

from __future__ import annotations

import numpy as np

from mxgate import op_table
from mxgate.op_table import OpName
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
            OpName.E2M1_ENCODE: Op(OpName.E2M1_ENCODE, p, lambda x: oracle.encode_e2m1(x, p)),
            OpName.MX_QUANTIZE: Op(OpName.MX_QUANTIZE, p, lambda x: oracle.quantize_mx(x, p)),
            OpName.MX_QUANTIZE_E4M3FN: Op(OpName.MX_QUANTIZE_E4M3FN, p, lambda x: oracle.quantize_mx_e4m3fn(x, p)),
            OpName.E4M3FN_ENCODE: Op(OpName.E4M3FN_ENCODE, p, lambda x: oracle.encode_e4m3(x, "fn")),
            OpName.E4M3FNUZ_ENCODE: Op(OpName.E4M3FNUZ_ENCODE, p, lambda x: oracle.encode_e4m3(x, "fnuz")),
            OpName.E4M3FN_DECODE: Op(OpName.E4M3FN_DECODE, p, lambda c: oracle.decode_e4m3(c, "fn")),
            OpName.E4M3FNUZ_DECODE: Op(OpName.E4M3FNUZ_DECODE, p, lambda c: oracle.decode_e4m3(c, "fnuz")),
            OpName.BF16_ROUND: Op(OpName.BF16_ROUND, p, lambda x: oracle.bf16_bits(np.asarray(x, np.float32))),
            OpName.E8M0_DECODE: Op(OpName.E8M0_DECODE, p, lambda c: oracle.decode_e8m0(c, p)),
            OpName.E2M1_DECODE: Op(OpName.E2M1_DECODE, p, oracle.decode_e2m1),
            OpName.E8M0_SCALE: Op(OpName.E8M0_SCALE, p, lambda amax: oracle.e8m0_scale(amax, p)),
            OpName.UE8M0_ROUND: Op(OpName.UE8M0_ROUND, p, lambda s: oracle.scales.ue8m0_round(s, oracle.profiles.get(p).ue8m0_rounding)),
            OpName.FP4_INDEXER_QUANTIZE: Op(OpName.FP4_INDEXER_QUANTIZE, p, lambda x: oracle.quantize_mx(_bf16_f32(x), p)),
            OpName.AITER_FP4_KV_STORE: Op(OpName.AITER_FP4_KV_STORE, p, self._aiter_store),
            OpName.SGLANG_PAGE68_STORE: Op(OpName.SGLANG_PAGE68_STORE, p, self._page68_store),
            OpName.SGLANG_PAGE8_STORE: Op(OpName.SGLANG_PAGE8_STORE, p, self._page8_store),
            OpName.SGLANG_PAGE68_GATHER: Op(OpName.SGLANG_PAGE68_GATHER, p, _page68_gather),
        }
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
    """The op-level oracle functions, as the op table names them, under this backend's profile."""
    ops = (OpName.INDEXER_QK_ROPE_QUANT_AND_CACHE, OpName.PA_MQA_LOGITS_FP4_DECODE,
           OpName.PA_MQA_LOGITS_FP4_PREFILL, OpName.PA_MQA_LOGITS_FP8_DECODE)
    return {op: Op(op, profile, _bind_profile(op_table.reference(op), profile)) for op in ops}
