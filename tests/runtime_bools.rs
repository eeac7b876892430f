//! Run-time `bool` parameters and results, the index of `tabulate` as a
//! number, and `argmax`/`argmin`: values against hand-computed
//! expectations, the JIT (SIMD on and off) equal to the interpreter,
//! gradients against finite differences, and clear errors for misuse.

mod common;

use common::{check_gradient, err, run_both};
use egrad::internals::backend::{compile, BackendOptions, NativeArg, NativeOut};
use egrad::internals::types::value::Value;
use egrad::internals::types::DType;
use egrad::Program;

fn prog(src: &str) -> Program {
    Program::parse_named("bools.eg", src).unwrap_or_else(|e| panic!("{e}"))
}

fn vals(dtype: DType, xs: &[f64]) -> Value {
    Value::array(dtype, vec![xs.len()], xs.to_vec())
}

fn bools(xs: &[bool]) -> Value {
    let data = xs.iter().map(|&b| f64::from(u8::from(b))).collect();
    Value::array(DType::Bool, vec![xs.len()], data)
}

fn f64s(xs: &[f64]) -> Value {
    vals(DType::F64, xs)
}

/// The results of `f` (checked JIT = interpreter) printed as the CLI does.
fn shown(p: &Program, f: &str, args: &[Value]) -> Vec<String> {
    let out = run_both(p, f, args).unwrap_or_else(|e| panic!("{f}: {e}"));
    out.iter().map(|v| v.to_string()).collect()
}

const INDEX: &str = "fn weighted[N](x: f64[N]) -> f64[N] = tabulate[N](i => f64(i) * x[i])
fn next[N](x: f64[N]) -> i64[N] = tabulate[N](i => i + 1)
fn even[N](x: f64[N]) -> f64 = +/tabulate[N](i => if i % 2 == 0 { x[i] } else { 0.0 })
fn rows[M, K](X: f64[M, K]) -> f64[M, K] = tabulate[M](i => X[i] * f64(i))
fn shifted[N](x: f64[N]) -> f64[N-1] = tabulate[N-1](i => x[i + 1] * f64(i + 1) - f64(2 * i))
fn rotate[N](x: f64[N], n: i64) -> f64[N] = tabulate[N](i => x[(i + 2) % n])
fn ramp(n: i64, x: f64) -> f64 = +/tabulate[n](i => f64(i) * x)
fn loss[N](x: f64[N]) -> f64 = +/(tabulate[N](i => f64(i) * x[i]) * x)
@grad(x)
fn dloss[N](x: f64[N]) -> f64[N] = loss(x)";

#[test]
fn the_index_of_tabulate_is_a_number() {
    let p = prog(INDEX);
    let x = f64s(&[1.0, 2.0, 3.0, 4.0, 5.0]);
    assert_eq!(
        shown(&p, "weighted", std::slice::from_ref(&x)),
        ["[0, 2, 6, 12, 20]"]
    );
    assert_eq!(
        shown(&p, "next", std::slice::from_ref(&x)),
        ["[1, 2, 3, 4, 5]"]
    );
    assert_eq!(shown(&p, "even", std::slice::from_ref(&x)), ["9"]);
    assert_eq!(
        shown(&p, "shifted", std::slice::from_ref(&x)),
        ["[2, 4, 8, 14]"]
    );
    let m = Value::array(DType::F64, vec![3, 2], (1..=6).map(f64::from).collect());
    assert_eq!(shown(&p, "rows", &[m]), ["[0, 0, 3, 4, 10, 12]"]);
    let n = Value::scalar(DType::I64, 5.0);
    assert_eq!(shown(&p, "rotate", &[x.clone(), n]), ["[3, 4, 5, 1, 2]"]);
    for (n, want) in [(4.0, "12"), (0.0, "0")] {
        let args = [Value::scalar(DType::I64, n), Value::scalar(DType::F64, 2.0)];
        assert_eq!(shown(&p, "ramp", &args), [want]);
    }
    // A computed index out of range is the usual run-time error.
    let e = run_both(&p, "rotate", &[x.clone(), Value::scalar(DType::I64, 6.0)]).unwrap_err();
    assert!(
        e.contains("index 5 is out of range") && e.contains("bools.eg:6:"),
        "{e}"
    );
    check_gradient(
        &p,
        "dloss",
        "loss",
        1,
        &[f64s(&[0.5, -1.5, 2.0, 0.25])],
        "f64(i) * x[i]",
    );
}

