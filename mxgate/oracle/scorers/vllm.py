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

e8m0 byte 0 decodes per the profile (2^-127, or 0 under byte0 "zero"); byte 255 makes the
cell NaN with no finite bound (the interpreter propagates it, a compiled relu may drop it).
Cells whose exponent span is too wide for the float64 fast path are computed with Python
integers (``exact_cells``). The argument checks (``check_fp4_paged``, ``check_fp4_ragged``,
``check_fp8_paged``) read only shapes and dtypes of the large arrays, so the torch twin
(mxgate.twin.scorers.vllm) runs them on stand-ins.

FP8 paged: the layout is ``aiter-fp8-kv`` ([num_blocks, block_size, D+4]: D fp8 codes a token,
then one float32 scale a token); out = sum_h relu(fl(qk_h) * ks_t) * w_h, as
``aiter_fp8.pa_mqa_logits_fp8_scored`` models it, with vLLM's windows (2-D context_lens,
max_context_len clamp) mapped onto one query row per pseudo-batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from mxgate.oracle import profiles as _profiles
from mxgate.oracle.formats import e2m1
from mxgate.oracle.geometry import GROUP, HEAD_DIM, ROW_GROUPS
from mxgate.oracle import layouts as _layouts
from mxgate.oracle.scorers import arithmetic as ar
from mxgate.oracle.scorers import common as v
from mxgate.oracle.scorers.aiter_fp8 import pa_mqa_logits_fp8_scored
from mxgate.oracle.scorers.arithmetic import HEAD_ORDERS, f32_nearest, f32_parts, head_sum, pow2_f64, weighted_sum_f64
from mxgate.oracle.scorers.common import ANY_ORDER, GROUPS, KSTEPS, QK_MODELS, TWO_E2M1, ScoredLogits

