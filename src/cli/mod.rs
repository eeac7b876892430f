//! The `egrad` command line.

mod progress;

use clap::ValueEnum;
use egrad::error::{Error, Result};

use egrad::interp;
use egrad::suite;
use egrad::DType;
use egrad::Limits;
use egrad::Value;
use egrad::{optimize_gradient, optimize_ir, Options};
use egrad::{ParseOptions, Program};
use indexmap::IndexMap;
use inputs::OutputArgs;
use serde_json::json;
use std::path::PathBuf;

mod args;
mod build;
mod fdcheck;
mod inputs;

pub use args::*;
mod json;
mod labels;
mod output;
mod plot;
mod report;
use std::time::Duration;

/// Run the CLI; returns the process exit code.
pub fn main_with(cli: Cli) -> i32 {
    let json = match &cli.command {
        Command::Check(a) => a.json,
        Command::Run(a) => a.json,
        Command::Fdcheck(a) => a.json,
        Command::Grad(a) => a.json,
        Command::Explore(a) => a.json,
        Command::Bench(a) => a.json,
        Command::Build(a) => a.json,
        Command::Explain(a) => a.json,
        Command::Gradbench => false,
    };
    let name = command_name(&cli.command);
    // Before anything is read: the program's text counts against it too.
    if let Some(bytes) = memory_limit(&cli.command) {
        egrad::memory::set_limit(bytes);
    }
    if let Some(ops) = work_limit(&cli.command) {
        egrad::work::set_limit(ops);
    }
    let result = match cli.command {
        Command::Check(a) => check(&a),
        Command::Run(a) => run(&a),
        Command::Fdcheck(a) => fdcheck::fdcheck(&a),
        Command::Grad(a) => grad(&a),
        Command::Explore(a) => explore(&a),
        Command::Bench(a) => bench(&a),
        Command::Build(a) => build::build(&a),
        Command::Explain(a) => explain(&a),
        Command::Gradbench => {
            let stdin = std::io::stdin();
            let stdout = std::io::stdout();
            return match egrad::serve_gradbench(stdin.lock(), stdout.lock()) {
                Ok(()) => 0,
                // The harness closed its end: nothing more to answer.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
                Err(e) => {
                    output::stderr(&format!("error: {e}\n"));
                    1
                }
            };
        }
    };
    match result {
        Ok(out) => output::exit_code(output::stdout(|w| out.write(w, json)), out.code),
        Err(e) => {
            output::stderr(&e.to_string());
            let code = e.exit_code();
            if !json {
                return code;
            }
            let text = json::error(name, &e);
            output::exit_code(output::stdout(|w| writeln!(w, "{text}")), code)
        }
    }
}

/// Print what clap says of the command line (help, the version, or a
/// usage error); returns the exit code. Help goes to stdout, whose
/// failures are told as for any output (`output::exit_code`).
pub fn parse_error(e: &clap::Error) -> i32 {
    let code = e.exit_code();
    let printed = e.print();
    if e.use_stderr() {
        return code;
    }
    use std::io::Write;
    output::exit_code(printed.and_then(|()| std::io::stdout().flush()), code)
}

/// The command's `--memory-limit`, if it has one.
fn memory_limit(c: &Command) -> Option<u64> {
    opt_args(c).and_then(|o| o.memory_limit)
}

/// The command's `--work-limit`, if it has one.
fn work_limit(c: &Command) -> Option<u64> {
    opt_args(c).and_then(|o| o.work_limit)
}

/// The command's optimization options, if it has them.
fn opt_args(c: &Command) -> Option<&args::OptArgs> {
    match c {
        Command::Run(a) => Some(&a.opt),
        Command::Fdcheck(a) => Some(&a.opt),
        Command::Grad(a) => Some(&a.opt),
        Command::Explore(a) => Some(&a.opt),
        Command::Bench(a) => Some(&a.opt),
        Command::Build(a) => Some(&a.opt),
        Command::Explain(a) => Some(&a.opt),
        Command::Check(_) | Command::Gradbench => None,
    }
}

