"""``mxgate bench --device D``: the torch twin on a device, as ratios against its peers from one run.

    mxgate bench --device cuda [--elements 268435456] [--tokens 1048576] [--heads 64]
                               [--repeat 5] [--json PATH] [--only quantize|sweep|indexer|scorer]

Rows (each timed best-of-``repeat`` after a warm-up, on the same data):
  copy             torch copy of the float32 input: the card's device-to-device bandwidth
                   (bytes read + written per second), the physical limit of the others
  quantize f32/bf16  the twin's MXFP4 block quantize (fused Triton kernel on CUDA): bytes
                   read + written per second, as a fraction of the copy's (target >= 0.5)
  reference form   the oracle's own quantize_mx on the tensors (no fused kernel)
  oracle           the NumPy oracle's quantize_mx on the host (every core), elements/s
  sglang fake_quant_fp4  sglang 0.5.23's torch quantize-dequantize round trip, against the
                   twin's quantize + dequantize (the same work)
  aiter f32_to_mxfp4     AITER's torch reference, where importable
  sweep            sweep_device over all 2^32 float32 inputs (the twin judging itself: judge
                   plus backend), and torch's own float8_e4m3fn cast judged under torch-cuda
  indexer          the oracle's indexer op on tensors, FP4, T tokens x H heads on the device (target for
                   T = 2^20, H = 64: <= 1 s), against the NumPy oracle's rows/s on the host
  scorer           the oracle's pa_mqa_logits_fp4_scored on tensors (emulated order, value and bound), decode,
                   4 query rows x H heads over --context tokens, against the oracle's cells/s
A peer that cannot run here is listed with the reason. Nothing is compared for bits here:
tests/test_twin.py does that.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from mxgate import oracle, twin
from mxgate.twin import fused
from mxgate.twin.sweep import sweep_device

PROFILE = "gfx950"


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


SAMPLE_S = 0.02  # CUDA: a sample runs calls back to back for about this long


def best_seconds(function: Callable[[], object], device: torch.device, repeat: int) -> float:
    """Seconds per call, the best of ``repeat`` samples. On CUDA a sample launches the call
    back to back (about SAMPLE_S) and synchronizes once: the host's per-call work (the Python
    wrapper, the launch) overlaps the card's as in a model's forward pass, where a sync after
    each call would add it to a 0.2 ms kernel's time (docs/results/h200-2026-12-02-bandwidth.md)."""
    function()  # warm-up: compilation, lazily built tables
    _sync(device)
    loops = 1
    if device.type == "cuda":
        start = time.perf_counter()
        function()
        _sync(device)
        loops = max(1, min(1000, math.ceil(SAMPLE_S / max(time.perf_counter() - start, 1e-6))))
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(loops):
            function()
        _sync(device)
        times.append((time.perf_counter() - start) / loops)
    return min(times)


