//! Long programs: a function of more than `SPLIT_STMTS` (1,500)
//! statements is compiled as several native
//! functions called in turn, with the scalars a later part reads passed
//! through a spill buffer. Native code must still equal the interpreter
//! bit for bit: scalars read by later parts (directly, broadcast, or in an
//! element tree computed there), scalars returned from an early part, an
//! index check in a late part, loops, and the gradient of such a program.
//! Compile time is measured in the CLI's `bench` and BENCHMARKS.md, never
//! asserted here.

mod common;

use common::prog;
use egrad::internals::backend::{compile, BackendOptions};
use egrad::internals::ir::interp::run;
use egrad::internals::types::value::Value;
use egrad::internals::types::DType;

/// A function of `steps` unrolled steps mixing scalars and vectors, whose
/// results read values from the first, middle and last steps.
fn long_source(steps: usize) -> String {
    let mut s = String::from(
        "fn long[N](x: f64[N], s: f64, k: i64) -> (f64, f64[N], f64, f64) {\n  let a0 = s\n  let v0 = x\n",
    );
    for t in 1..=steps {
        let p = t - 1;
        s += &format!("  let a{t} = a{p} * 0.97 + 0.05 * tanh(+/(v{p} * a{p}))\n");
        s += &format!("  let v{t} = v{p} * 0.9 + sin(a{t} * v0) * 0.1 + a1\n");
    }
    let m = steps / 2;
    s += &format!(
        "  let e = v{steps}[k]\n  (a1, v{steps} + a{m}, +/v{m} * e + a{steps}, max/(v1 - v{steps}))\n}}\n"
    );
    s += "@grad(x, s)\nfn dlong[N](x: f64[N], s: f64, k: i64) -> (f64[N], f64) {\n  let (a, v, b, c) = long(x, s, k)\n  a + +/(v * v) + b * c\n}\n";
    s
}

/// Native code (with SIMD on and off) against the interpreter on each
/// set of arguments: the same values bit for bit, or the same error.
fn compare(p: &egrad::Program, name: &str, arg_sets: &[Vec<Value>], stmts_at_least: usize) {
    let ir = p.ir(name).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        ir.stmts.len() > stmts_at_least,
        "{name} has {} statements, too few to be split",
        ir.stmts.len()
    );
    for simd in [true, false] {
        let opts = BackendOptions {
            simd,
            ..BackendOptions::verified()
        };
        let native = compile(ir, &opts).unwrap();
        for args in arg_sets {
            let refs: Vec<&Value> = args.iter().collect();
            let want = run(ir, &refs);
            let got = native.call(&refs);
            match (&got, &want) {
                (Ok(g), Ok(w)) => {
                    assert_eq!(g.len(), w.len());
                    for (a, b) in g.iter().zip(w) {
                        assert!(a.bits_eq(b), "{name}: jit {a:?} vs interpreter {b:?}");
                    }
                }
                (Err(g), Err(w)) => assert_eq!(g.to_string(), w.to_string()),
                _ => panic!("{name}: jit {got:?} vs interpreter {want:?}"),
            }
        }
    }
}

#[test]
fn a_program_split_into_parts_equals_the_interpreter() {
    let p = prog(&long_source(400));
    let x = Value::f64(&[0.3, -0.7, 1.1, 0.05, -2.0]);
    let s = Value::scalar(DType::F64, 0.4);
    let k = |k: f64| Value::scalar(DType::I64, k);
    let sets = [
        vec![x.clone(), s.clone(), k(0.0)],
        vec![x.clone(), s.clone(), k(4.0)],
        // An index out of range in the last part: the same error in both.
        vec![x.clone(), s.clone(), k(5.0)],
        // Empty arrays.
        vec![Value::f64(&[]), s.clone(), k(0.0)],
    ];
    compare(&p, "long", &sets, 2500);
    compare(&p, "dlong", &sets[..3], 5000);
}

