//! The native backend on counted loops (`loop`, `looptape`, `loopvjp`)
//! against the reference interpreter: results must be bit-for-bit
//! identical, for every count, checkpoint interval and recompute mode.

use egrad::internals::backend::{
    clif_text, compile, compile_keeping, BackendOptions, CompiledFunction,
};
use egrad::internals::ir::interp;
use egrad::internals::ir::{parse_functions, Function, VarId};
use egrad::internals::types::value::Value;
use egrad::internals::types::DType;

const OPTS: BackendOptions = BackendOptions {
    verify: true,
    simd: true,
    gemm: false,
    wide: true,
};
const DTYPES: [DType; 2] = [DType::F32, DType::F64];

fn dname(d: DType) -> &'static str {
    d.name()
}

/// Parse `text` with each `{key}` replaced by its value.
fn program(text: &str, subst: &[(&str, String)]) -> Function {
    let mut t = text.to_string();
    for (k, v) in subst {
        t = t.replace(&format!("{{{k}}}"), v);
    }
    let fs = parse_functions(&t).unwrap_or_else(|e| panic!("{e}\n{t}"));
    assert_eq!(fs.len(), 1);
    fs.into_iter().next().unwrap()
}

/// Deterministic values in (-0.9, 0.9).
fn sample(dtype: DType, shape: &[usize], seed: usize) -> Value {
    let n: usize = shape.iter().product();
    let data = (0..n)
        .map(|i| dtype.round(((i * 7 + seed * 13 + 1) as f64 * 0.37).sin() * 0.9))
        .collect();
    Value::array(dtype, shape.to_vec(), data)
}

/// Run `f` natively and in the interpreter; every output bit for bit.
fn same(native: &CompiledFunction, f: &Function, args: &[&Value], what: &str) {
    let want = interp::run(f, args).unwrap_or_else(|e| panic!("{what}: interpreter: {e}"));
    let got = native
        .call(args)
        .unwrap_or_else(|e| panic!("{what}: JIT: {e}"));
    assert_eq!(got.len(), want.len(), "{what}: number of outputs");
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            g.bits_eq(w),
            "{what}: output {k} differs\n  JIT:    {:?} {:?}\n  interp: {:?} {:?}",
            g.shape,
            g.data,
            w.shape,
            w.data
        );
    }
}

fn check(f: &Function, args: &[&Value], what: &str) {
    let native = compile(f, &OPTS).unwrap_or_else(|e| panic!("{what}: compile: {e}\n{f}"));
    same(&native, f, args, what);
}

/// A scalar state; its initial value a parameter, a computed scalar, and
/// a constant.
const SCALAR: &str = "fn scal(%x: {T}) -> ({T}, {T}, {T}, {T}) {
  loop 0 x{C} {
    fn scal.body(%s: {T}) -> {T} {
      %0: {T} = const 0.5
      %1: {T} = mul %s %0
      %2: {T} = sin %1
      %3: {T} = add %2 %0
      ret %3
    }
  }
  %y: {T} = loop 0 %x
  %x2: {T} = mul %x %x
  %y2: {T} = loop 0 %x2
  %k: {T} = const -0.25
  %y3: {T} = loop 0 %k
  %z: {T} = add %y %y2
  ret %y, %y2, %y3, %z
}";

#[test]
fn scalar_state() {
    for dtype in DTYPES {
        for count in [0u64, 1, 2, 3, 1000] {
            let f = program(
                SCALAR,
                &[("T", dname(dtype).into()), ("C", count.to_string())],
            );
            let x = Value::scalar(dtype, 0.3);
            check(&f, &[&x], &format!("scalar {} x{count}", dname(dtype)));
        }
    }
}

