//! Builtins written with other ops: `slogdet(A)`, `logdet(A)` and
//! `eigh(A)` read the parts of a builtin kernel's result; the element-wise `log_sigmoid(x)` and
//! `logaddexp(a, b)` are each the numerically stable form, on numbers and
//! arrays of any rank (scalars broadcast, as for `max`), and a `select`
//! picks the branch whose derivative is right everywhere, so AD, the
//! e-graph and the backend need nothing new:
//!
//! * `log_sigmoid(x) = x - log1p(exp(x))` where `x < 0`, else
//!   `-log1p(exp(-x))`: no overflow at either end, and the derivative
//!   `1 / (1 + e^x)` (a half at 0, where a `min` or an `abs` would give 0
//!   or 1).
//! * `logaddexp(a, b) = max(a, b) + log1p(exp(-|a - b|))` where `a != b`,
//!   else `a / 2 + b / 2 + ln 2` (each operand's derivative a half at the
//!   tie, and infinities of one sign give themselves).

use super::{fold, FnCx, Val};
use crate::error::span::{Diagnostic, Span};
use crate::ir::interp::pack_site;
use crate::ir::VarId;
use crate::lang::ast::Expr;
use crate::ops::{kernels, Math, Op};
use crate::types::{DType, Dim, Type};

/// The composite builtins and their arities.
pub const COMPOSITES: &[(&str, usize)] = &[
    ("log_sigmoid", 1),
    ("logaddexp", 2),
    ("slogdet", 1),
    ("logdet", 1),
    ("eigh", 1),
    ("sort", 1),
    ("argsort", 1),
    ("cumsum", 1),
    ("cumprod", 1),
    ("top_k", 2),
    ("solve_upper", 2),
    ("solve_upper_t", 2),
    ("sigmoid", 1),
    ("softplus", 1),
    ("mean", 1),
    ("logsumexp", 1),
    ("softmax", 1),
    ("log_softmax", 1),
];

/// The arity of composite builtin `name`, if it is one.
pub(super) fn composite(name: &str) -> Option<usize> {
    COMPOSITES.iter().find(|(n, _)| *n == name).map(|(_, k)| *k)
}

impl<'a> FnCx<'a> {
    /// A call of composite builtin `name` (of `want` arguments).
    pub(super) fn call_composite(
        &mut self,
        e: &Expr,
        name: &str,
        want: usize,
        args: &[Expr],
        hint: &str,
    ) -> Val {
        if args.len() != want {
            self.error(Diagnostic::new(
                e.span,
                super::arity_message(name, want, args.len()),
            ));
            return Val::Err;
        }
        if let "slogdet" | "logdet" = name {
            return self.slogdet(e, name, args, hint);
        }
        if name == "eigh" {
            return self.eigh(e, args);
        }
        if let "sort" | "argsort" | "cumsum" | "cumprod" | "top_k" = name {
            return self.along_last(e, name, args, hint);
        }
        if let "solve_upper" | "solve_upper_t" = name {
            return self.solve_upper(e, name, args, hint);
        }
        let mut vals = Vec::with_capacity(want);
        for a in args {
            let v = self.lower(a, &[]);
            let v = self.single(v, a.span);
            let v = match self.number(v) {
                Val::Int(i) => Val::Const(i as f64),
                Val::Var(x) if self.ty(x).dtype.is_int() => {
                    let t = self.ty(x);
                    return self.not_float(name, a.span, &t);
                }
                v @ (Val::Var(_) | Val::Const(_) | Val::Err) => v,
                other => {
                    let t = self.describe(&other);
                    self.error(Diagnostic::new(
                        a.span,
                        format!("`{name}` needs numbers or arrays, but this has type {t}"),
                    ));
                    return Val::Err;
                }
            };
            vals.push((v, a.span));
        }
        let c = Composite {
            name,
            span: e.span,
            hint,
        };
        match (name, vals.as_slice()) {
            ("log_sigmoid", [x]) => c.log_sigmoid(self, x.clone()),
            ("logaddexp", [a, b]) => c.logaddexp(self, a.clone(), b.clone()),
            ("sigmoid", [(x, _)]) => c.sigmoid(self, x.clone()),
            ("softplus", [(x, _)]) => c.softplus_stable(self, x.clone()),
            ("mean", [(x, _)]) => c.mean(self, x.clone()),
            ("logsumexp", [(x, _)]) => c.logsumexp(self, x.clone()),
            ("softmax", [(x, _)]) => c.softmax(self, x.clone(), false),
            ("log_softmax", [(x, _)]) => c.softmax(self, x.clone(), true),
            _ => self.bug(format!(
                "composite builtin `{name}` of {} operands",
                vals.len()
            )),
        }
    }
}

