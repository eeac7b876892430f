//! The prelude (`src/lang/prelude.eg`) and `matmul` with a vector: values
//! against a direct computation in Rust, native code against the
//! interpreter bit for bit, gradients against finite differences; the
//! prelude's scoping (a program's function shadows the prelude's), its
//! opting out, and errors whose places are in the prelude.

mod common;

use common::{err, finite_differences, prog};
use egrad::internals::backend::{compile, BackendOptions};
use egrad::internals::differentiate::Ad;
use egrad::internals::ir::interp::run;
use egrad::internals::lang::ast::{Module, TypeExpr};
use egrad::internals::lang::check::{check, CheckError};
use egrad::internals::lang::parser::parse_at;
use egrad::internals::lang::prelude;
use egrad::internals::types::value::Value;
use egrad::internals::types::DType;
use egrad::{optimize_gradient, Options, ParseOptions, Program, SourceFile};

/// `f` through the interpreter and the JIT (with and without egrad's
/// matrix kernels): the same bits; returns the results.
fn run_both(p: &Program, f: &str, args: &[Value]) -> Vec<Value> {
    let ir = p.ir(f).unwrap_or_else(|e| panic!("{e}"));
    let refs: Vec<&Value> = args.iter().collect();
    let want = run(ir, &refs).unwrap();
    for gemm in [true, false] {
        let opts = BackendOptions {
            gemm,
            ..BackendOptions::verified()
        };
        let got = compile(ir, &opts).unwrap().call(&refs).unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert!(
                g.bits_eq(w),
                "{f} (kernels {gemm}): jit {g:?} vs interpreter {w:?}"
            );
        }
    }
    want
}

/// A smooth deterministic array of `shape` in (-1, 1).
fn sample(dtype: DType, shape: &[usize], seed: usize) -> Value {
    let len = shape.iter().product();
    let data = (0..len)
        .map(|i| {
            let x = ((i * 7 + seed * 13) as f64 * 0.37).sin() * 0.9;
            if dtype == DType::F32 {
                x as f32 as f64
            } else {
                x
            }
        })
        .collect();
    Value::array(dtype, shape.to_vec(), data)
}

/// The gradient of scalar function `f` with respect to every parameter:
/// the optimized value-and-gradient program, compiled, equals the
/// interpreter's run of it bit for bit, and both are within `tol` of
/// central finite differences of `f` (run by the interpreter).
fn check_gradient(p: &Program, f: &str, args: &[Value], tol: f64) {
    let ir = p.ir(f).unwrap_or_else(|e| panic!("{e}"));
    let names = names_of(ir);
    let g = optimize_gradient(p, &Options::default().function(f).wrt(names.clone())).unwrap();
    let refs: Vec<&Value> = args.iter().collect();
    let want = run(g.value_and_grad_ir(), &refs).unwrap();
    let got = g.compile().unwrap().native().call(&refs).unwrap();
    for (a, b) in got.iter().zip(&want) {
        assert!(a.bits_eq(b), "{f}: jit {a:?} vs interpreter {b:?}");
    }
    let refs: Vec<&Value> = args.iter().collect();
    assert_eq!(
        want[0].as_scalar(),
        run(ir, &refs).unwrap()[0].as_scalar(),
        "{f}: value"
    );
    let wrt: Vec<usize> = (0..args.len()).collect();
    let fd = finite_differences(ir, args, &wrt);
    for (i, (grad, fd)) in want[1..].iter().zip(&fd).enumerate() {
        assert_eq!(grad.shape, args[i].shape, "{f}: gradient {i}");
        for (k, (ad, fd)) in grad.data.iter().zip(&fd.data).enumerate() {
            assert!(
                (ad - fd).abs() <= tol * (1.0 + fd.abs()),
                "{f}: d/d{}[{k}] = {ad}, finite differences {fd}",
                names[i]
            );
        }
    }
}

fn names_of(f: &egrad::Function) -> Vec<String> {
    f.params
        .iter()
        .map(|q| f.var_name(q.var).to_string())
        .collect()
}

