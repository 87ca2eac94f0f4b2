"""Op-level twins on torch tensors: the indexer op (both modes, every front-end variant)."""

from mxgate.op_table import OpName
from mxgate.twin.ops.indexer import IndexerOutputs, indexer_qk_rope_quant_and_cache

__all__ = ["IndexerOutputs", OpName.INDEXER_QK_ROPE_QUANT_AND_CACHE]
