//! Matrix products three ways (BENCHMARKS.md, "Matrix products"): the
//! Cranelift loop nest as scalar code (`BackendOptions { simd: false, gemm:
//! false }`), the same nest in SIMD vectors (`gemm: false`), and egrad's
//! matrix kernel (`src/gemm.rs`, `gemm: true`, the default). All three give
//! the same bits. Shapes are mlp2's products (forward, and the gradient's
//! `X^T dH` and `dP W2^T`) and square products (the kernel's peak: 2n³
//! flops over the time); then the whole mlp2 gradient each way. f64, one
//! thread, only native code timed.
//!
//! `cargo bench --bench gemm`

use criterion::{criterion_group, criterion_main, Criterion};
use egrad::internals::backend::{self, BackendOptions, CompiledFunction};
use egrad::internals::ir::interp;
use egrad::internals::ir::parse_functions;
use egrad::internals::pipeline::{optimize_gradient, Options};
use egrad::internals::suite::BENCHMARKS;
use egrad::internals::types::value::Value;
use egrad::internals::types::DType;
use egrad::Program;
use std::hint::black_box;
use std::time::Duration;

const WAYS: [(&str, BackendOptions); 3] = [
    (
        "scalar",
        BackendOptions {
            verify: false,
            simd: false,
            gemm: false,
            wide: true,
        },
    ),
    (
        "simd",
        BackendOptions {
            verify: false,
            simd: true,
            gemm: false,
            wide: true,
        },
    ),
    (
        "kernel",
        BackendOptions {
            verify: false,
            simd: true,
            gemm: true,
            wide: true,
        },
    ),
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

fn time(
    c: &mut Criterion,
    group: &str,
    f: &dyn Fn(&BackendOptions) -> CompiledFunction,
    args: &[Value],
) {
    let refs: Vec<&Value> = args.iter().collect();
    let mut g = c.benchmark_group(group);
    g.sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(1000));
    for (name, opts) in &WAYS {
        let compiled = f(opts);
        let mut p = compiled.prepare(&refs).expect("bind");
        g.bench_function(*name, |t| t.iter(|| black_box(&mut p).run()));
    }
    g.finish();
}

fn products(c: &mut Criterion) {
    // (what, m, k, n, A transposed in place?)
    let shapes = [
        ("X W1 64x128x256", 64, 128, 256, false),
        ("X^T dH 128x64x256", 128, 64, 256, true),
        ("H W2 64x256x10", 64, 256, 10, false),
        ("square 256", 256, 256, 256, false),
        ("square 512", 512, 512, 512, false),
    ];
    for (what, m, k, n, t) in shapes {
        let text = if t {
            format!("fn mm(%a: f64[{k}, {m}], %b: f64[{k}, {n}]) -> f64[{m}, {n}] {{\n  %at: f64[{m}, {k}] = transpose %a\n  %c: f64[{m}, {n}] = matmul %at %b\n  ret %c\n}}")
        } else {
            format!("fn mm(%a: f64[{m}, {k}], %b: f64[{k}, {n}]) -> f64[{m}, {n}] {{\n  %c: f64[{m}, {n}] = matmul %a %b\n  ret %c\n}}")
        };
        let f = parse_functions(&text).expect("parse").remove(0);
        let a = if t {
            values(&[k, m], 1)
        } else {
            values(&[m, k], 1)
        };
        let args = [a, values(&[k, n], 2)];
        time(
            c,
            &format!("matmul/{what}"),
            &|o| backend::compile(&f, o).expect("compile"),
            &args,
        );
    }
    let b = BENCHMARKS.iter().find(|b| b.key == "mlp2").expect("mlp2");
    let program = Program::from_file(b.example).expect("mlp2 source");
    let inputs = b.values(DType::F64);
    let refs: Vec<&Value> = inputs.iter().collect();
    let dims = interp::bind_args(program.ir(b.loss_fn).expect("loss"), &refs).expect("sizes");
    let mut opts = Options::default().function(b.grad_fn);
    for (k, n) in dims {
        opts = opts.dim(k, n);
    }
    let g = optimize_gradient(&program, &opts).expect("gradient");
    let ir = g.gradient_ir();
    time(
        c,
        "matmul/mlp2 gradient",
        &|o| backend::compile(&ir, o).expect("compile"),
        &inputs,
    );
}

criterion_group!(benches, products);
criterion_main!(benches);
