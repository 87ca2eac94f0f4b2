"""Paged MQA logits scorers (SPEC section 7): AITER ``pa_mqa_logits_fp4`` decode and prefill.

Each scorer comes in two forms:

* the **emulated order** (``pa_mqa_logits_fp4``, ``pa_mqa_logits_fp4_prefill``): float32 logits
  rounded and summed exactly as the FlyDSL kernels do; the bit-exact target;
* the **exact value** (``pa_mqa_logits_fp4_exact``, ``pa_mqa_logits_fp4_prefill_exact``): the
  real number X = weight_scale * sum_h relu(qk_h) * w_h with every qk_h the exact dot product of
  the dequantized (dyadic) operands and the head sum done in exact integers, presented as
  float64 (rounded once, then multiplied by weight_scale: |value - X| <= 2^-51 |X|), together
  with a rigorous bound that any float32 evaluation honouring the contract meets, whatever
  its head-summation order:

      |out - X| <= max(B_dec, B_pre) + 2^-51 |value|, evaluated in float64 and multiplied by
      (1 + 2^-40), where with u = 2^-24, eta = 2^-150, gamma_k = k u / (1 - k u),
      r_h = relu(qk_h), R = sum_h r_h |w_h|, D = sum_h delta_h |w_h|, rho = sum_h r_h,
      Delta = sum_h delta_h, H heads:
      B_dec = (1+u) |ws| [gamma_H (R + D) + D + 2 H eta] + u |X| + eta
      B_pre = gamma_H [(1+u)|ws|(R + D) + eta (rho + Delta)] + (1+u)|ws| D + eta Delta
              + u |ws| R + eta (rho + 2 H)
      delta_h (the qk model, ``bound_model``):
        "fp32-groups" (default): gamma_G sum_g |dot_g| + G eta   (G = head_dim / 32 groups)
        "exact":                 gamma_k sum_kt |dot_kt| + k eta (k = head_dim / 128 MFMA steps)
        "any-order":             gamma_D sum_d |q_d k_d| + D eta

  B_dec is the decode arrangement (products, any-order sum, final * ws), B_pre the prefill one
  (w' = fl(w ws) first, products or fmas); taking the larger lets a backend place ws either
  way. The bound is +inf (no claim) for cells whose magnitudes come within 2^-3 of float32
  overflow and for cells whose value is not finite. Derivation: docs/ops/logits.md.

The qk accumulation inside the MFMA is a named option of the emulated order (``qk_accum``):
"exact" (default; each 128-dim step exact, rounded once into the float32 accumulator, which
for head_dim 128 is fl(exact qk)) or "fp32-groups" (each 32-dim group exact, rounded, added
left to right: ((G0 + G1) + G2) + G3). SPEC 7.1: exact for D = 128 when the group scales are close,
unverified otherwise.

Windows: decode row r = b * next_n + n scores tokens t < ctx[b] - (next_n - 1 - n); prefill
rows score [local_start, local_end). Only window cells are written: a caller's ``out`` keeps its
bytes elsewhere; without ``out`` the buffer starts as -inf.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mxgate.oracle import layouts
from mxgate.oracle import profiles as _profiles
from mxgate.oracle.ops import logits_fp4 as _fp4
from mxgate.oracle.ops import logits_validate as v
from mxgate.oracle.ops.logits_bound import QK_MODELS


@dataclass(frozen=True)
class ScoredLogits:
    """Both forms of one scorer call, [rows, max_seq_len] each.

    value:    float64 exact value (float64 presentation), -inf outside the window.
    bound:    float64 rigorous bound on |fp32 result - value| (0 outside the window; +inf where
              no finite claim is made).
    window:   bool, the cells the kernel writes.
    emulated: float32 emulated order (-inf outside the window), or None when not asked for.
    """

    value: np.ndarray
    bound: np.ndarray
    window: np.ndarray
    emulated: np.ndarray | None
    qk_accum: str = "exact"
    bound_model: str = "fp32-groups"

    def compare(self, actual: np.ndarray, fill: np.ndarray | float | None = -np.inf) -> LogitsCheck:
        """Judge a backend's float32 output (see ``compare_logits``)."""
        return compare_logits(self, actual, fill=fill)


