//! Joining values keeps every bit: `concat` (its three lowerings) and a
//! loop carrying a tuple state (packed as rows, or end to end in one flat
//! vector) give a `-0.0` back as
//! `-0.0`, in native code and in the interpreter, as the same steps written
//! out do. (They were sums over zeros, and `-0.0 + 0.0` is `+0.0`.)

mod common;

use common::{prog, run_both};
use egrad::internals::types::DType;
use egrad::Value;

const PROGRAM: &str = r#"
// `-0.0` at every element of `x * 0.0` where `x < 0`.
fn lit_first[N](x: f64[2], y: f64[N]) -> f64[N+2] = concat(x * 0.0, y)
fn lit_last[N](x: f64[2], y: f64[N]) -> f64[N+2] = concat(y, x * 0.0)
fn neither[N, M](x: f64[N], y: f64[M]) -> f64[N+M] = concat(x * 0.0, y * 0.0)
fn rows32(x: f32[2, 3], y: f32[1, 3]) -> f32[3, 3] = concat(y * 0.0, x * 0.0)

// A state of two vectors of one length (rows) and of two lengths (flat),
// over a run-time count and written out: the first part becomes `-0.0`.
fn step2(a: f64[2], b: f64[2]) -> (f64[2], f64[2]) = (a * 0.0 - 0.0 * b[0], b)
fn rows_loop(n: i64, x: f64[2], y: f64[2]) -> f64[2] {
  let (a, b) = iterate(n, (x, y), s => { let (a, b) = s
    step2(a, b) })
  a
}
fn rows_once(x: f64[2], y: f64[2]) -> f64[2] {
  let (a, b) = step2(x, y)
  a
}
fn step3(a: f64[2], b: f64[3]) -> (f64[2], f64[3]) = (a * 0.0 - 0.0 * b[0], b * 0.0)
fn flat_loop(n: i64, x: f64[2], y: f64[3]) -> (f64[2], f64[3]) =
  iterate(n, (x, y), s => { let (a, b) = s
    step3(a, b) })
fn flat_once(x: f64[2], y: f64[3]) -> (f64[2], f64[3]) = step3(x, y)
"#;

fn f64s(v: &[f64]) -> Value {
    Value::f64(v)
}

fn bits(vs: &[Value]) -> Vec<Vec<u64>> {
    vs.iter()
        .map(|v| v.data.iter().map(|x| x.to_bits()).collect())
        .collect()
}

fn int(k: i64) -> Value {
    Value::scalar(DType::I64, k as f64)
}

#[test]
fn concat_keeps_negative_zeros() {
    let p = prog(PROGRAM);
    let (x, y) = (f64s(&[-1.0, 2.0]), f64s(&[3.0, -0.0, 4.0]));
    let got = run_both(&p, "lit_first", &[x.clone(), y.clone()]).unwrap();
    assert_eq!(bits(&got), bits(&[f64s(&[-0.0, 0.0, 3.0, -0.0, 4.0])]));
    let got = run_both(&p, "lit_last", &[x.clone(), y.clone()]).unwrap();
    assert_eq!(bits(&got), bits(&[f64s(&[3.0, -0.0, 4.0, -0.0, 0.0])]));
    let got = run_both(&p, "neither", &[x, y]).unwrap();
    assert_eq!(bits(&got), bits(&[f64s(&[-0.0, 0.0, 0.0, -0.0, 0.0])]));
    let m = |shape: Vec<usize>, d: &[f64]| Value::array(DType::F32, shape, d.to_vec());
    let x = m(vec![2, 3], &[-1.0, 1.0, -2.0, 2.0, -3.0, 3.0]);
    let y = m(vec![1, 3], &[1.0, -1.0, 0.5]);
    let got = run_both(&p, "rows32", &[x, y]).unwrap();
    let want = m(
        vec![3, 3],
        &[0.0, -0.0, 0.0, -0.0, 0.0, -0.0, 0.0, -0.0, 0.0],
    );
    assert_eq!(bits(&got), bits(&[want]));
}

#[test]
fn a_packed_loop_state_keeps_negative_zeros() {
    let p = prog(PROGRAM);
    let (x, y2, y3) = (
        f64s(&[-1.0, 1.0]),
        f64s(&[1.0, 2.0]),
        f64s(&[1.0, -1.0, 2.0]),
    );
    let looped = run_both(&p, "rows_loop", &[int(1), x.clone(), y2.clone()]).unwrap();
    let once = run_both(&p, "rows_once", &[x.clone(), y2]).unwrap();
    assert_eq!(bits(&looped), bits(&once));
    assert_eq!(looped[0].data[0].to_bits(), (-0.0f64).to_bits());
    let looped = run_both(&p, "flat_loop", &[int(1), x.clone(), y3.clone()]).unwrap();
    let once = run_both(&p, "flat_once", &[x, y3]).unwrap();
    assert_eq!(bits(&looped), bits(&once));
    assert_eq!(looped[1].data[1].to_bits(), (-0.0f64).to_bits());
}
