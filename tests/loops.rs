//! Long `iterate`s as real loops: the checker emits a loop (not thousands
//! of unrolled steps), the loop computes what the unrolled steps compute,
//! its gradient (reverse mode through the tape, at every checkpoint choice
//! the optimizer may make) matches central finite differences, forward mode
//! agrees with reverse mode, and the JIT equals the interpreter.

mod common;

use egrad::internals::backend::{compile, BackendOptions};
use egrad::internals::ir::interp::run;
use egrad::internals::ir::Function;
use egrad::internals::ops::Op;
use egrad::internals::pipeline::{optimize_gradient, Options};
use egrad::internals::types::value::Value;
use egrad::Program;

const PROGRAMS: &str = r#"
fn pendulum(static steps: i64, static dt: f64, k: f64, c: f64) -> f64 {
  let (theta, omega) = iterate(steps, (1.0, 0.0), (th, om) =>
    (th + dt * om, om + dt * (-k * sin(th) - c * om)))
  theta * theta
}
fn long(k: f64, c: f64) -> f64 = pendulum(1000, 0.01, k, c)
fn short(k: f64, c: f64) -> f64 = pendulum(10, 0.01, k, c)
@grad(k, c)
fn dlong(k: f64, c: f64) -> (f64, f64) = pendulum(1000, 0.01, k, c)

// A vector state, a vector and a scalar read from outside the step.
fn decay[N](x: f64[N], w: f64[N], a: f64) -> f64 =
  +/iterate(700, x, s => s + 0.01 * (tanh(s .* w) - a * s))
@grad(x, w, a)
fn ddecay[N](x: f64[N], w: f64[N], a: f64) -> (f64[N], f64[N], f64) =
  +/iterate(700, x, s => s + 0.01 * (tanh(s .* w) - a * s))

// A scalar riding along a vector state.
fn mixed[N](x: f64[N], a: f64) -> f64 {
  let (s, t) = iterate(800, (x, a), (s, t) =>
    (s * 0.999 + 0.001 * sin(t), t + 0.001 * +/(s .* s)))
  t + +/s
}
@grad(x, a)
fn dmixed[N](x: f64[N], a: f64) -> (f64[N], f64) {
  let (s, t) = iterate(800, (x, a), (s, t) =>
    (s * 0.999 + 0.001 * sin(t), t + 0.001 * +/(s .* s)))
  t + +/s
}

// A loop inside a loop's step.
fn nested(a: f64, b: f64) -> f64 =
  iterate(255, a, s => iterate(520, s, t => t + 0.0001 * sin(t * b)))
@grad(a, b)
fn dnested(a: f64, b: f64) -> (f64, f64) =
  iterate(255, a, s => iterate(520, s, t => t + 0.0001 * sin(t * b)))
"#;

fn program() -> Program {
    Program::parse(PROGRAMS).unwrap_or_else(|e| panic!("{e}"))
}

fn loops_in(f: &Function) -> usize {
    f.stmts
        .iter()
        .filter(|s| matches!(s.op, Op::Loop(..)))
        .count()
}

fn scalar(x: f64) -> Value {
    Value::scalar(egrad::internals::types::DType::F64, x)
}

#[test]
fn a_long_iterate_is_a_loop_and_a_short_one_is_unrolled() {
    let p = program();
    let long = p.ir("long").unwrap();
    assert_eq!(loops_in(long), 1, "{long}");
    // Steps whose state still held constants are unrolled ahead of it.
    assert_eq!(long.loops[0].static_count(), Some(998), "{long}");
    assert!(long.stmts.len() < 60, "{long}");
    let short = p.ir("short").unwrap();
    assert_eq!(loops_in(short), 0, "{short}");
    assert!(short.loops.is_empty());
    assert_eq!(loops_in(p.ir("mixed").unwrap()), 1);
    let nested = p.ir("nested").unwrap();
    assert_eq!(loops_in(nested), 1, "{nested}");
    assert_eq!(loops_in(&nested.loops[0].body), 1, "{nested}");
}

