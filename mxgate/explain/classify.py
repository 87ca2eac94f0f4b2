"""The classifier: every differing unit gets exactly one class, in PRECEDENCE order.

Works column-wise on all differing units at once (NumPy, no per-element Python), so a 64 MB
buffer with millions of mismatches stays within seconds.
"""

from __future__ import annotations

import numpy as np

from mxgate import oracle
from mxgate.explain import codes, elements, groups, structural
from mxgate.explain.classes import CODE, UNASSIGNED
from mxgate.explain.context import Context
from mxgate.explain.diff import differing_offsets, expand_nibbles
from mxgate.explain.frame import E8M0, E8M0_WORD, F32_SCALE, FP4, FP8, GROUP, KINDS, Frame
from mxgate.explain.groups import dense_unique
from mxgate.explain.table import SCALE_BYTE, SCALE_INFERRED, SCALE_KNOWN, Table


class Classifier:
    def __init__(self, frame: Frame, ctx: Context) -> None:
        self.frame = frame
        self.ctx = ctx
        # per-row profile sets are 64-bit masks: the first 64 registered profiles
        self.profile_names = oracle.profiles.names()[:64]

    # ---- table -------------------------------------------------------------------------------

    def build(self) -> Table:
        fr = self.frame
        off = differing_offsets(fr.expected, fr.actual)
        loc = fr.locate(off)
        eb, ab = fr.expected[off], fr.actual[off]
        # kind as small ints: comparing object arrays of strings is slow at this size
        kinds = np.array([KINDS.index(f.kind) for f in fr.fields] + [-1], dtype=np.int8)
        kind = kinds[loc.field]  # field -1 picks the trailing -1
        is_fp4 = kind == KINDS.index(FP4)
        byte, nibble = expand_nibbles(eb, ab, is_fp4)
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
            loc=loc,
            exp=ue, act=ua,
            cls=np.full(n, UNASSIGNED, np.uint8), aux=np.zeros(n, np.int16),
            verified=np.zeros(n, bool), se=np.full(n, -1, np.int16), sa=np.full(n, -1, np.int16),
            x=column(np.nan, np.float32), xs=column(np.nan, np.float64), has_x=column(False, bool),
            exp_profiles=column(0, np.uint64), act_profiles=column(0, np.uint64),
        )
        self._bytes = (off, loc, eb, ab, is_fp4, byte)
        self._kind = t.kind
        t.extra["differing_bytes"] = int(off.size)
        return t

    def _of_kind(self, *names: str) -> np.ndarray:
        """Indices of the units whose field holds one of the kinds ``names``."""
        hit = self._kind == KINDS.index(names[0])
        for k in names[1:]:
            hit |= self._kind == KINDS.index(k)
        return np.flatnonzero(hit)

    def assign(self, t: Table, idx: np.ndarray, name: str, aux: object = 0,
               verified: object = False) -> None:
        """Give class ``name`` to the units ``idx`` (indices or mask) still unassigned."""
        idx = np.flatnonzero(idx) if idx.dtype == bool else idx
        free = t.cls[idx] == UNASSIGNED
        sel = idx[free]
        t.cls[sel] = CODE[name]
        t.aux[sel] = np.asarray(aux)[free] if np.ndim(aux) else aux
        t.verified[sel] = np.asarray(verified)[free] if np.ndim(verified) else verified

    # ---- pipeline ----------------------------------------------------------------------------

    def run(self) -> Table:
        t = self.build()
        self._structural(t)
        self._fill_fp4_context(t)
        self._fp4(t)
        self._fp8(t)
        self._scales(t)
        t.cls[t.cls == UNASSIGNED] = CODE["unexplained"]
        return t

    def _structural(self, t: Table) -> None:
        fr, ctx = self.frame, self.ctx
        off, loc, eb, ab, is_fp4, byte = self._bytes
        bcls = np.full(off.size, UNASSIGNED, np.uint8)
        baux = np.zeros(off.size, np.int16)
        ov = structural.index_overflow(off, fr.expected, fr.actual)
        bcls[ov != 0] = CODE["index_overflow"]
        baux[ov != 0] = ov[ov != 0]
        ut = structural.untouched(loc, ctx.written)
        take = (bcls == UNASSIGNED) & (ut >= 0)
        bcls[take] = CODE["untouched_bytes"]
        baux[take] = ut[take]
        free = np.flatnonzero(bcls == UNASSIGNED)
        name, hit = structural.layout_permutation(fr, off[free])
        if name:
            bcls[free[hit]] = CODE["layout_permutation"]
            t.extra["permutation_layout"] = name
        free = bcls == UNASSIGNED
        swap = structural.nibble_swap(eb, ab, is_fp4 & free)
        bcls[swap] = CODE["nibble_swap"]
        t.cls[:] = bcls[byte]
        t.aux[:] = baux[byte]

    # ---- FP4 data ----------------------------------------------------------------------------

    def _fp4_units(self, t: Table) -> np.ndarray:
        if not hasattr(self, "_fp4_idx"):  # decided after the structural classes
            open_ = (t.cls == UNASSIGNED) & (t.row >= 0) & (self._kind == KINDS.index(FP4))
            self._fp4_idx = np.flatnonzero(open_)
        return self._fp4_idx

    def _fill_fp4_context(self, t: Table) -> None:
        """Scales, input element and x/S for every FP4 unit (per group, deduplicated)."""
        ctx = self.ctx
        u = self._fp4_units(t)
        if u.size == 0 or ctx.ref_index < 0:
            return
        key = t.row[u] * ctx.groups + t.col[u] // GROUP
        if not ctx.has_input:
            # scales known per group: one gather each, no deduplication needed
            flat_e = None if ctx.exp_scales is None else ctx.exp_scales.reshape(-1)
            flat_a = None if ctx.act_scales is None else ctx.act_scales.reshape(-1)
            if flat_e is not None:
                t.se[u] = flat_e[key]
            if flat_a is not None:
                t.sa[u] = flat_a[key]
            self._group_key = key
            return
        uniq, inv = dense_unique(key, ctx.rows * ctx.groups)
        grow = uniq // ctx.groups
        ggrp = uniq - grow * ctx.groups
        se, sa, _ = ctx.scales(grow, ggrp)
        t.se[u], t.sa[u] = se[inv], sa[inv]
        self._groups = (u, inv, grow, ggrp, se, sa)
        in_row = ctx.input_row(t.row[u])
        cov = in_row >= 0
        uc = u[cov]
        x = ctx.x[in_row[cov], t.col[uc]]
        t.x[uc] = x
        t.has_x[uc] = True
        with np.errstate(invalid="ignore", over="ignore"):
            t.xs[uc] = x.astype(np.float64) * codes.pow2(127 - t.se[uc].astype(np.int64))
        self._profile_sets(t, uc, inv[cov], grow, ggrp)

    def _profile_sets(self, t: Table, uc: np.ndarray, ginv: np.ndarray, grow: np.ndarray,
                      ggrp: np.ndarray) -> None:
        """Bit i of exp/act_profiles: profile i, quantizing the unit's whole group with its
        own scale rule, gives that code."""
        ctx = self.ctx
        in_g = ctx.input_row(grow)
        ok = in_g >= 0
        vals = np.zeros((grow.size, GROUP), np.float32)
        if ok.any():
            vals[ok] = ctx.group_values(in_g[ok], ggrp[ok])
        lane = t.col[uc] % GROUP
        for i, name in enumerate(self.profile_names):
            packed, _ = oracle.quantize_mx(vals, name, GROUP)
            c = oracle.unpack_nibbles(packed)[ginv, lane]
            bit = np.uint64(1 << i)
            t.exp_profiles[uc] |= np.where(c == t.exp[uc], bit, 0).astype(np.uint64)
            t.act_profiles[uc] |= np.where(c == t.act[uc], bit, 0).astype(np.uint64)

    def _fp4(self, t: Table) -> None:
        u = self._fp4_units(t)
        if u.size == 0:
            return
        every = u.size == len(t)  # u is then 0..n-1: use the columns themselves, no gathers

        def take(a: np.ndarray) -> np.ndarray:
            return a if every else a[u]

        def pick(mask: np.ndarray) -> np.ndarray:
            return np.flatnonzero(mask) if every else u[mask]

        ec, ac, se, sa = take(t.exp), take(t.act), take(t.se), take(t.sa)
        x, xs, cov = take(t.x), take(t.xs), take(t.has_x)
        nan = elements.fp4_nan_inf(ec, ac, se, sa, x, cov)
        self.assign(t, pick(nan), "nan_inf", verified=cov[nan])
        self._scale_off_by_one(t)
        zero = elements.fp4_sign_of_zero(ec, ac)
        self.assign(t, pick(zero), "sign_of_zero", verified=cov[zero])
        same = elements.same_scale(se, sa)
        sat = elements.fp4_saturation(ec, ac, xs, x, cov, same)
        self.assign(t, pick(sat), "saturation", verified=cov[sat])
        tie, k = elements.fp4_tie(ec, ac, xs, cov, same)
        self.assign(t, pick(tie), "tie_direction", aux=k[tie], verified=cov[tie])

    def _scale_off_by_one(self, t: Table) -> None:
        """Groups whose e8m0 is one off and whose whole actual group is the re-quantization
        under the actual scale; with input and no actual scales, the shift is inferred."""
        fr, ctx = self.frame, self.ctx
        if not hasattr(self, "_groups"):
            if not hasattr(self, "_group_key"):
                return
            # without input only known scale pairs one apart qualify: find those groups first
            u = self._fp4_units(t)
            one_off = (t.se[u] >= 0) & (t.sa[u] >= 0) & (np.abs(t.se[u].astype(np.int32) - t.sa[u]) == 1)
            if not one_off.any():
                return
            uniq, inv = dense_unique(self._group_key, ctx.rows * ctx.groups)
            grow = uniq // ctx.groups
            ggrp = uniq - grow * ctx.groups
            se, sa, _ = ctx.scales(grow, ggrp)
            self._groups = (u, inv, grow, ggrp, se, sa)
        u, inv, grow, ggrp, se, sa = self._groups
        open_g = np.zeros(grow.size, bool)
        open_g[inv[t.cls[u] == UNASSIGNED]] = True
        good, shifted, inferable = groups.one_binade(self.frame, ctx, grow, ggrp, se, sa, open_g)
        take = good[inv]
        aux = np.where(inferable[inv], SCALE_INFERRED, SCALE_KNOWN)
        idx = u[take]
        self.assign(t, idx, "scale_off_by_one", aux=aux[take], verified=t.has_x[idx])
        t.sa[idx] = shifted[inv][take]

    def _scale_profile_sets(self, t: Table, u: np.ndarray) -> None:
        """With input: bit i set where profile i derives that e8m0 byte for the group."""
        ctx = self.ctx
        if not ctx.has_input:
            return
        rows = np.where(t.row[u] >= 0, t.row[u], 0)
        in_row = np.where(t.row[u] >= 0, ctx.input_row(rows), -1)
        cov = in_row >= 0
        uc, ir, g = u[cov], in_row[cov], t.col[u][cov]
        for i, name in enumerate(self.profile_names):
            s = ctx.derive(ir, g, name)
            bit = np.uint64(1 << i)
            t.exp_profiles[uc] |= np.where(s == t.exp[uc], bit, 0).astype(np.uint64)
            t.act_profiles[uc] |= np.where(s == t.act[uc], bit, 0).astype(np.uint64)

    # ---- FP8 data ----------------------------------------------------------------------------

    def _fp8(self, t: Table) -> None:
        u = self._of_kind(FP8)
        u = u[t.cls[u] == UNASSIGNED]
        if u.size == 0:
            return
        rules = elements.fp8_rules(t.exp[u], t.act[u], self.ctx.profile.fp8_variant)
        for name in ("nan_inf", "sign_of_zero", "saturation", "tie_direction"):
            self.assign(t, u[rules[name]], name)

    # ---- scale bytes -------------------------------------------------------------------------

    def _scales(self, t: Table) -> None:
        u = self._of_kind(E8M0, E8M0_WORD)
        u = u[t.cls[u] == UNASSIGNED]
        if u.size:
            self._scale_profile_sets(t, u)
            rules = elements.e8m0_rules(t.exp[u], t.act[u])
            self.assign(t, u[rules["nan_inf"]], "nan_inf")
            self.assign(t, u[rules["scale_off_by_one"]], "scale_off_by_one", aux=SCALE_BYTE)
        u = self._of_kind(F32_SCALE)
        u = u[t.cls[u] == UNASSIGNED]
        if u.size:
            fr = self.frame
            start = t.offsets[t.byte[u]] - t.col[u]
            words = start[:, None] + np.arange(4)
            ew = fr.expected[words].copy().view("<f4")[:, 0]
            aw = fr.actual[words].copy().view("<f4")[:, 0]
            rules = elements.f32_scale_rules(ew, aw)
            self.assign(t, u[rules["nan_inf"]], "nan_inf")
            self.assign(t, u[rules["scale_off_by_one"]], "scale_off_by_one", aux=SCALE_BYTE)
