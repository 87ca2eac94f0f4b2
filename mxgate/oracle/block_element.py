"""The element format of an MX block as its e8m0 scale sees it (OCP MX v1.0 section 6.3): the
largest element value, the exponent of its largest power of two and its mantissa bits."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BlockElement:
    name: str
    max_value: float  # the scale policies' divisor: rceil takes ceil_pow2(amax / max_value)
    emax: int  # floor, ceil and even subtract it from the amax's exponent
    mbits: int  # even rounds the amax's mantissa to this many bits first

    @property
    def even_round_bit(self) -> int:
        """What even adds to the amax's float32 bits: half an ulp of an mbits-bit mantissa."""
        return 1 << (22 - self.mbits)


E2M1 = BlockElement("e2m1", 6.0, 2, 1)  # MXFP4
E4M3FN = BlockElement("e4m3fn", 448.0, 8, 3)  # MXFP8 (E4M3)
