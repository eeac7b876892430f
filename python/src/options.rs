//! The compile options a Python caller gives as keyword arguments
//! (`lam=`, `dims=`, `no_optimize=`, ...), checked as the CLI checks its
//! flags and turned into egrad's [`Options`].

use egrad::DEFAULT_LAMBDA;
use egrad::{Error, Limits, Options};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyMapping};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

/// The option names, in the order the docs list them.
pub const NAMES: [&str; 11] = [
    "lam",
    "dims",
    "no_optimize",
    "fast_math",
    "node_limit",
    "iter_limit",
    "time_limit",
    "simd",
    "gemm",
    "wide",
    "rules",
];

/// Options as given: `None` is "not given here" (the program's default,
/// then egrad's).
#[derive(Clone, Debug, Default)]
pub struct OptSpec {
    pub lam: Option<f64>,
    pub dims: Option<Vec<(String, u64)>>,
    pub no_optimize: Option<bool>,
    pub fast_math: Option<bool>,
    pub node_limit: Option<usize>,
    pub iter_limit: Option<usize>,
    pub time_limit: Option<f64>,
    pub simd: Option<bool>,
    pub gemm: Option<bool>,
    pub wide: Option<bool>,
    pub rules: Option<PathBuf>,
}

fn get<'py, T: for<'a> FromPyObject<'a, 'py>>(
    value: &Bound<'py, PyAny>,
    name: &str,
    what: &str,
) -> PyResult<Option<T>> {
    if value.is_none() {
        return Ok(None);
    }
    value.extract::<T>().map(Some).map_err(|_| {
        PyTypeError::new_err(format!(
            "option `{name}` must be {what}, got {}",
            type_name(value)
        ))
    })
}

/// The Python type name of a value, for messages.
pub fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".to_string())
}

impl OptSpec {
    /// Read the options among `kwargs`; `allowed` are the other keyword
    /// names the caller takes (they are skipped here). An unknown name is
    /// a `TypeError`, as for any Python function.
    pub fn from_kwargs(kwargs: Option<&Bound<'_, PyDict>>, allowed: &[&str]) -> PyResult<OptSpec> {
        let mut o = OptSpec::default();
        let Some(kwargs) = kwargs else {
            return Ok(o);
        };
        for (k, v) in kwargs.iter() {
            let key: String = k.extract()?;
            match key.as_str() {
                "lam" => o.lam = get(&v, "lam", "a number (flops per residual byte)")?,
                "dims" => o.dims = dims(&v)?,
                "no_optimize" => o.no_optimize = get(&v, "no_optimize", "a bool")?,
                "fast_math" => o.fast_math = get(&v, "fast_math", "a bool")?,
                "node_limit" => o.node_limit = get(&v, "node_limit", "a non-negative int")?,
                "iter_limit" => o.iter_limit = get(&v, "iter_limit", "a non-negative int")?,
                "time_limit" => o.time_limit = get(&v, "time_limit", "a number of seconds")?,
                "simd" => o.simd = get(&v, "simd", "a bool")?,
                "gemm" => o.gemm = get(&v, "gemm", "a bool")?,
                "wide" => o.wide = get(&v, "wide", "a bool")?,
                "rules" => o.rules = get(&v, "rules", "a path (str or os.PathLike)")?,
                other if allowed.contains(&other) => {}
                other => {
                    let mut names: Vec<&str> = allowed.to_vec();
                    names.extend(NAMES);
                    return Err(PyTypeError::new_err(format!(
                        "unexpected keyword argument `{other}` (options: {})",
                        names.join(", ")
                    )));
                }
            }
        }
        Ok(o)
    }

    /// These options, with `base`'s where these give none.
    pub fn over(&self, base: &OptSpec) -> OptSpec {
        OptSpec {
            lam: self.lam.or(base.lam),
            dims: self.dims.clone().or_else(|| base.dims.clone()),
            no_optimize: self.no_optimize.or(base.no_optimize),
            fast_math: self.fast_math.or(base.fast_math),
            node_limit: self.node_limit.or(base.node_limit),
            iter_limit: self.iter_limit.or(base.iter_limit),
            time_limit: self.time_limit.or(base.time_limit),
            simd: self.simd.or(base.simd),
            gemm: self.gemm.or(base.gemm),
            wide: self.wide.or(base.wide),
            rules: self.rules.clone().or_else(|| base.rules.clone()),
        }
    }

