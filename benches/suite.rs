//! The benchmark suite (`bench-suite.md`), side by side: for every suite
//! program under `examples/suite/`, egrad's primal and optimized `@grad`
//! function (JIT, arguments bound once with `CompiledFunction::prepare`, so
//! only native code is timed) against a hand-written Rust primal and
//! gradient of the same program, on the same inputs (the suite's bit-exact
//! generator, f64), single-threaded; and egrad's parse-to-callable time
//! (`Program::parse` → `optimize_gradient` → compile).
//!
//! The hand-written code is what a competent Rust programmer writes for
//! `rustc -O`: plain f64 loops over slices, reverse mode derived by hand
//! (forward tangents for `euler_ode`, which has two parameters), fused where
//! fusing is obvious, buffers allocated once outside the timed call,
//! reductions with four independent accumulators (so the loop is not one
//! serial chain of adds), no intrinsics, default target features. Before
//! timing, each hand-written gradient and primal is checked against egrad's
//! (1e-9 relative to the largest component) and egrad's loss against the
//! JAX reference (`tests/data/bench-reference.json`), so both sides do the
//! same work.
//!
//! Reproduce: `cargo bench --bench suite` (or `benches/suite_table.sh` for
//! the Markdown table with JAX). `SUITE_ONLY=mlp2,rosenbrock` restricts the
//! programs.

use criterion::{criterion_group, criterion_main, Criterion};
use egrad::internals::backend::{self, BackendOptions, CompiledFunction};
use egrad::internals::ir::interp;
use egrad::internals::pipeline::{optimize_gradient, optimize_ir, Options};
use egrad::internals::suite::{Benchmark, BENCHMARKS};
use egrad::internals::types::value::Value;
use egrad::internals::types::DType;
use egrad::Program;
use std::hint::black_box;
use std::time::Duration;

// ---------------------------------------------------------------------------
// Hand-written Rust.

/// A hand-written primal and gradient of one suite program. `grad` writes
/// the gradients (in the `wrt` order of the suite) into buffers the value
/// owns; nothing is allocated per call.
trait Hand {
    fn primal(&mut self) -> f64;
    fn grad(&mut self);
    fn grads(&self) -> Vec<&[f64]>;
}

/// Sum of `a[i] * b[i]`, four accumulators.
#[inline]
fn dot(a: &[f64], b: &[f64]) -> f64 {
    sum_map2(a, b, |x, y| x * y)
}

/// Sum of `f(x[i])`, four accumulators.
#[inline]
fn sum_map(x: &[f64], f: impl Fn(f64) -> f64) -> f64 {
    let mut acc = [0.0f64; 4];
    let c = x.chunks_exact(4);
    let r = c.remainder();
    for v in c {
        acc[0] += f(v[0]);
        acc[1] += f(v[1]);
        acc[2] += f(v[2]);
        acc[3] += f(v[3]);
    }
    let mut s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    for &v in r {
        s += f(v);
    }
    s
}

/// Sum of `f(a[i], b[i])`, four accumulators.
#[inline]
fn sum_map2(a: &[f64], b: &[f64], f: impl Fn(f64, f64) -> f64) -> f64 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f64; 4];
    let (ac, bc) = (a.chunks_exact(4), b.chunks_exact(4));
    let (ar, br) = (ac.remainder(), bc.remainder());
    for (x, y) in ac.zip(bc) {
        acc[0] += f(x[0], y[0]);
        acc[1] += f(x[1], y[1]);
        acc[2] += f(x[2], y[2]);
        acc[3] += f(x[3], y[3]);
    }
    let mut s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    for (&x, &y) in ar.iter().zip(br) {
        s += f(x, y);
    }
    s
}

/// `y += a * x`.
#[inline]
fn axpy(y: &mut [f64], a: f64, x: &[f64]) {
    for (y, x) in y.iter_mut().zip(x) {
        *y += a * x;
    }
}

/// a. `(w·x - y)^2`, gradient `2 (w·x - y) x`.
struct Linreg {
    w: Vec<f64>,
    x: Vec<f64>,
    y: f64,
    gw: Vec<f64>,
}

impl Hand for Linreg {
    fn primal(&mut self) -> f64 {
        let e = dot(&self.w, &self.x) - self.y;
        e * e
    }
    fn grad(&mut self) {
        let s = 2.0 * (dot(&self.w, &self.x) - self.y);
        for (g, x) in self.gw.iter_mut().zip(&self.x) {
            *g = s * x;
        }
    }
    fn grads(&self) -> Vec<&[f64]> {
        vec![&self.gw]
    }
}

