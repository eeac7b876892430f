//! One fuzz input through the whole pipeline: parse and check, then for
//! each function its IR, the e-graph (`optimize_ir`, under small limits),
//! the backend (with Cranelift's verifier), and runs on small random
//! arguments in native code and the interpreter, unoptimized and
//! optimized; for a scalar function or a `@grad` function also the
//! gradient pipeline (`optimize_gradient`: reverse mode, e-graph, residual
//! plan) compiled and run both ways; and each function and gradient
//! optimized with the fast-math rules, whose results must be the strict
//! ones' within the same tolerance.
//!
//! What is a bug: an error of kind `internal` from any stage, native code
//! and the interpreter disagreeing (bits of a result, NaN equal to NaN, or
//! one failing where the other does not), the optimized function (or the
//! value of the gradient program) differing from the unoptimized one on
//! tame arguments by more than 1e-6 relative, and (seen by the caller) a
//! panic, an abort or a stage that does not end. Every other error is the
//! program's, and is only rendered (rendering must not panic either).
//!
//! Shared by `tests/fuzz.rs` and `tests/regressions.rs`.

use crate::common::rng::Rng;
use egrad::internals::backend::{compile, BackendOptions};
use egrad::internals::ir::interp::run;
use egrad::internals::ir::Function;
use egrad::internals::pipeline::{optimize_gradient, optimize_ir, Options};
use egrad::internals::types::value::Value;
use egrad::internals::types::DType;
use egrad::{Error, ErrorKind, Limits, ParseOptions, Program};
use std::time::Duration;

/// A bug found in a stage (not counting panics, which the caller catches).
#[derive(Debug)]
pub struct Bug {
    pub stage: String,
    pub what: String,
}

/// What a case exercised.
#[allow(dead_code)] // (`tests/regressions.rs` reads none of it)
#[derive(Default, Debug, Clone, Copy)]
pub struct Counts {
    /// The input parsed and type-checked.
    pub checked: usize,
    /// Functions whose IR was optimized and compiled.
    pub compiled: usize,
    /// Calls compared between native code and the interpreter.
    pub runs: usize,
    /// Gradient programs optimized, compiled and run.
    pub gradients: usize,
    /// Gradient elements compared with central differences of the primal
    /// (of every order the input writes: the gradient of a `@jvp` or of a
    /// `@grad` of a `@grad` function is a higher derivative).
    pub fd_checks: usize,
}

/// At most this many functions of one program go through the back stages.
const MAX_FUNCTIONS: usize = 6;
/// Arguments with more elements than this are not run.
const MAX_ELEMENTS: u64 = 1 << 16;

fn options() -> Options {
    Options::default().limits(Limits {
        nodes: 4_000,
        iterations: 8,
        time: Duration::from_millis(500),
    })
}

/// The most IR operations the fuzzer lets a function have (the checker
/// refuses larger ones with a limit error, an ordinary error). Every stage
/// is about linear in a program's size, but a function of 5,000
/// operations already goes through two compiles of itself, an optimizer
/// run and a gradient several times its size within the case's 20 s of
/// CPU time; an unrolled program of 276,000 operations takes about 2
/// minutes to compile (TESTING.md). Reproducers in `tests/regressions/`
/// run without this cap.
#[allow(dead_code)] // (used by the fuzzer, not by tests/regressions.rs)
pub const FUZZ_MAX_OPERATIONS: usize = 5_000;

/// The memory limit of one case (bytes): 3 GiB, below the fuzzer's 6 GB
/// address space with room for the process itself.
pub const CASE_MEMORY_LIMIT: u64 = 3 << 30;

