"""vLLM PR #42908's ROCm Triton scorers (``rocm_fp8_fp4_paged_mqa_logits.py``): FP4 paged MQA
logits, ragged (prefill) FP4 MQA logits, FP8 paged logits (the top-k of the first is judged by mxgate.conformance.judge).

FP4 (paged and ragged): Q is packed E2M1 [rows, H, 64] with four e8m0 bytes per (row, head)
(the kernels take them as one int32), K packed E2M1 with four e8m0 bytes per token
(paged: the ``vllm-fp4-indexer-k`` layout; ragged: dense [N, 64] + [N, 4]); weights float32
[rows, H]; no weight scale. For row r and token t in its window:

    qk_h = sum_d dequant(q)[h, d] * dequant(k)[t, d]       (tl.dot_scaled, or decode + tl.dot)
    out  = sum_h relu(qk_h) * w_h                           (tl.sum over heads)

Windows: paged row r = b*next_n + n scores t < limit, limit = ctx[b] - (next_n - 1 - n) for a
1-D ``context_lens`` or ctx[b, n] for a 2-D one, then min(limit, max_context_len); token t is at
block ``block_tables[b, t // block_size]``, position t % block_size. Ragged row i scores
[max(ks_i, 0), min(ke_i, N)). Cells outside the window are -inf when ``clean_logits`` and
left as torch.empty gives them otherwise (not judged).

Value X = sum_h relu(qk_h) w_h with each qk_h exact (dyadic) and the head sum in exact
integers, rounded once to float64 (|value - X| <= 2^-53 |X|). Bound: ``arithmetic.decode_bound``
with ws = 1 (products or fmas, any head order), the qk model ``bound_model`` (default
"any-order": the 128 exact products summed in any float32 order, as a bf16-upcast MMA, an
ieee tl.dot or a NumPy matmul may), its head sums taken left to right in float64
(``arithmetic.sum_heads``: the same bytes on any machine and in mxgate.twin). The emulated
order (the bit-exact target) is: qk rounded once to float32, relu, p = fl(relu * w), heads
summed in ``head_order`` (default "sequential").
The kernels' own order is not claimed; a backend that differs from it but stays inside the
bound is "acceptable".

e8m0 byte 0 decodes per the profile (2^-127, or 0 under byte0 "zero"). Byte 255 (in a group
of q or of k) makes the head's qk non-finite, and the kernels' relu is ``tl.maximum(scores,
0.0)``, whose default ``propagate_nan=NONE`` lowers to ``maxnumf`` (the interpreter:
``np.fmax``): a NaN score becomes +0.0, as -Inf does, and +Inf stays. How the byte decodes
depends on the path: ``tl.dot_scaled`` (the paged kernel; the ragged one when heads % 32 == 0)
reads it as NaN, so the head adds relu(NaN) * w_h = 0 * w_h; the ragged kernel's software
decode (heads % 32 != 0, ``Options.software_decode``) computes exp2(255 - 127) = +Inf, so in a
group holding it each product is NaN where a code is +-0 and +-Inf elsewhere, and the head's qk
is NaN (a NaN product, or Infs of both signs: relu 0) or +-Inf (relu +Inf or 0). A cell with a
+Inf head is non-finite: its value is the IEEE float64 evaluation of sum_h relu(qk_h) w_h (no
finite bound); a head whose finite products alone exceed FLT_MAX beside an Inf one is outside
what is claimed.
Cells whose exponent span is too wide for the float64 fast path are computed with Python
integers (``exact_cells``). The argument checks (``check_fp4_paged``, ``check_fp4_ragged``,
``check_fp8_paged``) read only shapes and dtypes of the large arrays.

One code for NumPy arrays and tensors (``mxgate.oracle.xp``): the results lie on the inputs'
device. What only the host computes is computed there, by the same functions on NumPy arrays,
and moved back: the exact cells (Python integers) and the NaN cells of the emulated order and
of rows with a non-finite weight (x86 NumPy's NaN payload depends on the array's shape, a vector
loop body or its scalar tail, so whole chunks of the NumPy run's shape are recomputed).

FP8 paged: the layout is ``aiter-fp8-kv`` ([num_blocks, block_size, D+4]: D fp8 codes a token,
then one float32 scale a token); out = sum_h relu(fl(qk_h) * ks_t) * w_h, as
``aiter_fp8.pa_mqa_logits_fp8_scored`` models it, with vLLM's windows (2-D context_lens,
max_context_len clamp) mapped onto one query row per pseudo-batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from mxgate.oracle import profiles as _profiles
from mxgate.oracle.formats import e2m1
from mxgate.oracle.geometry import GROUP, HEAD_DIM, ROW_GROUPS
from mxgate.oracle import layouts as _layouts
from mxgate.oracle.scorers import arithmetic as ar
from mxgate.oracle.scorers import common as v
from mxgate.oracle.scorers.aiter_fp8 import pa_mqa_logits_fp8_scored
from mxgate.oracle.scorers.arithmetic import (HEAD_ORDERS, dyadic_total, f32_nearest, f32_parts, f64_nearest, head_sum,
                                              pow2_f64, weighted_sum_f64)
from mxgate.oracle.scorers.common import ANY_ORDER, GROUPS, KSTEPS, QK_MODELS, TWO_E2M1, ScoredLogits
from mxgate.oracle.xp import device, ieee_quiet, is_numpy, namespace, table_on, take, to_numpy

SPAN_FAST = 24  # q' = sum_g I_g 2^(aq + ak) < 4 * 4608 * 2^24 < 2^39: exact in float64
A_BITS = 39
CELLS_PER_CHUNK = 1 << 18  # (row, head, token) cells per chunk
# another namespace's pass holds whole chunks, up to this many cells: each [G, R, H, Tc] float64
# temporary is 128 MB, and a GPU would spend thousands of small passes on a production call
DEVICE_CELLS = 1 << 22
LAYOUT = _layouts.get("vllm-fp4-indexer-k")


# ---- FP4 paged -------------------------------------------------------------------------------


def fp4_paged_logits_scored(q_fp4: np.ndarray, q_e8m0: np.ndarray, kv_cache: np.ndarray, weights: np.ndarray,
                           context_lens: np.ndarray, block_tables: np.ndarray, max_context_len: int, *,
                           block_size: int = 64, head_order: str = "sequential", bound_model: str = ANY_ORDER,
                           emulate: bool = True, profile: str | _profiles.Profile = "gfx950") -> ScoredLogits:
    """``rocm_fp8_fp4_paged_mqa_logits`` with FP4 Q: value, bound, emulated order.

    q_fp4 uint8 [B, next_n, H, 64]; q_e8m0 uint8 [B, next_n, H, 4]; kv_cache uint8
    [num_blocks, page_bytes] (vllm-fp4-indexer-k with this block_size); weights float32
    [B*next_n, H]; context_lens int [B] or [B, next_n]; block_tables int [B, max_blocks].
    -> ScoredLogits of shape [B*next_n, max_context_len].
    """
    call = check_fp4_paged(q_fp4, q_e8m0, kv_cache, weights, context_lens, block_tables, max_context_len,
                           block_size)
    xp, dev = namespace(q_fp4, q_e8m0, kv_cache, weights), device(q_fp4)
    q, qe = _fp4_q4(q_fp4, q_e8m0, call.rows)
    bs, end, bt, batch = call.block_size, call.end, call.block_tables, call.batch
    res = _Result.empty(call.rows, call.width, emulate, xp, dev)
    for b in range(call.batch_size):
        r = np.flatnonzero((batch == b) & (end > 0))
        if r.size == 0:
            continue
        T = int(end[r].max())
        t = np.arange(T)
        slots = bt[b, t // bs].astype(np.int64) * bs + t % bs
        packed, ke = LAYOUT.gather(kv_cache, slots=xp.asarray(slots, device=dev), block_size=bs)
        sel = xp.asarray(r, device=dev)
        _score_rows(q[sel], qe[sel], weights[sel], e2m1.unpack_nibbles(packed), ke, np.zeros(r.size, np.int64),
                    end[r], r, res, Options(head_order, bound_model, emulate, _profiles.get(profile)))
    return res.scored(bound_model)


@dataclass(frozen=True)
class PagedCall:
    """A checked paged call: its geometry and the windows (``check_fp4_paged``, ``check_fp8_paged``)."""

    rows: int  # B * next_n
    batch_size: int
    next_n: int
    heads: int
    width: int  # max_context_len
    end: np.ndarray  # int64 [rows]: row r scores tokens [0, end[r])
    block_tables: np.ndarray  # int64 [B, max_blocks]
    batch: np.ndarray  # int64 [rows]: the batch of each row
    block_size: int = 0  # FP4 only
    num_blocks: int = 0  # FP4 only
    head_dim: int = HEAD_DIM


def check_fp4_paged(q_fp4: object, q_e8m0: object, kv_cache: object, weights: object, context_lens: object,
                    block_tables: object, max_context_len: object, block_size: object) -> PagedCall:
    """Every argument check of ``fp4_paged_logits_scored``, in its order and with its messages.
    Only dtypes and shapes of q_fp4, q_e8m0, kv_cache and weights are read; the values of
    context_lens and block_tables are checked (on the host). Tensors: all on one device."""
    v.one_device(dict(q_fp4=q_fp4, q_e8m0=q_e8m0, kv_cache=kv_cache, weights=weights), "q_fp4",
                 dict(context_lens=context_lens, block_tables=block_tables))
    rows, H = _check_fp4_q4(q_fp4, q_e8m0)
    B, nn = q_fp4.shape[0], q_fp4.shape[1]  # type: ignore[attr-defined]
    _weights(weights, rows, H)
    width = v.positive_int(max_context_len, "max_context_len", minimum=0)
    buf = v.uint8(kv_cache, "kv_cache")
    if buf.ndim != 2:
        raise ValueError(f"kv_cache must have shape [num_blocks, page_bytes] (vllm-fp4-indexer-k), got {tuple(buf.shape)}")
    bs = v.positive_int(block_size, "block_size")
    dims = LAYOUT.dims(num_blocks=buf.shape[0], block_size=bs, page_bytes=buf.shape[1])
    num_blocks = dims["num_blocks"]
    end = to_numpy(paged_limits(context_lens, B, nn, width))
    bt = v.integers(block_tables, "block_tables", 2)
    if bt.shape[0] != B:
        raise ValueError(f"block_tables must have {B} rows (one per batch), got {bt.shape[0]}")
    batch = np.repeat(np.arange(B), nn)
    _check_blocks(bt, batch, end, bs, num_blocks)
    return PagedCall(rows, B, nn, H, width, end, bt, batch, bs, num_blocks)


def fp4_paged_logits(*args: object, **kwargs: object) -> np.ndarray:
    """The emulated order of ``fp4_paged_logits_scored`` (same arguments), float32, -inf
    outside the windows."""
    return fp4_paged_logits_scored(*args, **kwargs).emulated  # type: ignore[arg-type]


def paged_limits(context_lens: object, batch: int, next_n: int, max_context_len: int) -> np.ndarray:
    """Window end of every paged row [B*next_n] (the kernels' valid_limit clipped to
    [0, max_context_len]); a tensor's come back on its device."""
    ctx = context_lens if v.is_tensor(context_lens) else np.asarray(context_lens)
    if ctx.ndim == 1:
        c = v.integers(ctx, "context_lens", 1)
        if c.shape[0] != batch:
            raise ValueError(f"context_lens must have shape ({batch},) or ({batch}, {next_n}), got {c.shape}")
        n = np.tile(np.arange(next_n), batch)
        limit = c[np.repeat(np.arange(batch), next_n)] - (next_n - 1 - n)
    else:
        c = v.integers(ctx, "context_lens", 2)
        if c.shape != (batch, next_n):
            raise ValueError(f"context_lens must have shape ({batch},) or ({batch}, {next_n}), got {c.shape}")
        limit = c.reshape(-1)
    end = np.clip(limit.astype(np.int64), 0, max_context_len)
    return namespace(ctx).asarray(end, device=device(ctx)) if v.is_tensor(ctx) else end


