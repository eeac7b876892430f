//! Run-time integers that are values, not counts (`data y: i64`), and
//! functions with several results batched: `tabulate` of a tuple, `@vmap`
//! of a `@grad` with two gradients and integer labels
//! (`examples/natural/classify.eg`), against a loop over the examples and
//! central differences; `egrad fdcheck` in both modes; the errors.

mod common;

use common::{arr, check_gradient, egrad, err, finite_differences, prog, row, run_both};
use egrad::internals::types::value::Value;
use egrad::internals::types::DType;
use egrad::Program;

const CLASSIFY: &str = "examples/natural/classify.eg";

fn ints(data: &[i64]) -> Value {
    Value::array(
        DType::I64,
        vec![data.len()],
        data.iter().map(|&k| k as f64).collect(),
    )
}

fn label(k: i64) -> Value {
    Value::scalar(DType::I64, k as f64)
}

fn close(got: &Value, want: &Value, tol: f64, what: &str) {
    assert_eq!(got.shape, want.shape, "{what}");
    for (k, (a, b)) in got.data.iter().zip(&want.data).enumerate() {
        assert!(
            (a - b).abs() <= tol * (1.0 + b.abs()),
            "{what}[{k}]: {a} vs {b}"
        );
    }
}

/// Each example's two gradients under `@vmap` are that example's
/// `xent_grad` (and its central differences), native code gives the
/// interpreter's bits, and the batch gradient is their mean.
#[test]
fn vmap_of_a_two_gradient_grad_with_labels_is_each_examples_gradients() {
    let p = Program::from_file(CLASSIFY).unwrap();
    let (b, n, c) = (5, 3, 4);
    let (w, bias, xs) = (arr(&[c, n], 1), arr(&[c], 2), arr(&[b, n], 3));
    let ys = ints(&[3, 0, 2, 3, 1]);
    let args = [w.clone(), bias.clone(), xs.clone(), ys.clone()];
    let per = run_both(&p, "per_example_grads", &args).unwrap();
    assert_eq!(per[0].shape, vec![b, c, n]);
    assert_eq!(per[1].shape, vec![b, c]);
    let xent = p.ir("xent").unwrap();
    let mut mean = [Value::array(DType::F64, vec![c, n], vec![0.0; c * n]), {
        Value::array(DType::F64, vec![c], vec![0.0; c])
    }];
    for i in 0..b {
        let y = label(ys.data[i] as i64);
        let one = [w.clone(), bias.clone(), row(&xs, i), y];
        let each = run_both(&p, "xent_grad", &one).unwrap();
        let fd = finite_differences(xent, &one, &[0, 1]);
        for k in 0..2 {
            let got = row(&per[k], i);
            close(&got, &each[k], 1e-12, &format!("example {i} gradient {k}"));
            close(
                &got,
                &fd[k],
                1e-6,
                &format!("example {i} gradient {k} (FD)"),
            );
            for (m, g) in mean[k].data.iter_mut().zip(&got.data) {
                *m += g / b as f64;
            }
        }
    }
    let batch = run_both(&p, "batch_grad", &args).unwrap();
    for k in 0..2 {
        close(&batch[k], &mean[k], 1e-12, &format!("batch gradient {k}"));
    }
    check_gradient(&p, "batch_grad", "batch_loss", 2, &args, "classify");
    check_gradient(
        &p,
        "xent_grad",
        "xent",
        2,
        &[w, bias, row(&xs, 0), label(3)],
        "one example",
    );
}

/// The acceptance's command: `egrad fdcheck` passes on the per-example
/// loss's and the batch's gradients and, in forward mode, on the batch
/// loss's tangent (random labels included).
#[test]
fn fdcheck_passes_in_both_modes() {
    for f in ["xent_grad", "batch_grad", "batch_loss_along"] {
        let (code, out, e) = egrad(&[
            "fdcheck", CLASSIFY, "--fn", f, "--random", "--dim", "B=6", "--dim", "N=5", "--dim",
            "C=4",
        ]);
        assert_eq!(code, 0, "{f}: {out}{e}");
        assert!(out.contains("ok: the"), "{f}: {out}");
    }
}

/// A `data` number may be negative, is not a size, and computes like any
/// integer; a count may not be negative. Native code gives the
/// interpreter's bits and errors.
#[test]
fn data_numbers_are_values_and_counts_stay_counts() {
    let p = prog(
        "fn scaled[N](x: f64[N], data s: i64) -> f64[N] = x * f64(s) + f64(N)
fn at[N](x: f64[N], data k: i64) -> f64 = x[k]
fn shifted[N](x: f64[N], data k: i64) -> f64 = x[(k + N) % N]
fn reps(n: i64, x: f64) -> f64 = iterate(n, x, s => 0.5 * s)
fn data(data: f64[3]) -> f64 = +/data",
    );
    let x = arr(&[4], 7);
    let got = run_both(&p, "scaled", &[x.clone(), label(-3)]).unwrap();
    let want: Vec<f64> = x.data.iter().map(|v| v * -3.0 + 4.0).collect();
    assert_eq!(got[0].data, want);
    assert_eq!(
        run_both(&p, "at", &[x.clone(), label(2)]).unwrap()[0].data,
        [x.data[2]]
    );
    let e = run_both(&p, "at", &[x.clone(), label(-1)]).unwrap_err();
    assert!(e.contains("out of range"), "{e}");
    assert_eq!(
        run_both(&p, "shifted", &[x.clone(), label(-1)]).unwrap()[0].data,
        [x.data[3]]
    );
    let e = run_both(&p, "reps", &[label(-1), Value::scalar(DType::F64, 1.0)]).unwrap_err();
    assert!(e.contains("is a count and must not be negative"), "{e}");
    let e = run_both(&p, "scaled", &[x, Value::scalar(DType::I64, 1e17)]).unwrap_err();
    assert!(e.contains("2^53"), "{e}");
    // A parameter may still be named `data`.
    assert_eq!(
        run_both(&p, "data", &[arr(&[3], 1)]).unwrap()[0].data.len(),
        1
    );
    // The size parameters are only the counts.
    assert_eq!(p.ir("scaled").unwrap().size_params, ["N"]);
}

