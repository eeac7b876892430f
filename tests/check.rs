//! Checking and lowering, end to end through `Program::parse` (it moved out
//! of `lang` with `Program`, which joins the checker to AD).

use egrad::internals::ir::interp::run;
use egrad::internals::types::value::Value;
use egrad::{Error, Program};

const SEED: &str = "fn loss[N](w: f32[N], x: f32[N], y: f32) -> f32 {
  let pred = +/(w .* x)
  let err = pred - y
  err * err
}

@grad(w)
fn dloss_dw[N](w: f32[N], x: f32[N], y: f32) -> f32[N] = loss(w, x, y)
";

fn prog(src: &str) -> Program {
    match Program::parse(src) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    }
}

fn err(src: &str) -> String {
    match Program::parse(src) {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

fn run1(p: &Program, f: &str, args: &[&Value]) -> Vec<Value> {
    run(p.ir(f).unwrap(), args).unwrap()
}

#[test]
fn seed_lowers_and_runs() {
    let p = prog(SEED);
    assert_eq!(p.function_names(), vec!["loss", "dloss_dw"]);
    assert_eq!(
        p.ir("loss").unwrap().to_string(),
        "fn loss[N](%w: f32[N], %x: f32[N], %y: f32) -> f32 {
  %0: f32[N] = mul %w %x
  %pred: f32 = sum %0
  %err: f32 = sub %pred %y
  %1: f32 = mul %err %err
  ret %1
}
"
    );
    let w = Value::f32(&[1.0, 2.0, 3.0]);
    let x = Value::f32(&[4.0, 5.0, 6.0]);
    let y = Value::scalar(egrad::DType::F32, 0.5);
    let l = run1(&p, "loss", &[&w, &x, &y]);
    assert_eq!(l[0].as_scalar(), 31.5 * 31.5);
    let g = run1(&p, "dloss_dw", &[&w, &x, &y]);
    assert_eq!(g[0].data, vec![252.0, 315.0, 378.0]);
    let spec = p.grad_spec("dloss_dw").unwrap();
    assert_eq!(spec.wrt, vec![0]);
    assert_eq!(spec.primal.params.len(), 3);
    assert!(p.grad_spec("loss").is_none());
    let s = p.param_span("dloss_dw", 1).unwrap();
    assert_eq!(&SEED[s.start as usize..s.end as usize], "x: f32[N]");
    assert!(matches!(p.ir("nope"), Err(Error::Usage(m)) if m.contains("`loss`, `dloss_dw`")));
}

#[test]
fn scalars_broadcast() {
    let p = prog("fn f[N](x: f64[N], s: f64) -> f64[N] = s * x + 1");
    let ir = p.ir("f").unwrap();
    assert_eq!(ir.op_counts().get("bcast"), Some(&2), "{ir}");
    let r = run1(
        &p,
        "f",
        &[
            &Value::f64(&[1.0, 2.0]),
            &Value::scalar(egrad::DType::F64, 3.0),
        ],
    );
    assert_eq!(r[0].data, vec![4.0, 7.0]);
}

#[test]
fn literals_take_the_context_dtype() {
    // `2 * 3` folds; the f32 operand gives the dtype.
    let p = prog("fn f(x: f32) -> f32 {\n let k = 2 * 3\n x * k - 0.5\n}");
    let ir = p.ir("f").unwrap().to_string();
    assert!(ir.contains("f32 = const 6.0"), "{ir}");
    assert!(ir.contains("f32 = const 0.5"), "{ir}");
    // A literal body takes the declared return type (broadcast).
    let p = prog("fn ones[N](x: f64[N]) -> f64[N] = 1");
    let r = run1(&p, "ones", &[&Value::f64(&[5.0, 5.0])]);
    assert_eq!(r[0].data, vec![1.0, 1.0]);
    // A literal argument takes the parameter's type.
    let p = prog("fn sq(x: f32) -> f32 = x * x\nfn g(y: f32) -> f32 = sq(3) + y");
    assert!(p.ir("g").unwrap().to_string().contains("f32 = const 3.0"));
    // Math functions of literals fold too.
    let p = prog("fn h(x: f64) -> f64 = x + exp(0)");
    assert!(p.ir("h").unwrap().to_string().contains("f64 = const 1.0"));
    // A multiplication by an exact 1 is dropped (exact in IEEE).
    let p = prog("fn h(x: f64) -> f64 = x * exp(0) + 1 * x / 1");
    let ir = p.ir("h").unwrap().to_string();
    assert!(!ir.contains("mul") && !ir.contains("div"), "{ir}");
}

#[test]
fn calls_inline_with_size_substitution() {
    let p = prog(
        "fn dot[K](a: f64[K], b: f64[K]) -> f64 = +/(a .* b)
             fn norm2[M](v: f64[M]) -> f64 {
               let d = dot(v, v)
               d
             }
             fn fixed(v: f64[3]) -> f64 = norm2(v)",
    );
    let ir = p.ir("norm2").unwrap();
    assert_eq!(ir.ty(ir.stmts[0].var).to_string(), "f64[M]");
    assert!(ir.vars.iter().any(|v| v.name == "d"));
    let ir = p.ir("fixed").unwrap();
    assert_eq!(ir.ty(ir.stmts[0].var).to_string(), "f64[3]");
    let r = run1(&p, "fixed", &[&Value::f64(&[1.0, 2.0, 2.0])]);
    assert_eq!(r[0].as_scalar(), 9.0);
}

#[test]
fn grad_of_two_params_returns_a_tuple() {
    let p = prog(
        "fn f[N](a: f64[N], b: f64) -> f64 = +/(a .* a) * b
             @grad(a, b)
             fn g[N](a: f64[N], b: f64) -> (f64[N], f64) = f(a, b)
             fn use[N](a: f64[N], b: f64) -> f64 {
               let (da, db) = g(a, b)
               +/da + db
             }",
    );
    let a = Value::f64(&[1.0, 2.0]);
    let b = Value::scalar(egrad::DType::F64, 3.0);
    let r = run1(&p, "g", &[&a, &b]);
    assert_eq!(r.len(), 2);
    assert_eq!(r[0].data, vec![6.0, 12.0]);
    assert_eq!(r[1].as_scalar(), 5.0);
    let u = run1(&p, "use", &[&a, &b]);
    assert_eq!(u[0].as_scalar(), 23.0);
}

#[test]
fn higher_derivatives_through_grad_functions() {
    let p = prog(
        "fn cube(x: f64) -> f64 = x * x * x
             @grad(x)
             fn d1(x: f64) -> f64 = cube(x)
             @grad(x)
             fn d2(x: f64) -> f64 = d1(x)",
    );
    let x = Value::scalar(egrad::DType::F64, 2.0);
    assert_eq!(run1(&p, "d1", &[&x])[0].as_scalar(), 12.0);
    assert_eq!(run1(&p, "d2", &[&x])[0].as_scalar(), 12.0);
}

#[test]
fn use_before_definition_and_blocks() {
    let p = prog(
        "fn a(x: f64) -> f64 = b(x) + { let t = sin(x); t * t }
             fn b(x: f64) -> f64 = tanh(x) / sqrt(x)",
    );
    assert!(p.ir("a").is_ok());
}

#[test]
fn errors_are_all_reported() {
    let e = err("fn f(x: f32) -> f32 {\n let a = zz\n let b = x .* qq\n x\n}");
    assert!(
        e.contains("unknown name `zz`") && e.contains("unknown name `qq`"),
        "{e}"
    );
    let e = err("fn f[N, M](x: f32[N], y: f32[M]) -> f32[N] = x .* y");
    assert!(e.contains("shape mismatch"), "{e}");
    let e = err("fn f(x: f32, y: f64) -> f32 = x + y");
    assert!(e.contains("mixes element types f32 and f64"), "{e}");
    let e = err("fn f(x: f32) -> f32 = g(x)\nfn g(x: f32) -> f32 = f(x)");
    assert!(e.contains("calls itself through"), "{e}");
    let e = err("fn f[N](x: f32) -> f32 = x");
    assert!(e.contains("cannot be inferred"), "{e}");
    let e = err("fn sin(x: f32) -> f32 = x");
    assert!(e.contains("builtin"), "{e}");
    let e = err("fn f(x: f32) -> f32 = x\nfn f(x: f32) -> f32 = x");
    assert!(e.contains("defined twice"), "{e}");
    // Several attributes make one function each: the same one twice is a
    // function defined twice.
    let e = err("@grad(x) @grad(x)\nfn f(x: f32) -> f32 = x");
    assert!(e.contains("the function `df_dx` is defined twice"), "{e}");
    let e = err(
        "fn f[N](x: f32[N]) -> f32 = +/x\nfn g(y: f32[3], z: f32[4]) -> f32 = f(y) + f(z) + f(1)",
    );
    assert!(e.contains("cannot infer the shape"), "{e}");
    let e = err(
        "fn f(x: f32) -> (f32, f32) = (x, x)\nfn g(x: f32) -> f32 { let (a, b, c) = f(x)\n a }",
    );
    assert!(
        e.contains("takes apart 3 values, but the value is 2 values"),
        "{e}"
    );
}
