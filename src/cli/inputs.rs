//! The arguments a command runs a function on (`--arg`, `--args`,
//! `--random`, `--suite`), native calls on them without copies, and the
//! results: printed, as JSON, or written to `.npy`/`.npz` files (`--out`).

use super::{parse_value, random_args, suite_args};
use clap::{Args, ValueEnum};
use egrad::error::{Error, Result};
use egrad::memory;
use egrad::npy::{self, Array, View};
use egrad::suite;
use egrad::ArgError;
use egrad::Function;
use egrad::{format_elem, Value};
use egrad::{CompiledFunction, NativeArg, NativeOut};
use egrad::{DType, Type};
use indexmap::IndexMap;
use serde_json::{json, Value as Json};
use std::path::{Path, PathBuf};

/// Where a command's arguments come from.
#[derive(Args, Debug, Default, Clone)]
pub struct InputArgs {
    /// An argument: name=VALUE where VALUE is a number, a list ([1, 2, 3],
    /// [[1, 2], [3, 4]]) or @FILE.npy (a NumPy array file, read in place
    /// when its dtype is the parameter's).
    #[arg(long = "arg", value_name = "NAME=VALUE")]
    pub args: Vec<String>,
    /// @FILE.npz: bind the arrays of a NumPy archive (numpy.savez) to the
    /// parameters of their names (repeatable; --arg overrides one).
    #[arg(long = "args", value_name = "@FILE.npz")]
    pub npz: Vec<String>,
    /// Fill every argument not given with --arg with uniform values in
    /// [-1, 1) (bools true or false, i64 arrays and `data` i64 numbers 0 to
    /// 3; any other i64 number is a run-time count: give it with --dim
    /// NAME=N).
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
}

impl InputArgs {
    /// Whether any argument source was given.
    pub fn any(&self) -> bool {
        !self.args.is_empty() || !self.npz.is_empty() || self.random || self.suite.is_some()
    }
}

/// How results are printed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum PrintMode {
    /// Small arrays whole; larger ones as shape, min, max, mean and their
    /// first and last elements.
    #[default]
    Summary,
    /// Every element, one row of a matrix per line.
    Full,
}

/// Where results go and how they are shown.
#[derive(Args, Debug, Default, Clone)]
pub struct OutputArgs {
    /// Write the results to FILE.npy (one result), FILE.npz (all, by name)
    /// or a directory (NAME.npy each, created if missing).
    #[arg(long, value_name = "FILE.npy|FILE.npz|DIR")]
    pub out: Option<PathBuf>,
    /// How results are printed.
    #[arg(long, value_enum, default_value_t = PrintMode::Summary)]
    pub print: PrintMode,
}

/// One argument: its elements (owned or mapped from a file) and the file
/// it came from.
pub struct Input {
    pub array: Array,
    pub file: Option<String>,
}

impl Input {
    fn value(v: Value) -> Input {
        Input {
            array: Array::from_value(&v),
            file: None,
        }
    }

    /// The argument as the borrowed view native code reads.
    fn native(&self) -> NativeArg<'_> {
        let a = &self.array;
        let scalar = a.shape.is_empty();
        match a.view() {
            View::F64(d) => NativeArg::F64 {
                data: d,
                shape: &a.shape,
            },
            View::F32(d) => NativeArg::F32 {
                data: d,
                shape: &a.shape,
            },
            View::I64(d) if scalar && d.len() == 1 => NativeArg::I64(d[0]),
            View::I64(d) => NativeArg::I64s {
                data: d,
                shape: &a.shape,
            },
            View::Bool(d) if scalar && d.len() == 1 => NativeArg::Bool(d[0] != 0),
            View::Bool(d) => NativeArg::Bools {
                data: d,
                shape: &a.shape,
            },
        }
    }
}

/// The arguments of `f` as values (a copy of mapped files), for the
/// interpreter and the timing loops.
/// Refused before copying when the copies (f64 elements) would not fit
/// the memory limit.
pub fn values(inputs: &[Input]) -> Result<Vec<Value>> {
    value_copies(inputs).map_err(Error::Limit)
}

/// [`values`], its refusal as a message.
fn value_copies(inputs: &[Input]) -> std::result::Result<Vec<Value>, String> {
    let bytes = inputs.iter().try_fold(0u64, |b, i| {
        b.checked_add(memory::bytes_of(i.array.len(), 8)?)
    });
    memory::check(bytes, "the arguments as values")?;
    Ok(inputs.iter().map(|i| i.array.to_value()).collect())
}

