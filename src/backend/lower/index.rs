//! Index maps (`slice`, `index`, `pad`, `unindex`, `repeat`, `spread`,
//! `transpose`, `reverse`, `reshape`) and the row context of row reductions, which
//! spares their divisions.

use super::{access, cl_type, Access, Read, RowCtx, Translator};
use crate::error::Error;
use crate::ir::VarId;
use crate::ops::Op;
use crate::types::size::Size;
use crate::types::{DType, Type};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{self, types, InstBuilder, MemFlagsData};

/// How many instructions down [`Translator::known`] looks: an index the
/// lowering computed from constants is a few deep.
const KNOWN_DEPTH: u32 = 64;

/// No value native code computes or reads has this many elements: a
/// run whose sizes make one is refused before it starts (the element
/// indices below it divide by a run-time size exactly through `f64`, see
/// [`Translator::div_index`]). 2^50 elements: 8 PiB of `f64`, and 10^15
/// element operations to compute, 100 times the default work limit.
pub(crate) const MAX_NATIVE_ELEMENTS: u64 = 1 << 50;

/// 2^52 as an `f64`: adding it to a number in `[0, 2^51)` rounds that
/// number to an integer held in the low bits of the sum.
const TWO_52: f64 = 4_503_599_627_370_496.0;

impl<'a, 'b> Translator<'a, 'b> {
    /// The value of `v` when it is an integer constant (`iconst`, or an
    /// `imul`/`iadd`/`isub` of known values; the `_imm` builders emit an
    /// `iconst` and the plain instruction) at this point of the lowering.
    fn known(&self, v: ir::Value) -> Option<i64> {
        self.known_within(v, KNOWN_DEPTH)
    }

