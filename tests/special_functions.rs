//! `log_sigmoid(x)` and `logaddexp(a, b)`: element-wise on numbers and
//! arrays of any rank, stable at both ends, with the right derivative at
//! their kinks (a half at `x = 0` and at a tie), in every mode; native code
//! gives the interpreter's bits, and numbers fold to the same values.

mod common;

use common::{arr, check_both_modes_and_second_order, err, eval, prog, run_both};

use egrad::internals::types::DType;
use egrad::Value;

const SRC: &str = r#"
fn ls[N](x: f64[N]) -> f64[N] = log_sigmoid(x)
fn lae[N](a: f64[N], b: f64[N]) -> f64[N] = logaddexp(a, b)
fn lae_row[N, M](a: f64[N, M], b: f64[M]) -> f64[N, M] = logaddexp(a, b)
fn lae_num(a: f64, b: f64) -> f64 = logaddexp(a, b) + log_sigmoid(a)
fn folded() -> (f64, f64, f64, f64, f64) =
  (log_sigmoid(0.0), logaddexp(1.0, 1.0), logaddexp(1000.0, 0.0), log_sigmoid(-800.0), logaddexp(-2, 3))
fn narrow[N](x: f32[N]) -> f32[N] = log_sigmoid(x) + logaddexp(x, 0.5)
fn loss[N](a: f64[N], b: f64[N]) -> f64 = +/(logaddexp(a, b) * a + log_sigmoid(a * b))
@grad(a, b)
fn dloss[N](a: f64[N], b: f64[N]) -> (f64[N], f64[N]) = loss(a, b)
@jvp(a, b)
fn loss_along[N](a: f64[N], b: f64[N], da: f64[N], db: f64[N]) -> f64 = loss(a, b)
fn g[N](a: f64[N], b: f64[N]) -> f64 {
  let (da, db) = dloss(a, b)
  +/(da .* b) + +/(db .* db)
}
@grad(a, b)
fn dg[N](a: f64[N], b: f64[N]) -> (f64[N], f64[N]) = g(a, b)
fn tie[N](a: f64[N], b: f64[N]) -> f64 = +/logaddexp(a, b) + +/log_sigmoid(a - b)
@grad(a, b)
fn dtie[N](a: f64[N], b: f64[N]) -> (f64[N], f64[N]) = tie(a, b)
"#;

fn vec64(xs: &[f64]) -> Value {
    Value::array(DType::F64, vec![xs.len()], xs.to_vec())
}

/// The textbook forms in std's arithmetic, where they do not overflow.
fn log_sigmoid(x: f64) -> f64 {
    -(-x).exp().ln_1p()
}
fn logaddexp(a: f64, b: f64) -> f64 {
    let m = a.max(b);
    m + ((a - m).exp() + (b - m).exp()).ln()
}

#[test]
fn values_are_stable_at_both_ends_and_special_values_are_right() {
    let p = prog(SRC);
    let xs = [-800.0, -30.0, -1.0, -1e-300, 0.0, 1e-300, 0.5, 30.0, 800.0];
    let got = run_both(&p, "ls", &[vec64(&xs)]).unwrap();
    for (g, &x) in got[0].data.iter().zip(&xs) {
        let want = if x < -700.0 { x } else { log_sigmoid(x) };
        assert!(
            (g - want).abs() <= 1e-15 * want.abs().max(1e-300),
            "log_sigmoid({x}) = {g}, not {want}"
        );
    }
    let inf = f64::INFINITY;
    let (a, b) = (
        [
            1.0,
            1000.0,
            -1e308,
            1e308,
            3.0,
            inf,
            -inf,
            -inf,
            f64::NAN,
            0.0,
        ],
        [1.0, 0.0, -1e308, 1e308, -4.0, 5.0, -inf, 2.0, 1.0, -0.0],
    );
    let got = run_both(&p, "lae", &[vec64(&a), vec64(&b)]).unwrap();
    let want = [
        1.0 + std::f64::consts::LN_2,
        1000.0,
        -1e308,
        1e308,
        logaddexp(3.0, -4.0),
        inf,
        -inf,
        2.0,
        f64::NAN,
        std::f64::consts::LN_2,
    ];
    for (k, (g, w)) in got[0].data.iter().zip(&want).enumerate() {
        assert!(
            (w.is_nan() && g.is_nan()) || (g - w).abs() <= 1e-15 * w.abs().max(1.0) || g == w,
            "logaddexp({}, {}) = {g}, not {w}",
            a[k],
            b[k]
        );
    }
    // Numbers fold to what the arrays compute.
    let folded = eval(p.ir("folded").unwrap(), &[]);
    let runtime = [
        eval(p.ir("ls").unwrap(), &[vec64(&[0.0, -800.0])])[0]
            .data
            .clone(),
        eval(
            p.ir("lae").unwrap(),
            &[vec64(&[1.0, 1000.0, -2.0]), vec64(&[1.0, 0.0, 3.0])],
        )[0]
        .data
        .clone(),
    ];
    let want = [
        runtime[0][0],
        runtime[1][0],
        runtime[1][1],
        runtime[0][1],
        runtime[1][2],
    ];
    for (f, w) in folded.iter().zip(&want) {
        assert_eq!(f.as_scalar().to_bits(), w.to_bits());
    }
}

