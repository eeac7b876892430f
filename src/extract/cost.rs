//! The cost model.
//!
//! **Unit: flops** — one floating-point add or multiply on one element = 1.
//! A node costs its op's per-element weight (the op table's
//! [`Op::flops`](crate::ops::Op::flops); transcendental functions are dearer)
//! times the number of elements it produces (consumes, for a reduction),
//! plus [`STMT_OVERHEAD`] so that, of two equally cheap programs, the one
//! with fewer statements wins. Sizes are evaluated at the given size-parameter
//! values (`--dim N=...`), [`DEFAULT_DIM`] when none is given.

use crate::lang::types::Type;
use crate::ops::Op;
use crate::rewrites::lang::{Node, EG};
use indexmap::IndexMap;
use std::fmt;
use std::ops::Add;

/// Extent assumed for a size parameter with no `--dim`.
pub const DEFAULT_DIM: u64 = 1000;

/// Fixed cost of one emitted statement (loop set-up, a scalar instruction).
pub const STMT_OVERHEAD: f64 = 1.0;

/// A cost in flops. Saturating: adding to [`Cost::INFINITY`] stays infinite.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd, Default)]
pub struct Cost(f64);

impl Cost {
    pub const ZERO: Cost = Cost(0.0);
    pub const INFINITY: Cost = Cost(f64::INFINITY);

    pub fn new(flops: f64) -> Cost {
        if flops.is_nan() || flops < 0.0 {
            Cost::INFINITY
        } else {
            Cost(flops)
        }
    }

    pub fn flops(self) -> f64 {
        self.0
    }

    pub fn is_finite(self) -> bool {
        self.0.is_finite()
    }
}

impl Add for Cost {
    type Output = Cost;
    fn add(self, o: Cost) -> Cost {
        Cost::new(self.0 + o.0)
    }
}

impl fmt::Display for Cost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_finite() {
            write!(f, "{}", self.0)
        } else {
            f.write_str("inf")
        }
    }
}

/// Prices nodes at concrete sizes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CostModel {
    /// Extents of size parameters; missing ones are [`DEFAULT_DIM`].
    pub dims: IndexMap<String, u64>,
}

impl CostModel {
    pub fn with_dims(dims: IndexMap<String, u64>) -> CostModel {
        CostModel { dims }
    }

    /// Number of elements of a type at the model's sizes.
    pub fn elements(&self, t: &Type) -> f64 {
        t.shape
            .iter()
            .map(|d| {
                d.extent(&|p| Some(self.dims.get(p).copied().unwrap_or(DEFAULT_DIM)))
                    .unwrap_or(0) as f64
            })
            .product()
    }

    /// Bytes of a value of this type.
    pub fn bytes(&self, t: &Type) -> f64 {
        self.elements(t) * t.dtype.bytes() as f64
    }

    /// Cost of one node on its own (children not included).
    pub fn node_cost(&self, eg: &EG, node: &Node) -> Cost {
        match node {
            Node::Input(_) | Node::Ty(_) => Cost::ZERO,
            Node::Op(op, ch) => {
                // Reductions work per operand element; `matmul` per
                // multiply-add (result elements times the inner size).
                let operand = |k: usize| ch.get(k).and_then(|c| eg[*c].data.ty.as_ref());
                let counted = match op {
                    Op::Sum
                    | Op::MaxAll
                    | Op::MinAll
                    | Op::SumLead
                    | Op::SumTail
                    | Op::MaxTail
                    | Op::MinTail => operand(0).map(|t| self.elements(t)),
                    Op::MatMul => match (operand(0), operand(1)) {
                        (Some(a), Some(b)) => {
                            let inner =
                                Type::array(a.dtype, a.shape.get(1).cloned().into_iter().collect());
                            let outer = Type::array(
                                a.dtype,
                                a.shape
                                    .first()
                                    .cloned()
                                    .into_iter()
                                    .chain(b.shape.get(1).cloned())
                                    .collect(),
                            );
                            Some(self.elements(&outer) * self.elements(&inner))
                        }
                        _ => None,
                    },
                    _ => None,
                };
                let elems = match counted {
                    Some(n) => n,
                    None => {
                        // The result type: any class holding this node has it.
                        match eg
                            .lookup(node.clone())
                            .and_then(|id| eg[id].data.ty.as_ref())
                        {
                            Some(t) => self.elements(t),
                            None => 1.0,
                        }
                    }
                };
                Cost::new(op.flops() * elems + STMT_OVERHEAD)
            }
        }
    }
}
