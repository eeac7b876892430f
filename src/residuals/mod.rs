//! Residuals: the primal values the pullback reads.
//!
//! Given a value-and-gradient program (return 0 is the primal value, the
//! rest are gradients), the forward part is everything the primal value
//! needs; the pullback is the rest. A residual is a forward value the
//! pullback reads. Inputs are residuals that need no copy (the caller keeps
//! them alive); computed values are stored. The plan lists them with their
//! types and byte offsets in the residual buffer (8-byte aligned, in
//! program order): that is the residual ABI.

pub mod cut;

pub use cut::{cut, Cut};

use crate::ir::needed::{needed, params_as_leaves};
use crate::ir::{Function, VarId};
use crate::types::Type;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResidualKind {
    /// A function input: read in place.
    Input,
    /// Computed from constants only (a broadcast constant): the pullback
    /// gets it for free, nothing is stored.
    Constant,
    /// Computed by the forward pass and stored for the pullback.
    Stored,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Residual {
    /// The value in the value-and-gradient program.
    pub var: VarId,
    pub name: String,
    pub ty: Type,
    pub kind: ResidualKind,
    /// Bytes at the cost model's sizes (0 for inputs).
    pub bytes: f64,
    /// Offset in the residual buffer at the model's sizes.
    pub offset: f64,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResidualPlan {
    pub residuals: Vec<Residual>,
    /// Size of the residual buffer at the model's sizes.
    pub total_bytes: f64,
}

/// Find the residuals of a value-and-gradient function; a stored one's
/// bytes are priced at the sizes `dim` (the cost model's).
pub fn plan(vg: &Function, dim: &dyn Fn(&str) -> u64) -> ResidualPlan {
    let defs = vg.definitions();
    let mut constant = vec![false; vg.vars.len()];
    for s in &vg.stmts {
        constant[s.var.index()] = s.args.iter().all(|a| constant[a.index()]);
    }
    // The inputs and everything the primal value (return 0) depends on.
    let mut forward = params_as_leaves(vg);
    let roots: Vec<VarId> = vg.rets.first().copied().into_iter().collect();
    // Valid IR defines every value it reads: nothing is missing.
    let keep = needed(vg, &roots, &forward).unwrap_or_default();
    for (s, k) in vg.stmts.iter().zip(keep) {
        forward[s.var.index()] |= k;
    }
    let mut reads = Vec::new();
    let mut taken = vec![false; vg.vars.len()];
    let mut push = |v: VarId| {
        if forward[v.index()] && !taken[v.index()] {
            taken[v.index()] = true;
            reads.push(v);
        }
    };
    for s in &vg.stmts {
        if !forward[s.var.index()] {
            s.args.iter().for_each(|a| push(*a));
        }
    }
    vg.rets.iter().skip(1).for_each(|r| push(*r));
    reads.sort();
    let mut out = ResidualPlan::default();
    for v in reads {
        let kind = if defs[v.index()].is_none() {
            ResidualKind::Input
        } else if constant[v.index()] {
            ResidualKind::Constant
        } else {
            ResidualKind::Stored
        };
        let ty = vg.ty(v).clone();
        let bytes = if kind == ResidualKind::Stored {
            ty.bytes_at(dim)
        } else {
            0.0
        };
        let offset = out.total_bytes;
        out.total_bytes += (bytes / 8.0).ceil() * 8.0;
        out.residuals.push(Residual {
            var: v,
            name: vg.var_name(v).to_string(),
            ty,
            kind,
            bytes,
            offset,
        });
    }
    out
}

impl fmt::Display for ResidualPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "residuals: {} ({} bytes stored)",
            self.residuals.len(),
            self.total_bytes
        )?;
        for r in &self.residuals {
            match r.kind {
                ResidualKind::Input => {
                    writeln!(f, "  %{}: {}  input, read in place", r.name, r.ty)?
                }
                ResidualKind::Constant => {
                    writeln!(f, "  %{}: {}  constant, not stored", r.name, r.ty)?
                }
                ResidualKind::Stored => writeln!(
                    f,
                    "  %{}: {}  stored at offset {}, {} bytes",
                    r.name, r.ty, r.offset, r.bytes
                )?,
            }
        }
        Ok(())
    }
}
