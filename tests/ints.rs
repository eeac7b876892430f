//! Run-time integers, gathers and scatters at the IR level: the native
//! backend against the reference interpreter (bit for bit), integer
//! semantics (wrapping, floor division, division by zero), and index
//! checks that fail cleanly in both.

use egrad::internals::backend::{compile, BackendOptions};
use egrad::internals::ir::interp;
use egrad::internals::ir::parse_functions;
use egrad::internals::types::value::Value;
use egrad::internals::types::DType;

fn both(src: &str, args: &[&Value]) -> (Result<Vec<Value>, String>, Result<Vec<Value>, String>) {
    let f = &parse_functions(src).unwrap()[0];
    f.validate().unwrap();
    let i = interp::run(f, args).map_err(|e| e.to_string());
    let mut outs = Vec::new();
    for simd in [false, true] {
        let opts = BackendOptions {
            verify: true,
            simd,
            gemm: false,
            wide: simd,
        };
        let c = compile(f, &opts).unwrap();
        outs.push(c.call(args).map_err(|e| e.to_string()));
    }
    assert_eq!(outs[0], outs[1], "simd on and off differ");
    (i, outs.pop().unwrap())
}

fn ints(xs: &[i64]) -> Value {
    Value::array(
        DType::I64,
        vec![xs.len()],
        xs.iter().map(|&x| x as f64).collect(),
    )
}

const ARITH: &str = "fn arith[N](%a: i64[N], %b: i64[N]) -> (i64[N], i64[N], i64[N], i64[N], i64[N], i64[N], i64[N], i64[N]) {
  %0: i64[N] = add %a %b
  %1: i64[N] = sub %a %b
  %2: i64[N] = mul %a %b
  %3: i64[N] = div %a %b
  %4: i64[N] = rem %a %b
  %5: i64[N] = lt %a %b
  %6: i64[N] = max %a %b
  %7: i64[N] = neg %a
  ret %0, %1, %2, %3, %4, %5, %6, %7
}";

#[test]
fn integer_arithmetic_matches_the_interpreter_and_numpy() {
    let a = ints(&[7, -7, 7, -7, 5, 0, 3, -9, 1 << 40]);
    let b = ints(&[2, 2, -2, -2, 0, 3, -1, 4, 1 << 20]);
    let (i, j) = both(ARITH, &[&a, &b]);
    let (i, j) = (i.unwrap(), j.unwrap());
    assert_eq!(i, j);
    // Floor division and modulo with the divisor's sign; zero divisor gives 0.
    assert_eq!(
        i[3].data,
        vec![3.0, -4.0, -4.0, 3.0, 0.0, 0.0, -3.0, -3.0, 1048576.0]
    );
    assert_eq!(
        i[4].data,
        vec![1.0, 1.0, -1.0, -1.0, 0.0, 0.0, 0.0, 3.0, 0.0]
    );
    assert_eq!(i[5].data[..3], [0.0, 1.0, 0.0]);
}

const CONVERT: &str = "fn conv[N](%x: f64[N], %k: i64[N]) -> (i64[N], f64[N], f32[N]) {
  %0: i64[N] = toi64 %x
  %1: f64[N] = tof64 %k
  %2: f32[N] = tof32 %k
  ret %0, %1, %2
}";

#[test]
fn conversions_truncate_and_saturate() {
    let x = Value::f64(&[2.7, -2.7, f64::NAN, 1e300, -1e300, 0.5]);
    let k = ints(&[1, -2, 3, 4, 5, 1 << 30]);
    let (i, j) = both(CONVERT, &[&x, &k]);
    let (i, j) = (i.unwrap(), j.unwrap());
    assert_eq!(i, j);
    assert_eq!(i[0].data[..3], [2.0, -2.0, 0.0]);
    assert_eq!(i[0].data[3], i64::MAX as f64);
    assert_eq!(i[2].data[5], (1u64 << 30) as f64);
}

