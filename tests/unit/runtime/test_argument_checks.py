"""Arguments that do not fit the parameter are refused naming it, never narrowed silently;
the cpu backend's same-array fast path re-checks arrays changed in place; a string is a
program path only when it names a file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import xlapy
from xlapy.errors import XlapyError
from xlapy.runtime.client import Client

BACKENDS = ["interpreter", "cpu"]
S32 = "func.func @main(%x: tensor<2xi32>) -> tensor<2xi32> { return %x : tensor<2xi32> }"
F32 = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = stablehlo.add %x, %x : tensor<4xf32>
  return %y : tensor<4xf32>
}"""


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("value", [np.array([2**33 + 1, 1], np.int64),
                                   np.array([4294967295, 1], np.uint32),
                                   np.array([2**31, 0], np.int64),
                                   np.array([0, -2**31 - 1], np.int64),
                                   np.array([2**63, 0], np.uint64)],
                         ids=["int64_wraps", "uint32_wraps", "int64_max_plus_one",
                              "int64_min_minus_one", "uint64_over_int64"])
def test_integer_argument_that_does_not_fit_is_refused(backend: str, value: np.ndarray) -> None:
    exe = xlapy.compile(S32, backend=backend)
    with pytest.raises(XlapyError, match="argument 0 of main.*do not fit s32"):
        exe(value)


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_range_integers_and_floats_convert(backend: str) -> None:
    np.testing.assert_array_equal(xlapy.compile(S32, backend=backend)([1, -2]), [1, -2])
    np.testing.assert_array_equal(
        xlapy.compile(S32, backend=backend)(np.array([7, 2**31 - 1], np.int64)), [7, 2**31 - 1])
    np.testing.assert_array_equal(  # (the range's ends, and numpy's unsigned 64-bit)
        xlapy.compile(S32, backend=backend)(np.array([-2**31, 5], np.int64)), [-2**31, 5])
    np.testing.assert_array_equal(
        xlapy.compile(S32, backend=backend)(np.array([3, 4], np.uint64)), [3, 4])
    assert xlapy.compile(S32.replace("2x", "0x"), backend=backend)(
        np.zeros(0, np.int64)).shape == (0,)
    got = xlapy.compile(F32, backend=backend)(np.full(4, 0.1))  # f64 rounds like a literal
    np.testing.assert_array_equal(got, np.full(4, np.float32(0.1)) * 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float_argument_overflowing_the_parameter_is_refused(backend: str) -> None:
    with pytest.raises(XlapyError, match="argument 0 of main.*do not fit f32"):
        xlapy.compile(F32, backend=backend)(np.full(4, 1e300))


@pytest.mark.parametrize("backend", BACKENDS)
def test_masked_array_with_masked_elements_is_refused(backend: str) -> None:
    exe = xlapy.compile(S32, backend=backend)
    with pytest.raises(XlapyError, match="argument 0 of main: a masked array"):
        exe(np.ma.array([1, 2], mask=[True, False], dtype=np.int32))
    np.testing.assert_array_equal(exe(np.ma.array([1, 2], dtype=np.int32)), [1, 2])
    with pytest.raises(XlapyError, match="masked array"):
        Client(backend).compile(exe.module).execute(
            [np.ma.array([1, 2], mask=[True, False], dtype=np.int32)])


def test_cpu_fast_path_rechecks_an_array_changed_in_place() -> None:
    exe = xlapy.compile(F32, backend="cpu")
    a = np.ones(4, np.float32)
    np.testing.assert_array_equal(exe(a), [2, 2, 2, 2])
    a.shape = (2, 2)
    with pytest.raises(XlapyError, match="argument 0 of main: expected f32\\[4\\]"):
        exe(a)
    a.shape = (4,)
    a.dtype = np.int32  # the bits of 1.0f as integers, converted exactly to float
    np.testing.assert_array_equal(exe(a), np.full(4, 2.0 * 0x3F800000, np.float32))


def test_one_line_program_ending_in_mlir_is_text_not_a_path() -> None:
    text = S32 + "  // from model.mlir"
    np.testing.assert_array_equal(xlapy.compile(text, backend="interpreter")([3, 4]), [3, 4])


def test_missing_program_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(XlapyError, match="cannot read program file .*No such file"):
        xlapy.compile(str(tmp_path / "absent.mlir"))
    path = tmp_path / "prog.mlir"
    path.write_text(S32)
    np.testing.assert_array_equal(xlapy.compile(str(path), backend="interpreter")([5, 6]),
                                  [5, 6])


def test_mlir_bytecode_and_binary_files_are_clear_errors(tmp_path: Path) -> None:
    """jax.export's serialized module (MLIR bytecode) and bytes that are not UTF-8, as a
    path or as bytes, from the API, the AOT front door and the CLI: an XlapyError naming the
    input and what to give instead (it had been a UnicodeDecodeError from deep inside)."""
    import io

    import xlapy.aot
    from xlapy.cli.main import main

    bytecode = b"ML\xefR\rStableHLO_v1.0\x00\x01\x02"
    for data, why in ((bytecode, "MLIR bytecode.*mlir_module\\(\\)"),
                      (b"\xff\xfe junk", "not UTF-8 text \\(byte 0: 0xff\\)")):
        path = tmp_path / "prog.mlir"
        path.write_bytes(data)
        for program in (str(path), path, data):
            with pytest.raises(XlapyError, match=why):
                xlapy.compile(program, backend="interpreter")
        with pytest.raises(XlapyError, match=why):
            xlapy.aot.compile(path, name="prog")
        out = io.StringIO()
        assert main(["compile", str(path)], out=out) != 0
        assert "Traceback" not in out.getvalue()
    # bytes of text compile as the text does
    np.testing.assert_array_equal(
        xlapy.compile(S32.encode(), backend="interpreter")([7, 8]), [7, 8])
