//! Accuracy and special values of `egrad::internals::vmath`.
//!
//! f64 results are measured against a double-double reference written here
//! (exp by reduction, a short Taylor series and ten squarings; log and
//! log1p by a Newton step on it; expm1 and tanh by series or from exp;
//! sin/cos by a four-part reduction and series), f32 results against std's
//! f64 functions. Sampling is deterministic (splitmix64 with fixed seeds).
//! `VMATH_SAMPLES` overrides the number of samples per range; every range
//! prints its maximum error, the argument where it occurred and std's
//! maximum on the same samples (run with `--nocapture` to see the table).

use egrad::internals::vmath::{self, VFn};

// ---------------------------------------------------------------------------
// Sampling.

struct Rng(u64);

impl Rng {
    /// splitmix64's stream: the suite's mixer of the state, then a step.
    fn next(&mut self) -> u64 {
        let z = egrad::internals::suite::splitmix64(self.0);
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z
    }

    /// Uniform in `[a, b]`.
    fn uniform(&mut self, a: f64, b: f64) -> f64 {
        let u = (self.next() >> 11) as f64 * 2f64.powi(-53);
        a + (b - a) * u
    }

    /// Uniform over the bit patterns of the f64s in `[a, b]`, `0 <= a < b`,
    /// with a random sign if `signed`.
    fn bits(&mut self, a: f64, b: f64, signed: bool) -> f64 {
        let (lo, hi) = (a.to_bits(), b.to_bits());
        let x = f64::from_bits(lo + self.next() % (hi - lo + 1));
        if signed && self.next() & 1 == 1 {
            -x
        } else {
            x
        }
    }

    /// As [`Rng::bits`] over f32s.
    fn bits32(&mut self, a: f32, b: f32, signed: bool) -> f32 {
        let (lo, hi) = (a.to_bits() as u64, b.to_bits() as u64);
        let x = f32::from_bits((lo + self.next() % (hi - lo + 1)) as u32);
        if signed && self.next() & 1 == 1 {
            -x
        } else {
            x
        }
    }
}

fn samples() -> usize {
    match std::env::var("VMATH_SAMPLES") {
        Ok(s) => s.parse().unwrap_or(50_000),
        Err(_) if cfg!(debug_assertions) => 10_000,
        Err(_) => 50_000,
    }
}

// ---------------------------------------------------------------------------
// Double-double reference.

#[derive(Clone, Copy, Debug)]
struct Dd {
    hi: f64,
    lo: f64,
}

fn dd(x: f64) -> Dd {
    Dd { hi: x, lo: 0.0 }
}

fn two_sum(a: f64, b: f64) -> Dd {
    let s = a + b;
    let bb = s - a;
    Dd {
        hi: s,
        lo: (a - (s - bb)) + (b - bb),
    }
}

fn quick(a: f64, b: f64) -> Dd {
    let s = a + b;
    Dd {
        hi: s,
        lo: b - (s - a),
    }
}

fn two_prod(a: f64, b: f64) -> Dd {
    let p = a * b;
    Dd {
        hi: p,
        lo: a.mul_add(b, -p),
    }
}

impl Dd {
    fn add(self, o: Dd) -> Dd {
        let s = two_sum(self.hi, o.hi);
        let t = two_sum(self.lo, o.lo);
        let s = quick(s.hi, s.lo + t.hi);
        quick(s.hi, s.lo + t.lo)
    }
    fn neg(self) -> Dd {
        Dd {
            hi: -self.hi,
            lo: -self.lo,
        }
    }
    fn sub(self, o: Dd) -> Dd {
        self.add(o.neg())
    }
    fn mul(self, o: Dd) -> Dd {
        let p = two_prod(self.hi, o.hi);
        quick(p.hi, p.lo + (self.hi * o.lo + self.lo * o.hi))
    }
    fn mulf(self, b: f64) -> Dd {
        let p = two_prod(self.hi, b);
        quick(p.hi, p.lo + self.lo * b)
    }
    fn div(self, o: Dd) -> Dd {
        let q1 = self.hi / o.hi;
        let r = self.sub(o.mulf(q1));
        let q2 = r.hi / o.hi;
        let r = r.sub(o.mulf(q2));
        let q3 = r.hi / o.hi;
        quick(q1, q2).add(dd(q3))
    }
    /// `self * 2^k`, exact barring underflow.
    fn scale(self, k: i32) -> Dd {
        Dd {
            hi: ldexp(self.hi, k),
            lo: ldexp(self.lo, k),
        }
    }
}

