"""sglang's FP4 index scorer (``fp4_index_logits_decode`` / ``fp4_index_logits_paged``) on torch
tensors: the oracle's scorer (mxgate.oracle.scorers.sglang), same arguments, same bits, computed
on the tensors' device.

The arguments go through the oracle's own ``check_call`` (shape-and-dtype stand-ins for q, the
weights and the page table, host copies of the slots, lengths and request tables). The
computation is the oracle's fast path step for step: the even and odd dots as exact matmuls of
pre-scaled integers, the fp32 dot under ``qk_accum``, the bf16 rounding points and the fp32
head sum in ``head_order``, the value as one correctly rounded float64 and the bound with its
head sums left to right. The rest is the oracle's own code on the host, for just those cells:

* positions the oracle sends to its exact Python-integer path (0xFF scale bytes, byte 0 read as
  zero, non-finite q, exponent spans beyond ``SPAN_FAST``): ``slow_columns``;
* positions whose head sum is NaN: ``emulate_heads``; positions whose value is not finite
  (a non-finite dot or weight): ``naive_value``. There the bits are the NaN NumPy's arithmetic
  leaves, which a device's canonical NaN would not give.

Each host call gets the arrays the oracle itself builds for that request and chunk of
positions (same shape, same layout), so even NaN payloads come out as the oracle's.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import torch

from mxgate.oracle import profiles as _profiles
from mxgate.oracle.geometry import GROUP, HEAD_DIM, ROW_GROUPS
from mxgate.oracle.scorers import arithmetic as oar
from mxgate.oracle.scorers import sglang as osg
from mxgate.oracle.scorers.common import ANY_ORDER, GROUPS, KSTEPS, TWO_E2M1, ScoredLogits
from mxgate.twin import layouts
from mxgate.twin.formats import bf16_bits, bf16_to_f32, round_bf16, unpack_nibbles
from mxgate.twin.host import device_of, host_copy, stand_in
from mxgate.twin.mx import dequantize_mx
from mxgate.twin.scorers import arithmetic as ar

CELLS_PER_PASS = 1 << 23  # (request, head, position) cells per pass: float64 temporaries of 64 MB

_NO_LIVE = 1 << 20  # the oracle's sentinel exponent of a q row without a nonzero element


# ---- the ops ------------------------------------------------------------------------------------


def fp4_index_logits_decode(q: torch.Tensor, weights: torch.Tensor, slots: torch.Tensor, lens: torch.Tensor,
                            table: torch.Tensor, page_size: int, *, qk_accum: str = KSTEPS,
                            head_order: str = "pairwise",
                            profile: str | _profiles.Profile = "sglang-rne") -> torch.Tensor:
    """The oracle's ``fp4_index_logits_decode`` (emulated order) on tensors -> float32 [B, L]."""
    return _score(q, weights, slots, lens, table, page_size, qk_accum, head_order, profile, ANY_ORDER,
                  emulate=True, with_bound=False).emulated


def fp4_index_logits_decode_scored(q: torch.Tensor, weights: torch.Tensor, slots: torch.Tensor,
                                  lens: torch.Tensor, table: torch.Tensor, page_size: int, *,
                                  qk_accum: str = KSTEPS, head_order: str = "pairwise",
                                  profile: str | _profiles.Profile = "sglang-rne", bound_model: str = ANY_ORDER,
                                  emulate: bool = True) -> ScoredLogits:
    """The oracle's ``fp4_index_logits_decode_scored`` on tensors (the fields are tensors)."""
    return _score(q, weights, slots, lens, table, page_size, qk_accum, head_order, profile, bound_model,
                  emulate=emulate, with_bound=True)


