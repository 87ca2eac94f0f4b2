"""Probe pools: inputs rich enough that every candidate value of every field an op reads gives
different bytes somewhere. Each pool is deterministic (seeded where random) and lists its
structured probes before its random ones, so the first separating probe found is a simple one.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from mxgate import oracle
from mxgate.inputs import boundaries
from mxgate.inputs.bits import F32_INF, NAN_PAYLOADS, SIGN, bf16_patterns, bit, f32, is_nan_bits, pow2_bits
from mxgate.oracle.bits import unique_patterns
from mxgate.oracle.formats.e2m1 import MAGNITUDES, MIDPOINTS
from mxgate.oracle.geometry import GROUP
from mxgate.oracle.ops.quant_vllm import K_DOMAIN

SEED = 0x1D25  # issue 25: the random parts of every pool
_ULPS = (-3, -2, -1, 0, 1, 2, 3)


def _bits(pool: boundaries.Pool) -> list[int]:
    return [b.bits for b in pool]


def _unique(bits: list[int] | np.ndarray) -> np.ndarray:
    """Bit patterns, first occurrence kept, in order, as float32."""
    u = np.asarray(bits, dtype=np.uint64).astype(np.uint32)
    _, first = unique_patterns(u, return_index=True)
    return u[np.sort(first)].view(np.float32)


def _edges(factors: tuple[float, ...], exponents: range) -> list[int]:
    """factor * 2^k and its float32 neighbours, for every k whose value is a positive finite float32."""
    out: list[int] = []
    for k in exponents:
        for factor in factors:
            with np.errstate(over="ignore", under="ignore"):
                b = pow2_bits(k) if factor == 1.0 and k >= -149 else bit(factor * 2.0**k)
            if 0 < b < F32_INF:
                out += [b + u for u in _ULPS if 0 < b + u < F32_INF]
    return out


@cache
def _floors() -> tuple[float, ...]:
    from mxgate.identify import candidates

    return tuple(v for v in candidates.values("amax_floor") if v is not None)


def e2m1_elements() -> np.ndarray:
    """float32 -> E2M1: the boundary pool, the midpoints +-3 ulps, every bf16 pattern."""
    mids = [b + u for m in MIDPOINTS for b in [bit(float(m))] for u in _ULPS]
    big = _edges((1.0, 1.5), range(2, 128))  # saturation everywhere above 6
    pos = _bits(boundaries.e2m1_pool()) + mids + big + [bit(float(v)) for v in MAGNITUDES]
    pos += [p ^ SIGN for p in pos]
    return _unique(pos + NAN_PAYLOADS + bf16_patterns().tolist())


def e4m3_elements(variant: str) -> np.ndarray:
    pool = _bits(boundaries.e4m3_pool(variant)) + boundaries.element_boundaries().view(np.uint32).tolist()
    return _unique(pool + NAN_PAYLOADS + bf16_patterns().tolist())


def bf16_elements() -> np.ndarray:
    """float32 -> bf16: ties at bit 16 and their neighbours, NaNs whose payload lies in the
    dropped bits, and seeded random patterns."""
    rng = np.random.Generator(np.random.PCG64(SEED))
    ties = [(b & ~0xFFFF) + d for b in rng.integers(0, 1 << 32, 512).tolist() for d in (0x7FFF, 0x8000, 0x8001)]
    nans = [0x7F800001, 0x7F80FFFF, 0xFF800001, 0x7F808000, 0x7FBF0000, 0xFFC00000, 0x7FC00000, 0x7FFFFFFF]
    random = rng.integers(0, 1 << 32, 1 << 14, dtype=np.uint64).tolist()
    pool = _bits(boundaries.bf16_pool()) + boundaries.element_boundaries().view(np.uint32).tolist()
    return _unique(pool + ties + nans + NAN_PAYLOADS + random)


def amax_values() -> np.ndarray:
    """Block amax values (>= 0): every scale policy's edges at every exponent (2^k, 1.5*2^k,
    1.75*2^k, 6*2^k, +-3 ulps), every candidate amax floor times 1 and 6, the boundary pools,
    every non-negative bf16 pattern, Inf and positive NaNs."""
    every = np.arange(-149, 128)
    edges = _edges((1.0, 1.5, 1.75, 6.0, 3.0), range(int(every[0]) - 3, int(every[-1]) + 1))
    floors = [b + u for f in _floors() for v in (f, 6.0 * f, f / 6.0) for b in [bit(v)] for u in _ULPS]
    rest = _bits(boundaries.amax_pool()) + boundaries.scale_inputs().view(np.uint32).tolist()
    bf16 = bf16_patterns()
    bf16 = bf16[(bf16 & np.uint32(SIGN)) == 0].tolist()
    pool = _unique([0] + floors + edges + rest + bf16 + [F32_INF] + [p for p in NAN_PAYLOADS if p < SIGN])
    return pool[(pool.view(np.uint32) & np.uint32(SIGN)) == 0]


def ue8m0_scales() -> np.ndarray:
    return _unique(_bits(boundaries.ue8m0_pool()))


def e8m0_codes() -> np.ndarray:
    """Every byte: the e8m0 codes, and the e4m3 codes of the FP8 decoders."""
    return np.arange(256, dtype=np.uint8)


def e2m1_codes() -> np.ndarray:
    """The 16 E2M1 codes, one per byte."""
    return np.arange(16, dtype=np.uint8)


def page68_rows() -> np.ndarray:
    """Rows of one page68 slot (uint8 [n, 68]: 64 packed bytes, then 4 e8m0 bytes)."""
    return byte_rows(68)


def byte_rows(width: int) -> np.ndarray:
    """uint8 [n, width]: each byte value at every position once (row j holds (j + position)
    mod 256), then seeded random rows."""
    cycled = (np.arange(256)[:, None] + np.arange(width)[None, :]) % 256
    rng = np.random.Generator(np.random.PCG64(SEED))
    random = rng.integers(0, 256, (256, width))
    return np.concatenate([cycled, random]).astype(np.uint8)


# ---- MX blocks -------------------------------------------------------------------------------


def _element_values() -> list[int]:
    """Element patterns to place in a block beside a carrier amax: the block element pool and
    the tie neighbours."""
    return _bits(boundaries.block_element_pool())


def _pack(carrier: int, elements: list[int], scale: int) -> list[np.ndarray]:
    """Blocks [carrier, 31 elements] with every element multiplied by 2^scale (exactly, in float32
    bits: only finite normal values move), the carrier kept the block's amax."""
    rows = []
    for start in range(0, len(elements), GROUP - 1):
        chunk = elements[start:start + GROUP - 1]
        chunk += [0] * (GROUP - 1 - len(chunk))
        rows.append(_scaled(np.asarray([carrier] + chunk, dtype=np.uint32), scale))
    return rows