/// Run `src` through the pipeline, its functions capped at `max_ops` IR
/// operations (see [`FUZZ_MAX_OPERATIONS`]). `stage` is told the name of
/// each stage before it starts (the fuzzer's parent process reads it, to
/// say where a case hung or crashed). The arguments are drawn from `seed`.
pub fn run_case(
    src: &[u8],
    seed: u64,
    max_ops: usize,
    stage: &mut dyn FnMut(&str),
) -> Result<Counts, Bug> {
    // Under the fuzzer's 6 GB address space (and beside other tests), a
    // run may hold at most this much: past it, the interpreter and native
    // code refuse before allocating (a limit error, ordinary), and the
    // optimizer prices memory past it out, instead of an abort on an
    // allocation the default limit (3/4 of the machine) would allow.
    egrad::internals::ir::memory::set_limit(CASE_MEMORY_LIMIT);
    let mut counts = Counts::default();
    let mut rng = Rng(seed);
    let text = String::from_utf8_lossy(src);
    stage("parse and check");
    let parse = ParseOptions::default().max_operations(max_ops);
    let p = match Program::parse_with("fuzz.eg", &text, &parse) {
        Ok(p) => p,
        Err(e) => {
            ordinary(&e, "parse and check")?;
            return Ok(counts);
        }
    };
    counts.checked = 1;
    let names: Vec<String> = p.function_names().iter().map(|s| s.to_string()).collect();
    for name in names.iter().take(MAX_FUNCTIONS) {
        stage(&format!("ir {name}"));
        let f = match p.ir(name) {
            Ok(f) => f,
            Err(e) => {
                ordinary(&e, &format!("ir {name}"))?;
                continue;
            }
        };
        stage(&format!("optimize {name}"));
        let opt = match optimize_ir(f, &options()) {
            Ok(o) => Some(o.after),
            Err(e) => {
                ordinary(&e, &format!("optimize {name}"))?;
                None
            }
        };
        // With the fast-math rules: within rounding of the strict program
        // (`near`, on tame arguments).
        stage(&format!("optimize {name} with fast math"));
        let fast = match optimize_ir(f, &options().fast_math(true)) {
            Ok(o) => Some(o.after),
            Err(e) => {
                ordinary(&e, &format!("optimize {name} with fast math"))?;
                None
            }
        };
        stage(&format!("compile {name}"));
        let Some(native) = compiled(f, &format!("compile {name}"))? else {
            continue;
        };
        let native_opt = match &opt {
            Some(o) => compiled(o, &format!("compile optimized {name}"))?.map(|n| (o, n)),
            None => None,
        };
        counts.compiled += 1;
        stage(&format!("run {name}"));
        for draw in 0..3 {
            let wild = draw == 2;
            let Some(args) = draw_args(f, &mut rng, wild) else {
                break;
            };
            let refs: Vec<&Value> = args.iter().collect();
            let want = run(f, &refs);
            let got = native.call(&refs);
            agree(
                &got,
                &want,
                &format!("run {name}"),
                "JIT",
                "interpreter",
                &args,
            )?;
            counts.runs += 1;
            if let Some((o, n)) = &native_opt {
                let want_opt = run(o, &refs);
                let got_opt = n.call(&refs);
                agree(
                    &got_opt,
                    &want_opt,
                    &format!("run optimized {name}"),
                    "JIT",
                    "interpreter",
                    &args,
                )?;
                if !wild {
                    near(&want_opt, &want, &format!("run optimized {name}"), &args)?;
                }
            }
            // (Fast math assumes finite values: only where every value the
            // strict program computes is finite.)
            let tame = !wild && finite_throughout(f, &refs) && well_conditioned(f, &args, &want);
            if let (Some(fm), true) = (&fast, tame) {
                let got_fast = run(fm, &refs);
                near_fast(
                    &got_fast,
                    &want,
                    &format!("run {name} with fast math"),
                    &args,
                )?;
            }
        }
        let scalar_float = f.rets.len() == 1 && {
            let t = f.ty(f.rets[0]);
            t.is_scalar() && matches!(t.dtype, DType::F32 | DType::F64)
        };
        if scalar_float || p.grad_spec(name).is_some() {
            gradient(&p, name, &mut rng, stage, &mut counts)?;
        }
    }
    Ok(counts)
}