const MATVEC: &str = "
fn mv[T, M, K](A: T[M, K], v: T[K]) -> T[M] = matmul(A, v)
fn vm[T, K, N](v: T[K], A: T[K, N]) -> T[N] = matmul(v, A)
fn mv64[M, K](A: f64[M, K], v: f64[K]) -> f64[M] = mv(A, v)
fn vm64[K, N](v: f64[K], A: f64[K, N]) -> f64[N] = vm(v, A)
fn mv32[M, K](A: f32[M, K], v: f32[K]) -> f32[M] = mv(A, v)
fn vm32[K, N](v: f32[K], A: f32[K, N]) -> f32[N] = vm(v, A)
fn loss[M, K](A: f64[M, K], v: f64[K], u: f64[M]) -> f64 =
  +/sin(matmul(A, v)) + +/(matmul(u, A) .* v) + +/tanh(matmul(transpose(A), u))
";

/// Sizes on both sides of the kernels' blocks (8 partial sums of a row,
/// 32 columns of a column sum).
const SIZES: &[(usize, usize)] = &[(1, 1), (3, 5), (8, 8), (7, 17), (33, 9), (5, 70)];

#[test]
fn matvec_and_vecmat_compute_the_products() {
    let p = prog(MATVEC);
    for &(m, k) in SIZES {
        for dtype in [DType::F64, DType::F32] {
            let a = sample(dtype, &[m, k], 1);
            let v = sample(dtype, &[k], 2);
            let u = sample(dtype, &[m], 3);
            let (mv, vm) = match dtype {
                DType::F64 => ("mv64", "vm64"),
                _ => ("mv32", "vm32"),
            };
            let got = run_both(&p, mv, &[a.clone(), v.clone()]);
            assert_eq!(got[0].shape, vec![m]);
            for i in 0..m {
                let want: f64 = (0..k).map(|j| a.data[i * k + j] * v.data[j]).sum();
                let tol = if dtype == DType::F64 { 1e-13 } else { 1e-5 };
                assert!(
                    (got[0].data[i] - want).abs() <= tol * (1.0 + want.abs()),
                    "{mv} {m}x{k} row {i}: {} vs {want}",
                    got[0].data[i]
                );
            }
            let got = run_both(&p, vm, &[u.clone(), a.clone()]);
            assert_eq!(got[0].shape, vec![k]);
            for j in 0..k {
                let want: f64 = (0..m).map(|i| u.data[i] * a.data[i * k + j]).sum();
                let tol = if dtype == DType::F64 { 1e-13 } else { 1e-5 };
                assert!(
                    (got[0].data[j] - want).abs() <= tol * (1.0 + want.abs()),
                    "{vm} {m}x{k} column {j}: {} vs {want}",
                    got[0].data[j]
                );
            }
        }
    }
}

#[test]
fn matvec_sums_like_a_row_sum_and_vecmat_like_a_column_sum() {
    // The same bits as the tabulate forms they are documented to equal.
    let p = prog(
        "fn mv[M, K](A: f64[M, K], v: f64[K]) -> f64[M] = matmul(A, v)
         fn mv_rows[M, K](A: f64[M, K], v: f64[K]) -> f64[M] = tabulate[M](i => +/(A[i] .* v))
         fn vm[K, N](v: f64[K], A: f64[K, N]) -> f64[N] = matmul(v, A)
         fn vm_cols[K, N](v: f64[K], A: f64[K, N]) -> f64[N] = tabulate[N](j => +/(v .* transpose(A)[j]))",
    );
    for &(m, k) in SIZES {
        let a = sample(DType::F64, &[m, k], 4);
        let v = sample(DType::F64, &[k], 5);
        let u = sample(DType::F64, &[m], 6);
        let x = run_both(&p, "mv", &[a.clone(), v.clone()]);
        let y = run_both(&p, "mv_rows", &[a.clone(), v]);
        assert!(x[0].bits_eq(&y[0]), "{m}x{k}: {x:?} vs {y:?}");
        // A column sum adds rows top to bottom: for fewer than 8 rows that
        // is the row sum's order too.
        if m < 8 {
            let x = run_both(&p, "vm", &[u.clone(), a.clone()]);
            let y = run_both(&p, "vm_cols", &[u, a]);
            assert!(x[0].bits_eq(&y[0]), "{m}x{k}: {x:?} vs {y:?}");
        }
    }
}

