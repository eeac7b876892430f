//! The scalar emitters ([`Scalar64`], [`Scalar32`]: plain Rust arithmetic)
//! and the plain entry points (`exp_f64`, `log_f32`, ...).

use super::{kernel32, kernel64, Emit, VFn};

/// The `f64` scalar emitter: plain Rust arithmetic.
#[derive(Clone, Copy, Debug, Default)]
pub struct Scalar64;

/// The `f32` scalar emitter: plain Rust arithmetic.
#[derive(Clone, Copy, Debug, Default)]
pub struct Scalar32;

macro_rules! scalar_emit {
    ($name:ident, $f:ty, $i:ty, $u:ty, $std:ident) => {
        impl Emit for $name {
            type F = $f;
            type I = $i;
            type M = bool;

            #[inline(always)]
            fn f(&mut self, c: f64) -> $f {
                c as $f
            }
            #[inline(always)]
            fn add(&mut self, a: $f, b: $f) -> $f {
                a + b
            }
            #[inline(always)]
            fn sub(&mut self, a: $f, b: $f) -> $f {
                a - b
            }
            #[inline(always)]
            fn mul(&mut self, a: $f, b: $f) -> $f {
                a * b
            }
            #[inline(always)]
            fn div(&mut self, a: $f, b: $f) -> $f {
                a / b
            }
            #[inline(always)]
            fn neg(&mut self, a: $f) -> $f {
                -a
            }
            #[inline(always)]
            fn abs(&mut self, a: $f) -> $f {
                a.abs()
            }
            #[inline(always)]
            fn sqrt(&mut self, a: $f) -> $f {
                a.sqrt()
            }
            #[inline(always)]
            fn lt(&mut self, a: $f, b: $f) -> bool {
                a < b
            }
            #[inline(always)]
            fn le(&mut self, a: $f, b: $f) -> bool {
                a <= b
            }
            #[inline(always)]
            fn gt(&mut self, a: $f, b: $f) -> bool {
                a > b
            }
            #[inline(always)]
            fn ge(&mut self, a: $f, b: $f) -> bool {
                a >= b
            }
            #[inline(always)]
            fn eq(&mut self, a: $f, b: $f) -> bool {
                a == b
            }
            #[inline(always)]
            fn and_m(&mut self, a: bool, b: bool) -> bool {
                a & b
            }
            #[inline(always)]
            fn or_m(&mut self, a: bool, b: bool) -> bool {
                a | b
            }
            #[inline(always)]
            fn not_m(&mut self, a: bool) -> bool {
                !a
            }
            #[inline(always)]
            fn select(&mut self, m: bool, a: $f, b: $f) -> $f {
                if m {
                    a
                } else {
                    b
                }
            }
            #[inline(always)]
            fn to_bits(&mut self, a: $f) -> $i {
                a.to_bits() as $i
            }
            #[inline(always)]
            fn of_bits(&mut self, a: $i) -> $f {
                <$f>::from_bits(a as $u)
            }
            #[inline(always)]
            fn iconst(&mut self, c: i64) -> $i {
                c as $i
            }
            #[inline(always)]
            fn iadd(&mut self, a: $i, b: $i) -> $i {
                a.wrapping_add(b)
            }
            #[inline(always)]
            fn isub(&mut self, a: $i, b: $i) -> $i {
                a.wrapping_sub(b)
            }
            #[inline(always)]
            fn iand(&mut self, a: $i, b: $i) -> $i {
                a & b
            }
            #[inline(always)]
            fn ior(&mut self, a: $i, b: $i) -> $i {
                a | b
            }
            #[inline(always)]
            fn ixor(&mut self, a: $i, b: $i) -> $i {
                a ^ b
            }
            #[inline(always)]
            fn shl(&mut self, a: $i, k: u32) -> $i {
                a << k
            }
            #[inline(always)]
            fn ushr(&mut self, a: $i, k: u32) -> $i {
                ((a as $u) >> k) as $i
            }
            #[inline(always)]
            fn sshr(&mut self, a: $i, k: u32) -> $i {
                a >> k
            }
            #[inline(always)]
            fn nonzero(&mut self, a: $i) -> bool {
                a != 0
            }
            #[inline(always)]
            fn slow(&mut self, f: VFn, m: bool, x: $f, fast: $f) -> $f {
                if m {
                    f.$std(x)
                } else {
                    fast
                }
            }
        }
    };
}

scalar_emit!(Scalar64, f64, i64, u64, std_f64);
scalar_emit!(Scalar32, f32, i32, u32, std_f32);

// ---------------------------------------------------------------------------
// Plain entry points.

macro_rules! entry {
    ($($n64:ident, $n32:ident, $v:ident, $doc:literal;)*) => {
        $(
            #[doc = concat!($doc, " (`f64`; see the module docs).")]
            #[inline]
            pub fn $n64(x: f64) -> f64 {
                kernel64(VFn::$v, &mut Scalar64, x)
            }
            #[doc = concat!($doc, " (`f32`; see the module docs).")]
            #[inline]
            pub fn $n32(x: f32) -> f32 {
                kernel32(VFn::$v, &mut Scalar32, x)
            }
        )*
    };
}

entry! {
    exp_f64, exp_f32, Exp, "`e^x`";
    log_f64, log_f32, Log, "Natural logarithm";
    log1p_f64, log1p_f32, Log1p, "`ln(1 + x)`";
    expm1_f64, expm1_f32, Expm1, "`e^x - 1`";
    tanh_f64, tanh_f32, Tanh, "Hyperbolic tangent";
    sin_f64, sin_f32, Sin, "Sine";
    cos_f64, cos_f32, Cos, "Cosine";
}
