//! Expressions: names, `let` and patterns, unary and binary operators
//! (with static folding and broadcasting), `&&`/`||`, and `if`.

use super::builtins::is_reserved;
use super::{fold, plural, result_expr, FnCx, Val};
use crate::error::span::{Diagnostic, Span};
use crate::ir::VarId;
use crate::lang::ast::*;
use crate::ops::Op;
use crate::types::{DType, Dim, Type};

impl<'a> FnCx<'a> {
    /// A non-tuple value, or an error.
    pub(super) fn single(&mut self, v: Val, span: Span) -> Val {
        if let Val::Tuple(vs) = &v {
            self.error(
                Diagnostic::new(
                    span,
                    format!(
                        "expected a single value, found a tuple of {} values",
                        vs.len()
                    ),
                )
                .with_note("take a tuple apart with `let (a, b) = ...`"),
            );
            return Val::Err;
        }
        v
    }

    pub(super) fn lower(&mut self, e: &Expr, hints: &[&str]) -> Val {
        let hint = hints.first().copied().unwrap_or("");
        match &e.kind {
            ExprKind::Num { value, .. } => Val::Const(*value),
            ExprKind::Name(n) => self.lookup(n, e.span),
            ExprKind::Unary {
                op,
                op_span,
                operand,
            } => {
                let v = self.lower(operand, &[]);
                let v = self.single(v, operand.span);
                self.unary(*op, *op_span, (v, operand.span), hint)
            }
            ExprKind::Binary {
                op,
                op_text,
                op_span,
                lhs,
                rhs,
            } => {
                let l = self.lower(lhs, &[]);
                let l = self.single(l, lhs.span);
                let r = self.lower(rhs, &[]);
                let r = self.single(r, rhs.span);
                self.binary(*op, op_text, *op_span, (l, lhs.span), (r, rhs.span), hint)
            }
            ExprKind::Call { callee, args } => self.call(e, callee, args, hints),
            ExprKind::Tuple(es) => {
                let mut vs = Vec::new();
                for (k, x) in es.iter().enumerate() {
                    let h = hints.get(k).copied().unwrap_or("");
                    let v = self.lower(x, &[h]);
                    vs.push(self.single(v, x.span));
                }
                Val::Tuple(vs)
            }
            ExprKind::Block(b) => {
                let mark = self.env.len();
                for l in &b.lets {
                    self.lower_let(l);
                }
                let v = self.lower(&b.result, hints);
                self.env.truncate(mark);
                v
            }
            ExprKind::Bool(b) => Val::Bool(*b),
            ExprKind::If { cond, then, els } => self.lower_if(cond, then, els, hints),
            ExprKind::Match { scrutinee, arms } => self.lower_match(e, scrutinee, arms, hints),
            ExprKind::Index { base, indices } => {
                let v = self.lower(base, &[]);
                let mut v = self.single(v, base.span);
                let ks: Vec<Val> = indices
                    .iter()
                    .map(|ix| {
                        let k = self.lower(ix, &[]);
                        self.single(k, ix.span)
                    })
                    .collect();
                // `X[i, k]` along the index of `tabulate`: column k of X,
                // read along i (`transpose(X)[k][i]`).
                if let ([Val::Idx(_), col], Val::Var(x)) = (&ks[..], &v) {
                    if self.ty(*x).rank() == 2 && !self.batched.contains(x) {
                        if let Val::Var(t) = self.push("", Op::Transpose, &[*x], None) {
                            let c = self.index(
                                Val::Var(t),
                                base.span,
                                col.clone(),
                                indices[1].span,
                                "",
                            );
                            return self.index(c, base.span, ks[0].clone(), indices[0].span, hint);
                        }
                    }
                }
                for (k, ix) in ks.into_iter().zip(indices) {
                    v = self.index(v, base.span, k, ix.span, hint);
                }
                v
            }
            ExprKind::Tabulate { size, param, body } => {
                self.tabulate(e.span, size, param, body, hints)
            }
            ExprKind::Reshape { shape, arg } => {
                self.reshape(e, shape, arg, hints.first().copied().unwrap_or(""))
            }
            ExprKind::Draw { normal, shape, key } => {
                self.draw(e, *normal, shape, key, hints.first().copied().unwrap_or(""))
            }
            ExprKind::Lambda { .. } => {
                self.error(Diagnostic::new(
                    e.span,
                    "a step function `x => ...` is only allowed in `iterate` and `iterate_until`",
                ));
                Val::Err
            }
        }
    }

