//! Dense linear algebra on row-major `f64` matrices: the Cholesky factor,
//! triangular and general solves, the inverse, the log-determinant, the
//! symmetric eigendecomposition, and their reverse-mode rules. The builtin
//! kernels ([`crate::ops::kernels`]: `cholesky`, `solve`, ...) call these
//! functions from native code and from the interpreter alike, so both give
//! the same bits.
//!
//! The factorization, the solves and the products are faer's, run
//! sequentially (`Par::Seq`): blocked and vectorized for the CPU it runs
//! on, and the same sums in the same order at every call on that CPU,
//! whoever calls. A matrix's size
//! is read from its element count (`n x n`), a right-hand side's column
//! count from its own (`n x m`, a vector being `m = 1`).
//!
//! # The rules
//!
//! * `cholesky(A)` factors the symmetric part `(A + Aᵀ)/2` (as JAX's
//!   `jnp.linalg.cholesky` does): `L` lower triangular with a positive
//!   diagonal and `L Lᵀ = (A + Aᵀ)/2`. A matrix that is not positive
//!   definite (a pivot that is not positive, or NaN) gives a matrix of
//!   NaN. Its reverse rule (Murray 2016, "Differentiation of the Cholesky
//!   decomposition"): with `P = Φ(Lᵀ L̄)`, `Φ` the lower triangle with the
//!   diagonal halved, `S = L⁻ᵀ P L⁻¹` and `Ā = (S + Sᵀ)/2`.
//! * `solve_lower(L, B)` is `X = L⁻¹ B` (forward substitution, reading
//!   the lower triangle of `L` only): `B̄ = L⁻ᵀ X̄`, `L̄ = -tril(B̄ Xᵀ)`
//!   (Giles 2008).
//! * `solve_lower_t(L, B)` is `X = L⁻ᵀ B` (back substitution with `Lᵀ`):
//!   `B̄ = L⁻¹ X̄`, `L̄ = -tril(X B̄ᵀ)`.
//! * `solve(A, B)`, `inv(A)` and `slogdet(A)` go through `A`'s LU with
//!   partial pivoting: `Ā = -B̄ Xᵀ` with `B̄ = A⁻ᵀ X̄`; `Ā = -Xᵀ X̄ Xᵀ`;
//!   `Ā = ḡ A⁻ᵀ` (Giles 2008).
//! * `eigh(A)`: see [`eigh_vjp`].

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor as llt;
use faer::linalg::solvers::{DenseSolveCore, PartialPivLu, Solve};
use faer::linalg::{matmul, triangular_solve};
use faer::{Accum, MatMut, MatRef, Par, Side};

/// The side of a square matrix of `len` elements, if it is one.
pub fn side(len: usize) -> Option<usize> {
    let n = (len as f64).sqrt().round() as usize;
    (n * n == len).then_some(n)
}

/// `n` and the column count `m` of a right-hand side of `b_len` elements
/// for a matrix of `l_len` (`None` if they do not fit).
fn dims(l_len: usize, b_len: usize) -> Option<(usize, usize)> {
    let n = side(l_len)?;
    if n == 0 {
        return (b_len == 0).then_some((0, 0));
    }
    b_len.is_multiple_of(n).then_some((n, b_len / n))
}

/// `x` (`r x c`, row-major) as a matrix.
fn view(x: &[f64], r: usize, c: usize) -> MatRef<'_, f64> {
    MatRef::from_row_major_slice(x, r, c)
}

/// `x` (`r x c`, row-major) as a matrix to write.
fn view_mut(x: &mut [f64], r: usize, c: usize) -> MatMut<'_, f64> {
    MatMut::from_row_major_slice_mut(x, r, c)
}

/// Zero the strict upper triangle of an `n x n` matrix.
fn zero_upper(x: &mut [f64], n: usize) {
    for i in 0..n {
        x[i * n + i + 1..(i + 1) * n].fill(0.0);
    }
}

