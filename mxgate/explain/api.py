"""``explain(expected, actual, layout=..., ...)``: name the root cause of every differing nibble."""

from __future__ import annotations

import numpy as np

from mxgate.explain.classify import Classifier
from mxgate.explain.context import build_context
from mxgate.explain.frame import build_frame
from mxgate.explain.profiles_match import match_profiles
from mxgate.explain.report import Report


def explain(
    expected: np.ndarray,
    actual: np.ndarray,
    layout: str,
    profile: str = "gfx950",
    input: np.ndarray | None = None,  # noqa: A002 - the issue's keyword
    scales: object = None,
    *,
    slots: np.ndarray | None = None,
    dims: dict[str, int] | None = None,
    profiles: list[str] | None = None,
) -> Report:
    """Classify every differing unit of ``actual`` against ``expected``.

    expected, actual: uint8 buffers of one layout (``layouts.get(layout).buffer_shape``), or
        for layout "packed-row" also the plain form [rows, N/2] of packed E2M1 codes.
    profile: the profile the expected bytes follow (scale decoding, re-quantization, ties).
    input: the float32/bf16 values the quantizer saw, in the layout's logical shape
        ([rows, N] plain, [T, H, D] q, [slots, D] caches; [n, D] with ``slots``).
    scales: e8m0 bytes of the FP4 data ([rows, N/32] logical, or the layout's companion scale
        buffer, or int32 words for packed rows): one array for both sides, or a pair
        (expected_scales, actual_scales). Layouts that carry scales in the buffer take none.
    slots: the slot mapping the kernel ran with; bytes of other slots must be untouched.
    dims: layout dims the buffer shape does not fix (e.g. num_heads of aiter-fp4-q-scale).
    profiles: profiles to re-derive from the input (default: all registered).
    """
    frame = build_frame(expected, actual, layout, dims)
    ctx = build_context(frame, profile, scales, input, slots)
    table = Classifier(frame, ctx).run()
    matches = match_profiles(frame, ctx, profiles) if ctx.has_input else None
    return Report(frame, ctx, table, matches)
