//! `scan(xs, init, (s, x) => step)`: a loop whose step reads row `t` of a
//! sequence. The loop computes what a hand-written Rust loop computes, the
//! JIT equals the interpreter bit for bit, the gradient (with respect to
//! the initial state and the values the step reads, at every checkpoint
//! choice the optimizer makes) matches central finite differences, forward
//! mode agrees, and misuse gives clear errors.

use egrad::internals::backend::{compile, BackendOptions};
use egrad::internals::ir::interp::run;
use egrad::internals::ir::Function;
use egrad::internals::ops::Op;
use egrad::internals::pipeline::{optimize_gradient, Options};
use egrad::internals::types::value::Value;
use egrad::internals::types::DType;
use egrad::Program;

const PROGRAMS: &str = r#"
// An RNN-like recurrence over the rows of xs.
fn rnn[T, B](xs: f64[T, B], s0: f64[B], w: f64[B], a: f64) -> f64 =
  +/scan(xs, s0, (s, x) => tanh(a * s + w * x))
@grad(s0, w, a)
fn drnn[T, B](xs: f64[T, B], s0: f64[B], w: f64[B], a: f64) -> (f64[B], f64[B], f64) =
  rnn(xs, s0, w, a)
@jvp(a)
fn trnn[T, B](xs: f64[T, B], s0: f64[B], w: f64[B], a: f64, da: f64) -> f64 = rnn(xs, s0, w, a)

// A scalar sequence, a tuple state (a scalar rides along a scalar).
fn ema[T](xs: f64[T], r: f64) -> f64 {
  let (m, n) = scan(xs, (0.0, 0.0), (s, x) => { let (m, n) = s; (r * m + x * x, n + x) })
  m + sin(n)
}
@grad(r)
fn dema[T](xs: f64[T], r: f64) -> f64 = ema(xs, r)

// An integer length: still a loop. Mixed shapes: unrolled.
fn fixed(xs: f64[4, 2], s0: f64[2], w: f64[2], a: f64) -> f64 = rnn(xs, s0, w, a)
fn mixed(xs: f64[3, 2], s0: f64[2]) -> f64 {
  let (v, c) = scan(xs, (s0, xs), (s, x) => { let (v, c) = s; (v * x, c * v[0] + x) })
  +/v + +/c
}
@grad(xs, s0)
fn dmixed(xs: f64[3, 2], s0: f64[2]) -> (f64[3, 2], f64[2]) = mixed(xs, s0)

// The gradient with respect to the sequence, of a loop.
@grad(xs, s0, w, a)
fn drnn_xs[T, B](xs: f64[T, B], s0: f64[B], w: f64[B], a: f64) -> (f64[T, B], f64[B], f64[B], f64) =
  rnn(xs, s0, w, a)

// Every state: a loss on each step's state.
fn states[T, B](xs: f64[T, B], s0: f64[B], w: f64[B], a: f64) -> f64[T, B] =
  scan_all(xs, s0, (s, x) => tanh(a * s + w * x * x))
fn per_step[T, B](xs: f64[T, B], s0: f64[B], w: f64[B], a: f64) -> f64 {
  let ss = states(xs, s0, w, a)
  +/(ss .* ss) + +/ss
}
@grad(xs, s0, w, a)
fn dper_step[T, B](xs: f64[T, B], s0: f64[B], w: f64[B], a: f64) -> (f64[T, B], f64[B], f64[B], f64) =
  per_step(xs, s0, w, a)
@jvp(s0, a)
fn tstates[T, B](xs: f64[T, B], s0: f64[B], w: f64[B], a: f64, ds0: f64[B], da: f64) -> f64[T, B] =
  states(xs, s0, w, a)

// A tuple state of a vector and a scalar riding along it (a scalar leaf
// of a vector state): a tuple of sequences.
fn pair[T, B](xs: f64[T, B], s0: f64[B], r: f64) -> (f64[T, B], f64[T]) =
  scan_all(xs, (s0, 1.0), (s, x) => { let (v, c) = s; (sin(v * c + x), c * r + +/x) })
