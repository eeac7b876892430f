//! Per-example gradients of a batch on every core with Rayon.
//!
//! One gradient is compiled once (a small classifier's loss on one
//! example, below) and shared by all threads: a `CompiledFunction` is
//! `Send + Sync`. Each Rayon job keeps its own `Workspace` (`for_each_init`)
//! and writes each example's gradients straight into its rows of the batch's
//! output arrays with `call_into`, so no example allocates. The result is
//! checked against a sequential run bit for bit, then timed on one thread
//! and on all cores.
//!
//! ```sh
//! cargo run --release --example batch_grads          # 10,000 examples, best of 20
//! cargo run --release --example batch_grads -- 100000 50
//! ```
//!
//! `cargo test --release --example batch_grads` runs its test on a small
//! batch (the example is a test target, `Cargo.toml`).

use egrad::{optimize_gradient, CompiledFunction, NativeArg, NativeOut, Options, Program};
use rayon::prelude::*;
use std::time::{Duration, Instant};

/// One example's loss: a tanh layer of `H` units over `K` features, then
/// the cross-entropy of a softmax over `C` classes against the one-hot `y`.
const SOURCE: &str = "
fn loss[H, K, C](W1: f64[H, K], b1: f64[H], W2: f64[C, H], b2: f64[C],
                 x: f64[K], y: f64[C]) -> f64 {
  let h = tanh(matmul(W1, x) + b1)
  -dot(log_softmax(matmul(W2, h) + b2), y)
}

@grad(W1, b1, W2, b2)
fn dloss[H, K, C](W1: f64[H, K], b1: f64[H], W2: f64[C, H], b2: f64[C],
                  x: f64[K], y: f64[C]) -> (f64[H, K], f64[H], f64[C, H], f64[C]) =
  loss(W1, b1, W2, b2, x, y)
";

const K: usize = 16;
const H: usize = 32;
const C: usize = 4;

/// The model's parameters, shared by every example.
struct Params {
    w1: Vec<f64>,
    b1: Vec<f64>,
    w2: Vec<f64>,
    b2: Vec<f64>,
}

/// The batch: example `i` is row `i` of `x` (`K` features) and of `y`
/// (one-hot over `C` classes).
struct Batch {
    n: usize,
    x: Vec<f64>,
    y: Vec<f64>,
}

/// Per-example results: row `i` of each array is example `i`'s loss and
/// gradients.
struct Grads {
    loss: Vec<f64>,
    w1: Vec<f64>,
    b1: Vec<f64>,
    w2: Vec<f64>,
    b2: Vec<f64>,
}

impl Grads {
    fn zeros(n: usize) -> Grads {
        Grads {
            loss: vec![0.0; n],
            w1: vec![0.0; n * H * K],
            b1: vec![0.0; n * H],
            w2: vec![0.0; n * C * H],
            b2: vec![0.0; n * C],
        }
    }

    fn arrays(&self) -> [&[f64]; 5] {
        [&self.loss, &self.w1, &self.b1, &self.w2, &self.b2]
    }

    /// Every element of every array has the same bits (`==` would call
    /// `0.0 == -0.0` equal and NaN unequal).
    fn same_bits(&self, other: &Grads) -> bool {
        self.arrays().iter().zip(other.arrays()).all(|(a, b)| {
            a.len() == b.len() && a.iter().zip(b).all(|(p, q)| p.to_bits() == q.to_bits())
        })
    }
}

/// SplitMix64 as a uniform number in [-1, 1): deterministic data without a
/// dependency.
fn uniform(seed: u64) -> f64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 52) as f64 - 1.0
}

fn params() -> Params {
    let fill = |n: usize, seed: u64, scale: f64| -> Vec<f64> {
        (0..n as u64)
            .map(|j| scale * uniform(seed << 32 | j))
            .collect()
    };
    Params {
        w1: fill(H * K, 1, 0.5),
        b1: fill(H, 2, 0.1),
        w2: fill(C * H, 3, 0.5),
        b2: fill(C, 4, 0.1),
    }
}

fn batch(n: usize) -> Batch {
    let x = (0..(n * K) as u64).map(|j| uniform(5 << 32 | j)).collect();
    let mut y = vec![0.0; n * C];
    for i in 0..n {
        let class = (uniform(6 << 32 | i as u64) + 1.0) * C as f64 / 2.0;
        y[i * C + (class as usize).min(C - 1)] = 1.0;
    }
    Batch { n, x, y }
}

