//! Loops: `iterate`, `iterate_until` and `scan`, unrolled or lowered to
//! an IR loop.

use super::{result_expr, FnCx, Val};
use crate::error::span::{Diagnostic, Span};
use crate::ir::VarId;
use crate::lang::ast::*;
use crate::ops::{Op, OpTypeError, Part};
use crate::types::{Dim, Type};

/// The stop condition of `iterate_until`: `s => done`.
pub(super) type Cond<'e> = (&'e Pattern, &'e Expr);

/// An `iterate` whose unrolled statements would number more than this
/// becomes a real loop (IR [`crate::ir::Loop`]); smaller ones are
/// unrolled, so partial evaluation sees every step.
pub const UNROLL_STMTS: usize = 2_000;

/// Steps of an `iterate` unrolled ahead of its loop while its state still
/// holds compile-time numbers (which fold: `iterate(n, (1.0, 0.0), ...)`
/// starts with constants), before the rest of the steps become a loop.
const PEEL_STEPS: i64 = 3;

/// The most steps of an `iterate` the checker evaluates one by one. Steps
/// on constants (`iterate(100000000, 1.0, q => q * 0.5 + 0.1)`) are folded
/// without adding a statement, so the statement limit never stops them:
/// this bounds the compile time (well under a second) instead.
const MAX_UNROLLED_STEPS: i64 = 1 << 20;

/// The leaves of a (possibly nested) tuple value, left to right.
pub(super) fn flatten_leaves(v: &Val, out: &mut Vec<Val>) {
    match v {
        Val::Tuple(vs) => vs.iter().for_each(|x| flatten_leaves(x, out)),
        other => out.push(other.clone()),
    }
}

/// `shape` with its leaves replaced, in order, by `leaves`.
pub(super) fn rebuild_leaves(shape: &Val, leaves: &mut impl Iterator<Item = Val>) -> Val {
    match shape {
        Val::Tuple(vs) => Val::Tuple(vs.iter().map(|x| rebuild_leaves(x, leaves)).collect()),
        _ => leaves.next().unwrap_or(Val::Err),
    }
}

/// A `scan`'s sequence as its loop reads it: `rows`, one per step (inside
/// `tabulate`, a stacked sequence's rows are stacks: `stacked`), the name
/// the step binds to the current row, and for a `scan_all` its span (the
/// result is then every state after a step, from the loop's tape).
pub(super) struct Seq<'e> {
    pub(super) rows: VarId,
    pub(super) stacked: bool,
    pub(super) name: &'e Ident,
    pub(super) all: Option<Span>,
}

/// `t` with a leading axis of length `d`.
pub(super) fn with_rows(d: Dim, t: &Type) -> Type {
    let mut shape = vec![d];
    shape.extend(t.shape.iter().cloned());
    Type::array(t.dtype, shape)
}

