"""The classifier: every differing unit gets exactly one class, in PRECEDENCE order; and, with
the input given, the profiles each side's codes follow.

Works column-wise on all differing units at once (NumPy, no per-element Python), so a 64 MB
buffer with millions of mismatches stays within seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from mxgate import oracle
from mxgate.explain import rules
from mxgate.explain.inputs import (
    E8M0,
    E8M0_WORD,
    F32_SCALE,
    FP4,
    FP8,
    KINDS,
    Context,
    FieldInfo,
    Frame,
    Located,
    plain_frame,
)
from mxgate.explain.rules import CODE, SCALE_BYTE, SCALE_INFERRED, SCALE_KNOWN, UNASSIGNED
from mxgate.oracle import layouts
from mxgate.oracle.geometry import GROUP

_CHUNK = 1 << 24  # bytes compared per pass: bounds the temporary mask on huge buffers
_ROWS_PER_CHUNK = 4096  # rows re-derived per pass when matching profiles
SCALES_FIELD = "scales"  # the field name rows of the scales argument carry (the argument's name)


# ---- the table of differing units ------------------------------------------------------------


@dataclass
class Table:
    """One entry per differing unit (column arrays of equal length)."""

    nibble: np.ndarray  # int8: 0 low, 1 high, -1 for a byte unit
    kind: np.ndarray  # int8 index into KINDS of the unit's field, -1 none
    row: np.ndarray  # int64 logical row (-1 none)
    col: np.ndarray  # int64 dim / group / word byte (-1 none)
    byte: np.ndarray  # int64 index of the unit's byte in ``offsets`` / ``loc``
    offsets: np.ndarray  # int64 sorted offsets of the differing bytes
    loc: Located  # per differing byte: field, region, coordinates
    exp: np.ndarray  # uint8 code (nibble or byte)
    act: np.ndarray
    cls: np.ndarray  # uint8 class code
    aux: np.ndarray  # int16 class-specific detail (see rules' SCALE_* / UNTOUCHED_*)
    verified: np.ndarray  # bool: decided from the input
    se: np.ndarray  # int16 expected e8m0 of the unit's group, -1 unknown
    sa: np.ndarray  # int16 actual e8m0, -1 unknown
    x: np.ndarray  # float32 input element (NaN when unknown; see has_x)
    xs: np.ndarray  # float64 x / 2^(se-127)
    has_x: np.ndarray  # bool
    exp_profiles: np.ndarray  # uint64 bit i: profile names()[i] gives the expected code
    act_profiles: np.ndarray
    permutation_layout: str | None = None  # the layout the actual bytes follow, if one does

    def __len__(self) -> int:
        return int(self.byte.size)

    @property
    def differing_bytes(self) -> int:
        return int(self.offsets.size)

    # Per-unit views of per-byte facts, gathered on first use (classification needs none).
    @cached_property
    def offset(self) -> np.ndarray:
        """int64 flat byte offset of each unit."""
        return self.offsets[self.byte]

    @cached_property
    def field(self) -> np.ndarray:
        """int8 index into frame.fields (-1: no field)."""
        return self.loc.field[self.byte]

    @cached_property
    def region(self) -> np.ndarray:
        return self.loc.region[self.byte]

    def coord(self, i: int, j: int) -> int:
        """The j-th logical coordinate of unit i's byte."""
        return int(self.loc.coords[j][self.byte[i]])


