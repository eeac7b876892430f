//! Arrays and indexing: `x[k]`, gathers and `scatter_add`, conversions,
//! `argmax`/`argmin`, and the array builtins `reverse` and `concat`
//! (`tabulate` is `tabulate.rs`).

use super::{arity_message, exact_int, FnCx, Val};
use crate::error::span::{Diagnostic, Span};
use crate::ir::interp::pack_site;
use crate::ir::VarId;
use crate::lang::ast::*;
use crate::ops::Op;
use crate::types::{DType, Dim, Type};

impl<'a> FnCx<'a> {
    /// `x[k]` (a static row) or `x[i + c]` (rows of `x` along the index of
    /// the enclosing `tabulate`).
    pub(super) fn index(&mut self, v: Val, vspan: Span, k: Val, kspan: Span, hint: &str) -> Val {
        // Elements of a condition are conditions.
        if let Val::Mask(m) = v {
            if !self.ty(m).is_scalar() {
                return match self.index(Val::Var(m), vspan, k, kspan, hint) {
                    Val::Var(x) => Val::Mask(x),
                    other => other,
                };
            }
        }
        let x = match v {
            Val::Err => return Val::Err,
            Val::Var(x) if !self.ty(x).is_scalar() => x,
            other => {
                let t = self.describe(&other);
                self.error(Diagnostic::new(
                    vspan,
                    format!("only arrays can be indexed, but this has type {t}"),
                ));
                return Val::Err;
            }
        };
        let t = self.ty(x);
        let rows = t.shape[0].clone();
        let rest = t.shape[1..].to_vec();
        let k = match k {
            Val::Err => return Val::Err,
            Val::Const(c) => match exact_int(c) {
                Some(n) => Val::Int(n),
                None => {
                    self.error(Diagnostic::new(
                        kspan,
                        format!("an index must be an integer, but this is {c}"),
                    ));
                    return Val::Err;
                }
            },
            k => k,
        };
        if self.batched.contains(&x) && !matches!(k, Val::Int(n) | Val::Idx(n) if n < 0) {
            return self.index_stacked(x, k, kspan, hint);
        }
        match k {
            Val::Int(n) | Val::Idx(n) if n < 0 => {
                self.error(
                    Diagnostic::new(kspan, format!("index {n} is negative"))
                        .with_note("egrad counts indices from 0 at the front only")
                        .with_help(format!(
                            "element {} from the end of an array `x` is `reverse(x)[{}]`",
                            -n,
                            -n - 1
                        )),
                );
                Val::Err
            }
            Val::Int(n) => {
                if !self.row_fits(n, &rows, kspan) {
                    return Val::Err;
                }
                self.push(hint, Op::Index(n as u64), &[x], None)
            }
            Val::Idx(off) => {
                let Some(len) = self.own_len.clone() else {
                    return self.bug("a tabulate index outside `tabulate`");
                };
                if !self.rows_fit(off, &len, &rows, kspan) {
                    return Val::Err;
                }
                let mut shape = vec![len];
                shape.extend(rest);
                let hint = if self.outer.is_empty() { hint } else { "" };
                match self.push_plain(
                    hint,
                    Op::Slice(off as u64),
                    &[x],
                    Some(&Type::array(t.dtype, shape)),
                ) {
                    Val::Var(s) => self.inner_rows(s),
                    other => other,
                }
            }
            Val::Count(_, k) => self.gather(x, k, kspan, hint),
            Val::Var(k) if self.ty(k).dtype == DType::I64 => {
                // Along the index of an enclosing `tabulate`: its rows.
                if let Some(r) = self.outer_index_rows(x, k) {
                    return r;
                }
                self.gather(x, k, kspan, hint)
            }
            other => self.not_an_index(&other, kspan),
        }
    }

