"""``tl.dot_scaled`` as an e8m0 decoder: how Triton turns each scale byte into a multiplier.

A probe product isolates one scale byte per output row: row r of the left operand holds a single
1.0 (E2M1 code 0x2) under scale byte r; the right operand's two probe columns hold 1.0 under scale
bytes 127 + 10 and 127 - 10, so every finite decode lands in the float32 normal range in one of
them. Runs compiled on a GPU or under ``TRITON_INTERPRET=1`` (Triton >= 3.9) on the CPU.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from mxgate.op_table import OpName
from mxgate.kernels.base import AVAILABLE, Availability, Backend, Op, requires
from mxgate.kernels.sglang_loader import env_scope, triton_mode

_M, _N, _K = 256, 32, 64  # one row per scale byte; Triton's dot needs N >= 16 and K a multiple of 32
_SHIFT = 10


def _triton_version() -> tuple[int, int]:
    import triton

    major, minor = triton.__version__.split(".")[:2]
    return int(major), int(minor)


@cache
def _kernel(interpret: bool) -> Any:
    # triton fixes interpreter vs compiled when it is first imported: share the loader's guard.
    with env_scope("interpret" if interpret else "compiled"):
        import triton
        import triton.language as tl

        @triton.jit
        def probe(a_ptr, a_scale_ptr, b_ptr, b_scale_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
            rows = tl.arange(0, M)
            cols = tl.arange(0, N)
            kp = tl.arange(0, K // 2)
            ks = tl.arange(0, K // 32)
            a = tl.load(a_ptr + rows[:, None] * (K // 2) + kp[None, :])
            b = tl.load(b_ptr + kp[:, None] * N + cols[None, :])
            a_scale = tl.load(a_scale_ptr + rows[:, None] * (K // 32) + ks[None, :])
            b_scale = tl.load(b_scale_ptr + cols[:, None] * (K // 32) + ks[None, :])
            product = tl.dot_scaled(a, a_scale, "e2m1", b, b_scale, "e2m1")
            tl.store(out_ptr + rows[:, None] * N + cols[None, :], product)

        return probe


def probe_operands() -> dict[str, np.ndarray]:
    """The probe's inputs: byte r scales row r; columns 0 and 1 scale by 2^+10 and 2^-10."""
    a = np.zeros((_M, _K // 2), np.uint8)
    a[:, 0] = 0x02  # element 0 of every row is 1.0
    a_scale = np.full((_M, _K // 32), 127, np.uint8)
    a_scale[:, 0] = np.arange(256, dtype=np.uint8)
    b = np.zeros((_K // 2, _N), np.uint8)
    b[0, 0:2] = 0x02  # element 0 of probe columns 0 and 1 is 1.0
    b_scale = np.full((_N, _K // 32), 127, np.uint8)
    b_scale[0, 0] = 127 + _SHIFT
    b_scale[1, 0] = 127 - _SHIFT
    return {"a": a, "a_scale": a_scale, "b": b, "b_scale": b_scale}


def decode_from_probe(product: np.ndarray) -> np.ndarray:
    """Per scale byte, the multiplier the product implies (float64 on the host, then float32)."""
    high = product[:, 0].astype(np.float64) / 2.0**_SHIFT
    low = product[:, 1].astype(np.float64) * 2.0**_SHIFT
    use_low = ~np.isfinite(product[:, 0]) & np.isfinite(product[:, 1])
    return np.where(use_low, low, high).astype(np.float32)


class TritonDotScaledBackend(Backend):
    description = "tl.dot_scaled e2m1 x e2m1 probe: how Triton decodes e8m0 scale bytes"

    def available(self) -> Availability:
        missing = requires("torch", "triton")
        if not missing:
            return missing
        if self.device == "cpu" and _triton_version() < (3, 9):
            return Availability(False, "the Triton CPU interpreter supports dot_scaled from 3.9 on")
        current = triton_mode()
        wanted = "compiled" if self.device == "cuda" else "interpret"
        if current is not None and current != wanted:
            return Availability(False, f"triton is already imported in {current} mode in this process; {wanted} needs a fresh process")
        if self.device == "cuda":
            import torch

            if not torch.cuda.is_available():
                return Availability(False, "torch reports no CUDA device")
        return AVAILABLE

    def ops(self) -> dict[str, Op]:
        profile = "triton-dot-scaled" if self.device == "cuda" else "gfx950"
        return {OpName.E8M0_DECODE: Op(OpName.E8M0_DECODE, profile, self._decode, note="all 256 bytes through one probe product")}

    def _decode(self, codes: np.ndarray) -> np.ndarray:
        import torch

        operands = probe_operands()
        device = "cuda" if self.device == "cuda" else "cpu"
        tensors = {k: torch.from_numpy(v).to(device) for k, v in operands.items()}
        out = torch.empty((_M, _N), dtype=torch.float32, device=device)
        kernel = _kernel(interpret=self.device != "cuda")
        with env_scope("compiled" if self.device == "cuda" else "interpret"):  # the launch reads it too
            kernel[(1,)](tensors["a"], tensors["a_scale"], tensors["b"], tensors["b_scale"], out, _M, _N, _K)
        table = decode_from_probe(out.cpu().numpy())
        return table[np.asarray(codes, dtype=np.uint8)]