/// The same 1000 Euler steps written out in Rust, in the same order.
fn pendulum_reference(k: f64, c: f64) -> f64 {
    let (mut th, mut om) = (1.0f64, 0.0f64);
    for _ in 0..1000 {
        let next_th = th + 0.01 * om;
        let next_om = om + 0.01 * (-k * th.sin() - c * om);
        th = next_th;
        om = next_om;
    }
    th * th
}

#[test]
fn the_loop_computes_the_steps() {
    let p = program();
    let f = p.ir("long").unwrap();
    for (k, c) in [(9.81, 0.5), (2.0, 0.0), (0.3, 1.7)] {
        let got = run(f, &[&scalar(k), &scalar(c)]).unwrap()[0].as_scalar();
        let want = pendulum_reference(k, c);
        assert!(
            (got - want).abs() <= 1e-14 * want.abs(),
            "k={k} c={c}: {got} vs {want}"
        );
    }
}

/// Central differences of `f` at `args` with respect to every element.
fn central(f: &Function, args: &[Value]) -> Vec<Value> {
    let eval = |a: &[Value]| {
        let refs: Vec<&Value> = a.iter().collect();
        run(f, &refs).unwrap()[0].as_scalar()
    };
    let mut out = Vec::new();
    for i in 0..args.len() {
        let mut g = args[i].clone();
        if g.dtype == egrad::internals::types::DType::I64 {
            // A count: no derivative.
            out.push(g);
            continue;
        }
        for j in 0..g.data.len() {
            let h = 1e-6 * (1.0 + args[i].data[j].abs());
            let mut up = args.to_vec();
            up[i].data[j] += h;
            let mut down = args.to_vec();
            down[i].data[j] -= h;
            g.data[j] = (eval(&up) - eval(&down)) / (2.0 * h);
        }
        out.push(g);
    }
    out
}

fn inputs(f: &Function) -> Vec<Value> {
    common::sample_args(f, 5)
}

#[test]
fn gradients_through_loops_match_finite_differences_at_every_lambda() {
    let p = program();
    for (primal, grad) in [
        ("long", "dlong"),
        ("decay", "ddecay"),
        ("mixed", "dmixed"),
        ("nested", "dnested"),
    ] {
        let f = p.ir(primal).unwrap();
        let mut args = inputs(f);
        if primal == "long" {
            args = vec![scalar(9.81), scalar(0.5)];
        }
        let want = central(f, &args);
        let refs: Vec<&Value> = args.iter().collect();
        for lambda in [0.0, 0.25, 2.5, 16.0, 1e9] {
            let g = optimize_gradient(&p, &Options::default().function(grad).lambda(lambda))
                .unwrap_or_else(|e| panic!("{grad}: {e}"));
            let vg = g.value_and_grad_ir();
            let got = run(vg, &refs).unwrap();
            for (gi, wi) in got[1..].iter().zip(&want) {
                for (x, y) in gi.data.iter().zip(&wi.data) {
                    assert!(
                        (x - y).abs() <= 1e-6 * (1.0 + y.abs()),
                        "{grad} at λ = {lambda}: {x} vs finite differences {y}\n{vg}"
                    );
                }
            }
            // Native code computes what the interpreter computes.
            let native = compile(vg, &BackendOptions::default())
                .unwrap_or_else(|e| panic!("{grad} at λ = {lambda}: {e}"));
            let jit = native.call(&refs).unwrap();
            for (a, b) in jit.iter().zip(&got) {
                assert_eq!(a.data, b.data, "{grad} at λ = {lambda}: JIT vs interpreter");
            }
        }
    }
}

