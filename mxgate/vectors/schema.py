"""The golden-vector schema: versions, field names, the flags vocabulary and a validator.

A vector family is two files: ``<family>.json`` (the document below) and ``<family>.npz``
(every array the document names, one ``.npy`` entry per key). docs/vectors.md describes each
field for readers who do not use mxgate.

Document::

    {"header": {"schema", "schema_version", "generator_version", "family", "description",
                "seed", "profile", "profiles": {name: {field: value}}, "arrays", "tiers"},
     "flags": {flag: {"description", "bugs": [...]}},          # the flags this file uses
     "groups": [{"id", "op", "comment", "seed", "inputs": [...], "outputs": [...],
                 "call": "positional" | "keywords", "compare": {output: rule}, "params": {...},
                 "cases": [{"id", "comment", "flags", "tier", "inputs": {name: key},
                            "params": {...},
                            "results": {profile: {"result": "valid" | "acceptable",
                                                  "reason", "outputs": {name: key},
                                                  "alternatives": [{"reason", "outputs"}]}}}]}]}
"""

from __future__ import annotations

from typing import Any

SCHEMA = "mxgate-vectors"
SCHEMA_VERSION = 1
TIERS = ("quick", "default", "exhaustive")
RESULTS = ("valid", "acceptable")
CALLS = ("positional", "keywords")
# bits: every byte equal. nan_equal: bytes equal, except that any NaN matches any NaN (decoders
# differ in NaN payloads the contract does not fix). bf16_nan_equal: the same for uint16 bf16
# bit patterns (any exponent-all-ones, nonzero-mantissa pattern matches any other).
# within:<value>,<bound>: bit equality with the expected output is exact; |actual - value| <= bound
# (two stored reference outputs) is acceptable. reference: stored for another output's rule,
# not returned by the op.
COMPARE_RULES = ("bits", "nan_equal", "bf16_nan_equal", "within:", "reference")


def compare_rule_ok(rule: str, outputs: list[str]) -> bool:
    if rule.startswith("within:"):
        names = rule[len("within:"):].split(",")
        return len(names) == 2 and all(n in outputs for n in names)
    return rule in COMPARE_RULES
REFERENCE_PROFILE = "gfx950"

# Public bug reports the vectors cite as flags BUGS-<number>: number -> (report(s), one-line summary);
# docs/vectors.md lists them.
BUGS: dict[int, tuple[tuple[str, ...], str]] = {
    1: (("https://github.com/vllm-project/vllm/pull/43557",), "biased_exp(amax/6): scale one too small, block max saturates"),
    2: (("https://github.com/ROCm/aiter/pull/3212",), "three different scale rules in one library (FLOOR/RCEIL/EVEN/CEIL)"),
    3: (("https://github.com/ROCm/FlyDSL/pull/590",), "e8m0 scale one step low on ~68% of inputs"),
    4: (("https://github.com/ml-explore/mlx/pull/4353",), "scale rounded to nearest on one backend, up on another"),
    5: (("https://github.com/ROCm/TransformerEngine/pull/338",), "reference tolerates scale-off-by-one"),
    6: (("https://github.com/pytorch/ao/pull/4725",), "fp32 -> bf16 -> e8m0 double rounding crosses the round-up threshold"),
    7: (("https://github.com/microsoft/microxcaling/issues/4",), "957 quantised to 896: a scale-choice dispute"),
    8: (("https://github.com/ROCm/aiter/pull/3992",), "'>=' at every boundary: ties rounded away from zero"),
    9: (("https://github.com/ROCm/aiter/issues/2247",), "RNE fix landed in one quantizer copy, not the other"),
    10: (("https://github.com/triton-lang/triton/pull/11753",), "fp16 intermediate creates false ties in fp8 RTNE"),
    11: (("https://github.com/triton-lang/triton/issues/8322",), "interpreter and compiled kernel disagree on 1,790 of 65,536 inputs"),
    12: (("https://github.com/vllm-project/vllm/pull/39047",), "-ffast-math elided a half-precision round trip"),
    13: (("https://github.com/NVIDIA/TensorRT-LLM/pull/14464",), "fused FP8 Q-quant skipped the bf16 rounding step"),
    14: (("https://github.com/vllm-project/vllm/pull/46176", "https://github.com/vllm-project/vllm/pull/46730"),
         "FNUZ max 224 vs 240; Q as e4m3fn while K used e4m3fnuz"),
    15: (("https://github.com/tile-ai/tilelang/issues/2704",), "FP4 decoder mishandled 0x0/0x1/0x8/0x9"),
    16: (("https://github.com/intel/llm-scaler/pull/569",), "E4M3 -0 (0x80) not recognised"),
    17: (("https://github.com/tenstorrent/tt-metal/pull/47219",), "sign-only '-0' pattern decoded as -inf"),
    18: (("https://github.com/NVIDIA/TransformerEngine/pull/3262",), "UE8M0 code 0 expanded to 0, code 255 to +inf"),
    19: (("https://github.com/flashinfer-ai/flashinfer/issues/2440",), "NaN or +-448 when all inputs are tiny"),
    20: (("https://github.com/THUDM/slime/pull/2256", "https://github.com/huggingface/kernels-community/issues/681",
          "https://github.com/pytorch/ao/pull/4762", "https://github.com/NVIDIA/Model-Optimizer/pull/1397"),
         "all-zero block -> NaN (0/0, log2(0) = -inf)"),
    21: (("https://github.com/ROCm/aiter/pull/2900",), "K not a multiple of 256: scale stride and padding wrong"),
    22: (("https://github.com/AMD-AGI/Primus-Turbo/pull/383",), "shuffled E8M0 padding filled with 1.0 instead of 0"),
    23: (("https://github.com/vllm-project/vllm/issues/50084",), "scales written in the wrong swizzle; roundtrip tests hid it"),
    25: (("https://github.com/vllm-project/vllm/issues/50576",), "FP8 K cache written block-planar, read token-interleaved"),
    26: (("https://github.com/ROCm/ATOM/pull/1466",), "scale views aliased layer 0; only long context broke"),
    27: (("https://github.com/PaddlePaddle/PaddleFleet/pull/1474",), "layout bug masked while packed K is 1"),
    28: (("https://github.com/sgl-project/sglang/pull/32386", "https://github.com/vllm-project/vllm/pull/49784"),
         "torch.empty padding rows held garbage"),
    29: (("https://github.com/sgl-project/sglang/issues/39193",), "non-power-of-two scale handed to a UE8M0 consumer"),
    30: (("https://github.com/Comfy-Org/comfy-kitchen/pull/41", "https://github.com/ROCm/rocm-systems/pull/6870"),
         "FP4 nibble order [A|B] vs [B|A]"),
    31: (("https://github.com/ROCm/aiter/issues/671",), "two preshuffle layouts mixed"),
    33: (("https://github.com/ROCm/aiter/issues/3366", "https://github.com/ROCm/aiter/issues/2656",
          "https://github.com/ROCm/aiter/issues/2424"), "quant -> dequant -> quant not idempotent"),
}

