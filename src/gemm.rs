//! egrad's matrix product kernel: what `matmul` computes, everywhere.
//!
//! **The definition.** `c = a · b` for an `m × k` matrix `a` and a
//! `k × n` matrix `b` is, for every element,
//!
//! ```text
//! acc = +0;  for l in 0..k { acc = fma(a[i, l], b[l, j], acc) };  c[i, j] = acc
//! ```
//!
//! one fused multiply-add per step (one rounding), `l` in increasing order.
//! The reference interpreter and constant folding ([`crate::ops`]) call this
//! module; native code calls it too (through [`egrad_dgemm`] /
//! [`egrad_sgemm`], `BackendOptions::gemm`, the default) or runs its own loop
//! nest of Cranelift `fma` instructions in the same order (an object file,
//! or `gemm` off). Since a fused multiply-add is correctly rounded, each
//! element's result depends only on its row of `a` and column of `b`: not on
//! the tiling, the vector width, the operands' strides, or whether the CPU
//! has FMA instructions (Rust's `mul_add` and Cranelift's `fma` fall back to
//! the C library's correctly rounded `fma` without them). So the
//! interpreter, the JIT with or without this kernel, SIMD on or off, and
//! object code agree bit for bit.
//!
//! **The kernel.** On x86-64 with AVX2 and FMA (detected at run time) the
//! product runs in 256-bit registers: tiles of 4 rows × 2 vectors of
//! columns holding 8 accumulators, each summing over the whole of `k` (no
//! blocking of `k`: that would change the order); operands whose layout
//! does not suit are packed into a per-thread buffer first (see
//! `avx_kernel!`). Leftover rows run a 1-row tile. Elsewhere the
//! definition runs as written. After the first call at given sizes the
//! packing buffer is reused, so steady-state calls do not allocate.

use std::cell::RefCell;

/// A float type the kernel multiplies.
pub(crate) trait Elem: Copy + Default {
    fn fma(self, b: Self, c: Self) -> Self;
}

impl Elem for f64 {
    #[inline(always)]
    fn fma(self, b: f64, c: f64) -> f64 {
        self.mul_add(b, c)
    }
}

impl Elem for f32 {
    #[inline(always)]
    fn fma(self, b: f32, c: f32) -> f32 {
        self.mul_add(b, c)
    }
}

/// Strided read-only view of a matrix: element `(r, c)` at
/// `ptr + r·rs + c·cs` (in elements).
#[derive(Clone, Copy)]
pub(crate) struct View<T> {
    pub(crate) ptr: *const T,
    pub(crate) rs: isize,
    pub(crate) cs: isize,
}

impl<T: Copy> View<T> {
    /// # Safety
    /// `(r, c)` lies inside the matrix the view was made for.
    #[inline(always)]
    pub(crate) unsafe fn at(&self, r: usize, c: usize) -> T {
        // SAFETY: the caller's contract.
        unsafe { *self.ptr.offset(r as isize * self.rs + c as isize * self.cs) }
    }
}

/// The definition, for rows `rows` and columns `cols` of `c` (row stride
/// `ldc`).
///
/// # Safety
/// The views cover `m × k` and `k × n`; `c` holds `m × ldc` elements.
#[inline(always)]
unsafe fn scalar_block<T: Elem>(
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    k: usize,
    a: View<T>,
    b: View<T>,
    c: *mut T,
    ldc: usize,
) {
    for i in rows {
        for j in cols.clone() {
            let mut acc = T::default();
            for l in 0..k {
                // SAFETY: i < m, l < k, j < n (caller's contract).
                acc = unsafe { a.at(i, l).fma(b.at(l, j), acc) };
            }
            // SAFETY: as above.
            unsafe { *c.add(i * ldc + j) = acc };
        }
    }
}

