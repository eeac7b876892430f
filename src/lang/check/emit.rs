//! Building IR for one function body: `FnCx::new`, stack-aware statement
//! pushes and broadcasts, the types and descriptions of values, constants
//! and coercion.

use super::{CheckedFn, FnCx, Scopes, Sig, Val, COMPILE_BYTES_PER_STMT};
use crate::error::span::Diagnostic;
use crate::ir::transform::Transforms;
use crate::ir::{Builder, VarId};
use crate::lang::ast::*;
use crate::ops::Op;
use crate::types::{DType, Type};
use std::collections::{HashMap, HashSet};

impl<'a> FnCx<'a> {
    pub(super) fn new(
        transforms: &'a dyn Transforms,
        sigs: &'a [Option<Sig>],
        lowered: &'a [Option<CheckedFn>],
        scopes: &'a Scopes,
        items: &'a [&'a FnDef],
        i: usize,
        sig: &'a Sig,
    ) -> FnCx<'a> {
        FnCx {
            transforms,
            sigs,
            lowered,
            scopes,
            by_name: scopes.of(i),
            items,
            item: i,
            sizes: &sig.size_params,
            b: Builder::new(items[i].name.name.clone(), sig.size_params.clone()),
            env: Default::default(),
            errs: Vec::new(),
            internal: None,
            too_large: false,
            depth: 0,
            hint_uses: sig.params.iter().map(|p| (p.0.clone(), 1)).collect(),
            batch: None,
            batched: HashSet::new(),
            own_len: None,
            outer: Vec::new(),
            lifted: HashMap::new(),
            gathered: HashMap::new(),
            lift_of: HashMap::new(),
            index_numbers: HashMap::new(),
            picks: HashMap::new(),
            defer: false,
            no_defer: 0,
            deferred: Vec::new(),
            inlined_len: 0,
            forgot: false,
            held_before: 0,
            out_of_memory: false,
        }
    }

    pub(super) fn error(&mut self, d: Diagnostic) {
        self.errs.push(d);
    }

    pub(super) fn bug(&mut self, m: impl Into<String>) -> Val {
        if self.internal.is_none() {
            self.internal = Some(m.into());
        }
        Val::Err
    }

    /// Push a statement. Operands that depend on the `tabulate` index are
    /// stacked (a leading axis of length L): the op is applied to whole
    /// stacks, lifting the other operands (vectorized lowering). `annot` is
    /// the result type of one element of the stack.
    pub(super) fn push(&mut self, hint: &str, op: Op, args: &[VarId], annot: Option<&Type>) -> Val {
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
        if let Op::Dim(k) = op {
            // Every element of a stack has its shape: the same size for
            // every index (not a stack), one axis further in.
            return self.push_plain(hint, Op::Dim(k + 1), args, None);
        }
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
                // Row-major: each row reshaped is the stack reshaped.
                (Op::Reshape, Some(t)) => {
                    self.push_plain(hint, Op::Reshape, args, Some(&stacked(t)))
                }
                _ => {
                    if let Some(r) = self.push_stacked(hint, op, args, annot) {
                        if let Val::Var(x) = r {
                            self.batched.insert(x);
                        }
                        return r;
                    }
                    if op == Op::MatMul && args.iter().all(|a| self.batched.contains(a)) {
                        self.error(Diagnostic::unsupported(
                            span,
                            "`matmul` of two values that both depend on the index of `tabulate` is not supported yet",
                        ).with_note("a product of one such value and an array that does not depend on the index works"));
                        return Val::Err;
                    }
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
                    self.error(Diagnostic::unsupported(
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
    pub(super) fn repeat_rows(&mut self, v: VarId, from: &Type, to: &Type) -> Option<VarId> {
        if to.rank() != from.rank() + 1 || to.shape[1..] != from.shape[..] {
            return None;
        }
        match self.push("", Op::Repeat, &[v], Some(to)) {
            Val::Var(x) => Some(x),
            _ => None,
        }
    }

    /// A logical scalar/array broadcast to `to` (stack-aware).
    pub(super) fn bcast(&mut self, v: VarId, to: &Type) -> Option<VarId> {
        if &self.ty(v) == to {
            return Some(v);
        }
        match self.push("", Op::Bcast, &[v], Some(to)) {
            Val::Var(x) => Some(x),
            _ => None,
        }
    }

    /// The memory compiling the program would take with one statement
    /// more ([`COMPILE_BYTES_PER_STMT`] each).
    fn memory_needed(&self) -> u64 {
        let ops = self.held_before + self.stmt_count() + 1;
        (ops as u64).saturating_mul(COMPILE_BYTES_PER_STMT)
    }

    /// Whether the program so far, with one statement more, fits the
    /// memory compiling may take; if not, reported once at the function.
    pub(super) fn fits_memory(&mut self) -> bool {
        let bytes = self.memory_needed();
        if self.scopes.memory.allows(bytes) {
            return true;
        }
        self.out_of_memory = true;
        if !self.too_large {
            self.too_large = true;
            let decl = self.items[self.item];
            let ops = bytes / COMPILE_BYTES_PER_STMT;
            let what = format!(
                "compiling `{}` ({ops} operations in the program so far, at about {} each)",
                decl.name.name,
                crate::ir::memory::describe(COMPILE_BYTES_PER_STMT)
            );
            let message = match self.scopes.memory.check(Some(bytes), &what) {
                Err(m) => m,
                Ok(()) => what,
            };
            self.error(
                Diagnostic::limit(decl.name.span, message)
                    .with_note("raise the memory limit, or compile a smaller program"),
            );
        }
        false
    }

    pub(super) fn push_plain(
        &mut self,
        hint: &str,
        op: Op,
        args: &[VarId],
        annot: Option<&Type>,
    ) -> Val {
        if !self.fits_memory() {
            return Val::Err;
        }
        let name = numbered(&mut self.hint_uses, hint);
        match self.b.push(&name, op, args, annot) {
            Ok(v) => {
                self.b.note_numbered(hint);
                Val::Var(v)
            }
            Err(e) => self.bug(format!("lowering `{}`: {e}", self.b.function().name)),
        }
    }

    /// The type of one value: for a stacked value (inside `tabulate`), the
    /// type of one element of the stack.
    pub(super) fn ty(&self, v: VarId) -> Type {
        let t = self.b.ty(v);
        if self.batched.contains(&v) {
            Type::array(t.dtype, t.shape.get(1..).unwrap_or(&[]).to_vec())
        } else {
            t.clone()
        }
    }

    pub(super) fn describe(&self, v: &Val) -> String {
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

    /// A value as the number it is: a run-time `i64` parameter is its
    /// variable, and the index of `tabulate` (plus its offset) the stack
    /// `iota + offset` of type `i64[L]` (one `i64` per index).
    pub(super) fn number(&mut self, v: Val) -> Val {
        match v {
            Val::Count(_, v) => Val::Var(v),
            Val::Idx(off) => {
                let Some(len) = self.own_len.clone() else {
                    return self.bug("a tabulate index outside `tabulate`");
                };
                let t = Type::array(DType::I64, vec![len]);
                let Val::Var(i) = self.push_plain("", Op::Iota, &[], Some(&t)) else {
                    return Val::Err;
                };
                let Val::Var(i) = self.inner_rows(i) else {
                    return Val::Err;
                };
                let v = if off == 0 {
                    Val::Var(i)
                } else {
                    let c = self.b.constant(DType::I64, off as f64);
                    self.push("", Op::Add, &[i, c], None)
                };
                if let Val::Var(n) = v {
                    self.index_numbers.insert(n, off);
                }
                v
            }
            v => v,
        }
    }

    /// A constant of `ty` (broadcast if `ty` is an array).
    pub(super) fn materialize(&mut self, x: f64, ty: &Type, hint: &str) -> Val {
        let c = self.b.constant(ty.dtype, x);
        if ty.is_scalar() {
            return Val::Var(c);
        }
        self.push(hint, Op::Bcast, &[c], Some(ty))
    }

    /// `v` as a value of exactly `ty` (literals adapt, and a condition is
    /// a `bool`); None if it is not.
    pub(super) fn coerce(&mut self, v: &Val, ty: &Type) -> Option<Val> {
        if ty.dtype == DType::Bool {
            let b = match v {
                Val::Mask(m) => self.mask_as(*m, DType::Bool),
                Val::Bool(b) => self.b.constant(DType::Bool, f64::from(u8::from(*b))),
                Val::Err => return Some(Val::Err),
                _ => return None,
            };
            if self.ty(b) == *ty {
                return Some(Val::Var(b));
            }
            return self.ty(b).is_scalar().then(|| match self.bcast(b, ty) {
                Some(x) => Val::Var(x),
                None => Val::Err,
            });
        }
        match v {
            Val::Var(x) if &self.ty(*x) == ty => Some(v.clone()),
            Val::Var(x) if self.picks.contains_key(x) => {
                let y = self.repick(*x, ty.dtype)?;
                (&self.ty(y) == ty).then_some(Val::Var(y))
            }
            Val::Const(x) => Some(self.materialize(*x, ty, "")),
            Val::Int(i) => Some(self.materialize(*i as f64, ty, "")),
            Val::Err => Some(Val::Err),
            _ => None,
        }
    }
}

/// The name for a value hinted `hint`: repeated hints are numbered here
/// (`pred`, `pred.1`, ...), counted in `uses`, so that the builder's own
/// uniquing never has to search far.
pub(super) fn numbered(uses: &mut HashMap<String, usize>, hint: &str) -> String {
    if hint.is_empty() {
        return String::new();
    }
    let k = uses.entry(hint.to_string()).or_insert(0);
    *k += 1;
    if *k == 1 {
        hint.to_string()
    } else {
        format!("{hint}.{}", *k - 1)
    }
}
