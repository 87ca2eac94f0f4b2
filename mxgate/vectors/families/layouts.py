"""Cache and scale layouts (SPEC section 5): index-map goldens and the FP4 cache writers.

``layout.scatter`` groups (one per layout) hold logical arrays, slots and the full buffer after
writing them into a poison-filled buffer: where every logical byte lands, which bytes stay
poison, which padding becomes zero. The writer groups (``fp4_indexer.quantize``,
``aiter-fp4-kv.store``, ``sglang-page68.store``, ``sglang-page68.gather``) are the catalogue ops
a quantize-and-store kernel implements, judged per profile.
"""

from __future__ import annotations

import numpy as np

from mxgate.op_table import OpName
from mxgate import oracle
from mxgate.oracle import layouts
from mxgate.oracle import profiles as _profiles
from mxgate.vectors.families._builder import FamilyBuilder, Outputs
from mxgate.inputs.samples import normal, pow2_f64

NAME = "layouts"
DESCRIPTION = "Layouts: layout.scatter index-map goldens for every layout, FP4 quantize-and-store writers"
SEED = 0x4D584703
POISON_NOTE = "buffers start filled with the poison byte 0xA5"


def available() -> str | None:
    return None


# layout name -> [(slug, dims, slots or None, tier, flags)]
def _plans(rng: np.random.Generator) -> dict[str, list[tuple[str, dict[str, int], np.ndarray, str, list[str]]]]:
    sparse64 = np.array([70, 3, -1, 64, 127, 0, 5, -7, 66], np.int64)
    sparse_rows = np.array([4, -1, 0, 2], np.int64)
    common = ["layout-index-map", "BUGS-23", "BUGS-25"]
    sparse = common + ["slot-negative", "slot-order", "multi-block", "poison", "BUGS-26", "BUGS-28"]
    plans = {
        "aiter-fp4-q": [("dense", {"num_tokens": 2, "num_heads": 16}, np.arange(2), "quick", common + ["nibble-order", "BUGS-30"]),
                        ("masked", {"num_tokens": 3, "num_heads": 32}, np.array([0, -1, 5]), "default",
                         common + ["slot-negative", "poison", "BUGS-28"])],
        "aiter-fp4-q-scale": [("h32-padded", {"num_tokens": 2, "num_heads": 32}, np.arange(2), "quick",
                               common + ["padding", "BUGS-21", "BUGS-22"]),
                              ("h64-masked", {"num_tokens": 3, "num_heads": 64}, np.array([1, -1, 2]), "default",
                               common + ["padding", "slot-negative", "poison", "BUGS-28"])],
        "aiter-fp4-kv": [("dense", {"num_blocks": 1}, np.arange(64), "quick", common + ["nibble-order", "BUGS-30"]),
                         ("sparse", {"num_blocks": 2}, sparse64, "default", sparse)],
        "aiter-fp4-kv-scale": [("dense", {"num_blocks": 1}, np.arange(64), "quick", common),
                               ("sparse", {"num_blocks": 2}, sparse64, "default", sparse)],
        "aiter-fp8-kv": [("dense", {"num_blocks": 1, "block_size": 16}, np.arange(16), "quick", common),
                         ("sparse", {"num_blocks": 3, "block_size": 16}, np.array([17, 3, -1, 40, 0, 33]), "default", sparse)],
        "aiter-fp8-kv-preshuffle": [("dense", {"num_blocks": 1, "block_size": 32}, np.arange(32), "quick",
                                     common + ["preshuffle", "BUGS-31"]),
                                    ("sparse", {"num_blocks": 2, "block_size": 16}, np.array([17, 3, -1, 30, 0]), "default",
                                     sparse + ["preshuffle", "BUGS-31"])],
        "sglang-page68": [("dense", {"num_pages": 1, "page_size": 64}, np.arange(64), "quick", common),
                          ("sparse", {"num_pages": 2, "page_size": 64}, sparse64, "default", sparse)],
        "packed-row": [("dense", {"num_rows": 3}, np.arange(3), "quick", common),
                       ("sparse", {"num_rows": 5}, sparse_rows, "default", common + ["slot-negative", "slot-order", "poison"])],
        "sglang-page8": [("dense", {"num_pages": 1}, np.arange(64), "quick", common),
                         ("sparse", {"num_pages": 2}, sparse64, "default", sparse)],
    }
    del rng
    return plans