def differing_offsets(expected: np.ndarray, actual: np.ndarray) -> np.ndarray:
    """Sorted int64 offsets where the flat buffers differ.

    Compared chunk by chunk so a multi-GiB buffer never needs a mask of its own size.
    """
    parts = []
    for start in range(0, expected.size, _CHUNK):
        stop = min(start + _CHUNK, expected.size)
        hit = np.flatnonzero(expected[start:stop] != actual[start:stop])
        if hit.size:
            parts.append(hit.astype(np.int64) + start)
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def _expand_nibbles(eb: np.ndarray, ab: np.ndarray,
                    is_nibble: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(byte index, nibble) per unit: one unit per differing nibble of a 4-bit byte (low
    nibble first), one unit (nibble -1) per other byte."""
    x = eb ^ ab
    # Two slots per byte, low then high: the nonzero slots are the units, already in order.
    slots = np.empty((eb.size, 2), bool)
    slots[:, 0] = ~is_nibble | ((x & 0x0F) != 0)
    slots[:, 1] = is_nibble & ((x & 0xF0) != 0)
    unit = np.flatnonzero(slots.reshape(-1))
    byte = unit >> 1
    nibble = (unit & 1).astype(np.int8)
    if not is_nibble.all():
        nibble[~is_nibble[byte]] = -1
    return byte, nibble


def _dense_unique(keys: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(unique keys, inverse) for small non-negative int keys, without sorting."""
    mark = np.zeros(size, bool)
    mark[keys] = True
    uniq = np.flatnonzero(mark)
    pos = np.zeros(size, np.int64)
    pos[uniq] = np.arange(uniq.size)
    return uniq, pos[keys]


def f32_words(side: np.ndarray, start: np.ndarray) -> np.ndarray:
    """The little-endian float32 words whose first bytes are at ``start`` in flat ``side``."""
    words = np.asarray(start)[..., None] + np.arange(4)
    return side[words].copy().view("<f4")[..., 0]


@dataclass
class _Groups:
    """The distinct (row, group) pairs of the FP4 units and both sides' scales for each."""

    inverse: np.ndarray  # per FP4 unit: index of its group
    row: np.ndarray
    group: np.ndarray
    se: np.ndarray
    sa: np.ndarray


# ---- the classifier --------------------------------------------------------------------------


class Classifier:
    def __init__(self, frame: Frame, ctx: Context) -> None:
        self.frame = frame
        self.ctx = ctx
        # per-row profile sets are 64-bit masks: the first 64 registered profiles
        self.profile_names = oracle.profiles.names()[:64]
        self._fp4_units = np.zeros(0, np.int64)  # FP4 units left after the buffer-level classes
        self._group_key: np.ndarray | None = None  # row * groups + group per FP4 unit
        self._groups: _Groups | None = None

    def run(self) -> Table:
        t, bytes_ = self._build()
        self._buffer_level(t, *bytes_)
        self._fp4_units = np.flatnonzero((t.cls == UNASSIGNED) & (t.row >= 0)
                                         & (t.kind == KINDS.index(FP4)))
        self._fill_fp4_context(t)
        self._fp4(t)
        self._fp8(t)
        self._scales(t)
        t.cls[t.cls == UNASSIGNED] = CODE["unexplained"]
        return t

    def _build(self) -> tuple[Table, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """The table of units, and per differing byte (expected, actual, is 4-bit, unit's byte)."""
        fr = self.frame
        off = differing_offsets(fr.expected, fr.actual)
        loc = fr.locate(off)
        eb, ab = fr.expected[off], fr.actual[off]
        # kind as small ints: comparing object arrays of strings is slow at this size
        kinds = np.array([KINDS.index(f.kind) for f in fr.fields] + [-1], dtype=np.int8)
        kind = kinds[loc.field]  # field -1 picks the trailing -1
        is_fp4 = kind == KINDS.index(FP4)
        byte, nibble = _expand_nibbles(eb, ab, is_fp4)
        shift = (nibble == 1).view(np.uint8) << np.uint8(2)  # 4 for high nibbles
        ue, ua = eb[byte] >> shift, ab[byte] >> shift
        col = loc.col[byte]
        if is_fp4.all():  # the common case: one 4-bit field, every unit a nibble
            ue &= 0xF
            ua &= 0xF
            col += nibble
        else:
            nib = nibble >= 0
            ue = np.where(nib, ue & 0xF, ue)
            ua = np.where(nib, ua & 0xF, ua)
            col += np.where(nib, nibble, 0)
        n = byte.size
        with_x = self.ctx.has_input

        # input-only columns stay read-only broadcasts without input: nothing writes them
        def column(fill, dtype):
            return np.full(n, fill, dtype) if with_x else np.broadcast_to(np.array(fill, dtype), (n,))

        t = Table(
            nibble=nibble, kind=kind[byte], row=loc.row[byte], col=col, byte=byte, offsets=off,
            loc=loc, exp=ue, act=ua,
            cls=np.full(n, UNASSIGNED, np.uint8), aux=np.zeros(n, np.int16),
            verified=np.zeros(n, bool), se=np.full(n, -1, np.int16), sa=np.full(n, -1, np.int16),
            x=column(np.nan, np.float32), xs=column(np.nan, np.float64), has_x=column(False, bool),
            exp_profiles=column(0, np.uint64), act_profiles=column(0, np.uint64),
        )
        return t, (eb, ab, is_fp4, byte)

    def _of_kind(self, t: Table, *names: str) -> np.ndarray:
        """Indices of the still unassigned units whose field holds one of the kinds ``names``."""
        hit = np.isin(t.kind, [KINDS.index(k) for k in names])
        return np.flatnonzero(hit & (t.cls == UNASSIGNED))

    @staticmethod
    def assign(t: Table, idx: np.ndarray, name: str, aux: object = 0,
               verified: object = False) -> None:
        """Give class ``name`` to the units ``idx`` (indices or mask) still unassigned."""
        idx = np.flatnonzero(idx) if idx.dtype == bool else idx
        free = t.cls[idx] == UNASSIGNED
        sel = idx[free]
        t.cls[sel] = CODE[name]
        t.aux[sel] = np.asarray(aux)[free] if np.ndim(aux) else aux
        t.verified[sel] = np.asarray(verified)[free] if np.ndim(verified) else verified

    def _mark_profiles(self, t: Table, units: np.ndarray,
                       code_under: Callable[[str], np.ndarray]) -> None:
        """Bit i of exp/act_profiles of ``units``: profile i gives that side's code, where
        ``code_under(profile name)`` is the code each unit gets under a profile."""
        for i, name in enumerate(self.profile_names):
            c = code_under(name)
            bit = np.uint64(1 << i)
            t.exp_profiles[units] |= np.where(c == t.exp[units], bit, 0).astype(np.uint64)
            t.act_profiles[units] |= np.where(c == t.act[units], bit, 0).astype(np.uint64)

    # ---- buffer level ------------------------------------------------------------------------

    def _buffer_level(self, t: Table, eb: np.ndarray, ab: np.ndarray, is_fp4: np.ndarray,
                      byte: np.ndarray) -> None:
        """Index overflow, untouched bytes, layout permutation, nibble swap: per byte."""
        fr, ctx = self.frame, self.ctx
        off, loc = t.offsets, t.loc
        bcls = np.full(off.size, UNASSIGNED, np.uint8)
        baux = np.zeros(off.size, np.int16)
        ov = rules.index_overflow(off, fr.expected, fr.actual)
        bcls[ov != 0] = CODE["index_overflow"]
        baux[ov != 0] = ov[ov != 0]
        ut = rules.untouched(loc, ctx.written)
        take = (bcls == UNASSIGNED) & (ut >= 0)
        bcls[take] = CODE["untouched_bytes"]
        baux[take] = ut[take]
        free = np.flatnonzero(bcls == UNASSIGNED)
        name, hit = rules.layout_permutation(fr, off[free])
        if name:
            bcls[free[hit]] = CODE["layout_permutation"]
            t.permutation_layout = name
        free = bcls == UNASSIGNED
        swap = rules.nibble_swap(eb, ab, is_fp4 & free)
        bcls[swap] = CODE["nibble_swap"]
        t.cls[:] = bcls[byte]
        t.aux[:] = baux[byte]

    # ---- FP4 data ----------------------------------------------------------------------------

    def _unique_groups(self) -> _Groups:
        ctx = self.ctx
        uniq, inv = _dense_unique(self._group_key, ctx.rows * ctx.groups)
        grow = uniq // ctx.groups
        ggrp = uniq - grow * ctx.groups
        se, sa = ctx.scales(grow, ggrp)
        return _Groups(inv, grow, ggrp, se, sa)

    def _fill_fp4_context(self, t: Table) -> None:
        """Scales, input element and x/S for every FP4 unit (per group, deduplicated)."""
        ctx = self.ctx
        u = self._fp4_units
        if u.size == 0 or ctx.ref_index < 0:
            return
        self._group_key = t.row[u] * ctx.groups + t.col[u] // GROUP
        if not ctx.has_input:
            # scales known per group: one gather each, no deduplication needed
            if ctx.exp_scales is not None:
                t.se[u] = ctx.exp_scales.reshape(-1)[self._group_key]
            if ctx.act_scales is not None:
                t.sa[u] = ctx.act_scales.reshape(-1)[self._group_key]
            return
        g = self._groups = self._unique_groups()
        t.se[u], t.sa[u] = g.se[g.inverse], g.sa[g.inverse]
        in_row = ctx.input_row(t.row[u])
        cov = in_row >= 0
        uc = u[cov]
        x = ctx.x[in_row[cov], t.col[uc]]
        t.x[uc] = x
        t.has_x[uc] = True
        with np.errstate(invalid="ignore", over="ignore"):
            t.xs[uc] = x.astype(np.float64) * rules.pow2(127 - t.se[uc].astype(np.int64))
        self._fp4_profile_sets(t, uc, g.inverse[cov], g)

    def _fp4_profile_sets(self, t: Table, uc: np.ndarray, ginv: np.ndarray, g: _Groups) -> None:
        """Profile i's bit: quantizing the unit's whole group with its own scale rule gives
        that code."""
        ctx = self.ctx
        in_g = ctx.input_row(g.row)
        ok = in_g >= 0
        vals = np.zeros((g.row.size, GROUP), np.float32)
        if ok.any():
            vals[ok] = ctx.group_values(in_g[ok], g.group[ok])
        lane = t.col[uc] % GROUP

        def code_under(name: str) -> np.ndarray:
            packed, _ = oracle.quantize_mx(vals, name, GROUP)
            return oracle.unpack_nibbles(packed)[ginv, lane]

        self._mark_profiles(t, uc, code_under)

    def _fp4(self, t: Table) -> None:
        u = self._fp4_units
        if u.size == 0:
            return
        every = u.size == len(t)  # u is then 0..n-1: use the columns themselves, no gathers

        def take(a: np.ndarray) -> np.ndarray:
            return a if every else a[u]

        def pick(mask: np.ndarray) -> np.ndarray:
            return np.flatnonzero(mask) if every else u[mask]

        ec, ac, se, sa = take(t.exp), take(t.act), take(t.se), take(t.sa)
        x, xs, cov = take(t.x), take(t.xs), take(t.has_x)
        nan = rules.fp4_nan_inf(ec, ac, se, sa, x, cov)
        self.assign(t, pick(nan), "nan_inf", verified=cov[nan])
        self._scale_off_by_one(t)
        zero = rules.fp4_sign_of_zero(ec, ac)
        self.assign(t, pick(zero), "sign_of_zero", verified=cov[zero])
        same = rules.same_scale(se, sa)
        sat = rules.fp4_saturation(ec, ac, xs, x, cov, same)
        self.assign(t, pick(sat), "saturation", verified=cov[sat])
        tie, k = rules.fp4_tie(ec, ac, xs, cov, same)
        self.assign(t, pick(tie), "tie_direction", aux=k[tie], verified=cov[tie])

    def _scale_off_by_one(self, t: Table) -> None:
        """Groups whose e8m0 is one off and whose whole actual group is the re-quantization
        under the actual scale; with input and no actual scales, the shift is inferred."""
        if self._group_key is None:
            return
        u = self._fp4_units
        if self._groups is None:
            # without input only known scale pairs one apart qualify: find those groups first
            one_off = (t.se[u] >= 0) & (t.sa[u] >= 0) & (np.abs(t.se[u].astype(np.int32) - t.sa[u]) == 1)
            if not one_off.any():
                return
            self._groups = self._unique_groups()
        g = self._groups
        inv = g.inverse
        open_g = np.zeros(g.row.size, bool)
        open_g[inv[t.cls[u] == UNASSIGNED]] = True
        good, shifted, inferable = rules.one_binade(self.frame, self.ctx, g.row, g.group,
                                                    g.se, g.sa, open_g)
        take = good[inv]
        aux = np.where(inferable[inv], SCALE_INFERRED, SCALE_KNOWN)
        idx = u[take]
        self.assign(t, idx, "scale_off_by_one", aux=aux[take], verified=t.has_x[idx])
        t.sa[idx] = shifted[inv][take]

    # ---- FP8 data ----------------------------------------------------------------------------

    def _fp8(self, t: Table) -> None:
        u = self._of_kind(t, FP8)
        if u.size == 0:
            return
        found = rules.fp8_rules(t.exp[u], t.act[u], self.ctx.profile.fp8_variant)
        for name in ("nan_inf", "sign_of_zero", "saturation", "tie_direction"):
            self.assign(t, u[found[name]], name)

    # ---- scale bytes -------------------------------------------------------------------------

    def _scales(self, t: Table) -> None:
        u = self._of_kind(t, E8M0, E8M0_WORD)
        if u.size:
            self._scale_profile_sets(t, u)
            self._assign_scale_rules(t, u, rules.e8m0_rules(t.exp[u], t.act[u]))
        u = self._of_kind(t, F32_SCALE)
        if u.size:
            start = t.offsets[t.byte[u]] - t.col[u]
            ew, aw = f32_words(self.frame.expected, start), f32_words(self.frame.actual, start)
            self._assign_scale_rules(t, u, rules.f32_scale_rules(ew, aw))

    def _assign_scale_rules(self, t: Table, u: np.ndarray, found: dict[str, np.ndarray]) -> None:
        self.assign(t, u[found["nan_inf"]], "nan_inf")
        self.assign(t, u[found["scale_off_by_one"]], "scale_off_by_one", aux=SCALE_BYTE)

    def _scale_profile_sets(self, t: Table, u: np.ndarray) -> None:
        """With input: bit i set where profile i derives that e8m0 byte for the group."""
        ctx = self.ctx
        if not ctx.has_input:
            return
        rows = np.where(t.row[u] >= 0, t.row[u], 0)
        in_row = np.where(t.row[u] >= 0, ctx.input_row(rows), -1)
        cov = in_row >= 0
        uc, ir, g = u[cov], in_row[cov], t.col[u][cov]
        self._mark_profiles(t, uc, lambda name: ctx.derive(ir, g, name))


# ---- the scales argument ---------------------------------------------------------------------


@dataclass
class ScalePart:
    """Scales given for both sides (``scales=(expected, actual)``) seen as one more buffer: its
    frame, context and units. A differing e8m0 byte there is a difference, counted and
    classified as the e8m0 bytes that a layout carries in its own buffer are."""

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
    info = FieldInfo(SCALES_FIELD, E8M0, layouts.SCALE, axes, data.row_extents + (ctx.groups,),
                     data.starts[:len(data.row_axes)] + (0,))
    sframe = plain_frame(SCALES_FIELD, ctx.exp_scales, ctx.act_scales, info)
    # the same rows as the data: the input re-derives each group's byte, the slot mapping
    # says which rows the kernel may write
    sctx = Context(ctx.profile, 0, ctx.rows, ctx.groups, None, None, "none", ctx.x,
                   ctx.row_to_input, ctx.written)
    return ScalePart(sframe, sctx, Classifier(sframe, sctx).run())


# ---- profiles re-derived from the input -------------------------------------------------------


def _nibble_mismatches(a: np.ndarray, b: np.ndarray) -> int:
    x = a ^ b
    return int(np.count_nonzero(x & 0x0F) + np.count_nonzero(x & 0xF0))


def match_profiles(frame: Frame, ctx: Context, profiles: list[str] | None = None) -> dict[str, object]:
    """Re-derive the codes under every profile and count, per profile, how many nibbles (and
    e8m0 bytes) differ from the actual and from the expected buffer.

    {'profiles': {name: {'actual': {...}, 'expected': {...}}}, 'matching': [...],
    'expected_matching': [...], 'compared': {...}}. A profile matches a side when its codes
    and (where that side's scales are known) its e8m0 bytes equal that side's everywhere the
    input covers."""
    names = list(profiles) if profiles is not None else oracle.profiles.names()
    f = frame.fields[ctx.ref_index]
    data = f.kind == FP4  # else a scale layout: its e8m0 bytes are the codes
    covered = np.flatnonzero(ctx.row_to_input >= 0)
    sides = (("actual", frame.actual, ctx.act_scales), ("expected", frame.expected, ctx.exp_scales))
    # e8m0 bytes are counted beside the codes only for data whose side's scales are known
    tally = {n: {side: {"codes": 0, "scales": 0 if data and side_scales is not None else None}
                 for side, _, side_scales in sides}
             for n in names}
    cols = np.arange(0, f.extents[-1], 2) if data else np.arange(ctx.groups)
    compared = 0
    for start in range(0, covered.size, _ROWS_PER_CHUNK):
        rows = covered[start:start + _ROWS_PER_CHUNK]
        x = ctx.x[ctx.row_to_input[rows]]
        off = frame.offsets(ctx.ref_index, rows[:, None], cols[None, :])
        compared += x.size if data else off.size
        for name in names:
            packed, scales = oracle.quantize_mx(x, name, GROUP)
            for side, buf, side_scales in sides:
                entry = tally[name][side]
                if not data:
                    entry["codes"] += int(np.count_nonzero(scales != buf[off]))
                    continue
                entry["codes"] += _nibble_mismatches(packed, buf[off])
                if side_scales is not None:
                    entry["scales"] += int(np.count_nonzero(scales != side_scales[rows]))
    matching = {side: [n for n in names if tally[n][side]["codes"] == 0
                       and not tally[n][side]["scales"]] for side, _, _ in sides}
    unit = "nibbles" if data else "scale bytes"
    return {"profiles": tally, "matching": matching["actual"],
            "expected_matching": matching["expected"],
            "compared": {unit: compared, "rows": int(covered.size)}}
