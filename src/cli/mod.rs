//! The `egrad` command line.

mod progress;

use clap::{Args, Parser, Subcommand, ValueEnum};
use egrad::error::{Error, Result};
use egrad::internals::backend;
use egrad::internals::lang::interp;
use egrad::internals::lang::types::{DType, Type};
use egrad::internals::lang::value::{format_elem, Value};
use egrad::internals::pipeline::{arg_error, optimize_gradient, optimize_ir, Options};
use egrad::internals::program::{ParseOptions, Program};
use egrad::internals::rewrites::Limits;
use egrad::internals::suite;
use indexmap::IndexMap;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "egrad",
    version,
    about = "An optimizing derivative compiler",
    after_help = EXIT_CODES
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The exit codes, shown by `egrad --help` (and in the README).
const EXIT_CODES: &str = "Exit codes:
  0   success
  1   an error in the program or its input (syntax, type, unsupported, limit, io);
      the message points at file:line:col where there is a place
  2   a usage error (unknown function, bad flag value)
  70  an internal error: a bug in egrad (please report it)";

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Parse and type-check a program (and differentiate its @grad functions).
    Check {
        file: PathBuf,
        /// Check the program without the prelude (dot, mean, softmax, ...).
        #[arg(long)]
        no_prelude: bool,
    },
    /// Run a function through the JIT and print its results.
    Run(RunArgs),
    /// Differentiate a function and show the stages and the report.
    Grad(GradArgs),
    /// The memory-versus-recompute tradeoff of a gradient: for each λ, the
    /// chosen program's flops, residual bytes and run time, Pareto front
    /// marked.
    Explore(ExploreArgs),
    /// Time a gradient optimized and unoptimized (AD straight to Cranelift)
    /// on the same inputs.
    Bench(ExploreArgs),
    /// Compile ahead of time: an object file with native entry points (for
    /// a gradient: value_and_grad, forward, pullback) and a C header.
    Build(BuildArgs),
    /// The compile-cache key of a function: each component, what is static
    /// and what is dynamic, and for a gradient the residuals saved and why.
    Explain(ExplainArgs),
    /// Serve the GradBench tool protocol on stdin/stdout (JSON lines): the
    /// modules under gradbench/ through egrad's own AD and compiler.
    Gradbench,
}

#[derive(Args, Debug)]
pub struct ExplainArgs {
    pub file: PathBuf,
    /// A @grad function, or any function (with --wrt: its gradient).
    #[arg(long = "fn")]
    pub function: String,
    /// Explain the gradient of a scalar function with respect to these
    /// parameters (repeatable).
    #[arg(long = "wrt")]
    pub wrt: Vec<String>,
    /// Also compute the key under this λ and name the components that
    /// differ (what a recompile after changing λ would report).
    #[arg(long, value_name = "LAMBDA")]
    pub lambda_before: Option<f64>,
    #[command(flatten)]
    pub opt: OptArgs,
}

#[derive(Args, Debug)]
pub struct BuildArgs {
    pub file: PathBuf,
    /// The function: a @grad function (exports value_and_grad, forward and
    /// pullback), or any other function (exported as is; with --wrt or
    /// --grad, its gradient).
    #[arg(long = "fn")]
    pub function: String,
    /// The object file to write.
    #[arg(short = 'o', long = "output", value_name = "OUT.o")]
    pub output: PathBuf,
    /// The C header to write (default: the object's path with `.h`).
    #[arg(long, value_name = "OUT.h")]
    pub header: Option<PathBuf>,
    /// Export the gradient of a scalar function with respect to these
    /// parameters (repeatable).
    #[arg(long = "wrt")]
    pub wrt: Vec<String>,
    /// Export the gradient of a scalar function with respect to all its
    /// parameters.
    #[arg(long)]
    pub grad: bool,
    #[command(flatten)]
    pub opt: OptArgs,
}