@dataclass(frozen=True)
class LogitsCheck:
    """How a backend's logits relate to the oracle's two forms.

    exact: window cells bit-equal to the emulated order (NaN matches NaN); within: the other
    window cells inside the bound; outside: window cells beyond the bound (or the wrong
    non-finite class); fill_changed: cells outside the window whose bits differ from the
    caller's fill. verdict: "exact" (all window cells exact, fill kept), "acceptable" (all within
    the bound, fill kept), else "fail"; reason says which.
    """

    cells: int
    exact: int
    within: int
    outside: int
    fill_changed: int
    first_outside: tuple[int, int] | None
    first_fill_changed: tuple[int, int] | None
    worst_ratio: float
    verdict: str
    reason: str
    details: dict[str, object] = field(default_factory=dict)


# ---- FP4 decode ----------------------------------------------------------------------------


def pa_mqa_logits_fp4(q_fp4: np.ndarray, q_scale: np.ndarray, kv_cache: np.ndarray, kv_scale: np.ndarray,
                      block_tables: np.ndarray, weights: np.ndarray, context_lens: np.ndarray,
                      max_seq_len: int | None = None, *, next_n: int | None = None,
                      next_n_max: int | None = None, cu_seq_q: np.ndarray | None = None,
                      weight_scale: float = 1.0, out: np.ndarray | None = None,
                      qk_accum: str = "exact", profile: str | _profiles.Profile = "gfx950",
                      kv_block_size: int | None = None, **launch: object) -> np.ndarray:
    """AITER ``flydsl_pa_mqa_logits_fp4_decode`` in the emulated order. -> float32 [rows, max_seq_len].

    q_fp4 uint8 [B, next_n, H, D/2] or [B*next_n, H, D/2] (aiter-fp4-q rows); q_scale uint8
    [B, next_n, k_tiles, 4, 16, QS_PAD] or [B*next_n, k_tiles, 4, 16, QS_PAD] (aiter-fp4-q-scale);
    kv_cache uint8 [num_blocks, k_tiles, 4, 64, 16], kv_scale uint8 [num_blocks, k_tiles, 4, 64]
    (aiter-fp4-kv / -kv-scale); block_tables int [B, max_blocks]; weights bf16 [rows, H]
    (ml_dtypes.bfloat16 or uint16 bits); context_lens int [B]; weight_scale rounded to float32.
    next_n (alias next_n_max) is needed for 3-D q_fp4. cu_seq_q int [B+1]: ragged decode (row
    cu[b] + n, n < qlen_b, scores t < ctx[b] - (qlen_b - 1 - n)). out: float32 [rows, max_seq_len],
    written in its window cells only. qk_accum: "exact" (default) or "fp32-groups".
    Launch keywords of the kernel (block_k, num_warps, parallel_unit_num, split_ctx_len, stream)
    are accepted and do not change the result.
    """
    call = _decode_call(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, context_lens, max_seq_len,
                        next_n if next_n is not None else next_n_max, cu_seq_q, weight_scale, out, kv_block_size,
                        launch)
    opts = _options("decode", qk_accum, "fp32-groups", emulate=True, exact=False, profile=profile)
    return _fp4.score(*call.args, call.plan, call.width, opts, call.out).emulated


