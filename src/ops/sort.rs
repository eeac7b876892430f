//! Sorting and scans along the last axis: the builtin kernels behind
//! `sort`, `argsort`, `top_k`, `cumsum` and `cumprod`
//! (`lang::check::composite` calls them), with their derivatives.
//!
//! Each takes the array, flat, and a one-element array holding its last
//! axis's length `n` (a kernel sees no shapes): the array is rows of `n`,
//! each row sorted or scanned on its own. A length that does not divide
//! the array gives NaN, as the linear-algebra kernels do.
//!
//! `sort` is stable and ascending, with NaN last (as NumPy's); its
//! derivative moves each cotangent back to the element it came from (and
//! a tangent the other way). `cumsum`'s cotangent is the reversed scan of
//! the reversed cotangent; `cumprod`'s is computed without dividing, so a
//! zero element gives the right derivative.

use std::cmp::Ordering;

/// The rows of `n` elements of a flat array of `len` elements, if `args[1]`
/// holds such an `n`.
fn rows(args: &[&[f64]], len: usize, out: &mut [f64]) -> Option<usize> {
    let n = *args.get(1)?.first()?;
    let ok = n >= 1.0 && n.fract() == 0.0 && (n as usize) > 0 && len.is_multiple_of(n as usize);
    if !ok || out.len() != len {
        out.fill(f64::NAN);
        return None;
    }
    Some(n as usize)
}

/// The rows' length and the two arrays of a derivative's arguments `(x,
/// n, y)` (`y` a cotangent or a tangent, `x`'s length), if they fit.
fn paired<'a>(args: &[&'a [f64]], out: &mut [f64]) -> Option<(usize, &'a [f64], &'a [f64])> {
    let (x, y) = (args[0], *args.get(2)?);
    match rows(args, x.len(), out).filter(|_| y.len() == x.len()) {
        Some(n) => Some((n, x, y)),
        None => {
            out.fill(f64::NAN);
            None
        }
    }
}

/// Ascending, NaN last (of any sign), equal elements in their order.
fn order(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
        (a, b) => a.cmp(&b),
    }
}

/// The permutation that sorts `row`: `row[perm[i]]` ascending.
fn permutation(row: &[f64], perm: &mut Vec<usize>) {
    perm.clear();
    perm.extend(0..row.len());
    perm.sort_by(|&i, &j| order(row[i], row[j]));
}

/// For each row of `x` (rows of `n`), `f(perm, row, out_row)`.
fn each_permuted(
    x: &[f64],
    n: usize,
    out: &mut [f64],
    mut f: impl FnMut(&[usize], usize, &mut [f64]),
) {
    let mut perm = Vec::with_capacity(n);
    for (r, o) in out.chunks_mut(n).enumerate() {
        permutation(&x[r * n..(r + 1) * n], &mut perm);
        f(&perm, r * n, o);
    }
}

/// Each row of `src` in the order that sorts the same row of `x`.
fn in_sorted_order(x: &[f64], src: &[f64], n: usize, out: &mut [f64]) {
    each_permuted(x, n, out, |perm, at, o| {
        for (k, &p) in perm.iter().enumerate() {
            o[k] = src[at + p];
        }
    });
}

/// `sort(x)`: each row ascending.
pub fn sort(args: &[&[f64]], out: &mut [f64]) {
    let x = args[0];
    if let Some(n) = rows(args, x.len(), out) {
        in_sorted_order(x, x, n, out);
    }
}

/// `argsort(x)`: each row's sorting permutation, as numbers.
pub fn argsort(args: &[&[f64]], out: &mut [f64]) {
    let x = args[0];
    let Some(n) = rows(args, x.len(), out) else {
        return;
    };
    each_permuted(x, n, out, |perm, _, o| {
        for (k, &p) in perm.iter().enumerate() {
            o[k] = p as f64;
        }
    });
}

/// `sort`'s cotangent `(x, n, ḡ)`: `ḡ[k]` back to the element sorted to `k`.
pub fn sort_vjp(args: &[&[f64]], out: &mut [f64]) {
    let Some((n, x, g)) = paired(args, out) else {
        return;
    };
    each_permuted(x, n, out, |perm, at, o| {
        for (k, &p) in perm.iter().enumerate() {
            o[p] = g[at + k];
        }
    });
}

/// `sort`'s tangent `(x, n, ẋ, ṅ)`: `ẋ` sorted as `x` is.
pub fn sort_jvp(args: &[&[f64]], out: &mut [f64]) {
    if let Some((n, x, t)) = paired(args, out) {
        in_sorted_order(x, t, n, out);
    }
}

/// `cumsum(x)`: each row's running sums.
pub fn cumsum(args: &[&[f64]], out: &mut [f64]) {
    let x = args[0];
    let Some(n) = rows(args, x.len(), out) else {
        return;
    };
    for (xr, o) in x.chunks(n).zip(out.chunks_mut(n)) {
        let mut s = 0.0;
        for (v, o) in xr.iter().zip(o) {
            s += v;
            *o = s;
        }
    }
}

/// `cumsum`'s cotangent `(x, n, ḡ)`: the running sums of each row of `ḡ`
/// from its end.
pub fn cumsum_vjp(args: &[&[f64]], out: &mut [f64]) {
    let Some((n, _, g)) = paired(args, out) else {
        return;
    };
    for (gr, o) in g.chunks(n).zip(out.chunks_mut(n)) {
        let mut s = 0.0;
        for (v, o) in gr.iter().zip(o.iter_mut()).rev() {
            s += v;
            *o = s;
        }
    }
}

