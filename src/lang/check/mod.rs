//! Name resolution, type checking and lowering to IR.
//!
//! Checking happens in three passes over a parsed [`Module`] and the
//! prelude's functions it calls (see `Scopes`):
//!
//! 1. **Call graph**: the calls in each body, from the program's functions
//!    to the prelude's they reach; the prelude's other functions are left
//!    out from here on, so an unused one costs nothing.
//! 2. **Signatures**: every function's size parameters, parameter and return
//!    types and attributes are resolved, so functions may be used before
//!    their definition. Calls are inlined, so the call graph must be
//!    acyclic (through templates, see `graph::through_templates`); each
//!    cycle is reported at a call site, and the functions are put in
//!    callee-first order.
//! 3. **Bodies**: each function body is type-checked and lowered to an IR
//!    [`Function`] in one walk. A call is inlined: the callee's IR is copied
//!    with its size parameters replaced by the caller's dimensions. A
//!    `@grad` function's body is lowered as a primal function and
//!    differentiated with [`reverse`]; callers inline the gradient. In an
//!    ordinary function, a call of another ordinary function is kept as a
//!    call and inlined when the IR is asked for ([`expand`], see `defer`),
//!    so that a chain of calls is checked in linear time.
//!
//! Number literals have no dtype of their own: they are kept as constants
//! (constant sub-expressions are folded in `f64`) until they meet a typed
//! operand, a parameter type or a declared return type, which gives them a
//! dtype and, if needed, a broadcast to an array shape.
//!
//! Errors never stop the walk: an erroneous sub-expression has the value
//! `Val::Err`, which silences errors that would only be consequences.
//!
//! [`reverse`]: crate::differentiate::reverse::reverse

mod arrays;
mod body;
mod builtins;
mod calls;
mod composite;
mod counted_loop;
mod custom;
mod defer;
mod derive;
mod emit;
mod env;
mod expr;
mod fn_calls;
mod graph;
mod loops;
mod matching;
mod random;
mod signature;
mod sizes;
mod stacks;
mod tabulate;
mod unknown;

use super::ast::*;
use super::prelude;
use crate::error::span::{Diagnostic, Span};
use crate::ir::memory::Budget;
use crate::ir::transform::Transforms;
use crate::ir::{Builder, Function, VarId};
use crate::ops::Op;
use crate::types::value::Value;
use crate::types::{DType, Dim, Type};
use std::collections::{HashMap, HashSet};

use builtins::is_reserved;
pub use builtins::{ARRAY_BUILTINS, BUILTINS2, CONVERSIONS, MATRIX_BUILTINS, SPECIAL_FORMS};
pub use calls::MAX_SPECIALIZATION_DEPTH;
pub use composite::COMPOSITES;
pub(crate) use defer::expand;
pub use derive::derived_name;
use graph::{callee_first_order, collect_calls, through_templates};
pub use loops::UNROLL_STMTS;
use signature::signature;

/// The largest function (in IR statements, after inlining) we build.
pub const MAX_STMTS: usize = 1_000_000;

/// The memory compiling a program takes per IR statement the checker
/// counts (every function's own, and a function's callees inlined), held
/// while it is checked, differentiated, optimized and compiled. Measured
/// on a chain of 20,000 scalar `let`s and its gradient (120,000
/// statements counted): 2 KiB each through `egrad check`, 8 KiB through
/// `egrad run` of the gradient; twice that is kept as a margin. A program
/// whose statements, at this price, do not fit the memory limit (or the
/// address space left) is a limit error while it is checked: compiling it
/// would abort on a failed allocation under an address-space limit.
pub const COMPILE_BYTES_PER_STMT: u64 = 16 << 10;

/// Fold an op on untyped numbers with the reference evaluator in f64 (the
/// same semantics the op has at run time).
fn fold(op: Op, xs: &[f64]) -> f64 {
    let vals: Vec<Value> = xs.iter().map(|x| Value::scalar(DType::F64, *x)).collect();
    let refs: Vec<&Value> = vals.iter().collect();
    op.eval(&refs, DType::F64, &[]).as_scalar()
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
    /// For `@jvp` functions: what was pushed forward.
    pub jvp: Option<JvpSpec>,
    /// The calls kept as calls: `ir` is complete only without them
    /// ([`expand`] gives it then).
    pub(crate) calls: defer::Calls,
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
    /// `@custom_vjp(rule)` (`true`) and `@custom_jvp(rule)`: the rules the
    /// function brings, by name.
    custom: Vec<(bool, Ident)>,
    /// `@value_and_grad`: the function returns the value, then the gradients.
    value_too: bool,
    /// `@jvp(p, ...)`: (differentiated parameter, its tangent parameter).
    jvp: Option<Vec<(usize, usize)>>,
    /// Element-type parameters (`fn f[T, N](x: T[N])`) not yet fixed; the
    /// function is specialized where it is called, from its arguments.
    generic: Vec<String>,
    /// The bounds on element-type parameters (`T: Float`).
    bounds: Vec<(String, Bound)>,
}

