//! egrad's vector math library: elementary functions written once, as
//! straight-line sequences of IEEE-754 operations over an emitter ([`Emit`]).
//!
//! The same kernel runs as plain Rust on scalars ([`Scalar64`],
//! [`Scalar32`], and the entry points [`exp_f64`], [`log_f32`], ...) and is
//! emitted as Cranelift IR on scalars and on 128-bit vectors (`f64x2`,
//! `f32x4`) by `backend::lower::vmath_clif`. Every emitter method is one
//! correctly rounded IEEE operation or one bit operation, Rust never
//! contracts `a * b + c` and neither does Cranelift, so the interpreter and
//! the generated code compute **the same bits** in every lane: the op
//! sequence is the definition of each function. The kernels use no fused
//! multiply-add, no `min`/`max` (compares and selects instead), no
//! float/integer conversion instruction (the integer `n` of a reduction is
//! read from the low bits of `x * c + 1.5 * 2^52`, resp. `2^23`), no
//! integer multiplication and only one integer comparison (the sin/cos
//! quadrant), so every op is one Cranelift instruction with a direct
//! lowering on scalars and on `f64x2`/`f32x4` (and their `i64x2`/`i32x4`).
//!
//! # Kernels
//!
//! `f64` and `f32` kernels have their own constants and polynomials; the
//! `f32` kernels compute in `f32` only. Polynomials are evaluated by
//! Estrin's scheme. Constants marked fdlibm are from Sun's fdlibm (freely
//! redistributable); the others are minimax fits made for this module.
//!
//! * **exp**: `x` is clamped to `[-746, 710]` (`[-104, 89]` for `f32`; the
//!   clamps keep NaN), `n = round(x / ln 2)` by the shifter trick, `r = x -
//!   n ln2_hi - n ln2_lo` (Cody–Waite, `n ln2_hi` exact) with its rounding
//!   error `r_lo`, `|r| <= ln2/2`, `e^r = 1 + (r + (r_lo + r (r q(r) +
//!   r_lo)))` with `q` of degree 10 (f64) / 4 (f32), and the result is `e^r
//!   * 2^n1 * 2^n2` with `n1 + n2 = n` built from exponent bits: overflow
//!   gives `+inf`, results below the normal range are rounded once to
//!   subnormals and then to `+0`. `exp(-inf) = +0`, `exp(+inf) = +inf`.
//! * **log**: subnormal `x` is first scaled by `2^52` (`2^23`). With the
//!   exponent bits offset by those of `sqrt(1/2)`, `x = 2^k m`, `m` in
//!   `[sqrt(1/2), sqrt 2)`, read off without conversions. With `f = m - 1`,
//!   `s = f / (2 + f)`, `R(s^2) ~ 2 atanh(s)/s - 2` (fdlibm's degree-14
//!   polynomial for f64, a degree-6 fit for f32), `log x = k ln2_hi -
//!   ((f^2/2 - (s (f^2/2 + R) + k ln2_lo)) - f)` (fdlibm's arrangement).
//!   `log(±0) = -inf`, `log(x < 0) = NaN`, `log(+inf) = +inf`.
//! * **log1p**: `u = 1 + x` rounded and its exact rounding error `c` (by
//!   Fast2Sum, ordered by `x > 1`) are formed; `log u` as in `log` (no
//!   subnormal case: `u >= 2^-53`) with `c / u` added to the low part.
//!   `log1p(±0) = ±0`, tiny `x` gives `x`, `log1p(-1) = -inf`, `log1p(x <
//!   -1) = NaN`, `log1p(+inf) = +inf`.
//! * **expm1**: `x` clamped to `[-40, 710]` (`[-18, 89]`), `n` as in `exp`
//!   but forced to `0` for `|x| < 0.45` (so no cancellation when `n = ±1`);
//!   `p = e^r - 1 = r + (r_lo + r (r q(r) + r_lo))` with `q` of degree 11
//!   (f64) / 6 (f32) on `|r| <= 0.45`; the result `2 (2^(n-1) p + (2^(n-1)
//!   - 1/2))` overflows only at the final exact doubling. `|x| < 2^-54`
//!   (`2^-25`) returns `x` (keeps `±0` and subnormals), `expm1(-inf) = -1`,
//!   `expm1(+inf) = +inf`.
//! * **tanh**: `a = |x|` clamped to `20` (`10` for f32, where tanh has
//!   rounded to 1); for `a < 0.55`, `a + a^3 T(a^2)` with `T` of degree 10
//!   (f64) / 4 (f32); from `0.55` on (where `tanh >= 1/2`), `1 - 2 /
//!   (expm1(2a) + 2)` with the expm1 kernel; the sign is copied from `x`.
//!   `tanh(±0) = ±0`, tiny `x` gives `x`, `tanh(±inf) = ±1`.
//! * **sin**, **cos**: `n = round(x 2/pi)`, `r = x - n pi/2` as a
//!   double-length `r_hi + r_lo` from `pi/2 = P1 + P2 + P3 + P4` (fdlibm's
//!   31/32/28-bit parts and a 53-bit tail for f64, 12-bit parts and a 24-bit
//!   tail for f32, so `n P1 .. n P3` are exact; the subtractions of `n P2`
//!   and `n P3` are followed by their exact rounding errors), `|r| <= pi/4`;
//!   fdlibm's sine and cosine kernels (f64; degree-9 and -8 fits for f32)
//!   with first-order `r_lo` corrections, chosen and signed by the quadrant
//!   `n mod 4` from the shifter's bits. The reduction is accurate for `|x|
//!   <= 2^20` (f64, [`SINCOS64_MAX`]) / `2^12` (f32, [`SINCOS32_MAX`]);
//!   lanes above that, infinities and NaN take the **fallback**
//!   [`Emit::slow`]: the scalar emitters call `f64::sin` etc. from std, the
//!   Cranelift emitter branches, only when some lane needs it, to per-lane
//!   calls of an imported scalar function that must compute exactly what
//!   std does (egrad's libm wrappers). `sin(±0) = ±0`.
//!
//! Signed zeros and special values are those of Rust's std functions. A
//! NaN input gives a NaN: for `exp`, `expm1`, `tanh`, `sin` and `cos` the
//! input's NaN, quieted (what std gives too); for `log` and `log1p` the
//! default `f64::NAN` / `f32::NAN`. All NaNs inside a kernel derive from one
//! NaN, so the result bits do not depend on the operand order an optimiser
//! picks.
//!
//! # Accuracy
//!
//! Max error in ulps (of the exact result's binade; subnormal ulps below
//! the normal range) measured against a high-precision reference:
//! double-double for f64 (itself checked against astro-float at 192 bits),
//! std's f64 functions for f32. Ranges are sampled uniformly in the value
//! or, marked "bits", uniformly in the bit pattern; 2,000,000 samples per
//! range. `tests/vmath.rs` repeats the measurement with fewer samples and
//! prints std's maxima on the same samples.
//!
//! | function | type | range | max ulps | std's max |
//! |---|---|---|---|---|
//! | exp | f32 | [-103.9, 88.7] | 0.880 | 0.502 |
//! | exp | f32 | [-1, 1] | 0.886 | 0.502 |
//! | exp | f32 | [-103.9, -87.3] subnormal out | 0.747 | 0.501 |
//! | exp | f32 | [80, 88.72] | 0.876 | 0.501 |
//! | exp | f32 | \|x\| in [2^-149, 1] bits | 0.870 | 0.501 |
//! | exp | f64 | [-745.2, 709.8] | 0.870 | 0.507 |
//! | exp | f64 | [-1, 1] | 0.864 | 0.506 |
//! | exp | f64 | [-745.2, -708.4] subnormal out | 0.747 | 0.501 |
//! | exp | f64 | [700, 709.79] near overflow | 0.867 | 0.505 |
//! | exp | f64 | \|x\| in [2^-1074, 1] bits | 0.787 | 0.503 |
//! | log | f32 | (0, max] bits | 0.750 | 0.787 |
//! | log | f32 | subnormal bits | 0.503 | 0.500 |
//! | log | f32 | [0.5, 2] | 0.824 | 0.817 |
//! | log | f32 | [1 - 2^-10, 1 + 2^-10] | 0.500 | 0.503 |
//! | log | f64 | (0, max] bits | 0.732 | 0.504 |
//! | log | f64 | subnormal bits | 0.500 | 0.500 |
//! | log | f64 | [0.5, 2] | 0.821 | 0.518 |
//! | log | f64 | [1 - 2^-20, 1 + 2^-20] | 0.564 | 0.564 |
//! | log | f64 | [0.7, 1.5] | 0.831 | 0.518 |
//! | log1p | f32 | (-1, 1] | 0.824 | 0.824 |
//! | log1p | f32 | [-1, -0.5] | 0.758 | 0.758 |
//! | log1p | f32 | \|x\| in [2^-149, 1] bits | 0.767 | 0.781 |
//! | log1p | f32 | [1, max] bits | 0.768 | 0.768 |
//! | log1p | f64 | (-1, 1] | 0.842 | 0.842 |
//! | log1p | f64 | [-1, -0.5] | 0.759 | 0.757 |
//! | log1p | f64 | [-0.3, 0.42] | 0.851 | 0.845 |
//! | log1p | f64 | \|x\| in [2^-1074, 1] bits | 0.748 | 0.724 |
//! | log1p | f64 | [1, max] bits | 0.738 | 0.738 |
//! | log1p | f64 | [0, 1e3] | 0.735 | 0.735 |
//! | expm1 | f32 | [-18, 88.7] | 1.312 | 0.766 |
//! | expm1 | f32 | [-1, 1] | 1.094 | 0.790 |
//! | expm1 | f32 | \|x\| in [2^-149, 1] bits | 0.957 | 0.748 |
//! | expm1 | f64 | [-40, 709.7] | 1.244 | 0.788 |
//! | expm1 | f64 | [-1, 1] | 1.183 | 0.821 |
//! | expm1 | f64 | [-0.7, 0.7] | 1.193 | 0.832 |
//! | expm1 | f64 | \|x\| in [2^-1074, 2^-30] bits | 0.500 | 0.500 |
//! | expm1 | f64 | \|x\| in [2^-30, 1] bits | 1.098 | 0.802 |
//! | expm1 | f64 | [700, 709.78] | 0.896 | 0.756 |
//! | tanh | f32 | [-10, 10] | 1.395 | 2.091 |
//! | tanh | f32 | [-1, 1] | 1.415 | 2.141 |
//! | tanh | f32 | \|x\| in [2^-149, 1] bits | 1.333 | 2.070 |
//! | tanh | f64 | [-20, 20] | 1.354 | 2.014 |
//! | tanh | f64 | [-1, 1] | 1.427 | 2.136 |
//! | tanh | f64 | [0.4, 0.7] | 1.410 | 2.058 |
//! | tanh | f64 | \|x\| in [2^-1074, 1] bits | 1.254 | 1.921 |
//! | tanh | f64 | [15, 25] | 0.500 | 0.500 |
//! | sin | f32 | [-pi, pi] | 0.800 | 0.560 |
//! | sin | f32 | [-4096, 4096] | 0.800 | 0.561 |
//! | sin | f32 | \|x\| in [2^-149, 1] bits | 0.744 | 0.559 |
//! | sin | f32 | near k pi/2, k < 2600 | 0.500 | 0.509 |
//! | sin | f64 | [-pi, pi] | 0.799 | 0.514 |
//! | sin | f64 | [-100, 100] | 0.838 | 0.515 |
//! | sin | f64 | [-2^20, 2^20] | 0.855 | 0.514 |
//! | sin | f64 | \|x\| in [2^-1074, 1] bits | 0.680 | 0.510 |
//! | sin | f64 | near k pi/2, k < 100 | 0.497 | 0.497 |
//! | sin | f64 | near k pi/2, k < 667000 | 0.500 | 0.500 |
//! | cos | f32 | [-pi, pi] | 0.828 | 0.560 |
//! | cos | f32 | [-4096, 4096] | 0.808 | 0.560 |
//! | cos | f32 | \|x\| in [2^-149, 1] bits | 0.733 | 0.542 |
//! | cos | f32 | near k pi/2, k < 2600 | 0.500 | 0.509 |
//! | cos | f64 | [-pi, pi] | 0.818 | 0.515 |
//! | cos | f64 | [-100, 100] | 0.814 | 0.515 |
//! | cos | f64 | [-2^20, 2^20] | 0.794 | 0.514 |
//! | cos | f64 | \|x\| in [2^-1074, 1] bits | 0.677 | 0.500 |
//! | cos | f64 | near k pi/2, k < 100 | 0.499 | 0.561 |
//! | cos | f64 | near k pi/2, k < 667000 | 0.500 | 0.500 |
//!
//! # Cost
//!
//! Emitter ops per value, not counting constants and bitcasts, f64 (f32):
//! exp 49 (36), log 45 (36), log1p 52 (43), expm1 54 (43), tanh 84 (60),
//! sin 71 (59), cos 70 (58) plus the fallback's lane test and branch; one
//! division in log and tanh, two in log1p.

