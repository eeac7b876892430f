"""egrad's errors as Python exceptions: the CLI's text, the kind, the
place (file, line, column), the exit code; Python's built-in classes
where they fit."""

import os

import numpy as np
import pytest

import egrad
from conftest import EXAMPLES


def test_syntax_error_has_the_cli_text_and_place():
    src = "fn f(x: f64) -> f64 {\n  x +* 2\n}\n"
    with pytest.raises(egrad.EgradSyntaxError) as e:
        egrad.compile(src, name="bad.eg")
    err = e.value
    assert isinstance(err, egrad.EgradError)
    assert str(err) == (
        "error: expected an expression, found `*`\n"
        " --> bad.eg:2:6\n"
        "  |\n"
        "2 |   x +* 2\n"
        "  |      ^"
    )
    assert (err.kind, err.file, err.line, err.column) == ("syntax", "bad.eg", 2, 6)
    assert err.location == "bad.eg:2:6"
    assert err.message == "expected an expression, found `*`"
    assert err.exit_code == 1


def test_syntax_error_in_a_file_names_the_path(tmp_path):
    p = tmp_path / "broken.eg"
    p.write_text("fn f(x: f64) -> f64 = x +\n")
    with pytest.raises(egrad.EgradSyntaxError) as e:
        egrad.compile_file(str(p))
    assert e.value.file == str(p)
    assert e.value.line == 2 or e.value.line == 1
    assert str(e.value).startswith("error: ")
    assert f" --> {p}:" in str(e.value)


def test_type_error_in_a_program():
    with pytest.raises(egrad.EgradTypeError) as e:
        egrad.compile("fn f(x: f64) -> f64 = x + y", name="t.eg")
    assert isinstance(e.value, TypeError)
    assert e.value.kind == "type"
    assert e.value.location == "t.eg:1:27"
    assert "`y`" in e.value.message


def test_unknown_function_is_a_usage_error(loss_prog):
    with pytest.raises(egrad.EgradUsageError) as e:
        loss_prog.function("nope")
    assert isinstance(e.value, ValueError)
    assert str(e.value) == "error: no function named `nope` (available: `loss`, `dloss_dw`)"
    assert e.value.location is None and e.value.exit_code == 2
    with pytest.raises(egrad.EgradUsageError, match="no function named `nope`"):
        loss_prog.grad("nope", wrt="x")
    with pytest.raises(egrad.EgradUsageError, match="no function named `nope`"):
        loss_prog.explain("nope")


def test_wrong_argument_count(loss_prog):
    f = loss_prog.function("loss")
    w = np.ones(3, np.float32)
    with pytest.raises(egrad.EgradUsageError, match=r"^error: `loss` takes 3 argument\(s\), got 4$"):
        f(w, w, 0.5, 1.0)
    with pytest.raises(egrad.EgradUsageError, match=r"`loss` takes 3 argument\(s\), got 2 \(missing `y`\)"):
        f(w, w)
    with pytest.raises(egrad.EgradUsageError, match=r"`loss` has no parameter `z` \(parameters: w, x, y\)"):
        f(w, w, 0.5, z=1)
    with pytest.raises(egrad.EgradUsageError, match="argument `w` of `loss` given twice"):
        f(w, w, 0.5, w=w)
    with pytest.raises(egrad.EgradUsageError, match=r"takes 3 argument\(s\), got 2"):
        loss_prog.grad("loss", wrt="w").value_and_grad(w, w)


def test_wrong_shapes_point_at_the_parameter(loss_prog):
    g = loss_prog.grad("loss", wrt="w")
    with pytest.raises(egrad.EgradTypeError) as e:
        g.grad(np.ones(3, np.float32), np.ones(4, np.float32), 0.5)
    err = e.value
    assert err.message == "arguments `w` and `x` disagree on `N`: `w` gives 3 (its length), `x` gives 4 (its length)"
    path = str(EXAMPLES / "loss.eg")
    assert (err.file, err.line, err.column) == (path, 2, 23)
    assert str(err).splitlines()[1] == f" --> {path}:2:23"
    assert err.notes == ["checked before native code runs; `loss` has signature (w: f32[N], x: f32[N], y: f32)"]
    with pytest.raises(egrad.EgradTypeError, match=r"argument `w` must be f32\[N\], got a value of rank 2"):
        g.grad(np.ones((3, 1), np.float32), np.ones(3, np.float32), 0.5)


def test_index_out_of_range_at_run_time(kinds):
    with pytest.raises(egrad.EgradRuntimeError) as e:
        kinds.function("at")(np.arange(4.0), 9)
    err = e.value
    assert isinstance(err, IndexError)
    assert err.kind == "runtime" and err.exit_code == 1
    assert "index 9 is out of range for an array of length 4" in err.message
    assert err.file == "kinds.eg" and err.line == 8


