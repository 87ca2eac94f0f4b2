"""Vector-driven conformance: run any backend against the golden vector files alone.

Each case's stored inputs go to ``backend.op(op).run(...)``; the outputs are compared with the
case's stored result under the backend's declared profile (or ``--profile``). A stored
``acceptable`` result gives an acceptable verdict with its reason; alternatives (other
admissible outputs) are acceptable too. For a profile the files hold no result for (the profiles
registered after the base table: AITER's, vLLM's, a user's), the case is rebuilt by its family's
own generator under that profile, where the family is generated for every profile (its results
and alternatives computed as ``mxgate vectors regen`` would) and judged the same way; a family
generated for named profiles only keeps "no stored result". Only that rebuild calls the oracle,
so a kernel author with the vector files and a kernel of a base profile can run it alone.
"""

from __future__ import annotations

import numpy as np
import pytest

from mxgate.conformance.judge import UNSUPPORTED, Verdict, judge_outputs
from mxgate.kernels.base import OutsideContract
from mxgate.oracle import profiles
from mxgate.vectors import families, generator
from mxgate.vectors.loader import Case, VectorSet

_VECTORS: dict[str, VectorSet] = {}
_LIVE: dict[tuple[str, str], dict[str, Case]] = {}


def _vectors() -> VectorSet:
    if "set" not in _VECTORS:
        _VECTORS["set"] = VectorSet()
    return _VECTORS["set"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    config = metafunc.config
    if "vector_case" not in metafunc.fixturenames:
        return
    tier = config.getoption("--tier")
    if "backend_name" not in metafunc.fixturenames:  # the oracle's own layout goldens
        cases = [c for c in _vectors().cases(tier=tier) if c.op == "layout.scatter"]
        metafunc.parametrize("vector_case", cases, ids=[f"{c.family}:{c.id}" for c in cases])
        return
    # (backend, case) pairs only where the backend implements the op: an op a backend does not
    # implement is no row, and a backend that cannot run here is one line of the matrix.
    from mxgate.conformance.plugin import implements, selected_backends

    cases = [c for c in _vectors().cases(tier=tier) if c.op != "layout.scatter"]
    pairs, ids = [], []
    for name in selected_backends(config):  # what the backend implements: as its worker described it
        for c in cases:
            if implements(config, name, c.op):
                pairs.append((name, c))
                ids.append(f"{name}-{c.family}:{c.id}")
    metafunc.parametrize("backend_name,vector_case", pairs, ids=ids)


class _LiveFamily:
    """One family built in memory under one profile: what ``Case`` reads of a vector set."""

    def __init__(self, builder: families.FamilyBuilder) -> None:
        self._arrays, self._seed = builder.store.arrays, builder.seed

    def arrays(self, family: str) -> dict[str, np.ndarray]:
        return self._arrays

    def document(self, family: str) -> dict:
        return {"header": {"seed": self._seed}}


def live_case(case: Case, profile: str) -> Case | None:
    """``case`` rebuilt by its family's generator with a result under ``profile`` (None where the
    family is generated for named profiles only or ``profile`` is not registered). The rebuilt
    inputs must be the stored ones byte for byte (ValueError otherwise: the files are stale)."""
    module = families.get(case.family)
    if getattr(module, "PROFILES", None) is not None or profile not in profiles.names():
        return None
    key = (case.family, profile)
    if key not in _LIVE:
        builder = families.FamilyBuilder(module.NAME, module.DESCRIPTION, module.SEED, generator.GENERATOR_VERSION,
                                         profiles=[profile])
        with np.errstate(all="ignore"):  # boundary inputs (NaN, Inf, overflow) are the point, as in regen
            module.build(builder)
        live = _LiveFamily(builder)
        _LIVE[key] = {c["id"]: Case(live, case.family, g.as_dict(), c) for g in builder.groups for c in g.cases}
    rebuilt = _LIVE[key].get(case.id)
    if rebuilt is None:
        raise ValueError(f"{case.family}:{case.id} is not built by today's generator: the vector files are stale")
    stored, fresh = case.inputs(), rebuilt.inputs()
    for name, array in stored.items():
        if array.dtype != fresh[name].dtype or array.tobytes() != fresh[name].tobytes():
            raise ValueError(f"{case.family}:{case.id} input {name} differs from today's generator: the vector files "
                             "are stale")
    return rebuilt


def _view_inputs(case: Case, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Apply the group's ``views`` (fp16 data stored as uint16 bit patterns)."""
    views = case.group["params"].get("views")
    if not views or "when" not in views:
        return inputs
    field, value = [s.strip() for s in views["when"].split("==")]
    if str(case.case["params"].get(field)) != value:
        return inputs
    dtype = np.dtype(views["as"])
    return {n: (a.view(dtype) if n in views["inputs"] and a.dtype.itemsize == dtype.itemsize else a)
            for n, a in inputs.items()}


def _call(case: Case, run) -> dict[str, np.ndarray]:
    inputs = _view_inputs(case, {n: a.copy() for n, a in case.inputs().items()})
    if case.group["call"] == "keywords":
        scalars = {k: case.case["params"][k] for k in case.group["params"].get("scalars", [])}
        returned = run(**inputs, **scalars)
    else:
        returned = run(*inputs.values())
    names = [n for n in case.group["outputs"] if case.group["compare"][n] != "reference"]
    if hasattr(returned, "_asdict"):
        got = returned._asdict()
    elif isinstance(returned, dict):
        got = returned
    elif isinstance(returned, (tuple, list)):
        if len(returned) != len(names):
            raise ValueError(f"{case.op} returned {len(returned)} arrays, expected {len(names)} ({', '.join(names)})")
        got = dict(zip(names, returned))
    else:
        got = {names[0]: returned}
    return {n: np.asarray(got[n]) for n in names}


def _normalise(expected: np.ndarray, actual: np.ndarray) -> np.ndarray:
    """Same-width reinterpretation (bf16 returned as bfloat16 instead of uint16 bit patterns)."""
    if actual.dtype != expected.dtype and actual.dtype.itemsize == expected.dtype.itemsize:
        return np.ascontiguousarray(actual).view(expected.dtype)
    return actual


@pytest.mark.mxgate_backend_pairs
def test_vector_case(backend_name, vector_case, record, profile_override, request) -> None:
    from mxgate.conformance.plugin import isolated_backend

    case = vector_case
    backend = isolated_backend(request.config, backend_name)
    config_id = f"{case.family}:{case.id}"
    seed = case.vectors.document(case.family)["header"]["seed"]
    status = backend.available_for(case.op)
    if not status:  # e.g. a CUDA-only op of a backend that otherwise runs here
        record(case.op, "*", Verdict(UNSUPPORTED, status.reason))
        pytest.skip(f"not supported here: {backend_name} {case.op}: {status.reason}")
    op = backend.op(case.op)
    profile = profile_override or op.profile
    if case.result(profile) is None:
        rebuilt = live_case(case, profile)
        if rebuilt is None:
            stored = ", ".join(sorted(case.case["results"]))
            record(case.op, config_id, Verdict(UNSUPPORTED, f"no stored result for profile {profile} (stored: {stored})"),
                   profile=profile)
            pytest.skip(f"not supported here: the vectors hold no result for profile {profile}")
        case = rebuilt  # the same inputs, with the generator's result under this profile
    result = case.result(profile)
    expected = case.expected(profile)
    try:
        actual = _call(case, op.run)
    except OutsideContract as error:
        # The adapter declares these inputs outside its kernel's contract (for example sglang's
        # writers have no slot < 0 rule): reported, never a pass. Any other exception is a fail.
        record(case.op, config_id, Verdict(UNSUPPORTED, f"{backend_name} refuses the inputs: {error}"), profile=profile)
        pytest.skip(f"not supported here: {backend_name} refuses this case's inputs: {error}")
    actual = {n: _normalise(expected[n], a) for n, a in actual.items()}
    for n in case.group["outputs"]:  # reference arrays ride along for the rules that use them
        actual.setdefault(n, expected[n])
    verdict = judge_outputs(expected, actual, case.group["compare"], result=result["result"],
                            reason=result.get("reason", ""), alternatives=case.alternatives(profile),
                            op=case.op, profile=profile)
    record(case.op, config_id, verdict, seed=seed, profile=profile)


def test_layout_case(vector_case: Case) -> None:
    """The oracle's layouts reproduce every index-map golden (the goldens, not a roundtrip)."""
    from mxgate.oracle import layouts

    case = vector_case
    layout = layouts.get(case.group["params"]["layout"])
    dims = case.case["params"]["dims"]
    inputs = case.inputs()
    slots = inputs.pop("slots")
    buf = layout.new_buffer(**dims)
    layout.scatter(buf, *inputs.values(), slots=slots, **dims)
    expected = case.expected("gfx950")["buffer"]
    assert buf.shape == expected.shape
    diff = np.argwhere(buf != expected)
    assert diff.size == 0, f"{case.id}: {len(diff)} bytes differ, first at {tuple(diff[0])}"