/// An emitter: the operations the kernels are written in. `F` is a float
/// value (a scalar or a vector of lanes), `I` an integer of the same lane
/// width (`i64` lanes for `f64`, `i32` for `f32`), `M` a lane mask. Every
/// method is one IEEE-754 operation, rounded to nearest, or one bit
/// operation, applied lane by lane.
pub trait Emit {
    /// A float value.
    type F: Copy;
    /// An integer value of the float's lane width.
    type I: Copy;
    /// A lane mask (`bool` on scalars).
    type M: Copy;

    /// The constant `c` in every lane (`c` is exact in the lane type: f32
    /// kernels only pass `f64`s that are `f32` values).
    fn f(&mut self, c: f64) -> Self::F;
    /// `a + b`.
    fn add(&mut self, a: Self::F, b: Self::F) -> Self::F;
    /// `a - b`.
    fn sub(&mut self, a: Self::F, b: Self::F) -> Self::F;
    /// `a * b`.
    fn mul(&mut self, a: Self::F, b: Self::F) -> Self::F;
    /// `a / b`.
    fn div(&mut self, a: Self::F, b: Self::F) -> Self::F;
    /// `-a` (flips the sign bit).
    fn neg(&mut self, a: Self::F) -> Self::F;
    /// `|a|` (clears the sign bit).
    fn abs(&mut self, a: Self::F) -> Self::F;
    /// `sqrt(a)`.
    fn sqrt(&mut self, a: Self::F) -> Self::F;
    /// `a < b` (ordered: false if either is NaN).
    fn lt(&mut self, a: Self::F, b: Self::F) -> Self::M;
    /// `a <= b` (ordered).
    fn le(&mut self, a: Self::F, b: Self::F) -> Self::M;
    /// `a > b` (ordered).
    fn gt(&mut self, a: Self::F, b: Self::F) -> Self::M;
    /// `a >= b` (ordered).
    fn ge(&mut self, a: Self::F, b: Self::F) -> Self::M;
    /// `a == b` (ordered).
    fn eq(&mut self, a: Self::F, b: Self::F) -> Self::M;
    /// Both masks.
    fn and_m(&mut self, a: Self::M, b: Self::M) -> Self::M;
    /// Either mask.
    fn or_m(&mut self, a: Self::M, b: Self::M) -> Self::M;
    /// The complement of a mask.
    fn not_m(&mut self, a: Self::M) -> Self::M;
    /// `m ? a : b` lane by lane.
    fn select(&mut self, m: Self::M, a: Self::F, b: Self::F) -> Self::F;
    /// The bits of a float.
    fn to_bits(&mut self, a: Self::F) -> Self::I;
    /// The float with these bits.
    fn of_bits(&mut self, a: Self::I) -> Self::F;
    /// The integer constant `c` (truncated to the lane width) in every lane.
    fn iconst(&mut self, c: i64) -> Self::I;
    /// Wrapping `a + b`.
    fn iadd(&mut self, a: Self::I, b: Self::I) -> Self::I;
    /// Wrapping `a - b`.
    fn isub(&mut self, a: Self::I, b: Self::I) -> Self::I;
    /// `a & b`.
    fn iand(&mut self, a: Self::I, b: Self::I) -> Self::I;
    /// `a | b`.
    fn ior(&mut self, a: Self::I, b: Self::I) -> Self::I;
    /// `a ^ b`.
    fn ixor(&mut self, a: Self::I, b: Self::I) -> Self::I;
    /// `a << k`, `k` less than the lane width.
    fn shl(&mut self, a: Self::I, k: u32) -> Self::I;
    /// Logical `a >> k`.
    fn ushr(&mut self, a: Self::I, k: u32) -> Self::I;
    /// Arithmetic `a >> k`.
    fn sshr(&mut self, a: Self::I, k: u32) -> Self::I;
    /// Lanes where `a != 0`.
    fn nonzero(&mut self, a: Self::I) -> Self::M;
    /// The fallback of kernels whose fast path has a limited domain: in the
    /// lanes of `m`, std's result for `f` at `x` (`f.std_f64` /
    /// `f.std_f32`), elsewhere `fast`.
    fn slow(&mut self, f: VFn, m: Self::M, x: Self::F, fast: Self::F) -> Self::F;
}