const ARG: &str = "fn amax[N](x: f64[N]) -> i64 = argmax(x)
fn amin[N](x: f64[N]) -> i64 = argmin(x)
fn rmax[M, K](X: f64[M, K]) -> i64[M] = argmax(X)
fn rmin[M, K](X: f32[M, K]) -> i64[M] = argmin(X)
fn imax[N](k: i64[N]) -> i64 = argmax(k)
fn top[N](x: f64[N]) -> f64 = x[argmax(x)] * sin(x[argmin(x)])
@grad(x)
fn dtop[N](x: f64[N]) -> f64[N] = top(x)
fn rowtop[M, K](X: f64[M, K]) -> f64 = +/(X[0][argmax(X)] * 2.0)
@grad(X)
fn drowtop[M, K](X: f64[M, K]) -> f64[M, K] = rowtop(X)";

#[test]
fn argmax_and_argmin_take_the_first_index_and_the_first_nan() {
    let p = prog(ARG);
    let nan = f64::NAN;
    let one = |f: &str, x: Value| shown(&p, f, &[x]).remove(0);
    assert_eq!(one("amax", f64s(&[1.0, 3.0, 2.0, 3.0])), "1");
    assert_eq!(one("amin", f64s(&[1.0, 0.0, 2.0, 0.0])), "1");
    assert_eq!(one("amax", f64s(&[1.0, nan, 2.0, nan])), "1");
    assert_eq!(one("amin", f64s(&[1.0, -4.0, nan])), "2");
    assert_eq!(one("amax", f64s(&[-0.0, 0.0])), "0");
    assert_eq!(one("amax", f64s(&[])), i64::MAX.to_string());
    assert_eq!(one("imax", vals(DType::I64, &[3.0, -1.0, 7.0, 7.0])), "2");
    let m = |d, xs: &[f64]| Value::array(d, vec![3, 3], xs.to_vec());
    let x = m(DType::F64, &[1.0, 2.0, 2.0, 5.0, 1.0, nan, 0.0, 0.0, 0.0]);
    assert_eq!(one("rmax", x), "[1, 2, 0]");
    let x = m(DType::F32, &[1.0, 2.0, 2.0, 5.0, 1.0, 1.0, 0.0, -1.0, 0.0]);
    assert_eq!(one("rmin", x), "[0, 1, 1]");
    // `x[argmax(x)]` is a gather: its gradient goes to that element.
    check_gradient(
        &p,
        "dtop",
        "top",
        1,
        &[f64s(&[1.0, 3.0, -2.0, 2.5])],
        "x[argmax(x)]",
    );
    let x = Value::array(DType::F64, vec![2, 3], vec![0.5, 2.0, -1.0, 3.0, 1.0, 0.0]);
    check_gradient(&p, "drowtop", "rowtop", 1, &[x], "X[0][argmax(X)]");
}

const BOOL: &str = "fn masked[N](mask: bool[N], x: f64[N]) -> f64 = +/(if mask { x } else { 0.0 })
fn positive[N](x: f64[N]) -> bool[N] = x > 0.0
fn any_big[N](x: f64[N]) -> bool = max/x > 10.0
fn logic[N](a: bool[N], b: bool[N], c: bool) -> bool[N] = (a && !b) || c
fn count[N](a: bool[N]) -> (i64, f64) = (+/i64(a), +/f64(a))
fn same(b: bool) -> bool = b
fn always[N](x: f64[N]) -> bool[N] = true
fn through[N](x: f64[N]) -> f64 = masked(x > 1.0, x)
fn twice(b: bool, x: f64) -> f64 = if b { x * 2.0 } else { -x }
fn pick[N](m: bool[N], x: f64[N]) -> f64[N] = tabulate[N](i => if m[i] { x[i] } else { 0.0 })
fn odd[N](x: f32[N]) -> bool[N] = tabulate[N](i => i % 2 == 1)
fn loss[N](x: f64[N], mask: bool[N]) -> f64 = masked(mask, sin(x)) * masked(!mask, x)
@grad(x)
fn dloss[N](x: f64[N], mask: bool[N]) -> f64[N] = loss(x, mask)";

