//! A loop lowered to one IR loop (`counted_loop`): the step lowered once
//! on placeholders, the state packed as the rows of one array with the
//! values the step reads from outside (or, where one of those does not fit
//! the rows, all of them the loop's captures, read in place), inside
//! `tabulate` on stacks.

use super::loops::{flatten_leaves, rebuild_leaves, with_rows, Cond, Seq, UNROLL_STMTS};
use super::{result_expr, FnCx, Val};
use crate::error::span::Span;
use crate::ir::{Builder, Function, Loop, Stmt, VarId};
use crate::lang::ast::*;
use crate::ops::{Op, OpTypeError};
use crate::types::{DType, Dim, Type};
use std::collections::{HashMap, HashSet};

impl<'a> FnCx<'a> {
    /// The remaining `n` steps of an `iterate` from `state` as one IR loop,
    /// when they are many (more than [`UNROLL_STMTS`] statements unrolled)
    /// and the loop can hold the state: every component an array of one
    /// dtype and shape, or a scalar. The state (and the values the step
    /// reads from outside, where they all fit its rows) is packed into one
    /// array `T[K, shape]`; otherwise those values are the loop's captures.
    /// None: unroll instead (nothing was emitted).
    pub(super) fn counted_loop(
        &mut self,
        count: Dim,
        state: &Val,
        (param, body, done): (&Pattern, &Expr, Option<Cond>),
        init_span: Span,
        hints: &[&str],
    ) -> Option<Val> {
        self.counted_loop_seq(count, state, param, body, init_span, hints, None, done)
    }