/// The functions of this module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VFn {
    /// `e^x`.
    Exp,
    /// Natural logarithm.
    Log,
    /// `ln(1 + x)`.
    Log1p,
    /// `e^x - 1`.
    Expm1,
    /// Hyperbolic tangent.
    Tanh,
    /// Sine.
    Sin,
    /// Cosine.
    Cos,
}

impl VFn {
    /// Every function.
    pub const ALL: [VFn; 7] = [
        VFn::Exp,
        VFn::Log,
        VFn::Log1p,
        VFn::Expm1,
        VFn::Tanh,
        VFn::Sin,
        VFn::Cos,
    ];

    /// The function's name.
    pub fn name(self) -> &'static str {
        match self {
            VFn::Exp => "exp",
            VFn::Log => "log",
            VFn::Log1p => "log1p",
            VFn::Expm1 => "expm1",
            VFn::Tanh => "tanh",
            VFn::Sin => "sin",
            VFn::Cos => "cos",
        }
    }

    /// Whether the kernel calls [`Emit::slow`], so that generated code needs
    /// the scalar std function as an import.
    pub fn has_fallback(self) -> bool {
        matches!(self, VFn::Sin | VFn::Cos)
    }

    /// This module's `f64` function.
    #[inline]
    pub fn eval_f64(self, x: f64) -> f64 {
        kernel64(self, &mut Scalar64, x)
    }

    /// This module's `f32` function.
    #[inline]
    pub fn eval_f32(self, x: f32) -> f32 {
        kernel32(self, &mut Scalar32, x)
    }

    /// Rust std's `f64` function (what the fallback computes).
    pub fn std_f64(self, x: f64) -> f64 {
        match self {
            VFn::Exp => x.exp(),
            VFn::Log => x.ln(),
            VFn::Log1p => x.ln_1p(),
            VFn::Expm1 => x.exp_m1(),
            VFn::Tanh => x.tanh(),
            VFn::Sin => x.sin(),
            VFn::Cos => x.cos(),
        }
    }

    /// Rust std's `f32` function (what the fallback computes).
    pub fn std_f32(self, x: f32) -> f32 {
        match self {
            VFn::Exp => x.exp(),
            VFn::Log => x.ln(),
            VFn::Log1p => x.ln_1p(),
            VFn::Expm1 => x.exp_m1(),
            VFn::Tanh => x.tanh(),
            VFn::Sin => x.sin(),
            VFn::Cos => x.cos(),
        }
    }
}

