"""Paged MQA logits scorers (SPEC section 7): AITER ``pa_mqa_logits_fp4`` decode and prefill.

Each scorer comes in two forms:

* the **emulated order** (``pa_mqa_logits_fp4``, ``pa_mqa_logits_fp4_prefill``): float32 logits
  rounded and summed exactly as the FlyDSL kernels do; the bit-exact target;
* the **value and bound** (``pa_mqa_logits_fp4_scored``, ``pa_mqa_logits_fp4_prefill_scored``): the
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
        "fp32-ksteps":           gamma_k sum_kt |dot_kt| + k eta (k = head_dim / 128 MFMA steps)
        "any-order":             gamma_D sum_d |q_d k_d| + D eta

  B_dec is the decode arrangement (products, any-order sum, final * ws), B_pre the prefill one
  (w' = fl(w ws) first, products or fmas); taking the larger lets a backend place ws either
  way. The bound is +inf (no claim) for cells whose magnitudes come within 2^-3 of float32
  overflow and for cells whose value is not finite. Derivation: docs/ops/logits.md.

The qk accumulation inside the MFMA is a named option of the emulated order (``qk_accum``):
"fp32-ksteps" (default; each 128-dim step exact, rounded once into the float32 accumulator, which
for head_dim 128 is fl(exact qk)) or "fp32-groups" (each 32-dim group exact, rounded, added
left to right: ((G0 + G1) + G2) + G3). SPEC 7.1: exact for D = 128 when the group scales are close,
unverified otherwise.

Windows: decode row r = b * next_n + n scores tokens t < ctx[b] - (next_n - 1 - n); prefill
rows score [local_start, local_end). Only window cells are written: a caller's ``out`` keeps its
bytes elsewhere; without ``out`` the buffer starts as -inf.

Namespaces: NumPy arrays are scored on the host (float32 BLAS dots, threads); torch tensors
(every tensor argument on one device) are scored on their device with the same rules and the
same bits, the result fields tensors there. The cells of the exact (integer) path, and
any cell whose float32 qk or emulated result on the device is not finite (where a device's NaN
rules could differ from x86's), are scored on the host by the same code, in the host's own
chunks (NumPy's NaN payloads depend on the shapes), and put in place.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from mxgate.oracle import layouts
from mxgate.oracle import profiles as _profiles
from mxgate.oracle import xp as X
from mxgate.oracle.arguments import is_tensor
from mxgate.oracle.parallel import run_ranges
from mxgate.oracle.formats import e2m1
from mxgate.oracle.formats.bf16 import bf16_to_f32
from mxgate.oracle.geometry import GROUP, KV_BLOCK, TILE_K
from mxgate.oracle.ops.f32math import fma32
from mxgate.oracle.scorers import arithmetic as ar
from mxgate.oracle.scorers import common as v
from mxgate.oracle.scorers.arithmetic import (
    add_round_f32,
    bf16_parts,
    f32_nearest,
    f32_parts,
    float_dyadic,
    f64_nearest,
    pow2_f64,
    weighted_sum_f64,
)
from mxgate.oracle.scorers.common import ANY_ORDER, GROUPS, KSTEPS, MFMA_M, QK_ACCUM, QK_MODELS, TWO_E2M1, ScoredLogits

# ---- FP4 decode ----------------------------------------------------------------------------


def pa_mqa_logits_fp4(q_fp4: np.ndarray, q_scale: np.ndarray, kv_cache: np.ndarray, kv_scale: np.ndarray,
                      block_tables: np.ndarray, weights: np.ndarray, context_lens: np.ndarray,
                      max_seq_len: int | None = None, *, next_n: int | None = None,
                      next_n_max: int | None = None, cu_seq_q: np.ndarray | None = None,
                      weight_scale: float = 1.0, out: np.ndarray | None = None,
                      qk_accum: str = KSTEPS, profile: str | _profiles.Profile = "gfx950",
                      kv_block_size: int | None = None, **launch: object) -> np.ndarray:
    """AITER ``flydsl_pa_mqa_logits_fp4_decode`` in the emulated order. -> float32 [rows, max_seq_len].

    q_fp4 uint8 [B, next_n, H, D/2] or [B*next_n, H, D/2] (aiter-fp4-q rows); q_scale uint8
    [B, next_n, k_tiles, 4, 16, QS_PAD] or [B*next_n, k_tiles, 4, 16, QS_PAD] (aiter-fp4-q-scale);
    kv_cache uint8 [num_blocks, k_tiles, 4, 64, 16], kv_scale uint8 [num_blocks, k_tiles, 4, 64]
    (aiter-fp4-kv / -kv-scale); block_tables int [B, max_blocks]; weights bf16 [rows, H]
    (ml_dtypes.bfloat16 or uint16 bits); context_lens int [B]; weight_scale rounded to float32.
    next_n (alias next_n_max) is needed for 3-D q cu_seq_q int [B+1]: ragged decode (row
    cu[b] + n, n < qlen_b, scores t < ctx[b] - (qlen_b - 1 - n)). out: float32 [rows, max_seq_len],
    written in its window cells only. qk_accum: "fp32-ksteps" (default) or "fp32-groups".
    Launch keywords of the kernel (block_k, num_warps, parallel_unit_num, split_ctx_len, stream)
    are accepted and do not change the result.
    """
    call = _decode_call(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, context_lens, max_seq_len,
                        next_n if next_n is not None else next_n_max, cu_seq_q, weight_scale, out, kv_block_size,
                        launch)
    opts = _options("decode", qk_accum, GROUPS, emulate=True, with_bound=False, profile=profile)
    return score(*call.args, call.plan, call.width, opts, call.out).emulated


def pa_mqa_logits_fp4_scored(q_fp4: np.ndarray, q_scale: np.ndarray, kv_cache: np.ndarray, kv_scale: np.ndarray,
                            block_tables: np.ndarray, weights: np.ndarray, context_lens: np.ndarray,
                            max_seq_len: int | None = None, *, next_n: int | None = None,
                            next_n_max: int | None = None, cu_seq_q: np.ndarray | None = None,
                            weight_scale: float = 1.0, qk_accum: str = KSTEPS,
                            bound_model: str = GROUPS, emulate: bool = True,
                            profile: str | _profiles.Profile = "gfx950", kv_block_size: int | None = None,
                            _force_slow: bool = False, **launch: object) -> ScoredLogits:
    """The exact value and rigorous bound of the decode scorer (and, with ``emulate``, the
    emulated order), same arguments as ``pa_mqa_logits_fp4``.

    bound_model: the qk model the bound assumes: "fp32-groups" (default), "fp32-ksteps", "any-order".
    """
    call = _decode_call(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, context_lens, max_seq_len,
                        next_n if next_n is not None else next_n_max, cu_seq_q, weight_scale, None, kv_block_size,
                        launch)
    opts = _options("decode", qk_accum, bound_model, emulate=emulate, with_bound=True, profile=profile,
                    force_slow=_force_slow)
    res = score(*call.args, call.plan, call.width, opts, None)
    return ScoredLogits(res.value, res.bound, res.window, res.emulated, qk_accum, bound_model)


# ---- FP4 prefill ---------------------------------------------------------------------------


def pa_mqa_logits_fp4_prefill(q_fp4: np.ndarray, q_scale: np.ndarray, kv_cache: np.ndarray,
                              kv_scale: np.ndarray, block_tables: np.ndarray, weights: np.ndarray,
                              row_info: np.ndarray, max_seq_len: int | None = None, *,
                              weight_scale: float = 1.0, out: np.ndarray | None = None,
                              qk_accum: str = KSTEPS, profile: str | _profiles.Profile = "gfx950",
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
    opts = _options("prefill", qk_accum, GROUPS, emulate=True, with_bound=False, profile=profile)
    return score(*call.args, call.plan, call.width, opts, call.out).emulated


def pa_mqa_logits_fp4_prefill_scored(q_fp4: np.ndarray, q_scale: np.ndarray, kv_cache: np.ndarray,
                                    kv_scale: np.ndarray, block_tables: np.ndarray, weights: np.ndarray,
                                    row_info: np.ndarray, max_seq_len: int | None = None, *,
                                    weight_scale: float = 1.0, qk_accum: str = KSTEPS,
                                    bound_model: str = GROUPS, emulate: bool = True,
                                    profile: str | _profiles.Profile = "gfx950",
                                    kv_block_size: int | None = None, _force_slow: bool = False,
                                    **launch: object) -> ScoredLogits:
    """Exact value and bound of the prefill scorer (X = weight_scale * sum_h relu(qk_h) w_h, as
    for decode); same arguments as ``pa_mqa_logits_fp4_prefill``."""
    call = _prefill_call(q_fp4, q_scale, kv_cache, kv_scale, block_tables, weights, row_info, max_seq_len,
                         weight_scale, None, kv_block_size, launch)
    opts = _options("prefill", qk_accum, bound_model, emulate=emulate, with_bound=True, profile=profile,
                    force_slow=_force_slow)
    res = score(*call.args, call.plan, call.width, opts, None)
    return ScoredLogits(res.value, res.bound, res.window, res.emulated, qk_accum, bound_model)


# ---- argument handling -------------------------------------------------------------------------


@dataclass
class _Call:
    args: tuple
    plan: Plan
    width: int
    out: np.ndarray | None


def _options(mode: str, qk_accum: str, bound_model: str, *, emulate: bool, with_bound: bool,
             profile: str | _profiles.Profile, force_slow: bool = False) -> Options:
    qk_accum = v.choice(qk_accum, "qk_accum", QK_ACCUM)
    bound_model = v.choice(bound_model, "bound_model", QK_MODELS)
    return Options(mode, qk_accum, bound_model, v.flag(emulate, "emulate"), with_bound, _profiles.get(profile),
                   v.flag(force_slow, "_force_slow"))


def _launch(launch: dict, kv_block_size: int | None) -> None:
    allowed = {"block_k", "num_warps", "parallel_unit_num", "split_ctx_len", "stream"}
    unknown = sorted(set(launch) - allowed)
    if unknown:
        raise TypeError(f"unexpected keyword argument(s) {', '.join(unknown)}")
    if kv_block_size is not None and v.integer(kv_block_size, "kv_block_size") != KV_BLOCK:
        raise ValueError(f"kv_block_size must be {KV_BLOCK}, got {kv_block_size}")


def _devices(q_fp4: object, q_scale: object, kv_cache: object, kv_scale: object, weights: object, out: object,
             **small: object) -> None:
    """A tensor call computes on the large tensors (and a caller's out): all of them tensors on one
    device, the small ones there too or on the host."""
    large = dict(q_fp4=q_fp4, q_scale=q_scale, kv_cache=kv_cache, kv_scale=kv_scale, weights=weights)
    v.one_device(large if out is None else {**large, "out": out}, "q_fp4", small)


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
    _devices(q_fp4, q_scale, kv_cache, kv_scale, weights, out, block_tables=block_tables,
             context_lens=context_lens, cu_seq_q=cu_seq_q)
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
    plan = Plan(batch.astype(np.int64), start, end.astype(np.int64))
    return _Call((q, q_e8m0, kv_cache, kv_scale, bt, w, ws), plan, width, o)


def _prefill_call(q_fp4: object, q_scale: object, kv_cache: object, kv_scale: object, block_tables: object,
                  weights: object, row_info: object, max_seq_len: int | None, weight_scale: float, out: object,
                  kv_block_size: int | None, launch: dict) -> _Call:
    _launch(launch, kv_block_size)
    if (isinstance(q_fp4, np.ndarray) or is_tensor(q_fp4)) and q_fp4.ndim != 3:
        raise ValueError(f"q_fp4 must have shape [rows, H, D/2] for prefill, got {tuple(q_fp4.shape)}")
    q, q_e8m0, w, rows, _, num_blocks = _common(q_fp4, q_scale, kv_cache, kv_scale, weights, None)
    _devices(q_fp4, q_scale, kv_cache, kv_scale, weights, out, block_tables=block_tables, row_info=row_info)
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
    plan = Plan(batch, start, end)
    return _Call((q, q_e8m0, kv_cache, kv_scale, bt, w, ws), plan, width, o)


# ---- the engine shared by decode and prefill ---------------------------------------------------
# For each row r (a query token) and each token t of its window, with D = head_dim, G = D/32
# groups and H heads:
#     I_g[h, t]  = sum_{d in g} nq[h, d] * nk[t, d]          (nq, nk = 2 * E2M1 value, integers)
#     qk[h, t]   = sum_g I_g * 2^(eq[h, g] + ek[t, g] - 256)  (exact real value)
# Fast path (every (row, head, token) whose group exponents span at most SPAN_FAST binades):
#   * the four group dots come from float32 matmuls with each operand pre-scaled by
#     2^(e - min_g e) of its own row: all partial sums are (integer < 2^13) * 2^k, exact in
#     float32 in any order (BLAS may block or fuse as it likes);
#   * q' = sum_g I'_g in float64 is an integer below G * 4608 * 2^span <= 2^45: exact;
#   * qk = q' * 2^(Lq + Lk - 256) exactly (a power-of-two scaling of a float64).
# The emulated order then rounds and sums in float32 exactly as SPEC section 7 states; the
# value sums relu(q') * mantissa(w) * 2^(...) over heads with exact integers
# (arithmetic.weighted_sum_f64) and rounds once to float64.
# Slow path (wider spans, 0xFF scale bytes, non-finite weights, or on request): the same
# semantics in exact integers per cell-head (two-limb int64, Python integers past its bound) and
# one correctly rounded digit sum for the value; its reference form (_slow_cells with exact=True:
# Python integers and fractions throughout) doubles as an independent model in the tests.

STEP_GROUPS = TILE_K // GROUP  # groups per MFMA K step
I_MAX = GROUP * 12 * 12  # largest |I_g|: 32 products of two values in [-12, 12]
CELLS_PER_CHUNK = 1 << 18  # (row, head, token) cells per chunk: temporaries stay in cache
DEVICE_CHUNKS = 64  # on a device, host chunks per chunk: fewer, larger launches


@dataclass(frozen=True)
class Plan:
    """What every row scores: tokens [start, end) of batch ``batch`` (ends already clipped);
    NumPy on the host whatever the namespace of the call."""

    batch: np.ndarray  # int64 [R]
    start: np.ndarray  # int64 [R]
    end: np.ndarray  # int64 [R]


@dataclass
class Result:
    emulated: Any  # float32 [R, width] or None
    value: Any  # float64 [R, width] or None
    bound: Any  # float64 [R, width] or None
    window: Any  # bool [R, width]


@dataclass(frozen=True)
class Options:
    mode: str  # "decode" (final * ws) or "prefill" (w' = fl(w ws), fma chain)
    qk_accum: str
    bound_model: str
    emulate: bool
    with_bound: bool  # compute the value and the bound
    profile: _profiles.Profile
    force_slow: bool = False


def span_fast(groups: int) -> int:
    """Largest exponent span of one (row, head, token) for which the fast path is exact:
    relu(q') * |mantissa(w)| < G * 4608 * 2^span * 256 must stay below 2^53."""
    return 53 - (groups * I_MAX * 256 - 1).bit_length()  # integer ceil(log2)


def score(q_packed: Any, q_e8m0: Any, kv_cache: Any, kv_scale: Any, block_tables: np.ndarray, w_bits: Any,
          ws: np.float32, plan: Plan, width: int, opts: Options, out: Any) -> Result:
    """Score every row over its window, in the namespace and on the device of ``q_packed``.
    ``out`` (float32 [R, width]) receives the emulated order in its window cells only; without
    it a fresh -inf buffer is used."""
    xp = X.namespace(q_packed)
    dev = X.device(q_packed)
    R, H, half = q_packed.shape
    D = 2 * half
    cols = xp.arange(width, device=dev)
    start, end = xp.asarray(plan.start, device=dev), xp.asarray(plan.end, device=dev)
    res = Result(
        emulated=(out if out is not None else xp.full((R, width), -math.inf, dtype=xp.float32, device=dev))
        if opts.emulate else None,
        value=xp.full((R, width), -math.inf, dtype=xp.float64, device=dev) if opts.with_bound else None,
        bound=xp.zeros((R, width), dtype=xp.float64, device=dev) if opts.with_bound else None,
        window=(cols[None, :] >= start[:, None]) & (cols[None, :] < end[:, None]),
    )
    for b in np.unique(plan.batch):
        rows = np.flatnonzero((plan.batch == b) & (plan.end > plan.start))
        if rows.size:
            _Group(rows, int(b), q_packed, q_e8m0, w_bits, ws, plan, D, opts).run(kv_cache, kv_scale, block_tables,
                                                                                 res, opts)
    return res


class _Group:
    """The rows of one batch, scored together against that batch's KV tokens."""

    def __init__(self, rows: np.ndarray, b: int, q_packed: Any, q_e8m0: Any, w_bits: Any, ws: np.float32,
                 plan: Plan, D: int, opts: Options) -> None:
        xp = self.xp = X.namespace(q_packed)
        dev = self.dev = X.device(q_packed)
        self.numpy = X.is_numpy(xp)
        self.n_rows, self.b, self.D = rows.size, b, D
        self.rows = xp.asarray(rows, device=dev)  # indices into the call's rows
        self.G = D // GROUP
        self.k_tiles = D // TILE_K
        self.H = q_packed.shape[1]
        self.ws = ws
        self.start_np, self.end_np = plan.start[rows], plan.end[rows]
        self.start, self.end = xp.asarray(self.start_np, device=dev), xp.asarray(self.end_np, device=dev)
        self.span_fast = span_fast(self.G)
        self._mirror: tuple[_Group, Result] | None = None  # a device group's host copy (_host_mirror)
        p = opts.profile
        self.q_packed = q_packed[self.rows]
        codes = e2m1.unpack_nibbles(self.q_packed)  # [Rb, H, D]
        self.two = X.table_on(TWO_E2M1, codes)
        self.nq_int = X.take(self.two, codes)  # float32 integers
        eq = xp.astype(q_e8m0[self.rows], xp.int64)  # [Rb, H, G]
        self.eq = eq
        self.q_special = xp.any(eq == 0xFF, axis=2)  # [Rb, H]
        zero = (eq == 0) if p.byte0 == "zero" else xp.zeros(eq.shape, dtype=xp.bool, device=dev)
        lq, aq, spq = _offsets(eq, zero | (eq == 0xFF))
        self.lq, self.spq = lq, spq
        Rb = rows.size
        scaled = xp.reshape(self.nq_int, (Rb, self.H, self.G, GROUP)) * _pow2_f32(xp.minimum(aq, self.span_fast))[..., None]
        scaled[zero] = 0.0
        # [G, Rb*H, 32]: one contiguous matmul operand per group
        self.nq_g = xp.reshape(xp.permute_dims(scaled, (2, 0, 1, 3)), (self.G, Rb * self.H, GROUP))
        self.nq_abs = xp.abs(self.nq_g) if opts.bound_model == ANY_ORDER else None
        self.w_bits = w_bits[self.rows]  # bf16 bits: uint16 (a tensor's int16, as the check gives them)
        self.w32 = bf16_to_f32(self.w_bits if self.numpy else self.w_bits.view(xp.uint16))
        self.mw, self.fw, wfin = bf16_parts(self.w_bits)
        self.w_bad = ~xp.all(wfin, axis=1)  # rows holding a non-finite weight: slow path
        self.wp = self.w32 * float(ws)  # prefill: w' = fl(w * ws), float32 (ws is a float32 value)

    def run(self, kv_cache: Any, kv_scale: Any, block_tables: np.ndarray, res: Result, opts: Options) -> None:
        t0, t1 = int(self.start_np.min()), int(self.end_np.max())
        tokens = np.arange(t0, t1)
        needed = ((tokens[None, :] >= self.start_np[:, None]) & (tokens[None, :] < self.end_np[:, None])).any(axis=0)
        blocks = block_tables[self.b, tokens // KV_BLOCK]
        slots = self.xp.asarray(np.where(needed, blocks * KV_BLOCK + tokens % KV_BLOCK, -1), device=self.dev)
        (packed,) = layouts.get("aiter-fp4-kv").gather(kv_cache, slots=slots)
        (ek,) = layouts.get("aiter-fp4-kv-scale").gather(kv_scale, slots=slots)
        self.k_codes = e2m1.unpack_nibbles(packed)  # [T, D]
        self.ek = self.xp.astype(ek, self.xp.int64)  # [T, G]
        self.t0, self.t1 = t0, t1
        # a device chunk is a whole number of host chunks: the host redoes its cells in the
        # host's own chunks, with the host's shapes (NumPy's NaN payloads depend on them)
        self.host_chunk = max(64, CELLS_PER_CHUNK // (self.n_rows * self.H))
        chunk = self.host_chunk if self.numpy else self.host_chunk * DEVICE_CHUNKS
        n = -(-(t1 - t0) // chunk)

        def work(first: int, last: int) -> None:
            for c in range(first, last):
                lo = c * chunk
                self._chunk(lo, min(lo + chunk, t1 - t0), res, opts)

        if self.numpy:
            run_ranges(n, work, weight=chunk * self.n_rows * self.H * 8)
        else:  # the device runs each chunk's operations in parallel already
            work(0, n)

    # ---- one chunk of tokens ------------------------------------------------------------

    def _chunk(self, lo: int, hi: int, res: Result, opts: Options) -> None:
        xp, G = self.xp, self.G
        Rb, Tc = self.n_rows, hi - lo
        tok = xp.arange(lo, hi, device=self.dev) + self.t0
        inwin = (tok[None, :] >= self.start[:, None]) & (tok[None, :] < self.end[:, None])  # [Rb, Tc]
        ek = self.ek[lo:hi]
        k_special = xp.any(ek == 0xFF, axis=1)
        k_zero = (ek == 0) if opts.profile.byte0 == "zero" else xp.zeros(ek.shape, dtype=xp.bool, device=self.dev)
        lk, ak, spk = _offsets(ek, k_zero | (ek == 0xFF))
        nk = xp.reshape(X.take(self.two, self.k_codes[lo:hi]), (Tc, G, GROUP)) * _pow2_f32(xp.minimum(ak, self.span_fast))[..., None]
        nk[k_zero] = 0.0
        ig = self._dots(nk)  # I'_g = I_g * 2^(aq + ak), exact (see the comment above Plan)
        qp = xp.astype(ig[0], xp.float64)
        for g in range(1, G):
            qp += ig[g]
        if opts.force_slow:
            slow_cells = inwin
        elif (int(xp.max(self.spq)) + int(xp.max(spk)) > self.span_fast or bool(xp.any(self.q_special))
              or bool(xp.any(k_special)) or bool(xp.any(self.w_bad))):
            slow = self.spq[:, :, None] + spk[None, None, :] > self.span_fast
            slow |= self.q_special[:, :, None] | k_special[None, None, :]
            slow_cells = (xp.any(slow, axis=1) | self.w_bad[:, None]) & inwin
        else:
            slow_cells = xp.zeros_like(inwin)
        patch = None
        if self.numpy and slow_cells.any():
            patch = _slow_cells(self, np.argwhere(slow_cells), lo, ek, opts)

        emu = value = bound = None
        if opts.emulate:
            with X.ieee_quiet(xp):  # cells outside the window may hold garbage
                scale = pow2_f64(self.lq - 256)[:, :, None] * pow2_f64(lk)[None, None, :]  # exact
                qk32 = self._qk32(ig, scale, opts)
            if patch is not None:
                qk32[patch.r, :, patch.t] = patch.qk32
            with X.ieee_quiet(xp):
                emu = self._emulate(qk32, opts)
        if opts.with_bound:
            with X.ieee_quiet(xp):
                value, bound = self._value_and_bound(qp, ig, lk, nk, opts)
            if patch is not None:
                value[patch.r, patch.t] = patch.value
                bound[patch.r, patch.t] = patch.bound
        if not self.numpy:
            # non-finite qk or logits: from here a device's NaN rules could change the result
            # (even to a finite one: relu(-inf) after a CUDA NaN), so the host gives them
            host = slow_cells
            if emu is not None:
                host = host | ((xp.any(~xp.isfinite(qk32), axis=1) | ~xp.isfinite(emu)) & inwin)
            if bool(xp.any(host)):
                self._from_host(X.to_numpy(host), lo, hi, opts, emu, value, bound)
        rows = xp.broadcast_to(self.rows[:, None], (Rb, Tc))[inwin]
        cols = xp.broadcast_to(tok[None, :], (Rb, Tc))[inwin]
        if opts.emulate:
            res.emulated[rows, cols] = emu[inwin]
        if opts.with_bound:
            res.value[rows, cols] = value[inwin]
            res.bound[rows, cols] = bound[inwin]

    def _dots(self, nk: Any) -> Any:
        """I'_g for every group: [G, Rb, H, Tc] (float32 on NumPy, float64 on a device)."""
        if not self.numpy:
            return self.xp.stack([self._dot(self.nq_g[g], nk[:, g, :]) for g in range(self.G)])
        ig = np.empty((self.G, self.n_rows, self.H, nk.shape[0]), dtype=np.float32)
        for g in range(self.G):
            self._dot(self.nq_g[g], nk[:, g, :], out=ig[g].reshape(self.n_rows * self.H, nk.shape[0]))
        return ig

    def _dot(self, a: Any, b: Any, out: np.ndarray | None = None) -> Any:
        """a [Rb*H, 32] @ b [Tc, 32].T as [Rb, H, Tc]. Every product and partial sum is an integer
        times a power of two, below 2^24 of it: exact in any order, so NumPy's float32 BLAS (into
        ``out`` when given) and a device's float64 matmul (clear of TF32) give the same values."""
        shape = (self.n_rows, self.H, b.shape[0])
        if self.numpy:
            return np.matmul(a, b.T, out=out).reshape(shape)
        return self.xp.reshape(ar.exact_matmul(a, b.T), shape)

    def _from_host(self, cells: np.ndarray, lo: int, hi: int, opts: Options, emu: Any, value: Any,
                   bound: Any) -> None:
        """The listed (local row, chunk token) cells as the host computes them: this group's rows
        and tokens on the host, scored chunk by chunk as a NumPy call would, put in place."""
        mirror, done = self._host_mirror(opts)
        for first in range(lo, hi, self.host_chunk):
            last = min(first + self.host_chunk, hi)
            if cells[:, first - lo:last - lo].any():
                mirror._chunk(first, last, done, opts)
        r, t = np.nonzero(cells)
        tok = t + lo + self.t0
        ri, ti = self.xp.asarray(r, device=self.dev), self.xp.asarray(t, device=self.dev)
        for mine, theirs in ((emu, done.emulated), (value, done.value), (bound, done.bound)):
            if mine is not None:
                mine[ri, ti] = self.xp.asarray(theirs[r, tok], device=self.dev)

    def _host_mirror(self, opts: Options) -> tuple[_Group, Result]:
        """This group as NumPy arrays on the host (built once), and the buffers it writes."""
        if self._mirror is None:
            n = self.n_rows
            plan = Plan(np.full(n, self.b), self.start_np, self.end_np)
            w_bits = X.to_numpy(self.w_bits).view(np.uint16)
            mirror = _Group(np.arange(n), self.b, X.to_numpy(self.q_packed), X.to_numpy(self.eq), w_bits,
                            self.ws, plan, self.D, opts)
            mirror.k_codes, mirror.ek = X.to_numpy(self.k_codes), X.to_numpy(self.ek)
            mirror.t0, mirror.t1 = self.t0, self.t1
            shape = (n, self.t1)
            done = Result(np.full(shape, -np.inf, np.float32) if opts.emulate else None,
                          np.full(shape, -np.inf) if opts.with_bound else None,
                          np.zeros(shape) if opts.with_bound else None, None)
            self._mirror = (mirror, done)
        return self._mirror

    # ---- emulated order -----------------------------------------------------------------

    def _qk32(self, ig: Any, scale: Any, opts: Options) -> Any:
        """The MFMA's float32 qk under the qk_accum model (SPEC section 7)."""
        xp = self.xp
        if opts.qk_accum == GROUPS:
            acc = xp.zeros(ig.shape[1:], dtype=xp.float32, device=self.dev)
            for g in range(self.G):
                acc += xp.astype(xp.astype(ig[g], xp.float64) * scale, xp.float32)
            return acc + 0.0
        acc = None
        for kt in range(self.k_tiles):
            dot = xp.astype(ig[STEP_GROUPS * kt], xp.float64)
            for g in range(STEP_GROUPS * kt + 1, STEP_GROUPS * (kt + 1)):
                dot += ig[g]
            dot *= scale
            acc = xp.astype(dot, xp.float32) if acc is None else add_round_f32(xp.astype(acc, xp.float64), dot)
        return acc + 0.0  # -0 -> +0, as the accumulator starts from +0

    def _emulate(self, qk32: Any, opts: Options) -> Any:
        xp = self.xp
        relu = xp.maximum(qk32, 0.0) + 0.0  # maximumf: NaN stays, -0 -> +0
        if opts.mode == "decode":
            return ar.head_sum(relu * self.w32[:, :, None], "aiter-fp4") * float(self.ws)
        parts = []
        for g in range(4):
            acc = xp.zeros((qk32.shape[0], qk32.shape[2]), dtype=xp.float32, device=self.dev)
            for m in range(self.H // MFMA_M):
                for e in range(4):
                    h = m * MFMA_M + 4 * g + e
                    acc = fma32(relu[:, h], self.wp[:, h, None], acc)
            parts.append(acc)
        return (parts[0] + parts[1]) + (parts[2] + parts[3])

    # ---- exact value and bound ----------------------------------------------------------

    def _value_and_bound(self, qp: Any, ig: Any, lk: Any, nk: Any, opts: Options) -> tuple[Any, Any]:
        xp = self.xp
        a = xp.maximum(qp, 0.0)  # q' is exact: its sign is the true sign of qk
        a_bits = (self.G * I_MAX).bit_length() + self.span_fast  # relu(q') <= G * 4608 * 2^span
        y = weighted_sum_f64(a, a_bits, self.mw, self.lq + self.fw)
        pk = pow2_f64(lk)[None, :]  # qk = q' * 2^(lq - 256) * 2^lk
        y *= pk * math.ldexp(1.0, -256)
        value = y * float(self.ws)
        # bound sums: sum_h x_h * 2^(lq_h - 256) * (|w_h|, 1), heads left to right in float64
        sq = pow2_f64(self.lq - 256)
        wabs = xp.astype(xp.abs(self.w32), xp.float64)
        R = ar.weighted_heads(sq * wabs, a) * pk
        rho = ar.weighted_heads(sq, a) * pk
        c, n_eta = ar.qk_coeffs(opts.bound_model, groups=self.G, k_tiles=self.k_tiles, head_dim=self.D)
        abs_sum = self._abs_sum(qp, ig, nk, opts)
        D = ar.weighted_heads(sq * wabs, abs_sum) * (c * pk)
        Delta = ar.weighted_heads(sq, abs_sum) * (c * pk)
        D = D + n_eta * ar.ETA * ar.sum_heads(wabs)[:, None]
        Delta = Delta + n_eta * ar.ETA * self.H
        bound = ar.decode_bound(R=R, D=D, rho=rho, Delta=Delta, value=value, ws=float(self.ws), heads=self.H, xp=xp)
        return value, bound

    def _abs_sum(self, qp: Any, ig: Any, nk: Any, opts: Options) -> Any:
        """The qk model's absolute sum on the q' scale (float64 [Rb, H, Tc]): sum_g |I'_g|
        (fp32-groups), |q'| or sum_kt |tile| (exact), sum_d |q'_d k'_d| (any-order)."""
        xp, model = self.xp, opts.bound_model
        if model == GROUPS:
            gabs = xp.astype(xp.abs(ig[0]), xp.float64)
            for g in range(1, self.G):
                gabs += xp.abs(ig[g])
            return gabs
        if model == KSTEPS:
            if self.k_tiles == 1:
                return xp.abs(qp)
            tabs = xp.zeros_like(qp)
            for kt in range(self.k_tiles):
                tabs += xp.abs(xp.sum(xp.astype(ig[STEP_GROUPS * kt:STEP_GROUPS * (kt + 1)], xp.float64), axis=0))
            return tabs
        dabs = xp.zeros_like(qp)
        nk_abs = xp.abs(nk)
        part = np.empty((qp.shape[0] * self.H, qp.shape[2]), dtype=np.float32) if self.numpy else None
        for g in range(self.G):
            dabs += self._dot(self.nq_abs[g], nk_abs[:, g, :], out=part)
        return dabs


# ---- helpers ------------------------------------------------------------------------------


def _offsets(e: Any, excluded: Any) -> tuple[Any, Any, Any]:
    """Per row of group exponents (last axis): (min, e - min clipped at 0, span), ignoring the
    excluded groups (zero-decoded or 0xFF bytes); all-excluded rows get min 127, span 0."""
    xp = X.namespace(e)
    big = 1 << 20
    lo = xp.min(xp.where(excluded, big, e), axis=-1)
    hi = xp.max(xp.where(excluded, -big, e), axis=-1)
    empty = lo == big
    lo = xp.where(empty, 127, lo)
    hi = xp.where(empty, 127, hi)
    off = xp.where(excluded, 0, e - lo[..., None])
    return lo, off, hi - lo


def _pow2_f32(k: Any) -> Any:
    """2^k as float32 for 0 <= k <= 127 (the callers clip k), from bits: the in-range case of
    ``xp.pow2_f32`` without its range check, for the per-chunk operand scales."""
    xp = X.namespace(k)
    return X.floats(xp.astype((k + 127) << 23, xp.int32))


@dataclass
class _Patch:
    r: np.ndarray
    t: np.ndarray
    qk32: np.ndarray  # float32 [n, H]
    value: np.ndarray  # float64 [n]
    bound: np.ndarray  # float64 [n]


def _slow_cells(grp: _Group, cells: np.ndarray, lo: int, ek: np.ndarray, opts: Options,
                exact: bool = False) -> _Patch:
    """Exact evaluation of the listed (local row, local token) cells, vectorised over cells and
    heads: any exponent span, 0xFF bytes (IEEE float64 with the decoded NaN / Inf scales) and
    non-finite weights. The head sums run in two-limb int64 integers where a bit bound allows
    (_head_sums), the value through one digit accumulator (arithmetic.dyadic_sum_f64); ``exact``
    takes the reference path instead: Python integers and fractions per cell-head, as before
    _head_sums existed. The same bits either way."""
    p = opts.profile
    H, G, D, k_tiles = grp.H, grp.G, grp.D, grp.k_tiles
    n = len(cells)
    r_idx, t_idx = cells[:, 0], cells[:, 1]
    dots = _cell_dots_exact if exact else _cell_dots
    I_raw, J = dots(grp, r_idx, lo + t_idx, opts.bound_model == ANY_ORDER)  # [n, H, G] exact integers
    qb = grp.eq[r_idx]  # [n, H, G]
    kb = np.broadcast_to(ek[t_idx][:, None, :], qb.shape)
    special = (qb == 0xFF) | (kb == 0xFF)
    zero = ((qb == 0) | (kb == 0)) if p.byte0 == "zero" else np.zeros(qb.shape, bool)
    I = np.where(zero | special, 0, I_raw)
    E = qb + kb - 256  # group g contributes I * 2^E
    big = np.int64(1 << 30)
    emin = np.where(I != 0, E, big).min(axis=2)
    emin = np.where(emin == big, 0, emin)  # [n, H]
    sh = np.where(I != 0, E - emin[..., None], 0)
    sums = (_head_sums_exact if exact else _head_sums)(I.reshape(n * H, G), sh.reshape(n * H, G), emin.ravel(),
                                                       k_tiles, opts.qk_accum == KSTEPS)
    pos = sums.pos.reshape(n, H)  # qk > 0
    # ---- emulated float32 qk
    if opts.qk_accum == GROUPS:
        acc = np.zeros((n, H), dtype=np.float32)
        for g in range(G):
            acc += (I[:, :, g] * pow2_f64(np.clip(E[:, :, g], -1022, 1023))).astype(np.float32)
    else:
        acc = sums.ksteps.reshape(n, H)
    qk32 = acc + np.float32(0.0)
    # ---- IEEE path for 0xFF bytes
    spec_h = special.any(axis=2)
    q64 = sums.q64.reshape(n, H)
    if spec_h.any():
        dq, dk = _decoded(qb, p), _decoded(kb, p)
        with np.errstate(all="ignore"):
            ieee = (I_raw * 0.25 * dq * dk).sum(axis=2)
        q64 = np.where(spec_h, ieee, q64)
        qk32 = np.where(spec_h, ieee.astype(np.float32), qk32)
    # ---- exact value
    mw, fw = grp.mw[r_idx], grp.fw[r_idx]  # [n, H]
    live = pos & (mw != 0)
    ws = float(grp.ws)
    if exact:
        num = sums.num.reshape(n, H)  # qk = num * 2^emin
        ex = emin + fw
        base = np.where(live, ex, big).min(axis=1)
        base = np.where(base == big, 0, base)
        ynum = np.where(live, (num * mw.astype(object)) << np.where(live, ex - base[:, None], 0).astype(object),
                        0).sum(axis=1)
        value = np.array([ws * _ratio_f64(int(a), int(e), correct=True) for a, e in zip(ynum, base)])
    else:  # the same sum term by term: I_g * mw at 2^(E_g + fw), |I_g * mw| <= 4608 * 255 < 2^21
        terms = np.where(live[..., None], I * mw[..., None], 0).reshape(n, H * G)
        value = ws * ar.dyadic_sum_f64(terms, (E + fw[..., None]).reshape(n, H * G))
    # ---- bound
    P2 = pow2_f64(np.clip(E, -1022, 1023))
    gabs = (np.abs(I) * P2).sum(axis=2)
    dabs = None if J is None else (np.where(zero | special, 0, J) * P2).sum(axis=2)  # any-order only
    tabs = None
    if k_tiles > 1:
        tabs = np.zeros((n, H))
        for kt in range(k_tiles):
            tabs += np.abs(sums.tiles[kt].reshape(n, H))
    delta = ar.qk_delta(opts.bound_model, qk_abs=np.abs(q64), group_abs=gabs, groups=G, tile_abs=tabs,
                        k_tiles=k_tiles, dim_abs=dabs, head_dim=D)
    r = np.where(pos, q64, 0.0)
    wabs = np.abs(grp.w32[r_idx]).astype(np.float64)
    with np.errstate(all="ignore"):
        bound = ar.decode_bound(R=ar.sum_heads(r * wabs), D=ar.sum_heads(delta * wabs), rho=ar.sum_heads(r),
                                Delta=ar.sum_heads(delta), value=value, ws=ws, heads=H)
    bad = spec_h.any(axis=1) | grp.w_bad[r_idx]
    if bad.any():  # IEEE float64 with the decoded values: NaN / Inf where the arithmetic gives them
        with np.errstate(all="ignore"):
            relu = np.where(np.isnan(q64), q64, np.maximum(q64, 0.0))
            naive = (relu * grp.w32[r_idx].astype(np.float64)).sum(axis=1) * ws
        value = np.where(bad, naive, value)
        bound = np.where(bad, np.inf, bound)
    return _Patch(r_idx, t_idx, qk32, value, bound)


def _cell_dots_exact(grp: _Group, r_idx: np.ndarray, tok: np.ndarray,
                     with_abs: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """I_g = sum_d nq k and, ``with_abs``, J_g = sum_d |nq k| of the (row, chunk token) cells,
    int64 [n, H, G], from int64 products per cell (the reference path)."""
    nq = grp.nq_int[r_idx].astype(np.int64)  # [n, H, D]
    nk = TWO_E2M1[grp.k_codes[tok]].astype(np.int64)  # [n, D]
    prod = (nq * nk[:, None, :]).reshape(len(r_idx), grp.H, grp.G, GROUP)
    return prod.sum(axis=3), (np.abs(prod).sum(axis=3) if with_abs else None)


def _cell_dots(grp: _Group, r_idx: np.ndarray, tok: np.ndarray,
               with_abs: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """_cell_dots_exact (J only ``with_abs``) from float32 matmuls over the cells' distinct rows
    and tokens: every product and partial sum is an integer below 2^24 (see _Group._dot), exact
    in any order. C-ordered int64 like the reference, so the float sums over groups that follow
    see the same layout."""
    rows, ri = np.unique(r_idx, return_inverse=True)
    toks, ti = np.unique(tok, return_inverse=True)
    H, G = grp.H, grp.G
    q = np.moveaxis(grp.nq_int[rows].reshape(rows.size, H, G, GROUP), 2, 0).reshape(G, rows.size * H, GROUP)
    k = TWO_E2M1[grp.k_codes[toks]].reshape(toks.size, G, GROUP)

    def per_cell(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.stack([np.matmul(a[g], b[:, g].T).reshape(rows.size, H, toks.size)[ri, :, ti] for g in range(G)],
                        axis=-1).astype(np.int64)

    return per_cell(q, k), (per_cell(np.abs(q), np.abs(k)) if with_abs else None)


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
        return f64_nearest(num, e)
    k = max(0, abs(num).bit_length() - 60)
    m = num >> k if num > 0 else -((-num) >> k)
    return math.ldexp(float(m), e + k)


def _ksteps_f32(group_terms: np.ndarray, emin: int, k_tiles: int) -> np.float32:
    """qk_accum 'fp32-ksteps': each 128-dim step (4 groups) exact, rounded once into the float32
    accumulator (the first step rounds alone). group_terms: Python ints on the 2^emin grid."""
    acc = None
    for kt in range(k_tiles):
        dot = int(sum(group_terms[STEP_GROUPS * kt:STEP_GROUPS * (kt + 1)]))
        if acc is None:
            acc = f32_nearest(dot, emin)
            continue
        if not math.isfinite(acc):  # an overflowed accumulator stays +-inf: inf + a finite step
            continue
        m, e = float_dyadic(float(acc))
        lo = min(e, emin)
        acc = f32_nearest((m << (e - lo)) + (dot << (emin - lo)), lo)
    return acc


@dataclass
class _HeadSums:
    """Per cell-head of _slow_cells, from its group integers (qk = sum_g (I_g << sh_g) * 2^emin)."""

    pos: np.ndarray  # bool [m]: num > 0, where num = sum_g I_g << sh_g
    q64: np.ndarray  # float64 [m]: _ratio_f64(num, emin)
    ksteps: np.ndarray | None  # float32 [m]: _ksteps_f32 (qk_accum fp32-ksteps only)
    tiles: np.ndarray | None  # float64 [k_tiles, m]: _ratio_f64 of each 128-dim step (k_tiles > 1 only)
    num: np.ndarray | None = None  # object [m]: num in Python integers (_head_sums_exact only)


def _head_sums_exact(I: np.ndarray, sh: np.ndarray, emin: np.ndarray, k_tiles: int, ksteps: bool) -> _HeadSums:
    """The head sums of I, sh [m, G], emin [m] in Python integers with scalar roundings: any span."""
    terms = I.astype(object) << sh.astype(object)  # exact Python integers
    num = terms.sum(axis=1)
    q64 = np.array([_ratio_f64(int(a), int(e)) for a, e in zip(num, emin)], dtype=np.float64)
    acc = np.array([_ksteps_f32(t, int(e), k_tiles) for t, e in zip(terms, emin)], dtype=np.float32) if ksteps else None
    tiles = None
    if k_tiles > 1:
        tiles = np.array([[_ratio_f64(int(a), int(e)) for a, e in
                           zip(terms[:, STEP_GROUPS * kt:STEP_GROUPS * (kt + 1)].sum(axis=1), emin)]
                          for kt in range(k_tiles)], dtype=np.float64).reshape(k_tiles, len(emin))
    return _HeadSums(np.array(num > 0, dtype=bool), q64, acc, tiles, num)


# Two-limb integers (hi, lo) = hi * 2^LIMB + lo with 0 <= lo < 2^LIMB and hi an int64: the head
# sums of _head_sums, exact in vectorised int64 arithmetic.
LIMB = 56  # low-limb bits: up to 2^7 low limbs add in int64 before their carry moves up
PAIR_BITS = 116  # _head_sums' values stay below 2^PAIR_BITS, their sums of two below 2^(PAIR_BITS + 1): |hi| < 2^61

Pair = tuple[np.ndarray, np.ndarray]


def _head_sums(I: np.ndarray, sh: np.ndarray, emin: np.ndarray, k_tiles: int, ksteps: bool) -> _HeadSums:
    """_head_sums_exact in two-limb integers, vectorised, for every cell-head whose sums fit; the
    others (decided from the bound alone) through _head_sums_exact. With span = max_g sh, every
    partial sum of the terms is below Sigma = G * I_MAX * 2^span < 2^(bits(G * I_MAX) + span),
    admitted up to 2^(PAIR_BITS - 1). A K-step accumulator gains at most u |x| + 2^-150 per
    rounding (u = 2^-24), and 2^-150 is at most 2^106 units of 2^emin (emin >= -256): it stays
    below 2^PAIR_BITS for the k_tiles of any real head_dim."""
    G = I.shape[1]
    wide = sh.max(axis=1, initial=0) + (G * I_MAX).bit_length() > PAIR_BITS - 1
    hi, lo = _pair(I, np.where(wide[:, None], 0, sh))  # wide heads: placeholders, replaced below
    steps = [_carried(hi[:, g:g + STEP_GROUPS].sum(axis=1), lo[:, g:g + STEP_GROUPS].sum(axis=1))  # lo < 2^58
             for g in range(0, G, STEP_GROUPS)]
    num = steps[0]
    for step in steps[1:]:
        num = _carried(num[0] + step[0], num[1] + step[1])
    res = _HeadSums((num[0] > 0) | ((num[0] == 0) & (num[1] > 0)), _trunc60_f64(num, emin),
                    _ksteps_pairs(steps, emin) if ksteps else None,
                    np.stack([_trunc60_f64(step, emin) for step in steps]) if k_tiles > 1 else None)
    if wide.any():
        w = np.flatnonzero(wide)
        ex = _head_sums_exact(I[w], sh[w], emin[w], k_tiles, ksteps)
        res.pos[w], res.q64[w] = ex.pos, ex.q64
        if ksteps:
            res.ksteps[w] = ex.ksteps
        if k_tiles > 1:
            res.tiles[:, w] = ex.tiles
    return res


def _pair(m: np.ndarray, s: np.ndarray) -> Pair:
    """m * 2^s for int64 |m| < 2^24, s >= 0, the result below 2^(LIMB + 62): hi = floor(v / 2^LIMB)
    (an arithmetic shift floors), lo = v mod 2^LIMB, the low bits of a uint64 shift (which wraps
    modulo 2^64, a multiple of 2^LIMB; a shift by LIMB or more leaves none)."""
    hi = np.where(s < LIMB, m >> np.maximum(LIMB - s, 0), m * (1 << np.maximum(s - LIMB, 0)))
    lo = (m.astype(np.uint64) << np.minimum(s, 63).astype(np.uint64)) & np.uint64((1 << LIMB) - 1)
    return hi, lo.astype(np.int64)


def _carried(hi: np.ndarray, lo: np.ndarray) -> Pair:
    """(hi, lo) with 0 <= lo < 2^63 brought back to lo < 2^LIMB."""
    return hi + (lo >> LIMB), lo & ((1 << LIMB) - 1)


def _bit_length(x: np.ndarray) -> np.ndarray:
    """int.bit_length of int64 x >= 0: float64(x) rounds up at most to the next power of two, so
    its frexp exponent is the bit length or one more, told apart by one shift."""
    e = np.frexp(x.astype(np.float64))[1].astype(np.int64)
    return e - ((x > 0) & ((x >> np.maximum(e - 1, 0)) == 0))


def _top_bits(p: Pair, keep: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(v < 0, q, k, r != 0) where |v| = q * 2^k + r, 0 <= r < 2^k, k = max(0, bit_length(|v|) - keep),
    for keep <= 62 and |hi| < 2^62 (so k - LIMB <= 62)."""
    hi, lo = p
    neg = hi < 0
    borrow = neg & (lo > 0)  # -v = (-hi - 1) * 2^LIMB + (2^LIMB - lo)
    mh = np.where(neg, -hi - borrow, hi)
    ml = np.where(borrow, (1 << LIMB) - lo, lo)
    k = np.maximum(np.where(mh > 0, _bit_length(mh) + LIMB, _bit_length(ml)) - keep, 0)
    low = k < LIMB
    kl, kh = np.where(low, k, 0), np.where(low, 0, k - LIMB)
    # k < LIMB: the quotient joins mh's bits above ml's, bits(q) <= keep; else only mh's bits remain
    q = np.where(low, (mh << np.where(low, LIMB - k, 0)) | (ml >> kl), mh >> kh)
    rest = np.where(low, ml & ((1 << kl) - 1), (mh & ((1 << kh) - 1)) | ml)
    return neg, q, k, rest != 0


def _trunc60_f64(p: Pair, e: np.ndarray) -> np.ndarray:
    """_ratio_f64(v, e) (not ``correct``): |v| truncated to 60 bits, then one int64 -> float64
    conversion, nearest-even like Python's float(int); the scaling by 2^(e + k) is exact, since
    e >= -256 and |v| < 2^PAIR_BITS keep the result a normal float64."""
    neg, q, k, _ = _top_bits(p, 60)
    f = q.astype(np.float64)
    return np.where(neg, -f, f) * pow2_f64(e + k)


def _f32_of(p: Pair, e: np.ndarray) -> np.ndarray:
    """f32_nearest(v, e). Up to 53 bits |v| converts to float64 exactly; a longer one is rounded
    to odd at 53 bits (truncated, the last bit set if any dropped bit was): float32 keeps at most
    24 bits, so its rounding grid and half-way points lie on multiples of 2^(k + 2) or coarser,
    and the odd last bit falls on the same side of each as the dropped bits. Scaling by 2^(e + k)
    is exact (a normal float64); the float64 -> float32 cast is the one rounding, nearest-even,
    to subnormals and to inf alike."""
    neg, q, k, sticky = _top_bits(p, 53)
    f = (q | sticky).astype(np.float64) * pow2_f64(e + k)
    with np.errstate(over="ignore"):
        return np.where(neg, -f, f).astype(np.float32)


def _ksteps_pairs(steps: list[Pair], emin: np.ndarray) -> np.ndarray:
    """_ksteps_f32 for two-limb step sums on the 2^emin grid (bounded as in _head_sums). Every
    finite accumulator is a multiple of 2^emin (its inputs are, and a rounding keeps a coarser
    grid), so acc / 2^emin is an exact integer and acc + step an exact sum, rounded once; an
    overflowed accumulator stays +-inf (inf + a finite step), as in _ksteps_f32."""
    acc = _f32_of(steps[0], emin)
    for step in steps[1:]:
        m, e, _ = f32_parts(acc)
        d = np.where(m == 0, 0, e - emin)
        hi, lo = _pair(m >> np.clip(-d, 0, 63), np.maximum(d, 0))  # d < 0: the shift drops zeros only
        acc = np.where(np.isfinite(acc), _f32_of(_carried(hi + step[0], lo + step[1]), emin), acc)
    return acc
