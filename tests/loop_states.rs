//! Loops whose state is a tuple of values of different shapes (a vector
//! and a matrix, vectors of two lengths, scalars, booleans) over a
//! run-time length: one IR loop (its state one flat vector, not unrolled),
//! native code equal to the interpreter bit for bit, reverse-mode
//! gradients and forward-mode tangents against central differences, over
//! sequences (`scan`, `scan_all`), stopping early (`iterate_until`), under
//! `@vmap`, and what a state a loop cannot carry is told.

mod common;

use common::{
    arr, check_both_modes_and_second_order, check_gradient, check_jvp, err, int, loop_states, prog,
    run_both,
};
use egrad::internals::ops::Op;

const PROGRAM: &str = r#"
// A vector and a matrix carried: the state's matrix decays each step.
fn decay[H](W: f64[H, H], h0: f64[H], n: i64) -> f64 {
  let (h, M) = iterate(n, (h0, W), (h, M) => (tanh(matmul(M, h)), M * 0.9 + 0.01))
  +/h + +/M
}
@grad(W, h0)
fn ddecay[H](W: f64[H, H], h0: f64[H], n: i64) -> (f64[H, H], f64[H]) = decay(W, h0, n)
@jvp(W, h0)
fn decay_jvp[H](W: f64[H, H], h0: f64[H], n: i64, dW: f64[H, H], dh0: f64[H]) -> f64 = decay(W, h0, n)

// A boolean that alternates, a vector of another length, a running sum,
// and a weight matrix the step reads (a capture).
fn mixed[H, K](W: f64[H, H], h0: f64[H], v: f64[K], n: i64) -> f64 {
  let (h, a, s, odd) = iterate(n, (h0, v, 0.0, false), (h, a, s, odd) =>
    (if odd { tanh(matmul(W, h)) * a[0] } else { h * 0.5 + a[1] }, a * 0.9 + sin(s), s + +/h, !odd))
  +/h + +/a + s + (if odd { 1.0 } else { 0.0 })
}
@grad(W, h0, v)
fn dmixed[H, K](W: f64[H, H], h0: f64[H], v: f64[K], n: i64) -> (f64[H, H], f64[H], f64[K]) = mixed(W, h0, v, n)
@jvp(W, h0, v)
fn mixed_jvp[H, K](W: f64[H, H], h0: f64[H], v: f64[K], n: i64, dW: f64[H, H], dh0: f64[H], dv: f64[K]) -> f64 =
  mixed(W, h0, v, n)
// Second order through its gradient.
fn gsq[H, K](W: f64[H, H], h0: f64[H], v: f64[K], n: i64) -> f64 {
  let (gW, gh, gv) = dmixed(W, h0, v, n)
  +/flatten(gW .* gW) + +/(gh * gh) + +/gv
}
@grad(W, h0, v)
fn dgsq[H, K](W: f64[H, H], h0: f64[H], v: f64[K], n: i64) -> (f64[H, H], f64[H], f64[K]) = gsq(W, h0, v, n)

// A scan carrying a vector and a matrix (its outer products summed), over
// a sequence of run-time length.
fn outer_of[D](a: f64[D], b: f64[D]) -> f64[D, D] = tabulate[D](i => a[i] * b)
fn outer[T, D](h0: f64[D], C0: f64[D, D], A: f64[D, D], xs: f64[T, D]) -> f64 {
  let (h, C) = scan(xs, (h0, C0), (s, x) => {
    let (h, C) = s
    (tanh(matmul(A, h) + x), C * 0.5 + outer_of(h, x))
  })
  +/h + +/(C .* C)
}
@grad(h0, C0, A)
fn douter[T, D](h0: f64[D], C0: f64[D, D], A: f64[D, D], xs: f64[T, D]) -> (f64[D], f64[D, D], f64[D, D]) =
  outer(h0, C0, A, xs)
// With respect to the sequence too.
fn outer_x[T, D](xs: f64[T, D], A: f64[D, D], h0: f64[D], C0: f64[D, D]) -> f64 = outer(h0, C0, A, xs)
@grad(xs, A)
fn douter_x[T, D](xs: f64[T, D], A: f64[D, D], h0: f64[D], C0: f64[D, D]) -> (f64[T, D], f64[D, D]) =
  outer_x(xs, A, h0, C0)
@jvp(h0, C0, A)
fn outer_jvp[T, D](h0: f64[D], C0: f64[D, D], A: f64[D, D], xs: f64[T, D],
                   dh0: f64[D], dC0: f64[D, D], dA: f64[D, D]) -> f64 = outer(h0, C0, A, xs)

// Every state of a scan whose state is a vector, a scalar and a boolean.
fn all_states[T, D](h0: f64[D], w: f64, xs: f64[T, D]) -> f64 {
  let (hs, ss, bs) = scan_all(xs, (h0, w, true), (st, x) => {
    let (h, s, b) = st
    (tanh(h * s + x), if b { s * 0.5 } else { s + 0.25 }, !b)
  })
  +/flatten(hs .* hs) + +/ss
}
@grad(h0, w)
fn dall_states[T, D](h0: f64[D], w: f64, xs: f64[T, D]) -> (f64[D], f64) = all_states(h0, w, xs)