#[test]
fn data_is_for_i64_numbers_and_counts_say_so() {
    let e = err("fn f(data x: f64) -> f64 = x");
    assert!(e.contains("`data` marks a run-time `i64` number"), "{e}");
    let e = err("fn f[N](data x: i64[N]) -> i64 = +/x");
    assert!(e.contains("not an `i64` number"), "{e}");
    let e = err("fn f(static data k: i64, x: f64) -> f64 = x");
    assert!(e.contains("is static"), "{e}");
    // A label passed where a count is declared: the note says `data`.
    let e = err("fn pick[N](x: f64[N], y: i64) -> f64 = x[y]
@vmap(xs, ys)
fn picks[B, N](xs: f64[B, N], ys: i64[B]) -> f64[B] = pick(xs, ys)");
    assert!(e.contains("(a count)") && e.contains("data y: i64"), "{e}");
}

/// `tabulate` of a tuple builds a tuple of arrays, stacked element by
/// element (nested too), and `@vmap` of a function with two results
/// returns both batched.
#[test]
fn tabulate_of_a_tuple_builds_a_tuple_of_arrays() {
    let p = prog(
        "fn two(x: f64, y: f64) -> (f64, f64) = (x * y, tanh(x) + y)
fn pairs[B](xs: f64[B], y: f64) -> (f64[B], f64[B]) = tabulate[B](i => two(xs[i], y))
fn grid[B, C](xs: f64[B], ys: f64[C]) -> (f64[B, C], f64[B, C]) =
  tabulate[B](i => tabulate[C](j => two(xs[i], ys[j])))
fn mixed[B](xs: f64[B], y: f64) -> (f64[B], f64[B]) = tabulate[B](i => (xs[i] * 2.0, y))
@vmap(xs)
fn both[B](xs: f64[B], y: f64) -> (f64[B], f64[B]) = two(xs, y)",
    );
    let (xs, ys) = (arr(&[5], 1), arr(&[3], 2));
    let y = Value::scalar(DType::F64, 0.25);
    let pairs = run_both(&p, "pairs", &[xs.clone(), y.clone()]).unwrap();
    let both = run_both(&p, "both", &[xs.clone(), y.clone()]).unwrap();
    for (i, &x) in xs.data.iter().enumerate() {
        assert_eq!(pairs[0].data[i], x * 0.25);
        // (egrad's `tanh`, within an ulp of std's.)
        assert!((pairs[1].data[i] - (x.tanh() + 0.25)).abs() < 1e-15);
    }
    assert!(pairs[0].bits_eq(&both[0]) && pairs[1].bits_eq(&both[1]));
    let grid = run_both(&p, "grid", &[xs.clone(), ys.clone()]).unwrap();
    assert_eq!(grid[0].shape, vec![5, 3]);
    for i in 0..5 {
        for j in 0..3 {
            assert_eq!(grid[0].data[i * 3 + j], xs.data[i] * ys.data[j]);
            let want = xs.data[i].tanh() + ys.data[j];
            assert!((grid[1].data[i * 3 + j] - want).abs() < 1e-15);
        }
    }
    let mixed = run_both(&p, "mixed", &[xs, y]).unwrap();
    assert_eq!(mixed[1].data, vec![0.25; 5]);
}

/// `scatter_add` at indices that depend on the index of `tabulate` of rows
/// that do not (the same rows for every index; what a label's cotangent
/// is under `@vmap`): each index's own target, in range or an error at
/// the index.
#[test]
fn scatter_add_at_batched_indices_of_shared_rows() {
    let p = prog(
        "fn f[B, N](xs: f64[B, N], ks: i64[B]) -> f64[B, N] = tabulate[B](i => scatter_add(xs[i], ks[i], 1.5))
fn g[B, N](xs: f64[B, N], ks: i64[B, 2], r: f64[2]) -> f64[B, N] = tabulate[B](i => scatter_add(xs[i], ks[i], r))",
    );
    let xs = Value::array(DType::F64, vec![2, 3], vec![0.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
    let got = run_both(&p, "f", &[xs.clone(), ints(&[2, 0])]).unwrap();
    assert_eq!(got[0].data, [0.0, 0.0, 1.5, 2.5, 1.0, 1.0]);
    let ks = Value::array(DType::I64, vec![2, 2], vec![2.0, 2.0, 0.0, 1.0]);
    let r = Value::f64(&[1.0, 2.0]);
    let got = run_both(&p, "g", &[xs.clone(), ks, r.clone()]).unwrap();
    assert_eq!(got[0].data, [0.0, 0.0, 3.0, 2.0, 3.0, 1.0]);
    let ks = Value::array(DType::I64, vec![2, 2], vec![2.0, 3.0, 0.0, 1.0]);
    let e = run_both(&p, "g", &[xs, ks, r]).unwrap_err();
    assert!(e.contains("index 3 is out of range"), "{e}");
}
