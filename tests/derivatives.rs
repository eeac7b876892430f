//! Every derivative checked by numbers.
//!
//! 1. A row per op of the op table: a small f64 function exercising the op,
//!    reverse-mode gradient (reference interpreter) against central finite
//!    differences at random points of the op's domain (proptest).
//! 2. Every `@grad` function of every example, in f64: the gradient of the
//!    AD output and of the e-graph-optimized program against central finite
//!    differences of the primal.

mod common;

use common::finite_differences;
use egrad::internals::differentiate::{jvp, reverse};
use egrad::internals::ir::interp::run;
use egrad::internals::ir::{parse_functions, Function};
use egrad::internals::ops::{Math, Op, ALL_OPS};
use egrad::internals::pipeline::{optimize_ir, Options};
use egrad::internals::types::value::Value;
use egrad::internals::types::DType;
use egrad::Program;
use proptest::prelude::*;

/// A loop of 5 steps of a state `[N]` (`s -> sin(s) * s + 0.3 s`).
const LOOP_ROW: &str = "fn f[N](%a: f64[N]) -> f64 {
  loop 0 x5 {
    fn f.body[N](%s: f64[N]) -> f64[N] {
      %0: f64[N] = sin %s
      %1: f64[N] = mul %0 %s
      %c: f64 = const 0.3
      %2: f64[N] = bcast %c
      %3: f64[N] = mul %2 %s
      %4: f64[N] = add %1 %3
      ret %4
    }
  }
  %0: f64[N] = loop 0 %a
  %1: f64[N] = mul %0 %a
  %2: f64 = sum %1
  ret %2
}";

/// `log1p(exp(a)) * a` summed, where `log1p(exp(a))` brings its rule,
/// sigmoid.
const CUSTOM_ROW: &str = "fn f[N](%a: f64[N]) -> f64 {
  rule 0 sp vjp {
    fn sp_vjp[N](%x: f64[N], %g: f64[N]) -> f64[N] {
      %0: f64[N] = neg %x
      %1: f64[N] = exp %0
      %2: f64 = const 1.0
      %3: f64[N] = bcast %2
      %4: f64[N] = add %3 %1
      %5: f64[N] = div %g %4
      ret %5
    }
  }
  %0: f64[N] = exp %a
  %1: f64[N] = log1p %0
  %sp: f64[N] = custom 0 1 %1 %a
  %2: f64[N] = mul %sp %a
  %3: f64 = sum %2
  ret %3
}";

/// A math function's test function (`sum(f(a) * a)`) and the interval its
/// inputs are drawn from.
fn math_row(m: Math) -> (&'static str, f64, f64) {
    // No wildcard: a new function must add its interval here.
    let (lo, hi) = match m {
        Math::Sin | Math::Cos => (-3.0, 3.0),
        Math::Exp | Math::Tanh | Math::Abs | Math::Expm1 => (-2.0, 2.0),
        Math::Log | Math::Sqrt => (0.2, 3.0),
        Math::Tan => (-1.2, 1.2),
        Math::Log1p => (-0.5, 2.0),
        Math::Erf | Math::Erfc => (-2.0, 2.0),
        // Away from the pole at 0 (negative inputs: tests/special_functions.rs).
        Math::Lgamma | Math::Digamma | Math::Trigamma | Math::Tetragamma => (0.3, 4.0),
    };
    let text = format!(
        "fn f[N](%a: f64[N]) -> f64 {{\n  %0: f64[N] = {} %a\n  %1: f64[N] = mul %0 %a\n  %2: f64 = sum %1\n  ret %2\n}}",
        m.name()
    );
    (Box::leak(text.into_boxed_str()), lo, hi)
}

