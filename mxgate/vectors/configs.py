"""The op-level configuration matrices and their readable ids (e.g. ``fp4-T8-H32-neox-allq``).

FP4: the 16 configs of AITER PR #5484's byte-exact check (tokens 8/32 x heads 32/64 x
compute_all_q_rope x is_neox). FP8: 192 configs spanning both scale_fmt values, both preshuffle
values, both is_neox, both compute_all_q_rope and three token counts, as the PR's FP8 check
does; the PR does not name its remaining factor of 4, so heads (2, 8) x q dtype (bf16, fp16)
fill it here.
"""

from __future__ import annotations

from itertools import product
from typing import Any

FP4_TOKENS = (8, 32)
FP4_HEADS = (32, 64)
FP8_TOKENS = (1, 4, 9)
FP8_HEADS = (2, 8)
FP8_SCALE_FMTS = ("ue8m0", "float")
Q_DTYPES = ("bf16", "fp16")


def config_id(mode: str, tokens: int, heads: int, is_neox: bool, compute_all_q_rope: bool, *,
              scale_fmt: str | None = None, preshuffle: bool | None = None, q_dtype: str = "bf16") -> str:
    """A readable test id: ``fp4-T8-H32-neox-allq``, ``fp8-T4-H8-gptj-slotq-ue8m0-shuf-fp16``."""
    parts = [mode, f"T{tokens}", f"H{heads}", "neox" if is_neox else "gptj", "allq" if compute_all_q_rope else "slotq"]
    if scale_fmt is not None:
        parts.append(scale_fmt)
    if preshuffle is not None:
        parts.append("shuf" if preshuffle else "flat")
    if q_dtype != "bf16":
        parts.append(q_dtype)
    return "-".join(parts)


def fp4_configs() -> list[dict[str, Any]]:
    out = []
    for tokens, heads, allq, neox in product(FP4_TOKENS, FP4_HEADS, (False, True), (True, False)):
        cfg = {"mode": "fp4", "tokens": tokens, "heads": heads, "compute_all_q_rope": allq, "is_neox": neox,
               "scale_fmt": "ue8m0", "preshuffle": False, "q_dtype": "bf16", "kv_block_size": 64}
        cfg["id"] = config_id("fp4", tokens, heads, neox, allq)
        out.append(cfg)
    return out


def fp8_configs() -> list[dict[str, Any]]:
    out = []
    for fmt, shuf, neox, allq, tokens, heads, dtype in product(
        FP8_SCALE_FMTS, (False, True), (True, False), (False, True), FP8_TOKENS, FP8_HEADS, Q_DTYPES
    ):
        cfg = {"mode": "fp8", "tokens": tokens, "heads": heads, "compute_all_q_rope": allq, "is_neox": neox,
               "scale_fmt": fmt, "preshuffle": shuf, "q_dtype": dtype, "kv_block_size": 16}
        cfg["id"] = config_id("fp8", tokens, heads, neox, allq, scale_fmt=fmt, preshuffle=shuf, q_dtype=dtype)
        out.append(cfg)
    return out


def quick_ids() -> set[str]:
    """The few op configs the quick tier runs."""
    return {"fp4-T8-H32-neox-allq", "fp4-T32-H64-gptj-slotq", "fp8-T4-H2-neox-slotq-ue8m0-flat",
            "fp8-T9-H8-gptj-allq-float-shuf-fp16"}