thread_local! {
    static PACK_F64: RefCell<Vec<f64>> = const { RefCell::new(Vec::new()) };
    static PACK_F32: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Whether the CPU has AVX2 and FMA (checked once).
#[cfg(target_arch = "x86_64")]
pub(crate) fn has_avx2_fma() -> bool {
    use std::sync::OnceLock;
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"))
}

/// The AVX2 + FMA kernel for one element type.
///
/// `b` is packed into `pack` as panels of `NR = 2 × LANES` columns (zero-
/// padded at the right edge), each `k × NR` contiguous elements: read in
/// place, a panel's rows would be a long stride apart and map to a few of
/// L1's sets (measured: packing makes a 512³ product 2.6× faster). A tile of 4 rows of `a` is read in
/// place when `a`'s rows are contiguous, else packed (every tile, as `k`
/// groups of 4: strided columns would thrash the cache's sets). Panels are
/// the outer loop, so a panel stays in L1 while the tiles stream past.
/// Padded columns are computed and dropped; every kept element is its own
/// fma chain.
#[cfg(target_arch = "x86_64")]
macro_rules! avx_kernel {
    ($name:ident, $t:ty, $v:ty, $lanes:expr, $zero:ident, $load:ident, $store:ident,
     $splat:ident, $fmadd:ident) => {
        /// # Safety
        /// AVX2 and FMA are present; the views cover `m × k` and `k × n`;
        /// `c` holds `m × n` elements (row-major); `pack` is this type's
        /// packing buffer.
        #[target_feature(enable = "avx2,fma")]
        unsafe fn $name(
            m: usize,
            k: usize,
            n: usize,
            a: View<$t>,
            b: View<$t>,
            c: *mut $t,
            pack: &mut Vec<$t>,
        ) {
            use std::arch::x86_64::*;
            const W: usize = $lanes;
            const NR: usize = 2 * W;
            const MR: usize = 4;
            let panels = n.div_ceil(NR);
            let a_in_place = a.cs == 1;
            let b_len = panels * k * NR;
            let tiles = m / MR;
            let a_len = if a_in_place { 0 } else { tiles * k * MR };
            if pack.len() < b_len + a_len {
                pack.resize(b_len + a_len, <$t>::default());
            }
            let (bpack, apack) = pack.split_at_mut(b_len);
            for p in 0..panels {
                let j0 = p * NR;
                for l in 0..k {
                    for u in 0..NR {
                        let x = if j0 + u < n {
                            // SAFETY: l < k, j0 + u < n.
                            unsafe { b.at(l, j0 + u) }
                        } else {
                            <$t>::default()
                        };
                        bpack[(p * k + l) * NR + u] = x;
                    }
                }
            }
            if !a_in_place {
                for t in 0..tiles {
                    for l in 0..k {
                        for r in 0..MR {
                            // SAFETY: t·MR + r < m, l < k.
                            apack[(t * k + l) * MR + r] = unsafe { a.at(t * MR + r, l) };
                        }
                    }
                }
            }
            // Write an accumulator row to columns j0.. of row i (fewer
            // than NR at the right edge).
            let store = |i: usize, j0: usize, lo: $v, hi: $v| {
                let w = NR.min(n - j0);
                // SAFETY: row i, columns j0 .. j0 + w of c.
                unsafe {
                    let out = c.add(i * n + j0);
                    if w == NR {
                        $store(out, lo);
                        $store(out.add(W), hi);
                    } else {
                        let mut tmp = [<$t>::default(); NR];
                        $store(tmp.as_mut_ptr(), lo);
                        $store(tmp.as_mut_ptr().add(W), hi);
                        std::ptr::copy_nonoverlapping(tmp.as_ptr(), out, w);
                    }
                }
            };
            // Panels outer: a panel of b stays in L1 while every tile of
            // a streams past it.
            for p in 0..panels {
                // Row l of the panel at bp + l·NR.
                let (bp, bs) = (bpack[p * k * NR..].as_ptr(), NR as isize);
                for t in 0..tiles {
                    // Row r of the tile at l: ap + r·ars + l·acs.
                    let (ap, ars, acs) = if a_in_place {
                        // SAFETY: row t·MR of a exists.
                        (unsafe { a.ptr.offset((t * MR) as isize * a.rs) }, a.rs, 1)
                    } else {
                        (apack[t * k * MR..].as_ptr(), 1, MR as isize)
                    };
                    let mut acc = [[$zero(); 2]; MR];
                    for l in 0..k {
                        // SAFETY: row l of the panel and of the tile exist.
                        unsafe {
                            let row = bp.offset(l as isize * bs);
                            let b0 = $load(row);
                            let b1 = $load(row.add(W));
                            let al = ap.offset(l as isize * acs);
                            for (r, acc) in acc.iter_mut().enumerate() {
                                let x = $splat(*al.offset(r as isize * ars));
                                acc[0] = $fmadd(x, b0, acc[0]);
                                acc[1] = $fmadd(x, b1, acc[1]);
                            }
                        }
                    }
                    for (r, acc) in acc.iter().enumerate() {
                        store(t * MR + r, p * NR, acc[0], acc[1]);
                    }
                }
                for i in tiles * MR..m {
                    let mut acc: [$v; 2] = [$zero(); 2];
                    for l in 0..k {
                        // SAFETY: as above.
                        unsafe {
                            let row = bp.offset(l as isize * bs);
                            let x = $splat(a.at(i, l));
                            acc[0] = $fmadd(x, $load(row), acc[0]);
                            acc[1] = $fmadd(x, $load(row.add(W)), acc[1]);
                        }
                    }
                    store(i, p * NR, acc[0], acc[1]);
                }
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
avx_kernel!(
    avx_f64,
    f64,
    std::arch::x86_64::__m256d,
    4,
    _mm256_setzero_pd,
    _mm256_loadu_pd,
    _mm256_storeu_pd,
    _mm256_set1_pd,
    _mm256_fmadd_pd
);

#[cfg(target_arch = "x86_64")]
avx_kernel!(
    avx_f32,
    f32,
    std::arch::x86_64::__m256,
    8,
    _mm256_setzero_ps,
    _mm256_loadu_ps,
    _mm256_storeu_ps,
    _mm256_set1_ps,
    _mm256_fmadd_ps
);

macro_rules! entry {
    ($(#[$doc:meta])* $name:ident, $t:ty, $avx:ident, $pack:ident) => {
        $(#[$doc])*
        ///
        /// # Safety
        ///
        /// `a` addresses an `m × k` matrix and `b` a `k × n` matrix with the
        /// given row and column strides (in elements); `c` holds `m × n`
        /// elements, row-major, and overlaps neither.
        #[allow(clippy::too_many_arguments)]
        pub(crate) unsafe extern "C" fn $name(
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
            let (m, k, n) = (m.max(0) as usize, k.max(0) as usize, n.max(0) as usize);
            let a = View { ptr: a, rs: rsa as isize, cs: csa as isize };
            let b = View { ptr: b, rs: rsb as isize, cs: csb as isize };
            #[cfg(target_arch = "x86_64")]
            if has_avx2_fma() {
                // A panic cannot cross `extern "C"`: a buffer already
                // borrowed (impossible: no re-entry) takes the scalar path.
                // (A thread being torn down has no buffer either.)
                let done = $pack
                    .try_with(|p| match p.try_borrow_mut() {
                        Ok(mut p) => {
                            // SAFETY: features checked; the caller's contract.
                            unsafe { $avx(m, k, n, a, b, c, &mut p) };
                            true
                        }
                        Err(_) => false,
                    })
                    .unwrap_or(false);
                if done {
                    return;
                }
            }
            // SAFETY: the caller's contract.
            unsafe { scalar_block(0..m, 0..n, k, a, b, c, n) }
        }
    };
}

entry!(
    /// `c = a · b` in `f64` by egrad's definition (see the module docs).
    egrad_dgemm,
    f64,
    avx_f64,
    PACK_F64
);

entry!(
    /// [`egrad_dgemm`] in `f32`.
    egrad_sgemm,
    f32,
    avx_f32,
    PACK_F32
);

/// `a · b` of row-major `a` (`m × k`) and `b` (`k × n`) held as `f64`
/// (the interpreter's representation), computed in `f64`, or in `f32` when
/// `f32` is set (the elements are then exactly `f32` numbers).
pub(crate) fn matmul(f32: bool, a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    assert!(
        a.len() == m * k && b.len() == k * n,
        "matmul: operand sizes"
    );
    let (mi, ki, ni) = (m as i64, k as i64, n as i64);
    if f32 {
        let a: Vec<f32> = a.iter().map(|&x| x as f32).collect();
        let b: Vec<f32> = b.iter().map(|&x| x as f32).collect();
        let mut c = vec![0f32; m * n];
        // SAFETY: the sizes were checked above; `c` is a fresh buffer.
        unsafe {
            egrad_sgemm(
                mi,
                ki,
                ni,
                a.as_ptr(),
                ki,
                1,
                b.as_ptr(),
                ni,
                1,
                c.as_mut_ptr(),
            )
        };
        c.into_iter().map(f64::from).collect()
    } else {
        let mut c = vec![0f64; m * n];
        // SAFETY: as above.
        unsafe {
            egrad_dgemm(
                mi,
                ki,
                ni,
                a.as_ptr(),
                ki,
                1,
                b.as_ptr(),
                ni,
                1,
                c.as_mut_ptr(),
            )
        };
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic values of mixed magnitude and sign.
    fn data(n: usize, seed: u64) -> Vec<f64> {
        (0..n as u64)
            .map(|i| {
                let x = ((i * 2654435761 + seed * 40503) % 1000003) as f64 / 1000003.0 - 0.5;
                x * (1.0 + (i % 7) as f64 * 3.1)
            })
            .collect()
    }

    /// The definition, written out on row-major operands.
    fn definition(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
        let mut c = Vec::with_capacity(m * n);
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0.0f64;
                for l in 0..k {
                    acc = a[i * k + l].mul_add(b[l * n + j], acc);
                }
                c.push(acc);
            }
        }
        c
    }

    fn same_bits(x: &[f64], y: &[f64]) -> bool {
        x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits())
    }

    #[test]
    fn kernel_equals_the_definition_at_edge_shapes() {
        for &(m, k, n) in &[
            (0, 3, 4),
            (3, 0, 5),
            (1, 1, 1),
            (4, 7, 8),
            (5, 9, 17),
            (7, 13, 23),
            (9, 64, 40),
            (64, 128, 10),
            (3, 5, 33),
        ] {
            let (a, b) = (data(m * k, 1), data(k * n, 2));
            let got = matmul(false, &a, &b, m, k, n);
            assert!(
                same_bits(&got, &definition(&a, &b, m, k, n)),
                "f64 {m}x{k}x{n}"
            );
            // f32: the same definition in f32.
            let a32: Vec<f64> = a.iter().map(|&x| x as f32 as f64).collect();
            let b32: Vec<f64> = b.iter().map(|&x| x as f32 as f64).collect();
            let got = matmul(true, &a32, &b32, m, k, n);
            let want: Vec<f64> = (0..m * n)
                .map(|e| {
                    let (i, j) = (e / n.max(1), e % n.max(1));
                    let mut acc = 0.0f32;
                    for l in 0..k {
                        acc = (a32[i * k + l] as f32).mul_add(b32[l * n + j] as f32, acc);
                    }
                    acc as f64
                })
                .collect();
            assert!(same_bits(&got, &want), "f32 {m}x{k}x{n}");
        }
    }

    #[test]
    fn strides_do_not_change_the_result() {
        // a and b stored transposed, read in place by strides: same bits.
        let (m, k, n) = (11, 37, 21);
        let (a, b) = (data(m * k, 3), data(k * n, 4));
        let want = matmul(false, &a, &b, m, k, n);
        let at: Vec<f64> = (0..k * m).map(|e| a[(e % m) * k + e / m]).collect();
        let bt: Vec<f64> = (0..n * k).map(|e| b[(e % k) * n + e / k]).collect();
        let mut c = vec![0.0; m * n];
        // SAFETY: at is k × m (a read with rs = 1, cs = m), bt is n × k.
        unsafe {
            egrad_dgemm(
                m as i64,
                k as i64,
                n as i64,
                at.as_ptr(),
                1,
                m as i64,
                bt.as_ptr(),
                1,
                k as i64,
                c.as_mut_ptr(),
            )
        };
        assert!(same_bits(&c, &want));
    }

    #[test]
    fn signed_zeros_and_specials_follow_the_definition() {
        // inf and NaN propagate as in a chain of fused multiply-adds.
        let a = [-0.0, 1.0, f64::INFINITY, 0.0];
        let b = [0.0, -0.0, 1.0, f64::NAN];
        let got = matmul(false, &a, &b, 2, 2, 2);
        assert!(same_bits(&got, &definition(&a, &b, 2, 2, 2)));
        // The sum starts at +0: a -0 product gives +0, as in the
        // interpreter's sums.
        let got = matmul(false, &[-0.0], &[1.0], 1, 1, 1);
        assert_eq!(got[0].to_bits(), 0f64.to_bits());
    }
}