impl<'a> FnCx<'a> {
    /// `slogdet(A)`, the pair `(sign, log |det A|)`, and `logdet(A)`, its
    /// second part: the two elements of the builtin kernel
    /// [`kernels::SLOGDET`] (LU with partial pivoting).
    fn slogdet(&mut self, e: &Expr, name: &str, args: &[Expr], hint: &str) -> Val {
        let Some(k) = kernels::kernel_id(kernels::SLOGDET) else {
            return self.bug("the builtin kernel of `slogdet` is not registered");
        };
        let Val::Var(both) = self.call_kernel(e, k, name, args, "") else {
            return Val::Err;
        };
        let log = self.push(
            if name == "logdet" { hint } else { "" },
            Op::Index(1),
            &[both],
            None,
        );
        if name == "logdet" {
            return log;
        }
        let sign = self.push("", Op::Index(0), &[both], None);
        Val::Tuple(vec![sign, log])
    }
}

impl<'a> FnCx<'a> {
    /// `eigh(A)`, the pair `(w, V)` of eigenvalues and eigenvectors: row 0
    /// and the rows below of the builtin kernel [`kernels::EIGH`].
    fn eigh(&mut self, e: &Expr, args: &[Expr]) -> Val {
        let Some(k) = kernels::kernel_id(kernels::EIGH) else {
            return self.bug("the builtin kernel of `eigh` is not registered");
        };
        let Val::Var(packed) = self.call_kernel(e, k, "eigh", args, "") else {
            return Val::Err;
        };
        let t = self.ty(packed);
        let n = t.shape[1].clone();
        let w = self.push("", Op::Index(0), &[packed], None);
        let square = crate::types::Type::array(t.dtype, vec![n.clone(), n]);
        let v = self.push("", Op::Slice(1), &[packed], Some(&square));
        Val::Tuple(vec![w, v])
    }
}

