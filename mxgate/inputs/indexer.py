"""Named configurations and deterministic inputs for ``indexer_qk_rope_quant_and_cache``.

The configs of AITER PR #5484's own verification: 16 FP4 (tokens 8/32 x heads 32/64 x
compute_all_q_rope x is_neox) and 192 FP8 (both scale_fmt, both preshuffle, both is_neox,
both compute_all_q_rope, three token counts, two head counts, two cache block sizes). The PR
names the first five FP8 axes and 192 configs, not the rest: the head and block-size axes here
are this suite's choice, which makes the count 192.

``make_case`` builds the op's keyword arguments from a ``numpy.random.Generator(PCG64(seed))``:
bf16 tensors as uint16 bit patterns, no transcendental function (cos/sin tables are random
bf16 values in [-1, 1]), so the same seed gives the same bytes on every machine. Output
buffers are filled with ``layouts.POISON``.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from typing import Any

import numpy as np

from mxgate.inputs.samples import bf16_random
from mxgate.oracle import layouts
from mxgate.oracle.formats.bf16 import bf16_bits
from mxgate.oracle.formats.e2m1 import MIDPOINTS
from mxgate.oracle.geometry import GROUP, HEAD_DIM, KV_BLOCK, ROPE_DIM

MAX_POS = 4096


@dataclass(frozen=True)
class IndexerConfig:
    """One op configuration; ``id`` is its readable name, e.g. fp4-T8-H32-neox-allq."""

    mode: str  # "fp4" | "fp8"
    tokens: int
    heads: int
    is_neox: bool
    compute_all_q_rope: bool
    scale_fmt: str | None = "ue8m0"
    preshuffle: bool = False
    block_size: int = KV_BLOCK

    @property
    def id(self) -> str:
        parts = [self.mode, f"T{self.tokens}", f"H{self.heads}"]
        if self.mode == "fp8":
            parts.append(f"B{self.block_size}")
            if self.scale_fmt == "ue8m0":
                parts.append("ue8m0")
            if self.preshuffle:
                parts.append("preshuffle")
        parts += ["neox"] * self.is_neox + ["allq"] * self.compute_all_q_rope
        return "-".join(parts)

    @property
    def seed(self) -> int:
        """A stable seed derived from the id (not Python's salted hash)."""
        return int.from_bytes(self.id.encode(), "little") % (2**31 - 1)


PR_FP4_CONFIGS: tuple[IndexerConfig, ...] = tuple(
    IndexerConfig("fp4", t, h, neox, allq)
    for t, h, allq, neox in product((8, 32), (32, 64), (False, True), (False, True))
)
PR_FP8_CONFIGS: tuple[IndexerConfig, ...] = tuple(
    IndexerConfig("fp8", t, h, neox, allq, fmt, pre, block)
    for fmt, pre, neox, allq, t, h, block in product(
        ("ue8m0", None), (False, True), (False, True), (False, True), (1, 17, 64), (32, 64), (16, 64)
    )
)


def fresh_outputs(config: IndexerConfig, num_blocks: int, q_rows: int | None = None) -> dict[str, np.ndarray]:
    """POISON-filled output buffers for ``config`` (q_rows: rows of q_out, default T)."""
    t, h = config.tokens if q_rows is None else q_rows, config.heads
    poison = layouts.POISON
    if config.mode == "fp4":
        return dict(
            q_out=np.full((t, h, HEAD_DIM // 2), poison, dtype=np.uint8),
            weights_out=np.full((t, h, 2), poison, dtype=np.uint8).view(np.uint16)[..., 0],
            kv_cache=layouts.get("aiter-fp4-kv").new_buffer(num_blocks=num_blocks),
            q_scale_out=layouts.get("aiter-fp4-q-scale").new_buffer(num_tokens=t, num_heads=h),
            kv_cache_scale=layouts.get("aiter-fp4-kv-scale").new_buffer(num_blocks=num_blocks),
        )
    name = "aiter-fp8-kv-preshuffle" if config.preshuffle else "aiter-fp8-kv"
    return dict(
        q_out=np.full((t, h, HEAD_DIM), poison, dtype=np.uint8),
        weights_out=np.full((t, h, 4), poison, dtype=np.uint8).view(np.float32)[..., 0],
        kv_cache=layouts.get(name).new_buffer(num_blocks=num_blocks, block_size=config.block_size),
    )


def make_case(config: IndexerConfig, seed: int | None = None, *, padded_fraction: float = 0.25,
              max_pos: int = MAX_POS) -> dict[str, Any]:
    """The op's keyword arguments for ``config``: inputs from PCG64(seed) (default: the config's
    seed) and POISON-filled outputs.

    Slots: distinct, in random order over ceil(T/B) + 1 blocks, about ``padded_fraction`` of
    them -1; positions uniform with the first and last table rows planted; padded tokens get
    positions outside the table now and then (the kernel clamps those).
    """
    rng = np.random.Generator(np.random.PCG64(config.seed if seed is None else seed))
    t, h, block = config.tokens, config.heads, config.block_size
    num_blocks = -(-t // block) + 1
    slots = rng.permutation(num_blocks * block)[:t].astype(np.int64)
    slots[rng.random(t) < padded_fraction] = -1
    positions = rng.integers(0, max_pos, size=t, dtype=np.int64)
    positions[rng.random(t) < 0.2] = 0
    positions[rng.random(t) < 0.2] = max_pos - 1
    padded = slots < 0
    wild = padded & (rng.random(t) < 0.5)
    positions[wild] = rng.choice(np.array([-5, -1, max_pos, max_pos + 7], dtype=np.int64), size=int(wild.sum()))
    fp4 = config.mode == "fp4"
    args: dict[str, Any] = dict(
        q=bf16_random(rng, (t, h, HEAD_DIM), 0.5),
        weights=bf16_random(rng, (t, h)),
        k=bf16_random(rng, (t, HEAD_DIM), 0.5),
        slot_mapping=slots,
        norm_weight=(1.0 + 0.1 * rng.standard_normal(HEAD_DIM)).astype(np.float32),
        norm_bias=(0.1 * rng.standard_normal(HEAD_DIM)).astype(np.float32),
        positions=positions,
        cos_cache=bf16_bits(rng.uniform(-1.0, 1.0, (max_pos, ROPE_DIM // 2)).astype(np.float32)),
        sin_cache=bf16_bits(rng.uniform(-1.0, 1.0, (max_pos, ROPE_DIM // 2)).astype(np.float32)),
        epsilon=1e-6,
        quant_block_size=GROUP if fp4 else HEAD_DIM,
        scale_fmt=config.scale_fmt,
        weights_scale=(HEAD_DIM * h) ** -0.5,
        preshuffle=config.preshuffle,
        is_neox=config.is_neox,
        compute_all_q_rope=config.compute_all_q_rope,
    )
    args.update(fresh_outputs(config, num_blocks))
    return args


def copy_case(args: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of every array argument (inputs and output buffers)."""
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}


# K rows whose bf16 front end sits on rounding boundaries that each envelope member moves
# differently (u = 2^-23, one float32 ulp at 1.25; M = 1.25 + 2^-8, a bf16 midpoint that
# ties to 1.25):
#   Every row holds 32 pairs (p, -p), p = 0.625, and 32 pairs (q, -q), q = 1/8: the mean is 0,
#   the sum of squares 26, and epsilon = 3/64 makes the variance exactly 1/4, so rsqrt is 2
#   (one ulp below: 2 - u; above: 2 + 2u) and c*inv = 1.25 exactly (or 1.25 -+ u).
#   Dims 0, 2, .. 20 (b = 2^-8): n = M, which rounds to 1.25, unless rsqrt is one ulp above.
#   Dims 22, .. 40 (b = 2^-8 + u): n = M + u (1.2578125) unless rsqrt is one ulp below.
#   Dims 42, .. 62 (w = 1 + u, b = 2^-8 - 5u/8): fused, M + 5u/8 rounds up (1.2578125);
#     separately, fl(1.25 w) = 1.25 + u and M + 3u/8 rounds to M (1.25).
#   Dims 64..127 (w = 1, b = 0): n = +-1.25 or +-0.25, no boundary.
# Row t % 4 puts its p pairs on the first, second or third set only (the rest in dims 64..127),
# or on all three, so each member changes the row's amax (FP8) and, scaled by the group
# scale 0.25, an E2M1 tie at 5 (FP4). cos = 1 and sin = 0 at position 0 keep RoPE exact.
PROBE_EPSILON = 3.0 / 64.0
_PROBE_SETS = (range(0, 22, 2), range(22, 42, 2), range(42, 64, 2))


def _probe_row(active: list[int]) -> np.ndarray:
    """p pairs on the even dims ``active`` (and on as many pairs of dims 64.. as needed)."""
    starts = list(active) + list(range(64, 128, 2))[: 32 - len(active)]
    row = np.zeros(HEAD_DIM, dtype=np.float32)
    magnitude = np.full(HEAD_DIM // 2, 0.125, dtype=np.float32)
    magnitude[[d // 2 for d in starts]] = 0.625
    row[0::2], row[1::2] = magnitude, -magnitude
    return row


def envelope_probe_case(mode: str, tokens: int = 4, heads: int = 16, seed: int = 0) -> dict[str, Any]:
    """Keyword arguments whose K rows tell the envelope members apart (see above)."""
    config = IndexerConfig(mode, tokens, heads, True, False, "ue8m0" if mode == "fp4" else None)
    args = make_case(config, seed=seed, padded_fraction=0.0)
    u = 2.0**-23
    patterns = [list(r) for r in _PROBE_SETS] + [[d for r in _PROBE_SETS for d in r]]
    args["k"] = np.stack([bf16_bits(_probe_row(patterns[t % 4])) for t in range(tokens)])
    weight = np.ones(HEAD_DIM, dtype=np.float32)
    bias = np.zeros(HEAD_DIM, dtype=np.float32)
    bias[0:22:2] = 2.0**-8
    bias[22:42:2] = 2.0**-8 + u
    weight[42:64:2] = 1.0 + u
    bias[42:64:2] = 2.0**-8 - 5 * u / 8
    args.update(norm_weight=weight, norm_bias=bias, epsilon=PROBE_EPSILON)
    args["positions"][:] = 0
    args["cos_cache"][0] = bf16_bits(np.ones(ROPE_DIM // 2, dtype=np.float32))
    args["sin_cache"][0] = 0
    return args


# ---- boundaries planted into a case ----------------------------------------------------------

_MIDPOINTS_F32 = MIDPOINTS.astype(np.float32)


def plant_midpoints(args: dict[str, Any], rng: np.random.Generator) -> None:
    """Q dims 64..127 reach the quantizer unchanged: make a group's amax 6 * 2^e (scale 2^e
    exactly) and put E2M1 midpoints m * 2^e, and their bf16 neighbours, in it."""
    q = args["q"]
    t, h, _ = q.shape
    e = int(rng.integers(-12, 8))
    values = rng.choice(_MIDPOINTS_F32, size=(t, h, 64)) * np.float32(2.0**e)
    values *= np.where(rng.random((t, h, 64)) < 0.5, np.float32(-1), np.float32(1))
    bits = bf16_bits(values.astype(np.float32))
    bits = bits + rng.choice(np.array([0, 0, 0, 1, 0xFFFF], dtype=np.uint16), size=bits.shape)  # +-1 ulp
    bits[..., 0] = bf16_bits(np.float32([6.0 * 2.0**e]))[0]
    bits[..., 32] = bf16_bits(np.float32([-6.0 * 2.0**e]))[0]
    chosen = rng.random((t, h)) < 0.7
    q[..., 64:][chosen] = bits[chosen]


def plant_scale_boundaries(args: dict[str, Any], rng: np.random.Generator, variant: str) -> None:
    """FP8 Q rows whose amax makes amax * fl(1/max) exactly a power of two (1.75 * 2^k for
    e4m3fn, 1.875 * 2^k for fnuz), or one bf16 step above or below it."""
    q = args["q"]
    t, h, _ = q.shape
    base = 1.75 if variant == "fn" else 1.875
    k = rng.integers(-20, 10, size=(t, h))
    amax_bits = bf16_bits((base * 2.0**k).astype(np.float32)) + rng.choice(
        np.array([0, 1, 0xFFFF], dtype=np.uint16), size=(t, h))
    small = bf16_bits((rng.uniform(-1.0, 1.0, size=(t, h, 128)) * base * 2.0**k[..., None]).astype(np.float32))
    chosen = rng.random((t, h)) < 0.6
    q[chosen] = small[chosen]
    q[..., 100][chosen] = amax_bits[chosen]


def zero_rows(args: dict[str, Any], rng: np.random.Generator) -> None:
    """Zero about 15% of the Q rows and 20% of the K rows."""
    args["q"][rng.random(args["q"].shape[:2]) < 0.15] = 0
    args["k"][rng.random(args["k"].shape[0]) < 0.2] = 0
