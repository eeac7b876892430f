//! The middle and back of the pipeline on IR, independent of the parser:
//! AD → e-graph → extraction → JIT, checked against the interpreter.

mod common;

use egrad::internals::backend::{self, BackendOptions};
use egrad::internals::ir::interp::run;
use egrad::internals::ir::{parse_functions, Function};
use egrad::internals::pipeline::{optimize_gradient_ir, Options};
use egrad::internals::rewrites::Limits;
use egrad::internals::types::value::Value;
use egrad::internals::types::DType;
use egrad::SourceFile;
use std::time::Duration;

fn seed() -> Function {
    parse_functions(
        "fn loss[N](%w: f32[N], %x: f32[N], %y: f32) -> f32 {
  %0: f32[N] = mul %w %x
  %pred: f32 = sum %0
  %err: f32 = sub %pred %y
  %1: f32 = mul %err %err
  ret %1
}",
    )
    .unwrap()
    .remove(0)
}

fn file() -> SourceFile {
    SourceFile::new("<ir>", "")
}

#[test]
fn seed_gradient_optimized_and_compiled() {
    let g = optimize_gradient_ir("dloss_dw", &seed(), &[0], &Options::default(), &file()).unwrap();
    let grad = g.gradient_ir();
    // No symbolic zero, no multiplication by one, nothing computed twice.
    let text = grad.to_string();
    assert!(!text.contains("zero") && !text.contains("const"), "{text}");
    let mut seen = std::collections::HashSet::new();
    for s in &grad.stmts {
        assert!(seen.insert((s.op, s.args.clone())), "duplicate in\n{text}");
    }
    let report = g.report().to_string();
    assert!(report.contains("ops before: 10"), "{report}");
    assert!(report.contains("ops after:  7"), "{report}");
    assert!(report.contains("stop: saturated"), "{report}");

    let compiled = g.compile_with(&BackendOptions::verified()).unwrap();
    let (w, x) = ([1.0f32, 2.0, 3.0], [4.0f32, 5.0, 6.0]);
    use egrad::Arg;
    let (value, grads) = compiled
        .value_and_grad(&[Arg::f32(&w), Arg::f32(&x), Arg::scalar(0.5)])
        .unwrap();
    assert_eq!(value.as_scalar(), 31.5 * 31.5);
    assert_eq!(grads[0].data, vec![252.0, 315.0, 378.0]);
    let err = compiled
        .value_and_grad(&[Arg::f32(&w), Arg::f32(&x[..2]), Arg::scalar(0.5)])
        .unwrap_err();
    assert!(
        err.to_string().contains("arguments `w` and `x` disagree on `N`: `w` gives 3 (its length), `x` gives 2 (its length)"),
        "{err}"
    );
}

#[test]
fn jit_equals_interpreter_on_the_optimized_gradient() {
    let g = optimize_gradient_ir("g", &seed(), &[0, 1, 2], &Options::default(), &file()).unwrap();
    let f = g.value_and_grad_ir();
    let native = backend::compile(f, &BackendOptions::verified()).unwrap();
    for n in [0usize, 1, 7, 1000] {
        let w = Value::f32(&(0..n).map(|i| (i as f32 * 0.37).sin()).collect::<Vec<_>>());
        let x = Value::f32(&(0..n).map(|i| (i as f32 * 0.11).cos()).collect::<Vec<_>>());
        let y = Value::scalar(DType::F32, 0.25);
        let a = native.call(&[&w, &x, &y]).unwrap();
        let b = run(f, &[&w, &x, &y]).unwrap();
        for (p, q) in a.iter().zip(&b) {
            assert!(p.bits_eq(q), "n = {n}: {p:?} vs {q:?}");
        }
    }
}

#[test]
fn optimizing_is_deterministic() {
    let first = optimize_gradient_ir("g", &seed(), &[0, 1, 2], &Options::default(), &file())
        .unwrap()
        .gradient_ir()
        .to_string();
    for _ in 0..10 {
        let again = optimize_gradient_ir("g", &seed(), &[0, 1, 2], &Options::default(), &file())
            .unwrap()
            .gradient_ir()
            .to_string();
        assert_eq!(first, again);
    }
}

#[test]
fn a_limit_hit_is_reported_and_the_program_is_still_correct() {
    let limits = Limits {
        nodes: 10,
        iterations: 1,
        time: Duration::from_secs(1),
    };
    let g = optimize_gradient_ir(
        "g",
        &seed(),
        &[0],
        &Options::default().limits(limits),
        &file(),
    )
    .unwrap();
    let sat = g.optimized.saturation.as_ref().unwrap();
    assert!(sat.hit_limit, "{sat:?}");
    assert!(g.report().to_string().contains("limit hit"));
    let w = Value::f32(&[1.0, 2.0, 3.0]);
    let x = Value::f32(&[4.0, 5.0, 6.0]);
    let y = Value::scalar(DType::F32, 0.5);
    let out = run(&g.gradient_ir(), &[&w, &x, &y]).unwrap();
    assert_eq!(out[0].data, vec![252.0, 315.0, 378.0]);
}

/// The gradient alone (`gradient_ir`: the value-and-gradient program
/// without its value, common subexpressions computed once, commutative
/// operands in one order) gives the value-and-gradient program's
/// gradients bit for bit, in the interpreter and in native code, for
/// every `@grad` function of every example; and no statement of it
/// repeats another.
#[test]
fn the_gradient_alone_shares_and_keeps_every_bit() {
    use egrad::internals::pipeline::optimize_gradient;
    use egrad::Program;
    let mut checked = 0;
    for path in common::all_example_files() {
        let p = Program::from_file(&path).unwrap();
        for name in p.function_names() {
            if p.grad_spec(name).is_none() {
                continue;
            }
            let g = optimize_gradient(&p, &Options::default().function(name)).unwrap();
            let grad = g.gradient_ir();
            let mut seen = std::collections::HashSet::new();
            for s in &grad.stmts {
                let mut args = s.args.clone();
                if s.op.is_commutative() {
                    args.sort();
                }
                assert!(
                    seen.insert((s.op, args, grad.ty(s.var).clone())),
                    "{}: `{name}` computes %{} twice:\n{grad}",
                    path.display(),
                    grad.var_name(s.var)
                );
            }
            let args = common::sample_args(&g.value_and_grad_ir().clone(), 5);
            let refs: Vec<&Value> = args.iter().collect();
            let want = run(g.value_and_grad_ir(), &refs).unwrap();
            let got = run(&grad, &refs).unwrap();
            let native = backend::compile(&grad, &BackendOptions::verified())
                .unwrap()
                .call(&refs)
                .unwrap();
            for (k, w) in want[1..].iter().enumerate() {
                let bits = |v: &Value| v.data.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(w), bits(&got[k]), "{}: `{name}`", path.display());
                assert_eq!(
                    bits(w),
                    bits(&native[k]),
                    "{}: `{name}` native",
                    path.display()
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} gradients checked");
}