/// b. `(1/M) sum_i log(1 + exp(-y_i (X w)_i))`.
struct Logistic {
    w: Vec<f64>,
    x: Vec<f64>,
    y: Vec<f64>,
    gw: Vec<f64>,
}

impl Hand for Logistic {
    fn primal(&mut self) -> f64 {
        let k = self.w.len();
        let mut s = 0.0;
        for (row, &yi) in self.x.chunks_exact(k).zip(&self.y) {
            s += (1.0 + (-yi * dot(row, &self.w)).exp()).ln();
        }
        s / self.y.len() as f64
    }
    fn grad(&mut self) {
        let k = self.w.len();
        let inv_m = 1.0 / self.y.len() as f64;
        self.gw.fill(0.0);
        for (row, &yi) in self.x.chunks_exact(k).zip(&self.y) {
            // d/dz log(1 + exp(-y z)) = -y exp(-y z) / (1 + exp(-y z))
            let e = (-yi * dot(row, &self.w)).exp();
            axpy(&mut self.gw, -yi * e / (1.0 + e) * inv_m, row);
        }
    }
    fn grads(&self) -> Vec<&[f64]> {
        vec![&self.gw]
    }
}

/// c. `sum_{i<N-1} 100 (x[i+1] - x[i]^2)^2 + (1 - x[i])^2`.
struct Rosenbrock {
    x: Vec<f64>,
    gx: Vec<f64>,
}

impl Hand for Rosenbrock {
    fn primal(&mut self) -> f64 {
        let x = &self.x;
        sum_map2(&x[..x.len() - 1], &x[1..], |xi, xn| {
            let d = xn - xi * xi;
            let e = 1.0 - xi;
            100.0 * d * d + e * e
        })
    }
    fn grad(&mut self) {
        let x = &self.x;
        // g[i] = 200 d_{i-1} - 400 x[i] d_i - 2 (1 - x[i]), d_i = x[i+1] - x[i]^2
        let mut prev = 0.0; // 200 d_{i-1}
        for ((&xi, &xn), g) in x.iter().zip(&x[1..]).zip(self.gx.iter_mut()) {
            let d = xn - xi * xi;
            *g = prev - 400.0 * xi * d - 2.0 * (1.0 - xi);
            prev = 200.0 * d;
        }
        if let Some(last) = self.gx.last_mut() {
            *last = prev;
        }
    }
    fn grads(&self) -> Vec<&[f64]> {
        vec![&self.gx]
    }
}

/// e. `H = tanh(X W1 + b1)`, `P = H W2 + b2`, `sum((P - Y)^2) / (B O)`.
struct Mlp2 {
    w1: Vec<f64>,
    b1: Vec<f64>,
    w2: Vec<f64>,
    b2: Vec<f64>,
    x: Vec<f64>,
    y: Vec<f64>,
    dims: [usize; 4], // B, I, H, O
    // scratch
    h: Vec<f64>,  // B x H
    dp: Vec<f64>, // B x O
    dz: Vec<f64>, // B x H
    // gradients
    gw1: Vec<f64>,
    gb1: Vec<f64>,
    gw2: Vec<f64>,
    gb2: Vec<f64>,
}

impl Mlp2 {
    /// `h = tanh(X W1 + b1)` (rows streamed: `h[b,:] += X[b,i] W1[i,:]`).
    fn hidden(x: &[f64], w1: &[f64], b1: &[f64], h: &mut [f64], dims: [usize; 4]) {
        let [_, ni, nh, _] = dims;
        for (hb, xb) in h.chunks_exact_mut(nh).zip(x.chunks_exact(ni)) {
            hb.copy_from_slice(b1);
            for (&a, w1i) in xb.iter().zip(w1.chunks_exact(nh)) {
                axpy(hb, a, w1i);
            }
            for v in hb.iter_mut() {
                *v = v.tanh();
            }
        }
    }
}