    /// A unary operator on a lowered operand.
    pub(super) fn unary(
        &mut self,
        op: UnOp,
        op_span: Span,
        (v, span): (Val, Span),
        hint: &str,
    ) -> Val {
        let v = self.number(v);
        let reduction = match op {
            UnOp::Sum => Some((Op::Sum, "+/", "sums")),
            UnOp::Max => Some((Op::MaxAll, "max/", "takes the largest of")),
            UnOp::Min => Some((Op::MinAll, "min/", "takes the smallest of")),
            UnOp::Neg | UnOp::Not => None,
        };
        match (op, v) {
            (_, Val::Err) | (_, Val::Tuple(_)) => Val::Err,
            (UnOp::Neg, Val::Const(x)) => Val::Const(-x),
            (UnOp::Neg, Val::Int(i)) => match i.checked_neg() {
                Some(n) => Val::Int(n),
                None => {
                    self.error(Diagnostic::new(op_span, "this static integer overflows"));
                    Val::Err
                }
            },
            (UnOp::Neg, Val::Var(x)) => self.push(hint, Op::Neg, &[x], None),
            (UnOp::Not, Val::Bool(b)) => Val::Bool(!b),
            (UnOp::Not, Val::Mask(m)) => {
                let t = self.ty(m);
                let Val::Var(z) = self.materialize(0.0, &t, "") else {
                    return Val::Err;
                };
                match self.push(hint, Op::Eq, &[m, z], None) {
                    Val::Var(x) => Val::Mask(x),
                    other => other,
                }
            }
            (UnOp::Not, v) => {
                let t = self.describe(&v);
                self.error(
                    Diagnostic::new(op_span, "`!` needs a bool")
                        .with_label(span, format!("this has type {t}")),
                );
                Val::Err
            }
            (UnOp::Neg, v @ (Val::Bool(_) | Val::Mask(_))) => {
                let t = self.describe(&v);
                self.error(
                    Diagnostic::new(op_span, "`-` needs a number")
                        .with_label(span, format!("this has type {t}")),
                );
                Val::Err
            }
            (_, Val::Var(x)) if !self.ty(x).is_scalar() => match reduction {
                Some((irop, _, _)) => self.push(hint, irop, &[x], None),
                None => self.bug("unary: unhandled operator"),
            },
            (_, v) => {
                let t = self.describe(&v);
                let (text, verb) = reduction.map(|r| (r.1, r.2)).unwrap_or(("?", "reduces"));
                let is = if matches!(v, Val::Var(_) | Val::Const(_) | Val::Int(_)) {
                    "a scalar"
                } else {
                    "not an array"
                };
                self.error(
                    Diagnostic::new(
                        op_span,
                        format!(
                            "`{text}` {verb} the elements of an array, but its operand is {is}"
                        ),
                    )
                    .with_label(span, format!("this has type {t}")),
                );
                Val::Err
            }
        }
    }

    /// `if c { a } else { b }`: a static condition picks one branch at
    /// compile time (the other is not lowered); a dynamic one lowers both
    /// and selects, element by element.
    fn lower_if(&mut self, cond: &Expr, then: &Expr, els: &Expr, hints: &[&str]) -> Val {
        let c = self.lower(cond, &[]);
        let c = self.single(c, cond.span);
        match c {
            Val::Err => Val::Err,
            Val::Bool(true) => self.lower(then, hints),
            Val::Bool(false) => self.lower(els, hints),
            Val::Mask(m) => {
                let a = self.lower(then, hints);
                let a = self.number(a);
                let a_real = written_real(&a, then);
                let b = self.lower(els, hints);
                let b = self.number(b);
                let b_real = written_real(&b, els);
                self.select_branches(
                    m,
                    (a, result_expr(then).span, a_real),
                    (b, result_expr(els).span, b_real),
                    hints,
                )
            }
            other => {
                let t = self.describe(&other);
                self.error(
                    Diagnostic::new(
                        cond.span,
                        format!("the condition of `if` must be a bool, but it has type {t}"),
                    )
                    .with_note("compare numbers with `<`, `<=`, `>`, `>=`, `==` or `!=`"),
                );
                Val::Err
            }
        }
    }

