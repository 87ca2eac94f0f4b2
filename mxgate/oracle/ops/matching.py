"""Which admissible front end produced a backend's rows: the envelope check of the indexer op.

``match_variants(actual, **op_kwargs)`` recomputes the op under every member of the envelope
(``frontend.envelope(profile)``), and for every written K row (token with slot >= 0) and
every written Q row (token x head) names the first member whose bytes equal the backend's.
K rows may match any member (rsqrtf correctly rounded / one ulp below / one ulp above, times
FMA contraction or not); Q rows have no rsqrt, so only the contraction choice applies.

The verdict: ``exact`` when every output byte equals the default member's, ``acceptable``
when every byte equals the composite (the default's bytes with each matched row taken from
its member; untouched bytes must still keep their values), ``fail`` otherwise.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from mxgate.oracle import layouts
from mxgate.oracle import profiles as _profiles
from mxgate.oracle.ops import frontend
from mxgate.oracle.ops.frontend import FrontEnd
from mxgate.oracle.ops.indexer import IndexerOutputs, indexer_qk_rope_quant_and_cache, k_values
from mxgate.oracle.ops.validation import Call, check_call

OUTPUT_NAMES = IndexerOutputs._fields
_SIGNATURE = inspect.signature(indexer_qk_rope_quant_and_cache)
_OPTIONS = ("profile", "variant", "mode", "num_blocks", "kv_block_size")


@dataclass
class EnvelopeMatch:
    """Per-row members and the overall verdict of a backend's outputs.

    k_variant: [T] member name per token for its K row; '' where no K row is written, None
               where no member matches.
    q_variant: [T, H] the same for Q rows (q_out row, its scales and weights_out).
    counts:    rows per (side, member) for members other than the default, e.g.
               {'K rsqrt-up+fma': 3}.
    mismatch:  (output name, index) of the first byte that differs from the composite.
    """

    status: str
    reason: str
    default: str
    k_variant: np.ndarray
    q_variant: np.ndarray
    counts: dict[str, int] = field(default_factory=dict)
    mismatch: tuple[str, tuple[int, ...]] | None = None
    mismatches: int = 0
    total: int = 0


def _bind(op_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    bound = _SIGNATURE.bind(**op_kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def _copy_outputs(args: dict[str, Any]) -> dict[str, Any]:
    out = dict(args)
    for name in OUTPUT_NAMES:
        if isinstance(out.get(name), np.ndarray):
            out[name] = out[name].copy()
    return out


def _run(args: dict[str, Any], variant: FrontEnd) -> IndexerOutputs:
    return indexer_qk_rope_quant_and_cache(**{**_copy_outputs(args), "variant": variant})


def _call(args: dict[str, Any]) -> Call:
    return check_call(**{k: v for k, v in args.items()})


def _as_outputs(actual: IndexerOutputs | Sequence[Any] | Mapping[str, Any]) -> IndexerOutputs:
    if isinstance(actual, Mapping):
        return IndexerOutputs(*(actual.get(n) for n in OUTPUT_NAMES))
    items = list(actual) + [None] * (len(OUTPUT_NAMES) - len(actual))
    return IndexerOutputs(*items)


def _raw(a: np.ndarray | None) -> np.ndarray | None:
    """Byte view keeping the array's shape plus a trailing axis of its item size."""
    if a is None:
        return None
    c = np.ascontiguousarray(a)
    return c.view(np.uint8).reshape(c.shape + (c.dtype.itemsize,))


def _u8(a: np.ndarray) -> np.ndarray:
    """A 1-byte array (uint8 or a float8 type) as uint8, sharing memory."""
    return a.view(np.uint8)


def _k_rows(outs: IndexerOutputs, call: Call, slots: np.ndarray) -> np.ndarray:
    """The stored bytes of each written K row, gathered through the layouts: [n, bytes]."""
    if call.mode == "fp4":
        (packed,) = layouts.get("aiter-fp4-kv").gather(_u8(outs.kv_cache), slots=slots)
        (scales,) = layouts.get("aiter-fp4-kv-scale").gather(_u8(outs.kv_cache_scale), slots=slots)
        return np.concatenate([packed, scales], axis=1)
    name = "aiter-fp8-kv-preshuffle" if call.preshuffle else "aiter-fp8-kv"
    data, scale = layouts.get(name).gather(_u8(outs.kv_cache), slots=slots)
    return np.concatenate([data, np.ascontiguousarray(scale, "<f4").view(np.uint8).reshape(-1, 4)], axis=1)


