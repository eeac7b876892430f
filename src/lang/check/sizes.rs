//! Size expressions written in the source (`N+1`, `2*N`, `N*M` in types,
//! in `tabulate[...]` and `reshape[...]`), and the builtins `reshape` and
//! `flatten`.

use super::{FnCx, Val};
use crate::error::span::{Diagnostic, Span};
use crate::ir::VarId;
use crate::lang::ast::*;
use crate::ops::Op;
use crate::types::size::Size;
use crate::types::{Dim, Type};

/// Why a written dimension has no size.
pub(super) enum DimError {
    /// A name `name` could not resolve (it reported why).
    Name,
    /// The arithmetic overflows at this span.
    Overflow(Span),
}

/// The size a written dimension stands for, each name given by `name`
/// (a size parameter, or a static integer's value; `None` after reporting
/// why not). Every name is resolved, so each bad one is reported.
pub(super) fn dim_size(
    d: &DimExpr,
    name: &mut dyn FnMut(&Ident) -> Option<Size>,
) -> Result<Size, DimError> {
    match d {
        DimExpr::Lit(k, s) => i64::try_from(*k)
            .map(Size::constant)
            .map_err(|_| DimError::Overflow(*s)),
        DimExpr::Name(id) => name(id).ok_or(DimError::Name),
        DimExpr::Sub(id, k, s) => {
            let p = name(id).ok_or(DimError::Name)?;
            let k = i64::try_from(*k).map_err(|_| DimError::Overflow(*s))?;
            p.sub(&Size::constant(k)).ok_or(DimError::Overflow(*s))
        }
        DimExpr::Bin(op, l, r, s) => {
            let (l, r) = (dim_size(l, name), dim_size(r, name));
            let (l, r) = (l?, r?);
            match op {
                DimOp::Add => l.add(&r),
                DimOp::Sub => l.sub(&r),
                DimOp::Mul => l.mul(&r),
            }
            .ok_or(DimError::Overflow(*s))
        }
    }
}

/// The error for a written dimension whose size overflows.
pub(super) fn overflow(span: Span, d: &DimExpr) -> Diagnostic {
    Diagnostic::new(span, format!("the size `{}` is too large", d.text()))
}

impl<'a> FnCx<'a> {
    /// A dimension written in the body (`tabulate[...]`, `reshape[...]`):
    /// names are size parameters or static integers, and the size must not
    /// be negative. `what` names it in errors ("the length of `tabulate`").
    pub(super) fn body_dim(&mut self, d: &DimExpr, what: &str) -> Option<Dim> {
        let mut errs = Vec::new();
        let mut statics = Vec::new();
        let sizes = self.sizes;
        let env = &self.env;
        let r = dim_size(d, &mut |id| {
            if sizes.contains(&id.name) {
                return Some(Size::param(&id.name));
            }
            let value = env.get(&id.name).and_then(Val::as_static_int);
            match value {
                Some(n) => {
                    statics.push(n);
                    Some(Size::constant(n))
                }
                None => {
                    errs.push(
                        Diagnostic::new(id.span, format!("{what} must be a size parameter or a static integer, but `{}` is neither", id.name))
                            .with_note("declare it as a size parameter (`fn f[N](...)`) or a `static` parameter"),
                    );
                    None
                }
            }
        });
        for e in errs {
            self.error(e);
        }
        let size = match r {
            Ok(s) => s,
            Err(DimError::Name) => return None,
            Err(DimError::Overflow(s)) => {
                self.error(overflow(s, d));
                return None;
            }
        };
        let dim = Dim::from_size(&size);
        if dim.is_none() {
            let shown = match (d, statics.as_slice()) {
                (DimExpr::Sub(_, k, _), [n]) => format!("{n} - {k}"),
                _ => format!("{} = {size}", d.text()),
            };
            self.error(Diagnostic::new(
                d.span(),
                format!("{what} is negative ({shown})"),
            ));
        }
        dim
    }

    /// `reshape[d, ...](x)`: the elements of `x` in row-major order, in
    /// the shape `[d, ...]`, which must have as many elements (compared as
    /// size expressions, so `N*M` and `M*N` agree). The op `reshape`; `x`
    /// itself when the shape is its own.
    pub(super) fn reshape(&mut self, e: &Expr, shape: &[DimExpr], arg: &Expr, hint: &str) -> Val {
        let dims: Vec<Option<Dim>> = shape
            .iter()
            .map(|d| self.body_dim(d, "a dimension of `reshape`"))
            .collect();
        let v = self.lower(arg, &[]);
        let v = self.single(v, arg.span);
        let Some(dims) = dims.into_iter().collect::<Option<Vec<Dim>>>() else {
            return Val::Err;
        };
        let Some(x) = self.array_arg("reshape", v, arg.span) else {
            return Val::Err;
        };
        let t = self.ty(x);
        let out = Type::array(t.dtype, dims);
        let (have, want) = (Dim::product(&t.shape), Dim::product(&out.shape));
        if have.is_none() || have != want {
            let count = |d: Option<Dim>| d.map_or("too many".to_string(), |d| d.to_string());
            let span = shape[0].span().to(shape[shape.len() - 1].span());
            self.error(
                Diagnostic::new(
                    e.span,
                    format!(
                        "`reshape` to {out} needs {} elements, but its argument has type {t} ({} elements)",
                        count(want),
                        count(have)
                    ),
                )
                .with_label(span, "this shape")
                .with_label(arg.span, format!("this has type {t}")),
            );
            return Val::Err;
        }
        self.reshape_to(hint, x, out)
    }

    /// `flatten(x)`: the elements of `x` (of rank 1 or more) as a vector,
    /// in row-major order: `T[N, M, ...]` becomes `T[N*M*...]`.
    pub(super) fn flatten(&mut self, e: &Expr, x: VarId, hint: &str) -> Val {
        let t = self.ty(x);
        let Some(n) = Dim::product(&t.shape) else {
            self.error(Diagnostic::new(
                e.span,
                format!("`flatten` of {t}: its number of elements is too large"),
            ));
            return Val::Err;
        };
        self.reshape_to(hint, x, Type::array(t.dtype, vec![n]))
    }

    /// `x` as an array, or None after reporting that it is not one.
    pub(super) fn array_arg(&mut self, name: &str, v: Val, span: Span) -> Option<VarId> {
        match v {
            Val::Var(x) if !self.ty(x).is_scalar() => Some(x),
            Val::Err => None,
            other => {
                let t = self.describe(&other);
                let t = match other {
                    Val::Var(_) => format!("a scalar ({t})"),
                    _ => t,
                };
                self.error(Diagnostic::new(
                    span,
                    format!("`{name}` needs an array (a vector, a matrix, ...: rank 1 or more), but this is {t}"),
                ));
                None
            }
        }
    }

    /// `reshape` of `x` to `out` (of as many elements); `x` itself when
    /// the shape does not change.
    pub(super) fn reshape_to(&mut self, hint: &str, x: VarId, out: Type) -> Val {
        if self.ty(x) == out {
            return Val::Var(x);
        }
        self.push(hint, Op::Reshape, &[x], Some(&out))
    }
}