/// The lower Cholesky factor of `(A + Aᵀ)/2` into `out` (`n x n`, the
/// upper triangle zero); all NaN if it is not positive definite.
pub fn cholesky(a: &[f64], out: &mut [f64]) {
    let Some(n) = side(a.len()).filter(|_| out.len() == a.len()) else {
        out.fill(f64::NAN);
        return;
    };
    for i in 0..n {
        for j in 0..=i {
            let s = if i == j {
                a[i * n + j]
            } else {
                0.5 * (a[i * n + j] + a[j * n + i])
            };
            out[i * n + j] = s;
        }
    }
    zero_upper(out, n);
    let params = Default::default();
    let mut buf = MemBuffer::new(llt::cholesky_in_place_scratch::<f64>(n, Par::Seq, params));
    let done = llt::cholesky_in_place(
        view_mut(out, n, n),
        Default::default(),
        Par::Seq,
        MemStack::new(&mut buf),
        params,
    );
    // A NaN anywhere may pass the factorization's pivot test.
    if done.is_err() || out.iter().any(|x| x.is_nan()) {
        out.fill(f64::NAN);
        return;
    }
    zero_upper(out, n);
}

/// `X = L⁻¹ B` into `out` (`n x m`), reading `L`'s lower triangle.
pub fn solve_lower(l: &[f64], b: &[f64], out: &mut [f64]) {
    let Some((n, m)) = dims(l.len(), b.len()).filter(|_| out.len() == b.len()) else {
        out.fill(f64::NAN);
        return;
    };
    out.copy_from_slice(b);
    triangular_solve::solve_lower_triangular_in_place(view(l, n, n), view_mut(out, n, m), Par::Seq);
}

/// `X = L⁻ᵀ B` into `out` (`n x m`), reading `L`'s lower triangle.
pub fn solve_lower_t(l: &[f64], b: &[f64], out: &mut [f64]) {
    let Some((n, m)) = dims(l.len(), b.len()).filter(|_| out.len() == b.len()) else {
        out.fill(f64::NAN);
        return;
    };
    out.copy_from_slice(b);
    triangular_solve::solve_upper_triangular_in_place(
        view(l, n, n).transpose(),
        view_mut(out, n, m),
        Par::Seq,
    );
}

/// The transpose of an `r x c` matrix.
fn transpose(x: &[f64], r: usize, c: usize) -> Vec<f64> {
    let mut t = vec![0.0; x.len()];
    for i in 0..r {
        for j in 0..c {
            t[j * r + i] = x[i * c + j];
        }
    }
    t
}

/// The cotangent of `A` in `cholesky(A)`: `args` are `A` and `L̄`.
pub fn cholesky_vjp(args: &[&[f64]], out: &mut [f64]) {
    let (a, lbar) = (args[0], args[1]);
    let Some(n) = side(a.len()).filter(|_| lbar.len() == a.len() && out.len() == a.len()) else {
        out.fill(f64::NAN);
        return;
    };
    let mut l = vec![0.0; a.len()];
    cholesky(a, &mut l);
    // P = Φ(Lᵀ L̄) (L̄'s upper triangle is not an output: ignored), the
    // lower triangle with the diagonal halved.
    let mut lbar_low = lbar.to_vec();
    zero_upper(&mut lbar_low, n);
    let mut p = vec![0.0; a.len()];
    product(&mut p, (&l, true), (&lbar_low, false), (n, n, n), 1.0);
    phi(&mut p, n);
    // S = L⁻ᵀ P L⁻¹: T = L⁻ᵀ P, then S = (L⁻ᵀ Tᵀ)ᵀ.
    let mut t = vec![0.0; a.len()];
    solve_lower_t(&l, &p, &mut t);
    let tt = transpose(&t, n, n);
    let mut st = vec![0.0; a.len()];
    solve_lower_t(&l, &tt, &mut st);
    // st is Sᵀ; Ā = (S + Sᵀ)/2.
    out.copy_from_slice(&symmetric(&st, n));
}

/// `-tril(U Vᵀ)` of two `n x m` matrices into `out` (`n x n`).
fn neg_tril_outer(u: &[f64], v: &[f64], n: usize, m: usize, out: &mut [f64]) {
    product(out, (u, false), (v, true), (n, m, n), -1.0);
    zero_upper(out, n);
}