#[test]
fn matvec_lowers_to_row_and_column_sums() {
    let p = prog(MATVEC);
    let ir = p.ir("mv64").unwrap().to_string();
    for op in ["repeat", "mul", "sumtail"] {
        assert!(ir.contains(op), "{ir}");
    }
    assert!(!ir.contains("matmul"), "{ir}");
    let ir = p.ir("vm64").unwrap().to_string();
    for op in ["spread", "mul", "sumlead"] {
        assert!(ir.contains(op), "{ir}");
    }
    assert!(!ir.contains("matmul"), "{ir}");
}

#[test]
fn matvec_gradients_match_finite_differences() {
    let p = prog(MATVEC);
    for &(m, k) in &[(1, 1), (3, 5), (9, 4)] {
        let args = [
            sample(DType::F64, &[m, k], 7),
            sample(DType::F64, &[k], 8),
            sample(DType::F64, &[m], 9),
        ];
        check_gradient(&p, "loss", &args, 1e-6);
    }
}

#[test]
fn matvec_size_errors_point_at_the_call() {
    let cases: &[(&str, &[&str])] = &[
        (
            "fn f(A: f64[3, 4], v: f64[5]) -> f64[3] = matmul(A, v)",
            &[
                "`matmul` of a matrix f64[3, 4] and a vector f64[5]",
                "number of columns, 4",
                ":1:43",
            ],
        ),
        (
            "fn f[M, K, J](v: f64[J], A: f64[K, M]) -> f64[M] = matmul(v, A)",
            &[
                "`matmul` of a vector f64[J] and a matrix f64[K, M]",
                "number of rows, K",
                ":1:52",
            ],
        ),
        (
            "fn f(u: f64[3], v: f64[3]) -> f64 = +/matmul(u, v)",
            &["`matmul` of two vectors", "`dot(a, b)`", "`outer(a, b)`"],
        ),
        (
            "fn f(A: f32[3, 4], v: f64[4]) -> f64 = +/matmul(A, v)",
            &["one element type", "f32[3, 4] and f64[4]"],
        ),
        (
            "fn f(A: f64[2, 3, 4], v: f64[4]) -> f64 = +/matmul(A, v)",
            &["[M, K] and [K]", "f64[2, 3, 4] and f64[4]"],
        ),
        (
            "fn f(A: i64[3, 4], v: i64[4]) -> i64[3] = matmul(A, v)",
            &["`matmul` needs floating-point operands", "`f64(...)`"],
        ),
        (
            "fn f(v: f64[4]) -> f64 = +/matmul(2, v)",
            &["`matmul` needs matrices or vectors, but this has type a number"],
        ),
    ];
    for (src, wants) in cases {
        let e = err(src);
        assert!(e.contains('^'), "no caret:\n{e}");
        for w in *wants {
            assert!(e.contains(w), "expected `{w}` in:\n{e}\nfor:\n{src}");
        }
    }
}

/// What the prelude offers (as docs/language.md lists it).
const PRELUDE: &[&str] = prelude::NAMES;

/// Every helper docs/language.md lists under "Prelude": the prelude's
/// functions and the builtins (`mean`, `softmax`, ...) that take any rank.
const HELPERS: &[&str] = &[
    "dot",
    "outer",
    "mean",
    "norm",
    "logsumexp",
    "softmax",
    "log_softmax",
    "sigmoid",
    "softplus",
];

#[test]
fn the_prelude_checks_and_every_function_is_generic() {
    let items = prelude::items().unwrap();
    let public: Vec<&str> = items
        .iter()
        .map(|f| f.name.name.as_str())
        .filter(|n| !n.starts_with(prelude::PRIVATE))
        .collect();
    assert_eq!(public, PRELUDE);
    for f in items {
        let private = f.name.name.starts_with(prelude::PRIVATE);
        assert_eq!(
            prelude::exports(&f.name.name),
            !private,
            "`{}`",
            f.name.name
        );
        // Generic over its element type: lowered only where it is called.
        let generic = f.size_params.iter().any(|s| {
            f.params
                .iter()
                .any(|p| matches!(&p.ty, TypeExpr::Named { dtype, .. } if dtype.name == s.name))
        });
        assert!(
            generic,
            "`{}` is not generic over its element type",
            f.name.name
        );
        assert!(f.span.start >= prelude::BASE, "`{}`", f.name.name);
    }
    // Checked on its own: no errors, and nothing of it is the program's.
    let checked = check(&Module { items: vec![] }, items, &Ad, egrad::MAX_OPERATIONS).unwrap();
    assert!(checked.functions.is_empty() && checked.templates.is_empty());
}

