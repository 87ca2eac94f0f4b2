"""Third-party codecs as backends: ml_dtypes casts, torch casts, triton.tools.mxfp, torchao MX.

Each op declares the profile its bytes are judged under; where a library deviates from every
profile, the gate reports the failure and docs/permitted-variations.md records the finding.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mxgate.op_table import OpName
from mxgate.kernels.base import AVAILABLE, Availability, Backend, Op, requires
from mxgate.kernels.quiet import foreign_imports, quiet_import


def _torch() -> Any:
    return quiet_import("torch")


class MlDtypesBackend(Backend):
    description = "ml_dtypes astype casts (C++): float4_e2m1fn, float8_e4m3fn(uz), bfloat16, float8_e8m0fnu"

    def available(self) -> Availability:
        if self.device != "cpu":
            return Availability(False, "ml_dtypes runs on the CPU only")
        return requires("ml_dtypes")

    def ops(self) -> dict[str, Op]:
        import ml_dtypes

        def cast(dtype: Any, view: Any) -> Any:
            def run(x: np.ndarray) -> np.ndarray:
                with np.errstate(invalid="ignore", over="ignore"):  # NaN and overflow casts are the point
                    return np.asarray(x, np.float32).astype(dtype).view(view)

            return run

        def widen(dtype: Any) -> Any:
            return lambda codes: codes.view(dtype).astype(np.float32)

        return {
            OpName.E2M1_ENCODE: Op(OpName.E2M1_ENCODE, "ml_dtypes", cast(ml_dtypes.float4_e2m1fn, np.uint8)),
            OpName.E4M3FN_ENCODE: Op(OpName.E4M3FN_ENCODE, "ml_dtypes", cast(ml_dtypes.float8_e4m3fn, np.uint8)),
            OpName.E4M3FNUZ_ENCODE: Op(OpName.E4M3FNUZ_ENCODE, "ml_dtypes", cast(ml_dtypes.float8_e4m3fnuz, np.uint8)),
            OpName.E4M3FN_DECODE: Op(OpName.E4M3FN_DECODE, "ml_dtypes", widen(ml_dtypes.float8_e4m3fn)),
            OpName.E4M3FNUZ_DECODE: Op(OpName.E4M3FNUZ_DECODE, "ml_dtypes", widen(ml_dtypes.float8_e4m3fnuz)),
            OpName.BF16_ROUND: Op(OpName.BF16_ROUND, "ml_dtypes", cast(ml_dtypes.bfloat16, np.uint16)),
            OpName.E8M0_DECODE: Op(OpName.E8M0_DECODE, "ml_dtypes", widen(ml_dtypes.float8_e8m0fnu)),
        }


# Probe inputs: finite overflow (1e6) and +Inf for float8_e4m3fn; a quiet NaN for bfloat16.
_PROBE_FP8 = np.float32([1e6, np.inf])
_PROBE_BF16 = np.float32([np.nan])


def _cast_bits(x: np.ndarray, dtype_name: str, view_name: str, device: str) -> np.ndarray:
    """torch's cast of float32 ``x`` to ``dtype_name`` on ``device``, as the raw bits (the probe's
    one cast; tests plant other behaviours here)."""
    torch = _torch()
    t = torch.from_numpy(np.ascontiguousarray(x, np.float32)).to(device)
    return t.to(getattr(torch, dtype_name)).view(getattr(torch, view_name)).cpu().numpy()


def probe_torch_casts(device: str) -> tuple[str, str]:
    """(fp8_overflow, bf16_nan) of the torch that runs here, read from its casts (SPEC 4.3, 1.4).

    float8_e4m3fn: 0x7E for 1e6 and +Inf is "saturate", 0x7F "nan"; anything else is neither
    and raises (the backend then fails to load, naming the bytes). bfloat16 NaN: 0xFFFF is
    "all_ones", 0x7FFF "canonical", 0x7FC0 "sign_quiet"."""
    fp8 = [int(b) for b in np.asarray(_cast_bits(_PROBE_FP8, "float8_e4m3fn", "uint8", device)).view(np.uint8)]
    overflow = {(0x7E, 0x7E): "saturate", (0x7F, 0x7F): "nan"}.get((fp8[0], fp8[1]))
    bf16 = int(np.asarray(_cast_bits(_PROBE_BF16, "bfloat16", "int16", device)).view(np.uint16)[0])
    nan = {0xFFFF: "all_ones", 0x7FFF: "canonical", 0x7FC0: "sign_quiet"}.get(bf16)
    if overflow is None or nan is None:
        raise RuntimeError(f"torch's casts fit no torch profile: float8_e4m3fn(1e6, inf) = {fp8[0]:#04x}, "
                           f"{fp8[1]:#04x}; bfloat16(nan) = {bf16:#06x}")
    return overflow, nan


def torch_cast_profile(device: str) -> str:
    """The registered profile whose FP8 overflow and bf16 NaN rules are those of this torch's casts."""
    from mxgate.oracle.profiles_peers import TORCH_CAST_PROFILES

    probed = probe_torch_casts(device)
    name = TORCH_CAST_PROFILES.get(probed)
    if name is None:
        raise RuntimeError(f"torch's casts (fp8_overflow={probed[0]}, bf16_nan={probed[1]}) fit no torch profile")
    return name


