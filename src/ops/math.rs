//! The math functions: element-wise functions of one operand, one row each.
//!
//! A row states every fact about its function: the name (in the language,
//! the IR text and rule patterns), the value in each dtype, the reverse-mode
//! template (forward mode and the e-graph derive theirs from it), the price
//! in flops and how native code computes it ([`Native`]). Nothing else in
//! egrad names a math function: the front end, the evaluator, AD, the cost
//! model and the backend all ask the row. Adding a function is adding a row
//! (and, for a C library function, its declaration in `clib`).

use crate::types::DType;
use crate::vmath::VFn;

/// How native code computes a math function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Native {
    /// A Cranelift instruction, for scalars and vectors alike.
    Inst(Inst),
    /// egrad's vector math kernel ([`crate::vmath`]): all lanes at once, and
    /// the evaluator runs the same kernel, so both agree bit for bit.
    Kernel(VFn),
    /// The C library's function, one call per lane, by its symbol for `f64`
    /// and for `f32` (what an object file imports, resolved with `-lm`).
    /// The evaluator and the JIT call the same function.
    CLib {
        /// The `f64` function's symbol.
        f64: &'static str,
        /// The `f32` function's symbol.
        f32: &'static str,
        /// Whether the C library has it (else it is egrad's own, which
        /// the JIT links and object files call in egrad's runtime library).
        libm: bool,
    },
}

/// A Cranelift instruction computing a math function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Inst {
    /// `sqrt`.
    Sqrt,
    /// `fabs` (`iabs` on integers).
    Abs,
}

/// One row of the table.
struct Row {
    name: &'static str,
    native: Native,
    f64: fn(f64) -> f64,
    f32: fn(f32) -> f32,
    /// The function on integers, where its type rule takes them.
    int: Option<fn(i64) -> i64>,
    flops: f64,
    vjp: &'static str,
}

/// The C library's functions that rows name, declared for the evaluator
/// (and, through [`Math::c_fns`], for the JIT): the same code an object
/// file's import resolves to.
pub(crate) mod clib {
    #[link(name = "m")]
    extern "C" {
        #[link_name = "erf"]
        fn c_erf(x: f64) -> f64;
        #[link_name = "erff"]
        fn c_erff(x: f32) -> f32;
        #[link_name = "erfc"]
        fn c_erfc(x: f64) -> f64;
        #[link_name = "erfcf"]
        fn c_erfcf(x: f32) -> f32;
    }
    // SAFETY (each below): a C99 math function, total on every float (NaN
    // and infinities included), with no state but `errno`.
    pub(super) fn erf(x: f64) -> f64 {
        unsafe { c_erf(x) }
    }
    pub(super) fn erff(x: f32) -> f32 {
        unsafe { c_erff(x) }
    }
    pub(super) fn erfc(x: f64) -> f64 {
        unsafe { c_erfc(x) }
    }
    pub(super) fn erfcf(x: f32) -> f32 {
        unsafe { c_erfcf(x) }
    }
    extern "C" {
        fn lgamma_r(x: f64, sign: *mut i32) -> f64;
        fn lgammaf_r(x: f32, sign: *mut i32) -> f32;
    }
    // `lgamma` through the reentrant `lgamma_r` (what glibc's `lgamma`
    // computes, without writing the global `signgam` from many threads).
    pub(super) fn lgamma(x: f64) -> f64 {
        let mut sign = 0;
        // SAFETY: `sign` is a valid `int` to write.
        unsafe { lgamma_r(x, &mut sign) }
    }
    pub(super) fn lgammaf(x: f32) -> f32 {
        let mut sign = 0;
        // SAFETY: as above.
        unsafe { lgammaf_r(x, &mut sign) }
    }
    pub(super) fn tan(x: f64) -> f64 {
        x.tan()
    }
    pub(super) fn tanf(x: f32) -> f32 {
        x.tan()
    }
}

