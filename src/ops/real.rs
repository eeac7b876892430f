//! Arithmetic in the program's own precision ([`Real`], for `f32`, `f64`
//! and `i64`)
//! and the IEEE `maximum`/`minimum` the evaluator uses.

/// Arithmetic both precisions share, so the evaluator runs in the program's
/// own precision (f32 math is done in f32, through the same libm the JIT calls).
pub trait Real: Copy {
    fn from_f64(x: f64) -> Self;
    fn to_f64(self) -> f64;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn div(self, o: Self) -> Self;
    /// Remainder with the divisor's sign (`a - floor(a / b) * b`).
    fn rem(self, o: Self) -> Self;
    fn neg(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    fn sqrt(self) -> Self;
    fn tanh(self) -> Self;
    fn tan(self) -> Self;
    fn abs(self) -> Self;
    fn ln_1p(self) -> Self;
    fn exp_m1(self) -> Self;
    fn powf(self, o: Self) -> Self;
    fn lt(self, o: Self) -> bool;
    fn le(self, o: Self) -> bool;
    fn eq(self, o: Self) -> bool;
    fn is_nan(self) -> bool;
    fn is_sign_negative(self) -> bool;
}

/// IEEE 754-2019 `maximum`: NaN if either is NaN, and +0 above -0 (what
/// Cranelift's `fmax` computes).
pub(super) fn maximum<T: Real>(a: T, b: T) -> T {
    if a.is_nan() || b.is_nan() {
        T::from_f64(f64::NAN)
    } else if a.lt(b) {
        b
    } else if b.lt(a) || b.is_sign_negative() {
        a
    } else {
        b
    }
}

/// IEEE 754-2019 `minimum`: NaN if either is NaN, and -0 below +0.
pub(super) fn minimum<T: Real>(a: T, b: T) -> T {
    if a.is_nan() || b.is_nan() {
        T::from_f64(f64::NAN)
    } else if a.lt(b) {
        a
    } else if b.lt(a) || b.is_sign_negative() {
        b
    } else {
        a
    }
}

pub(super) fn mask<T: Real>(c: bool) -> T {
    T::from_f64(if c { 1.0 } else { 0.0 })
}

// The elementary functions are egrad's own kernels (`crate::vmath`): the
// generated code emits the same op sequences, so the interpreter, constant
// folding and native code agree bit for bit.
macro_rules! impl_real {
    ($t:ty, $sin:ident, $cos:ident, $exp:ident, $log:ident, $tanh:ident, $log1p:ident, $expm1:ident) => {
        impl Real for $t {
            fn from_f64(x: f64) -> Self {
                x as $t
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn add(self, o: Self) -> Self {
                self + o
            }
            fn sub(self, o: Self) -> Self {
                self - o
            }
            fn mul(self, o: Self) -> Self {
                self * o
            }
            fn div(self, o: Self) -> Self {
                self / o
            }
            fn rem(self, o: Self) -> Self {
                self - (self / o).floor() * o
            }
            fn neg(self) -> Self {
                -self
            }
            fn sin(self) -> Self {
                crate::vmath::$sin(self)
            }
            fn cos(self) -> Self {
                crate::vmath::$cos(self)
            }
            fn exp(self) -> Self {
                crate::vmath::$exp(self)
            }
            fn ln(self) -> Self {
                crate::vmath::$log(self)
            }
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            fn tanh(self) -> Self {
                crate::vmath::$tanh(self)
            }
            fn tan(self) -> Self {
                <$t>::tan(self)
            }
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            fn ln_1p(self) -> Self {
                crate::vmath::$log1p(self)
            }
            fn exp_m1(self) -> Self {
                crate::vmath::$expm1(self)
            }
            fn powf(self, o: Self) -> Self {
                <$t>::powf(self, o)
            }
            fn lt(self, o: Self) -> bool {
                self < o
            }
            fn le(self, o: Self) -> bool {
                self <= o
            }
            fn eq(self, o: Self) -> bool {
                self == o
            }
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            fn is_sign_negative(self) -> bool {
                <$t>::is_sign_negative(self)
            }
        }
    };
}
impl_real!(f32, sin_f32, cos_f32, exp_f32, log_f32, tanh_f32, log1p_f32, expm1_f32);
impl_real!(f64, sin_f64, cos_f64, exp_f64, log_f64, tanh_f64, log1p_f64, expm1_f64);

/// `a / b` rounded toward minus infinity and `a % b` with the divisor's
/// sign (NumPy's `//` and `%`); `(0, 0)` for `b = 0`, and `(-a, 0)`
/// (wrapping) for `b = -1`. The one definition of integer division: the
/// evaluator, static folding and (instruction for instruction) the native
/// lowering follow it.
pub fn floor_div_rem(a: i64, b: i64) -> (i64, i64) {
    match b {
        0 => (0, 0),
        -1 => (a.wrapping_neg(), 0),
        _ => {
            let (q, r) = (a / b, a % b);
            if r != 0 && ((r < 0) != (b < 0)) {
                (q - 1, r + b)
            } else {
                (q, r)
            }
        }
    }
}

/// Integers, as native code computes them: `+ - *` and negation wrap
/// around (two's complement); `/` rounds toward minus infinity and `%` has
/// the divisor's sign (NumPy's `//` and `%`); dividing by zero gives 0 for
/// both. The functions of real analysis are never applied to integers
/// (their type rules refuse them): they go through `f64` here only so the
/// trait is total.
impl Real for i64 {
    fn from_f64(x: f64) -> Self {
        // Truncation toward zero, saturating, NaN to 0.
        x as i64
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn add(self, o: Self) -> Self {
        self.wrapping_add(o)
    }
    fn sub(self, o: Self) -> Self {
        self.wrapping_sub(o)
    }
    fn mul(self, o: Self) -> Self {
        self.wrapping_mul(o)
    }
    fn div(self, o: Self) -> Self {
        floor_div_rem(self, o).0
    }
    fn rem(self, o: Self) -> Self {
        floor_div_rem(self, o).1
    }
    fn neg(self) -> Self {
        self.wrapping_neg()
    }
    fn sin(self) -> Self {
        (self as f64).sin() as i64
    }
    fn cos(self) -> Self {
        (self as f64).cos() as i64
    }
    fn exp(self) -> Self {
        (self as f64).exp() as i64
    }
    fn ln(self) -> Self {
        (self as f64).ln() as i64
    }
    fn sqrt(self) -> Self {
        (self as f64).sqrt() as i64
    }
    fn tanh(self) -> Self {
        (self as f64).tanh() as i64
    }
    fn tan(self) -> Self {
        (self as f64).tan() as i64
    }
    fn abs(self) -> Self {
        self.wrapping_abs()
    }
    fn ln_1p(self) -> Self {
        (self as f64).ln_1p() as i64
    }
    fn exp_m1(self) -> Self {
        (self as f64).exp_m1() as i64
    }
    fn powf(self, o: Self) -> Self {
        (self as f64).powf(o as f64) as i64
    }
    fn lt(self, o: Self) -> bool {
        self < o
    }
    fn le(self, o: Self) -> bool {
        self <= o
    }
    fn eq(self, o: Self) -> bool {
        self == o
    }
    fn is_nan(self) -> bool {
        false
    }
    fn is_sign_negative(self) -> bool {
        self < 0
    }
}
