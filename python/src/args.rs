//! Calling compiled code on Python arguments.
//!
//! Each argument is bound to its parameter (by position, then by name) and
//! taken as egrad's native layout needs it:
//!
//! * an `ndarray` whose dtype is the parameter's native one (`float64` for
//!   `f64`, `float32` for `f32`, `int64` for an `i64` array or a `bool`
//!   parameter) and which is C-contiguous and aligned is read **in place**:
//!   its memory goes to native code as it is, never copied;
//! * anything else (a Python number or list, another dtype, a strided
//!   view, a Fortran-ordered or byte-swapped array) is converted to a new
//!   C-contiguous array of the native dtype, if NumPy can cast it with
//!   `casting="same_kind"` (for a `bool` parameter: from `bool`); otherwise
//!   the call raises `EgradTypeError` naming the parameter. With
//!   `copy=False` every such conversion for an array parameter is refused
//!   instead (a scalar parameter always takes a Python or NumPy number).
//! * an `i64` scalar parameter (a run-time count, or a value declared
//!   `data`) takes a Python `int` (or
//!   anything with `__index__`), never a float.
//!
//! Results are new arrays written by native code in place (a `bool` result
//! is written as `int64` 0/1 and converted). The GIL is released while
//! native code runs.

use crate::errors::{guarded, to_py};
use crate::options::type_name;
use egrad::ArgError;
use egrad::{
    CompiledFunction, DType, Error, Function, NativeArg, NativeOut, SourceFile, Workspace,
};
use numpy::{
    Element, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn, PyReadwriteArrayDyn,
    PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFloat, PyInt, PyTuple};
use std::sync::Mutex;

/// Whether an argument that cannot be read in place may be converted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyPolicy {
    /// Convert (copy) an argument that cannot be read in place (`copy=None`).
    IfNeeded,
    /// Refuse it with an `EgradTypeError` (`copy=False`).
    Never,
}

impl CopyPolicy {
    /// The policy of a `copy=` keyword: `None` or `False`.
    pub fn from_value(copy: &Bound<'_, PyAny>) -> PyResult<CopyPolicy> {
        let copy: Option<bool> = copy.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "copy must be None or False, got {}",
                type_name(copy)
            ))
        })?;
        match copy {
            None => Ok(CopyPolicy::IfNeeded),
            Some(false) => Ok(CopyPolicy::Never),
            Some(true) => Err(PyValueError::new_err(
                "copy=True is not supported: egrad never writes its inputs, so it needs no copy of its own; \
                 use copy=None (convert only what cannot be read in place) or copy=False (convert nothing)",
            )),
        }
    }
}

/// An argument held for the call: an array borrowed from Python (rust-numpy's
/// shared borrow, so no Rust code writes it meanwhile), or an integer.
enum Held<'py> {
    F64(PyReadonlyArrayDyn<'py, f64>),
    F32(PyReadonlyArrayDyn<'py, f32>),
    I64s(PyReadonlyArrayDyn<'py, i64>),
    Bools(PyReadonlyArrayDyn<'py, i64>),
    I64(i64),
    /// A Python `float` or `int` for an `f64` scalar parameter.
    F64Scalar(f64),
    /// A Python `float` or `int` for an `f32` scalar parameter (rounded).
    F32Scalar(f32),
}

impl Held<'_> {
    fn native(&self) -> Result<NativeArg<'_>, Error> {
        fn slice<'a, T: Element>(a: &'a PyReadonlyArrayDyn<'_, T>) -> Result<&'a [T], Error> {
            a.as_slice().map_err(|e| {
                Error::internal(format!(
                    "python: an argument checked C-contiguous and aligned is not: {e}"
                ))
            })
        }
        Ok(match self {
            Held::F64(a) => NativeArg::f64(slice(a)?, a.shape()),
            Held::F32(a) => NativeArg::f32(slice(a)?, a.shape()),
            Held::I64s(a) => NativeArg::i64s(slice(a)?, a.shape()),
            Held::Bools(a) => NativeArg::bools(slice(a)?, a.shape()),
            Held::I64(n) => NativeArg::i64(*n),
            Held::F64Scalar(x) => NativeArg::scalar_f64(x),
            Held::F32Scalar(x) => NativeArg::scalar_f32(x),
        })
    }
}

/// Why a call cannot go on: an argument that does not fit its parameter
/// (rendered at the parameter, as egrad's own argument errors), or a Python
/// error.
enum Problem {
    Arg(ArgError),
    Py(PyErr),
}

impl From<PyErr> for Problem {
    fn from(e: PyErr) -> Problem {
        Problem::Py(e)
    }
}

fn at_param(i: usize, message: String) -> Problem {
    Problem::Arg(ArgError {
        site: None,
        param: Some(i),
        message,
        limit: false,
    })
}

fn no_param(message: String) -> Problem {
    Problem::Arg(ArgError {
        site: None,
        param: None,
        message,
        limit: false,
    })
}

/// The NumPy dtype native code reads for a parameter of `dtype`.
fn native_dtype(dtype: DType) -> &'static str {
    match dtype {
        DType::F64 => "float64",
        DType::F32 => "float32",
        DType::I64 | DType::Bool => "int64",
    }
}

