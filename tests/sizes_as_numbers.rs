//! Size parameters used as numbers (`+/x / N`, `f64(N)`, `R * C`,
//! `iterate(N, ...)`): what they compute, native code equal to the
//! interpreter bit for bit (SIMD on and off), inside `tabulate`, `@vmap`,
//! loops and inlined callees at compound sizes, gradients against central
//! differences, and the IR's `dim` op.

mod common;

use common::{check_gradient, prog, run_both};
use egrad::internals::ops::Op;
use egrad::internals::types::value::Value;
use egrad::internals::types::DType;

const PROGRAM: &str = r#"
fn mean[N](x: f64[N]) -> f64 = +/x / N
fn grand_mean[R, C](A: f64[R, C]) -> f64 = +/A / (R * C)
fn unbiased_var[N](x: f64[N]) -> f64 {
  let d = x - mean(x)
  +/(d .* d) / (N - 1)
}
fn ramp[N](x: f64[N]) -> f64[N] = tabulate[N](i => x[i] * f64(i) / N)
fn halve_n[N](x: f64[N]) -> f64[N] = iterate(N, x, s => s * 0.5)
fn counted(n: i64, x: f64[3]) -> f64 = +/x / f64(n)
// Sizes given only by expressions, and a callee at a compound size.
fn tail_mean[N](x: f64[N+1]) -> f64 = +/x / N
fn evens[N](x: f64[2*N]) -> f64[N] = tabulate[N](i => x[2 * i] * N)
fn both_means[N](x: f64[N]) -> f64 = mean(x) + mean(concat(x, 2 * x))
// A count from a size, and a size inside a loop's step.
fn relax[N](n: i64, x: f64[N]) -> f64[N] = iterate(n, x, s => 0.5 * s + mean(s) / N)
fn ones_count[N](x: f64[N]) -> f64 = iterate(N, 0.0, s => s + 1.0)
// Inside `tabulate`: each row's own mean.
fn row_means[B, N](X: f64[B, N]) -> f64[B] = tabulate[B](b => mean(X[b]))
@vmap(xs)
fn batch_var[B, N](xs: f64[B, N]) -> f64[B] = unbiased_var(xs) + 0 * mean(xs) / N

fn relax_loss[N](x: f64[N], n: i64) -> f64 = +/sin(relax(n, x))
@grad(x)
fn dvar[N](x: f64[N]) -> f64[N] = unbiased_var(x)
@grad(x)
fn drelax[N](x: f64[N], n: i64) -> f64[N] = relax_loss(x, n)
fn grand_mean_sq[R, C](A: f64[R, C]) -> f64 = grand_mean(A * A)
@grad(A)
fn dgrand[R, C](A: f64[R, C]) -> f64[R, C] = grand_mean_sq(A)
"#;

fn vec(xs: &[f64]) -> Value {
    Value::array(DType::F64, vec![xs.len()], xs.to_vec())
}

fn mat(rows: usize, xs: &[f64]) -> Value {
    Value::array(DType::F64, vec![rows, xs.len() / rows], xs.to_vec())
}

fn int(k: i64) -> Value {
    Value::scalar(DType::I64, k as f64)
}

/// `f` at `args`, native code and interpreter agreeing, as f64s.
fn values(f: &str, args: &[Value]) -> Vec<Vec<f64>> {
    let p = prog(PROGRAM);
    let r = run_both(&p, f, args).unwrap_or_else(|e| panic!("{f}: {e}"));
    r.into_iter().map(|v| v.data).collect()
}