    /// `if m { a } else { b }` for the run-time condition `m`, of branches
    /// already lowered (each with its span and whether it is a number
    /// written as a real, [`written_real`]).
    pub(super) fn select_branches(
        &mut self,
        m: VarId,
        (a, a_span, a_real): (Val, Span, bool),
        (b, b_span, b_real): (Val, Span, bool),
        hints: &[&str],
    ) -> Val {
        // Two numbers known at compile time under a condition on
        // integers: the branches take the condition's type, `i64`,
        // unless one of them is not an integer (`0.5`, `abs(1.5)`)
        // or is written as a real (`1.0`, `1e3`); then they are
        // `f64`, the type of a literal without context, instead of
        // being truncated.
        let consts = match (&a, &b) {
            (Val::Const(_) | Val::Int(_), Val::Const(_) | Val::Int(_))
                if self.ty(m).dtype == DType::I64 && (a_real || b_real) =>
            {
                let num = |v: &Val| match v {
                    Val::Const(c) => *c,
                    Val::Int(i) => *i as f64,
                    _ => f64::NAN,
                };
                Some((num(&a), num(&b)))
            }
            _ => None,
        };
        let picked = consts.map(|(x, y)| (m, x, y));
        let m = if consts.is_some() {
            self.mask_as(m, DType::F64)
        } else {
            m
        };
        let v = self.select(m, (a, a_span), (b, b_span), hints);
        if let (Val::Var(x), Some(p)) = (&v, picked) {
            self.picks.insert(*x, p);
        }
        v
    }

    /// `x` in element type `d` when it is a selection between two numbers
    /// under a condition on integers (see `FnCx::picks`) and `d` is a
    /// float type: the selection made again in `d`.
    pub(super) fn repick(&mut self, x: VarId, d: DType) -> Option<VarId> {
        let &(m, a, b) = self.picks.get(&x)?;
        if d.is_int() || self.ty(x).dtype == d {
            return None;
        }
        self.make_pick(m, a, b, d)
    }

    /// `if m { a } else { b }` in element type `d`, for the integer
    /// condition `m`, recorded in `FnCx::picks`.
    fn make_pick(&mut self, m: VarId, a: f64, b: f64, d: DType) -> Option<VarId> {
        let mask = self.mask_as(m, d);
        let at = Span::default();
        match self.select(mask, (Val::Const(a), at), (Val::Const(b), at), &[]) {
            Val::Var(y) => {
                self.picks.insert(y, (m, a, b));
                Some(y)
            }
            _ => None,
        }
    }

