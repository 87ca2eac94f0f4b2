"""DeepGEMM's reference FP4 quantizer as a peer: ``deep_gemm/utils/math.py`` of deepseek-ai/DeepGEMM.

``per_token_cast_to_fp4(x, use_ue8m0=True, gran_k=32, use_packed_ue8m0=True)`` is the pure-torch
FP4 E2M1 quantizer with one ue8m0 scale per 32 elements that DeepGEMM's FP4 MQA-logits tests
(``tests/test_attention.py``) feed its kernels with: amax clamped below at 1e-4, divided by 6,
rounded up to a power of two by ``ceil_to_ue8m0`` (exponent field clamped to [1, 254]), elements
multiplied by ``1 / sf`` and encoded by strict ``>`` crossings of the E2M1 midpoints.

The file comes from an installed ``deep_gemm`` that has ``deep_gemm/utils/math.py``, or from the
checkout named by ``MXGATE_DEEPGEMM_SRC`` (the folder holding ``deep_gemm/``), loaded without the
package ``__init__`` (which loads DeepGEMM's CUDA extension) through mxgate.kernels.sources. The
file itself imports only torch and typing, so no stub is needed. The scale bytes are the ones
DeepGEMM's own ``pack_ue8m0_to_int`` packs (four per int32, little-endian), read back as bytes.

What it does and where the profile stands: docs/findings/peers.md.
"""

from __future__ import annotations

import types

import numpy as np

from mxgate.kernels import base, sources
from mxgate.kernels.quiet import quiet_import
from mxgate.op_table import OpName

DEEPGEMM_ENV = "MXGATE_DEEPGEMM_SRC"
PROFILE = "deepgemm"
GRAN_K = 32  # the FP4 MQA-logits tests' gran_k: one ue8m0 scale per 32 elements

DEEPGEMM_SPEC = sources.ProjectSpec(
    project="DeepGEMM",
    package="deep_gemm",
    distribution="deep_gemm",
    env_var=DEEPGEMM_ENV,
    modules={"math": "deep_gemm.utils.math"},
    required=("math",),
    stubs=lambda context: {},
    hint="a deepseek-ai/DeepGEMM checkout (the folder holding deep_gemm/)",
)


class DeepGemmReferenceBackend(base.Backend):
    """per_token_cast_to_fp4 with ue8m0 scales, gran_k 32, as DeepGEMM's FP4 tests call it."""

    @property
    def description(self) -> str:  # type: ignore[override]
        """What runs, with where it comes from (identify reads the revision from it)."""
        try:
            where = self.origin()
        except sources.SourceError:
            where = f"not found: set {DEEPGEMM_ENV} or install deep_gemm"
        return ("DeepGEMM deep_gemm.utils.math per_token_cast_to_fp4(x, use_ue8m0=True, gran_k=32, "
                f"use_packed_ue8m0=True) in torch on {self.device}; {where}")

    def available(self) -> base.Availability:
        missing = base.requires("torch")
        if not missing:
            return missing
        if self.device == "cuda" and not quiet_import("torch").cuda.is_available():
            return base.Availability(False, "torch sees no CUDA device")
        reason = sources.problem(DEEPGEMM_SPEC)
        return base.Availability(False, reason) if reason else base.AVAILABLE

    def _math(self) -> types.ModuleType:
        # plain torch code: no triton is imported, so the mode only keys the load cache
        loaded = sources.load(sources.locate(DEEPGEMM_SPEC), sources.StubContext("interpret", self.device),
                              import_first=("torch",))
        return loaded.module("math")

    def origin(self) -> str:
        return sources.locate(DEEPGEMM_SPEC).origin

    def _quantize_rows(self, rows: object, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """(packed [..., N/2], e8m0 [..., N/32]) of a torch tensor [rows, N] whose rows are ``shape``'s."""
        torch = quiet_import("torch")
        n = shape[-1]
        packed, words = self._math().per_token_cast_to_fp4(rows.to(self.device), use_ue8m0=True, gran_k=GRAN_K,
                                                           use_packed_ue8m0=True)
        groups = -(-n // GRAN_K)
        # four ue8m0 bytes per int32, the first scale in the lowest byte; padding scales (1.0) dropped
        scales = words.contiguous().view(torch.uint8).reshape(words.shape[0], -1)[:, :groups]
        return (packed.contiguous().view(torch.uint8).cpu().numpy().reshape(shape[:-1] + (n // 2,)),
                scales.cpu().numpy().reshape(shape[:-1] + (groups,)))

    def quantize(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        torch = quiet_import("torch")
        x32 = np.ascontiguousarray(x, np.float32)
        return self._quantize_rows(torch.from_numpy(x32.reshape(-1, x32.shape[-1]).copy()), x32.shape)

    def quantize_bf16(self, x_bf16: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """bf16 rows (uint16 bits) as DeepGEMM's tests pass them: a torch.bfloat16 tensor."""
        torch = quiet_import("torch")
        bits = np.ascontiguousarray(x_bf16, np.uint16)
        rows = torch.from_numpy(bits.reshape(-1, bits.shape[-1]).view(np.int16).copy()).view(torch.bfloat16)
        return self._quantize_rows(rows, bits.shape)

    def ops(self) -> dict[str, base.Op]:
        return {
            OpName.MX_QUANTIZE: base.Op(OpName.MX_QUANTIZE, PROFILE, self.quantize, note="float32 rows"),
            OpName.FP4_INDEXER_QUANTIZE: base.Op(OpName.FP4_INDEXER_QUANTIZE, PROFILE, self.quantize_bf16,
                                                 note="torch.bfloat16 rows, as tests/test_attention.py casts Q and KV"),
        }


Backend = DeepGemmReferenceBackend  # for ``--backend mxgate.kernels.deepgemm_reference:Backend``
