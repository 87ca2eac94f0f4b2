"""Byte-deterministic ``.npz`` files and the array store that fills them.

``np.savez`` stamps zip entries with the current time, so the same arrays give different bytes
on every run. Here both layers are written by hand: each array becomes an ``.npy`` v1.0 entry
(little-endian, C order, header padded to 64 bytes) inside an uncompressed zip whose every
header field is fixed (date 1980-01-01, no extra fields, entries sorted by name). The result is
a normal ``.npz``: ``numpy.load(path, allow_pickle=False)`` reads it. Compression is left out on
purpose: zlib builds differ in their output bytes.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from typing import Mapping

import numpy as np

_NPY_MAGIC = b"\x93NUMPY\x01\x00"
_ALIGN = 64
_DOS_DATE = (0 << 9) | (1 << 5) | 1  # 1980-01-01, the earliest date a zip can hold
_DOS_TIME = 0
_KINDS = "biuf"  # bool, signed, unsigned, float: no objects, no strings


def canonical(array: np.ndarray) -> np.ndarray:
    """The array as stored: little-endian, C-contiguous; objects and strings are refused."""
    a = np.asarray(array)
    if a.dtype.kind not in _KINDS:
        raise TypeError(f"vector arrays must be bool, integer or float, got dtype {a.dtype}")
    return np.asarray(a, dtype=a.dtype.newbyteorder("<"), order="C")  # asarray keeps 0-d arrays 0-d


def npy_bytes(array: np.ndarray) -> bytes:
    """An ``.npy`` v1.0 image of the array, byte for byte the same on every machine."""
    a = canonical(array)
    shape = repr(tuple(int(n) for n in a.shape))  # Python's tuple repr: (3,), (2, 3), ()
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (a.dtype.str, shape)
    total = len(_NPY_MAGIC) + 2 + len(header) + 1
    header += " " * ((-total) % _ALIGN) + "\n"
    return _NPY_MAGIC + struct.pack("<H", len(header)) + header.encode("latin1") + a.tobytes(order="C")


def zip_bytes(entries: Mapping[str, bytes]) -> bytes:
    """An uncompressed zip of the entries, sorted by name, every header field fixed."""
    out = bytearray()
    central = bytearray()
    for name in sorted(entries):
        data = entries[name]
        raw_name = name.encode("ascii")
        crc = zlib.crc32(data) & 0xFFFFFFFF
        offset = len(out)
        if offset + len(data) > 0xFFFFFFFF:
            raise ValueError("vector files are kept small: a single .npz must stay below 4 GiB")
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, _DOS_TIME, _DOS_DATE, crc, len(data), len(data), len(raw_name), 0)
        out += raw_name + data
        central += struct.pack(
            "<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, _DOS_TIME, _DOS_DATE, crc, len(data), len(data),
            len(raw_name), 0, 0, 0, 0, 0o100644 << 16, offset,
        )
        central += raw_name
    start = len(out)
    out += central
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries), len(central), start, 0)
    return bytes(out)


def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    return zip_bytes({f"{key}.npy": npy_bytes(a) for key, a in arrays.items()})


class ArrayStore:
    """Arrays of one vector file under readable keys; identical arrays are stored once.

    ``add`` returns the key the array is stored under: the first key that held the same dtype,
    shape and bytes, so per-profile results that agree share one entry.
    """

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self._by_content: dict[tuple[str, tuple[int, ...], str], str] = {}

    def add(self, key: str, array: np.ndarray) -> str:
        a = canonical(array)
        digest = hashlib.sha256(a.tobytes()).hexdigest()
        content = (a.dtype.str, a.shape, digest)
        if content in self._by_content:
            return self._by_content[content]
        if key in self.arrays:
            raise ValueError(f"array key {key!r} is already used for different content")
        if not key.isascii() or any(ch in key for ch in "\\:\n"):
            raise ValueError(f"array key {key!r} must be plain ASCII without '\\' or ':'")
        self.arrays[key] = a
        self._by_content[content] = key
        return key

    def to_bytes(self) -> bytes:
        return npz_bytes(self.arrays)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays.values())
