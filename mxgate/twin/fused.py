"""quantize_mx in one Triton pass: read each group once, write its packed codes and byte.

Every bit is decided by integer operations, so the kernel leaves nothing to the compiler's
floating-point choices (contraction, flushed subnormals, canonical NaNs):
  * amax: the largest magnitude bit pattern of the group (NaN elements zeroed where the
    profile's reductions skip them);
  * the e8m0 byte: bisection in the profile's segment table (``scale_table``);
  * x / 2^(byte - 127): an exact power-of-two scaling done on the bits with IEEE
    round-to-nearest-even into the subnormals, overflow to Inf, NaN quieted, and the profile's
    rule for a NaN scale;
  * the E2M1 code: the profile's rounding table at the oracle's index (``rounding``).
Tests compare it with the oracle byte for byte (under the interpreter on the CPU, compiled on
a GPU).
"""

from __future__ import annotations

import torch

from mxgate.oracle import profiles as _profiles
from mxgate.twin._check import as_float32, check_group
from mxgate.twin.formats import e2m1
from mxgate.twin.scale_table import segments

BLOCK_GROUPS = 64  # groups per program

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised where triton is absent
    triton = None


def unavailable(x: object, group: int) -> str | None:
    """Why the fused kernel cannot take this call (None: it can)."""
    if triton is None:
        return "triton is not installed"
    if not isinstance(x, torch.Tensor):
        return "x is not a torch tensor"
    if x.dtype not in (torch.float32, torch.bfloat16):
        return f"x has dtype {x.dtype} (the kernel reads float32 or bfloat16)"
    if not isinstance(group, int) or group < 2 or group & (group - 1) or group > 1024:
        return f"group {group!r} is not a power of two in [2, 1024]"
    wanted = "compiled" if x.device.type == "cuda" else "interpret"
    if mode() != wanted:
        return (f"x is on {x.device} and triton runs {mode()} in this process "
                "(CUDA tensors need compiled Triton; CPU tensors the interpreter, TRITON_INTERPRET=1 "
                "before triton is first imported)")
    return None