/// `optimize_gradient` of `name`, compiled and run both ways; its value
/// is the primal's.
fn gradient(
    p: &Program,
    name: &str,
    rng: &mut Rng,
    stage: &mut dyn FnMut(&str),
    counts: &mut Counts,
) -> Result<(), Bug> {
    let at = format!("gradient {name}");
    stage(&at);
    let g = match optimize_gradient(p, &options().function(name)) {
        Ok(g) => g,
        Err(e) => return ordinary(&e, &at),
    };
    stage(&format!("{at} with fast math"));
    let fast = match optimize_gradient(p, &options().function(name).fast_math(true)) {
        Ok(g) => Some(g),
        Err(e) => {
            ordinary(&e, &format!("{at} with fast math"))?;
            None
        }
    };
    let vg = g.value_and_grad_ir();
    stage(&format!("compile {at}"));
    let Some(native) = compiled(vg, &format!("compile {at}"))? else {
        return Ok(());
    };
    stage(&format!("compile {at} (keeping residuals)"));
    if let Err(e) = g.compile() {
        ordinary(&e, &format!("compile {at} (keeping residuals)"))?;
    }
    stage(&format!("run {at}"));
    counts.gradients += 1;
    for draw in 0..2 {
        let wild = draw == 1;
        let Some(args) = draw_args(&g.primal, rng, wild) else {
            break;
        };
        let refs: Vec<&Value> = args.iter().collect();
        let want = run(vg, &refs);
        let got = native.call(&refs);
        agree(
            &got,
            &want,
            &format!("run {at}"),
            "JIT",
            "interpreter",
            &args,
        )?;
        counts.runs += 1;
        if !wild {
            let unoptimized = run(&g.ad.value_and_grad, &refs);
            let tame = finite_throughout(&g.ad.value_and_grad, &refs)
                && well_conditioned(&g.ad.value_and_grad, &args, &unoptimized);
            if let (Some(fg), true) = (&fast, tame) {
                // Against AD's program as it is (the optimizer may drop a
                // read whose only effect was to fail, and the two rule
                // sets need not drop the same ones).
                let got = run(fg.value_and_grad_ir(), &refs);
                near_fast(
                    &got,
                    &unoptimized,
                    &format!("run {at} with fast math"),
                    &args,
                )?;
            }
            if let Ok(w) = &want {
                counts.fd_checks += finite_differences(&g, &args, &w[1..], &at)?;
            }
            let primal = run(&g.primal, &refs);
            let value = want.map(|mut v| {
                v.truncate(1);
                v
            });
            near(&value, &primal, &format!("run {at} (its value)"), &args)?;
        }
    }
    Ok(())
}

/// At most this many gradient elements of one draw are compared with
/// finite differences (each costs four runs of the primal).
const MAX_FD_ELEMENTS: usize = 6;

/// Whether every value `f`'s statements compute at `args` (not those
/// inside its loops) is finite. Fast math assumes so: where one is not, it
/// may change a finite result too (`0/0` is 1 under `div-self`, and a
/// comparison with it then goes the other way).
fn finite_throughout(f: &Function, args: &[&Value]) -> bool {
    statement_values(f, args).is_some_and(|xs| xs.iter().all(|x| x.is_finite()))
}

/// Every number `f`'s statements compute at `args` (not those inside its
/// loops), if it runs.
fn statement_values(f: &Function, args: &[&Value]) -> Option<Vec<f64>> {
    let mut every = f.clone();
    every.rets = f.stmts.iter().map(|s| s.var).collect();
    let values = run(&every, args).ok()?;
    Some(values.into_iter().flat_map(|v| v.data).collect())
}

/// The largest finite magnitude among `f`'s statement values at `args`
/// (None if they cannot all be computed: a statement whose value is not
/// used may fail, such as an index out of range): a value of 1e16 holds
/// its fractions to within 2, so a primal that goes through it is a
/// staircase to finite differences, however small its result.
fn largest_value(f: &Function, args: &[&Value]) -> Option<f64> {
    let xs = statement_values(f, args)?;
    Some(
        xs.into_iter()
            .filter(|x| x.is_finite())
            .fold(0.0, |m, x| m.max(x.abs())),
    )
}

