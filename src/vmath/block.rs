//! Block kernels: a function of this module over a whole array at once
//! (`y[i] = f(x[i])`), compiled by rustc with the widest vectors the CPU
//! has and chosen once at run time: 256-bit AVX2 where the CPU has it
//! (four `f64` or eight `f32` lanes), else the target's baseline (SSE2:
//! two or four). Cranelift lowers 128-bit vectors only, so native code
//! calls these for the functions whose kernels are all arithmetic
//! ([`blocked`]) instead of emitting them inline.
//!
//! Each lane runs the kernel's op sequence (the scalar emitter, inlined
//! into the loop and vectorised by LLVM): the same IEEE operations in the
//! same order, never contracted, so the bits are the interpreter's and
//! those of the inline Cranelift kernels, at any width.

use super::{Scalar32, Scalar64, VFn};

/// Whether native code computes `f` over whole arrays with a block kernel:
/// the functions whose kernels have no fallback ([`VFn::has_fallback`]:
/// a branch to a scalar library call, which would keep the loop from
/// being vectorised).
pub fn blocked(f: VFn) -> bool {
    !f.has_fallback()
}

/// The number of `f` in [`VFn::ALL`]: what native code passes as the
/// function to [`egrad_vmath_block_f64`] and [`egrad_vmath_block_f32`].
pub fn block_id(f: VFn) -> i64 {
    VFn::ALL.iter().position(|&g| g == f).unwrap_or(0) as i64
}

macro_rules! block_loops {
    ($name:ident, $wide:ident, $t:ty, $emit:ident, $kernel:ident) => {
        /// `y[i] = f(x[i])` for every `i` with the baseline instructions
        /// (inlined into the AVX2 loop below, where it is compiled again
        /// for AVX2).
        #[inline(always)]
        fn $name(f: VFn, x: &[$t], y: &mut [$t]) {
            for (a, b) in x.iter().zip(y.iter_mut()) {
                *b = super::$kernel(f, &mut $emit, *a);
            }
        }

        /// The same loop compiled for AVX2.
        ///
        /// # Safety
        /// The CPU has AVX2.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2")]
        unsafe fn $wide(f: VFn, x: &[$t], y: &mut [$t]) {
            // One loop per function, so each is vectorised on its own.
            match f {
                VFn::Exp => $name(VFn::Exp, x, y),
                VFn::Log => $name(VFn::Log, x, y),
                VFn::Log1p => $name(VFn::Log1p, x, y),
                VFn::Expm1 => $name(VFn::Expm1, x, y),
                VFn::Tanh => $name(VFn::Tanh, x, y),
                VFn::Sin => $name(VFn::Sin, x, y),
                VFn::Cos => $name(VFn::Cos, x, y),
            }
        }
    };
}

block_loops!(narrow_f64, wide_f64, f64, Scalar64, kernel64);
block_loops!(narrow_f32, wide_f32, f32, Scalar32, kernel32);

/// Whether the block kernels run their AVX2 loops (checked once).
fn avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *HAS.get_or_init(|| std::arch::is_x86_feature_detected!("avx2"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

macro_rules! block_entry {
    ($name:ident, $t:ty, $wide:ident, $narrow:ident) => {
        /// `y[i] = f(x[i])` for `i < n`, `f` given by [`block_id`] (an
        /// unknown number computes nothing), with the widest loop the CPU
        /// runs. All operands are `i64`s, as native code passes them.
        ///
        /// # Safety
        /// `x` and `y` point to `n` valid elements each, `y` writable, and
        /// the two do not overlap.
        pub unsafe extern "C" fn $name(f: i64, x: i64, y: i64, n: i64) {
            let Some(&f) = usize::try_from(f).ok().and_then(|k| VFn::ALL.get(k)) else {
                return;
            };
            let n = usize::try_from(n).unwrap_or(0);
            // SAFETY: the caller's contract.
            let (x, y) = unsafe {
                (
                    std::slice::from_raw_parts(x as *const $t, n),
                    std::slice::from_raw_parts_mut(y as *mut $t, n),
                )
            };
            #[cfg(target_arch = "x86_64")]
            if avx2() {
                // SAFETY: the CPU has AVX2.
                unsafe { $wide(f, x, y) };
                return;
            }
            $narrow(f, x, y);
        }
    };
}

block_entry!(egrad_vmath_block_f64, f64, wide_f64, narrow_f64);
block_entry!(egrad_vmath_block_f32, f32, wide_f32, narrow_f32);

#[cfg(test)]
mod tests {
    use super::*;

    /// The block kernels give the scalar kernels' bits, every function,
    /// both widths, lengths around the vector widths, special values.
    #[test]
    fn blocks_equal_the_scalar_kernels() {
        let specials = [
            0.0, -0.0, 1e-310, -1e-310, 0.5, -0.5, 20.0, -745.5, 709.9, 1e300,
        ];
        for n in [0usize, 1, 3, 4, 7, 8, 9, 33, 1000] {
            let x: Vec<f64> = (0..n)
                .map(|i| match specials.get(i) {
                    Some(&s) if n < 1000 => s,
                    _ => ((i as f64) * 0.731).sin() * 4.0 + 0.01 * i as f64,
                })
                .collect();
            let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            for f in VFn::ALL {
                let mut y = vec![f64::NAN; n];
                let mut y32 = vec![f32::NAN; n];
                // SAFETY: `n` elements each, separate vectors.
                unsafe {
                    egrad_vmath_block_f64(
                        block_id(f),
                        x.as_ptr() as i64,
                        y.as_mut_ptr() as i64,
                        n as i64,
                    );
                    egrad_vmath_block_f32(
                        block_id(f),
                        x32.as_ptr() as i64,
                        y32.as_mut_ptr() as i64,
                        n as i64,
                    );
                }
                for i in 0..n {
                    assert_eq!(
                        y[i].to_bits(),
                        f.eval_f64(x[i]).to_bits(),
                        "{} f64 at {}",
                        f.name(),
                        x[i]
                    );
                    assert_eq!(
                        y32[i].to_bits(),
                        f.eval_f32(x32[i]).to_bits(),
                        "{} f32 at {}",
                        f.name(),
                        x32[i]
                    );
                }
            }
        }
    }
}
