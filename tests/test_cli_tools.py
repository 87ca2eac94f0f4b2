"""The sweep, bench and profiles commands on small inputs (the full sweep is the exhaustive tier)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mxgate.cli import main
from mxgate.oracle import profiles
from mxgate.tools.sweep import CHUNK_BITS, TOTAL, breakpoints, sweep_e2m1


@pytest.mark.parametrize("name", profiles.names())
def test_exact_table_breakpoints_cover_all_inputs(name: str) -> None:
    starts, codes = breakpoints(name)
    assert starts[0] == 0 and (np.diff(starts) > 0).all() and starts[-1] < TOTAL
    assert codes.max() <= 0xF


@pytest.mark.parametrize("against", ["exact-table", "ml_dtypes"])
def test_sweep_sample_chunks(against: str) -> None:
    # Chunks 63 (around 1.0..4.0), 64, 127 (the NaNs) and 255 (negative NaNs).
    chunks = [63, 64, 127, 255]
    for chunk in chunks:
        result = sweep_e2m1("gfx950", against, workers=1, chunks=range(chunk, chunk + 1), progress=False)
        assert result.mismatches == 0, result.summary()
        assert result.inputs == 1 << CHUNK_BITS
    nan_chunk = sweep_e2m1("gfx950", "ml_dtypes", workers=1, chunks=range(127, 128), progress=False)
    assert nan_chunk.by_design > 0  # gfx950 and ml_dtypes differ on NaN by declaration


@pytest.mark.exhaustive
@pytest.mark.parametrize("name", profiles.names())
def test_sweep_all_float32_inputs(name: str) -> None:
    result = sweep_e2m1(name, "exact-table", progress=False)
    assert result.inputs == TOTAL
    assert result.mismatches == 0, result.summary()


def test_profiles_command_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profiles", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [p["name"] for p in listed] == profiles.names()


def test_profiles_command_marks_differences(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profiles", "argmin"]) == 0
    out = capsys.readouterr().out
    assert "* tie               down" in out


def test_unknown_profile_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "e2m1", "--profile", "nope", "--chunks", "1", "--quiet"]) == 2
    assert "profile must be one of" in capsys.readouterr().err


def test_bench_prints_ratios(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--log2-size", "14", "--repeat", "1", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["case"] for r in rows} >= {"mx.quantize (codes + scales)", "e4m3fn.encode"}
    assert all(r["ratio"] > 0 and r["peer_ms"] > 0 for r in rows)


@pytest.mark.parametrize("chunks", [range(0), range(5, 5), range(-1, 1), range(255, 257)])
def test_sweep_refuses_empty_or_outside_chunks(chunks: range) -> None:
    # an empty sweep would report "0 inputs, 0 mismatches" and pass
    with pytest.raises(ValueError, match="chunks"):
        sweep_e2m1("gfx950", "exact-table", workers=1, chunks=chunks, progress=False)


@pytest.mark.parametrize("workers, error", [(0, ValueError), (-2, ValueError), (1.5, TypeError),
                                           (True, TypeError)])
def test_sweep_refuses_bad_worker_counts(workers: object, error: type) -> None:
    with pytest.raises(error, match="workers"):
        sweep_e2m1("gfx950", "exact-table", workers=workers, chunks=range(1), progress=False)


def test_sweep_cli_chunks_are_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "e2m1", "--chunks", "-1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mxgate sweep: error: --chunks") and err.count("\n") == 1


def test_require_names_the_missing_package() -> None:
    from mxgate.tools.optional import require

    assert require("json", "this test").dumps([1]) == "[1]"
    with pytest.raises(ImportError, match="this test needs the no_such_package_mx package") as caught:
        require("no_such_package_mx", "this test")
    assert caught.value.name == "no_such_package_mx"
    assert "pip install no_such_package_mx" in str(caught.value)


def test_require_installed_finds_without_importing() -> None:
    import sys

    from mxgate.tools.optional import require_installed

    assert "pip" not in sys.modules  # installed beside mxgate, imported by no test in-process
    require_installed("pip", "this test")
    assert "pip" not in sys.modules
    with pytest.raises(ImportError, match="this test needs the no_such_package_mx package") as caught:
        require_installed("no_such_package_mx", "this test")
    assert caught.value.name == "no_such_package_mx" and "pip install no_such_package_mx" in str(caught.value)


def test_require_importable_asks_a_fresh_interpreter() -> None:
    import sys

    from mxgate.tools.optional import require_importable

    require_importable("pip", "this test")
    assert "pip" not in sys.modules
    with pytest.raises(ImportError, match=r"this test needs the no_such_package_mx package, which cannot be imported "
                                          r"\(ModuleNotFoundError: No module named 'no_such_package_mx'\)") as caught:
        require_importable("no_such_package_mx", "this test")
    assert caught.value.name == "no_such_package_mx"