/// `x * 2^k` in two exact steps.
fn ldexp(x: f64, k: i32) -> f64 {
    let a = k / 2;
    x * 2f64.powi(a) * 2f64.powi(k - a)
}

/// `x = f 2^e`, `1 <= f < 2` (positive normal or subnormal `x`).
fn frexp(x: f64) -> (f64, i32) {
    let mut e = 0;
    let mut x = x;
    if x < f64::MIN_POSITIVE {
        x *= 2f64.powi(64);
        e -= 64;
    }
    let b = x.to_bits();
    let be = ((b >> 52) & 0x7FF) as i32 - 1023;
    (
        f64::from_bits((b & !(0x7FFu64 << 52)) | (1023u64 << 52)),
        e + be,
    )
}

const LN2: [f64; 3] = [
    std::f64::consts::LN_2,
    2.3190468138462996e-17,
    5.707708438416212e-34,
];
const PIO2: [f64; 4] = [
    std::f64::consts::FRAC_PI_2,
    6.123233995736766e-17,
    -1.4973849048591698e-33,
    5.562271104316826e-50,
];

/// A reference value `m * 2^k`.
#[derive(Clone, Copy, Debug)]
struct Ref {
    m: Dd,
    k: i32,
}

fn r0(m: Dd) -> Ref {
    Ref { m, k: 0 }
}

/// `e^x = m 2^k` for finite `x`.
fn exp_dd(x: Dd) -> (Dd, i32) {
    let k = (x.hi / LN2[0]).round();
    let mut r = x;
    for c in LN2 {
        r = r.sub(two_prod(k, c));
    }
    let r = r.scale(-10);
    let mut s = dd(1.0);
    for i in (1..=13).rev() {
        s = dd(1.0).add(s.mul(r).div(dd(i as f64)));
    }
    for _ in 0..10 {
        s = s.mul(s);
    }
    (s, k as i32)
}

fn exp_ref(x: f64) -> Ref {
    let (m, k) = exp_dd(dd(x));
    Ref { m, k }
}

/// `ln x` for positive finite `x` (a Newton step from std's value).
fn log_ref(x: f64) -> Ref {
    let y0 = x.ln();
    let (m, k) = exp_dd(dd(-y0));
    let (f, e) = frexp(x);
    let p = m.mulf(f).scale(k + e);
    let t = p.sub(dd(1.0));
    r0(dd(y0).add(t).sub(t.mul(t).mulf(0.5)))
}

fn log1p_ref(x: f64) -> Ref {
    if x.abs() < 2f64.powi(-20) {
        // x - x^2/2 + x^3/3 - ...
        let mut s = dd(0.0);
        for i in (1..=7).rev() {
            let c = dd(if i % 2 == 1 { 1.0 } else { -1.0 }).div(dd(i as f64));
            s = c.add(s.mulf(x));
        }
        return r0(s.mulf(x));
    }
    let z = two_sum(1.0, x);
    let y0 = x.ln_1p();
    let (m, k) = exp_dd(dd(-y0));
    let e = frexp(z.hi).1;
    let p = z.scale(-e).mul(m).scale(k + e);
    let t = p.sub(dd(1.0));
    r0(dd(y0).add(t).sub(t.mul(t).mulf(0.5)))
}

