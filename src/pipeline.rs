//! The pipeline, stage by stage:
//!
//! ```text
//! source → parse → resolve/type-check → typed IR (calls inlined)      lang
//!        → reverse sweep: forward + pullback with residuals           differentiate
//!        → e-graph (primal and adjoint together) → saturate rules     rewrites
//!        → DAG-aware extraction under the cost model                  extract
//!        → residual plan                                              residuals
//!        → Cranelift JIT (fused loops)                                backend
//! ```
//!
//! [`optimize_gradient`] runs everything up to extraction and returns a
//! [`GradProgram`]; [`GradProgram::compile`] runs the backend.

use crate::backend::{self, BackendOptions};
use crate::call::{CompiledFn, CompiledGradient};
use crate::differentiate::{reverse, reverse::prune_dead, AdError, Reverse};
use crate::error::span::{Diagnostic, SourceFile};
use crate::error::{Error, Result};
use crate::extract::cost::{Cost, CostModel};
use crate::extract::extract;
use crate::extract::{ExtractError, ResidualChoice};
use crate::ir::Function;
use crate::program::Program;
use crate::residuals::{plan, ResidualPlan};
use crate::rewrites::rules::RuleSet;
use crate::rewrites::{
    insert_split, recompute_rule, saturate_observed, Inserted, IterationHook, Limits,
    SaturationReport,
};
use crate::types::Type;
use indexmap::IndexMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Something long-running egrad tells a [`Progress`] hook about. New
/// kinds of events may be added, so a `match` needs a `_` arm.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ProgressEvent {
    /// Equality saturation of `function` (a loop body is a function of its
    /// own) starts iteration `iteration`, counted from 1, on an e-graph of
    /// `nodes` e-nodes in `classes` e-classes.
    Saturation {
        /// The function in the e-graph.
        function: String,
        /// The iteration starting, from 1.
        iteration: usize,
        /// E-nodes in the e-graph.
        nodes: usize,
        /// E-classes in the e-graph.
        classes: usize,
    },
    /// `explore` optimizes the gradient at its `index`-th λ (from 1) of
    /// `count`.
    Optimizing {
        /// Which λ, from 1.
        index: usize,
        /// How many λ values.
        count: usize,
        /// The λ.
        lambda: f64,
    },
    /// Programs about to be timed: the `index`-th (from 1) of `count` is
    /// compiled.
    Compiling {
        /// Which program, from 1.
        index: usize,
        /// How many programs.
        count: usize,
    },
    /// `programs` compiled programs are timed against each other: `elapsed`
    /// of about `budget` has passed. Told when timing starts and then at
    /// most about every 100 ms.
    Timing {
        /// How many programs are timed.
        programs: usize,
        /// Time spent timing so far.
        elapsed: Duration,
        /// About how long timing takes in all: the time asked for, or more
        /// when the samples taken so far show that the calls each program
        /// must make take longer. Never less than `elapsed`.
        budget: Duration,
    },
}

/// A progress hook ([`Options::progress`]): a function told about
/// saturation iterations, the λ values `explore` optimizes at and the
/// compiling and timing of programs, so that a caller can show progress.
/// None by default. It only watches: what egrad computes never depends on
/// it (the e-graph, the extracted program and every result are the same
/// with or without it), only the order and number of events may vary with
/// the time things take. It is called on the thread doing the work.
///
/// ```
/// use egrad::{optimize_gradient, Options, Program, ProgressEvent};
/// use std::sync::{Arc, Mutex};
/// let program = Program::parse("fn f[N](x: f64[N]) -> f64 = +/(sin(x) .* x)")?;
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let log = seen.clone();
/// let options = Options::default()
///     .function("f")
///     .progress(move |e: &ProgressEvent| log.lock().unwrap().push(e.clone()));
/// optimize_gradient(&program, &options)?;
/// assert!(matches!(
///     seen.lock().unwrap()[0],
///     ProgressEvent::Saturation { iteration: 1, .. }
/// ));
/// # Ok::<(), egrad::Error>(())
/// ```
#[derive(Clone, Default)]
pub struct Progress(Option<Hook>);

