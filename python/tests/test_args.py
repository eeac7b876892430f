"""How arguments are taken: C-contiguous arrays of the native dtype are
read in place (copy=False proves it: it refuses anything else), other
inputs are converted under casting="same_kind", and what cannot be cast
is refused with an EgradTypeError at the parameter."""

import numpy as np
import pytest

import egrad

SUM = "fn sumsq[N](x: f64[N]) -> f64 = +/(x .* x)\nfn ident[M, K](X: f64[M, K]) -> f64[M, K] = X\n"


@pytest.fixture(scope="module")
def prog():
    return egrad.compile(SUM, name="sum.eg")


def test_contiguous_native_dtype_is_read_in_place(prog):
    strict = prog.function("sumsq", copy=False)
    x = np.arange(10.0)
    assert float(strict(x)) == float((x * x).sum())
    # A read-only array is fine: egrad never writes its inputs.
    x.setflags(write=False)
    assert float(strict(x)) == float((x * x).sum())


def test_big_array_in_place(prog):
    # 16M float64 = 128 MB; with copy=False a copy would be an error.
    x = np.full(1 << 24, 0.5)
    assert float(prog.function("sumsq", copy=False)(x)) == 0.25 * (1 << 24)


def test_non_contiguous_is_converted_by_default(prog):
    base = np.arange(20.0)
    view = base[::2]
    assert not view.flags.c_contiguous
    assert float(prog.function("sumsq")(view)) == float((view * view).sum())
    X = np.arange(12.0).reshape(3, 4)
    for M in (X.T, np.asfortranarray(X), X[:, 1:3]):
        out = prog.function("ident")(M)
        assert out.flags.c_contiguous
        np.testing.assert_array_equal(out, M)  # same values, row-major


def unaligned(values, dtype):
    """A C-contiguous array of `values` whose data starts one byte past
    an aligned address."""
    values = np.asarray(values, dtype)
    buf = np.zeros(values.nbytes + 1, np.uint8)
    a = buf[1:].view(dtype).reshape(values.shape)
    a[...] = values
    assert a.flags.c_contiguous and not a.flags.aligned
    return a


def test_unaligned_is_copied_by_default(prog):
    # Was an EgradInternalError: the conversion kept it unaligned.
    x = unaligned(np.arange(10.0), np.float64)
    assert float(prog.function("sumsq")(x)) == float((x * x).sum())
    X = unaligned(np.arange(12.0).reshape(3, 4), np.float64)
    np.testing.assert_array_equal(prog.function("ident")(X), X)
    with pytest.raises(egrad.EgradTypeError, match="not aligned"):
        prog.function("sumsq", copy=False)(x)


def test_copy_false_refuses_non_contiguous_with_the_reason(prog):
    strict = prog.function("sumsq", copy=False)
    with pytest.raises(egrad.EgradTypeError) as e:
        strict(np.arange(20.0)[::2])
    assert "argument `x` (f64[N]) cannot be read in place: it is not C-contiguous" in e.value.message
    assert e.value.location == "sum.eg:1:13"
    with pytest.raises(egrad.EgradTypeError, match="its dtype is float32, not float64"):
        strict(np.ones(3, np.float32))
    with pytest.raises(egrad.EgradTypeError, match="it is a list, not a NumPy ndarray"):
        strict([1.0, 2.0])
    with pytest.raises(TypeError, match="cannot be read in place: it is not C-contiguous"):
        prog.function("ident", copy=False)(np.ones((3, 2)).T)


def test_copy_default_for_the_whole_program():
    prog = egrad.compile(SUM, copy=False)
    with pytest.raises(egrad.EgradTypeError, match="copy=False"):
        prog.function("sumsq")(np.ones(3, np.float32))
    # ... and a function may ask otherwise.
    assert float(prog.function("sumsq", copy=None)(np.ones(3, np.float32))) == 3.0


def test_copy_true_is_refused(prog):
    with pytest.raises(ValueError, match="copy=True is not supported"):
        prog.function("sumsq", copy=True)


