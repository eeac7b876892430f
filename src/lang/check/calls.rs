//! Calls: argument checking, size unification, specialization of
//! templates (static or element-type parameters) and inlining of the
//! callee's IR at the caller's sizes.

use super::builtins::{builtin, builtin2, matrix_builtin};
use super::loops::with_rows;
use super::signature::signature_with;
use super::{arity_message, fold, Bound, FnCx, Sig, StaticKind, Val};
use crate::error::span::{Diagnostic, Span};
use crate::ir::{Builder, CustomRule, Function, Loop, VarId};
use crate::lang::ast::*;
use crate::lang::prelude;
use crate::ops::{kernels, Op};

/// Does the element-wise builtin `op` take integer operands? The math
/// functions whose rows say so (`abs`), `max` and `min`.
fn takes_int(op: Op) -> bool {
    match op {
        Op::Math(m) => m.takes_int(),
        _ => matches!(op, Op::Max | Op::Min),
    }
}
use crate::types::size::{Misfit, Size, Unifier};
use crate::types::{DType, Dim, Type};
use std::collections::{HashMap, HashSet};

/// How deep specializations may nest (a function with static parameters
/// calling itself, directly or not, counts one level per call).
pub const MAX_SPECIALIZATION_DEPTH: usize = 64;

/// The size parameter standing for the length of the enclosing
/// `tabulate` while a function is lowered on stacks
/// ([`FnCx::call_on_stacks`]); not a name a program can write.
const STACK_LEN: &str = "tabulate#L";

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
    pub(super) fn call(&mut self, e: &Expr, callee: &Ident, args: &[Expr], hints: &[&str]) -> Val {
        let name = callee.name.as_str();
        let hint = hints.first().copied().unwrap_or("");
        if let Some(op) = builtin(name).or_else(|| builtin2(name)) {
            let vals: Vec<Val> = args
                .iter()
                .map(|a| {
                    let v = self.lower(a, &[]);
                    let v = self.single(v, a.span);
                    self.number(v)
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
            // Integers only take some builtins (`takes_int`).
            for (v, a) in vals.iter().zip(args) {
                if let Val::Var(x) = v {
                    let t = self.ty(*x);
                    if t.dtype == DType::I64 && !takes_int(op) {
                        self.error(
                            Diagnostic::new(
                                a.span,
                                format!(
                                    "`{name}` needs floating-point operands, but this has type {t}"
                                ),
                            )
                            .with_note("convert integers with `f64(...)`"),
                        );
                        return Val::Err;
                    }
                }
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
        if name == "scan" || name == "scan_all" {
            return self.scan(e, args, hints, name == "scan_all");
        }
        if let Some(op) = matrix_builtin(name) {
            return self.matrix(e, op, name, args, hint);
        }
        if let Some(to) = super::builtins::conversion(name) {
            return self.convert(e, to, args, hint);
        }
        if name == "scatter_add" {
            return self.scatter_add(e, args, hint);
        }
        if name == "threefry" {
            return self.threefry(e, args, hint);
        }
        if name == "random_key" {
            return self.random_key(e, args);
        }
        if name == "split" {
            return self.split(e, args);
        }
        if name == "uniform" || name == "normal" {
            for a in args {
                self.lower(a, &[]);
            }
            self.error(
                Diagnostic::new(callee.span, format!("`{name}` needs the shape in brackets"))
                    .with_note(format!("write `{name}[N](key)` or `{name}[M, K](key)`: numbers of that shape, and the next key")),
            );
            return Val::Err;
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
        if name == "argmax" || name == "argmin" {
            let Some(xs) = self.array_args(e, name, args) else {
                return Val::Err;
            };
            return self.arg_extremum(e, name, xs[0], hint);
        }
        if name == "flatten" {
            let Some(xs) = self.array_args(e, name, args) else {
                return Val::Err;
            };
            return self.flatten(e, xs[0], hint);
        }
        if name == "reshape" {
            for a in args {
                self.lower(a, &[]);
            }
            self.error(
                Diagnostic::new(callee.span, "`reshape` needs the new shape in brackets")
                    .with_note("write `reshape[M, K](x)`, as `tabulate[N](...)` takes its length"),
            );
            return Val::Err;
        }
        if !self.by_name.contains_key(name) {
            if let Some(k) = kernels::kernel_id(name) {
                return self.call_kernel(e, k, name, args, hint);
            }
        }
        let Some(&fi) = self.by_name.get(name) else {
            for a in args {
                self.lower(a, &[]);
            }
            let d = if self.env.iter().any(|(k, _)| k == name) {
                Diagnostic::new(callee.span, format!("`{name}` is a value, not a function"))
            } else if self.scopes.prelude.is_empty() && prelude::exports(name) {
                Diagnostic::new(callee.span, format!("unknown function `{name}`")).with_note(
                    format!("`{name}` is the prelude's, and this program is checked without it"),
                )
            } else {
                Diagnostic::new(callee.span, format!("unknown function `{name}`"))
            };
            self.error(d);
            return Val::Err;
        };
        let mut vals: Vec<Val> = args
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
        let decl = self.items[fi];
        // A generic callee: its element types come from the arguments.
        let spec_sig;
        let generic = !sig.generic.is_empty();
        // A selection between two numbers (see `FnCx::picks`) takes the
        // parameter's float type, or the one a generic element type gets
        // from the other arguments.
        let mut known: HashMap<&str, DType> = HashMap::new();
        for (p, v) in decl.params.iter().zip(&vals) {
            if let (TypeExpr::Named { dtype, .. }, Val::Var(x)) = (&p.ty, v) {
                if let Some(d) = DType::from_name(&dtype.name) {
                    known.insert(dtype.name.as_str(), d);
                } else if !self.picks.contains_key(x) {
                    known
                        .entry(dtype.name.as_str())
                        .or_insert(self.ty(*x).dtype);
                }
            }
        }
        for (p, v) in decl.params.iter().zip(vals.iter_mut()) {
            if let (TypeExpr::Named { dtype, .. }, Val::Var(x)) = (&p.ty, &*v) {
                if let Some(y) = known
                    .get(dtype.name.as_str())
                    .and_then(|&d| self.repick(*x, d))
                {
                    *v = Val::Var(y);
                }
            }
        }
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
                if d == DType::I64 && self.scopes.is_prelude(fi) {
                    // The prelude is for real numbers (`mean` of integers
                    // would divide as integers).
                    let t = self.ty(*x);
                    self.error(
                        Diagnostic::new(
                            args[k].span,
                            format!("the prelude's `{name}` takes f32 or f64 values, but this has type {t}"),
                        )
                        .with_note("convert integers with `f64(...)`"),
                    );
                    return Val::Err;
                }
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
            for (g, bound) in &sig.bounds {
                let Some(&d) = dtypes.get(g) else { continue };
                if !bound.admits(d) {
                    let k = from[g];
                    let why = if *bound == Bound::Differentiable {
                        format!(", because `{name}` needs derivatives of its `{g}` values; {d} has none")
                    } else {
                        String::new()
                    };
                    self.error(
                        Diagnostic::new(
                            args[k].span,
                            format!(
                                "`{g}` of `{name}` must be {} ({}), but argument `{}` makes it {d}",
                                bound.name(),
                                bound.meaning(),
                                decl.params[k].name.name
                            ),
                        )
                        .with_label(
                            decl.bounds
                                .iter()
                                .find(|(n, _)| n.name == *g)
                                .map_or(decl.name.span, |(_, b)| b.span),
                            format!("the bound{why}"),
                        ),
                    );
                    return Val::Err;
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
        // A condition passed for a run-time `bool` parameter is a bool.
        let vals: Vec<Val> = vals
            .into_iter()
            .enumerate()
            .map(|(k, v)| {
                let dynamic_bool = sig.statics.get(k).copied().flatten().is_none()
                    && sig.params[k].1.dtype == DType::Bool;
                match v {
                    Val::Mask(m) if dynamic_bool => Val::Var(self.mask_as(m, DType::Bool)),
                    Val::Bool(b) if dynamic_bool => {
                        Val::Var(self.b.constant(DType::Bool, f64::from(u8::from(b))))
                    }
                    v => v,
                }
            })
            .collect();
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
        // Unify the callee's size parameters with the argument shapes
        // (plain dimensions first, then `N+1`, `2*N`, ...: `size::Unifier`).
        let mut unifier = Unifier::new();
        let mut shaped: HashMap<usize, Type> = HashMap::new();
        for (k, v) in vals.iter().enumerate() {
            if sig.statics.get(k).copied().flatten().is_some() {
                continue;
            }
            let (pname, pty, pspan) = &sig.params[k];
            if pty.dtype == DType::I64 && pty.is_scalar() {
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
                        // No parameter type names it: this binds it.
                        let _ = unifier.add(k, &[Dim::Param(pname.clone())], &[d]);
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
                Val::Const(_) | Val::Int(_) if pty.dtype != DType::Bool => continue,
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
            let fits = at.dtype == pty.dtype
                && at.rank() == pty.rank()
                && unifier.add(k, &pty.shape, &at.shape).is_ok();
            if fits {
                shaped.insert(k, at);
                continue;
            }
            ok = false;
            let want = subst_type(pty, &unifier.bound);
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
        for (k, m) in unifier.finish() {
            ok = false;
            let (pname, pty, pspan) = &sig.params[k];
            let at = shaped.get(&k).map(|t| t.to_string()).unwrap_or_default();
            let want = subst_type(pty, &unifier.bound);
            let mut d = Diagnostic::new(
                args[k].span,
                format!(
                    "argument `{pname}` of `{name}` must have type {want}, but it has type {at}"
                ),
            )
            .with_label(*pspan, format!("`{pname}` is declared here as {pty}"));
            let dim = pty
                .shape
                .get(m.axis())
                .map(|d| d.to_string())
                .unwrap_or_default();
            match &m {
                Misfit::Mismatch(_) => {}
                Misfit::Negative(_, p, v) => {
                    d = d.with_note(format!("`{p}` would be {v}, and a size cannot be negative"))
                }
                Misfit::Fraction(_, p) => {
                    d = d.with_note(format!("that length is {dim} for no whole number `{p}`"))
                }
                Misfit::Undetermined(_, p) => {
                    d = d.with_note(format!(
                        "`{p}` cannot be read from a length {dim} at these sizes"
                    ))
                }
            }
            self.error(d);
        }
        let subst = unifier.bound;
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
            if pty.dtype == DType::I64 && pty.is_scalar() {
                // Never read by the callee's statements (it gives a size).
                arg_vars.push(match v {
                    Val::Count(_, x) => *x,
                    _ => self
                        .b
                        .constant(DType::I64, v.as_static_int().unwrap_or(0) as f64),
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
                        .any(|d| d.params().iter().any(|p| !subst.contains_key(*p)));
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
                    Diagnostic::limit(
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
            let mut cx = FnCx::new(
                self.transforms,
                sigs,
                lowered,
                self.scopes,
                self.items,
                fi,
                sig,
            );
            cx.depth = self.depth + 1;
            let spec = cx.lower_fn(decl, sig, &statics);
            if self.scopes.is_prelude(fi) && !self.scopes.is_prelude(self.item) {
                // An error in the prelude's code is the program's call's.
                for d in &mut cx.errs {
                    let inner = std::mem::replace(&mut d.span, e.span);
                    d.labels
                        .insert(0, (inner, format!("in `{name}`, from the prelude")));
                }
            }
            self.errs.append(&mut cx.errs);
            if let Some(m) = cx.internal.take() {
                return self.bug(m);
            }
            return match spec {
                Some(c) if self.loops_on_stacks(&c.ir, &arg_vars) => {
                    let call = (fi, sig, &statics[..], &arg_vars[..]);
                    self.call_on_stacks(call, &subst, hints, e.span)
                }
                Some(c) => self.inline(&c.ir, &arg_vars, &subst, hints, e.span),
                None => Val::Err,
            };
        }
        let Some(callee_fn) = self.lowered.get(fi).and_then(|c| c.as_ref()) else {
            // The callee has errors of its own (already reported).
            return Val::Err;
        };
        if self.loops_on_stacks(&callee_fn.ir, &arg_vars) {
            let call = (fi, sig, &statics[..], &arg_vars[..]);
            return self.call_on_stacks(call, &subst, hints, e.span);
        }
        self.inline(&callee_fn.ir, &arg_vars, &subst, hints, e.span)
    }

    /// Whether `callee` runs a loop and some of `args` are stacks (inside
    /// `tabulate`): its IR cannot be inlined as it is (a loop over one
    /// value is not a loop over a stack), so its body is lowered again.
    fn loops_on_stacks(&self, callee: &Function, args: &[VarId]) -> bool {
        !callee.loops.is_empty() && args.iter().any(|a| self.batched.contains(a))
    }

    /// A call of function `fi` (signature `sig`, static values `statics`)
    /// that runs a loop, on `args` some of which are stacks (inside
    /// `tabulate`): its body is lowered again at this call site (as a
    /// template is) with those parameters stacks of length [`STACK_LEN`],
    /// so its loops carry stacks, then inlined with `STACK_LEN` the
    /// length of the enclosing `tabulate`.
    fn call_on_stacks(
        &mut self,
        (fi, sig, statics, args): (usize, &Sig, &[(usize, Val)], &[VarId]),
        subst: &HashMap<String, Dim>,
        hints: &[&str],
        span: Span,
    ) -> Val {
        let decl = self.items[fi];
        let name = decl.name.name.clone();
        if sig.grad.is_some() || sig.jvp.is_some() {
            self.error(
                Diagnostic::unsupported(
                    span,
                    format!("`{name}` is a derivative that runs a loop, which cannot be called on values that depend on the index of `tabulate` yet"),
                )
                .with_label(decl.name.span, format!("`{name}` is declared here"))
                .with_note("differentiate a function that calls the undifferentiated one inside `tabulate` instead"),
            );
            return Val::Err;
        }
        let Some((len, tspan)) = self.batch.clone() else {
            return self.bug("a call on stacks outside `tabulate`");
        };
        let mut cx = FnCx::new(
            self.transforms,
            self.sigs,
            self.lowered,
            self.scopes,
            self.items,
            fi,
            sig,
        );
        cx.depth = self.depth + 1;
        let mut sizes = sig.size_params.clone();
        sizes.push(STACK_LEN.to_string());
        cx.b = Builder::new(name.clone(), sizes);
        let stack_len = Dim::Param(STACK_LEN.to_string());
        cx.batch = Some((stack_len.clone(), tspan));
        cx.own_len = Some(stack_len.clone());
        let mut dynamic = args.iter();
        for (k, (pname, pty, pspan)) in sig.params.iter().enumerate() {
            if sig.statics.get(k).copied().flatten().is_some() {
                let v = statics
                    .iter()
                    .find(|(j, _)| *j == k)
                    .map(|(_, v)| v.clone());
                cx.env.push((pname.clone(), v.unwrap_or(Val::Err)));
                continue;
            }
            let Some(&a) = dynamic.next() else {
                return self.bug(format!("calling `{name}` on stacks: too few arguments"));
            };
            let stacked = self.batched.contains(&a);
            let ty = if stacked {
                with_rows(stack_len.clone(), pty)
            } else {
                pty.clone()
            };
            let v = cx.b.param(pname, ty, *pspan);
            let val = if pty.dtype == DType::I64 && pty.is_scalar() {
                Val::Count(pname.clone(), v)
            } else if pty.dtype == DType::Bool {
                if stacked {
                    cx.batched.insert(v);
                }
                Val::Mask(cx.mask_as(v, DType::I64))
            } else {
                Val::Var(v)
            };
            if stacked {
                cx.batched.insert(v);
            }
            cx.env.push((pname.clone(), val));
        }
        let body = cx.lower(&decl.body, hints);
        let vals = match body {
            Val::Tuple(vs) if sig.ret_tuple => vs,
            v => vec![v],
        };
        let mut rets = Vec::new();
        for (v, t) in vals.iter().zip(&sig.ret) {
            match cx.coerce(v, t) {
                Some(Val::Var(x)) => rets.push(x),
                _ if !cx.errs.is_empty() || matches!(v, Val::Err) => {}
                _ => {
                    let got = cx.describe(v);
                    return self.bug(format!("`{name}` on stacks returns {got}, not {t}"));
                }
            }
        }
        // Errors in the callee's body are this call's.
        let in_prelude = self.scopes.is_prelude(fi) && !self.scopes.is_prelude(self.item);
        for d in &mut cx.errs {
            if in_prelude {
                let inner = std::mem::replace(&mut d.span, span);
                d.labels
                    .insert(0, (inner, format!("in `{name}`, from the prelude")));
            } else {
                d.labels
                    .push((span, format!("`{name}` is called here inside `tabulate`")));
            }
        }
        let failed = !cx.errs.is_empty();
        self.errs.append(&mut cx.errs);
        if let Some(m) = cx.internal.take() {
            return self.bug(m);
        }
        if failed || rets.len() != sig.ret.len() {
            return Val::Err;
        }
        let stacks = std::mem::take(&mut cx.batched);
        let callee = std::mem::replace(&mut cx.b, Builder::new("", Vec::new())).finish(rets);
        let mut subst = subst.clone();
        subst.insert(STACK_LEN.to_string(), len);
        self.inline_stacks(&callee, args, &subst, hints, span, Some(&stacks))
    }

    fn inline(
        &mut self,
        callee: &Function,
        args: &[VarId],
        subst: &HashMap<String, Dim>,
        hints: &[&str],
        span: Span,
    ) -> Val {
        self.inline_stacks(callee, args, subst, hints, span, None)
    }

    /// [`Self::inline`]; with `stacks`, `callee` was lowered on stacks
    /// ([`Self::call_on_stacks`]): its statements are copied as they are,
    /// and the copies of those values are stacks here too.
    fn inline_stacks(
        &mut self,
        callee: &Function,
        args: &[VarId],
        subst: &HashMap<String, Dim>,
        hints: &[&str],
        span: Span,
        stacks: Option<&HashSet<VarId>>,
    ) -> Val {
        let max = self.scopes.max_stmts;
        if self.b.function().stmts.len() + callee.stmts.len() > max {
            if !self.too_large {
                self.too_large = true;
                let name = self.b.function().name.clone();
                self.error(Diagnostic::limit(
                    span,
                    format!(
                        "`{name}` is too large after inlining calls (more than {max} operations)"
                    ),
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
        if stacks.is_none() && self.loops_on_stacks(callee, args) {
            return self.bug(format!("inlining `{}`: its loops on stacks", callee.name));
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
                settles: l.settles,
            });
        }
        // Its rules too (`@custom_vjp`, `@custom_jvp`), which are written
        // for one value, not a stack.
        if !callee.rules.is_empty()
            && (stacks.is_some() || args.iter().any(|a| self.batched.contains(a)))
        {
            let names: Vec<String> = callee
                .rules
                .iter()
                .map(|r| format!("`{}`", r.name))
                .collect();
            self.error(
                Diagnostic::unsupported(
                    span,
                    format!(
                        "{} has its own derivative rules, and is called here on values that depend on the index of `tabulate` (or a batch of `@vmap`): not supported yet",
                        names.join(", ")
                    ),
                )
                .with_note("call it on whole arrays, or without the rules inside `tabulate`"),
            );
            return Val::Err;
        }
        let rule_offset = self.b.function().rules.len() as u32;
        for r in &callee.rules {
            self.b.add_rule(CustomRule {
                name: r.name.clone(),
                vjp: r.vjp.as_ref().map(|v| subst_function(v, subst, &sizes)),
                jvp: r.jvp.as_ref().map(|v| subst_function(v, subst, &sizes)),
            });
        }
        let renumber = |op: Op| op.map_loop(|l| l + offset).map_rule(|r| r + rule_offset);
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
            let pushed = match stacks {
                Some(_) => self.push_plain(hint, renumber(s.op), &xs, Some(&ty)),
                None => self.push(hint, renumber(s.op), &xs, Some(&ty)),
            };
            let Val::Var(nv) = pushed else {
                return Val::Err;
            };
            let ty_here = match stacks {
                Some(st) if st.contains(&s.var) => {
                    self.batched.insert(nv);
                    self.b.ty(nv).clone()
                }
                Some(_) => self.b.ty(nv).clone(),
                None => self.ty(nv),
            };
            if ty_here != ty {
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
    for r in &mut g.rules {
        r.vjp = r.vjp.as_ref().map(|v| subst_function(v, subst, sizes));
        r.jvp = r.jvp.as_ref().map(|v| subst_function(v, subst, sizes));
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

/// A callee's dimension in the caller's terms (None if `N-k`, or another
/// size, goes negative).
fn subst_dim(d: &Dim, subst: &HashMap<String, Dim>) -> Option<Dim> {
    match d {
        Dim::Lit(_) => Some(d.clone()),
        Dim::Param(p) => Some(subst.get(p).cloned().unwrap_or_else(|| d.clone())),
        Dim::Sub(..) | Dim::Expr(_) => {
            let with = |p: &str| subst.get(p).map_or(Some(Size::param(p)), Dim::size);
            Dim::from_size(&d.size()?.substitute(&with)?)
        }
        Dim::Rows(p, k) => match subst.get(p) {
            Some(Dim::Lit(n)) => Some(Dim::Lit(n.div_ceil((*k).max(1)) + 1)),
            Some(Dim::Param(q)) => Some(Dim::Rows(q.clone(), *k)),
            Some(_) => None,
            None => Some(d.clone()),
        },
    }
}
