//! Name resolution, type checking and lowering to IR.
//!
//! Checking happens in three passes over a parsed [`Module`]:
//!
//! 1. **Signatures**: every function's size parameters, parameter and return
//!    types and attributes are resolved, so functions may be used before
//!    their definition.
//! 2. **Call graph**: calls are inlined, so the call graph must be acyclic;
//!    each cycle is reported at a call site, and the remaining functions are
//!    put in callee-first order.
//! 3. **Bodies**: each function body is type-checked and lowered to an IR
//!    [`Function`] in one walk. A call is inlined: the callee's IR is copied
//!    with its size parameters replaced by the caller's dimensions. A
//!    `@grad` function's body is lowered as a primal function and
//!    differentiated with [`reverse`]; callers inline the gradient.
//!
//! Number literals have no dtype of their own: they are kept as constants
//! (constant sub-expressions are folded in `f64`) until they meet a typed
//! operand, a parameter type or a declared return type, which gives them a
//! dtype and, if needed, a broadcast to an array shape.
//!
//! Errors never stop the walk: an erroneous sub-expression has the value
//! `Val::Err`, which silences errors that would only be consequences.

use super::ast::*;
use super::ir::{Builder, Function, IrError, Loop, Stmt, VarId};
use super::program::GradSpec;
use super::span::{Diagnostic, Span};
use super::types::{DType, Dim, Type};
use super::value::Value;
use crate::differentiate::forward;
use crate::differentiate::reverse::{prune_dead, reverse};
use crate::ops::Op;
use std::collections::{HashMap, HashSet, VecDeque};

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
/// `reverse(x)` (the op [`Op::Reverse`]) and `concat(a, b)` (lowered to
/// `pad`, `add` and `reverse`, see `FnCx::concat`).
pub const ARRAY_BUILTINS: &[&str] = &["reverse", "concat"];

/// Names with a meaning of their own (not functions one may define).
pub const SPECIAL_FORMS: &[&str] = &["iterate", "iterate_until", "tabulate", "scan"];

/// The largest function (in IR statements, after inlining) we build.
pub const MAX_STMTS: usize = 1_000_000;

/// An `iterate` whose unrolled statements would number more than this
/// becomes a real loop (IR [`crate::lang::ir::Loop`]); smaller ones are
/// unrolled, so partial evaluation sees every step.
pub const UNROLL_STMTS: usize = 2_000;

/// Steps of an `iterate` unrolled ahead of its loop while its state still
/// holds compile-time numbers (which fold: `iterate(n, (1.0, 0.0), ...)`
/// starts with constants), before the rest of the steps become a loop.
const PEEL_STEPS: i64 = 3;

fn builtin(name: &str) -> Option<Op> {
    BUILTINS.iter().find(|(n, _)| *n == name).map(|(_, op)| *op)
}

fn builtin2(name: &str) -> Option<Op> {
    BUILTINS2
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, op)| *op)
}

fn matrix_builtin(name: &str) -> Option<Op> {
    MATRIX_BUILTINS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, op)| *op)
}

fn is_reserved(name: &str) -> bool {
    builtin(name).is_some()
        || builtin2(name).is_some()
        || matrix_builtin(name).is_some()
        || ARRAY_BUILTINS.contains(&name)
        || SPECIAL_FORMS.contains(&name)
}

/// Fold an op on untyped numbers with the reference evaluator in f64 (the
/// same semantics the op has at run time).
fn fold(op: Op, xs: &[f64]) -> f64 {
    let vals: Vec<Value> = xs.iter().map(|x| Value::scalar(DType::F64, *x)).collect();
    let refs: Vec<&Value> = vals.iter().collect();
    op.eval(&refs, DType::F64, &[]).as_scalar()
}

/// A run-time `i64` used where only a loop count (or a call's `i64`
/// argument) can go.
fn count_only(at: Span, value: Span, what: &str) -> Diagnostic {
    Diagnostic::new(
        at,
        format!("a run-time i64 can only be a loop count (`iterate(n, ...)`) or an `i64` argument for now, not an operand of `{what}`"),
    )
    .with_label(value, "this is a run-time i64")
    .with_note("declare it `static` to compute with it at compile time")
}

/// The leaves of a (possibly nested) tuple value, left to right.
fn flatten_leaves(v: &Val, out: &mut Vec<Val>) {
    match v {
        Val::Tuple(vs) => vs.iter().for_each(|x| flatten_leaves(x, out)),
        other => out.push(other.clone()),
    }
}

/// `shape` with its leaves replaced, in order, by `leaves`.
fn rebuild_leaves(shape: &Val, leaves: &mut impl Iterator<Item = Val>) -> Val {
    match shape {
        Val::Tuple(vs) => Val::Tuple(vs.iter().map(|x| rebuild_leaves(x, leaves)).collect()),
        _ => leaves.next().unwrap_or(Val::Err),
    }
}

/// Does a state still hold a compile-time number?
fn has_constant_leaf(v: &Val) -> bool {
    match v {
        Val::Tuple(vs) => vs.iter().any(has_constant_leaf),
        Val::Const(_) | Val::Int(_) => true,
        _ => false,
    }
}

/// A number that is an exact integer (a static count or index).
fn exact_int(x: f64) -> Option<i64> {
    (x.fract() == 0.0 && x.abs() < 9.0e15).then_some(x as i64)
}

impl Val {
    /// The value as a static integer: a static `i64`, or a number that is
    /// an exact integer.
    fn as_static_int(&self) -> Option<i64> {
        match self {
            Val::Int(i) => Some(*i),
            Val::Const(x) => exact_int(*x),
            _ => None,
        }
    }
}

/// A checked and lowered function.
#[derive(Clone, Debug)]
pub struct CheckedFn {
    /// The function as callers see it (the gradient for `@grad` functions).
    pub ir: Function,
    /// For `@grad` functions: what was differentiated.
    pub grad: Option<GradSpec>,
}

/// What checking produces: the lowered functions, and the functions with
/// static parameters (lowered only where they are called with their values).
#[derive(Clone, Debug, Default)]
pub struct Checked {
    pub functions: Vec<(String, CheckedFn)>,
    /// `(function, its static parameters)`.
    pub templates: Vec<(String, Vec<String>)>,
}

/// Why checking failed.
#[derive(Clone, Debug)]
pub enum CheckError {
    /// Errors in the program, sorted by position.
    Source(Vec<Diagnostic>),
    /// A bug in egrad (an IR invariant broke).
    Internal(String),
}

/// A resolved signature.
struct Sig {
    size_params: Vec<String>,
    /// Every parameter; a static one has a scalar placeholder type.
    params: Vec<(String, Type, Span)>,
    /// Per parameter: `Some` for a `static` one.
    statics: Vec<Option<StaticKind>>,
    ret: Vec<Type>,
    ret_tuple: bool,
    /// `@grad(...)`: indices of the parameters differentiated.
    grad: Option<Vec<usize>>,
    /// `@value_and_grad`: the function returns the value, then the gradients.
    value_too: bool,
    /// `@jvp(p, ...)`: (differentiated parameter, its tangent parameter).
    jvp: Option<Vec<(usize, usize)>>,
    /// Element-type parameters (`fn f[T, N](x: T[N])`) not yet fixed; the
    /// function is specialized where it is called, from its arguments.
    generic: Vec<String>,
}

/// The type of a static parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StaticKind {
    Int,
    Bool,
    Real,
}

impl Sig {
    fn is_template(&self) -> bool {
        self.statics.iter().any(Option::is_some) || !self.generic.is_empty()
    }
}

/// The value of an expression during lowering.
#[derive(Clone, Debug)]
enum Val {
    Var(VarId),
    /// A number known at compile time, not yet given a dtype.
    Const(f64),
    /// A static integer (`i64`).
    Int(i64),
    /// A static boolean.
    Bool(bool),
    /// A dynamic boolean: a comparison's mask (1 or +0 in a float type).
    Mask(VarId),
    /// The index of the enclosing `tabulate` plus a static offset.
    Idx(i64),
    /// A run-time `i64` parameter: the size parameter of that name (a loop
    /// count), and the parameter's variable.
    Count(String, VarId),
    Tuple(Vec<Val>),
    /// An error was already reported.
    Err,
}

/// Check and lower every function. Returns the functions by name, in
/// source order.
pub fn check(module: &Module) -> Result<Checked, CheckError> {
    let mut errs: Vec<Diagnostic> = Vec::new();
    let n = module.items.len();

    // Names → first definition.
    let mut by_name: HashMap<String, usize> = HashMap::new();
    let mut defined = vec![true; n];
    for (i, f) in module.items.iter().enumerate() {
        if is_reserved(&f.name.name) {
            errs.push(Diagnostic::new(
                f.name.span,
                format!(
                    "`{}` is a builtin function and cannot be redefined",
                    f.name.name
                ),
            ));
            defined[i] = false;
        } else if let Some(&j) = by_name.get(&f.name.name) {
            errs.push(
                Diagnostic::new(
                    f.name.span,
                    format!("the function `{}` is defined twice", f.name.name),
                )
                .with_label(module.items[j].name.span, "first defined here"),
            );
            defined[i] = false;
        } else {
            by_name.insert(f.name.name.clone(), i);
        }
    }

    // Pass 1: signatures.
    let sigs: Vec<Option<Sig>> = module
        .items
        .iter()
        .enumerate()
        .map(|(i, f)| {
            if defined[i] {
                signature(f, &mut errs)
            } else {
                None
            }
        })
        .collect();

    // Pass 2: call graph.
    let mut calls: Vec<Vec<(usize, Span)>> = vec![Vec::new(); n];
    for (i, f) in module.items.iter().enumerate() {
        if defined[i] {
            collect_calls(&f.body, &by_name, &mut calls[i]);
        }
    }
    // A function with static parameters (or generic over its element type)
    // is lowered where it is called, so it need not come before its
    // callers, and it may call itself with other static values (the
    // recursion stops at a static `if`; `MAX_SPECIALIZATION_DEPTH` bounds
    // it). Only the functions it reaches through such calls must come first.
    let is_template: Vec<bool> = sigs
        .iter()
        .map(|s| s.as_ref().is_some_and(Sig::is_template))
        .collect();
    let order_calls = through_templates(&calls, &is_template);
    let order = callee_first_order(module, &order_calls, &defined, &mut errs);

    // Pass 3: bodies.
    let mut lowered: Vec<Option<CheckedFn>> = vec![None; n];
    let mut internal: Option<String> = None;
    let mut templates = Vec::new();
    for i in order {
        let Some(sig) = &sigs[i] else { continue };
        if sig.is_template() {
            // Lowered where it is called, once its static values are known.
            let names = sig
                .generic
                .iter()
                .cloned()
                .chain(
                    sig.params
                        .iter()
                        .zip(&sig.statics)
                        .filter(|(_, s)| s.is_some())
                        .map(|(p, _)| p.0.clone()),
                )
                .collect();
            templates.push((i, names));
            continue;
        }
        let mut cx = FnCx::new(&sigs, &lowered, &by_name, module, i, sig);
        let result = cx.lower_fn(&module.items[i], sig, &[]);
        errs.append(&mut cx.errs);
        if internal.is_none() {
            internal = cx.internal.take();
        }
        lowered[i] = result;
    }

    if !errs.is_empty() {
        errs.sort_by_key(|d| (d.span.start, d.span.end));
        // A specialized function's errors repeat once per call site.
        let mut seen = HashSet::new();
        errs.retain(|d| seen.insert((d.span, d.message.clone())));
        return Err(CheckError::Source(errs));
    }
    if let Some(m) = internal {
        return Err(CheckError::Internal(m));
    }
    let mut out = Checked::default();
    templates.sort_by_key(|t| t.0);
    for (i, names) in templates {
        out.templates
            .push((module.items[i].name.name.clone(), names));
    }
    for (i, (f, l)) in module.items.iter().zip(lowered).enumerate() {
        match l {
            Some(c) => out.functions.push((f.name.name.clone(), c)),
            None if sigs[i].as_ref().is_some_and(Sig::is_template) => {}
            None => {
                return Err(CheckError::Internal(format!(
                    "`{}` was not lowered but no error was reported",
                    f.name.name
                )))
            }
        }
    }
    Ok(out)
}

