"""Conformance of ``indexer_qk_rope_quant_and_cache`` (SPEC section 6) for every selected backend.

A backend's op is called with AITER's keyword arguments (bf16 tensors as uint16 bit patterns,
output buffers pre-filled with ``layouts.POISON``) and may write them in place or return the
five outputs (``q_out, weights_out, kv_cache, q_scale_out, kv_cache_scale``). The verdict comes
from ``judge.match_variants`` under the backend op's declared profile (or ``--profile``):
``exact`` for the oracle's bytes, ``acceptable`` when every differing row matches a member of
the rsqrt/FMA front-end envelope (the reason names it), ``fail`` otherwise, untouched bytes
included.

Configs: the 16 FP4 and 192 FP8 configurations of AITER PR #5484 by name
(``fp4-T8-H32-neox-allq``, ``fp8-T17-H32-B16-ue8m0-preshuffle-neox-allq``), the envelope probe
(which rsqrt/contraction a backend matches), the host rejections, and Hypothesis over shapes,
slot sets, positions, zero rows, E2M1 midpoints and ue8m0 scale boundaries.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given

from mxgate.op_table import OpName
from mxgate.conformance.hypothesis_settings import suite_settings
from mxgate.conformance.judge import EXACT, FAIL, Verdict, envelope_verdict, match_variants
from mxgate.oracle import profiles
from mxgate.oracle.formats.bf16 import bf16_bits
from mxgate.oracle.layouts import POISON
from mxgate.inputs.indexer import (
    PR_FP4_CONFIGS,
    PR_FP8_CONFIGS,
    IndexerConfig,
    copy_case,
    envelope_probe_case,
    make_case,
)
from mxgate.inputs.strategies import indexer_fp4_cases, indexer_fp8_cases

OP = OpName.INDEXER_QK_ROPE_QUANT_AND_CACHE
OUTPUTS = ("q_out", "weights_out", "kv_cache", "q_scale_out", "kv_cache_scale")
pytestmark = pytest.mark.mxgate_op(OP)


def _profile(backend, override: str | None) -> str:
    return override or backend.op(OP).profile


def _run(backend, args: dict[str, Any]) -> Any:
    """The backend's outputs: what it returns, else the buffers it wrote in place."""
    mine = copy_case(args)
    result = backend.op(OP).run(**mine)
    return result if result is not None else {k: mine.get(k) for k in OUTPUTS}


def judge(backend, args: dict[str, Any], profile: str, reference=None) -> Verdict:
    """Run the backend on a copy of ``args`` and judge its outputs against the envelope, whose
    members the ``reference`` fixture's indexer op computes (the oracle, or the twin on the
    card; without it the oracle)."""
    op = reference(OP) if reference is not None else None
    return envelope_verdict(match_variants(_run(backend, args), reference=op, profile=profile, **args))


@pytest.mark.parametrize("config", PR_FP4_CONFIGS, ids=[c.id for c in PR_FP4_CONFIGS])
def test_pr_fp4_config(backend, record, profile_override, reference, config: IndexerConfig) -> None:
    profile = _profile(backend, profile_override)
    record(OP, config.id, judge(backend, make_case(config), profile, reference), seed=config.seed, profile=profile)


@pytest.mark.parametrize("config", PR_FP8_CONFIGS, ids=[c.id for c in PR_FP8_CONFIGS])
def test_pr_fp8_config(backend, record, profile_override, reference, config: IndexerConfig) -> None:
    profile = _profile(backend, profile_override)
    record(OP, config.id, judge(backend, make_case(config), profile, reference), seed=config.seed, profile=profile)


@pytest.mark.parametrize("mode", ["fp4", "fp8"])
def test_envelope_probe(backend, record, profile_override, reference, mode: str) -> None:
    """K rows on rounding boundaries that each rsqrt/contraction member moves differently: the
    verdict's reason says which member the backend's front end matched."""
    profile = _profile(backend, profile_override)
    record(OP, f"{mode}-envelope-probe", judge(backend, envelope_probe_case(mode), profile, reference), seed=0, profile=profile)


# ---- host rejections -----------------------------------------------------------------------


def _fp4(seed: int = 7) -> dict[str, Any]:
    return make_case(IndexerConfig("fp4", 6, 16, True, False), seed=seed)


def _fp8(block: int = 16) -> dict[str, Any]:
    return make_case(IndexerConfig("fp8", 6, 2, True, False, "ue8m0", False, block), seed=8)


def _heads24() -> dict[str, Any]:
    args = _fp4()
    rng = np.random.Generator(np.random.PCG64(9))
    args["q"] = bf16_bits(rng.standard_normal((6, 24, 128)).astype(np.float32))
    args["weights"] = bf16_bits(rng.standard_normal((6, 24)).astype(np.float32))
    return args


