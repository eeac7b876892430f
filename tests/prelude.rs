//! `matmul` with a vector: values against a direct computation, native
//! code against the interpreter bit for bit, gradients against finite
//! differences, and the errors of sizes that do not fit.

mod common;

use common::{err, finite_differences, prog};
use egrad::internals::backend::{compile, BackendOptions};
use egrad::internals::lang::interp::run;
use egrad::internals::lang::types::DType;
use egrad::internals::lang::value::Value;
use egrad::{optimize_gradient, Options, Program};

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
            &["`matmul` of two vectors", "`+/(a .* b)`"],
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
            "fn f[M](A: f64[M, 4], V: f64[M, 4]) -> f64[M] = tabulate[M](i => matmul(A, V[i]))",
            &["`matmul` on a value that depends on the index of `tabulate`"],
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
