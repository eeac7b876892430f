//! Loops whose step reads values of other shapes than its state (captures:
//! a weight matrix, a scalar step size, `i64` indices, stacked layer
//! weights), over a run-time length: what they compute (native code equal
//! to the interpreter bit for bit), reverse-mode gradients with respect to
//! the captures and the initial state and forward-mode tangents against
//! central differences, under `@vmap`, `scan_all`'s every state, an
//! L-layer LSTM as one function, and the IR's form of a captured loop.

mod common;

use common::{arr, check_gradient, check_jvp, int, prog, run_both};
use egrad::internals::ir::{parse_functions, Function};
use egrad::internals::ops::Op;
use egrad::internals::types::value::Value;
use egrad::internals::types::DType;

const PROGRAM: &str = r#"
// An RNN over a run-time length (the issue's program).
fn rnn[H](W: f64[H, H], h0: f64[H], n: i64) -> f64 {
  let h = iterate(n, h0, h => tanh(matmul(W, h)))
  +/h
}
@grad(W, h0)
fn drnn[H](W: f64[H, H], h0: f64[H], n: i64) -> (f64[H, H], f64[H]) = rnn(W, h0, n)
@jvp(W, h0)
fn rnn_jvp[H](W: f64[H, H], h0: f64[H], n: i64, dW: f64[H, H], dh0: f64[H]) -> f64 = rnn(W, h0, n)
// Second order through its gradient: reverse over reverse, and forward
// over reverse (through the walk's tape of every state).
fn gsq[H](W: f64[H, H], h0: f64[H], n: i64) -> f64 {
  let (gW, gh) = drnn(W, h0, n)
  +/flatten(gW .* gW) + +/(gh * gh)
}
@grad(W, h0)
fn dgsq[H](W: f64[H, H], h0: f64[H], n: i64) -> (f64[H, H], f64[H]) = gsq(W, h0, n)
@jvp(W, h0)
fn gsq_jvp[H](W: f64[H, H], h0: f64[H], n: i64, dW: f64[H, H], dh0: f64[H]) -> f64 = gsq(W, h0, n)

// A GRU over a sequence of run-time length.
fn gru[T, D, H](h0: f64[H], Wz: f64[H, D], Uz: f64[H, H], Wr: f64[H, D], Ur: f64[H, H],
                Wh: f64[H, D], Uh: f64[H, H], xs: f64[T, D]) -> f64 {
  let h = scan(xs, h0, (h, x) => {
    let z = sigmoid(matmul(Wz, x) + matmul(Uz, h))
    let r = sigmoid(matmul(Wr, x) + matmul(Ur, h))
    let c = tanh(matmul(Wh, x) + matmul(Uh, r * h))
    (1 - z) * h + z * c
  })
  +/(h * h)
}
@grad(h0, Wz, Uz, Wr, Ur, Wh, Uh)
fn dgru[T, D, H](h0: f64[H], Wz: f64[H, D], Uz: f64[H, H], Wr: f64[H, D], Ur: f64[H, H],
                 Wh: f64[H, D], Uh: f64[H, H], xs: f64[T, D])
  -> (f64[H], f64[H, D], f64[H, H], f64[H, D], f64[H, H], f64[H, D], f64[H, H]) =
  gru(h0, Wz, Uz, Wr, Ur, Wh, Uh, xs)
@jvp(h0, Wz, Uz)
fn gru_jvp[T, D, H](h0: f64[H], Wz: f64[H, D], Uz: f64[H, H], Wr: f64[H, D], Ur: f64[H, H],
                    Wh: f64[H, D], Uh: f64[H, H], xs: f64[T, D],
                    dh0: f64[H], dWz: f64[H, D], dUz: f64[H, H]) -> f64 =
  gru(h0, Wz, Uz, Wr, Ur, Wh, Uh, xs)