/// The name of a command, as typed.
fn command_name(c: &Command) -> &'static str {
    match c {
        Command::Check(_) => "check",
        Command::Run(_) => "run",
        Command::Fdcheck(_) => "fdcheck",
        Command::Grad(_) => "grad",
        Command::Explore(_) => "explore",
        Command::Bench(_) => "bench",
        Command::Build(_) => "build",
        Command::Explain(_) => "explain",
        Command::Gradbench => "gradbench",
    }
}

/// What a command prints: its text, its JSON (docs/json.md), and the exit
/// code (0, or 1 when `fdcheck` finds a mismatch).
pub struct Output {
    text: String,
    json: serde_json::Value,
    code: i32,
}

impl Output {
    fn new(text: String, json: serde_json::Value) -> Output {
        Output {
            text,
            json,
            code: 0,
        }
    }

    /// Write the text, or the JSON with `json`, to `w`.
    fn write(&self, w: &mut dyn std::io::Write, json: bool) -> std::io::Result<()> {
        if json {
            serde_json::to_writer_pretty(&mut *w, &self.json)?;
            w.write_all(b"\n")
        } else {
            w.write_all(self.text.as_bytes())
        }
    }
}

/// Read and check a program, with the prelude unless `no_prelude`.
fn load(file: &PathBuf, no_prelude: bool) -> Result<Program> {
    Program::from_file_with(file, &ParseOptions::default().prelude(!no_prelude))
}

/// How many function names `egrad check` prints.
const CHECK_NAMES: usize = 20;

fn check(a: &CheckArgs) -> Result<Output> {
    let p = load(&a.file, a.no_prelude)?;
    let names = p.function_names();
    // The first names only: a generated program may have thousands.
    let shown = names.iter().take(CHECK_NAMES).copied().collect::<Vec<_>>();
    let more = match names.len().saturating_sub(CHECK_NAMES) {
        0 => String::new(),
        k => format!(", and {k} more (--json lists every one)"),
    };
    Ok(Output::new(
        format!(
            "ok: {} function(s): {}{more}\n",
            names.len(),
            shown.join(", ")
        ),
        json!({
            "command": "check",
            "file": a.file.display().to_string(),
            "functions": names,
        }),
    ))
}

fn options(opt: &OptArgs) -> Result<Options> {
    // Checked by the value parsers (`seconds`, `flops_per_byte`); the
    // library's own callers get the same check here.
    let time = Duration::try_from_secs_f64(opt.time_limit).map_err(|_| {
        Error::Usage(format!(
            "--time-limit must be a non-negative number of seconds that fits a duration, not {}",
            opt.time_limit
        ))
    })?;
    let mut o = Options::default()
        .no_optimize(opt.no_optimize)
        .lambda(opt.lambda)
        .fast_math(opt.fast_math)
        .limits(Limits {
            nodes: opt.node_limit,
            iterations: opt.iter_limit,
            time,
        });
    o.dims = opt.dims.iter().cloned().collect();
    o.rules_dir = opt.rules.clone();
    o.backend.simd = !opt.no_simd;
    o.backend.gemm = !opt.no_gemm;
    o.backend.wide = !opt.no_wide;
    o.progress = progress::hook(opt.quiet);
    Ok(o)
}

/// Parse a number or a (nested) list of numbers into elements and a shape.
fn parse_value(text: &str, dtype: DType) -> std::result::Result<Value, String> {
    let mut p = ValueParser {
        s: text.as_bytes(),
        i: 0,
        dtype,
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
    dtype: DType,
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
            // An integer is held as an f64: past 2^53 it would silently
            // become another integer.
            if self.dtype == DType::I64 {
                let n = t
                    .parse::<i128>()
                    .map_err(|_| format!("`{t}` is not an integer (the parameter is i64)"))?;
                if n.unsigned_abs() > u128::from(egrad::interp::MAX_COUNT) {
                    return Err(format!(
                        "`{t}` is larger in magnitude than 2^53 = {}, the largest integer egrad takes exactly",
                        egrad::interp::MAX_COUNT
                    ));
                }
            }
            if !x.is_finite()
                && t.parse::<f64>().is_ok()
                && !t.to_ascii_lowercase().contains("inf")
                && !t.to_ascii_lowercase().contains("nan")
            {
                return Err(format!(
                    "`{t}` is too large for a float (largest about 1.8e308)"
                ));
            }
            Ok((vec![], vec![x]))
        }
    }
}

