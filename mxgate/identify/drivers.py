"""Per op: the probe pool, how the backend is called on a set of probe cases, the oracle's
reference under a profile, and how outputs become comparable units.

A *case* is one probe along axis 0 of the cases array: one float32 element (element ops), one
e8m0 code, or one block of 32 (block ops; ops taking rows of 128 bf16 get four blocks a row,
zero blocks padding the last; the indexer op carries two blocks in each Q head row,
``mxgate.identify.indexer``). Every output is cut into units per case, so ``units`` is an int64
array [cases, units per case]; a NaN-equal output compares every NaN as one unit value.

An op whose outputs also depend on things the cases cannot carry (the indexer op's K front end,
its FP8 mode, its float32 inputs) has *side probes*: fixed calls of its own, judged under the profile the cases
decided, with the side's own axes (profile fields, or the front-end envelope member) varied.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from mxgate import op_table, oracle
from mxgate.identify import probes
from mxgate.op_table import OpName
from mxgate.oracle.formats.e4m3 import SATURATE_OF_OVERFLOW
from mxgate.oracle.geometry import GROUP, HEAD_DIM, KV_BLOCK, ROW_GROUPS
from mxgate.inputs.bits import bf16_patterns
from mxgate.oracle.ops import indexer_k, quant_vllm
from mxgate.oracle.profiles import Profile

_CANONICAL_NAN = 0x7FC00000
_BLOCKS_PER_ROW = HEAD_DIM // GROUP


@dataclass(frozen=True)
class SideProbe:
    """Fixed calls of an op beside its cases, deciding ``axes`` under the cases' best profile.

    An axis is a profile field, or ``"variant"``: the indexer op's front-end envelope member
    (``oracle.ops.frontend.VARIANT_NAMES``, the op's ``variant=``), whose ``fma`` half is the
    profile field ``fma_contraction`` (listed in ``derived``)."""

    name: str
    title: str
    calls: Callable[[], list[dict[str, Any]]]  # the keyword arguments of each call
    call: Callable[[Callable[..., Any], dict[str, Any]], dict[str, Any]]  # run, args -> outputs
    reference: Callable[[Profile, dict[str, Any], str | None], dict[str, Any]]  # profile, args, variant
    units: Callable[[dict[str, Any], dict[str, Any]], np.ndarray]  # args, outputs -> int64 [rows, width]
    label: Callable[[int, int, int], tuple[str, str, str, list[str]]]  # call, row, unit -> (input, unit, kind, bits)
    axes: tuple[str, ...]
    derived: tuple[str, ...] = ()  # profile fields decided through the variant axis


@dataclass(frozen=True)
class Driver:
    op: str
    outputs: tuple[str, ...]  # output names, one per part of ``units`` (widths in ``widths``)
    widths: tuple[int, ...]  # units per case of each output
    pool: Callable[[], np.ndarray]
    call: Callable[[Callable[..., Any], np.ndarray], tuple[np.ndarray, ...]]  # run, cases -> outputs per case
    reference: Callable[[Profile, np.ndarray], tuple[np.ndarray, ...]]
    nan_equal: tuple[bool, ...]
    unit_format: tuple[str, ...]  # how a unit value prints: e2m1, byte, bf16, f32
    selective: bool = False  # send only the separating probes (a slow backend) plus a random sample
    neutral: int = 0  # the bit pattern a shrink puts in place of an element (+0)
    sides: tuple[SideProbe, ...] = ()  # fixed calls beside the cases (the indexer op)
    # the gate judges the op with judge_mx_blocks: SPEC 3 leaves the element codes of a block
    # whose scale byte is 0xFF open (units: GROUP element codes, then the scale byte)
    scale_255_open: bool = False

    @property
    def fields(self) -> tuple[str, ...]:
        """The profile fields the op table declares for this op."""
        return op_table.spec(self.op).profile_fields

    def units(self, outputs: tuple[np.ndarray, ...], cases: int) -> np.ndarray:
        """[cases, units]: uint8 where every output is bytes (codes and scale bytes: the search
        compares a quarter of the memory), else uint32 where every output is float32 bits or
        unsigned of at most 32 bits, else int64."""
        arrays = [np.asarray(out) for out in outputs]
        if all(a.dtype == np.uint8 for a in arrays):
            dtype = np.uint8
        elif all(a.dtype == np.float32 or (a.dtype.kind == "u" and a.dtype.itemsize <= 4) for a in arrays):
            dtype = np.uint32
        else:
            dtype = np.int64
        units = np.empty((cases, sum(self.widths)), dtype)
        column = 0
        for a, width, nan_equal in zip(arrays, self.widths, self.nan_equal):
            part = units[:, column:column + width]
            if a.dtype == np.float32:
                part[...] = a.view(np.uint32).reshape(cases, width)
                if nan_equal:
                    part[np.isnan(a).reshape(cases, width)] = _CANONICAL_NAN
            else:
                part[...] = a.reshape(cases, width)
            column += width
        return units

    def scale_255_elements(self, units: np.ndarray) -> np.ndarray:
        """The element units of the cases whose scale byte is 0xFF in ``units``: the codes
        SPEC 3 leaves open (none unless ``scale_255_open``)."""
        if not self.scale_255_open:
            return np.zeros(units.shape, bool)
        out = np.zeros(units.shape, bool)
        out[:, :GROUP] = (units[:, GROUP] == 0xFF)[:, None]
        return out

    def unit_name(self, index: int) -> str:
        """The output and position of unit ``index`` within a case."""
        for name, width in zip(self.outputs, self.widths):
            if index < width:
                return name if width == 1 else f"{name}[{index}]"
            index -= width
        raise IndexError(index)

    def unit_kind(self, index: int) -> str:
        for kind, width in zip(self.unit_format, self.widths):
            if index < width:
                return kind
            index -= width
        raise IndexError(index)


def show_unit(kind: str, value: int) -> str:
    if kind == "e2m1":
        return f"0x{value:x} ({float(oracle.decode_e2m1(np.uint8([value]))[0]):g})"
    if kind == "f32":
        return f"0x{value:08x} ({float(np.uint32(value).view(np.float32)):g})"
    if kind == "bf16":
        return f"0x{value:04x}"
    if kind == "e4m3fn":
        return f"0x{value:02x} ({float(oracle.decode_e4m3(np.uint8([value]), 'fn')[0]):g})"
    if kind == "count":
        return str(value)
    return f"0x{value:02x}"


def case_bits(cases: np.ndarray, i: int) -> list[str]:
    """One case's input as hex bit patterns (float32 as 8 digits, bf16 as 4, codes as 2)."""
    a = np.asarray(cases[i]).reshape(-1)
    if a.dtype == np.float32:
        return [f"0x{v:08x}" for v in a.view(np.uint32).tolist()]
    if a.dtype == np.uint16:
        return [f"0x{v:04x}" for v in a.tolist()]
    return [f"0x{v:02x}" for v in a.tolist()]


# ---- element ops ------------------------------------------------------------------------------


def _elementwise(op: str, pool, reference, fmt: str, *, nan_equal: bool = False, output: str = "codes") -> Driver:
    def call(run, cases):
        return (np.asarray(run(np.ascontiguousarray(cases))),)

    return Driver(op, (output,), (1,), pool, call, lambda p, x: (reference(p, x),), (nan_equal,), (fmt,))


def _e4m3(variant: str):
    return lambda p, x: oracle.encode_e4m3(x, variant, saturate=SATURATE_OF_OVERFLOW[p.fp8_overflow])


def _ue8m0(p: Profile, s: np.ndarray) -> np.ndarray:
    return oracle.scales.ue8m0_round(s, p.ue8m0_rounding)


# ---- block ops --------------------------------------------------------------------------------


def _mx_reference(p: Profile, blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = oracle.bf16_to_f32(blocks) if blocks.dtype == np.uint16 else blocks
    packed, e8m0 = oracle.quantize_mx(np.ascontiguousarray(x), p)
    return oracle.unpack_nibbles(packed), e8m0.reshape(-1)


def _mxfp8_reference(p: Profile, blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    codes, e8m0 = oracle.quantize_mx_e4m3fn(np.ascontiguousarray(blocks), p)
    return codes.reshape(-1, GROUP), e8m0.reshape(-1)


def _mxfp8_call(run, blocks):
    """MXFP8: (e4m3fn codes [..., N], e8m0 [..., N/32]) as per-block codes and bytes."""
    codes, e8m0 = run(np.ascontiguousarray(blocks))
    n = blocks.shape[0]
    return np.asarray(codes, np.uint8).reshape(-1, GROUP)[:n], np.asarray(e8m0, np.uint8).reshape(-1)[:n]


def _block_outputs(packed: Any, e8m0: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A backend's (packed [..., N/2], e8m0 [..., N/32]) as per-block nibbles and bytes."""
    nibbles = oracle.unpack_nibbles(np.ascontiguousarray(np.asarray(packed), dtype=np.uint8))
    return nibbles.reshape(-1, GROUP)[:n], np.asarray(e8m0, dtype=np.uint8).reshape(-1)[:n]


def _mx_call(run, blocks):
    packed, e8m0 = run(np.ascontiguousarray(blocks))
    return _block_outputs(packed, e8m0, blocks.shape[0])


def _rows(blocks: np.ndarray) -> np.ndarray:
    """bf16 blocks [n, 32] as rows [ceil(n/4), 128], zero blocks padding the last row."""
    n = blocks.shape[0]
    padded = np.zeros((-(-n // _BLOCKS_PER_ROW) * _BLOCKS_PER_ROW, GROUP), np.uint16)
    padded[:n] = blocks
    return padded.reshape(-1, HEAD_DIM)


def _indexer_call(run, blocks):
    packed, e8m0 = run(_rows(blocks))
    return _block_outputs(packed, e8m0, blocks.shape[0])


def _store_call(layout: str, split: bool):
    """A K-cache writer on rows of the blocks at slots 0..T-1 of a zeroed cache, read back
    through the oracle's layout (payload and scale)."""

    def call(run, blocks):
        rows = _rows(blocks)
        t = rows.shape[0]
        slots = np.arange(t, dtype=np.int64)
        payload = oracle.layouts.get(layout)
        dims = "num_pages" if layout in ("sglang-page68", "sglang-page8") else "num_blocks"
        per = payload.num_slots(**{dims: 1})
        count = max(1, -(-t // per))
        buffers = [payload.new_buffer(fill=0, **{dims: count})]
        if split:
            buffers.append(oracle.layouts.get(f"{layout}-scale").new_buffer(fill=0, **{dims: count}))
        result = run(rows, slots, *buffers)
        result = tuple(result) if isinstance(result, (tuple, list)) else (result,)
        if split:
            (packed,) = payload.gather(np.asarray(result[0], np.uint8), slots=slots)
            (e8m0,) = oracle.layouts.get(f"{layout}-scale").gather(np.asarray(result[1], np.uint8), slots=slots)
        else:
            packed, e8m0 = payload.gather(np.asarray(result[0], np.uint8), slots=slots)
        return _block_outputs(packed, e8m0, blocks.shape[0])

    return call


def _paged_kv_call(run, blocks):
    """AITER's ``create_paged_preshuffle_kv_fp4`` on one batch of the blocks' rows over blocks
    0..n-1 of its paged cache (zero rows padding the last), read back at slots 0..T-1 through
    the ``aiter-fp4-kv`` layouts (its dense copies hold the same codes)."""
    rows = _rows(blocks)
    n = -(-rows.shape[0] // KV_BLOCK)
    bits = np.zeros((1, n * KV_BLOCK, HEAD_DIM), np.uint16)
    bits[0, :rows.shape[0]] = rows
    cache, scale = run(bits, KV_BLOCK, n, np.arange(n, dtype=np.int32).reshape(1, n))[:2]
    slots = np.arange(rows.shape[0], dtype=np.int64)
    (packed,) = oracle.layouts.get("aiter-fp4-kv").gather(np.asarray(cache, np.uint8), slots=slots)
    (e8m0,) = oracle.layouts.get("aiter-fp4-kv-scale").gather(np.asarray(scale, np.uint8), slots=slots)
    return _block_outputs(packed, e8m0, blocks.shape[0])


# ---- vLLM's quantizer kernels (references: mxgate.oracle.ops.quant_vllm) ---------------------
#
# Both kernels run their front end (identity RoPE, and for K an identity RMSNorm) before the
# quantizer, which can turn a -0.0 into +0.0 (-0 - (-x * 0) = +0): the reference is the oracle's
# model of the kernel itself, not quantize_mx.

_VLLM_K = "vllm-fp4-indexer-k"


def _vllm_q_inputs(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Blocks as Q rows [T, 1, 128] (one head a token) and weights 1."""
    rows = _rows(blocks)[:, None, :]
    return rows, np.ones(rows.shape[:2], np.float32)


def _vllm_q_call(run, blocks):
    rows, weights = _vllm_q_inputs(blocks)
    packed, e8m0, _ = run(rows, weights, 1.0, 1.0)  # weights_out reads no profile field
    return _block_outputs(packed, e8m0, blocks.shape[0])


def _vllm_q_reference(p: Profile, blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows, weights = _vllm_q_inputs(blocks)
    packed, e8m0, _ = quant_vllm.indexer_q_mxfp4(rows, weights, 1.0, 1.0, profile_=p)
    return _block_outputs(packed, e8m0, blocks.shape[0])


def _vllm_k_reference(p: Profile, blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The K insert's oracle on the rows of the blocks at slots 0..T-1 of a zeroed cache, read
    back as the driver's call reads the kernel's (``_store_call``)."""
    rows = _rows(blocks)
    slots = np.arange(rows.shape[0], dtype=np.int64)
    layout = oracle.layouts.get(_VLLM_K)
    cache = layout.new_buffer(fill=0, num_blocks=max(1, -(-rows.shape[0] // layout.num_slots(num_blocks=1))))
    packed, e8m0 = layout.gather(quant_vllm.k_insert_mxfp4(rows, slots, cache, profile_=p), slots=slots)
    return _block_outputs(packed, e8m0, blocks.shape[0])


# ---- AITER's FP8 K cache writer (reference: mxgate.oracle.ops.indexer_k) ----------------------

_FP8_KV, _FP8_KV_BLOCK = "aiter-fp8-kv", 64


def _fp8_k_rows() -> np.ndarray:
    """bf16 K rows [n, 128]: the indexer op's FP8-mode rows (amax near both e4m3 maxima at every
    exponent; Inf, zero and tiny rows; seeded random rows), then every bf16 pattern that is not
    NaN, 128 to a row, in magnitude order (a row's values lie near its amax, so every e4m3 code
    and midpoint is met under some scale) and in a seeded order. No row holds a NaN: its scale
    is NaN and the sign of its codes' NaN is whichever torch's log2 and pow give (AITER's
    run_torch gives 0xFF or 0x7F with the tensor's length), not a rule."""
    from mxgate.identify import indexer  # it builds on Driver above

    patterns = (bf16_patterns() >> np.uint32(16)).astype(np.uint16)
    finite = patterns[(patterns & 0x7FFF) <= 0x7F80]
    by_magnitude = finite[np.argsort(finite & 0x7FFF, kind="stable")]
    shuffled = np.random.Generator(np.random.PCG64(probes.SEED + 9)).permutation(finite)
    whole = [a[: a.size // HEAD_DIM * HEAD_DIM].reshape(-1, HEAD_DIM) for a in (by_magnitude, shuffled)]
    rows = np.concatenate([indexer.fp8_rows()] + whole)
    return rows[~(((rows & 0x7FFF) > 0x7F80).any(axis=1))]


def _fp8_k_cache(rows: int) -> tuple[np.ndarray, np.ndarray]:
    """A zeroed cache for ``rows`` tokens at slots 0..rows-1."""
    blocks = max(1, -(-rows // _FP8_KV_BLOCK))
    return oracle.layouts.get(_FP8_KV).new_buffer(fill=0, num_blocks=blocks, block_size=_FP8_KV_BLOCK), \
        np.arange(rows, dtype=np.int64)


def _fp8_k_units(cache: np.ndarray, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    codes, scale = oracle.layouts.get(_FP8_KV).gather(np.asarray(cache, np.uint8), slots=slots,
                                                       num_blocks=cache.shape[0], block_size=_FP8_KV_BLOCK)
    return np.asarray(codes, np.uint8), np.asarray(scale, np.float32)


def _fp8_k_call(run, rows):
    """The planar cache (preshuffle=False, quant_block_size 128, scale_fmt 'ue8m0'), read back
    through the ``aiter-fp8-kv`` layout: each row's 128 codes and its float32 scale."""
    cache, slots = _fp8_k_cache(rows.shape[0])
    return _fp8_k_units(run(np.ascontiguousarray(rows), cache, slots, HEAD_DIM, "ue8m0"), slots)


def _fp8_k_reference(p: Profile, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    cache, slots = _fp8_k_cache(rows.shape[0])
    return _fp8_k_units(indexer_k.indexer_k_quant_and_cache(rows, cache, slots, profile=p), slots)


# ---- layout readers ---------------------------------------------------------------------------

_PAGE68 = "sglang-page68"


def _page68_cache(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows [n, 68] (64 packed bytes, 4 e8m0 bytes) scattered into a POISON-filled page68 cache
    at seeded distinct slots of a pool one page larger than they need. -> (cache, slots)."""
    layout = oracle.layouts.get(_PAGE68)
    n = rows.shape[0]
    pages = -(-n // layout.num_slots(num_pages=1)) + 1
    cache = layout.new_buffer(num_pages=pages)
    rng = np.random.Generator(np.random.PCG64(probes.SEED + 2))
    slots = rng.permutation(layout.num_slots(num_pages=pages))[:n].astype(np.int64)
    layout.scatter(cache, np.ascontiguousarray(rows[:, :HEAD_DIM // 2]), np.ascontiguousarray(rows[:, HEAD_DIM // 2:]),
                   slots=slots)
    return cache, slots


def _page68_gather_call(run, rows):
    cache, slots = _page68_cache(rows)
    packed, e8m0 = run(cache, slots)
    return np.asarray(packed, np.uint8).reshape(rows.shape[0], -1), np.asarray(e8m0, np.uint8).reshape(rows.shape[0], -1)


def _page68_gather_reference(p: Profile, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The oracle's reading of the same cache (a reader reads no profile field)."""
    cache, slots = _page68_cache(rows)
    return oracle.layouts.get(_PAGE68).gather(cache, slots=slots)


_Q_SCALE = "aiter-fp4-q-scale"
_Q_SCALE_HEADS = 16  # one token's 16 heads x 4 scale bytes a case


def _q_scale_call(run, rows):
    """AITER's ``dsv4_shuffle_scale`` on tokens [n, 16, 4] (a case's 64 bytes), read back
    through the ``aiter-fp4-q-scale`` layout."""
    out = run(np.ascontiguousarray(rows.reshape(-1, _Q_SCALE_HEADS, ROW_GROUPS)))
    (scale,) = oracle.layouts.get(_Q_SCALE).gather(np.asarray(out, np.uint8), num_heads=_Q_SCALE_HEADS)
    return (np.asarray(scale, np.uint8).reshape(rows.shape[0], -1),)


def _q_scale_reference(p: Profile, rows: np.ndarray) -> tuple[np.ndarray]:
    """The oracle's layout, scattered and read back (a layout reads no profile field)."""
    layout = oracle.layouts.get(_Q_SCALE)
    buffer = layout.new_buffer(fill=0, num_tokens=rows.shape[0], num_heads=_Q_SCALE_HEADS)
    layout.scatter(buffer, rows.reshape(-1, _Q_SCALE_HEADS, ROW_GROUPS), num_heads=_Q_SCALE_HEADS)
    (scale,) = layout.gather(buffer, num_heads=_Q_SCALE_HEADS)
    return (np.asarray(scale, np.uint8).reshape(rows.shape[0], -1),)


_KV, _KV_SCALE = "aiter-fp4-kv", "aiter-fp4-kv-scale"


def _kv_slots(rows: np.ndarray) -> tuple[np.ndarray, int]:
    """Seeded distinct slots for the rows in a pool of aiter-fp4-kv blocks one block larger
    than they need. -> (slots, num_blocks)."""
    blocks = -(-rows.shape[0] // KV_BLOCK) + 1
    rng = np.random.Generator(np.random.PCG64(probes.SEED + 3))
    return rng.permutation(blocks * KV_BLOCK)[:rows.shape[0]].astype(np.int64), blocks


def _kv_read(cache: Any, scale: Any, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    (packed,) = oracle.layouts.get(_KV).gather(np.asarray(cache, np.uint8), slots=slots)
    (e8m0,) = oracle.layouts.get(_KV_SCALE).gather(np.asarray(scale, np.uint8), slots=slots)
    return np.asarray(packed, np.uint8).reshape(slots.size, -1), np.asarray(e8m0, np.uint8).reshape(slots.size, -1)


def _kv_layout_call(run, rows):
    """AITER's ``kv_fp4_preshuffle_layout`` on dense rows (a case: 64 packed bytes, 4 e8m0 bytes)
    at seeded slots, read back through the ``aiter-fp4-kv`` layouts."""
    slots, blocks = _kv_slots(rows)
    cache, scale = run(np.ascontiguousarray(rows[:, :HEAD_DIM // 2]), np.ascontiguousarray(rows[:, HEAD_DIM // 2:]),
                       KV_BLOCK, slots, blocks)[:2]
    return _kv_read(cache, scale, slots)


def _kv_layout_reference(p: Profile, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The oracle's layouts, scattered and read back (a layout reads no profile field)."""
    slots, blocks = _kv_slots(rows)
    cache = oracle.layouts.get(_KV).new_buffer(fill=0, num_blocks=blocks)
    scale = oracle.layouts.get(_KV_SCALE).new_buffer(fill=0, num_blocks=blocks)
    oracle.layouts.get(_KV).scatter(cache, np.ascontiguousarray(rows[:, :HEAD_DIM // 2]), slots=slots)
    oracle.layouts.get(_KV_SCALE).scatter(scale, np.ascontiguousarray(rows[:, HEAD_DIM // 2:]), slots=slots)
    return _kv_read(cache, scale, slots)


# ---- sglang's index_k_rope_pack -----------------------------------------------------------------
#
# RoPE on the last rope_dim dims, a fake FP4 quantization (RCEIL of amax * fl(1/6), floor 6*2^-126,
# ties to even: gfx950's rules) dequantized to bf16, then the indexer pack under the op's profile.
# Probed with rope_dim 0 (no rotation), so the pack's fields are what the bytes decide.

_FAKE_QUANT = "gfx950"


def _rope_pack_rows(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """bf16 rows [T, 128] of the blocks and freqs (one identity row per token, rope_dim 0)."""
    rows = _rows(blocks)
    return rows, np.ones((rows.shape[0], 0), np.complex64)


def _rope_pack_call(run, blocks):
    rows, freqs = _rope_pack_rows(blocks)
    packed, e8m0 = run(rows, freqs, 0)
    return _block_outputs(packed, e8m0, blocks.shape[0])


def _rope_pack_reference(p: Profile, blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows, _ = _rope_pack_rows(blocks)
    fake = oracle.dequantize_mx(*oracle.quantize_mx(oracle.bf16_to_f32(rows), _FAKE_QUANT), _FAKE_QUANT)
    packed, e8m0 = oracle.quantize_mx(fake, p)
    return _block_outputs(packed, e8m0, blocks.shape[0])


def _blocks(op: str, pool, call, *, selective: bool, scale_255_open: bool = False) -> Driver:
    return Driver(op, ("nibbles", "e8m0"), (GROUP, 1), pool, call, _mx_reference, (False, False), ("e2m1", "byte"),
                  selective=selective, scale_255_open=scale_255_open)


def _mx_like_ops() -> list[str]:
    """Ops the op table declares as x: float32[..., N] -> (packed, e8m0) under quantize_mx."""
    return [s.name for s in op_table.TABLE.values()
            if s.reference == "mxgate.oracle:quantize_mx" and s.positional == ("x",)]


# ops the op table gives no oracle function that the gate judges as quantize_mx under their
# profile (conformance.test_aiter_conformance: judge_mx_quantize); the fused Triton ones run
# under the interpreter, slowly: only the separating probes go to them
_MX_JUDGED = (OpName.AITER_REF_QUANT_MXFP4_ROUND_DOWN, OpName.AITER_REF_QUANT_MXFP4_EVEN,
              OpName.AITER_REF_QUANT_MXFP4_CEIL, OpName.AITER_FP4_QUANT_E2M1_WITH_E8M0, OpName.AITER_FP4_ACT_QUANT)
_MX_JUDGED_SLOW = (OpName.AITER_FUSED_FLATTEN_MXFP4_QUANT,)


def _scale_ops() -> list[str]:
    return [s.name for s in op_table.TABLE.values()
            if s.reference == "mxgate.oracle:e8m0_scale" and s.positional == ("amax",)]


def _table() -> dict[str, Driver]:
    table: list[Driver] = [
        _elementwise(OpName.E2M1_ENCODE, probes.e2m1_elements, lambda p, x: oracle.encode_e2m1(x, p), "e2m1"),
        _elementwise(OpName.E4M3FN_ENCODE, lambda: probes.e4m3_elements("fn"), _e4m3("fn"), "byte"),
        _elementwise(OpName.E4M3FNUZ_ENCODE, lambda: probes.e4m3_elements("fnuz"), _e4m3("fnuz"), "byte"),
        _elementwise(OpName.BF16_ROUND, probes.bf16_elements, lambda p, x: oracle.bf16_bits(x, p), "bf16",
                     output="bits"),
        _elementwise(OpName.E8M0_DECODE, probes.e8m0_codes, lambda p, c: oracle.decode_e8m0(c, p), "f32",
                     nan_equal=True, output="values"),
        _elementwise(OpName.UE8M0_ROUND, probes.ue8m0_scales, _ue8m0, "f32", nan_equal=True, output="scale"),
        # the decoders read no profile field: every profile explains a backend that agrees
        _elementwise(OpName.E2M1_DECODE, probes.e2m1_codes, lambda p, c: oracle.decode_e2m1(c), "f32",
                     nan_equal=True, output="values"),
        _elementwise(OpName.E4M3FN_DECODE, probes.e8m0_codes, lambda p, c: oracle.decode_e4m3(c, "fn"), "f32",
                     nan_equal=True, output="values"),
        _elementwise(OpName.E4M3FNUZ_DECODE, probes.e8m0_codes, lambda p, c: oracle.decode_e4m3(c, "fnuz"), "f32",
                     nan_equal=True, output="values"),
        Driver(OpName.SGLANG_PAGE68_GATHER, ("packed", "e8m0"), (HEAD_DIM // 2, HEAD_DIM // GROUP), probes.page68_rows,
               _page68_gather_call, _page68_gather_reference, (False, False), ("byte", "byte")),
        Driver(OpName.AITER_DSV4_SHUFFLE_SCALE, ("scale",), (_Q_SCALE_HEADS * ROW_GROUPS,),
               lambda: probes.byte_rows(_Q_SCALE_HEADS * ROW_GROUPS), _q_scale_call, _q_scale_reference, (False,),
               ("byte",)),
    ]
    table.append(Driver(OpName.AITER_KV_FP4_PRESHUFFLE_LAYOUT, ("packed", "e8m0"), (HEAD_DIM // 2, HEAD_DIM // GROUP),
                        probes.page68_rows, _kv_layout_call, _kv_layout_reference, (False, False), ("byte", "byte")))
    table += [_elementwise(op, probes.amax_values, lambda p, a: oracle.e8m0_scale(a, p), "byte", output="e8m0")
              for op in _scale_ops()]
    # the gate judges these (and MXFP8 below) with judge_mx_blocks: a 0xFF-scale block's codes are open
    table += [_blocks(op, probes.mx_blocks, _mx_call, selective=False, scale_255_open=True)
              for op in _mx_like_ops() + list(_MX_JUDGED)]
    table += [_blocks(op, probes.mx_blocks, _mx_call, selective=True, scale_255_open=True) for op in _MX_JUDGED_SLOW]
    # MXFP8: mx.quantize's blocks (their amax values cover 448 = 1.75 * 2^8's edges too); the
    # elements saturate by the op's rule, so the fields read are the scale's
    table.append(Driver(OpName.MX_QUANTIZE_E4M3FN, ("codes", "e8m0"), (GROUP, 1), probes.mx_blocks, _mxfp8_call,
                        _mxfp8_reference, (False, False), ("e4m3fn", "byte"), scale_255_open=True))
    # its identity RMSNorm is exact only inside the contract (boundaries.in_rms_contract)
    table.append(_blocks(OpName.AITER_FUSED_RMS_MXFP4_QUANT, probes.rms_blocks, _mx_call, selective=True,
                         scale_255_open=True))
    for op in (OpName.FP4_INDEXER_QUANTIZE, OpName.FP4_INDEXER_QUANTIZE_ROWS):
        table.append(_blocks(op, probes.bf16_blocks, _indexer_call, selective=True))
    table.append(_blocks(OpName.SGLANG_PAGE68_STORE, probes.bf16_blocks, _store_call("sglang-page68", False),
                         selective=True))
    table.append(_blocks(OpName.AITER_FP4_KV_STORE, probes.bf16_blocks, _store_call("aiter-fp4-kv", True),
                         selective=True))
    table.append(_blocks(OpName.AITER_CREATE_PAGED_PRESHUFFLE_KV_FP4, probes.bf16_blocks, _paged_kv_call,
                         selective=False))
    table.append(_blocks(OpName.SGLANG_PAGE8_STORE, probes.bf16_blocks, _store_call("sglang-page8", True),
                         selective=True))
    # finite blocks only: the fake quantization's NaN and Inf (Triton's min, max and rint) are not modelled
    table.append(Driver(OpName.SGLANG_INDEX_K_ROPE_PACK, ("nibbles", "e8m0"), (GROUP, 1), probes.bf16_finite_blocks,
                        _rope_pack_call, _rope_pack_reference, (False, False), ("e2m1", "byte")))
    table.append(Driver(OpName.VLLM_INDEXER_Q_MXFP4, ("nibbles", "e8m0"), (GROUP, 1), probes.bf16_normal_blocks, _vllm_q_call,
                        _vllm_q_reference, (False, False), ("e2m1", "byte"), selective=True))
    table.append(Driver(OpName.VLLM_FP4_INDEXER_K_STORE, ("nibbles", "e8m0"), (GROUP, 1), probes.bf16_k_domain_blocks,
                        _store_call(_VLLM_K, False), _vllm_k_reference, (False, False), ("e2m1", "byte"),
                        selective=True))
    # the scale's NaN payload (a zero or NaN row's 0/0) is not a profile matter: NaN-equal
    table.append(Driver(OpName.AITER_INDEXER_K_QUANT_AND_CACHE, ("codes", "scale"), (HEAD_DIM, 1), _fp8_k_rows,
                        _fp8_k_call, _fp8_k_reference, (False, True), ("byte", "f32")))
    from mxgate.identify import indexer  # it builds on Driver and SideProbe above

    table.append(indexer.driver())
    return {d.op: d for d in table}


DRIVERS: dict[str, Driver] = _table()