#[test]
fn bools_are_parameters_and_results() {
    let p = prog(BOOL);
    let tft = bools(&[true, false, true]);
    let x = f64s(&[1.0, 2.0, 3.0]);
    assert_eq!(shown(&p, "masked", &[tft.clone(), x.clone()]), ["4"]);
    assert_eq!(
        shown(&p, "positive", &[f64s(&[1.0, -2.0, 0.0])]),
        ["[true, false, false]"]
    );
    assert_eq!(shown(&p, "any_big", std::slice::from_ref(&x)), ["false"]);
    let (a, b) = (
        bools(&[true, true, false, false]),
        bools(&[true, false, true, false]),
    );
    let f = Value::scalar(DType::Bool, 0.0);
    let t = Value::scalar(DType::Bool, 1.0);
    assert_eq!(
        shown(&p, "logic", &[a.clone(), b.clone(), f.clone()]),
        ["[false, true, false, false]"]
    );
    assert_eq!(
        shown(&p, "logic", &[a, b, t.clone()]),
        ["[true, true, true, true]"]
    );
    assert_eq!(
        shown(&p, "count", &[bools(&[true, true, false, true])]),
        ["3", "3"]
    );
    assert_eq!(shown(&p, "same", std::slice::from_ref(&t)), ["true"]);
    assert_eq!(shown(&p, "always", &[f64s(&[1.0, 2.0])]), ["[true, true]"]);
    assert_eq!(shown(&p, "through", std::slice::from_ref(&x)), ["5"]);
    assert_eq!(
        shown(&p, "twice", &[f, Value::scalar(DType::F64, 3.0)]),
        ["-3"]
    );
    assert_eq!(
        shown(&p, "pick", &[bools(&[false, true, true]), x.clone()]),
        ["[0, 2, 3]"]
    );
    let x32 = vals(DType::F32, &[0.0; 4]);
    assert_eq!(shown(&p, "odd", &[x32]), ["[false, true, false, true]"]);
    check_gradient(
        &p,
        "dloss",
        "loss",
        1,
        &[f64s(&[0.5, -1.0, 2.0]), tft.clone()],
        "masked",
    );
    // A bool argument holds 0 or 1 only, checked before anything runs.
    let e = run_both(&p, "masked", &[vals(DType::Bool, &[1.0, 2.0, 0.0]), x]).unwrap_err();
    assert!(
        e.contains("argument `mask` must be true or false") && e.contains("got 2"),
        "{e}"
    );
}

#[test]
fn bools_go_through_native_arguments_and_outputs() {
    let p = prog(BOOL);
    let native = compile(p.ir("logic").unwrap(), &BackendOptions::verified()).unwrap();
    let shape = [3usize];
    let (a, b) = ([1i64, 1, 0], [1i64, 0, 0]);
    let mut out = [7i64; 3];
    let args = [
        NativeArg::bools(&a, &shape),
        NativeArg::bools(&b, &shape),
        NativeArg::bool(false),
    ];
    let mut ws = native.workspace();
    native
        .call_into(&args, &mut [NativeOut::Bool(&mut out)], &mut ws)
        .unwrap();
    assert_eq!(out, [0, 1, 0]);
    let bad = [1i64, 5, 0];
    let args = [
        NativeArg::bools(&bad, &shape),
        NativeArg::bools(&b, &shape),
        NativeArg::bool(true),
    ];
    let e = native
        .call_into(&args, &mut [NativeOut::Bool(&mut out)], &mut ws)
        .unwrap_err();
    assert!(e.message.contains("must be true or false"), "{}", e.message);
}

#[test]
fn misuse_is_a_clear_error() {
    for (src, want) in [
        ("fn f(x: f64) -> i64 = argmax(x)", "`argmax` needs an array"),
        (
            "fn f(x: f64[2, 2, 2]) -> i64 = argmin(x)",
            "`argmin` takes a vector or a matrix",
        ),
        (
            "fn f(b: bool) -> f64 = b + 1.0",
            "`+` needs numbers, not bools",
        ),
        (
            "fn f(b: bool[3], x: f64[3]) -> f64[3] = b * x",
            "`*` needs numbers, not bools",
        ),
        ("fn f(x: f64) -> bool = x", "declared to return bool"),
        (
            "fn g(b: bool) -> f64 = 1.0\nfn f(x: f64) -> f64 = g(1.0)",
            "must have type bool",
        ),
        (
            "@grad(b)\nfn f(b: bool[3], x: f64) -> f64 = x",
            "cannot differentiate the bool `b`",
        ),
        (
            "fn f[N](x: f64[N]) -> f64[N] = tabulate[N](i => x[i] * i)",
            "mixes element types f64 and i64",
        ),
        (
            "fn f[N](x: f64[N]) -> i64 = +/tabulate[N](i => +/i)",
            "its operand is a scalar",
        ),
    ] {
        let e = err(src);
        assert!(e.contains(want) && !e.contains("internal"), "{src}\n{e}");
        assert!(e.contains("<input>:"), "{src}: no place\n{e}");
    }
}
