//! The function-level constructs of the seeds: `@vmap` (and its
//! composition with `@grad` in both orders, against a loop over the
//! examples), several transform attributes on one function, `match` on
//! integers and bools (static and run-time, with gradients), and bounds on
//! element-type parameters; with their errors.

mod common;

use common::{check_gradient, check_jvp, err, prog, run_both};
use egrad::internals::types::value::Value;
use egrad::internals::types::DType;

fn vec64(xs: &[f64]) -> Value {
    Value::array(DType::F64, vec![xs.len()], xs.to_vec())
}

fn mat64(rows: usize, cols: usize, xs: &[f64]) -> Value {
    assert_eq!(xs.len(), rows * cols);
    Value::array(DType::F64, vec![rows, cols], xs.to_vec())
}

fn f64s(x: f64) -> Value {
    Value::scalar(DType::F64, x)
}

fn ints(xs: &[i64]) -> Value {
    Value::array(
        DType::I64,
        vec![xs.len()],
        xs.iter().map(|&x| x as f64).collect(),
    )
}

fn close(a: f64, b: f64, what: &str) {
    assert!(
        (a - b).abs() <= 1e-12 * (1.0 + b.abs()),
        "{what}: {a} vs {b}"
    );
}

/// Deterministic numbers in [-1, 1).
fn numbers(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}

const VMAP: &str = include_str!("../examples/vmap.eg");

#[test]
fn vmap_of_grad_is_the_gradient_of_each_example() {
    let p = prog(VMAP);
    for (b, n) in [(1, 1), (3, 2), (5, 4), (17, 3)] {
        let w = numbers(n, 1);
        let xs = numbers(b * n, 2);
        let ys: Vec<f64> = numbers(b, 3).iter().map(|y| f64::from(*y > 0.0)).collect();
        let batched = run_both(
            &p,
            "per_example",
            &[vec64(&w), mat64(b, n, &xs), vec64(&ys)],
        )
        .unwrap();
        assert_eq!(batched[0].shape, [b, n]);
        // The loop over examples.
        for e in 0..b {
            let one = run_both(
                &p,
                "example_grad",
                &[vec64(&w), vec64(&xs[e * n..(e + 1) * n]), f64s(ys[e])],
            )
            .unwrap();
            for k in 0..n {
                close(
                    batched[0].data[e * n + k],
                    one[0].data[k],
                    &format!("B={b} N={n} example {e} element {k}"),
                );
            }
        }
    }
}

#[test]
fn grad_of_vmap_is_the_mean_of_the_examples_gradients() {
    let p = prog(VMAP);
    for (b, n) in [(1, 1), (4, 3), (9, 2)] {
        let w = numbers(n, 4);
        let xs = numbers(b * n, 5);
        let ys: Vec<f64> = numbers(b, 6).iter().map(|y| f64::from(*y > 0.0)).collect();
        let args = [vec64(&w), mat64(b, n, &xs), vec64(&ys)];
        let g = run_both(&p, "dbatch_loss", &args).unwrap();
        let losses = run_both(&p, "losses", &args).unwrap();
        let mut mean = vec![0.0; n];
        for e in 0..b {
            let row = [vec64(&w), vec64(&xs[e * n..(e + 1) * n]), f64s(ys[e])];
            let one = run_both(&p, "example_grad", &row).unwrap();
            for (m, d) in mean.iter_mut().zip(&one[0].data) {
                *m += d / b as f64;
            }
            let l = run_both(&p, "example_loss", &row).unwrap();
            close(losses[0].data[e], l[0].as_scalar(), "loss of an example");
        }
        for (k, (got, want)) in g[0].data.iter().zip(&mean).enumerate() {
            close(*got, *want, &format!("B={b} N={n} element {k}"));
        }
        // And against finite differences, optimized and native.
        check_gradient(&p, "dbatch_loss", "batch_loss", 1, &args, "grad(vmap)");
    }
}