    /// [`Self::counted_loop`], and for a `scan` its sequence ([`Seq`]:
    /// the loop body's second parameter is the current row; the loop
    /// always runs, whatever its count). With the stop condition `done` of
    /// an `iterate_until`, the body is the step frozen once `done` holds
    /// ([`Self::freeze`]).
    ///
    /// Inside `tabulate` the loop carries stacks (one value per index, a
    /// leading axis of length L): the placeholders are stacks, so the step
    /// is vectorized as usual; a part of the state or a captured value
    /// that does not depend on the index is lifted to a stack (repeated),
    /// and a captured one is read back as itself from the first row of its
    /// stack only where the step does not lift it again.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn counted_loop_seq(
        &mut self,
        count: Dim,
        state: &Val,
        param: &Pattern,
        body: &Expr,
        init_span: Span,
        hints: &[&str],
        seq: Option<Seq>,
        done: Option<Cond>,
    ) -> Option<Val> {
        let mut leaves = Vec::new();
        flatten_leaves(state, &mut leaves);
        // The index of `tabulate` in the state: its `i64` per index.
        for l in &mut leaves {
            if matches!(l, Val::Idx(_)) {
                *l = self.number(l.clone());
            }
        }
        let (masks, flat, leaf_ty, leaf_tys) = self.state_layout(&count, &leaves)?;
        // Inside `tabulate`: every row the loop carries is a stack.
        let batch_len = self.batch.as_ref().map(|(l, _)| l.clone());
        let batched = batch_len.is_some();
        let row_ty = stacked(&batch_len, &leaf_ty);
        let (stmt_mark, var_mark) = (self.b.function().stmts.len(), self.b.function().vars.len());
        let loop_mark = self.b.function().loops.len();
        // Rules of functions the step calls (`custom`): the body gets a
        // copy, statements hoisted out of it keep these.
        let rule_mark = self.b.function().rules.len();
        let err_mark = self.errs.len();
        let (holders, symbolic, row, next) = self.lower_step(
            (&leaf_tys, &masks, &batch_len),
            state,
            seq.as_ref(),
            (param, body, done),
            init_span,
            hints,
        );
        if self.errs.len() > err_mark || self.internal.is_some() || matches!(next, Val::Err) {
            // Reported once here; unrolling would report it again.
            self.forget(stmt_mark, var_mark);
            self.b.take_loops(loop_mark);
            self.b.truncate_rules(rule_mark);
            return Some(Val::Err);
        }
        let mut next_leaves = Vec::new();
        flatten_leaves(&next, &mut next_leaves);
        // Which results of the step are stacks (known until `forget`).
        let next_stacked: Vec<bool> = next_leaves
            .iter()
            .map(|l| matches!(l, Val::Var(v) | Val::Mask(v) if self.batched.contains(v)))
            .collect();
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
            && next_leaves
                .iter()
                .zip(&leaf_tys)
                .zip(&masks)
                .all(|((l, t), &mask)| match l {
                    Val::Var(v) => !mask && self.ty(*v) == *t,
                    // A number meeting an `i64` part must be an integer.
                    Val::Const(c) => {
                        !mask && (t.dtype != DType::I64 || super::exact_int(*c).is_some())
                    }
                    Val::Int(_) => !mask && t.dtype == DType::I64 && flat.is_some(),
                    Val::Mask(m) => mask && self.ty(*m).shape == t.shape,
                    Val::Bool(_) => mask,
                    _ => false,
                })
            && match count {
                // A scan over a sequence of literal length is a loop,
                // unless its state is flat and the unrolled steps few (then
                // unrolled as before, and differentiable with respect to
                // the sequence: its loop's captures are not yet).
                Dim::Lit(n) => {
                    (seq.is_some() && flat.is_none())
                        || (n as usize).saturating_mul(weight.max(1)) > UNROLL_STMTS
                }
                _ => true,
            };
        let (hoisted, captures) =
            self.hoist_and_capture(&step_stmts, &next_leaves, var_mark, batched, &leaf_ty);
        // Each one's own type (of one element of a stack).
        let capture_tys: Vec<Type> = captures.iter().map(|c| self.ty(*c)).collect();
        // Captured values the state's rows cannot carry (a matrix the step
        // of a vector state reads, an `i64` array) make every captured
        // value the loop's own operand, read in place by every step (a
        // stack inside `tabulate` where it depends on the index).
        let operand_caps = flat.is_some() || !capture_tys.iter().all(|t| carried(t, &leaf_ty));
        // Inside `tabulate`, the captured values that are not stacks:
        // carried lifted to one, each with its own type.
        let lifted: HashMap<VarId, Type> = captures
            .iter()
            .zip(&capture_tys)
            .filter(|(c, _)| batched && !self.batched.contains(c))
            .map(|(c, t)| (*c, t.clone()))
            .collect();
        let stacked_steps: HashSet<VarId> = hoisted
            .iter()
            .copied()
            .filter(|v| self.batched.contains(v))
            .collect();
        self.forget(stmt_mark, var_mark);
        if !fits {
            // Unrolling lowers the step again, loops and all.
            drop(nested);
            self.b.truncate_rules(rule_mark);
            return None;
        }
        let parts = Parts {
            leaves,
            masks,
            flat,
            leaf_tys,
            leaf_ty,
            row_ty,
            batch_len,
            holders,
            row,
            step_stmts,
            hoisted,
            stacked_steps,
            captures,
            capture_tys,
            lifted,
            next_leaves,
            next_stacked,
            nested,
            loop_mark,
            rule_mark,
            init_span,
            settles: done.is_some(),
            operand_caps,
        };
        self.build_counted_loop(parts, count, state, seq.as_ref(), hints)
    }

    /// The row type of a counted loop over the state's `leaves`: the
    /// dynamic leaves' array type (or scalar type); a scalar rides along a
    /// vector state as a broadcast row. None if the leaves have no such
    /// common type (or are not all numbers and arrays).
    fn row_type(&self, leaves: &[Val]) -> Option<Type> {
        let mut leaf_ty: Option<Type> = None;
        for l in leaves {
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
        Some(leaf_ty)
    }

    /// How a loop carries the state's `leaves`: which are booleans, the
    /// flat layout of a state of several shapes (else packed as rows),
    /// the row type, and each leaf's own type. None: no loop can (unroll).
    #[allow(clippy::type_complexity)]
    fn state_layout(
        &self,
        count: &Dim,
        leaves: &[Val],
    ) -> Option<(Vec<bool>, Option<Vec<Dim>>, Type, Vec<Type>)> {
        // Booleans (masks, `1` or `+0`) ride in a flat state.
        let masks: Vec<bool> = leaves
            .iter()
            .map(|l| matches!(l, Val::Mask(_) | Val::Bool(_)))
            .collect();
        let rows = if masks.contains(&true) {
            None
        } else {
            self.row_type(leaves)
        };
        let mut flat = None;
        let leaf_ty = match rows {
            Some(t) => t,
            // A run-time count over numbers only (`iterate(n, 0.0, ...)`):
            // `f64` scalars, as a number is wherever nothing gives it a
            // type. (A static count folds them step by step instead.)
            None if !matches!(count, Dim::Lit(_))
                && !leaves.is_empty()
                && leaves.iter().all(|l| matches!(l, Val::Const(_))) =>
            {
                Type::scalar(DType::F64)
            }
            // Numbers and booleans only, a static count: folded step by
            // step instead.
            None if matches!(count, Dim::Lit(_))
                && !leaves
                    .iter()
                    .any(|l| matches!(l, Val::Var(_) | Val::Mask(_))) =>
            {
                return None
            }
            // Parts of several shapes: one flat vector.
            None => {
                let (ty, widths) = self.flat_layout(leaves)?;
                flat = Some(widths);
                ty
            }
        };
        let scalar_ty = Type::scalar(leaf_ty.dtype);
        // Each leaf's own type (a number left in the state is a scalar, a
        // boolean one of the state's type).
        let leaf_tys: Vec<Type> = leaves
            .iter()
            .map(|l| match l {
                Val::Var(v) | Val::Count(_, v) => self.ty(*v),
                Val::Int(_) => Type::scalar(DType::I64),
                Val::Mask(m) => Type::array(leaf_ty.dtype, self.ty(*m).shape),
                _ if leaf_ty.is_scalar() => leaf_ty.clone(),
                _ => scalar_ty.clone(),
            })
            .collect();
        Some((masks, flat, leaf_ty, leaf_tys))
    }

    /// The flat layout of a state whose leaves have several shapes or
    /// element types: the flat vector's type and each leaf's length (its
    /// number of elements). The flat vector has the element type of the
    /// floats among the leaves (`f64` for a number without one; `i64` if
    /// every leaf is an integer or a boolean): booleans are held as `1` or
    /// `+0` of that type, and `i64` values in a float state as exact words
    /// ([`crate::ir::rows::int_words`]). None if the leaves mix `f32` and
    /// `f64` (or are not all numbers, arrays and booleans).
    fn flat_layout(&self, leaves: &[Val]) -> Option<(Type, Vec<Dim>)> {
        let mut float = None;
        let mut ints = false;
        let mut widths = Vec::with_capacity(leaves.len());
        let mut tys = Vec::with_capacity(leaves.len());
        for l in leaves {
            let (dtype, shape) = match l {
                Val::Var(v) | Val::Count(_, v) => {
                    let t = self.ty(*v);
                    (Some(t.dtype), t.shape)
                }
                Val::Int(_) => (Some(DType::I64), Vec::new()),
                Val::Mask(m) => (None, self.ty(*m).shape),
                // A fraction is a float, whatever else the state holds.
                Val::Const(c) if super::exact_int(*c).is_none() => (Some(DType::F64), Vec::new()),
                Val::Const(_) | Val::Bool(_) => (None, Vec::new()),
                _ => return None,
            };
            match dtype {
                Some(DType::Bool) => return None,
                Some(DType::I64) => ints = true,
                Some(d) if float.is_some_and(|f| f != d) => return None,
                Some(d) => float = Some(d),
                None => {}
            }
            tys.push(Type::array(dtype.unwrap_or(DType::F64), shape.clone()));
            widths.push(Dim::product(&shape)?);
        }
        // Numbers without a type are `f64`, unless every typed leaf is an
        // integer (then they are integers too).
        let all_ints = ints && float.is_none();
        let flat = if all_ints {
            DType::I64
        } else {
            float.unwrap_or(DType::F64)
        };
        let words = crate::ir::rows::word_widths(&tys, &widths, flat);
        let total = crate::ir::rows::total_width(&words)?;
        Some((Type::array(flat, vec![total]), widths))
    }

    /// Why no loop can carry `state` (a note for the error that says so).
    pub(super) fn uncarried_note(&self, state: &Val) -> String {
        let mut leaves = Vec::new();
        flatten_leaves(state, &mut leaves);
        let floats = |d: DType| {
            leaves
                .iter()
                .any(|l| matches!(l, Val::Var(v) if self.ty(*v).dtype == d))
        };
        if floats(DType::F32) && floats(DType::F64) {
            return "its parts mix f32 and f64 values; a loop's state may hold arrays and numbers of any shapes, integers and booleans, but floats of one precision".into();
        }
        "a loop's state may hold arrays and numbers of any shapes, integers and booleans, with floats of one precision"
            .into()
    }

    /// The final values of a flat state's leaves `vs` (booleans among them
    /// where `masks` says), as `state` is shaped.
    pub(super) fn flat_finals(&mut self, vs: Vec<VarId>, masks: &[bool], state: &Val) -> Val {
        if self.batch.is_some() {
            self.batched.extend(vs.iter().copied());
        }
        let mut it = vs
            .into_iter()
            .zip(masks)
            .map(|(v, &m)| if m { Val::Mask(v) } else { Val::Var(v) });
        rebuild_leaves(state, &mut it)
    }

    /// One step of a counted loop lowered on placeholder variables
    /// standing for the state (each leaf of type `leaf_tys`, a stack
    /// inside `tabulate` of length `batch_len`) and, for a `scan`, for the
    /// current row; with a stop condition, the step frozen once it holds.
    /// Returns the placeholders, the state made of them, the row's
    /// placeholder (its type and name), and the step's result (`Val::Err`
    /// if it failed).
    fn lower_step<'e>(
        &mut self,
        types: (&[Type], &[bool], &Option<Dim>),
        state: &Val,
        seq: Option<&Seq<'e>>,
        step: (&Pattern, &Expr, Option<Cond>),
        init_span: Span,
        hints: &[&str],
    ) -> (Vec<VarId>, Val, Option<Row<'e>>, Val) {
        // The step's statements move into the loop's body: its calls are
        // inlined, not kept as calls.
        self.no_defer += 1;
        let out = self.lower_step_here(types, state, seq, step, init_span, hints);
        self.no_defer -= 1;
        out
    }

    /// [`Self::lower_step`], its calls inlined.
    fn lower_step_here<'e>(
        &mut self,
        (leaf_tys, masks, batch_len): (&[Type], &[bool], &Option<Dim>),
        state: &Val,
        seq: Option<&Seq<'e>>,
        (param, body, done): (&Pattern, &Expr, Option<Cond>),
        init_span: Span,
        hints: &[&str],
    ) -> (Vec<VarId>, Val, Option<Row<'e>>, Val) {
        // Lower one step on placeholder variables standing for the state.
        let holders: Vec<VarId> = leaf_tys
            .iter()
            .map(|t| self.b.fresh("", stacked(batch_len, t)))
            .collect();
        if batch_len.is_some() {
            self.batched.extend(holders.iter().copied());
        }
        let mut it = holders
            .iter()
            .zip(masks)
            .map(|(h, &m)| if m { Val::Mask(*h) } else { Val::Var(*h) });
        let symbolic = rebuild_leaves(state, &mut it);
        // A scan's row: a placeholder too, the body's second parameter.
        let row = seq.map(|sq| {
            let t = self.b.ty(sq.rows).clone();
            let row_ty = Type::array(t.dtype, t.shape[1..].to_vec());
            let h = self.b.fresh("", row_ty.clone());
            if sq.stacked {
                self.batched.insert(h);
            }
            (h, row_ty, sq.name)
        });
        let env_mark = self.env.len();
        let bound = self.bind_pattern(param, symbolic.clone(), init_span);
        if let Some((h, _, name)) = &row {
            self.env.push((name.name.clone(), Val::Var(*h)));
        }
        let mut next = if bound {
            self.lower(body, hints)
        } else {
            Val::Err
        };
        self.env.truncate(env_mark);
        if let (Some(cond), false) = (done, matches!(next, Val::Err)) {
            next = match self.stop_condition(cond, &symbolic, init_span) {
                Some(Val::Bool(true)) => symbolic.clone(),
                Some(Val::Mask(m)) => self
                    .freeze(
                        m,
                        (&symbolic, init_span),
                        (next, result_expr(body).span),
                        done,
                        hints,
                    )
                    .unwrap_or(Val::Err),
                Some(_) => next,
                None => Val::Err,
            };
        }
        (holders, symbolic, row, next)
    }

    /// Which statements of a counted loop's step (`step_stmts`, its
    /// results `next_leaves`; variables before `var_mark` are from
    /// outside) are hoisted before the loop, and which values from outside
    /// the step it reads (carried in the state), in order.
    ///
    /// Inside `tabulate` (`batched`), what the step computes from outside
    /// values only (`X[i]`, `x[i] * w`, `w` broadcast, the index of a
    /// nested `tabulate`: not from the state) is computed once before the
    /// loop, and read like values from outside (what the rest of the step
    /// reads of it must then be a stack or a value that can be carried
    /// with rows of type `leaf_ty`).
    fn hoist_and_capture(
        &self,
        step_stmts: &[(Stmt, String, Type)],
        next_leaves: &[Val],
        var_mark: usize,
        batched: bool,
        leaf_ty: &Type,
    ) -> (HashSet<VarId>, Vec<VarId>) {
        let is_outer = |v: VarId| v.index() < var_mark;
        let mut hoisted: HashSet<VarId> = HashSet::new();
        for (st, _, _) in step_stmts {
            if batched
                && (!st.args.is_empty() || st.op == Op::Iota)
                && st.op.loop_id().is_none()
                && st.args.iter().all(|a| is_outer(*a) || hoisted.contains(a))
            {
                hoisted.insert(st.var);
            }
        }
        // A hoisted value the rest of the step reads must be a stack or a
        // value that can be carried; otherwise it stays in the step (and
        // what it reads becomes such a read in turn).
        loop {
            let readers = step_stmts
                .iter()
                .filter(|(st, _, _)| !hoisted.contains(&st.var))
                .flat_map(|(st, _, _)| st.args.iter().copied())
                .chain(next_leaves.iter().filter_map(|l| match l {
                    Val::Var(v) => Some(*v),
                    _ => None,
                }));
            let bad: Vec<VarId> = readers
                .filter(|v| {
                    hoisted.contains(v)
                        && !self.batched.contains(v)
                        && !carried(&self.ty(*v), leaf_ty)
                })
                .collect();
            if bad.is_empty() {
                break;
            }
            for v in bad {
                hoisted.remove(&v);
            }
        }
        // Values from outside the step that it reads: carried in the state.
        let mut captures: Vec<VarId> = Vec::new();
        let read = |v: VarId| is_outer(v) || hoisted.contains(&v);
        for (s, _, _) in step_stmts {
            if hoisted.contains(&s.var) {
                continue;
            }
            for a in &s.args {
                if read(*a) && !captures.contains(a) {
                    captures.push(*a);
                }
            }
        }
        for l in next_leaves {
            if let Val::Var(v) = l {
                if read(*v) && !captures.contains(v) {
                    captures.push(*v);
                }
            }
        }
        (hoisted, captures)
    }

    /// The initial state's leaves of a loop from its parts `p`, as
    /// variables of the state's element type (a flat state packed into
    /// one, each leaf lifted to a stack inside `tabulate`).
    fn initial_parts(&mut self, p: &Parts<'_>) -> Result<Vec<VarId>, OpTypeError> {
        let dtype = p.leaf_ty.dtype;
        let mut dynamic = Vec::new();
        for (l, t) in p.leaves.iter().zip(&p.leaf_tys) {
            dynamic.push(match l {
                Val::Var(v) | Val::Count(_, v) => *v,
                Val::Int(i) => self.b.constant(DType::I64, *i as f64),
                Val::Const(x) => self.b.constant(t.dtype, *x),
                Val::Mask(m) => self.mask_as(*m, dtype),
                Val::Bool(b) => self.b.constant(dtype, f64::from(u8::from(*b))),
                _ => unreachable!("checked above"),
            });
        }
        let Some(widths) = &p.flat else {
            return Ok(dynamic);
        };
        let mut parts = Vec::with_capacity(dynamic.len());
        for (v, t) in dynamic.into_iter().zip(&p.leaf_tys) {
            parts.push(match &p.batch_len {
                Some(len) if !self.batched.contains(&v) => {
                    self.b.carry_row(v, false, &with_rows(len.clone(), t))?
                }
                _ => v,
            });
        }
        Ok(vec![self.b.pack_flat(
            &parts,
            widths,
            p.batch_len.is_some(),
            dtype,
        )?])
    }

    /// A counted loop built from its `parts`, once they fit one IR loop:
    /// the hoisted statements before the loop, the loop's body (unpack,
    /// the step's statements, pack), the state packed, the loop run
    /// `count` times (over the rows of a `scan`'s `seq`), and the final
    /// state unpacked into the shape of `state`.
    fn build_counted_loop(
        &mut self,
        mut p: Parts<'_>,
        count: Dim,
        state: &Val,
        seq: Option<&Seq>,
        hints: &[&str],
    ) -> Option<Val> {
        let all = seq.and_then(|s| s.all);
        let batched = p.batch_len.is_some();
        let (loop_mark, rule_mark, init_span) = (p.loop_mark, p.rule_mark, p.init_span);
        // The hoisted stacks, before the loop (the step's variables are
        // gone: `outside` maps them to their copies here).
        let mut outside: HashMap<VarId, VarId> = HashMap::new();
        for (st, _, ty) in p.step_stmts.iter().filter(|s| p.hoisted.contains(&s.0.var)) {
            let args: Vec<VarId> = st
                .args
                .iter()
                .map(|a| outside.get(a).copied().unwrap_or(*a))
                .collect();
            match self.b.push("", st.op, &args, Some(ty)) {
                Ok(v) => {
                    if p.stacked_steps.contains(&st.var) {
                        self.batched.insert(v);
                    }
                    outside.insert(st.var, v);
                }
                Err(e) => return Some(self.bug(format!("lowering a loop: {e}"))),
            }
        }

        // The body: unpack, the step's statements, pack.
        let k = match p.flat {
            Some(_) => 1,
            None => p.leaves.len() + if p.operand_caps { 0 } else { p.captures.len() },
        };
        let row_ty = &p.row_ty;
        let packed_ty = if k == 1 {
            row_ty.clone()
        } else {
            with_rows(Dim::Lit(k as u64), row_ty)
        };
        let fname = self.b.function().name.clone();
        let lid = loop_mark;
        let mut bb = Builder::new(
            format!("{fname}.loop{lid}"),
            self.b.function().size_params.clone(),
        );
        for l in std::mem::take(&mut p.nested) {
            bb.add_loop(l);
        }
        for r in self.b.function().rules[rule_mark..].iter().cloned() {
            bb.add_rule(r);
        }
        let s = bb.param("s", packed_ty.clone(), init_span);
        let mut map: HashMap<VarId, VarId> = HashMap::new();
        if let Some((h, row_ty, name)) = &p.row {
            map.insert(*h, bb.param(&name.name, row_ty.clone(), name.span));
        }
        let built = loop_body(bb, &p, s, map, &packed_ty);
        let body_fn = match built {
            Ok(f) => f,
            Err(e) => return Some(self.bug(format!("lowering a loop: {e}"))),
        };
        let (leaf_tys, leaf_ty) = (&p.leaf_tys, &p.leaf_ty);
        let (captures, row_ty) = (&p.captures, &p.row_ty);
        // The statements this step emitted were removed; so were their
        // variables. Start again from here: pack, loop, unpack.
        let mut dynamic = match self.initial_parts(&p) {
            Ok(d) => d,
            Err(e) => return Some(self.bug(format!("lowering a loop: {e}"))),
        };
        let outer_caps: Vec<VarId> = captures
            .iter()
            .map(|c| outside.get(c).copied().unwrap_or(*c))
            .collect();
        if !p.operand_caps {
            dynamic.extend(outer_caps.iter().copied());
        }
        let mut init_vars = Vec::new();
        for v in dynamic {
            let stacked = self.batched.contains(&v);
            match self.b.carry_row(v, stacked, row_ty) {
                Ok(x) => init_vars.push(x),
                Err(e) => return Some(self.bug(format!("lowering a loop: {e}"))),
            }
        }
        let id = self.b.add_loop(Loop {
            count,
            body: body_fn,
            vjp: None,
            settles: p.settles,
            captures: if p.operand_caps { captures.len() } else { 0 },
        });
        let packed = match self.b.pack_rows(&init_vars, &packed_ty) {
            Ok(p) => p,
            Err(e) => return Some(self.bug(format!("lowering a loop: {e}"))),
        };
        let hint = hints.first().copied().unwrap_or("");
        let mut ins: Vec<VarId> = std::iter::once(packed)
            .chain(seq.map(|sq| sq.rows))
            .collect();
        if p.operand_caps {
            ins.extend(outer_caps);
        }
        if let (Some(span), Some(widths)) = (all, &p.flat) {
            let tys = (&leaf_tys[..], &widths[..], &p.masks[..]);
            return Some(self.every_flat_state(id, &ins, tys, state, span, hint));
        }
        if let Some(span) = all {
            let tys = (&leaf_tys[..], leaf_ty, row_ty);
            return Some(self.every_state(id, &ins, tys, state, span, hint));
        }
        let Val::Var(last) = self.push_plain(hint, Op::Loop(id, seq.is_some()), &ins, None) else {
            return Some(Val::Err);
        };
        if let Some(widths) = &p.flat {
            return Some(match self.b.unpack_flat(last, leaf_tys, widths, batched) {
                Ok(vs) => self.flat_finals(vs, &p.masks, state),
                Err(e) => self.bug(format!("lowering a loop: {e}")),
            });
        }
        let mut finals = Vec::new();
        for (i, t) in leaf_tys.iter().enumerate() {
            let unpacked = if k == 1 {
                Ok(last)
            } else {
                self.b.push("", Op::Index(i as u64), &[last], None)
            };
            match unpacked.and_then(|r| self.b.uncarry_row(r, t, leaf_ty, batched)) {
                Ok(v) => {
                    if batched {
                        self.batched.insert(v);
                    }
                    finals.push(Val::Var(v));
                }
                Err(e) => return Some(self.bug(format!("lowering a loop: {e}"))),
            }
        }
        let mut it = finals.into_iter();
        Some(rebuild_leaves(state, &mut it))
    }
}

