//! The cut of an optimized value-and-gradient program along its residual
//! plan ([`cut`], for `egrad build`), with the IR's reachability walk
//! ([`crate::ir::needed`]).

use super::{Residual, ResidualKind, ResidualPlan};
use crate::error::span::Span;
use crate::ir::needed::{kept, needed, params_as_leaves};
use crate::ir::{Function, IrError, Param, VarId};

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
            .ok_or_else(|| IrError::ResidualNotInput {
                name: r.name.clone(),
            })?;
        inputs.push(pos);
    }
    inputs.sort_unstable();
    let value = *vg.rets.first().ok_or(IrError::ReturnsNothing)?;
    let missing = |v: VarId| IrError::NeitherComputedNorPassed {
        var: vg.var_name(v).to_string(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::needed::tests::{var, vg};

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
        assert!(e.to_string().contains("%k"), "{e}");
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
