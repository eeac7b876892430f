//! Calls: argument checking, size unification, specialization of
//! templates (static or element-type parameters) and inlining of the
//! callee's IR at the caller's sizes.

use super::builtins::{builtin, builtin2, matrix_builtin};
use super::loops::with_rows;
use super::{arity_message, fold, FnCx, Sig, Val};
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
use crate::types::size::Size;
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
pub(super) fn base_name(name: &str) -> &str {
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
            return self.call_elementwise(e, op, name, args, hint);
        }
        // Like a kernel or a prelude function, a composite builtin yields to
        // a program's own function of its name.
        if let Some(want) = super::composite::composite(name) {
            if !self.by_name.contains_key(name) {
                return self.call_composite(e, name, want, args, hint);
            }
        }
        if let Some(v) = self.call_special(e, callee, args, hints) {
            return v;
        }
        if !self.by_name.contains_key(name) {
            if let Some(k) = kernels::kernel_id(name) {
                return self.call_kernel(e, k, name, args, hint);
            }
        }
        let Some(&fi) = self.by_name.get(name) else {
            return self.unknown_function(callee, args);
        };
        self.call_fn(e, name, fi, args, hints)
    }

    /// The error of an integer operand `t` at `span` of builtin `name`,
    /// which takes floats only.
    pub(super) fn not_float(&mut self, name: &str, span: Span, t: &Type) -> Val {
        self.error(
            Diagnostic::new(
                span,
                format!("`{name}` needs floating-point operands, but this has type {t}"),
            )
            .with_note("convert integers with `f64(...)`"),
        );
        Val::Err
    }

    /// A call of the element-wise builtin `op` (`exp`, `max`, ...), named
    /// `name`: its number or array arguments checked, then folded if they
    /// are numbers, or the op applied.
    fn call_elementwise(&mut self, e: &Expr, op: Op, name: &str, args: &[Expr], hint: &str) -> Val {
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
                    return self.not_float(name, a.span, &t);
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
        match vals.next().unwrap_or(Val::Err) {
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
        }
    }

    /// A call of a builtin with a form of its own (`iterate`, `scan`,
    /// matrix builtins, conversions, random numbers, `reverse`, `concat`,
    /// ...); `None` if `callee` names none of them.
    fn call_special(
        &mut self,
        e: &Expr,
        callee: &Ident,
        args: &[Expr],
        hints: &[&str],
    ) -> Option<Val> {
        let name = callee.name.as_str();
        let hint = hints.first().copied().unwrap_or("");
        if name == "iterate" {
            return Some(self.iterate(e, args, hints));
        }
        if name == "iterate_until" {
            return Some(self.iterate_impl(e, args, hints, true));
        }
        if name == "scan" || name == "scan_all" {
            return Some(self.scan(e, args, hints, name == "scan_all"));
        }
        if let Some(op) = matrix_builtin(name) {
            return Some(self.matrix(e, op, name, args, hint));
        }
        if let Some(to) = super::builtins::conversion(name) {
            return Some(self.convert(e, to, args, hint));
        }
        if name == "scatter_add" {
            return Some(self.scatter_add(e, args, hint));
        }
        if name == "threefry" {
            return Some(self.threefry(e, args, hint));
        }
        if name == "random_key" {
            return Some(self.random_key(e, args));
        }
        if name == "split" {
            return Some(self.split(e, args));
        }
        if name == "uniform" || name == "normal" {
            for a in args {
                self.lower(a, &[]);
            }
            self.error(
                Diagnostic::new(callee.span, format!("`{name}` needs the shape in brackets"))
                    .with_note(format!("write `{name}[N](key)` or `{name}[M, K](key)`: numbers of that shape, and the next key")),
            );
            return Some(Val::Err);
        }
        if name == "reverse" {
            let Some(xs) = self.array_args(e, name, args) else {
                return Some(Val::Err);
            };
            return Some(self.reverse_rows(hint, xs[0]));
        }
        if name == "concat" {
            let Some(xs) = self.array_args(e, name, args) else {
                return Some(Val::Err);
            };
            return Some(self.concat(e, args, &xs, hint));
        }
        if name == "argmax" || name == "argmin" {
            let Some(xs) = self.array_args(e, name, args) else {
                return Some(Val::Err);
            };
            return Some(self.arg_extremum(e, name, xs[0], hint));
        }
        if name == "flatten" {
            let Some(xs) = self.array_args(e, name, args) else {
                return Some(Val::Err);
            };
            return Some(self.flatten(e, xs[0], hint));
        }
        if name == "reshape" {
            for a in args {
                self.lower(a, &[]);
            }
            self.error(
                Diagnostic::new(callee.span, "`reshape` needs the new shape in brackets")
                    .with_note("write `reshape[M, K](x)`, as `tabulate[N](...)` takes its length"),
            );
            return Some(Val::Err);
        }
        None
    }

    /// A call of `callee`, which names no function here: its arguments are
    /// lowered (for their own errors), and the name reported.
    fn unknown_function(&mut self, callee: &Ident, args: &[Expr]) -> Val {
        let name = callee.name.as_str();
        for a in args {
            self.lower(a, &[]);
        }
        let d = if self.env.contains(name) {
            Diagnostic::new(callee.span, format!("`{name}` is a value, not a function"))
        } else if self.scopes.prelude.is_empty() && prelude::exports(name) {
            Diagnostic::new(callee.span, format!("unknown function `{name}`")).with_note(format!(
                "`{name}` is the prelude's, and this program is checked without it"
            ))
        } else {
            self.unknown_call(callee, args)
        };
        self.error(d);
        Val::Err
    }

    /// Whether `callee` runs a loop and some of `args` are stacks (inside
    /// `tabulate`): its IR cannot be inlined as it is (a loop over one
    /// value is not a loop over a stack), so its body is lowered again.
    pub(super) fn loops_on_stacks(&self, callee: &Function, args: &[VarId]) -> bool {
        !callee.loops.is_empty() && args.iter().any(|a| self.batched.contains(a))
    }

    /// A call of function `fi` (signature `sig`, static values `statics`)
    /// that runs a loop, on `args` some of which are stacks (inside
    /// `tabulate`): its body is lowered again at this call site (as a
    /// template is) with those parameters stacks of length [`STACK_LEN`],
    /// so its loops carry stacks, then inlined with `STACK_LEN` the
    /// length of the enclosing `tabulate`.
    pub(super) fn call_on_stacks(
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
            let val = if sig.is_count(k) {
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

    pub(super) fn inline(
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
        let dims = callee.vars.iter().flat_map(|v| &v.ty.shape);
        if !self.fits(&callee.name, callee.stmts.len(), dims, subst, span) {
            return Val::Err;
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
                captures: l.captures,
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

    /// Whether the function `callee` (of `len` statements, its variables'
    /// dimensions `dims`) may be inlined at the sizes `subst`: the function
    /// stays within the statement limit, and none of the callee's sizes
    /// (`N-k`) goes negative; if not, reported.
    pub(super) fn fits<'d>(
        &mut self,
        callee: &str,
        len: usize,
        dims: impl IntoIterator<Item = &'d Dim>,
        subst: &HashMap<String, Dim>,
        span: Span,
    ) -> bool {
        let max = self.scopes.max_stmts;
        if self.stmt_count() + len > max {
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
            return false;
        }
        // A callee size `N-k` must stay non-negative at a literal size.
        for d in dims {
            if subst_dim(d, subst).is_none() {
                self.error(Diagnostic::new(
                    span,
                    format!(
                        "`{callee}` uses arrays of length {d}, which is negative at the sizes of this call"
                    ),
                ));
                return false;
            }
        }
        true
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

pub(super) fn subst_type(t: &Type, subst: &HashMap<String, Dim>) -> Type {
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
pub(super) fn subst_dim(d: &Dim, subst: &HashMap<String, Dim>) -> Option<Dim> {
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