// Stops once settled, counting its steps in the state.
fn settle[H](W: f64[H, H], h0: f64[H]) -> f64 {
  let (h, k) = iterate_until(500, (h0, 0.0),
                             (h, k) => +/abs(h - 0.5 * tanh(matmul(W, h)) - 0.1) < 1e-12,
                             (h, k) => (0.5 * tanh(matmul(W, h)) + 0.1, k + 1))
  +/h + k
}
@grad(W, h0)
fn dsettle[H](W: f64[H, H], h0: f64[H]) -> (f64[H, H], f64[H]) = settle(W, h0)

// Over a batch.
@vmap(h0s)
fn decay_batch[B, H](W: f64[H, H], h0s: f64[B, H], n: i64) -> f64[B] = decay(W, h0s, n)
fn decay_batch_loss[B, H](W: f64[H, H], h0s: f64[B, H], n: i64) -> f64 = +/decay_batch(W, h0s, n)
@grad(W, h0s)
fn ddecay_batch[B, H](W: f64[H, H], h0s: f64[B, H], n: i64) -> (f64[H, H], f64[B, H]) =
  decay_batch_loss(W, h0s, n)
@vmap(vs)
fn mixed_batch[B, H, K](W: f64[H, H], vs: f64[B, K], h0: f64[H], n: i64) -> f64[B] = mixed(W, h0, vs, n)
fn mixed_batch_loss[B, H, K](W: f64[H, H], vs: f64[B, K], h0: f64[H], n: i64) -> f64 =
  +/mixed_batch(W, vs, h0, n)
@grad(W, vs)
fn dmixed_batch[B, H, K](W: f64[H, H], vs: f64[B, K], h0: f64[H], n: i64) -> (f64[H, H], f64[B, K]) =
  mixed_batch_loss(W, vs, h0, n)
// A loop in `tabulate` whose state is a row and a vector of another length.
fn rows_mixed[N](X: f64[N, 2], y: f64[3], n: i64) -> f64[N] = tabulate[N](i => {
  let (a, b) = iterate(n, (X[i], y), (a, b) => (a * 0.5 + b[0], b * 0.9 + a[1]))
  +/a + +/b
})
fn one_mixed(x: f64[2], y: f64[3], n: i64) -> f64 {
  let (a, b) = iterate(n, (x, y), (a, b) => (a * 0.5 + b[0], b * 0.9 + a[1]))
  +/a + +/b
}
fn rows_mixed_loss[N](y: f64[3], X: f64[N, 2], n: i64) -> f64 = +/rows_mixed(X, y, n)
@grad(y, X)
fn drows_mixed[N](y: f64[3], X: f64[N, 2], n: i64) -> (f64[3], f64[N, 2]) = rows_mixed_loss(y, X, n)
@vmap(xss)
fn all_batch[B, T, D](h0: f64[D], w: f64, xss: f64[B, T, D]) -> f64[B] = all_states(h0, w, xss)
"#;

#[test]
fn a_state_of_several_shapes_is_one_loop_over_a_flat_vector() {
    let p = prog(PROGRAM);
    for (f, want) in [
        ("decay", "f64[H*H+H]"),
        ("mixed", "f64[H+K+2]"),
        ("outer", "f64[D*D+D]"),
    ] {
        let ir = p.ir(f).unwrap();
        assert_eq!(loop_states(ir), [want], "{f}:\n{ir}");
        assert!(
            !ir.stmts.iter().any(|s| s.op == Op::Unindex(0)),
            "{f}'s state is packed as rows:\n{ir}"
        );
    }
}

#[test]
fn a_vector_and_a_matrix_carried_differentiate_both_ways() {
    let p = prog(PROGRAM);
    for n in [0, 1, 9] {
        let args = vec![arr(&[3, 3], 1), arr(&[3], 2), int(n)];
        run_both(&p, "decay", &args).unwrap();
        check_gradient(&p, "ddecay", "decay", 2, &args, &format!("decay n={n}"));
        check_jvp(&p, "decay_jvp", "decay", 2, &args, &format!("decay n={n}"));
    }
}

#[test]
fn booleans_scalars_and_vectors_of_two_lengths_with_a_weight_matrix() {
    let p = prog(PROGRAM);
    for n in [0, 1, 2, 7] {
        let args = vec![arr(&[3, 3], 3), arr(&[3], 4), arr(&[2], 5), int(n)];
        let names = ["mixed", "dmixed", "mixed_jvp", "gsq", "dgsq"];
        check_both_modes_and_second_order(&p, names, 3, &args, &format!("mixed n={n}"));
    }
}