/// A vector state over `N`, with a reduction in the body; its tape every
/// `K` steps; the VJP in both modes, from a tape and cotangent in buffers,
/// computed inline, splat, or a zero tape. Also the loop of an inline and
/// of a splat initial state.
const VECTOR: &str = "fn vec[N](%x: {T}[N], %c: {T}[N], %a: {T}) -> ({T}[N], {T}[{R}, N], {T}[N], {T}[N], {T}[N], {T}[N], {T}[N], {T}[N], {T}[N], {T}[N], {T}) {
  loop 0 x{C} {
    fn vec.body[N](%s: {T}[N]) -> {T}[N] {
      %0: {T} = const 0.9
      %1: {T}[N] = bcast %0
      %2: {T}[N] = mul %s %1
      %3: {T}[N] = sin %2
      %4: {T} = sum %3
      %5: {T} = const 0.01
      %6: {T} = mul %4 %5
      %7: {T}[N] = bcast %6
      %8: {T}[N] = add %3 %7
      ret %8
    }
    fn vec.vjp[N](%s: {T}[N], %g: {T}[N]) -> {T}[N] {
      %0: {T} = const 0.9
      %1: {T}[N] = bcast %0
      %2: {T}[N] = mul %s %1
      %3: {T}[N] = cos %2
      %4: {T} = sum %g
      %5: {T} = const 0.01
      %6: {T} = mul %4 %5
      %7: {T}[N] = bcast %6
      %8: {T}[N] = add %g %7
      %9: {T}[N] = mul %8 %3
      %10: {T}[N] = mul %9 %1
      ret %10
    }
  }
  %y: {T}[N] = loop 0 %x
  %t: {T}[{R}, N] = looptape 0 {K} %x
  %g0: {T}[N] = loopvjp 0 {K} 0 %t %c
  %g1: {T}[N] = loopvjp 0 {K} 1 %t %c
  %cc: {T}[N] = mul %c %c
  %g2: {T}[N] = loopvjp 0 {K} 0 %t %cc
  %ab: {T}[N] = bcast %a
  %g3: {T}[N] = loopvjp 0 {K} 1 %t %ab
  %tz: {T}[{R}, N] = zero
  %g4: {T}[N] = loopvjp 0 {K} 0 %tz %c
  %xx: {T}[N] = sin %x
  %y2: {T}[N] = loop 0 %xx
  %y3: {T}[N] = loop 0 %ab
  %s: {T} = sum %y
  ret %y, %t, %g0, %g1, %g2, %g3, %g4, %y2, %y3, %y, %s
}";

fn vector(dtype: DType, count: u64, k: u64) -> Function {
    let rows = count.div_ceil(k) + 1;
    program(
        VECTOR,
        &[
            ("T", dname(dtype).into()),
            ("C", count.to_string()),
            ("K", k.to_string()),
            ("R", rows.to_string()),
        ],
    )
}

#[test]
fn vector_state_tapes_and_vjps() {
    for dtype in DTYPES {
        for count in [0u64, 1, 2, 5, 7] {
            for k in [1u64, 2, 3, 4, 8] {
                let f = vector(dtype, count, k);
                let native = compile(&f, &OPTS).unwrap_or_else(|e| panic!("compile: {e}"));
                for n in [0usize, 1, 3, 17] {
                    let x = sample(dtype, &[n], 0);
                    let c = sample(dtype, &[n], 1);
                    let a = Value::scalar(dtype, -0.4);
                    let what = format!("vector {} x{count} k={k} N={n}", dname(dtype));
                    same(&native, &f, &[&x, &c, &a], &what);
                }
            }
        }
    }
}

/// The same program with a run-time count `n` (an `i64` argument): one
/// compiled function serves every count; the tape has `ceil(n/k)+1` rows.
#[test]
fn run_time_counts() {
    let text = VECTOR
        .replace("fn vec[N](%x:", "fn vec[N, n](%n: i64, %x:")
        .replace("loop 0 x{C}", "loop 0 xn")
        .replace("{R}", "ceil(n/{K})+1")
        .replace("fn vec.body[N](", "fn vec.body[N, n](")
        .replace("fn vec.vjp[N](", "fn vec.vjp[N, n](");
    for dtype in DTYPES {
        for k in [1u64, 2, 3, 8] {
            let f = program(&text, &[("T", dname(dtype).into()), ("K", k.to_string())]);
            let native = compile(&f, &OPTS).unwrap_or_else(|e| panic!("compile: {e}"));
            for count in [0u64, 1, 2, 5, 7, 33] {
                for n in [1usize, 3] {
                    let steps = Value::scalar(DType::I64, count as f64);
                    let x = sample(dtype, &[n], 0);
                    let c = sample(dtype, &[n], 1);
                    let a = Value::scalar(dtype, -0.4);
                    let what = format!("vector {} xn={count} k={k} N={n}", dname(dtype));
                    same(&native, &f, &[&steps, &x, &c, &a], &what);
                }
            }
        }
    }
}

