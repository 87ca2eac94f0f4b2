"""``indexer_qk_rope_quant_and_cache``: AITER's fused DSA-indexer writer, FP8 and FP4 modes.

Per token t < T = min(len(k), len(slot_mapping)):
  Q (every head): RoPE on dims < 64, round to scalar_t, quantize per row (FP8) or per group
    of 32 (FP4); weights_out = fl(fl(w * q_scale) * weights_scale) (FP8) or w (FP4).
  K: LayerNorm, round, RoPE, round, quantize, store at slot_mapping[t].
Tokens with slot < 0 write nothing, unless compute_all_q_rope, where their Q outputs are
written (their position clamped to the table) and only K is skipped. Every other byte of the
outputs keeps its value. docs/ops/indexer.md states the contract step by step.

One code for NumPy arrays and torch tensors (any device: the outputs are made there and the
given ones written in place); on NumPy the bf16 FP4 case takes ``fastq``, the same bytes.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from mxgate.oracle import layouts
from mxgate.oracle import profiles as _profiles
from mxgate.oracle.parallel import run_ranges
from mxgate.oracle.geometry import HEAD_DIM, ROW_BYTES, ROW_GROUPS
from mxgate.oracle.ops import fastq, frontend, quant
from mxgate.oracle.ops.f32math import Arith, nan_exact
from mxgate.oracle.ops.frontend import FrontEnd
from mxgate.oracle.ops.indexer_checks import Call, check_call, fresh_outputs
from mxgate.oracle.xp import ieee_quiet, is_numpy, namespace

_CHUNK_ELEMENTS = 1 << 17  # Q elements per pass on NumPy: temporaries stay in cache (measured)
_K_CHUNK_ROWS = 4096
_DEVICE_CHUNK_ELEMENTS = 1 << 26  # elsewhere: float32 temporaries of 256 MB, few launches
_DEVICE_K_CHUNK_ROWS = 1 << 16
_FAST_PATH = True  # tests switch it off to compare the fast bf16 path with the general one


class IndexerOutputs(NamedTuple):
    """The five outputs (the caller's arrays where given). FP8 mode has no scale buffers."""

    q_out: Any
    weights_out: Any
    kv_cache: Any
    q_scale_out: Any | None
    kv_cache_scale: Any | None


def indexer_qk_rope_quant_and_cache(
    q: np.ndarray,
    q_out: np.ndarray | None,
    weights: np.ndarray,
    weights_out: np.ndarray | None,
    k: np.ndarray,
    kv_cache: np.ndarray | None,
    slot_mapping: np.ndarray,
    norm_weight: np.ndarray,
    norm_bias: np.ndarray,
    positions: np.ndarray,
    cos_cache: np.ndarray,
    sin_cache: np.ndarray,
    epsilon: float,
    quant_block_size: int,
    scale_fmt: str | None,
    weights_scale: float,
    preshuffle: bool = False,
    is_neox: bool = True,
    compute_all_q_rope: bool = False,
    q_scale_out: np.ndarray | None = None,
    kv_cache_scale: np.ndarray | None = None,
    *,
    profile: str | _profiles.Profile = "gfx950",
    variant: str | FrontEnd | None = None,
    mode: str | None = None,
    num_blocks: int | None = None,
    kv_block_size: int | None = None,
) -> IndexerOutputs:
    """The oracle of AITER's op (keyword names as AITER's), writing in place or into fresh buffers.

    Inputs: q [T', H, 128], weights [T', H], k [T, 128], cos_cache / sin_cache [max_pos, 32],
    all of one scalar type: bf16 (``ml_dtypes.bfloat16`` arrays or raw uint16 bit patterns),
    float16 or float32. slot_mapping and positions int64; norm_weight / norm_bias float32 [128].
    NumPy arrays, or torch tensors on one device (torch.bfloat16 or torch.uint16 for bf16).

    FP4 mode iff q_scale_out and kv_cache_scale are given (or ``mode="fp4"``, which makes
    fresh ones for those left None). Outputs passed as None come back as fresh buffers filled
    with ``layouts.POISON``; bf16 outputs come back as uint16 bit patterns. Given outputs are
    written in place (only the bytes the contract writes) and returned.

    profile: the semantics to emulate (``oracle.profiles``): FP4 element and scale rules, and
    for FP8 ``fp8_variant`` (e4m3fn "gfx950", e4m3fnuz "aiter-gfx942"), ``fp8_overflow`` and
    ``ue8m0_rounding``; its ``fma_contraction`` picks the default front end.
    variant: a member of the K front-end envelope (``frontend.VARIANT_NAMES``); default the
    profile's (rsqrt correctly rounded).
    num_blocks, kv_block_size: geometry of a fresh kv_cache (default: the fewest 64-slot
    blocks holding every slot).
    """
    call = check_call(
        q=q, q_out=q_out, weights=weights, weights_out=weights_out, k=k, kv_cache=kv_cache,
        slot_mapping=slot_mapping, norm_weight=norm_weight, norm_bias=norm_bias, positions=positions,
        cos_cache=cos_cache, sin_cache=sin_cache, epsilon=epsilon, quant_block_size=quant_block_size,
        scale_fmt=scale_fmt, weights_scale=weights_scale, preshuffle=preshuffle, is_neox=is_neox,
        compute_all_q_rope=compute_all_q_rope, q_scale_out=q_scale_out, kv_cache_scale=kv_cache_scale,
        profile=profile, variant=variant, mode=mode, num_blocks=num_blocks, kv_block_size=kv_block_size,
    )
    given = (q_out, weights_out, kv_cache, q_scale_out, kv_cache_scale)
    fresh_outputs(call)
    run_call(call)
    views = (call.q_out, call.weights_out, call.kv_cache, call.q_scale_out, call.kv_cache_scale)
    return IndexerOutputs(*(g if g is not None else v for g, v in zip(given, views)))


def run_call(call: Call) -> None:
    """Compute every output of a validated call and write it into the call's buffers."""
    positions = call.put(call.positions)
    cos = frontend.to_f32(call.cos_cache[positions], call.kind)
    sin = frontend.to_f32(call.sin_cache[positions], call.kind)
    fp4 = call.mode == "fp4"
    (_q_fp4 if fp4 else _q_fp8)(call, cos, sin)
    rows = call.k_rows
    if rows.size:
        values = k_values(call, rows, cos, sin)
        (_k_fp4 if fp4 else _k_fp8)(call, rows, values)


def _fast(call: Call) -> bool:
    """The NumPy bf16 FP4 fast path applies (a reorganisation of the general path's bytes)."""
    return _FAST_PATH and is_numpy(call.xp) and fastq.applies(call.kind, call.profile)


# ---- Q -----------------------------------------------------------------------------------------


def _q_chunks(call: Call, work) -> None:
    """Call work(sel, raw) over the written Q tokens in chunks (on NumPy cache-sized, shared by
    threads; elsewhere large, one after another): sel picks the chunk's tokens (a slice when
    every token is written), raw is their q."""
    rows = call.q_rows
    if rows.size == 0:
        return
    contiguous = rows.size == call.num_tokens
    numpy = is_numpy(call.xp)
    per_chunk = max(1, (_CHUNK_ELEMENTS if numpy else _DEVICE_CHUNK_ELEMENTS) // (call.num_heads * HEAD_DIM))

    def body(first: int, last: int) -> None:
        for start in range(first, last, per_chunk):
            stop = min(start + per_chunk, last)
            sel = slice(start, stop) if contiguous else call.put(rows[start:stop])
            work(sel, call.q[sel])

    if numpy:
        run_ranges(rows.size, body, weight=call.num_heads * HEAD_DIM)
    else:
        body(0, rows.size)


def _q_values(call: Call, raw, cos, sin):
    """Q's front end for one chunk (NaN bits as x86 NumPy's)."""
    return nan_exact(call.xp, lambda ar: frontend.q_frontend(
        frontend.to_f32(raw, call.kind), cos, sin, call.is_neox, call.kind, call.variant.fma, arith=ar))


def _row_mask(call: Call) -> np.ndarray:
    """The q layouts' slots argument: 0 for tokens whose Q outputs are written, -1 otherwise."""
    written = np.ones(call.num_tokens, bool) if call.compute_all_q_rope else call.slots >= 0
    return np.where(written, 0, -1).astype(np.int64)


def _bits_view(a):
    """A same-size integer view, so a copy moves bits (a NaN payload included) on any device."""
    xp = namespace(a)
    return a.view({1: xp.uint8, 2: xp.int16, 4: xp.int32}[a.dtype.itemsize])


def _q_fp4(call: Call, cos, sin) -> None:
    xp = call.xp
    t, h = call.num_tokens, call.num_heads
    # aiter-fp4-q is the identity layout ([T, H, 64], no preshuffle): the chunks write q_out
    # directly, for the written tokens only, which is what its scatter would do.
    scales = xp.zeros((t, h, ROW_GROUPS), dtype=xp.uint8, device=call.device)

    fast = _fast(call)

    def work(rows, raw) -> None:
        done = None
        if fast:
            done = fastq.q_fp4_chunk(raw, cos[rows], sin[rows], call.is_neox, call.variant.fma, call.profile)
        if done is None:  # general path: every input kind, profile and special value
            done = quant.quantize_fp4(_q_values(call, raw, cos[rows], sin[rows]), call.profile)
        call.q_out[rows], scales[rows] = done

    with ieee_quiet(xp):
        _q_chunks(call, work)
    mask = call.put(_row_mask(call))
    layouts.get("aiter-fp4-q-scale").scatter(call.q_scale_out[:t], scales, slots=mask, num_heads=h)
    rows = call.put(call.q_rows)
    _bits_view(call.weights_out)[rows] = _bits_view(call.weights)[rows]  # a plain copy in q's dtype


def _q_fp8(call: Call, cos, sin) -> None:
    ws = call.put(call.weights_scale)

    def work(rows, raw) -> None:
        x = _q_values(call, raw, cos[rows], sin[rows])
        s = quant.fp8_scale(quant.fmax_amax(x), arithmetic="reciprocal", floor=quant.Q_AMAX_FLOOR,
                            profile=call.profile, use_ue8m0=call.use_ue8m0)
        call.q_out[rows] = quant.fp8_encode(x, s, call.profile)
        w = frontend.to_f32(call.weights[rows], call.kind)
        ar = Arith(call.xp)
        call.weights_out[rows] = ar.mul(ar.mul(w, s), ws)

    with ieee_quiet(call.xp):
        _q_chunks(call, work)


# ---- K -----------------------------------------------------------------------------------------


def _k_chunk_rows(call: Call) -> int:
    return _K_CHUNK_ROWS if is_numpy(call.xp) else _DEVICE_K_CHUNK_ROWS


def k_values(call: Call, rows: np.ndarray, cos, sin, variant: FrontEnd | None = None):
    """The float32 values the K quantizer sees for tokens ``rows`` [n, 128] (NumPy indices;
    cos, sin: the tokens' table rows in the call's namespace)."""
    xp = call.xp
    chosen = call.variant if variant is None else variant
    eps = call.put(call.epsilon)
    out = xp.empty((rows.size, HEAD_DIM), dtype=xp.float32, device=call.device)
    step = _k_chunk_rows(call)
    with ieee_quiet(xp):
        for start in range(0, rows.size, step):
            part = call.put(rows[start:start + step])
            k32 = call.k[part]
            out[start:start + part.shape[0]] = nan_exact(xp, lambda ar: frontend.k_frontend(
                frontend.to_f32(k32, call.kind), call.norm_weight, call.norm_bias, eps, cos[part], sin[part],
                call.is_neox, call.kind, chosen, arith=ar))
    return out


def _k_fp4(call: Call, rows: np.ndarray, values) -> None:
    xp = call.xp
    packed = xp.empty((rows.size, ROW_BYTES), dtype=xp.uint8, device=call.device)
    scales = xp.empty((rows.size, ROW_GROUPS), dtype=xp.uint8, device=call.device)
    fast = _fast(call)  # K values are bf16 values then
    step = _k_chunk_rows(call)
    for start in range(0, rows.size, step):
        part = slice(start, start + step)
        done = fastq.quantize_rows(values[part], call.profile) if fast else None
        if done is None:
            done = quant.quantize_fp4(values[part], call.profile)
        packed[part], scales[part] = done
    slots = call.put(call.slots[rows])
    layouts.get("aiter-fp4-kv").scatter(call.kv_cache, packed, slots=slots)
    layouts.get("aiter-fp4-kv-scale").scatter(call.kv_cache_scale, scales, slots=slots)


def _k_fp8(call: Call, rows: np.ndarray, values) -> None:
    with ieee_quiet(call.xp):
        s = quant.fp8_scale(quant.fmax_amax(values), arithmetic="divide", floor=quant.K_AMAX_FLOOR,
                            profile=call.profile, use_ue8m0=call.use_ue8m0)
        codes = quant.fp8_encode(values, s, call.profile)
    name = "aiter-fp8-kv-preshuffle" if call.preshuffle else "aiter-fp8-kv"
    layouts.get(name).scatter(call.kv_cache, codes, s, slots=call.put(call.slots[rows]))