/// The suite's generator (`V(s, i)`, uniform in [-1, 1)), which `--random`
/// uses.
use egrad::suite::v as uniform;

/// The arguments `--suite` gives `f`: the benchmark's inputs by position.
/// The count is checked here, the element type in `build_args`, and the
/// shapes against the signature like any other arguments.
fn suite_args(f: &egrad::Function, key: &str, dtype: DType) -> Result<Vec<Value>> {
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

/// The names results are printed and saved under: `result` for one,
/// `result0`, `result1`, ... for several.
/// The names of `function`'s `n` results as `run` prints and writes them:
/// `result` alone; the parts of a `@grad` or `@value_and_grad` function's
/// tuple as `grad` names them (`value`, `grad_w`, ...); other tuples'
/// parts `result0`, `result1`, ...
fn result_names(program: &Program, function: &str, n: usize) -> Vec<String> {
    if n == 1 {
        return vec!["result".into()];
    }
    let def = program.ast().items.iter().find(|d| d.name.name == function);
    for a in def.map_or(&[][..], |d| &d.attrs[..]) {
        let names = value_and_grad_names(a.args.iter().map(|p| &p.name));
        match a.name.name.as_str() {
            "grad" if n == a.args.len() => return names[1..].to_vec(),
            "value_and_grad" if n == names.len() => return names,
            _ => {}
        }
    }
    (0..n).map(|i| format!("result{i}")).collect()
}

/// `value`, then `grad_w` for each parameter `w` differentiated: how
/// `grad` and `run` name a gradient's results.
fn value_and_grad_names<S: std::fmt::Display>(wrt: impl IntoIterator<Item = S>) -> Vec<String> {
    std::iter::once("value".to_string())
        .chain(wrt.into_iter().map(|w| format!("grad_{w}")))
        .collect()
}

/// Results as printed text and JSON, written to `--out` when given.
fn results_output(
    command: &str,
    function: &str,
    results: Vec<(String, Value)>,
    o: &OutputArgs,
    named: bool,
    json: bool,
    extra: serde_json::Value,
) -> Result<Output> {
    let results_json = inputs::results_json(&results, json)?;
    let mut text = inputs::emit(&results, o.print, named);
    let written: Vec<String> = match &o.out {
        Some(p) => inputs::write_outputs(p, &results)?
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
        None => Vec::new(),
    };
    if !written.is_empty() {
        text.push_str(&format!("wrote {}\n", written.join(", ")));
    }
    let mut j = json!({
        "command": command,
        "function": function,
        "written": written,
    });
    if let Some(m) = j.as_object_mut() {
        // Moved in: `json!` would copy it.
        m.insert("results".into(), serde_json::Value::Array(results_json));
        if let Some(e) = extra.as_object() {
            m.extend(e.clone());
        }
    }
    Ok(Output::new(text, j))
}

/// With `--suite`, price the program at the sizes of the benchmark's
/// inputs (--dim wins), checking them against the signature first.
fn price_at_inputs(
    f: &egrad::Function,
    program: &Program,
    values: &[Value],
    opts: &mut Options,
) -> Result<()> {
    let refs: Vec<&Value> = values.iter().collect();
    let dims = interp::bind_args(f, &refs).map_err(|e| e.into_error(f, program.file()))?;
    for (k, n) in dims {
        opts.dims.entry(k).or_insert(n);
    }
    Ok(())
}

fn run(a: &RunArgs) -> Result<Output> {
    let program = load(&a.file, a.opt.no_prelude)?;
    let mut opts = options(&a.opt)?;
    let f = program.ir(&a.function)?.clone();
    let args = inputs::build_inputs(&f, &a.inputs, false, &opts.dims)?;
    if a.inputs.suite.is_some() {
        price_at_inputs(&f, &program, &inputs::values(&args)?, &mut opts)?;
    }
    let results = if a.interp {
        inputs::interpret(&f, &args).map_err(|e| e.into_error(&f, program.file()))?
    } else {
        let opt = optimize_ir(&f, &opts)?;
        let native = egrad::compile(&opt.after, &opts.backend)?;
        inputs::call_native(&native, &args).map_err(|e| e.into_error(&opt.after, program.file()))?
    };
    let named: Vec<(String, Value)> = result_names(&program, &a.function, results.len())
        .into_iter()
        .zip(results)
        .collect();
    // A tuple's parts are labelled; a single result is printed bare.
    let labelled = named.len() > 1;
    results_output(
        "run",
        &a.function,
        named,
        &a.output,
        labelled,
        a.json,
        json!({ "backend": if a.interp { "interpreter" } else { "native" } }),
    )
}

/// A duration as printed: ns, µs or ms.
fn time_text(t: Duration) -> String {
    let s = t.as_secs_f64();
    if s < 1e-6 {
        format!("{:.1} ns", s * 1e9)
    } else if s < 1e-3 {
        format!("{:.2} µs", s * 1e6)
    } else {
        format!("{:.3} ms", s * 1e3)
    }
}

fn bench(a: &BenchArgs) -> Result<Output> {
    let program = load(&a.file, a.opt.no_prelude)?;
    let (opts, inputs) = explore_inputs(&program, a)?;
    let inputs =
        inputs.ok_or_else(|| Error::Usage("bench: --no-run leaves nothing to time".into()))?;
    let timing = egrad::Timing {
        budget: Duration::from_millis(a.time_ms),
        ..Default::default()
    };
    let opt = optimize_gradient(&program, &opts)?;
    let unopt = optimize_gradient(&program, &opts.clone().no_optimize(true))?;
    let timed = egrad::time_interleaved(&[&opt, &unopt], &inputs, timing, &opts.progress)?;
    let [o, u] = [&timed[0], &timed[1]];
    let mut worst = 0.0f64;
    for (a, b) in o.outputs.iter().zip(&u.outputs) {
        for (x, y) in a.data.iter().zip(&b.data) {
            worst = worst.max((x - y).abs() / (1.0 + y.abs()));
        }
    }
    let speedup = u.time.as_secs_f64() / o.time.as_secs_f64();
    let text = format!(
        "{}: optimized {} ({} statements, {} buffer bytes), unoptimized {} ({} statements, {} buffer bytes), speedup {:.2}x; largest relative difference {worst:.1e}\n",
        opt.name,
        time_text(o.time),
        opt.optimized.after.stmts.len(),
        o.scratch_bytes,
        time_text(u.time),
        unopt.optimized.after.stmts.len(),
        u.scratch_bytes,
        speedup
    );
    let side = |t: &egrad::Timed, g: &egrad::GradProgram| {
        json!({
            "time_s": t.time.as_secs_f64(),
            "statements": g.optimized.after.stmts.len(),
            "buffer_bytes": t.scratch_bytes,
        })
    };
    Ok(Output::new(
        text,
        json!({
            "command": "bench",
            "function": opt.name,
            "optimized": side(o, &opt),
            "unoptimized": side(u, &unopt),
            "speedup": inputs::json_number(speedup),
            "largest_relative_difference": inputs::json_number(worst),
        }),
    ))
}

/// The options and inputs `explore` and `bench` share: the function, the
/// model's sizes, and the inputs (--arg/--args, else suite or random)
/// unless --no-run.
fn explore_inputs(program: &Program, a: &BenchArgs) -> Result<(Options, Option<Vec<Value>>)> {
    let mut opts = options(&a.opt)?.function(a.function.clone());
    let primal = primal_of(program, &a.function)?;
    if a.no_run {
        return Ok((opts, None));
    }
    if a.suite.is_none() {
        for p in &primal.size_params {
            opts.dims.entry(p.clone()).or_insert(egrad::DEFAULT_DIM);
        }
    }
    let given = inputs::InputArgs {
        args: a.args.clone(),
        npz: a.npz.clone(),
        random: a.suite.is_none(),
        suite: a.suite.clone(),
        f32: false,
        seed: a.seed,
    };
    let vals = inputs::values(&inputs::build_inputs(&primal, &given, false, &opts.dims)?)?;
    if a.suite.is_some() || !a.args.is_empty() || !a.npz.is_empty() {
        // Price at the sizes of the inputs given (--dim wins).
        price_at_inputs(&primal, program, &vals, &mut opts)?;
    }
    Ok((opts, Some(vals)))
}

fn explore(a: &ExploreArgs) -> Result<Output> {
    let program = load(&a.file, a.opt.no_prelude)?;
    let (opts, inputs) = explore_inputs(&program, a)?;
    let timing = egrad::Timing {
        budget: Duration::from_millis(a.time_ms),
        ..Default::default()
    };
    let e = egrad::explore(&program, &opts, &a.lambdas, inputs.as_deref(), timing)?;
    if a.plot.is_some() || a.html.is_some() {
        let drawn = plot::draw(&e)?;
        let write = |path: &PathBuf, text: &str| {
            std::fs::write(path, text).map_err(|err| Error::io("write", path.display(), err))
        };
        if let Some(path) = &a.plot {
            write(path, &drawn.svg)?;
        }
        if let Some(path) = &a.html {
            write(path, &report::html(&e, &drawn))?;
        }
    }
    let mut j: serde_json::Value = serde_json::from_str(&e.to_json())
        .map_err(|err| Error::internal(format!("explore's JSON does not parse: {err}")))?;
    if let Some(m) = j.as_object_mut() {
        m.insert("command".into(), json!("explore"));
    }
    Ok(Output::new(e.to_string(), j))
}

/// Uniform arguments in [-1, 1) for every parameter of `f`, at `dims`
/// (a `bool` true for the upper half; an `i64` array's elements in
/// `0..=`[`RANDOM_INT_MAX`]; an `i64` scalar, a run-time count, its
/// `--dim`); refused before allocating when they and `held_before` bytes already
/// held would pass the memory limit.
fn random_args(
    f: &egrad::Function,
    dims: &IndexMap<String, u64>,
    seed: u64,
    held_before: u64,
) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    let mut held: Option<u64> = Some(held_before);
    for (i, p) in f.params.iter().enumerate() {
        let (name, ty) = (f.var_name(p.var), f.ty(p.var));
        if egrad::interp::is_count(f, p) {
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
            let n = usize::try_from(n).map_err(|_| {
                Error::Limit(format!(
                    "random inputs: `{name}` would have {n} elements along one axis, more than this machine can address"
                ))
            })?;
            shape.push(n);
        }
        // Checked before anything is allocated (each element an f64),
        // with the arguments made before it.
        let n = shape.iter().try_fold(1usize, |a, &k| a.checked_mul(k));
        held = n
            .and_then(|n| egrad::memory::bytes_of(n, 8))
            .and_then(|b| b.checked_add(held?));
        egrad::memory::check(held, &format!("the random arguments up to `{name}: {ty}`"))
            .map_err(Error::Limit)?;
        let n = n.unwrap_or(0);
        let data = (0..n as u64)
            .map(|j| uniform(seed.wrapping_add(i as u64 + 1), j))
            // A bool: true for the upper half.
            .map(|x| match ty.dtype {
                DType::Bool => f64::from(u8::from(x >= 0.0)),
                DType::I64 => random_int(x),
                _ => x,
            })
            .collect();
        out.push(Value::array(ty.dtype, shape, data));
    }
    Ok(out)
}

