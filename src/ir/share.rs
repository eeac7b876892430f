//! Sharing common subexpressions of one function ([`share_common`]): a
//! statement that computes what an earlier one computed (the same op on
//! the same operands, commutative operands in either order, the same
//! result type) is dropped and its uses read the earlier value.
//!
//! The e-graph shares everything it sees as one class, but a
//! value-and-gradient program keeps its pullback's reads of primal values
//! apart on purpose (`(bwd p)`: a residual is a choice, priced in bytes),
//! so the pullback's recomputations are values of their own. Once the
//! program is cut to its gradient alone, nothing crosses between a
//! forward and a backward call any more: computing such a value once is
//! plain sharing, and this pass does it after extraction.

use super::needed::prune_dead;
use super::{Function, VarId};
use crate::ops::Op;
use crate::types::Type;
use smallvec::SmallVec;
use std::collections::HashMap;

/// `f` with each statement that repeats an earlier one removed and its
/// uses reading the earlier value, then dead code removed. The operands of
/// a commutative op ([`Op::is_commutative`]) are compared in a canonical
/// order (by variable), so `mul a b` and `mul b a` are one value: IEEE
/// `+`, `*`, `max`, `min`, `==` and `!=` give the same bits either way.
/// The statement kept keeps its operands in its own order.
///
/// Every op of the IR is a function of its operands (a run-time error,
/// such as an index out of range, is the same error from either copy),
/// so the result computes the same values as `f`.
pub fn share_common(f: &Function) -> Function {
    let mut same: Vec<VarId> = (0..f.vars.len() as u32).map(VarId).collect();
    let mut first: HashMap<(Op, SmallVec<[VarId; 2]>, &Type), VarId> = HashMap::new();
    let mut g = f.clone();
    g.stmts.clear();
    for s in &f.stmts {
        let mut s = s.clone();
        for a in &mut s.args {
            *a = same[a.index()];
        }
        let mut key = s.args.clone();
        if s.op.is_commutative() {
            key.sort_unstable();
        }
        match first.entry((s.op, key, f.ty(s.var))) {
            std::collections::hash_map::Entry::Occupied(e) => same[s.var.index()] = *e.get(),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(s.var);
                g.stmts.push(s);
            }
        }
    }
    for r in &mut g.rets {
        *r = same[r.index()];
    }
    prune_dead(&g)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::interp::run;
    use crate::ir::parse_functions;
    use crate::types::value::Value;

    fn parse(src: &str) -> Function {
        parse_functions(src).unwrap().remove(0)
    }

    /// The forward part and the pullback compute `x*x` and `x*(x*x)`, the
    /// second with its operands swapped: each is computed once.
    #[test]
    fn repeated_and_swapped_statements_are_computed_once() {
        let f = parse(
            "fn g[N](%x: f64[N]) -> f64[N] {
  %p: f64[N] = mul %x %x
  %p1: f64[N] = mul %p %x
  %q: f64[N] = mul %x %x
  %q1: f64[N] = mul %x %q
  %r: f64[N] = add %p1 %q1
  ret %r
}",
        );
        let g = share_common(&f);
        assert_eq!(
            g.to_string(),
            "fn g[N](%x: f64[N]) -> f64[N] {
  %p: f64[N] = mul %x %x
  %p1: f64[N] = mul %p %x
  %r: f64[N] = add %p1 %p1
  ret %r
}
"
        );
        let x = Value::f64(&[0.5, -3.0, 1e300]);
        assert_eq!(run(&f, &[&x]).unwrap(), run(&g, &[&x]).unwrap());
    }

    /// Not shared: another op, another order of a non-commutative op, or
    /// another result type (the annotation of a `bcast`).
    #[test]
    fn different_values_stay_apart() {
        let f = parse(
            "fn g[N](%x: f64[N], %k: f64) -> (f64[N], f64[N], f64[N], f64[N], f64[2]) {
  %a: f64[N] = sub %x %x
  %b: f64[N] = div %x %x
  %c: f64[N] = bcast %k
  %d: f64[2] = bcast %k
  %e: f64[N] = sub %c %x
  %h: f64[N] = sub %x %c
  ret %a, %b, %e, %h, %d
}",
        );
        let g = share_common(&f);
        assert_eq!(g.stmts.len(), f.stmts.len());
    }
}
