//! Loops whose state mixes integers with floats over a run-time length: a
//! step counter that indexes a sequence, an iteration count beside a
//! Newton iterate, an `i64` array carried exactly, the index of `tabulate`
//! in the state. One IR loop (the `i64` parts ride in the float state as
//! exact words), native code equal to the interpreter bit for bit,
//! gradients and tangents against central differences, under `@vmap`, and
//! what is still refused.

mod common;

use common::{
    arr, check_both_modes_and_second_order, check_gradient, err, int, loop_states, prog, run_both,
};
use egrad::internals::types::DType;
use egrad::Value;

const PROGRAM: &str = r#"
// An RNN whose step counter picks the input row (`t % T`: the sequence is
// read cyclically for any `n`), with a weight matrix the step reads.
fn rnn_t[T, H](W: f64[H, H], h0: f64[H], xs: f64[T, H], n: i64) -> f64 {
  let (t, h) = iterate(n, (i64(0), h0), s => {
    let (t, h) = s
    (t + 1, tanh(matmul(W, h) + xs[t % T]))
  })
  +/h + 0.01 * f64(t)
}
@grad(W, h0)
fn drnn_t[T, H](W: f64[H, H], h0: f64[H], xs: f64[T, H], n: i64) -> (f64[H, H], f64[H]) =
  rnn_t(W, h0, xs, n)
@jvp(W, h0)
fn rnn_t_jvp[T, H](W: f64[H, H], h0: f64[H], xs: f64[T, H], n: i64, dW: f64[H, H], dh0: f64[H]) -> f64 =
  rnn_t(W, h0, xs, n)
fn gsq[T, H](W: f64[H, H], h0: f64[H], xs: f64[T, H], n: i64) -> f64 {
  let (gW, gh) = drnn_t(W, h0, xs, n)
  +/flatten(gW .* gW) + +/(gh * gh)
}
@grad(W, h0)
fn dgsq[T, H](W: f64[H, H], h0: f64[H], xs: f64[T, H], n: i64) -> (f64[H, H], f64[H]) =
  gsq(W, h0, xs, n)

// Newton's iteration counting its steps: the count is the state's `i64`.
fn newton(a: f64, n: i64) -> (f64, i64) =
  iterate_until(n, (a, i64(0)), s => {
    let (x, k) = s
    abs(x * x - a) < 1e-12
  }, s => {
    let (x, k) = s
    (0.5 * (x + a / x), k + 1)
  })
fn root(a: f64, n: i64) -> f64 {
  let (x, k) = newton(a, n)
  x + 0.001 * f64(k)
}
@grad(a)
fn droot(a: f64, n: i64) -> f64 = root(a, n)

// A run-time `i64` parameter in a stopping loop's state, with a bound
// given at run time (a loop) and written out (unrolled).
fn until_k[N](x: f64[N], k: i64, n: i64) -> f64 {
  let (a, b) = iterate_until(n, (x, k), (a, b) => +/a > 1.0, (a, b) => (a * 1.5, b + 1))
  +/a + f64(b)
}
fn until_k5[N](x: f64[N], k: i64) -> f64 {
  let (a, b) = iterate_until(5, (x, k), (a, b) => +/a > 1.0, (a, b) => (a * 1.5, b + 1))
  +/a + f64(b)
}

// A scan with a counter, and every state of one.
fn counted[T, D](h0: f64[D], w: f64, xs: f64[T, D]) -> f64 {
  let (h, c) = scan(xs, (h0, i64(1)), (s, x) => {
    let (h, c) = s
    (tanh(h * w + x / f64(c)), c * 2)
  })
  +/h + f64(c)
}
@grad(h0, w)
fn dcounted[T, D](h0: f64[D], w: f64, xs: f64[T, D]) -> (f64[D], f64) = counted(h0, w, xs)
fn every[T, D](h0: f64[D], w: f64, xs: f64[T, D]) -> f64 {
  let (hs, cs) = scan_all(xs, (h0, i64(3)), (s, x) => {
    let (h, c) = s
    (tanh(h * w + x), c * 5 - 7)
  })
  +/flatten(hs .* hs) + 1e-3 * +/f64(cs)
}
@grad(h0, w)
fn devery[T, D](h0: f64[D], w: f64, xs: f64[T, D]) -> (f64[D], f64) = every(h0, w, xs)
fn every_counts[T, D](h0: f64[D], w: f64, xs: f64[T, D]) -> i64[T] {
  let (hs, cs) = scan_all(xs, (h0, i64(3)), (s, x) => {
    let (h, c) = s
    (tanh(h * w + x), c * 5 - 7)
  })
  cs
}

// An `i64` array carried next to floats: it must come back exactly.
fn ints(ks: i64[3], x: f64, n: i64) -> i64[3] {
  let (a, y) = iterate(n, (ks, x), s => {
    let (a, y) = s
    (a * 31 - 1000003, y * 0.5)
  })
  a
}