#[derive(Args, Debug)]
pub struct ExploreArgs {
    pub file: PathBuf,
    /// A @grad function, or a scalar function to differentiate.
    #[arg(long = "fn")]
    pub function: String,
    /// λ values to try, comma-separated (flops per residual byte).
    #[arg(long, value_delimiter = ',', default_values_t = egrad::internals::explore::DEFAULT_LAMBDAS.to_vec())]
    pub lambdas: Vec<f64>,
    /// Write an SVG plot of residual bytes against run time.
    #[arg(long, value_name = "OUT.svg")]
    pub plot: Option<PathBuf>,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Time on a benchmark's inputs (bench-suite.md) instead of random ones;
    /// the model prices at their sizes unless --dim says otherwise.
    #[arg(long, value_name = "BENCHMARK", value_parser = clap::builder::PossibleValuesParser::new(suite::keys()))]
    pub suite: Option<String>,
    /// Seed of the random inputs (uniform in [-1, 1), at the --dim sizes).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Do not run: price by the model's flops only.
    #[arg(long)]
    pub no_run: bool,
    /// Milliseconds to time each distinct program (the fastest call counts).
    #[arg(long, default_value_t = 300)]
    pub time_ms: u64,
    #[command(flatten)]
    pub opt: OptArgs,
}

#[derive(Args, Debug)]
pub struct OptArgs {
    /// Size at which the cost model prices the program (repeatable), e.g. N=1000.
    #[arg(long = "dim", value_name = "NAME=SIZE")]
    pub dims: Vec<String>,
    /// Skip the e-graph: AD output goes straight to the backend.
    #[arg(long)]
    pub no_optimize: bool,
    /// λ, flops per stored residual byte: the cost model is flops + λ ·
    /// residual bytes (0 stores every residual; large values recompute).
    #[arg(long, default_value_t = egrad::internals::extract::cost::DEFAULT_LAMBDA)]
    pub lambda: f64,
    /// Saturation node limit.
    #[arg(long, default_value_t = Limits::default().nodes)]
    pub node_limit: usize,
    /// Saturation iteration limit.
    #[arg(long, default_value_t = Limits::default().iterations)]
    pub iter_limit: usize,
    /// Saturation time limit in seconds.
    #[arg(long, default_value_t = Limits::default().time.as_secs_f64())]
    pub time_limit: f64,
    /// Load rewrite rules from this directory instead of the bundled ones.
    #[arg(long)]
    pub rules: Option<PathBuf>,
    /// Also apply the bundled rules that are not exact in IEEE arithmetic
    /// (they may change rounding, or results near overflow).
    #[arg(long)]
    pub fast_math: bool,
    /// Scalar loops instead of SIMD vectors (the same results, bit for
    /// bit: for comparing).
    #[arg(long)]
    pub no_simd: bool,
    /// `matmul` as Cranelift loop nests instead of egrad's matrix kernel
    /// (the same results, bit for bit; slower: for comparing).
    #[arg(long)]
    pub no_gemm: bool,
    /// Check the program without the prelude (dot, mean, softmax, ...).
    #[arg(long)]
    pub no_prelude: bool,
    /// Show no progress on stderr (shown only on a terminal, once a command
    /// has run for a second).
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    pub file: PathBuf,
    /// The function to run.
    #[arg(long = "fn")]
    pub function: String,
    /// An argument: name=VALUE where VALUE is a number or a list ([1, 2, 3],
    /// [[1, 2], [3, 4]]).
    #[arg(long = "arg", value_name = "NAME=VALUE")]
    pub args: Vec<String>,
    /// Fill every argument not given with --arg with uniform values in [-1, 1).
    #[arg(long, conflicts_with = "suite")]
    pub random: bool,
    /// Fill the arguments (by position) with the inputs of a benchmark of the
    /// suite (bench-suite.md), in f64; --arg overrides one by name.
    #[arg(long, value_name = "BENCHMARK", value_parser = clap::builder::PossibleValuesParser::new(suite::keys()))]
    pub suite: Option<String>,
    /// With --suite: generate the inputs in f64 and round them to f32.
    #[arg(long, requires = "suite")]
    pub f32: bool,
    /// Seed for --random.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Run the reference interpreter instead of native code.
    #[arg(long)]
    pub interp: bool,
    #[command(flatten)]
    pub opt: OptArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Stage {
    /// The syntax tree of the whole file.
    Ast,
    /// Typed IR of the function being differentiated.
    Ir,
    /// AD output: forward, pullback, and their composition.
    Ad,
    /// The gradient program extracted from the e-graph.
    Extracted,
    /// Cranelift IR of the extracted gradient.
    Clif,
}

#[derive(Args, Debug)]
pub struct GradArgs {
    pub file: PathBuf,
    /// A @grad function, or a scalar function to differentiate.
    #[arg(long = "fn")]
    pub function: String,
    /// Parameters to differentiate (plain functions; default all).
    #[arg(long = "wrt")]
    pub wrt: Vec<String>,
    /// Print a stage (repeatable).
    #[arg(long = "dump", value_enum)]
    pub dumps: Vec<Stage>,
    /// Print the optimization report.
    #[arg(long)]
    pub report: bool,
    #[command(flatten)]
    pub opt: OptArgs,
}

/// Run the CLI; returns the process exit code.
pub fn main_with(cli: Cli) -> i32 {
    let result = match cli.command {
        Command::Check { file, no_prelude } => check(&file, no_prelude),
        Command::Run(a) => run(&a),
        Command::Grad(a) => grad(&a),
        Command::Explore(a) => explore(&a),
        Command::Bench(a) => bench(&a),
        Command::Build(a) => build(&a),
        Command::Explain(a) => explain(&a),
        Command::Gradbench => {
            let stdin = std::io::stdin();
            let stdout = std::io::stdout();
            return match egrad::internals::gradbench::serve(stdin.lock(), stdout.lock()) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("egrad gradbench: {e}");
                    1
                }
            };
        }
    };
    match result {
        Ok(out) => {
            print!("{out}");
            0
        }
        Err(e) => {
            eprint!("{e}");
            e.exit_code()
        }
    }
}