/// `x` read in place if it is an `ndarray` of exactly `T` (native byte
/// order), C-contiguous and aligned; `None` if it must be converted.
fn in_place<'py, T: Element>(
    x: &Bound<'py, PyAny>,
) -> PyResult<Option<PyReadonlyArrayDyn<'py, T>>> {
    let Ok(a) = x.cast_exact::<PyArrayDyn<T>>() else {
        return Ok(None);
    };
    if !(a.is_c_contiguous() && a.is_aligned()) {
        return Ok(None);
    }
    a.try_readonly()
        .map(Some)
        .map_err(|e| PyValueError::new_err(format!("cannot read the array: {e}")))
}

fn held_in_place<'py>(dtype: DType, x: &Bound<'py, PyAny>) -> PyResult<Option<Held<'py>>> {
    Ok(match dtype {
        DType::F64 => in_place::<f64>(x)?.map(Held::F64),
        DType::F32 => in_place::<f32>(x)?.map(Held::F32),
        DType::I64 => in_place::<i64>(x)?.map(Held::I64s),
        DType::Bool => in_place::<i64>(x)?.map(Held::Bools),
    })
}

/// What `x` is, for messages: "an array of dtype float32", "a list".
fn describe(x: &Bound<'_, PyAny>) -> String {
    match x.getattr("dtype") {
        Ok(d) if x.hasattr("shape").unwrap_or(false) => format!("an array of dtype {d}"),
        _ => format!("a {}", type_name(x)),
    }
}

/// Why `x` (which `in_place` refused) cannot be read in place as `want`.
fn why_not_in_place(x: &Bound<'_, PyAny>, want: &str) -> String {
    let Ok(a) = x.cast_exact::<numpy::PyUntypedArray>() else {
        return format!("it is {}, not a NumPy ndarray", describe(x));
    };
    let dtype = a.dtype();
    if !dtype.to_string().eq(want) {
        return format!("its dtype is {dtype}, not {want}");
    }
    if !a.is_c_contiguous() {
        return "it is not C-contiguous (a strided view, a transpose or a Fortran-ordered array)"
            .to_string();
    }
    if !a.is_aligned() {
        return "its data is not aligned".to_string();
    }
    format!("its dtype {dtype} is not in the machine's byte order")
}