#[test]
fn a_scan_carrying_a_matrix_and_every_state_of_a_flat_scan() {
    let p = prog(PROGRAM);
    for t in [0, 1, 5] {
        let args = vec![
            arr(&[3], 7),
            arr(&[3, 3], 8),
            arr(&[3, 3], 9),
            arr(&[t, 3], 6),
        ];
        let what = format!("outer T={t}");
        run_both(&p, "outer", &args).unwrap();
        check_gradient(&p, "douter", "outer", 3, &args, &what);
        check_jvp(&p, "outer_jvp", "outer", 3, &args, &what);
        let args = vec![
            args[3].clone(),
            args[2].clone(),
            args[0].clone(),
            args[1].clone(),
        ];
        run_both(&p, "douter_x", &args).unwrap();
        check_gradient(&p, "douter_x", "outer_x", 2, &args, &format!("{what} xs"));
        let args = vec![arr(&[3], 10), arr(&[], 11), arr(&[t, 3], 12)];
        run_both(&p, "all_states", &args).unwrap();
        check_gradient(&p, "dall_states", "all_states", 2, &args, &what);
    }
}

#[test]
fn a_flat_state_that_settles() {
    let p = prog(PROGRAM);
    let args = vec![arr(&[3, 3], 13), arr(&[3], 14)];
    // It stops well before its bound (the count of steps is in the sum).
    let out = run_both(&p, "settle", &args).unwrap()[0].data[0];
    assert!(out.is_finite() && out < 200.0, "{out}");
    check_gradient(&p, "dsettle", "settle", 2, &args, "settle");
}

#[test]
fn flat_states_under_vmap_are_each_element_s_own() {
    let p = prog(PROGRAM);
    let (w, h0s, n) = (arr(&[3, 3], 15), arr(&[4, 3], 16), int(6));
    let batch = run_both(&p, "decay_batch", &[w.clone(), h0s.clone(), n.clone()]).unwrap();
    for b in 0..4 {
        let h0 = egrad::Value::array(
            egrad::internals::types::DType::F64,
            vec![3],
            h0s.data[3 * b..3 * b + 3].to_vec(),
        );
        let one = run_both(&p, "decay", &[w.clone(), h0, n.clone()]).unwrap();
        assert_eq!(
            one[0].data[0].to_bits(),
            batch[0].data[b].to_bits(),
            "row {b}"
        );
    }
    let args = vec![w.clone(), h0s, n.clone()];
    check_gradient(
        &p,
        "ddecay_batch",
        "decay_batch_loss",
        2,
        &args,
        "decay batch",
    );
    let (h0, vs) = (arr(&[3], 17), arr(&[3, 2], 18));
    let batch = run_both(
        &p,
        "mixed_batch",
        &[w.clone(), vs.clone(), h0.clone(), n.clone()],
    )
    .unwrap();
    for b in 0..3 {
        let v = egrad::Value::array(
            egrad::internals::types::DType::F64,
            vec![2],
            vs.data[2 * b..2 * b + 2].to_vec(),
        );
        let one = run_both(&p, "mixed", &[w.clone(), h0.clone(), v, n.clone()]).unwrap();
        assert_eq!(
            one[0].data[0].to_bits(),
            batch[0].data[b].to_bits(),
            "row {b}"
        );
    }
    let args = vec![w, vs, h0, n.clone()];
    check_gradient(
        &p,
        "dmixed_batch",
        "mixed_batch_loss",
        2,
        &args,
        "mixed batch",
    );
    let (y, xs) = (arr(&[3], 22), arr(&[4, 2], 23));
    let rows = run_both(&p, "rows_mixed", &[xs.clone(), y.clone(), n.clone()]).unwrap();
    for i in 0..4 {
        let x = egrad::Value::f64(&xs.data[2 * i..2 * i + 2]);
        let one = run_both(&p, "one_mixed", &[x, y.clone(), n.clone()]).unwrap();
        assert_eq!(
            one[0].data[0].to_bits(),
            rows[0].data[i].to_bits(),
            "row {i}"
        );
    }
    let args = vec![y, xs, n];
    check_gradient(&p, "drows_mixed", "rows_mixed_loss", 2, &args, "rows mixed");
    let xss = arr(&[2, 4, 3], 19);
    let (h0, s) = (arr(&[3], 20), arr(&[], 21));
    let batch = run_both(&p, "all_batch", &[h0.clone(), s.clone(), xss.clone()]).unwrap();
    for b in 0..2 {
        let xs = egrad::Value::array(
            egrad::internals::types::DType::F64,
            vec![4, 3],
            xss.data[12 * b..12 * b + 12].to_vec(),
        );
        let one = run_both(&p, "all_states", &[h0.clone(), s.clone(), xs]).unwrap();
        assert_eq!(
            one[0].data[0].to_bits(),
            batch[0].data[b].to_bits(),
            "row {b}"
        );
    }
}

#[test]
fn an_error_inside_a_state_is_told_once() {
    // As itself, not again as a state the loop cannot carry.
    let e = err("fn f[H](n: i64, h0: f64[H]) -> f64 {
  let (h, k) = iterate(n, (h0, nope(h0)), (h, k) => (h, k))
  +/h
}");
    assert!(e.contains("unknown function `nope`"), "{e}");
    assert!(!e.contains("cannot carry"), "{e}");
}
