//! The command line's arguments: every command and its flags (clap), and
//! the parsers of their values.

use super::inputs::{InputArgs, OutputArgs};
use clap::{Args, Parser, Subcommand, ValueEnum};
use egrad::suite;
use egrad::Limits;
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
pub(super) const EXIT_CODES: &str = "Exit codes:
  0   success
  1   an error in the program or its input (syntax, type, unsupported, limit, io);
      the message points at file:line:col where there is a place
  2   a usage error (unknown function, bad flag value)
  70  an internal error: a bug in egrad (please report it)";

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Parse and type-check a program (and differentiate its @grad functions).
    Check(CheckArgs),
    /// Run a function through the JIT and print its results.
    Run(RunArgs),
    /// Check a gradient against central finite differences of its function
    /// (run by the reference interpreter) at given or random arguments.
    Fdcheck(FdcheckArgs),
    /// Differentiate a function and show the stages and the report.
    Grad(GradArgs),
    /// The memory-versus-recompute tradeoff of a gradient: for each λ, the
    /// chosen program's flops, residual bytes and run time, Pareto front
    /// marked; --plot draws it as SVG, --html as a page with a tooltip per
    /// point.
    Explore(ExploreArgs),
    /// Time a gradient optimized and unoptimized (AD straight to Cranelift)
    /// on the same inputs.
    Bench(BenchArgs),
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
pub struct CheckArgs {
    pub file: PathBuf,
    /// Check the program without the prelude (dot, mean, softmax, ...).
    #[arg(long)]
    pub no_prelude: bool,
    /// Print JSON (docs/json.md) instead of text.
    #[arg(long)]
    pub json: bool,
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
    #[arg(long, value_name = "LAMBDA", value_parser = flops_per_byte)]
    pub lambda_before: Option<f64>,
    /// Print JSON (docs/json.md) instead of text.
    #[arg(long)]
    pub json: bool,
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
    /// Call egrad's runtime library for matrix products and whole-array
    /// math, as the JIT does (a function that calls `cholesky` and the
    /// like always does); the library is written beside the object.
    #[arg(long)]
    pub runtime: bool,
    /// Print JSON (docs/json.md) instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub opt: OptArgs,
}

/// `egrad bench`'s arguments, which `egrad explore` takes too.
#[derive(Args, Debug)]
pub struct BenchArgs {
    pub file: PathBuf,
    /// A @grad function, or a scalar function to differentiate.
    #[arg(long = "fn")]
    pub function: String,
    /// Print JSON (docs/json.md) instead of text.
    #[arg(long)]
    pub json: bool,
    /// An argument to time on instead of a random or suite one:
    /// name=VALUE or name=@FILE.npy (repeatable).
    #[arg(long = "arg", value_name = "NAME=VALUE")]
    pub args: Vec<String>,
    /// @FILE.npz: bind the arrays of a NumPy archive to the parameters of
    /// their names (repeatable).
    #[arg(long = "args", value_name = "@FILE.npz")]
    pub npz: Vec<String>,
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
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub time_ms: u64,
    #[command(flatten)]
    pub opt: OptArgs,
}

/// `egrad explore`'s arguments: `bench`'s, and the λ values, the plot and
/// the HTML report.
#[derive(Args, Debug)]
pub struct ExploreArgs {
    #[command(flatten)]
    pub bench: BenchArgs,
    /// λ values to try, comma-separated (flops per residual byte).
    #[arg(long, value_delimiter = ',', value_parser = flops_per_byte, default_values_t = egrad::DEFAULT_LAMBDAS.to_vec())]
    pub lambdas: Vec<f64>,
    /// Write an SVG plot of residual bytes against run time (the model's
    /// flops with --no-run): log axes where the values span a decade,
    /// ticks, a legend, the Pareto front joined, each point labelled
    /// with its λ values.
    #[arg(long, value_name = "OUT.svg")]
    pub plot: Option<PathBuf>,
    /// Write a self-contained HTML report: the same plot, where hovering a
    /// point shows its program (λ, run time, residual bytes, flops, cost,
    /// residual plan), and a table of every λ.
    #[arg(long, value_name = "OUT.html")]
    pub html: Option<PathBuf>,
}