/// `cumsum`'s tangent `(x, n, ẋ, ṅ)`: the running sums of `ẋ`.
pub fn cumsum_jvp(args: &[&[f64]], out: &mut [f64]) {
    cumsum(&[args[2], args[1]], out);
}

/// `cumprod(x)`: each row's running products.
pub fn cumprod(args: &[&[f64]], out: &mut [f64]) {
    let x = args[0];
    let Some(n) = rows(args, x.len(), out) else {
        return;
    };
    for (xr, o) in x.chunks(n).zip(out.chunks_mut(n)) {
        let mut p = 1.0;
        for (v, o) in xr.iter().zip(o) {
            p *= v;
            *o = p;
        }
    }
}

/// `cumprod`'s cotangent `(x, n, ḡ)`: `x̄ᵢ = Pᵢ₋₁ Sᵢ`, the product of
/// the elements before `i` times `Sᵢ = ḡᵢ + xᵢ₊₁ Sᵢ₊₁` (the cotangents of
/// the products from `i` on, each times the elements after `i` it
/// includes): no division, so a zero element is no special case.
pub fn cumprod_vjp(args: &[&[f64]], out: &mut [f64]) {
    let Some((n, x, g)) = paired(args, out) else {
        return;
    };
    for ((xr, gr), o) in x.chunks(n).zip(g.chunks(n)).zip(out.chunks_mut(n)) {
        let mut s = 0.0;
        for i in (0..n).rev() {
            s = gr[i] + if i + 1 < n { xr[i + 1] * s } else { 0.0 };
            o[i] = s;
        }
        let mut before = 1.0;
        for i in 0..n {
            o[i] *= before;
            before *= xr[i];
        }
    }
}

/// `cumprod`'s tangent `(x, n, ẋ, ṅ)`: `Ḋⱼ = Ḋⱼ₋₁ xⱼ + Pⱼ₋₁ ẋⱼ`.
pub fn cumprod_jvp(args: &[&[f64]], out: &mut [f64]) {
    let Some((n, x, t)) = paired(args, out) else {
        return;
    };
    for ((xr, tr), o) in x.chunks(n).zip(t.chunks(n)).zip(out.chunks_mut(n)) {
        let (mut d, mut p) = (0.0, 1.0);
        for i in 0..n {
            d = d * xr[i] + p * tr[i];
            p *= xr[i];
            o[i] = d;
        }
    }
}

/// A cotangent of the length argument, or of `argsort`'s array (its
/// result is piecewise constant): zero.
pub fn zero(_: &[&[f64]], out: &mut [f64]) {
    out.fill(0.0);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(f: fn(&[&[f64]], &mut [f64]), args: &[&[f64]], len: usize) -> Vec<f64> {
        let mut out = vec![0.0; len];
        f(args, &mut out);
        out
    }

    #[test]
    fn rows_sort_stably_with_nan_last() {
        let x = [3.0, f64::NAN, -1.0, 3.0, 0.0, -0.0, 2.0, 1.0];
        let sorted = run(sort, &[&x, &[4.0]], 8);
        assert_eq!(sorted[..3], [-1.0, 3.0, 3.0]);
        assert!(sorted[3].is_nan());
        // 0 and -0 are equal: their order is kept.
        assert_eq!(
            sorted[4..].iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            [
                0.0f64.to_bits(),
                (-0.0f64).to_bits(),
                1.0f64.to_bits(),
                2.0f64.to_bits()
            ]
        );
        assert_eq!(
            run(argsort, &[&x, &[4.0]], 8),
            [2.0, 0.0, 3.0, 1.0, 0.0, 1.0, 3.0, 2.0]
        );
        // A length that does not divide the array.
        assert!(run(sort, &[&x, &[3.0]], 8).iter().all(|v| v.is_nan()));
    }

    #[test]
    fn derivatives_match_differences() {
        let x = [0.5, -2.0, 0.0, 1.5, 3.0, 0.25];
        let n: &[f64] = &[3.0];
        let g = [1.0, -0.5, 2.0, 0.25, -1.0, 0.75];
        for (f, vjp, jvp) in [
            (
                sort as fn(&[&[f64]], &mut [f64]),
                sort_vjp as fn(&[&[f64]], &mut [f64]),
                sort_jvp as fn(&[&[f64]], &mut [f64]),
            ),
            (cumsum, cumsum_vjp, cumsum_jvp),
            (cumprod, cumprod_vjp, cumprod_jvp),
        ] {
            let xbar = run(vjp, &[&x, n, &g], 6);
            for i in 0..6 {
                let h = 1e-6;
                let (mut p, mut m) = (x, x);
                p[i] += h;
                m[i] -= h;
                let (fp, fm) = (run(f, &[&p, n], 6), run(f, &[&m, n], 6));
                let fd: f64 = (0..6).map(|k| g[k] * (fp[k] - fm[k]) / (2.0 * h)).sum();
                assert!((xbar[i] - fd).abs() < 1e-8, "{i}: {} vs {fd}", xbar[i]);
                // The tangent along e_i is the column of the same Jacobian.
                let mut e = [0.0; 6];
                e[i] = 1.0;
                let t = run(jvp, &[&x, n, &e, &[0.0]], 6);
                for k in 0..6 {
                    let d = (fp[k] - fm[k]) / (2.0 * h);
                    assert!((t[k] - d).abs() < 1e-8, "{i}, {k}: {} vs {d}", t[k]);
                }
            }
        }
    }
}
