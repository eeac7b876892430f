//! The per-op lowering (one exhaustive `match` over `Op`) and the calls it
//! makes: libm imports and egrad's vector math kernels.

use super::vmath_clif;
use super::{cl_type, Import, Translator, INLINE_KERNELS};
use crate::backend::jit::Libm;
use crate::error::Error;
use crate::ops::math::Inst;
use crate::ops::{Native, Op};
use crate::types::DType;
use crate::vmath::VFn;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{self, types, FuncRef, InstBuilder};

impl<'a, 'b> Translator<'a, 'b> {
    /// The op on element (or scalar) operands; the arithmetic arms serve
    /// vector operands too ([`Translator::translate_vop`]). Reductions are
    /// lowered by [`Translator::translate_fold`] with their step op, never
    /// here; for `bcast` the operand is the scalar itself.
    pub(super) fn translate_op(
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
        if dtype.is_int() {
            return self.translate_int_op(op, args);
        }
        Ok(match op {
            Op::Convert(d) => self.translate_convert(d, arg(0)?),
            Op::Rem | Op::Threefry0 | Op::Threefry1 => {
                return Err(Error::internal(format!(
                    "backend: `{}` of floating-point operands",
                    op.name()
                )))
            }
            Op::Const(l) => self.translate_const(l.dtype, l.value()),
            Op::Zero => self.translate_const(dtype, 0.0),
            Op::Add => self.b.ins().fadd(arg(0)?, arg(1)?),
            Op::Sub => self.b.ins().fsub(arg(0)?, arg(1)?),
            Op::Mul => self.b.ins().fmul(arg(0)?, arg(1)?),
            Op::Div => self.b.ins().fdiv(arg(0)?, arg(1)?),
            Op::Neg => self.b.ins().fneg(arg(0)?),
            Op::Math(m) => match m.native() {
                Native::Inst(Inst::Sqrt) => self.b.ins().sqrt(arg(0)?),
                Native::Inst(Inst::Abs) => self.b.ins().fabs(arg(0)?),
                Native::Kernel(f) => self.translate_vmath(f, dtype, cl_type(dtype), arg(0)?)?,
                Native::CLib { .. } => self.translate_libcall(Libm::Math(m), dtype, arg(0)?),
            },
            Op::Pow => self.translate_libcall2(Libm::Pow, dtype, arg(0)?, arg(1)?),
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
            | Op::Reshape
            | Op::Gather(_)
            | Op::Scatter(_)
            | Op::Iota
            | Op::Dim(_)
            | Op::SumLead
            | Op::SumTail
            | Op::MaxTail
            | Op::MinTail
            | Op::MatMul
            | Op::Loop(..)
            | Op::LoopTape(..)
            | Op::LoopVjp(..)
            | Op::Custom(..)
            | Op::Kernel(..) => {
                return Err(Error::internal(format!(
                    "backend: `{}` moves elements; it is lowered by its access pattern",
                    op.name()
                )))
            }
        })
    }

    pub(super) fn translate_const(&mut self, dtype: DType, x: f64) -> ir::Value {
        match dtype {
            DType::F32 => self.b.ins().f32const(x as f32),
            DType::F64 => self.b.ins().f64const(x),
            // Saturating, like the evaluator's conversion (`-inf`, the
            // identity of `maxall`, is the least `i64`).
            DType::I64 | DType::Bool => self.b.ins().iconst(types::I64, x as i64),
        }
    }

    /// The op on `i64` operands (see `ops::Real for i64`): `+ - *` wrap,
    /// `/` and `%` round toward minus infinity and give 0 for a zero
    /// divisor, comparisons give 1 or 0.
    fn translate_int_op(&mut self, op: Op, args: &[ir::Value]) -> Result<ir::Value, Error> {
        let arg = |k: usize| {
            args.get(k).copied().ok_or_else(|| {
                Error::internal(format!("backend: `{}` is missing operand {k}", op.name()))
            })
        };
        let cmp = |t: &mut Self, cc: IntCC| -> Result<ir::Value, Error> {
            let c = t.b.ins().icmp(cc, arg(0)?, arg(1)?);
            Ok(t.b.ins().uextend(types::I64, c))
        };
        Ok(match op {
            Op::Const(l) => self.translate_const(DType::I64, l.value()),
            Op::Zero => self.b.ins().iconst(types::I64, 0),
            Op::Add => self.b.ins().iadd(arg(0)?, arg(1)?),
            Op::Sub => self.b.ins().isub(arg(0)?, arg(1)?),
            Op::Mul => self.b.ins().imul(arg(0)?, arg(1)?),
            Op::Neg => self.b.ins().ineg(arg(0)?),
            Op::Math(m) if m.native() == Native::Inst(Inst::Abs) => self.b.ins().iabs(arg(0)?),
            Op::Max => self.b.ins().smax(arg(0)?, arg(1)?),
            Op::Min => self.b.ins().smin(arg(0)?, arg(1)?),
            Op::Div | Op::Rem => self.translate_floor_div(op == Op::Rem, arg(0)?, arg(1)?),
            Op::Lt => cmp(self, IntCC::SignedLessThan)?,
            Op::Le => cmp(self, IntCC::SignedLessThanOrEqual)?,
            Op::Gt => cmp(self, IntCC::SignedGreaterThan)?,
            Op::Ge => cmp(self, IntCC::SignedGreaterThanOrEqual)?,
            Op::Eq => cmp(self, IntCC::Equal)?,
            Op::Ne => cmp(self, IntCC::NotEqual)?,
            Op::Select => {
                let c = self.b.ins().icmp_imm_s(IntCC::NotEqual, arg(0)?, 0);
                self.b.ins().select(c, arg(1)?, arg(2)?)
            }
            Op::Bcast => arg(0)?,
            Op::Convert(d) => self.translate_convert(d, arg(0)?),
            Op::Threefry0 | Op::Threefry1 => {
                let words = [arg(0)?, arg(1)?, arg(2)?, arg(3)?];
                self.translate_threefry(op == Op::Threefry1, words)
            }
            other => {
                return Err(Error::internal(format!(
                    "backend: `{}` of i64 operands",
                    other.name()
                )))
            }
        })
    }

