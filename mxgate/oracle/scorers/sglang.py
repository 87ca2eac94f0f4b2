"""sglang's Hopper FP4 index scorer (``fp4_index_logits_decode`` / ``fp4_index_logits_paged``),
a profile of its own: bf16 Q against the FP4 index-K pool (``sglang-page68`` layout), with the
torch reference's bf16 rounding points.

Per request b and position l < min(lens[b], L), K = the pool row at slot (decode: slots[b, l];
paged: req_table[req[b], l * ratio] // ratio):
    k      = bf16(E2M1 * 2^(e - 127))          (exact: 2-bit mantissas; 0xFF per the profile)
    acc    = dot(q_even, k_even) + dot(q_odd, k_odd)     (two fp32 MMAs; ``qk_accum``)
    s      = bf16(acc);  s = relu(s) keeping NaN;  p = bf16(s * w)
    logit  = bf16(sum_h p_h)   (fp32 sum, ``head_order``) as float32; -inf where l >= min(lens, L)
qk_accum: "fp32-ksteps" (default: the 128 products exact, one rounding to fp32) or "two-dots" (the
even dot rounded, then the odd dot added with one rounding). Both unverified on the device.
Value X = sum_h relu(qk_h) w_h (integers, one rounding). Bound (any fp32 order of the
dots and of the head sum; ``bound_model`` "any-order" by default, see scorers.arithmetic):
    delta'_h = delta_h + u_b (|qk_h| + delta_h) + eta_b       (bf16 of the dot)
    u2 = u_b + u + u_b u                                        (fp32 product, then bf16)
    Dp = sum_h [delta'_h + u2 (r_h + delta'_h)] |w_h| + H (eta + eta_b)
    P  = sum_h (1 + u2)(r_h + delta'_h) |w_h| + H (eta + eta_b)
    |out - X| <= (1 + u_b)(Dp + gamma_{H-1} P) + u_b |X| + eta_b   (+ 2^-51 |value|, x (1 + 2^-40))
u_b = 2^-8, eta_b = 2^-134. The float64 sums over heads (Dp, P, the value where a dot or a weight
is not finite) run left to right (scorers.arithmetic.sum_heads), and so does sum_d |q_d| |k_d|
where it is not exact: the same bytes on any machine, and for the twin (mxgate.twin.scorers).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from mxgate import oracle
from mxgate.oracle import layouts
from mxgate.oracle import profiles as _profiles
from mxgate.oracle.geometry import GROUP, HEAD_DIM, ROW_GROUPS, TOKEN_BYTES
from mxgate.oracle.scorers import arithmetic as ar
from mxgate.oracle.scorers import common as v
from mxgate.oracle.scorers.arithmetic import HEAD_ORDERS, add_round_f32, bf16_parts, f32_nearest, f32_parts, head_sum
from mxgate.oracle.scorers.arithmetic import pow2_f64, weighted_sum_f64
from mxgate.oracle.scorers.common import ANY_ORDER, KSTEPS, QK_MODELS, ScoredLogits

TWO_DOTS = "two-dots"
QK_ACCUM = (KSTEPS, TWO_DOTS)
SPAN_FAST = 34  # q and k exponent spans of one cell: 128 * 2^(8+sq) * 12 * 2^sk < 2^53
CELLS_PER_CHUNK = 1 << 17


def fp4_index_logits_decode(q: np.ndarray, weights: np.ndarray, slots: np.ndarray, lens: np.ndarray,
                            table: np.ndarray, page_size: int, *, qk_accum: str = KSTEPS,
                            head_order: str = "pairwise", profile: str | _profiles.Profile = "sglang-rne") -> np.ndarray:
    """sglang ``fp4_index_logits_decode`` -> float32 [B, L] (emulated order).

    q bf16 [B, H, 128] (ml_dtypes.bfloat16 or uint16 bits); weights [B, H] bf16, or float32
    (rounded to bf16 as the wrapper's ``.to(torch.bfloat16)``); slots int [B, L]; lens int [B];
    table uint8 [num_pages, page_size * 68]. profile: e8m0 byte 0 / 255 decoding.
    """
    return _score(q, weights, slots, lens, table, page_size, qk_accum, head_order, profile, ANY_ORDER,
                  emulate=True, with_bound=False).emulated


def fp4_index_logits_decode_scored(q: np.ndarray, weights: np.ndarray, slots: np.ndarray, lens: np.ndarray,
                                  table: np.ndarray, page_size: int, *, qk_accum: str = KSTEPS,
                                  head_order: str = "pairwise", profile: str | _profiles.Profile = "sglang-rne",
                                  bound_model: str = ANY_ORDER, emulate: bool = True) -> ScoredLogits:
    """Value, bound and emulated order of ``fp4_index_logits_decode``."""
    return _score(q, weights, slots, lens, table, page_size, qk_accum, head_order, profile, bound_model,
                  emulate=emulate, with_bound=True)


def paged_slots(req: np.ndarray, req_table: np.ndarray, lens: np.ndarray, capacity: int, ratio: int = 1) -> np.ndarray:
    """The slots ``fp4_index_logits_paged`` reads: req_table[req[b], l * ratio] // ratio for
    l < min(lens[b], capacity), -1 elsewhere. -> int64 [B, capacity]."""
    r = v.integers(req, "req", 1)
    rt = v.integers(req_table, "req_table", 2)
    n = v.integers(lens, "lens", 1)
    capacity = v.positive_int(capacity, "capacity", minimum=0)
    ratio = v.positive_int(ratio, "ratio")
    v.allocation(r.size * capacity, 8, f"capacity={v.shown(capacity)}", f"the slots of {r.size} requests")
    if n.shape != r.shape:
        raise ValueError(f"lens must have shape {r.shape} (one per req), got {n.shape}")
    if r.size and (r.min() < 0 or r.max() >= rt.shape[0]):
        raise ValueError(f"req must index req_table rows [0, {rt.shape[0]}), got values in [{r.min()}, {r.max()}]")
    l = np.arange(capacity)
    valid = l[None, :] < np.minimum(n, capacity)[:, None]
    col = l * ratio
    if valid.any() and int(col[valid.any(axis=0)].max()) >= rt.shape[1]:
        raise ValueError(f"req_table must have more than {int(col[valid.any(axis=0)].max())} columns "
                         f"(lens * ratio), got {rt.shape[1]}")
    gathered = rt[r[:, None], np.minimum(col, max(rt.shape[1] - 1, 0))[None, :]] if rt.shape[1] else np.zeros((r.size, capacity), np.int64)
    return np.where(valid, gathered // ratio, -1)


def fp4_index_logits_paged(q: np.ndarray, weights: np.ndarray, req: np.ndarray, req_table: np.ndarray,
                           lens: np.ndarray, table: np.ndarray, page_size: int, capacity: int, ratio: int = 1,
                           **kw: object) -> np.ndarray:
    """sglang ``fp4_index_logits_paged``: slots from the request-to-token table, then as decode."""
    return fp4_index_logits_decode(q, weights, paged_slots(req, req_table, lens, capacity, ratio), lens, table,
                                   page_size, **kw)  # type: ignore[arg-type]


def fp4_index_logits_paged_scored(q: np.ndarray, weights: np.ndarray, req: np.ndarray, req_table: np.ndarray,
                                 lens: np.ndarray, table: np.ndarray, page_size: int, capacity: int,
                                 ratio: int = 1, **kw: object) -> ScoredLogits:
    return fp4_index_logits_decode_scored(q, weights, paged_slots(req, req_table, lens, capacity, ratio), lens,
                                         table, page_size, **kw)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Call:
    """A checked call: the inputs the computation reads and the options, resolved."""

    qb: np.ndarray  # uint16 [B, H, 128] q bits
    wb: np.ndarray  # uint16 [B, H] weight bits
    slots: np.ndarray  # int64 [B, L]
    lens: np.ndarray  # int64 [B]
    table: np.ndarray  # uint8 [num_pages, page_size * 68]
    page_size: int
    window: np.ndarray  # bool [B, L]: l < min(lens[b], L)
    profile: _profiles.Profile
    qk_accum: str
    head_order: str
    bound_model: str
    emulate: bool


def check_call(q: np.ndarray, weights: np.ndarray, slots: np.ndarray, lens: np.ndarray, table: np.ndarray,
               page_size: int, qk_accum: str, head_order: str, profile: str | _profiles.Profile,
               bound_model: str, emulate: bool) -> Call:
    """The argument checks of ``fp4_index_logits_decode`` (same order, same messages). They read
    the shapes and dtypes of q, weights and table and the values of slots and lens only, so the
    twin (mxgate.twin.scorers.sglang) runs them on shape-only stand-ins of its device tensors."""
    qk_accum = v.choice(qk_accum, "qk_accum", QK_ACCUM)
    head_order = v.choice(head_order, "head_order", HEAD_ORDERS)
    bound_model = v.choice(bound_model, "bound_model", QK_MODELS)
    emulate = v.flag(emulate, "emulate")
    p = _profiles.get(profile)
    qb = v.bf16_bits(q, "q")
    if qb.ndim != 3 or qb.shape[2] != HEAD_DIM:
        raise ValueError(f"q must have shape [B, H, {HEAD_DIM}], got {qb.shape}")
    B, H, D = qb.shape
    w = v.array(weights, "weights")
    wb = oracle.bf16_bits(w) if w.dtype == np.float32 else v.bf16_bits(w, "weights")
    if wb.shape != (B, H):
        raise ValueError(f"weights must have shape ({B}, {H}), got {wb.shape}")
    s = v.integers(slots, "slots", 2)
    n = v.integers(lens, "lens", 1)
    if s.shape[0] != B or n.shape != (B,):
        raise ValueError(f"slots must have {B} rows and lens shape ({B},), got {s.shape} and {n.shape}")
    page_size = v.positive_int(page_size, "page_size")
    tab = v.uint8(table, "table")
    if tab.ndim != 2 or tab.shape[1] != page_size * TOKEN_BYTES:
        raise ValueError(f"table must have shape [num_pages, page_size*{TOKEN_BYTES}] = [*, {page_size * TOKEN_BYTES}], got {tab.shape}")
    L = s.shape[1]
    window = np.arange(L)[None, :] < np.minimum(n, L)[:, None]
    total = tab.shape[0] * page_size
    bad = window & ((s < 0) | (s >= total))
    if bad.any():
        b, l = (int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"slots[{b}, {l}] = {int(s[b, l])} is not a slot of the table [0, {total})")
    return Call(qb, wb, s, n, tab, page_size, window, p, qk_accum, head_order, bound_model, emulate)


def _score(q: np.ndarray, weights: np.ndarray, slots: np.ndarray, lens: np.ndarray, table: np.ndarray,
           page_size: int, qk_accum: str, head_order: str, profile: str | _profiles.Profile, bound_model: str, *,
           emulate: bool, with_bound: bool) -> ScoredLogits:
    c = check_call(q, weights, slots, lens, table, page_size, qk_accum, head_order, profile, bound_model, emulate)
    qb, wb, s, window, p, emulate = c.qb, c.wb, c.slots, c.window, c.profile, c.emulate
    page_size, tab = c.page_size, c.table
    B, H, D = qb.shape
    L = s.shape[1]
    emu = np.full((B, L), -np.inf, np.float32) if emulate else None
    value = np.full((B, L), -np.inf) if with_bound else None
    bound = np.zeros((B, L)) if with_bound else None
    lay = layouts.get("sglang-page68")
    qv = oracle.bf16_to_f32(qb)  # [B, H, D]
    mq, fq, qfin = bf16_parts(qb)
    w32 = oracle.bf16_to_f32(wb)
    for b in range(B):  # one query per request: rows are few, positions are vectorised
        cols = np.flatnonzero(window[b])
        if cols.size == 0:
            continue
        packed, e8m0 = lay.gather(tab, slots=s[b, cols], page_size=page_size)
        chunk = max(64, CELLS_PER_CHUNK // H)
        for lo in range(0, cols.size, chunk):
            cc = cols[lo:lo + chunk]
            res = _chunk(qv[b], mq[b], fq[b], qfin[b], w32[b], wb[b], packed[lo:lo + chunk], e8m0[lo:lo + chunk],
                         p, c.qk_accum, c.head_order, c.bound_model, emulate, with_bound)
            if emulate:
                emu[b, cc] = res[0]
            if with_bound:
                value[b, cc] = res[1]
                bound[b, cc] = res[2]
    return ScoredLogits(value, bound, window, emu, c.qk_accum, c.bound_model)  # type: ignore[arg-type]


def _chunk(qv: np.ndarray, mq: np.ndarray, fq: np.ndarray, qfin: np.ndarray, w32: np.ndarray, wb: np.ndarray,
           packed: np.ndarray, e8m0: np.ndarray, p: _profiles.Profile, qk_accum: str, head_order: str,
           bound_model: str, emulate: bool, with_bound: bool
           ) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """One request, Tc positions. qv float32 [H, D] (bf16 values), mq / fq their integer parts,
    packed [Tc, 64], e8m0 [Tc, 4] -> (emulated float32 [Tc], value, bound)."""
    H, D = qv.shape
    Tc = packed.shape[0]
    codes = oracle.unpack_nibbles(packed)  # [Tc, D]
    nk = (2.0 * oracle.decode_e2m1(codes)).astype(np.float64)  # integers in [-12, 12]
    ek = e8m0.astype(np.int64)
    k_special = (ek == 0xFF).any(axis=1) | ((ek == 0).any(axis=1) & (p.byte0 == "zero"))
    lk = ek.min(axis=1)
    ak = ek - lk[:, None]
    live_q = mq != 0
    fqmin = np.where(live_q, fq, 1 << 20).min(axis=1)
    fqmin = np.where(fqmin == 1 << 20, 0, fqmin)  # [H]
    sq = np.where(live_q, fq - fqmin[:, None], 0)  # [H, D]
    spq = sq.max(axis=1)
    spk = ak.max(axis=1)
    slow = (spq[:, None] + spk[None, :] > SPAN_FAST) | ~qfin.all(axis=1)[:, None] | k_special[None, :]
    qi = mq * np.ldexp(1.0, np.minimum(sq, SPAN_FAST))  # [H, D] integers
    ki = nk * np.ldexp(1.0, np.minimum(np.repeat(ak, 32, axis=1), SPAN_FAST))  # [Tc, D] integers
    with np.errstate(all="ignore"):
        de = qi[:, 0::2] @ ki[:, 0::2].T  # [H, Tc] exact integers (fast cells)
        do = qi[:, 1::2] @ ki[:, 1::2].T
        scale = pow2_f64(fqmin - 128)[:, None] * pow2_f64(lk)[None, :]  # qk = (de + do) * scale
        qk = (de + do) * scale
        if qk_accum == KSTEPS:
            acc = qk.astype(np.float32)
        else:
            acc = add_round_f32((de * scale).astype(np.float32).astype(np.float64), do * scale)
        slow_cols = np.flatnonzero(slow.any(axis=0))
        patch = slow_columns(qv, codes[slow_cols], ek[slow_cols], p, qk_accum, w32) if slow_cols.size else None
        if patch is not None:
            acc[:, slow_cols], qk[:, slow_cols] = patch.acc, patch.qk
        emu = emulate_heads(acc, w32, p, head_order) if emulate else None
        if not with_bound:
            return emu, None, None
        a = np.maximum(np.where(slow, 0.0, de + do), 0.0)
        mw, fw, wfin = bf16_parts(wb)
        a_bits = max(1, int(a.max()).bit_length()) if a.size else 1  # a < 2^a_bits
        y = weighted_sum_f64(a[None], a_bits, mw[None], (fqmin + fw)[None])[0] * pow2_f64(lk - 128)
        value = y
        if patch is not None:
            value[slow_cols] = patch.value
        bad = ~np.isfinite(qk).all(axis=0) | ~wfin.all()
        if bad.any():
            value = np.where(bad, naive_value(qk, w32), value)
        r = np.maximum(np.where(np.isfinite(qk), qk, 0.0), 0.0)
        wabs = np.abs(w32.astype(np.float64))[:, None]
        if bound_model == ANY_ORDER:
            # sum_d |q_d| |k_d|: every product is exact (8- and 2-bit significands). On a fast
            # cell the terms are integers in units of 2^(fqmin + lk - 128) summing below 2^53
            # (SPAN_FAST), so any order gives the same float64 (or inf / NaN where a k
            # overflowed float32, which delta drops): the matmul is exact there. Slow columns
            # may round: their sums come from slow_columns, d left to right.
            dabs = (np.abs(qv.astype(np.float64)) @ np.abs(oracle.dequantize_mx(packed, e8m0, p).astype(np.float64)).T)
            if patch is not None:
                dabs[:, slow_cols] = patch.dim_abs
            delta = ar.qk_delta(bound_model, qk_abs=None, group_abs=None, groups=4, tile_abs=None, k_tiles=1,
                                dim_abs=dabs, head_dim=D)
        elif bound_model == KSTEPS:  # the two dots: gamma_2 (|even| + |odd|) + 2 eta
            delta = ar.gamma(2) * (np.abs(de) + np.abs(do)) * scale + 2 * ar.ETA
            if patch is not None:
                delta[:, slow_cols] = ar.gamma(2) * patch.two + 2 * ar.ETA
        else:  # fp32-groups: per-group exact dots in any order (4 groups)
            gabs = np.zeros((H, Tc))
            for g in range(4):
                sl = slice(32 * g, 32 * g + 32)
                gabs += np.abs(qi[:, sl] @ ki[:, sl].T)
            delta = ar.qk_delta(bound_model, qk_abs=None, group_abs=gabs * scale, groups=4, tile_abs=None,
                                k_tiles=1, dim_abs=None, head_dim=D)
            if patch is not None:
                delta[:, slow_cols] = ar.qk_delta(bound_model, qk_abs=None, group_abs=patch.groups, groups=4,
                                                  tile_abs=None, k_tiles=1, dim_abs=None, head_dim=D)
        delta = np.where(np.isfinite(delta), delta, 0.0)
        d1 = delta + ar.U_BF16 * (np.abs(np.where(np.isfinite(qk), qk, 0.0)) + delta) + ar.ETA_BF16
        u2 = ar.U_BF16 + ar.U + ar.U_BF16 * ar.U
        Dp = ar.sum_heads((d1 + u2 * (r + d1)) * wabs, axis=0) + H * (ar.ETA + ar.ETA_BF16)
        P = ar.sum_heads((1 + u2) * (r + d1) * wabs, axis=0) + H * (ar.ETA + ar.ETA_BF16)
        bound = ar.bf16_chain_bound(R=None, Dp=Dp, P=P, value=value, heads=H, scale=P + Dp)
        bound = np.where(bad, np.inf, bound)
    return emu, value, bound


def emulate_heads(acc: np.ndarray, w32: np.ndarray, p: _profiles.Profile, head_order: str) -> np.ndarray:
    """The emulated order from the fp32 dots acc [H, Tc]: bf16(acc), relu keeping NaN, bf16(s * w),
    the fp32 head sum in ``head_order``, bf16 -> float32 [Tc]. The twin calls it on the host for
    the positions whose head sum is NaN (the NaN bits NumPy's arithmetic leaves)."""
    s = oracle.round_bf16(acc + np.float32(0.0), p)
    s = np.where(np.isnan(s), s, np.maximum(s, np.float32(0.0)) + np.float32(0.0))
    prod = oracle.round_bf16((s * w32[:, None]).astype(np.float32), p)
    total = head_sum(prod[None], head_order)[0]
    return oracle.round_bf16(total, p)


def naive_value(qk: np.ndarray, w32: np.ndarray) -> np.ndarray:
    """The value where a dot or a weight is not finite: sum_h relu(qk_h) w_h in float64, heads
    left to right (NaN kept). qk float64 [H, Tc], w32 float32 [H] -> [Tc]. The twin calls it on
    the host for those positions."""
    return ar.sum_heads(np.where(np.isnan(qk), qk, np.maximum(qk, 0.0)) * w32[:, None].astype(np.float64), axis=0)


class SlowColumns(NamedTuple):
    """The exact path's results for n positions (see ``slow_columns``)."""

    acc: np.ndarray  # float32 [H, n]: the fp32 dot under qk_accum
    qk: np.ndarray  # float64 [H, n]: the dot, rounded once
    value: np.ndarray  # float64 [n]
    two: np.ndarray  # float64 [H, n]: |even| + |odd|
    groups: np.ndarray  # float64 [H, n]: sum_g |dot_g|
    dim_abs: np.ndarray  # float64 [H, n]: sum_d |q_d| |k_d| left to right over d


def slow_columns(qv: np.ndarray, codes: np.ndarray, ek: np.ndarray, p: _profiles.Profile, qk_accum: str,
                 w32: np.ndarray) -> SlowColumns:
    """Exact Python-integer evaluation of the positions holding a cell the fast path cannot hold
    (wide exponent spans, non-finite values): qv float32 [H, D], the positions' codes [n, D] and
    e8m0 bytes [n, 4]. The twin (mxgate.twin.scorers.sglang) calls it on the host for those
    positions only."""
    kvals = oracle.dequantize_mx(oracle.pack_nibbles(codes), ek.astype(np.uint8), p)  # [n, D] float32
    H, D = qv.shape
    n = codes.shape[0]
    qm, qe, qfin = f32_parts(qv)  # q = qm * 2^qe, integers
    acc = np.empty((H, n), dtype=np.float32)
    qk = np.empty((H, n))
    value = np.empty(n)
    two = np.empty((H, n))
    groups = np.empty((H, n))
    qa, ka = np.abs(qv.astype(np.float64)), np.abs(kvals.astype(np.float64))
    with np.errstate(all="ignore"):  # 0 * inf where a byte 0xFF or an overflowing k meets q = 0
        dim_abs = qa[:, 0, None] * ka[None, :, 0]  # sum_d |q_d| |k_d|, d left to right
        for d in range(1, D):
            dim_abs += qa[:, d, None] * ka[None, :, d]
    for j in range(n):
        km, ke, kfin = f32_parts(kvals[j])
        c = (qm * km[None, :]).astype(object)  # [H, D] exact products, Python ints
        e = qe + ke[None, :]
        base = int(e.min())
        terms = c * (np.ones_like(e, dtype=object) << (e - base).astype(object))  # c * 2^(e - base)
        even, odd = terms[:, 0::2].sum(axis=1), terms[:, 1::2].sum(axis=1)
        gsum = terms.reshape(H, ROW_GROUPS, GROUP).sum(axis=2)
        ok = bool(kfin.all()) and bool(qfin.all())
        value_sum = 0
        naive = 0.0
        for h in range(H):
            if not (ok or (qfin[h].all() and kfin.all())):
                with np.errstate(all="ignore"):
                    qh, kt = qv[h].astype(np.float64), kvals[j].astype(np.float64)
                    e64, o64 = float((qh[0::2] * kt[0::2]).sum()), float((qh[1::2] * kt[1::2]).sum())
                    q64 = e64 + o64
                    acc[h, j] = np.float32(q64) if qk_accum == KSTEPS else np.float32(np.float32(e64) + np.float32(o64))
                    naive += (q64 if q64 != q64 else max(q64, 0.0)) * float(w32[h])
                qk[h, j], two[h, j], groups[h, j] = q64, abs(e64) + abs(o64), np.nan
                continue
            tot = int(even[h]) + int(odd[h])
            if qk_accum == KSTEPS:
                acc[h, j] = f32_nearest(tot, base)
            else:
                first = f32_nearest(int(even[h]), base)
                fm, fe, _ = f32_parts(np.array([first], dtype=np.float32))
                lo = min(int(fe[0]), base)
                acc[h, j] = f32_nearest((int(fm[0]) << (int(fe[0]) - lo)) + (int(odd[h]) << (base - lo)), lo)
            qk[h, j] = float(Fraction(tot) * Fraction(2) ** base)
            two[h, j] = float(Fraction(abs(int(even[h])) + abs(int(odd[h]))) * Fraction(2) ** base)
            groups[h, j] = float(Fraction(sum(abs(int(x)) for x in gsum[h])) * Fraction(2) ** base)
            if tot > 0:
                wm, we, _ = f32_parts(np.array([w32[h]], dtype=np.float32))
                value_sum += Fraction(tot * int(wm[0])) * Fraction(2) ** (base + int(we[0]))
            naive += max(qk[h, j], 0.0) * float(w32[h])
        value[j] = float(value_sum) if (ok or np.isfinite(qk[:, j]).all()) else naive
    return SlowColumns(acc, qk, value, two, groups, dim_abs)