impl Hand for Mlp2 {
    fn primal(&mut self) -> f64 {
        let [nb, _, nh, no] = self.dims;
        Self::hidden(&self.x, &self.w1, &self.b1, &mut self.h, self.dims);
        let mut s = 0.0;
        let p = &mut self.dp[..no];
        for (hb, yb) in self.h.chunks_exact(nh).zip(self.y.chunks_exact(no)) {
            p.copy_from_slice(&self.b2);
            for (&a, w2h) in hb.iter().zip(self.w2.chunks_exact(no)) {
                axpy(p, a, w2h);
            }
            for (pv, yv) in p.iter().zip(yb) {
                s += (pv - yv) * (pv - yv);
            }
        }
        s / (nb * no) as f64
    }
    fn grad(&mut self) {
        let [nb, ni, nh, no] = self.dims;
        Self::hidden(&self.x, &self.w1, &self.b1, &mut self.h, self.dims);
        let scale = 2.0 / (nb * no) as f64;
        // P = H W2 + b2; dP = 2 (P - Y) / (B O)
        for ((hb, yb), dpb) in self
            .h
            .chunks_exact(nh)
            .zip(self.y.chunks_exact(no))
            .zip(self.dp.chunks_exact_mut(no))
        {
            dpb.copy_from_slice(&self.b2);
            for (&a, w2h) in hb.iter().zip(self.w2.chunks_exact(no)) {
                axpy(dpb, a, w2h);
            }
            for (d, yv) in dpb.iter_mut().zip(yb) {
                *d = scale * (*d - yv);
            }
        }
        // gb2 = sum_b dP[b,:]; gW2 = H^T dP; dZ = (dP W2^T) * (1 - H^2)
        self.gb2.fill(0.0);
        self.gw2.fill(0.0);
        for ((hb, dpb), dzb) in self
            .h
            .chunks_exact(nh)
            .zip(self.dp.chunks_exact(no))
            .zip(self.dz.chunks_exact_mut(nh))
        {
            axpy(&mut self.gb2, 1.0, dpb);
            for ((&hv, gw2h), (w2h, dz)) in hb
                .iter()
                .zip(self.gw2.chunks_exact_mut(no))
                .zip(self.w2.chunks_exact(no).zip(dzb.iter_mut()))
            {
                axpy(gw2h, hv, dpb);
                *dz = dot(dpb, w2h) * (1.0 - hv * hv);
            }
        }
        // gb1 = sum_b dZ[b,:]; gW1 = X^T dZ
        self.gb1.fill(0.0);
        self.gw1.fill(0.0);
        for (xb, dzb) in self.x.chunks_exact(ni).zip(self.dz.chunks_exact(nh)) {
            axpy(&mut self.gb1, 1.0, dzb);
            for (&a, gw1i) in xb.iter().zip(self.gw1.chunks_exact_mut(nh)) {
                axpy(gw1i, a, dzb);
            }
        }
    }
    fn grads(&self) -> Vec<&[f64]> {
        vec![&self.gw1, &self.gb1, &self.gw2, &self.gb2]
    }
}

/// g. `sum(x^20)`, gradient `20 x^19`, by repeated squaring.
struct PowerStatic {
    x: Vec<f64>,
    gx: Vec<f64>,
}

impl Hand for PowerStatic {
    fn primal(&mut self) -> f64 {
        sum_map(&self.x, |x| {
            let x2 = x * x;
            let x4 = x2 * x2;
            let x5 = x4 * x;
            let x10 = x5 * x5;
            x10 * x10
        })
    }
    fn grad(&mut self) {
        for (g, &x) in self.gx.iter_mut().zip(&self.x) {
            let x2 = x * x;
            let x4 = x2 * x2;
            let x5 = x4 * x;
            let x10 = x5 * x5;
            *g = 20.0 * (x10 * (x5 * x4));
        }
    }
    fn grads(&self) -> Vec<&[f64]> {
        vec![&self.gx]
    }
}

/// h. 1000 explicit-Euler steps of a damped pendulum, `theta_1000^2`.
/// Two parameters, so the gradient propagates forward tangents with the
/// state (no tape).
struct EulerOde {
    k: f64,
    c: f64,
    g: [f64; 2],
}

const STEPS: usize = 1000;
const DT: f64 = 0.01;