    /// The error for an index `k` that is not an integer (a floating-point
    /// value gets a note on converting it).
    pub(super) fn not_an_index(&mut self, k: &Val, kspan: Span) -> Val {
        let what = self.describe(k);
        let mut d = Diagnostic::new(
            kspan,
            format!("an index must be an integer (static, run-time `i64`, or the index of `tabulate`), but this is {what}"),
        );
        if matches!(k, Val::Var(_)) {
            d = d.with_note("convert a floating-point index with `i64(...)`");
        }
        self.error(d);
        Val::Err
    }

    /// Whether a static index `n` (not negative) can be a row of `rows`
    /// rows; an error at `kspan` when it cannot (a literal length).
    pub(super) fn row_fits(&mut self, n: i64, rows: &Dim, kspan: Span) -> bool {
        match rows {
            Dim::Lit(d) if n as u64 >= *d => {
                self.error(Diagnostic::new(
                    kspan,
                    format!("index {n} is out of range for an array of length {d}"),
                ));
                false
            }
            _ => true,
        }
    }

    /// Whether rows `off .. off + len` (a `tabulate` of length `len`
    /// reading at offset `off`) can be read from `rows` rows; an error at
    /// `kspan` when they cannot (literal lengths).
    pub(super) fn rows_fit(&mut self, off: i64, len: &Dim, rows: &Dim, kspan: Span) -> bool {
        match (rows, len) {
            (Dim::Lit(d), Dim::Lit(l)) if off as u64 + l > *d => {
                self.error(Diagnostic::new(
                    kspan,
                    format!("`tabulate` over {l} reads rows {off}..{} of an array of length {d}, out of range", off as u64 + l),
                ));
                false
            }
            _ => true,
        }
    }

    /// `x[k]` with run-time `i64` indices `k` (a scalar or an array, or a
    /// stack of them inside `tabulate`): rows `k` of `x`, each checked at
    /// run time (an error at `kspan` when outside).
    pub(super) fn gather(&mut self, x: VarId, k: VarId, kspan: Span, hint: &str) -> Val {
        let site = pack_site(kspan.start, kspan.end);
        let r = self.push_plain(hint, Op::Gather(site), &[x, k], None);
        if let Val::Var(g) = r {
            self.note_gather(g);
            if self.batched.contains(&k) {
                self.batched.insert(g);
            }
        }
        r
    }

    /// `scatter_add(x, idx, rows)`: `x` with `rows[j]` added at row
    /// `idx[j]` of it, for every `j` (the adjoint of `x[idx]`).
    pub(super) fn scatter_add(&mut self, e: &Expr, args: &[Expr], hint: &str) -> Val {
        if args.len() != 3 {
            self.error(Diagnostic::new(
                e.span,
                arity_message("scatter_add", 3, args.len()),
            ));
            return Val::Err;
        }
        let mut vals = Vec::new();
        for a in args {
            let v = self.lower(a, &[]);
            let v = self.single(v, a.span);
            vals.push(self.number(v));
        }
        let x = match &vals[0] {
            Val::Var(x) if !self.ty(*x).is_scalar() => *x,
            Val::Err => return Val::Err,
            other => {
                let t = self.describe(other);
                self.error(Diagnostic::new(
                    args[0].span,
                    format!("`scatter_add` adds into an array, but this has type {t}"),
                ));
                return Val::Err;
            }
        };
        let idx = match &vals[1] {
            Val::Var(k) if self.ty(*k).dtype == DType::I64 => *k,
            Val::Int(n) => self.b.constant(DType::I64, *n as f64),
            Val::Const(c) if exact_int(*c).is_some() => self.b.constant(DType::I64, *c),
            Val::Err => return Val::Err,
            other => {
                let t = self.describe(other);
                self.error(Diagnostic::new(
                    args[1].span,
                    format!("the indices of `scatter_add` must be i64, but this has type {t}"),
                ));
                return Val::Err;
            }
        };
        let xt = self.ty(x);
        let mut rows = self.ty(idx).shape.clone();
        rows.extend(xt.shape[1..].iter().cloned());
        let rows = Type::array(xt.dtype, rows);
        let v = match &vals[2] {
            Val::Const(c) => match self.materialize(*c, &rows, "") {
                Val::Var(v) => v,
                _ => return Val::Err,
            },
            Val::Var(v) => *v,
            Val::Err => return Val::Err,
            other => {
                let t = self.describe(other);
                self.error(Diagnostic::new(
                    args[2].span,
                    format!("`scatter_add` adds numbers or arrays, but this has type {t}"),
                ));
                return Val::Err;
            }
        };
        if self.ty(v) != rows {
            let vt = self.ty(v);
            self.error(
                Diagnostic::new(args[2].span, format!("`scatter_add` needs one row per index, of type {rows}, but this has type {vt}"))
                    .with_label(args[1].span, format!("indices of type {}", self.ty(idx))),
            );
            return Val::Err;
        }
        // One row at a static index inside the rows: `unindex`, an index
        // map (the adjoint of `x[k]`).
        let static_row = match (&vals[1], &xt.shape[0]) {
            (Val::Int(n), Dim::Lit(d)) => *n >= 0 && (*n as u64) < *d,
            (Val::Int(n), _) => *n >= 0,
            _ => false,
        };
        let s = if static_row {
            let Val::Int(n) = vals[1] else {
                return Val::Err;
            };
            self.push("", Op::Unindex(n as u64), &[v], Some(&xt))
        } else {
            let site = pack_site(args[1].span.start, args[1].span.end);
            self.push("", Op::Scatter(site), &[idx, v], Some(&xt))
        };
        let Val::Var(s) = s else {
            return Val::Err;
        };
        self.push(hint, Op::Add, &[x, s], None)
    }