impl<'a> FnCx<'a> {
    /// `sort(x)`, `argsort(x)`, `cumsum(x)` and `cumprod(x)` along the last
    /// axis of an `f64` array (each row on its own), and `top_k(x, k)`, the
    /// `k` largest elements of a vector and their indices (largest first,
    /// the lower index first among equal ones): the builtin kernels of
    /// `ops::sort`, given the array and its last axis's length.
    fn along_last(&mut self, e: &Expr, name: &str, args: &[Expr], hint: &str) -> Val {
        let v = self.lower(&args[0], &[]);
        let x = match self.single(v, args[0].span) {
            Val::Var(x)
                if matches!(self.ty(x).dtype, DType::F32 | DType::F64) && self.ty(x).rank() > 0 =>
            {
                x
            }
            Val::Err => return Val::Err,
            other => {
                let t = self.describe(&other);
                self.error(Diagnostic::new(
                    args[0].span,
                    format!("`{name}` takes a float array (a vector, or rows along its last axis), but this is {t}"),
                ));
                return Val::Err;
            }
        };
        let t = self.ty(x);
        if self.batched.contains(&x) {
            self.error(
                Diagnostic::unsupported(
                    e.span,
                    format!("`{name}` of a value that depends on the index of `tabulate` (or a batch of `@vmap`) is not supported yet"),
                )
                .with_note("call it on the whole array: it sorts or scans each row along the last axis"),
            );
            return Val::Err;
        }
        let k = if name == "top_k" {
            let kv = self.lower(&args[1], &[]);
            let Some(k) = kv.as_static_int().filter(|&k| k >= 0) else {
                self.error(Diagnostic::new(
                    args[1].span,
                    format!("`top_k`'s count must be a non-negative integer known at compile time, but this is {}", self.describe(&kv)),
                ));
                return Val::Err;
            };
            if t.rank() != 1 {
                self.error(Diagnostic::new(
                    args[0].span,
                    format!("`top_k` takes a vector, but this is {t}"),
                ));
                return Val::Err;
            }
            if let Dim::Lit(n) = t.shape[0] {
                if k as u64 > n {
                    self.error(Diagnostic::new(
                        args[1].span,
                        format!("`top_k` of {k} elements of a vector of {n}"),
                    ));
                    return Val::Err;
                }
            }
            Some(k as u64)
        } else {
            None
        };
        // An `f32` array is sorted or scanned in `f64` (exactly: every
        // `f32` is an `f64`), and the values rounded back.
        let (original, single) = (x, t.dtype == DType::F32);
        let (x, t) = if single {
            let Val::Var(w) = self.push_plain("", Op::Convert(DType::F64), &[x], None) else {
                return Val::Err;
            };
            (w, Type::array(DType::F64, t.shape.clone()))
        } else {
            (x, t)
        };
        // The last axis's length, as the kernels take it: `f64[1]`.
        let Val::Var(d) = self.push_plain("", Op::Dim(t.rank() as u64 - 1), &[x], None) else {
            return Val::Err;
        };
        let Val::Var(f) = self.push_plain("", Op::Convert(DType::F64), &[d], None) else {
            return Val::Err;
        };
        let one = Type::array(DType::F64, vec![Dim::Lit(1)]);
        let Val::Var(n) = self.push_plain("", Op::Bcast, &[f], Some(&one)) else {
            return Val::Err;
        };
        let kernel = |which: &str| kernels::kernel_id(which);
        let which = match name {
            "sort" => kernels::SORT,
            "cumsum" => kernels::CUMSUM,
            "cumprod" => kernels::CUMPROD,
            _ => kernels::ARGSORT,
        };
        let Some(id) = kernel(which) else {
            return self.bug(format!("the builtin kernel of `{name}` is not registered"));
        };
        let Some(k) = k else {
            let plain = name != "argsort" && !single;
            let h = if plain { hint } else { "" };
            let out = self.push_plain(h, Op::Kernel(id, 2), &[x, n], Some(&t));
            return match (name, out) {
                ("argsort", Val::Var(p)) => {
                    self.push_plain(hint, Op::Convert(DType::I64), &[p], None)
                }
                (_, Val::Var(v)) if single => {
                    self.push_plain(hint, Op::Convert(DType::F32), &[v], None)
                }
                (_, out) => out,
            };
        };
        // top_k: the first k of the permutation sorting -x (stable, so
        // the lower index first among equal elements), and x there.
        let Val::Var(neg) = self.push_plain("", Op::Neg, &[x], None) else {
            return Val::Err;
        };
        let Val::Var(p) = self.push_plain("", Op::Kernel(id, 2), &[neg, n], Some(&t)) else {
            return Val::Err;
        };
        let Val::Var(p) = self.push_plain("", Op::Convert(DType::I64), &[p], None) else {
            return Val::Err;
        };
        let first = Type::array(DType::I64, vec![Dim::Lit(k)]);
        let Val::Var(idx) = self.push_plain("", Op::Slice(0), &[p], Some(&first)) else {
            return Val::Err;
        };
        let site = pack_site(e.span.start, e.span.end);
        let vals = self.push_plain(hint, Op::Gather(site), &[original, idx], None);
        Val::Tuple(vec![vals, Val::Var(idx)])
    }
}

