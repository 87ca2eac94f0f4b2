"""mxgate explain: PR #5484's figure, one mutation test per root-cause class, precedence,
report structure, CLI, loaders and the heat map."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mxgate import oracle
from mxgate.explain import COUNT_KEYS, PRECEDENCE, explain
from mxgate.oracle import layouts

ml_dtypes = pytest.importorskip("ml_dtypes")

PR_SEED = 5484  # PR #5484's figure: 4096 x 128 = 524,288 N(0, 1) values rounded to bf16


def gen(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


def only(report, name: str, n: int) -> None:
    """Every differing unit is of class ``name`` and there are ``n`` of them."""
    assert n > 0, "the mutation changed nothing"
    nonzero = {k: v for k, v in report.counts.items() if v}
    assert nonzero == {name: n}, nonzero


def nibble_changes(e: np.ndarray, a: np.ndarray) -> int:
    x = np.asarray(e) ^ np.asarray(a)
    return int(np.count_nonzero(x & 0x0F) + np.count_nonzero(x & 0xF0))


def normal(seed: int, shape=(256, 128)) -> np.ndarray:
    return gen(seed).standard_normal(shape, dtype=np.float32)


# ---- acceptance 1: PR #5484's figure ------------------------------------------------------


@pytest.fixture(scope="module")
def pr_sample():
    x = gen(PR_SEED).standard_normal((4096, 128), dtype=np.float32).astype(ml_dtypes.bfloat16)
    pa, sa = oracle.quantize_mx(x, "argmin")
    pg, sg = oracle.quantize_mx(x, "gfx950")
    return x, pa, sa, pg, sg


def test_pr5484_figure(pr_sample):
    x, pa, sa, pg, sg = pr_sample
    r = explain(pa, pg, layout="packed-row", profile="argmin", input=x, scales=(sa, sg))
    assert r.compared_nibbles == 524_288
    assert r.differing_nibbles == 30_975  # 5.908% (the PR: 5.87%, 30,763)
    assert abs(r.differing_nibbles / r.compared_nibbles - 0.059) < 0.001
    want = dict.fromkeys(COUNT_KEYS, 0) | {"sign_of_zero": 27_992, "tie_direction": 2_983}
    assert r.counts == want
    assert r.unverified == 0
    # the hardware rule is what the actual bytes follow; AITER's f32_to_mxfp4 matches it
    assert {"gfx950", "aiter-py"} <= set(r.matching_profiles)
    assert "argmin" not in r.matching_profiles
    assert "argmin" in r.expected_matching_profiles
    assert "gfx950" not in r.expected_matching_profiles
    ties = [r.rows[i] for i in r.rows.of_class("tie_direction")]
    assert all("down" in row["detail"].split("actual")[0] for row in ties)  # argmin: lower value
    assert all("even" in row["detail"].split("actual")[1] for row in ties)  # hardware: to even
    zero = r.rows[int(r.rows.of_class("sign_of_zero")[0])]
    assert zero["expected"]["code"] == 0x0 and zero["actual"]["code"] == 0x8


def test_pr5484_figure_without_input(pr_sample):
    x, pa, sa, pg, sg = pr_sample
    r = explain(pa, pg, layout="packed-row", profile="argmin")
    assert r.counts["sign_of_zero"] == 27_992 and r.counts["tie_direction"] == 2_983
    assert r.total == 30_975 and r.unverified == 30_975  # ties read off adjacent codes only


# ---- acceptance 2: one mutation per class -------------------------------------------------


@pytest.mark.parametrize("with_input", [True, False])
def test_sign_of_zero(with_input):
    x = normal(1)
    p, s = oracle.quantize_mx(x, "gfx950")
    codes = oracle.unpack_nibbles(p)
    pick = ((codes & 7) == 0) & (gen(2).random(codes.shape) < 0.5)
    a = oracle.pack_nibbles(codes ^ (pick.astype(np.uint8) << 3))
    r = explain(p, a, layout="packed-row", input=x if with_input else None, scales=s)
    only(r, "sign_of_zero", int(pick.sum()))
    assert r.unverified == (0 if with_input else int(pick.sum()))


def _midpoint_input(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Groups whose max is 6 * 2^k (scale 2^k exactly) and whose other elements are mostly
    exact midpoints (times 2^k); returns (x, midpoint mask)."""
    g = gen(seed)
    mids = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], np.float32)
    rows, n = 64, 128
    vals = mids[g.integers(0, 7, (rows, n))] * np.where(g.random((rows, n)) < 0.5, -1, 1)
    is_mid = g.random((rows, n)) < 0.7
    vals = np.where(is_mid, vals, g.uniform(-5.9, 5.9, (rows, n))).astype(np.float32)
    vals[:, ::32] = 6.0  # group max: the scale is 2^k exactly
    is_mid[:, ::32] = False
    k = g.integers(-20, 20, (rows, n // 32)).repeat(32, axis=1)
    return (vals * np.exp2(k)).astype(np.float32), is_mid


@pytest.mark.parametrize("with_input", [True, False])
def test_tie_direction(with_input):
    x, is_mid = _midpoint_input(3)
    p, s = oracle.quantize_mx(x, "gfx950")
    codes = oracle.unpack_nibbles(p)
    xs = x / np.exp2(s.astype(np.int64) - 127).repeat(32, axis=1)
    k = np.searchsorted([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], np.abs(xs))
    other = (2 * k + 1) - (codes & 7)  # the midpoint's other neighbour
    sign = np.where(xs < 0, 8, 0)
    mutated = np.where(is_mid, sign | other, codes).astype(np.uint8)
    a = oracle.pack_nibbles(mutated)
    r = explain(p, a, layout="packed-row", input=x if with_input else None, scales=s)
    only(r, "tie_direction", nibble_changes(p, a))
    assert r.total == int(is_mid.sum())
    row = r.rows[0]
    if with_input:
        assert row["verified"] and "is the midpoint of" in row["detail"]
    else:
        assert not row["verified"] and "unverified" in row["detail"]


def _shift_groups(x: np.ndarray, s: np.ndarray, seed: int, profile: str = "gfx950"):
    g = gen(seed)
    shift = np.where(g.random(s.shape) < 0.3, np.where(g.random(s.shape) < 0.5, -1, 1), 0)
    sa = (s.astype(np.int16) + shift).astype(np.uint8)
    codes = oracle.encode_e2m1(x, profile, scale=sa.repeat(32, axis=-1))
    return sa, oracle.pack_nibbles(codes)


@pytest.mark.parametrize("how", ["input+pair", "pair", "input-inferred"])
def test_scale_off_by_one(how):
    x = normal(4)
    p, s = oracle.quantize_mx(x, "gfx950")
    sa, a = _shift_groups(x, s, 5)
    kw = {"input+pair": dict(input=x, scales=(s, sa)), "pair": dict(scales=(s, sa)),
          "input-inferred": dict(input=x)}[how]
    r = explain(p, a, layout="packed-row", **kw)
    # a pair of scales is compared too: each shifted e8m0 byte is one more unit
    shifted = int(np.count_nonzero(s != sa)) if "pair" in how else 0
    only(r, "scale_off_by_one", nibble_changes(p, a) + shifted)
    assert r.differing_scale_bytes == shifted
    if how == "input-inferred":
        assert "inferred" in r.rows[0]["detail"]


def test_scale_off_by_one_in_buffer_scales():
    """sglang page68 carries its e8m0 bytes: they count as scale_off_by_one too."""
    x = normal(6, (128, 128))
    p, s = oracle.quantize_mx(x, "gfx950")
    sa, a = _shift_groups(x, s, 7)
    L = layouts.get("sglang-page68")
    E, A = L.new_buffer(num_pages=2), L.new_buffer(num_pages=2)
    L.scatter(E, p, s)
    L.scatter(A, a, sa)
    r = explain(E, A, layout="sglang-page68", input=x)
    only(r, "scale_off_by_one", nibble_changes(p, a) + int(np.count_nonzero(s != sa)))
    assert r.matching_profiles == []  # no profile derives the shifted scales


def test_saturation():
    """OCP's floor scale leaves |x/S| up to 8: a non-saturating encoder breaks those."""
    x = normal(8)
    p, s = oracle.quantize_mx(x, "ocp")
    codes = oracle.unpack_nibbles(p)
    xs = x / np.exp2(s.astype(np.int64) - 127).repeat(32, axis=1)
    beyond = np.abs(xs) > 6
    assert beyond.sum() > 50
    wrong = gen(9).integers(0, 7, codes.shape).astype(np.uint8)  # any magnitude but 6
    first = np.unravel_index(np.flatnonzero(beyond)[:10], codes.shape)
    wrong[first] = 6  # 4.0, the neighbour of 6: with |x/S| > 6 it is still saturation
    mutated = np.where(beyond, (codes & 8) | wrong, codes).astype(np.uint8)
    a = oracle.pack_nibbles(mutated)
    r = explain(p, a, layout="packed-row", profile="ocp", input=x, scales=s)
    only(r, "saturation", int(beyond.sum()))


def _nan_input(seed: int) -> tuple[np.ndarray, np.ndarray]:
    x = normal(seed)
    g = gen(seed + 1)
    groups = g.choice(x.size // 32, 30, replace=False)
    for i, gi in enumerate(groups):
        r, c = divmod(int(gi) * 32, x.shape[1])
        x[r, c + int(g.integers(0, 32))] = (np.nan, np.inf, -np.inf)[i % 3]
    mask = np.zeros(x.size // 32, bool)
    mask[groups] = True
    return x, mask.reshape(x.shape[0], -1)


@pytest.mark.parametrize("with_input", [True, False])
def test_nan_inf(with_input):
    x, groups = _nan_input(10)
    p, s = oracle.quantize_mx(x, "gfx950")
    assert np.all(s[groups] == 0xFF)
    other, _ = oracle.quantize_mx(x, "aiter-gfx942")  # NaN -> 0 instead of +-6
    elem = groups.repeat(16, axis=1)
    a = np.where(elem, other, p)
    r = explain(p, a, layout="packed-row", input=x if with_input else None, scales=s)
    only(r, "nan_inf", nibble_changes(p, a))


def _kv(seed: int, nb: int = 4, profile: str = "gfx950"):
    x = normal(seed, (nb * 64, 128))
    p, s = oracle.quantize_mx(x, profile)
    kv = layouts.get("aiter-fp4-kv")
    buf = kv.new_buffer(num_blocks=nb)
    kv.scatter(buf, p)
    return x, p, s, buf


def test_nibble_swap():
    x, p, s, E = _kv(11)
    A = E.copy()
    A[1::2] = (A[1::2] << 4) | (A[1::2] >> 4)  # blocks 1 and 3 written high nibble first
    r = explain(E, A, layout="aiter-fp4-kv", input=x, scales=s)
    only(r, "nibble_swap", nibble_changes(E, A))
    assert {row["coords"]["slot"] // 64 for row in r.rows[:: max(1, len(r.rows) // 50)]} == {1, 3}


@pytest.mark.parametrize("pair", [("aiter-fp4-kv", "sglang-page8"),
                                  ("aiter-fp4-kv-scale", "sglang-page8-scale")])
def test_layout_permutation_page8(pair):
    """sglang's page8 writer fills AITER's buffers (same shapes) in its own placement."""
    x = normal(12, (256, 128))
    p, s = oracle.quantize_mx(x, "gfx950")
    data = p if pair[0] == "aiter-fp4-kv" else s
    want_l, got_l = layouts.get(pair[0]), layouts.get(pair[1])
    E, A = want_l.new_buffer(num_blocks=4), got_l.new_buffer(num_pages=4)
    want_l.scatter(E, data)
    got_l.scatter(A, data)
    r = explain(E, A, layout=pair[0])
    n = nibble_changes(E, A) if pair[0] == "aiter-fp4-kv" else int(np.count_nonzero(E != A))
    only(r, "layout_permutation", n)
    assert r.permutation_layout == pair[1]
    assert pair[1] in r.rows[0]["detail"]


def test_layout_permutation_fp8_preshuffle():
    g = gen(13)
    data = g.integers(0, 0x7E, (128, 128), dtype=np.uint8)
    scale = g.random(128).astype(np.float32)
    F, P = layouts.get("aiter-fp8-kv"), layouts.get("aiter-fp8-kv-preshuffle")
    E, A = F.new_buffer(num_blocks=2, block_size=64), P.new_buffer(num_blocks=2, block_size=64)
    F.scatter(E, data, scale)
    P.scatter(A, data, scale)
    r = explain(E, A, layout="aiter-fp8-kv")
    only(r, "layout_permutation", int(np.count_nonzero(E != A)))
    assert r.permutation_layout == "aiter-fp8-kv-preshuffle"


def test_untouched_padding():
    """q_scale_out padding heads written as 127 (1.0) instead of 0 (BUGS 21, 22)."""
    e8 = gen(14).integers(100, 130, (4, 32, 4), dtype=np.uint8)
    QS = layouts.get("aiter-fp4-q-scale")
    E = QS.new_buffer(num_tokens=4, num_heads=32)
    QS.scatter(E, e8, num_heads=32)
    A = E.copy()
    A[..., 2:] = 127  # QS_PAD = 4 columns, heads 32..63 are padding
    r = explain(E, A, layout="aiter-fp4-q-scale", dims={"num_heads": 32})
    only(r, "untouched_bytes", int(np.count_nonzero(E != A)))
    assert r.rows[0]["region"] == "zero_pad" and r.rows[0]["coords"]["head"] >= 32


def test_untouched_slots():
    """A kernel wrote rows whose slot was not in the mapping."""
    x = normal(15, (100, 128))
    p, _ = oracle.quantize_mx(x, "gfx950")
    slots = gen(16).permutation(256)[:100]
    kv = layouts.get("aiter-fp4-kv")
    E = kv.new_buffer(num_blocks=4)
    kv.scatter(E, p, slots=slots)
    A = E.copy()
    stray = np.setdiff1d(np.arange(256), slots)[:20]
    kv.scatter(A, p[:20] ^ np.uint8(0x88), slots=stray)  # garbage, some of it sign-of-zero-like
    r = explain(E, A, layout="aiter-fp4-kv", slots=slots)
    only(r, "untouched_bytes", nibble_changes(E, A))
    assert {row["coords"]["slot"] for row in r.rows} <= set(stray.tolist())


@pytest.mark.slow
def test_index_overflow_tail():
    """Rows past byte 2^30 (2^31 nibbles: a signed int32 element index) never written."""
    big, w = 1 << 30, 1 << 16
    shape = ((big + (1 << 20)) // 64, 64)
    E, A = np.zeros(shape, np.uint8), np.zeros(shape, np.uint8)  # lazily zeroed pages
    fe, fa = E.reshape(-1), A.reshape(-1)
    block = gen(17).integers(0, 256, 2 * w, dtype=np.uint8)
    fe[big - w:big + w] = block
    fa[big - w:big] = block[:w]  # below the boundary: right
    fe[64:72], fa[64:72] = 0x08, 0x00  # far from it: ordinary sign-of-zero mismatches
    r = explain(E, A, layout="packed-row")
    assert r.counts["sign_of_zero"] == 8
    assert r.counts["index_overflow"] == nibble_changes(fe[big:big + w], fa[big:big + w])
    assert r.total == r.counts["index_overflow"] + 8
    row = r.rows[len(r.rows) - 1]
    assert row["class"] == "index_overflow" and "2^30" in row["detail"]


@pytest.mark.slow
def test_index_overflow_wrapped_write():
    """An unsigned 32-bit nibble index wraps 2^31 bytes early: the head holds the tail's data."""
    big, w = 1 << 31, 1 << 14
    shape = ((big + (1 << 20)) // 64, 64)
    E, A = np.zeros(shape, np.uint8), np.zeros(shape, np.uint8)  # lazily zeroed pages
    fe, fa = E.reshape(-1), A.reshape(-1)
    g = gen(18)
    fe[:w] = g.integers(0, 256, w, dtype=np.uint8)
    fe[big:big + w] = g.integers(0, 256, w, dtype=np.uint8)
    fa[:w] = fe[big:big + w]  # the wrapped writes landed at the start
    r = explain(E, A, layout="packed-row")
    only(r, "index_overflow", nibble_changes(fe[:w], fa[:w]) + nibble_changes(fe[big:big + w], 0))
    assert "2^31 bytes further on" in r.rows[0]["detail"]


@pytest.mark.parametrize("with_input", [True, False])
def test_unexplained(with_input):
    x = normal(19)
    p, s = oracle.quantize_mx(x, "gfx950")
    codes = oracle.unpack_nibbles(p)
    g = gen(20)
    pick = ((codes & 7) >= 1) & ((codes & 7) <= 4) & (g.random(codes.shape) < 0.1)
    pick[:, 1::2] = False  # low nibbles only: no byte can look swapped
    mutated = np.where(pick, codes + 2, codes).astype(np.uint8)  # two steps up, never to 6
    a = oracle.pack_nibbles(mutated)
    r = explain(p, a, layout="packed-row", input=x if with_input else None, scales=s)
    only(r, "unexplained", int(pick.sum()))


# ---- precedence ---------------------------------------------------------------------------


def test_precedence_order_is_documented():
    assert set(PRECEDENCE) == set(COUNT_KEYS) and PRECEDENCE[-1] == "unexplained"
    assert PRECEDENCE.index("nibble_swap") < PRECEDENCE.index("sign_of_zero")
    assert PRECEDENCE.index("saturation") < PRECEDENCE.index("tie_direction")


def test_swap_beats_sign_of_zero():
    """0x80 <-> 0x08 is both a swap and two +0/-0 flips: a buffer-wide swap wins."""
    e = gen(21).integers(0, 256, (64, 64), dtype=np.uint8)
    e[:, :8] = 0x80
    a = (e << 4) | (e >> 4)
    r = explain(e, a, layout="packed-row")
    only(r, "nibble_swap", nibble_changes(e, a))


def test_scale_off_by_one_beats_saturation():
    """BUGS 1: a scale one too small saturates the block max; the cause is the scale."""
    x = normal(22)
    p, s = oracle.quantize_mx(x, "gfx950")
    sa = s.copy()
    sa[::3] -= 1
    a = oracle.pack_nibbles(oracle.encode_e2m1(x, "gfx950", scale=sa.repeat(32, axis=1)))
    r = explain(p, a, layout="packed-row", input=x, scales=(s, sa))
    only(r, "scale_off_by_one", nibble_changes(p, a) + int(np.count_nonzero(s != sa)))


def test_nan_inf_beats_sign_of_zero():
    """ml_dtypes sends +NaN to 0x8, aiter-gfx942 to 0x0: the cause is the NaN rule."""
    x, groups = _nan_input(23)
    e, s = oracle.quantize_mx(x, "ml_dtypes")
    a, _ = oracle.quantize_mx(x, "aiter-gfx942")
    mask = groups.repeat(16, axis=1)
    a = np.where(mask, a, e)
    r = explain(e, a, layout="packed-row", profile="ml_dtypes", input=x, scales=s)
    only(r, "nan_inf", nibble_changes(e, a))


def test_saturation_beats_tie_without_input():
    e = np.full((4, 16), 0x77, np.uint8)  # +6 everywhere
    a = e.copy()
    a[0, 0] = 0x71  # +6 -> +0.5: wrapped, not a neighbour
    a[1, 0] = 0x76  # +6 -> +4: neighbours, reads as a tie without input
    r = explain(e, a, layout="packed-row")
    assert r.counts["saturation"] == 1 and r.counts["tie_direction"] == 1


# ---- report structure ---------------------------------------------------------------------


def test_report_structure(pr_sample):
    x, pa, sa, pg, sg = pr_sample
    r = explain(pa[:64], pg[:64], layout="packed-row", profile="argmin", input=x[:64],
                scales=(sa[:64], sg[:64]))
    assert list(r.counts) == list(COUNT_KEYS)
    row = r.rows[0]
    for key in ("offset", "nibble", "field", "coords", "expected", "actual", "class", "detail",
                "input", "x_over_scale", "expected_profiles", "actual_profiles"):
        assert key in row
    assert set(row["coords"]) == {"row", "dim", "group"}
    for side in ("expected", "actual"):
        assert {"code", "sign", "exponent", "mantissa", "value", "scale", "scaled"} <= set(row[side])
    doc = json.loads(r.to_json())
    assert doc["counts"] == r.counts and len(doc["rows"]) == len(r.rows)
    assert json.loads(r.to_json(max_rows=3))["rows_truncated"]
    text = r.summary()
    assert "hex grid" in text and ("x." in text or ".x" in text)
    for name in COUNT_KEYS:
        assert name in text


def test_equal_buffers():
    p, _ = oracle.quantize_mx(normal(24, (8, 128)), "gfx950")
    r = explain(p, p.copy(), layout="packed-row")
    assert r.equal and r.total == 0 and list(r.counts) == list(COUNT_KEYS)
    assert "expected == actual" in r.summary()


# ---- a scale difference is a difference, an input must fit, profiles must exist ----------


@pytest.mark.parametrize("with_input", [False, True])
@pytest.mark.parametrize("change, cls", [(1, "scale_off_by_one"), (-1, "scale_off_by_one"),
                                         ("0xFF", "nan_inf"), (5, "unexplained")])
def test_scale_argument_difference_is_counted(change, cls, with_input):
    """Equal data bytes, one e8m0 byte of the actual scales changed: one unit, exit 1."""
    x = normal(40, (8, 128))
    p, s = oracle.quantize_mx(x, "gfx950")
    sa = s.copy()
    sa[3, 2] = 0xFF if change == "0xFF" else int(s[3, 2]) + change
    r = explain(p, p.copy(), layout="packed-row", scales=(s, sa),
                input=x if with_input else None)
    assert not r.equal
    assert (r.differing_bytes, r.differing_scale_bytes, r.scale_bytes) == (0, 1, s.size)
    only(r, cls, 1)
    (row,) = r.rows
    assert row["source"] == "scales" and row["field"] == "scales" and row["region"] == "scale"
    assert row["coords"] == {"row": 3, "group": 2} and row["offset"] == 3 * 4 + 2
    assert (row["expected"]["code"], row["actual"]["code"]) == (int(s[3, 2]), int(sa[3, 2]))
    assert bool(r.rows.columns["in_scales"][0])
    text = r.summary()
    assert "expected == actual" not in text and "1 differ" in text
    assert json.loads(r.to_json())["differing_scale_bytes"] == 1
    if with_input:  # the profiles named are exactly those whose own quantizer gives that byte
        byte_under = {n: int(oracle.quantize_mx(x, n)[1][3, 2]) for n in oracle.profiles.names()}
        assert "gfx950" in row["expected_profiles"]
        assert sorted(row["actual_profiles"]) == sorted(n for n, b in byte_under.items() if b == int(sa[3, 2]))


def test_equal_scale_pair_is_equal():
    x = normal(41, (8, 128))
    p, s = oracle.quantize_mx(x, "gfx950")
    r = explain(p, p.copy(), layout="packed-row", scales=(s, s.copy()))
    assert r.equal and r.total == 0 and r.differing_scale_bytes == 0 and r.scale_bytes == s.size
    shared = explain(p, p.copy(), layout="packed-row", scales=s)
    assert shared.equal and shared.scale_bytes is None  # one array for both: nothing to compare


def test_scale_difference_counts_the_same_inside_or_beside_the_layout():
    """One e8m0 byte one binade up: the same unit whether the scales sit in the buffer
    (sglang-page68), in the companion scale buffer or in the logical form beside it."""
    x = normal(42, (128, 128))
    p, s = oracle.quantize_mx(x, "gfx950")
    sa = s.copy()
    sa[70, 3] += 1
    page68 = layouts.get("sglang-page68")
    E, A = page68.new_buffer(num_pages=2), page68.new_buffer(num_pages=2)
    page68.scatter(E, p, s)
    page68.scatter(A, p, sa)
    kv, ks = layouts.get("aiter-fp4-kv"), layouts.get("aiter-fp4-kv-scale")
    K = kv.new_buffer(num_blocks=2)
    kv.scatter(K, p)
    SE, SA = ks.new_buffer(num_blocks=2), ks.new_buffer(num_blocks=2)
    ks.scatter(SE, s)
    ks.scatter(SA, sa)
    reports = {"in the buffer": explain(E, A, layout="sglang-page68"),
               "companion buffers": explain(K, K.copy(), layout="aiter-fp4-kv", scales=(SE, SA)),
               "logical pair": explain(K, K.copy(), layout="aiter-fp4-kv", scales=(s, sa))}
    for how, r in reports.items():
        only(r, "scale_off_by_one", 1)
        assert not r.equal, how
        (row,) = r.rows
        assert (row["coords"]["slot"], row["coords"]["group"]) == (70, 3), how


def test_scale_argument_rows_outside_the_slot_mapping_are_untouched():
    x = normal(43, (64, 128))
    slots = np.arange(0, 128, 2)  # even slots written
    p, s_rows = oracle.quantize_mx(x, "gfx950")
    kv = layouts.get("aiter-fp4-kv")
    K = kv.new_buffer(num_blocks=2)
    kv.scatter(K, p, slots=slots)
    s = np.full((128, 4), layouts.POISON, np.uint8)
    s[slots] = s_rows
    sa = s.copy()
    sa[7, 0] ^= 0x10  # slot 7 is not in the mapping: its scale bytes must stay
    sa[8, 1] += 1  # slot 8 is: a real one-binade difference
    r = explain(K, K.copy(), layout="aiter-fp4-kv", scales=(s, sa), slots=slots, input=x)
    nonzero = {k: v for k, v in r.counts.items() if v}
    assert nonzero == {"untouched_bytes": 1, "scale_off_by_one": 1}
    by_slot = {row["coords"]["slot"]: row["class"] for row in r.rows}
    assert by_slot == {7: "untouched_bytes", 8: "scale_off_by_one"}


def test_input_that_does_not_fit_the_buffers_is_an_error():
    x = normal(44, (4, 64))
    p, _ = oracle.quantize_mx(x, "gfx950")
    for bad in (np.zeros((0, 64), np.float32), x[:2], x[:, :32], x.reshape(2, 2, 64)):
        with pytest.raises(ValueError, match="input"):
            explain(p, p, layout="packed-row", input=bad)
    kv = layouts.get("aiter-fp4-kv")
    K = kv.new_buffer(num_blocks=1)
    rows = normal(45, (3, 128))
    with pytest.raises(ValueError, match="input: covers no row"):
        explain(K, K, layout="aiter-fp4-kv", input=rows, slots=np.array([-1, -1, -1]))
    with pytest.raises(ValueError, match="input has 2 rows"):
        explain(K, K, layout="aiter-fp4-kv", input=rows[:2], slots=np.array([0, 1, 2]))
    r = explain(p, p, layout="packed-row", input=x)  # the full shape: every row compared
    assert r.has_input and "gfx950" in r.matching_profiles
    assert "argmin" not in r.matching_profiles  # its sign-of-zero rule shows on these rows


def test_profiles_must_be_registered_names():
    x = normal(46, (4, 64))
    p, _ = oracle.quantize_mx(x, "gfx950")
    with pytest.raises(ValueError, match="'nope'") as caught:
        explain(p, p, layout="packed-row", input=x, profiles=["nope"])
    assert all(name in str(caught.value) for name in oracle.profiles.names())
    with pytest.raises(ValueError, match="profiles"):
        explain(p, p, layout="packed-row", input=x, profiles=[])
    with pytest.raises(TypeError, match="profiles"):
        explain(p, p, layout="packed-row", input=x, profiles="gfx950")
    with pytest.raises(ValueError, match="needs the input"):
        explain(p, p, layout="packed-row", profiles=["gfx950"])
    r = explain(p, p, layout="packed-row", input=x, profiles=["argmin", "gfx950", "argmin"])
    assert list(r.profile_mismatches) == ["argmin", "gfx950"]


def test_bad_arguments_name_themselves():
    p = np.zeros((4, 64), np.uint8)
    with pytest.raises(ValueError, match="actual"):
        explain(p, np.zeros((4, 32), np.uint8), layout="packed-row")
    with pytest.raises(ValueError, match="layout"):
        explain(p, p, layout="nope")
    with pytest.raises(ValueError, match="profile"):
        explain(p, p, layout="packed-row", profile="nope")
    with pytest.raises(TypeError, match="expected"):
        explain(p.astype(np.float32), p, layout="packed-row")
    with pytest.raises(ValueError, match="scales"):
        explain(p, p, layout="packed-row", scales=np.zeros((4, 3), np.uint8))
    with pytest.raises(ValueError, match="input"):
        explain(p, p, layout="packed-row", input=np.zeros((4, 64), np.float32))
    with pytest.raises(ValueError, match="num_heads"):
        explain(np.zeros((2, 1, 4, 16, 4), np.uint8), np.zeros((2, 1, 4, 16, 4), np.uint8),
                layout="aiter-fp4-q-scale")


@pytest.mark.parametrize("name", layouts.names())
def test_periodic_locate_matches_layout(name):
    """The block-tiled inverse the classifier uses agrees with Layout.locate byte for byte."""
    from mxgate.explain.inputs import build_frame

    L = layouts.get(name)
    dims = {"aiter-fp4-q": dict(num_tokens=5, num_heads=32),
            "aiter-fp4-q-scale": dict(num_tokens=5, num_heads=32),
            "aiter-fp8-kv": dict(num_blocks=5, block_size=16),
            "aiter-fp8-kv-preshuffle": dict(num_blocks=5, block_size=16),
            "sglang-page68": dict(num_pages=5, page_size=8),
            "packed-row": dict(num_rows=40)}.get(name, {"num_blocks": 5, "num_pages": 5})
    dims = {k: v for k, v in dims.items() if k in L.dim_names}
    buf = L.new_buffer(**dims)
    extra = {"num_heads": 32} if name == "aiter-fp4-q-scale" else None
    fr = build_frame(buf, buf, name, extra)
    off = np.arange(buf.size, dtype=np.int64)
    got = fr.locate(off)
    ref = L.locate(off, **fr.dims)
    for i, f in enumerate(fr.fields):
        hit = got.field == i
        assert np.array_equal(hit, ref.field == f.name)
        for j, axis in enumerate(f.axes):
            assert np.array_equal(got.coords[j][hit], ref.coords[axis][hit])
    assert np.array_equal(got.region, ref.region)


def test_fp8_rules():
    F = layouts.get("aiter-fp8-kv")
    data = gen(25).integers(1, 0x70, (64, 128), dtype=np.uint8)
    E = F.new_buffer(num_blocks=1, block_size=64)
    F.scatter(E, data, np.ones(64, np.float32))
    A = E.copy()
    flat_e, flat_a = E.reshape(-1), A.reshape(-1)
    flat_e[0], flat_a[0] = 0x00, 0x80  # -0
    flat_e[1], flat_a[1] = 0x7E, 0x7F  # saturate vs NaN
    flat_e[2], flat_a[2] = 0x10, 0x11  # adjacent
    flat_e[3], flat_a[3] = 0x10, 0xFF  # NaN
    r = explain(E, A, layout="aiter-fp8-kv")
    assert [row["class"] for row in r.rows] == ["sign_of_zero", "saturation", "tie_direction", "nan_inf"]
    assert r.rows[1]["expected"]["value"] == 448.0


def test_scale_layout_with_input():
    """A kv_cache_scale buffer alone: the input names the profile its bytes follow."""
    x = normal(26, (128, 128))
    _, s_hw = oracle.quantize_mx(x, "gfx950")
    x[0, :32] = 0.0  # a zero group: the amax floors differ (E = 1 vs E = 0 vs ...)
    _, s_e = oracle.quantize_mx(x, "gfx950")
    _, s_a = oracle.quantize_mx(x, "threshold")
    KS = layouts.get("aiter-fp4-kv-scale")
    E, A = KS.new_buffer(num_blocks=2), KS.new_buffer(num_blocks=2)
    KS.scatter(E, s_e)
    KS.scatter(A, s_a)
    r = explain(E, A, layout="aiter-fp4-kv-scale", input=x)
    assert "threshold" in r.matching_profiles and "gfx950" in r.expected_matching_profiles
    assert r.total == 1 and r.rows[0]["class"] == "unexplained"
    assert "threshold" in r.rows[0]["actual_profiles"]


# ---- heat map (acceptance 4) --------------------------------------------------------------


def kv_mismatch_report():
    """A K cache with three bugs: argmin-style rounding in block 0, a nibble swap in block 2,
    one group a binade off in block 3."""
    x, p, s, E = _kv(27, nb=4)
    pa, _ = oracle.quantize_mx(x, "argmin")
    kv, ks = layouts.get("aiter-fp4-kv"), layouts.get("aiter-fp4-kv-scale")
    A = E.copy()
    kv.scatter(A, pa[:64], slots=np.arange(64))
    A[2] = (A[2] << 4) | (A[2] >> 4)
    sa = s.copy()
    sa[200:230, 1] += 1
    redo = oracle.encode_e2m1(x[200:230], "gfx950", scale=sa[200:230].repeat(32, axis=1))
    kv.scatter(A, oracle.pack_nibbles(redo), slots=np.arange(200, 230))
    SE, SA = ks.new_buffer(num_blocks=4), ks.new_buffer(num_blocks=4)
    ks.scatter(SE, s)
    ks.scatter(SA, sa)
    return explain(E, A, layout="aiter-fp4-kv", input=x, scales=(SE, SA))


def test_kv_heat_map(tmp_path):
    pytest.importorskip("matplotlib")
    from mxgate.explain.plot import build_figure

    r = kv_mismatch_report()
    assert r.counts["nibble_swap"] and r.counts["scale_off_by_one"] and r.counts["sign_of_zero"]
    assert r.counts["unexplained"] == 0
    path = r.plot(tmp_path / "kv.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    fig = build_figure(r)
    heat = fig.axes[0]
    assert heat.get_ylabel() == "slot" and heat.get_xlabel() == "dim"
    assert "aiter-fp4-kv" in fig._suptitle.get_text()
    # the 30 shifted e8m0 bytes of the scale pair get their own panel
    assert r.differing_scale_bytes == 30
    scales = fig.axes[1]
    assert scales.get_title().startswith("scales (e8m0): 30 differing bytes")
    assert scales.get_ylabel() == "slot" and scales.get_xlabel() == "group"


def test_plot_labels_q_layout(tmp_path):
    pytest.importorskip("matplotlib")
    from mxgate.explain.plot import build_figure

    x = normal(28, (4, 32, 128))
    p, s = oracle.quantize_mx(x, "gfx950")
    a, _ = oracle.quantize_mx(x, "threshold")
    r = explain(p, a, layout="aiter-fp4-q", input=x, scales=s)
    fig = build_figure(r)
    assert fig.axes[0].get_ylabel() == "token"
    assert fig.axes[0].get_xlabel().startswith("head × dim")


# ---- CLI and loaders ----------------------------------------------------------------------


def cli(argv: list[str]) -> tuple[int, str, str]:
    """``mxgate explain ARGV`` through the command's entry point: (status, stdout, stderr)."""
    import contextlib
    import io

    from mxgate.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["explain", *argv])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture()
def files(tmp_path, pr_sample):
    x, pa, sa, pg, sg = pr_sample
    paths = {}
    for name, arr in {"exp": pa[:128], "act": pg[:128], "x": np.asarray(x[:128], np.float32)}.items():
        paths[name] = tmp_path / f"{name}.npy"
        np.save(paths[name], arr)
    paths["scales"] = tmp_path / "scales.npz"
    np.savez(paths["scales"], expected=sa[:128], actual=sg[:128])
    paths["raw"] = tmp_path / "act.bin"
    pg[:128].tofile(paths["raw"])
    return paths


def test_cli_exit_codes(files):
    code, out, _ = cli([str(files["exp"]), str(files["exp"]), "--layout", "packed-row"])
    assert code == 0 and "expected == actual" in out
    code, out, _ = cli([str(files["exp"]), str(files["act"]), "--layout", "packed-row",
                        "--profile", "argmin", "--input", str(files["x"]),
                        "--scales", str(files["scales"])])
    assert code == 1 and "sign_of_zero" in out and "actual matches: gfx950" in out
    code, _, err = cli([str(files["exp"]), "missing.npy", "--layout", "packed-row"])
    assert code == 2 and "ACTUAL" in err
    code, _, err = cli([str(files["exp"]), str(files["act"]), "--layout", "nope"])
    assert code == 2 and "layout" in err
    code, _, err = cli([str(files["exp"]), str(files["raw"]), "--layout", "packed-row"])
    assert code == 2 and "--shape" in err


def test_cli_json_raw_and_plot(files, tmp_path):
    code, out, _ = cli([str(files["exp"]), str(files["raw"]), "--layout", "packed-row",
                        "--profile", "argmin", "--shape", "128,64", "--json", "--max-rows", "5"])
    doc = json.loads(out)
    assert code == 1 and doc["counts"]["sign_of_zero"] > 0 and len(doc["rows"]) == 5
    png = tmp_path / "m.png"
    pytest.importorskip("matplotlib")
    code, out, _ = cli([str(files["exp"]), str(files["act"]), "--layout", "packed-row",
                        "--plot", str(png), "--no-grid"])
    assert code == 1 and png.exists() and "hex grid" not in out


def test_loader_refuses_pickles_and_picks_npz_keys(tmp_path):
    from mxgate.explain.io import load_array

    obj = tmp_path / "o.npy"
    np.save(obj, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="EXPECTED.*unpickle"):
        load_array(str(obj), "EXPECTED")
    z = tmp_path / "z.npz"
    np.savez(z, a=np.arange(3), b=np.arange(4))
    with pytest.raises(ValueError, match="pick one"):
        load_array(str(z), "ACTUAL")
    assert load_array(f"{z}:b", "ACTUAL").size == 4


def test_loader_says_what_is_wrong_with_a_file(tmp_path):
    from mxgate.explain.io import load_array

    (tmp_path / "e.npy").write_bytes(b"")
    with pytest.raises(ValueError, match="EXPECTED: e.npy is empty"):
        load_array(str(tmp_path / "e.npy"), "EXPECTED")
    (tmp_path / "z.npz").write_bytes(b"plain text")
    with pytest.raises(ValueError, match="ACTUAL: z.npz is not an .npz archive"):
        load_array(str(tmp_path / "z.npz"), "ACTUAL")
    np.save(tmp_path / "a.npy", np.arange(4, dtype=np.uint8))
    (tmp_path / "a_named.npz").write_bytes((tmp_path / "a.npy").read_bytes())
    with pytest.raises(ValueError, match="not an .npz archive"):
        load_array(str(tmp_path / "a_named.npz"), "ACTUAL")
    (tmp_path / "t.npy").write_bytes((tmp_path / "a.npy").read_bytes()[:30])
    with pytest.raises(ValueError, match="t.npy is not a readable .npy file"):
        load_array(str(tmp_path / "t.npy"), "EXPECTED")
    (tmp_path / "d.npy").mkdir()
    with pytest.raises(ValueError, match="is a directory"):
        load_array(str(tmp_path / "d.npy"), "EXPECTED")
    with pytest.raises(ValueError, match="no such file"):
        load_array(str(tmp_path / "missing.npy"), "EXPECTED")


def test_plot_path_is_checked_before_drawing(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from mxgate.explain import plot

    p, _ = oracle.quantize_mx(normal(47, (8, 128)), "gfx950")
    r = explain(p, p ^ np.uint8(0x08), layout="packed-row")

    def never(report):
        raise AssertionError("drew a figure for a path that cannot be written")

    monkeypatch.setattr(plot, "build_figure", never)
    with pytest.raises(ValueError, match="does not exist"):
        r.plot(tmp_path / "missing" / "m.png")
    with pytest.raises(ValueError, match="is a directory"):
        r.plot(tmp_path)


def test_cli_scale_difference_through_main(files, tmp_path):
    """Equal data files, one differing scale byte given with --scales/--actual-scales: 1."""
    scales = np.load(files["scales"])["expected"]
    shifted = scales.copy()
    shifted[5, 1] += 1
    np.save(tmp_path / "s_exp.npy", scales)
    np.save(tmp_path / "s_act.npy", shifted)
    code, out, err = cli([str(files["exp"]), str(files["exp"]), "--layout", "packed-row",
                          "--scales", str(tmp_path / "s_exp.npy"),
                          "--actual-scales", str(tmp_path / "s_act.npy")])
    assert code == 1 and err == ""
    assert "expected == actual" not in out and "row 5, group 1" in out


def test_cli_cache_layout_through_main(tmp_path):
    """The kv cache path end to end through ``mxgate explain``: companion scale buffers,
    a slot mapping and a raw bf16 input file."""
    from mxgate.cli import main

    g = gen(29)
    slots = g.permutation(256)[:100]
    x = g.standard_normal((100, 128), dtype=np.float32).astype(ml_dtypes.bfloat16)
    kv, ks = layouts.get("aiter-fp4-kv"), layouts.get("aiter-fp4-kv-scale")
    bufs = {}
    for name, prof in (("exp", "gfx950"), ("act", "argmin")):
        p, s = oracle.quantize_mx(x, prof)
        b, sb = kv.new_buffer(num_blocks=4), ks.new_buffer(num_blocks=4)
        kv.scatter(b, p, slots=slots)
        ks.scatter(sb, s, slots=slots)
        np.save(tmp_path / f"{name}.npy", b)
        bufs[name] = sb
    np.savez(tmp_path / "scales.npz", expected=bufs["exp"], actual=bufs["act"])
    np.save(tmp_path / "slots.npy", slots)
    x.view(np.uint16).tofile(tmp_path / "x.bin")
    out = tmp_path / "report.json"
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["explain", str(tmp_path / "exp.npy"), str(tmp_path / "act.npy"),
                     "--layout", "aiter-fp4-kv", "--input", str(tmp_path / "x.bin"),
                     "--input-shape", "100,128", "--input-dtype", "bfloat16",
                     "--scales", str(tmp_path / "scales.npz"), "--slots", str(tmp_path / "slots.npy"),
                     "--json", "--max-rows", "-1"])
    out.write_text(buf.getvalue())
    doc = json.loads(out.read_text())
    assert code == 1
    assert doc["counts"]["unexplained"] == 0 and doc["counts"]["sign_of_zero"] > 0
    assert "argmin" in doc["matching_profiles"]
    assert {row["coords"]["slot"] for row in doc["rows"]} <= set(slots.tolist())