    /// Word 0 (or 1 when `second`) of the Threefry-2x32-20 block of counter
    /// `(c0, c1)` under key `(k0, k1)`, from the low 32 bits of each `i64`
    /// of `[k0, k1, c0, c1]`, zero-extended: the rounds of
    /// [`crate::ops::threefry::threefry2x32`] on 32-bit words.
    fn translate_threefry(&mut self, second: bool, words: [ir::Value; 4]) -> ir::Value {
        use crate::ops::threefry::{PARITY, ROTATIONS, ROUNDS};
        let [k0, k1, c0, c1] = words.map(|x| self.b.ins().ireduce(types::I32, x));
        let parity = self.b.ins().iconst(types::I32, i64::from(PARITY));
        let k01 = self.b.ins().bxor(k0, k1);
        let ks = [k0, k1, self.b.ins().bxor(k01, parity)];
        let mut x0 = self.b.ins().iadd(c0, ks[0]);
        let mut x1 = self.b.ins().iadd(c1, ks[1]);
        for r in 0..ROUNDS {
            x0 = self.b.ins().iadd(x0, x1);
            let rot = self
                .b
                .ins()
                .rotl_imm_s(x1, i64::from(ROTATIONS[(r % 8) as usize]));
            x1 = self.b.ins().bxor(rot, x0);
            if r % 4 == 3 {
                let s = r / 4 + 1;
                x0 = self.b.ins().iadd(x0, ks[(s % 3) as usize]);
                x1 = self.b.ins().iadd(x1, ks[((s + 1) % 3) as usize]);
                x1 = self.b.ins().iadd_imm_s(x1, i64::from(s));
            }
        }
        self.b
            .ins()
            .uextend(types::I64, if second { x1 } else { x0 })
    }

    /// `a // b` or `a % b` rounded toward minus infinity; 0 when `b` is 0,
    /// and `-a` (wrapping) or 0 when `b` is -1 (where `sdiv` would trap on
    /// the least `i64`).
    fn translate_floor_div(&mut self, rem: bool, a: ir::Value, b: ir::Value) -> ir::Value {
        let zero = self.b.ins().iconst(types::I64, 0);
        let one = self.b.ins().iconst(types::I64, 1);
        let b_zero = self.b.ins().icmp_imm_s(IntCC::Equal, b, 0);
        let b_neg1 = self.b.ins().icmp_imm_s(IntCC::Equal, b, -1);
        let special = self.b.ins().bor(b_zero, b_neg1);
        let d = self.b.ins().select(special, one, b);
        let q = self.b.ins().sdiv(a, d);
        let r = self.b.ins().srem(a, d);
        // Round toward minus infinity when the remainder's sign differs
        // from the divisor's.
        let r_nz = self.b.ins().icmp_imm_s(IntCC::NotEqual, r, 0);
        let x = self.b.ins().bxor(r, d);
        let signs = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, x, 0);
        let adjust = self.b.ins().band(r_nz, signs);
        if rem {
            let r_plus = self.b.ins().iadd(r, d);
            let r = self.b.ins().select(adjust, r_plus, r);
            self.b.ins().select(special, zero, r)
        } else {
            let q_minus = self.b.ins().iadd_imm_s(q, -1);
            let q = self.b.ins().select(adjust, q_minus, q);
            let neg = self.b.ins().ineg(a);
            let q = self.b.ins().select(b_neg1, neg, q);
            self.b.ins().select(b_zero, zero, q)
        }
    }

    /// `x` (of whatever type it has) converted to `d` (see
    /// [`Op::Convert`]): truncation toward zero, saturating, NaN to 0, to
    /// `i64`; the nearest float from `i64`.
    fn translate_convert(&mut self, d: DType, x: ir::Value) -> ir::Value {
        let from = self.b.func.dfg.value_type(x);
        let to = cl_type(d);
        if d == DType::Bool {
            // 1 where not zero (NaN included: `fcmp ne` holds).
            let c = if from == types::I64 {
                self.b.ins().icmp_imm_s(IntCC::NotEqual, x, 0)
            } else {
                let zero = if from == types::F32 {
                    self.b.ins().f32const(0.0)
                } else {
                    self.b.ins().f64const(0.0)
                };
                self.b.ins().fcmp(FloatCC::NotEqual, x, zero)
            };
            return self.b.ins().uextend(types::I64, c);
        }
        match (from == types::I64, d == DType::I64) {
            (true, true) => x,
            (false, true) => self.b.ins().fcvt_to_sint_sat(types::I64, x),
            (true, false) => self.b.ins().fcvt_from_sint(to, x),
            (false, false) if from == to => x,
            (false, false) if to == types::F64 => self.b.ins().fpromote(to, x),
            (false, false) => self.b.ins().fdemote(to, x),
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

    pub(super) fn libm_ref(&mut self, which: Libm, dtype: DType) -> FuncRef {
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
}
