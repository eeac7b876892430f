//! The `log` and `log1p` kernels (one shared core).

use super::{c32, poly, Emit, Prec, P32, P64};

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

pub(super) fn log64<E: Emit>(e: &mut E, x: E::F) -> E::F {
    log_kernel(e, x, &P64, &LOG64_P, f64::MIN_POSITIVE)
}

pub(super) fn log32<E: Emit>(e: &mut E, x: E::F) -> E::F {
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

pub(super) fn log1p64<E: Emit>(e: &mut E, x: E::F) -> E::F {
    log1p_kernel(e, x, &P64, &LOG64_P)
}

pub(super) fn log1p32<E: Emit>(e: &mut E, x: E::F) -> E::F {
    log1p_kernel(e, x, &P32, &LOG32_P)
}
