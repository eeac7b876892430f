//! Loops inside `tabulate`: `iterate`, `iterate_until`, `scan` and
//! `scan_all` whose state depends on the index are IR loops over a stack
//! (one state per index, a leading axis), not unrolled chains; a called
//! function that runs a loop is lowered again on stacks. Each value is
//! the per-element function's (called once per index, outside
//! `tabulate`), native code gives the interpreter's bits, and gradients
//! (reverse and forward) match central finite differences.

mod common;

use common::{
    assert_close, assert_jit_equals_interpreter, check_gradient, check_jvp, err, eval, prog, row,
};
use egrad::internals::ir::Function;
use egrad::internals::ops::Op;
use egrad::internals::types::value::Value;
use egrad::internals::types::DType;

const SRC: &str = r#"
// A run-time count: each element's scalar state.
fn one(x: f64, w: f64, n: i64) -> f64 = iterate(n, x, s => s * w + 0.1 * sin(s))
fn each[N](x: f64[N], w: f64, n: i64) -> f64[N] =
  tabulate[N](i => iterate(n, x[i], s => s * w + 0.1 * sin(s)))
fn each_loss[N](x: f64[N], w: f64, n: i64) -> f64 = +/(each(x, w, n) .* x)
@grad(x, w)
fn deach[N](x: f64[N], w: f64, n: i64) -> (f64[N], f64) = each_loss(x, w, n)
@jvp(x, w)
fn jeach[N](x: f64[N], w: f64, n: i64, dx: f64[N], dw: f64) -> f64 = each_loss(x, w, n)

// A vector state per element with a scalar riding along it, reading a
// stacked value (X[i]), a vector (v) and a scalar (a) from outside.
fn row_iter[K](x: f64[K], v: f64[K], a: f64, n: i64) -> f64 {
  let (s, c) = iterate(n, (x, 0.5), (s, c) => (tanh(s .* v + x) * a + c, c * 0.9 + +/s * 0.01))
  +/s * c
}
fn rows[N, K](X: f64[N, K], v: f64[K], a: f64, n: i64) -> f64[N] =
  tabulate[N](i => {
    let (s, c) = iterate(n, (X[i], 0.5), (s, c) => (tanh(s .* v + X[i]) * a + c, c * 0.9 + +/s * 0.01))
    +/s * c
  })
fn rows_loss[N, K](X: f64[N, K], v: f64[K], a: f64, n: i64) -> f64 = +/rows(X, v, a, n)
@grad(X, v, a)
fn drows[N, K](X: f64[N, K], v: f64[K], a: f64, n: i64) -> (f64[N, K], f64[K], f64) =
  rows_loss(X, v, a, n)
@jvp(X, v, a)
fn jrows[N, K](X: f64[N, K], v: f64[K], a: f64, n: i64, dX: f64[N, K], dv: f64[K], da: f64) -> f64 =
  rows_loss(X, v, a, n)

// A long static count: a loop too, the same as the run-time count.
fn long[N](x: f64[N], w: f64) -> f64[N] =
  tabulate[N](i => iterate(3000, x[i], s => s * w + 0.1 * sin(s)))

// Elements that stop at different steps (each row frozen on its own).
fn settle_one(x: f64, w: f64, n: i64) -> f64 =
  iterate_until(n, x, s => s < 0.01, s => s * w)
fn settle[N](x: f64[N], w: f64, n: i64) -> f64[N] =
  tabulate[N](i => iterate_until(n, x[i], s => s < 0.01, s => s * w))
fn settle_loss[N](x: f64[N], w: f64, n: i64) -> f64 = +/(settle(x, w, n) .* settle(x, w, n))
@grad(x, w)
fn dsettle[N](x: f64[N], w: f64, n: i64) -> (f64[N], f64) = settle_loss(x, w, n)
@jvp(x, w)
fn jsettle[N](x: f64[N], w: f64, n: i64, dx: f64[N], dw: f64) -> f64 = settle_loss(x, w, n)
// A vector state per element, stopping when its norm is small.
fn shrink[N, K](X: f64[N, K], w: f64, n: i64) -> f64[N, K] =
  tabulate[N](i => iterate_until(n, X[i], s => +/(s .* s) < 0.01, s => s * w))

