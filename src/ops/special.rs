//! egrad's own special functions: `digamma` (ψ), `trigamma` (ψ') and
//! `tetragamma` (ψ''), for
//! the math table's rows ([`super::math`]), which the interpreter calls and
//! native code calls through the same functions, so both give the same
//! bits. The `f32` versions compute in `f64` and round once.
//!
//! For `x >= 10`, the asymptotic series in `1/x²` (Abramowitz and Stegun
//! 6.3.18 and 6.4.12, seven terms: the next is below 1e-17 relative
//! there); below, the recurrences `ψ(x) = ψ(x + 1) - 1/x` and `ψ'(x) =
//! ψ'(x + 1) + 1/x²` (and `ψ''(x) = ψ''(x + 1) - 2/x³`) up to 10; for `x
//! <= 0`, the reflections `ψ(x) = ψ(1 - x) - π / tan(πx)`, `ψ'(x) = π² /
//! sin²(πx) - ψ'(1 - x)` and `ψ''(x) = ψ''(1 - x) - 2π³ cos(πx) /
//! sin³(πx)`, with `πx` reduced exactly to `π(x - round(x))`. The poles
//! (0 and the negative integers) give NaN, as do NaN and `-inf`; `ψ(+inf)
//! = +inf`, `ψ'(+inf) = 0`, `ψ''(+inf) = -0`. The error is a few units in the last place of the largest term
//! summed: near `ψ`'s positive root (1.4616...) that is an absolute error
//! of about 1e-16, not a relative one.

use std::f64::consts::PI;

/// `x` shifted up to at least 10 by the recurrence: the shifted `x`, and
/// the sum of `f(x + k)` over the shifts.
fn shift(mut x: f64, f: impl Fn(f64) -> f64) -> (f64, f64) {
    let mut acc = 0.0;
    while x < 10.0 {
        acc += f(x);
        x += 1.0;
    }
    (x, acc)
}

/// `sin(π r)` and `cos(π r)` for `x = n + r`, `n = round(x)`, and the sign
/// `(-1)^n` that `sin(πx)` and `cos(πx)` carry.
fn sincospi(x: f64) -> (f64, f64, f64) {
    let n = x.round();
    let r = x - n;
    let sign = if n.rem_euclid(2.0) == 0.0 { 1.0 } else { -1.0 };
    ((PI * r).sin(), (PI * r).cos(), sign)
}

fn is_pole(x: f64) -> bool {
    x <= 0.0 && x == x.floor()
}

/// ψ(x).
pub(super) fn digamma(x: f64) -> f64 {
    if x.is_nan() || x == f64::NEG_INFINITY || is_pole(x) {
        return f64::NAN;
    }
    if x == f64::INFINITY {
        return x;
    }
    if x < 0.0 {
        // cot(πx) = cos(πx)/sin(πx); the signs (-1)^n cancel.
        let (s, c, _) = sincospi(x);
        return digamma(1.0 - x) - PI * c / s;
    }
    let (y, below) = shift(x, |t| 1.0 / t);
    let z = 1.0 / (y * y);
    let series = z
        * (1.0 / 12.0
            - z * (1.0 / 120.0
                - z * (1.0 / 252.0
                    - z * (1.0 / 240.0 - z * (1.0 / 132.0 - z * (691.0 / 32760.0 - z / 12.0))))));
    y.ln() - 0.5 / y - series - below
}

/// ψ'(x).
pub(super) fn trigamma(x: f64) -> f64 {
    if x.is_nan() || x == f64::NEG_INFINITY || is_pole(x) {
        return f64::NAN;
    }
    if x == f64::INFINITY {
        return 0.0;
    }
    if x < 0.0 {
        let (s, _, _) = sincospi(x);
        return PI * PI / (s * s) - trigamma(1.0 - x);
    }
    let (y, below) = shift(x, |t| 1.0 / (t * t));
    let r = 1.0 / y;
    let z = r * r;
    // 1/y + 1/(2y²) + Σ B_2k / y^(2k+1).
    let series = r
        + 0.5 * z
        + r * z
            * (1.0 / 6.0
                - z * (1.0 / 30.0
                    - z * (1.0 / 42.0
                        - z * (1.0 / 30.0
                            - z * (5.0 / 66.0 - z * (691.0 / 2730.0 - z * 7.0 / 6.0))))));
    series + below
}

