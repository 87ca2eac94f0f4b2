"""The oracle's ``ops.f32math`` (one code for NumPy arrays and tensors), under the name a twin
scorer still imports it by."""

from mxgate.oracle.ops.f32math import f16_bits_to_f32, f32_to_f16_bits, fma32, round_f16, rsqrt32  # noqa: F401
