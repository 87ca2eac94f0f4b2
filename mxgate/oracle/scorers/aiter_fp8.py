"""The FP8 paged MQA logits scorer over the indexer op's FP8 K cache (per-token float32 scale).

AITER ``deepgemm_fp8_paged_mqa_logits`` (and its Triton reference kernel): Q is e4m3 codes
[B, next_n, H, D] with the per-token Q scale already folded into the float32 weights (the
indexer's weights_out = fl(fl(w * s) * weights_scale)); K is the block-planar cache of SPEC
section 5 (``aiter-fp8-kv``, or ``-preshuffle``): per token, D fp8 codes and a float32 scale.

    qk  = sum_d q_d k_d                         (exact: multiples of 2^-18 below 2^43)
    o   = fl(qk * k_scale)        relu          p = fl(relu(o) * w)
    out = sum_h p_h (float32, head_order), written iff t + (next_n - 1 - n) < ctx[b]

Value X = sum_h relu(k_scale * qk_h) * w_h, summed in exact integers and rounded once
to float64, then multiplied by |k_scale| (|value - X| <= 2^-51 |X|).
Bound (any head order, qk model as for FP4):
    gamma_H (R + Do) + Do + 2 H eta,  Do = sum_h [|ks| (1+u) delta_h + u |ks| |qk_h| + eta] |w_h|,
    R = sum_h relu(ks qk_h) |w_h|, plus 2^-51 |value|, times (1 + 2^-40).
The head order of the shipped kernels (a Triton/Gluon reduction tree) is unverified: the
emulated form follows ``head_order`` (default "sequential") and other orders are judged
against the bound.

One code for NumPy arrays and tensors (``mxgate.oracle.xp``), the results on the inputs'
device. The only bits a device may give otherwise are NaN payloads (x86 NumPy keeps an
operand's, a GPU gives its canonical NaN): the cells whose emulated result or value is NaN
are recomputed on the host, from the codes, by the same ``score_chunk`` on NumPy arrays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from mxgate import oracle
from mxgate.oracle import layouts
from mxgate.oracle.geometry import GROUP
from mxgate.oracle.scorers import arithmetic as ar
from mxgate.oracle.scorers import common as v
from mxgate.oracle.scorers.arithmetic import HEAD_ORDERS, f32_parts, weighted_sum_f64, head_sum
from mxgate.oracle.scorers.common import GROUPS, KSTEPS, QK_ACCUM, QK_MODELS, ScoredLogits
from mxgate.oracle.xp import device, ieee_quiet, is_numpy, namespace, to_numpy

# smallest e4m3 subnormal 2^-9 (fn) / 2^-10 (fnuz), and the largest e4m3 magnitude in units of it
LSB = {"fn": 9, "fnuz": 10}
MAX_INT = {"fn": 448 * 512, "fnuz": 240 * 1024}
CELLS_PER_CHUNK = 1 << 18  # (row, head, token) cells per NumPy chunk: temporaries stay in cache
DEVICE_CELLS = 1 << 22  # per pass in another namespace: float64 temporaries of 32 MB each


def pa_mqa_logits_fp8(q_fp8: np.ndarray, kv_cache: np.ndarray, weights: np.ndarray, context_lens: np.ndarray,
                      block_tables: np.ndarray, max_seq_len: int | None = None, *, next_n: int | None = None,
                      preshuffle: bool = False, variant: str = "fn", out: np.ndarray | None = None,
                      qk_accum: str = KSTEPS, head_order: str = "sequential", **launch: object) -> np.ndarray:
    """The FP8 scorer in the emulated order -> float32 [B*next_n, max_seq_len].

    q_fp8: uint8 e4m3 codes (or an ml_dtypes float8 array) [B, next_n, H, D] or [B*next_n, H, D]
    (then next_n=); kv_cache: uint8 [num_blocks, block_size, D+4] or [num_blocks, block_size,
    1, D+4] in the ``aiter-fp8-kv`` layout (``preshuffle=True``: ``aiter-fp8-kv-preshuffle``);
    weights float32 [rows, H]; block_tables int [B, max_blocks] of block_size-token blocks;
    variant "fn" (gfx950, OCP) or "fnuz" (gfx942). out: written in window cells only.
    """
    s = _score(q_fp8, kv_cache, weights, context_lens, block_tables, max_seq_len, next_n, preshuffle, variant,
               out, qk_accum, head_order, GROUPS, emulate=True, with_bound=False, launch=launch)
    return s.emulated


def pa_mqa_logits_fp8_scored(q_fp8: np.ndarray, kv_cache: np.ndarray, weights: np.ndarray,
                            context_lens: np.ndarray, block_tables: np.ndarray, max_seq_len: int | None = None,
                            *, next_n: int | None = None, preshuffle: bool = False, variant: str = "fn",
                            qk_accum: str = KSTEPS, head_order: str = "sequential",
                            bound_model: str = GROUPS, emulate: bool = True,
                            **launch: object) -> ScoredLogits:
    """Value, rigorous bound and (``emulate``) emulated order of the FP8 scorer."""
    return _score(q_fp8, kv_cache, weights, context_lens, block_tables, max_seq_len, next_n, preshuffle, variant,
                  None, qk_accum, head_order, bound_model, emulate=emulate, with_bound=True, launch=launch)


def _codes(x: object, name: str) -> Any:
    a = v.array(x, name)
    if v.dtype_name(a) == "uint8":
        return a
    if "float8" in v.dtype_name(a):  # ml_dtypes float8 arrays, torch float8 tensors
        return a.view(namespace(a).uint8)
    raise TypeError(f"{name} must be uint8 e4m3 codes or an ml_dtypes float8 array, got {v.dtype_name(a)}")


@dataclass(frozen=True)
class Fp8Call:
    """One checked call: the arguments in the shapes the scorer computes with."""

    q: Any  # uint8 codes [rows, H, D]
    kv: Any  # uint8 [num_blocks, block_size, D+4]
    weights: Any  # float32 [rows, H]
    context_lens: np.ndarray  # int64 [B]
    block_tables: np.ndarray  # int64 [B, max_blocks]
    next_n: int
    width: int  # max_seq_len
    end: np.ndarray  # int64 [rows]: the row's window is [0, end)
    layout: layouts.Layout
    out: Any | None
    variant: str
    qk_accum: str
    head_order: str
    bound_model: str
    emulate: bool


def check_call(q_fp8: np.ndarray, kv_cache: np.ndarray, weights: np.ndarray, context_lens: np.ndarray,
               block_tables: np.ndarray, max_seq_len: int | None, next_n: int | None, preshuffle: bool,
               variant: str, out: np.ndarray | None, qk_accum: str, head_order: str, bound_model: str,
               emulate: bool, launch: dict) -> Fp8Call:
    """Every argument check of the scorer, in order. The checks read only shapes and dtypes of
    q_fp8, kv_cache, weights and out, and the values of context_lens and block_tables (on the
    host). Tensors: all on one device."""
    large = dict(q_fp8=q_fp8, kv_cache=kv_cache, weights=weights)
    v.one_device({**large, "out": out} if out is not None else large, "q_fp8",
                 dict(context_lens=context_lens, block_tables=block_tables))
    unknown = sorted(set(launch) - {"ChunkK", "ChunkQ", "KVBlockSize", "WavePerEU", "Preshuffle", "TotalCuCount"})
    if unknown:
        raise TypeError(f"unexpected keyword argument(s) {', '.join(unknown)}")
    preshuffle = v.flag(preshuffle, "preshuffle")
    if "Preshuffle" in launch:  # the kernel's own spelling of the flag
        preshuffle = v.flag(launch["Preshuffle"], "Preshuffle")
    emulate = v.flag(emulate, "emulate")
    variant = v.choice(variant, "variant", ("fn", "fnuz"))
    qk_accum = v.choice(qk_accum, "qk_accum", QK_ACCUM)
    head_order = v.choice(head_order, "head_order", HEAD_ORDERS)
    bound_model = v.choice(bound_model, "bound_model", QK_MODELS)
    if next_n is not None:
        next_n = v.integer(next_n, "next_n", minimum=1)
    q = _codes(q_fp8, "q_fp8")
    xp = namespace(q)
    if q.ndim == 4:
        if next_n is not None and next_n != q.shape[1]:
            raise ValueError(f"next_n={next_n} does not match q_fp8.shape[1]={q.shape[1]}")
        next_n = q.shape[1]
        q = xp.reshape(q, (q.shape[0] * q.shape[1], q.shape[2], q.shape[3]))
    elif q.ndim != 3:
        raise ValueError(f"q_fp8 must have shape [B, next_n, H, D] or [B*next_n, H, D], got {tuple(q.shape)}")
    elif next_n is None:
        raise TypeError("next_n must be given for a 3-D q_fp8 [B*next_n, H, D]")
    rows, H, D = q.shape
    if D <= 0 or D % GROUP:
        raise ValueError(f"head_dim must be a positive multiple of {GROUP}, got {D}")
    kv = v.uint8(kv_cache, "kv_cache")
    if kv.ndim == 4 and kv.shape[2] == 1:
        kv = xp.reshape(kv, (kv.shape[0], kv.shape[1], kv.shape[3]))
    if kv.ndim != 3 or kv.shape[2] != D + 4:
        raise ValueError(f"kv_cache must have shape [num_blocks, block_size, D+4] = [*, *, {D + 4}] "
                         f"(or [num_blocks, block_size, 1, D+4]), got {tuple(kv_cache.shape)}")
    num_blocks, bsz = kv.shape[0], kv.shape[1]
    kvb = launch.get("KVBlockSize")
    if kvb is not None and v.integer(kvb, "KVBlockSize") != bsz:
        raise ValueError(f"KVBlockSize={kvb} does not match kv_cache.size(1)={bsz}")
    layout = layouts.get("aiter-fp8-kv-preshuffle" if preshuffle else "aiter-fp8-kv")
    layout.dims(num_blocks=num_blocks, block_size=bsz, head_dim=D)  # preshuffle checks
    w = v.float32(weights, "weights")
    if tuple(w.shape) != (rows, H):
        raise ValueError(f"weights must have shape ({rows}, {H}) ([rows, H]) float32, got {tuple(w.shape)}")
    ctx = v.integers(context_lens, "context_lens", 1)
    bt = v.integers(block_tables, "block_tables", 2)
    B = ctx.shape[0]
    nn = v.positive_int(next_n, "next_n")
    if rows != B * nn or bt.shape[0] != B:
        raise ValueError(f"q_fp8 must have batch*next_n = {B * nn} rows and block_tables {B} rows, "
                         f"got {rows} and {bt.shape[0]}")
    width = v.seq_len(max_seq_len, out)
    v.allocation(rows * width, 8, f"max_seq_len={v.shown(width)}", f"the logits of {rows} rows")
    if ctx.size and (ctx.min() < 0 or ctx.max() > width):
        b = int(np.argmax((ctx < 0) | (ctx > width)))
        raise ValueError(f"context_lens[{b}] = {int(ctx[b])} must lie in [0, max_seq_len={width}]")
    batch = np.repeat(np.arange(B), nn)
    n = np.tile(np.arange(nn), B)
    end = np.maximum(ctx[batch] - (nn - 1 - n), 0)
    need = -(-end // bsz)
    if need.size and need.max() > bt.shape[1]:
        raise ValueError(f"block_tables has {bt.shape[1]} columns but a row needs {int(need.max())} blocks of {bsz}")
    for b in range(B):
        used = bt[b, : int(-(-ctx[b] // bsz))]
        bad = (used < 0) | (used >= num_blocks)
        if bad.any():
            j = int(np.argmax(bad))
            raise ValueError(f"block_tables[{b}, {j}] = {int(used[j])} is not a block index in [0, {num_blocks})")
    o = v.out_buffer(out, rows, width) if out is not None else None
    return Fp8Call(q, kv, w, ctx, bt, nn, width, end, layout, o, variant, qk_accum, head_order, bound_model, emulate)


def _score(q_fp8: Any, kv_cache: Any, weights: Any, context_lens: Any, block_tables: Any, max_seq_len: int | None,
           next_n: int | None, preshuffle: bool, variant: str, out: Any | None, qk_accum: str, head_order: str,
           bound_model: str, *, emulate: bool, with_bound: bool, launch: dict) -> ScoredLogits:
    c = check_call(q_fp8, kv_cache, weights, context_lens, block_tables, max_seq_len, next_n, preshuffle, variant,
                   out, qk_accum, head_order, bound_model, emulate, launch)
    q, kv, w, ctx, bt, nn, width, end, layout, o = (c.q, c.kv, c.weights, c.context_lens, c.block_tables, c.next_n,
                                                     c.width, c.end, c.layout, c.out)
    xp, dev = namespace(q, kv, w), device(q)
    emulate = c.emulate
    rows, H, D = q.shape
    num_blocks, bsz = kv.shape[0], kv.shape[1]
    B = ctx.shape[0]
    window = xp.arange(width, device=dev)[None, :] < xp.asarray(end, device=dev)[:, None]
    full = (rows, width)
    emu = (o if o is not None else xp.full(full, -np.inf, dtype=xp.float32, device=dev)) if emulate else None
    value = xp.full(full, -np.inf, dtype=xp.float64, device=dev) if with_bound else None
    bound = xp.zeros(full, dtype=xp.float64, device=dev) if with_bound else None
    qv = xp.astype(oracle.decode_e4m3(q, c.variant), xp.float64)  # [rows, H, D]
    cells = CELLS_PER_CHUNK if is_numpy(xp) else DEVICE_CELLS
    for b in range(B):
        T = int(ctx[b])
        if T == 0:
            continue
        t = np.arange(T)
        slots = bt[b, t // bsz] * bsz + t % bsz
        data, ks = layout.gather(kv, slots=xp.asarray(slots, device=dev), num_blocks=num_blocks, block_size=bsz,
                                 head_dim=D)
        kvals = xp.astype(oracle.decode_e4m3(data, c.variant), xp.float64)  # [T, D]
        r0 = b * nn
        chunk = max(64, cells // (nn * H))
        for lo in range(0, T, chunk):  # token chunks keep temporaries in cache
            hi = min(lo + chunk, T)
            res = score_chunk(qv[r0:r0 + nn], kvals[lo:hi], ks[lo:hi], w[r0:r0 + nn], c.variant, c.qk_accum,
                              c.head_order, c.bound_model, emulate, with_bound)
            win = window[r0:r0 + nn, lo:hi]
            if not is_numpy(xp):
                res = _nan_cells_on_host(res, win, q[r0:r0 + nn], data[lo:hi], ks[lo:hi], w[r0:r0 + nn], c)
            ir, it = xp.nonzero(win)
            for target, got in zip((emu, value, bound), res):
                if target is not None:
                    target[r0 + ir, lo + it] = got[ir, it]
    if not with_bound:
        return ScoredLogits(None, None, window, emu, c.qk_accum, c.bound_model)  # type: ignore[arg-type]
    return ScoredLogits(value, bound, window, emu, c.qk_accum, c.bound_model)


def _nan_cells_on_host(res: tuple[Any, Any, Any], win: Any, q: Any, codes: Any, ks: Any, w: Any,
                       c: Fp8Call) -> tuple[Any, Any, Any]:
    """A device chunk's results with every window cell whose emulated result or value is NaN
    replaced by NumPy's ``score_chunk`` of its token, from the codes decoded on the host (a
    device's NaN payloads are its own)."""
    xp, dev = namespace(win), device(win)
    special = xp.zeros(win.shape, dtype=xp.bool, device=dev)
    for got in res[:2]:
        if got is not None:
            special |= xp.isnan(got)
    cols_h = np.flatnonzero(to_numpy(xp.any(special & win, axis=0)))
    if not cols_h.size:
        return res
    cols = xp.asarray(cols_h, device=dev)
    qv = oracle.decode_e4m3(to_numpy(q), c.variant).astype(np.float64)
    kv = oracle.decode_e4m3(to_numpy(codes)[cols_h], c.variant).astype(np.float64)
    host = score_chunk(qv, kv, to_numpy(ks)[cols_h], to_numpy(w), c.variant, c.qk_accum, c.head_order,
                       c.bound_model, c.emulate, res[1] is not None)
    sel = special[:, cols]
    out = []
    for mine, got in zip(res, host):
        if mine is not None:
            mine[:, cols] = xp.where(sel, xp.asarray(got, device=dev), mine[:, cols])
        out.append(mine)
    return out[0], out[1], out[2]


