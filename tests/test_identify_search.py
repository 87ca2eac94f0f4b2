"""The search's sampled count (identify.search.Evaluator.count_below) against the whole
pool's: a count below the limit is the exact count, any other is at least the limit, on every
registered profile judged against bytes of another, at every limit that can matter; the same
with the cases that hold a profile's few unexplained units as the part that settles it."""

from __future__ import annotations

import numpy as np
import pytest

from mxgate.identify import search
from mxgate.identify.drivers import DRIVERS
from mxgate.op_table import OpName
from mxgate.oracle import profiles


@pytest.mark.parametrize("truth", ["gfx950", "torchao-rceil"])
def test_count_below_is_the_count_wherever_it_is_below_the_limit(truth: str) -> None:
    driver = DRIVERS[OpName.MX_QUANTIZE]
    cases = driver.pool()
    assert cases.shape[0] >= search._SAMPLED_FROM  # the sampled path is the one under test
    with np.errstate(all="ignore"):
        backend = driver.units(driver.reference(profiles.get(truth), cases), cases.shape[0])
    exact = search.Evaluator(driver, cases, backend)
    settled_by_sample = 0
    for name in profiles.names():
        p = profiles.get(name)
        count = exact.count(p)
        sampled = search.Evaluator(driver, cases, backend)
        for limit in sorted({1, max(count - 1, 1), count, count + 1, 10 * count + 10}):  # ascending: see below
            got = sampled.count_below(p, limit)
            if got < limit:
                assert got == count, (truth, name, limit, got, count)
            else:
                assert count >= limit, (truth, name, limit, got, count)
                # no run on the whole pool yet: the sample's count alone settled a positive limit
                settled_by_sample += sampled._evaluations == 0
    assert settled_by_sample > 0  # the shortcut is taken, not only the fallback


@pytest.mark.parametrize("truth", ["gfx950", "ocp"])
def test_count_below_on_the_unexplained_cases_is_the_count_wherever_it_is_below_the_limit(truth: str) -> None:
    """A kernel that is the truth profile but for a few flipped bits: the descent's part (the
    cases that hold the units the truth leaves unexplained) settles most moves on its own."""
    driver = DRIVERS[OpName.MX_QUANTIZE]
    cases = driver.pool()
    with np.errstate(all="ignore"):
        backend = driver.units(driver.reference(profiles.get(truth), cases), cases.shape[0]).copy()
    rng = np.random.Generator(np.random.PCG64(20261206))
    flipped = rng.choice(cases.shape[0], 3, replace=False)
    backend[flipped, 0] ^= 1  # one unit of three cases: no profile explains them
    exact = search.Evaluator(driver, cases, backend)
    current = profiles.get(truth)
    c = exact.count(current)
    assert c == 3
    rows = np.flatnonzero(exact.wrong(current).any(axis=1))
    assert sorted(rows.tolist()) == sorted(flipped.tolist())
    settled_by_part = 0
    for name in profiles.names():
        p = profiles.get(name)
        count = exact.count(p)
        focused = search.Evaluator(driver, cases, backend)
        part = focused.part("unexplained", rows)
        for limit in sorted({1, max(count - 1, 1), count, count + 1, c}):
            got = focused.count_below(p, limit, part)
            if got < limit:
                assert got == count, (truth, name, limit, got, count)
            else:
                assert count >= limit, (truth, name, limit, got, count)
                # settled by the part alone: no run on the whole pool, none on the sample
                settled_by_part += focused._evaluations == 0 and "sample" not in focused._parts
        assert part._evaluations > 0
    assert settled_by_part > 0


def _counting(driver, cases: int):
    """``driver`` with a reference that counts its calls on ``cases`` cases (one counter: drivers
    given the same one share a reference, as the FP4 block ops do)."""
    calls = [0]
    reference = driver.reference

    def counted(p, on):
        calls[0] += on.shape[0] == cases
        return reference(p, on)

    return counted, calls


PLANTS = {"tie": {"tie": "away"},  # one step of the descent
          "three fields": {"tie": "away", "zero_sign": "clear", "scale_policy": "floor"}}  # several steps


