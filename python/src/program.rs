//! The Python classes: `Program` (a checked source), `Function` (a compiled
//! function of it) and `Gradient` (a compiled, optimized gradient).
//!
//! Compiling happens once per function name, `wrt` and options: a
//! `Program` keeps what it compiled, and every `Function` or `Gradient` it
//! hands out for the same request shares the same native code. The GIL is
//! released while egrad parses, optimizes and compiles, and while native
//! code runs.

use crate::args::{call, CopyPolicy, Workspaces};
use crate::errors::{guarded, py_result, to_py};
use crate::options::{type_name, OptSpec};
use egrad::optimize_ir;
use egrad::{clif_text_with, compile};
use egrad::{explain, CacheKey};
use egrad::{
    optimize_gradient, BackendOptions, CompiledFunction, CompiledGradient, Error, Function,
    GradProgram, Options, ParseOptions, Program, Type,
};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList, PyString, PyTuple};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// `name[N, M](x: f32[N], n: i64) -> f32[M]`: a function's signature as
/// the source spells it.
pub fn signature(f: &Function) -> String {
    let sizes = if f.size_params.is_empty() {
        String::new()
    } else {
        format!("[{}]", f.size_params.join(", "))
    };
    let params: Vec<String> = f
        .params
        .iter()
        .map(|p| format!("{}: {}", f.var_name(p.var), f.ty(p.var)))
        .collect();
    let rets: Vec<String> = f.ret_types().iter().map(Type::to_string).collect();
    let rets = if rets.len() == 1 {
        rets[0].clone()
    } else {
        format!("({})", rets.join(", "))
    };
    format!("{}{sizes}({}) -> {rets}", f.name, params.join(", "))
}

/// One result as is, several as a tuple.
fn one_or_tuple<'py>(
    py: Python<'py>,
    mut rs: Vec<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    if rs.len() == 1 {
        return Ok(rs.remove(0));
    }
    Ok(PyTuple::new(py, rs)?.into_any())
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing panics while holding these locks (only map look-ups and
    // inserts), but a poisoned map is still a valid map.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A compiled plain function and what it was compiled from.
struct FunctionEntry {
    program: Arc<Program>,
    /// The options as given (the program's defaults filled in): what a
    /// pickle stores.
    spec: OptSpec,
    options: Options,
    /// The checked IR, before the e-graph.
    before: Function,
    native: CompiledFunction,
    /// `native`'s workspaces, reused across calls.
    spare: Workspaces,
}

/// A compiled gradient and what it was compiled from.
struct GradientEntry {
    program: Arc<Program>,
    /// The options as given (the program's defaults filled in).
    spec: OptSpec,
    /// With `function` and `wrt` set.
    options: Options,
    grad: GradProgram,
    compiled: CompiledGradient,
    /// The workspaces of `compiled`'s native function, reused across calls.
    spare: Workspaces,
}

/// How `grad` returns the gradients: one array, or a tuple in `wrt` order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    One,
    Tuple,
}

/// A parsed and type-checked egrad program (a `.eg` file or a string).
///
/// Made by `egrad.compile(source)` or `egrad.compile_file(path)`. Its
/// functions are compiled on first request and cached:
/// `program.function(name)`, `program.grad(name, wrt=...)`.
#[pyclass(frozen, module = "egrad", name = "Program")]
pub struct PyProgram {
    program: Arc<Program>,
    /// Whether it was checked with the prelude (`compile(prelude=...)`).
    prelude: bool,
    defaults: OptSpec,
    copy: CopyPolicy,
    functions: Mutex<HashMap<String, Arc<FunctionEntry>>>,
    gradients: Mutex<HashMap<String, Arc<GradientEntry>>>,
}

/// Keywords `compile`/`compile_file` take besides the options.
const COMPILE_KEYWORDS: [&str; 3] = ["name", "prelude", "copy"];
/// Keywords `explain` takes besides the options.
const EXPLAIN_KEYWORDS: [&str; 2] = ["wrt", "lam_before"];

/// `wrt` as given: `None`, one name, or a sequence of names.
fn wrt_names(wrt: Option<&Bound<'_, PyAny>>) -> PyResult<Option<(Vec<String>, Shape)>> {
    let Some(w) = wrt.filter(|w| !w.is_none()) else {
        return Ok(None);
    };
    if let Ok(s) = w.cast::<PyString>() {
        return Ok(Some((vec![s.to_string()], Shape::One)));
    }
    let names: Vec<String> = w.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "wrt must be a parameter name or a list of names, got {}",
            type_name(w)
        ))
    })?;
    Ok(Some((names, Shape::Tuple)))
}