/// `text` of `--arg NAME=@FILE`/`--args @FILE`: the path after `@`.
fn at_path<'a>(flag: &str, text: &'a str) -> Result<&'a Path> {
    match text.strip_prefix('@') {
        Some(p) if !p.is_empty() => Ok(Path::new(p)),
        _ => Err(Error::Usage(format!(
            "{flag} `{text}`: expected @FILE (a path after `@`)"
        ))),
    }
}

/// NumPy's name for an egrad element type.
fn numpy_name(d: DType) -> &'static str {
    match d {
        DType::F64 => "float64",
        DType::F32 => "float32",
        DType::I64 => "int64",
        DType::Bool => "bool",
    }
}

/// `array` from `file` for parameter `name: ty` of `f`: the element type
/// and rank must be the parameter's (the extents are checked with the
/// other arguments when the function is called).
fn check_file_arg(f: &Function, name: &str, ty: &Type, file: &str, array: &Array) -> Result<()> {
    if array.dtype != ty.dtype {
        return Err(Error::Usage(format!(
            "{file} holds {} elements, but parameter `{name}` of `{}` is {ty}: save it with a.astype(np.{})",
            numpy_name(array.dtype),
            f.name,
            numpy_name(ty.dtype)
        )));
    }
    if array.shape.len() != ty.shape.len() {
        return Err(Error::Usage(format!(
            "{file} has shape ({}) (rank {}), but parameter `{name}` of `{}` is {ty} (rank {})",
            array
                .shape
                .iter()
                .map(|k| k.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            array.shape.len(),
            f.name,
            ty.shape.len()
        )));
    }
    Ok(())
}

fn param_names(f: &Function) -> String {
    f.params
        .iter()
        .map(|p| f.var_name(p.var))
        .collect::<Vec<_>>()
        .join(", ")
}

/// An error reading the file of parameter `k`, naming the parameter.
fn for_param(e: Error, k: &str) -> Error {
    match e {
        Error::Io { path, message } => Error::Io {
            message: format!("{message} (the argument `{k}`)"),
            path,
        },
        e => e,
    }
}

/// The arguments given by name (`--args` archives first, `--arg` over
/// them), checked against the parameters of `f`.
fn given(f: &Function, a: &InputArgs) -> Result<IndexMap<String, Input>> {
    let has = |k: &str| f.params.iter().any(|p| f.var_name(p.var) == k);
    let param_ty = |k: &str| {
        f.params
            .iter()
            .find(|p| f.var_name(p.var) == k)
            .map(|p| f.ty(p.var).clone())
    };
    let mut out: IndexMap<String, Input> = IndexMap::new();
    for text in &a.npz {
        let path = at_path("--args", text)?;
        let shown = path.display().to_string();
        let members = npy::read_npz(path).map_err(|e| match e {
            Error::Io { path, message } => Error::Io {
                message: format!("{message} (--args)"),
                path,
            },
            e => e,
        })?;
        for (k, array) in members {
            let Some(ty) = param_ty(&k) else {
                return Err(Error::Usage(format!(
                    "--args {shown}: the archive holds `{k}`, but `{}` has no parameter `{k}` (parameters: {})",
                    f.name,
                    param_names(f)
                )));
            };
            let file = format!("{shown} (member {k})");
            check_file_arg(f, &k, &ty, &file, &array)?;
            out.insert(
                k,
                Input {
                    array,
                    file: Some(file),
                },
            );
        }
    }
    for s in &a.args {
        let (k, v) = s
            .split_once('=')
            .ok_or_else(|| Error::Usage(format!("--arg `{s}`: expected NAME=VALUE")))?;
        let k = k.trim();
        let Some(ty) = param_ty(k) else {
            return Err(Error::Usage(format!(
                "--arg `{k}`: `{}` has no parameter `{k}` (parameters: {})",
                f.name,
                param_names(f)
            )));
        };
        debug_assert!(has(k));
        let input = if v.trim_start().starts_with('@') {
            let path = at_path("--arg", v.trim())?;
            let file = path.display().to_string();
            if path.extension().is_some_and(|e| e == "npz") {
                return Err(Error::Usage(format!(
                    "--arg {k}={v}: an .npz archive binds several arguments: give it with --args {v}"
                )));
            }
            let array = Array::open(path).map_err(|e| for_param(e, k))?;
            check_file_arg(f, k, &ty, &file, &array)?;
            Input {
                array,
                file: Some(file),
            }
        } else {
            let v =
                parse_value(v, ty.dtype).map_err(|e| Error::Usage(format!("--arg {k}: {e}")))?;
            Input::value(v)
        };
        out.insert(k.to_string(), input);
    }
    Ok(out)
}

/// Every argument of `f`: given by name, else from the suite, else random
/// (with `random`), else an error naming the missing parameter.
pub fn build_inputs(
    f: &Function,
    a: &InputArgs,
    random: bool,
    dims: &IndexMap<String, u64>,
) -> Result<Vec<Input>> {
    let mut given = given(f, a)?;
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
        if let Some(input) = given.shift_remove(name) {
            out.push(input);
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
            out.push(Input::value(v.clone()));
        } else if random || a.random {
            let mut one = f.clone();
            one.params = vec![p.clone()];
            let seed = a.seed.wrapping_add(i as u64);
            let held: u64 = out.iter().map(|i: &Input| i.array.owned_bytes()).sum();
            out.extend(
                random_args(&one, dims, seed, held)?
                    .into_iter()
                    .map(Input::value),
            );
        } else {
            return Err(Error::Usage(format!(
                "missing argument `{name}: {ty}`: give --arg {name}=VALUE (or @FILE.npy), --args @FILE.npz, --random or --suite BENCHMARK"
            )));
        }
    }
    Ok(out)
}