/// A scan's row placeholder in a counted loop's step: the variable, its
/// type, and the name the body gives it.
type Row<'e> = (VarId, Type, &'e Ident);

/// A counted loop's state and step, once they fit one IR loop: what
/// [`FnCx::build_counted_loop`] needs to build it.
struct Parts<'e> {
    /// The state's leaves, and each one's own type.
    leaves: Vec<Val>,
    leaf_tys: Vec<Type>,
    /// The row type ([`FnCx::row_type`]), and as the loop carries it (a
    /// stack inside `tabulate`).
    leaf_ty: Type,
    row_ty: Type,
    /// Inside `tabulate`: its length, the stacks' leading axis.
    batch_len: Option<Dim>,
    /// The step's placeholders for the state's leaves, and for a scan's
    /// row.
    holders: Vec<VarId>,
    row: Option<Row<'e>>,
    /// The step's statements (with each one's name and type), which of
    /// them are hoisted before the loop, and which of those are stacks.
    step_stmts: Vec<(Stmt, String, Type)>,
    hoisted: HashSet<VarId>,
    stacked_steps: HashSet<VarId>,
    /// The values from outside the step that it reads, each one's own
    /// type, and those lifted to a stack (inside `tabulate`).
    captures: Vec<VarId>,
    capture_tys: Vec<Type>,
    lifted: HashMap<VarId, Type>,
    /// The step's results, and which of them are stacks.
    next_leaves: Vec<Val>,
    next_stacked: Vec<bool>,
    /// The loops the step made (the body's own).
    nested: Vec<Loop>,
    /// Which leaves are booleans (masks, carried as `1` or `+0` of the
    /// state's type), and for a state of several shapes, the lengths of its
    /// leaves in the one flat vector it is (else it is packed as rows).
    masks: Vec<bool>,
    flat: Option<Vec<Dim>>,
    /// The loop's id (the loops before the step), and the rules before
    /// the step (the body gets a copy of the step's).
    loop_mark: usize,
    rule_mark: usize,
    init_span: Span,
    /// Whether the loop stops early (`iterate_until`).
    settles: bool,
    /// Whether the captures are the loop's operands (else rows of the
    /// state).
    operand_caps: bool,
}