#[test]
fn a_long_unrolled_loop_with_loops_inside_equals_the_interpreter() {
    // The fuzzer's reproducer, smaller: `iterate_until` under a condition
    // that is not the state's, each step holding a scan, unrolled (its
    // state mixes `f64` and `f32` values, which no loop carries).
    let p = prog(
        "fn f[N](x: f64[N], z: f64[2], k: i64, y: f64, u: f32) -> f64 {
           let (r, v, w, j) = iterate_until(600, (f64(k), x, z, u), (q, v, w, j) => k < 0, (q, v, w, j) => (
             q + 0.01 * (tanh({
               let t = +/scan_all(v, q, (c, e) => c * 0.5 + tanh(c) + e)
               y + t }) - q), v, w, j))
           exp(1 / f64(k)) * r
         }",
    );
    let args = [
        Value::f64(&[0.5, -0.25, 2.0]),
        Value::f64(&[0.1, 0.2]),
        Value::scalar(DType::I64, 3.0),
        Value::scalar(DType::F64, 0.75),
        Value::scalar(DType::F32, 0.5),
    ];
    compare(&p, "f", &[args.to_vec()], 1500);
}

/// Long chains of each kind (`let`s, calls, integer arithmetic used as an
/// index) go through every stage (check, AD, the e-graph, extraction,
/// Cranelift, the run) on a thread of 1 MiB of stack: no stage recurses
/// once per statement (20,000 frames of even 64 bytes would overflow it).
#[test]
fn long_chains_compile_and_run_on_a_small_stack() {
    use egrad::{compile_function, optimize_gradient, Arg, Options, Program};
    let n = 20_000;
    let mut lets = String::from("fn f(x: f64) -> f64 {\n  let y = x\n");
    let mut ints = String::from("fn k(x: f64[10], k: i64, j: i64) -> f64 {\n");
    for _ in 0..n {
        lets += "  let y = sin(y) * x\n";
        ints += "  let k = k * j\n";
    }
    lets += "  y\n}\n@grad(x) fn df(x: f64) -> f64 = f(x)\n";
    ints += "  x[k % 10]\n}\n";
    let mut calls = String::from("fn g0(x: f64) -> f64 = sin(x)\n");
    for i in 1..n / 4 {
        calls += &format!("fn g{i}(x: f64) -> f64 = sin(g{}(x)) * x\n", i - 1);
    }
    calls += &format!("@grad(x) fn dg(x: f64) -> f64 = g{}(x)\n", n / 4 - 1);
    let run = move || {
        for (src, f) in [(&lets, "f"), (&calls, "dg")] {
            let p = Program::parse(src).unwrap();
            let g = optimize_gradient(&p, &Options::default().function(f)).unwrap();
            let (v, d) = g
                .compile()
                .unwrap()
                .value_and_grad(&[Arg::scalar(0.5)])
                .unwrap();
            assert!(v.as_scalar().is_finite() && d[0].data[0].is_finite());
        }
        let p = Program::parse(&ints).unwrap();
        let k = compile_function(&p, &Options::default().function("k")).unwrap();
        let x: Vec<f64> = (0..10).map(f64::from).collect();
        let out = k
            .call(&[Arg::f64(&x), Arg::Scalar(3.0), Arg::Scalar(1.0)])
            .unwrap();
        assert_eq!(out[0].data, vec![3.0]);
    };
    std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(run)
        .unwrap()
        .join()
        .unwrap();
}

/// A function in parts with thousands of scalar parameters (a gradient's
/// pullback takes one per scalar residual) loads each where a part reads
/// it, not every one in every part: its CLIF is linear in its length
/// (every part loading all 3,000 parameters made 60,000 loads, and
/// `egrad build` of a 10,000-`let` scalar gradient took 34 s, now 2.7 s).
/// Native code still equals the interpreter.
#[test]
fn a_function_in_parts_loads_each_scalar_parameter_where_it_is_read() {
    let n = 3000;
    let params: Vec<String> = (0..n).map(|k| format!("a{k}: f64")).collect();
    let mut src = format!("fn f({}) -> f64 {{\n  let s = a0\n", params.join(", "));
    for k in 1..n {
        src += &format!("  let s = sin(s) * a{k}\n");
    }
    src += "  s\n}\n";
    let p = prog(&src);
    let ir = p.ir("f").unwrap();
    let clif = egrad::clif_text(ir).unwrap();
    let lines = clif.lines().count();
    assert!(lines < 20 * n, "{lines} lines of CLIF for {n} statements");
    let args: Vec<Value> = (0..n)
        .map(|k| Value::scalar(DType::F64, 1.0 - k as f64 / n as f64))
        .collect();
    compare(&p, "f", &[args], 1500);
}
