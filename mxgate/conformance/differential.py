"""Differential search: two backends on the same Hypothesis inputs, every differing output unit
sorted by what the oracle says about it.

For one op, each input drawn from the boundary-class strategies of :mod:`mxgate.inputs.strategies` runs on
both backends (in worker processes, so a crash or a hang is reported, not fatal). Their outputs
are compared unit by unit (an E2M1 code or nibble, a byte, a bf16 or float32 word); a differing
unit is

- *explained* when the oracle under A's declared profile reproduces A's unit there and the
  oracle under B's declared profile reproduces B's: the two profiles differ, and the profile
  fields that account for it are named (the smallest set of fields, up to four, whose change
  from A's values to B's turns the oracle's unit into B's there);
- *unexplained* otherwise; the side whose unit differs from the oracle under its own declared
  profile *deviates* (possibly both).

Outputs whose contract compares NaN as any NaN (the decoders' ``nan_equal`` rule of the golden
vectors) count a NaN against a NaN as equal, and say how many such units there were.

Each new kind of unexplained difference (output, deviating side, A's unit, B's unit) makes the
Hypothesis run fail; Hypothesis shrinks the input to a minimal one showing it, the search
records that case and goes on with the rest of the budget until ``max_cases`` kinds are shrunk.
"""

from __future__ import annotations

import time
import zlib
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from itertools import combinations
from typing import Any, Callable, Iterator, Sequence

import numpy as np
from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import Flaky
from hypothesis.reporting import with_reporter

from mxgate.op_table import OpName
from mxgate import oracle
from mxgate.inputs import boundaries, strategies
from mxgate.kernels.base import Backend, OutsideContract
from mxgate.kernels.isolation import BackendCrashed, BackendFault
from mxgate.oracle import profiles as _profiles
from mxgate.oracle.formats.e4m3 import SATURATE_OF_OVERFLOW as _SATURATE
from mxgate.oracle.geometry import GROUP
from mxgate.oracle.profiles import Profile

SIDES = ("A", "B")

# Unit kinds: how an output is cut into units, printed, and classified by mxgate.explain.
E2M1, NIBBLES, FP8_FN, FP8_FNUZ, E8M0, F32_SCALE, F32, BF16 = (
    "e2m1", "nibbles", "e4m3fn", "e4m3fnuz", "e8m0", "f32_scale", "f32", "bf16")


@dataclass(frozen=True)
class OpSpec:
    """One op the search covers: its reference under a profile and how its outputs compare."""

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    kinds: tuple[str, ...]  # one unit kind per output
    reference: Callable[..., tuple[np.ndarray, ...]]  # (profile, *args) -> outputs
    nan_equal: tuple[bool, ...] = ()  # per output: any NaN matches any NaN
    blocks: bool = False  # outputs are (packed nibbles, e8m0 per group of GROUP) of rows of x

    def compare_rules(self) -> dict[str, str]:
        rules = self.nan_equal or (False,) * len(self.outputs)
        return {o: "nan_equal" if n else "bits" for o, n in zip(self.outputs, rules)}


def _bf16_f32(x: np.ndarray) -> np.ndarray:
    return oracle.bf16_to_f32(np.asarray(x, np.uint16))


