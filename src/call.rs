//! Calling compiled code from Rust: arguments ([`Arg`], vectors, matrices
//! and arrays of any rank), argument errors turned into diagnostics at the
//! parameter ([`ArgError::into_error`]), and the compiled plain function
//! ([`CompiledFn`], made by `pipeline::compile_function`) and gradient
//! ([`CompiledGradient`]) that check their arguments against the source.

use crate::backend::CompiledFunction;
use crate::error::span::{Diagnostic, SourceFile, Span};
use crate::error::{Error, Result};
use crate::ir::interp::ArgError;
use crate::ir::Function;
use crate::types::value::Value;
use crate::types::DType;

/// An argument for a compiled function. Scalars take the parameter's dtype.
#[derive(Clone, Debug)]
pub enum Arg<'a> {
    /// An `f32` vector.
    F32(&'a [f32]),
    /// An `f64` vector.
    F64(&'a [f64]),
    /// An `f32` array of any rank: its elements in row-major order, and its
    /// shape.
    F32Array(&'a [f32], Vec<usize>),
    /// An `f64` array of any rank: its elements in row-major order, and its
    /// shape.
    F64Array(&'a [f64], Vec<usize>),
    /// A scalar, rounded to the parameter's element type.
    Scalar(f64),
    /// Any value (arrays of any rank, integers, booleans).
    Value(Value),
}

impl<'a> Arg<'a> {
    /// An `f32` vector.
    pub fn f32(xs: &'a [f32]) -> Arg<'a> {
        Arg::F32(xs)
    }
    /// An `f64` vector.
    pub fn f64(xs: &'a [f64]) -> Arg<'a> {
        Arg::F64(xs)
    }
    /// A scalar.
    pub fn scalar(x: f64) -> Arg<'a> {
        Arg::Scalar(x)
    }
    /// An `f64` matrix of `rows` rows and `cols` columns, row-major
    /// (`xs[i * cols + j]` is element `(i, j)`).
    pub fn f64_matrix(xs: &'a [f64], rows: usize, cols: usize) -> Arg<'a> {
        Arg::F64Array(xs, vec![rows, cols])
    }
    /// An `f32` matrix of `rows` rows and `cols` columns, row-major.
    pub fn f32_matrix(xs: &'a [f32], rows: usize, cols: usize) -> Arg<'a> {
        Arg::F32Array(xs, vec![rows, cols])
    }
    /// An `f64` array of shape `shape`, row-major.
    pub fn f64_array(xs: &'a [f64], shape: &[usize]) -> Arg<'a> {
        Arg::F64Array(xs, shape.to_vec())
    }
    /// An `f32` array of shape `shape`, row-major.
    pub fn f32_array(xs: &'a [f32], shape: &[usize]) -> Arg<'a> {
        Arg::F32Array(xs, shape.to_vec())
    }

    /// The value of argument `param`; an array whose element count is not
    /// the product of its shape is an argument error there.
    fn to_value(
        &self,
        param: usize,
        name: &str,
        want: Option<DType>,
    ) -> std::result::Result<Value, ArgError> {
        let shaped = |len: usize, shape: &[usize]| {
            let elems = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
            if elems == Some(len) {
                Ok(())
            } else {
                Err(ArgError {
                    param: Some(param),
                    message: format!(
                        "argument `{name}` has {len} elements, but its shape {shape:?} needs {}",
                        elems.map_or("more than this machine can count".to_string(), |n| {
                            n.to_string()
                        })
                    ),
                    site: None,
                    limit: false,
                })
            }
        };
        Ok(match self {
            Arg::F32(xs) => Value::f32(xs),
            Arg::F64(xs) => Value::f64(xs),
            Arg::F32Array(xs, shape) => {
                shaped(xs.len(), shape)?;
                Value::array(
                    DType::F32,
                    shape.clone(),
                    xs.iter().map(|&x| f64::from(x)).collect(),
                )
            }
            Arg::F64Array(xs, shape) => {
                shaped(xs.len(), shape)?;
                Value::array(DType::F64, shape.clone(), xs.to_vec())
            }
            Arg::Scalar(x) => Value::scalar(want.unwrap_or(DType::F64), *x),
            Arg::Value(v) => v.clone(),
        })
    }
}

impl ArgError {
    /// This error as a diagnostic of `f` (from the program in `file`): at
    /// the parameter, at the index that was out of range, or a limit.
    pub fn into_error(self, f: &Function, file: &SourceFile) -> Error {
        arg_error(f, file, self)
    }
}

/// Turn a run-time argument error into a diagnostic at the parameter.
pub fn arg_error(f: &Function, file: &SourceFile, e: ArgError) -> Error {
    if e.limit {
        return Error::Limit(e.message);
    }
    if let Some(site) = e.site {
        let (start, end) = crate::ir::interp::site_span(site);
        return Error::at(
            file,
            Diagnostic::new(Span::new(start as usize, end as usize), e.message)
                .kind(crate::error::ErrorKind::Runtime)
                .with_note(format!(
                    "found while running `{}`; nothing outside the array was read",
                    f.name
                )),
        );
    }
    match e.param {
        Some(i) => {
            let span = f.params[i].span;
            Error::at(
                file,
                Diagnostic::new(span, e.message).with_note(format!(
                    "checked before native code runs; `{}` has signature ({})",
                    f.name,
                    f.params
                        .iter()
                        .map(|p| format!("{}: {}", f.var_name(p.var), f.ty(p.var)))
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            )
        }
        None => Error::Usage(e.message),
    }
}

/// Compiled native code for a function, with argument checking that names
/// the source place.
pub fn call_checked(
    native: &CompiledFunction,
    file: &SourceFile,
    args: &[Arg<'_>],
) -> Result<Vec<Value>> {
    let f = native.function();
    let vals = args
        .iter()
        .enumerate()
        .map(|(i, a)| match f.params.get(i) {
            Some(p) => a.to_value(i, f.var_name(p.var), Some(f.ty(p.var).dtype)),
            // One too many: the count is checked next.
            None => a.to_value(i, &format!("#{}", i + 1), None),
        })
        .collect::<std::result::Result<Vec<Value>, ArgError>>()
        .map_err(|e| arg_error(f, file, e))?;
    let refs: Vec<&Value> = vals.iter().collect();
    native.call(&refs).map_err(|e| arg_error(f, file, e))
}

/// A compiled value-and-gradient function.
pub struct CompiledGradient {
    native: CompiledFunction,
    file: SourceFile,
}

impl CompiledGradient {
    pub(crate) fn new(native: CompiledFunction, file: SourceFile) -> CompiledGradient {
        CompiledGradient { native, file }
    }

    /// The primal value and the gradients (in `wrt` order).
    pub fn value_and_grad(&self, args: &[Arg<'_>]) -> Result<(Value, Vec<Value>)> {
        let mut out = call_checked(&self.native, &self.file, args)?;
        let value = out.remove(0);
        Ok((value, out))
    }

    /// The gradients only.
    pub fn grad(&self, args: &[Arg<'_>]) -> Result<Vec<Value>> {
        Ok(self.value_and_grad(args)?.1)
    }

    /// The compiled value-and-gradient function, for calls without copies ([`CompiledFunction::workspace`]).
    pub fn native(&self) -> &CompiledFunction {
        &self.native
    }
}

/// A compiled plain function (no derivative): see
/// [`compile_function`](crate::compile_function).
pub struct CompiledFn {
    native: CompiledFunction,
    file: SourceFile,
}

impl CompiledFn {
    pub(crate) fn new(native: CompiledFunction, file: SourceFile) -> CompiledFn {
        CompiledFn { native, file }
    }

    /// The function's results, in the order it returns them (one for a
    /// single result).
    pub fn call(&self, args: &[Arg<'_>]) -> Result<Vec<Value>> {
        call_checked(&self.native, &self.file, args)
    }

    /// The compiled function, for calls without copies
    /// ([`CompiledFunction::workspace`]).
    pub fn native(&self) -> &CompiledFunction {
        &self.native
    }
}
