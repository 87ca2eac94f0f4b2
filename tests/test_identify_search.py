"""The search's sampled count (identify.search.Evaluator.count_below) against the whole
pool's: a count below the limit is the exact count, any other is at least the limit, on every
registered profile judged against bytes of another, at every limit that can matter."""

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