/// The function behind a [`Progress`].
type Hook = Arc<dyn Fn(&ProgressEvent) + Send + Sync>;

impl Progress {
    /// A hook that calls `f` with every event.
    pub fn new(f: impl Fn(&ProgressEvent) + Send + Sync + 'static) -> Progress {
        Progress(Some(Arc::new(f)))
    }

    /// No hook: events are dropped (the default).
    pub fn none() -> Progress {
        Progress(None)
    }

    /// Is there a hook?
    pub fn is_some(&self) -> bool {
        self.0.is_some()
    }

    /// Tell the hook, if any. `event` is only built when there is one.
    pub fn tell(&self, event: impl FnOnce() -> ProgressEvent) {
        if let Some(f) = &self.0 {
            f(&event());
        }
    }

    /// A hook for [`saturate_observed`] that tells this one about each
    /// iteration of saturating `function` (None when there is no hook).
    fn saturation(&self, function: &str) -> Option<IterationHook> {
        let f = self.0.clone()?;
        let function = function.to_string();
        Some(Box::new(move |iteration, nodes, classes| {
            f(&ProgressEvent::Saturation {
                function: function.clone(),
                iteration,
                nodes,
                classes,
            })
        }))
    }
}

impl fmt::Debug for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Progress(hook)"
        } else {
            "Progress(none)"
        })
    }
}

/// What to differentiate and how to optimize it.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The function: a plain scalar function, or a `@grad` function (then
    /// its attribute says what to differentiate).
    pub function: Option<String>,
    /// Parameters to differentiate (plain functions; default: every
    /// floating-point one).
    pub wrt: Option<Vec<String>>,
    /// Sizes the cost model prices at (`N=1000` when not given).
    pub dims: IndexMap<String, u64>,
    /// λ, flops per stored residual byte (`cost = flops + λ · bytes`);
    /// [`DEFAULT_LAMBDA`](crate::extract::cost::DEFAULT_LAMBDA) when None.
    pub lambda: Option<f64>,
    /// Limits of equality saturation (nodes, iterations, time).
    pub limits: Limits,
    /// Skip the e-graph (AD output goes straight to the backend).
    pub no_optimize: bool,
    /// Load rules from this directory instead of the bundled `rulesets/`.
    pub rules_dir: Option<PathBuf>,
    /// Also use the bundled rules that are not exact in IEEE arithmetic
    /// (`rewrites::rules::FAST_MATH_FILES`).
    pub fast_math: bool,
    /// How the backend compiles ([`GradProgram::compile`] uses them).
    pub backend: BackendOptions,
    /// Told about long-running work (none by default); never changes a
    /// result.
    pub progress: Progress,
}

impl Options {
    /// The function to differentiate.
    pub fn function(mut self, name: impl Into<String>) -> Options {
        self.function = Some(name.into());
        self
    }

