"""Scales given for both sides (``scales=(expected, actual)``) are compared too: a differing
e8m0 byte there is a difference, counted and classified as the e8m0 bytes that a layout
carries in its own buffer are (``nan_inf`` for 0xFF, ``scale_off_by_one`` one apart, ...)."""

from __future__ import annotations

from dataclasses import dataclass

from mxgate.explain.classify import Classifier
from mxgate.explain.context import Context
from mxgate.explain.frame import E8M0, FieldInfo, Frame, plain_frame
from mxgate.explain.table import Table
from mxgate.oracle import layouts

FIELD = "scales"  # the field name rows of these units carry (the argument's name)


@dataclass
class ScalePart:
    """The scales argument seen as one more buffer: its frame, context and units."""

    frame: Frame
    ctx: Context
    table: Table


def classify_scale_argument(frame: Frame, ctx: Context) -> ScalePart | None:
    """Units for the e8m0 bytes that differ between the two sides' scales argument, or None
    when the scales are not given for both sides as an argument (in-buffer scales are bytes
    of the buffer already; shared scales cannot differ)."""
    if ctx.scale_source != "argument" or ctx.exp_scales is None or ctx.act_scales is None:
        return None
    data = frame.fields[ctx.ref_index]
    axes = data.row_axes + ("group",)
    info = FieldInfo(FIELD, E8M0, layouts.SCALE, axes, data.row_extents + (ctx.groups,),
                     data.starts[:len(data.row_axes)] + (0,))
    sframe = plain_frame(FIELD, ctx.exp_scales, ctx.act_scales, info)
    # the same rows as the data: the input re-derives each group's byte, the slot mapping
    # says which rows the kernel may write
    sctx = Context(ctx.profile, 0, ctx.rows, ctx.groups, None, None, "none", ctx.x,
                   ctx.row_to_input, ctx.written)
    return ScalePart(sframe, sctx, Classifier(sframe, sctx).run())
