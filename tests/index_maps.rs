//! Index maps at sizes known only at run time, in native code: an
//! element's index divided by a size (`transpose`, a vector added to each
//! row, `reverse` of rows) goes through `f64` (`Translator::div_index`),
//! and gathered rows are read a row at a time. At sizes around the vector
//! widths, primes, powers of two and empty ones, every function and its
//! gradient gives the interpreter's bits (SIMD on and off), and an index
//! out of range is the interpreter's error.

mod common;

use common::{arr, prog, run_both};
use egrad::internals::types::DType;
use egrad::Value;

const SRC: &str = r#"
fn folded[N, M](x: f64[N, M], y: f64[M, N]) -> f64 = +/flatten(transpose(x) .* y)
fn transposed[N, M](x: f64[N, M]) -> f64[M, N] = transpose(x) * 2.0
fn rows_plus[N, M](x: f64[N, M], v: f64[M]) -> f64 = +/flatten(x + v)
fn scaled[N, M](x: f64[N, M], v: f64[N]) -> f64[N, M] = tabulate[N](i => x[i] * v[i])
fn flipped[N, M](x: f64[N, M]) -> f64 = +/flatten(reverse(x) .* x)
fn picked[N, M, L](x: f64[N, M], k: i64[L]) -> f64[L, M] = x[k] * 3.0
fn picked_sum[N, M, L](x: f64[N, M], k: i64[L]) -> f64 = +/flatten(x[k] .* x[k])
@grad(x)
fn dfolded[N, M](x: f64[N, M], y: f64[M, N]) -> f64[N, M] = folded(x, y)
@grad(x, v)
fn drows_plus[N, M](x: f64[N, M], v: f64[M]) -> (f64[N, M], f64[M]) = +/flatten(tanh(x + v))
@grad(x)
fn dpicked[N, M, L](x: f64[N, M], k: i64[L]) -> f64[N, M] = picked_sum(x, k)
"#;

/// Row sizes and counts: empty, one, around the vector widths, primes,
/// powers of two and a large one.
const SIZES: [usize; 11] = [0, 1, 2, 3, 5, 7, 8, 9, 17, 64, 257];

fn indices(rows: usize, len: usize, seed: usize) -> Value {
    let data = (0..len)
        .map(|i| ((i * 7 + seed * 3) % rows.max(1)) as f64)
        .collect();
    Value::array(DType::I64, vec![len], data)
}

#[test]
fn index_maps_at_run_time_sizes_equal_the_interpreter() {
    let p = prog(SRC);
    for (a, &n) in SIZES.iter().enumerate() {
        for (b, &m) in SIZES.iter().enumerate() {
            // The large size with small ones only (the test stays quick).
            if n * m > 257 * 17 {
                continue;
            }
            let seed = (a * SIZES.len() + b) as u64;
            let x = arr(&[n, m], seed);
            let y = arr(&[m, n], seed + 1000);
            let v = arr(&[m], seed + 2000);
            let w = arr(&[n], seed + 3000);
            for f in ["folded", "dfolded"] {
                run_both(&p, f, &[x.clone(), y.clone()])
                    .unwrap_or_else(|e| panic!("{f} {n}x{m}: {e}"));
            }
            run_both(&p, "transposed", std::slice::from_ref(&x)).unwrap();
            run_both(&p, "flipped", std::slice::from_ref(&x)).unwrap();
            for f in ["rows_plus", "drows_plus"] {
                run_both(&p, f, &[x.clone(), v.clone()])
                    .unwrap_or_else(|e| panic!("{f} {n}x{m}: {e}"));
            }
            run_both(&p, "scaled", &[x.clone(), w]).unwrap();
            if n > 0 {
                for len in [1, 3, 9, 40] {
                    let k = indices(n, len, a + b);
                    for f in ["picked", "picked_sum", "dpicked"] {
                        run_both(&p, f, &[x.clone(), k.clone()])
                            .unwrap_or_else(|e| panic!("{f} {n}x{m} at {len} rows: {e}"));
                    }
                }
            }
        }
    }
}

#[test]
fn a_gathered_row_out_of_range_is_the_interpreters_error() {
    let p = prog(SRC);
    let x = arr(&[5, 9], 7);
    for bad in [5.0, -1.0, 1e12] {
        // The bad index first, in the middle and last.
        for at in [0, 3, 6] {
            let mut data = vec![1.0; 7];
            data[at] = bad;
            let k = Value::array(DType::I64, vec![7], data);
            for f in ["picked", "picked_sum", "dpicked"] {
                let e = run_both(&p, f, &[x.clone(), k.clone()])
                    .expect_err("an index out of range is an error");
                assert!(e.contains("out of range"), "{f}: {e}");
            }
        }
    }
}

/// Element indices stay below 2^50 (where the division through `f64` is
/// exact): sizes that make a value of 2^50 elements or more, even one never
/// stored (rows of a `tabulate` read at one row), are refused before the
/// run, through `call` and `prepare` alike; just below, the run goes on.
#[test]
fn a_value_of_two_to_the_fifty_elements_is_refused_before_running() {
    use egrad::internals::backend::{compile, BackendOptions};
    let p = prog("fn h[M](n: i64, x: f64[M], k: i64) -> f64[M] = tabulate[n](i => x * 2.0)[k]");
    let native = compile(p.ir("h").unwrap(), &BackendOptions::verified()).unwrap();
    let x = Value::array(DType::F64, vec![2], vec![1.0, 2.0]);
    let k = common::int(3);
    // [n, 2]: 2^50 elements, then one row fewer.
    let refused = [common::int(1 << 49), x.clone(), k.clone()];
    let refs: Vec<&Value> = refused.iter().collect();
    for e in [native.call(&refs).err(), native.prepare(&refs).err()] {
        let e = e.expect("refused").to_string();
        assert!(
            e.contains("1125899906842624 elements") && e.contains("2^50"),
            "{e}"
        );
    }
    let fine = [common::int((1 << 49) - 1), x, k];
    let refs: Vec<&Value> = fine.iter().collect();
    let got = native.call(&refs).unwrap();
    assert_eq!(got[0].data, vec![2.0, 4.0]);
}
