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
use crate::ir::{Function, VarId};
use crate::ops::{Family, Op};
use crate::types::{DType, Dim, Type};
use crate::vmath::VFn;
use cranelift_codegen::ir::{self, types, FuncRef, InstBuilder, MemFlagsData};
use cranelift_frontend::FunctionBuilder;

mod builder;
mod concat;
mod elem;
mod homes;
mod index;
mod loop_stmt;
mod loop_vjp;
mod loops;
mod nest;
mod op;
mod plan;
pub(crate) mod range;
mod vector;
// The SIMD vector math kernels' Cranelift emitter (`crate::vmath`), checked
// bit for bit against the scalar kernels; not yet called by the lowering
// (issue 15: exp, log, tanh, ... still go through libm here).
mod vmath_clif;

pub(crate) use plan::Kernels;
pub(crate) use vmath_clif::emit as emit_kernel;
#[cfg(test)]
mod vmath_clif_test;

/// Where a failed run-time check (an index out of range) is recorded:
/// three `i64` slots just before the `dims` array every function (entry,
/// loop body, VJP) receives, so each finds them at the same place. Slot
/// `-3` holds the check's source offset plus one (0: no failure), `-2` the
/// index, `-1` the length it was checked against; the first failure is
/// kept. The caller zeroes them before the call and reads them after
/// ([`crate::backend::jit`]).
pub(crate) const STATUS_SLOTS: usize = 3;

/// Does element `i` of the result read element `i - offset` of the operand
/// (or zero outside it)? Such an index map (`slice`, `index`, `pad`,
/// `unindex`, and `reshape`, whose offset is 0) computes an element-wise
/// operand in place at the shifted index; the other index maps read their
/// operand from a buffer.
fn shifts(op: Op) -> bool {
    matches!(
        op,
        Op::Slice(_) | Op::Index(_) | Op::Pad(_) | Op::Unindex(_) | Op::Reshape
    )
}

/// An op that, on a matrix, gives a view of it the GEMM kernel reads in
/// place with strides (`plan::view_only`, `Translator::strided_view`).
fn is_matrix_view(op: Op) -> bool {
    matches!(op, Op::Transpose | Op::Slice(_) | Op::Reverse)
}

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

/// How the backend reads each family of ops (an exhaustive match).
fn access(op: Op) -> Access {
    match op.family() {
        Family::Leaf | Family::Elementwise => Access::Elementwise,
        Family::Reduction => Access::Reduce,
        Family::IndexMap => Access::IndexMap,
        // A call writing the statement's buffer from its operands' buffers
        // (a kernel); loops' steps are calls too.
        Family::Nest | Family::Loop | Family::Kernel => Access::Nest,
        // Never lowered: `jit::lower` takes the function without them
        // (`Function::without_customs`), each the `reshape` it stands for.
        Family::Custom => Access::IndexMap,
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
    /// The statements of each part, in order: a function of more than
    /// [`SPLIT_STMTS`] statements is compiled as several native functions
    /// of about [`PART_STMTS`], called in turn by its entry (see
    /// [`Plan::parts`]).
    pub parts: Vec<std::ops::Range<usize>>,
    /// The slot of each scalar a later part reads, in the spill buffer.
    spill: Vec<Option<u32>>,
    /// The spill buffer: one 8-byte slot per spilled scalar.
    spill_buf: Option<usize>,
    /// In a function compiled in parts: the input of each scalar
    /// parameter, loaded where a part first reads it (each part loading
    /// every one was quadratic in a gradient's residuals).
    param_of: Vec<Option<u32>>,
    /// The statements a block kernel computes over their whole array
    /// (`plan::block_fn`, where `plan::cheap_operand` allows it).
    blocked: Vec<bool>,
    /// What a run computes, by its sizes: checked against the work limit
    /// before each run ([`crate::ir::work`]).
    pub work: crate::ir::work::Work,
    /// The shapes of the values the function computes or reads (its
    /// loops' bodies and VJPs included) whose element count depends on
    /// its sizes, each once: a run where one has
    /// [`index::MAX_NATIVE_ELEMENTS`] or more is refused
    /// ([`Plan::check_elements`]).
    pub shapes: Vec<Vec<Dim>>,
    /// Whether every run is checked against `shapes` first
    /// ([`Kernels::checked`]).
    checked: bool,
}

/// A function of more statements than this is compiled in parts (see
/// [`Plan::parts`]); smaller ones, every benchmark among them, stay one
/// native function.
pub(crate) const SPLIT_STMTS: usize = 1500;

/// The statements of one part of a function compiled in parts.
pub(crate) const PART_STMTS: usize = 250;

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
    /// `loopvjp` seeded by a tape's cotangent that is not in a buffer: its
    /// copy.
    seed: Option<usize>,
}

