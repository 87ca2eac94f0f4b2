"""AITER's Python reference implementations as a backend (``aiter-reference``), run on torch.

They come from the user's AITER source (``$MXGATE_AITER_SRC``): ``aiter/utility/fp4_utils.py``
(a module, loaded with mxgate.kernels.aiter_loader's stubs) and functions of the op test
scripts in ``op_tests/`` (executed with only their module-level dependencies:
``aiter_loader.extract``). Nothing is re-implemented here: every op converts NumPy arrays to
torch tensors, calls the shipped function, and converts back.

Ops and the functions behind them (profiles: mxgate.oracle.profiles; docs/findings/aiter.md):

=====================================  ====================================================  ======================
op                                     AITER function                                        profile
=====================================  ====================================================  ======================
e2m1.encode                            fp4_utils.f32_to_mxfp4 (_f32_to_floatx_unpacked)      aiter-py
e2m1.decode                            fp4_utils.mxfp4_to_f32                                aiter-py
e8m0.decode                            fp4_utils.e8m0_to_f32                                 aiter-py
aiter.f32_to_mx_e8m0_scale.<mode>      fp4_utils.f32_to_mx_e8m0_scale, mode RoundDown /       aiter-py-floor / -rceil
                                       RoundUp / Even / Ceil                                  / -even / -ceil
mx.quantize                            test_quant_mxfp4.ref_quant_mxfp4 (round_mode=1)       aiter-ref-rceil
aiter.ref_quant_mxfp4.<mode>           ref_quant_mxfp4, round_mode 0 / 2 / 3                 aiter-ref-floor / aiter-even / aiter-ref-ceil
aiter.fp4_quant_e2m1_with_e8m0         test_flydsl_pa_mqa_logits_fp4 (argmin generator)      argmin
aiter.fp4_act_quant                    test_dsv4_rotate_quant.fp4_act_quant                  aiter-dsv4-act
aiter.create_paged_preshuffle_kv_fp4   test_flydsl_pa_mqa_logits_fp4 (argmin + layouts)      argmin
aiter.kv_fp4_preshuffle_layout         test_dsv4_rotate_quant (layout only; CUDA: its         gfx950
                                       buffers are made with device="cuda")
aiter.dsv4_shuffle_scale               test_dsv4_rotate_quant (aiter-fp4-q-scale layout)     gfx950
aiter.ref_mqa_logits_mixed             test_flydsl_pa_mqa_logits_fp4 scorer reference         gfx950
aiter.indexer_k_quant_and_cache        test_indexer_k_quant_and_cache.run_torch (FP8 K)       probed torch cast profile
=====================================  ====================================================  ======================

bf16 travels as uint16 bit patterns. The op tests' module constant ``dev`` ("cuda") is set to
the backend's device; nothing else of their code changes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np

from mxgate.op_table import OpName
from mxgate.kernels import aiter_loader as loader
from mxgate.oracle import profiles_aiter  # noqa: F401 - registers the profiles these ops declare
from mxgate.kernels import sources
from mxgate.kernels.codecs import torch_cast_profile
from mxgate.kernels.base import (AVAILABLE, Availability, Backend, Op, OutsideContract, device_mode, kernel_entry,
                                 with_own_checks)
from mxgate.oracle.geometry import GROUP

MODES = {"round_down": 0, "round_up": 1, "even": 2, "ceil": 3}  # MxScaleRoundModeInt
SCALE_PROFILES = {"round_down": "aiter-py-floor", "round_up": "aiter-py-rceil", "even": "aiter-py-even",
                  "ceil": "aiter-py-ceil"}
REF_QUANT_PROFILES = {"round_down": "aiter-ref-floor", "round_up": "aiter-ref-rceil", "even": "aiter-even",
                      "ceil": "aiter-ref-ceil"}
SCALE_OP = "aiter.f32_to_mx_e8m0_scale"
REF_QUANT_OP = "aiter.ref_quant_mxfp4"
ARGMIN_QUANT = OpName.AITER_FP4_QUANT_E2M1_WITH_E8M0
ACT_QUANT = OpName.AITER_FP4_ACT_QUANT
PAGED_KV = OpName.AITER_CREATE_PAGED_PRESHUFFLE_KV_FP4
KV_LAYOUT = OpName.AITER_KV_FP4_PRESHUFFLE_LAYOUT
Q_SCALE_LAYOUT = OpName.AITER_DSV4_SHUFFLE_SCALE
MIXED_LOGITS = OpName.AITER_REF_MQA_LOGITS_MIXED
INDEXER_K = OpName.AITER_INDEXER_K_QUANT_AND_CACHE
CUDA_ONLY = {KV_LAYOUT: "kv_fp4_preshuffle_layout makes its buffers with device=\"cuda\" (a literal in the op test)"}

# op test file (loader.OP_TESTS key) -> the functions taken from it
_EXTRACTED = {
    "quant_mxfp4": ("ref_quant_mxfp4",),
    "flydsl_fp4": ("fp4_quant_e2m1_with_e8m0", "create_paged_preshuffle_kv_fp4", "ref_mqa_logits_mixed"),
    "dsv4_rotate_quant": ("fp4_act_quant", "dsv4_shuffle_scale", "kv_fp4_preshuffle_layout"),
    "indexer_k": ("run_torch",),
}
_DEVICE_CONSTANT = {"flydsl_fp4": "dev"}


class AiterReferenceBackend(Backend):
    """AITER's torch references (fp4_utils and op_tests) from ``$MXGATE_AITER_SRC``."""

    def __init__(self, device: str = "cpu") -> None:
        self.mode = device_mode(device)
        self.device = device
        self.name = "aiter-reference"
        self.description = f"AITER Python references (fp4_utils, op_tests) on torch {device}"
        self._loaded: sources.Loaded | None = None
        self._tests: dict[str, Any] = {}

    # -- availability and loading -------------------------------------------------------------

    def available(self) -> Availability:
        if self._loaded is not None:
            return AVAILABLE
        reason = sources.problem(loader.REFERENCE_SPEC)
        if reason is None:
            reason = sources.triton_problem(self.mode)  # fp4_utils defines Triton kernels at import
        if reason is None and self.device == "cuda":
            import torch

            if not torch.cuda.is_available():
                reason = "torch reports no CUDA device (--device cuda)"
        if reason is None:
            try:
                self._load()
            except sources.SourceError as error:
                reason = str(error)
        return Availability(reason is None, reason or "")

    def available_for(self, op: str) -> Availability:
        if op in CUDA_ONLY and self.device != "cuda":
            return Availability(False, f"{op} needs --device cuda: {CUDA_ONLY[op]}")
        return self.available()

    def _load(self) -> sources.Loaded:
        kernel_entry()
        if self._loaded is None:
            loaded = loader.load(loader.REFERENCE_SPEC, self.mode, self.device)
            modules = loader.package_modules(loaded)
            root = loaded.source.root
            quant = loader.extract(root / loader.OPS_QUANT, ("pertoken_quant",), "aiter.ops.quant", modules,
                                   package="aiter.ops")
            modules["aiter"].pertoken_quant = quant.pertoken_quant  # `from aiter import pertoken_quant`
            for key, names in _EXTRACTED.items():
                overrides = {_DEVICE_CONSTANT[key]: self.device} if key in _DEVICE_CONSTANT else None
                path = root / loader.OP_TESTS[key]
                self._tests[key] = loader.extract(path, names, f"mxgate_aiter_op_tests.{Path(path).stem}", modules,
                                                  overrides)
            self._loaded = loaded
        return self._loaded

    @property
    def origin(self) -> str:
        return self._load().origin

    def _fn(self, key: str, name: str) -> Callable[..., Any]:
        self._load()
        return getattr(self._tests[key], name)

    def _fp4_utils(self) -> Any:
        return self._load().module("fp4_utils")

    def reference_module(self, name: str) -> Any:
        """AITER's torch reference as loaded here, for peers in benchmarks: "fp4_utils", or an op
        test key ("indexer_k", "quant_mxfp4", "flydsl_fp4", "dsv4_rotate_quant")."""
        if name == "fp4_utils":
            return self._fp4_utils()
        self._load()
        return self._tests[name]

    # -- op table -----------------------------------------------------------------------------

    def ops(self) -> dict[str, Op]:
        table = [
            Op(OpName.E2M1_ENCODE, "aiter-py", self.e2m1_encode, "fp4_utils.f32_to_mxfp4, nibbles unpacked"),
            Op(OpName.E2M1_DECODE, "aiter-py", self.e2m1_decode, "fp4_utils.mxfp4_to_f32 on packed codes"),
            Op(OpName.E8M0_DECODE, "aiter-py", self.e8m0_decode, "fp4_utils.e8m0_to_f32"),
            Op(OpName.MX_QUANTIZE, REF_QUANT_PROFILES["round_up"], self._ref_quant("round_up"),
               "op_tests/test_quant_mxfp4.py ref_quant_mxfp4, default round_mode=1 (RoundUp)"),
            Op(ARGMIN_QUANT, "argmin", self.fp4_quant_e2m1_with_e8m0,
               "op_tests/test_flydsl_pa_mqa_logits_fp4.py fp4_quant_e2m1_with_e8m0"),
            Op(ACT_QUANT, "aiter-dsv4-act", self.fp4_act_quant, "op_tests/test_dsv4_rotate_quant.py fp4_act_quant"),
            Op(PAGED_KV, "argmin", self.create_paged_preshuffle_kv_fp4,
               "op_tests/test_flydsl_pa_mqa_logits_fp4.py create_paged_preshuffle_kv_fp4"),
            Op(KV_LAYOUT, "gfx950", self.kv_fp4_preshuffle_layout,
               "op_tests/test_dsv4_rotate_quant.py kv_fp4_preshuffle_layout (bytes only)"),
            Op(Q_SCALE_LAYOUT, "gfx950", self.dsv4_shuffle_scale,
               "op_tests/test_dsv4_rotate_quant.py dsv4_shuffle_scale (bytes only)"),
            Op(MIXED_LOGITS, "gfx950", self.ref_mqa_logits_mixed,
               "op_tests/test_flydsl_pa_mqa_logits_fp4.py ref_mqa_logits_mixed (float32 torch)"),
            # run_torch casts with torch's float8_e4m3fn, whose overflow rule changes with the
            # version: the profile is the one the casts of the torch running here match
            Op(INDEXER_K, torch_cast_profile(self.device), self.indexer_k_quant_and_cache,
               "op_tests/test_indexer_k_quant_and_cache.py run_torch"),
        ]
        for mode in MODES:
            table.append(Op(f"{SCALE_OP}.{mode}", SCALE_PROFILES[mode], self._scale(mode),
                            f"fp4_utils.f32_to_mx_e8m0_scale(mode={MODES[mode]})"))
            if mode != "round_up":
                table.append(Op(f"{REF_QUANT_OP}.{mode}", REF_QUANT_PROFILES[mode], self._ref_quant(mode),
                                f"ref_quant_mxfp4(round_mode={MODES[mode]})"))
        return with_own_checks({op.name: op for op in table})

    # -- element codecs -----------------------------------------------------------------------

    def e2m1_encode(self, x: np.ndarray) -> np.ndarray:
        a = np.asarray(x, np.float32)
        flat = a.reshape(-1)
        padded = np.concatenate([flat, np.zeros(flat.size % 2, np.float32)])
        packed = self._numpy(self._fp4_utils().f32_to_mxfp4(self._tensor(padded.reshape(1, -1))))
        codes = np.empty(padded.size, np.uint8)
        codes[0::2], codes[1::2] = packed.reshape(-1) & 0xF, packed.reshape(-1) >> 4
        return codes[: flat.size].reshape(a.shape)

    def e2m1_decode(self, codes: np.ndarray) -> np.ndarray:
        c = np.asarray(codes, np.uint8)
        flat = c.reshape(-1)
        padded = np.concatenate([flat, np.zeros(flat.size % 2, np.uint8)])
        packed = (padded[0::2] | (padded[1::2] << 4)).astype(np.uint8)
        values = self._numpy(self._fp4_utils().mxfp4_to_f32(self._tensor(packed.reshape(1, -1))))
        return values.reshape(-1)[: flat.size].reshape(c.shape).astype(np.float32)

    def e8m0_decode(self, codes: np.ndarray) -> np.ndarray:
        return self._numpy(self._fp4_utils().e8m0_to_f32(self._tensor(np.asarray(codes, np.uint8))))

    def _scale(self, mode: str) -> Callable[[np.ndarray], np.ndarray]:
        def run(amax: np.ndarray) -> np.ndarray:
            a = np.asarray(amax, np.float32)
            out = self._fp4_utils().f32_to_mx_e8m0_scale(self._tensor(a), mode=MODES[mode])
            return self._numpy(out)

        run.__name__ = f"f32_to_mx_e8m0_scale_{mode}"
        return run

    # -- block quantizers ---------------------------------------------------------------------

    def _ref_quant(self, mode: str) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]:
        def run(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            rows, shape = _rows(x)
            packed, scale = self._fn("quant_mxfp4", "ref_quant_mxfp4")(self._tensor(rows), round_mode=MODES[mode])
            return _shaped(self._numpy(packed), self._numpy(scale), shape)

        run.__name__ = f"ref_quant_mxfp4_{mode}"
        return run

    def fp4_quant_e2m1_with_e8m0(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rows, shape = _rows(x)
        packed, e8m0 = self._fn("flydsl_fp4", "fp4_quant_e2m1_with_e8m0")(self._tensor(rows))
        return _shaped(self._numpy(packed), self._numpy(e8m0), shape)

    def fp4_act_quant(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rows, shape = _rows(x)
        packed, scale = self._fn("dsv4_rotate_quant", "fp4_act_quant")(self._tensor(rows))
        return _shaped(self._numpy(packed), self._numpy(scale), shape)

    # -- layout builders ----------------------------------------------------------------------

    def create_paged_preshuffle_kv_fp4(self, kv_bf16: np.ndarray, kv_block_size: int, num_blocks: int,
                                       block_tables: np.ndarray) -> tuple[np.ndarray, ...]:
        """kv_bf16 uint16 [B, T, D] -> (kv_cache [nb, D/128, 4, bs, 16], kv_scale [nb, D/128, 4, bs],
        kv_fp4 [B, T, D/2], kv_e8m0 [B, T, D/32])."""
        import torch

        bits = np.asarray(kv_bf16)
        if bits.dtype != np.uint16 or bits.ndim != 3:
            raise TypeError(f"kv_bf16 must be uint16 bf16 bit patterns [B, T, D], got {bits.dtype} {bits.shape}")
        kv = self._tensor(bits.view(np.int16)).view(torch.bfloat16)
        result = self._fn("flydsl_fp4", "create_paged_preshuffle_kv_fp4")(
            kv, int(kv_block_size), int(num_blocks), self._tensor(np.asarray(block_tables, np.int32)))
        return tuple(self._numpy(t) for t in result)

    def kv_fp4_preshuffle_layout(self, kv_fp4_dense: np.ndarray, kv_scale_dense: np.ndarray, kv_block_size: int,
                                 slot_mapping: np.ndarray, num_blocks: int) -> tuple[np.ndarray, np.ndarray]:
        if self.device != "cuda":
            raise OutsideContract(CUDA_ONLY[KV_LAYOUT])
        cache, scale = self._fn("dsv4_rotate_quant", "kv_fp4_preshuffle_layout")(
            self._tensor(np.asarray(kv_fp4_dense, np.uint8)), self._tensor(np.asarray(kv_scale_dense, np.uint8)),
            int(kv_block_size), self._tensor(np.asarray(slot_mapping, np.int64)), int(num_blocks))
        return self._numpy(cache), self._numpy(scale)

    def dsv4_shuffle_scale(self, scale: np.ndarray) -> np.ndarray:
        return self._numpy(self._fn("dsv4_rotate_quant", "dsv4_shuffle_scale")(self._tensor(np.asarray(scale, np.uint8))))

    # -- scorer and indexer K references ------------------------------------------------------

    def ref_mqa_logits_mixed(self, q_packed: np.ndarray, q_scale: np.ndarray, kv_fp4: np.ndarray,
                             kv_scale: np.ndarray, weights: np.ndarray, context_lens: np.ndarray, next_n: int = 1,
                             weight_scale: float = 1.0) -> np.ndarray:
        """Dense FP4 decode reference: q [B, n, H, D/2] + scales [B, n, H, D/32], kv [B, T, D/2] +
        scales [B, T, D/32], weights float32 [B*n, H] -> float32 [B*n, T]."""
        out = self._fn("flydsl_fp4", "ref_mqa_logits_mixed")(
            self._tensor(np.asarray(q_packed, np.uint8)), self._tensor(np.asarray(q_scale, np.uint8)),
            self._tensor(np.asarray(kv_fp4, np.uint8)), self._tensor(np.asarray(kv_scale, np.uint8)),
            self._tensor(np.asarray(weights, np.float32)), self._tensor(np.asarray(context_lens, np.int32)),
            next_n=int(next_n), weight_scale=float(weight_scale))
        return self._numpy(out)

    def indexer_k_quant_and_cache(self, k_bf16: np.ndarray, kv_cache: np.ndarray, slot_mapping: np.ndarray,
                                  quant_block_size: int = 128, scale_fmt: str = "ue8m0",
                                  preshuffle: bool = False) -> np.ndarray:
        """run_torch: FP8 K quantization into the block-planar cache [nb, B, D+4] (uint8 copy)."""
        import torch

        bits = np.asarray(k_bf16)
        if bits.dtype != np.uint16 or bits.ndim != 2:
            raise TypeError(f"k_bf16 must be uint16 bf16 bit patterns [T, D], got {bits.dtype} {bits.shape}")
        cache = self._tensor(np.asarray(kv_cache, np.uint8)).view(torch.float8_e4m3fn)
        self._fn("indexer_k", "run_torch")(
            self._tensor(bits.view(np.int16)).view(torch.bfloat16), cache,
            self._tensor(np.asarray(slot_mapping, np.int64)), int(quant_block_size), scale_fmt, preshuffle=bool(preshuffle))
        return self._numpy(cache)

    # -- helpers ------------------------------------------------------------------------------

    def _tensor(self, a: np.ndarray) -> Any:
        import torch

        return torch.from_numpy(np.ascontiguousarray(a).copy()).to(self.device)

    @staticmethod
    def _numpy(t: Any) -> np.ndarray:
        import torch

        if t.dtype in (torch.float32, torch.float64, torch.int32, torch.int64, torch.uint8, torch.bool):
            return t.contiguous().cpu().numpy()
        if t.element_size() == 1:
            return t.contiguous().view(torch.uint8).cpu().numpy()
        raise TypeError(f"unexpected result dtype {t.dtype}")


def _rows(x: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
    a = np.asarray(x)
    if a.dtype != np.float32:
        raise TypeError(f"x must be float32, got {a.dtype}")
    if a.ndim < 1 or a.shape[-1] == 0 or a.shape[-1] % GROUP:
        raise OutsideContract(f"the references quantize rows of a multiple of {GROUP} elements; got {a.shape}")
    return a.reshape(-1, a.shape[-1]), a.shape


def _shaped(packed: np.ndarray, scale: np.ndarray, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    return (packed.reshape(shape[:-1] + (shape[-1] // 2,)), scale.reshape(shape[:-1] + (shape[-1] // GROUP,)))