/// Read and check a program, with the prelude unless `no_prelude`.
fn load(file: &PathBuf, no_prelude: bool) -> Result<Program> {
    Program::from_file_with(file, &ParseOptions::default().prelude(!no_prelude))
}

fn check(file: &PathBuf, no_prelude: bool) -> Result<String> {
    let p = load(file, no_prelude)?;
    Ok(format!(
        "ok: {} function(s): {}\n",
        p.function_names().len(),
        p.function_names().join(", ")
    ))
}

fn parse_dims(dims: &[String]) -> Result<IndexMap<String, u64>> {
    let mut m = IndexMap::new();
    for d in dims {
        let (k, v) = d
            .split_once('=')
            .ok_or_else(|| Error::Usage(format!("--dim `{d}`: expected NAME=SIZE")))?;
        let n: u64 = v
            .trim()
            .parse()
            .map_err(|_| Error::Usage(format!("--dim `{d}`: `{v}` is not a size")))?;
        m.insert(k.trim().to_string(), n);
    }
    Ok(m)
}

fn options(opt: &OptArgs) -> Result<Options> {
    // Finite, not negative, and within a `Duration` (1e300 is finite).
    let time = Duration::try_from_secs_f64(opt.time_limit).map_err(|_| {
        Error::Usage(format!(
            "--time-limit must be a non-negative number of seconds that fits a duration (at most about 1.8e19), not {}",
            opt.time_limit
        ))
    })?;
    if !(opt.lambda.is_finite() && opt.lambda >= 0.0) {
        return Err(Error::Usage(
            "--lambda must be a non-negative number (flops per byte)".into(),
        ));
    }
    let mut o = Options::default()
        .no_optimize(opt.no_optimize)
        .lambda(opt.lambda)
        .fast_math(opt.fast_math)
        .limits(Limits {
            nodes: opt.node_limit,
            iterations: opt.iter_limit,
            time,
        });
    o.dims = parse_dims(&opt.dims)?;
    o.rules_dir = opt.rules.clone();
    o.backend.simd = !opt.no_simd;
    o.backend.gemm = !opt.no_gemm;
    o.progress = progress::hook(opt.quiet);
    Ok(o)
}