class Report:
    def __init__(self) -> None:
        self.rows: list[dict[str, object]] = []

    def add(self, name: str, **fields: object) -> None:
        row = {"name": name, **fields}
        self.rows.append(row)
        shown = ", ".join(f"{k} {_fmt(v)}" for k, v in fields.items())
        print(f"{name:34s} {shown}", flush=True)

    def skip(self, name: str, reason: str) -> None:
        self.rows.append({"name": name, "skipped": reason})
        print(f"{name:34s} skipped: {reason}", flush=True)


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _random_f32(n: int, device: torch.device, seed: int) -> torch.Tensor:
    """Roughly normal values over several binades (no NaN: the common case)."""
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(n, generator=g, device=device, dtype=torch.float32)
    scale = torch.randint(-8, 8, (n // 32, 1), generator=g, device=device).to(torch.float32).exp2()
    return (x.view(-1, 32) * scale).reshape(-1)


def _warm_up(function: Callable[[], object], device: torch.device, seconds: float = 0.5) -> None:
    """Run ``function`` for ``seconds``: a card that has idled starts at low clocks, and the
    rows measured first would read slow."""
    if device.type != "cuda":
        return
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        function()
        _sync(device)


def bench_quantize(report: Report, device: torch.device, n: int, repeat: int) -> None:
    src = _random_f32(n, device, 1)
    dst = torch.empty_like(src)
    _warm_up(lambda: dst.copy_(src), device)
    copy_s = best_seconds(lambda: dst.copy_(src), device, repeat)
    copy_bw = 2 * 4 * n / copy_s
    report.add("copy f32", elements=n, ms=copy_s * 1e3, GBps=copy_bw / 1e9)
    reason = fused.unavailable(src, 32)
    out_bytes = n // 2 + n // 32
    quantize_s = None
    for label, x, in_bytes in (("f32", src, 4 * n), ("bf16", src.to(torch.bfloat16), 2 * n)):
        if reason is None:
            s = best_seconds(lambda x=x: fused.quantize_mx(x, PROFILE), device, repeat)
            bw = (in_bytes + out_bytes) / s
            report.add(f"quantize {label} (fused)", ms=s * 1e3, GBps=bw / 1e9, of_copy_bandwidth=bw / copy_bw,
                       Gelem_per_s=n / s / 1e9)
            if label == "f32":
                quantize_s = s
        else:
            report.skip(f"quantize {label} (fused)", reason)
    # launch shapes (speed only, same bytes), on the card: under the interpreter they say nothing
    if reason is None and device.type == "cuda":
        for label, x, in_bytes in (("f32", src, 4 * n), ("bf16", src.to(torch.bfloat16), 2 * n)):
            for block, warps in ((32, 2), (64, 2), (128, 2), (32, 4), (64, 4), (128, 4), (256, 4), (128, 8), (256, 8)):
                s = best_seconds(lambda x=x, b=block, w=warps: fused.quantize_mx(x, PROFILE, block_groups=b, num_warps=w),
                                 device, repeat)
                bw = (in_bytes + out_bytes) / s
                report.add(f"quantize {label} block {block} warps {warps}", ms=s * 1e3, of_copy_bandwidth=bw / copy_bw)
        # the copy again after the kernels: the fractions above use the first copy, and a copy
        # faster now says by how much they may read high
        again = best_seconds(lambda: dst.copy_(src), device, repeat)
        report.add("copy f32 again", elements=n, ms=again * 1e3, GBps=2 * 4 * n / again / 1e9)
    small = min(n, 1 << 26)
    xs = src[:small]
    ref_s = best_seconds(lambda: oracle.quantize_mx(xs, PROFILE), device, max(1, repeat // 2))
    report.add("quantize f32 (reference form)", elements=small, ms=ref_s * 1e3, Gelem_per_s=small / ref_s / 1e9)
    twin_rate = n / quantize_s if quantize_s else small / ref_s
    host = xs.cpu().numpy()
    oracle_s = best_seconds(lambda: oracle.quantize_mx(host, PROFILE), torch.device("cpu"), max(1, repeat // 2))
    report.add("oracle quantize_mx (host)", elements=small, threads=os.environ.get("MXGATE_THREADS"),
               ms=oracle_s * 1e3, Gelem_per_s=small / oracle_s / 1e9, twin_speedup=twin_rate / (small / oracle_s))
    bench_peers(report, device, src, repeat, quantize_s)


def bench_peers(report: Report, device: torch.device, x: torch.Tensor, repeat: int, quantize_s: float | None) -> None:
    use_fused = fused.unavailable(x, 32) is None

    def twin_roundtrip() -> torch.Tensor:
        packed, scales = twin.quantize_mx(x, PROFILE, fused=use_fused)
        return twin.dequantize_mx(packed, scales, PROFILE)

    ours = best_seconds(twin_roundtrip, device, repeat)
    report.add("twin quantize+dequantize", ms=ours * 1e3)
    try:
        from mxgate.kernels import sglang_loader

        kernels = sglang_loader.load("compiled" if device.type == "cuda" else "interpret")
        fake = kernels.fake_quant.fake_quant_fp4
    except Exception as error:  # noqa: BLE001 - any reason it cannot load is reported
        report.skip("sglang fake_quant_fp4", f"{type(error).__name__}: {error}")
    else:
        theirs = best_seconds(lambda: fake(x.view(-1, 128)), device, repeat)
        fields = dict(ms=theirs * 1e3, twin_roundtrip_speedup=theirs / ours)
        if quantize_s:
            fields["twin_quantize_speedup"] = theirs / quantize_s
        report.add("sglang fake_quant_fp4", **fields)
    fp4_utils, why = _aiter_module(device, "fp4_utils")
    if fp4_utils is None:
        report.skip("aiter f32_to_mxfp4", why)
    else:
        theirs = best_seconds(lambda: fp4_utils.f32_to_mxfp4(x.view(-1, 128)), device, repeat)
        report.add("aiter f32_to_mxfp4", ms=theirs * 1e3,
                   twin_quantize_speedup=theirs / quantize_s if quantize_s else float("nan"))


def _aiter_module(device: torch.device, name: str) -> tuple[object | None, str]:
    """One of AITER's torch reference modules from the user's AITER (installed or $MXGATE_AITER_SRC)."""
    from mxgate import kernels

    try:
        backend = kernels.get("aiter-reference", device=device.type)
        ready = backend.available()
        if not ready:
            return None, f"not supported here: {ready.reason}"
        return backend.reference_module(name), ""
    except Exception as error:  # noqa: BLE001 - any reason it cannot load is reported
        return None, f"not importable here ({type(error).__name__}: {error})"


def bench_sweep(report: Report, device: torch.device, chunk_bits: int) -> None:
    chunks = None if device.type == "cuda" else range(0, 1 << (32 - chunk_bits), 1 << (32 - chunk_bits - 2))
    for fmt in ("e2m1", "e4m3"):
        encoder = (lambda x: twin.encode_e2m1(x, PROFILE)) if fmt == "e2m1" else (lambda x: twin.encode_e4m3(x, "fn", False))
        result = sweep_device(encoder, PROFILE, device, fmt=fmt, chunk_bits=chunk_bits, chunks=chunks)
        report.add(f"sweep {fmt} twin judging itself", inputs=result.inputs, seconds=result.seconds,
                   mismatches=result.mismatches)
    if device.type == "cuda" and hasattr(torch, "float8_e4m3fn"):
        def cast(x: torch.Tensor) -> torch.Tensor:
            return x.to(torch.float8_e4m3fn).view(torch.uint8)

        result = sweep_device(cast, "torch-cuda", device, fmt="e4m3", chunk_bits=chunk_bits)
        report.add("sweep torch float8_e4m3fn cast", profile="torch-cuda", inputs=result.inputs,
                   seconds=result.seconds, mismatches=result.mismatches, on_nan_inputs=result.nan_mismatches)
        for bits, ours, theirs in result.examples[:5]:
            print(f"    input 0x{bits & 0xFFFFFFFF:08X}: torch-cuda rule 0x{ours:02X}, torch cast 0x{theirs:02X}")


def _bf16_tensor(shape: tuple[int, ...], g: torch.Generator, device: torch.device) -> torch.Tensor:
    """Random bf16 (sign, exponent 118..129, mantissa), as bench_indexer.py draws them; built
    2^26 elements at a time (the full Q of T = 2^20, H = 64 is 2^33 elements)."""
    out = torch.empty(shape, dtype=torch.int16, device=device)
    flat = out.view(-1)
    step = 1 << 26
    for start in range(0, flat.numel(), step):
        n = min(step, flat.numel() - start)
        sign = torch.randint(0, 2, (n,), generator=g, device=device, dtype=torch.int32) << 15
        exponent = torch.randint(118, 130, (n,), generator=g, device=device, dtype=torch.int32) << 7
        mantissa = torch.randint(0, 128, (n,), generator=g, device=device, dtype=torch.int32)
        flat[start:start + n] = (sign | exponent | mantissa).to(torch.int16)
    return out.view(torch.bfloat16)


def indexer_inputs(tokens: int, heads: int, device: torch.device, seed: int) -> dict[str, object]:
    g = torch.Generator(device=device).manual_seed(seed)
    max_pos = 8192
    blocks = -(-tokens // 64) + 1
    slots = torch.randperm(blocks * 64, generator=g, device=device)[:tokens]
    return dict(
        q=_bf16_tensor((tokens, heads, 128), g, device), q_out=None,
        weights=_bf16_tensor((tokens, heads), g, device), weights_out=None,
        k=_bf16_tensor((tokens, 128), g, device), kv_cache=None, slot_mapping=slots,
        norm_weight=1.0 + 0.1 * torch.randn(128, generator=g, device=device),
        norm_bias=0.1 * torch.randn(128, generator=g, device=device),
        positions=torch.randint(0, max_pos, (tokens,), generator=g, device=device),
        cos_cache=_bf16_tensor((max_pos, 32), g, device), sin_cache=_bf16_tensor((max_pos, 32), g, device),
        epsilon=1e-6, quant_block_size=32, scale_fmt="ue8m0", weights_scale=(128 * heads) ** -0.5,
        mode="fp4",
    )


def _to_host(args: dict[str, object]) -> dict[str, object]:
    out = {}
    for k, v in args.items():
        if isinstance(v, torch.Tensor):
            v = v.cpu()
            v = v.view(torch.int16).numpy().view(np.uint16) if v.dtype == torch.bfloat16 else v.numpy()
        out[k] = v
    return out


def bench_indexer(report: Report, device: torch.device, tokens: int, heads: int, repeat: int, oracle_tokens: int) -> None:
    args = indexer_inputs(tokens, heads, device, 7)
    # the oracle's op on the device tensors (one code, two namespaces)
    s = best_seconds(lambda: oracle.ops.indexer_qk_rope_quant_and_cache(**args), device, max(1, repeat // 2))
    rows = tokens * heads
    report.add("indexer fp4 (twin)", tokens=tokens, heads=heads, seconds=s, Mrows_per_s=rows / s / 1e6)
    small = _to_host(indexer_inputs(oracle_tokens, heads, device, 8))
    o = best_seconds(lambda: oracle.ops.indexer_qk_rope_quant_and_cache(**small), torch.device("cpu"), 1)
    oracle_rate = oracle_tokens * heads / o
    report.add("indexer fp4 (oracle, host)", tokens=oracle_tokens, heads=heads, seconds=o,
               Mrows_per_s=oracle_rate / 1e6, twin_speedup=(rows / s) / oracle_rate)
    run_torch, why = _aiter_module(device, "indexer_k")
    if run_torch is None:
        report.skip("aiter run_torch (indexer K reference)", why)
    else:
        n = min(tokens, 1 << 12)  # a Python loop over tokens: a sample is enough for a rate
        k = args["k"].reshape(tokens, 128)[:n]
        cache = torch.zeros((-(-n // 64), 64, 132), dtype=torch.uint8, device=device)
        slots = torch.arange(n, device=device)
        theirs = best_seconds(lambda: run_torch.run_torch(k, cache, slots, 128, "ue8m0"), device, 1)
        report.add("aiter run_torch (indexer K reference)", tokens=n, seconds=theirs,
                   Mrows_per_s=n / theirs / 1e6, twin_speedup=(tokens / s) / (n / theirs))


def bench_scorer(report: Report, device: torch.device, context: int, heads: int, repeat: int,
                 oracle_context: int) -> None:
    from mxgate.inputs import logits as lc
    from mxgate.oracle import scorers
    from mxgate.twin.reference import to_device

    def cells_per_s(ctx: int, seconds: float) -> float:
        return 4 * ctx * heads / seconds  # (row, head, token) cells

    case = lc.fp4_decode_case(11, 1, context, 4, heads, context_lens=np.array([context]))
    args = {k: to_device(v, device) for k, v in case.kwargs.items()}
    s = best_seconds(lambda: scorers.pa_mqa_logits_fp4_scored(**args), device, max(1, repeat // 2))
    rate = cells_per_s(context, s)
    report.add("scorer fp4 decode (twin)", context=context, heads=heads, seconds=s, Gcells_per_s=rate / 1e9)
    small = lc.fp4_decode_case(12, 1, oracle_context, 4, heads, context_lens=np.array([oracle_context])).kwargs
    o = best_seconds(lambda: scorers.pa_mqa_logits_fp4_scored(**small), torch.device("cpu"), 1)
    report.add("scorer fp4 decode (oracle, host)", context=oracle_context, heads=heads, seconds=o,
               Gcells_per_s=cells_per_s(oracle_context, o) / 1e9, twin_speedup=rate / cells_per_s(oracle_context, o))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mxgate bench", description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--elements", type=int, default=None, help="quantize size (default 2^28 on CUDA, 2^20 on CPU)")
    parser.add_argument("--tokens", type=int, default=None, help="indexer tokens (default 2^20 on CUDA, 256 on CPU)")
    parser.add_argument("--heads", type=int, default=64)
    parser.add_argument("--oracle-tokens", type=int, default=None, help="indexer tokens for the host oracle (default 2^13)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", default=None, metavar="PATH")
    parser.add_argument("--context", type=int, default=None, help="scorer tokens (default 2^18 on CUDA, 512 on CPU)")
    parser.add_argument("--only", choices=("quantize", "sweep", "indexer", "scorer"), action="append", default=None)
    a = parser.parse_args(argv)
    # the oracle on the host gets every core the process may use (its default stops at 8)
    os.environ.setdefault("MXGATE_THREADS", str(len(os.sched_getaffinity(0))))
    device = torch.device(a.device)
    cuda = device.type == "cuda"
    elements = a.elements or (1 << 28 if cuda else 1 << 20)
    tokens = a.tokens or (1 << 20 if cuda else 256)
    oracle_tokens = a.oracle_tokens or (1 << 13 if cuda else 64)
    report = Report()
    header = dict(device=torch.cuda.get_device_name(device) if cuda else "cpu", torch=torch.__version__,
                  host_threads=len(os.sched_getaffinity(0)))
    print(json.dumps(header))
    only = set(a.only or ("quantize", "sweep", "indexer", "scorer"))
    if "quantize" in only:
        bench_quantize(report, device, elements, a.repeat)
    if "sweep" in only:
        bench_sweep(report, device, 28 if cuda else 16)
    if "indexer" in only:
        bench_indexer(report, device, tokens, a.heads, a.repeat, oracle_tokens)
    if "scorer" in only:
        context = a.context or (1 << 18 if cuda else 512)
        bench_scorer(report, device, context, a.heads, a.repeat, min(context, 1 << 12))
    if a.json:
        Path(a.json).write_text(json.dumps({"header": header, "rows": report.rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
