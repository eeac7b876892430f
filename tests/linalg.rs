//! The builtin linear-algebra kernels (`src/linalg.rs`: `cholesky`, the
//! solves, `inv`, `slogdet`, `eigh`): values against their definitions,
//! native code equal to the interpreter bit for bit, reverse and forward
//! mode against central differences (each kernel's rules, and a Gaussian
//! process's negative log-likelihood through them), optimized at λ = 0
//! and 1e6, and the errors of wrong shapes and of what is not supported
//! yet.

mod common;

use common::{arr, check_gradient, check_jvp, err, eval, prog, run_both};
use egrad::internals::types::DType;
use egrad::Value;

const SRC: &str = r#"
fn chol[N](A: f64[N, N]) -> f64[N, N] = cholesky(A)
fn lower[N, M](L: f64[N, N], B: f64[N, M]) -> f64[N, M] = solve_lower(L, B)
fn lower_t[N](L: f64[N, N], b: f64[N]) -> f64[N] = solve_lower_t(L, b)
fn chol_w[N](A: f64[N, N], W: f64[N, N]) -> f64 = +/flatten(cholesky(A) * W)
@grad(A)
fn dchol_w[N](A: f64[N, N], W: f64[N, N]) -> f64[N, N] = chol_w(A, W)
fn solves[N, M](L: f64[N, N], B: f64[N, M], W: f64[N, M]) -> f64 =
  +/flatten(solve_lower(L, B) * W) + +/flatten(tanh(solve_lower_t(L, B)))
@grad(L, B)
fn dsolves[N, M](L: f64[N, N], B: f64[N, M], W: f64[N, M]) -> (f64[N, N], f64[N, M]) = solves(L, B, W)

fn gen_solve[N, M](A: f64[N, N], B: f64[N, M]) -> f64[N, M] = solve(A, B)
fn inverse[N](A: f64[N, N]) -> f64[N, N] = inv(A)
fn sld[N](A: f64[N, N]) -> (f64, f64) = slogdet(A)
fn general[N, M](A: f64[N, N], B: f64[N, M], W: f64[N, N]) -> f64 =
  +/flatten(solve(A, B) * B) + +/flatten(inv(A) * W) + logdet(A)
@grad(A, B)
fn dgeneral[N, M](A: f64[N, N], B: f64[N, M], W: f64[N, N]) -> (f64[N, N], f64[N, M]) = general(A, B, W)
fn spd_logdet[N](A: f64[N, N]) -> (f64, f64) {
  let L = cholesky(A)
  (logdet(A), 2.0 * +/log(tabulate[N](i => L[i, i])))
}

fn eig[N](A: f64[N, N]) -> (f64[N], f64[N, N]) = eigh(A)
// Invariant to each eigenvector's sign.
fn spectral[N](A: f64[N, N], c: f64[N]) -> f64 {
  let (w, V) = eigh(A)
  let p = tabulate[N](j => +/(transpose(V)[j] .* c))
  +/(w .* w) + +/(tanh(w) .* p .* p)
}
@grad(A)
fn dspectral[N](A: f64[N, N], c: f64[N]) -> f64[N, N] = spectral(A, c)

@jvp(A)
fn chol_along[N](A: f64[N, N], W: f64[N, N], dA: f64[N, N]) -> f64 = chol_w(A, W)
@jvp(L, B)
fn solves_along[N, M](L: f64[N, N], B: f64[N, M], W: f64[N, M], dL: f64[N, N], dB: f64[N, M]) -> f64 =
  solves(L, B, W)
@jvp(A, B)
fn general_along[N, M](A: f64[N, N], B: f64[N, M], W: f64[N, N], dA: f64[N, N], dB: f64[N, M]) -> f64 =
  general(A, B, W)
@jvp(A)
fn spectral_along[N](A: f64[N, N], c: f64[N], dA: f64[N, N]) -> f64 = spectral(A, c)