def _specs() -> dict[str, OpSpec]:
    def encode_e4m3(variant: str):
        return lambda p, x: (oracle.encode_e4m3(x, variant, saturate=_SATURATE[p.fp8_overflow]),)

    def decode_e4m3(variant: str):
        return lambda p, c: (oracle.decode_e4m3(c, variant),)

    table = [
        OpSpec(OpName.E2M1_ENCODE, ("x",), ("codes",), (E2M1,), lambda p, x: (oracle.encode_e2m1(x, p),)),
        OpSpec(OpName.E2M1_DECODE, ("codes",), ("values",), (F32,), lambda p, c: (oracle.decode_e2m1(c),)),
        OpSpec(OpName.E4M3FN_ENCODE, ("x",), ("codes",), (FP8_FN,), encode_e4m3("fn")),
        OpSpec(OpName.E4M3FNUZ_ENCODE, ("x",), ("codes",), (FP8_FNUZ,), encode_e4m3("fnuz")),
        OpSpec(OpName.E4M3FN_DECODE, ("codes",), ("values",), (F32,), decode_e4m3("fn"), (True,)),
        OpSpec(OpName.E4M3FNUZ_DECODE, ("codes",), ("values",), (F32,), decode_e4m3("fnuz"), (True,)),
        OpSpec(OpName.BF16_ROUND, ("x",), ("bits",), (BF16,), lambda p, x: (oracle.bf16_bits(x, p),)),
        OpSpec(OpName.E8M0_DECODE, ("codes",), ("values",), (F32_SCALE,), lambda p, c: (oracle.decode_e8m0(c, p),),
               (True,)),
        OpSpec(OpName.E8M0_SCALE, ("amax",), ("e8m0",), (E8M0,), lambda p, a: (oracle.e8m0_scale(a, p),)),
        OpSpec(OpName.UE8M0_ROUND, ("s",), ("scale",), (F32_SCALE,),
               lambda p, s: (oracle.scales.ue8m0_round(s, p.ue8m0_rounding),)),
        OpSpec(OpName.MX_QUANTIZE, ("x",), ("packed", "e8m0"), (NIBBLES, E8M0), lambda p, x: oracle.quantize_mx(x, p),
               blocks=True),
    ]
    for op in (OpName.FP4_INDEXER_QUANTIZE, OpName.FP4_INDEXER_QUANTIZE_ROWS):
        table.append(OpSpec(op, ("x_bf16",), ("packed", "e8m0"), (NIBBLES, E8M0),
                            lambda p, x: oracle.quantize_mx(_bf16_f32(x), p), blocks=True))
    return {s.name: s for s in table}


SPECS: dict[str, OpSpec] = _specs()  # the ops of mxgate.inputs.strategies.COVERED_OPS, in that order


def covered(op: str) -> bool:
    """Whether the search can generate inputs for ``op`` and judge its outputs."""
    return op in SPECS


# ---- sorting the differences of one input ---------------------------------------------------


@dataclass(frozen=True)
class Difference:
    """One differing unit of one output (index -1: the whole output, shape or dtype)."""

    output: str
    index: int
    a: int | None
    b: int | None
    oracle_a: int | None
    oracle_b: int | None
    explained: bool
    fields: tuple[str, ...] = ()  # explained: the profile fields that account for it
    deviating: tuple[str, ...] = ()  # unexplained: "A", "B" or both
    note: str = ""

    @property
    def signature(self) -> tuple[object, ...]:
        return (self.output, self.deviating, self.a, self.b, self.note)


@dataclass
class Sorted:
    """The differences of one input, and what was compared."""

    differences: list[Difference]
    units: int  # units compared
    nan_equal: int  # units equal only because any NaN matches any NaN

    @property
    def explained(self) -> list[Difference]:
        return [d for d in self.differences if d.explained]

    @property
    def unexplained(self) -> list[Difference]:
        return [d for d in self.differences if not d.explained]


def _as_outputs(spec: OpSpec, result: Any) -> tuple[Any, ...] | str:
    if isinstance(result, dict):
        result = tuple(result.values())
    if not isinstance(result, (tuple, list)):
        result = (result,)
    if len(result) != len(spec.outputs):
        return f"returned {len(result)} output(s), {spec.name} has {len(spec.outputs)} ({', '.join(spec.outputs)})"
    return tuple(np.asarray(r) for r in result)


def units(kind: str, array: np.ndarray) -> np.ndarray:
    """The output cut into comparable units: nibbles of packed codes, else one per element,
    as unsigned integers (float words by their bits)."""
    a = np.ascontiguousarray(array)
    if kind == NIBBLES:
        return oracle.unpack_nibbles(a).reshape(-1).astype(np.int64)
    if a.dtype.kind == "f":
        return a.view(f"u{a.dtype.itemsize}").reshape(-1).astype(np.int64)
    return a.reshape(-1).astype(np.int64)


