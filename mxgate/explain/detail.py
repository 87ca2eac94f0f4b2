"""One line of evidence per row, saying why the row got its class."""

from __future__ import annotations

import numpy as np

from mxgate import oracle
from mxgate.explain import codes, structural
from mxgate.explain.classes import COUNT_KEYS
from mxgate.explain.frame import E8M0, E8M0_WORD, F32_SCALE, FP4, FP8, Frame
from mxgate.explain.table import SCALE_BYTE, SCALE_INFERRED

_NO_INPUT = " (no input: unverified)"


def _fp4(code: int) -> str:
    v = float(oracle.decode_e2m1(np.array([code & 0xF], np.uint8))[0])
    return f"{'-' if code & 8 else '+'}{abs(v):g}"


def _code(kind: str, code: int, profile: oracle.profiles.Profile) -> str:
    if kind == FP4:
        return f"{_fp4(code)} (0x{code:X})"
    if kind == FP8:
        v = float(oracle.decode_e4m3(np.array([code], np.uint8), profile.fp8_variant)[0])
        return f"{v:g} (0x{code:02X})"
    return f"0x{code:02X}"


def _profiles(bits: int) -> str:
    names = [n for i, n in enumerate(oracle.profiles.names()) if bits >> i & 1]
    return ", ".join(names) if names else "no profile"


def _who(t, i: int) -> str:
    if not (t.has_x[i] or t.exp_profiles[i] or t.act_profiles[i]):
        return ""
    return (f"; expected as in {_profiles(int(t.exp_profiles[i]))}; "
            f"actual as in {_profiles(int(t.act_profiles[i]))}")


def _input(t, i: int) -> str:
    return f"x = {float(t.x[i]):.9g}, x/S = {float(t.xs[i]):.9g}"


def _tie(t, i: int) -> str:
    k = int(t.aux[i])
    if k < 0 or not t.has_x[i]:
        return f"adjacent magnitudes {_fp4(int(t.exp[i]))} / {_fp4(int(t.act[i]))}{_NO_INPUT}"
    neg = bool(np.signbit(t.xs[i]))
    sign = "-" if neg else "+"
    lo, hi = codes.E2M1_MAGNITUDES[k], codes.E2M1_MAGNITUDES[k + 1]
    rules = codes.tie_rules(np.array([t.exp[i] & 7, t.act[i] & 7]), np.array([k, k]),
                            np.array([neg, neg]))
    return (f"x/S = {float(t.xs[i]):g} is the midpoint of {sign}{lo:g} and {sign}{hi:g}: "
            f"expected {_fp4(int(t.exp[i]))} (tie {'|'.join(rules[0])}), actual "
            f"{_fp4(int(t.act[i]))} (tie {'|'.join(rules[1])})")


def _scale_shift(t, i: int, kind: str) -> str:
    aux = int(t.aux[i])
    if kind == F32_SCALE:
        return "the float32 scale words are a factor 2 apart (one binade)"
    if aux == SCALE_BYTE or kind != FP4:
        return f"e8m0 {int(t.exp[i])} vs {int(t.act[i])}: one binade apart"
    se, sa = int(t.se[i]), int(t.sa[i])
    how = ("inferred from the input: the whole group re-quantizes to the actual codes under "
           "this scale and not under the expected one" if aux == SCALE_INFERRED else
           "the whole group's actual codes are its re-quantization under the actual scale"
           if t.has_x[i] else "every element's rounding intervals at the two scales overlap"
           + _NO_INPUT)
    return f"group e8m0 {se} -> {sa} (x2^{sa - se}); {how}"


def _nan(t, i: int, kind: str) -> str:
    if kind == F32_SCALE:
        return "the float32 scale word is NaN or Inf on one side"
    if kind in (E8M0, E8M0_WORD):
        return "e8m0 0xFF (NaN) on one side"
    if kind != FP4:
        return "NaN code on one side"
    if t.has_x[i] and not np.isfinite(t.x[i]):
        return f"input is {float(t.x[i])}" + _who(t, i)
    if t.se[i] == 255 or t.sa[i] == 255:
        e, a = (str(int(v)) if v >= 0 else "?" for v in (t.se[i], t.sa[i]))
        return (f"group e8m0 {e} / {a}: 0xFF is NaN, the group holds NaN or Inf and its "
                "elements follow the profile's NaN-scale rule") + _who(t, i)
    return f"{_fp4(int(t.exp[i]))} vs {_fp4(int(t.act[i]))}: a NaN/Inf rule's max code" + _NO_INPUT


def _saturation(t, i: int, kind: str) -> str:
    if kind == FP8:
        return "one side saturated to the max finite value, the other gave NaN (overflow rule)"
    if t.has_x[i]:
        return f"{_input(t, i)} is beyond 6: saturates to {'-' if t.xs[i] < 0 else '+'}6"
    return "one side is the max code, the other wrapped far below it" + _NO_INPUT


def _unexplained(t, i: int, kind: str) -> str:
    if kind != FP4:
        return "no rule matches"
    se, sa = int(t.se[i]), int(t.sa[i])
    if sa >= 0 and se >= 0 and sa != se:
        return f"group scales differ (e8m0 {se} vs {sa}) and the group is not a one-binade shift"
    if t.has_x[i]:
        return f"{_input(t, i)}: no rule matches" + _who(t, i)
    return "no rule matches"


def detail(t, i: int, kind: str, frame: Frame, profile: oracle.profiles.Profile) -> str:
    name = COUNT_KEYS[int(t.cls[i])]
    exp, act = int(t.exp[i]), int(t.act[i])
    if name == "index_overflow":
        k = int(t.aux[i])
        if k > 0:
            return (f"mismatch tail starting within 1 MiB after byte 2^{k} (a 32-bit index "
                    "wrap) with no mismatch in the 1 MiB before it")
        return f"holds the expected byte from 2^{-k} bytes further on (a wrapped 32-bit index)"
    if name == "untouched_bytes":
        why = {structural.UNTOUCHED_PAD: "zero padding changed",
               structural.UNTOUCHED_UNOWNED: "byte no field owns changed",
               structural.UNTOUCHED_SLOT: f"{frame.main.axes[0]} {t.coord(i, 0)} is not "
               "in the slot mapping: must keep its bytes"}[int(t.aux[i])]
        return f"{why} (0x{exp:02X} -> 0x{act:02X})" if kind != FP4 else why
    if name == "layout_permutation":
        other = t.extra.get("permutation_layout", "another registered layout")
        return f"the expected logical data written through layout {other} puts this byte here"
    if name == "nibble_swap":
        return "the byte's two nibbles are exchanged"
    if name == "nan_inf":
        return _nan(t, i, kind)
    if name == "scale_off_by_one":
        return _scale_shift(t, i, kind)
    if name == "sign_of_zero":
        text = f"{_code(kind, exp, profile)} vs {_code(kind, act, profile)}: equal after dequantization"
        if t.has_x[i]:
            text += f"; {_input(t, i)}" + _who(t, i)
        return text
    if name == "saturation":
        return _saturation(t, i, kind)
    if name == "tie_direction":
        if kind == FP8:
            return "adjacent FP8 codes" + _NO_INPUT
        return _tie(t, i) + (_who(t, i) if t.has_x[i] else "")
    if kind in (E8M0, E8M0_WORD):
        return f"e8m0 {exp} vs {act}: no rule matches"
    return _unexplained(t, i, kind)
