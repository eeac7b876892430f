//! The wild flavour of the generator, for the fuzzer: the same grammar as
//! the tame programs, with odd corners on purpose.
//!
//! A wild program draws its odd corners from random numbers of its own
//! (`Wild::rng`), so the tame flavour draws exactly what it drew before
//! the fuzzer shared the generator. What it writes, besides what a tame
//! program has:
//!
//! - in three tenths of the programs, at most one expression of the wrong
//!   type (a tuple, a scalar indexed, a transpose, an `i64`, ...), so that
//!   the checker's errors are exercised deep inside valid programs;
//! - now and then a math function outside its domain (`log`, `sqrt`,
//!   `1 /` of any value, `exp` unbounded), a value no longer kept within
//!   bounds (the tame `tanh` left out), or an odd literal (`1e300`, `-0`,
//!   a subnormal, ...), so values overflow and become NaN;
//! - derivative rules that are wrong on purpose: naming a missing
//!   function, the JVP named as the VJP (wrong arity and type), not linear
//!   in the cotangent or the tangent, or calling their own primitive;
//! - loop counts fixed instead of calibrated, and no derivative left out
//!   that egrad would refuse: the generator never runs egrad on a wild
//!   program (`probe`), so that a crash of egrad happens in the fuzzer's
//!   child process, where it is caught and minimized.

#[allow(unused_imports)]
use super::*;
use std::cell::RefCell;

/// The random numbers of a wild program's odd corners, and how many
/// expressions of the wrong type it may still write.
pub(crate) struct Wild {
    rng: Rng,
    wrong_left: u32,
}

thread_local! {
    /// The wild state of the program being generated on this thread
    /// (None: a tame program).
    static WILD: RefCell<Option<Wild>> = const { RefCell::new(None) };
}

/// `f` of the wild state, if the program being generated is wild (a tame
/// one draws nothing here).
fn with_wild<T>(f: impl FnOnce(&mut Wild) -> T) -> Option<T> {
    WILD.with(|w| w.borrow_mut().as_mut().map(f))
}

/// Whether the program being generated on this thread is wild.
pub(crate) fn is_wild() -> bool {
    WILD.with(|w| w.borrow().is_some())
}

/// Whether egrad accepts `src`, asked by the tame flavour to choose what
/// to leave out (derivatives egrad refuses). A wild program is not run
/// through egrad while it is written: everything is kept.
pub(crate) fn probe(src: &str) -> Result<(), egrad::Error> {
    if is_wild() {
        return Ok(());
    }
    Program::parse(src).map(|_| ())
}

/// Loop counts of a wild program's `n` long iterates: fixed, not
/// calibrated (calibrating lowers the program), between 300 and 700 so that
/// steps of a few statements are unrolled and longer ones are loops, and a
/// loop inside a loop's step stays cheap enough for the interpreter.
pub(crate) fn wild_counts(n: usize) -> Vec<u64> {
    (0..n)
        .map(|i| with_wild(|w| 300 + w.rng.below(400) as u64).unwrap_or(300) + 8 * i as u64)
        .collect()
}

/// The wild program of `seed` (see the module doc).
pub(crate) fn generate_wild(seed: u64) -> Generated {
    /// Leaves the thread tame again, also on a panic.
    struct Tame;
    impl Drop for Tame {
        fn drop(&mut self) {
            WILD.with(|w| *w.borrow_mut() = None);
        }
    }
    let mut rng = Rng(mix(seed ^ 0x0000_00D1_1D00_5EED));
    let wrong_left = u32::from(rng.chance(0.3));
    WILD.with(|w| *w.borrow_mut() = Some(Wild { rng, wrong_left }));
    let _tame = Tame;
    generate(seed)
}

/// Odd literals a wild expression may be.
const ODD_LITERALS: &[&str] = &[
    "1e300", "-1e300", "0.0", "-0.0", "1e-320", "2.5e-8", "7", "-1", "1e16", "0.5",
];

/// What a wild expression is, drawn by `Gen::wild_expr`.
enum Odd {
    /// An expression of another type: the form's index.
    WrongType(usize),
    /// A math function outside its domain: the form's index.
    Raw(usize),
    Literal(&'static str),
}

/// Expressions of (most often) another type than `{}`'s.
const WRONG_TYPE: &[&str] = &[
    "({0}, {0})",
    "{0}[0, 0, 0]",
    "transpose({0})",
    "i64({0})",
    "reverse({0})",
    "+/+/+/{0}",
    "{0}[7]",
];

/// Math outside its domain, unbounded.
const RAW_MATH: &[&str] = &[
    "log({0})",
    "sqrt({0})",
    "(1 / {0})",
    "exp({0} * 1000)",
    "log(-{0})",
    "pow({0}, 2.5)",
    "tan({0} * 100)",
    "({0} * 1e300)",
];

impl Gen<'_> {
    /// In a wild program, now and then an odd expression in place of one
    /// of type `ty` (None: write the expression as a tame program would).
    pub(crate) fn wild_expr(&mut self, ty: Ty, depth: u32) -> Option<Ex> {
        let odd = with_wild(|w| {
            let r = w.rng.below(1000);
            if r < 20 && w.wrong_left > 0 {
                w.wrong_left -= 1;
                Some(Odd::WrongType(w.rng.below(WRONG_TYPE.len())))
            } else if (20..50).contains(&r) {
                Some(Odd::Raw(w.rng.below(RAW_MATH.len())))
            } else if (50..70).contains(&r) {
                Some(Odd::Literal(ODD_LITERALS[w.rng.below(ODD_LITERALS.len())]))
            } else {
                None
            }
        })??;
        let form = match odd {
            Odd::Literal(x) => return Some(Ex::leaf(x, 1.0, false)),
            Odd::WrongType(k) => WRONG_TYPE[k],
            Odd::Raw(k) => RAW_MATH[k],
        };
        let e = self.gen(ty, depth.saturating_sub(1));
        // The bound is a lie on purpose: nothing downstream tames it.
        Some(Ex::of(form.replace("{0}", &e.s), 1.0, e.var, &[&e]))
    }

    /// In a wild program, now and then a value left unbounded where a tame
    /// one is wrapped in `tanh` or scaled.
    pub(crate) fn wild_unbounded(&mut self) -> bool {
        with_wild(|w| w.rng.chance(0.05)).unwrap_or(false)
    }
}

/// The text of the user primitive `name` with its rules (`text`, as
/// `gen_prim` wrote it), made wrong on purpose in a wild program now and
/// then: a rule naming a missing function, the JVP named as the VJP (or
/// the other way round), a rule not linear in the cotangent or tangent,
/// or one calling its own primitive. Unchanged in a tame program.
pub(crate) fn wild_rules(text: String, name: &str) -> String {
    let Some(Some(k)) = with_wild(|w| w.rng.chance(0.3).then(|| w.rng.below(5))) else {
        return text;
    };
    let (vjp, jvp) = (format!("{name}_vjp"), format!("{name}_jvp"));
    match k {
        0 => text.replacen(&format!("({vjp})"), &format!("({vjp}_missing)"), 1),
        1 => text.replacen(&format!("({jvp})"), &format!("({vjp})"), 1),
        2 => text.replacen(&format!("({vjp})"), &format!("({jvp})"), 1),
        3 => text
            .replace("g * ", "g * g * ")
            .replace("* dx", "* dx * dx"),
        _ => text.replacen("g * ", &format!("g * {name}(x) * "), 1),
    }
}
