"""The FP4 paged MQA scorers (SPEC section 7): ``pa_mqa_logits_fp4`` decode and prefill.

Each case stores the scorer's inputs (AITER layouts, a reversed block table so block and token
order differ) and three float outputs: ``logits`` (float32, the emulated summation order:
bit equality is exact), ``logits_value`` (float64 exact value) and ``logits_bound`` (float64
rigorous bound on |fp32 result - value| for any fp32 summation order). The compare rule
``within:logits_value,logits_bound`` makes any output inside the bound acceptable. Cells
outside a row's window are -inf in all three forms (bound 0).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mxgate.op_table import OpName
from mxgate import oracle
from mxgate.oracle import ops
from mxgate.oracle import profiles as _profiles
from mxgate.oracle.geometry import KV_BLOCK
from mxgate.vectors.families._builder import FamilyBuilder, Outputs
from mxgate.inputs.samples import normal

NAME = "logits"
DESCRIPTION = "pa_mqa_logits_fp4 decode and prefill scorers: exact emulated order plus a rigorous bound"
SEED = 0x4D584705
PROFILES = ("gfx950",)  # the scorers read FP4 bytes the gfx950 writer produced
SCORERS = {OpName.PA_MQA_LOGITS_FP4_DECODE: "pa_mqa_logits_fp4_exact",
           OpName.PA_MQA_LOGITS_FP4_PREFILL: "pa_mqa_logits_fp4_prefill_exact"}
OUTPUTS = ("logits", "logits_value", "logits_bound")
COMPARE = {"logits": "within:logits_value,logits_bound", "logits_value": "reference", "logits_bound": "reference"}


def available() -> str | None:
    return None


def _bf16(rng: np.random.Generator, shape: tuple[int, ...], scale: float = 1.0) -> np.ndarray:
    return oracle.round_bf16((normal(rng, shape) * scale).astype(np.float32))


def _tables(batch: int, blocks: int) -> np.ndarray:
    """Block table [batch, blocks]: every block distinct, in reverse order (never the identity)."""
    return (np.arange(batch * blocks, dtype=np.int32)[::-1].reshape(batch, blocks)).copy()


def _kv(rng: np.random.Generator, tables: np.ndarray, lens: list[int]) -> tuple[np.ndarray, np.ndarray]:
    from mxgate.oracle import layouts

    kv, kvs = layouts.get("aiter-fp4-kv"), layouts.get("aiter-fp4-kv-scale")
    nb = int(tables.size)
    cache, scale = kv.new_buffer(num_blocks=nb), kvs.new_buffer(num_blocks=nb)
    for b, n in enumerate(lens):
        t = np.arange(n)
        slots = tables[b, t // KV_BLOCK].astype(np.int64) * KV_BLOCK + t % KV_BLOCK
        packed, e8m0 = oracle.quantize_mx(_bf16(rng, (n, 128), 2.0), "gfx950")
        kv.scatter(cache, packed, slots=slots)
        kvs.scatter(scale, e8m0, slots=slots)
    return cache, scale


def _q(rng: np.random.Generator, rows: int, heads: int) -> tuple[np.ndarray, np.ndarray]:
    from mxgate.oracle import layouts

    packed, e8m0 = oracle.quantize_mx(_bf16(rng, (rows, heads, 128), 2.0), "gfx950")
    qs = layouts.get("aiter-fp4-q-scale")
    q_scale = qs.new_buffer(num_tokens=rows, num_heads=heads)
    qs.scatter(q_scale, e8m0, num_heads=heads)
    return packed, q_scale


def _decode_inputs(rng, batch: int, next_n: int, heads: int, lens: list[int]) -> dict[str, Any]:
    tables = _tables(batch, -(-max(lens) // KV_BLOCK))
    cache, scale = _kv(rng, tables, lens)
    q_fp4, q_scale = _q(rng, batch * next_n, heads)
    return {
        "q_fp4": q_fp4.reshape(batch, next_n, heads, 64), "q_scale": q_scale.reshape((batch, next_n) + q_scale.shape[1:]),
        "kv_cache": cache, "kv_scale": scale, "block_tables": tables,
        "weights": oracle.bf16_bits(_bf16(rng, (batch * next_n, heads), 0.1)),
        "context_lens": np.array(lens, dtype=np.int32),
    }


def _prefill_inputs(rng, rows_per_batch: int, heads: int, lens: list[int]) -> dict[str, Any]:
    batch = len(lens)
    tables = _tables(batch, -(-max(lens) // KV_BLOCK))
    cache, scale = _kv(rng, tables, lens)
    rows = batch * rows_per_batch
    q_fp4, q_scale = _q(rng, rows, heads)
    bi = np.repeat(np.arange(batch), rows_per_batch)
    i = np.tile(np.arange(rows_per_batch), batch)
    end = np.array(lens)[bi] - rows_per_batch + i + 1  # causal windows [0, end)
    info = np.stack([bi, np.zeros(rows, np.int64), end, np.zeros(rows, np.int64)], axis=1).astype(np.int32)
    return {"q_fp4": q_fp4, "q_scale": q_scale, "kv_cache": cache, "kv_scale": scale, "block_tables": tables,
            "weights": oracle.bf16_bits(_bf16(rng, (rows, heads), 0.1)), "row_info": info}


def build(fb: FamilyBuilder) -> None:
    rng = fb.rng(50)
    plans = {
        OpName.PA_MQA_LOGITS_FP4_DECODE: [
            ("B1-n1-H32-ctx100", "quick", lambda: _decode_inputs(rng, 1, 1, 32, [100]), 100),
            ("B2-n4-H32-ctx64-130", "default", lambda: _decode_inputs(rng, 2, 4, 32, [64, 130]), 130),
            ("B1-n2-H64-ctx257", "default", lambda: _decode_inputs(rng, 1, 2, 64, [257]), 257),
        ],
        OpName.PA_MQA_LOGITS_FP4_PREFILL: [
            ("B1-r4-H32-ctx70", "quick", lambda: _prefill_inputs(rng, 4, 32, [70]), 70),
            ("B2-r3-H64-ctx64-129", "default", lambda: _prefill_inputs(rng, 3, 64, [64, 129]), 129),
        ],
    }
    for op, plan in plans.items():
        fn = getattr(ops, SCORERS[op])
        g = None
        for slug, tier, make, width in plan:
            inputs = make()
            if g is None:
                g = fb.group(op, op, f"{op}: exact in the emulated summation order; anything within the stored "
                             "rigorous bound of the exact value is acceptable", sorted(inputs), OUTPUTS, call="keywords",
                             compare=COMPARE, params={"scalars": ["max_seq_len", "weight_scale"]})

            def compute(p: _profiles.Profile, inputs=inputs, width=width) -> Outputs:
                scored = fn(**inputs, max_seq_len=width, weight_scale=0.5, profile=p.name)
                return {"logits": np.asarray(scored.emulated, np.float32),
                        "logits_value": np.asarray(scored.value, np.float64),
                        "logits_bound": np.asarray(scored.bound, np.float64)}

            g.case(slug, f"{slug}: reversed block table, context lengths not multiples of 64",
                   ["op-config", "multi-block", "slot-order", "BUGS-26"], inputs, compute, tier=tier,
                   params={"max_seq_len": width, "weight_scale": 0.5})