/// Hold argument `x` for parameter `i` of `f`, reading it in place when its
/// layout allows, else converting it as `copy` allows.
fn hold<'py>(
    py: Python<'py>,
    f: &Function,
    i: usize,
    x: &Bound<'py, PyAny>,
    copy: CopyPolicy,
) -> Result<Held<'py>, Problem> {
    let p = &f.params[i];
    let name = f.var_name(p.var);
    let ty = f.ty(p.var);
    if ty.dtype == DType::I64 && ty.is_scalar() {
        // A run-time count: its value binds the size parameter of its name.
        return match x.extract::<i64>() {
            Ok(n) => Ok(Held::I64(n)),
            Err(_) => Err(at_param(
                i,
                format!(
                    "argument `{name}` is an i64 (a run-time integer): pass a Python int, got {}",
                    describe_value(x)
                ),
            )),
        };
    }
    if let Some(h) = held_in_place(ty.dtype, x)? {
        return Ok(h);
    }
    if let Some(h) = python_number(ty, x)? {
        return Ok(h);
    }
    let want = native_dtype(ty.dtype);
    // A scalar parameter takes a number: making a 0-d array of it copies no
    // array, so copy=False concerns array parameters only.
    if copy == CopyPolicy::Never && !ty.is_scalar() {
        return Err(at_param(
            i,
            format!(
                "argument `{name}` ({ty}) cannot be read in place: {}; copy=False refuses to convert it (pass a C-contiguous {want} ndarray)",
                why_not_in_place(x, want)
            ),
        ));
    }
    let np = py.import("numpy")?;
    let a = np.call_method1("asarray", (x,)).map_err(|e| {
        at_param(
            i,
            format!(
                "argument `{name}` ({ty}) is {}, which NumPy cannot make an array of: {e}",
                describe(x)
            ),
        )
    })?;
    let from = a.getattr("dtype")?;
    let castable = match ty.dtype {
        // A bool parameter: from a bool array (int64 0/1 would have been
        // read in place unless strided: convert that too).
        DType::Bool => {
            from.getattr("kind")?.extract::<String>()? == "b" || from.to_string() == "int64"
        }
        DType::F64 | DType::F32 | DType::I64 => {
            let kw = PyDict::new(py);
            kw.set_item("casting", "same_kind")?;
            np.getattr("can_cast")?
                .call((&from, want), Some(&kw))?
                .extract::<bool>()?
        }
    };
    if !castable {
        let rule = match ty.dtype {
            DType::Bool => {
                "a bool parameter takes a bool array (or int64 holding 0 and 1)".to_string()
            }
            _ => {
                format!("egrad converts only what NumPy casts to {want} with casting=\"same_kind\"")
            }
        };
        return Err(at_param(
            i,
            format!(
                "argument `{name}` must be {} ({want}), got {}: {rule}",
                ty.dtype,
                describe(&a)
            ),
        ));
    }
    // `numpy.require` copies what is not C-contiguous and aligned
    // (`asarray` kept an unaligned array of the right dtype as it was).
    let kw = PyDict::new(py);
    kw.set_item("dtype", want)?;
    kw.set_item("requirements", ("C_CONTIGUOUS", "ALIGNED"))?;
    let c = np.getattr("require")?.call((&a,), Some(&kw))?;
    match held_in_place(ty.dtype, &c)? {
        Some(h) => Ok(h),
        None => Err(Problem::Py(to_py(
            py,
            &Error::internal(format!(
                "python: argument `{name}` converted to {want} cannot be read in place: {}",
                why_not_in_place(&c, want)
            )),
        ))),
    }
}

/// A Python `float` (or a subclass: `numpy.float64`) or `int` (not a
/// `bool`) for a float scalar parameter, taken without NumPy: the value
/// `numpy.asarray` and the cast would give (rounded once to `f32`), without
/// their cost.
fn python_number<'py>(ty: &egrad::Type, x: &Bound<'py, PyAny>) -> PyResult<Option<Held<'py>>> {
    if !ty.is_scalar() || !matches!(ty.dtype, DType::F64 | DType::F32) {
        return Ok(None);
    }
    let f32 = ty.dtype == DType::F32;
    if let Ok(f) = x.cast::<PyFloat>() {
        let v = f.value();
        return Ok(Some(if f32 {
            Held::F32Scalar(v as f32)
        } else {
            Held::F64Scalar(v)
        }));
    }
    if x.is_exact_instance_of::<PyInt>() {
        // Past i64, NumPy's conversion says what it does.
        if let Ok(n) = x.extract::<i64>() {
            return Ok(Some(if f32 {
                Held::F32Scalar(n as f32)
            } else {
                Held::F64Scalar(n as f64)
            }));
        }
    }
    Ok(None)
}

/// A value for a message: its type, and the value itself when short.
fn describe_value(x: &Bound<'_, PyAny>) -> String {
    let t = type_name(x);
    match x.repr() {
        Ok(r) if r.to_string().len() <= 40 => format!("{t} {r}"),
        _ => t,
    }
}

