//! The loop plan: how each value is read (a scalar, a buffer, a splat or
//! inlined into its consumer's loop), which values get a buffer, and the
//! state buffers and callee scratch of the loop statements.

use super::index::MAX_NATIVE_ELEMENTS;
use super::{
    access, homes, is_matrix_view, shifts, Access, Callee, LoopBufs, LoopPlan, Plan, Read,
    PART_STMTS, SPLIT_STMTS,
};
use crate::error::Error;
use crate::ir::interp::Dims;
use crate::ir::work::Work;
use crate::ir::{Function, Loop, Stmt, VarId};
use crate::ops::{Native, Op};
use crate::types::{Dim, Type};
use crate::vmath::VFn;
use std::collections::HashSet;

/// A value used more than once is recomputed in each consumer's loop when
/// its element tree costs at most this many flops per element (a broadcast
/// read, an index map, an add or two): cheaper than storing it and loading
/// it back. Not for a value the plan must keep (a stored residual).
pub(crate) const RECOMPUTE_FLOPS: f64 = 2.0;

/// Nested row shifts computed in place: a shift whose operand's element
/// tree already holds this many is given a buffer instead (each level is
/// a recursion of the lowering).
const MAX_SHIFT_NEST: usize = 8;

/// The most operands one element tree (a value and the values inlined
/// into it) reads from outside (scalars, broadcast scalars and buffers,
/// each live across its loop), and the most statements it holds: a larger
/// tree is cut by materialising the value that would exceed either.
/// Without a bound, a long chain of single-use values (the accumulation of
/// a parameter's cotangent over an unrolled loop of 300 steps) became one
/// loop body of 140,000 instructions reading hundreds of scalars, on which
/// the register allocator spent minutes. A deep chain of one operand
/// (`sin(tanh(-sin(...)))` thousands deep) stays one loop.
const MAX_TREE_OPERANDS: usize = 64;
const MAX_TREE_NODES: usize = 4096;

/// What an index map that divides its index (`transpose`, `repeat`,
/// `spread`, `reverse`) counts as, in flops per element, when the plan
/// decides whether recomputing a value in each consumer is cheap: more
/// than [`RECOMPUTE_FLOPS`], so such a map read by several consumers is
/// materialised once.
const INDEX_DIVISION_FLOPS: f64 = 4.0;

/// Which values of `f` are views of a matrix that only matrix products
/// read: a `transpose`, a `slice` or a `reverse` of a matrix (in memory,
/// or itself such a view), every use of which (`uses`: by live statements)
/// is a `matmul` operand or another such view, neither returned nor kept.
/// The GEMM kernel reads it in place with strides
/// (`Translator::strided_view`), however the tape it comes from is laid
/// out: no copy.
fn view_only(f: &Function, uses: &[usize], kept: &[bool]) -> Vec<bool> {
    let nv = f.vars.len();
    let mut view = vec![false; nv];
    // Some use is neither a `matmul` nor a view.
    let mut other_use = vec![false; nv];
    for r in &f.rets {
        other_use[r.index()] = true;
    }
    let defs = f.definitions();
    // The matrix under a chain of views is in memory: not a `bcast` or a
    // `zero`, which are read as a splat (the first `MAX_VIEW_CHAIN` links).
    let in_memory = |mut x: VarId| {
        for _ in 0..MAX_VIEW_CHAIN {
            let Some(d) = defs[x.index()] else {
                return true;
            };
            let s = &f.stmts[d];
            match s.op {
                Op::Bcast | Op::Zero => return false,
                op if is_matrix_view(op) && s.args.len() == 1 => x = s.args[0],
                _ => return true,
            }
        }
        false
    };
    // A matrix product's operand that is in memory whatever else reads
    // it: a parameter, a loop nest's result, a computed value (a `matmul`
    // operand that costs flops is materialised), or a view (of one).
    let ready = |x: VarId| match defs[x.index()].map(|d| &f.stmts[d]) {
        None => true,
        Some(s) => is_matrix_view(s.op) || access(s.op) == Access::Nest || s.op.flops() > 0.0,
    };
    for s in f.stmts.iter().rev() {
        let v = s.var.index();
        let matrix = |x: VarId| f.ty(x).rank() == 2;
        view[v] = is_matrix_view(s.op)
            && s.args.len() == 1
            && in_memory(s.args[0])
            && matrix(s.var)
            && s.args.iter().all(|&a| matrix(a))
            && uses[v] > 0
            && !other_use[v]
            && !kept[v];
        // A product the kernel cannot take (an operand a splat, or a value
        // computed in place) is a loop nest reading its operands element
        // by element: no views.
        let kernel = s.op == Op::MatMul && s.args.iter().all(|&a| in_memory(a) && ready(a));
        if !(view[v] || kernel) {
            for a in &s.args {
                other_use[a.index()] = true;
            }
        }
    }
    view
}