/// The `f64` kernel of `f` over a 64-bit-lane emitter.
#[inline(always)]
pub fn kernel64<E: Emit>(f: VFn, e: &mut E, x: E::F) -> E::F {
    match f {
        VFn::Exp => exp64(e, x),
        VFn::Log => log64(e, x),
        VFn::Log1p => log1p64(e, x),
        VFn::Expm1 => expm1_64(e, x),
        VFn::Tanh => tanh64(e, x),
        VFn::Sin => sincos64(e, x, false),
        VFn::Cos => sincos64(e, x, true),
    }
}

/// The `f32` kernel of `f` over a 32-bit-lane emitter.
#[inline(always)]
pub fn kernel32<E: Emit>(f: VFn, e: &mut E, x: E::F) -> E::F {
    match f {
        VFn::Exp => exp32(e, x),
        VFn::Log => log32(e, x),
        VFn::Log1p => log1p32(e, x),
        VFn::Expm1 => expm1_32(e, x),
        VFn::Tanh => tanh32(e, x),
        VFn::Sin => sincos32(e, x, false),
        VFn::Cos => sincos32(e, x, true),
    }
}

// ---------------------------------------------------------------------------
// Scalar emitters.

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

// ---------------------------------------------------------------------------
// Shared pieces.

/// `c[0] + c[1] x + c[2] x^2 + ...` by Estrin's scheme: pairs `c[2i] +
/// c[2i+1] x`, then pairs of those with `x^2`, `x^4`, ... (at most 16
/// coefficients). Fewer dependent steps than Horner's rule, which lets
/// consecutive elements overlap.
#[inline(always)]
fn poly<E: Emit>(e: &mut E, x: E::F, c: &[f64]) -> E::F {
    debug_assert!(c.len() <= 16);
    let zero = e.f(0.0);
    let mut t = [zero; 8];
    let mut n = 0;
    for pair in c.chunks(2).take(8) {
        let a = e.f(pair[0]);
        t[n] = match pair.get(1) {
            Some(&b) => {
                let b = e.f(b);
                let bx = e.mul(b, x);
                e.add(a, bx)
            }
            None => a,
        };
        n += 1;
    }
    let mut pw = x;
    while n > 1 {
        pw = e.mul(pw, pw);
        let mut m = 0;
        let mut i = 0;
        while i < n {
            t[m] = if i + 1 < n {
                let hi = e.mul(t[i + 1], pw);
                e.add(t[i], hi)
            } else {
                t[i]
            };
            m += 1;
            i += 2;
        }
        n = m;
    }
    t[0]
}

/// `x` clamped to `[lo, hi]` by compares and selects (NaN stays NaN).
#[inline(always)]
fn clamp<E: Emit>(e: &mut E, x: E::F, lo: f64, hi: f64) -> E::F {
    let h = e.f(hi);
    let m = e.gt(x, h);
    let x = e.select(m, h, x);
    let l = e.f(lo);
    let m = e.lt(x, l);
    e.select(m, l, x)
}

/// The constants of one precision.
struct Prec {
    /// 1.5 * 2^mantissa_bits: adding it rounds to an integer `n` that is
    /// then the low bits of the sum's bit pattern.
    shift: f64,
    /// The bit pattern of `shift`.
    shift_bits: i64,
    /// Mantissa bits (52 / 23).
    mant: u32,
    /// Exponent bias (1023 / 127).
    bias: i64,
    /// `1 / ln 2`.
    inv_ln2: f64,
    /// `ln 2` with trailing zeros (`n * ln2_hi` exact for the `n` used).
    ln2_hi: f64,
    /// `ln 2 - ln2_hi`.
    ln2_lo: f64,
    /// The bit pattern of `sqrt(1/2)` (rounded down).
    sqrt_half_bits: i64,
    /// The sign bit.
    sign: i64,
    /// Lane width in bits.
    width: u32,
    /// `2^(width - 1 - mant)`: what `(bits + 2^(width-1)) >> mant` adds to
    /// the exponent.
    khalf: f64,
}

const P64: Prec = Prec {
    shift: 6755399441055744.0,
    shift_bits: 0x4338_0000_0000_0000,
    mant: 52,
    bias: 1023,
    inv_ln2: std::f64::consts::LOG2_E,
    ln2_hi: f64::from_bits(0x3FE6_2E42_FEE0_0000),
    ln2_lo: f64::from_bits(0x3DEA_39EF_3579_3C76),
    sqrt_half_bits: 0x3FE6_A09E_667F_3BCD,
    sign: i64::MIN,
    width: 64,
    khalf: 2048.0,
};

const P32: Prec = Prec {
    shift: 12582912.0,
    shift_bits: 0x4B40_0000,
    mant: 23,
    bias: 127,
    inv_ln2: f32::from_bits(0x3FB8_AA3B) as f64,
    ln2_hi: f32::from_bits(0x3F31_7200) as f64,
    ln2_lo: f32::from_bits(0x35BF_BE8E) as f64,
    sqrt_half_bits: 0x3F35_04F3,
    sign: i32::MIN as i64,
    width: 32,
    khalf: 256.0,
};

