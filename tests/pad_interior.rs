//! Element trees with pads nested under row shifts (`concat`s of shifted
//! values, as an RK4 step builds them): native code computes vectors
//! without bounds tests only where every lane lies inside every pad it
//! reaches through element-wise ops, slices, rows and other pads (each
//! at its own shift, symbolic in the sizes for matrices), and the
//! elements at the pads' edges with the scalar code. Every size from 0
//! up, vectors and matrices, SIMD on and off, as the checker made each
//! function and optimized: native code gives the interpreter's bits.

mod common;

use common::arr;
use egrad::internals::backend::{compile, BackendOptions};
use egrad::internals::ir::interp::run;
use egrad::internals::ir::{parse_functions, Function};
use egrad::internals::pipeline::{optimize_ir, Options};
use egrad::internals::types::value::Value;
use egrad::internals::types::{DType, Dim};
use egrad::Program;

const SRC: &str = r#"
fn rhs[N](x: f64[N], y: f64[N]) -> f64[N] =
  concat(tabulate[1](i => x[i]), tabulate[N-1](i => x[i + 1] * y[i]))

// Four pads deep, each under the next one's slice.
fn rk4[N](x: f64[N], y: f64[N]) -> f64[N] {
  let k1 = rhs(x, y)
  let k2 = rhs(x, y + 0.5 * k1)
  let k3 = rhs(x, y + 0.5 * k2)
  let k4 = rhs(x, y + k3)
  y + 0.25 * (k1 + 2 * k2 + 2 * k3 + k4)
}

// Shifts both ways, two elements at a time, and a rotation inside.
fn wide[N](x: f64[N]) -> f64[N] {
  let a = concat(tabulate[2](i => x[i] * 3), tabulate[N-2](i => x[i + 2] - x[i]))
  let b = concat(tabulate[N-1](i => a[i + 1] * x[i]), tabulate[1](i => a[i]))
  concat(tabulate[1](i => b[i]), tabulate[N-1](i => b[i + 1] + a[i])) * x
}

// Pads below a slice, inlined at its offset: `a`'s pads at shifts
// 2 (left), 1 (odd, and in f32's four lanes) and -1 (right).
fn odd[N](x: f64[N]) -> f64[N-1] {
  let a = concat(tabulate[3](i => x[i] * 3), tabulate[N-3](i => x[i + 3] - x[i]))
  tabulate[N-1](i => a[i + 1] * x[i])
}
fn odd32[N](x: f32[N]) -> f32[N-1] {
  let a = concat(tabulate[3](i => x[i] * 3), tabulate[N-3](i => x[i + 3] - x[i]))
  tabulate[N-1](i => a[i + 1] * x[i])
}
fn left[N](x: f64[N]) -> f64[N-2] {
  let a = concat(tabulate[2](i => x[i] * 3), tabulate[N-2](i => x[i + 2] - x[i]))
  tabulate[N-2](i => a[i + 2] * x[i])
}
fn right[N](x: f64[N]) -> f64[N] {
  let a = concat(tabulate[1](i => x[i] * 3), tabulate[N-1](i => x[i] - x[i + 1]))
  concat(tabulate[1](i => x[i]), tabulate[N-1](i => a[i] * x[i + 1]))
}

// Rows: the shifts are multiples of the run-time row length K.
fn rows[N, K](X: f64[N, K], r: f64[1, K]) -> f64[N, K] {
  let a = concat(r, tabulate[N-1](i => X[i + 1] * 2))
  let b = concat(tabulate[N-1](i => a[i + 1] + X[i]), r)
  a * b + concat(r, tabulate[N-1](i => b[i] - a[i + 1]))
}

fn loss[N](x: f64[N], y: f64[N]) -> f64 = +/(rk4(x, rk4(x, y)) * y)

// A gradient that adds overlapping pads (at 0 and 3, as Rosenbrock's at
// 0 and 1): segments inside both run vectors with no test, the others
// test each pad.
fn far[N](x: f64[N]) -> f64 = +/(tabulate[N-3](i => (x[i + 3] - x[i] * x[i]) * (x[i + 3] - x[i] * x[i])))
@grad(x)
fn dfar[N](x: f64[N]) -> f64[N] = far(x)

