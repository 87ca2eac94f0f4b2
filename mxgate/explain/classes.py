"""The root-cause classes of ``mxgate explain``: names, report order, precedence, definitions.

Every differing unit (a nibble of a 4-bit data field, otherwise a byte) gets exactly one class.
Classes are tried in PRECEDENCE order and the first that applies wins: buffer-level signatures
first (they explain whole regions, and random garbage inside such a region would otherwise
match element rules by chance), then group-level, then element-level rules.
"""

from __future__ import annotations

# Order the report lists them in (the order the issue and the docs use).
COUNT_KEYS: tuple[str, ...] = (
    "sign_of_zero",
    "tie_direction",
    "scale_off_by_one",
    "saturation",
    "nan_inf",
    "nibble_swap",
    "layout_permutation",
    "untouched_bytes",
    "index_overflow",
    "unexplained",
)

# Order the classifier tries them in: the first that applies wins.
PRECEDENCE: tuple[str, ...] = (
    "index_overflow",
    "untouched_bytes",
    "layout_permutation",
    "nibble_swap",
    "nan_inf",
    "scale_off_by_one",
    "sign_of_zero",
    "saturation",
    "tie_direction",
    "unexplained",
)

CODE: dict[str, int] = {name: i for i, name in enumerate(COUNT_KEYS)}
UNASSIGNED = 255

DEFINITIONS: dict[str, str] = {
    "index_overflow": "the mismatches sit where a 32-bit index wraps: a tail that starts within "
    "1 MiB after byte 2^30, 2^31 or 2^32 with no mismatch in the 1 MiB before it, or bytes "
    "holding the expected bytes from 2^31 or 2^32 further on",
    "untouched_bytes": "the byte is one the contract does not let the kernel write (zero "
    "padding, a byte no field owns, or a row whose slot was not in the slot mapping)",
    "layout_permutation": "another registered layout of the same buffer shape, fed the expected "
    "logical arrays, puts exactly the actual byte here (accepted when it explains at least "
    "half of the remaining differing bytes)",
    "nibble_swap": "the byte's two nibbles are exchanged (accepted when at least half of the "
    "remaining differing 4-bit data bytes are exchanged)",
    "nan_inf": "the input element is NaN or Inf, or the group's e8m0 scale is 0xFF; without "
    "input, +6 against -6",
    "scale_off_by_one": "the group's e8m0 bytes differ by exactly one and the whole group's "
    "actual codes are its re-quantization under the actual scale (with input: exactly; "
    "without: every element's two rounding intervals overlap); e8m0 bytes differing by one",
    "sign_of_zero": "both codes have magnitude zero (they differ only in the sign bit)",
    "saturation": "with input: |x/S| > 6 and one side is the max code with x's sign; without "
    "input: one side is +-6 and the other is at most 3.0 of the same sign, or a zero",
    "tie_direction": "with input: x/S is exactly an E2M1 midpoint and the two codes are its two "
    "neighbours; without input: the codes are adjacent magnitudes of one sign (unverified)",
    "unexplained": "none of the above",
}