def test_missing_file():
    with pytest.raises(egrad.EgradIOError) as e:
        egrad.compile_file("/nonexistent/x.eg")
    assert isinstance(e.value, OSError)
    assert e.value.kind == "io"
    assert str(e.value).startswith("error: cannot read /nonexistent/x.eg")
    with pytest.raises(egrad.EgradIOError):
        egrad.compile_file(os.fsencode("/nonexistent/y.eg").decode())


def test_gradient_requests_that_make_no_sense(loss_prog):
    with pytest.raises(egrad.EgradUsageError, match="`dloss_dw` is a @grad function: its attribute says what to differentiate; drop wrt="):
        loss_prog.grad("dloss_dw", wrt="w")
    with pytest.raises(egrad.EgradUsageError, match="`loss` has no parameter `q` \\(parameters: w, x, y\\)"):
        loss_prog.grad("loss", wrt=["q"])
    with pytest.raises(egrad.EgradUsageError, match="wrt is empty"):
        loss_prog.grad("loss", wrt=[])
    with pytest.raises(egrad.EgradUsageError, match="a gradient needs one scalar result"):
        egrad.compile("fn v[N](x: f64[N]) -> f64[N] = x").grad("v", wrt="x")
    with pytest.raises(TypeError, match="wrt must be a parameter name or a list of names"):
        loss_prog.grad("loss", wrt=3)
    with pytest.raises(TypeError, match="function\\(\\) takes no wrt"):
        loss_prog.function("loss", wrt="w")


def test_bad_options():
    with pytest.raises(egrad.EgradUsageError, match="lam must be a non-negative number"):
        egrad.compile("fn f(x: f64) -> f64 = x", lam=-1.0)
    with pytest.raises(egrad.EgradUsageError, match="time_limit must be a non-negative number of seconds"):
        egrad.compile("fn f(x: f64) -> f64 = x", time_limit=1e300)
    prog = egrad.compile("fn f(x: f64) -> f64 = x * x")
    with pytest.raises(egrad.EgradUsageError, match="lam must be a non-negative number"):
        prog.grad("f", wrt="x", lam=float("nan"))
    # Beyond MAX_LAMBDA, lam times a residual's bytes could overflow.
    with pytest.raises(egrad.EgradUsageError, match="of at most 1e50"):
        prog.grad("f", wrt="x", lam=1e308)
    with pytest.raises(TypeError, match="unexpected keyword argument `lamda`"):
        prog.grad("f", wrt="x", lamda=1.0)
    with pytest.raises(TypeError, match="option `dims` must be a mapping"):
        prog.function("f", dims=[1, 2])
    with pytest.raises(TypeError, match="option `lam` must be a number"):
        prog.function("f", lam="big")
    with pytest.raises(egrad.EgradUsageError, match="lam_before must be a non-negative number"):
        prog.explain("f", wrt="x", lam_before=-2.0)


def test_deep_inputs_are_a_limit_error_not_a_crash():
    # A chain of 20,000 indexes overflowed the checker's stack on Python's
    # own thread: the interpreter itself crashed (a segfault).
    for body in ["x" + "[0]" * 20000, "(" * 20000 + "x[0]" + ")" * 20000]:
        with pytest.raises(egrad.EgradLimitError, match="nested too deeply"):
            egrad.compile("fn f(x: f64[3]) -> f64 {\n  " + body + "\n}\n")


def test_a_run_of_extreme_length_is_a_limit_error_not_a_hang():
    # A sum over a tabulate of 2^62 elements allocates nothing: it ran for
    # a century. The work limit refuses it before it starts.
    prog = egrad.compile(
        "fn g(x: f64[4]) -> f64 = +/tabulate[4611686018427387904](i => f64(i) * x[1])\n"
    )
    with pytest.raises(egrad.EgradLimitError, match="more than the work limit"):
        prog.function("g")(np.arange(4.0))


def test_error_classes_by_kind():
    assert set(egrad.errors.CLASSES) == {
        "syntax", "type", "unsupported", "limit", "usage", "io", "runtime", "internal",
    }
    for kind, cls in egrad.errors.CLASSES.items():
        assert issubclass(cls, egrad.EgradError), kind
    e = egrad.EgradUsageError("error: x", kind="usage", message="x", exit_code=2)
    assert (str(e), e.location, e.notes) == ("error: x", None, [])


def test_a_python_habit_gives_the_egrad_form_as_help():
    with pytest.raises(egrad.EgradSyntaxError) as e:
        egrad.compile("fn f(x: f64) -> f64 = x ** 2")
    err = e.value
    assert "`**`" in err.message, err.message
    assert any("pow(x, 2)" in h for h in err.helps), err.helps
    assert "= help: " in str(err)
    with pytest.raises(egrad.EgradError) as e:
        egrad.compile("fn f(alpha: f64) -> f64 = alpah * 2.0")
    assert any("alpha" in h for h in e.value.helps + e.value.notes + [e.value.message]), str(e.value)
