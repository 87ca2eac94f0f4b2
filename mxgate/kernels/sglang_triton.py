"""Adapters for sglang's shipped Triton FP4 indexer kernels (sglang 0.5.23).

Two backends: ``sglang-triton`` (the default threshold rounding, profile ``threshold``) and
``sglang-triton-rne`` (``rne=True``, profile ``sglang-rne``). On ``device="cpu"`` the kernels run
under Triton's CPU interpreter; on ``device="cuda"`` they are compiled. Facts behind every choice
here are in docs/findings/sglang.md.

Every op takes NumPy arrays (bf16 as uint16 bit patterns or ``ml_dtypes.bfloat16``) and returns
new NumPy arrays; buffers passed in are copied, never modified.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mxgate.op_table import OpName
from mxgate.kernels.base import Availability, Backend, Op, OutsideContract, device_mode, kernel_entry, with_own_checks
from mxgate.kernels import sglang_loader as loader
from mxgate.kernels.torch_bridge import to_torch
from mxgate.oracle.geometry import GROUP, HEAD_DIM, KV_BLOCK, ROW_BYTES, ROW_GROUPS, TOKEN_BYTES

ROWS_BLOCK_M = 8  # rows per program of the multi-row quantizer, as sglang launches it

# Ops that cannot run under the CPU interpreter, with the reason (findings doc, section 6).
GPU_ONLY: dict[str, str] = {
    OpName.SGLANG_INDEX_K_ROPE_PACK: (
        "its kernel calls libdevice.rint (fp4_indexer.py:277), which the Triton interpreter "
        "does not implement"
    ),
    OpName.SGLANG_FP4_INDEX_LOGITS_DECODE: (
        "under TRITON_INTERPRET=1 it runs but is wrong: the interpreter's tl.dot multiplies the "
        "raw uint16 bits of bf16 operands, and its fp32->bf16 casts truncate instead of rounding "
        "to nearest even"
    ),
    OpName.SGLANG_FP4_INDEX_LOGITS_PAGED: (
        "its launcher calls torch.cuda.get_device_properties (fp4_indexer.py:632), and under the "
        "interpreter its bf16 tl.dot and fp32->bf16 casts are wrong as for the decode kernel"
    ),
}


class SglangTritonBackend(Backend):
    """sglang's FP4 indexer quantizer, its two K-cache writers, and (CUDA) its scorers."""

    def __init__(self, device: str = "cpu", *, rne: bool = False) -> None:
        mode = device_mode(device)
        if not isinstance(rne, bool):
            raise TypeError(f"rne must be a bool, got {type(rne).__name__}")
        self.device = device
        self.rne = rne
        self.mode = mode
        self.profile = "sglang-rne" if rne else "threshold"
        self.name = "sglang-triton-rne" if rne else "sglang-triton"
        rounding = "rne=True (round half to even)" if rne else "default rne=False (ties toward zero)"
        self.description = (
            f"sglang {loader.sglang_version() or '(not installed)'} Triton FP4 indexer kernels, "
            f"{rounding}, {'compiled on CUDA' if device == 'cuda' else 'CPU interpreter'}"
        )
        self._ops: dict[str, Op] | None = None
        self._ready = False  # set once the kernels loaded: a process keeps its triton mode

    # -- availability --------------------------------------------------------------------

    def available(self, op: str | None = None) -> Availability:
        """Whether the backend (or one op of it) can run here; the reason when not."""
        if op is not None:
            if op not in self.ops():
                return Availability(False, f"backend {self.name!r} does not implement {op!r}")
            if op in GPU_ONLY and self.device != "cuda":
                return Availability(False, f"{op} needs device='cuda': {GPU_ONLY[op]}")
        if self._ready:
            return Availability(True, "")
        reason = loader.problem(self.mode)
        if reason is None and self.device == "cuda":
            reason = _cuda_problem()
        if reason is None:
            try:
                loader.load(self.mode)
            except loader.LoaderError as exc:
                reason = str(exc)
        self._ready = reason is None
        return Availability(reason is None, reason or "")

    def available_for(self, op: str) -> Availability:
        return self.available(op)

    def kernels(self) -> loader.Kernels:
        """The loaded sglang modules; raises RuntimeError with the reason when unavailable."""
        kernel_entry()
        status = self.available()
        if not status:
            raise RuntimeError(f"backend {self.name!r} is not available: {status.reason}")
        return loader.load(self.mode)

    # -- op table ------------------------------------------------------------------------

    def ops(self) -> dict[str, Op]:
        if self._ops is None:
            p = self.profile
            table: list[Op] = [
                Op(OpName.FP4_INDEXER_QUANTIZE, p, self.quantize,
                   "quantize_fp4_indexer_tensor: one program per row (the multi-row kernel only "
                   "on Blackwell with >= 4096 rows)"),
                Op(OpName.FP4_INDEXER_QUANTIZE_ROWS, p, self.quantize_rows,
                   "_quantize_fp4_indexer_rows, the Blackwell multi-row kernel, launched directly"),
                Op(OpName.SGLANG_PAGE68_STORE, p, self.page68_store, "store_fp4_index_k_cache"),
                Op(OpName.SGLANG_PAGE68_GATHER, p, self.page68_gather,
                   "gather_fp4_index_k (bytes only, no rounding)"),
                Op(OpName.AITER_FP4_KV_STORE, p, self.split_store,
                   "store_fp4_index_k_cache_split, page8=False"),
                Op(OpName.SGLANG_PAGE8_STORE, p, self.page8_store,
                   "store_fp4_index_k_cache_split, page8=True"),
            ]
            if not self.rne:  # these kernels take no rne flag: listed once, on the default backend
                table += [
                    Op(OpName.SGLANG_INDEX_K_ROPE_PACK, "sglang-rne", self.index_k_rope_pack,
                       "RoPE + fake-quant (floor 6*2^-126) + RNE pack; CUDA only"),
                    # compiled for CUDA, tl.exp2(byte - 127) reads K scale byte 0 as 0 (measured)
                    Op(OpName.SGLANG_FP4_INDEX_LOGITS_DECODE, "sglang-cuda-scorer", self.logits_decode,
                       "fp4_index_logits_decode; CUDA only"),
                    Op(OpName.SGLANG_FP4_INDEX_LOGITS_PAGED, "sglang-cuda-scorer", self.logits_paged,
                       "fp4_index_logits_paged; CUDA only"),
                ]
            self._ops = with_own_checks({op.name: op for op in table})
        return self._ops

    # -- quantizer -----------------------------------------------------------------------

    def quantize(self, x_bf16: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """x_bf16 [..., 128] -> (packed uint8 [..., 64], e8m0 uint8 [..., 4])."""
        bits = _bf16(x_bf16, "x_bf16", last=HEAD_DIM)
        k = self.kernels()
        with k.scope():
            x = self._bf16_tensor(bits.reshape(-1, HEAD_DIM))
            packed, words = k.quant.quantize_fp4_indexer_tensor(x, rne=self.rne)
            return _unpack_rows(packed, words, bits.shape[:-1])

    def quantize_rows(self, x_bf16: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """As ``quantize``, through the multi-row kernel sglang uses on Blackwell (>= 4096 rows)."""
        bits = _bf16(x_bf16, "x_bf16", last=HEAD_DIM)
        k = self.kernels()
        torch = _torch()
        rows = int(np.prod(bits.shape[:-1], dtype=np.int64))
        with k.scope():
            x = self._bf16_tensor(bits.reshape(-1, HEAD_DIM))
            packed = torch.empty((rows, ROW_BYTES), dtype=torch.int8, device=x.device)
            words = torch.empty((rows,), dtype=torch.int32, device=x.device)
            if rows:
                grid = (-(-rows // ROWS_BLOCK_M),)
                k.quant._quantize_fp4_indexer_rows[grid](
                    x, packed, words, rows, ROWS_BLOCK_M,
                    BLOCK_N=HEAD_DIM, GROUP_N=GROUP, RNE=self.rne, num_warps=4,
                )
            return _unpack_rows(packed, words, bits.shape[:-1])

    # -- 68-byte page writer and reader --------------------------------------------------

    def page68_store(self, k_bf16: np.ndarray, slots: np.ndarray, cache: np.ndarray) -> np.ndarray:
        """Quantize k rows and write them at ``slots`` of a [pages, page_size*68] cache copy."""
        bits = _bf16(k_bf16, "k_bf16", ndim=2, last=HEAD_DIM)
        buf = _uint8(cache, "cache", ndim=2)
        page_size = _page_size(buf)
        idx = _slots(slots, "slots", rows=bits.shape[0], limit=buf.shape[0] * page_size, unique=True)
        k = self.kernels()
        with k.scope():
            out = self._tensor(buf)
            k.page68.store_fp4_index_k_cache(
                self._bf16_tensor(bits), out, self._tensor(idx), page_size=page_size, rne=self.rne
            )
            return out.cpu().numpy()

    def page68_gather(self, cache: np.ndarray, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(packed uint8 [n, 64], e8m0 uint8 [n, 4]) read back from ``slots`` of the cache."""
        buf = _uint8(cache, "cache", ndim=2)
        page_size = _page_size(buf)
        idx = _slots(slots, "slots", limit=buf.shape[0] * page_size)
        k = self.kernels()
        with k.scope():
            payload, words = k.page68.gather_fp4_index_k(
                self._tensor(buf), self._tensor(idx), page_size=page_size
            )
            return _unpack_rows(payload, words, idx.shape)

    # -- AITER-layout split writer -------------------------------------------------------

    def split_store(
        self, k_bf16: np.ndarray, slots: np.ndarray, kv_cache: np.ndarray, kv_scale: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Write into copies of AITER's kv_cache [nb,1,4,64,16] and kv_scale [nb,1,4,64]."""
        return self._split(k_bf16, slots, kv_cache, kv_scale, page8=False)

    def page8_store(
        self, k_bf16: np.ndarray, slots: np.ndarray, kv_cache: np.ndarray, kv_scale: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """As ``split_store`` with page8=True: each 64-slot page holds eight 8-slot pages."""
        return self._split(k_bf16, slots, kv_cache, kv_scale, page8=True)

    def _split(
        self, k_bf16: np.ndarray, slots: np.ndarray, kv_cache: np.ndarray, kv_scale: np.ndarray,
        *, page8: bool,
    ) -> tuple[np.ndarray, np.ndarray]:
        bits = _bf16(k_bf16, "k_bf16", ndim=2, last=HEAD_DIM)
        payload = _uint8(kv_cache, "kv_cache", ndim=5)
        scale = _uint8(kv_scale, "kv_scale", ndim=4)
        nb = payload.shape[0]
        if payload.shape[1:] != (1, ROW_GROUPS, KV_BLOCK, 16):
            raise ValueError(f"kv_cache must have shape [num_blocks, 1, 4, 64, 16], got {payload.shape}")
        if scale.shape != (nb, 1, ROW_GROUPS, KV_BLOCK):
            raise ValueError(f"kv_scale must have shape [{nb}, 1, 4, 64] to match kv_cache, got {scale.shape}")
        idx = _slots(slots, "slots", rows=bits.shape[0], limit=nb * KV_BLOCK, unique=True)
        k = self.kernels()
        with k.scope():
            out_payload, out_scale = self._tensor(payload), self._tensor(scale)
            k.split.store_fp4_index_k_cache_split(
                self._bf16_tensor(bits), out_payload, out_scale, self._tensor(idx),
                page_size=KV_BLOCK, rne=self.rne, page8=page8,
            )
            return out_payload.cpu().numpy(), out_scale.cpu().numpy()

    # -- CUDA-only kernels ---------------------------------------------------------------

    def index_k_rope_pack(
        self, x_bf16: np.ndarray, freqs: np.ndarray, rope_dim: int, positions: np.ndarray | None = None,
        cache: np.ndarray | None = None, slots: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray] | np.ndarray:
        """RoPE on the last ``rope_dim`` dims, fake FP4 quantization, then the RNE pack.

        x_bf16 [T, 128] or [T, heads, 128]; freqs complex64 [F, rope_dim/2] (or float32
        [F, rope_dim/2, 2] as (cos, sin) pairs), one row per token, or per position when
        ``positions`` [T] is given. Returns (packed [rows, 64], e8m0 [rows, 4]) or, with
        ``cache`` [pages, page_size*68] and ``slots`` [T] (heads must be 1), the cache copy.
        """
        self._require_cuda(OpName.SGLANG_INDEX_K_ROPE_PACK)
        bits = _bf16(x_bf16, "x_bf16", last=HEAD_DIM)
        if bits.ndim not in (2, 3):
            raise ValueError(f"x_bf16 must be [T, 128] or [T, heads, 128], got shape {bits.shape}")
        if not isinstance(rope_dim, int) or isinstance(rope_dim, bool) or not 0 <= rope_dim <= HEAD_DIM or rope_dim % 2:
            raise ValueError(f"rope_dim must be an even int in [0, 128], got {rope_dim!r}")
        f = _freqs(freqs, rope_dim)
        tokens = bits.shape[0]
        pos = None
        if positions is not None:
            pos = _slots(positions, "positions", rows=tokens, limit=f.shape[0])
        elif f.shape[0] < tokens:
            raise ValueError(f"freqs must have a row per token ({tokens}) when positions is None, got {f.shape[0]}")
        if (cache is None) != (slots is None):
            raise ValueError("cache and slots must be given together")
        torch = _torch()
        k = self.kernels()
        with k.scope():
            x = self._bf16_tensor(bits)
            # rope_dim 0: an empty complex table (view_as_complex refuses the strides of an empty one)
            ft = (torch.view_as_complex(self._tensor(np.ascontiguousarray(f))) if rope_dim else
                  torch.zeros((f.shape[0], 0), dtype=torch.complex64, device=x.device))
            pt = None if pos is None else self._tensor(pos)
            if cache is None:
                packed, words = k.indexer.index_k_rope_pack(x, ft, rope_dim, positions=pt)
                return _unpack_rows(packed, words, (packed.shape[0],))
            if bits.ndim == 3 and bits.shape[1] != 1:
                raise ValueError(f"x_bf16 must have one head when cache is given, got {bits.shape[1]}")
            buf = _uint8(cache, "cache", ndim=2)
            page_size = _page_size(buf)
            idx = _slots(slots, "slots", rows=tokens, limit=buf.shape[0] * page_size, unique=True)
            out = self._tensor(buf)
            k.indexer.index_k_rope_pack(x, ft, rope_dim, positions=pt, cache=out, loc=self._tensor(idx))
            return out.cpu().numpy()

    def logits_decode(
        self, q_bf16: np.ndarray, weights_bf16: np.ndarray, slots: np.ndarray, lens: np.ndarray,
        table: np.ndarray,
    ) -> np.ndarray:
        """fp4_index_logits_decode: float32 [B, L], -inf at positions >= lens[b]."""
        self._require_cuda(OpName.SGLANG_FP4_INDEX_LOGITS_DECODE)
        q, w = _query(q_bf16, weights_bf16)
        buf = _uint8(table, "table", ndim=2)
        page_size = _page_size(buf, name="table")
        s = _int_array(slots, "slots", ndim=2)
        if s.shape[0] != q.shape[0]:
            raise ValueError(f"slots must have {q.shape[0]} rows (q's batch), got {s.shape[0]}")
        n = _int_array(lens, "lens", ndim=1)
        if n.shape[0] != q.shape[0]:
            raise ValueError(f"lens must have {q.shape[0]} entries, got {n.shape[0]}")
        visible = np.arange(s.shape[1])[None, :] < np.minimum(n, s.shape[1])[:, None]
        _check_range(s[visible], "slots (visible positions)", buf.shape[0] * page_size)
        k = self.kernels()
        with k.scope():
            out = k.indexer.fp4_index_logits_decode(
                self._bf16_tensor(q), self._bf16_tensor(w), self._tensor(s.astype(np.int64)),
                self._tensor(n.astype(np.int64)), self._tensor(buf), page_size,
            )
            return out.cpu().numpy()

    def logits_paged(
        self, q_bf16: np.ndarray, weights_bf16: np.ndarray, req: np.ndarray, req_table: np.ndarray,
        lens: np.ndarray, table: np.ndarray, max_len: int, ratio: int,
        candidate_mask: np.ndarray | None = None,
    ) -> np.ndarray:
        """fp4_index_logits_paged: float32 [B, max_len]; only columns < min(lens[b], max_len)
        are defined (the rest keep the loader's NaN poison or get -inf up to the tile end)."""
        self._require_cuda(OpName.SGLANG_FP4_INDEX_LOGITS_PAGED)
        q, w = _query(q_bf16, weights_bf16)
        buf = _uint8(table, "table", ndim=2)
        page_size = _page_size(buf, name="table")
        r = _int_array(req, "req", ndim=1)
        rt = _int_array(req_table, "req_table", ndim=2)
        n = _int_array(lens, "lens", ndim=1)
        batch = q.shape[0]
        if r.shape[0] != batch or n.shape[0] != batch:
            raise ValueError(f"req and lens must have {batch} entries (q's batch)")
        if ratio not in (1, 2):
            raise ValueError(f"ratio must be 1 or 2, got {ratio!r}")
        if not isinstance(max_len, int) or isinstance(max_len, bool) or not 0 <= max_len <= rt.shape[1] // ratio:
            raise ValueError(f"max_len must be an int in [0, {rt.shape[1] // ratio}], got {max_len!r}")
        _check_range(r, "req", rt.shape[0])
        mask = None
        if candidate_mask is not None:
            if not isinstance(candidate_mask, np.ndarray) or candidate_mask.dtype != np.bool_:
                raise TypeError("candidate_mask must be a bool numpy array")
            if candidate_mask.ndim != 2 or candidate_mask.shape[0] < batch or candidate_mask.shape[1] < max_len:
                raise ValueError(f"candidate_mask must be [>= {batch}, >= {max_len}], got {candidate_mask.shape}")
            mask = candidate_mask
        k = self.kernels()
        with k.scope():
            out = k.indexer.fp4_index_logits_paged(
                self._bf16_tensor(q), self._bf16_tensor(w), self._tensor(r.astype(np.int64)),
                self._tensor(rt), self._tensor(n.astype(np.int64)), self._tensor(buf), page_size,
                max_len, ratio, None if mask is None else self._tensor(mask),
            )
            return out.cpu().numpy()

    # -- helpers -------------------------------------------------------------------------

    def _require_cuda(self, op: str) -> None:
        if self.device != "cuda":
            raise RuntimeError(f"{op} needs device='cuda': {GPU_ONLY[op]}")

    def _tensor(self, array: np.ndarray) -> Any:
        return to_torch(array, self.device, copy=True)

    def _bf16_tensor(self, bits: np.ndarray) -> Any:
        return to_torch(bits, self.device, bf16=True, copy=True)


def backends(device: str = "cpu") -> list[SglangTritonBackend]:
    """Both sglang backends for one device: threshold rounding first, then rne=True."""
    return [SglangTritonBackend(device), SglangTritonBackend(device, rne=True)]


# -- module-level helpers (validation with the argument's name, conversions) --------------

def _torch() -> Any:
    import torch

    return torch


def _cuda_problem() -> str | None:
    torch = _torch()
    if not torch.cuda.is_available():
        return "device='cuda' but torch sees no CUDA device"
    if torch.version.hip is not None:
        return "device='cuda' is a ROCm device; sglang runs these Triton kernels on NVIDIA only"
    return None


def _bf16(x: object, name: str, *, ndim: int | None = None, last: int | None = None) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy array of bf16 (uint16 bit patterns or ml_dtypes.bfloat16), got {type(x).__name__}")
    if x.dtype == np.uint16:
        bits = x
    elif x.dtype.name == "bfloat16" and x.dtype.itemsize == 2:
        bits = x.view(np.uint16)
    else:
        raise TypeError(f"{name} must hold bf16 as uint16 bit patterns or ml_dtypes.bfloat16, got dtype {x.dtype}")
    if ndim is not None and bits.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {bits.shape}")
    if bits.ndim == 0 or (last is not None and bits.shape[-1] != last):
        raise ValueError(f"{name} must have a last dimension of {last}, got shape {bits.shape}")
    return bits


def _uint8(x: object, name: str, *, ndim: int) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a uint8 numpy array, got {type(x).__name__}")
    if x.dtype != np.uint8:
        raise TypeError(f"{name} must have dtype uint8, got {x.dtype}")
    if x.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {x.shape}")
    return x


def _int_array(x: object, name: str, *, ndim: int) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be an integer numpy array, got {type(x).__name__}")
    if x.dtype.kind not in "iu":
        raise TypeError(f"{name} must have an integer dtype, got {x.dtype}")
    if x.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {x.shape}")
    return x


def _check_range(values: np.ndarray, name: str, limit: int) -> None:
    if values.size and (values.min() < 0 or values.max() >= limit):
        raise OutsideContract(
            f"{name} must lie in [0, {limit}), got values in [{values.min()}, {values.max()}]; "
            "the kernel has no bounds check (a negative or large slot writes outside the buffer)"
        )


def _slots(x: object, name: str, *, limit: int, rows: int | None = None, unique: bool = False) -> np.ndarray:
    s = _int_array(x, name, ndim=1)
    if rows is not None and s.shape[0] != rows:
        raise ValueError(f"{name} must have one entry per row ({rows}), got {s.shape[0]}")
    _check_range(s, name, limit)
    if unique and np.unique(s).size != s.size:
        raise ValueError(f"{name} must be distinct: the kernel's writes to a repeated slot race on a GPU")
    return s.astype(np.int64)


def _page_size(buf: np.ndarray, name: str = "cache") -> int:
    width = buf.shape[1]
    if width == 0 or width % TOKEN_BYTES:
        raise ValueError(f"{name} must be [pages, page_size*68] with page_size > 0, got shape {buf.shape}")
    return width // TOKEN_BYTES


def _freqs(freqs: object, rope_dim: int) -> np.ndarray:
    """freqs as float32 [F, rope_dim/2, 2] (real, imaginary)."""
    if not isinstance(freqs, np.ndarray):
        raise TypeError(f"freqs must be a numpy array, got {type(freqs).__name__}")
    if freqs.dtype == np.complex64:
        f = np.stack([freqs.real, freqs.imag], axis=-1).astype(np.float32)
    elif freqs.dtype == np.float32 and freqs.ndim == 3 and freqs.shape[-1] == 2:
        f = freqs
    else:
        raise TypeError(f"freqs must be complex64 [F, rope_dim/2] or float32 [F, rope_dim/2, 2], got {freqs.dtype} {freqs.shape}")
    if f.ndim != 3 or f.shape[1] != rope_dim // 2:
        raise ValueError(f"freqs must have rope_dim/2 = {rope_dim // 2} columns, got shape {freqs.shape}")
    return f


def _query(q_bf16: np.ndarray, weights_bf16: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    q = _bf16(q_bf16, "q_bf16", ndim=3, last=HEAD_DIM)
    heads = q.shape[1]
    if heads < 16 or heads & (heads - 1):
        raise ValueError(f"q_bf16 heads must be a power of two >= 16 (tl.arange, tl.dot), got {heads}")
    w = _bf16(weights_bf16, "weights_bf16", ndim=2)
    if w.shape != q.shape[:2]:
        raise ValueError(f"weights_bf16 must have shape {q.shape[:2]}, got {w.shape}")
    return q, w


def _unpack_rows(packed: Any, words: Any, lead: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """sglang's (int8 [n, 64], int32 [n] with group g in byte g) -> uint8 arrays [..., 64], [..., 4]."""
    p = packed.cpu().numpy().view(np.uint8).reshape(*lead, ROW_BYTES)
    w = words.cpu().numpy().astype("<i4").view(np.uint8).reshape(*lead, ROW_GROUPS)
    return p.copy(), w.copy()