/// `t` as a counted loop carries it: a stack of length `batch_len`
/// inside `tabulate`.
fn stacked(batch_len: &Option<Dim>, t: &Type) -> Type {
    match batch_len {
        Some(l) => with_rows(l.clone(), t),
        None => t.clone(),
    }
}

/// Whether a value of type `t` (of one element) can be carried in rows of
/// type `leaf_ty`.
fn carried(t: &Type, leaf_ty: &Type) -> bool {
    *t == *leaf_ty || (t.is_scalar() && t.dtype == leaf_ty.dtype && leaf_ty.rank() == 1)
}

/// The body of a counted loop from its parts `p`: the packed state `s`
/// (of type `packed_ty`) unpacked, the step's statements that are not
/// hoisted copied (`map`: the step's variables to the body's), and the
/// next state packed.
fn loop_body(
    mut bb: Builder,
    p: &Parts,
    s: VarId,
    mut map: HashMap<VarId, VarId>,
    packed_ty: &Type,
) -> Result<Function, OpTypeError> {
    let Parts {
        leaves,
        leaf_tys,
        leaf_ty,
        row_ty,
        batch_len,
        holders,
        step_stmts,
        hoisted,
        captures,
        capture_tys,
        lifted,
        next_leaves,
        next_stacked,
        loop_mark: lid,
        rule_mark,
        ..
    } = p;
    let batched = batch_len.is_some();
    let k = leaves.len() + if p.operand_caps { 0 } else { captures.len() };
    // Captures as the body's last parameters (after the state and row),
    // of their own types (a stack inside `tabulate` unless lifted).
    if p.operand_caps {
        for (c, t) in captures.iter().zip(capture_tys) {
            let ty = if batched && !lifted.contains_key(c) {
                stacked(batch_len, t)
            } else {
                t.clone()
            };
            let name = format!("c{}", c.index());
            map.insert(*c, bb.param(&name, ty, Default::default()));
        }
    }
    // Row `i` of the state.
    let part = |bb: &mut Builder, i: usize| -> Result<VarId, OpTypeError> {
        if k == 1 {
            return Ok(s);
        }
        bb.push("", Op::Index(i as u64), &[s], None)
    };
    let mut capture_rows = Vec::new();
    if let Some(widths) = &p.flat {
        let parts = bb.unpack_flat(s, leaf_tys, widths, batched)?;
        map.extend(holders.iter().copied().zip(parts));
    } else {
        for (i, (h, t)) in holders.iter().zip(leaf_tys).enumerate() {
            let r = part(&mut bb, i)?;
            map.insert(*h, bb.uncarry_row(r, t, leaf_ty, batched)?);
        }
    }
    // A lifted capture's row, until the step reads it as itself.
    let mut lifted_rows: HashMap<VarId, VarId> = HashMap::new();
    let packed_caps = if p.operand_caps {
        &[][..]
    } else {
        &captures[..]
    };
    for (j, (c, t)) in packed_caps.iter().zip(capture_tys).enumerate() {
        let r = part(&mut bb, leaves.len() + j)?;
        capture_rows.push(r);
        if lifted.contains_key(c) {
            lifted_rows.insert(*c, r);
        } else {
            map.insert(*c, bb.uncarry_row(r, t, leaf_ty, batched)?);
        }
    }
    // A lifted capture read as itself: the first row of its stack.
    let plain = |bb: &mut Builder, map: &mut HashMap<VarId, VarId>, a: VarId| {
        if let Some(v) = map.get(&a) {
            return Ok(*v);
        }
        let r = lifted_rows[&a];
        let first = bb.push("", Op::Index(0), &[r], None)?;
        let v = bb.uncarry_row(first, &lifted[&a], leaf_ty, false)?;
        map.insert(a, v);
        Ok(v)
    };
    for (st, name, ty) in step_stmts {
        if hoisted.contains(&st.var) {
            continue;
        }
        // The step lifting a captured value to a stack: its row.
        if let ([a], Op::Repeat | Op::Bcast) = (&st.args[..], st.op) {
            if let (Some(&r), Some(t)) = (lifted_rows.get(a), lifted.get(a)) {
                if *ty == stacked(batch_len, t) {
                    map.insert(st.var, bb.uncarry_row(r, t, leaf_ty, true)?);
                    continue;
                }
            }
        }
        let mut args = Vec::new();
        for a in &st.args {
            args.push(plain(&mut bb, &mut map, *a)?);
        }
        let op = st
            .op
            .map_loop(|l| l - *lid as u32)
            .map_rule(|r| r - *rule_mark as u32);
        let hint = if name.chars().all(|c| c.is_ascii_digit() || c == '.') {
            ""
        } else {
            name
        };
        let v = bb.push(hint, op, &args, Some(ty))?;
        map.insert(st.var, v);
    }
    if let Some(widths) = &p.flat {
        let next = flat_next(&mut bb, p, &map, widths)?;
        return Ok(bb.finish(vec![next]));
    }
    let mut outs = Vec::new();
    for (l, stacked) in next_leaves.iter().zip(next_stacked) {
        let v = match l {
            // Already carried as a stack.
            Val::Var(v) if lifted_rows.contains_key(v) => lifted_rows[v],
            Val::Var(v) => {
                let x = plain(&mut bb, &mut map, *v)?;
                bb.carry_row(x, *stacked, row_ty)?
            }
            Val::Const(x) => {
                let c = bb.constant(leaf_ty.dtype, *x);
                bb.carry_row(c, false, row_ty)?
            }
            _ => unreachable!("checked above"),
        };
        outs.push(v);
    }
    outs.extend(capture_rows.iter().copied());
    let next = bb.pack_rows(&outs, packed_ty)?;
    Ok(bb.finish(vec![next]))
}

