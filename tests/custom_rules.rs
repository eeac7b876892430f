//! Functions with their own derivative rules (`@custom_vjp`,
//! `@custom_jvp`): the rule is what AD uses (a rule deliberately different
//! from the body's derivative shows in the values, in reverse and forward
//! mode, optimized and native), a missing rule is made by transposing the
//! other, second derivatives differentiate the rule, rules work inside
//! loops, and mistakes are errors at the place.

mod common;

use common::{check_gradient, check_jvp, err, prog, run_both};
use egrad::internals::pipeline::{optimize_gradient, Options};
use egrad::internals::types::value::Value;
use egrad::internals::types::DType;

fn f64s(x: f64) -> Value {
    Value::scalar(DType::F64, x)
}

fn vec64(xs: &[f64]) -> Value {
    Value::array(DType::F64, vec![xs.len()], xs.to_vec())
}

fn close(a: f64, b: f64, what: &str) {
    assert!(
        (a - b).abs() <= 1e-12 * (1.0 + b.abs()),
        "{what}: {a} vs {b}"
    );
}

/// `sq` squares, but its rule says the derivative is `3x`: every way of
/// differentiating it must give `3x`, never the body's `2x`.
const WRONG_RULE: &str = "@custom_vjp(three)
fn sq(x: f64) -> f64 = x * x
fn three(x: f64, g: f64) -> f64 = 3 * g * x
@custom_jvp(three_t)
fn sq2(x: f64) -> f64 = x * x
fn three_t(x: f64, dx: f64) -> f64 = 3 * x * dx
@grad(x)
fn dsq(x: f64) -> f64 = sq(x)
@jvp(x)
fn jsq(x: f64, dx: f64) -> f64 = sq(x)
@grad(x)
fn dsq2(x: f64) -> f64 = sq2(x)
@jvp(x)
fn jsq2(x: f64, dx: f64) -> f64 = sq2(x)
fn twice(x: f64) -> f64 = sq(sin(x)) + sq2(x)
@grad(x)
fn dtwice(x: f64) -> f64 = twice(x)";

#[test]
fn the_rule_is_used_in_every_mode_not_the_body() {
    let p = prog(WRONG_RULE);
    for x in [-1.5, 0.0, 0.5, 2.0] {
        // Its value is the body's.
        close(
            run_both(&p, "sq", &[f64s(x)]).unwrap()[0].as_scalar(),
            x * x,
            "value",
        );
        for f in ["dsq", "dsq2"] {
            let g = run_both(&p, f, &[f64s(x)]).unwrap()[0].as_scalar();
            close(g, 3.0 * x, &format!("{f}({x})"));
        }
        for f in ["jsq", "jsq2"] {
            let t = run_both(&p, f, &[f64s(x), f64s(2.0)]).unwrap()[0].as_scalar();
            close(t, 6.0 * x, &format!("{f}({x})"));
        }
        let want = 3.0 * x.sin() * x.cos() + 3.0 * x;
        close(
            run_both(&p, "dtwice", &[f64s(x)]).unwrap()[0].as_scalar(),
            want,
            "chain rule through the rules",
        );
        // The optimizer differentiates the primal again: the same rule,
        // interpreted and native, at both ends of the memory tradeoff.
        for lambda in [0.0, 1e6] {
            let g = optimize_gradient(&p, &Options::default().function("dtwice").lambda(lambda))
                .unwrap();
            let a = [f64s(x)];
            let refs: Vec<&Value> = a.iter().collect();
            let vg = egrad::internals::ir::interp::run(g.value_and_grad_ir(), &refs).unwrap();
            close(vg[1].as_scalar(), want, "optimized");
            let native = g.compile().unwrap().native().call(&refs).unwrap();
            assert!(native[1].bits_eq(&vg[1]));
        }
    }
}