/// Parse a number or a (nested) list of numbers into elements and a shape.
fn parse_value(text: &str, dtype: DType) -> std::result::Result<Value, String> {
    let mut p = ValueParser {
        s: text.as_bytes(),
        i: 0,
    };
    let (shape, data) = p.item(0)?;
    p.ws();
    if p.i != p.s.len() {
        return Err(format!("unexpected `{}`", &text[p.i..]));
    }
    Ok(Value::array(dtype, shape, data))
}

struct ValueParser<'a> {
    s: &'a [u8],
    i: usize,
}

impl ValueParser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn item(&mut self, depth: usize) -> std::result::Result<(Vec<usize>, Vec<f64>), String> {
        if depth > 32 {
            return Err("lists nested too deeply".into());
        }
        self.ws();
        if self.s.get(self.i) == Some(&b'[') {
            self.i += 1;
            let mut items = Vec::new();
            loop {
                self.ws();
                if self.s.get(self.i) == Some(&b']') {
                    self.i += 1;
                    break;
                }
                if !items.is_empty() {
                    if self.s.get(self.i) != Some(&b',') {
                        return Err("expected `,` or `]`".into());
                    }
                    self.i += 1;
                }
                items.push(self.item(depth + 1)?);
            }
            let inner = items.first().map(|x| x.0.clone()).unwrap_or_default();
            if items.iter().any(|x| x.0 != inner) {
                return Err("rows of different lengths".into());
            }
            let mut shape = vec![items.len()];
            shape.extend(inner);
            Ok((shape, items.into_iter().flat_map(|x| x.1).collect()))
        } else {
            let start = self.i;
            while self.i < self.s.len() && !b",] \t\n".contains(&self.s[self.i]) {
                self.i += 1;
            }
            let t = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
            // A bool is `true` or `false` (held as 1 or 0).
            let x: f64 = match t {
                "true" => 1.0,
                "false" => 0.0,
                _ => t.parse().map_err(|_| format!("`{t}` is not a number"))?,
            };
            Ok((vec![], vec![x]))
        }
    }
}

/// The suite's generator (`V(s, i)`, uniform in [-1, 1)), which `--random`
/// uses.
use egrad::internals::suite::v as uniform;

