//! The cost model: `cost = flops + λ · residual bytes`.
//!
//! **Unit: flops** — one floating-point add or multiply on one element = 1.
//! A node costs its op's per-element weight (the op table's
//! [`Op::flops`](crate::ops::Op::flops); transcendental functions are dearer)
//! times the number of elements it produces (consumes, for a reduction;
//! multiply-adds, for `matmul`), plus [`STMT_OVERHEAD`] so that, of two
//! equally cheap programs, the one with fewer statements wins.
//!
//! **Residuals.** Storing a primal value for the pullback, `(stash p)`,
//! costs `λ · bytes(p)`: λ is in flops per byte, the user's knob between
//! memory and arithmetic ([`DEFAULT_LAMBDA`] when not given). λ = 0 stores
//! every value the pullback reads; a large λ recomputes whatever can be
//! recomputed. Reading a function input in the pullback is free (it is read
//! in place).
//!
//! Sizes are evaluated at the given size-parameter values (`--dim N=...`),
//! [`DEFAULT_DIM`] when none is given.

use crate::ir::Function;
use crate::ops::{CostBasis, Op};
use crate::rewrites::lang::{Node, EG};
use crate::types::{Dim, Type};
use indexmap::IndexMap;
use std::fmt;
use std::ops::Add;

pub use crate::types::DEFAULT_DIM;

/// Fixed cost of one emitted statement (loop set-up, a scalar instruction).
pub const STMT_OVERHEAD: f64 = 1.0;

/// λ, in flops per residual byte, when none is given: storing an `f64`
/// costs as much as 2 flops, about what writing it to memory and reading
/// it back costs next to recomputing it. So one or two cheap element-wise
/// ops are recomputed in the pullback (where they fuse into its loops) and
/// transcendental results are stored.
pub const DEFAULT_LAMBDA: f64 = 0.25;

/// The largest λ the cost model takes. At this λ one stored byte already
/// costs more flops than any program computes, so a larger λ would choose
/// nothing else; and λ times a residual's bytes stays finite and under
/// the price of memory past the limit (at λ = 1e308 it overflowed to
/// infinity, and no program had a finite cost).
pub const MAX_LAMBDA: f64 = 1e50;

/// `lambda` as the cost model takes it: a finite number in
/// `0 ..= MAX_LAMBDA`; else what is wrong with it.
pub fn check_lambda(lambda: f64) -> Result<f64, String> {
    if lambda.is_finite() && (0.0..=MAX_LAMBDA).contains(&lambda) {
        Ok(lambda)
    } else {
        Err(format!(
            "λ = {lambda} is not a number of flops per residual byte from 0 to {MAX_LAMBDA:e}"
        ))
    }
}

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
#[derive(Clone, Debug, PartialEq)]
pub struct CostModel {
    /// Extents of size parameters; missing ones are [`DEFAULT_DIM`].
    pub dims: IndexMap<String, u64>,
    /// Flops per stored residual byte.
    pub lambda: f64,
    /// The loops of the function being priced (see [`CostModel::for_function`]).
    pub loops: Vec<LoopPrice>,
}

/// The price of memory past the memory limit: above any program's flops,
/// finite so that a program made only of such choices is still extracted
/// (and then refused by the memory check where it runs).
pub const OVER_MEMORY: f64 = 1e100;

impl Default for CostModel {
    fn default() -> CostModel {
        CostModel {
            dims: IndexMap::new(),
            lambda: DEFAULT_LAMBDA,
            loops: Vec::new(),
        }
    }
}

/// What one loop's ops cost: its count, one step of its body and of its
/// VJP (priced like any function), and the bytes of one state.
#[derive(Clone, Debug, PartialEq)]
pub struct LoopPrice {
    pub count: f64,
    pub body: f64,
    pub vjp: f64,
    pub state_bytes: f64,
    /// Whether the count and the state's size are known (static, or sizes
    /// the model was given), not guessed (`DEFAULT_DIM`).
    pub known: bool,
}