fn pair_loss[T, B](xs: f64[T, B], s0: f64[B], r: f64) -> f64 {
  let (vs, cs) = pair(xs, s0, r)
  +/vs + +/(cs .* cs)
}
@grad(xs, s0, r)
fn dpair_loss[T, B](xs: f64[T, B], s0: f64[B], r: f64) -> (f64[T, B], f64[B], f64) =
  pair_loss(xs, s0, r)

// An integer length and a scalar state: the walk back is seeded by a tape
// cotangent of literal length (once filled past the scalar it seeds).
fn short(xs: f64[4], a: f64) -> f64 = +/scan_all(xs, 0.5, (s, x) => sin(a * s) + x)
@grad(xs, a)
fn dshort(xs: f64[4], a: f64) -> (f64[4], f64) = short(xs, a)
@grad(a)
fn dshort_a(xs: f64[4], a: f64) -> f64 = short(xs, a)
"#;

fn program() -> Program {
    Program::parse(PROGRAMS).unwrap_or_else(|e| panic!("{e}"))
}

fn scans_in(f: &Function) -> usize {
    f.stmts
        .iter()
        .filter(|s| matches!(s.op, Op::Loop(_, true)))
        .count()
}

fn vals(t: usize, b: usize, seed: u64) -> Vec<Value> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    };
    let xs: Vec<f64> = (0..t * b).map(|_| next()).collect();
    let s0: Vec<f64> = (0..b).map(|_| next()).collect();
    let w: Vec<f64> = (0..b).map(|_| next()).collect();
    vec![
        Value::array(DType::F64, vec![t, b], xs),
        Value::f64(&s0),
        Value::f64(&w),
        Value::scalar(DType::F64, 0.8),
    ]
}

fn rnn_reference(args: &[Value]) -> f64 {
    let (xs, s0, w, a) = (&args[0], &args[1], &args[2], args[3].as_scalar());
    let b = s0.data.len();
    let mut s = s0.data.clone();
    for x in xs.data.chunks(b) {
        for j in 0..b {
            s[j] = (a * s[j] + w.data[j] * x[j]).tanh();
        }
    }
    s.iter().sum()
}

fn both(f: &Function, args: &[Value]) -> Vec<Value> {
    let refs: Vec<&Value> = args.iter().collect();
    let interp = run(f, &refs).unwrap();
    let jit = compile(f, &BackendOptions::default())
        .unwrap()
        .call(&refs)
        .unwrap();
    for (a, b) in interp.iter().zip(&jit) {
        assert!(
            a.bits_eq(b),
            "`{}`: JIT {b} differs from the interpreter {a}",
            f.name
        );
    }
    interp
}

#[test]
fn scan_is_a_loop_reading_one_row_per_step() {
    let p = program();
    assert_eq!(scans_in(p.ir("rnn").unwrap()), 1);
    assert_eq!(scans_in(p.ir("fixed").unwrap()), 1);
    assert_eq!(scans_in(p.ir("ema").unwrap()), 1);
    assert_eq!(
        scans_in(p.ir("mixed").unwrap()),
        0,
        "mixed shapes are unrolled"
    );
    for (t, b) in [(0, 3), (1, 3), (2, 1), (7, 4), (50, 5)] {
        let args = vals(t, b, t as u64);
        let got = both(p.ir("rnn").unwrap(), &args)[0].as_scalar();
        let want = rnn_reference(&args);
        assert!(
            (got - want).abs() <= 1e-14 * (1.0 + want.abs()),
            "T={t}: {got} vs {want}"
        );
    }
    let args = vals(4, 2, 9);
    let fixed = both(p.ir("fixed").unwrap(), &args)[0].as_scalar();
    assert!((fixed - rnn_reference(&args)).abs() < 1e-14);
    let xs = Value::f64(&[0.5, -1.0, 2.0]);
    let r = 0.9;
    let (mut m, mut n) = (0.0f64, 0.0f64);
    for x in &xs.data {
        m = r * m + x * x;
        n += x;
    }
    let got = both(p.ir("ema").unwrap(), &[xs, Value::scalar(DType::F64, r)])[0].as_scalar();
    assert!((got - (m + n.sin())).abs() < 1e-14, "{got}");
}