// Scans: over each element's own row, over rows of matrices, over a
// sequence shared by every element; every state.
fn scan_one[T](xs: f64[T], a: f64) -> f64 = scan(xs, 0.0, (s, x) => sin(a * s + x))
fn scans[N, T](X: f64[N, T], a: f64) -> f64[N] =
  tabulate[N](i => scan(X[i], 0.0, (s, x) => sin(a * s + x)))
fn scans_loss[N, T](a: f64, X: f64[N, T]) -> f64 = +/scans(X, a)
@grad(a)
fn dscans[N, T](a: f64, X: f64[N, T]) -> f64 = scans_loss(a, X)
@jvp(a)
fn jscans[N, T](a: f64, X: f64[N, T], da: f64) -> f64 = scans_loss(a, X)
fn rnn_one[T, B](xs: f64[T, B], h: f64[B], w: f64[B]) -> f64 =
  +/scan(xs, h, (s, x) => tanh(s .* w + x))
fn rnns[N, T, B](X: f64[N, T, B], H: f64[N, B], w: f64[B]) -> f64[N] =
  tabulate[N](i => +/scan(X[i], H[i], (s, x) => tanh(s .* w + x)))
fn rnns_loss[N, T, B](H: f64[N, B], w: f64[B], X: f64[N, T, B]) -> f64 = +/rnns(X, H, w)
@grad(H, w)
fn drnns[N, T, B](H: f64[N, B], w: f64[B], X: f64[N, T, B]) -> (f64[N, B], f64[B]) =
  rnns_loss(H, w, X)
@jvp(H, w)
fn jrnns[N, T, B](H: f64[N, B], w: f64[B], X: f64[N, T, B], dH: f64[N, B], dw: f64[B]) -> f64 =
  rnns_loss(H, w, X)
fn shared_one[T](x: f64, ys: f64[T]) -> f64 = scan(ys, x, (s, y) => s * 0.5 + y * s)
fn shared[N, T](x: f64[N], ys: f64[T]) -> f64[N] =
  tabulate[N](i => scan(ys, x[i], (s, y) => s * 0.5 + y * s))
fn shared_loss[N, T](x: f64[N], ys: f64[T]) -> f64 = +/(shared(x, ys) .* x)
@grad(x)
fn dshared[N, T](x: f64[N], ys: f64[T]) -> f64[N] = shared_loss(x, ys)
fn all_one[T](xs: f64[T], a: f64) -> f64[T] = scan_all(xs, 0.0, (s, x) => a * s + x)
fn alls[N, T](X: f64[N, T], a: f64) -> f64[N, T] =
  tabulate[N](i => scan_all(X[i], 0.0, (s, x) => a * s + x))
fn pair_one[T, B](xs: f64[T, B], h: f64[B], r: f64) -> (f64[T, B], f64[T]) =
  scan_all(xs, (h, 1.0), (s, x) => { let (v, c) = s; (sin(v * c + x), c * r + +/x) })
fn pairs[N, T, B](X: f64[N, T, B], H: f64[N, B], r: f64) -> f64[N, T, B] =
  tabulate[N](i => {
    let (vs, cs) = scan_all(X[i], (H[i], 1.0), (s, x) => { let (v, c) = s; (sin(v * c + x), c * r + +/x) })
    vs * +/cs
  })
fn pairs_loss[N, T, B](H: f64[N, B], r: f64, X: f64[N, T, B]) -> f64 = +/pairs(X, H, r)
@grad(H, r)
fn dpairs[N, T, B](H: f64[N, B], r: f64, X: f64[N, T, B]) -> (f64[N, B], f64) =
  pairs_loss(H, r, X)