/// An `f32` constant given by its bits, as the `f64` the emitters take.
const fn c32(bits: u32) -> f64 {
    f32::from_bits(bits) as f64
}

// ---------------------------------------------------------------------------
// exp

/// `q(r) ~ (e^r - 1 - r) / r^2` on `|r| <= 0.3466`; relative error of
/// `1 + r + r^2 q` below 2^-60.2.
const EXP64_Q: [f64; 11] = [
    0.5,
    0.16666666666666682,
    0.041666666666666095,
    0.008333333333317037,
    0.0013888888889115594,
    0.00019841269896375962,
    2.4801586926672718e-05,
    2.7557234869926676e-06,
    2.7557581834521527e-07,
    2.5112033997479347e-08,
    2.0826626101903878e-09,
];

/// As [`EXP64_Q`] for `f32`; relative error below 2^-27.9.
const EXP32_Q: [f64; 5] = [
    c32(0x3EFF_FFFE),
    c32(0x3E2A_AA49),
    c32(0x3D2A_AC79),
    c32(0x3C09_1CF0),
    c32(0x3AB5_121E),
];

#[inline(always)]
fn exp_kernel<E: Emit>(e: &mut E, x: E::F, p: &Prec, q: &[f64], lo: f64, hi: f64) -> E::F {
    let x = clamp(e, x, lo, hi);
    let inv = e.f(p.inv_ln2);
    let sh = e.f(p.shift);
    let t = e.mul(x, inv);
    let z = e.add(t, sh);
    let n = e.sub(z, sh);
    let c1 = e.f(p.ln2_hi);
    let a = e.mul(n, c1);
    let r = e.sub(x, a);
    let c2 = e.f(p.ln2_lo);
    let b = e.mul(n, c2);
    let hi = r;
    let r = e.sub(hi, b);
    // r_lo: the rounding error of r (hi is exact).
    let d = e.sub(hi, r);
    let rlo = e.sub(d, b);
    // e^(r + r_lo) - 1 ~ r + (r_lo + r (r q + r_lo))
    let q = poly(e, r, q);
    let u = e.mul(r, q);
    let u = e.add(u, rlo);
    let u = e.mul(r, u);
    let u = e.add(rlo, u);
    let t = e.add(r, u);
    let one = e.f(1.0);
    let y = e.add(one, t);
    // 2^n = 2^n1 * 2^n2 with m = n + 2 bias, n1 = (m >> 1) - bias, n2 = (m
    // - (m >> 1)) - bias: both normal for every n of the clamped range.
    let zb = e.to_bits(z);
    let k = e.iconst(2 * p.bias - p.shift_bits);
    let m = e.iadd(zb, k);
    let m1 = e.ushr(m, 1);
    let m2 = e.isub(m, m1);
    let s1 = e.shl(m1, p.mant);
    let s1 = e.of_bits(s1);
    let s2 = e.shl(m2, p.mant);
    let s2 = e.of_bits(s2);
    let y = e.mul(y, s1);
    e.mul(y, s2)
}

fn exp64<E: Emit>(e: &mut E, x: E::F) -> E::F {
    exp_kernel(e, x, &P64, &EXP64_Q, -746.0, 710.0)
}

fn exp32<E: Emit>(e: &mut E, x: E::F) -> E::F {
    exp_kernel(e, x, &P32, &EXP32_Q, -104.0, 89.0)
}

// ---------------------------------------------------------------------------
// log, log1p

/// fdlibm's `Lg1 .. Lg7`: `R(z) = z P(z) ~ 2 atanh(s)/s - 2`, `z = s^2`,
/// `|s| <= 0.1716`; error below 2^-58.45.
const LOG64_P: [f64; 7] = [
    f64::from_bits(0x3FE5_5555_5555_5593), // 0.6666666666666735
    f64::from_bits(0x3FD9_9999_9997_FA04), // 0.3999999999940942
    f64::from_bits(0x3FD2_4924_9422_9359), // 0.2857142874366239
    f64::from_bits(0x3FCC_71C5_1D8E_78AF), // 0.22222198432149784
    f64::from_bits(0x3FC7_4664_96CB_03DE), // 0.1818357216161805
    f64::from_bits(0x3FC3_9A09_D078_C69F), // 0.15313837699209373
    f64::from_bits(0x3FC2_F112_DF3E_5244), // 0.14798198605116586
];

/// As [`LOG64_P`] for `f32`; error below 2^-29.
const LOG32_P: [f64; 3] = [c32(0x3F2A_AABD), c32(0x3ECC_AF5C), c32(0x3E98_F19E)];

/// `log(u) + lo_extra` for positive normal `u` (other `u` give garbage):
/// `k ln2_hi - ((f^2/2 - (s (f^2/2 + R) + (k ln2_lo + lo_extra))) - f)`.
/// `kbias` is the float `shift + 2^(exponent bits - 1)` (plus a scaling
/// exponent), subtracted from `shift + (biased k)` to give `k`.
#[inline(always)]
fn log_core<E: Emit>(
    e: &mut E,
    u: E::F,
    kbias: E::F,
    lo_extra: Option<E::F>,
    p: &Prec,
    lg: &[f64],
) -> E::F {
    let bits = e.to_bits(u);
    // ix = bits - bits(sqrt(1/2)) + 2^(w-1) (wrapping): its top bits are k
    // offset by 2^(exponent bits - 1), its mantissa bits those of m.
    let off = e.iconst(p.sign.wrapping_sub(p.sqrt_half_bits));
    let ix = e.iadd(bits, off);
    let kb = e.ushr(ix, p.mant);
    let shb = e.iconst(p.shift_bits);
    let kb = e.iadd(kb, shb);
    let kf = e.of_bits(kb);
    let k = e.sub(kf, kbias);
    let mask = e.iconst((1i64 << p.mant) - 1);
    let mb = e.iand(ix, mask);
    let sq = e.iconst(p.sqrt_half_bits);
    let mb = e.iadd(mb, sq);
    let m = e.of_bits(mb);
    let one = e.f(1.0);
    let f = e.sub(m, one);
    let half = e.f(0.5);
    let hf = e.mul(half, f);
    let hfsq = e.mul(hf, f);
    let two = e.f(2.0);
    let d = e.add(two, f);
    let s = e.div(f, d);
    let z = e.mul(s, s);
    let pz = poly(e, z, lg);
    let r = e.mul(z, pz);
    let c2 = e.f(p.ln2_lo);
    let lo = e.mul(k, c2);
    let lo = match lo_extra {
        Some(c) => e.add(lo, c),
        None => lo,
    };
    let t = e.add(hfsq, r);
    let t = e.mul(s, t);
    let t = e.add(t, lo);
    let t = e.sub(hfsq, t);
    let t = e.sub(t, f);
    let c1 = e.f(p.ln2_hi);
    let hi = e.mul(k, c1);
    e.sub(hi, t)
}

