//! Lowering an IR [`Function`] to Cranelift IR, with simple loop fusion.
//!
//! # Plan
//!
//! Every value is read by its consumers in one of four ways ([`Read`]):
//!
//! * a scalar (parameter or statement) is one Cranelift value, computed once,
//!   in statement order, outside every loop;
//! * an array that lives in a buffer (an array parameter, or a
//!   *materialised* statement) is loaded at the loop index;
//! * a `bcast` (or an array `zero`) is never materialised for its consumers:
//!   inside a loop it is just its scalar (or `+0.0`);
//! * every other array statement is *inlined* into its single consumer's
//!   loop body.
//!
//! An array statement is materialised (its own loop, writing an output
//! buffer if it is returned, else a scratch buffer) when it is returned,
//! used more than once, or used by a non-element-wise op other than `sum`.
//! `sum` runs one loop over its operand's inlined element tree, in egrad's
//! fixed order ([`crate::ops::fold_row`]: eight partial sums) and the
//! dtype's precision, so results are bit-identical to the reference
//! interpreter. Element-wise loops, reductions and the column loops of
//! `sumlead` and `matmul` run in SIMD vectors ([`vector`]) unless
//! [`BackendOptions::simd`](super::BackendOptions) is off.
//!
//! The loop ops (`loop`, `looptape`, `loopvjp`) are loop nests whose steps
//! call the loop's body or VJP, compiled as separate functions (see the
//! module docs of [`crate::backend`]); their results are materialised, and
//! the plan gives each live loop statement its state buffers ([`LoopBufs`])
//! and each called body or VJP its scratch ([`LoopPlan`]).
//!
//! The per-op lowering is one exhaustive `match` over [`Op`] with no wildcard
//! arm ([`Translator::translate_op`]): a new op does not compile until it is
//! lowered here.

use super::jit::Libm;
use crate::error::Error;
use crate::lang::ir::{Function, VarId};
use crate::lang::types::{DType, Dim, Type};
use crate::ops::Op;
use crate::vmath::VFn;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    self, types, FuncRef, InstBuilder, MemFlagsData, StackSlotData, StackSlotKind,
};
use cranelift_frontend::FunctionBuilder;
use std::collections::HashMap;
use vector::Source;

mod vector;
// The SIMD vector math kernels' Cranelift emitter (`crate::vmath`), checked
// bit for bit against the scalar kernels; not yet called by the lowering
// (issue 15: exp, log, tanh, ... still go through libm here).
mod vmath_clif;

pub(crate) use vmath_clif::emit as emit_kernel;
#[cfg(test)]
mod vmath_clif_test;

/// A value used more than once is recomputed in each consumer's loop when
/// its element tree costs at most this many flops per element (a broadcast
/// read, an index map, an add or two): cheaper than storing it and loading
/// it back. Not for a value the plan must keep (a stored residual).
pub(crate) const RECOMPUTE_FLOPS: f64 = 2.0;

/// Nested row shifts computed in place: a shift whose operand's element
/// tree already holds this many is given a buffer instead (each level is
/// a recursion of the lowering).
const MAX_SHIFT_NEST: usize = 8;

/// Does element `i` of the result read element `i - offset` of the operand
/// (or zero outside it)? Such an index map (`slice`, `index`, `pad`,
/// `unindex`) computes an element-wise operand in place at the shifted
/// index; the other index maps read their operand from a buffer.
fn shifts(op: Op) -> bool {
    matches!(
        op,
        Op::Slice(_) | Op::Index(_) | Op::Pad(_) | Op::Unindex(_)
    )
}

/// What an index map that divides its index (`transpose`, `repeat`,
/// `spread`, `reverse`) counts as, in flops per element, when the plan
/// decides whether recomputing a value in each consumer is cheap: more
/// than [`RECOMPUTE_FLOPS`], so such a map read by several consumers is
/// materialised once.
const INDEX_DIVISION_FLOPS: f64 = 4.0;

/// How an op reads its operands, for fusion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Access {
    /// Element `i` of the result from element `i` of each operand (or a
    /// scalar): fusable both ways.
    Elementwise,
    /// A scalar from all elements (`sum`, `maxall`, `minall`): reads its
    /// operand's element tree in one loop.
    Reduce,
    /// Element `i` of the result is one element `f(i)` of the operand (or
    /// zero): inlined into its consumer, reading its operand from a buffer
    /// or, for a row shift ([`shifts`]), computing it in place.
    IndexMap,
    /// Its own loop nest writing a buffer (`sumlead`, `sumtail`, `matmul`,
    /// and the loop ops, whose steps are calls); reads its operands' element
    /// trees at any index.
    Nest,
}

/// The backend's fact about each op (an exhaustive match).
fn access(op: Op) -> Access {
    match op {
        Op::Const(_)
        | Op::Zero
        | Op::Bcast
        | Op::Add
        | Op::Sub
        | Op::Mul
        | Op::Div
        | Op::Neg
        | Op::Sin
        | Op::Cos
        | Op::Exp
        | Op::Log
        | Op::Sqrt
        | Op::Tanh
        | Op::Tan
        | Op::Abs
        | Op::Log1p
        | Op::Expm1
        | Op::Pow
        | Op::Max
        | Op::Min
        | Op::Lt
        | Op::Le
        | Op::Gt
        | Op::Ge
        | Op::Eq
        | Op::Ne
        | Op::Select => Access::Elementwise,
        Op::Sum | Op::MaxAll | Op::MinAll => Access::Reduce,
        Op::Slice(_)
        | Op::Pad(_)
        | Op::Index(_)
        | Op::Unindex(_)
        | Op::Repeat
        | Op::Spread
        | Op::Transpose
        | Op::Reverse => Access::IndexMap,
        Op::SumLead | Op::SumTail | Op::MaxTail | Op::MinTail | Op::MatMul => Access::Nest,
        Op::Loop(..) | Op::LoopTape(..) | Op::LoopVjp(..) => Access::Nest,
    }
}

/// How consumers read a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Read {
    /// One Cranelift value, computed before any use.
    Scalar,
    /// Element `i` of buffer `k`.
    Buf(usize),
    /// A scalar repeated: `bcast` of the variable, or `zero` (`None`).
    Splat(Option<VarId>),
    /// Computed in its single consumer's loop body.
    Inline,
    /// Never used: not computed at all.
    Dead,
}

/// The buffer layout and fusion decisions for one function. Buffers are
/// numbered: inputs (one per parameter), then outputs (one per returned
/// position), then scratch.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub n_inputs: usize,
    pub n_outputs: usize,
    /// Types of the scratch buffers, in buffer order (the scratch of the
    /// loop bodies and VJPs this function calls included).
    pub scratch: Vec<Type>,
    read: Vec<Read>,
    /// The buffer a statement's own loop writes, if it is materialised.
    home: Vec<Option<usize>>,
    /// Returned values stored after everything is computed:
    /// (value, output buffer). Scalars, parameters, repeated returns.
    stores: Vec<(VarId, usize)>,
    /// Per loop of the function (by number): the body and VJP it calls.
    pub loops: Vec<LoopPlan>,
    /// The buffers of each live loop statement besides its home.
    loop_bufs: Vec<Option<LoopBufs>>,
}

/// A loop's body and VJP as the functions a caller calls: each is compiled
/// as its own native function with the entry's ABI, only when some live
/// statement calls it.
#[derive(Clone, Debug, Default)]
pub(crate) struct LoopPlan {
    pub body: Option<Callee>,
    pub vjp: Option<Callee>,
}

/// A function called by its caller with the entry's ABI.
#[derive(Clone, Debug)]
pub(crate) struct Callee {
    pub plan: Plan,
    /// The caller's buffers passed as the callee's scratch, in order.
    scratch: Vec<usize>,
}

/// The buffers a loop statement uses besides its home (each only when the
/// count and `k` make it needed). State buffers have the loop state's type.
#[derive(Clone, Copy, Debug, Default)]
struct LoopBufs {
    /// Where a scalar result is written (an array result uses its home).
    out: Option<usize>,
    /// The second buffer the state (`loop`) or cotangent (`loopvjp`)
    /// alternates with the home between steps.
    other: Option<usize>,
    /// Two buffers for the states between checkpoints (`looptape`, and
    /// `loopvjp` in mode 1).
    a: Option<usize>,
    b: Option<usize>,
    /// `loopvjp` mode 0: the states of a segment after its checkpoint,
    /// `min(k, count) - 1` rows.
    seg: Option<usize>,
    /// `loopvjp` of a tape that is not in a buffer: its copy.
    tape: Option<usize>,
    /// A scan's sequence that is not in a buffer: its copy.
    seq: Option<usize>,
}

/// Append a scratch buffer of type `ty`; its buffer number.
fn push_scratch(scratch: &mut Vec<Type>, first: usize, ty: Type) -> usize {
    scratch.push(ty);
    first + scratch.len() - 1
}

impl Callee {
    /// Plan `f` (a loop body or VJP) and give it scratch among the caller's.
    fn new(f: &Function, scratch: &mut Vec<Type>, first: usize) -> Result<Callee, Error> {
        let plan = Plan::new(f, &[])?;
        let mine = plan
            .scratch
            .iter()
            .map(|ty| push_scratch(scratch, first, ty.clone()))
            .collect();
        Ok(Callee {
            plan,
            scratch: mine,
        })
    }
}