// The GRU with respect to its inputs (the sequence's cotangent, a row per
// step of the walk back), and every state of a scan with respect to its
// sequence.
fn gru_x[T, D, H](xs: f64[T, D], h0: f64[H], Wz: f64[H, D], Uz: f64[H, H], Wr: f64[H, D],
                  Ur: f64[H, H], Wh: f64[H, D], Uh: f64[H, H]) -> f64 =
  gru(h0, Wz, Uz, Wr, Ur, Wh, Uh, xs)
@grad(xs, h0, Wz)
fn dgru_x[T, D, H](xs: f64[T, D], h0: f64[H], Wz: f64[H, D], Uz: f64[H, H], Wr: f64[H, D],
                   Ur: f64[H, H], Wh: f64[H, D], Uh: f64[H, H]) -> (f64[T, D], f64[H], f64[H, D]) =
  gru_x(xs, h0, Wz, Uz, Wr, Ur, Wh, Uh)
fn states[T, D](xs: f64[T, D], A: f64[D, D], h0: f64[D]) -> f64 {
  let hs = scan_all(xs, h0, (h, x) => tanh(matmul(A, h) + x))
  +/flatten(hs .* hs)
}
@grad(xs, A)
fn dstates[T, D](xs: f64[T, D], A: f64[D, D], h0: f64[D]) -> (f64[T, D], f64[D, D]) = states(xs, A, h0)
// Forward mode with respect to the sequence: the tangent loop reads each
// row beside its tangent.
@jvp(xs, h0, Wz)
fn gru_x_jvp[T, D, H](xs: f64[T, D], h0: f64[H], Wz: f64[H, D], Uz: f64[H, H], Wr: f64[H, D],
                      Ur: f64[H, H], Wh: f64[H, D], Uh: f64[H, H], dxs: f64[T, D], dh0: f64[H],
                      dWz: f64[H, D]) -> f64 = gru_x(xs, h0, Wz, Uz, Wr, Ur, Wh, Uh)
@jvp(xs, A)
fn states_jvp[T, D](xs: f64[T, D], A: f64[D, D], h0: f64[D], dxs: f64[T, D], dA: f64[D, D]) -> f64 =
  states(xs, A, h0)

// RK4 for y' = tanh(A y): a matrix and a scalar step size captured.
fn field[D](A: f64[D, D], y: f64[D]) -> f64[D] = tanh(matmul(A, y))
fn rk4[D](A: f64[D, D], y0: f64[D], dt: f64, n: i64) -> f64 {
  let y = iterate(n, y0, y => {
    let k1 = field(A, y)
    let k2 = field(A, y + 0.5 * dt * k1)
    let k3 = field(A, y + 0.5 * dt * k2)
    let k4 = field(A, y + dt * k3)
    y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
  })
  +/(y * y)
}
@grad(A, y0, dt)
fn drk4[D](A: f64[D, D], y0: f64[D], dt: f64, n: i64) -> (f64[D, D], f64[D], f64) = rk4(A, y0, dt, n)
@jvp(A, y0, dt)
fn rk4_jvp[D](A: f64[D, D], y0: f64[D], dt: f64, n: i64, dA: f64[D, D], dy0: f64[D], ddt: f64) -> f64 =
  rk4(A, y0, dt, n)

@vmap(y0s)
fn rk4_batch[B, D](A: f64[D, D], y0s: f64[B, D], dt: f64, n: i64) -> f64[B] = rk4(A, y0s, dt, n)

// A loop that settles, and one whose step reads `i64` indices.
fn settle[H](W: f64[H, H], h0: f64[H]) -> f64 {
  let h = iterate_until(1000, h0, h => +/abs(h - 0.5 * tanh(matmul(W, h)) - 0.1) < 1e-12,
                        h => 0.5 * tanh(matmul(W, h)) + 0.1)
  +/h
}
@grad(W, h0)
fn dsettle[H](W: f64[H, H], h0: f64[H]) -> (f64[H, H], f64[H]) = settle(W, h0)
fn shuffle[H](W: f64[H, H], h0: f64[H], perm: i64[H], n: i64) -> f64 {
  let h = iterate(n, h0, h => tanh(matmul(W, h))[perm] + 0.1 * h)
  +/(h * h)
}
@grad(W, h0)
fn dshuffle[H](W: f64[H, H], h0: f64[H], perm: i64[H], n: i64) -> (f64[H, H], f64[H]) = shuffle(W, h0, perm, n)

