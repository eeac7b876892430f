//! The `expm1` and `tanh` kernels (tanh uses expm1's core above 0.55).

use super::{c32, clamp, poly, Emit, Prec, P32, P64};

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

pub(super) fn expm1_64<E: Emit>(e: &mut E, x: E::F) -> E::F {
    expm1_kernel(e, x, &P64, &EXPM1_64_Q, -40.0, 710.0, 2f64.powi(-54))
}

pub(super) fn expm1_32<E: Emit>(e: &mut E, x: E::F) -> E::F {
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

pub(super) fn tanh64<E: Emit>(e: &mut E, x: E::F) -> E::F {
    tanh_kernel(e, x, &P64, &TANH64_T, &EXPM1_64_Q, 20.0)
}

pub(super) fn tanh32<E: Emit>(e: &mut E, x: E::F) -> E::F {
    tanh_kernel(e, x, &P32, &TANH32_T, &EXPM1_32_Q, 10.0)
}
