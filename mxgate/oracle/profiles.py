"""Named semantic profiles: every difference between shipped FP4/FP8 quantizers as data.

A profile fixes how a float32 becomes an E2M1 code (ties, sign of zero, NaN and Inf), how a
block's e8m0 scale is chosen (policy, arithmetic, amax floor, clamp), how e8m0 bytes 0 and 255
decode, and the FP8 choices of the indexer op. Code reads these fields; it never branches on a
profile's name.

Every profile is written as its differences from the neutral base, the field defaults of
``Profile`` (``mxgate profiles`` marks differences from the hardware profile ``gfx950``; the
generated docs/permitted-variations.md lists them from the base). Choices a profile makes
without a measurement are data too (``unverified``): the gate admits the other values there.
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from dataclasses import dataclass, fields, replace
from typing import Literal, get_args, get_type_hints

TieRule = Literal["even", "zero", "away", "down"]
ZeroSign = Literal["keep", "if_negative", "clear"]
NanRule = Literal["max_signed", "pos_max", "neg_max", "zero", "inverted_zero", "torchao_bits"]
InfRule = Literal["saturate", "neg_max"]
ScalePolicy = Literal["rceil", "rceil_log2f", "floor", "ceil", "even", "rceil_exact", "floor_log2f"]
ScaleArithmetic = Literal["reciprocal", "divide"]
FloorWhere = Literal["before", "after"]
Byte0 = Literal["pow2", "zero"]
Byte255 = Literal["nan", "inf"]
Fp8Variant = Literal["fn", "fnuz"]
Fp8Overflow = Literal["nan", "saturate", "satfinite"]
Ue8m0Rounding = Literal["log2f", "bitwise"]
Bf16Nan = Literal["sign_quiet", "all_ones", "canonical"]
AmaxNan = Literal["propagate", "ignore"]
NanScale = Literal["exponent", "nan", "inf"]
SpecialScale = Literal["nan_byte", "clamped", "satfinite", "inf_field"]
Scale0Divisor = Literal["pow2", "min_normal", "one"]

# fl(1/6) = 0x3E2AAAAB, fl(6 * 2^-126): the AITER indexer's amax floor.
AITER_AMAX_FLOOR = 6.0 * 2.0**-126


@dataclass(frozen=True)
class Unverified:
    """A profile field whose value is not measured on the implementation.

    why: where the value comes from, as golden results and verdicts state it. admitted: the
    other values the gate accepts there; empty means every other value of the field's type.
    """

    field: str
    why: str
    admitted: tuple[object, ...] = ()


UE8M0_LOG2F = Unverified(
    "ue8m0_rounding",
    "SPEC 4: ceil(log2f(s)) on the device's v_log_f32 (~1 ulp) is unverified; the bitwise ceil_pow2 is also admissible",
)
LOG2F_SCALE = Unverified(
    "scale_policy",
    "SPEC 3: this scale is ceil(log2(amax/6)) with torch.log2, modelled as a correctly rounded log2f; a log2 that "
    "rounds differently near a power of two gives the bitwise ceil_pow2 scale",
    admitted=("rceil",),
)
GFX950_NAN = Unverified(
    "nan", "SPEC 2: the gfx950 NaN rule (+-6 with the NaN's sign) comes from AMD's emulation and device test, not measured here")

BASE_UNVERIFIED = (UE8M0_LOG2F,)

# Fields that describe a profile rather than define its semantics: never a difference.
DESCRIPTIVE_FIELDS = frozenset({"name", "shipped_by", "notes", "evidence", "unverified"})


@dataclass(frozen=True)
class Profile:
    """One shipped implementation's quantization semantics.

    Element fields (float32 -> E2M1, after division by the block scale):
      tie        even: half to even; zero: toward zero; away: away from zero;
                 down: toward -inf (argmin over an ascending grid keeps the lower value).
      zero_sign  keep: the sign bit survives (-0 and small negatives give 0x8);
                 if_negative: sign from ``x < 0`` (-0.0 gives 0x0, -0.1 gives 0x8);
                 clear: any result of magnitude zero is 0x0.
      nan        max_signed: +-6 with the NaN's sign; pos_max: 0x7 whatever the sign;
                 neg_max: 0xF; zero: 0x0; inverted_zero: +NaN -> 0x8, -NaN -> 0x0;
                 torchao_bits: the integer rounding path applied to the NaN's bits.
      inf        saturate: +-6 with sign; neg_max: 0xF whatever the sign.
    Scale fields (one e8m0 per group of 32):
      scale_policy      rceil: bitwise ceil_pow2(amax/6); rceil_log2f: ceil(log2f(amax/6))
                        with a correctly rounded log2f; floor: floor_log2(amax) - 2;
                        ceil: ceil_pow2(amax)/4; even: round amax's mantissa, then / 4;
                        rceil_exact: ceil(log2(amax/6)) exactly (cvt.rp to e8m0: a subnormal
                        v <= 2^-127 gives byte 0); floor_log2f: floor(log2f(amax)) - 2 with a
                        correctly rounded log2f (an amax just below 2^k gets 2^(k-2)).
      scale_arithmetic  reciprocal: amax * fl(1/6); divide: correctly rounded amax / 6.
      amax_floor        None or the floor value; floor_where before: max(amax, floor) first;
                        after: max(amax/6, floor).
      exp_clamp         None or (lo, hi) on the biased e8m0 exponent.
      byte0, byte255    how e8m0 bytes 0 and 255 decode (2^-127 or 0.0; NaN or Inf).
      amax_nan          propagate: a NaN element makes the block amax NaN; ignore: max-num
                        reductions skip NaN elements (an all-NaN block has amax 0).
      special_scale     nan_byte: a NaN or Inf amax gives byte 0xFF whatever the clamp;
                        clamped: the exponent field 0xFF goes through exp_clamp like any other;
                        satfinite: NaN gives 0xFF, Inf 0xFE (NVIDIA cvt.rp.satfinite.ue8m0);
                        inf_field: NaN gives 0xFF, Inf its field 0xFF through the policy's
                        "- 2" (floor, floor_log2f, ceil: 0xFD; others 0xFF).
      scale0_divisor    what the elements of a block whose byte is 0 are divided by: pow2
                        (2^-127), min_normal (2^-126), one (1.0).
      nan_scale         how elements of a block whose scale byte is 0xFF are divided:
                        exponent: by 2^(255-127) = 2^128, as the gfx950 scaled converter uses the
                        scale operand's exponent field; nan: by a NaN scale, so every element is NaN
                        (software quantizers); inf: by +Inf (the bits 0xFF << 23 read as a float):
                        finite elements give a zero of their sign, an Inf element the default NaN.
    FP8 fields (indexer op FP8 mode): fp8_variant, fp8_overflow (e4m3fn finite overflow and Inf:
      nan, saturate to +-max, or satfinite with every NaN 0x7F), ue8m0_rounding.
    bf16_nan: what a float32 NaN becomes in bf16: sign_quiet (sign | 0x7FC0, ml_dtypes),
      all_ones (0xFFFF whatever the sign, torch 2.13 CPU) or canonical (0x7FFF, torch CUDA).
    Front end (indexer op): fma_contraction, the default member of the admissible set.
    Description: shipped_by, notes; evidence (measured, read, or the contract section the values
      come from); unverified (the fields whose value is not measured, with the values admitted
      beside it; every profile's ue8m0_rounding is one, the device's log2f being unmeasured).
    """

    name: str
    shipped_by: str
    tie: TieRule = "even"
    zero_sign: ZeroSign = "keep"
    nan: NanRule = "max_signed"
    inf: InfRule = "saturate"
    scale_policy: ScalePolicy = "rceil"
    scale_arithmetic: ScaleArithmetic = "reciprocal"
    amax_floor: float | None = AITER_AMAX_FLOOR
    floor_where: FloorWhere = "before"
    exp_clamp: tuple[int, int] | None = None
    byte0: Byte0 = "pow2"
    byte255: Byte255 = "nan"
    amax_nan: AmaxNan = "propagate"
    special_scale: SpecialScale = "nan_byte"
    nan_scale: NanScale = "nan"
    scale0_divisor: Scale0Divisor = "pow2"
    fp8_variant: Fp8Variant = "fn"
    fp8_overflow: Fp8Overflow = "nan"
    ue8m0_rounding: Ue8m0Rounding = "log2f"
    fma_contraction: bool = True
    bf16_nan: Bf16Nan = "sign_quiet"
    notes: str = ""
    evidence: str = ""
    unverified: tuple[Unverified, ...] = BASE_UNVERIFIED

    def differences(self, other: Profile) -> dict[str, tuple[object, object]]:
        """Fields whose values differ: {field: (self's value, other's value)}."""
        return {
            f.name: (getattr(self, f.name), getattr(other, f.name))
            for f in fields(self)
            if f.name not in DESCRIPTIVE_FIELDS
            and getattr(self, f.name) != getattr(other, f.name)
        }

    def as_dict(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def semantics(self) -> dict[str, object]:
        """The fields that define behaviour, without the descriptive ones."""
        return {k: v for k, v in self.as_dict().items() if k not in DESCRIPTIVE_FIELDS}

    def unverified_choice(self, field: str) -> Unverified | None:
        """The profile's unverified choice of ``field``, or None when its value is measured."""
        return next((u for u in self.unverified if u.field == field), None)

    def admitted_values(self, field: str) -> list[object]:
        """The values of an unverified ``field`` admitted beside the profile's own (none when measured)."""
        choice = self.unverified_choice(field)
        if choice is None:
            return []
        own = getattr(self, field)
        candidates = choice.admitted or get_args(_FIELD_TYPES[field])
        return [v for v in candidates if v != own]