if triton is not None:

    @triton.jit
    def _scale_bits(u, d, NAN_SCALE_IS_NAN: tl.constexpr, byte):
        """Bits of fl32(x * 2^d) for x's bits u (int32) and d in [-128, 127], IEEE RNE."""
        sign = u & -0x80000000
        mag = u & 0x7FFFFFFF
        field = (mag >> 23) & 0xFF
        mant = mag & 0x7FFFFF
        special = field == 0xFF
        is_nan = special & (mant != 0)
        # value = sig * 2^(e - 150) with sig < 2^24 and e >= 1 (subnormals: e = 1)
        sig = tl.where(field == 0, mant, mant | 0x800000)
        e = tl.where(field == 0, 1, field)
        # normalise a subnormal: the leading bit position from an exact int -> float conversion
        top = ((sig.to(tl.float32).to(tl.int32, bitcast=True) >> 23) & 0xFF) - 127
        lz = tl.where(sig > 0, 23 - top, 0)
        lz = tl.where(lz < 0, 0, lz)
        sig = sig << lz
        e = e + d - lz
        normal_bits = sign | (e << 23) | (sig & 0x7FFFFF)
        shift = 1 - e  # >= 1 where the result is subnormal
        shift_c = tl.where(shift > 25, 25, tl.where(shift < 1, 1, shift))
        q = sig >> shift_c
        rem = sig & ((1 << shift_c) - 1)
        half = 1 << (shift_c - 1)
        up = (rem > half) | ((rem == half) & ((q & 1) == 1))
        sub_bits = sign | (q + up.to(tl.int32))
        out = tl.where(e >= 1, normal_bits, sub_bits)
        out = tl.where(e >= 255, sign | 0x7F800000, out)
        out = tl.where(mag == 0, u, out)
        out = tl.where(special, tl.where(is_nan, u | 0x400000, u), out)
        if NAN_SCALE_IS_NAN:
            nan_scaled = tl.where(is_nan, u | 0x400000, 0x7FC00000)
            out = tl.where(byte == 255, nan_scaled, out)
        return out

    @triton.jit
    def _scaled(u, d, byte, NAN_SCALE_IS_NAN: tl.constexpr, NEEDS_GENERAL: tl.constexpr):
        """_scale_bits, by the exponent-field shortcut wherever the input and the result are
        normal (or zero, Inf, NaN); the general rounding runs only when NEEDS_GENERAL."""
        field = (u >> 23) & 0xFF
        e = field + d
        y = u + (d << 23)  # normal in, normal out: only the exponent field moves
        y = tl.where((u & 0x7FFFFFFF) == 0, u, y)
        y = tl.where((e >= 255) & (field != 0xFF), (u & -0x80000000) | 0x7F800000, y)
        special = field == 0xFF
        y = tl.where(special, tl.where((u & 0x7FFFFF) != 0, u | 0x400000, u), y)
        if NAN_SCALE_IS_NAN:
            y = tl.where(byte == 255, tl.where((u & 0x7FFFFFFF) > 0x7F800000, u | 0x400000, 0x7FC00000), y)
        if NEEDS_GENERAL:
            y = tl.where(((field == 0) & ((u & 0x7FFFFF) != 0)) | ((field != 0) & (e <= 0)),
                         _scale_bits(u, d, NAN_SCALE_IS_NAN, byte), y)
        return y

    @triton.jit
    def _general_needed(u, d):
        """Whether any element is subnormal, or becomes one (the shortcut does not cover it)."""
        field = (u >> 23) & 0xFF
        slow = ((field == 0) & ((u & 0x7FFFFF) != 0)) | ((field != 0) & (field + d <= 0))
        return tl.max(tl.max(slow.to(tl.int32), axis=1), axis=0) > 0

    @triton.jit
    def _code(y, table_ptr):
        index = ((y >> 20) & 0xFFF) | ((y & 0xFFFFF) != 0).to(tl.int32)
        return tl.load(table_ptr + index)

    @triton.jit
    def _quantize_mx_kernel(x_ptr, packed_ptr, scale_ptr, table_ptr, starts_ptr, values_ptr, n_groups,
                            GROUP: tl.constexpr, BLOCK: tl.constexpr, IS_BF16: tl.constexpr,
                            IGNORE_NAN: tl.constexpr, NAN_SCALE_IS_NAN: tl.constexpr):
        HALF: tl.constexpr = GROUP // 2
        pid = tl.program_id(0)
        g = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)[:, None]
        j = tl.arange(0, HALF)[None, :]
        mask = g < n_groups
        # each word holds an (even, odd) element pair, little-endian: even in the low half
        w = tl.load(x_ptr + g * HALF + j, mask=mask, other=0)
        if IS_BF16:
            lo = (w & 0xFFFF) << 16
            hi = w & -0x10000
        else:
            lo = w.to(tl.int32)  # truncation keeps the low word
            hi = (w >> 32).to(tl.int32)
        mlo = lo & 0x7FFFFFFF
        mhi = hi & 0x7FFFFFFF
        if IGNORE_NAN:
            mlo = tl.where(mlo > 0x7F800000, 0, mlo)
            mhi = tl.where(mhi > 0x7F800000, 0, mhi)
        amax = tl.max(tl.maximum(mlo, mhi), axis=1)
        # bisection in the segment table: the last segment starting at or below amax
        a64 = amax.to(tl.int64)
        seg = tl.zeros_like(amax)
        for k in tl.static_range(9):
            cand = seg + (256 >> k)
            seg = tl.where(tl.load(starts_ptr + cand) <= a64, cand, seg)
        b = tl.load(values_ptr + seg).to(tl.int32)
        byte = b[:, None]
        d = tl.where(byte == 255, -128, 127 - byte)
        if _general_needed(lo, d) | _general_needed(hi, d):
            y_lo = _scaled(lo, d, byte, NAN_SCALE_IS_NAN, True)
            y_hi = _scaled(hi, d, byte, NAN_SCALE_IS_NAN, True)
        else:
            y_lo = _scaled(lo, d, byte, NAN_SCALE_IS_NAN, False)
            y_hi = _scaled(hi, d, byte, NAN_SCALE_IS_NAN, False)
        packed = _code(y_lo, table_ptr) | (_code(y_hi, table_ptr) << 4)
        tl.store(packed_ptr + g * HALF + j, packed, mask=mask)
        gs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        tl.store(scale_ptr + gs, b.to(tl.uint8), mask=gs < n_groups)

    @triton.jit
    def _scale_bits_kernel(u_ptr, d_ptr, out_ptr, n, NAN_SCALE_IS_NAN: tl.constexpr, BLOCK: tl.constexpr):
        """Test entry: out = _scaled(u, d) elementwise (d = -128 stands for byte 255)."""
        i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        m = i < n
        u = tl.load(u_ptr + i, mask=m, other=0)[None, :]
        d = tl.load(d_ptr + i, mask=m, other=0)[None, :]
        byte = tl.where(d == -128, 255, 127 - d)
        if _general_needed(u, d):
            y = _scaled(u, d, byte, NAN_SCALE_IS_NAN, True)
        else:
            y = _scaled(u, d, byte, NAN_SCALE_IS_NAN, False)
        tl.store(out_ptr + i[None, :], y, mask=m[None, :])


