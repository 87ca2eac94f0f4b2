"""``mxgate explain`` reading bf16 inputs from .npy (issue 22 item 7) and .npy files whose header
claims more than the file holds (issue 21 item 10)."""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from mxgate import oracle
from mxgate.cli import main

HUGE = 2**40  # elements: 4 TiB of float32, far beyond any machine's memory


def _case(tmp_path: Path) -> tuple[np.ndarray, list[str]]:
    """bf16 input rows, the packed codes gfx950 gives them, and a copy with one nibble's sign
    flipped: explain needs the input to say what the expected code is."""
    rng = np.random.default_rng(22)
    x = rng.standard_normal((4, 64)).astype(ml_dtypes.bfloat16)
    packed, scales = oracle.quantize_mx(x.astype(np.float32), "gfx950")
    actual = packed.copy()
    actual[1, 3] ^= 0x08
    np.save(tmp_path / "exp.npy", packed)
    np.save(tmp_path / "act.npy", actual)
    np.save(tmp_path / "scales.npy", scales)
    args = ["explain", str(tmp_path / "exp.npy"), str(tmp_path / "act.npy"), "--layout", "packed-row",
            "--scales", str(tmp_path / "scales.npy"), "--json", "--max-rows", "-1"]
    return x, args


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    status = main(argv)
    out, err = capsys.readouterr()
    return status, out, err


def test_bf16_inputs_read_from_npy_three_ways_give_one_report(tmp_path: Path, capsys) -> None:
    x, args = _case(tmp_path)
    np.save(tmp_path / "x_f32.npy", x.astype(np.float32))  # the same values, exactly
    np.save(tmp_path / "x_u16.npy", x.view(np.uint16))  # torch: t.view(torch.uint16).numpy()
    np.save(tmp_path / "x_i16.npy", x.view(np.int16))  # torch: t.view(torch.int16).numpy()
    np.save(tmp_path / "x_bf16.npy", x)  # ml_dtypes bfloat16: saved with descr '|V2'
    assert np.load(tmp_path / "x_bf16.npy").dtype.str == "|V2"
    reports = {}
    for name, extra in [("x_f32", []), ("x_u16", ["--input-dtype", "bfloat16"]),
                        ("x_i16", ["--input-dtype", "bfloat16"]), ("x_bf16", []),
                        ("x_bf16", ["--input-dtype", "bfloat16"])]:
        status, out, err = _run(args + ["--input", str(tmp_path / f"{name}.npy"), *extra], capsys)
        assert status == 1, err
        reports[(name, tuple(extra))] = json.loads(out)
    first = reports[("x_f32", ())]
    (row,) = first["rows"]  # the flipped nibble: row 1, element 6 (byte 3, low nibble)
    assert row["coords"]["row"] == 1 and row["coords"]["dim"] == 6
    assert row["input"] == float(x[1, 6])  # the bf16 value, not its bit pattern as an integer
    assert all(r == first for r in reports.values())


def test_uint16_npy_without_the_flag_says_to_pass_it(tmp_path: Path, capsys) -> None:
    x, args = _case(tmp_path)
    np.save(tmp_path / "x_u16.npy", x.view(np.uint16))
    status, out, err = _run(args + ["--input", str(tmp_path / "x_u16.npy")], capsys)
    assert status == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert "x_u16.npy holds uint16" in err and "pass --input-dtype bfloat16" in err


def test_an_npy_dtype_the_flag_contradicts_is_refused(tmp_path: Path, capsys) -> None:
    x, args = _case(tmp_path)
    np.save(tmp_path / "x_f32.npy", x.astype(np.float32))
    status, _, err = _run(args + ["--input", str(tmp_path / "x_f32.npy"), "--input-dtype", "bfloat16"], capsys)
    assert status == 2 and "x_f32.npy holds float32, --input-dtype says bfloat16" in err


def _huge_npy(path: Path) -> Path:
    """A valid .npy header claiming shape (2^40,) float32, followed by 16 bytes of data."""
    with path.open("wb") as fh:
        np.lib.format.write_array_header_1_0(fh, {"descr": "<f4", "fortran_order": False, "shape": (HUGE,)})
        fh.write(b"\0" * 16)
    return path


@pytest.mark.parametrize("role", ["EXPECTED", "--input"])
def test_an_npy_claiming_more_than_it_holds_is_a_usage_error(tmp_path: Path, capsys, role: str) -> None:
    _, args = _case(tmp_path)
    huge = _huge_npy(tmp_path / "huge.npy")
    argv = ([*args[:1], str(huge), *args[2:]] if role == "EXPECTED"
            else args + ["--input", str(huge)])
    status, out, err = _run(argv, capsys)
    assert status == 2, err
    assert len(err.strip().splitlines()) == 1 and "internal error" not in err
    assert f"{role}: huge.npy claims shape ({HUGE},) of float32 ({4 * HUGE} bytes) but holds 16 bytes" in err


def test_an_npz_member_claiming_more_than_it_holds_is_a_usage_error(tmp_path: Path, capsys) -> None:
    import zipfile

    _, args = _case(tmp_path)
    member = _huge_npy(tmp_path / "member.npy").read_bytes()
    with zipfile.ZipFile(tmp_path / "huge.npz", "w") as archive:
        archive.writestr("expected.npy", member)
    status, _, err = _run([args[0], str(tmp_path / "huge.npz"), *args[2:]], capsys)
    assert status == 2 and f"EXPECTED: huge.npz:expected claims shape ({HUGE},)" in err, err
    scales_at = args.index("--scales") + 1
    status, _, err = _run([*args[:scales_at], str(tmp_path / "huge.npz"), *args[scales_at + 1:]], capsys)
    assert status == 2 and f"--scales: huge.npz:expected claims shape ({HUGE},)" in err, err