// Calling functions that run a loop: lowered again on stacks.
fn relax[K](x: f64[K], w: f64, n: i64) -> f64 = +/iterate(n, x, s => s * w + 0.1 * cos(s))
fn relaxed[N, K](X: f64[N, K], w: f64, n: i64) -> f64[N] = tabulate[N](i => relax(X[i], w, n))
fn relaxed_loss[N, K](X: f64[N, K], w: f64, n: i64) -> f64 = +/relaxed(X, w, n)
@grad(X, w)
fn drelaxed[N, K](X: f64[N, K], w: f64, n: i64) -> (f64[N, K], f64) = relaxed_loss(X, w, n)
@jvp(X, w)
fn jrelaxed[N, K](X: f64[N, K], w: f64, n: i64, dX: f64[N, K], dw: f64) -> f64 =
  relaxed_loss(X, w, n)
fn powered(static k: i64, x: f64) -> f64 = iterate(k, x, s => s * 0.999 + 0.001)
fn powers[N](x: f64[N]) -> f64[N] = tabulate[N](i => powered(5000, x[i]))
fn settled[N](x: f64[N], w: f64, n: i64) -> f64[N] = tabulate[N](i => settle_one(x[i], w, n))
"#;

fn f64s(xs: &[f64]) -> Value {
    Value::array(DType::F64, vec![xs.len()], xs.to_vec())
}

fn mat(rows: usize, cols: usize, f: impl Fn(usize) -> f64) -> Value {
    Value::array(
        DType::F64,
        vec![rows, cols],
        (0..rows * cols).map(f).collect(),
    )
}

fn scalar(x: f64) -> Value {
    Value::scalar(DType::F64, x)
}

fn count(n: u64) -> Value {
    Value::scalar(DType::I64, n as f64)
}

/// The statements of `f` that run a loop (`loop`, `scan`), and `f`'s loops.
fn loop_stmts(f: &Function) -> usize {
    f.stmts
        .iter()
        .filter(|s| matches!(s.op, Op::Loop(..) | Op::LoopTape(..)))
        .count()
}

#[test]
fn loops_inside_tabulate_are_loops_over_stacks() {
    let p = prog(SRC);
    for name in [
        "each", "rows", "long", "settle", "shrink", "scans", "rnns", "shared", "alls", "pairs",
        "relaxed", "powers", "settled",
    ] {
        let f = p.ir(name).unwrap();
        assert_eq!(f.loops.len(), 1, "{name}: {f}");
        assert_eq!(loop_stmts(f), 1, "{name}: {f}");
        // One step's statements, not 3000 (or 5000) of them.
        assert!(f.stmts.len() < 200, "{name}: {} statements", f.stmts.len());
        // The state is a stack: its first (or, packed, second) axis is N.
        let state = f.loops[0].state().to_string();
        assert!(state.contains('N'), "{name}: the state {state}");
    }
    for name in ["settle", "shrink", "settled"] {
        assert!(p.ir(name).unwrap().loops[0].settles, "{name}");
    }
    // The IR text shows it, and parses back.
    let text = p.ir("settle").unwrap().to_string();
    assert!(
        text.contains(" settles {") && text.contains("= loop "),
        "{text}"
    );
    let back = egrad::internals::ir::parse_functions(&text).unwrap();
    assert_eq!(back[0].to_string(), text);
    let text = p.ir("scans").unwrap().to_string();
    assert!(text.contains("= scan "), "{text}");
}

