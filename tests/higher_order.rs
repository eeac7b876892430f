//! Derivatives of order 1, 2 and 3 through every kind of loop, against
//! central differences of the derivative one order below.
//!
//! For each loop kind — unrolled (a short static count), a taped loop (a
//! long static count), a run-time count, `iterate_until` and `scan` — the
//! primal `f(x, a, ...)` is differentiated as
//!
//! - `g1 = @grad(a) f` and `g1xa = @grad(x, a) f` (order 1),
//! - `g2 = @grad(x, a) g1` (reverse over reverse) and `h2 = @jvp(x, a)
//!   g1` (forward over reverse) (order 2),
//! - `g3 = @grad(x, a) h2` (reverse over forward over reverse) and
//!   `r3 = @grad(x, a) r2` with `r2 = @grad(a) g1` (order 3).
//!
//! Each order-k function is checked with `common::check_gradient` against
//! central differences of its order-(k-1) function: as the checker made it,
//! optimized at λ = 0 (taped) and λ = 1e6 (checkpoints and recomputation
//! where the cost model picks them), native code against the interpreter.
//! An order egrad does not support must be refused with an `unsupported`
//! error naming the limit, never give a number: `g3` through a run-time
//! loop used to come out as exactly 0 (issue 32). `r3` through a loop is
//! such a refusal today (see the test).

mod common;

use common::check_gradient;
use egrad::internals::types::DType;
use egrad::{ErrorKind, Program, Value};

/// The loop kinds: the primal's header and body, and its extra arguments
/// after `x` and `a` (types in the header, values given to the check).
struct Kind {
    name: &'static str,
    /// Parameters after `x: f64, a: f64`, as written (with a leading comma).
    params: &'static str,
    /// Size parameters of the functions, as written (`[T]` or empty).
    sizes: &'static str,
    /// The primal's body, reading `x`, `a` and the extra parameters.
    body: &'static str,
    /// The extra arguments' values.
    extra: fn() -> Vec<Value>,
}

fn no_extra() -> Vec<Value> {
    Vec::new()
}

fn count_extra() -> Vec<Value> {
    vec![Value::scalar(DType::I64, 700.0)]
}

fn vector_extra() -> Vec<Value> {
    vec![
        Value::array(DType::F64, vec![3], vec![0.3, -0.2, 0.5]),
        Value::scalar(DType::I64, 700.0),
    ]
}

fn seq_extra() -> Vec<Value> {
    let xs: Vec<f64> = (0..400).map(|i| 0.3 * ((i as f64) * 0.37).sin()).collect();
    vec![Value::array(DType::F64, vec![400], xs)]
}

const STEP: &str = "s + 0.002 * (tanh(a * s) - s * s * a)";

fn kinds() -> Vec<Kind> {
    vec![
        Kind {
            name: "unrolled",
            params: "",
            sizes: "",
            body: "iterate(6, x, s => s + 0.2 * (tanh(a * s) - s * s * a))",
            extra: no_extra,
        },
        Kind {
            name: "taped loop (static count)",
            params: "",
            sizes: "",
            body: "iterate(2500, x, s => STEP)",
            extra: no_extra,
        },
        Kind {
            name: "run-time count",
            params: ", n: i64",
            sizes: "",
            body: "iterate(n, x, s => STEP)",
            extra: count_extra,
        },
        Kind {
            name: "iterate_until",
            params: "",
            sizes: "",
            body: "iterate_until(2500, x, s => s > 0.9, s => STEP)",
            extra: no_extra,
        },
        Kind {
            name: "scan",
            params: ", xs: f64[T]",
            sizes: "[T]",
            body: "scan(xs, x, (s, e) => s + 0.01 * (tanh(a * s + e) - s * s * a))",
            extra: seq_extra,
        },
        Kind {
            name: "vector state reading a vector, run-time count",
            params: ", w: f64[N], n: i64",
            sizes: "[N]",
            body: "{\n  let v = iterate(n, w * x, s => s + 0.002 * (tanh(s * a) - s .* s .* w))\n  +/(v .* v)\n}",
            extra: vector_extra,
        },
    ]
}

/// The extra parameters' names, as arguments of a call.
fn call_args(params: &str) -> String {
    params
        .split(',')
        .filter_map(|p| p.split(':').next())
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(|n| format!(", {n}"))
        .collect()
}

/// The program for one kind: `f`, `g1`, `g1xa`, `g2`, `h2`, `g3`, `r2`,
/// `r3`.
fn source(k: &Kind) -> String {
    let (ps, zs) = (k.params, k.sizes);
    let cs = call_args(ps);
    let body = k.body.replace("STEP", STEP);
    format!(
        "fn f{zs}(x: f64, a: f64{ps}) -> f64 = {body}\n\
         @grad(a)\nfn g1{zs}(x: f64, a: f64{ps}) -> f64 = f(x, a{cs})\n\
         @grad(x, a)\nfn g1xa{zs}(x: f64, a: f64{ps}) -> (f64, f64) = f(x, a{cs})\n\
         @grad(x, a)\nfn g2{zs}(x: f64, a: f64{ps}) -> (f64, f64) = g1(x, a{cs})\n\
         @jvp(x, a)\nfn h2{zs}(x: f64, a: f64{ps}, dx: f64, da: f64) -> f64 = g1(x, a{cs})\n\
         @grad(x, a)\nfn g3{zs}(x: f64, a: f64{ps}, dx: f64, da: f64) -> (f64, f64) = h2(x, a{cs}, dx, da)\n\
         @grad(a)\nfn r2{zs}(x: f64, a: f64{ps}) -> f64 = g1(x, a{cs})\n\
         @grad(x, a)\nfn r3{zs}(x: f64, a: f64{ps}) -> (f64, f64) = r2(x, a{cs})\n"
    )
}