fn cl_type(d: DType) -> ir::Type {
    match d {
        DType::F32 => types::F32,
        DType::F64 => types::F64,
        DType::I64 | DType::Bool => types::I64,
    }
}

fn log2_bytes(d: DType) -> i64 {
    match d {
        DType::F32 => 2,
        DType::F64 | DType::I64 | DType::Bool => 3,
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
    /// The captures' pointers of the loop statement being translated,
    /// passed to each call of its body after the state (and row).
    loop_caps: Vec<ir::Value>,
    /// The `bufs` argument: the table of buffer base pointers.
    bufs_ptr: Option<ir::Value>,
    /// Base pointer of each buffer, once loaded (see [`Translator::buf`]).
    bufs: Vec<Option<ir::Value>>,
    /// The block where the statement being translated starts, which
    /// dominates all code after it: where a buffer's pointer is loaded
    /// when the statement first needs it.
    stmt_block: Option<ir::Block>,
    /// The `dims` argument, passed on to loop bodies and VJPs.
    dims_ptr: Option<ir::Value>,
    /// Values of the size parameters (loaded in the entry block).
    dims: Vec<ir::Value>,
    /// Scalars computed so far.
    scalars: Vec<Option<ir::Value>>,
    /// The statement defining each variable.
    defs: &'a [Option<usize>],
    /// Element-wise loops, reductions and column loops in SIMD vectors
    /// (see [`vector`]); else scalar code with the same results.
    simd: bool,
    /// `matmul` of operands in memory through a GEMM kernel call.
    gemm: bool,
    /// Whether the function has an `i64` value or a conversion between
    /// `f32` and `f64` at all (else no element tree needs
    /// [`Translator::vectorizable`]'s walk).
    mixed: bool,
    /// The row being reduced, inside a `sumtail` or `sumlead` loop nest.
    row: Option<RowCtx>,
    /// The `pad`s and `unindex`es whose edges the segments of
    /// [`Translator::translate_map`]'s loop end at, each with its shift
    /// (see [`Translator::shift`]): each holds all lanes of a vector or
    /// none (no lane-by-lane code).
    edges: std::rc::Rc<std::collections::HashSet<(usize, crate::types::size::Size)>>,
    /// In a segment of that loop inside every one of those pads: no test.
    edges_inside: bool,
    /// Inside that loop, how far the index of the element being
    /// computed lies from the loop's index (row shifts add their offsets);
    /// `None` elsewhere, or below an index map that is not a shift.
    shift: Option<crate::types::size::Size>,
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
    /// `defs` is `f.definitions()`, computed once for all of `f`'s parts.
    pub fn new(
        f: &'a Function,
        defs: &'a [Option<usize>],
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
            loop_caps: Vec::new(),
            bufs_ptr: None,
            bufs: vec![None; plan.n_buffers()],
            stmt_block: None,
            dims_ptr: None,
            dims: Vec::new(),
            scalars: vec![None; f.vars.len()],
            defs,
            simd: opts.simd,
            gemm: opts.gemm,
            mixed: f.vars.iter().any(|v| v.ty.dtype.is_int())
                || f.stmts.iter().any(|s| elem::converts_floats(f, s)),
            row: None,
            edges: Default::default(),
            edges_inside: false,
            shift: None,
        }
    }

    /// Emit the body of part `part` of the function (the whole function
    /// when it has one part; see [`Plan::parts`]): `fn(bufs: *const *mut
    /// u8, dims: *const i64)`. Returns the builder so the caller can
    /// finalize it.
    pub fn translate_function(mut self, part: usize) -> Result<FunctionBuilder<'b>, Error> {
        let stmts = self
            .plan
            .parts
            .get(part)
            .cloned()
            .ok_or_else(|| Error::internal(format!("backend: there is no part {part}")))?;
        let last = part + 1 == self.plan.parts.len();
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
        self.bufs_ptr = Some(bufs_ptr);
        self.start_stmt();
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
        for s in stmts {
            self.start_stmt();
            self.translate_stmt(s)?;
        }
        if last {
            self.start_stmt();
            self.translate_stores()?;
        }
        self.b.ins().return_(&[]);
        self.b.seal_all_blocks();
        Ok(self.b)
    }

    /// Load scalar parameters (one element each) once, at entry; a
    /// function in parts loads each where a part first reads it
    /// ([`Self::scalar`]).
    fn translate_params(&mut self) -> Result<(), Error> {
        if !self.plan.param_of.is_empty() {
            return Ok(());
        }
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

    fn read(&self, v: VarId) -> Result<Read, Error> {
        self.plan
            .read
            .get(v.index())
            .copied()
            .ok_or_else(|| Error::internal("backend: unknown variable"))
    }

    /// The value of scalar `v`: computed in this part, or (computed by an
    /// earlier part, or a parameter of a function in parts) loaded from
    /// its spill slot (its input) where this part first reads it.
    fn scalar(&mut self, v: VarId) -> Result<ir::Value, Error> {
        if let Some(x) = self.scalars.get(v.index()).copied().flatten() {
            return Ok(x);
        }
        let param = self.plan.param_of.get(v.index()).copied().flatten();
        let Some((slot, k)) = self
            .spill_slot(v)
            .or_else(|| param.map(|k| (0, k as usize)))
        else {
            return Err(Error::internal(format!(
                "backend: scalar %{} used before it is computed",
                self.f.var_name(v)
            )));
        };
        let base = self.buf(k)?;
        let block = self
            .stmt_block
            .ok_or_else(|| Error::internal("backend: a scalar read outside a function body"))?;
        let ty = cl_type(self.f.ty(v).dtype);
        let x = Self::at_block_end(&mut self.b, block).ins().load(
            ty,
            MemFlagsData::trusted(),
            base,
            8 * slot as i32,
        );
        self.scalars[v.index()] = Some(x);
        Ok(x)
    }

    /// The spill slot of scalar `v` and the spill buffer, if a later part
    /// reads `v`.
    fn spill_slot(&self, v: VarId) -> Option<(u32, usize)> {
        Some((
            self.plan.spill.get(v.index()).copied().flatten()?,
            self.plan.spill_buf?,
        ))
    }

    /// Store scalar `v`, just computed as `x`, in its spill slot if a later
    /// part reads it.
    fn spill(&mut self, v: VarId, x: ir::Value) -> Result<(), Error> {
        let Some((slot, k)) = self.spill_slot(v) else {
            return Ok(());
        };
        let base = self.buf(k)?;
        self.b
            .ins()
            .store(MemFlagsData::trusted(), x, base, 8 * slot as i32);
        Ok(())
    }

    /// Note the block where the next statement starts (`buf` and spilled
    /// scalars load there), putting it in the layout now: Cranelift's
    /// builder adds a block to the layout only with its first instruction,
    /// and a cursor at the end of a block not in the layout is a bug
    /// (a debug build's assertion; a release build got away with it).
    fn start_stmt(&mut self) {
        self.b.ensure_inserted_block();
        self.stmt_block = self.b.current_block();
    }

    /// A cursor inserting at the end of `block`, before its terminator if
    /// it has one: code there runs before everything emitted after it.
    fn at_block_end<'c>(
        b: &'c mut FunctionBuilder<'_>,
        block: ir::Block,
    ) -> cranelift_codegen::cursor::FuncCursor<'c> {
        use cranelift_codegen::cursor::{Cursor, FuncCursor};
        let mut pos = FuncCursor::new(b.func);
        pos.goto_bottom(block);
        if let Some(last) = pos.layout().last_inst(block) {
            if pos.func.dfg.insts[last].opcode().is_terminator() {
                pos.goto_inst(last);
            }
        }
        pos
    }

    /// The base pointer of buffer `k`, loaded from the buffer table when
    /// first needed, at the end of the block where the current statement
    /// starts (before its terminator, if the statement's code has already
    /// left it), so it is computed once, outside the statement's loops, and
    /// lives from its first use to its last. Loading every pointer in the
    /// entry block instead made each one live from the entry: a program of
    /// thousands of buffers (an unrolled loop, a large gradient) then gave
    /// the register allocator thousands of overlapping live ranges, and its
    /// time and memory grew with their square.
    fn buf(&mut self, k: usize) -> Result<ir::Value, Error> {
        match self.bufs.get(k) {
            Some(Some(p)) => return Ok(*p),
            Some(None) => {}
            None => return Err(Error::internal(format!("backend: no buffer {k}"))),
        }
        let (Some(table), Some(block)) = (self.bufs_ptr, self.stmt_block) else {
            return Err(Error::internal(
                "backend: a buffer read outside a function body",
            ));
        };
        let off = i32::try_from(8 * k).map_err(|_| Error::internal("backend: too many buffers"))?;
        let p = Self::at_block_end(&mut self.b, block).ins().load(
            types::I64,
            MemFlagsData::trusted(),
            table,
            off,
        );
        self.bufs[k] = Some(p);
        Ok(p)
    }
}