def _is_nan(kind: str, u: np.ndarray) -> np.ndarray:
    if kind in (F32, F32_SCALE):
        return (u & 0x7FFFFFFF) > 0x7F800000
    return np.zeros(u.shape, bool)


def _shape_note(side: np.ndarray, ref: np.ndarray) -> str:
    if side.dtype != ref.dtype:
        return f"dtype {side.dtype} where the op gives {ref.dtype}"
    if side.shape != ref.shape:
        return f"shape {side.shape} where the op gives {ref.shape}"
    return ""


def sort_differences(spec: OpSpec, args: tuple, out_a: Any, out_b: Any, profile_a: str | Profile,
                     profile_b: str | Profile) -> Sorted:
    """Compare A's and B's outputs for ``args`` and sort every differing unit (see module doc)."""
    pa, pb = _profiles.get(profile_a), _profiles.get(profile_b)
    ref_a, ref_b = spec.reference(pa, *args), spec.reference(pb, *args)
    got = {"A": _as_outputs(spec, out_a), "B": _as_outputs(spec, out_b)}
    found: list[Difference] = []
    structural = {s: got[s] for s in SIDES if isinstance(got[s], str)}
    if structural:
        for s, note in structural.items():
            found.append(Difference("*", -1, None, None, None, None, False, deviating=(s,), note=note))
        return Sorted(found, 0, 0)
    total = nan_equal = 0
    attribution: _Attribution | None = None
    for k, (name, kind) in enumerate(zip(spec.outputs, spec.kinds)):
        a, b = got["A"][k], got["B"][k]
        notes = {"A": _shape_note(a, ref_a[k]), "B": _shape_note(b, ref_b[k])}
        if any(notes.values()):
            if a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes():
                continue  # both gave the same (wrong) form: no difference between them
            bad = tuple(s for s in SIDES if notes[s])
            found.append(Difference(name, -1, None, None, None, None, False, deviating=bad,
                                    note="; ".join(f"{s} {notes[s]}" for s in bad)))
            continue
        ua, ub, oa, ob = units(kind, a), units(kind, b), units(kind, ref_a[k]), units(kind, ref_b[k])
        total += ua.size
        equal_nan = bool(spec.nan_equal and spec.nan_equal[k])
        if equal_nan:
            na, nb, noa, nob = (_is_nan(kind, u) for u in (ua, ub, oa, ob))
            differ = (ua != ub) & ~(na & nb)
            nan_equal += int(np.count_nonzero((ua != ub) & na & nb))
            ok_a, ok_b = (ua == oa) | (na & noa), (ub == ob) | (nb & nob)
        else:
            differ = ua != ub
            ok_a, ok_b = ua == oa, ub == ob
        idx = np.flatnonzero(differ)
        if idx.size == 0:
            continue
        explained = ok_a[idx] & ok_b[idx]
        if explained.any() and attribution is None:
            attribution = _Attribution(spec, args, pa, pb)
        for j, i in enumerate(idx.tolist()):
            if explained[j] and attribution is not None:
                fields = attribution.fields(k, i, int(ub[i]))
                found.append(Difference(name, i, int(ua[i]), int(ub[i]), int(oa[i]), int(ob[i]), True, fields))
            else:
                dev = tuple(s for s, ok in (("A", ok_a[i]), ("B", ok_b[i])) if not ok)
                found.append(Difference(name, i, int(ua[i]), int(ub[i]), int(oa[i]), int(ob[i]), False,
                                        deviating=dev))
    return Sorted(found, total, nan_equal)