/// Central differences of `f` in the arguments at `wrt`.
fn central(f: &Function, args: &[Value], wrt: &[usize]) -> Vec<Vec<f64>> {
    let eval = |a: &[Value]| {
        let refs: Vec<&Value> = a.iter().collect();
        run(f, &refs).unwrap()[0].as_scalar()
    };
    wrt.iter()
        .map(|&i| {
            (0..args[i].data.len())
                .map(|j| {
                    let h = 1e-6;
                    let mut up = args.to_vec();
                    up[i].data[j] += h;
                    let mut down = args.to_vec();
                    down[i].data[j] -= h;
                    (eval(&up) - eval(&down)) / (2.0 * h)
                })
                .collect()
        })
        .collect()
}

#[test]
fn scan_gradients_match_finite_differences_at_every_checkpoint_choice() {
    let p = program();
    let f = p.ir("rnn").unwrap();
    let args = vals(40, 3, 5);
    let want = central(f, &args, &[1, 2, 3]);
    let mut intervals = std::collections::BTreeSet::new();
    for lambda in [0.0, 0.5, 2.0, 16.0, 1e6] {
        let opts = Options::default()
            .function("drnn")
            .lambda(lambda)
            .dim("T", 40)
            .dim("B", 3);
        let g = optimize_gradient(&p, &opts).unwrap();
        let ir = g.gradient_ir();
        for s in ir.stmts.iter() {
            if let Op::LoopTape(_, k, true) = s.op {
                intervals.insert(k);
            }
        }
        let got = both(&ir, &args);
        for (gv, w) in got.iter().zip(&want) {
            for (x, y) in gv.data.iter().zip(w) {
                assert!(
                    (x - y).abs() <= 1e-6 * (1.0 + y.abs()),
                    "λ={lambda}: {x} vs {y}"
                );
            }
        }
        // The compiled value-and-gradient agrees too.
        let c = g.compile().unwrap();
        let refs: Vec<egrad::Arg> = args.iter().cloned().map(egrad::Arg::Value).collect();
        let (_, grads) = c.value_and_grad(&refs).unwrap();
        for (gv, w) in grads.iter().zip(&got) {
            assert!(
                gv.bits_eq(w)
                    || gv
                        .data
                        .iter()
                        .zip(&w.data)
                        .all(|(a, b)| (a - b).abs() < 1e-12)
            );
        }
    }
    assert!(
        intervals.len() >= 2,
        "checkpoint intervals chosen: {intervals:?}"
    );

    // The checker's own @grad function, forward mode, and a tuple state.
    let d = both(p.ir("drnn").unwrap(), &args);
    for (gv, w) in d.iter().zip(&want) {
        for (x, y) in gv.data.iter().zip(w) {
            assert!((x - y).abs() <= 1e-6 * (1.0 + y.abs()), "{x} vs {y}");
        }
    }
    let mut targs = args.clone();
    targs.push(Value::scalar(DType::F64, 1.0));
    let t = both(p.ir("trnn").unwrap(), &targs)[0].as_scalar();
    assert!(
        (t - want[2][0]).abs() <= 1e-6 * (1.0 + t.abs()),
        "{t} vs {}",
        want[2][0]
    );
    let eargs = vec![
        Value::f64(&[0.5, -1.0, 2.0, 0.25]),
        Value::scalar(DType::F64, 0.9),
    ];
    let g = both(p.ir("dema").unwrap(), &eargs)[0].as_scalar();
    let fd = central(p.ir("ema").unwrap(), &eargs, &[1])[0][0];
    assert!((g - fd).abs() < 1e-6, "{g} vs {fd}");
    // Unrolled (mixed shapes): the sequence is differentiated like any value.
    let margs = vec![
        Value::array(
            DType::F64,
            vec![3, 2],
            vec![0.5, -1.0, 2.0, 0.25, 1.5, 0.75],
        ),
        Value::f64(&[0.3, -0.2]),
    ];
    let g = both(p.ir("dmixed").unwrap(), &margs);
    let fd = central(p.ir("mixed").unwrap(), &margs, &[0, 1]);
    for (gv, w) in g.iter().zip(&fd) {
        for (x, y) in gv.data.iter().zip(w) {
            assert!((x - y).abs() < 1e-6, "{x} vs {y}");
        }
    }
}