// A Gaussian process's negative log-likelihood (RBF kernel plus noise).
fn nll[N](x: f64[N], y: f64[N], ls: f64, sf: f64, noise: f64) -> f64 {
  let d = tabulate[N](i => x[i] - x)
  let K = sf * sf * exp(-0.5 * (d * d) / (ls * ls)) + tabulate[N](i => tabulate[N](j => noise * f64(i == j)))
  let L = cholesky(K)
  let a = solve_lower(L, y)
  0.5 * +/(a .* a) + +/log(tabulate[N](i => L[i, i])) + 0.5 * f64(N) * log(2.0 * 3.141592653589793)
}
@grad(x, y, ls, sf, noise)
fn dnll[N](x: f64[N], y: f64[N], ls: f64, sf: f64, noise: f64) -> (f64[N], f64[N], f64, f64, f64) =
  nll(x, y, ls, sf, noise)
"#;

/// `B Bᵀ + n I`: symmetric positive definite.
fn spd(n: usize, seed: u64) -> Value {
    let b = arr(&[n, n], seed);
    let mut a = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            let s: f64 = (0..n).map(|k| b.data[i * n + k] * b.data[j * n + k]).sum();
            a[i * n + j] = s + if i == j { n as f64 } else { 0.0 };
        }
    }
    Value::array(DType::F64, vec![n, n], a)
}

fn num(x: f64) -> Value {
    Value::scalar(DType::F64, x)
}

#[test]
fn values_fit_their_definitions_and_native_code_gives_the_interpreters_bits() {
    let p = prog(SRC);
    for (s, &n) in [0usize, 1, 2, 3, 5, 17].iter().enumerate() {
        let a = spd(n, s as u64);
        let l = run_both(&p, "chol", std::slice::from_ref(&a))
            .unwrap()
            .remove(0);
        for i in 0..n {
            for j in 0..n {
                let llt: f64 = (0..n).map(|k| l.data[i * n + k] * l.data[j * n + k]).sum();
                let want = a.data[i * n + j];
                assert!(
                    (llt - want).abs() <= 1e-12 * (1.0 + want.abs()),
                    "n = {n}: L Lᵀ"
                );
                if j > i {
                    assert_eq!(l.data[i * n + j], 0.0, "n = {n}: the upper triangle");
                }
            }
        }
        let b = arr(&[n, 3], s as u64 + 10);
        let x = run_both(&p, "lower", &[l.clone(), b.clone()])
            .unwrap()
            .remove(0);
        for i in 0..n {
            for c in 0..3 {
                let lx: f64 = (0..n).map(|k| l.data[i * n + k] * x.data[k * 3 + c]).sum();
                assert!((lx - b.data[i * 3 + c]).abs() <= 1e-12, "n = {n}: L X = B");
            }
        }
        let v = arr(&[n], s as u64 + 20);
        let y = run_both(&p, "lower_t", &[l.clone(), v.clone()])
            .unwrap()
            .remove(0);
        for i in 0..n {
            let lty: f64 = (0..n).map(|k| l.data[k * n + i] * y.data[k]).sum();
            assert!((lty - v.data[i]).abs() <= 1e-12, "n = {n}: Lᵀ y = v");
        }
        let w = arr(&[n, n], s as u64 + 30);
        run_both(&p, "dchol_w", &[a.clone(), w]).unwrap();
        let w3 = arr(&[n, 3], s as u64 + 40);
        run_both(&p, "dsolves", &[l, b, w3]).unwrap();
        // (An empty `tabulate` reading `L[i, i]` is an error at N = 0, in
        // both alike.)
        let (xs, ys) = (arr(&[n], s as u64 + 50), arr(&[n], s as u64 + 60));
        let r = run_both(&p, "dnll", &[xs, ys, num(0.7), num(1.3), num(0.2)]);
        assert_eq!(r.is_ok(), n > 0, "{r:?}");
    }
    // Not positive definite: NaN, in both.
    let bad = Value::array(DType::F64, vec![2, 2], vec![1.0, 2.0, 2.0, 1.0]);
    let l = run_both(&p, "chol", &[bad]).unwrap().remove(0);
    assert!(l.data.iter().all(|x| x.is_nan()), "{l:?}");
}

