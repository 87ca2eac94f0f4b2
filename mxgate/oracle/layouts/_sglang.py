"""sglang / DeepGEMM layouts: the 68-byte page, the packed-row form with its int32 scale word,
and the two buffers of sglang's AITER-layout split writer with page8=True (SPEC section 5).
head_dim is 128: 64 packed bytes and 4 e8m0 bytes per token."""

from __future__ import annotations

import numpy as np

from mxgate.oracle.geometry import KV_BLOCK, ROW_BYTES, ROW_GROUPS, TOKEN_BYTES
from mxgate.oracle.layouts._core import DATA, SCALE, Dims, Field, Layout, _View, reshape_view

PAGE8 = 8  # page8: slots per flat page
PAGE8_PAYLOAD = PAGE8 * ROW_BYTES  # 512 payload bytes per flat page
PAGE8_SCALE = PAGE8 * ROW_GROUPS  # 32 scale bytes per flat page


def _packed(axis: str) -> Field:
    return Field("packed", DATA, (axis, "dim"), "nibble", np.dtype(np.uint8),
                 "packed E2M1 codes [n, 64] per token row, as quantize_mx returns them")


def _e8m0() -> Field:
    return Field("e8m0", SCALE, ("slot", "group"), "byte", np.dtype(np.uint8),
                 "e8m0 scale bytes [n, 4] per token row")


def _check_count(d: Dims, key: str) -> None:
    if d[key] < 0:
        raise ValueError(f"{key} must be >= 0, got {d[key]}")


def e8m0_to_word(e8m0: np.ndarray) -> np.ndarray:
    """e8m0 bytes [rows, 4] -> int32 words [rows], byte g in bits 8g..8g+7 (little-endian)."""
    if not isinstance(e8m0, np.ndarray) or e8m0.dtype != np.uint8:
        raise TypeError("e8m0 must be a uint8 numpy array")
    if e8m0.ndim < 1 or e8m0.shape[-1] != ROW_GROUPS:
        raise ValueError(f"e8m0 must have a last axis of {ROW_GROUPS}, got shape {e8m0.shape}")
    return np.ascontiguousarray(e8m0).view("<i4")[..., 0].astype(np.int32)


def word_to_e8m0(word: np.ndarray) -> np.ndarray:
    """int32 words [rows] -> e8m0 bytes [rows, 4] (byte 0 = least significant)."""
    if not isinstance(word, np.ndarray) or word.dtype != np.int32:
        raise TypeError("word must be an int32 numpy array")
    raw = np.ascontiguousarray(word, dtype="<i4").view(np.uint8)
    return raw.reshape(word.shape + (4,)).copy()


class TokenPages(Layout):
    """Pages of P token slots: P packed rows of 64 bytes, then P groups of 4 e8m0 bytes (the
    68-byte token of sglang and DeepGEMM; vLLM's FP4 K page with unused bytes after them)."""

    def _pages(self, d: Dims) -> tuple[int, int, int]:
        """(pages, slots per page, bytes per page)."""
        raise NotImplementedError

    def _num_slots(self, d: Dims) -> int:
        pages, per_page, _ = self._pages(d)
        return pages * per_page

    def _grid(self, field: str, d: Dims) -> tuple[tuple[int, int], ...]:
        return ((0, self._num_slots(d)), (0, ROW_BYTES if field == "packed" else ROW_GROUPS))

    def _offsets(self, field: str, c: tuple[np.ndarray, ...], d: Dims) -> np.ndarray:
        _, per_page, page_bytes = self._pages(d)
        page, o = c[0] // per_page, c[0] % per_page
        base = page * page_bytes
        if field == "packed":
            return base + o * ROW_BYTES + c[1]
        return base + per_page * ROW_BYTES + o * ROW_GROUPS + c[1]

    def _views(self, buf: np.ndarray, d: Dims) -> dict[str, _View]:
        n, per_page, _ = self._pages(d)
        packed = reshape_view(buf[:, :per_page * ROW_BYTES], (n, per_page, ROW_BYTES))
        e8m0 = reshape_view(buf[:, per_page * ROW_BYTES:per_page * TOKEN_BYTES], (n, per_page, ROW_GROUPS))
        return {"packed": _View(packed, (n, per_page)), "e8m0": _View(e8m0, (n, per_page))}


