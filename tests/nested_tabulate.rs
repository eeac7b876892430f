//! Nested `tabulate`s and indexing values that depend on the index of
//! `tabulate`: values against hand-computed expectations, the JIT (SIMD
//! on and off) equal to the interpreter, gradients against finite
//! differences in reverse and forward mode, and errors at the index.

mod common;

use common::{check_gradient, check_jvp, err, run_both};
use egrad::internals::types::value::Value;
use egrad::internals::types::DType;
use egrad::Program;

fn prog(src: &str) -> Program {
    Program::parse_named("nest.eg", src).unwrap_or_else(|e| panic!("{e}"))
}

fn f64s(xs: &[f64]) -> Value {
    Value::array(DType::F64, vec![xs.len()], xs.to_vec())
}

fn matrix(rows: usize, cols: usize, xs: &[f64]) -> Value {
    Value::array(DType::F64, vec![rows, cols], xs.to_vec())
}

/// The results of `f` (checked JIT = interpreter) printed as the CLI does.
fn shown(p: &Program, f: &str, args: &[Value]) -> Vec<String> {
    let out = run_both(p, f, args).unwrap_or_else(|e| panic!("{f}: {e}"));
    out.iter().map(|v| v.to_string()).collect()
}

const NESTED: &str = "fn outer2[N, M](x: f64[N], y: f64[M]) -> f64[N, M] =
  tabulate[N](i => tabulate[M](j => x[i] * y[j]))
fn affine[N, K](A: f64[N, K], x: f64[K], b: f64[N]) -> f64[N, K] =
  tabulate[N](i => tabulate[K](j => A[i, j] * x[j] + b[i]))
fn transposed[N, K](A: f64[N, K]) -> f64[K, N] = tabulate[K](i => tabulate[N](j => A[j, i]))
fn lower[N](x: f64[N]) -> f64[N, N] =
  tabulate[N](i => tabulate[N](j => if j <= i { x[i] * x[j] } else { 0.0 * x[j] }))
fn shifted[N](x: f64[N]) -> f64[N-1, N-1] =
  tabulate[N-1](i => { let d = x[i+1] - x[i]; tabulate[N-1](j => d * x[j+1] + f64(i) - f64(j)) })
fn three[N](x: f64[N]) -> f64[N, 2, 3] =
  tabulate[N](i => tabulate[2](j => tabulate[3](k => x[i] * f64(10 * j + k))))
fn rownorm[N, K](A: f64[N, K]) -> f64[N, K] =
  tabulate[N](i => { let s = +/A[i]; tabulate[K](j => A[i, j] / s + +/(A[i] .* A[i])) })
fn same[N](x: f64[N]) -> f64[N, 3] = tabulate[N](i => tabulate[3](j => x[i]))
fn fixed[N](x: f64[N]) -> f64[N, 2] = tabulate[N](i => tabulate[2](j => x[j] * 2.0))
fn less[N](x: f64[N]) -> bool[N, N] = tabulate[N](i => tabulate[N](j => x[i] < x[j]))
fn pairs[N, K](A: f64[N, K]) -> f64[N, N] =
  tabulate[N](i => tabulate[N](j => +/(A[i] .* A[j])))";