/// Does a value hold an error already reported?
fn has_err(v: &Val) -> bool {
    match v {
        Val::Tuple(vs) => vs.iter().any(has_err),
        Val::Err => true,
        _ => false,
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
        let max = self.scopes.max_stmts;
        if self.stmt_count() <= max {
            return false;
        }
        if !self.too_large {
            self.too_large = true;
            let fname = self.b.function().name.clone();
            self.error(
                Diagnostic::limit(
                    span,
                    format!("`{fname}` is too large after unrolling `{what}` (more than {max} operations)"),
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
        let Some((rows, xs_ty, stacked)) = self.scan_rows(seq) else {
            return Val::Err;
        };
        let count = xs_ty.shape[0].clone();
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
        let sq = Seq {
            rows,
            stacked,
            name: &xname,
            all: all.then_some(e.span),
        };
        if let Some(v) = self.counted_loop_seq(
            count.clone(),
            &state,
            &param,
            body,
            init.span,
            hints,
            Some(sq),
            None,
        ) {
            return v;
        }
        let Dim::Lit(n) = count else {
            if has_err(&state) {
                return Val::Err;
            }
            self.error(
                Diagnostic::new(
                    init.span,
                    format!(
                        "a `scan` over a sequence of run-time length cannot carry this state ({})",
                        self.describe(&state)
                    ),
                )
                .with_note(self.uncarried_note(&state)),
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
            let row = self.push_plain("", Op::Index(t), &[rows], None);
            if let (true, Val::Var(r)) = (stacked, &row) {
                self.batched.insert(*r);
            }
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

    /// The sequence `seq` of a `scan` lowered: the variable holding its
    /// rows (a stack of sequences, inside `tabulate`, is read as a
    /// sequence of stacks), its type, and whether it is such a stack.
    /// `None` if it is not an array with a length of a size parameter or
    /// an integer (reported).
    fn scan_rows(&mut self, seq: &Expr) -> Option<(VarId, Type, bool)> {
        let xs_val = self.lower(seq, &[]);
        let xs = match xs_val {
            Val::Err => return None,
            Val::Var(v) if self.ty(v).rank() >= 1 => v,
            other => {
                self.error(Diagnostic::new(
                    seq.span,
                    format!(
                        "`scan` reads the rows of an array, but this is {}",
                        self.describe(&other)
                    ),
                ));
                return None;
            }
        };
        let xs_ty = self.ty(xs);
        let count = xs_ty.shape[0].clone();
        if !matches!(count, Dim::Lit(_) | Dim::Param(_)) {
            self.error(Diagnostic::unsupported(
                seq.span,
                format!("`scan` over a sequence of length {count} is not supported yet; its length must be a size parameter or an integer"),
            ));
            return None;
        }
        // A stack of sequences (one per index of `tabulate`) is read as a
        // sequence of stacks: row `t` holds every element's row `t`.
        let stacked = self.batched.contains(&xs);
        let rows = if stacked {
            match self.b.swap_leading_axes(xs) {
                Ok(r) => r,
                Err(e) => {
                    self.bug(format!("the rows of a stacked sequence: {e}"));
                    return None;
                }
            }
        } else {
            xs
        };
        Some((rows, xs_ty, stacked))
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
            // Inside `tabulate`, states that are stacks: stacked rows of
            // stacks, each stack's element then taking its own rows.
            let len = self.batch.as_ref().map(|(l, _)| l.clone());
            if let (Some(len), true) = (len, rows.iter().any(|r| self.batched.contains(r))) {
                stacked.push(self.stack_stacked_states(&rows, &ty, count, len));
                continue;
            }
            let rows_ty = with_rows(count.clone(), &ty);
            let v = if rows.is_empty() {
                self.push_plain("", Op::Zero, &[], Some(&rows_ty))
            } else if rows.len() == 1 {
                self.push_plain("", Op::Unindex(0), &[rows[0]], Some(&rows_ty))
            } else {
                match self.b.pack_rows(&rows, &rows_ty) {
                    Ok(v) => Val::Var(v),
                    Err(e) => self.bug(format!("stacking the states of `scan_all`: {e}")),
                }
            };
            stacked.push(v);
        }
        let mut it = stacked.into_iter();
        rebuild_leaves(last, &mut it)
    }

    /// The unrolled states `rows` of one leaf of a `scan_all` inside
    /// `tabulate`, some of them stacks (of length `len`) of values of type
    /// `ty`: each element's `count` states as its rows, a stack of
    /// `ty[count]` arrays.
    fn stack_stacked_states(&mut self, rows: &[VarId], ty: &Type, count: &Dim, len: Dim) -> Val {
        let stack_ty = with_rows(len, ty);
        let built = (|| -> Result<VarId, OpTypeError> {
            let mut lifted = Vec::new();
            for r in rows {
                lifted.push(self.b.carry_row(*r, self.batched.contains(r), &stack_ty)?);
            }
            let rows_ty = with_rows(count.clone(), &stack_ty);
            let packed = if lifted.len() == 1 {
                self.b
                    .push("", Op::Unindex(0), &[lifted[0]], Some(&rows_ty))?
            } else {
                self.b.pack_rows(&lifted, &rows_ty)?
            };
            self.b.swap_leading_axes(packed)
        })();
        match built {
            Ok(v) => {
                self.batched.insert(v);
                Val::Var(v)
            }
            Err(e) => self.bug(format!("stacking the states of `scan_all`: {e}")),
        }
    }

    /// The float type of the first array among the leaves of `states`
    /// (`f64` if none).
    fn float_dtype(&self, states: &[Val]) -> crate::types::DType {
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
            .unwrap_or(crate::types::DType::F64)
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
                return self.iterate_loop(Dim::Param(size), init, (param, body, done), hints);
            }
            other if other.as_static_int().is_some() => other.as_static_int().unwrap_or(0),
            other => {
                self.bad_count(count, what, until, &other);
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
        self.iterate_unrolled(n, what, (count, init), (param, body, done), hints)
    }

    /// An `iterate` with a run-time count: the whole `iterate` is one loop
    /// of `count` steps (`step` from `init`; `done` stops it early), or
    /// reported if the loop cannot carry the state.
    fn iterate_loop(
        &mut self,
        count: Dim,
        init: &Expr,
        step: (&Pattern, &Expr, Option<Cond>),
        hints: &[&str],
    ) -> Val {
        let state = self.lower(init, hints);
        if has_err(&state) {
            return Val::Err;
        }
        match self.counted_loop(count, &state, step, init.span, hints) {
            Some(v) => v,
            None => {
                self.error(
                    Diagnostic::new(
                        init.span,
                        format!(
                            "a loop with a run-time count cannot carry this state ({})",
                            self.describe(&state)
                        ),
                    )
                    .with_note(format!(
                        "{}; with a `static` count the `iterate` could be unrolled instead",
                        self.uncarried_note(&state)
                    )),
                );
                Val::Err
            }
        }
    }

    /// Reports the `count` of `iterate` (or `iterate_until`, with
    /// `until`), `what`, whose value `other` is neither a static integer
    /// nor a run-time `i64` parameter.
    fn bad_count(&mut self, count: &Expr, what: &str, until: bool, other: &Val) {
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
                    self.describe(other)
                )
            } else if let Some(c) = match other {
                Val::Const(c) if c.fract() == 0.0 => Some(*c),
                _ => None,
            } {
                // A whole number too large to be read exactly.
                format!("the count of `{name}` must be an integer below 9e15, but {what} is {c:e}")
            } else {
                format!(
                    "the count of `{name}` must be an integer, but {what} is {}",
                    self.describe(other)
                )
            },
        );
        if dynamic {
            d = d.with_note(format!(
                "a count is a static integer (`static n: i64`, unrolled when short) or a run-time `i64` parameter (`n: i64`, a loop); {what} is neither"
            ));
        }
        self.error(d);
    }

    /// The `n` steps (`n` static) of `what` (`iterate` or
    /// `iterate_until`, from `init`, its count `count`): unrolled, a step
    /// at a time, until the state can be carried by a loop (then the
    /// remaining steps are one loop); a run-time `done` selects between
    /// the state and its step.
    fn iterate_unrolled(
        &mut self,
        n: i64,
        what: &str,
        (count, init): (&Expr, &Expr),
        (param, body, done): (&Pattern, &Expr, Option<Cond>),
        hints: &[&str],
    ) -> Val {
        let mut state = self.lower(init, hints);
        let mut loop_tried = false;
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
            if step >= MAX_UNROLLED_STEPS {
                self.error(
                    Diagnostic::limit(
                        count.span,
                        format!(
                            "`{what}` would be evaluated at compile time for {n} steps; egrad evaluates at most {MAX_UNROLLED_STEPS}"
                        ),
                    )
                    .with_note("its state is made of constants (or the step adds no operation), so it is computed while compiling rather than run as a loop: start it from a run-time value, such as a parameter"),
                );
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
            // A step that gives a bare number keeps the state's type (a
            // typed state stays typed: `iterate(3, x, q => 0.5)` is an
            // `f64` if `x` is), unless the number is not an integer and
            // the state is.
            let next = match (&state, &next) {
                (Val::Var(x), Val::Const(c)) if !self.ty(*x).dtype.is_int() || c.fract() == 0.0 => {
                    let ty = self.ty(*x);
                    self.coerce(&next, &ty).unwrap_or(next)
                }
                _ => next,
            };
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
    pub(super) fn stop_condition(
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
    pub(super) fn freeze(
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

    /// Drop what a lowering attempt emitted (statements from `stmts` on,
    /// variables from `vars` on), and forget that any of them was a stack.
    pub(super) fn forget(&mut self, stmts: usize, vars: usize) {
        self.b.truncate(stmts, vars);
        self.forgot = true;
        self.batched.retain(|v| v.index() < vars);
        // Lifted copies made in the part undone (nested `tabulate`s).
        let kept = |k: &VarId, v: &mut VarId| k.index() < vars && v.index() < vars;
        self.lifted.retain(kept);
        self.lift_of.retain(kept);
        self.index_numbers.retain(|v, _| v.index() < vars);
        self.picks
            .retain(|v, (m, _, _)| v.index() < vars && m.index() < vars);
        for level in &mut self.outer {
            level.batched.retain(|v| v.index() < vars);
            level.lifted.retain(kept);
        }
    }

    /// The states of scan loop `id` after each of its steps, leaf by leaf
    /// (`leaf_tys`, packed as rows of `leaf_ty`, stacked as `row_ty`
    /// inside `tabulate`): its tape keeping every state has the final
    /// state in row 0 and state `j` in row `1 + j`, so state `t + 1` is
    /// row `(t + 2) % (count + 1)`, gathered. Inside `tabulate` the
    /// states of each stack's element become its rows (the two leading
    /// axes swapped).
    pub(super) fn every_state(
        &mut self,
        id: u32,
        ins: &[VarId],
        (leaf_tys, leaf_ty, row_ty): (&[Type], &Type, &Type),
        state: &Val,
        span: Span,
        hint: &str,
    ) -> Val {
        let lp = &self.b.function().loops[id as usize];
        let (count, packed) = (lp.count.clone(), lp.state().clone());
        let Some(tape) = self.every_state_tape(id, ins, hint) else {
            return Val::Err;
        };
        let batch = self.batch.as_ref().map(|(l, _)| l.clone());
        let built = (|| -> Result<Vec<VarId>, OpTypeError> {
            let b = &mut self.b;
            let site = crate::ir::interp::pack_site(span.start, span.end);
            let mut out = Vec::new();
            for (i, t) in leaf_tys.iter().enumerate() {
                // One value carried (no other part, nothing captured), or
                // part `i` of each state, gathered from the tape at once.
                let part = (packed != *row_ty).then_some(i as u64);
                let mut part = b.states_after_steps(tape, count.clone(), site, part)?;
                let mut states_ty = with_rows(count.clone(), t);
                if let Some(len) = &batch {
                    part = b.swap_leading_axes(part)?;
                    states_ty = with_rows(len.clone(), &states_ty);
                }
                // A scalar carried as a broadcast row: its first element.
                let v = if t != leaf_ty && t.is_scalar() && !leaf_ty.is_scalar() {
                    // (Each stack's states one after another.)
                    let pt = b.ty(part).clone();
                    let rows = match &pt.shape[..] {
                        [l, c, n] => {
                            let lc = l
                                .times(c)
                                .ok_or_else(|| OpTypeError::parts(Part::States, &pt))?;
                            let to = Type::array(pt.dtype, vec![lc, n.clone()]);
                            b.push("", Op::Reshape, &[part], Some(&to))?
                        }
                        _ => part,
                    };
                    let first = b.leading_columns(rows, Dim::Lit(1))?;
                    b.push("", Op::Reshape, &[first], Some(&states_ty))?
                } else {
                    part
                };
                out.push(v);
            }
            Ok(out)
        })();
        match built {
            Ok(vs) => {
                if batch.is_some() {
                    self.batched.extend(vs.iter().copied());
                }
                let mut it = vs.into_iter().map(Val::Var);
                rebuild_leaves(state, &mut it)
            }
            Err(e) => self.bug(format!("the states of `scan_all`: {e}")),
        }
    }

    /// [`Self::every_state`] for a flat state (leaves of several shapes,
    /// of lengths `widths`, end to end in one vector; booleans where
    /// `masks` says): leaf `j` of every state is columns `widths[j]` of
    /// the states gathered from the tape (inside `tabulate`, of every
    /// stack's states one after another).
    pub(super) fn every_flat_state(
        &mut self,
        id: u32,
        ins: &[VarId],
        (leaf_tys, widths, masks): (&[Type], &[Dim], &[bool]),
        state: &Val,
        span: Span,
        hint: &str,
    ) -> Val {
        let count = self.b.function().loops[id as usize].count.clone();
        let Some(tape) = self.every_state_tape(id, ins, hint) else {
            return Val::Err;
        };
        let batch = self.batch.as_ref().map(|(l, _)| l.clone());
        let built = (|| -> Result<Vec<VarId>, OpTypeError> {
            let b = &mut self.b;
            let site = crate::ir::interp::pack_site(span.start, span.end);
            let mut states = b.states_after_steps(tape, count.clone(), site, None)?;
            let mut lead = vec![count.clone()];
            if let Some(len) = &batch {
                // `[L, count, w]`, its rows one after another.
                states = b.swap_leading_axes(states)?;
                let st = b.ty(states).clone();
                let rows = len
                    .times(&count)
                    .ok_or_else(|| OpTypeError::parts(Part::States, &st))?;
                let to = Type::array(st.dtype, vec![rows, st.shape[2].clone()]);
                states = b.push("", Op::Reshape, &[states], Some(&to))?;
                lead.insert(0, len.clone());
            }
            let parts = b.unpack_flat(states, leaf_tys, widths, true)?;
            let mut out = Vec::with_capacity(parts.len());
            for (p, t) in parts.into_iter().zip(leaf_tys) {
                let mut shape = lead.clone();
                shape.extend(t.shape.iter().cloned());
                let to = Type::array(t.dtype, shape);
                out.push(if b.ty(p) == &to {
                    p
                } else {
                    b.push("", Op::Reshape, &[p], Some(&to))?
                });
            }
            Ok(out)
        })();
        match built {
            Ok(vs) => self.flat_finals(vs, masks, state),
            Err(e) => self.bug(format!("the states of `scan_all`: {e}")),
        }
    }

    /// The tape of loop `id` keeping every state (`looptape L 1`), run on
    /// `ins`; None if that failed (reported).
    fn every_state_tape(&mut self, id: u32, ins: &[VarId], hint: &str) -> Option<VarId> {
        let lp = &self.b.function().loops[id as usize];
        let tape_ty = with_rows(lp.tape_rows(1), lp.state());
        match self.push_plain(
            format!("{hint}.tape").trim_start_matches('.'),
            Op::LoopTape(id, 1, true),
            ins,
            Some(&tape_ty),
        ) {
            Val::Var(tape) => Some(tape),
            _ => None,
        }
    }

    /// Why `next` cannot follow `prev` as an iteration state, if it cannot.
    pub(super) fn state_change(&self, prev: &Val, next: &Val) -> Option<String> {
        match (prev, next) {
            (Val::Err, _) | (_, Val::Err) => None,
            (Val::Tuple(a), Val::Tuple(b)) if a.len() == b.len() => {
                a.iter().zip(b).find_map(|(x, y)| self.state_change(x, y))
            }
            (Val::Var(a), Val::Var(b)) if self.ty(*a) != self.ty(*b) => {
                Some(format!("it goes from {} to {}", self.ty(*a), self.ty(*b)))
            }
            (
                Val::Var(_) | Val::Const(_) | Val::Int(_) | Val::Count(..),
                Val::Var(_) | Val::Const(_) | Val::Int(_) | Val::Count(..),
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