/// The arguments of a call in parameter order: the positional ones, then
/// the keywords by parameter name.
fn bind<'py>(
    f: &Function,
    args: &Bound<'py, PyTuple>,
    kwargs: Option<&Bound<'py, PyDict>>,
) -> Result<Vec<Bound<'py, PyAny>>, Problem> {
    let n = f.params.len();
    let given = args.len() + kwargs.map_or(0, |k| k.len());
    if args.len() > n {
        return Err(no_param(format!(
            "`{}` takes {n} argument(s), got {given}",
            f.name
        )));
    }
    let names: Vec<&str> = f.params.iter().map(|p| f.var_name(p.var)).collect();
    let mut slots: Vec<Option<Bound<'py, PyAny>>> = args.iter().map(Some).collect();
    slots.resize(n, None);
    for (k, v) in kwargs.into_iter().flat_map(|k| k.iter()) {
        let key: String = k.extract()?;
        let Some(i) = names.iter().position(|p| *p == key) else {
            return Err(no_param(format!(
                "`{}` has no parameter `{key}` (parameters: {})",
                f.name,
                names.join(", ")
            )));
        };
        if slots[i].is_some() {
            return Err(no_param(format!(
                "argument `{key}` of `{}` given twice (by position and by name)",
                f.name
            )));
        }
        slots[i] = Some(v);
    }
    let missing: Vec<String> = slots
        .iter()
        .zip(&names)
        .filter(|(s, _)| s.is_none())
        .map(|(_, p)| format!("`{p}`"))
        .collect();
    if !missing.is_empty() {
        return Err(no_param(format!(
            "`{}` takes {n} argument(s), got {given} (missing {})",
            f.name,
            missing.join(", ")
        )));
    }
    Ok(slots.into_iter().flatten().collect())
}