/// A test function for an op and the interval its inputs are drawn from.
fn row(op: Op) -> (&'static str, f64, f64) {
    // No wildcard: a new op must add its row here.
    match op {
        Op::Const(_) => ("fn f(%x: f64) -> f64 {\n  %c: f64 = const 3\n  %0: f64 = mul %x %c\n  ret %0\n}", -2.0, 2.0),
        Op::Zero => ("fn f(%x: f64) -> f64 {\n  %z: f64 = zero\n  %0: f64 = add %x %z\n  %1: f64 = mul %0 %x\n  ret %1\n}", -2.0, 2.0),
        Op::Add => ("fn f[N](%a: f64[N], %b: f64[N]) -> f64 {\n  %0: f64[N] = add %a %b\n  %1: f64[N] = mul %0 %0\n  %2: f64 = sum %1\n  ret %2\n}", -2.0, 2.0),
        Op::Sub => ("fn f[N](%a: f64[N], %b: f64[N]) -> f64 {\n  %0: f64[N] = sub %a %b\n  %1: f64[N] = mul %0 %0\n  %2: f64 = sum %1\n  ret %2\n}", -2.0, 2.0),
        Op::Mul => ("fn f[N](%a: f64[N], %b: f64[N]) -> f64 {\n  %0: f64[N] = mul %a %b\n  %1: f64[N] = mul %0 %a\n  %2: f64 = sum %1\n  ret %2\n}", -2.0, 2.0),
        Op::Div => ("fn f[N](%a: f64[N], %b: f64[N]) -> f64 {\n  %0: f64[N] = div %a %b\n  %2: f64 = sum %0\n  ret %2\n}", 0.5, 2.0),
        Op::Neg => ("fn f[N](%a: f64[N]) -> f64 {\n  %0: f64[N] = neg %a\n  %1: f64[N] = mul %0 %a\n  %2: f64 = sum %1\n  ret %2\n}", -2.0, 2.0),
        Op::Math(m) => math_row(m),
        Op::Pow => ("fn f[N](%a: f64[N], %b: f64[N]) -> f64 {\n  %0: f64[N] = pow %a %b\n  %1: f64[N] = mul %0 %a\n  %2: f64 = sum %1\n  ret %2\n}", 0.5, 2.0),
        Op::Max => ("fn f[N](%a: f64[N], %b: f64[N]) -> f64 {\n  %0: f64[N] = max %a %b\n  %1: f64[N] = mul %0 %a\n  %2: f64 = sum %1\n  ret %2\n}", -2.0, 2.0),
        Op::Min => ("fn f[N](%a: f64[N], %b: f64[N]) -> f64 {\n  %0: f64[N] = min %a %b\n  %1: f64[N] = mul %0 %a\n  %2: f64 = sum %1\n  ret %2\n}", -2.0, 2.0),
        Op::Lt => ("fn f[N](%a: f64[N], %b: f64[N]) -> f64 {\n  %c: f64[N] = lt %a %b\n  %0: f64[N] = mul %a %b\n  %1: f64[N] = sin %b\n  %2: f64[N] = select %c %0 %1\n  %3: f64 = sum %2\n  ret %3\n}", -2.0, 2.0),
        Op::Le => ("fn f[N](%a: f64[N], %b: f64[N]) -> f64 {\n  %c: f64[N] = le %a %b\n  %0: f64[N] = mul %a %b\n  %1: f64[N] = sin %b\n  %2: f64[N] = select %c %0 %1\n  %3: f64 = sum %2\n  ret %3\n}", -2.0, 2.0),
        Op::Gt => ("fn f[N](%a: f64[N], %b: f64[N]) -> f64 {\n  %c: f64[N] = gt %a %b\n  %0: f64[N] = mul %a %b\n  %1: f64[N] = sin %b\n  %2: f64[N] = select %c %0 %1\n  %3: f64 = sum %2\n  ret %3\n}", -2.0, 2.0),
        Op::Ge => ("fn f[N](%a: f64[N], %b: f64[N]) -> f64 {\n  %c: f64[N] = ge %a %b\n  %0: f64[N] = mul %a %b\n  %1: f64[N] = sin %b\n  %2: f64[N] = select %c %0 %1\n  %3: f64 = sum %2\n  ret %3\n}", -2.0, 2.0),
        Op::Eq => ("fn f[N](%a: f64[N], %b: f64[N]) -> f64 {\n  %c: f64[N] = eq %a %b\n  %0: f64[N] = mul %a %b\n  %1: f64[N] = sin %b\n  %2: f64[N] = select %c %0 %1\n  %3: f64 = sum %2\n  ret %3\n}", -2.0, 2.0),
        Op::Ne => ("fn f[N](%a: f64[N], %b: f64[N]) -> f64 {\n  %c: f64[N] = ne %a %b\n  %0: f64[N] = mul %a %b\n  %1: f64[N] = sin %b\n  %2: f64[N] = select %c %0 %1\n  %3: f64 = sum %2\n  ret %3\n}", -2.0, 2.0),
        Op::Select => ("fn f[N](%a: f64[N], %b: f64[N]) -> f64 {\n  %c: f64[N] = gt %a %b\n  %0: f64[N] = exp %a\n  %1: f64[N] = mul %b %b\n  %2: f64[N] = select %c %0 %1\n  %3: f64 = sum %2\n  ret %3\n}", -2.0, 2.0),
        Op::MaxAll => ("fn f[N](%a: f64[N]) -> f64 {\n  %0: f64 = maxall %a\n  %1: f64 = mul %0 %0\n  ret %1\n}", -2.0, 2.0),
        Op::MinAll => ("fn f[N](%a: f64[N]) -> f64 {\n  %0: f64 = minall %a\n  %1: f64 = mul %0 %0\n  ret %1\n}", -2.0, 2.0),
        Op::Slice(_) => ("fn f[N](%a: f64[N]) -> f64 {\n  %0: f64[N-1] = slice 1 %a\n  %1: f64[N-1] = mul %0 %0\n  %2: f64 = sum %1\n  ret %2\n}", -2.0, 2.0),
        Op::Pad(_) => ("fn f(%a: f64[2]) -> f64 {\n  %0: f64[4] = pad 1 %a\n  %1: f64[4] = sin %0\n  %2: f64 = sum %1\n  ret %2\n}", -2.0, 2.0),
        Op::Index(_) => ("fn f(%a: f64[3]) -> f64 {\n  %0: f64 = index 1 %a\n  %1: f64 = mul %0 %0\n  ret %1\n}", -2.0, 2.0),
        Op::Unindex(_) => ("fn f(%a: f64) -> f64 {\n  %0: f64[3] = unindex 2 %a\n  %1: f64[3] = sin %0\n  %2: f64 = sum %1\n  ret %2\n}", -2.0, 2.0),
        Op::Repeat => ("fn f[N](%a: f64[N]) -> f64 {\n  %0: f64[3, N] = repeat %a\n  %1: f64[3, N] = sin %0\n  %2: f64 = sum %1\n  ret %2\n}", -2.0, 2.0),
        Op::SumLead => ("fn f[N](%a: f64[3, N]) -> f64 {\n  %0: f64[N] = sumlead %a\n  %1: f64[N] = mul %0 %0\n  %2: f64 = sum %1\n  ret %2\n}", -2.0, 2.0),
        Op::Spread => ("fn f[N](%a: f64[N]) -> f64 {\n  %0: f64[N, 2] = spread %a\n  %1: f64[N, 2] = sin %0\n  %2: f64 = sum %1\n  ret %2\n}", -2.0, 2.0),
        Op::MaxTail => ("fn f[N](%a: f64[N, 3]) -> f64 {\n  %0: f64[N] = maxtail %a\n  %1: f64[N] = mul %0 %0\n  %2: f64 = sum %1\n  ret %2\n}", -2.0, 2.0),
        Op::MinTail => ("fn f[N](%a: f64[N, 3]) -> f64 {\n  %0: f64[N] = mintail %a\n  %1: f64[N] = mul %0 %0\n  %2: f64 = sum %1\n  ret %2\n}", -2.0, 2.0),
        Op::SumTail => ("fn f[N](%a: f64[N, 2]) -> f64 {\n  %0: f64[N] = sumtail %a\n  %1: f64[N] = mul %0 %0\n  %2: f64 = sum %1\n  ret %2\n}", -2.0, 2.0),
        Op::MatMul => ("fn f[N](%a: f64[N, 3], %b: f64[3, 2]) -> f64 {\n  %0: f64[N, 2] = matmul %a %b\n  %1: f64[N, 2] = sin %0\n  %2: f64 = sum %1\n  ret %2\n}", -2.0, 2.0),
        Op::Transpose => ("fn f[N](%a: f64[N, 2], %b: f64[2, N]) -> f64 {\n  %0: f64[2, N] = transpose %a\n  %1: f64[2, N] = mul %0 %b\n  %2: f64[2, N] = sin %1\n  %3: f64 = sum %2\n  ret %3\n}", -2.0, 2.0),
        Op::Reverse => ("fn f[N](%a: f64[N, 2], %b: f64[N, 2]) -> f64 {\n  %0: f64[N, 2] = reverse %a\n  %1: f64[N, 2] = mul %0 %b\n  %2: f64[N, 2] = sin %1\n  %3: f64 = sum %2\n  ret %3\n}", -2.0, 2.0),
        Op::Reshape => ("fn f[N](%a: f64[N, 2], %b: f64[N, 2]) -> f64 {\n  %0: f64[2*N] = reshape %a\n  %1: f64[2*N] = sin %0\n  %2: f64[N, 2] = reshape %1\n  %3: f64[N, 2] = mul %2 %b\n  %4: f64[2, N] = reshape %3\n  %5: f64[2, N] = mul %4 %4\n  %6: f64 = sum %5\n  ret %6\n}", -2.0, 2.0),
        Op::Sum => ("fn f[N](%a: f64[N]) -> f64 {\n  %0: f64 = sum %a\n  %1: f64 = mul %0 %0\n  ret %1\n}", -2.0, 2.0),
        Op::Bcast => ("fn f[N](%a: f64[N], %s: f64) -> f64 {\n  %0: f64[N] = bcast %s\n  %1: f64[N] = mul %0 %a\n  %2: f64[N] = sin %1\n  %3: f64 = sum %2\n  ret %3\n}", -2.0, 2.0),
        // Integers carry no derivative: the gradient flows around them.
        Op::Rem => ("fn f[N](%a: f64[N], %b: f64[N]) -> f64 {\n  %i: i64[N] = toi64 %a\n  %j: i64[N] = toi64 %b\n  %r: i64[N] = rem %i %j\n  %x: f64[N] = tof64 %r\n  %y: f64[N] = mul %x %a\n  %2: f64 = sum %y\n  ret %2\n}", 1.0, 4.0),
        Op::Convert(_) => ("fn f[N](%a: f64[N]) -> f64 {\n  %i: i64[N] = toi64 %a\n  %x: f64[N] = tof64 %i\n  %y: f64[N] = mul %x %a\n  %2: f64 = sum %y\n  ret %2\n}", -3.0, 3.0),
        // Rows picked by indices computed from `b` (in 0 ..= 3).
        Op::Gather(_) => ("fn f[N](%a: f64[4, 2], %b: f64[N]) -> f64 {\n  %k: i64[N] = toi64 %b\n  %0: f64[N, 2] = gather 0 %a %k\n  %1: f64[N, 2] = sin %0\n  %2: f64 = sum %1\n  ret %2\n}", 0.0, 3.9),
        Op::Scatter(_) => ("fn f[N](%a: f64[N, 2], %b: f64[N]) -> f64 {\n  %k: i64[N] = toi64 %b\n  %0: f64[4, 2] = scatter 0 %k %a\n  %1: f64[4, 2] = sin %0\n  %2: f64 = sum %1\n  ret %2\n}", 0.0, 3.9),
        // Random words from integers: no derivative either.
        Op::Threefry0 | Op::Threefry1 => ("fn f[N](%a: f64[N]) -> f64 {\n  %i: i64[N] = toi64 %a\n  %w: i64[N] = threefry0 %i %i %i %i\n  %v: i64[N] = threefry1 %w %i %w %i\n  %x: f64[N] = tof64 %v\n  %c: f64 = const 0.00000000023283064365386963\n  %cb: f64[N] = bcast %c\n  %s: f64[N] = mul %x %cb\n  %y: f64[N] = mul %s %a\n  %2: f64 = sum %y\n  ret %2\n}", 1.0, 4.0),
        // Element i weighted by i: the index carries no derivative.
        Op::Iota => ("fn f[N](%a: f64[N]) -> f64 {\n  %i: i64[N] = iota\n  %x: f64[N] = tof64 %i\n  %y: f64[N] = mul %x %a\n  %z: f64[N] = mul %y %a\n  %2: f64 = sum %z\n  ret %2\n}", -2.0, 2.0),
        // A size as a number: `x / N` (no derivative through `dim`).
        Op::Dim(_) => ("fn f[N](%a: f64[N]) -> f64 {\n  %n: i64 = dim 0 %a\n  %x: f64 = tof64 %n\n  %s: f64 = sum %a\n  %m: f64 = div %s %x\n  %y: f64 = mul %m %m\n  ret %y\n}", -2.0, 2.0),
        // `looptape` and `loopvjp` are what differentiating `loop` makes:
        // they are checked through its row.
        Op::Loop(..) | Op::LoopTape(..) | Op::LoopVjp(..) => (LOOP_ROW, -1.5, 1.5),
        // Differentiated with its rule (here the true derivative, so the
        // finite differences of the body agree).
        Op::Custom(..) => (CUSTOM_ROW, -3.0, 3.0),
        // A registered native kernel (`x³`) with its VJP.
        Op::Kernel(..) => (kernel_row(), -2.0, 2.0),
    }
}