    /// The parameters to differentiate, by name (for a plain function).
    pub fn wrt<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Options {
        self.wrt = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// Price size parameter `name` at `n` in the cost model.
    pub fn dim(mut self, name: impl Into<String>, n: u64) -> Options {
        self.dims.insert(name.into(), n);
        self
    }

    /// λ, flops per stored residual byte: larger λ recomputes more. From 0
    /// to [`MAX_LAMBDA`](crate::MAX_LAMBDA); `optimize_gradient` refuses
    /// any other as a usage error.
    pub fn lambda(mut self, lambda: f64) -> Options {
        self.lambda = Some(lambda);
        self
    }

    /// The cost model these options ask for.
    pub fn cost_model(&self) -> CostModel {
        let m = CostModel::with_dims(self.dims.clone());
        match self.lambda {
            Some(l) => m.lambda(l),
            None => m,
        }
    }

    /// Also use the rules that change rounding (reassociation, powers by squaring).
    pub fn fast_math(mut self, yes: bool) -> Options {
        self.fast_math = yes;
        self
    }

    /// Limits of equality saturation.
    pub fn limits(mut self, limits: Limits) -> Options {
        self.limits = limits;
        self
    }

    /// Skip the e-graph: compile AD's output as it is.
    pub fn no_optimize(mut self, yes: bool) -> Options {
        self.no_optimize = yes;
        self
    }

    /// Tell `f` about long-running work ([`Progress`], [`ProgressEvent`]).
    pub fn progress(mut self, f: impl Fn(&ProgressEvent) + Send + Sync + 'static) -> Options {
        self.progress = Progress::new(f);
        self
    }

    fn rules(&self) -> Result<RuleSet> {
        match &self.rules_dir {
            Some(d) => {
                RuleSet::load_dir(d, self.fast_math).map_err(|e| Error::Usage(e.to_string()))
            }
            None => RuleSet::bundled(self.fast_math)
                .map_err(|e| Error::internal(format!("bundled rules: {e}"))),
        }
    }
}

/// An IR function before and after the e-graph.
#[derive(Clone, Debug)]
pub struct Optimized {
    /// The function as given.
    pub before: Function,
    /// The function extracted from the e-graph.
    pub after: Function,
    /// The cost model's price of `before`.
    pub cost_before: Cost,
    /// The cost model's price of `after`.
    pub cost_after: Cost,
    /// Residual bytes stored by the value-and-gradient program before and
    /// after (0 for a function that is not split into primal and pullback).
    pub bytes_before: f64,
    /// See `bytes_before`.
    pub bytes_after: f64,
    /// None when optimization was switched off.
    pub saturation: Option<SaturationReport>,
    /// For a value-and-gradient program: each primal value the pullback
    /// reads, stored or recomputed, and the cost figures behind the choice
    /// (empty when the e-graph did not run).
    pub residual_choices: Vec<ResidualChoice>,
}

/// The flops of a function under the model: every statement, as written
/// (a statement computed twice is paid twice).
pub fn program_cost(f: &Function, model: &CostModel) -> Cost {
    crate::extract::cost::function_cost(f, model)
}

/// Put a function through the e-graph: insert, saturate under the limits,
/// extract the cheapest equivalent program.
pub fn optimize_ir(f: &Function, options: &Options) -> Result<Optimized> {
    optimize_split(f, None, options)
}

/// [`optimize_ir`] for a value-and-gradient function whose first
/// `primal_len` statements are the primal: every primal value the pullback
/// reads becomes a store-or-recompute choice (see [`insert_split`]).
pub fn optimize_split(
    f: &Function,
    primal_len: Option<usize>,
    options: &Options,
) -> Result<Optimized> {
    // Differentiated already, if it was to be: a function with its own
    // derivative rules is its value from here on.
    let plain;
    let (f, primal_len) = if f.has_customs() {
        plain = f.without_customs();
        (&plain, primal_len.map(|n| f.len_without_customs(n)))
    } else {
        (f, primal_len)
    };
    let model = options.cost_model().for_function(f);
    // `flops + λ · stored bytes` of a program, and its stored bytes.
    let price = |g: &Function| {
        let bytes = if primal_len.is_some() {
            plan(g, &|p| model.dim(p)).total_bytes
        } else {
            0.0
        };
        (
            program_cost(g, &model) + Cost::new(model.lambda * bytes),
            bytes,
        )
    };
    let (cost_before, bytes_before) = price(f);
    // The program as AD made it, dead code removed.
    let unoptimized = |saturation: Option<SaturationReport>| {
        let after = prune_dead(f);
        let (cost_after, bytes_after) = price(&after);
        Optimized {
            before: f.clone(),
            after,
            cost_before,
            cost_after,
            bytes_before,
            bytes_after,
            saturation,
            residual_choices: Vec::new(),
        }
    };
    if options.no_optimize {
        return Ok(unoptimized(None));
    }
    let inserted = insert_split(f, primal_len);
    let size = inserted.egraph.total_number_of_nodes();
    if size > options.limits.nodes {
        // The program alone fills the node budget: no rewrite could run, and
        // the extractor is not built for graphs this size. Keep it as is.
        return Ok(unoptimized(Some(SaturationReport {
                iterations: 0,
                nodes: size,
                classes: inserted.egraph.number_of_classes(),
                stop_reason: format!(
                    "node limit ({}): the program alone has {size} e-nodes, so it is compiled unoptimized (raise --node-limit to optimize it)",
                    options.limits.nodes
                ),
            hit_limit: true,
            time: std::time::Duration::ZERO,
        })));
    }
    let (ins, report) = saturate_consistent(f, primal_len, inserted, options)?;
    let mut ex = extract(&ins, f, &model).map_err(|e| extraction_failed(e, f))?;
    // Loop bodies (and their VJPs) are functions of their own: each goes
    // through the e-graph too.
    for l in &mut ex.function.loops {
        l.body = optimize_ir(&l.body, options)?.after;
        if let Some(v) = &l.vjp {
            l.vjp = Some(optimize_ir(v, options)?.after);
        }
    }
    let (cost_after, bytes_after) = price(&ex.function);
    Ok(Optimized {
        before: f.clone(),
        after: ex.function,
        cost_before,
        cost_after,
        bytes_before,
        bytes_after,
        saturation: Some(report),
        residual_choices: ex.residuals,
    })
}

/// Saturate `inserted` (`f` inserted with [`insert_split`]) with the
/// options' rules, and make sure the e-graph proved no false equation: a
/// merge of two different constants (`Analysis::conflict`). Exact rules
/// cannot make one, so with them it is an internal error (or, with a rules
/// directory, the user's rules' fault). Rules of real arithmetic can,
/// through rounded constants, and then everything computed from those
/// constants may be wrong: the fast-math e-graph is dropped and `f` is
/// saturated again with the exact rules, which the report says.
/// An extraction that failed: a cost model that leaves a value of `f` no
/// program of finite cost (sizes or a λ so large that every way to compute
/// it is priced past any number) is the caller's to change, and is told as
/// a limit; anything else is a bug in egrad.
fn extraction_failed(e: ExtractError, f: &Function) -> Error {
    match e {
        ExtractError::NoProgram { .. } => Error::Limit(format!(
            "`{}` has no program of finite cost under the cost model: at the sizes and λ given, every way to compute one of its values is priced past any number; give smaller sizes (--dim) or a smaller λ",
            f.name
        )),
        e => Error::internal(e),
    }
}

fn saturate_consistent(
    f: &Function,
    primal_len: Option<usize>,
    inserted: Inserted,
    options: &Options,
) -> Result<(Inserted, SaturationReport)> {
    let run = |inserted: Inserted, set: &RuleSet| {
        let mut rules = set.rewrites();
        if primal_len.is_some() {
            rules.push(recompute_rule());
        }
        let hook = options.progress.saturation(&f.name);
        saturate_observed(inserted, &rules, &options.limits, hook)
    };
    // What the e-graph proved that is false (fast math ignores the sign
    // of zero), and the error for exact rules that prove it.
    let proved = |ins: &Inserted, fast: bool| {
        let a = &ins.egraph.analysis;
        match a.conflict {
            Some((x, y)) => Some(format!("the rules proved {x} = {y}")),
            None if a.zero_sign_conflict && !fast => Some("the rules proved 0 = -0".to_string()),
            None => None,
        }
    };
    let refuse = |proved: String| match &options.rules_dir {
        Some(d) => Error::Usage(format!(
            "optimizing `{}`: {proved} (a rule in {} is not an identity)",
            f.name,
            d.display()
        )),
        None => Error::internal(format!("optimizing `{}`: {proved}", f.name)),
    };
    // Folds that overflow in the program as inserted are the program's.
    let overflows = inserted.egraph.analysis.overflows;
    let (ins, report) = run(inserted, &options.rules()?);
    let overflowed = options.fast_math && ins.egraph.analysis.overflows > overflows;
    let fast_proved = match proved(&ins, options.fast_math) {
        Some(p) => p,
        None if overflowed => {
            "a constant folded from finite ones overflowed (reassociated constants)".to_string()
        }
        None => return Ok((ins, report)),
    };
    if !options.fast_math {
        return Err(refuse(fast_proved));
    }
    let exact = options.clone().fast_math(false).rules()?;
    let (ins, mut report) = run(insert_split(f, primal_len), &exact);
    if let Some(p) = proved(&ins, false) {
        return Err(refuse(p));
    }
    report.stop_reason = format!(
        "{}; fast math set aside: with it {fast_proved}, so the exact rules were used",
        report.stop_reason
    );
    Ok((ins, report))
}

/// An optimized gradient: every stage's program, the report, and a way to
/// compile it.
#[derive(Clone, Debug)]
pub struct GradProgram {
    /// The name asked for (the `@grad` function, or the primal).
    pub name: String,
    /// The primal function being differentiated.
    pub primal: Function,
    /// Names of the differentiated parameters.
    pub wrt: Vec<String>,
    /// The AD output: forward, pullback and their composition.
    pub ad: Reverse,
    /// `(inputs) -> (value, gradients...)` after the e-graph.
    pub optimized: Optimized,
    /// Which primal values the pullback reads, and where they are stored.
    pub residuals: ResidualPlan,
    /// The source the program came from (for argument errors).
    pub file: SourceFile,
    model: CostModel,
    /// The backend options it was asked with ([`Options::backend`]), which
    /// [`GradProgram::compile`] uses.
    backend: BackendOptions,
}

/// Differentiate and optimize a function of `program` (see [`Options`]).
///
/// ```
/// use egrad::{optimize_gradient, Arg, Options, Program};
/// let program = Program::parse(
///     "fn loss[N](w: f32[N], x: f32[N], y: f32) -> f32 {
///        let pred = +/(w .* x)
///        let err = pred - y
///        err * err
///      }",
/// )?;
/// let grad = optimize_gradient(&program, &Options::default().function("loss").wrt(["w"]))?;
/// println!("{}", grad.report());
/// let compiled = grad.compile()?;
/// let (w, x) = ([1.0f32, 2.0, 3.0], [4.0f32, 5.0, 6.0]);
/// let (value, grads) = compiled.value_and_grad(&[Arg::f32(&w), Arg::f32(&x), Arg::scalar(0.5)])?;
/// assert_eq!(value.as_scalar(), 31.5 * 31.5);
/// assert_eq!(grads[0].data, vec![252.0, 315.0, 378.0]);
/// # Ok::<(), egrad::Error>(())
/// ```
pub fn optimize_gradient(program: &Program, options: &Options) -> Result<GradProgram> {
    let name = options
        .function
        .clone()
        .ok_or_else(|| Error::Usage("no function named: use Options::function".into()))?;
    let (primal, wrt): (Function, Vec<usize>) = match program.grad_spec(&name) {
        Some(spec) => (spec.primal.clone(), spec.wrt.clone()),
        None => {
            let f = program.ir(&name)?.clone();
            let wrt = match &options.wrt {
                // Every floating-point parameter (an `i64` count or a
                // `bool` has no derivative).
                None => (0..f.params.len())
                    .filter(|&i| !f.ty(f.params[i].var).dtype.is_int())
                    .collect(),
                Some(names) => names
                    .iter()
                    .map(|n| {
                        f.params
                            .iter()
                            .position(|p| f.var_name(p.var) == n)
                            .ok_or_else(|| {
                                Error::Usage(format!(
                                    "`{name}` has no parameter `{n}` (parameters: {})",
                                    f.params
                                        .iter()
                                        .map(|p| f.var_name(p.var))
                                        .collect::<Vec<_>>()
                                        .join(", ")
                                ))
                            })
                    })
                    .collect::<Result<_>>()?,
            };
            (f, wrt)
        }
    };
    optimize_gradient_ir(&name, &primal, &wrt, options, program.file())
}

/// [`optimize_gradient`] for a primal already in IR: differentiate `primal`
/// with respect to the parameters at positions `wrt`, name the result
/// `name`; `file` is the source run-time argument errors point into.
pub fn optimize_gradient_ir(
    name: &str,
    primal: &Function,
    wrt: &[usize],
    options: &Options,
    file: &SourceFile,
) -> Result<GradProgram> {
    if let Some(l) = options.lambda {
        crate::extract::cost::check_lambda(l).map_err(Error::Usage)?;
    }
    if primal.rets.len() != 1 || !primal.ty(primal.rets[0]).is_scalar() {
        let shown: Vec<String> = primal.ret_types().iter().map(Type::to_string).collect();
        return Err(Error::Usage(format!(
            "`{}` returns {}; a gradient needs one scalar result",
            primal.name,
            shown.join(", ")
        )));
    }
    let ad = match reverse(primal, wrt) {
        Ok(ad) => ad,
        // A documented limit: the user's error, at the first parameter
        // differentiated (the IR keeps no other place).
        Err(AdError::Unsupported(limit)) => {
            let span = wrt
                .first()
                .and_then(|&i| primal.params.get(i))
                .map(|p| p.span)
                .unwrap_or_default();
            return Err(Error::at(
                file,
                Diagnostic::unsupported(
                    span,
                    format!(
                        "`{}` cannot be differentiated: {}",
                        primal.name,
                        limit.message()
                    ),
                )
                .with_note(limit.note()),
            ));
        }
        Err(e @ (AdError::Invalid(_) | AdError::Bug(_))) => {
            return Err(Error::internal(format!(
                "differentiating `{}`: {e}",
                primal.name
            )))
        }
    };
    let mut vg = ad.value_and_grad.clone();
    vg.name = name.to_string();
    let optimized = optimize_split(&vg, Some(ad.primal_len), options)?;
    let model = options.cost_model();
    let residuals = plan(&optimized.after, &|p| model.dim(p));
    Ok(GradProgram {
        name: name.to_string(),
        wrt: wrt
            .iter()
            .map(|&i| primal.var_name(primal.params[i].var).to_string())
            .collect(),
        primal: primal.clone(),
        ad,
        optimized,
        residuals,
        file: file.clone(),
        model,
        backend: options.backend,
    })
}

impl GradProgram {
    /// The size parameters of the primal with the extents the cost model
    /// priced them at.
    pub fn sizes(&self) -> Vec<(String, u64)> {
        self.primal
            .size_params
            .iter()
            .map(|p| (p.clone(), self.model.dim(p)))
            .collect()
    }