_FIELD_TYPES = get_type_hints(Profile)


def base() -> Profile:
    """The neutral base every profile is written against: the field defaults."""
    return Profile(name="base", shipped_by="the field defaults of Profile")


def derive(name: str, shipped_by: str, *, unverify: Unverified | None = None, **differences: object) -> Profile:
    """A profile stated as its differences from the neutral base; ``unverify`` adds an unverified
    choice to the base's."""
    extra = (unverify,) if unverify is not None else ()
    return Profile(name=name, shipped_by=shipped_by, unverified=(*BASE_UNVERIFIED, *extra), **differences)


_SGLANG_SCALE = dict(scale_arithmetic="divide", amax_floor=1e-4, floor_where="after", exp_clamp=(1, 254),
                     byte255="inf", amax_nan="ignore", special_scale="clamped")
_SGLANG_EVIDENCE = "read + measured, docs/findings/sglang.md"

# About AMD's converter: gfx950's note (and aiter-per1x32's, the same converter), no one else's.
_GFX950_NOTES = "NaN rule from AMD's emulation and device test, not measured here."

_GFX950 = derive(
    "gfx950",
    "AMD gfx950 v_cvt_scalef32_pk_fp4_f32 as driven by AITER indexer_qk_rope_quant_and_cache "
    "(PR #5484): RCEIL scale with amax floor 6*2^-126 and amax*fl(1/6)",
    unverify=GFX950_NAN,
    nan_scale="exponent",
    notes=_GFX950_NOTES,
    evidence="SPEC 2-4 (the NaN rule is not measured)",
)

_PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        _GFX950,
        # The same hardware converter, driven with another amax floor.
        replace(
            _GFX950,
            name="aiter-per1x32",
            shipped_by="AITER per_1x32_f4_quant_hip: gfx950 elements, amax floor 1e-10 before, amax*fl(1/6)",
            amax_floor=1e-10,
            evidence="SPEC 3",
        ),
        derive(
            "aiter-py",
            "AITER f32_to_mxfp4 (torchao f32_to_f4_unpacked)",
            nan="torchao_bits",
            notes="NaN code depends on the payload: the integer rounding path runs on the NaN's bits.",
            evidence="measured: torchao 0.18 on 2^16 random values plus specials, 0 mismatches",
        ),
        derive(
            "aiter-gfx942",
            "AITER software fallback even_round_e2m1 on gfx942 (after PR #3992)",
            zero_sign="if_negative",
            nan="zero",
            fp8_variant="fnuz",
            evidence="SPEC 2 and 4",
        ),
        derive(
            "argmin",
            "AITER op_tests/test_flydsl_pa_mqa_logits_fp4.py input generator (argmin over the grid)",
            unverify=LOG2F_SCALE,
            tie="down",
            zero_sign="clear",
            nan="neg_max",
            inf="neg_max",
            scale_policy="rceil_log2f",
            scale_arithmetic="divide",
            amax_floor=1e-8,
            exp_clamp=(0, 255),
            notes="scale = ceil(log2(amax/6)) with torch log2; modelled as a correctly rounded log2f.",
            evidence="SPEC 2-3 (an Inf input: every distance is Inf, the first grid entry wins)",
        ),
        derive(
            "threshold",
            "sglang 0.5.23 quantize_fp4_indexer_row (_fp4_e2m1_code, rne=False)",
            tie="zero",
            zero_sign="clear",
            nan="pos_max",
            **_SGLANG_SCALE,
            notes="tl.minimum/tl.max are max-num: NaN elements give 6 and do not reach the amax "
            "(compiled and interpreted alike, docs/findings/sglang.md).",
            evidence=_SGLANG_EVIDENCE,
        ),
        derive(
            "sglang-rne",
            "sglang 0.5.23 quantize_fp4_indexer_row with rne=True",
            zero_sign="clear",
            nan="pos_max",
            **_SGLANG_SCALE,
            evidence=_SGLANG_EVIDENCE,
        ),
        derive(
            "deepgemm",
            "DeepGEMM reference FP4 indexer quantizer",
            tie="zero",
            zero_sign="clear",
            # every `|x| > midpoint` is False for NaN: code 0 whatever its sign
            nan="zero",
            scale_arithmetic="divide",
            amax_floor=1e-4,
            exp_clamp=(1, 254),
            # ceil_to_ue8m0 clamps the field of a NaN or Inf amax / 6 (255, 256) to 254 like any other
            special_scale="clamped",
            evidence="measured: per_token_cast_to_fp4 of deep_gemm/utils/math.py, docs/findings/peers.md",
        ),
        derive(
            "cuda-satfinite",
            "vLLM MXFP4 (cvt.rn.satfinite.e2m1x2.f32); CUDA 13 __nv_cvt_float2_to_fp4x2",
            nan="pos_max",
            fp8_overflow="satfinite",
            evidence="SPEC 2 and 4 (the FP8 rule measured on sm_90 there)",
        ),
        derive(
            "ocp",
            "OCP Microscaling Formats (MX) v1.0",
            unverify=Unverified("nan", "OCP MX v1.0 leaves NaN conversion implementation-defined"),
            scale_policy="floor",
            amax_floor=None,
            notes="NaN conversion is implementation-defined in OCP MX; the oracle uses max_signed.",
            evidence="SPEC 3",
        ),
        derive(
            "ml_dtypes",
            "ml_dtypes 0.6 astype(float4_e2m1fn) (elements), RCEIL scale without floor",
            nan="inverted_zero",
            amax_floor=None,
            notes="Elements measured over all 2^32 float32 inputs.",
            evidence="measured: the elements on all 2^32 float32 inputs (`mxgate sweep e2m1 --profile ml_dtypes "
            "--against ml_dtypes`: 0 mismatches), the FP8 and bf16 casts on 2^16 values plus boundaries",
        ),
        derive(
            "torch-cpu",
            "torch 2.13 CPU casts: float8_e4m3fn saturates finite overflow and Inf, bf16 NaN is 0xFFFF",
            fp8_overflow="saturate",
            bf16_nan="all_ones",
            notes="Measured with torch 2.13.0+cpu. float8_e4m3fnuz casts do not saturate (overflow gives 0x80).",
            evidence="measured",
        ),
        derive(
            "torch-cuda",
            "torch 2.11 CUDA casts (H200): float8_e4m3fn does not saturate, bf16 NaN is 0x7FFF",
            bf16_nan="canonical",
            notes="Measured on an H200 with torch 2.11.0+cu130 (docs/results/).",
            evidence="measured on the H200, docs/results/h200-2026-11-29.md",
        ),
        derive(
            "triton-dot-scaled",
            "Triton 3.6 tl.dot_scaled on Hopper (bf16 upcast emulation): scale byte 0 reads as 0.0",
            nan_scale="exponent",
            byte0="zero",
            notes="Element and scale rules otherwise as gfx950; only the e8m0 decoding differs.",
            evidence="measured on the H200: 0 mismatches over all 256 scale bytes",
        ),
        derive(
            "microxcaling",
            "microsoft/microxcaling mx_ops._quantize_mx (fp4_e2m1, round 'nearest': half away from zero, "
            "the pure-torch path)",
            unverify=Unverified(
                "nan", "microxcaling emulates in float: a NaN block stays NaN, which no E2M1 code represents"),
            tie="away",
            zero_sign="if_negative",
            scale_policy="floor_log2f",
            amax_floor=None,
            notes="Shared exponent floor(torch.log2(amax)) - 2 (an amax just below 2^k gets 2^(k-2)); elements "
                  "sign(x) * floor(|x| + 0.5), so -0.0 gives +0 and -1e-3 gives -0. A block holding NaN or Inf "
                  "becomes NaN: its scale byte is 0xFF.",
            evidence="read + measured: microxcaling's emulator run by the microxcaling backend, docs/findings/peers.md",
        ),
    )
}