@pytest.mark.parametrize("plant", PLANTS)
def test_ops_on_one_pool_share_the_oracles_runs_within_an_identify_run(plant: str) -> None:
    """Within search.sharing_runs (one identify run), a second op with the same reference, unit
    layout and cases asks the oracle for nothing on those cases (the descent's parts of its own
    unexplained cases aside: a few cases each, kept apart so that they never push the whole
    pool's runs out of the scope), and its inference equals the one made alone; outside the
    scope nothing is shared or kept."""
    from dataclasses import replace

    first, second = DRIVERS[OpName.FP4_INDEXER_QUANTIZE], DRIVERS[OpName.SGLANG_PAGE68_STORE]
    assert first.reference is second.reference and first.widths == second.widths
    pool = first.pool()[::3]  # a third of the probes: enough to find the planted rules
    counted, calls = _counting(first, pool.shape[0])
    first, second = replace(first, reference=counted), replace(second, reference=counted)
    planted = replace(profiles.get("gfx950"), name="planted", **PLANTS[plant])
    with np.errstate(all="ignore"):
        backend = first.units(first.reference(planted, pool), pool.shape[0])

    def summary(inference: search.Inference) -> tuple:
        return (inference.best, inference.unexplained, inference.matches, inference.nearest, inference.differs,
                {f: (d.value, d.consistent, d.read, [tuple(vars(e).values()) for e in d.evidence])
                 for f, d in inference.fields.items()})

    def runs(f) -> tuple[object, int]:
        calls[0] = 0
        out = f()
        return out, calls[0]

    alone = [runs(lambda d=d: summary(search.infer(d, pool, backend, "gfx950"))) for d in (first, second)]
    alone_cases = [runs(lambda d=d: search.separating_cases(d, pool, "gfx950")) for d in (first, second)]
    assert alone[0][1] == alone[1][1] > 0 and alone_cases[0][1] == alone_cases[1][1] > 0
    with search.sharing_runs():
        shared = [runs(lambda d=d: summary(search.infer(d, pool, backend, "gfx950"))) for d in (first, second)]
        shared_cases = [runs(lambda d=d: search.separating_cases(d, pool, "gfx950")) for d in (first, second)]
    assert 0 < shared[0][1] <= alone[0][1] and shared[1][1] == 0  # the shared memo keeps more runs
    assert [calls for _, calls in shared_cases] == [alone_cases[0][1], 0]
    assert [out for out, _ in shared] == [out for out, _ in alone]
    assert alone[0][0][1] == 0  # the planted rule is explained
    if plant == "tie":
        assert alone[0][0][2] == [] and alone[0][0][4] == {"tie": ("away", "even")}  # by exactly its field
    assert all(np.array_equal(a, b) for (a, _), (b, _) in zip(shared_cases, alone_cases))
    assert runs(lambda: search.infer(second, pool, backend, "gfx950"))[1] == alone[1][1]  # nothing kept after


def test_units_take_the_narrowest_type_that_holds_every_output() -> None:
    """Byte outputs give uint8 units, float32 bits or 16/32-bit unsigned ones uint32, anything else
    int64; the values are the outputs' in each case."""
    driver = DRIVERS[OpName.MX_QUANTIZE]  # outputs: 32 nibbles and a scale byte per block
    rng = np.random.default_rng(20261206)
    nibbles, e8m0 = rng.integers(0, 16, (5, 32), dtype=np.uint8), rng.integers(0, 256, 5, dtype=np.uint8)
    expected = np.concatenate([nibbles, e8m0[:, None]], axis=1).astype(np.int64)
    for outputs, dtype in (((nibbles, e8m0), np.uint8), ((nibbles, e8m0.astype(np.uint16)), np.uint32),
                           ((nibbles.astype(np.uint32), e8m0), np.uint32), ((nibbles, e8m0.astype(np.int32)), np.int64)):
        units = driver.units(outputs, 5)
        assert units.dtype == dtype and np.array_equal(units.astype(np.int64), expected), (dtype, units.dtype)


def test_first_hits_are_argwheres_first_rows() -> None:
    """The evidence's first hits, found from the rows that hold any, are np.argwhere's first k."""
    rng = np.random.Generator(np.random.PCG64(2612))
    for _ in range(500):
        rows, cols = int(rng.integers(0, 40)), int(rng.integers(0, 24))
        mask = rng.random((rows, cols)) < rng.choice([0.0, 0.005, 0.1, 0.95])
        for k in (0, 1, 2, 7):
            want = np.argwhere(mask)[:k]
            got = search.first_hits(mask, k)
            assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want), (mask.shape, k)
