"""AITER layouts: the FP4 outputs of ``indexer_qk_rope_quant_and_cache`` (PR #5484, read by
``pa_mqa_logits_fp4``) and the FP8 block-planar K cache (SPEC section 5)."""

from __future__ import annotations

import numpy as np

from mxgate.oracle.layouts._core import (
    DATA,
    SCALE,
    ZERO_PAD,
    Dims,
    Field,
    Layout,
    _View,
    reshape_view,
)
from mxgate.oracle.geometry import GROUP, HEAD_DIM, KV_BLOCK, TILE_K


def _check_head_dim(d: Dims) -> None:
    # the op accepts only 128; the layout stays general over k_tiles = head_dim / 128
    if d["head_dim"] <= 0 or d["head_dim"] % TILE_K:
        raise ValueError(f"head_dim must be a positive multiple of {TILE_K}, got {d['head_dim']}")
    d["k_tiles"] = d["head_dim"] // TILE_K
    d["groups"] = d["head_dim"] // GROUP


def _check_count(d: Dims, key: str) -> None:
    if d[key] < 0:
        raise ValueError(f"{key} must be >= 0, got {d[key]}")


def _check_fp4_heads(d: Dims) -> None:
    if d["num_heads"] <= 0 or d["num_heads"] % 16:
        raise ValueError("fp4 output requires n_heads to be a multiple of 16, "
                         f"got {d['num_heads']}")


def _check_kv_block(d: Dims) -> None:
    if d["block_size"] != KV_BLOCK:
        raise ValueError("fp4 output only supports kv_block_size=64 (kv_cache.size(3)), "
                         f"got {d['block_size']}")


def _packed(axes: tuple[str, ...], doc: str) -> Field:
    return Field("packed", DATA, axes, "nibble", np.dtype(np.uint8), doc)