def _with(build, **changes):
    def make() -> dict[str, Any]:
        args = build()
        for key, value in changes.items():
            args[key] = value(args) if callable(value) else value
        return args

    return make


# (name, build, the SPEC section 6 message the host check must raise)
REJECTIONS = [
    ("fp4-needs-both-scales", _with(_fp4, kv_cache_scale=None), "fp4 output needs both q_scale_out and kv_cache_scale"),
    ("head-dim", _with(_fp8, k=lambda a: a["k"][:, :64].copy()), "indexer fused qk cache only supports head_dim=128"),
    ("rope-dim", _with(_fp8, cos_cache=lambda a: a["cos_cache"][:, :16].copy(),
                       sin_cache=lambda a: a["sin_cache"][:, :16].copy()),
     "indexer fused qk cache only supports rope_dim=64"),
    ("fp8-quant-block", _with(_fp8, quant_block_size=64),
     "indexer fused qk cache only supports quant_block_size == head_dim"),
    ("fp4-quant-block", _with(_fp4, quant_block_size=128), "fp4 indexer fused qk cache only supports quant_block_size == 32"),
    ("fp4-scale-fmt", _with(_fp4, scale_fmt="fp8"), 'fp4 output requires scale_fmt="ue8m0", got fp8'),
    ("fp4-heads", _heads24, "fp4 output requires n_heads to be a multiple of 16, got 24"),
    ("fp4-kv-block", _with(_fp4, kv_cache=lambda a: np.full((2, 1, 4, 32, 16), POISON, np.uint8)),
     "fp4 output only supports kv_block_size=64 (kv_cache.size(3)), got 32"),
    ("fp4-preshuffle", _with(_fp4, preshuffle=True),
     "fp4 output always writes the pa_mqa_logits_fp4 preshuffled layout; the fp8-only preshuffle flag must be left unset"),
    ("allq-rows", _with(_fp4, compute_all_q_rope=True, k=lambda a: a["k"][:5].copy()),
     "compute_all_q_rope requires q to have exactly num_tokens rows"),
    ("fp8-preshuffle-block", _with(lambda: _fp8(block=8), preshuffle=True),
     "preshuffle requires cache_block_size to be a multiple of 16, got 8"),
]


@pytest.mark.parametrize("name, build, message", REJECTIONS, ids=[r[0] for r in REJECTIONS])
def test_host_rejection(backend, record, profile_override, name: str, build, message: str) -> None:
    """The call must raise with the kernel's message and leave every output byte alone."""
    profile = _profile(backend, profile_override)
    args = build()
    before = {k: np.asarray(v).copy() for k, v in args.items() if k in OUTPUTS and v is not None}
    try:
        backend.op(OP).run(**args)
        verdict = Verdict(FAIL, f"accepted the call; expected the rejection {message!r}")
    except Exception as error:  # noqa: BLE001 - any exception type, the message decides
        changed = [k for k, v in before.items() if not np.array_equal(np.asarray(args[k]).view(np.uint8),
                                                                     v.view(np.uint8))]
        if message not in str(error):
            verdict = Verdict(FAIL, f"raised {type(error).__name__}: {error}; expected {message!r}")
        elif changed:
            verdict = Verdict(FAIL, f"rejected, but only after writing {', '.join(changed)}")
        else:
            verdict = Verdict(EXACT)
    record(OP, f"reject-{name}", verdict, profile=profile)


# ---- Hypothesis ---------------------------------------------------------------------------


def _hypothesis(backend, record, profile: str, strategy, config_id: str, reference) -> None:
    failures: list[tuple[int, Verdict]] = []

    @suite_settings()
    @given(strategy)
    def check(case: tuple[int, dict[str, Any]]) -> None:
        seed, args = case
        verdict = judge(backend, args, profile, reference)
        if not verdict.passed:
            failures.append((seed, verdict))
            raise AssertionError(f"seed {seed}: {verdict.reason}")

    try:
        check()
        record(OP, config_id, Verdict(EXACT, "every example passed (exact or within the envelope)"), profile=profile)
    except AssertionError:
        seed, verdict = failures[-1]  # Hypothesis replays the shrunk example last
        record(OP, config_id, verdict, seed=seed, profile=profile)


def test_hypothesis_fp4(backend, record, profile_override, reference, tier) -> None:
    if tier == "quick":
        pytest.skip("Hypothesis cases run from the default tier on")
    _hypothesis(backend, record, _profile(backend, profile_override), indexer_fp4_cases(), "fp4-hypothesis", reference)


def test_hypothesis_fp8(backend, record, profile_override, reference, tier) -> None:
    if tier == "quick":
        pytest.skip("Hypothesis cases run from the default tier on")
    profile = _profile(backend, profile_override)
    _hypothesis(backend, record, profile, indexer_fp8_cases(profiles.get(profile).fp8_variant), "fp8-hypothesis", reference)