#[test]
fn vmap_batches_several_parameters_and_leaves_the_others() {
    let p = prog(
        "fn affine[N](a: f64, x: f64[N], b: f64[N]) -> f64[N] = a * x + b
@vmap(a, x)
fn affines[B, N](a: f64[B], x: f64[B, N], b: f64[N]) -> f64[B, N] = affine(a, x, b)
@vmap(x)
fn norms[B, N](x: f64[B, N]) -> f64[B] = sqrt(+/(x .* x))",
    );
    let a = [2.0, -1.0];
    let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let b = [0.5, 0.25, 0.125];
    let got = run_both(&p, "affines", &[vec64(&a), mat64(2, 3, &x), vec64(&b)]).unwrap();
    let want: Vec<f64> = (0..6).map(|i| a[i / 3] * x[i] + b[i % 3]).collect();
    assert_eq!(got[0].data, want);
    let got = run_both(&p, "norms", &[mat64(2, 3, &x)]).unwrap();
    assert_eq!(got[0].data, vec![14f64.sqrt(), 77f64.sqrt()]);
}

#[test]
fn several_attributes_make_one_function_each_and_keep_the_primal() {
    let p = prog(
        "@grad(w) @grad(x) @grad(x, w) @value_and_grad(w) @jvp(x)
fn loss(x: f64, w: f64) -> f64 = sin(x * w) + w * w
@grad(w)
fn by_hand(x: f64, w: f64) -> f64 = loss(x, w)",
    );
    let names = p.function_names();
    for n in [
        "loss",
        "dloss_dw",
        "dloss_dx",
        "dloss_dx_dw",
        "loss_and_dloss_dw",
        "loss_jvp_x",
        "by_hand",
    ] {
        assert!(names.contains(&n), "{n} missing from {names:?}");
    }
    let (x, w) = (0.7, -1.3);
    let at = [f64s(x), f64s(w)];
    let value = (x * w).sin() + w * w;
    let dw = x * (x * w).cos() + 2.0 * w;
    let dx = w * (x * w).cos();
    close(
        run_both(&p, "loss", &at).unwrap()[0].as_scalar(),
        value,
        "loss",
    );
    close(
        run_both(&p, "dloss_dw", &at).unwrap()[0].as_scalar(),
        dw,
        "dw",
    );
    assert!(run_both(&p, "dloss_dw", &at).unwrap()[0]
        .bits_eq(&run_both(&p, "by_hand", &at).unwrap()[0]));
    close(
        run_both(&p, "dloss_dx", &at).unwrap()[0].as_scalar(),
        dx,
        "dx",
    );
    let both = run_both(&p, "dloss_dx_dw", &at).unwrap();
    close(both[0].as_scalar(), dx, "dx of both");
    close(both[1].as_scalar(), dw, "dw of both");
    let vg = run_both(&p, "loss_and_dloss_dw", &at).unwrap();
    close(vg[0].as_scalar(), value, "value");
    close(vg[1].as_scalar(), dw, "vg dw");
    let t = run_both(&p, "loss_jvp_x", &[f64s(x), f64s(w), f64s(2.0)]).unwrap();
    close(t[0].as_scalar(), 2.0 * dx, "jvp");
    check_gradient(&p, "dloss_dx_dw", "loss", 2, &at, "several attributes");
    // The tangent parameter is named after the parameter, `dx`.
    let ir = p.ir("loss_jvp_x").unwrap();
    let pnames: Vec<&str> = ir
        .params
        .iter()
        .map(|q| ir.vars[q.var.0 as usize].name.as_str())
        .collect();
    assert_eq!(pnames, ["x", "w", "dx"]);
}

#[test]
fn static_match_compiles_only_the_arm_taken() {
    let p = prog(
        "fn act(static k: i64, x: f64) -> f64 = match k {
  0 => x
  1 | 2 => tanh(x)
  -3 => undefined_function(x)
  _ => 2 * x
}
fn flag(static b: bool, x: f64) -> f64 = match b { true => x, false => -x }
fn all(x: f64) -> (f64, f64, f64, f64, f64, f64) =
  (act(0, x), act(1, x), act(2, x), act(7, x), flag(true, x), flag(1 > 2, x))",
    );
    let got = run_both(&p, "all", &[f64s(0.5)]).unwrap();
    let want = [0.5, 0.5f64.tanh(), 0.5f64.tanh(), 1.0, 0.5, -0.5];
    for (g, w) in got.iter().zip(want) {
        close(g.as_scalar(), w, "static match");
    }
    // The arm with the error is checked when it is taken.
    let e = err(
        "fn act(static k: i64, x: f64) -> f64 = match k { -3 => undefined_function(x), _ => x }
fn f(x: f64) -> f64 = act(-3, x)",
    );
    assert!(e.contains("undefined_function"), "{e}");
}