/// euler_ode (suite program h) at the λ values of `egrad explore`'s
/// checkpointing front (tests/cli.rs): every choice, from storing each
/// state to a checkpoint every 64 states, gives the store-everything
/// gradient.
#[test]
fn every_checkpoint_choice_gives_the_same_euler_ode_gradient() {
    let p = Program::from_file("examples/suite/euler_ode.eg").unwrap();
    let args = [scalar(9.81), scalar(0.5)];
    let refs: Vec<&Value> = args.iter().collect();
    let mut want: Option<Vec<Value>> = None;
    let mut tapes = Vec::new();
    for lambda in [0.0, 3.0, 3.5, 6.0, 16.0, 1e6] {
        let g = optimize_gradient(
            &p,
            &Options::default().function("euler_ode_grad").lambda(lambda),
        )
        .unwrap();
        let vg = g.value_and_grad_ir();
        tapes.extend(vg.stmts.iter().filter_map(|s| match s.op {
            Op::LoopTape(_, k, _) => Some(k),
            _ => None,
        }));
        let got = compile(vg, &BackendOptions::default())
            .unwrap()
            .call(&refs)
            .unwrap();
        match &want {
            None => want = Some(got),
            Some(w) => {
                for (a, b) in got.iter().zip(w) {
                    for (x, y) in a.data.iter().zip(&b.data) {
                        assert!(
                            (x - y).abs() <= 1e-12 * y.abs(),
                            "λ = {lambda}: {x} vs {y}\n{vg}"
                        );
                    }
                }
            }
        }
    }
    tapes.sort_unstable();
    tapes.dedup();
    assert!(tapes.len() >= 4, "checkpoint intervals chosen: {tapes:?}");
}

#[test]
fn forward_mode_through_loops_agrees_with_reverse_mode() {
    let p = program();
    for name in ["long", "decay", "mixed", "nested"] {
        let f = p.ir(name).unwrap();
        let wrt: Vec<usize> = (0..f.params.len()).collect();
        let args = inputs(f);
        let refs: Vec<&Value> = args.iter().collect();
        let r = egrad::internals::differentiate::reverse::reverse(f, &wrt).unwrap();
        let grad = run(&r.gradient("g"), &refs).unwrap();
        let dirs: Vec<Value> = args
            .iter()
            .map(|a| Value {
                data: a.data.iter().map(|x| (3.0 * x + 1.0).sin()).collect(),
                ..a.clone()
            })
            .collect();
        let j = egrad::internals::differentiate::forward::jvp(f, &wrt, "j").unwrap();
        assert_eq!(loops_in(&j), loops_in(f), "{j}");
        let mut jargs = refs.clone();
        jargs.extend(dirs.iter());
        let tangent = run(&j, &jargs).unwrap()[0].as_scalar();
        let dot: f64 = grad
            .iter()
            .zip(&dirs)
            .flat_map(|(g, v)| g.data.iter().zip(&v.data).map(|(a, b)| a * b))
            .sum();
        assert!(
            (tangent - dot).abs() <= 1e-10 * (1.0 + dot.abs()),
            "{name}: jvp {tangent} vs <grad, v> {dot}"
        );
    }
}

#[test]
fn the_gradient_keeps_loops_and_their_tapes() {
    let p = program();
    let g = optimize_gradient(&p, &Options::default().function("dlong")).unwrap();
    let text = g.value_and_grad_ir().to_string();
    assert!(text.contains("looptape 0 1"), "{text}");
    assert!(text.contains("loopvjp 0 1 0"), "{text}");
    // A sparse tape at a large λ: a checkpoint every k states.
    let g = optimize_gradient(&p, &Options::default().function("dlong").lambda(16.0)).unwrap();
    let vg = g.value_and_grad_ir();
    let tapes: Vec<_> = vg
        .stmts
        .iter()
        .filter_map(|s| match s.op {
            Op::LoopTape(_, k, _) => Some(k),
            _ => None,
        })
        .collect();
    assert_eq!(tapes.len(), 1, "{vg}");
    assert!(tapes[0] >= 16, "{vg}");
}

/// A run-time count: `n: i64` is an argument, and the loop reads it when it
/// runs. One compiled gradient serves every `n`.
const RUNTIME: &str = r#"
fn relax[N](n: i64, x: f64[N], a: f64) -> f64 {
  let (s, t) = iterate(n, (x, a), (s, t) =>
    (s * 0.99 + 0.01 * tanh(t * s), t + 0.001 * +/s))
  t + +/(s .* s)
}
@grad(x, a)
fn drelax[N](n: i64, x: f64[N], a: f64) -> (f64[N], f64) = relax(n, x, a)
// A caller passing a static count, and one passing its own run-time count.
fn fixed[N](x: f64[N], a: f64) -> f64 = relax(300, x, a)
fn passed[N](m: i64, x: f64[N], a: f64) -> f64 = relax(m, x, a) + 1.0
"#;