/// Whether `f`'s results at `args` (`want`) stay within [`near`]'s
/// tolerance when every float argument moves by 4 units in its last place:
/// fast math moves roundings by about that much, so where the strict
/// program itself does not stay put (`cos(x / 2.5e-8)` in f32 turns a
/// last-bit change into another phase), no comparison can judge it.
fn well_conditioned(
    f: &Function,
    args: &[Value],
    want: &Outcome<egrad::internals::ir::interp::ArgError>,
) -> bool {
    let moved: Vec<Value> = args
        .iter()
        .map(|a| {
            let eps = match a.dtype {
                DType::F32 => f32::EPSILON as f64,
                DType::F64 => f64::EPSILON,
                _ => return a.clone(),
            };
            let data = a
                .data
                .iter()
                .map(|x| a.dtype.round(x * (1.0 + 4.0 * eps)))
                .collect();
            Value::array(a.dtype, a.shape.clone(), data)
        })
        .collect();
    let refs: Vec<&Value> = moved.iter().collect();
    near_where(&run(f, &refs), want, "", &moved, false).is_ok()
}

/// Whether `f` or a loop of it calls a native kernel.
fn calls_kernel(f: &Function) -> bool {
    f.stmts
        .iter()
        .any(|s| matches!(s.op, egrad::internals::ops::Op::Kernel(..)))
        || f.loops.iter().any(|l| calls_kernel(&l.body))
}

/// The gradient `grads` of `g` at `args` against central differences of
/// its primal (the interpreter), element by element for `f64` parameters
/// (not for a primal with its own derivative rules or a native kernel:
/// the generator writes rules that are not the derivative on purpose):
/// where the differences with steps h and h/10 agree to 1e-6 (the primal
/// is smooth there: no kink, branch or loop exit within the step) and the
/// primal is finite, the gradient must agree with them to 1e-4 relative,
/// plus what the differences' own rounding allows (a primal, or a value
/// it computes on the way, of magnitude 1e9 leaves no digit of a
/// derivative of 0.3).
/// Returns how many elements were compared.
fn finite_differences(
    g: &egrad::internals::pipeline::GradProgram,
    args: &[Value],
    grads: &[Value],
    at: &str,
) -> Result<usize, Bug> {
    let f = &g.primal;
    if f.has_customs() || calls_kernel(f) {
        return Ok(0);
    }
    let wrt: Vec<usize> = g
        .wrt
        .iter()
        .filter_map(|n| f.params.iter().position(|p| f.var_name(p.var) == n))
        .collect();
    if wrt.len() != grads.len() {
        return Ok(0);
    }
    let eval = |a: &[Value]| -> Option<f64> {
        let refs: Vec<&Value> = a.iter().collect();
        let v = run(f, &refs).ok()?.first()?.as_scalar();
        v.is_finite().then_some(v)
    };
    // Only at ordinary magnitudes: a primal past 1e30 (an unrolled
    // explosion, `dt = 1e8` in a mutated pendulum) is so ill-conditioned
    // that bounded terms like `sin` of a huge angle make the differences
    // wrong by percents while steps h and h/10 still agree.
    let Some(f0) = eval(args).filter(|v| v.abs() < 1e30) else {
        return Ok(0);
    };
    // Likewise for the values computed on the way, in the primal and in
    // the program AD made (before the optimizer, which may fold one away).
    let refs: Vec<&Value> = args.iter().collect();
    let Some(magnitude) = largest_value(f, &refs)
        .zip(largest_value(&g.ad.value_and_grad, &refs))
        .map(|(a, b)| a.max(b).max(f0.abs()).max(1.0))
        .filter(|m| *m < 1e30)
    else {
        return Ok(0);
    };
    let mut compared = 0;
    for (gv, &i) in grads.iter().zip(&wrt) {
        if args[i].dtype != DType::F64 || gv.len() != args[i].len() {
            continue;
        }
        for k in 0..args[i].len().min(MAX_FD_ELEMENTS) {
            let ad = gv.data[k];
            let x = args[i].data[k];
            let central = |h: f64| -> Option<f64> {
                let mut a = args.to_vec();
                a[i].data[k] = x + h;
                let up = eval(&a)?;
                a[i].data[k] = x - h;
                let down = eval(&a)?;
                Some((up - down) / (2.0 * h))
            };
            let h = 1e-5 * x.abs().max(1.0);
            let (Some(fd), Some(fd2)) = (central(h), central(h / 10.0)) else {
                continue;
            };
            // The two steps must agree relatively: a function that varies
            // on scales far below h (`sin(1e308 * s)`) gives differences
            // that are noise, and small noise agrees in absolute terms.
            if !ad.is_finite() || (fd - fd2).abs() > 1e-6 * fd.abs().max(fd2.abs()) {
                continue;
            }
            // The differences' own rounding: each value off by up to about
            // 1,000 ulps of the largest magnitude on the way, over h/10.
            let rounding = 1e3 * f64::EPSILON * magnitude / (h / 10.0);
            if (ad - fd2).abs() > 1e-4 * (1.0 + fd2.abs()) + rounding {
                return Err(Bug {
                        stage: format!("{at} against finite differences"),
                        what: format!(
                            "parameter {i} element {k}: gradient {ad:e}, central differences {fd2:e} (step h: {fd:e}; largest value {magnitude:e}) at {}",
                            show(args)
                        ),
                    });
            }
            compared += 1;
        }
    }
    Ok(compared)
}

