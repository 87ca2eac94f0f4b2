"""quantize_mx in one Triton pass: read each group once, write its packed codes and byte.

Every bit but one multiply is decided by integer operations, so the kernel leaves nothing to
the compiler's floating-point choices (contraction, canonical NaNs):
  * amax: the largest magnitude bit pattern of the group (NaN elements zeroed where the
    profile's reductions skip them);
  * the e8m0 byte: the profile's step table (``scale_table``), one gather per group where each
    binade holds at most one step (every shipped profile), else bisection;
  * x / 2^(byte - 127): one IEEE multiply by the exact power of two, correctly rounded into the
    subnormals (an Inf stays that Inf), with NaN settled on the bits and the profile's rules
    for byte 0 (``scale0_divisor``) and byte 255 (``nan_scale``);
  * the E2M1 code: the oracle's rounding table at the oracle's index (``oracle.rounding``).
Tests compare it with the oracle byte for byte (under the interpreter on the CPU, compiled on
a GPU).
"""

from __future__ import annotations

import sys

import torch

from mxgate.oracle import profiles as _profiles
from mxgate.oracle.arguments import as_float32, check_group
from mxgate.oracle.formats import e2m1
from mxgate.oracle.xp import table_on
from mxgate.twin.scale_table import binades, segments

# (groups per program, warps) for float32 and bf16 x: the fastest launch shapes tried on an H200
# (docs/results/h200-2026-12-02-bandwidth.md)
LAUNCH = {torch.float32: (32, 4), torch.bfloat16: (64, 2)}
# under the interpreter every program is a Python loop step over NumPy arrays: larger programs
# run fewer of them (the interpreter test of this kernel: 14.9 s and 13.9 s with the card's
# shapes, 12.5 s and 11.5 s with 128 groups)
INTERPRETER_LAUNCH = (128, 4)
# the exponent d of the factor 2^d that byte 0 multiplies by, per scale0_divisor (the oracle's
# e8m0_divisor_reciprocals): 2^127, 2^126 or 1
BYTE0_EXPONENT = {"pow2": 127, "min_normal": 126, "one": 0}



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
    def _scaled(u, d, byte, NAN_SCALE_IS_NAN: tl.constexpr, NAN_SCALE_IS_INF: tl.constexpr):
        """Bits of x * 2^d for x's bits u (int32) and d in [-128, 127], the profile's NaN rules.

        One IEEE float32 multiply by the exact power of two 2^d (a normal or subnormal factor):
        correctly rounded, into the subnormals too, since the compiled kernel keeps subnormal
        operands and results (no flush to zero) and nothing is contracted with it. An Inf input
        times the nonzero factor is that Inf; a NaN input is settled on the bits, where a
        device's canonical NaN would drop its sign."""
        factor = tl.where(d >= -126, (d + 127) << 23, 0x00800000 >> (-126 - d))
        y = (u.to(tl.float32, bitcast=True) * factor.to(tl.float32, bitcast=True)).to(tl.int32, bitcast=True)
        # three integer operations per element where an Inf test took four more: the kernel is
        # bound by its integer work
        nan = (u & 0x7FFFFFFF) > 0x7F800000
        y = tl.where(nan, u | 0x400000, y)
        if NAN_SCALE_IS_NAN:
            y = tl.where(byte == 255, tl.where(nan, u | 0x400000, 0x7FC00000), y)
        if NAN_SCALE_IS_INF:
            # x / +Inf: a zero of x's sign; an Inf x gives x86's default NaN 0xFFC00000
            zero_or_nan = tl.where((u & 0x7FFFFFFF) == 0x7F800000, -0x400000, u & -0x80000000)
            y = tl.where(byte == 255, tl.where(nan, y, zero_or_nan), y)
        return y

    @triton.jit
    def _scale_byte(amax, starts_ptr, values_ptr, binades_ptr, BY_BINADE: tl.constexpr):
        """The e8m0 byte of int32 amax patterns from the profile's step table (``scale_table``)."""
        if BY_BINADE:
            # one gather: the binade's (first pattern of its upper step, upper byte, lower byte)
            entry = tl.load(binades_ptr + (amax >> 23))
            upper = amax.to(tl.int64) >= (entry >> 16)
            b = tl.where(upper, (entry >> 8) & 0xFF, entry & 0xFF).to(tl.int32)
        else:
            # bisection: the last segment starting at or below amax
            a64 = amax.to(tl.int64)
            seg = tl.zeros_like(amax)
            for k in tl.static_range(9):
                cand = seg + (256 >> k)
                seg = tl.where(tl.load(starts_ptr + cand) <= a64, cand, seg)
            b = tl.load(values_ptr + seg).to(tl.int32)
        return b

    @triton.jit
    def _code(y, table_ptr):
        # the oracle's index: the top 12 bits with the lowest OR'd with "any lower bit set" --
        # (y & M) + M carries into bit 20 exactly when a bit under it is set (rounding.lookup's
        # trick), and the unsigned shift drops the rest: three integer operations and the shift
        sticky = (y & 0xFFFFF) + 0xFFFFF
        index = (y | sticky).to(tl.uint32, bitcast=True) >> 20
        return tl.load(table_ptr + index)

    @triton.jit
    def _quantize_mx_kernel(x_ptr, packed_ptr, scale_ptr, table_ptr, starts_ptr, values_ptr, binades_ptr, n_groups,
                            GROUP: tl.constexpr, BLOCK: tl.constexpr, IS_BF16: tl.constexpr,
                            IGNORE_NAN: tl.constexpr, NAN_SCALE_IS_NAN: tl.constexpr,
                            NAN_SCALE_IS_INF: tl.constexpr, BYTE0_EXPONENT: tl.constexpr,
                            BY_BINADE: tl.constexpr):
        HALF: tl.constexpr = GROUP // 2
        pid = tl.program_id(0)
        first = pid.to(tl.int64) * BLOCK  # 64-bit once per program; offsets inside it are 32-bit
        x_ptr += first * HALF
        packed_ptr += first * HALF
        rows = tl.arange(0, BLOCK)
        g = rows[:, None]
        offsets = g * HALF + tl.arange(0, HALF)[None, :]
        mask = g < n_groups - first
        # each word holds an (even, odd) element pair, little-endian: even in the low half
        w = tl.load(x_ptr + offsets, mask=mask, other=0)
        if IS_BF16:
            lo = w << 16  # the int32 shift drops the odd element
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
        b = _scale_byte(amax, starts_ptr, values_ptr, binades_ptr, BY_BINADE)
        byte = b[:, None]
        d = tl.where(byte == 255, -128, tl.where(byte == 0, BYTE0_EXPONENT, 127 - byte))
        y_lo = _scaled(lo, d, byte, NAN_SCALE_IS_NAN, NAN_SCALE_IS_INF)
        y_hi = _scaled(hi, d, byte, NAN_SCALE_IS_NAN, NAN_SCALE_IS_INF)
        packed = _code(y_lo, table_ptr) | (_code(y_hi, table_ptr) << 4)
        tl.store(packed_ptr + offsets, packed, mask=mask)
        tl.store(scale_ptr + first + rows, b.to(tl.uint8), mask=rows < n_groups - first)

    @triton.jit
    def _scale_bits_kernel(u_ptr, d_ptr, out_ptr, n, NAN_SCALE_IS_NAN: tl.constexpr, NAN_SCALE_IS_INF: tl.constexpr,
                           BLOCK: tl.constexpr):
        """Test entry: out = _scaled(u, d) elementwise (d = -128 stands for byte 255)."""
        i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        m = i < n
        u = tl.load(u_ptr + i, mask=m, other=0)[None, :]
        d = tl.load(d_ptr + i, mask=m, other=0)[None, :]
        byte = tl.where(d == -128, 255, 127 - d)
        y = _scaled(u, d, byte, NAN_SCALE_IS_NAN, NAN_SCALE_IS_INF)
        tl.store(out_ptr + i[None, :], y, mask=m[None, :])