#[test]
fn sizes_compute_their_values() {
    let x = vec(&[1.0, 2.0, 3.0, 4.0]);
    assert_eq!(values("mean", std::slice::from_ref(&x)), [[2.5]]);
    assert_eq!(
        values("unbiased_var", std::slice::from_ref(&x)),
        [[5.0 / 3.0]]
    );
    assert_eq!(
        values("ramp", std::slice::from_ref(&x)),
        [[0.0, 0.5, 1.5, 3.0]]
    );
    assert_eq!(
        values("halve_n", std::slice::from_ref(&x)),
        [[0.0625, 0.125, 0.1875, 0.25]]
    );
    let a = mat(2, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(values("grand_mean", &[a]), [[3.5]]);
    assert_eq!(values("counted", &[int(2), vec(&[1.0, 2.0, 3.0])]), [[3.0]]);
    assert_eq!(
        values("tail_mean", std::slice::from_ref(&x)),
        [[10.0 / 3.0]]
    );
    assert_eq!(values("evens", std::slice::from_ref(&x)), [[2.0, 6.0]]);
    assert_eq!(
        values("both_means", std::slice::from_ref(&x)),
        [[2.5 + 3.75]]
    );
    assert_eq!(values("ones_count", std::slice::from_ref(&x)), [[4.0]]);
    let rows = mat(3, &[1.0, 2.0, 3.0, 4.0, 5.0, 9.0]);
    assert_eq!(
        values("row_means", std::slice::from_ref(&rows)),
        [[1.5, 3.5, 7.0]]
    );
    assert_eq!(values("batch_var", &[rows]), [[0.5, 0.5, 8.0]]);
    // Zero-length and one-length arrays: sizes 0 and 1 are numbers too.
    assert_eq!(values("ones_count", &[vec(&[])]), [[0.0]]);
    assert!(values("mean", &[vec(&[])])[0][0].is_nan());
    assert_eq!(values("tail_mean", &[vec(&[7.0])]), [[f64::INFINITY]]);
}

#[test]
fn a_loop_reads_a_size_and_counts_by_one() {
    let x = vec(&[0.5, -1.0, 2.0]);
    for n in [0, 1, 7, 40] {
        let got = values("relax", &[int(n), x.clone()]);
        // The same steps in Rust, in the interpreter's order.
        let mut s = x.data.clone();
        for _ in 0..n {
            let m = s.iter().fold(0.0, |a, b| a + b) / 3.0;
            s = s.iter().map(|v| 0.5 * v + m / 3.0).collect();
        }
        assert_eq!(got, [s], "n = {n}");
    }
}

#[test]
fn gradients_through_sizes_match_finite_differences() {
    let p = prog(PROGRAM);
    let x = vec(&[0.3, -1.2, 2.0, 0.7]);
    check_gradient(
        &p,
        "dvar",
        "unbiased_var",
        1,
        std::slice::from_ref(&x),
        "dvar",
    );
    for n in [1, 9] {
        check_gradient(
            &p,
            "drelax",
            "relax_loss",
            1,
            &[x.clone(), int(n)],
            "drelax",
        );
    }
    let a = mat(2, &[0.1, -0.4, 0.9, 1.3, -2.0, 0.5]);
    check_gradient(&p, "dgrand", "grand_mean_sq", 1, &[a], "dgrand");
}

#[test]
fn a_size_is_a_dim_of_a_parameter_or_of_an_iota() {
    let p = prog(PROGRAM);
    let ir = p.ir("mean").unwrap();
    let dims: Vec<_> = ir
        .stmts
        .iter()
        .filter(|s| matches!(s.op, Op::Dim(0)))
        .collect();
    assert_eq!(dims.len(), 1, "{ir}");
    assert_eq!(dims[0].args[..], [ir.params[0].var], "{ir}");
    assert!(ir.to_string().contains("dim 0 %x"), "{ir}");
    // `N` of `f64[N+1]`: no axis is `N`, so an `iota` of length `N` gives it
    // (its elements are never computed: `dim` reads the shape).
    let tail = p.ir("tail_mean").unwrap();
    assert!(tail.stmts.iter().any(|s| s.op == Op::Iota), "{tail}");
    // The text form parses back to the same function.
    let back = egrad::internals::ir::parse_functions(&ir.to_string()).unwrap();
    assert_eq!(back[0].to_string(), ir.to_string());
}