/// "`f` takes 2 arguments, but 1 was given".
fn arity_message(name: &str, want: usize, got: usize) -> String {
    format!(
        "`{name}` takes {}, but {} given",
        plural(want, "argument"),
        if got == 1 {
            "1 was".to_string()
        } else {
            format!("{got} were")
        }
    )
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// The length of `concat` of parts of lengths `a` and `b`, if it is a size
/// a type can hold: `k + m` for integers; `k + (N-j)` (either order) is
/// `N-(j-k)` when `j >= k` (`N` when they are equal). Anything else (`N +
/// 1`, `N + M`) is not a size (None).
fn concat_len(a: &Dim, b: &Dim) -> Option<Dim> {
    let (k, d) = match (a, b) {
        (Dim::Lit(k), d) | (d, Dim::Lit(k)) => (*k, d),
        _ => return None,
    };
    match d {
        Dim::Lit(m) => k.checked_add(*m).map(Dim::Lit),
        _ if k == 0 => Some(d.clone()),
        Dim::Sub(p, j) if *j == k => Some(Dim::Param(p.clone())),
        Dim::Sub(p, j) if *j > k => Some(Dim::Sub(p.clone(), j - k)),
        Dim::Param(_) | Dim::Sub(..) | Dim::Rows(..) => None,
    }
}

/// Resolve a written non-tuple type against the declared size parameters.
/// The element-type parameters of a function: bracket names used as an
/// element type (`T` in `fn f[T, N](x: T[N])`).
fn generic_names(f: &FnDef) -> Vec<String> {
    fn dtype_names(t: &TypeExpr, out: &mut Vec<String>) {
        match t {
            TypeExpr::Named { dtype, .. } => out.push(dtype.name.clone()),
            TypeExpr::Tuple { elems, .. } => elems.iter().for_each(|e| dtype_names(e, out)),
        }
    }
    let mut used = Vec::new();
    for p in &f.params {
        dtype_names(&p.ty, &mut used);
    }
    dtype_names(&f.ret, &mut used);
    f.size_params
        .iter()
        .filter(|s| used.contains(&s.name))
        .map(|s| s.name.clone())
        .collect()
}

/// Resolve a type; `dtypes` gives the element type of each element-type
/// parameter (a placeholder `f64` stands for one not fixed yet).
fn resolve_type_with(
    t: &TypeExpr,
    sizes: &[Ident],
    dtypes: &HashMap<String, DType>,
    errs: &mut Vec<Diagnostic>,
) -> Option<Type> {
    match t {
        TypeExpr::Tuple { span, .. } => {
            errs.push(Diagnostic::new(
                *span,
                "a tuple type is only allowed as a function's return type",
            ));
            None
        }
        TypeExpr::Named { dtype, dims, .. } => {
            let mut ok = true;
            let d = match DType::from_name(&dtype.name)
                .filter(|d| *d != DType::I64)
                .or_else(|| dtypes.get(&dtype.name).copied())
            {
                Some(d) => Some(d),
                None if matches!(dtype.name.as_str(), "i64" | "bool") => {
                    errs.push(
                        Diagnostic::new(
                            dtype.span,
                            format!("`{}` values can only be static for now", dtype.name),
                        )
                        .with_note(if dtype.name == "i64" {
                            "write `static name: i64` for a value fixed where the function is called; a run-time `i64` can only be a scalar parameter (a loop count)".to_string()
                        } else {
                            "write `static name: bool` for a value fixed where the function is called; run-time booleans are only comparisons' results".to_string()
                        }),
                    );
                    None
                }
                None => {
                    errs.push(
                        Diagnostic::new(dtype.span, format!("unknown type `{}`", dtype.name))
                            .with_note("the element types are `f32` and `f64`"),
                    );
                    None
                }
            };
            let mut shape = Vec::new();
            for dim in dims {
                match dim {
                    DimExpr::Lit(k, _) => shape.push(Dim::Lit(*k)),
                    DimExpr::Sub(id, k, _) if sizes.iter().any(|s| s.name == id.name) => {
                        shape.push(Dim::Sub(id.name.clone(), *k))
                    }
                    DimExpr::Name(id) | DimExpr::Sub(id, _, _) => {
                        if sizes.iter().any(|s| s.name == id.name) {
                            shape.push(Dim::Param(id.name.clone()));
                        } else {
                            ok = false;
                            errs.push(
                                Diagnostic::new(
                                    id.span,
                                    format!("unknown size parameter `{}`", id.name),
                                )
                                .with_note(format!(
                                    "declare it in brackets after the function name, as in `fn f[{}](...)`",
                                    id.name
                                )),
                            );
                        }
                    }
                }
            }
            if ok {
                d.map(|d| Type::array(d, shape))
            } else {
                None
            }
        }
    }
}

/// The type of a `static` parameter: a scalar `i64`, `bool`, `f32` or `f64`.
fn static_kind(t: &TypeExpr, errs: &mut Vec<Diagnostic>) -> Option<StaticKind> {
    if let TypeExpr::Named { dtype, dims, .. } = t {
        if dims.is_empty() {
            match dtype.name.as_str() {
                "i64" => return Some(StaticKind::Int),
                "bool" => return Some(StaticKind::Bool),
                "f32" | "f64" => return Some(StaticKind::Real),
                _ => {}
            }
        }
    }
    errs.push(
        Diagnostic::new(
            t.span(),
            "a static parameter must be a scalar `i64`, `bool`, `f32` or `f64`",
        )
        .with_note("arrays are passed as ordinary (dynamic) parameters"),
    );
    None
}

fn signature(f: &FnDef, errs: &mut Vec<Diagnostic>) -> Option<Sig> {
    let generic = generic_names(f);
    // Until it is specialized, an element-type parameter stands for f64.
    let placeholders: HashMap<String, DType> =
        generic.iter().map(|g| (g.clone(), DType::F64)).collect();
    let mut sig = signature_with(f, &placeholders, errs)?;
    sig.generic = generic;
    Some(sig)
}

/// The signature with the element-type parameters fixed by `dtypes`.
fn signature_with(
    f: &FnDef,
    dtypes: &HashMap<String, DType>,
    errs: &mut Vec<Diagnostic>,
) -> Option<Sig> {
    let before = errs.len();
    let fname = &f.name.name;
    let all_sizes = &f.size_params;
    let size_params: Vec<Ident> = all_sizes
        .iter()
        .filter(|s| !dtypes.contains_key(&s.name))
        .cloned()
        .collect();
    let f = &FnDef {
        size_params: size_params.clone(),
        ..f.clone()
    };
    // Size parameters.
    let mut seen: HashMap<&str, Span> = HashMap::new();
    for s in &f.size_params {
        if let Some(first) = seen.insert(&s.name, s.span) {
            errs.push(
                Diagnostic::new(s.span, format!("duplicate size parameter `{}`", s.name))
                    .with_label(first, "first declared here"),
            );
        }
    }
    // Parameters.
    let mut seen: HashMap<&str, Span> = HashMap::new();
    let mut params = Vec::new();
    let mut statics = Vec::new();
    for p in &f.params {
        if let Some(first) = seen.insert(&p.name.name, p.name.span) {
            errs.push(
                Diagnostic::new(
                    p.name.span,
                    format!("duplicate parameter `{}` in `{fname}`", p.name.name),
                )
                .with_label(first, "first declared here"),
            );
        }
        let runtime_int = matches!(&p.ty, TypeExpr::Named { dtype, dims, .. } if dtype.name == "i64" && dims.is_empty());
        if p.is_static {
            if let Some(k) = static_kind(&p.ty, errs) {
                params.push((p.name.name.clone(), Type::scalar(DType::F64), p.span));
                statics.push(Some(k));
            }
        } else if runtime_int {
            // A run-time integer: the size parameter of its name (a loop
            // count), bound from the argument's value.
            if all_sizes.iter().any(|s| s.name == p.name.name) {
                errs.push(Diagnostic::new(
                    p.name.span,
                    format!(
                        "the `i64` parameter `{}` has the name of a size parameter",
                        p.name.name
                    ),
                ));
            }
            params.push((p.name.name.clone(), Type::scalar(DType::I64), p.span));
            statics.push(None);
        } else if let Some(t) = resolve_type_with(&p.ty, &f.size_params, dtypes, errs) {
            if t.shape.iter().any(|d| matches!(d, Dim::Sub(..))) {
                errs.push(
                    Diagnostic::new(p.ty.span(), format!("the type of parameter `{}` has a computed size", p.name.name))
                        .with_note("parameter sizes are size parameters or integers; sizes such as `N-1` are for results"),
                );
            }
            params.push((p.name.name.clone(), t, p.span));
            statics.push(None);
        }
    }
    // Every element-type parameter must be the element type of a parameter.
    for s in all_sizes.iter().filter(|s| dtypes.contains_key(&s.name)) {
        let used = f.params.iter().any(|p| {
            matches!(&p.ty, TypeExpr::Named { dtype, .. } if dtype.name == s.name) && !p.is_static
        });
        if !used {
            errs.push(Diagnostic::new(
                s.span,
                format!(
                    "element type `{}` of `{fname}` is not the element type of any parameter, so it cannot be inferred",
                    s.name
                ),
            ));
        }
    }
    // Every size parameter must be inferable from a parameter type.
    for s in &f.size_params {
        let used = f.params.iter().any(|p| match &p.ty {
            TypeExpr::Named { dims, .. } => dims
                .iter()
                .any(|d| matches!(d, DimExpr::Name(i) if i.name == s.name)),
            TypeExpr::Tuple { .. } => false,
        });
        if !used {
            errs.push(Diagnostic::new(
                s.span,
                format!(
                    "size parameter `{}` of `{fname}` is not used in any parameter type, so it cannot be inferred",
                    s.name
                ),
            ));
        }
    }
    // Return type.
    let (ret, ret_tuple) = match &f.ret {
        TypeExpr::Tuple { elems, .. } => {
            let mut ret = Vec::new();
            for e in elems {
                if let TypeExpr::Tuple { span, .. } = e {
                    errs.push(Diagnostic::new(
                        *span,
                        "nested tuple types are not supported",
                    ));
                } else if let Some(t) = resolve_type_with(e, &f.size_params, dtypes, errs) {
                    ret.push(t);
                }
            }
            (ret, true)
        }
        t => (
            resolve_type_with(t, &f.size_params, dtypes, errs)
                .into_iter()
                .collect(),
            false,
        ),
    };
    // Attributes.
    let mut grad = None;
    let mut value_too = false;
    let mut jvp = None;
    for (k, a) in f.attrs.iter().enumerate() {
        if k > 0 {
            errs.push(
                Diagnostic::new(a.span, format!("`{fname}` has more than one attribute"))
                    .with_label(f.attrs[0].span, "the first one is here")
                    .with_note("a function takes at most one attribute for now"),
            );
            continue;
        }
        let attr = a.name.name.as_str();
        if attr != "grad" && attr != "value_and_grad" && attr != "jvp" {
            errs.push(
                Diagnostic::new(a.name.span, format!("unknown attribute `@{attr}`")).with_note(
                    "the known attributes are `@grad(p, ...)`, `@value_and_grad(p, ...)` and `@jvp(p, ...)`",
                ),
            );
            continue;
        }
        value_too = attr == "value_and_grad";
        if a.args.is_empty() {
            errs.push(Diagnostic::new(
                a.span,
                format!("`@{attr}` needs the names of the parameters to differentiate, as in `@{attr}(w)`"),
            ));
            continue;
        }
        let mut wrt = Vec::new();
        let mut ok = true;
        for arg in &a.args {
            match f.params.iter().position(|p| p.name.name == arg.name) {
                Some(i) if wrt.contains(&i) => {
                    ok = false;
                    errs.push(Diagnostic::new(
                        arg.span,
                        format!("`@grad` names `{}` twice", arg.name),
                    ));
                }
                Some(i) if params.get(i).is_some_and(|p| p.1.dtype == DType::I64) => {
                    ok = false;
                    errs.push(
                        Diagnostic::new(
                            arg.span,
                            format!("`@{attr}` cannot differentiate the i64 `{}`: an integer has no derivative", arg.name),
                        ),
                    );
                }
                Some(i) if f.params[i].is_static => {
                    ok = false;
                    errs.push(
                        Diagnostic::new(
                            arg.span,
                            format!("`@grad` cannot differentiate the static parameter `{}`", arg.name),
                        )
                        .with_note("a static value is fixed when the function is specialized; only dynamic parameters have derivatives"),
                    );
                }
                Some(i) => wrt.push(i),
                None => {
                    ok = false;
                    let names: Vec<String> = f
                        .params
                        .iter()
                        .map(|p| format!("`{}`", p.name.name))
                        .collect();
                    let note = if names.is_empty() {
                        format!("`{fname}` has no parameters")
                    } else {
                        format!("the parameters of `{fname}` are {}", names.join(", "))
                    };
                    errs.push(
                        Diagnostic::new(
                            arg.span,
                            format!(
                                "`@grad` names `{}`, which is not a parameter of `{fname}`",
                                arg.name
                            ),
                        )
                        .with_note(note),
                    );
                }
            }
        }
        if !ok {
            continue;
        }
        if attr == "jvp" {
            // The last parameters carry the tangents, one per name, in order.
            let k = wrt.len();
            let n = f.params.len();
            let first = n.saturating_sub(k);
            let mut pairs = Vec::new();
            for (j, &p) in wrt.iter().enumerate() {
                let t = first + j;
                let bad = n < 2 * k
                    || p >= first
                    || f.params.get(t).is_none_or(|tp| tp.is_static)
                    || params.get(p).map(|x| &x.1) != params.get(t).map(|x| &x.1);
                if bad {
                    let pname = &f.params[p].name.name;
                    let pty = params.get(p).map(|x| x.1.to_string()).unwrap_or_default();
                    let names: Vec<String> =
                        a.args.iter().map(|i| format!("`{}`", i.name)).collect();
                    errs.push(
                        Diagnostic::new(
                            a.args[j].span,
                            format!(
                                "`@jvp` needs a tangent parameter for `{pname}`: the last {} of `{fname}` must be the tangents of {}, in order",
                                plural(k, "parameter"),
                                names.join(", ")
                            ),
                        )
                        .with_note(format!("for example `@jvp({pname}) fn {fname}(..., {pname}: {pty}, d{pname}: {pty}) -> ...`")),
                    );
                    ok = false;
                    break;
                }
                pairs.push((p, t));
            }
            if ok {
                jvp = Some(pairs);
            }
            continue;
        }
        // The declared return type must be the wrt parameters' types.
        if errs.len() == before {
            let want: Vec<Type> = wrt.iter().map(|&i| params[i].1.clone()).collect();
            let fits = if value_too {
                ret_tuple
                    && ret.len() == want.len() + 1
                    && ret[0].is_scalar()
                    && ret[1..] == want[..]
            } else if want.len() == 1 {
                !ret_tuple && ret == want
            } else {
                ret_tuple && ret == want
            };
            if !fits && value_too {
                let mut all = vec![ret
                    .first()
                    .filter(|t| t.is_scalar())
                    .cloned()
                    .unwrap_or(Type::scalar(want[0].dtype))];
                all.extend(want.iter().cloned());
                errs.push(
                    Diagnostic::new(
                        f.ret.span(),
                        format!(
                            "`{fname}` must return {}, the value and then the gradients, because of `@value_and_grad`",
                            type_list(&all)
                        ),
                    )
                    .with_label(a.span, "the value and gradient are requested here"),
                );
                continue;
            }
            if !fits {
                let want_text = type_list(&want);
                let names: Vec<String> = a.args.iter().map(|i| format!("`{}`", i.name)).collect();
                errs.push(
                    Diagnostic::new(
                        f.ret.span(),
                        format!(
                            "`{fname}` must return {want_text}, the {} of {}, because of `@grad`",
                            if names.len() == 1 { "type" } else { "types" },
                            names.join(", ")
                        ),
                    )
                    .with_label(a.span, "the gradient is requested here"),
                );
                continue;
            }
        }
        grad = Some(wrt);
    }
    if errs.len() > before {
        return None;
    }
    Some(Sig {
        size_params: f
            .size_params
            .iter()
            .map(|s| s.name.clone())
            .chain(
                params
                    .iter()
                    .filter(|p| p.1.dtype == DType::I64)
                    .map(|p| p.0.clone()),
            )
            .collect(),
        params,
        statics,
        ret,
        ret_tuple,
        grad,
        value_too,
        jvp,
        generic: Vec::new(),
    })
}

fn type_list(ts: &[Type]) -> String {
    if ts.len() == 1 {
        ts[0].to_string()
    } else {
        let s: Vec<String> = ts.iter().map(|t| t.to_string()).collect();
        format!("({})", s.join(", "))
    }
}

fn collect_calls(e: &Expr, by_name: &HashMap<String, usize>, out: &mut Vec<(usize, Span)>) {
    match &e.kind {
        ExprKind::Num { .. } | ExprKind::Name(_) => {}
        ExprKind::Unary { operand, .. } => collect_calls(operand, by_name, out),
        ExprKind::Binary { lhs, rhs, .. } => {
            collect_calls(lhs, by_name, out);
            collect_calls(rhs, by_name, out);
        }
        ExprKind::Call { callee, args } => {
            if let Some(&i) = by_name.get(&callee.name) {
                out.push((i, e.span));
            }
            for a in args {
                collect_calls(a, by_name, out);
            }
        }
        ExprKind::Tuple(es) => {
            for x in es {
                collect_calls(x, by_name, out);
            }
        }
        ExprKind::Block(b) => {
            for l in &b.lets {
                collect_calls(&l.value, by_name, out);
            }
            collect_calls(&b.result, by_name, out);
        }
        ExprKind::Bool(_) => {}
        ExprKind::If { cond, then, els } => {
            collect_calls(cond, by_name, out);
            collect_calls(then, by_name, out);
            collect_calls(els, by_name, out);
        }
        ExprKind::Lambda { body, .. } | ExprKind::Tabulate { body, .. } => {
            collect_calls(body, by_name, out)
        }
        ExprKind::Index { base, indices } => {
            collect_calls(base, by_name, out);
            for i in indices {
                collect_calls(i, by_name, out);
            }
        }
    }
}

/// The call graph with every call to a template (a function lowered at its
/// call sites) replaced by calls to the non-template functions the template
/// reaches through templates: what must be lowered before each function.
fn through_templates(
    calls: &[Vec<(usize, Span)>],
    is_template: &[bool],
) -> Vec<Vec<(usize, Span)>> {
    (0..calls.len())
        .map(|i| {
            let mut out: Vec<(usize, Span)> = Vec::new();
            let mut seen = HashSet::new();
            let mut stack: Vec<(usize, Span)> = calls[i].clone();
            stack.reverse();
            while let Some((c, span)) = stack.pop() {
                if !seen.insert(c) {
                    continue;
                }
                if is_template.get(c).copied().unwrap_or(false) {
                    // Keep the span of the call in `i` for diagnostics.
                    stack.extend(calls[c].iter().rev().map(|&(cc, _)| (cc, span)));
                } else {
                    out.push((c, span));
                }
            }
            out
        })
        .collect()
}

/// How deep specializations may nest (a function with static parameters
/// calling itself, directly or not, counts one level per call).
pub const MAX_SPECIALIZATION_DEPTH: usize = 64;

/// Kahn's algorithm; reports each function that lies on a cycle.
fn callee_first_order(
    module: &Module,
    calls: &[Vec<(usize, Span)>],
    defined: &[bool],
    errs: &mut Vec<Diagnostic>,
) -> Vec<usize> {
    let n = calls.len();
    let mut deps: Vec<HashSet<usize>> = calls
        .iter()
        .map(|cs| cs.iter().map(|(c, _)| *c).collect())
        .collect();
    let mut callers: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, d) in deps.iter().enumerate() {
        for &c in d {
            callers[c].push(i);
        }
    }
    let mut queue: VecDeque<usize> = (0..n)
        .filter(|&i| defined[i] && deps[i].is_empty())
        .collect();
    let mut done = vec![false; n];
    let mut order = Vec::new();
    while let Some(i) = queue.pop_front() {
        if done[i] {
            continue;
        }
        done[i] = true;
        order.push(i);
        for &c in &callers[i] {
            deps[c].remove(&i);
            if deps[c].is_empty() && !done[c] && defined[c] {
                queue.push_back(c);
            }
        }
    }
    // Functions left over call themselves or depend on a function that does.
    for start in 0..n {
        if done[start] || !defined[start] {
            continue;
        }
        // BFS from start's callees, looking for start.
        let mut parent: HashMap<usize, usize> = HashMap::new();
        let mut q: VecDeque<usize> = VecDeque::new();
        let mut first_call: HashMap<usize, Span> = HashMap::new();
        for (c, span) in &calls[start] {
            if !done[*c] && !first_call.contains_key(c) {
                first_call.insert(*c, *span);
                parent.insert(*c, start);
                q.push_back(*c);
            }
        }
        let mut found = false;
        while let Some(x) = q.pop_front() {
            if x == start {
                found = true;
                break;
            }
            for (c, _) in &calls[x] {
                if !done[*c] && !parent.contains_key(c) {
                    parent.insert(*c, x);
                    q.push_back(*c);
                }
            }
        }
        if !found {
            continue;
        }
        // Rebuild the path start -> ... -> start.
        let mut path = vec![start];
        let mut x = start;
        let mut guard = 0;
        while let Some(&p) = parent.get(&x) {
            path.push(p);
            if p == start || guard > n {
                break;
            }
            x = p;
            guard += 1;
        }
        path.reverse();
        let first = path.get(1).copied().unwrap_or(start);
        let span = first_call
            .get(&first)
            .copied()
            .unwrap_or(module.items[start].name.span);
        let names: Vec<&str> = path
            .iter()
            .map(|&i| module.items[i].name.name.as_str())
            .collect();
        let fname = &module.items[start].name.name;
        let msg = if path.len() <= 2 {
            format!("`{fname}` calls itself")
        } else {
            format!("`{fname}` calls itself through {}", names.join(" -> "))
        };
        errs.push(
            Diagnostic::new(span, msg)
                .with_note("calls are inlined: only a function with static parameters may call itself, with other static values, until a static `if` stops it"),
        );
    }
    order
}