/// A result array being written by native code.
enum Out<'py> {
    F64(Bound<'py, PyArrayDyn<f64>>),
    F32(Bound<'py, PyArrayDyn<f32>>),
    I64(Bound<'py, PyArrayDyn<i64>>),
    Bool(Bound<'py, PyArrayDyn<i64>>),
}

/// The write borrow of a result array for the call.
enum OutGuard<'py> {
    F64(PyReadwriteArrayDyn<'py, f64>),
    F32(PyReadwriteArrayDyn<'py, f32>),
    I64(PyReadwriteArrayDyn<'py, i64>),
}

impl<'py> Out<'py> {
    fn new(py: Python<'py>, dtype: DType, shape: &[usize]) -> Out<'py> {
        let dims = numpy::IxDyn(shape);
        match dtype {
            DType::F64 => Out::F64(PyArrayDyn::zeros(py, dims, false)),
            DType::F32 => Out::F32(PyArrayDyn::zeros(py, dims, false)),
            DType::I64 => Out::I64(PyArrayDyn::zeros(py, dims, false)),
            DType::Bool => Out::Bool(PyArrayDyn::zeros(py, dims, false)),
        }
    }

    fn guard(&self) -> PyResult<OutGuard<'py>> {
        let borrow = |e: numpy::BorrowError| {
            PyValueError::new_err(format!("cannot write a result array: {e}"))
        };
        Ok(match self {
            Out::F64(a) => OutGuard::F64(a.try_readwrite().map_err(borrow)?),
            Out::F32(a) => OutGuard::F32(a.try_readwrite().map_err(borrow)?),
            Out::I64(a) | Out::Bool(a) => OutGuard::I64(a.try_readwrite().map_err(borrow)?),
        })
    }

    /// The Python value: the array, a bool result converted from 0/1.
    fn finish(self) -> PyResult<Bound<'py, PyAny>> {
        Ok(match self {
            Out::F64(a) => a.into_any(),
            Out::F32(a) => a.into_any(),
            Out::I64(a) => a.into_any(),
            Out::Bool(a) => a.call_method1("astype", ("bool",))?,
        })
    }
}

fn native_out<'a>(g: &'a mut OutGuard<'_>, is_bool: bool) -> Result<NativeOut<'a>, Error> {
    let bad = |e: numpy::AsSliceError| {
        Error::internal(format!("python: a new result array is not contiguous: {e}"))
    };
    Ok(match g {
        OutGuard::F64(a) => NativeOut::F64(a.as_slice_mut().map_err(bad)?),
        OutGuard::F32(a) => NativeOut::F32(a.as_slice_mut().map_err(bad)?),
        OutGuard::I64(a) => {
            let s = a.as_slice_mut().map_err(bad)?;
            if is_bool {
                NativeOut::Bool(s)
            } else {
                NativeOut::I64(s)
            }
        }
    })
}

/// The spare [`Workspace`]s of one compiled function: a call takes one
/// (or makes one when all are in use by other threads' calls) and gives
/// it back, so a call at the shapes of the last one allocates no scratch
/// and binds no sizes again (the checks of the arguments against the
/// signature still run, on the workspace's cached shapes).
#[derive(Default)]
pub struct Workspaces(Mutex<Vec<Workspace>>);

/// The most workspaces kept per function: the most threads expected to
/// call one function at once.
const SPARE_WORKSPACES: usize = 16;

impl Workspaces {
    fn take(&self, native: &CompiledFunction) -> Workspace {
        let spare = self.0.lock().ok().and_then(|mut v| v.pop());
        spare.unwrap_or_else(|| native.workspace())
    }

    fn give(&self, ws: Workspace) {
        if let Ok(mut v) = self.0.lock() {
            if v.len() < SPARE_WORKSPACES {
                v.push(ws);
            }
        }
    }
}

/// Call `native` on Python arguments; the results in order, as NumPy arrays
/// (a scalar as a 0-d array). `file` is the source argument errors point
/// into; `spare` holds `native`'s workspaces (and no other function's).
pub fn call<'py>(
    py: Python<'py>,
    native: &CompiledFunction,
    spare: &Workspaces,
    file: &SourceFile,
    args: &Bound<'py, PyTuple>,
    kwargs: Option<&Bound<'py, PyDict>>,
    copy: CopyPolicy,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let f = native.function();
    let fail = |p: Problem| match p {
        Problem::Arg(e) => to_py(py, &e.into_error(f, file)),
        Problem::Py(e) => e,
    };
    let bound = bind(f, args, kwargs).map_err(fail)?;
    let mut held = Vec::with_capacity(bound.len());
    for (i, x) in bound.iter().enumerate() {
        held.push(hold(py, f, i, x, copy).map_err(fail)?);
    }
    let nargs: Vec<NativeArg<'_>> = held
        .iter()
        .map(Held::native)
        .collect::<Result<_, Error>>()
        .map_err(|e| to_py(py, &e))?;
    let mut ws = spare.take(native);
    native
        .bind_workspace(&nargs, &mut ws)
        .map_err(|e| to_py(py, &e.into_error(f, file)))?;
    let dtypes: Vec<DType> = f.rets.iter().map(|r| f.ty(*r).dtype).collect();
    let outs: Vec<Out<'py>> = dtypes
        .iter()
        .enumerate()
        .map(|(k, &d)| Out::new(py, d, ws.output_shape(k).unwrap_or_default()))
        .collect();
    {
        let mut guards: Vec<OutGuard<'py>> =
            outs.iter().map(Out::guard).collect::<PyResult<_>>()?;
        let mut nouts: Vec<NativeOut<'_>> = guards
            .iter_mut()
            .zip(&dtypes)
            .map(|(g, &d)| native_out(g, d == DType::Bool))
            .collect::<Result<_, Error>>()
            .map_err(|e| to_py(py, &e))?;
        // Native code reads the borrowed inputs and writes the new outputs;
        // nothing in it touches Python, so other threads may run meanwhile.
        let ran = py.detach(|| {
            guarded(|| {
                native
                    .call_into(&nargs, &mut nouts, &mut ws)
                    .map_err(|e| e.into_error(f, file))
            })
        });
        spare.give(ws);
        ran.map_err(|e| to_py(py, &e))?;
    }
    outs.into_iter().map(Out::finish).collect()
}
