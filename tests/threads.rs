//! One compiled gradient shared by threads: `CompiledFunction` and
//! `CompiledGradient` are `Send + Sync`, and 8 threads calling the same
//! compiled code at once (started together, each on its own inputs,
//! through `call` or with its own workspace) get the single-thread results
//! bit for bit. `examples/batch_grads.rs` (run as a test too) does the same
//! with Rayon.

use egrad::internals::suite::benchmark;
use egrad::internals::types::DType;
use egrad::{
    optimize_gradient, Arg, CompiledFunction, CompiledGradient, NativeArg, NativeOut, Options,
    Program, Value,
};

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn compiled_functions_are_send_and_sync() {
    assert_send_sync::<CompiledFunction>();
    assert_send_sync::<CompiledGradient>();
}

/// The value and gradients of one call, as `Value`s.
type Results = (Value, Vec<Value>);

fn bits_eq(a: &Results, b: &Results) -> bool {
    a.0.bits_eq(&b.0) && a.1.len() == b.1.len() && a.1.iter().zip(&b.1).all(|(x, y)| x.bits_eq(y))
}

#[test]
fn eight_threads_share_one_compiled_gradient() {
    // mlp2: matrix kernels, vector math and reductions in one gradient.
    let b = benchmark("mlp2").unwrap();
    let program = Program::from_file(b.example).unwrap();
    let grad = optimize_gradient(&program, &Options::default().function(b.grad_fn)).unwrap();
    let compiled = grad.compile().unwrap();
    let native = compiled.native();

    // Each thread its own inputs (the suite's, the weights scaled by the
    // thread), so that a call writing into memory another call uses (a
    // shared scratch buffer) would change some thread's results; with the
    // same inputs everywhere it could go unseen.
    let inputs: Vec<Vec<Value>> = (0..8)
        .map(|t| {
            let mut vs = b.values(DType::F64);
            for x in &mut vs[0].data {
                *x *= 1.0 + t as f64 / 8.0;
            }
            vs
        })
        .collect();
    let args =
        |vs: &[Value]| -> Vec<Arg<'static>> { vs.iter().map(|v| Arg::Value(v.clone())).collect() };
    // The single-thread results, one thread after another.
    let want: Vec<Results> = inputs
        .iter()
        .map(|vs| compiled.value_and_grad(&args(vs)).unwrap())
        .collect();
    assert!(
        want.windows(2).all(|w| !bits_eq(&w[0], &w[1])),
        "the threads' inputs must give different gradients"
    );
    let out_lens: Vec<usize> = std::iter::once(1)
        .chain(want[0].1.iter().map(|g| g.data.len()))
        .collect();

    let start = std::sync::Barrier::new(8);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let (compiled, inputs, out_lens, start) =
                    (&compiled, &inputs[t], &out_lens, &start);
                s.spawn(move || {
                    let args = args(inputs);
                    let nargs: Vec<NativeArg> = inputs
                        .iter()
                        .map(|v| NativeArg::f64(&v.data, &v.shape))
                        .collect();
                    let mut outs: Vec<Vec<f64>> = out_lens.iter().map(|&n| vec![0.0; n]).collect();
                    let mut ws = native.workspace();
                    let mut results = Vec::new();
                    // All eight start together and overlap for many calls.
                    start.wait();
                    for k in 0..50 {
                        if (t + k) % 2 == 0 {
                            results.push(compiled.value_and_grad(&args).unwrap());
                        } else {
                            {
                                let mut o: Vec<NativeOut> =
                                    outs.iter_mut().map(|x| NativeOut::F64(x)).collect();
                                native.call_into(&nargs, &mut o, &mut ws).unwrap();
                            }
                            let v = Value::scalar(DType::F64, outs[0][0]);
                            let g = outs[1..]
                                .iter()
                                .map(|x| Value {
                                    dtype: DType::F64,
                                    shape: Vec::new(),
                                    data: x.clone(),
                                })
                                .collect();
                            results.push((v, g));
                        }
                    }
                    results
                })
            })
            .collect();
        for (t, h) in handles.into_iter().enumerate() {
            let (value, grads) = &want[t];
            for (v, gs) in h.join().unwrap() {
                assert!(v.bits_eq(value), "thread {t}: value {v:?} vs {value:?}");
                assert_eq!(gs.len(), grads.len());
                for (g, want) in gs.iter().zip(grads) {
                    assert_eq!(g.data.len(), want.data.len());
                    assert!(
                        g.data
                            .iter()
                            .zip(&want.data)
                            .all(|(a, b)| a.to_bits() == b.to_bits()),
                        "thread {t}: a gradient differs from the single-thread one"
                    );
                }
            }
        }
    });
}
