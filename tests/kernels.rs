//! Native kernels: Rust functions registered with a shape rule and a VJP
//! (`egrad::register_kernel`) and called by name from `.eg` code. Native
//! code calls them on its buffers and gives the interpreter's bits; the
//! registered VJP is what reverse mode uses (a VJP unlike the true
//! derivative shows in the values); gradients through them agree with
//! finite differences, optimized at both ends of the memory tradeoff; and
//! what they cannot do is an error.

mod common;

use common::{check_gradient, err, prog, run_both};
use egrad::{register_kernel, DType, Kernel, KernelError, ShapeError, Type, Value};
use std::sync::Once;

/// `gelu(x)` with tanh's approximation, element by element: a fused
/// kernel, and its derivative.
fn gelu(args: &[&[f64]], out: &mut [f64]) {
    const C: f64 = 0.797_884_560_802_865_4; // sqrt(2 / pi)
    for (o, &x) in out.iter_mut().zip(args[0]) {
        let t = (C * (x + 0.044715 * x * x * x)).tanh();
        *o = 0.5 * x * (1.0 + t);
    }
}

fn gelu_vjp(args: &[&[f64]], out: &mut [f64]) {
    const C: f64 = 0.797_884_560_802_865_4;
    for ((o, &x), &g) in out.iter_mut().zip(args[0]).zip(args[1]) {
        let u = C * (x + 0.044715 * x * x * x);
        let t = u.tanh();
        let du = C * (1.0 + 3.0 * 0.044715 * x * x);
        *o = g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du);
    }
}

/// `x[i] * w[i % len(w)]`: two arguments of different lengths.
fn tile_mul(args: &[&[f64]], out: &mut [f64]) {
    let (x, w) = (args[0], args[1]);
    for (i, o) in out.iter_mut().enumerate() {
        *o = x[i] * w[i % w.len()];
    }
}

fn tile_mul_dx(args: &[&[f64]], out: &mut [f64]) {
    let (w, g) = (args[1], args[2]);
    for (i, o) in out.iter_mut().enumerate() {
        *o = g[i] * w[i % w.len()];
    }
}

fn tile_mul_dw(args: &[&[f64]], out: &mut [f64]) {
    let (x, g) = (args[0], args[2]);
    out.fill(0.0);
    let n = out.len();
    for i in 0..x.len() {
        out[i % n] += g[i] * x[i];
    }
}

/// The same as `gelu`, with a VJP that is twice the true one.
fn twice_gelu_vjp(args: &[&[f64]], out: &mut [f64]) {
    gelu_vjp(args, out);
    out.iter_mut().for_each(|o| *o *= 2.0);
}

fn same_shape(args: &[Type]) -> Result<Type, ShapeError> {
    Ok(args[0].clone())
}

fn tile_shape(args: &[Type]) -> Result<Type, ShapeError> {
    if let Some(index) = args.iter().position(|a| a.rank() != 1) {
        return Err(ShapeError::Argument {
            index,
            why: format!("`tile_mul` takes two vectors, got {}", args[index]),
        });
    }
    Ok(args[0].clone())
}

fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let k = |name: &str, arity, shape, forward, vjp| Kernel {
            name: name.into(),
            arity,
            shape,
            forward,
            vjp,
            flops: 30.0,
        };
        register_kernel(k("gelu", 1, same_shape, gelu, vec![gelu_vjp])).unwrap();
        register_kernel(k(
            "tile_mul",
            2,
            tile_shape,
            tile_mul,
            vec![tile_mul_dx, tile_mul_dw],
        ))
        .unwrap();
        register_kernel(k("wrong_gelu", 1, same_shape, gelu, vec![twice_gelu_vjp])).unwrap();
        register_kernel(k("opaque_gelu", 1, same_shape, gelu, vec![])).unwrap();
    });
}

const PROGRAM: &str =
    "fn layer[N, K](x: f64[N], w: f64[K]) -> f64[N] = gelu(tile_mul(x, w)) + 0.5 * x
fn loss[N, K](x: f64[N], w: f64[K]) -> f64 = +/(layer(x, w) .* layer(x, w))
@grad(x, w)
fn dloss[N, K](x: f64[N], w: f64[K]) -> (f64[N], f64[K]) = loss(x, w)
fn wrong[N](x: f64[N]) -> f64 = +/wrong_gelu(x)
@grad(x)
fn dwrong[N](x: f64[N]) -> f64[N] = wrong(x)
fn right[N](x: f64[N]) -> f64 = +/gelu(x)
@grad(x)
fn dright[N](x: f64[N]) -> f64[N] = right(x)";

fn vec64(xs: &[f64]) -> Value {
    Value::array(DType::F64, vec![xs.len()], xs.to_vec())
}