#[test]
fn any_rank_scalars_broadcast_f32_and_native_code_gives_the_interpreters_bits() {
    let p = prog(SRC);
    for (s, &n) in [0usize, 1, 2, 3, 5, 9, 64].iter().enumerate() {
        let seed = s as u64;
        let mut x = arr(&[n], seed);
        x.data.iter_mut().for_each(|v| *v *= 40.0);
        let y = arr(&[n], seed + 50);
        run_both(&p, "ls", std::slice::from_ref(&x)).unwrap();
        run_both(&p, "lae", &[x.clone(), y.clone()]).unwrap();
        for f in ["loss", "dloss", "g", "dg", "tie", "dtie"] {
            run_both(&p, f, &[x.clone(), y.clone()]).unwrap();
        }
        let m = arr(&[3, n], seed + 100);
        let got = run_both(&p, "lae_row", &[m.clone(), y.clone()]).unwrap();
        for (k, g) in got[0].data.iter().enumerate() {
            let w = logaddexp(m.data[k], y.data[k % n.max(1)]);
            assert!(
                (g - w).abs() <= 1e-14 * (1.0 + w.abs()),
                "row {k}: {g} vs {w}"
            );
        }
        let x32 = Value::array(
            DType::F32,
            vec![n],
            x.data.iter().map(|&v| f64::from(v as f32)).collect(),
        );
        let got = run_both(&p, "narrow", &[x32]).unwrap();
        assert_eq!(got[0].dtype, DType::F32);
    }
    let got = run_both(
        &p,
        "lae_num",
        &[
            Value::scalar(DType::F64, 0.25),
            Value::scalar(DType::F64, -2.0),
        ],
    )
    .unwrap();
    let w = logaddexp(0.25, -2.0) + log_sigmoid(0.25);
    assert!((got[0].as_scalar() - w).abs() <= 1e-15, "{got:?} vs {w}");
}

#[test]
fn derivatives_match_finite_differences_in_both_modes_and_the_second_order() {
    let p = prog(SRC);
    let mut a = arr(&[7], 1);
    a.data.iter_mut().for_each(|v| *v *= 3.0);
    let b = arr(&[7], 2);
    check_both_modes_and_second_order(
        &p,
        ["loss", "dloss", "loss_along", "g", "dg"],
        2,
        &[a, b],
        "logaddexp and log_sigmoid",
    );
}

/// At a tie and at 0, where `max`, `min` and `abs` have kinks, each side
/// gets half: the derivative of `logaddexp(a, a)` is 1/2 per operand, of
/// `log_sigmoid` at 0 is 1/2.
#[test]
fn the_derivative_at_the_kinks_is_a_half() {
    let p = prog(SRC);
    let a = vec64(&[0.0, 2.0, -7.5]);
    let got = eval(p.ir("dtie").unwrap(), &[a.clone(), a.clone()]);
    // d/da: 1/2 from logaddexp, 1/2 from log_sigmoid(a - b) at 0.
    assert_eq!(got[0].data, vec![1.0; 3]);
    assert_eq!(got[1].data, vec![0.0; 3]);
    run_both(&p, "dtie", &[a.clone(), a]).unwrap();
}

#[test]
fn integers_and_wrong_arities_are_errors_and_own_functions_come_first() {
    let e = err("fn f(k: i64) -> f64 = log_sigmoid(k)");
    assert!(
        e.contains("`log_sigmoid` needs floating-point operands"),
        "{e}"
    );
    let e = err("fn f(x: f64) -> f64 = logaddexp(x)");
    assert!(e.contains("logaddexp"), "{e}");
    let e = err("fn f(x: f64[3], y: f32[3]) -> f64[3] = logaddexp(x, y)");
    assert!(e.contains("mixes element types"), "{e}");
    // A program's own function of the name replaces the builtin.
    let own = prog("fn log_sigmoid(x: f64) -> f64 = 2.0 * x\nfn f(x: f64) -> f64 = log_sigmoid(x)");
    let got = eval(own.ir("f").unwrap(), &[Value::scalar(DType::F64, 3.0)]);
    assert_eq!(got[0].as_scalar(), 6.0);
}

const GAMMA_SRC: &str = r#"
fn lg[N](x: f64[N]) -> f64[N] = lgamma(x)
fn dg[N](x: f64[N]) -> f64[N] = digamma(x)
fn tg[N](x: f64[N]) -> f64[N] = trigamma(x)
fn all32[N](x: f32[N]) -> f32[N] = lgamma(x) + digamma(x) + trigamma(x) + tetragamma(x)
fn loss[N](x: f64[N]) -> f64 = +/(lgamma(x) .* x + digamma(x))
@grad(x)
fn dloss[N](x: f64[N]) -> f64[N] = loss(x)
@jvp(x)
fn loss_along[N](x: f64[N], dx: f64[N]) -> f64 = loss(x)
fn lgsum[N](x: f64[N]) -> f64 = +/(lgamma(x) .* x)
@grad(x)
fn dlgsum[N](x: f64[N]) -> f64[N] = lgsum(x)
fn g[N](x: f64[N]) -> f64 = +/(dlgsum(x) .* x)
@grad(x)
fn dg2[N](x: f64[N]) -> f64[N] = g(x)
@jvp(x)
fn lgsum_along[N](x: f64[N], dx: f64[N]) -> f64 = lgsum(x)
"#;

