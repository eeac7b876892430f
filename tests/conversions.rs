//! Conversions between `f32` and `f64` (`f32(x)`, `f64(x)`): values round
//! as Rust's `as` does, native code gives the interpreter's bits (SIMD on
//! and off; a tree that converts runs in scalar code), and the derivative
//! of a conversion is the conversion back, in reverse mode, forward mode,
//! the second order and every optimized program.

mod common;

use common::{arr, eval, prog, run_both};
use egrad::internals::pipeline::{optimize_gradient, optimize_ir, Options};
use egrad::internals::types::DType;
use egrad::Value;

const SRC: &str = r#"
fn narrowed[N](x: f64[N]) -> f32[N] = f32(x)
fn widened[N](x: f32[N]) -> f64[N] = f64(x) * 0.1
fn mixed[N](x: f32[N], y: f64[N]) -> f64 = +/(f64(sin(x)) .* y) + +/f64(x * x)
fn round_trip[N](x: f64[N]) -> f64 = +/(f64(f32(x) * f32(x)) * x)
fn inner[N](x: f64[N]) -> f64 = +/f64(exp(f32(x) * 0.5))
fn product[N](a: f32[N, N], b: f64[N, N]) -> f64 = +/flatten(matmul(f64(a), b) * 0.5)
@grad(x)
fn dround_trip[N](x: f64[N]) -> f64[N] = round_trip(x)
@grad(x, y)
fn dmixed[N](x: f32[N], y: f64[N]) -> (f32[N], f64[N]) = mixed(x, y)
@grad(x)
fn dinner[N](x: f64[N]) -> f64[N] = inner(x)
@grad(a, b)
fn dproduct[N](a: f32[N, N], b: f64[N, N]) -> (f32[N, N], f64[N, N]) = product(a, b)
@jvp(x)
fn inner_along[N](x: f64[N], dx: f64[N]) -> f64 = inner(x)
fn inner_dot[N](x: f64[N], v: f64[N]) -> f64 = +/(dinner(x) .* v)
@grad(x)
fn hvp[N](x: f64[N], v: f64[N]) -> f64[N] = inner_dot(x, v)
"#;

/// Empty, one, around the vector widths (two `f64`, four `f32` lanes),
/// primes and a large one.
const SIZES: [usize; 9] = [0, 1, 2, 3, 4, 5, 7, 9, 257];

/// `v` rounded to `f32`, as an `f32` array.
fn to_f32(v: &Value) -> Value {
    let data = v.data.iter().map(|&x| f64::from(x as f32)).collect();
    Value::array(DType::F32, v.shape.clone(), data)
}

/// `x` spread over several binades, so that rounding to `f32` moves it.
fn wide(n: usize, seed: u64) -> Value {
    let mut v = arr(&[n], seed);
    for (k, x) in v.data.iter_mut().enumerate() {
        *x = *x * 3.0 + 1e-3 * k as f64 + 1.0 / 3.0;
    }
    v
}

#[test]
fn conversions_round_as_rust_and_native_code_gives_the_interpreters_bits() {
    let p = prog(SRC);
    for (s, &n) in SIZES.iter().enumerate() {
        let seed = s as u64;
        let x = wide(n, seed);
        let x32 = to_f32(&arr(&[n], seed + 100));
        let y = arr(&[n], seed + 200);
        let got = run_both(&p, "narrowed", std::slice::from_ref(&x)).unwrap();
        assert_eq!(got[0].dtype, DType::F32);
        for (g, w) in got[0].data.iter().zip(&x.data) {
            assert_eq!(g.to_bits(), f64::from(*w as f32).to_bits(), "f32({w})");
        }
        let got = run_both(&p, "widened", std::slice::from_ref(&x32)).unwrap();
        for (g, w) in got[0].data.iter().zip(&x32.data) {
            assert_eq!(g.to_bits(), (w * 0.1).to_bits(), "f64({w}) * 0.1");
        }
        for f in ["mixed", "dmixed"] {
            run_both(&p, f, &[x32.clone(), y.clone()]).unwrap();
        }
        for f in ["round_trip", "dround_trip", "inner", "dinner"] {
            run_both(&p, f, std::slice::from_ref(&x)).unwrap();
        }
        run_both(&p, "inner_along", &[x.clone(), y.clone()]).unwrap();
        run_both(&p, "hvp", &[x.clone(), y.clone()]).unwrap();
        if n <= 9 {
            let a = to_f32(&arr(&[n, n], seed + 300));
            let b = arr(&[n, n], seed + 400);
            for f in ["product", "dproduct"] {
                run_both(&p, f, &[a.clone(), b.clone()]).unwrap();
            }
        }
    }
}

/// The derivative of a conversion is the conversion back: the gradient of
/// `+/(f64(f32(x) * f32(x)) * x)` is `f64(f32(2 * x)) * f32(x)`-shaped
/// exactly, computed here by hand in the same roundings.
#[test]
fn the_derivative_of_a_conversion_is_the_conversion_back() {
    let p = prog(SRC);
    let x = wide(9, 7);
    let got = eval(p.ir("dround_trip").unwrap(), std::slice::from_ref(&x));
    for (g, &xi) in got[0].data.iter().zip(&x.data) {
        let r = xi as f32;
        let sq = f64::from(r * r);
        // d/dx of f64(r * r) * x: sq, plus x times the cotangent of r * r
        // (x, narrowed to f32) through the product, 2 r, widened.
        let through = f64::from((xi as f32) * r + (xi as f32) * r);
        let want = sq + through;
        assert_eq!(g.to_bits(), want.to_bits(), "x = {xi}: {g} vs {want}");
    }
}