/// A loop that settles (`loop 0 xC settles`): its body reaches a fixed
/// point (`min(s + 1, 3)`) after a few steps, so `loop` stops there,
/// `looptape` fills the rest of its tape, and both VJP modes pass the
/// cotangent unchanged over the steps that changed nothing (the VJP reads
/// the state, so a step wrongly passed or taken changes the result). Static
/// and run-time counts, every checkpoint spacing: native equals the
/// interpreter.
#[test]
fn settling_loops_stop_and_their_vjps_pass_settled_steps() {
    let body = "      %0: {T} = const 0.9
      %1: {T}[N] = bcast %0
      %2: {T}[N] = mul %s %1
      %3: {T}[N] = sin %2
      %4: {T} = sum %3
      %5: {T} = const 0.01
      %6: {T} = mul %4 %5
      %7: {T}[N] = bcast %6
      %8: {T}[N] = add %3 %7
      ret %8";
    let settling = "      %0: {T} = const 1
      %1: {T}[N] = bcast %0
      %2: {T}[N] = add %s %1
      %3: {T} = const 3
      %4: {T}[N] = bcast %3
      %5: {T}[N] = min %2 %4
      ret %5";
    assert!(VECTOR.contains(body));
    // Also seeded by a whole tape's cotangent (`VJP_TAPE`, both modes):
    // the rows after the stop each add theirs.
    let sig = "{T}[N], {T}[N], {T}[N], {T}) {";
    let ret = "ret %y, %t, %g0, %g1, %g2, %g3, %g4, %y2, %y3, %y, %s";
    assert!(VECTOR.contains(sig) && VECTOR.contains(ret));
    let text = VECTOR
        .replacen(body, settling, 1)
        .replace("loop 0 x{C} {", "loop 0 x{C} settles {")
        .replacen(sig, "{T}[N], {T}[N], {T}[N], {T}, {T}[N], {T}[N]) {", 1)
        .replace(
            ret,
            "%tt: {T}[{R}, N] = sin %t
  %g5: {T}[N] = loopvjp 0 {K} 4 %t %tt
  %g6: {T}[N] = loopvjp 0 {K} 5 %t %tt
  ret %y, %t, %g0, %g1, %g2, %g3, %g4, %y2, %y3, %y, %s, %g5, %g6",
        );
    assert!(text.contains("settles") && text.contains("%g6"));
    let runtime = text
        .replace("fn vec[N](%x:", "fn vec[N, n](%n: i64, %x:")
        .replace("loop 0 x{C}", "loop 0 xn")
        .replace("{R}", "ceil(n/{K})+1")
        .replace("fn vec.body[N](", "fn vec.body[N, n](")
        .replace("fn vec.vjp[N](", "fn vec.vjp[N, n](");
    for dtype in DTYPES {
        for k in [1u64, 2, 3, 4, 8] {
            for count in [0u64, 1, 2, 5, 7, 12] {
                let rows = count.div_ceil(k) + 1;
                let f = program(
                    &text,
                    &[
                        ("T", dname(dtype).into()),
                        ("C", count.to_string()),
                        ("K", k.to_string()),
                        ("R", rows.to_string()),
                    ],
                );
                let native = compile(&f, &OPTS).unwrap_or_else(|e| panic!("compile: {e}"));
                for n in [0usize, 1, 3, 17] {
                    let x = sample(dtype, &[n], 0);
                    let c = sample(dtype, &[n], 1);
                    let a = Value::scalar(dtype, -0.4);
                    let what = format!("settling {} x{count} k={k} N={n}", dname(dtype));
                    same(&native, &f, &[&x, &c, &a], &what);
                }
            }
            let f = program(
                &runtime,
                &[("T", dname(dtype).into()), ("K", k.to_string())],
            );
            let native = compile(&f, &OPTS).unwrap_or_else(|e| panic!("compile: {e}"));
            let x = sample(dtype, &[3], 0);
            let c = sample(dtype, &[3], 1);
            let a = Value::scalar(dtype, 2.5);
            for count in [0u64, 1, 2, 7, 33, 1000] {
                let steps = Value::scalar(DType::I64, count as f64);
                let what = format!("settling {} xn={count} k={k}", dname(dtype));
                same(&native, &f, &[&steps, &x, &c, &a], &what);
            }
            // Every element reaches 3 within 5 steps: the state, and the
            // VJPs over the steps taken, are the same for 7 and 1,000.
            let at = |count: u64| {
                let steps = Value::scalar(DType::I64, count as f64);
                interp::run(&f, &[&steps, &x, &c, &a]).unwrap()
            };
            let (short, long) = (at(7), at(1000));
            for i in [0, 2, 3] {
                assert!(
                    short[i].bits_eq(&long[i]),
                    "output {i}: {:?} vs {:?}",
                    short[i],
                    long[i]
                );
            }
            assert!(!at(2)[2].bits_eq(&short[2]), "the steps taken count");
        }
    }
}

