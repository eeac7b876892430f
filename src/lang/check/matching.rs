//! `match v { p | q => a, ... }` on an integer or a bool.
//!
//! A static value picks its arm at compile time: only that arm is checked
//! and lowered, as with a static `if`. A run-time value selects between
//! the arms like a chain of `if`s on their conditions (computed once, up
//! front), numbers taking the type of the arm that has one, so each arm is
//! a branch of a selection: its derivative flows only where it is taken,
//! and a branch not taken never turns a gradient into NaN.

use super::expr::written_real;
use super::{exact_int, result_expr, FnCx, Val};
use crate::error::span::{Diagnostic, Span};
use crate::lang::ast::{Arm, BinOp, Expr, PatKind, UnOp};
use crate::types::{DType, Type};

/// What a `match` takes apart.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Int,
    Bool,
}

impl<'a> FnCx<'a> {
    pub(super) fn lower_match(
        &mut self,
        e: &Expr,
        scrutinee: &Expr,
        arms: &[Arm],
        hints: &[&str],
    ) -> Val {
        let v = self.lower(scrutinee, &[]);
        let v = self.single(v, scrutinee.span);
        let v = match v {
            Val::Const(c) if exact_int(c).is_some() => Val::Int(exact_int(c).unwrap_or(0)),
            v => v,
        };
        let kind = match &v {
            Val::Err => return Val::Err,
            Val::Bool(_) | Val::Mask(_) => Kind::Bool,
            Val::Int(_) | Val::Idx(_) | Val::Count(..) => Kind::Int,
            Val::Var(x) if self.ty(*x).dtype == DType::I64 => Kind::Int,
            other => {
                let t = self.describe(other);
                self.error(
                    Diagnostic::new(
                        scrutinee.span,
                        format!("`match` takes an integer or a bool, but this has type {t}"),
                    )
                    .with_note("compare numbers with `if`, as in `if x < 0 { ... } else { ... }`"),
                );
                return Val::Err;
            }
        };
        // The arm that covers whatever the earlier ones leave (`_`, or the
        // second of `true` and `false`); arms after it are never reached.
        let Some(last) = self.check_arms(e.span, scrutinee.span, kind, arms) else {
            return Val::Err;
        };
        let covers = |pat: &PatKind, v: &Val| match (pat, v) {
            (PatKind::Wild, _) => true,
            (PatKind::Int(k), Val::Int(i)) => k == i,
            (PatKind::Bool(b), Val::Bool(c)) => b == c,
            _ => false,
        };
        if matches!(v, Val::Int(_) | Val::Bool(_)) {
            // Static: the first arm that covers the value, the others
            // unchecked.
            let arm = arms[..=last]
                .iter()
                .find(|a| a.pats.iter().any(|p| covers(&p.kind, &v)))
                .unwrap_or(&arms[last]);
            return self.lower(&arm.body, hints);
        }
        // Run-time: each arm's condition, then each arm, then the
        // selections from the last arm up: `if c0 { a0 } else if c1 { a1 }
        // ... else { last }`, with the typing of `if`.
        let mut conds = Vec::with_capacity(last);
        for arm in &arms[..last] {
            let mut cond: Option<Val> = None;
            for p in &arm.pats {
                let c = match p.kind {
                    PatKind::Int(k) => self.binary(
                        BinOp::Eq,
                        "==",
                        p.span,
                        (v.clone(), scrutinee.span),
                        (Val::Int(k), p.span),
                        "",
                    ),
                    PatKind::Bool(true) => v.clone(),
                    PatKind::Bool(false) => {
                        self.unary(UnOp::Not, p.span, (v.clone(), scrutinee.span), "")
                    }
                    PatKind::Wild => Val::Bool(true),
                };
                cond = Some(match cond {
                    None => c,
                    Some(prev) => {
                        self.binary(BinOp::Or, "||", p.span, (prev, arm.span), (c, p.span), "")
                    }
                });
            }
            conds.push(cond.unwrap_or(Val::Err));
        }
        let mut vals: Vec<(Val, Span, bool)> = Vec::with_capacity(last + 1);
        for arm in &arms[..=last] {
            let a = self.lower(&arm.body, hints);
            let a = self.number(a);
            let real = written_real(&a, &arm.body);
            vals.push((a, result_expr(&arm.body).span, real));
        }
        // A number arm takes the type of a float arm (the first of the
        // highest rank), as a number meeting the other branch of an `if`
        // does, whichever arms it is selected against first.
        let mut float: Option<Type> = None;
        for (a, _, _) in &vals {
            if let Val::Var(x) = a {
                let t = self.ty(*x);
                let wider = float.as_ref().is_none_or(|f| t.rank() > f.rank());
                if matches!(t.dtype, DType::F32 | DType::F64) && wider {
                    float = Some(t);
                }
            }
        }
        if let Some(t) = float {
            for (a, _, _) in &mut vals {
                let c = match a {
                    Val::Const(c) => *c,
                    Val::Int(i) => *i as f64,
                    _ => continue,
                };
                *a = self.materialize(c, &t, "");
            }
        }
        let Some(mut acc) = vals.pop() else {
            return Val::Err;
        };
        for (cond, arm) in conds.into_iter().zip(vals).rev() {
            let (a, a_span, a_real) = arm;
            acc = match cond {
                Val::Mask(m) => {
                    let (b, b_span, b_real) = acc;
                    let v =
                        self.select_branches(m, (a, a_span, a_real), (b, b_span, b_real), hints);
                    (v, a_span.to(b_span), a_real || b_real)
                }
                Val::Bool(true) => (a, a_span, a_real),
                Val::Bool(false) => acc,
                _ => (Val::Err, a_span, false),
            };
        }
        acc.0
    }