#[test]
fn runtime_match_selects_per_element_and_differentiates_the_arm_taken() {
    let p = prog(
        "fn piece[N](kind: i64[N], x: f64[N]) -> f64 = +/(match kind {
  0 => sqrt(x)
  1 | -1 => log(x)
  2 => x * x * x
  _ => tanh(x)
})
@grad(x)
fn dpiece[N](kind: i64[N], x: f64[N]) -> f64[N] = piece(kind, x)
fn pick[N](b: bool, x: f64[N]) -> f64 = match b { true => +/sqrt(x), false => +/(x .* x) }
@grad(x)
fn dpick[N](b: bool, x: f64[N]) -> f64[N] = pick(b, x)
fn sign_of[N](x: f64[N]) -> f64[N] = match x > 0 { true => 1, false => -1 }",
    );
    // Negative inputs where `sqrt` and `log` are not taken.
    let kind = ints(&[2, 1, -1, 0, 5, 2]);
    let x = vec64(&[-2.0, 0.5, 3.0, 4.0, -0.3, 0.0]);
    let g = run_both(&p, "dpiece", &[kind.clone(), x.clone()]).unwrap();
    let want = [
        12.0,
        2.0,
        1.0 / 3.0,
        0.25,
        1.0 - (-0.3f64).tanh().powi(2),
        0.0,
    ];
    for (k, (a, b)) in g[0].data.iter().zip(want).enumerate() {
        close(*a, b, &format!("element {k}"));
    }
    // check_gradient differentiates the first parameters: `x` first.
    let x_ok = vec64(&[-2.0, 0.5, 3.0, 4.0, -0.3, 0.7]);
    let q = prog(
        "fn piece[N](x: f64[N], kind: i64[N]) -> f64 = +/(match kind {
  0 => sqrt(x)
  1 | -1 => log(x)
  2 => x * x * x
  _ => tanh(x)
})
@grad(x)
fn dpiece[N](x: f64[N], kind: i64[N]) -> f64[N] = piece(x, kind)
@jvp(x)
fn jpiece[N](x: f64[N], kind: i64[N], dx: f64[N]) -> f64 = piece(x, kind)",
    );
    check_gradient(
        &q,
        "dpiece",
        "piece",
        1,
        &[x_ok.clone(), kind.clone()],
        "match",
    );
    check_jvp(&q, "jpiece", "piece", 1, &[x_ok, kind], "match");
    let g = run_both(
        &p,
        "dpick",
        &[Value::scalar(DType::Bool, 0.0), vec64(&[-1.0, 2.0])],
    )
    .unwrap();
    assert_eq!(g[0].data, vec![-2.0, 4.0]);
    let g = run_both(
        &p,
        "dpick",
        &[Value::scalar(DType::Bool, 1.0), vec64(&[4.0, 1.0])],
    )
    .unwrap();
    assert_eq!(g[0].data, vec![0.25, 0.5]);
    let s = run_both(&p, "sign_of", &[vec64(&[-1.0, 2.0, 0.0])]).unwrap();
    assert_eq!(s[0].data, vec![-1.0, 1.0, -1.0]);
}

