//! The seed program at N = 1,000,000: primal, optimized gradient and
//! unoptimized gradient (AD straight to Cranelift), all through the JIT.
//! Reproduce: `cargo bench --bench seed`.

use criterion::{criterion_group, criterion_main, Criterion};
use egrad::internals::backend::{self, BackendOptions};
use egrad::internals::pipeline::{optimize_gradient, Options};
use egrad::internals::suite::v;
use egrad::internals::types::value::Value;
use egrad::internals::types::DType;
use egrad::Program;
use std::hint::black_box;

const N: usize = 1_000_000;

fn seed(c: &mut Criterion) {
    let program = Program::from_file("examples/loss.eg").expect("examples/loss.eg");
    let w = Value::f32(&(0..N as u64).map(|i| v(1, i) as f32).collect::<Vec<_>>());
    let x = Value::f32(&(0..N as u64).map(|i| v(2, i) as f32).collect::<Vec<_>>());
    let y = Value::scalar(DType::F32, 0.5);
    let args = [&w, &x, &y];
    let opts = Options::default().dim("N", N as u64);
    let bo = BackendOptions {
        verify: false,
        ..BackendOptions::default()
    };

    let primal = backend::compile(program.ir("loss").expect("loss"), &bo).expect("primal");
    let grad = optimize_gradient(&program, &opts.clone().function("dloss_dw")).expect("gradient");
    let grad_native = backend::compile(&grad.gradient_ir(), &bo).expect("gradient");
    let unopt = optimize_gradient(
        &program,
        &opts.clone().function("dloss_dw").no_optimize(true),
    )
    .expect("unoptimized gradient");
    let unopt_native = backend::compile(&unopt.gradient_ir(), &bo).expect("unoptimized");

    let mut g = c.benchmark_group("seed_n1e6");
    g.sample_size(30);
    g.bench_function("primal", |b| {
        b.iter(|| black_box(primal.call(black_box(&args))))
    });
    g.bench_function("gradient", |b| {
        b.iter(|| black_box(grad_native.call(black_box(&args))))
    });
    g.bench_function("gradient_unoptimized", |b| {
        b.iter(|| black_box(unopt_native.call(black_box(&args))))
    });
    g.finish();
}

criterion_group!(benches, seed);
criterion_main!(benches);