#[inline(always)]
fn log_kernel<E: Emit>(e: &mut E, x: E::F, p: &Prec, lg: &[f64], min_normal: f64) -> E::F {
    // Subnormals (and, harmlessly, zeros and negatives) are scaled by
    // 2^mant first, and k corrected by the same amount.
    let mn = e.f(min_normal);
    let sub = e.lt(x, mn);
    let scale = e.f((p.mant as f64).exp2());
    let xs = e.mul(x, scale);
    let u = e.select(sub, xs, x);
    let kb0 = e.f(p.shift + p.khalf);
    let kb1 = e.f(p.shift + p.khalf + p.mant as f64);
    let kbias = e.select(sub, kb1, kb0);
    let r = log_core(e, u, kbias, None, p, lg);
    let inf = e.f(f64::INFINITY);
    let m = e.eq(x, inf);
    let r = e.select(m, inf, r);
    let zero = e.f(0.0);
    let m = e.eq(x, zero);
    let ninf = e.f(f64::NEG_INFINITY);
    let r = e.select(m, ninf, r);
    let m = e.ge(x, zero);
    let nan = e.f(f64::NAN);
    e.select(m, r, nan)
}

fn log64<E: Emit>(e: &mut E, x: E::F) -> E::F {
    log_kernel(e, x, &P64, &LOG64_P, f64::MIN_POSITIVE)
}

fn log32<E: Emit>(e: &mut E, x: E::F) -> E::F {
    log_kernel(e, x, &P32, &LOG32_P, f32::MIN_POSITIVE as f64)
}

#[inline(always)]
fn log1p_kernel<E: Emit>(e: &mut E, x: E::F, p: &Prec, lg: &[f64]) -> E::F {
    let one = e.f(1.0);
    let u = e.add(one, x);
    // c = (1 + x) - u exactly, by Fast2Sum with the larger operand first.
    let a = e.sub(u, x);
    let ca = e.sub(one, a);
    let b = e.sub(u, one);
    let cb = e.sub(x, b);
    let big = e.gt(x, one);
    let c = e.select(big, ca, cb);
    let cu = e.div(c, u);
    let kbias = e.f(p.shift + p.khalf);
    let r = log_core(e, u, kbias, Some(cu), p, lg);
    let inf = e.f(f64::INFINITY);
    let m = e.eq(x, inf);
    let r = e.select(m, inf, r);
    let mone = e.f(-1.0);
    let m = e.eq(x, mone);
    let ninf = e.f(f64::NEG_INFINITY);
    let r = e.select(m, ninf, r);
    let m = e.ge(x, mone);
    let nan = e.f(f64::NAN);
    let r = e.select(m, r, nan);
    let zero = e.f(0.0);
    let m = e.eq(x, zero);
    e.select(m, x, r)
}

fn log1p64<E: Emit>(e: &mut E, x: E::F) -> E::F {
    log1p_kernel(e, x, &P64, &LOG64_P)
}

fn log1p32<E: Emit>(e: &mut E, x: E::F) -> E::F {
    log1p_kernel(e, x, &P32, &LOG32_P)
}

// ---------------------------------------------------------------------------
// expm1, tanh

/// `q(r) ~ (e^r - 1 - r) / r^2` on `|r| <= 0.45`; relative error of
/// `r + r^2 q` below 2^-57.4.
const EXPM1_64_Q: [f64; 12] = [
    0.5,
    0.16666666666666666,
    0.041666666666667,
    0.00833333333333305,
    0.001388888888875628,
    0.00019841269841858127,
    2.4801587529324053e-05,
    2.75573187138013e-06,
    2.755713003095348e-07,
    2.5052277541387174e-08,
    2.0951978095169653e-09,
    1.6060064065967036e-10,
];

/// As [`EXPM1_64_Q`] for `f32`; relative error below 2^-32.
const EXPM1_32_Q: [f64; 7] = [
    c32(0x3F00_0000),
    c32(0x3E2A_AAAB),
    c32(0x3D2A_AAAA),
    c32(0x3C08_8802),
    c32(0x3AB6_0C4B),
    c32(0x3951_2CB4),
    c32(0x37CF_FA3F),
];

/// Lanes with `|x|` below this use `n = 0` in expm1.
const EXPM1_SMALL: f64 = 0.45;

/// `e^x - 1` for `x` in the clamped range (`small`: the lanes with `|x| <
/// 0.45`), except that tiny and zero `x` are not exact.
#[inline(always)]
fn expm1_core<E: Emit>(e: &mut E, x: E::F, small: Option<E::M>, p: &Prec, q: &[f64]) -> E::F {
    let inv = e.f(p.inv_ln2);
    let sh = e.f(p.shift);
    let t = e.mul(x, inv);
    let z = e.add(t, sh);
    let z = match small {
        Some(m) => e.select(m, sh, z),
        None => z,
    };
    let n = e.sub(z, sh);
    let c1 = e.f(p.ln2_hi);
    let a = e.mul(n, c1);
    let hi = e.sub(x, a);
    let c2 = e.f(p.ln2_lo);
    let b = e.mul(n, c2);
    let r = e.sub(hi, b);
    let d = e.sub(hi, r);
    let rlo = e.sub(d, b);
    let q = poly(e, r, q);
    let u = e.mul(r, q);
    let u = e.add(u, rlo);
    let u = e.mul(r, u);
    let u = e.add(rlo, u);
    let pm = e.add(r, u);
    // s = 2^(n-1); e^x - 1 = 2 (s p + (s - 1/2)).
    let zb = e.to_bits(z);
    let k = e.iconst(p.bias - 1 - p.shift_bits);
    let sb = e.iadd(zb, k);
    let sb = e.shl(sb, p.mant);
    let s = e.of_bits(sb);
    let sp = e.mul(s, pm);
    let half = e.f(0.5);
    let sm = e.sub(s, half);
    let y = e.add(sp, sm);
    let two = e.f(2.0);
    e.mul(y, two)
}