macro_rules! math_table {
    ($($(#[$doc:meta])* $v:ident => $row:expr;)*) => {
        /// A math function (see the module's table).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Math {
            $($(#[$doc])* $v,)*
        }

        static ROWS: &[Row] = &[$($row,)*];

        impl Math {
            /// Every math function, in table order.
            pub const ALL: &'static [Math] = &[$(Math::$v,)*];

            /// The function as the C ABI calls it, in `f64` and in `f32`:
            /// what the JIT links a [`Native::CLib`] call to.
            pub fn c_fns(self) -> (extern "C" fn(f64) -> f64, extern "C" fn(f32) -> f32) {
                match self {
                    $(Math::$v => (
                        c_f64::<{ Math::$v as usize }>,
                        c_f32::<{ Math::$v as usize }>,
                    ),)*
                }
            }
        }
    };
}

extern "C" fn c_f64<const M: usize>(x: f64) -> f64 {
    (ROWS[M].f64)(x)
}

extern "C" fn c_f32<const M: usize>(x: f32) -> f32 {
    (ROWS[M].f32)(x)
}

/// A function's `f64` and `f32` versions.
type Fns = (fn(f64) -> f64, fn(f32) -> f32);

/// A row whose native code is egrad's vector kernel `f`.
const fn kernel(name: &'static str, f: VFn, flops: f64, vjp: &'static str) -> Row {
    // `VFn::eval_*` are not `const`; the closures are chosen per kernel.
    let (f64, f32): Fns = match f {
        VFn::Exp => (|x| VFn::Exp.eval_f64(x), |x| VFn::Exp.eval_f32(x)),
        VFn::Log => (|x| VFn::Log.eval_f64(x), |x| VFn::Log.eval_f32(x)),
        VFn::Log1p => (|x| VFn::Log1p.eval_f64(x), |x| VFn::Log1p.eval_f32(x)),
        VFn::Expm1 => (|x| VFn::Expm1.eval_f64(x), |x| VFn::Expm1.eval_f32(x)),
        VFn::Tanh => (|x| VFn::Tanh.eval_f64(x), |x| VFn::Tanh.eval_f32(x)),
        VFn::Sin => (|x| VFn::Sin.eval_f64(x), |x| VFn::Sin.eval_f32(x)),
        VFn::Cos => (|x| VFn::Cos.eval_f64(x), |x| VFn::Cos.eval_f32(x)),
    };
    Row {
        name,
        native: Native::Kernel(f),
        f64,
        f32,
        int: None,
        flops,
        vjp,
    }
}

/// A row computed by the C library's `f64`/`f32` pair (symbols, functions).
const fn clib(
    name: &'static str,
    symbols: (&'static str, &'static str),
    fns: Fns,
    flops: f64,
    vjp: &'static str,
) -> Row {
    called(name, symbols, fns, flops, vjp, true)
}

/// A row computed by egrad's own scalar functions, called one lane at a
/// time as a C library's are (under the symbols given; the JIT links
/// them, object files cannot call them yet).
const fn own(
    name: &'static str,
    symbols: (&'static str, &'static str),
    fns: Fns,
    vjp: &'static str,
) -> Row {
    called(name, symbols, fns, 40.0, vjp, false)
}

/// A row whose native code calls a function per lane.
const fn called(
    name: &'static str,
    symbols: (&'static str, &'static str),
    fns: Fns,
    flops: f64,
    vjp: &'static str,
    libm: bool,
) -> Row {
    Row {
        name,
        native: Native::CLib {
            f64: symbols.0,
            f32: symbols.1,
            libm,
        },
        f64: fns.0,
        f32: fns.1,
        int: None,
        flops,
        vjp,
    }
}

math_table! {
    /// Sine.
    Sin => kernel("sin", VFn::Sin, 20.0, "(mul ?g (cos ?a))");
    /// Cosine.
    Cos => kernel("cos", VFn::Cos, 20.0, "(neg (mul ?g (sin ?a)))");
    /// `e^x`.
    Exp => kernel("exp", VFn::Exp, 20.0, "(mul ?g ?out)");
    /// Natural logarithm.
    Log => kernel("log", VFn::Log, 20.0, "(div ?g ?a)");
    /// Square root.
    Sqrt => Row {
        name: "sqrt",
        native: Native::Inst(Inst::Sqrt),
        f64: f64::sqrt,
        f32: f32::sqrt,
        int: None,
        flops: 6.0,
        vjp: "(div ?g (mul 2 ?out))",
    };
    /// Hyperbolic tangent.
    Tanh => kernel("tanh", VFn::Tanh, 20.0, "(mul ?g (sub 1 (mul ?out ?out)))");
    /// Tangent.
    Tan => clib("tan", ("tan", "tanf"), (clib::tan, clib::tanf), 20.0,
        "(mul ?g (add 1 (mul ?out ?out)))");
    /// Absolute value; of an integer too (wrapping: `abs` of the least
    /// `i64` is itself). Its derivative is the sign, 0 at 0 (JAX's
    /// convention).
    Abs => Row {
        name: "abs",
        native: Native::Inst(Inst::Abs),
        f64: f64::abs,
        f32: f32::abs,
        int: Some(i64::wrapping_abs),
        flops: 1.0,
        vjp: "(select (gt ?a 0) ?g (select (lt ?a 0) (neg ?g) 0))",
    };
    /// `log(1 + x)`, accurate near 0.
    Log1p => kernel("log1p", VFn::Log1p, 20.0, "(div ?g (add 1 ?a))");
    /// `exp(x) - 1`, accurate near 0.
    Expm1 => kernel("expm1", VFn::Expm1, 20.0, "(mul ?g (add ?out 1))");
    /// The error function, `2/√π ∫₀ˣ e^(-t²) dt`; its derivative is
    /// `2/√π e^(-x²)`.
    Erf => clib("erf", ("erf", "erff"), (clib::erf, clib::erff), 30.0,
        "(mul ?g (mul 1.1283791670955126 (exp (neg (mul ?a ?a)))))");
    /// `1 - erf(x)`, accurate where `erf(x)` is near 1.
    Erfc => clib("erfc", ("erfc", "erfcf"), (clib::erfc, clib::erfcf), 30.0,
        "(neg (mul ?g (mul 1.1283791670955126 (exp (neg (mul ?a ?a))))))");
    /// `log |Γ(x)|` (the C library's); its derivative is `digamma`.
    Lgamma => clib("lgamma", ("lgamma", "lgammaf"), (clib::lgamma, clib::lgammaf), 40.0,
        "(mul ?g (digamma ?a))");
    /// `ψ(x) = Γ'(x)/Γ(x)` (egrad's own, [`super::special`]); its
    /// derivative is `trigamma`.
    Digamma => own("digamma", ("egrad_digamma", "egrad_digammaf"),
        (super::special::digamma, super::special::digammaf), "(mul ?g (trigamma ?a))");
    /// `ψ'(x)` (egrad's own); its derivative is `tetragamma`.
    Trigamma => own("trigamma", ("egrad_trigamma", "egrad_trigammaf"),
        (super::special::trigamma, super::special::trigammaf), "(mul ?g (tetragamma ?a))");
    /// `ψ''(x)` (egrad's own); no derivative yet (an empty rule).
    Tetragamma => own("tetragamma", ("egrad_tetragamma", "egrad_tetragammaf"),
        (super::special::tetragamma, super::special::tetragammaf), "");
}

impl Math {
    fn row(self) -> &'static Row {
        &ROWS[self as usize]
    }

    /// The function's name in the language, the IR text and rule patterns.
    pub fn name(self) -> &'static str {
        self.row().name
    }

    /// Look a function up by name.
    pub fn from_name(s: &str) -> Option<Math> {
        Math::ALL.iter().copied().find(|m| m.name() == s)
    }

    /// How native code computes it.
    pub fn native(self) -> Native {
        self.row().native
    }

    /// The C library's symbol for the function in `dtype` (`f64` for
    /// integers), for a [`Native::CLib`] row.
    pub fn c_symbol(self, dtype: DType) -> Option<&'static str> {
        match (self.native(), dtype) {
            (Native::CLib { f32, .. }, DType::F32) => Some(f32),
            (Native::CLib { f64, .. }, DType::F64 | DType::I64 | DType::Bool) => Some(f64),
            (Native::Inst(_) | Native::Kernel(_), _) => None,
        }
    }

    /// Does its type rule take integer operands?
    pub fn takes_int(self) -> bool {
        self.row().int.is_some()
    }

    /// Cost in flops per element (about the multiply-adds its code takes).
    pub fn flops(self) -> f64 {
        self.row().flops
    }

    /// The reverse-mode template (see [`super::Op::vjp`]); empty for a
    /// function without a derivative yet.
    pub fn vjp(self) -> &'static str {
        self.row().vjp
    }

    /// Does it have a derivative (a rule)?
    pub fn differentiable(self) -> bool {
        !self.row().vjp.is_empty()
    }

    /// Can an object file call it (the C library has it)? egrad's own
    /// functions live in the process, for the JIT.
    pub fn in_c_library(self) -> bool {
        match self.native() {
            Native::CLib { libm, .. } => libm,
            Native::Inst(_) | Native::Kernel(_) => true,
        }
    }

    /// The function of `x` (held as `f64`) in `dtype`'s precision: the
    /// evaluator's, which native code matches bit for bit.
    pub fn apply(self, x: f64, dtype: DType) -> f64 {
        let row = self.row();
        match dtype {
            DType::F64 => (row.f64)(x),
            DType::F32 => f64::from((row.f32)(x as f32)),
            // Integers: the type rule refuses them unless the row has an
            // integer function; through `f64` otherwise, so this is total.
            DType::I64 | DType::Bool => match row.int {
                Some(f) => f(x as i64) as f64,
                None => (row.f64)(x) as i64 as f64,
            },
        }
    }
}