/// `e^x - 1` by its series, `|x| < 1`.
fn expm1_series(x: Dd) -> Dd {
    let mut s = dd(1.0);
    for i in (2..=30).rev() {
        s = dd(1.0).add(s.mul(x).div(dd(i as f64)));
    }
    s.mul(x)
}

fn expm1_ref(x: f64) -> Ref {
    if x.abs() < 0.5 {
        return r0(expm1_series(dd(x)));
    }
    let (m, k) = exp_dd(dd(x));
    Ref {
        m: m.sub(dd(ldexp(1.0, -k))),
        k,
    }
}

fn tanh_ref(x: f64) -> Ref {
    let a = x.abs();
    let t = if a < 0.5 {
        let em = expm1_series(dd(2.0 * a));
        em.div(em.add(dd(2.0)))
    } else if a < 40.0 {
        let (m, k) = exp_dd(dd(-2.0 * a));
        let w = m.scale(k);
        dd(1.0).sub(w).div(dd(1.0).add(w))
    } else {
        dd(1.0)
    };
    r0(if x < 0.0 { t.neg() } else { t })
}

/// `(sin x, cos x)` for `|x| <= 2^21`.
fn sincos_ref(x: f64) -> (Ref, Ref) {
    let n = (x * (2.0 / std::f64::consts::PI)).round();
    let mut r = dd(x);
    for c in PIO2 {
        r = r.sub(two_prod(n, c));
    }
    let z = r.mul(r);
    let mut s = dd(1.0);
    let mut c = dd(1.0);
    for i in (1..=14).rev() {
        let i = i as f64;
        s = dd(1.0).sub(s.mul(z).div(dd((2.0 * i) * (2.0 * i + 1.0))));
        c = dd(1.0).sub(c.mul(z).div(dd((2.0 * i - 1.0) * (2.0 * i))));
    }
    let s = s.mul(r);
    let j = (n as i64).rem_euclid(4);
    let (sn, cs) = match j {
        0 => (s, c),
        1 => (c, s.neg()),
        2 => (s.neg(), c.neg()),
        _ => (c.neg(), s),
    };
    (r0(sn), r0(cs))
}

fn ref64(f: VFn, x: f64) -> Ref {
    match f {
        VFn::Exp => exp_ref(x),
        VFn::Log => log_ref(x),
        VFn::Log1p => log1p_ref(x),
        VFn::Expm1 => expm1_ref(x),
        VFn::Tanh => tanh_ref(x),
        VFn::Sin => sincos_ref(x).0,
        VFn::Cos => sincos_ref(x).1,
    }
}

/// The error of `y` in ulps of the reference `r` (the ulp of the f64 range
/// the exact value lies in, subnormal ulps below `f64::MIN_POSITIVE`).
fn ulps64(y: f64, r: Ref) -> f64 {
    let v = r.m.hi + r.m.lo;
    if v == 0.0 {
        return if y == 0.0 { 0.0 } else { f64::INFINITY };
    }
    let e = frexp(v.abs()).1 + r.k;
    if e > 1023 {
        // Beyond f64::MAX: the correctly rounded result is inf.
        return if y == f64::INFINITY.copysign(v) {
            0.0
        } else {
            f64::INFINITY
        };
    }
    if y.is_infinite() {
        // Overflowed: fine only if the exact value rounds to inf.
        let big = ldexp(v, r.k).abs() >= f64::MAX * (1.0 + 2f64.powi(-54));
        return if big && y.signum() == v.signum() {
            0.0
        } else {
            f64::INFINITY
        };
    }
    if y.is_nan() {
        return f64::INFINITY;
    }
    let ue = e.max(-1022) - 52;
    let ys = ldexp(y, -r.k);
    let d = (ys - r.m.hi) - r.m.lo;
    (ldexp(d, r.k - ue)).abs()
}