#[test]
fn a_run_time_count_is_one_loop_for_every_count() {
    let p = Program::parse(RUNTIME).unwrap_or_else(|e| panic!("{e}"));
    let f = p.ir("relax").unwrap();
    assert_eq!(loops_in(f), 1, "{f}");
    assert_eq!(
        f.loops[0].count,
        egrad::internals::types::Dim::Param("n".into()),
        "{f}"
    );
    assert_eq!(
        p.ir("fixed").unwrap().loops[0].count,
        egrad::internals::types::Dim::Lit(300)
    );
    let x = Value::f64(&[0.3, -0.2, 0.5]);
    let a = scalar(0.7);
    let count = |n: u64| Value::scalar(egrad::internals::types::DType::I64, n as f64);
    for lambda in [0.25, 1e9] {
        let g =
            optimize_gradient(&p, &Options::default().function("drelax").lambda(lambda)).unwrap();
        let vg = g.value_and_grad_ir();
        let native = compile(vg, &BackendOptions::default()).unwrap();
        for n in [0u64, 1, 2, 7, 64, 333] {
            let nv = count(n);
            let args = [&nv, &x, &a];
            let got = run(vg, &args).unwrap();
            let jit = native.call(&args).unwrap();
            for (j, i) in jit.iter().zip(&got) {
                assert_eq!(
                    j.data, i.data,
                    "n = {n} at λ = {lambda}: JIT vs interpreter"
                );
            }
            // Against central differences of the primal at the same n.
            let want = central(f, &[nv.clone(), x.clone(), a.clone()]);
            for (gi, wi) in got[1..].iter().zip(&want[1..]) {
                for (u, w) in gi.data.iter().zip(&wi.data) {
                    assert!(
                        (u - w).abs() <= 1e-6 * (1.0 + w.abs()),
                        "n = {n} at λ = {lambda}: {u} vs finite differences {w}"
                    );
                }
            }
        }
    }
    // Forward mode with respect to `x` and `a` agrees with reverse mode.
    let r = egrad::internals::differentiate::reverse::reverse(f, &[1, 2]).unwrap();
    let j = egrad::internals::differentiate::forward::jvp(f, &[1, 2], "j").unwrap();
    let (dx, da) = (Value::f64(&[0.5, 0.1, -0.4]), scalar(-0.3));
    for n in [0u64, 3, 50] {
        let nv = count(n);
        let grad = run(&r.gradient("g"), &[&nv, &x, &a]).unwrap();
        let tangent = run(&j, &[&nv, &x, &a, &dx, &da]).unwrap()[0].as_scalar();
        let dot = grad[0]
            .data
            .iter()
            .zip(&dx.data)
            .map(|(p, q)| p * q)
            .sum::<f64>()
            + grad[1].as_scalar() * da.as_scalar();
        assert!(
            (tangent - dot).abs() <= 1e-12 * (1.0 + dot.abs()),
            "n = {n}: {tangent} vs {dot}"
        );
    }
    // The same numbers through a caller that passes its own count.
    let passed = p.ir("passed").unwrap();
    let relax = p.ir("relax").unwrap();
    for n in [0u64, 5, 40] {
        let nv = count(n);
        let want = run(relax, &[&nv, &x, &a]).unwrap()[0].as_scalar() + 1.0;
        let got = run(passed, &[&nv, &x, &a]).unwrap()[0].as_scalar();
        assert_eq!(got, want);
    }
    // A negative or fractional count is refused before anything runs.
    for (bad, says) in [
        (-1.0, "must not be negative, got -1"),
        (2.5, "must be a whole number, got 2.5"),
        (1e17, "is larger than 2^53"),
    ] {
        let nv = Value::scalar(egrad::internals::types::DType::I64, bad);
        let e = run(relax, &[&nv, &x, &a]).unwrap_err();
        assert!(e.message.contains(says), "{e}");
    }
}

