//! Code-building helpers shared by the whole lowering: counted loops,
//! `if`, element counts, addresses and stores.

use super::{log2_bytes, Translator};
use crate::error::Error;
use crate::types::size::Size;
use crate::types::{DType, Dim, Type};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{self, types, InstBuilder, MemFlagsData};

/// What a step of a counted loop gives: a flag that ends the loop when it
/// is not 0, if the loop can end early.
type StepExit = Result<Option<ir::Value>, Error>;

impl<'a, 'b> Translator<'a, 'b> {
    /// `if cond { yes } else { no }`, a value of type `ty`; leaves the
    /// builder after both.
    pub(super) fn translate_if(
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

    /// `for i in 0..len { body(i) }`; leaves the builder after the loop.
    pub(super) fn translate_loop(
        &mut self,
        len: ir::Value,
        body: &mut dyn FnMut(&mut Self, ir::Value) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let zero = self.b.ins().iconst(types::I64, 0);
        self.translate_range(zero, len, 1, body)
    }

    /// `for i in (start..end).step_by(step) { body(i) }`, for `end - start`
    /// a multiple of `step` (or `step` 1); leaves the builder after the loop.
    pub(super) fn translate_range(
        &mut self,
        start: ir::Value,
        end: ir::Value,
        step: i64,
        body: &mut dyn FnMut(&mut Self, ir::Value) -> Result<(), Error>,
    ) -> Result<(), Error> {
        self.translate_counted(start, end, step, &mut |t, i| body(t, i).map(|()| None))
    }

    /// Elements `0 .. len` in segments that end at `len` and at each of
    /// `bounds` (signed; those outside `0 .. len` ignored): in a segment,
    /// `vector(i, inside)` for elements `i .. i + w` while they fit (from
    /// a multiple of `w`: a segment that starts elsewhere runs the scalar
    /// code up to one first), then `scalar(i)` for each element left. With `ranges` (each `first ..
    /// end`, between bounds), `inside` is true in a segment that lies in
    /// all of them (a second copy of the vector body), else false. Leaves
    /// the builder after the loop.
    pub(super) fn translate_segments(
        &mut self,
        (bounds, ranges): (&[ir::Value], &[(ir::Value, ir::Value)]),
        len: ir::Value,
        w: i64,
        vector: &mut dyn FnMut(&mut Self, ir::Value, bool) -> Result<(), Error>,
        scalar: &mut dyn FnMut(&mut Self, ir::Value) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let i = self.b.declare_var(types::I64);
        let zero = self.b.ins().iconst(types::I64, 0);
        self.b.def_var(i, zero);
        let header = self.b.create_block();
        let segment = self.b.create_block();
        let exit = self.b.create_block();
        self.b.ins().jump(header, &[]);

        self.b.switch_to_block(header);
        let from = self.b.use_var(i);
        let more = self.b.ins().icmp(IntCC::UnsignedLessThan, from, len);
        self.b.ins().brif(more, segment, &[], exit, &[]);

        self.b.switch_to_block(segment);
        // The segment ends at the first bound after `from`, or at `len`.
        let mut to = len;
        for &b in bounds {
            let later = self.b.ins().icmp(IntCC::SignedGreaterThan, b, from);
            let end = self.b.ins().select(later, b, len);
            to = self.b.ins().smin(to, end);
        }
        // Vectors from an aligned `from` (a multiple of `w`, as a loop with
        // no pads stores them); from another, the scalar code up to the
        // next multiple, and a new segment there.
        let span = self.b.ins().isub(to, from);
        let whole = self.b.ins().band_imm_s(span, -w);
        let vectors_end = self.b.ins().iadd(from, whole);
        let misaligned = self.b.ins().band_imm_s(from, w - 1);
        let aligned = self.b.ins().icmp_imm_s(IntCC::Equal, misaligned, 0);
        let split = self.b.ins().select(aligned, vectors_end, from);
        let up = self.b.ins().iadd_imm_s(from, w - 1);
        let up = self.b.ins().band_imm_s(up, -w);
        let up = self.b.ins().smin(up, to);
        let to = self.b.ins().select(aligned, to, up);
        if ranges.is_empty() {
            self.translate_range(from, split, w, &mut |t, i| vector(t, i, false))?;
        } else {
            // No bound lies inside the segment: it is in a range when its
            // first element is.
            let mut all = self.b.ins().iconst(types::I8, 1);
            for &(first, end) in ranges {
                let after = self.b.ins().icmp(IntCC::SignedLessThanOrEqual, first, from);
                let before = self.b.ins().icmp(IntCC::SignedLessThan, from, end);
                let both = self.b.ins().band(after, before);
                all = self.b.ins().band(all, both);
            }
            let (inside, outside, join) = (
                self.b.create_block(),
                self.b.create_block(),
                self.b.create_block(),
            );
            self.b.ins().brif(all, inside, &[], outside, &[]);
            for (block, flag) in [(inside, true), (outside, false)] {
                self.b.switch_to_block(block);
                self.b.seal_block(block);
                self.translate_range(from, split, w, &mut |t, i| vector(t, i, flag))?;
                self.b.ins().jump(join, &[]);
            }
            self.b.switch_to_block(join);
            self.b.seal_block(join);
        }
        self.translate_range(split, to, 1, scalar)?;
        self.b.def_var(i, to);
        self.b.ins().jump(header, &[]);

        self.b.switch_to_block(exit);
        Ok(())
    }

    /// `for i in 0..len { if body(i) != 0 { break } }`: `body` returns
    /// an `i64` flag that ends the loop early; leaves the builder after
    /// the loop.
    pub(super) fn translate_loop_until(
        &mut self,
        len: ir::Value,
        body: &mut dyn FnMut(&mut Self, ir::Value) -> Result<ir::Value, Error>,
    ) -> Result<(), Error> {
        let zero = self.b.ins().iconst(types::I64, 0);
        self.translate_counted(zero, len, 1, &mut |t, i| body(t, i).map(Some))
    }

    /// The counted loop of [`Self::translate_range`]; a body that returns
    /// a flag leaves the loop when it is not 0.
    fn translate_counted(
        &mut self,
        start: ir::Value,
        end: ir::Value,
        step: i64,
        body: &mut dyn FnMut(&mut Self, ir::Value) -> StepExit,
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
        let stop = body(self, iv)?;
        let next = self.b.ins().iadd_imm_s(iv, step);
        self.b.def_var(i, next);
        match stop {
            Some(stop) => self.b.ins().brif(stop, exit, &[], header, &[]),
            None => self.b.ins().jump(header, &[]),
        };

        self.b.switch_to_block(exit);
        Ok(())
    }

    /// The value of a size expression under the bound size parameters.
    pub(super) fn translate_size(&mut self, size: &Size) -> Result<ir::Value, Error> {
        let mut sum = self.b.ins().iconst(types::I64, 0);
        for (coef, params) in size.terms() {
            let mut term = self.b.ins().iconst(types::I64, coef);
            for p in params {
                let v = self.size_param(p)?;
                term = self.b.ins().imul(term, v);
            }
            sum = self.b.ins().iadd(sum, term);
        }
        Ok(sum)
    }

    /// The value of size parameter `p` (loaded from `dims`).
    fn size_param(&self, p: &str) -> Result<ir::Value, Error> {
        let idx = self
            .f
            .size_params
            .iter()
            .position(|q| q == p)
            .ok_or_else(|| Error::internal(format!("backend: unknown size parameter {p}")))?;
        Ok(self.dims[idx])
    }

    /// Number of elements of `ty`: the product of its dims (literal or
    /// loaded from `dims`).
    pub(super) fn translate_len(&mut self, ty: Type) -> Result<ir::Value, Error> {
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
                    let mut dv = self.size_param(p)?;
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
                Dim::Expr(s) => {
                    // Σ c · Π p, in wrapping i64 arithmetic: the value is
                    // non-negative and fits (checked when the sizes were
                    // bound), so the wrapped intermediate sums give it.
                    let mut sum: Option<ir::Value> = None;
                    for (c, ps) in s.terms() {
                        let mut t: Option<ir::Value> = None;
                        for p in ps {
                            let v = self.size_param(p)?;
                            t = Some(match t {
                                Some(t) => self.b.ins().imul(t, v),
                                None => v,
                            });
                        }
                        let t = match t {
                            Some(t) if c == 1 => t,
                            Some(t) => self.b.ins().imul_imm_s(t, c),
                            None => self.b.ins().iconst(types::I64, c),
                        };
                        sum = Some(match sum {
                            Some(acc) => self.b.ins().iadd(acc, t),
                            None => t,
                        });
                    }
                    let dv = match sum {
                        Some(v) => v,
                        None => self.b.ins().iconst(types::I64, 0),
                    };
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

    pub(super) fn translate_addr(
        &mut self,
        dtype: DType,
        base: ir::Value,
        i: ir::Value,
    ) -> ir::Value {
        let off = self.b.ins().ishl_imm_u(i, log2_bytes(dtype));
        self.b.ins().iadd(base, off)
    }

    pub(super) fn translate_store(
        &mut self,
        dtype: DType,
        base: ir::Value,
        i: ir::Value,
        x: ir::Value,
    ) {
        let addr = self.translate_addr(dtype, base, i);
        self.b.ins().store(MemFlagsData::trusted(), x, addr, 0);
    }
}
