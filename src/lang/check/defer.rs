//! Calls kept as calls while a function is checked, inlined when its IR
//! is asked for.
//!
//! Inlining every call as it is checked made a chain of `n` functions,
//! each calling the one before, cost `1 + 2 + ... + n` copies in time and
//! memory. An ordinary function (no transform, no rules, not lowered on
//! stacks or inside a loop's step) instead records each call of another
//! ordinary function of the program that has no loops and no rules: a
//! [`Deferred`] call, whose results are variables with no statement yet.
//! [`expand`] builds the function with every such call inlined, callee
//! inside callee, without recursion. It gives exactly the function that
//! inlining as checked gives, names included: each variable is named
//! again in the order the checker named it, with the callee's statements
//! where the call was ([`Origin`] says how each was named).
//!
//! A function that gave up a lowering attempt (a loop's step lowered
//! twice) is checked again with its calls inlined, since the numbering of
//! the names given up is not recorded.

use super::calls::{base_name, subst_dim, subst_type};
use super::emit::numbered;
use super::{CheckedFn, FnCx, Val};
use crate::error::span::Span;
use crate::ir::{Builder, Function, Origin, VarId};
use crate::types::{DType, Dim, Type};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

/// A call kept as a call (see the module's documentation).
#[derive(Clone, Debug)]
pub(crate) struct Deferred {
    /// The caller's number of variables when the call was made: the
    /// callee's statements come before the variable of that index.
    at_var: usize,
    /// The callee: its item while checking, its place in
    /// [`super::Checked::functions`] after.
    pub(crate) callee: usize,
    args: Vec<VarId>,
    /// The callee's size parameters in the caller's terms.
    subst: HashMap<String, Dim>,
    /// The names the caller gives the callee's results.
    hints: Vec<String>,
    /// The caller's variable for each result of the callee: an argument
    /// where the callee returns its parameter, else one made for it.
    outs: Vec<VarId>,
}

/// What a function with calls kept as calls needs to be expanded.
#[derive(Clone, Debug, Default)]
pub(crate) struct Calls {
    pub(crate) calls: Vec<Deferred>,
    /// How each variable of the function was named.
    origins: Vec<Origin>,
    /// The function's statements with every call inlined.
    size: usize,
    /// Every distinct dimension of the expanded function's variables, in
    /// the order of their first variable.
    dims: Vec<Dim>,
}

impl CheckedFn {
    /// A function whose calls are all inlined.
    pub(super) fn inlined(ir: Function) -> CheckedFn {
        CheckedFn {
            ir,
            grad: None,
            jvp: None,
            calls: Calls::default(),
        }
    }

    /// Whether some call is kept as a call ([`expand`] gives the IR).
    pub(crate) fn has_calls(&self) -> bool {
        !self.calls.calls.is_empty()
    }

    /// The number of statements with every call inlined.
    fn size(&self) -> usize {
        if self.has_calls() {
            self.calls.size
        } else {
            self.ir.stmts.len()
        }
    }

    /// The dimensions of the variables with every call inlined, each once.
    fn dims(&self) -> Cow<'_, [Dim]> {
        if self.has_calls() {
            return Cow::Borrowed(&self.calls.dims);
        }
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for v in &self.ir.vars {
            for d in &v.ty.shape {
                if seen.insert(d) {
                    out.push(d.clone());
                }
            }
        }
        Cow::Owned(out)
    }
}

impl<'a> FnCx<'a> {
    /// The statements of the function so far, with the calls kept as
    /// calls counted inlined.
    pub(super) fn stmt_count(&self) -> usize {
        self.b.function().stmts.len() + self.inlined_len
    }

