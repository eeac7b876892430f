//! Statements in program order and element trees: scalars computed once,
//! materialised values in their own loops, returned values stored, and
//! element `i` of a value computed as its consumers read it.

use super::plan::block_fn;
use super::vector::Source;
use super::{access, cl_type, Access, Read, Translator, INLINE_KERNELS};
use crate::backend::jit::Libm;
use crate::error::Error;
use crate::ir::VarId;
use crate::ops::{ElementCall, Op};
use crate::vmath::{block_id, VFn};
use cranelift_codegen::ir::{self, types, InstBuilder, MemFlagsData};
use std::collections::HashMap;

/// The calls an element tree makes ([`Translator::element_calls`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Calls {
    /// None: the element is straight-line code.
    None,
    /// Vector math kernels (a vector at a time).
    Kernels,
    /// The C library's `pow` or `tan` (a lane at a time).
    Libm,
}

/// Is `s` a conversion between `f32` and `f64`? Its two sides have
/// different lane counts (four `f32` or two `f64` in a vector), so a tree
/// that holds one runs in scalar code ([`Translator::vectorizable`]).
pub(super) fn converts_floats(f: &crate::ir::Function, s: &crate::ir::Stmt) -> bool {
    match (s.op, s.args.first()) {
        (Op::Convert(to), Some(&a)) => {
            let from = f.ty(a).dtype;
            to != from && !to.is_int() && !from.is_int()
        }
        _ => false,
    }
}

