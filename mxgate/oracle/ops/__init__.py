"""Op-level oracles: whole kernels, bit-exact, NumPy in and out.

One block of import lines per op family; ``__all__`` is built from the imported names, so a
new family only adds its import lines.
"""

from types import ModuleType as _ModuleType

# indexer_qk_rope_quant_and_cache (AITER, FP8 and FP4 output modes)
from mxgate.oracle.ops.frontend import VARIANT_NAMES, VARIANTS, FrontEnd, default_variant, envelope
from mxgate.oracle.ops.indexer import IndexerOutputs, indexer_qk_rope_quant_and_cache
from mxgate.oracle.ops.matching import EnvelopeMatch, frontend_values, match_variants

# paged MQA logits scorers (decode / prefill)
from mxgate.oracle.ops.logits import LogitsCheck, ScoredLogits, compare_logits, pa_mqa_logits_fp4, pa_mqa_logits_fp4_exact
from mxgate.oracle.ops.logits import pa_mqa_logits_fp4_prefill, pa_mqa_logits_fp4_prefill_exact
from mxgate.oracle.ops.logits_fp8 import pa_mqa_logits_fp8, pa_mqa_logits_fp8_exact
from mxgate.oracle.ops.logits_sglang import fp4_index_logits_decode, fp4_index_logits_decode_exact
from mxgate.oracle.ops.logits_sglang import fp4_index_logits_paged, fp4_index_logits_paged_exact
from mxgate.oracle.ops.topk import TopkCheck, check_topk, topk_indices

__all__ = sorted(
    name for name, value in list(globals().items())
    if not name.startswith("_") and not isinstance(value, _ModuleType)
)