#[test]
fn gradients_match_finite_differences_optimized_or_not() {
    let p = prog(SRC);
    // A non-symmetric A: cholesky factors its symmetric part, so every
    // element has a derivative (half of the symmetric one's).
    let mut a = spd(4, 1);
    a.data[1] += 0.3;
    a.data[8] -= 0.2;
    let w = arr(&[4, 4], 2);
    check_gradient(
        &p,
        "dchol_w",
        "chol_w",
        1,
        &[a.clone(), w.clone()],
        "cholesky",
    );
    let mut l = eval(p.ir("chol").unwrap(), &[a])[0].clone();
    // The upper triangle is not read: its gradient is zero.
    l.data[1] = 5.0;
    let b = arr(&[4, 3], 3);
    let w3 = arr(&[4, 3], 4);
    check_gradient(&p, "dsolves", "solves", 2, &[l, b, w3], "triangular solves");
    let x = Value::array(DType::F64, vec![6], vec![0.0, 0.5, 1.2, 2.0, 3.1, 3.3]);
    let y = arr(&[6], 5);
    let args = [x, y, num(0.9), num(1.3), num(0.1)];
    check_gradient(&p, "dnll", "nll", 5, &args, "GP negative log-likelihood");
}

/// The same likelihood computed by hand in Rust (the textbook formulas),
/// as a check of the value that does not go through egrad's kernels.
#[test]
fn the_likelihood_is_the_textbook_one() {
    let p = prog(SRC);
    let x = [0.0, 0.5, 1.2, 2.0, 3.1];
    let y = [0.1, -0.3, 0.7, 0.2, -0.5];
    let (ls, sf, noise) = (0.9f64, 1.3f64, 0.1f64);
    let n = x.len();
    let mut k = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            let d = x[i] - x[j];
            k[i * n + j] =
                sf * sf * (-0.5 * d * d / (ls * ls)).exp() + if i == j { noise } else { 0.0 };
        }
    }
    // Cholesky and forward substitution, written out.
    let mut l = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let s: f64 = k[i * n + j] - (0..j).map(|m| l[i * n + m] * l[j * n + m]).sum::<f64>();
            l[i * n + j] = if i == j { s.sqrt() } else { s / l[j * n + j] };
        }
    }
    let mut a = [0.0; 5];
    for i in 0..n {
        a[i] = (y[i] - (0..i).map(|m| l[i * n + m] * a[m]).sum::<f64>()) / l[i * n + i];
    }
    let want = 0.5 * a.iter().map(|v| v * v).sum::<f64>()
        + (0..n).map(|i| l[i * n + i].ln()).sum::<f64>()
        + 0.5 * n as f64 * (2.0 * std::f64::consts::PI).ln();
    let vec = |v: &[f64]| Value::array(DType::F64, vec![v.len()], v.to_vec());
    let got = eval(
        p.ir("nll").unwrap(),
        &[vec(&x), vec(&y), num(ls), num(sf), num(noise)],
    );
    let got = got[0].as_scalar();
    assert!((got - want).abs() <= 1e-12 * want.abs(), "{got} vs {want}");
}