#[test]
fn the_example_rules_agree_with_finite_differences_and_fix_the_kink() {
    let p = prog(include_str!("../examples/custom_vjp.eg"));
    let (w, x, y) = (
        vec64(&[0.5, 1.0, -2.0, 3.0, 0.0]),
        vec64(&[1.0, 2.0, 3.0, 4.0, -1.0]),
        f64s(0.5),
    );
    check_gradient(
        &p,
        "dloss",
        "loss",
        1,
        &[w.clone(), x.clone(), y.clone()],
        "custom rules",
    );
    check_jvp(
        &p,
        "loss_along",
        "loss",
        1,
        &[w.clone(), x.clone(), y.clone()],
        "custom rules",
    );
    // The Hessian-vector product (the rules differentiated) against
    // central differences of the gradient.
    let v = [0.3, -0.2, 0.5, 0.1, 0.7];
    let h = 1e-6;
    let grad_at = |s: f64| {
        let wd: Vec<f64> = w.data.iter().zip(&v).map(|(a, b)| a + s * h * b).collect();
        run_both(&p, "dloss", &[vec64(&wd), x.clone(), y.clone()]).unwrap()[0]
            .data
            .clone()
    };
    let (gp, gm) = (grad_at(1.0), grad_at(-1.0));
    let hv = run_both(&p, "hvp", &[w.clone(), x.clone(), y.clone(), vec64(&v)]).unwrap();
    for (k, got) in hv[0].data.iter().enumerate() {
        let want = (gp[k] - gm[k]) / (2.0 * h);
        assert!(
            (got - want).abs() < 1e-6 * (1.0 + want.abs()),
            "hvp[{k}]: {got} vs {want}"
        );
    }
    // At 0 the stable softplus's body has kinks (`max`, `abs`): its own
    // derivative there is 1, the rule's 1/2, which is right.
    let q = prog(&format!(
        "{}\nfn plain[N](x: f64[N]) -> f64 = +/(max(x, 0) + log1p(exp(-abs(x))))
@grad(x)
fn dplain[N](x: f64[N]) -> f64[N] = plain(x)
fn ruled[N](x: f64[N]) -> f64 = +/stable_softplus(x)
@grad(x)
fn druled[N](x: f64[N]) -> f64[N] = ruled(x)",
        include_str!("../examples/custom_vjp.eg")
    ));
    let at = [vec64(&[0.0, 800.0, -800.0])];
    assert_eq!(
        run_both(&q, "dplain", &at).unwrap()[0].data,
        vec![1.0, 1.0, 0.0]
    );
    assert_eq!(
        run_both(&q, "druled", &at).unwrap()[0].data,
        vec![0.5, 1.0, 0.0]
    );
    assert_eq!(
        run_both(&q, "ruled", &at).unwrap()[0].as_scalar(),
        2f64.ln() + 800.0
    );
}

#[test]
fn rules_inside_loops_with_static_and_runtime_counts() {
    let p = prog(
        "@custom_vjp(sp_vjp)
fn sp[N](x: f64[N]) -> f64[N] = log1p(exp(x))
fn sp_vjp[N](x: f64[N], g: f64[N]) -> f64[N] = g / (1 + exp(-x))
fn relax[N](x: f64[N], w: f64[N]) -> f64 = +/iterate(3000, x, s => s + 0.001 * (sp(w .* s) - s))
@grad(x, w)
fn drelax[N](x: f64[N], w: f64[N]) -> (f64[N], f64[N]) = relax(x, w)
fn count[N](x: f64[N], n: i64) -> f64 = +/iterate(n, x, s => s + 0.01 * (sp(s) - s))
@grad(x)
fn dcount[N](x: f64[N], n: i64) -> f64[N] = count(x, n)
@jvp(x)
fn jcount[N](x: f64[N], n: i64, dx: f64[N]) -> f64 = count(x, n)",
    );
    let ir = p.ir("drelax").unwrap().to_string();
    assert!(ir.contains("loopvjp"), "a real loop:\n{ir}");
    let x = vec64(&[0.1, -0.4, 0.7]);
    let w = vec64(&[0.5, 1.5, -0.5]);
    check_gradient(&p, "drelax", "relax", 2, &[x.clone(), w], "in a loop");
    let n = Value::scalar(DType::I64, 40.0);
    check_gradient(
        &p,
        "dcount",
        "count",
        1,
        &[x.clone(), n.clone()],
        "run-time count",
    );
    check_jvp(&p, "jcount", "count", 1, &[x, n], "run-time count");
}

