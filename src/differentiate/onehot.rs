//! One-hot cotangents kept sparse. The cotangent that `x[k]` sends back
//! to `x` is `unindex k g`: zero but for row `k`. Its other rows are the
//! cotangents of elements the program never read: structural zeros, like
//! the symbolic zero tangents of inactive values (SPEC: they absorb
//! everything). The sweep multiplies that cotangent by each op's partial
//! derivative as if it were dense, so the gradient of `v[3]`, `v` a
//! `tabulate` of 10^12 elements, cost 10^12 operations while the function
//! cost one, and an infinite partial at a row never read (`exp(1000·x)`)
//! made a NaN there, where the derivative is 0.
//!
//! [`sparse`] rewrites the pullback after the sweep, row `k` only:
//!
//! | pullback statement | becomes |
//! | --- | --- |
//! | `mul (unindex k a) y`, `mul y (unindex k a)` | `unindex k (mul a y[k])` |
//! | `div (unindex k a) y` | `unindex k (div a y[k])` |
//! | `neg (unindex k a)` | `unindex k (neg a)` |
//! | `add`, `sub` of `unindex k a` and `unindex k b` | `unindex k (add a b)`, `unindex k (sub a b)` |
//! | `sum (unindex k a)` | `a` (a scalar), `sum a` |
//! | `sumlead (unindex k a)`, `index k (unindex k a)` | `a` |
//!
//! A primal value `y` read as `y[k]` is indexed in the primal part, right
//! where it is made, so the pullback stores or recomputes one row of it,
//! not all of it (and native code computes that row alone: an index
//! reads its operand's element tree at one place). Everything else reads
//! the cotangent as it was, dense.

use super::AdError;
use crate::ir::{Function, Stmt, VarId, VarInfo};
use crate::ops::Op;
use crate::types::Type;
use std::collections::{HashMap, HashSet};

/// The function and the length of its primal part, rewritten as the
/// module says. `vg` is `(inputs) -> (value, gradients...)`, its first
/// `primal_len` statements the primal.
pub(super) fn sparse(vg: Function, primal_len: usize) -> Result<(Function, usize), AdError> {
    let Some(plan) = plan(&vg, primal_len) else {
        return Ok((vg, primal_len));
    };
    let defs = vg.definitions();
    let mut vg = vg;
    let old = std::mem::take(&mut vg.stmts);
    let names = vg.vars.iter().map(|v| v.name.clone()).collect();
    vg.stmts.reserve(old.len() + plan.len());
    let mut r = Rewrite {
        names,
        f: vg,
        rows: HashMap::new(),
        primal_rows: HashMap::new(),
        subst: HashMap::new(),
    };
    // The primal rows: of a parameter first, of a value where it is made.
    let mut wanted: Vec<(u64, VarId)> = plan.into_iter().collect();
    wanted.sort();
    for &(k, y) in &wanted {
        if defs[y.index()].is_none() {
            r.index_primal(k, y);
        }
    }
    let mut after: HashMap<VarId, Vec<u64>> = HashMap::new();
    for &(k, y) in &wanted {
        after.entry(y).or_default().push(k);
    }
    for s in &old[..primal_len] {
        r.f.stmts.push(s.clone());
        for &k in after.get(&s.var).into_iter().flatten() {
            r.index_primal(k, s.var);
        }
    }
    let new_primal_len = r.f.stmts.len();
    for s in &old[primal_len..] {
        r.pullback_stmt(s);
    }
    let mut f = r.f;
    let subst = r.subst;
    for v in &mut f.rets {
        *v = subst.get(v).copied().unwrap_or(*v);
    }
    f.validate()?;
    Ok((f, new_primal_len))
}

/// The rows `(k, y)` of primal values `y` the rewritten pullback reads;
/// `None` when there is nothing to rewrite.
fn plan(vg: &Function, primal_len: usize) -> Option<HashSet<(u64, VarId)>> {
    let defs = vg.definitions();
    let primal = |v: VarId| defs[v.index()].is_none_or(|d| d < primal_len);
    let mut hot: HashMap<VarId, u64> = HashMap::new();
    let mut wanted = HashSet::new();
    let mut any = false;
    for s in &vg.stmts[primal_len..] {
        if let (Op::Unindex(k), [_]) = (s.op, &s.args[..]) {
            hot.insert(s.var, k);
            continue;
        }
        let Some((k, dense)) = rewritten(vg, s, &|v| hot.get(&v).copied()) else {
            continue;
        };
        any = true;
        if let Some(y) = dense.filter(|&y| primal(y)) {
            wanted.insert((k, y));
        }
        if stays_hot(s.op) {
            hot.insert(s.var, k);
        }
    }
    any.then_some(wanted)
}

