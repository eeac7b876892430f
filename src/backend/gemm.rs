//! Matrix products through the `matrixmultiply` crate (Rust-compiled GEMM
//! kernels chosen at run time for the CPU: AVX2 and FMA where present),
//! called from native code when [`BackendOptions::gemm`] is on.
//!
//! The kernels block `k` and use fused multiply-adds where the CPU has
//! them, so the result is not egrad's reference order (each column's sum
//! over `k` left to right, one rounded product at a time): it agrees with
//! the interpreter to within a few ulps of `Σ |a_il b_lj|` per element,
//! not bit for bit, which is why the option is off by default.
//!
//! [`BackendOptions::gemm`]: super::BackendOptions::gemm

macro_rules! gemm_wrapper {
    ($(#[$doc:meta])* $name:ident, $t:ty, $kernel:path) => {
        $(#[$doc])*
        ///
        /// # Safety
        ///
        /// The pointers address matrices of the given sizes and strides;
        /// `c` does not overlap `a` or `b`.
        #[allow(clippy::too_many_arguments)]
        pub(super) unsafe extern "C" fn $name(
            m: i64,
            k: i64,
            n: i64,
            a: *const $t,
            rsa: i64,
            csa: i64,
            b: *const $t,
            rsb: i64,
            csb: i64,
            c: *mut $t,
        ) {
            let (m, k, n) = (m as usize, k as usize, n as usize);
            if k == 0 {
                // Empty sums: +0 (the kernels would scale `c` by beta).
                // SAFETY: `c` holds m × n elements (caller's contract).
                unsafe { std::ptr::write_bytes(c, 0, m * n) };
                return;
            }
            // SAFETY: the caller's contract; beta = 0: `c` is only written.
            unsafe {
                $kernel(
                    m, k, n, 1.0, a, rsa as isize, csa as isize, b, rsb as isize, csb as isize,
                    0.0, c, n as isize, 1,
                )
            }
        }
    };
}

gemm_wrapper!(
    /// `c = a · b` for row-major `c` (`m × n`); `a` (`m × k`) and `b`
    /// (`k × n`) are read with the given row and column strides (in
    /// elements), so a transposed operand is read in place.
    egrad_dgemm,
    f64,
    matrixmultiply::dgemm
);

gemm_wrapper!(
    /// [`egrad_dgemm`] in `f32`.
    egrad_sgemm,
    f32,
    matrixmultiply::sgemm
);