SPAN_FAST = 24  # q' = sum_g I_g 2^(aq + ak) < 4 * 4608 * 2^24 < 2^39: exact in float64
A_BITS = 39
CELLS_PER_CHUNK = 1 << 18  # (row, head, token) cells per chunk (mxgate.twin passes whole chunks)
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
    q, qe = _fp4_q4(q_fp4, q_e8m0, call.rows)
    bs, end, bt, batch = call.block_size, call.end, call.block_tables, call.batch
    res = _Result.empty(call.rows, call.width, emulate)
    for b in range(call.batch_size):
        r = np.flatnonzero((batch == b) & (end > 0))
        if r.size == 0:
            continue
        T = int(end[r].max())
        t = np.arange(T)
        slots = bt[b, t // bs].astype(np.int64) * bs + t % bs
        packed, ke = LAYOUT.gather(kv_cache, slots=slots, block_size=bs)
        _score_rows(q[r], qe[r], weights[r], e2m1.unpack_nibbles(packed), ke, np.zeros(r.size, np.int64), end[r], r,
                    res, Options(head_order, bound_model, emulate, _profiles.get(profile)))
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
    Only dtypes and shapes of q_fp4, q_e8m0, kv_cache and weights are read (mxgate.twin passes
    shape-only stand-ins); the values of context_lens and block_tables are checked."""
    rows, H = _check_fp4_q4(q_fp4, q_e8m0)
    B, nn = q_fp4.shape[0], q_fp4.shape[1]  # type: ignore[attr-defined]
    _weights(weights, rows, H)
    width = v.positive_int(max_context_len, "max_context_len", minimum=0)
    buf = v.uint8(kv_cache, "kv_cache")
    if buf.ndim != 2:
        raise ValueError(f"kv_cache must have shape [num_blocks, page_bytes] (vllm-fp4-indexer-k), got {buf.shape}")
    bs = v.positive_int(block_size, "block_size")
    dims = LAYOUT.dims(num_blocks=buf.shape[0], block_size=bs, page_bytes=buf.shape[1])
    num_blocks = dims["num_blocks"]
    end = paged_limits(context_lens, B, nn, width)
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
    [0, max_context_len])."""
    ctx = np.asarray(context_lens)
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
    return np.clip(limit.astype(np.int64), 0, max_context_len)


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
    res = _Result.empty(call.rows, call.tokens, emulate)
    live = call.live
    if live.size:
        _score_rows(e2m1.unpack_nibbles(q_fp4[live]), q_e8m0[live], weights[live], e2m1.unpack_nibbles(k_fp4), k_e8m0,
                    call.start[live], call.end[live], live, res,
                    Options(head_order, bound_model, emulate, _profiles.get(profile)))
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
    q = v.uint8(q_fp4, "q_fp4")
    qe = v.uint8(q_e8m0, "q_e8m0")
    if q.ndim != 3 or q.shape[2] != HEAD_DIM // 2 or qe.shape != q.shape[:2] + (ROW_GROUPS,):
        raise ValueError(f"q_fp4 must be [S, H, 64] and q_e8m0 [S, H, 4], got {q.shape} and {qe.shape}")
    S, H = q.shape[:2]
    k = v.uint8(k_fp4, "k_fp4")
    ke = v.uint8(k_e8m0, "k_e8m0")
    if k.ndim != 2 or k.shape[1] != HEAD_DIM // 2 or ke.shape != (k.shape[0], ROW_GROUPS):
        raise ValueError(f"k_fp4 must be [N, 64] and k_e8m0 [N, 4], got {k.shape} and {ke.shape}")
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
    call = check_fp8_paged(q_fp8, context_lens, block_tables, max_context_len)
    if call.width == 0:
        return _empty(call.rows)
    rows, H, D = call.rows, call.heads, call.head_dim
    return pa_mqa_logits_fp8_scored(q_fp8.reshape(rows, 1, H, D), kv_cache, weights, call.end.astype(np.int32),
                                   call.block_tables[call.batch], call.width, variant=variant, head_order=head_order,
                                   bound_model=bound_model, emulate=emulate)


def check_fp8_paged(q_fp8: object, context_lens: object, block_tables: object, max_context_len: object) -> PagedCall:
    """The checks ``fp8_paged_logits_scored`` makes before it hands the call, one pseudo-batch
    of next_n = 1 per row, to ``aiter_fp8.pa_mqa_logits_fp8_scored`` (which checks the rest)."""
    q = v.uint8(q_fp8, "q_fp8")
    if q.ndim != 4:
        raise ValueError(f"q_fp8 must have shape [B, next_n, H, D], got {q.shape}")
    B, nn, H, D = q.shape
    width = v.positive_int(max_context_len, "max_context_len", minimum=0)
    end = paged_limits(context_lens, B, nn, width)
    bt = v.integers(block_tables, "block_tables", 2)
    if bt.shape[0] != B:
        raise ValueError(f"block_tables must have {B} rows (one per batch), got {bt.shape[0]}")
    return PagedCall(B * nn, B, nn, H, width, end, bt, np.repeat(np.arange(B), nn), head_dim=D)


def _empty(rows: int) -> ScoredLogits:
    return ScoredLogits(np.zeros((rows, 0)), np.zeros((rows, 0)), np.zeros((rows, 0), bool),
                        np.zeros((rows, 0), np.float32))


# ---- the engine ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    """The engine's options, checked when a call first scores a row (mxgate.twin builds them
    at the same point)."""

    head_order: str
    bound_model: str
    emulate: bool
    profile: _profiles.Profile

    def __post_init__(self) -> None:
        v.choice(self.head_order, "head_order", HEAD_ORDERS)
        v.choice(self.bound_model, "bound_model", QK_MODELS)


@dataclass
class _Result:
    value: np.ndarray
    bound: np.ndarray
    window: np.ndarray
    emulated: np.ndarray | None

    @classmethod
    def empty(cls, rows: int, width: int, emulate: bool) -> "_Result":
        return cls(np.full((rows, width), -np.inf), np.zeros((rows, width)), np.zeros((rows, width), bool),
                   np.full((rows, width), -np.inf, np.float32) if emulate else None)

    def scored(self, bound_model: str) -> ScoredLogits:
        return ScoredLogits(self.value, self.bound, self.window, self.emulated, KSTEPS, bound_model)


def _check_fp4_q4(q_fp4: object, q_e8m0: object) -> tuple[int, int]:
    q = v.uint8(q_fp4, "q_fp4")
    qe = v.uint8(q_e8m0, "q_e8m0")
    if q.ndim != 4 or q.shape[3] != HEAD_DIM // 2:
        raise ValueError(f"q_fp4 must have shape [B, next_n, H, 64], got {q.shape}")
    if qe.shape != q.shape[:3] + (ROW_GROUPS,):
        raise ValueError(f"q_e8m0 must have shape {q.shape[:3] + (ROW_GROUPS,)}, got {qe.shape}")
    return q.shape[0] * q.shape[1], q.shape[2]


def _fp4_q4(q: np.ndarray, qe: np.ndarray, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Checked Q -> (codes [rows, H, 128], e8m0 [rows, H, 4])."""
    return e2m1.unpack_nibbles(q.reshape(rows, q.shape[2], -1)), qe.reshape(rows, q.shape[2], ROW_GROUPS)