/// Whether statement `s` (not an `unindex`) is rewritten, given which
/// values are one-hot (`hot`): its row `k`, and the dense operand it reads
/// at row `k`, if any; `None` leaves `s` as it is.
fn rewritten(
    f: &Function,
    s: &Stmt,
    hot: &dyn Fn(VarId) -> Option<u64>,
) -> Option<(u64, Option<VarId>)> {
    let same = |a: VarId| f.ty(a) == f.ty(s.var) && f.ty(a).rank() >= 1;
    match (s.op, &s.args[..]) {
        (Op::Mul, &[x, y]) if same(x) && same(y) => match (hot(x), hot(y)) {
            (Some(k), Some(j)) if k == j => Some((k, None)),
            (Some(k), None) => Some((k, Some(y))),
            (None, Some(k)) => Some((k, Some(x))),
            _ => None,
        },
        (Op::Div, &[x, y]) if same(x) && same(y) => match (hot(x), hot(y)) {
            (Some(k), None) => Some((k, Some(y))),
            _ => None,
        },
        (Op::Add | Op::Sub, &[x, y]) if same(x) && same(y) => match (hot(x), hot(y)) {
            (Some(k), Some(j)) if k == j => Some((k, None)),
            _ => None,
        },
        (Op::Neg, &[x]) if same(x) => hot(x).map(|k| (k, None)),
        (Op::Sum | Op::SumLead, &[x]) => hot(x).map(|k| (k, None)),
        (Op::Index(j), &[x]) => hot(x).filter(|&k| k == j).map(|k| (k, None)),
        _ => None,
    }
}

/// Whether a rewritten statement's value is one-hot itself (an
/// element-wise op), rather than its row (a sum, an index).
fn stays_hot(op: Op) -> bool {
    matches!(op, Op::Mul | Op::Div | Op::Add | Op::Sub | Op::Neg)
}

/// The function being rewritten.
struct Rewrite {
    f: Function,
    /// Every variable's name, to keep new ones unique.
    names: HashSet<String>,
    /// A one-hot value: its row and the value of that row.
    rows: HashMap<VarId, (u64, VarId)>,
    /// Row `k` of a primal value, indexed in the primal part.
    primal_rows: HashMap<(u64, VarId), VarId>,
    /// A value replaced by another (a sum of a one-hot scalar is its row).
    subst: HashMap<VarId, VarId>,
}

impl Rewrite {
    /// A new variable of type `ty`, named after `like`.
    fn fresh(&mut self, like: VarId, ty: Type) -> VarId {
        let base = format!("{}.row", self.f.vars[like.index()].name);
        let mut name = base.clone();
        let mut n = 1;
        while self.names.contains(&name) {
            name = format!("{base}.{n}");
            n += 1;
        }
        self.names.insert(name.clone());
        self.f.vars.push(VarInfo { name, ty });
        VarId(self.f.vars.len() as u32 - 1)
    }

    /// Push `var = op args`.
    fn push(&mut self, var: VarId, op: Op, args: &[VarId]) {
        self.f.stmts.push(Stmt {
            var,
            op,
            args: args.iter().copied().collect(),
        });
    }

    /// Row `k` of `y` (an array): a new variable and its statement.
    fn index(&mut self, k: u64, y: VarId) -> VarId {
        let ty = self.f.ty(y);
        let row = Type::array(ty.dtype, ty.shape[1..].to_vec());
        let v = self.fresh(y, row);
        self.push(v, Op::Index(k), &[y]);
        v
    }

    /// Row `k` of primal value `y`, pushed now (where `y` is made).
    fn index_primal(&mut self, k: u64, y: VarId) {
        let v = self.index(k, y);
        self.primal_rows.insert((k, y), v);
    }

    /// Row `k` of dense `y`: the primal part's, or indexed here.
    fn row_of(&mut self, k: u64, y: VarId) -> VarId {
        match self.primal_rows.get(&(k, y)) {
            Some(&v) => v,
            None => self.index(k, y),
        }
    }