    /// The IR of item `fi` with every call inlined.
    pub(super) fn full_ir(&mut self, fi: usize) -> Option<Cow<'a, Function>> {
        let lowered = self.lowered;
        let c = lowered.get(fi)?.as_ref()?;
        if !c.has_calls() {
            return Some(Cow::Borrowed(&c.ir));
        }
        let get = |k: usize| lowered.get(k).and_then(|c| c.as_ref());
        match expand(c, &get) {
            Ok(f) => Some(Cow::Owned(f)),
            Err(e) => {
                self.bug(e);
                None
            }
        }
    }

    /// A call of item `fi` (lowered as `callee`) on `args`, at the sizes
    /// `subst`, kept as a call if it may be ([`Deferred`]); `None` if it
    /// must be inlined now.
    pub(super) fn defer_call(
        &mut self,
        fi: usize,
        args: &[VarId],
        subst: &HashMap<String, Dim>,
        hints: &[&str],
        span: Span,
    ) -> Option<Val> {
        let lowered = self.lowered;
        let callee = lowered.get(fi)?.as_ref()?;
        let f = &callee.ir;
        let deferrable = self.defer
            && self.no_defer == 0
            && self.batch.is_none()
            && fi < self.scopes.first_prelude
            && f.loops.is_empty()
            && f.rules.is_empty()
            && !args.iter().any(|a| self.batched.contains(a))
            && subst
                .values()
                .all(|d| matches!(d, Dim::Lit(_) | Dim::Param(_)))
            // A size computed and returned is read through its statement.
            && f.rets
                .iter()
                .all(|r| *f.ty(*r) != Type::scalar(DType::I64));
        if !deferrable {
            return None;
        }
        if !self.fits(&f.name, callee.size(), callee.dims().iter(), subst, span) {
            return Some(Val::Err);
        }
        let at_var = self.b.function().vars.len();
        let mut outs: Vec<VarId> = Vec::new();
        for (k, r) in f.rets.iter().enumerate() {
            let out = if let Some(j) = f.params.iter().position(|p| p.var == *r) {
                args[j]
            } else if let Some(m) = f.rets[..k].iter().position(|q| q == r) {
                outs[m]
            } else {
                self.b.fresh("", subst_type(f.ty(*r), subst))
            };
            outs.push(out);
        }
        self.inlined_len += callee.size();
        if !self.fits_memory() {
            return Some(Val::Err);
        }
        self.deferred.push(Deferred {
            at_var,
            callee: fi,
            args: args.to_vec(),
            subst: subst.clone(),
            hints: hints.iter().map(|h| h.to_string()).collect(),
            outs: outs.clone(),
        });
        let mut vals: Vec<Val> = outs.into_iter().map(Val::Var).collect();
        Some(if vals.len() == 1 {
            vals.pop().unwrap_or(Val::Err)
        } else {
            Val::Tuple(vals)
        })
    }

    /// The function checked, with its calls kept as calls: what
    /// [`expand`] needs, taken from this body (the builder's own function
    /// is `ir`).
    pub(super) fn take_calls(&mut self, ir: &Function, origins: Vec<Origin>) -> Calls {
        let calls = std::mem::take(&mut self.deferred);
        let lowered = self.lowered;
        let mut seen = HashSet::new();
        let mut dims = Vec::new();
        let mut add = |d: Dim, dims: &mut Vec<Dim>| {
            if seen.insert(d.clone()) {
                dims.push(d);
            }
        };
        let mut next = calls.iter().peekable();
        for (i, v) in ir.vars.iter().enumerate() {
            while let Some(c) = next.next_if(|c| c.at_var == i) {
                let callee = lowered.get(c.callee).and_then(|c| c.as_ref());
                for d in callee.map(|c| c.dims()).unwrap_or_default().iter() {
                    add(subst_dim(d, &c.subst).unwrap_or(Dim::Lit(0)), &mut dims);
                }
            }
            for d in &v.ty.shape {
                add(d.clone(), &mut dims);
            }
        }
        Calls {
            size: ir.stmts.len() + self.inlined_len,
            calls,
            origins,
            dims,
        }
    }
}

/// One function being inlined while [`expand`] runs.
struct Frame<'f> {
    f: &'f CheckedFn,
    /// Its variables' copies.
    map: Vec<Option<VarId>>,
    /// The statement defining each variable.
    def: Vec<Option<usize>>,
    next_var: usize,
    next_call: usize,
    /// Its size parameters in the expanded function's terms (the
    /// expanded function's own: none).
    subst: HashMap<String, Dim>,
    /// The names the call gives its results.
    hints: Vec<String>,
}

