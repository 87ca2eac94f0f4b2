"""The indexer op under each member of its front-end envelope: what the envelope check needs.

The envelope (``frontend.envelope(profile)``) lists the admissible front ends: rsqrtf correctly
rounded / one ulp below / one ulp above, times FMA contraction or not. K rows may come from any
member; Q rows have no rsqrt, so only the contraction choice applies (``q_members``). This
module computes the members' outputs, their written rows in bytes, and the composite (one
member's bytes per row); ``mxgate.conformance.judge.match_variants`` names the member of each
backend row and makes the verdict.
"""

from __future__ import annotations

import inspect
from typing import Any, Mapping, Sequence

import numpy as np

from mxgate.oracle import layouts
from mxgate.oracle.ops import frontend
from mxgate.oracle.ops.f32math import nan_exact
from mxgate.oracle.ops.frontend import FrontEnd
from mxgate.oracle.ops.indexer import IndexerOutputs, indexer_qk_rope_quant_and_cache, k_values
from mxgate.oracle.ops.indexer_checks import Call, check_call
from mxgate.oracle.xp import ieee_quiet

OUTPUT_NAMES = IndexerOutputs._fields
_SIGNATURE = inspect.signature(indexer_qk_rope_quant_and_cache)


def bind(op_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    bound = _SIGNATURE.bind(**op_kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def _copy_outputs(args: dict[str, Any]) -> dict[str, Any]:
    out = dict(args)
    for name in OUTPUT_NAMES:
        if isinstance(out.get(name), np.ndarray):
            out[name] = out[name].copy()
    return out


def run_member(args: dict[str, Any], variant: FrontEnd, op=None) -> IndexerOutputs:
    """One envelope member's outputs, by ``op`` (NumPy in and out, the oracle's op by default;
    on a device the gate passes the oracle's op run there, ``twin.reference.on_device``)."""
    op = indexer_qk_rope_quant_and_cache if op is None else op
    return IndexerOutputs(*op(**{**_copy_outputs(args), "variant": variant}))


def call_of(args: dict[str, Any]) -> Call:
    return check_call(**args)


def q_members(members: tuple[FrontEnd, ...]) -> list[FrontEnd]:
    """The members Q rows may come from: the default (first) and those differing from it in
    the contraction choice alone (rsqrt does not enter Q)."""
    default = members[0]
    return [default] + [m for m in members if m.rsqrt == "rn" and m.fma != default.fma]


def as_outputs(actual: IndexerOutputs | Sequence[Any] | Mapping[str, Any]) -> IndexerOutputs:
    if isinstance(actual, Mapping):
        return IndexerOutputs(*(actual.get(n) for n in OUTPUT_NAMES))
    items = list(actual) + [None] * (len(OUTPUT_NAMES) - len(actual))
    return IndexerOutputs(*items)


def raw_bytes(a: np.ndarray | None) -> np.ndarray | None:
    """Byte view keeping the array's shape plus a trailing axis of its item size."""
    if a is None:
        return None
    c = np.ascontiguousarray(a)
    return c.view(np.uint8).reshape(c.shape + (c.dtype.itemsize,))


def _u8(a: np.ndarray) -> np.ndarray:
    """A 1-byte array (uint8 or a float8 type) as uint8, sharing memory."""
    return a.view(np.uint8)


def k_rows(outs: IndexerOutputs, call: Call, slots: np.ndarray) -> np.ndarray:
    """The stored bytes of each written K row, gathered through the layouts: [n, bytes]."""
    if call.mode == "fp4":
        (packed,) = layouts.get("aiter-fp4-kv").gather(_u8(outs.kv_cache), slots=slots)
        (scales,) = layouts.get("aiter-fp4-kv-scale").gather(_u8(outs.kv_cache_scale), slots=slots)
        return np.concatenate([packed, scales], axis=1)
    name = "aiter-fp8-kv-preshuffle" if call.preshuffle else "aiter-fp8-kv"
    data, scale = layouts.get(name).gather(_u8(outs.kv_cache), slots=slots)
    return np.concatenate([data, np.ascontiguousarray(scale, "<f4").view(np.uint8).reshape(-1, 4)], axis=1)


def q_rows(outs: IndexerOutputs, call: Call) -> list[np.ndarray]:
    """Logical Q arrays [T, H, ...] in bytes: q_out rows, q scales (FP4), weights_out."""
    t, h = call.num_tokens, call.num_heads
    parts = []
    if call.mode == "fp4":
        (packed,) = layouts.get("aiter-fp4-q").gather(_u8(outs.q_out)[:t])
        (scales,) = layouts.get("aiter-fp4-q-scale").gather(_u8(outs.q_scale_out)[:t], num_heads=h)
        parts += [packed, scales]
    else:
        parts.append(_u8(outs.q_out)[:t])
    parts.append(raw_bytes(outs.weights_out)[:t])
    return parts


def composite(call: Call, runs: dict[FrontEnd, IndexerOutputs], members: tuple[FrontEnd, ...],
              slots: np.ndarray, k_found: np.ndarray, q_tokens: np.ndarray, q_found: np.ndarray) -> IndexerOutputs:
    """The default (first) member's outputs with every matched row replaced by its member's
    bytes: K rows of ``slots`` named by ``k_found``, Q rows (q_tokens x heads) by ``q_found``."""
    default = members[0]
    base = runs[default]
    comp = IndexerOutputs(*(None if a is None else a.copy() for a in base))
    t, h = call.num_tokens, call.num_heads
    for member in members[1:]:
        pick = k_found == member.name
        if not np.any(pick):
            continue
        src = runs[member]
        chosen = slots[pick]
        if call.mode == "fp4":
            kv, ks = layouts.get("aiter-fp4-kv"), layouts.get("aiter-fp4-kv-scale")
            (packed,) = kv.gather(_u8(src.kv_cache), slots=chosen)
            (scales,) = ks.gather(_u8(src.kv_cache_scale), slots=chosen)
            kv.scatter(_u8(comp.kv_cache), packed, slots=chosen)
            ks.scatter(_u8(comp.kv_cache_scale), scales, slots=chosen)
        else:
            layout = layouts.get("aiter-fp8-kv-preshuffle" if call.preshuffle else "aiter-fp8-kv")
            data, scale = layout.gather(_u8(src.kv_cache), slots=chosen)
            layout.scatter(_u8(comp.kv_cache), data, scale, slots=chosen)
    for member in q_members(members)[1:]:
        pick = q_found == member.name
        if not np.any(pick):
            continue
        src = runs[member]
        tokens = np.broadcast_to(q_tokens[:, None], pick.shape)[pick]
        heads = np.broadcast_to(np.arange(h)[None, :], pick.shape)[pick]
        mask = np.full(t, -1, dtype=np.int64)
        mask[q_tokens] = 0
        if call.mode == "fp4":
            for name, layout_name, extra in (("q_out", "aiter-fp4-q", {}),
                                             ("q_scale_out", "aiter-fp4-q-scale", {"num_heads": h})):
                layout = layouts.get(layout_name)
                (mine,) = layout.gather(_u8(getattr(comp, name))[:t], **extra)
                (theirs,) = layout.gather(_u8(getattr(src, name))[:t], **extra)
                mine[tokens, heads] = theirs[tokens, heads]
                layout.scatter(_u8(getattr(comp, name))[:t], mine, slots=mask, **extra)
        else:
            _u8(comp.q_out)[tokens, heads] = _u8(src.q_out)[tokens, heads]
        comp.weights_out[tokens, heads] = src.weights_out[tokens, heads]
    return comp


def frontend_values(variant: str | FrontEnd | None = None, **op_kwargs: Any) -> tuple[Any, Any]:
    """The values the quantizers see, for every token t < T (positions clamped as the kernel
    does for slot < 0): Q float32 [T, H, 128] and K float32 [T, 128], under ``variant``, in the
    arguments' namespace."""
    args = bind(op_kwargs)
    call = call_of({**args, "variant": variant})
    rows = np.arange(call.num_tokens, dtype=np.int64)
    positions = call.put(call.positions)
    cos = frontend.to_f32(call.cos_cache[positions], call.kind)
    sin = frontend.to_f32(call.sin_cache[positions], call.kind)
    with ieee_quiet(call.xp):
        q32 = nan_exact(call.xp, lambda ar: frontend.q_frontend(
            frontend.to_f32(call.q[: call.num_tokens], call.kind), cos, sin, call.is_neox, call.kind,
            call.variant.fma, arith=ar))
        k32 = k_values(call, rows, cos, sin)
    return q32, k32
