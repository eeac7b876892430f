//! Loop nests writing a buffer (`sumtail`, `maxtail`, `mintail`,
//! `sumlead`, `matmul`) and the calls of egrad's matrix kernels (GEMM,
//! row dot products and column sums) that replace them.

use super::vector;
use super::{cl_type, Read, Translator};
use crate::backend::jit::Libm;
use crate::error::Error;
use crate::ir::VarId;
use crate::ops::Op;
use crate::types::{DType, Dim, Type};
use cranelift_codegen::ir::{self, types, InstBuilder, MemFlagsData, StackSlotData, StackSlotKind};

impl<'a, 'b> Translator<'a, 'b> {
    /// A loop nest writing statement `s` (`sumlead`, `sumtail`, `matmul`)
    /// into buffer `k`. Sums run left to right from +0 in the dtype, like the
    /// interpreter; `matmul` is a chain of fused multiply-adds (or a call of
    /// the matrix kernel, which computes the same chain).
    pub(super) fn translate_nest(&mut self, s: usize, k: usize) -> Result<(), Error> {
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
            Op::Scatter(site) => {
                // Zeros, then row vals[j] added at row idx[j] for each j in
                // order (checked; a failure is recorded and the row skipped).
                let vals = *stmt
                    .args
                    .get(1)
                    .ok_or_else(|| Error::internal("backend: `scatter` without rows"))?;
                let out = self.f.ty(stmt.var).clone();
                let len = self.translate_len(out.clone())?;
                self.translate_fill_zero(dtype, base, len)?;
                let rows = self.translate_len(Type::array(dtype, vec![out.shape[0].clone()]))?;
                let row = self.translate_len(Type::array(
                    dtype,
                    out.shape.get(1..).unwrap_or(&[]).to_vec(),
                ))?;
                let n = self.translate_len(at.clone())?;
                // Indices that provably lie inside need no check.
                let safe = super::range::within(self.f, self.defs, a, &out.shape[0]);
                self.translate_loop(n, &mut |t, j| {
                    let k = t.translate_elem(a, j)?;
                    let mut add_row = |t: &mut Self| {
                        let start = t.b.ins().imul(k, row);
                        let from = t.b.ins().imul(j, row);
                        t.translate_loop(row, &mut |t, c| {
                            let at = t.b.ins().iadd(start, c);
                            let src = t.b.ins().iadd(from, c);
                            let x = t.translate_elem(vals, src)?;
                            let addr = t.translate_addr(dtype, base, at);
                            let flags = cranelift_codegen::ir::MemFlagsData::trusted();
                            let y = t.b.ins().load(cl_type(dtype), flags, addr, 0);
                            let sum = t.translate_op(Op::Add, dtype, &[y, x])?;
                            t.b.ins().store(flags, sum, addr, 0);
                            Ok(())
                        })?;
                        Ok(t.b.ins().iconst(types::I64, 0))
                    };
                    if safe {
                        add_row(t)?;
                    } else {
                        t.translate_checked_row(site, k, rows, types::I64, &mut add_row)?;
                    }
                    Ok(())
                })
            }
            Op::MatMul => self.translate_matmul(&stmt.args, a, &at, dtype, base),
            Op::Kernel(id, n) => {
                let out = self.f.ty(stmt.var).clone();
                self.translate_kernel(id, (&stmt.args, n as usize), base, &out)
            }
            other => Err(Error::internal(format!(
                "backend: `{}` is not a loop nest",
                other.name()
            ))),
        }
    }

    /// `matmul` of `a` (of type `at`) by the second operand into `base`:
    /// a call of the matrix kernel where both operands allow it, otherwise
    /// each row's columns as chains of fused multiply-adds.
    fn translate_matmul(
        &mut self,
        args: &[VarId],
        a: VarId,
        at: &Type,
        dtype: DType,
        base: ir::Value,
    ) -> Result<(), Error> {
        let b = *args
            .get(1)
            .ok_or_else(|| Error::internal("backend: `matmul` needs two operands"))?;
        let bt = self.f.ty(b).clone();
        let dim =
            |t: &Type, i: usize| Type::array(dtype, t.shape.get(i).cloned().into_iter().collect());
        let m = self.translate_len(dim(at, 0))?;
        let kk = self.translate_len(dim(at, 1))?;
        let n = self.translate_len(dim(&bt, 1))?;
        // An operand that is an inlined `transpose c` is read from
        // `c` at the swapped index (no division per element); the
        // same elements in the same order, so the same result.
        let (a_t, b_t) = (self.inlined_transpose(a), self.inlined_transpose(b));
        if self.gemm {
            let ops = (self.strided_view(a)?, self.strided_view(b)?);
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

    /// A native kernel's call ([`crate::ops::kernels`]): its operands'
    /// buffers and element counts in two tables on the stack, the result
    /// written to `base` by `egrad_kernel_call`.
    fn translate_kernel(
        &mut self,
        id: u32,
        (args, n): (&[VarId], usize),
        base: ir::Value,
        out: &Type,
    ) -> Result<(), Error> {
        if args.len() != n || out.dtype != DType::F64 {
            return Err(Error::internal("backend: a kernel call of the wrong shape"));
        }
        let size = u32::try_from(8 * n.max(1))
            .map_err(|_| Error::internal("backend: too many kernel arguments"))?;
        let mut table = || {
            self.b
                .create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, size, 3))
        };
        let (ptrs, lens) = (table(), table());
        let ptrs = self.b.ins().stack_addr(types::I64, ptrs, 0);
        let lens = self.b.ins().stack_addr(types::I64, lens, 0);
        for (i, &a) in args.iter().enumerate() {
            let Read::Buf(k) = self.read(a)? else {
                return Err(Error::internal(
                    "backend: a kernel's operand is not in memory",
                ));
            };
            let p = self.buf(k)?;
            let len = self.translate_len(self.f.ty(a).clone())?;
            let off = i32::try_from(8 * i)
                .map_err(|_| Error::internal("backend: too many kernel arguments"))?;
            self.b.ins().store(MemFlagsData::trusted(), p, ptrs, off);
            self.b.ins().store(MemFlagsData::trusted(), len, lens, off);
        }
        let out_len = self.translate_len(out.clone())?;
        let id = self.b.ins().iconst(types::I64, i64::from(id));
        let n = self.b.ins().iconst(types::I64, n as i64);
        let call = self.libm_ref(Libm::Kernel, DType::F64);
        self.b.ins().call(call, &[id, n, ptrs, lens, base, out_len]);
        Ok(())
    }

    /// Element `(r, c)` of the matrix `v` of `dims = (rows, columns)`, or,
    /// when `v` is an inlined `transpose src`, element `(c, r)` of `src`.
    pub(super) fn translate_matrix_elem(
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

    /// A matmul operand as a GEMM kernel reads it: (address, row stride,
    /// column stride), strides in elements, when it is a matrix in memory
    /// or a view of one (`transpose`, `slice`, `reverse`, inlined: see
    /// `plan::view_only`), read in place.
    fn strided_view(
        &mut self,
        v: VarId,
    ) -> Result<Option<(ir::Value, ir::Value, ir::Value)>, Error> {
        // The views from `v` down to the matrix in memory.
        let mut chain = Vec::new();
        let mut at = v;
        let k = loop {
            match self.read(at)? {
                Read::Buf(k) if self.f.ty(at).rank() == 2 => break k,
                Read::Inline => {
                    let Some(s) = self.defs.get(at.index()).copied().flatten() else {
                        return Ok(None);
                    };
                    let st = &self.f.stmts[s];
                    if !super::is_matrix_view(st.op)
                        || st.args.len() != 1
                        || self.f.ty(st.args[0]).rank() != 2
                    {
                        return Ok(None);
                    }
                    chain.push(s);
                    at = st.args[0];
                }
                _ => return Ok(None),
            }
        };
        let ty = self.f.ty(at).clone();
        let elem = i64::from(cl_type(ty.dtype).bytes());
        let mut ptr = self.buf(k)?;
        let mut rs = self.translate_len(Type::array(ty.dtype, ty.shape[1..].to_vec()))?;
        let mut cs = self.b.ins().iconst(types::I64, 1);
        // From the matrix up to `v`: each view moves the first element
        // and changes the strides.
        for &s in chain.iter().rev() {
            let st = &self.f.stmts[s];
            match st.op {
                Op::Transpose => std::mem::swap(&mut rs, &mut cs),
                Op::Slice(c) => {
                    let c = i64::try_from(c)
                        .map_err(|_| Error::internal("backend: a slice start overflows"))?;
                    let by = self.b.ins().imul_imm_s(rs, c * elem);
                    ptr = self.b.ins().iadd(ptr, by);
                }
                _ => {
                    // `reverse`: row `r` is the operand's row `rows - 1 - r`.
                    let at = self.f.ty(st.args[0]);
                    let rows = self.translate_len(Type::array(at.dtype, at.shape[..1].to_vec()))?;
                    let last = self.b.ins().iadd_imm_s(rows, -1);
                    let by = self.b.ins().imul(last, rs);
                    let by = self.b.ins().imul_imm_s(by, elem);
                    ptr = self.b.ins().iadd(ptr, by);
                    rs = self.b.ins().ineg(rs);
                }
            }
        }
        Ok(Some((ptr, rs, cs)))
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

    /// `len` zeros of `dtype` at `base`.
    pub(super) fn translate_fill_zero(
        &mut self,
        dtype: DType,
        base: ir::Value,
        len: ir::Value,
    ) -> Result<(), Error> {
        self.translate_loop(len, &mut |t, i| {
            let zero = t.translate_op(Op::Zero, dtype, &[])?;
            t.translate_store(dtype, base, i, zero);
            Ok(())
        })
    }
}