impl<'f> Frame<'f> {
    fn new(f: &'f CheckedFn, subst: HashMap<String, Dim>, hints: Vec<String>) -> Frame<'f> {
        let mut def = vec![None; f.ir.vars.len()];
        for (k, s) in f.ir.stmts.iter().enumerate() {
            if let Some(d) = def.get_mut(s.var.index()) {
                *d = Some(k);
            }
        }
        Frame {
            f,
            map: vec![None; f.ir.vars.len()],
            def,
            next_var: 0,
            next_call: 0,
            subst,
            hints,
        }
    }
}

/// `top` with every call kept as a call inlined, callee inside callee
/// (`get` gives a callee by [`Deferred::callee`]): the function inlining
/// as checked gives. An error is a bug in egrad.
pub(crate) fn expand<'f>(
    top: &'f CheckedFn,
    get: &dyn Fn(usize) -> Option<&'f CheckedFn>,
) -> Result<Function, String> {
    let name = top.ir.name.clone();
    let bug = |what: &str| format!("expanding the calls of `{name}`: {what}");
    let origins = &top.calls.origins;
    if origins.len() != top.ir.vars.len() {
        return Err(bug("the names were not recorded"));
    }
    let mut b = Builder::new(name.clone(), top.ir.size_params.clone());
    for l in &top.ir.loops {
        b.add_loop(l.clone());
    }
    for r in &top.ir.rules {
        b.add_rule(r.clone());
    }
    let mut uses: HashMap<String, usize> = top
        .ir
        .params
        .iter()
        .filter_map(|p| origins.get(p.var.index()))
        .map(|o| (o.hint.clone(), 1))
        .collect();
    let mut stack = vec![Frame::new(top, HashMap::new(), Vec::new())];
    loop {
        let i = stack.len().checked_sub(1).ok_or_else(|| bug("no frame"))?;
        let f: &'f CheckedFn = stack[i].f;
        let (next_var, next_call) = (stack[i].next_var, stack[i].next_call);
        if let Some(c) = f
            .calls
            .calls
            .get(next_call)
            .filter(|c| c.at_var == next_var)
        {
            stack[i].next_call += 1;
            let child = call_frame(&stack[i], c, get(c.callee), i == 0).map_err(&bug)?;
            stack.push(child);
            continue;
        }
        if next_var == f.ir.vars.len() {
            let done = stack.pop().ok_or_else(|| bug("no frame"))?;
            let rets = done.f.ir.rets.iter().map(|r| done.map[r.index()]);
            let rets: Vec<VarId> = rets
                .collect::<Option<_>>()
                .ok_or_else(|| bug("an undefined result"))?;
            let Some(parent) = stack.last_mut() else {
                let f = b.finish(rets);
                f.validate().map_err(|e| bug(&e.to_string()))?;
                return Ok(f);
            };
            let c = &parent.f.calls.calls[parent.next_call - 1];
            for (out, v) in c.outs.iter().zip(rets) {
                parent.map[out.index()] = Some(v);
            }
            continue;
        }
        stack[i].next_var += 1;
        let v = next_var;
        if stack[i].map[v].is_some() {
            continue;
        }
        let ty = &f.ir.vars[v].ty;
        let Some(k) = stack[i].def[v] else {
            if i == 0 {
                // A parameter, or a variable the checker made and left
                // unused: made again, for the names after it.
                let name = own_name(&origins[v], &mut uses);
                let nv = match f.ir.params.iter().find(|p| p.var.index() == v) {
                    Some(p) => b.param(&name, ty.clone(), p.span),
                    None => b.fresh(&name, ty.clone()),
                };
                stack[0].map[v] = Some(nv);
            }
            continue;
        };
        let s = &f.ir.stmts[k];
        let args: Option<Vec<VarId>> = s.args.iter().map(|a| stack[i].map[a.index()]).collect();
        let args = args.ok_or_else(|| bug("a value used before it is made"))?;
        let (name, ty) = if i == 0 {
            (own_name(&origins[v], &mut uses), ty.clone())
        } else {
            let hint = inlined_hint(&stack, v);
            (numbered(&mut uses, &hint), subst_type(ty, &stack[i].subst))
        };
        let nv = b.push_typed(&name, s.op, &args, ty);
        stack[i].map[v] = Some(nv);
    }
}

/// The name of a variable of the expanded function's own, made again.
fn own_name(o: &Origin, uses: &mut HashMap<String, usize>) -> String {
    if o.numbered {
        numbered(uses, &o.hint)
    } else {
        o.hint.clone()
    }
}

/// The frame of `callee` called by `c` from `parent` (the expanded
/// function itself if `top_level`).
fn call_frame<'f>(
    parent: &Frame<'f>,
    c: &Deferred,
    callee: Option<&'f CheckedFn>,
    top_level: bool,
) -> Result<Frame<'f>, &'static str> {
    let callee = callee.ok_or("a callee is missing")?;
    let mut subst = HashMap::new();
    for p in &callee.ir.size_params {
        let d = c.subst.get(p).cloned().unwrap_or(Dim::Param(p.clone()));
        let d = if top_level {
            d
        } else {
            subst_dim(&d, &parent.subst).ok_or("a negative size")?
        };
        subst.insert(p.clone(), d);
    }
    let mut child = Frame::new(callee, subst, c.hints.clone());
    for (p, a) in callee.ir.params.iter().zip(&c.args) {
        let a = parent.map.get(a.index()).copied().flatten();
        child.map[p.var.index()] = Some(a.ok_or("an undefined argument")?);
    }
    Ok(child)
}

/// The hint of the innermost frame's variable `v` inlined into the
/// expanded function: at each level out, the name the call gives it if it
/// is a result of the callee, else its own name without numbering (as
/// inlining as checked names it, one level at a time).
fn inlined_hint(stack: &[Frame<'_>], v: usize) -> String {
    let inner = &stack[stack.len() - 1];
    let own = &inner.f.calls.origins;
    let mut hint = match own.get(v) {
        Some(o) => o.hint.clone(),
        None => inner.f.ir.vars[v].name.clone(),
    };
    let mut var = v;
    for j in (1..stack.len()).rev() {
        let fr = &stack[j];
        let pos = fr.f.ir.rets.iter().position(|r| r.index() == var);
        hint = match pos.and_then(|k| fr.hints.get(k)).filter(|h| !h.is_empty()) {
            Some(h) => h.clone(),
            None => base_name(&hint).to_string(),
        };
        let parent = &stack[j - 1];
        match (pos, parent.f.calls.calls.get(parent.next_call - 1)) {
            (Some(k), Some(c)) if j > 1 => var = c.outs[k].index(),
            _ => break,
        }
    }
    hint
}
