"""Planted vLLM ragged FP4 scorers for the gate's special-scale-bytes configs
(tests/test_vllm_special_scales.py): the oracle's own logits, and the same with every logit of
a token whose K scale holds byte 255 turned to NaN (the rule the oracle wrongly modelled before:
vLLM's relu, a maxnum, drops a NaN score)."""

from __future__ import annotations

import numpy as np

from mxgate.kernels.functions import backend_from_functions, kernel
from mxgate.op_table import OpName
from mxgate.oracle import profiles
from mxgate.oracle.scorers import vllm as lv

GFX950 = profiles.get("gfx950")


def _ragged(q_fp4, q_e8m0, k_fp4, k_e8m0, weights, cu_seqlen_ks, cu_seqlen_ke, *, clean_logits=True, knobs=None):
    return lv.fp4_ragged_logits(q_fp4, q_e8m0, k_fp4, k_e8m0, weights, cu_seqlen_ks, cu_seqlen_ke, profile=GFX950)


def _ragged_nan_at_byte255(q_fp4, q_e8m0, k_fp4, k_e8m0, weights, cu_seqlen_ks, cu_seqlen_ke, *, clean_logits=True,
                           knobs=None):
    logits = _ragged(q_fp4, q_e8m0, k_fp4, k_e8m0, weights, cu_seqlen_ks, cu_seqlen_ke).copy()
    tokens = np.flatnonzero((np.asarray(k_e8m0) == 0xFF).any(axis=1))
    rows = np.arange(logits.shape[0])[:, None]
    inside = (tokens[None, :] >= np.asarray(cu_seqlen_ks)[:, None]) & (tokens[None, :] < np.asarray(cu_seqlen_ke)[:, None])
    logits[np.broadcast_to(rows, inside.shape)[inside], np.broadcast_to(tokens, inside.shape)[inside]] = np.nan
    return logits


ragged_ok = backend_from_functions("ragged-ok", kernel(OpName.VLLM_FP4_MQA_LOGITS, _ragged, profile="gfx950"))
ragged_nan_at_byte255 = backend_from_functions(
    "ragged-nan-at-byte255", kernel(OpName.VLLM_FP4_MQA_LOGITS, _ragged_nan_at_byte255, profile="gfx950"))
