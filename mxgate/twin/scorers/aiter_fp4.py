"""AITER ``pa_mqa_logits_fp4`` decode and prefill on torch tensors: the oracle's scorers
(mxgate.oracle.scorers.aiter_fp4), same arguments, same bits, computed on the tensors' device.

The arguments go through the oracle's own checks (shape-and-dtype stand-ins for the large
tensors, host copies of the block tables, lengths and row info). The computation is the
oracle's fast path step for step: group dots as exact matmuls of pre-scaled integers, the
MFMA's float32 qk under ``qk_accum``, the FlyDSL head order, the value as one correctly
rounded float64 and the bound with its heads summed left to right. The cells the oracle sends
to its exact Python-integer path (0xFF scale bytes, wide exponent spans, non-finite weights)
are handed to the oracle on the host, only those cells, and patched in.

Identity holds bit for bit except for NaN payloads: a cell is NaN where the oracle's is, but
its bits may differ (x86 NumPy keeps an operand's payload, shape-dependently; a GPU returns its
canonical NaN). The logits contract makes no claim on them: the judge takes any NaN for any NaN.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import torch

from mxgate.oracle import profiles as _profiles
from mxgate.oracle.geometry import GROUP, KV_BLOCK
from mxgate.oracle.scorers import aiter_fp4 as oracle_fp4
from mxgate.oracle.scorers import arithmetic as oar
from mxgate.oracle.scorers.aiter_fp4 import I_MAX, STEP_GROUPS, Options, Plan, span_fast
from mxgate.oracle.scorers.common import GROUPS, KSTEPS, MFMA_M, TWO_E2M1, ScoredLogits
from mxgate.twin import layouts
from mxgate.twin._bits import pow2_f32
from mxgate.twin.formats import bf16_to_f32, unpack_nibbles
from mxgate.twin.host import device_of, host_copy, output_stand_in, stand_in
from mxgate.twin.ops.f32math import fma32
from mxgate.twin.scorers import arithmetic as ar

CELLS_PER_CHUNK = 1 << 24  # (row, head, token) cells per pass: a few hundred MB of temporaries

_LARGE = ("q_fp4", "q_scale", "kv_cache", "kv_scale", "weights")


def _checked(kind: str, tensors: dict[str, object], others: dict[str, object]) -> tuple:
    """The oracle's checks on stand-ins; -> (its _Call, the device)."""
    device = device_of({k: v for k, v in tensors.items() if v is not None}, "q_fp4")
    proxies = {}
    for name, t in tensors.items():
        if name in _LARGE:
            proxies[name] = stand_in(t, name)
        elif name == "out":
            proxies[name] = output_stand_in(t, name) if t is not None else None
        else:
            proxies[name] = host_copy(t, name)
    if kind == "decode":
        call = oracle_fp4._decode_call(proxies["q_fp4"], proxies["q_scale"], proxies["kv_cache"], proxies["kv_scale"],
                                       proxies["block_tables"], proxies["weights"], proxies["context_lens"],
                                       others["max_seq_len"], others["next_n"], proxies.get("cu_seq_q"),
                                       others["weight_scale"], proxies.get("out"), others["kv_block_size"],
                                       others["launch"])
    else:
        call = oracle_fp4._prefill_call(proxies["q_fp4"], proxies["q_scale"], proxies["kv_cache"], proxies["kv_scale"],
                                        proxies["block_tables"], proxies["weights"], proxies["row_info"],
                                        others["max_seq_len"], others["weight_scale"], proxies.get("out"),
                                        others["kv_block_size"], others["launch"])
    return call, device


