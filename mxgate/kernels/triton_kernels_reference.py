"""triton_kernels' torch references as peers: ``numerics_details/mxfp.py`` of triton-lang/triton.

``downcast_to_mxfp_torch(x, out_quant_type, axis, DEQUANT_SCALE_ROUNDING_MODE=...)`` is the
pure-torch MXFP4 / MXFP8 quantizer the Triton kernel ``_downcast_to_mxfp`` is tested against;
``cvt_e2m1_to_fp32`` its E2M1 decode. One backend per ``DequantScaleRoundingMode`` with e8m0
scales (ROUND_UP, ROUND_DOWN; ROUND_NEAREST needs E4M3 scales, which no op here takes).

The file comes from an installed ``triton_kernels`` that has ``numerics_details/mxfp.py``, or
from the folder named by ``MXGATE_TRITON_KERNELS_SRC`` (``python/triton_kernels`` of a triton
checkout: the folder holding ``triton_kernels/``), loaded without the package ``__init__``
(mxgate.kernels.sources). What mxfp.py imports at its top for the Triton-kernel path
(``mxfp_details``' kernels, ``triton_kernels.tensor`` and ``tensor_details``) is stubbed: the
torch references use none of it except the block sizes, which the stubs give as the MX and
NVFP4 formats define them (32, 16).

What it does and where it is wrong: docs/findings/peers.md.
"""

from __future__ import annotations

import os
import types
from typing import Any, Callable

import numpy as np

from mxgate.kernels import sources
from mxgate.kernels.base import AVAILABLE, Availability, Backend, Op, requires
from mxgate.kernels.quiet import quiet_import
from mxgate.op_table import OpName

TRITON_KERNELS_ENV = "MXGATE_TRITON_KERNELS_SRC"
_PACKAGE = "triton_kernels"
_MXFP = "triton_kernels.numerics_details.mxfp"
_DETAILS = "triton_kernels.numerics_details.mxfp_details"
MXFP_BLOCK = 32  # OCP MX v1.0 block
NVFP_BLOCK = 16  # NVFP4 block

# mode -> the profile that reproduces downcast_to_mxfp_torch in that mode (docs/findings/peers.md)
PROFILES = {"round_up": "triton-kernels-round-up", "round_down": "triton-kernels-round-down"}


def _unused(name: str) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{name} is stubbed by mxgate: only triton_kernels' torch references run here")

    refuse.__name__ = name
    return refuse


def _stubs(context: sources.StubContext) -> dict[str, types.ModuleType]:
    """What mxfp.py imports for its Triton-kernel path, none of which the torch references call."""
    import triton.language as tl

    kernels = {n: _unused(n) for n in ("_downcast_to_mxfp", "_quantize_mxfp8_fn", "_quantize_mxfp4_fn",
                                       "_quantize_nvfp4_fn", "_dequantize_mxfp8_fn")}
    placeholders = {n: _unused(n) for n in ("wrap_torch_tensor", "empty")}
    return {
        f"{_DETAILS}._downcast_to_mxfp": sources.stub_module(
            f"{_DETAILS}._downcast_to_mxfp", MXFP_BLOCK_SIZE=tl.constexpr(MXFP_BLOCK),
            NVFP_BLOCK_SIZE=tl.constexpr(NVFP_BLOCK), **kernels),
        f"{_DETAILS}._upcast_from_mxfp": sources.stub_module(
            f"{_DETAILS}._upcast_from_mxfp", _upcast_from_mxfp=_unused("_upcast_from_mxfp")),
        "triton_kernels.tensor": sources.stub_module("triton_kernels.tensor", Tensor=type("Tensor", (), {}),
                                                     **placeholders),
        "triton_kernels.tensor_details.layout": sources.stub_module(
            "triton_kernels.tensor_details.layout", StridedLayout=type("StridedLayout", (), {})),
        "triton_kernels.tensor_details.dtype": sources.stub_module(
            "triton_kernels.tensor_details.dtype", **{n: object() for n in ("FP4", "FP8_E4M3FN", "FP8_E5M2", "UINT8")}),
    }