/// Cost of a whole function: every statement priced on its own, from the
/// IR's types (no e-graph). A `custom` statement is its value, which the
/// e-graph and the backend take without it: it costs nothing.
pub fn function_cost(f: &Function, model: &CostModel) -> Cost {
    let model = model.clone().for_function(f);
    f.stmts
        .iter()
        .filter(|s| !matches!(s.op, Op::Custom(..)))
        .fold(Cost::ZERO, |c, s| {
            let operand = |k: usize| s.args.get(k).map(|a| f.ty(*a));
            c + model.op_cost(s.op, &operand, &|| Some(f.ty(s.var)), &|| false)
        })
}

/// Body steps `loopvjp L k m` recomputes over `n` steps: each segment of
/// `len ≤ k` steps from its checkpoint, once into a buffer (`len - 1`
/// steps, `m = 0`) or per state (`len (len - 1) / 2`, `m = 1`).
pub fn recomputed_steps(n: u64, k: u64, m: u32) -> u64 {
    let k = k.max(1);
    let (full, rest) = (n / k, n % k);
    let seg = |len: u64| {
        if m == 0 {
            len.saturating_sub(1)
        } else {
            len * len.saturating_sub(1) / 2
        }
    };
    full * seg(k) + seg(rest)
}

impl CostModel {
    /// The default model pricing sizes at `dims` (a size not listed: `DEFAULT_DIM`).
    pub fn with_dims(dims: IndexMap<String, u64>) -> CostModel {
        CostModel {
            dims,
            ..CostModel::default()
        }
    }

    /// The same model with λ, flops per stored residual byte.
    pub fn lambda(mut self, lambda: f64) -> CostModel {
        self.lambda = lambda;
        self
    }

    /// The model for pricing `f`: its loops' bodies priced at the model's
    /// sizes.
    pub fn for_function(mut self, f: &Function) -> CostModel {
        let inner = CostModel {
            loops: Vec::new(),
            ..self.clone()
        };
        self.loops = f
            .loops
            .iter()
            .map(|l| LoopPrice {
                count: inner.elements(&Type::array(l.state().dtype, vec![l.count.clone()])),
                body: function_cost(&l.body, &inner).flops(),
                vjp: l
                    .vjp
                    .as_ref()
                    .map_or(f64::INFINITY, |v| function_cost(v, &inner).flops()),
                state_bytes: inner.bytes(l.state()),
                known: inner.known(&l.count) && l.state().shape.iter().all(|d| inner.known(d)),
            })
            .collect();
        self
    }

    /// The extent the model gives size parameter `p`.
    pub fn dim(&self, p: &str) -> u64 {
        self.dims.get(p).copied().unwrap_or(DEFAULT_DIM)
    }

    /// Number of elements of a type at the model's sizes.
    pub fn elements(&self, t: &Type) -> f64 {
        self.bytes(t) / t.dtype.bytes() as f64
    }

    /// Bytes of a value of this type at the model's sizes.
    pub fn bytes(&self, t: &Type) -> f64 {
        t.bytes_at(&|p| self.dim(p))
    }

    /// Whether the model knows extent `d`: static, or of sizes it was
    /// given (not the `DEFAULT_DIM` guess).
    fn known(&self, d: &Dim) -> bool {
        d.params().iter().all(|p| self.dims.contains_key(*p))
    }

    /// The price of holding `bytes` (a stored residual, a tape the
    /// pullback holds, a segment buffer): `λ · bytes`, or, past the memory
    /// limit ([`crate::ir::memory::limit`]) at sizes the model knows
    /// (`known`), [`OVER_MEMORY`]: a choice that cannot run is never the
    /// cheapest where another can. (Sizes guessed are no evidence, and
    /// the extracted program must not depend on the machine's memory
    /// there.)
    fn held(&self, bytes: f64, known: bool) -> f64 {
        if known && bytes > crate::ir::memory::limit() as f64 {
            OVER_MEMORY
        } else {
            self.lambda * bytes
        }
    }

