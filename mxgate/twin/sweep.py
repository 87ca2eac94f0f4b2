"""Exhaustive sweeps judged on the device: a backend's element encoder on every float32.

    result = sweep_device(lambda x: my_kernel(x), "gfx950", "cuda")
    print(result.summary())

The backend and the reference both see all 2^32 patterns, chunk by chunk, on the device; only
the mismatch counts and the first examples come back to the host. The reference is the oracle's
own encoder on the tensors: its rounding table, on the device, at its index
(``oracle.rounding.lookup``), so a mismatch is the backend's.

torch is imported by the functions that use it: the gate's process takes ``sweep_op`` and the
``DeviceSweep`` results from here without importing torch (the sweep runs in the backend's worker).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mxgate.oracle import profiles as _profiles
from mxgate.oracle.formats import e2m1, e4m3
from mxgate.oracle.rounding import lookup
from mxgate.oracle.formats.bf16 import bf16_bits
from mxgate.oracle.xp import floats, i32, is_nan_bits, table_on

if TYPE_CHECKING:
    import torch

TOTAL = 1 << 32
CHUNK_BITS = 28
FORMATS = ("e2m1", "e4m3", "e4m3fn", "e4m3fnuz", "bf16")  # "e4m3": the profile's FP8 variant


@dataclass
class DeviceSweep:
    profile: str
    fmt: str
    inputs: int = 0
    mismatches: int = 0
    nan_mismatches: int = 0  # of which the input was a NaN (some backends differ there by design)
    examples: list[tuple[int, int, int]] = field(default_factory=list)  # (input bits, twin, backend)
    seconds: float = 0.0

    def summary(self) -> str:
        head = (f"{self.fmt} device sweep, profile {self.profile}: {self.inputs:,} inputs, "
                f"{self.mismatches:,} mismatches ({self.nan_mismatches:,} on NaN inputs), {self.seconds:.2f} s")
        width = 4 if self.fmt == "bf16" else 2
        rows = [f"  input 0x{b & 0xFFFFFFFF:08X}: oracle 0x{t:0{width}X}, backend 0x{k:0{width}X}" for b, t, k in self.examples]
        return "\n".join([head] + rows)

    def merged(self, *parts: DeviceSweep, max_examples: int = 10) -> DeviceSweep:
        """This sweep and ``parts`` (further chunks of the same encoder, profile and format) as one."""
        total = dataclasses.replace(self, examples=list(self.examples))
        for part in parts:
            total.profile = part.profile
            total.inputs += part.inputs
            total.mismatches += part.mismatches
            total.nan_mismatches += part.nan_mismatches
            total.examples += part.examples[:max(0, max_examples - len(total.examples))]
            total.seconds += part.seconds
        return total


def reference(profile: str | _profiles.Profile, fmt: str, device: torch.device) -> Callable[[torch.Tensor], torch.Tensor]:
    """The oracle's encoder for ``fmt`` under the profile, on ``device``: int32 float32 patterns
    -> its outputs as int32 units (codes, or bf16 bit patterns)."""
    import torch

    p = _profiles.get(profile)
    like = torch.empty(0, device=device)
    if fmt == "e2m1":
        table, keep_bits = table_on(e2m1.table(p), like), e2m1.KEEP_BITS
    elif fmt.startswith("e4m3") and fmt in FORMATS:
        variant = p.fp8_variant if fmt == "e4m3" else fmt[len("e4m3"):]
        table, keep_bits = table_on(e4m3.table(variant, e4m3.SATURATE_OF_OVERFLOW[p.fp8_overflow]), like), e4m3.KEEP_BITS
    elif fmt == "bf16":
        return lambda u: units(bf16_bits(floats(u), p), fmt)
    else:
        raise ValueError(f"fmt must be one of {', '.join(FORMATS)}; got {fmt!r}")
    return lambda u: lookup(u, table, keep_bits).to(torch.int32)


def units(out: torch.Tensor, fmt: str) -> torch.Tensor:
    """An encoder's outputs as int32: uint8 codes, or the 16 bits of a bf16 (any 16-bit view)."""
    import torch

    if fmt == "bf16":
        if out.dtype in (torch.uint16, torch.bfloat16):
            out = out.view(torch.int16)
        return out.to(torch.int32) & 0xFFFF
    return out.to(torch.uint8).to(torch.int32)


def patterns(start: int, count: int, device: torch.device) -> torch.Tensor:
    """int32 tensor of the float32 patterns start .. start + count - 1 (uint32 order)."""
    import torch

    return torch.arange(count, dtype=torch.int32, device=device) + i32(start)