#[test]
fn nested_tabulates_give_every_element() {
    let p = prog(NESTED);
    let x = f64s(&[1.0, 2.0, 4.0]);
    let a = matrix(3, 2, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(
        shown(&p, "outer2", &[x.clone(), f64s(&[10.0, 20.0])]),
        ["[10, 20, 20, 40, 40, 80]"]
    );
    assert_eq!(
        shown(
            &p,
            "affine",
            &[a.clone(), f64s(&[1.0, 10.0]), f64s(&[100.0, 200.0, 300.0])]
        ),
        ["[101, 120, 203, 240, 305, 360]"]
    );
    assert_eq!(
        shown(&p, "transposed", std::slice::from_ref(&a)),
        ["[1, 3, 5, 2, 4, 6]"]
    );
    assert_eq!(
        shown(&p, "lower", std::slice::from_ref(&x)),
        ["[1, 0, 0, 2, 4, 0, 4, 8, 16]"]
    );
    // d = 1, 2; element (i, j) = d_i * x[j+1] + i - j.
    assert_eq!(
        shown(&p, "shifted", std::slice::from_ref(&x)),
        ["[2, 3, 5, 8]"]
    );
    assert_eq!(
        shown(&p, "three", &[f64s(&[1.0, 2.0])]),
        ["[0, 1, 2, 10, 11, 12, 0, 2, 4, 20, 22, 24]"]
    );
    let m = matrix(2, 2, &[1.0, 3.0, 2.0, 2.0]);
    assert_eq!(shown(&p, "rownorm", &[m]), ["[10.25, 10.75, 8.5, 8.5]"]);
    assert_eq!(
        shown(&p, "same", &[f64s(&[1.0, 2.0])]),
        ["[1, 1, 1, 2, 2, 2]"]
    );
    assert_eq!(
        shown(&p, "fixed", std::slice::from_ref(&x)),
        ["[2, 4, 2, 4, 2, 4]"]
    );
    assert_eq!(
        shown(&p, "less", &[f64s(&[3.0, 1.0, 2.0])]),
        ["[false, false, false, true, false, true, true, false, false]"]
    );
    assert_eq!(
        shown(&p, "pairs", std::slice::from_ref(&a)),
        ["[5, 11, 17, 11, 25, 39, 17, 39, 61]"]
    );
    // Empty lengths inside and outside.
    assert_eq!(shown(&p, "outer2", &[f64s(&[]), f64s(&[1.0])]), ["[]"]);
    assert_eq!(shown(&p, "outer2", &[x, f64s(&[])]), ["[]"]);
}

const STACKED: &str = "fn col[N, K](A: f64[N, K], k: i64) -> f64[N] = tabulate[N](i => (A[i] .* A[i])[k])
fn first[N, K](A: f64[N, K], w: f64[K]) -> f64[N] = tabulate[N](i => (A[i] .* w)[0] + (A[i] .* w)[1])
fn diag[N](A: f64[N, N]) -> f64[N] = tabulate[N](i => (A[i] * 2.0)[i])
fn picked[N, K](A: f64[N, K], ks: i64[N]) -> f64[N] = tabulate[N](i => (A[i] + 1.0)[ks[i]])
fn planes[N](X: f64[N, 2, 3]) -> f64[N, 3] = tabulate[N](i => (X[i] * 2.0)[1])
fn some[N](A: f64[N, 3], ks: i64[2]) -> f64[N, 2] = tabulate[N](i => (A[i] * 2.0)[ks])
fn cross[N](A: f64[N, 2]) -> f64[N, 2] =
  tabulate[N](i => { let r = A[i] .* A[i]; tabulate[2](j => r[j] - r[1 - j]) })";

#[test]
fn values_that_depend_on_the_index_can_be_indexed() {
    let p = prog(STACKED);
    let a = matrix(3, 2, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let k = |n: f64| Value::scalar(DType::I64, n);
    assert_eq!(shown(&p, "col", &[a.clone(), k(1.0)]), ["[4, 16, 36]"]);
    assert_eq!(
        shown(&p, "first", &[a.clone(), f64s(&[1.0, 10.0])]),
        ["[21, 43, 65]"]
    );
    let sq = matrix(2, 2, &[1.0, 2.0, 3.0, 4.0]);
    assert_eq!(shown(&p, "diag", std::slice::from_ref(&sq)), ["[2, 8]"]);
    let ks = Value::array(DType::I64, vec![3], vec![1.0, 0.0, 1.0]);
    assert_eq!(shown(&p, "picked", &[a.clone(), ks]), ["[3, 4, 7]"]);
    let x = Value::array(DType::F64, vec![2, 2, 3], (0..12).map(f64::from).collect());
    assert_eq!(shown(&p, "planes", &[x]), ["[6, 8, 10, 18, 20, 22]"]);
    assert_eq!(shown(&p, "cross", &[sq]), ["[-3, 3, -7, 7]"]);
    let ks = Value::array(DType::I64, vec![2], vec![2.0, 0.0]);
    let a3 = matrix(2, 3, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(shown(&p, "some", &[a3.clone(), ks]), ["[6, 2, 12, 8]"]);
    let ks = Value::array(DType::I64, vec![2], vec![3.0, 0.0]);
    let e = run_both(&p, "some", &[a3, ks]).unwrap_err();
    assert!(
        e.contains("index 3 is out of range for an array of length 3"),
        "{e}"
    );
    // An index out of a row's range is the run-time error at the index,
    // never a read of the next row.
    for bad in [2.0, 7.0] {
        let e = run_both(&p, "col", &[a.clone(), k(bad)]).unwrap_err();
        assert!(
            e.contains(&format!(
                "index {bad} is out of range for an array of length 2"
            )) && e.contains("nest.eg:1:"),
            "{e}"
        );
    }
    let ks = Value::array(DType::I64, vec![3], vec![1.0, 2.0, 0.0]);
    let e = run_both(&p, "picked", &[a, ks]).unwrap_err();
    assert!(
        e.contains("index 2 is out of range") && e.contains("nest.eg:4:"),
        "{e}"
    );
}

#[test]
fn misuse_is_reported_at_the_index() {
    let e = err("fn f[N](A: f64[N, 2]) -> f64[N] = tabulate[N](i => (A[i] * 2.0)[2])");
    assert!(
        e.contains("index 2 is out of range for an array of length 2"),
        "{e}"
    );
    let e = err("fn f[N](A: f64[N, 2], k: f64) -> f64[N] = tabulate[N](i => (A[i] * 2.0)[k])");
    assert!(e.contains("an index must be an integer"), "{e}");
    let e = err("fn f[N](y: f64[N], x: f64[3]) -> f64[N, 4] = tabulate[N](i => tabulate[4](j => x[j] * y[i]))");
    assert!(e.contains("reads rows 0..4 of an array of length 3"), "{e}");
}

const GRADS: &str = "fn net[N, K](A: f64[N, K], x: f64[K], b: f64[N]) -> f64 {
  let h = tabulate[N](i => tabulate[K](j => tanh(A[i, j] * x[j] + b[i])))
  let g = tabulate[N](i => { let r = h[i] .* h[i]; tabulate[K](j => r[j] * reverse(x)[j]) })
  +/flatten(g) + +/flatten(tabulate[N](i => tabulate[N](j => +/(A[i] .* A[j]) * b[j])))
}
@grad(A, x, b)
fn dnet[N, K](A: f64[N, K], x: f64[K], b: f64[N]) -> (f64[N, K], f64[K], f64[N]) = net(A, x, b)
@jvp(A, x, b)
fn tnet[N, K](A: f64[N, K], x: f64[K], b: f64[N], dA: f64[N, K], dx: f64[K], db: f64[N]) -> f64 = net(A, x, b)
fn picks[N, K](A: f64[N, K], ks: i64[N]) -> f64 = +/tabulate[N](i => sin(A[i] * 3.0)[ks[i]] * (A[i] .* A[i])[1])
@grad(A)
fn dpicks[N, K](A: f64[N, K], ks: i64[N]) -> f64[N, K] = picks(A, ks)";

#[test]
fn gradients_through_nested_tabulates_match_finite_differences() {
    let p = prog(GRADS);
    let a = matrix(3, 2, &[0.5, -1.0, 0.25, 1.5, -0.75, 2.0]);
    let args = [a, f64s(&[0.3, -0.7]), f64s(&[0.1, -0.2, 0.4])];
    check_gradient(&p, "dnet", "net", 3, &args, "nested tabulate");
    check_jvp(&p, "tnet", "net", 3, &args, "nested tabulate");
    let a = matrix(3, 3, &[0.5, -1.0, 0.25, 1.5, -0.75, 2.0, 0.1, 0.2, 0.3]);
    let ks = Value::array(DType::I64, vec![3], vec![2.0, 0.0, 1.0]);
    check_gradient(&p, "dpicks", "picks", 1, &[a, ks], "indexed stack");
}

const CALLS: &str = "fn rowsq[K](a: f64[K]) -> f64[K] = tabulate[K](j => a[j] * a[j])
fn sq_rows[N, K](A: f64[N, K]) -> f64[N, K] = tabulate[N](i => rowsq(A[i]))
fn diffs[K](a: f64[K]) -> f64[K-1] = tabulate[K-1](j => a[j + 1] - a[j])
fn diff_rows[N, K](A: f64[N, K]) -> f64[N, K-1] = tabulate[N](i => diffs(A[i] * 2.0))
fn flipped[N, K](A: f64[N, K]) -> f64[N, K] = tabulate[N](i => reverse(A[i] * 2.0))
fn turned[N](A: f64[N, 4]) -> f64[N, 2, 2] = tabulate[N](i => transpose(reshape[2, 2](A[i] + 0.0)))
fn right[N](A: f64[N, 4], W: f64[2, 3]) -> f64[N, 2, 3] = tabulate[N](i => matmul(reshape[2, 2](A[i] * 1.0), W))
fn left[N](A: f64[N, 4], W: f64[3, 2]) -> f64[N, 3, 2] = tabulate[N](i => matmul(W, reshape[2, 2](A[i] * 1.0)))
fn matvecs[N](A: f64[3, 4], V: f64[N, 4]) -> f64[N, 3] = tabulate[N](i => matmul(A, V[i] * 2.0))
fn vecmats[N](A: f64[4, 3], V: f64[N, 4]) -> f64[N, 3] = tabulate[N](i => matmul(V[i] * 2.0, A))
fn joined[N](A: f64[N, 2]) -> f64[N, 3] = tabulate[N](i => concat(A[i] * 1.0, tabulate[1](k => A[i][k] * 3.0)))
fn loss[N](A: f64[N, 4], W: f64[3, 2]) -> f64 =
  +/flatten(left(A, W) .* left(A, W)) + +/flatten(turned(A) .* turned(A)) + +/flatten(sin(right(A, transpose(W)))) +
  +/flatten(flipped(A) .* sq_rows(A)) + +/flatten(diff_rows(A) .* diff_rows(A)) +
  +/flatten(joined(reshape[2 * N, 2](A)) .* joined(reshape[2 * N, 2](A)))
@grad(A, W)
fn dloss[N](A: f64[N, 4], W: f64[3, 2]) -> (f64[N, 4], f64[3, 2]) = loss(A, W)
@jvp(A, W)
fn tloss[N](A: f64[N, 4], W: f64[3, 2], dA: f64[N, 4], dW: f64[3, 2]) -> f64 = loss(A, W)";

#[test]
fn array_functions_run_on_each_element_of_a_stack() {
    let p = prog(CALLS);
    let a = matrix(2, 3, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(
        shown(&p, "sq_rows", std::slice::from_ref(&a)),
        ["[1, 4, 9, 16, 25, 36]"]
    );
    assert_eq!(
        shown(&p, "diff_rows", std::slice::from_ref(&a)),
        ["[2, 2, 2, 2]"]
    );
    assert_eq!(
        shown(&p, "flipped", std::slice::from_ref(&a)),
        ["[6, 4, 2, 12, 10, 8]"]
    );
    let a4 = matrix(2, 4, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    assert_eq!(
        shown(&p, "turned", std::slice::from_ref(&a4)),
        ["[1, 3, 2, 4, 5, 7, 6, 8]"]
    );
    let w = matrix(2, 3, &[1.0, 0.0, 1.0, 0.0, 1.0, 1.0]);
    assert_eq!(
        shown(&p, "right", &[a4.clone(), w]),
        ["[1, 2, 3, 3, 4, 7, 5, 6, 11, 7, 8, 15]"]
    );
    let w = matrix(3, 2, &[1.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
    assert_eq!(
        shown(&p, "left", &[a4.clone(), w.clone()]),
        ["[1, 2, 3, 4, 4, 6, 5, 6, 7, 8, 12, 14]"]
    );
    let m34 = matrix(
        3,
        4,
        &[1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0],
    );
    assert_eq!(
        shown(&p, "matvecs", &[m34, a4.clone()]),
        ["[2, 10, 20, 10, 26, 52]"]
    );
    let m43 = matrix(
        4,
        3,
        &[1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0],
    );
    assert_eq!(
        shown(&p, "vecmats", &[m43, a4.clone()]),
        ["[2, 10, 20, 10, 26, 52]"]
    );
    assert_eq!(
        shown(&p, "joined", &[matrix(2, 2, &[1.0, 2.0, 3.0, 4.0])]),
        ["[1, 2, 3, 3, 4, 9]"]
    );
    let a4 = matrix(2, 4, &[0.5, -1.0, 0.25, 1.5, -0.75, 2.0, 0.1, -0.3]);
    let w = matrix(3, 2, &[0.2, -0.4, 0.6, 0.1, -0.5, 0.3]);
    check_gradient(
        &p,
        "dloss",
        "loss",
        2,
        &[a4.clone(), w.clone()],
        "stacked calls",
    );
    check_jvp(&p, "tloss", "loss", 2, &[a4, w], "stacked calls");
}

const LOOPS: &str = "fn grid[N, M](x: f64[N], y: f64[M], n: i64) -> f64[N, M] =
  tabulate[N](i => tabulate[M](j => iterate(n, x[i] * y[j], s => s * 0.9 + 0.1 * sin(s + y[j]))))
fn rows[N, K](X: f64[N, K], n: i64) -> f64[N, K] =
  tabulate[N](i => { let r = X[i] * 2.0; tabulate[K](j => iterate(n, r[j], s => s * 0.5 + reverse(r)[j])) })
fn loss[N, M](x: f64[N], y: f64[M], n: i64) -> f64 = +/flatten(grid(x, y, n) .* grid(x, y, n))
@grad(x, y)
fn dloss[N, M](x: f64[N], y: f64[M], n: i64) -> (f64[N], f64[M]) = loss(x, y, n)";

#[test]
fn loops_run_inside_nested_tabulates() {
    let p = prog(LOOPS);
    // The loops stay loops: one per function, over the flat stack.
    for f in ["grid", "rows"] {
        let text = p.ir(f).unwrap().to_string();
        assert_eq!(text.matches(" = loop ").count(), 1, "{text}");
    }
    let n = |k: f64| Value::scalar(DType::I64, k);
    assert_eq!(
        shown(&p, "rows", &[matrix(2, 2, &[1.0, 2.0, 3.0, 4.0]), n(1.0)]),
        ["[5, 4, 11, 10]"]
    );
    let (x, y) = (f64s(&[1.0, -0.5]), f64s(&[0.5, 1.0, 2.0]));
    let g = shown(&p, "grid", &[x.clone(), y.clone(), n(0.0)]);
    assert_eq!(g, ["[0.5, 1, 2, -0.25, -0.5, -1]"]);
    check_gradient(
        &p,
        "dloss",
        "loss",
        2,
        &[x, y, n(40.0)],
        "loops in nested tabulates",
    );
}

const ARG: &str = "fn am[N, K](X: f64[N, K]) -> i64[N] = tabulate[N](i => argmax(X[i] * 2.0))
fn an[N, K](X: f64[N, K]) -> i64[N] = tabulate[N](i => argmin(sin(X[i])))
fn top[N, K](X: f64[N, K]) -> f64[N] = tabulate[N](i => { let r = X[i] * X[i]; r[argmax(r)] })
fn rows[N](X: f64[N, 6]) -> i64[N, 2] = tabulate[N](i => argmax(reshape[2, 3](X[i] * 1.0)))
fn best[N, K](X: f64[N, K]) -> f64 = +/top(X)
@grad(X)
fn dbest[N, K](X: f64[N, K]) -> f64[N, K] = best(X)";

#[test]
fn argmax_and_argmin_of_each_element() {
    let p = prog(ARG);
    let nan = f64::NAN;
    let x = matrix(
        2,
        6,
        &[1.0, 5.0, 2.0, 0.0, 3.0, nan, 4.0, 4.0, -9.0, 1.0, 2.0, 3.0],
    );
    assert_eq!(shown(&p, "am", std::slice::from_ref(&x)), ["[5, 0]"]);
    assert_eq!(shown(&p, "an", std::slice::from_ref(&x)), ["[5, 0]"]);
    assert_eq!(shown(&p, "top", std::slice::from_ref(&x)), ["[NaN, 81]"]);
    assert_eq!(shown(&p, "rows", &[x]), ["[1, 2, 0, 2]"]);
    let x = matrix(2, 3, &[0.5, -2.0, 1.0, 3.0, 0.25, -1.0]);
    check_gradient(&p, "dbest", "best", 1, &[x], "argmax of each element");
}

const SCATTER: &str = "fn spill[N, K](X: f64[N, K], ks: i64[2], w: f64[2]) -> f64[N, K] =
  tabulate[N](i => scatter_add(X[i] * 1.0, ks, w * X[i][0]))
fn put[N](X: f64[N, 3]) -> f64[N, 3] = tabulate[N](i => scatter_add(X[i] * 0.0, 1, X[i][2]))
fn loss[N, K](X: f64[N, K], ks: i64[2], w: f64[2]) -> f64 = +/flatten(sin(spill(X, ks, w)))
@grad(X)
fn dloss[N, K](X: f64[N, K], ks: i64[2], w: f64[2]) -> f64[N, K] = loss(X, ks, w)";

#[test]
fn scatter_add_into_each_element() {
    let p = prog(SCATTER);
    let x = matrix(2, 3, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let ks = Value::array(DType::I64, vec![2], vec![2.0, 2.0]);
    assert_eq!(
        shown(&p, "spill", &[x.clone(), ks.clone(), f64s(&[1.0, 10.0])]),
        ["[1, 2, 14, 4, 5, 50]"]
    );
    assert_eq!(
        shown(&p, "put", std::slice::from_ref(&x)),
        ["[0, 3, 0, 0, 6, 0]"]
    );
    let bad = Value::array(DType::I64, vec![2], vec![0.0, 3.0]);
    let e = run_both(&p, "spill", &[x.clone(), bad, f64s(&[1.0, 10.0])]).unwrap_err();
    assert!(e.contains("index 3 is out of range"), "{e}");
    check_gradient(
        &p,
        "dloss",
        "loss",
        1,
        &[x, ks, f64s(&[0.5, -0.25])],
        "scatter_add on stacks",
    );
}