impl Sig {
    /// Is parameter `k` a count: a run-time `i64` number that is the size
    /// parameter of its name (not one declared `data`)?
    fn is_count(&self, k: usize) -> bool {
        let (name, ty, _) = &self.params[k];
        ty.dtype == DType::I64 && ty.is_scalar() && self.size_params.contains(name)
    }
}

/// A bound on an element-type parameter (`fn f[T: Float, N]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bound {
    /// `i64`, `f32` or `f64`.
    Numeric,
    /// `f32` or `f64`.
    Float,
    /// `f32` or `f64`: the types with derivatives.
    Differentiable,
}

impl Bound {
    const ALL: [(&'static str, Bound); 3] = [
        ("Numeric", Bound::Numeric),
        ("Float", Bound::Float),
        ("Differentiable", Bound::Differentiable),
    ];

    fn name(self) -> &'static str {
        Bound::ALL
            .iter()
            .find(|(_, b)| *b == self)
            .map_or("", |(n, _)| n)
    }

    fn admits(self, d: DType) -> bool {
        match self {
            Bound::Numeric => matches!(d, DType::I64 | DType::F32 | DType::F64),
            Bound::Float | Bound::Differentiable => matches!(d, DType::F32 | DType::F64),
        }
    }

    /// What the bound admits, in words.
    fn meaning(self) -> &'static str {
        match self {
            Bound::Numeric => "i64, f32 or f64",
            Bound::Float => "f32 or f64",
            Bound::Differentiable => "f32 or f64, a type with derivatives",
        }
    }
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

/// What a `@grad` function differentiates.
#[derive(Clone, Debug)]
pub struct GradSpec {
    /// The body lowered as a function of the same parameters (one scalar result).
    pub primal: Function,
    /// Indices of the parameters differentiated, in `@grad(...)` order.
    pub wrt: Vec<usize>,
}

/// What a `@jvp` function pushes forward.
#[derive(Clone, Debug)]
pub struct JvpSpec {
    /// The body lowered as a function of the same parameters (tangents
    /// included, unused): its results are what the tangents are of.
    pub f: Function,
    /// (differentiated parameter, its tangent parameter), IR indices.
    pub pairs: Vec<(usize, usize)>,
}

/// Which function a called name means, per item: the program's items
/// (`items[..first_prelude]`) call their own functions, then the prelude's
/// not named with [`prelude::PRIVATE`] (a program's function shadows the
/// prelude's of its name); the prelude's items call the prelude's only.
struct Scopes {
    program: HashMap<String, usize>,
    prelude: HashMap<String, usize>,
    first_prelude: usize,
    /// The most IR statements a function may have after unrolling and
    /// inlining ([`MAX_STMTS`] unless the caller sets another).
    max_stmts: usize,
    /// The memory compiling may take ([`COMPILE_BYTES_PER_STMT`]).
    memory: Budget,
}

impl Scopes {
    fn is_prelude(&self, item: usize) -> bool {
        item >= self.first_prelude
    }

    /// The names the body of `item` may call.
    fn of(&self, item: usize) -> &HashMap<String, usize> {
        if self.is_prelude(item) {
            &self.prelude
        } else {
            &self.program
        }
    }
}

/// Check and lower every function of `module`, with the functions of
/// `prelude` (see [`crate::lang::prelude`]; `&[]` for none) callable from
/// it. Returns the module's functions by name, in source order.
/// `transforms` answers the transform attributes (`@grad`, `@jvp`, ...) as
/// each such function is lowered.
pub fn check(
    module: &Module,
    prelude: &[FnDef],
    transforms: &dyn Transforms,
    max_stmts: usize,
) -> Result<Checked, CheckError> {
    check_with(module, prelude, transforms, max_stmts, true)
}