/// `lgamma`, `digamma` and `trigamma`: known values, the recurrence and
/// the reflection through native code (the interpreter's bits, f64 and
/// f32), derivatives in both modes and the second order against central
/// differences, and the errors of a third derivative and of an object file.
#[test]
fn gamma_functions_their_derivatives_and_their_limits() {
    let p = prog(GAMMA_SRC);
    let euler = 0.577_215_664_901_532_9;
    let pi = std::f64::consts::PI;
    let x = vec64(&[0.5, 1.0, 2.0, 10.0, -0.5, -2.5]);
    let lg = run_both(&p, "lg", std::slice::from_ref(&x))
        .unwrap()
        .remove(0)
        .data;
    let want = [
        pi.sqrt().ln(),
        0.0,
        0.0,
        362_880f64.ln(),
        (2.0 * pi.sqrt()).ln(),
        (8.0 * pi.sqrt() / 15.0).ln(),
    ];
    for (g, w) in lg.iter().zip(&want) {
        assert!(
            (g - w).abs() <= 1e-14 * w.abs().max(1.0),
            "lgamma: {g} vs {w}"
        );
    }
    let dg = run_both(&p, "dg", std::slice::from_ref(&x))
        .unwrap()
        .remove(0)
        .data;
    let want = [-euler - 2.0 * 2f64.ln(), -euler, 1.0 - euler];
    for (g, w) in dg.iter().zip(&want) {
        assert!(
            (g - w).abs() <= 1e-15 * w.abs().max(1.0),
            "digamma: {g} vs {w}"
        );
    }
    // ψ(1 - x) - ψ(x) = π cot(πx) at x = -0.5: ψ(1.5) - ψ(-0.5) = 0.
    let d15 = eval(p.ir("dg").unwrap(), &[vec64(&[1.5])])[0].data[0];
    assert!((d15 - dg[4]).abs() <= 1e-15, "{d15} vs {}", dg[4]);
    let tg = run_both(&p, "tg", std::slice::from_ref(&x))
        .unwrap()
        .remove(0)
        .data;
    assert!((tg[0] - pi * pi / 2.0).abs() <= 1e-14 && (tg[1] - pi * pi / 6.0).abs() <= 1e-15);
    // Poles: NaN.
    let poles = run_both(&p, "dg", &[vec64(&[0.0, -1.0, -3.0])])
        .unwrap()
        .remove(0)
        .data;
    assert!(poles.iter().all(|v| v.is_nan()), "{poles:?}");
    let x32 = Value::array(DType::F32, vec![4], vec![0.25, 1.5, 3.0, -0.75]);
    run_both(&p, "all32", &[x32]).unwrap();
    // Derivatives, both modes, negative inputs (the reflections) too.
    let args = [vec64(&[0.4, 1.3, 2.7, 5.5, -0.3, -1.6])];
    check_both_modes_and_second_order(
        &p,
        ["lgsum", "dlgsum", "lgsum_along", "g", "dg2"],
        1,
        &args,
        "lgamma",
    );
    common::check_gradient(&p, "dloss", "loss", 1, &args, "digamma");
    common::check_jvp(&p, "loss_along", "loss", 1, &args, "digamma");
    // A third derivative of lgamma goes through tetragamma; a fourth is
    // refused.
    let third = format!(
        "{GAMMA_SRC}\nfn h[N](x: f64[N]) -> f64 = +/(dg2(x) .* x)\n@grad(x)\nfn dh[N](x: f64[N]) -> f64[N] = h(x)"
    );
    let p3 = common::prog(&third);
    common::check_gradient(&p3, "dh", "h", 1, &args, "third derivative of lgamma");
    let e = err(&format!(
        "{third}\nfn k[N](x: f64[N]) -> f64 = +/(dh(x) .* x)\n@grad(x)\nfn dk[N](x: f64[N]) -> f64[N] = k(x)"
    ));
    assert!(
        e.contains("`tetragamma`") && e.contains("no derivative yet"),
        "{e}"
    );
    // Object files call the C library's `lgamma`, and egrad's own
    // `digamma` in its runtime library.
    for (f, runtime) in [
        ("lg", &[][..]),
        ("dg", &["egrad_digamma"][..]),
        ("dlgsum", &["egrad_digamma"][..]),
    ] {
        let opts = egrad::BuildOptions {
            function: f.into(),
            ..Default::default()
        };
        let built = egrad::build(&p, &opts).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert_eq!(built.runtime_calls, runtime, "{f}");
    }
}
