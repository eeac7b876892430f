//! The language's constructs end to end: static parameters and partial
//! evaluation, `iterate`, static and dynamic `if`, comparisons and logic,
//! and their errors. Results through the JIT must equal the interpreter's.

mod common;

use common::{err, prog};
use egrad::internals::backend::{compile, BackendOptions};
use egrad::internals::ir::interp::run;
use egrad::internals::types::value::Value;
use egrad::internals::types::DType;
use egrad::Program;

/// Run `f` through the interpreter and the JIT; they must agree bit for bit.
fn run_both(p: &Program, f: &str, args: &[Value]) -> Vec<Value> {
    let ir = p.ir(f).unwrap_or_else(|e| panic!("{e}"));
    let refs: Vec<&Value> = args.iter().collect();
    let want = run(ir, &refs).unwrap();
    let got = compile(ir, &BackendOptions::verified())
        .unwrap()
        .call(&refs)
        .unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert!(g.bits_eq(w), "{f}: jit {g:?} vs interpreter {w:?}");
    }
    want
}

/// Each program is rejected with a caret and every expected phrase.
fn expect_errors(cases: &[(&str, &[&str])]) {
    for (src, wants) in cases {
        let e = err(src);
        assert!(e.contains('^'), "no caret:\n{e}");
        for w in *wants {
            assert!(e.contains(w), "expected `{w}` in:\n{e}\nfor:\n{src}");
        }
    }
}

fn s64(x: f64) -> Value {
    Value::scalar(DType::F64, x)
}

#[test]
fn static_parameters_unroll_iterate() {
    let p = prog(
        "fn power[N](static n: i64, x: f64[N]) -> f64 = +/iterate(n, 1, p => p .* x)
         fn p5[N](x: f64[N]) -> f64 = power(5, x)
         fn p1[N](x: f64[N]) -> f64 = power(2 * 3 - 5, x)
         @grad(x)
         fn dp5[N](x: f64[N]) -> f64[N] = power(5, x)",
    );
    let ir = p.ir("p5").unwrap().to_string();
    assert_eq!(ir.matches("mul").count(), 4, "{ir}");
    assert!(
        !ir.contains("const"),
        "no multiplication by the initial 1:\n{ir}"
    );
    let x = Value::f64(&[2.0, -1.0, 0.5]);
    let v = run_both(&p, "p5", std::slice::from_ref(&x));
    assert_eq!(v[0].as_scalar(), 32.0 - 1.0 + 0.03125);
    assert_eq!(
        run_both(&p, "p1", std::slice::from_ref(&x))[0].as_scalar(),
        1.5
    );
    let g = run_both(&p, "dp5", &[x]);
    assert_eq!(g[0].data, vec![80.0, 5.0, 5.0 * 0.0625]);
    // A function with static parameters is compiled where it is called.
    let e = p.ir("power").unwrap_err().to_string();
    assert!(e.contains("static or element-type parameters (`n`)"), "{e}");
}

#[test]
fn iterate_with_a_tuple_state() {
    let p = prog(
        "fn fib(static n: i64, a: f64) -> f64 {
           let (x, y) = iterate(n, (a, a), (x, y) => (y, x + y))
           x
         }
         fn f10(a: f64) -> f64 = fib(10, a)",
    );
    assert_eq!(run_both(&p, "f10", &[s64(1.0)])[0].as_scalar(), 89.0);
}

#[test]
fn static_conditions_pick_a_branch_at_compile_time() {
    let p = prog(
        "fn pick(static k: i64, x: f64) -> f64 =
           if k > 2 && !(k == 5) { sin(x) } else if k < 0 || false { x * x } else { x }
         fn a(x: f64) -> f64 = pick(3, x)
         fn b(x: f64) -> f64 = pick(-1, x)
         fn c(x: f64) -> f64 = pick(5, x)",
    );
    for (f, op) in [("a", "sin"), ("b", "mul")] {
        let ir = p.ir(f).unwrap().to_string();
        assert!(ir.contains(op) && !ir.contains("select"), "{f}:\n{ir}");
    }
    assert_eq!(p.ir("c").unwrap().stmts.len(), 0);
}