/// `options` differentiating `wrt`; refused for a `@grad` function, whose
/// attribute says what to differentiate (as the CLI's `--wrt`).
fn with_wrt(
    program: &Program,
    name: &str,
    wrt: Option<&[String]>,
    options: Options,
) -> Result<Options, Error> {
    let Some(wrt) = wrt else {
        return Ok(options);
    };
    if program.grad_spec(name).is_some() {
        return Err(Error::Usage(format!(
            "`{name}` is a @grad function: its attribute says what to differentiate; drop wrt="
        )));
    }
    if wrt.is_empty() {
        return Err(Error::Usage(format!(
            "wrt is empty: name at least one parameter of `{name}` to differentiate"
        )));
    }
    Ok(options.wrt(wrt.iter().cloned()))
}

impl PyProgram {
    pub fn new(program: Program, prelude: bool, defaults: OptSpec, copy: CopyPolicy) -> PyProgram {
        PyProgram {
            program: Arc::new(program),
            prelude,
            defaults,
            copy,
            functions: Mutex::new(HashMap::new()),
            gradients: Mutex::new(HashMap::new()),
        }
    }

    /// What a pickle stores of the program, and what
    /// `egrad._pickle._restore` compiles it again from: `(source, name,
    /// prelude, copy, options)` (the text, not the path: a process that
    /// unpickles it may not have the file).
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let file = self.program.file();
        PyTuple::new(
            py,
            [
                file.text.as_ref().into_pyobject(py)?.into_any(),
                file.name.as_ref().into_pyobject(py)?.into_any(),
                PyBool::new(py, self.prelude).to_owned().into_any(),
                copy_value(py, self.copy),
                self.defaults.to_dict(py)?.into_any(),
            ],
        )
    }

    fn copy_policy(&self, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<CopyPolicy> {
        match kwargs.map(|k| k.get_item("copy")).transpose()?.flatten() {
            Some(c) => CopyPolicy::from_value(&c),
            None => Ok(self.copy),
        }
    }

    fn function_entry(
        &self,
        py: Python<'_>,
        name: &str,
        spec: &OptSpec,
    ) -> PyResult<Arc<FunctionEntry>> {
        let spec = spec.over(&self.defaults);
        let key = format!("{name}\u{0}{}", spec.key());
        if let Some(e) = lock(&self.functions).get(&key) {
            return Ok(e.clone());
        }
        let program = self.program.clone();
        let made = py.detach(|| {
            guarded(|| {
                let options = spec.to_options()?;
                let before = program.ir(name)?.clone();
                let optimized = optimize_ir(&before, &options)?;
                let native = compile(&optimized.after, &options.backend)?;
                Ok(FunctionEntry {
                    program: program.clone(),
                    spec: spec.clone(),
                    options,
                    before,
                    native,
                    spare: Workspaces::default(),
                })
            })
        });
        let entry = Arc::new(py_result(py, made)?);
        // Another thread may have compiled the same meanwhile: keep one.
        Ok(lock(&self.functions).entry(key).or_insert(entry).clone())
    }

    fn gradient_entry(
        &self,
        py: Python<'_>,
        name: &str,
        wrt: Option<&[String]>,
        spec: &OptSpec,
    ) -> PyResult<Arc<GradientEntry>> {
        let spec = spec.over(&self.defaults);
        let key = format!("{name}\u{0}{wrt:?}\u{0}{}", spec.key());
        if let Some(e) = lock(&self.gradients).get(&key) {
            return Ok(e.clone());
        }
        let program = self.program.clone();
        let made = py.detach(|| {
            guarded(|| {
                let options = with_wrt(&program, name, wrt, spec.to_options()?.function(name))?;
                let grad = optimize_gradient(&program, &options)?;
                let compiled = grad.compile()?;
                Ok(GradientEntry {
                    program: program.clone(),
                    spec: spec.clone(),
                    options,
                    grad,
                    compiled,
                    spare: Workspaces::default(),
                })
            })
        });
        let entry = Arc::new(py_result(py, made)?);
        Ok(lock(&self.gradients).entry(key).or_insert(entry).clone())
    }
}