/// The cotangent of `L` in `solve_lower(L, B)`: `args` are `L`, `B`, `X̄`.
pub fn solve_lower_vjp_l(args: &[&[f64]], out: &mut [f64]) {
    solve_tri_vjp_l(args, out, false);
}

/// The cotangent of `B` in `solve_lower(L, B)`: `L⁻ᵀ X̄`.
pub fn solve_lower_vjp_b(args: &[&[f64]], out: &mut [f64]) {
    solve_lower_t(args[0], args[2], out);
}

/// The cotangent of `L` in `solve_lower_t(L, B)`: `args` are `L`, `B`,
/// `X̄`.
pub fn solve_lower_t_vjp_l(args: &[&[f64]], out: &mut [f64]) {
    solve_tri_vjp_l(args, out, true);
}

/// The cotangent of `B` in `solve_lower_t(L, B)`: `L⁻¹ X̄`.
pub fn solve_lower_t_vjp_b(args: &[&[f64]], out: &mut [f64]) {
    solve_lower(args[0], args[2], out);
}

/// The cotangent of `L` in `solve_lower(L, B)` (`t` false: `-tril(B̄ Xᵀ)`
/// with `B̄ = L⁻ᵀ X̄`) or in `solve_lower_t(L, B)` (`t`: `-tril(X B̄ᵀ)`
/// with `B̄ = L⁻¹ X̄`).
fn solve_tri_vjp_l(args: &[&[f64]], out: &mut [f64], t: bool) {
    let (l, b, g) = (args[0], args[1], args[2]);
    let Some((n, m)) = dims(l.len(), b.len()).filter(|_| g.len() == b.len()) else {
        out.fill(f64::NAN);
        return;
    };
    let mut x = vec![0.0; b.len()];
    let mut bbar = vec![0.0; b.len()];
    if t {
        solve_lower_t(l, b, &mut x);
        solve_lower(l, g, &mut bbar);
        neg_tril_outer(&x, &bbar, n, m, out);
    } else {
        solve_lower(l, b, &mut x);
        solve_lower_t(l, g, &mut bbar);
        neg_tril_outer(&bbar, &x, n, m, out);
    }
}

/// `A`'s LU factorization with partial pivoting (`n x n`, row-major).
fn lu(a: &[f64], n: usize) -> PartialPivLu<f64> {
    view(a, n, n).partial_piv_lu()
}

/// `X = A⁻¹ B` into `out` (`n x m`), by LU with partial pivoting: a
/// singular `A` gives infinities or NaN.
pub fn solve(a: &[f64], b: &[f64], out: &mut [f64]) {
    let Some((n, m)) = dims(a.len(), b.len()).filter(|_| out.len() == b.len()) else {
        out.fill(f64::NAN);
        return;
    };
    out.copy_from_slice(b);
    if n > 0 {
        lu(a, n).solve_in_place(view_mut(out, n, m));
    }
}

/// `A⁻ᵀ G` into `out`, by `A`'s LU.
fn solve_transposed(a: &[f64], g: &[f64], out: &mut [f64]) -> Option<(usize, usize)> {
    let (n, m) = dims(a.len(), g.len()).filter(|_| out.len() == g.len())?;
    out.copy_from_slice(g);
    if n > 0 {
        lu(a, n).solve_transpose_in_place(view_mut(out, n, m));
    }
    Some((n, m))
}

/// The cotangent of `A` in `solve(A, B)`: `-B̄ Xᵀ` with `B̄ = A⁻ᵀ X̄`;
/// `args` are `A`, `B`, `X̄`.
pub fn solve_vjp_a(args: &[&[f64]], out: &mut [f64]) {
    let (a, b, g) = (args[0], args[1], args[2]);
    let mut bbar = vec![0.0; g.len()];
    let Some((n, m)) = solve_transposed(a, g, &mut bbar).filter(|_| b.len() == g.len()) else {
        out.fill(f64::NAN);
        return;
    };
    let mut x = vec![0.0; b.len()];
    solve(a, b, &mut x);
    product(out, (&bbar, false), (&x, true), (n, m, n), -1.0);
}