#[test]
fn wrong_shapes_and_unsupported_modes_are_errors() {
    let e = err("fn f(A: f64[2, 3]) -> f64[2, 3] = cholesky(A)");
    assert!(e.contains("square matrix"), "{e}");
    let e = err("fn f[N](L: f64[N, N], b: f64[3]) -> f64[3] = solve_lower(L, b)");
    assert!(e.contains("right-hand side"), "{e}");
    let e = err("fn f(A: f32[2, 2], b: f64[2]) -> f64[2] = solve(A, b)");
    assert!(e.contains("f64"), "{e}");
    // A second derivative through them (their rules have none).
    let e = err(&format!(
        "{SRC}\nfn g[N](A: f64[N, N], W: f64[N, N]) -> f64 = +/flatten(dchol_w(A, W))\n@grad(A)\nfn second[N](A: f64[N, N], W: f64[N, N]) -> f64[N, N] = g(A, W)"
    ));
    assert!(e.contains("native kernel that has no VJP"), "{e}");
    // Object files call them in egrad's runtime library (tests/aot.rs
    // links one and runs it).
    let p = prog(SRC);
    for f in ["chol", "dgeneral"] {
        let opts = egrad::BuildOptions {
            function: f.into(),
            ..Default::default()
        };
        let built = egrad::build(&p, &opts).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(
            built
                .runtime_calls
                .contains(&"egrad_kernel_call".to_string()),
            "{f}: {:?}",
            built.runtime_calls
        );
    }
}

/// A well-conditioned general matrix: `n I` plus a fixed pattern, not
/// symmetric.
fn general_matrix(n: usize, seed: u64) -> Value {
    let mut a = arr(&[n, n], seed);
    for i in 0..n {
        a.data[i * n + i] += n as f64 + 1.0;
    }
    a
}

#[test]
fn general_solves_inverses_and_determinants_fit_their_definitions() {
    let p = prog(SRC);
    for (s, &n) in [0usize, 1, 2, 3, 5, 17].iter().enumerate() {
        let a = general_matrix(n, s as u64);
        let b = arr(&[n, 2], s as u64 + 10);
        let x = run_both(&p, "gen_solve", &[a.clone(), b.clone()])
            .unwrap()
            .remove(0);
        let xi = run_both(&p, "inverse", std::slice::from_ref(&a))
            .unwrap()
            .remove(0);
        for i in 0..n {
            for c in 0..2 {
                let ax: f64 = (0..n).map(|k| a.data[i * n + k] * x.data[k * 2 + c]).sum();
                assert!((ax - b.data[i * 2 + c]).abs() <= 1e-12, "n = {n}: A X = B");
            }
            for j in 0..n {
                let aai: f64 = (0..n).map(|k| a.data[i * n + k] * xi.data[k * n + j]).sum();
                let id = if i == j { 1.0 } else { 0.0 };
                assert!((aai - id).abs() <= 1e-12, "n = {n}: A A⁻¹ = I");
            }
        }
        // The log-determinant of an SPD matrix, from LU and from Cholesky
        // (at N = 0 the diagonal's `tabulate` is an error, in both alike).
        let both = run_both(&p, "spd_logdet", &[spd(n, s as u64)]);
        if let (Ok(both), true) = (&both, n > 0) {
            let (lu, chol) = (both[0].as_scalar(), both[1].as_scalar());
            assert!(
                (lu - chol).abs() <= 1e-12 * (1.0 + chol.abs()),
                "n = {n}: {lu} vs {chol}"
            );
        } else {
            assert_eq!(n, 0, "{both:?}");
        }
        let w = arr(&[n, n], s as u64 + 20);
        run_both(&p, "dgeneral", &[a, b, w]).unwrap();
    }
    let m = |d: &[f64]| Value::array(DType::F64, vec![2, 2], d.to_vec());
    // A swap: sign -1, |det| 1; singular: sign 0, -inf.
    let sd = run_both(&p, "sld", &[m(&[0.0, 1.0, 1.0, 0.0])]).unwrap();
    assert_eq!((sd[0].as_scalar(), sd[1].as_scalar()), (-1.0, 0.0));
    let sd = run_both(&p, "sld", &[m(&[1.0, 2.0, 2.0, 4.0])]).unwrap();
    assert_eq!(
        (sd[0].as_scalar(), sd[1].as_scalar()),
        (0.0, f64::NEG_INFINITY)
    );
    let sd = run_both(&p, "sld", &[m(&[-2.0, 0.0, 0.0, 3.0])]).unwrap();
    assert_eq!(sd[0].as_scalar(), -1.0);
    assert!((sd[1].as_scalar() - 6f64.ln()).abs() <= 1e-15);
}