#[test]
fn a_thousand_steps() {
    for dtype in DTYPES {
        for k in [1u64, 3, 32] {
            let f = vector(dtype, 1000, k);
            let x = sample(dtype, &[3], 0);
            let c = sample(dtype, &[3], 1);
            let a = Value::scalar(dtype, 0.2);
            check(
                &f,
                &[&x, &c, &a],
                &format!("vector {} x1000 k={k}", dname(dtype)),
            );
        }
    }
}

/// A scalar state's tape (`T[R]`) and VJP (a scalar result), with the
/// cotangent a parameter and a computed scalar.
const SCALAR_VJP: &str = "fn sv(%x: {T}, %c: {T}) -> ({T}[{R}], {T}, {T}, {T}) {
  loop 0 x{C} {
    fn sv.body(%s: {T}) -> {T} {
      %0: {T} = tanh %s
      %1: {T} = const 1.5
      %2: {T} = mul %0 %1
      ret %2
    }
    fn sv.vjp(%s: {T}, %g: {T}) -> {T} {
      %0: {T} = tanh %s
      %1: {T} = mul %0 %0
      %2: {T} = const 1
      %3: {T} = sub %2 %1
      %4: {T} = const 1.5
      %5: {T} = mul %3 %4
      %6: {T} = mul %g %5
      ret %6
    }
  }
  %t: {T}[{R}] = looptape 0 {K} %x
  %g0: {T} = loopvjp 0 {K} 0 %t %c
  %cc: {T} = mul %c %x
  %g1: {T} = loopvjp 0 {K} 1 %t %cc
  %s: {T} = add %g0 %g1
  ret %t, %g0, %g1, %s
}";

#[test]
fn scalar_tapes_and_vjps() {
    for dtype in DTYPES {
        for count in [0u64, 1, 4, 10] {
            for k in [1u64, 2, 3] {
                let f = program(
                    SCALAR_VJP,
                    &[
                        ("T", dname(dtype).into()),
                        ("C", count.to_string()),
                        ("K", k.to_string()),
                        ("R", (count.div_ceil(k) + 1).to_string()),
                    ],
                );
                let x = Value::scalar(dtype, 0.7);
                let c = Value::scalar(dtype, -1.3);
                check(
                    &f,
                    &[&x, &c],
                    &format!("scalar vjp {} x{count} k={k}", dname(dtype)),
                );
            }
        }
    }
}

