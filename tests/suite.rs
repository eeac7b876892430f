//! The benchmark suite (`bench-suite.md`) against the JAX float64 reference
//! in `tests/data/bench-reference.json`.
//!
//! For each benchmark listed in `benchmarks!` below, its example program
//! (`egrad::internals::suite::BENCHMARKS` says which file and functions) is loaded, fed
//! the suite's bit-exact f64 inputs, and its loss function and `@grad`
//! function are run three ways: the reference interpreter on the checked IR,
//! the JIT on the e-graph-optimized IR (what `egrad run` does), and the
//! library's `optimize_gradient` value-and-gradient program through the JIT.
//! Every loss and gradient is compared with the reference.
//!
//! Tolerances (bench-suite.md: independent implementations agree to about
//! 1e-13 relative; it asks for 1e-10):
//! * loss and each gradient's L2 norm: 1e-10 relative;
//! * `first8` and `strided` components: 1e-10 · max|g| absolute, where
//!   max|g| is the largest magnitude among the reference's listed components
//!   and egrad's own gradient;
//! * `sum`: 1e-10 · Σ|g_i| absolute (the bound for a sum whose terms are
//!   each within 1e-10 relative; Σ|g_i| ≤ n · max|g|), the sum itself taken
//!   with compensated summation so the check adds no rounding of its own.
//!
//! Each benchmark is its own test, named by its key, so `cargo test --test
//! suite` lists what was checked; `-- --nocapture` also prints the largest
//! error seen per benchmark.

use egrad::internals::backend::{self, BackendOptions};
use egrad::internals::ir::interp;
use egrad::internals::suite::{self, Benchmark};
use egrad::internals::types::value::Value;
use egrad::internals::types::DType;
use egrad::Program;
use egrad::{optimize_gradient, optimize_ir, Arg, Options};
use serde_json::Value as Json;
use std::path::Path;

/// One test per benchmark key of `bench-reference.json`. To check another
/// benchmark, add its key here (its row in `egrad::internals::suite::BENCHMARKS` says
/// which example and functions to run; a missing file or function fails).
macro_rules! benchmarks {
    ($($key:ident),* $(,)?) => {
        /// The keys checked, in order.
        const CHECKED: &[&str] = &[$(stringify!($key)),*];
        $(
            #[test]
            #[allow(non_snake_case)]
            fn $key() {
                check_benchmark(stringify!($key));
            }
        )*
    };
}

benchmarks! {
    linreg_16,
    linreg_1M,
    power_static,
    rosenbrock,
    logistic,
    mlp2,
    euler_ode,
}

const REL: f64 = 1e-10;

fn reference() -> Json {
    let text = include_str!("data/bench-reference.json");
    serde_json::from_str(text).expect("tests/data/bench-reference.json is JSON")
}

fn f64s(j: &Json, what: &str) -> Vec<f64> {
    j.as_array()
        .unwrap_or_else(|| panic!("{what}: not an array"))
        .iter()
        .map(|x| x.as_f64().unwrap_or_else(|| panic!("{what}: not numbers")))
        .collect()
}

fn num(j: &Json, what: &str) -> f64 {
    j.as_f64().unwrap_or_else(|| panic!("{what}: not a number"))
}

/// Neumaier's compensated sum.
fn sum(xs: &[f64]) -> f64 {
    let (mut s, mut c) = (0.0f64, 0.0f64);
    for &x in xs {
        let t = s + x;
        c += if s.abs() >= x.abs() {
            (s - t) + x
        } else {
            (x - t) + s
        };
        s = t;
    }
    s + c
}

/// Largest error seen, as a fraction of its tolerance.
#[derive(Default)]
struct Worst {
    ratio: f64,
    what: String,
}

impl Worst {
    /// Check `|got - want| <= tol` (NaN fails).
    fn check(&mut self, errors: &mut Vec<String>, what: String, got: f64, want: f64, tol: f64) {
        let err = (got - want).abs();
        if err.is_nan() || err > tol {
            errors.push(format!(
                "{what}: got {got:e}, want {want:e} (error {err:e} > tolerance {tol:e})"
            ));
        }
        let ratio = if tol > 0.0 { err / tol } else { f64::INFINITY };
        if ratio.is_nan() || ratio > self.ratio {
            self.ratio = ratio;
            self.what = what;
        }
    }
}