/// Run `f` in the reference interpreter on `inputs` (copied into values),
/// naming the file of an argument an error is about.
pub fn interpret(f: &Function, inputs: &[Input]) -> std::result::Result<Vec<Value>, ArgError> {
    let vals = value_copies(inputs).map_err(ArgError::too_large)?;
    let refs: Vec<&Value> = vals.iter().collect();
    egrad::interp::run(f, &refs).map_err(|e| with_file(inputs, e))
}

/// Name the file an argument came from in an error about it.
pub fn with_file(inputs: &[Input], mut e: ArgError) -> ArgError {
    if let Some(file) = e.param.and_then(|i| inputs.get(i)?.file.as_ref()) {
        e.message = format!("{} (the argument read from {file})", e.message);
    }
    e
}

/// A typed output buffer.
enum OutBuf {
    F64(Vec<f64>),
    F32(Vec<f32>),
    I64(Vec<i64>),
    Bool(Vec<i64>),
}

/// Call `native` on `inputs`, read in place (mapped files are not
/// copied); the results as values.
pub fn call_native(
    native: &CompiledFunction,
    inputs: &[Input],
) -> std::result::Result<Vec<Value>, ArgError> {
    let args: Vec<NativeArg<'_>> = inputs.iter().map(Input::native).collect();
    let shapes = native
        .output_shapes(&args)
        .map_err(|e| with_file(inputs, e))?;
    let f = native.function();
    // The results' buffers and their values (f64 elements), checked
    // against the memory limit first, with the arguments held.
    let mut total: Option<u64> = Some(inputs.iter().map(|i| i.array.owned_bytes()).sum());
    for (r, shape) in f.rets.iter().zip(&shapes) {
        let n = shape.iter().try_fold(1usize, |a, &k| a.checked_mul(k));
        let dtype = f.ty(*r).dtype;
        let size = dtype.bytes() + if dtype == DType::F64 { 0 } else { 8 };
        total = total.and_then(|t| t.checked_add(memory::bytes_of(n?, size)?));
    }
    memory::check(total, &format!("the arguments and results of `{}`", f.name))
        .map_err(ArgError::too_large)?;
    let mut bufs = Vec::new();
    for (r, shape) in f.rets.iter().zip(&shapes) {
        let n = shape.iter().product();
        bufs.push(match f.ty(*r).dtype {
            DType::F64 => OutBuf::F64(vec![0.0; n]),
            DType::F32 => OutBuf::F32(vec![0.0; n]),
            DType::I64 => OutBuf::I64(vec![0; n]),
            DType::Bool => OutBuf::Bool(vec![0; n]),
        });
    }
    {
        let mut outs: Vec<NativeOut<'_>> = bufs
            .iter_mut()
            .map(|b| match b {
                OutBuf::F64(v) => NativeOut::F64(v),
                OutBuf::F32(v) => NativeOut::F32(v),
                OutBuf::I64(v) => NativeOut::I64(v),
                OutBuf::Bool(v) => NativeOut::Bool(v),
            })
            .collect();
        let mut ws = native.workspace();
        native
            .call_into(&args, &mut outs, &mut ws)
            .map_err(|e| with_file(inputs, e))?;
    }
    Ok(bufs
        .into_iter()
        .zip(shapes)
        .map(|(b, shape)| {
            let (dtype, data) = match b {
                OutBuf::F64(v) => (DType::F64, v),
                OutBuf::F32(v) => (DType::F32, v.into_iter().map(f64::from).collect()),
                OutBuf::I64(v) => (DType::I64, v.into_iter().map(|x| x as f64).collect()),
                OutBuf::Bool(v) => (DType::Bool, v.into_iter().map(|x| x as f64).collect()),
            };
            Value { dtype, shape, data }
        })
        .collect())
}