class _Attribution:
    """Which profile fields account for an explained unit: the smallest set of fields (up to
    four, in field order) that, set to B's values in A's profile, turns the oracle's unit into
    B's; every differing field when no such set exists."""

    MAX_FIELDS = 4

    def __init__(self, spec: OpSpec, args: tuple, pa: Profile, pb: Profile) -> None:
        self.spec, self.args, self.pa = spec, args, pa
        self.values = {name: vb for name, (_, vb) in pa.differences(pb).items()}
        self._units: dict[tuple[tuple[str, ...], int], np.ndarray | None] = {}

    def _unit_array(self, combo: tuple[str, ...], k: int) -> np.ndarray | None:
        key = (combo, k)
        if key not in self._units:
            try:
                outputs = self.spec.reference(replace(self.pa, **{f: self.values[f] for f in combo}), *self.args)
            except (ValueError, TypeError):  # a combination of field values the oracle refuses
                outputs = None
            for j, kind in enumerate(self.spec.kinds):
                self._units[(combo, j)] = None if outputs is None else units(kind, outputs[j])
        return self._units[key]

    def fields(self, k: int, i: int, ub: int) -> tuple[str, ...]:
        names = tuple(self.values)
        for size in range(1, min(self.MAX_FIELDS, len(names)) + 1):
            for combo in combinations(names, size):
                u = self._unit_array(combo, k)
                if u is not None and int(u[i]) == ub:
                    return combo
        return names


# ---- explain's classification of a differing unit ------------------------------------------


def classify(spec: OpSpec, args: tuple, out_a: tuple, out_b: tuple, profile_a: str,
             diffs: Sequence[Difference]) -> list[tuple[str, str]]:
    """(class, detail) from mxgate.explain for each difference, A taken as the expected side.

    E2M1 codes go through explain's element rules with the input at scale 2^0, FP8 codes, e8m0
    bytes and float32 scale words through its rules for those units; packed MX rows through
    ``explain(..., layout="packed-row")`` itself. Other outputs have no explain classes.
    """
    from mxgate.explain import rules
    from mxgate.explain.rules import DEFINITIONS, PRECEDENCE

    out: list[tuple[str, str]] = []
    report_rows: dict[tuple[str, int], dict] | None = None
    for d in diffs:
        if d.index < 0:
            out.append(("unexplained", d.note))
            continue
        kind = spec.kinds[spec.outputs.index(d.output)]
        if spec.blocks:  # packed nibbles and their e8m0 bytes: explain's own report
            if report_rows is None:
                report_rows = _explain_rows(spec, args, out_a, out_b, profile_a)
            row = report_rows.get(("buffer" if kind == NIBBLES else "scales", d.index))
            out.append((row["class"], row["detail"]) if row else ("unexplained", "not in explain's report"))
            continue
        ec, ac = np.array([d.a], np.int64), np.array([d.b], np.int64)
        if kind == E2M1:
            x = np.asarray(args[0], np.float32).reshape(-1)[[d.index]]
            ec8, ac8 = ec.astype(np.uint8), ac.astype(np.uint8)
            scale = np.full(1, 127, np.int16)  # e2m1.encode has no scale: x / 2^0
            with_input = np.ones(1, bool)
            same = rules.same_scale(scale, scale)
            xs = x.astype(np.float64)
            masks = {"nan_inf": rules.fp4_nan_inf(ec8, ac8, scale, scale, x, with_input),
                     "sign_of_zero": rules.fp4_sign_of_zero(ec8, ac8),
                     "saturation": rules.fp4_saturation(ec8, ac8, xs, x, with_input, same),
                     "tie_direction": rules.fp4_tie(ec8, ac8, xs, with_input, same)[0]}
        elif kind in (FP8_FN, FP8_FNUZ):
            masks = rules.fp8_rules(ec.astype(np.uint8), ac.astype(np.uint8), kind[len("e4m3"):])
        elif kind == E8M0:
            masks = rules.e8m0_rules(ec, ac)
        elif kind == F32_SCALE:
            masks = rules.f32_scale_rules(ec.astype(np.uint32).view(np.float32), ac.astype(np.uint32).view(np.float32))
        else:
            out.append(("-", f"explain has no classes for {kind} outputs"))
            continue
        name = next((c for c in PRECEDENCE if c in masks and bool(masks[c][0])), "unexplained")
        out.append((name, DEFINITIONS[name]))
    return out