/// The cotangent of `B` in `solve(A, B)`: `A⁻ᵀ X̄`.
pub fn solve_vjp_b(args: &[&[f64]], out: &mut [f64]) {
    if solve_transposed(args[0], args[2], out).is_none() {
        out.fill(f64::NAN);
    }
}

/// `A⁻¹` into `out` (`n x n`).
pub fn inv(a: &[f64], out: &mut [f64]) {
    let Some(n) = side(a.len()).filter(|_| out.len() == a.len()) else {
        out.fill(f64::NAN);
        return;
    };
    if n == 0 {
        return;
    }
    let x = lu(a, n).inverse();
    for i in 0..n {
        for j in 0..n {
            out[i * n + j] = x[(i, j)];
        }
    }
}

/// The cotangent of `A` in `inv(A)`: `-Xᵀ X̄ Xᵀ` with `X = A⁻¹`; `args`
/// are `A`, `X̄`.
pub fn inv_vjp(args: &[&[f64]], out: &mut [f64]) {
    inv_sandwich(args, out, true);
}

/// `-Y M Y` for `args` `A`, `M` and `Y = A⁻¹` (`A⁻ᵀ` if `t`): the inverse's
/// tangent (`M = dA`) and, transposed, its cotangent (`M = X̄`).
fn inv_sandwich(args: &[&[f64]], out: &mut [f64], t: bool) {
    let (a, m) = (args[0], args[1]);
    let Some(n) = side(a.len()).filter(|_| m.len() == a.len() && out.len() == a.len()) else {
        out.fill(f64::NAN);
        return;
    };
    let mut x = vec![0.0; a.len()];
    inv(a, &mut x);
    let mut ym = vec![0.0; a.len()];
    product(&mut ym, (&x, t), (m, false), (n, n, n), 1.0);
    product(out, (&ym, false), (&x, t), (n, n, n), -1.0);
}

/// `[sign, log |det A|]` into `out` (two elements), from `A`'s LU: the
/// sign is 0 and the logarithm -inf for a singular `A` (NaN for NaN).
pub fn slogdet(a: &[f64], out: &mut [f64]) {
    let Some(n) = side(a.len()).filter(|_| out.len() == 2) else {
        out.fill(f64::NAN);
        return;
    };
    if n == 0 {
        out.copy_from_slice(&[1.0, 0.0]);
        return;
    }
    let f = lu(a, n);
    let (fwd, _) = f.P().arrays();
    // The permutation's sign: (-1)^(n - cycles).
    let mut seen = vec![false; n];
    let mut sign = 1.0;
    for i in 0..n {
        if seen[i] {
            continue;
        }
        let mut j = i;
        let mut len = 0;
        while !seen[j] {
            seen[j] = true;
            j = fwd[j];
            len += 1;
        }
        if len % 2 == 0 {
            sign = -sign;
        }
    }
    let u = f.U();
    let mut log = 0.0;
    for i in 0..n {
        let d = u[(i, i)];
        if d < 0.0 {
            sign = -sign;
        } else if d == 0.0 {
            sign = 0.0;
        } else if d.is_nan() {
            sign = f64::NAN;
        }
        log += d.abs().ln();
    }
    // A NaN anywhere makes both NaN, whatever sign the pivots before it had.
    out[0] = if log.is_nan() { f64::NAN } else { sign };
    out[1] = log;
}

/// The cotangent of `A` in `slogdet(A)`: `ḡ A⁻ᵀ` for the logarithm's
/// cotangent `ḡ` (the sign's derivative is zero); `args` are `A` and the
/// two cotangents.
pub fn slogdet_vjp(args: &[&[f64]], out: &mut [f64]) {
    let (a, g) = (args[0], args[1]);
    let Some(n) = side(a.len()).filter(|_| g.len() == 2 && out.len() == a.len()) else {
        out.fill(f64::NAN);
        return;
    };
    let mut x = vec![0.0; a.len()];
    inv(a, &mut x);
    for i in 0..n {
        for j in 0..n {
            out[i * n + j] = g[1] * x[j * n + i];
        }
    }
}

