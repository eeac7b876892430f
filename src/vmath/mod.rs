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

mod block;
mod exp;
mod expm1;
mod log;
mod scalar;
mod sincos;

pub use block::{block_id, blocked, egrad_vmath_block_f32, egrad_vmath_block_f64};
use exp::{exp32, exp64};
use expm1::{expm1_32, expm1_64, tanh32, tanh64};
use log::{log1p32, log1p64, log32, log64};
pub use scalar::{
    cos_f32, cos_f64, exp_f32, exp_f64, expm1_f32, expm1_f64, log1p_f32, log1p_f64, log_f32,
    log_f64, sin_f32, sin_f64, tanh_f32, tanh_f64, Scalar32, Scalar64,
};
use sincos::{sincos32, sincos64};
pub use sincos::{SINCOS32_MAX, SINCOS64_MAX};

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