def _check_blocks(bt: np.ndarray, batch: np.ndarray, end: np.ndarray, bs: int, num_blocks: int) -> None:
    need = -(-end // bs)
    if need.size and need.max() > bt.shape[1]:
        raise ValueError(f"block_tables has {bt.shape[1]} columns but a row needs {int(need.max())} blocks of {bs}")
    for b in np.unique(batch):
        k = int(need[batch == b].max()) if need.size else 0
        used = bt[b, :k]
        bad = (used < 0) | (used >= num_blocks)
        if bad.any():
            j = int(np.argmax(bad))
            raise ValueError(f"block_tables[{b}, {j}] = {int(used[j])} is not a block index in [0, {num_blocks})")


# ---- FP4 ragged ------------------------------------------------------------------------------


def fp4_ragged_logits_scored(q_fp4: np.ndarray, q_e8m0: np.ndarray, k_fp4: np.ndarray, k_e8m0: np.ndarray,
                            weights: np.ndarray, cu_seqlen_ks: np.ndarray, cu_seqlen_ke: np.ndarray, *,
                            head_order: str = "sequential", bound_model: str = ANY_ORDER, emulate: bool = True,
                            profile: str | _profiles.Profile = "gfx950") -> ScoredLogits:
    """``rocm_fp4_mqa_logits``: q_fp4 uint8 [S, H, 64], q_e8m0 [S, H, 4], k_fp4 uint8 [N, 64],
    k_e8m0 [N, 4], weights float32 [S, H], cu_seqlen_ks / _ke int [S]. -> ScoredLogits [S, N]."""
    call = check_fp4_ragged(q_fp4, q_e8m0, k_fp4, k_e8m0, weights, cu_seqlen_ks, cu_seqlen_ke)
    xp, dev = namespace(q_fp4, q_e8m0, k_fp4, k_e8m0, weights), device(q_fp4)
    res = _Result.empty(call.rows, call.tokens, emulate, xp, dev)
    live = call.live
    if live.size:
        sel = xp.asarray(live, device=dev)
        _score_rows(e2m1.unpack_nibbles(q_fp4[sel]), q_e8m0[sel], weights[sel], e2m1.unpack_nibbles(k_fp4), k_e8m0,
                    call.start[live], call.end[live], live, res,
                    Options(head_order, bound_model, emulate, _profiles.get(profile),
                            software_decode=call.heads % 32 != 0))
    return res.scored(bound_model)


@dataclass(frozen=True)
class RaggedCall:
    """A checked ragged call (``check_fp4_ragged``): row i scores tokens [start[i], end[i])."""

    rows: int  # S
    heads: int
    tokens: int  # N
    start: np.ndarray  # int64 [S]
    end: np.ndarray  # int64 [S], >= start
    live: np.ndarray  # the rows whose window is not empty


def check_fp4_ragged(q_fp4: object, q_e8m0: object, k_fp4: object, k_e8m0: object, weights: object,
                     cu_seqlen_ks: object, cu_seqlen_ke: object) -> RaggedCall:
    """Every argument check of ``fp4_ragged_logits_scored``, in its order and with its messages
    (dtypes and shapes of the tensors; the values of cu_seqlen_ks and cu_seqlen_ke)."""
    v.one_device(dict(q_fp4=q_fp4, q_e8m0=q_e8m0, k_fp4=k_fp4, k_e8m0=k_e8m0, weights=weights), "q_fp4",
                 dict(cu_seqlen_ks=cu_seqlen_ks, cu_seqlen_ke=cu_seqlen_ke))
    q = v.uint8(q_fp4, "q_fp4")
    qe = v.uint8(q_e8m0, "q_e8m0")
    if q.ndim != 3 or q.shape[2] != HEAD_DIM // 2 or qe.shape != q.shape[:2] + (ROW_GROUPS,):
        raise ValueError(f"q_fp4 must be [S, H, 64] and q_e8m0 [S, H, 4], got {tuple(q.shape)} and {tuple(qe.shape)}")
    S, H = q.shape[:2]
    k = v.uint8(k_fp4, "k_fp4")
    ke = v.uint8(k_e8m0, "k_e8m0")
    if k.ndim != 2 or k.shape[1] != HEAD_DIM // 2 or ke.shape != (k.shape[0], ROW_GROUPS):
        raise ValueError(f"k_fp4 must be [N, 64] and k_e8m0 [N, 4], got {tuple(k.shape)} and {tuple(ke.shape)}")
    N = k.shape[0]
    _weights(weights, S, H)
    ks = v.integers(cu_seqlen_ks, "cu_seqlen_ks", 1)
    kend = v.integers(cu_seqlen_ke, "cu_seqlen_ke", 1)
    if ks.shape != (S,) or kend.shape != (S,):
        raise ValueError(f"cu_seqlen_ks and cu_seqlen_ke must have shape ({S},), got {ks.shape} and {kend.shape}")
    start = np.clip(ks.astype(np.int64), 0, N)
    end = np.clip(kend.astype(np.int64), 0, N)
    end = np.maximum(end, start)
    return RaggedCall(S, H, N, start, end, np.flatnonzero(end > start))


def fp4_ragged_logits(*args: object, **kwargs: object) -> np.ndarray:
    """The emulated order of ``fp4_ragged_logits_scored`` (same arguments)."""
    return fp4_ragged_logits_scored(*args, **kwargs).emulated  # type: ignore[arg-type]


# ---- FP8 paged -------------------------------------------------------------------------------


def fp8_paged_logits_scored(q_fp8: np.ndarray, kv_cache: np.ndarray, weights: np.ndarray, context_lens: np.ndarray,
                           block_tables: np.ndarray, max_context_len: int, *, variant: str = "fn",
                           head_order: str = "sequential", bound_model: str = ANY_ORDER,
                           emulate: bool = True) -> ScoredLogits:
    """``rocm_fp8_fp4_paged_mqa_logits`` with FP8 Q: q_fp8 uint8 e4m3 codes [B, next_n, H, D],
    kv_cache uint8 [num_blocks, block_size, D+4] or [..., 1, D+4] (aiter-fp8-kv), weights
    float32 [B*next_n, H] (the Q scale folded in), context_lens [B] or [B, next_n],
    block_tables [B, max_blocks]; variant "fn" or "fnuz" decodes both Q and K."""
    v.one_device(dict(q_fp8=q_fp8), "q_fp8", dict(kv_cache=kv_cache, weights=weights, context_lens=context_lens,
                                              block_tables=block_tables))
    call = check_fp8_paged(q_fp8, context_lens, block_tables, max_context_len)
    xp, dev = namespace(q_fp8), device(q_fp8)
    if call.width == 0:
        return _empty(call.rows, xp, dev)
    rows, H, D = call.rows, call.heads, call.head_dim
    return pa_mqa_logits_fp8_scored(xp.reshape(q_fp8, (rows, 1, H, D)), kv_cache, weights,
                                   xp.asarray(call.end.astype(np.int32), device=dev),
                                   xp.asarray(call.block_tables[call.batch], device=dev), call.width, variant=variant,
                                   head_order=head_order, bound_model=bound_model, emulate=emulate)


def check_fp8_paged(q_fp8: object, context_lens: object, block_tables: object, max_context_len: object) -> PagedCall:
    """The checks ``fp8_paged_logits_scored`` makes before it hands the call, one pseudo-batch
    of next_n = 1 per row, to ``aiter_fp8.pa_mqa_logits_fp8_scored`` (which checks the rest)."""
    q = v.uint8(q_fp8, "q_fp8")
    if q.ndim != 4:
        raise ValueError(f"q_fp8 must have shape [B, next_n, H, D], got {tuple(q.shape)}")
    B, nn, H, D = q.shape
    width = v.positive_int(max_context_len, "max_context_len", minimum=0)
    end = to_numpy(paged_limits(context_lens, B, nn, width))
    bt = v.integers(block_tables, "block_tables", 2)
    if bt.shape[0] != B:
        raise ValueError(f"block_tables must have {B} rows (one per batch), got {bt.shape[0]}")
    return PagedCall(B * nn, B, nn, H, width, end, bt, np.repeat(np.arange(B), nn), head_dim=D)


def _empty(rows: int, xp: Any, dev: Any) -> ScoredLogits:
    return ScoredLogits(xp.zeros((rows, 0), dtype=xp.float64, device=dev), xp.zeros((rows, 0), dtype=xp.float64, device=dev),
                        xp.zeros((rows, 0), dtype=xp.bool, device=dev), xp.zeros((rows, 0), dtype=xp.float32, device=dev))


# ---- the engine ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    """The engine's options, checked when a call first scores a row."""

    head_order: str
    bound_model: str
    emulate: bool
    profile: _profiles.Profile
    software_decode: bool = False  # byte 255 -> +Inf (the ragged kernel without tl.dot_scaled), else NaN

    def __post_init__(self) -> None:
        v.choice(self.head_order, "head_order", HEAD_ORDERS)
        v.choice(self.bound_model, "bound_model", QK_MODELS)


@dataclass
class _Result:
    value: Any
    bound: Any
    window: Any
    emulated: Any | None

    @classmethod
    def empty(cls, rows: int, width: int, emulate: bool, xp: Any, dev: Any) -> "_Result":
        shape = (rows, width)
        return cls(xp.full(shape, -np.inf, dtype=xp.float64, device=dev), xp.zeros(shape, dtype=xp.float64, device=dev),
                   xp.zeros(shape, dtype=xp.bool, device=dev),
                   xp.full(shape, -np.inf, dtype=xp.float32, device=dev) if emulate else None)

    def scored(self, bound_model: str) -> ScoredLogits:
        return ScoredLogits(self.value, self.bound, self.window, self.emulated, KSTEPS, bound_model)


def _check_fp4_q4(q_fp4: object, q_e8m0: object) -> tuple[int, int]:
    q = v.uint8(q_fp4, "q_fp4")
    qe = v.uint8(q_e8m0, "q_e8m0")
    if q.ndim != 4 or q.shape[3] != HEAD_DIM // 2:
        raise ValueError(f"q_fp4 must have shape [B, next_n, H, 64], got {tuple(q.shape)}")
    if tuple(qe.shape) != tuple(q.shape[:3]) + (ROW_GROUPS,):
        raise ValueError(f"q_e8m0 must have shape {tuple(q.shape[:3]) + (ROW_GROUPS,)}, got {tuple(qe.shape)}")
    return q.shape[0] * q.shape[1], q.shape[2]


def _fp4_q4(q: Any, qe: Any, rows: int) -> tuple[Any, Any]:
    """Checked Q -> (codes [rows, H, 128], e8m0 [rows, H, 4])."""
    xp = namespace(q, qe)
    return (e2m1.unpack_nibbles(xp.reshape(q, (rows, q.shape[2], HEAD_DIM // 2))),
            xp.reshape(qe, (rows, q.shape[2], ROW_GROUPS)))


def _weights(weights: object, rows: int, heads: int) -> np.ndarray:
    w = v.float32(weights, "weights")
    if tuple(w.shape) != (rows, heads):
        raise ValueError(f"weights must have shape ({rows}, {heads}) float32, got {tuple(w.shape)}")
    return w


def _decoded_exponents(e: Any, p: _profiles.Profile) -> tuple[Any, Any, Any]:
    """e8m0 bytes -> (exponent e - 127 as int64, zero mask (byte 0 read as 0.0), NaN mask)."""
    xp = namespace(e)
    e = xp.astype(e, xp.int64)
    zero = (e == 0) if p.byte0 == "zero" else xp.zeros(e.shape, dtype=xp.bool, device=device(e))
    return e - 127, zero, e == 0xFF


def _score_rows(qc: Any, qe: Any, w: Any, kc: Any, ke: Any, start: np.ndarray, end: np.ndarray,
                out_rows: np.ndarray, res: _Result, opts: Options) -> None:
    """Rows (codes [R, H, 128], e8m0 [R, H, 4], weights [R, H]) against tokens 0..T-1 (codes
    [T, 128], e8m0 [T, 4]); row i's window [start_i, end_i) goes to output row out_rows[i].
    start / end / out_rows are host arrays (the token loop runs there)."""
    xp, dev = namespace(qc, qe, w, kc, ke), device(qc)
    R, H, _ = qc.shape
    T0, T1 = int(start.min()), int(end.max())
    piece = max(16, CELLS_PER_CHUNK // max(1, R * H))  # NumPy's chunk; another namespace's pass holds several
    chunk = piece if is_numpy(xp) else piece * max(1, DEVICE_CELLS // max(1, R * H) // piece)
    two = table_on(TWO_E2M1, qc)
    q_exp, q_zero, q_nan = _decoded_exponents(qe, opts.profile)
    k_exp_all, k_zero_all, k_nan_all = _decoded_exponents(ke, opts.profile)
    nq = xp.reshape(take(two, qc), (R, H, ROW_GROUPS, GROUP))
    nq = xp.where(q_zero[..., None], 0.0, nq)
    # per (row, head): smallest live group exponent and the offsets from it
    big = 1 << 20
    lq = xp.min(xp.where(q_zero | q_nan, big, q_exp), axis=2)
    lq = xp.where(lq == big, -127, lq)
    aq = xp.where(q_zero | q_nan, 0, q_exp - lq[..., None])
    mw, fw, wfin = f32_parts(w)
    start_d, end_d, out_d = (xp.asarray(a, device=dev) for a in (start, end, out_rows))
    for lo in range(T0, T1, chunk):
        hi = min(lo + chunk, T1)
        if not (np.maximum(start, lo) < np.minimum(end, hi)).any():  # no window cell in [lo, hi)
            continue
        tok = xp.arange(lo, hi, device=dev)
        inwin = (tok[None, :] >= start_d[:, None]) & (tok[None, :] < end_d[:, None])  # [R, Tc]
        k_exp, k_zero, k_nan = k_exp_all[lo:hi], k_zero_all[lo:hi], k_nan_all[lo:hi]
        nk = xp.reshape(take(two, kc[lo:hi]), (hi - lo, ROW_GROUPS, GROUP))
        nk = xp.where(k_zero[..., None], 0.0, nk)
        lk = xp.min(xp.where(k_zero | k_nan, big, k_exp), axis=1)
        lk = xp.where(lk == big, -127, lk)
        ak = xp.where(k_zero | k_nan, 0, k_exp - lk[:, None])
        value, bound, emu = _chunk(nq, q_exp, aq, lq, q_nan, nk, k_exp, ak, lk, k_nan, w, mw, fw, wfin, inwin,
                                   piece, opts)
        ir, it = xp.nonzero(inwin)
        orow, col = out_d[ir], tok[it]
        res.window[orow, col] = True
        res.value[orow, col] = value[ir, it]
        res.bound[orow, col] = bound[ir, it]
        if emu is not None and res.emulated is not None:
            res.emulated[orow, col] = emu[ir, it]


def _chunk(nq: Any, q_exp: Any, aq: Any, lq: Any, q_nan: Any, nk: Any, k_exp: Any, ak: Any, lk: Any, k_nan: Any,
           w: Any, mw: Any, fw: Any, wfin: Any, inwin: Any, piece: int, opts: Options) -> tuple[Any, Any, Any]:
    """One pass of tokens -> (value, bound, emulated or None) [R, Tc]; the pass is made of
    NumPy's chunks of ``piece`` tokens (the host's NaN cells are recomputed chunk by chunk)."""
    xp, dev = namespace(nq, nk, w), device(nq)
    R, H = nq.shape[:2]
    Tc = nk.shape[0]
    # integer group dots I_g [G, R, H, Tc] and their absolute versions (integers below 2^13:
    # exact in any order)
    I = xp.stack([xp.reshape(ar.exact_matmul(xp.reshape(nq[:, :, g], (R * H, GROUP)), nk[:, g].T), (R, H, Tc))
                  for g in range(ROW_GROUPS)])
    J = xp.stack([xp.reshape(ar.exact_matmul(xp.reshape(xp.abs(nq[:, :, g]), (R * H, GROUP)), xp.abs(nk[:, g]).T),
                             (R, H, Tc)) for g in range(ROW_GROUPS)])
    span = xp.max(aq, axis=2)[:, :, None] + xp.max(ak, axis=1)[None, None, :]  # [R, H, Tc]
    # a head with a 0xFF byte: relu drops its NaN or -Inf (qk 0 below), keeps +Inf (plus_inf)
    special = xp.any(q_nan, axis=2)[:, :, None] | xp.any(k_nan, axis=1)[None, None, :]
    plus_inf = _plus_inf_heads(nq, q_nan, nk, k_nan, special) if opts.software_decode else None
    I = xp.where(special[None], 0.0, I)
    J = xp.where(special[None], 0.0, J)
    fast = span <= SPAN_FAST
    qp = xp.zeros((R, H, Tc), dtype=xp.float64, device=dev)  # q' = qk * 2^-(lq + lk - 2), an exact integer on fast cells
    for g in range(ROW_GROUPS):
        qp += I[g] * pow2_f64(xp.clip(aq[:, :, g, None] + ak[None, None, :, g], max=SPAN_FAST))
    unit = pow2_f64(lq - 2)[:, :, None] * pow2_f64(lk)[None, None, :]  # qk = q' * unit, exactly
    qk = xp.where(fast, qp * unit, np.nan)
    # |qk| parts for the bound, in float64 with every group's own power of two (any span)
    expo = q_exp[:, :, :, None] + k_exp.T[None, None, :, :] - 2  # [R, H, G, Tc]
    dabs = sum(J[g] * pow2_f64(expo[:, :, g, :]) for g in range(ROW_GROUPS))
    gabs = sum(xp.abs(I[g]) * pow2_f64(expo[:, :, g, :]) for g in range(ROW_GROUPS))
    slow = ~fast & inwin[:, None, :]
    sr, st = xp.nonzero(xp.any(slow, axis=1))  # (row, token) cells needing Python integers
    qk32 = xp.astype(qk, xp.float32)
    slow_value = None
    if sr.shape[0]:
        slow_qk32, slow_qk, slow_value = exact_cells(*(to_numpy(a) for a in (
            I[:, sr, :, st], aq[sr], lq[sr], ak[st], lk[st], w[sr])))
        qk32[sr, :, st] = xp.asarray(slow_qk32, device=dev)
        qk[sr, :, st] = xp.asarray(slow_qk, device=dev)
    inf_cell = xp.zeros((R, Tc), dtype=xp.bool, device=dev)
    if plus_inf is not None:
        qk = xp.where(plus_inf, np.inf, qk)
        qk32 = xp.where(plus_inf, np.float32(np.inf), qk32)
        inf_cell = xp.any(plus_inf, axis=1)
    # ---- exact value: sum_h relu(q') * w_h * 2^(lq_h - 2), then * 2^lk
    a = xp.where(fast & (qp > 0), qp, 0.0)
    y = weighted_sum_f64(a, A_BITS, mw, fw + lq - 2)  # [R, Tc]
    value = y * pow2_f64(lk)[None, :]
    if slow_value is not None:
        value[sr, st] = xp.asarray(slow_value, device=dev)
    bad_w = ~xp.all(wfin, axis=1)
    ieee = bad_w[:, None] | inf_cell  # cells valued by IEEE float64 of the exact pieces, on the host
    ieee_rows = np.flatnonzero(to_numpy(xp.any(ieee, axis=1)))
    if ieee_rows.size:  # non-finite weights (the whole row), +Inf heads (their cells)
        sel = xp.asarray(ieee_rows, device=dev)
        qk_bad, w_bad = to_numpy(qk[sel]), to_numpy(w[sel])
        for a0 in range(0, Tc, piece):
            b0 = min(a0 + piece, Tc)
            host = nonfinite_weight_values(np.ascontiguousarray(qk_bad[:, :, a0:b0]), w_bad)
            value[sel, a0:b0] = xp.where(ieee[sel, a0:b0], xp.asarray(host, device=dev), value[sel, a0:b0])
    # ---- bound
    r_h = xp.where(xp.isfinite(qk), xp.maximum(qk, 0.0), 0.0)
    delta = _delta(opts.bound_model, qk, dabs, gabs)
    wabs = xp.abs(xp.astype(w, xp.float64))
    with ieee_quiet(xp):
        bound = ar.decode_bound(R=ar.weighted_heads(wabs, r_h), D=ar.weighted_heads(wabs, delta),
                                rho=ar.sum_heads(r_h), Delta=ar.sum_heads(delta), value=value, ws=1.0, heads=H)
    no_claim = bad_w[:, None] | ~xp.isfinite(value)
    bound = xp.where(no_claim, np.inf, bound)
    # ---- emulated order
    emu = None
    if opts.emulate:
        emu = emulate_heads(qk32, w, opts.head_order)
        if not is_numpy(xp):  # NaN cells: NumPy's bits, from NumPy's chunk arrays
            nan_tokens = to_numpy(xp.any(xp.isnan(emu) & inwin, axis=0))
            for a0 in np.unique(np.flatnonzero(nan_tokens) // piece) * piece:
                b0 = min(int(a0) + piece, Tc)
                host = emulate_heads(np.ascontiguousarray(to_numpy(qk32[:, :, int(a0):b0])), to_numpy(w),
                                     opts.head_order)
                emu[:, int(a0):b0] = xp.asarray(host, device=dev)
    return value, bound, emu


def _plus_inf_heads(nq: Any, q_nan: Any, nk: Any, k_nan: Any, special: Any) -> Any:
    """The software decode's +Inf heads [R, H, Tc]: in every group holding a 0xFF byte (q's or
    k's, decoded as +Inf) each of the 32 products is NaN where a code is +-0 and +-Inf
    elsewhere; qk is +Inf when no such product is NaN or -Inf and one is +Inf. nq [R, H, G, 32],
    nk [Tc, G, 32] (the codes' values, byte-0 groups zeroed), q_nan [R, H, G], k_nan [Tc, G]."""
    xp = namespace(nq, nk)
    R, H = nq.shape[:2]
    Tc = nk.shape[0]
    nan = pos = neg = xp.zeros((R, H, Tc), dtype=xp.bool, device=device(nq))

    def dots(a: Any, b: Any, g: int) -> Any:  # counts of dims where both masks hold [R, H, Tc]
        return xp.reshape(ar.exact_matmul(xp.reshape(a[:, :, g], (R * H, GROUP)), b[:, g].T), (R, H, Tc))

    for g in range(ROW_GROUPS):
        inf_group = q_nan[:, :, g, None] | k_nan[None, None, :, g]
        both = dots(nq != 0, nk != 0, g)
        same = dots(nq > 0, nk > 0, g) + dots(nq < 0, nk < 0, g)
        nan = nan | (inf_group & (both < GROUP))
        pos = pos | (inf_group & (same > 0))
        neg = neg | (inf_group & (both - same > 0))
    return special & ~nan & pos & ~neg


def emulate_heads(qk32: Any, w: Any, head_order: str) -> Any:
    """The emulated order's head sum from fl32(qk) [R, H, T] and the weights [R, H]: relu as
    maxnum (NaN -> +0, -0 -> +0), p = fl(relu * w), heads summed in ``head_order`` -> float32 [R, T].
    A NaN cell's payload is NumPy's on the host's arrays (which NaN x86 NumPy propagates
    depends on the array's shape: a vector loop body or its scalar tail, not only the cell)."""
    xp = namespace(qk32, w)
    with ieee_quiet(xp):
        relu = xp.where(xp.isnan(qk32), 0.0, xp.maximum(qk32, 0.0) + 0.0)
        return head_sum(xp.astype(relu * w[:, :, None], xp.float32), head_order)


def nonfinite_weight_values(qk: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The value of rows with a non-finite weight: the IEEE float64 evaluation of
    sum_h relu(qk_h) w_h (relu as maxnum: NaN -> 0), heads left to right -> float64 [R, T]; qk float64
    [R, H, T], w float32 [R, H]. Host arrays, a chunk at a time (the NaN payloads depend on
    the arrays' shape, as in ``emulate_heads``)."""
    with np.errstate(all="ignore"):
        return ar.sum_heads(np.where(np.isnan(qk), 0.0, np.maximum(qk, 0.0)) * w[:, :, None].astype(np.float64))


def _delta(model: str, qk: Any, dabs: Any, gabs: Any) -> Any:
    """delta_h (float64 [R, H, Tc]) of the qk model (arithmetic.qk_delta): dabs = sum_d
    |q_d k_d|, gabs = sum_g |dot_g|."""
    xp = namespace(qk, dabs, gabs)
    if model == ANY_ORDER:
        kw = dict(qk_abs=None, group_abs=None, tile_abs=None, dim_abs=dabs)
    elif model == GROUPS:
        kw = dict(qk_abs=None, group_abs=gabs, tile_abs=None, dim_abs=None)
    else:
        kw = dict(qk_abs=xp.abs(xp.where(xp.isfinite(qk), qk, 0.0)), group_abs=None, tile_abs=None, dim_abs=None)
    d = ar.qk_delta(model, groups=ROW_GROUPS, k_tiles=1, head_dim=HEAD_DIM, **kw)
    return xp.where(xp.isfinite(d), d, 0.0)


def exact_cells(I: np.ndarray, aq: np.ndarray, lq: np.ndarray, ak: np.ndarray, lk: np.ndarray,
                w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (row, token) cells off the float64 fast path (a group-exponent span above SPAN_FAST),
    with Python integers. Per cell c: I [c, G, H] integer group dots (0 for a head with a 0xFF
    byte), aq [c, H, G], lq [c, H], ak [c, G], lk [c], w [c, H]. -> (fl32(qk) [c, H], fl64(qk)
    [c, H], value [c]). Host arrays (the scorer hands over only these cells)."""
    n, _, H = I.shape
    qk32 = np.empty((n, H), np.float32)
    qk = np.empty((n, H))
    value = np.empty(n)
    # every group's power of two, 2^(aq + ak + lq + lk - 2), as an int64 exponent [c, H, G]
    expo = (aq.astype(np.int64) + ak.astype(np.int64)[:, None, :] + lq.astype(np.int64)[:, :, None]
            + lk.astype(np.int64)[:, None, None] - 2)
    for c, (dots, exps, weights) in enumerate(zip(I.astype(np.int64).tolist(), expo.tolist(), w.tolist())):
        exact = _slow_qk(dots, exps)
        for h, (num, exp) in enumerate(exact):
            qk32[c, h] = f32_nearest(num, exp)
            qk[c, h] = f64_nearest(num, exp)
        value[c] = _slow_value(exact, weights)
    return qk32, qk, value


def _slow_qk(dots: list[list[int]], exps: list[list[int]]) -> list[tuple[int, int]]:
    """Exact qk of every head of one (row, token) cell as num * 2^exp: dots [G][H] integer group
    dots, exps [H][G] each group's power of two (G = ROW_GROUPS); the sum is aligned on the
    smallest exponent."""
    return [dyadic_total((dots[g][h], e) for g, e in enumerate(head_exps)) for h, head_exps in enumerate(exps)]


def _slow_value(qks: list[tuple[int, int]], w: list[float]) -> float:
    """fl64(sum_h relu(qk_h) w_h) exactly: each float32 weight is a dyadic num * 2^exp too."""
    terms = []
    for (num, exp), wh in zip(qks, w):
        if num > 0 and math.isfinite(wh):
            wn, wd = wh.as_integer_ratio()  # wd is a power of two
            terms.append((num * wn, exp - (wd.bit_length() - 1)))
    return f64_nearest(*dyadic_total(terms))