// Over a batch of sequences.
@vmap(h0s)
fn rnn_batch[B, H](W: f64[H, H], h0s: f64[B, H], n: i64) -> f64[B] = rnn(W, h0s, n)
fn rnn_batch_loss[B, H](W: f64[H, H], h0s: f64[B, H], n: i64) -> f64 = +/rnn_batch(W, h0s, n)
@grad(W, h0s)
fn drnn_batch[B, H](W: f64[H, H], h0s: f64[B, H], n: i64) -> (f64[H, H], f64[B, H]) = rnn_batch_loss(W, h0s, n)
@vmap(xss)
fn gru_batch[B, T, D, H](h0: f64[H], Wz: f64[H, D], Uz: f64[H, H], Wr: f64[H, D], Ur: f64[H, H],
                         Wh: f64[H, D], Uh: f64[H, H], xss: f64[B, T, D]) -> f64[B] =
  gru(h0, Wz, Uz, Wr, Ur, Wh, Uh, xss)
fn gru_batch_loss[B, T, D, H](h0: f64[H], Wz: f64[H, D], Uz: f64[H, H], Wr: f64[H, D], Ur: f64[H, H],
                              Wh: f64[H, D], Uh: f64[H, H], xss: f64[B, T, D]) -> f64 =
  +/gru_batch(h0, Wz, Uz, Wr, Ur, Wh, Uh, xss)
@grad(h0, Wz, Uz)
fn dgru_batch[B, T, D, H](h0: f64[H], Wz: f64[H, D], Uz: f64[H, H], Wr: f64[H, D], Ur: f64[H, H],
                          Wh: f64[H, D], Uh: f64[H, H], xss: f64[B, T, D]) -> (f64[H], f64[H, D], f64[H, H]) =
  gru_batch_loss(h0, Wz, Uz, Wr, Ur, Wh, Uh, xss)
"#;

fn gru_args(h: usize, d: usize, t: usize) -> Vec<Value> {
    let mut a = vec![arr(&[h], 1)];
    for k in 0..3 {
        a.push(arr(&[h, d], 10 + k));
        a.push(arr(&[h, h], 20 + k));
    }
    a.push(arr(&[t, d], 30));
    a
}

/// `f` at `args` (native code equal to the interpreter), its gradient
/// function `df` (the first `nwrt.0` parameters) and its `@jvp` function
/// `jf` (the first `nwrt.1`) against central differences.
fn both_modes(
    p: &egrad::Program,
    (f, df, jf): (&str, &str, &str),
    nwrt: (usize, usize),
    args: &[Value],
    what: &str,
) {
    run_both(p, f, args).unwrap();
    check_gradient(p, df, f, nwrt.0, args, what);
    check_jvp(p, jf, f, nwrt.1, args, what);
}

#[test]
fn the_rnn_over_a_run_time_length_differentiates_both_ways() {
    let p = prog(PROGRAM);
    for n in [0, 1, 9] {
        let args = vec![arr(&[4, 4], 1), arr(&[4], 2), int(n)];
        both_modes(
            &p,
            ("rnn", "drnn", "rnn_jvp"),
            (2, 2),
            &args,
            &format!("rnn n={n}"),
        );
    }
}

#[test]
fn second_order_through_the_rnn_s_gradient_both_ways() {
    let p = prog(PROGRAM);
    for n in [0, 1, 7] {
        let args = vec![arr(&[3, 3], 3), arr(&[3], 4), int(n)];
        both_modes(
            &p,
            ("gsq", "dgsq", "gsq_jvp"),
            (2, 2),
            &args,
            &format!("rnn second order n={n}"),
        );
    }
}