#[test]
fn dynamic_conditions_select_and_never_poison_the_gradient() {
    let p = prog(
        "fn safe_root(x: f64) -> f64 = if x > 0.0 { sqrt(x) } else { 0.0 }
         @grad(x)
         fn d(x: f64) -> f64 = safe_root(x)
         fn logs[N](x: f64[N]) -> f64 = +/(if x > 0.0 { log(x) } else { -x })
         @grad(x)
         fn dlogs[N](x: f64[N]) -> f64[N] = logs(x)",
    );
    for (x, want) in [(4.0, 0.25), (0.0, 0.0), (-1.0, 0.0), (-1e300, 0.0)] {
        let g = run_both(&p, "d", &[s64(x)])[0].as_scalar();
        assert_eq!(g, want, "d safe_root at {x}");
    }
    assert_eq!(run_both(&p, "safe_root", &[s64(-4.0)])[0].as_scalar(), 0.0);
    let x = Value::f64(&[2.0, 0.0, -3.0, -0.0]);
    let g = run_both(&p, "dlogs", &[x]);
    assert_eq!(g[0].data, vec![0.5, -1.0, -1.0, -1.0]);
    // The optimized gradient keeps that property.
    let grad = egrad::optimize_gradient(&p, &egrad::Options::default().function("d")).unwrap();
    let compiled = grad.compile().unwrap();
    let (_, gs) = compiled
        .value_and_grad(&[egrad::Arg::scalar(-2.0)])
        .unwrap();
    assert_eq!(gs[0].as_scalar(), 0.0);
}

/// Found by the soak (seeds 0xa7d6e37469c36ff9, 0xc58591f2bf6d1996): under
/// a condition on integers, literal branches took the condition's type,
/// so `0.5` and `1.5` became the `i64` 0 and 1 (or a type error far
/// away).
#[test]
fn literal_branches_under_a_condition_on_integers_keep_their_values() {
    let i = |k: f64| Value::scalar(DType::I64, k);
    let p = prog(
        "fn g(x: f64, k: i64) -> f64 = x * (if k >= 2 { 0.5 } else { abs(1.5) })
         fn g2(x: f64, k: i64) -> f64 = x * (2 * (if k >= 2 { 1.0 } else { 3 }))
         fn h[T, N](v: T[N], a: T) -> T[N] = v * a
         fn f[N](x: f64[N], k: i64) -> f64[N] = h(x, if k >= 2 { 0.25 } else { 4 })
         fn count(k: i64) -> i64 = if k > 0 { 1 } else { 0 }
         fn settle[N](v: f64[N]) -> f64[N] = tabulate[N](i => iterate(3, v[i], q => 0.5))
         fn g32(x: f32, k: i64) -> f32 = x * (if k >= 2 { 0.5 } else { 1.5 })
         fn f32v[N](x: f32[N], k: i64) -> f32[N] = h(x, 2 * (if k >= 2 { 0.25 } else { 4 }))
         fn r32(k: i64) -> f32 = if k > 0 { 0.5 } else { 1.5 }
         fn under32(k: i64, x: f32) -> f32 {
           let a = if k > 0 { 0.25 } else { -0.5 }
           x + (if x < 1.0 { a } else { 3.0 })
         }",
    );
    // (Soak seed 0xd1748ea83aaad259 under base seed 0x2911: a selection
    // between numbers as a branch under a condition on `f32` values was an
    // `f64` branch, "the condition compares f32 values but the branches are
    // f64".)
    let f32s = |x: f64| Value::scalar(DType::F32, x);
    for (k, x, want) in [(1.0, 0.5, 0.75), (0.0, 0.5, 0.0), (1.0, 2.0, 5.0)] {
        let v = run_both(&p, "under32", &[i(k), f32s(x)]);
        assert_eq!((v[0].dtype, v[0].as_scalar()), (DType::F32, want));
    }
    // With `f32` values the numbers are `f32` (like literals).
    let v = run_both(&p, "g32", &[f32s(2.0), i(3.0)]);
    assert_eq!((v[0].dtype, v[0].as_scalar()), (DType::F32, 1.0));
    let x32 = Value::array(DType::F32, vec![2], vec![1.0, 2.0]);
    assert_eq!(
        run_both(&p, "f32v", &[x32, i(1.0)])[0].data,
        vec![8.0, 16.0]
    );
    assert_eq!(run_both(&p, "r32", &[i(0.0)])[0].as_scalar(), 1.5);
    // (Soak seed 0xcba785021bb56c8a: a step giving a bare number made the
    // state untyped, and `tabulate` refused it.)
    let s = run_both(&p, "settle", &[Value::f64(&[1.0, 2.0])]);
    assert_eq!(s[0].data, vec![0.5, 0.5]);
    for (k, want) in [(3.0, 1.5), (1.0, 4.5)] {
        assert_eq!(run_both(&p, "g", &[s64(3.0), i(k)])[0].as_scalar(), want);
    }
    for (k, want) in [(3.0, 6.0), (1.0, 18.0)] {
        assert_eq!(run_both(&p, "g2", &[s64(3.0), i(k)])[0].as_scalar(), want);
    }
    let v = run_both(&p, "f", &[Value::f64(&[1.0, 2.0]), i(2.0)]);
    assert_eq!(v[0].data, vec![0.25, 0.5]);
    // Whole literals under an integer condition are still integers.
    let c = run_both(&p, "count", &[i(5.0)]);
    assert_eq!((c[0].dtype, c[0].as_scalar()), (DType::I64, 1.0));
}

