"""Where vLLM PR #42908's ROCm Triton kernels come from, and the stubs that load them standalone.

The kernel files import three things from vLLM's package (besides torch and triton), which
the stubs provide; vLLM's package ``__init__`` (its whole serving stack) never runs:

* ``vllm.platforms.current_platform``: ``is_rocm()`` answers True, so
  ``fused_indexer_q.py`` defines the pure-Triton ROCm branch of ``_fp32x2_to_fp4x2`` (the
  other branch is inline PTX ``cvt.rn.satfinite.e2m1x2.f32``, which neither the CPU interpreter
  nor sm_90 accepts); ``fp8_dtype()`` is ``torch.float8_e4m3fn`` (gfx950, the default) or
  ``torch.float8_e4m3fnuz`` (gfx942: the FP8 scorer then takes its ``IS_FNUZ`` path);
  ``num_compute_units()``; any other attribute raises AttributeError naming it.
* ``vllm.triton_utils``: the real ``triton`` and ``triton.language``.
* ``vllm.utils.import_utils.has_cutedsl()``: False (the Triton Q kernel, not CuTe DSL).

The source is a checkout named by ``MXGATE_VLLM_SRC`` (its root, the folder holding ``vllm/``;
only ``vllm/v1/attention/ops/`` is read) or an installed vllm that has the files (no released
wheel has them: the PR is not merged). See mxgate.kernels.sources for the revision rules.
"""

from __future__ import annotations

import types
from typing import Any

from mxgate.kernels import sources

ENV_VAR = "MXGATE_VLLM_SRC"
FP8_DTYPES = ("fn", "fnuz")

MODULES = {
    "logits": "vllm.v1.attention.ops.rocm_fp8_fp4_paged_mqa_logits",
    "indexer_q": "vllm.v1.attention.ops.deepseek_v4_ops.fused_indexer_q",
    "compress": "vllm.v1.attention.ops.deepseek_v4_ops.fused_compress_quant_cache",
}

# Names the backend needs from the files; the v2 revision (fp4indexerv2) adds the fused top-k.
LOGITS_ENTRY = ("rocm_fp8_fp4_paged_mqa_logits", "rocm_fp4_mqa_logits")
TOPK_ENTRY = ("rocm_fp4_paged_mqa_logits_topk", "rocm_fp4_paged_mqa_logits_tile_topk")
Q_KERNEL = "fused_indexer_q_rope_quant"
K_KERNEL = "_fused_kv_compress_norm_rope_insert_indexer_mxfp4_attn"


class Platform:
    """Stand-in for ``vllm.platforms.current_platform``: a ROCm platform with a chosen FP8 dtype."""

    def __init__(self, fp8: str, compute_units: int) -> None:
        if fp8 not in FP8_DTYPES:
            raise ValueError(f"fp8 must be one of {FP8_DTYPES}; got {fp8!r}")
        self._fp8 = fp8
        self._units = compute_units

    def is_rocm(self) -> bool:
        return True

    def fp8_dtype(self) -> Any:
        import torch

        return torch.float8_e4m3fnuz if self._fp8 == "fnuz" else torch.float8_e4m3fn

    def num_compute_units(self) -> int:
        return self._units

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        raise AttributeError(f"current_platform.{name} is not provided by mxgate's vLLM stubs; "
                             "known: is_rocm, fp8_dtype, num_compute_units")


def _stubs(context: sources.StubContext) -> dict[str, types.ModuleType]:
    import triton
    import triton.language as tl

    platform = Platform(str(context.options.get("fp8", "fn")), int(context.options.get("compute_units", 1)))
    return {
        "vllm.platforms": sources.stub_module("vllm.platforms", "stub registered by mxgate's vLLM loader",
                                              current_platform=platform),
        "vllm.triton_utils": sources.stub_module("vllm.triton_utils", "stub registered by mxgate's vLLM loader",
                                                 triton=triton, tl=tl),
        "vllm.utils.import_utils": sources.stub_module("vllm.utils.import_utils",
                                                       "stub registered by mxgate's vLLM loader",
                                                       has_cutedsl=lambda: False),
    }


SPEC = sources.ProjectSpec(
    project="vLLM",
    package="vllm",
    distribution="vllm",
    env_var=ENV_VAR,
    modules=MODULES,
    required=tuple(MODULES),
    stubs=_stubs,
    hint=("a vLLM checkout (PR #42908: EmbeddedLLM/vllm branch dsv4fp4indexer or fp4indexerv2; the "
          "folder holding vllm/)"),
)


def locate() -> sources.Source:
    """The vLLM source of this process's environment (SourceError with the reason)."""
    return sources.locate(SPEC)


def load(mode: sources.Mode, device: str, fp8: str = "fn") -> sources.Loaded:
    """The three kernel modules, executed once per process, source, mode and FP8 dtype."""
    if fp8 not in FP8_DTYPES:
        raise ValueError(f"fp8 must be one of {FP8_DTYPES}; got {fp8!r}")
    source = locate()
    return sources.load(source, sources.StubContext(mode, device, {"fp8": fp8}), cache_key=("fp8", fp8))
