//! `BackendOptions::gemm`: `matmul` through the `matrixmultiply` crate's
//! GEMM kernels. They block the sum over `k` and fuse multiplies and adds,
//! so results are checked against the interpreter within the error bound
//! of a dot product in any order, not bit for bit:
//! `|gemm - interp| <= 2 k u Σ_l |a_il b_lj|` per element (u the unit
//! roundoff of the dtype; each result is within `k u Σ|a b|` of the exact
//! sum whatever the order and with or without fused multiply-adds).

use egrad::backend::{clif_text_with, compile, compile_object, BackendOptions, ObjectEntry};
use egrad::lang::interp;
use egrad::lang::ir::{parse_functions, Function};
use egrad::lang::types::DType;
use egrad::lang::value::Value;

const GEMM: BackendOptions = BackendOptions {
    verify: true,
    simd: true,
    gemm: true,
};

/// Inputs from the bench suite's generator: `V(seed, i)`, uniform in
/// [-1, 1).
fn values(shape: &[usize], seed: u64) -> Value {
    let n = shape.iter().product::<usize>() as u64;
    let data = (0..n).map(|i| egrad::suite::v(seed, i)).collect();
    Value::array(DType::F64, shape.to_vec(), data)
}

/// The product `a·b` of the function's two operands as the program reads
/// them (`ta`/`tb`: transposed in place), and `Σ_l |a_il b_lj|`.
fn abs_products(
    a: &Value,
    b: &Value,
    ta: bool,
    tb: bool,
    m: usize,
    k: usize,
    n: usize,
) -> Vec<f64> {
    let at = |i: usize, l: usize| {
        if ta {
            a.data[l * m + i]
        } else {
            a.data[i * k + l]
        }
    };
    let bt = |l: usize, j: usize| {
        if tb {
            b.data[j * k + l]
        } else {
            b.data[l * n + j]
        }
    };
    let mut out = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            out.push((0..k).map(|l| (at(i, l) * bt(l, j)).abs()).sum());
        }
    }
    out
}

fn function(dtype: DType, ta: bool, tb: bool, extra: bool) -> Function {
    let t = dtype.name();
    let (pa, pb) = (
        if ta { "[K, M]" } else { "[M, K]" },
        if tb { "[N, K]" } else { "[K, N]" },
    );
    let mut body = String::new();
    let a = if ta {
        body += &format!("  %at: {t}[M, K] = transpose %a\n");
        "%at"
    } else {
        "%a"
    };
    let b = if tb {
        body += &format!("  %bt: {t}[K, N] = transpose %b\n");
        "%bt"
    } else {
        "%b"
    };
    // A computed operand (materialised, then multiplied in memory).
    let a = if extra {
        body += &format!("  %s: {t}[M, K] = sin {a}\n");
        "%s"
    } else {
        a
    };
    let text = format!(
        "fn mm[M, K, N](%a: {t}{pa}, %b: {t}{pb}) -> {t}[M, N] {{\n{body}  %c: {t}[M, N] = matmul {a} {b}\n  ret %c\n}}"
    );
    parse_functions(&text)
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
        .remove(0)
}

#[test]
fn gemm_products_agree_with_the_interpreter_within_the_dot_product_bound() {
    let mut checked = 0;
    for dtype in [DType::F64, DType::F32] {
        let u = match dtype {
            DType::F32 => f32::EPSILON as f64 / 2.0,
            _ => f64::EPSILON / 2.0,
        };
        for (ta, tb, extra) in [
            (false, false, false),
            (true, false, false),
            (false, true, false),
            (true, true, false),
            (false, false, true),
        ] {
            let f = function(dtype, ta, tb, extra);
            let clif = clif_text_with(&f, &GEMM).unwrap();
            assert!(
                clif.contains("(i64, i64, i64, i64, i64, i64, i64, i64, i64, i64)"),
                "no GEMM call in\n{clif}"
            );
            let cf = compile(&f, &GEMM).unwrap();
            for (m, k, n) in [
                (0, 3, 4),
                (3, 0, 4),
                (5, 7, 0),
                (1, 1, 1),
                (7, 33, 19),
                (64, 128, 40),
            ] {
                let a_shape = if ta { [k, m] } else { [m, k] };
                let b_shape = if tb { [n, k] } else { [k, n] };
                let a = values(&a_shape, 3 + m as u64);
                let b = values(&b_shape, 5 + n as u64);
                let (a, b) = match dtype {
                    DType::F32 => (a.cast(DType::F32), b.cast(DType::F32)),
                    _ => (a, b),
                };
                let got = cf.call(&[&a, &b]).unwrap();
                let want = interp::run(&f, &[&a, &b]).unwrap();
                assert_eq!(got[0].shape, want[0].shape);
                let a_read = if extra {
                    let mut s = a.clone();
                    s.data.iter_mut().for_each(|x| *x = dtype.round(x.sin()));
                    s
                } else {
                    a.clone()
                };
                let bound = abs_products(&a_read, &b, ta, tb, m, k, n);
                for (idx, ((g, w), s)) in got[0]
                    .data
                    .iter()
                    .zip(&want[0].data)
                    .zip(&bound)
                    .enumerate()
                {
                    let tol = 2.0 * k as f64 * u * s;
                    assert!(
                        (g - w).abs() <= tol,
                        "{dtype} ta={ta} tb={tb} extra={extra} {m}x{k}x{n} [{idx}]: gemm {g} interp {w} (bound {tol})"
                    );
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 10_000, "{checked}");
}

#[test]
fn object_files_refuse_the_gemm_option() {
    let f = function(DType::F64, false, false, false);
    let entry = ObjectEntry {
        func: &f,
        symbol: "mm",
        keep: &[],
    };
    let e = compile_object(&[entry], &GEMM).unwrap_err().to_string();
    assert!(e.contains("GEMM"), "{e}");
}

/// The whole mlp2 gradient (three products, two of them with a transposed
/// operand) through GEMM kernels: close to egrad's own loops.
#[test]
fn mlp2_gradient_through_gemm_matches_the_default_backend() {
    use egrad::backend::compile_keeping;
    use egrad::pipeline::{optimize_gradient, Options};
    use egrad::suite::BENCHMARKS;
    use egrad::Program;
    let b = BENCHMARKS.iter().find(|b| b.key == "mlp2").unwrap();
    let program = Program::from_file(b.example).unwrap();
    let inputs = b.values(DType::F64);
    let refs: Vec<&Value> = inputs.iter().collect();
    let dims = interp::bind_args(program.ir(b.loss_fn).unwrap(), &refs).unwrap();
    let mut opts = Options::default().function(b.grad_fn);
    for (k, n) in dims {
        opts = opts.dim(k, n);
    }
    let g = optimize_gradient(&program, &opts).unwrap();
    let ir = g.gradient_ir();
    let plain = compile_keeping(&ir, &BackendOptions::verified(), &g.stored()).unwrap();
    let gemm = compile_keeping(&ir, &GEMM, &g.stored()).unwrap();
    assert!(clif_text_with(&ir, &GEMM)
        .unwrap()
        .contains("(i64, i64, i64, i64, i64, i64, i64, i64, i64, i64)"));
    let (want, got) = (plain.call(&refs).unwrap(), gemm.call(&refs).unwrap());
    assert_eq!(want.len(), 4);
    for (w, g) in want.iter().zip(&got) {
        let scale = w.data.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        for (x, y) in w.data.iter().zip(&g.data) {
            assert!((x - y).abs() <= 1e-12 * scale, "{x} vs {y}");
        }
    }
}