const GATHER: &str =
    "fn g[N, M](%x: f64[N, 3], %idx: i64[M], %w: f64[M, 3]) -> (f64[M, 3], f64[N, 3], f64) {
  %r: f64[M, 3] = gather 4294967301 %x %idx
  %s: f64[N, 3] = scatter 4294967301 %idx %w
  %e: f64[M, 3] = mul %r %w
  %t: f64 = sum %e
  ret %r, %s, %t
}";

#[test]
fn gathers_and_scatters_match_the_interpreter() {
    let x = Value::array(
        DType::F64,
        vec![4, 3],
        (0..12).map(|i| i as f64 * 1.5 - 2.0).collect(),
    );
    let idx = ints(&[3, 0, 3, 1, 2]);
    let w = Value::array(
        DType::F64,
        vec![5, 3],
        (0..15).map(|i| (i as f64).sin()).collect(),
    );
    let (i, j) = both(GATHER, &[&x, &idx, &w]);
    let (i, j) = (i.unwrap(), j.unwrap());
    assert_eq!(i, j);
    assert_eq!(i[0].data[..3], x.data[9..12]);
    // Row 3 got rows 0 and 2 of w, in that order.
    assert_eq!(i[1].data[9], w.data[0] + w.data[6]);
}

#[test]
fn an_index_out_of_range_is_an_error_in_both() {
    let x = Value::array(DType::F64, vec![4, 3], vec![1.0; 12]);
    let w = Value::array(DType::F64, vec![2, 3], vec![1.0; 6]);
    for bad in [4i64, -1, i64::MAX] {
        let idx = ints(&[0, bad]);
        let (i, j) = both(GATHER, &[&x, &idx, &w]);
        let (i, j) = (i.unwrap_err(), j.unwrap_err());
        assert_eq!(i, j);
        assert!(i.contains("out of range for an array of length 4"), "{i}");
    }
}

/// A gather with a matrix of indices fused into a row-wise loop (here with
/// a `spread`): each row of the result holds several gathered rows, so
/// the row context must not stand for one index (native code read the
/// wrong rows before).
const GATHER_ROWS: &str = "fn g[N, T, B](%X: f64[T, N, B], %H: f64[N, B]) -> f64[N, T, B] {
  %0: f64[T, N, B] = sin %X
  %1: f64[N*T, B] = reshape %0
  %2: i64[T] = iota
  %3: i64 = const 2
  %4: i64[T] = bcast %3
  %5: i64[T] = mul %2 %4
  %6: i64[N, T] = repeat %5
  %7: i64[N] = iota
  %8: i64[T, N] = repeat %7
  %9: i64[N, T] = transpose %8
  %10: i64[N, T] = add %6 %9
  %11: f64[N, T, B] = gather 0 %1 %10
  %12: f64[N] = sumtail %H
  %13: f64[N, T, B] = spread %12
  %14: f64[N, T, B] = mul %11 %13
  ret %14
}";

#[test]
fn a_gather_with_a_matrix_of_indices_in_a_row_loop() {
    let x = Value::array(
        DType::F64,
        vec![3, 2, 2],
        (0..12).map(|i| f64::from(i) * 0.37).collect(),
    );
    let h = Value::array(DType::F64, vec![2, 2], vec![0.5, 1.0, -2.0, 0.25]);
    let (i, n) = both(GATHER_ROWS, &[&x, &h]);
    let (i, n) = (i.unwrap(), n.unwrap());
    assert!(
        i[0].bits_eq(&n[0]),
        "JIT {:?} vs interpreter {:?}",
        n[0],
        i[0]
    );
    // Element [n, t, b] is sin(X[t, n, b]) * sum(H[n]).
    let want = |nn: usize, t: usize, b: usize| {
        ((t * 4 + nn * 2 + b) as f64 * 0.37).sin() * [1.5, -1.75][nn]
    };
    for nn in 0..2 {
        for t in 0..3 {
            for b in 0..2 {
                let got = i[0].data[nn * 6 + t * 2 + b];
                assert!(
                    (got - want(nn, t, b)).abs() < 1e-12,
                    "[{nn}, {t}, {b}]: {got}"
                );
            }
        }
    }
}
