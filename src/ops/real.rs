//! Arithmetic in the program's own precision ([`Real`], for `f32`, `f64`
//! and `i64`)
//! and the IEEE `maximum`/`minimum` the evaluator uses.

/// Arithmetic both precisions share, so the evaluator runs in the program's
/// own precision (f32 math is done in f32, as the JIT does it).
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

// The elementary functions are rows of the math table (`super::math`).
macro_rules! impl_real {
    ($t:ty) => {
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
impl_real!(f32);
impl_real!(f64);

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
/// both. `powf` is never applied to integers (its type rule refuses
/// them): it goes through `f64` here only so the trait is total.
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