/// Compile the gradient: `(W1, b1, W2, b2, x, y) -> (loss, dW1, db1, dW2, db2)`.
fn compile() -> egrad::Result<egrad::CompiledGradient> {
    let program = Program::parse(SOURCE)?;
    let options = Options::default()
        .function("dloss")
        .dim("H", H as u64)
        .dim("K", K as u64)
        .dim("C", C as u64);
    optimize_gradient(&program, &options)?.compile()
}

/// Example `i`'s loss and gradients into its rows of the outputs. No
/// allocation once `ws` is bound (after its first call).
fn one(
    native: &CompiledFunction,
    ws: &mut egrad::Workspace,
    p: &Params,
    b: &Batch,
    i: usize,
    out: [&mut [f64]; 5],
) {
    let [loss, w1, b1, w2, b2] = out;
    let args = [
        NativeArg::f64(&p.w1, &[H, K]),
        NativeArg::f64(&p.b1, &[H]),
        NativeArg::f64(&p.w2, &[C, H]),
        NativeArg::f64(&p.b2, &[C]),
        NativeArg::f64(&b.x[i * K..(i + 1) * K], &[K]),
        NativeArg::f64(&b.y[i * C..(i + 1) * C], &[C]),
    ];
    let mut outs = [
        NativeOut::F64(loss),
        NativeOut::F64(w1),
        NativeOut::F64(b1),
        NativeOut::F64(w2),
        NativeOut::F64(b2),
    ];
    native
        .call_into(&args, &mut outs, ws)
        .expect("arguments of the declared shapes");
}

/// Every example one after another, with one workspace.
fn sequential(native: &CompiledFunction, p: &Params, b: &Batch) -> Grads {
    let mut g = Grads::zeros(b.n);
    let mut ws = native.workspace();
    let rows = g
        .loss
        .chunks_mut(1)
        .zip(g.w1.chunks_mut(H * K))
        .zip(g.b1.chunks_mut(H))
        .zip(g.w2.chunks_mut(C * H))
        .zip(g.b2.chunks_mut(C));
    for (i, ((((l, w1), b1), w2), b2)) in rows.enumerate() {
        one(native, &mut ws, p, b, i, [l, w1, b1, w2, b2]);
    }
    g
}

/// Every example in parallel on the current Rayon pool, into `g`: each
/// job gets its own workspace from `for_each_init` (a job may run many
/// examples; Rayon makes a few jobs per thread), and writes only its own
/// examples' rows.
fn parallel(native: &CompiledFunction, p: &Params, b: &Batch, g: &mut Grads) {
    g.loss
        .par_chunks_mut(1)
        .zip(g.w1.par_chunks_mut(H * K))
        .zip(g.b1.par_chunks_mut(H))
        .zip(g.w2.par_chunks_mut(C * H))
        .zip(g.b2.par_chunks_mut(C))
        .enumerate()
        .for_each_init(
            || native.workspace(),
            |ws, (i, ((((l, w1), b1), w2), b2))| one(native, ws, p, b, i, [l, w1, b1, w2, b2]),
        );
}

/// CPU time of every thread of this process so far (Linux: the first
/// field of each `/proc/self/task/*/schedstat`, in ns); None elsewhere.
fn cpu_time() -> Option<Duration> {
    let mut ns = 0u64;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let stat = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
        ns += stat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(Duration::from_nanos(ns))
}

/// One pool's runs.
struct Timed {
    /// The fastest run.
    best: Duration,
    /// All runs: wall-clock time and the CPU time the process used.
    wall: Duration,
    cpu: Option<Duration>,
    /// The last run's results.
    grads: Grads,
}

/// Run `parallel` on a pool of each size in `threads`, `runs` rounds, the
/// pools taking turns within each round (so a machine that slows down or
/// speeds up affects them alike).
fn timed(
    native: &CompiledFunction,
    p: &Params,
    b: &Batch,
    threads: &[usize],
    runs: usize,
) -> Vec<Timed> {
    let pools: Vec<rayon::ThreadPool> = threads
        .iter()
        .map(|&t| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(t)
                .build()
                .expect("a thread pool")
        })
        .collect();
    let mut out: Vec<Timed> = threads
        .iter()
        .map(|_| Timed {
            best: Duration::MAX,
            wall: Duration::ZERO,
            cpu: Some(Duration::ZERO),
            grads: Grads::zeros(b.n),
        })
        .collect();
    for _ in 0..runs {
        for (pool, r) in pools.iter().zip(&mut out) {
            let cpu = cpu_time();
            let t = Instant::now();
            pool.install(|| parallel(native, p, b, &mut r.grads));
            let wall = t.elapsed();
            r.best = r.best.min(wall);
            r.wall += wall;
            r.cpu = match (r.cpu, cpu, cpu_time()) {
                (Some(sum), Some(a), Some(b)) => Some(sum + b.saturating_sub(a)),
                _ => None,
            };
        }
    }
    out
}