# Boundary classes: flag -> (description, numbers of the BUGS entries above it guards).
CLASSES: dict[str, tuple[str, tuple[int, ...]]] = {
    "all-codes": ("every code of the format, decoded or round-tripped", (15, 16, 18)),
    "midpoint": ("exact midpoints between adjacent representable values (ties)", (8, 9)),
    "midpoint-neighbour": ("one float32 ulp either side of a midpoint", (8,)),
    "signed-zero": ("+0 and -0 inputs, and results whose sign of zero is a profile choice", (15, 17)),
    "negative-underflow": ("small negative inputs that round to a zero code", (17,)),
    "subnormal": ("float32 subnormal inputs", (15,)),
    "saturation": ("magnitudes at and above the largest finite value", (14,)),
    "inf": ("+Inf and -Inf", (18,)),
    "nan": ("NaN inputs with varied payloads and signs", (18, 20)),
    "double-rounding": ("float32 values whose bf16/fp16 rounding creates a false tie or crosses a threshold", (6, 10, 12, 13)),
    "exhaustive-source": ("every bit pattern of a source format", (11,)),
    "random": ("seeded random data (numpy PCG64, seed in the header)", ()),
    "binade-edge": ("block amax at the edges of float32 binades and of 6*2^k", (1, 3)),
    "scale-policy": ("blocks whose scale byte separates the RCEIL/FLOOR/CEIL/EVEN policies", (2, 4, 5, 7)),
    "amax-floor": ("block amax just around a profile's amax floor", (19, 20)),
    "zero-block": ("blocks whose amax is 0 (+0, -0 or both)", (20,)),
    "tiny-block": ("blocks of tiny magnitudes (subnormal or ~1e-36)", (19,)),
    "huge-block": ("blocks whose amax is near FLT_MAX", (1,)),
    "nonfinite-block": ("blocks holding NaN or Inf", (20,)),
    "scale-byte": ("e8m0 bytes 0, 1, 254 and 255", (18,)),
    "log2f-threshold": ("scales just above a power of two where a rounded log2f decides ceil()", ()),
    "power-of-two-scale": ("every scale handed to a UE8M0 consumer must be a power of two", (29,)),
    "fp8-encoding-family": ("E4M3FN (OCP) and E4M3FNUZ differ in max, NaN and -0", (14, 16)),
    "idempotence": ("inputs that are already dequantized values: q(dq(q(x))) == q(x)", (33,)),
    "group-count": ("rows of several groups (packed K > 1, K not a multiple of 256)", (21, 27)),
    "nibble-order": ("element 2i in the low nibble, 2i+1 in the high nibble", (30,)),
    "layout-index-map": ("index-map goldens: where each logical byte lands, not a roundtrip", (23, 25)),
    "slot-negative": ("rows whose slot is < 0 are not written at all", (28,)),
    "slot-order": ("slots out of order inside a block, sparse slots", (25,)),
    "padding": ("padding bytes the contract writes as zero", (21, 22, 28)),
    "poison": ("bytes the contract does not write keep the poison fill", (28,)),
    "multi-block": ("several cache blocks / pages, slots past the first", (26,)),
    "preshuffle": ("the preshuffled (16x16 tile) layout variant", (31,)),
    "op-config": ("one configuration of the PR's op-level verification matrix", ()),
    "unverified": ("a profile choice docs/spec.md marks unverified: the result is 'acceptable'", (5,)),
}


