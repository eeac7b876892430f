//! Saturation under limits: rules that can grow the e-graph without bound
//! (commutativity and associativity of `add` and `mul`, loaded with
//! `Options::rules_dir` like `--rules DIR`) stop at a limit, the report
//! names the limit, and the gradient is still correct.

use egrad::internals::ir::interp::run;
use egrad::internals::pipeline::{optimize_gradient, Options};
use egrad::internals::rewrites::Limits;
use egrad::internals::types::value::Value;
use egrad::Program;
use std::time::Duration;

const UNBOUNDED: &str = "\
comm-add:  (add ?a ?b) => (add ?b ?a)
comm-mul:  (mul ?a ?b) => (mul ?b ?a)
assoc-add: (add (add ?a ?b) ?c) => (add ?a (add ?b ?c))
assoc-mul: (mul (mul ?a ?b) ?c) => (mul ?a (mul ?b ?c))
unassoc-add: (add ?a (add ?b ?c)) => (add (add ?a ?b) ?c)
";

const PROGRAM: &str = "\
fn poly(x: f64, y: f64) -> f64 =
  x * y + y * x * x + x * x * x * y + (x + y) * (x + y + 1.0) * sin(x * y) + exp(x + y + x * y)

@grad(x, y)
fn dpoly(x: f64, y: f64) -> (f64, f64) = poly(x, y)
";

/// A rules folder of its own per test (tests run in parallel).
fn rules_dir(test: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "egrad-limits-{}-{}",
        std::process::id(),
        test.replace(' ', "-")
    ));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("unbounded.rules"), UNBOUNDED).unwrap();
    dir
}

fn gradient(opts: Options) -> (Vec<Value>, egrad::GradProgram) {
    let p = Program::parse(PROGRAM).unwrap();
    let g = optimize_gradient(&p, &opts.function("dpoly")).unwrap();
    let args = [
        Value::scalar(egrad::internals::types::DType::F64, 0.7),
        Value::scalar(egrad::internals::types::DType::F64, -0.3),
    ];
    let refs: Vec<&Value> = args.iter().collect();
    (run(g.value_and_grad_ir(), &refs).unwrap(), g)
}

fn check_against_reference(name: &str, limits: Limits, want_stop: &str) {
    let dir = rules_dir(name);
    let (want, _) = gradient(Options::default().no_optimize(true));
    let mut opts = Options::default().limits(limits.clone());
    opts.rules_dir = Some(dir.clone());
    let (got, g) = gradient(opts);
    let sat = g.optimized.saturation.clone().unwrap();
    let report = g.report().to_string();
    assert!(sat.hit_limit, "{name}: expected a limit, got {report}");
    assert!(sat.stop_reason.starts_with(want_stop), "{name}: {report}");
    assert!(
        report.contains("limit hit; program still correct"),
        "{report}"
    );
    // Checked between iterations: one iteration may overshoot the limit.
    assert!(sat.iterations <= limits.iterations, "{name}: {report}");
    for (a, b) in got.iter().zip(&want) {
        let (x, y) = (a.as_scalar(), b.as_scalar());
        assert!(
            (x - y).abs() <= 1e-12 * (1.0 + y.abs()),
            "{name}: {x} vs {y}\n{report}"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn node_limit_stops_unbounded_rules_with_a_correct_gradient() {
    let limits = Limits {
        nodes: 3_000,
        iterations: 1_000,
        time: Duration::from_secs(60),
    };
    check_against_reference("node limit", limits, "node limit");
}

#[test]
fn iteration_limit_stops_unbounded_rules_with_a_correct_gradient() {
    let limits = Limits {
        nodes: 1_000_000,
        iterations: 4,
        time: Duration::from_secs(60),
    };
    check_against_reference("iteration limit", limits, "iteration limit");
}

#[test]
fn time_limit_stops_unbounded_rules_with_a_correct_gradient() {
    let limits = Limits {
        nodes: 10_000_000,
        iterations: 1_000_000,
        time: Duration::from_millis(200),
    };
    check_against_reference("time limit", limits, "time limit");
}
