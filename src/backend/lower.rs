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
//! `sum` runs one loop over its operand's inlined element tree with a single
//! accumulator, left to right, in the dtype's precision, so results are
//! bit-identical to the reference interpreter.
//!
//! The per-op lowering is one exhaustive `match` over [`Op`] with no wildcard
//! arm ([`Translator::translate_op`]): a new op does not compile until it is
//! lowered here.

use super::jit::Libm;
use crate::error::Error;
use crate::lang::ir::{Function, VarId};
use crate::lang::types::{DType, Dim, Type};
use crate::ops::Op;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{self, types, FuncRef, InstBuilder, MemFlagsData};
use cranelift_frontend::FunctionBuilder;
use std::collections::HashMap;

/// A value used more than once is recomputed in each consumer's loop when
/// its element tree costs at most this many flops per element (a broadcast
/// read, an index map, an add or two): cheaper than storing it and loading
/// it back. Not for a value the plan must keep (a stored residual).
pub(crate) const RECOMPUTE_FLOPS: f64 = 2.0;

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
    /// zero): inlined into its consumer, reading its operand from a buffer.
    IndexMap,
    /// Its own loop nest writing a buffer (`sumlead`, `sumtail`, `matmul`);
    /// reads its operands' element trees at any index.
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
        | Op::Transpose => Access::IndexMap,
        Op::SumLead | Op::SumTail | Op::MaxTail | Op::MinTail | Op::MatMul => Access::Nest,
        Op::Loop(_) | Op::LoopTape(..) | Op::LoopVjp(..) => Access::Nest,
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
    /// Types of the scratch buffers, in buffer order.
    pub scratch: Vec<Type>,
    read: Vec<Read>,
    /// The buffer a statement's own loop writes, if it is materialised.
    home: Vec<Option<usize>>,
    /// Returned values stored after everything is computed:
    /// (value, output buffer). Scalars, parameters, repeated returns.
    stores: Vec<(VarId, usize)>,
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
        for s in &f.stmts {
            if access(s.op) == Access::IndexMap {
                for a in &s.args {
                    needs_buffer[a.index()] = true;
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
            } else if needs_buffer[v]
                || access(s.op) == Access::Nest
                || (uses[v] > 1 && (kept[v] || !cheap))
            {
                let k = n_inputs + n_outputs + scratch.len();
                scratch.push(ty.clone());
                read[v] = Read::Buf(k);
                home[v] = Some(k);
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
        Ok(Plan {
            n_inputs,
            n_outputs,
            scratch,
            read,
            home,
            stores,
        })
    }

    /// Flops per element of statement `s`'s element tree: itself and the
    /// inlined values under it.
    fn tree_flops(s: &crate::lang::ir::Stmt, read: &[Read], tree: &[f64]) -> f64 {
        s.op.flops()
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
        DType::F64 => types::F64,
    }
}

fn log2_bytes(d: DType) -> i64 {
    match d {
        DType::F32 => 2,
        DType::F64 => 3,
    }
}

/// Translates one function into a Cranelift function body.
pub(crate) struct Translator<'a, 'b> {
    f: &'a Function,
    plan: &'a Plan,
    b: FunctionBuilder<'b>,
    /// Resolves an imported libm function, importing it on first use.
    import: &'a mut dyn FnMut(&mut ir::Function, Libm, DType) -> FuncRef,
    imported: Vec<(Libm, DType, FuncRef)>,
    /// Base pointer of every buffer (loaded in the entry block).
    bufs: Vec<ir::Value>,
    /// Values of the size parameters (loaded in the entry block).
    dims: Vec<ir::Value>,
    /// Scalars computed so far.
    scalars: Vec<Option<ir::Value>>,
    /// The statement defining each variable.
    defs: Vec<Option<usize>>,
}

impl<'a, 'b> Translator<'a, 'b> {
    pub fn new(
        f: &'a Function,
        plan: &'a Plan,
        b: FunctionBuilder<'b>,
        import: &'a mut dyn FnMut(&mut ir::Function, Libm, DType) -> FuncRef,
    ) -> Self {
        Translator {
            f,
            plan,
            b,
            import,
            imported: Vec::new(),
            bufs: Vec::new(),
            dims: Vec::new(),
            scalars: vec![None; f.vars.len()],
            defs: f.definitions(),
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
        // A scalar from an array: a fold of all its elements (`sumlead` of
        // a vector included), or one element of a vector.
        if let Some((init, step)) = stmt.op.reduction() {
            return self.translate_reduce(first()?, dtype, init, step);
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

    /// A reduction of `a` (`sum`, `maxall`, `minall`): one loop over `a`'s
    /// element tree, a single accumulator starting at `init`, left to right.
    fn translate_reduce(
        &mut self,
        a: VarId,
        dtype: DType,
        init: f64,
        step: Op,
    ) -> Result<ir::Value, Error> {
        let len = self.translate_len(self.f.ty(a).clone())?;
        let acc = self.b.declare_var(cl_type(dtype));
        let first = self.translate_const(dtype, init);
        self.b.def_var(acc, first);
        self.translate_loop(len, &mut |t, i| {
            let x = t.translate_elem(a, i)?;
            let sofar = t.b.use_var(acc);
            let next = t.translate_op(step, dtype, &[sofar, x])?;
            t.b.def_var(acc, next);
            Ok(())
        })?;
        Ok(self.b.use_var(acc))
    }

    /// The loop writing a materialised statement `v` into buffer `k`.
    fn translate_materialise(&mut self, v: VarId, k: usize) -> Result<(), Error> {
        let ty = self.f.ty(v).clone();
        if let Some(s) = self.defs.get(v.index()).copied().flatten() {
            if access(self.f.stmts[s].op) == Access::Nest {
                return self.translate_nest(s, k);
            }
        }
        let len = self.translate_len(ty.clone())?;
        let base = self.buf(k)?;
        self.translate_loop(len, &mut |t, i| {
            let x = t.translate_tree(v, i)?;
            t.translate_store(ty.dtype, base, i, x);
            Ok(())
        })
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
                self.translate_loop(len, &mut |t, i| {
                    let x = t.translate_elem(v, i)?;
                    t.translate_store(ty.dtype, base, i, x);
                    Ok(())
                })?;
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
    /// interpreter; `matmul` rounds each product before adding it.
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
            Op::SumTail | Op::SumLead | Op::MaxTail | Op::MinTail => {
                let rows = self.translate_len(lead)?;
                let cols = self.translate_len(rest)?;
                let tail = stmt.op != Op::SumLead;
                let (init, step) = stmt.op.reduction().unwrap_or((0.0, Op::Add));
                let (outer, inner) = if tail { (rows, cols) } else { (cols, rows) };
                self.translate_loop(outer, &mut |t, o| {
                    let acc = t.b.declare_var(cl_type(dtype));
                    let first = t.translate_const(dtype, init);
                    t.b.def_var(acc, first);
                    t.translate_loop(inner, &mut |t, n| {
                        // Element (row, col) of the operand.
                        let (r, c) = if tail { (o, n) } else { (n, o) };
                        let rc = t.b.ins().imul(r, cols);
                        let j = t.b.ins().iadd(rc, c);
                        let x = t.translate_elem(a, j)?;
                        let sofar = t.b.use_var(acc);
                        let next = t.translate_op(step, dtype, &[sofar, x])?;
                        t.b.def_var(acc, next);
                        Ok(())
                    })?;
                    let total = t.b.use_var(acc);
                    t.translate_store(dtype, base, o, total);
                    Ok(())
                })
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
                self.translate_loop(m, &mut |t, i| {
                    t.translate_loop(n, &mut |t, j| {
                        let acc = t.b.declare_var(cl_type(dtype));
                        let zero = t.translate_const(dtype, 0.0);
                        t.b.def_var(acc, zero);
                        t.translate_loop(kk, &mut |t, l| {
                            let ik = t.b.ins().imul(i, kk);
                            let ia = t.b.ins().iadd(ik, l);
                            let ln = t.b.ins().imul(l, n);
                            let ib = t.b.ins().iadd(ln, j);
                            let x = t.translate_elem(a, ia)?;
                            let y = t.translate_elem(b, ib)?;
                            let p = t.b.ins().fmul(x, y);
                            let sofar = t.b.use_var(acc);
                            let next = t.b.ins().fadd(sofar, p);
                            t.b.def_var(acc, next);
                            Ok(())
                        })?;
                        let total = t.b.use_var(acc);
                        let in_ = t.b.ins().imul(i, n);
                        let o = t.b.ins().iadd(in_, j);
                        t.translate_store(dtype, base, o, total);
                        Ok(())
                    })
                })
            }
            other => Err(Error::internal(format!(
                "backend: `{}` is not a loop nest",
                other.name()
            ))),
        }
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
        let imm = |k: u64| i64::try_from(k).map_err(|_| Error::internal("backend: row overflows"));
        match stmt.op {
            Op::Slice(c) | Op::Index(c) => {
                let row = self.translate_len(tail(&at))?;
                let off = self.b.ins().imul_imm_s(row, imm(c)?);
                let j = self.b.ins().iadd(i, off);
                self.translate_leaf(a, j)
            }
            Op::Pad(c) | Op::Unindex(c) => {
                let row = self.translate_len(tail(&out))?;
                let start = self.b.ins().imul_imm_s(row, imm(c)?);
                let n = self.translate_len(at.clone())?;
                // In range when start <= i < start + n (unsigned arithmetic).
                let j = self.b.ins().isub(i, start);
                let inside = self.b.ins().icmp(IntCC::UnsignedLessThan, j, n);
                let read = self.b.create_block();
                let join = self.b.create_block();
                let x = self.b.append_block_param(join, cl_type(dtype));
                let zero = self.translate_const(dtype, 0.0);
                self.b
                    .ins()
                    .brif(inside, read, &[], join, &[ir::BlockArg::Value(zero)]);
                self.b.switch_to_block(read);
                self.b.seal_block(read);
                let y = self.translate_leaf(a, j)?;
                self.b.ins().jump(join, &[ir::BlockArg::Value(y)]);
                self.b.switch_to_block(join);
                self.b.seal_block(join);
                Ok(x)
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
            other => Err(Error::internal(format!(
                "backend: `{}` is not an index map",
                other.name()
            ))),
        }
    }

    /// Element `i` of statement `root` computed in place, with every inlined
    /// statement under it. Iterative (no recursion on deep chains): collect
    /// the inlined tree, then evaluate it in statement order.
    fn translate_tree(&mut self, root: VarId, i: ir::Value) -> Result<ir::Value, Error> {
        let defs = &self.defs;
        let def = |v: VarId| -> Result<usize, Error> {
            defs.get(v.index())
                .copied()
                .flatten()
                .ok_or_else(|| Error::internal("backend: inlined value has no statement"))
        };
        let mut nodes = vec![def(root)?];
        let mut stack = vec![root];
        while let Some(v) = stack.pop() {
            for &a in &self.f.stmts[def(v)?].args {
                if self.read(a)? == Read::Inline {
                    nodes.push(def(a)?);
                    stack.push(a);
                }
            }
        }
        nodes.sort_unstable();
        nodes.dedup();
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

    /// The op on element (or scalar) operands. Reductions are lowered by
    /// [`Translator::translate_reduce`] with their step op, never here; for
    /// `bcast` the operand is the scalar itself.
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
            Op::Sin => self.translate_libcall(Libm::Sin, dtype, arg(0)?),
            Op::Cos => self.translate_libcall(Libm::Cos, dtype, arg(0)?),
            Op::Exp => self.translate_libcall(Libm::Exp, dtype, arg(0)?),
            Op::Log => self.translate_libcall(Libm::Log, dtype, arg(0)?),
            Op::Tanh => self.translate_libcall(Libm::Tanh, dtype, arg(0)?),
            Op::Tan => self.translate_libcall(Libm::Tan, dtype, arg(0)?),
            Op::Log1p => self.translate_libcall(Libm::Log1p, dtype, arg(0)?),
            Op::Expm1 => self.translate_libcall(Libm::Expm1, dtype, arg(0)?),
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
            | Op::SumLead
            | Op::SumTail
            | Op::MaxTail
            | Op::MinTail
            | Op::MatMul
            | Op::Loop(_)
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
            DType::F64 => self.b.ins().f64const(x),
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
        match self
            .imported
            .iter()
            .find(|(w, d, _)| *w == which && *d == dtype)
        {
            Some(&(_, _, r)) => r,
            None => {
                let r = (self.import)(self.b.func, which, dtype);
                self.imported.push((which, dtype, r));
                r
            }
        }
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
        let i = self.b.declare_var(types::I64);
        let zero = self.b.ins().iconst(types::I64, 0);
        self.b.def_var(i, zero);
        let header = self.b.create_block();
        let body_block = self.b.create_block();
        let exit = self.b.create_block();
        self.b.ins().jump(header, &[]);

        self.b.switch_to_block(header);
        let iv = self.b.use_var(i);
        let more = self.b.ins().icmp(IntCC::UnsignedLessThan, iv, len);
        self.b.ins().brif(more, body_block, &[], exit, &[]);

        self.b.switch_to_block(body_block);
        body(self, iv)?;
        let next = self.b.ins().iadd_imm_s(iv, 1);
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
                Dim::Param(p) | Dim::Sub(p, _) => {
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