/// An index map reads through an operand whose element tree nests at most
/// this many index maps computed in place (row shifts and composed maps,
/// see [`composes`]); a deeper one gets a buffer, so the lowering's
/// recursion stays shallow however long a chain of maps is.
const MAX_INDEX_NEST: usize = 4;

/// Does index map `s` compute its operand `k` in place, at the index it
/// reads, rather than read it from a buffer? A `transpose`'s operand, or
/// the rows a `gather` reads, when that operand is itself an index map (a
/// gathered matrix transposed, `transpose(cams[cam_of])`; a `gather` of a
/// `transpose`): the two maps compose into one read of the buffer under
/// them, with no copy in between. The scalar lowering computes such an
/// element (`Translator::translate_index_map` reads its operand with
/// `translate_elem`); the vector lowering takes these maps lane by lane.
fn composes(f: &Function, defs: &[Option<usize>], nest: &[usize], s: &Stmt, k: usize) -> bool {
    let reads_through = matches!((s.op, k), (Op::Transpose, 0) | (Op::Gather(_), 0));
    let Some(&a) = s.args.get(k) else {
        return false;
    };
    reads_through
        && nest[a.index()] < MAX_INDEX_NEST
        && defs[a.index()].is_some_and(|d| {
            let op = f.stmts[d].op;
            access(op) == Access::IndexMap && !matches!(op, Op::Dim(_) | Op::Iota)
        })
}

/// Whether some live consumer of each value reads all of it: not an `index`
/// of one element, nor an element-wise op or a row shift whose own value
/// is read only at some elements (`exp(x)[3]` reads `x` at element 3
/// only).
/// A value no consumer reads whole is computed in place at the elements
/// read, however dear, rather than stored: the gradient of `v[3]`, `v` a
/// `tabulate` of 10^12 elements, stored all of `v`'s operand. (Where
/// some consumer reads it whole, the usual rule decides: counting only
/// those made a value that shares a dear tree with its consumers inline,
/// and `examples/concat.eg`'s gradient 6% slower.)
fn read_whole(f: &Function, live: &[bool]) -> Vec<bool> {
    let mut whole = vec![false; f.vars.len()];
    for r in &f.rets {
        whole[r.index()] = true;
    }
    for s in f.stmts.iter().rev().filter(|s| live[s.var.index()]) {
        let maps_rows = access(s.op) == Access::Elementwise || shifts(s.op);
        let reads_whole = match s.op {
            // One element (a row of a matrix is read whole: computing a
            // dear tree in place at every element of a row it feeds
            // several loops with, rather than once, is no saving).
            Op::Index(_) if f.ty(s.var).is_scalar() => false,
            _ if maps_rows => whole[s.var.index()],
            _ => true,
        };
        if reads_whole {
            for a in s.value_operands() {
                whole[a.index()] = true;
            }
        }
    }
    whole
}

/// Which of egrad's own kernels native code may call (what
/// `BackendOptions` turns on): the matrix kernels (`gemm`), the block
/// kernels of the math functions (`wide`). An object file calls neither.
/// And whether every run is checked against [`Plan::shapes`] first
/// (`checked`: the JIT's, through `bind` and `prepare`; not an object
/// file's, which C calls directly), so that an element's index divides
/// by a run-time size through `f64` (`Translator::div_index`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Kernels {
    pub gemm: bool,
    pub wide: bool,
    pub checked: bool,
}

