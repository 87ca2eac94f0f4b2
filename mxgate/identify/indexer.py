"""identify's probes of the indexer op ``indexer_qk_rope_quant_and_cache`` (AITER keyword names).

Main probes (FP4 mode, Q). Each case is one bf16 block of 32 (``probes.bf16_blocks``, the pool
of the other bf16 block ops), placed in Q's dims 64..127, which RoPE does not touch
(``oracle.ops.frontend.q_frontend``: RoPE rotates dims < 64, the rest pass through): two blocks
a head row, 16 heads a token (FP4 mode wants a multiple of 16), dims 0..63 +0. Positions are
0 with cos 1 and sin 0 (RoPE on the zeros gives +0 whatever the contraction); K rows are zero.
The units of a case are its 32 nibbles of ``q_out`` and its byte of ``q_scale_out``, read back
through the ``aiter-fp4-q`` and ``aiter-fp4-q-scale`` layouts. The reference is the oracle op
itself under the candidate profile on the same inputs, so what the op does beyond
``quantize_mx`` (the fmaxf amax of a block holding NaN or Inf, ``quant.quantize_fp4``) is the
op's.

Side probes: fixed inputs, each called (twice, on fresh copies) beside the main probes; their
units are judged, in this order, under the profile the main probes decided, with the side's own
axes varied (a field the main probes read only among the values they left consistent):

- ``fp4-f32``: FP4 mode with float32 inputs (the op takes bf16, float16 or float32): Q blocks
  whose amax lies next to every scale edge and candidate amax floor, +-3 ulps, which no bf16
  block has. Axes: ``scale_policy`` (floor / floor_log2f, rceil / rceil_log2f / rceil_exact),
  ``amax_floor``, ``scale_arithmetic``.
- ``k-front-end`` (FP4 mode): two K rows (``k_probe``: the gate's envelope probe,
  ``mxgate.inputs.indexer.envelope_probe_case``, with two more boundary sets, so that every
  member gives different bytes), read back from ``kv_cache`` and ``kv_cache_scale`` through the
  ``aiter-fp4-kv`` layouts. Its axis is the envelope member
  (``variant=``, ``frontend.VARIANT_NAMES``): it decides ``fma_contraction`` and names the
  rsqrt members that explain the K bytes. The probe's boundary is an E2M1 tie at 5 (scale
  0.25), so under ``tie='away'`` (5 and 5 + 1 ulp both go to 6) it cannot tell the members
  apart, which the report then says.
- ``fp8-mode``: Q rows in FP8 mode, once with ``scale_fmt='ue8m0'`` and once without: amax
  values at every bf16 exponent near the e4m3fn and e4m3fnuz maxima (1.75 * 2^k, 1.875 * 2^k
  and their bf16 neighbours), signed NaNs and Infs among finite values, zeros, tiny and
  random rows; weights 1 and weights_scale 1, so ``weights_out`` is the row's float32 scale.
  Units: the 128 codes of ``q_out`` and ``weights_out``. Axes: ``fp8_variant`` and
  ``fp8_overflow``. No finite Q row can overflow (the scale is amax / max, or that rounded up
  to a power of two) and an Inf amax makes the scale Inf and every element x * 0, so
  ``fp8_overflow`` is decided only between ``satfinite`` and the rest (a negative NaN).
- ``fp8-ue8m0-f32``: FP8 mode with float32 inputs (the op takes bf16, float16 or float32): Q
  rows whose scale lies a few ulps above 2^k where ``log2f`` and ``bitwise`` ue8m0 rounding
  differ, which no bf16 amax reaches. Axis: ``ue8m0_rounding``.

A backend that refuses a side call (one taking only bf16, say) leaves that side's axes not
decided by these probes, and the report names the refusal. The K path of FP8 mode is not probed.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from mxgate import oracle
from mxgate.identify import probes
from mxgate.identify.drivers import Driver, SideProbe
from mxgate.op_table import OpName
from mxgate.oracle import layouts
from mxgate.oracle.geometry import GROUP, HEAD_DIM, KV_BLOCK, ROPE_DIM, ROW_GROUPS
from mxgate.oracle.profiles import Profile

OP = OpName.INDEXER_QK_ROPE_QUANT_AND_CACHE
OUTPUTS = ("q_out", "weights_out", "kv_cache", "q_scale_out", "kv_cache_scale")
HEADS = 16  # FP4 mode needs a multiple of 16
BLOCKS_PER_ROW = (HEAD_DIM - ROPE_DIM) // GROUP  # blocks of a head row RoPE leaves alone (2)
BF16_ONE = 0x3F80
FP8_FORMATS = ("ue8m0", None)  # scale_fmt of the FP8 side probe's two calls


def _reference_op():
    return oracle.ops.indexer_qk_rope_quant_and_cache


# ---- calling the op -----------------------------------------------------------------------------


def _common(t: int) -> dict[str, Any]:
    """Inputs every probe call shares: positions 0 with cos 1 and sin 0, weights 1, every slot
    written (slot t for token t), LayerNorm weight 1 and bias 0."""
    cos = np.full((1, ROPE_DIM // 2), BF16_ONE, np.uint16)
    return dict(
        weights=np.full((t, HEADS), BF16_ONE, np.uint16),
        slot_mapping=np.arange(t, dtype=np.int64),
        norm_weight=np.ones(HEAD_DIM, np.float32), norm_bias=np.zeros(HEAD_DIM, np.float32),
        positions=np.zeros(t, np.int64), cos_cache=cos, sin_cache=np.zeros_like(cos),
        epsilon=1e-6, weights_scale=1.0, preshuffle=False, is_neox=True, compute_all_q_rope=False,
    )


def _fp4_outputs(t: int, f32: bool = False) -> dict[str, np.ndarray]:
    num_blocks = max(1, -(-t // KV_BLOCK))
    poison = layouts.POISON
    width, kind = (4, np.float32) if f32 else (2, np.uint16)  # weights_out has q's scalar type
    return dict(
        q_out=np.full((t, HEADS, HEAD_DIM // 2), poison, np.uint8),
        weights_out=np.full((t, HEADS, width), poison, np.uint8).view(kind)[..., 0],
        kv_cache=layouts.get("aiter-fp4-kv").new_buffer(num_blocks=num_blocks),
        q_scale_out=layouts.get("aiter-fp4-q-scale").new_buffer(num_tokens=t, num_heads=HEADS),
        kv_cache_scale=layouts.get("aiter-fp4-kv-scale").new_buffer(num_blocks=num_blocks),
    )


def _fp8_outputs(t: int) -> dict[str, np.ndarray]:
    poison = layouts.POISON
    return dict(
        q_out=np.full((t, HEADS, HEAD_DIM), poison, np.uint8),
        weights_out=np.full((t, HEADS, 4), poison, np.uint8).view(np.float32)[..., 0],
        kv_cache=layouts.get("aiter-fp8-kv").new_buffer(num_blocks=max(1, -(-t // KV_BLOCK)), block_size=KV_BLOCK),
    )


def fresh(args: dict[str, Any]) -> dict[str, Any]:
    """A copy of every array argument (the inputs and the POISON-filled output buffers)."""
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}


def outputs_of(result: Any, args: dict[str, Any]) -> dict[str, np.ndarray]:
    """The five outputs of one call: what the op returned (a tuple in AITER's order, or a dict),
    else the buffers it wrote in place (as the gate reads them)."""
    if result is None:
        return {k: args.get(k) for k in OUTPUTS}
    if isinstance(result, dict):
        return dict(result)
    got = tuple(result)
    return dict(zip(OUTPUTS, got))


def run_op(run, args: dict[str, Any]) -> dict[str, np.ndarray]:
    mine = fresh(args)
    return outputs_of(run(**mine), mine)


def oracle_op(profile: Profile, args: dict[str, Any], variant: str | None = None) -> dict[str, np.ndarray]:
    mine = fresh(args)
    with np.errstate(all="ignore"):
        return outputs_of(_reference_op()(**mine, profile=profile, variant=variant), mine)


# ---- main probes: FP4 Q blocks ----------------------------------------------------------------


def q_args(blocks: np.ndarray) -> dict[str, Any]:
    """The op's FP4-mode arguments carrying blocks [n, 32] (bf16 bit patterns, or float32:
    then every input is float32) in Q's dims 64..127."""
    n = blocks.shape[0]
    per_token = HEADS * BLOCKS_PER_ROW
    t = max(1, -(-n // per_token))
    body = np.zeros((t * per_token, GROUP), blocks.dtype)
    body[:n] = blocks
    q = np.zeros((t, HEADS, HEAD_DIM), blocks.dtype)
    q[..., ROPE_DIM:] = body.reshape(t, HEADS, BLOCKS_PER_ROW * GROUP)
    args = dict(q=q, k=np.zeros((t, HEAD_DIM), blocks.dtype), quant_block_size=GROUP, scale_fmt="ue8m0",
                **_common(t))
    f32 = blocks.dtype == np.float32
    if f32:
        _as_f32(args)
    args.update(_fp4_outputs(t, f32))
    return args


def _as_f32(args: dict[str, Any]) -> None:
    """weights and the cos / sin tables as float32, the scalar type of a float32 q."""
    for name in ("weights", "cos_cache", "sin_cache"):
        args[name] = oracle.bf16_to_f32(args[name])


def q_units(out: dict[str, np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
    """(nibbles [n, 32], bytes [n]) of the first n Q blocks, read through the layouts."""
    q_out = np.ascontiguousarray(np.asarray(out["q_out"]).view(np.uint8))
    t = q_out.shape[0]
    (packed,) = layouts.get("aiter-fp4-q").gather(q_out, num_heads=HEADS)
    (e8m0,) = layouts.get("aiter-fp4-q-scale").gather(
        np.ascontiguousarray(np.asarray(out["q_scale_out"]).view(np.uint8)), slots=np.zeros(t, np.int64),
        num_heads=HEADS)
    nibbles = oracle.unpack_nibbles(np.asarray(packed, np.uint8).reshape(t, HEADS, HEAD_DIM // 2))
    nibbles = nibbles[..., ROPE_DIM:].reshape(-1, GROUP)[:n]
    scales = np.asarray(e8m0, np.uint8).reshape(t, HEADS, ROW_GROUPS)[..., ROPE_DIM // GROUP:].reshape(-1)[:n]
    return nibbles, scales


def _q_call(run, blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return q_units(run_op(run, q_args(blocks)), blocks.shape[0])


def _q_reference(p: Profile, blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return q_units(oracle_op(p, q_args(blocks)), blocks.shape[0])


# ---- side probe: the K front end (FP4) ----------------------------------------------------------


# K rows whose front end sits on rounding boundaries each envelope member moves differently,
# extending the gate's envelope probe (mxgate.inputs.indexer, which explains the arithmetic;
# u = 2^-23, M = 1.25 + 2^-8, the bf16 midpoint above 1.25): every row holds 32 pairs
# (p, -p), p = 0.625, and 32 pairs (q, -q), q = 1/8, so with epsilon 3/64 the variance is
# exactly 1/4, rsqrt 2 (rn), 2 - u (down) or 2 + 2u (up), and c*inv = 1.25 - u, 1.25 or
# 1.25 + u. At the even dim of a p pair, n = fl(c*inv) * w + b rounds (float32, then bf16) to
# 1.25 or to 1.2578125 (an E2M1 tie at 5 under the group scale 0.25, or 6):
#   set 1, dims 0..20   (w 1, b 2^-8):            1.2578 iff rsqrt up;
#   set 2, dims 22..40  (w 1, b 2^-8 + u):        1.2578 unless rsqrt down;
#   set 3, dims 42..62  (w 1 + u, b 2^-8 - 5u/8): rn: 1.2578 fused, 1.25 mul-add;
#   set 4, dims 64..84  (w 1 + u, b 2^-8 + 3u/8): down: 1.2578 fused, 1.25 mul-add;
#   set 5, dims 86..106 (w 1 + u, b 2^-8 - 13u/8): up: 1.2578 fused, 1.25 mul-add;
# (the gate's probe has sets 1-3: it cannot tell fma from mul-add once rsqrt is off by one).
# Row 0 puts its p pairs on sets 1-3 (32 pairs), row 1 on sets 4 and 5 and dims 108..126;
# together the six members give six different rows. RoPE (cos 1, sin 0) leaves them exact.
_U = 2.0**-23
_K_SETS = ((range(0, 22, 2), 1.0, 2.0**-8), (range(22, 42, 2), 1.0, 2.0**-8 + _U),
           (range(42, 64, 2), 1.0 + _U, 2.0**-8 - 5 * _U / 8), (range(64, 86, 2), 1.0 + _U, 2.0**-8 + 3 * _U / 8),
           (range(86, 108, 2), 1.0 + _U, 2.0**-8 - 13 * _U / 8))
_K_ROWS = ((0, 1, 2), (3, 4, 5))  # set 5: the neutral dims 108..126
K_EPSILON = 3.0 / 64.0


@cache
def k_probe() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(K rows bf16 [2, 128], norm_weight, norm_bias) of the K front-end probe (see above)."""
    weight = np.ones(HEAD_DIM, np.float32)
    bias = np.zeros(HEAD_DIM, np.float32)
    for dims, w, b in _K_SETS:
        weight[list(dims)], bias[list(dims)] = np.float32(w), np.float32(b)
    sets = [list(d) for d, _, _ in _K_SETS] + [list(range(108, 128, 2))]
    rows = []
    for chosen in _K_ROWS:
        starts = [d for i in chosen for d in sets[i]]
        assert len(starts) == HEAD_DIM // 4, "32 p pairs a row"
        magnitude = np.full(HEAD_DIM // 2, 0.125, np.float32)
        magnitude[[d // 2 for d in starts]] = 0.625
        row = np.empty(HEAD_DIM, np.float32)
        row[0::2], row[1::2] = magnitude, -magnitude
        rows.append(oracle.bf16_bits(row))
    out = (np.stack(rows), weight, bias)
    for a in out:
        a.setflags(write=False)
    return out


@cache
def _k_args() -> dict[str, Any]:
    k, weight, bias = k_probe()
    t = k.shape[0]
    args = dict(q=np.zeros((t, HEADS, HEAD_DIM), np.uint16), k=k.copy(), quant_block_size=GROUP,
                scale_fmt="ue8m0", **_common(t))
    args.update(norm_weight=weight.copy(), norm_bias=bias.copy(), epsilon=K_EPSILON)
    args.update(_fp4_outputs(t))
    return args


def _k_units(args: dict[str, Any], out: dict[str, np.ndarray]) -> np.ndarray:
    """[tokens, 128 nibbles + 4 bytes] of the K rows, read from kv_cache through the layouts."""
    slots = args["slot_mapping"]
    (packed,) = layouts.get("aiter-fp4-kv").gather(np.asarray(out["kv_cache"]).view(np.uint8), slots=slots)
    (e8m0,) = layouts.get("aiter-fp4-kv-scale").gather(np.asarray(out["kv_cache_scale"]).view(np.uint8), slots=slots)
    nibbles = oracle.unpack_nibbles(np.asarray(packed, np.uint8).reshape(slots.size, HEAD_DIM // 2))
    scales = np.asarray(e8m0, np.uint8).reshape(slots.size, ROW_GROUPS)
    return np.concatenate([nibbles, scales], axis=1).astype(np.int64)


def _k_label(call: int, row: int, unit: int) -> tuple[str, str, str, list[str]]:
    k = k_probe()[0][row]
    where = (f"K row {row} of the front-end probe (mxgate.identify.indexer.k_probe: norm_weight, norm_bias "
             f"and epsilon 3/64 there)")
    if unit < HEAD_DIM:
        return where, f"kv_cache nibble {unit}", "e2m1", _bits16(k)
    return where, f"kv_cache_scale[{unit - HEAD_DIM}]", "byte", _bits16(k)


# ---- side probe: FP4 scale rules on float32 inputs ---------------------------------------------

_F32_FACTORS = (1.0, 1.5, 1.75, 3.0, 6.0)


@cache
def fp4_f32_blocks() -> np.ndarray:
    """float32 blocks [n, 32]: one per amax value next to every scale edge (factor * 2^k, the
    factors of ``_F32_FACTORS``, +-3 ulps, at every exponent) and every candidate amax floor
    (times 1 and 6, +-3 ulps), the other elements spread below it. These amax values, which
    no bf16 block has, tell floor from floor_log2f and rceil from rceil_log2f and rceil_exact."""
    edges = probes._edges(_F32_FACTORS, range(-152, 128))
    floors = [b + u for f in probes._floors() for v in (f, 6.0 * f) for b in [probes.bit(v)] for u in probes._ULPS]
    amax = probes._unique(edges + floors)
    spread = np.float32([1, -0.75, 0.5, -0.25, 0.125, 0.625, -0.875, 0.0, -0.0, 0.3125, -0.5625, 0.9375, 0.0625,
                         -0.4375, 0.1875, 0.8125] * 2)
    with np.errstate(all="ignore"):
        blocks = (amax[:, None] * spread[None, :]).astype(np.float32)
    blocks[:, 0] = amax
    blocks.setflags(write=False)
    return blocks


def _fp4_f32_args() -> dict[str, Any]:
    return q_args(fp4_f32_blocks())


def _fp4_f32_units(args: dict[str, Any], out: dict[str, np.ndarray]) -> np.ndarray:
    nibbles, scales = q_units(out, fp4_f32_blocks().shape[0])
    return np.concatenate([nibbles, scales[:, None]], axis=1).astype(np.int64)


def _fp4_f32_label(call: int, row: int, unit: int) -> tuple[str, str, str, list[str]]:
    block = fp4_f32_blocks()[row]
    bits = [f"0x{int(v):08x}" for v in block.view(np.uint32).tolist()]
    where = f"float32 Q block {row} whose largest magnitude is {_f32(block[0])}"
    if unit < GROUP:
        return where + f", element {unit} = {_f32(block[unit])}", f"q_out[{unit}]", "e2m1", bits
    return where, "q_scale_out", "byte", bits


# ---- side probe: FP8 mode ---------------------------------------------------------------------

_FP8_MANTISSAS = (0x00, 0x01, 0x3F, 0x40, 0x41, 0x5F, 0x60, 0x61, 0x6F, 0x70, 0x71, 0x7F)
_SPREAD = np.float32([-1.0, 0.5, -0.25, 0.75, 0.0625, -0.9375, 0.3125, 0.5625, -0.125, 0.875, 0.0, -0.0,
                      0.6875, -0.4375, 0.1875, 0.8125])


def _fp8_rows() -> np.ndarray:
    """bf16 Q rows [n, 128] for FP8 mode (dims 0..63 +0, the probe in dims 64..127)."""
    exponents = np.arange(0, 255, dtype=np.uint32)
    amax = ((exponents[:, None] << np.uint32(7)) | np.uint32(_FP8_MANTISSAS)[None, :]).reshape(-1)
    amax = amax[amax > 0].astype(np.uint32) << np.uint32(16)
    a = amax.view(np.float32)
    spread = np.tile(_SPREAD, 4)[: HEAD_DIM - ROPE_DIM - 1]
    with np.errstate(all="ignore"):
        body = np.concatenate([a[:, None], a[:, None] * spread[None, :]], axis=1).astype(np.float32)
    rows = [oracle.bf16_bits(body)]
    base = oracle.bf16_bits(np.tile(_SPREAD, 4).astype(np.float32))
    specials = []
    for special in (0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81, 0xFFFF):
        row = base.copy()
        row[6] = special
        specials.append(row)
        specials.append(np.full(HEAD_DIM - ROPE_DIM, special, np.uint16))
    for value in (0.0, -0.0, 1e-40, -1e-38, 3e38):
        specials.append(oracle.bf16_bits(np.full(HEAD_DIM - ROPE_DIM, value, np.float32)))
    rows.append(np.stack(specials))
    rng = np.random.Generator(np.random.PCG64(probes.SEED + 8))
    scale = np.exp2(rng.integers(-40, 40, (256, 1))).astype(np.float32)
    rows.append(oracle.bf16_bits((rng.standard_normal((256, HEAD_DIM - ROPE_DIM)) * scale).astype(np.float32)))
    body = np.concatenate(rows)
    out = np.zeros((body.shape[0], HEAD_DIM), np.uint16)
    out[:, ROPE_DIM:] = body
    return out


@cache
def fp8_rows() -> np.ndarray:
    rows = _fp8_rows()
    rows.setflags(write=False)
    return rows


@cache
def fp8_f32_rows() -> np.ndarray:
    """float32 Q rows [n, 128] (dims 0..63 +0) whose FP8 scale fl(amax * fl(1/max)) lies a few
    ulps above a power of two 2^k at an exponent where exp2f(ceilf(log2f(s))) and the bitwise
    ceil_pow2 differ (|k| large: log2f(s) rounds to k), for both e4m3 maxima; bf16 amax values
    never give such a scale."""
    from mxgate.oracle.formats.e4m3 import max_value
    from mxgate.oracle.ops.quant import Q_AMAX_FLOOR
    from mxgate.oracle.scales import fp8_token_scale, ue8m0_round

    found: list[int] = []
    for variant in ("fn", "fnuz"):
        top = max_value(variant)
        k = np.arange(-40, 120)
        s = (np.exp2(k.astype(np.float64))[:, None] * (1 + np.arange(1, 5) * 2.0**-23)[None, :]).reshape(-1)
        base = (s * top).astype(np.float32).view(np.uint32)
        near = (base[:, None].astype(np.int64) + np.arange(-3, 4)[None, :]).reshape(-1)
        amax = near.astype(np.uint32).view(np.float32)
        amax = amax[np.isfinite(amax) & (amax > Q_AMAX_FLOOR)]
        with np.errstate(all="ignore"):
            scale = fp8_token_scale(amax, top, arithmetic="reciprocal", amax_floor=Q_AMAX_FLOOR)
            keep = np.isfinite(scale) & (ue8m0_round(scale, "log2f") != ue8m0_round(scale, "bitwise"))
        found += amax[keep].view(np.uint32).tolist()
    amax = probes._unique(found)
    spread = np.tile(_SPREAD, 4)[: HEAD_DIM - ROPE_DIM - 1]
    rows = np.zeros((amax.size, HEAD_DIM), np.float32)
    rows[:, ROPE_DIM] = amax
    with np.errstate(all="ignore"):
        rows[:, ROPE_DIM + 1:] = amax[:, None] * spread[None, :]
    rows.setflags(write=False)
    return rows


def _fp8_args(scale_fmt: str | None, rows: np.ndarray | None = None) -> dict[str, Any]:
    rows = fp8_rows() if rows is None else rows
    t = -(-rows.shape[0] // HEADS)
    q = np.zeros((t * HEADS, HEAD_DIM), rows.dtype)
    q[: rows.shape[0]] = rows
    args = dict(q=q.reshape(t, HEADS, HEAD_DIM), k=np.zeros((t, HEAD_DIM), rows.dtype), quant_block_size=HEAD_DIM,
                scale_fmt=scale_fmt, **_common(t))
    if rows.dtype == np.float32:  # every input of one scalar type
        _as_f32(args)
    args.update(_fp8_outputs(t))
    return args


def _fp8_units(args: dict[str, Any], out: dict[str, np.ndarray]) -> np.ndarray:
    """[rows, 128 codes + the row's scale] of the probe rows."""
    n = (fp8_rows() if args["q"].dtype == np.uint16 else fp8_f32_rows()).shape[0]
    codes = np.asarray(out["q_out"]).view(np.uint8).reshape(-1, HEAD_DIM)[:n].astype(np.int64)
    scale = np.ascontiguousarray(np.asarray(out["weights_out"], np.float32)).reshape(-1)[:n]
    bits = scale.view(np.uint32).astype(np.int64)
    bits = np.where(np.isnan(scale), 0x7FC00000, bits)
    return np.concatenate([codes, bits[:, None]], axis=1)


def _fp8_label(call: int, row: int, unit: int) -> tuple[str, str, str, list[str]]:
    r = fp8_rows()[row]
    top = int(np.argmax(r & np.uint16(0x7FFF)))
    fmt = FP8_FORMATS[call]
    where = (f"FP8 Q row {row} (scale_fmt={fmt!r}) whose largest magnitude is {_bf16(r[top])}"
             + (f", element {unit} = {_bf16(r[unit])}" if unit < HEAD_DIM else ""))
    if unit < HEAD_DIM:
        return where, f"q_out[{unit}]", "byte", _bits16(r)
    return where, "weights_out (the row's scale)", "f32", _bits16(r)


def _fp8_f32_label(call: int, row: int, unit: int) -> tuple[str, str, str, list[str]]:
    r = fp8_f32_rows()[row]
    bits = [f"0x{int(v):08x}" for v in r.view(np.uint32).tolist()]
    where = f"float32 FP8 Q row {row} (scale_fmt='ue8m0') whose largest magnitude is {_f32(r[ROPE_DIM])}"
    if unit < HEAD_DIM:
        return where + f", element {unit} = {_f32(r[unit])}", f"q_out[{unit}]", "byte", bits
    return where, "weights_out (the row's scale)", "f32", bits


def _f32(v: np.float32) -> str:
    return f"0x{int(np.float32(v).view(np.uint32)):08x} ({float(v):.9g})"


def _bf16(v: np.uint16) -> str:
    x = float((np.uint32(v) << np.uint32(16)).view(np.float32))
    return f"0x{int(v):04x} ({x:.9g})"


def _bits16(row: np.ndarray) -> list[str]:
    return [f"0x{int(v):04x}" for v in np.asarray(row).reshape(-1).tolist()]


# ---- the driver -------------------------------------------------------------------------------


FP4_F32 = SideProbe(
    name="fp4-f32",
    title="FP4 mode, float32 inputs (Q blocks whose amax lies next to a scale edge)",
    calls=lambda: [_fp4_f32_args()],
    call=run_op,
    reference=oracle_op,
    units=_fp4_f32_units,
    label=_fp4_f32_label,
    axes=("scale_policy", "amax_floor", "scale_arithmetic"),
)
K_FRONT_END = SideProbe(
    name="k-front-end",
    title="K front end (LayerNorm + RoPE on k, FP4, read from kv_cache through aiter-fp4-kv)",
    calls=lambda: [_k_args()],
    call=run_op,
    reference=oracle_op,
    units=_k_units,
    label=_k_label,
    axes=("variant",),
    derived=("fma_contraction",),
)
FP8_MODE = SideProbe(
    name="fp8-mode",
    title="FP8 mode (Q rows, scale_fmt 'ue8m0' and None; q_out codes and the row scale in weights_out)",
    calls=lambda: [_fp8_args(fmt) for fmt in FP8_FORMATS],
    call=run_op,
    reference=oracle_op,
    units=_fp8_units,
    label=_fp8_label,
    axes=("fp8_variant", "fp8_overflow"),
)
FP8_UE8M0_F32 = SideProbe(
    name="fp8-ue8m0-f32",
    title="FP8 mode, float32 inputs (Q rows whose scale lies just above a power of two; scale_fmt 'ue8m0')",
    calls=lambda: [_fp8_args("ue8m0", fp8_f32_rows())],
    call=run_op,
    reference=oracle_op,
    units=_fp8_units,
    label=_fp8_f32_label,
    axes=("ue8m0_rounding",),
)


def driver() -> Driver:
    return Driver(OP, ("q_out", "q_scale_out"), (GROUP, 1), probes.bf16_blocks, _q_call, _q_reference,
                  (False, False), ("e2m1", "byte"), selective=False,
                  sides=(FP4_F32, K_FRONT_END, FP8_MODE, FP8_UE8M0_F32))