impl Plan {
    /// The plan for `f`; the values in `keep` (the residuals the optimizer
    /// chose to store) are materialised even where recomputing them in
    /// each consumer would be cheap.
    pub fn new(f: &Function, keep: &[VarId]) -> Result<Plan, Error> {
        let nv = f.vars.len();
        let mut kept = vec![false; nv];
        for v in keep {
            if let Some(k) = kept.get_mut(v.index()) {
                *k = true;
            }
        }
        let uses = f.use_counts();
        let n_inputs = f.params.len();
        let n_outputs = f.rets.len();
        let mut read = vec![Read::Dead; nv];
        let mut home = vec![None; nv];
        let mut stores = Vec::new();
        let mut scratch = Vec::new();

        // Does some consumer need the whole array (not element by element)?
        let mut needs_buffer = vec![false; nv];
        // `matmul` reads each element of an operand once per row or column
        // of the other: a computed operand is materialised, not recomputed
        // that often (an index map such as `transpose` of a buffer costs
        // no flops and stays in place).
        let mut matmul_operand = vec![false; nv];
        // Nested shifts in each value's element tree, if it is inlined.
        let mut shift_nest = vec![0usize; nv];
        for s in &f.stmts {
            let below = s.args.iter().map(|a| shift_nest[a.index()]).max();
            let below = below.unwrap_or(0);
            match access(s.op) {
                Access::IndexMap if shifts(s.op) && below < MAX_SHIFT_NEST => {
                    shift_nest[s.var.index()] = below + 1;
                }
                Access::IndexMap => {
                    for a in &s.args {
                        needs_buffer[a.index()] = true;
                    }
                }
                Access::Elementwise => shift_nest[s.var.index()] = below,
                Access::Reduce | Access::Nest => {}
            }
            if s.op == Op::MatMul {
                for a in &s.args {
                    matmul_operand[a.index()] = true;
                }
            }
        }
        // Output positions of each returned value, in order.
        let mut ret_pos: Vec<Vec<usize>> = vec![Vec::new(); nv];
        for (k, r) in f.rets.iter().enumerate() {
            ret_pos
                .get_mut(r.index())
                .ok_or_else(|| Error::internal("backend: return of an unknown variable"))?
                .push(n_inputs + k);
        }

        for (k, p) in f.params.iter().enumerate() {
            let v = p.var.index();
            read[v] = if f.ty(p.var).is_scalar() {
                Read::Scalar
            } else {
                Read::Buf(k)
            };
            for &o in &ret_pos[v] {
                stores.push((p.var, o));
            }
        }
        // Flops per element of each inlined value's element tree.
        let mut tree_flops = vec![0.0f64; nv];
        // Materialised only because several consumers would recompute a
        // dear element tree: see `fuse_shared`.
        let mut shared_only = vec![false; nv];
        for s in &f.stmts {
            let v = s.var.index();
            let ty = f.ty(s.var);
            let rets = &ret_pos[v];
            if ty.is_scalar() {
                read[v] = if uses[v] > 0 {
                    Read::Scalar
                } else {
                    Read::Dead
                };
                for &o in rets {
                    stores.push((s.var, o));
                }
                continue;
            }
            // Cheap enough to recompute in each consumer rather than write
            // to memory and read back (see [`RECOMPUTE_FLOPS`])?
            let flops = Self::tree_flops(s, &read, &tree_flops);
            let cheap = matches!(access(s.op), Access::Elementwise | Access::IndexMap)
                && flops <= RECOMPUTE_FLOPS;
            // Materialised whatever its consumers: read whole, a loop nest,
            // a computed matmul operand, or a residual kept in memory.
            let must_buffer = needs_buffer[v]
                || access(s.op) == Access::Nest
                || (matmul_operand[v] && flops > 0.0)
                || (uses[v] > 1 && kept[v]);
            let splat = match s.op {
                Op::Bcast => Some(Read::Splat(s.args.first().copied())),
                Op::Zero => Some(Read::Splat(None)),
                _ => None,
            };
            if let Some(splat) = splat {
                read[v] = splat;
                home[v] = rets.first().copied();
            } else if let Some(&o) = rets.first() {
                read[v] = Read::Buf(o);
                home[v] = Some(o);
            } else if uses[v] == 0 {
                read[v] = Read::Dead;
            } else if must_buffer || (uses[v] > 1 && !cheap) {
                // Its scratch buffer is numbered below.
                read[v] = Read::Buf(usize::MAX);
                shared_only[v] = !must_buffer;
            } else {
                read[v] = Read::Inline;
                tree_flops[v] = flops;
            }
            // The first returned position is the statement's home; the others
            // are copies.
            for &o in rets.iter().skip(1) {
                stores.push((s.var, o));
            }
        }
        Self::fuse_shared(f, &mut read, &shared_only);
        for s in &f.stmts {
            let v = s.var.index();
            if read[v] == Read::Buf(usize::MAX) {
                let k = n_inputs + n_outputs + scratch.len();
                scratch.push(f.ty(s.var).clone());
                read[v] = Read::Buf(k);
                home[v] = Some(k);
            }
        }
        let first = n_inputs + n_outputs;
        let mut loops = vec![LoopPlan::default(); f.loops.len()];
        let mut loop_bufs = vec![None; nv];
        for s in &f.stmts {
            let Some(l) = s.op.loop_id() else {
                continue;
            };
            let v = s.var.index();
            if read[v] == Read::Dead {
                continue;
            }
            let lp = f
                .loops
                .get(l)
                .ok_or_else(|| Error::internal(format!("backend: there is no loop {l}")))?;
            let state = lp.state().clone();
            // A run-time count is planned for as if it were large: every
            // buffer a long loop needs.
            let count = lp.static_count().unwrap_or(u64::MAX);
            let buffered = |a: VarId| matches!(read[a.index()], Read::Buf(_));
            let arg = |i: usize| {
                s.args.get(i).copied().ok_or_else(|| {
                    Error::internal(format!("backend: `{}` is missing an operand", s.op.name()))
                })
            };
            let mut lb = LoopBufs::default();
            if lp.is_scan() {
                let xs = *s
                    .args
                    .last()
                    .ok_or_else(|| Error::internal("backend: a scan without its sequence"))?;
                if !buffered(xs) {
                    lb.seq = Some(push_scratch(&mut scratch, first, f.ty(xs).clone()));
                }
            }
            if f.ty(s.var).is_scalar() {
                lb.out = Some(match ret_pos[v].first() {
                    Some(&o) => o,
                    None => push_scratch(&mut scratch, first, state.clone()),
                });
            }
            // The state (or cotangent) alternates between the home and
            // `other`; an operand in a buffer is read in place by the
            // first step, any other is written to the buffer the first
            // step does not write.
            let ping_pong = |x: VarId| count >= 2 || (count == 1 && !buffered(x));
            let (body, vjp) = match s.op {
                Op::Loop(..) => {
                    if ping_pong(arg(0)?) {
                        lb.other = Some(push_scratch(&mut scratch, first, state.clone()));
                    }
                    (count >= 1, false)
                }
                Op::LoopTape(_, k, _) => {
                    let seg = count.min(u64::from(k.max(1)));
                    if seg >= 2 {
                        lb.a = Some(push_scratch(&mut scratch, first, state.clone()));
                    }
                    if seg >= 3 {
                        lb.b = Some(push_scratch(&mut scratch, first, state.clone()));
                    }
                    (count >= 1, false)
                }
                Op::LoopVjp(_, k, m, _) => {
                    let (t, g) = (arg(0)?, arg(1)?);
                    if !buffered(t) {
                        lb.tape = Some(push_scratch(&mut scratch, first, f.ty(t).clone()));
                    }
                    if ping_pong(g) {
                        lb.other = Some(push_scratch(&mut scratch, first, state.clone()));
                    }
                    let seg = count.min(u64::from(k.max(1)));
                    if m == 0 && seg >= 2 {
                        let mut shape = vec![Dim::Lit(seg - 1)];
                        shape.extend(state.shape.iter().cloned());
                        let ty = Type::array(state.dtype, shape);
                        lb.seg = Some(push_scratch(&mut scratch, first, ty));
                    }
                    if m != 0 && seg >= 2 {
                        lb.a = Some(push_scratch(&mut scratch, first, state.clone()));
                    }
                    if m != 0 && seg >= 3 {
                        lb.b = Some(push_scratch(&mut scratch, first, state.clone()));
                    }
                    (seg >= 2, count >= 1)
                }
                other => {
                    return Err(Error::internal(format!(
                        "backend: `{}` is not a loop op",
                        other.name()
                    )))
                }
            };
            loop_bufs[v] = Some(lb);
            if body && loops[l].body.is_none() {
                loops[l].body = Some(Callee::new(&lp.body, &mut scratch, first)?);
            }
            if vjp && loops[l].vjp.is_none() {
                let vf = lp.vjp.as_ref().ok_or_else(|| {
                    Error::internal(format!("backend: loop {l} has no VJP for `loopvjp`"))
                })?;
                loops[l].vjp = Some(Callee::new(vf, &mut scratch, first)?);
            }
        }
        Ok(Plan {
            n_inputs,
            n_outputs,
            scratch,
            read,
            home,
            stores,
            loops,
            loop_bufs,
        })
    }

    /// A value used more than once is computed once per element when all
    /// its consumers are computed in the same loop (an element tree
    /// computes each inlined value once), so it needs no buffer even when
    /// it is dear. Walking backwards, each value learns the loop its
    /// consumers run in (the one loop of an inlined consumer, a
    /// materialised or scalar consumer's own); a value in `shared` (only
    /// materialised for its sharing) whose consumers all run in one loop is
    /// inlined there. A row shift reads its operand at another index, so
    /// it counts as a loop of its own.
    fn fuse_shared(f: &Function, read: &mut [Read], shared: &[bool]) {
        #[derive(Clone, Copy, PartialEq)]
        enum Loop {
            None,
            One(usize),
            Many,
        }
        let mut runs_in = vec![Loop::None; read.len()];
        for (si, s) in f.stmts.iter().enumerate().rev() {
            let v = s.var.index();
            if shared[v] && matches!(runs_in[v], Loop::One(_)) {
                read[v] = Read::Inline;
            }
            let mine = match read[v] {
                Read::Dead | Read::Splat(_) => continue,
                Read::Inline => runs_in[v],
                Read::Scalar | Read::Buf(_) => Loop::One(si),
            };
            let theirs = if shifts(s.op) { Loop::Many } else { mine };
            for a in &s.args {
                let r = &mut runs_in[a.index()];
                *r = match *r {
                    Loop::None => theirs,
                    same if same == theirs => same,
                    _ => Loop::Many,
                };
            }
        }
    }

    /// Flops per element of statement `s`'s element tree: itself and the
    /// inlined values under it.
    fn tree_flops(s: &crate::lang::ir::Stmt, read: &[Read], tree: &[f64]) -> f64 {
        // An index map that divides the index (`transpose`, `repeat`,
        // `spread`, `reverse`) costs about as much as a few flops; the
        // row shifts only add an offset.
        let division = match access(s.op) {
            Access::IndexMap if !shifts(s.op) => INDEX_DIVISION_FLOPS,
            _ => 0.0,
        };
        division
            + s.op.flops()
            + s.args
                .iter()
                .filter(|a| read[a.index()] == Read::Inline)
                .map(|a| tree[a.index()])
                .sum::<f64>()
    }

    pub fn n_buffers(&self) -> usize {
        self.n_inputs + self.n_outputs + self.scratch.len()
    }
}

fn cl_type(d: DType) -> ir::Type {
    match d {
        DType::F32 => types::F32,
        // An `i64` parameter's buffer is never read (it gives a size).
        DType::F64 | DType::I64 => types::F64,
    }
}

fn log2_bytes(d: DType) -> i64 {
    match d {
        DType::F32 => 2,
        DType::F64 | DType::I64 => 3,
    }
}

/// The native functions a function calls for one of its loops (those its
/// [`LoopPlan`] compiles).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LoopRefs {
    pub body: Option<FuncRef>,
    pub vjp: Option<FuncRef>,
}

/// A loop body or VJP ready to be called: its buffer table lives in a stack
/// slot of the caller, its scratch pointers already stored there; each call
/// stores its input and output pointers first.
#[derive(Clone, Copy, Debug)]
struct CallSite {
    func: FuncRef,
    /// Address of the callee's buffer table.
    table: ir::Value,
    n_inputs: usize,
}

/// A function a translated function calls, other than its loops' bodies
/// and VJPs: a libm import (or the matrix kernel), or one of egrad's vector
/// math kernels on a scalar or vector type, compiled once per module (see
/// [`Translator::translate_vmath`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Import {
    Libm(Libm, DType),
    Kernel(VFn, ir::Type),
}