/// The program with only the functions up to `upto` (in the order of
/// [`source`]'s lines), so that an order egrad refuses does not hide the
/// others.
fn prefix(src: &str, upto: &str) -> String {
    let mut out = String::new();
    for l in src.lines() {
        out.push_str(l);
        out.push('\n');
        if l.starts_with(&format!("fn {upto}[")) || l.starts_with(&format!("fn {upto}(")) {
            break;
        }
    }
    out
}

/// Check `grad` (differentiating `x` and `a`) against central differences
/// of `below`, or accept an `unsupported` refusal; returns whether it was
/// checked.
fn check(src: &str, grad: &str, below: &str, args: &[Value], what: &str) -> bool {
    match Program::parse(&prefix(src, grad)) {
        Ok(p) => {
            check_gradient(&p, grad, below, 2, args, what);
            true
        }
        Err(e) => {
            assert_eq!(
                e.kind(),
                ErrorKind::Unsupported,
                "{what}: refused, but not as unsupported:\n{e}"
            );
            let text = e.to_string();
            assert!(text.contains(grad), "{what}: {text}");
            assert!(text.contains("@jvp` of the gradient"), "{what}: {text}");
            false
        }
    }
}

#[test]
fn every_order_up_to_three_through_every_loop_kind() {
    let mut refused = Vec::new();
    for k in kinds() {
        let src = source(&k);
        let mut args = vec![
            Value::scalar(DType::F64, 0.3),
            Value::scalar(DType::F64, 0.7),
        ];
        args.extend((k.extra)());
        let mut with_da = args.clone();
        with_da.push(Value::scalar(DType::F64, -0.4));
        with_da.push(Value::scalar(DType::F64, 0.6));
        let what = |f: &str| format!("{} ({f})", k.name);
        // Order 1: `@grad(x, a) f` against f (`g1` is its second part).
        let p = Program::parse(&prefix(&src, "g1xa")).unwrap_or_else(|e| panic!("{e}"));
        check_gradient(&p, "g1xa", "f", 2, &args, &what("g1xa"));
        // Orders 2 and 3.
        for (grad, below, a) in [
            ("g2", "g1", &args),
            ("h2", "g1", &args),
            ("g3", "h2", &with_da),
            ("r3", "r2", &args),
        ] {
            if grad == "h2" {
                // A JVP: its value is the derivative of g1 along da.
                let p = Program::parse(&prefix(&src, "h2")).unwrap_or_else(|e| panic!("{e}"));
                common::check_jvp(&p, "h2", "g1", 2, &args, &what("h2"));
                continue;
            }
            if !check(&src, grad, below, a, &what(grad)) {
                refused.push(what(grad));
            }
        }
    }
    // Reverse mode three times through a loop is a documented limit (the
    // reverse of the second-order walk would differentiate a scan with
    // respect to its sequence, and forward mode does not go through a
    // tape's walk either); the error's note points to `@grad` of `@jvp`
    // of `@grad` (`g3`), which goes. Any other refusal is new.
    let expected: Vec<String> = kinds()
        .iter()
        .filter(|k| k.name != "unrolled")
        .map(|k| format!("{} (r3)", k.name))
        .collect();
    assert_eq!(refused, expected);
}

/// The docs' example (`docs/language.md`, `@jvp` section): `egrad fdcheck`
/// on `hsettle` gave 0 for `x` and `a` against finite differences of
/// -0.61 and -3.13.
#[test]
fn hsettle_gradient_is_not_zero() {
    let src = "fn settle(x: f64, a: f64) -> f64 = iterate(3000, x, s => s + 0.001 * (tanh(a * s) - s * s))\n\
               @grad(a)\nfn dsettle(x: f64, a: f64) -> f64 = settle(x, a)\n\
               @jvp(a)\nfn hsettle(x: f64, a: f64, da: f64) -> f64 = dsettle(x, a)\n\
               @grad(x, a, da)\nfn dh(x: f64, a: f64, da: f64) -> (f64, f64, f64) = hsettle(x, a, da)\n";
    let p = Program::parse(src).unwrap_or_else(|e| panic!("{e}"));
    let args = [
        Value::scalar(DType::F64, 0.3),
        Value::scalar(DType::F64, 0.7),
        Value::scalar(DType::F64, 1.0),
    ];
    check_gradient(&p, "dh", "hsettle", 3, &args, "hsettle");
}