#[inline(always)]
fn expm1_kernel<E: Emit>(
    e: &mut E,
    x: E::F,
    p: &Prec,
    q: &[f64],
    lo: f64,
    hi: f64,
    tiny: f64,
) -> E::F {
    let a = e.abs(x);
    let xc = clamp(e, x, lo, hi);
    let sm = e.f(EXPM1_SMALL);
    let small = e.lt(a, sm);
    let y = expm1_core(e, xc, Some(small), p, q);
    let tn = e.f(tiny);
    let m = e.lt(a, tn);
    e.select(m, x, y)
}

fn expm1_64<E: Emit>(e: &mut E, x: E::F) -> E::F {
    expm1_kernel(e, x, &P64, &EXPM1_64_Q, -40.0, 710.0, 2f64.powi(-54))
}

fn expm1_32<E: Emit>(e: &mut E, x: E::F) -> E::F {
    expm1_kernel(e, x, &P32, &EXPM1_32_Q, -18.0, 89.0, 2f64.powi(-25))
}

/// `T(z) ~ (tanh x - x) / x^3`, `z = x^2`, on `|x| <= 0.55`; relative error
/// of `x + x^3 T` below 2^-58.5.
const TANH64_T: [f64; 11] = [
    -0.333333333333333,
    0.13333333333326622,
    -0.053968253963760614,
    0.021869488385855843,
    -0.008863232601440639,
    0.003592092030423788,
    -0.0014555428456520711,
    0.0005884444857684344,
    -0.00023338156419814616,
    8.33164459887451e-05,
    -1.9494686736645316e-05,
];

/// As [`TANH64_T`] for `f32`; relative error below 2^-27.7.
const TANH32_T: [f64; 5] = [
    c32(0xBEAA_AAA5),
    c32(0x3E08_8693),
    c32(0xBD5C_943D),
    c32(0x3CAC_9E83),
    c32(0xBBCD_9822),
];

/// From this `|x|` on (where `tanh >= 1/2`), tanh is `1 - 2 / (expm1(2|x|)
/// + 2)`, below it the odd polynomial.
const TANH_SWITCH: f64 = 0.55;

#[inline(always)]
fn tanh_kernel<E: Emit>(e: &mut E, x: E::F, p: &Prec, t_poly: &[f64], q: &[f64], sat: f64) -> E::F {
    let a = e.abs(x);
    let s = e.f(sat);
    let m = e.gt(a, s);
    let a = e.select(m, s, a);
    // |x| < 0.55: a + a^3 T(a^2)
    let z = e.mul(a, a);
    let tp = poly(e, z, t_poly);
    let v = e.mul(a, z);
    let v = e.mul(v, tp);
    let small = e.add(a, v);
    // |x| >= 0.55: 1 - 2 / (expm1(2a) + 2)
    let two = e.f(2.0);
    let y = e.mul(a, two);
    let t = expm1_core(e, y, None, p, q);
    let d = e.add(t, two);
    let r = e.div(two, d);
    let one = e.f(1.0);
    let large = e.sub(one, r);
    let sw = e.f(TANH_SWITCH);
    let big = e.ge(a, sw);
    let r = e.select(big, large, small);
    // r with the sign of x (r >= 0, or NaN).
    let rb = e.to_bits(r);
    let am = e.iconst(!p.sign);
    let rb = e.iand(rb, am);
    let xb = e.to_bits(x);
    let sg = e.iconst(p.sign);
    let xb = e.iand(xb, sg);
    let rb = e.ior(rb, xb);
    e.of_bits(rb)
}

fn tanh64<E: Emit>(e: &mut E, x: E::F) -> E::F {
    tanh_kernel(e, x, &P64, &TANH64_T, &EXPM1_64_Q, 20.0)
}

fn tanh32<E: Emit>(e: &mut E, x: E::F) -> E::F {
    tanh_kernel(e, x, &P32, &TANH32_T, &EXPM1_32_Q, 10.0)
}

// ---------------------------------------------------------------------------
// sin, cos

/// fdlibm's `S1 .. S6`: `sin r ~ r + r^3 S(r^2)` on `|r| <= pi/4`.
const SIN64_S: [f64; 6] = [
    f64::from_bits(0xBFC5_5555_5555_5549), // -0.16666666666666632
    f64::from_bits(0x3F81_1111_1110_F8A6), // 0.00833333333332249
    f64::from_bits(0xBF2A_01A0_19C1_61D5), // -0.0001984126982985795
    f64::from_bits(0x3EC7_1DE3_57B1_FE7D), // 2.7557313707070068e-06
    f64::from_bits(0xBE5A_E5E6_8A2B_9CEB), // -2.5050760253406863e-08
    f64::from_bits(0x3DE5_D93A_5ACF_D57C), // 1.58969099521155e-10
];

/// fdlibm's `C1 .. C6`: `cos r ~ 1 - r^2/2 + r^4 C(r^2)` on `|r| <= pi/4`.
const COS64_C: [f64; 6] = [
    f64::from_bits(0x3FA5_5555_5555_554C), // 0.0416666666666666
    f64::from_bits(0xBF56_C16C_16C1_5177), // -0.001388888888887411
    f64::from_bits(0x3EFA_01A0_19CB_1590), // 2.480158728947673e-05
    f64::from_bits(0xBE92_7E4F_809C_52AD), // -2.7557314351390663e-07
    f64::from_bits(0x3E21_EE9E_BDB4_B1C4), // 2.087572321298175e-09
    f64::from_bits(0xBDA8_FAE9_BE88_38D4), // -1.1359647557788195e-11
];