def pa_mqa_logits_fp4_exact(q_fp4: np.ndarray, q_scale: np.ndarray, kv_cache: np.ndarray, kv_scale: np.ndarray,
                            block_tables: np.ndarray, weights: np.ndarray, context_lens: np.ndarray,
                            max_seq_len: int | None = None, *, next_n: int | None = None,
                            next_n_max: int | None = None, cu_seq_q: np.ndarray | None = None,
                            weight_scale: float = 1.0, qk_accum: str = "exact",
                            bound_model: str = "fp32-groups", emulate: bool = True,
                            profile: str | _profiles.Profile = "gfx950", kv_block_size: int | None = None,
                            _force_slow: bool = False, **launch: object) -> ScoredLogits:
    """The exact value and rigorous bound of the decode scorer (and, with ``emulate``, the
    emulated order), same arguments as ``pa_mqa_logits_fp4``.

    bound_model: the qk model the bound assumes: "fp32-groups" (default), "exact", "any-order".
    """
    call = _decode_call(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, context_lens, max_seq_len,
                        next_n if next_n is not None else next_n_max, cu_seq_q, weight_scale, None, kv_block_size,
                        launch)
    opts = _options("decode", qk_accum, bound_model, emulate=emulate, exact=True, profile=profile,
                    force_slow=_force_slow)
    res = _fp4.score(*call.args, call.plan, call.width, opts, None)
    return ScoredLogits(res.value, res.bound, res.window, res.emulated, qk_accum, bound_model)


# ---- FP4 prefill ---------------------------------------------------------------------------


def pa_mqa_logits_fp4_prefill(q_fp4: np.ndarray, q_scale: np.ndarray, kv_cache: np.ndarray,
                              kv_scale: np.ndarray, block_tables: np.ndarray, weights: np.ndarray,
                              row_info: np.ndarray, max_seq_len: int | None = None, *,
                              weight_scale: float = 1.0, out: np.ndarray | None = None,
                              qk_accum: str = "exact", profile: str | _profiles.Profile = "gfx950",
                              kv_block_size: int | None = None, **launch: object) -> np.ndarray:
    """AITER ``flydsl_pa_mqa_logits_fp4_prefill`` in the emulated order. -> float32 [rows, max_seq_len].

    q_fp4 uint8 [rows, H, D/2], q_scale uint8 [rows, k_tiles, 4, 16, QS_PAD], weights bf16
    [rows, H], row_info int [rows, 4] = (batch_id, local_start, local_end, reserved): row i
    scores tokens [local_start, local_end) of its batch. w' = fl(w * weight_scale) is folded
    first and the heads accumulate with fma(relu(qk), w', acc) in the decode order; no final
    multiply. Other arguments as ``pa_mqa_logits_fp4``.
    """
    call = _prefill_call(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, row_info, max_seq_len,
                         weight_scale, out, kv_block_size, launch)
    opts = _options("prefill", qk_accum, "fp32-groups", emulate=True, exact=False, profile=profile)
    return _fp4.score(*call.args, call.plan, call.width, opts, call.out).emulated


def pa_mqa_logits_fp4_prefill_exact(q_fp4: np.ndarray, q_scale: np.ndarray, kv_cache: np.ndarray,
                                    kv_scale: np.ndarray, block_tables: np.ndarray, weights: np.ndarray,
                                    row_info: np.ndarray, max_seq_len: int | None = None, *,
                                    weight_scale: float = 1.0, qk_accum: str = "exact",
                                    bound_model: str = "fp32-groups", emulate: bool = True,
                                    profile: str | _profiles.Profile = "gfx950",
                                    kv_block_size: int | None = None, _force_slow: bool = False,
                                    **launch: object) -> ScoredLogits:
    """Exact value and bound of the prefill scorer (X = weight_scale * sum_h relu(qk_h) w_h, as
    for decode); same arguments as ``pa_mqa_logits_fp4_prefill``."""
    call = _prefill_call(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, row_info, max_seq_len,
                         weight_scale, None, kv_block_size, launch)
    opts = _options("prefill", qk_accum, bound_model, emulate=emulate, exact=True, profile=profile,
                    force_slow=_force_slow)
    res = _fp4.score(*call.args, call.plan, call.width, opts, None)
    return ScoredLogits(res.value, res.bound, res.window, res.emulated, qk_accum, bound_model)