fn cube(args: &[&[f64]], out: &mut [f64]) {
    for (o, x) in out.iter_mut().zip(args[0]) {
        *o = x * x * x;
    }
}

fn cube_vjp(args: &[&[f64]], out: &mut [f64]) {
    for ((o, x), g) in out.iter_mut().zip(args[0]).zip(args[1]) {
        *o = 3.0 * x * x * g;
    }
}

/// `sum(cube(a) * a)` where `cube` is a native kernel.
fn kernel_row() -> &'static str {
    static ROW: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ROW.get_or_init(|| {
        let id = egrad::register_kernel(egrad::Kernel {
            name: "row_cube".into(),
            arity: 1,
            shape: |a| Ok(a[0].clone()),
            forward: cube,
            vjp: vec![cube_vjp],
            flops: 2.0,
        })
        .unwrap();
        format!(
            "fn f[N](%a: f64[N]) -> f64 {{\n  %0: f64[N] = kernel {id} 1 %a\n  %1: f64[N] = mul %0 %a\n  %2: f64 = sum %1\n  ret %2\n}}"
        )
    })
}

fn assert_close(got: &[Value], want: &[Value], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (g, w) in got.iter().zip(want) {
        assert_eq!(g.shape, w.shape, "{what}");
        for (a, b) in g.data.iter().zip(&w.data) {
            let tol = 1e-5 * (1.0 + b.abs());
            assert!(
                (a - b).abs() <= tol,
                "{what}: gradient {a} vs finite differences {b}\n{g:?}\n{w:?}"
            );
        }
    }
}