/// The error of `y` in f32 ulps of the f64 reference `v`.
fn ulps32(y: f32, v: f64) -> f64 {
    if v == 0.0 {
        return if y == 0.0 { 0.0 } else { f64::INFINITY };
    }
    if y.is_infinite() || v.abs() > f32::MAX as f64 {
        let big = v.abs() >= f32::MAX as f64 * (1.0 + 2f64.powi(-25));
        return if big && (y as f64) == f64::INFINITY.copysign(v) {
            0.0
        } else {
            f64::INFINITY
        };
    }
    if y.is_nan() {
        return f64::INFINITY;
    }
    let e = frexp(v.abs()).1.max(-126) - 23;
    ((y as f64 - v) / ldexp(1.0, e)).abs()
}

// ---------------------------------------------------------------------------
// Measurement.

/// Max errors over `n` samples: (ours, argument, std's).
fn measure64(f: VFn, n: usize, seed: u64, mut gen: impl FnMut(&mut Rng) -> f64) -> (f64, f64, f64) {
    let mut rng = Rng(seed);
    let (mut worst, mut arg, mut worst_std) = (0.0f64, 0.0, 0.0f64);
    for _ in 0..n {
        let x = gen(&mut rng);
        let r = ref64(f, x);
        let e = ulps64(f.eval_f64(x), r);
        if e > worst || e.is_nan() {
            worst = e;
            arg = x;
        }
        worst_std = worst_std.max(ulps64(f.std_f64(x), r));
    }
    (worst, arg, worst_std)
}

fn measure32(f: VFn, n: usize, seed: u64, mut gen: impl FnMut(&mut Rng) -> f32) -> (f64, f32, f64) {
    let mut rng = Rng(seed);
    let (mut worst, mut arg, mut worst_std) = (0.0f64, 0.0, 0.0f64);
    for _ in 0..n {
        let x = gen(&mut rng);
        let v = f.std_f64(x as f64);
        let e = ulps32(f.eval_f32(x), v);
        if e > worst || e.is_nan() {
            worst = e;
            arg = x;
        }
        worst_std = worst_std.max(ulps32(f.std_f32(x), v));
    }
    (worst, arg, worst_std)
}

/// The accuracy targets: 1 ulp for exp and log, 2 for the others.
fn bound(f: VFn) -> f64 {
    match f {
        VFn::Exp | VFn::Log => 1.0,
        _ => 2.0,
    }
}

type Gen64 = Box<dyn Fn(&mut Rng) -> f64>;
type Gen32 = Box<dyn Fn(&mut Rng) -> f32>;

fn u64r(a: f64, b: f64) -> Gen64 {
    Box::new(move |r| r.uniform(a, b))
}
fn b64r(a: f64, b: f64, signed: bool) -> Gen64 {
    Box::new(move |r| r.bits(a, b, signed))
}
fn u32r(a: f64, b: f64) -> Gen32 {
    Box::new(move |r| r.uniform(a, b) as f32)
}
fn b32r(a: f32, b: f32, signed: bool) -> Gen32 {
    Box::new(move |r| r.bits32(a, b, signed))
}

/// Near the multiples `k pi/2`, `k < kmax`: the f64 nearest to them, a few
/// ulps either way.
fn near_pio2_64(kmax: f64) -> Gen64 {
    Box::new(move |r| {
        let k = r.uniform(1.0, kmax).floor();
        let x = k * std::f64::consts::FRAC_PI_2;
        let off = (r.next() % 9) as i64 - 4;
        let x = f64::from_bits((x.to_bits() as i64 + off) as u64);
        if r.next() & 1 == 1 {
            -x
        } else {
            x
        }
    })
}

fn near_pio2_32(kmax: f64) -> Gen32 {
    Box::new(move |r| {
        let k = r.uniform(1.0, kmax).floor();
        let x = (k * std::f64::consts::FRAC_PI_2) as f32;
        let off = (r.next() % 9) as i32 - 4;
        let x = f32::from_bits((x.to_bits() as i32 + off) as u32);
        if r.next() & 1 == 1 {
            -x
        } else {
            x
        }
    })
}