    /// `(inputs) -> (value, gradients...)`, optimized.
    /// The differentiated parameters, quoted: "`x`, `y`".
    pub fn wrt_text(&self) -> String {
        self.wrt
            .iter()
            .map(|w| format!("`{w}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `(inputs) -> (value, gradients...)`, optimized.
    pub fn value_and_grad_ir(&self) -> &Function {
        &self.optimized.after
    }

    /// `(inputs) -> (gradients...)`, optimized (the `@grad` function):
    /// the value-and-gradient program without its value, its common
    /// subexpressions computed once (`ir::share_common`). A value
    /// the pullback recomputed apart from the forward part's, as a
    /// residual choice, is one value here: no call separates the two
    /// parts, so nothing is stored between them, and the program is
    /// compiled as any other ([`backend::compile`]: a value several
    /// consumers read is kept in registers in their common loop, or
    /// materialised where the backend's plan says). Keeping the residuals
    /// the value-and-gradient program stores in memory as well would only
    /// add loops: `power_static`'s gradient took 1.75x as long.
    pub fn gradient_ir(&self) -> Function {
        let mut f = self.optimized.after.clone();
        f.rets.remove(0);
        crate::ir::share_common(&f)
    }

    /// The optimization report: ops before and after, cost, e-graph statistics, residuals and why each is stored or recomputed.
    pub fn report(&self) -> Report<'_> {
        Report { g: self }
    }

    /// Compile the value-and-gradient program to native code with the
    /// backend options of the [`Options`] it was optimized with.
    pub fn compile(&self) -> Result<CompiledGradient> {
        self.compile_with(&self.backend)
    }

    /// Compile with other backend options.
    pub fn compile_with(&self, opts: &BackendOptions) -> Result<CompiledGradient> {
        Ok(CompiledGradient::new(
            backend::compile_keeping(&self.optimized.after, opts, &self.stored())?,
            self.file.clone(),
        ))
    }

    /// The residuals the program stores, as variables of the optimized
    /// program: the backend keeps them in memory for the pullback, as the
    /// optimizer's choice says, instead of recomputing them where that
    /// looks cheap.
    pub fn stored(&self) -> Vec<crate::ir::VarId> {
        self.residuals
            .residuals
            .iter()
            .filter(|r| r.kind == crate::residuals::ResidualKind::Stored)
            .map(|r| r.var)
            .collect()
    }
}

/// The report of [`GradProgram::report`].
pub struct Report<'a> {
    g: &'a GradProgram,
}

fn counts(f: &Function) -> String {
    let c = f.op_counts();
    let total: usize = c.values().sum();
    let parts: Vec<String> = c.iter().map(|(k, v)| format!("{k} {v}")).collect();
    format!("{total} ({})", parts.join(", "))
}

impl Report<'_> {
    /// The report as JSON (the schema is in `docs/json.md`, under
    /// `grad`): the same figures as the text, one field each.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        let g = self.g;
        let o = &g.optimized;
        let num = |x: f64| if x.is_finite() { json!(x) } else { json!(null) };
        let ops = |f: &Function| {
            let c = f.op_counts();
            json!({
                "total": c.values().sum::<usize>(),
                "by_op": c.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
            })
        };
        json!({
            "function": g.primal.name,
            "wrt": g.wrt,
            "lambda": num(g.model.lambda),
            "sizes": g.sizes().into_iter().map(|(k, v)| (k, json!(v))).collect::<serde_json::Map<_, _>>(),
            "ops_before": ops(&o.before),
            "ops_after": ops(&o.after),
            "cost_before": num(o.cost_before.flops()),
            "cost_after": num(o.cost_after.flops()),
            "bytes_before": num(o.bytes_before),
            "bytes_after": num(o.bytes_after),
            "egraph": o.saturation.as_ref().map(|s| json!({
                "nodes": s.nodes,
                "classes": s.classes,
                "iterations": s.iterations,
                "stop_reason": s.stop_reason,
                "hit_limit": s.hit_limit,
                "time_ms": s.time.as_secs_f64() * 1e3,
            })),
            "residuals": g.residuals.to_string(),
            "store_or_recompute": o.residual_choices.iter().map(|c| json!({
                "name": c.name,
                "type": c.ty.to_string(),
                "stored": c.stored,
                "bytes": num(c.bytes),
                "cost": num(c.cost),
                "other": c.other.map(num),
            })).collect::<Vec<_>>(),
        })
    }
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = self.g;
        let o = &g.optimized;
        writeln!(
            f,
            "gradient of `{}` with respect to {}",
            g.primal.name,
            g.wrt_text()
        )?;
        let sizes: Vec<String> = g.sizes().iter().map(|(p, n)| format!("{p}={n}")).collect();
        writeln!(f, "ops before: {}", counts(&o.before))?;
        writeln!(f, "ops after:  {}", counts(&o.after))?;
        writeln!(
            f,
            "cost (flops + λ·residual bytes, λ = {}{}): before {} ({} bytes), after {} ({} bytes)",
            g.model.lambda,
            if sizes.is_empty() {
                String::new()
            } else {
                format!(", at {}", sizes.join(", "))
            },
            o.cost_before,
            o.bytes_before,
            o.cost_after,
            o.bytes_after
        )?;
        match &o.saturation {
            Some(s) => writeln!(
                f,
                "e-graph: {} nodes, {} classes, {} iterations, stop: {}{}, {:.2} ms",
                s.nodes,
                s.classes,
                s.iterations,
                s.stop_reason,
                if s.hit_limit {
                    " (limit hit; program still correct)"
                } else {
                    ""
                },
                s.time.as_secs_f64() * 1e3
            )?,
            None => writeln!(f, "e-graph: off (--no-optimize)")?,
        }
        write!(f, "{}", g.residuals)?;
        let choices = &o.residual_choices;
        if !choices.is_empty() {
            writeln!(
                f,
                "store or recompute: {} stored, {} recomputed",
                choices.iter().filter(|c| c.stored).count(),
                choices.iter().filter(|c| !c.stored).count()
            )?;
            for c in choices {
                let other = match c.other {
                    Some(d) if c.stored => format!("; recomputing instead: {d:+}"),
                    Some(d) => format!("; storing instead: {d:+}"),
                    None => String::new(),
                };
                writeln!(
                    f,
                    "  %{}: {}  {} ({} bytes, cost {}{other})",
                    c.name,
                    c.ty,
                    if c.stored { "stored" } else { "recomputed" },
                    c.bytes,
                    c.cost
                )?;
            }
        }
        Ok(())
    }
}

