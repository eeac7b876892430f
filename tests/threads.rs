//! One compiled gradient shared by threads: `CompiledFunction` and
//! `CompiledGradient` are `Send + Sync`, and 8 threads calling the same
//! compiled code at once (each through `call` or with its own workspace)
//! get the single-thread results bit for bit.

use egrad::internals::lang::types::DType;
use egrad::internals::suite::benchmark;
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

#[test]
fn eight_threads_share_one_compiled_gradient() {
    // mlp2: matrix kernels, vector math and reductions in one gradient.
    let b = benchmark("mlp2").unwrap();
    let program = Program::from_file(b.example).unwrap();
    let grad = optimize_gradient(&program, &Options::default().function(b.grad_fn)).unwrap();
    let compiled = grad.compile().unwrap();
    let inputs: Vec<Value> = b.values(DType::F64);
    let args: Vec<Arg> = inputs.iter().map(|v| Arg::Value(v.clone())).collect();
    let (value, grads) = compiled.value_and_grad(&args).unwrap();

    let native = compiled.native();
    let out_lens: Vec<usize> = std::iter::once(1)
        .chain(grads.iter().map(|g| g.data.len()))
        .collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let (compiled, args, inputs, out_lens) = (&compiled, &args, &inputs, &out_lens);
                s.spawn(move || {
                    let mut ws = native.workspace();
                    let mut results = Vec::new();
                    for k in 0..6 {
                        if (t + k) % 2 == 0 {
                            results.push(compiled.value_and_grad(args).unwrap());
                        } else {
                            let nargs: Vec<NativeArg> = inputs
                                .iter()
                                .map(|v| NativeArg::f64(&v.data, &v.shape))
                                .collect();
                            let mut outs: Vec<Vec<f64>> =
                                out_lens.iter().map(|&n| vec![0.0; n]).collect();
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
        for h in handles {
            for (v, gs) in h.join().unwrap() {
                assert!(v.bits_eq(&value), "value {v:?} vs {value:?}");
                for (g, want) in gs.iter().zip(&grads) {
                    assert_eq!(g.data.len(), want.data.len());
                    assert!(
                        g.data
                            .iter()
                            .zip(&want.data)
                            .all(|(a, b)| a.to_bits() == b.to_bits()),
                        "a gradient differs from the single-thread one"
                    );
                }
            }
        }
    });
}
