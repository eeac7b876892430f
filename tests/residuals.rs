//! Store or recompute: every `@grad` function of every example, optimized
//! at several λ, gives the gradient of the store-everything program; λ = 0
//! stores every residual, a huge λ recomputes every one; and the same
//! program optimized ten times gives byte-identical extracted programs.

mod common;

use egrad::internals::ir::interp::run;
use egrad::internals::pipeline::{optimize_gradient, GradProgram, Options};
use egrad::Program;

/// The `@grad` functions of every example, with the file they come from.
fn grad_functions() -> Vec<(std::path::PathBuf, Program, String)> {
    let mut out = Vec::new();
    for path in common::all_example_files() {
        let p = Program::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<String> = p
            .function_names()
            .into_iter()
            .filter(|n| p.grad_spec(n).is_some())
            .map(String::from)
            .collect();
        for n in names {
            out.push((path.clone(), p.clone(), n));
        }
    }
    out
}

fn optimize(p: &Program, name: &str, lambda: f64) -> GradProgram {
    optimize_gradient(p, &Options::default().function(name).lambda(lambda))
        .unwrap_or_else(|e| panic!("{name} at λ = {lambda}: {e}"))
}

#[test]
fn every_lambda_gives_the_same_gradient() {
    let mut checked = 0;
    let mut recomputed_somewhere = 0;
    for (path, p, name) in grad_functions() {
        let all_stored = optimize(&p, &name, 0.0);
        let f = all_stored.value_and_grad_ir();
        let args = common::sample_args(f, 6);
        let refs: Vec<_> = args.iter().collect();
        let want = run(f, &refs).unwrap();
        if all_stored
            .optimized
            .saturation
            .as_ref()
            .is_some_and(|s| s.iterations == 0)
        {
            continue; // compiled unoptimized (too large for the e-graph)
        }
        assert!(
            all_stored
                .optimized
                .residual_choices
                .iter()
                .all(|c| c.stored),
            "{}: {name}: λ = 0 must store every residual:\n{}",
            path.display(),
            all_stored.report()
        );
        for lambda in [0.25, 2.0, 1e12] {
            let g = optimize(&p, &name, lambda);
            let got = run(g.value_and_grad_ir(), &refs).unwrap();
            for (a, b) in got.iter().zip(&want) {
                for (x, y) in a.data.iter().zip(&b.data) {
                    assert!(
                        (x - y).abs() <= 1e-12 * (1.0 + y.abs()),
                        "{}: {name} at λ = {lambda}: {x} vs {y} (store everything)\n{}",
                        path.display(),
                        g.value_and_grad_ir()
                    );
                }
            }
            assert!(
                g.optimized.bytes_after <= all_stored.optimized.bytes_after,
                "{}: {name}: λ = {lambda} stores more than λ = 0",
                path.display()
            );
            if lambda == 1e12 {
                // A loop's tape (`looptape`) holds the same memory whether
                // stored or recomputed by the pullback, so it stays stored;
                // the one AD made must be the sparsest one offered (a tape
                // the program reads itself, `scan_all`'s, keeps every state).
                let tape =
                    |c: &&egrad::internals::extract::ResidualChoice| c.name.contains(".tape");
                let vg = g.value_and_grad_ir();
                let is_tape = |c: &&egrad::internals::extract::ResidualChoice| {
                    tape(c)
                        || vg.stmts.iter().any(|s| {
                            matches!(s.op, egrad::internals::ops::Op::LoopTape(..))
                                && vg.var_name(s.var) == c.name
                        })
                };
                assert!(
                    g.optimized
                        .residual_choices
                        .iter()
                        .filter(|c| !is_tape(c))
                        .all(|c| !c.stored),
                    "{}: {name}: a huge λ must recompute every residual:\n{}",
                    path.display(),
                    g.report()
                );
                // Not yet: checkpoints of a loop whose step reads values
                // the state does not carry (its captures): its walk back
                // reads the whole tape.
                let captured = |c: &&egrad::internals::extract::ResidualChoice| {
                    vg.stmts.iter().any(|s| match s.op {
                        egrad::internals::ops::Op::LoopTape(l, ..) => {
                            vg.var_name(s.var) == c.name && vg.loops[l as usize].captures > 0
                        }
                        _ => false,
                    })
                };
                assert!(
                    g.optimized
                        .residual_choices
                        .iter()
                        .filter(tape)
                        .filter(|c| !captured(c))
                        .all(|c| {
                            // A checkpoint every k states, k of √count or more.
                            c.name
                                .rsplit_once(".every")
                                .and_then(|(_, k)| k.parse::<u64>().ok())
                                .is_some_and(|k| k >= 32)
                        }),
                    "{}: {name}: a huge λ must keep the sparsest tape:\n{}",
                    path.display(),
                    g.report()
                );
            }
            recomputed_somewhere += g
                .optimized
                .residual_choices
                .iter()
                .filter(|c| !c.stored)
                .count();
            checked += 1;
        }
    }
    println!("{checked} (function, λ) pairs checked, {recomputed_somewhere} residuals recomputed");
    assert!(checked >= 30, "{checked}");
    assert!(recomputed_somewhere > 0);
}