#[test]
fn each_element_computes_its_own_loop() {
    let p = prog(SRC);
    let x = f64s(&[0.3, -1.2, 2.0, 0.01, 0.7]);
    for n in [0, 1, 7, 100] {
        let args = [x.clone(), scalar(0.8), count(n)];
        let got = eval(p.ir("each").unwrap(), &args)[0].clone();
        assert_jit_equals_interpreter(p.ir("each").unwrap(), &args, "each");
        for (i, xi) in x.data.iter().enumerate() {
            let want = eval(p.ir("one").unwrap(), &[scalar(*xi), scalar(0.8), count(n)]);
            assert_eq!(
                got.data[i].to_bits(),
                want[0].data[0].to_bits(),
                "each n={n} i={i}"
            );
        }
    }
    // A static count of 3000 is the loop the run-time count runs.
    let args = [x.clone(), scalar(0.8)];
    let long = eval(p.ir("long").unwrap(), &args);
    let want = eval(
        p.ir("each").unwrap(),
        &[x.clone(), scalar(0.8), count(3000)],
    );
    assert!(long[0].bits_eq(&want[0]));
    assert_jit_equals_interpreter(p.ir("long").unwrap(), &args, "long");

    let xm = mat(3, 4, |k| ((k * 7 % 5) as f64 - 2.0) * 0.3);
    let v = f64s(&[0.5, -0.25, 1.0, 0.75]);
    for n in [0, 3, 50] {
        let args = [xm.clone(), v.clone(), scalar(0.9), count(n)];
        let got = eval(p.ir("rows").unwrap(), &args)[0].clone();
        assert_jit_equals_interpreter(p.ir("rows").unwrap(), &args, "rows");
        for i in 0..3 {
            let one = [row(&xm, i), v.clone(), scalar(0.9), count(n)];
            let want = eval(p.ir("row_iter").unwrap(), &one)[0].as_scalar();
            assert_close(
                &scalar(got.data[i]),
                &scalar(want),
                &format!("rows n={n} i={i}"),
            );
        }
    }
}

#[test]
fn elements_stop_at_their_own_step() {
    let p = prog(SRC);
    // 0.005 stops at once, 0.02 after 1 step, 1.0 after 7, 300.0 after 15.
    let x = f64s(&[1.0, 0.02, 300.0, 0.005, 0.5]);
    for n in [0, 1, 3, 10, 1000, 1 << 40] {
        let args = [x.clone(), scalar(0.5), count(n)];
        assert_jit_equals_interpreter(p.ir("settle").unwrap(), &args, "settle");
        assert_jit_equals_interpreter(p.ir("settled").unwrap(), &args, "settled");
        let got = eval(p.ir("settle").unwrap(), &args)[0].clone();
        let called = eval(p.ir("settled").unwrap(), &args)[0].clone();
        assert!(got.bits_eq(&called), "n={n}");
        for (i, xi) in x.data.iter().enumerate() {
            let mut s = *xi;
            for _ in 0..n.min(100) {
                if s < 0.01 {
                    break;
                }
                s *= 0.5;
            }
            assert_eq!(got.data[i], s, "n={n} i={i}");
        }
    }
    let xm = mat(3, 2, |k| [1.0, 0.5, 0.01, 0.02, 4.0, -3.0][k]);
    let args = [xm.clone(), scalar(0.5), count(1000)];
    assert_jit_equals_interpreter(p.ir("shrink").unwrap(), &args, "shrink");
    let got = eval(p.ir("shrink").unwrap(), &args)[0].clone();
    for i in 0..3 {
        let (mut a, mut b) = (xm.data[2 * i], xm.data[2 * i + 1]);
        while a * a + b * b >= 0.01 {
            a *= 0.5;
            b *= 0.5;
        }
        assert_eq!(&got.data[2 * i..2 * i + 2], &[a, b], "shrink row {i}");
    }
}