    /// `f64(x)`, `f32(x)`, `i64(x)`: a number or array converted to the
    /// element type (see [`Op::Convert`]); a condition gives 1 or 0.
    pub(super) fn convert(&mut self, e: &Expr, to: DType, args: &[Expr], hint: &str) -> Val {
        let name = to.name();
        if args.len() != 1 {
            self.error(Diagnostic::new(e.span, arity_message(name, 1, args.len())));
            return Val::Err;
        }
        let v = self.lower(&args[0], &[]);
        let v = self.single(v, args[0].span);
        let v = self.number(v);
        let int = to == DType::I64;
        match v {
            Val::Err => Val::Err,
            Val::Bool(b) => Val::Const(f64::from(u8::from(b))),
            Val::Int(i) if int => Val::Int(i),
            Val::Int(i) => Val::Const(i as f64),
            Val::Const(c) if int => Val::Int(c as i64),
            Val::Const(c) => Val::Const(c),
            Val::Mask(m) => Val::Var(self.mask_as(m, to)),
            Val::Var(x) => {
                let from = self.ty(x).dtype;
                if from == to {
                    Val::Var(x)
                } else {
                    self.push(hint, Op::Convert(to), &[x], None)
                }
            }
            other => {
                let t = self.describe(&other);
                self.error(Diagnostic::new(
                    args[0].span,
                    format!("`{name}` converts numbers, but this has type {t}"),
                ));
                Val::Err
            }
        }
    }

    /// A two-argument builtin (`pow`, `max`, `min`): element-wise with
    /// scalar broadcasting, like the arithmetic operators.
    /// The arguments of `reverse` or `flatten` (one) or `concat` (two),
    /// each an array of rank 1 or more; None after reporting an error.
    pub(super) fn array_args(&mut self, e: &Expr, name: &str, args: &[Expr]) -> Option<Vec<VarId>> {
        let want = if name == "concat" { 2 } else { 1 };
        let vals: Vec<Val> = args
            .iter()
            .map(|a| {
                let v = self.lower(a, &[]);
                self.single(v, a.span)
            })
            .collect();
        if args.len() != want {
            self.error(Diagnostic::new(
                e.span,
                arity_message(name, want, args.len()),
            ));
            return None;
        }
        let mut xs = Vec::with_capacity(want);
        let mut ok = true;
        for (v, a) in vals.into_iter().zip(args) {
            match self.array_arg(name, v, a.span) {
                Some(x) => xs.push(x),
                None => ok = false,
            }
        }
        ok.then_some(xs)
    }