def pa_mqa_logits_fp4(q_fp4: torch.Tensor, q_scale: torch.Tensor, kv_cache: torch.Tensor, kv_scale: torch.Tensor,
                      block_tables: torch.Tensor, weights: torch.Tensor, context_lens: torch.Tensor,
                      max_seq_len: int | None = None, *, next_n: int | None = None, next_n_max: int | None = None,
                      cu_seq_q: torch.Tensor | None = None, weight_scale: float = 1.0,
                      out: torch.Tensor | None = None, qk_accum: str = KSTEPS,
                      profile: str | _profiles.Profile = "gfx950", kv_block_size: int | None = None,
                      **launch: object) -> torch.Tensor:
    """The oracle's ``pa_mqa_logits_fp4`` (emulated order) on tensors; ``out`` is written in its
    window cells only."""
    tensors = dict(q_fp4=q_fp4, q_scale=q_scale, kv_cache=kv_cache, kv_scale=kv_scale, block_tables=block_tables,
                   weights=weights, context_lens=context_lens, cu_seq_q=cu_seq_q, out=out)
    call, device = _checked("decode", tensors, dict(max_seq_len=max_seq_len, next_n=next_n if next_n is not None
                                                    else next_n_max, weight_scale=weight_scale,
                                                    kv_block_size=kv_block_size, launch=launch))
    opts = oracle_fp4._options("decode", qk_accum, GROUPS, emulate=True, with_bound=False, profile=profile)
    return _score(tensors, call, opts, device, out).emulated


def pa_mqa_logits_fp4_scored(q_fp4: torch.Tensor, q_scale: torch.Tensor, kv_cache: torch.Tensor,
                             kv_scale: torch.Tensor, block_tables: torch.Tensor, weights: torch.Tensor,
                             context_lens: torch.Tensor, max_seq_len: int | None = None, *,
                             next_n: int | None = None, next_n_max: int | None = None,
                             cu_seq_q: torch.Tensor | None = None, weight_scale: float = 1.0,
                             qk_accum: str = KSTEPS, bound_model: str = GROUPS, emulate: bool = True,
                             profile: str | _profiles.Profile = "gfx950", kv_block_size: int | None = None,
                             _force_slow: bool = False, **launch: object) -> ScoredLogits:
    """The oracle's ``pa_mqa_logits_fp4_scored`` on tensors (the fields are tensors)."""
    tensors = dict(q_fp4=q_fp4, q_scale=q_scale, kv_cache=kv_cache, kv_scale=kv_scale, block_tables=block_tables,
                   weights=weights, context_lens=context_lens, cu_seq_q=cu_seq_q)
    call, device = _checked("decode", tensors, dict(max_seq_len=max_seq_len, next_n=next_n if next_n is not None
                                                    else next_n_max, weight_scale=weight_scale,
                                                    kv_block_size=kv_block_size, launch=launch))
    opts = oracle_fp4._options("decode", qk_accum, bound_model, emulate=emulate, with_bound=True, profile=profile,
                               force_slow=_force_slow)
    res = _score(tensors, call, opts, device, None)
    return ScoredLogits(res.value, res.bound, res.window, res.emulated, opts.qk_accum, opts.bound_model)


def pa_mqa_logits_fp4_prefill(q_fp4: torch.Tensor, q_scale: torch.Tensor, kv_cache: torch.Tensor,
                              kv_scale: torch.Tensor, block_tables: torch.Tensor, weights: torch.Tensor,
                              row_info: torch.Tensor, max_seq_len: int | None = None, *, weight_scale: float = 1.0,
                              out: torch.Tensor | None = None, qk_accum: str = KSTEPS,
                              profile: str | _profiles.Profile = "gfx950", kv_block_size: int | None = None,
                              **launch: object) -> torch.Tensor:
    """The oracle's ``pa_mqa_logits_fp4_prefill`` (emulated order) on tensors."""
    tensors = dict(q_fp4=q_fp4, q_scale=q_scale, kv_cache=kv_cache, kv_scale=kv_scale, block_tables=block_tables,
                   weights=weights, row_info=row_info, out=out)
    call, device = _checked("prefill", tensors, dict(max_seq_len=max_seq_len, weight_scale=weight_scale,
                                                     kv_block_size=kv_block_size, launch=launch))
    opts = oracle_fp4._options("prefill", qk_accum, GROUPS, emulate=True, with_bound=False, profile=profile)
    return _score(tensors, call, opts, device, out).emulated


