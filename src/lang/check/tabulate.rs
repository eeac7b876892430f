//! `tabulate` (vectorized lowering), nested `tabulate`s, and indexing a
//! value that depends on the index of `tabulate`.
//!
//! Inside `tabulate[L](i => e)` every value that depends on `i` is a
//! *stack*: one value per index on a leading axis of length L. Inside a
//! nested `tabulate[M](j => ...)` the stacks are flat, row `i * M + j`,
//! of length `L * M` (so every whole-array op on stacks keeps working one
//! level down): a value of the enclosing level read inside is *lifted*
//! (each of its rows repeated M times, once, when first read), the
//! enclosing index becomes the number `i` of each row, and the nested
//! result (`L * M` rows of one element each) is reshaped into `L` rows of
//! `M`, a stack of the enclosing level.

use super::env::Env;
use super::{result_expr, FnCx, Level, Val};
use crate::error::span::{Diagnostic, Span};
use crate::ir::interp::pack_site;
use crate::ir::VarId;
use crate::lang::ast::*;
use crate::ops::Op;
use crate::types::{DType, Dim, Type};
use std::mem::take;

impl<'a> FnCx<'a> {
    /// `tabulate[L](i => e)`: lowered once for all `i` at the same time.
    /// Every value that depends on `i` is a stack of L values (a leading
    /// axis); `x[i + c]` is rows `c .. c+L` of `x`, `+/` of a stack sums each
    /// row, and values that do not depend on `i` are computed once.
    pub(super) fn tabulate(
        &mut self,
        span: Span,
        size: &DimExpr,
        param: &Ident,
        body: &Expr,
        hints: &[&str],
    ) -> Val {
        let Some(len) = self.body_dim(size, "the length of `tabulate`") else {
            return Val::Err;
        };
        // Inside another `tabulate`: the environment as it was, to put back.
        let saved_env = if self.batch.is_some() {
            match self.enter_nested(len.clone(), span) {
                Some(env) => Some(env),
                None => return Val::Err,
            }
        } else {
            self.batch = Some((len.clone(), span));
            self.own_len = Some(len.clone());
            None
        };
        let mark = self.env.len();
        self.env.push((param.name.clone(), Val::Idx(0)));
        let v = self.lower(body, hints);
        self.env.truncate(mark);
        let hint = hints.first().copied().unwrap_or("");
        // A tuple body (a function with several results, `@vmap` of one)
        // builds a tuple of arrays, one per element.
        let mut stacked = Vec::new();
        let out = match v {
            Val::Tuple(vs) => Val::Tuple(
                vs.into_iter()
                    .map(|v| self.tabulated(v, &len, body, hint, &mut stacked))
                    .collect(),
            ),
            v => self.tabulated(v, &len, body, hint, &mut stacked),
        };
        match saved_env {
            Some(env) => {
                let Some(up) = self.outer.pop() else {
                    return self.bug("leaving a nested `tabulate` that was not entered");
                };
                self.batch = Some(up.batch);
                self.own_len = Some(up.own_len);
                self.batched = up.batched;
                self.lifted = up.lifted;
                self.env = env;
                self.batched.extend(stacked);
            }
            None => {
                self.batch = None;
                self.own_len = None;
                self.batched.clear();
                self.lifted.clear();
            }
        }
        out
    }

