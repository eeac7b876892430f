//! Calls of the program's and the prelude's functions: the arguments
//! checked against the callee's signature (element types of a generic
//! callee, static arguments, size unification), then the callee inlined,
//! or specialized and inlined if it is a template.

use super::calls::{subst_type, MAX_SPECIALIZATION_DEPTH};
use super::signature::signature_with;
use super::{arity_message, Bound, FnCx, Sig, StaticKind, Val};
use crate::error::span::Diagnostic;
use crate::ir::VarId;
use crate::lang::ast::*;
use crate::types::size::{Misfit, Unifier};
use crate::types::{DType, Dim, Type};
use std::collections::HashMap;

/// A call's callee, its signature at this call, its static arguments and
/// its other arguments' variables (as [`FnCx::call_on_stacks`] takes them).
type Call<'s> = (usize, &'s Sig, &'s [(usize, Val)], &'s [VarId]);

impl<'a> FnCx<'a> {
    /// A call of the program's or the prelude's function `fi`, named
    /// `name`: its arguments are lowered and checked against its signature
    /// (specialized first to the element types of the arguments if it is
    /// generic), then the callee is inlined (lowered again with the static
    /// values first if it is a template).
    pub(super) fn call_fn(
        &mut self,
        e: &Expr,
        name: &str,
        fi: usize,
        args: &[Expr],
        hints: &[&str],
    ) -> Val {
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
        self.repick_args(decl, &mut vals);
        let sig = if generic {
            match self.generic_sig(e, name, fi, sig, &vals, args) {
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
        let vals = self.bool_args(sig, vals);
        // Static arguments must be known now; they specialize the callee.
        let mut ok = true;
        let statics = self.static_args(name, sig, &vals, args, &mut ok);
        let subst = self.unify_args(name, sig, &vals, args, &mut ok);
        if !ok {
            return Val::Err;
        }
        // Literal arguments take the parameter's type.
        let Some(arg_vars) = self.arg_vars(name, sig, &vals, args, &subst) else {
            return Val::Err;
        };
        let call = (fi, sig, &statics[..], &arg_vars[..]);
        let v = self.call_checked(e, (name, generic), call, &subst, hints);
        self.bool_results(v)
    }

    /// The call `e` of `name` (`generic`: its declaration has generic
    /// element types), its arguments checked (`call`, with the signature
    /// specialized): a template instantiated, a function with loops
    /// inlined on stacks, a call kept as a call, or the callee inlined.
    fn call_checked(
        &mut self,
        e: &Expr,
        (name, generic): (&str, bool),
        call: Call<'_>,
        subst: &HashMap<String, Dim>,
        hints: &[&str],
    ) -> Val {
        let (fi, sig, _, arg_vars) = call;
        if generic || sig.is_template() {
            return self.call_template(e, name, call, subst, hints);
        }
        let Some(callee_fn) = self.lowered.get(fi).and_then(|c| c.as_ref()) else {
            // The callee has errors of its own (already reported).
            return Val::Err;
        };
        // Only the callee's own loops: one with calls kept as calls
        // calls none with loops.
        if self.loops_on_stacks(&callee_fn.ir, arg_vars) {
            return self.call_on_stacks(call, subst, hints, e.span);
        }
        if let Some(v) = self.defer_call(fi, arg_vars, subst, hints, e.span) {
            return v;
        }
        match self.full_ir(fi) {
            Some(ir) => self.inline(&ir, arg_vars, subst, hints, e.span),
            None => Val::Err,
        }
    }

    /// A `bool` result is a condition, as a `bool` parameter is (see
    /// `body.rs`): an `i64` mask, so that `if`, `!`, `&&` and `||` take
    /// it. Before, `if c(x) {..}` was refused with "must be a bool, but
    /// it has type bool".
    fn bool_results(&mut self, v: Val) -> Val {
        match v {
            Val::Var(x) if self.ty(x).dtype == DType::Bool => {
                Val::Mask(self.mask_as(x, DType::I64))
            }
            Val::Tuple(vs) => Val::Tuple(vs.into_iter().map(|v| self.bool_results(v)).collect()),
            v => v,
        }
    }

    /// A selection between two numbers (see `FnCx::picks`) passed to
    /// `decl` takes the parameter's float type, or the one a generic
    /// element type gets from the other arguments: `vals` are made again
    /// in that type.
    fn repick_args(&mut self, decl: &FnDef, vals: &mut [Val]) {
        let mut known: HashMap<&str, DType> = HashMap::new();
        for (p, v) in decl.params.iter().zip(vals.iter()) {
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
    }

    /// The signature of the generic function `fi` (`sig`) specialized to
    /// the element types its arguments `vals` give; `None` (reported,
    /// unless an argument is already an error) if they do not fit its
    /// parameters or bounds, or leave an element type unknown.
    fn generic_sig(
        &mut self,
        e: &Expr,
        name: &str,
        fi: usize,
        sig: &Sig,
        vals: &[Val],
        args: &[Expr],
    ) -> Option<Sig> {
        let decl = self.items[fi];
        let mut dtypes: HashMap<String, DType> = HashMap::new();
        let mut from: HashMap<String, usize> = HashMap::new();
        for (k, (p, v)) in decl.params.iter().zip(vals.iter()).enumerate() {
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
                        format!(
                            "the prelude's `{name}` takes f32 or f64 values, but this has type {t}"
                        ),
                    )
                    .with_note("convert integers with `f64(...)`"),
                );
                return None;
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
                    return None;
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
                    format!(
                        ", because `{name}` needs derivatives of its `{g}` values; {d} has none"
                    )
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
                return None;
            }
        }
        for g in &sig.generic {
            if !dtypes.contains_key(g) {
                if vals.iter().any(|v| matches!(v, Val::Err)) {
                    return None;
                }
                self.error(
                    Diagnostic::new(
                        e.span,
                        format!(
                            "cannot infer the element type `{g}` of `{name}` from these arguments"
                        ),
                    )
                    .with_note(
                        "pass an array or a typed value (not only numbers) where it is used",
                    ),
                );
                return None;
            }
        }
        signature_with(decl, &dtypes, &mut self.errs)
    }