    /// Select between two lowered branches under a dynamic mask.
    pub(super) fn select(
        &mut self,
        m: VarId,
        (a, aspan): (Val, Span),
        (b, bspan): (Val, Span),
        hints: &[&str],
    ) -> Val {
        match (a, b) {
            (Val::Err, _) | (_, Val::Err) => Val::Err,
            (Val::Tuple(xs), Val::Tuple(ys)) if xs.len() == ys.len() => {
                let mut out = Vec::new();
                for (k, (x, y)) in xs.into_iter().zip(ys).enumerate() {
                    let h = hints.get(k).copied().unwrap_or("");
                    out.push(self.select(m, (x, aspan), (y, bspan), &[h]));
                }
                Val::Tuple(out)
            }
            (a, b) => {
                // A run-time `i64` parameter (or the index of `tabulate`)
                // is a number like any other here.
                let (a, b) = (self.number(a), self.number(b));
                let mask_ty = self.ty(m);
                // Selections between two numbers under a condition on
                // integers (`FnCx::picks`) take a float condition's
                // precision, as numbers do, where no branch is a value of
                // its own: `if x < 1.0 { a } else { 3.0 }` for an `f32` x.
                let picked = |cx: &Self, v: &Val| match v {
                    Val::Var(x) => cx.picks.contains_key(x),
                    _ => true,
                };
                let (a, b) = if matches!(mask_ty.dtype, DType::F32 | DType::F64)
                    && picked(self, &a)
                    && picked(self, &b)
                {
                    let mut repicked = |v: Val| match v {
                        Val::Var(x) => Val::Var(self.repick(x, mask_ty.dtype).unwrap_or(x)),
                        v => v,
                    };
                    (repicked(a), repicked(b))
                } else {
                    (a, b)
                };
                // The branches' common type: a typed branch types a number,
                // and a scalar branch (or condition) is broadcast to an array.
                let widest = [&a, &b]
                    .into_iter()
                    .filter_map(|v| match v {
                        Val::Var(x) => Some(self.ty(*x)),
                        _ => None,
                    })
                    .chain(std::iter::once(mask_ty.clone()))
                    .max_by_key(|t| t.rank());
                // (The shape only: a condition on integers may select
                // values of any type, so a scalar branch keeps its own.)
                let (a, b) = match &widest {
                    Some(w) if !w.is_scalar() => {
                        let mut lift = |v: Val| match v {
                            Val::Var(x) if self.ty(x).is_scalar() => {
                                let to = Type::array(self.ty(x).dtype, w.shape.clone());
                                match self.bcast(x, &to) {
                                    Some(y) => Val::Var(y),
                                    None => Val::Err,
                                }
                            }
                            v => v,
                        };
                        (lift(a), lift(b))
                    }
                    _ => (a, b),
                };
                let ty = match (&a, &b) {
                    (Val::Var(x), _) | (_, Val::Var(x)) => self.ty(*x),
                    (Val::Const(_) | Val::Int(_), Val::Const(_) | Val::Int(_))
                        if !mask_ty.is_scalar() =>
                    {
                        mask_ty.clone()
                    }
                    (Val::Const(_) | Val::Int(_), Val::Const(_) | Val::Int(_)) => mask_ty.clone(),
                    _ => {
                        let (ta, tb) = (self.describe(&a), self.describe(&b));
                        self.error(
                            Diagnostic::new(aspan, format!("the branches of this `if` have types {ta} and {tb}; a dynamic condition needs numbers or arrays"))
                                .with_label(bspan, format!("this has type {tb}")),
                        );
                        return Val::Err;
                    }
                };
                let (x, y) = match (self.coerce(&a, &ty), self.coerce(&b, &ty)) {
                    (Some(Val::Var(x)), Some(Val::Var(y))) => (x, y),
                    (Some(Val::Err), _) | (_, Some(Val::Err)) => return Val::Err,
                    _ => {
                        let (ta, tb) = (self.describe(&a), self.describe(&b));
                        self.error(
                            Diagnostic::new(
                                aspan,
                                format!(
                                    "the branches of this `if` have different types: {ta} and {tb}"
                                ),
                            )
                            .with_label(bspan, format!("this has type {tb}")),
                        );
                        return Val::Err;
                    }
                };
                // A condition on integers selects values of any type, and
                // one on floats selects integers (its mask, 1 or 0, is
                // converted exactly); floats of two precisions do not mix.
                let ints = [mask_ty.dtype, ty.dtype].contains(&DType::I64);
                let (m, mask_ty) = if ints && mask_ty.dtype != ty.dtype {
                    let c = self.mask_as(m, ty.dtype);
                    (c, self.ty(c))
                } else {
                    (m, mask_ty)
                };
                if mask_ty.dtype != ty.dtype {
                    self.error(Diagnostic::new(aspan, format!(
                        "the condition compares {} values but the branches are {}; compare values of the branches' precision",
                        mask_ty.dtype, ty.dtype
                    )));
                    return Val::Err;
                }
                let mask = if mask_ty == ty {
                    m
                } else if mask_ty.is_scalar() {
                    match self.bcast(m, &ty) {
                        Some(v) => v,
                        None => return Val::Err,
                    }
                } else {
                    self.error(Diagnostic::new(
                        aspan,
                        format!(
                            "the condition has type {} but the branches have type {ty}",
                            self.describe(&Val::Mask(m))
                        ),
                    ));
                    return Val::Err;
                };
                let hint = hints.first().copied().unwrap_or("");
                self.push(hint, Op::Select, &[mask, x, y], None)
            }
        }
    }

    /// Size parameter `n` as a number, a count (`iterate(N, ...)`) as
    /// well: an `i64` read (`dim`) from the shape of the first parameter
    /// with an axis of length `n`, or of an `iota` of that length (never
    /// computed: `dim` reads no element).
    fn size_value(&mut self, n: &str) -> Val {
        let f = self.b.function();
        let want = Dim::Param(n.to_string());
        let found = f.params.iter().find_map(|p| {
            let k = f.ty(p.var).shape.iter().position(|d| *d == want)?;
            Some((p.var, k))
        });
        let (x, k) = match found {
            Some(found) => found,
            None => {
                let t = Type::array(DType::I64, vec![want]);
                match self.push_plain("", Op::Iota, &[], Some(&t)) {
                    Val::Var(i) => (i, 0),
                    other => return other,
                }
            }
        };
        match self.push_plain(n, Op::Dim(k as u64), &[x], None) {
            Val::Var(v) => Val::Count(n.to_string(), v),
            other => other,
        }
    }