/// Central differences of `f` in `f32`'s steps (its values move in them),
/// per element of parameter 0.
fn f32_differences(f: &egrad::Function, args: &[Value]) -> Vec<f64> {
    let run = |a: &[Value]| {
        let refs: Vec<&Value> = a.iter().collect();
        egrad::internals::ir::interp::run(f, &refs).unwrap()[0].as_scalar()
    };
    (0..args[0].len())
        .map(|k| {
            let x = args[0].data[k];
            let h = 5e-3 * x.abs().max(1.0);
            let mut up = args.to_vec();
            up[0].data[k] = args[0].dtype.round(x + h);
            let mut down = args.to_vec();
            down[0].data[k] = args[0].dtype.round(x - h);
            (run(&up) - run(&down)) / (up[0].data[k] - down[0].data[k])
        })
        .collect()
}

fn assert_near(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "{what}: element {k}: {g} vs {w}"
        );
    }
}

#[test]
fn gradients_through_conversions_match_finite_differences_in_every_mode() {
    let p = prog(SRC);
    let x = wide(6, 11);
    let v = arr(&[6], 12);
    let want = f32_differences(p.ir("inner").unwrap(), std::slice::from_ref(&x));
    let grad = eval(p.ir("dinner").unwrap(), std::slice::from_ref(&x));
    assert_near(&grad[0].data, &want, 2e-3, "dinner");
    // Forward mode: the tangent along v is the gradient's dot product.
    let along = eval(p.ir("inner_along").unwrap(), &[x.clone(), v.clone()])[0].as_scalar();
    let dot: f64 = grad[0].data.iter().zip(&v.data).map(|(g, v)| g * v).sum();
    assert!(
        (along - dot).abs() <= 1e-5 * (1.0 + dot.abs()),
        "{along} vs {dot}"
    );
    // Second order: the Hessian-vector product against differences of the
    // gradient along v.
    let hvp = eval(p.ir("hvp").unwrap(), &[x.clone(), v.clone()]);
    let dot_fd = f32_differences(p.ir("inner_dot").unwrap(), &[x.clone(), v.clone()]);
    assert_near(&hvp[0].data, &dot_fd, 5e-3, "hvp");
    // An f32 parameter into f64 arithmetic, and a matrix product.
    let x32 = to_f32(&arr(&[6], 13));
    let y = arr(&[6], 14);
    let g = eval(p.ir("dmixed").unwrap(), &[x32.clone(), y.clone()]);
    assert_eq!(g[0].dtype, DType::F32);
    let want: Vec<f64> = x32
        .data
        .iter()
        .zip(&y.data)
        .map(|(&x, &y)| {
            let x = x as f32;
            // d/dx: y cos(x) (narrowed) + 2x, in f32.
            f64::from((y as f32) * x.cos() + (x + x))
        })
        .collect();
    assert_near(&g[0].data, &want, 1e-6, "dmixed x");
    for (gy, &x) in g[1].data.iter().zip(&x32.data) {
        assert_eq!(*gy, f64::from((x as f32).sin()), "dmixed y");
    }
}

/// Every optimized program (the e-graph at λ = 0 and 1e6, forward mode)
/// computes what the checker's does, and native code its bits.
#[test]
fn optimized_programs_keep_the_conversions() {
    let p = prog(SRC);
    let x = wide(9, 21);
    let v = arr(&[9], 22);
    let x32 = to_f32(&arr(&[9], 23));
    for (grad, args) in [
        ("dinner", vec![x.clone()]),
        ("dround_trip", vec![x.clone()]),
        ("dmixed", vec![x32.clone(), v.clone()]),
        ("hvp", vec![x.clone(), v.clone()]),
    ] {
        let want = eval(p.ir(grad).unwrap(), &args);
        for lambda in [0.0, 1e6] {
            let g = optimize_gradient(&p, &Options::default().function(grad).lambda(lambda))
                .unwrap_or_else(|e| panic!("{grad}: {e}"));
            let refs: Vec<&Value> = args.iter().collect();
            let vg = g.value_and_grad_ir();
            let got = egrad::internals::ir::interp::run(vg, &refs).unwrap();
            for (a, b) in got[1..].iter().zip(&want) {
                assert_near(&a.data, &b.data, 1e-6, &format!("{grad} λ={lambda}"));
            }
            let native = g.compile().unwrap().native().call(&refs).unwrap();
            for (a, b) in native.iter().zip(&got) {
                assert!(a.bits_eq(b), "{grad} λ={lambda}: JIT {a:?} vs {b:?}");
            }
        }
    }
    let j = p.ir("inner_along").unwrap();
    let opt = optimize_ir(j, &Options::default()).unwrap().after;
    common::assert_jit_equals_interpreter(&opt, &[x.clone(), v.clone()], "inner_along");
    let a = eval(&opt, &[x.clone(), v.clone()])[0].as_scalar();
    let b = eval(j, &[x, v])[0].as_scalar();
    assert!((a - b).abs() <= 1e-6 * (1.0 + b.abs()), "{a} vs {b}");
}