def _q_logical(outs: IndexerOutputs, call: Call) -> list[np.ndarray]:
    """Logical Q arrays [T, H, ...] in bytes: q_out rows, q scales (FP4), weights_out."""
    t, h = call.num_tokens, call.num_heads
    parts = []
    if call.mode == "fp4":
        (packed,) = layouts.get("aiter-fp4-q").gather(_u8(outs.q_out)[:t])
        (scales,) = layouts.get("aiter-fp4-q-scale").gather(_u8(outs.q_scale_out)[:t], num_heads=h)
        parts += [packed, scales]
    else:
        parts.append(_u8(outs.q_out)[:t])
    parts.append(_raw(outs.weights_out)[:t])
    return parts


def _first_match(actual_rows: np.ndarray, candidates: list[np.ndarray], names: list[str]) -> np.ndarray:
    """Per row: the first candidate name whose bytes equal the actual row, else None."""
    flat_actual = actual_rows.reshape(actual_rows.shape[0], -1)
    result = np.full(actual_rows.shape[0], None, dtype=object)
    open_rows = np.ones(actual_rows.shape[0], bool)
    for rows, name in zip(candidates, names):
        hit = open_rows & np.all(flat_actual == rows.reshape(rows.shape[0], -1), axis=1)
        result[hit] = name
        open_rows &= ~hit
    return result


Mismatch = tuple[str, tuple[int, ...]]


def _compare(expected: IndexerOutputs, actual: IndexerOutputs) -> tuple[int, int, Mismatch | None, str]:
    """(differing elements, total elements, first mismatch, shape/dtype problem)."""
    diff_total, total, first = 0, 0, None
    for name in OUTPUT_NAMES:
        e, a = getattr(expected, name), getattr(actual, name)
        if e is None:
            continue
        if a is None or np.shape(a) != e.shape or np.asarray(a).dtype.itemsize != e.dtype.itemsize:
            got = "missing" if a is None else f"shape {np.shape(a)} dtype {np.asarray(a).dtype}"
            return 0, 0, (name, ()), f"{name}: {got}, expected shape {e.shape} dtype {e.dtype}"
        differ = np.any(_raw(e) != _raw(a), axis=-1)
        count = int(np.count_nonzero(differ))
        diff_total += count
        total += differ.size
        if count and first is None:
            first = (name, tuple(int(i) for i in np.argwhere(differ)[0]))
    return diff_total, total, first, ""