fn error_of(src: &str) -> String {
    match Program::parse(src) {
        Ok(_) => panic!("expected an error:\n{src}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn misuse_of_scan_is_a_clear_error() {
    let cases = [
        ("fn f[T](xs: f64[T]) -> f64 = scan(xs, 0.0)", "takes 3 arguments"),
        ("fn f[T](xs: f64[T]) -> f64 = scan(xs, 0.0, s => s)", "`(s, x) => ...`"),
        ("fn f(x: f64) -> f64 = scan(x, 0.0, (s, y) => s + y)", "reads the rows of an array"),
        (
            "fn f[T](xs: f64[T], w: f64) -> f64 = scan(xs, w, (s, x) => s * x)\n@grad(w)\nfn df[T](xs: f64[T], w: f64) -> f64 = f(xs, w)\n@jvp(xs)\nfn g[T](xs: f64[T], w: f64, dxs: f64[T]) -> f64 = df(xs, w)",
            "forward mode through a scan's gradient with respect to its sequence",
        ),
        ("fn f[T](xs: f64[T]) -> f64[T] = scan_all(xs, 0.0)", "`scan_all` takes 3 arguments"),
        ("fn scan_all(x: f64) -> f64 = x", "cannot be redefined"),
        (
            "fn f[T, B](xs: f64[T, B], v: f64[B], k: f32) -> f64 {\n  let (a, c) = scan(xs, (v, k), (s, x) => { let (a, c) = s; (a * x, c) })\n  +/a\n}",
            "cannot carry this state",
        ),
        (
            "fn f(xs: f64[3]) -> f64 = scan(xs, 0.0, (s, x) => (s, x))",
            "keep",
        ),
        ("fn scan(x: f64) -> f64 = x", "cannot be redefined"),
    ];
    for (src, want) in cases {
        let e = error_of(src);
        assert!(e.contains(want), "{src}\n---\n{e}");
    }
}

/// The states of `states` after each step, by a plain loop.
fn states_reference(args: &[Value]) -> Vec<f64> {
    let (xs, s0, w, a) = (&args[0], &args[1], &args[2], args[3].as_scalar());
    let b = s0.data.len();
    let mut s = s0.data.clone();
    let mut out = Vec::new();
    for x in xs.data.chunks(b) {
        for i in 0..b {
            s[i] = (a * s[i] + w.data[i] * x[i] * x[i]).tanh();
        }
        out.extend_from_slice(&s);
    }
    out
}

fn close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (x, y) in got.iter().zip(want) {
        assert!((x - y).abs() <= tol * (1.0 + y.abs()), "{what}: {x} vs {y}");
    }
}

#[test]
fn scan_all_gives_every_state_from_one_loop() {
    let p = program();
    let f = p.ir("states").unwrap();
    // One loop keeping its states: no unrolling, whatever the length.
    let tapes = f
        .stmts
        .iter()
        .filter(|s| matches!(s.op, Op::LoopTape(_, 1, true)))
        .count();
    assert_eq!(tapes, 1, "{f}");
    for (t, b) in [(0, 3), (1, 3), (2, 1), (7, 4), (50, 5)] {
        let args = vals(t, b, 11 + t as u64);
        let got = both(f, &args);
        assert_eq!(got[0].shape, vec![t, b]);
        close(
            &got[0].data,
            &states_reference(&args),
            1e-14,
            &format!("T={t}"),
        );
    }
    // A tuple state with a scalar riding along a vector: two sequences.
    let args = vec![
        Value::array(
            DType::F64,
            vec![3, 2],
            vec![0.5, -1.0, 2.0, 0.25, 1.5, 0.75],
        ),
        Value::f64(&[0.3, -0.2]),
        Value::scalar(DType::F64, 0.9),
    ];
    let got = both(p.ir("pair").unwrap(), &args);
    let (mut v, mut c) = (vec![0.3f64, -0.2], 1.0f64);
    let (mut vs, mut cs) = (Vec::new(), Vec::new());
    for x in args[0].data.chunks(2) {
        let nv: Vec<f64> = v
            .iter()
            .zip(x)
            .map(|(vi, xi)| (vi * c + xi).sin())
            .collect();
        c = c * 0.9 + x.iter().sum::<f64>();
        v = nv;
        vs.extend_from_slice(&v);
        cs.push(c);
    }
    assert_eq!(got[0].shape, vec![3, 2]);
    close(&got[0].data, &vs, 1e-14, "pair: vectors");
    close(&got[1].data, &cs, 1e-14, "pair: scalars");
}

#[test]
fn gradients_with_respect_to_the_sequence_match_finite_differences() {
    let p = program();
    for (loss, grad) in [("rnn", "drnn_xs"), ("per_step", "dper_step")] {
        let f = p.ir(loss).unwrap();
        // T = 0 too: the sequence's gradient is empty, the others exact.
        for (t, b) in [(0, 2), (1, 2), (6, 3), (30, 2)] {
            let args = vals(t, b, 3 + t as u64);
            let want = central(f, &args, &[0, 1, 2, 3]);
            let got = both(p.ir(grad).unwrap(), &args);
            for (i, (gv, w)) in got.iter().zip(&want).enumerate() {
                close(&gv.data, w, 1e-6, &format!("{grad} T={t} gradient {i}"));
            }
            assert_eq!(got[0].shape, vec![t, b]);
            // Every checkpoint choice the optimizer makes gives the same
            // gradient (the walk back with the sequence's cotangent too).
            let mut flags = std::collections::BTreeSet::new();
            for lambda in [0.0, 2.0, 1e6] {
                let opts = Options::default()
                    .function(loss)
                    .wrt(["xs", "s0", "w", "a"])
                    .lambda(lambda)
                    .dim("T", 40)
                    .dim("B", b as u64);
                let g = optimize_gradient(&p, &opts).unwrap_or_else(|e| panic!("{e}"));
                let ir = g.gradient_ir();
                for s in &ir.stmts {
                    if let Op::LoopVjp(_, k, m, true) = s.op {
                        flags.insert((k, m));
                    }
                }
                let got = both(&ir, &args);
                for (i, (gv, w)) in got.iter().zip(&want).enumerate() {
                    close(
                        &gv.data,
                        w,
                        1e-6,
                        &format!("{loss} λ={lambda} T={t} gradient {i}"),
                    );
                }
            }
            assert!(
                flags
                    .iter()
                    .all(|(_, m)| m & egrad::internals::ops::VJP_SEQ != 0),
                "{loss}: every walk back gives the sequence's cotangent: {flags:?}"
            );
            if t == 30 && loss == "rnn" {
                assert!(flags.len() >= 2, "{loss}: checkpoint choices {flags:?}");
            }
        }
    }
    // An integer length: the seed is filled only as far as it seeds.
    let args = vec![
        Value::f64(&[1.0, 2.0, 3.0, 4.0]),
        Value::scalar(DType::F64, 0.7),
    ];
    let want = central(p.ir("short").unwrap(), &args, &[0, 1]);
    for _ in 0..3 {
        let got = both(p.ir("dshort").unwrap(), &args);
        for (i, (gv, w)) in got.iter().zip(&want).enumerate() {
            close(&gv.data, w, 1e-6, &format!("dshort gradient {i}"));
        }
        let got = both(p.ir("dshort_a").unwrap(), &args);
        close(&got[0].data, &want[1], 1e-6, "dshort_a");
    }
    // The tuple state with a scalar leaf.
    let args = vec![
        Value::array(
            DType::F64,
            vec![3, 2],
            vec![0.5, -1.0, 2.0, 0.25, 1.5, 0.75],
        ),
        Value::f64(&[0.3, -0.2]),
        Value::scalar(DType::F64, 0.9),
    ];
    let want = central(p.ir("pair_loss").unwrap(), &args, &[0, 1, 2]);
    let got = both(p.ir("dpair_loss").unwrap(), &args);
    for (i, (gv, w)) in got.iter().zip(&want).enumerate() {
        close(&gv.data, w, 1e-6, &format!("dpair_loss gradient {i}"));
    }
}

#[test]
fn forward_mode_through_every_state_matches_finite_differences() {
    let p = program();
    let f = p.ir("states").unwrap();
    let args = vals(9, 3, 21);
    let ds0 = Value::f64(&[0.5, -1.0, 0.25]);
    let da = 0.75;
    let mut targs = args.clone();
    targs.push(ds0.clone());
    targs.push(Value::scalar(DType::F64, da));
    let got = both(p.ir("tstates").unwrap(), &targs);
    let h = 1e-6;
    let at = |e: f64| {
        let mut a = args.clone();
        for (x, d) in a[1].data.iter_mut().zip(&ds0.data) {
            *x += e * d;
        }
        a[3].data[0] += e * da;
        let refs: Vec<&Value> = a.iter().collect();
        run(f, &refs).unwrap()[0].data.clone()
    };
    let (up, down) = (at(h), at(-h));
    let fd: Vec<f64> = up
        .iter()
        .zip(&down)
        .map(|(u, d)| (u - d) / (2.0 * h))
        .collect();
    close(&got[0].data, &fd, 1e-6, "tstates");
    // With a tangent of the sequence too.
    let src = "fn total[T](xs: f64[T], a: f64) -> f64 {
  let h = scan_all(xs, 0.5, (s, x) => sin(a * s) * x + x)
  +/(h .* h)
}
@jvp(xs, a)
fn dtotal[T](xs: f64[T], a: f64, dxs: f64[T], da: f64) -> f64 = total(xs, a)";
    let q = Program::parse(src).unwrap_or_else(|e| panic!("{e}"));
    for t in [0, 1, 4, 17] {
        let xs: Vec<f64> = (0..t).map(|i| 0.1 * i as f64 - 0.3).collect();
        let dxs: Vec<f64> = (0..t).map(|i| 1.0 - 0.2 * i as f64).collect();
        let args = [
            Value::f64(&xs),
            Value::scalar(DType::F64, 0.7),
            Value::f64(&dxs),
            Value::scalar(DType::F64, 0.5),
        ];
        let got = both(q.ir("dtotal").unwrap(), &args)[0].as_scalar();
        let at = |e: f64| {
            let x: Vec<f64> = xs.iter().zip(&dxs).map(|(v, d)| v + e * d).collect();
            let a = Value::scalar(DType::F64, 0.7 + e * 0.5);
            run(q.ir("total").unwrap(), &[&Value::f64(&x), &a]).unwrap()[0].as_scalar()
        };
        let fd = (at(h) - at(-h)) / (2.0 * h);
        close(&[got], &[fd], 1e-6, &format!("T={t}: dtotal"));
    }
}