    /// egrad's options, with egrad's defaults for what is not given; the
    /// same checks and messages as the CLI's flags.
    pub fn to_options(&self) -> Result<Options, Error> {
        let defaults = Limits::default();
        let seconds = self.time_limit.unwrap_or(defaults.time.as_secs_f64());
        let time = Duration::try_from_secs_f64(seconds).map_err(|_| {
            Error::Usage(format!(
                "time_limit must be a non-negative number of seconds that fits a duration (at most about 1.8e19), not {seconds}"
            ))
        })?;
        let lam = self.lam.unwrap_or(DEFAULT_LAMBDA);
        if !(lam.is_finite() && (0.0..=egrad::MAX_LAMBDA).contains(&lam)) {
            return Err(Error::Usage(format!(
                "lam must be a non-negative number (flops per residual byte) of at most {:e}, not {lam}",
                egrad::MAX_LAMBDA
            )));
        }
        let mut o = Options::default()
            .no_optimize(self.no_optimize.unwrap_or(false))
            .lambda(lam)
            .fast_math(self.fast_math.unwrap_or(false))
            .limits(Limits {
                nodes: self.node_limit.unwrap_or(defaults.nodes),
                iterations: self.iter_limit.unwrap_or(defaults.iterations),
                time,
            });
        for (name, n) in self.dims.iter().flatten() {
            o = o.dim(name.clone(), *n);
        }
        o.rules_dir = self.rules.clone();
        o.backend.simd = self.simd.unwrap_or(true);
        o.backend.gemm = self.gemm.unwrap_or(true);
        o.backend.wide = self.wide.unwrap_or(true);
        Ok(o)
    }

    /// The options given, as the keywords that give them again (what a
    /// pickle stores): `{"lam": 0.5, "dims": {"N": 64}}`.
    pub fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        macro_rules! put {
            ($($field:ident),*) => {
                $(if let Some(v) = &self.$field {
                    d.set_item(stringify!($field), v)?;
                })*
            };
        }
        put!(
            lam,
            no_optimize,
            fast_math,
            node_limit,
            iter_limit,
            time_limit,
            simd,
            gemm,
            wide,
            rules
        );
        if let Some(dims) = &self.dims {
            let m = PyDict::new(py);
            for (name, n) in dims {
                m.set_item(name, n)?;
            }
            d.set_item("dims", m)?;
        }
        Ok(d)
    }

    /// A text that is equal for two specs exactly when they compile the
    /// same way (defaults filled in): what compiled programs are cached
    /// under.
    pub fn key(&self) -> String {
        let defaults = Limits::default();
        let mut k = String::new();
        let _ = write!(
            k,
            "lam={:x};no_optimize={};fast_math={};nodes={};iters={};time={:x};simd={};gemm={};wide={};rules={:?};dims=",
            self.lam.unwrap_or(DEFAULT_LAMBDA).to_bits(),
            self.no_optimize.unwrap_or(false),
            self.fast_math.unwrap_or(false),
            self.node_limit.unwrap_or(defaults.nodes),
            self.iter_limit.unwrap_or(defaults.iterations),
            self.time_limit.unwrap_or(defaults.time.as_secs_f64()).to_bits(),
            self.simd.unwrap_or(true),
            self.gemm.unwrap_or(true),
            self.wide.unwrap_or(true),
            self.rules,
        );
        for (name, n) in self.dims.iter().flatten() {
            let _ = write!(k, "{name}={n},");
        }
        k
    }
}

/// `dims`: a mapping from size-parameter names to sizes, kept in its order.
fn dims(value: &Bound<'_, PyAny>) -> PyResult<Option<Vec<(String, u64)>>> {
    if value.is_none() {
        return Ok(None);
    }
    let bad = || {
        PyTypeError::new_err(format!(
            "option `dims` must be a mapping from size-parameter names to non-negative ints, like {{\"N\": 1000}}, got {}",
            type_name(value)
        ))
    };
    let mapping = value.cast::<PyMapping>().map_err(|_| bad())?;
    let mut out = Vec::new();
    for item in mapping.items()?.iter() {
        let (k, v): (String, u64) = item.extract().map_err(|_| bad())?;
        out.push((k, v));
    }
    Ok(Some(out))
}