def match_variants(actual: IndexerOutputs | Sequence[Any] | Mapping[str, Any],
                   **op_kwargs: Any) -> EnvelopeMatch:
    """Judge a backend's outputs against the envelope.

    op_kwargs: the arguments the backend was called with, output buffers in their state
    *before* the call (they are copied, never written), plus optional ``profile=``.
    actual: the backend's five outputs (IndexerOutputs, a sequence in that order, or a
    mapping by name; FP8 mode has no scale buffers).
    """
    args = _bind(op_kwargs)
    profile = _profiles.get(args["profile"])
    members = frontend.envelope(profile)
    default = members[0]
    call = _call({**args, "variant": default})
    got = _as_outputs(actual)
    base = _run(args, default)

    t, h = call.num_tokens, call.num_heads
    k_variant = np.full(t, "", dtype=object)
    q_variant = np.full((t, h), "", dtype=object)
    diff, total, first, problem = _compare(base, got)
    if problem:
        return EnvelopeMatch("fail", problem, default.name, k_variant, q_variant, mismatch=first)
    k_rows, q_rows = call.k_rows, call.q_rows
    k_variant[k_rows] = default.name
    q_variant[q_rows] = default.name
    if diff == 0:
        return EnvelopeMatch("exact", "", default.name, k_variant, q_variant, total=total)

    runs = {default: base}
    for member in members[1:]:
        runs[member] = _run(args, member)
    names = [m.name for m in members]

    # K rows: any member
    slots = call.slots[k_rows]
    k_found = _first_match(_k_rows(got, call, slots), [_k_rows(runs[m], call, slots) for m in members], names)
    k_variant[k_rows] = k_found
    # Q rows: the contraction choice only (rsqrt does not enter Q)
    q_members = [default] + [m for m in members if m.rsqrt == "rn" and m.fma != default.fma]
    got_q = _q_logical(got, call)
    per_member = {m: _q_logical(runs[m], call) for m in q_members}

    def q_rows_bytes(parts: list[np.ndarray]) -> np.ndarray:
        return np.concatenate([p[q_rows].reshape(q_rows.size, h, -1) for p in parts], axis=-1)

    q_found = _first_match(
        q_rows_bytes(got_q).reshape(q_rows.size * h, -1),
        [q_rows_bytes(per_member[m]).reshape(q_rows.size * h, -1) for m in q_members],
        [m.name for m in q_members],
    ).reshape(q_rows.size, h)
    q_variant[q_rows] = q_found

    composite = _composite(call, runs, default, members, q_members, k_rows, slots, k_found, q_rows, q_found)
    diff, total, first, _ = _compare(composite, got)
    counts: dict[str, int] = {}
    for side, found in (("K", k_found), ("Q", q_found.reshape(-1))):
        for name in names:
            n = int(np.count_nonzero(found == name))
            if n and name != default.name:
                counts[f"{side} {name}"] = n
    unmatched_k = int(np.count_nonzero(k_found == None))  # noqa: E711 - object array
    unmatched_q = int(np.count_nonzero(q_found == None))  # noqa: E711
    if diff == 0:
        detail = "; ".join(f"{n} {key.split(' ')[0]} rows match {key.split(' ', 1)[1]} "
                           f"({frontend.get_variant(key.split(' ', 1)[1]).describe()})"
                           for key, n in counts.items())
        return EnvelopeMatch("acceptable", f"front end within the rsqrt/FMA envelope: {detail}", default.name,
                             k_variant, q_variant, counts, total=total)
    parts = []
    if unmatched_k:
        bad = k_rows[np.flatnonzero(k_found == None)]  # noqa: E711
        parts.append(f"K rows of {unmatched_k} tokens match no admissible front end (first: token {int(bad[0])})")
    if unmatched_q:
        bad = np.argwhere(q_found == None)[0]  # noqa: E711
        parts.append(f"{unmatched_q} Q rows match no admissible front end "
                     f"(first: token {int(q_rows[bad[0]])}, head {int(bad[1])})")
    where = f"{first[0]}{list(first[1])}" if first else "?"
    parts.append(f"{diff} of {total} elements differ from the envelope's bytes, first at {where}")
    return EnvelopeMatch("fail", "; ".join(parts), default.name, k_variant, q_variant, counts,
                         mismatch=first, mismatches=diff, total=total)


def _composite(call: Call, runs: dict[FrontEnd, IndexerOutputs], default: FrontEnd, members: tuple[FrontEnd, ...],
               q_members: list[FrontEnd], k_rows: np.ndarray, slots: np.ndarray, k_found: np.ndarray,
               q_rows: np.ndarray, q_found: np.ndarray) -> IndexerOutputs:
    """The default member's outputs with every matched row replaced by its member's bytes."""
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
    other = [m for m in q_members if m != default]
    for member in other:
        pick = q_found == member.name
        if not np.any(pick):
            continue
        src = runs[member]
        tokens = np.broadcast_to(q_rows[:, None], pick.shape)[pick]
        heads = np.broadcast_to(np.arange(h)[None, :], pick.shape)[pick]
        mask = np.full(t, -1, dtype=np.int64)
        mask[q_rows] = 0
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


def frontend_values(variant: str | FrontEnd | None = None, **op_kwargs: Any) -> tuple[np.ndarray, np.ndarray]:
    """The values the quantizers see, for every token t < T (positions clamped as the kernel
    does for slot < 0): Q float32 [T, H, 128] and K float32 [T, 128], under ``variant``."""
    args = _bind(op_kwargs)
    call = _call({**args, "variant": variant})
    rows = np.arange(call.num_tokens, dtype=np.int64)
    cos = frontend.to_f32(call.cos_cache[call.positions], call.kind)
    sin = frontend.to_f32(call.sin_cache[call.positions], call.kind)
    with np.errstate(over="ignore", invalid="ignore"):
        q32 = frontend.to_f32(call.q[: call.num_tokens], call.kind).copy()
        q32 = frontend.q_frontend(q32, cos, sin, call.is_neox, call.kind, call.variant.fma)
        k32 = k_values(call, rows, cos, sin)
    return q32, k32
