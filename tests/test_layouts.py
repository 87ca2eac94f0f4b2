"""Layouts of SPEC section 5: index maps are bijections onto the documented bytes, scatter ->
gather is the identity, untouched bytes keep the poison, SPEC 5's literal examples hold, and
mismatched layouts (BUGS 21, 25, 27, 31) are caught."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mxgate.inputs.strategies import slot_sets, token_masks
from mxgate.oracle import layouts
from mxgate.oracle.layouts import DATA, POISON, SCALE, UNWRITTEN, ZERO_PAD

NAMES = ["aiter-fp4-q", "aiter-fp4-q-scale", "aiter-fp4-kv", "aiter-fp4-kv-scale",
         "aiter-fp8-kv", "aiter-fp8-kv-preshuffle", "sglang-page68", "packed-row",
         "sglang-page8", "sglang-page8-scale", "vllm-fp4-indexer-k"]

# (layout, dims): several shapes per layout, including QS_PAD padding (heads 16, 32, 48, 80)
# and k_tiles > 1 (head_dim 256, 384: BUGS 27, packed-K > 1).
CASES = [
    ("aiter-fp4-q", dict(num_tokens=3, num_heads=16)),
    ("aiter-fp4-q", dict(num_tokens=2, num_heads=48, head_dim=256)),
    *[("aiter-fp4-q-scale", dict(num_tokens=3, num_heads=h)) for h in (16, 32, 48, 64, 128)],
    ("aiter-fp4-q-scale", dict(num_tokens=2, num_heads=80, head_dim=256)),
    ("aiter-fp4-q-scale", dict(num_tokens=2, num_heads=48, head_dim=384)),
    *[("aiter-fp4-kv", dict(num_blocks=3, head_dim=hd)) for hd in (128, 256, 384)],
    *[("aiter-fp4-kv-scale", dict(num_blocks=3, head_dim=hd)) for hd in (128, 256, 384)],
    ("aiter-fp8-kv", dict(num_blocks=3, block_size=1)),
    ("aiter-fp8-kv", dict(num_blocks=2, block_size=64)),
    ("aiter-fp8-kv", dict(num_blocks=2, block_size=5, head_dim=40)),
    ("aiter-fp8-kv-preshuffle", dict(num_blocks=2, block_size=16)),
    ("aiter-fp8-kv-preshuffle", dict(num_blocks=2, block_size=64)),
    ("aiter-fp8-kv-preshuffle", dict(num_blocks=1, block_size=32, head_dim=64)),
    ("sglang-page68", dict(num_pages=3, page_size=64)),
    ("sglang-page68", dict(num_pages=2, page_size=1)),
    ("sglang-page68", dict(num_pages=2, page_size=7)),
    ("packed-row", dict(num_rows=1)),
    ("packed-row", dict(num_rows=9)),
    ("sglang-page8", dict(num_pages=1)),
    ("sglang-page8", dict(num_pages=3)),
    ("sglang-page8-scale", dict(num_pages=1)),
    ("sglang-page8-scale", dict(num_pages=3)),
]
CASE_IDS = [f"{n}-" + "-".join(f"{k}{v}" for k, v in d.items()) for n, d in CASES]

# one small case per layout for the randomised tests
SMALL = {
    "aiter-fp4-q": dict(num_tokens=6, num_heads=16),
    "aiter-fp4-q-scale": dict(num_tokens=6, num_heads=48, head_dim=256),
    "aiter-fp4-kv": dict(num_blocks=3, head_dim=256),
    "aiter-fp4-kv-scale": dict(num_blocks=3, head_dim=256),
    "aiter-fp8-kv": dict(num_blocks=3, block_size=16),
    "aiter-fp8-kv-preshuffle": dict(num_blocks=3, block_size=32),
    "sglang-page68": dict(num_pages=3, page_size=16),
    "packed-row": dict(num_rows=40),
    "sglang-page8": dict(num_pages=3),
    "sglang-page8-scale": dict(num_pages=3),
    "vllm-fp4-indexer-k": dict(num_blocks=3, block_size=16, page_bytes=16 * 132),
}


# ---- helpers ---------------------------------------------------------------------------------


def random_logical(layout: layouts.Layout, n: int, rng: np.random.Generator,
                   **dims: int) -> list[np.ndarray]:
    """n rows of random logical data for every field of ``layout``."""
    d = layout.dims(**dims)
    out = []
    for f in layout.fields:
        row = layout._row_shape(f, d)
        if f.dtype == np.uint8:
            out.append(rng.integers(0, 256, (n,) + row, dtype=np.uint8))
        elif f.dtype == np.float32:
            # any 32-bit pattern, NaNs included: a scale must travel bit for bit
            out.append(rng.integers(0, 2**32, (n,) + row, dtype=np.uint64)
                       .astype(np.uint32).view(np.float32))
        else:
            out.append(rng.integers(-2**31, 2**31, (n,) + row, dtype=np.int64).astype(np.int32))
    return out


def word_bytes(a: np.ndarray) -> np.ndarray:
    """The little-endian bytes of a 4-byte logical array, trailing axis of 4."""
    return np.ascontiguousarray(a).view(np.uint8).reshape(a.shape + (4,))


def reference_scatter(layout: layouts.Layout, buf: np.ndarray, arrays: list[np.ndarray],
                      slots: np.ndarray, **dims: int) -> None:
    """Scatter through the SPEC 5 index map only (no strided views): the test oracle."""
    flat = buf.reshape(-1)
    keep = slots >= 0
    rows = np.flatnonzero(keep) if layout.slot_rule == "row_mask" else slots[keep]
    for f, a in zip(layout.fields, arrays):
        off = layout.index_map(f.name, **dims).offset[rows]
        src = a[keep]
        if f.unit == "nibble":
            flat[off[..., 0::2]] = src  # both nibbles of packed byte k share a byte
        elif f.unit == "byte":
            flat[off] = src
        else:
            flat[off[..., None] + np.arange(4)] = word_bytes(src)
    for p in layout.pads:
        flat[layout.index_map(p.name, **dims).offset[rows]] = 0


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and bool(
        np.array_equal(np.ascontiguousarray(a).view(np.uint8),
                       np.ascontiguousarray(b).view(np.uint8)))


# ---- registry --------------------------------------------------------------------------------


def test_names_and_get() -> None:
    assert layouts.names() == NAMES
    for name in NAMES:
        layout = layouts.get(name)
        assert layout.name == name
        assert layout.unit in ("nibble", "byte", "f32le", "i32le")


def test_unknown_name_lists_valid_names() -> None:
    with pytest.raises(ValueError, match="aiter-fp4-kv-scale.*sglang-page8"):
        layouts.get("aiter-fp4-kv-swizzled")
    with pytest.raises(TypeError):
        layouts.get(3)  # type: ignore[arg-type]


def test_logical_axes_and_units() -> None:
    assert layouts.get("aiter-fp4-kv").logical_axes == ("slot", "dim")
    assert layouts.get("aiter-fp4-kv").unit == "nibble"
    assert layouts.get("aiter-fp4-kv-scale").logical_axes == ("slot", "group")
    assert layouts.get("aiter-fp4-kv-scale").unit == "byte"
    assert layouts.get("aiter-fp4-q").logical_axes == ("token", "head", "dim")
    assert layouts.get("aiter-fp4-q-scale").logical_axes == ("token", "head", "group")
    fp8 = layouts.get("aiter-fp8-kv")
    assert [(f.name, f.unit, f.role) for f in fp8.fields] == [("data", "byte", DATA),
                                                              ("scale", "f32le", SCALE)]
    assert layouts.get("packed-row").fields[1].unit == "i32le"
    # page8 is two buffers, like AITER's: packed codes, then e8m0 bytes
    page8, page8_scale = layouts.get("sglang-page8"), layouts.get("sglang-page8-scale")
    assert [(f.name, f.unit, f.role) for f in page8.fields] == [("packed", "nibble", DATA)]
    assert [(f.name, f.unit, f.role) for f in page8_scale.fields] == [("e8m0", "byte", SCALE)]
    assert page8.buffer_shape(num_pages=5) == (5, 1, 4, 64, 16)
    assert page8_scale.buffer_shape(num_pages=5) == (5, 1, 4, 64)


# ---- bijection and coverage ------------------------------------------------------------------


@pytest.mark.parametrize(("name", "dims"), CASES, ids=CASE_IDS)
def test_index_map_is_a_bijection_onto_the_documented_bytes(name: str, dims: dict) -> None:
    layout = layouts.get(name)
    shape = layout.buffer_shape(**dims)
    nbytes = int(np.prod(shape))
    owner = np.full(nbytes, -1)
    for k, f in enumerate(layout.fields + layout.pads):
        offset, nibble = layout.index_map(f.name, **dims)
        assert offset.dtype == np.int64
        if f.unit == "nibble":
            # two dims per byte: (byte, nibble) pairs are all distinct and fill whole bytes
            assert nibble is not None and set(np.unique(nibble)) <= {0, 1}
            assert np.array_equal(offset[..., 0::2], offset[..., 1::2])
            assert np.array_equal(nibble[..., 0::2], np.zeros_like(nibble[..., 0::2]))
            assert np.unique(offset * 2 + nibble).size == offset.size
            used = offset[..., 0::2].ravel()
        elif f.unit == "byte":
            assert nibble is None
            used = offset.ravel()
        else:
            assert nibble is None and np.all(offset % 4 == 0)
            used = (offset[..., None] + np.arange(4)).ravel()
        assert np.all((used >= 0) & (used < nbytes))
        assert np.unique(used).size == used.size, f"{f.name} maps two elements to one byte"
        assert np.all(owner[used] == -1), f"{f.name} overlaps another field"
        owner[used] = k
    # no layout leaves a byte of a full buffer unowned
    assert np.all(owner >= 0)
    regions = layout.regions(**dims).ravel()
    roles = np.array([f.role for f in layout.fields + layout.pads])
    assert np.array_equal(regions, roles[owner])


@pytest.mark.parametrize(("name", "dims"), CASES, ids=CASE_IDS)
def test_scatter_writes_exactly_where_the_index_map_says(name: str, dims: dict) -> None:
    layout = layouts.get(name)
    rng = np.random.Generator(np.random.PCG64(7))
    n = layout.num_slots(**dims)
    arrays = random_logical(layout, n, rng, **dims)
    buf = layout.new_buffer(**dims)
    layout.scatter(buf, *arrays, **dims)
    ref = layout.new_buffer(**dims)
    reference_scatter(layout, ref, arrays, np.arange(n), **dims)
    assert np.array_equal(buf, ref)
    flat = buf.reshape(-1)
    for f, a in zip(layout.fields, arrays):
        offset, nibble = layout.index_map(f.name, **dims)
        if f.unit == "nibble":
            logical = np.stack([a & 0xF, a >> 4], axis=-1).reshape(offset.shape)
            assert np.array_equal((flat[offset] >> (4 * nibble)) & 0xF, logical)


@pytest.mark.parametrize(("name", "dims"), CASES, ids=CASE_IDS)
def test_locate_inverts_the_index_map(name: str, dims: dict) -> None:
    layout = layouts.get(name)
    for f in layout.fields + layout.pads:
        offset, nibble = layout.index_map(f.name, **dims)
        loc = layout.locate(offset, nibble, **dims)
        assert np.all(loc.field == f.name)
        assert np.all(loc.region == f.role)
        grid = np.indices(offset.shape)
        for k, axis in enumerate(f.axes):
            start = layout._grid(f.name, layout.dims(**dims))[k][0]
            assert np.array_equal(loc.coords[axis], grid[k] + start)
        if f.unit in ("f32le", "i32le"):
            for b in range(4):
                assert np.all(layout.locate(offset + b, **dims).word_byte == b)
    every = np.arange(int(np.prod(layout.buffer_shape(**dims))))
    assert np.array_equal(layout.locate(every, **dims).region,
                          layout.regions(**dims).ravel())


# ---- SPEC section 5 literal examples (offsets computed by hand) ------------------------------


def _one(layout: str, *coords: int, field: str | None = None, **dims: int) -> tuple[int, int]:
    im = layouts.get(layout).offset_of(*(np.array(c) for c in coords), field=field, **dims)
    return int(im.offset), (-1 if im.nibble is None else int(im.nibble))


def test_spec_aiter_fp4_kv_examples() -> None:
    # slot 17 of block 3 = 3*64 + 17 = 209; group 2 starts at dim 64.
    # [b, d//128, (d%128)//32, p, (d%32)//2] = [3, 0, 2, 17, 0] of [nb, 1, 4, 64, 16]
    # flat = (((3*1 + 0)*4 + 2)*64 + 17)*16 + 0 = (14*64 + 17)*16 = 913*16 = 14608
    assert _one("aiter-fp4-kv", 209, 64, num_blocks=4) == (14608, 0)
    # dim 77: (77%32)//2 = 13//2 = 6, nibble 77 & 1 = 1 -> 14608 + 6 = 14614
    assert _one("aiter-fp4-kv", 209, 77, num_blocks=4) == (14614, 1)
    # head_dim 256 (k_tiles 2), dim 200: [3, 200//128=1, 72//32=2, 17, 8//2=4]
    # flat = (((3*2 + 1)*4 + 2)*64 + 17)*16 + 4 = (30*64 + 17)*16 + 4 = 1937*16 + 4 = 30996
    assert _one("aiter-fp4-kv", 209, 200, num_blocks=4, head_dim=256) == (30996, 0)
    buf = layouts.get("aiter-fp4-kv").new_buffer(num_blocks=4)
    packed = np.zeros((1, 64), np.uint8)
    packed[0, 38] = 0x7C  # dims 76 (low, 0xC) and 77 (high, 0x7)
    layouts.get("aiter-fp4-kv").scatter(buf, packed, slots=np.array([209]))
    assert buf[3, 0, 2, 17, 6] == 0x7C and buf.reshape(-1)[14614] == 0x7C


def test_spec_aiter_fp4_kv_scale_interleave() -> None:
    # slot 17 of block 3, group 2: [b, g//4, g%4, (p%16)*4 + p//16] = [3, 0, 2, 1*4 + 1 = 5]
    # flat = ((3*1 + 0)*4 + 2)*64 + 5 = 14*64 + 5 = 901
    assert _one("aiter-fp4-kv-scale", 209, 2, num_blocks=4) == (901, -1)
    # position p -> (p%16)*4 + p//16: p=1 -> 4, p=16 -> 1, p=63 -> 15*4 + 3 = 63
    for p, q in ((0, 0), (1, 4), (16, 1), (63, 63)):
        assert _one("aiter-fp4-kv-scale", p, 0, num_blocks=1) == (q, -1)
    # head_dim 256, group 6 of slot 209: [3, 1, 2, 5] -> ((3*2 + 1)*4 + 2)*64 + 5 = 1925
    assert _one("aiter-fp4-kv-scale", 209, 6, num_blocks=4, head_dim=256) == (1925, -1)


def test_spec_aiter_fp4_q_and_q_scale_examples() -> None:
    # q_out [T, 32, 64]: token 2, head 3, dim 77 -> byte (2*32 + 3)*64 + 77//2 = 4288 + 38
    assert _one("aiter-fp4-q", 2, 3, 77, num_tokens=4, num_heads=32) == (4326, 1)
    # H = 48: QS_PAD = round_up(48/16 = 3, 4) = 4. token 5, head 37, group 2:
    # [t, g//4, g%4, h%16, h//16] = [5, 0, 2, 5, 2] of [T, 1, 4, 16, 4]
    # flat = (((5*1 + 0)*4 + 2)*16 + 5)*4 + 2 = (22*16 + 5)*4 + 2 = 357*4 + 2 = 1430
    assert _one("aiter-fp4-q-scale", 5, 37, 2, num_tokens=6, num_heads=48) == (1430, -1)
    layout = layouts.get("aiter-fp4-q-scale")
    for heads, qs_pad in ((16, 4), (32, 4), (48, 4), (64, 4), (80, 8), (128, 8)):
        assert layout.buffer_shape(num_tokens=1, num_heads=heads) == (1, 1, 4, 16, qs_pad)


def test_spec_aiter_fp8_examples() -> None:
    # B = 64, slot 209: b = 3, o = 17, base = 3*64*132 = 25344
    # data dim 100: 25344 + 17*128 + 100 = 25344 + 2176 + 100 = 27620
    assert _one("aiter-fp8-kv", 209, 100, field="data", num_blocks=4, block_size=64) == \
        (27620, -1)
    # preshuffle: (17//16)*2048 + (100//16)*256 + (17%16)*16 + 100%16 = 2048 + 1536 + 16 + 4
    # = 3604 -> 25344 + 3604 = 28948
    assert _one("aiter-fp8-kv-preshuffle", 209, 100, field="data", num_blocks=4,
                block_size=64) == (28948, -1)
    # scale: base + B*128 + 4*o = 25344 + 8192 + 68 = 33604 (bytes 33604..33607, LE)
    for name in ("aiter-fp8-kv", "aiter-fp8-kv-preshuffle"):
        assert _one(name, 209, field="scale", num_blocks=4, block_size=64) == (33604, -1)
    layout = layouts.get("aiter-fp8-kv")
    buf = layout.new_buffer(num_blocks=4, block_size=64)
    layout.scatter(buf, np.zeros((1, 128), np.uint8), np.array([1.5], np.float32),
                   slots=np.array([209]))
    # 1.5f = 0x3FC00000, little-endian 00 00 C0 3F
    assert list(buf.reshape(-1)[33604:33608]) == [0x00, 0x00, 0xC0, 0x3F]


def test_spec_sglang_examples() -> None:
    # page68, page_size 64, slot 209: page 3, o = 17, page base = 3*64*68 = 13056
    # packed byte 5 (dims 10, 11): 13056 + 17*64 + 5 = 14149
    assert _one("sglang-page68", 209, 10, num_pages=4) == (14149, 0)
    # scale group 2: 13056 + 64*64 + 17*4 + 2 = 13056 + 4096 + 68 + 2 = 17222
    assert _one("sglang-page68", 209, 2, field="e8m0", num_pages=4) == (17222, -1)
    # packed-row, 10 rows: row 7 byte 5 = 7*64 + 5 = 453; row 7's word at 10*64 + 4*7 = 668
    assert _one("packed-row", 7, 11, num_rows=10) == (453, 1)
    assert _one("packed-row", 7, field="scale", num_rows=10) == (668, -1)


def test_spec_sglang_page8_examples() -> None:
    # split writer, page8=True: page8 = slot//8, t = slot%8, g = d//32, j = (d%32)//2;
    # payload flat page8*512 + ((t%4)*4 + g)*32 + (t//4)*16 + j, scale flat page8*32 + g*8 + t
    # slot 209: page8 = 26 (26*8 = 208), t = 1 -> t%4 = 1, t//4 = 0
    # dim 74 (packed byte 37): g = 2, j = 10//2 = 5, low nibble
    # 26*512 + (1*4 + 2)*32 + 0*16 + 5 = 13312 + 192 + 0 + 5 = 13509
    # of [4, 1, 4, 64, 16]: 13509 = 3*4096 + 0*4096 + 1*1024 + 12*16 + 5 -> [3, 0, 1, 12, 5]
    assert _one("sglang-page8", 209, 74, num_pages=4) == (13509, 0)
    # slot 213: page8 = 26, t = 5 -> t%4 = 1, t//4 = 1; dim 75: g = 2, j = 5, high nibble
    # 13312 + (1*4 + 2)*32 + 1*16 + 5 = 13312 + 192 + 16 + 5 = 13525
    assert _one("sglang-page8", 213, 75, num_pages=4) == (13525, 1)
    # slot 7: page8 = 0, t = 7 -> t%4 = 3, t//4 = 1; dim 127: g = 3, j = 31//2 = 15, high
    # 0 + (3*4 + 3)*32 + 16 + 15 = 480 + 31 = 511: the last byte of the first 512-byte page
    assert _one("sglang-page8", 7, 127, num_pages=1) == (511, 1)
    # slot 4 (t = 4: t%4 = 0, t//4 = 1), dim 0: (0*4 + 0)*32 + 16 + 0 = 16
    # slot 1 (t = 1), dim 0: (1*4 + 0)*32 = 128; slot 0, dim 32 (g = 1): (0*4 + 1)*32 = 32
    assert _one("sglang-page8", 4, 0, num_pages=1) == (16, 0)
    assert _one("sglang-page8", 1, 0, num_pages=1) == (128, 0)
    assert _one("sglang-page8", 0, 32, num_pages=1) == (32, 0)
    # scale, slot 209 group 2: 26*32 + 2*8 + 1 = 832 + 16 + 1 = 849
    # of [4, 1, 4, 64]: 849 = 3*256 + 0*256 + 1*64 + 17 -> [3, 0, 1, 17]
    assert _one("sglang-page8-scale", 209, 2, num_pages=4) == (849, -1)
    # slot 213 group 3: 832 + 3*8 + 5 = 861; slot 7 group 3: 0 + 24 + 7 = 31
    assert _one("sglang-page8-scale", 213, 3, num_pages=4) == (861, -1)
    assert _one("sglang-page8-scale", 7, 3, num_pages=1) == (31, -1)
    # the same coordinates in the page8=False (AITER) buffers of the same shapes differ:
    # aiter-fp4-kv slot 209 dim 74 = [3, 0, 2, 17, 5] -> (14*64 + 17)*16 + 5 = 14613;
    # aiter-fp4-kv-scale slot 209 group 2 = 901
    assert _one("aiter-fp4-kv", 209, 74, num_blocks=4) == (14613, 0)
    assert _one("aiter-fp4-kv-scale", 209, 2, num_blocks=4) == (901, -1)

    kv, ks = layouts.get("sglang-page8"), layouts.get("sglang-page8-scale")
    kbuf, sbuf = kv.new_buffer(num_pages=4), ks.new_buffer(num_pages=4)
    packed = np.zeros((1, 64), np.uint8)
    packed[0, 37] = 0x7C  # dims 74 (low, 0xC) and 75 (high, 0x7)
    e8m0 = np.array([[0x70, 0x71, 0x72, 0x73]], np.uint8)
    kv.scatter(kbuf, packed, slots=np.array([209]))
    ks.scatter(sbuf, e8m0, slots=np.array([209]))
    assert kbuf[3, 0, 1, 12, 5] == 0x7C and kbuf.reshape(-1)[13509] == 0x7C
    # groups 0..3 of slot 209 at 832 + g*8 + 1 = 833, 841, 849, 857
    assert list(sbuf.reshape(-1)[[833, 841, 849, 857]]) == [0x70, 0x71, 0x72, 0x73]
    assert sbuf[3, 0, 1, 17] == 0x72
    # sglang's reader views the buffers as [pages*8, 512] and [pages*8, 32]: row 26 holds the
    # 8-slot page; nothing outside it was touched
    rows, srows = kbuf.reshape(32, 512), sbuf.reshape(32, 32)
    assert rows[26].reshape(4, 4, 2, 16)[1, :, 0, :].reshape(64)[37] == 0x7C  # [t%4][g][t//4]
    assert list(srows[26].reshape(4, 8)[:, 1]) == [0x70, 0x71, 0x72, 0x73]  # [g][t]
    assert np.all(np.delete(rows, 26, axis=0) == POISON)
    assert np.all(np.delete(srows, 26, axis=0) == POISON)

    # every slot, read back through sglang's views with fancy indexing (not the index map)
    rng = np.random.Generator(np.random.PCG64(8))
    (packed,) = random_logical(kv, 128, rng, num_pages=2)
    (e8m0,) = random_logical(ks, 128, rng, num_pages=2)
    kbuf, sbuf = kv.new_buffer(num_pages=2), ks.new_buffer(num_pages=2)
    slots = rng.permutation(128)
    kv.scatter(kbuf, packed, slots=slots)
    ks.scatter(sbuf, e8m0, slots=slots)
    page8, t = slots // 8, slots % 8
    payload = kbuf.reshape(16, 512).reshape(16, 4, 4, 2, 16)  # [page8][t%4][g][t//4][j]
    scale = sbuf.reshape(16, 32).reshape(16, 4, 8)  # [page8][g][t]
    assert np.array_equal(payload[page8, t % 4, :, t // 4, :], packed.reshape(128, 4, 16))
    assert np.array_equal(scale[page8, :, t], e8m0)



def test_int32_word_byte_order() -> None:
    e8m0 = np.array([[0x01, 0x02, 0x03, 0x84]], np.uint8)
    word = layouts.e8m0_to_word(e8m0)
    assert word.dtype == np.int32 and int(word[0]) == np.int32(np.uint32(0x84030201).view(np.int32))
    assert np.array_equal(layouts.word_to_e8m0(word), e8m0)
    buf = layouts.join_packed_row(np.zeros((1, 64), np.uint8), word)
    assert list(buf[64:68]) == [0x01, 0x02, 0x03, 0x84]
    packed, back = layouts.split_packed_row(buf)
    assert packed.shape == (1, 64) and same_bits(back, word)


# ---- scatter / gather, poison ----------------------------------------------------------------


def _roundtrip(name: str, slots: np.ndarray | None, seed: int) -> None:
    layout = layouts.get(name)
    dims = SMALL[name]
    rng = np.random.Generator(np.random.PCG64(seed))
    if layout.slot_rule == "row_mask":
        n = layout.num_slots(**dims)
        slot_arr = np.arange(n) if slots is None else slots
    else:
        slot_arr = slots
        n = slot_arr.size
    arrays = random_logical(layout, n, rng, **dims)
    buf = layout.new_buffer(**dims)
    assert layout.scatter(buf, *arrays, slots=slots, **dims) is buf
    # the whole buffer equals a scatter done through the index map alone
    ref = layout.new_buffer(**dims)
    reference_scatter(layout, ref, arrays, slot_arr, **dims)
    assert np.array_equal(buf, ref)
    # bytes outside the written set keep the poison; pads of written rows are zero
    written = layout.regions(slots=slot_arr, **dims)
    assert np.all(buf[written == UNWRITTEN] == POISON)
    assert np.all(buf[written == ZERO_PAD] == 0)
    # gather is the inverse; rows with slot < 0 read back as poison
    keep = slot_arr >= 0
    back = layout.gather(buf, slots=slot_arr, **dims)
    assert len(back) == len(arrays)
    for a, b in zip(arrays, back):
        assert same_bits(b[keep], a[keep])
        assert np.all(np.ascontiguousarray(b[~keep]).view(np.uint8) == POISON)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), name=st.sampled_from([n for n in NAMES if "-q" not in n]),
       seed=st.integers(0, 2**32 - 1))
def test_scatter_gather_identity_and_poison_slots(data: st.DataObject, name: str,
                                                  seed: int) -> None:
    layout = layouts.get(name)
    slots = data.draw(slot_sets(layout.num_slots(**SMALL[name])))
    _roundtrip(name, slots, seed)


@settings(max_examples=15, deadline=None)
@given(data=st.data(), name=st.sampled_from(["aiter-fp4-q", "aiter-fp4-q-scale"]),
       seed=st.integers(0, 2**32 - 1))
def test_scatter_gather_identity_and_poison_tokens(data: st.DataObject, name: str,
                                                   seed: int) -> None:
    mask = data.draw(token_masks(SMALL[name]["num_tokens"]))
    _roundtrip(name, mask, seed)


@pytest.mark.parametrize("name", [n for n in NAMES if "-q" not in n])
def test_out_of_order_slots_in_repeated_blocks(name: str) -> None:
    layout = layouts.get(name)
    block = layout.num_slots(**SMALL[name]) // 3
    # two blocks revisited, slots descending inside each, -1 in between
    slots = np.array([block + 5, 3, block + 1, -1, 2, 0, block, -1, 2 * block - 1],
                     dtype=np.int64)
    slots = slots[slots < layout.num_slots(**SMALL[name])]
    _roundtrip(name, slots, seed=11)


@pytest.mark.parametrize("heads", [16, 32, 48, 64, 80, 128])
def test_q_scale_zero_padding(heads: int) -> None:
    layout = layouts.get("aiter-fp4-q-scale")
    dims = dict(num_tokens=4, num_heads=heads)
    e8m0 = np.full((4, heads, 4), 0x7F, np.uint8)  # 1.0 everywhere, like BUGS 22's padding
    buf = layout.new_buffer(**dims)
    layout.scatter(buf, e8m0, slots=np.array([3, -1, 0, 7]), **dims)
    real = heads // 16
    assert np.all(buf[[0, 2, 3], ..., :real] == 0x7F)
    assert np.all(buf[[0, 2, 3], ..., real:] == 0)  # padding heads: zero, never 127
    assert np.all(buf[1] == POISON)  # slot < 0: the token is not touched at all
    assert int((layout.regions(**dims) == ZERO_PAD).sum()) == 4 * 16 * 4 * (buf.shape[-1] - real)


def test_gather_every_slot_by_default() -> None:
    layout = layouts.get("sglang-page68")
    rng = np.random.Generator(np.random.PCG64(3))
    packed, e8m0 = random_logical(layout, 32, rng, num_pages=2, page_size=16)
    buf = layout.new_buffer(num_pages=2, page_size=16)
    layout.scatter(buf, packed, e8m0)
    back_packed, back_e8m0 = layout.gather(buf)
    assert np.array_equal(back_packed, packed) and np.array_equal(back_e8m0, e8m0)


def test_quantize_mx_rows_go_in_as_they_are() -> None:
    # the logical forms are what oracle.quantize_mx returns; dim 2k is the low nibble
    from mxgate import oracle

    if not hasattr(oracle, "quantize_mx") or not hasattr(oracle, "unpack_nibbles"):
        pytest.skip("oracle.quantize_mx / unpack_nibbles not available")
    profile = oracle.profiles.get("gfx950")
    x = np.random.Generator(np.random.PCG64(9)).standard_normal((3, 16, 128)).astype(np.float32)
    packed, e8m0 = oracle.quantize_mx(x, profile)
    q, qs = layouts.get("aiter-fp4-q"), layouts.get("aiter-fp4-q-scale")
    qbuf, sbuf = q.new_buffer(num_tokens=3, num_heads=16), qs.new_buffer(num_tokens=3,
                                                                        num_heads=16)
    q.scatter(qbuf, packed)
    qs.scatter(sbuf, e8m0)
    offset, nibble = q.index_map(num_tokens=3, num_heads=16)
    codes = (qbuf.reshape(-1)[offset] >> (4 * nibble)) & 0xF
    assert np.array_equal(codes, oracle.unpack_nibbles(packed))
    assert np.array_equal(qs.gather(sbuf, num_heads=16)[0], e8m0)


# ---- mismatched layouts are caught -----------------------------------------------------------


def test_block_planar_read_token_interleaved_is_caught() -> None:
    # BUGS 25: written block-planar, read as [slot, 132] rows (128 data bytes + 4 scale bytes)
    layout = layouts.get("aiter-fp8-kv")
    dims = dict(num_blocks=2, block_size=16)
    rng = np.random.Generator(np.random.PCG64(25))
    data, scale = random_logical(layout, 32, rng, **dims)
    buf = layout.new_buffer(**dims)
    layout.scatter(buf, data, scale, **dims)
    rows = buf.reshape(32, 132)
    wrong_data, wrong_scale = rows[:, :128], rows[:, 128:].copy().view("<f4")[:, 0]
    assert not np.array_equal(wrong_data, data)
    assert not same_bits(wrong_scale.astype(np.float32), scale)
    good_data, good_scale = layout.gather(buf, **dims)
    assert np.array_equal(good_data, data) and same_bits(good_scale, scale)


@pytest.mark.parametrize(("writer", "reader", "dims"), [
    ("aiter-fp8-kv", "aiter-fp8-kv-preshuffle", dict(num_blocks=2, block_size=32)),  # BUGS 31
    ("aiter-fp8-kv-preshuffle", "aiter-fp8-kv", dict(num_blocks=2, block_size=32)),
    # sglang's split writer with page8 on vs off: same buffers, same shapes, other placement
    ("sglang-page8", "aiter-fp4-kv", dict(num_pages=2)),
    ("aiter-fp4-kv", "sglang-page8", dict(num_blocks=2)),
    ("sglang-page8-scale", "aiter-fp4-kv-scale", dict(num_pages=2)),
    ("aiter-fp4-kv-scale", "sglang-page8-scale", dict(num_blocks=2)),
])
def test_same_size_layouts_do_not_read_each_other(writer: str, reader: str,
                                                  dims: dict) -> None:
    w, r = layouts.get(writer), layouts.get(reader)
    rng = np.random.Generator(np.random.PCG64(31))
    arrays = random_logical(w, w.num_slots(**dims), rng, **dims)
    buf = w.new_buffer(**dims)
    w.scatter(buf, *arrays, **dims)
    # the reader accepts the buffer as its own (gather infers its dims from the shape and
    # checks it) and reads other bytes
    wrong = r.gather(buf)
    assert [a.shape for a in wrong] == [a.shape for a in arrays]
    assert not all(same_bits(a, b) for a, b in zip(arrays, wrong))
    assert all(same_bits(a, b) for a, b in zip(arrays, w.gather(buf)))


def test_page8_and_aiter_place_no_slot_alike() -> None:
    # a few bytes coincide (e.g. group 0 of slot 0), but no slot's row sits where the other
    # layout puts it, so a page8 / AITER mix-up shows on every token
    pairs = [(layouts.get("sglang-page8"), layouts.get("aiter-fp4-kv")),
             (layouts.get("sglang-page8-scale"), layouts.get("aiter-fp4-kv-scale"))]
    for page8, aiter in pairs:
        a = page8.index_map(num_pages=2).offset
        b = aiter.index_map(num_blocks=2).offset
        assert a.shape == b.shape
        assert not np.all(a == b, axis=1).any()
        assert np.mean(a == b) < 0.1


def test_kv_scale_without_interleave_is_caught() -> None:
    layout = layouts.get("aiter-fp4-kv-scale")
    rng = np.random.Generator(np.random.PCG64(5))
    (e8m0,) = random_logical(layout, 128, rng, num_blocks=2)
    buf = layout.new_buffer(num_blocks=2)
    layout.scatter(buf, e8m0)
    naive = buf.transpose(0, 3, 1, 2).reshape(128, 4)  # [b, g//4, g%4, p]: no interleave
    assert not np.array_equal(naive, e8m0)
    assert np.array_equal(layout.gather(buf)[0], e8m0)


@pytest.mark.parametrize(("head_dim", "caught"), [(128, False), (256, True), (384, True)])
def test_k_tiles_confusion_only_shows_with_packed_k_above_one(head_dim: int,
                                                              caught: bool) -> None:
    # BUGS 27: a reader that swaps the k_tile and group axes agrees with the writer while
    # k_tiles = 1 and is wrong as soon as head_dim > 128
    layout = layouts.get("aiter-fp4-kv")
    rng = np.random.Generator(np.random.PCG64(27))
    (packed,) = random_logical(layout, 64, rng, num_blocks=1, head_dim=head_dim)
    buf = layout.new_buffer(num_blocks=1, head_dim=head_dim)
    layout.scatter(buf, packed)
    kt = head_dim // 128
    swapped = buf.reshape(1, 4, kt, 64, 16).transpose(0, 3, 2, 1, 4).reshape(64, head_dim // 2)
    assert (not np.array_equal(swapped, packed)) is caught


def test_q_scale_read_at_unpadded_stride_is_caught() -> None:
    # BUGS 21: written at stride QS_PAD, read at stride num_heads/16
    layout = layouts.get("aiter-fp4-q-scale")
    rng = np.random.Generator(np.random.PCG64(21))
    (e8m0,) = random_logical(layout, 2, rng, num_tokens=2, num_heads=48)
    buf = layout.new_buffer(num_tokens=2, num_heads=48)
    layout.scatter(buf, e8m0)
    flat = buf.reshape(2, -1)[:, :4 * 16 * 3].reshape(2, 4, 16, 3)  # [t, g, h%16, h//16]
    wrong = flat.transpose(0, 3, 2, 1).reshape(2, 48, 4)
    assert not np.array_equal(wrong, e8m0)
    assert np.array_equal(layout.gather(buf, num_heads=48)[0], e8m0)


# ---- int64 index arithmetic (BUGS 32) ---------------------------------------------------------


@pytest.mark.parametrize("name", ["aiter-fp4-kv", "aiter-fp4-kv-scale", "aiter-fp8-kv",
                                  "sglang-page68", "sglang-page8", "sglang-page8-scale"])
def test_offsets_past_2_to_the_32(name: str) -> None:
    layout = layouts.get(name)
    big = {"aiter-fp4-kv": dict(num_blocks=2**21 + 3), "aiter-fp4-kv-scale":
           dict(num_blocks=2**27 + 3), "aiter-fp8-kv": dict(num_blocks=2**20 + 3,
           block_size=64), "sglang-page68": dict(num_pages=2**20 + 3), "sglang-page8":
           dict(num_pages=2**20 + 3), "sglang-page8-scale": dict(num_pages=2**24 + 3)}[name]
    nbytes = int(np.prod(layout.buffer_shape(**big), dtype=object))
    assert nbytes > 2**32
    last = layout.num_slots(**big) - 1
    f = layout.fields[0]
    top = layout._grid(f.name, layout.dims(**big))[1][1] * (2 if f.unit == "nibble" else 1)
    offset, _ = layout.offset_of(np.array([last]), np.array([top - 1]), **big)
    # the last element of the last slot sits in the buffer's last rows, past 2^32
    assert offset.dtype == np.int64 and 2**32 < int(offset[0]) < nbytes
    loc = layout.locate(offset, np.ones(1, np.int64), **big)
    assert int(loc.coords[f.axes[0]][0]) == last


# ---- validation ------------------------------------------------------------------------------


def test_validation_errors_name_the_argument() -> None:
    kv = layouts.get("aiter-fp4-kv")
    buf = kv.new_buffer(num_blocks=2)
    with pytest.raises(TypeError, match="packed must have dtype uint8"):
        kv.scatter(buf, np.zeros((2, 64), np.int8))
    with pytest.raises(ValueError, match=r"packed must have shape \(2, 64\)"):
        kv.scatter(buf, np.zeros((2, 63), np.uint8))
    with pytest.raises(ValueError, match="slots must be < 128"):
        kv.scatter(buf, np.zeros((1, 64), np.uint8), slots=np.array([128]))
    with pytest.raises(ValueError, match="slot 5 appears more than once"):
        kv.scatter(buf, np.zeros((2, 64), np.uint8), slots=np.array([5, 5]))
    with pytest.raises(TypeError, match="slots must be an integer array"):
        kv.scatter(buf, np.zeros((1, 64), np.uint8), slots=np.array([1.0]))
    with pytest.raises(ValueError, match=r"slots must have shape \(2,\)"):
        kv.scatter(buf, np.zeros((2, 64), np.uint8), slots=np.array([1]))
    with pytest.raises(TypeError, match="buffer must have dtype uint8"):
        kv.scatter(buf.view(np.int8), np.zeros((1, 64), np.uint8))
    with pytest.raises(ValueError, match="num_blocks=3 does not match"):
        kv.scatter(buf, np.zeros((1, 64), np.uint8), num_blocks=3)
    with pytest.raises(TypeError, match="scatter takes 1 logical array"):
        kv.scatter(buf, np.zeros((1, 64), np.uint8), np.zeros((1, 4), np.uint8))
    with pytest.raises(TypeError, match="unknown dims keyword"):
        kv.buffer_shape(num_blocks=2, num_pages=3)
    with pytest.raises(TypeError, match="missing dims keyword num_blocks"):
        kv.buffer_shape()
    with pytest.raises(ValueError, match="only supports kv_block_size=64"):
        kv.buffer_shape(num_blocks=2, block_size=32)
    with pytest.raises(ValueError, match="multiple of 128"):
        kv.buffer_shape(num_blocks=2, head_dim=192)
    with pytest.raises(ValueError, match="C-contiguous"):
        kv.scatter(buf[:, :, :, ::2], np.zeros((1, 64), np.uint8))
    with pytest.raises(ValueError, match="n_heads to be a multiple of 16, got 40"):
        layouts.get("aiter-fp4-q-scale").buffer_shape(num_tokens=1, num_heads=40)
    with pytest.raises(ValueError, match="cache_block_size to be a multiple of 16, got 24"):
        layouts.get("aiter-fp8-kv-preshuffle").buffer_shape(num_blocks=1, block_size=24)
    with pytest.raises(TypeError, match="scale must have dtype float32"):
        layouts.get("aiter-fp8-kv").scatter(
            layouts.get("aiter-fp8-kv").new_buffer(num_blocks=1, block_size=4),
            np.zeros((1, 128), np.uint8), np.zeros(1, np.float64))
    with pytest.raises(TypeError, match="missing dims keyword num_heads"):
        qs = layouts.get("aiter-fp4-q-scale")
        qs.gather(qs.new_buffer(num_tokens=1, num_heads=16))
    with pytest.raises(ValueError, match=r"offsets must be in \[0, 8192\)"):
        kv.locate(np.array([8192]), num_blocks=2)


def test_q_rows_must_cover_every_token() -> None:
    q = layouts.get("aiter-fp4-q")
    buf = q.new_buffer(num_tokens=3, num_heads=16)
    with pytest.raises(ValueError, match="num_tokens=2 does not match"):
        q.scatter(buf, np.zeros((2, 16, 64), np.uint8), num_tokens=2)
    with pytest.raises(ValueError, match="must have 3 rows"):
        q.scatter(buf, np.zeros((2, 16, 64), np.uint8))


# ---- description -----------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "dims"), [(n, SMALL[n]) for n in NAMES])
def test_describe(name: str, dims: dict) -> None:
    layout = layouts.get(name)
    text = layout.describe(**dims)
    assert name in text and str(layout.buffer_shape(**dims)) in text
    for f in layout.fields + layout.pads:
        assert f.name in text
    assert "regions:" in text
    assert name in layout.describe()  # symbolic, without dims
    first = layout.index_map(**dims).offset.ravel()[0]
    assert layout.fields[0].name in layout.describe_byte(int(first), **dims)