#[test]
fn a_rule_is_differentiated_for_second_derivatives() {
    // d/dx of sp's rule sigmoid(x) is sigmoid(x)(1 - sigmoid(x)).
    let p = prog(
        "@custom_vjp(sp_vjp)
fn sp(x: f64) -> f64 = log1p(exp(x))
fn sp_vjp(x: f64, g: f64) -> f64 = g / (1 + exp(-x))
@grad(x)
fn d1(x: f64) -> f64 = sp(x)
@grad(x)
fn d2(x: f64) -> f64 = d1(x)
@jvp(x)
fn fwd_over_rev(x: f64, dx: f64) -> f64 = d1(x)",
    );
    for x in [-2.0f64, 0.0, 0.3, 4.0] {
        let s = 1.0 / (1.0 + (-x).exp());
        close(
            run_both(&p, "d1", &[f64s(x)]).unwrap()[0].as_scalar(),
            s,
            "d1",
        );
        close(
            run_both(&p, "d2", &[f64s(x)]).unwrap()[0].as_scalar(),
            s * (1.0 - s),
            "d2",
        );
        let t = run_both(&p, "fwd_over_rev", &[f64s(x), f64s(1.0)]).unwrap();
        close(t[0].as_scalar(), s * (1.0 - s), "jvp of d1");
    }
}

#[test]
fn integer_parameters_have_no_rule_and_untaken_branches_give_no_nan() {
    // The rule returns cotangents of the float parameters only; an `if`
    // whose untaken side runs a rule that is infinite there gives 0.
    let p = prog(
        "@custom_vjp(scaled_vjp)
fn scaled[N](k: i64[N], x: f64[N]) -> f64[N] = x * f64(k)
fn scaled_vjp[N](k: i64[N], x: f64[N], g: f64[N]) -> f64[N] = g * f64(k)
@custom_vjp(root_vjp)
fn root(x: f64) -> f64 = sqrt(x)
fn root_vjp(x: f64, g: f64) -> f64 = g / (2 * sqrt(x))
fn guarded[N](k: i64[N], x: f64[N]) -> f64 =
  +/scaled(k, x) + (if x[0] > 0 { root(x[0]) } else { 0 })
@grad(x)
fn dguarded[N](k: i64[N], x: f64[N]) -> f64[N] = guarded(k, x)",
    );
    let k = Value::array(DType::I64, vec![3], vec![2.0, -1.0, 5.0]);
    let g = run_both(&p, "dguarded", &[k.clone(), vec64(&[-4.0, 1.0, 2.0])]).unwrap();
    assert_eq!(g[0].data, vec![2.0, -1.0, 5.0]);
    let g = run_both(&p, "dguarded", &[k, vec64(&[4.0, 1.0, 2.0])]).unwrap();
    assert_eq!(g[0].data, vec![2.25, -1.0, 5.0]);
}

#[test]
fn an_argument_the_body_never_reads_is_not_computed() {
    // `two`'s body ignores its argument, so calling it computes nothing
    // of the argument: the index out of range there (k = 2 over two
    // elements) is an error for neither the interpreter nor native code,
    // as for a `let` never used (found by tests/fuzz.rs, seed
    // 0x3cf1f915b2e6f763, where the interpreter failed and native code
    // did not). The gradient reads the argument through the rule, so
    // there the index is out of range for both.
    let p = prog(
        "@custom_vjp(two_vjp)
fn two[M](x: f64[M]) -> f64 = 2
fn two_vjp[M](x: f64[M], g: f64) -> f64[M] = x * g
fn f[M](a: f64[M], k: i64) -> f64 = two(a[k] * a)
@grad(a)
fn df[M](a: f64[M], k: i64) -> f64[M] = f(a, k)",
    );
    let k = Value::scalar(DType::I64, 2.0);
    let a = vec64(&[1.0, 2.0]);
    let v = run_both(&p, "f", &[a.clone(), k.clone()]).unwrap();
    assert_eq!(v[0].as_scalar(), 2.0);
    let e = run_both(&p, "df", &[a.clone(), k]).unwrap_err();
    assert!(e.contains("index 2 is out of range"), "{e}");
    // At k = 1 the rule's cotangent of x = a[1] * a is x itself, [2, 4];
    // through x it is a[1] * [2, 4] plus, at a[1], +/(a * [2, 4]) = 10.
    let g = run_both(&p, "df", &[a, Value::scalar(DType::I64, 1.0)]).unwrap();
    assert_eq!(g[0].data, vec![4.0, 18.0]);
}