/// The weight matrix's cotangent is not summed step by step in the walk
/// back (a matrix in its state): the walk keeps each step's two vectors,
/// and one matrix product after it sums their outer products.
#[test]
fn a_weight_matrix_cotangent_is_one_matrix_product_after_the_walk() {
    let p = prog(PROGRAM);
    let f = p.ir("drnn").unwrap();
    assert!(
        f.stmts.iter().any(|s| s.op == Op::MatMul),
        "no matrix product:\n{f}"
    );
    for lp in &f.loops {
        let st = lp.state();
        assert!(st.rank() <= 1, "a walk carries {st}:\n{f}");
        let width = st.shape.first().map(|d| d.to_string()).unwrap_or_default();
        assert!(
            !width.contains("H*H"),
            "a walk carries the matrix ({st}):\n{f}"
        );
    }
}

#[test]
fn a_gru_over_a_sequence_differentiates_with_respect_to_every_weight() {
    let p = prog(PROGRAM);
    for t in [1, 6] {
        let args = gru_args(3, 2, t);
        both_modes(
            &p,
            ("gru", "dgru", "gru_jvp"),
            (7, 3),
            &args,
            &format!("gru T={t}"),
        );
    }
}

#[test]
fn a_scan_with_captures_differentiates_with_respect_to_its_sequence() {
    let p = prog(PROGRAM);
    for t in [0, 1, 6] {
        let mut args = gru_args(3, 2, t);
        let xs = args.pop().unwrap();
        args.insert(0, xs);
        run_both(&p, "dgru_x", &args).unwrap();
        check_gradient(&p, "dgru_x", "gru_x", 3, &args, &format!("gru xs T={t}"));
        check_jvp(&p, "gru_x_jvp", "gru_x", 3, &args, &format!("gru xs T={t}"));
        let args = vec![arr(&[t, 3], 50), arr(&[3, 3], 51), arr(&[3], 52)];
        run_both(&p, "dstates", &args).unwrap();
        check_gradient(
            &p,
            "dstates",
            "states",
            2,
            &args,
            &format!("scan_all xs T={t}"),
        );
        check_jvp(
            &p,
            "states_jvp",
            "states",
            2,
            &args,
            &format!("scan_all xs T={t}"),
        );
    }
}

#[test]
fn an_rk4_ode_with_a_parameter_matrix_and_a_step_size() {
    let p = prog(PROGRAM);
    let args = vec![
        arr(&[3, 3], 5),
        arr(&[3], 6),
        Value::scalar(DType::F64, 0.1),
        int(12),
    ];
    both_modes(&p, ("rk4", "drk4", "rk4_jvp"), (3, 3), &args, "rk4");
}

#[test]
fn a_settling_loop_and_integer_captures() {
    let p = prog(PROGRAM);
    let args = vec![arr(&[3, 3], 7), arr(&[3], 8)];
    run_both(&p, "settle", &args).unwrap();
    check_gradient(&p, "dsettle", "settle", 2, &args, "settle");
    let perm = Value::array(DType::I64, vec![3], vec![2.0, 0.0, 1.0]);
    let args = vec![arr(&[3, 3], 9), arr(&[3], 10), perm, int(5)];
    run_both(&p, "shuffle", &args).unwrap();
    check_gradient(&p, "dshuffle", "shuffle", 2, &args, "shuffle");
}