/// The eigendecomposition of the symmetric part of `A`, packed into `out`
/// (`(n + 1) x n`): row 0 the eigenvalues in nondecreasing order, rows
/// `1..` the matrix `V` whose column `j` is eigenvalue `j`'s unit
/// eigenvector (its sign is faer's). NaN if it does not converge.
pub fn eigh(a: &[f64], out: &mut [f64]) {
    let Some(n) = side(a.len()).filter(|&n| out.len() == (n + 1) * n) else {
        out.fill(f64::NAN);
        return;
    };
    if n == 0 {
        return;
    }
    let sym = symmetric(a, n);
    let Ok(e) = view(&sym, n, n).self_adjoint_eigen(Side::Lower) else {
        out.fill(f64::NAN);
        return;
    };
    let (w, v) = (e.S().column_vector(), e.U());
    for j in 0..n {
        out[j] = w[j];
        for i in 0..n {
            out[(i + 1) * n + j] = v[(i, j)];
        }
    }
}

/// The cotangent of `A` in `eigh(A)`: `args` are `A` and the packed
/// cotangent (`w̄` in row 0, `V̄` below). With `F[i][j] = 1/(w_j - w_i)`
/// off the diagonal and 0 on it, `Ā = V (diag(w̄) + F ∘ (Vᵀ V̄)) Vᵀ`,
/// symmetrized: infinite or NaN where two eigenvalues are equal (their
/// eigenvectors are not determined).
pub fn eigh_vjp(args: &[&[f64]], out: &mut [f64]) {
    let (a, g) = (args[0], args[1]);
    let Some(n) = side(a.len()).filter(|&n| g.len() == (n + 1) * n && out.len() == a.len()) else {
        out.fill(f64::NAN);
        return;
    };
    if n == 0 {
        return;
    }
    let mut packed = vec![0.0; (n + 1) * n];
    eigh(a, &mut packed);
    let (w, v) = packed.split_at(n);
    let (wbar, vbar) = g.split_at(n);
    // Vᵀ V̄, then the middle matrix in place.
    let mut m = vec![0.0; a.len()];
    product(&mut m, (v, true), (vbar, false), (n, n, n), 1.0);
    by_gaps(&mut m, w, wbar);
    let mut t = vec![0.0; a.len()];
    product(&mut t, (v, false), (&m, false), (n, n, n), 1.0);
    let mut full = vec![0.0; a.len()];
    product(&mut full, (&t, false), (v, true), (n, n, n), 1.0);
    out.copy_from_slice(&symmetric(&full, n));
}

// Forward-mode rules: `args` are the arguments, then their tangents (the
// kernel registry passes zeros for an argument without one).

/// `Φ(M)`: the lower triangle of an `n x n` matrix with the diagonal
/// halved, in place.
fn phi(m: &mut [f64], n: usize) {
    zero_upper(m, n);
    for i in 0..n {
        m[i * n + i] *= 0.5;
    }
}

/// `(X + Xᵀ)/2` of an `n x n` matrix.
fn symmetric(x: &[f64], n: usize) -> Vec<f64> {
    let mut s = vec![0.0; x.len()];
    for i in 0..n {
        for j in 0..n {
            s[i * n + j] = 0.5 * (x[i * n + j] + x[j * n + i]);
        }
    }
    s
}

/// `scale · A B` into `out` (`r x c`), where `A` (`r x k`) and `B` (`k x
/// c`) are each given as itself or, with its flag set, as its transpose.
fn product(
    out: &mut [f64],
    (a, ta): (&[f64], bool),
    (b, tb): (&[f64], bool),
    (r, k, c): (usize, usize, usize),
    scale: f64,
) {
    let lhs = if ta {
        view(a, k, r).transpose()
    } else {
        view(a, r, k)
    };
    let rhs = if tb {
        view(b, c, k).transpose()
    } else {
        view(b, k, c)
    };
    matmul::matmul(
        view_mut(out, r, c),
        Accum::Replace,
        lhs,
        rhs,
        scale,
        Par::Seq,
    );
}