#[test]
fn the_tangent_of_an_argument_not_differentiated_is_a_symbolic_zero() {
    // The rules' coefficient of `a`'s tangent is NaN at `a < 0`; `a` is not
    // differentiated, so that term is absent, before and after the
    // optimizer (found by the random programs: unoptimized it was
    // NaN · 0). Both a JVP rule and one made from a VJP rule.
    use egrad::internals::pipeline::optimize_ir;
    let p = prog(
        "@custom_jvp(p_jvp)
fn p(x: f64, a: f64) -> f64 = x
fn p_jvp(x: f64, a: f64, dx: f64, da: f64) -> f64 = dx + log(a) * da
@jvp(x)
fn dp(x: f64, a: f64, dx: f64) -> f64 = p(x, a)
@custom_vjp(q_vjp)
fn q(x: f64, a: f64) -> f64 = x
fn q_vjp(x: f64, a: f64, g: f64) -> (f64, f64) = (g, log(a) * g)
@jvp(x)
fn dq(x: f64, a: f64, dx: f64) -> f64 = q(x, a)",
    );
    let args = [f64s(1.0), f64s(-1.0), f64s(2.0)];
    for f in ["dp", "dq"] {
        let got = run_both(&p, f, &args).unwrap();
        assert_eq!(got[0].as_scalar(), 2.0, "{f}");
        let opt = optimize_ir(p.ir(f).unwrap(), &Options::default())
            .unwrap()
            .after;
        let refs: Vec<&Value> = args.iter().collect();
        let o = egrad::internals::ir::interp::run(&opt, &refs).unwrap();
        assert_eq!(o[0].as_scalar(), 2.0, "{f} optimized");
    }
}

#[test]
fn mistakes_with_rules_are_errors_at_the_place() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "@custom_vjp(r)\nfn f(x: f64) -> f64 = x * x\nfn r(x: f64) -> f64 = 2 * x",
            "the rule `r` of `f` must be (f64, f64) -> f64, with `f`'s size parameters, but it is (f64) -> f64",
            "1:13",
        ),
        (
            "@custom_vjp(nowhere)\nfn f(x: f64) -> f64 = x * x",
            "`@custom_vjp` names `nowhere`, but there is no function of that name",
            "1:13",
        ),
        (
            "@custom_vjp(r)\nfn f(static k: i64, x: f64) -> f64 = x * f64(k)\nfn r(x: f64, g: f64) -> f64 = g",
            "a function with its own derivative rules cannot have them yet",
            "1:1",
        ),
        (
            "@custom_vjp(r) @grad(x)\nfn f(x: f64) -> f64 = x * x\nfn r(x: f64, g: f64) -> f64 = g",
            "`f` has its own derivative rules, so it cannot also be a derived function",
            "1:16",
        ),
        (
            "@custom_vjp(r)\nfn f(x: f64) -> f64 = x * x\nfn r(x: f64, g: f64) -> f64 = g * f(x)",
            "calls itself",
            "",
        ),
        (
            "@custom_vjp(r) @custom_vjp(r)\nfn f(x: f64) -> f64 = x * x\nfn r(x: f64, g: f64) -> f64 = g",
            "`f` has two `@custom_vjp` rules",
            "1:16",
        ),
        (
            "@custom_vjp\nfn f(x: f64) -> f64 = x * x",
            "`@custom_vjp` names one function, the rule",
            "1:1",
        ),
        (
            "@custom_vjp(r)\nfn f[N](x: f64[N]) -> f64[N] = x * x\nfn r[N](x: f64[N], g: f64[N]) -> f64[N] = 2 * g * x
fn g[N](x: f64[N]) -> f64[N, N] = tabulate[N](i => f(x * x[i]))",
            "has its own derivative rules, and is called here on values that depend on the index of `tabulate`",
            "4:52",
        ),
    ];
    for (src, says, at) in cases {
        let e = err(src);
        assert!(e.contains(says), "{src}\n---\n{e}");
        assert!(
            e.contains(&format!("<input>:{at}")),
            "{src}\n--- at {at}\n{e}"
        );
    }
}