#[test]
fn run_time_counts_have_clear_limits() {
    for (src, want) in [
        (
            "fn f(n: i64, x: f64) -> f64 = x * n",
            "`*` mixes element types f64 and i64",
        ),
        (
            "fn f(n: i64, x: f64) -> f64 = iterate(n, x, s => s * 0.5)\n@grad(n, x)\nfn df(n: i64, x: f64) -> (f64, f64) = f(n, x)",
            "cannot differentiate the i64 `n`",
        ),
        (
            "fn f[T, N](xs: f64[T, N], w: f64[N]) -> f64 = +/scan(xs, w, (s, x) => sin(s * x))\n@grad(w)\nfn df[T, N](xs: f64[T, N], w: f64[N]) -> f64[N] = f(xs, w)\n@grad(xs)\nfn d2f[T, N](xs: f64[T, N], w: f64[N]) -> f64[T, N] = +/df(xs, w)",
            "`d2f` cannot be differentiated: differentiating this gradient of a `scan` is not supported yet",
        ),
        (
            "fn f[N](n: i64, x: f64[N], k: f32) -> f64 { let (a, b) = iterate_until(n, (x, k), (a, b) => +/a > 1.0, (a, b) => (a, b)); +/a }",
            "a loop with a run-time count cannot carry this state",
        ),
        (
            "fn f[N](n: i64, x: f64[N], k: f32) -> f64 { let (a, b) = iterate(n, (x, k), (a, b) => (a, b)); +/a }",
            "a loop with a run-time count cannot carry this state",
        ),
    ] {
        let e = Program::parse(src).unwrap_err().to_string();
        assert!(e.contains(want), "{src}\n{e}");
    }
}

/// Second derivatives through a loop: `@jvp` of a gradient (forward over
/// reverse: the tape of states and tangents walked back with the tangent of
/// the body's VJP), and `@grad` of a gradient with respect to a scalar
/// (done by forward mode), against central differences of the gradient,
/// with a static and a run-time count, JIT and interpreter.
#[test]
fn second_derivatives_through_a_loop_match_finite_differences() {
    let src = "fn f(n: i64, x: f64, a: f64) -> f64 = iterate(n, x, s => 0.5 * s + sin(a * s))
@grad(x, a)
fn df(n: i64, x: f64, a: f64) -> (f64, f64) = f(n, x, a)
fn dfa(n: i64, x: f64, a: f64) -> f64 { let (gx, ga) = df(n, x, a); gx + 2 * ga }
@jvp(x, a)
fn hv(n: i64, x: f64, a: f64, dx: f64, da: f64) -> f64 = dfa(n, x, a)
@grad(a)
fn d2(n: i64, x: f64, a: f64) -> f64 = dfa(n, x, a)
fn g(x: f64, a: f64) -> f64 {
  let (s, t) = iterate(3000, (x, a), (s, t) => (0.999 * s + 0.001 * sin(t * s), t))
  s * t
}
@grad(a)
fn dg(x: f64, a: f64) -> f64 = g(x, a)
@grad(a)
fn d2g(x: f64, a: f64) -> f64 = dg(x, a)";
    let p = Program::parse(src).unwrap_or_else(|e| panic!("{e}"));
    let count = |n: i64| Value::scalar(egrad::internals::types::DType::I64, n as f64);
    let call = |name: &str, args: &[Value]| -> f64 {
        let f = p.ir(name).unwrap();
        let refs: Vec<&Value> = args.iter().collect();
        let i = run(f, &refs).unwrap()[0].as_scalar();
        let native = compile(f, &BackendOptions::default()).unwrap();
        let j = native.call(&refs).unwrap()[0].as_scalar();
        assert_eq!(
            i.to_bits(),
            j.to_bits(),
            "{name}: JIT {j} vs interpreter {i}"
        );
        i
    };
    let h = 1e-6;
    for n in [0, 1, 7, 200] {
        let (x, a) = (0.4, 1.3);
        let fd_x = (call("dfa", &[count(n), scalar(x + h), scalar(a)])
            - call("dfa", &[count(n), scalar(x - h), scalar(a)]))
            / (2.0 * h);
        let fd_a = (call("dfa", &[count(n), scalar(x), scalar(a + h)])
            - call("dfa", &[count(n), scalar(x), scalar(a - h)]))
            / (2.0 * h);
        let hv = call(
            "hv",
            &[count(n), scalar(x), scalar(a), scalar(1.0), scalar(0.5)],
        );
        let want = fd_x + 0.5 * fd_a;
        assert!(
            (hv - want).abs() <= 1e-6 * (1.0 + want.abs()),
            "n={n}: hv {hv} vs {want}"
        );
        let d2 = call("d2", &[count(n), scalar(x), scalar(a)]);
        assert!(
            (d2 - fd_a).abs() <= 1e-6 * (1.0 + fd_a.abs()),
            "n={n}: d2 {d2} vs {fd_a}"
        );
    }
    let fd = (call("dg", &[scalar(0.3), scalar(0.8 + h)])
        - call("dg", &[scalar(0.3), scalar(0.8 - h)]))
        / (2.0 * h);
    let d2g = call("d2g", &[scalar(0.3), scalar(0.8)]);
    assert!(
        (d2g - fd).abs() <= 1e-6 * (1.0 + fd.abs()),
        "d2g {d2g} vs {fd}"
    );
}