/// Compile `f` with the verifier on: `None` for an ordinary error.
fn compiled(
    f: &Function,
    at: &str,
) -> Result<Option<egrad::internals::backend::CompiledFunction>, Bug> {
    match compile(f, &BackendOptions::verified()) {
        Ok(n) => Ok(Some(n)),
        Err(e) => ordinary(&e, at).map(|_| None),
    }
}

/// An error is fine unless it is internal; it must render either way.
fn ordinary(e: &Error, at: &str) -> Result<(), Bug> {
    let text = e.to_string();
    let _ = e.location();
    if std::env::var("EGRAD_FUZZ_VERBOSE").is_ok() {
        eprintln!("{at}: {text}");
    }
    if e.kind() == ErrorKind::Internal {
        return Err(Bug {
            stage: at.to_string(),
            what: format!("internal error: {}", first_line(&text)),
        });
    }
    Ok(())
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").to_string()
}

type Outcome<E> = Result<Vec<Value>, E>;

/// Both sides succeed with the same bits, or both fail.
fn agree<E: std::fmt::Debug, F: std::fmt::Debug>(
    got: &Outcome<E>,
    want: &Outcome<F>,
    at: &str,
    a: &str,
    b: &str,
    args: &[Value],
) -> Result<(), Bug> {
    let bug = |what: String| {
        Err(Bug {
            stage: at.to_string(),
            what: format!("{what} at {}", show(args)),
        })
    };
    match (got, want) {
        (Ok(g), Ok(w)) => {
            if g.len() != w.len() {
                return bug(format!("{a} gives {} results, {b} {}", g.len(), w.len()));
            }
            for (k, (x, y)) in g.iter().zip(w).enumerate() {
                if !x.bits_eq(y) {
                    return bug(format!(
                        "result {k}: {a} {:?} vs {b} {:?}",
                        short(&x.data),
                        short(&y.data)
                    ));
                }
            }
            Ok(())
        }
        (Err(_), Err(_)) => Ok(()),
        (Ok(_), Err(e)) => bug(format!("{a} succeeds, {b} fails: {e:?}")),
        (Err(e), Ok(_)) => bug(format!("{a} fails: {e:?}; {b} succeeds")),
    }
}

/// The optimized program's results are the unoptimized one's within 1e-6
/// relative (NaN equal to NaN); both failing is fine too.
fn near<E: std::fmt::Debug>(
    got: &Outcome<E>,
    want: &Outcome<E>,
    at: &str,
    args: &[Value],
) -> Result<(), Bug> {
    near_where(got, want, at, args, false)
}

/// [`near`] for a program optimized with fast math, which assumes finite
/// values and no overflow: where either result is infinite or NaN (the
/// fuzzer's odd literals, 1e300, overflow intermediates that fast math
/// reassociates) they may differ.
fn near_fast<E: std::fmt::Debug>(
    got: &Outcome<E>,
    want: &Outcome<E>,
    at: &str,
    args: &[Value],
) -> Result<(), Bug> {
    near_where(got, want, at, args, true)
}

