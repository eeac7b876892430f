//! egrad's matrix-vector class kernels: the row sums (`sumtail`) and the
//! column sums (`sumlead`) of an element-wise product of two operands in
//! memory, which is what a matrix-vector product (`X · w`: `sumtail (mul X
//! (repeat w))`) and a vector-matrix product (`Xᵀ · g`: `sumlead (mul
//! (spread g) X)`) are in egrad's IR.
//!
//! **The definition.** Each product `a[i, j] · b[i, j]` is rounded, then
//! summed in egrad's fixed reduction orders, exactly as the reference
//! interpreter (`crate::ops`) sums a materialised product:
//!
//! * [`egrad_drowdot`] (`sumtail`): row `i` by [`crate::ops::fold_row`],
//!   eight partial sums from +0 (partial `p` takes columns `p, p + 8, ...`
//!   of the whole blocks of eight), combined as `q[p] = s[p] + s[p + 4]`,
//!   `r[p] = q[p] + q[p + 2]`, `r[0] + r[1]`, then the leftover columns
//!   left to right.
//! * [`egrad_dcolsum`] (`sumlead`): column `j` from +0, rows top to bottom.
//!
//! No fused multiply-add and no other association, so the result is bit
//! for bit the interpreter's and the Cranelift loop nest's, on any CPU.
//!
//! **The kernels.** With AVX2 (detected at run time, with FMA as for the
//! matrix kernel, though these kernels do not fuse) the eight partials of
//! a row are two `f64` vectors (one `f32` vector) of 256 bits, several rows
//! at a time so that the additions overlap; a column sum keeps 32 (`f64`)
//! or 64 (`f32`) columns in eight vector accumulators per pass over the
//! rows. An operand is either read along the row (column stride 1) or
//! constant along it (column stride 0: a `spread` vector, broadcast once
//! per row); a row stride of 0 is a `repeat`ed vector. Elsewhere the
//! definition runs as written.

use std::ops::{Add, Mul};

/// A float type the kernels sum.
trait Elem: Copy + Default + Add<Output = Self> + Mul<Output = Self> {}
impl Elem for f64 {}
impl Elem for f32 {}

use crate::gemm::View;

/// The row sums by the definition, rows `rows`.
///
/// # Safety
/// The views cover `m × k`; `out` holds `m` elements.
unsafe fn rowdot_scalar<T: Elem>(
    rows: std::ops::Range<usize>,
    k: usize,
    a: View<T>,
    b: View<T>,
    out: *mut T,
) {
    let main = k - k % 8;
    for i in rows {
        // SAFETY (every `at`): i < m, c < k.
        let x = |c: usize| unsafe { a.at(i, c) * b.at(i, c) };
        let mut p = [T::default(); 8];
        for c in (0..main).step_by(8) {
            for (l, acc) in p.iter_mut().enumerate() {
                *acc = *acc + x(c + l);
            }
        }
        let q: [T; 4] = std::array::from_fn(|j| p[j] + p[j + 4]);
        let r: [T; 2] = std::array::from_fn(|j| q[j] + q[j + 2]);
        let mut s = r[0] + r[1];
        for c in main..k {
            s = s + x(c);
        }
        // SAFETY: i < m.
        unsafe { *out.add(i) = s };
    }
}

/// The column sums by the definition, columns `cols`.
///
/// # Safety
/// The views cover `m × k`; `out` holds `k` elements.
unsafe fn colsum_scalar<T: Elem>(
    m: usize,
    cols: std::ops::Range<usize>,
    a: View<T>,
    b: View<T>,
    out: *mut T,
) {
    for j in cols {
        let mut s = T::default();
        for i in 0..m {
            // SAFETY: i < m, j < k.
            s = s + unsafe { a.at(i, j) * b.at(i, j) };
        }
        // SAFETY: j < k.
        unsafe { *out.add(j) = s };
    }
}