#[test]
fn batches_of_sequences_under_vmap() {
    let p = prog(PROGRAM);
    let (w, h0s) = (arr(&[3, 3], 11), arr(&[4, 3], 12));
    let batch = run_both(&p, "rnn_batch", &[w.clone(), h0s.clone(), int(5)]).unwrap();
    for b in 0..4 {
        let h0 = Value::array(DType::F64, vec![3], h0s.data[3 * b..3 * b + 3].to_vec());
        let one = run_both(&p, "rnn", &[w.clone(), h0, int(5)]).unwrap();
        assert_eq!(
            one[0].data[0].to_bits(),
            batch[0].data[b].to_bits(),
            "row {b}"
        );
    }
    let args = vec![w, h0s, int(5)];
    check_gradient(&p, "drnn_batch", "rnn_batch_loss", 2, &args, "rnn batch");
    let mut args = gru_args(3, 2, 4);
    args[7] = arr(&[2, 4, 2], 13);
    run_both(&p, "gru_batch", &args).unwrap();
    check_gradient(&p, "dgru_batch", "gru_batch_loss", 3, &args, "gru batch");
    // The ODE over a batch of initial states, row by row.
    let (a, y0s, dt) = (
        arr(&[3, 3], 14),
        arr(&[3, 3], 15),
        Value::scalar(DType::F64, 0.1),
    );
    let batch = run_both(
        &p,
        "rk4_batch",
        &[a.clone(), y0s.clone(), dt.clone(), int(7)],
    )
    .unwrap();
    for b in 0..3 {
        let y0 = Value::f64(&y0s.data[3 * b..3 * b + 3]);
        let one = run_both(&p, "rk4", &[a.clone(), y0, dt.clone(), int(7)]).unwrap();
        assert_eq!(
            one[0].data[0].to_bits(),
            batch[0].data[b].to_bits(),
            "rk4 row {b}"
        );
    }
}

/// The GradBench LSTM as one function for any number of layers: a loop
/// over the layers inside the loop over time, every state kept
/// (`scan_all`); the same bits as `gradbench/lstm.eg`.
const LSTM: &str = include_str!("../gradbench/lstm.eg");

#[test]
fn an_lstm_of_any_number_of_layers_is_one_function() {
    let p = prog(LSTM);
    for (l, c) in [(1, 4), (2, 5), (3, 3)] {
        let b = 3;
        let args = vec![
            arr(&[8 * l, b], 40 + l as u64),
            arr(&[3, b], 41),
            arr(&[2 * l, b], 42),
            arr(&[c, b], 43),
        ];
        run_both(&p, "objective", &args).unwrap();
        check_gradient(
            &p,
            "jacobian",
            "objective",
            2,
            &args,
            &format!("lstm l={l}"),
        );
    }
    // Over a batch of sequences, each row its own sequence's loss.
    let src = format!(
        "{LSTM}\n@vmap(seqs)\nfn batch[K, C, L, B](W: f64[8*L, B], E: f64[3, B], S: f64[2*L, B], seqs: f64[K, C, B]) -> f64[K] = objective(W, E, S, seqs)\n"
    );
    let p = prog(&src);
    let (l, c, b) = (2, 4, 3);
    let args = vec![
        arr(&[8 * l, b], 44),
        arr(&[3, b], 45),
        arr(&[2 * l, b], 46),
        arr(&[3, c, b], 47),
    ];
    let batch = run_both(&p, "batch", &args).unwrap();
    for k in 0..3 {
        let seq = Value::array(
            DType::F64,
            vec![c, b],
            args[3].data[c * b * k..c * b * (k + 1)].to_vec(),
        );
        let mut one = args.clone();
        one[3] = seq;
        let one = run_both(&p, "objective", &one).unwrap();
        assert_eq!(
            one[0].data[0].to_bits(),
            batch[0].data[k].to_bits(),
            "lstm sequence {k}"
        );
    }
}

#[test]
fn a_captured_loop_prints_and_parses_back_and_is_checked() {
    let p = prog(PROGRAM);
    let ir = p.ir("rnn").unwrap();
    assert_eq!(ir.loops.len(), 1, "{ir}");
    assert_eq!(ir.loops[0].captures, 1, "{ir}");
    let text = ir.to_string();
    assert!(text.contains("captures 1 {"), "{text}");
    let back: Vec<Function> = parse_functions(&text).unwrap();
    assert_eq!(back[0].to_string(), text);
    // The statement's captures must be those the body reads.
    let l = ir
        .stmts
        .iter()
        .find(|s| matches!(s.op, Op::Loop(..)))
        .unwrap();
    let mut wrong = ir.clone();
    let k = wrong.stmts.iter().position(|s| s.var == l.var).unwrap();
    wrong.stmts[k].args.truncate(1);
    let e = wrong.validate().unwrap_err().to_string();
    assert!(e.contains("captures (f64[H, H]), not ()"), "{e}");
}