TRITON_KERNELS_SPEC = sources.ProjectSpec(
    project="triton_kernels",
    package=_PACKAGE,
    distribution="triton_kernels",
    env_var=TRITON_KERNELS_ENV,
    modules={"mxfp": _MXFP},
    required=("mxfp",),
    stubs=_stubs,
    hint="python/triton_kernels of a triton-lang/triton checkout (the folder holding triton_kernels/)",
)


class TritonKernelsReferenceBackend(Backend):
    """downcast_to_mxfp_torch in one DequantScaleRoundingMode with e8m0 scales, on the CPU."""

    def __init__(self, device: str = "cpu", mode: str = "round_up") -> None:
        super().__init__(device)
        if mode not in PROFILES:
            raise ValueError(f"mode must be one of {', '.join(PROFILES)}; got {mode!r}")
        self.mode = mode
        self.description = (f"triton_kernels numerics_details.mxfp downcast_to_mxfp_torch "
                            f"(DequantScaleRoundingMode.{mode.upper()}, e8m0 scales, axis -1) and cvt_e2m1_to_fp32, "
                            f"on the CPU; from an installed triton_kernels or {TRITON_KERNELS_ENV}")

    def available(self) -> Availability:
        if self.device != "cpu":
            return Availability(False, "the triton_kernels peer runs its torch references on the CPU only")
        missing = requires("torch", "triton")
        if not missing:
            return missing
        reason = sources.problem(TRITON_KERNELS_SPEC)
        return Availability(False, reason) if reason else AVAILABLE

    def _mxfp(self) -> types.ModuleType:
        # no kernel is launched: interpret mode only keeps a first import of triton CPU-friendly
        loaded = sources.load(sources.locate(TRITON_KERNELS_SPEC), sources.StubContext("interpret", self.device),
                              import_first=("torch",))
        return loaded.module("mxfp")

    def origin(self) -> str:
        return sources.locate(TRITON_KERNELS_SPEC).origin

    def _quantize(self, x: np.ndarray, element: str) -> tuple[np.ndarray, np.ndarray]:
        torch = quiet_import("torch")
        mxfp = self._mxfp()
        x32 = np.ascontiguousarray(x, np.float32)
        mode = getattr(mxfp.DequantScaleRoundingMode, self.mode.upper())
        values, scales = mxfp.downcast_to_mxfp_torch(torch.from_numpy(x32.copy()), getattr(torch, element), -1,
                                                      microblock_size=MXFP_BLOCK, DEQUANT_SCALE_ROUNDING_MODE=mode)
        return (values.contiguous().view(torch.uint8).numpy().copy(),
                scales.contiguous().view(torch.uint8).numpy().copy())

    def _decode(self, codes: np.ndarray) -> np.ndarray:
        torch = quiet_import("torch")
        c = np.ascontiguousarray(codes, np.uint8)
        # one code per byte (high nibble 0): the even outputs are the codes' values
        values = self._mxfp().cvt_e2m1_to_fp32(torch.from_numpy(c.reshape(-1, 1).copy()))
        return values[:, 0].numpy().reshape(c.shape).astype(np.float32)

    def ops(self) -> dict[str, Op]:
        profile = PROFILES[self.mode]
        return {
            OpName.MX_QUANTIZE: Op(OpName.MX_QUANTIZE, profile, lambda x: self._quantize(x, "uint8")),
            OpName.MX_QUANTIZE_E4M3FN: Op(OpName.MX_QUANTIZE_E4M3FN, profile,
                                          lambda x: self._quantize(x, "float8_e4m3fn")),
            OpName.E2M1_DECODE: Op(OpName.E2M1_DECODE, profile, self._decode, note="cvt_e2m1_to_fp32"),
        }


def round_up(device: str = "cpu") -> TritonKernelsReferenceBackend:
    """The ROUND_UP backend, for ``--backend mxgate.kernels.triton_kernels_reference:round_up``."""
    return TritonKernelsReferenceBackend(device, "round_up")


def round_down(device: str = "cpu") -> TritonKernelsReferenceBackend:
    """The ROUND_DOWN backend, for ``--backend mxgate.kernels.triton_kernels_reference:round_down``."""
    return TritonKernelsReferenceBackend(device, "round_down")