/// The AVX2 kernels for one element type: `$rowdot` (rows `ROWS` at a
/// time, then one) and `$colsum` (columns `8·W` at a time, then `W`, then
/// the definition for the last few).
#[cfg(target_arch = "x86_64")]
macro_rules! avx_kernels {
    ($rowdot:ident, $colsum:ident, $vec:ident, $t:ty, $v:ty, $lanes:expr, $rows:expr,
     $zero:ident, $load:ident, $store:ident, $splat:ident, $add:ident, $mul:ident,
     $finish:expr) => {
        /// Columns `c .. c + W` of row `i` of an operand; `SPREAD`: its
        /// column stride is 0 (known when compiling: no test per load).
        ///
        /// # Safety
        /// AVX2 is present; row `i`, columns `c .. c + W` lie inside.
        #[target_feature(enable = "avx2")]
        #[inline]
        unsafe fn $vec<const SPREAD: bool>(o: &View<$t>, i: usize, c: usize) -> $v {
            use std::arch::x86_64::*;
            // SAFETY: the caller's contract.
            unsafe {
                let row = o.ptr.offset(i as isize * o.rs);
                if SPREAD {
                    $splat(*row)
                } else {
                    $load(row.add(c))
                }
            }
        }

        /// # Safety
        /// AVX2 is present; the views cover `m × k`; `out` holds `m`
        /// elements.
        #[target_feature(enable = "avx2")]
        unsafe fn $rowdot<const SA: bool, const SB: bool>(
            m: usize,
            k: usize,
            a: View<$t>,
            b: View<$t>,
            out: *mut $t,
        ) {
            use std::arch::x86_64::*;
            const W: usize = $lanes;
            // Vectors per block of eight partials.
            const V: usize = 8 / W;
            const R: usize = $rows;
            let main = k - k % 8;
            // Rows i .. i + rows (rows <= R).
            let block = |i: usize, rows: usize| {
                let mut p = [[$zero(); V]; R];
                for c in (0..main).step_by(8) {
                    for (r, pr) in p.iter_mut().enumerate().take(rows) {
                        for (u, acc) in pr.iter_mut().enumerate() {
                            // SAFETY: row i + r < m, columns < main <= k.
                            let x = unsafe {
                                $mul(
                                    $vec::<SA>(&a, i + r, c + u * W),
                                    $vec::<SB>(&b, i + r, c + u * W),
                                )
                            };
                            *acc = $add(*acc, x);
                        }
                    }
                }
                for (r, pr) in p.iter().enumerate().take(rows) {
                    let mut s: $t = $finish(pr);
                    for c in main..k {
                        // SAFETY: row i + r < m, c < k.
                        s += unsafe { a.at(i + r, c) * b.at(i + r, c) };
                    }
                    // SAFETY: i + r < m.
                    unsafe { *out.add(i + r) = s };
                }
            };
            let mut i = 0;
            while i + R <= m {
                block(i, R);
                i += R;
            }
            while i < m {
                block(i, 1);
                i += 1;
            }
        }

        /// # Safety
        /// AVX2 is present; the views cover `m × k`; `out` holds `k`
        /// elements.
        #[target_feature(enable = "avx2")]
        unsafe fn $colsum<const SA: bool, const SB: bool>(
            m: usize,
            k: usize,
            a: View<$t>,
            b: View<$t>,
            out: *mut $t,
        ) {
            use std::arch::x86_64::*;
            const W: usize = $lanes;
            let mut j = 0;
            for width in [8, 1] {
                while j + width * W <= k {
                    let mut acc = [$zero(); 8];
                    for i in 0..m {
                        for (u, acc) in acc.iter_mut().enumerate().take(width) {
                            // SAFETY: i < m, columns < k.
                            let x = unsafe {
                                $mul($vec::<SA>(&a, i, j + u * W), $vec::<SB>(&b, i, j + u * W))
                            };
                            *acc = $add(*acc, x);
                        }
                    }
                    for (u, acc) in acc.iter().enumerate().take(width) {
                        // SAFETY: columns j + u·W .. + W < k.
                        unsafe { $store(out.add(j + u * W), *acc) };
                    }
                    j += width * W;
                }
            }
            // SAFETY: the caller's contract.
            unsafe { colsum_scalar(m, j..k, a, b, out) };
        }
    };
}

/// `q[p] = s[p] + s[p + 4]`, `r[p] = q[p] + q[p + 2]`, `r[0] + r[1]` of
/// the partials `s[0..4]` in `p[0]`, `s[4..8]` in `p[1]`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn finish_f64(p: &[std::arch::x86_64::__m256d; 2]) -> f64 {
    use std::arch::x86_64::*;
    // SAFETY: only reached from the AVX2 kernel.
    unsafe {
        let q = _mm256_add_pd(p[0], p[1]);
        let r = _mm_add_pd(_mm256_castpd256_pd128(q), _mm256_extractf128_pd(q, 1));
        _mm_cvtsd_f64(r) + _mm_cvtsd_f64(_mm_unpackhi_pd(r, r))
    }
}

/// [`finish_f64`] for the eight `f32` partials in one vector.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn finish_f32(p: &[std::arch::x86_64::__m256; 1]) -> f32 {
    use std::arch::x86_64::*;
    // SAFETY: only reached from the AVX2 kernel.
    unsafe {
        let q = _mm_add_ps(_mm256_castps256_ps128(p[0]), _mm256_extractf128_ps(p[0], 1));
        let r = _mm_add_ps(q, _mm_movehl_ps(q, q));
        _mm_cvtss_f32(r) + _mm_cvtss_f32(_mm_shuffle_ps(r, r, 1))
    }
}