# The peer tier's profiles (torch casts by version, NVIDIA's ue8m0 conversion, torchao to_mx),
# written in their own module: derive() and the Unverified choices above are all they read.
from mxgate.oracle import profiles_peers as _peers  # noqa: E402

_PROFILES.update({p.name: p for p in _peers.PEER_PROFILES})

# The profiles the golden vectors carry a result for: this table as written above. Profiles of
# outside implementations measured later are registered at the end of this module.
_VECTOR_NAMES = tuple(_PROFILES)


def names() -> list[str]:
    """All profile names, in registry order."""
    return list(_PROFILES)


def vector_names() -> list[str]:
    """The profiles the golden vectors carry results for (the base table, in its order)."""
    return list(_VECTOR_NAMES)


def get(name: str | Profile) -> Profile:
    """Look a profile up by name (a Profile passes through unchanged)."""
    if isinstance(name, Profile):
        return name
    if not isinstance(name, str):
        raise TypeError(f"profile must be a profile name (str) or Profile, got {type(name).__name__}")
    try:
        return _PROFILES[name]
    except KeyError:
        raise ValueError(f"profile must be one of {', '.join(_PROFILES)}; got {name!r}") from None


def hardware() -> Profile:
    """The profile every other one is compared with: the gfx950 hardware converter."""
    return _GFX950