/// Lowering state for one function body.
struct FnCx<'a> {
    sigs: &'a [Option<Sig>],
    lowered: &'a [Option<CheckedFn>],
    by_name: &'a HashMap<String, usize>,
    module: &'a Module,
    sizes: &'a [String],
    b: Builder,
    env: Vec<(String, Val)>,
    errs: Vec<Diagnostic>,
    internal: Option<String>,
    too_large: bool,
    /// How many specializations (calls of functions with static or
    /// element-type parameters) enclose this body.
    depth: usize,
    hint_uses: HashMap<String, usize>,
    /// Inside `tabulate[L](i => ...)`: L and the construct's span.
    batch: Option<(Dim, Span)>,
    /// Values that depend on the tabulate index: each holds one value per
    /// index, stacked on a leading axis of length L (vectorized lowering).
    batched: HashSet<VarId>,
}

/// The innermost result expression (where a type error of a body shows).
fn result_expr(e: &Expr) -> &Expr {
    let mut e = e;
    while let ExprKind::Block(b) = &e.kind {
        e = &b.result;
    }
    e
}

/// A callee variable name, as a hint for the inlined copy (numbered
/// temporaries stay temporaries; `pred.2` becomes `pred`).
fn base_name(name: &str) -> &str {
    let base = name.split('.').next().unwrap_or("");
    if base.chars().all(|c| c.is_ascii_digit()) {
        ""
    } else {
        base
    }
}