fn inputs(f: &Function, n: usize, lo: f64, hi: f64, seed: &[f64]) -> Vec<Value> {
    // A function that truncates its inputs to integers (`toi64`) is not
    // differentiable at an integer: its float inputs stay 0.1 away from
    // one, so the finite differences' steps (1e-6 relative) never cross
    // one (an input drawn at 1.0 failed with a jump of 10^5).
    let truncates = f.stmts.iter().any(|s| s.op == Op::Convert(DType::I64));
    let mut k = 0;
    let mut next = || {
        let u = seed[k % seed.len()];
        k += 1;
        let v = lo + (hi - lo) * u;
        if truncates {
            v.floor() + 0.1 + 0.8 * (v - v.floor())
        } else {
            v
        }
    };
    f.params
        .iter()
        .map(|p| {
            let t = f.ty(p.var);
            if t.dtype == DType::I64 && t.rank() == 0 {
                // A run-time loop count.
                return Value::scalar(t.dtype, 25.0);
            }
            // Sizes such as `N+1` or `2*N` at `N` = n.
            let shape: Vec<usize> = t
                .shape
                .iter()
                .map(|d| d.extent(&|_| Some(n as u64)).expect("a parameter's size") as usize)
                .collect();
            let len = shape.iter().product();
            // Integer arrays (codes, as `match` takes): -1 to 3.
            let int = |u: f64| (u * 5.0).floor().min(4.0) - 1.0;
            let data = (0..len)
                .map(|_| match t.dtype {
                    DType::I64 => int((next() - lo) / (hi - lo)),
                    _ => next(),
                })
                .collect();
            Value::array(t.dtype, shape, data)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_op_derivative_matches_finite_differences(
        n in 1usize..6,
        seed in prop::collection::vec(0.0f64..1.0, 16),
    ) {
        let mut ops: Vec<Op> = ALL_OPS.to_vec();
        ops.push(Op::Const(egrad::internals::ops::Lit::new(DType::F64, 3.0)));
        ops.push(Op::Loop(0, false));
        ops.push(Op::Custom(0, 1));
        ops.push(Op::Kernel(0, 1));
        for op in ops {
            let (text, lo, hi) = row(op);
            let f = &parse_functions(text).unwrap()[0];
            prop_assert!(f.stmts.iter().any(|s| std::mem::discriminant(&s.op) == std::mem::discriminant(&op)));
            let wrt: Vec<usize> = (0..f.params.len()).collect();
            // A function without a derivative yet (`tetragamma`) is refused
            // in both modes.
            if !op.differentiable() {
                prop_assert!(reverse(f, &wrt).is_err() && jvp(f, &wrt, "j").is_err());
                continue;
            }
            let r = reverse(f, &wrt).unwrap();
            let args = inputs(f, n, lo, hi, &seed);
            let refs: Vec<&Value> = args.iter().collect();
            let got = run(&r.gradient("g"), &refs).unwrap();
            let want = finite_differences(f, &args, &wrt);
            assert_close(&got, &want, &format!("op {}", op.name()));
            // Forward mode agrees with reverse mode: <grad, v> = jvp(v) for a
            // random direction v (the inner-product identity with u = 1).
            // (A native kernel has no forward mode: a documented error.)
            if let Op::Kernel(..) = op {
                prop_assert!(jvp(f, &wrt, "j").is_err());
                continue;
            }
            let dirs = inputs(f, n, -1.0, 1.0, &seed[3..]);
            let j = jvp(f, &wrt, "j").unwrap();
            let mut jargs = refs.clone();
            jargs.extend(dirs.iter());
            let tangent = run(&j, &jargs).unwrap()[0].as_scalar();
            let dot: f64 = got
                .iter()
                .zip(&dirs)
                .flat_map(|(g, v)| g.data.iter().zip(&v.data).map(|(a, b)| a * b))
                .sum();
            prop_assert!(
                (tangent - dot).abs() <= 1e-9 * (1.0 + dot.abs()),
                "op {}: jvp {tangent} vs <grad, v> {dot}",
                op.name()
            );
        }
    }
}

#[test]
fn every_example_gradient_matches_finite_differences() {
    let files = common::example_files();
    let mut checked = 0;
    for path in files {
        let p = Program::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
        for name in p.function_names() {
            let Some(spec) = p.grad_spec(name) else {
                continue;
            };
            let primal = spec.primal.with_dtype(DType::F64);
            let r = reverse(&primal, &spec.wrt).unwrap();
            let grad = r.gradient(name);
            let optimized = optimize_ir(&grad, &Options::default()).unwrap().after;
            for (t, seed) in [
                (0.3, [0.1, 0.7, 0.35, 0.9, 0.55]),
                (0.8, [0.6, 0.2, 0.85, 0.4, 0.05]),
            ] {
                let args = inputs(&primal, 4, -t, t, &seed);
                let refs: Vec<&Value> = args.iter().collect();
                let want = finite_differences(&primal, &args, &spec.wrt);
                let got = run(&grad, &refs).unwrap();
                assert_close(&got, &want, &format!("{}: {name} (AD)", path.display()));
                let got = run(&optimized, &refs).unwrap();
                assert_close(
                    &got,
                    &want,
                    &format!("{}: {name} (optimized)", path.display()),
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 10, "only {checked} gradient checks ran");
}

/// Ties of `max/` and `min/` (whole arrays and rows): the elements equal
/// to the extremum share its cotangent, so where they are all one value
/// the derivative is that value's. Each tied element got the whole
/// cotangent before, which counted a tie of k elements k times (found by
/// the fuzzer's finite differences: `max/(tanh(y) + 0 * x)`).
#[test]
fn ties_of_an_extremum_share_its_derivative() {
    let src = "fn whole[N](x: f64[N], y: f64) -> f64 = max/(tanh(y) + 0 * x) * min/(y * y + 0 * x)
fn rows[N](x: f64[N], y: f64) -> f64 = +/tabulate[N](i => max/(x * 0 + y * y * x[i]))
@grad(x, y)
fn dwhole[N](x: f64[N], y: f64) -> (f64[N], f64) = whole(x, y)
@grad(x, y)
fn drows[N](x: f64[N], y: f64) -> (f64[N], f64) = rows(x, y)
@jvp(y)
fn jwhole[N](x: f64[N], y: f64, dy: f64) -> f64 = whole(x, y)
@jvp(y)
fn jrows[N](x: f64[N], y: f64, dy: f64) -> f64 = rows(x, y)
";
    let p = Program::parse(src).unwrap_or_else(|e| panic!("{e}"));
    let x = Value::array(DType::F64, vec![3], vec![1.0, 2.0, 3.0]);
    let y = Value::scalar(DType::F64, 0.5);
    for (f, grad, jv) in [("whole", "dwhole", "jwhole"), ("rows", "drows", "jrows")] {
        let args = [x.clone(), y.clone()];
        let want = finite_differences(p.ir(f).unwrap(), &args, &[0, 1]);
        let refs: Vec<&Value> = args.iter().collect();
        let got = run(p.ir(grad).unwrap(), &refs).unwrap();
        assert_close(&got, &want, grad);
        let dy = Value::scalar(DType::F64, 1.0);
        let jrefs = [&x, &y, &dy];
        let t = run(p.ir(jv).unwrap(), &jrefs).unwrap();
        assert_close(&t, &want[1..], jv);
    }
}
