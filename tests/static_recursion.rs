//! A function with static parameters may call itself with other static
//! values, stopped by a static `if` (the recursion is unrolled while the
//! function is specialized). Values, gradients against central finite
//! differences, JIT against the interpreter, and the errors for a
//! recursion that does not stop or goes through a function without static
//! parameters.

use egrad::internals::backend::{compile, BackendOptions};
use egrad::internals::ir::interp::run;
use egrad::internals::types::value::Value;
use egrad::Program;

const PROGRAMS: &str = r#"
// x + x^2 + ... + x^k, for every element.
fn powsum[N](static k: i64, x: f64[N]) -> f64[N] =
  if k == 0 { 0 * x } else { pow(x, k) + powsum(k - 1, x) }
fn p5[N](x: f64[N]) -> f64 = +/powsum(5, x)
@grad(x)
fn dp5[N](x: f64[N]) -> f64[N] = +/powsum(5, x)

// log Gamma(a) for a half-integer a, at compile time.
fn lgamma_half(static a: f64) -> f64 =
  if a == 1 { 0 } else if a == 0.5 { 0.5 * log(3.141592653589793) }
  else { log(a - 1) + lgamma_half(a - 1) }
fn shifted(x: f64) -> f64 = x + lgamma_half(5.5) + lgamma_half(7)

// Two functions calling each other.
fn even(static k: i64, x: f64) -> f64 = if k == 0 { x } else { sin(odd(k - 1, x)) }
fn odd(static k: i64, x: f64) -> f64 = if k == 0 { x } else { x * even(k - 1, x) }
fn alternate(x: f64) -> f64 = even(9, x)
@grad(x)
fn dalternate(x: f64) -> f64 = even(9, x)

// Recursion over the rows of an array, with a run-time array and a static
// row: sum of row r times r + 1.
fn weighted[M, K](static r: i64, X: f64[M, K]) -> f64 =
  if r < 0 { 0 } else { (r + 1) * +/X[r] + weighted(r - 1, X) }
fn w3[K](X: f64[3, K]) -> f64 = weighted(2, X)
@grad(X)
fn dw3[K](X: f64[3, K]) -> f64[3, K] = weighted(2, X)
"#;

fn program() -> Program {
    Program::parse(PROGRAMS).unwrap_or_else(|e| panic!("{e}"))
}

fn call(p: &Program, name: &str, args: &[Value]) -> Vec<Value> {
    let f = p.ir(name).unwrap();
    let refs: Vec<&Value> = args.iter().collect();
    let interp = run(f, &refs).unwrap();
    let native = compile(f, &BackendOptions::default()).unwrap();
    let jit = native.call(&refs).unwrap();
    for (a, b) in interp.iter().zip(&jit) {
        assert!(
            a.bits_eq(b),
            "{name}: JIT {b} differs from the interpreter {a}"
        );
    }
    interp
}

/// Central finite differences of the scalar function `name` in argument 0.
fn fd(p: &Program, name: &str, args: &[Value]) -> Vec<f64> {
    let h = 1e-6;
    (0..args[0].data.len())
        .map(|i| {
            let mut up = args.to_vec();
            let mut down = args.to_vec();
            up[0].data[i] += h;
            down[0].data[i] -= h;
            let f = |a: &[Value]| call(p, name, a)[0].as_scalar();
            (f(&up) - f(&down)) / (2.0 * h)
        })
        .collect()
}

fn close(got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "{got:?} vs {want:?}"
        );
    }
}

#[test]
fn recursion_through_static_values_computes_and_differentiates() {
    let p = program();
    let x = Value::f64(&[0.5, -1.25, 2.0]);
    let y = call(&p, "p5", std::slice::from_ref(&x))[0].as_scalar();
    let want: f64 = x
        .data
        .iter()
        .map(|v| (1..=5).map(|k| v.powi(k)).sum::<f64>())
        .sum();
    assert!((y - want).abs() < 1e-12, "{y} vs {want}");
    let g = call(&p, "dp5", std::slice::from_ref(&x));
    close(&g[0].data, &fd(&p, "p5", &[x]), 1e-7);

    let s = call(
        &p,
        "shifted",
        &[Value::scalar(egrad::internals::types::DType::F64, 0.0)],
    );
    // lgamma(5.5) + lgamma(7) = ln(52.34277778455352) + ln(720)
    let want = 52.34277778455352f64.ln() + 720f64.ln();
    assert!(
        (s[0].as_scalar() - want).abs() < 1e-12,
        "{} vs {want}",
        s[0]
    );

    let x = Value::scalar(egrad::internals::types::DType::F64, 0.7);
    let g = call(&p, "dalternate", std::slice::from_ref(&x));
    close(&g[0].data, &fd(&p, "alternate", &[x]), 1e-7);

    let m = Value::array(
        egrad::internals::types::DType::F64,
        vec![3, 2],
        vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
    );
    assert_eq!(
        call(&p, "w3", std::slice::from_ref(&m))[0].as_scalar(),
        3.0 + 14.0 + 33.0
    );
    let g = call(&p, "dw3", std::slice::from_ref(&m));
    assert_eq!(g[0].data, vec![1.0, 1.0, 2.0, 2.0, 3.0, 3.0]);
    close(&g[0].data, &fd(&p, "w3", &[m]), 1e-7);
}

fn error_of(src: &str) -> String {
    match Program::parse(src) {
        Ok(_) => panic!("expected an error for:\n{src}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_recursion_that_does_not_stop_is_an_error_at_the_depth_limit() {
    let e = error_of(
        "fn forever(static k: i64, x: f64) -> f64 = forever(k + 1, x)\n\
         fn start(x: f64) -> f64 = forever(0, x)\n",
    );
    assert!(
        e.contains("specialized 64 calls deep (here with k = 64)"),
        "{e}"
    );
    assert!(e.contains("stop at a static `if`"), "{e}");
    // The same static values again also never stop.
    let e = error_of(
        "fn same(static k: i64, x: f64) -> f64 = if k > 0 { same(k, x) } else { x }\n\
         fn start(x: f64) -> f64 = same(1, x)\n",
    );
    assert!(e.contains("calls deep"), "{e}");
}

#[test]
fn recursion_without_static_parameters_is_still_an_error() {
    let e = error_of("fn f(x: f64) -> f64 = f(x) + 1\n");
    assert!(e.contains("`f` calls itself"), "{e}");
    // Through a function that has static parameters: `plain` has none, so
    // it would have to be lowered before itself.
    let e = error_of(
        "fn plain(x: f64) -> f64 = helper(1, x)\n\
         fn helper(static k: i64, x: f64) -> f64 = plain(x)\n",
    );
    assert!(e.contains("`plain` calls itself"), "{e}");
    assert!(e.contains("only a function with static parameters"), "{e}");
}