/// The arguments `--suite` gives `f`: the benchmark's inputs by position.
/// The count is checked here, the element type in `build_args`, and the
/// shapes against the signature like any other arguments.
fn suite_args(
    f: &egrad::internals::lang::ir::Function,
    key: &str,
    dtype: DType,
) -> Result<Vec<Value>> {
    let b = suite::benchmark(key).ok_or_else(|| {
        Error::Usage(format!(
            "--suite: no benchmark `{key}` (available: {})",
            suite::keys().join(", ")
        ))
    })?;
    if b.inputs.len() != f.params.len() {
        return Err(Error::Usage(format!(
            "--suite {key} supplies {} argument(s) {}, but `{}` takes {} ({})",
            b.inputs.len(),
            b.signature(dtype),
            f.name,
            f.params.len(),
            f.params
                .iter()
                .map(|p| format!("{}: {}", f.var_name(p.var), f.ty(p.var)))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(b.values(dtype))
}

fn build_args(
    f: &egrad::internals::lang::ir::Function,
    a: &RunArgs,
    dims: &IndexMap<String, u64>,
) -> Result<Vec<Value>> {
    let mut given: IndexMap<String, String> = IndexMap::new();
    for s in &a.args {
        let (k, v) = s
            .split_once('=')
            .ok_or_else(|| Error::Usage(format!("--arg `{s}`: expected NAME=VALUE")))?;
        let k = k.trim().to_string();
        if !f.params.iter().any(|p| f.var_name(p.var) == k) {
            return Err(Error::Usage(format!(
                "--arg `{k}`: `{}` has no parameter `{k}` (parameters: {})",
                f.name,
                f.params
                    .iter()
                    .map(|p| f.var_name(p.var))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        given.insert(k, v.to_string());
    }
    let suite_values = match &a.suite {
        Some(key) => {
            let dtype = if a.f32 { DType::F32 } else { DType::F64 };
            Some(suite_args(f, key, dtype)?)
        }
        None => None,
    };
    let mut out = Vec::new();
    for (i, p) in f.params.iter().enumerate() {
        let name = f.var_name(p.var);
        let ty: &Type = f.ty(p.var);
        if let Some(text) = given.get(name) {
            if text.starts_with('@') {
                return Err(Error::Usage(format!(
                    "--arg {name}={text}: reading arrays from files is not supported yet; give the values inline"
                )));
            }
            let v = parse_value(text, ty.dtype)
                .map_err(|e| Error::Usage(format!("--arg {name}: {e}")))?;
            out.push(v);
        } else if let Some(vals) = &suite_values {
            let v = &vals[i];
            if v.dtype != ty.dtype {
                let fix = match v.dtype {
                    DType::F64 => "add --f32",
                    DType::F32 | DType::I64 | DType::Bool => "drop --f32",
                };
                return Err(Error::Usage(format!(
                    "--suite gives {} arguments, but `{name}` of `{}` is {ty}: {fix}",
                    v.dtype, f.name
                )));
            }
            out.push(v.clone());
        } else if a.random {
            let mut one = f.clone();
            one.params = vec![p.clone()];
            let seed = a.seed.wrapping_add(i as u64);
            out.extend(random_args(&one, dims, seed)?);
        } else {
            return Err(Error::Usage(format!(
                "missing argument `{name}: {ty}`: give --arg {name}=VALUE, --random or --suite BENCHMARK"
            )));
        }
    }
    Ok(out)
}

/// Print a value; long arrays are elided in the middle.
pub fn show(v: &Value) -> String {
    if v.is_scalar() || v.len() <= 32 {
        return v.to_string();
    }
    let head: Vec<String> = v.data[..8]
        .iter()
        .map(|x| format_elem(v.dtype, *x))
        .collect();
    let tail: Vec<String> = v.data[v.len() - 2..]
        .iter()
        .map(|x| format_elem(v.dtype, *x))
        .collect();
    let shape: Vec<String> = v.shape.iter().map(|d| d.to_string()).collect();
    format!(
        "{}[{}] [{}, ..., {}]",
        v.dtype,
        shape.join(", "),
        head.join(", "),
        tail.join(", ")
    )
}

fn run(a: &RunArgs) -> Result<String> {
    let program = load(&a.file, a.opt.no_prelude)?;
    let mut opts = options(&a.opt)?;
    let f = program.ir(&a.function)?.clone();
    let args = build_args(&f, a, &opts.dims)?;
    let refs: Vec<&Value> = args.iter().collect();
    if a.suite.is_some() {
        // Check the benchmark's inputs against the signature before
        // optimizing, and price the program at their sizes (--dim wins).
        let dims = interp::bind_args(&f, &refs).map_err(|e| arg_error(&f, program.file(), e))?;
        for (k, n) in dims {
            opts.dims.entry(k).or_insert(n);
        }
    }
    let results = if a.interp {
        interp::run(&f, &refs).map_err(|e| arg_error(&f, program.file(), e))?
    } else {
        let opt = optimize_ir(&f, &opts)?;
        let native = backend::compile(&opt.after, &opts.backend)?;
        native
            .call(&refs)
            .map_err(|e| arg_error(&opt.after, program.file(), e))?
    };
    let mut out = String::new();
    for r in results {
        out.push_str(&show(&r));
        out.push('\n');
    }
    Ok(out)
}

fn bench(a: &ExploreArgs) -> Result<String> {
    let program = load(&a.file, a.opt.no_prelude)?;
    let (opts, inputs) = explore_inputs(&program, a)?;
    let inputs =
        inputs.ok_or_else(|| Error::Usage("bench: --no-run leaves nothing to time".into()))?;
    let timing = egrad::internals::explore::Timing {
        budget: Duration::from_millis(a.time_ms),
        ..Default::default()
    };
    let opt = optimize_gradient(&program, &opts)?;
    let unopt = optimize_gradient(&program, &opts.clone().no_optimize(true))?;
    let timed = egrad::internals::explore::time_interleaved(
        &[&opt, &unopt],
        &inputs,
        timing,
        &opts.progress,
    )?;
    let [o, u] = [&timed[0], &timed[1]];
    let mut worst = 0.0f64;
    for (a, b) in o.outputs.iter().zip(&u.outputs) {
        for (x, y) in a.data.iter().zip(&b.data) {
            worst = worst.max((x - y).abs() / (1.0 + y.abs()));
        }
    }
    let us = |t: Duration| {
        let s = t.as_secs_f64();
        if s < 1e-6 {
            format!("{:.1} ns", s * 1e9)
        } else if s < 1e-3 {
            format!("{:.2} µs", s * 1e6)
        } else {
            format!("{:.3} ms", s * 1e3)
        }
    };
    Ok(format!(
        "{}: optimized {} ({} statements, {} buffer bytes), unoptimized {} ({} statements, {} buffer bytes), speedup {:.2}x; largest relative difference {worst:.1e}\n",
        opt.name,
        us(o.time),
        opt.optimized.after.stmts.len(),
        o.scratch_bytes,
        us(u.time),
        unopt.optimized.after.stmts.len(),
        u.scratch_bytes,
        u.time.as_secs_f64() / o.time.as_secs_f64()
    ))
}

/// The options and inputs `explore` and `bench` share: the function, the
/// model's sizes, and the inputs (suite or random) unless --no-run.
fn explore_inputs(program: &Program, a: &ExploreArgs) -> Result<(Options, Option<Vec<Value>>)> {
    let mut opts = options(&a.opt)?.function(a.function.clone());
    let primal = match program.grad_spec(&a.function) {
        Some(spec) => spec.primal.clone(),
        None => program.ir(&a.function)?.clone(),
    };
    let inputs = if a.no_run {
        None
    } else if let Some(key) = &a.suite {
        let vals = suite_args(&primal, key, DType::F64)?;
        let refs: Vec<&Value> = vals.iter().collect();
        let dims =
            interp::bind_args(&primal, &refs).map_err(|e| arg_error(&primal, program.file(), e))?;
        for (k, n) in dims {
            opts.dims.entry(k).or_insert(n);
        }
        Some(vals)
    } else {
        for p in &primal.size_params {
            opts.dims
                .entry(p.clone())
                .or_insert(egrad::internals::extract::cost::DEFAULT_DIM);
        }
        Some(random_args(&primal, &opts.dims, a.seed)?)
    };
    Ok((opts, inputs))
}

fn explore(a: &ExploreArgs) -> Result<String> {
    let program = load(&a.file, a.opt.no_prelude)?;
    let (opts, inputs) = explore_inputs(&program, a)?;
    let timing = egrad::internals::explore::Timing {
        budget: Duration::from_millis(a.time_ms),
        ..Default::default()
    };
    let e =
        egrad::internals::explore::explore(&program, &opts, &a.lambdas, inputs.as_deref(), timing)?;
    if let Some(path) = &a.plot {
        std::fs::write(path, e.to_svg()).map_err(|err| Error::io("write", path.display(), err))?;
    }
    Ok(if a.json { e.to_json() } else { e.to_string() })
}

/// Uniform arguments in [-1, 1) for every parameter of `f`, at `dims`.
fn random_args(
    f: &egrad::internals::lang::ir::Function,
    dims: &IndexMap<String, u64>,
    seed: u64,
) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    for (i, p) in f.params.iter().enumerate() {
        let (name, ty) = (f.var_name(p.var), f.ty(p.var));
        if ty.dtype == DType::I64 {
            // A run-time count: its --dim value, not a random number.
            let n = *dims.get(name).ok_or_else(|| {
                Error::Usage(format!(
                    "random inputs: give the run-time count `{name}` with --arg {name}=N or --dim {name}=N"
                ))
            })?;
            out.push(Value::scalar(DType::I64, n as f64));
            continue;
        }
        let mut shape = Vec::new();
        for d in &ty.shape {
            let get = |p: &str| dims.get(p).copied();
            let Some(n) = d.extent(&get) else {
                let missing: Vec<&str> = d
                    .params()
                    .into_iter()
                    .filter(|p| get(p).is_none())
                    .collect();
                return Err(Error::Usage(match missing.first() {
                    Some(p) => format!(
                        "random inputs: give the size of `{p}` (for `{name}`) with --dim {p}=SIZE"
                    ),
                    None => format!(
                        "random inputs: `{name}` would have a length {d}, which is negative at these sizes"
                    ),
                }));
            };
            shape.push(n as usize);
        }
        let n: usize = shape.iter().product();
        let data = (0..n as u64)
            .map(|j| uniform(seed.wrapping_add(i as u64 + 1), j))
            // A bool: true for the upper half.
            .map(|x| match ty.dtype {
                DType::Bool => f64::from(u8::from(x >= 0.0)),
                _ => x,
            })
            .collect();
        out.push(Value::array(ty.dtype, shape, data));
    }
    Ok(out)
}

/// `opts` differentiating `--wrt` (or, with `grad`, every float parameter):
/// refused for a `@grad` function, whose attribute says what to
/// differentiate.
fn with_wrt(
    program: &Program,
    function: &str,
    wrt: &[String],
    grad: bool,
    opts: Options,
) -> Result<Options> {
    if wrt.is_empty() && !grad {
        return Ok(opts);
    }
    if program.grad_spec(function).is_some() {
        let flags = if grad { "--wrt/--grad" } else { "--wrt" };
        return Err(Error::Usage(format!(
            "`{function}` is a @grad function: its attribute says what to differentiate; drop {flags}"
        )));
    }
    Ok(if wrt.is_empty() {
        opts
    } else {
        opts.wrt(wrt.to_vec())
    })
}

fn grad(a: &GradArgs) -> Result<String> {
    let program = load(&a.file, a.opt.no_prelude)?;
    let opts = with_wrt(
        &program,
        &a.function,
        &a.wrt,
        false,
        options(&a.opt)?.function(a.function.clone()),
    )?;
    let g = optimize_gradient(&program, &opts)?;
    let mut out = String::new();
    for stage in &a.dumps {
        match stage {
            Stage::Ast => out.push_str(&program.dump_ast()),
            Stage::Ir => out.push_str(&g.primal.to_string()),
            Stage::Ad => {
                out.push_str(&g.ad.forward.to_string());
                out.push('\n');
                out.push_str(&g.ad.pullback.to_string());
            }
            Stage::Extracted => out.push_str(&g.gradient_ir().to_string()),
            Stage::Clif => out.push_str(&backend::clif_text(&g.gradient_ir())?),
        }
    }
    if a.report || a.dumps.is_empty() {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&g.report().to_string());
    }
    Ok(out)
}

fn explain(a: &ExplainArgs) -> Result<String> {
    let program = load(&a.file, a.opt.no_prelude)?;
    let opts = with_wrt(&program, &a.function, &a.wrt, false, options(&a.opt)?)?;
    let mut out = egrad::internals::cache::explain(&program, &a.function, &opts)?;
    if let Some(l) = a.lambda_before {
        if !(l.is_finite() && l >= 0.0) {
            return Err(Error::Usage(
                "--lambda-before must be a non-negative number (flops per byte)".into(),
            ));
        }
        let before = opts.clone().lambda(l);
        let is_grad = program.grad_spec(&a.function).is_some() || !a.wrt.is_empty();
        let key = |o: &Options| {
            if is_grad {
                egrad::internals::cache::CacheKey::gradient(
                    &program,
                    &o.clone().function(a.function.clone()),
                )
            } else {
                egrad::internals::cache::CacheKey::function(&program, &a.function, o)
            }
        };
        let changes = key(&opts)?.diff(&key(&before)?);
        out.push_str("recompile against --lambda-before:\n");
        if changes.is_empty() {
            out.push_str("  same key: the cached program would be reused\n");
        }
        for c in changes {
            out.push_str(&format!("  changed {c}\n"));
        }
    }
    Ok(out)
}

fn build(a: &BuildArgs) -> Result<String> {
    let program = load(&a.file, a.opt.no_prelude)?;
    let opts = with_wrt(&program, &a.function, &a.wrt, a.grad, options(&a.opt)?)?;
    let header = match &a.header {
        Some(h) => h.clone(),
        None => a.output.with_extension("h"),
    };
    if header == a.output {
        return Err(Error::Usage(format!(
            "the header and the object would both be written to {}: give --header",
            header.display()
        )));
    }
    let built = egrad::internals::aot::build(
        &program,
        &egrad::internals::aot::BuildOptions {
            function: a.function.clone(),
            gradient: a.grad || !a.wrt.is_empty(),
            options: opts,
            source: a.file.display().to_string(),
        },
    )?;
    std::fs::write(&a.output, &built.object)
        .map_err(|e| Error::io("write", a.output.display(), e))?;
    std::fs::write(&header, &built.header).map_err(|e| Error::io("write", header.display(), e))?;
    Ok(format!(
        "wrote {} ({} bytes; {}) and {}\n",
        a.output.display(),
        built.object.len(),
        built.symbols.join(", "),
        header.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse() {
        let v = parse_value("[1, 2.5, -3e2]", DType::F32).unwrap();
        assert_eq!(v.shape, vec![3]);
        assert_eq!(v.data, vec![1.0, 2.5, -300.0]);
        let m = parse_value("[[1,2],[3,4],[5,6]]", DType::F64).unwrap();
        assert_eq!(m.shape, vec![3, 2]);
        assert_eq!(
            parse_value("0.5", DType::F64).unwrap().shape,
            Vec::<usize>::new()
        );
        assert!(parse_value("[1, 2", DType::F64).is_err());
        assert!(parse_value("[[1],[2,3]]", DType::F64).is_err());
        assert!(parse_value("abc", DType::F64).is_err());
        assert!(parse_value(&"[".repeat(100), DType::F64).is_err());
    }

    #[test]
    fn help_states_the_exit_codes_the_errors_use() {
        use egrad::error::ErrorKind::*;
        for kind in [Syntax, Type, Unsupported, Limit, Usage, Io, Internal] {
            let code = format!("\n  {:<3} ", kind.exit_code());
            assert!(
                EXIT_CODES.contains(&code),
                "{kind}: {code:?} not in the help"
            );
            if kind.exit_code() == 1 {
                assert!(EXIT_CODES.contains(kind.name()), "{kind}");
            }
        }
    }

    #[test]
    fn random_uses_the_suite_generator() {
        assert_eq!(uniform(1, 0), 0.532603514678172);
        assert_eq!(uniform(1, 1), -0.7479379591580257);
        assert_eq!(uniform(2, 0), 0.81013045575637);
    }

    #[test]
    fn suite_flags_parse() {
        let cli = Cli::try_parse_from([
            "egrad",
            "run",
            "f.eg",
            "--fn",
            "g",
            "--suite",
            "linreg_16",
            "--f32",
        ])
        .unwrap();
        match cli.command {
            Command::Run(a) => {
                assert_eq!(a.suite.as_deref(), Some("linreg_16"));
                assert!(a.f32);
            }
            _ => panic!("not run"),
        }
        let bad = |args: &[&str]| {
            let mut v = vec!["egrad", "run", "f.eg", "--fn", "g"];
            v.extend_from_slice(args);
            Cli::try_parse_from(v).is_err()
        };
        assert!(bad(&["--suite", "nope"]));
        assert!(bad(&["--f32"]));
        assert!(bad(&["--suite", "linreg_16", "--random"]));
    }
}
