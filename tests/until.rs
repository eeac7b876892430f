//! `iterate_until` as a loop: a run-time bound (`n: i64`) or a long static
//! one gives an IR loop whose body freezes the state once the stop
//! condition holds, and which stops stepping at the first step that
//! changes no bit of the state (`Loop::settles`). Values and gradients
//! (reverse with a tape of states or checkpoints, forward) are checked
//! against finite differences, the interpreter and the unrolled form.

mod common;

use common::{assert_jit_equals_interpreter, check_gradient, check_jvp, eval, prog};
use egrad::internals::ir::Function;
use egrad::internals::ops::Op;
use egrad::internals::types::value::Value;
use egrad::internals::types::DType;

const SRC: &str = r#"
fn newton(a: f64, n: i64) -> f64 =
  iterate_until(n, a, s => abs(s * s - a) < 1e-12, s => 0.5 * (s + a / s))
@grad(a)
fn droot(a: f64, n: i64) -> f64 = newton(a, n)
fn newton30(a: f64) -> f64 =
  iterate_until(30, a, s => abs(s * s - a) < 1e-12, s => 0.5 * (s + a / s))

// Each element stops on its own (a mask of the state's shape).
fn settle[N](x: f64[N], w: f64, n: i64) -> f64 =
  +/iterate_until(n, x, s => s < 0.01, s => s * w)
@grad(x, w)
fn dsettle[N](x: f64[N], w: f64, n: i64) -> (f64[N], f64) = settle(x, w, n)
@jvp(x, w)
fn jsettle[N](x: f64[N], w: f64, n: i64, dx: f64[N], dw: f64) -> f64 = settle(x, w, n)

// A tuple state and a scalar condition; a long static bound.
fn orbit(a: f64, b: f64) -> f64 {
  let (p, q) = iterate_until(20000, (a, b), (p, q) => p * p + q * q > 4.0,
                             (p, q) => (p + 0.001 * q, q - 0.001 * p * a))
  p + q
}
@grad(a, b)
fn dorbit(a: f64, b: f64) -> (f64, f64) = orbit(a, b)

fn settle32[N](x: f32[N], w: f32, n: i64) -> f32 =
  +/iterate_until(n, x, s => s < 0.01, s => s * w)
"#;

fn f64s(xs: &[f64]) -> Value {
    Value::array(DType::F64, vec![xs.len()], xs.to_vec())
}

fn count(n: u64) -> Value {
    Value::scalar(DType::I64, n as f64)
}

/// The loops of `f`'s IR that settle.
fn settling_loops(f: &Function) -> usize {
    f.loops.iter().filter(|l| l.settles).count()
}

#[test]
fn a_run_time_bound_is_a_loop_that_settles() {
    let p = prog(SRC);
    for name in ["newton", "settle", "orbit", "settle32"] {
        let f = p.ir(name).unwrap();
        assert_eq!(settling_loops(f), 1, "{f}");
        assert!(f.stmts.iter().any(|s| matches!(s.op, Op::Loop(..))), "{f}");
    }
    // A short static bound is still unrolled.
    assert!(p.ir("newton30").unwrap().loops.is_empty());
    // The IR text keeps the flag.
    let f = p.ir("settle").unwrap();
    let text = f.to_string();
    assert!(text.contains(" settles {"), "{text}");
    let back = egrad::internals::ir::parse_functions(&text).unwrap();
    assert_eq!(back[0].to_string(), text);
}

#[test]
fn values_equal_the_unrolled_steps_and_the_jit() {
    let p = prog(SRC);
    for a in [2.0, 0.3, 1e6] {
        // The loop with a run-time bound of 30 gives the unrolled
        // cascade's bits.
        let want = eval(p.ir("newton30").unwrap(), &[Value::scalar(DType::F64, a)]);
        for n in [30, 1000, 1 << 40] {
            let args = [Value::scalar(DType::F64, a), count(n)];
            let got = eval(p.ir("newton").unwrap(), &args);
            assert!(got[0].bits_eq(&want[0]), "a={a} n={n}: {got:?} vs {want:?}");
            assert_jit_equals_interpreter(p.ir("newton").unwrap(), &args, "newton");
        }
        // Fewer steps than it takes: stopped by the bound.
        let args = [Value::scalar(DType::F64, a), count(2)];
        assert_jit_equals_interpreter(p.ir("newton").unwrap(), &args, "newton n=2");
    }
    let x = f64s(&[1.0, 0.5, 2.0, 0.001, 0.02]);
    for n in [0, 1, 5, 44, 100_000] {
        let args = [x.clone(), Value::scalar(DType::F64, 0.9), count(n)];
        assert_jit_equals_interpreter(p.ir("settle").unwrap(), &args, "settle");
        // Element k was multiplied min(n, steps to fall below 0.01) times.
        let got = eval(p.ir("settle").unwrap(), &args)[0].as_scalar();
        let want: f64 = x
            .data
            .iter()
            .map(|&v| {
                let mut s = v;
                for _ in 0..n {
                    if s < 0.01 {
                        break;
                    }
                    s *= 0.9;
                }
                s
            })
            .sum();
        assert_eq!(got, want, "n={n}");
    }
    let x32 = Value::array(DType::F32, vec![3], vec![1.0, 0.5, 2.0]);
    let args = [x32, Value::scalar(DType::F32, 0.75), count(1000)];
    assert_jit_equals_interpreter(p.ir("settle32").unwrap(), &args, "settle32");
    for (a, b) in [(0.5, 0.0), (1.9, 0.1), (0.1, 0.1)] {
        let args = [Value::scalar(DType::F64, a), Value::scalar(DType::F64, b)];
        assert_jit_equals_interpreter(p.ir("orbit").unwrap(), &args, "orbit");
    }
}

#[test]
fn gradients_hold_through_the_steps_taken() {
    let p = prog(SRC);
    for a in [2.0, 0.3] {
        let args = [Value::scalar(DType::F64, a), count(1000)];
        check_gradient(&p, "droot", "newton", 1, &args, &format!("droot a={a}"));
    }
    for n in [3, 30, 1000] {
        let args = [
            f64s(&[1.0, 0.5, 2.0, 0.03]),
            Value::scalar(DType::F64, 0.9),
            count(n),
        ];
        check_gradient(&p, "dsettle", "settle", 2, &args, &format!("dsettle n={n}"));
        check_jvp(&p, "jsettle", "settle", 2, &args, &format!("jsettle n={n}"));
    }
    let args = [
        Value::scalar(DType::F64, 0.7),
        Value::scalar(DType::F64, 0.2),
    ];
    check_gradient(&p, "dorbit", "orbit", 2, &args, "dorbit");
}

#[test]
fn a_bound_must_be_an_integer() {
    let e = common::err(
        "fn f(x: f64, n: f64) -> f64 = iterate_until(n, x, s => s > 1.0, s => s * 2.0)",
    );
    assert!(e.contains("count of `iterate_until`"), "{e}");
}
