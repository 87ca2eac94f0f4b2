"""Seeded random data: every array comes from ``numpy.random.Generator(PCG64(seed))`` through
plain IEEE arithmetic, so a seed gives the same bytes on every machine."""

from __future__ import annotations

import numpy as np

from mxgate.oracle.formats.bf16 import bf16_bits, round_bf16
from mxgate.oracle.geometry import GROUP


def rng_for(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


def normal(rng: np.random.Generator, size) -> np.ndarray:
    """Roughly normal float64 samples (Irwin-Hall of 4 uniforms, unit variance).

    numpy's standard_normal calls the platform's exp/log1p in its ziggurat tail, so its bits
    could differ between machines; sums of uniforms are plain IEEE arithmetic.
    """
    u = rng.random(size=(4,) + (tuple(size) if isinstance(size, tuple) else (size,)))
    return (u.sum(axis=0) - 2.0) * np.sqrt(3.0)


def pow2_f64(k: np.ndarray) -> np.ndarray:
    """2.0**k for integer arrays k, exactly (ldexp, not a platform exp2)."""
    return np.ldexp(1.0, np.asarray(k, dtype=np.int64).astype(np.int32))


def bf16_values(rng: np.random.Generator, shape: tuple[int, ...], scale: float = 1.0) -> np.ndarray:
    """Normal(0, scale^2) samples rounded to bf16, as float32."""
    return round_bf16((rng.standard_normal(shape) * scale).astype(np.float32))


def bf16_random(rng: np.random.Generator, shape: tuple[int, ...], scale: float = 1.0) -> np.ndarray:
    """Normal(0, scale^2) samples rounded to bf16, as uint16 bit patterns."""
    return bf16_bits((rng.standard_normal(shape) * scale).astype(np.float32))


def spread_groups(rng: np.random.Generator, x: np.ndarray, spread: int) -> np.ndarray:
    """Multiply each 32-element group by 2^k, k uniform in [-spread, spread] (exact scaling)."""
    if spread <= 0:
        return x
    shape = x.shape[:-1] + (x.shape[-1] // GROUP, 1)
    k = rng.integers(-spread, spread + 1, size=shape)
    return (x.reshape(shape[:-1] + (GROUP,)) * np.ldexp(np.float32(1), k).astype(np.float32)).reshape(x.shape)