fn ranges64(f: VFn) -> Vec<(&'static str, Gen64)> {
    let tiny = 2f64.powi(-30);
    match f {
        VFn::Exp => vec![
            ("[-745.2, 709.8]", u64r(-745.2, 709.8)),
            ("[-1, 1]", u64r(-1.0, 1.0)),
            ("[-745.2, -708.4] subnormal out", u64r(-745.2, -708.4)),
            ("[700, 709.79] near overflow", u64r(700.0, 709.79)),
            (
                "|x| in [2^-1074, 1] bits",
                b64r(f64::from_bits(1), 1.0, true),
            ),
        ],
        VFn::Log => vec![
            ("(0, max] bits", b64r(f64::from_bits(1), f64::MAX, false)),
            (
                "subnormal bits",
                b64r(f64::from_bits(1), f64::MIN_POSITIVE, false),
            ),
            ("[0.5, 2]", u64r(0.5, 2.0)),
            (
                "[1 - 2^-20, 1 + 2^-20]",
                u64r(1.0 - 2f64.powi(-20), 1.0 + 2f64.powi(-20)),
            ),
            ("[0.7, 1.5]", u64r(0.7, 1.5)),
        ],
        VFn::Log1p => vec![
            ("(-1, 1]", u64r(-1.0, 1.0)),
            ("[-1, -0.5]", u64r(-1.0, -0.5)),
            ("[-0.3, 0.42]", u64r(-0.3, 0.42)),
            (
                "|x| in [2^-1074, 1] bits",
                b64r(f64::from_bits(1), 1.0, true),
            ),
            ("[1, max] bits", b64r(1.0, f64::MAX, false)),
            ("[0, 1e3]", u64r(0.0, 1e3)),
        ],
        VFn::Expm1 => vec![
            ("[-40, 709.7]", u64r(-40.0, 709.7)),
            ("[-1, 1]", u64r(-1.0, 1.0)),
            ("[-0.7, 0.7]", u64r(-0.7, 0.7)),
            (
                "|x| in [2^-1074, 2^-30] bits",
                b64r(f64::from_bits(1), tiny, true),
            ),
            ("|x| in [2^-30, 1] bits", b64r(tiny, 1.0, true)),
            ("[700, 709.78]", u64r(700.0, 709.78)),
        ],
        VFn::Tanh => vec![
            ("[-20, 20]", u64r(-20.0, 20.0)),
            ("[-1, 1]", u64r(-1.0, 1.0)),
            ("[0.4, 0.7]", u64r(0.4, 0.7)),
            (
                "|x| in [2^-1074, 1] bits",
                b64r(f64::from_bits(1), 1.0, true),
            ),
            ("[15, 25]", u64r(15.0, 25.0)),
        ],
        VFn::Sin | VFn::Cos => vec![
            (
                "[-pi, pi]",
                u64r(-std::f64::consts::PI, std::f64::consts::PI),
            ),
            ("[-100, 100]", u64r(-100.0, 100.0)),
            ("[-2^20, 2^20]", u64r(-1048576.0, 1048576.0)),
            (
                "|x| in [2^-1074, 1] bits",
                b64r(f64::from_bits(1), 1.0, true),
            ),
            ("near k pi/2, k < 100", near_pio2_64(100.0)),
            ("near k pi/2, k < 667000", near_pio2_64(667000.0)),
        ],
    }
}