/// ψ''(x), the derivative of ψ'.
pub(super) fn tetragamma(x: f64) -> f64 {
    if x.is_nan() || x == f64::NEG_INFINITY || is_pole(x) {
        return f64::NAN;
    }
    if x == f64::INFINITY {
        return -0.0;
    }
    if x < 0.0 {
        // cos(πx)/sin³(πx): the signs (-1)^n cancel.
        let (s, c, _) = sincospi(x);
        return tetragamma(1.0 - x) - 2.0 * PI * PI * PI * c / (s * s * s);
    }
    let (y, below) = shift(x, |t| -2.0 / (t * t * t));
    let r = 1.0 / y;
    let z = r * r;
    // -(1/y² + 1/y³ + Σ (2k+1) B_2k / y^(2k+2)).
    let series = z
        + r * z
        + z * z
            * (0.5
                - z * (1.0 / 6.0
                    - z * (1.0 / 6.0
                        - z * (3.0 / 10.0
                            - z * (5.0 / 6.0 - z * (691.0 / 210.0 - z * 35.0 / 2.0))))));
    below - series
}

pub(super) fn tetragammaf(x: f32) -> f32 {
    tetragamma(f64::from(x)) as f32
}

pub(super) fn digammaf(x: f32) -> f32 {
    digamma(f64::from(x)) as f32
}

pub(super) fn trigammaf(x: f32) -> f32 {
    trigamma(f64::from(x)) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    const EULER: f64 = 0.577_215_664_901_532_9;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1.0)
    }

    #[test]
    fn known_values_recurrences_and_reflections() {
        assert!(close(digamma(1.0), -EULER, 1e-15));
        assert!(close(digamma(0.5), -EULER - 2.0 * 2f64.ln(), 1e-15));
        assert!(close(trigamma(1.0), PI * PI / 6.0, 1e-15));
        assert!(close(trigamma(0.5), PI * PI / 2.0, 1e-15));
        for &x in &[0.1, 0.7, 1.4616, 3.3, 9.99, 10.0, 25.5, 1e6] {
            assert!(
                close(digamma(x + 1.0), digamma(x) + 1.0 / x, 1e-14),
                "ψ at {x}"
            );
            assert!(
                close(trigamma(x + 1.0), trigamma(x) - 1.0 / (x * x), 1e-13),
                "ψ' at {x}"
            );
        }
        for &x in &[-0.5, -1.3, -2.75, -10.2] {
            assert!(
                close(digamma(1.0 - x) - digamma(x), PI / (PI * x).tan(), 1e-12),
                "reflection at {x}"
            );
            let s = (PI * x).sin();
            assert!(
                close(trigamma(1.0 - x) + trigamma(x), PI * PI / (s * s), 1e-12),
                "reflection' at {x}"
            );
        }
        for &x in &[0.0, -1.0, -7.0, f64::NAN, f64::NEG_INFINITY] {
            assert!(digamma(x).is_nan() && trigamma(x).is_nan(), "{x}");
        }
        assert_eq!(digamma(f64::INFINITY), f64::INFINITY);
        assert_eq!(trigamma(f64::INFINITY), 0.0);
    }

    /// ψ'' at known values (`ψ''(1) = -2ζ(3)`, `ψ''(1/2) = -14ζ(3)`), its
    /// recurrence and reflection, and trigamma's central differences.
    #[test]
    fn tetragamma_is_trigamma_s_derivative() {
        const ZETA3: f64 = 1.202_056_903_159_594_2;
        assert!(close(tetragamma(1.0), -2.0 * ZETA3, 1e-15));
        assert!(close(tetragamma(0.5), -14.0 * ZETA3, 1e-15));
        for &x in &[0.1f64, 0.7, 1.4616, 3.3, 9.99, 10.0, 25.5, 1e3] {
            // (The sum cancels: the error is relative to its largest term.)
            let step = 2.0 / (x * x * x);
            let (a, b) = (tetragamma(x + 1.0), tetragamma(x) + step);
            assert!(
                (a - b).abs() <= 1e-14 * step.max(1.0),
                "ψ'' at {x}: {a} vs {b}"
            );
        }
        for &x in &[0.3f64, 2.5, 12.0, -0.5, -1.3, -2.75, -10.2] {
            let h = 1e-6;
            let fd = (trigamma(x + h) - trigamma(x - h)) / (2.0 * h);
            assert!(
                close(tetragamma(x), fd, 1e-7),
                "ψ'' at {x}: {} vs {fd}",
                tetragamma(x)
            );
        }
        for &x in &[0.0, -1.0, -7.0, f64::NAN, f64::NEG_INFINITY] {
            assert!(tetragamma(x).is_nan(), "{x}");
        }
        assert_eq!(tetragamma(f64::INFINITY), 0.0);
    }
}