    /// `v` converted to the element type of `other` when `v` is a size
    /// (an `i64`: `N`, `R * C`, `N - 1`) and `other` a float: exact below
    /// 2^53. Other integers (an `i64` parameter) are never converted
    /// implicitly.
    fn count_as_float(&mut self, v: Val, other: &Val) -> Val {
        let x = match (&v, other) {
            (Val::Count(_, x) | Val::Var(x), Val::Var(_))
                if self.ty(*x) == Type::scalar(DType::I64) =>
            {
                *x
            }
            _ => return v,
        };
        let Val::Var(o) = other else { return v };
        let d = self.ty(*o).dtype;
        if d.is_int() || d == DType::Bool || !self.size_like(x, 8) {
            return v;
        }
        self.push_plain("", Op::Convert(d), &[x], None)
    }

    /// Whether `i64` variable `v` is computed from sizes alone (`dim`,
    /// integer literals, `+ - *`), looking `depth` statements down.
    fn size_like(&self, v: VarId, depth: u32) -> bool {
        let f = self.b.function();
        let Some(s) = f.stmts.iter().rev().find(|s| s.var == v) else {
            return false;
        };
        match s.op {
            Op::Dim(_) | Op::Const(_) => true,
            Op::Add | Op::Sub | Op::Mul if depth > 0 => {
                s.args.iter().all(|a| self.size_like(*a, depth - 1))
            }
            _ => false,
        }
    }

    fn lower_let(&mut self, l: &Let) {
        let hints: Vec<&str> = match &l.pattern {
            Pattern::Name(id) => vec![id.name.as_str()],
            Pattern::Tuple(ids, _) => ids.iter().map(|i| i.name.as_str()).collect(),
        };
        let v = self.lower(&l.value, &hints);
        self.bind_pattern(&l.pattern, v, l.value.span);
    }

