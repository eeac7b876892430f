//! Dense linear algebra on row-major `f64` matrices: the Cholesky factor,
//! triangular solves, and their reverse-mode rules. The builtin kernels
//! `cholesky`, `solve_lower` and `solve_lower_t` ([`crate::ops::kernels`])
//! call these functions from native code and from the interpreter alike,
//! so both give the same bits.
//!
//! Every loop runs in a fixed order (a sum over `k` left to right), so a
//! result does not depend on the machine or the thread. A matrix's size
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

/// The lower Cholesky factor of `(A + Aᵀ)/2` into `out` (`n x n`, the
/// upper triangle zero); all NaN if it is not positive definite.
pub fn cholesky(a: &[f64], out: &mut [f64]) {
    let Some(n) = side(a.len()).filter(|_| out.len() == a.len()) else {
        out.fill(f64::NAN);
        return;
    };
    out.fill(0.0);
    for j in 0..n {
        for i in j..n {
            let sym = if i == j {
                a[i * n + j]
            } else {
                0.5 * (a[i * n + j] + a[j * n + i])
            };
            let (ri, rj) = (&out[i * n..i * n + j], &out[j * n..j * n + j]);
            let mut s = sym;
            for (x, y) in ri.iter().zip(rj) {
                s -= x * y;
            }
            if i == j {
                // Not `s <= 0.0` alone: a NaN pivot fails too.
                if s.is_nan() || s <= 0.0 {
                    out.fill(f64::NAN);
                    return;
                }
                out[j * n + j] = s.sqrt();
            } else {
                out[i * n + j] = s / out[j * n + j];
            }
        }
    }
}

/// `X = L⁻¹ B` into `out` (`n x m`), reading `L`'s lower triangle.
pub fn solve_lower(l: &[f64], b: &[f64], out: &mut [f64]) {
    let Some((n, m)) = dims(l.len(), b.len()).filter(|_| out.len() == b.len()) else {
        out.fill(f64::NAN);
        return;
    };
    out.copy_from_slice(b);
    for i in 0..n {
        let (done, rest) = out.split_at_mut(i * m);
        let row = &mut rest[..m];
        for k in 0..i {
            let c = l[i * n + k];
            for (x, y) in row.iter_mut().zip(&done[k * m..k * m + m]) {
                *x -= c * y;
            }
        }
        let d = l[i * n + i];
        row.iter_mut().for_each(|x| *x /= d);
    }
}

/// `X = L⁻ᵀ B` into `out` (`n x m`), reading `L`'s lower triangle.
pub fn solve_lower_t(l: &[f64], b: &[f64], out: &mut [f64]) {
    let Some((n, m)) = dims(l.len(), b.len()).filter(|_| out.len() == b.len()) else {
        out.fill(f64::NAN);
        return;
    };
    out.copy_from_slice(b);
    for i in (0..n).rev() {
        let (head, done) = out.split_at_mut((i + 1) * m);
        let row = &mut head[i * m..];
        for k in i + 1..n {
            let c = l[k * n + i];
            let xk = &done[(k - i - 1) * m..(k - i) * m];
            for (x, y) in row.iter_mut().zip(xk) {
                *x -= c * y;
            }
        }
        let d = l[i * n + i];
        row.iter_mut().for_each(|x| *x /= d);
    }
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
    // P = Φ(Lᵀ L̄): (Lᵀ L̄)[i][j] = Σ_k L[k][i] L̄[k][j], lower triangle,
    // diagonal halved.
    let mut p = vec![0.0; a.len()];
    for i in 0..n {
        for j in 0..=i {
            let mut s = 0.0;
            for k in i..n {
                s += l[k * n + i] * lbar[k * n + j];
            }
            p[i * n + j] = if i == j { 0.5 * s } else { s };
        }
    }
    // S = L⁻ᵀ P L⁻¹: T = L⁻ᵀ P, then S = (L⁻ᵀ Tᵀ)ᵀ.
    let mut t = vec![0.0; a.len()];
    solve_lower_t(&l, &p, &mut t);
    let tt = transpose(&t, n, n);
    let mut st = vec![0.0; a.len()];
    solve_lower_t(&l, &tt, &mut st);
    // st is Sᵀ; Ā = (S + Sᵀ)/2.
    for i in 0..n {
        for j in 0..n {
            out[i * n + j] = 0.5 * (st[j * n + i] + st[i * n + j]);
        }
    }
}

/// `-tril(U Vᵀ)` of two `n x m` matrices into `out` (`n x n`).
fn neg_tril_outer(u: &[f64], v: &[f64], n: usize, m: usize, out: &mut [f64]) {
    out.fill(0.0);
    for i in 0..n {
        for j in 0..=i {
            let mut s = 0.0;
            for (x, y) in u[i * m..i * m + m].iter().zip(&v[j * m..j * m + m]) {
                s += x * y;
            }
            out[i * n + j] = -s;
        }
    }
}

/// The cotangent of `L` in `solve_lower(L, B)`: `args` are `L`, `B`, `X̄`.
pub fn solve_lower_vjp_l(args: &[&[f64]], out: &mut [f64]) {
    let (l, b, g) = (args[0], args[1], args[2]);
    let Some((n, m)) = dims(l.len(), b.len()).filter(|_| g.len() == b.len()) else {
        out.fill(f64::NAN);
        return;
    };
    let mut x = vec![0.0; b.len()];
    solve_lower(l, b, &mut x);
    let mut bbar = vec![0.0; b.len()];
    solve_lower_t(l, g, &mut bbar);
    neg_tril_outer(&bbar, &x, n, m, out);
}

/// The cotangent of `B` in `solve_lower(L, B)`: `L⁻ᵀ X̄`.
pub fn solve_lower_vjp_b(args: &[&[f64]], out: &mut [f64]) {
    solve_lower_t(args[0], args[2], out);
}

/// The cotangent of `L` in `solve_lower_t(L, B)`: `args` are `L`, `B`,
/// `X̄`.
pub fn solve_lower_t_vjp_l(args: &[&[f64]], out: &mut [f64]) {
    let (l, b, g) = (args[0], args[1], args[2]);
    let Some((n, m)) = dims(l.len(), b.len()).filter(|_| g.len() == b.len()) else {
        out.fill(f64::NAN);
        return;
    };
    let mut x = vec![0.0; b.len()];
    solve_lower_t(l, b, &mut x);
    let mut bbar = vec![0.0; b.len()];
    solve_lower(l, g, &mut bbar);
    neg_tril_outer(&x, &bbar, n, m, out);
}

/// The cotangent of `B` in `solve_lower_t(L, B)`: `L⁻¹ X̄`.
pub fn solve_lower_t_vjp_b(args: &[&[f64]], out: &mut [f64]) {
    solve_lower(args[0], args[2], out);
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
