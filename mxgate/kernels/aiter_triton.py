"""AITER's Triton kernels as a backend (``aiter-triton``), run from the user's AITER source.

Ops (wrappers called as shipped; docs/findings/aiter.md has the facts behind each choice):

* ``mx.quantize``: ``aiter/ops/triton/quant/quant.py::dynamic_mxfp4_quant`` (``_mxfp4_quant_op``);
* ``aiter.fused_flatten_mxfp4_quant``: ``fused_flatten_mxfp4_quant`` on x viewed [M, N/32, 32];
* ``aiter.fused_rms_mxfp4_quant``: ``fused_rms_mxfp4_quant`` with its RMSNorm configured as an
  exact identity (weight 2^50, epsilon 2^100: the norm factor is exactly 2^-50 while the mean
  square stays below 2^76), so its bytes are the quantizer's; inputs outside that range
  (a nonzero |x| below 2^-76 or from 2^37 up) are outside this op's contract;
* ``aiter.fp8_mqa_logits``: ``aiter/ops/triton/attention/fp8_mqa_logits.py::fp8_mqa_logits``
  (ragged FP8 MQA logits; its Triton kernel, the Gluon one being AMD-only);
* ``pa_mqa_logits_fp8.decode``: ``pa_mqa_logits.py::deepgemm_fp8_paged_mqa_logits``, the Triton
  JIT kernel ``_deepgemm_fp8_paged_mqa_logits`` (AITER's Preshuffle mode exists only in its
  Gluon kernels: outside this backend's contract).

``device="cpu"`` runs them under Triton's CPU interpreter, ``device="cuda"`` compiled; on an
NVIDIA GPU the AMD-only launch options ``waves_per_eu`` / ``matrix_instr_nonkdim`` are dropped
by the adapter (mxgate.kernels.aiter_loader.strip_amd_launch_options). Target gfx950: FP8 is
e4m3fn. Every op takes and returns NumPy arrays; inputs are copied, never modified.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mxgate.op_table import OpName
from mxgate.kernels import aiter_loader as loader
from mxgate.oracle import profiles_aiter  # noqa: F401 - registers the profiles these ops declare
from mxgate.kernels import sources
from mxgate.kernels.base import Availability, Backend, Op, OutsideContract, device_mode, kernel_entry, with_own_checks
from mxgate.oracle.geometry import GROUP

QUANT_PROFILE = "aiter-even"
SCORER_PROFILE = "gfx950"  # e4m3fn decoding only
FUSED_FLATTEN = OpName.AITER_FUSED_FLATTEN_MXFP4_QUANT
FUSED_RMS = OpName.AITER_FUSED_RMS_MXFP4_QUANT
FP8_RAGGED = OpName.AITER_FP8_MQA_LOGITS
FP8_PAGED = OpName.PA_MQA_LOGITS_FP8_DECODE
# fused_rms_mxfp4_quant's RMSNorm as an exact identity: rsqrt(mean + 2^100) = 2^-50, times 2^50.
RMS_WEIGHT = 2.0**50
RMS_EPSILON = 2.0**100
RMS_MIN, RMS_MAX = 2.0**-76, 2.0**37  # |x| * 2^-50 stays normal; x^2 stays below 2^74
CHUNK_K = 256  # deepgemm_fp8_paged_mqa_logits' default


class AiterTritonBackend(Backend):
    """AITER's Triton MXFP4 quantizers and FP8 MQA logits from ``$MXGATE_AITER_SRC``."""

    def __init__(self, device: str = "cpu") -> None:
        self.mode = device_mode(device)
        self.device = device
        self.name = "aiter-triton"
        self.description = (f"AITER Triton MXFP4 quant and FP8 MQA logits kernels, "
                            f"{'compiled on CUDA' if device == 'cuda' else 'CPU interpreter'}")
        self._loaded: sources.Loaded | None = None
        self.dropped_launch_options: list[str] = []

    # -- availability and loading -------------------------------------------------------------

    def available(self) -> Availability:
        if self._loaded is not None:
            return Availability(True, "")
        reason = sources.problem(loader.TRITON_SPEC)
        if reason is None:
            reason = sources.triton_problem(self.mode)
        if reason is None and self.device == "cuda":
            reason = _cuda_problem()
        if reason is None:
            try:
                self._load()
            except (sources.SourceError, loader.NoHipBuild) as error:
                reason = str(error)
        return Availability(reason is None, reason or "")

    def _load(self) -> sources.Loaded:
        kernel_entry()
        if self._loaded is None:
            units = _compute_units(self.device)
            loaded = loader.load(loader.TRITON_SPEC, self.mode, self.device, compute_units=units)
            if self.device == "cuda" and not _is_rocm():
                for short in ("quant", "fused_mxfp4_quant", "fp8_mqa_logits", "pa_mqa_logits"):
                    for f in loader.strip_amd_launch_options(loaded.module(short)):
                        self.dropped_launch_options = f.dropped  # shared list per kernel; any will do
            self._loaded = loaded
        return self._loaded

    @property
    def origin(self) -> str:
        return self._load().origin

    def ops(self) -> dict[str, Op]:
        return with_own_checks({
            OpName.MX_QUANTIZE: Op(OpName.MX_QUANTIZE, QUANT_PROFILE, self.dynamic_mxfp4_quant,
                              "dynamic_mxfp4_quant (aiter/ops/triton/quant/quant.py)"),
            FUSED_FLATTEN: Op(FUSED_FLATTEN, QUANT_PROFILE, self.fused_flatten_mxfp4_quant,
                              "fused_flatten_mxfp4_quant on x viewed [M, N/32, 32]"),
            FUSED_RMS: Op(FUSED_RMS, QUANT_PROFILE, self.fused_rms_mxfp4_quant,
                          "fused_rms_mxfp4_quant, RMSNorm an exact identity (weight 2^50, eps 2^100)"),
            FP8_RAGGED: Op(FP8_RAGGED, SCORER_PROFILE, self.fp8_mqa_logits, "fp8_mqa_logits, Triton kernel"),
            FP8_PAGED: Op(FP8_PAGED, SCORER_PROFILE, self.deepgemm_fp8_paged_mqa_logits,
                          "deepgemm_fp8_paged_mqa_logits, Triton JIT kernel (no Preshuffle)"),
        })

    # -- quantizers ---------------------------------------------------------------------------

    def dynamic_mxfp4_quant(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """x float32 [..., N], N a multiple of 32 -> (packed [..., N/2], e8m0 [..., N/32])."""
        rows, shape = _rows(x)
        k = self._load()
        with k.scope():
            packed, scale = k.module("quant").dynamic_mxfp4_quant(self._tensor(rows))
            return _quant_result(packed, scale, shape)

    def fused_flatten_mxfp4_quant(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rows, shape = _rows(x)
        k = self._load()
        with k.scope():
            t = self._tensor(rows.reshape(rows.shape[0], -1, GROUP))
            packed, scale = k.module("fused_mxfp4_quant").fused_flatten_mxfp4_quant(t)
            return _quant_result(packed, scale, shape)

    def fused_rms_mxfp4_quant(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rows, shape = _rows(x)
        mag = np.abs(rows)
        bad = ~np.isfinite(rows) | ((mag != 0) & ((mag < RMS_MIN) | (mag >= RMS_MAX)))
        if bad.any():
            raise OutsideContract("fused_rms_mxfp4_quant is an exact identity norm only for finite |x| = 0 or in "
                                  f"[2^-76, 2^37); {int(bad.sum())} inputs are not")
        k = self._load()
        import torch

        with k.scope():
            t = self._tensor(rows)
            weight = torch.full((rows.shape[1],), RMS_WEIGHT, dtype=torch.float32, device=t.device)
            (packed, scale), _, _, _ = k.module("fused_mxfp4_quant").fused_rms_mxfp4_quant(t, weight, RMS_EPSILON)
            return _quant_result(packed, scale, shape)

    # -- FP8 MQA logits -----------------------------------------------------------------------

    def fp8_mqa_logits(self, q_fp8: np.ndarray, kv_fp8: np.ndarray, kv_scales: np.ndarray, weights: np.ndarray,
                       cu_starts: np.ndarray, cu_ends: np.ndarray, clean_logits: bool = True) -> np.ndarray:
        """Ragged FP8 logits: q e4m3 codes [S, H, D], kv [Skv, D], kv_scales float32 [Skv],
        weights float32 [S, H], row i scores kv[cu_starts[i]:cu_ends[i]] -> float32 [S, Skv]."""
        import torch

        k = self._load()
        fp8 = torch.float8_e4m3fn
        with k.scope():
            logits = k.module("fp8_mqa_logits").fp8_mqa_logits(
                self._tensor(_u8(q_fp8, "q_fp8", 3)).view(fp8), self._tensor(_u8(kv_fp8, "kv_fp8", 2)).view(fp8),
                self._tensor(np.asarray(kv_scales, np.float32)), self._tensor(np.asarray(weights, np.float32)),
                self._tensor(np.asarray(cu_starts, np.int32)), self._tensor(np.asarray(cu_ends, np.int32)),
                clean_logits=bool(clean_logits))
            return logits.contiguous().cpu().numpy()

    def deepgemm_fp8_paged_mqa_logits(self, q_fp8: np.ndarray, kv_cache: np.ndarray, weights: np.ndarray,
                                      context_lens: np.ndarray, block_tables: np.ndarray, max_seq_len: int,
                                      preshuffle: bool = False, variant: str = "fn",
                                      out: np.ndarray | None = None) -> np.ndarray:
        """The FP8 paged scorer of the op table's ``pa_mqa_logits_fp8.decode``."""
        if preshuffle:
            raise OutsideContract("deepgemm_fp8_paged_mqa_logits runs Preshuffle only in its Gluon kernels "
                                  "(AMD); its Triton JIT kernel asserts not Preshuffle")
        if variant != "fn":
            raise OutsideContract("this backend targets gfx950 (e4m3fn); variant 'fnuz' is gfx942's")
        import torch

        q = _u8(q_fp8, "q_fp8", 4)
        kv = _u8(kv_cache, "kv_cache", 3 if np.ndim(kv_cache) == 3 else 4)
        if kv.ndim == 3:
            kv = kv.reshape(kv.shape[0], kv.shape[1], 1, kv.shape[2])
        rows = q.shape[0] * q.shape[1]
        width = int(max_seq_len)
        result = np.full((rows, width), -np.inf, np.float32) if out is None else np.array(out, np.float32)
        k = self._load()
        with k.scope():
            logits = self._tensor(result)
            try:
                k.module("pa_mqa_logits").deepgemm_fp8_paged_mqa_logits(
                    self._tensor(q).view(torch.float8_e4m3fn), self._tensor(kv),
                    self._tensor(np.asarray(weights, np.float32)), logits,
                    self._tensor(np.asarray(context_lens, np.int32)), self._tensor(np.asarray(block_tables, np.int32)),
                    width, Preshuffle=False, KVBlockSize=kv.shape[1], ChunkK=CHUNK_K,
                    TotalCuCount=_compute_units(self.device))
            except AttributeError as error:
                if not (self.mode == "interpret" and _is_cache_key_return(error)):
                    raise
            return logits.cpu().numpy()

    # -- helpers ------------------------------------------------------------------------------

    def _tensor(self, a: np.ndarray) -> Any:
        import torch

        return torch.from_numpy(np.ascontiguousarray(a).copy()).to(self.device)


def _is_cache_key_return(error: AttributeError) -> bool:
    """The wrapper's last statement, ``return ...get_cache_manager(kernel.hash).key``, after the
    kernel ran: the interpreter's launch returns None (docs/findings/aiter.md). Only that line."""
    import traceback

    frames = traceback.extract_tb(error.__traceback__)
    last = frames[-1] if frames else None
    return (last is not None and last.filename.endswith("pa_mqa_logits.py")
            and "get_cache_manager(kernel.hash)" in (last.line or "") and "'NoneType'" in str(error))


def _rows(x: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
    a = np.asarray(x)
    if a.dtype != np.float32:
        raise TypeError(f"x must be float32, got {a.dtype}")
    if a.ndim < 1 or a.shape[-1] == 0 or a.shape[-1] % GROUP:
        raise OutsideContract(f"AITER's MXFP4 quantizers take rows of a multiple of {GROUP} elements; "
                              f"got shape {a.shape}")
    return a.reshape(-1, a.shape[-1]), a.shape


def _quant_result(packed: Any, scale: Any, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    import torch

    p = packed.view(torch.uint8).contiguous().cpu().numpy()
    s = scale.view(torch.uint8).contiguous().cpu().numpy()
    return p.reshape(shape[:-1] + (shape[-1] // 2,)), s[:, : shape[-1] // GROUP].reshape(shape[:-1] + (shape[-1] // GROUP,))


def _u8(a: np.ndarray, name: str, ndim: int) -> np.ndarray:
    arr = np.asarray(a)
    if arr.dtype != np.uint8 and not (arr.dtype.itemsize == 1 and "float8" in str(arr.dtype)):
        raise TypeError(f"{name} must be uint8 e4m3 codes, got {arr.dtype}")
    if arr.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {arr.shape}")
    return arr.view(np.uint8)


def _is_rocm() -> bool:
    import torch

    return getattr(torch.version, "hip", None) is not None


def _cuda_problem() -> str | None:
    import torch

    if not torch.cuda.is_available():
        return "torch reports no CUDA device (--device cuda)"
    return None


def _compute_units(device: str) -> int:
    if device != "cuda":
        return 1  # the interpreter runs programs one by one: the fewest splits
    import torch

    return int(torch.cuda.get_device_properties(0).multi_processor_count)
