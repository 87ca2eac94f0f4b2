"""Oracle throughput as a ratio against a peer measured in the same run (ml_dtypes' C++ casts).

Ratios, not absolute times, are the figure of merit: both sides see the same machine and load.
Each case runs ``repeat`` times and keeps the best time.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np

from mxgate.op_table import OpName
from mxgate import oracle
from mxgate.tools.optional import require


@dataclass
class BenchRow:
    case: str
    elements: int
    oracle_1thread_ms: float
    oracle_ms: float
    threads: int
    peer: str
    peer_ms: float

    @property
    def ratio_1thread(self) -> float:
        return self.peer_ms / self.oracle_1thread_ms

    @property
    def ratio(self) -> float:
        return self.peer_ms / self.oracle_ms

    def as_dict(self) -> dict[str, object]:
        timings = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in asdict(self).items()}
        return {**timings, "ratio_1thread": round(self.ratio_1thread, 2), "ratio": round(self.ratio, 2)}


def _best_ms(function: Callable[[], object], repeat: int) -> float:
    function()  # warm caches and lazily built tables
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def _with_threads(count: int | None, function: Callable[[], object], repeat: int) -> float:
    previous = os.environ.get("MXGATE_THREADS")
    if count is None:
        os.environ.pop("MXGATE_THREADS", None)
    else:
        os.environ["MXGATE_THREADS"] = str(count)
    try:
        return _best_ms(function, repeat)
    finally:
        if previous is None:
            os.environ.pop("MXGATE_THREADS", None)
        else:
            os.environ["MXGATE_THREADS"] = previous


def run_bench(log2_size: int = 24, repeat: int = 5, seed: int = 20261129) -> list[BenchRow]:
    """Benchmark the oracle's codecs against ml_dtypes on 2^log2_size float32 N(0, 4^2) values."""
    ml_dtypes = require("ml_dtypes", "the benchmark (its peer is ml_dtypes' casts)")

    from mxgate.oracle.parallel import thread_count

    n = 1 << log2_size
    x = np.random.Generator(np.random.PCG64(seed)).standard_normal(n, dtype=np.float32) * np.float32(4.0)
    cases = [
        ("mx.quantize (codes + scales)", lambda: oracle.quantize_mx(x, "gfx950"), "astype(float4_e2m1fn), no scaling", lambda: x.astype(ml_dtypes.float4_e2m1fn)),
        ("e2m1.encode (elements)", lambda: oracle.encode_e2m1(x, "gfx950"), "astype(float4_e2m1fn)", lambda: x.astype(ml_dtypes.float4_e2m1fn)),
        (OpName.E4M3FN_ENCODE, lambda: oracle.encode_e4m3(x, "fn"), "astype(float8_e4m3fn)", lambda: x.astype(ml_dtypes.float8_e4m3fn)),
        (OpName.E4M3FNUZ_ENCODE, lambda: oracle.encode_e4m3(x, "fnuz"), "astype(float8_e4m3fnuz)", lambda: x.astype(ml_dtypes.float8_e4m3fnuz)),
        (OpName.BF16_ROUND, lambda: oracle.bf16_bits(x), "astype(bfloat16)", lambda: x.astype(ml_dtypes.bfloat16)),
    ]
    threads = thread_count()
    rows = []
    for case, ours, peer_name, peer in cases:
        one = _with_threads(1, ours, repeat)
        many = _with_threads(None, ours, repeat)
        rows.append(BenchRow(case, n, one, many, threads, peer_name, _best_ms(peer, repeat)))
    return rows


def format_table(rows: list[BenchRow]) -> str:
    header = "| case | elements | oracle 1 thread ms | oracle {t} threads ms | peer (ml_dtypes) | peer ms | ratio 1 thread | ratio {t} threads |"
    lines = [header.format(t=rows[0].threads if rows else 1), "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r.case} | {r.elements:,} | {r.oracle_1thread_ms:.1f} | {r.oracle_ms:.1f} | {r.peer} | {r.peer_ms:.1f} | "
            f"{r.ratio_1thread:.2f}x | {r.ratio:.2f}x |"
        )
    return "\n".join(lines)