/// A wrapper per prelude function and element type, `f_64` and `f_32`.
fn wrappers() -> String {
    let mut src = String::new();
    for d in ["64", "32"] {
        src.push_str(&format!(
            "fn dot_{d}[N](x: f{d}[N], y: f{d}[N]) -> f{d} = dot(x, y)
             fn outer_{d}[M, N](x: f{d}[M], y: f{d}[N]) -> f{d}[M, N] = outer(x, y)
             fn mean_{d}[N](x: f{d}[N]) -> f{d} = mean(x)
             fn norm_{d}[N](x: f{d}[N]) -> f{d} = norm(x)
             fn logsumexp_{d}[N](x: f{d}[N]) -> f{d} = logsumexp(x)
             fn softmax_{d}[N](x: f{d}[N]) -> f{d}[N] = softmax(x)
             fn log_softmax_{d}[N](x: f{d}[N]) -> f{d}[N] = log_softmax(x)
             fn sigmoid_{d}[N](x: f{d}[N]) -> f{d}[N] = sigmoid(x)
             fn softplus_{d}[N](x: f{d}[N]) -> f{d}[N] = softplus(x)
"
        ));
    }
    src
}

fn vector(dtype: DType, xs: &[f64]) -> Value {
    let xs: Vec<f64> = match dtype {
        DType::F32 => xs.iter().map(|&x| x as f32 as f64).collect(),
        _ => xs.to_vec(),
    };
    Value::array(dtype, vec![xs.len()], xs)
}

/// The prelude's functions, written directly (f64; stable forms).
fn direct(name: &str, x: &[f64], y: &[f64]) -> Vec<f64> {
    let top = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let m = if top.is_finite() { top } else { 0.0 };
    let lse = m + x.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
    match name {
        "dot" => vec![x.iter().zip(y).map(|(a, b)| a * b).sum()],
        "outer" => x
            .iter()
            .flat_map(|a| y.iter().map(move |b| a * b))
            .collect(),
        "mean" => vec![x.iter().sum::<f64>() / x.len() as f64],
        "norm" => vec![x.iter().map(|v| v * v).sum::<f64>().sqrt()],
        "logsumexp" => vec![lse],
        "softmax" => x.iter().map(|v| (v - lse).exp()).collect(),
        "log_softmax" => x.iter().map(|v| v - lse).collect(),
        "sigmoid" => x
            .iter()
            .map(|&v| {
                if v >= 0.0 {
                    1.0 / (1.0 + (-v).exp())
                } else {
                    v.exp() / (1.0 + v.exp())
                }
            })
            .collect(),
        "softplus" => x
            .iter()
            .map(|&v| v.max(0.0) + (-v.abs()).exp().ln_1p())
            .collect(),
        other => panic!("no direct form of {other}"),
    }
}

#[test]
fn prelude_values_match_a_direct_computation() {
    let p = prog(&wrappers());
    let xs: &[&[f64]] = &[
        &[0.5],
        &[1.0, -2.0, 3.0],
        &[0.3, -0.7, 0.1, 2.5, -1.5, 0.0, 0.9, -0.2, 1.1, 4.0, -3.0],
        // Far from 0: nothing overflows.
        &[800.0, -800.0, 30.0, -30.0, 0.0],
    ];
    for dtype in [DType::F64, DType::F32] {
        let d = if dtype == DType::F64 { "64" } else { "32" };
        let tol = if dtype == DType::F64 { 4e-15 } else { 2e-6 };
        for x in xs {
            let x = vector(dtype, x);
            let y = vector(dtype, &x.data.iter().map(|v| 0.5 - v).collect::<Vec<_>>());
            for name in HELPERS {
                if *name == "norm" && x.data.iter().any(|v| v.abs() > 100.0) {
                    continue; // not scaled: x .* x may overflow in f32
                }
                let two = matches!(*name, "dot" | "outer");
                let args = if two {
                    vec![x.clone(), y.clone()]
                } else {
                    vec![x.clone()]
                };
                let got = run_both(&p, &format!("{name}_{d}"), &args);
                let want = direct(name, &x.data, &y.data);
                assert_eq!(got[0].len(), want.len(), "{name}");
                for (k, (g, w)) in got[0].data.iter().zip(&want).enumerate() {
                    let w = if dtype == DType::F32 {
                        *w as f32 as f64
                    } else {
                        *w
                    };
                    let scale = if matches!(*name, "dot" | "mean" | "logsumexp" | "log_softmax") {
                        x.data.iter().map(|v| v.abs()).sum::<f64>().max(1.0)
                    } else {
                        1.0
                    };
                    assert!(
                        (g - w).abs() <= tol * (scale + w.abs()),
                        "{name}_{d}({:?})[{k}] = {g}, want {w}",
                        x.data
                    );
                }
            }
        }
    }
}

