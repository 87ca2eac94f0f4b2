"""Op-level twins on torch tensors: the indexer op (both modes, every front-end variant)."""

from mxgate.twin.ops.indexer import IndexerOutputs, indexer_qk_rope_quant_and_cache  # noqa: F401 - the API