def paged_slots(req: torch.Tensor, req_table: torch.Tensor, lens: torch.Tensor, capacity: int,
                ratio: int = 1) -> torch.Tensor:
    """The oracle's ``paged_slots`` (req_table[req[b], l * ratio] // ratio in the window, -1
    elsewhere) -> int64 [B, capacity] on the tensors' device. The request table is a small
    integer table: the oracle computes it on the host."""
    device = device_of(dict(req=req, req_table=req_table, lens=lens), "req")
    slots = osg.paged_slots(host_copy(req, "req"), host_copy(req_table, "req_table"), host_copy(lens, "lens"),
                            capacity, ratio)
    return torch.from_numpy(slots).to(device)


def fp4_index_logits_paged(q: torch.Tensor, weights: torch.Tensor, req: torch.Tensor, req_table: torch.Tensor,
                           lens: torch.Tensor, table: torch.Tensor, page_size: int, capacity: int, ratio: int = 1,
                           **kw: object) -> torch.Tensor:
    """The oracle's ``fp4_index_logits_paged`` on tensors: slots from the request table, then decode."""
    device_of(dict(q=q, weights=weights, req=req, req_table=req_table, lens=lens, table=table))
    return fp4_index_logits_decode(q, weights, paged_slots(req, req_table, lens, capacity, ratio), lens, table,
                                   page_size, **kw)  # type: ignore[arg-type]


def fp4_index_logits_paged_scored(q: torch.Tensor, weights: torch.Tensor, req: torch.Tensor,
                                 req_table: torch.Tensor, lens: torch.Tensor, table: torch.Tensor, page_size: int,
                                 capacity: int, ratio: int = 1, **kw: object) -> ScoredLogits:
    """The oracle's ``fp4_index_logits_paged_scored`` on tensors."""
    device_of(dict(q=q, weights=weights, req=req, req_table=req_table, lens=lens, table=table))
    return fp4_index_logits_decode_scored(q, weights, paged_slots(req, req_table, lens, capacity, ratio), lens,
                                         table, page_size, **kw)  # type: ignore[arg-type]


# ---- the engine ---------------------------------------------------------------------------------


def _score(q: torch.Tensor, weights: torch.Tensor, slots: torch.Tensor, lens: torch.Tensor, table: torch.Tensor,
           page_size: int, qk_accum: str, head_order: str, profile: str | _profiles.Profile, bound_model: str, *,
           emulate: bool, with_bound: bool) -> ScoredLogits:
    tensors = dict(q=q, weights=weights, slots=slots, lens=lens, table=table)
    device = device_of(tensors)
    call = osg.check_call(stand_in(q, "q"), stand_in(weights, "weights"), host_copy(slots, "slots"),
                          host_copy(lens, "lens"), stand_in(table, "table"), page_size, qk_accum, head_order,
                          profile, bound_model, emulate)
    for name, t in tensors.items():  # a NumPy array passes the oracle's checks: the twin needs tensors
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch tensor, got {type(t).__name__}")
    B, H, _ = call.qb.shape
    L = call.slots.shape[1]
    res = _Result(
        window=torch.from_numpy(call.window).to(device),
        emulated=torch.full((B, L), -math.inf, dtype=torch.float32, device=device) if call.emulate else None,
        value=torch.full((B, L), -math.inf, dtype=torch.float64, device=device) if with_bound else None,
        bound=torch.zeros((B, L), dtype=torch.float64, device=device) if with_bound else None,
    )
    if call.window.any():
        _Run(call, q, weights, slots, table, device, with_bound).run(res)
    return ScoredLogits(res.value, res.bound, res.window, res.emulated, call.qk_accum,  # type: ignore[arg-type]
                        call.bound_model)


class _Result:
    def __init__(self, window: torch.Tensor, emulated: torch.Tensor | None, value: torch.Tensor | None,
                 bound: torch.Tensor | None) -> None:
        self.window, self.emulated, self.value, self.bound = window, emulated, value, bound


@cache
def _two_e2m1(device: torch.device) -> torch.Tensor:
    return torch.as_tensor(TWO_E2M1, device=device).to(torch.float64)  # code -> 2 * value