// GradBench ode's gradient at one step: the last component's.
fn last[N](x: f64[N]) -> f64 = reverse(rk4(x, 0 * x))[0]
@grad(x)
fn dlast[N](x: f64[N]) -> f64[N] = last(x)
@grad(x, y)
fn dloss[N](x: f64[N], y: f64[N]) -> (f64[N], f64[N]) = loss(x, y)
"#;

/// IR functions: one pad at offset 3 (or two overlapping ones) under an
/// element-wise op, so a segment of vectors lies before it, inside it
/// (no tests) and after it.
const IR: &str = "fn onepad[N](%x: f64[N], %y: f64[N]) -> f64[N] {
  %0: f64[N-3] = slice 3 %x
  %1: f64[N-3] = slice 0 %x
  %2: f64[N-3] = mul %0 %1
  %3: f64[N] = pad 3 %2
  %4: f64[N] = mul %y %3
  ret %4
}
fn twopads[N](%x: f64[N], %y: f64[N]) -> f64[N] {
  %0: f64[N-3] = slice 3 %x
  %1: f64[N-3] = slice 0 %y
  %2: f64[N-3] = mul %0 %1
  %3: f64[N] = pad 3 %2
  %4: f64[N-2] = slice 0 %x
  %5: f64[N] = pad 0 %4
  %6: f64[N] = mul %5 %3
  %7: f64[N] = sub %y %6
  ret %7
}
";

/// Random arguments for `f`: `n` elements along `N`, `k` along `K`.
fn args(f: &Function, n: usize, k: usize, seed: u64) -> Vec<Value> {
    f.params
        .iter()
        .enumerate()
        .map(|(p, param)| {
            let shape: Vec<usize> = f
                .ty(param.var)
                .shape
                .iter()
                .map(|d| match d {
                    Dim::Lit(m) => *m as usize,
                    Dim::Param(s) if s == "K" => k,
                    _ => n,
                })
                .collect();
            let x = arr(&shape, seed * 31 + p as u64);
            let dtype = f.ty(param.var).dtype;
            let data = x.data.iter().map(|&v| {
                if dtype == DType::F32 {
                    v as f32 as f64
                } else {
                    v
                }
            });
            Value::array(dtype, shape, data.collect())
        })
        .collect()
}

fn check(f: &Function, what: &str) {
    let natives: Vec<_> = [true, false]
        .iter()
        .map(|&simd| {
            let opts = BackendOptions {
                simd,
                ..BackendOptions::verified()
            };
            compile(f, &opts).unwrap_or_else(|e| panic!("{what}: {e}"))
        })
        .collect();
    for n in 0..=13 {
        for k in [0, 1, 2, 3] {
            let args = args(f, n, k, n as u64 + 7 * k as u64);
            let refs: Vec<&Value> = args.iter().collect();
            let want = run(f, &refs);
            for (native, simd) in natives.iter().zip(["simd", "scalar"]) {
                let got = native.call(&refs);
                match (&want, got) {
                    (Ok(want), Ok(got)) => {
                        for (g, w) in got.iter().zip(want) {
                            assert!(
                                g.bits_eq(w),
                                "{what} ({simd}) at N = {n}, K = {k}: JIT {g:?} vs interpreter {w:?}"
                            );
                        }
                    }
                    (Err(_), Err(_)) => {}
                    (want, got) => panic!(
                        "{what} ({simd}) at N = {n}, K = {k}: interpreter {want:?}, JIT {got:?}"
                    ),
                }
            }
        }
    }
}

#[test]
fn nested_pads_under_shifts_equal_the_interpreter() {
    let p = Program::parse(SRC).unwrap_or_else(|e| panic!("{e}"));
    for name in [
        "rhs", "rk4", "wide", "left", "odd", "odd32", "right", "rows", "loss", "dloss",
    ] {
        let f = p.ir(name).unwrap();
        check(f, name);
        let o = optimize_ir(f, &Options::default().function(name)).unwrap();
        check(&o.after, &format!("{name}, optimized"));
    }
    for f in parse_functions(IR).unwrap_or_else(|e| panic!("{e}")) {
        check(&f, &f.name);
    }
}