impl<'a> FnCx<'a> {
    /// `solve_upper(U, B)` (`U⁻¹ B`) and `solve_upper_t(U, B)` (`U⁻ᵀ B`)
    /// for an upper triangular `U` (its lower triangle not read): the
    /// lower solves of `Uᵀ`, `solve_lower_t(Uᵀ, B)` and `solve_lower(Uᵀ,
    /// B)`.
    fn solve_upper(&mut self, e: &Expr, name: &str, args: &[Expr], hint: &str) -> Val {
        let lower = if name == "solve_upper" {
            "solve_lower_t"
        } else {
            "solve_lower"
        };
        let Some(k) = kernels::kernel_id(lower) else {
            return self.bug(format!("the builtin kernel `{lower}` is not registered"));
        };
        let mut xs = Vec::with_capacity(2);
        for a in args {
            let v = self.lower(a, &[]);
            match self.single(v, a.span) {
                Val::Var(x) if self.ty(x).rank() > 0 => xs.push(x),
                Val::Err => return Val::Err,
                other => {
                    let t = self.describe(&other);
                    self.error(Diagnostic::new(
                        a.span,
                        format!("`{name}` takes a matrix and a vector or matrix, but this is {t}"),
                    ));
                    return Val::Err;
                }
            }
        }
        if self.ty(xs[0]).rank() != 2 {
            let t = self.ty(xs[0]);
            self.error(Diagnostic::new(
                args[0].span,
                format!("`{name}` needs a square matrix, but this is {t}"),
            ));
            return Val::Err;
        }
        let Val::Var(ut) = self.push("", Op::Transpose, &[xs[0]], None) else {
            return Val::Err;
        };
        xs[0] = ut;
        self.kernel_on(e, k, name, xs, hint)
    }
}

/// One composite's call: its name and place, for the errors of the ops
/// it is made of.
struct Composite<'n> {
    name: &'n str,
    span: Span,
    /// The name of the result (its last statement).
    hint: &'n str,
}

impl Composite<'_> {
    fn un(&self, cx: &mut FnCx, op: Op, v: Val) -> Val {
        match v {
            Val::Const(c) => Val::Const(fold(op, &[c])),
            Val::Var(x) => cx.push("", op, &[x], None),
            _ => Val::Err,
        }
    }

    fn bin(&self, cx: &mut FnCx, op: Op, a: Val, b: Val) -> Val {
        cx.builtin2(op, self.name, self.span, (a, self.span), (b, self.span), "")
    }

    fn math(&self, cx: &mut FnCx, m: Math, v: Val) -> Val {
        self.un(cx, Op::Math(m), v)
    }

    /// `m ? a : b`: picked if `m` is a number, else a `select` (every
    /// operand then derives from the same variables, so each is one).
    fn select(&self, cx: &mut FnCx, m: Val, a: Val, b: Val) -> Val {
        self.select_named(cx, m, a, b, self.hint)
    }

    /// [`Self::select`] with the result named `hint`.
    fn select_named(&self, cx: &mut FnCx, m: Val, a: Val, b: Val, hint: &str) -> Val {
        match (m, a, b) {
            (Val::Const(m), a, b) => {
                if m != 0.0 {
                    a
                } else {
                    b
                }
            }
            (Val::Var(m), Val::Var(a), Val::Var(b)) => cx.push(hint, Op::Select, &[m, a, b], None),
            (Val::Err, ..) | (_, Val::Err, _) | (.., Val::Err) => Val::Err,
            _ => cx.bug(format!(
                "`{}`: a mask of a variable over numbers",
                self.name
            )),
        }
    }

    /// `log1p(exp(v))`.
    fn softplus(&self, cx: &mut FnCx, v: Val) -> Val {
        let e = self.math(cx, Math::Exp, v);
        self.math(cx, Math::Log1p, e)
    }

    fn log_sigmoid(&self, cx: &mut FnCx, (x, _): (Val, Span)) -> Val {
        let neg = self.bin(cx, Op::Lt, x.clone(), Val::Const(0.0));
        let sp = self.softplus(cx, x.clone());
        let below = self.bin(cx, Op::Sub, x.clone(), sp);
        let minus = self.un(cx, Op::Neg, x);
        let sp = self.softplus(cx, minus);
        let above = self.un(cx, Op::Neg, sp);
        self.select(cx, neg, below, above)
    }

    fn logaddexp(&self, cx: &mut FnCx, (a, _): (Val, Span), (b, _): (Val, Span)) -> Val {
        let tie = self.bin(cx, Op::Eq, a.clone(), b.clone());
        let ha = self.bin(cx, Op::Mul, a.clone(), Val::Const(0.5));
        let hb = self.bin(cx, Op::Mul, b.clone(), Val::Const(0.5));
        let half = self.bin(cx, Op::Add, ha, hb);
        let at_tie = self.bin(cx, Op::Add, half, Val::Const(std::f64::consts::LN_2));
        let m = self.bin(cx, Op::Max, a.clone(), b.clone());
        let d = self.bin(cx, Op::Sub, a, b);
        let d = self.math(cx, Math::Abs, d);
        let d = self.un(cx, Op::Neg, d);
        let sp = self.softplus(cx, d);
        let apart = self.bin(cx, Op::Add, m, sp);
        self.select(cx, tie, at_tie, apart)
    }
}