/// Three levels of loops: the outer body has a matmul, a transpose, a
/// reduction of a matrix and a nested loop whose body has a loop of its
/// own. The state is a matrix `[N, 3]`.
const NESTED: &str = "fn nest[N](%x: {T}[N, 3], %c: {T}[N, 3]) -> ({T}[N, 3], {T}[{R}, N, 3], {T}[N, 3], {T}[N, 3], {T}) {
  loop 0 x{C} {
    fn nest.body[N](%s: {T}[N, 3]) -> {T}[N, 3] {
      loop 0 x3 {
        fn nest.inner[N](%u: {T}[N, 3]) -> {T}[N, 3] {
          loop 0 x2 {
            fn nest.innermost[N](%w: {T}[N, 3]) -> {T}[N, 3] {
              %0: {T} = const 0.7
              %1: {T}[N, 3] = bcast %0
              %2: {T}[N, 3] = mul %w %1
              %3: {T}[N, 3] = cos %2
              ret %3
            }
          }
          %0: {T}[N, 3] = loop 0 %u
          %1: {T}[N, 3] = add %0 %u
          %2: {T} = const 0.5
          %3: {T}[N, 3] = bcast %2
          %4: {T}[N, 3] = mul %1 %3
          ret %4
        }
      }
      %0: {T}[3, N] = transpose %s
      %1: {T}[3, 3] = matmul %0 %s
      %2: {T} = sum %1
      %3: {T} = const 0.1
      %4: {T} = mul %2 %3
      %5: {T}[N, 3] = matmul %s %1
      %6: {T}[N, 3] = tanh %5
      %7: {T}[N, 3] = loop 0 %6
      %8: {T}[N, 3] = bcast %4
      %9: {T}[N, 3] = add %7 %8
      %10: {T}[N] = sumtail %9
      %11: {T}[N, 3] = spread %10
      %12: {T}[N, 3] = sub %9 %11
      ret %12
    }
    fn nest.vjp[N](%s: {T}[N, 3], %g: {T}[N, 3]) -> {T}[N, 3] {
      loop 0 x5 {
        fn nest.vjp.body[N](%u: {T}[N, 3]) -> {T}[N, 3] {
          %0: {T}[N, 3] = sin %u
          ret %0
        }
        fn nest.vjp.vjp[N](%u: {T}[N, 3], %h: {T}[N, 3]) -> {T}[N, 3] {
          %0: {T}[N, 3] = cos %u
          %1: {T}[N, 3] = mul %h %0
          ret %1
        }
      }
      %t: {T}[4, N, 3] = looptape 0 2 %s
      %0: {T}[N, 3] = loopvjp 0 2 1 %t %g
      %1: {T}[N, 3] = loop 0 %g
      %2: {T}[N, 3] = mul %0 %1
      ret %2
    }
  }
  %y: {T}[N, 3] = loop 0 %x
  %t: {T}[{R}, N, 3] = looptape 0 {K} %x
  %g0: {T}[N, 3] = loopvjp 0 {K} 0 %t %c
  %g1: {T}[N, 3] = loopvjp 0 {K} 1 %t %c
  %s: {T} = sum %y
  ret %y, %t, %g0, %g1, %s
}";

#[test]
fn nested_loops_matmul_and_reductions_in_bodies() {
    for dtype in DTYPES {
        for (count, k) in [(0u64, 1u64), (1, 1), (4, 3), (5, 2), (6, 4)] {
            let f = program(
                NESTED,
                &[
                    ("T", dname(dtype).into()),
                    ("C", count.to_string()),
                    ("K", k.to_string()),
                    ("R", (count.div_ceil(k) + 1).to_string()),
                ],
            );
            let native = compile(&f, &OPTS).unwrap_or_else(|e| panic!("compile: {e}"));
            for n in [1usize, 3, 17] {
                let x = sample(dtype, &[n, 3], 0);
                let c = sample(dtype, &[n, 3], 1);
                let what = format!("nested {} x{count} k={k} N={n}", dname(dtype));
                same(&native, &f, &[&x, &c], &what);
            }
        }
    }
}

/// The loop result returned twice, used by a reduction and an element-wise
/// op, beside a returned parameter and a scalar; two loops in one function.
const MULTI: &str =
    "fn multi[N](%x: {T}[N], %a: {T}) -> ({T}[N], {T}, {T}[N], {T}[N], {T}, {T}[N]) {
  loop 0 x5 {
    fn multi.body[N](%s: {T}[N]) -> {T}[N] {
      %0: {T}[N] = sin %s
      %1: {T}[N] = add %0 %s
      %2: {T}[N] = mul %1 %0
      ret %2
    }
  }
  loop 1 x3 {
    fn multi.body2[N](%s: {T}[N]) -> {T}[N] {
      ret %s
    }
  }
  %y: {T}[N] = loop 0 %x
  %s: {T} = sum %y
  %ab: {T}[N] = bcast %a
  %z: {T}[N] = mul %y %ab
  %w: {T}[N] = loop 1 %z
  ret %y, %s, %z, %y, %a, %w
}";

