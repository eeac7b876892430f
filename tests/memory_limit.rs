//! The memory limit (`egrad::internals::ir::memory`, the CLI's
//! `--memory-limit`): the interpreter and native code refuse a run that
//! would need more, before allocating, with the bytes it needs; the error
//! is a limit error (exit code 1). One test: the limit is process-wide.

use egrad::internals::call::arg_error;
use egrad::internals::ir::interp;
use egrad::internals::ir::memory;
use egrad::internals::suite::benchmark;
use egrad::internals::types::DType;
use egrad::{optimize_gradient, ErrorKind, NativeArg, NativeOut, Options, Program, Value};

#[test]
fn runs_over_the_limit_are_refused_with_the_bytes_they_need() {
    let b = benchmark("mlp2").unwrap();
    let program = Program::from_file(b.example).unwrap();
    let grad = optimize_gradient(&program, &Options::default().function(b.grad_fn)).unwrap();
    let compiled = grad.compile().unwrap();
    let native = compiled.native();
    let inputs: Vec<Value> = b.values(DType::F64);
    let refs: Vec<&Value> = inputs.iter().collect();
    let want = native.call(&refs).unwrap();
    let scratch = native.prepare(&refs).unwrap().scratch_bytes() as u64;
    assert!(scratch > 0, "mlp2's gradient keeps scratch buffers");
    let args_bytes: u64 = inputs.iter().map(|v| v.data.len() as u64 * 8).sum();

    let before = memory::limit();
    // Below the scratch space alone: every path refuses.
    memory::set_limit(scratch / 2);
    let e = native.call(&refs).unwrap_err();
    assert!(e.limit, "{e}");
    assert!(
        e.message.contains("needs ") && e.message.contains("memory limit"),
        "{e}"
    );
    let err = arg_error(native.function(), program.file(), e);
    assert_eq!(err.kind(), ErrorKind::Limit);
    assert_eq!(err.exit_code(), 1);
    let nargs: Vec<NativeArg> = inputs
        .iter()
        .map(|v| NativeArg::f64(&v.data, &v.shape))
        .collect();
    let mut outs: Vec<Vec<f64>> = want.iter().map(|w| vec![0.0; w.data.len()]).collect();
    let mut ws = native.workspace();
    {
        let mut o: Vec<NativeOut> = outs.iter_mut().map(|x| NativeOut::F64(x)).collect();
        let e = native.call_into(&nargs, &mut o, &mut ws).unwrap_err();
        assert!(e.limit && e.message.contains("scratch space"), "{e}");
    }
    let e = interp::run(grad.value_and_grad_ir(), &refs).unwrap_err();
    assert!(e.limit && e.message.contains("interpreting"), "{e}");

    // With room, the same runs give the same bits.
    memory::set_limit((args_bytes + scratch) * 64);
    let again = native.call(&refs).unwrap();
    for (a, w) in again.iter().zip(&want) {
        assert!(a.bits_eq(w));
    }
    {
        let mut o: Vec<NativeOut> = outs.iter_mut().map(|x| NativeOut::F64(x)).collect();
        native.call_into(&nargs, &mut o, &mut ws).unwrap();
    }
    assert!(interp::run(grad.value_and_grad_ir(), &refs).is_ok());

    // The optimizer keeps what it holds under the limit: a tape of every
    // state of a long loop, which it prefers while the limit allows it,
    // is priced out below it (checkpoints instead), so the gradient still
    // runs (found by tests/fuzz.rs, seed 0x15c24c5bc75e376a: a tape of
    // 2^32 states, 64 GiB, chosen where checkpoints fit in a megabyte).
    memory::set_limit(before);
    let p = Program::parse(
        "fn decay(a: f64) -> f64 = iterate(1048576, a, s => s * 0.999999 + 1e-7 * sin(s))
@grad(a)
fn ddecay(a: f64) -> f64 = decay(a)",
    )
    .unwrap();
    let opts = Options::default().function("ddecay");
    let held = |g: &egrad::GradProgram| g.residuals.total_bytes;
    let free = optimize_gradient(&p, &opts).unwrap();
    let a = [Value::scalar(DType::F64, 0.3)];
    let refs: Vec<&Value> = a.iter().collect();
    let want = free.compile().unwrap().native().call(&refs).unwrap();
    let small = (held(&free) / 4.0) as u64;
    assert!(small > 1 << 20, "the tape is held: {} bytes", held(&free));
    memory::set_limit(small);
    let tight = optimize_gradient(&p, &opts).unwrap();
    assert!(held(&tight) < small as f64, "{} bytes held", held(&tight));
    let got = tight.compile().unwrap().native().call(&refs).unwrap();
    for (g, w) in got.iter().zip(&want) {
        let (g, w) = (g.as_scalar(), w.as_scalar());
        assert!((g - w).abs() <= 1e-12 * w.abs(), "{g} vs {w}");
    }
    memory::set_limit(before);
}
