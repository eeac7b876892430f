//! `--fast-math` against the strict program: the fast-math rules, saturated
//! together with every other rule and extracted, must give the strict
//! program's values and gradients up to rounding.
//!
//! **The bound.** Fast math reassociates (`x·c·c` as `x·(c·c)`, sums of
//! like terms, factoring), swaps a libm call for another (`log(1 + x)` as
//! `log1p(x)`, `x·x` for `pow(x, 2)`) and divides by a constant as a
//! multiply by its rounded reciprocal. Each such change moves one rounding
//! of a value by at most a few units in the last place, 2^-52 ≈ 2.2e-16
//! relative; the examples and the random programs are well-conditioned
//! (their values are bounded by `tanh`, scaled by powers of two, and their
//! inputs are in (-1, 1)), so a change propagates with a condition number
//! far below 10^4, through at most a few hundred changed operations. That
//! gives at most about 10^-10 of the largest magnitude involved. We allow
//! 1e-9 relative to `max(1, |strict|, |fast|)` (the same bound as the
//! optimized-against-unoptimized check of `tests/random_programs.rs`): a
//! rule that is not an identity, like the broadcast-constant collapse
//! that made `gauss.eg`'s gradient `-N` (issue 32), misses it by orders of
//! magnitude.

mod common;

use common::{all_example_files, egrad, sample_args};
use egrad::internals::ir::interp::run;
use egrad::internals::pipeline::{optimize_gradient, optimize_ir, Options};
use egrad::internals::types::value::Value;
use egrad::internals::types::DType;
use egrad::{ErrorKind, Program};

/// The bound of the module docs.
const REL: f64 = 1e-9;

fn close(fast: f64, strict: f64) -> bool {
    (fast.is_nan() && strict.is_nan())
        || fast == strict
        || (fast - strict).abs() <= REL * 1f64.max(fast.abs()).max(strict.abs())
}

/// Compare two runs' results; where the strict one is not finite, fast
/// math may give anything (it assumes finite values).
fn compare(fast: &[Value], strict: &[Value], what: &str) -> Result<(), String> {
    if fast.len() != strict.len() {
        return Err(format!(
            "{what}: {} results vs {}",
            fast.len(),
            strict.len()
        ));
    }
    for (k, (f, s)) in fast.iter().zip(strict).enumerate() {
        if f.shape != s.shape {
            return Err(format!(
                "{what}: result {k} shape {:?} vs {:?}",
                f.shape, s.shape
            ));
        }
        for (i, (a, b)) in f.data.iter().zip(&s.data).enumerate() {
            if b.is_finite() && !close(*a, *b) {
                return Err(format!(
                    "{what}: result {k} element {i}: fast math {a:e} vs strict {b:e}"
                ));
            }
        }
    }
    Ok(())
}

const ISSUE: &str = "fn f[N](x: f64[N], mu: f64) -> f64 {
  let z = x - mu
  +/(0.5 * z .* z)
}
@grad(mu)
fn df[N](x: f64[N], mu: f64) -> f64 = f(x, mu)
";

/// Issue 32's program: 0.9 both ways (it printed -3 with fast math).
#[test]
fn the_issue_program_prints_the_same_with_fast_math() {
    let dir = tempdir("issue");
    let file = dir.join("p.eg");
    std::fs::write(&file, ISSUE).unwrap();
    let file = file.to_str().unwrap();
    for fast in [false, true] {
        let mut args = vec!["run", file, "--fn", "df", "--arg", "x=[0.1,0.2,0.3]"];
        args.extend(["--arg", "mu=0.5"]);
        if fast {
            args.push("--fast-math");
        }
        let (code, out, err) = egrad(&args);
        assert_eq!(code, 0, "{err}");
        let v: f64 = out.trim().parse().unwrap_or_else(|e| panic!("{out}: {e}"));
        assert!((v - 0.9).abs() < 1e-12, "fast math {fast}: {v}");
    }
}

/// The acceptance's command: `fdcheck` of `gauss.eg`'s gradient with fast
/// math passes (its gradient in `mu` was `-N`).
#[test]
fn gauss_fdcheck_passes_with_fast_math() {
    for seed in ["0", "1", "2"] {
        let (code, out, err) = egrad(&[
            "fdcheck",
            "examples/gauss.eg",
            "--fn",
            "dnll",
            "--random",
            "--dim",
            "N=3",
            "--fast-math",
            "--seed",
            seed,
        ]);
        assert_eq!(code, 0, "seed {seed}:\n{out}{err}");
    }
}

