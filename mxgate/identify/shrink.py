"""The smallest input that still shows an unexplained unit, as ``mxgate diff`` shrinks its cases.

A unit of one case disagrees with the oracle under the best profile found. The shrink asks the
backend again on smaller inputs: the case alone, else the half of the cases holding it (a kernel
may round one element alone differently from many, as triton.tools.mxfp's encoder does); then,
inside a block, each other element set to +0 while the unit still disagrees. Every attempt is a
backend call (under the same repeat rule, on fresh copies), within a budget of calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from mxgate.identify.drivers import Driver
from mxgate.kernels.base import OutsideContract
from mxgate.kernels.isolation import BackendFault
from mxgate.oracle.profiles import Profile

BUDGET = 48  # backend calls one shrink may make


@dataclass
class Shrunk:
    cases: np.ndarray  # the smallest input found that still disagrees
    case: int  # the disagreeing case in it
    unit: int
    backend: int
    expected: int  # the unit under the best profile
    calls: int


def shrink(driver: Driver, run: Callable, cases: np.ndarray, case: int, unit: int, best: Profile) -> Shrunk:
    calls = 0

    def disagrees(candidate: np.ndarray, at: int) -> tuple[int, int] | None:
        nonlocal calls
        if calls >= BUDGET:
            return None
        calls += 1
        try:
            got = driver.units(driver.call(run, candidate), candidate.shape[0])
        except (BackendFault, OutsideContract, ValueError, TypeError, IndexError):
            return None
        want = driver.units(driver.reference(best, candidate), candidate.shape[0])
        if got[at, unit] != want[at, unit]:
            return int(got[at, unit]), int(want[at, unit])
        return None

    current, at = cases, case
    found = disagrees(current[at:at + 1], 0)
    if found is not None:
        current, at = current[at:at + 1], 0
    else:
        while current.shape[0] > 1:  # keep the half that holds the case while it still disagrees
            half = current.shape[0] // 2
            lo, hi = (0, half) if at < half else (half, current.shape[0])
            found = disagrees(current[lo:hi], at - lo)
            if found is None:
                break
            current, at = current[lo:hi], at - lo
    current = current.copy()
    if current.ndim > 1:  # a block: clear the elements that do not matter
        width = current[at].size
        keep = unit if unit < width else -1
        for j in range(width):
            if calls >= BUDGET - 1:  # keep one call to confirm what was found
                break
            if j == keep or _bits(current[at])[j] == driver.neutral:
                continue
            trial = current.copy()
            _bits(trial[at])[j] = driver.neutral
            if disagrees(trial, at) is not None:
                current = trial
    final = disagrees(current, at)
    if final is None:  # the budget ran out, or the last step was not re-confirmed: the full set
        final_cases = cases
        got = driver.units(driver.call(run, cases), cases.shape[0])
        want = driver.units(driver.reference(best, cases), cases.shape[0])
        return Shrunk(final_cases, case, unit, int(got[case, unit]), int(want[case, unit]), calls + 1)
    return Shrunk(current, at, unit, final[0], final[1], calls)


def _bits(row: np.ndarray) -> np.ndarray:
    """A writable flat view of one case's elements as unsigned bit patterns."""
    flat = row.reshape(-1)
    return flat.view(np.uint32) if flat.dtype == np.float32 else flat