impl std::ops::Deref for ExploreArgs {
    type Target = BenchArgs;

    fn deref(&self) -> &BenchArgs {
        &self.bench
    }
}

#[derive(Args, Debug)]
pub struct OptArgs {
    /// Size at which the cost model prices the program (repeatable), e.g. N=1000.
    #[arg(long = "dim", value_name = "NAME=SIZE", value_parser = parse_dim)]
    pub dims: Vec<(String, u64)>,
    /// Skip the e-graph: AD output goes straight to the backend.
    #[arg(long)]
    pub no_optimize: bool,
    /// λ, flops per stored residual byte: the cost model is flops + λ ·
    /// residual bytes (0 stores every residual; large values recompute).
    #[arg(long, default_value_t = egrad::DEFAULT_LAMBDA, value_parser = flops_per_byte)]
    pub lambda: f64,
    /// Saturation node limit.
    #[arg(long, default_value_t = Limits::default().nodes, value_parser = at_least_one)]
    pub node_limit: usize,
    /// Saturation iteration limit.
    #[arg(long, default_value_t = Limits::default().iterations, value_parser = at_least_one)]
    pub iter_limit: usize,
    /// Saturation time limit in seconds.
    #[arg(long, default_value_t = Limits::default().time.as_secs_f64(), value_parser = seconds)]
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
    /// Math functions (exp, log, log1p, expm1, tanh) inline in Cranelift's
    /// 128-bit vectors instead of egrad's block kernels, which run 256-bit
    /// vectors where the CPU has them (the same results, bit for bit;
    /// slower: for comparing).
    #[arg(long)]
    pub no_wide: bool,
    /// Check the program without the prelude (dot, mean, softmax, ...).
    #[arg(long)]
    pub no_prelude: bool,
    /// The most memory one run may ask for (interpreter or native code:
    /// arguments, results and scratch), in bytes or with a suffix K, M, G,
    /// T (powers of 1024); a run that needs more is refused with the number
    /// of bytes it needs. Default: 3/4 of the memory this process may use
    /// (the least of physical memory, its cgroup's limit and the address
    /// space left under RLIMIT_AS).
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub memory_limit: Option<u64>,
    /// The most element operations one run may take, counted from its
    /// sizes before it starts (a lower bound: one per element of each
    /// value computed in a loop of its own, per step of a loop): an integer,
    /// `1e15` or `10^15`. A run that would surely take more is refused
    /// with the count. Default: 10^13 (hours of one core).
    #[arg(long, value_name = "OPS", value_parser = parse_ops)]
    pub work_limit: Option<u64>,
    /// Show no progress on stderr (shown only on a terminal, once a command
    /// has run for a second).
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// A byte count: digits, optionally followed by K, M, G or T (powers of
/// 1024, an optional `iB`/`B` after them).
fn parse_bytes(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{s}` is not a byte count (e.g. 8G, 512M, 1000000)"))?;
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        u => return Err(format!("`{u}` is not a unit of bytes (K, M, G, T)")),
    };
    let v = n
        .checked_mul(1u64 << shift)
        .ok_or_else(|| format!("`{s}` is more bytes than 2^64"))?;
    if v == 0 {
        return Err("the memory limit must be at least 1 byte".into());
    }
    Ok(v)
}

/// An operation count: digits, `1e15` or `10^15`, at least 1.
fn parse_ops(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim();
    let bad = || format!("`{s}` is not an operation count (e.g. 1000000, 1e15, 10^15)");
    let n: f64 = if let Some((b, e)) = t.split_once('^') {
        let b: u32 = b.parse().map_err(|_| bad())?;
        let e: i32 = e.parse().map_err(|_| bad())?;
        f64::from(b).powi(e)
    } else if t.bytes().all(|c| c.is_ascii_digit()) && !t.is_empty() {
        return match t.parse::<u64>() {
            Ok(0) => Err("the work limit must be at least 1 operation".into()),
            Ok(n) => Ok(n),
            Err(_) => Err(format!("`{s}` is more operations than 2^64")),
        };
    } else if t.contains(['e', 'E']) {
        t.parse().map_err(|_| bad())?
    } else {
        return Err(bad());
    };
    if !(n >= 1.0 && n.fract() == 0.0) {
        return Err(format!(
            "`{s}` is not a whole number of operations, at least 1"
        ));
    }
    if n >= 18_446_744_073_709_551_616.0 {
        return Err(format!("`{s}` is more operations than 2^64"));
    }
    Ok(n as u64)
}

#[derive(Args, Debug)]
pub struct RunArgs {
    pub file: PathBuf,
    /// The function to run.
    #[arg(long = "fn")]
    pub function: String,
    #[command(flatten)]
    pub inputs: InputArgs,
    /// Run the reference interpreter instead of native code.
    #[arg(long)]
    pub interp: bool,
    #[command(flatten)]
    pub output: OutputArgs,
    /// Print JSON (docs/json.md) instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub opt: OptArgs,
}

#[derive(Args, Debug)]
pub struct FdcheckArgs {
    pub file: PathBuf,
    /// A @grad function, or a scalar function to differentiate.
    #[arg(long = "fn")]
    pub function: String,
    /// Parameters to differentiate (plain functions; default all float
    /// parameters).
    #[arg(long = "wrt")]
    pub wrt: Vec<String>,
    #[command(flatten)]
    pub inputs: InputArgs,
    /// Largest error allowed, relative to max(1, |finite difference|)
    /// (default: 1e-5 for f64, 2e-2 for f32).
    #[arg(long, value_parser = non_negative)]
    pub tol: Option<f64>,
    /// Elements checked per parameter at most (evenly spaced; each costs
    /// two runs of the function).
    #[arg(long, default_value_t = 200, value_parser = at_least_one)]
    pub max_elements: usize,
    /// Print JSON (docs/json.md) instead of text.
    #[arg(long)]
    pub json: bool,
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
    /// Arguments to compute the value and gradient at (with none, only the
    /// report or the dumps are printed).
    #[command(flatten)]
    pub inputs: InputArgs,
    /// Run the reference interpreter on the extracted program instead of
    /// native code.
    #[arg(long)]
    pub interp: bool,
    #[command(flatten)]
    pub output: OutputArgs,
    /// Print JSON (docs/json.md) instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub opt: OptArgs,
}

/// `--dim NAME=SIZE`.
fn parse_dim(d: &str) -> std::result::Result<(String, u64), String> {
    let (k, v) = d
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=SIZE, got `{d}`"))?;
    let k = k.trim();
    if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!("`{k}` is not a size parameter's name"));
    }
    let n: u64 = v
        .trim()
        .parse()
        .map_err(|_| format!("`{v}` is not a size (a whole number from 0 to 2^64 - 1)"))?;
    Ok((k.to_string(), n))
}

/// A non-negative, finite number (`--tol`).
fn non_negative(s: &str) -> std::result::Result<f64, String> {
    let x: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number"))?;
    if x.is_finite() && x >= 0.0 {
        Ok(x)
    } else {
        Err(format!("must be a non-negative, finite number, not {s}"))
    }
}

/// λ: a number of flops per byte from 0 to `egrad::MAX_LAMBDA`.
fn flops_per_byte(s: &str) -> std::result::Result<f64, String> {
    let bad = || {
        format!(
            "λ must be a number of flops per residual byte from 0 to {:e}, not {s}",
            egrad::MAX_LAMBDA
        )
    };
    non_negative(s)
        .ok()
        .filter(|&l| l <= egrad::MAX_LAMBDA)
        .ok_or_else(bad)
}

/// Seconds that fit a `Duration` (1e300 is finite but does not).
fn seconds(s: &str) -> std::result::Result<f64, String> {
    let x: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    Duration::try_from_secs_f64(x).map(|_| x).map_err(|_| {
        format!(
            "must be a non-negative number of seconds that fits a duration (at most about 1.8e19), not {s}"
        )
    })
}

/// A count of at least 1 (limits, elements).
fn at_least_one(s: &str) -> std::result::Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{s}` is not a whole number")),
    }
}