def pa_mqa_logits_fp4_prefill_scored(q_fp4: torch.Tensor, q_scale: torch.Tensor, kv_cache: torch.Tensor,
                                     kv_scale: torch.Tensor, block_tables: torch.Tensor, weights: torch.Tensor,
                                     row_info: torch.Tensor, max_seq_len: int | None = None, *,
                                     weight_scale: float = 1.0, qk_accum: str = KSTEPS, bound_model: str = GROUPS,
                                     emulate: bool = True, profile: str | _profiles.Profile = "gfx950",
                                     kv_block_size: int | None = None, _force_slow: bool = False,
                                     **launch: object) -> ScoredLogits:
    """The oracle's ``pa_mqa_logits_fp4_prefill_scored`` on tensors."""
    tensors = dict(q_fp4=q_fp4, q_scale=q_scale, kv_cache=kv_cache, kv_scale=kv_scale, block_tables=block_tables,
                   weights=weights, row_info=row_info)
    call, device = _checked("prefill", tensors, dict(max_seq_len=max_seq_len, weight_scale=weight_scale,
                                                     kv_block_size=kv_block_size, launch=launch))
    opts = oracle_fp4._options("prefill", qk_accum, bound_model, emulate=emulate, with_bound=True, profile=profile,
                               force_slow=_force_slow)
    res = _score(tensors, call, opts, device, None)
    return ScoredLogits(res.value, res.bound, res.window, res.emulated, opts.qk_accum, opts.bound_model)


# ---- the engine ---------------------------------------------------------------------------------


def _score(tensors: dict, call, opts: Options, device: torch.device, out: torch.Tensor | None) -> SimpleNamespace:
    plan: Plan = call.plan
    width = call.width
    q = tensors["q_fp4"]
    q = q.reshape(-1, q.shape[-2], q.shape[-1])
    R, H, half = q.shape
    qs = tensors["q_scale"]
    qs = qs.reshape((-1,) + tuple(qs.shape[-4:]))
    (q_e8m0,) = layouts.get("aiter-fp4-q-scale").gather(qs, num_heads=H)
    w_bits = tensors["weights"].reshape(R, H).view(torch.int16)
    ws = call.args[-1]
    bt = call.args[4]  # host copy, checked
    start = torch.as_tensor(plan.start, device=device)
    end = torch.as_tensor(plan.end, device=device)
    cols = torch.arange(width, device=device)
    res = SimpleNamespace(
        window=(cols[None, :] >= start[:, None]) & (cols[None, :] < end[:, None]),
        emulated=(out if out is not None else torch.full((R, width), -math.inf, dtype=torch.float32, device=device))
        if opts.emulate else None,
        value=torch.full((R, width), -math.inf, dtype=torch.float64, device=device) if opts.with_bound else None,
        bound=torch.zeros((R, width), dtype=torch.float64, device=device) if opts.with_bound else None,
    )
    for b in np.unique(plan.batch):
        rows = np.flatnonzero((plan.batch == b) & (plan.end > plan.start))
        if rows.size:
            _Group(rows, int(b), q, q_e8m0, w_bits, ws, plan, 2 * half, opts, device).run(
                tensors["kv_cache"], tensors["kv_scale"], bt, res, opts)
    return res