#[test]
fn comparisons_and_logic_on_arrays() {
    let p = prog(
        "fn band[N](x: f64[N], lo: f64) -> f64[N] =
           if x > lo && !(x >= 1.0) || x == -5.0 { x } else { 0.0 * x - 1.0 }",
    );
    let x = Value::f64(&[0.5, 2.0, -5.0, 0.0, f64::NAN]);
    let r = run_both(&p, "band", &[x, s64(0.25)]);
    assert_eq!(&r[0].data[..4], &[0.5, -1.0, -5.0, -1.0]);
    assert!(
        r[0].data[4].is_nan(),
        "NaN compares false: else branch 0 * NaN - 1"
    );
}

#[test]
fn a_function_returning_bool_gives_a_condition() {
    // `if c(x)` was refused: "must be a bool, but it has type bool".
    let p = prog(
        "fn c(x: f64) -> bool = x > 0.0
         fn finite[N](x: f64[N]) -> bool[N] = x == x && abs(x) < 1.0 / 0.0
         fn pair(x: f64) -> (bool, f64) = (c(x), 2.0 * x)
         fn again(x: f64) -> bool = c(x)
         fn pick(x: f64, y: f64) -> f64 = if c(x) { y } else { -y }
         fn logic(x: f64) -> f64 = if !c(x) || again(x - 1.0) && c(x) { 1.0 } else { 2.0 }
         fn clean[N](x: f64[N]) -> f64[N] = if finite(x) { x } else { 0.0 }
         fn unpack(x: f64) -> f64 {
           let (b, y) = pair(x)
           if b { y } else { 0.0 }
         }",
    );
    let pick = |x: f64| run_both(&p, "pick", &[s64(x), s64(3.0)])[0].as_scalar();
    assert_eq!((pick(0.5), pick(-0.5)), (3.0, -3.0));
    let logic = |x: f64| run_both(&p, "logic", &[s64(x)])[0].as_scalar();
    assert_eq!((logic(-1.0), logic(0.5), logic(2.0)), (1.0, 2.0, 1.0));
    let x = Value::f64(&[1.0, f64::NAN, f64::INFINITY, -2.0]);
    assert_eq!(
        run_both(&p, "clean", &[x])[0].data,
        vec![1.0, 0.0, 0.0, -2.0]
    );
    let unpack = |x: f64| run_both(&p, "unpack", &[s64(x)])[0].as_scalar();
    assert_eq!((unpack(1.5), unpack(-1.5)), (3.0, 0.0));
    let again = run_both(&p, "again", &[s64(1.0)]);
    assert_eq!((again[0].dtype, again[0].as_scalar()), (DType::Bool, 1.0));
}

#[test]
fn two_argument_builtins_and_extremum_reductions() {
    let p =
        prog("fn f[N](x: f64[N]) -> f64 = max/x - min/(max(x, 0)) + +/pow(abs(x), 2) + min(1, 2)");
    let x = Value::f64(&[-3.0, 0.5, 2.0]);
    let r = run_both(&p, "f", &[x])[0].as_scalar();
    assert_eq!(r, 2.0 - 0.0 + (9.0 + 0.25 + 4.0) + 1.0);
}