def register(profile: Profile) -> Profile:
    """Add a user's profile (usually ``dataclasses.replace`` of a shipped one) so backends can
    declare it by name. Registering the same profile twice is harmless; another profile under a
    taken name is a ValueError."""
    if not isinstance(profile, Profile):
        raise TypeError(f"profile must be a Profile, got {type(profile).__name__}")
    taken = _PROFILES.get(profile.name)
    if taken is not None:
        if taken != profile:
            raise ValueError(f"profile name {profile.name!r} is taken; choose another name")
        return taken  # the object already registered stays: callers holding it keep their identity
    _PROFILES[profile.name] = profile
    return profile


# ---- calls memoised by the fields they read ---------------------------------------------------

_RECORDING_CLASSES: dict[type, type] = {}


def recording(profile: Profile, reads: set[str]) -> Profile:
    """A copy of ``profile`` that adds to ``reads`` the name of every field read from it (a copy of
    a recording copy records into the new set only)."""
    base = getattr(type(profile), "_recorded_class", type(profile))
    cls = _RECORDING_CLASSES.get(base)
    if cls is None:
        names = frozenset(f.name for f in fields(base))

        def __getattribute__(self, name: str):  # noqa: N807
            if name in names:
                try:
                    object.__getattribute__(self, "_reads").add(name)
                except AttributeError:  # still in __init__: not a read of the call's
                    pass
            return object.__getattribute__(self, name)

        cls = type(f"Recording{base.__name__}", (base,), {"__getattribute__": __getattribute__,
                                                          "_recorded_class": base})
        _RECORDING_CLASSES[base] = cls
    copy = cls(**{f.name: object.__getattribute__(profile, f.name) for f in fields(base)})
    object.__setattr__(copy, "_reads", reads)
    return copy


