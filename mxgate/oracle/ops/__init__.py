"""Op-level oracles: whole kernels, bit-exact, NumPy in and out.

One block of import lines per op family; ``__all__`` is built from the imported names, so a
new family only adds its import lines. The scorers live in ``mxgate.oracle.scorers``; their
public names are re-exported here. The oracle makes no verdict: judging a backend's outputs
against these (``compare_logits``, ``check_topk``, ``match_variants``) is
``mxgate.conformance.judge``'s, a layer above.
"""

from types import ModuleType as _ModuleType

# indexer_qk_rope_quant_and_cache (AITER, FP8 and FP4 output modes)
from mxgate.oracle.ops.frontend import VARIANT_NAMES, VARIANTS, FrontEnd, default_variant, envelope
from mxgate.oracle.ops.indexer import IndexerOutputs, indexer_qk_rope_quant_and_cache
from mxgate.oracle.ops.members import frontend_values

# paged MQA logits scorers (decode / prefill) and the oracle's top-k
from mxgate.oracle.scorers import ScoredLogits, pa_mqa_logits_fp4, pa_mqa_logits_fp4_prefill
from mxgate.oracle.scorers import pa_mqa_logits_fp4_prefill_scored, pa_mqa_logits_fp4_scored
from mxgate.oracle.scorers import pa_mqa_logits_fp8, pa_mqa_logits_fp8_scored
from mxgate.oracle.scorers import fp4_index_logits_decode, fp4_index_logits_decode_scored
from mxgate.oracle.scorers import fp4_index_logits_paged, fp4_index_logits_paged_scored
from mxgate.oracle.scorers import topk_indices

# the names these functions had before the value-and-bound forms were called "scored"
pa_mqa_logits_fp4_exact = pa_mqa_logits_fp4_scored
pa_mqa_logits_fp4_prefill_exact = pa_mqa_logits_fp4_prefill_scored
pa_mqa_logits_fp8_exact = pa_mqa_logits_fp8_scored
fp4_index_logits_decode_exact = fp4_index_logits_decode_scored
fp4_index_logits_paged_exact = fp4_index_logits_paged_scored

__all__ = sorted(name for name, value in list(globals().items())
                 if not name.startswith("_") and not isinstance(value, _ModuleType))