def _explain_rows(spec: OpSpec, args: tuple, out_a: tuple, out_b: tuple, profile_a: str) -> dict[tuple[str, int], dict]:
    """explain's rows for MX rows, keyed by (source, flat unit index) as ``units`` numbers them."""
    from mxgate.explain import explain

    x = args[0]
    x32 = _bf16_f32(x) if spec.name.startswith("fp4_indexer") else np.asarray(x, np.float32)
    x32 = x32.reshape(-1, x32.shape[-1])
    pa, ea = (np.asarray(o).reshape(x32.shape[0], -1) for o in out_a)
    pb, eb = (np.asarray(o).reshape(x32.shape[0], -1) for o in out_b)
    report = explain(pa, pb, layout="packed-row", profile=profile_a, input=x32, scales=(ea, eb))
    keyed: dict[tuple[str, int], dict] = {}
    width, groups = x32.shape[1], ea.shape[1]
    for row in report.rows:
        c = row["coords"]
        if row["source"] == "buffer":
            keyed[("buffer", c["row"] * width + c["dim"])] = row
        else:
            keyed[("scales", c["row"] * groups + c["group"])] = row
    return keyed


# ---- the search ----------------------------------------------------------------------------


@dataclass
class Shrunk:
    """A minimal input showing at least one new kind of unexplained difference."""

    op: str
    args: tuple
    out_a: tuple
    out_b: tuple
    differences: list[Difference]  # every unexplained difference of the minimal input
    new: list[Difference]  # those whose kind was new when it was found
    classes: list[tuple[str, str]]  # explain's (class, detail) of each of ``new``


@dataclass
class Fault:
    side: str
    cause: str
    args: tuple


@dataclass
class OpResult:
    op: str
    profile_a: str
    profile_b: str
    examples: int = 0
    units: int = 0
    explained: Counter = field(default_factory=Counter)  # fields tuple -> units
    unexplained: Counter = field(default_factory=Counter)  # deviating sides tuple -> units
    nan_equal: int = 0
    outside_contract: int = 0
    kinds: set = field(default_factory=set)  # kinds (signatures) of the unexplained differences seen
    cases: list[Shrunk] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def explained_total(self) -> int:
        return sum(self.explained.values())

    @property
    def unexplained_total(self) -> int:
        return sum(self.unexplained.values())

    @property
    def clean(self) -> bool:
        """Nothing unexplained: no unexplained unit, no fault of either side, nothing irreproducible."""
        return not self.unexplained and not self.faults and not self.notes


class _NewKind(Exception):
    def __init__(self, args: tuple, out_a: tuple, out_b: tuple, result: Sorted, new: list[Difference]) -> None:
        super().__init__(f"{len(new)} new kind(s) of unexplained difference")
        self.op_args, self.out_a, self.out_b, self.result, self.new = args, out_a, out_b, result, new


class _SideFault(Exception):
    def __init__(self, side: str, error: Exception) -> None:
        super().__init__(str(error))
        self.side, self.error = side, error


def op_seed(seed: int, op: str, attempt: int) -> int:
    """The Hypothesis seed of one attempt of one op: fixed by the run's seed."""
    return zlib.crc32(f"{seed}:{op}:{attempt}".encode())


@contextmanager
def _seed_only_generation() -> Iterator[None]:
    """Hypothesis (6.13x on) mixes literals it finds in the source of the local modules loaded
    in the process into about one draw in twenty. The inputs of a seed would then change with
    any edit of any mxgate module, and with which modules a run happened to import before: here
    they depend on the seed, the strategies and the Hypothesis version only. (Hypothesis has no
    setting for this; where its internals differ, generation is left as it is.)"""
    try:
        from hypothesis.internal.conjecture import providers
        empty, local, cache = providers.Constants(), providers._get_local_constants, providers.CONSTANTS_CACHE
    except (ImportError, AttributeError):
        yield
        return
    cache.cache.clear()  # cached (global, local) constant pools per choice kind
    providers._get_local_constants = lambda: empty
    try:
        yield
    finally:
        providers._get_local_constants = local
        cache.cache.clear()