def _weights(weights: object, rows: int, heads: int) -> np.ndarray:
    w = v.float32(weights, "weights")
    if w.shape != (rows, heads):
        raise ValueError(f"weights must have shape ({rows}, {heads}) float32, got {w.shape}")
    return w


def _decoded_exponents(e: np.ndarray, p: _profiles.Profile) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """e8m0 bytes -> (exponent e - 127 as int64, zero mask (byte 0 read as 0.0), NaN mask)."""
    e = e.astype(np.int64)
    zero = (e == 0) if p.byte0 == "zero" else np.zeros(e.shape, bool)
    return e - 127, zero, e == 0xFF


def _score_rows(qc: np.ndarray, qe: np.ndarray, w: np.ndarray, kc: np.ndarray, ke: np.ndarray,
                start: np.ndarray, end: np.ndarray, out_rows: np.ndarray, res: _Result, opts: Options) -> None:
    """Rows (codes [R, H, 128], e8m0 [R, H, 4], weights [R, H]) against tokens 0..T-1 (codes
    [T, 128], e8m0 [T, 4]); row i's window [start_i, end_i) goes to output row out_rows[i]."""
    R, H, _ = qc.shape
    T0, T1 = int(start.min()), int(end.max())
    chunk = max(16, CELLS_PER_CHUNK // max(1, R * H))
    q_exp, q_zero, q_nan = _decoded_exponents(qe, opts.profile)
    k_exp_all, k_zero_all, k_nan_all = _decoded_exponents(ke, opts.profile)
    nq = TWO_E2M1[qc].reshape(R, H, ROW_GROUPS, GROUP)
    nq = np.where(q_zero[..., None], np.float32(0), nq)
    # per (row, head): smallest live group exponent and the offsets from it
    big = np.int64(1 << 20)
    lq = np.where(q_zero | q_nan, big, q_exp).min(axis=2)
    lq = np.where(lq == big, -127, lq)
    aq = np.where(q_zero | q_nan, 0, q_exp - lq[..., None])
    mw, fw, wfin = f32_parts(w)
    for lo in range(T0, T1, chunk):
        hi = min(lo + chunk, T1)
        tok = np.arange(lo, hi)
        inwin = (tok[None, :] >= start[:, None]) & (tok[None, :] < end[:, None])  # [R, Tc]
        if not inwin.any():
            continue
        k_exp, k_zero, k_nan = k_exp_all[lo:hi], k_zero_all[lo:hi], k_nan_all[lo:hi]
        nk = TWO_E2M1[kc[lo:hi]].reshape(hi - lo, ROW_GROUPS, GROUP)
        nk = np.where(k_zero[..., None], np.float32(0), nk)
        lk = np.where(k_zero | k_nan, big, k_exp).min(axis=1)
        lk = np.where(lk == big, -127, lk)
        ak = np.where(k_zero | k_nan, 0, k_exp - lk[:, None])
        _chunk(nq, q_exp, aq, lq, q_nan, nk, k_exp, ak, lk, k_nan, w, mw, fw, wfin, tok, inwin, out_rows, res,
               opts)


def _chunk(nq: np.ndarray, q_exp: np.ndarray, aq: np.ndarray, lq: np.ndarray, q_nan: np.ndarray, nk: np.ndarray,
           k_exp: np.ndarray, ak: np.ndarray, lk: np.ndarray, k_nan: np.ndarray, w: np.ndarray, mw: np.ndarray, fw: np.ndarray, wfin: np.ndarray,
           tok: np.ndarray, inwin: np.ndarray, out_rows: np.ndarray, res: _Result, opts: Options) -> None:
    R, H = nq.shape[:2]
    Tc = nk.shape[0]
    # integer group dots I_g [G, R, H, Tc] and their absolute versions (exact in float32: < 2^13)
    I = np.stack([(nq[:, :, g].reshape(R * H, GROUP) @ nk[:, g].T).reshape(R, H, Tc) for g in range(ROW_GROUPS)])
    J = np.stack([(np.abs(nq[:, :, g]).reshape(R * H, GROUP) @ np.abs(nk[:, g]).T).reshape(R, H, Tc)
                  for g in range(ROW_GROUPS)])
    span = aq.max(axis=2)[:, :, None] + ak.max(axis=1)[None, None, :]  # [R, H, Tc]
    nan_cell = q_nan.any(axis=2)[:, :, None] | k_nan.any(axis=1)[None, None, :]
    fast = (span <= SPAN_FAST) & ~nan_cell
    shift = np.minimum(aq[:, :, :, None] + ak.T[None, None, :, :], SPAN_FAST)  # [R, H, G, Tc]
    qp = np.zeros((R, H, Tc))  # q' = qk * 2^-(lq + lk - 2), an exact integer on fast cells
    for g in range(ROW_GROUPS):
        qp += I[g] * np.ldexp(1.0, shift[:, :, g, :])
    unit = pow2_f64(lq - 2)[:, :, None] * pow2_f64(lk)[None, None, :]  # qk = q' * unit, exactly
    qk = np.where(fast, qp * unit, np.nan)
    # |qk| parts for the bound, in float64 with every group's own power of two (any span)
    expo = q_exp[:, :, :, None] + k_exp.T[None, None, :, :] - 2  # [R, H, G, Tc]
    dabs = sum(J[g] * np.ldexp(1.0, expo[:, :, g, :]) for g in range(ROW_GROUPS))
    gabs = sum(np.abs(I[g]) * np.ldexp(1.0, expo[:, :, g, :]) for g in range(ROW_GROUPS))
    slow = ~fast & inwin[:, None, :]
    sr, st = np.nonzero(slow.any(axis=1))  # (row, token) cells needing Python integers
    qk32 = qk.astype(np.float32)
    if sr.size:
        slow_qk32, slow_qk, slow_value = exact_cells(I[:, sr, :, st], aq[sr], lq[sr], ak[st], lk[st], q_nan[sr],
                                                     k_nan[st], w[sr])
        qk32[sr, :, st] = slow_qk32
        qk[sr, :, st] = slow_qk
    # ---- exact value: sum_h relu(q') * w_h * 2^(lq_h - 2), then * 2^lk
    a = np.where(fast & (qp > 0), qp, 0.0)
    y = weighted_sum_f64(a, A_BITS, mw, fw + lq - 2)  # [R, Tc]
    value = y * pow2_f64(lk)[None, :]
    if sr.size:
        value[sr, st] = slow_value
    bad_w = ~wfin.all(axis=1)
    if bad_w.any():  # non-finite weights: IEEE float64 of the exact pieces
        value[bad_w] = nonfinite_weight_values(qk[bad_w], w[bad_w])
    # ---- bound
    r_h = np.where(np.isfinite(qk), np.maximum(qk, 0.0), 0.0)
    delta = _delta(opts.bound_model, qk, dabs, gabs)
    wabs = np.abs(w.astype(np.float64))
    with np.errstate(invalid="ignore", over="ignore"):
        bound = ar.decode_bound(R=ar.weighted_heads(wabs, r_h), D=ar.weighted_heads(wabs, delta),
                                rho=ar.sum_heads(r_h), Delta=ar.sum_heads(delta), value=value, ws=1.0, heads=H)
    no_claim = nan_cell.any(axis=1) | bad_w[:, None] | ~np.isfinite(value)
    bound = np.where(no_claim, np.inf, bound)
    value = np.where(nan_cell.any(axis=1), np.nan, value)
    # ---- emulated order
    emu = emulate_heads(qk32, w, opts.head_order) if opts.emulate else None
    for i in range(R):
        m = inwin[i]
        cols = tok[m]
        res.window[out_rows[i], cols] = True
        res.value[out_rows[i], cols] = value[i, m]
        res.bound[out_rows[i], cols] = bound[i, m]
        if emu is not None and res.emulated is not None:
            res.emulated[out_rows[i], cols] = emu[i, m]


def emulate_heads(qk32: np.ndarray, w: np.ndarray, head_order: str) -> np.ndarray:
    """The emulated order's head sum from fl32(qk) [R, H, T] and the weights [R, H]: relu
    (NaN kept, -0 -> +0), p = fl(relu * w), heads summed in ``head_order`` -> float32 [R, T].
    mxgate.twin calls this on the host, on a chunk's whole arrays, where a chunk holds NaN
    cells: which NaN payload x86 NumPy propagates depends on the array's shape (a vector loop
    body or its scalar tail), not only on the cell."""
    with np.errstate(all="ignore"):
        relu = np.where(np.isnan(qk32), qk32, np.maximum(qk32, np.float32(0)) + np.float32(0))
        return head_sum((relu * w[:, :, None]).astype(np.float32), head_order)


def nonfinite_weight_values(qk: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The value of rows with a non-finite weight: the IEEE float64 evaluation of
    sum_h relu(qk_h) w_h (NaN qk kept), heads left to right -> float64 [R, T]; qk float64
    [R, H, T], w float32 [R, H]. mxgate.twin calls this on the host for those rows, chunk by
    chunk (the NaN payloads depend on the arrays' shape, as in ``emulate_heads``)."""
    with np.errstate(all="ignore"):
        return ar.sum_heads(np.where(np.isnan(qk), qk, np.maximum(qk, 0.0)) * w[:, :, None].astype(np.float64))


def _delta(model: str, qk: np.ndarray, dabs: np.ndarray, gabs: np.ndarray) -> np.ndarray:
    """delta_h (float64 [R, H, Tc]) of the qk model (arithmetic.qk_delta): dabs = sum_d
    |q_d k_d|, gabs = sum_g |dot_g|."""
    if model == ANY_ORDER:
        kw = dict(qk_abs=None, group_abs=None, tile_abs=None, dim_abs=dabs)
    elif model == GROUPS:
        kw = dict(qk_abs=None, group_abs=gabs, tile_abs=None, dim_abs=None)
    else:
        kw = dict(qk_abs=np.abs(np.where(np.isfinite(qk), qk, 0.0)), group_abs=None, tile_abs=None, dim_abs=None)
    d = ar.qk_delta(model, groups=ROW_GROUPS, k_tiles=1, head_dim=HEAD_DIM, **kw)
    return np.where(np.isfinite(d), d, 0.0)


def exact_cells(I: np.ndarray, aq: np.ndarray, lq: np.ndarray, ak: np.ndarray, lk: np.ndarray, q_nan: np.ndarray,
                k_nan: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (row, token) cells off the float64 fast path (a group-exponent span above SPAN_FAST,
    or a 0xFF scale byte), with Python integers. Per cell c: I [c, G, H] integer group dots,
    aq [c, H, G], lq [c, H], ak [c, G], lk [c], q_nan [c, H, G], k_nan [c, G], w [c, H].
    -> (fl32(qk) [c, H], fl64(qk) [c, H] (NaN for a 0xFF byte), value [c] (NaN if any head is
    NaN)). mxgate.twin calls this on the host for the same cells."""
    n, _, H = I.shape
    qk32 = np.empty((n, H), np.float32)
    qk = np.empty((n, H))
    value = np.empty(n)
    for c in range(n):
        exact = _slow_qk(I[c], aq[c], lq[c], ak[c], lk[c], q_nan[c], k_nan[c])
        for h, x in enumerate(exact):
            if x is None:
                qk32[c, h], qk[c, h] = np.nan, np.nan
            else:
                qk32[c, h] = _f32_of_fraction(x)
                qk[c, h] = float(x)
        value[c] = _slow_value(exact, w[c])
    return qk32, qk, value


def _slow_qk(I: np.ndarray, aq: np.ndarray, lq: np.ndarray, ak: np.ndarray, lk: np.ndarray, q_nan: np.ndarray,
             k_nan: np.ndarray) -> list[Fraction | None]:
    """Exact qk of every head of one (row, token) cell: I [G, H] integer group dots; None for
    NaN (a 0xFF scale byte in a group of q or k)."""
    out: list[Fraction | None] = []
    for h in range(I.shape[1]):
        if q_nan[h].any() or k_nan.any():
            out.append(None)
            continue
        total = Fraction(0)
        for g in range(ROW_GROUPS):
            total += int(I[g, h]) * Fraction(2) ** int(aq[h, g] + ak[g] + lq[h] + lk - 2)
        out.append(total)
    return out


def _slow_value(qks: list[Fraction | None], w: np.ndarray) -> float:
    if any(x is None for x in qks):
        return float("nan")
    total = Fraction(0)
    for x, wh in zip(qks, w):
        if x > 0 and np.isfinite(wh):
            total += x * Fraction(float(wh))
    return float(total)  # Fraction -> float rounds correctly


def _f32_of_fraction(x: Fraction) -> np.float32:
    """The float32 nearest to a dyadic rational (denominator a power of two)."""
    den = x.denominator
    exp = -(den.bit_length() - 1)
    return f32_nearest(x.numerator, exp)