/// [`check`]; with `defer_calls` false, every call is inlined as it is
/// checked (the reference the calls kept as calls are tested against).
pub(crate) fn check_with(
    module: &Module,
    prelude: &[FnDef],
    transforms: &dyn Transforms,
    max_stmts: usize,
    defer_calls: bool,
) -> Result<Checked, CheckError> {
    let mut errs: Vec<Diagnostic> = Vec::new();
    let (expanded, failed) = derive::expand(module, &mut errs);
    let module = &expanded;
    let items: Vec<&FnDef> = module.items.iter().chain(prelude).collect();
    let items = items.as_slice();
    let n = items.len();
    let first_prelude = module.items.len();

    // Names → first definition.
    let (scopes, mut defined) = name_scopes(module, prelude, max_stmts, &mut errs);

    // Pass 1: the call graph, from the program's functions to the
    // prelude's they reach (the others are not looked at again).
    let calls = call_graph(items, &scopes, &mut defined, &mut errs);

    // Pass 2: signatures.
    let sigs: Vec<Option<Sig>> = items
        .iter()
        .enumerate()
        .map(|(i, f)| {
            if defined[i] && !failed.contains(&i) {
                signature(f, &mut errs)
            } else {
                None
            }
        })
        .collect();

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
    let order = callee_first_order(items, &order_calls, &defined, &mut errs);

    // Pass 3: bodies.
    let mut lowered: Vec<Option<CheckedFn>> = vec![None; n];
    let mut internal: Option<String> = None;
    let mut templates = Vec::new();
    let (mut held, mut out_of_memory) = (0, false);
    for i in order {
        let Some(sig) = &sigs[i] else { continue };
        if out_of_memory {
            continue;
        }
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
        // An ordinary function keeps its calls as calls ([`defer`]),
        // unless it gave up a lowering attempt: then it is lowered again.
        let plain = sig.grad.is_none() && sig.jvp.is_none() && sig.custom.is_empty();
        let mut cx = FnCx::new(transforms, &sigs, &lowered, &scopes, items, i, sig);
        cx.defer = defer_calls && plain;
        if cx.defer {
            cx.b.record_origins();
        }
        cx.held_before = held;
        let mut result = cx.lower_fn(items[i], sig, &[]);
        if cx.forgot && result.as_ref().is_some_and(CheckedFn::has_calls) {
            cx = FnCx::new(transforms, &sigs, &lowered, &scopes, items, i, sig);
            cx.held_before = held;
            result = cx.lower_fn(items[i], sig, &[]);
        }
        held += 1 + result.as_ref().map_or(0, |c| c.ir.stmts.len());
        // Out of memory: the functions after it are not checked.
        out_of_memory |= cx.out_of_memory;
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
    // The program's functions only (the prelude's are all templates,
    // lowered where they are called).
    templates.sort_by_key(|t| t.0);
    for (i, names) in templates {
        if i < first_prelude {
            out.templates.push((items[i].name.name.clone(), names));
        }
    }
    // A call kept as a call names its callee by its place in `functions`.
    let mut place = vec![usize::MAX; n];
    for (i, (f, l)) in module.items.iter().zip(lowered).enumerate() {
        match l {
            Some(c) => {
                place[i] = out.functions.len();
                out.functions.push((f.name.name.clone(), c));
            }
            None if sigs[i].as_ref().is_some_and(Sig::is_template) => {}
            None => {
                return Err(CheckError::Internal(format!(
                    "`{}` was not lowered but no error was reported",
                    f.name.name
                )))
            }
        }
    }
    for (_, c) in &mut out.functions {
        for call in &mut c.calls.calls {
            call.callee = place.get(call.callee).copied().unwrap_or(usize::MAX);
        }
    }
    Ok(out)
}

/// Which function each called name means ([`Scopes`]): the program's
/// functions of `module` (a builtin's name, or a second definition, is
/// reported), then the `prelude`'s. Also whether each item (the program's,
/// then the prelude's) is defined (the reported ones are not).
fn name_scopes(
    module: &Module,
    prelude: &[FnDef],
    max_stmts: usize,
    errs: &mut Vec<Diagnostic>,
) -> (Scopes, Vec<bool>) {
    let n = module.items.len() + prelude.len();
    let first_prelude = module.items.len();
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
    let mut in_prelude: HashMap<String, usize> = HashMap::new();
    for (i, f) in prelude.iter().enumerate() {
        let name = &f.name.name;
        in_prelude.entry(name.clone()).or_insert(first_prelude + i);
        if !name.starts_with(prelude::PRIVATE) {
            by_name.entry(name.clone()).or_insert(first_prelude + i);
        }
    }
    let scopes = Scopes {
        program: by_name,
        prelude: in_prelude,
        first_prelude,
        max_stmts,
        memory: crate::ir::memory::budget(),
    };
    (scopes, defined)
}

/// The calls in each body of `items` (with their spans), from the
/// program's functions to the prelude's they reach; a derivative rule
/// (`@custom_vjp(rule)`) counts as a call, so that it is lowered first.
/// The items not reached are no longer `defined`.
fn call_graph(
    items: &[&FnDef],
    scopes: &Scopes,
    defined: &mut [bool],
    errs: &mut Vec<Diagnostic>,
) -> Vec<Vec<(usize, Span)>> {
    let n = items.len();
    let first_prelude = scopes.first_prelude;
    let mut calls: Vec<Vec<(usize, Span)>> = vec![Vec::new(); n];
    let mut reached: Vec<bool> = (0..n).map(|i| i < first_prelude).collect();
    let mut todo: Vec<usize> = (0..first_prelude).collect();
    while let Some(i) = todo.pop() {
        if !defined[i] {
            continue;
        }
        collect_calls(&items[i].body, scopes.of(i), &mut calls[i]);
        // A function's derivative rules are lowered before it.
        for a in &items[i].attrs {
            let [rule] = &a.args[..] else { continue };
            if !signature::CUSTOM_ATTRS.contains(&a.name.name.as_str()) {
                continue;
            }
            match scopes.of(i).get(&rule.name) {
                Some(&j) => calls[i].push((j, rule.span)),
                None => errs.push(Diagnostic::new(
                    rule.span,
                    format!(
                        "`@{}` names `{}`, but there is no function of that name",
                        a.name.name, rule.name
                    ),
                )),
            }
        }
        for &(c, _) in &calls[i] {
            if !reached[c] {
                reached[c] = true;
                todo.push(c);
            }
        }
    }
    for (d, r) in defined.iter_mut().zip(&reached) {
        *d &= *r;
    }
    calls
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

/// Lowering state for one function body.
struct FnCx<'a> {
    /// Answers `@grad`, `@value_and_grad` and `@jvp` ([`Transforms`]).
    transforms: &'a dyn Transforms,
    sigs: &'a [Option<Sig>],
    lowered: &'a [Option<CheckedFn>],
    scopes: &'a Scopes,
    /// The names this body may call (its item's scope).
    by_name: &'a HashMap<String, usize>,
    /// The program's functions, then the prelude's.
    items: &'a [&'a FnDef],
    /// The item whose body this is (a specialized callee's, for a call of
    /// a template).
    item: usize,
    sizes: &'a [String],
    b: Builder,
    env: env::Env,
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
    /// The length of the innermost `tabulate` itself: `L` of `batch` for
    /// one `tabulate`; inside nested ones, `batch` is the product of the
    /// enclosing lengths and this one's (the stacks are flat, row-major:
    /// row `i * M + j` for indices `i` outside and `j` inside).
    own_len: Option<Dim>,
    /// The enclosing `tabulate`s of a nested one, outermost first.
    outer: Vec<Level>,
    /// Values of the enclosing level lifted into this one (each row
    /// repeated once per index of this `tabulate`), by the value lifted.
    lifted: HashMap<VarId, VarId>,
    /// Gathers pushed while lowering, by result: the statement's position
    /// (checked before use, as statements are truncated and redone when a
    /// loop's step is lowered twice). Indexing a gathered stack reads the
    /// gathered array directly.
    gathered: HashMap<VarId, usize>,
    /// Lifted copies, by copy: the value of the enclosing level lifted.
    lift_of: HashMap<VarId, VarId>,
    /// The index of `tabulate` as a number (`iota + off`), by variable.
    index_numbers: HashMap<VarId, i64>,
    /// Selections between two numbers under a condition on integers
    /// (`if k > 0 { 0.5 } else { 1.5 }`), made `f64` like a literal
    /// without context: the condition and the two numbers, so that where
    /// the selection meets an `f32` value it is made again in `f32`.
    picks: HashMap<VarId, (VarId, f64, f64)>,
    /// Whether calls may be kept as calls in this body ([`defer`]).
    defer: bool,
    /// Inside a counted loop's step (whose statements are moved into the
    /// loop's body): calls are inlined.
    no_defer: usize,
    /// The calls kept as calls, in order.
    deferred: Vec<defer::Deferred>,
    /// The statements of the calls kept as calls, inlined.
    inlined_len: usize,
    /// Whether a lowering attempt was given up ([`FnCx::forget`]).
    forgot: bool,
    /// The statements the functions checked before this one hold (each
    /// counted one more), for the memory they take.
    held_before: usize,
    /// Whether the program stopped fitting the memory compiling may take
    /// (reported, see `FnCx::fits_memory`).
    out_of_memory: bool,
}

/// An enclosing `tabulate`'s lowering state, kept while a nested one is
/// lowered (see [`FnCx::outer`]).
struct Level {
    batch: (Dim, Span),
    own_len: Dim,
    batched: HashSet<VarId>,
    lifted: HashMap<VarId, VarId>,
}

/// The innermost result expression (where a type error of a body shows).
fn result_expr(e: &Expr) -> &Expr {
    let mut e = e;
    while let ExprKind::Block(b) = &e.kind {
        e = &b.result;
    }
    e
}