def _settings(examples: int) -> settings:
    return settings(max_examples=examples, database=None, deadline=None, derandomize=False, print_blob=False,
                    phases=(Phase.generate, Phase.shrink), report_multiple_bugs=False,
                    suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet)


def diff_op(op: str, a: Backend, b: Backend, *, examples: int, seed: int, max_cases: int) -> OpResult:
    """Search ``examples`` inputs of ``op`` for differences between ``a`` and ``b`` (module doc)."""
    spec = SPECS[op]
    op_a, op_b = a.op(op), b.op(op)
    result = OpResult(op, op_a.profile, op_b.profile)
    strategy = strategies.strategy(op)
    start = time.monotonic()
    shrunk_kinds: set[tuple[object, ...]] = set()  # kinds a shrunk case already shows
    fault_kinds: set[tuple[str, str]] = set()
    crashed = False  # a crash or hang ends the op: every later call would crash or wait again

    def call(side: str, run: Callable, args: tuple) -> Any:
        try:  # each side gets its own copy: an op writing into its inputs cannot touch the other's
            return run(*[np.copy(x) if isinstance(x, np.ndarray) else x for x in args])
        except BackendFault as error:  # raised, crashed, hung, wrote into its input, refused it
            raise _SideFault(side, error) from None

    attempt = 0
    while not crashed and result.examples < examples:
        hunting = len(result.cases) < max_cases
        state = {"shrinking": False}

        @hypothesis_seed(op_seed(seed, op, attempt))
        @_settings(examples - result.examples)
        @given(strategy)
        def probe(args: tuple) -> None:
            nonlocal crashed
            if crashed:
                return
            searching = not state["shrinking"]
            try:
                out_a = call("A", op_a.run, args)
                out_b = call("B", op_b.run, args)
            except OutsideContract:  # one side defines no behaviour for this input
                if searching:
                    result.examples += 1
                    result.outside_contract += 1
                return
            except _SideFault as fault:
                crash = isinstance(fault.error, BackendCrashed)
                crashed = crashed or crash
                cause = getattr(fault.error, "cause", str(fault.error))
                if searching:
                    result.examples += 1
                if (searching or crash) and (fault.side, cause) not in fault_kinds:
                    fault_kinds.add((fault.side, cause))
                    result.faults.append(Fault(fault.side, cause, args))
                return
            sorted_ = sort_differences(spec, args, out_a, out_b, result.profile_a, result.profile_b)
            if searching:
                result.examples += 1
                result.units += sorted_.units
                result.nan_equal += sorted_.nan_equal
                for d in sorted_.differences:
                    if d.explained:
                        result.explained[d.fields] += 1
                    else:
                        result.unexplained[d.deviating] += 1
                        result.kinds.add(d.signature)
            new = [d for d in sorted_.unexplained if d.signature not in shrunk_kinds]
            if new and hunting:
                state["shrinking"] = True  # from here on Hypothesis shrinks: calls are not counted
                raise _NewKind(args, out_a, out_b, sorted_, new)

        try:
            with with_reporter(lambda _text: None), _seed_only_generation():
                probe()
            break  # the budget ran out without a new kind
        except _NewKind as found:  # raised again by Hypothesis' replay of the minimal input
            outs_a, outs_b = _as_outputs(spec, found.out_a), _as_outputs(spec, found.out_b)
            shrunk_kinds.update(d.signature for d in found.result.unexplained)
            classes = classify(spec, found.op_args, outs_a, outs_b, result.profile_a, found.new)
            result.cases.append(Shrunk(op, found.op_args, outs_a, outs_b, found.result.unexplained, found.new, classes))
        except Flaky as error:
            if not crashed:  # a crash while shrinking is reported as the fault it is
                result.notes.append(f"not reproducible: the same input gave different outputs ({type(error).__name__})")
            break
        attempt += 1
    result.seconds = time.monotonic() - start
    return result


