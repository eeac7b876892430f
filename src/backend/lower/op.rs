//! The per-op lowering (one exhaustive `match` over `Op`) and the calls it
//! makes: libm imports and egrad's vector math kernels.

use super::vmath_clif;
use super::{cl_type, Import, Translator, INLINE_KERNELS};
use crate::backend::jit::Libm;
use crate::error::Error;
use crate::lang::types::DType;
use crate::ops::Op;
use crate::vmath::VFn;
use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::{self, FuncRef, InstBuilder};

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
            | Op::Reshape
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

    pub(super) fn translate_const(&mut self, dtype: DType, x: f64) -> ir::Value {
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