#[test]
fn a_kernel_runs_natively_with_the_interpreters_bits() {
    register();
    let p = prog(PROGRAM);
    let x = vec64(&[-1.5, -0.2, 0.0, 0.7, 2.0, 3.5]);
    let w = vec64(&[0.5, -2.0, 1.25]);
    let got = run_both(&p, "layer", &[x.clone(), w.clone()]).unwrap();
    let mut want = vec![0.0; 6];
    let mut tiled = vec![0.0; 6];
    tile_mul(&[&x.data, &w.data], &mut tiled);
    gelu(&[&tiled], &mut want);
    for (k, (g, w)) in got[0].data.iter().zip(&want).enumerate() {
        assert_eq!(*g, w + 0.5 * x.data[k], "element {k}");
    }
    // Empty arrays reach the kernel as empty slices.
    let got = run_both(&p, "layer", &[vec64(&[]), w]).unwrap();
    assert!(got[0].data.is_empty());
}

#[test]
fn gradients_through_kernels_use_their_vjp() {
    register();
    let p = prog(PROGRAM);
    let x = vec64(&[-1.5, -0.2, 0.1, 0.7, 2.0]);
    let w = vec64(&[0.5, -2.0]);
    check_gradient(&p, "dloss", "loss", 2, &[x.clone(), w], "through kernels");
    // The registered VJP is what reverse mode uses: twice the true one
    // gives twice the gradient.
    let right = run_both(&p, "dright", std::slice::from_ref(&x)).unwrap();
    let wrong = run_both(&p, "dwrong", &[x]).unwrap();
    for (r, w) in right[0].data.iter().zip(&wrong[0].data) {
        assert_eq!(2.0 * r, *w);
    }
}

#[test]
fn what_kernels_cannot_do_is_an_error() {
    register();
    let cases: &[(&str, &str)] = &[
        (
            "fn f(x: f64) -> f64 = +/gelu(x)",
            "`gelu` takes f64 arrays (rank 1 or more), got f64",
        ),
        (
            "fn f[N](x: f32[N]) -> f32[N] = gelu(x)",
            "`gelu` takes f64 arrays (rank 1 or more), got f32[N]",
        ),
        (
            "fn f[N, M](x: f64[N, M], w: f64[M]) -> f64[N, M] = tile_mul(x, w)",
            "argument 1: `tile_mul` takes two vectors, got f64[N, M]",
        ),
        ("fn f[N](x: f64[N]) -> f64[N] = gelu(x, x)", "`gelu` takes 1 arguments, got 2"),
        (
            "fn f[N](x: f64[N]) -> f64 = +/opaque_gelu(x)\n@grad(x)\nfn d[N](x: f64[N]) -> f64[N] = f(x)",
            "it calls a native kernel that has no VJP",
        ),
        (
            "fn f[N](x: f64[N]) -> f64 = +/gelu(x)\n@jvp(x)\nfn d[N](x: f64[N], dx: f64[N]) -> f64 = f(x)",
            "forward mode through a registered native kernel",
        ),
        (
            "fn f[N](x: f64[N]) -> f64[N, N] = tabulate[N](i => gelu(x * x[i]))",
            "the native kernel `gelu` is called here on values that depend on the index of `tabulate`",
        ),
    ];
    for (src, says) in cases {
        let e = err(src);
        assert!(e.contains(says), "{src}\n---\n{e}");
    }
    // Registration refuses a name twice, and a VJP list of the wrong length.
    let again = Kernel {
        name: "gelu".into(),
        arity: 1,
        shape: same_shape,
        forward: gelu,
        vjp: vec![],
        flops: 1.0,
    };
    let e = register_kernel(again.clone()).unwrap_err();
    assert_eq!(e, KernelError::Duplicate("gelu".into()));
    assert!(e.to_string().contains("already registered"), "{e}");
    let short = Kernel {
        name: "short_vjp".into(),
        arity: 2,
        vjp: vec![gelu_vjp],
        ..again
    };
    let e = register_kernel(short).unwrap_err();
    assert_eq!(
        e,
        KernelError::VjpCount {
            name: "short_vjp".into(),
            arity: 2,
            vjps: 1
        }
    );
    assert!(e.to_string().contains("one per argument"), "{e}");
}

fn panics(_: &[&[f64]], _: &mut [f64]) {
    panic!("a kernel that panics (tests/kernels.rs)");
}

/// A kernel that panics gives NaN, in the interpreter as in native code
/// (where unwinding into JIT code is not an option), and egrad goes on.
#[test]
fn a_kernel_that_panics_gives_nan_everywhere() {
    register_kernel(Kernel {
        name: "panics_always".into(),
        arity: 1,
        shape: same_shape,
        forward: panics,
        vjp: vec![],
        flops: 1.0,
    })
    .unwrap();
    let p = prog("fn f[N](x: f64[N]) -> f64[N] = panics_always(x) + 1.0");
    let got = run_both(&p, "f", &[vec64(&[1.0, 2.0, 3.0])]).unwrap();
    assert!(got[0].data.iter().all(|v| v.is_nan()), "{got:?}");
}