#[test]
fn prelude_functions_handle_infinities_and_empty_vectors() {
    let p = prog(&wrappers());
    let one = |f: &str, xs: &[f64]| run_both(&p, f, &[vector(DType::F64, xs)])[0].data.clone();
    let inf = f64::INFINITY;
    assert_eq!(one("logsumexp_64", &[-inf, -inf]), [-inf]);
    assert_eq!(one("logsumexp_64", &[inf, 0.0]), [inf]);
    assert!(one("logsumexp_64", &[f64::NAN, 0.0])[0].is_nan());
    assert_eq!(one("logsumexp_64", &[]), [-inf]);
    assert_eq!(one("logsumexp_64", &[-inf, 0.0]), [0.0]);
    assert_eq!(one("softmax_64", &[-inf, 0.0]), [0.0, 1.0]);
    assert_eq!(one("log_softmax_64", &[1000.0, 0.0]), [0.0, -1000.0]);
    assert_eq!(one("sigmoid_64", &[-inf, inf, 0.0]), [0.0, 1.0, 0.5]);
    assert_eq!(one("softplus_64", &[-inf, inf, 0.0]), [0.0, inf, 2f64.ln()]);
    assert!(one("mean_64", &[])[0].is_nan());
    assert_eq!(one("mean_64", &[inf, 1.0]), [inf]);
    assert_eq!(one("norm_64", &[]), [0.0]);
    assert_eq!(one("norm_64", &[3.0, -4.0]), [5.0]);
}

/// Scalar functions of each prelude function, for gradients.
const LOSSES: &str = "
fn l_dot[N](x: f64[N], y: f64[N]) -> f64 = dot(x, y) * dot(x, x)
fn l_outer[M, N](x: f64[M], y: f64[N]) -> f64 = +/sin(outer(x, y))
fn l_mean[N](x: f64[N]) -> f64 = mean(x .* x) + mean(x)
fn l_norm[N](x: f64[N]) -> f64 = norm(x)
fn l_logsumexp[N](x: f64[N]) -> f64 = logsumexp(x)
fn l_softmax[N](x: f64[N], w: f64[N]) -> f64 = +/(softmax(x) .* w)
fn l_log_softmax[N](x: f64[N], w: f64[N]) -> f64 = +/(log_softmax(x) .* w)
fn l_sigmoid[N](x: f64[N], w: f64[N]) -> f64 = +/(sigmoid(x) .* w)
fn l_softplus[N](x: f64[N], w: f64[N]) -> f64 = +/(softplus(x) .* w)
";

#[test]
fn prelude_gradients_match_finite_differences() {
    let p = prog(LOSSES);
    let names: Vec<&str> = p.function_names();
    assert_eq!(names.len(), HELPERS.len());
    for name in names {
        let ir = p.ir(name).unwrap();
        for (n, t) in [(1, 0.5), (4, 1.5), (9, 4.0)] {
            // `l_outer`'s two vectors have lengths n and n + 1; the
            // others' parameters share one length.
            let args: Vec<Value> = (0..ir.params.len())
                .map(|k| {
                    let len = if name == "l_outer" { n + k } else { n };
                    let mut v = sample(DType::F64, &[len], 10 + k);
                    v.data.iter_mut().for_each(|x| *x *= t);
                    v
                })
                .collect();
            check_gradient(&p, name, &args, 1e-6);
        }
    }
}