/// The tangent of `cholesky(A)`: `dL = L Φ(L⁻¹ dS L⁻ᵀ)`, `dS` the
/// symmetric part of `dA`.
pub fn cholesky_jvp(args: &[&[f64]], out: &mut [f64]) {
    let (a, da) = (args[0], args[1]);
    let Some(n) = side(a.len()).filter(|_| da.len() == a.len() && out.len() == a.len()) else {
        out.fill(f64::NAN);
        return;
    };
    let mut l = vec![0.0; a.len()];
    cholesky(a, &mut l);
    let ds = symmetric(da, n);
    let mut t = vec![0.0; a.len()];
    solve_lower(&l, &ds, &mut t);
    let tt = transpose(&t, n, n);
    let mut m = vec![0.0; a.len()];
    solve_lower(&l, &tt, &mut m);
    // m = L⁻¹ (L⁻¹ dS)ᵀ = L⁻¹ dS L⁻ᵀ (dS is symmetric).
    phi(&mut m, n);
    product(out, (&l, false), (&m, false), (n, n, n), 1.0);
}

/// The tangent of `solve_lower(L, B)`: `L⁻¹ (dB - tril(dL) X)`.
pub fn solve_lower_jvp(args: &[&[f64]], out: &mut [f64]) {
    solve_tri_jvp(args, out, false);
}

/// The tangent of `solve_lower_t(L, B)`: `L⁻ᵀ (dB - tril(dL)ᵀ X)`.
pub fn solve_lower_t_jvp(args: &[&[f64]], out: &mut [f64]) {
    solve_tri_jvp(args, out, true);
}

fn solve_tri_jvp(args: &[&[f64]], out: &mut [f64], t: bool) {
    let (l, b, dl, db) = (args[0], args[1], args[2], args[3]);
    let Some((n, m)) =
        dims(l.len(), b.len()).filter(|_| out.len() == b.len() && dl.len() == l.len())
    else {
        out.fill(f64::NAN);
        return;
    };
    let solve = if t { solve_lower_t } else { solve_lower };
    let mut x = vec![0.0; b.len()];
    solve(l, b, &mut x);
    let mut dlow = dl.to_vec();
    zero_upper(&mut dlow, n);
    let mut rhs = db.to_vec();
    if n > 0 && m > 0 {
        let lhs = if t {
            view(&dlow, n, n).transpose()
        } else {
            view(&dlow, n, n)
        };
        matmul::matmul(
            view_mut(&mut rhs, n, m),
            Accum::Add,
            lhs,
            view(&x, n, m),
            -1.0,
            Par::Seq,
        );
    }
    solve(l, &rhs, out);
}

/// The tangent of `solve(A, B)`: `A⁻¹ (dB - dA X)`.
pub fn solve_jvp(args: &[&[f64]], out: &mut [f64]) {
    let (a, b, da, db) = (args[0], args[1], args[2], args[3]);
    let Some((n, m)) =
        dims(a.len(), b.len()).filter(|_| out.len() == b.len() && da.len() == a.len())
    else {
        out.fill(f64::NAN);
        return;
    };
    let mut x = vec![0.0; b.len()];
    solve(a, b, &mut x);
    let mut rhs = db.to_vec();
    if n > 0 && m > 0 {
        matmul::matmul(
            view_mut(&mut rhs, n, m),
            Accum::Add,
            view(da, n, n),
            view(&x, n, m),
            -1.0,
            Par::Seq,
        );
    }
    solve(a, &rhs, out);
}

/// The tangent of `inv(A)`: `-X dA X`.
pub fn inv_jvp(args: &[&[f64]], out: &mut [f64]) {
    inv_sandwich(args, out, false);
}

/// The tangent of `slogdet(A)`: `[0, tr(A⁻¹ dA)]`.
pub fn slogdet_jvp(args: &[&[f64]], out: &mut [f64]) {
    let (a, da) = (args[0], args[1]);
    let Some(n) = side(a.len()).filter(|_| da.len() == a.len() && out.len() == 2) else {
        out.fill(f64::NAN);
        return;
    };
    let mut x = vec![0.0; a.len()];
    inv(a, &mut x);
    let mut tr = 0.0;
    for i in 0..n {
        for k in 0..n {
            tr += x[i * n + k] * da[k * n + i];
        }
    }
    out[0] = 0.0;
    out[1] = tr;
}