fn main() -> egrad::Result<()> {
    // batch_grads [N [RUNS]]: N examples, the fastest of RUNS runs.
    let arg = |k: usize, default: usize| -> egrad::Result<usize> {
        match std::env::args().nth(k) {
            Some(a) => a.parse().map_err(|_| {
                egrad::Error::Usage(format!("batch_grads [N [RUNS]]: `{a}` is not a count"))
            }),
            None => Ok(default),
        }
    };
    let (n, runs) = (arg(1, 10_000)?, arg(2, 20)?.max(1));
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let compiled = compile()?;
    let native = compiled.native();
    let (p, b) = (params(), batch(n));
    println!(
        "per-example gradients of a {K}-{H}-{C} tanh classifier ({} parameters), {n} examples",
        H * K + H + C * H + C
    );

    let want = sequential(native, &p, &b);
    let threads: Vec<usize> = if cores > 1 { vec![1, cores] } else { vec![1] };
    let results = timed(native, &p, &b, &threads, runs);
    for (&t, r) in threads.iter().zip(&results) {
        assert!(
            r.grads.same_bits(&want),
            "{t} threads: not the sequential run's bits"
        );
        // Cores busy on average and gradients per CPU-second: on a shared
        // machine they tell whether the threads got cores to run on.
        let cpu = match r.cpu {
            Some(c) => format!(
                ", {:.2} cores busy, {:.0} gradients per CPU-second",
                c.as_secs_f64() / r.wall.as_secs_f64(),
                (n * runs) as f64 / c.as_secs_f64()
            ),
            None => String::new(),
        };
        println!(
            "{t} thread{}: {:.2} ms per batch, {:.0} gradients/s{cpu}",
            if t == 1 { " " } else { "s" },
            r.best.as_secs_f64() * 1e3,
            n as f64 / r.best.as_secs_f64()
        );
    }
    if let [one, all] = &results[..] {
        println!(
            "speedup on {cores} threads: {:.2}x (fastest of {runs} runs each); both bit for bit the sequential run",
            one.best.as_secs_f64() / all.best.as_secs_f64()
        );
    }
    let mean: f64 = want.loss.iter().sum::<f64>() / n as f64;
    println!("mean loss {mean:.6}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small batch on 1, 2 and 8 threads gives the sequential run's bits,
    /// and the sequential run is `value_and_grad`'s.
    #[test]
    fn small_batch_matches_sequential_bit_for_bit() {
        let compiled = compile().unwrap();
        let native = compiled.native();
        let (p, b) = (params(), batch(300));
        let want = sequential(native, &p, &b);
        let threads = [1, 2, 8];
        for (t, r) in threads.iter().zip(timed(native, &p, &b, &threads, 2)) {
            assert!(r.grads.same_bits(&want), "{t} threads");
            assert!(r.best <= r.wall);
        }
        // Example 7 through the allocating entry point.
        let i = 7;
        let v = |data: &[f64], shape: &[usize]| {
            egrad::Arg::Value(egrad::Value::array(
                egrad::DType::F64,
                shape.to_vec(),
                data.to_vec(),
            ))
        };
        let (value, grads) = compiled
            .value_and_grad(&[
                v(&p.w1, &[H, K]),
                v(&p.b1, &[H]),
                v(&p.w2, &[C, H]),
                v(&p.b2, &[C]),
                v(&b.x[i * K..(i + 1) * K], &[K]),
                v(&b.y[i * C..(i + 1) * C], &[C]),
            ])
            .unwrap();
        assert_eq!(value.as_scalar().to_bits(), want.loss[i].to_bits());
        assert!(value.as_scalar() > 0.0);
        let rows = [
            &want.w1[i * H * K..(i + 1) * H * K],
            &want.b1[i * H..(i + 1) * H],
            &want.w2[i * C * H..(i + 1) * C * H],
            &want.b2[i * C..(i + 1) * C],
        ];
        for (g, row) in grads.iter().zip(rows) {
            assert_eq!(g.data.len(), row.len());
            assert!(g
                .data
                .iter()
                .zip(row)
                .all(|(a, b)| a.to_bits() == b.to_bits()));
        }
        // Examples differ, so a thread writing another's rows would show.
        assert_ne!(want.w1[..H * K], want.w1[H * K..2 * H * K]);
    }
}