    /// Checks the arms' patterns against `kind`: each reachable, the last
    /// one covering what is left. Returns the index of that last arm.
    fn check_arms(&mut self, at: Span, scrutinee: Span, kind: Kind, arms: &[Arm]) -> Option<usize> {
        let mut ok = true;
        let mut seen: Vec<(PatKind, Span)> = Vec::new();
        // The arm that covers every value left, and the pattern that does.
        let mut last: Option<(usize, Span)> = None;
        for (i, arm) in arms.iter().enumerate() {
            for p in &arm.pats {
                if let Some((_, covered)) = last {
                    self.error(
                        Diagnostic::new(
                            p.span,
                            "this pattern is never reached: the patterns before it cover every value",
                        )
                        .with_label(covered, "every value is covered here"),
                    );
                    ok = false;
                    continue;
                }
                let wrong = match (p.kind, kind) {
                    (PatKind::Int(_), Kind::Bool) => Some(("an integer", "a bool")),
                    (PatKind::Bool(_), Kind::Int) => Some(("a bool", "an integer")),
                    _ => None,
                };
                if let Some((what, has)) = wrong {
                    self.error(
                        Diagnostic::new(
                            p.span,
                            format!(
                                "the pattern `{}` is {what}, but the value matched is {has}",
                                p.text()
                            ),
                        )
                        .with_label(scrutinee, "the value matched"),
                    );
                    ok = false;
                    continue;
                }
                if let Some(&(_, before)) = seen.iter().find(|(q, _)| *q == p.kind) {
                    self.error(
                        Diagnostic::new(
                            p.span,
                            format!("the pattern `{}` is never reached", p.text()),
                        )
                        .with_label(before, "it is matched here first"),
                    );
                    ok = false;
                    continue;
                }
                seen.push((p.kind, p.span));
                let both = [true, false]
                    .iter()
                    .all(|b| seen.iter().any(|(q, _)| *q == PatKind::Bool(*b)));
                if p.kind == PatKind::Wild || both {
                    last = Some((i, p.span));
                }
            }
        }
        if last.is_none() && ok {
            let what = match kind {
                Kind::Int => "an integer",
                Kind::Bool => "a bool",
            };
            self.error(
                Diagnostic::new(
                    at,
                    format!("this `match` on {what} does not cover every value"),
                )
                .with_note(match kind {
                    Kind::Int => "add a last arm `_ => ...` for the other values",
                    Kind::Bool => "add the arm for the other bool, or `_ => ...`",
                }),
            );
            ok = false;
        }
        last.map(|(i, _)| i).filter(|_| ok)
    }
}
