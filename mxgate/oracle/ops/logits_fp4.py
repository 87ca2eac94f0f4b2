"""The FP4 paged MQA logits engine shared by the decode and prefill scorers.

For each row r (a query token) and each token t of its window, with D = head_dim, G = D/32
groups and H heads:
    I_g[h, t]  = sum_{d in g} nq[h, d] * nk[t, d]          (nq, nk = 2 * E2M1 value, integers)
    qk[h, t]   = sum_g I_g * 2^(eq[h, g] + ek[t, g] - 256)  (exact real value)
Fast path (every (row, head, token) whose group exponents span at most SPAN_FAST binades):
  * the four group dots come from float32 matmuls with each operand pre-scaled by
    2^(e - min_g e) of its own row: all partial sums are (integer < 2^13) * 2^k, exact in
    float32 in any order (BLAS may block or fuse as it likes);
  * q' = sum_g I'_g in float64 is an integer below G * 4608 * 2^span <= 2^45: exact;
  * qk = q' * 2^(Lq + Lk - 256) exactly (a power-of-two scaling of a float64).
The emulated order then rounds and sums in float32 exactly as SPEC section 7 states; the exact
value sums relu(q') * mantissa(w) * 2^(...) over heads with exact integers
(logits_exact.exact_weighted_sum) and rounds once to float64.
Slow path (wider spans, 0xFF scale bytes, non-finite weights, or on request): Python integers
and fractions per cell, the same semantics; it doubles as an independent model in the tests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from mxgate.oracle import layouts
from mxgate.oracle import profiles as _profiles
from mxgate.oracle._parallel import run_ranges
from mxgate.oracle.formats import e2m1
from mxgate.oracle.ops import logits_bound as lb
from mxgate.oracle.ops.f32math import fma32
from mxgate.oracle.ops.logits_exact import (
    add_round_f32,
    bf16_parts,
    exact_weighted_sum,
    f32_of_exact,
    f32_parts,
    f64_of_exact,
    pow2_f64,
)
from mxgate.oracle.ops.logits_validate import KV_BLOCK, MFMA_M

GROUP = 32
I_MAX = GROUP * 12 * 12  # largest |I_g|: 32 products of two values in [-12, 12]
CELLS_PER_CHUNK = 1 << 18  # (row, head, token) cells per chunk: temporaries stay in cache
QK_ACCUM = ("exact", "fp32-groups")
_TWO_E2M1 = (2.0 * e2m1.VALUES).astype(np.float32)  # codes -> 2 * value, integers in [-12, 12]


@dataclass(frozen=True)
class Plan:
    """What every row scores: tokens [start, end) of batch ``batch`` (ends already clipped)."""

    batch: np.ndarray  # int64 [R]
    start: np.ndarray  # int64 [R]
    end: np.ndarray  # int64 [R]


@dataclass
class Result:
    emulated: np.ndarray | None  # float32 [R, width]
    value: np.ndarray | None  # float64 [R, width]
    bound: np.ndarray | None  # float64 [R, width]
    window: np.ndarray  # bool [R, width]


@dataclass(frozen=True)
class Options:
    mode: str  # "decode" (final * ws) or "prefill" (w' = fl(w ws), fma chain)
    qk_accum: str
    bound_model: str
    emulate: bool
    exact: bool
    profile: _profiles.Profile
    force_slow: bool = False


def span_fast(groups: int) -> int:
    """Largest exponent span of one (row, head, token) for which the fast path is exact:
    relu(q') * |mantissa(w)| < G * 4608 * 2^span * 256 must stay below 2^53."""
    return 53 - (groups * I_MAX * 256 - 1).bit_length()  # integer ceil(log2)


def score(q_packed: np.ndarray, q_e8m0: np.ndarray, kv_cache: np.ndarray, kv_scale: np.ndarray,
          block_tables: np.ndarray, w_bits: np.ndarray, ws: np.float32, plan: Plan, width: int,
          opts: Options, out: np.ndarray | None) -> Result:
    """Score every row over its window. ``out`` (float32 [R, width]) receives the emulated
    order in its window cells only; without it a fresh -inf buffer is used."""
    R, H, half = q_packed.shape
    D = 2 * half
    window = np.zeros((R, width), dtype=bool)
    cols = np.arange(width)
    window[:] = (cols >= plan.start[:, None]) & (cols < plan.end[:, None])
    res = Result(
        emulated=(out if out is not None else np.full((R, width), -np.inf, np.float32)) if opts.emulate else None,
        value=np.full((R, width), -np.inf) if opts.exact else None,
        bound=np.zeros((R, width)) if opts.exact else None,
        window=window,
    )
    tasks = []
    for b in np.unique(plan.batch):
        rows = np.flatnonzero((plan.batch == b) & (plan.end > plan.start))
        if rows.size:
            tasks.append(_Group(rows, int(b), q_packed, q_e8m0, w_bits, ws, plan, D, opts))
    for task in tasks:
        task.run(kv_cache, kv_scale, block_tables, res, opts)
    return res


class _Group:
    """The rows of one batch, scored together against that batch's KV tokens."""

    def __init__(self, rows: np.ndarray, b: int, q_packed: np.ndarray, q_e8m0: np.ndarray,
                 w_bits: np.ndarray, ws: np.float32, plan: Plan, D: int, opts: Options) -> None:
        self.rows, self.b, self.D = rows, b, D
        self.G = D // GROUP
        self.k_tiles = D // 128
        self.H = q_packed.shape[1]
        self.ws = ws
        self.start, self.end = plan.start[rows], plan.end[rows]
        self.span_fast = span_fast(self.G)
        p = opts.profile
        codes = e2m1.unpack_nibbles(q_packed[rows])  # [Rb, H, D]
        self.nq_int = _TWO_E2M1[codes]  # float32 integers
        eq = q_e8m0[rows].astype(np.int64)  # [Rb, H, G]
        self.eq = eq
        self.q_special = (eq == 0xFF).any(axis=2)  # [Rb, H]
        zero = (eq == 0) if p.byte0 == "zero" else np.zeros(eq.shape, bool)
        self.q_zero = zero
        lq, aq, spq = _offsets(eq, zero | (eq == 0xFF))
        self.lq, self.spq = lq, spq
        Rb = rows.size
        scaled = self.nq_int.reshape(Rb, self.H, self.G, GROUP) * _pow2_f32(np.minimum(aq, self.span_fast))[..., None]
        scaled[zero] = 0.0
        # [G, Rb*H, 32]: one contiguous matmul operand per group
        self.nq_g = np.ascontiguousarray(scaled.transpose(2, 0, 1, 3).reshape(self.G, Rb * self.H, GROUP))
        self.nq_abs = np.abs(self.nq_g) if opts.bound_model == "any-order" else None
        wb = w_bits[rows]
        self.w32 = (wb.astype(np.uint32) << np.uint32(16)).view(np.float32)
        self.mw, self.fw, wfin = bf16_parts(wb)
        self.w_bad = ~wfin.all(axis=1)  # rows holding a non-finite weight: slow path
        self.wp = (self.w32 * ws).astype(np.float32)  # prefill: w' = fl(w * ws)

    def run(self, kv_cache: np.ndarray, kv_scale: np.ndarray, block_tables: np.ndarray,
            res: Result, opts: Options) -> None:
        t0, t1 = int(self.start.min()), int(self.end.max())
        tokens = np.arange(t0, t1)
        needed = ((tokens[None, :] >= self.start[:, None]) & (tokens[None, :] < self.end[:, None])).any(axis=0)
        blocks = block_tables[self.b, tokens // KV_BLOCK]
        slots = np.where(needed, blocks * KV_BLOCK + tokens % KV_BLOCK, -1)
        (packed,) = layouts.get("aiter-fp4-kv").gather(kv_cache, slots=slots)
        (ek,) = layouts.get("aiter-fp4-kv-scale").gather(kv_scale, slots=slots)
        self.k_codes = e2m1.unpack_nibbles(packed)  # [T, D]
        self.ek = ek.astype(np.int64)  # [T, G]
        self.t0 = t0
        Rb = self.rows.size
        chunk = max(64, CELLS_PER_CHUNK // (Rb * self.H))
        n = -(-(t1 - t0) // chunk)

        def work(first: int, last: int) -> None:
            for c in range(first, last):
                lo = c * chunk
                self._chunk(lo, min(lo + chunk, t1 - t0), res, opts)

        run_ranges(n, work, weight=chunk * Rb * self.H * 8)

    # ---- one chunk of tokens ------------------------------------------------------------

    def _chunk(self, lo: int, hi: int, res: Result, opts: Options) -> None:
        Rb, H, G = self.rows.size, self.H, self.G
        Tc = hi - lo
        tok = np.arange(lo, hi) + self.t0
        inwin = (tok[None, :] >= self.start[:, None]) & (tok[None, :] < self.end[:, None])  # [Rb, Tc]
        ek = self.ek[lo:hi]
        k_special = (ek == 0xFF).any(axis=1)
        k_zero = (ek == 0) if opts.profile.byte0 == "zero" else np.zeros(ek.shape, bool)
        lk, ak, spk = _offsets(ek, k_zero | (ek == 0xFF))
        nk = _TWO_E2M1[self.k_codes[lo:hi]].reshape(Tc, G, GROUP) * _pow2_f32(np.minimum(ak, self.span_fast))[..., None]
        nk[k_zero] = 0.0
        # I'_g = I_g * 2^(aq + ak), exact in float32 (see the module docstring)
        ig = np.empty((G, Rb, H, Tc), dtype=np.float32)
        for g in range(G):
            np.matmul(self.nq_g[g], nk[:, g, :].T, out=ig[g].reshape(Rb * H, Tc))
        qp = ig[0].astype(np.float64)
        for g in range(1, G):
            qp += ig[g]
        if opts.force_slow:
            slow_cells = inwin.copy()
        elif (self.spq.max() + spk.max() > self.span_fast or self.q_special.any() or k_special.any()
              or self.w_bad.any()):
            slow = self.spq[:, :, None] + spk[None, None, :] > self.span_fast
            slow |= self.q_special[:, :, None] | k_special[None, None, :]
            slow_cells = (slow.any(axis=1) | self.w_bad[:, None]) & inwin
        else:
            slow_cells = np.zeros_like(inwin)
        patch = _slow_cells(self, np.argwhere(slow_cells), lo, ek, opts) if slow_cells.any() else None

        cols = tok  # output columns
        if opts.emulate:
            with np.errstate(all="ignore"):  # cells outside the window may hold garbage
                scale = pow2_f64(self.lq - 256)[:, :, None] * pow2_f64(lk)[None, None, :]  # exact
                qk32 = self._qk32(ig, scale, opts)
            if patch is not None:
                qk32[patch.r, :, patch.t] = patch.qk32
            with np.errstate(all="ignore"):
                emu = self._emulate(qk32, opts)
            out = res.emulated
            for i in range(Rb):
                m = inwin[i]
                out[self.rows[i], cols[m]] = emu[i, m]
        if opts.exact:
            with np.errstate(all="ignore"):
                value, bound = self._exact(qp, ig, lk, nk, opts)
            if patch is not None:
                value[patch.r, patch.t] = patch.value
                bound[patch.r, patch.t] = patch.bound
            for i in range(Rb):
                m = inwin[i]
                res.value[self.rows[i], cols[m]] = value[i, m]
                res.bound[self.rows[i], cols[m]] = bound[i, m]

    # ---- emulated order -----------------------------------------------------------------

    def _qk32(self, ig: np.ndarray, scale: np.ndarray, opts: Options) -> np.ndarray:
        """The MFMA's float32 qk under the qk_accum model (SPEC section 7)."""
        G = self.G
        if opts.qk_accum == "fp32-groups":
            acc = np.zeros(ig.shape[1:], dtype=np.float32)
            for g in range(G):
                acc += (ig[g].astype(np.float64) * scale).astype(np.float32)
            return acc + np.float32(0.0)
        acc = None
        for kt in range(self.k_tiles):
            dot = ig[4 * kt].astype(np.float64)
            for g in range(4 * kt + 1, 4 * kt + 4):
                dot += ig[g]
            dot *= scale
            acc = dot.astype(np.float32) if acc is None else add_round_f32(acc.astype(np.float64), dot)
        return acc + np.float32(0.0)  # -0 -> +0, as the accumulator starts from +0

    def _emulate(self, qk32: np.ndarray, opts: Options) -> np.ndarray:
        relu = np.maximum(qk32, np.float32(0.0)) + np.float32(0.0)  # maximumf: NaN stays, -0 -> +0
        H = self.H
        parts = []
        if opts.mode == "decode":
            p = relu * self.w32[:, :, None]
            for g in range(4):
                acc = np.zeros((qk32.shape[0], qk32.shape[2]), dtype=np.float32)
                for m in range(H // MFMA_M):
                    for e in range(4):
                        acc += p[:, m * MFMA_M + 4 * g + e]
                parts.append(acc)
            total = (parts[0] + parts[1]) + (parts[2] + parts[3])
            return total * self.ws
        for g in range(4):
            acc = np.zeros((qk32.shape[0], qk32.shape[2]), dtype=np.float32)
            for m in range(H // MFMA_M):
                for e in range(4):
                    h = m * MFMA_M + 4 * g + e
                    acc = fma32(relu[:, h], self.wp[:, h, None], acc)
            parts.append(acc)
        return (parts[0] + parts[1]) + (parts[2] + parts[3])

    # ---- exact value and bound ----------------------------------------------------------

    def _exact(self, qp: np.ndarray, ig: np.ndarray, lk: np.ndarray, nk: np.ndarray,
               opts: Options) -> tuple[np.ndarray, np.ndarray]:
        a = np.maximum(qp, 0.0)  # q' is exact: its sign is the true sign of qk
        a_bits = (self.G * I_MAX).bit_length() + self.span_fast  # relu(q') <= G * 4608 * 2^span
        y = exact_weighted_sum(a, a_bits, self.mw, self.lq + self.fw)
        pk = pow2_f64(lk)[None, :]  # qk = q' * 2^(lq - 256) * 2^lk
        y *= pk * math.ldexp(1.0, -256)
        value = y * np.float64(self.ws)
        # bound sums: sum_h x_h * 2^(lq_h - 256) * (|w_h|, 1) by one batched product per quantity
        sq = pow2_f64(self.lq - 256)
        wabs = np.abs(self.w32).astype(np.float64)
        weights = np.stack([sq * wabs, sq], axis=1)  # [Rb, 2, H]
        R, rho = (np.matmul(weights, a) * pk[:, None, :]).transpose(1, 0, 2)
        c, n_eta = lb.qk_coeffs(opts.bound_model, groups=self.G, k_tiles=self.k_tiles, head_dim=self.D)
        D, Delta = (np.matmul(weights, self._abs_sum(qp, ig, nk, opts)) * (c * pk)[:, None, :]).transpose(1, 0, 2)
        D = D + n_eta * lb.ETA * wabs.sum(axis=1)[:, None]
        Delta = Delta + n_eta * lb.ETA * self.H
        bound = lb.decode_bound(R=R, D=D, rho=rho, Delta=Delta, value=value, ws=float(self.ws), heads=self.H)
        return value, bound

    def _abs_sum(self, qp: np.ndarray, ig: np.ndarray, nk: np.ndarray, opts: Options) -> np.ndarray:
        """The qk model's absolute sum on the q' scale (float64 [Rb, H, Tc]): sum_g |I'_g|
        (fp32-groups), |q'| or sum_kt |tile| (exact), sum_d |q'_d k'_d| (any-order)."""
        model = opts.bound_model
        if model == "fp32-groups":
            gabs = np.abs(ig[0]).astype(np.float64)
            for g in range(1, self.G):
                gabs += np.abs(ig[g])
            return gabs
        if model == "exact":
            if self.k_tiles == 1:
                return np.abs(qp)
            tabs = np.zeros(qp.shape)
            for kt in range(self.k_tiles):
                tabs += np.abs(ig[4 * kt:4 * kt + 4].astype(np.float64).sum(axis=0))
            return tabs
        Rb, H, Tc = qp.shape
        dabs = np.zeros(qp.shape)
        nk_abs = np.abs(nk)
        part = np.empty((Rb * H, Tc), dtype=np.float32)
        for g in range(self.G):
            np.matmul(self.nq_abs[g], nk_abs[:, g, :].T, out=part)
            dabs += part.reshape(Rb, H, Tc)
        return dabs


# ---- helpers ------------------------------------------------------------------------------


def _offsets(e: np.ndarray, excluded: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of group exponents (last axis): (min, e - min clipped at 0, span), ignoring the
    excluded groups (zero-decoded or 0xFF bytes); all-excluded rows get min 127, span 0."""
    big = np.int64(1 << 20)
    lo = np.where(excluded, big, e).min(axis=-1)
    hi = np.where(excluded, -big, e).max(axis=-1)
    empty = lo == big
    lo = np.where(empty, 127, lo)
    hi = np.where(empty, 127, hi)
    off = np.where(excluded, 0, e - lo[..., None])
    return lo, off, hi - lo


def _pow2_f32(k: np.ndarray) -> np.ndarray:
    """2^k as float32 for 0 <= k <= 127 (exact, from bits)."""
    return ((np.asarray(k, dtype=np.int64) + 127) << 23).astype(np.uint32).view(np.float32)


@dataclass
class _Patch:
    r: np.ndarray
    t: np.ndarray
    qk32: np.ndarray  # float32 [n, H]
    value: np.ndarray  # float64 [n]
    bound: np.ndarray  # float64 [n]


def _slow_cells(grp: _Group, cells: np.ndarray, lo: int, ek: np.ndarray, opts: Options) -> _Patch:
    """Exact evaluation of the listed (local row, local token) cells with Python integers
    (object arrays, vectorised over cells and heads): any exponent span, 0xFF bytes (IEEE
    float64 with the decoded NaN / Inf scales) and non-finite weights."""
    p = opts.profile
    H, G, D, k_tiles = grp.H, grp.G, grp.D, grp.k_tiles
    n = len(cells)
    r_idx, t_idx = cells[:, 0], cells[:, 1]
    nq = grp.nq_int[r_idx].astype(np.int64)  # [n, H, D]
    nk = _TWO_E2M1[grp.k_codes[lo + t_idx]].astype(np.int64)  # [n, D]
    prod = (nq * nk[:, None, :]).reshape(n, H, G, GROUP)
    I_raw = prod.sum(axis=3)  # [n, H, G] exact integers
    J = np.abs(prod).sum(axis=3)
    qb = grp.eq[r_idx]  # [n, H, G]
    kb = np.broadcast_to(ek[t_idx][:, None, :], qb.shape)
    special = (qb == 0xFF) | (kb == 0xFF)
    zero = ((qb == 0) | (kb == 0)) if p.byte0 == "zero" else np.zeros(qb.shape, bool)
    I = np.where(zero | special, 0, I_raw)
    J = np.where(zero | special, 0, J)
    E = qb + kb - 256  # group g contributes I * 2^E
    big = np.int64(1 << 30)
    emin = np.where(I != 0, E, big).min(axis=2)
    emin = np.where(emin == big, 0, emin)  # [n, H]
    sh = np.where(I != 0, E - emin[..., None], 0)
    terms = I.astype(object) << sh.astype(object)  # exact Python integers
    num = terms.sum(axis=2)  # qk = num * 2^emin, exact
    pos = np.array(num > 0, dtype=bool)
    # ---- emulated float32 qk
    if opts.qk_accum == "fp32-groups":
        acc = np.zeros((n, H), dtype=np.float32)
        for g in range(G):
            acc += (I[:, :, g] * pow2_f64(np.clip(E[:, :, g], -1022, 1023))).astype(np.float32)
    else:
        acc = np.empty((n, H), dtype=np.float32)
        for i in range(n):  # scalar roundings: one call per (cell, head)
            for h in range(H):
                acc[i, h] = _exact_mode_f32(terms[i, h], int(emin[i, h]), k_tiles)
    qk32 = acc + np.float32(0.0)
    # ---- IEEE path for 0xFF bytes
    spec_h = special.any(axis=2)
    q64 = np.array([[_ratio_f64(int(a), int(e)) for a, e in zip(rn, re)] for rn, re in zip(num, emin)]).reshape(n, H)
    if spec_h.any():
        dq, dk = _decoded(qb, p), _decoded(kb, p)
        with np.errstate(all="ignore"):
            ieee = (I_raw * 0.25 * dq * dk).sum(axis=2)
        q64 = np.where(spec_h, ieee, q64)
        qk32 = np.where(spec_h, ieee.astype(np.float32), qk32)
    # ---- exact value
    mw, fw = grp.mw[r_idx], grp.fw[r_idx]  # [n, H]
    live = pos & (mw != 0)
    ex = emin + fw
    base = np.where(live, ex, big).min(axis=1)
    base = np.where(base == big, 0, base)
    ynum = np.where(live, (num * mw.astype(object)) << np.where(live, ex - base[:, None], 0).astype(object), 0).sum(axis=1)
    ws = float(grp.ws)
    value = np.array([ws * _ratio_f64(int(a), int(e), correct=True) for a, e in zip(ynum, base)])
    # ---- bound
    P2 = pow2_f64(np.clip(E, -1022, 1023))
    gabs = (np.abs(I) * P2).sum(axis=2)
    dabs = (J * P2).sum(axis=2)
    tabs = None
    if k_tiles > 1:
        tabs = np.zeros((n, H))
        for kt in range(k_tiles):
            tnum = terms[:, :, 4 * kt:4 * kt + 4].sum(axis=2)
            tabs += np.abs(np.array([[_ratio_f64(int(a), int(e)) for a, e in zip(rn, re)]
                                     for rn, re in zip(tnum, emin)]).reshape(n, H))
    delta = lb.qk_delta(opts.bound_model, qk_abs=np.abs(q64), group_abs=gabs, groups=G, tile_abs=tabs,
                        k_tiles=k_tiles, dim_abs=dabs, head_dim=D)
    r = np.where(pos, q64, 0.0)
    wabs = np.abs(grp.w32[r_idx]).astype(np.float64)
    with np.errstate(all="ignore"):
        bound = lb.decode_bound(R=(r * wabs).sum(axis=1), D=(delta * wabs).sum(axis=1), rho=r.sum(axis=1),
                                Delta=delta.sum(axis=1), value=value, ws=ws, heads=H)
    bad = spec_h.any(axis=1) | grp.w_bad[r_idx]
    if bad.any():  # IEEE float64 with the decoded values: NaN / Inf where the arithmetic gives them
        with np.errstate(all="ignore"):
            relu = np.where(np.isnan(q64), q64, np.maximum(q64, 0.0))
            naive = (relu * grp.w32[r_idx].astype(np.float64)).sum(axis=1) * ws
        value = np.where(bad, naive, value)
        bound = np.where(bad, np.inf, bound)
    return _Patch(r_idx, t_idx, qk32, value, bound)


def _decoded(e: np.ndarray, p: _profiles.Profile) -> np.ndarray:
    """e8m0 bytes -> float64 scales under the profile (NaN / Inf for 255, 0 for byte 0 if so)."""
    v = pow2_f64(np.minimum(e, 254) - 127)
    v = np.where(e == 0xFF, np.inf if p.byte255 == "inf" else np.nan, v)
    if p.byte0 == "zero":
        v = np.where(e == 0, 0.0, v)
    return v


def _ratio_f64(num: int, e: int, correct: bool = False) -> float:
    """num * 2^e as float64: correctly rounded with ``correct``, else truncated to 60 bits first
    (relative error below 2^-52, enough for bound terms); no overflow for |e| < 900."""
    if num == 0:
        return 0.0
    if correct:
        return f64_of_exact(Fraction(num) * Fraction(2) ** e)
    k = max(0, abs(num).bit_length() - 60)
    m = num >> k if num > 0 else -((-num) >> k)
    return math.ldexp(float(m), e + k)


def _exact_mode_f32(group_terms: np.ndarray, emin: int, k_tiles: int) -> np.float32:
    """qk_accum 'exact': each 128-dim step (4 groups) exact, rounded once into the float32
    accumulator (the first step rounds alone). group_terms: Python ints on the 2^emin grid."""
    acc = None
    for kt in range(k_tiles):
        dot = int(sum(group_terms[4 * kt:4 * kt + 4]))
        if acc is None:
            acc = f32_of_exact(dot, emin)
            continue
        m, e, _ = f32_parts(np.array([acc], dtype=np.float32))
        m, e = int(m[0]), int(e[0])
        lo = min(e, emin)
        acc = f32_of_exact((m << (e - lo)) + (dot << (emin - lo)), lo)
    return acc