impl<'a> FnCx<'a> {
    fn new(
        sigs: &'a [Option<Sig>],
        lowered: &'a [Option<CheckedFn>],
        by_name: &'a HashMap<String, usize>,
        module: &'a Module,
        i: usize,
        sig: &'a Sig,
    ) -> FnCx<'a> {
        FnCx {
            sigs,
            lowered,
            by_name,
            module,
            sizes: &sig.size_params,
            b: Builder::new(module.items[i].name.name.clone(), sig.size_params.clone()),
            env: Vec::new(),
            errs: Vec::new(),
            internal: None,
            too_large: false,
            depth: 0,
            hint_uses: sig.params.iter().map(|p| (p.0.clone(), 1)).collect(),
            batch: None,
            batched: HashSet::new(),
        }
    }

    fn error(&mut self, d: Diagnostic) {
        self.errs.push(d);
    }

    fn bug(&mut self, m: impl Into<String>) -> Val {
        if self.internal.is_none() {
            self.internal = Some(m.into());
        }
        Val::Err
    }

    /// Push a statement. Operands that depend on the `tabulate` index are
    /// stacked (a leading axis of length L): the op is applied to whole
    /// stacks, lifting the other operands (vectorized lowering). `annot` is
    /// the result type of one element of the stack.
    fn push(&mut self, hint: &str, op: Op, args: &[VarId], annot: Option<&Type>) -> Val {
        if !args.iter().any(|a| self.batched.contains(a)) {
            return self.push_plain(hint, op, args, annot);
        }
        let Some((len, span)) = self.batch.clone() else {
            return self.bug("a stacked value outside `tabulate`");
        };
        let stacked = |t: &Type| {
            let mut shape = vec![len.clone()];
            shape.extend(t.shape.iter().cloned());
            Type::array(t.dtype, shape)
        };
        let result = if op.is_elementwise() {
            let mut lifted = Vec::new();
            for &a in args {
                if self.batched.contains(&a) {
                    lifted.push(a);
                    continue;
                }
                let t = self.ty(a);
                let lift = if t.is_scalar() { Op::Bcast } else { Op::Repeat };
                match self.push_plain("", lift, &[a], Some(&stacked(&t))) {
                    Val::Var(x) => lifted.push(x),
                    other => return other,
                }
            }
            self.push_plain(hint, op, &lifted, None)
        } else {
            match (op, annot) {
                (Op::Bcast, Some(t)) => self.push_plain(hint, Op::Spread, args, Some(&stacked(t))),
                (Op::Sum, _) => self.push_plain(hint, Op::SumTail, args, None),
                (Op::MaxAll, _) => self.push_plain(hint, Op::MaxTail, args, None),
                (Op::MinAll, _) => self.push_plain(hint, Op::MinTail, args, None),
                _ => {
                    let what = match op {
                        Op::MaxAll => "`max/`".to_string(),
                        Op::MinAll => "`min/`".to_string(),
                        Op::MatMul => "`matmul`".to_string(),
                        Op::Transpose => "`transpose`".to_string(),
                        Op::Reverse => "`reverse`".to_string(),
                        Op::Slice(_) | Op::Index(_) => "indexing".to_string(),
                        Op::Repeat => "broadcasting a vector over rows".to_string(),
                        other => format!("the operation `{}`", other.name()),
                    };
                    self.error(Diagnostic::new(
                        span,
                        format!(
                            "{what} on a value that depends on the index of `tabulate` is not supported yet"
                        ),
                    ));
                    return Val::Err;
                }
            }
        };
        if let Val::Var(x) = result {
            self.batched.insert(x);
        }
        result
    }

    /// A row `T[s..]` repeated as every row of `to` = `T[L, s..]` (a vector
    /// added to each row of a matrix); None if the shapes do not fit.
    fn repeat_rows(&mut self, v: VarId, from: &Type, to: &Type) -> Option<VarId> {
        if to.rank() != from.rank() + 1 || to.shape[1..] != from.shape[..] {
            return None;
        }
        match self.push("", Op::Repeat, &[v], Some(to)) {
            Val::Var(x) => Some(x),
            _ => None,
        }
    }

    /// A logical scalar/array broadcast to `to` (stack-aware).
    fn bcast(&mut self, v: VarId, to: &Type) -> Option<VarId> {
        if &self.ty(v) == to {
            return Some(v);
        }
        match self.push("", Op::Bcast, &[v], Some(to)) {
            Val::Var(x) => Some(x),
            _ => None,
        }
    }

    fn push_plain(&mut self, hint: &str, op: Op, args: &[VarId], annot: Option<&Type>) -> Val {
        // Number repeated names here (`pred`, `pred.1`, ...) so that the
        // builder's own uniquing never has to search far.
        let name = if hint.is_empty() {
            String::new()
        } else {
            let k = self.hint_uses.entry(hint.to_string()).or_insert(0);
            *k += 1;
            if *k == 1 {
                hint.to_string()
            } else {
                format!("{hint}.{}", *k - 1)
            }
        };
        match self.b.push(&name, op, args, annot) {
            Ok(v) => Val::Var(v),
            Err(e) => self.bug(format!("lowering `{}`: {}", self.b.function().name, e.0)),
        }
    }

    /// The type of one value: for a stacked value (inside `tabulate`), the
    /// type of one element of the stack.
    fn ty(&self, v: VarId) -> Type {
        let t = self.b.ty(v);
        if self.batched.contains(&v) {
            Type::array(t.dtype, t.shape.get(1..).unwrap_or(&[]).to_vec())
        } else {
            t.clone()
        }
    }

    fn describe(&self, v: &Val) -> String {
        match v {
            Val::Var(x) => self.ty(*x).to_string(),
            Val::Const(_) => "a number".into(),
            Val::Int(_) => "a static i64".into(),
            Val::Bool(_) => "a static bool".into(),
            Val::Idx(_) => "the index of `tabulate`".into(),
            Val::Count(..) => "a run-time i64".into(),
            Val::Mask(x) => {
                let t = self.ty(*x);
                if t.is_scalar() {
                    "bool".into()
                } else {
                    format!("bool{}", &t.to_string()[3..])
                }
            }
            Val::Tuple(vs) => {
                let s: Vec<String> = vs.iter().map(|v| self.describe(v)).collect();
                format!("({})", s.join(", "))
            }
            Val::Err => "?".into(),
        }
    }

    /// A constant of `ty` (broadcast if `ty` is an array).
    fn materialize(&mut self, x: f64, ty: &Type, hint: &str) -> Val {
        let c = self.b.constant(ty.dtype, x);
        if ty.is_scalar() {
            return Val::Var(c);
        }
        self.push(hint, Op::Bcast, &[c], Some(ty))
    }

    /// `v` as a value of exactly `ty` (literals adapt); None if it is not.
    fn coerce(&mut self, v: &Val, ty: &Type) -> Option<Val> {
        match v {
            Val::Var(x) if &self.ty(*x) == ty => Some(v.clone()),
            Val::Const(x) => Some(self.materialize(*x, ty, "")),
            Val::Int(i) => Some(self.materialize(*i as f64, ty, "")),
            Val::Err => Some(Val::Err),
            _ => None,
        }
    }

    /// Lower a function body. `statics` gives the value of every static
    /// parameter (by parameter index); the IR's parameters are the dynamic ones.
    fn lower_fn(&mut self, f: &FnDef, sig: &Sig, statics: &[(usize, Val)]) -> Option<CheckedFn> {
        for (k, (name, ty, span)) in sig.params.iter().enumerate() {
            if sig.statics.get(k).copied().flatten().is_some() {
                let v = statics
                    .iter()
                    .find(|(j, _)| *j == k)
                    .map(|(_, v)| v.clone())
                    .unwrap_or(Val::Err);
                self.env.push((name.clone(), v));
                continue;
            }
            let v = self.b.param(name, ty.clone(), *span);
            if ty.dtype == DType::I64 {
                self.env.push((name.clone(), Val::Count(name.clone(), v)));
            } else {
                self.env.push((name.clone(), Val::Var(v)));
            }
        }
        // IR parameter index of each source parameter (statics have none).
        let ir_index: Vec<Option<usize>> = {
            let mut k = 0;
            sig.statics
                .iter()
                .map(|st| {
                    st.is_none().then(|| {
                        k += 1;
                        k - 1
                    })
                })
                .collect()
        };
        let body = self.lower(&f.body, &[]);
        let fname = f.name.name.clone();
        let res = result_expr(&f.body).span;
        if let Some(wrt) = &sig.grad {
            let ret = match body {
                Val::Var(v) if self.ty(v).is_scalar() => v,
                Val::Const(x) => {
                    let d = sig
                        .params
                        .get(wrt[0])
                        .map(|p| p.1.dtype)
                        .unwrap_or(DType::F64);
                    self.b.constant(d, x)
                }
                Val::Err => return None,
                other => {
                    let t = self.describe(&other);
                    self.error(
                        Diagnostic::new(
                            res,
                            format!(
                                "the body of the `@grad` function `{fname}` must be a scalar, but it has type {t}"
                            ),
                        )
                        .with_note("reverse mode differentiates a function with one scalar result"),
                    );
                    return None;
                }
            };
            if !self.errs.is_empty() || self.internal.is_some() {
                return None;
            }
            let b = std::mem::replace(&mut self.b, Builder::new("", Vec::new()));
            let primal = b.finish(vec![ret]);
            if let Err(e) = primal.validate() {
                self.bug(format!("primal of `{fname}`: {e}"));
                return None;
            }
            let wrt_ir: Vec<usize> = wrt.iter().filter_map(|&i| ir_index[i]).collect();
            let rev = match reverse(&primal, &wrt_ir) {
                Ok(r) => r,
                Err(e) => {
                    // Through a loop's gradient reverse mode stops; for
                    // scalar parameters forward mode gives the gradient.
                    let scalars = wrt_ir
                        .iter()
                        .all(|&i| primal.ty(primal.params[i].var).is_scalar());
                    if e.0.contains("a gradient through a loop") && scalars && !sig.value_too {
                        match crate::differentiate::forward_gradient(&primal, &wrt_ir, &fname) {
                            Ok(ir) => return Some(CheckedFn { ir, grad: None }),
                            Err(e2) => {
                                self.ad_failure("differentiating", &fname, f.name.span, e2);
                                return None;
                            }
                        }
                    }
                    self.ad_failure("differentiating", &fname, f.name.span, e);
                    return None;
                }
            };
            if sig.value_too {
                let mut ir = prune_dead(&rev.value_and_grad);
                ir.name = fname.clone();
                let value_ty = ir.ty(ir.rets[0]).clone();
                if sig.ret.first() != Some(&value_ty) {
                    self.error(
                        Diagnostic::new(res, format!("the value of `{fname}` has type {value_ty}"))
                            .with_label(
                                f.ret.span(),
                                format!("but the return type says {}", type_list(&sig.ret)),
                            ),
                    );
                    return None;
                }
                if let Err(e) = ir.validate() {
                    self.bug(format!("value and gradient of `{fname}`: {e}"));
                    return None;
                }
                return Some(CheckedFn { ir, grad: None });
            }
            let ir = rev.gradient(&fname);
            if let Err(e) = ir.validate() {
                self.bug(format!("gradient of `{fname}`: {e}"));
                return None;
            }
            return Some(CheckedFn {
                ir,
                grad: Some(GradSpec {
                    primal,
                    wrt: wrt_ir,
                }),
            });
        }
        // An ordinary function: the body must have the declared type.
        let declared = type_list(&sig.ret);
        let mut rets = Vec::new();
        let mismatch = match (&body, sig.ret_tuple) {
            (Val::Err, _) => return None,
            (Val::Tuple(vs), true) if vs.len() == sig.ret.len() => {
                let mut bad = false;
                for (v, t) in vs.iter().zip(&sig.ret) {
                    match self.coerce(v, t) {
                        Some(Val::Var(x)) => rets.push(x),
                        Some(Val::Err) => return None,
                        _ => bad = true,
                    }
                }
                bad
            }
            (Val::Tuple(_), _) => true,
            (v, false) => match sig.ret.first().cloned() {
                Some(t) => match self.coerce(v, &t) {
                    Some(Val::Var(x)) => {
                        rets.push(x);
                        false
                    }
                    Some(_) => return None,
                    None => true,
                },
                None => return None,
            },
            (_, true) => true,
        };
        if mismatch {
            let got = self.describe(&body);
            self.error(
                Diagnostic::new(
                    res,
                    format!(
                        "`{fname}` is declared to return {declared}, but its body has type {got}"
                    ),
                )
                .with_label(f.ret.span(), "the return type is declared here"),
            );
            return None;
        }
        if !self.errs.is_empty() || self.internal.is_some() {
            return None;
        }
        let b = std::mem::replace(&mut self.b, Builder::new("", Vec::new()));
        let ir = b.finish(rets);
        if let Err(e) = ir.validate() {
            self.bug(format!("`{fname}`: {e}"));
            return None;
        }
        if let Some(pairs) = &sig.jvp {
            // `@jvp`: the tangents of the results, pushed forward from the
            // trailing tangent parameters.
            let pairs: Vec<(usize, usize)> = pairs
                .iter()
                .filter_map(|&(p, t)| Some((ir_index[p]?, ir_index[t]?)))
                .collect();
            return match forward(&ir, &pairs, &fname) {
                Ok(ir) => Some(CheckedFn { ir, grad: None }),
                Err(e) => {
                    self.ad_failure("forward mode of", &fname, f.name.span, e);
                    None
                }
            };
        }
        Some(CheckedFn { ir, grad: None })
    }

    /// AD failed on `fname`: a limit users can meet (a derivative through a
    /// loop's gradient) is their error, anything else a bug.
    fn ad_failure(&mut self, what: &str, fname: &str, span: Span, e: IrError) {
        if e.0.contains("not supported yet") {
            let why = e.0.rsplit(": ").next().unwrap_or(&e.0).to_string();
            let note = if why.contains("sequence") {
                "the sequence of a `scan` is read, not differentiated; with an integer length and a state that a loop cannot carry, the `scan` is unrolled and differentiated like any expression"
            } else {
                "reverse mode does not go through a loop's gradient (`looptape`/`loopvjp`) yet: use `@jvp` of the gradient (forward over reverse, a Hessian-vector product), or `@grad` with respect to scalar parameters only (done by forward mode), or give the loop a `static` count small enough to unroll"
            };
            self.error(
                Diagnostic::new(span, format!("`{fname}` cannot be differentiated: {why}"))
                    .with_note(note),
            );
        } else {
            self.bug(format!("{what} `{fname}`: {e}"));
        }
    }

    /// A non-tuple value, or an error.
    fn single(&mut self, v: Val, span: Span) -> Val {
        if let Val::Tuple(vs) = &v {
            self.error(
                Diagnostic::new(
                    span,
                    format!(
                        "expected a single value, found a tuple of {} values",
                        vs.len()
                    ),
                )
                .with_note("take a tuple apart with `let (a, b) = ...`"),
            );
            return Val::Err;
        }
        v
    }

    fn lower(&mut self, e: &Expr, hints: &[&str]) -> Val {
        let hint = hints.first().copied().unwrap_or("");
        match &e.kind {
            ExprKind::Num { value, .. } => Val::Const(*value),
            ExprKind::Name(n) => self.lookup(n, e.span),
            ExprKind::Unary {
                op,
                op_span,
                operand,
            } => {
                let v = self.lower(operand, &[]);
                let v = self.single(v, operand.span);
                self.unary(*op, *op_span, (v, operand.span), hint)
            }
            ExprKind::Binary {
                op,
                op_text,
                op_span,
                lhs,
                rhs,
            } => {
                let l = self.lower(lhs, &[]);
                let l = self.single(l, lhs.span);
                let r = self.lower(rhs, &[]);
                let r = self.single(r, rhs.span);
                self.binary(*op, op_text, *op_span, (l, lhs.span), (r, rhs.span), hint)
            }
            ExprKind::Call { callee, args } => self.call(e, callee, args, hints),
            ExprKind::Tuple(es) => {
                let mut vs = Vec::new();
                for (k, x) in es.iter().enumerate() {
                    let h = hints.get(k).copied().unwrap_or("");
                    let v = self.lower(x, &[h]);
                    vs.push(self.single(v, x.span));
                }
                Val::Tuple(vs)
            }
            ExprKind::Block(b) => {
                let mark = self.env.len();
                for l in &b.lets {
                    self.lower_let(l);
                }
                let v = self.lower(&b.result, hints);
                self.env.truncate(mark);
                v
            }
            ExprKind::Bool(b) => Val::Bool(*b),
            ExprKind::If { cond, then, els } => self.lower_if(cond, then, els, hints),
            ExprKind::Index { base, indices } => {
                let v = self.lower(base, &[]);
                let mut v = self.single(v, base.span);
                let ks: Vec<Val> = indices
                    .iter()
                    .map(|ix| {
                        let k = self.lower(ix, &[]);
                        self.single(k, ix.span)
                    })
                    .collect();
                // `X[i, k]` along the index of `tabulate`: column k of X,
                // read along i (`transpose(X)[k][i]`).
                if let ([Val::Idx(_), col], Val::Var(x)) = (&ks[..], &v) {
                    if self.ty(*x).rank() == 2 && !self.batched.contains(x) {
                        if let Val::Var(t) = self.push("", Op::Transpose, &[*x], None) {
                            let c = self.index(
                                Val::Var(t),
                                base.span,
                                col.clone(),
                                indices[1].span,
                                "",
                            );
                            return self.index(c, base.span, ks[0].clone(), indices[0].span, hint);
                        }
                    }
                }
                for (k, ix) in ks.into_iter().zip(indices) {
                    v = self.index(v, base.span, k, ix.span, hint);
                }
                v
            }
            ExprKind::Tabulate { size, param, body } => {
                self.tabulate(e.span, size, param, body, hints)
            }
            ExprKind::Lambda { .. } => {
                self.error(Diagnostic::new(
                    e.span,
                    "a step function `x => ...` is only allowed in `iterate` and `iterate_until`",
                ));
                Val::Err
            }
        }
    }

    /// A unary operator on a lowered operand.
    fn unary(&mut self, op: UnOp, op_span: Span, (v, span): (Val, Span), hint: &str) -> Val {
        let reduction = match op {
            UnOp::Sum => Some((Op::Sum, "+/", "sums")),
            UnOp::Max => Some((Op::MaxAll, "max/", "takes the largest of")),
            UnOp::Min => Some((Op::MinAll, "min/", "takes the smallest of")),
            UnOp::Neg | UnOp::Not => None,
        };
        match (op, v) {
            (_, Val::Err) | (_, Val::Tuple(_)) => Val::Err,
            (UnOp::Neg, Val::Const(x)) => Val::Const(-x),
            (UnOp::Neg, Val::Int(i)) => match i.checked_neg() {
                Some(n) => Val::Int(n),
                None => {
                    self.error(Diagnostic::new(op_span, "this static integer overflows"));
                    Val::Err
                }
            },
            (UnOp::Neg, Val::Var(x)) => self.push(hint, Op::Neg, &[x], None),
            (UnOp::Not, Val::Bool(b)) => Val::Bool(!b),
            (UnOp::Not, Val::Mask(m)) => {
                let t = self.ty(m);
                let Val::Var(z) = self.materialize(0.0, &t, "") else {
                    return Val::Err;
                };
                match self.push(hint, Op::Eq, &[m, z], None) {
                    Val::Var(x) => Val::Mask(x),
                    other => other,
                }
            }
            (UnOp::Not, v) => {
                let t = self.describe(&v);
                self.error(
                    Diagnostic::new(op_span, "`!` needs a bool")
                        .with_label(span, format!("this has type {t}")),
                );
                Val::Err
            }
            (UnOp::Neg, v @ (Val::Bool(_) | Val::Mask(_))) => {
                let t = self.describe(&v);
                self.error(
                    Diagnostic::new(op_span, "`-` needs a number")
                        .with_label(span, format!("this has type {t}")),
                );
                Val::Err
            }
            (_, Val::Var(x)) if !self.ty(x).is_scalar() => match reduction {
                Some((irop, _, _)) => self.push(hint, irop, &[x], None),
                None => self.bug("unary: unhandled operator"),
            },
            (_, v) => {
                let t = self.describe(&v);
                let (text, verb) = reduction.map(|r| (r.1, r.2)).unwrap_or(("?", "reduces"));
                let is = if matches!(v, Val::Var(_) | Val::Const(_) | Val::Int(_)) {
                    "a scalar"
                } else {
                    "not an array"
                };
                self.error(
                    Diagnostic::new(
                        op_span,
                        format!(
                            "`{text}` {verb} the elements of an array, but its operand is {is}"
                        ),
                    )
                    .with_label(span, format!("this has type {t}")),
                );
                Val::Err
            }
        }
    }

    /// `x[k]` (a static row) or `x[i + c]` (rows of `x` along the index of
    /// the enclosing `tabulate`).
    fn index(&mut self, v: Val, vspan: Span, k: Val, kspan: Span, hint: &str) -> Val {
        let x = match v {
            Val::Err => return Val::Err,
            Val::Var(x) if !self.ty(x).is_scalar() => x,
            other => {
                let t = self.describe(&other);
                self.error(Diagnostic::new(
                    vspan,
                    format!("only arrays can be indexed, but this has type {t}"),
                ));
                return Val::Err;
            }
        };
        if self.batched.contains(&x) {
            self.error(Diagnostic::new(
                vspan,
                "indexing a value that depends on the index of `tabulate` is not supported yet",
            ).with_note("index the arrays the value is computed from instead (`X[i][0] * w[0]`, not `(X[i] .* w)[0]`)"));
            return Val::Err;
        }
        let t = self.ty(x);
        let rows = t.shape[0].clone();
        let rest = t.shape[1..].to_vec();
        let k = match k {
            Val::Err => return Val::Err,
            Val::Const(c) => match exact_int(c) {
                Some(n) => Val::Int(n),
                None => {
                    self.error(Diagnostic::new(
                        kspan,
                        format!("an index must be an integer, but this is {c}"),
                    ));
                    return Val::Err;
                }
            },
            k => k,
        };
        match k {
            Val::Int(n) | Val::Idx(n) if n < 0 => {
                self.error(Diagnostic::new(kspan, format!("index {n} is negative")));
                Val::Err
            }
            Val::Int(n) => {
                if let Dim::Lit(d) = rows {
                    if n as u64 >= d {
                        self.error(Diagnostic::new(
                            kspan,
                            format!("index {n} is out of range for an array of length {d}"),
                        ));
                        return Val::Err;
                    }
                }
                self.push(hint, Op::Index(n as u64), &[x], None)
            }
            Val::Idx(off) => {
                let Some((len, _)) = self.batch.clone() else {
                    return self.bug("a tabulate index outside `tabulate`");
                };
                if let (Dim::Lit(d), Dim::Lit(l)) = (&rows, &len) {
                    if off as u64 + l > *d {
                        self.error(Diagnostic::new(
                            kspan,
                            format!("`tabulate` over {l} reads rows {off}..{} of an array of length {d}, out of range", off as u64 + l),
                        ));
                        return Val::Err;
                    }
                }
                let mut shape = vec![len];
                shape.extend(rest);
                let r = self.push_plain(
                    hint,
                    Op::Slice(off as u64),
                    &[x],
                    Some(&Type::array(t.dtype, shape)),
                );
                if let Val::Var(s) = r {
                    self.batched.insert(s);
                }
                r
            }
            other => {
                let what = self.describe(&other);
                let float = matches!(other, Val::Var(_));
                let mut d = Diagnostic::new(
                    kspan,
                    format!("an index must be a static integer or the index of `tabulate`, but this is {what}"),
                );
                if float {
                    d = d.with_note(
                        "indexing with a run-time (floating-point) value is not supported",
                    );
                }
                self.error(d);
                Val::Err
            }
        }
    }

    /// `tabulate[L](i => e)`: lowered once for all `i` at the same time.
    /// Every value that depends on `i` is a stack of L values (a leading
    /// axis); `x[i + c]` is rows `c .. c+L` of `x`, `+/` of a stack sums each
    /// row, and values that do not depend on `i` are computed once.
    fn tabulate(
        &mut self,
        span: Span,
        size: &DimExpr,
        param: &Ident,
        body: &Expr,
        hints: &[&str],
    ) -> Val {
        if self.batch.is_some() {
            self.error(Diagnostic::new(
                span,
                "`tabulate` inside `tabulate` is not supported yet",
            ));
            return Val::Err;
        }
        let static_int = |cx: &Self, n: &str| {
            cx.env
                .iter()
                .rev()
                .find(|(k, _)| k == n)
                .and_then(|(_, v)| v.as_static_int())
        };
        let (name, minus) = match size {
            DimExpr::Lit(n, _) => (None, *n),
            DimExpr::Name(id) => (Some(id), 0),
            DimExpr::Sub(id, k, _) => (Some(id), *k),
        };
        let len = match name {
            None => Some(Dim::Lit(minus)),
            Some(id) if self.sizes.contains(&id.name) => Dim::Param(id.name.clone()).minus(minus),
            Some(id) => match static_int(self, &id.name) {
                Some(n) if n >= minus as i64 => Some(Dim::Lit(n as u64 - minus)),
                Some(n) => {
                    self.error(Diagnostic::new(
                        size.span(),
                        format!("the length of `tabulate` is negative ({n} - {minus})"),
                    ));
                    return Val::Err;
                }
                None => {
                    self.error(
                        Diagnostic::new(size.span(), format!("the length of `tabulate` must be a size parameter or a static integer, but `{}` is neither", id.name))
                            .with_note("declare it as a size parameter (`fn f[N](...)`) or a `static` parameter"),
                    );
                    return Val::Err;
                }
            },
        };
        let Some(len) = len else {
            return self.bug("tabulate length");
        };
        self.batch = Some((len.clone(), span));
        let mark = self.env.len();
        self.env.push((param.name.clone(), Val::Idx(0)));
        let v = self.lower(body, hints);
        self.env.truncate(mark);
        let hint = hints.first().copied().unwrap_or("");
        let out = match v {
            Val::Err => Val::Err,
            Val::Var(x) if self.batched.contains(&x) => Val::Var(x),
            Val::Var(x) => {
                // The same value for every index.
                let t = self.ty(x);
                let mut shape = vec![len];
                shape.extend(t.shape.iter().cloned());
                let lift = if t.is_scalar() { Op::Bcast } else { Op::Repeat };
                self.push_plain(hint, lift, &[x], Some(&Type::array(t.dtype, shape)))
            }
            other => {
                let what = self.describe(&other);
                let mut d = Diagnostic::new(
                    result_expr(body).span,
                    format!("`tabulate` builds arrays of numbers, but its body has type {what}"),
                );
                if matches!(other, Val::Const(_) | Val::Int(_)) {
                    d = d.with_note("a bare number has no element type yet: write it with a typed value, as in `x[i] * 0.0 + 1.0`");
                }
                self.error(d);
                Val::Err
            }
        };
        self.batch = None;
        self.batched.clear();
        out
    }

    /// `if c { a } else { b }`: a static condition picks one branch at
    /// compile time (the other is not lowered); a dynamic one lowers both
    /// and selects, element by element.
    fn lower_if(&mut self, cond: &Expr, then: &Expr, els: &Expr, hints: &[&str]) -> Val {
        let c = self.lower(cond, &[]);
        let c = self.single(c, cond.span);
        match c {
            Val::Err => Val::Err,
            Val::Bool(true) => self.lower(then, hints),
            Val::Bool(false) => self.lower(els, hints),
            Val::Mask(m) => {
                let a = self.lower(then, hints);
                let b = self.lower(els, hints);
                self.select(
                    m,
                    (a, result_expr(then).span),
                    (b, result_expr(els).span),
                    hints,
                )
            }
            other => {
                let t = self.describe(&other);
                self.error(
                    Diagnostic::new(
                        cond.span,
                        format!("the condition of `if` must be a bool, but it has type {t}"),
                    )
                    .with_note("compare numbers with `<`, `<=`, `>`, `>=`, `==` or `!=`"),
                );
                Val::Err
            }
        }
    }

    /// Select between two lowered branches under a dynamic mask.
    fn select(
        &mut self,
        m: VarId,
        (a, aspan): (Val, Span),
        (b, bspan): (Val, Span),
        hints: &[&str],
    ) -> Val {
        match (a, b) {
            (Val::Err, _) | (_, Val::Err) => Val::Err,
            (Val::Tuple(xs), Val::Tuple(ys)) if xs.len() == ys.len() => {
                let mut out = Vec::new();
                for (k, (x, y)) in xs.into_iter().zip(ys).enumerate() {
                    let h = hints.get(k).copied().unwrap_or("");
                    out.push(self.select(m, (x, aspan), (y, bspan), &[h]));
                }
                Val::Tuple(out)
            }
            (a, b) => {
                let mask_ty = self.ty(m);
                // The branches' common type: a typed branch types a number,
                // and a scalar branch (or condition) is broadcast to an array.
                let widest = [&a, &b]
                    .into_iter()
                    .filter_map(|v| match v {
                        Val::Var(x) => Some(self.ty(*x)),
                        _ => None,
                    })
                    .chain(std::iter::once(mask_ty.clone()))
                    .max_by_key(|t| t.rank());
                let (a, b) = match &widest {
                    Some(w) if !w.is_scalar() => {
                        let mut lift = |v: Val| match v {
                            Val::Var(x)
                                if self.ty(x).is_scalar() && self.ty(x).dtype == w.dtype =>
                            {
                                match self.bcast(x, w) {
                                    Some(y) => Val::Var(y),
                                    None => Val::Err,
                                }
                            }
                            v => v,
                        };
                        (lift(a), lift(b))
                    }
                    _ => (a, b),
                };
                let ty = match (&a, &b) {
                    (Val::Var(x), _) | (_, Val::Var(x)) => self.ty(*x),
                    (Val::Const(_) | Val::Int(_), Val::Const(_) | Val::Int(_))
                        if !mask_ty.is_scalar() =>
                    {
                        mask_ty.clone()
                    }
                    (Val::Const(_) | Val::Int(_), Val::Const(_) | Val::Int(_)) => mask_ty.clone(),
                    _ => {
                        let (ta, tb) = (self.describe(&a), self.describe(&b));
                        self.error(
                            Diagnostic::new(aspan, format!("the branches of this `if` have types {ta} and {tb}; a dynamic condition needs numbers or arrays"))
                                .with_label(bspan, format!("this has type {tb}")),
                        );
                        return Val::Err;
                    }
                };
                let (x, y) = match (self.coerce(&a, &ty), self.coerce(&b, &ty)) {
                    (Some(Val::Var(x)), Some(Val::Var(y))) => (x, y),
                    (Some(Val::Err), _) | (_, Some(Val::Err)) => return Val::Err,
                    _ => {
                        let (ta, tb) = (self.describe(&a), self.describe(&b));
                        self.error(
                            Diagnostic::new(
                                aspan,
                                format!(
                                    "the branches of this `if` have different types: {ta} and {tb}"
                                ),
                            )
                            .with_label(bspan, format!("this has type {tb}")),
                        );
                        return Val::Err;
                    }
                };
                if mask_ty.dtype != ty.dtype {
                    self.error(Diagnostic::new(aspan, format!(
                        "the condition compares {} values but the branches are {}; compare values of the branches' precision",
                        mask_ty.dtype, ty.dtype
                    )));
                    return Val::Err;
                }
                let mask = if mask_ty == ty {
                    m
                } else if mask_ty.is_scalar() {
                    match self.bcast(m, &ty) {
                        Some(v) => v,
                        None => return Val::Err,
                    }
                } else {
                    self.error(Diagnostic::new(
                        aspan,
                        format!(
                            "the condition has type {} but the branches have type {ty}",
                            self.describe(&Val::Mask(m))
                        ),
                    ));
                    return Val::Err;
                };
                let hint = hints.first().copied().unwrap_or("");
                self.push(hint, Op::Select, &[mask, x, y], None)
            }
        }
    }

    fn lower_let(&mut self, l: &Let) {
        let hints: Vec<&str> = match &l.pattern {
            Pattern::Name(id) => vec![id.name.as_str()],
            Pattern::Tuple(ids, _) => ids.iter().map(|i| i.name.as_str()).collect(),
        };
        let v = self.lower(&l.value, &hints);
        self.bind_pattern(&l.pattern, v, l.value.span);
    }

    fn lookup(&mut self, n: &str, span: Span) -> Val {
        if let Some((_, v)) = self.env.iter().rev().find(|(k, _)| k == n) {
            return v.clone();
        }
        let d = if self.by_name.contains_key(n) || is_reserved(n) {
            Diagnostic::new(span, format!("`{n}` is a function, not a value"))
                .with_note(format!("call it as `{n}(...)`"))
        } else if self.sizes.iter().any(|s| s == n) {
            Diagnostic::new(span, format!("size parameter `{n}` is not a value"))
                .with_note("size parameters may only appear in types")
        } else {
            Diagnostic::new(span, format!("unknown name `{n}`"))
        };
        self.error(d);
        Val::Err
    }

    #[allow(clippy::too_many_arguments)]
    fn binary(
        &mut self,
        op: BinOp,
        op_text: &str,
        op_span: Span,
        (l, lspan): (Val, Span),
        (r, rspan): (Val, Span),
        hint: &str,
    ) -> Val {
        let irop = match op {
            BinOp::Add => Op::Add,
            BinOp::Sub => Op::Sub,
            BinOp::Mul => Op::Mul,
            BinOp::Div => Op::Div,
            BinOp::Lt => Op::Lt,
            BinOp::Le => Op::Le,
            BinOp::Gt => Op::Gt,
            BinOp::Ge => Op::Ge,
            BinOp::Eq => Op::Eq,
            BinOp::Ne => Op::Ne,
            BinOp::And | BinOp::Or => {
                return self.logic(op, op_text, op_span, (l, lspan), (r, rspan), hint)
            }
        };
        if matches!(l, Val::Idx(_)) || matches!(r, Val::Idx(_)) {
            let off = match (op, &l, &r) {
                (BinOp::Add, Val::Idx(a), b) | (BinOp::Add, b, Val::Idx(a)) => {
                    b.as_static_int().and_then(|b| a.checked_add(b))
                }
                (BinOp::Sub, Val::Idx(a), b) => b.as_static_int().and_then(|b| a.checked_sub(b)),
                _ => None,
            };
            return match off {
                Some(o) => Val::Idx(o),
                None => {
                    self.error(
                        Diagnostic::new(op_span, format!("`{op_text}` on the index of `tabulate`: the index can only be offset by a static integer (`i + 1`, `i - 2`) and used to index arrays"))
                            .with_label(lspan, format!("this has type {}", self.describe(&l)))
                            .with_label(rspan, format!("this has type {}", self.describe(&r))),
                    );
                    Val::Err
                }
            };
        }
        for (v, span) in [(&l, lspan), (&r, rspan)] {
            if matches!(v, Val::Count(..)) {
                self.error(count_only(op_span, span, op_text));
                return Val::Err;
            }
        }
        let cmp = op.is_comparison();
        // Static integers stay integers (counts, indices, sizes); a division
        // is an integer division only between two static integers.
        let int_op = match op {
            BinOp::Div => matches!((&l, &r), (Val::Int(_), Val::Int(_))),
            _ => matches!(l, Val::Int(_)) || matches!(r, Val::Int(_)),
        };
        if int_op {
            if let (Some(a), Some(b)) = (l.as_static_int(), r.as_static_int()) {
                return self.int_binary(op, op_text, op_span, a, b);
            }
        }
        let num = |v: Val| match v {
            Val::Int(i) => Val::Const(i as f64),
            v => v,
        };
        let (l, r) = (num(l), num(r));
        for (v, span) in [(&l, lspan), (&r, rspan)] {
            if matches!(v, Val::Bool(_) | Val::Mask(_)) {
                self.error(
                    Diagnostic::new(op_span, format!("`{op_text}` needs numbers, not bools"))
                        .with_label(span, format!("this has type {}", self.describe(v))),
                );
                return Val::Err;
            }
        }
        let result = match (l, r) {
            (Val::Err, _) | (_, Val::Err) | (Val::Tuple(_), _) | (_, Val::Tuple(_)) => {
                return Val::Err
            }
            (Val::Const(a), Val::Const(b)) => {
                let x = fold(irop, &[a, b]);
                return if cmp {
                    Val::Bool(x != 0.0)
                } else {
                    Val::Const(x)
                };
            }
            // `1 * x`, `x * 1` and `x / 1` are `x` exactly (IEEE): partial
            // evaluation drops them (an iteration starting from 1, say).
            (Val::Const(c), Val::Var(b)) if c == 1.0 && irop == Op::Mul => return Val::Var(b),
            (Val::Var(a), Val::Const(c)) if c == 1.0 && matches!(irop, Op::Mul | Op::Div) => {
                return Val::Var(a)
            }
            (Val::Var(a), Val::Const(c)) => {
                let t = self.ty(a);
                let Val::Var(b) = self.materialize(c, &t, "") else {
                    return Val::Err;
                };
                self.push(hint, irop, &[a, b], None)
            }
            (Val::Const(c), Val::Var(b)) => {
                let t = self.ty(b);
                let Val::Var(a) = self.materialize(c, &t, "") else {
                    return Val::Err;
                };
                self.push(hint, irop, &[a, b], None)
            }
            (Val::Var(a), Val::Var(b)) => {
                self.elementwise2(irop, op_text, op_span, (a, lspan), (b, rspan), hint)
            }
            _ => return self.bug("binary: unexpected operands"),
        };
        match result {
            Val::Var(x) if cmp => Val::Mask(x),
            v => v,
        }
    }

    /// An element-wise op on two typed values of one element type: a scalar
    /// is broadcast to the other's shape, and a row to every row of a
    /// matrix; other shapes must be equal.
    fn elementwise2(
        &mut self,
        irop: Op,
        op_text: &str,
        op_span: Span,
        (a, lspan): (VarId, Span),
        (b, rspan): (VarId, Span),
        hint: &str,
    ) -> Val {
        let (ta, tb) = (self.ty(a), self.ty(b));
        if ta.dtype != tb.dtype {
            self.error(
                Diagnostic::new(
                    op_span,
                    format!(
                        "`{op_text}` mixes element types {} and {}",
                        ta.dtype, tb.dtype
                    ),
                )
                .with_label(lspan, format!("this has type {ta}"))
                .with_label(rspan, format!("this has type {tb}"))
                .with_note("there is no implicit conversion between f32 and f64"),
            );
            return Val::Err;
        }
        let (a, b) = if ta == tb {
            (a, b)
        } else if ta.is_scalar() {
            match self.bcast(a, &tb) {
                Some(x) => (x, b),
                None => return Val::Err,
            }
        } else if tb.is_scalar() {
            match self.bcast(b, &ta) {
                Some(x) => (a, x),
                None => return Val::Err,
            }
        } else if let Some(x) = self.repeat_rows(a, &ta, &tb) {
            (x, b)
        } else if let Some(x) = self.repeat_rows(b, &tb, &ta) {
            (a, x)
        } else {
            self.error(
                Diagnostic::new(
                    op_span,
                    format!("shape mismatch: `{op_text}` needs operands of the same shape, found {ta} and {tb}"),
                )
                .with_label(lspan, format!("this has type {ta}"))
                .with_label(rspan, format!("this has type {tb}")),
            );
            return Val::Err;
        };
        self.push(hint, irop, &[a, b], None)
    }

    /// Arithmetic and comparison on static integers (checked: overflow and
    /// division by zero are errors).
    fn int_binary(&mut self, op: BinOp, op_text: &str, op_span: Span, a: i64, b: i64) -> Val {
        let r = match op {
            BinOp::Add => a.checked_add(b),
            BinOp::Sub => a.checked_sub(b),
            BinOp::Mul => a.checked_mul(b),
            BinOp::Div => {
                if b == 0 {
                    self.error(Diagnostic::new(op_span, "static integer division by zero"));
                    return Val::Err;
                }
                a.checked_div(b)
            }
            BinOp::Lt => return Val::Bool(a < b),
            BinOp::Le => return Val::Bool(a <= b),
            BinOp::Gt => return Val::Bool(a > b),
            BinOp::Ge => return Val::Bool(a >= b),
            BinOp::Eq => return Val::Bool(a == b),
            BinOp::Ne => return Val::Bool(a != b),
            BinOp::And | BinOp::Or => None,
        };
        match r {
            Some(x) => Val::Int(x),
            None => {
                self.error(Diagnostic::new(
                    op_span,
                    format!(
                        "static integer `{op_text}` overflows (or is not an integer operation)"
                    ),
                ));
                Val::Err
            }
        }
    }

    /// `&&` and `||`: static bools fold; masks combine element-wise
    /// (`a && b` is `a * b`, `a || b` is `max(a, b)` on 0/1 masks).
    fn logic(
        &mut self,
        op: BinOp,
        op_text: &str,
        op_span: Span,
        (l, lspan): (Val, Span),
        (r, rspan): (Val, Span),
        hint: &str,
    ) -> Val {
        let and = op == BinOp::And;
        match (l, r) {
            (Val::Err, _) | (_, Val::Err) => Val::Err,
            (Val::Bool(a), Val::Bool(b)) => Val::Bool(if and { a && b } else { a || b }),
            (Val::Bool(a), m @ Val::Mask(_)) | (m @ Val::Mask(_), Val::Bool(a)) => {
                if a == and {
                    m
                } else {
                    Val::Bool(a)
                }
            }
            (Val::Mask(a), Val::Mask(b)) => {
                let (ta, tb) = (self.ty(a), self.ty(b));
                let (a, b) = if ta == tb {
                    (a, b)
                } else if ta.is_scalar() && ta.dtype == tb.dtype {
                    match self.bcast(a, &tb) {
                        Some(x) => (x, b),
                        None => return Val::Err,
                    }
                } else if tb.is_scalar() && ta.dtype == tb.dtype {
                    match self.bcast(b, &ta) {
                        Some(x) => (a, x),
                        None => return Val::Err,
                    }
                } else {
                    self.error(
                        Diagnostic::new(
                            op_span,
                            format!(
                                "`{op_text}` combines conditions of different shapes or precisions"
                            ),
                        )
                        .with_label(
                            lspan,
                            format!("this has type {}", self.describe(&Val::Mask(a))),
                        )
                        .with_label(
                            rspan,
                            format!("this has type {}", self.describe(&Val::Mask(b))),
                        ),
                    );
                    return Val::Err;
                };
                match self.push(hint, if and { Op::Mul } else { Op::Max }, &[a, b], None) {
                    Val::Var(x) => Val::Mask(x),
                    v => v,
                }
            }
            (l, r) => {
                let (bad, span) = if matches!(l, Val::Bool(_) | Val::Mask(_)) {
                    (r, rspan)
                } else {
                    (l, lspan)
                };
                self.error(
                    Diagnostic::new(op_span, format!("`{op_text}` needs bools"))
                        .with_label(span, format!("this has type {}", self.describe(&bad))),
                );
                Val::Err
            }
        }
    }

    fn call(&mut self, e: &Expr, callee: &Ident, args: &[Expr], hints: &[&str]) -> Val {
        let name = callee.name.as_str();
        let hint = hints.first().copied().unwrap_or("");
        if let Some(op) = builtin(name).or_else(|| builtin2(name)) {
            let vals: Vec<Val> = args
                .iter()
                .map(|a| {
                    let v = self.lower(a, &[]);
                    self.single(v, a.span)
                })
                .collect();
            let want = op.arity();
            if args.len() != want {
                self.error(Diagnostic::new(
                    e.span,
                    arity_message(name, want, args.len()),
                ));
                return Val::Err;
            }
            let mut vals = vals.into_iter().map(|v| match v {
                Val::Int(i) => Val::Const(i as f64),
                v => v,
            });
            if want == 2 {
                let (l, r) = (
                    vals.next().unwrap_or(Val::Err),
                    vals.next().unwrap_or(Val::Err),
                );
                return self.builtin2(op, name, e.span, (l, args[0].span), (r, args[1].span), hint);
            }
            return match vals.next().unwrap_or(Val::Err) {
                Val::Const(x) => Val::Const(fold(op, &[x])),
                Val::Var(x) => self.push(hint, op, &[x], None),
                Val::Err => Val::Err,
                other => {
                    let t = self.describe(&other);
                    self.error(Diagnostic::new(
                        args[0].span,
                        format!("`{name}` needs a number or an array, but this has type {t}"),
                    ));
                    Val::Err
                }
            };
        }
        if name == "iterate" {
            return self.iterate(e, args, hints);
        }
        if name == "iterate_until" {
            return self.iterate_impl(e, args, hints, true);
        }
        if name == "scan" {
            return self.scan(e, args, hints);
        }
        if let Some(op) = matrix_builtin(name) {
            let mut xs = Vec::new();
            for a in args {
                let v = self.lower(a, &[]);
                match self.single(v, a.span) {
                    Val::Var(x) => xs.push(x),
                    Val::Err => return Val::Err,
                    other => {
                        let t = self.describe(&other);
                        self.error(Diagnostic::new(
                            a.span,
                            format!("`{name}` needs matrices, but this has type {t}"),
                        ));
                        return Val::Err;
                    }
                }
            }
            let tys: Vec<Type> = xs.iter().map(|x| self.ty(*x)).collect();
            let refs: Vec<&Type> = tys.iter().collect();
            if let Err(err) = op.result_type(&refs, None) {
                self.error(Diagnostic::new(e.span, err.0));
                return Val::Err;
            }
            return self.push(hint, op, &xs, None);
        }
        if name == "reverse" {
            let Some(xs) = self.array_args(e, name, args) else {
                return Val::Err;
            };
            return self.reverse_rows(hint, xs[0]);
        }
        if name == "concat" {
            let Some(xs) = self.array_args(e, name, args) else {
                return Val::Err;
            };
            return self.concat(e, args, &xs, hint);
        }
        let Some(&fi) = self.by_name.get(name) else {
            for a in args {
                self.lower(a, &[]);
            }
            let d = if self.env.iter().any(|(k, _)| k == name) {
                Diagnostic::new(callee.span, format!("`{name}` is a value, not a function"))
            } else {
                Diagnostic::new(callee.span, format!("unknown function `{name}`"))
            };
            self.error(d);
            return Val::Err;
        };
        let vals: Vec<Val> = args
            .iter()
            .map(|a| {
                let v = self.lower(a, &[]);
                self.single(v, a.span)
            })
            .collect();
        let sigs = self.sigs;
        let Some(sig) = sigs.get(fi).and_then(|s| s.as_ref()) else {
            return Val::Err;
        };
        let decl = &self.module.items[fi];
        // A generic callee: its element types come from the arguments.
        let spec_sig;
        let generic = !sig.generic.is_empty();
        let sig = if generic {
            let mut dtypes: HashMap<String, DType> = HashMap::new();
            let mut from: HashMap<String, usize> = HashMap::new();
            for (k, (p, v)) in decl.params.iter().zip(&vals).enumerate() {
                let (TypeExpr::Named { dtype, .. }, Val::Var(x)) = (&p.ty, v) else {
                    continue;
                };
                if !sig.generic.contains(&dtype.name) {
                    continue;
                }
                let d = self.ty(*x).dtype;
                match dtypes.get(&dtype.name) {
                    Some(&d0) if d0 != d => {
                        let other = &decl.params[from[&dtype.name]].name.name;
                        self.error(
                            Diagnostic::new(
                                args[k].span,
                                format!(
                                    "`{}` of `{name}` is {d0} from argument `{other}`, but this argument is {d}",
                                    dtype.name
                                ),
                            )
                            .with_note("there is no implicit conversion between f32 and f64"),
                        );
                        return Val::Err;
                    }
                    Some(_) => {}
                    None => {
                        dtypes.insert(dtype.name.clone(), d);
                        from.insert(dtype.name.clone(), k);
                    }
                }
            }
            for g in &sig.generic {
                if !dtypes.contains_key(g) {
                    if vals.iter().any(|v| matches!(v, Val::Err)) {
                        return Val::Err;
                    }
                    self.error(
                        Diagnostic::new(
                            e.span,
                            format!("cannot infer the element type `{g}` of `{name}` from these arguments"),
                        )
                        .with_note("pass an array or a typed value (not only numbers) where it is used"),
                    );
                    return Val::Err;
                }
            }
            match signature_with(decl, &dtypes, &mut self.errs) {
                Some(s) => {
                    spec_sig = s;
                    &spec_sig
                }
                None => return Val::Err,
            }
        } else {
            sig
        };
        if args.len() != sig.params.len() {
            self.error(
                Diagnostic::new(e.span, arity_message(name, sig.params.len(), args.len()))
                    .with_label(decl.name.span, format!("`{name}` is declared here")),
            );
            return Val::Err;
        }
        // Static arguments must be known now; they specialize the callee.
        let mut statics: Vec<(usize, Val)> = Vec::new();
        let mut ok = true;
        for (k, v) in vals.iter().enumerate() {
            let Some(kind) = sig.statics.get(k).copied().flatten() else {
                continue;
            };
            let (pname, _, pspan) = &sig.params[k];
            let sv = match (kind, v) {
                (_, Val::Err) => {
                    ok = false;
                    continue;
                }
                (StaticKind::Int, v) => v.as_static_int().map(Val::Int),
                (StaticKind::Bool, Val::Bool(b)) => Some(Val::Bool(*b)),
                (StaticKind::Real, Val::Const(x)) => Some(Val::Const(*x)),
                (StaticKind::Real, Val::Int(i)) => Some(Val::Const(*i as f64)),
                _ => None,
            };
            match sv {
                Some(sv) => statics.push((k, sv)),
                None => {
                    ok = false;
                    let dynamic = matches!(v, Val::Var(_) | Val::Mask(_) | Val::Tuple(_));
                    let what = match &args[k].kind {
                        ExprKind::Name(n) => format!("`{n}`"),
                        _ => "this argument".to_string(),
                    };
                    let mut d = Diagnostic::new(
                        args[k].span,
                        if dynamic {
                            format!("the static parameter `{pname}` of `{name}` needs a value known at compile time, but {what} is a run-time value ({})", self.describe(v))
                        } else {
                            format!("the static parameter `{pname}` of `{name}` has the wrong type: {what} is {}", self.describe(v))
                        },
                    )
                    .with_label(*pspan, format!("`{pname}` is declared here"));
                    if dynamic {
                        d = d.with_note(format!(
                            "pass a literal, or mark the parameter that {what} comes from `static` in the calling function"
                        ));
                    }
                    self.error(d);
                }
            }
        }
        // Unify the callee's size parameters with the argument shapes.
        let mut subst: HashMap<String, Dim> = HashMap::new();
        for (k, v) in vals.iter().enumerate() {
            if sig.statics.get(k).copied().flatten().is_some() {
                continue;
            }
            let (pname, pty, pspan) = &sig.params[k];
            if pty.dtype == DType::I64 {
                // A run-time integer binds the callee's size parameter of
                // its name: to the caller's one, or to a static value.
                let d = match v {
                    Val::Count(size, _) => Some(Dim::Param(size.clone())),
                    Val::Err => {
                        ok = false;
                        continue;
                    }
                    other => other
                        .as_static_int()
                        .and_then(|i| u64::try_from(i).ok())
                        .map(Dim::Lit),
                };
                match d {
                    Some(d) => {
                        subst.insert(pname.clone(), d);
                    }
                    None => {
                        ok = false;
                        let t = self.describe(v);
                        self.error(
                            Diagnostic::new(
                                args[k].span,
                                format!("argument `{pname}` of `{name}` must be a non-negative i64 (a count), but it is {t}"),
                            )
                            .with_label(*pspan, format!("`{pname}` is declared here as i64")),
                        );
                    }
                }
                continue;
            }
            let x = match v {
                Val::Var(x) => *x,
                Val::Err => {
                    ok = false;
                    continue;
                }
                Val::Const(_) | Val::Int(_) => continue,
                other => {
                    ok = false;
                    let t = self.describe(other);
                    self.error(
                        Diagnostic::new(
                            args[k].span,
                            format!("argument `{pname}` of `{name}` must have type {pty}, but it has type {t}"),
                        )
                        .with_label(*pspan, format!("`{pname}` is declared here as {pty}")),
                    );
                    continue;
                }
            };
            let at = self.ty(x);
            let mut fits = at.dtype == pty.dtype && at.rank() == pty.rank();
            if fits {
                let mut trial = subst.clone();
                for (pd, ad) in pty.shape.iter().zip(&at.shape) {
                    match pd {
                        Dim::Lit(_) | Dim::Sub(..) | Dim::Rows(..) => fits &= pd == ad,
                        Dim::Param(p) => match trial.get(p) {
                            Some(bound) => fits &= bound == ad,
                            None => {
                                trial.insert(p.clone(), ad.clone());
                            }
                        },
                    }
                }
                if fits {
                    subst = trial;
                }
            }
            if !fits {
                ok = false;
                let want = subst_type(pty, &subst);
                self.error(
                    Diagnostic::new(
                        args[k].span,
                        format!(
                            "argument `{pname}` of `{name}` must have type {want}, but it has type {at}"
                        ),
                    )
                    .with_label(*pspan, format!("`{pname}` is declared here as {pty}")),
                );
            }
        }
        if !ok {
            return Val::Err;
        }
        // Literal arguments take the parameter's type.
        let mut arg_vars = Vec::new();
        for (k, v) in vals.iter().enumerate() {
            if sig.statics.get(k).copied().flatten().is_some() {
                continue;
            }
            let (pname, pty, _) = &sig.params[k];
            if pty.dtype == DType::I64 {
                // Never read by the callee's statements (it gives a size).
                arg_vars.push(match v {
                    Val::Count(_, x) => *x,
                    _ => self
                        .b
                        .constant(DType::F64, v.as_static_int().unwrap_or(0) as f64),
                });
                continue;
            }
            match v {
                Val::Var(x) => arg_vars.push(*x),
                Val::Const(_) | Val::Int(_) => {
                    let c = match v {
                        Val::Int(i) => *i as f64,
                        Val::Const(c) => *c,
                        _ => 0.0,
                    };
                    let want = subst_type(pty, &subst);
                    let unbound = pty
                        .shape
                        .iter()
                        .any(|d| matches!(d, Dim::Param(p) if !subst.contains_key(p)));
                    if unbound {
                        self.error(Diagnostic::new(
                            args[k].span,
                            format!(
                                "cannot infer the shape of argument `{pname}` of `{name}` ({pty}) from a number"
                            ),
                        ).with_note("pass an array, or another argument that fixes its size"));
                        return Val::Err;
                    }
                    match self.materialize(c, &want, "") {
                        Val::Var(x) => arg_vars.push(x),
                        _ => return Val::Err,
                    }
                }
                _ => return Val::Err,
            }
        }
        if generic || sig.is_template() {
            // Specialize: lower the callee's body with these static values
            // and element types.
            if self.depth >= MAX_SPECIALIZATION_DEPTH {
                let shown: Vec<String> = statics
                    .iter()
                    .map(|(k, v)| {
                        let shown = match v {
                            Val::Int(i) => i.to_string(),
                            Val::Const(c) => c.to_string(),
                            Val::Bool(b) => b.to_string(),
                            other => self.describe(other),
                        };
                        format!("{} = {shown}", sig.params[*k].0)
                    })
                    .collect();
                self.error(
                    Diagnostic::new(
                        e.span,
                        format!(
                            "`{name}` is specialized {MAX_SPECIALIZATION_DEPTH} calls deep (here with {})",
                            if shown.is_empty() { "no static values".to_string() } else { shown.join(", ") }
                        ),
                    )
                    .with_note("a function that calls itself must change a static value on each call and stop at a static `if`"),
                );
                return Val::Err;
            }
            let lowered = self.lowered;
            let mut cx = FnCx::new(sigs, lowered, self.by_name, self.module, fi, sig);
            cx.depth = self.depth + 1;
            let spec = cx.lower_fn(decl, sig, &statics);
            self.errs.append(&mut cx.errs);
            if let Some(m) = cx.internal.take() {
                return self.bug(m);
            }
            return match spec {
                Some(c) => self.inline(&c.ir, &arg_vars, &subst, hints, e.span),
                None => Val::Err,
            };
        }
        let Some(callee_fn) = self.lowered.get(fi).and_then(|c| c.as_ref()) else {
            // The callee has errors of its own (already reported).
            return Val::Err;
        };
        self.inline(&callee_fn.ir, &arg_vars, &subst, hints, e.span)
    }

    /// A two-argument builtin (`pow`, `max`, `min`): element-wise with
    /// scalar broadcasting, like the arithmetic operators.
    /// The arguments of `reverse` (one) or `concat` (two), each an array
    /// of rank 1 or more; None after reporting an error.
    fn array_args(&mut self, e: &Expr, name: &str, args: &[Expr]) -> Option<Vec<VarId>> {
        let want = if name == "concat" { 2 } else { 1 };
        let vals: Vec<Val> = args
            .iter()
            .map(|a| {
                let v = self.lower(a, &[]);
                self.single(v, a.span)
            })
            .collect();
        if args.len() != want {
            self.error(Diagnostic::new(
                e.span,
                arity_message(name, want, args.len()),
            ));
            return None;
        }
        let mut xs = Vec::with_capacity(want);
        let mut ok = true;
        for (v, a) in vals.into_iter().zip(args) {
            match v {
                Val::Var(x) if !self.ty(x).is_scalar() => xs.push(x),
                Val::Err => ok = false,
                other => {
                    let t = self.describe(&other);
                    let t = match other {
                        Val::Var(_) => format!("a scalar ({t})"),
                        _ => t,
                    };
                    self.error(Diagnostic::new(
                        a.span,
                        format!(
                            "`{name}` needs an array (a vector, a matrix, ...: rank 1 or more), but this is {t}"
                        ),
                    ));
                    ok = false;
                }
            }
        }
        ok.then_some(xs)
    }

    /// `concat(a, b)`: the rows of `a`, then those of `b`. No op of its
    /// own: with `a` of integer length `k`, `pad 0 a + pad k b` (each
    /// placed in a zero array of the result's type); otherwise `b` has the
    /// integer length and the parts are swapped between two reversals,
    /// `reverse(concat(reverse(b), reverse(a)))`. Gradients follow from
    /// those of `pad`, `add` and `reverse`.
    fn concat(&mut self, e: &Expr, args: &[Expr], xs: &[VarId], hint: &str) -> Val {
        let (a, b) = (xs[0], xs[1]);
        if self.batched.contains(&a) || self.batched.contains(&b) {
            let span = self.batch.as_ref().map_or(e.span, |(_, s)| *s);
            self.error(
                Diagnostic::new(
                    span,
                    "`concat` on a value that depends on the index of `tabulate` is not supported yet",
                )
                .with_label(e.span, "this `concat`"),
            );
            return Val::Err;
        }
        let (ta, tb) = (self.ty(a), self.ty(b));
        if ta.dtype != tb.dtype || ta.rank() != tb.rank() || ta.shape[1..] != tb.shape[1..] {
            let why = if ta.dtype != tb.dtype {
                "of one element type"
            } else if ta.rank() != tb.rank() {
                "of one rank"
            } else {
                "whose rows have one shape (the same dimensions after the first)"
            };
            self.error(
                Diagnostic::new(
                    e.span,
                    format!("`concat` joins arrays {why}, but got {ta} and {tb}"),
                )
                .with_label(args[0].span, format!("this has type {ta}"))
                .with_label(args[1].span, format!("this has type {tb}")),
            );
            return Val::Err;
        }
        let (la, lb) = (&ta.shape[0], &tb.shape[0]);
        let Some(len) = concat_len(la, lb) else {
            let show = |d: &Dim| match d {
                Dim::Sub(..) => format!("({d})"),
                _ => d.to_string(),
            };
            self.error(
                Diagnostic::new(
                    e.span,
                    format!(
                        "`concat` of {ta} and {tb} would have {} + {} rows, and that size is not supported",
                        show(la),
                        show(lb)
                    ),
                )
                .with_note(
                    "sizes are `N`, an integer or `N-k`: one part must have an integer length that cancels the other's `-k` (an f64[1] and an f64[N-1] make an f64[N])",
                ),
            );
            return Val::Err;
        };
        // Joining an empty part changes nothing.
        if la == &Dim::Lit(0) {
            return Val::Var(b);
        }
        if lb == &Dim::Lit(0) {
            return Val::Var(a);
        }
        let mut shape = vec![len];
        shape.extend(ta.shape[1..].iter().cloned());
        let out = Type::array(ta.dtype, shape);
        match la {
            Dim::Lit(k) => self.join(hint, a, *k, b, &out),
            _ => {
                let Dim::Lit(k) = *lb else {
                    return self.bug("concat: no part of integer length");
                };
                let (Val::Var(rb), Val::Var(ra)) =
                    (self.reverse_rows("", b), self.reverse_rows("", a))
                else {
                    return Val::Err;
                };
                let Val::Var(j) = self.join("", rb, k, ra, &out) else {
                    return Val::Err;
                };
                self.reverse_rows(hint, j)
            }
        }
    }

    /// `reverse x`; `x` itself when it has at most one row (a reversal
    /// that moves nothing, as in `concat` of a single row).
    fn reverse_rows(&mut self, hint: &str, x: VarId) -> Val {
        let one_row = matches!(self.ty(x).shape.first(), Some(Dim::Lit(0 | 1)));
        if one_row && !self.batched.contains(&x) {
            return Val::Var(x);
        }
        self.push(hint, Op::Reverse, &[x], None)
    }

    /// `pad 0 a + pad k b` in the type `out`: `a` (of `k` rows) then `b`.
    fn join(&mut self, hint: &str, a: VarId, k: u64, b: VarId, out: &Type) -> Val {
        let (Val::Var(pa), Val::Var(pb)) = (
            self.push("", Op::Pad(0), &[a], Some(out)),
            self.push("", Op::Pad(k), &[b], Some(out)),
        ) else {
            return Val::Err;
        };
        self.push(hint, Op::Add, &[pa, pb], None)
    }

    fn builtin2(
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

    /// `iterate(n, init, s => step)`: `n` applications of `step` starting
    /// from `init`. A static `n` is unrolled here (partial evaluation).
    /// Whether unrolling `what` made the function too large: then reported
    /// once (at `span`, with `note`) and the caller stops.
    fn unrolled_too_large(&mut self, span: Span, what: &str, note: &str) -> bool {
        if self.b.function().stmts.len() <= MAX_STMTS {
            return false;
        }
        if !self.too_large {
            self.too_large = true;
            let fname = self.b.function().name.clone();
            self.error(
                Diagnostic::new(
                    span,
                    format!("`{fname}` is too large after unrolling `{what}` (more than {MAX_STMTS} operations)"),
                )
                .with_note(note),
            );
        }
        true
    }

    fn iterate(&mut self, e: &Expr, args: &[Expr], hints: &[&str]) -> Val {
        self.iterate_impl(e, args, hints, false)
    }

    /// `scan(xs, init, (s, x) => step)`: the step applied to the state and
    /// each row `x` of `xs` in turn, from row 0; the final state. A loop
    /// whose body reads row `t` at step `t` (`scan L`), or, when the state
    /// cannot be carried by a loop and `xs` has an integer length, unrolled
    /// with static rows.
    fn scan(&mut self, e: &Expr, args: &[Expr], hints: &[&str]) -> Val {
        let shape = "a sequence, an initial state and a step function `(s, x) => ...`";
        if args.len() != 3 {
            for a in args {
                self.lower(a, &[]);
            }
            self.error(Diagnostic::new(
                e.span,
                format!(
                    "`scan` takes 3 arguments ({shape}), but {} given",
                    args.len()
                ),
            ));
            return Val::Err;
        }
        let (seq, init, step) = (&args[0], &args[1], &args[2]);
        let lambda = match &step.kind {
            ExprKind::Lambda {
                param: Pattern::Tuple(ids, _),
                body,
            } if ids.len() == 2 => Some((ids[0].clone(), ids[1].clone(), body)),
            _ => None,
        };
        let Some((sname, xname, body)) = lambda else {
            if !matches!(step.kind, ExprKind::Lambda { .. }) {
                self.lower(step, &[]);
            }
            self.error(
                Diagnostic::new(step.span, "the step function of `scan` takes the state and a row of the sequence: `(s, x) => ...`")
                    .with_note("a tuple state is bound as one value: take it apart in the step with `let (a, b) = s`"),
            );
            return Val::Err;
        };
        let xs_val = self.lower(seq, &[]);
        let xs = match xs_val {
            Val::Err => return Val::Err,
            Val::Var(v) if self.ty(v).rank() >= 1 && !self.batched.contains(&v) => v,
            Val::Var(v) if self.batched.contains(&v) => {
                self.error(Diagnostic::new(
                    seq.span,
                    "`scan` over a value that depends on the index of `tabulate` is not supported",
                ));
                return Val::Err;
            }
            other => {
                self.error(Diagnostic::new(
                    seq.span,
                    format!(
                        "`scan` reads the rows of an array, but this is {}",
                        self.describe(&other)
                    ),
                ));
                return Val::Err;
            }
        };
        let xs_ty = self.ty(xs);
        let count = xs_ty.shape[0].clone();
        if !matches!(count, Dim::Lit(_) | Dim::Param(_)) {
            self.error(Diagnostic::new(
                seq.span,
                format!("`scan` over a sequence of length {count} is not supported yet; its length must be a size parameter or an integer"),
            ));
            return Val::Err;
        }
        let state = self.lower(init, hints);
        if matches!(state, Val::Err) {
            return Val::Err;
        }
        // A number in the initial state takes the sequence's element type
        // (a loop cannot wait for the first step to type it).
        let mut leaves = Vec::new();
        flatten_leaves(&state, &mut leaves);
        let dtype = xs_ty.dtype;
        let typed: Vec<Val> = leaves
            .into_iter()
            .map(|l| match l {
                Val::Const(x) => Val::Var(self.b.constant(dtype, x)),
                other => other,
            })
            .collect();
        let state = rebuild_leaves(&state, &mut typed.into_iter());
        let param = Pattern::Name(sname);
        if self.batch.is_none() {
            if let Some(v) = self.counted_loop_seq(
                count.clone(),
                &state,
                &param,
                body,
                init.span,
                hints,
                Some((xs, &xname)),
            ) {
                return v;
            }
        }
        let Dim::Lit(n) = count else {
            self.error(
                Diagnostic::new(init.span, format!("a `scan` over a sequence of run-time length cannot carry this state ({})", self.describe(&state)))
                    .with_note("a loop's state, and every value its step reads from outside, must be arrays of one element type and shape, or scalars"),
            );
            return Val::Err;
        };
        // Unrolled: row t is `xs[t]`.
        let mut state = state;
        for t in 0..n {
            if matches!(state, Val::Err) {
                return Val::Err;
            }
            if self.unrolled_too_large(seq.span, "scan", "a `scan` becomes a loop only when every part of its state, and every value its step reads from outside, is an array of one element type and shape (or a scalar)") {
                return Val::Err;
            }
            let row = self.push_plain("", Op::Index(t), &[xs], None);
            let mark = self.env.len();
            if !self.bind_pattern(&param, state.clone(), init.span) {
                self.env.truncate(mark);
                return Val::Err;
            }
            self.env.push((xname.name.clone(), row));
            let next = self.lower(body, hints);
            self.env.truncate(mark);
            if let Some(why) = self.state_change(&state, &next) {
                self.error(Diagnostic::new(
                    body.span,
                    format!("the step of `scan` must keep the state's type, but {why}"),
                ));
                return Val::Err;
            }
            state = next;
        }
        state
    }

    /// `iterate(n, init, s => step)` (`until` false), or
    /// `iterate_until(n, init, s => done, s => step)`: at most `n` steps,
    /// none once `done` holds. A static count is unrolled; a run-time `done`
    /// selects between the state and its step (a select cascade), so the
    /// gradient flows through the steps actually taken.
    fn iterate_impl(&mut self, e: &Expr, args: &[Expr], hints: &[&str], until: bool) -> Val {
        let what = if until { "iterate_until" } else { "iterate" };
        let want = if until { 4 } else { 3 };
        if until && args.len() == 3 && matches!(args[1].kind, ExprKind::Lambda { .. }) {
            self.error(
                Diagnostic::new(e.span, "`iterate_until` needs an explicit bound on the number of steps")
                    .with_note("write `iterate_until(max_steps, init, s => done, s => step)`; the loop stops after `max_steps` steps even if `done` never holds"),
            );
            return Val::Err;
        }
        if args.len() != want {
            let shape = if until {
                "a bound, an initial state, a stop condition `s => ...` and a step function `s => ...`"
            } else {
                "a count, an initial state and a step function `s => ...`"
            };
            self.error(Diagnostic::new(
                e.span,
                format!(
                    "`{what}` takes {want} arguments ({shape}), but {} given",
                    args.len()
                ),
            ));
            return Val::Err;
        }
        let (count, init, step) = (&args[0], &args[1], &args[want - 1]);
        let done = if until {
            match &args[2].kind {
                ExprKind::Lambda { param, body } => Some((param, body)),
                _ => {
                    self.lower(&args[2], &[]);
                    self.error(Diagnostic::new(
                        args[2].span,
                        "the third argument of `iterate_until` must be a stop condition, as in `s => s < 1e-6`",
                    ));
                    return Val::Err;
                }
            }
        } else {
            None
        };
        let ExprKind::Lambda { param, body } = &step.kind else {
            self.lower(step, &[]);
            self.error(Diagnostic::new(
                step.span,
                format!(
                    "the last argument of `{what}` must be a step function, as in `s => s * x`"
                ),
            ));
            return Val::Err;
        };
        let n = self.lower(count, &[]);
        let n = match n {
            Val::Err => return Val::Err,
            // A run-time count: the whole `iterate` is one loop.
            Val::Count(size, _) if !until => {
                let state = self.lower(init, hints);
                if matches!(state, Val::Err) {
                    return Val::Err;
                }
                return match self.counted_loop(
                    Dim::Param(size),
                    &state,
                    param,
                    body,
                    init.span,
                    hints,
                ) {
                    Some(v) => v,
                    None => {
                        self.error(
                            Diagnostic::new(init.span, format!("a loop with a run-time count cannot carry this state ({})", self.describe(&state)))
                                .with_note("a loop's state, and every value its step reads from outside, must be arrays of one element type and shape, or scalars; with a `static` count the `iterate` could be unrolled instead"),
                        );
                        Val::Err
                    }
                };
            }
            other if other.as_static_int().is_some() => other.as_static_int().unwrap_or(0),
            other => {
                let name = what;
                let dynamic = matches!(other, Val::Var(_) | Val::Mask(_) | Val::Count(..));
                let what = match &count.kind {
                    ExprKind::Name(n) => format!("`{n}`"),
                    _ => "the count".to_string(),
                };
                let mut d = Diagnostic::new(
                    count.span,
                    if matches!(other, Val::Count(..)) {
                        format!("the bound of `{name}` must be known at compile time, but {what} is a run-time i64")
                    } else if dynamic {
                        format!(
                            "the count of `{name}` must be known at compile time{}, but {what} is a run-time value ({})",
                            if until { "" } else { " or be a run-time `i64` parameter" },
                            self.describe(&other)
                        )
                    } else {
                        format!(
                            "the count of `{name}` must be an integer, but {what} is {}",
                            self.describe(&other)
                        )
                    },
                );
                if matches!(other, Val::Count(..)) {
                    d = d.with_note("`iterate_until` is unrolled; declare the bound `static` (a run-time count works with `iterate`)");
                } else if dynamic {
                    d = d.with_note(format!(
                        "a count is a static integer (`static n: i64`, unrolled when short) or a run-time `i64` parameter (`n: i64`, a loop); {what} is neither"
                    ));
                }
                self.error(d);
                return Val::Err;
            }
        };
        if n < 0 {
            self.error(Diagnostic::new(
                count.span,
                format!("the count of `{what}` must not be negative, but it is {n}"),
            ));
            return Val::Err;
        }
        let mut state = self.lower(init, hints);
        let mut loop_tried = until || self.batch.is_some();
        for step in 0..n {
            if matches!(state, Val::Err) {
                return Val::Err;
            }
            if !loop_tried && (step >= PEEL_STEPS || !has_constant_leaf(&state)) {
                loop_tried = true;
                let rest = Dim::Lit((n - step) as u64);
                if let Some(v) = self.counted_loop(rest, &state, param, body, init.span, hints) {
                    return v;
                }
            }
            let note = if until {
                "`iterate_until` is always unrolled; lower its bound"
            } else {
                "a long `iterate` becomes a loop only when every part of its state, and every value its step reads from outside, is an array of one element type and shape (or a scalar)"
            };
            if self.unrolled_too_large(count.span, what, note) {
                return Val::Err;
            }
            let mut stop = None;
            if let Some((dparam, dbody)) = done {
                let mark = self.env.len();
                if !self.bind_pattern(dparam, state.clone(), init.span) {
                    self.env.truncate(mark);
                    return Val::Err;
                }
                let c = self.lower(dbody, &[]);
                self.env.truncate(mark);
                match c {
                    Val::Err => return Val::Err,
                    Val::Bool(true) => break,
                    Val::Bool(false) => {}
                    Val::Mask(m) => stop = Some(m),
                    other => {
                        let t = self.describe(&other);
                        self.error(Diagnostic::new(
                            result_expr(dbody).span,
                            format!("the stop condition of `iterate_until` must be a bool, but it has type {t}"),
                        ));
                        return Val::Err;
                    }
                }
            }
            let mark = self.env.len();
            let bound = self.bind_pattern(param, state.clone(), init.span);
            if !bound {
                self.env.truncate(mark);
                return Val::Err;
            }
            let next = self.lower(body, hints);
            self.env.truncate(mark);
            if let Some(msg) = self.state_change(&state, &next) {
                self.error(
                    Diagnostic::new(
                        result_expr(body).span,
                        format!("the step of `{what}` must keep the state's type: {msg}"),
                    )
                    .with_label(
                        init.span,
                        format!("the initial state has type {}", self.describe(&state)),
                    ),
                );
                return Val::Err;
            }
            state = match stop {
                // Once `done` holds the state no longer changes (so `done`
                // keeps holding).
                Some(m) => {
                    let span = result_expr(body).span;
                    let kept = self.select(m, (state.clone(), init.span), (next, span), hints);
                    if let Some(msg) = self.state_change(&state, &kept) {
                        let cspan = done.map_or(init.span, |(_, b)| result_expr(b).span);
                        self.error(Diagnostic::new(
                            cspan,
                            format!("the stop condition of `iterate_until` must have the state's shape or be a scalar: {msg}"),
                        ));
                        return Val::Err;
                    }
                    kept
                }
                None => next,
            };
        }
        state
    }

    /// The remaining `n` steps of an `iterate` from `state` as one IR loop,
    /// when they are many (more than [`UNROLL_STMTS`] statements unrolled)
    /// and the loop can hold the state: every component (and every value
    /// the step reads from outside) an array of one dtype and shape, or a
    /// scalar. The state and those values are packed into one array
    /// `T[K, shape]`. None: unroll instead (nothing was emitted).
    fn counted_loop(
        &mut self,
        count: Dim,
        state: &Val,
        param: &Pattern,
        body: &Expr,
        init_span: Span,
        hints: &[&str],
    ) -> Option<Val> {
        self.counted_loop_seq(count, state, param, body, init_span, hints, None)
    }

    /// [`Self::counted_loop`], and for a `scan` the sequence and the name
    /// its step binds to the current row (the loop body's second
    /// parameter; the loop always runs, whatever its count).
    #[allow(clippy::too_many_arguments)]
    fn counted_loop_seq(
        &mut self,
        count: Dim,
        state: &Val,
        param: &Pattern,
        body: &Expr,
        init_span: Span,
        hints: &[&str],
        seq: Option<(VarId, &Ident)>,
    ) -> Option<Val> {
        let mut leaves = Vec::new();
        flatten_leaves(state, &mut leaves);
        // The row type: the dynamic leaves' array type (or scalar type).
        // A scalar rides along a vector state as a broadcast row.
        let mut leaf_ty: Option<Type> = None;
        for l in &leaves {
            match l {
                Val::Var(v) => {
                    let t = self.ty(*v);
                    match &leaf_ty {
                        Some(u) if *u == t || (t.is_scalar() && t.dtype == u.dtype) => {}
                        Some(u) if u.is_scalar() && t.dtype == u.dtype => leaf_ty = Some(t),
                        Some(_) => return None,
                        None => leaf_ty = Some(t),
                    }
                }
                Val::Const(_) => {}
                _ => return None,
            }
        }
        let leaf_ty = leaf_ty?;
        if leaf_ty.rank() > 1
            && leaves
                .iter()
                .any(|l| matches!(l, Val::Var(v) if self.ty(*v) != leaf_ty))
        {
            return None;
        }
        let scalar_ty = Type::scalar(leaf_ty.dtype);
        // Each leaf's own type (a number left in the state is a scalar).
        let leaf_tys: Vec<Type> = leaves
            .iter()
            .map(|l| match l {
                Val::Var(v) => self.ty(*v),
                _ if leaf_ty.is_scalar() => leaf_ty.clone(),
                _ => scalar_ty.clone(),
            })
            .collect();
        let (stmt_mark, var_mark) = (self.b.function().stmts.len(), self.b.function().vars.len());
        let loop_mark = self.b.function().loops.len();
        let err_mark = self.errs.len();
        // Lower one step on placeholder variables standing for the state.
        let holders: Vec<VarId> = leaf_tys
            .iter()
            .map(|t| self.b.fresh("", t.clone()))
            .collect();
        let mut it = holders.iter().map(|h| Val::Var(*h));
        let symbolic = rebuild_leaves(state, &mut it);
        // A scan's row: a placeholder too, the body's second parameter.
        let row = seq.map(|(xs, name)| {
            let t = self.ty(xs);
            let row_ty = Type::array(t.dtype, t.shape[1..].to_vec());
            (self.b.fresh("", row_ty.clone()), row_ty, name)
        });
        let env_mark = self.env.len();
        let bound = self.bind_pattern(param, symbolic.clone(), init_span);
        if let Some((h, _, name)) = &row {
            self.env.push((name.name.clone(), Val::Var(*h)));
        }
        let next = if bound {
            self.lower(body, hints)
        } else {
            Val::Err
        };
        self.env.truncate(env_mark);
        if self.errs.len() > err_mark || self.internal.is_some() || matches!(next, Val::Err) {
            // Reported once here; unrolling would report it again.
            self.b.truncate(stmt_mark, var_mark);
            self.b.take_loops(loop_mark);
            return Some(Val::Err);
        }
        let mut next_leaves = Vec::new();
        flatten_leaves(&next, &mut next_leaves);
        let step_stmts: Vec<(Stmt, String, Type)> = self.b.function().stmts[stmt_mark..]
            .iter()
            .map(|s| {
                let f = self.b.function();
                (
                    s.clone(),
                    f.var_name(s.var).to_string(),
                    f.ty(s.var).clone(),
                )
            })
            .collect();
        // The loops this step made count with their bodies.
        let nested = self.b.take_loops(loop_mark);
        let weight = step_stmts.len() + nested.iter().map(|l| l.body.stmts.len()).sum::<usize>();
        let fits = self.state_change(&symbolic, &next).is_none()
            && next_leaves.len() == leaves.len()
            && next_leaves.iter().zip(&leaf_tys).all(|(l, t)| match l {
                Val::Var(v) => self.ty(*v) == *t,
                Val::Const(_) => true,
                _ => false,
            })
            && match count {
                Dim::Lit(n) => {
                    seq.is_some() || (n as usize).saturating_mul(weight.max(1)) > UNROLL_STMTS
                }
                _ => true,
            };
        // Values from outside the step that it reads: carried in the state.
        let mut captures: Vec<VarId> = Vec::new();
        let is_outer = |v: VarId| v.index() < var_mark;
        for (s, _, _) in &step_stmts {
            for a in &s.args {
                if is_outer(*a) && !captures.contains(a) {
                    captures.push(*a);
                }
            }
        }
        for l in &next_leaves {
            if let Val::Var(v) = l {
                if is_outer(*v) && !captures.contains(v) {
                    captures.push(*v);
                }
            }
        }
        let captures_fit = captures.iter().all(|c| {
            let t = self.b.ty(*c);
            *t == leaf_ty || (t.is_scalar() && t.dtype == leaf_ty.dtype && leaf_ty.rank() == 1)
        });
        self.b.truncate(stmt_mark, var_mark);
        if !fits || !captures_fit || self.batched.iter().any(|v| captures.contains(v)) {
            // Unrolling lowers the step again, loops and all.
            drop(nested);
            return None;
        }

        // The body: unpack, the step's statements, pack.
        let k = leaves.len() + captures.len();
        let packed_ty = if k == 1 {
            leaf_ty.clone()
        } else {
            let mut shape = vec![Dim::Lit(k as u64)];
            shape.extend(leaf_ty.shape.iter().cloned());
            Type::array(leaf_ty.dtype, shape)
        };
        let fname = self.b.function().name.clone();
        let lid = loop_mark;
        let mut bb = Builder::new(
            format!("{fname}.loop{lid}"),
            self.b.function().size_params.clone(),
        );
        for l in nested {
            bb.add_loop(l);
        }
        let s = bb.param("s", packed_ty.clone(), init_span);
        let mut map: HashMap<VarId, VarId> = HashMap::new();
        if let Some((h, row_ty, name)) = &row {
            map.insert(*h, bb.param(&name.name, row_ty.clone(), name.span));
        }
        // Row `i` of the state, and the value it carries (a scalar is
        // carried as a broadcast row).
        let unpack = |bb: &mut Builder, i: usize, ty: &Type| -> Result<(VarId, VarId), String> {
            if k == 1 {
                return Ok((s, s));
            }
            let row = bb
                .push("", Op::Index(i as u64), &[s], None)
                .map_err(|e| e.0)?;
            if bb.ty(row) == ty {
                Ok((row, row))
            } else {
                Ok((
                    row,
                    bb.push("", Op::Index(0), &[row], None).map_err(|e| e.0)?,
                ))
            }
        };
        let mut capture_rows = Vec::new();
        let built = (|| -> Result<Function, String> {
            for (i, (h, t)) in holders.iter().zip(&leaf_tys).enumerate() {
                map.insert(*h, unpack(&mut bb, i, t)?.1);
            }
            for (j, c) in captures.iter().enumerate() {
                let t = self.b.ty(*c).clone();
                let (row, value) = unpack(&mut bb, leaves.len() + j, &t)?;
                map.insert(*c, value);
                capture_rows.push(row);
            }
            for (st, name, ty) in &step_stmts {
                let args: Vec<VarId> = st.args.iter().map(|a| map[a]).collect();
                let op = st.op.map_loop(|l| l - lid as u32);
                let hint = if name.chars().all(|c| c.is_ascii_digit() || c == '.') {
                    ""
                } else {
                    name
                };
                let v = bb.push(hint, op, &args, Some(ty)).map_err(|e| e.0)?;
                map.insert(st.var, v);
            }
            let mut outs = Vec::new();
            for l in &next_leaves {
                let v = match l {
                    Val::Var(v) => map[v],
                    Val::Const(x) => bb.constant(leaf_ty.dtype, *x),
                    _ => unreachable!("checked above"),
                };
                outs.push(bb.broadcast_to(v, &leaf_ty).map_err(|e| e.0)?);
            }
            outs.extend(capture_rows.iter().copied());
            let next = bb.pack_rows(&outs, &packed_ty).map_err(|e| e.0)?;
            Ok(bb.finish(vec![next]))
        })();
        let body_fn = match built {
            Ok(f) => f,
            Err(e) => return Some(self.bug(format!("lowering a loop: {e}"))),
        };
        // The statements this step emitted were removed; so were their
        // variables. Start again from here: pack, loop, unpack.
        let mut init_vars = Vec::new();
        let mut dynamic = Vec::new();
        for l in &leaves {
            dynamic.push(match l {
                Val::Var(v) => *v,
                Val::Const(x) => self.b.constant(leaf_ty.dtype, *x),
                _ => unreachable!("checked above"),
            });
        }
        dynamic.extend(captures.iter().copied());
        for v in dynamic {
            init_vars.push(if *self.b.ty(v) == leaf_ty {
                v
            } else {
                match self.push_plain("", Op::Bcast, &[v], Some(&leaf_ty)) {
                    Val::Var(v) => v,
                    _ => return Some(Val::Err),
                }
            });
        }
        let id = self.b.add_loop(Loop {
            count,
            body: body_fn,
            vjp: None,
        });
        let packed = match self.b.pack_rows(&init_vars, &packed_ty) {
            Ok(p) => p,
            Err(e) => return Some(self.bug(format!("lowering a loop: {}", e.0))),
        };
        let hint = hints.first().copied().unwrap_or("");
        let ins: Vec<VarId> = std::iter::once(packed)
            .chain(seq.map(|(xs, _)| xs))
            .collect();
        let Val::Var(last) = self.push_plain(hint, Op::Loop(id, seq.is_some()), &ins, None) else {
            return Some(Val::Err);
        };
        let mut finals = Vec::new();
        for (i, t) in leaf_tys.iter().enumerate() {
            let row = if k == 1 {
                Val::Var(last)
            } else {
                self.push_plain("", Op::Index(i as u64), &[last], None)
            };
            finals.push(match row {
                Val::Var(r) if *self.b.ty(r) != *t => self.push_plain("", Op::Index(0), &[r], None),
                other => other,
            });
        }
        let mut it = finals.into_iter();
        Some(rebuild_leaves(state, &mut it))
    }

    /// Why `next` cannot follow `prev` as an iteration state, if it cannot.
    fn state_change(&self, prev: &Val, next: &Val) -> Option<String> {
        match (prev, next) {
            (Val::Err, _) | (_, Val::Err) => None,
            (Val::Tuple(a), Val::Tuple(b)) if a.len() == b.len() => {
                a.iter().zip(b).find_map(|(x, y)| self.state_change(x, y))
            }
            (Val::Var(a), Val::Var(b)) if self.ty(*a) != self.ty(*b) => {
                Some(format!("it goes from {} to {}", self.ty(*a), self.ty(*b)))
            }
            (
                Val::Var(_) | Val::Const(_) | Val::Int(_),
                Val::Var(_) | Val::Const(_) | Val::Int(_),
            ) => None,
            (Val::Bool(_) | Val::Mask(_), Val::Bool(_) | Val::Mask(_)) => None,
            (a, b) => Some(format!(
                "it goes from {} to {}",
                self.describe(a),
                self.describe(b)
            )),
        }
    }

    /// Bind a `let`/lambda pattern to a value; false after reporting a mismatch.
    fn bind_pattern(&mut self, pattern: &Pattern, v: Val, value_span: Span) -> bool {
        match pattern {
            Pattern::Name(id) => {
                self.env.push((id.name.clone(), v));
                true
            }
            Pattern::Tuple(ids, span) => {
                let vals = match v {
                    Val::Tuple(vs) if vs.len() == ids.len() => vs,
                    Val::Err => vec![Val::Err; ids.len()],
                    other => {
                        let got = match &other {
                            Val::Tuple(vs) => plural(vs.len(), "value"),
                            _ => "a single value".to_string(),
                        };
                        self.error(
                            Diagnostic::new(
                                *span,
                                format!(
                                    "this pattern takes apart {}, but the value is {got}",
                                    plural(ids.len(), "value")
                                ),
                            )
                            .with_label(
                                value_span,
                                format!("this has type {}", self.describe(&other)),
                            ),
                        );
                        for id in ids {
                            self.env.push((id.name.clone(), Val::Err));
                        }
                        return false;
                    }
                };
                for (id, v) in ids.iter().zip(vals) {
                    self.env.push((id.name.clone(), v));
                }
                true
            }
        }
    }

    fn inline(
        &mut self,
        callee: &Function,
        args: &[VarId],
        subst: &HashMap<String, Dim>,
        hints: &[&str],
        span: Span,
    ) -> Val {
        if self.b.function().stmts.len() + callee.stmts.len() > MAX_STMTS {
            if !self.too_large {
                self.too_large = true;
                let name = self.b.function().name.clone();
                self.error(Diagnostic::new(
                    span,
                    format!("`{name}` is too large after inlining calls (more than {MAX_STMTS} operations)"),
                ));
            }
            return Val::Err;
        }
        // A callee size `N-k` must stay non-negative at a literal size.
        for v in &callee.vars {
            for d in &v.ty.shape {
                if subst_dim(d, subst).is_none() {
                    self.error(Diagnostic::new(
                        span,
                        format!(
                            "`{}` uses arrays of length {d}, which is negative at the sizes of this call",
                            callee.name
                        ),
                    ));
                    return Val::Err;
                }
            }
        }
        // The callee's loops join the caller's, renumbered, their types at
        // the sizes of this call.
        let offset = self.b.function().loops.len() as u32;
        if !callee.loops.is_empty() && self.batch.is_some() {
            self.error(Diagnostic::new(
                span,
                format!("`{}` runs a loop (a long `iterate`), which cannot be called inside `tabulate` yet", callee.name),
            ));
            return Val::Err;
        }
        let sizes = self.b.function().size_params.clone();
        for l in &callee.loops {
            let Some(count) = subst_dim(&l.count, subst) else {
                return self.bug(format!("inlining `{}`: a loop count", callee.name));
            };
            self.b.add_loop(Loop {
                count,
                body: subst_function(&l.body, subst, &sizes),
                vjp: l.vjp.as_ref().map(|v| subst_function(v, subst, &sizes)),
            });
        }
        let renumber = |op: Op| op.map_loop(|l| l + offset);
        let mut map: Vec<Option<VarId>> = vec![None; callee.vars.len()];
        for (p, a) in callee.params.iter().zip(args) {
            if let Some(slot) = map.get_mut(p.var.index()) {
                *slot = Some(*a);
            }
        }
        for s in &callee.stmts {
            let mut xs = Vec::new();
            for a in &s.args {
                match map.get(a.index()).copied().flatten() {
                    Some(x) => xs.push(x),
                    None => {
                        return self.bug(format!("inlining `{}`: undefined value", callee.name))
                    }
                }
            }
            let Some(info) = callee.vars.get(s.var.index()) else {
                return self.bug(format!("inlining `{}`: bad variable", callee.name));
            };
            let ty = subst_type(&info.ty, subst);
            let hint = callee
                .rets
                .iter()
                .position(|r| *r == s.var)
                .and_then(|k| hints.get(k).copied())
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| base_name(&info.name));
            let Val::Var(nv) = self.push(hint, renumber(s.op), &xs, Some(&ty)) else {
                return Val::Err;
            };
            if self.ty(nv) != ty {
                return self.bug(format!(
                    "inlining `{}`: %{} should be {ty}",
                    callee.name, info.name
                ));
            }
            if let Some(slot) = map.get_mut(s.var.index()) {
                *slot = Some(nv);
            }
        }
        let mut rets = Vec::new();
        for r in &callee.rets {
            match map.get(r.index()).copied().flatten() {
                Some(x) => rets.push(Val::Var(x)),
                None => return self.bug(format!("inlining `{}`: undefined result", callee.name)),
            }
        }
        if rets.len() == 1 {
            rets.pop().unwrap_or(Val::Err)
        } else {
            Val::Tuple(rets)
        }
    }
}

