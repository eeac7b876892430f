//! The `exp` kernels.

use super::{c32, clamp, poly, Emit, Prec, P32, P64};

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

pub(super) fn exp64<E: Emit>(e: &mut E, x: E::F) -> E::F {
    exp_kernel(e, x, &P64, &EXP64_Q, -746.0, 710.0)
}

pub(super) fn exp32<E: Emit>(e: &mut E, x: E::F) -> E::F {
    exp_kernel(e, x, &P32, &EXP32_Q, -104.0, 89.0)
}
