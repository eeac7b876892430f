//! `threefry(k0, k1, c0, c1)`: the counter-based generator's block as a
//! builtin, element-wise on `i64` values with scalar broadcasting (the ops
//! [`Op::Threefry0`] and [`Op::Threefry1`]); the prelude's random numbers
//! (`random_key`, `split`, `uniform`, `normal`) are written with it.

use super::{arity_message, exact_int, FnCx, Val};
use crate::error::span::Diagnostic;
use crate::ir::VarId;
use crate::lang::ast::{DimExpr, Expr};
use crate::ops::{Math, Op};
use crate::types::{DType, Dim, Type};

impl<'a> FnCx<'a> {
    /// `threefry(k0, k1, c0, c1)`: the two words of the Threefry-2x32-20
    /// block of counter `(c0, c1)` under key `(k0, k1)` (each the low 32
    /// bits of an `i64`), a pair of `i64` values in `0 .. 2^32` of the
    /// arguments' shape.
    pub(super) fn threefry(&mut self, e: &Expr, args: &[Expr], hint: &str) -> Val {
        if args.len() != 4 {
            self.error(Diagnostic::new(
                e.span,
                arity_message("threefry", 4, args.len()),
            ));
            return Val::Err;
        }
        let mut vars: Vec<VarId> = Vec::with_capacity(4);
        let mut failed = false;
        for a in args {
            let v = self.lower(a, &[]);
            let v = self.single(v, a.span);
            match self.number(v) {
                Val::Var(x) if self.ty(x).dtype == DType::I64 => vars.push(x),
                Val::Int(n) => vars.push(self.b.constant(DType::I64, n as f64)),
                Val::Const(c) if exact_int(c).is_some() => {
                    vars.push(self.b.constant(DType::I64, c))
                }
                Val::Err => failed = true,
                other => {
                    let t = self.describe(&other);
                    self.error(Diagnostic::new(
                        a.span,
                        format!("the words of `threefry` are i64 values, but this has type {t}"),
                    ));
                    failed = true;
                }
            }
        }
        if failed {
            return Val::Err;
        }
        // The shape of the arrays among them; scalars are broadcast.
        let Some(widest) = vars.iter().copied().max_by_key(|&v| self.ty(v).rank()) else {
            return Val::Err;
        };
        let t = self.ty(widest);
        let mut words = Vec::with_capacity(4);
        for (&v, a) in vars.iter().zip(args) {
            let tv = self.ty(v);
            if tv == t {
                words.push(v);
            } else if tv.is_scalar() {
                match self.bcast(v, &t) {
                    Some(x) => words.push(x),
                    None => return Val::Err,
                }
            } else {
                self.error(
                    Diagnostic::new(
                        a.span,
                        format!("shape mismatch: `threefry` needs words of one shape (or numbers), found {tv} and {t}"),
                    ),
                );
                return Val::Err;
            }
        }
        match self.block(hint, &words) {
            Some((a, b)) => Val::Tuple(vec![Val::Var(a), Val::Var(b)]),
            None => Val::Err,
        }
    }

    /// The two words of the block of `[k0, k1, c0, c1]` (of one shape).
    fn block(&mut self, hint: &str, words: &[VarId]) -> Option<(VarId, VarId)> {
        match (
            self.push(hint, Op::Threefry0, words, None),
            self.push(hint, Op::Threefry1, words, None),
        ) {
            (Val::Var(a), Val::Var(b)) => Some((a, b)),
            _ => None,
        }
    }

    /// `op(x, c)` with the number `c` broadcast to `x`'s type.
    fn with_number(&mut self, op: Op, x: VarId, c: f64) -> Option<VarId> {
        let t = self.ty(x);
        let c = self.b.constant(t.dtype, c);
        let c = self.bcast(c, &t)?;
        self.apply(op, &[x, c])
    }

    /// `op(args)`.
    fn apply(&mut self, op: Op, args: &[VarId]) -> Option<VarId> {
        match self.push("", op, args, None) {
            Val::Var(y) => Some(y),
            _ => None,
        }
    }