#[test]
fn number_arms_take_the_type_of_the_float_arm() {
    // Found by the random programs: the arms after the first used to meet
    // each other before the float arm, as an `if` of their own.
    let p = prog(
        "fn g(x: f64, k: i64) -> f64 = match k { 0 => x, 1 => 3, _ => 2 }
fn e[N](x: f32[N], kind: i64[N]) -> f32[N] = match kind { 0 => x, 1 => 0.5, 2 => 2, _ => 0.25 }
fn ints(k: i64) -> i64 = match k { 0 => 5, 1 => 7, _ => 9 }
fn reals(k: i64) -> f64 = match k { 0 => 5, 1 => 7.5, _ => 9 }",
    );
    let k = |k: i64| Value::scalar(DType::I64, k as f64);
    for (kk, want) in [(0, 1.5), (1, 3.0), (2, 2.0)] {
        assert_eq!(
            run_both(&p, "g", &[f64s(1.5), k(kk)]).unwrap()[0].as_scalar(),
            want
        );
    }
    let x = Value::array(DType::F32, vec![4], vec![1.0, 2.0, 3.0, 4.0]);
    let got = run_both(&p, "e", &[x, ints(&[0, 1, 2, 3])]).unwrap();
    assert_eq!(got[0].dtype, DType::F32);
    assert_eq!(got[0].data, vec![1.0, 0.5, 2.0, 0.25]);
    assert_eq!(run_both(&p, "ints", &[k(1)]).unwrap()[0].dtype, DType::I64);
    assert_eq!(run_both(&p, "reals", &[k(1)]).unwrap()[0].as_scalar(), 7.5);
}

#[test]
fn a_scalar_branch_is_broadcast_under_a_condition_on_an_integer_array() {
    // Found by the random programs: the scalar branch was compared with
    // the condition's type (i64[N]) and left a scalar.
    let p = prog(
        "fn d[N](x: f64[N], s: f64, kind: i64[N]) -> f64[N] = if kind == 0 { s } else { x }
fn f[N](x: f64[N], s: f64, kind: i64[N]) -> f64[N] = match kind { 0 => x, _ => s }
fn h[N](x: f64[N], s: f64, mask: bool[N]) -> f64[N] = match mask { true => s, false => x }
fn l[N](x: f64[N], s: f64, kind: i64[N]) -> f64 = +/(if kind == 0 { s * s } else { x * s })
@grad(x, s)
fn dl[N](x: f64[N], s: f64, kind: i64[N]) -> (f64[N], f64) = l(x, s, kind)",
    );
    let (x, s, kind) = (vec64(&[1.0, 2.0, 3.0]), f64s(9.0), ints(&[0, 1, 0]));
    let mask = Value::array(DType::Bool, vec![3], vec![1.0, 0.0, 1.0]);
    let got = run_both(&p, "d", &[x.clone(), s.clone(), kind.clone()]).unwrap();
    assert_eq!(got[0].data, vec![9.0, 2.0, 9.0]);
    let got = run_both(&p, "f", &[x.clone(), s.clone(), kind.clone()]).unwrap();
    assert_eq!(got[0].data, vec![1.0, 9.0, 3.0]);
    let got = run_both(&p, "h", &[x.clone(), s, mask]).unwrap();
    assert_eq!(got[0].data, vec![9.0, 2.0, 9.0]);
    check_gradient(&p, "dl", "l", 2, &[x, f64s(0.7), kind], "scalar branch");
}