/// The largest element `--random` puts in an `i64` array: small and
/// non-negative, so a case of a `match` or an index into an array of four
/// elements or more.
pub const RANDOM_INT_MAX: i64 = 3;

/// An element of a random `i64` array from a uniform `x` in [-1, 1): each
/// of `0..=RANDOM_INT_MAX` as likely.
fn random_int(x: f64) -> f64 {
    let k = ((x + 1.0) / 2.0 * (RANDOM_INT_MAX + 1) as f64).floor();
    k.clamp(0.0, RANDOM_INT_MAX as f64)
}

/// The function a gradient command differentiates: a `@grad` function's
/// primal, or the named function itself.
fn primal_of(program: &Program, function: &str) -> Result<egrad::Function> {
    Ok(match program.grad_spec(function) {
        Some(spec) => spec.primal.clone(),
        None => program.ir(function)?.clone(),
    })
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

fn grad(a: &GradArgs) -> Result<Output> {
    let program = load(&a.file, a.opt.no_prelude)?;
    let mut opts = with_wrt(
        &program,
        &a.function,
        &a.wrt,
        false,
        options(&a.opt)?.function(a.function.clone()),
    )?;
    let primal = primal_of(&program, &a.function)?;
    let args = if a.inputs.any() {
        let args = inputs::build_inputs(&primal, &a.inputs, false, &opts.dims)?;
        price_at_inputs(&primal, &program, &inputs::values(&args)?, &mut opts)?;
        Some(args)
    } else {
        None
    };
    let g = optimize_gradient(&program, &opts)?;
    let mut out = String::new();
    let mut dumps = serde_json::Map::new();
    for stage in &a.dumps {
        let text = match stage {
            Stage::Ast => program.dump_ast(),
            Stage::Ir => g.primal.to_string(),
            Stage::Ad => format!("{}\n{}", g.ad.forward, g.ad.pullback),
            Stage::Extracted => g.gradient_ir().to_string(),
            Stage::Clif => egrad::clif_text(&g.gradient_ir())?,
        };
        out.push_str(&text);
        let key = stage
            .to_possible_value()
            .map(|v| v.get_name().to_string())
            .unwrap_or_default();
        dumps.insert(key, json!(text));
    }
    let mut j = json!({
        "command": "grad",
        "function": a.function,
        "wrt": g.wrt,
        "report": g.report().to_json(),
        "dumps": dumps,
    });
    if a.report || (a.dumps.is_empty() && args.is_none()) {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&g.report().to_string());
    }
    if let Some(args) = args {
        let vg = g.value_and_grad_ir();
        let results = if a.interp {
            inputs::interpret(vg, &args).map_err(|e| e.into_error(vg, program.file()))?
        } else {
            let compiled = g.compile()?;
            inputs::call_native(compiled.native(), &args)
                .map_err(|e| e.into_error(vg, program.file()))?
        };
        let named: Vec<(String, Value)> = value_and_grad_names(&g.wrt)
            .into_iter()
            .zip(results)
            .collect();
        if !out.is_empty() {
            out.push('\n');
        }
        let r = results_output("grad", &a.function, named, &a.output, true, a.json, j)?;
        out.push_str(&r.text);
        j = r.json;
        if let Some(m) = j.as_object_mut() {
            m.insert(
                "backend".into(),
                json!(if a.interp { "interpreter" } else { "native" }),
            );
        }
    } else if a.output.out.is_some() {
        return Err(Error::Usage(
            "--out: give the arguments to compute the gradient at (--arg, --args, --random or --suite)".into(),
        ));
    }
    Ok(Output::new(out, j))
}