# ---- the golden-vector form of the shrunk cases ---------------------------------------------


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "._" else "-" for ch in name).strip("-")


def family_name(name_a: str, name_b: str) -> str:
    return f"diff-{_slug(name_a)}-vs-{_slug(name_b)}"


def case_flags(spec: OpSpec, shrunk: Shrunk) -> list[str]:
    """Golden-vector flags of a shrunk case: the boundary classes of the inputs it differs at."""
    x = shrunk.args[0]
    if x.dtype == np.uint8:
        return ["all-codes"]
    x32 = _bf16_f32(x) if x.dtype == np.uint16 else np.asarray(x, np.float32)
    flat = x32.reshape(-1)
    at: list[int] = []
    for d in shrunk.new:
        if d.index < 0:
            continue
        if spec.blocks and d.output == "e8m0":
            at += list(range(d.index * GROUP, d.index * GROUP + GROUP))
        else:
            at.append(d.index)
    flags = boundaries.flags_of(flat[sorted(set(at))] if at else flat)
    if spec.blocks and x32.shape[-1] > GROUP:
        flags.append("group-count")
    return flags


def write_cases(results: Sequence[OpResult], name_a: str, name_b: str, seed: int) -> tuple[str, dict, bytes, bytes]:
    """(family, document, JSON bytes, NPZ bytes) holding one golden-vector case per shrunk
    difference, with the oracle's outputs under every registered profile."""
    from mxgate.vectors import manifest, schema
    from mxgate.vectors.families import FamilyBuilder
    from mxgate.vectors.generator import GENERATOR_VERSION

    family = family_name(name_a, name_b)
    fb = FamilyBuilder(family, f"mxgate diff {name_a} (A) vs {name_b} (B), seed {seed}: shrunk unexplained "
                       "differences", seed, GENERATOR_VERSION)
    for result in results:
        if not result.cases:
            continue
        spec = SPECS[result.op]
        group = fb.group(spec.name, spec.name, f"{spec.name}: inputs on which {name_a} and {name_b} differ where "
                         "their declared profiles do not explain it", spec.inputs, spec.outputs,
                         compare=spec.compare_rules())
        for n, shrunk in enumerate(result.cases, start=1):
            args = shrunk.args

            def compute(p: Profile, args: tuple = args) -> dict[str, np.ndarray]:
                return dict(zip(spec.outputs, spec.reference(p, *args)))

            first = shrunk.new[0]
            group.case(f"diff/{_slug(name_a)}-vs-{_slug(name_b)}/{n}", describe(spec, shrunk, result, name_a, name_b),
                       case_flags(spec, shrunk), dict(zip(spec.inputs, args)), compute,
                       params={"found_by": "mxgate diff", "seed": seed, "A": name_a, "B": name_b,
                               "profile_A": result.profile_a, "profile_B": result.profile_b,
                               "deviating": list(first.deviating)})
    with np.errstate(all="ignore"):
        doc = fb.document()
    schema.validate(doc, set(fb.store.arrays))
    return family, doc, manifest.canonical_json(doc), fb.store.to_bytes()


# ---- text ----------------------------------------------------------------------------------


def show_unit(kind: str, u: int | None) -> str:
    """A unit as hex with its value."""
    if u is None:
        return "-"
    if kind in (E2M1, NIBBLES):
        v = float(oracle.decode_e2m1(np.array([u & 0xF], np.uint8))[0])
        return f"0x{u:X} ({'-' if u & 8 else '+'}{abs(v):g})"
    if kind in (FP8_FN, FP8_FNUZ):
        v = float(oracle.decode_e4m3(np.array([u], np.uint8), kind[len("e4m3"):])[0])
        return f"0x{u:02X} ({v:g})"
    if kind == E8M0:
        return f"0x{u:02X} ({'NaN' if u == 255 else f'2^{u - 127}'})"
    if kind == BF16:
        v = float(oracle.bf16_to_f32(np.array([u], np.uint16))[0])
        return f"0x{u:04X} ({v:.6g})"
    return f"{float(np.array([u], np.uint32).view(np.float32)[0]):.9g} (0x{u:08X})"