/// A loop body or VJP of an inlined callee at the sizes of the call: its
/// types substituted, its size parameters the caller's.
fn subst_function(f: &Function, subst: &HashMap<String, Dim>, sizes: &[String]) -> Function {
    let mut g = f.clone();
    g.size_params = sizes.to_vec();
    for v in &mut g.vars {
        v.ty = subst_type(&v.ty, subst);
    }
    for l in &mut g.loops {
        l.body = subst_function(&l.body, subst, sizes);
        l.vjp = l.vjp.as_ref().map(|v| subst_function(v, subst, sizes));
    }
    g
}

fn subst_type(t: &Type, subst: &HashMap<String, Dim>) -> Type {
    Type::array(
        t.dtype,
        t.shape
            .iter()
            .map(|d| subst_dim(d, subst).unwrap_or(Dim::Lit(0)))
            .collect(),
    )
}

/// A callee's dimension in the caller's terms (None if `N-k` goes negative).
fn subst_dim(d: &Dim, subst: &HashMap<String, Dim>) -> Option<Dim> {
    match d {
        Dim::Lit(_) => Some(d.clone()),
        Dim::Param(p) => Some(subst.get(p).cloned().unwrap_or_else(|| d.clone())),
        Dim::Sub(p, k) => match subst.get(p) {
            Some(b) => b.minus(*k),
            None => Some(d.clone()),
        },
        Dim::Rows(p, k) => match subst.get(p) {
            Some(Dim::Lit(n)) => Some(Dim::Lit(n.div_ceil((*k).max(1)) + 1)),
            Some(Dim::Param(q)) => Some(Dim::Rows(q.clone(), *k)),
            Some(_) => None,
            None => Some(d.clone()),
        },
    }
}