def scale_bits(u: torch.Tensor, d: torch.Tensor, nan_scale_is_nan: bool) -> torch.Tensor:
    """The kernel's x * 2^d on int32 patterns u and int32 exponents d (for tests)."""
    out = torch.empty_like(u)
    block = 1024
    _scale_bits_kernel[(triton.cdiv(u.numel(), block),)](u.contiguous(), d.contiguous(), out, u.numel(),
                                                         NAN_SCALE_IS_NAN=nan_scale_is_nan, BLOCK=block)
    return out


def mode() -> str | None:
    """How this process runs Triton: "interpret" (TRITON_INTERPRET=1 when triton was first
    imported: CPU tensors), "compiled" (CUDA tensors), None without triton."""
    if triton is None:
        return None
    from mxgate.kernels.sglang_loader import triton_mode

    return triton_mode()


def quantize_mx(x: torch.Tensor, profile: str | _profiles.Profile = "gfx950", group: int = 32, *,
                block_groups: int = BLOCK_GROUPS, num_warps: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """The oracle's quantize_mx in one kernel launch (float32 or bf16 x, group a power of two).

    block_groups (groups per program, a power of two) and num_warps only change the speed."""
    p = _profiles.get(profile)
    if x.dtype not in (torch.float32, torch.bfloat16):
        as_float32(x, "x")  # the oracle's TypeError for a wrong dtype
    if x.dim() == 0:
        raise ValueError("x must have at least one dimension")
    check_group(x.shape[-1], group, "x")
    reason = unavailable(x, group)
    if reason is not None:
        raise RuntimeError(f"fused quantize_mx cannot run here: {reason}")
    n = x.shape[-1]
    flat = x.contiguous().reshape(-1)
    n_groups = flat.numel() // group
    words = _word_view(flat, torch.int32 if x.dtype == torch.bfloat16 else torch.int64)
    packed = torch.empty((n_groups, group // 2), dtype=torch.uint8, device=x.device)
    scales = torch.empty(n_groups, dtype=torch.uint8, device=x.device)
    if n_groups:
        table = e2m1.table(p, x.device)
        starts, values = segments(p, x.device)
        grid = (triton.cdiv(n_groups, block_groups),)
        _quantize_mx_kernel[grid](words, packed, scales, table, starts, values, n_groups, GROUP=group,
                                  BLOCK=block_groups, IS_BF16=x.dtype == torch.bfloat16,
                                  IGNORE_NAN=p.amax_nan == "ignore", NAN_SCALE_IS_NAN=p.nan_scale == "nan",
                                  num_warps=num_warps)
    lead = tuple(x.shape[:-1])
    return packed.reshape(lead + (n // 2,)), scales.reshape(lead + (n // group,))


def _word_view(flat: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Element pairs as one word each (copied first when the data is not aligned to the word)."""
    if flat.data_ptr() % (2 * flat.element_size()):
        flat = flat.clone()
    return flat.view(dtype)