/// The tangent of `eigh(A)`, packed as its value: with `M = Vᵀ dS V`,
/// `dw = diag(M)` and `dV = V (F ∘ M)` (`F` as in [`eigh_vjp`]).
pub fn eigh_jvp(args: &[&[f64]], out: &mut [f64]) {
    let (a, da) = (args[0], args[1]);
    let Some(n) = side(a.len()).filter(|&n| da.len() == a.len() && out.len() == (n + 1) * n) else {
        out.fill(f64::NAN);
        return;
    };
    if n == 0 {
        return;
    }
    let mut packed = vec![0.0; (n + 1) * n];
    eigh(a, &mut packed);
    let (w, v) = packed.split_at(n);
    let ds = symmetric(da, n);
    let mut t = vec![0.0; a.len()];
    product(&mut t, (v, true), (&ds, false), (n, n, n), 1.0);
    let mut m = vec![0.0; a.len()];
    product(&mut m, (&t, false), (v, false), (n, n, n), 1.0);
    let (dw, dv) = out.split_at_mut(n);
    for (i, d) in dw.iter_mut().enumerate() {
        *d = m[i * n + i];
    }
    by_gaps(&mut m, w, &vec![0.0; n]);
    product(dv, (v, false), (&m, false), (n, n, n), 1.0);
}

/// `F ∘ M` with `diag` on the diagonal, in place (`n x n`, `n` the
/// eigenvalues `w`): `F[i][j] = 1/(w_j - w_i)` off the diagonal, the
/// eigenvector part of both `eigh` rules.
fn by_gaps(m: &mut [f64], w: &[f64], diag: &[f64]) {
    let n = w.len();
    for i in 0..n {
        for j in 0..n {
            m[i * n + j] = if i == j {
                diag[i]
            } else {
                m[i * n + j] / (w[j] - w[i])
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spd(n: usize) -> Vec<f64> {
        // B Bᵀ + n I for a fixed B.
        let b: Vec<f64> = (0..n * n)
            .map(|k| ((k * 7 % 11) as f64 - 5.0) / 7.0)
            .collect();
        let mut a = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                let s: f64 = (0..n).map(|k| b[i * n + k] * b[j * n + k]).sum();
                a[i * n + j] = s + if i == j { n as f64 } else { 0.0 };
            }
        }
        a
    }

    #[test]
    fn the_factor_times_its_transpose_is_the_matrix() {
        for n in [0, 1, 2, 5, 17] {
            let a = spd(n);
            let mut l = vec![0.0; n * n];
            cholesky(&a, &mut l);
            for i in 0..n {
                for j in 0..n {
                    let s: f64 = (0..n).map(|k| l[i * n + k] * l[j * n + k]).sum();
                    assert!((s - a[i * n + j]).abs() < 1e-12 * (1.0 + a[i * n + j].abs()));
                    if j > i {
                        assert_eq!(l[i * n + j], 0.0);
                    }
                }
            }
        }
        let mut l = vec![0.0; 4];
        cholesky(&[1.0, 2.0, 2.0, 1.0], &mut l);
        assert!(l.iter().all(|x| x.is_nan()), "not positive definite: {l:?}");
    }

    #[test]
    fn solves_invert_the_products() {
        let n = 6;
        let mut l = vec![0.0; n * n];
        cholesky(&spd(n), &mut l);
        let b: Vec<f64> = (0..n * 3).map(|k| (k as f64).sin()).collect();
        let mut x = vec![0.0; b.len()];
        solve_lower(&l, &b, &mut x);
        let mut y = vec![0.0; b.len()];
        solve_lower_t(&l, &b, &mut y);
        for i in 0..n {
            for c in 0..3 {
                let lx: f64 = (0..n).map(|k| l[i * n + k] * x[k * 3 + c]).sum();
                let lty: f64 = (0..n).map(|k| l[k * n + i] * y[k * 3 + c]).sum();
                assert!((lx - b[i * 3 + c]).abs() < 1e-12);
                assert!((lty - b[i * 3 + c]).abs() < 1e-12);
            }
        }
    }
}