fn ints32(ks: i64[3], x: f32, n: i64) -> i64[3] {
  let (a, y) = iterate(n, (ks, x), s => {
    let (a, y) = s
    (a * 31 - 1000003, y * 0.5)
  })
  a
}

// In `f32`.
fn rnn32[H](W: f32[H, H], h0: f32[H], n: i64) -> (f32, i64) {
  let (h, k) = iterate(n, (h0, i64(0)), s => {
    let (h, k) = s
    (tanh(matmul(W, h)) + f32(k) * 0.125, k + 3)
  })
  (+/h, k)
}

// Over a batch of initial states.
@vmap(h0s)
fn rnn_batch[B, T, H](W: f64[H, H], h0s: f64[B, H], xs: f64[T, H], n: i64) -> f64[B] = rnn_t(W, h0s, xs, n)
fn rnn_batch_loss[B, T, H](W: f64[H, H], h0s: f64[B, H], xs: f64[T, H], n: i64) -> f64 =
  +/rnn_batch(W, h0s, xs, n)
@grad(W, h0s)
fn drnn_batch[B, T, H](W: f64[H, H], h0s: f64[B, H], xs: f64[T, H], n: i64) -> (f64[H, H], f64[B, H]) =
  rnn_batch_loss(W, h0s, xs, n)

// The index of `tabulate` and a run-time `i64` parameter in the state.
fn rows[N](X: f64[N, 2], k: i64, n: i64) -> f64[N] = tabulate[N](i => {
  let (a, b, c) = iterate(n, (X[i], i, k), s => {
    let (a, b, c) = s
    (a * 0.5 + f64(b), b + c, c)
  })
  +/a + f64(b)
})
fn one_row(x: f64[2], i: i64, k: i64, n: i64) -> f64 {
  let (a, b, c) = iterate(n, (x, i, k), s => {
    let (a, b, c) = s
    (a * 0.5 + f64(b), b + c, c)
  })
  +/a + f64(b)
}
fn rows_loss[N](X: f64[N, 2], k: i64, n: i64) -> f64 = +/rows(X, k, n)
@grad(X)
fn drows[N](X: f64[N, 2], k: i64, n: i64) -> f64[N, 2] = rows_loss(X, k, n)
"#;

fn ints_of(shape: &[usize], data: &[i64]) -> Value {
    Value::array(
        DType::I64,
        shape.to_vec(),
        data.iter().map(|&k| k as f64).collect(),
    )
}

#[test]
fn integers_ride_in_a_float_state_as_exact_words() {
    let p = prog(PROGRAM);
    // An `i64` scalar is two `f64` words; the loop is not unrolled.
    assert_eq!(loop_states(p.ir("rnn_t").unwrap()), ["f64[H+2]"]);
    assert_eq!(loop_states(p.ir("ints").unwrap()), ["f64[7]"]);
    assert_eq!(loop_states(p.ir("ints32").unwrap()), ["f32[10]"]);
    assert_eq!(loop_states(p.ir("rnn32").unwrap()), ["f32[H+3]"]);
    // Values far from the float's exact range come back bit for bit,
    // negative ones too (every step's values checked against Rust's
    // wrapping arithmetic, up to 2^53, which egrad's values hold exactly).
    let ks = [-123_456_789_012, 7, -1];
    for (f, x, n) in [0, 1, 2, 3]
        .into_iter()
        .flat_map(|n| [("ints", DType::F64, n), ("ints32", DType::F32, n)])
    {
        let got = run_both(&p, f, &[ints_of(&[3], &ks), Value::scalar(x, 0.25), int(n)]).unwrap();
        let want: Vec<f64> = ks
            .iter()
            .map(|&k| {
                let mut a: i64 = k;
                for _ in 0..n {
                    a = a.wrapping_mul(31).wrapping_sub(1_000_003);
                }
                a as f64
            })
            .collect();
        assert!(want.iter().all(|w| w.abs() < 2f64.powi(53)), "{want:?}");
        assert_eq!(got[0].data, want, "{f} n={n}");
    }
    // In `f32`: three words of 22 bits.
    let (w, h0) = (arr(&[3, 3], 2), arr(&[3], 3));
    let as32 = |v: Value| {
        Value::array(
            DType::F32,
            v.shape.clone(),
            v.data.iter().map(|&x| x as f32 as f64).collect(),
        )
    };
    let got = run_both(&p, "rnn32", &[as32(w), as32(h0), int(11)]).unwrap();
    assert_eq!(got[1].data, [33.0]);
}

#[test]
fn a_step_counter_indexing_its_sequence_differentiates_both_ways() {
    let p = prog(PROGRAM);
    for n in [0, 1, 4, 9] {
        let args = vec![arr(&[3, 3], 4), arr(&[3], 5), arr(&[4, 3], 6), int(n)];
        let names = ["rnn_t", "drnn_t", "rnn_t_jvp", "gsq", "dgsq"];
        check_both_modes_and_second_order(&p, names, 2, &args, &format!("rnn_t n={n}"));
    }
}