class AiterFp4Q(Layout):
    name = "aiter-fp4-q"
    title = "AITER FP4 Q output q_out, row-major, no preshuffle"
    source = "ROCm/aiter PR #5484, indexer_qk_rope_quant_and_cache (FP4 mode), q_out"
    shape_doc = "[num_tokens, num_heads, head_dim/2]"
    fields = (_packed(("token", "head", "dim"),
                      "packed E2M1 codes [T, H, head_dim/2] as quantize_mx returns them"),)
    dim_defaults = {"num_tokens": None, "num_heads": None, "head_dim": HEAD_DIM}
    slot_rule = "row_mask"
    notes = ("tokens whose slot is < 0 are not written (unless compute_all_q_rope, where the "
             "caller passes slots=None)",)

    def _derive(self, d: Dims) -> Dims:
        _check_count(d, "num_tokens")
        _check_fp4_heads(d)
        _check_head_dim(d)
        return d

    def _shape(self, d: Dims) -> tuple[int, ...]:
        return (d["num_tokens"], d["num_heads"], d["head_dim"] // 2)

    def _num_slots(self, d: Dims) -> int:
        return d["num_tokens"]

    def _grid(self, field: str, d: Dims) -> tuple[tuple[int, int], ...]:
        return ((0, d["num_tokens"]), (0, d["num_heads"]), (0, d["head_dim"] // 2))

    def _offsets(self, field: str, c: tuple[np.ndarray, ...], d: Dims) -> np.ndarray:
        t, h, k = c
        return (t * d["num_heads"] + h) * (d["head_dim"] // 2) + k

    def _views(self, buf: np.ndarray, d: Dims) -> dict[str, _View]:
        return {"packed": _View(buf, (d["num_tokens"],))}

    def _infer(self, shape: tuple[int, ...], arrays: tuple[np.ndarray, ...] | None) -> Dims:
        if len(shape) != 3:
            return {}
        return {"num_tokens": shape[0], "num_heads": shape[1], "head_dim": shape[2] * 2}

    def _formulas(self) -> dict[str, str]:
        return {"packed": "[t, h, d//2], nibble d & 1 (byte j holds dims 2j low, 2j+1 high)"}


class AiterFp4QScale(Layout):
    name = "aiter-fp4-q-scale"
    title = "AITER FP4 Q scales q_scale_out, preshuffled for pa_mqa_logits_fp4"
    source = "ROCm/aiter PR #5484, indexer_qk_rope_quant_and_cache (FP4 mode), q_scale_out"
    shape_doc = "[num_tokens, k_tiles, 4, 16, QS_PAD], QS_PAD = round_up(num_heads/16, 4)"
    fields = (Field("e8m0", SCALE, ("token", "head", "group"), "byte", np.dtype(np.uint8),
                    "e8m0 scale bytes [T, H, head_dim/32]"),)
    pads = (Field("pad", ZERO_PAD, ("token", "head", "group"), "byte", np.dtype(np.uint8),
                  "padding heads H <= h < 16*QS_PAD: written as 0 for every written token"),)
    dim_defaults = {"num_tokens": None, "num_heads": None, "head_dim": HEAD_DIM}
    slot_rule = "row_mask"
    notes = ("num_heads cannot be read off the buffer (QS_PAD pads it): gather needs "
             "num_heads=", "a padding byte of 127 (1.0) instead of 0 is a known bug class "
             "(BUGS 21, 22)")

    def _derive(self, d: Dims) -> Dims:
        _check_count(d, "num_tokens")
        _check_fp4_heads(d)
        _check_head_dim(d)
        d["qs_pad"] = -(-d["num_heads"] // 16 // 4) * 4
        return d

    def _shape(self, d: Dims) -> tuple[int, ...]:
        return (d["num_tokens"], d["k_tiles"], 4, 16, d["qs_pad"])

    def _num_slots(self, d: Dims) -> int:
        return d["num_tokens"]

    def _grid(self, field: str, d: Dims) -> tuple[tuple[int, int], ...]:
        heads = (0, d["num_heads"]) if field == "e8m0" else (d["num_heads"], 16 * d["qs_pad"])
        return ((0, d["num_tokens"]), heads, (0, d["groups"]))

    def _offsets(self, field: str, c: tuple[np.ndarray, ...], d: Dims) -> np.ndarray:
        # [t, g//4, g%4, h%16, h//16] of [T, k_tiles, 4, 16, QS_PAD]
        t, h, g = c
        return (((t * d["k_tiles"] + g // 4) * 4 + g % 4) * 16 + h % 16) * d["qs_pad"] + h // 16

    def _views(self, buf: np.ndarray, d: Dims) -> dict[str, _View]:
        hh = d["num_heads"] // 16
        # axes (t, kt, g4, h%16, h//16) -> (t, h//16, h%16, kt, g4): row = [head, group]
        real = buf[..., :hh].transpose(0, 4, 3, 1, 2)
        pad = buf[..., hh:].transpose(0, 4, 3, 1, 2)
        return {"e8m0": _View(real, (d["num_tokens"],)), "pad": _View(pad, (d["num_tokens"],))}

    def _infer(self, shape: tuple[int, ...], arrays: tuple[np.ndarray, ...] | None) -> Dims:
        if len(shape) != 5:
            return {}
        out = {"num_tokens": shape[0], "head_dim": shape[1] * TILE_K}
        if arrays is not None and arrays[0].ndim == 3:
            out["num_heads"] = arrays[0].shape[1]
        return out

    def _formulas(self) -> dict[str, str]:
        return {"e8m0": "[t, g//4, g%4, h%16, h//16]",
                "pad": "[t, g//4, g%4, h%16, h//16] for h//16 >= num_heads/16"}


class _AiterKvBlocks(Layout):
    """What the FP4 K cache and its scale buffer share: 64-slot blocks of k_tiles tiles."""

    dim_defaults = {"num_blocks": None, "head_dim": HEAD_DIM, "block_size": KV_BLOCK}
    _ndim = 0  # rank of the buffer, to recognise it from a shape

    def _derive(self, d: Dims) -> Dims:
        _check_count(d, "num_blocks")
        _check_kv_block(d)
        _check_head_dim(d)
        return d

    def _num_slots(self, d: Dims) -> int:
        return d["num_blocks"] * KV_BLOCK

    def _infer(self, shape: tuple[int, ...], arrays: tuple[np.ndarray, ...] | None) -> Dims:
        if len(shape) != self._ndim:
            return {}
        return {"num_blocks": shape[0], "head_dim": shape[1] * TILE_K, "block_size": shape[3]}


class AiterFp4Kv(_AiterKvBlocks):
    name = "aiter-fp4-kv"
    title = "AITER FP4 K cache kv_cache, preshuffled for pa_mqa_logits_fp4"
    source = "ROCm/aiter PR #5484, indexer_qk_rope_quant_and_cache (FP4 mode), kv_cache"
    shape_doc = "[num_blocks, k_tiles, 4, 64, 16], k_tiles = head_dim/128"
    fields = (_packed(("slot", "dim"),
                      "packed E2M1 codes [n, head_dim/2] per token row, as quantize_mx "
                      "returns them"),)
    _ndim = 5

    def _shape(self, d: Dims) -> tuple[int, ...]:
        return (d["num_blocks"], d["k_tiles"], 4, KV_BLOCK, 16)

    def _grid(self, field: str, d: Dims) -> tuple[tuple[int, int], ...]:
        return ((0, self._num_slots(d)), (0, d["head_dim"] // 2))

    def _offsets(self, field: str, c: tuple[np.ndarray, ...], d: Dims) -> np.ndarray:
        # dim d = 2k + nibble: [slot//64, d//128, (d%128)//32, slot%64, (d%32)//2]
        s, k = c
        b, p = s // KV_BLOCK, s % KV_BLOCK
        dim = 2 * k
        return ((((b * d["k_tiles"] + dim // 128) * 4 + (dim % 128) // 32) * KV_BLOCK + p) * 16
                + (dim % 32) // 2)

    def _views(self, buf: np.ndarray, d: Dims) -> dict[str, _View]:
        # (b, kt, g4, p, j) -> (b, p, kt, g4, j): row = packed byte kt*64 + g4*16 + j
        return {"packed": _View(buf.transpose(0, 3, 1, 2, 4), (d["num_blocks"], KV_BLOCK))}

    def _formulas(self) -> dict[str, str]:
        return {"packed": "[slot//64, d//128, (d%128)//32, slot%64, (d%32)//2], nibble d & 1"}


class AiterFp4KvScale(_AiterKvBlocks):
    name = "aiter-fp4-kv-scale"
    title = "AITER FP4 K scales kv_cache_scale, token-interleaved for one dword per lane"
    source = "ROCm/aiter PR #5484, indexer_qk_rope_quant_and_cache (FP4 mode), kv_cache_scale"
    shape_doc = "[num_blocks, k_tiles, 4, 64]"
    fields = (Field("e8m0", SCALE, ("slot", "group"), "byte", np.dtype(np.uint8),
                    "e8m0 scale bytes [n, head_dim/32] per token row"),)
    _ndim = 4
    notes = ("position p of a block sits at (p%16)*4 + p//16: the scorer reads one dword per "
             "lane holding the scales of tokens nt*16 + lane, nt = 0..3",)

    def _shape(self, d: Dims) -> tuple[int, ...]:
        return (d["num_blocks"], d["k_tiles"], 4, KV_BLOCK)

    def _grid(self, field: str, d: Dims) -> tuple[tuple[int, int], ...]:
        return ((0, self._num_slots(d)), (0, d["groups"]))

    def _offsets(self, field: str, c: tuple[np.ndarray, ...], d: Dims) -> np.ndarray:
        # [slot//64, g//4, g%4, (p%16)*4 + p//16]
        s, g = c
        b, p = s // KV_BLOCK, s % KV_BLOCK
        return ((b * d["k_tiles"] + g // 4) * 4 + g % 4) * KV_BLOCK + (p % 16) * 4 + p // 16

    def _views(self, buf: np.ndarray, d: Dims) -> dict[str, _View]:
        # last axis q = (p%16)*4 + p//16 = [p%16, p//16]; slot digits (b, p//16, p%16)
        split = reshape_view(buf, buf.shape[:3] + (16, 4))
        return {"e8m0": _View(split.transpose(0, 4, 3, 1, 2), (d["num_blocks"], 4, 16))}

    def _formulas(self) -> dict[str, str]:
        return {"e8m0": "[slot//64, g//4, g%4, (p%16)*4 + p//16], p = slot%64"}


class AiterFp8Kv(Layout):
    name = "aiter-fp8-kv"
    title = "AITER FP8 K cache, block-planar: all rows of fp8 data, then float32 scales"
    source = "ROCm/aiter indexer_qk_rope_quant_and_cache (FP8 mode), kv_cache"
    shape_doc = "[num_blocks, block_size, head_dim + 4] (cache_stride 132 for head_dim 128)"
    fields = (Field("data", DATA, ("slot", "dim"), "byte", np.dtype(np.uint8),
                    "fp8 codes [n, head_dim] per token row"),
              Field("scale", SCALE, ("slot",), "f32le", np.dtype(np.float32),
                    "per-token float32 scale [n], stored little-endian"))
    dim_defaults = {"num_blocks": None, "block_size": None, "head_dim": HEAD_DIM}
    notes = ("the buffer is a flat byte run per block, not [block, row, 132] rows: reading it "
             "token-interleaved is BUGS 25",)
    preshuffle = False

    def _derive(self, d: Dims) -> Dims:
        _check_count(d, "num_blocks")
        if d["block_size"] <= 0:
            raise ValueError(f"block_size must be > 0, got {d['block_size']}")
        if d["head_dim"] <= 0:
            raise ValueError(f"head_dim must be > 0, got {d['head_dim']}")
        d["cache_stride"] = d["head_dim"] + 4
        return d

    def _shape(self, d: Dims) -> tuple[int, ...]:
        return (d["num_blocks"], d["block_size"], d["cache_stride"])

    def _num_slots(self, d: Dims) -> int:
        return d["num_blocks"] * d["block_size"]

    def _grid(self, field: str, d: Dims) -> tuple[tuple[int, int], ...]:
        if field == "data":
            return ((0, self._num_slots(d)), (0, d["head_dim"]))
        return ((0, self._num_slots(d)),)

    def _offsets(self, field: str, c: tuple[np.ndarray, ...], d: Dims) -> np.ndarray:
        bsz, dim = d["block_size"], d["head_dim"]
        b, o = c[0] // bsz, c[0] % bsz
        base = b * bsz * d["cache_stride"]
        if field == "scale":
            return base + bsz * dim + 4 * o
        return base + self._data_offset(o, c[1], dim)

    def _data_offset(self, o: np.ndarray, dd: np.ndarray, dim: int) -> np.ndarray:
        return o * dim + dd

    def _views(self, buf: np.ndarray, d: Dims) -> dict[str, _View]:
        nb, bsz, dim = d["num_blocks"], d["block_size"], d["head_dim"]
        flat = reshape_view(buf, (nb, bsz * d["cache_stride"]))
        scale = reshape_view(flat[:, bsz * dim:], (nb, bsz, 4))
        return {"data": self._data_view(flat[:, :bsz * dim], d),
                "scale": _View(scale, (nb, bsz))}

    def _data_view(self, rows: np.ndarray, d: Dims) -> _View:
        nb, bsz = d["num_blocks"], d["block_size"]
        return _View(reshape_view(rows, (nb, bsz, d["head_dim"])), (nb, bsz))

    def _infer(self, shape: tuple[int, ...], arrays: tuple[np.ndarray, ...] | None) -> Dims:
        if len(shape) != 3:
            return {}
        return {"num_blocks": shape[0], "block_size": shape[1], "head_dim": shape[2] - 4}

    def _formulas(self) -> dict[str, str]:
        return {"data": "flat b*B*(D+4) + o*D + d, b = slot//B, o = slot%B",
                "scale": "flat b*B*(D+4) + B*D + 4*o (4 bytes, little-endian float32)"}


class AiterFp8KvPreshuffle(AiterFp8Kv):
    name = "aiter-fp8-kv-preshuffle"
    title = ("AITER FP8 K cache, block-planar, data rows preshuffled into 16x16 MFMA tiles, "
             "then float32 scales")
    source = "ROCm/aiter indexer_qk_rope_quant_and_cache (FP8 mode, preshuffle=True), kv_cache"
    preshuffle = True

    def _derive(self, d: Dims) -> Dims:
        d = super()._derive(d)
        if d["block_size"] % 16:
            raise ValueError("preshuffle requires cache_block_size to be a multiple of 16, "
                             f"got {d['block_size']}")
        if d["head_dim"] % 16:
            raise ValueError(f"preshuffle requires head_dim to be a multiple of 16, "
                             f"got {d['head_dim']}")
        return d

    def _data_offset(self, o: np.ndarray, dd: np.ndarray, dim: int) -> np.ndarray:
        # (o//16)*2048 + (d//16)*256 + (o%16)*16 + d%16 for D = 128
        return (o // 16) * 16 * dim + (dd // 16) * 256 + (o % 16) * 16 + dd % 16

    def _data_view(self, rows: np.ndarray, d: Dims) -> _View:
        nb, bsz, dim = d["num_blocks"], d["block_size"], d["head_dim"]
        tiles = reshape_view(rows, (nb, bsz // 16, dim // 16, 16, 16))
        # (b, o//16, d//16, o%16, d%16) -> (b, o//16, o%16, d//16, d%16)
        return _View(tiles.transpose(0, 1, 3, 2, 4), (nb, bsz // 16, 16))

    def _formulas(self) -> dict[str, str]:
        return {"data": "flat b*B*(D+4) + (o//16)*16*D + (d//16)*256 + (o%16)*16 + d%16",
                "scale": "flat b*B*(D+4) + B*D + 4*o (4 bytes, little-endian float32)"}