class TorchCastBackend(Backend):
    description = "torch dtype casts: float8_e4m3fn, float8_e4m3fnuz, bfloat16, float8_e8m0fnu"

    def available(self) -> Availability:
        missing = requires("torch")
        if not missing:
            return missing
        if self.device == "cuda" and not _torch().cuda.is_available():
            return Availability(False, "torch reports no CUDA device")
        return AVAILABLE

    def _cast(self, dtype_name: str, view_name: str) -> Any:
        def run(x: np.ndarray) -> np.ndarray:
            torch = _torch()
            t = torch.from_numpy(np.ascontiguousarray(x, np.float32)).to(self.device)
            out = t.to(getattr(torch, dtype_name)).view(getattr(torch, view_name)).cpu().numpy()
            return out.view(np.uint16) if view_name == "int16" else out

        return run

    def _cast_tensor(self, dtype_name: str, view_name: str = "uint8") -> Any:
        def run(x: Any) -> Any:
            torch = _torch()
            return x.to(getattr(torch, dtype_name)).view(getattr(torch, view_name))

        return run

    def _widen(self, dtype_name: str) -> Any:
        def run(codes: np.ndarray) -> np.ndarray:
            torch = _torch()
            t = torch.from_numpy(np.ascontiguousarray(codes, np.uint8)).to(self.device)
            return t.view(getattr(torch, dtype_name)).float().cpu().numpy()

        return run

    def ops(self) -> dict[str, Op]:
        # The e4m3fn and bf16 rules change with torch's version (pytorch#178817: eager e4m3fn casts
        # saturate from 2.13) and device, so they are probed here, in the backend's worker, on the
        # torch that runs the casts. e4m3fnuz never saturates.
        fn_profile = torch_cast_profile(self.device)
        return {
            OpName.E4M3FN_ENCODE: Op(OpName.E4M3FN_ENCODE, fn_profile, self._cast("float8_e4m3fn", "uint8"),
                                     run_tensor=self._cast_tensor("float8_e4m3fn")),
            OpName.E4M3FNUZ_ENCODE: Op(OpName.E4M3FNUZ_ENCODE, "ml_dtypes", self._cast("float8_e4m3fnuz", "uint8"),
                                       run_tensor=self._cast_tensor("float8_e4m3fnuz")),
            OpName.E4M3FN_DECODE: Op(OpName.E4M3FN_DECODE, "gfx950", self._widen("float8_e4m3fn")),
            OpName.E4M3FNUZ_DECODE: Op(OpName.E4M3FNUZ_DECODE, "gfx950", self._widen("float8_e4m3fnuz")),
            OpName.BF16_ROUND: Op(OpName.BF16_ROUND, fn_profile, self._cast("bfloat16", "int16"),
                                  run_tensor=self._cast_tensor("bfloat16", "int16")),
            OpName.E8M0_DECODE: Op(OpName.E8M0_DECODE, "gfx950", self._widen("float8_e8m0fnu")),
        }


class TritonMxfpBackend(Backend):
    description = "triton.tools.mxfp reference tensors (MXFP4Tensor, fp8e8m0_to_float32), run with torch on the CPU"

    def available(self) -> Availability:
        return requires("torch", "triton")

    def available_for(self, op: str) -> Availability:
        status = self.available()
        if status and op == OpName.E8M0_DECODE:
            import importlib

            if not hasattr(importlib.import_module("triton.tools.mxfp"), "fp8e8m0_to_float32"):
                import triton

                return Availability(False, f"triton {triton.__version__}'s triton.tools.mxfp has no fp8e8m0_to_float32")
        return status

    def ops(self) -> dict[str, Op]:
        def encode(x: np.ndarray) -> np.ndarray:
            torch = _torch()
            from triton.tools.mxfp import MXFP4Tensor

            data = torch.from_numpy(np.ascontiguousarray(x, np.float32).copy())
            return MXFP4Tensor(data=data).data.numpy().astype(np.uint8)

        def decode_scale(codes: np.ndarray) -> np.ndarray:
            torch = _torch()
            from triton.tools.mxfp import fp8e8m0_to_float32

            return fp8e8m0_to_float32(torch.from_numpy(np.ascontiguousarray(codes, np.uint8))).numpy()

        return {
            OpName.E2M1_ENCODE: Op(OpName.E2M1_ENCODE, "ocp", encode, note="documented as roundTiesToEven"),
            OpName.E8M0_DECODE: Op(OpName.E8M0_DECODE, "gfx950", decode_scale),
        }


class TorchaoBackend(Backend):
    description = "torchao prototype MX helpers (f32_to_f4_unpacked)"

    def available(self) -> Availability:
        missing = requires("torch", "torchao")
        if not missing:
            return missing
        try:
            with foreign_imports():  # torchao prints a line per CUDA extension it cannot load
                from torchao.prototype.mx_formats import fp_format_spec  # noqa: F401
                from torchao.prototype.mx_formats.kernels import f32_to_f4_unpacked  # noqa: F401
        except Exception as error:  # torchao versions move these helpers around
            return Availability(False, f"torchao MX helpers not importable: {error}")
        return AVAILABLE

    def ops(self) -> dict[str, Op]:
        def encode(x: np.ndarray) -> np.ndarray:
            torch = _torch()
            with foreign_imports():  # first import in a worker process
                from torchao.prototype.mx_formats.kernels import f32_to_f4_unpacked

            return f32_to_f4_unpacked(torch.from_numpy(np.ascontiguousarray(x, np.float32).copy())).numpy()

        return {OpName.E2M1_ENCODE: Op(OpName.E2M1_ENCODE, "aiter-py", encode)}
