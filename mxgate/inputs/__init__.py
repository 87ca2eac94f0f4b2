"""Inputs of every op, in one place: what the conformance suite, the differential search, the
golden-vector families, the benchmark and the tests feed the backends and the oracle.

bits        float32 bit-pattern helpers (exact: no rounding) and the NaN payloads
samples     seeded random data, the same bytes on every machine
boundaries  the boundary classes as bit patterns (tagged with their golden-vector flags) and
            the fixed boundary arrays of the element and scale ops
strategies  the Hypothesis strategies of every op's inputs
indexer     configurations and cases of ``indexer_qk_rope_quant_and_cache``
logits      cases of the FP4/FP8 scorers (AITER and sglang layouts)
vllm        cases of vLLM's scorers and quantizer kernels

Nothing here decides a bit of an output: these are test data, not semantics.
"""