/// The next state of a flat loop from its parts `p`: the step's results
/// (`map`: the step's variables to the body's; booleans as `1` or `+0` of
/// the state's type; inside `tabulate` each lifted to a stack), packed
/// end to end (lengths `widths`).
fn flat_next(
    bb: &mut Builder,
    p: &Parts,
    map: &HashMap<VarId, VarId>,
    widths: &[Dim],
) -> Result<VarId, OpTypeError> {
    let dtype = p.leaf_ty.dtype;
    let body = |v: &VarId| map.get(v).copied().ok_or(OpTypeError::PackNothing);
    let mut outs = Vec::with_capacity(p.next_leaves.len());
    for ((l, stacked), t) in p.next_leaves.iter().zip(&p.next_stacked).zip(&p.leaf_tys) {
        let x = match l {
            Val::Var(v) => body(v)?,
            Val::Mask(m) if bb.ty(body(m)?).dtype == dtype => body(m)?,
            Val::Mask(m) => bb.push("", Op::Convert(dtype), &[body(m)?], None)?,
            Val::Const(x) => bb.constant(t.dtype, *x),
            Val::Int(i) => bb.constant(DType::I64, *i as f64),
            Val::Bool(b) => bb.constant(dtype, f64::from(u8::from(*b))),
            _ => unreachable!("checked above"),
        };
        outs.push(match &p.batch_len {
            Some(len) if !stacked => bb.carry_row(x, false, &with_rows(len.clone(), t))?,
            _ => x,
        });
    }
    bb.pack_flat(&outs, widths, p.batch_len.is_some(), dtype)
}