fn ranges32(f: VFn) -> Vec<(&'static str, Gen32)> {
    let sub = f32::MIN_POSITIVE;
    let min = f32::from_bits(1);
    match f {
        VFn::Exp => vec![
            ("[-103.9, 88.7]", u32r(-103.9, 88.7)),
            ("[-1, 1]", u32r(-1.0, 1.0)),
            ("[-103.9, -87.3] subnormal out", u32r(-103.9, -87.3)),
            ("[80, 88.72]", u32r(80.0, 88.72)),
            ("|x| in [2^-149, 1] bits", b32r(min, 1.0, true)),
        ],
        VFn::Log => vec![
            ("(0, max] bits", b32r(min, f32::MAX, false)),
            ("subnormal bits", b32r(min, sub, false)),
            ("[0.5, 2]", u32r(0.5, 2.0)),
            (
                "[1 - 2^-10, 1 + 2^-10]",
                u32r(1.0 - 2f64.powi(-10), 1.0 + 2f64.powi(-10)),
            ),
        ],
        VFn::Log1p => vec![
            ("(-1, 1]", u32r(-1.0, 1.0)),
            ("[-1, -0.5]", u32r(-1.0, -0.5)),
            ("|x| in [2^-149, 1] bits", b32r(min, 1.0, true)),
            ("[1, max] bits", b32r(1.0, f32::MAX, false)),
        ],
        VFn::Expm1 => vec![
            ("[-18, 88.7]", u32r(-18.0, 88.7)),
            ("[-1, 1]", u32r(-1.0, 1.0)),
            ("|x| in [2^-149, 1] bits", b32r(min, 1.0, true)),
        ],
        VFn::Tanh => vec![
            ("[-10, 10]", u32r(-10.0, 10.0)),
            ("[-1, 1]", u32r(-1.0, 1.0)),
            ("|x| in [2^-149, 1] bits", b32r(min, 1.0, true)),
        ],
        VFn::Sin | VFn::Cos => vec![
            (
                "[-pi, pi]",
                u32r(-std::f64::consts::PI, std::f64::consts::PI),
            ),
            ("[-4096, 4096]", u32r(-4096.0, 4096.0)),
            ("|x| in [2^-149, 1] bits", b32r(min, 1.0, true)),
            ("near k pi/2, k < 2600", near_pio2_32(2600.0)),
        ],
    }
}

fn check64(f: VFn, fails: &mut Vec<String>) {
    let n = samples();
    for (i, (name, gen)) in ranges64(f).into_iter().enumerate() {
        let (e, x, s) = measure64(f, n, 1000 + i as u64, gen);
        println!(
            "f64 {:6} {:32} max {:.3} ulp at {:e} (std {:.3})",
            f.name(),
            name,
            e,
            x,
            s
        );
        if e > bound(f) || e.is_nan() {
            fails.push(format!("{} {name}: {e} ulp at {x:e}", f.name()));
        }
    }
}

fn check32(f: VFn, fails: &mut Vec<String>) {
    let n = samples();
    for (i, (name, gen)) in ranges32(f).into_iter().enumerate() {
        let (e, x, s) = measure32(f, n, 2000 + i as u64, gen);
        println!(
            "f32 {:6} {:32} max {:.3} ulp at {:e} (std {:.3})",
            f.name(),
            name,
            e,
            x,
            s
        );
        if e > bound(f) || e.is_nan() {
            fails.push(format!("{} {name}: {e} ulp at {x:e}", f.name()));
        }
    }
}

#[test]
fn accuracy_f64() {
    let mut fails = Vec::new();
    for f in VFn::ALL {
        check64(f, &mut fails);
    }
    assert!(fails.is_empty(), "{fails:#?}");
}

#[test]
fn accuracy_f32() {
    let mut fails = Vec::new();
    for f in VFn::ALL {
        check32(f, &mut fails);
    }
    assert!(fails.is_empty(), "{fails:#?}");
}

// ---------------------------------------------------------------------------
// Special values: the same result as std (NaN for NaN, signed zeros and
// infinities exactly), and the plain entry points agree with `VFn`.

