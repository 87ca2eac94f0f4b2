"""The op table: every canonical operation a backend can implement, declared once.

``OpName`` is the only place an op's name is spelled; everything else (backends, the oracle backend,
the conformance tests, the vector families, ``mxgate check``, the docs) refers to its members. A
member is a ``str``, so a user's backend may still key its ops by the plain name.

Each op is one ``OpSpec`` literal below: its typed inputs and outputs, how the gate compares its
results, the oracle's reference, the profile fields that reference reads and the inputs it
writes in place. Its human-readable signature, the positional call order and ``docs/ops/table.md``
(``mxgate backends --ops``) are generated from that literal.

Every op takes and returns NumPy arrays. bf16 data travels as raw uint16 bit patterns.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from enum import StrEnum


class OpName(StrEnum):
    E2M1_ENCODE = "e2m1.encode"
    MX_QUANTIZE = "mx.quantize"
    MX_QUANTIZE_E4M3FN = "mx.quantize_e4m3fn"
    E4M3FN_ENCODE = "e4m3fn.encode"
    E4M3FNUZ_ENCODE = "e4m3fnuz.encode"
    E4M3FN_DECODE = "e4m3fn.decode"
    E4M3FNUZ_DECODE = "e4m3fnuz.decode"
    BF16_ROUND = "bf16.round"
    E8M0_DECODE = "e8m0.decode"
    FP4_INDEXER_QUANTIZE = "fp4_indexer.quantize"
    SGLANG_PAGE68_STORE = "sglang-page68.store"
    SGLANG_PAGE68_GATHER = "sglang-page68.gather"
    AITER_FP4_KV_STORE = "aiter-fp4-kv.store"
    INDEXER_QK_ROPE_QUANT_AND_CACHE = "indexer_qk_rope_quant_and_cache"
    PA_MQA_LOGITS_FP4_DECODE = "pa_mqa_logits_fp4.decode"
    PA_MQA_LOGITS_FP4_PREFILL = "pa_mqa_logits_fp4.prefill"
    FP4_INDEXER_QUANTIZE_ROWS = "fp4_indexer.quantize_rows"
    SGLANG_PAGE8_STORE = "sglang-page8.store"
    SGLANG_INDEX_K_ROPE_PACK = "sglang.index_k_rope_pack"
    SGLANG_FP4_INDEX_LOGITS_DECODE = "sglang.fp4_index_logits.decode"
    SGLANG_FP4_INDEX_LOGITS_PAGED = "sglang.fp4_index_logits.paged"
    PA_MQA_LOGITS_FP8_DECODE = "pa_mqa_logits_fp8.decode"
    E2M1_DECODE = "e2m1.decode"
    E8M0_SCALE = "e8m0.scale"
    UE8M0_ROUND = "ue8m0.round"
    VLLM_FP4_PAGED_MQA_LOGITS = "vllm.fp4_paged_mqa_logits"
    VLLM_FP4_MQA_LOGITS = "vllm.fp4_mqa_logits"
    VLLM_FP8_PAGED_MQA_LOGITS = "vllm.fp8_paged_mqa_logits"
    VLLM_FP4_PAGED_MQA_LOGITS_TOPK = "vllm.fp4_paged_mqa_logits_topk"
    VLLM_FP4_PAGED_MQA_LOGITS_TILE_TOPK = "vllm.fp4_paged_mqa_logits_tile_topk"
    VLLM_INDEXER_Q_MXFP4 = "vllm.indexer_q_mxfp4"
    VLLM_FP4_INDEXER_K_STORE = "vllm-fp4-indexer-k.store"
    AITER_FUSED_FLATTEN_MXFP4_QUANT = "aiter.fused_flatten_mxfp4_quant"
    AITER_FUSED_RMS_MXFP4_QUANT = "aiter.fused_rms_mxfp4_quant"
    AITER_REF_QUANT_MXFP4_ROUND_DOWN = "aiter.ref_quant_mxfp4.round_down"
    AITER_REF_QUANT_MXFP4_EVEN = "aiter.ref_quant_mxfp4.even"
    AITER_REF_QUANT_MXFP4_CEIL = "aiter.ref_quant_mxfp4.ceil"
    AITER_FP4_QUANT_E2M1_WITH_E8M0 = "aiter.fp4_quant_e2m1_with_e8m0"
    AITER_FP4_ACT_QUANT = "aiter.fp4_act_quant"
    AITER_F32_TO_MX_E8M0_SCALE_ROUND_DOWN = "aiter.f32_to_mx_e8m0_scale.round_down"
    AITER_F32_TO_MX_E8M0_SCALE_ROUND_UP = "aiter.f32_to_mx_e8m0_scale.round_up"
    AITER_F32_TO_MX_E8M0_SCALE_EVEN = "aiter.f32_to_mx_e8m0_scale.even"
    AITER_F32_TO_MX_E8M0_SCALE_CEIL = "aiter.f32_to_mx_e8m0_scale.ceil"
    AITER_CREATE_PAGED_PRESHUFFLE_KV_FP4 = "aiter.create_paged_preshuffle_kv_fp4"
    AITER_KV_FP4_PRESHUFFLE_LAYOUT = "aiter.kv_fp4_preshuffle_layout"
    AITER_DSV4_SHUFFLE_SCALE = "aiter.dsv4_shuffle_scale"
    AITER_REF_MQA_LOGITS_MIXED = "aiter.ref_mqa_logits_mixed"
    AITER_INDEXER_K_QUANT_AND_CACHE = "aiter.indexer_k_quant_and_cache"
    AITER_FP8_MQA_LOGITS = "aiter.fp8_mqa_logits"


class Compare(StrEnum):
    """How the gate compares a backend's result with the oracle's (mxgate.conformance.judge)."""

    BITS = "bits"  # every byte or code equal; byte layouts also get explain's class counts
    NAN_EQUAL = "nan-equal"  # float results equal bit for bit, any NaN equal to any NaN
    WITHIN_BOUND = "within-bound"  # a float score within the oracle's rigorous error bound
    ENVELOPE = "envelope-member"  # equal to one member of the oracle's set of admissible results
    TOPK_SET = "top-k-set"  # the same index set, ties within the bound either way


@dataclass(frozen=True)
class Arg:
    """One input or output: its name (an output's role; "" for an unnamed result), element type
    and shape rule (``shape`` None: a scalar, ``dtype`` its type as written, "int", "'fn' | 'fnuz'")."""

    name: str
    dtype: str
    shape: str | None = None
    note: str = ""  # what the values are: "bf16", "e4m3 codes", "(aiter-fp4-kv)"
    alt: str | None = None  # a second accepted shape of the same dtype
    optional: bool = False  # None is accepted
    default: str | None = None  # the default, as Python writes it
    keyword: bool = False  # keyword-only

    @property
    def type(self) -> str:
        if self.shape is None:
            return self.dtype
        return f"{self.dtype}{self.shape}" + (f" | {self.dtype}{self.alt}" if self.alt else "")

    def parameter(self) -> str:
        """As an input: ``name: type note | None = default``."""
        return (f"{self.name}: {self.type}" + (f" {self.note}" if self.note else "") + (" | None" if self.optional else "")
                + (f" = {self.default}" if self.default is not None else ""))

    def result(self) -> str:
        """As an output: ``name type note``."""
        return " ".join(part for part in (self.name, self.type, self.note) if part)


@dataclass(frozen=True)
class OpSpec:
    name: OpName
    inputs: tuple[Arg, ...]
    outputs: tuple[Arg | str, ...]  # a str: the input buffer of that name, written in place and returned
    compare: Compare
    reference: str | None  # "module:function" of the oracle's reference, None: a backend-specific model
    profile_fields: tuple[str, ...]  # the Profile fields the reference reads
    note: str = ""  # what is defined where, in words
    inplace: tuple[str, ...] = ()  # inputs that are output buffers (caches, out=): the op may write them
    keywords: bool = False  # called with keyword arguments only (the kernel's own names)

    def __post_init__(self) -> None:
        names = [a.name for a in self.inputs]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.name}: an input is declared twice")
        unknown = (set(self.inplace) | {o for o in self.outputs if isinstance(o, str)}) - set(names)
        if unknown:
            raise ValueError(f"{self.name}: {sorted(unknown)} named as written in place but not inputs")
        if not {o for o in self.outputs if isinstance(o, str)} <= set(self.inplace):
            raise ValueError(f"{self.name}: an input returned as an output must be listed in inplace")

    @property
    def positional(self) -> tuple[str, ...]:
        """Call order of the inputs a caller passes by position: the required ones before any
        keyword-only input (empty: the op is called with keywords)."""
        if self.keywords:
            return ()
        return tuple(a.name for a in self.inputs if not a.keyword and a.default is None)

    def input_name(self, key: int | str) -> str:
        """The declared name of positional input ``key`` (an index) or keyword ``key``."""
        if isinstance(key, int):
            return self.positional[key] if key < len(self.positional) else f"argument {key}"
        return key

    def results(self) -> tuple[Arg, ...]:
        """The outputs as typed Args, an in-place buffer as its input's declaration."""
        by_name = {a.name: a for a in self.inputs}
        return tuple(by_name[o] if isinstance(o, str) else o for o in self.outputs)

    @property
    def signature(self) -> str:
        """The declaration in words: ``(inputs) -> outputs, note``."""
        params, star = [], self.keywords
        if star:
            params.append("*")
        for a in self.inputs:
            if a.keyword and not star:
                params.append("*")
                star = True
            params.append(a.parameter())
        outs = [o if isinstance(o, str) else o.result() for o in self.outputs]
        shown = outs[0] if len(outs) == 1 else f"({', '.join(outs)})"
        return f"({', '.join(params)}) -> {shown}" + (f", {self.note}" if self.note else "")


E2M1_FIELDS = ("tie", "zero_sign", "nan", "inf")
SCALE_FIELDS = ("scale_policy", "scale_arithmetic", "amax_floor", "floor_where", "exp_clamp", "byte0", "byte255",
                "amax_nan", "special_scale")
MX_FIELDS = E2M1_FIELDS + SCALE_FIELDS + ("nan_scale", "scale0_divisor")
MXFP8_FIELDS = SCALE_FIELDS + ("nan_scale", "scale0_divisor")
FP8_FIELDS = ("fp8_variant", "fp8_overflow")
SCORER_FIELDS = MX_FIELDS + ("fma_contraction",)
INDEXER_FIELDS = MX_FIELDS + FP8_FIELDS + ("fma_contraction", "ue8m0_rounding")

_ORACLE = "mxgate.oracle"
_OPS = "mxgate.oracle.ops"

# arguments several ops share
_X = (Arg("x", "float32", "[...]"),)
_CODES = (Arg("codes", "uint8", "[...]"),)
_AMAX = (Arg("amax", "float32", "[...]"),)
_X_BF16_ROWS = (Arg("x_bf16", "uint16", "[rows, 128]"),)
_K_BF16, _SLOTS = Arg("k_bf16", "uint16", "[T, 128]"), Arg("slots", "int64", "[T]")
_PAGE68 = Arg("cache", "uint8", "[pages, page_size*68]")
_KV_CACHE, _KV_SCALE = Arg("kv_cache", "uint8", "[nb,1,4,64,16]"), Arg("kv_scale", "uint8", "[nb,1,4,64]")
_MX_IN = (Arg("x", "float32", "[..., N]"),)
_MX_OUT = (Arg("packed", "uint8", "[..., N/2]"), Arg("e8m0", "uint8", "[..., N/32]"))
_MXFP8_OUT = (Arg("codes", "uint8", "[..., N]", "e4m3fn"), Arg("e8m0", "uint8", "[..., N/32]"))
_ROWS_OUT = (Arg("packed", "uint8", "[rows, 64]"), Arg("e8m0", "uint8", "[rows, 4]"))
_T_OUT = (Arg("packed", "uint8", "[T, 64]"), Arg("e8m0", "uint8", "[T, 4]"))
_MX_LIKE = "groups of 32, as mx.quantize; "
_VLLM_PAGED_IN = (
    Arg("q_fp4", "uint8", "[B, next_n, H, 64]"), Arg("q_e8m0", "uint8", "[B, next_n, H, 4]"),
    Arg("kv_cache", "uint8", "[num_blocks, page_bytes]", "(vllm-fp4-indexer-k)"),
    Arg("weights", "float32", "[B*next_n, H]"), Arg("context_lens", "int32", "[B]", alt="[B, next_n]"),
    Arg("block_tables", "int32", "[B, max_blocks]"), Arg("max_context_len", "int"))
_TOPK_IN = _VLLM_PAGED_IN + (Arg("topk", "int"), Arg("block_size", "int", default="64", keyword=True))
_TOPK_OUT = Arg("", "int32", "[B*next_n, topk]")
_CLEAN = Arg("clean_logits", "bool", default="True", keyword=True)
_KNOBS = Arg("knobs", "dict[str, str]", optional=True, default="None", keyword=True)
_E8M0_BYTES = Arg("", "uint8", "[...]", "e8m0")
_SG_Q, _SG_W = Arg("q_bf16", "uint16", "[B, H, 128]"), Arg("weights_bf16", "uint16", "[B, H]")


_SPECS = (
    OpSpec(OpName.E2M1_ENCODE, _X, (Arg("", "uint8", "[...]", "codes"),), Compare.BITS, f"{_ORACLE}:encode_e2m1", E2M1_FIELDS,
           "one per element, no scaling"),
    OpSpec(OpName.MX_QUANTIZE, _MX_IN, _MX_OUT, Compare.BITS, f"{_ORACLE}:quantize_mx", MX_FIELDS, "groups of 32"),
    OpSpec(OpName.MX_QUANTIZE_E4M3FN, _MX_IN, _MXFP8_OUT, Compare.BITS, f"{_ORACLE}:quantize_mx_e4m3fn", MXFP8_FIELDS,
           "MXFP8: groups of 32, the scale from 448 = 1.75 * 2^8, elements saturate to +-448"),
    OpSpec(OpName.E4M3FN_ENCODE, _X, (Arg("", "uint8", "[...]"),), Compare.BITS, f"{_ORACLE}:encode_e4m3", ("fp8_overflow",)),
    OpSpec(OpName.E4M3FNUZ_ENCODE, _X, (Arg("", "uint8", "[...]"),), Compare.BITS, f"{_ORACLE}:encode_e4m3", ("fp8_overflow",)),
    OpSpec(OpName.E4M3FN_DECODE, _CODES, (Arg("", "float32", "[...]"),), Compare.NAN_EQUAL, f"{_ORACLE}:decode_e4m3", ()),
    OpSpec(OpName.E4M3FNUZ_DECODE, _CODES, (Arg("", "float32", "[...]"),), Compare.NAN_EQUAL, f"{_ORACLE}:decode_e4m3", ()),
    OpSpec(OpName.BF16_ROUND, _X, (Arg("", "uint16", "[...]", "bf16 bit patterns"),), Compare.BITS, f"{_ORACLE}:bf16_bits",
           ("bf16_nan",)),
    # decode_e8m0 reads the byte-0 and byte-255 rules (mxgate/oracle/formats/e8m0.py)
    OpSpec(OpName.E8M0_DECODE, _CODES, (Arg("", "float32", "[...]"),), Compare.NAN_EQUAL, f"{_ORACLE}:decode_e8m0", ("byte0", "byte255")),
    OpSpec(OpName.FP4_INDEXER_QUANTIZE, _X_BF16_ROWS, _ROWS_OUT, Compare.BITS, f"{_ORACLE}:quantize_mx", MX_FIELDS),
    OpSpec(OpName.SGLANG_PAGE68_STORE, (_K_BF16, _SLOTS, _PAGE68), ("cache",), Compare.BITS, f"{_ORACLE}:quantize_mx", MX_FIELDS,
           inplace=("cache",)),
    OpSpec(OpName.SGLANG_PAGE68_GATHER, (_PAGE68, _SLOTS), _T_OUT, Compare.BITS, None, ()),
    OpSpec(OpName.AITER_FP4_KV_STORE, (_K_BF16, _SLOTS, _KV_CACHE, _KV_SCALE), ("kv_cache", "kv_scale"), Compare.BITS,
           f"{_ORACLE}:quantize_mx", MX_FIELDS, inplace=("kv_cache", "kv_scale")),
    OpSpec(OpName.INDEXER_QK_ROPE_QUANT_AND_CACHE, (
        Arg("q", "uint16", "[T, H, 128]", "bf16"), Arg("q_out", "uint8", "[T, H, 64 | 128]", optional=True),
        Arg("weights", "uint16", "[T, H]", "bf16"), Arg("weights_out", "float32", "[T, H]", optional=True),
        Arg("k", "uint16", "[T, 128]", "bf16"), Arg("kv_cache", "uint8", "[...]", optional=True),
        Arg("slot_mapping", "int64", "[T]"), Arg("norm_weight", "float32", "[128]"), Arg("norm_bias", "float32", "[128]"),
        Arg("positions", "int64", "[T]"), Arg("cos_cache", "uint16", "[max_pos, 32]", "bf16"),
        Arg("sin_cache", "uint16", "[max_pos, 32]", "bf16"), Arg("epsilon", "float"), Arg("quant_block_size", "int"),
        Arg("scale_fmt", "str"), Arg("weights_scale", "float"),
        Arg("q_scale_out", "uint8", "[...]", "(fp4 mode)", optional=True, default="None"),
        Arg("kv_cache_scale", "uint8", "[...]", "(fp4 mode)", optional=True, default="None"),
        Arg("mode", "'fp4' | 'fp8'")),
        ("q_out", "weights_out", "kv_cache", "q_scale_out", "kv_cache_scale"), Compare.ENVELOPE,
        f"{_OPS}:indexer_qk_rope_quant_and_cache", INDEXER_FIELDS,
        "AITER keyword names, in the mode's layouts; see mxgate.oracle.ops.indexer",
        inplace=("q_out", "weights_out", "kv_cache", "q_scale_out", "kv_cache_scale"), keywords=True),
    OpSpec(OpName.PA_MQA_LOGITS_FP4_DECODE, (
        Arg("q_fp4", "uint8", "[B, next_n, H, D/2]", "(aiter-fp4-q)"),
        Arg("q_scale", "uint8", "[B, next_n, k_tiles, 4, 16, QS_PAD]", "(aiter-fp4-q-scale)"),
        Arg("kv_cache", "uint8", "[num_blocks, k_tiles, 4, 64, 16]", "(aiter-fp4-kv)"),
        Arg("kv_scale", "uint8", "[num_blocks, k_tiles, 4, 64]", "(aiter-fp4-kv-scale)"),
        Arg("block_tables", "int32", "[B, max_blocks]"), Arg("weights", "uint16", "[B*next_n, H]", "bf16"),
        Arg("context_lens", "int32", "[B]"), Arg("max_seq_len", "int"),
        Arg("out", "float32", "[B*next_n, max_seq_len]", optional=True, default="None")),
        (Arg("", "float32", "[B*next_n, max_seq_len]"),), Compare.WITHIN_BOUND, f"{_OPS}:pa_mqa_logits_fp4",
        SCORER_FIELDS, "AITER keyword names, written for t < ctx[b] - (next_n - 1 - n); see mxgate.oracle.scorers.aiter_fp4",
        inplace=("out",), keywords=True),
    OpSpec(OpName.PA_MQA_LOGITS_FP4_PREFILL, (
        Arg("q_fp4", "uint8", "[rows, H, D/2]"), Arg("q_scale", "uint8", "[rows, k_tiles, 4, 16, QS_PAD]"),
        Arg("kv_cache", "uint8", "[num_blocks, k_tiles, 4, 64, 16]"), Arg("kv_scale", "uint8", "[num_blocks, k_tiles, 4, 64]"),
        Arg("block_tables", "int32", "[B, max_blocks]"), Arg("weights", "uint16", "[rows, H]", "bf16"),
        Arg("row_info", "int32", "[rows, 4]"), Arg("max_seq_len", "int"),
        Arg("out", "float32", "[rows, max_seq_len]", optional=True, default="None")),
        (Arg("", "float32", "[rows, max_seq_len]"),), Compare.WITHIN_BOUND, f"{_OPS}:pa_mqa_logits_fp4_prefill",
        SCORER_FIELDS, "AITER keyword names, written in [local_start, local_end); see mxgate.oracle.scorers.aiter_fp4",
        inplace=("out",), keywords=True),
    OpSpec(OpName.FP4_INDEXER_QUANTIZE_ROWS, _X_BF16_ROWS, _ROWS_OUT, Compare.BITS, f"{_ORACLE}:quantize_mx", MX_FIELDS,
           "the multi-row (Blackwell) kernel"),
    OpSpec(OpName.SGLANG_PAGE8_STORE, (_K_BF16, _SLOTS, _KV_CACHE, _KV_SCALE), ("kv_cache", "kv_scale"), Compare.BITS,
           f"{_ORACLE}:quantize_mx", MX_FIELDS, "eight 8-slot pages per 64-slot page over the flat buffers",
           inplace=("kv_cache", "kv_scale")),
    OpSpec(OpName.SGLANG_INDEX_K_ROPE_PACK, (
        Arg("x_bf16", "uint16", "[T, 128]", alt="[T, H, 128]"), Arg("freqs", "complex64", "[F, rope_dim/2]"),
        Arg("rope_dim", "int"), Arg("positions", "int64", "[T]", optional=True, default="None"),
        Arg("cache", "uint8", "[pages, page_size*68]", optional=True, default="None"),
        Arg("slots", "int64", "[T]", optional=True, default="None")),
        (Arg("packed", "uint8", "[T*H, 64]"), Arg("e8m0", "uint8", "[T*H, 4]")), Compare.BITS, None, MX_FIELDS,
        "or the cache, written in place, when cache is given", inplace=("cache",), keywords=True),
    OpSpec(OpName.SGLANG_FP4_INDEX_LOGITS_DECODE, (
        _SG_Q, _SG_W, Arg("slots", "int64", "[B, L]"), Arg("lens", "int64", "[B]"), Arg("table", "uint8", "[pages, page_size*68]")),
        (Arg("", "float32", "[B, L]"),), Compare.WITHIN_BOUND, None, SCORER_FIELDS, "-inf at positions >= lens",
        keywords=True),
    OpSpec(OpName.SGLANG_FP4_INDEX_LOGITS_PAGED, (
        _SG_Q, _SG_W, Arg("req", "int64", "[B]"), Arg("req_table", "int32", "[R, W]"), Arg("lens", "int64", "[B]"),
        Arg("table", "uint8", "[pages, page_size*68]"), Arg("max_len", "int"), Arg("ratio", "1 | 2"),
        Arg("candidate_mask", "bool", "[B, >= max_len]", optional=True, default="None")),
        (Arg("", "float32", "[B, max_len]"),), Compare.WITHIN_BOUND, None, SCORER_FIELDS,
        "defined below min(lens, max_len)", keywords=True),
    OpSpec(OpName.PA_MQA_LOGITS_FP8_DECODE, (
        Arg("q_fp8", "uint8", "[B, next_n, H, D]", "e4m3 codes"),
        Arg("kv_cache", "uint8", "[num_blocks, block_size, D+4]", "(aiter-fp8-kv, or -preshuffle with preshuffle=True)"),
        Arg("weights", "float32", "[B*next_n, H]"), Arg("context_lens", "int32", "[B]"),
        Arg("block_tables", "int32", "[B, max_blocks]"), Arg("max_seq_len", "int"),
        Arg("preshuffle", "bool", default="False"), Arg("variant", "'fn' | 'fnuz'", default="'fn'"),
        Arg("out", "float32", "[B*next_n, max_seq_len]", optional=True, default="None")),
        (Arg("", "float32", "[B*next_n, max_seq_len]"),), Compare.WITHIN_BOUND, f"{_OPS}:pa_mqa_logits_fp8", FP8_FIELDS,
        "written iff t + next_n - 1 - n < context_lens[b]; see mxgate.oracle.scorers.aiter_fp8",
        inplace=("out",), keywords=True),
    OpSpec(OpName.E2M1_DECODE, _CODES, (Arg("", "float32", "[...]"),), Compare.NAN_EQUAL, f"{_ORACLE}:decode_e2m1", (),
           "the 16 E2M1 values (no scaling)"),
    OpSpec(OpName.E8M0_SCALE, _AMAX, (Arg("", "uint8", "[...]", "e8m0 scale bytes under the profile's policy"),), Compare.BITS,
           f"{_ORACLE}:e8m0_scale", SCALE_FIELDS),
    OpSpec(OpName.UE8M0_ROUND, (Arg("scale", "float32", "[...]"),),
           (Arg("", "float32", "[...]", "the scale rounded to a power of two (ue8m0)"),), Compare.NAN_EQUAL,
           "mxgate.oracle.scales:ue8m0_round", ("ue8m0_rounding",)),
    # vLLM PR #42908's ROCm Triton kernels (mxgate.kernels.vllm_triton; oracle: mxgate.oracle.scorers.vllm and
    # quant_vllm). The FP4 K cache is the vllm-fp4-indexer-k layout: uint8 [num_blocks, page_bytes].
    OpSpec(OpName.VLLM_FP4_PAGED_MQA_LOGITS, _VLLM_PAGED_IN + (Arg("block_size", "int", default="64", keyword=True),
                                                              _CLEAN, _KNOBS),
           (Arg("", "float32", "[B*next_n, max_context_len]"),), Compare.WITHIN_BOUND, None, SCORER_FIELDS,
           "written for t < limit (ctx[b] - (next_n - 1 - n), or ctx[b, n]; at most max_context_len), -inf elsewhere "
           "when clean_logits"),
    OpSpec(OpName.VLLM_FP4_MQA_LOGITS, (
        Arg("q_fp4", "uint8", "[S, H, 64]"), Arg("q_e8m0", "uint8", "[S, H, 4]"), Arg("k_fp4", "uint8", "[N, 64]"),
        Arg("k_e8m0", "uint8", "[N, 4]"), Arg("weights", "float32", "[S, H]"), Arg("cu_seqlen_ks", "int32", "[S]"),
        Arg("cu_seqlen_ke", "int32", "[S]"), _CLEAN, _KNOBS),
        (Arg("", "float32", "[S, N]"),), Compare.WITHIN_BOUND, None, SCORER_FIELDS, "written in [max(ks, 0), min(ke, N))"),
    OpSpec(OpName.VLLM_FP8_PAGED_MQA_LOGITS, (
        Arg("q_fp8", "uint8", "[B, next_n, H, D]", "e4m3 codes (the platform's FP8 dtype)"),
        Arg("kv_cache", "uint8", "[num_blocks, block_size, D+4]", "(aiter-fp8-kv)"), Arg("weights", "float32", "[B*next_n, H]"),
        Arg("context_lens", "int32", "[B]", alt="[B, next_n]"), Arg("block_tables", "int32", "[B, max_blocks]"),
        Arg("max_context_len", "int"), _CLEAN),
        (Arg("", "float32", "[B*next_n, max_context_len]"),), Compare.WITHIN_BOUND, None, FP8_FIELDS),
    OpSpec(OpName.VLLM_FP4_PAGED_MQA_LOGITS_TOPK, _TOPK_IN, (_TOPK_OUT,), Compare.TOPK_SET, None, SCORER_FIELDS,
           "token indices (a set; rows with at most topk window cells: 0..limit-1 then -1)"),
    OpSpec(OpName.VLLM_FP4_PAGED_MQA_LOGITS_TILE_TOPK, _TOPK_IN, (_TOPK_OUT,), Compare.TOPK_SET, None, SCORER_FIELDS,
           "as vllm.fp4_paged_mqa_logits_topk by the tiled kernel"),
    OpSpec(OpName.VLLM_INDEXER_Q_MXFP4, (
        Arg("x_bf16", "uint16", "[T, H, 128]"), Arg("weights", "float32", "[T, H]"), Arg("softmax_scale", "float"),
        Arg("head_scale", "float")),
        (Arg("packed", "uint8", "[T, H, 64]"), Arg("e8m0", "uint8", "[T, H, 4]"), Arg("weights_out", "float32", "[T, H]")),
        Compare.BITS, None, MX_FIELDS, "at a cos 1 / sin 0 position"),
    OpSpec(OpName.VLLM_FP4_INDEXER_K_STORE, (
        _K_BF16, _SLOTS, Arg("cache", "uint8", "[num_blocks, page_bytes]"), Arg("block_size", "int", default="64", keyword=True)),
        ("cache",), Compare.BITS, None, MX_FIELDS, "slots < 0 skipped; k values 0 or 2^-60 <= |x| < 2^36", inplace=("cache",)),
    # AITER's Triton kernels and Python references (mxgate.kernels.aiter_triton, aiter_reference)
    OpSpec(OpName.AITER_FUSED_FLATTEN_MXFP4_QUANT, _MX_IN, _MX_OUT, Compare.BITS, None, MX_FIELDS,
           _MX_LIKE + "AITER fused_flatten_mxfp4_quant"),
    OpSpec(OpName.AITER_FUSED_RMS_MXFP4_QUANT, _MX_IN, _MX_OUT, Compare.BITS, None, MX_FIELDS,
           _MX_LIKE + "AITER fused_rms_mxfp4_quant with an identity RMSNorm (finite |x| = 0 or in [2^-76, 2^37))"),
    OpSpec(OpName.AITER_REF_QUANT_MXFP4_ROUND_DOWN, _MX_IN, _MX_OUT, Compare.BITS, None, MX_FIELDS,
           _MX_LIKE + "AITER ref_quant_mxfp4(round_mode=0)"),
    OpSpec(OpName.AITER_REF_QUANT_MXFP4_EVEN, _MX_IN, _MX_OUT, Compare.BITS, None, MX_FIELDS,
           _MX_LIKE + "AITER ref_quant_mxfp4(round_mode=2)"),
    OpSpec(OpName.AITER_REF_QUANT_MXFP4_CEIL, _MX_IN, _MX_OUT, Compare.BITS, None, MX_FIELDS,
           _MX_LIKE + "AITER ref_quant_mxfp4(round_mode=3)"),
    OpSpec(OpName.AITER_FP4_QUANT_E2M1_WITH_E8M0, _MX_IN, _MX_OUT, Compare.BITS, None, MX_FIELDS,
           _MX_LIKE + "AITER's FlyDSL scorer test generator"),
    OpSpec(OpName.AITER_FP4_ACT_QUANT, _MX_IN, _MX_OUT, Compare.BITS, None, MX_FIELDS,
           _MX_LIKE + "AITER op_tests/test_dsv4_rotate_quant.py fp4_act_quant"),
    OpSpec(OpName.AITER_F32_TO_MX_E8M0_SCALE_ROUND_DOWN, _AMAX, (_E8M0_BYTES,), Compare.BITS, f"{_ORACLE}:e8m0_scale",
           SCALE_FIELDS, "AITER mode RoundDown"),
    OpSpec(OpName.AITER_F32_TO_MX_E8M0_SCALE_ROUND_UP, _AMAX, (_E8M0_BYTES,), Compare.BITS, f"{_ORACLE}:e8m0_scale",
           SCALE_FIELDS, "AITER mode RoundUp"),
    OpSpec(OpName.AITER_F32_TO_MX_E8M0_SCALE_EVEN, _AMAX, (_E8M0_BYTES,), Compare.BITS, f"{_ORACLE}:e8m0_scale",
           SCALE_FIELDS, "AITER mode Even"),
    OpSpec(OpName.AITER_F32_TO_MX_E8M0_SCALE_CEIL, _AMAX, (_E8M0_BYTES,), Compare.BITS, f"{_ORACLE}:e8m0_scale",
           SCALE_FIELDS, "AITER mode Ceil"),
    OpSpec(OpName.AITER_CREATE_PAGED_PRESHUFFLE_KV_FP4, (
        Arg("kv_bf16", "uint16", "[B, T, D]"), Arg("kv_block_size", "int"), Arg("num_blocks", "int"),
        Arg("block_tables", "int32", "[B, T/kv_block_size]")),
        (Arg("kv_cache", "uint8", "[nb, D/128, 4, bs, 16]", "(aiter-fp4-kv)"),
         Arg("kv_scale", "uint8", "[nb, D/128, 4, bs]", "(aiter-fp4-kv-scale)"),
         Arg("kv_fp4", "uint8", "[B, T, D/2]"), Arg("kv_e8m0", "uint8", "[B, T, D/32]")),
        Compare.BITS, None, MX_FIELDS, "unlisted blocks zero"),
    OpSpec(OpName.AITER_KV_FP4_PRESHUFFLE_LAYOUT, (
        Arg("kv_fp4_dense", "uint8", "[T, D/2]"), Arg("kv_scale_dense", "uint8", "[T, D/32]"), Arg("kv_block_size", "int"),
        Arg("slot_mapping", "int64", "[T]"), Arg("num_blocks", "int")),
        (Arg("kv_cache", "uint8", "[nb, D/128, 4, bs, 16]"), Arg("kv_scale", "uint8", "[nb, D/128, 4, bs]")),
        Compare.BITS, None, MX_FIELDS, "slots < 0 skipped, other bytes zero"),
    OpSpec(OpName.AITER_DSV4_SHUFFLE_SCALE, (Arg("scale", "uint8", "[T, H, D/32]"),),
           (Arg("", "uint8", "[T, D/128, 4, 16, round_up(H/16, 4)]", "(aiter-fp4-q-scale, padding 0)"),), Compare.BITS, None, MX_FIELDS),
    OpSpec(OpName.AITER_REF_MQA_LOGITS_MIXED, (
        Arg("q_packed", "uint8", "[B, n, H, D/2]"), Arg("q_scale", "uint8", "[B, n, H, D/32]"),
        Arg("kv_fp4", "uint8", "[B, T, D/2]"), Arg("kv_scale", "uint8", "[B, T, D/32]"), Arg("weights", "float32", "[B*n, H]"),
        Arg("context_lens", "int32", "[B]"), Arg("next_n", "int", default="1"), Arg("weight_scale", "float", default="1.0")),
        (Arg("", "float32", "[B*n, T]"),), Compare.WITHIN_BOUND, None, SCORER_FIELDS,
        "-inf outside t + n_next - 1 - n < ctx"),
    OpSpec(OpName.AITER_INDEXER_K_QUANT_AND_CACHE, (
        Arg("k_bf16", "uint16", "[T, D]"), Arg("kv_cache", "uint8", "[nb, B, D+4]", "(aiter-fp8-kv)"),
        Arg("slot_mapping", "int64", "[T]"), Arg("quant_block_size", "int", default="128"),
        Arg("scale_fmt", "str", default="'ue8m0'"), Arg("preshuffle", "bool", default="False")),
        ("kv_cache",), Compare.BITS, None, FP8_FIELDS + ("ue8m0_rounding",), inplace=("kv_cache",)),
    OpSpec(OpName.AITER_FP8_MQA_LOGITS, (
        Arg("q_fp8", "uint8", "[S, H, D]", "e4m3 codes"), Arg("kv_fp8", "uint8", "[Skv, D]"),
        Arg("kv_scales", "float32", "[Skv]"), Arg("weights", "float32", "[S, H]"), Arg("cu_starts", "int32", "[S]"),
        Arg("cu_ends", "int32", "[S]"), Arg("clean_logits", "bool", default="True")),
        (Arg("", "float32", "[S, Skv]"),), Compare.WITHIN_BOUND, None, FP8_FIELDS,
        "row i defined on [cu_starts[i], cu_ends[i]), -inf elsewhere"),
)

_BY_NAME = {s.name: s for s in _SPECS}
# every op declared exactly once, in OpName's order (KeyError here: an op without its OpSpec)
TABLE: dict[OpName, OpSpec] = {op: _BY_NAME[op] for op in OpName}
if len(_SPECS) != len(TABLE):
    raise ValueError("an op is declared twice in the op table")


def spec(op: str) -> OpSpec:
    """The declaration of ``op`` (a member or its plain name); a one-line error for an unknown name."""
    try:
        return TABLE[OpName(op)]
    except ValueError:
        raise ValueError(f"unknown op {op!r}; the ops are: {', '.join(OpName)}") from None


def reference(op: str):
    """The oracle's reference function of ``op``, NumPy in and out (None where a backend-specific
    model judges it). The gate's device dispatch (the twin on ``cuda``) is
    ``mxgate.conformance.reference``'s."""
    path = spec(op).reference
    if path is None:
        return None
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def _cell(text: str) -> str:
    return text.replace("|", "&#124;")  # a pipe inside a Markdown table cell ends the cell


def markdown() -> str:
    """The op table as Markdown (docs/ops/table.md is this text; a test keeps it current)."""
    lines = ["# The op table", "",
             "Generated from `mxgate/op_table.py` by `mxgate backends --ops`; do not edit by hand.", "",
             "| op | inputs | outputs | compared | oracle reference | profile fields |", "|---|---|---|---|---|---|"]
    for s in TABLE.values():
        ins = ("by keyword: " if s.keywords else "") + ", ".join(f"`{_cell(a.parameter())}`" for a in s.inputs)
        outs = ", ".join(f"`{_cell(a.type)}`" for a in s.results())
        lines.append(f"| `{s.name}` | {ins} | {outs} | {s.compare} | {f'`{s.reference}`' if s.reference else 'backend model'} "
                     f"| {', '.join(s.profile_fields) or '-'} |")
    lines += ["", "Signatures in full:", ""]
    lines += [f"- `{s.name}`: {_cell(s.signature)}" for s in TABLE.values()]
    return "\n".join(lines) + "\n"