/// Every function of every example (and suite program), optimized with and
/// without fast math, and every gradient egrad can take of it, on the same
/// arguments at two sizes: the results agree within the bound.
#[test]
fn fast_math_matches_strict_on_every_example() {
    let mut failures = Vec::new();
    let mut compared = 0;
    let mut gradients = 0;
    for path in all_example_files() {
        let p = match Program::from_file(&path) {
            Ok(p) => p,
            Err(e) => panic!("{}: {e}", path.display()),
        };
        for name in p.function_names() {
            let Ok(f) = p.ir(name) else { continue };
            let what = format!("{} {name}", path.display());
            for n in [3, 7] {
                let args = sample_args(f, n);
                let refs: Vec<&Value> = args.iter().collect();
                let Ok(want) = run(f, &refs) else { continue };
                let strict = optimize_ir(f, &Options::default())
                    .unwrap_or_else(|e| panic!("{what}: {e}"))
                    .after;
                let fast = optimize_ir(f, &Options::default().fast_math(true))
                    .unwrap_or_else(|e| panic!("{what} (fast math): {e}"))
                    .after;
                let s = run(&strict, &refs).unwrap_or_else(|e| panic!("{what}: {e:?}"));
                let got = run(&fast, &refs).unwrap_or_else(|e| panic!("{what}: {e:?}"));
                if let Err(e) = compare(&s, &want, &format!("{what} (exact rules, n={n})")) {
                    failures.push(e);
                }
                if let Err(e) = compare(&got, &want, &format!("{what} (n={n})")) {
                    failures.push(e);
                }
                compared += 1;
            }
            // The gradient pipeline (store or recompute, then extraction).
            let scalar = f.rets.len() == 1
                && f.ty(f.rets[0]).is_scalar()
                && matches!(f.ty(f.rets[0]).dtype, DType::F32 | DType::F64);
            if !(scalar || p.grad_spec(name).is_some()) {
                continue;
            }
            let opts = |fast: bool| Options::default().function(name).fast_math(fast);
            let (Ok(gs), Ok(gf)) = (
                optimize_gradient(&p, &opts(false)),
                optimize_gradient(&p, &opts(true)),
            ) else {
                continue;
            };
            for n in [3, 7] {
                let args = sample_args(&gs.primal, n);
                let refs: Vec<&Value> = args.iter().collect();
                let Ok(want) = run(&gs.ad.value_and_grad, &refs) else {
                    continue;
                };
                let got = run(gf.value_and_grad_ir(), &refs)
                    .unwrap_or_else(|e| panic!("{what} gradient: {e:?}"));
                if let Err(e) = compare(&got, &want, &format!("{what} gradient (n={n})")) {
                    failures.push(e);
                }
                gradients += 1;
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(compared > 100 && gradients > 50, "{compared} {gradients}");
}

/// A fresh directory under the target folder.
fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("fast_math_{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Found by the fuzzer: `x / 1e-320` became `x · (1/1e-320)` = `x · inf`
/// (0 gave NaN, 1e-300 gave inf for 1e20). A reciprocal that overflows or
/// is subnormal is no rounding of the real one (`invertible`).
#[test]
fn division_by_a_constant_whose_reciprocal_overflows_is_kept() {
    for (c, x) in [("1e-320", 1e-300), ("1e-320", 0.0), ("1.7e308", 1e300)] {
        let src = format!("fn f(x: f64) -> f64 = x / {c}\n");
        let p = Program::parse(&src).unwrap();
        let f = p.ir("f").unwrap();
        let arg = Value::scalar(DType::F64, x);
        let want = run(f, &[&arg]).unwrap();
        let fast = optimize_ir(f, &Options::default().fast_math(true))
            .unwrap()
            .after;
        let got = run(&fast, &[&arg]).unwrap();
        assert!(want[0].as_scalar().is_finite(), "{c} {x}");
        assert_eq!(compare(&got, &want, &format!("x / {c} at {x}")), Ok(()));
    }
}

fn with_rules(dir: &std::path::Path, fast: bool) -> Options {
    let mut o = Options::default().fast_math(fast);
    o.rules_dir = Some(dir.to_path_buf());
    o
}

/// A rule that is not an identity (`a·b => b`) makes the e-graph prove
/// 6 = 3 on `x · 2 · 3`: with exact rules from a directory that is the
/// user's rules' fault, a usage error; in the directory's fast-math file,
/// the program is optimized with the exact rules instead, and the report
/// says so. No program is extracted from the inconsistent e-graph.
#[test]
fn a_rule_set_that_proves_two_constants_equal_is_never_extracted() {
    let src = "fn f(x: f64) -> f64 = x * 2.0 * 3.0\n";
    let p = Program::parse(src).unwrap();
    let f = p.ir("f").unwrap();
    let bad = "bad: (mul ?a ?b) => ?b\n";
    // In an exact file: refused.
    let exact = tempdir("exact");
    std::fs::write(exact.join("bad.rules"), bad).unwrap();
    let e = optimize_ir(f, &with_rules(&exact, false)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Usage, "{e}");
    assert!(e.to_string().contains("not an identity"), "{e}");
    // In the fast-math file: set aside, the exact rules used.
    let fast = tempdir("fast");
    std::fs::write(fast.join("fastmath.rules"), bad).unwrap();
    std::fs::write(
        fast.join("algebra.rules"),
        "mul-comm: (mul ?a ?b) => (mul ?b ?a)\n",
    )
    .unwrap();
    let o = optimize_ir(f, &with_rules(&fast, true)).unwrap();
    let report = o.saturation.as_ref().unwrap();
    assert!(
        report.stop_reason.contains("fast math set aside"),
        "{}",
        report.stop_reason
    );
    let x = Value::scalar(DType::F64, 0.7);
    let got = run(&o.after, &[&x]).unwrap()[0].as_scalar();
    assert_eq!(got, 0.7 * 2.0 * 3.0);
    // Without fast math the fast-math file is not read: nothing to set aside.
    let o = optimize_ir(f, &with_rules(&fast, false)).unwrap();
    assert!(!o.saturation.unwrap().stop_reason.contains("set aside"));
}

/// `egrad fdcheck --fast-math` on every function of the bundled examples
/// that `fdcheck` takes (a scalar function or a gradient) passes wherever
/// the strict `fdcheck` does (some need arguments `--random` cannot make:
/// run-time counts, bools).
#[test]
fn fdcheck_with_fast_math_passes_on_the_examples() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for path in common::example_files() {
        let p = Program::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
        let file = path.to_str().unwrap();
        for name in p.function_names() {
            let Ok(f) = p.ir(name) else { continue };
            let scalar = f.rets.len() == 1 && f.ty(f.rets[0]).is_scalar();
            if !(scalar || p.grad_spec(name).is_some()) {
                continue;
            }
            let run = |fast: bool| {
                let mut args = vec!["fdcheck", file, "--fn", name, "--random", "--quiet"];
                if fast {
                    args.push("--fast-math");
                }
                egrad(&args)
            };
            let (code, out, err) = run(true);
            if code == 0 {
                checked += 1;
            } else if run(false).0 == 0 {
                failures.push(format!("{file} {name}:\n{out}{err}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked > 40, "{checked}");
}

#[test]
fn constants_reassociated_past_overflow_set_fast_math_aside() {
    // d/dx of 1e308 · x³ is 3e308 · x², finite for |x| < 1: fast math
    // gathered the adjoint's terms into x · x · (3 · 1e308) = x² · inf
    // (and for x^20 lost one term of 20). A fold of finite constants that
    // overflows during saturation sets fast math aside (found by
    // tests/fuzz.rs, seed 0xd4db0b41662d0e26).
    let src = "fn power[N](static n: i64, x: f64[N]) -> f64 = +/iterate(n, 1e308, p => p * x)
@grad(x)
fn g3[N](x: f64[N]) -> f64[N] = power(3, x)
@grad(x)
fn g20[N](x: f64[N]) -> f64[N] = power(20, x)
// The program's own overflow is its value: fast math keeps working.
fn own(x: f64) -> f64 = x * (1e308 * 10.0) + x * x
";
    let p = Program::parse(src).unwrap();
    let x = Value::array(DType::F64, vec![1], vec![0.45302311141858276]);
    for (f, n) in [("g3", 3), ("g20", 20)] {
        let exact = optimize_gradient(&p, &Options::default().function(f)).unwrap();
        let fast = optimize_gradient(&p, &Options::default().function(f).fast_math(true)).unwrap();
        let want = run(exact.value_and_grad_ir(), &[&x]).unwrap();
        let got = run(fast.value_and_grad_ir(), &[&x]).unwrap();
        let (w, g) = (want[1].data[0], got[1].data[0]);
        let closed = n as f64 * 1e308 * 0.45302311141858276f64.powi(n - 1);
        assert!((w - closed).abs() <= 1e-12 * closed, "{f}: {w} vs {closed}");
        assert!((g - w).abs() <= 1e-12 * w.abs(), "{f}: fast {g} vs {w}");
    }
    let own = p.ir("own").unwrap();
    let o = optimize_ir(own, &Options::default().fast_math(true)).unwrap();
    let report = o.saturation.as_ref().unwrap();
    assert!(
        !report.stop_reason.contains("set aside"),
        "{}",
        report.stop_reason
    );
}
