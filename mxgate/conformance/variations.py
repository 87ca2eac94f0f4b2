"""docs/permitted-variations.md, written from the profiles and the known findings.

``mxgate profiles --variations`` prints it; tests/test_permitted_variations.py fails when the
committed file is not what :func:`render` writes. Each profile is listed with its differences
from the neutral base (``profiles.base()``), its evidence and its unverified choices; each known
finding with its backend, op and device. The notes at the end hold what no profile or finding
states (observations about implementations that are no declared profile of their own).
"""

from __future__ import annotations

import math

from mxgate.conformance import known_findings
from mxgate.oracle import profiles

DOC = "docs/permitted-variations.md"

_INTRO = """\
# Permitted variations: what each shipped implementation does differently

<!-- Written by `mxgate profiles --variations > docs/permitted-variations.md` from
mxgate/oracle/profiles*.py and mxgate/conformance/known_findings.py: edit those, not this file. -->

Every difference below is a field of a named profile (`mxgate profiles NAME` prints it). The gate
judges a backend under the profile it declares and reports, next to the verdict, how that profile
differs from the hardware profile `gfx950`. A difference listed here is *documented*, not
*excused*: a backend that declares `gfx950` and rounds like `threshold` fails.

Evidence is one of: **measured** (a run of the named package in this repository's tests or
tools), **read** (the shipped source, file and line), or a section of the contract
(`SPEC 3` is section 3 of [docs/spec.md](spec.md): facts gathered there, not re-measured here). An
**unverified** choice is a value no measurement backs: the gate accepts the other admitted values
there too (SPEC 11.2), and golden results list them as alternatives.
"""

# Observations the profiles and findings do not hold: implementations that declare no profile
# of their own, and contract differences of the sglang adapters.
_NOTES = """\
## Notes

### Block scale consequences

- sglang's 1e-4 floor: the smallest scale byte is 114 (2^-13). Any group with amax <= 6*2^-14
  (about 3.66e-4) gets byte 114 where the AITER floor gives a smaller byte; on random data with
  row scales 2^[-16, 16) this is 1,964 of 16,384 groups (measured, docs/findings/sglang.md).
- The gfx950 and sglang profiles give the same byte for every amax above that floor.
- sglang's `/ 6` is correctly rounded under the interpreter; compiled for sm_90 it is
  `fl(amax * fl(1/6))`, which gives the same byte for every amax (read + measured).

### e8m0 decoding by implementation

| implementation | byte 0 | byte 255 | evidence |
|---|---|---|---|
| AITER `e8m0_to_f32`, OCP, torch `float8_e8m0fnu`, ml_dtypes, `triton.tools.mxfp.fp8e8m0_to_float32` | 2^-127 | NaN | measured (torch, ml_dtypes, triton.tools.mxfp) |
| `tl.dot_scaled` under the Triton 3.9 CPU interpreter | 2^-127 | NaN | measured (`mxgate/kernels/triton_dot_scaled.py` probe) |
| `tl.dot_scaled` compiled by Triton 3.6 on Hopper (bf16 upcast) | **0.0** | NaN | measured on the H200: 0 mismatches against `triton-dot-scaled` over all 256 bytes |
| sglang logits kernels (`exp2(e - 127)`) | 2^-127 | Inf | read |

### FP8 casts by implementation

- AMD gfx950 / gfx942 hardware: e4m3fn finite overflow is NaN (0x7F or 0xFF), a NaN keeps its
  sign, e4m3fnuz overflow is 0x80 (SPEC 4).
- torch 2.13 CPU: `.to(float8_e4m3fnuz)` does **not** saturate (overflow gives 0x80), unlike its
  e4m3fn cast (measured).

### torchao `to_mx` (not a declared backend op)

torchao 0.18's `to_mx` computes scales that no profile above models exactly, all in blocks whose
scale byte would be 0 or whose amax is Inf (read: `torchao/prototype/mx_formats/mx_tensor.py`):
RCEIL divides the elements by 1.0 (not 2^-127) when the byte is 0; FLOOR/CEIL/EVEN divide by
2^-126 (the `F32_MIN_NORMAL` clamp) when the byte is 0; RCEIL maps an Inf amax to byte 254 and
FLOOR maps it to 253. Only torchao's element encoder (`f32_to_f4_unpacked`) is checked by the
gate, under `aiter-py`.

### sglang writers and scorers: contract differences

- The writers (`store_fp4_index_k_cache`, `store_fp4_index_k_cache_split`) have no slot rule: a
  negative or too large slot writes outside the buffer and repeated slots race. AITER's op skips
  slot < 0. The sglang adapter refuses such inputs, and the gate reports those vector cases as
  "not supported here" for sglang, never as a pass (read: docs/findings/sglang.md section 6).
- Relation to `gfx950`, as the gate states it (`mxgate/conformance/test_writers.py`, finite data
  with exact midpoints planted, every group's amax 6): the `rne=True` split writer differs only
  in sign-of-zero nibbles (982 of 5,120 on that set); the default `rne=False` writer also at the
  midpoints 0.75, 1.75 and 3.5 (370 tie-direction nibbles). Groups under the 1e-4 floor differ
  in the scale byte too.
- Under `TRITON_INTERPRET=1` (Triton 3.9), `fp4_index_logits_decode` runs but is wrong: the
  interpreter's `tl.dot` multiplies the raw uint16 bits of bf16 operands and its fp32 -> bf16
  casts truncate. The gate runs sglang's scorers only compiled (`--device cuda`), where both
  were bit-exact against the reference chain on the H200 (SPEC 8).
"""