def score_chunk(qv: Any, kv: Any, ks: Any, w: Any, variant: str, qk_accum: str, head_order: str, bound_model: str,
                emulate: bool, with_bound: bool) -> tuple[Any | None, Any | None, Any | None]:
    """qv float64 [n, H, D], kv float64 [Tc, D], ks float32 [Tc], w float32 [n, H]
    -> (emulated float32 [n, Tc], value, bound). Every cell depends on its own row and token
    only."""
    xp = namespace(qv, kv, ks, w)
    n, H, D = qv.shape
    Tc = kv.shape[0]
    G = D // GROUP
    with ieee_quiet(xp):
        parts = xp.stack([xp.reshape(ar.exact_matmul(xp.reshape(qv[:, :, g * GROUP:(g + 1) * GROUP], (n * H, GROUP)),
                                                     kv[:, g * GROUP:(g + 1) * GROUP].T), (n, H, Tc))
                          for g in range(G)])  # each exact
        qk = xp.sum(parts, axis=0)  # exact: all partial sums are multiples of 2^-20 below 2^43
        emu = None
        if emulate:
            if qk_accum == KSTEPS:
                qk32 = xp.astype(qk, xp.float32)
            else:
                qk32 = xp.zeros((n, H, Tc), dtype=xp.float32, device=device(qv))
                for g in range(G):
                    qk32 += xp.astype(parts[g], xp.float32)
            o = (qk32 + 0.0) * ks[None, None, :]
            relu = xp.maximum(o, 0.0) + 0.0
            emu = head_sum(relu * w[:, :, None], head_order)
        if not with_bound:
            return emu, None, None
        lsb = LSB[variant]
        nan = xp.isnan(qk)
        # relu(ks qk) = |ks| relu(sgn(ks) qk); a NaN scale takes 0 (its cells are evaluated below)
        sgn = xp.where(ks > 0, 1.0, xp.where(ks < 0, -1.0, 0.0))
        sgn = xp.astype(sgn, xp.float64)
        a = xp.maximum(xp.where(nan, 0.0, qk) * sgn[None, None, :] * math.ldexp(1.0, 2 * lsb), 0.0)  # integers
        a_bits = (D * MAX_INT[variant] ** 2).bit_length()  # |qk| * 2^(2 lsb) <= D * max_int^2
        mw, fw, wfin = f32_parts(w)
        y = weighted_sum_f64(a, a_bits, mw, fw) * math.ldexp(1.0, -2 * lsb)
        aks = xp.abs(xp.astype(ks, xp.float64))
        value = y * aks[None, :]
        bad_cell = xp.any(nan, axis=1) | ~xp.isfinite(ks)[None, :] | ~xp.all(wfin, axis=1)[:, None]
        if bool(xp.any(bad_cell)):  # IEEE float64 evaluation: NaN / Inf as the arithmetic gives
            naive = ar.sum_heads(xp.maximum(qk * xp.astype(ks, xp.float64)[None, None, :], 0.0) * w[:, :, None], axis=1)
            naive = xp.where(xp.any(nan, axis=1), np.nan, naive)
            value = xp.where(bad_cell, naive, value)
        r = a * math.ldexp(1.0, -2 * lsb) * aks[None, None, :]
        wabs = xp.abs(xp.astype(w, xp.float64))
        if bound_model == GROUPS:
            delta = ar.qk_delta(bound_model, qk_abs=None, group_abs=xp.sum(xp.abs(parts), axis=0), groups=G,
                                tile_abs=None, k_tiles=1, dim_abs=None, head_dim=D)
        elif bound_model == KSTEPS:
            delta = ar.qk_delta(bound_model, qk_abs=xp.abs(qk), group_abs=None, groups=G, tile_abs=None,
                                k_tiles=1, dim_abs=None, head_dim=D)
        else:
            dabs = xp.reshape(ar.exact_matmul(xp.reshape(xp.abs(qv), (n * H, D)), xp.abs(kv).T), (n, H, Tc))
            delta = ar.qk_delta(bound_model, qk_abs=None, group_abs=None, groups=G, tile_abs=None, k_tiles=1,
                                dim_abs=dabs, head_dim=D)
        delta_o = aks[None, None, :] * (1 + ar.U) * delta + ar.U * aks[None, None, :] * xp.abs(qk) + ar.ETA
        R = ar.weighted_heads(wabs, r)  # left to right over heads, no BLAS or pairwise order
        Do = ar.weighted_heads(wabs, xp.where(nan, 0.0, delta_o))
        bound = ar.fp8_bound(R=R, Do=Do, value=value, heads=H, scale=R + Do)
        bound = xp.where(bad_cell, np.inf, bound)
    return emu, value, bound