/// Reverse over reverse through a loop with respect to arrays: `@grad` of
/// `v · ∇f` is the Hessian-vector product `H v` (a walk forward over the
/// states with the body's JVP and the JVP of its VJP), equal to forward
/// over reverse (`@jvp` of the gradient) up to rounding, for a long static
/// loop, a run-time count (0 included) and a loop that stops on data; the
/// gradient with respect to a value the step reads against central
/// differences of the gradient; JIT equals the interpreter throughout.
#[test]
fn reverse_over_reverse_through_a_loop_gives_hessian_vector_products() {
    let src = "fn f[N](n: i64, x: f64[N], w: f64[N]) -> f64 =
  +/iterate(n, x, s => sin(s * w) * 0.5 + s * s * 0.1)
@grad(x)
fn df[N](n: i64, x: f64[N], w: f64[N]) -> f64[N] = f(n, x, w)
fn vdf[N](n: i64, x: f64[N], w: f64[N], v: f64[N]) -> f64 = +/(df(n, x, w) .* v)
@grad(x, w)
fn hvp[N](n: i64, x: f64[N], w: f64[N], v: f64[N]) -> (f64[N], f64[N]) = vdf(n, x, w, v)
@jvp(x)
fn fwd[N](n: i64, x: f64[N], w: f64[N], dx: f64[N]) -> f64[N] = df(n, x, w)
fn g[N](x: f64[N], w: f64[N]) -> f64 = +/iterate(2500, x, s => 0.999 * s + 0.001 * sin(w * s))
@grad(x)
fn dg[N](x: f64[N], w: f64[N]) -> f64[N] = g(x, w)
fn vdg[N](x: f64[N], w: f64[N], v: f64[N]) -> f64 = +/(dg(x, w) .* v)
@grad(x)
fn hvg[N](x: f64[N], w: f64[N], v: f64[N]) -> f64[N] = vdg(x, w, v)
@jvp(x)
fn fwdg[N](x: f64[N], w: f64[N], dx: f64[N]) -> f64[N] = dg(x, w)
fn u[N](n: i64, x: f64[N], r: f64) -> f64 =
  +/iterate_until(n, x, s => +/(s .* s) < 0.01, s => s * r - 0.01 * s * s)
@grad(x)
fn du[N](n: i64, x: f64[N], r: f64) -> f64[N] = u(n, x, r)
fn vdu[N](n: i64, x: f64[N], r: f64, v: f64[N]) -> f64 = +/(du(n, x, r) .* v)
@grad(x, r)
fn hvu[N](n: i64, x: f64[N], r: f64, v: f64[N]) -> (f64[N], f64) = vdu(n, x, r, v)
@jvp(x)
fn fwdu[N](n: i64, x: f64[N], r: f64, dx: f64[N]) -> f64[N] = du(n, x, r)";
    let p = Program::parse(src).unwrap_or_else(|e| panic!("{e}"));
    let count = |n: i64| Value::scalar(egrad::internals::types::DType::I64, n as f64);
    let call = |name: &str, args: &[Value]| -> Vec<Value> {
        let f = p.ir(name).unwrap();
        let refs: Vec<&Value> = args.iter().collect();
        let i = run(f, &refs).unwrap();
        let native = compile(f, &BackendOptions::default()).unwrap();
        let j = native.call(&refs).unwrap();
        for (a, b) in i.iter().zip(&j) {
            assert!(a.bits_eq(b), "{name}: JIT {b} vs interpreter {a}");
        }
        i
    };
    let close = |got: &[f64], want: &[f64], tol: f64, what: &str| {
        assert_eq!(got.len(), want.len());
        for (a, b) in got.iter().zip(want) {
            assert!((a - b).abs() <= tol * (1.0 + b.abs()), "{what}: {a} vs {b}");
        }
    };
    let x = Value::f64(&[0.1, 0.2, -0.3]);
    let w = Value::f64(&[0.5, 1.5, -0.7]);
    let v = Value::f64(&[1.0, -2.0, 0.5]);
    let h = 1e-6;
    for n in [0, 1, 5, 60] {
        let rr = call("hvp", &[count(n), x.clone(), w.clone(), v.clone()]);
        let fr = call("fwd", &[count(n), x.clone(), w.clone(), v.clone()]);
        close(&rr[0].data, &fr[0].data, 1e-13, &format!("n={n}: H v"));
        // The gradient in `w` against central differences of `v · ∇f`.
        for i in 0..3 {
            let at = |e: f64| {
                let mut wi = w.clone();
                wi.data[i] += e;
                call("vdf", &[count(n), x.clone(), wi, v.clone()])[0].as_scalar()
            };
            let fd = (at(h) - at(-h)) / (2.0 * h);
            close(&rr[1].data[i..=i], &[fd], 1e-6, &format!("n={n}: w[{i}]"));
        }
    }
    let rr = call("hvg", &[x.clone(), w.clone(), v.clone()]);
    let fr = call("fwdg", &[x.clone(), w.clone(), v.clone()]);
    close(&rr[0].data, &fr[0].data, 1e-13, "2,500 steps: H v");
    // Through the optimizer, storing or recomputing the residuals.
    for lambda in [0.0, 1e6] {
        let opts = Options::default()
            .function("vdg")
            .wrt(["x"])
            .lambda(lambda)
            .dim("N", 3);
        let g = optimize_gradient(&p, &opts).unwrap_or_else(|e| panic!("{e}"));
        let ir = g.gradient_ir();
        let args = [x.clone(), w.clone(), v.clone()];
        let refs: Vec<&Value> = args.iter().collect();
        let i = run(&ir, &refs).unwrap();
        let j = compile(&ir, &BackendOptions::default())
            .unwrap()
            .call(&refs)
            .unwrap();
        assert!(i[0].bits_eq(&j[0]), "λ={lambda}: JIT vs interpreter");
        close(&i[0].data, &fr[0].data, 1e-13, &format!("λ={lambda}: H v"));
    }
    let (xu, r) = (
        Value::f64(&[0.3, -0.2]),
        Value::scalar(egrad::internals::types::DType::F64, 0.7),
    );
    let vu = Value::f64(&[1.0, 0.5]);
    for n in [0, 3, 40] {
        let rr = call("hvu", &[count(n), xu.clone(), r.clone(), vu.clone()]);
        let fr = call("fwdu", &[count(n), xu.clone(), r.clone(), vu.clone()]);
        close(
            &rr[0].data,
            &fr[0].data,
            1e-13,
            &format!("until n={n}: H v"),
        );
        let at = |e: f64| {
            let rr = Value::scalar(egrad::internals::types::DType::F64, 0.7 + e);
            call("vdu", &[count(n), xu.clone(), rr, vu.clone()])[0].as_scalar()
        };
        let fd = (at(h) - at(-h)) / (2.0 * h);
        close(&rr[1].data, &[fd], 1e-6, &format!("until n={n}: r"));
    }
}