class SglangPage68(TokenPages):
    name = "sglang-page68"
    title = "sglang / DeepGEMM 68-byte-per-token page: packed rows, then e8m0 bytes"
    source = "sglang DSV4 FP4 indexer K cache writer (DeepGEMM paged layout)"
    shape_doc = "[num_pages, page_size*68]"
    fields = (_packed("slot"), _e8m0())
    dim_defaults = {"num_pages": None, "page_size": 64}

    def _derive(self, d: Dims) -> Dims:
        _check_count(d, "num_pages")
        if d["page_size"] <= 0:
            raise ValueError(f"page_size must be > 0, got {d['page_size']}")
        return d

    def _shape(self, d: Dims) -> tuple[int, ...]:
        return (d["num_pages"], d["page_size"] * TOKEN_BYTES)

    def _pages(self, d: Dims) -> tuple[int, int, int]:
        return d["num_pages"], d["page_size"], d["page_size"] * TOKEN_BYTES

    def _infer(self, shape: tuple[int, ...], arrays: tuple[np.ndarray, ...] | None) -> Dims:
        if len(shape) != 2 or shape[1] % TOKEN_BYTES:
            return {}
        return {"num_pages": shape[0], "page_size": shape[1] // TOKEN_BYTES}

    def _formulas(self) -> dict[str, str]:
        return {"packed": "[page, o*64 + d//2], nibble d & 1; page = slot//P, o = slot%P",
                "e8m0": "[page, P*64 + o*4 + g]"}


class PackedRow(Layout):
    name = "packed-row"
    title = "packed-row form: [rows, 64] packed codes + int32 [rows] scale words"
    source = "sglang quantize_fp4_indexer_row / DeepGEMM packed UE8M0 operand"
    shape_doc = "[num_rows*68]: the [rows, 64] packed tensor's bytes, then the int32 [rows] words"
    fields = (_packed("row"),
              Field("scale", SCALE, ("row",), "i32le", np.dtype(np.int32),
                    "int32 [rows]: e8m0 of groups 0..3 in bytes e0..e3, little-endian "
                    "(word_byte = group)"))
    dim_defaults = {"num_rows": None}
    notes = ("the two tensors are separate on the device; join_packed_row / "
             "split_packed_row convert to and from this one-buffer form",)

    def _derive(self, d: Dims) -> Dims:
        _check_count(d, "num_rows")
        return d

    def _shape(self, d: Dims) -> tuple[int, ...]:
        return (d["num_rows"] * TOKEN_BYTES,)

    def _num_slots(self, d: Dims) -> int:
        return d["num_rows"]

    def _grid(self, field: str, d: Dims) -> tuple[tuple[int, int], ...]:
        if field == "packed":
            return ((0, d["num_rows"]), (0, ROW_BYTES))
        return ((0, d["num_rows"]),)

    def _offsets(self, field: str, c: tuple[np.ndarray, ...], d: Dims) -> np.ndarray:
        if field == "packed":
            return c[0] * ROW_BYTES + c[1]
        return d["num_rows"] * ROW_BYTES + 4 * c[0]

    def _views(self, buf: np.ndarray, d: Dims) -> dict[str, _View]:
        rows = d["num_rows"]
        packed = reshape_view(buf[:rows * ROW_BYTES], (rows, ROW_BYTES))
        words = reshape_view(buf[rows * ROW_BYTES:], (rows, 4))
        return {"packed": _View(packed, (rows,)), "scale": _View(words, (rows,))}

    def _infer(self, shape: tuple[int, ...], arrays: tuple[np.ndarray, ...] | None) -> Dims:
        if len(shape) != 1 or shape[0] % TOKEN_BYTES:
            return {}
        return {"num_rows": shape[0] // TOKEN_BYTES}

    def _formulas(self) -> dict[str, str]:
        return {"packed": "row*64 + d//2, nibble d & 1",
                "scale": "num_rows*64 + 4*row (4 bytes, little-endian int32)"}


def join_packed_row(packed: np.ndarray, word: np.ndarray) -> np.ndarray:
    """The one-buffer form of a packed-row pair: packed bytes then the words' bytes."""
    layout = PackedRow()
    if not isinstance(packed, np.ndarray) or packed.ndim != 2:
        raise ValueError("packed must be a 2-D numpy array [rows, 64]")
    buf = layout.new_buffer(num_rows=packed.shape[0])
    return layout.scatter(buf, packed, word)


def split_packed_row(buffer: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The packed [rows, 64] uint8 and int32 [rows] tensors of a one-buffer packed row."""
    return PackedRow().gather(buffer)  # type: ignore[return-value]


class _SglangPage8Base(Layout):
    """Shared dims of the two page8 buffers: num_pages 64-slot AITER pages, seen as
    num_pages*8 flat 8-slot pages."""

    dim_defaults = {"num_pages": None}
    rank: int = 0  # buffer ndim, set by each subclass

    def _derive(self, d: Dims) -> Dims:
        _check_count(d, "num_pages")
        return d

    def _num_slots(self, d: Dims) -> int:
        return d["num_pages"] * KV_BLOCK

    def _infer(self, shape: tuple[int, ...], arrays: tuple[np.ndarray, ...] | None) -> Dims:
        # only the page count varies; a wrong tail is reported by the shape check
        if len(shape) != self.rank:
            return {}
        return {"num_pages": shape[0]}


class SglangPage8(_SglangPage8Base):
    name = "sglang-page8"
    title = ("sglang split writer, page8=True: payload buffer, flat 512-byte pages of 8 slots "
             "over AITER's kv_cache shape")
    source = ("sglang 0.5.23 store_fp4_index_k_cache_split(..., page8=True), payload; "
              "sglang/kernels/ops/kvcache/dsv4_fp4_index_k_cache_hip.py:38-50")
    shape_doc = "[num_pages, 1, 4, 64, 16] (AITER's kv_cache shape), addressed flat"
    fields = (_packed("slot"),)
    rank = 5
    notes = ("the writer ignores the buffer's AITER axes: page8 = slot//8 owns flat bytes "
             "[page8*512, page8*512 + 512), laid out [t%4][g][t//4][16 bytes], t = slot%8",
             "sglang's reader views this buffer as [num_pages*8, 512] "
             "(fp4_indexer_hip.py:815-824)",
             "the scales live in a second buffer: sglang-page8-scale",
             "same shape as aiter-fp4-kv, different placement: page8 off writes aiter-fp4-kv")

    def _shape(self, d: Dims) -> tuple[int, ...]:
        return (d["num_pages"], 1, ROW_GROUPS, KV_BLOCK, 16)

    def _grid(self, field: str, d: Dims) -> tuple[tuple[int, int], ...]:
        return ((0, self._num_slots(d)), (0, ROW_BYTES))

    def _offsets(self, field: str, c: tuple[np.ndarray, ...], d: Dims) -> np.ndarray:
        # packed byte k = g*16 + j (g = d//32, j = (d%32)//2)
        s, k = c
        page8, t = s // PAGE8, s % PAGE8
        g, j = k // 16, k % 16
        return page8 * PAGE8_PAYLOAD + ((t % 4) * ROW_GROUPS + g) * 32 + (t // 4) * 16 + j

    def _views(self, buf: np.ndarray, d: Dims) -> dict[str, _View]:
        pages8 = d["num_pages"] * (KV_BLOCK // PAGE8)
        # flat [page8, t%4, g, t//4, j] -> (page8, t//4, t%4, g, j): slot digits then row bytes
        flat = reshape_view(buf, (pages8, 4, ROW_GROUPS, 2, 16))
        return {"packed": _View(flat.transpose(0, 3, 1, 2, 4), (pages8, 2, 4))}

    def _formulas(self) -> dict[str, str]:
        return {"packed": ("flat page8*512 + ((t%4)*4 + g)*32 + (t//4)*16 + j, nibble d & 1; "
                           "page8 = slot//8, t = slot%8, g = d//32, j = (d%32)//2")}


class SglangPage8Scale(_SglangPage8Base):
    name = "sglang-page8-scale"
    title = ("sglang split writer, page8=True: scale buffer, flat 32-byte pages of 8 slots "
             "over AITER's kv_cache_scale shape")
    source = ("sglang 0.5.23 store_fp4_index_k_cache_split(..., page8=True), scale; "
              "sglang/kernels/ops/kvcache/dsv4_fp4_index_k_cache_hip.py:38-50")
    shape_doc = "[num_pages, 1, 4, 64] (AITER's kv_cache_scale shape), addressed flat"
    fields = (_e8m0(),)
    rank = 4
    notes = ("the writer ignores the buffer's AITER axes (and the 16 x 4 interleave): "
             "page8 = slot//8 owns flat bytes [page8*32, page8*32 + 32), laid out [g][t], "
             "t = slot%8",
             "sglang's reader views this buffer as [num_pages*8, 32] "
             "(fp4_indexer_hip.py:815-824)",
             "the packed codes live in a second buffer: sglang-page8",
             "same shape as aiter-fp4-kv-scale, different placement")

    def _shape(self, d: Dims) -> tuple[int, ...]:
        return (d["num_pages"], 1, ROW_GROUPS, KV_BLOCK)

    def _grid(self, field: str, d: Dims) -> tuple[tuple[int, int], ...]:
        return ((0, self._num_slots(d)), (0, ROW_GROUPS))

    def _offsets(self, field: str, c: tuple[np.ndarray, ...], d: Dims) -> np.ndarray:
        s, g = c
        return (s // PAGE8) * PAGE8_SCALE + g * PAGE8 + s % PAGE8

    def _views(self, buf: np.ndarray, d: Dims) -> dict[str, _View]:
        pages8 = d["num_pages"] * (KV_BLOCK // PAGE8)
        # flat [page8, g, t] -> (page8, t, g)
        flat = reshape_view(buf, (pages8, ROW_GROUPS, PAGE8))
        return {"e8m0": _View(flat.transpose(0, 2, 1), (pages8, PAGE8))}

    def _formulas(self) -> dict[str, str]:
        return {"e8m0": "flat page8*32 + g*8 + t; page8 = slot//8, t = slot%8"}