    /// `argmax(x)` or `argmin(x)`: the index of the first largest
    /// (smallest) element of a vector, an `i64`, or of each row of a
    /// matrix, an `i64[M]`; the index of the first NaN if there is one
    /// (NumPy's rule), and the largest `i64` for an empty row. No op of
    /// its own: the extremum (`maxall`, or `maxtail` per row) broadcast
    /// back, the elements equal to it or NaN, and the least of their
    /// indices (`iota`, `select`, `minall` or `mintail`). The indices
    /// carry no derivative; `x[argmax(x)]` is a gather, differentiable.
    pub(super) fn arg_extremum(&mut self, e: &Expr, name: &str, x: VarId, hint: &str) -> Val {
        let t = self.ty(x);
        if t.rank() > 2 {
            self.error(Diagnostic::new(
                e.span,
                format!("`{name}` takes a vector or a matrix (the index in each row), but this has type {t}"),
            ));
            return Val::Err;
        }
        let (ext, first, spread) = match (t.rank(), name == "argmax") {
            (1, true) => (Op::MaxAll, Op::MinAll, Op::Bcast),
            (1, false) => (Op::MinAll, Op::MinAll, Op::Bcast),
            (_, true) => (Op::MaxTail, Op::MinTail, Op::Spread),
            (_, false) => (Op::MinTail, Op::MinTail, Op::Spread),
        };
        let ints = Type::array(DType::I64, t.shape.clone());
        let Val::Var(m) = self.push("", ext, &[x], None) else {
            return Val::Err;
        };
        let Val::Var(m) = self.push("", spread, &[m], Some(&t)) else {
            return Val::Err;
        };
        let Val::Var(mut hit) = self.push("", Op::Eq, &[x, m], None) else {
            return Val::Err;
        };
        if t.dtype != DType::I64 {
            // The extremum is NaN when some element is: the NaNs are hits.
            let Val::Var(nan) = self.push("", Op::Ne, &[x, x], None) else {
                return Val::Err;
            };
            let Val::Var(h) = self.push("", Op::Max, &[hit, nan], None) else {
                return Val::Err;
            };
            hit = self.mask_as(h, DType::I64);
        }
        let row = Type::array(DType::I64, vec![t.shape[t.rank() - 1].clone()]);
        let Val::Var(mut idx) = self.push_plain("", Op::Iota, &[], Some(&row)) else {
            return Val::Err;
        };
        if t.rank() == 2 {
            let Val::Var(r) = self.push_plain("", Op::Repeat, &[idx], Some(&ints)) else {
                return Val::Err;
            };
            idx = r;
        }
        let Val::Var(none) = self.materialize(i64::MAX as f64, &ints, "") else {
            return Val::Err;
        };
        let Val::Var(c) = self.push("", Op::Select, &[hit, idx, none], None) else {
            return Val::Err;
        };
        self.push(hint, first, &[c], None)
    }