def test_same_kind_conversions(prog):
    f = prog.function("sumsq")
    assert float(f(np.ones(4, np.float32))) == 4.0  # float32 -> float64
    assert float(f(np.arange(4, dtype=np.int32))) == 14.0  # int -> float
    assert float(f([1, 2, 3])) == 14.0  # a list
    assert float(f(np.array([1.0, 2.0], dtype=">f8"))) == 5.0  # byte-swapped
    f32 = egrad.compile("fn s[N](x: f32[N]) -> f32 = +/x").function("s")
    assert float(f32(np.array([0.5, 0.25]))) == 0.75  # float64 -> float32 (same kind)


def test_unsafe_kinds_are_refused_at_the_parameter(prog, kinds):
    with pytest.raises(egrad.EgradTypeError) as e:
        prog.function("sumsq")(np.ones(3, np.complex128))
    assert e.value.message == (
        "argument `x` must be f64 (float64), got an array of dtype complex128: "
        'egrad converts only what NumPy casts to float64 with casting="same_kind"'
    )
    assert e.value.line == 1 and e.value.column == 13
    # float -> i64 index array
    with pytest.raises(egrad.EgradTypeError, match=r"argument `idx` must be i64 \(int64\), got an array of dtype float64"):
        kinds.function("pick")(np.ones(3), np.array([0.0, 1.0]))
    # a float for a run-time count
    with pytest.raises(egrad.EgradTypeError, match=r"argument `k` is an i64 \(a run-time integer\): pass a Python int, got float 1.0"):
        kinds.function("at")(np.ones(3), 1.0)
    # a float array for a bool parameter
    with pytest.raises(egrad.EgradTypeError, match="a bool parameter takes a bool array"):
        kinds.function("masked_sum")(np.ones(2), np.ones(2))
    with pytest.raises(egrad.EgradTypeError, match="which NumPy cannot make an array of"):
        prog.function("sumsq")([[1.0], [2.0, 3.0]])


def test_i64_scalar_values_are_checked_by_egrad(kinds):
    at = kinds.function("at")
    assert float(at(np.arange(4.0), np.int64(3))) == 3.0
    with pytest.raises(egrad.EgradTypeError, match="is a count and must not be negative, got -1"):
        at(np.arange(4.0), -1)
    # Past 2^53 a count is not exact in the f64 the size checks use.
    with pytest.raises(egrad.EgradTypeError, match=r"= 9007199254740993 is larger than 2\^53"):
        at(np.arange(4.0), 2**53 + 1)


def test_inputs_are_not_modified(kinds):
    x = np.arange(6.0)
    y = np.ones(6)
    before = (x.copy(), y.copy())
    kinds.function("axpy", copy=False)(3.0, x, y)
    np.testing.assert_array_equal(x, before[0])
    np.testing.assert_array_equal(y, before[1])


def test_same_array_twice(kinds):
    x = np.arange(4.0)
    np.testing.assert_array_equal(kinds.function("axpy", copy=False)(1.0, x, x), 2 * x)


def test_python_numbers_for_float_scalars_round_as_numpy_does():
    prog = egrad.compile("fn id32(x: f32) -> f32 = x\nfn id64(x: f64) -> f64 = x\n")
    id32, id64 = prog.function("id32"), prog.function("id64")
    for v in (0.1, 1 / 3, 2**24 + 1, 2**60 + 12345, -7, np.float64(0.1), np.float32(0.1), True):
        assert id32(v).tobytes() == np.asarray(v).astype(np.float32).tobytes(), v
        assert id64(v).tobytes() == np.asarray(v).astype(np.float64).tobytes(), v
    with pytest.raises(egrad.EgradTypeError, match="got an array of dtype complex128"):
        id64(1j)


def test_copy_must_be_none_or_false(prog):
    with pytest.raises(TypeError, match="copy must be None or False, got str"):
        prog.function("sumsq", copy="no")