def show_input(spec: OpSpec, args: tuple, d: Difference) -> str:
    """The input element(s) a difference sits at."""
    x = np.asarray(args[0])
    flat = x.reshape(-1)
    if d.index < 0:
        return f"{spec.inputs[0]} of shape {x.shape}"
    if spec.blocks:
        width = x.shape[-1]
        if d.output == "e8m0":
            r, g = divmod(d.index, width // GROUP)
            return f"{spec.inputs[0]}[{r}, {GROUP * g}:{GROUP * g + GROUP}] (group {g} of row {r})"
        r, c = divmod(d.index, width)
        return f"{spec.inputs[0]}[{r}, {c}] = {_value(x[r, c])}"
    return f"{spec.inputs[0]}[{d.index}] = {_value(flat[d.index])}"


def _value(v: np.generic) -> str:
    if v.dtype == np.uint8:
        return f"0x{int(v):02X}"
    if v.dtype == np.uint16:
        return f"{float(oracle.bf16_to_f32(np.array([v], np.uint16))[0]):.6g} (bf16 0x{int(v):04X})"
    return f"{float(v):.9g} (0x{int(np.array([v], np.float32).view(np.uint32)[0]):08X})"


def describe(spec: OpSpec, shrunk: Shrunk, result: OpResult, name_a: str, name_b: str) -> str:
    """One sentence per new difference of a shrunk case (the case comment)."""
    parts = []
    for d, (cls, detail) in zip(shrunk.new, shrunk.classes):
        if d.index < 0:
            parts.append(f"{d.note} ({' and '.join(d.deviating)} deviate{'s' if len(d.deviating) == 1 else ''})")
            continue
        kind = spec.kinds[spec.outputs.index(d.output)]
        who = " and ".join(f"{s} ({name_a if s == 'A' else name_b})" for s in d.deviating)
        parts.append(
            f"{show_input(spec, shrunk.args, d)}: {d.output} A {show_unit(kind, d.a)}, B {show_unit(kind, d.b)}; "
            f"oracle under {result.profile_a} gives {show_unit(kind, d.oracle_a)}, under {result.profile_b} "
            f"{show_unit(kind, d.oracle_b)}: {who} deviate{'s' if len(d.deviating) == 1 else ''} from the oracle "
            f"under the declared profile; explain: {cls} ({detail})")
    return f"found by mxgate diff {name_a} (A) vs {name_b} (B): " + " | ".join(parts)


def input_text(args: tuple) -> str:
    """A shrunk input, compactly: its bit patterns, or for a larger array its most common
    pattern and the elements that differ from it (shrinking makes the rest one value)."""
    x = np.asarray(args[0])
    width = 2 * x.dtype.itemsize
    bits = x.view(f"u{x.dtype.itemsize}") if x.dtype.kind == "f" else x
    flat = bits.reshape(-1)
    if flat.size <= 8:
        return f"{x.dtype}{list(x.shape)} [{', '.join(f'0x{int(v):0{width}X}' for v in flat)}]"
    values, counts = np.unique(flat, return_counts=True)
    common = values[np.argmax(counts)]
    others = np.argwhere(bits != common)
    if not len(others):
        return f"{x.dtype}{list(x.shape)}, every element 0x{int(common):0{width}X}"
    shown = ", ".join(f"[{', '.join(str(int(i)) for i in at)}] = 0x{int(bits[tuple(at)]):0{width}X}"
                      for at in others[:8])
    more = f", ... ({len(others)} in all)" if len(others) > 8 else ""
    return f"{x.dtype}{list(x.shape)}, 0x{int(common):0{width}X} except {shown}{more}"


__all__ = ["Difference", "OpResult", "OpSpec", "SPECS", "Shrunk", "Sorted", "classify", "covered", "diff_op",
           "family_name", "sort_differences", "write_cases"]