def _logical(layout, dims: dict[str, int], n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Random logical arrays for n rows, with distinct-looking bytes so misplacements show.

    Row shapes and dtypes come from the layout itself (a gather of one row of a fresh buffer).
    """
    probe = layout.gather(layout.new_buffer(**dims), **dims)
    out: dict[str, np.ndarray] = {}
    for f, a in zip(layout.fields, probe):
        shape = (n,) + a.shape[1:]
        if a.dtype == np.float32:
            out[f.name] = rng.uniform(1e-3, 1.0, size=shape).astype(np.float32)
        elif a.dtype == np.int32:
            out[f.name] = rng.integers(0, 1 << 31, size=shape, dtype=np.int64).astype(np.int32)
        else:
            out[f.name] = rng.integers(0, 256, size=shape, dtype=np.int64).astype(a.dtype)
    return out


def build(fb: FamilyBuilder) -> None:
    rng = fb.rng(30)
    for name, plan in _plans(rng).items():
        layout = layouts.get(name)
        fields = [f.name for f in layout.fields]
        g = fb.group(f"layout.scatter/{name}", "layout.scatter",
                     f"{name}: logical arrays + slots scattered into a fresh buffer ({POISON_NOTE}). "
                     + layout.title, fields + ["slots"], ["buffer"], params={"layout": name, "poison": layouts.POISON})
        for slug, dims, slots, tier, flags in plan:
            slots = np.asarray(slots, np.int64)
            arrays = _logical(layout, dims, slots.size, rng)
            buf = layout.new_buffer(**dims)
            layout.scatter(buf, *[arrays[f] for f in fields], slots=slots, **dims)
            inputs = dict(arrays, slots=slots)
            g.case(slug, f"dims {dims}; slots {slots.tolist() if slots.size <= 12 else f'0..{slots.size - 1}'}",
                   flags, inputs, lambda p, buf=buf: {"buffer": buf}, tier=tier, params={"dims": dims})
    _writers(fb, layouts)


def _k_rows(rng: np.random.Generator, n: int) -> np.ndarray:
    """bf16 bit patterns of n K rows of 128, with a zero row and a tiny row among them."""
    x = (normal(rng, (n, 128)) * pow2_f64(rng.integers(-8, 8, size=(n, 1)))).astype(np.float32)
    x[1] = 0.0
    x[2] = 1e-30
    return oracle.bf16_bits(x)


def _writers(fb: FamilyBuilder, layouts) -> None:
    rng = fb.rng(31)
    q = fb.group(OpName.FP4_INDEXER_QUANTIZE, OpName.FP4_INDEXER_QUANTIZE, "bf16 K rows [rows, 128] -> packed [rows, 64] + "
                 "e8m0 [rows, 4] under the profile (the sglang/AITER indexer row quantizer)", ["x_bf16"], ["packed", "e8m0"])
    for slug, n, tier in (("rows-8", 8, "quick"), ("rows-64", 64, "default")):
        xb = _k_rows(rng, n)

        def compute(p: _profiles.Profile, xb=xb) -> Outputs:
            packed, e8m0 = oracle.quantize_mx(oracle.bf16_to_f32(xb), p)
            return {"packed": packed, "e8m0": e8m0}

        q.case(slug, f"{n} bf16 rows incl. a zero row and a tiny row", ["random", "zero-block", "tiny-block", "BUGS-19",
               "BUGS-20"], {"x_bf16": xb}, compute, tier=tier)

    kv, kvs = layouts.get("aiter-fp4-kv"), layouts.get("aiter-fp4-kv-scale")
    st = fb.group(OpName.AITER_FP4_KV_STORE, OpName.AITER_FP4_KV_STORE, "quantize bf16 K rows and store them at their slots "
                  f"in the AITER FP4 KV cache and scale buffers ({POISON_NOTE}; slot < 0 rows are skipped)",
                  ["k_bf16", "slots", "kv_cache", "kv_scale"], ["kv_cache", "kv_scale"])
    for slug, nb, slots, tier in (("block-1", 1, np.arange(8), "quick"),
                                  ("sparse", 2, np.array([70, 3, -1, 64, 127, 0, 5, -7, 66]), "default")):
        slots = np.asarray(slots, np.int64)
        kb = _k_rows(rng, slots.size)
        cache0, scale0 = kv.new_buffer(num_blocks=nb), kvs.new_buffer(num_blocks=nb)

        def compute(p: _profiles.Profile, kb=kb, slots=slots, cache0=cache0, scale0=scale0) -> Outputs:
            packed, e8m0 = oracle.quantize_mx(oracle.bf16_to_f32(kb), p)
            cache, scale = cache0.copy(), scale0.copy()
            kv.scatter(cache, packed, slots=slots)
            kvs.scatter(scale, e8m0, slots=slots)
            return {"kv_cache": cache, "kv_scale": scale}

        st.case(slug, f"{nb} block(s) of 64, slots {slots.tolist()}", ["layout-index-map", "slot-negative", "slot-order",
                "poison", "multi-block", "BUGS-25", "BUGS-26", "BUGS-28"], {"k_bf16": kb, "slots": slots,
                "kv_cache": cache0, "kv_scale": scale0}, compute, tier=tier)

    page = layouts.get("sglang-page68")
    sp = fb.group(OpName.SGLANG_PAGE68_STORE, OpName.SGLANG_PAGE68_STORE, "quantize bf16 K rows and store them in sglang's "
                  f"68-byte-per-token pages ({POISON_NOTE})", ["k_bf16", "slots", "cache"], ["cache"])
    gp = fb.group(OpName.SGLANG_PAGE68_GATHER, OpName.SGLANG_PAGE68_GATHER, "read (packed, e8m0) rows back from 68-byte pages "
                  "at the given slots", ["cache", "slots"], ["packed", "e8m0"])
    for slug, pages, slots, tier in (("page-1", 1, np.arange(8), "quick"),
                                     ("sparse", 2, np.array([70, 3, -1, 64, 127, 0, 5, -7, 66]), "default")):
        slots = np.asarray(slots, np.int64)
        kb = _k_rows(rng, slots.size)
        cache0 = page.new_buffer(num_pages=pages)

        def compute(p: _profiles.Profile, kb=kb, slots=slots, cache0=cache0) -> Outputs:
            packed, e8m0 = oracle.quantize_mx(oracle.bf16_to_f32(kb), p)
            cache = cache0.copy()
            page.scatter(cache, packed, e8m0, slots=slots)
            return {"cache": cache}

        sp.case(slug, f"{pages} page(s) of 64 slots, slots {slots.tolist()}", ["layout-index-map", "slot-negative",
                "slot-order", "poison", "multi-block", "BUGS-25", "BUGS-28"], {"k_bf16": kb, "slots": slots, "cache": cache0},
                compute, tier=tier)
        filled = rng.integers(0, 256, size=cache0.shape, dtype=np.int64).astype(np.uint8)
        read = np.where(slots < 0, 0, slots)  # gather reads only valid slots
        packed, e8m0 = page.gather(filled, slots=read)
        gp.case(slug, f"random page bytes, read at slots {read.tolist()}", ["layout-index-map", "slot-order", "BUGS-25"],
                {"cache": filled, "slots": read}, lambda p, a=packed, b=e8m0: {"packed": a, "e8m0": b}, tier=tier)
