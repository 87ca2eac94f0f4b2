"""vLLM PR #42908's ROCm Triton scorers on torch tensors: the oracle's FP4 paged, FP4 ragged
and FP8 paged scorers (mxgate.oracle.scorers.vllm), same arguments, same bits, computed on
the tensors' device.

The arguments go through the oracle's own checks (``check_fp4_paged``, ``check_fp4_ragged``,
``check_fp8_paged``): shape-and-dtype stand-ins for the large tensors, host copies of the
context lengths, block tables and ragged bounds, whose values they read. The FP4 engine is the
oracle's fast path step for step: integer group dots as exact float64 matmuls, q' summed with
each group's power of two, fl32(qk), relu, fl(relu * w) and ``head_order``; the value as one
correctly rounded float64 (``weighted_sum_f64``) and the bound's head sums left to right.
What the oracle computes with Python integers or from x86 NumPy's NaN propagation is computed
by the oracle's own functions on the host and patched in:

* ``exact_cells``: the cells off the fast path (a group-exponent span above ``SPAN_FAST``, a
  0xFF scale byte), only those;
* ``nonfinite_weight_values``: the value of the rows holding a non-finite weight;
* ``emulate_heads``: the emulated order of the oracle chunks holding a NaN cell (a GPU gives
  its canonical NaN; x86 NumPy an operand's payload, chosen by the array's shape, so the host
  recomputes whole oracle chunks: each device pass is made of them).

So NaN payloads match too. The FP8 scorer is the oracle's windows mapped onto one pseudo-batch
per row, handed to the twin of ``aiter_fp8.pa_mqa_logits_fp8_scored`` as the oracle hands it to
the original.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from mxgate.oracle import profiles as _profiles
from mxgate.oracle.geometry import GROUP, HEAD_DIM, ROW_GROUPS
from mxgate.oracle.scorers import arithmetic as oar
from mxgate.oracle.scorers import vllm as oracle_vllm
from mxgate.oracle.scorers.common import ANY_ORDER, GROUPS, KSTEPS, TWO_E2M1, ScoredLogits
from mxgate.oracle.scorers.vllm import A_BITS, SPAN_FAST, Options
from mxgate.twin import layouts
from mxgate.twin.formats import unpack_nibbles
from mxgate.twin.host import device_of, host_copy, stand_in
from mxgate.twin.scorers import aiter_fp8
from mxgate.twin.scorers import arithmetic as ar

# (row, head, token) cells per pass: each [G, R, H, Tc] float64 temporary is 128 MB, a GPU
# holds the few of them a pass needs; the oracle's own chunk (2^18 cells) would mean
# thousands of passes of small kernels for a production call. Cells are independent of the
# pass they fall in, so the bits do not depend on it.
CELLS_PER_CHUNK = 1 << 22

_LAYOUT = layouts.get("vllm-fp4-indexer-k")
_BIG = 1 << 20  # above every e8m0 exponent: marks a dead group in the minimum over groups


# ---- FP4 paged -------------------------------------------------------------------------------


def fp4_paged_logits_scored(q_fp4: torch.Tensor, q_e8m0: torch.Tensor, kv_cache: torch.Tensor,
                            weights: torch.Tensor, context_lens: torch.Tensor, block_tables: torch.Tensor,
                            max_context_len: int, *, block_size: int = 64, head_order: str = "sequential",
                            bound_model: str = ANY_ORDER, emulate: bool = True,
                            profile: str | _profiles.Profile = "gfx950") -> ScoredLogits:
    """The oracle's ``fp4_paged_logits_scored`` on tensors: a ScoredLogits whose value, bound,
    window and emulated fields are tensors on q_fp4's device."""
    large = dict(q_fp4=q_fp4, q_e8m0=q_e8m0, kv_cache=kv_cache, weights=weights)
    device = _device(large, dict(context_lens=context_lens, block_tables=block_tables), "q_fp4")
    p = {name: stand_in(t, name) for name, t in large.items()}
    call = oracle_vllm.check_fp4_paged(p["q_fp4"], p["q_e8m0"], p["kv_cache"], p["weights"],
                                       host_copy(context_lens, "context_lens"), host_copy(block_tables, "block_tables"),
                                       max_context_len, block_size)
    rows, H, bs = call.rows, call.heads, call.block_size
    q = unpack_nibbles(q_fp4.reshape(rows, H, HEAD_DIM // 2))
    qe = q_e8m0.reshape(rows, H, ROW_GROUPS)
    res = _Result(rows, call.width, emulate, device)
    for b in range(call.batch_size):
        r = np.flatnonzero((call.batch == b) & (call.end > 0))
        if r.size == 0:
            continue
        T = int(call.end[r].max())
        t = np.arange(T)
        slots = call.block_tables[b, t // bs] * bs + t % bs
        packed, ke = _LAYOUT.gather(kv_cache, slots=_to_device(slots, device), block_size=bs)
        sel = _to_device(r, device)
        _score_rows(q[sel], qe[sel], weights[sel], unpack_nibbles(packed), ke, np.zeros(r.size, np.int64),
                    call.end[r], r, res, Options(head_order, bound_model, emulate, _profiles.get(profile)))
    return res.scored(bound_model)


def fp4_paged_logits(*args: Any, **kwargs: Any) -> torch.Tensor:
    """The emulated order of ``fp4_paged_logits_scored`` (same arguments), float32, -inf
    outside the windows."""
    return fp4_paged_logits_scored(*args, **kwargs).emulated  # type: ignore[return-value]


def paged_limits(context_lens: torch.Tensor, batch: int, next_n: int, max_context_len: int) -> torch.Tensor:
    """The oracle's ``paged_limits`` (the window end of every paged row, int64 [B*next_n]) on
    context_lens' device; the lengths are small, the oracle computes them on the host."""
    device = context_lens.device if isinstance(context_lens, torch.Tensor) else torch.device("cpu")
    end = oracle_vllm.paged_limits(host_copy(context_lens, "context_lens"), batch, next_n, max_context_len)
    return _to_device(end, device)


# ---- FP4 ragged ------------------------------------------------------------------------------


def fp4_ragged_logits_scored(q_fp4: torch.Tensor, q_e8m0: torch.Tensor, k_fp4: torch.Tensor, k_e8m0: torch.Tensor,
                             weights: torch.Tensor, cu_seqlen_ks: torch.Tensor, cu_seqlen_ke: torch.Tensor, *,
                             head_order: str = "sequential", bound_model: str = ANY_ORDER, emulate: bool = True,
                             profile: str | _profiles.Profile = "gfx950") -> ScoredLogits:
    """The oracle's ``fp4_ragged_logits_scored`` on tensors (fields on q_fp4's device)."""
    large = dict(q_fp4=q_fp4, q_e8m0=q_e8m0, k_fp4=k_fp4, k_e8m0=k_e8m0, weights=weights)
    device = _device(large, dict(cu_seqlen_ks=cu_seqlen_ks, cu_seqlen_ke=cu_seqlen_ke), "q_fp4")
    p = {name: stand_in(t, name) for name, t in large.items()}
    call = oracle_vllm.check_fp4_ragged(p["q_fp4"], p["q_e8m0"], p["k_fp4"], p["k_e8m0"], p["weights"],
                                        host_copy(cu_seqlen_ks, "cu_seqlen_ks"), host_copy(cu_seqlen_ke, "cu_seqlen_ke"))
    res = _Result(call.rows, call.tokens, emulate, device)
    live = call.live
    if live.size:
        sel = _to_device(live, device)
        _score_rows(unpack_nibbles(q_fp4[sel]), q_e8m0[sel], weights[sel], unpack_nibbles(k_fp4), k_e8m0,
                    call.start[live], call.end[live], live, res,
                    Options(head_order, bound_model, emulate, _profiles.get(profile)))
    return res.scored(bound_model)


def fp4_ragged_logits(*args: Any, **kwargs: Any) -> torch.Tensor:
    """The emulated order of ``fp4_ragged_logits_scored`` (same arguments)."""
    return fp4_ragged_logits_scored(*args, **kwargs).emulated  # type: ignore[return-value]


# ---- FP8 paged -------------------------------------------------------------------------------


def fp8_paged_logits_scored(q_fp8: torch.Tensor, kv_cache: torch.Tensor, weights: torch.Tensor,
                            context_lens: torch.Tensor, block_tables: torch.Tensor, max_context_len: int, *,
                            variant: str = "fn", head_order: str = "sequential", bound_model: str = ANY_ORDER,
                            emulate: bool = True) -> ScoredLogits:
    """The oracle's ``fp8_paged_logits_scored`` on tensors: vLLM's windows checked and mapped
    as the oracle does, then the twin of ``pa_mqa_logits_fp8_scored`` (which checks the rest)."""
    device = _device(dict(q_fp8=q_fp8, kv_cache=kv_cache, weights=weights),
                     dict(context_lens=context_lens, block_tables=block_tables), "q_fp8", large_checked=("q_fp8",))
    call = oracle_vllm.check_fp8_paged(stand_in(q_fp8, "q_fp8"), host_copy(context_lens, "context_lens"),
                                       host_copy(block_tables, "block_tables"), max_context_len)
    rows = call.rows
    if call.width == 0:  # the oracle's empty answer (its default bound_model included)
        return ScoredLogits(torch.zeros((rows, 0), dtype=torch.float64, device=device),
                            torch.zeros((rows, 0), dtype=torch.float64, device=device),
                            torch.zeros((rows, 0), dtype=torch.bool, device=device),
                            torch.zeros((rows, 0), dtype=torch.float32, device=device))
    return aiter_fp8.pa_mqa_logits_fp8_scored(
        q_fp8.reshape(rows, 1, call.heads, call.head_dim), kv_cache, weights,
        _to_device(call.end.astype(np.int32), device), _to_device(call.block_tables[call.batch], device), call.width,
        variant=variant, head_order=head_order, bound_model=bound_model, emulate=emulate)


# ---- shared pieces ---------------------------------------------------------------------------


def _device(large: dict[str, object], small: dict[str, object], first: str,
            large_checked: tuple[str, ...] | None = None) -> torch.device:
    """The one device of the tensors; the large ones must be tensors (the twin computes on them)."""
    for name in large_checked if large_checked is not None else tuple(large):
        t = large[name]
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch tensor, got {type(t).__name__}")
    return device_of({**large, **small}, first)


def _to_device(a: np.ndarray, device: torch.device) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a)).to(device)


def _pow2(e: torch.Tensor) -> torch.Tensor:
    """2**e as float64 from bits, for int64 e known to lie in [-1022, 1023] (no range check:
    the check's device sync per call would dominate small kernels)."""
    return ((e + 1023) << 52).view(torch.float64)


def _f64_const(bits: int, device: torch.device) -> torch.Tensor:
    """A float64 constant from its bits (NaN payloads survive; a scalar may be rebuilt)."""
    return torch.tensor([bits], dtype=torch.int64, device=device).view(torch.float64)[0]


_NAN64 = 0x7FF8000000000000  # np.nan, the oracle's NaN value of a 0xFF cell


class _Result:
    """The outputs on the device, filled as the oracle fills its _Result."""

    def __init__(self, rows: int, width: int, emulate: bool, device: torch.device) -> None:
        self.value = torch.full((rows, width), -math.inf, dtype=torch.float64, device=device)
        self.bound = torch.zeros((rows, width), dtype=torch.float64, device=device)
        self.window = torch.zeros((rows, width), dtype=torch.bool, device=device)
        self.emulated = torch.full((rows, width), -math.inf, dtype=torch.float32, device=device) if emulate else None

    def scored(self, bound_model: str) -> ScoredLogits:
        return ScoredLogits(self.value, self.bound, self.window, self.emulated, KSTEPS, bound_model)


def _decoded_exponents(e: torch.Tensor, p: _profiles.Profile) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The oracle's _decoded_exponents: e8m0 bytes -> (e - 127 int64, zero mask, NaN mask)."""
    e = e.to(torch.int64)
    zero = (e == 0) if p.byte0 == "zero" else torch.zeros(e.shape, dtype=torch.bool, device=e.device)
    return e - 127, zero, e == 0xFF


def _host(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


class _Rows:
    """One ``_score_rows`` call's Q side on the device, with host copies of what the host-side
    cells need."""

    def __init__(self, qc: torch.Tensor, qe: torch.Tensor, w: torch.Tensor, opts: Options) -> None:
        R, H, _ = qc.shape
        dev = qc.device
        self.R, self.H, self.device, self.opts = R, H, dev, opts
        self.q_exp, q_zero, self.q_nan = _decoded_exponents(qe, opts.profile)
        two = torch.from_numpy(TWO_E2M1).to(dev)
        nq = two[qc.to(torch.int64)].reshape(R, H, ROW_GROUPS, GROUP)
        self.nq = torch.where(q_zero[..., None], 0.0, nq).to(torch.float64)
        lq = torch.where(q_zero | self.q_nan, _BIG, self.q_exp).amin(dim=2)
        self.lq = torch.where(lq == _BIG, -127, lq)
        self.aq = torch.where(q_zero | self.q_nan, 0, self.q_exp - self.lq[..., None])
        self.w = w
        self.mw, self.fw, _ = ar.f32_parts(w)
        self.w_host = _host(w)
        self.bad_w = ~np.isfinite(self.w_host).all(axis=1)  # rows holding a non-finite weight
        self.aq_host, self.lq_host, self.q_nan_host = _host(self.aq), _host(self.lq), _host(self.q_nan)
        self.aq_max = self.aq.amax(dim=2)[:, :, None]
        self.q_nan_any = self.q_nan.any(dim=2)[:, :, None]


def _score_rows(qc: torch.Tensor, qe: torch.Tensor, w: torch.Tensor, kc: torch.Tensor, ke: torch.Tensor,
                start: np.ndarray, end: np.ndarray, out_rows: np.ndarray, res: _Result, opts: Options) -> None:
    """The oracle's _score_rows: rows (codes [R, H, 128], e8m0 [R, H, 4], weights [R, H])
    against tokens (codes [T, 128], e8m0 [T, 4]); row i's window [start_i, end_i) goes to
    output row out_rows[i]. start / end / out_rows are host arrays (the loop runs there)."""
    rows = _Rows(qc, qe, w, opts)
    dev = rows.device
    T0, T1 = int(start.min()), int(end.max())
    # passes of whole oracle chunks (same start T0): the host recomputes NaN cells on the
    # oracle's own chunk arrays, whose shape decides which NaN payload x86 NumPy propagates
    piece = max(16, oracle_vllm.CELLS_PER_CHUNK // max(1, rows.R * rows.H))
    chunk = piece * max(1, CELLS_PER_CHUNK // max(1, rows.R * rows.H) // piece)
    k_exp_all, k_zero_all, k_nan_all = _decoded_exponents(ke, opts.profile)
    two = torch.from_numpy(TWO_E2M1).to(dev)
    start_d, end_d, out_d = _to_device(start, dev), _to_device(end, dev), _to_device(out_rows, dev)
    for lo in range(T0, T1, chunk):
        hi = min(lo + chunk, T1)
        if not (np.maximum(start, lo) < np.minimum(end, hi)).any():  # no window cell in [lo, hi)
            continue
        tok = torch.arange(lo, hi, device=dev)
        inwin = (tok[None, :] >= start_d[:, None]) & (tok[None, :] < end_d[:, None])  # [R, Tc]
        k_exp, k_zero, k_nan = k_exp_all[lo:hi], k_zero_all[lo:hi], k_nan_all[lo:hi]
        nk = two[kc[lo:hi].to(torch.int64)].reshape(hi - lo, ROW_GROUPS, GROUP)
        nk = torch.where(k_zero[..., None], 0.0, nk).to(torch.float64)
        lk = torch.where(k_zero | k_nan, _BIG, k_exp).amin(dim=1)
        lk = torch.where(lk == _BIG, -127, lk)
        ak = torch.where(k_zero | k_nan, 0, k_exp - lk[:, None])
        value, bound, emu = _chunk(rows, nk, k_exp, ak, lk, k_nan, inwin, piece)
        ir, it = torch.nonzero(inwin, as_tuple=True)
        orow, col = out_d[ir], tok[it]
        res.window[orow, col] = True
        res.value[orow, col] = value[ir, it]
        res.bound[orow, col] = bound[ir, it]
        if emu is not None and res.emulated is not None:
            res.emulated[orow, col] = emu[ir, it]


def _chunk(rows: _Rows, nk: torch.Tensor, k_exp: torch.Tensor, ak: torch.Tensor, lk: torch.Tensor,
           k_nan: torch.Tensor, inwin: torch.Tensor,
           piece: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The oracle's _chunk for one pass of tokens -> (value, bound, emulated) [R, Tc]; the
    pass is made of the oracle's chunks of ``piece`` tokens."""
    R, H, dev, opts = rows.R, rows.H, rows.device, rows.opts
    Tc = nk.shape[0]
    nq = rows.nq
    # integer group dots I_g and their absolute versions: integers below 2^13, exact in any order
    I = torch.stack([ar.exact_matmul(nq[:, :, g].reshape(R * H, GROUP), nk[:, g].T).reshape(R, H, Tc)
                     for g in range(ROW_GROUPS)])
    J = torch.stack([ar.exact_matmul(nq[:, :, g].abs().reshape(R * H, GROUP), nk[:, g].abs().T).reshape(R, H, Tc)
                     for g in range(ROW_GROUPS)])
    span = rows.aq_max + ak.amax(dim=1)[None, None, :]  # [R, H, Tc]
    nan_cell = rows.q_nan_any | k_nan.any(dim=1)[None, None, :]
    fast = (span <= SPAN_FAST) & ~nan_cell
    qp = torch.zeros((R, H, Tc), dtype=torch.float64, device=dev)  # q', an exact integer on fast cells
    for g in range(ROW_GROUPS):
        shift = torch.clamp_max(rows.aq[:, :, g, None] + ak[None, None, :, g], SPAN_FAST)
        qp += I[g] * _pow2(shift)
    unit = _pow2(rows.lq - 2)[:, :, None] * _pow2(lk)[None, None, :]  # qk = q' * unit, exactly
    qk = torch.where(fast, qp * unit, math.nan)
    # |qk| parts for the bound: each group's term exact, the groups added in the oracle's order
    dabs = 0
    gabs = 0
    for g in range(ROW_GROUPS):
        scale = _pow2(rows.q_exp[:, :, g, None] + k_exp[None, None, :, g] - 2)
        dabs = dabs + J[g] * scale
        gabs = gabs + I[g].abs() * scale
    slow = (~fast & inwin[:, None, :]).any(dim=1)  # [R, Tc]: cells for Python integers
    sr, st = torch.nonzero(slow, as_tuple=True)
    qk32 = qk.to(torch.float32)
    slow_value = None
    if sr.numel():
        r_h = _host(sr)
        slow_qk32, slow_qk, slow_value = oracle_vllm.exact_cells(
            _host(I[:, sr, :, st]), rows.aq_host[r_h], rows.lq_host[r_h], _host(ak[st]), _host(lk[st]),
            rows.q_nan_host[r_h], _host(k_nan[st]), rows.w_host[r_h])
        qk32[sr, :, st] = _to_device(slow_qk32, dev)
        qk[sr, :, st] = _to_device(slow_qk, dev)
    # ---- exact value: sum_h relu(q') * w_h * 2^(lq_h - 2), rounded once, then * 2^lk
    a = torch.where(fast & (qp > 0), qp, 0.0)
    y = ar.weighted_sum_f64(a, A_BITS, rows.mw, rows.fw + rows.lq - 2)
    value = y * _pow2(lk)[None, :]
    if slow_value is not None:
        value[sr, st] = _to_device(slow_value, dev)
    if rows.bad_w.any():  # non-finite weights: the oracle's IEEE float64 evaluation, on the host
        bad = np.flatnonzero(rows.bad_w)
        sel = _to_device(bad, dev)
        qk_bad = _host(qk[sel])
        for a in range(0, Tc, piece):
            b = min(a + piece, Tc)
            host = oracle_vllm.nonfinite_weight_values(np.ascontiguousarray(qk_bad[:, :, a:b]), rows.w_host[bad])
            value[sel, a:b] = _to_device(host, dev)
    # ---- bound, heads left to right
    r_h = torch.where(torch.isfinite(qk), torch.clamp_min(qk, 0.0), 0.0)
    delta = _delta(opts.bound_model, qk, dabs, gabs)
    wabs = rows.w.to(torch.float64).abs()[:, :, None]
    bound = oar.decode_bound(R=ar.sum_heads(wabs * r_h), D=ar.sum_heads(wabs * delta), rho=ar.sum_heads(r_h),
                             Delta=ar.sum_heads(delta), value=value, ws=1.0, heads=H, xp=torch)
    nan_any = nan_cell.any(dim=1)
    no_claim = nan_any | _to_device(rows.bad_w, dev)[:, None] | ~torch.isfinite(value)
    bound = torch.where(no_claim, math.inf, bound)
    value = torch.where(nan_any, _f64_const(_NAN64, dev), value)
    # ---- emulated order
    emu = None
    if opts.emulate:
        relu = torch.where(torch.isnan(qk32), qk32, torch.clamp_min(qk32, 0.0) + 0.0)
        emu = oar.head_sum(relu * rows.w[:, :, None], opts.head_order)
        nan_tokens = _host((torch.isnan(emu) & inwin).any(dim=0))
        for a in np.unique(np.flatnonzero(nan_tokens) // piece) * piece:  # NaN cells: the oracle's bits
            b = min(a + piece, Tc)
            host = oracle_vllm.emulate_heads(_host(qk32[:, :, a:b]), rows.w_host, opts.head_order)
            emu[:, a:b] = _to_device(host, dev)
    return value, bound, emu


def _delta(model: str, qk: torch.Tensor, dabs: torch.Tensor, gabs: torch.Tensor) -> torch.Tensor:
    """The oracle's _delta (delta_h of the qk model) on tensors."""
    if model == ANY_ORDER:
        kw = dict(qk_abs=None, group_abs=None, tile_abs=None, dim_abs=dabs)
    elif model == GROUPS:
        kw = dict(qk_abs=None, group_abs=gabs, tile_abs=None, dim_abs=None)
    else:
        kw = dict(qk_abs=torch.where(torch.isfinite(qk), qk, 0.0).abs(), group_abs=None, tile_abs=None, dim_abs=None)
    d = oar.qk_delta(model, groups=ROW_GROUPS, k_tiles=1, head_dim=HEAD_DIM, **kw)
    return torch.where(torch.isfinite(d), d, 0.0)


COUNTERPARTS = {
    oracle_vllm.fp4_paged_logits_scored: fp4_paged_logits_scored,
    oracle_vllm.fp4_paged_logits: fp4_paged_logits,
    oracle_vllm.fp4_ragged_logits_scored: fp4_ragged_logits_scored,
    oracle_vllm.fp4_ragged_logits: fp4_ragged_logits,
    oracle_vllm.fp8_paged_logits_scored: fp8_paged_logits_scored,
    oracle_vllm.paged_limits: paged_limits,
}