#[test]
fn errors_name_the_problem() {
    let cases: &[(&str, &[&str])] = &[
        (
            "fn p(static n: i64, x: f64) -> f64 = x\nfn q(m: f64, x: f64) -> f64 = p(m, x)",
            &["static parameter `n` of `p` needs a value known at compile time", "`m` is a run-time value", "`static`"],
        ),
        (
            "fn f(n: f64, x: f64) -> f64 = iterate(n, x, s => s * x)",
            &["count of `iterate` must be known at compile time", "`n`", "static"],
        ),
        (
            "fn f(x: f64, y: f64[3], z: f64[4]) -> f64[3] = if x > 0.0 { y } else { z }",
            &["branches of this `if` have different types: f64[3] and f64[4]"],
        ),
        ("fn f(x: f64) -> f64 = if x > 0.0 { x }", &["has no `else`"]),
        ("fn f(x: f64) -> f64 = if x { x } else { x }", &["condition of `if` must be a bool"]),
        ("fn f(x: f64) -> bool = x < 1.0 < 2.0", &["comparisons do not chain"]),
        ("fn f(b: bool) -> f64 = b * 2.0", &["`*` needs numbers, not bools"]),
        ("fn f(static x: f64[3]) -> f64 = 1.0", &["static parameter must be a scalar"]),
        (
            "@grad(n)\nfn f(static n: i64, x: f64) -> f64 = x",
            &["cannot differentiate the static parameter `n`"],
        ),
        (
            "fn f(static n: i64, x: f64[3]) -> f64 = +/iterate(n, x, s => +/s)\nfn g(x: f64[3]) -> f64 = f(2, x)",
            &["step of `iterate` must keep the state's type"],
        ),
        ("fn f(x: f64) -> f64 = sin(s => s)", &["only allowed in `iterate` and `iterate_until`"]),
        ("fn f(x: f64) -> f64 = iterate(3, x)", &["`iterate` takes 3 arguments"]),
        ("fn f(x: f64) -> f64 = iterate(-1, x, s => s)", &["must not be negative"]),
        ("fn f(x: f64) -> f64 = x * (1.0 < x)", &["needs numbers, not bools"]),
        ("fn f(x: f64) -> f64 = if x && true { x } else { x }", &["`&&` needs bools"]),
        ("fn f(x: f64[3]) -> f64 = max/(+/x)", &["`max/` takes the largest of the elements of an array"]),
        ("fn pow(x: f64) -> f64 = x", &["builtin function"]),
        ("fn f(x: f64) -> f64 = pow(x)", &["`pow` takes 2 arguments"]),
        (
            "fn f(static n: i64, x: f64) -> f64 = x\nfn g(static n: i64, x: f64) -> f64 = f(n * n, x)\nfn h(x: f64) -> f64 = g(4000000000, x)",
            &["overflows"],
        ),
        (
            "fn f(x: f64) -> f64 = g(x)\nfn g(x: f64) -> f64 = f(x)",
            &["calls itself through f -> g -> f"],
        ),
    ];
    expect_errors(cases);
}