#[pymethods]
impl PyProgram {
    /// The name diagnostics show for the source: the path as given to
    /// `compile_file`, or the `name` given to `compile`.
    #[getter]
    fn name(&self) -> String {
        self.program.file().name.to_string()
    }

    /// The program's functions, in source order (the prelude's are not
    /// listed).
    #[getter]
    fn functions(&self) -> Vec<String> {
        self.program
            .function_names()
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    /// The signature of function `name`, as `f[N](x: f32[N], y: f32) -> f32`
    /// (for a `@grad` function: its gradient's).
    fn signature(&self, py: Python<'_>, name: &str) -> PyResult<String> {
        py_result(py, self.program.ir(name).map(signature))
    }

    /// The function `name`, compiled (the first time) through the e-graph
    /// and Cranelift, as `egrad run` compiles it.
    ///
    /// Keywords: `copy` (None: convert arguments that cannot be read in
    /// place; False: refuse them) and the compile options (`lam`, `dims`,
    /// `no_optimize`, `fast_math`, `node_limit`, `iter_limit`,
    /// `time_limit`, `simd`, `gemm`, `rules`), which override the
    /// program's.
    #[pyo3(signature = (name, **options))]
    fn function(
        slf: &Bound<'_, Self>,
        py: Python<'_>,
        name: &str,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyFunction> {
        let this = slf.get();
        if let Some(w) = options.and_then(|o| o.get_item("wrt").ok().flatten()) {
            return Err(PyTypeError::new_err(format!(
                "function() takes no wrt (got {}): use grad(name, wrt=...) for a gradient",
                w.repr()?
            )));
        }
        let spec = OptSpec::from_kwargs(options, &["copy"])?;
        let copy = this.copy_policy(options)?;
        let entry = this.function_entry(py, name, &spec)?;
        Ok(PyFunction {
            entry,
            copy,
            program: slf.clone().unbind(),
        })
    }

    /// The gradient of `name`, optimized and compiled (the first time).
    ///
    /// `name` is a `@grad` function (its attribute says what to
    /// differentiate; give no `wrt`), or a function with one scalar
    /// result, differentiated with respect to `wrt`: one parameter name
    /// (`grad` then returns one array) or a list of names (a tuple, in that
    /// order); None differentiates every parameter (a tuple).
    ///
    /// Keywords: `copy` and the compile options, as for `function`.
    #[pyo3(signature = (name, wrt=None, **options))]
    fn grad(
        slf: &Bound<'_, Self>,
        py: Python<'_>,
        name: &str,
        wrt: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyGradient> {
        let this = slf.get();
        let spec = OptSpec::from_kwargs(options, &["copy"])?;
        let copy = this.copy_policy(options)?;
        let wrt = wrt_names(wrt)?;
        let entry =
            this.gradient_entry(py, name, wrt.as_ref().map(|(w, _)| w.as_slice()), &spec)?;
        let shape = match &wrt {
            Some((_, s)) => *s,
            // A @grad function returns what its signature says.
            None if this.program.grad_spec(name).is_some() && entry.grad.wrt.len() == 1 => {
                Shape::One
            }
            None => Shape::Tuple,
        };
        Ok(PyGradient {
            entry,
            copy,
            shape,
            wrt_given: wrt.is_some(),
            program: slf.clone().unbind(),
        })
    }

    /// What `egrad explain` prints for `name`: its compile-cache key, one
    /// component per line, which arguments are static and which dynamic,
    /// and for a gradient (a `@grad` function, or `wrt` given) the
    /// residuals and each store-or-recompute choice.
    ///
    /// `lam_before`: also compute the key under this λ and name the
    /// components a recompile would change (the CLI's `--lambda-before`).
    #[pyo3(signature = (name, wrt=None, lam_before=None, **options))]
    fn explain(
        &self,
        py: Python<'_>,
        name: &str,
        wrt: Option<&Bound<'_, PyAny>>,
        lam_before: Option<f64>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<String> {
        let spec = OptSpec::from_kwargs(options, &EXPLAIN_KEYWORDS)?.over(&self.defaults);
        let wrt = wrt_names(wrt)?.map(|(w, _)| w);
        let program = self.program.clone();
        let name = name.to_string();
        let text = py.detach(move || {
            guarded(|| {
                let options = with_wrt(&program, &name, wrt.as_deref(), spec.to_options()?)?;
                explain_text(&program, &name, &options, lam_before)
            })
        });
        py_result(py, text)
    }

    /// Pickle support: the source text, its name, `prelude`, `copy` and
    /// the options; unpickling compiles it again, once per process
    /// (`egrad.pickle_cache_info()`).
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        reduce(py, ("program", self.state(py)?).into_pyobject(py)?)
    }

    fn __repr__(&self) -> String {
        format!(
            "<egrad.Program {} ({})>",
            self.program.file().name,
            self.program.function_names().join(", ")
        )
    }
}

/// `egrad explain`'s text, with `--lambda-before`'s part when asked.
fn explain_text(
    program: &Program,
    name: &str,
    options: &Options,
    lam_before: Option<f64>,
) -> Result<String, Error> {
    let mut out = explain(program, name, options)?;
    let Some(l) = lam_before else {
        return Ok(out);
    };
    if !(l.is_finite() && (0.0..=egrad::MAX_LAMBDA).contains(&l)) {
        return Err(Error::Usage(format!(
            "lam_before must be a non-negative number (flops per residual byte) of at most {:e}, not {l}",
            egrad::MAX_LAMBDA
        )));
    }
    let before = options.clone().lambda(l);
    let is_grad = program.grad_spec(name).is_some() || options.wrt.is_some();
    let key = |o: &Options| {
        if is_grad {
            CacheKey::gradient(program, &o.clone().function(name))
        } else {
            CacheKey::function(program, name, o)
        }
    };
    let changes = key(options)?.diff(&key(&before)?);
    out.push_str("recompile against lam_before:\n");
    if changes.is_empty() {
        out.push_str("  same key: the cached program would be reused\n");
    }
    for c in changes {
        out.push_str(&format!("  changed {c}\n"));
    }
    Ok(out)
}

/// A compiled egrad function: call it on NumPy arrays (or anything NumPy
/// converts), by position or by parameter name.
///
/// One result comes back as a NumPy array (a scalar as a 0-d array),
/// several as a tuple of arrays.
#[pyclass(frozen, module = "egrad", name = "Function")]
pub struct PyFunction {
    entry: Arc<FunctionEntry>,
    copy: CopyPolicy,
    /// The program it was compiled from (what a pickle stores).
    program: Py<PyProgram>,
}

#[pymethods]
impl PyFunction {
    #[pyo3(signature = (*args, **kwargs))]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let e = &self.entry;
        let rs = call(
            py,
            &e.native,
            &e.spare,
            e.program.file(),
            args,
            kwargs,
            self.copy,
        )?;
        one_or_tuple(py, rs)
    }

    /// The function's name.
    #[getter]
    fn name(&self) -> String {
        self.entry.before.name.clone()
    }

    /// The signature, as `f[N](x: f32[N], y: f32) -> f32`.
    #[getter]
    fn signature(&self) -> String {
        signature(&self.entry.before)
    }

    /// The parameters' names, in order.
    #[getter]
    fn params(&self) -> Vec<String> {
        let f = &self.entry.before;
        f.params
            .iter()
            .map(|p| f.var_name(p.var).to_string())
            .collect()
    }

    /// The program at a stage, as text: `"ir"` (typed IR, as checked),
    /// `"optimized"` (after the e-graph: what is compiled), `"clif"`
    /// (Cranelift IR).
    #[pyo3(signature = (stage="optimized"))]
    fn dump(&self, py: Python<'_>, stage: &str) -> PyResult<String> {
        let e = &self.entry;
        let text = match stage {
            "ir" => Ok(e.before.to_string()),
            "optimized" => Ok(e.native.function().to_string()),
            "clif" => {
                py.detach(|| guarded(|| clif_text_with(e.native.function(), &e.options.backend)))
            }
            other => Err(Error::Usage(format!(
                "no stage `{other}` of a function: \"ir\", \"optimized\" or \"clif\""
            ))),
        };
        py_result(py, text)
    }

    /// The compile-cache key of this function, as `egrad explain` prints it.
    fn explain(&self, py: Python<'_>) -> PyResult<String> {
        let e = &self.entry;
        let name = e.before.name.clone();
        py_result(
            py,
            py.detach(|| guarded(|| explain(&e.program, &name, &e.options))),
        )
    }

    /// The parameters' types, in order, as the source spells them
    /// (`"f32[N]"`, `"i64"`, `"bool[N, M]"`).
    #[getter]
    fn param_types(&self) -> Vec<String> {
        param_types(&self.entry.before)
    }

    /// The results' types, as the source spells them.
    #[getter]
    fn result_types(&self) -> Vec<String> {
        self.entry
            .before
            .ret_types()
            .iter()
            .map(Type::to_string)
            .collect()
    }

    /// Pickle support: the program's state, the name, the options and
    /// `copy`; unpickling compiles it again, once per process.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let e = &self.entry;
        let state = self.program.get().state(py)?;
        let args = (
            "function",
            state,
            e.before.name.clone(),
            e.spec.to_dict(py)?,
            copy_value(py, self.copy),
        );
        reduce(py, args.into_pyobject(py)?)
    }

    fn __repr__(&self) -> String {
        format!("<egrad.Function {}>", signature(&self.entry.before))
    }
}

/// A compiled gradient: `grad(*args)` gives the gradients,
/// `value_and_grad(*args)` the function's value too, computed in one pass
/// of native code. Arguments as for `Function`.
#[pyclass(frozen, module = "egrad", name = "Gradient")]
pub struct PyGradient {
    entry: Arc<GradientEntry>,
    copy: CopyPolicy,
    shape: Shape,
    /// Whether `grad` was given a `wrt` (else a pickle stores None).
    wrt_given: bool,
    /// The program it was compiled from (what a pickle stores).
    program: Py<PyProgram>,
}

impl PyGradient {
    fn run<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let e = &self.entry;
        let mut rs = call(
            py,
            e.compiled.native(),
            &e.spare,
            e.program.file(),
            args,
            kwargs,
            self.copy,
        )?;
        if rs.is_empty() {
            return Err(to_py(
                py,
                &Error::internal("python: a value-and-gradient program returned nothing"),
            ));
        }
        let value = rs.remove(0);
        let grads = match self.shape {
            Shape::One if rs.len() == 1 => rs.remove(0),
            _ => PyTuple::new(py, rs)?.into_any(),
        };
        Ok((value, grads))
    }
}