# ---- judging ---------------------------------------------------------------------------------


def compare_logits(scored: ScoredLogits, actual: np.ndarray, fill: np.ndarray | float | None = -np.inf) -> LogitsCheck:
    """Classify a backend's float32 logits against the emulated order and the exact value.

    fill: what the caller pre-filled ``actual`` with (scalar or array): cells outside the
    window must still hold exactly those bits. None: cells outside the window are not judged.
    """
    a = v.float32(actual, "actual")
    if a.shape != scored.value.shape:
        raise ValueError(f"actual must have shape {scored.value.shape}, got {a.shape}")
    win = scored.window
    cells = int(win.sum())
    fill_arr = _fill(fill, a.shape)
    changed = ~win & (a.view(np.uint32) != fill_arr.view(np.uint32)) & ~(np.isnan(a) & np.isnan(fill_arr))
    if fill is None:
        changed = np.zeros_like(win)
    value, bound = scored.value, scored.bound
    with np.errstate(invalid="ignore", over="ignore"):
        a64 = a.astype(np.float64)
        finite_v = np.isfinite(value)
        err = np.abs(a64 - value)
        ok_finite = finite_v & np.isfinite(a64) & (err <= bound)
        same_class = ~finite_v & ((np.isnan(value) & np.isnan(a64)) | (value == a64))
        good = win & (ok_finite | same_class)
        if scored.emulated is not None:
            e = scored.emulated
            bit = (a.view(np.uint32) == e.view(np.uint32)) | (np.isnan(a) & np.isnan(e))
            exact_cells = win & bit
        else:
            exact_cells = win & (a64 == value)
        ratio = np.where(win & finite_v & (bound > 0), err / np.where(bound > 0, bound, 1.0), 0.0)
    outside = win & ~good & ~exact_cells
    n_exact = int(exact_cells.sum())
    n_out = int(outside.sum())
    n_fill = int(changed.sum())
    within = cells - n_exact - n_out
    first_out = tuple(int(i) for i in np.argwhere(outside)[0]) if n_out else None
    first_fill = tuple(int(i) for i in np.argwhere(changed)[0]) if n_fill else None
    worst = float(np.nanmax(ratio[win & np.isfinite(ratio)])) if cells else 0.0
    if n_out or n_fill:
        parts = []
        if n_out:
            r, c = first_out
            parts.append(f"{n_out} of {cells} window cells outside the bound, first at {first_out}: "
                         f"got {float(a[r, c])!r}, exact {float(value[r, c])!r} +- {float(bound[r, c])!r}")
        if n_fill:
            r, c = first_fill
            parts.append(f"{n_fill} cells outside the window changed, first at {first_fill}: "
                         f"got {float(a[r, c])!r} (bits {int(a.view(np.uint32)[r, c]):#010x}), "
                         f"fill bits {int(fill_arr.view(np.uint32)[r, c]):#010x}")
        verdict, reason = "fail", "; ".join(parts)
    elif n_exact == cells:
        verdict, reason = "exact", ""
    else:
        verdict = "acceptable"
        reason = (f"{within} of {cells} window cells differ from the emulated order but lie within the "
                  f"rigorous bound (qk model {scored.bound_model}, any head order); worst |err|/bound {worst:.3g}")
    return LogitsCheck(cells, n_exact, within, n_out, n_fill, first_out, first_fill, worst, verdict, reason)


# ---- argument handling -------------------------------------------------------------------------


def _fill(fill: np.ndarray | float | None, shape: tuple[int, ...]) -> np.ndarray:
    """compare_logits' fill as float32 of the logits' shape (None: NaN, never compared)."""
    if fill is None:
        return np.broadcast_to(np.float32(np.nan), shape)
    if not isinstance(fill, (np.ndarray, list, tuple)):
        return np.broadcast_to(v.real(fill, "fill", finite=False), shape)
    array = np.asarray(fill, dtype=np.float32)
    try:
        return np.broadcast_to(array, shape)
    except ValueError:
        raise ValueError(f"fill must be a scalar or broadcast to actual's shape {shape}, got shape {array.shape}") from None


