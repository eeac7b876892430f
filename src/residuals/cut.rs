//! The forward/pullback cut and the one reachability walk that finds what a
//! value needs ([`needed`]): AD's cut of its own output at the primal's end
//! ([`split_at`], the `ad` dump), the cut of an optimized program along its
//! residual plan ([`cut`], for `egrad build`), dead-code removal
//! ([`prune_dead`]) and the plan's forward part ([`super::plan`]) all use it.

use super::{Residual, ResidualKind, ResidualPlan};
use crate::error::span::Span;
use crate::ir::{Builder, Function, IrError, Param, VarId};

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
fn kept(f: &Function, keep: &[bool]) -> Vec<crate::ir::Stmt> {
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

/// An optimized value-and-gradient program cut along its residual plan.
#[derive(Clone, Debug)]
pub struct Cut {
    /// `(inputs) -> (value, stored residuals...)`: what the value and the
    /// stored residuals need.
    pub forward: Function,
    /// `(inputs it reads..., stored residuals...) -> (gradients...)`
    /// (`aot::split` adds the cotangent as a last parameter).
    pub pullback: Function,
    /// Positions of the value-and-gradient program's parameters the
    /// pullback reads, ascending.
    pub inputs: Vec<usize>,
    /// The stored residuals, in residual-buffer order.
    pub stored: Vec<Residual>,
}

/// Cut `vg` (return 0 the value, the rest gradients) along `plan`: the
/// forward computes the value and the stored residuals from the inputs; the
/// pullback computes the gradients from the inputs it reads and the stored
/// residuals (recomputing constants). Both keep `vg`'s variable numbering.
pub fn cut(vg: &Function, plan: &ResidualPlan) -> Result<Cut, IrError> {
    let stored: Vec<Residual> = plan
        .residuals
        .iter()
        .filter(|r| r.kind == ResidualKind::Stored)
        .cloned()
        .collect();
    let mut inputs = Vec::new();
    for r in plan
        .residuals
        .iter()
        .filter(|r| r.kind == ResidualKind::Input)
    {
        let pos = vg
            .params
            .iter()
            .position(|p| p.var == r.var)
            .ok_or_else(|| IrError(format!("residual %{} is not an input", r.name)))?;
        inputs.push(pos);
    }
    inputs.sort_unstable();
    let value = *vg
        .rets
        .first()
        .ok_or_else(|| IrError("the value-and-gradient program returns nothing".into()))?;
    let missing = |v: VarId| {
        IrError(format!(
            "%{} is neither computed nor passed in",
            vg.var_name(v)
        ))
    };

    let mut frets = vec![value];
    frets.extend(stored.iter().map(|r| r.var));
    let keep = needed(vg, &frets, &params_as_leaves(vg)).map_err(missing)?;
    let forward = Function {
        stmts: kept(vg, &keep),
        rets: frets,
        ..vg.clone()
    };

    let mut pparams: Vec<Param> = inputs.iter().map(|&i| vg.params[i].clone()).collect();
    pparams.extend(stored.iter().map(|r| Param {
        var: r.var,
        span: Span::default(),
    }));
    let mut leaves = vec![false; vg.vars.len()];
    for p in &pparams {
        leaves[p.var.index()] = true;
    }
    let grads: Vec<VarId> = vg.rets[1..].to_vec();
    let keep = needed(vg, &grads, &leaves).map_err(missing)?;
    let pullback = Function {
        params: pparams,
        stmts: kept(vg, &keep),
        rets: grads,
        ..vg.clone()
    };
    Ok(Cut {
        forward,
        pullback,
        inputs,
        stored,
    })
}

/// AD's cut: split a value-and-grad function as AD emits it into forward
/// and pullback at `primal_len` (the statements before it are the primal,
/// the one at it is the seed constant, the rest the adjoint). The
/// residuals are the primal values the adjoint reads, in first-use order;
/// the forward returns the value and them, the pullback takes them and the
/// cotangent. Returns (forward, pullback, residual names).
pub fn split_at(
    vg: &Function,
    primal_len: usize,
) -> Result<(Function, Function, Vec<String>), IrError> {
    let seed = vg.stmts[primal_len].var;
    let is_primal = {
        let mut p = vec![false; vg.vars.len()];
        for prm in &vg.params {
            p[prm.var.index()] = true;
        }
        for s in &vg.stmts[..primal_len] {
            p[s.var.index()] = true;
        }
        p
    };
    let mut residuals: Vec<VarId> = Vec::new();
    for s in &vg.stmts[primal_len + 1..] {
        for a in &s.args {
            if is_primal[a.index()] && !residuals.contains(a) {
                residuals.push(*a);
            }
        }
    }
    for r in &vg.rets[1..] {
        if is_primal[r.index()] && !residuals.contains(r) {
            residuals.push(*r);
        }
    }

    let mut fwd = vg.clone();
    fwd.name = format!("{}.forward", vg.name);
    fwd.stmts.truncate(primal_len);
    fwd.rets = std::iter::once(vg.rets[0])
        .chain(residuals.iter().copied())
        .collect();
    let fwd = renumber(&fwd);

    let mut b = Builder::new(format!("{}.pullback", vg.name), vg.size_params.clone());
    b.copy_loops(vg);
    let mut map: Vec<Option<VarId>> = vec![None; vg.vars.len()];
    for r in &residuals {
        let span = vg
            .params
            .iter()
            .find(|p| p.var == *r)
            .map(|p| p.span)
            .unwrap_or_default();
        map[r.index()] = Some(b.param(vg.var_name(*r), vg.ty(*r).clone(), span));
    }
    map[seed.index()] = Some(b.param("ct", vg.ty(seed).clone(), Default::default()));
    for s in &vg.stmts[primal_len + 1..] {
        let args: Vec<VarId> = s
            .args
            .iter()
            .map(|a| map[a.index()].ok_or_else(|| IrError("pullback reads a non-residual".into())))
            .collect::<Result<_, _>>()?;
        let v = b
            .push(vg.var_name(s.var), s.op, &args, Some(vg.ty(s.var)))
            .map_err(IrError::from)?;
        map[s.var.index()] = Some(v);
    }
    let rets = vg.rets[1..]
        .iter()
        .map(|r| map[r.index()].ok_or_else(|| IrError("gradient not computed".into())))
        .collect::<Result<_, _>>()?;
    let pb = b.finish(rets);
    pb.validate()?;
    let names = residuals
        .iter()
        .map(|r| vg.var_name(*r).to_string())
        .collect();
    Ok((fwd, pb, names))
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
mod tests {
    use super::*;
    use crate::ir::parse_functions;

    fn vg() -> Function {
        // value = sum(x*x) * k; gradient = 2*x*k (the pullback reads %k
        // and %x, and %xx is dead).
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

    fn var(f: &Function, name: &str) -> VarId {
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

    #[test]
    fn the_plan_cut_computes_stored_values_forward_and_reads_them_back() {
        let f = vg();
        let residual = |name: &str, kind| Residual {
            var: var(&f, name),
            name: name.into(),
            ty: f.ty(var(&f, name)).clone(),
            kind,
            bytes: 8.0,
            offset: 0.0,
        };
        let mut plan = ResidualPlan::default();
        plan.residuals.push(residual("x", ResidualKind::Input));
        plan.residuals.push(residual("s", ResidualKind::Stored));
        // The pullback reads %k, which this plan does not pass: an error
        // that names it.
        let e = cut(&f, &plan).unwrap_err();
        assert!(e.0.contains("%k"), "{e}");
        plan.residuals.push(residual("k", ResidualKind::Input));
        let c = cut(&f, &plan).unwrap();
        assert_eq!(c.inputs, [0, 1]);
        assert_eq!(c.stored.len(), 1);
        assert_eq!(c.forward.rets, [var(&f, "v"), var(&f, "s")]);
        let names = |g: &Function| -> Vec<String> {
            g.stmts
                .iter()
                .map(|s| g.var_name(s.var).to_string())
                .collect()
        };
        assert_eq!(names(&c.forward), ["sq", "s", "v"]);
        assert_eq!(names(&c.pullback), ["kb", "g0", "g"]);
    }
}