#[test]
fn scans_read_each_element_s_rows_or_the_shared_ones() {
    let p = prog(SRC);
    let xm = mat(3, 5, |k| (k as f64 * 0.37).sin());
    let args = [xm.clone(), scalar(0.7)];
    assert_jit_equals_interpreter(p.ir("scans").unwrap(), &args, "scans");
    assert_jit_equals_interpreter(p.ir("alls").unwrap(), &args, "alls");
    let got = eval(p.ir("scans").unwrap(), &args)[0].clone();
    let all = eval(p.ir("alls").unwrap(), &args)[0].clone();
    assert_eq!(all.shape, vec![3, 5]);
    for i in 0..3 {
        let one = [row(&xm, i), scalar(0.7)];
        let want = eval(p.ir("scan_one").unwrap(), &one)[0].clone();
        assert_eq!(got.data[i].to_bits(), want.data[0].to_bits(), "scans {i}");
        let want = eval(p.ir("all_one").unwrap(), &one)[0].clone();
        assert!(row(&all, i).bits_eq(&want), "alls {i}: {all:?} vs {want:?}");
    }
    // Rows of matrices (a stack of matrices read as a sequence of stacks).
    let x3 = Value::array(
        DType::F64,
        vec![2, 4, 3],
        (0..24).map(|k| (k as f64 * 0.21).cos()).collect(),
    );
    let h = mat(2, 3, |k| k as f64 * 0.1 - 0.2);
    let w = f64s(&[0.5, -0.7, 0.9]);
    let args = [x3.clone(), h.clone(), w.clone()];
    assert_jit_equals_interpreter(p.ir("rnns").unwrap(), &args, "rnns");
    let got = eval(p.ir("rnns").unwrap(), &args)[0].clone();
    for i in 0..2 {
        let one = [row(&x3, i), row(&h, i), w.clone()];
        let want = eval(p.ir("rnn_one").unwrap(), &one)[0].as_scalar();
        assert_close(&scalar(got.data[i]), &scalar(want), &format!("rnns {i}"));
    }
    let args = [x3.clone(), h.clone(), scalar(0.8)];
    assert_jit_equals_interpreter(p.ir("pairs").unwrap(), &args, "pairs");
    let got = eval(p.ir("pairs").unwrap(), &args)[0].clone();
    for i in 0..2 {
        let one = [row(&x3, i), row(&h, i), scalar(0.8)];
        let want = eval(p.ir("pair_one").unwrap(), &one);
        let total: f64 = want[1].data.iter().sum();
        let want = Value {
            data: want[0].data.iter().map(|v| v * total).collect(),
            ..want[0].clone()
        };
        assert_close(&row(&got, i), &want, &format!("pairs {i}"));
    }
    // A sequence every element reads.
    let x = f64s(&[0.5, -1.0, 2.0]);
    let ys = f64s(&[0.1, -0.4, 0.3, 0.2]);
    let args = [x.clone(), ys.clone()];
    assert_jit_equals_interpreter(p.ir("shared").unwrap(), &args, "shared");
    let got = eval(p.ir("shared").unwrap(), &args)[0].clone();
    for (i, xi) in x.data.iter().enumerate() {
        let want = eval(p.ir("shared_one").unwrap(), &[scalar(*xi), ys.clone()]);
        assert_eq!(
            got.data[i].to_bits(),
            want[0].data[0].to_bits(),
            "shared {i}"
        );
    }
}

#[test]
fn a_called_function_that_loops_runs_on_stacks() {
    let p = prog(SRC);
    let xm = mat(3, 4, |k| (k as f64 * 0.3).sin());
    let args = [xm.clone(), scalar(0.9), count(20)];
    assert_jit_equals_interpreter(p.ir("relaxed").unwrap(), &args, "relaxed");
    let got = eval(p.ir("relaxed").unwrap(), &args)[0].clone();
    for i in 0..3 {
        let one = [row(&xm, i), scalar(0.9), count(20)];
        let want = eval(p.ir("relax").unwrap(), &one)[0].as_scalar();
        assert_close(&scalar(got.data[i]), &scalar(want), &format!("relaxed {i}"));
    }
    // A template with a static count, long enough to be a loop.
    let x = f64s(&[0.5, 2.0]);
    let args = [x.clone()];
    assert_jit_equals_interpreter(p.ir("powers").unwrap(), &args, "powers");
    let got = eval(p.ir("powers").unwrap(), &args)[0].clone();
    for (i, xi) in x.data.iter().enumerate() {
        let mut s = *xi;
        for _ in 0..5000 {
            s = s * 0.999 + 0.001;
        }
        assert!((got.data[i] - s).abs() < 1e-12, "powers {i}");
    }
}