#[test]
fn newton_counts_its_steps_and_stops() {
    let p = prog(PROGRAM);
    let out = run_both(&p, "newton", &[Value::scalar(DType::F64, 2.0), int(50)]).unwrap();
    assert!((out[0].data[0] - 2f64.sqrt()).abs() < 1e-15, "{out:?}");
    // Quadratic convergence from 2: five steps, then it holds.
    assert_eq!(out[1].data, [5.0]);
    let args = vec![Value::scalar(DType::F64, 2.0), int(50)];
    check_gradient(&p, "droot", "root", 1, &args, "newton");
    // A run-time parameter in the state: the loop and the unrolled steps
    // agree (it stops after 2 of 5 steps from 0.3 + 0.2).
    let x = Value::f64(&[0.3, 0.2]);
    let looped = run_both(&p, "until_k", &[x.clone(), int(7), int(5)]).unwrap();
    let unrolled = run_both(&p, "until_k5", &[x, int(7)]).unwrap();
    assert_eq!(looped[0].data[0].to_bits(), unrolled[0].data[0].to_bits());
    assert_eq!(looped[0].data[0], 0.5 * 2.25 + 9.0);
}

#[test]
fn scans_carry_counters_and_keep_every_one() {
    let p = prog(PROGRAM);
    for t in [0, 1, 5] {
        let args = vec![arr(&[3], 7), arr(&[], 8), arr(&[t, 3], 9)];
        let what = format!("T={t}");
        run_both(&p, "counted", &args).unwrap();
        check_gradient(&p, "dcounted", "counted", 2, &args, &what);
        run_both(&p, "every", &args).unwrap();
        check_gradient(&p, "devery", "every", 2, &args, &what);
        let cs = run_both(&p, "every_counts", &args).unwrap();
        let mut c = 3i64;
        let want: Vec<f64> = (0..t)
            .map(|_| {
                c = c * 5 - 7;
                c as f64
            })
            .collect();
        assert_eq!(cs[0].data, want, "{what}");
    }
}

#[test]
fn counters_under_vmap_and_in_tabulate_are_each_element_s_own() {
    let p = prog(PROGRAM);
    let (w, h0s, xs, n) = (arr(&[3, 3], 10), arr(&[4, 3], 11), arr(&[2, 3], 12), int(5));
    let batch = run_both(
        &p,
        "rnn_batch",
        &[w.clone(), h0s.clone(), xs.clone(), n.clone()],
    )
    .unwrap();
    for b in 0..4 {
        let h0 = Value::f64(&h0s.data[3 * b..3 * b + 3]);
        let one = run_both(&p, "rnn_t", &[w.clone(), h0, xs.clone(), n.clone()]).unwrap();
        assert_eq!(
            one[0].data[0].to_bits(),
            batch[0].data[b].to_bits(),
            "row {b}"
        );
    }
    let args = vec![w, h0s, xs, n.clone()];
    check_gradient(&p, "drnn_batch", "rnn_batch_loss", 2, &args, "rnn batch");
    let (x, k) = (arr(&[3, 2], 13), int(4));
    let rows = run_both(&p, "rows", &[x.clone(), k.clone(), n.clone()]).unwrap();
    for i in 0..3 {
        let xi = Value::f64(&x.data[2 * i..2 * i + 2]);
        let one = run_both(&p, "one_row", &[xi, int(i as i64), k.clone(), n.clone()]).unwrap();
        assert_eq!(
            one[0].data[0].to_bits(),
            rows[0].data[i].to_bits(),
            "row {i}"
        );
    }
    check_gradient(&p, "drows", "rows_loss", 1, &[x, k, n], "rows");
}

#[test]
fn floats_of_two_precisions_in_one_state_are_told_at_the_state() {
    let e = err("fn f[H](n: i64, h0: f64[H], g0: f32[H]) -> f64 {
  let (h, g) = iterate(n, (h0, g0), (h, g) => (tanh(h), g))
  +/h
}");
    assert!(
        e.contains("a loop with a run-time count cannot carry this state"),
        "{e}"
    );
    assert!(e.contains("mix f32 and f64"), "{e}");
    assert!(e.contains("(h0, g0)"), "{e}");
}

#[test]
fn a_float_remainder_is_an_error_at_the_operator() {
    // A counter started at a bare `0` is an `f64` (a literal with no
    // context); its remainder is told, not a crash of the compiler.
    let e = err("fn f[T, H](n: i64, xs: f64[T, H], h0: f64[H]) -> f64 {
  let (t, h) = iterate(n, (0, h0), s => {
    let (t, h) = s
    (t + 1, tanh(h + xs[t % T]))
  })
  +/h
}");
    assert!(e.contains("`%` needs i64 operands"), "{e}");
    assert!(e.contains("this has type f64"), "{e}");
    assert!(e.contains("start it at `i64(0)`"), "{e}");
    let e = err("fn f(x: f64) -> f64 = x % 2.0");
    assert!(e.contains("`%` needs i64 operands"), "{e}");
}