def sweep_device(backend_encoder: Callable[[torch.Tensor], torch.Tensor], profile: str | _profiles.Profile,
                 device: str | torch.device = "cuda", *, fmt: str = "e2m1", chunk_bits: int = CHUNK_BITS,
                 chunks: Iterable[int] | None = None, max_examples: int = 10) -> DeviceSweep:
    """Judge ``backend_encoder`` (float32 tensor -> uint8 codes, or bf16 bits for "bf16", one per element, same shape)
    on every float32 input (or the 2^chunk_bits-input ``chunks``) against the twin."""
    import torch

    p = _profiles.get(profile)
    dev = torch.device(device)
    expected = reference(p, fmt, dev)
    count = 1 << chunk_bits
    chunks = range(TOTAL >> chunk_bits) if chunks is None else chunks
    result = DeviceSweep(p.name, fmt)
    base = torch.arange(count, dtype=torch.int32, device=dev)
    bad_total = torch.zeros((), dtype=torch.int64, device=dev)
    bad_nan = torch.zeros((), dtype=torch.int64, device=dev)
    flagged: list[tuple[int, torch.Tensor]] = []
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    start_time = time.perf_counter()
    for index in chunks:
        u = base + i32(index << chunk_bits)
        actual = backend_encoder(u.view(torch.float32))
        if not isinstance(actual, torch.Tensor) or actual.shape != u.shape:
            raise ValueError(f"backend_encoder must return a tensor of shape {tuple(u.shape)}, got "
                             f"{getattr(actual, 'shape', type(actual).__name__)}")
        differ = expected(u) != units(actual.to(device=dev), fmt)
        bad = differ.sum()
        bad_total += bad
        bad_nan += (differ & is_nan_bits(u)).sum()
        flagged.append((index, bad))
        result.inputs += count
        if len(flagged) >= 4:  # look back at a few chunks at a time: one host sync per group
            _collect(result, flagged, base, expected, fmt, backend_encoder, chunk_bits, dev, max_examples)
            flagged = []
    _collect(result, flagged, base, expected, fmt, backend_encoder, chunk_bits, dev, max_examples)
    result.mismatches = int(bad_total)
    result.nan_mismatches = int(bad_nan)
    result.seconds = time.perf_counter() - start_time
    return result


def _collect(result: DeviceSweep, indices: list[tuple[int, torch.Tensor]], base: torch.Tensor, expected, fmt: str,
             backend_encoder, chunk_bits: int, dev: torch.device, max_examples: int) -> None:
    """Examples from chunks with mismatches (recomputed only for those: mismatches are rare)."""
    import torch

    if len(result.examples) >= max_examples:
        return
    counts = torch.stack([bad for _, bad in indices]).tolist() if indices else []
    for (index, _), bad in zip(indices, counts):
        if not bad or len(result.examples) >= max_examples:
            continue
        u = base + i32(index << chunk_bits)
        actual = units(backend_encoder(u.view(torch.float32)).to(device=dev), fmt)
        ours = expected(u)
        where = torch.nonzero(ours != actual).reshape(-1)[: max_examples - len(result.examples)]
        for i in where.tolist():
            result.examples.append((int(u[i]), int(ours[i]), int(actual[i])))


def sweep_op(op, device: str | torch.device, profile: str | _profiles.Profile, fmt: str, chunks: Iterable[int],
             chunk_bits: int) -> DeviceSweep:
    """A backend's element encoder ``op`` (a ``mxgate.kernels.Op``) on ``device`` over ``chunks``,
    judged against the twin: the ``sweep`` the gate hands ``Backend.device_sweep`` (the kernels
    lie below the twin and do not import it)."""
    return sweep_device(encoder_of(op, device), profile, device, fmt=fmt, chunk_bits=chunk_bits, chunks=chunks)


def encoder_of(op, device: str | torch.device) -> Callable[[torch.Tensor], torch.Tensor]:
    """A backend Op as a tensor encoder for ``sweep_device``: its ``run_tensor`` where it has one
    (nothing crosses to the host), else its NumPy ``run`` through ``from_numpy_op``."""
    run_tensor = getattr(op, "run_tensor", None)
    return run_tensor if run_tensor is not None else from_numpy_op(op.run, device)


def from_numpy_op(run: Callable, device: str | torch.device) -> Callable[[torch.Tensor], torch.Tensor]:
    """A backend op that takes and returns NumPy arrays, as a tensor encoder for ``sweep_device``:
    each chunk goes to the host for the op and its codes come back; the judging stays on the device."""
    import numpy as np
    import torch

    dev = torch.device(device)

    def encoder(x: torch.Tensor) -> torch.Tensor:
        codes = np.ascontiguousarray(np.asarray(run(x.cpu().numpy())))
        return torch.from_numpy(codes).to(dev)

    return encoder