/// Reverse over reverse through a scan: `@grad` of `v · ∇_w f` equals
/// forward over reverse (`@jvp` of the gradient) in `w`, and matches
/// central differences in the initial state; JIT equals the interpreter.
#[test]
fn reverse_over_reverse_through_a_scan() {
    let src = "fn f[T, N](xs: f64[T, N], w: f64[N], s0: f64[N]) -> f64 =
  +/scan(xs, s0, (s, x) => tanh(s * w + x * x))
@grad(w)
fn df[T, N](xs: f64[T, N], w: f64[N], s0: f64[N]) -> f64[N] = f(xs, w, s0)
fn g[T, N](xs: f64[T, N], w: f64[N], s0: f64[N], v: f64[N]) -> f64 = +/(df(xs, w, s0) .* v)
@grad(w, s0)
fn dg[T, N](xs: f64[T, N], w: f64[N], s0: f64[N], v: f64[N]) -> (f64[N], f64[N]) = g(xs, w, s0, v)
@jvp(w)
fn fw[T, N](xs: f64[T, N], w: f64[N], s0: f64[N], dw: f64[N]) -> f64[N] = df(xs, w, s0)";
    let p = Program::parse(src).unwrap_or_else(|e| panic!("{e}"));
    for t in [0, 1, 3, 25] {
        let a = vals(t, 2, 40 + t as u64);
        let (xs, s0, w) = (a[0].clone(), a[1].clone(), a[2].clone());
        let v = Value::f64(&[1.0, -2.0]);
        let rr = both(
            p.ir("dg").unwrap(),
            &[xs.clone(), w.clone(), s0.clone(), v.clone()],
        );
        let fr = both(
            p.ir("fw").unwrap(),
            &[xs.clone(), w.clone(), s0.clone(), v.clone()],
        );
        close(&rr[0].data, &fr[0].data, 1e-13, &format!("T={t}: H v"));
        let fd = central(p.ir("g").unwrap(), &[xs, w, s0, v], &[2]);
        close(&rr[1].data, &fd[0], 1e-6, &format!("T={t}: s0"));
    }
}