#[test]
fn bounds_admit_their_types_and_refuse_others() {
    let p = prog(
        "fn total[T: Numeric, N](x: T[N]) -> T = +/x
fn smooth[T: Differentiable, N](x: T[N]) -> T = +/tanh(x)
fn mid[T: Float](a: T, b: T) -> T = (a + b) / 2
fn use_all(k: i64[3], x: f32[2], y: f64[2]) -> (i64, f32, f64, f64) =
  (total(k), smooth(x), smooth(y), mid(y[0], y[1]))",
    );
    let got = run_both(
        &p,
        "use_all",
        &[
            ints(&[1, 2, 3]),
            Value::array(DType::F32, vec![2], vec![0.5, 0.25]),
            vec64(&[1.0, 3.0]),
        ],
    )
    .unwrap();
    assert_eq!(got[0].as_scalar(), 6.0);
    assert_eq!(got[3].as_scalar(), 2.0);
    let e = err("fn smooth[T: Differentiable, N](x: T[N]) -> T = +/tanh(x)
fn f(k: i64[3]) -> i64 = smooth(k)");
    assert!(
        e.contains("`T` of `smooth` must be Differentiable (f32 or f64, a type with derivatives), but argument `x` makes it i64")
            && e.contains("2:33"),
        "{e}"
    );
    let e = err("fn half[T: Float, N](a: T[N]) -> T[N] = a / 2
fn f(k: i64[2]) -> i64[2] = half(k)");
    assert!(e.contains("must be Float (f32 or f64)"), "{e}");
    let e = err("fn f[T: Real, N](x: T[N]) -> T = +/x");
    assert!(e.contains("unknown bound `Real`"), "{e}");
    let e = err("fn f[N: Float](x: f64[N]) -> f64 = +/x");
    assert!(e.contains("`N` is not an element type"), "{e}");
}

#[test]
fn mistakes_in_the_new_constructs_are_errors_at_the_place() {
    let cases: &[(&str, &str)] = &[
        (
            "fn f(k: i64) -> f64 = match k { 0 => 1.0, 1 => 2.0 }",
            "this `match` on an integer does not cover every value",
        ),
        (
            "fn f(k: i64) -> f64 = match k { 0 => 1.0, _ => 2.0, 1 => 3.0 }",
            "this pattern is never reached",
        ),
        (
            "fn f(k: i64) -> f64 = match k { 0 => 1.0, 0 => 2.0, _ => 3.0 }",
            "the pattern `0` is never reached",
        ),
        (
            "fn f(b: bool) -> f64 = match b { true => 1.0, 0 => 2.0 }",
            "the pattern `0` is an integer, but the value matched is a bool",
        ),
        (
            "fn f(b: bool) -> f64 = match b { true => 1.0 }",
            "this `match` on a bool does not cover every value",
        ),
        (
            "fn f(x: f64) -> f64 = match x { 0 => 1.0, _ => 2.0 }",
            "`match` takes an integer or a bool, but this has type f64",
        ),
        (
            "fn f(k: i64) -> f64 = match k { }",
            "this `match` has no arms",
        ),
        (
            "fn f(k: i64) -> f64 = match k { 1.5 => 2, _ => 3 }",
            "expected a pattern: an integer, `true`, `false` or `_`, found `1.5`",
        ),
        (
            "fn f(x: f64) -> f64 = x\n@vmap(y) fn g[B](x: f64[B]) -> f64[B] = f(x)",
            "`@vmap` names `y`, which is not a parameter of `g`",
        ),
        (
            "fn f(x: f64) -> f64 = x\n@vmap(x) fn g(x: f64) -> f64 = f(x)",
            "`@vmap` batches `x` along its first axis, but it has none",
        ),
        (
            "fn f(x: f64, y: f64) -> f64 = x*y\n@vmap(x, y) fn g[B, C](x: f64[B], y: f64[C]) -> f64[B] = f(x, y)",
            "the batched parameters must share their first axis",
        ),
        (
            "fn f(x: f64) -> f64 = x\n@vmap(x) @grad(x) fn g[B](x: f64[B]) -> f64[B] = f(x)",
            "`@vmap` stands alone",
        ),
        (
            "fn f(x: f64) -> f64 = x\n@vmap fn g[B](x: f64[B]) -> f64[B] = f(x)",
            "`@vmap` needs the names of the batched parameters",
        ),
        (
            "@grad(x) @grad(z) fn f(x: f64) -> f64 = x*x",
            "`@grad` names `z`, which is not a parameter of `f`",
        ),
        (
            "@grad(x) @grad(x) fn f(x: f64) -> f64 = x*x",
            "the function `df_dx` is defined twice",
        ),
        (
            "@grad(x) @foo(x) fn f(x: f64) -> f64 = x*x",
            "unknown attribute `@foo`",
        ),
    ];
    for (src, says) in cases {
        let e = err(src);
        assert!(e.contains(says), "{src}\n---\n{e}");
        // One error each: no consequence of it reported as well.
        assert_eq!(e.matches("error:").count(), 1, "{src}\n---\n{e}");
    }
}