#[test]
fn loop_results_beside_other_values() {
    for dtype in DTYPES {
        let f = program(MULTI, &[("T", dname(dtype).into())]);
        let native = compile(&f, &OPTS).unwrap();
        for n in [1usize, 3, 17] {
            let x = sample(dtype, &[n], 2);
            let a = Value::scalar(dtype, 0.6);
            same(
                &native,
                &f,
                &[&x, &a],
                &format!("multi {} N={n}", dname(dtype)),
            );
        }
        // Keeping values in memory does not change a bit.
        let keep: Vec<VarId> = (0..f.vars.len() as u32).map(VarId).collect();
        let kept = compile_keeping(&f, &OPTS, &keep).unwrap();
        let x = sample(dtype, &[17], 2);
        let a = Value::scalar(dtype, 0.6);
        same(&kept, &f, &[&x, &a], "multi kept");
    }
}

/// A body and VJP fused into their output loops (no scratch of their own).
const SCRATCH: &str = "fn sb[N](%x: f64[N], %c: f64[N]) -> f64[N] {
  loop 0 x{C} {
    fn sb.body[N](%s: f64[N]) -> f64[N] {
      %0: f64[N] = sin %s
      ret %0
    }
    fn sb.vjp[N](%s: f64[N], %g: f64[N]) -> f64[N] {
      %0: f64[N] = cos %s
      %1: f64[N] = mul %g %0
      ret %1
    }
  }
{STMTS}
}";

/// Odd shapes of bodies and results: a scalar loop result used but not
/// returned, a body returning a broadcast, a state of computed size `N-1`
/// from a slice, a body whose result is its own inner loop's.
const ODD: &str = "fn odd[N](%x: {T}[N], %a: {T}) -> ({T}, {T}[N-1], {T}[N]) {
  loop 0 x4 {
    fn odd.scalar[N](%s: {T}) -> {T} {
      %0: {T} = cos %s
      ret %0
    }
  }
  loop 1 x3 {
    fn odd.tail[N](%s: {T}[N-1]) -> {T}[N-1] {
      loop 0 x2 {
        fn odd.tail.inner[N](%u: {T}[N-1]) -> {T}[N-1] {
          %0: {T}[N-1] = sin %u
          ret %0
        }
      }
      %0: {T}[N-1] = exp %s
      %1: {T}[N-1] = loop 0 %0
      ret %1
    }
  }
  loop 2 x3 {
    fn odd.splat[N](%s: {T}[N]) -> {T}[N] {
      %0: {T} = sum %s
      %1: {T} = const 0.3
      %2: {T} = mul %0 %1
      %3: {T}[N] = bcast %2
      ret %3
    }
  }
  %y: {T} = loop 0 %a
  %z: {T} = mul %y %y
  %t: {T}[N-1] = slice 1 %x
  %w: {T}[N-1] = loop 1 %t
  %v: {T}[N] = loop 2 %x
  ret %z, %w, %v
}";

#[test]
fn odd_bodies_and_results() {
    for dtype in DTYPES {
        let f = program(ODD, &[("T", dname(dtype).into())]);
        let native = compile(&f, &OPTS).unwrap();
        for n in [1usize, 2, 17] {
            let x = sample(dtype, &[n], 3);
            let a = Value::scalar(dtype, 0.45);
            same(
                &native,
                &f,
                &[&x, &a],
                &format!("odd {} N={n}", dname(dtype)),
            );
        }
    }
}