/// Compare one run's loss (if it returns one) and gradients with the
/// reference entry `r`.
fn compare(
    how: &str,
    b: &Benchmark,
    r: &Json,
    loss: Option<&Value>,
    grads: Option<&[Value]>,
    worst: &mut Worst,
    errors: &mut Vec<String>,
) {
    if let Some(loss) = loss {
        if !loss.is_scalar() {
            errors.push(format!("{how}: loss has shape {:?}", loss.shape));
        }
        let want = num(&r["loss"], "loss");
        worst.check(
            errors,
            format!("{how}: loss"),
            loss.as_scalar(),
            want,
            REL * want.abs(),
        );
    }
    let Some(grads) = grads else { return };
    if grads.len() != b.wrt.len() {
        errors.push(format!(
            "{how}: {} gradient(s), the reference has {} ({:?})",
            grads.len(),
            b.wrt.len(),
            b.wrt
        ));
        return;
    }
    for (g, w) in grads.iter().zip(b.wrt) {
        let rg = &r["grad"][*w];
        let what = |s: &str| format!("{how}: d/d{w} {s}");
        let shape: Vec<usize> = rg["shape"]
            .as_array()
            .unwrap_or_else(|| panic!("{}: reference has no gradient for {w}", b.key))
            .iter()
            .map(|d| d.as_u64().expect("shape") as usize)
            .collect();
        if g.shape != shape {
            errors.push(format!("{}: shape {:?}, want {shape:?}", what(""), g.shape));
            continue;
        }
        if g.dtype != DType::F64 {
            errors.push(format!("{}: dtype {}, want f64", what(""), g.dtype));
        }
        let first8 = f64s(&rg["first8"], "first8");
        let idx: Vec<usize> = rg["strided_idx"]
            .as_array()
            .expect("strided_idx")
            .iter()
            .map(|i| i.as_u64().expect("strided_idx") as usize)
            .collect();
        let strided = f64s(&rg["strided"], "strided");
        assert_eq!(first8.len(), g.len().min(8), "{}: reference first8", b.key);
        assert_eq!(idx.len(), strided.len(), "{}: reference strided", b.key);

        let max_g = first8
            .iter()
            .chain(&strided)
            .chain(&g.data)
            .fold(0.0f64, |m, x| m.max(x.abs()));
        let comp_tol = REL * max_g;
        for (i, want) in first8.iter().enumerate() {
            worst.check(errors, what(&format!("[{i}]")), g.data[i], *want, comp_tol);
        }
        for (i, want) in idx.iter().zip(&strided) {
            match g.data.get(*i) {
                Some(got) => worst.check(errors, what(&format!("[{i}]")), *got, *want, comp_tol),
                None => errors.push(format!("{}: no element {i}", what(""))),
            }
        }
        let l2 = sum(&g.data.iter().map(|x| x * x).collect::<Vec<_>>()).sqrt();
        let want_l2 = num(&rg["l2"], "l2");
        worst.check(errors, what("l2"), l2, want_l2, REL * want_l2.abs());
        let l1 = sum(&g.data.iter().map(|x| x.abs()).collect::<Vec<_>>());
        worst.check(
            errors,
            what("sum"),
            sum(&g.data),
            num(&rg["sum"], "sum"),
            REL * l1,
        );
    }
}