    /// One value of `tabulate`'s body `v` (of length `len`), made the
    /// array of its values per index: a stack as it is (reshaped to a
    /// stack of the enclosing level inside a nested `tabulate`, pushed to
    /// `stacked`), a value the same for every index repeated.
    fn tabulated(
        &mut self,
        v: Val,
        len: &Dim,
        body: &Expr,
        hint: &str,
        stacked: &mut Vec<VarId>,
    ) -> Val {
        let v = self.number(v);
        // A value of an enclosing level returned as it is.
        let v = self.lift(v);
        // A condition per index is a condition of the stack's shape.
        let (v, mask) = match v {
            Val::Mask(m) => (Val::Var(m), true),
            v => (v, false),
        };
        let out = match v {
            Val::Err => Val::Err,
            Val::Var(x) if self.batched.contains(&x) => match self.outer.last() {
                None => Val::Var(x),
                Some(up) => {
                    // Rows `i * M + j` are row `i` of the enclosing level.
                    let t = self.b.ty(x).clone();
                    let mut shape = vec![up.batch.0.clone(), len.clone()];
                    shape.extend(t.shape[1..].iter().cloned());
                    let r = self.push_plain(
                        hint,
                        Op::Reshape,
                        &[x],
                        Some(&Type::array(t.dtype, shape)),
                    );
                    if let Val::Var(r) = r {
                        stacked.push(r);
                    }
                    r
                }
            },
            Val::Var(x) => {
                // The same value for every index.
                let t = self.ty(x);
                let mut shape = vec![len.clone()];
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
        match out {
            Val::Var(x) if mask => Val::Mask(x),
            out => out,
        }
    }

    /// Start lowering a `tabulate` of length `len` inside another: the
    /// enclosing indices in scope become numbers (an `i64` per index of
    /// the enclosing level, lifted like any of its values when read), and
    /// the enclosing level's state is kept in [`FnCx::outer`]. Returns the
    /// environment to put back afterwards; None after reporting an error.
    fn enter_nested(&mut self, len: Dim, span: Span) -> Option<Env> {
        let (total, _) = self.batch.clone()?;
        let Some(inner) = total.times(&len) else {
            self.error(Diagnostic::unsupported(
                span,
                format!("a `tabulate` of {len} inside one of {total} has too many elements"),
            ));
            return None;
        };
        let saved = self.env.clone();
        let mut env = take(&mut self.env);
        env.update(|v| has_index(v).then(|| self.index_numbers(v.clone())));
        self.env = env;
        let own_len = self.own_len.take()?;
        self.outer.push(Level {
            batch: self.batch.take()?,
            own_len,
            batched: take(&mut self.batched),
            lifted: take(&mut self.lifted),
        });
        self.batch = Some((inner, span));
        self.own_len = Some(len);
        Some(saved)
    }

    /// `v` with every index of `tabulate` in it as its number.
    fn index_numbers(&mut self, v: Val) -> Val {
        match v {
            Val::Idx(_) => self.number(v),
            Val::Tuple(vs) => Val::Tuple(vs.into_iter().map(|v| self.index_numbers(v)).collect()),
            v => v,
        }
    }

    /// A value read inside a nested `tabulate`: values of enclosing levels
    /// lifted to this one (see [`FnCx::lift_var`]).
    pub(super) fn lift(&mut self, v: Val) -> Val {
        if self.outer.is_empty() {
            return v;
        }
        match v {
            Val::Var(x) => Val::Var(self.lift_var(x)),
            Val::Mask(m) => Val::Mask(self.lift_var(m)),
            Val::Tuple(vs) => Val::Tuple(vs.into_iter().map(|v| self.lift(v)).collect()),
            v => v,
        }
    }

    /// A stack of an enclosing level as a stack of this one: each of its
    /// rows repeated once per index of every `tabulate` nested since,
    /// computed once per value and level. Other values are returned as
    /// they are.
    fn lift_var(&mut self, x: VarId) -> VarId {
        let depth = self.outer.len();
        if depth == 0 || self.batched.contains(&x) {
            return x;
        }
        let Some(from) = (0..depth)
            .rev()
            .find(|&j| self.outer[j].batched.contains(&x))
        else {
            return x;
        };
        let mut v = x;
        for j in from..depth {
            let total = self.outer[j].batch.0.clone();
            let (own, cached) = match self.outer.get(j + 1) {
                Some(next) => (next.own_len.clone(), next.lifted.get(&v).copied()),
                None => match self.own_len.clone() {
                    Some(own) => (own, self.lifted.get(&v).copied()),
                    None => return x,
                },
            };
            let w = match cached {
                Some(w) => w,
                None => {
                    let Some(w) = self.repeat_each_row(v, &total, &own) else {
                        return x;
                    };
                    let (lifted, batched) = match self.outer.get_mut(j + 1) {
                        Some(next) => (&mut next.lifted, &mut next.batched),
                        None => (&mut self.lifted, &mut self.batched),
                    };
                    lifted.insert(v, w);
                    batched.insert(w);
                    self.lift_of.insert(w, v);
                    w
                }
            };
            v = w;
        }
        v
    }

    /// `T[L, s..]` to `T[L*M, s..]`, row `i` of `v` at rows `i*M .. i*M+M`:
    /// `spread` for a vector, else a gather at the rows `i` (an index that
    /// is always in range). None after an internal error.
    fn repeat_each_row(&mut self, v: VarId, rows: &Dim, m: &Dim) -> Option<VarId> {
        let t = self.b.ty(v).clone();
        let flat = rows.times(m)?;
        let spread = |cx: &mut Self, x: VarId, dtype: DType| -> Option<VarId> {
            let wide = Type::array(dtype, vec![rows.clone(), m.clone()]);
            let Val::Var(w) = cx.push_plain("", Op::Spread, &[x], Some(&wide)) else {
                return None;
            };
            let Val::Var(r) = cx.push_plain(
                "",
                Op::Reshape,
                &[w],
                Some(&Type::array(dtype, vec![flat.clone()])),
            ) else {
                return None;
            };
            Some(r)
        };
        if t.rank() == 1 {
            return spread(self, v, t.dtype);
        }
        let Val::Var(i) = self.push_plain(
            "",
            Op::Iota,
            &[],
            Some(&Type::array(DType::I64, vec![rows.clone()])),
        ) else {
            return None;
        };
        let idx = spread(self, i, DType::I64)?;
        let span = self.batch.as_ref()?.1;
        match self.push_plain(
            "",
            Op::Gather(pack_site(span.start, span.end)),
            &[v, idx],
            None,
        ) {
            Val::Var(g) => {
                self.note_gather(g);
                Some(g)
            }
            _ => None,
        }
    }

    /// A vector `[M, s..]` of one value per index of the innermost
    /// `tabulate` (of length M) as a stack of this level: itself for one
    /// `tabulate`, repeated for every index of the enclosing ones (`T[L*M,
    /// s..]`, row `i*M + j` its row `j`) inside another.
    pub(super) fn inner_rows(&mut self, v: VarId) -> Val {
        let Some((total, _)) = self.batch.clone() else {
            return self.bug("a tabulate index outside `tabulate`");
        };
        let r = match self.outer.last() {
            None => Val::Var(v),
            Some(up) => {
                let t = self.b.ty(v).clone();
                let mut shape = vec![up.batch.0.clone()];
                shape.extend(t.shape.iter().cloned());
                let Val::Var(w) =
                    self.push_plain("", Op::Repeat, &[v], Some(&Type::array(t.dtype, shape)))
                else {
                    return Val::Err;
                };
                let mut flat = vec![total];
                flat.extend(t.shape[1..].iter().cloned());
                self.push_plain("", Op::Reshape, &[w], Some(&Type::array(t.dtype, flat)))
            }
        };
        if let Val::Var(x) = r {
            self.batched.insert(x);
        }
        r
    }

    /// Row `k` of each element of the stack `x` (`x[k]` where `x` depends
    /// on the index of `tabulate`): `k` a static integer, the index of
    /// `tabulate`, a run-time `i64` or a stack of them. Row `k` of element
    /// `t` is row `t * K + k` of the stack with its first two axes merged
    /// (one gather); `k` is checked against `K` first (a gather from
    /// `0 .. K`, which gives `k` back or reports it at `kspan`). A stack
    /// that is itself a gather of rows `idx` of an array is not read:
    /// row `idx[t] * K + k` of that array is (`A[i][j]` in nested
    /// `tabulate`s reads one element of `A`, not a row per element).
    pub(super) fn index_stacked(&mut self, x: VarId, k: Val, kspan: Span, hint: &str) -> Val {
        let Some((total, _)) = self.batch.clone() else {
            return self.bug("a stacked value outside `tabulate`");
        };
        if let Val::Idx(off) = k {
            if let Some(r) = self.lifted_rows(x, off, kspan, hint) {
                return r;
            }
        }
        let (base, rows_of) = match self.gathered_from(x) {
            Some((base, idx, site))
                if !self.batched.contains(&base) && self.b.ty(idx).rank() == 1 =>
            {
                (base, Some((idx, site)))
            }
            _ => (x, None),
        };
        let raw = self.b.ty(base).clone();
        let rows = raw.shape[1].clone();
        let ints = |d: &Dim| Type::array(DType::I64, vec![d.clone()]);
        // The row read by each element, as a stack of i64.
        let k = match k {
            Val::Int(n) => {
                if !self.row_fits(n, &rows, kspan) {
                    return Val::Err;
                }
                if raw.rank() == 2 && rows_of.is_none() {
                    // Column `n` of the stack.
                    let Val::Var(t) = self.push_plain("", Op::Transpose, &[x], None) else {
                        return Val::Err;
                    };
                    let r = self.push_plain(hint, Op::Index(n as u64), &[t], None);
                    if let Val::Var(r) = r {
                        self.batched.insert(r);
                    }
                    return r;
                }
                self.materialize(n as f64, &ints(&total), "")
            }
            Val::Idx(_) => self.number(k),
            Val::Count(_, k) => self.materialize_var(k, &ints(&total)),
            Val::Var(k) if self.ty(k).dtype != DType::I64 => {
                return self.not_an_index(&Val::Var(k), kspan);
            }
            Val::Var(k) if self.batched.contains(&k) && self.ty(k).is_scalar() => Val::Var(k),
            Val::Var(k) if self.ty(k).is_scalar() => self.materialize_var(k, &ints(&total)),
            Val::Err => return Val::Err,
            Val::Var(k) => {
                // An array of indices (one for all elements, or a stack):
                // those rows of each element.
                let site = pack_site(kspan.start, kspan.end);
                return match self.gather_each(x, k, site, hint) {
                    Some(r) => {
                        self.batched.insert(r);
                        Val::Var(r)
                    }
                    None => self.bug("gathering from a stack"),
                };
            }
            other => return self.not_an_index(&other, kspan),
        };
        let Val::Var(k) = k else {
            return Val::Err;
        };
        let site = pack_site(kspan.start, kspan.end);
        let Val::Var(within) = self.push_plain("", Op::Iota, &[], Some(&ints(&rows))) else {
            return Val::Err;
        };
        let Val::Var(k) = self.push_plain("", Op::Gather(site), &[within, k], None) else {
            return Val::Err;
        };
        // Where each row of `base` starts, per element.
        let Some(starts) = self.row_starts(&raw.shape[0], &rows) else {
            return Val::Err;
        };
        let starts = match rows_of {
            None => starts,
            Some((idx, site)) => {
                match self.push_plain("", Op::Gather(site), &[starts, idx], None) {
                    Val::Var(s) => s,
                    other => return other,
                }
            }
        };
        let Val::Var(at) = self.push_plain("", Op::Add, &[starts, k], None) else {
            return Val::Err;
        };
        let Some(all) = raw.shape[0].times(&rows) else {
            return self.bug("a stack's element count overflows");
        };
        let mut flat = vec![all];
        flat.extend(raw.shape[2..].iter().cloned());
        let Val::Var(f) = self.push_plain(
            "",
            Op::Reshape,
            &[base],
            Some(&Type::array(raw.dtype, flat)),
        ) else {
            return Val::Err;
        };
        let r = self.push_plain(hint, Op::Gather(site), &[f, at], None);
        if let Val::Var(r) = r {
            self.note_gather(r);
            self.batched.insert(r);
        }
        r
    }

    /// `x[j + off]` for the index `j` of this `tabulate` (of length M)
    /// where `x` is a value of the enclosing level (of rows `T[K, s..]`)
    /// lifted: rows `off .. off + M` of each of its elements, which are
    /// the lifted stack's rows in order (`x` itself reshaped when `off`
    /// is 0 and M is K): no gather. None where that does not apply.
    fn lifted_rows(&mut self, x: VarId, off: i64, kspan: Span, hint: &str) -> Option<Val> {
        let base = *self.lift_of.get(&x)?;
        let up = self.outer.last()?;
        if off < 0 || !up.batched.contains(&base) {
            return None;
        }
        let (total, _) = self.batch.clone()?;
        let own = self.own_len.clone()?;
        let raw = self.b.ty(base).clone();
        let rows = raw.shape.get(1)?.clone();
        if !self.rows_fit(off, &own, &rows, kspan) {
            return Some(Val::Err);
        }
        let rest = raw.shape[2..].to_vec();
        let sliced = if off == 0 && own == rows {
            base
        } else {
            let mut elem = vec![own.clone()];
            elem.extend(rest.iter().cloned());
            self.along_rows(
                Op::Slice(off as u64),
                base,
                Some(&Type::array(raw.dtype, elem)),
                "",
            )?
        };
        let mut flat = vec![total];
        flat.extend(rest);
        let r = self.push_plain(
            hint,
            Op::Reshape,
            &[sliced],
            Some(&Type::array(raw.dtype, flat)),
        );
        if let Val::Var(v) = r {
            self.batched.insert(v);
        }
        Some(r)
    }

    /// `x[i + off]` inside a `tabulate` nested in one other, where `i` is
    /// the enclosing index (here a lifted number) and `x` depends on no
    /// index: rows `off ..` of `x` along the enclosing index (a slice, as
    /// there), lifted. None where that does not apply.
    pub(super) fn outer_index_rows(&mut self, x: VarId, k: VarId) -> Option<Val> {
        if self.outer.len() != 1 || self.batched.contains(&x) || self.outer[0].batched.contains(&x)
        {
            return None;
        }
        let v = *self.lift_of.get(&k)?;
        let off = *self.index_numbers.get(&v)?;
        if off < 0 || !self.outer[0].batched.contains(&v) {
            return None;
        }
        let len = self.outer[0].own_len.clone();
        let xt = self.b.ty(x).clone();
        if xt.is_scalar() {
            return None;
        }
        if let (Dim::Lit(d), Dim::Lit(l)) = (&xt.shape[0], &len) {
            if off as u64 + l > *d {
                return None;
            }
        }
        let mut shape = vec![len];
        shape.extend(xt.shape[1..].iter().cloned());
        let Val::Var(s) = self.push_plain(
            "",
            Op::Slice(off as u64),
            &[x],
            Some(&Type::array(xt.dtype, shape)),
        ) else {
            return None;
        };
        self.outer[0].batched.insert(s);
        Some(Val::Var(self.lift_var(s)))
    }

    /// `r * K` for each row `r` of an array of `R` rows of `K` elements:
    /// an `i64[R]`. None after an internal error.
    pub(super) fn row_starts(&mut self, r: &Dim, k: &Dim) -> Option<VarId> {
        let ints = |d: &Dim| Type::array(DType::I64, vec![d.clone()]);
        if let Dim::Lit(k) = k {
            let Val::Var(t) = self.push_plain("", Op::Iota, &[], Some(&ints(r))) else {
                return None;
            };
            let Val::Var(k) = self.materialize(*k as f64, &ints(r), "") else {
                return None;
            };
            let Val::Var(s) = self.push_plain("", Op::Mul, &[t, k], None) else {
                return None;
            };
            return Some(s);
        }
        // Column 0 of the element numbers laid out as [R, K].
        let all = r.times(k)?;
        let Val::Var(n) = self.push_plain("", Op::Iota, &[], Some(&ints(&all))) else {
            return None;
        };
        let grid = Type::array(DType::I64, vec![r.clone(), k.clone()]);
        let Val::Var(g) = self.push_plain("", Op::Reshape, &[n], Some(&grid)) else {
            return None;
        };
        let Val::Var(t) = self.push_plain("", Op::Transpose, &[g], None) else {
            return None;
        };
        match self.push_plain("", Op::Index(0), &[t], None) {
            Val::Var(s) => Some(s),
            _ => None,
        }
    }

    /// Remember that `g` is the result of the gather just pushed.
    pub(super) fn note_gather(&mut self, g: VarId) {
        let pos = self.b.function().stmts.len() - 1;
        self.gathered.insert(g, pos);
    }

    /// `(array, indices, site)` if `x` is the result of a gather pushed
    /// while lowering this body (and still there).
    fn gathered_from(&self, x: VarId) -> Option<(VarId, VarId, u64)> {
        let pos = *self.gathered.get(&x)?;
        let st = self.b.function().stmts.get(pos)?;
        match st.op {
            Op::Gather(site) if st.var == x => Some((st.args[0], st.args[1], site)),
            _ => None,
        }
    }

    /// A scalar variable broadcast to `ty` (not a stack).
    fn materialize_var(&mut self, v: VarId, ty: &Type) -> Val {
        self.push_plain("", Op::Bcast, &[v], Some(ty))
    }
}

/// Whether `v` holds the index of a `tabulate`.
fn has_index(v: &Val) -> bool {
    match v {
        Val::Idx(_) => true,
        Val::Tuple(vs) => vs.iter().any(has_index),
        _ => false,
    }
}