    /// Cost of one node on its own (children not included).
    pub fn node_cost(&self, eg: &EG, node: &Node) -> Cost {
        match node {
            Node::Input(_) | Node::Ty(_) => Cost::ZERO,
            // An input read in place by the pullback; any other `bwd` is
            // not a program.
            Node::Bwd([c]) => {
                if eg[*c].nodes.iter().any(|n| matches!(n, Node::Input(_))) {
                    Cost::ZERO
                } else {
                    Cost::INFINITY
                }
            }
            Node::Stash([c]) => match &eg[*c].data.ty {
                Some(t) => {
                    Cost::new(self.held(self.bytes(t), t.shape.iter().all(|d| self.known(d))))
                }
                None => Cost::INFINITY,
            },
            Node::Op(op, ch) => {
                let operand = |k: usize| ch.get(k).and_then(|c| eg[*c].data.ty.as_ref());
                // The result type: any class holding this node has it.
                let result = || {
                    eg.lookup(node.clone())
                        .and_then(|id| eg[id].data.ty.as_ref())
                };
                // A tape the pullback recomputes: its operand is read
                // through `bwd`.
                let in_pullback = || {
                    ch.first()
                        .is_some_and(|c| eg[*c].nodes.iter().any(|x| matches!(x, Node::Bwd(_))))
                };
                self.op_cost(*op, &operand, &result, &in_pullback)
            }
        }
    }

    /// Cost of one op on operands of types `operand(k)` giving `result()`
    /// (`None`: unknown). `in_pullback()`: a loop's tape the pullback
    /// recomputes. The last two are asked only where the price needs them.
    pub fn op_cost<'t>(
        &self,
        op: Op,
        operand: &dyn Fn(usize) -> Option<&'t Type>,
        result: &dyn Fn() -> Option<&'t Type>,
        in_pullback: &dyn Fn() -> bool,
    ) -> Cost {
        if op.is_loop() {
            return self.loop_cost(op, in_pullback);
        }
        // Reductions work per operand element; `matmul` per multiply-add
        // (result elements times the inner size).
        let counted = match op.cost_basis() {
            CostBasis::ResultElement => None,
            CostBasis::OperandElement => operand(0).map(|t| self.elements(t)),
            CostBasis::MultiplyAdd => match (operand(0), operand(1)) {
                (Some(a), Some(b)) => {
                    let inner = Type::array(a.dtype, a.shape.get(1).cloned().into_iter().collect());
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
        };
        let elems = counted.unwrap_or_else(|| result().map_or(1.0, |t| self.elements(t)));
        Cost::new(op.flops() * elems + STMT_OVERHEAD)
    }

    /// A loop op: its steps of the body (and of the VJP), plus the memory
    /// it holds. A tape the pullback recomputes (its operand is read
    /// through `bwd`) is memory the pullback holds, priced like a stored
    /// one; `loopvjp`'s segment buffer (`k - 1` states, mode 0) too.
    fn loop_cost(&self, op: Op, in_pullback: &dyn Fn() -> bool) -> Cost {
        let Some(l) = op.loop_id().and_then(|l| self.loops.get(l)) else {
            return Cost::INFINITY;
        };
        let n = l.count;
        let flops = match op {
            Op::Loop(..) => n * l.body,
            Op::LoopTape(_, k, _) => {
                let rows = (n as u64).div_ceil(u64::from(k).max(1)) as f64 + 1.0;
                let memory = if in_pullback() {
                    self.held(rows * l.state_bytes, l.known)
                } else {
                    0.0
                };
                n * l.body + memory
            }
            Op::LoopVjp(_, k, m, _) => {
                let m = m & crate::ops::VJP_RECOMPUTE;
                let again = recomputed_steps(n as u64, u64::from(k), m) as f64;
                let buffer = if m == 0 {
                    f64::from(k.saturating_sub(1)) * l.state_bytes
                } else {
                    0.0
                };
                n * l.vjp + again * l.body + self.held(buffer, l.known)
            }
            _ => 0.0,
        };
        Cost::new(flops + STMT_OVERHEAD)
    }
}
