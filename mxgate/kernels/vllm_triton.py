"""Adapters for vLLM PR #42908's pure-Triton ROCm FP4 indexer kernels, run from the user's vLLM.

Backends (configuration from the environment, so each one is built from its registry name):

* ``vllm-triton``: every kernel of the PR the checkout has, with the platform's FP8 dtype
  e4m3fn (gfx950): the FP4 paged and ragged scorers, the FP8 paged scorer, the fused top-k
  variants (only in the later revision, fp4indexerv2), the MXFP4 Q kernel and the MXFP4 K-cache
  insert kernel (through the ROCm quantizer branch);
* ``vllm-triton-fnuz``: the FP8 paged scorer with the platform's FP8 dtype e4m3fnuz (gfx942),
  which takes the kernel's ``IS_FNUZ`` path.

The source is ``$MXGATE_VLLM_SRC`` (a checkout; see mxgate.kernels.vllm_loader) or an installed
vllm holding the files; without one every backend is "not supported here" naming the variable.
``device="cpu"`` runs the kernels under Triton's CPU interpreter (TRITON_INTERPRET=1 must be
set before triton's first import; the gate does that for --device cpu), ``device="cuda"``
compiles them. Every op takes and returns NumPy arrays (bf16 as uint16 bit patterns); inputs
are copied, never modified. ``origin`` names the vLLM revision that ran.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mxgate.op_table import OpName
from mxgate.kernels import sources, vllm_loader as loader
from mxgate.kernels.base import Availability, Backend, Op, OutsideContract, device_mode, kernel_entry, with_own_checks
from mxgate.kernels.torch_bridge import to_torch
from mxgate.oracle.geometry import GROUP, HEAD_DIM, ROPE_DIM, ROW_BYTES, ROW_GROUPS, TOKEN_BYTES
from mxgate.oracle.ops.quant_vllm import PROFILE_NAME as QUANT_PROFILE, check_k_domain  # registers vllm-rocm


FP4_PAGED = OpName.VLLM_FP4_PAGED_MQA_LOGITS
FP4_RAGGED = OpName.VLLM_FP4_MQA_LOGITS
FP8_PAGED = OpName.VLLM_FP8_PAGED_MQA_LOGITS
TOPK = OpName.VLLM_FP4_PAGED_MQA_LOGITS_TOPK
TILE_TOPK = OpName.VLLM_FP4_PAGED_MQA_LOGITS_TILE_TOPK
Q_QUANT = OpName.VLLM_INDEXER_Q_MXFP4
K_STORE = OpName.VLLM_FP4_INDEXER_K_STORE

SCORER_PROFILE = "gfx950"  # e8m0 decoding only: byte 0 = 2^-127, 255 = NaN
FNUZ_PROFILE = "aiter-gfx942"  # the same, with e4m3fnuz as the FP8 variant

# v2's launch knobs (environment variables read by the wrapper at each call) an op may set.
KNOBS = ("VLLM_ROCM_FP4_INDEXER_SEGMENT_GROUP_PROGS", "VLLM_ROCM_FP4_INDEXER_TILE_CHUNKS",
         "VLLM_ROCM_FP4_INDEXER_PREFILL_PERSISTENT_K_PROGS")

# The K kernel's front end, configured as an exact identity (mxgate.oracle.ops.quant_vllm).
NORM_WEIGHT = 2.0**50
NORM_EPS = 2.0**100


class VllmTritonBackend(Backend):
    """vLLM PR #42908's Triton kernels from ``$MXGATE_VLLM_SRC`` (or an installed vllm)."""

    def __init__(self, device: str = "cpu", *, fp8: str = "fn") -> None:
        mode = device_mode(device)
        if fp8 not in loader.FP8_DTYPES:
            raise ValueError(f"fp8 must be one of {loader.FP8_DTYPES}; got {fp8!r}")
        self.device = device
        self.fp8 = fp8
        self.mode = mode
        self.name = "vllm-triton-fnuz" if fp8 == "fnuz" else "vllm-triton"
        self._source: sources.Source | None = None
        self._reason: str | None = None
        self._ops: dict[str, Op] | None = None
        self._ready = False
        try:
            self._source = loader.locate()
        except sources.SourceError as error:
            self._reason = str(error)
        where = self._source.origin if self._source else "no vLLM source"
        platform = "e4m3fnuz (gfx942)" if fp8 == "fnuz" else "e4m3fn (gfx950)"
        run = "compiled on CUDA" if device == "cuda" else "CPU interpreter"
        self.description = f"vLLM PR #42908 ROCm Triton kernels, {where}, platform FP8 {platform}, {run}"

    @property
    def origin(self) -> str:
        """The vLLM revision (or the reason there is none) every result of this backend ran."""
        return self._source.origin if self._source else (self._reason or "")

    # -- availability --------------------------------------------------------------------

    def available(self) -> Availability:
        if self._ready:
            return Availability(True, "")
        reason = self._reason or sources.triton_problem(self.mode)
        if reason is None and self.device == "cuda":
            reason = _cuda_problem(self.fp8)
        if reason is None:
            try:
                self.kernels()
            except sources.SourceError as error:
                reason = str(error)
        self._ready = reason is None
        return Availability(reason is None, reason or "")

    def available_for(self, op: str) -> Availability:
        if op not in self.ops():
            return Availability(False, f"{self.name} does not implement {op}")
        return self.available()

    def kernels(self) -> sources.Loaded:
        kernel_entry()
        if self._source is None:
            raise sources.SourceError(self._reason or "no vLLM source")
        return loader.load(self.mode, self.device, self.fp8)

    # -- op table ------------------------------------------------------------------------

    def ops(self) -> dict[str, Op]:
        if self._ops is None:
            self._ops = with_own_checks({op.name: op for op in self._table()})
        return self._ops

    def _table(self) -> list[Op]:
        fp8 = Op(FP8_PAGED, FNUZ_PROFILE if self.fp8 == "fnuz" else SCORER_PROFILE, self.fp8_paged,
                 f"rocm_fp8_fp4_paged_mqa_logits, FP8 Q (platform fp8 {self.fp8}), aiter-fp8-kv cache")
        if self.fp8 == "fnuz":
            return [fp8]
        names = self._source.defines("logits") if self._source else frozenset()
        table = [
            Op(FP4_PAGED, SCORER_PROFILE, self.fp4_paged,
               "rocm_fp8_fp4_paged_mqa_logits, MXFP4 Q and K (tl.dot_scaled e2m1 x e2m1)"),
            Op(FP4_RAGGED, SCORER_PROFILE, self.fp4_ragged,
               "rocm_fp4_mqa_logits: tl.dot_scaled when heads % 32 == 0, else software decode + tl.dot"),
            fp8,
        ]
        if loader.TOPK_ENTRY[0] in names:
            table.append(Op(TOPK, SCORER_PROFILE, self.fp4_topk,
                            "rocm_fp4_paged_mqa_logits_topk (fp4indexerv2): streaming fused top-k"))
        if loader.TOPK_ENTRY[1] in names:
            table.append(Op(TILE_TOPK, SCORER_PROFILE, self.fp4_tile_topk,
                            "rocm_fp4_paged_mqa_logits_tile_topk (fp4indexerv2): tile-local top-k + merge"))
        table += [
            Op(Q_QUANT, QUANT_PROFILE, self.indexer_q,
               "fused_indexer_q_rope_quant(use_fp4=True) at a cos 1 / sin 0 position (ROCm _fp32x2_to_fp4x2)"),
            Op(K_STORE, QUANT_PROFILE, self.k_store,
               "_fused_kv_compress_norm_rope_insert_indexer_mxfp4_attn with identity compress/norm/rope"),
        ]
        return table

    # -- scorers -------------------------------------------------------------------------

    def fp4_paged(self, q_fp4: np.ndarray, q_e8m0: np.ndarray, kv_cache: np.ndarray, weights: np.ndarray,
                  context_lens: np.ndarray, block_tables: np.ndarray, max_context_len: int, *,
                  block_size: int = 64, clean_logits: bool = True, knobs: dict[str, str] | None = None) -> np.ndarray:
        """q_fp4 uint8 [B, next_n, H, 64], q_e8m0 uint8 [B, next_n, H, 4], kv_cache uint8
        [num_blocks, page_bytes] (vllm-fp4-indexer-k), weights float32 [B*next_n, H],
        context_lens int32 [B] or [B, next_n], block_tables int32 [B, W] -> float32
        [B*next_n, max_context_len]."""
        k = self.kernels()
        torch = _torch()
        q = self._q_pair(q_fp4, q_e8m0, "q_fp4", 4)
        with k.scope(), sources.environ_scope(_knobs(knobs)), _HostChecks():
            out = k.module("logits").rocm_fp8_fp4_paged_mqa_logits(
                q, self._paged_view(kv_cache, block_size), self._f32(weights, "weights"),
                self._i32(context_lens, "context_lens"), self._i32(block_tables, "block_tables"),
                None, _int(max_context_len, "max_context_len"), clean_logits=_bool(clean_logits, "clean_logits"),
                logits_dtype=torch.float32)
            return out.cpu().numpy()

    def fp4_ragged(self, q_fp4: np.ndarray, q_e8m0: np.ndarray, k_fp4: np.ndarray, k_e8m0: np.ndarray,
                   weights: np.ndarray, cu_seqlen_ks: np.ndarray, cu_seqlen_ke: np.ndarray, *,
                   clean_logits: bool = True, knobs: dict[str, str] | None = None) -> np.ndarray:
        """q_fp4 uint8 [S, H, 64], q_e8m0 [S, H, 4], k_fp4 uint8 [N, 64], k_e8m0 [N, 4], weights
        float32 [S, H], cu_seqlen_ks / _ke int32 [S] -> float32 [S, N]."""
        k = self.kernels()
        q = self._q_pair(q_fp4, q_e8m0, "q_fp4", 3)
        kv = self._q_pair(k_fp4, k_e8m0, "k_fp4", 2)
        with k.scope(), sources.environ_scope(_knobs(knobs)), _HostChecks():
            out = k.module("logits").rocm_fp4_mqa_logits(
                q, kv, self._f32(weights, "weights"), self._i32(cu_seqlen_ks, "cu_seqlen_ks"),
                self._i32(cu_seqlen_ke, "cu_seqlen_ke"), clean_logits=_bool(clean_logits, "clean_logits"))
            return out.cpu().numpy()

    def fp8_paged(self, q_fp8: np.ndarray, kv_cache: np.ndarray, weights: np.ndarray, context_lens: np.ndarray,
                  block_tables: np.ndarray, max_context_len: int, *, clean_logits: bool = True) -> np.ndarray:
        """q_fp8 uint8 e4m3 codes [B, next_n, H, D] (read as the platform's FP8 dtype), kv_cache
        uint8 [num_blocks, block_size, D+4] (aiter-fp8-kv) -> float32 [B*next_n, max_context_len]."""
        k = self.kernels()
        torch = _torch()
        codes = _array(q_fp8, "q_fp8", np.uint8, ndim=4)
        cache = _array(kv_cache, "kv_cache", np.uint8, ndim=3)
        dtype = torch.float8_e4m3fnuz if self.fp8 == "fnuz" else torch.float8_e4m3fn
        with k.scope(), _HostChecks():
            q = self._tensor(codes).view(dtype)
            out = k.module("logits").rocm_fp8_fp4_paged_mqa_logits(
                (q, None), self._tensor(cache).unsqueeze(-2), self._f32(weights, "weights"),
                self._i32(context_lens, "context_lens"), self._i32(block_tables, "block_tables"), None,
                _int(max_context_len, "max_context_len"), clean_logits=_bool(clean_logits, "clean_logits"),
                logits_dtype=torch.float32)
            return out.cpu().numpy()

    def fp4_topk(self, q_fp4: np.ndarray, q_e8m0: np.ndarray, kv_cache: np.ndarray, weights: np.ndarray,
                 context_lens: np.ndarray, block_tables: np.ndarray, max_context_len: int, topk: int, *,
                 block_size: int = 64) -> np.ndarray:
        """As fp4_paged, then the top-k token indices per row: int32 [B*next_n, topk]."""
        return self._topk("rocm_fp4_paged_mqa_logits_topk", q_fp4, q_e8m0, kv_cache, weights, context_lens,
                          block_tables, max_context_len, topk, block_size)

    def fp4_tile_topk(self, q_fp4: np.ndarray, q_e8m0: np.ndarray, kv_cache: np.ndarray, weights: np.ndarray,
                      context_lens: np.ndarray, block_tables: np.ndarray, max_context_len: int, topk: int, *,
                      block_size: int = 64) -> np.ndarray:
        """As fp4_topk, through the tile-local top-k and merge kernels."""
        return self._topk("rocm_fp4_paged_mqa_logits_tile_topk", q_fp4, q_e8m0, kv_cache, weights, context_lens,
                          block_tables, max_context_len, topk, block_size)

    def _topk(self, entry: str, q_fp4: np.ndarray, q_e8m0: np.ndarray, kv_cache: np.ndarray, weights: np.ndarray,
              context_lens: np.ndarray, block_tables: np.ndarray, max_context_len: int, topk: int,
              block_size: int) -> np.ndarray:
        k = self.kernels()
        torch = _torch()
        q = self._q_pair(q_fp4, q_e8m0, "q_fp4", 4)
        rows = q_fp4.shape[0] * q_fp4.shape[1]
        n = _int(topk, "topk")
        with k.scope(), _HostChecks():
            out = torch.full((rows, n), -2, dtype=torch.int32, device=self.device)  # -2: never written
            getattr(k.module("logits"), entry)(
                q, self._paged_view(kv_cache, block_size), self._f32(weights, "weights"),
                self._i32(context_lens, "context_lens"), self._i32(block_tables, "block_tables"), out,
                _int(max_context_len, "max_context_len"), n)
            return out.cpu().numpy()

    # -- quantizer kernels ---------------------------------------------------------------

    def indexer_q(self, x_bf16: np.ndarray, weights: np.ndarray, softmax_scale: float,
                  head_scale: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """x_bf16 uint16 [T, H, 128], weights float32 [T, H] -> (packed uint8 [T, H, 64],
        e8m0 uint8 [T, H, 4], weights_out float32 [T, H]), at a position with cos 1, sin 0."""
        k = self.kernels()
        torch = _torch()
        bits = _array(x_bf16, "x_bf16", np.uint16, ndim=3)
        if bits.shape[2] != HEAD_DIM:
            raise ValueError(f"x_bf16 must have shape [T, H, 128], got {bits.shape}")
        T = bits.shape[0]
        cos_sin = torch.zeros((1, 64), dtype=torch.float32)
        cos_sin[:, :32] = 1.0
        with k.scope():
            (packed, scales), w_out = k.module("indexer_q").fused_indexer_q_rope_quant(
                torch.zeros(T, dtype=torch.int64, device=self.device), self._bf16(bits),
                cos_sin.to(self.device), self._f32(weights, "weights"), float(softmax_scale), float(head_scale),
                use_fp4=True)
            e8m0 = scales.cpu().numpy().astype("<i4").view(np.uint8).reshape(bits.shape[:2] + (ROW_GROUPS,))
            return packed.cpu().numpy(), e8m0.copy(), w_out.cpu().numpy()

    def k_store(self, k_bf16: np.ndarray, slots: np.ndarray, cache: np.ndarray, *,
                block_size: int = 64) -> np.ndarray:
        """Quantize k rows (uint16 bf16 [T, 128]) into a copy of the vllm-fp4-indexer-k cache
        [num_blocks, page_bytes] at ``slots`` (int64 [T]; < 0: skipped)."""
        torch = _torch()
        bits = _array(k_bf16, "k_bf16", np.uint16, ndim=2)
        if bits.shape[1] != HEAD_DIM:
            raise ValueError(f"k_bf16 must have shape [T, 128], got {bits.shape}")
        try:
            check_k_domain((bits.astype(np.uint32) << 16).view(np.float32))
        except ValueError as error:
            raise OutsideContract(str(error)) from None
        buf = _array(cache, "cache", np.uint8, ndim=2)
        bs = _int(block_size, "block_size")
        if buf.shape[1] < bs * TOKEN_BYTES:
            raise ValueError(f"cache pages must hold block_size*68 = {bs * TOKEN_BYTES} bytes, got {buf.shape[1]}")
        s = _array(slots, "slots", None, ndim=1).astype(np.int64)
        T = bits.shape[0]
        if s.shape[0] != T:
            raise ValueError(f"slots must have one entry per row ({T}), got {s.shape[0]}")
        live = s[s >= 0]
        if live.size and (live.max() >= buf.shape[0] * bs or np.unique(live).size != live.size):
            raise OutsideContract(f"slots must be distinct and < {buf.shape[0] * bs} (the kernel has no bounds check)")
        k = self.kernels()
        dev = self.device
        with k.scope():
            state = torch.zeros((T, 1, 2 * HEAD_DIM), dtype=torch.float32)
            state[:, 0, :HEAD_DIM] = self._bf16(bits).float().cpu()
            state = state.to(dev)
            out = self._tensor(buf)
            cos_sin = torch.cat([torch.ones(1, 32), torch.zeros(1, 32)], dim=1).to(dev)
            ids = torch.arange(T, dtype=torch.int32, device=dev)
            k.module("compress")._fused_kv_compress_norm_rope_insert_indexer_mxfp4_attn[(T,)](
                state, state.stride(0), state.stride(1),
                ids, torch.zeros(T, dtype=torch.int64, device=dev), torch.arange(T, dtype=torch.int64, device=dev),
                ids.reshape(T, 1).contiguous(), 1, 1,
                torch.full((HEAD_DIM,), NORM_WEIGHT, dtype=torch.float32, device=dev), NORM_EPS,
                cos_sin, cos_sin.stride(0),
                out, self._tensor(s), bs,
                HEAD_SIZE=HEAD_DIM, TRITON_BLOCK_SIZE=HEAD_DIM, STATE_WIDTH=HEAD_DIM, COMPRESS_RATIO=1, OVERLAP=0,
                ROPE_HEAD_DIM=ROPE_DIM, FP8_MAX=448.0, QUANT_BLOCK=GROUP, TOKEN_STRIDE=ROW_BYTES, SCALE_DIM=ROW_GROUPS,
                KV_BLOCK_STRIDE=buf.shape[1], num_warps=1)
            return out.cpu().numpy()

    # -- conversions ---------------------------------------------------------------------

    def _tensor(self, array: np.ndarray) -> Any:
        return to_torch(array, self.device, copy=True)

    def _bf16(self, bits: np.ndarray) -> Any:
        return to_torch(bits, self.device, bf16=True, copy=True)

    def _f32(self, x: np.ndarray, name: str) -> Any:
        return self._tensor(_array(x, name, np.float32))

    def _i32(self, x: np.ndarray, name: str) -> Any:
        a = _array(x, name, None)
        if a.dtype.kind not in "iu":
            raise TypeError(f"{name} must have an integer dtype, got {a.dtype}")
        if a.size and (a.min() < -(2**31) or a.max() >= 2**31):
            raise ValueError(f"{name} must fit int32")
        return self._tensor(a.astype(np.int32))

    def _q_pair(self, packed: np.ndarray, e8m0: np.ndarray, name: str, ndim: int) -> tuple[Any, Any]:
        """(int8 packed codes, int32 scale words) as the kernels take them."""
        torch = _torch()
        p = _array(packed, name, np.uint8, ndim=ndim)
        e = _array(e8m0, f"{name} scales", np.uint8, ndim=ndim)
        if p.shape[-1] != ROW_BYTES or e.shape != p.shape[:-1] + (ROW_GROUPS,):
            raise ValueError(f"{name} must be [..., 64] with e8m0 [..., 4] over the same leading shape, "
                             f"got {p.shape} and {e.shape}")
        words = np.ascontiguousarray(e).view("<i4")[..., 0].astype(np.int32)
        return self._tensor(p).view(torch.int8), self._tensor(words)

    def _paged_view(self, kv_cache: np.ndarray, block_size: int) -> Any:
        """vLLM's kv_cache_as_quant_view: [num_blocks, block_size, 1, 68] over the page stride."""
        torch = _torch()
        buf = _array(kv_cache, "kv_cache", np.uint8, ndim=2)
        bs = _int(block_size, "block_size")
        if buf.shape[1] < bs * TOKEN_BYTES:
            raise ValueError(f"kv_cache pages must hold block_size*68 = {bs * TOKEN_BYTES} bytes, got {buf.shape[1]}")
        t = self._tensor(buf)
        return torch.as_strided(t, (buf.shape[0], bs, 1, TOKEN_BYTES), (buf.shape[1], TOKEN_BYTES, TOKEN_BYTES, 1))


class _HostChecks:
    """vLLM's wrappers refuse inputs outside their contract with an assert or a ValueError
    (e.g. "tile-fused FP4 top-k is validation-only for up to 8 tiles"): that is OutsideContract,
    not a kernel fault."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type | None, error: BaseException | None, tb: object) -> bool:
        if kind is not None and issubclass(kind, (AssertionError, ValueError)) and not issubclass(kind, OutsideContract):
            raise OutsideContract(f"vLLM's wrapper refuses these inputs: {type(error).__name__}: {error}") from error
        return False


def backends(device: str = "cpu") -> list[VllmTritonBackend]:
    return [VllmTritonBackend(device), VllmTritonBackend(device, fp8="fnuz")]


# -- helpers --------------------------------------------------------------------------------

def _torch() -> Any:
    import torch

    return torch


def _cuda_problem(fp8: str) -> str | None:
    torch = _torch()
    if not torch.cuda.is_available():
        return "device='cuda' but torch sees no CUDA device"
    if fp8 == "fnuz" and not getattr(torch.version, "hip", None):
        # seen on the H200 (docs/results/h200-2026-12-01.md): Triton refuses fp8e4b8 there
        return "e4m3fnuz (Triton fp8e4b8) exists on AMD gfx942 only; Triton on NVIDIA refuses the kernel"
    return None


def _array(x: object, name: str, dtype: type | None, ndim: int | None = None) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy array, got {type(x).__name__}")
    if dtype is not None and x.dtype != dtype:
        raise TypeError(f"{name} must have dtype {np.dtype(dtype).name}, got {x.dtype}")
    if ndim is not None and x.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {x.shape}")
    return x


def _int(value: object, name: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{name} must be a non-negative int, got {value!r}")
    return int(value)


def _bool(value: object, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
    return bool(value)


def _knobs(knobs: dict[str, str] | None) -> dict[str, str | None]:
    """The v2 launch knobs for one call: the given ones set, the others removed."""
    given = dict(knobs or {})
    unknown = sorted(set(given) - set(KNOBS))
    if unknown:
        raise ValueError(f"knobs must be among {', '.join(KNOBS)}; got {', '.join(unknown)}")
    return {name: (str(given[name]) if name in given else None) for name in KNOBS}
