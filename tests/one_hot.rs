//! The cotangent of `x[k]` is one-hot: AD computes it at row `k` only
//! (`differentiate::onehot`), and native code reads a value whole in one
//! place and a row of it in another without storing it. The gradient of
//! one element costs one element, and a row never read does not poison the
//! gradient with `0 · inf`.

mod common;

use common::{check_gradient, prog, run_both};
use egrad::internals::backend::{compile, BackendOptions};
use egrad::internals::pipeline::{optimize_gradient, Options};
use egrad::internals::types::value::Value;

const PROGRAM: &str = r#"
// Element 3 of a tabulate of 10^12: the function costs one element.
fn far(x: f64[4]) -> f64 {
  let v = tabulate[1000000000000](i => sin(f64(i) * x[1]))
  v[3]
}
@grad(x)
fn dfar(x: f64[4]) -> f64[4] = far(x)

// One element of values that overflow elsewhere.
fn edge(x: f64[3]) -> f64 = exp(1000.0 * x)[0] + log(x)[2]
@grad(x)
fn dedge(x: f64[3]) -> f64[3] = edge(x)

// Indexes through element-wise ops, a division, a negation, sums of two
// reads of one row, rows of a matrix and a read twice.
fn mix[N](x: f64[N], A: f64[3, N]) -> f64 {
  let e = exp(x) / (1.0 + x .* x)
  let r = tanh(A * 0.5)
  -e[1] * e[1] + e[2] / x[2] + +/(r[1] .* x) + r[2][0] * e[0]
}
@grad(x, A)
fn dmix[N](x: f64[N], A: f64[3, N]) -> (f64[N], f64[3, N]) = mix(x, A)
"#;

#[test]
fn the_gradient_of_one_element_costs_one_element() {
    let p = prog(PROGRAM);
    let x = Value::f64(&[1.0, 2.0, 3.0, 4.0]);
    // Before, AD multiplied the one-hot cotangent by all 10^12 partials:
    // the run needed 7.3 TiB of scratch (or 10^12 operations).
    // Native code only: the interpreter makes every value whole, and is
    // refused by the memory limit.
    let native = |f: &str| {
        let opts = BackendOptions::default();
        compile(p.ir(f).unwrap(), &opts)
            .unwrap()
            .call(&[&x])
            .unwrap()
    };
    let want = [0.0, 3.0 * 6.0f64.cos(), 0.0, 0.0];
    assert_near(&native("dfar")[0].data, &want);
    // The function itself, as before.
    assert_near(&[native("far")[0].as_scalar()], &[6.0f64.sin()]);
    // The same with the optimizer.
    let g = optimize_gradient(&p, &Options::default().function("dfar")).unwrap();
    let vg = g.compile().unwrap().native().call(&[&x]).unwrap();
    assert_near(&vg[1].data, &want);
}

#[test]
fn a_row_never_read_does_not_poison_the_gradient() {
    let p = prog(PROGRAM);
    // exp(1000 x) is infinite at rows 1 and 2, which `edge` never reads:
    // their derivative is 0, and was NaN (0 · inf).
    let x = Value::f64(&[0.001, 1.0, 2.0]);
    let g = run_both(&p, "dedge", &[x]).unwrap();
    assert_near(&g[0].data, &[1000.0 * 1.0f64.exp(), 0.0, 0.5]);
}

/// Equal to the last bits egrad's math functions and libm may differ in;
/// zeros exactly.
fn assert_near(got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= 1e-14 * w.abs() && (*w != 0.0 || *g == 0.0),
            "{got:?} vs {want:?}"
        );
    }
}

#[test]
fn indexes_through_element_wise_ops_match_finite_differences() {
    let p = prog(PROGRAM);
    let x = Value::f64(&[0.3, -0.7, 1.1, 0.4]);
    let a = common::arr(&[3, 4], 7);
    check_gradient(&p, "dmix", "mix", 2, &[x.clone(), a.clone()], "mix");
    check_gradient(
        &p,
        "dedge",
        "edge",
        1,
        &[Value::f64(&[0.001, 0.002, 0.5])],
        "edge",
    );
    let g = run_both(&p, "dmix", &[x, a]).unwrap();
    assert_eq!(g.len(), 2);
}