    /// The key `[w0, w1]` (an `i64[2]`) of two words.
    fn make_key(&mut self, (w0, w1): (VarId, VarId)) -> Option<VarId> {
        let t = Type::array(DType::I64, vec![Dim::Lit(2)]);
        let Val::Var(i) = self.push("", Op::Iota, &[], Some(&t)) else {
            return None;
        };
        let first = self.with_number(Op::Eq, i, 0.0)?;
        let (a, b) = (self.bcast(w0, &t)?, self.bcast(w1, &t)?);
        self.apply(Op::Select, &[first, a, b])
    }

    /// The words of the key `e` (an `i64[2]`), or None after an error.
    fn key_words(&mut self, name: &str, e: &Expr) -> Option<(VarId, VarId)> {
        let v = self.lower(e, &[]);
        let v = self.single(v, e.span);
        let key = Type::array(DType::I64, vec![Dim::Lit(2)]);
        let k = match v {
            Val::Var(k) if self.ty(k) == key => k,
            Val::Err => return None,
            other => {
                let t = self.describe(&other);
                self.error(
                    Diagnostic::new(
                        e.span,
                        format!("`{name}` needs a key (an i64[2]), but this has type {t}"),
                    )
                    .with_note("make one with `random_key(seed)`, and new ones with `split(key)`"),
                );
                return None;
            }
        };
        let mut word = |i: u64| match self.push("", Op::Index(i), &[k], None) {
            Val::Var(w) => Some(w),
            _ => None,
        };
        Some((word(0)?, word(1)?))
    }

    /// The two keys `split(key)` gives: the blocks of counters `(0, 0)`
    /// and `(0, 1)` under `key`.
    fn split_words(
        &mut self,
        (k0, k1): (VarId, VarId),
    ) -> Option<((VarId, VarId), (VarId, VarId))> {
        let zero = self.b.constant(DType::I64, 0.0);
        let one = self.b.constant(DType::I64, 1.0);
        let a = self.block("", &[k0, k1, zero, zero])?;
        let b = self.block("", &[k0, k1, zero, one])?;
        Some((a, b))
    }

    /// `random_key(seed)`: the key `[hi, lo]` of the 64-bit seed's high
    /// and low words (an `i64[2]`).
    pub(super) fn random_key(&mut self, e: &Expr, args: &[Expr]) -> Val {
        if args.len() != 1 {
            self.error(Diagnostic::new(
                e.span,
                arity_message("random_key", 1, args.len()),
            ));
            return Val::Err;
        }
        let v = self.lower(&args[0], &[]);
        let v = self.single(v, args[0].span);
        let seed = match self.number(v) {
            Val::Var(x) if self.ty(x) == Type::scalar(DType::I64) => x,
            Val::Int(n) => self.b.constant(DType::I64, n as f64),
            Val::Const(c) if exact_int(c).is_some() => self.b.constant(DType::I64, c),
            Val::Err => return Val::Err,
            other => {
                let t = self.describe(&other);
                self.error(Diagnostic::new(
                    args[0].span,
                    format!("the seed of `random_key` is an i64 number, but this has type {t}"),
                ));
                return Val::Err;
            }
        };
        let words = (|| {
            let hi = self.with_number(Op::Div, seed, WORD)?;
            let hi = self.with_number(Op::Rem, hi, WORD)?;
            let lo = self.with_number(Op::Rem, seed, WORD)?;
            self.make_key((hi, lo))
        })();
        match words {
            Some(k) => Val::Var(k),
            None => Val::Err,
        }
    }

    /// `split(key)`: two new keys.
    pub(super) fn split(&mut self, e: &Expr, args: &[Expr]) -> Val {
        if args.len() != 1 {
            self.error(Diagnostic::new(
                e.span,
                arity_message("split", 1, args.len()),
            ));
            return Val::Err;
        }
        let keys = (|| {
            let k = self.key_words("split", &args[0])?;
            let (a, b) = self.split_words(k)?;
            Some((self.make_key(a)?, self.make_key(b)?))
        })();
        match keys {
            Some((a, b)) => Val::Tuple(vec![Val::Var(a), Val::Var(b)]),
            None => Val::Err,
        }
    }

