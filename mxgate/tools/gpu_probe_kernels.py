"""Triton kernels of the GPU-tier probe (imported only there: they need triton at import).

fp8_dot: C = A @ B with fp32 accumulation, A and B of any dtype tl.dot takes.
to_uint8: a float32 -> uint8 conversion as Triton lowers it on the device.
"""

import triton
import triton.language as tl


@triton.jit
def fp8_dot(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    m = tl.arange(0, M)
    n = tl.arange(0, N)
    k = tl.arange(0, K)
    a = tl.load(a_ptr + m[:, None] * K + k[None, :])
    b = tl.load(b_ptr + k[:, None] * N + n[None, :])
    c = tl.dot(a, b, out_dtype=tl.float32)
    tl.store(c_ptr + m[:, None] * N + n[None, :], c)


@triton.jit
def to_uint8(x_ptr, out_ptr, SIZE: tl.constexpr):
    i = tl.arange(0, SIZE)
    tl.store(out_ptr + i, tl.load(x_ptr + i).to(tl.uint8))


@triton.jit
def exp2_scale(x_ptr, e_ptr, out_ptr, prod_ptr, SIZE: tl.constexpr):
    """out = exp2(e), prod = x * exp2(e), as _mxfp4_quant_op computes its quant scale."""
    i = tl.arange(0, SIZE)
    s = tl.exp2(tl.load(e_ptr + i))
    tl.store(out_ptr + i, s)
    tl.store(prod_ptr + i, tl.load(x_ptr + i) * s)
