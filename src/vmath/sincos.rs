//! The `sin` and `cos` kernels (one shared argument reduction).

use super::{c32, poly, Emit, Prec, VFn, P32, P64};

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

pub(super) fn sincos64<E: Emit>(e: &mut E, x: E::F, cos: bool) -> E::F {
    let k = SinCos {
        two_over_pi: std::f64::consts::FRAC_2_PI,
        pio2: &PIO2_64,
        s: &SIN64_S,
        c: &COS64_C,
        max: SINCOS64_MAX,
    };
    sincos_kernel(e, x, cos, &P64, &k)
}

pub(super) fn sincos32<E: Emit>(e: &mut E, x: E::F, cos: bool) -> E::F {
    let k = SinCos {
        two_over_pi: c32(0x3F22_F983),
        pio2: &PIO2_32,
        s: &SIN32_S,
        c: &COS32_C,
        max: SINCOS32_MAX,
    };
    sincos_kernel(e, x, cos, &P32, &k)
}