/// Vector math kernels emitted inline per function; further uses (and
/// those in the scalar tails of vector loops) call the module's copy of the
/// kernel, so code size and compile time stay linear in the program with a
/// small constant.
const INLINE_KERNELS: usize = 4;

/// Translates one function into a Cranelift function body.
pub(crate) struct Translator<'a, 'b> {
    f: &'a Function,
    plan: &'a Plan,
    b: FunctionBuilder<'b>,
    /// Resolves a callee, declaring it in the module on first use.
    import: &'a mut dyn FnMut(&mut ir::Function, Import) -> FuncRef,
    imported: Vec<(Import, FuncRef)>,
    /// Vector math kernels emitted inline so far.
    inlined_kernels: usize,
    /// Emitting code that runs rarely (the scalar tail of a vector loop):
    /// kernels are called, not inlined.
    cold: bool,
    /// The functions called for each loop, by loop number.
    loop_refs: Vec<LoopRefs>,
    /// Base pointer of every buffer (loaded in the entry block).
    bufs: Vec<ir::Value>,
    /// The `dims` argument, passed on to loop bodies and VJPs.
    dims_ptr: Option<ir::Value>,
    /// Values of the size parameters (loaded in the entry block).
    dims: Vec<ir::Value>,
    /// Scalars computed so far.
    scalars: Vec<Option<ir::Value>>,
    /// The statement defining each variable.
    defs: Vec<Option<usize>>,
    /// Element-wise loops, reductions and column loops in SIMD vectors
    /// (see [`vector`]); else scalar code with the same results.
    simd: bool,
    /// `matmul` of operands in memory through a GEMM kernel call.
    gemm: bool,
    /// The row being reduced, inside a `sumtail` or `sumlead` loop nest.
    row: Option<RowCtx>,
    /// Every lane of the element tree being computed lies inside every
    /// `pad`/`unindex` at its top level (the interior loop of
    /// [`Translator::translate_map`]): no bounds test.
    pads_inside: bool,
}

/// Inside a row or column reduction (`sumtail`, `maxtail`, `mintail`,
/// `sumlead`), the elements read belong to row `index`, which starts at
/// element `start` and has the shape `tail`. A `repeat` of a `tail`-shaped
/// value then reads element `i - start` and a `spread` to `tail`-shaped
/// rows reads element `index`: no division per element.
#[derive(Clone, Debug)]
struct RowCtx {
    start: ir::Value,
    index: ir::Value,
    tail: Vec<Dim>,
}

impl<'a, 'b> Translator<'a, 'b> {
    pub fn new(
        f: &'a Function,
        plan: &'a Plan,
        b: FunctionBuilder<'b>,
        import: &'a mut dyn FnMut(&mut ir::Function, Import) -> FuncRef,
        loop_refs: Vec<LoopRefs>,
        opts: super::BackendOptions,
    ) -> Self {
        Translator {
            f,
            plan,
            b,
            import,
            imported: Vec::new(),
            inlined_kernels: 0,
            cold: false,
            loop_refs,
            bufs: Vec::new(),
            dims_ptr: None,
            dims: Vec::new(),
            scalars: vec![None; f.vars.len()],
            defs: f.definitions(),
            simd: opts.simd,
            gemm: opts.gemm,
            row: None,
            pads_inside: false,
        }
    }