class MemoByReads:
    """``f(profile)`` memoised by the fields its call read.

    A profile equal to an earlier one in every field that the earlier call read gets the earlier
    result: a deterministic call (its other inputs fixed) whose branches read only those fields
    runs the same way under both. A call that hashes or compares the profile whole reads every
    field, so nothing is shared with it. Reads made inside ``f`` reach a recording profile passed
    in, so memos nest. ``limit`` bounds the results kept (the oldest used is dropped first)."""

    def __init__(self, f, limit: int | None = None) -> None:
        self._f, self._limit = f, limit
        # (fields read, their values) -> result, the most recently used last. A lookup tries each
        # set of fields some kept call read (an op reads a few such sets, whatever the number of
        # results), so it costs a dictionary look-up per set, not a scan of every result.
        self._entries: OrderedDict[tuple[tuple[str, ...], tuple], object] = OrderedDict()
        self._read_sets: Counter[tuple[str, ...]] = Counter()  # fields read -> results kept under them
        self._lock = threading.RLock()  # the oracle's block threads share the scale table's memo

    def __call__(self, profile: Profile):
        with self._lock:
            return self._call(profile)

    def _call(self, profile: Profile):
        for names in list(self._read_sets):
            key = _key(names, profile)
            if key is None:
                return self._f(profile)
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
        reads: set[str] = set()
        result = self._f(recording(profile, reads))
        names = tuple(sorted(reads))
        key = _key(names, profile)
        if key is None:
            return result
        if key not in self._entries:
            self._read_sets[names] += 1
        self._entries[key] = result
        self._entries.move_to_end(key)
        if self._limit is not None and len(self._entries) > self._limit:
            (dropped, _), _ = self._entries.popitem(last=False)
            self._read_sets[dropped] -= 1
            if not self._read_sets[dropped]:
                del self._read_sets[dropped]
        return result


def _key(names: tuple[str, ...], profile: Profile) -> tuple | None:
    """MemoByReads' key of ``profile`` under the fields ``names`` (read here, so an outer memo
    records them), or None where a field holds an unhashable value (a list for a tuple): not kept."""
    key = (names, tuple(getattr(profile, name) for name in names))
    try:
        hash(key)
    except TypeError:
        return None
    return key


# Registered on every import of this module, so the set of names never depends on what else a
# process imported (AITER's Triton quantizers and references, vLLM PR #42908's ROCm quantizer,
# triton_kernels' torch reference).
from mxgate.oracle import profiles_aiter, profiles_triton, profiles_vllm  # noqa: E402,F401

# ONNX's QuantizeLinear to FLOAT4E2M1 (scale 1.0, zero point 0): the Cast rule applied to
# x / scale + zero_point, where -0.0 + 0 is +0. Registered after the base table, so the golden
# vectors carry no result for it.
register(replace(
    _PROFILES["onnx"],
    name="onnx-quantizelinear",
    shipped_by="ONNX QuantizeLinear to FLOAT4E2M1 / FLOAT8E4M3FN with scale 1.0, zero point 0, saturate=1 "
               "(the onnx profile's Cast rule applied to x / scale + zero_point)",
    zero_sign="if_negative",  # microxcaling's value: -0.0 gives 0x0, a negative that rounds to zero 0x8
    notes="E2M1: x / 1.0 + 0 turns -0.0 into +0 before the Cast rule (0x0 where Cast gives 0x8); -1e-3 keeps its "
          "sign (0x8); otherwise onnx's rule: ties to even, |x| > 6 and +-Inf to +-6, NaN to 6 (0x7). FLOAT8E4M3FN: "
          "the reference adds no zero point, so Cast's bytes (-0.0 gives 0x80).",
    evidence="measured: onnx 1.23.2's reference QuantizeLinear on all 2^32 float32 inputs to both types (the E2M1 "
             "NaN codes aside, a known finding), docs/findings/peers.md",
))