# The `mxgate identify` run (docs/identify.md) that would settle each unverified choice, on the
# hardware the implementation runs on: (profile, field) -> the run, in Markdown.
_AITER_HIP = ("`mxgate identify --backend aiter --op mx.quantize --device cuda` on a ROCm gfx950 machine "
              "(per_1x32_f4_quant_hip drives the same converter)")
_AITER_SRC = "with `MXGATE_AITER_SRC` set to a ROCm/aiter checkout, on a ROCm gfx950 machine"
SETTLED_BY: dict[tuple[str, str], str] = {
    ("gfx950", "nan"): _AITER_HIP,
    ("aiter-per1x32", "nan"): _AITER_HIP,
    ("argmin", "scale_policy"): (f"`mxgate identify --backend aiter-reference --op aiter.fp4_quant_e2m1_with_e8m0 "
                                 f"--device cuda` {_AITER_SRC} (the device's torch.log2)"),
    ("aiter-dsv4-act", "scale_policy"): (f"`mxgate identify --backend aiter-reference --op aiter.fp4_act_quant "
                                         f"--device cuda` {_AITER_SRC} (the device's torch.log2)"),
    ("microxcaling", "nan"): ("`mxgate identify --backend microxcaling --op mx.quantize` with "
                              "`MXGATE_MICROXCALING_SRC` set to a microsoft/microxcaling checkout"),
    ("ocp", "nan"): "none: OCP MX v1.0 leaves it to the implementation; identify the implementation instead",
}
# The base's unverified ue8m0_rounding: the FP8 ue8m0 scale of the indexer op on the device.
BASE_SETTLED_BY = ("`mxgate identify --backend aiter --op indexer_qk_rope_quant_and_cache --device cuda` on a "
                   "ROCm gfx950 machine (its FP8-mode float32 probe decides it where the op takes float32 "
                   "inputs; docs/identify.md)")


def _value(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, float):
        return _power_of_two_form(value)
    if isinstance(value, tuple):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


def _power_of_two_form(value: float) -> str:
    """2^k and 6*2^k written so (the shipped amax floors), other numbers as Python prints them."""
    mantissa, exponent = math.frexp(value)
    if mantissa == 0.5:
        return f"2^{exponent - 1}"
    if mantissa == 0.75:
        return f"6*2^{exponent - 3}"
    return repr(value)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _base_section(base: profiles.Profile) -> list[str]:
    lines = ["## The neutral base", "",
             "Every profile is written as its differences from these values (the field defaults of",
             "`mxgate.oracle.profiles.Profile`; docs/spec.md section 2.1 defines each field).", "",
             "| field | base value |", "|---|---|"]
    lines += [f"| `{k}` | {_cell(_value(v))} |" for k, v in base.semantics().items()]
    lines.append("")
    for choice in base.unverified:
        lines.append(f"Unverified in the base, so in every profile that keeps it: `{choice.field}`: {choice.why}. "
                     f"Settled by: {BASE_SETTLED_BY}.")
    return lines + [""]


def _profile_section(p: profiles.Profile, base: profiles.Profile) -> list[str]:
    lines = [f"### `{p.name}`", "", p.shipped_by + ".", ""]
    diffs = p.differences(base)
    if diffs:
        lines += ["| field | value | base |", "|---|---|---|"]
        lines += [f"| `{k}` | {_cell(_value(a))} | {_cell(_value(b))} |" for k, (a, b) in diffs.items()]
    else:
        lines.append("No difference from the base.")
    lines.append("")
    if p.evidence:
        lines.append(f"- evidence: {p.evidence}")
    for choice in p.unverified:
        if choice not in base.unverified:
            admitted = ", ".join(f"`{v}`" for v in p.admitted_values(choice.field))
            lines.append(f"- unverified `{choice.field}`: {choice.why} (admitted: {admitted})")
            settle = SETTLED_BY.get((p.name, choice.field))
            if settle:
                lines.append(f"  - settled by: {settle}")
    if p.notes:
        lines.append(f"- note: {p.notes}")
    return lines + [""]


def _findings_section() -> list[str]:
    lines = ["## Known findings", "",
             "Failures of shipped implementations the gate reports as 'fail (known finding)' (an expected",
             "failure only under `--mxgate-xfail-known`): a bug, not a permitted variation.", "",
             "| backend | op | device | finding |", "|---|---|---|---|"]
    for (backend, op, device), text in known_findings.DEVICE_FINDINGS.items():
        lines.append(f"| `{backend}` | `{op}` | {device} | {_cell(text)} |")
    for (backend, op), text in known_findings.KNOWN_FINDINGS.items():
        lines.append(f"| `{backend}` | `{op}` | any | {_cell(text)} |")
    lines.append("")
    for (backend, op), detail in known_findings.DETAILS.items():
        lines += [f"### `{backend}` `{op}` in detail", "", detail.rstrip("\n"), ""]
    return lines


def render() -> str:
    """The text of docs/permitted-variations.md."""
    base = profiles.base()
    carried = ", ".join(f"`{n}`" for n in profiles.vector_names())
    lines = [_INTRO, *_base_section(base), "## Profiles", "",
             f"In registry order (`mxgate profiles`). The golden vectors carry results for {carried}.", ""]
    for name in profiles.names():
        lines += _profile_section(profiles.get(name), base)
    lines += _findings_section()
    return "\n".join(lines) + "\n" + _NOTES