    /// Emit the whole body: `fn(bufs: *const *mut u8, dims: *const i64)`.
    /// Returns the builder so the caller can finalize it.
    pub fn translate_function(mut self) -> Result<FunctionBuilder<'b>, Error> {
        let entry = self.b.create_block();
        self.b.append_block_params_for_function_params(entry);
        self.b.switch_to_block(entry);
        let (bufs_ptr, dims_ptr) = match self.b.block_params(entry) {
            [a, b] => (*a, *b),
            _ => {
                return Err(Error::internal(
                    "backend: entry signature is not (bufs, dims)",
                ))
            }
        };
        for k in 0..self.plan.n_buffers() {
            let off =
                i32::try_from(8 * k).map_err(|_| Error::internal("backend: too many buffers"))?;
            let p = self
                .b
                .ins()
                .load(types::I64, MemFlagsData::trusted(), bufs_ptr, off);
            self.bufs.push(p);
        }
        self.dims_ptr = Some(dims_ptr);
        for k in 0..self.f.size_params.len() {
            let off = i32::try_from(8 * k)
                .map_err(|_| Error::internal("backend: too many size parameters"))?;
            let d = self
                .b
                .ins()
                .load(types::I64, MemFlagsData::trusted(), dims_ptr, off);
            self.dims.push(d);
        }
        self.translate_params()?;
        for s in 0..self.f.stmts.len() {
            self.translate_stmt(s)?;
        }
        self.translate_stores()?;
        self.b.ins().return_(&[]);
        self.b.seal_all_blocks();
        Ok(self.b)
    }

    /// Load scalar parameters (one element each) once, at entry.
    fn translate_params(&mut self) -> Result<(), Error> {
        for (k, p) in self.f.params.iter().enumerate() {
            let ty = self.f.ty(p.var);
            if ty.is_scalar() {
                let base = self.buf(k)?;
                let x = self
                    .b
                    .ins()
                    .load(cl_type(ty.dtype), MemFlagsData::trusted(), base, 0);
                self.scalars[p.var.index()] = Some(x);
            }
        }
        Ok(())
    }

    /// One statement at its place in program order: a scalar is computed, a
    /// materialised array gets its own loop, anything else waits for its
    /// consumer.
    fn translate_stmt(&mut self, s: usize) -> Result<(), Error> {
        let stmt = &self.f.stmts[s];
        let v = stmt.var;
        let ty = self.f.ty(v).clone();
        if ty.is_scalar() {
            if self.plan.read[v.index()] == Read::Dead {
                return Ok(());
            }
            let x = self.translate_scalar(s)?;
            self.scalars[v.index()] = Some(x);
            return Ok(());
        }
        if let Some(k) = self.plan.home[v.index()] {
            self.translate_materialise(v, k)?;
        }
        Ok(())
    }

    /// A scalar statement: `sum` is a reduction loop, everything else is the
    /// op applied to scalar operands.
    fn translate_scalar(&mut self, s: usize) -> Result<ir::Value, Error> {
        let stmt = &self.f.stmts[s];
        let dtype = self.f.ty(stmt.var).dtype;
        let first = || {
            stmt.args.first().copied().ok_or_else(|| {
                Error::internal(format!("backend: `{}` without an operand", stmt.op.name()))
            })
        };
        // A loop with a scalar state: run into its one-element buffer.
        if stmt.op.is_loop() {
            let out = self
                .loop_bufs(stmt.var)?
                .out
                .ok_or_else(|| Error::internal("backend: a scalar loop without a buffer"))?;
            self.translate_loop_stmt(s, out)?;
            let base = self.buf(out)?;
            return Ok(self
                .b
                .ins()
                .load(cl_type(dtype), MemFlagsData::trusted(), base, 0));
        }
        // A scalar from an array: a fold of all its elements (`sumlead` of
        // a vector included), or one element of a vector.
        if let Some(fold) = stmt.op.reduction() {
            let a = first()?;
            let len = self.translate_len(self.f.ty(a).clone())?;
            let zero = self.b.ins().iconst(types::I64, 0);
            return self.translate_fold(a, zero, len, dtype, fold);
        }
        if let Op::Index(k) = stmt.op {
            let k = i64::try_from(k).map_err(|_| Error::internal("backend: row overflows"))?;
            let j = self.b.ins().iconst(types::I64, k);
            return self.translate_elem(first()?, j);
        }
        let mut args = Vec::with_capacity(stmt.args.len());
        for a in &stmt.args {
            args.push(self.scalar(*a)?);
        }
        self.translate_op(stmt.op, dtype, &args)
    }

    /// The loop writing a materialised statement `v` into buffer `k`.
    fn translate_materialise(&mut self, v: VarId, k: usize) -> Result<(), Error> {
        let ty = self.f.ty(v).clone();
        if let Some(s) = self.defs.get(v.index()).copied().flatten() {
            if self.f.stmts[s].op.is_loop() {
                return self.translate_loop_stmt(s, k);
            }
            if access(self.f.stmts[s].op) == Access::Nest {
                return self.translate_nest(s, k);
            }
        }
        let len = self.translate_len(ty.clone())?;
        let base = self.buf(k)?;
        self.translate_map(Source::Tree(v), ty.dtype, base, len)
    }

    /// Returned scalars, returned parameters and repeated returns, stored
    /// after every value is computed.
    fn translate_stores(&mut self) -> Result<(), Error> {
        for &(v, k) in &self.plan.stores {
            let ty = self.f.ty(v).clone();
            let base = self.buf(k)?;
            if ty.is_scalar() {
                let x = self.scalar(v)?;
                self.b.ins().store(MemFlagsData::trusted(), x, base, 0);
            } else {
                let len = self.translate_len(ty.clone())?;
                self.translate_map(Source::Elem(v), ty.dtype, base, len)?;
            }
        }
        Ok(())
    }

    /// Element `i` of `v` as its consumers read it.
    fn translate_elem(&mut self, v: VarId, i: ir::Value) -> Result<ir::Value, Error> {
        match self.read(v)? {
            Read::Inline => self.translate_tree(v, i),
            _ => self.translate_leaf(v, i),
        }
    }

    /// Element `i` of a value that is not inlined (scalar, buffer, splat).
    fn translate_leaf(&mut self, v: VarId, i: ir::Value) -> Result<ir::Value, Error> {
        match self.read(v)? {
            Read::Scalar => self.scalar(v),
            Read::Buf(k) => {
                let dtype = self.f.ty(v).dtype;
                let base = self.buf(k)?;
                let addr = self.translate_addr(dtype, base, i);
                Ok(self
                    .b
                    .ins()
                    .load(cl_type(dtype), MemFlagsData::trusted(), addr, 0))
            }
            Read::Splat(Some(x)) => self.scalar(x),
            Read::Splat(None) => self.translate_op(Op::Zero, self.f.ty(v).dtype, &[]),
            Read::Inline | Read::Dead => Err(Error::internal(format!(
                "backend: %{} read as a leaf but it is not computed",
                self.f.var_name(v)
            ))),
        }
    }

    /// A loop nest writing statement `s` (`sumlead`, `sumtail`, `matmul`)
    /// into buffer `k`. Sums run left to right from +0 in the dtype, like the
    /// interpreter; `matmul` is a chain of fused multiply-adds (or a call of
    /// the matrix kernel, which computes the same chain).
    fn translate_nest(&mut self, s: usize, k: usize) -> Result<(), Error> {
        let stmt = self.f.stmts[s].clone();
        let dtype = self.f.ty(stmt.var).dtype;
        let base = self.buf(k)?;
        let a = *stmt
            .args
            .first()
            .ok_or_else(|| Error::internal("backend: loop nest without an operand"))?;
        let at = self.f.ty(a).clone();
        let rest = Type::array(dtype, at.shape.get(1..).unwrap_or(&[]).to_vec());
        let lead = Type::array(dtype, at.shape.first().cloned().into_iter().collect());
        match stmt.op {
            Op::SumTail | Op::MaxTail | Op::MinTail => {
                // Each row folded in egrad's fixed order.
                let rows = self.translate_len(lead)?;
                let cols = self.translate_len(rest)?;
                if stmt.op == Op::SumTail
                    && self.translate_gemv(Libm::RowDot, a, &at, (rows, cols), base)?
                {
                    return Ok(());
                }
                let fold = stmt.op.reduction().unwrap_or((0.0, Op::Add));
                self.translate_loop(rows, &mut |t, r| {
                    let start = t.b.ins().imul(r, cols);
                    let row = t.row_ctx(start, r, &at);
                    let total =
                        t.within_row(row, &mut |t| t.translate_fold(a, start, cols, dtype, fold))?;
                    t.translate_store(dtype, base, r, total);
                    Ok(())
                })
            }
            Op::SumLead => {
                // Each column summed over the rows in order, many columns
                // at a time.
                let rows = self.translate_len(lead)?;
                let cols = self.translate_len(rest)?;
                if self.translate_gemv(Libm::ColSum, a, &at, (rows, cols), base)? {
                    return Ok(());
                }
                let zero = self.b.ins().iconst(types::I64, 0);
                let simd = self.simd;
                self.translate_columns(
                    dtype,
                    base,
                    zero,
                    cols,
                    rows,
                    0.0,
                    &mut |t, r, js, vec, sofar| {
                        let rc = t.b.ins().imul(r, cols);
                        let row = t.row_ctx(rc, r, &at);
                        t.within_row(row, &mut |t| {
                            js.iter()
                                .zip(sofar)
                                .map(|(&j, &acc)| {
                                    let at = t.b.ins().iadd(rc, j);
                                    if vec && simd {
                                        let x = t.translate_elem_vec(a, at)?;
                                        t.translate_vop(Op::Add, dtype, &[acc, x])
                                    } else {
                                        let x = t.translate_elem(a, at)?;
                                        t.translate_op(Op::Add, dtype, &[acc, x])
                                    }
                                })
                                .collect()
                        })
                    },
                )
            }
            Op::MatMul => {
                let b = *stmt
                    .args
                    .get(1)
                    .ok_or_else(|| Error::internal("backend: `matmul` needs two operands"))?;
                let bt = self.f.ty(b).clone();
                let dim = |t: &Type, i: usize| {
                    Type::array(dtype, t.shape.get(i).cloned().into_iter().collect())
                };
                let m = self.translate_len(dim(&at, 0))?;
                let kk = self.translate_len(dim(&at, 1))?;
                let n = self.translate_len(dim(&bt, 1))?;
                // An operand that is an inlined `transpose c` is read from
                // `c` at the swapped index (no division per element); the
                // same elements in the same order, so the same result.
                let (a_t, b_t) = (self.inlined_transpose(a), self.inlined_transpose(b));
                if self.gemm {
                    let ops = (
                        self.gemm_operand(a, a_t, m, kk)?,
                        self.gemm_operand(b, b_t, kk, n)?,
                    );
                    if let (Some((pa, rsa, csa)), Some((pb, rsb, csb))) = ops {
                        let gemm = self.libm_ref(Libm::Gemm, dtype);
                        self.b
                            .ins()
                            .call(gemm, &[m, kk, n, pa, rsa, csa, pb, rsb, csb, base]);
                        return Ok(());
                    }
                }
                // Row i of the result: its columns many at a time, each
                // a chain of fma(a[i, l], b[l, j], acc) over l in order.
                self.translate_loop(m, &mut |t, i| {
                    let out_row = t.b.ins().imul(i, n);
                    t.translate_columns(
                        dtype,
                        base,
                        out_row,
                        n,
                        kk,
                        0.0,
                        &mut |t, l, js, vec, sofar| {
                            let x = t.translate_matrix_elem(a, a_t, (i, l), (m, kk))?;
                            let x = if vec {
                                t.b.ins().splat(vector::vec_type(dtype), x)
                            } else {
                                x
                            };
                            js.iter()
                                .zip(sofar)
                                .map(|(&j, &acc)| {
                                    let y = if vec {
                                        t.translate_matrix_vec(b, b_t, (l, j), (kk, n))?
                                    } else {
                                        t.translate_matrix_elem(b, b_t, (l, j), (kk, n))?
                                    };
                                    // One rounding per step: `crate::gemm`'s
                                    // definition, which the kernel computes.
                                    Ok(t.b.ins().fma(x, y, acc))
                                })
                                .collect()
                        },
                    )
                })
            }
            other => Err(Error::internal(format!(
                "backend: `{}` is not a loop nest",
                other.name()
            ))),
        }
    }

    /// The value of `v` when it is an integer constant (`iconst`, or an
    /// `imul`/`iadd`/`isub` of known values; the `_imm` builders emit an
    /// `iconst` and the plain instruction) at this point of the lowering.
    fn known(&self, v: ir::Value) -> Option<i64> {
        use cranelift_codegen::ir::{InstructionData, Opcode, ValueDef};
        let dfg = &self.b.func.dfg;
        let ValueDef::Result(inst, 0) = dfg.value_def(v) else {
            return None;
        };
        match dfg.insts[inst] {
            InstructionData::UnaryImm {
                opcode: Opcode::Iconst,
                imm,
            } => Some(imm.bits()),
            InstructionData::Binary { opcode, args } => {
                let (a, b) = (self.known(args[0])?, self.known(args[1])?);
                match opcode {
                    Opcode::Imul => a.checked_mul(b),
                    Opcode::Iadd => a.checked_add(b),
                    Opcode::Isub => a.checked_sub(b),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// The row context of row `index` of `a` (a matrix or higher), which
    /// starts at element `start`.
    fn row_ctx(&self, start: ir::Value, index: ir::Value, a: &Type) -> Option<RowCtx> {
        Some(RowCtx {
            start,
            index,
            tail: a.shape.get(1..)?.to_vec(),
        })
    }

    /// `body` with the row context `row` and no known-inside `pad`s (a
    /// shift's operand is computed at another index); both restored after.
    fn within_row<T>(
        &mut self,
        row: Option<RowCtx>,
        body: &mut dyn FnMut(&mut Self) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let outer = std::mem::replace(&mut self.row, row);
        let pads = std::mem::replace(&mut self.pads_inside, false);
        let out = body(self);
        self.row = outer;
        self.pads_inside = pads;
        out
    }

    /// Where `pad`/`unindex` statement `s` puts its operand: the first
    /// element it covers and the operand's length.
    fn pad_range(&mut self, s: usize) -> Result<(ir::Value, ir::Value), Error> {
        let stmt = &self.f.stmts[s];
        let (Op::Pad(c) | Op::Unindex(c)) = stmt.op else {
            return Err(Error::internal("backend: not a pad"));
        };
        let a = *stmt
            .args
            .first()
            .ok_or_else(|| Error::internal("backend: a pad without its operand"))?;
        let out = self.f.ty(stmt.var);
        let row = Type::array(out.dtype, out.shape.get(1..).unwrap_or(&[]).to_vec());
        let row = self.translate_len(row)?;
        let c = i64::try_from(c).map_err(|_| Error::internal("backend: row overflows"))?;
        let start = self.b.ins().imul_imm_s(row, c);
        let n = self.translate_len(self.f.ty(a).clone())?;
        Ok((start, n))
    }

    /// Where element `i` of index map `s` reads, known from the row
    /// context: element `i - start` of a `repeat`'s operand, element
    /// `index` of a `spread`'s; `None` when the context does not say.
    fn row_read(&mut self, s: usize, i: ir::Value) -> Option<ir::Value> {
        let ctx = self.row.clone()?;
        let stmt = &self.f.stmts[s];
        let a = *stmt.args.first()?;
        let out = &self.f.ty(stmt.var).shape;
        match stmt.op {
            Op::Repeat if self.f.ty(a).shape == ctx.tail => Some(self.b.ins().isub(i, ctx.start)),
            Op::Spread if out.get(1..)? == ctx.tail.as_slice() => Some(ctx.index),
            // Element (index, c) of an [N, M] transpose reads (c, index).
            Op::Transpose if out.len() == 2 && out[1..] == ctx.tail[..] => {
                let n = out[0].clone();
                let n = self.translate_len(Type::array(DType::I64, vec![n])).ok()?;
                let c = self.b.ins().isub(i, ctx.start);
                let cn = self.b.ins().imul(c, n);
                Some(self.b.ins().iadd(cn, ctx.index))
            }
            _ => None,
        }
    }

    /// The row context of a row shift's operand (`slice`, `index`, `pad`,
    /// `unindex` statement `s`): the same rows moved by the shift, when its
    /// rows have the context's shape; else none (the operand's elements are
    /// at another index).
    fn shifted_row(&mut self, s: usize) -> Option<RowCtx> {
        let ctx = self.row.clone()?;
        let stmt = &self.f.stmts[s];
        let a = *stmt.args.first()?;
        let at = self.f.ty(a);
        if at.shape.get(1..)? != ctx.tail.as_slice() {
            return None;
        }
        let (rows, dtype) = match stmt.op {
            Op::Slice(c) | Op::Index(c) => (i64::try_from(c).ok()?, at.dtype),
            Op::Pad(c) | Op::Unindex(c) => (-i64::try_from(c).ok()?, at.dtype),
            _ => return None,
        };
        if rows == 0 {
            return Some(ctx);
        }
        // Row r of the shift is row r + rows of its operand.
        let len = self
            .translate_len(Type::array(dtype, ctx.tail.clone()))
            .ok()?;
        let off = self.b.ins().imul_imm_s(len, rows);
        Some(RowCtx {
            start: self.b.ins().iadd(ctx.start, off),
            index: self.b.ins().iadd_imm_s(ctx.index, rows),
            tail: ctx.tail,
        })
    }

    /// Would a row context for values of type `ty` spare a division in
    /// some index map of the element tree under `root` (see
    /// [`Self::row_read`])?
    fn rows_help(&self, root: VarId, ty: &Type) -> Result<bool, Error> {
        if ty.rank() < 2 {
            return Ok(false);
        }
        let tail = &ty.shape[1..];
        // The element tree, through the row shifts that keep the rows'
        // shape (`shifted_row` carries the context into them).
        let mut stack = vec![root];
        let mut seen = std::collections::HashSet::from([root]);
        while let Some(v) = stack.pop() {
            let Some(s) = self.defs.get(v.index()).copied().flatten() else {
                continue;
            };
            let stmt = &self.f.stmts[s];
            let out = &self.f.ty(stmt.var).shape;
            let first = stmt.args.first().map(|&a| &self.f.ty(a).shape);
            let descend = match stmt.op {
                Op::Repeat if first.map(|a| a[..] == *tail) == Some(true) => return Ok(true),
                Op::Spread if out.get(1..) == Some(tail) => return Ok(true),
                Op::Transpose if out.len() == 2 && out[1..] == *tail => return Ok(true),
                Op::Slice(_) | Op::Index(_) | Op::Pad(_) | Op::Unindex(_) => {
                    first.and_then(|a| a.get(1..)) == Some(tail)
                }
                op => access(op) == Access::Elementwise,
            };
            if descend {
                for &a in &stmt.args {
                    if self.read(a)? == Read::Inline && seen.insert(a) {
                        stack.push(a);
                    }
                }
            }
        }
        Ok(false)
    }

    /// The buffers of a live loop statement (see [`LoopBufs`]).
    fn loop_bufs(&self, v: VarId) -> Result<LoopBufs, Error> {
        self.plan
            .loop_bufs
            .get(v.index())
            .copied()
            .flatten()
            .ok_or_else(|| Error::internal("backend: a loop statement without its buffers"))
    }

    /// A loop statement `s` (`loop`, `looptape`, `loopvjp`) writing buffer
    /// `home`. The counted loops run here; each step calls the loop's body
    /// (or VJP), compiled as its own function, on state buffers of this
    /// function ([`LoopBufs`]). Steps happen in the interpreter's order, so
    /// results are bit-identical to `run_loop`. Buffers a step writes never
    /// alias the buffers it reads.
    fn translate_loop_stmt(&mut self, s: usize, home: usize) -> Result<(), Error> {
        let f = self.f;
        let stmt = &f.stmts[s];
        let l = stmt
            .op
            .loop_id()
            .ok_or_else(|| Error::internal("backend: not a loop op"))?;
        let lp = f
            .loops
            .get(l)
            .ok_or_else(|| Error::internal(format!("backend: there is no loop {l}")))?;
        let lb = self.loop_bufs(stmt.var)?;
        // The count: known (`Some`) or read from `dims` at run time.
        let fixed = lp.static_count();
        let state = lp.state().clone();
        let n = self.translate_len(Type::array(state.dtype, vec![lp.count.clone()]))?;
        let width = self.translate_len(state.clone())?;
        let h = self.buf(home)?;
        let arg = |i: usize| {
            stmt.args.get(i).copied().ok_or_else(|| {
                Error::internal(format!(
                    "backend: `{}` is missing an operand",
                    stmt.op.name()
                ))
            })
        };
        // An optional buffer: where the plan left it out, no step uses it
        // (the home stands in, never read or written through it).
        let opt = |t: &Self, k: Option<usize>| k.map_or(Ok(h), |k| t.buf(k));
        let rowbytes = self.b.ins().ishl_imm_u(width, log2_bytes(state.dtype));
        // A scan's sequence: its base and the bytes of one row; step `t`
        // passes row `t` to the body (and the VJP at state `t` gets it too).
        let seq = match lp.row() {
            Some(row) => {
                let xs = *stmt
                    .args
                    .last()
                    .ok_or_else(|| Error::internal("backend: a scan without its sequence"))?;
                let base = self.translate_in_buffer(xs, lb.seq)?;
                let w = self.translate_len(row.clone())?;
                Some((base, self.b.ins().ishl_imm_u(w, log2_bytes(row.dtype))))
            }
            None => None,
        };
        let scan = seq.is_some();
        // The inputs of a body call at step `t`: the state, and in a scan
        // row `t` of the sequence.
        let ins = move |t: &mut Self, st: ir::Value, step: ir::Value| -> Vec<ir::Value> {
            match seq {
                Some((base, rb)) => {
                    let off = t.b.ins().imul(step, rb);
                    vec![st, t.b.ins().iadd(base, off)]
                }
                None => vec![st],
            }
        };
        // With a run-time count, what a count of 0 does runs only then.
        let when_zero = |t: &mut Self, f: &mut dyn FnMut(&mut Self) -> Result<(), Error>| {
            if fixed.is_some() {
                return Ok(());
            }
            let z = t.b.ins().icmp_imm_s(IntCC::Equal, n, 0);
            let trips = t.b.ins().uextend(types::I64, z);
            t.translate_loop(trips, &mut |t, _| f(t))
        };
        match stmt.op {
            Op::Loop(..) => {
                let x = arg(0)?;
                if fixed == Some(0) {
                    return self.translate_fill(x, h, width);
                }
                let other = opt(self, lb.other)?;
                let body = self.call_site(l, false)?;
                let (cur, nxt) = self.translate_ping_pong(x, n, h, other, width)?;
                self.translate_loop(n, &mut |t, i| {
                    let c = t.b.use_var(cur);
                    let o = t.b.use_var(nxt);
                    let args = ins(t, c, i);
                    t.translate_call(body, &args, o)?;
                    t.translate_swap(cur, nxt, h, other);
                    Ok(())
                })?;
                when_zero(self, &mut |t| t.translate_fill(x, h, width))
            }
            Op::LoopTape(_, k, _) => {
                // Row 0 is the final state, row 1 + j the state after j·k
                // steps. The initial state goes to row 1; the step ending a
                // segment writes the next checkpoint row, the last step row
                // 0, the others alternate between `a` and `b`.
                let x = arg(0)?;
                if fixed == Some(0) {
                    return self.translate_fill(x, h, width);
                }
                when_zero(self, &mut |t| t.translate_fill(x, h, width))?;
                let row1 = self.b.ins().iadd(h, rowbytes);
                let (a, b) = (opt(self, lb.a)?, opt(self, lb.b)?);
                let body = self.call_site(l, false)?;
                let k = i64::from(k.max(1));
                // Only when there are steps: the tape then has row 1.
                let nz = self.b.ins().icmp_imm_s(IntCC::NotEqual, n, 0);
                let trips = self.b.ins().uextend(types::I64, nz);
                self.translate_loop(trips, &mut |t, _| t.translate_fill(x, row1, width))?;
                let cur = self.translate_var(row1);
                let zero = self.b.ins().iconst(types::I64, 0);
                let step = self.translate_var(zero);
                let row2 = self.b.ins().iadd(row1, rowbytes);
                let row = self.translate_var(row2);
                self.translate_loop(n, &mut |t, i| {
                    let c = t.b.use_var(cur);
                    let sp = t.b.use_var(step);
                    let s1 = t.b.ins().iadd_imm_s(sp, 1);
                    let seg_end = t.b.ins().icmp_imm_s(IntCC::Equal, s1, k);
                    let i1 = t.b.ins().iadd_imm_s(i, 1);
                    let all_end = t.b.ins().icmp(IntCC::Equal, i1, n);
                    let on_a = t.b.ins().icmp(IntCC::Equal, c, a);
                    let between = t.b.ins().select(on_a, b, a);
                    let r = t.b.use_var(row);
                    let o = t.b.ins().select(seg_end, r, between);
                    let o = t.b.ins().select(all_end, h, o);
                    let args = ins(t, c, i);
                    t.translate_call(body, &args, o)?;
                    t.b.def_var(cur, o);
                    let zero = t.b.ins().iconst(types::I64, 0);
                    let sp = t.b.ins().select(seg_end, zero, s1);
                    t.b.def_var(step, sp);
                    let next_row = t.b.ins().iadd(r, rowbytes);
                    let r = t.b.ins().select(seg_end, next_row, r);
                    t.b.def_var(row, r);
                    Ok(())
                })
            }
            Op::LoopVjp(_, k, m, _) => {
                let (tv, g) = (arg(0)?, arg(1)?);
                let tape = self.translate_in_buffer(tv, lb.tape)?;
                if fixed == Some(0) {
                    return self.translate_fill(g, h, width);
                }
                let other = opt(self, lb.other)?;
                let vjp = self.call_site(l, true)?;
                let k = u64::from(k.max(1));
                // Some segment may have states after its checkpoint to
                // recompute.
                let body = if fixed.unwrap_or(u64::MAX).min(k) >= 2 {
                    Some(self.call_site(l, false)?)
                } else {
                    None
                };
                let (gcur, gnxt) = self.translate_ping_pong(g, n, h, other, width)?;
                let seg = opt(self, lb.seg)?;
                let (a, b) = (opt(self, lb.a)?, opt(self, lb.b)?);
                // ⌈n/k⌉ segments; checkpoint j in row 1 + j.
                let up = self.b.ins().iadd_imm_s(n, k as i64 - 1);
                let n_seg = self.b.ins().udiv_imm_s(up, k as i64);
                let ckpt0 = self.b.ins().iadd(tape, rowbytes);
                // The VJP at state `step`, held in `st`: the cotangent
                // moves on.
                let vjp_step =
                    move |t: &mut Self, st: ir::Value, step: ir::Value| -> Result<(), Error> {
                        let gc = t.b.use_var(gcur);
                        let go = t.b.use_var(gnxt);
                        let mut args = ins(t, st, step);
                        args.push(gc);
                        t.translate_call(vjp, &args, go)?;
                        t.translate_swap(gcur, gnxt, h, other);
                        Ok(())
                    };
                self.translate_loop(n_seg, &mut |t, jj| {
                    // Segment j = segments-1-jj: states j*k .. j*k+len-1,
                    // with len = min(k, count - j*k).
                    let last = t.b.ins().iadd_imm_s(n_seg, -1);
                    let j = t.b.ins().isub(last, jj);
                    let start = t.b.ins().imul_imm_s(j, k as i64);
                    let rest = t.b.ins().isub(n, start);
                    let kv = t.translate_count(k);
                    let short = t.b.ins().icmp(IntCC::UnsignedLessThan, rest, kv);
                    let len = t.b.ins().select(short, rest, kv);
                    let len1 = t.b.ins().iadd_imm_s(len, -1);
                    let off = t.b.ins().imul(j, rowbytes);
                    let ckpt = t.b.ins().iadd(ckpt0, off);
                    if m == 0 {
                        // States 1 .. len-1 into rows 0 .. len-2 of `seg`,
                        // then the VJP backwards over them and the
                        // checkpoint.
                        if let Some(body) = body {
                            let prev = t.translate_var(ckpt);
                            t.translate_loop(len1, &mut |t, r| {
                                let p = t.b.use_var(prev);
                                let ro = t.b.ins().imul(r, rowbytes);
                                let o = t.b.ins().iadd(seg, ro);
                                let sr = t.step_at(scan, start, r);
                                let args = ins(t, p, sr);
                                t.translate_call(body, &args, o)?;
                                t.b.def_var(prev, o);
                                Ok(())
                            })?;
                        }
                        t.translate_loop(len, &mut |t, rr| {
                            let r = t.b.ins().isub(len1, rr);
                            let r1 = t.b.ins().iadd_imm_s(r, -1);
                            let ro = t.b.ins().imul(r1, rowbytes);
                            let in_seg = t.b.ins().iadd(seg, ro);
                            let at_ckpt = t.b.ins().icmp_imm_s(IntCC::Equal, r, 0);
                            let st = t.b.ins().select(at_ckpt, ckpt, in_seg);
                            let sr = t.step_at(scan, start, r);
                            vjp_step(t, st, sr)
                        })
                    } else {
                        // Each state recomputed from the checkpoint when the
                        // VJP needs it, alternating between `a` and `b`.
                        t.translate_loop(len, &mut |t, rr| {
                            let r = t.b.ins().isub(len1, rr);
                            let cur = t.translate_var(ckpt);
                            if let Some(body) = body {
                                let nxt = t.translate_var(a);
                                t.translate_loop(r, &mut |t, q| {
                                    let c = t.b.use_var(cur);
                                    let o = t.b.use_var(nxt);
                                    let sq = t.step_at(scan, start, q);
                                    let args = ins(t, c, sq);
                                    t.translate_call(body, &args, o)?;
                                    t.translate_swap(cur, nxt, a, b);
                                    Ok(())
                                })?;
                            }
                            let st = t.b.use_var(cur);
                            let sr = t.step_at(scan, start, r);
                            vjp_step(t, st, sr)
                        })
                    }
                })?;
                when_zero(self, &mut |t| t.translate_fill(g, h, width))
            }
            other => Err(Error::internal(format!(
                "backend: `{}` is not a loop op",
                other.name()
            ))),
        }
    }

    /// Element `(r, c)` of the matrix `v` of `dims = (rows, columns)`, or,
    /// when `v` is an inlined `transpose src`, element `(c, r)` of `src`.
    fn translate_matrix_elem(
        &mut self,
        v: VarId,
        src: Option<VarId>,
        (r, c): (ir::Value, ir::Value),
        (rows, cols): (ir::Value, ir::Value),
    ) -> Result<ir::Value, Error> {
        let (from, major, minor, stride) = match src {
            Some(s) => (s, c, r, rows),
            None => (v, r, c, cols),
        };
        let at = self.b.ins().imul(major, stride);
        let at = self.b.ins().iadd(at, minor);
        self.translate_elem(from, at)
    }

    /// The buffer holding the whole of `v`: its own, or `copy` (a scratch
    /// buffer the plan set aside) filled with it now.
    fn translate_in_buffer(&mut self, v: VarId, copy: Option<usize>) -> Result<ir::Value, Error> {
        if let Read::Buf(kb) = self.read(v)? {
            return self.buf(kb);
        }
        let kb = copy.ok_or_else(|| {
            Error::internal(format!(
                "backend: %{} is read whole but has no buffer",
                self.f.var_name(v)
            ))
        })?;
        let p = self.buf(kb)?;
        let len = self.translate_len(self.f.ty(v).clone())?;
        self.translate_fill(v, p, len)?;
        Ok(p)
    }

    /// A `rows × cols` matmul operand as a GEMM kernel reads it: its
    /// buffer and row and column strides, when it is in memory (itself, or
    /// the buffer of the `transpose` it is, with the strides swapped).
    fn gemm_operand(
        &mut self,
        v: VarId,
        transposed: Option<VarId>,
        rows: ir::Value,
        cols: ir::Value,
    ) -> Result<Option<(ir::Value, ir::Value, ir::Value)>, Error> {
        let one = self.b.ins().iconst(types::I64, 1);
        Ok(match (transposed, self.read(v)?) {
            (None, Read::Buf(k)) => Some((self.buf(k)?, cols, one)),
            (Some(src), _) => match self.read(src)? {
                Read::Buf(k) => Some((self.buf(k)?, one, rows)),
                _ => None,
            },
            _ => None,
        })
    }

    /// The row sums (`RowDot`) or column sums (`ColSum`) of `a` (of type
    /// `at`, `rows × cols` elements) into `base` by a call of egrad's
    /// kernel (`crate::gemv`, which sums in the same order as the loop
    /// nest, so the same bits), when the matrix kernels are on and `a` is
    /// an inlined product of two operands it reads in place: `false` (and
    /// nothing emitted) otherwise.
    fn translate_gemv(
        &mut self,
        which: Libm,
        a: VarId,
        at: &Type,
        (rows, cols): (ir::Value, ir::Value),
        base: ir::Value,
    ) -> Result<bool, Error> {
        if !self.gemm || at.shape.len() < 2 || self.read(a)? != Read::Inline {
            return Ok(false);
        }
        let Some(s) = self.defs.get(a.index()).copied().flatten() else {
            return Ok(false);
        };
        let st = &self.f.stmts[s];
        let [x, y] = match (st.op, st.args.as_slice()) {
            (Op::Mul, &[x, y]) => [x, y],
            _ => return Ok(false),
        };
        let (Some(x), Some(y)) = (
            self.gemv_operand(x, at, cols)?,
            self.gemv_operand(y, at, cols)?,
        ) else {
            return Ok(false);
        };
        let kernel = self.libm_ref(which, at.dtype);
        self.b
            .ins()
            .call(kernel, &[rows, cols, x.0, x.1, x.2, y.0, y.1, y.2, base]);
        Ok(true)
    }

    /// A factor `v` of a product of type `at` (rows of `cols` elements) as
    /// `crate::gemv` reads it in place: (pointer, row stride, column
    /// stride) in elements. A matrix in a buffer (or a `slice` of one)
    /// reads along its rows, a `repeat`ed vector has row stride 0, a
    /// `spread` vector column stride 0. `None` for any other form.
    fn gemv_operand(
        &mut self,
        v: VarId,
        at: &Type,
        cols: ir::Value,
    ) -> Result<Option<(ir::Value, ir::Value, ir::Value)>, Error> {
        let in_buf = |t: &Self, v: VarId, shape: &[Dim]| -> Result<Option<usize>, Error> {
            Ok(match t.read(v)? {
                Read::Buf(k) if t.f.ty(v).shape == shape => Some(k),
                _ => None,
            })
        };
        let (tail, lead) = (&at.shape[1..], &at.shape[..1]);
        // (buffer, first row, row stride in rows of `cols`: 0 or 1, column
        // stride).
        let form = match self.read(v)? {
            Read::Buf(k) if self.f.ty(v).shape == at.shape => Some((k, 0, 1, 1)),
            Read::Inline => {
                let Some(s) = self.defs.get(v.index()).copied().flatten() else {
                    return Ok(None);
                };
                let st = &self.f.stmts[s];
                match (st.op, st.args.first().copied()) {
                    (Op::Repeat, Some(src)) => in_buf(self, src, tail)?.map(|k| (k, 0, 0, 1)),
                    (Op::Spread, Some(src)) => in_buf(self, src, lead)?.map(|k| (k, 0, -1, 0)),
                    (Op::Slice(c), Some(src)) => {
                        let rows_alike = self.f.ty(src).shape.get(1..) == Some(tail);
                        match self.read(src)? {
                            Read::Buf(k) if rows_alike => Some((k, c, 1, 1)),
                            _ => None,
                        }
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        let Some((k, first, rs, cs)) = form else {
            return Ok(None);
        };
        let mut ptr = self.buf(k)?;
        if first != 0 {
            let Ok(first) = i64::try_from(first) else {
                return Ok(None);
            };
            let skip = self.b.ins().imul_imm_s(cols, first);
            ptr = self.translate_addr(at.dtype, ptr, skip);
        }
        // Row stride: `cols` (a matrix), 0 (a repeated row) or 1 (-1 marks
        // a spread vector: one element per row).
        let rs = match rs {
            1 => cols,
            -1 => self.b.ins().iconst(types::I64, 1),
            _ => self.b.ins().iconst(types::I64, 0),
        };
        let cs = self.b.ins().iconst(types::I64, cs);
        Ok(Some((ptr, rs, cs)))
    }

    /// `c` when `v` is `transpose c` computed in its consumer (inlined):
    /// a consumer that walks `v` by rows and columns reads `c` directly.
    fn inlined_transpose(&self, v: VarId) -> Option<VarId> {
        if !matches!(self.read(v), Ok(Read::Inline)) {
            return None;
        }
        let s = self.defs.get(v.index()).copied().flatten()?;
        let st = &self.f.stmts[s];
        (st.op == Op::Transpose).then(|| st.args[0])
    }

    /// The step number `start + r` a scan's body call reads its row at
    /// (not computed for other loops, which do not use it).
    fn step_at(&mut self, scan: bool, start: ir::Value, r: ir::Value) -> ir::Value {
        if scan {
            self.b.ins().iadd(start, r)
        } else {
            r
        }
    }

    /// Start `n >= 1` steps alternating between buffers `h` and `other`
    /// so that the last step writes `h` (the parity of the run-time count
    /// `n` picks the first): returns the variables holding the buffer the
    /// next step reads and the one it writes. An operand in a buffer is
    /// read there by the first step; any other is first written to the
    /// buffer the first step does not write.
    fn translate_ping_pong(
        &mut self,
        x: VarId,
        n: ir::Value,
        h: ir::Value,
        other: ir::Value,
        width: ir::Value,
    ) -> Result<(cranelift_frontend::Variable, cranelift_frontend::Variable), Error> {
        let odd = self.b.ins().band_imm_s(n, 1);
        let first = self.b.ins().select(odd, h, other);
        let spare = self.b.ins().select(odd, other, h);
        let src = match self.read(x)? {
            Read::Buf(k) => self.buf(k)?,
            _ => {
                self.translate_fill(x, spare, width)?;
                spare
            }
        };
        Ok((self.translate_var(src), self.translate_var(first)))
    }

    /// After a step that wrote `nxt`: the next reads it and writes the
    /// other of `p` and `q`.
    fn translate_swap(
        &mut self,
        cur: cranelift_frontend::Variable,
        nxt: cranelift_frontend::Variable,
        p: ir::Value,
        q: ir::Value,
    ) {
        let o = self.b.use_var(nxt);
        self.b.def_var(cur, o);
        let on_p = self.b.ins().icmp(IntCC::Equal, o, p);
        let n = self.b.ins().select(on_p, q, p);
        self.b.def_var(nxt, n);
    }

    /// A fresh 64-bit variable holding `x`.
    fn translate_var(&mut self, x: ir::Value) -> cranelift_frontend::Variable {
        let v = self.b.declare_var(types::I64);
        self.b.def_var(v, x);
        v
    }

    /// A count as a 64-bit constant (loops compare it unsigned).
    fn translate_count(&mut self, n: u64) -> ir::Value {
        self.b
            .ins()
            .iconst(types::I64, i64::from_ne_bytes(n.to_ne_bytes()))
    }

    /// Write the `len` elements of `v` (as its consumers read them) to
    /// `base`.
    fn translate_fill(&mut self, v: VarId, base: ir::Value, len: ir::Value) -> Result<(), Error> {
        let dtype = self.f.ty(v).dtype;
        self.translate_map(Source::Elem(v), dtype, base, len)
    }

    /// Loop `l`'s body (or VJP) ready to call: a stack slot for its buffer
    /// table, with its scratch pointers stored once.
    fn call_site(&mut self, l: usize, vjp: bool) -> Result<CallSite, Error> {
        let plan = self.plan;
        let lp = plan
            .loops
            .get(l)
            .ok_or_else(|| Error::internal(format!("backend: no plan for loop {l}")))?;
        let refs = self.loop_refs.get(l).copied().unwrap_or_default();
        let (callee, func) = if vjp {
            (lp.vjp.as_ref(), refs.vjp)
        } else {
            (lp.body.as_ref(), refs.body)
        };
        let (Some(callee), Some(func)) = (callee, func) else {
            return Err(Error::internal(format!(
                "backend: loop {l}'s {} is not compiled",
                if vjp { "VJP" } else { "body" }
            )));
        };
        let n = callee.plan.n_buffers();
        let size =
            u32::try_from(8 * n).map_err(|_| Error::internal("backend: too many buffers"))?;
        let slot = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            size,
            3,
        ));
        let table = self.b.ins().stack_addr(types::I64, slot, 0);
        let first = callee.plan.n_inputs + callee.plan.n_outputs;
        for (i, &k) in callee.scratch.iter().enumerate() {
            let p = self.buf(k)?;
            let off = i32::try_from(8 * (first + i))
                .map_err(|_| Error::internal("backend: too many buffers"))?;
            self.b.ins().store(MemFlagsData::trusted(), p, table, off);
        }
        Ok(CallSite {
            func,
            table,
            n_inputs: callee.plan.n_inputs,
        })
    }

    /// One call: the input pointers and the output pointer into the
    /// callee's table, then `callee(table, dims)`.
    fn translate_call(
        &mut self,
        site: CallSite,
        ins: &[ir::Value],
        out: ir::Value,
    ) -> Result<(), Error> {
        if ins.len() != site.n_inputs {
            return Err(Error::internal(
                "backend: a loop call with the wrong inputs",
            ));
        }
        for (i, &p) in ins.iter().chain(std::iter::once(&out)).enumerate() {
            let off =
                i32::try_from(8 * i).map_err(|_| Error::internal("backend: too many buffers"))?;
            self.b
                .ins()
                .store(MemFlagsData::trusted(), p, site.table, off);
        }
        let dims = self
            .dims_ptr
            .ok_or_else(|| Error::internal("backend: a call before the entry block"))?;
        self.b.ins().call(site.func, &[site.table, dims]);
        Ok(())
    }

    /// Element `i` of an index-map statement: one element of its operand
    /// (read as a leaf) at a computed index, or zero outside `pad` and
    /// `unindex`'s rows. Never reads outside the operand.
    fn translate_index_map(&mut self, s: usize, i: ir::Value) -> Result<ir::Value, Error> {
        let stmt = self.f.stmts[s].clone();
        let out = self.f.ty(stmt.var).clone();
        let dtype = out.dtype;
        let a = *stmt
            .args
            .first()
            .ok_or_else(|| Error::internal("backend: index map without an operand"))?;
        let at = self.f.ty(a).clone();
        let tail = |t: &Type| Type::array(dtype, t.shape.get(1..).unwrap_or(&[]).to_vec());
        match stmt.op {
            Op::Slice(c) | Op::Index(c) => {
                let j = self.row_offset(a, c, i)?;
                let t_row = self.shifted_row(s);
                self.within_row(t_row, &mut |t| t.translate_elem(a, j))
            }
            Op::Pad(_) | Op::Unindex(_) => {
                let t_row = self.shifted_row(s);
                let (start, n) = self.pad_range(s)?;
                // In range when start <= i < start + n (unsigned arithmetic).
                if let (Some(iv), Some(sv), Some(nv)) =
                    (self.known(i), self.known(start), self.known(n))
                {
                    // At a known index: inside or not is known too.
                    return match iv.checked_sub(sv) {
                        Some(jv) if (0..nv).contains(&jv) => {
                            let j = self.b.ins().iconst(types::I64, jv);
                            self.within_row(t_row.clone(), &mut |t| t.translate_elem(a, j))
                        }
                        _ => Ok(self.translate_const(dtype, 0.0)),
                    };
                }
                let j = self.b.ins().isub(i, start);
                let inside = self.b.ins().icmp(IntCC::UnsignedLessThan, j, n);
                if matches!(self.read(a)?, Read::Scalar | Read::Splat(_)) {
                    // Nothing to read from memory: no branch.
                    let x = self.translate_leaf(a, j)?;
                    let zero = self.translate_const(dtype, 0.0);
                    return Ok(self.b.ins().select(inside, x, zero));
                }
                self.translate_if(
                    inside,
                    cl_type(dtype),
                    &mut |t| t.within_row(t_row.clone(), &mut |t| t.translate_elem(a, j)),
                    &mut |t| Ok(t.translate_const(dtype, 0.0)),
                )
            }
            Op::Repeat | Op::Spread | Op::Transpose if self.row.is_some() => {
                match self.row_read(s, i) {
                    Some(j) => self.translate_leaf(a, j),
                    None => self.within_row(None, &mut |t| t.translate_index_map(s, i)),
                }
            }
            Op::Repeat => {
                let row = self.translate_len(at.clone())?;
                let j = self.b.ins().urem(i, row);
                self.translate_leaf(a, j)
            }
            Op::Spread => {
                let row = self.translate_len(tail(&out))?;
                let j = self.b.ins().udiv(i, row);
                self.translate_leaf(a, j)
            }
            Op::Transpose => {
                // Result [N, M] from [M, N]: i = r * M + c reads c * N + r.
                let m = self.translate_len(Type::array(dtype, vec![out.shape[1].clone()]))?;
                let nn = self.translate_len(Type::array(dtype, vec![out.shape[0].clone()]))?;
                let r = self.b.ins().udiv(i, m);
                let c = self.b.ins().urem(i, m);
                let cn = self.b.ins().imul(c, nn);
                let j = self.b.ins().iadd(cn, r);
                self.translate_leaf(a, j)
            }
            Op::Reverse => {
                // Same shape [L, s..]: i = r * row + c reads (L-1-r) * row + c,
                // that is n - row - r * row + c with n = L * row. Since
                // i < n, r <= L-1: never outside the operand (and nothing is
                // read when L or row is 0, as then there is no element i).
                let n = self.translate_len(at.clone())?;
                if at.rank() == 1 {
                    // A vector: element i reads L-1-i.
                    let last = self.b.ins().iadd_imm_s(n, -1);
                    let j = self.b.ins().isub(last, i);
                    return self.translate_leaf(a, j);
                }
                let row = self.translate_len(tail(&at))?;
                let r = self.b.ins().udiv(i, row);
                let rr = self.b.ins().imul(r, row);
                let c = self.b.ins().isub(i, rr);
                let top = self.b.ins().isub(n, row);
                let base = self.b.ins().isub(top, rr);
                let j = self.b.ins().iadd(base, c);
                self.translate_leaf(a, j)
            }
            other => Err(Error::internal(format!(
                "backend: `{}` is not an index map",
                other.name()
            ))),
        }
    }

    /// `i` plus `c` rows of `a` (`slice` and `index` read element `i` of
    /// their result there).
    fn row_offset(&mut self, a: VarId, c: u64, i: ir::Value) -> Result<ir::Value, Error> {
        let at = self.f.ty(a);
        let row = Type::array(at.dtype, at.shape.get(1..).unwrap_or(&[]).to_vec());
        let row = self.translate_len(row)?;
        let c = i64::try_from(c).map_err(|_| Error::internal("backend: row overflows"))?;
        let off = self.b.ins().imul_imm_s(row, c);
        Ok(self.b.ins().iadd(i, off))
    }

    /// The statements of `root`'s element tree (itself and every inlined
    /// statement under it), in statement order. Iterative: no recursion
    /// on deep chains.
    fn tree_nodes(&self, root: VarId) -> Result<Vec<usize>, Error> {
        let defs = &self.defs;
        let def = |v: VarId| -> Result<usize, Error> {
            defs.get(v.index())
                .copied()
                .flatten()
                .ok_or_else(|| Error::internal("backend: inlined value has no statement"))
        };
        let mut nodes = vec![def(root)?];
        let mut stack = vec![root];
        // Each shared value is walked once (a DAG, not its paths).
        let mut seen = std::collections::HashSet::from([root]);
        while let Some(v) = stack.pop() {
            let stmt = &self.f.stmts[def(v)?];
            // An index map computes its operand itself, at its own index.
            if access(stmt.op) == Access::IndexMap {
                continue;
            }
            for &a in &stmt.args {
                if self.read(a)? == Read::Inline && seen.insert(a) {
                    nodes.push(def(a)?);
                    stack.push(a);
                }
            }
        }
        nodes.sort_unstable();
        nodes.dedup();
        Ok(nodes)
    }

    /// `if cond { yes } else { no }`, a value of type `ty`; leaves the
    /// builder after both.
    fn translate_if(
        &mut self,
        cond: ir::Value,
        ty: ir::Type,
        yes: &mut dyn FnMut(&mut Self) -> Result<ir::Value, Error>,
        no: &mut dyn FnMut(&mut Self) -> Result<ir::Value, Error>,
    ) -> Result<ir::Value, Error> {
        let (then, other, join) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        let x = self.b.append_block_param(join, ty);
        self.b.ins().brif(cond, then, &[], other, &[]);
        for (block, first) in [(then, true), (other, false)] {
            self.b.switch_to_block(block);
            self.b.seal_block(block);
            let y = if first { yes(self)? } else { no(self)? };
            self.b.ins().jump(join, &[ir::BlockArg::Value(y)]);
        }
        self.b.switch_to_block(join);
        self.b.seal_block(join);
        Ok(x)
    }

    /// Element `i` of statement `root` computed in place, with every inlined
    /// statement under it, evaluated in statement order.
    fn translate_tree(&mut self, root: VarId, i: ir::Value) -> Result<ir::Value, Error> {
        let nodes = self.tree_nodes(root)?;
        let mut local: HashMap<VarId, ir::Value> = HashMap::with_capacity(nodes.len());
        for s in nodes {
            if access(self.f.stmts[s].op) == Access::IndexMap {
                let x = self.translate_index_map(s, i)?;
                local.insert(self.f.stmts[s].var, x);
                continue;
            }
            let stmt = &self.f.stmts[s];
            let dtype = self.f.ty(stmt.var).dtype;
            let mut args = Vec::with_capacity(stmt.args.len());
            for &a in &stmt.args {
                let x = match local.get(&a) {
                    Some(&x) => x,
                    None => self.translate_leaf(a, i)?,
                };
                args.push(x);
            }
            let x = self.translate_op(stmt.op, dtype, &args)?;
            local.insert(stmt.var, x);
        }
        local
            .get(&root)
            .copied()
            .ok_or_else(|| Error::internal("backend: element tree lost its root"))
    }

    /// The op on element (or scalar) operands; the arithmetic arms serve
    /// vector operands too ([`Translator::translate_vop`]). Reductions are
    /// lowered by [`Translator::translate_fold`] with their step op, never
    /// here; for `bcast` the operand is the scalar itself.
    fn translate_op(
        &mut self,
        op: Op,
        dtype: DType,
        args: &[ir::Value],
    ) -> Result<ir::Value, Error> {
        let arg = |k: usize| {
            args.get(k).copied().ok_or_else(|| {
                Error::internal(format!("backend: `{}` is missing operand {k}", op.name()))
            })
        };
        Ok(match op {
            Op::Const(l) => self.translate_const(l.dtype, l.value()),
            Op::Zero => self.translate_const(dtype, 0.0),
            Op::Add => self.b.ins().fadd(arg(0)?, arg(1)?),
            Op::Sub => self.b.ins().fsub(arg(0)?, arg(1)?),
            Op::Mul => self.b.ins().fmul(arg(0)?, arg(1)?),
            Op::Div => self.b.ins().fdiv(arg(0)?, arg(1)?),
            Op::Neg => self.b.ins().fneg(arg(0)?),
            Op::Sqrt => self.b.ins().sqrt(arg(0)?),
            Op::Sin => self.translate_vmath(VFn::Sin, dtype, cl_type(dtype), arg(0)?)?,
            Op::Cos => self.translate_vmath(VFn::Cos, dtype, cl_type(dtype), arg(0)?)?,
            Op::Exp => self.translate_vmath(VFn::Exp, dtype, cl_type(dtype), arg(0)?)?,
            Op::Log => self.translate_vmath(VFn::Log, dtype, cl_type(dtype), arg(0)?)?,
            Op::Tanh => self.translate_vmath(VFn::Tanh, dtype, cl_type(dtype), arg(0)?)?,
            Op::Tan => self.translate_libcall(Libm::Tan, dtype, arg(0)?),
            Op::Log1p => self.translate_vmath(VFn::Log1p, dtype, cl_type(dtype), arg(0)?)?,
            Op::Expm1 => self.translate_vmath(VFn::Expm1, dtype, cl_type(dtype), arg(0)?)?,
            Op::Pow => self.translate_libcall2(Libm::Pow, dtype, arg(0)?, arg(1)?),
            Op::Abs => self.b.ins().fabs(arg(0)?),
            Op::Max => self.b.ins().fmax(arg(0)?, arg(1)?),
            Op::Min => self.b.ins().fmin(arg(0)?, arg(1)?),
            Op::Lt => self.translate_cmp(FloatCC::LessThan, dtype, arg(0)?, arg(1)?),
            Op::Le => self.translate_cmp(FloatCC::LessThanOrEqual, dtype, arg(0)?, arg(1)?),
            Op::Gt => self.translate_cmp(FloatCC::GreaterThan, dtype, arg(0)?, arg(1)?),
            Op::Ge => self.translate_cmp(FloatCC::GreaterThanOrEqual, dtype, arg(0)?, arg(1)?),
            Op::Eq => self.translate_cmp(FloatCC::Equal, dtype, arg(0)?, arg(1)?),
            Op::Ne => self.translate_cmp(FloatCC::NotEqual, dtype, arg(0)?, arg(1)?),
            Op::Select => {
                let zero = self.translate_const(dtype, 0.0);
                let c = self.b.ins().fcmp(FloatCC::NotEqual, arg(0)?, zero);
                self.b.ins().select(c, arg(1)?, arg(2)?)
            }
            Op::Sum | Op::MaxAll | Op::MinAll => {
                return Err(Error::internal(format!(
                    "backend: `{}` is a reduction, lowered as a loop",
                    op.name()
                )))
            }
            Op::Bcast => arg(0)?,
            Op::Slice(_)
            | Op::Pad(_)
            | Op::Index(_)
            | Op::Unindex(_)
            | Op::Repeat
            | Op::Spread
            | Op::Transpose
            | Op::Reverse
            | Op::SumLead
            | Op::SumTail
            | Op::MaxTail
            | Op::MinTail
            | Op::MatMul
            | Op::Loop(..)
            | Op::LoopTape(..)
            | Op::LoopVjp(..) => {
                return Err(Error::internal(format!(
                    "backend: `{}` moves elements; it is lowered by its access pattern",
                    op.name()
                )))
            }
        })
    }

    fn translate_const(&mut self, dtype: DType, x: f64) -> ir::Value {
        match dtype {
            DType::F32 => self.b.ins().f32const(x as f32),
            DType::F64 | DType::I64 => self.b.ins().f64const(x),
        }
    }

    /// A comparison as a mask: 1.0 where it holds, +0.0 elsewhere.
    fn translate_cmp(
        &mut self,
        cc: FloatCC,
        dtype: DType,
        a: ir::Value,
        b: ir::Value,
    ) -> ir::Value {
        let c = self.b.ins().fcmp(cc, a, b);
        let one = self.translate_const(dtype, 1.0);
        let zero = self.translate_const(dtype, 0.0);
        self.b.ins().select(c, one, zero)
    }

    fn translate_libcall2(
        &mut self,
        which: Libm,
        dtype: DType,
        x: ir::Value,
        y: ir::Value,
    ) -> ir::Value {
        let fref = self.libm_ref(which, dtype);
        let call = self.b.ins().call(fref, &[x, y]);
        self.b.inst_results(call)[0]
    }

    fn libm_ref(&mut self, which: Libm, dtype: DType) -> FuncRef {
        self.callee_ref(Import::Libm(which, dtype))
    }

    fn callee_ref(&mut self, callee: Import) -> FuncRef {
        match self.imported.iter().find(|(c, _)| *c == callee) {
            Some(&(_, r)) => r,
            None => {
                let r = (self.import)(self.b.func, callee);
                self.imported.push((callee, r));
                r
            }
        }
    }

    /// Runs `emit` as cold code (see [`Translator::cold`]) when `cold`.
    pub(super) fn translate_cold<T>(
        &mut self,
        cold: bool,
        emit: impl FnOnce(&mut Self) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let was = self.cold;
        self.cold = was || cold;
        let out = emit(self);
        self.cold = was;
        out
    }

    /// `f(x)` by egrad's vector math kernel (`crate::vmath`) for `x` of
    /// type `ty` (a scalar of `dtype` or its vector): inline for the first
    /// [`INLINE_KERNELS`] uses outside cold code, else a call of the
    /// module's copy (the same instructions, so the same bits). The kernels
    /// with a fallback (sin, cos) call std's function for lanes outside
    /// their fast range (and may leave the builder in a new block).
    pub(super) fn translate_vmath(
        &mut self,
        f: VFn,
        dtype: DType,
        ty: ir::Type,
        x: ir::Value,
    ) -> Result<ir::Value, Error> {
        if self.cold || self.inlined_kernels >= INLINE_KERNELS {
            let kernel = self.callee_ref(Import::Kernel(f, ty));
            let call = self.b.ins().call(kernel, &[x]);
            return Ok(self.b.inst_results(call)[0]);
        }
        self.inlined_kernels += 1;
        let fallback = Libm::fallback(f).map(|which| self.libm_ref(which, dtype));
        vmath_clif::emit(&mut self.b, ty, f, x, fallback)
            .ok_or_else(|| Error::internal(format!("backend: no `{}` kernel for {ty}", f.name())))
    }

    fn translate_libcall(&mut self, which: Libm, dtype: DType, x: ir::Value) -> ir::Value {
        let fref = self.libm_ref(which, dtype);
        let call = self.b.ins().call(fref, &[x]);
        self.b.inst_results(call)[0]
    }

    /// `for i in 0..len { body(i) }`; leaves the builder after the loop.
    fn translate_loop(
        &mut self,
        len: ir::Value,
        body: &mut dyn FnMut(&mut Self, ir::Value) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let zero = self.b.ins().iconst(types::I64, 0);
        self.translate_range(zero, len, 1, body)
    }

    /// `for i in (start..end).step_by(step) { body(i) }`, for `end - start`
    /// a multiple of `step` (or `step` 1); leaves the builder after the loop.
    fn translate_range(
        &mut self,
        start: ir::Value,
        end: ir::Value,
        step: i64,
        body: &mut dyn FnMut(&mut Self, ir::Value) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let i = self.b.declare_var(types::I64);
        self.b.def_var(i, start);
        let header = self.b.create_block();
        let body_block = self.b.create_block();
        let exit = self.b.create_block();
        self.b.ins().jump(header, &[]);

        self.b.switch_to_block(header);
        let iv = self.b.use_var(i);
        let more = self.b.ins().icmp(IntCC::UnsignedLessThan, iv, end);
        self.b.ins().brif(more, body_block, &[], exit, &[]);

        self.b.switch_to_block(body_block);
        body(self, iv)?;
        let next = self.b.ins().iadd_imm_s(iv, step);
        self.b.def_var(i, next);
        self.b.ins().jump(header, &[]);

        self.b.switch_to_block(exit);
        Ok(())
    }

    /// Number of elements of `ty`: the product of its dims (literal or
    /// loaded from `dims`).
    fn translate_len(&mut self, ty: Type) -> Result<ir::Value, Error> {
        let mut lit: i64 = 1;
        let mut len: Option<ir::Value> = None;
        for d in &ty.shape {
            match d {
                Dim::Lit(k) => {
                    let k = i64::try_from(*k)
                        .ok()
                        .and_then(|k| lit.checked_mul(k))
                        .ok_or_else(|| Error::internal("backend: array length overflows"))?;
                    lit = k;
                }
                Dim::Param(p) | Dim::Sub(p, _) | Dim::Rows(p, _) => {
                    let idx = self
                        .f
                        .size_params
                        .iter()
                        .position(|q| q == p)
                        .ok_or_else(|| {
                            Error::internal(format!("backend: unknown size parameter {p}"))
                        })?;
                    let mut dv = self.dims[idx];
                    if let Dim::Sub(_, k) = d {
                        // Non-negative: checked when the sizes were bound.
                        let k = i64::try_from(*k)
                            .map_err(|_| Error::internal("backend: size overflows"))?;
                        dv = self.b.ins().iadd_imm_s(dv, -k);
                    }
                    if let Dim::Rows(_, k) = d {
                        // ⌈p/k⌉ + 1 = (p + k - 1) / k + 1.
                        let k = i64::try_from((*k).max(1))
                            .map_err(|_| Error::internal("backend: size overflows"))?;
                        let up = self.b.ins().iadd_imm_s(dv, k - 1);
                        let q = self.b.ins().udiv_imm_s(up, k);
                        dv = self.b.ins().iadd_imm_s(q, 1);
                    }
                    len = Some(match len {
                        Some(l) => self.b.ins().imul(l, dv),
                        None => dv,
                    });
                }
            }
        }
        Ok(match len {
            None => self.b.ins().iconst(types::I64, lit),
            Some(l) if lit == 1 => l,
            Some(l) => self.b.ins().imul_imm_s(l, lit),
        })
    }

    fn translate_addr(&mut self, dtype: DType, base: ir::Value, i: ir::Value) -> ir::Value {
        let off = self.b.ins().ishl_imm_u(i, log2_bytes(dtype));
        self.b.ins().iadd(base, off)
    }

    fn translate_store(&mut self, dtype: DType, base: ir::Value, i: ir::Value, x: ir::Value) {
        let addr = self.translate_addr(dtype, base, i);
        self.b.ins().store(MemFlagsData::trusted(), x, addr, 0);
    }

    fn read(&self, v: VarId) -> Result<Read, Error> {
        self.plan
            .read
            .get(v.index())
            .copied()
            .ok_or_else(|| Error::internal("backend: unknown variable"))
    }

    fn scalar(&self, v: VarId) -> Result<ir::Value, Error> {
        self.scalars
            .get(v.index())
            .copied()
            .flatten()
            .ok_or_else(|| {
                Error::internal(format!(
                    "backend: scalar %{} used before it is computed",
                    self.f.var_name(v)
                ))
            })
    }

    fn buf(&self, k: usize) -> Result<ir::Value, Error> {
        self.bufs
            .get(k)
            .copied()
            .ok_or_else(|| Error::internal(format!("backend: no buffer {k}")))
    }
}