impl Hand for EulerOde {
    fn primal(&mut self) -> f64 {
        let (k, c) = (self.k, self.c);
        let (mut th, mut om) = (1.0f64, 0.0f64);
        for _ in 0..STEPS {
            (th, om) = (th + DT * om, om + DT * (-k * th.sin() - c * om));
        }
        th * th
    }
    fn grad(&mut self) {
        let (k, c) = (self.k, self.c);
        let (mut th, mut om) = (1.0f64, 0.0f64);
        // tangents of (theta, omega) with respect to k and c
        let (mut thk, mut omk, mut thc, mut omc) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
        for _ in 0..STEPS {
            let (s, co) = th.sin_cos();
            let kc = k * co;
            (thk, omk) = (thk + DT * omk, omk + DT * (-s - kc * thk - c * omk));
            (thc, omc) = (thc + DT * omc, omc + DT * (-kc * thc - om - c * omc));
            (th, om) = (th + DT * om, om + DT * (-k * s - c * om));
        }
        self.g = [2.0 * th * thk, 2.0 * th * thc];
    }
    fn grads(&self) -> Vec<&[f64]> {
        vec![&self.g[..1], &self.g[1..]]
    }
}

fn data(v: &Value) -> Vec<f64> {
    v.data.clone()
}

// ---------------------------------------------------------------------------
// egrad.

/// The primal and the optimized `@grad` function of one suite program,
/// compiled, and their inputs.
struct Egrad {
    inputs: Vec<Value>,
    primal: CompiledFunction,
    grad: CompiledFunction,
}

/// Options pricing the program at the sizes of its suite inputs.
fn sized_options(program: &Program, b: &Benchmark, inputs: &[Value]) -> Options {
    let loss = program.ir(b.loss_fn).expect("loss function");
    let refs: Vec<&Value> = inputs.iter().collect();
    let dims = interp::bind_args(loss, &refs).expect("suite inputs fit the loss");
    let mut opts = Options::default().function(b.grad_fn);
    for (k, n) in dims {
        opts = opts.dim(k, n);
    }
    opts
}

/// Parse → optimize the gradient → compile the `@grad` function: what
/// egrad does before the first call (timed as parse-to-callable).
fn parse_to_callable(name: &str, source: &str, opts: &Options) -> CompiledFunction {
    let program = Program::parse_named(name, source).expect("parse");
    let g = optimize_gradient(&program, opts).expect("optimize_gradient");
    backend::compile(&g.gradient_ir(), &BackendOptions::default()).expect("compile gradient")
}

fn egrad_for(b: &Benchmark, source: &str) -> (Egrad, Options) {
    let program = Program::parse_named(b.example, source).expect("parse");
    let inputs = b.values(DType::F64);
    let opts = sized_options(&program, b, &inputs);
    let loss = program.ir(b.loss_fn).expect("loss");
    let primal_opt = optimize_ir(loss, &opts).expect("optimize primal");
    let primal = backend::compile(&primal_opt.after, &BackendOptions::default()).expect("primal");
    let grad = parse_to_callable(b.example, source, &opts);
    (
        Egrad {
            inputs,
            primal,
            grad,
        },
        opts,
    )
}

// ---------------------------------------------------------------------------
// Checks.

fn reference() -> serde_json::Value {
    let text = std::fs::read_to_string("tests/data/bench-reference.json")
        .expect("tests/data/bench-reference.json");
    serde_json::from_str(&text).expect("reference json")
}

fn check(b: &Benchmark, e: &Egrad, hand: &mut impl Hand, reference: &serde_json::Value) {
    let refs: Vec<&Value> = e.inputs.iter().collect();
    let loss = e.primal.call(&refs).expect("egrad primal")[0].as_scalar();
    let want = reference[b.key]["loss"].as_f64().expect("reference loss");
    assert!(
        (loss - want).abs() <= 1e-10 * want.abs(),
        "{}: egrad loss {loss} vs reference {want}",
        b.key
    );
    let hp = hand.primal();
    assert!(
        (hp - loss).abs() <= 1e-9 * loss.abs(),
        "{}: hand-written loss {hp} vs egrad {loss}",
        b.key
    );
    let grads = e.grad.call(&refs).expect("egrad gradient");
    hand.grad();
    let hg = hand.grads();
    assert_eq!(grads.len(), hg.len(), "{}: number of gradients", b.key);
    for ((g, h), w) in grads.iter().zip(&hg).zip(b.wrt) {
        assert_eq!(g.data.len(), h.len(), "{}: length of d/d{w}", b.key);
        let scale = g.data.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        for (i, (x, y)) in g.data.iter().zip(h.iter()).enumerate() {
            assert!(
                (x - y).abs() <= 1e-9 * scale,
                "{}: d/d{w}[{i}]: egrad {x} vs hand-written {y}",
                b.key
            );
        }
        let l2 = g.data.iter().map(|x| x * x).sum::<f64>().sqrt();
        let want = reference[b.key]["grad"][*w]["l2"].as_f64().expect("l2");
        assert!(
            (l2 - want).abs() <= 1e-10 * want,
            "{}: |d/d{w}| {l2} vs reference {want}",
            b.key
        );
    }
}

