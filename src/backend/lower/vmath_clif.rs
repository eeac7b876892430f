//! The [`Emit`] implementation over Cranelift: egrad's vector math kernels
//! ([`crate::vmath`]) emitted as IR on `f64`, `f32`, `f64x2` and `f32x4`
//! values, computing in every lane the bits the scalar Rust kernels
//! compute.
//!
//! Each emitter method is one instruction (constants are `f64const` /
//! `f32const` / `iconst`, splatted for vectors; Cranelift's GVN shares
//! repeated constants). Scalar masks are the `i8` results of `fcmp` and
//! choose with `select`; vector masks are the all-ones/all-zeros lanes of
//! `fcmp` and choose with `bitselect`. Shifts take a constant `i32` amount.
//! The fallback of `sin`/`cos` ([`Emit::slow`]) branches to a block that
//! calls the imported scalar function on every lane (only when some lane
//! needs it, tested with `vany_true`) and blends its results into the
//! lanes of the mask.
//!
//! On x86-64 the vector code needs only SSE2: the one `i64x2` integer
//! compare (the sin/cos quadrant, `pcmpeqq`) and `vany_true` (`ptest`) use
//! SSE4.1 when the host has it and Cranelift's SSE2 sequences otherwise;
//! no `fma`, `nearest`, float/int conversion, integer multiply or `i64x2`
//! arithmetic shift is emitted.

use crate::vmath::{kernel32, kernel64, Emit, VFn};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    types, BlockArg, Endianness, FuncRef, InstBuilder, MemFlagsData, Type, Value,
};
use cranelift_frontend::FunctionBuilder;

/// Emits the kernels' operations into a function being built.
pub(crate) struct ClifEmit<'a, 'b> {
    b: &'a mut FunctionBuilder<'b>,
    /// The float type: `F64`, `F32`, `F64X2` or `F32X4`.
    ty: Type,
    /// The integer type of the same shape.
    ity: Type,
    /// The scalar std function of the kernel (for [`Emit::slow`]).
    fallback: Option<FuncRef>,
}

impl<'a, 'b> ClifEmit<'a, 'b> {
    /// An emitter for values of `ty` (`F64`, `F32`, `F64X2`, `F32X4`), or
    /// `None` for another type.
    pub(crate) fn new(
        b: &'a mut FunctionBuilder<'b>,
        ty: Type,
        fallback: Option<FuncRef>,
    ) -> Option<Self> {
        let ity = match ty {
            types::F64 => types::I64,
            types::F32 => types::I32,
            types::F64X2 => types::I64X2,
            types::F32X4 => types::I32X4,
            _ => return None,
        };
        Some(ClifEmit {
            b,
            ty,
            ity,
            fallback,
        })
    }

    fn is_vector(&self) -> bool {
        self.ty.is_vector()
    }

    fn is_f64(&self) -> bool {
        self.ty.lane_type() == types::F64
    }

    /// Bitcast flags: vector bitcasts state their byte order.
    fn cast_flags(&self) -> MemFlagsData {
        if self.is_vector() {
            MemFlagsData::new().with_endianness(Endianness::Little)
        } else {
            MemFlagsData::new()
        }
    }

    fn shift_amount(&mut self, k: u32) -> Value {
        self.b.ins().iconst(types::I32, i64::from(k))
    }
}

impl Emit for ClifEmit<'_, '_> {
    type F = Value;
    type I = Value;
    type M = Value;