/// The math function statement `s` computes with a block kernel when
/// `wide` is on ([`crate::vmath::blocked`]): one whose kernel is all
/// arithmetic, over a float array.
pub(super) fn block_fn(f: &Function, s: &Stmt) -> Option<VFn> {
    let Op::Math(m) = s.op else {
        return None;
    };
    let Native::Kernel(vf) = m.native() else {
        return None;
    };
    let ty = f.ty(s.var);
    (crate::vmath::blocked(vf) && !ty.is_scalar() && !ty.dtype.is_int()).then_some(vf)
}

/// The most block kernels in a chain (a blocked function of a blocked
/// function's result, ...): each adds arrays in memory where inline
/// kernels would fuse, so a long chain stays inline past this.
const MAX_BLOCK_CHAIN: u32 = 4;

/// Whether `a` is in memory already (a parameter, a loop nest's result, a
/// blocked function's result) or cheap to write there: a splat, an index
/// map of such values, or element-wise arithmetic on them, at most `depth`
/// levels down, with no math function computed inline (which is what
/// blocking avoids). `Some(k)`: yes, with chains of `k` blocked functions
/// below (`chain`: each value's, 0 where none).
fn cheap_operand(
    f: &Function,
    defs: &[Option<usize>],
    chain: &[u32],
    a: VarId,
    depth: usize,
) -> Option<u32> {
    let Some(d) = defs[a.index()] else {
        return Some(0);
    };
    let s = &f.stmts[d];
    match access(s.op) {
        _ if chain[a.index()] > 0 => Some(chain[a.index()]),
        Access::Nest => Some(0),
        _ if matches!(s.op, Op::Bcast | Op::Zero | Op::Const(_)) => Some(0),
        Access::IndexMap | Access::Elementwise
            if depth > 0 && s.op.element_call() == crate::ops::ElementCall::None =>
        {
            s.args.iter().try_fold(0, |k, &x| {
                cheap_operand(f, defs, chain, x, depth - 1).map(|j| k.max(j))
            })
        }
        _ => None,
    }
}

/// The most views [`view_only`] follows down to the matrix in memory.
const MAX_VIEW_CHAIN: usize = 32;

/// Append a scratch buffer of type `ty`; its buffer number.
fn push_scratch(scratch: &mut Vec<Type>, first: usize, ty: Type) -> usize {
    scratch.push(ty);
    first + scratch.len() - 1
}