@dataclass
class _Call:
    args: tuple
    plan: _fp4.Plan
    width: int
    out: np.ndarray | None


def _options(mode: str, qk_accum: str, bound_model: str, *, emulate: bool, exact: bool,
             profile: str | _profiles.Profile, force_slow: bool = False) -> _fp4.Options:
    qk_accum = v.choice(qk_accum, "qk_accum", _fp4.QK_ACCUM)
    bound_model = v.choice(bound_model, "bound_model", QK_MODELS)
    return _fp4.Options(mode, qk_accum, bound_model, v.flag(emulate, "emulate"), exact, _profiles.get(profile),
                        v.flag(force_slow, "_force_slow"))


def _launch(launch: dict, kv_block_size: int | None) -> None:
    allowed = {"block_k", "num_warps", "parallel_unit_num", "split_ctx_len", "stream"}
    unknown = sorted(set(launch) - allowed)
    if unknown:
        raise TypeError(f"unexpected keyword argument(s) {', '.join(unknown)}")
    if kv_block_size is not None and v.integer(kv_block_size, "kv_block_size") != v.KV_BLOCK:
        raise ValueError(f"kv_block_size must be {v.KV_BLOCK}, got {kv_block_size}")


def _common(q_fp4: object, q_scale: object, kv_cache: object, kv_scale: object, weights: object,
            next_n: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int, int]:
    q, qs, rows, implied = v.fp4_q(q_fp4, q_scale, next_n)
    H, D = q.shape[1], 2 * q.shape[2]
    num_blocks = v.fp4_kv(kv_cache, kv_scale, D)
    w = v.weights_bf16(weights, rows, H)
    (q_e8m0,) = layouts.get("aiter-fp4-q-scale").gather(qs, num_heads=H)
    return q, q_e8m0, w, rows, implied, num_blocks


def _decode_call(q_fp4: object, q_scale: object, kv_cache: object, kv_scale: object, block_tables: object,
                 weights: object, context_lens: object, max_seq_len: int | None, next_n: int | None,
                 cu_seq_q: object, weight_scale: float, out: object, kv_block_size: int | None,
                 launch: dict) -> _Call:
    _launch(launch, kv_block_size)
    q, q_e8m0, w, rows, implied, num_blocks = _common(q_fp4, q_scale, kv_cache, kv_scale, weights, next_n)
    bt = v.integers(block_tables, "block_tables", 2)
    ctx = v.integers(context_lens, "context_lens", 1)
    B = ctx.shape[0]
    if bt.shape[0] != B:
        raise ValueError(f"block_tables must have {B} rows (one per context_lens entry), got {bt.shape[0]}")
    width = v.seq_len(max_seq_len, out)
    v.allocation(rows * width, 8, f"max_seq_len={v.shown(width)}", f"the logits of {rows} rows")
    if ctx.size and (ctx.min() < 0 or ctx.max() > width):
        b = int(np.argmax((ctx < 0) | (ctx > width)))
        raise ValueError(f"context_lens[{b}] = {int(ctx[b])} must lie in [0, max_seq_len={width}]")
    ws = v.real_f32(weight_scale, "weight_scale")
    if cu_seq_q is None:
        nn = implied or (v.positive_int(next_n, "next_n") if next_n is not None else None)
        if nn is None:
            raise TypeError("next_n (or next_n_max) must be given for a 3-D q_fp4 [B*next_n, H, D/2]")
        if rows != B * nn:
            raise ValueError(f"q_fp4 must have batch*next_n = {B}*{nn} = {B * nn} rows, got {rows}")
        batch = np.repeat(np.arange(B), nn)
        n = np.tile(np.arange(nn), B)
        end = np.maximum(ctx[batch] - (nn - 1 - n), 0)
    else:
        cu = v.integers(cu_seq_q, "cu_seq_q", 1)
        if cu.shape[0] != B + 1 or cu[0] != 0 or np.any(np.diff(cu) < 0) or cu[-1] > rows:
            raise ValueError(f"cu_seq_q must be a non-decreasing [B+1] = [{B + 1}] prefix sum from 0 "
                             f"to at most {rows} rows, got {cu.tolist()}")
        qlen = np.diff(cu)
        nn_max = next_n if next_n is not None else (int(qlen.max()) if B else 0)
        if qlen.size and qlen.max() > nn_max:
            raise ValueError(f"cu_seq_q gives a batch {int(qlen.max())} rows, more than next_n_max={nn_max}")
        batch = np.full(rows, -1)
        end = np.zeros(rows, dtype=np.int64)
        for b in range(B):  # rows per batch: a short loop over batches, not tokens
            n = np.arange(qlen[b])
            batch[cu[b]:cu[b + 1]] = b
            end[cu[b]:cu[b + 1]] = np.maximum(ctx[b] - (qlen[b] - 1 - n), 0)
        live = batch >= 0
        batch, end = np.where(live, batch, 0), np.where(live, end, 0)
    start = np.zeros(rows, dtype=np.int64)
    v.block_coverage(bt, batch, start, end, num_blocks)
    o = v.out_buffer(out, rows, width) if out is not None else None
    plan = _fp4.Plan(batch.astype(np.int64), start, end.astype(np.int64))
    return _Call((q, q_e8m0, kv_cache, kv_scale, bt, w, ws), plan, width, o)