#[test]
fn optimizing_ten_times_gives_identical_programs() {
    for (path, _, name) in grad_functions() {
        let text = std::fs::read_to_string(&path).unwrap();
        let dump = || {
            // A fresh parse each time: nothing is shared between runs.
            let p = Program::parse(&text).unwrap();
            let g = optimize(&p, &name, 0.25);
            format!("{}\n{}", g.value_and_grad_ir(), g.residuals)
        };
        let first = dump();
        for _ in 1..10 {
            assert_eq!(dump(), first, "{}: {name}", path.display());
        }
    }
}

#[test]
fn the_report_lists_every_residual_choice() {
    let p = Program::from_file("examples/smooth.eg").unwrap();
    let g = optimize(&p, "dpenalty", 0.25);
    let report = g.report().to_string();
    let choices = &g.optimized.residual_choices;
    assert!(!choices.is_empty());
    assert!(report.contains("store or recompute:"), "{report}");
    for c in choices {
        let word = if c.stored { "stored" } else { "recomputed" };
        assert!(
            report.contains(&format!("%{}: {}  {word}", c.name, c.ty)),
            "{report}"
        );
    }
    // sqrt, sin and cos are dearer to recompute than to store at λ = 0.25;
    // 1 + exp(x), one add, is recomputed.
    assert!(choices.iter().any(|c| c.stored) && choices.iter().any(|c| !c.stored));
}

#[test]
fn compiled_code_keeps_what_is_stored_and_not_what_is_recomputed() {
    use egrad::internals::explore::{explore, Timing};
    use std::time::Duration;
    let p = Program::from_file("examples/suite/power_static.eg").unwrap();
    let n = 1000;
    let opts = Options::default()
        .function("power_static_grad")
        .dim("N", n as u64);
    let x = egrad::internals::types::value::Value::f64(
        &(0..n).map(|i| (i as f64 * 0.37).sin()).collect::<Vec<_>>(),
    );
    let timing = Timing {
        budget: Duration::from_millis(1),
        min_calls: 1,
    };
    let e = explore(&p, &opts, &[0.0, 1e6], Some(&[x]), timing).unwrap();
    let (store, recompute) = (&e.points[0], &e.points[1]);
    // λ = 0 stores the 17 intermediate powers the pullback reads (x^2 ..
    // x^17 and x^19: commutativity makes x^a·x^b and x^b·x^a one product,
    // so the pullback pairs its terms and x^18 is only a step) and the
    // compiled code keeps them in memory; recomputing them needs fewer
    // buffers.
    assert_eq!(store.stored, 17, "{e}");
    let (sb, rb) = (store.buffer_bytes.unwrap(), recompute.buffer_bytes.unwrap());
    assert!(
        sb as f64 >= store.residual_bytes && rb < sb,
        "stored {sb} bytes, recomputed {rb}, residuals {}\n{e}",
        store.residual_bytes
    );
    assert_eq!(recompute.residual_bytes, 0.0, "{e}");
    // Both give the same value and gradient.
    for (a, b) in store.outputs.iter().zip(&recompute.outputs) {
        for (x, y) in a.data.iter().zip(&b.data) {
            assert!((x - y).abs() <= 1e-12 * (1.0 + y.abs()), "{x} vs {y}");
        }
    }
}
