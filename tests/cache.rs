//! The compile cache: a new size reuses the compiled code, a changed static
//! argument or λ recompiles and the recompile names the component, and
//! `egrad explain` prints the key and the residual choices.

use egrad::internals::cache::{CacheKey, CompileCache};
use egrad::{Arg, Options, Program};
use std::process::Command;

fn rosenbrock_grad(x: &[f64]) -> Vec<f64> {
    let n = x.len();
    let mut g = vec![0.0; n];
    for i in 0..n - 1 {
        let t = x[i + 1] - x[i] * x[i];
        g[i] += -400.0 * t * x[i] - 2.0 * (1.0 - x[i]);
        g[i + 1] += 200.0 * t;
    }
    g
}

fn close(a: &[f64], b: &[f64]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() <= 1e-9 * (1.0 + y.abs()), "{x} vs {y}");
    }
}

#[test]
fn same_gradient_hits_and_serves_every_size() {
    let program = Program::from_file("examples/suite/rosenbrock.eg").unwrap();
    let opts = Options::default().function("rosenbrock_grad");
    let mut cache = CompileCache::new();
    let first = cache.gradient(&program, &opts).unwrap();
    assert_eq!((cache.hits(), cache.misses()), (0, 1));
    let again = cache.gradient(&program, &opts).unwrap();
    assert_eq!((cache.hits(), cache.misses()), (1, 1));
    assert!(std::rc::Rc::ptr_eq(&first, &again));
    for n in [5usize, 50] {
        let x: Vec<f64> = (0..n).map(|i| 0.1 * i as f64 - 1.0).collect();
        let g = cache.gradient(&program, &opts).unwrap();
        let grads = g.grad(&[Arg::f64(&x)]).unwrap();
        close(&grads[0].data, &rosenbrock_grad(&x));
    }
    assert_eq!(cache.misses(), 1, "a new size must not recompile");
    assert_eq!(cache.len(), 1);
    assert!(cache.recompiles().is_empty());
}

const POWER: &str = "fn power[N](static n: i64, x: f64[N]) -> f64 {
  let p = iterate(n, 1, p => p .* x)
  +/p
}
";

#[test]
fn changed_static_value_recompiles_and_is_named() {
    let p3 = Program::parse(&format!("{POWER}fn p[N](x: f64[N]) -> f64 = power(3, x)\n")).unwrap();
    let p4 = Program::parse(&format!("{POWER}fn p[N](x: f64[N]) -> f64 = power(4, x)\n")).unwrap();
    let opts = Options::default();
    let mut cache = CompileCache::new();
    let x = [1.5f64, 2.0];
    let f3 = cache.function(&p3, "p", &opts).unwrap();
    let f4 = cache.function(&p4, "p", &opts).unwrap();
    assert_eq!(cache.misses(), 2);
    let (k3, k4) = (
        CacheKey::function(&p3, "p", &opts).unwrap(),
        CacheKey::function(&p4, "p", &opts).unwrap(),
    );
    assert_ne!(k3, k4);
    assert_eq!(k3.statics, vec!["power(n = 3)".to_string()]);
    assert_eq!(k4.statics, vec!["power(n = 4)".to_string()]);
    let r = cache.last_recompile().expect("a recompile of `p`");
    assert_eq!(r.function, "p");
    let changed: Vec<&str> = r.changes.iter().map(|c| c.component).collect();
    assert_eq!(changed, vec!["ir hash", "static values"], "{r}");
    assert!(
        r.to_string().contains("power(n = 3) -> power(n = 4)"),
        "{r}"
    );
    // Both programs stay cached and correct.
    let v = egrad::internals::types::value::Value::f64(&x);
    let out3 = f3.call(&[&v]).unwrap();
    let out4 = f4.call(&[&v]).unwrap();
    assert_eq!(out3[0].as_scalar(), 1.5f64.powi(3) + 8.0);
    assert_eq!(out4[0].as_scalar(), 1.5f64.powi(4) + 16.0);
    cache.function(&p3, "p", &opts).unwrap();
    assert_eq!((cache.hits(), cache.misses()), (1, 2));
}

/// Backend options change the machine code: a different key, named.
#[test]
fn changed_backend_option_recompiles_and_is_named() {
    let program = Program::from_file("examples/suite/mlp2.eg").unwrap();
    let opts = Options::default().function("mlp2_grad");
    let mut cache = CompileCache::new();
    cache.gradient(&program, &opts).unwrap();
    let mut gemm = opts.clone();
    gemm.backend.gemm = false;
    cache.gradient(&program, &gemm).unwrap();
    assert_eq!(cache.misses(), 2);
    let r = cache.last_recompile().unwrap();
    assert_eq!(r.changes.len(), 1, "{r}");
    assert_eq!(r.changes[0].component, "backend");
    assert_eq!(r.changes[0].before, "simd=true gemm=true wide=true");
    assert_eq!(r.changes[0].now, "simd=true gemm=false wide=true");
    // The same options again: a hit.
    cache.gradient(&program, &gemm).unwrap();
    assert_eq!((cache.hits(), cache.misses()), (1, 2));
}

#[test]
fn changed_lambda_is_named() {
    let program = Program::from_file("examples/suite/rosenbrock.eg").unwrap();
    let opts = Options::default().function("rosenbrock_grad");
    let mut cache = CompileCache::new();
    cache.gradient(&program, &opts.clone().lambda(0.0)).unwrap();
    cache
        .gradient(&program, &opts.clone().lambda(100.0))
        .unwrap();
    assert_eq!(cache.misses(), 2);
    let r = cache.last_recompile().unwrap();
    assert_eq!(r.changes.len(), 1, "{r}");
    assert_eq!(r.changes[0].component, "lambda");
    assert_eq!(r.changes[0].before, "0.0");
    assert_eq!(r.changes[0].now, "100.0");
}

#[test]
fn explain_prints_the_key_and_residuals() {
    let out = Command::new(env!("CARGO_BIN_EXE_egrad"))
        .args([
            "explain",
            "examples/suite/rosenbrock.eg",
            "--fn",
            "rosenbrock_grad",
            "--lambda-before",
            "0",
        ])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    for want in [
        "function: rosenbrock_grad",
        "ir hash: ",
        "static values: none",
        "parameters: x: f64 rank 1",
        "lambda: ",
        "limits: nodes=",
        "fast-math: false",
        "rules: bundled",
        "transform: grad wrt [x]",
        "cpu features: ",
        "x: f64, rank 1, sizes and values dynamic",
        "residuals (λ = ",
        "changed lambda: 0.0 -> ",
    ] {
        assert!(stdout.contains(want), "missing `{want}` in:\n{stdout}");
    }
    assert!(
        stdout.contains(" stored (") || stdout.contains(" recomputed ("),
        "no residual choice in:\n{stdout}"
    );
    // A template cannot be explained on its own: a clear error, no panic.
    let out = Command::new(env!("CARGO_BIN_EXE_egrad"))
        .args(["explain", "examples/suite/power_static.eg", "--fn", "power"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&out.stderr).contains("static"));
    // A specialization names its static argument.
    let out = Command::new(env!("CARGO_BIN_EXE_egrad"))
        .args([
            "explain",
            "examples/suite/power_static.eg",
            "--fn",
            "power_static_grad",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(stdout.contains("power(n = 20)"), "{stdout}");
}
