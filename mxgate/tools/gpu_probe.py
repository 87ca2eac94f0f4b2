"""GPU-tier probe: which profile the device's casts and tl.dot_scaled decoding match.

Runs every bf16 bit pattern (as float32) plus FP8 boundary values through torch's CUDA casts and
compares them with the oracle under each candidate rule; decodes all 256 e8m0 bytes through a
compiled ``tl.dot_scaled``. Prints one JSON document (``python -m mxgate.tools.gpu_probe``).
"""

from __future__ import annotations

import json
import platform
import sys

import numpy as np

from mxgate.op_table import OpName
from mxgate import oracle
from mxgate.kernels.triton_dot_scaled import TritonDotScaledBackend


def probe_inputs() -> np.ndarray:
    every_bf16 = (np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)).view(np.float32)
    edges = np.array([448, 464, 463.99997, 464.00003, 480, 500, 1e30, 240, 248, 247.99998, 256], np.float32)
    return np.concatenate([every_bf16, edges, -edges])


def torch_cuda_casts(x: np.ndarray) -> dict[str, object]:
    import torch

    t = torch.from_numpy(x).cuda()
    report: dict[str, object] = {}
    for variant, dtype in (("fn", torch.float8_e4m3fn), ("fnuz", torch.float8_e4m3fnuz)):
        got = t.to(dtype).view(torch.uint8).cpu().numpy()
        matches = {}
        for mode in (False, True, "satfinite"):
            want = oracle.encode_e4m3(x, variant, mode)
            matches[str(mode)] = int(np.count_nonzero(got != want))
        report[f"e4m3{variant}"] = {"mismatches_by_saturate_mode": matches}
    got = t.to(torch.bfloat16).view(torch.int16).cpu().numpy().view(np.uint16)
    report["bf16"] = {
        name: int(np.count_nonzero(got != oracle.bf16_bits(x, name))) for name in ("gfx950", "torch-cpu")
    }
    nan_codes = sorted({int(v) for v in got[np.isnan(x)]})
    report["bf16"]["nan_outputs"] = [hex(v) for v in nan_codes[:8]]
    return report


def dot_scaled_decoding() -> dict[str, object]:
    backend = TritonDotScaledBackend("cuda")
    status = backend.available()
    if not status:
        return {"available": False, "reason": status.reason}
    codes = np.arange(256, dtype=np.uint8)
    got = backend.op(OpName.E8M0_DECODE).run(codes)
    out: dict[str, object] = {"available": True, "bytes": {str(b): float(got[b]) for b in (0, 1, 2, 126, 127, 128, 253, 254, 255)}}
    for name in ("gfx950", "triton-dot-scaled"):
        want = oracle.decode_e8m0(codes, name)
        same = (got == want) | (np.isnan(got) & np.isnan(want))
        out[f"mismatches_vs_{name}"] = int(np.count_nonzero(~same))
    return out


def fp8_dot_accumulation() -> dict[str, object]:
    """Does tl.dot with an fp32 accumulator keep every fp32 bit? One dot row sums 1.0 and K-1
    products 2^-16 (exact in fp32: 1 + (K-1) * 2^-16); the row is run with e4m3fn and bf16
    operands and the result compared with the exact sum."""
    import torch

    from mxgate.tools.gpu_probe_kernels import fp8_dot

    out: dict[str, object] = {}
    for (m, k) in ((16, 32), (16, 64), (16, 128), (64, 128), (128, 128)):
        n = m
        a = torch.zeros((m, k), dtype=torch.float32)
        b = torch.zeros((k, n), dtype=torch.float32)
        a[0, 0] = b[0, 0] = 1.0
        a[0, 1:] = b[1:, 0] = 2.0 ** -8
        exact = 1.0 + (k - 1) * 2.0 ** -16
        for name, dtype in (("e4m3fn", torch.float8_e4m3fn), ("bf16", torch.bfloat16)):
            c = torch.empty((m, n), dtype=torch.float32, device="cuda")
            fp8_dot[(1,)](a.to(dtype).cuda(), b.to(dtype).cuda(), c, m, n, k)
            got = float(c[0, 0].item())
            out[f"{name}_M{m}_K{k}"] = {"got": got, "exact": exact, "lost_products": round((exact - got) / 2.0 ** -16, 3)}
    return out


def exp2_of_negative_exponents() -> dict[str, object]:
    """tl.exp2 at the subnormal end, and the product x * exp2(e) with x = 2^127 (exact: 2^(127+e))."""
    import torch

    from mxgate.tools.gpu_probe_kernels import exp2_scale

    e = torch.tensor([-126.0, -127.0, -128.0, -149.0] + [0.0] * 12, dtype=torch.float32)
    x = torch.full((16,), 2.0 ** 127, dtype=torch.float32)
    s, p = (torch.empty(16, dtype=torch.float32, device="cuda") for _ in range(2))
    exp2_scale[(1,)](x.cuda(), e.cuda(), s, p, 16)
    return {str(float(v)): {"exp2": float(a), "2^127*exp2": float(b)}
            for v, a, b in zip(e[:4].tolist(), s[:4].cpu().tolist(), p[:4].cpu().tolist())}


def float_to_uint8() -> dict[str, object]:
    """How a compiled Triton float32 -> uint8 conversion treats negative values (C leaves it undefined)."""
    import torch

    from mxgate.tools.gpu_probe_kernels import to_uint8

    x = torch.tensor([-127.0, -2.0, -1.0, -0.5, 0.0, 3.0, 127.0, 255.0, 256.0, 300.0], dtype=torch.float32)
    xs = torch.zeros(16, dtype=torch.float32)  # tl.arange needs a power of two
    xs[: x.numel()] = x
    ys = torch.empty(16, dtype=torch.uint8, device="cuda")
    to_uint8[(1,)](xs.cuda(), ys, 16)
    return {str(float(v)): int(r) for v, r in zip(x.tolist(), ys.cpu().tolist())}


def main() -> int:
    import torch
    import triton

    x = probe_inputs()
    result = {
        "torch": torch.__version__,
        "triton": triton.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "device": torch.cuda.get_device_name(0),
        "capability": list(torch.cuda.get_device_capability(0)),
        "inputs": int(x.size),
        "casts": torch_cuda_casts(x),
        "dot_scaled_e8m0": dot_scaled_decoding(),
        "fp8_dot_accumulation": fp8_dot_accumulation(),
        "float_to_uint8": float_to_uint8(),
        "exp2_subnormal": exp2_of_negative_exponents(),
    }
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
