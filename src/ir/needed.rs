//! The one reachability walk over an IR function ([`needed`]): what a set
//! of values needs, not looking past given leaves. Dead-code removal
//! ([`prune_dead`]), AD's cut of its own output at the primal's end
//! (`differentiate`), the cut of an optimized program along its residual
//! plan and the plan's forward part (`residuals`) all use it.

use super::{Function, Stmt, VarId};

/// The one reachability walk: which statements of `f` the values `roots`
/// need, not looking past `leaves` (indexed by variable; a leaf is given,
/// not computed). `Err(v)`: `v` is needed but neither computed nor a leaf.
pub fn needed(f: &Function, roots: &[VarId], leaves: &[bool]) -> Result<Vec<bool>, VarId> {
    let defs = f.definitions();
    let mut keep = vec![false; f.stmts.len()];
    let mut seen = vec![false; f.vars.len()];
    let mut stack: Vec<VarId> = roots.to_vec();
    while let Some(v) = stack.pop() {
        if std::mem::replace(&mut seen[v.index()], true) || leaves[v.index()] {
            continue;
        }
        let i = defs[v.index()].ok_or(v)?;
        keep[i] = true;
        stack.extend(f.stmts[i].args.iter().copied());
    }
    Ok(keep)
}

/// The parameters of `f` as leaves for [`needed`].
pub fn params_as_leaves(f: &Function) -> Vec<bool> {
    let mut leaves = vec![false; f.vars.len()];
    for p in &f.params {
        leaves[p.var.index()] = true;
    }
    leaves
}

/// The statements of `f` that `keep` marks, in order.
pub(crate) fn kept(f: &Function, keep: &[bool]) -> Vec<Stmt> {
    f.stmts
        .iter()
        .zip(keep)
        .filter(|(_, k)| **k)
        .map(|(s, _)| s.clone())
        .collect()
}

/// Drop statements whose values are never used (keeps names).
pub fn prune_dead(f: &Function) -> Function {
    let leaves = params_as_leaves(f);
    // A value with no definition that is not a parameter cannot occur in
    // valid IR; keep everything then and let the validator say so.
    let Ok(keep) = needed(f, &f.rets, &leaves) else {
        return f.clone();
    };
    let mut g = f.clone();
    g.stmts = kept(f, &keep);
    renumber(&g)
}

/// Drop variables that no longer have a definition (after slicing), keeping
/// the order and names of the rest.
pub(crate) fn renumber(f: &Function) -> Function {
    let mut keep = vec![false; f.vars.len()];
    for p in &f.params {
        keep[p.var.index()] = true;
    }
    for s in &f.stmts {
        keep[s.var.index()] = true;
    }
    let mut new_id = vec![None; f.vars.len()];
    let mut vars = Vec::new();
    for (i, v) in f.vars.iter().enumerate() {
        if keep[i] {
            new_id[i] = Some(VarId(vars.len() as u32));
            vars.push(v.clone());
        }
    }
    let r = |v: VarId| new_id[v.index()].unwrap_or(v);
    let mut g = f.clone();
    g.vars = vars;
    for p in &mut g.params {
        p.var = r(p.var);
    }
    for s in &mut g.stmts {
        s.var = r(s.var);
        for a in &mut s.args {
            *a = r(*a);
        }
    }
    for x in &mut g.rets {
        *x = r(*x);
    }
    g
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ir::parse_functions;

    /// value = sum(x*x) * k; gradient = 2*x*k (%xx is dead).
    pub(crate) fn vg() -> Function {
        parse_functions(
            "fn vg[N](%x: f64[N], %k: f64) -> (f64, f64[N]) {
  %sq: f64[N] = mul %x %x
  %xx: f64[N] = add %x %x
  %s: f64 = sum %sq
  %v: f64 = mul %s %k
  %kb: f64[N] = bcast %k
  %g0: f64[N] = mul %x %kb
  %g: f64[N] = add %g0 %g0
  ret %v, %g
}",
        )
        .unwrap()
        .remove(0)
    }

    pub(crate) fn var(f: &Function, name: &str) -> VarId {
        VarId(f.vars.iter().position(|v| v.name == name).unwrap() as u32)
    }

    #[test]
    fn the_walk_stops_at_leaves_and_names_what_is_missing() {
        let f = vg();
        let keep = needed(&f, &[var(&f, "v")], &params_as_leaves(&f)).unwrap();
        assert_eq!(keep, [true, false, true, true, false, false, false]);
        let mut leaves = params_as_leaves(&f);
        leaves[var(&f, "s").index()] = true;
        let keep = needed(&f, &[var(&f, "v")], &leaves).unwrap();
        assert_eq!(keep, [false, false, false, true, false, false, false]);
        let no_leaves = vec![false; f.vars.len()];
        assert_eq!(needed(&f, &[var(&f, "v")], &no_leaves), Err(var(&f, "k")));
    }

    #[test]
    fn prune_dead_drops_unused_statements_only() {
        let g = prune_dead(&vg());
        let names: Vec<&str> = g.stmts.iter().map(|s| g.var_name(s.var)).collect();
        assert_eq!(names, ["sq", "s", "v", "kb", "g0", "g"]);
        g.validate().unwrap();
    }
}