fn explain(a: &ExplainArgs) -> Result<Output> {
    let program = load(&a.file, a.opt.no_prelude)?;
    let opts = with_wrt(&program, &a.function, &a.wrt, false, options(&a.opt)?)?;
    let mut out = egrad::explain(&program, &a.function, &opts)?;
    let is_grad = program.grad_spec(&a.function).is_some() || !a.wrt.is_empty();
    let key = |o: &Options| {
        if is_grad {
            egrad::CacheKey::gradient(&program, &o.clone().function(a.function.clone()))
        } else {
            egrad::CacheKey::function(&program, &a.function, o)
        }
    };
    let components: serde_json::Map<String, serde_json::Value> = key(&opts)?
        .components()
        .into_iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    let mut j = json!({
        "command": "explain",
        "function": a.function,
        "gradient": is_grad,
        "key": components,
        "text": out,
    });
    if let Some(l) = a.lambda_before {
        let before = opts.clone().lambda(l);
        let changes = key(&opts)?.diff(&key(&before)?);
        out.push_str("recompile against --lambda-before:\n");
        if changes.is_empty() {
            out.push_str("  same key: the cached program would be reused\n");
        }
        for c in &changes {
            out.push_str(&format!("  changed {c}\n"));
        }
        if let Some(m) = j.as_object_mut() {
            m.insert(
                "changed_against_lambda_before".into(),
                json!(changes
                    .iter()
                    .map(|c| json!({"component": c.component, "before": c.before, "now": c.now}))
                    .collect::<Vec<_>>()),
            );
        }
    }
    Ok(Output::new(out, j))
}

#[cfg(test)]
mod tests {
    use super::args::EXIT_CODES;
    use super::*;
    use clap::Parser;

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
                assert_eq!(a.inputs.suite.as_deref(), Some("linreg_16"));
                assert!(a.inputs.f32);
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