    /// The arguments `vals`, a condition passed for a run-time `bool`
    /// parameter made a bool.
    fn bool_args(&mut self, sig: &Sig, vals: Vec<Val>) -> Vec<Val> {
        vals.into_iter()
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
            .collect()
    }

    /// The static arguments among `vals`, which must be known now: (their
    /// parameter's index, the value). One that is not known, or has the
    /// wrong type, is reported and clears `ok`.
    fn static_args(
        &mut self,
        name: &str,
        sig: &Sig,
        vals: &[Val],
        args: &[Expr],
        ok: &mut bool,
    ) -> Vec<(usize, Val)> {
        let mut statics: Vec<(usize, Val)> = Vec::new();
        for (k, v) in vals.iter().enumerate() {
            let Some(kind) = sig.statics.get(k).copied().flatten() else {
                continue;
            };
            let (pname, _, pspan) = &sig.params[k];
            let sv = match (kind, v) {
                (_, Val::Err) => {
                    *ok = false;
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
                    *ok = false;
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
        statics
    }

    /// The callee's size parameters unified with the argument shapes
    /// (plain dimensions first, then `N+1`, `2*N`, ...: `size::Unifier`):
    /// their values at this call. An argument that does not fit its
    /// parameter is reported and clears `ok`.
    fn unify_args(
        &mut self,
        name: &str,
        sig: &Sig,
        vals: &[Val],
        args: &[Expr],
        ok: &mut bool,
    ) -> HashMap<String, Dim> {
        let mut unifier = Unifier::new();
        let mut shaped: HashMap<usize, Type> = HashMap::new();
        for (k, v) in vals.iter().enumerate() {
            if sig.statics.get(k).copied().flatten().is_some() {
                continue;
            }
            let (pname, pty, pspan) = &sig.params[k];
            if sig.is_count(k) {
                // A run-time integer binds the callee's size parameter of
                // its name: to the caller's one, or to a static value.
                let d = match v {
                    Val::Count(size, _) => Some(Dim::Param(size.clone())),
                    Val::Err => {
                        *ok = false;
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
                        *ok = false;
                        let t = self.describe(v);
                        self.error(
                            Diagnostic::new(
                                args[k].span,
                                format!("argument `{pname}` of `{name}` must be a non-negative i64 (a count), but it is {t}"),
                            )
                            .with_label(*pspan, format!("`{pname}` is declared here as i64"))
                            .with_note(format!("if `{pname}` is a value (a label, an index) rather than a count, declare it `data {pname}: i64`")),
                        );
                    }
                }
                continue;
            }
            let x = match v {
                Val::Var(x) => *x,
                Val::Err => {
                    *ok = false;
                    continue;
                }
                Val::Const(_) | Val::Int(_) if pty.dtype != DType::Bool => continue,
                other => {
                    *ok = false;
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
            *ok = false;
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
            *ok = false;
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
        unifier.bound
    }

    /// The variables of the dynamic arguments `vals`, the literal ones
    /// made values of their parameter's type at the sizes `subst`; `None`
    /// if one cannot be (reported if its shape is unknown).
    fn arg_vars(
        &mut self,
        name: &str,
        sig: &Sig,
        vals: &[Val],
        args: &[Expr],
        subst: &HashMap<String, Dim>,
    ) -> Option<Vec<VarId>> {
        let mut arg_vars = Vec::new();
        for (k, v) in vals.iter().enumerate() {
            if sig.statics.get(k).copied().flatten().is_some() {
                continue;
            }
            let (pname, pty, _) = &sig.params[k];
            if sig.is_count(k) {
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
                    let want = subst_type(pty, subst);
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
                        return None;
                    }
                    match self.materialize(c, &want, "") {
                        Val::Var(x) => arg_vars.push(x),
                        _ => return None,
                    }
                }
                _ => return None,
            }
        }
        Some(arg_vars)
    }

    /// A call of a template (static or element-type parameters): the
    /// callee's body is lowered with these static values and element
    /// types, then inlined; a specialization nested too deep is reported.
    fn call_template(
        &mut self,
        e: &Expr,
        name: &str,
        call: Call<'_>,
        subst: &HashMap<String, Dim>,
        hints: &[&str],
    ) -> Val {
        let (fi, sig, statics, arg_vars) = call;
        let decl = self.items[fi];
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
            self.sigs,
            lowered,
            self.scopes,
            self.items,
            fi,
            sig,
        );
        cx.depth = self.depth + 1;
        let spec = cx.lower_fn(decl, sig, statics);
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
        match spec {
            Some(c) if self.loops_on_stacks(&c.ir, arg_vars) => {
                self.call_on_stacks(call, subst, hints, e.span)
            }
            Some(c) => self.inline(&c.ir, arg_vars, subst, hints, e.span),
            None => Val::Err,
        }
    }
}