#[test]
fn prelude_gradients_are_exact_at_the_kinks_and_finite_far_out() {
    let p = prog(
        "@grad(x)
         fn dsigmoid[N](x: f64[N]) -> f64[N] = +/sigmoid(x)
         @grad(x)
         fn dsoftplus[N](x: f64[N]) -> f64[N] = +/softplus(x)
         @grad(x)
         fn dnorm[N](x: f64[N]) -> f64[N] = norm(x)
         @grad(x)
         fn dlogsumexp[N](x: f64[N]) -> f64[N] = logsumexp(x)",
    );
    let x = vector(DType::F64, &[0.0, 1000.0, -1000.0]);
    let g = run_both(&p, "dsigmoid", std::slice::from_ref(&x));
    assert_eq!(g[0].data, [0.25, 0.0, 0.0]);
    let g = run_both(&p, "dsoftplus", std::slice::from_ref(&x));
    assert_eq!(g[0].data, [0.5, 1.0, 0.0]);
    let g = run_both(&p, "dnorm", &[vector(DType::F64, &[0.0, 0.0])]);
    assert_eq!(g[0].data, [0.0, 0.0]);
    let g = run_both(&p, "dlogsumexp", &[vector(DType::F64, &[1000.0, 1000.0])]);
    assert_eq!(g[0].data, [0.5, 0.5]);
    let g = run_both(
        &p,
        "dlogsumexp",
        &[vector(DType::F64, &[f64::NEG_INFINITY, 0.0])],
    );
    assert_eq!(g[0].data, [0.0, 1.0]);
}

#[test]
fn prelude_functions_work_on_the_rows_of_tabulate() {
    // Row-wise softmax and a matrix-vector product by `dot`: the same bits
    // as the functions on each row.
    let p = prog(
        "fn rows[M, K](X: f64[M, K]) -> f64[M, K] = tabulate[M](i => softmax(X[i]))
         fn row_dots[M, K](X: f64[M, K], w: f64[K]) -> f64[M] = tabulate[M](i => dot(X[i], w))
         fn one[K](x: f64[K]) -> f64[K] = softmax(x)
         fn mv[M, K](X: f64[M, K], w: f64[K]) -> f64[M] = matmul(X, w)",
    );
    let (m, k) = (5, 11);
    let x = sample(DType::F64, &[m, k], 20);
    let w = sample(DType::F64, &[k], 21);
    let rows = run_both(&p, "rows", std::slice::from_ref(&x));
    for i in 0..m {
        let row = Value::array(DType::F64, vec![k], x.data[i * k..(i + 1) * k].to_vec());
        let want = run_both(&p, "one", &[row]);
        let got = Value::array(
            DType::F64,
            vec![k],
            rows[0].data[i * k..(i + 1) * k].to_vec(),
        );
        assert!(got.bits_eq(&want[0]), "row {i}");
    }
    let a = run_both(&p, "row_dots", &[x.clone(), w.clone()]);
    let b = run_both(&p, "mv", &[x, w]);
    assert!(a[0].bits_eq(&b[0]));
}

#[test]
fn a_program_function_shadows_the_prelude_one() {
    // The program's `dot` (another signature) and `_ones` (the prelude's
    // private helper's name) are the program's; the prelude's `mean` still
    // uses its own `_ones`.
    let p = prog(
        "fn dot(a: f64, b: f64) -> f64 = a - b
         fn _ones(x: f64) -> f64 = 2 * x
         fn f[N](x: f64[N]) -> f64 = dot(mean(x), _ones(1))",
    );
    let got = run_both(&p, "f", &[vector(DType::F64, &[1.0, 2.0, 6.0])]);
    assert_eq!(got[0].as_scalar(), 3.0 - 2.0);
    assert_eq!(p.function_names(), ["dot", "_ones", "f"]);
    assert!(p.ir("dot").is_ok());
    // The prelude is for real numbers.
    let e = err("fn f[N](k: i64[N]) -> i64 = norm(k)");
    assert!(
        e.contains("the prelude's `norm` takes f32 or f64 values"),
        "{e}"
    );
    let e = err("fn f[N](k: i64[N]) -> i64 = mean(k)");
    assert!(e.contains("`mean` needs floating-point operands"), "{e}");
    // The prelude's private helper is not the program's to call.
    let e = err("fn f[N](x: f64[N]) -> f64[N] = _ones(x)");
    assert!(e.contains("unknown function `_ones`"), "{e}");
}