    /// Statement `s` of the pullback, rewritten where the module says.
    fn pullback_stmt(&mut self, s: &Stmt) {
        let args: smallvec::SmallVec<[VarId; 2]> = s
            .args
            .iter()
            .map(|a| self.subst.get(a).copied().unwrap_or(*a))
            .collect();
        let s = Stmt {
            var: s.var,
            op: s.op,
            args,
        };
        let rows = &self.rows;
        let hot = |v: VarId| rows.get(&v).map(|&(k, _)| k);
        let Some((k, dense)) = rewritten(&self.f, &s, &hot) else {
            if let (Op::Unindex(k), [a]) = (s.op, &s.args[..]) {
                self.rows.insert(s.var, (k, *a));
            }
            self.f.stmts.push(s);
            return;
        };
        let row = |r: &Rewrite, v: VarId| r.rows.get(&v).map(|&(_, a)| a);
        let value = match (s.op, &s.args[..]) {
            (Op::Sum, &[x]) => {
                let a = row(self, x).unwrap_or(x);
                if self.f.ty(a).is_scalar() {
                    self.subst.insert(s.var, a);
                } else {
                    self.push(s.var, Op::Sum, &[a]);
                }
                return;
            }
            (Op::SumLead | Op::Index(_), &[x]) => {
                let a = row(self, x).unwrap_or(x);
                self.subst.insert(s.var, a);
                return;
            }
            (Op::Neg, &[x]) => {
                let a = row(self, x).unwrap_or(x);
                let ty = self.f.ty(a).clone();
                let v = self.fresh(s.var, ty);
                self.push(v, Op::Neg, &[a]);
                v
            }
            (op, &[x, y]) => {
                let dense_row = dense.map(|d| self.row_of(k, d));
                let a = row(self, x).or(dense_row).unwrap_or(x);
                let b = row(self, y).or(dense_row).unwrap_or(y);
                let ty = self.f.ty(a).clone();
                let v = self.fresh(s.var, ty);
                self.push(v, op, &[a, b]);
                v
            }
            _ => unreachable!("`rewritten` takes one or two operands"),
        };
        self.push(s.var, Op::Unindex(k), &[value]);
        self.rows.insert(s.var, (k, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::interp::run;
    use crate::ir::parse_functions;
    use crate::types::value::Value;

    const VG: &str = "fn f(%x: f64[4]) -> (f64, f64[4]) {
  %e: f64[4] = exp %x
  %v: f64 = index 2 %e
  %g: f64 = const 1.0
  %u: f64[4] = unindex 2 %g
  %m: f64[4] = mul %u %e
  %n: f64[4] = neg %m
  %d: f64[4] = div %n %x
  %s: f64 = sum %d
  %ct: f64[4] = unindex 2 %s
  %w: f64[4] = mul %e %ct
  %t: f64[4] = add %w %ct
  ret %v, %t
}
";

    #[test]
    fn one_hot_cotangents_are_computed_at_their_row_only() {
        let vg = parse_functions(VG).unwrap().remove(0);
        let (sparse_vg, primal_len) = sparse(vg.clone(), 2).unwrap();
        // `x[2]` (the divisor) and `e[2]` are taken in the primal part:
        // the parameter's first, `e`'s right after `e`.
        assert_eq!(primal_len, 4);
        let x = sparse_vg.params[0].var;
        assert_eq!(
            (sparse_vg.stmts[0].op, sparse_vg.stmts[0].args[0]),
            (Op::Index(2), x)
        );
        assert_eq!(sparse_vg.stmts[2].op, Op::Index(2));
        assert_eq!(sparse_vg.stmts[2].args[0], sparse_vg.stmts[1].var);
        // Every value the rewritten pullback computes, but for the dense
        // `add` of a one-hot and a dense value, is a scalar.
        let live = sparse_vg.live();
        for s in sparse_vg.stmts[primal_len..]
            .iter()
            .filter(|s| live[s.var.index()])
        {
            let arrays = !sparse_vg.ty(s.var).is_scalar();
            assert!(
                !arrays || matches!(s.op, Op::Unindex(2) | Op::Add | Op::Mul),
                "{s:?} in\n{sparse_vg}"
            );
        }
        // The same numbers where every element is finite.
        let x = Value::f64(&[0.5, -1.0, 2.0, 0.25]);
        assert_eq!(run(&vg, &[&x]).unwrap(), run(&sparse_vg, &[&x]).unwrap());
        // Where a row never read is infinite, it no longer poisons the
        // row read: `0 · inf` made a NaN in every sum over the rows.
        let x = Value::f64(&[1000.0, -1.0, 2.0, 0.25]);
        let dense = run(&vg, &[&x]).unwrap();
        let kept = run(&sparse_vg, &[&x]).unwrap();
        assert!(dense[1].data[2].is_nan());
        let e2 = 2.0f64.exp();
        let s = -(1.0 * e2) / 2.0;
        assert_eq!(kept[1].data, vec![0.0, 0.0, e2 * s + s, 0.0]);
    }
}
