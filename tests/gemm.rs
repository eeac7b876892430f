//! `matmul` is one definition everywhere: for each element a chain of fused
//! multiply-adds over `k` in increasing order, from +0 (`src/gemm.rs`).
//! The interpreter runs it through egrad's matrix kernel, native code
//! through the same kernel (`BackendOptions::gemm`, the default) or through
//! its own loop nest of Cranelift `fma` instructions (SIMD or scalar; what an
//! object file runs), so all of them agree bit for bit, with operands read
//! in place transposed or computed first; and each result is within the
//! error bound of a dot product, `k u Σ_l |a_il b_lj|`, of the exact sum.

use egrad::internals::backend::{
    clif_text_with, compile, compile_object, BackendOptions, ObjectEntry,
};
use egrad::internals::ir::interp;
use egrad::internals::ir::{parse_functions, Function};
use egrad::internals::types::value::Value;
use egrad::internals::types::DType;

const GEMM: BackendOptions = BackendOptions {
    verify: true,
    simd: true,
    gemm: true,
    wide: true,
};

/// Every way native code can run a product: the kernel, and the loop nest
/// in SIMD vectors and in scalars.
const BACKENDS: [BackendOptions; 3] = [
    GEMM,
    BackendOptions {
        verify: true,
        simd: true,
        gemm: false,
        wide: true,
    },
    BackendOptions {
        verify: true,
        simd: false,
        gemm: false,
        wide: false,
    },
];

/// Inputs from the bench suite's generator: `V(seed, i)`, uniform in
/// [-1, 1).
fn values(shape: &[usize], seed: u64) -> Value {
    let n = shape.iter().product::<usize>() as u64;
    let data = (0..n)
        .map(|i| egrad::internals::suite::v(seed, i))
        .collect();
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

/// The product `a·b` as the program reads its operands, nearly exact: each
/// product's rounding error recovered with an fma, everything summed with
/// compensation (far more precise than the bound it is checked against).
fn products(a: &Value, b: &Value, ta: bool, tb: bool, m: usize, k: usize, n: usize) -> Vec<f64> {
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
            // Kahan-summed fused products: far below the bound's error.
            let (mut s, mut c) = (0.0f64, 0.0f64);
            for l in 0..k {
                let p = at(i, l) * bt(l, j);
                let e = at(i, l).mul_add(bt(l, j), -p);
                let y = p - c;
                let t = s + y;
                c = (t - s) - y;
                s = t;
                c -= e;
            }
            out.push(s - c);
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

fn same_bits(x: &Value, y: &Value) -> bool {
    x.shape == y.shape
        && x.data
            .iter()
            .zip(&y.data)
            .all(|(p, q)| p.to_bits() == q.to_bits() || (p.is_nan() && q.is_nan()))
}

#[test]
fn every_backend_computes_the_interpreters_product_bit_for_bit() {
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
                "no kernel call in\n{clif}"
            );
            let nest = clif_text_with(&f, &BACKENDS[1]).unwrap();
            assert!(nest.contains(" fma "), "no fma in the loop nest\n{nest}");
            let compiled: Vec<_> = BACKENDS.iter().map(|o| compile(&f, o).unwrap()).collect();
            for (m, k, n) in [
                (0, 3, 4),
                (3, 0, 4),
                (5, 7, 0),
                (1, 1, 1),
                (7, 33, 19),
                (9, 5, 17),
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
                let want = interp::run(&f, &[&a, &b]).unwrap();
                for (cf, o) in compiled.iter().zip(&BACKENDS) {
                    let got = cf.call(&[&a, &b]).unwrap();
                    assert!(
                        same_bits(&got[0], &want[0]),
                        "{dtype} ta={ta} tb={tb} extra={extra} {m}x{k}x{n} {o:?}:\n{:?}\n{:?}",
                        got[0].data,
                        want[0].data
                    );
                }
                // And the result is a dot product's worth of rounding from
                // the exact sum (checked in f64 against the f32 result).
                let a_read = if extra {
                    let mut s = a.clone();
                    s.data.iter_mut().for_each(|x| *x = dtype.round(x.sin()));
                    s
                } else {
                    a.clone()
                };
                let bound = abs_products(&a_read, &b, ta, tb, m, k, n);
                let exact = products(&a_read, &b, ta, tb, m, k, n);
                for (idx, ((w, e), s)) in want[0].data.iter().zip(&exact).zip(&bound).enumerate() {
                    let tol = (k as f64 + 1.0) * u * s;
                    assert!(
                        (w - e).abs() <= tol.max(if dtype == DType::F32 { 1e-12 * s } else { 0.0 }),
                        "{dtype} {m}x{k}x{n} [{idx}]: {w} vs {e} (bound {tol})"
                    );
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 10_000, "{checked}");
}

/// Object code runs the loop nest (the same bits) unless it links egrad's
/// runtime library, whose kernel it then calls, as the JIT does.
#[test]
fn object_files_call_the_kernel_only_with_the_runtime_library() {
    let f = function(DType::F64, true, false, false);
    let entry = ObjectEntry {
        func: &f,
        symbol: "mm",
        keep: &[],
    };
    let alone = compile_object(&[entry], &GEMM, false).unwrap();
    assert!(!alone.bytes.is_empty());
    assert!(alone.runtime_calls.is_empty(), "{:?}", alone.runtime_calls);
    let linked = compile_object(&[entry], &GEMM, true).unwrap();
    assert_eq!(linked.runtime_calls, ["egrad_dgemm"]);
}

/// The whole mlp2 gradient (three products, two of them with a transposed
/// operand): kernel and loop nests agree bit for bit.
#[test]
fn mlp2_gradient_is_the_same_through_kernel_and_loop_nest() {
    use egrad::internals::backend::compile_keeping;
    use egrad::internals::pipeline::{optimize_gradient, Options};
    use egrad::internals::suite::BENCHMARKS;
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
    assert!(clif_text_with(&ir, &GEMM)
        .unwrap()
        .contains("(i64, i64, i64, i64, i64, i64, i64, i64, i64, i64)"));
    let want = interp::run(&ir, &refs).unwrap();
    assert_eq!(want.len(), 4);
    // The gradient alone, and the value-and-gradient program with the
    // residuals it stores kept in memory (the products then read them).
    let vg = g.value_and_grad_ir();
    let want_vg = interp::run(vg, &refs).unwrap();
    assert_eq!(&want_vg[1..], &want[..]);
    for o in &BACKENDS {
        let got = compile(&ir, o).unwrap().call(&refs).unwrap();
        for (w, g) in want.iter().zip(&got) {
            assert!(same_bits(w, g), "{o:?}");
        }
        let got = compile_keeping(vg, o, &g.stored())
            .unwrap()
            .call(&refs)
            .unwrap();
        for (w, g) in want_vg.iter().zip(&got) {
            assert!(same_bits(w, g), "{o:?}");
        }
    }
}