#[test]
fn the_prelude_costs_nothing_where_unused_and_is_not_dumped() {
    let src = std::fs::read_to_string("examples/loss.eg").unwrap();
    let with = Program::parse(&src).unwrap();
    let without =
        Program::parse_with("<input>", &src, &ParseOptions::default().prelude(false)).unwrap();
    assert_eq!(with.dump_ast(), without.dump_ast());
    // Not even looked at: the prelude's source is not attached.
    let past = egrad::Span::new(prelude::BASE as usize, prelude::BASE as usize + 1);
    assert_eq!(&*with.file().resolve(past).0.name, "<input>");
    assert_eq!(with.function_names(), without.function_names());
    for f in with.function_names() {
        assert_eq!(
            with.ir(f).unwrap().to_string(),
            without.ir(f).unwrap().to_string()
        );
    }
    // A program that calls the prelude: its syntax tree is its own.
    let p = prog("fn f[N](x: f64[N]) -> f64 = norm(x)");
    let ast = p.dump_ast();
    assert!(!ast.contains("fn norm"), "{ast}");
    // Prelude functions are not the program's functions to run.
    let e = p.ir("norm").unwrap_err().to_string();
    assert!(
        e.contains("no function named `norm`") && e.contains("the prelude's"),
        "{e}"
    );
}

#[test]
fn the_prelude_can_be_left_out() {
    // (`mean` and the other builtins among the helpers stay.)
    let with_mean = "fn f[N](x: f64[N]) -> f64 = mean(x)";
    assert!(
        Program::parse_with("a.eg", with_mean, &ParseOptions::default().prelude(false)).is_ok()
    );
    let src = "fn f[N](x: f64[N]) -> f64 = norm(x)";
    let e = Program::parse_with("a.eg", src, &ParseOptions::default().prelude(false))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("unknown function `norm`") && e.contains("checked without"),
        "{e}"
    );
    let path = std::env::temp_dir().join(format!("egrad-prelude-{}.eg", std::process::id()));
    std::fs::write(&path, src).unwrap();
    let egrad = |extra: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_egrad"))
            .args(extra)
            .arg(&path)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert_eq!(egrad(&["check"]).0, Some(0));
    let (code, stderr) = egrad(&["check", "--no-prelude"]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("unknown function `norm`"), "{stderr}");
    let (code, stderr) = egrad(&["grad", "--fn", "f", "--no-prelude"]);
    assert_eq!(code, Some(1), "{stderr}");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn errors_at_the_prelude_show_its_lines() {
    // A wrong argument: at the call, with the parameter in the prelude.
    let e = err("fn f(x: f64[3], y: f64[4]) -> f64 = dot(x, y)");
    assert!(e.contains("--> <input>:1:44"), "{e}");
    assert!(
        e.contains("--> <prelude>:") && e.contains("fn dot[T, N]"),
        "{e}"
    );
    // An error inside a prelude function's body (this prelude's `bad`
    // names an unknown value) is reported at the program's call, with the
    // place in the prelude.
    let prelude_src = "fn bad[T, N](x: T[N]) -> T = +/(x .* zz)\n";
    let (pre, errs) = parse_at(prelude_src, prelude::BASE);
    assert!(errs.is_empty());
    let src = "fn f(x: f64[3]) -> f64 = bad(x)";
    let (module, errs) = egrad::internals::lang::parser::parse(src);
    assert!(errs.is_empty());
    let Err(CheckError::Source(items)) = check(&module, &pre.items, &Ad, egrad::MAX_OPERATIONS)
    else {
        panic!("should be rejected")
    };
    let file = SourceFile::new("a.eg", src)
        .with_attached(prelude::BASE, SourceFile::new(prelude::NAME, prelude_src));
    let shown: String = items.iter().map(|d| d.render(&file)).collect();
    assert!(shown.contains("unknown name `zz`"), "{shown}");
    assert!(shown.contains("--> a.eg:1:26"), "{shown}");
    assert!(shown.contains("--> <prelude>:1:"), "{shown}");
    assert!(shown.contains("in `bad`, from the prelude"), "{shown}");
}