def scale_bits(u: torch.Tensor, d: torch.Tensor, nan_scale: str) -> torch.Tensor:
    """The kernel's x * 2^d on int32 patterns u and int32 exponents d under a profile's
    ``nan_scale`` (for tests)."""
    out = torch.empty_like(u)
    block = 1024
    _scale_bits_kernel[(triton.cdiv(u.numel(), block),)](u.contiguous(), d.contiguous(), out, u.numel(),
                                                         NAN_SCALE_IS_NAN=nan_scale == "nan",
                                                         NAN_SCALE_IS_INF=nan_scale == "inf", BLOCK=block)
    return out


def mode() -> str | None:
    """How this process runs Triton: "interpret" (TRITON_INTERPRET=1 when triton was first
    imported: CPU tensors), "compiled" (CUDA tensors), None without triton."""
    if triton is None:
        return None
    # mxgate.kernels.sources.triton_mode's probe, repeated: the twin lies below the kernels
    # (tests/test_layers.py checks that the two agree)
    standard = sys.modules.get("triton.language.standard")
    if standard is None:
        return None
    interp = sys.modules.get("triton.runtime.interpreter")
    probe = getattr(standard, "_elementwise_max", None)
    return "interpret" if interp is not None and isinstance(probe, getattr(interp, "InterpretedFunction", ())) else "compiled"


def quantize_mx(x: torch.Tensor, profile: str | _profiles.Profile = "gfx950", group: int = 32, *,
                block_groups: int | None = None, num_warps: int | None = None,
                bisect: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """The oracle's quantize_mx in one kernel launch (float32 or bf16 x, group a power of two).

    block_groups (groups per program, a power of two; default by dtype) and num_warps only
    change the speed;
    bisect forces the bisection lookup of the scale byte (what a profile without a binade
    table gets), so that tests cover both lookups."""
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
    default_groups, default_warps = INTERPRETER_LAUNCH if x.device.type != "cuda" else LAUNCH[x.dtype]
    block_groups = default_groups if block_groups is None else block_groups
    num_warps = default_warps if num_warps is None else num_warps
    if n_groups:
        table = table_on(e2m1.table(p), x)
        starts, values = segments(p, x.device)
        by_binade = None if bisect else binades(p, x.device)
        grid = (triton.cdiv(n_groups, block_groups),)
        _quantize_mx_kernel[grid](words, packed, scales, table, starts, values,
                                  starts if by_binade is None else by_binade, n_groups, GROUP=group,
                                  BLOCK=block_groups, IS_BF16=x.dtype == torch.bfloat16,
                                  IGNORE_NAN=p.amax_nan == "ignore", NAN_SCALE_IS_NAN=p.nan_scale == "nan",
                                  NAN_SCALE_IS_INF=p.nan_scale == "inf",
                                  BYTE0_EXPONENT=BYTE0_EXPONENT[p.scale0_divisor], BY_BINADE=by_binade is not None, num_warps=num_warps)
    lead = tuple(x.shape[:-1])
    return packed.reshape(lead + (n // 2,)), scales.reshape(lead + (n // group,))


def _word_view(flat: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Element pairs as one word each (copied first when the data is not aligned to the word)."""
    if flat.data_ptr() % (2 * flat.element_size()):
        flat = flat.clone()
    return flat.view(dtype)
