"""profiles.recording and MemoByReads: a result is shared only between profiles equal in every
field the first call read, and reads made inside a nested memo reach the outer one."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from mxgate import oracle
from mxgate.oracle import profiles

BASE = profiles.get("gfx950")


def test_recording_names_the_fields_read() -> None:
    reads: set[str] = set()
    p = profiles.recording(BASE, reads)
    assert p.tie == BASE.tie and p.semantics() == BASE.semantics()
    assert "tie" in reads and "scale_policy" in reads  # semantics() reads every field
    reads.clear()
    _ = p.nan
    assert reads == {"nan"}


def test_a_result_is_shared_only_where_the_read_fields_agree() -> None:
    calls: list[str] = []

    def f(p: profiles.Profile) -> str:
        calls.append(p.tie)
        return p.tie

    memo = profiles.MemoByReads(f)
    assert memo(BASE) == "even"
    assert memo(replace(BASE, nan="zero")) == "even" and len(calls) == 1  # nan unread: shared
    assert memo(replace(BASE, tie="away")) == "away" and len(calls) == 2  # tie read: its own run


def test_reads_inside_a_nested_memo_reach_the_outer_one() -> None:
    inner = profiles.MemoByReads(lambda p: p.scale_policy)
    outer = profiles.MemoByReads(lambda p: inner(p))
    assert outer(BASE) == BASE.scale_policy
    other = replace(BASE, scale_policy="floor")
    assert inner(other) == "floor"  # the inner memo already holds it: the outer must not share BASE's
    assert outer(other) == "floor"


def test_the_scale_table_is_shared_by_profiles_differing_in_element_fields_only() -> None:
    table = oracle.scales._scale_table(replace(BASE, name="t1", tie="away"))
    assert oracle.scales._scale_table(BASE) is table
    assert oracle.scales._scale_table(replace(BASE, name="t2", scale_policy="floor")) is not table
    amax = np.float32([1.0, 5.9, 6.0, 1e-40, 3e38]).view(np.uint32)
    a = oracle.scales.e8m0_scale_of_bits(amax, replace(BASE, name="t1", tie="away"))
    b = oracle.scales.e8m0_scale_of_bits(amax, replace(BASE, name="t2", scale_policy="floor"))
    assert np.array_equal(a, oracle.scales.e8m0_scale_of_bits(amax, BASE))
    assert np.array_equal(b, oracle.e8m0_scale(amax.view(np.float32), replace(BASE, scale_policy="floor")))
    assert not np.array_equal(a, b)


def test_threads_sharing_one_memo_get_their_own_profiles_result() -> None:
    from concurrent.futures import ThreadPoolExecutor

    memo = profiles.MemoByReads(lambda p: (p.tie, p.scale_policy), limit=3)
    variants = [replace(BASE, tie=t, scale_policy=s) for t in ("even", "away", "zero") for s in ("rceil", "floor")]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(memo, variants * 200))
    assert got == [(p.tie, p.scale_policy) for p in variants * 200]


def test_calls_that_read_different_fields_are_kept_apart_and_dropped_oldest_first() -> None:
    """A call whose branch reads another field set is kept under that set; a result found under
    either set is the one its own call would give; past the limit the least recently used goes."""
    calls: list[tuple[str, str]] = []

    def f(p: profiles.Profile) -> tuple[str, str]:
        calls.append((p.tie, p.nan if p.tie == "away" else "-"))
        return calls[-1]

    memo = profiles.MemoByReads(f, limit=3)
    away_zero, away_nan = replace(BASE, tie="away", nan="zero"), replace(BASE, tie="away", nan="pos_max")
    assert memo(BASE) == ("even", "-")
    assert memo(away_zero) == ("away", "zero") and memo(away_nan) == ("away", "pos_max")
    assert memo(replace(BASE, nan="zero")) == ("even", "-") and len(calls) == 3  # nan unread under even: shared
    assert memo(replace(away_zero, scale_policy="floor")) == ("away", "zero") and len(calls) == 3
    assert memo(replace(BASE, tie="zero")) == ("zero", "-") and len(calls) == 4  # the limit drops away_nan's
    assert memo(away_zero) == ("away", "zero") and len(calls) == 4
    assert memo(away_nan) == ("away", "pos_max") and len(calls) == 5  # made again
    assert memo(BASE) == ("even", "-") and len(calls) == 6  # dropped when away_nan came back


def test_a_profile_with_an_unhashable_field_gets_its_own_result_unkept() -> None:
    calls: list[object] = []
    memo = profiles.MemoByReads(lambda p: calls.append(p.exp_clamp) or tuple(p.exp_clamp or ()))
    listed = replace(BASE, exp_clamp=[1, 254])  # a list where the field holds a tuple
    assert memo(BASE) == () and memo(listed) == (1, 254) and memo(listed) == (1, 254)
    assert len(calls) == 3 and memo(BASE) == () and len(calls) == 3  # the hashable one stays kept