/// `mean`, `logsumexp`, `softmax`, `log_softmax`, `sigmoid` and
/// `softplus` on numbers and arrays of rank 2 and 3: row by row (softmax)
/// the vector's bits, over every element (mean, logsumexp) the flattened
/// vector's, element by element the same; gradients in both modes.
#[test]
fn helpers_take_any_rank() {
    let p = prog(
        "fn rows[M, K](x: f64[M, K]) -> (f64[M, K], f64[M, K]) =
  (softmax(x), log_softmax(x))
fn by_row[M, K](x: f64[M, K]) -> (f64[M, K], f64[M, K]) =
  (tabulate[M](i => softmax(x[i])), tabulate[M](i => log_softmax(x[i])))
fn cube[L, M, K](x: f64[L, M, K]) -> (f64[L, M, K], f64, f64, f64[L, M, K], f64[L, M, K]) =
  (softmax(x), mean(x), logsumexp(x), sigmoid(x), softplus(x))
fn flat[L, M, K](x: f64[L, M, K]) -> (f64, f64, f64[L, M, K], f64[L, M, K]) {
  let v = flatten(x)
  (mean(v), logsumexp(v), reshape[L, M, K](sigmoid(v)), reshape[L, M, K](softplus(v)))
}
fn nums(x: f64) -> (f64, f64, f64, f64, f64, f64) =
  (mean(x), logsumexp(x), softmax(x), log_softmax(x), sigmoid(x), softplus(x))
fn loss[M, K](x: f64[M, K]) -> f64 =
  +/(log_softmax(x) .* sigmoid(x)) + logsumexp(x) * mean(x) + +/(softmax(x) .* softplus(x))
@grad(x)
fn dloss[M, K](x: f64[M, K]) -> f64[M, K] = loss(x)
@jvp(x)
fn loss_along[M, K](x: f64[M, K], dx: f64[M, K]) -> f64 = loss(x)
fn f32s[M, K](x: f32[M, K]) -> (f32[M, K], f32) = (softmax(x), mean(x))",
    );
    let x = Value::array(
        DType::F64,
        vec![3, 4],
        vec![
            0.5, -1.0, 800.0, 2.0, 0.0, 0.0, 0.0, 0.0, -3.0, 1.5, 0.25, -0.75,
        ],
    );
    let rows = run_both(&p, "rows", std::slice::from_ref(&x));
    let by_row = run_both(&p, "by_row", std::slice::from_ref(&x));
    for (a, b) in rows.iter().zip(&by_row) {
        assert!(a.bits_eq(b), "{a:?} vs {b:?}");
    }
    let c = Value::array(
        DType::F64,
        vec![2, 3, 2],
        (0..12).map(|k| (k as f64 * 0.7).sin() * 3.0).collect(),
    );
    let cube = run_both(&p, "cube", std::slice::from_ref(&c));
    let flat = run_both(&p, "flat", std::slice::from_ref(&c));
    assert!(cube[1].bits_eq(&flat[0]) && cube[2].bits_eq(&flat[1]));
    assert!(cube[3].bits_eq(&flat[2]) && cube[4].bits_eq(&flat[3]));
    for r in 0..6 {
        let s: f64 = cube[0].data[2 * r..2 * r + 2].iter().sum();
        assert!((s - 1.0).abs() < 1e-15, "row {r} sums to {s}");
    }
    let n = run_both(&p, "nums", &[Value::scalar(DType::F64, -0.5)]);
    let got: Vec<f64> = n.iter().map(|v| v.as_scalar()).collect();
    let sig = 1.0 / (1.0 + 0.5f64.exp());
    assert_eq!(got[..4], [-0.5, -0.5, 1.0, 0.0]);
    assert!((got[4] - sig).abs() < 1e-16 && (got[5] - (1.0 + (-0.5f64).exp()).ln()).abs() < 1e-15);
    let m = Value::array(
        DType::F64,
        vec![3, 4],
        (0..12).map(|k| (k as f64).cos()).collect(),
    );
    common::check_gradient(&p, "dloss", "loss", 1, std::slice::from_ref(&m), "any rank");
    common::check_jvp(
        &p,
        "loss_along",
        "loss",
        1,
        std::slice::from_ref(&m),
        "any rank",
    );
    let m32 = m.cast(DType::F32);
    let r = run_both(&p, "f32s", &[m32]);
    assert_eq!((r[0].dtype, r[1].dtype), (DType::F32, DType::F32));
}