    /// `(i / d, i % d)` for an element index `i` and a size `d`
    /// (unsigned; `d` is not 0 wherever an element `i` exists). A literal
    /// `d` divides as written (Cranelift multiplies by its inverse). A
    /// size known only at run time would be a hardware division, tens of
    /// cycles (and one more for the remainder); instead the quotient is
    /// `i` times `d`'s reciprocal in `f64`, rounded to an integer, which
    /// is `q` or `q + 1` (for `i` below [`MAX_NATIVE_ELEMENTS`], the
    /// product is within a quarter of `i / d`), and corrected once: exact,
    /// a few cycles, no branch (a branch to a hardware division for larger
    /// indices, in every element tree, made GradBench `ht`'s Jacobian 1.5
    /// times slower). The JIT's code is never run with larger indices: a
    /// value of so many elements is refused before the run (see
    /// `Plan::shapes`). An object file's, which C calls without that
    /// check, divides in hardware.
    pub(super) fn div_index(
        &mut self,
        i: ir::Value,
        d: ir::Value,
    ) -> Result<(ir::Value, ir::Value), Error> {
        if self.known(d).is_some() || !self.plan.checked {
            return Ok((self.b.ins().udiv(i, d), self.b.ins().urem(i, d)));
        }
        let fi = self.b.ins().fcvt_from_sint(types::F64, i);
        let fd = self.b.ins().fcvt_from_sint(types::F64, d);
        let one = self.b.ins().f64const(1.0);
        let inv = self.b.ins().fdiv(one, fd);
        let p = self.b.ins().fmul(fi, inv);
        // p + 2^52 holds p rounded to an integer in its low bits.
        let shift = self.b.ins().f64const(TWO_52);
        let rounded = self.b.ins().fadd(p, shift);
        let bits = self
            .b
            .ins()
            .bitcast(types::I64, MemFlagsData::new(), rounded);
        let q0 = self.b.ins().iadd_imm_s(bits, -(TWO_52.to_bits() as i64));
        let qd = self.b.ins().imul(q0, d);
        let r0 = self.b.ins().isub(i, qd);
        let over = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, r0, 0);
        let q1 = self.b.ins().iadd_imm_s(q0, -1);
        let q = self.b.ins().select(over, q1, q0);
        let qd = self.b.ins().imul(q, d);
        Ok((q, self.b.ins().isub(i, qd)))
    }

    /// [`Self::known`], looking at most `depth` instructions down (a
    /// chain of integer arithmetic as long as the program is would
    /// otherwise be walked recursively).
    fn known_within(&self, v: ir::Value, depth: u32) -> Option<i64> {
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
            InstructionData::Binary { opcode, args }
                if depth > 0 && matches!(opcode, Opcode::Imul | Opcode::Iadd | Opcode::Isub) =>
            {
                let a = self.known_within(args[0], depth - 1)?;
                let b = self.known_within(args[1], depth - 1)?;
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
    pub(super) fn row_ctx(&self, start: ir::Value, index: ir::Value, a: &Type) -> Option<RowCtx> {
        Some(RowCtx {
            start,
            index,
            tail: a.shape.get(1..)?.to_vec(),
        })
    }

    /// `body` with the row context `row` and no known shift (an index
    /// map's operand is computed at another index); both restored after.
    pub(super) fn within_row<T>(
        &mut self,
        row: Option<RowCtx>,
        body: &mut dyn FnMut(&mut Self) -> Result<T, Error>,
    ) -> Result<T, Error> {
        self.within_shift(row, None, body)
    }

    /// `body` with the row context `row` and the shift `shift` (see
    /// [`Translator::shift`]); both restored after.
    pub(super) fn within_shift<T>(
        &mut self,
        row: Option<RowCtx>,
        shift: Option<Size>,
        body: &mut dyn FnMut(&mut Self) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let outer = std::mem::replace(&mut self.row, row);
        let outer_shift = std::mem::replace(&mut self.shift, shift);
        let out = body(self);
        self.row = outer;
        self.shift = outer_shift;
        out
    }

    /// The shift of the operand of row shift `s` (`slice`, `index`, `pad`,
    /// `unindex`, `reshape`) computed at shift `shift`: plus the elements
    /// of the offset the shift adds. `None` for other ops.
    pub(super) fn operand_shift(&self, s: usize, shift: Option<&Size>) -> Option<Size> {
        let stmt = &self.f.stmts[s];
        let shift = shift?;
        let by =
            |c: u64, ty: &Type| Size::product(ty.shape.get(1..)?)?.scale(i64::try_from(c).ok()?);
        match stmt.op {
            Op::Reshape => Some(shift.clone()),
            Op::Slice(c) | Op::Index(c) => shift.add(&by(c, self.f.ty(*stmt.args.first()?))?),
            Op::Pad(c) | Op::Unindex(c) => shift.sub(&by(c, self.f.ty(stmt.var))?),
            _ => None,
        }
    }

    /// Where `pad`/`unindex` statement `s` puts its operand: the first
    /// element it covers and the operand's length.
    pub(super) fn pad_range(&mut self, s: usize) -> Result<(ir::Value, ir::Value), Error> {
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
    pub(super) fn row_read(&mut self, s: usize, i: ir::Value) -> Option<ir::Value> {
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
    pub(super) fn shifted_row(&mut self, s: usize) -> Option<RowCtx> {
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
    pub(super) fn rows_help(&self, root: VarId, ty: &Type) -> Result<bool, Error> {
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
                // Each row one row of the operand (`translate_index_map`).
                Op::Gather(_)
                    if stmt.args.get(1).is_some_and(|&k| self.f.ty(k).rank() == 1)
                        && out.get(1..) == Some(tail) =>
                {
                    return Ok(true)
                }
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

    /// Element `i` of an index map that reads no element of an operand:
    /// `iota` (element i is i; a vector, no row context applies) and `dim`
    /// (a size: the operand's shape). None for the others.
    fn translate_no_operand(
        &mut self,
        stmt: &crate::ir::Stmt,
        i: ir::Value,
    ) -> Result<Option<ir::Value>, Error> {
        match (stmt.op, stmt.args.first()) {
            (Op::Iota, _) => Ok(Some(i)),
            (Op::Dim(k), Some(&a)) => {
                let d = self.f.ty(a).shape.get(k as usize).cloned().ok_or_else(|| {
                    Error::internal("backend: `dim` of an axis its operand does not have")
                })?;
                self.translate_len(Type::array(DType::I64, vec![d]))
                    .map(Some)
            }
            _ => Ok(None),
        }
    }

    /// Element `i` of an index-map statement: one element of its operand
    /// (read as a leaf) at a computed index, or zero outside `pad` and
    /// `unindex`'s rows. Never reads outside the operand.
    pub(super) fn translate_index_map(
        &mut self,
        s: usize,
        i: ir::Value,
    ) -> Result<ir::Value, Error> {
        let stmt = self.f.stmts[s].clone();
        if let Some(x) = self.translate_no_operand(&stmt, i)? {
            return Ok(x);
        }
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
            // Row-major in both shapes: element i is element i. Its rows
            // are not the operand's, so no row context goes in.
            Op::Reshape => self.within_row(None, &mut |t| t.translate_elem(a, i)),
            Op::Repeat | Op::Spread | Op::Transpose if self.row.is_some() => {
                match self.row_read(s, i) {
                    Some(j) => self.within_row(None, &mut |t| t.translate_elem(a, j)),
                    None => self.within_row(None, &mut |t| t.translate_index_map(s, i)),
                }
            }
            Op::Repeat => {
                let row = self.translate_len(at.clone())?;
                let (_, j) = self.div_index(i, row)?;
                self.translate_leaf(a, j)
            }
            Op::Spread => {
                let row = self.translate_len(tail(&out))?;
                let (j, _) = self.div_index(i, row)?;
                self.translate_leaf(a, j)
            }
            Op::Transpose => {
                // Result [N, M] from [M, N]: i = r * M + c reads c * N + r.
                let m = self.translate_len(Type::array(dtype, vec![out.shape[1].clone()]))?;
                let nn = self.translate_len(Type::array(dtype, vec![out.shape[0].clone()]))?;
                let (r, c) = self.div_index(i, m)?;
                let cn = self.b.ins().imul(c, nn);
                let j = self.b.ins().iadd(cn, r);
                // An index map under it is computed at `j` (`plan::composes`).
                self.within_row(None, &mut |t| t.translate_elem(a, j))
            }
            Op::Reverse => {
                // Same shape [L, s..]: i = r * row + c reads (L-1-r) * row + c,
                // that is n - row - r * row + c with n = L * row. Since
                // i < n, r <= L-1: never outside the operand (and nothing is
                // read when L or row is 0, as then there is no element i).
                let n = self.translate_len(at.clone())?;
                if at.rank() == 1 {
                    // A vector: element i reads L-1-i (of a `pad` or a
                    // `reverse` computed in place: see `Plan::needs`).
                    let last = self.b.ins().iadd_imm_s(n, -1);
                    let j = self.b.ins().isub(last, i);
                    return self.within_row(None, &mut |t| t.translate_elem(a, j));
                }
                let row = self.translate_len(tail(&at))?;
                let (r, c) = self.div_index(i, row)?;
                let rr = self.b.ins().imul(r, row);
                let top = self.b.ins().isub(n, row);
                let base = self.b.ins().isub(top, rr);
                let j = self.b.ins().iadd(base, c);
                self.translate_leaf(a, j)
            }
            Op::Gather(site) => {
                // Element i = j * row + c reads row idx[j] of the operand,
                // checked to be a row (a failure is recorded, 0 read).
                let idx = *stmt
                    .args
                    .get(1)
                    .ok_or_else(|| Error::internal("backend: `gather` without indices"))?;
                let row = self.translate_len(tail(&at))?;
                let rows = self.translate_len(Type::array(dtype, vec![at.shape[0].clone()]))?;
                // In a row context of the result's rows, when each of them
                // is one row gathered (a vector of indices), row `index`
                // and column `i - start` without dividing.
                let in_rows = self.row.clone().filter(|ctx| {
                    self.f.ty(idx).rank() == 1
                        && self.f.ty(stmt.var).shape.get(1..) == Some(&ctx.tail[..])
                });
                let (j, c) = match (in_rows, self.known(row)) {
                    (_, Some(1)) => (i, self.b.ins().iconst(types::I64, 0)),
                    // One row (a scalar index): element i is its column i.
                    _ if self.f.ty(idx).is_scalar() => (self.b.ins().iconst(types::I64, 0), i),
                    (Some(ctx), _) => (ctx.index, self.b.ins().isub(i, ctx.start)),
                    _ => self.div_index(i, row)?,
                };
                // The indices' own elements, outside any row context.
                let k = self.within_row(None, &mut |t| t.translate_elem(idx, j))?;
                let mut read = |t: &mut Self| {
                    let kr = t.b.ins().imul(k, row);
                    let jj = t.b.ins().iadd(kr, c);
                    t.within_row(None, &mut |t| t.translate_elem(a, jj))
                };
                // Indices that provably lie inside need no check.
                if super::range::within(self.f, self.defs, idx, &at.shape[0]) {
                    return read(self);
                }
                self.translate_checked_row(site, k, rows, cl_type(dtype), &mut read)
            }
            other => Err(Error::internal(format!(
                "backend: `{}` is not an index map",
                other.name()
            ))),
        }
    }

    /// Statement `s`, when it is a live `gather` whose indices may lie
    /// outside: every index checked where the statement stands, in order,
    /// as the interpreter checks them. Its consumers read only some of its
    /// elements (none when its rows are empty), each checked again there,
    /// so without this an index out of range that no element read went
    /// unreported.
    pub(super) fn translate_gather_check(&mut self, s: usize) -> Result<(), Error> {
        let stmt = &self.f.stmts[s];
        let Op::Gather(site) = stmt.op else {
            return Ok(());
        };
        if self.read(stmt.var)? == Read::Dead {
            return Ok(());
        }
        let (Some(&a), Some(&idx)) = (stmt.args.first(), stmt.args.get(1)) else {
            return Err(Error::internal("backend: `gather` without its operands"));
        };
        let at = self.f.ty(a);
        let Some(n) = at.shape.first().cloned() else {
            return Err(Error::internal("backend: `gather` from a scalar"));
        };
        if super::range::within(self.f, self.defs, idx, &n) {
            return Ok(());
        }
        let rows = self.translate_len(Type::array(DType::I64, vec![n]))?;
        let len = self.translate_len(self.f.ty(idx).clone())?;
        self.within_row(None, &mut |t| {
            t.translate_loop_until(len, &mut |t, j| {
                let k = t.translate_elem(idx, j)?;
                let outside = t.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, k, rows);
                t.translate_if(
                    outside,
                    types::I64,
                    &mut |t| {
                        t.translate_check_failed(site, k, rows)?;
                        Ok(t.b.ins().iconst(types::I64, 1))
                    },
                    &mut |t| Ok(t.b.ins().iconst(types::I64, 0)),
                )
            })
        })
    }

    /// `read()` if `0 <= k < rows`; else the failure of the check at source
    /// offset `site` is recorded (see [`super::STATUS_SLOTS`]) and the
    /// result is zero: nothing outside an array is ever read or written.
    pub(super) fn translate_checked_row(
        &mut self,
        site: u64,
        k: ir::Value,
        rows: ir::Value,
        ty: ir::Type,
        read: &mut dyn FnMut(&mut Self) -> Result<ir::Value, Error>,
    ) -> Result<ir::Value, Error> {
        let inside = self.b.ins().icmp(IntCC::UnsignedLessThan, k, rows);
        self.translate_if(inside, ty, read, &mut |t| {
            t.translate_check_failed(site, k, rows)?;
            Ok(if ty == types::I64 {
                t.b.ins().iconst(types::I64, 0)
            } else if ty == types::F32 {
                t.b.ins().f32const(0.0)
            } else {
                t.b.ins().f64const(0.0)
            })
        })
    }

    /// Record a failed check (the first one is kept): the source offset
    /// plus one, the index and the length, in the status slots before
    /// `dims`.
    pub(super) fn translate_check_failed(
        &mut self,
        site: u64,
        k: ir::Value,
        rows: ir::Value,
    ) -> Result<(), Error> {
        let dims = self
            .dims_ptr
            .ok_or_else(|| Error::internal("backend: a check before the entry block"))?;
        let site =
            i64::try_from(site + 1).map_err(|_| Error::internal("backend: site overflows"))?;
        let flags = cranelift_codegen::ir::MemFlagsData::trusted();
        let slot = |n: usize| -8 * (super::STATUS_SLOTS - n) as i32;
        let old = self.b.ins().load(types::I64, flags, dims, slot(0));
        let first = self.b.ins().icmp_imm_s(IntCC::Equal, old, 0);
        let site = self.b.ins().iconst(types::I64, site);
        let old_k = self.b.ins().load(types::I64, flags, dims, slot(1));
        let old_n = self.b.ins().load(types::I64, flags, dims, slot(2));
        let new_site = self.b.ins().select(first, site, old);
        let new_k = self.b.ins().select(first, k, old_k);
        let new_n = self.b.ins().select(first, rows, old_n);
        self.b.ins().store(flags, new_site, dims, slot(0));
        self.b.ins().store(flags, new_k, dims, slot(1));
        self.b.ins().store(flags, new_n, dims, slot(2));
        Ok(())
    }

    /// `i` plus `c` rows of `a` (`slice` and `index` read element `i` of
    /// their result there).
    pub(super) fn row_offset(
        &mut self,
        a: VarId,
        c: u64,
        i: ir::Value,
    ) -> Result<ir::Value, Error> {
        let at = self.f.ty(a);
        let row = Type::array(at.dtype, at.shape.get(1..).unwrap_or(&[]).to_vec());
        let row = self.translate_len(row)?;
        let c = i64::try_from(c).map_err(|_| Error::internal("backend: row overflows"))?;
        let off = self.b.ins().imul_imm_s(row, c);
        Ok(self.b.ins().iadd(i, off))
    }
}

#[cfg(test)]
mod tests {
    use super::{MAX_NATIVE_ELEMENTS, TWO_52};

    /// The quotient [`super::Translator::div_index`] emits code for, in
    /// the same IEEE operations.
    fn quotient(i: i64, d: i64) -> i64 {
        let p = (i as f64) * (1.0 / d as f64);
        let q0 = ((p + TWO_52).to_bits() as i64) - TWO_52.to_bits() as i64;
        if i - q0 * d < 0 {
            q0 - 1
        } else {
            q0
        }
    }

    /// Exact at multiples of the divisor and their neighbours, next to the
    /// bound, and at a million pseudo-random pairs.
    #[test]
    fn reciprocal_quotients_are_exact_below_the_bound() {
        let top = MAX_NATIVE_ELEMENTS as i64 - 1;
        let ds = [
            1,
            2,
            3,
            5,
            7,
            10,
            1000,
            4097,
            (1 << 20) + 1,
            (1 << 25) - 1,
            1 << 30,
            (1 << 40) - 3,
            1 << 49,
            top,
            1 << 52,
            i64::MAX,
        ];
        let check = |i: i64, d: i64| {
            if (0..=top).contains(&i) {
                assert_eq!(quotient(i, d), i / d, "{i} / {d}");
            }
        };
        for d in ds {
            for k in [0, 1, 2, 3, 1000, top / d - 1, top / d, top / d + 1] {
                for off in [-1, 0, 1] {
                    if let Some(i) = k.checked_mul(d).and_then(|i| i.checked_add(off)) {
                        check(i, d);
                    }
                }
            }
            for back in 0..1000 {
                check(top - back, d);
            }
        }
        let mut s: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        for _ in 0..1_000_000 {
            let i = (next() % MAX_NATIVE_ELEMENTS) as i64;
            // Divisors of every magnitude, up to 2^63 - 1.
            let d = (next() >> (1 + next() % 63)).max(1) as i64;
            check(i, d);
        }
    }
}
