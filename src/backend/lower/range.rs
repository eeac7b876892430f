//! What an index can be: the range of an `i64` value's elements as size
//! expressions, when its statements say (`iota`, literals, `+`, `-`, `*`,
//! `%`, sums, and ops that only move elements). A `gather` or `scatter`
//! whose indices provably lie inside the rows it reads or writes needs no
//! check at run time: the check is hoisted out of the loop entirely (the
//! states `scan_all` gathers from its tape, `x[(i + 2) % n]` with a literal
//! `n` no larger than the rows).

use crate::ir::{Function, VarId};
use crate::ops::Op;
use crate::types::size::Size;
use crate::types::Dim;

/// How far [`range`] follows definitions (index expressions are small).
const DEPTH: usize = 24;

/// Whether every element of the `i64` value `idx` of `f` lies in
/// `0 .. rows`, provably for every binding of the size parameters.
pub(super) fn within(f: &Function, defs: &[Option<usize>], idx: VarId, rows: &Dim) -> bool {
    let (Some((lo, hi)), Some(rows)) = (range(f, defs, idx, DEPTH), rows.size()) else {
        return false;
    };
    let room = rows.sub(&Size::constant(1)).and_then(|r| r.sub(&hi));
    nonneg(&lo) && room.is_some_and(|r| nonneg(&r))
}

/// Provably `>= 0`: no negative coefficient (size parameters never are).
fn nonneg(s: &Size) -> bool {
    !s.may_be_negative()
}

/// Bounds `[lo, hi]` of the elements of `v` (None when unknown).
fn range(f: &Function, defs: &[Option<usize>], v: VarId, depth: usize) -> Option<(Size, Size)> {
    if depth == 0 || !f.ty(v).dtype.is_int() {
        return None;
    }
    let s = &f.stmts[defs.get(v.index()).copied().flatten()?];
    let arg = |i: usize| range(f, defs, *s.args.get(i)?, depth - 1);
    match s.op {
        Op::Const(l) => {
            let c = l.value();
            (c.fract() == 0.0 && c.abs() < 2f64.powi(53)).then(|| {
                let c = Size::constant(c as i64);
                (c.clone(), c)
            })
        }
        Op::Zero => Some((Size::constant(0), Size::constant(0))),
        Op::Iota => {
            let len = f.ty(v).shape.first()?.size()?;
            Some((Size::constant(0), len.sub(&Size::constant(1))?))
        }
        Op::Dim(k) => {
            let len = f.ty(*s.args.first()?).shape.get(k as usize)?.size()?;
            Some((len.clone(), len))
        }
        Op::Add => {
            let ((alo, ahi), (blo, bhi)) = (arg(0)?, arg(1)?);
            Some((alo.add(&blo)?, ahi.add(&bhi)?))
        }
        Op::Sub => {
            let ((alo, ahi), (blo, bhi)) = (arg(0)?, arg(1)?);
            Some((alo.sub(&bhi)?, ahi.sub(&blo)?))
        }
        Op::Mul => {
            let ((alo, ahi), (blo, bhi)) = (arg(0)?, arg(1)?);
            (nonneg(&alo) && nonneg(&blo)).then_some(())?;
            Some((alo.mul(&blo)?, ahi.mul(&bhi)?))
        }
        Op::Rem => {
            // Floor modulo by a divisor `d >= 1` is in `0 .. d-1`; by one
            // that may be 0 (`a % 0` is 0), in `0 .. d`.
            let (dlo, dhi) = arg(1)?;
            nonneg(&dlo).then_some(())?;
            let one = Size::constant(1);
            let hi = match dlo.sub(&one) {
                Some(m) if nonneg(&m) => dhi.sub(&one)?,
                _ => dhi,
            };
            Some((Size::constant(0), hi))
        }
        Op::Sum => {
            // `n` elements of `[lo, hi]` sum to `[n·lo, n·hi]`.
            let n = Dim::product(&f.ty(s.args[0]).shape)?.size()?;
            let (lo, hi) = arg(0)?;
            Some((n.mul(&lo)?, n.mul(&hi)?))
        }
        // Ops that only move or repeat elements.
        Op::Bcast
        | Op::Index(_)
        | Op::Slice(_)
        | Op::Reverse
        | Op::Reshape
        | Op::Transpose
        | Op::Repeat
        | Op::Gather(_) => arg(0),
        _ => None,
    }
}

/// Whether every `gather` and `scatter` of `f` (and of its loops' bodies
/// and their VJPs) provably indexes inside the rows it reads or writes:
/// then its native code checks nothing at run time, and records no failure
/// in the status slots (an object file, whose C signature has none, can
/// hold it).
pub fn checks_nothing(f: &Function) -> bool {
    let defs = f.definitions();
    let rows = |t: &crate::types::Type| t.shape.first().cloned();
    f.stmts.iter().all(|s| match (s.op, &s.args[..]) {
        (Op::Gather(_), [a, idx, ..]) => rows(f.ty(*a)).is_some_and(|n| within(f, &defs, *idx, &n)),
        (Op::Scatter(_), [idx, ..]) => {
            rows(f.ty(s.var)).is_some_and(|n| within(f, &defs, *idx, &n))
        }
        (Op::Gather(_) | Op::Scatter(_), _) => false,
        _ => true,
    }) && f
        .loops
        .iter()
        .all(|l| checks_nothing(&l.body) && l.vjp.as_ref().is_none_or(checks_nothing))
}