#[test]
fn tabulate_indexing_and_matrices() {
    let p = prog(
        "fn matvec[M, K](A: f64[M, K], x: f64[K]) -> f64[M] = tabulate[M](i => +/(A[i] .* x))
         fn diffs[N](x: f64[N]) -> f64[N-1] = tabulate[N-1](i => x[i + 1] - x[i])
         fn pick[N](x: f64[N]) -> f64 = x[1] + x[0] * 10
         fn mm[M, K, N](a: f64[M, K], b: f64[K, N], v: f64[N]) -> f64[N, M] =
           transpose(matmul(a, b) + v)
         fn rows(static n: i64, x: f64[3]) -> f64[3] = tabulate[n](i => x[i] * 2)
         fn twice(x: f64[3]) -> f64[3] = rows(3, x)
         fn outer[N](x: f64[N], s: f64) -> f64[N] = tabulate[N](i => s)",
    );
    let a = Value::array(DType::F64, vec![2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let x = Value::f64(&[1.0, 0.5, -1.0]);
    assert_eq!(
        run_both(&p, "matvec", &[a.clone(), x.clone()])[0].data,
        vec![-1.0, 0.5]
    );
    assert_eq!(
        run_both(&p, "diffs", std::slice::from_ref(&x))[0].data,
        vec![-0.5, -1.5]
    );
    assert_eq!(
        run_both(&p, "pick", std::slice::from_ref(&x))[0].as_scalar(),
        10.5
    );
    assert_eq!(
        run_both(&p, "twice", std::slice::from_ref(&x))[0].data,
        vec![2.0, 1.0, -2.0]
    );
    assert_eq!(
        run_both(&p, "outer", &[x.clone(), s64(7.0)])[0].data,
        vec![7.0; 3]
    );
    let b = Value::array(DType::F64, vec![3, 2], vec![1.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
    let v = Value::f64(&[10.0, 20.0]);
    // a @ b = [[4, 5], [10, 11]]; + v per row; transposed.
    let r = run_both(&p, "mm", &[a, b, v]);
    assert_eq!(r[0].shape, vec![2, 2]);
    assert_eq!(r[0].data, vec![14.0, 20.0, 25.0, 31.0]);
    // Sizes that make N-1 negative, or rows out of range, are refused before
    // anything runs (interpreter and JIT alike).
    for f in ["diffs", "pick"] {
        let ir = p.ir(f).unwrap();
        let empty = Value::f64(&[]);
        let e = run(ir, &[&empty]).unwrap_err();
        assert!(
            e.message.contains("`N`") || e.message.contains("out of range"),
            "{f}: {e}"
        );
        let native = compile(ir, &BackendOptions::verified()).unwrap();
        assert!(native.call(&[&empty]).is_err(), "{f}");
    }
    let one = Value::f64(&[3.0]);
    let e = run(p.ir("pick").unwrap(), &[&one]).unwrap_err();
    assert!(e.message.contains("out of range"), "{e}");
}

#[test]
fn array_gradients() {
    let p = prog(
        "fn rosen[N](x: f64[N]) -> f64 =
           +/tabulate[N-1](i => 100 * (x[i + 1] - x[i] * x[i]) * (x[i + 1] - x[i] * x[i]) + (1 - x[i]) * (1 - x[i]))
         @grad(x)
         fn drosen[N](x: f64[N]) -> f64[N] = rosen(x)
         fn quad[M, K](A: f64[M, K], x: f64[K]) -> f64 = +/(tabulate[M](i => +/(A[i] .* x)) * 0.5)
         @grad(A, x)
         fn dquad[M, K](A: f64[M, K], x: f64[K]) -> (f64[M, K], f64[K]) = quad(A, x)",
    );
    let x = Value::f64(&[0.5, -1.0, 2.0]);
    let g = run_both(&p, "drosen", std::slice::from_ref(&x))[0]
        .data
        .clone();
    // d/dx of sum 100 (x[i+1] - x[i]^2)^2 + (1 - x[i])^2, by hand.
    let xs = [0.5f64, -1.0, 2.0];
    let mut want = [0.0f64; 3];
    for i in 0..2 {
        let d = xs[i + 1] - xs[i] * xs[i];
        want[i] += -400.0 * d * xs[i] - 2.0 * (1.0 - xs[i]);
        want[i + 1] += 200.0 * d;
    }
    for (a, b) in g.iter().zip(want) {
        assert!(
            (a - b).abs() <= 1e-12 * b.abs().max(1.0),
            "{g:?} vs {want:?}"
        );
    }
    let a = Value::array(DType::F64, vec![2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let r = run_both(&p, "dquad", &[a, x]);
    // d/dA = 0.5 x per row; d/dx = 0.5 * column sums of A.
    assert_eq!(r[0].data, vec![0.25, -0.5, 1.0, 0.25, -0.5, 1.0]);
    assert_eq!(r[1].data, vec![2.5, 3.5, 4.5]);
}

#[test]
fn array_errors_name_the_problem() {
    let cases: &[(&str, &[&str])] = &[
        ("fn f(x: f64[3]) -> f64 = x[3]", &["index 3 is out of range for an array of length 3"]),
        ("fn f(x: f64[3]) -> f64 = x[-1]", &["index -1 is negative"]),
        ("fn f(x: f64[3]) -> f64 = x[0.5]", &["an index must be an integer"]),
        (
            "fn f(x: f64[3], k: f64) -> f64 = x[k]",
            &["an index must be an integer", "convert a floating-point index with `i64(...)`"],
        ),
        ("fn f(x: f64) -> f64 = x[0]", &["only arrays can be indexed"]),
        (
            "fn f[N](a: f64[N, 2], y: f64[3]) -> f64[N, 2] = tabulate[N](i => a[i] + y)",
            &["shape mismatch: `+` needs operands of the same shape, found f64[2] and f64[3]"],
        ),
        (
            "fn f(x: f64[3]) -> f64[4] = tabulate[4](i => x[i])",
            &["reads rows 0..4 of an array of length 3"],
        ),
        (
            "fn f[N](x: f64[N]) -> f64[N] = tabulate[N](i => tabulate[N](j => x[j])[2.5])",
            &["an index must be an integer, but this is 2.5"],
        ),
        (
            "fn f[N](x: f64[N]) -> f64[N] = tabulate[N](i => x[i] * i)",
            &["`*` mixes element types f64 and i64"],
        ),
        (
            "fn f[N](x: f64[N]) -> f64[N] = tabulate[N](i => 1.0)",
            &["`tabulate` builds arrays of numbers"],
        ),
        (
            "fn f[N](x: f64[N], k: f64) -> f64[N] = tabulate[k](i => x[i])",
            &["the length of `tabulate` must be a size parameter or a static integer"],
        ),
        (
            "fn f(a: f64[2, 3], b: f64[2, 3]) -> f64[2, 3] = matmul(a, b)",
            &["the inner axes differ: the first operand's axis 1 (its columns) has length 3, the second's axis 0 (its rows) has length 2"],
        ),
        (
            "fn f[N, M](x: f64[N*M]) -> f64 = +/x",
            &["size parameter `N` of `f` cannot be read from the parameter types"],
        ),
        (
            "fn d[N](x: f64[N]) -> f64[N-2] = tabulate[N-2](i => x[i])\nfn g(x: f64[1]) -> f64 = +/d(x)",
            &["negative at the sizes of this call"],
        ),
    ];
    expect_errors(cases);
}

#[test]
fn value_and_grad_returns_the_value_then_the_gradients() {
    let p = prog(
        "fn loss[N](w: f64[N], x: f64[N], y: f64) -> f64 = (+/(w .* x) - y) * (+/(w .* x) - y)
         @value_and_grad(w, y)
         fn vg[N](w: f64[N], x: f64[N], y: f64) -> (f64, f64[N], f64) = loss(w, x, y)
         @grad(w, y)
         fn g[N](w: f64[N], x: f64[N], y: f64) -> (f64[N], f64) = loss(w, x, y)",
    );
    let args = [
        Value::f64(&[1.0, 2.0, 3.0]),
        Value::f64(&[4.0, 5.0, 6.0]),
        s64(0.5),
    ];
    let vg = run_both(&p, "vg", &args);
    let g = run_both(&p, "g", &args);
    let l = run_both(&p, "loss", &args);
    assert!(vg[0].bits_eq(&l[0]) && vg[1].bits_eq(&g[0]) && vg[2].bits_eq(&g[1]));
    assert_eq!(vg[1].data, vec![252.0, 315.0, 378.0]);
    let e = err("fn l(x: f64) -> f64 = x * x\n@value_and_grad(x)\nfn f(x: f64) -> f64 = l(x)");
    assert!(
        e.contains("must return (f64, f64), the value and then the gradients"),
        "{e}"
    );
}

#[test]
fn iterate_until_stops_within_its_bound() {
    let p = prog(
        "fn newton(static steps: i64, a: f64) -> f64 =
           iterate_until(steps, a, s => abs(s * s - a) < 1e-12, s => 0.5 * (s + a / s))
         fn root(a: f64) -> f64 = newton(30, a)
         @grad(a)
         fn droot(a: f64) -> f64 = newton(30, a)
         fn capped(a: f64) -> f64 = newton(2, a)
         fn halve(static k: i64) -> f64 = iterate_until(10, 64, s => s <= k, s => s / 2)
         fn h(x: f64) -> f64 = x + halve(5)",
    );
    let r = run_both(&p, "root", &[s64(2.0)])[0].as_scalar();
    assert!((r - 2f64.sqrt()).abs() < 1e-12, "{r}");
    // Stopped early at a run-time condition: the derivative is that of the
    // steps taken, close to d sqrt(a) / da.
    let g = run_both(&p, "droot", &[s64(2.0)])[0].as_scalar();
    assert!((g - 0.5 / 2f64.sqrt()).abs() < 1e-6, "{g}");
    // The bound stops it first.
    let c = run_both(&p, "capped", &[s64(2.0)])[0].as_scalar();
    assert_eq!(c, 0.5 * (1.5 + 2.0 / 1.5));
    // A static condition stops unrolling at compile time: 64 -> 32 -> ... -> 4.
    assert_eq!(run_both(&p, "h", &[s64(0.0)])[0].as_scalar(), 4.0);
    for (src, want) in [
        (
            "fn f(x: f64) -> f64 = iterate_until(x, s => s > 1.0, s => s * 2.0)",
            "`iterate_until` needs an explicit bound",
        ),
        (
            "fn f(x: f64) -> f64 = iterate_until(5, x, s => s, s => s * 2.0)",
            "the stop condition of `iterate_until` must be a bool",
        ),
        (
            "fn f(x: f64, n: f64) -> f64 = iterate_until(n, x, s => s > 1.0, s => s * 2.0)",
            "the count of `iterate_until` must be known at compile time",
        ),
        (
            "fn f(x: f64) -> f64 = iterate_until(10000000000000000, x, s => s > 1.0, s => s * 2.0)",
            "the count of `iterate_until` must be an integer below 9e15, but the count is 1e16",
        ),
    ] {
        let e = err(src);
        assert!(e.contains(want), "expected `{want}` in:\n{e}");
    }
}

#[test]
fn forward_mode_and_hessian_vector_products() {
    let p = Program::from_file("examples/hvp.eg").unwrap();
    let x = Value::f64(&[0.5, 1.0, 2.0]);
    let g = run_both(&p, "force", std::slice::from_ref(&x))[0].clone();
    for k in 0..3 {
        let mut v = vec![0.0; 3];
        v[k] = 1.0;
        let v = Value::f64(&v);
        // <grad, e_k> = jvp(e_k).
        let slope = run_both(&p, "slope", &[x.clone(), v.clone()])[0].as_scalar();
        assert!((slope - g.data[k]).abs() <= 1e-12 * g.data[k].abs().max(1.0));
        // Column k of the Hessian, against central differences of the gradient.
        let h = run_both(&p, "hvp", &[x.clone(), v])[0].clone();
        let step = 1e-6;
        let mut xp = x.clone();
        xp.data[k] += step;
        let mut xm = x.clone();
        xm.data[k] -= step;
        let gp = run_both(&p, "force", &[xp])[0].clone();
        let gm = run_both(&p, "force", &[xm])[0].clone();
        for i in 0..3 {
            let fd = (gp.data[i] - gm.data[i]) / (2.0 * step);
            assert!(
                (h.data[i] - fd).abs() <= 1e-6 * fd.abs().max(1.0),
                "H[{i},{k}] {} vs {fd}",
                h.data[i]
            );
        }
    }
    // Analytic Hessian entry: d2/dx0^2 = -sin x x^2 + 4 x cos x + 2 sin x + 2.
    let e0 = Value::f64(&[1.0, 0.0, 0.0]);
    let h00 = run_both(&p, "hvp", &[x, e0])[0].data[0];
    let want = -(0.5f64.sin()) * 0.25 + 2.0 * 0.5f64.cos() + 2.0 * 0.5f64.sin() + 2.0;
    assert!((h00 - want).abs() < 1e-12, "{h00} vs {want}");
    for (src, want) in [
        (
            "fn f(x: f64) -> f64 = x * x\n@jvp(x)\nfn g(x: f64) -> f64 = f(x)",
            "`@jvp` needs a tangent parameter for `x`",
        ),
        (
            "fn f(x: f64) -> f64 = x * x\n@jvp(x)\nfn g(x: f64, dx: f64[3]) -> f64 = f(x)",
            "`@jvp` needs a tangent parameter for `x`",
        ),
    ] {
        let e = err(src);
        assert!(e.contains(want), "expected `{want}` in:\n{e}");
    }
}

#[test]
fn functions_generic_over_the_element_type() {
    let p = prog(
        "fn sumsq[T, N](x: T[N]) -> T = +/(x .* x)
         fn sigmoid[T, N](x: T[N]) -> T[N] = 1 / (1 + exp(-x))
         fn scale[T, N](x: T[N], s: T) -> T[N] = x * s
         fn a(x: f32[3]) -> f32 = sumsq(sigmoid(x))
         fn b(x: f64[3]) -> f64 = sumsq(scale(x, 2))
         @grad(x)
         fn db(x: f64[3]) -> f64[3] = sumsq(sigmoid(x))",
    );
    let xf = Value::array(DType::F32, vec![3], vec![0.5, -1.0, 2.0]);
    let r = run_both(&p, "a", &[xf])[0].clone();
    assert_eq!(r.dtype, DType::F32);
    let want: f32 = [0.5f32, -1.0, 2.0]
        .iter()
        .map(|x| {
            let s = 1.0f32 / (1.0 + (-x).exp());
            s * s
        })
        .fold(0.0, |a, b| a + b);
    assert_eq!(r.as_scalar(), want as f64);
    let x = Value::f64(&[0.5, -1.0, 2.0]);
    assert_eq!(
        run_both(&p, "b", std::slice::from_ref(&x))[0].as_scalar(),
        4.0 * 5.25
    );
    let g = run_both(&p, "db", &[x])[0].clone();
    let s = 1.0 / (1.0 + (-0.5f64).exp());
    assert!((g.data[0] - 2.0 * s * s * (1.0 - s)).abs() < 1e-15);
    for (src, want) in [
        (
            "fn s[T, N](x: T[N], y: T[N]) -> T = +/(x .* y)\nfn f(a: f32[2], b: f64[2]) -> f64 = s(a, b)",
            "`T` of `s` is f32 from argument `x`, but this argument is f64",
        ),
        ("fn s[T](x: f64) -> T = x", "element type `T` of `s` is not the element type of any parameter"),
    ] {
        let e = err(src);
        assert!(e.contains(want), "expected `{want}` in:\n{e}");
    }
    let e = p.ir("sumsq").unwrap_err().to_string();
    assert!(e.contains("(`T`)"), "{e}");
}

#[test]
fn repro_matmul_under_a_dynamic_if() {
    // Found by tests/random_programs.rs: the NaN guard downstream of a
    // `select` was applied element by element to `matmul`'s contribution
    // (a wrong gradient for square matrices, an internal error otherwise).
    let p = prog(
        "fn loss(A: f64[2, 2]) -> f64 {
           let p = matmul(A, A)
           +/(if p > 0.0 { p } else { 0.0 })
         }
         @grad(A)
         fn dloss(A: f64[2, 2]) -> f64[2, 2] = loss(A)
         fn loss2(A: f64[3, 2], B: f64[2, 4], s: f64) -> f64 =
           +/(if s > 0.0 { matmul(A, B) } else { 0.0 })
         @grad(A)
         fn dloss2(A: f64[3, 2], B: f64[2, 4], s: f64) -> f64[3, 2] = loss2(A, B, s)",
    );
    let a = Value::array(DType::F64, vec![2, 2], vec![1.0, 2.0, 3.0, -4.0]);
    // loss = a11^2 + 2 a12 a21 + a22^2 here (the off-diagonal of A A is negative).
    assert_eq!(
        run_both(&p, "dloss", &[a])[0].data,
        vec![2.0, 6.0, 4.0, -8.0]
    );
    let a = Value::array(DType::F64, vec![3, 2], vec![1.0; 6]);
    let b = Value::array(DType::F64, vec![2, 4], vec![0.5; 8]);
    assert_eq!(
        run_both(&p, "dloss2", &[a.clone(), b.clone(), s64(1.0)])[0].data,
        vec![2.0; 6]
    );
    assert_eq!(
        run_both(&p, "dloss2", &[a, b, s64(-1.0)])[0].data,
        vec![0.0; 6]
    );
}

#[test]
fn repro_iterate_until_keeps_the_state_shape() {
    let e =
        err("fn k[N](x: f64[N], s: f64) -> f64 = iterate_until(2, s, q => x > q, q => q * 1.5)");
    assert!(
        e.contains("stop condition of `iterate_until` must have the state's shape"),
        "{e}"
    );
}

#[test]
fn matrix_elements_along_the_tabulate_index() {
    let p = prog(
        "fn col_diff[N](X: f64[N, 3]) -> f64[N-1] = tabulate[N-1](i => X[i + 1, 0] - X[i, 2])
         @grad(X)
         fn d[N](X: f64[N, 3]) -> f64[N, 3] = +/col_diff(X)",
    );
    let x = Value::array(
        DType::F64,
        vec![3, 3],
        vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 10.0, 0.0, 0.5],
    );
    assert_eq!(
        run_both(&p, "col_diff", std::slice::from_ref(&x))[0].data,
        vec![1.0, 4.0]
    );
    let g = run_both(&p, "d", &[x])[0].clone();
    assert_eq!(g.data, vec![0.0, 0.0, -1.0, 1.0, 0.0, -1.0, 1.0, 0.0, 0.0]);
}

#[test]
fn row_extremes_inside_tabulate() {
    let p = prog(
        "fn logsumexp_rows[M, K](X: f64[M, K]) -> f64[M] =
           tabulate[M](i => max/X[i] + log(+/exp(X[i] - max/X[i])))
         fn spread_rows[M, K](X: f64[M, K]) -> f64[M] = tabulate[M](i => max/X[i] - min/X[i])
         @grad(X)
         fn d[M, K](X: f64[M, K]) -> f64[M, K] = +/spread_rows(X)",
    );
    let x = Value::array(DType::F64, vec![2, 3], vec![1.0, 3.0, 2.0, -1.0, -5.0, 0.5]);
    let r = run_both(&p, "logsumexp_rows", std::slice::from_ref(&x))[0].clone();
    let want0 = (1f64.exp() + 3f64.exp() + 2f64.exp()).ln();
    assert!((r.data[0] - want0).abs() < 1e-14, "{r:?}");
    assert_eq!(
        run_both(&p, "spread_rows", std::slice::from_ref(&x))[0].data,
        vec![2.0, 5.5]
    );
    assert_eq!(
        run_both(&p, "d", &[x])[0].data,
        vec![-1.0, 1.0, 0.0, 0.0, -1.0, 1.0]
    );
}

#[test]
fn the_operation_limit_can_be_set_by_the_caller() {
    let src =
        "fn f[N](x: f64[N], s: f64) -> f64 = iterate(100, s, q => q * 0.9 + 0.1 * tanh(+/(x * q)))";
    // Unrolled (100 short steps): well over 100 operations.
    assert!(egrad::Program::parse(src).is_ok());
    let opts = egrad::ParseOptions::default().max_operations(100);
    let e = egrad::Program::parse_with("big.eg", src, &opts).unwrap_err();
    assert_eq!(e.kind(), egrad::ErrorKind::Limit, "{e}");
    assert!(e.to_string().contains("more than 100 operations"), "{e}");
}