#[pymethods]
impl PyGradient {
    /// The gradients (as `grad`).
    #[pyo3(signature = (*args, **kwargs))]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.run(py, args, kwargs)?.1)
    }

    /// The gradients: one array when `wrt` was one name (or the `@grad`
    /// function differentiates one parameter), else a tuple in `wrt` order.
    #[pyo3(signature = (*args, **kwargs))]
    fn grad<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.run(py, args, kwargs)?.1)
    }

    /// `(value, gradients)`: the function's value as a 0-d array, and the
    /// gradients as `grad` returns them.
    #[pyo3(signature = (*args, **kwargs))]
    fn value_and_grad<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        self.run(py, args, kwargs)
    }

    /// The name asked for: the `@grad` function, or the function
    /// differentiated with `wrt`.
    #[getter]
    fn name(&self) -> String {
        self.entry.grad.name.clone()
    }

    /// The differentiated parameters, in the order of the gradients.
    #[getter]
    fn wrt(&self) -> Vec<String> {
        self.entry.grad.wrt.clone()
    }

    /// The signature of the function differentiated: its parameters are
    /// what the gradient takes, its scalar result is the value of
    /// `value_and_grad` (for a `@grad` function: its body, under its name).
    #[getter]
    fn signature(&self) -> String {
        signature(&self.entry.grad.primal)
    }

    /// The parameters' names, in order.
    #[getter]
    fn params(&self) -> Vec<String> {
        let f = &self.entry.grad.primal;
        f.params
            .iter()
            .map(|p| f.var_name(p.var).to_string())
            .collect()
    }

    /// The optimization report, as `egrad grad --report` prints it: ops
    /// before and after, cost, e-graph statistics and stop reason,
    /// residuals, and for each one stored or recomputed the figures behind
    /// the choice.
    fn report(&self) -> String {
        self.entry.grad.report().to_string()
    }

    /// The compile-cache key of this gradient, as `egrad explain` prints it.
    fn explain(&self, py: Python<'_>) -> PyResult<String> {
        let e = &self.entry;
        let name = e.grad.name.clone();
        py_result(
            py,
            py.detach(|| guarded(|| explain(&e.program, &name, &e.options))),
        )
    }

    /// A stage, as `egrad grad --dump STAGE` prints it: `"ir"` (the primal's
    /// typed IR), `"ad"` (forward and pullback), `"extracted"` (the
    /// gradient program after the e-graph), `"clif"` (its Cranelift IR).
    #[pyo3(signature = (stage="extracted"))]
    fn dump(&self, py: Python<'_>, stage: &str) -> PyResult<String> {
        let g = &self.entry.grad;
        let backend: BackendOptions = self.entry.options.backend;
        let text = match stage {
            "ir" => Ok(g.primal.to_string()),
            "ad" => Ok(format!("{}\n{}", g.ad.forward, g.ad.pullback)),
            "extracted" => Ok(g.gradient_ir().to_string()),
            "clif" => py.detach(|| guarded(|| clif_text_with(&g.gradient_ir(), &backend))),
            other => Err(Error::Usage(format!(
                "no stage `{other}` of a gradient: \"ir\", \"ad\", \"extracted\" or \"clif\""
            ))),
        };
        py_result(py, text)
    }

    /// The parameters' types, in order, as the source spells them.
    #[getter]
    fn param_types(&self) -> Vec<String> {
        param_types(&self.entry.grad.primal)
    }

    /// Pickle support: the program's state, the name, `wrt` as given (one
    /// name, a list or None), the options and `copy`; unpickling compiles
    /// it again, once per process.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let e = &self.entry;
        let wrt = match (self.wrt_given, self.shape) {
            (false, _) => py.None().into_bound(py),
            (true, Shape::One) => e.grad.wrt[0].clone().into_pyobject(py)?.into_any(),
            (true, Shape::Tuple) => PyList::new(py, &e.grad.wrt)?.into_any(),
        };
        let state = self.program.get().state(py)?;
        let args = (
            "gradient",
            state,
            e.grad.name.clone(),
            wrt,
            e.spec.to_dict(py)?,
            copy_value(py, self.copy),
        );
        reduce(py, args.into_pyobject(py)?)
    }

    fn __repr__(&self) -> String {
        let g = &self.entry.grad;
        format!(
            "<egrad.Gradient of {} with respect to {}>",
            signature(&g.primal),
            g.wrt.join(", ")
        )
    }
}

