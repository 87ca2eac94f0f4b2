"""The fused op ``indexer_qk_rope_quant_and_cache`` (SPEC section 6): the PR's 16 FP4 and 192
FP8 configs (``mxgate.vectors.configs``), all outputs.

Inputs are stored as the op takes them: q, weights, k, cos_cache, sin_cache as uint16 bit
patterns of the config's q dtype (bf16, or fp16: view them as float16, the group's ``views``
parameter), output buffers pre-filled with the poison byte 0xA5 (the op writes only the bytes
the contract writes). Results: the profile's default front-end member is ``valid`` (exact);
the other members of the K/Q front-end envelope (rsqrtf one ulp either way, FMA contraction or
not; SPEC 6) are stored as acceptable alternatives.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mxgate.op_table import OpName
from mxgate import oracle
from mxgate.oracle import ops
from mxgate.oracle import profiles as _profiles
from mxgate.oracle.geometry import GROUP, HEAD_DIM, ROPE_DIM, ROW_BYTES
from mxgate.vectors import configs
from mxgate.vectors.families._builder import FamilyBuilder, Outputs
from mxgate.inputs.samples import normal

NAME = "indexer"
DESCRIPTION = "indexer_qk_rope_quant_and_cache: the PR's 16 FP4 and 192 FP8 configs, all five outputs"
SEED = 0x4D584704
OP = OpName.INDEXER_QK_ROPE_QUANT_AND_CACHE
# The two AMD targets the op ships on: gfx950 (e4m3fn) and gfx942 (e4m3fnuz, software FP4).
PROFILES = ("gfx950", "aiter-gfx942")
POISON = 0xA5
MAX_POS = 64


def available() -> str | None:
    return None


def _view(bits: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "fp16":
        return bits.view(np.float16)
    import ml_dtypes

    return bits.view(ml_dtypes.bfloat16)


def _master_inputs(rng: np.random.Generator, tokens: int, heads: int) -> dict[str, np.ndarray]:
    """The largest input set; each config takes the first T tokens and H heads."""
    q = (normal(rng, (tokens, heads, HEAD_DIM)) * 2.0).astype(np.float32)
    k = (normal(rng, (tokens, HEAD_DIM)) * 2.0).astype(np.float32)
    w = normal(rng, (tokens, heads)).astype(np.float32)
    # cos in [-1, 1], sin = +-sqrt(1 - cos^2): IEEE sqrt only (no platform sin/cos in a vector).
    cos = rng.uniform(-1.0, 1.0, size=(MAX_POS, ROPE_DIM // 2))
    sin = np.sqrt(1.0 - cos * cos) * np.where(rng.integers(0, 2, size=cos.shape) == 1, -1.0, 1.0)
    return {
        "q": q, "k": k, "weights": w,
        "cos_cache": cos.astype(np.float32), "sin_cache": sin.astype(np.float32),
        "norm_weight": rng.uniform(0.5, 1.5, HEAD_DIM).astype(np.float32),
        "norm_bias": (normal(rng, HEAD_DIM) * 0.1).astype(np.float32),
        "positions": rng.integers(0, MAX_POS, size=tokens, dtype=np.int64),
    }


def _slots(tokens: int, block: int) -> np.ndarray:
    """Out-of-order slots over two blocks with every third token skipped (slot -1)."""
    s = (np.arange(tokens, dtype=np.int64) * 7 + 3) % (2 * block)
    s[2::3] = -1
    return s


def _case_inputs(master: dict[str, np.ndarray], cfg: dict[str, Any]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    t, h, dtype = cfg["tokens"], cfg["heads"], cfg["q_dtype"]

    def cast(a: np.ndarray) -> np.ndarray:
        return oracle.bf16_bits(a) if dtype == "bf16" else a.astype(np.float16).view(np.uint16)

    block = cfg["kv_block_size"]
    inputs = {
        "q": cast(master["q"][:t, :h]), "weights": cast(master["weights"][:t, :h]),
        "k": cast(master["k"][:t]), "slot_mapping": _slots(t, block),
        "norm_weight": master["norm_weight"], "norm_bias": master["norm_bias"],
        "positions": master["positions"][:t], "cos_cache": cast(master["cos_cache"]),
        "sin_cache": cast(master["sin_cache"]),
    }
    if cfg["mode"] == "fp4":
        inputs["q_out"] = np.full((t, h, ROW_BYTES), POISON, np.uint8)
        inputs["q_scale_out"] = np.full((t, 1, 4, 16, -(-(h // 16) // 4) * 4), POISON, np.uint8)
        inputs["kv_cache"] = np.full((2, 1, 4, block, 16), POISON, np.uint8)
        inputs["kv_cache_scale"] = np.full((2, 1, 4, block), POISON, np.uint8)
        inputs["weights_out"] = np.full((t, h), 0xA5A5, np.uint16)
    else:
        inputs["q_out"] = np.full((t, h, HEAD_DIM), POISON, np.uint8)
        inputs["kv_cache"] = np.full((2, block, HEAD_DIM + 4), POISON, np.uint8)
        inputs["weights_out"] = np.full((t, h), 0xA5A5A5A5, np.uint32).view(np.float32)
    scalars = {"epsilon": 1e-6, "quant_block_size": GROUP if cfg["mode"] == "fp4" else HEAD_DIM,
               "scale_fmt": cfg["scale_fmt"], "weights_scale": 0.125, "preshuffle": cfg["preshuffle"],
               "is_neox": cfg["is_neox"], "compute_all_q_rope": cfg["compute_all_q_rope"]}
    return inputs, scalars


OUTPUTS = {"fp4": ("q_out", "q_scale_out", "weights_out", "kv_cache", "kv_cache_scale"),
           "fp8": ("q_out", "weights_out", "kv_cache")}
VIEWED = ("q", "weights", "k", "cos_cache", "sin_cache", "weights_out")


def _viewed(inputs: dict[str, np.ndarray], q_dtype: str) -> dict[str, np.ndarray]:
    out = {n: a.copy() for n, a in inputs.items()}
    if q_dtype == "fp16":
        for name in VIEWED:
            if out[name].dtype == np.uint16:
                out[name] = out[name].view(np.float16)
    return out


def call_op(fn, inputs: dict[str, np.ndarray], scalars: dict[str, Any], q_dtype: str, mode: str, **extra) -> Outputs:
    """Run an implementation of the op on copies of the stored inputs; the outputs by name."""
    call = _viewed(inputs, q_dtype)
    returned = fn(**call, **scalars, **extra)
    named = returned._asdict() if hasattr(returned, "_asdict") else dict(returned) if isinstance(returned, dict) else {}
    out = {}
    for n in OUTPUTS[mode]:
        a = np.asarray(named.get(n, call[n]))
        out[n] = a.view(np.uint16) if a.dtype == np.float16 or a.dtype.name == "bfloat16" else a
    return out


ENVELOPE_REASON = ("SPEC 6: the K front end uses the hardware rsqrtf (~1 ulp, not correctly rounded) and likely FMA "
                   "contraction; any member of the front-end envelope is acceptable")


def _envelope_splits(master: dict[str, np.ndarray], cfgs: list[dict[str, Any]]) -> dict[tuple, dict[str, np.ndarray]]:
    """Front-end values (Q, K) of every envelope member on the whole master input, per
    (q dtype, is_neox). Rows are independent and each config takes a subset of the master's
    rows, so a member whose values equal the default's here gives the default's bytes in every
    config: only the others need the op run per config."""
    from mxgate.oracle.ops import frontend, members

    out: dict[tuple, dict[str, np.ndarray]] = {}
    for key in sorted({(c["q_dtype"], c["is_neox"]) for c in cfgs}):
        cfg = next(c for c in cfgs if (c["q_dtype"], c["is_neox"]) == key)
        full = dict(cfg, tokens=max(c["tokens"] for c in cfgs), heads=max(c["heads"] for c in cfgs))
        inputs, scalars = _case_inputs(master, full)
        kwargs = dict(_viewed(inputs, cfg["q_dtype"]), **scalars)
        out[key] = {v.name: members.frontend_values(v, **kwargs) for v in frontend.VARIANTS}
    return out


def _differs(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]) -> bool:
    return not all(np.array_equal(x, y, equal_nan=True) for x, y in zip(a, b))


def build(fb: FamilyBuilder) -> None:
    from mxgate.oracle.ops import frontend

    op = getattr(ops, OP)
    rng = fb.rng(40)
    quick = configs.quick_ids()
    for mode, cfgs in (("fp4", configs.fp4_configs()), ("fp8", configs.fp8_configs())):
        master = _master_inputs(rng, max(c["tokens"] for c in cfgs), max(c["heads"] for c in cfgs))
        values = _envelope_splits(master, cfgs)
        first_inputs, first_scalars = _case_inputs(master, cfgs[0])
        g = fb.group(f"{OP}/{mode}", OP, f"{mode.upper()} mode: all outputs start poisoned; slot < 0 rows are "
                     "skipped (Q too unless compute_all_q_rope)", sorted(first_inputs), OUTPUTS[mode], call="keywords",
                     params={"views": {"when": "q_dtype == fp16", "as": "float16", "inputs": list(VIEWED)},
                             "scalars": sorted(first_scalars), "poison": POISON})
        for cfg in cfgs:
            inputs, scalars = _case_inputs(master, cfg)
            member_values = values[(cfg["q_dtype"], cfg["is_neox"])]

            def compute(p: _profiles.Profile, inputs=inputs, scalars=scalars, cfg=cfg) -> Outputs:
                return call_op(op, inputs, scalars, cfg["q_dtype"], mode, profile=p.name)

            def alternatives(p: _profiles.Profile, out: Outputs, inputs=inputs, scalars=scalars, cfg=cfg,
                             member_values=member_values):
                members = frontend.envelope(p)
                default = member_values[members[0].name]
                return ENVELOPE_REASON, [(f"front-end member {v.name}: {v.describe()}",
                                          call_op(op, inputs, scalars, cfg["q_dtype"], mode, profile=p.name, variant=v))
                                         for v in members[1:] if _differs(member_values[v.name], default)]

            flags = ["op-config", "slot-negative", "slot-order", "poison", "multi-block", "BUGS-25", "BUGS-28"]
            if mode == "fp4" and cfg["heads"] == 32:
                flags += ["padding", "BUGS-22"]
            if cfg.get("preshuffle"):
                flags += ["preshuffle", "BUGS-31"]
            if mode == "fp8":
                flags += ["fp8-encoding-family", "BUGS-13", "BUGS-14"]
            g.case(cfg["id"], f"config {cfg['id']}", flags, inputs, compute,
                   tier="quick" if cfg["id"] in quick else "default",
                   params=dict(scalars, q_dtype=cfg["q_dtype"], tokens=cfg["tokens"], heads=cfg["heads"]),
                   alternatives=alternatives, alternatives_keep_valid=True)