    /// `uniform[d, ...](key)` and `normal[d, ...](key)`: `f64` numbers of
    /// that shape, uniform in [0, 1) or standard normal, and the next key.
    /// The key is split in two: the first gives element `i` (row-major)
    /// from the block of counter `(i / 2^32, i mod 2^32)`, the second is
    /// the next key. Uniform: `(w0 * 2^21 + w1 / 2^11) * 2^-53` (53
    /// random bits); normal: Box and Muller's `sqrt(-2 log(u1)) * cos(2π
    /// u2)` with `u1 = (w0 + 1) * 2^-32` and `u2 = w1 * 2^-32`.
    pub(super) fn draw(
        &mut self,
        e: &Expr,
        normal: bool,
        shape: &[DimExpr],
        key: &Expr,
        hint: &str,
    ) -> Val {
        let name = if normal { "normal" } else { "uniform" };
        let dims: Vec<Option<Dim>> = shape
            .iter()
            .map(|d| self.body_dim(d, &format!("a dimension of `{name}`")))
            .collect();
        let k = self.key_words(name, key);
        let (Some(dims), Some(k)) = (dims.into_iter().collect::<Option<Vec<Dim>>>(), k) else {
            return Val::Err;
        };
        let Some(n) = Dim::product(&dims) else {
            self.error(Diagnostic::new(
                e.span,
                format!(
                    "`{name}` of {}: its number of elements is too large",
                    Type::array(DType::F64, dims)
                ),
            ));
            return Val::Err;
        };
        let drawn = (|| {
            let (a, next) = self.split_words(k)?;
            let t = Type::array(DType::I64, vec![n]);
            let Val::Var(i) = self.push("", Op::Iota, &[], Some(&t)) else {
                return None;
            };
            let hi = self.with_number(Op::Div, i, WORD)?;
            let (a0, a1) = (self.bcast(a.0, &t)?, self.bcast(a.1, &t)?);
            let (w0, w1) = self.block("", &[a0, a1, hi, i])?;
            let x = if normal {
                let w0 = self.apply(Op::Convert(DType::F64), &[w0])?;
                let w1 = self.apply(Op::Convert(DType::F64), &[w1])?;
                let u1 = self.with_number(Op::Add, w0, 1.0)?;
                let u1 = self.with_number(Op::Mul, u1, 1.0 / WORD)?;
                let u2 = self.with_number(Op::Mul, w1, 1.0 / WORD)?;
                let l = self.apply(Op::Math(Math::Log), &[u1])?;
                let r = self.with_number(Op::Mul, l, -2.0)?;
                let r = self.apply(Op::Math(Math::Sqrt), &[r])?;
                let theta = self.with_number(Op::Mul, u2, std::f64::consts::TAU)?;
                let c = self.apply(Op::Math(Math::Cos), &[theta])?;
                self.apply(Op::Mul, &[r, c])?
            } else {
                let low = self.with_number(Op::Div, w1, 2048.0)?;
                let w0 = self.apply(Op::Convert(DType::F64), &[w0])?;
                let low = self.apply(Op::Convert(DType::F64), &[low])?;
                let x = self.with_number(Op::Mul, w0, 2097152.0)?;
                let x = self.apply(Op::Add, &[x, low])?;
                self.with_number(Op::Mul, x, 2f64.powi(-53))?
            };
            let Val::Var(x) = self.reshape_to(hint, x, Type::array(DType::F64, dims)) else {
                return None;
            };
            Some((x, self.make_key(next)?))
        })();
        match drawn {
            Some((x, key)) => Val::Tuple(vec![Val::Var(x), Val::Var(key)]),
            None => Val::Err,
        }
    }
}

/// 2^32: one more than the largest word.
const WORD: f64 = 4_294_967_296.0;