fn same64(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

fn same32(a: f32, b: f32) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

fn specials64() -> Vec<f64> {
    let mut v = vec![
        0.0,
        f64::INFINITY,
        f64::NAN,
        f64::from_bits(0x7FF0_0000_0000_0001),
        f64::MIN_POSITIVE,
        f64::from_bits(1),
        f64::MAX,
        1.0,
        2f64.powi(-60),
        1e-300,
        1e300,
        710.0,
        1e6,
    ];
    let neg: Vec<f64> = v.iter().map(|x| -x).collect();
    v.extend(neg);
    v
}

#[test]
fn special_values_f64() {
    let mut bad = Vec::new();
    for f in VFn::ALL {
        for x in specials64() {
            let (y, s) = (f.eval_f64(x), f.std_f64(x));
            // Finite non-zero results are checked by the accuracy tests.
            let exact = !s.is_finite() || s == 0.0 || y.is_nan() || y.is_infinite() || y == 0.0;
            if exact && !same64(y, s) {
                bad.push(format!("{}({x:e}) = {y:e}, std {s:e}", f.name()));
            }
        }
    }
    let checks: [(f64, f64, f64); 12] = [
        (exp_f64(-0.0), 1.0, 0.0),
        (vmath::log_f64(1.0), 0.0, 0.0),
        (vmath::log1p_f64(-1.0), f64::NEG_INFINITY, 0.0),
        (vmath::expm1_f64(f64::NEG_INFINITY), -1.0, 0.0),
        (vmath::tanh_f64(f64::INFINITY), 1.0, 0.0),
        (vmath::tanh_f64(f64::NEG_INFINITY), -1.0, 0.0),
        (vmath::tanh_f64(-1e-300), -1e-300, 0.0),
        (vmath::expm1_f64(-1e-300), -1e-300, 0.0),
        (vmath::log1p_f64(-1e-300), -1e-300, 0.0),
        (vmath::sin_f64(-1e-300), -1e-300, 0.0),
        (vmath::cos_f64(0.0), 1.0, 0.0),
        (vmath::tanh_f64(30.0), 1.0, 0.0),
    ];
    for (i, (y, want, _)) in checks.iter().enumerate() {
        if !same64(*y, *want) {
            bad.push(format!("check {i}: {y:e} != {want:e}"));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

fn exp_f64(x: f64) -> f64 {
    vmath::exp_f64(x)
}

#[test]
fn special_values_f32() {
    let mut bad = Vec::new();
    for f in VFn::ALL {
        for x in specials64() {
            let x = x as f32;
            let (y, s) = (f.eval_f32(x), f.std_f32(x));
            let exact = !s.is_finite() || s == 0.0 || y.is_nan() || y.is_infinite() || y == 0.0;
            if exact && !same32(y, s) {
                bad.push(format!("{}({x:e}) = {y:e}, std {s:e}", f.name()));
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn entry_points_match_vfn() {
    let mut rng = Rng(7);
    type P64 = fn(f64) -> f64;
    type P32 = fn(f32) -> f32;
    let fns: [(VFn, P64, P32); 7] = [
        (VFn::Exp, vmath::exp_f64, vmath::exp_f32),
        (VFn::Log, vmath::log_f64, vmath::log_f32),
        (VFn::Log1p, vmath::log1p_f64, vmath::log1p_f32),
        (VFn::Expm1, vmath::expm1_f64, vmath::expm1_f32),
        (VFn::Tanh, vmath::tanh_f64, vmath::tanh_f32),
        (VFn::Sin, vmath::sin_f64, vmath::sin_f32),
        (VFn::Cos, vmath::cos_f64, vmath::cos_f32),
    ];
    for _ in 0..10_000 {
        let x = f64::from_bits(rng.next());
        let x32 = f32::from_bits(rng.next() as u32);
        for (f, p64, p32) in fns {
            assert!(same64(f.eval_f64(x), p64(x)), "{} {x:e}", f.name());
            assert!(same32(f.eval_f32(x32), p32(x32)), "{} {x32:e}", f.name());
        }
    }
}