fn near_where<E: std::fmt::Debug>(
    got: &Outcome<E>,
    want: &Outcome<E>,
    at: &str,
    args: &[Value],
    finite_only: bool,
) -> Result<(), Bug> {
    let close = |x: f64, y: f64| {
        (finite_only && !(x.is_finite() && y.is_finite()))
            || (x.is_nan() && y.is_nan())
            || x == y
            || (x - y).abs() <= 1e-6 * (1.0 + y.abs())
    };
    let ok = match (got, want) {
        (Ok(g), Ok(w)) => {
            g.len() == w.len()
                && g.iter().zip(w).all(|(x, y)| {
                    x.shape == y.shape && x.data.iter().zip(&y.data).all(|(a, b)| close(*a, *b))
                })
        }
        // The optimizer may drop a read whose only effect was to fail
        // (a dead slice out of range at these sizes): the optimized
        // program then succeeds where the unoptimized one fails, which is
        // fine. The other way round is a bug.
        (Err(_), Err(_)) | (Ok(_), Err(_)) => true,
        (Err(_), Ok(_)) => false,
    };
    if ok {
        return Ok(());
    }
    let brief = |o: &Outcome<E>| match o {
        Ok(v) => format!("{:?}", v.iter().map(|x| short(&x.data)).collect::<Vec<_>>()),
        Err(e) => format!("error {e:?}"),
    };
    Err(Bug {
        stage: at.to_string(),
        what: format!(
            "optimized {} vs unoptimized {} at {}",
            brief(got),
            brief(want),
            show(args)
        ),
    })
}

fn short(d: &[f64]) -> String {
    let s: Vec<String> = d.iter().take(6).map(|x| format!("{x:e}")).collect();
    format!(
        "[{}{}]",
        s.join(", "),
        if d.len() > 6 { ", ..." } else { "" }
    )
}

fn show(args: &[Value]) -> String {
    let s: Vec<String> = args
        .iter()
        .map(|a| format!("{:?}{:?}{}", a.dtype, a.shape, short(&a.data)))
        .collect();
    s.join(", ")
}

/// Arguments for `f`: sizes from 0 to 4 (mostly 1 to 3), floats in (-2,
/// 2) or (`wild`) signed zeros, huge, tiny, infinite and NaN; integers
/// from -1 to 4 (scalar `i64` parameters, which are counts, from 0 to 4);
/// `None` when a size is unknown or an argument would be too large.
fn draw_args(f: &Function, rng: &mut Rng, wild: bool) -> Option<Vec<Value>> {
    let mut sizes: Vec<(String, u64)> = f
        .size_params
        .iter()
        .map(|s| (s.clone(), [0, 1, 1, 2, 2, 3, 3, 4][rng.below(8)]))
        .collect();
    let mut args = Vec::new();
    for prm in &f.params {
        let t = f.ty(prm.var);
        let name = f.var_name(prm.var).to_string();
        let lookup =
            |sizes: &[(String, u64)], n: &str| sizes.iter().find(|(s, _)| s == n).map(|(_, v)| *v);
        if t.is_scalar() && t.dtype == DType::I64 {
            let v = lookup(&sizes, &name).unwrap_or_else(|| rng.below(5) as u64);
            sizes.push((name, v));
            args.push(Value::scalar(t.dtype, v as f64));
            continue;
        }
        let mut shape = Vec::new();
        for d in &t.shape {
            let e = d.extent(&|n| lookup(&sizes, n))?;
            shape.push(e);
        }
        let len = shape
            .iter()
            .try_fold(1u64, |a, &b| a.checked_mul(b))
            .filter(|&n| n <= MAX_ELEMENTS)?;
        let data = (0..len)
            .map(|_| match t.dtype {
                DType::I64 => rng.range(0, 6) as f64 - 1.0,
                DType::Bool => rng.below(2) as f64,
                _ if wild => [
                    0.0,
                    -0.0,
                    1e300,
                    -1e300,
                    1e-310,
                    f64::INFINITY,
                    f64::NEG_INFINITY,
                    f64::NAN,
                    1.0,
                    -3.5,
                ][rng.below(10)],
                _ => rng.uniform(-2.0, 2.0),
            })
            .collect();
        let shape = shape.into_iter().map(|e| e as usize).collect();
        args.push(Value::array(t.dtype, shape, data));
    }
    Some(args)
}