impl<'a, 'b> Translator<'a, 'b> {
    /// One statement at its place in program order: a scalar is computed, a
    /// materialised array gets its own loop, anything else waits for its
    /// consumer.
    pub(super) fn translate_stmt(&mut self, s: usize) -> Result<(), Error> {
        let stmt = &self.f.stmts[s];
        let v = stmt.var;
        let ty = self.f.ty(v).clone();
        if ty.is_scalar() {
            if self.plan.read[v.index()] == Read::Dead {
                return Ok(());
            }
            let x = self.translate_scalar(s)?;
            self.scalars[v.index()] = Some(x);
            return self.spill(v, x);
        }
        self.translate_gather_check(s)?;
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
        if self.simd && !self.vectorizable(stmt.var)? {
            return self.scalar_code(&mut |t| t.translate_scalar(s));
        }
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
        if let Op::Gather(_) | Op::Dim(_) = stmt.op {
            // One row of a vector, or a size: element 0 of the index map.
            let zero = self.b.ins().iconst(types::I64, 0);
            return self.translate_index_map(s, zero);
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

    /// Can `v`'s element tree run in SIMD vectors? Not when it computes
    /// or reads an `i64` value (integers run in scalar code; a `gather`'s
    /// indices are read lane by lane), or converts between `f32` and
    /// `f64`. The walk goes on through index maps
    /// (unlike [`Translator::tree_nodes`]): a row shift or a view computes
    /// its operand in place, at its own index, so the `f64(ix)` under
    /// `tabulate[N-1](i => f64(ix)[i])` is part of the tree, which then
    /// runs in scalar code.
    pub(super) fn vectorizable(&self, v: VarId) -> Result<bool, Error> {
        if !self.mixed {
            return Ok(true);
        }
        if self.f.ty(v).dtype.is_int() {
            return Ok(false);
        }
        let ints = |a: &VarId| self.f.ty(*a).dtype.is_int();
        let mut stack = vec![v];
        let mut seen = std::collections::HashSet::from([v]);
        while let Some(x) = stack.pop() {
            let Some(s) = self.defs.get(x.index()).copied().flatten() else {
                continue;
            };
            let st = &self.f.stmts[s];
            if ints(&st.var)
                || (access(st.op) != Access::IndexMap && st.args.iter().any(ints))
                || converts_floats(self.f, st)
            {
                return Ok(false);
            }
            for (k, &a) in st.args.iter().enumerate() {
                // (A gather reads its indices lane by lane, in scalar code.)
                if matches!(st.op, Op::Gather(_)) && k == 1 {
                    continue;
                }
                if self.read(a)? == Read::Inline && seen.insert(a) {
                    stack.push(a);
                }
            }
        }
        Ok(true)
    }

    /// `emit` with SIMD off (scalar code with the same results).
    pub(super) fn scalar_code<T>(
        &mut self,
        emit: &mut dyn FnMut(&mut Self) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let was = std::mem::replace(&mut self.simd, false);
        let out = emit(self);
        self.simd = was;
        out
    }

    /// The loop writing a materialised statement `v` into buffer `k`.
    fn translate_materialise(&mut self, v: VarId, k: usize) -> Result<(), Error> {
        if let Some(s) = self.defs.get(v.index()).copied().flatten() {
            let stmt = &self.f.stmts[s];
            let blocked = self.plan.blocked.get(v.index()).copied().unwrap_or(false);
            if let Some(vf) = block_fn(self.f, stmt).filter(|_| blocked) {
                return self.translate_block(stmt.args[0], vf, v, k);
            }
        }
        if self.simd && !self.vectorizable(v)? {
            return self.scalar_code(&mut |t| t.translate_materialise(v, k));
        }
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

    /// `v = vf(a)` over the whole array by `vf`'s block kernel
    /// (`crate::vmath::egrad_vmath_block_f64`), from `a`'s buffer (the plan
    /// gives it one) into `v`'s buffer `k`.
    fn translate_block(&mut self, a: VarId, vf: VFn, v: VarId, k: usize) -> Result<(), Error> {
        let ty = self.f.ty(v).clone();
        let Read::Buf(ka) = self.read(a)? else {
            return Err(Error::internal(format!(
                "backend: the operand of the block kernel of %{} is not in memory",
                self.f.var_name(v)
            )));
        };
        let src = self.buf(ka)?;
        let dst = self.buf(k)?;
        let len = self.translate_len(ty.clone())?;
        let id = self.b.ins().iconst(types::I64, block_id(vf));
        let kernel = self.libm_ref(Libm::Block, ty.dtype);
        self.b.ins().call(kernel, &[id, src, dst, len]);
        Ok(())
    }

    /// Returned scalars, returned parameters and repeated returns, stored
    /// after every value is computed.
    pub(super) fn translate_stores(&mut self) -> Result<(), Error> {
        for &(v, k) in &self.plan.stores {
            if self.simd && !self.vectorizable(v)? {
                self.scalar_code(&mut |t| t.translate_store_one(v, k))?;
            } else {
                self.translate_store_one(v, k)?;
            }
        }
        Ok(())
    }

    /// Store returned value `v` into buffer `k`.
    fn translate_store_one(&mut self, v: VarId, k: usize) -> Result<(), Error> {
        {
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
    pub(super) fn translate_elem(&mut self, v: VarId, i: ir::Value) -> Result<ir::Value, Error> {
        match self.read(v)? {
            Read::Inline => self.translate_tree(v, i),
            _ => self.translate_leaf(v, i),
        }
    }

    /// Element `i` of a value that is not inlined (scalar, buffer, splat).
    pub(super) fn translate_leaf(&mut self, v: VarId, i: ir::Value) -> Result<ir::Value, Error> {
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

    /// The statements of `root`'s element tree (itself and every inlined
    /// statement under it), in statement order. Iterative: no recursion
    /// on deep chains.
    pub(super) fn tree_nodes(&self, root: VarId) -> Result<Vec<usize>, Error> {
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

    /// Which functions computing an element of `v` calls: [`Calls::Libm`]
    /// when any is `pow` or a C library math function (one call per lane),
    /// else [`Calls::Kernels`] when a vector math kernel is called (this
    /// function has used up its inline copies), else [`Calls::None`].
    /// Looks through index maps to the operands they compute.
    pub(super) fn element_calls(&self, v: VarId) -> Result<Calls, Error> {
        let kernels_called = self.cold || self.inlined_kernels >= INLINE_KERNELS;
        let mut calls = Calls::None;
        let mut stack = vec![v];
        let mut seen = std::collections::HashSet::from([v]);
        while let Some(v) = stack.pop() {
            if self.read(v)? != Read::Inline {
                continue;
            }
            let Some(s) = self.defs.get(v.index()).copied().flatten() else {
                continue;
            };
            let stmt = &self.f.stmts[s];
            match stmt.op.element_call() {
                ElementCall::Libm => return Ok(Calls::Libm),
                ElementCall::Kernel if kernels_called => calls = Calls::Kernels,
                ElementCall::Kernel | ElementCall::None => {}
            }
            for &a in &stmt.args {
                if seen.insert(a) {
                    stack.push(a);
                }
            }
        }
        Ok(calls)
    }

    /// Element `i` of statement `root` computed in place, with every inlined
    /// statement under it, evaluated in statement order.
    pub(super) fn translate_tree(&mut self, root: VarId, i: ir::Value) -> Result<ir::Value, Error> {
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
}