fn check_benchmark(key: &str) {
    let b = suite::benchmark(key)
        .unwrap_or_else(|| panic!("{key}: not in egrad::internals::suite::BENCHMARKS"));
    let all = reference();
    let r = &all[key];
    assert!(r.is_object(), "{key}: not in bench-reference.json");
    let wrt_ref: Vec<&str> = r["wrt"]
        .as_array()
        .expect("wrt")
        .iter()
        .map(|w| w.as_str().expect("wrt"))
        .collect();
    assert_eq!(wrt_ref, b.wrt, "{key}: wrt");

    // A missing example or function is a failure, not a skip.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(b.example);
    let program = Program::from_file(&path)
        .unwrap_or_else(|e| panic!("{key}: {} does not load:\n{e}", b.example));
    let loss_f = program
        .ir(b.loss_fn)
        .unwrap_or_else(|e| panic!("{key}: {}: {e}", b.example));
    let grad_f = program
        .ir(b.grad_fn)
        .unwrap_or_else(|e| panic!("{key}: {}: {e}", b.example));

    // The @grad attribute names the reference's wrt list, in its order.
    let spec = program
        .grad_spec(b.grad_fn)
        .unwrap_or_else(|| panic!("{key}: `{}` is not a @grad function", b.grad_fn));
    let wrt_pos: Vec<usize> = b
        .wrt
        .iter()
        .map(|w| b.inputs.iter().position(|i| i.name == *w).expect("wrt"))
        .collect();
    assert_eq!(
        spec.wrt, wrt_pos,
        "{key}: `{}` must differentiate {:?}, in that order",
        b.grad_fn, b.wrt
    );

    let inputs = b.values(DType::F64);
    let refs: Vec<&Value> = inputs.iter().collect();
    let show = |e: &dyn std::fmt::Display| format!("{key}: {}: {e}", b.example);
    // Checks count, dtypes and shapes against the signature; binds sizes,
    // which the cost model then prices at.
    let dims = interp::bind_args(loss_f, &refs).unwrap_or_else(|e| panic!("{}", show(&e)));
    interp::bind_args(grad_f, &refs).unwrap_or_else(|e| panic!("{}", show(&e)));
    let opts = Options {
        dims,
        ..Options::default()
    };
    let bo = BackendOptions::verified();

    let mut errors = Vec::new();
    let mut worst = Worst::default();

    // Reference interpreter on the checked (unoptimized) IR.
    let loss_i = interp::run(loss_f, &refs).unwrap_or_else(|e| panic!("{}", show(&e)));
    let grads_i = interp::run(grad_f, &refs).unwrap_or_else(|e| panic!("{}", show(&e)));
    if loss_i.len() != 1 {
        errors.push(format!(
            "interp: `{}` returns {} values",
            b.loss_fn,
            loss_i.len()
        ));
    }
    compare(
        "interp",
        b,
        r,
        loss_i.first(),
        Some(&grads_i),
        &mut worst,
        &mut errors,
    );

    // The JIT on the optimized IR, as `egrad run` does.
    let jit = |f| {
        let opt = optimize_ir(f, &opts).unwrap_or_else(|e| panic!("{}", show(&e)));
        let native = backend::compile(&opt.after, &bo).unwrap_or_else(|e| panic!("{}", show(&e)));
        native
            .call(&refs)
            .unwrap_or_else(|e| panic!("{}", show(&e)))
    };
    let loss_j = jit(loss_f);
    let grads_j = jit(grad_f);
    compare(
        "jit",
        b,
        r,
        loss_j.first(),
        Some(&grads_j),
        &mut worst,
        &mut errors,
    );

    // The library: optimize_gradient, value and gradient in one program.
    let g = optimize_gradient(&program, &opts.clone().function(b.grad_fn))
        .unwrap_or_else(|e| panic!("{}", show(&e)));
    let compiled = g
        .compile_with(&bo)
        .unwrap_or_else(|e| panic!("{}", show(&e)));
    let args: Vec<Arg> = inputs.iter().map(|v| Arg::Value(v.clone())).collect();
    let (value, grads) = compiled
        .value_and_grad(&args)
        .unwrap_or_else(|e| panic!("{}", show(&e)));
    compare(
        "value_and_grad",
        b,
        r,
        Some(&value),
        Some(&grads),
        &mut worst,
        &mut errors,
    );

    let worst_at = if worst.what.is_empty() {
        "every value exact".to_string()
    } else {
        format!(
            "worst error {:.2e} of its tolerance at {}",
            worst.ratio, worst.what
        )
    };
    println!(
        "checked {key} ({}: {}, {}{}): {worst_at}",
        b.example,
        b.loss_fn,
        b.grad_fn,
        b.signature(DType::F64),
    );
    assert!(
        errors.is_empty(),
        "{key}: {} mismatch(es) with bench-reference.json:\n  {}",
        errors.len(),
        errors[..errors.len().min(20)].join("\n  ")
    );
}