def _scaled(u: np.ndarray, k: int) -> np.ndarray:
    """float32 bits u times 2^k where that is exact and stays normal; other values unchanged."""
    field = (u >> np.uint32(23)) & np.uint32(0xFF)
    movable = (field > 0) & (field < 0xFF) & (field.astype(np.int64) + k > 0) & (field.astype(np.int64) + k < 0xFF)
    moved = u.astype(np.int64) + np.where(movable, k << 23, 0)
    return moved.astype(np.uint32)


def mx_blocks(amax: np.ndarray | None = None) -> np.ndarray:
    """float32 blocks [n, 32]: element probes beside carriers (amax 4 and 6 at several scales),
    amax probes (one element at each amax value, the rest spread below it), special blocks (a
    NaN or Inf among finite values, all NaN, zeros, -0, small negatives), the suite's scale
    blocks, and seeded random blocks."""
    rows: list[np.ndarray] = []
    elements = _element_values()
    for carrier in (4.0, 6.0, 5.0, 7.0):
        for k in (0, -3, 5, -120, -127, 100, 125):
            rows += _pack(bit(carrier), elements, k)
    spread = np.float32([1, -0.75, 0.5, -0.25, 0.125, 0.625, -0.875, 0.0, -0.0, 0.3125, -0.5625, 0.9375, 0.0625,
                         -0.4375, 0.1875, 0.8125] * 2)
    amax = amax_values() if amax is None else amax
    finite = amax[np.isfinite(amax)]
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        body = (finite[:, None] * spread[None, :]).astype(np.float32)
    body[:, 0] = finite
    rows += list(body.view(np.uint32))
    for special in [F32_INF, F32_INF | SIGN] + NAN_PAYLOADS:
        for base in (1.0, 6.0, 1e-3, 3e38):
            row = (spread * np.float32(base)).view(np.uint32).copy()
            row[5] = special
            rows.append(row)
        rows.append(np.full(GROUP, special, np.uint32))
    for value in (0.0, -0.0, -1e-30, -0.1, 1e-40, -1e-45):
        rows.append(np.full(GROUP, bit(value), np.uint32))
    rows += list(boundaries.scale_blocks().view(np.uint32))
    rows += list(boundaries.tie_probe().view(np.uint32))
    rng = np.random.Generator(np.random.PCG64(SEED))
    scale = np.exp2(rng.integers(-30, 30, (512, 1))).astype(np.float32)
    rows += list((rng.standard_normal((512, GROUP)).astype(np.float32) * scale).view(np.uint32))
    blocks = np.stack(rows).astype(np.uint32)
    _, first = np.unique(blocks, axis=0, return_index=True)
    return blocks[np.sort(first)].view(np.float32)


