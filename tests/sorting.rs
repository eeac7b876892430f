//! `sort`, `argsort`, `top_k`, `cumsum` and `cumprod` (`ops::sort`, the
//! builtin kernels along the last axis): values against Rust's own sort
//! and scans, NaN last and ties stable, JIT = interpreter; derivatives in
//! both modes against central differences (zeros in `cumprod`, ties in
//! `top_k`); `egrad fdcheck`; the errors.

mod common;

use common::{arr, check_gradient, check_jvp, egrad, err, prog, run_both};
use egrad::internals::types::value::Value;
use egrad::internals::types::DType;

const SRC: &str = "
fn srt[M, N](x: f64[M, N]) -> f64[M, N] = sort(x)
fn asrt[M, N](x: f64[M, N]) -> i64[M, N] = argsort(x)
fn cs[M, N](x: f64[M, N]) -> f64[M, N] = cumsum(x)
fn cp[M, N](x: f64[M, N]) -> f64[M, N] = cumprod(x)
fn tk[N](x: f64[N]) -> (f64[3], i64[3]) = top_k(x, 3)
fn loss[M, N](x: f64[M, N], w: f64[N]) -> f64 =
  +/(sort(x) .* cumsum(x) .* cumprod(x)) + +/(w .* sort(w)) + +/(cumprod(w) .* cumsum(w))
@grad(x, w)
fn dloss[M, N](x: f64[M, N], w: f64[N]) -> (f64[M, N], f64[N]) = loss(x, w)
@jvp(x, w)
fn loss_along[M, N](x: f64[M, N], w: f64[N], dx: f64[M, N], dw: f64[N]) -> f64 = loss(x, w)
fn best[N](x: f64[N]) -> f64 { let (v, i) = top_k(x, 3); +/(v .* v .* x[i]) }
@grad(x)
fn dbest[N](x: f64[N]) -> f64[N] = best(x)
@jvp(x)
fn best_along[N](x: f64[N], dx: f64[N]) -> f64 = best(x)
";

fn mat(rows: usize, cols: usize, data: &[f64]) -> Value {
    Value::array(DType::F64, vec![rows, cols], data.to_vec())
}

#[test]
fn values_are_rust_s_sort_and_scans_row_by_row() {
    let p = prog(SRC);
    let x = arr(&[4, 7], 3);
    let sorted = run_both(&p, "srt", std::slice::from_ref(&x)).unwrap();
    let perm = run_both(&p, "asrt", std::slice::from_ref(&x)).unwrap();
    let sums = run_both(&p, "cs", std::slice::from_ref(&x)).unwrap();
    let prods = run_both(&p, "cp", std::slice::from_ref(&x)).unwrap();
    for r in 0..4 {
        let row = &x.data[r * 7..(r + 1) * 7];
        let mut want = row.to_vec();
        want.sort_by(f64::total_cmp);
        assert_eq!(sorted[0].data[r * 7..(r + 1) * 7], want[..]);
        for (k, w) in want.iter().enumerate() {
            let p = perm[0].data[r * 7 + k] as usize;
            assert_eq!(row[p], *w);
        }
        let (mut s, mut q) = (0.0, 1.0);
        for (k, v) in row.iter().enumerate() {
            s += v;
            q *= v;
            assert_eq!(sums[0].data[r * 7 + k], s);
            assert_eq!(prods[0].data[r * 7 + k], q);
        }
    }
}

#[test]
fn nan_sorts_last_ties_keep_their_order_and_top_k_takes_the_lower_index() {
    let p = prog(SRC);
    let x = mat(1, 6, &[2.0, f64::NAN, -1.0, 2.0, -f64::NAN, 0.5]);
    let s = run_both(&p, "srt", std::slice::from_ref(&x)).unwrap();
    assert_eq!(s[0].data[..4], [-1.0, 0.5, 2.0, 2.0]);
    assert!(s[0].data[4].is_nan() && s[0].data[5].is_nan());
    let a = run_both(&p, "asrt", &[x]).unwrap();
    assert_eq!(a[0].data, [2.0, 5.0, 0.0, 3.0, 1.0, 4.0]);
    let v = Value::f64(&[1.0, 7.0, 3.0, 7.0, 5.0]);
    let t = run_both(&p, "tk", &[v]).unwrap();
    assert_eq!(t[0].data, [7.0, 7.0, 5.0]);
    assert_eq!(t[1].data, [1.0, 3.0, 4.0]);
    // More than there are: an error before anything runs.
    let e = run_both(&p, "tk", &[Value::f64(&[1.0, 2.0])]).unwrap_err();
    assert!(e.contains("out of range"), "{e}");
}