/// Compile `options.function` of `program` as it is (no derivative):
/// optimized in the e-graph (unless `options.no_optimize`), then compiled
/// with `options.backend`. A `@grad` or `@jvp` function is its derivative
/// program, compiled whole; [`optimize_gradient`](crate::optimize_gradient)
/// gives a gradient its split into primal and pullback instead.
///
/// ```
/// use egrad::{compile_function, Arg, Options, Program};
///
/// let program = Program::parse("fn mv[M, N](a: f64[M, N], x: f64[N]) -> f64[M] = matmul(a, x)")?;
/// let mv = compile_function(&program, &Options::default().function("mv"))?;
/// let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
/// let out = mv.call(&[Arg::f64_matrix(&a, 2, 3), Arg::f64(&[1.0, 0.0, -1.0])])?;
/// assert_eq!(out[0].data, vec![-2.0, -2.0]);
/// # Ok::<(), egrad::Error>(())
/// ```
pub fn compile_function(program: &Program, options: &Options) -> Result<CompiledFn> {
    let name = options
        .function
        .as_deref()
        .ok_or_else(|| Error::Usage("no function to compile: set Options::function".into()))?;
    let f = program.ir(name)?;
    let optimized = optimize_ir(f, options)?;
    Ok(CompiledFn::new(
        backend::compile(&optimized.after, &options.backend)?,
        program.file().clone(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::ir::Builder;

    #[test]
    fn a_cost_model_with_no_finite_program_is_a_limit_not_a_bug() {
        let f = Builder::new("f".to_string(), Vec::new()).finish(Vec::new());
        let e = extraction_failed(ExtractError::NoProgram { class: 0.into() }, &f);
        assert_eq!(e.kind(), ErrorKind::Limit, "{e}");
        assert!(e.to_string().contains("no program of finite cost"), "{e}");
        let e = extraction_failed(ExtractError::Untyped { class: 0.into() }, &f);
        assert_eq!(e.kind(), ErrorKind::Internal, "{e}");
    }
}