    /// `concat(a, b)`: the rows of `a`, then those of `b`; its length is
    /// the sum of theirs (`N+1`, `M+N`). No op of its own: with `a` of
    /// integer length `k`, `pad 0 a + pad k b` (each placed in an array
    /// of the result's type whose other elements are `-0.0`, which the sum
    /// leaves exactly as they are); with `b` of integer length, the parts
    /// swapped between two reversals, `reverse(concat(reverse(b),
    /// reverse(a)))`; with neither, `pad 0 a + reverse(pad 0 (reverse
    /// b))`. Gradients follow from those of `pad`, `add` and `reverse`.
    pub(super) fn concat(&mut self, e: &Expr, args: &[Expr], xs: &[VarId], hint: &str) -> Val {
        let (a, b) = (xs[0], xs[1]);
        let (ta, tb) = (self.ty(a), self.ty(b));
        if ta.dtype != tb.dtype || ta.rank() != tb.rank() || ta.shape[1..] != tb.shape[1..] {
            let why = if ta.dtype != tb.dtype {
                "of one element type"
            } else if ta.rank() != tb.rank() {
                "of one rank"
            } else {
                "whose rows have one shape (the same dimensions after the first)"
            };
            self.error(
                Diagnostic::new(
                    e.span,
                    format!("`concat` joins arrays {why}, but got {ta} and {tb}"),
                )
                .with_label(args[0].span, format!("this has type {ta}"))
                .with_label(args[1].span, format!("this has type {tb}")),
            );
            return Val::Err;
        }
        let (la, lb) = (&ta.shape[0], &tb.shape[0]);
        let Some(len) = la.plus(lb) else {
            let show = |d: &Dim| match d {
                Dim::Sub(..) | Dim::Expr(_) => format!("({d})"),
                _ => d.to_string(),
            };
            self.error(Diagnostic::new(
                e.span,
                format!(
                    "`concat` of {ta} and {tb} would have {} + {} rows, and that size is not supported",
                    show(la),
                    show(lb)
                ),
            ));
            return Val::Err;
        };
        // Joining an empty part changes nothing.
        if la == &Dim::Lit(0) {
            return Val::Var(b);
        }
        if lb == &Dim::Lit(0) {
            return Val::Var(a);
        }
        let mut shape = vec![len];
        shape.extend(ta.shape[1..].iter().cloned());
        let out = Type::array(ta.dtype, shape);
        match (la, lb) {
            (Dim::Lit(k), _) => self.join(hint, a, *k, b, &out),
            (_, Dim::Lit(k)) => {
                let (Val::Var(rb), Val::Var(ra)) =
                    (self.reverse_rows("", b), self.reverse_rows("", a))
                else {
                    return Val::Err;
                };
                let Val::Var(j) = self.join("", rb, *k, ra, &out) else {
                    return Val::Err;
                };
                self.reverse_rows(hint, j)
            }
            _ => {
                // No part of integer length: `b` placed at the end by
                // reversing it into rows `0..` of the reversed result.
                let Val::Var(rb) = self.reverse_rows("", b) else {
                    return Val::Err;
                };
                let (Val::Var(pa), Val::Var(pb)) = (
                    self.placed(Op::Pad(0), a, &out),
                    self.placed(Op::Pad(0), rb, &out),
                ) else {
                    return Val::Err;
                };
                let Val::Var(end) = self.reverse_rows("", pb) else {
                    return Val::Err;
                };
                self.push(hint, Op::Add, &[pa, end], None)
            }
        }
    }

    /// `reverse x`; `x` itself when it has at most one row (a reversal
    /// that moves nothing, as in `concat` of a single row).
    pub(super) fn reverse_rows(&mut self, hint: &str, x: VarId) -> Val {
        let one_row = matches!(self.ty(x).shape.first(), Some(Dim::Lit(0 | 1)));
        if one_row && !self.batched.contains(&x) {
            return Val::Var(x);
        }
        self.push(hint, Op::Reverse, &[x], None)
    }

    /// `pad 0 a + pad k b` in the type `out`: `a` (of `k` rows) then `b`.
    fn join(&mut self, hint: &str, a: VarId, k: u64, b: VarId, out: &Type) -> Val {
        let (Val::Var(pa), Val::Var(pb)) = (
            self.placed(Op::Pad(0), a, out),
            self.placed(Op::Pad(k), b, out),
        ) else {
            return Val::Err;
        };
        self.push(hint, Op::Add, &[pa, pb], None)
    }

    /// `op x` (a `pad`: `x` placed among zeros of type `out`), the zeros
    /// `-0.0` for floats, so that a sum of placements keeps every bit
    /// (see `Builder::place`).
    fn placed(&mut self, op: Op, x: VarId, out: &Type) -> Val {
        if self.ty(x).dtype.is_int() {
            return self.push("", op, &[x], Some(out));
        }
        let Val::Var(n) = self.push("", Op::Neg, &[x], None) else {
            return Val::Err;
        };
        let Val::Var(p) = self.push("", op, &[n], Some(out)) else {
            return Val::Err;
        };
        self.push("", Op::Neg, &[p], None)
    }
}