/// Forward mode with a tangent of the sequence (and of a captured value):
/// one loop over `[state, tangent]` reading `[x ; dx]`, against central
/// differences along the same direction, T = 0 included.
#[test]
fn forward_mode_with_respect_to_the_sequence() {
    let src = "fn rnn[T, B](xs: f64[T, B], s0: f64[B], w: f64[B], a: f64) -> f64 =
  +/scan(xs, s0, (s, x) => tanh(a * s + w * x * x))
@jvp(xs, a)
fn trnn[T, B](xs: f64[T, B], s0: f64[B], w: f64[B], a: f64, dxs: f64[T, B], da: f64) -> f64 =
  rnn(xs, s0, w, a)
fn sc[T](xs: f64[T], a: f64) -> f64 = scan(xs, 0.5, (s, x) => sin(a * s + x))
@jvp(xs)
fn tsc[T](xs: f64[T], a: f64, dxs: f64[T]) -> f64 = sc(xs, a)";
    let p = Program::parse(src).unwrap_or_else(|e| panic!("{e}"));
    let h = 1e-6;
    for (t, b) in [(0, 2), (1, 3), (9, 2)] {
        let a = vals(t, b, 70 + t as u64);
        let dir = vals(t, b, 90 + t as u64)[0].clone();
        let da = 0.3;
        let mut targs = a.clone();
        targs.push(dir.clone());
        targs.push(Value::scalar(DType::F64, da));
        let got = both(p.ir("trnn").unwrap(), &targs)[0].as_scalar();
        let at = |e: f64| {
            let mut x = a.clone();
            for (v, d) in x[0].data.iter_mut().zip(&dir.data) {
                *v += e * d;
            }
            x[3].data[0] += e * da;
            let refs: Vec<&Value> = x.iter().collect();
            run(p.ir("rnn").unwrap(), &refs).unwrap()[0].as_scalar()
        };
        let fd = (at(h) - at(-h)) / (2.0 * h);
        close(&[got], &[fd], 1e-6, &format!("T={t}: rnn"));
        // A vector sequence: scalar rows.
        let xs = Value::f64(&a[0].data[..t]);
        let dxs = Value::f64(&dir.data[..t]);
        let got = both(
            p.ir("tsc").unwrap(),
            &[xs.clone(), Value::scalar(DType::F64, 0.7), dxs.clone()],
        )[0]
        .as_scalar();
        let at = |e: f64| {
            let x: Vec<f64> = xs
                .data
                .iter()
                .zip(&dxs.data)
                .map(|(v, d)| v + e * d)
                .collect();
            run(
                p.ir("sc").unwrap(),
                &[&Value::f64(&x), &Value::scalar(DType::F64, 0.7)],
            )
            .unwrap()[0]
                .as_scalar()
        };
        let fd = (at(h) - at(-h)) / (2.0 * h);
        close(&[got], &[fd], 1e-6, &format!("T={t}: sc"));
    }
}
