//! AD's cut of its own output: a value-and-gradient function as reverse
//! mode emits it, split at the primal's end into forward and pullback (the
//! `ad` dump).

use crate::ir::needed::renumber;
use crate::ir::{Builder, Function, IrError, VarId};

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
    // First-use order; `taken` keeps it linear in the adjoint's length.
    let mut residuals: Vec<VarId> = Vec::new();
    let mut taken = vec![false; vg.vars.len()];
    let adjoint_reads = vg.stmts[primal_len + 1..].iter().flat_map(|s| &s.args);
    for a in adjoint_reads.chain(&vg.rets[1..]) {
        if is_primal[a.index()] && !taken[a.index()] {
            taken[a.index()] = true;
            residuals.push(*a);
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
            .map(|a| map[a.index()].ok_or(IrError::PullbackReadsNonResidual))
            .collect::<Result<_, _>>()?;
        let v = b
            .push(vg.var_name(s.var), s.op, &args, Some(vg.ty(s.var)))
            .map_err(IrError::from)?;
        map[s.var.index()] = Some(v);
    }
    let rets = vg.rets[1..]
        .iter()
        .map(|r| map[r.index()].ok_or(IrError::GradientNotComputed))
        .collect::<Result<_, _>>()?;
    let pb = b.finish(rets);
    pb.validate()?;
    let names = residuals
        .iter()
        .map(|r| vg.var_name(*r).to_string())
        .collect();
    Ok((fwd, pb, names))
}