def _offsets(e: torch.Tensor, excluded: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The oracle's ``_offsets`` (min, offsets from it, span per row of group exponents)."""
    big = 1 << 20
    lo = torch.where(excluded, big, e).min(dim=-1).values
    hi = torch.where(excluded, -big, e).max(dim=-1).values
    empty = lo == big
    lo = torch.where(empty, 127, lo)
    hi = torch.where(empty, 127, hi)
    off = torch.where(excluded, 0, e - lo[..., None])
    return lo, off, hi - lo


class _Group:
    """The rows of one batch on the device (the oracle's ``_Group``)."""

    def __init__(self, rows: np.ndarray, b: int, q: torch.Tensor, q_e8m0: torch.Tensor, w_bits: torch.Tensor,
                 ws: np.float32, plan: Plan, D: int, opts: Options, device: torch.device) -> None:
        self.device = device
        self.rows_np = rows
        self.rows = torch.as_tensor(rows, device=device)
        self.b, self.D = b, D
        self.G = D // GROUP
        self.k_tiles = D // (STEP_GROUPS * GROUP)
        self.H = q.shape[1]
        self.ws = np.float32(ws)
        self.ws_t = torch.tensor(float(self.ws), dtype=torch.float32, device=device)
        self.start_np, self.end_np = plan.start[rows], plan.end[rows]
        self.start = torch.as_tensor(self.start_np, device=device)
        self.end = torch.as_tensor(self.end_np, device=device)
        self.span_fast = span_fast(self.G)
        p = opts.profile
        two = torch.as_tensor(TWO_E2M1, device=device)
        codes = unpack_nibbles(q[self.rows]).to(torch.int64)  # [Rb, H, D]
        self.nq_int = two[codes]
        eq = q_e8m0[self.rows].to(torch.int64)
        self.eq = eq
        self.q_special = (eq == 0xFF).any(dim=2)
        zero = (eq == 0) if p.byte0 == "zero" else torch.zeros_like(eq, dtype=torch.bool)
        lq, aq, spq = _offsets(eq, zero | (eq == 0xFF))
        self.lq, self.spq = lq, spq
        Rb = rows.size
        scaled = self.nq_int.reshape(Rb, self.H, self.G, GROUP) * pow2_f32(torch.clamp(aq, max=self.span_fast))[..., None]
        scaled = torch.where(zero[..., None], 0.0, scaled)
        self.nq_g = scaled.permute(2, 0, 1, 3).reshape(self.G, Rb * self.H, GROUP).contiguous()
        wb = w_bits[self.rows]
        self.w32 = bf16_to_f32(wb)
        self.mw, self.fw, wfin = ar.bf16_parts(wb)
        self.w_bad = ~wfin.all(dim=1)
        self.wp = self.w32 * self.ws_t
        self.q_packed, self.w_bits = q[self.rows], wb

    def run(self, kv_cache: torch.Tensor, kv_scale: torch.Tensor, block_tables: np.ndarray, res: SimpleNamespace,
            opts: Options) -> None:
        t0, t1 = int(self.start_np.min()), int(self.end_np.max())
        tokens = np.arange(t0, t1)
        needed = ((tokens[None, :] >= self.start_np[:, None]) & (tokens[None, :] < self.end_np[:, None])).any(axis=0)
        blocks = block_tables[self.b, tokens // KV_BLOCK]
        slots = torch.as_tensor(np.where(needed, blocks * KV_BLOCK + tokens % KV_BLOCK, -1), device=self.device)
        (packed,) = layouts.get("aiter-fp4-kv").gather(kv_cache, slots=slots)
        (ek,) = layouts.get("aiter-fp4-kv-scale").gather(kv_scale, slots=slots)
        self.k_codes = unpack_nibbles(packed).to(torch.int64)
        self.ek = ek.to(torch.int64)
        self.t0 = t0
        chunk = max(64, CELLS_PER_CHUNK // (self.rows_np.size * self.H))
        for lo in range(0, t1 - t0, chunk):
            self._chunk(lo, min(lo + chunk, t1 - t0), res, opts)

    def _chunk(self, lo: int, hi: int, res: SimpleNamespace, opts: Options) -> None:
        Rb, H, G = self.rows_np.size, self.H, self.G
        Tc = hi - lo
        dev = self.device
        tok = torch.arange(lo, hi, device=dev) + self.t0
        inwin = (tok[None, :] >= self.start[:, None]) & (tok[None, :] < self.end[:, None])
        ek = self.ek[lo:hi]
        k_special = (ek == 0xFF).any(dim=1)
        k_zero = (ek == 0) if opts.profile.byte0 == "zero" else torch.zeros_like(ek, dtype=torch.bool)
        lk, ak, spk = _offsets(ek, k_zero | (ek == 0xFF))
        two = torch.as_tensor(TWO_E2M1, device=dev)
        nk = two[self.k_codes[lo:hi]].reshape(Tc, G, GROUP) * pow2_f32(torch.clamp(ak, max=self.span_fast))[..., None]
        nk = torch.where(k_zero[..., None], 0.0, nk)
        # I'_g: integer-valued dots, exact in any order (the oracle's float32 matmul gives the same)
        ig = torch.stack([ar.exact_matmul(self.nq_g[g], nk[:, g, :].T).reshape(Rb, H, Tc) for g in range(G)])
        qp = ig[0].clone()
        for g in range(1, G):
            qp += ig[g]
        if opts.force_slow:
            slow_mask = inwin.clone()
        else:
            slow = self.spq[:, :, None] + spk[None, None, :] > self.span_fast
            slow |= self.q_special[:, :, None] | k_special[None, None, :]
            slow_mask = (slow.any(dim=1) | self.w_bad[:, None]) & inwin
        rows_out = self.rows[:, None].expand(Rb, Tc)
        cols_out = tok[None, :].expand(Rb, Tc)
        emu = value = bound = None
        if opts.emulate:
            scale = ar.pow2_f64(self.lq - 256)[:, :, None] * ar.pow2_f64(lk)[None, None, :]
            emu = self._emulate(self._qk32(ig, scale, opts), opts)
        if opts.with_bound:
            value, bound = self._value_and_bound(qp, ig, lk, nk, opts)
        cells = torch.nonzero(slow_mask)
        if len(cells):
            self._on_host(cells, lo, hi, opts, emu, value, bound)
        if opts.emulate:
            res.emulated[rows_out[inwin], cols_out[inwin]] = emu[inwin]
        if opts.with_bound:
            res.value[rows_out[inwin], cols_out[inwin]] = value[inwin]
            res.bound[rows_out[inwin], cols_out[inwin]] = bound[inwin]

    # ---- host cells ---------------------------------------------------------------------

    def _on_host(self, cells: torch.Tensor, lo: int, hi: int, opts: Options, emu: torch.Tensor | None,
                 value: torch.Tensor | None, bound: torch.Tensor | None) -> None:
        """The oracle's own result for the listed (local row, chunk token) cells: it scores their
        rows against their tokens on the host (``score_pairs``), and the cells are patched in."""
        r, t = cells[:, 0], cells[:, 1]
        rows, r_at = torch.unique(r, return_inverse=True)
        toks, t_at = torch.unique(t, return_inverse=True)
        k_codes = self.k_codes[lo:hi][toks].to(torch.uint8).cpu().numpy()
        ek = self.ek[lo:hi][toks].cpu().numpy()
        q_rows = self.q_packed[rows].cpu().numpy()
        res = oracle_fp4.score_pairs(q_rows, self.eq[rows].cpu().numpy(),
                                     self.w_bits[rows].cpu().numpy().view(np.uint16), self.ws, k_codes, ek, opts)
        if emu is not None:
            emu[r, t] = torch.as_tensor(res.emulated, device=self.device)[r_at, t_at]
        if value is not None:
            value[r, t] = torch.as_tensor(res.value, device=self.device)[r_at, t_at]
            bound[r, t] = torch.as_tensor(res.bound, device=self.device)[r_at, t_at]

    # ---- emulated order -----------------------------------------------------------------

    def _qk32(self, ig: torch.Tensor, scale: torch.Tensor, opts: Options) -> torch.Tensor:
        if opts.qk_accum == GROUPS:
            acc = torch.zeros(ig.shape[1:], dtype=torch.float32, device=self.device)
            for g in range(self.G):
                acc += (ig[g] * scale).to(torch.float32)
            return acc + 0.0
        acc = None
        for kt in range(self.k_tiles):
            dot = ig[STEP_GROUPS * kt].clone()
            for g in range(STEP_GROUPS * kt + 1, STEP_GROUPS * (kt + 1)):
                dot += ig[g]
            dot *= scale
            acc = dot.to(torch.float32) if acc is None else ar.add_round_f32(acc.to(torch.float64), dot)
        return acc + 0.0

    def _emulate(self, qk32: torch.Tensor, opts: Options) -> torch.Tensor:
        relu = torch.clamp_min(qk32, 0.0) + 0.0  # NaN stays (any NaN: those cells go to the host)
        if opts.mode == "decode":
            return ar.head_sum(relu * self.w32[:, :, None], "aiter-fp4") * self.ws_t
        H = self.H
        parts = []
        for g in range(4):
            acc = torch.zeros((qk32.shape[0], qk32.shape[2]), dtype=torch.float32, device=self.device)
            for m in range(H // MFMA_M):
                for e in range(4):
                    h = m * MFMA_M + 4 * g + e
                    acc = fma32(relu[:, h], self.wp[:, h, None], acc)
            parts.append(acc)
        return (parts[0] + parts[1]) + (parts[2] + parts[3])

    # ---- exact value and bound ----------------------------------------------------------

    def _value_and_bound(self, qp: torch.Tensor, ig: torch.Tensor, lk: torch.Tensor, nk: torch.Tensor,
                         opts: Options) -> tuple[torch.Tensor, torch.Tensor]:
        a = torch.clamp_min(qp, 0.0)
        a_bits = (self.G * I_MAX).bit_length() + self.span_fast
        y = ar.weighted_sum_f64(a, a_bits, self.mw, self.lq + self.fw)
        pk = ar.pow2_f64(lk)[None, :]
        y = y * (pk * math.ldexp(1.0, -256))
        value = y * float(self.ws)
        sq = ar.pow2_f64(self.lq - 256)
        wabs = self.w32.abs().to(torch.float64)
        R = ar.weighted_heads(sq * wabs, a) * pk
        rho = ar.weighted_heads(sq, a) * pk
        c, n_eta = oar.qk_coeffs(opts.bound_model, groups=self.G, k_tiles=self.k_tiles, head_dim=self.D)
        abs_sum = self._abs_sum(qp, ig, nk, opts)
        D = ar.weighted_heads(sq * wabs, abs_sum) * (c * pk)
        Delta = ar.weighted_heads(sq, abs_sum) * (c * pk)
        D = D + n_eta * oar.ETA * ar.sum_heads(wabs)[:, None]
        Delta = Delta + n_eta * oar.ETA * self.H
        bound = oar.decode_bound(R=R, D=D, rho=rho, Delta=Delta, value=value, ws=float(self.ws), heads=self.H,
                                 xp=torch)
        return value, bound

    def _abs_sum(self, qp: torch.Tensor, ig: torch.Tensor, nk: torch.Tensor, opts: Options) -> torch.Tensor:
        model = opts.bound_model
        if model == GROUPS:
            gabs = ig[0].abs()
            for g in range(1, self.G):
                gabs += ig[g].abs()
            return gabs
        if model == KSTEPS:
            if self.k_tiles == 1:
                return qp.abs()
            tabs = torch.zeros_like(qp)
            for kt in range(self.k_tiles):
                tile = ig[STEP_GROUPS * kt].clone()
                for g in range(STEP_GROUPS * kt + 1, STEP_GROUPS * (kt + 1)):
                    tile += ig[g]
                tabs += tile.abs()
            return tabs
        Rb, H, Tc = qp.shape
        dabs = torch.zeros_like(qp)
        for g in range(self.G):
            dabs += ar.exact_matmul(self.nq_g[g].abs(), nk[:, g, :].abs().T).reshape(Rb, H, Tc)
        return dabs


COUNTERPARTS = {
    oracle_fp4.pa_mqa_logits_fp4: pa_mqa_logits_fp4,
    oracle_fp4.pa_mqa_logits_fp4_scored: pa_mqa_logits_fp4_scored,
    oracle_fp4.pa_mqa_logits_fp4_prefill: pa_mqa_logits_fp4_prefill,
    oracle_fp4.pa_mqa_logits_fp4_prefill_scored: pa_mqa_logits_fp4_prefill_scored,
}