/// The checked keys are benchmarks of the suite and of the reference, each
/// once; prints which are checked and which are not yet.
#[test]
fn checked_benchmarks_are_known() {
    let all = reference();
    for (n, key) in CHECKED.iter().enumerate() {
        assert!(
            suite::benchmark(key).is_some(),
            "{key}: not in the suite table"
        );
        assert!(all[*key].is_object(), "{key}: not in bench-reference.json");
        assert!(!CHECKED[..n].contains(key), "{key}: listed twice");
    }
    let rest: Vec<&str> = suite::keys()
        .into_iter()
        .filter(|k| !CHECKED.contains(k))
        .collect();
    println!("suite benchmarks checked: {}", CHECKED.join(", "));
    println!("not yet checked: {}", rest.join(", "));
}

/// `egrad run FILE --fn F --suite NAME` feeds F the benchmark's inputs.
#[test]
fn cli_runs_a_function_on_suite_inputs() {
    let egrad = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_egrad"))
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("run egrad");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let r = reference();
    let run = |f: &str, extra: &[&str]| {
        let mut a = vec![
            "run",
            "examples/suite/linreg.eg",
            "--fn",
            f,
            "--suite",
            "linreg_16",
        ];
        a.extend_from_slice(extra);
        egrad(&a)
    };

    let (code, out, err) = run("linreg", &[]);
    assert_eq!(code, 0, "{err}");
    let loss: f64 = out.trim().parse().expect("a number");
    let want = r["linreg_16"]["loss"].as_f64().unwrap();
    assert!((loss - want).abs() <= REL * want, "{loss} vs {want}");

    let (code, out, err) = run("linreg_grad", &["--interp"]);
    assert_eq!(code, 0, "{err}");
    let first = out.trim().trim_start_matches('[');
    let g0: f64 = first.split(',').next().unwrap().trim().parse().unwrap();
    let want = r["linreg_16"]["grad"]["w"]["first8"][0].as_f64().unwrap();
    assert!((g0 - want).abs() <= REL * want.abs(), "{g0} vs {want}");

    // f64 inputs to an f32 function: an error that says what to do.
    let (code, _, err) = egrad(&[
        "run",
        "examples/loss.eg",
        "--fn",
        "loss",
        "--suite",
        "linreg_16",
    ]);
    assert_eq!(code, 2, "a usage error");
    assert!(err.contains("add --f32"), "{err}");
    let (code, out, err) = egrad(&[
        "run",
        "examples/loss.eg",
        "--fn",
        "loss",
        "--suite",
        "linreg_16",
        "--f32",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        (out.trim().parse::<f64>().unwrap() - 0.38237472).abs() < 1e-4,
        "{out}"
    );

    // Wrong parameter count, rank or length: errors, not panics; the rank
    // and length errors point at the parameter (the usual argument check).
    let (code, _, err) = egrad(&[
        "run",
        "examples/cube.eg",
        "--fn",
        "cube",
        "--suite",
        "linreg_16",
    ]);
    assert_eq!(code, 2, "a usage error");
    assert!(
        err.contains("--suite linreg_16 supplies 3 argument(s)"),
        "{err}"
    );
    let (code, _, err) = egrad(&[
        "run",
        "examples/gauss.eg",
        "--fn",
        "nll",
        "--suite",
        "linreg_16",
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("argument `mu`") && err.contains("gauss.eg:"),
        "{err}"
    );
    let (code, _, err) = run("linreg_grad", &["--arg", "x=[1,2,3]"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("`x` gives 3") && err.contains("linreg.eg:"),
        "{err}"
    );
}