def _prefill_call(q_fp4: object, q_scale: object, kv_cache: object, kv_scale: object, block_tables: object,
                  weights: object, row_info: object, max_seq_len: int | None, weight_scale: float, out: object,
                  kv_block_size: int | None, launch: dict) -> _Call:
    _launch(launch, kv_block_size)
    if isinstance(q_fp4, np.ndarray) and q_fp4.ndim != 3:
        raise ValueError(f"q_fp4 must have shape [rows, H, D/2] for prefill, got {q_fp4.shape}")
    q, q_e8m0, w, rows, _, num_blocks = _common(q_fp4, q_scale, kv_cache, kv_scale, weights, None)
    bt = v.integers(block_tables, "block_tables", 2)
    info = v.integers(row_info, "row_info", 2)
    if info.shape[0] < rows or info.shape[1] != 4:
        raise ValueError(f"row_info must have shape [>= {rows}, 4] (batch_id, local_start, local_end, "
                         f"reserved), got {info.shape}")
    info = info[:rows]
    width = v.seq_len(max_seq_len, out)
    v.allocation(rows * width, 8, f"max_seq_len={v.shown(width)}", f"the logits of {rows} rows")
    batch, start, end = info[:, 0], info[:, 1], info[:, 2]
    bad = (batch < 0) | (batch >= bt.shape[0])
    if bad.any():
        r = int(np.argmax(bad))
        raise ValueError(f"row_info[{r}, 0] = {int(batch[r])} must be a batch index in [0, {bt.shape[0]})")
    bad = (start < 0) | (end < start) | (end > width)
    if bad.any():
        r = int(np.argmax(bad))
        raise ValueError(f"row_info[{r}] window [{int(start[r])}, {int(end[r])}) must satisfy "
                         f"0 <= local_start <= local_end <= max_seq_len={width}")
    ws = v.real_f32(weight_scale, "weight_scale")
    live = end > start
    v.block_coverage(bt, batch[live], start[live], end[live], num_blocks)
    o = v.out_buffer(out, rows, width) if out is not None else None
    plan = _fp4.Plan(batch, start, end)
    return _Call((q, q_e8m0, kv_cache, kv_scale, bt, w, ws), plan, width, o)