// ---------------------------------------------------------------------------
// Benchmarks.

/// Build the hand-written code for `b`, check it against egrad, and time
/// both.
fn check_and_run(c: &mut Criterion, b: &Benchmark, e: &Egrad, opts: &Options) {
    let inputs = &e.inputs;
    let reference = reference();
    macro_rules! go {
        ($h:expr) => {{
            let mut h = $h;
            check(b, e, &mut h, &reference);
            run(c, b, e, h, opts);
        }};
    }
    match b.key {
        "linreg_16" | "linreg_1M" => go!(Linreg {
            w: data(&inputs[0]),
            x: data(&inputs[1]),
            y: inputs[2].as_scalar(),
            gw: vec![0.0; inputs[0].len()],
        }),
        "logistic" => go!(Logistic {
            w: data(&inputs[0]),
            x: data(&inputs[1]),
            y: data(&inputs[2]),
            gw: vec![0.0; inputs[0].len()],
        }),
        "rosenbrock" => go!(Rosenbrock {
            x: data(&inputs[0]),
            gx: vec![0.0; inputs[0].len()],
        }),
        "mlp2" => {
            let (ni, nh) = (inputs[0].shape[0], inputs[0].shape[1]);
            let (nb, no) = (inputs[5].shape[0], inputs[5].shape[1]);
            go!(Mlp2 {
                w1: data(&inputs[0]),
                b1: data(&inputs[1]),
                w2: data(&inputs[2]),
                b2: data(&inputs[3]),
                x: data(&inputs[4]),
                y: data(&inputs[5]),
                dims: [nb, ni, nh, no],
                h: vec![0.0; nb * nh],
                dp: vec![0.0; nb * no],
                dz: vec![0.0; nb * nh],
                gw1: vec![0.0; ni * nh],
                gb1: vec![0.0; nh],
                gw2: vec![0.0; nh * no],
                gb2: vec![0.0; no],
            })
        }
        "power_static" => go!(PowerStatic {
            x: data(&inputs[0]),
            gx: vec![0.0; inputs[0].len()],
        }),
        "euler_ode" => go!(EulerOde {
            k: inputs[0].as_scalar(),
            c: inputs[1].as_scalar(),
            g: [0.0; 2],
        }),
        other => panic!("no hand-written code for suite program `{other}`"),
    }
}

fn run<H: Hand>(c: &mut Criterion, b: &Benchmark, e: &Egrad, mut hand: H, opts: &Options) {
    let refs: Vec<&Value> = e.inputs.iter().collect();
    let mut g = c.benchmark_group(format!("suite/{}", b.key));
    g.sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(1200));
    let mut primal = e.primal.prepare(&refs).expect("bind primal");
    g.bench_function("egrad_primal", |t| t.iter(|| black_box(&mut primal).run()));
    let mut grad = e.grad.prepare(&refs).expect("bind gradient");
    g.bench_function("egrad_grad", |t| t.iter(|| black_box(&mut grad).run()));
    g.bench_function("rust_primal", |t| {
        t.iter(|| black_box(black_box(&mut hand).primal()))
    });
    g.bench_function("rust_grad", |t| t.iter(|| black_box(&mut hand).grad()));
    g.finish();

    let source = std::fs::read_to_string(b.example).expect("example source");
    let mut g = c.benchmark_group(format!("suite/{}", b.key));
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(100))
        .measurement_time(Duration::from_millis(1500));
    g.bench_function("parse_to_callable", |t| {
        t.iter(|| black_box(parse_to_callable(b.example, &source, opts)))
    });
    g.finish();
}

fn suite(c: &mut Criterion) {
    let only: Option<Vec<String>> = std::env::var("SUITE_ONLY")
        .ok()
        .map(|s| s.split(',').map(str::to_string).collect());
    for b in BENCHMARKS {
        if only.as_ref().is_some_and(|o| !o.iter().any(|k| k == b.key)) {
            continue;
        }
        let source = std::fs::read_to_string(b.example).expect("example source");
        let (e, opts) = egrad_for(b, &source);
        check_and_run(c, b, &e, &opts);
    }
}

criterion_group!(benches, suite);
criterion_main!(benches);