/// As [`SIN64_S`] for `f32`; relative error below 2^-28.
const SIN32_S: [f64; 4] = [
    c32(0xBE2A_AAAB),
    c32(0x3C08_8884),
    c32(0xB950_07BF),
    c32(0x3636_68D8),
];

/// As [`COS64_C`] for `f32`; relative error below 2^-32.
const COS32_C: [f64; 3] = [c32(0x3D2A_AAA5), c32(0xBAB6_0619), c32(0x37CC_F5A5)];

/// `pi/2` in four parts (fdlibm's `pio2_1`, `pio2_2`, `pio2_3`,
/// `pio2_3t`); the first three have at most 32 significant bits.
const PIO2_64: [f64; 4] = [
    f64::from_bits(0x3FF9_21FB_5440_0000),
    f64::from_bits(0x3DD0_B461_1A60_0000),
    f64::from_bits(0x3BA3_198A_2E00_0000),
    f64::from_bits(0x397B_839A_2520_49C1),
];

/// `pi/2` in four parts, the first three with at most 12 significant bits.
const PIO2_32: [f64; 4] = [
    c32(0x3FC9_1000),
    c32(0xB695_7000),
    c32(0xB06F_5000),
    c32(0x298C_234C),
];

/// The fast path of sin/cos covers `|x| <= ` this (f64).
pub const SINCOS64_MAX: f64 = 1048576.0;
/// The fast path of sin/cos covers `|x| <= ` this (f32).
pub const SINCOS32_MAX: f64 = 4096.0;

struct SinCos<'a> {
    two_over_pi: f64,
    pio2: &'a [f64; 4],
    s: &'a [f64],
    c: &'a [f64],
    max: f64,
}

#[inline(always)]
fn sincos_kernel<E: Emit>(e: &mut E, x: E::F, cos: bool, p: &Prec, k: &SinCos) -> E::F {
    let a = e.abs(x);
    let mx = e.f(k.max);
    let ok = e.le(a, mx);
    let slow = e.not_m(ok);
    let tp = e.f(k.two_over_pi);
    let sh = e.f(p.shift);
    let t = e.mul(x, tp);
    let z = e.add(t, sh);
    let n = e.sub(z, sh);
    // r = x - n pi/2 as rh + rl: x - n P1 is exact, the two next
    // subtractions are followed by their exact rounding errors (exact also
    // when they cancel, since then they are exact themselves), n P4 is a
    // small tail.
    let c = e.f(k.pio2[0]);
    let w = e.mul(n, c);
    let t1 = e.sub(x, w);
    let c = e.f(k.pio2[1]);
    let w2 = e.mul(n, c);
    let r1 = e.sub(t1, w2);
    let d = e.sub(t1, r1);
    let e1 = e.sub(d, w2);
    let c = e.f(k.pio2[2]);
    let w3 = e.mul(n, c);
    let r2 = e.sub(r1, w3);
    let d = e.sub(r1, r2);
    let e2 = e.sub(d, w3);
    let lo = e.add(e1, e2);
    let c = e.f(k.pio2[3]);
    let w4 = e.mul(n, c);
    let lo = e.sub(lo, w4);
    let rh = e.add(r2, lo);
    let d = e.sub(r2, rh);
    let rl = e.add(d, lo);
    let z2 = e.mul(rh, rh);
    let half = e.f(0.5);
    let hz = e.mul(half, z2);
    // sin(rh + rl) ~ rh + ((z rh) S(z) + (rl - (z/2) rl))
    let sp = poly(e, z2, k.s);
    let v = e.mul(z2, rh);
    let sv = e.mul(v, sp);
    let hl = e.mul(hz, rl);
    let c1 = e.sub(rl, hl);
    let sv = e.add(sv, c1);
    let sn = e.add(rh, sv);
    // cos(rh + rl) ~ w + (((1 - w) - z/2) + (z^2 C(z) - rh rl)), w = 1 - z/2
    let one = e.f(1.0);
    let w = e.sub(one, hz);
    let d = e.sub(one, w);
    let d = e.sub(d, hz);
    let cp = poly(e, z2, k.c);
    let zz = e.mul(z2, z2);
    let cr = e.mul(zz, cp);
    let rr = e.mul(rh, rl);
    let cr = e.sub(cr, rr);
    let d = e.add(d, cr);
    let cs = e.add(w, d);
    // Quadrant j = n (+ 1 for cos) mod 4: odd takes cos r, j & 2 negates.
    let j = e.to_bits(z);
    let j = if cos {
        let one = e.iconst(1);
        e.iadd(j, one)
    } else {
        j
    };
    let one_i = e.iconst(1);
    let odd = e.iand(j, one_i);
    let odd = e.nonzero(odd);
    let res = e.select(odd, cs, sn);
    let sg = e.shl(j, p.width - 2);
    let sm = e.iconst(p.sign);
    let sg = e.iand(sg, sm);
    let rb = e.to_bits(res);
    let rb = e.ixor(rb, sg);
    let res = e.of_bits(rb);
    let res = if cos {
        res
    } else {
        // sin(±0) = ±0 (the polynomial gives +0 for -0).
        let zero = e.f(0.0);
        let m = e.eq(x, zero);
        e.select(m, x, res)
    };
    let f = if cos { VFn::Cos } else { VFn::Sin };
    e.slow(f, slow, x, res)
}

fn sincos64<E: Emit>(e: &mut E, x: E::F, cos: bool) -> E::F {
    let k = SinCos {
        two_over_pi: std::f64::consts::FRAC_2_PI,
        pio2: &PIO2_64,
        s: &SIN64_S,
        c: &COS64_C,
        max: SINCOS64_MAX,
    };
    sincos_kernel(e, x, cos, &P64, &k)
}

fn sincos32<E: Emit>(e: &mut E, x: E::F, cos: bool) -> E::F {
    let k = SinCos {
        two_over_pi: c32(0x3F22_F983),
        pio2: &PIO2_32,
        s: &SIN32_S,
        c: &COS32_C,
        max: SINCOS32_MAX,
    };
    sincos_kernel(e, x, cos, &P32, &k)
}
