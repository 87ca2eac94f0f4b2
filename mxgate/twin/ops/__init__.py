"""Nothing of the indexer op is the twin's any more: ``oracle.ops.indexer_qk_rope_quant_and_cache``
runs on torch tensors itself. ``f32math`` re-exports the oracle's while a twin scorer imports it."""