#[test]
fn general_gradients_match_finite_differences_optimized_or_not() {
    let p = prog(SRC);
    let args = [general_matrix(4, 7), arr(&[4, 2], 8), arr(&[4, 4], 9)];
    check_gradient(&p, "dgeneral", "general", 2, &args, "solve, inv and logdet");
}

#[test]
fn eigenpairs_fit_their_definitions_and_their_gradient_matches_finite_differences() {
    let p = prog(SRC);
    for (s, &n) in [0usize, 1, 2, 3, 5, 17].iter().enumerate() {
        // A symmetric matrix with well-separated eigenvalues, and its
        // non-symmetric version (eigh reads the symmetric part).
        let mut a = spd(n, s as u64);
        for i in 0..n {
            a.data[i * n + i] += 3.0 * i as f64;
        }
        let mut skew = a.clone();
        if n > 1 {
            skew.data[1] += 0.25;
            skew.data[n] -= 0.25;
        }
        let got = run_both(&p, "eig", std::slice::from_ref(&skew)).unwrap();
        let (w, v) = (&got[0].data, &got[1].data);
        for j in 0..n {
            if j > 0 {
                assert!(w[j - 1] <= w[j], "n = {n}: ascending");
            }
            for i in 0..n {
                let av: f64 = (0..n).map(|k| a.data[i * n + k] * v[k * n + j]).sum();
                assert!(
                    (av - w[j] * v[i * n + j]).abs() <= 1e-10 * (1.0 + w[j].abs()),
                    "n = {n}: A v = w v"
                );
                let vtv: f64 = (0..n).map(|k| v[k * n + i] * v[k * n + j]).sum();
                let id = if i == j { 1.0 } else { 0.0 };
                assert!((vtv - id).abs() <= 1e-12, "n = {n}: Vᵀ V = I");
            }
        }
        let c = arr(&[n], s as u64 + 70);
        run_both(&p, "dspectral", &[skew, c]).unwrap();
    }
    let mut a = spd(4, 3);
    for i in 0..4 {
        a.data[i * 4 + i] += 2.0 * i as f64;
    }
    a.data[2] += 0.1;
    check_gradient(&p, "dspectral", "spectral", 1, &[a, arr(&[4], 4)], "eigh");
}

/// Forward mode (`@jvp`) through every builtin: each kernel's JVP against
/// a central difference along a direction, optimized and native.
#[test]
fn tangents_match_finite_differences() {
    let p = prog(SRC);
    let mut a = spd(4, 11);
    a.data[1] += 0.3;
    check_jvp(
        &p,
        "chol_along",
        "chol_w",
        1,
        &[a.clone(), arr(&[4, 4], 12)],
        "cholesky",
    );
    let l = eval(p.ir("chol").unwrap(), &[a])[0].clone();
    check_jvp(
        &p,
        "solves_along",
        "solves",
        2,
        &[l, arr(&[4, 3], 13), arr(&[4, 3], 14)],
        "triangular solves",
    );
    let g = [general_matrix(4, 15), arr(&[4, 2], 16), arr(&[4, 4], 17)];
    check_jvp(
        &p,
        "general_along",
        "general",
        2,
        &g,
        "solve, inv and logdet",
    );
    let mut s = spd(4, 18);
    for i in 0..4 {
        s.data[i * 4 + i] += 2.0 * i as f64;
    }
    check_jvp(
        &p,
        "spectral_along",
        "spectral",
        1,
        &[s, arr(&[4], 19)],
        "eigh",
    );
}