/// The helpers that were the prelude's, on numbers and arrays of any rank:
/// `sigmoid` and `softplus` element by element, `mean` and `logsumexp`
/// over every element, `softmax` and `log_softmax` along the last axis
/// (each row of a matrix on its own). On a vector each is the same ops
/// the prelude's was, so the same bits.
impl Composite<'_> {
    /// `if x >= 0 { a } else { b }`, named `hint`.
    fn by_sign(&self, cx: &mut FnCx, x: &Val, (a, b): (Val, Val), hint: &str) -> Val {
        let pos = self.bin(cx, Op::Ge, x.clone(), Val::Const(0.0));
        self.select_named(cx, pos, a, b, hint)
    }

    /// `exp(-|x|)`, written as the prelude wrote it: `exp(if x >= 0 { -x }
    /// else { x })` (never overflows, and its gradient is never NaN).
    fn exp_minus_abs(&self, cx: &mut FnCx, x: &Val) -> Val {
        let neg = self.un(cx, Op::Neg, x.clone());
        let arg = self.by_sign(cx, x, (neg, x.clone()), "");
        self.math(cx, Math::Exp, arg)
    }

    fn sigmoid(&self, cx: &mut FnCx, x: Val) -> Val {
        let e = self.exp_minus_abs(cx, &x);
        let d = self.bin(cx, Op::Add, Val::Const(1.0), e.clone());
        let a = self.bin(cx, Op::Div, Val::Const(1.0), d.clone());
        let b = self.bin(cx, Op::Div, e, d);
        self.by_sign(cx, &x, (a, b), self.hint)
    }

    /// `max(x, 0) + log1p(exp(-|x|))`.
    fn softplus_stable(&self, cx: &mut FnCx, x: Val) -> Val {
        let m = self.bin(cx, Op::Max, x.clone(), Val::Const(0.0));
        let e = self.exp_minus_abs(cx, &x);
        let l = self.math(cx, Math::Log1p, e);
        self.bin(cx, Op::Add, m, l)
    }

    /// An array's type, or None for a number (whose mean, `logsumexp`
    /// and softmax are itself, itself and 1).
    fn array(&self, cx: &mut FnCx, x: &Val) -> Option<(VarId, Type)> {
        match x {
            Val::Var(v) if cx.ty(*v).rank() > 0 => Some((*v, cx.ty(*v))),
            _ => None,
        }
    }

    /// `+/x` divided by the number of elements (NaN for none).
    fn mean(&self, cx: &mut FnCx, x: Val) -> Val {
        let Some((v, t)) = self.array(cx, &x) else {
            return x;
        };
        let sum = cx.push("", Op::Sum, &[v], None);
        // The number of elements, read (`dim`) from an `iota` of that
        // length, which is never computed, rather than from `x`, which
        // would keep `x` alive where only its gradient is wanted.
        let Some(all) = Dim::product(&t.shape) else {
            cx.error(Diagnostic::new(
                self.span,
                format!("`mean` of {t}: its size overflows"),
            ));
            return Val::Err;
        };
        let Val::Var(i) =
            cx.push_plain("", Op::Iota, &[], Some(&Type::array(DType::I64, vec![all])))
        else {
            return Val::Err;
        };
        let Val::Var(c) = cx.push_plain("", Op::Dim(0), &[i], None) else {
            return Val::Err;
        };
        let Val::Var(n) = cx.push_plain("", Op::Convert(t.dtype), &[c], None) else {
            return Val::Err;
        };
        self.bin(cx, Op::Div, sum, Val::Var(n))
    }

    /// `m + log(+/exp(x - m))`, `m = max/x` unless that is infinite or
    /// NaN (then 0): the prelude's.
    fn logsumexp(&self, cx: &mut FnCx, x: Val) -> Val {
        let Some((v, _)) = self.array(cx, &x) else {
            return x;
        };
        let top = cx.push("", Op::MaxAll, &[v], None);
        let gap = self.bin(cx, Op::Sub, top.clone(), top.clone());
        let finite = self.bin(cx, Op::Eq, gap, Val::Const(0.0));
        let zero = self.bin(cx, Op::Mul, finite.clone(), Val::Const(0.0));
        let m = self.select(cx, finite, top, zero);
        let s = self.bin(cx, Op::Sub, x, m.clone());
        let e = self.math(cx, Math::Exp, s);
        let Val::Var(e) = e else {
            return Val::Err;
        };
        let total = cx.push("", Op::Sum, &[e], None);
        let l = self.math(cx, Math::Log, total);
        self.bin(cx, Op::Add, m, l)
    }

    /// `exp(s) / +/exp(s)` or (`log`) `s - log(+/exp(s))`, `s = x - max/x`,
    /// along the last axis: an array of higher rank as rows of its last
    /// axis, each row's maximum and sum spread over it.
    fn softmax(&self, cx: &mut FnCx, x: Val, log: bool) -> Val {
        let Some((v, t)) = self.array(cx, &x) else {
            // One element: 1 (its log 0), with the derivative of the form.
            let s = self.bin(cx, Op::Sub, x.clone(), x);
            let e = self.math(cx, Math::Exp, s.clone());
            return match log {
                true => s,
                false => self.bin(cx, Op::Div, e.clone(), e),
            };
        };
        if t.rank() == 1 {
            let top = cx.push("", Op::MaxAll, &[v], None);
            let s = self.bin(cx, Op::Sub, x, top);
            let e = self.math(cx, Math::Exp, s.clone());
            let Val::Var(ev) = e else {
                return Val::Err;
            };
            let total = cx.push("", Op::Sum, &[ev], None);
            return match log {
                true => {
                    let l = self.math(cx, Math::Log, total);
                    self.bin(cx, Op::Sub, s, l)
                }
                false => self.bin(cx, Op::Div, e, total),
            };
        }
        let last = t.shape[t.rank() - 1].clone();
        let Some(rows) = Dim::product(&t.shape[..t.rank() - 1]) else {
            cx.error(Diagnostic::new(
                self.span,
                format!("`{}` of {t}: its size overflows", self.name),
            ));
            return Val::Err;
        };
        let flat = Type::array(t.dtype, vec![rows.clone(), last]);
        let Val::Var(x2) = cx.push("", Op::Reshape, &[v], Some(&flat)) else {
            return Val::Err;
        };
        let spread = |cx: &mut FnCx, r: Val| match r {
            Val::Var(r) => cx.push("", Op::Spread, &[r], Some(&flat)),
            other => other,
        };
        let top = cx.push("", Op::MaxTail, &[x2], None);
        let top = spread(cx, top);
        let s = self.bin(cx, Op::Sub, Val::Var(x2), top);
        let e = self.math(cx, Math::Exp, s.clone());
        let Val::Var(ev) = e else {
            return Val::Err;
        };
        let total = cx.push("", Op::SumTail, &[ev], None);
        let total = spread(cx, total);
        let r = match log {
            true => {
                let l = self.math(cx, Math::Log, total);
                self.bin(cx, Op::Sub, s, l)
            }
            false => self.bin(cx, Op::Div, e, total),
        };
        match r {
            Val::Var(r) => cx.push(self.hint, Op::Reshape, &[r], Some(&t)),
            other => other,
        }
    }
}