/// The parameters' types of `f`, as the source spells them.
fn param_types(f: &Function) -> Vec<String> {
    f.params.iter().map(|p| f.ty(p.var).to_string()).collect()
}

/// The `copy=` keyword that gives `copy` again.
fn copy_value(py: Python<'_>, copy: CopyPolicy) -> Bound<'_, PyAny> {
    match copy {
        CopyPolicy::IfNeeded => py.None().into_bound(py),
        CopyPolicy::Never => PyBool::new(py, false).to_owned().into_any(),
    }
}

/// `__reduce__`'s answer: `egrad._pickle._restore` and its arguments.
fn reduce<'py>(py: Python<'py>, args: Bound<'py, PyTuple>) -> PyResult<Bound<'py, PyTuple>> {
    let restore = py.import("egrad._pickle")?.getattr("_restore")?;
    PyTuple::new(py, [restore, args.into_any()])
}

/// Parse and check `source`; the module functions `compile` and
/// `compile_file` read their keywords here.
pub fn load(
    py: Python<'_>,
    read: impl FnOnce(&ParseOptions) -> Result<Program, Error> + Send,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<PyProgram> {
    let defaults = OptSpec::from_kwargs(kwargs, &COMPILE_KEYWORDS)?;
    let item = |k: &str| {
        kwargs
            .map(|d| d.get_item(k))
            .transpose()
            .map(Option::flatten)
    };
    let prelude = match item("prelude")? {
        Some(p) => p.extract::<bool>().map_err(|_| {
            PyTypeError::new_err(format!("prelude must be a bool, got {}", type_name(&p)))
        })?,
        None => true,
    };
    let copy = match item("copy")? {
        Some(c) => CopyPolicy::from_value(&c)?,
        None => CopyPolicy::IfNeeded,
    };
    // Check the options now, not at the first compile.
    py_result(py, defaults.to_options())?;
    let parse = ParseOptions::default().prelude(prelude);
    let program = py_result(py, py.detach(|| guarded(|| read(&parse))))?;
    Ok(PyProgram::new(program, prelude, defaults, copy))
}
