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
where it is not exact: the same bytes on any machine.

Every function runs on NumPy arrays or on torch tensors (one device; the results are tensors
there). The fast path is written once against the namespace ``xp``: exact integer dots (any
order, any BLAS), IEEE steps on values that are not NaN. What only the host defines stays
NumPy code, run on the host for just the cells that need it: the exact Python-integer path
(``slow_columns``) and, on another namespace, the cells whose result is a NaN (its bits are the
ones x86 arithmetic leaves; a GPU's canonical NaN would differ), on the same per-request chunk
of positions the NumPy path computes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from mxgate import oracle
from mxgate.oracle import layouts
from mxgate.oracle import profiles as _profiles
from mxgate.oracle.geometry import GROUP, HEAD_DIM, ROW_GROUPS, TOKEN_BYTES
from mxgate.oracle.scorers import arithmetic as ar
from mxgate.oracle.scorers import common as v
from mxgate.oracle.scorers.arithmetic import HEAD_ORDERS, add_round_f32, bf16_parts, f32_nearest, f32_parts, f64_nearest, head_sum
from mxgate.oracle.scorers.arithmetic import weighted_sum_f64
from mxgate.oracle.scorers.common import ANY_ORDER, KSTEPS, QK_MODELS, TWO_E2M1, ScoredLogits
from mxgate.oracle.xp import device, ieee_quiet, is_numpy, namespace, pow2_f64, table_on, take, to_numpy

TWO_DOTS = "two-dots"
QK_ACCUM = (KSTEPS, TWO_DOTS)
SPAN_FAST = 34  # q and k exponent spans of one cell: 128 * 2^(8+sq) * 12 * 2^sk < 2^53
CELLS_PER_CHUNK = 1 << 17  # (head, position) cells of one request per chunk
CELLS_PER_PASS = 1 << 23  # off NumPy: (request, head, position) cells per pass, float64 temporaries of 64 MB

_NO_LIVE = 1 << 20  # the exponent of a q row without a nonzero element
_TWO_E2M1_F64 = TWO_E2M1.astype(np.float64)  # code -> 2 * value, integers in [-12, 12]


def fp4_index_logits_decode(q: Any, weights: Any, slots: Any, lens: Any, table: Any, page_size: int, *,
                            qk_accum: str = KSTEPS, head_order: str = "pairwise",
                            profile: str | _profiles.Profile = "sglang-rne") -> Any:
    """sglang ``fp4_index_logits_decode`` -> float32 [B, L] (emulated order).

    q bf16 [B, H, 128] (ml_dtypes.bfloat16 or uint16 bits; torch.bfloat16 or torch.uint16);
    weights [B, H] bf16, or float32 (rounded to bf16 as the wrapper's ``.to(torch.bfloat16)``);
    slots int [B, L]; lens int [B]; table uint8 [num_pages, page_size * 68]. profile: e8m0 byte
    0 / 255 decoding. NumPy arrays, or tensors on one device.
    """
    return _score(q, weights, slots, lens, table, page_size, qk_accum, head_order, profile, ANY_ORDER,
                  emulate=True, with_bound=False).emulated


def fp4_index_logits_decode_scored(q: Any, weights: Any, slots: Any, lens: Any, table: Any, page_size: int, *,
                                  qk_accum: str = KSTEPS, head_order: str = "pairwise",
                                  profile: str | _profiles.Profile = "sglang-rne", bound_model: str = ANY_ORDER,
                                  emulate: bool = True) -> ScoredLogits:
    """Value, bound and emulated order of ``fp4_index_logits_decode``."""
    return _score(q, weights, slots, lens, table, page_size, qk_accum, head_order, profile, bound_model,
                  emulate=emulate, with_bound=True)


def paged_slots(req: Any, req_table: Any, lens: Any, capacity: int, ratio: int = 1) -> Any:
    """The slots ``fp4_index_logits_paged`` reads: req_table[req[b], l * ratio] // ratio for
    l < min(lens[b], capacity), -1 elsewhere. -> int64 [B, capacity] (computed on the host: a
    small integer table; tensors in, a tensor on their device out)."""
    dev = v.one_device(dict(req=req, req_table=req_table, lens=lens), "req")
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
    slots = np.where(valid, gathered // ratio, -1)
    return slots if dev is None else namespace(req).asarray(slots, device=dev)


def fp4_index_logits_paged(q: Any, weights: Any, req: Any, req_table: Any, lens: Any, table: Any, page_size: int,
                           capacity: int, ratio: int = 1, **kw: object) -> Any:
    """sglang ``fp4_index_logits_paged``: slots from the request-to-token table, then as decode."""
    _devices(q, weights, table, req=req, req_table=req_table, lens=lens)
    return fp4_index_logits_decode(q, weights, paged_slots(req, req_table, lens, capacity, ratio), lens, table,
                                   page_size, **kw)  # type: ignore[arg-type]


def fp4_index_logits_paged_scored(q: Any, weights: Any, req: Any, req_table: Any, lens: Any, table: Any,
                                 page_size: int, capacity: int, ratio: int = 1, **kw: object) -> ScoredLogits:
    _devices(q, weights, table, req=req, req_table=req_table, lens=lens)
    return fp4_index_logits_decode_scored(q, weights, paged_slots(req, req_table, lens, capacity, ratio), lens,
                                         table, page_size, **kw)  # type: ignore[arg-type]


def _devices(q: Any, weights: Any, table: Any, **small: Any) -> Any:
    """The device of q (None for NumPy arrays): q, weights and table are tensors on it, or none
    of them is; the integer arguments (small) may be host arrays."""
    return v.one_device(dict(q=q, weights=weights, table=table), "q", small)


@dataclass(frozen=True)
class Call:
    """A checked call: the inputs the computation reads and the options, resolved (arrays of the
    arguments' namespace, on their device)."""

    qb: Any  # bf16 bits [B, H, 128] of q (uint16; a tensor's int16)
    wb: Any  # bf16 bits [B, H] of the weights
    slots: np.ndarray  # int64 [B, L] (host: the values plan the passes)
    lens: np.ndarray  # int64 [B]
    table: Any  # uint8 [num_pages, page_size * 68]
    page_size: int
    window: Any  # bool [B, L]: l < min(lens[b], L), on q's device
    profile: _profiles.Profile
    qk_accum: str
    head_order: str
    bound_model: str
    emulate: bool


def check_call(q: Any, weights: Any, slots: Any, lens: Any, table: Any, page_size: int, qk_accum: str,
               head_order: str, profile: str | _profiles.Profile, bound_model: str, emulate: bool) -> Call:
    """The argument checks of ``fp4_index_logits_decode`` (same order, same messages for NumPy
    arrays and tensors)."""
    qk_accum = v.choice(qk_accum, "qk_accum", QK_ACCUM)
    head_order = v.choice(head_order, "head_order", HEAD_ORDERS)
    bound_model = v.choice(bound_model, "bound_model", QK_MODELS)
    emulate = v.flag(emulate, "emulate")
    p = _profiles.get(profile)
    dev = _devices(q, weights, table, slots=slots, lens=lens)
    qb = v.bf16_bits(q, "q")
    if qb.ndim != 3 or qb.shape[2] != HEAD_DIM:
        raise ValueError(f"q must have shape [B, H, {HEAD_DIM}], got {tuple(qb.shape)}")
    B, H, D = qb.shape
    w = v.array(weights, "weights")
    wb = oracle.bf16_bits(w) if v.dtype_name(w) == "float32" else v.bf16_bits(w, "weights")
    if wb.shape != (B, H):
        raise ValueError(f"weights must have shape ({B}, {H}), got {tuple(wb.shape)}")
    s = v.integers(slots, "slots", 2)
    n = v.integers(lens, "lens", 1)
    if s.shape[0] != B or n.shape != (B,):
        raise ValueError(f"slots must have {B} rows and lens shape ({B},), got {tuple(s.shape)} and {tuple(n.shape)}")
    page_size = v.positive_int(page_size, "page_size")
    tab = v.uint8(table, "table")
    if tab.ndim != 2 or tab.shape[1] != page_size * TOKEN_BYTES:
        raise ValueError(f"table must have shape [num_pages, page_size*{TOKEN_BYTES}] = "
                         f"[*, {page_size * TOKEN_BYTES}], got {tuple(tab.shape)}")
    L = s.shape[1]
    window = np.arange(L)[None, :] < np.minimum(n, L)[:, None]
    total = tab.shape[0] * page_size
    bad = window & ((s < 0) | (s >= total))
    if bad.any():
        b, l = (int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"slots[{b}, {l}] = {int(s[b, l])} is not a slot of the table [0, {total})")
    if dev is not None:  # tensors: bf16 bits as int16 (torch's uint16 has few operations)
        xp = namespace(qb)
        wb, window = wb.view(xp.int16), xp.asarray(window, device=dev)
    return Call(qb, wb, s, n, tab, page_size, window, p, qk_accum, head_order, bound_model, emulate)


def _score(q: Any, weights: Any, slots: Any, lens: Any, table: Any, page_size: int, qk_accum: str,
           head_order: str, profile: str | _profiles.Profile, bound_model: str, *, emulate: bool,
           with_bound: bool) -> ScoredLogits:
    c = check_call(q, weights, slots, lens, table, page_size, qk_accum, head_order, profile, bound_model, emulate)
    xp = namespace(c.qb)
    dev = device(c.qb)
    B, L = c.slots.shape
    res = ScoredLogits(
        xp.full((B, L), -math.inf, dtype=xp.float64, device=dev) if with_bound else None,  # type: ignore[arg-type]
        xp.zeros((B, L), dtype=xp.float64, device=dev) if with_bound else None,  # type: ignore[arg-type]
        c.window,
        xp.full((B, L), -math.inf, dtype=xp.float32, device=dev) if c.emulate else None,
        c.qk_accum, c.bound_model)
    if bool(xp.any(c.window)):
        with ieee_quiet(xp):  # 0 * inf and overflow where 0xFF bytes or huge k meet q: by design
            _Run(c, xp, with_bound).run(res)
    return res


def _bf16_values(bits16: Any) -> Any:
    """float32 values of bf16 bits (a tensor's int16 read as the uint16 bf16_to_f32 takes)."""
    return oracle.bf16_to_f32(bits16 if isinstance(bits16, np.ndarray) else bits16.view(namespace(bits16).uint16))


class _Run:
    """One checked call: q and the weights in integer form for every request, then passes of
    (requests, one chunk of positions). The chunks are the NumPy path's: per request, positions
    [lo, lo + chunk) for lo a multiple of the chunk; NumPy takes one request per pass (its
    temporaries stay small), another namespace as many as CELLS_PER_PASS holds."""

    def __init__(self, c: Call, xp: Any, with_bound: bool) -> None:
        self.c, self.p, self.xp, self.with_bound = c, c.profile, xp, with_bound
        self.dev = device(c.qb)
        self.qv = _bf16_values(c.qb)  # [B, H, D]
        mq, fq, qfin = bf16_parts(c.qb)
        self.w32 = _bf16_values(c.wb)  # [B, H]
        self.mw, self.fw, self.wfin = bf16_parts(c.wb)
        live = mq != 0
        fqmin = xp.min(xp.where(live, fq, _NO_LIVE), axis=2)
        self.fqmin = xp.where(fqmin == _NO_LIVE, 0, fqmin)  # [B, H]
        sq = xp.where(live, fq - self.fqmin[:, :, None], 0)
        self.spq = xp.max(sq, axis=2)
        self.q_bad = ~xp.all(qfin, axis=2)
        self.qi = xp.astype(mq, xp.float64) * pow2_f64(xp.clip(sq, max=SPAN_FAST))  # [B, H, D] integers
        self.lens = np.minimum(c.lens, c.slots.shape[1])  # request b's window: [0, lens[b])

    def run(self, res: ScoredLogits) -> None:
        H = self.c.qb.shape[1]
        chunk = max(64, CELLS_PER_CHUNK // H)
        per_pass = 1 if is_numpy(self.xp) else max(1, CELLS_PER_PASS // (H * chunk))
        for lo in range(0, int(self.lens.max()), chunk):
            active = np.flatnonzero(self.lens > lo)  # the requests with positions in [lo, lo + chunk)
            for first in range(0, active.size, per_pass):
                rows = active[first:first + per_pass]
                self._pass(rows, lo, min(lo + chunk, int(self.lens[rows].max())), res)

    def _pass(self, rows: np.ndarray, lo: int, hi: int, res: ScoredLogits) -> None:
        c, p, xp, dev = self.c, self.p, self.xp, self.dev
        R, T, D = rows.size, hi - lo, HEAD_DIM
        widths = np.minimum(self.lens[rows] - lo, T)  # request rows[i]'s chunk: [lo, lo + widths[i])
        r = xp.asarray(rows, device=dev)
        s = c.slots[rows, lo:hi]
        # win: the cells of the pass inside a window (None: all of them, always so on NumPy)
        win = None
        if not (widths == T).all():
            inside = np.arange(T)[None, :] < widths[:, None]  # [R, T]
            s = np.where(inside, s, 0)  # slot 0 outside: any valid row
            win = xp.asarray(inside, device=dev)
        packed, e8m0 = layouts.get("sglang-page68").gather(c.table, slots=s.reshape(-1), page_size=c.page_size)
        codes = oracle.unpack_nibbles(packed)  # [R * T, D]
        nk = take(table_on(_TWO_E2M1_F64, codes), codes)
        ek = xp.astype(e8m0, xp.int64)
        k_special = xp.any(ek == 0xFF, axis=1)
        if p.byte0 == "zero":
            k_special = k_special | xp.any(ek == 0, axis=1)
        lk = xp.min(ek, axis=1)
        ak = ek - lk[:, None]
        spk = xp.reshape(xp.max(ak, axis=1), (R, T))
        ki = xp.reshape(xp.reshape(nk, (R * T, ROW_GROUPS, GROUP)) * pow2_f64(xp.clip(ak, max=SPAN_FAST))[:, :, None],
                        (R, T, D))  # integers
        lk = xp.reshape(lk, (R, T))
        slow = ((self.spq[r][:, :, None] + spk[:, None, :] > SPAN_FAST) | self.q_bad[r][:, :, None]
                | xp.reshape(k_special, (R, 1, T)))  # [R, H, T]
        if win is not None:
            slow = slow & win[:, None, :]
        qi = self.qi[r]
        # integer dots below 2^53 on every fast cell: exact in any order; a slow cell's dot may
        # round: the exact path replaces it
        kt = xp.permute_dims(ki, (0, 2, 1))
        de = ar.exact_matmul(qi[:, :, 0::2], kt[:, 0::2, :])  # [R, H, T]
        do = ar.exact_matmul(qi[:, :, 1::2], kt[:, 1::2, :])
        scale = pow2_f64(self.fqmin[r] - 128)[:, :, None] * pow2_f64(lk)[:, None, :]  # qk = (de + do) * scale
        qk = (de + do) * scale
        if c.qk_accum == KSTEPS:
            acc = xp.astype(qk, xp.float32)
        else:
            acc = add_round_f32(xp.astype(xp.astype(de * scale, xp.float32), xp.float64), do * scale)
        patches = self._slow_patches(rows, slow, xp.reshape(codes, (R, T, D)), xp.reshape(ek, (R, T, ROW_GROUPS)),
                                     acc, qk)
        w32 = self.w32[r]
        if c.emulate:
            self._write(res.emulated, r, lo, hi, win, self._emulate(rows, w32, acc, widths, win))
        if not self.with_bound:
            return
        value, bound = self._value_and_bound(rows, r, w32, win, widths, slow, de, do, qk, scale, lk, ki, packed,
                                             e8m0, patches)
        self._write(res.value, r, lo, hi, win, value)
        self._write(res.bound, r, lo, hi, win, bound)

    def _write(self, out: Any, r: Any, lo: int, hi: int, win: Any, got: Any) -> None:
        out[r, lo:hi] = got if win is None else self.xp.where(win, got, out[r, lo:hi])

    def _on_host(self, mask: Any) -> list[tuple[int, np.ndarray]]:
        """(local row, its positions) where a [R, T] mask holds."""
        host = to_numpy(mask)
        return [(int(i), np.flatnonzero(host[i])) for i in np.flatnonzero(host.any(axis=1))]

    def _here(self, a: np.ndarray) -> Any:
        """A host result in the pass's namespace, on its device."""
        return a if is_numpy(self.xp) else self.xp.asarray(a, device=self.dev)

    def _slow_patches(self, rows: np.ndarray, slow: Any, codes: Any, ek: Any, acc: Any,
                      qk: Any) -> dict[int, tuple[Any, SlowColumns]]:
        """``slow_columns`` on the host for each request's slow positions of this chunk; acc and
        qk patched. -> {local row: (its positions, their SlowColumns)}."""
        patches: dict[int, tuple[Any, SlowColumns]] = {}
        if not bool(self.xp.any(slow)):
            return patches
        for i, t in self._on_host(self.xp.any(slow, axis=1)):
            b, tt = int(rows[i]), self._here(t)
            got = slow_columns(to_numpy(self.qv[b]), to_numpy(codes[i][tt]), to_numpy(ek[i][tt]), self.p,
                               self.c.qk_accum, to_numpy(self.w32[b]))
            acc[i][:, tt] = self._here(got.acc)
            qk[i][:, tt] = self._here(got.qk)
            patches[i] = (tt, got)
        return patches

    def _emulate(self, rows: np.ndarray, w32: Any, acc: Any, widths: np.ndarray, win: Any) -> Any:
        xp = self.xp
        emu = emulate_heads(acc, w32, self.p, self.c.head_order)
        if is_numpy(xp):
            return emu
        nan = xp.isnan(emu) if win is None else xp.isnan(emu) & win
        if bool(xp.any(nan)):
            # a NaN: its bits are the ones NumPy's arithmetic leaves (payloads, operand order), from
            # the NumPy path's own chunk of that request
            for i, t in self._on_host(nan):
                width = int(widths[i])
                want = emulate_heads(to_numpy(acc[i:i + 1, :, :width]), to_numpy(w32[i:i + 1]), self.p,
                                     self.c.head_order)
                emu[i][self._here(t)] = self._here(want[0, t])
        return emu

    def _value_and_bound(self, rows: np.ndarray, r: Any, w32: Any, win: Any, widths: np.ndarray, slow: Any,
                         de: Any, do: Any, qk: Any, scale: Any, lk: Any, ki: Any, packed: Any, e8m0: Any,
                         patches: dict[int, tuple[Any, SlowColumns]]) -> tuple[Any, Any]:
        xp = self.xp
        H = qk.shape[1]
        outside = slow if win is None else slow | ~win[:, None, :]
        a = xp.maximum(xp.where(outside, 0.0, de + do), 0.0)  # integers; nothing on slow cells or outside
        a_bits = max(1, int(xp.max(a)).bit_length())  # a < 2^a_bits
        value = weighted_sum_f64(a, a_bits, self.mw[r], self.fqmin[r] + self.fw[r]) * pow2_f64(lk - 128)
        for i, (t, got) in patches.items():
            value[i][t] = self._here(got.value)
        bad = ~xp.all(xp.isfinite(qk), axis=1) | ~xp.all(self.wfin[r], axis=1)[:, None]  # [R, T]
        if win is not None:
            bad = bad & win
        if bool(xp.any(bad)):
            # a non-finite dot or weight: the float64 sum, NaN bits and all, on the request's chunk
            for i, t in self._on_host(bad):
                width = int(widths[i])
                naive = naive_value(to_numpy(qk[i, :, :width]), to_numpy(w32[i]))
                value[i][self._here(t)] = self._here(naive[t])
        finite_qk = xp.where(xp.isfinite(qk), qk, 0.0)
        rr = xp.maximum(finite_qk, 0.0)
        wabs = xp.abs(xp.astype(w32, xp.float64))[:, :, None]
        delta = self._delta(r, de, do, scale, ki, packed, e8m0, patches)
        delta = xp.where(xp.isfinite(delta), delta, 0.0)
        d1 = delta + ar.U_BF16 * (xp.abs(finite_qk) + delta) + ar.ETA_BF16
        u2 = ar.U_BF16 + ar.U + ar.U_BF16 * ar.U
        Dp = ar.sum_heads((d1 + u2 * (rr + d1)) * wabs, 1) + H * (ar.ETA + ar.ETA_BF16)
        P = ar.sum_heads((1 + u2) * (rr + d1) * wabs, 1) + H * (ar.ETA + ar.ETA_BF16)
        bound = ar.bf16_chain_bound(R=None, Dp=Dp, P=P, value=value, heads=H, scale=P + Dp)
        return value, xp.where(bad, math.inf, bound)

    def _delta(self, r: Any, de: Any, do: Any, scale: Any, ki: Any, packed: Any, e8m0: Any,
               patches: dict[int, tuple[Any, SlowColumns]]) -> Any:
        """delta_h under the bound model, the slow positions from the exact path."""
        model, xp = self.c.bound_model, self.xp
        R, H, T = de.shape
        D = HEAD_DIM
        if model == ANY_ORDER:
            # sum_d |q_d| |k_d|: every product is exact (8- and 2-bit significands). On a fast
            # cell the terms are integers in units of 2^(fqmin + lk - 128) summing below 2^53
            # (SPAN_FAST), so any order gives the same float64 (or inf / NaN where a k
            # overflowed float32, which delta drops): the matmul is exact there. Slow columns
            # may round: their sums come from slow_columns, d left to right.
            kabs = xp.abs(xp.astype(oracle.dequantize_mx(packed, e8m0, self.p), xp.float64))
            dabs = ar.exact_matmul(xp.abs(xp.astype(self.qv[r], xp.float64)),
                             xp.permute_dims(xp.reshape(kabs, (R, T, D)), (0, 2, 1)))
            for i, (t, got) in patches.items():
                dabs[i][:, t] = self._here(got.dim_abs)
            return ar.qk_delta(model, qk_abs=None, group_abs=None, groups=ROW_GROUPS, tile_abs=None, k_tiles=1,
                               dim_abs=dabs, head_dim=D)
        if model == KSTEPS:  # the two dots: gamma_2 (|even| + |odd|) + 2 eta
            delta = ar.gamma(2) * (xp.abs(de) + xp.abs(do)) * scale + 2 * ar.ETA
            for i, (t, got) in patches.items():
                delta[i][:, t] = self._here(ar.gamma(2) * got.two + 2 * ar.ETA)
            return delta
        # fp32-groups: per-group exact dots in any order
        qi, kt = self.qi[r], xp.permute_dims(ki, (0, 2, 1))
        gabs = xp.zeros((R, H, T), dtype=xp.float64, device=self.dev)
        for g in range(ROW_GROUPS):
            sl = slice(GROUP * g, GROUP * (g + 1))
            gabs += xp.abs(ar.exact_matmul(qi[:, :, sl], kt[:, sl, :]))
        delta = ar.qk_delta(model, qk_abs=None, group_abs=gabs * scale, groups=ROW_GROUPS, tile_abs=None,
                            k_tiles=1, dim_abs=None, head_dim=D)
        for i, (t, got) in patches.items():
            delta[i][:, t] = self._here(ar.qk_delta(model, qk_abs=None, group_abs=got.groups, groups=ROW_GROUPS,
                                                    tile_abs=None, k_tiles=1, dim_abs=None, head_dim=D))
        return delta


def emulate_heads(acc: Any, w32: Any, p: _profiles.Profile, head_order: str) -> Any:
    """The emulated order from the fp32 dots acc [R, H, T]: bf16(acc), relu keeping NaN, bf16(s * w)
    with w32 [R, H], the fp32 head sum in ``head_order``, bf16 -> float32 [R, T]."""
    xp = namespace(acc)
    s = oracle.round_bf16(acc + 0.0, p)
    s = xp.where(xp.isnan(s), s, xp.maximum(s, 0.0) + 0.0)  # -0 -> +0
    prod = oracle.round_bf16(s * w32[:, :, None], p)
    return oracle.round_bf16(head_sum(prod, head_order), p)


def naive_value(qk: np.ndarray, w32: np.ndarray) -> np.ndarray:
    """The value where a dot or a weight is not finite: sum_h relu(qk_h) w_h in float64, heads
    left to right (NaN kept). qk float64 [H, Tc], w32 float32 [H] -> [Tc] (NumPy, the host's
    NaN rules)."""
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
    e8m0 bytes [n, 4] (NumPy: the host computes it, for those positions only)."""
    kvals = oracle.dequantize_mx(oracle.pack_nibbles(codes), ek.astype(np.uint8), p)  # [n, D] float32
    H, D = qv.shape
    n = codes.shape[0]
    qm, qe, qfin = f32_parts(qv)  # q = qm * 2^qe, integers
    km_all, ke_all, kfin_all = f32_parts(kvals)
    wm, we, _ = f32_parts(w32)
    q_finite_rows = qfin.all(axis=1)
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
        km, ke, kfin = km_all[j], ke_all[j], kfin_all[j]
        c = (qm * km[None, :]).astype(object)  # [H, D] exact products, Python ints
        e = qe + ke[None, :]
        base = int(e.min())
        terms = c << (e - base).astype(object)  # c * 2^(e - base)
        # per head, group and parity (d even / odd): every other sum is a sum of these
        parts = terms.reshape(H, ROW_GROUPS, GROUP // 2, 2).sum(axis=2)
        even, odd = parts[:, :, 0].sum(axis=1), parts[:, :, 1].sum(axis=1)
        gsum = parts.sum(axis=2)
        k_finite = bool(kfin.all())
        ok = k_finite and bool(q_finite_rows.all())
        weighted: list[tuple[int, int]] = []  # (integer, exponent) terms of sum_h relu(qk_h) w_h
        naive = 0.0
        for h in range(H):
            if not (ok or (q_finite_rows[h] and k_finite)):
                with np.errstate(all="ignore"):
                    qh, kt = qv[h].astype(np.float64), kvals[j].astype(np.float64)
                    e64, o64 = float((qh[0::2] * kt[0::2]).sum()), float((qh[1::2] * kt[1::2]).sum())
                    q64 = e64 + o64
                    acc[h, j] = np.float32(q64) if qk_accum == KSTEPS else np.float32(np.float32(e64) + np.float32(o64))
                    naive += (q64 if q64 != q64 else max(q64, 0.0)) * float(w32[h])
                qk[h, j], two[h, j], groups[h, j] = q64, abs(e64) + abs(o64), np.nan
                continue
            even_h, odd_h = int(even[h]), int(odd[h])
            tot = even_h + odd_h
            if qk_accum == KSTEPS:
                acc[h, j] = f32_nearest(tot, base)
            else:
                first = f32_nearest(even_h, base)
                if not np.isfinite(first):  # an overflowed first dot stays +-inf: inf + the finite odd dot
                    acc[h, j] = first
                else:
                    fm, fe = ar.float_dyadic(float(first))
                    lo = min(fe, base)
                    acc[h, j] = f32_nearest((fm << (fe - lo)) + (odd_h << (base - lo)), lo)
            qk[h, j] = f64_nearest(tot, base)
            two[h, j] = f64_nearest(abs(even_h) + abs(odd_h), base)
            groups[h, j] = f64_nearest(sum(abs(int(x)) for x in gsum[h]), base)
            if tot > 0:
                weighted.append((tot * int(wm[h]), base + int(we[h])))
            naive += max(qk[h, j], 0.0) * float(w32[h])
        if ok or np.isfinite(qk[:, j]).all():
            value[j] = f64_nearest(*ar.dyadic_total(weighted))
        else:
            value[j] = naive
    return SlowColumns(acc, qk, value, two, groups, dim_abs)