def _relu(x: torch.Tensor) -> torch.Tensor:
    """np.maximum(x, 0.0): a NaN stays, -0 stays -0 (x >= 0 keeps x)."""
    return torch.where(torch.isnan(x) | (x >= 0), x, torch.zeros_like(x))


def _bits16(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int16)


class _Run:
    """One checked call on the device: the requests' q and weights in the oracle's integer form,
    then passes of (requests, one oracle chunk of positions)."""

    def __init__(self, call: osg.Call, q: torch.Tensor, weights: torch.Tensor, slots: torch.Tensor,
                 table: torch.Tensor, device: torch.device, with_bound: bool) -> None:
        self.call, self.p, self.device, self.with_bound = call, call.profile, device, with_bound
        self.slots, self.table = slots, table
        self.q_bits = _bits16(q)
        # float32 weights: the wrapper's bf16 cast, as the oracle's check_call rounds them
        w_bits = _bits16(bf16_bits(weights)) if weights.dtype == torch.float32 else _bits16(weights)
        self.qv = bf16_to_f32(self.q_bits)  # [B, H, D]
        mq, fq, qfin = ar.bf16_parts(self.q_bits)
        self.w32 = bf16_to_f32(w_bits)  # [B, H]
        self.mw, self.fw, self.wfin = ar.bf16_parts(w_bits)
        live = mq != 0
        fqmin = torch.where(live, fq, _NO_LIVE).amin(dim=2)
        self.fqmin = torch.where(fqmin == _NO_LIVE, 0, fqmin)  # [B, H]
        sq = torch.where(live, fq - self.fqmin[:, :, None], 0)
        self.spq = sq.amax(dim=2)
        self.q_bad = ~qfin.all(dim=2)
        self.qi = mq.to(torch.float64) * ar.pow2_f64(torch.clamp(sq, max=osg.SPAN_FAST))  # [B, H, D] integers
        self.lens = np.minimum(call.lens, call.slots.shape[1])  # the window of request b: [0, lens[b])
        self._host_q: dict[int, np.ndarray] = {}
        self._host_w32: np.ndarray | None = None

    # ---- host views (only for the requests and positions that need the oracle's code) ----------

    def host_qv(self, b: int) -> np.ndarray:
        if b not in self._host_q:
            self._host_q[b] = self.qv[b].cpu().numpy()
        return self._host_q[b]

    def host_w32(self, b: int) -> np.ndarray:
        if self._host_w32 is None:
            self._host_w32 = self.w32.cpu().numpy()
        return self._host_w32[b]

    # ---- passes ---------------------------------------------------------------------------------

    def run(self, res: _Result) -> None:
        H = self.call.qb.shape[1]
        chunk = max(64, osg.CELLS_PER_CHUNK // H)  # the oracle's chunk of positions per request
        rows_per_pass = max(1, CELLS_PER_PASS // (H * chunk))
        for lo in range(0, int(self.lens.max()), chunk):
            active = np.flatnonzero(self.lens > lo)  # the requests with positions in [lo, lo + chunk)
            for first in range(0, active.size, rows_per_pass):
                rows = active[first:first + rows_per_pass]
                self._pass(rows, lo, min(lo + chunk, int(self.lens[rows].max())), res)

    def _pass(self, rows: np.ndarray, lo: int, hi: int, res: _Result) -> None:
        c, p, dev = self.call, self.p, self.device
        D = HEAD_DIM
        Rb, Tc = rows.size, hi - lo
        widths = np.clip(self.lens[rows] - lo, 0, Tc)  # the oracle's chunk of request rows[i]: [lo, lo + width)
        r = torch.as_tensor(rows, device=dev)
        win = torch.arange(Tc, device=dev)[None, :] < torch.as_tensor(widths, device=dev)[:, None]  # [Rb, Tc]
        s = torch.where(win, self.slots[r, lo:hi].to(torch.int64), 0)  # slot 0 outside: any valid row
        packed, e8m0 = layouts.get("sglang-page68").gather(self.table, slots=s.reshape(-1), page_size=c.page_size)
        codes = unpack_nibbles(packed)  # [Rb * Tc, D]
        ek = e8m0.to(torch.int64)
        k_special = (ek == 0xFF).any(dim=1)
        if p.byte0 == "zero":
            k_special |= (ek == 0).any(dim=1)
        lk = ek.amin(dim=1)
        ak = ek - lk[:, None]
        spk = ak.amax(dim=1)
        nk = _two_e2m1(dev)[codes.to(torch.int64)]
        ki = nk * ar.pow2_f64(torch.clamp(ak, max=osg.SPAN_FAST).repeat_interleave(GROUP, dim=1))  # [Rb*Tc, D]
        ki = ki.reshape(Rb, Tc, D)
        lk, spk, k_special = lk.reshape(Rb, Tc), spk.reshape(Rb, Tc), k_special.reshape(Rb, Tc)
        slow = (self.spq[r][:, :, None] + spk[:, None, :] > osg.SPAN_FAST) | self.q_bad[r][:, :, None]
        slow = (slow | k_special[:, None, :]) & win[:, None, :]  # [Rb, H, Tc]
        qi = self.qi[r]
        # integer dots below 2^53 on every fast cell: exact in any order (the oracle's matmul too);
        # a slow cell's dot may round: the oracle's exact path replaces it (_slow_patches)
        de = ar.exact_matmul(qi[:, :, 0::2], ki[:, :, 0::2].transpose(1, 2))
        do = ar.exact_matmul(qi[:, :, 1::2], ki[:, :, 1::2].transpose(1, 2))
        scale = ar.pow2_f64(self.fqmin[r] - 128)[:, :, None] * ar.pow2_f64(lk)[:, None, :]
        qk = (de + do) * scale
        if c.qk_accum == KSTEPS:
            acc = qk.to(torch.float32)
        else:
            acc = ar.add_round_f32((de * scale).to(torch.float32).to(torch.float64), do * scale)
        patches = self._slow_patches(rows, slow.any(dim=1), codes.reshape(Rb, Tc, D), ek.reshape(Rb, Tc, ROW_GROUPS),
                                     acc, qk)
        cols = torch.arange(lo, hi, device=dev)
        w32 = self.w32[r]
        if c.emulate:
            emu = self._emulate(rows, w32, acc, widths, win)
            res.emulated[r[:, None], cols[None, :]] = torch.where(win, emu, res.emulated[r[:, None], cols[None, :]])
        if not self.with_bound:
            return
        value, bound = self._value_and_bound(rows, r, w32, win, widths, slow, de, do, qk, scale, lk, ki, packed,
                                             e8m0, patches)
        res.value[r[:, None], cols[None, :]] = torch.where(win, value, res.value[r[:, None], cols[None, :]])
        res.bound[r[:, None], cols[None, :]] = torch.where(win, bound, res.bound[r[:, None], cols[None, :]])

    def _slow_patches(self, rows: np.ndarray, slow_cols: torch.Tensor, codes: torch.Tensor, ek: torch.Tensor,
                      acc: torch.Tensor, qk: torch.Tensor) -> dict[int, tuple[torch.Tensor, osg.SlowColumns]]:
        """The oracle's ``slow_columns`` on the host for each request's slow positions of this
        chunk (the oracle's own call: the same positions in the same order); acc and qk patched.
        -> {local row: (its positions, the oracle's SlowColumns)}."""
        patches: dict[int, tuple[torch.Tensor, osg.SlowColumns]] = {}
        if not bool(slow_cols.any()):
            return patches
        for i in torch.nonzero(slow_cols.any(dim=1)).reshape(-1).tolist():
            t = torch.nonzero(slow_cols[i]).reshape(-1)
            got = osg.slow_columns(self.host_qv(int(rows[i])), codes[i, t].cpu().numpy(), ek[i, t].cpu().numpy(),
                                   self.p, self.call.qk_accum, self.host_w32(int(rows[i])))
            acc[i][:, t] = torch.from_numpy(got.acc).to(self.device)
            qk[i][:, t] = torch.from_numpy(got.qk).to(self.device)
            patches[i] = (t, got)
        return patches

    # ---- emulated order -------------------------------------------------------------------------

    def _emulate(self, rows: np.ndarray, w32: torch.Tensor, acc: torch.Tensor, widths: np.ndarray,
                 win: torch.Tensor) -> torch.Tensor:
        p = self.p
        s = round_bf16(acc + 0.0, p)
        s = torch.where(torch.isnan(s), s, torch.clamp_min(s, 0.0) + 0.0)  # relu keeping NaN, -0 -> +0
        prod = round_bf16(s * w32[:, :, None], p)
        total = ar.head_sum(prod, self.call.head_order)
        emu = round_bf16(total, p)
        nan = torch.isnan(total) & win
        if bool(nan.any()):
            # a NaN sum: its bits are the ones NumPy's arithmetic leaves (payloads, operand order);
            # the oracle's own chain on the oracle's own chunk of this request
            for i in torch.nonzero(nan.any(dim=1)).reshape(-1).tolist():
                width = int(widths[i])
                chunk_acc = np.ascontiguousarray(acc[i, :, :width].cpu().numpy())
                want = osg.emulate_heads(chunk_acc, self.host_w32(int(rows[i])), p, self.call.head_order)
                t = torch.nonzero(nan[i]).reshape(-1)
                emu[i, t] = torch.from_numpy(want).to(self.device)[t]
        return emu

    # ---- value and bound ------------------------------------------------------------------------

    def _value_and_bound(self, rows: np.ndarray, r: torch.Tensor, w32: torch.Tensor, win: torch.Tensor,
                         widths: np.ndarray, slow: torch.Tensor, de: torch.Tensor, do: torch.Tensor,
                         qk: torch.Tensor, scale: torch.Tensor, lk: torch.Tensor, ki: torch.Tensor,
                         packed: torch.Tensor, e8m0: torch.Tensor,
                         patches: dict[int, tuple[torch.Tensor, osg.SlowColumns]]) -> tuple[torch.Tensor, torch.Tensor]:
        dev = self.device
        H = qk.shape[1]
        a = _relu(torch.where(slow | ~win[:, None, :], 0.0, de + do))  # nothing outside the window
        a_bits = max(1, int(a.max()).bit_length()) if a.numel() else 1
        value = ar.weighted_sum_f64(a, a_bits, self.mw[r], self.fqmin[r] + self.fw[r]) * ar.pow2_f64(lk - 128)
        for i, (t, got) in patches.items():
            value[i, t] = torch.from_numpy(got.value).to(dev)
        bad = (~torch.isfinite(qk)).any(dim=1) | (~self.wfin[r]).any(dim=1)[:, None]
        bad &= win
        if bool(bad.any()):
            # a non-finite dot or weight: the oracle's float64 sum, NaN bits and all, on the host
            for i in torch.nonzero(bad.any(dim=1)).reshape(-1).tolist():
                width = int(widths[i])
                chunk_qk = np.ascontiguousarray(qk[i, :, :width].cpu().numpy())
                naive = torch.from_numpy(osg.naive_value(chunk_qk, self.host_w32(int(rows[i])))).to(dev)
                t = torch.nonzero(bad[i]).reshape(-1)
                value[i, t] = naive[t]
        finite_qk = torch.where(torch.isfinite(qk), qk, 0.0)
        rr = _relu(finite_qk)
        wabs = w32.to(torch.float64).abs()[:, :, None]
        delta = self._delta(r, de, do, scale, ki, packed, e8m0, patches)
        delta = torch.where(torch.isfinite(delta), delta, 0.0)
        d1 = delta + oar.U_BF16 * (finite_qk.abs() + delta) + oar.ETA_BF16
        u2 = oar.U_BF16 + oar.U + oar.U_BF16 * oar.U
        Dp = ar.sum_heads((d1 + u2 * (rr + d1)) * wabs, dim=1) + H * (oar.ETA + oar.ETA_BF16)
        P = ar.sum_heads((1 + u2) * (rr + d1) * wabs, dim=1) + H * (oar.ETA + oar.ETA_BF16)
        bound = oar.bf16_chain_bound(R=None, Dp=Dp, P=P, value=value, heads=H, scale=P + Dp, xp=torch)
        bound = torch.where(bad, math.inf, bound)
        return value, bound

    def _delta(self, r: torch.Tensor, de: torch.Tensor, do: torch.Tensor, scale: torch.Tensor, ki: torch.Tensor,
               packed: torch.Tensor, e8m0: torch.Tensor,
               patches: dict[int, tuple[torch.Tensor, osg.SlowColumns]]) -> torch.Tensor:
        """delta_h under the bound model, the slow positions from the oracle's exact path."""
        model, dev = self.call.bound_model, self.device
        Rb, H, Tc = de.shape
        D = HEAD_DIM
        if model == ANY_ORDER:
            # sum_d |q_d| |k_d| of the dequantized k: exact (or inf / NaN) on every fast cell, in
            # any order; the slow positions hold the oracle's left-to-right sums
            kabs = dequantize_mx(packed, e8m0, self.p).abs().to(torch.float64).reshape(Rb, Tc, D)
            dabs = ar.exact_matmul(self.qv[r].to(torch.float64).abs(), kabs.transpose(1, 2))
            for i, (t, got) in patches.items():
                dabs[i][:, t] = torch.from_numpy(got.dim_abs).to(dev)
            return oar.qk_delta(model, qk_abs=None, group_abs=None, groups=ROW_GROUPS, tile_abs=None, k_tiles=1,
                                dim_abs=dabs, head_dim=D)
        if model == KSTEPS:  # the two dots: gamma_2 (|even| + |odd|) + 2 eta
            delta = oar.gamma(2) * (de.abs() + do.abs()) * scale + 2 * oar.ETA
            for i, (t, got) in patches.items():
                delta[i][:, t] = torch.from_numpy(oar.gamma(2) * got.two + 2 * oar.ETA).to(dev)
            return delta
        assert model == GROUPS
        qi = self.qi[r]
        gabs = torch.zeros((Rb, H, Tc), dtype=torch.float64, device=dev)
        for g in range(ROW_GROUPS):
            sl = slice(GROUP * g, GROUP * (g + 1))
            gabs += ar.exact_matmul(qi[:, :, sl], ki[:, :, sl].transpose(1, 2)).abs()
        delta = oar.qk_delta(model, qk_abs=None, group_abs=gabs * scale, groups=ROW_GROUPS, tile_abs=None, k_tiles=1,
                             dim_abs=None, head_dim=D)
        for i, (t, got) in patches.items():
            delta[i][:, t] = torch.from_numpy(
                oar.qk_delta(model, qk_abs=None, group_abs=got.groups, groups=ROW_GROUPS, tile_abs=None, k_tiles=1,
                             dim_abs=None, head_dim=D)).to(dev)
        return delta


COUNTERPARTS = {
    osg.fp4_index_logits_decode: fp4_index_logits_decode,
    osg.fp4_index_logits_decode_scored: fp4_index_logits_decode_scored,
    osg.fp4_index_logits_paged: fp4_index_logits_paged,
    osg.fp4_index_logits_paged_scored: fp4_index_logits_paged_scored,
    osg.paged_slots: paged_slots,
}