/// Arrays up to this many elements are printed whole by default.
const SHOWN_WHOLE: usize = 32;

fn shape_text(v: &Value) -> String {
    let shape: Vec<String> = v.shape.iter().map(|d| d.to_string()).collect();
    format!("{}[{}]", v.dtype, shape.join(", "))
}

/// min, max, mean of the finite elements and the count of the others.
fn summary(v: &Value) -> (f64, f64, f64, usize) {
    let (mut lo, mut hi, mut sum, mut n, mut odd) = (f64::INFINITY, f64::NEG_INFINITY, 0.0, 0, 0);
    for &x in &v.data {
        if x.is_finite() {
            lo = lo.min(x);
            hi = hi.max(x);
            sum += x;
            n += 1;
        } else {
            odd += 1;
        }
    }
    (lo, hi, if n > 0 { sum / n as f64 } else { f64::NAN }, odd)
}

/// A value as printed: small arrays whole; larger ones (in `Summary`
/// mode) as shape, min, max, mean and their first and last elements.
pub fn show(v: &Value, mode: PrintMode) -> String {
    if v.is_scalar() || (v.len() <= SHOWN_WHOLE && v.shape.len() < 2) {
        return v.to_string();
    }
    let elem = |x: f64| format_elem(v.dtype, x);
    // A small matrix is printed as one, a row per line.
    if mode == PrintMode::Full || v.len() <= SHOWN_WHOLE {
        return full(v, &elem);
    }
    let head: Vec<String> = v.data[..8].iter().map(|&x| elem(x)).collect();
    let tail: Vec<String> = v.data[v.len() - 2..].iter().map(|&x| elem(x)).collect();
    let (lo, hi, mean, odd) = summary(v);
    let stats = match v.dtype {
        DType::Bool => format!("{} true", v.data.iter().filter(|&&x| x != 0.0).count()),
        _ if odd == v.len() => format!("{odd} not finite"),
        _ => format!(
            "min {} max {} mean {:.6e}{}",
            elem(lo),
            elem(hi),
            mean,
            if odd > 0 {
                format!(", {odd} not finite")
            } else {
                String::new()
            }
        ),
    };
    format!(
        "{} {stats} [{}, ..., {}]",
        shape_text(v),
        head.join(", "),
        tail.join(", ")
    )
}

/// Every element, nested by the shape; a matrix one row per line.
fn full(v: &Value, elem: &dyn Fn(f64) -> String) -> String {
    fn go(
        data: &[f64],
        shape: &[usize],
        depth: usize,
        elem: &dyn Fn(f64) -> String,
        out: &mut String,
    ) {
        match shape {
            [] => out.push_str(&elem(data[0])),
            [_] => {
                out.push('[');
                for (i, &x) in data.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(&elem(x));
                }
                out.push(']');
            }
            [n, rest @ ..] => {
                let stride = rest.iter().product::<usize>();
                out.push('[');
                for i in 0..*n {
                    if i > 0 {
                        out.push_str(",\n");
                        out.push_str(&" ".repeat(depth + 1));
                    }
                    go(
                        &data[i * stride..(i + 1) * stride],
                        rest,
                        depth + 1,
                        elem,
                        out,
                    );
                }
                out.push(']');
            }
        }
    }
    let mut out = String::new();
    go(&v.data, &v.shape, 0, elem, &mut out);
    out
}

