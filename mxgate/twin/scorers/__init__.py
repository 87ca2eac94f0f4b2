"""The paged MQA logits scorers on torch tensors: each module is the twin of its namesake in
``mxgate.oracle.scorers`` (same arguments, same bits), with ``COUNTERPARTS`` mapping each oracle
function to its twin."""

from mxgate.twin.scorers import aiter_fp4, aiter_fp8, sglang, vllm

COUNTERPARTS = {**aiter_fp4.COUNTERPARTS, **aiter_fp8.COUNTERPARTS, **sglang.COUNTERPARTS, **vllm.COUNTERPARTS}