impl Callee {
    /// Plan `f` (a loop body or VJP) and give it scratch among the caller's.
    fn new(
        f: &Function,
        scratch: &mut Vec<Type>,
        (first, kernels): (usize, Kernels),
    ) -> Result<Callee, Error> {
        let plan = Plan::new(f, &[], kernels)?;
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

/// What the consumers of each value need of it, and how often it is read:
/// the facts `Plan::new` decides each value's [`Read`] from.
struct Needs {
    /// Uses by live statements.
    uses: Vec<usize>,
    /// Some use reads the whole array ([`read_whole`]).
    read_whole: Vec<bool>,
    /// A residual the optimizer chose to store.
    kept: Vec<bool>,
    /// A strided view of a matrix in memory that only matrix products read
    /// ([`view_only`]): never materialised.
    view_only: Vec<bool>,
    /// Some consumer needs the whole array (not element by element).
    needs_buffer: Vec<bool>,
    /// An operand of `matmul`.
    matmul_operand: Vec<bool>,
    /// An operand of a native kernel.
    kernel_operand: Vec<bool>,
    /// Computed by a block kernel over its whole array.
    blocked: Vec<bool>,
    /// Output positions of each returned value, in order.
    ret_pos: Vec<Vec<usize>>,
}

/// The reads, homes and stores of a plan being built.
struct Reads {
    read: Vec<Read>,
    home: Vec<Option<usize>>,
    stores: Vec<(VarId, usize)>,
}

impl Plan {
    /// The plan for `f`; the values in `keep` (the residuals the optimizer
    /// chose to store) are materialised even where recomputing them in
    /// each consumer would be cheap. With `kernels.gemm` (the matrix
    /// kernels are called), a matrix product reads a transposed, sliced or
    /// reversed matrix in memory in place ([`view_only`]); with
    /// `kernels.wide`, a math function with a block kernel is computed over
    /// its whole array by that kernel ([`block_fn`]).
    pub fn new(f: &Function, keep: &[VarId], kernels: Kernels) -> Result<Plan, Error> {
        let nv = f.vars.len();
        let needs = Self::needs(f, keep, kernels)?;
        let n_inputs = f.params.len();
        let n_outputs = f.rets.len();
        let mut r = Reads {
            read: vec![Read::Dead; nv],
            home: vec![None; nv],
            stores: Vec::new(),
        };
        for (k, p) in f.params.iter().enumerate() {
            let v = p.var.index();
            r.read[v] = if f.ty(p.var).is_scalar() {
                Read::Scalar
            } else {
                Read::Buf(k)
            };
            for &o in &needs.ret_pos[v] {
                r.stores.push((p.var, o));
            }
        }
        let shared_only = Self::classify(f, &needs, &mut r);
        let Reads {
            mut read,
            mut home,
            stores,
        } = r;
        Self::fuse_shared(f, &mut read, &shared_only);
        let first = n_inputs + n_outputs;
        let mut scratch = homes::number_homes(f, &mut read, &mut home, &needs.kept, first);
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
            let (lb, body, vjp) =
                Self::loop_stmt_bufs(f, s, lp, &read, &needs.ret_pos[v], &mut scratch, first)?;
            loop_bufs[v] = Some(lb);
            if body && loops[l].body.is_none() {
                loops[l].body = Some(Callee::new(&lp.body, &mut scratch, (first, kernels))?);
            }
            if vjp && loops[l].vjp.is_none() {
                let vf = lp.vjp.as_ref().ok_or_else(|| {
                    Error::internal(format!("backend: loop {l} has no VJP for `loopvjp`"))
                })?;
                loops[l].vjp = Some(Callee::new(vf, &mut scratch, (first, kernels))?);
            }
        }
        let mut plan = Plan {
            n_inputs,
            n_outputs,
            scratch,
            read,
            home,
            stores,
            loops,
            loop_bufs,
            parts: std::iter::once(0..f.stmts.len()).collect(),
            spill: vec![None; nv],
            spill_buf: None,
            param_of: Vec::new(),
            blocked: needs.blocked,
            work: Work::default(),
            shapes: Vec::new(),
            checked: kernels.checked,
        };
        plan.work = plan.count_work(f);
        plan.shapes = plan.sized_shapes(f);
        plan.split(f);
        Ok(plan)
    }

    /// The shapes of `f`'s parameters and statements, and of its loops'
    /// bodies and VJPs as planned, each once, but for those of literal
    /// sizes below [`MAX_NATIVE_ELEMENTS`] (see [`Plan::shapes`]).
    fn sized_shapes(&self, f: &Function) -> Vec<Vec<Dim>> {
        let mut seen: HashSet<&[Dim]> = HashSet::new();
        let mut shapes = Vec::new();
        let own = f
            .params
            .iter()
            .map(|p| p.var)
            .chain(f.stmts.iter().map(|s| s.var));
        let callees = self
            .loops
            .iter()
            .flat_map(|l| l.body.iter().chain(l.vjp.iter()));
        let all = own
            .map(|v| f.ty(v).shape.as_slice())
            .chain(callees.flat_map(|c| c.plan.shapes.iter().map(Vec::as_slice)));
        for shape in all {
            let literal = shape.iter().try_fold(1u64, |n, d| match d {
                Dim::Lit(k) => n.checked_mul(*k),
                _ => None,
            });
            if literal.is_some_and(|n| n < MAX_NATIVE_ELEMENTS) || !seen.insert(shape) {
                continue;
            }
            shapes.push(shape.to_vec());
        }
        shapes
    }

    /// Refuse sizes that make a value of [`MAX_NATIVE_ELEMENTS`] elements
    /// or more (the message names `f`): native code's element indices
    /// stay below it.
    pub fn check_elements(&self, f: &str, dims: &Dims) -> Result<(), String> {
        let size = |p: &str| dims.get(p).copied();
        for shape in &self.shapes {
            // A size that has no value here is not this check's to refuse
            // (binding the arguments checks the sizes it computes).
            let Some(extents) = shape
                .iter()
                .map(|d| d.extent(&size))
                .collect::<Option<Vec<_>>>()
            else {
                continue;
            };
            let n = extents.iter().try_fold(1u64, |n, &k| n.checked_mul(k));
            if n.is_some_and(|n| n < MAX_NATIVE_ELEMENTS) {
                continue;
            }
            let what = n.map_or_else(|| "more than 2^64".to_string(), |n| format!("{n}"));
            return Err(format!(
                "running `{f}` at these sizes makes an array of {what} elements; \
                 native code takes arrays of fewer than 2^50 elements"
            ));
        }
        Ok(())
    }

    /// The work of a run ([`crate::ir::work`]): each statement computed in
    /// a loop of its own (a scalar or a buffer; not one computed inside its
    /// consumer's loop, a splat or a dead one), each loop statement its
    /// steps of the body (and of the VJP, for `loopvjp`) as planned.
    fn count_work(&self, f: &Function) -> Work {
        let mut w = Work::default();
        for s in &f.stmts {
            if !matches!(self.read[s.var.index()], Read::Scalar | Read::Buf(_)) {
                continue;
            }
            let Some(l) = s.op.loop_id() else {
                w.add_stmt(f, s);
                continue;
            };
            let (Some(lp), Some(planned)) = (f.loops.get(l), self.loops.get(l)) else {
                continue;
            };
            let mut step = Work::default();
            for c in planned.body.iter().chain(match s.op {
                Op::LoopVjp(..) => planned.vjp.as_ref(),
                _ => None,
            }) {
                step.merge(&c.plan.work);
            }
            w.add_steps(lp, &step, f.var_name(s.var));
        }
        w
    }

    /// The [`Needs`] of `f`'s values, `keep` being the residuals to store.
    fn needs(f: &Function, keep: &[VarId], kernels: Kernels) -> Result<Needs, Error> {
        let nv = f.vars.len();
        let mut kept = vec![false; nv];
        for v in keep {
            if let Some(k) = kept.get_mut(v.index()) {
                *k = true;
            }
        }
        // Uses by live statements only: a statement no result depends on
        // is dead, whatever reads it (see `Function::live`).
        let live = f.live();
        let mut uses = f.use_counts();
        for s in f.stmts.iter().filter(|s| !live[s.var.index()]) {
            for a in &s.args {
                uses[a.index()] -= 1;
            }
        }
        let read_whole = read_whole(f, &live);
        let n_inputs = f.params.len();
        let defs = f.definitions();
        let view_only = if kernels.gemm {
            view_only(f, &uses, &kept)
        } else {
            vec![false; nv]
        };

        // Does some consumer need the whole array (not element by element)?
        let mut needs_buffer = vec![false; nv];
        // `matmul` reads each element of an operand once per row or column
        // of the other: a computed operand is materialised, not recomputed
        // that often (an index map such as `transpose` of a buffer costs
        // no flops and stays in place).
        let mut matmul_operand = vec![false; nv];
        // A native kernel reads its operands from memory, whole.
        let mut kernel_operand = vec![false; nv];
        // How many blocked functions end at each value (0: not blocked). A
        // math function is computed by a block kernel (`block_fn`) where its
        // operand is in memory already or cheap to write there
        // (`cheap_operand`), so that what blocking adds is an array written
        // and read back, never a long chain of them in place of one fused
        // loop (a deep chain of `tanh` and `sin` stays one loop).
        let mut chain = vec![0u32; nv];
        // Nested shifts in each value's element tree, if it is inlined.
        let mut shift_nest = vec![0usize; nv];
        for s in &f.stmts {
            let below = s.args.iter().map(|a| shift_nest[a.index()]).max();
            let below = below.unwrap_or(0);
            match access(s.op) {
                Access::IndexMap if shifts(s.op) && below < MAX_SHIFT_NEST => {
                    shift_nest[s.var.index()] = below + 1;
                }
                // A size reads its operand's shape, not its elements.
                Access::IndexMap if matches!(s.op, Op::Dim(_)) => {}
                Access::IndexMap => {
                    // A view of a view is one view; the `reverse` of a
                    // vector `pad`ded or reversed reads it in place (the
                    // windows of a `concat`, `Translator::translate_concat`).
                    let view = view_only[s.var.index()];
                    let window = |a: VarId| {
                        s.op == Op::Reverse
                            && f.ty(a).rank() == 1
                            && defs[a.index()]
                                .is_some_and(|d| matches!(f.stmts[d].op, Op::Pad(_) | Op::Reverse))
                    };
                    for (k, &a) in s.args.iter().enumerate() {
                        if !view && composes(f, &defs, &shift_nest, s, k) {
                            // Computed in place like a shift: one more
                            // level of the element tree's nesting.
                            let below = shift_nest[a.index()] + 1;
                            let nest = &mut shift_nest[s.var.index()];
                            *nest = (*nest).max(below);
                        } else if !(window(a) || (view && view_only[a.index()])) {
                            needs_buffer[a.index()] = true;
                        }
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
            // A loop's captures: read in place by every step's call, so in
            // memory (a scalar is stored for the call).
            if s.op.is_loop() {
                for a in &s.args[s.op.arity().min(s.args.len())..] {
                    needs_buffer[a.index()] = true;
                    kernel_operand[a.index()] = true;
                }
            }
            if let Op::Kernel(..) = s.op {
                for a in &s.args {
                    needs_buffer[a.index()] = true;
                    kernel_operand[a.index()] = true;
                }
            }
            // A block kernel reads its operand from memory and writes its
            // own buffer.
            if kernels.wide && block_fn(f, s).is_some() {
                let below = s.args.iter().try_fold(0, |k, &a| {
                    cheap_operand(f, &defs, &chain, a, 2).map(|j| k.max(j))
                });
                if let Some(below) = below.filter(|&k| k < MAX_BLOCK_CHAIN) {
                    chain[s.var.index()] = below + 1;
                }
            }
            if chain[s.var.index()] > 0 {
                for a in &s.args {
                    needs_buffer[a.index()] = true;
                    kernel_operand[a.index()] = true;
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
        Ok(Needs {
            uses,
            read_whole,
            kept,
            view_only,
            needs_buffer,
            matmul_operand,
            kernel_operand,
            blocked: chain.iter().map(|&k| k > 0).collect(),
            ret_pos,
        })
    }

    /// How each statement of `f` is read (a scalar, a splat, a buffer,
    /// inlined, or dead), its home and its stores, into `r`. A statement
    /// to get a scratch buffer is left at `Read::Buf(usize::MAX)`. Returns
    /// which were materialised only because several consumers would
    /// recompute a dear element tree (see `fuse_shared`).
    fn classify(f: &Function, needs: &Needs, r: &mut Reads) -> Vec<bool> {
        let nv = f.vars.len();
        let (uses, kept) = (&needs.uses, &needs.kept);
        let Reads { read, home, stores } = r;
        // Flops per element of each inlined value's element tree, and its
        // statements.
        let mut tree_flops = vec![0.0f64; nv];
        let mut tree_nodes = vec![0usize; nv];
        let mut tree_operands = vec![0usize; nv];
        // Materialised only because several consumers would recompute a
        // dear element tree: see `fuse_shared`.
        let mut shared_only = vec![false; nv];
        for s in &f.stmts {
            let v = s.var.index();
            let ty = f.ty(s.var);
            let rets = &needs.ret_pos[v];
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
            if needs.view_only[v] {
                read[v] = Read::Inline;
                continue;
            }
            // Cheap enough to recompute in each consumer rather than write
            // to memory and read back (see [`RECOMPUTE_FLOPS`])?
            let flops = Self::tree_flops(s, read, &tree_flops);
            let (mut nodes, mut operands) = (1, 0);
            for a in &s.args {
                match read[a.index()] {
                    Read::Inline => {
                        nodes += tree_nodes[a.index()];
                        operands += tree_operands[a.index()];
                    }
                    Read::Dead | Read::Splat(None) => {}
                    Read::Scalar | Read::Buf(_) | Read::Splat(Some(_)) => operands += 1,
                }
            }
            let cheap = matches!(access(s.op), Access::Elementwise | Access::IndexMap)
                && flops <= RECOMPUTE_FLOPS;
            // Materialised whatever its consumers: read whole, a loop nest,
            // a computed matmul operand, or a residual kept in memory.
            let must_buffer = needs.needs_buffer[v]
                || nodes > MAX_TREE_NODES
                || operands > MAX_TREE_OPERANDS
                || access(s.op) == Access::Nest
                || needs.blocked[v]
                || (needs.matmul_operand[v] && flops > 0.0)
                || (uses[v] > 1 && kept[v]);
            let splat = match s.op {
                _ if needs.kernel_operand[v] => None,
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
            } else if must_buffer || (uses[v] > 1 && !cheap && needs.read_whole[v]) {
                // (A value only single elements of which are read, however
                // far down, is computed at those elements: no reason to
                // store all of it, see `read_whole`. One read whole
                // somewhere keeps the rule above: stored once, it also
                // keeps its consumers' trees cheap to share.)
                // Its scratch buffer is numbered below.
                read[v] = Read::Buf(usize::MAX);
                shared_only[v] = !must_buffer;
            } else {
                read[v] = Read::Inline;
                tree_flops[v] = flops;
                tree_nodes[v] = nodes;
                tree_operands[v] = operands;
            }
            // The first returned position is the statement's home; the others
            // are copies.
            for &o in rets.iter().skip(1) {
                stores.push((s.var, o));
            }
        }
        shared_only
    }

    /// The buffers of live loop statement `s` (of loop `lp`) besides its
    /// home, pushed onto `scratch` (numbered from `first`); `rets` are its
    /// output positions. Also whether it calls the loop's body and VJP.
    fn loop_stmt_bufs(
        f: &Function,
        s: &Stmt,
        lp: &Loop,
        read: &[Read],
        rets: &[usize],
        scratch: &mut Vec<Type>,
        first: usize,
    ) -> Result<(LoopBufs, bool, bool), Error> {
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
            // The last of the fixed operands.
            let xs = *s.args[..s.op.arity().min(s.args.len())]
                .last()
                .ok_or_else(|| Error::internal("backend: a scan without its sequence"))?;
            if !buffered(xs) {
                lb.seq = Some(push_scratch(scratch, first, f.ty(xs).clone()));
            }
        }
        if f.ty(s.var).is_scalar() {
            lb.out = Some(match rets.first() {
                Some(&o) => o,
                None => push_scratch(scratch, first, state.clone()),
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
                    lb.other = Some(push_scratch(scratch, first, state.clone()));
                }
                (count >= 1, false)
            }
            Op::LoopTape(_, k, _) => {
                let seg = count.min(u64::from(k.max(1)));
                if seg >= 2 {
                    lb.a = Some(push_scratch(scratch, first, state.clone()));
                }
                if seg >= 3 {
                    lb.b = Some(push_scratch(scratch, first, state.clone()));
                }
                (count >= 1, false)
            }
            Op::LoopVjp(_, k, m, _) => {
                let (t, g) = (arg(0)?, arg(1)?);
                if !buffered(t) {
                    lb.tape = Some(push_scratch(scratch, first, f.ty(t).clone()));
                }
                // The whole tape's cotangent is read row by row.
                if m & crate::ops::VJP_TAPE != 0 && !buffered(g) {
                    lb.seed = Some(push_scratch(scratch, first, f.ty(g).clone()));
                }
                // With the sequence's cotangent, each step writes its
                // own row of the home: nothing alternates.
                if m & crate::ops::VJP_SEQ == 0 && ping_pong(g) {
                    lb.other = Some(push_scratch(scratch, first, state.clone()));
                }
                let m = m & crate::ops::VJP_RECOMPUTE;
                let seg = count.min(u64::from(k.max(1)));
                if m == 0 && seg >= 2 {
                    let mut shape = vec![Dim::Lit(seg - 1)];
                    shape.extend(state.shape.iter().cloned());
                    let ty = Type::array(state.dtype, shape);
                    lb.seg = Some(push_scratch(scratch, first, ty));
                }
                if m != 0 && seg >= 2 {
                    lb.a = Some(push_scratch(scratch, first, state.clone()));
                }
                if m != 0 && seg >= 3 {
                    lb.b = Some(push_scratch(scratch, first, state.clone()));
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
        Ok((lb, body, vjp))
    }

    /// Cut a function of more than [`SPLIT_STMTS`] statements into parts of
    /// about [`PART_STMTS`], each compiled as its own native function: the
    /// register allocator's time and memory grow faster than a function's
    /// length (an unrolled loop of 7,600 statements took 5.6 s in one
    /// function; its gradient of 69,000, minutes; the fuzzer's gradient of
    /// 15,000 statements of scalar steps took 22 s in parts of 1,000 and
    /// 1.4 s in parts of 250), so a long program compiles in time linear
    /// in its length. Buffers live in memory and
    /// every part reloads their pointers; a scalar that a later part reads
    /// (directly, or in an element tree computed there) is stored in a
    /// slot of a spill buffer right after it is computed, and loaded where
    /// a later part first reads it. Returned values are stored by the last
    /// part.
    fn split(&mut self, f: &Function) {
        let n = f.stmts.len();
        if n <= SPLIT_STMTS {
            return;
        }
        let k = n.div_ceil(PART_STMTS);
        self.parts = (0..k).map(|p| p * n / k..(p + 1) * n / k).collect();
        self.param_of = vec![None; f.vars.len()];
        for (i, p) in f.params.iter().enumerate() {
            if f.ty(p.var).is_scalar() {
                self.param_of[p.var.index()] = Some(i as u32);
            }
        }
        let mut part_of = vec![0; n];
        for (p, r) in self.parts.iter().enumerate() {
            part_of[r.clone()].fill(p);
        }
        // The last part that reads each value: a statement computed at its
        // place is read in its own part; an inlined or splat value is
        // computed in its consumers' parts.
        let nv = f.vars.len();
        let mut last = vec![None::<usize>; nv];
        for r in &f.rets {
            last[r.index()] = Some(k - 1);
        }
        for (si, s) in f.stmts.iter().enumerate().rev() {
            let v = s.var.index();
            let own = part_of[si];
            let at = match self.read[v] {
                Read::Dead => continue,
                Read::Inline | Read::Splat(_) => last[v].unwrap_or(own).max(own),
                Read::Scalar | Read::Buf(_) => own,
            };
            for a in &s.args {
                let l = &mut last[a.index()];
                *l = Some(l.map_or(at, |x| x.max(at)));
            }
        }
        let mut slots = 0u32;
        for (si, s) in f.stmts.iter().enumerate() {
            let v = s.var.index();
            let own = part_of[si];
            if self.read[v] == Read::Scalar && last[v].is_some_and(|l| l > own) {
                self.spill[v] = Some(slots);
                slots += 1;
            }
        }
        if slots > 0 {
            let first = self.n_inputs + self.n_outputs;
            let ty = Type::array(crate::types::DType::I64, vec![Dim::Lit(u64::from(slots))]);
            self.spill_buf = Some(push_scratch(&mut self.scratch, first, ty));
        }
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
    fn tree_flops(s: &crate::ir::Stmt, read: &[Read], tree: &[f64]) -> f64 {
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