@cache
def rms_blocks() -> np.ndarray:
    """The blocks of ``mx_blocks`` inside AITER's fused RMSNorm quantizer contract
    (``boundaries.in_rms_contract``: what an identity RMSNorm cannot carry exactly set to +0),
    duplicates dropped."""
    blocks = boundaries.in_rms_contract(mx_blocks()).view(np.uint32)
    _, first = np.unique(blocks, axis=0, return_index=True)
    return blocks[np.sort(first)].view(np.float32)


_BF16_MANTISSAS = (0, 1, 2, 0x3F, 0x40, 0x41, 0x5F, 0x60, 0x61, 0x7E, 0x7F)


def bf16_amax_values() -> np.ndarray:
    """The amax values a bf16 block can have, near every scale edge: at each exponent the
    mantissas around 1, 1.5 and 2 (the 2^k, 1.5*2^k = 6*2^(k-2) and 1.75*2^k edges), every
    subnormal's neighbours of those, and the bf16 roundings of the candidate amax floors."""
    exponents = np.arange(0, 256, dtype=np.uint32)
    grid = ((exponents[:, None] << np.uint32(7)) | np.uint32(_BF16_MANTISSAS)[None, :]).reshape(-1)
    grid = grid[grid < 0x7F80]
    floors = oracle.bf16_bits(np.float32([f * m for f in _floors() for m in (1.0, 6.0)])).astype(np.uint32)
    bits = np.concatenate([grid, floors, np.uint32([0x7F80, 0x7FC0])]) << np.uint32(16)
    return _unique(bits)


@cache
def bf16_finite_blocks() -> np.ndarray:
    """The blocks of ``bf16_blocks`` holding no NaN and no Inf."""
    blocks = bf16_blocks()
    return blocks[((blocks & 0x7FFF) < 0x7F80).all(axis=1)]


def bf16_blocks() -> np.ndarray:
    """MX blocks as bf16 bit patterns (uint16 [n, 32]): the blocks of ``mx_blocks`` over the bf16
    amax values, each element rounded to bf16 (NaN kept NaN with its sign), duplicates dropped."""
    bits = oracle.bf16_bits(mx_blocks(bf16_amax_values()))
    _, first = np.unique(bits, axis=0, return_index=True)
    return bits[np.sort(first)]


@cache
def bf16_k_domain_blocks() -> np.ndarray:
    """The blocks of ``bf16_blocks`` inside vLLM's K insert contract (every value 0 or finite
    with 2^-60 <= |x| < 2^36, where its front end is an exact identity: ``quant_vllm.K_DOMAIN``)."""
    blocks = bf16_blocks()
    a = np.abs(oracle.bf16_to_f32(blocks).astype(np.float64))
    inside = np.isfinite(a) & ((a == 0) | ((a >= K_DOMAIN[0]) & (a < K_DOMAIN[1])))
    return blocks[inside.all(axis=1)]


@cache
def bf16_normal_blocks() -> np.ndarray:
    """The blocks of ``bf16_blocks`` without a bf16 subnormal (for vLLM's Q kernel: Triton 3.9's
    interpreter widens bf16 subnormals wrongly, docs/findings/vllm.md section 4, so their bytes
    would tell of the interpreter, not of the kernel)."""
    blocks = bf16_blocks()
    subnormal = ((blocks & np.uint16(0x7F80)) == 0) & ((blocks & np.uint16(0x7F)) != 0)
    return blocks[~subnormal.any(axis=1)]


def random_sample(n_cases: int, count: int) -> np.ndarray:
    """Seeded indices of ``count`` cases among ``n_cases`` (the unselected part sent anyway, so
    that bytes no candidate field explains are seen outside the separating probes too)."""
    rng = np.random.Generator(np.random.PCG64(SEED + 1))
    return np.sort(rng.choice(n_cases, size=min(count, n_cases), replace=False))


__all__ = ["SEED", "amax_values", "bf16_blocks", "bf16_k_domain_blocks", "bf16_normal_blocks", "rms_blocks", "bf16_elements", "e2m1_codes", "e2m1_elements", "e4m3_elements", "e8m0_codes",
           "is_nan_bits", "mx_blocks", "byte_rows", "page68_rows", "random_sample", "ue8m0_scales", "f32"]