#[cfg(test)]
mod tests {
    use crate::lang::interp::run;
    use crate::lang::value::Value;
    use crate::{Error, Program};

    const SEED: &str = "fn loss[N](w: f32[N], x: f32[N], y: f32) -> f32 {
  let pred = +/(w .* x)
  let err = pred - y
  err * err
}

@grad(w)
fn dloss_dw[N](w: f32[N], x: f32[N], y: f32) -> f32[N] = loss(w, x, y)
";

    fn prog(src: &str) -> Program {
        match Program::parse(src) {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        }
    }

    fn err(src: &str) -> String {
        match Program::parse(src) {
            Ok(_) => panic!("expected an error"),
            Err(e) => e.to_string(),
        }
    }

    fn run1(p: &Program, f: &str, args: &[&Value]) -> Vec<Value> {
        run(p.ir(f).unwrap(), args).unwrap()
    }

    #[test]
    fn seed_lowers_and_runs() {
        let p = prog(SEED);
        assert_eq!(p.function_names(), vec!["loss", "dloss_dw"]);
        assert_eq!(
            p.ir("loss").unwrap().to_string(),
            "fn loss[N](%w: f32[N], %x: f32[N], %y: f32) -> f32 {
  %0: f32[N] = mul %w %x
  %pred: f32 = sum %0
  %err: f32 = sub %pred %y
  %1: f32 = mul %err %err
  ret %1
}
"
        );
        let w = Value::f32(&[1.0, 2.0, 3.0]);
        let x = Value::f32(&[4.0, 5.0, 6.0]);
        let y = Value::scalar(crate::lang::types::DType::F32, 0.5);
        let l = run1(&p, "loss", &[&w, &x, &y]);
        assert_eq!(l[0].as_scalar(), 31.5 * 31.5);
        let g = run1(&p, "dloss_dw", &[&w, &x, &y]);
        assert_eq!(g[0].data, vec![252.0, 315.0, 378.0]);
        let spec = p.grad_spec("dloss_dw").unwrap();
        assert_eq!(spec.wrt, vec![0]);
        assert_eq!(spec.primal.params.len(), 3);
        assert!(p.grad_spec("loss").is_none());
        let s = p.param_span("dloss_dw", 1).unwrap();
        assert_eq!(&SEED[s.start as usize..s.end as usize], "x: f32[N]");
        assert!(matches!(p.ir("nope"), Err(Error::Usage(m)) if m.contains("`loss`, `dloss_dw`")));
    }

    #[test]
    fn scalars_broadcast() {
        let p = prog("fn f[N](x: f64[N], s: f64) -> f64[N] = s * x + 1");
        let ir = p.ir("f").unwrap();
        assert_eq!(ir.op_counts().get("bcast"), Some(&2), "{ir}");
        let r = run1(
            &p,
            "f",
            &[
                &Value::f64(&[1.0, 2.0]),
                &Value::scalar(crate::lang::types::DType::F64, 3.0),
            ],
        );
        assert_eq!(r[0].data, vec![4.0, 7.0]);
    }

    #[test]
    fn literals_take_the_context_dtype() {
        // `2 * 3` folds; the f32 operand gives the dtype.
        let p = prog("fn f(x: f32) -> f32 {\n let k = 2 * 3\n x * k - 0.5\n}");
        let ir = p.ir("f").unwrap().to_string();
        assert!(ir.contains("f32 = const 6.0"), "{ir}");
        assert!(ir.contains("f32 = const 0.5"), "{ir}");
        // A literal body takes the declared return type (broadcast).
        let p = prog("fn ones[N](x: f64[N]) -> f64[N] = 1");
        let r = run1(&p, "ones", &[&Value::f64(&[5.0, 5.0])]);
        assert_eq!(r[0].data, vec![1.0, 1.0]);
        // A literal argument takes the parameter's type.
        let p = prog("fn sq(x: f32) -> f32 = x * x\nfn g(y: f32) -> f32 = sq(3) + y");
        assert!(p.ir("g").unwrap().to_string().contains("f32 = const 3.0"));
        // Math functions of literals fold too.
        let p = prog("fn h(x: f64) -> f64 = x + exp(0)");
        assert!(p.ir("h").unwrap().to_string().contains("f64 = const 1.0"));
        // A multiplication by an exact 1 is dropped (exact in IEEE).
        let p = prog("fn h(x: f64) -> f64 = x * exp(0) + 1 * x / 1");
        let ir = p.ir("h").unwrap().to_string();
        assert!(!ir.contains("mul") && !ir.contains("div"), "{ir}");
    }

    #[test]
    fn calls_inline_with_size_substitution() {
        let p = prog(
            "fn dot[K](a: f64[K], b: f64[K]) -> f64 = +/(a .* b)
             fn norm2[M](v: f64[M]) -> f64 {
               let d = dot(v, v)
               d
             }
             fn fixed(v: f64[3]) -> f64 = norm2(v)",
        );
        let ir = p.ir("norm2").unwrap();
        assert_eq!(ir.ty(ir.stmts[0].var).to_string(), "f64[M]");
        assert!(ir.vars.iter().any(|v| v.name == "d"));
        let ir = p.ir("fixed").unwrap();
        assert_eq!(ir.ty(ir.stmts[0].var).to_string(), "f64[3]");
        let r = run1(&p, "fixed", &[&Value::f64(&[1.0, 2.0, 2.0])]);
        assert_eq!(r[0].as_scalar(), 9.0);
    }

    #[test]
    fn grad_of_two_params_returns_a_tuple() {
        let p = prog(
            "fn f[N](a: f64[N], b: f64) -> f64 = +/(a .* a) * b
             @grad(a, b)
             fn g[N](a: f64[N], b: f64) -> (f64[N], f64) = f(a, b)
             fn use[N](a: f64[N], b: f64) -> f64 {
               let (da, db) = g(a, b)
               +/da + db
             }",
        );
        let a = Value::f64(&[1.0, 2.0]);
        let b = Value::scalar(crate::lang::types::DType::F64, 3.0);
        let r = run1(&p, "g", &[&a, &b]);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].data, vec![6.0, 12.0]);
        assert_eq!(r[1].as_scalar(), 5.0);
        let u = run1(&p, "use", &[&a, &b]);
        assert_eq!(u[0].as_scalar(), 23.0);
    }

    #[test]
    fn higher_derivatives_through_grad_functions() {
        let p = prog(
            "fn cube(x: f64) -> f64 = x * x * x
             @grad(x)
             fn d1(x: f64) -> f64 = cube(x)
             @grad(x)
             fn d2(x: f64) -> f64 = d1(x)",
        );
        let x = Value::scalar(crate::lang::types::DType::F64, 2.0);
        assert_eq!(run1(&p, "d1", &[&x])[0].as_scalar(), 12.0);
        assert_eq!(run1(&p, "d2", &[&x])[0].as_scalar(), 12.0);
    }

    #[test]
    fn use_before_definition_and_blocks() {
        let p = prog(
            "fn a(x: f64) -> f64 = b(x) + { let t = sin(x); t * t }
             fn b(x: f64) -> f64 = tanh(x) / sqrt(x)",
        );
        assert!(p.ir("a").is_ok());
    }

    #[test]
    fn errors_are_all_reported() {
        let e = err("fn f(x: f32) -> f32 {\n let a = zz\n let b = x .* qq\n x\n}");
        assert!(
            e.contains("unknown name `zz`") && e.contains("unknown name `qq`"),
            "{e}"
        );
        let e = err("fn f[N, M](x: f32[N], y: f32[M]) -> f32[N] = x .* y");
        assert!(e.contains("shape mismatch"), "{e}");
        let e = err("fn f(x: f32, y: f64) -> f32 = x + y");
        assert!(e.contains("mixes element types f32 and f64"), "{e}");
        let e = err("fn f(x: f32) -> f32 = g(x)\nfn g(x: f32) -> f32 = f(x)");
        assert!(e.contains("calls itself through"), "{e}");
        let e = err("fn f[N](x: f32) -> f32 = x");
        assert!(e.contains("cannot be inferred"), "{e}");
        let e = err("fn sin(x: f32) -> f32 = x");
        assert!(e.contains("builtin"), "{e}");
        let e = err("fn f(x: f32) -> f32 = x\nfn f(x: f32) -> f32 = x");
        assert!(e.contains("defined twice"), "{e}");
        let e = err("@grad(x) @grad(x)\nfn f(x: f32) -> f32 = x");
        assert!(e.contains("more than one attribute"), "{e}");
        let e = err("fn f[N](x: f32[N]) -> f32 = +/x\nfn g(y: f32[3], z: f32[4]) -> f32 = f(y) + f(z) + f(1)");
        assert!(e.contains("cannot infer the shape"), "{e}");
        let e = err(
            "fn f(x: f32) -> (f32, f32) = (x, x)\nfn g(x: f32) -> f32 { let (a, b, c) = f(x)\n a }",
        );
        assert!(
            e.contains("takes apart 3 values, but the value is 2 values"),
            "{e}"
        );
    }
}
