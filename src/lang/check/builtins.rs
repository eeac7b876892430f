//! The builtin functions: their tables, lookups, the reserved names, and
//! the two-argument element-wise builtins (`pow`, `max`, `min`).

use super::{fold, FnCx, Val};
use crate::error::span::{Diagnostic, Span};
use crate::lang::types::DType;
use crate::ops::Op;

/// The built-in element-wise math functions of one argument.
pub const BUILTINS: &[(&str, Op)] = &[
    ("sin", Op::Sin),
    ("cos", Op::Cos),
    ("tan", Op::Tan),
    ("exp", Op::Exp),
    ("log", Op::Log),
    ("sqrt", Op::Sqrt),
    ("tanh", Op::Tanh),
    ("abs", Op::Abs),
    ("log1p", Op::Log1p),
    ("expm1", Op::Expm1),
];

/// The built-in element-wise functions of two arguments (scalars broadcast).
pub const BUILTINS2: &[(&str, Op)] = &[("pow", Op::Pow), ("max", Op::Max), ("min", Op::Min)];

/// The built-in matrix functions.
pub const MATRIX_BUILTINS: &[(&str, Op)] = &[("matmul", Op::MatMul), ("transpose", Op::Transpose)];

/// The built-in functions on the leading axis of an array of any rank:
/// `reverse(x)` (the op [`Op::Reverse`]), `concat(a, b)` (lowered to
/// `pad`, `add` and `reverse`, see `FnCx::concat`) and `scatter_add(x,
/// idx, rows)` (lowered to [`Op::Scatter`] and `add`).
pub const ARRAY_BUILTINS: &[&str] = &["reverse", "concat", "scatter_add"];

/// The conversions between integers and floating point, named by the
/// element type they give ([`Op::Convert`]).
pub const CONVERSIONS: &[(&str, DType)] = &[
    ("f64", DType::F64),
    ("f32", DType::F32),
    ("i64", DType::I64),
];

pub(super) fn conversion(name: &str) -> Option<DType> {
    CONVERSIONS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, d)| *d)
}

/// Names with a meaning of their own (not functions one may define).
pub const SPECIAL_FORMS: &[&str] = &["iterate", "iterate_until", "tabulate", "scan"];

pub(super) fn builtin(name: &str) -> Option<Op> {
    BUILTINS.iter().find(|(n, _)| *n == name).map(|(_, op)| *op)
}

pub(super) fn builtin2(name: &str) -> Option<Op> {
    BUILTINS2
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, op)| *op)
}

pub(super) fn matrix_builtin(name: &str) -> Option<Op> {
    MATRIX_BUILTINS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, op)| *op)
}

pub(super) fn is_reserved(name: &str) -> bool {
    builtin(name).is_some()
        || builtin2(name).is_some()
        || matrix_builtin(name).is_some()
        || ARRAY_BUILTINS.contains(&name)
        || conversion(name).is_some()
        || SPECIAL_FORMS.contains(&name)
}

impl<'a> FnCx<'a> {
    pub(super) fn builtin2(
        &mut self,
        op: Op,
        name: &str,
        span: Span,
        (l, lspan): (Val, Span),
        (r, rspan): (Val, Span),
        hint: &str,
    ) -> Val {
        match (&l, &r) {
            (Val::Err, _) | (_, Val::Err) => return Val::Err,
            (Val::Const(a), Val::Const(b)) => return Val::Const(fold(op, &[*a, *b])),
            _ => {}
        }
        let mut xs = Vec::new();
        for (v, other, vspan) in [(&l, &r, lspan), (&r, &l, rspan)] {
            let x = match v {
                Val::Var(x) => Some(*x),
                Val::Const(c) => match other {
                    Val::Var(o) => {
                        let t = self.ty(*o);
                        match self.materialize(*c, &t, "") {
                            Val::Var(x) => Some(x),
                            _ => return Val::Err,
                        }
                    }
                    _ => None,
                },
                _ => None,
            };
            match x {
                Some(x) => xs.push(x),
                None => {
                    self.error(Diagnostic::new(
                        vspan,
                        format!(
                            "`{name}` needs numbers or arrays, but this has type {}",
                            self.describe(v)
                        ),
                    ));
                    return Val::Err;
                }
            }
        }
        self.elementwise2(op, name, span, (xs[0], lspan), (xs[1], rspan), hint)
    }
}
