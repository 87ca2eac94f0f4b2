"""Index maps, scatter and gather for every cache / scale layout of SPEC section 5.

    from mxgate.oracle import layouts
    kv = layouts.get("aiter-fp4-kv")
    buf = kv.new_buffer(num_blocks=4)                 # filled with POISON
    kv.scatter(buf, packed, slots=slot_mapping)       # packed: uint8 [T, 64]
    (back,) = kv.gather(buf, slots=slot_mapping)
    offset, nibble = kv.index_map(num_blocks=4)       # int64 / uint8 [256, 128]
    loc = kv.locate([1234], num_blocks=4)             # byte -> field, slot, dim, region

The same calls take torch tensors (any device; the oracle never imports torch):
    tbuf = kv.new_buffer(num_blocks=4, device="cuda")  # a uint8 tensor there
    kv.scatter(tbuf, packed_t, slots=slots_t)          # tensors on the buffer's device
    (back_t,) = kv.gather(tbuf, slots=slots_t)         # tensors there, the same bytes
    kv.index_map(num_blocks=4, device="cuda")

Layouts (names for ``get``) and their dims keywords (defaults in brackets):
  aiter-fp4-q           num_tokens, num_heads (multiple of 16), head_dim [128]
  aiter-fp4-q-scale     num_tokens, num_heads (multiple of 16), head_dim [128]
  aiter-fp4-kv          num_blocks, head_dim [128], block_size [64, the only value accepted]
  aiter-fp4-kv-scale    num_blocks, head_dim [128], block_size [64]
  aiter-fp8-kv          num_blocks, block_size, head_dim [128]
  aiter-fp8-kv-preshuffle  num_blocks, block_size (multiple of 16), head_dim [128]
  sglang-page68         num_pages, page_size [64]
  packed-row            num_rows
  sglang-page8          num_pages (64-slot AITER pages; payload buffer)
  sglang-page8-scale    num_pages (64-slot AITER pages; scale buffer)
head_dim of the AITER FP4 layouts is any multiple of 128 (k_tiles = head_dim/128), although
the op accepts only 128. The sglang layouts are fixed at head_dim 128 (64 + 4 bytes a token).
sglang's split writer with page8=True keeps AITER's two buffers and shapes but addresses each
one flat, in 8-slot pages: sglang-page8 is its payload buffer, sglang-page8-scale its scale
buffer (same shapes as aiter-fp4-kv / aiter-fp4-kv-scale, different placement).

Logical arrays (what scatter takes, gather returns, in this order), n rows each:
  aiter-fp4-q         packed uint8 [T, H, head_dim/2]
  aiter-fp4-q-scale   e8m0 uint8 [T, H, head_dim/32]
  aiter-fp4-kv        packed uint8 [n, head_dim/2]       (low nibble = even dim)
  aiter-fp4-kv-scale  e8m0 uint8 [n, head_dim/32]
  aiter-fp8-kv(-preshuffle)  data uint8 [n, head_dim] (fp8 codes), scale float32 [n]
  sglang-page68       packed uint8 [n, 64], e8m0 uint8 [n, 4]
  sglang-page8        packed uint8 [n, 64]       (low nibble = even dim)
  sglang-page8-scale  e8m0 uint8 [n, 4]
  packed-row          packed uint8 [n, 64], scale int32 [n] (e8m0 of group g in byte g, LE)

Slots: for the slot layouts, logical row i goes to slot ``slots[i]`` (default: i); rows whose
slot is < 0 are skipped; slots >= 0 must be distinct. For the two q layouts row t is token t
and ``slots`` ([T], optional) only masks: a token whose slot is < 0 is not written at all.
Dims are inferred from the buffer's shape where they can be (not num_heads of q-scale);
explicit keywords must agree with it.

Region codes: UNWRITTEN 0, DATA 1, SCALE 2, ZERO_PAD 3. No layout here leaves bytes of a full
buffer unowned; UNWRITTEN marks, in ``regions(slots=...)``, the bytes a scatter with those slots
must leave alone. All index arithmetic is int64.
"""

from __future__ import annotations

from mxgate.oracle.layouts._aiter import (
    AiterFp4Kv,
    AiterFp4KvScale,
    AiterFp4Q,
    AiterFp4QScale,
    AiterFp8Kv,
    AiterFp8KvPreshuffle,
)
from mxgate.oracle.layouts._core import (
    DATA,
    POISON,
    REGION_NAMES,
    SCALE,
    UNWRITTEN,
    ZERO_PAD,
    Field,
    IndexMap,
    Layout,
    Location,
)
from mxgate.oracle.layouts._sglang import (
    PackedRow,
    SglangPage8,
    SglangPage8Scale,
    SglangPage68,
    e8m0_to_word,
    join_packed_row,
    split_packed_row,
    word_to_e8m0,
)

from mxgate.oracle.layouts._vllm import VllmFp4IndexerK  # noqa: E402 - after _core's names

_REGISTRY: dict[str, Layout] = {
    layout.name: layout
    for layout in (AiterFp4Q(), AiterFp4QScale(), AiterFp4Kv(), AiterFp4KvScale(),
                   AiterFp8Kv(), AiterFp8KvPreshuffle(), SglangPage68(), PackedRow(),
                   SglangPage8(), SglangPage8Scale(), VllmFp4IndexerK())
}


def names() -> list[str]:
    """Every layout name, in registry order."""
    return list(_REGISTRY)


def get(name: str) -> Layout:
    """The layout called ``name``; ValueError listing the valid names otherwise."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown layout {name!r}; valid names: {', '.join(_REGISTRY)}") from None


__all__ = [
    "DATA", "POISON", "REGION_NAMES", "SCALE", "UNWRITTEN", "ZERO_PAD",
    "Field", "IndexMap", "Layout", "Location",
    "e8m0_to_word", "get", "join_packed_row", "names", "split_packed_row", "word_to_e8m0",
]