#[test]
fn gradients_through_loops_inside_tabulate_match_finite_differences() {
    let p = prog(SRC);
    let x = f64s(&[0.3, -1.2, 2.0, 0.7]);
    for n in [0, 1, 30] {
        let args = [x.clone(), scalar(0.8), count(n)];
        check_gradient(&p, "deach", "each_loss", 2, &args, &format!("deach n={n}"));
        check_jvp(&p, "jeach", "each_loss", 2, &args, &format!("jeach n={n}"));
    }
    let xm = mat(3, 4, |k| ((k * 7 % 5) as f64 - 2.0) * 0.3);
    let v = f64s(&[0.5, -0.25, 1.0, 0.75]);
    let args = [xm.clone(), v, scalar(0.9), count(12)];
    check_gradient(&p, "drows", "rows_loss", 3, &args, "drows");
    check_jvp(&p, "jrows", "rows_loss", 3, &args, "jrows");
    // Elements stopping at different steps: the derivative of the steps
    // each one took.
    let x = f64s(&[1.0, 0.03, 3.0, 0.5]);
    for n in [2, 1000] {
        let args = [x.clone(), scalar(0.7), count(n)];
        check_gradient(
            &p,
            "dsettle",
            "settle_loss",
            2,
            &args,
            &format!("dsettle n={n}"),
        );
        check_jvp(
            &p,
            "jsettle",
            "settle_loss",
            2,
            &args,
            &format!("jsettle n={n}"),
        );
    }
    let xm = mat(3, 5, |k| (k as f64 * 0.37).sin());
    let args = [scalar(0.7), xm];
    check_gradient(&p, "dscans", "scans_loss", 1, &args, "dscans");
    check_jvp(&p, "jscans", "scans_loss", 1, &args, "jscans");
    let x3 = Value::array(
        DType::F64,
        vec![2, 4, 3],
        (0..24).map(|k| (k as f64 * 0.21).cos()).collect(),
    );
    let h = mat(2, 3, |k| k as f64 * 0.1 - 0.2);
    let args = [h.clone(), f64s(&[0.5, -0.7, 0.9]), x3.clone()];
    check_gradient(&p, "drnns", "rnns_loss", 2, &args, "drnns");
    check_jvp(&p, "jrnns", "rnns_loss", 2, &args, "jrnns");
    let args = [h, scalar(0.8), x3];
    check_gradient(&p, "dpairs", "pairs_loss", 2, &args, "dpairs");
    let args = [f64s(&[0.5, -1.0, 2.0]), f64s(&[0.1, -0.4, 0.3, 0.2])];
    check_gradient(&p, "dshared", "shared_loss", 1, &args, "dshared");
    let xm = mat(3, 4, |k| (k as f64 * 0.3).sin());
    let args = [xm, scalar(0.9), count(20)];
    check_gradient(&p, "drelaxed", "relaxed_loss", 2, &args, "drelaxed");
    check_jvp(&p, "jrelaxed", "relaxed_loss", 2, &args, "jrelaxed");
}

#[test]
fn what_a_loop_inside_tabulate_still_refuses() {
    // A derivative that runs a loop, called on stacks.
    let e = err("fn f(x: f64, n: i64) -> f64 = iterate(n, x, s => sin(s))\n@grad(x)\nfn df(x: f64, n: i64) -> f64 = f(x, n)\nfn g[N](x: f64[N], n: i64) -> f64[N] = tabulate[N](i => df(x[i], n))");
    assert!(
        e.contains("`df` is a derivative that runs a loop, which cannot be called on values that depend on the index of `tabulate` yet"),
        "{e}"
    );
    // A state of floats of two precisions with a run-time count: the rule
    // outside `tabulate` holds inside it.
    let e = err("fn f[N](X: f64[N, 2], k: f32, n: i64) -> f64[N] = tabulate[N](i => { let (a, b) = iterate(n, (X[i], k), (a, b) => (a * 0.5, b)); +/a })");
    assert!(
        e.contains("a loop with a run-time count cannot carry this state"),
        "{e}"
    );
}