    fn lookup(&mut self, n: &str, span: Span) -> Val {
        if let Some(v) = self.env.get(n) {
            let v = v.clone();
            return self.lift(v);
        }
        if self.sizes.iter().any(|s| s == n) {
            return self.size_value(n);
        }
        let d = if self.by_name.contains_key(n) || is_reserved(n) {
            Diagnostic::new(span, format!("`{n}` is a function, not a value"))
                .with_note(format!("call it as `{n}(...)`"))
        } else {
            self.unknown_name(n, span)
        };
        self.error(d);
        Val::Err
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn binary(
        &mut self,
        op: BinOp,
        op_text: &str,
        op_span: Span,
        (l, lspan): (Val, Span),
        (r, rspan): (Val, Span),
        hint: &str,
    ) -> Val {
        let irop = match op {
            BinOp::Add => Op::Add,
            BinOp::Sub => Op::Sub,
            BinOp::Mul => Op::Mul,
            BinOp::Div => Op::Div,
            BinOp::Rem => Op::Rem,
            BinOp::Lt => Op::Lt,
            BinOp::Le => Op::Le,
            BinOp::Gt => Op::Gt,
            BinOp::Ge => Op::Ge,
            BinOp::Eq => Op::Eq,
            BinOp::Ne => Op::Ne,
            BinOp::And | BinOp::Or => {
                return self.logic(op, op_text, op_span, (l, lspan), (r, rspan), hint)
            }
        };
        if matches!(l, Val::Idx(_)) || matches!(r, Val::Idx(_)) {
            let off = match (op, &l, &r) {
                (BinOp::Add, Val::Idx(a), b) | (BinOp::Add, b, Val::Idx(a)) => {
                    b.as_static_int().and_then(|b| a.checked_add(b))
                }
                (BinOp::Sub, Val::Idx(a), b) => b.as_static_int().and_then(|b| a.checked_sub(b)),
                _ => None,
            };
            // Still the index (offset), which reads shifted views of arrays.
            if let Some(o) = off {
                return Val::Idx(o);
            }
        }
        // A size or count meeting a float is that float (`x / N`).
        let l2 = self.count_as_float(l, &r);
        let r = self.count_as_float(r, &l2);
        let l = l2;
        // A run-time `i64` parameter is a number too, and so is the index
        // of `tabulate` used otherwise (an `i64` per index).
        let (l, r) = (self.number(l), self.number(r));
        let cmp = op.is_comparison();
        // Static integers stay integers (counts, indices, sizes); a division
        // is an integer division only between two static integers.
        let int_op = match op {
            BinOp::Div | BinOp::Rem => matches!((&l, &r), (Val::Int(_), Val::Int(_))),
            _ => matches!(l, Val::Int(_)) || matches!(r, Val::Int(_)),
        };
        if int_op {
            if let (Some(a), Some(b)) = (l.as_static_int(), r.as_static_int()) {
                return self.int_binary(op, op_text, op_span, a, b);
            }
        }
        let num = |v: Val| match v {
            Val::Int(i) => Val::Const(i as f64),
            v => v,
        };
        let (l, r) = (num(l), num(r));
        if !self.operands_fit(op, op_text, op_span, [(&l, lspan), (&r, rspan)]) {
            return Val::Err;
        }
        // A number and a selection between two numbers (see
        // `FnCx::picks`) fold like two numbers, branch by branch.
        if !cmp {
            let pick = |v: &Val| match v {
                Val::Var(x) => self.picks.get(x).copied(),
                _ => None,
            };
            let folded = match (&l, &r, pick(&l), pick(&r)) {
                (Val::Const(c), _, _, Some((m, a, b))) => {
                    Some((m, fold(irop, &[*c, a]), fold(irop, &[*c, b])))
                }
                (_, Val::Const(c), Some((m, a, b)), _) => {
                    Some((m, fold(irop, &[a, *c]), fold(irop, &[b, *c])))
                }
                _ => None,
            };
            if let Some((m, a, b)) = folded {
                if let Some(v) = self.make_pick(m, a, b, DType::F64) {
                    return Val::Var(v);
                }
            }
        }
        let result = match (l, r) {
            (Val::Err, _) | (_, Val::Err) | (Val::Tuple(_), _) | (_, Val::Tuple(_)) => {
                return Val::Err
            }
            (Val::Const(a), Val::Const(b)) => {
                let x = fold(irop, &[a, b]);
                return if cmp {
                    Val::Bool(x != 0.0)
                } else {
                    Val::Const(x)
                };
            }
            // `1 * x`, `x * 1` and `x / 1` are `x` exactly (IEEE): partial
            // evaluation drops them (an iteration starting from 1, say).
            (Val::Const(c), Val::Var(b)) if c == 1.0 && irop == Op::Mul => return Val::Var(b),
            (Val::Var(a), Val::Const(c)) if c == 1.0 && matches!(irop, Op::Mul | Op::Div) => {
                return Val::Var(a)
            }
            (Val::Var(a), Val::Const(c)) => {
                let t = self.ty(a);
                if !self.integral(c, &t, rspan) {
                    return Val::Err;
                }
                let Val::Var(b) = self.materialize(c, &t, "") else {
                    return Val::Err;
                };
                self.push(hint, irop, &[a, b], None)
            }
            (Val::Const(c), Val::Var(b)) => {
                let t = self.ty(b);
                if !self.integral(c, &t, lspan) {
                    return Val::Err;
                }
                let Val::Var(a) = self.materialize(c, &t, "") else {
                    return Val::Err;
                };
                self.push(hint, irop, &[a, b], None)
            }
            (Val::Var(a), Val::Var(b)) => {
                self.elementwise2(irop, op_text, op_span, (a, lspan), (b, rspan), hint)
            }
            _ => return self.bug("binary: unexpected operands"),
        };
        match result {
            Val::Var(x) if cmp => Val::Mask(x),
            v => v,
        }
    }

    /// Whether the operands of the arithmetic or comparison `op` are
    /// numbers it takes (not bools; integers for `%`); else an error.
    fn operands_fit(
        &mut self,
        op: BinOp,
        op_text: &str,
        op_span: Span,
        operands: [(&Val, Span); 2],
    ) -> bool {
        for (v, span) in operands {
            if matches!(v, Val::Bool(_) | Val::Mask(_)) {
                self.error(
                    Diagnostic::new(op_span, format!("`{op_text}` needs numbers, not bools"))
                        .with_label(span, format!("this has type {}", self.describe(v))),
                );
                return false;
            }
            // The remainder is of integers only.
            if let (BinOp::Rem, Val::Var(x)) = (op, v) {
                let t = self.ty(*x);
                if t.dtype != DType::I64 {
                    self.error(
                        Diagnostic::new(op_span, format!("`{op_text}` needs i64 operands"))
                            .with_label(span, format!("this has type {t}"))
                            .with_note("the remainder is of integers only; a whole number held in a float converts with `i64(...)`, which truncates toward zero (a loop's counter started at a bare `0` counts in f64: start it at `i64(0)`)"),
                    );
                    return false;
                }
            }
        }
        true
    }

    /// A mask (1 or 0) as a mask of element type `d`.
    pub(super) fn mask_as(&mut self, m: VarId, d: DType) -> VarId {
        if self.ty(m).dtype == d {
            return m;
        }
        match self.push("", Op::Convert(d), &[m], None) {
            Val::Var(x) => x,
            _ => m,
        }
    }

    /// Can the number `c` meet a value of type `t`? Not a fraction for an
    /// `i64` (an error at `span`).
    pub(super) fn integral(&mut self, c: f64, t: &Type, span: Span) -> bool {
        if t.dtype != DType::I64 || super::exact_int(c).is_some() {
            return true;
        }
        self.error(
            Diagnostic::new(
                span,
                format!("{c} is not an integer, but it meets an i64 value"),
            )
            .with_note("convert the integer with `f64(...)` to compute in floating point"),
        );
        false
    }

    /// An element-wise op on two typed values of one element type: a scalar
    /// is broadcast to the other's shape, and a row to every row of a
    /// matrix; other shapes must be equal.
    pub(super) fn elementwise2(
        &mut self,
        irop: Op,
        op_text: &str,
        op_span: Span,
        (a, lspan): (VarId, Span),
        (b, rspan): (VarId, Span),
        hint: &str,
    ) -> Val {
        // A selection between two numbers takes the other operand's float
        // type (see `FnCx::picks`).
        let (a, b) = match (
            self.repick(a, self.ty(b).dtype),
            self.repick(b, self.ty(a).dtype),
        ) {
            (Some(a2), _) => (a2, b),
            (None, Some(b2)) => (a, b2),
            (None, None) => (a, b),
        };
        let (ta, tb) = (self.ty(a), self.ty(b));
        if ta.dtype != tb.dtype {
            self.error(
                Diagnostic::new(
                    op_span,
                    format!(
                        "`{op_text}` mixes element types {} and {}",
                        ta.dtype, tb.dtype
                    ),
                )
                .with_label(lspan, format!("this has type {ta}"))
                .with_label(rspan, format!("this has type {tb}"))
                .with_note(if ta.dtype == DType::I64 || tb.dtype == DType::I64 {
                    "integers are not converted implicitly: write `f64(n)` (or `i64(x)`, which truncates)"
                } else {
                    "there is no implicit conversion between f32 and f64"
                }),
            );
            return Val::Err;
        }
        let (a, b) = if ta == tb {
            (a, b)
        } else if ta.is_scalar() {
            match self.bcast(a, &tb) {
                Some(x) => (x, b),
                None => return Val::Err,
            }
        } else if tb.is_scalar() {
            match self.bcast(b, &ta) {
                Some(x) => (a, x),
                None => return Val::Err,
            }
        } else if let Some(x) = self.repeat_rows(a, &ta, &tb) {
            (x, b)
        } else if let Some(x) = self.repeat_rows(b, &tb, &ta) {
            (a, x)
        } else {
            self.error(
                Diagnostic::new(
                    op_span,
                    format!("shape mismatch: `{op_text}` needs operands of the same shape, found {ta} and {tb}"),
                )
                .with_label(lspan, format!("this has type {ta}"))
                .with_label(rspan, format!("this has type {tb}")),
            );
            return Val::Err;
        };
        self.push(hint, irop, &[a, b], None)
    }

    /// Arithmetic and comparison on static integers (checked: overflow and
    /// division by zero are errors).
    fn int_binary(&mut self, op: BinOp, op_text: &str, op_span: Span, a: i64, b: i64) -> Val {
        let r = match op {
            BinOp::Add => a.checked_add(b),
            BinOp::Sub => a.checked_sub(b),
            BinOp::Mul => a.checked_mul(b),
            BinOp::Div | BinOp::Rem => {
                if b == 0 {
                    self.error(Diagnostic::new(op_span, "static integer division by zero"));
                    return Val::Err;
                }
                // Rounded toward minus infinity, as at run time; the one
                // overflow (the least i64 over -1) is an error here.
                let (q, r) = crate::ops::floor_div_rem(a, b);
                match (op, a.checked_div(b)) {
                    (_, None) => None,
                    (BinOp::Div, _) => Some(q),
                    _ => Some(r),
                }
            }
            BinOp::Lt => return Val::Bool(a < b),
            BinOp::Le => return Val::Bool(a <= b),
            BinOp::Gt => return Val::Bool(a > b),
            BinOp::Ge => return Val::Bool(a >= b),
            BinOp::Eq => return Val::Bool(a == b),
            BinOp::Ne => return Val::Bool(a != b),
            BinOp::And | BinOp::Or => None,
        };
        match r {
            Some(x) => Val::Int(x),
            None => {
                self.error(Diagnostic::new(
                    op_span,
                    format!(
                        "static integer `{op_text}` overflows (or is not an integer operation)"
                    ),
                ));
                Val::Err
            }
        }
    }

    /// `&&` and `||`: static bools fold; masks combine element-wise
    /// (`a && b` is `a * b`, `a || b` is `max(a, b)` on 0/1 masks).
    fn logic(
        &mut self,
        op: BinOp,
        op_text: &str,
        op_span: Span,
        (l, lspan): (Val, Span),
        (r, rspan): (Val, Span),
        hint: &str,
    ) -> Val {
        let and = op == BinOp::And;
        match (l, r) {
            (Val::Err, _) | (_, Val::Err) => Val::Err,
            (Val::Bool(a), Val::Bool(b)) => Val::Bool(if and { a && b } else { a || b }),
            (Val::Bool(a), m @ Val::Mask(_)) | (m @ Val::Mask(_), Val::Bool(a)) => {
                if a == and {
                    m
                } else {
                    Val::Bool(a)
                }
            }
            (Val::Mask(a), Val::Mask(b)) => {
                // A condition on integers joins one on floats as a float mask.
                let (a, b) = match (self.ty(a).dtype, self.ty(b).dtype) {
                    (DType::I64, d) if d != DType::I64 => (self.mask_as(a, d), b),
                    (d, DType::I64) if d != DType::I64 => (a, self.mask_as(b, d)),
                    _ => (a, b),
                };
                let (ta, tb) = (self.ty(a), self.ty(b));
                let (a, b) = if ta == tb {
                    (a, b)
                } else if ta.is_scalar() && ta.dtype == tb.dtype {
                    match self.bcast(a, &tb) {
                        Some(x) => (x, b),
                        None => return Val::Err,
                    }
                } else if tb.is_scalar() && ta.dtype == tb.dtype {
                    match self.bcast(b, &ta) {
                        Some(x) => (a, x),
                        None => return Val::Err,
                    }
                } else {
                    self.error(
                        Diagnostic::new(
                            op_span,
                            format!(
                                "`{op_text}` combines conditions of different shapes or precisions"
                            ),
                        )
                        .with_label(
                            lspan,
                            format!("this has type {}", self.describe(&Val::Mask(a))),
                        )
                        .with_label(
                            rspan,
                            format!("this has type {}", self.describe(&Val::Mask(b))),
                        ),
                    );
                    return Val::Err;
                };
                match self.push(hint, if and { Op::Mul } else { Op::Max }, &[a, b], None) {
                    Val::Var(x) => Val::Mask(x),
                    v => v,
                }
            }
            (l, r) => {
                let (bad, span) = if matches!(l, Val::Bool(_) | Val::Mask(_)) {
                    (r, rspan)
                } else {
                    (l, lspan)
                };
                self.error(
                    Diagnostic::new(op_span, format!("`{op_text}` needs bools"))
                        .with_label(span, format!("this has type {}", self.describe(&bad))),
                );
                Val::Err
            }
        }
    }

    /// Bind a `let`/lambda pattern to a value; false after reporting a mismatch.
    pub(super) fn bind_pattern(&mut self, pattern: &Pattern, v: Val, value_span: Span) -> bool {
        match pattern {
            Pattern::Name(id) => {
                self.env.push((id.name.clone(), v));
                true
            }
            Pattern::Tuple(ids, span) => {
                let vals = match v {
                    Val::Tuple(vs) if vs.len() == ids.len() => vs,
                    Val::Err => vec![Val::Err; ids.len()],
                    other => {
                        let got = match &other {
                            Val::Tuple(vs) => plural(vs.len(), "value"),
                            _ => "a single value".to_string(),
                        };
                        self.error(
                            Diagnostic::new(
                                *span,
                                format!(
                                    "this pattern takes apart {}, but the value is {got}",
                                    plural(ids.len(), "value")
                                ),
                            )
                            .with_label(
                                value_span,
                                format!("this has type {}", self.describe(&other)),
                            ),
                        );
                        for id in ids {
                            self.env.push((id.name.clone(), Val::Err));
                        }
                        return false;
                    }
                };
                for (id, v) in ids.iter().zip(vals) {
                    self.env.push((id.name.clone(), v));
                }
                true
            }
        }
    }
}

/// Whether `v`, the value of `e`, is a number that must stay a real under
/// a condition on integers: not an integer (`0.5`, `abs(1.5)`), or
/// written as a real (`1.0`, `1e3`).
pub(super) fn written_real(v: &Val, e: &Expr) -> bool {
    match (v, &result_expr(e).kind) {
        (Val::Const(c), _) if c.fract() != 0.0 || !c.is_finite() => true,
        (Val::Const(_), ExprKind::Num { text, .. }) => text.contains(['.', 'e', 'E']),
        _ => false,
    }
}
