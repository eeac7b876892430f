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

/// Run the binary under `prlimit --as=BYTES` (an address-space limit,
/// RLIMIT_AS): its exit code and stderr; `None` without `prlimit`.
fn egrad_under_address_limit(bytes: u64, args: &[&str]) -> Option<(i32, String)> {
    let out = std::process::Command::new("prlimit")
        .arg(format!("--as={bytes}"))
        .arg(env!("CARGO_BIN_EXE_egrad"))
        .args(args)
        .stdout(std::process::Stdio::null())
        .output()
        .ok()?;
    Some((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

#[test]
fn an_address_space_limit_is_honoured_with_the_bytes_needed() {
    const AS: u64 = 4 << 30;
    let Some((code, err)) = egrad_under_address_limit(
        AS,
        &[
            "run",
            "examples/loss.eg",
            "--fn",
            "dloss_dw",
            "--random",
            "--dim",
            "N=1000000000",
            "--quiet",
        ],
    ) else {
        eprintln!("SKIPPED: `prlimit` (util-linux) is not installed, so no run under RLIMIT_AS");
        return;
    };
    // Was an abort (exit 134): the memory limit read only MemTotal.
    assert_eq!(code, 1, "{err}");
    assert!(
        err.starts_with("error: the random arguments up to `w: f32[N]` needs 8000000000 bytes")
            && err.contains("more than the memory limit of")
            && err.lines().count() == 1,
        "{err}"
    );
    // Runs that pass the first checks and then allocate more (the JSON of
    // the results, the interpreter's values, the arguments' copies) were
    // aborts too: each now runs or is refused with the bytes it needs.
    for extra in [
        &["N=100000000", "--json"][..],
        &["N=60000000", "--interp"],
        &["N=200000000", "--interp"],
    ] {
        let mut args = vec!["run", "examples/loss.eg", "--fn", "dloss_dw"];
        args.extend(["--random", "--quiet", "--dim"]);
        args.extend(extra);
        let (code, err) = egrad_under_address_limit(AS, &args).unwrap();
        assert!(code == 0 || code == 1, "{extra:?}: exit {code}: {err}");
        if code == 1 {
            assert!(err.contains(" needs ") && err.contains(" bytes"), "{err}");
        }
        assert!(
            !err.contains("memory allocation") && !err.contains("panicked"),
            "{err}"
        );
    }
}