/// On `f32` matrices the builtins compute in `f64` and round the result:
/// `cholesky` of an `f32` matrix is the `f64` one's, rounded; gradients
/// are `f32` and match central differences at `f32`'s tolerance.
#[test]
fn f32_matrices_compute_in_f64_and_round() {
    let p = prog(
        "fn c32[N](A: f32[N, N]) -> f32[N, N] = cholesky(A)
fn c64[N](A: f64[N, N]) -> f64[N, N] = cholesky(A)
fn l32[N](A: f32[N, N], b: f32[N]) -> f32 { let (w, V) = eigh(A); logdet(A) + +/solve(A, b) + +/w }
@grad(A, b)
fn dl32[N](A: f32[N, N], b: f32[N]) -> (f32[N, N], f32[N]) = l32(A, b)
fn l64[N](A: f64[N, N], b: f64[N]) -> f64 { let (w, V) = eigh(A); logdet(A) + +/solve(A, b) + +/w }
@grad(A, b)
fn dl64[N](A: f64[N, N], b: f64[N]) -> (f64[N, N], f64[N]) = l64(A, b)",
    );
    let a = spd(4, 3);
    let a32 = a.cast(DType::F32);
    let got = run_both(&p, "c32", std::slice::from_ref(&a32)).unwrap();
    let want = run_both(&p, "c64", &[a32.cast(DType::F64)]).unwrap();
    assert_eq!(got[0].dtype, DType::F32);
    assert!(got[0].bits_eq(&want[0].cast(DType::F32)));
    let b = arr(&[4], 9);
    let g32 = run_both(&p, "dl32", &[a32.clone(), b.cast(DType::F32)]).unwrap();
    let g64 = run_both(
        &p,
        "dl64",
        &[a32.cast(DType::F64), b.cast(DType::F32).cast(DType::F64)],
    )
    .unwrap();
    for (x, y) in g32.iter().zip(&g64) {
        assert_eq!(x.dtype, DType::F32);
        for (u, v) in x.data.iter().zip(&y.data) {
            assert!((u - v).abs() <= 1e-5 * (1.0 + v.abs()), "{u} vs {v}");
        }
    }
}

/// `solve_upper(U, B)` and `solve_upper_t(U, B)`: `U X = B` and `Uᵀ X = B`
/// for the upper triangle of `U` (the lower one is not read), with
/// gradients in both modes.
#[test]
fn upper_triangular_solves() {
    let p = prog(
        "fn su[N, M](U: f64[N, N], B: f64[N, M]) -> f64[N, M] = solve_upper(U, B)
fn sut[N](U: f64[N, N], b: f64[N]) -> f64[N] = solve_upper_t(U, b)
fn l[N](U: f64[N, N], b: f64[N]) -> f64 = +/(tanh(solve_upper(U, b)) .* solve_upper_t(U, b))
@grad(U, b)
fn dl[N](U: f64[N, N], b: f64[N]) -> (f64[N, N], f64[N]) = l(U, b)
@jvp(U, b)
fn l_along[N](U: f64[N, N], b: f64[N], dU: f64[N, N], db: f64[N]) -> f64 = l(U, b)",
    );
    let n = 4;
    let mut u = arr(&[n, n], 21);
    for i in 0..n {
        u.data[i * n + i] += 3.0;
    }
    let b = arr(&[n, 2], 22);
    let x = run_both(&p, "su", &[u.clone(), b.clone()]).unwrap();
    let v = arr(&[n], 23);
    let y = run_both(&p, "sut", &[u.clone(), v.clone()]).unwrap();
    for i in 0..n {
        for c in 0..2 {
            let s: f64 = (i..n)
                .map(|k| u.data[i * n + k] * x[0].data[k * 2 + c])
                .sum();
            assert!((s - b.data[i * 2 + c]).abs() < 1e-12, "U X = B at {i}, {c}");
        }
        let s: f64 = (0..=i).map(|k| u.data[k * n + i] * y[0].data[k]).sum();
        assert!((s - v.data[i]).abs() < 1e-12, "Uᵀ y = v at {i}");
    }
    check_gradient(&p, "dl", "l", 2, &[u.clone(), v.clone()], "upper solves");
    check_jvp(&p, "l_along", "l", 2, &[u, v], "upper solves");
}
