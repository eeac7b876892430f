//! egrad's runtime library: every function an object file of `egrad build`
//! may call by name, exported under that name (`#[no_mangle]`).
//!
//! The JIT hands native code these functions' addresses
//! (`backend::jit`); an object file names them instead, and its C program
//! links this library (`libegrad_runtime.a`, the `egrad_runtime` example
//! built as a static library, which `egrad build` writes beside an object
//! that needs it). Each export forwards to the function the JIT calls, so
//! an object computes the JIT's bits:
//! - `egrad_dgemm`, `egrad_sgemm`: the matrix product (`crate::gemm`);
//! - `egrad_drowdot`, `egrad_srowdot`, `egrad_dcolsum`, `egrad_scolsum`:
//!   row and column sums of products (`crate::gemv`);
//! - `egrad_kernel_call`: the builtin kernels (`cholesky`, `solve`, ...;
//!   a C program registers no other, so other ids give NaN);
//! - `egrad_vmath_block_f64`, `egrad_vmath_block_f32`: math over whole
//!   arrays (`crate::vmath`);
//! - the math functions that are egrad's own (`egrad_digamma`, ...), not
//!   the C library's.
//!
//! Compiled only with the `runtime` cargo feature, so that a program
//! linking the egrad library gets no unmangled symbols from it.

use crate::ops::math::Math;

macro_rules! forward {
    ($($name:ident = $to:path: ($($arg:ident: $t:ty),*);)*) => {$(
        #[doc = concat!("`", stringify!($to), "`, under its C name.")]
        ///
        /// # Safety
        ///
        /// That function's contract: native code calls it so.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn $name($($arg: $t),*) {
            // SAFETY: the caller's contract, which is the callee's.
            unsafe { $to($($arg),*) }
        }
    )*};
}

forward! {
    egrad_dgemm = crate::gemm::egrad_dgemm: (m: i64, k: i64, n: i64, a: *const f64, rsa: i64,
        csa: i64, b: *const f64, rsb: i64, csb: i64, c: *mut f64);
    egrad_sgemm = crate::gemm::egrad_sgemm: (m: i64, k: i64, n: i64, a: *const f32, rsa: i64,
        csa: i64, b: *const f32, rsb: i64, csb: i64, c: *mut f32);
    egrad_drowdot = crate::gemv::egrad_drowdot: (m: i64, k: i64, a: *const f64, rsa: i64,
        csa: i64, b: *const f64, rsb: i64, csb: i64, out: *mut f64);
    egrad_srowdot = crate::gemv::egrad_srowdot: (m: i64, k: i64, a: *const f32, rsa: i64,
        csa: i64, b: *const f32, rsb: i64, csb: i64, out: *mut f32);
    egrad_dcolsum = crate::gemv::egrad_dcolsum: (m: i64, k: i64, a: *const f64, rsa: i64,
        csa: i64, b: *const f64, rsb: i64, csb: i64, out: *mut f64);
    egrad_scolsum = crate::gemv::egrad_scolsum: (m: i64, k: i64, a: *const f32, rsa: i64,
        csa: i64, b: *const f32, rsb: i64, csb: i64, out: *mut f32);
    egrad_kernel_call = crate::ops::kernels::egrad_kernel_call: (id: u64, n: u64,
        ptrs: *const *const f64, lens: *const u64, out: *mut f64, out_len: u64);
    egrad_vmath_block_f64 = crate::vmath::egrad_vmath_block_f64: (f: i64, x: i64, y: i64,
        n: i64);
    egrad_vmath_block_f32 = crate::vmath::egrad_vmath_block_f32: (f: i64, x: i64, y: i64,
        n: i64);
}

macro_rules! own_math {
    ($($f64:ident, $f32:ident = $m:ident;)*) => {$(
        #[doc = concat!("`", stringify!($m), "` in `f64`: the row's function.")]
        #[no_mangle]
        pub extern "C" fn $f64(x: f64) -> f64 {
            Math::$m.apply(x, crate::types::DType::F64)
        }
        #[doc = concat!("`", stringify!($m), "` in `f32`: the row's function.")]
        #[no_mangle]
        pub extern "C" fn $f32(x: f32) -> f32 {
            Math::$m.apply(f64::from(x), crate::types::DType::F32) as f32
        }
    )*};
}

own_math! {
    egrad_digamma, egrad_digammaf = Digamma;
    egrad_trigamma, egrad_trigammaf = Trigamma;
    egrad_tetragamma, egrad_tetragammaf = Tetragamma;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::DType;

    /// What this file exports (`nm` of the library lists the same).
    const EXPORTS: &[&str] = &[
        "egrad_dcolsum",
        "egrad_dgemm",
        "egrad_digamma",
        "egrad_digammaf",
        "egrad_drowdot",
        "egrad_kernel_call",
        "egrad_scolsum",
        "egrad_sgemm",
        "egrad_srowdot",
        "egrad_tetragamma",
        "egrad_tetragammaf",
        "egrad_trigamma",
        "egrad_trigammaf",
        "egrad_vmath_block_f32",
        "egrad_vmath_block_f64",
    ];

    /// Every function native code calls outside the C library is exported
    /// (a new row or kernel entry without its export fails here), and the
    /// own math functions compute their rows' bits.
    #[test]
    fn exports_what_native_code_calls() {
        assert_eq!(crate::backend::runtime_symbols(), EXPORTS);
        assert_eq!(egrad_digamma(2.5), Math::Digamma.apply(2.5, DType::F64));
        assert_eq!(
            f64::from(egrad_trigammaf(0.75)),
            Math::Trigamma.apply(0.75, DType::F32)
        );
    }
}
