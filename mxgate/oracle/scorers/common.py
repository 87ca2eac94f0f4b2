"""What the scorer oracles share: the result type, the qk accumulation and bound model names,
and the input checks with the kernels' host-check rules.

Every check raises ``TypeError`` (wrong type or dtype) or ``ValueError`` (wrong shape or value)
naming the argument, in the "<name> must ..." form used across mxgate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

# the shared checks; the scorers call flag, allocation and shown through this module (v.flag)
from mxgate.oracle.arguments import BF16_NAME, allocation, flag, integer, is_tensor, real, shown  # noqa: F401
from mxgate.oracle.arguments import choice as _choice
from mxgate.oracle.xp import device, namespace, to_numpy
from mxgate.oracle.formats import e2m1
from mxgate.oracle.geometry import KV_BLOCK, TILE_K

MFMA_M = 16  # heads per MFMA tile
TWO_E2M1 = (2.0 * e2m1.VALUES).astype(np.float32)  # code -> 2 * value, integers in [-12, 12]
MAX_HEADS = 128  # the kernels hold at most 8 MFMA tiles of heads

# qk accumulation inside the MFMA (the emulated order) and the qk models a bound may assume.
# "fp32-ksteps": each 128-dim K step exact, rounded once into the float32 accumulator (for
# head_dim 128 that is fl(qk)); "fp32-groups": each 32-dim group exact, rounded, summed left to
# right; "any-order" (bounds only): every product exact, summed in any float32 order.
KSTEPS = "fp32-ksteps"
GROUPS = "fp32-groups"
ANY_ORDER = "any-order"
QK_ACCUM = (KSTEPS, GROUPS)
QK_MODELS = (GROUPS, KSTEPS, ANY_ORDER)


@dataclass(frozen=True)
class ScoredLogits:
    """The oracle's answer for one scorer call, [rows, max_seq_len] each.

    value:    float64 value of the real-number result (float64 presentation), -inf outside the
              window.
    bound:    float64 rigorous bound on |fp32 result - value| (0 outside the window; +inf where
              no finite claim is made).
    window:   bool, the cells the kernel writes.
    emulated: float32 emulated order (-inf outside the window), or None when not asked for.

    NumPy arrays for NumPy inputs; tensors on the inputs' device for tensor inputs. A backend's
    output is judged against it by ``mxgate.conformance.judge.compare_logits``.
    """

    value: np.ndarray
    bound: np.ndarray
    window: np.ndarray
    emulated: np.ndarray | None
    qk_accum: str = KSTEPS
    bound_model: str = GROUPS


def array(x: object, name: str) -> Any:
    """A NumPy array or a tensor (tensors are checked by the same rules, dtypes by name)."""
    if not isinstance(x, np.ndarray) and not is_tensor(x):
        raise TypeError(f"{name} must be a numpy array, got {type(x).__name__}")
    return x


def dtype_name(a: Any) -> str:
    """The dtype as NumPy spells it (a tensor's without the ``torch.`` prefix)."""
    return str(a.dtype).removeprefix("torch.")


def uint8(x: object, name: str) -> Any:
    a = array(x, name)
    if dtype_name(a) != "uint8":
        raise TypeError(f"{name} must have dtype uint8, got {dtype_name(a)}")
    return a


_INTEGER_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def integers(x: object, name: str, ndim: int) -> np.ndarray:
    """Index-like integers (lengths, block tables): their values are read on the host, so a
    tensor comes back as an int64 NumPy array."""
    a = array(x, name)
    if dtype_name(a) not in _INTEGER_DTYPES:
        raise TypeError(f"{name} must have an integer dtype (int32), got {dtype_name(a)}")
    if a.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {tuple(a.shape)}")
    return to_numpy(a).astype(np.int64)


def bf16_bits(x: object, name: str) -> Any:
    """bf16 given as ml_dtypes.bfloat16 or raw uint16 bit patterns (a tensor: bfloat16 or
    uint16) -> uint16 bits (a tensor's as int16 with the same bits)."""
    a = array(x, name)
    if is_tensor(a):
        if dtype_name(a) in ("bfloat16", "uint16"):
            return a.view(namespace(a).int16)
        raise TypeError(f"{name} must be bfloat16 (ml_dtypes.bfloat16 or uint16 bit patterns), got {dtype_name(a)}")
    if a.dtype.name == BF16_NAME:
        return a.view(np.uint16)
    if a.dtype == np.uint16:
        return a
    raise TypeError(f"{name} must be bfloat16 (ml_dtypes.bfloat16 or uint16 bit patterns), got {a.dtype}")


def float32(x: object, name: str) -> Any:
    a = array(x, name)
    if dtype_name(a) != "float32":
        raise TypeError(f"{name} must have dtype float32, got {dtype_name(a)}")
    return a


def real_f32(value: object, name: str) -> np.float32:
    """A finite Python/NumPy real, rounded to float32 as the kernels' hosts pass it."""
    return real(value, name)


def positive_int(value: object, name: str, minimum: int = 1) -> int:
    return integer(value, name, minimum=minimum)


def check_heads_dim(heads: int, head_dim: int) -> None:
    if head_dim <= 0 or head_dim % TILE_K:
        raise ValueError(f"head_dim must be a positive multiple of {TILE_K}, got {head_dim}")
    if heads <= 0 or heads % MFMA_M:
        raise ValueError(f"heads must be a multiple of {MFMA_M}, got {heads}")
    if heads > MAX_HEADS:
        raise ValueError(f"heads must be <= {MAX_HEADS} (m_tiles <= 8), got {heads}")


def fp4_q(q_fp4: object, q_scale: object, next_n: int | None) -> tuple[np.ndarray, np.ndarray, int, int]:
    """q_fp4 [B, next_n, H, D/2] or [B*next_n, H, D/2]; q_scale [B, next_n, k_tiles, 4, 16,
    QS_PAD] or [B*next_n, k_tiles, 4, 16, QS_PAD]. -> (q [rows, H, D/2], qs [rows, ...], rows,
    next_n or 0 when not implied)."""
    q = uint8(q_fp4, "q_fp4")
    qs = uint8(q_scale, "q_scale")
    if next_n is not None:
        next_n = integer(next_n, "next_n", minimum=1)
    if q.ndim == 4:
        implied = q.shape[1]
        if next_n is not None and next_n != implied:
            raise ValueError(f"next_n={next_n} does not match q_fp4.shape[1]={implied}")
        q = q.reshape(q.shape[0] * q.shape[1], q.shape[2], q.shape[3])
        if qs.ndim == 6:
            qs = qs.reshape((qs.shape[0] * qs.shape[1],) + qs.shape[2:])
        next_n = implied
    elif q.ndim != 3:
        raise ValueError(f"q_fp4 must have shape [B, next_n, H, D/2] or [B*next_n, H, D/2], got {tuple(q.shape)}")
    rows, heads, half = q.shape
    check_heads_dim(heads, 2 * half)
    k_tiles = 2 * half // TILE_K
    qs_pad = -(-(heads // MFMA_M) // 4) * 4
    want = (rows, k_tiles, 4, MFMA_M, qs_pad)
    if qs.shape != want:
        raise ValueError(f"q_scale must have shape {want} ([rows, k_tiles, 4, 16, QS_PAD], QS_PAD = "
                         f"round_up(H/16, 4)) for q_fp4 {tuple(q.shape)}, got {tuple(qs.shape)}")
    return q, qs, rows, next_n or 0


def fp4_kv(kv_cache: object, kv_scale: object, head_dim: int) -> int:
    kv = uint8(kv_cache, "kv_cache")
    ks = uint8(kv_scale, "kv_scale")
    if kv.ndim != 5 or kv.shape[2] != 4 or kv.shape[4] != 16:
        raise ValueError(f"kv_cache must have shape [num_blocks, k_tiles, 4, kv_block_size, 16], got {tuple(kv.shape)}")
    if kv.shape[3] != KV_BLOCK:
        raise ValueError(f"kv_block_size must be {KV_BLOCK} (kv_cache.size(3)), got {kv.shape[3]}")
    if kv.shape[1] * TILE_K != head_dim:
        raise ValueError(f"kv_cache k_tiles={kv.shape[1]} does not match head_dim={head_dim} of q_fp4")
    want = tuple(kv.shape[:4])
    if ks.shape != want:
        raise ValueError(f"kv_scale must have shape {want} ([num_blocks, k_tiles, 4, 64]), got {tuple(ks.shape)}")
    return kv.shape[0]


def weights_bf16(weights: object, rows: int, heads: int) -> np.ndarray:
    w = bf16_bits(weights, "weights")
    if w.shape != (rows, heads):
        raise ValueError(f"weights must have shape ({rows}, {heads}) ([rows, H]), got {tuple(w.shape)}")
    return w


def block_coverage(block_tables: np.ndarray, batch_of_row: np.ndarray, first: np.ndarray,
                   end: np.ndarray, num_blocks: int) -> None:
    """Every block a row's window [first, end) touches must be a valid block index."""
    bt = block_tables
    max_blocks = bt.shape[1]
    need = -(-end // KV_BLOCK)
    if need.size and need.max() > max_blocks:
        r = int(np.argmax(need))
        raise ValueError(f"block_tables has {max_blocks} columns but row {r} scores tokens up to "
                         f"{int(end[r])}, which needs {int(need[r])} blocks of {KV_BLOCK}")
    for b in np.unique(batch_of_row):
        mine = batch_of_row == b
        lo = int((first[mine] // KV_BLOCK).min())
        hi = int(need[mine].max())
        if hi <= lo:
            continue
        used = bt[b, lo:hi]
        bad = (used < 0) | (used >= num_blocks)
        if bad.any():
            j = lo + int(np.argmax(bad))
            raise ValueError(f"block_tables[{b}, {j}] = {int(bt[b, j])} is not a block index in "
                             f"[0, {num_blocks}) (num_blocks = kv_cache.size(0))")


def out_buffer(out: object, rows: int, width: int, name: str = "out") -> Any:
    o = float32(out, name)
    if tuple(o.shape) != (rows, width):
        raise ValueError(f"{name} must have shape ({rows}, {width}) ([rows, max_seq_len]), got {tuple(o.shape)}")
    writable = o.is_contiguous() if is_tensor(o) else o.flags.c_contiguous and o.flags.writeable
    if not writable:
        raise ValueError(f"{name} must be C-contiguous and writeable (written in place)")
    return o


def seq_len(max_seq_len: object, out: object) -> int:
    if max_seq_len is None:
        if (isinstance(out, np.ndarray) or is_tensor(out)) and out.ndim == 2:
            return out.shape[1]
        raise TypeError("max_seq_len must be given (or out, whose width it is)")
    return positive_int(max_seq_len, "max_seq_len", minimum=0)


def one_device(large: dict[str, object], first: str, small: dict[str, object] | None = None) -> Any:
    """The device of ``first`` (None for a NumPy call). Once a large argument is a tensor, every
    large one must be (the scorer computes on them), and every tensor must be on one device;
    the small ones (lengths, tables) may be host arrays."""
    if not any(is_tensor(a) for a in large.values()):
        return None
    for name, a in large.items():
        if not is_tensor(a):
            raise TypeError(f"{name} must be a torch tensor, got {type(a).__name__}")
    devices = {name: device(a) for name, a in {**large, **(small or {})}.items() if is_tensor(a)}
    want = devices.get(first, next(iter(devices.values())))
    for name, dev in devices.items():
        if dev != want:
            raise ValueError(f"{name} must be on the device of {first} ({want}), got {dev}")
    return want


def choice(value: object, name: str, choices: tuple[str, ...]) -> str:
    return _choice(value, name, choices)  # type: ignore[return-value]
