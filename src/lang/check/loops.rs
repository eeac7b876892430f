//! Loops: `iterate`, `iterate_until` and `scan`, unrolled or lowered to
//! an IR loop.

use super::{result_expr, FnCx, Val, MAX_STMTS};
use crate::error::span::{Diagnostic, Span};
use crate::lang::ast::*;
use crate::lang::ir::{Builder, Function, Loop, Stmt, VarId};
use crate::lang::types::{Dim, Type};
use crate::ops::Op;
use std::collections::HashMap;

/// The stop condition of `iterate_until`: `s => done`.
type Cond<'e> = (&'e Pattern, &'e Expr);

/// An `iterate` whose unrolled statements would number more than this
/// becomes a real loop (IR [`crate::lang::ir::Loop`]); smaller ones are
/// unrolled, so partial evaluation sees every step.
pub const UNROLL_STMTS: usize = 2_000;

/// Steps of an `iterate` unrolled ahead of its loop while its state still
/// holds compile-time numbers (which fold: `iterate(n, (1.0, 0.0), ...)`
/// starts with constants), before the rest of the steps become a loop.
const PEEL_STEPS: i64 = 3;

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

impl<'a> FnCx<'a> {
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
                Diagnostic::limit(
                    span,
                    format!("`{fname}` is too large after unrolling `{what}` (more than {MAX_STMTS} operations)"),
                )
                .with_note(note),
            );
        }
        true
    }

    pub(super) fn iterate(&mut self, e: &Expr, args: &[Expr], hints: &[&str]) -> Val {
        self.iterate_impl(e, args, hints, false)
    }

    /// `scan(xs, init, (s, x) => step)`: the step applied to the state and
    /// each row `x` of `xs` in turn, from row 0; the final state. A loop
    /// whose body reads row `t` at step `t` (`scan L`), or, when the state
    /// cannot be carried by a loop and `xs` has an integer length, unrolled
    /// with static rows.
    pub(super) fn scan(&mut self, e: &Expr, args: &[Expr], hints: &[&str], all: bool) -> Val {
        let name = if all { "scan_all" } else { "scan" };
        let shape = "a sequence, an initial state and a step function `(s, x) => ...`";
        if args.len() != 3 {
            for a in args {
                self.lower(a, &[]);
            }
            self.error(Diagnostic::new(
                e.span,
                format!(
                    "`{name}` takes 3 arguments ({shape}), but {} given",
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
                Diagnostic::new(step.span, format!("the step function of `{name}` takes the state and a row of the sequence: `(s, x) => ...`"))
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
            self.error(Diagnostic::unsupported(
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
                Some((xs, &xname, all.then_some(e.span))),
                None,
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
        let mut states = Vec::new();
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
                    format!("the step of `{name}` must keep the state's type, but {why}"),
                ));
                return Val::Err;
            }
            if all {
                states.push(next.clone());
            }
            state = next;
        }
        if all {
            return self.stack_states(&state, &states, &count, e.span);
        }
        state
    }

    /// The states after each step of an unrolled `scan_all`, stacked leaf
    /// by leaf: each leaf an array with one row per step (`count` rows).
    fn stack_states(&mut self, last: &Val, states: &[Val], count: &Dim, span: Span) -> Val {
        let mut columns: Vec<Vec<Val>> = Vec::new();
        for st in states {
            let mut leaves = Vec::new();
            flatten_leaves(st, &mut leaves);
            columns.resize(leaves.len(), Vec::new());
            for (c, l) in columns.iter_mut().zip(leaves) {
                c.push(l);
            }
        }
        let mut shape = Vec::new();
        flatten_leaves(last, &mut shape);
        let mut stacked = Vec::new();
        for (i, leaf) in shape.iter().enumerate() {
            let ty = match leaf {
                Val::Var(v) => self.ty(*v),
                Val::Const(_) => Type::scalar(self.float_dtype(states)),
                other => {
                    self.error(Diagnostic::new(
                        span,
                        format!(
                            "`scan_all` stacks states of numbers and arrays, but part of this state is {}",
                            self.describe(other)
                        ),
                    ));
                    return Val::Err;
                }
            };
            let mut rows_ty = vec![count.clone()];
            rows_ty.extend(ty.shape.iter().cloned());
            let rows_ty = Type::array(ty.dtype, rows_ty);
            let rows: Vec<VarId> = columns
                .get(i)
                .map(|c| {
                    c.iter()
                        .map(|l| match l {
                            Val::Var(v) => *v,
                            Val::Const(x) => self.b.constant(ty.dtype, *x),
                            _ => self.b.constant(ty.dtype, 0.0),
                        })
                        .collect()
                })
                .unwrap_or_default();
            let v = if rows.is_empty() {
                self.push_plain("", Op::Zero, &[], Some(&rows_ty))
            } else if rows.len() == 1 {
                self.push_plain("", Op::Unindex(0), &[rows[0]], Some(&rows_ty))
            } else {
                match self.b.pack_rows(&rows, &rows_ty) {
                    Ok(v) => Val::Var(v),
                    Err(e) => self.bug(format!("stacking the states of `scan_all`: {}", e.0)),
                }
            };
            stacked.push(v);
        }
        let mut it = stacked.into_iter();
        rebuild_leaves(last, &mut it)
    }

    /// The float type of the first array among the leaves of `states`
    /// (`f64` if none).
    fn float_dtype(&self, states: &[Val]) -> crate::lang::types::DType {
        let mut leaves = Vec::new();
        for s in states {
            flatten_leaves(s, &mut leaves);
        }
        leaves
            .iter()
            .find_map(|l| match l {
                Val::Var(v) => Some(self.ty(*v).dtype),
                _ => None,
            })
            .unwrap_or(crate::lang::types::DType::F64)
    }

    /// `iterate(n, init, s => step)` (`until` false), or
    /// `iterate_until(n, init, s => done, s => step)`: at most `n` steps,
    /// none once `done` holds. A static count is unrolled; a run-time `done`
    /// selects between the state and its step (a select cascade), so the
    /// gradient flows through the steps actually taken.
    pub(super) fn iterate_impl(
        &mut self,
        e: &Expr,
        args: &[Expr],
        hints: &[&str],
        until: bool,
    ) -> Val {
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
                ExprKind::Lambda { param, body } => Some((param, &**body)),
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
            // A run-time count (bound): the whole `iterate` is one loop.
            Val::Count(size, _) => {
                let state = self.lower(init, hints);
                if matches!(state, Val::Err) {
                    return Val::Err;
                }
                return match self.counted_loop(
                    Dim::Param(size),
                    &state,
                    (param, body, done),
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
                    if dynamic {
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
                if dynamic {
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
        let mut loop_tried = self.batch.is_some();
        for step in 0..n {
            if matches!(state, Val::Err) {
                return Val::Err;
            }
            if !loop_tried && (step >= PEEL_STEPS || !has_constant_leaf(&state)) {
                loop_tried = true;
                let rest = Dim::Lit((n - step) as u64);
                if let Some(v) =
                    self.counted_loop(rest, &state, (param, body, done), init.span, hints)
                {
                    return v;
                }
            }
            let note = format!("a long `{what}` becomes a loop only when every part of its state, and every value its step reads from outside, is an array of one element type and shape (or a scalar)");
            if self.unrolled_too_large(count.span, what, &note) {
                return Val::Err;
            }
            let mut stop = None;
            if let Some(done) = done {
                match self.stop_condition(done, &state, init.span) {
                    None => return Val::Err,
                    Some(Val::Bool(true)) => break,
                    Some(Val::Mask(m)) => stop = Some(m),
                    Some(_) => {}
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
                Some(m) => match self.freeze(
                    m,
                    (&state, init.span),
                    (next, result_expr(body).span),
                    done,
                    hints,
                ) {
                    Some(v) => v,
                    None => return Val::Err,
                },
                None => next,
            };
        }
        state
    }

    /// The stop condition `done` of `iterate_until` at `state`: a static
    /// `Bool` or a run-time `Mask` (None: an error, reported).
    fn stop_condition(
        &mut self,
        (dparam, dbody): Cond,
        state: &Val,
        init_span: Span,
    ) -> Option<Val> {
        let mark = self.env.len();
        if !self.bind_pattern(dparam, state.clone(), init_span) {
            self.env.truncate(mark);
            return None;
        }
        let c = self.lower(dbody, &[]);
        self.env.truncate(mark);
        match c {
            Val::Err => None,
            c @ (Val::Bool(_) | Val::Mask(_)) => Some(c),
            other => {
                let t = self.describe(&other);
                self.error(Diagnostic::new(
                    result_expr(dbody).span,
                    format!(
                        "the stop condition of `iterate_until` must be a bool, but it has type {t}"
                    ),
                ));
                None
            }
        }
    }

    /// The state after one step of `iterate_until` whose stop condition is
    /// the run-time `m`: once `done` holds the state no longer changes (so
    /// `done` keeps holding, and a loop may stop there). None: an error,
    /// reported.
    fn freeze(
        &mut self,
        m: VarId,
        (state, init_span): (&Val, Span),
        (next, step_span): (Val, Span),
        done: Option<Cond>,
        hints: &[&str],
    ) -> Option<Val> {
        let kept = self.select(m, (state.clone(), init_span), (next, step_span), hints);
        if let Some(msg) = self.state_change(state, &kept) {
            let cspan = done.map_or(init_span, |(_, b)| result_expr(b).span);
            self.error(Diagnostic::new(
                cspan,
                format!("the stop condition of `iterate_until` must have the state's shape or be a scalar: {msg}"),
            ));
            return None;
        }
        Some(kept)
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
        (param, body, done): (&Pattern, &Expr, Option<Cond>),
        init_span: Span,
        hints: &[&str],
    ) -> Option<Val> {
        self.counted_loop_seq(count, state, param, body, init_span, hints, None, done)
    }

    /// [`Self::counted_loop`], and for a `scan` the sequence and the name
    /// its step binds to the current row (the loop body's second
    /// parameter; the loop always runs, whatever its count), and for a
    /// `scan_all` its span (the result is then every state after a step,
    /// from the tape of the loop). With the stop
    /// condition `done` of an `iterate_until`, the body is the step frozen
    /// once `done` holds ([`Self::freeze`]).
    #[allow(clippy::too_many_arguments)]
    fn counted_loop_seq(
        &mut self,
        count: Dim,
        state: &Val,
        param: &Pattern,
        body: &Expr,
        init_span: Span,
        hints: &[&str],
        seq: Option<(VarId, &Ident, Option<Span>)>,
        done: Option<Cond>,
    ) -> Option<Val> {
        let all = seq.and_then(|(_, _, all)| all);
        let seq = seq.map(|(xs, name, _)| (xs, name));
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
            settles: done.is_some(),
        });
        let packed = match self.b.pack_rows(&init_vars, &packed_ty) {
            Ok(p) => p,
            Err(e) => return Some(self.bug(format!("lowering a loop: {}", e.0))),
        };
        let hint = hints.first().copied().unwrap_or("");
        let ins: Vec<VarId> = std::iter::once(packed)
            .chain(seq.map(|(xs, _)| xs))
            .collect();
        if let Some(span) = all {
            return Some(self.every_state(id, &ins, (&leaf_tys, &leaf_ty), state, span, hint));
        }
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

    /// The states of scan loop `id` after each of its steps, leaf by leaf
    /// (`leaf_tys`, packed as rows of `leaf_ty`): its tape keeping every
    /// state has the final state in row 0 and state `j` in row `1 + j`, so
    /// state `t + 1` is row `(t + 2) % (count + 1)`, gathered.
    fn every_state(
        &mut self,
        id: u32,
        ins: &[VarId],
        (leaf_tys, leaf_ty): (&[Type], &Type),
        state: &Val,
        span: Span,
        hint: &str,
    ) -> Val {
        let lp = &self.b.function().loops[id as usize];
        let (count, packed) = (lp.count.clone(), lp.state().clone());
        let rows = lp.tape_rows(1);
        let with_rows = |d: Dim, t: &Type| {
            let mut shape = vec![d];
            shape.extend(t.shape.iter().cloned());
            Type::array(t.dtype, shape)
        };
        let tape_ty = with_rows(rows.clone(), &packed);
        let Val::Var(tape) = self.push_plain(
            format!("{hint}.tape").trim_start_matches('.'),
            Op::LoopTape(id, 1, true),
            ins,
            Some(&tape_ty),
        ) else {
            return Val::Err;
        };
        let built = (|| -> Result<Vec<VarId>, String> {
            let b = &mut self.b;
            let e = |e: crate::ops::OpTypeError| e.0;
            let site = crate::lang::interp::pack_site(span.start, span.end);
            let mut out = Vec::new();
            for (i, t) in leaf_tys.iter().enumerate() {
                // One value carried (no other part, nothing captured), or
                // part `i` of each state, gathered from the tape at once.
                let part = (packed != *leaf_ty).then_some(i as u64);
                let part = b
                    .states_after_steps(tape, count.clone(), site, part)
                    .map_err(e)?;
                // A scalar carried as a broadcast row: its first element.
                let v = if t != leaf_ty && t.is_scalar() && !leaf_ty.is_scalar() {
                    let first = b.leading_columns(part, Dim::Lit(1)).map_err(e)?;
                    b.push(
                        "",
                        Op::Reshape,
                        &[first],
                        Some(&with_rows(count.clone(), t)),
                    )
                    .map_err(e)?
                } else {
                    part
                };
                out.push(v);
            }
            Ok(out)
        })();
        match built {
            Ok(vs) => {
                let mut it = vs.into_iter().map(Val::Var);
                rebuild_leaves(state, &mut it)
            }
            Err(e) => self.bug(format!("the states of `scan_all`: {e}")),
        }
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
}