    fn f(&mut self, c: f64) -> Value {
        let s = if self.is_f64() {
            self.b.ins().f64const(c)
        } else {
            self.b.ins().f32const(c as f32)
        };
        if self.is_vector() {
            self.b.ins().splat(self.ty, s)
        } else {
            s
        }
    }
    fn add(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().fadd(a, b)
    }
    fn sub(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().fsub(a, b)
    }
    fn mul(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().fmul(a, b)
    }
    fn div(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().fdiv(a, b)
    }
    fn neg(&mut self, a: Value) -> Value {
        self.b.ins().fneg(a)
    }
    fn abs(&mut self, a: Value) -> Value {
        self.b.ins().fabs(a)
    }
    fn sqrt(&mut self, a: Value) -> Value {
        self.b.ins().sqrt(a)
    }
    fn lt(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().fcmp(FloatCC::LessThan, a, b)
    }
    fn le(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().fcmp(FloatCC::LessThanOrEqual, a, b)
    }
    fn gt(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().fcmp(FloatCC::GreaterThan, a, b)
    }
    fn ge(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().fcmp(FloatCC::GreaterThanOrEqual, a, b)
    }
    fn eq(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().fcmp(FloatCC::Equal, a, b)
    }
    fn and_m(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().band(a, b)
    }
    fn or_m(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().bor(a, b)
    }
    fn not_m(&mut self, a: Value) -> Value {
        if self.is_vector() {
            self.b.ins().bnot(a)
        } else {
            // Scalar masks are 0 or 1.
            self.b.ins().icmp_imm_u(IntCC::Equal, a, 0)
        }
    }
    fn select(&mut self, m: Value, a: Value, b: Value) -> Value {
        if self.is_vector() {
            let flags = self.cast_flags();
            let m = self.b.ins().bitcast(self.ty, flags, m);
            self.b.ins().bitselect(m, a, b)
        } else {
            self.b.ins().select(m, a, b)
        }
    }
    fn to_bits(&mut self, a: Value) -> Value {
        let flags = self.cast_flags();
        self.b.ins().bitcast(self.ity, flags, a)
    }
    fn of_bits(&mut self, a: Value) -> Value {
        let flags = self.cast_flags();
        self.b.ins().bitcast(self.ty, flags, a)
    }
    fn iconst(&mut self, c: i64) -> Value {
        let lane = self.ity.lane_type();
        // The verifier wants the immediate zero-extended from the lane width.
        let c = if lane == types::I32 {
            i64::from(c as i32 as u32)
        } else {
            c
        };
        let s = self.b.ins().iconst(lane, c);
        if self.is_vector() {
            self.b.ins().splat(self.ity, s)
        } else {
            s
        }
    }
    fn iadd(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().iadd(a, b)
    }
    fn isub(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().isub(a, b)
    }
    fn iand(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().band(a, b)
    }
    fn ior(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().bor(a, b)
    }
    fn ixor(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().bxor(a, b)
    }
    fn shl(&mut self, a: Value, k: u32) -> Value {
        let k = self.shift_amount(k);
        self.b.ins().ishl(a, k)
    }
    fn ushr(&mut self, a: Value, k: u32) -> Value {
        let k = self.shift_amount(k);
        self.b.ins().ushr(a, k)
    }
    fn sshr(&mut self, a: Value, k: u32) -> Value {
        let k = self.shift_amount(k);
        self.b.ins().sshr(a, k)
    }
    fn nonzero(&mut self, a: Value) -> Value {
        if self.is_vector() {
            let zero = self.iconst(0);
            self.b.ins().icmp(IntCC::NotEqual, a, zero)
        } else {
            self.b.ins().icmp_imm_u(IntCC::NotEqual, a, 0)
        }
    }
    fn slow(&mut self, _f: VFn, m: Value, x: Value, fast: Value) -> Value {
        let Some(fref) = self.fallback else {
            // `emit` refuses kernels with a fallback when none is given.
            return fast;
        };
        let slow_block = self.b.create_block();
        let join = self.b.create_block();
        let out = self.b.append_block_param(join, self.ty);
        let any = if self.is_vector() {
            self.b.ins().vany_true(m)
        } else {
            m
        };
        self.b
            .ins()
            .brif(any, slow_block, &[], join, &[BlockArg::Value(fast)]);
        self.b.switch_to_block(slow_block);
        self.b.seal_block(slow_block);
        let res = if self.is_vector() {
            let mut v = fast;
            for lane in 0..self.ty.lane_count() as u8 {
                let xl = self.b.ins().extractlane(x, lane);
                let call = self.b.ins().call(fref, &[xl]);
                let yl = self.b.inst_results(call)[0];
                v = self.b.ins().insertlane(v, yl, lane);
            }
            self.select(m, v, fast)
        } else {
            let call = self.b.ins().call(fref, &[x]);
            self.b.inst_results(call)[0]
        };
        self.b.ins().jump(join, &[BlockArg::Value(res)]);
        self.b.switch_to_block(join);
        self.b.seal_block(join);
        out
    }
}

/// Emits `f(x)` for `x` of type `ty` (`F64`, `F32`, `F64X2`, `F32X4`):
/// exactly the bits of [`VFn::eval_f64`] / [`VFn::eval_f32`] in every lane.
/// Kernels with [`VFn::has_fallback`] (sin, cos) need `fallback`: a
/// function `fn(T) -> T` on the lane type that computes std's function
/// ([`VFn::std_f64`] / [`VFn::std_f32`]), called for lanes outside the
/// kernel's fast range (which may leave the builder in a new block).
/// `None` (and nothing emitted) for another type or a missing fallback.
pub(crate) fn emit(
    b: &mut FunctionBuilder<'_>,
    ty: Type,
    f: VFn,
    x: Value,
    fallback: Option<FuncRef>,
) -> Option<Value> {
    if f.has_fallback() && fallback.is_none() {
        return None;
    }
    let mut e = ClifEmit::new(b, ty, fallback)?;
    Some(if e.is_f64() {
        kernel64(f, &mut e, x)
    } else {
        kernel32(f, &mut e, x)
    })
}