def bug_flag(number: int) -> str:
    return f"BUGS-{number}"


def vocabulary() -> dict[str, dict[str, Any]]:
    """Every flag a case may carry: boundary classes and BUGS-<n> citations."""
    out: dict[str, dict[str, Any]] = {}
    for name, (description, bugs) in CLASSES.items():
        out[name] = {"description": description, "bugs": [bug_flag(b) for b in bugs]}
    for number, (urls, summary) in BUGS.items():
        out[bug_flag(number)] = {"description": summary, "bugs": list(urls)}
    return out


class SchemaError(ValueError):
    """A vector document does not follow the schema."""


def validate(doc: dict[str, Any], array_keys: set[str] | None = None) -> None:
    """Raise SchemaError naming the first violation (and unknown array keys, when given)."""
    vocab = vocabulary()

    def need(cond: bool, where: str, what: str) -> None:
        if not cond:
            raise SchemaError(f"{where}: {what}")

    need(isinstance(doc, dict) and set(doc) == {"header", "flags", "groups"}, "document", "must have exactly header, flags, groups")
    h = doc["header"]
    need(h.get("schema") == SCHEMA, "header.schema", f"must be {SCHEMA!r}")
    need(h.get("schema_version") == SCHEMA_VERSION, "header.schema_version", f"must be {SCHEMA_VERSION}")
    for key in ("generator_version", "family", "description", "seed", "profile", "profiles", "arrays", "tiers"):
        need(key in h, "header", f"missing {key}")
    profiles = set(h["profiles"])
    case_ids: set[str] = set()
    for g in doc["groups"]:
        gid = g.get("id", "?")
        for key in ("id", "op", "comment", "seed", "inputs", "outputs", "call", "compare", "params", "cases"):
            need(key in g, f"group {gid}", f"missing {key}")
        need(g["call"] in CALLS, f"group {gid}.call", f"must be one of {CALLS}")
        need(set(g["compare"]) == set(g["outputs"]), f"group {gid}.compare", "must name every output")
        need(all(compare_rule_ok(r, g["outputs"]) for r in g["compare"].values()), f"group {gid}.compare",
             f"rules must be in {COMPARE_RULES}")
        for c in g["cases"]:
            cid = c.get("id", "?")
            where = f"case {cid}"
            for key in ("id", "comment", "flags", "tier", "inputs", "params", "results"):
                need(key in c, where, f"missing {key}")
            need(cid not in case_ids, where, "duplicate id")
            case_ids.add(cid)
            need(cid.startswith(gid + "/"), where, f"id must start with its group id {gid}/")
            need(c["tier"] in TIERS, where, f"tier must be one of {TIERS}")
            need(bool(c["flags"]), where, "must carry at least one flag")
            for flag in c["flags"]:
                need(flag in vocab, where, f"unknown flag {flag!r}")
                need(flag in doc["flags"], where, f"flag {flag!r} missing from the document's flags table")
            need(set(c["inputs"]) == set(g["inputs"]), where, "inputs must be exactly the group's inputs")
            need(set(c["results"]) == profiles, where, "must hold a result for every header profile")
            for prof, r in c["results"].items():
                rw = f"{where} result {prof}"
                need(r.get("result") in RESULTS, rw, f"result must be one of {RESULTS}")
                need(set(r.get("outputs", {})) == set(g["outputs"]), rw, "outputs must be exactly the group's outputs")
                if r["result"] == "acceptable":
                    need(bool(r.get("reason")), rw, "an acceptable result must name its reason")
                for alt in r.get("alternatives", []):
                    need(bool(alt.get("reason")) and set(alt.get("outputs", {})) == set(g["outputs"]), rw, "malformed alternative")
            if array_keys is not None:
                for key in _keys_of_case(c):
                    need(key in array_keys, where, f"array {key!r} missing from {h['arrays']}")


def _keys_of_case(case: dict[str, Any]) -> list[str]:
    """Every array key a case refers to (inputs, outputs, alternatives)."""
    keys = list(case["inputs"].values())
    for r in case["results"].values():
        keys += list(r["outputs"].values())
        for alt in r.get("alternatives", []):
            keys += list(alt["outputs"].values())
    return keys