/// Intermediate buffers: a loop of a parameter state alternates between its
/// result and one state buffer; a tape between checkpoints between two;
/// `loopvjp` keeps the cotangent's second buffer and, in mode 0,
/// `min(k, count) - 1` states (mode 1: two); a body's own scratch counts.
#[test]
fn scratch_bytes_count_loop_buffers() {
    let bytes = |count: u64, k: u64, stmts: &str| -> usize {
        let f = program(
            SCRATCH,
            &[
                ("STMTS", stmts.into()),
                ("C", count.to_string()),
                ("K", k.to_string()),
                ("R", (count.div_ceil(k) + 1).to_string()),
            ],
        );
        let native = compile(&f, &OPTS).unwrap();
        let x = sample(DType::F64, &[17], 0);
        let c = sample(DType::F64, &[17], 1);
        let mut p = native.prepare(&[&x, &c]).unwrap();
        p.run().unwrap();
        p.scratch_bytes()
    };
    let state = 17 * 8;
    let lp = "  %y: f64[N] = loop 0 %x\n  ret %y";
    // One step reads the parameter and writes the result.
    assert_eq!(bytes(0, 1, lp), 0);
    assert_eq!(bytes(1, 1, lp), 0);
    assert_eq!(bytes(2, 1, lp), state);
    assert_eq!(bytes(1000, 1, lp), state);
    let vjp = |m: u32| {
        format!(
            "  %t: f64[{{R}}, N] = looptape 0 {{K}} %x\n  %g: f64[N] = loopvjp 0 {{K}} {m} %t %c\n  ret %g"
        )
    };
    // k = 1: the tape (8 rows) and the cotangent's second buffer.
    assert_eq!(bytes(7, 1, &vjp(0)), 8 * state + state);
    assert_eq!(bytes(7, 1, &vjp(1)), 8 * state + state);
    // k = 4: a tape of 3 rows with two state buffers, the cotangent's
    // second buffer, and 3 recomputed states (mode 0) or two (mode 1).
    assert_eq!(
        bytes(7, 4, &vjp(0)),
        3 * state + 2 * state + state + 3 * state
    );
    assert_eq!(
        bytes(7, 4, &vjp(1)),
        3 * state + 2 * state + state + 2 * state
    );
    // A body with scratch of its own: `%0` is used twice and costs more
    // than recomputing.
    let f = vector(DType::F64, 2, 1);
    let native = compile(&f, &OPTS).unwrap();
    let x = sample(DType::F64, &[17], 0);
    let a = Value::scalar(DType::F64, 0.1);
    let with_body = native.prepare(&[&x, &x, &a]).unwrap().scratch_bytes();
    assert!(with_body > 0);
}

/// Sizes that make a loop body's arrays negative are refused before any
/// native code runs.
#[test]
fn loop_body_sizes_are_checked() {
    let f = program(
        "fn short[N](%x: f64[N]) -> f64[N] {
  loop 0 x2 {
    fn short.body[N](%s: f64[N]) -> f64[N] {
      %0: f64[N-1] = slice 1 %s
      %1: f64[N] = pad 1 %0
      ret %1
    }
  }
  %y: f64[N] = loop 0 %x
  ret %y
}",
        &[],
    );
    let native = compile(&f, &OPTS).unwrap();
    let x = sample(DType::F64, &[4], 0);
    same(&native, &f, &[&x], "short N=4");
    let empty = Value::array(DType::F64, vec![0], vec![]);
    let e = native.call(&[&empty]).unwrap_err();
    assert!(e.message.contains("short.body"), "{e}");
}

#[test]
fn clif_lists_loop_functions() {
    let f = vector(DType::F64, 3, 2);
    let text = clif_text(&f).unwrap();
    // The entry, the body and the VJP (each with the entry's ABI; the
    // vector math kernels they call are functions of the module too).
    let abi = text
        .lines()
        .filter(|l| l.starts_with("function ") && l.ends_with("(i64, i64) system_v {"))
        .count();
    assert_eq!(abi, 3, "{text}");
    assert!(text.contains("call fn"), "{text}");
}

/// Not a test: how long a 1000-step scalar loop takes natively and in the
/// interpreter (`cargo test --release --test loops_backend -- --ignored
/// --nocapture`).
#[test]
#[ignore]
fn time_a_thousand_step_scalar_loop() {
    let f = program(SCALAR, &[("T", "f64".into()), ("C", "1000".into())]);
    let x = Value::scalar(DType::F64, 0.3);
    let native = compile(&f, &BackendOptions::default()).unwrap();
    let mut p = native.prepare(&[&x]).unwrap();
    let reps = 2000;
    let t = std::time::Instant::now();
    for _ in 0..reps {
        p.run().unwrap();
    }
    let jit = t.elapsed().as_secs_f64() / reps as f64 / 3.0;
    let reps = 20;
    let t = std::time::Instant::now();
    for _ in 0..reps {
        interp::run(&f, &[&x]).unwrap();
    }
    let int = t.elapsed().as_secs_f64() / reps as f64 / 3.0;
    println!(
        "1000-step scalar loop: JIT {:.2} µs, interpreter {:.1} µs ({:.0}x)",
        jit * 1e6,
        int * 1e6,
        int / jit
    );
}