#[cfg(target_arch = "x86_64")]
avx_kernels!(
    rowdot_avx_f64,
    colsum_avx_f64,
    vec_f64,
    f64,
    std::arch::x86_64::__m256d,
    4,
    4,
    _mm256_setzero_pd,
    _mm256_loadu_pd,
    _mm256_storeu_pd,
    _mm256_set1_pd,
    _mm256_add_pd,
    _mm256_mul_pd,
    finish_f64
);

#[cfg(target_arch = "x86_64")]
avx_kernels!(
    rowdot_avx_f32,
    colsum_avx_f32,
    vec_f32,
    f32,
    std::arch::x86_64::__m256,
    8,
    4,
    _mm256_setzero_ps,
    _mm256_loadu_ps,
    _mm256_storeu_ps,
    _mm256_set1_ps,
    _mm256_add_ps,
    _mm256_mul_ps,
    finish_f32
);

macro_rules! entry {
    ($(#[$doc:meta])* $name:ident, $t:ty, $avx:ident, $scalar:ident, $rows:literal) => {
        $(#[$doc])*
        ///
        /// # Safety
        ///
        /// `a` and `b` address `m × k` operands with the given row and
        /// column strides (in elements, column strides 0 or 1); `out` holds
        #[doc = concat!("`", $rows, "` elements and overlaps neither.")]
        #[allow(clippy::too_many_arguments)]
        pub(crate) unsafe extern "C" fn $name(
            m: i64,
            k: i64,
            a: *const $t,
            rsa: i64,
            csa: i64,
            b: *const $t,
            rsb: i64,
            csb: i64,
            out: *mut $t,
        ) {
            let (m, k) = (m.max(0) as usize, k.max(0) as usize);
            let a = View { ptr: a, rs: rsa as isize, cs: csa as isize };
            let b = View { ptr: b, rs: rsb as isize, cs: csb as isize };
            #[cfg(target_arch = "x86_64")]
            if crate::gemm::has_avx2_fma() && a.cs & !1 == 0 && b.cs & !1 == 0 {
                // SAFETY: the feature was checked; the caller's contract.
                unsafe {
                    match (a.cs == 0, b.cs == 0) {
                        (false, false) => $avx::<false, false>(m, k, a, b, out),
                        (false, true) => $avx::<false, true>(m, k, a, b, out),
                        (true, false) => $avx::<true, false>(m, k, a, b, out),
                        (true, true) => $avx::<true, true>(m, k, a, b, out),
                    }
                }
                return;
            }
            // SAFETY: the caller's contract.
            unsafe { $scalar(m, k, a, b, out) }
        }
    };
}

/// [`rowdot_scalar`] over all rows.
///
/// # Safety
/// As [`rowdot_scalar`].
unsafe fn rowdot_all<T: Elem>(m: usize, k: usize, a: View<T>, b: View<T>, out: *mut T) {
    // SAFETY: the caller's contract.
    unsafe { rowdot_scalar(0..m, k, a, b, out) }
}

/// [`colsum_scalar`] over all columns.
///
/// # Safety
/// As [`colsum_scalar`].
unsafe fn colsum_all<T: Elem>(m: usize, k: usize, a: View<T>, b: View<T>, out: *mut T) {
    // SAFETY: the caller's contract.
    unsafe { colsum_scalar(m, 0..k, a, b, out) }
}

entry!(
    /// `out[i] = fold_row(a[i, :] · b[i, :])` in `f64` (`sumtail` of a
    /// product; see the module docs).
    egrad_drowdot,
    f64,
    rowdot_avx_f64,
    rowdot_all,
    "m"
);

entry!(
    /// [`egrad_drowdot`] in `f32`.
    egrad_srowdot,
    f32,
    rowdot_avx_f32,
    rowdot_all,
    "m"
);

entry!(
    /// `out[j] = Σ_i a[i, j] · b[i, j]`, rows in order from +0, in `f64`
    /// (`sumlead` of a product; see the module docs).
    egrad_dcolsum,
    f64,
    colsum_avx_f64,
    colsum_all,
    "k"
);

entry!(
    /// [`egrad_dcolsum`] in `f32`.
    egrad_scolsum,
    f32,
    colsum_avx_f32,
    colsum_all,
    "k"
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::fold_row;

    /// Values of mixed magnitude and sign (so that the order of the sums
    /// shows in the last bits).
    fn data(n: usize, seed: u64) -> Vec<f64> {
        (0..n as u64)
            .map(|i| {
                let x = ((i * 2654435761 + seed * 40503) % 1000003) as f64 / 1000003.0 - 0.5;
                x * (1.0 + (i % 7) as f64 * 3.1) * if i % 5 == 0 { 1e6 } else { 1.0 }
            })
            .collect()
    }

    /// The operand forms the lowering passes: a matrix, a repeated row
    /// (row stride 0), a spread column (column stride 0).
    #[derive(Clone, Copy, Debug)]
    enum Form {
        Matrix,
        Repeat,
        Spread,
    }

    fn operand(form: Form, m: usize, k: usize, seed: u64) -> (Vec<f64>, i64, i64) {
        match form {
            Form::Matrix => (data(m * k, seed), k as i64, 1),
            Form::Repeat => (data(k, seed), 0, 1),
            Form::Spread => (data(m, seed), 1, 0),
        }
    }

    fn elem(x: &(Vec<f64>, i64, i64), i: usize, j: usize) -> f64 {
        x.0[i * x.1 as usize + j * x.2 as usize]
    }

    /// Both kernels in both precisions against the interpreter's
    /// definition (`fold_row` of the rounded products; rows in order),
    /// bit for bit, over sizes around the vector and block widths.
    #[test]
    fn kernels_are_the_definition() {
        let forms = [Form::Matrix, Form::Repeat, Form::Spread];
        for (m, k) in [
            (1, 1),
            (3, 7),
            (4, 8),
            (5, 9),
            (9, 17),
            (7, 64),
            (13, 70),
            (6, 131),
        ] {
            for fa in forms {
                for fb in forms {
                    let a = operand(fa, m, k, 1);
                    let b = operand(fb, m, k, 2);
                    for f32 in [false, true] {
                        let round = |x: f64| if f32 { x as f32 as f64 } else { x };
                        let prod = |i: usize, j: usize| {
                            round(round(elem(&a, i, j)) * round(elem(&b, i, j)))
                        };
                        let add = |x: f64, y: f64| round(x + y);
                        let rows: Vec<f64> = (0..m)
                            .map(|i| {
                                let xs: Vec<f64> = (0..k).map(|j| prod(i, j)).collect();
                                fold_row(&xs, 0.0, &add)
                            })
                            .collect();
                        let cols: Vec<f64> = (0..k)
                            .map(|j| (0..m).fold(0.0, |s, i| add(s, prod(i, j))))
                            .collect();
                        let (got_rows, got_cols) = if f32 {
                            let a32: Vec<f32> = a.0.iter().map(|&x| x as f32).collect();
                            let b32: Vec<f32> = b.0.iter().map(|&x| x as f32).collect();
                            let mut r = vec![0f32; m];
                            let mut c = vec![0f32; k];
                            let (mi, ki) = (m as i64, k as i64);
                            // SAFETY: the operands cover m × k by their forms.
                            unsafe {
                                egrad_srowdot(
                                    mi,
                                    ki,
                                    a32.as_ptr(),
                                    a.1,
                                    a.2,
                                    b32.as_ptr(),
                                    b.1,
                                    b.2,
                                    r.as_mut_ptr(),
                                );
                                egrad_scolsum(
                                    mi,
                                    ki,
                                    a32.as_ptr(),
                                    a.1,
                                    a.2,
                                    b32.as_ptr(),
                                    b.1,
                                    b.2,
                                    c.as_mut_ptr(),
                                );
                            }
                            (
                                r.into_iter().map(f64::from).collect::<Vec<_>>(),
                                c.into_iter().map(f64::from).collect::<Vec<_>>(),
                            )
                        } else {
                            let mut r = vec![0f64; m];
                            let mut c = vec![0f64; k];
                            let (mi, ki) = (m as i64, k as i64);
                            // SAFETY: as above.
                            unsafe {
                                egrad_drowdot(
                                    mi,
                                    ki,
                                    a.0.as_ptr(),
                                    a.1,
                                    a.2,
                                    b.0.as_ptr(),
                                    b.1,
                                    b.2,
                                    r.as_mut_ptr(),
                                );
                                egrad_dcolsum(
                                    mi,
                                    ki,
                                    a.0.as_ptr(),
                                    a.1,
                                    a.2,
                                    b.0.as_ptr(),
                                    b.1,
                                    b.2,
                                    c.as_mut_ptr(),
                                );
                            }
                            (r, c)
                        };
                        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                        let what = format!("{m}x{k} {fa:?}·{fb:?} f32={f32}");
                        assert_eq!(bits(&got_rows), bits(&rows), "row sums {what}");
                        assert_eq!(bits(&got_cols), bits(&cols), "column sums {what}");
                    }
                }
            }
        }
    }
}