/// A number in JSON: non-finite numbers as the strings "NaN", "inf",
/// "-inf" (JSON has no literal for them).
pub fn json_number(x: f64) -> Json {
    if x.is_finite() {
        json!(x)
    } else if x.is_nan() {
        json!("NaN")
    } else if x > 0.0 {
        json!("inf")
    } else {
        json!("-inf")
    }
}

/// The results as JSON ([`value_json`]), only with `json` (only `--json`
/// prints them), and checked against the memory limit first: a JSON
/// number takes several times the bytes of the value it shows.
pub fn results_json(results: &[(String, Value)], json: bool) -> Result<Vec<Json>> {
    if !json {
        return Ok(Vec::new());
    }
    let per_element = std::mem::size_of::<Json>() + 8;
    let bytes = results.iter().try_fold(0u64, |b, (_, v)| {
        b.checked_add(memory::bytes_of(v.data.len(), per_element)?)
    });
    memory::check(bytes, "the JSON of the results").map_err(Error::Limit)?;
    Ok(results.iter().map(|(k, v)| value_json(k, v)).collect())
}

/// A named result as JSON: dtype, shape, every element (integers and
/// bools as such) and a summary.
pub fn value_json(name: &str, v: &Value) -> Json {
    let data: Vec<Json> = v
        .data
        .iter()
        .map(|&x| match v.dtype {
            DType::I64 => json!(x as i64),
            DType::Bool => json!(x != 0.0),
            DType::F32 | DType::F64 => json_number(x),
        })
        .collect();
    let (lo, hi, mean, odd) = summary(v);
    // Built in place: `json!` would copy `data` (it serializes what it is
    // given), twice the memory for a large result.
    let mut m = serde_json::Map::new();
    m.insert("name".into(), json!(name));
    m.insert("dtype".into(), json!(v.dtype.to_string()));
    m.insert("shape".into(), json!(v.shape));
    m.insert("data".into(), Json::Array(data));
    m.insert(
        "summary".into(),
        json!({
            "min": json_number(lo),
            "max": json_number(hi),
            "mean": json_number(mean),
            "not_finite": odd,
        }),
    );
    Json::Object(m)
}

/// Write named results to `path`: `.npy` (exactly one result), `.npz`
/// (all), or a directory (one `NAME.npy` each). Returns what was written.
pub fn write_outputs(path: &Path, results: &[(String, Value)]) -> Result<Vec<PathBuf>> {
    let ext = path.extension().and_then(|e| e.to_str());
    match ext {
        Some("npy") => match results {
            [(_, v)] => {
                npy::write_npy(path, v)?;
                Ok(vec![path.to_path_buf()])
            }
            _ => Err(Error::Usage(format!(
                "--out {}: there are {} results ({}); give --out FILE.npz or --out DIR",
                path.display(),
                results.len(),
                results
                    .iter()
                    .map(|(k, _)| k.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        },
        Some("npz") => {
            npy::write_npz(path, results)?;
            Ok(vec![path.to_path_buf()])
        }
        _ => {
            // Something there that is no folder (`/dev/null`, a file):
            // "File exists" from `create_dir_all` said nothing useful.
            if path.exists() && !path.is_dir() {
                return Err(Error::Usage(format!(
                    "--out {}: it is neither a .npy or .npz file nor a folder; give --out FILE.npy, FILE.npz or DIR",
                    path.display()
                )));
            }
            std::fs::create_dir_all(path).map_err(|e| Error::io("create", path.display(), e))?;
            let mut out = Vec::new();
            for (k, v) in results {
                let p = path.join(format!("{k}.npy"));
                npy::write_npy(&p, v)?;
                out.push(p);
            }
            Ok(out)
        }
    }
}

/// The results as a command prints them (`NAME: ` before each when
/// `named`).
pub fn emit(results: &[(String, Value)], mode: PrintMode, named: bool) -> String {
    let mut out = String::new();
    for (k, v) in results {
        let shown = show(v, mode);
        if named {
            // A matrix's later rows line up under its first.
            let label = format!("{k}: ");
            out.push_str(&label);
            out.push_str(&shown.replace('\n', &format!("\n{}", " ".repeat(label.chars().count()))));
        } else {
            out.push_str(&shown);
        }
        out.push('\n');
    }
    out
}