#[test]
fn derivatives_in_both_modes_match_central_differences() {
    let p = prog(SRC);
    let mut x = arr(&[3, 5], 11);
    // A zero inside a running product (at a tie `sort` has one-sided
    // derivatives only, which central differences average).
    x.data[6] = 0.0;
    let w = Value::f64(&[0.3, -0.7, 0.0, 1.1, -0.2]);
    let args = [x, w];
    check_gradient(&p, "dloss", "loss", 2, &args, "sort, cumsum, cumprod");
    check_jvp(&p, "loss_along", "loss", 2, &args, "sort, cumsum, cumprod");
    let v = arr(&[8], 5);
    check_gradient(&p, "dbest", "best", 1, std::slice::from_ref(&v), "top_k");
    check_jvp(&p, "best_along", "best", 1, &[v], "top_k");
}

#[test]
fn fdcheck_passes_in_both_modes() {
    let dir = std::env::temp_dir().join(format!("egrad-sorting-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("sorting.eg");
    std::fs::write(&file, SRC).unwrap();
    for f in ["dloss", "loss_along", "dbest", "best_along"] {
        let (code, out, e) = egrad(&[
            "fdcheck",
            file.to_str().unwrap(),
            "--fn",
            f,
            "--random",
            "--dim",
            "M=3",
            "--dim",
            "N=6",
        ]);
        assert_eq!(code, 0, "{f}: {out}{e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn errors_say_what_is_needed() {
    let e = err("fn f(x: f64) -> f64 = sort(x)");
    assert!(e.contains("`sort` takes a float array"), "{e}");
    let e = err("fn f[N](x: i64[N]) -> i64[N] = argsort(x)");
    assert!(e.contains("`argsort` takes a float array"), "{e}");
    let e = err("fn f[N](x: f64[N], k: i64) -> f64 { let (v, i) = top_k(x, k); +/v }");
    assert!(e.contains("known at compile time"), "{e}");
    let e = err("fn f[N](x: f64[N], data k: i64) -> f64 { let (v, i) = top_k(x, k); +/v }");
    assert!(e.contains("known at compile time"), "{e}");
    let e = err("fn f(x: f64[3]) -> f64 { let (v, i) = top_k(x, 4); +/v }");
    assert!(e.contains("`top_k` of 4 elements of a vector of 3"), "{e}");
    let e = err("fn f[M, N](x: f64[M, N]) -> f64 { let (v, i) = top_k(x, 1); +/v }");
    assert!(e.contains("`top_k` takes a vector"), "{e}");
    let e = err("fn f[M, N](x: f64[M, N]) -> f64[M, N] = tabulate[M](i => sort(x[i]))");
    assert!(e.contains("not supported yet"), "{e}");
    // A second derivative through the kernels: none yet, and it says so.
    let e = err("fn f[N](x: f64[N]) -> f64 = +/(sort(x) .* x)
@grad(x)
fn df[N](x: f64[N]) -> f64[N] = f(x)
fn g[N](x: f64[N]) -> f64 = +/(df(x) .* df(x))
@grad(x)
fn dg[N](x: f64[N]) -> f64[N] = g(x)");
    assert!(e.contains("no VJP"), "{e}");
    // A program's own function of the name is called instead.
    let p =
        prog("fn sort[N](x: f64[N]) -> f64[N] = x * 2.0\nfn f[N](x: f64[N]) -> f64[N] = sort(x)");
    let got = run_both(&p, "f", &[Value::f64(&[3.0, 1.0])]).unwrap();
    assert_eq!(got[0].data, [6.0, 2.0]);
}

/// `f32` arrays are sorted and scanned in `f64` (sorting is exact there;
/// the running sums and products are rounded once, at the end).
#[test]
fn f32_arrays_sort_and_scan() {
    let p = prog(
        "fn s32[N](x: f32[N]) -> (f32[N], i64[N], f32[N], f32[N]) = (sort(x), argsort(x), cumsum(x), cumprod(x))
fn s64[N](x: f64[N]) -> (f64[N], i64[N], f64[N], f64[N]) = (sort(x), argsort(x), cumsum(x), cumprod(x))
fn t32[N](x: f32[N]) -> (f32[2], i64[2]) = top_k(x, 2)
fn l32[N](x: f32[N]) -> f32 = +/(sort(x) .* cumprod(x))
@grad(x)
fn dl32[N](x: f32[N]) -> f32[N] = l32(x)",
    );
    let x = arr(&[6], 4).cast(DType::F32);
    let got = run_both(&p, "s32", std::slice::from_ref(&x)).unwrap();
    let want = run_both(&p, "s64", &[x.cast(DType::F64)]).unwrap();
    for (g, w) in got.iter().zip(&want) {
        let w = if w.dtype == DType::F64 {
            w.cast(DType::F32)
        } else {
            w.clone()
        };
        assert!(g.bits_eq(&w), "{g:?} vs {w:?}");
    }
    let t = run_both(&p, "t32", std::slice::from_ref(&x)).unwrap();
    assert_eq!(t[0].dtype, DType::F32);
    let g = run_both(&p, "dl32", &[x]).unwrap();
    assert_eq!(g[0].dtype, DType::F32);
}
