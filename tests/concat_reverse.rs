//! `reverse(x)` and `concat(a, b)`: what they compute (against Rust
//! written out by hand), native code equal to the interpreter bit for bit
//! (the plain functions, their optimized gradients and their forward-mode
//! derivatives), reverse-mode gradients (at two λ) and forward-mode `@jvp`
//! derivatives against central finite differences, the sizes at the edges
//! (an empty part, `N-1` at `N = 1`, sizes refused before running), and a
//! clear diagnostic for every misuse.

mod common;

use common::{assert_jit_equals_interpreter, check_gradient, check_jvp, eval};
use egrad::internals::backend::{compile, BackendOptions};
use egrad::internals::ir::interp::run;
use egrad::internals::ir::Function;
use egrad::internals::ops::Op;
use egrad::internals::pipeline::{optimize_ir, Options};
use egrad::internals::types::value::Value;
use egrad::internals::types::DType;
use egrad::Program;

const PROGRAM: &str = r#"
fn last[N](y: f64[N]) -> f64 = reverse(y)[0]
fn flip[N](x: f64[N]) -> f64[N] = reverse(x)
fn flip_rows[M, K](X: f64[M, K]) -> f64[M, K] = reverse(X)
// Literal part first: a right shift keeping x[0].
fn shift[N](x: f64[N], y: f64[N]) -> f64[N] =
  concat(tabulate[1](i => x[i]), tabulate[N-1](i => x[i + 1] * y[i]))
// Literal part last: a rotation to the left.
fn rotate[N](y: f64[N]) -> f64[N] = concat(tabulate[N-1](i => y[i + 1]), tabulate[1](i => y[i]))
fn rotate32[N](y: f32[N]) -> f32[N] = concat(tabulate[N-1](i => y[i + 1]), tabulate[1](i => y[i]))
// Matrices: rows joined, literal rows first and last, N-2 rows.
fn first_row[N, K](X: f64[N, K], r: f64[1, K]) -> f64[N, K] = concat(r, tabulate[N-1](i => X[i + 1]))
fn last_rows[N, K](X: f64[N, K], r: f64[2, K]) -> f64[N, K] = concat(tabulate[N-2](i => X[i] * 2), r)
fn fixed(a: f64[2, 3], b: f64[4, 3]) -> f64[6, 3] = concat(a, b)
// An empty part, and a value that does not depend on the index inside tabulate.
fn empty_first[N](e: f64[0], x: f64[N]) -> f64[N] = concat(e, x)
fn mirror[N](x: f64[N]) -> f64[N] = tabulate[N](i => reverse(x)[i] * x[i])
fn twice[N](x: f64[N]) -> f64[N] = reverse(reverse(x))

// Scalar losses: weights w make every position count differently.
fn last_loss[N](y: f64[N]) -> f64 = sin(last(y)) * last(y)
fn shift_loss[N](x: f64[N], y: f64[N], w: f64[N]) -> f64 = +/(sin(shift(x, y)) .* w)
fn rotate_loss[N](y: f64[N], w: f64[N]) -> f64 = +/(exp(rotate(y)) .* w)
fn rows_loss[N, K](X: f64[N, K], r: f64[1, K], W: f64[N, K]) -> f64 =
  +/(sin(first_row(X, r)) .* W)
fn last_rows_loss[N, K](X: f64[N, K], r: f64[2, K], W: f64[N, K]) -> f64 =
  +/(sin(last_rows(X, r)) .* W)
fn flip_rows_loss[M, K](X: f64[M, K], W: f64[M, K]) -> f64 = +/(tanh(flip_rows(X)) .* W)
fn fixed_loss(a: f64[2, 3], b: f64[4, 3], W: f64[6, 3]) -> f64 = +/(sin(fixed(a, b)) .* W)
fn mirror_loss[N](x: f64[N], w: f64[N]) -> f64 = +/(mirror(x) .* w)

@grad(y)
fn dlast[N](y: f64[N]) -> f64[N] = last_loss(y)
@grad(x, y)
fn dshift[N](x: f64[N], y: f64[N], w: f64[N]) -> (f64[N], f64[N]) = shift_loss(x, y, w)
@grad(y)
fn drotate[N](y: f64[N], w: f64[N]) -> f64[N] = rotate_loss(y, w)
@grad(X, r)
fn drows[N, K](X: f64[N, K], r: f64[1, K], W: f64[N, K]) -> (f64[N, K], f64[1, K]) = rows_loss(X, r, W)
@grad(X, r)
fn dlast_rows[N, K](X: f64[N, K], r: f64[2, K], W: f64[N, K]) -> (f64[N, K], f64[2, K]) =
  last_rows_loss(X, r, W)
@grad(X)
fn dflip_rows[M, K](X: f64[M, K], W: f64[M, K]) -> f64[M, K] = flip_rows_loss(X, W)
@grad(a, b)
fn dfixed(a: f64[2, 3], b: f64[4, 3], W: f64[6, 3]) -> (f64[2, 3], f64[4, 3]) = fixed_loss(a, b, W)
@grad(x)
fn dmirror[N](x: f64[N], w: f64[N]) -> f64[N] = mirror_loss(x, w)

// Forward mode: the tangents come last.
@jvp(y)
fn jlast[N](y: f64[N], dy: f64[N]) -> f64 = last_loss(y)
@jvp(x, y)
fn jshift[N](x: f64[N], y: f64[N], w: f64[N], dx: f64[N], dy: f64[N]) -> f64 = shift_loss(x, y, w)
@jvp(y)
fn jrotate[N](y: f64[N], w: f64[N], dy: f64[N]) -> f64 = rotate_loss(y, w)
@jvp(X, r)
fn jrows[N, K](X: f64[N, K], r: f64[1, K], W: f64[N, K], dX: f64[N, K], dr: f64[1, K]) -> f64 =
  rows_loss(X, r, W)
@jvp(X, r)
fn jlast_rows[N, K](X: f64[N, K], r: f64[2, K], W: f64[N, K], dX: f64[N, K], dr: f64[2, K]) -> f64 =
  last_rows_loss(X, r, W)
@jvp(X)
fn jflip_rows[M, K](X: f64[M, K], W: f64[M, K], dX: f64[M, K]) -> f64 = flip_rows_loss(X, W)
@jvp(a, b)
fn jfixed(a: f64[2, 3], b: f64[4, 3], W: f64[6, 3], da: f64[2, 3], db: f64[4, 3]) -> f64 =
  fixed_loss(a, b, W)
@jvp(x)
fn jmirror[N](x: f64[N], w: f64[N], dx: f64[N]) -> f64 = mirror_loss(x, w)
// A vector result in forward mode.
@jvp(x, y)
fn jshift_vec[N](x: f64[N], y: f64[N], dx: f64[N], dy: f64[N]) -> f64[N] = shift(x, y)
"#;

fn program() -> Program {
    Program::parse(PROGRAM).unwrap_or_else(|e| panic!("{e}"))
}

/// Arguments for `f`: size parameter `N` (and `M`) is `n`, `K` is 3; each
/// parameter a different smooth sequence in (-0.9, 0.9).
fn args_for(f: &Function, n: usize) -> Vec<Value> {
    use egrad::internals::types::Dim;
    f.params
        .iter()
        .enumerate()
        .map(|(k, p)| {
            let t = f.ty(p.var);
            let shape: Vec<usize> = t
                .shape
                .iter()
                .map(|d| match d {
                    Dim::Lit(m) => *m as usize,
                    Dim::Param(q) if q == "K" => 3,
                    Dim::Param(_) => n,
                    Dim::Sub(..) | Dim::Rows(..) | Dim::Expr(..) => {
                        panic!("parameters have plain sizes")
                    }
                })
                .collect();
            let len: usize = shape.iter().product();
            let data = (0..len)
                .map(|i| ((i * 7 + k * 13 + 1) as f64 * 0.37).sin() * 0.9)
                .collect();
            Value::array(t.dtype, shape, data)
        })
        .collect()
}

#[test]
fn reverse_and_concat_compute_what_they_say() {
    let p = program();
    let x = Value::f64(&[1.0, 2.0, 3.0, 4.0, 5.0]);
    let y = Value::f64(&[0.5, -1.0, 2.0, 0.25, 3.0]);
    let one = |name: &str, args: &[Value]| eval(p.ir(name).unwrap(), args).remove(0);
    assert_eq!(one("last", std::slice::from_ref(&y)).as_scalar(), 3.0);
    assert_eq!(
        one("flip", std::slice::from_ref(&x)).data,
        vec![5.0, 4.0, 3.0, 2.0, 1.0]
    );
    assert_eq!(
        one("shift", &[x.clone(), y.clone()]).data,
        vec![1.0, 2.0 * 0.5, -3.0, 4.0 * 2.0, 5.0 * 0.25]
    );
    assert_eq!(
        one("rotate", std::slice::from_ref(&y)).data,
        vec![-1.0, 2.0, 0.25, 3.0, 0.5]
    );
    assert_eq!(
        one("mirror", std::slice::from_ref(&x)).data,
        vec![5.0, 8.0, 9.0, 8.0, 5.0]
    );
    assert_eq!(one("twice", std::slice::from_ref(&y)).data, y.data);
    // Rows: a 3 x 2 matrix's rows reversed.
    let m = Value::array(DType::F64, vec![3, 2], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let got = one("flip_rows", std::slice::from_ref(&m));
    assert_eq!(got.shape, vec![3, 2]);
    assert_eq!(got.data, vec![5.0, 6.0, 3.0, 4.0, 1.0, 2.0]);
    // Rows joined, the literal part first and last.
    let xm = Value::array(DType::F64, vec![3, 3], (1..=9).map(f64::from).collect());
    let r1 = Value::array(DType::F64, vec![1, 3], vec![-1.0, -2.0, -3.0]);
    let got = one("first_row", &[xm.clone(), r1]);
    assert_eq!(
        got.data,
        vec![-1.0, -2.0, -3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
    );
    let r2 = Value::array(
        DType::F64,
        vec![2, 3],
        vec![-1.0, -2.0, -3.0, -4.0, -5.0, -6.0],
    );
    let got = one("last_rows", &[xm, r2]);
    assert_eq!(
        got.data,
        vec![2.0, 4.0, 6.0, -1.0, -2.0, -3.0, -4.0, -5.0, -6.0]
    );
    let a = Value::array(DType::F64, vec![2, 3], (0..6).map(f64::from).collect());
    let b = Value::array(DType::F64, vec![4, 3], (6..18).map(f64::from).collect());
    let got = one("fixed", &[a, b]);
    assert_eq!(got.shape, vec![6, 3]);
    assert_eq!(got.data, (0..18).map(f64::from).collect::<Vec<_>>());
    let e = Value::array(DType::F64, vec![0], vec![]);
    assert_eq!(one("empty_first", &[e, x.clone()]).data, x.data);
    // f32: the same rotation.
    let y32 = Value::f32(&[1.5, -2.0, 0.25]);
    assert_eq!(one("rotate32", &[y32]).data, vec![-2.0, 0.25, 1.5]);
}

#[test]
fn concat_is_pads_and_reverses_in_the_ir() {
    let p = program();
    let ops = |name: &str| -> Vec<String> {
        p.ir(name)
            .unwrap()
            .stmts
            .iter()
            .map(|s| s.op.to_string())
            .collect()
    };
    // Literal part first: `pad 0 a + pad 1 b`, no reversal.
    let shift = ops("shift");
    assert!(shift.contains(&"pad 0".to_string()), "{shift:?}");
    assert!(shift.contains(&"pad 1".to_string()), "{shift:?}");
    assert!(!shift.contains(&"reverse".to_string()), "{shift:?}");
    // Literal part last: the parts swapped between reversals (the single
    // row needs none).
    let rotate = ops("rotate");
    assert_eq!(
        rotate.iter().filter(|o| *o == "reverse").count(),
        2,
        "{rotate:?}"
    );
    assert!(rotate.contains(&"pad 1".to_string()), "{rotate:?}");
    let last_rows = ops("last_rows");
    assert_eq!(
        last_rows.iter().filter(|o| *o == "reverse").count(),
        3,
        "{last_rows:?}"
    );
    assert!(last_rows.contains(&"pad 2".to_string()), "{last_rows:?}");
    // An empty part is no work at all.
    assert!(
        !ops("empty_first").iter().any(|o| o.starts_with("pad")),
        "{:?}",
        ops("empty_first")
    );
    // `reverse(reverse(x))` is `x` after the e-graph.
    let twice = optimize_ir(p.ir("twice").unwrap(), &Options::default())
        .unwrap()
        .after;
    assert!(!twice.stmts.iter().any(|s| s.op == Op::Reverse), "{twice}");
}

#[test]
fn native_code_equals_the_interpreter() {
    let p = program();
    for name in [
        "last",
        "flip",
        "flip_rows",
        "shift",
        "rotate",
        "rotate32",
        "first_row",
        "last_rows",
        "fixed",
        "empty_first",
        "mirror",
        "twice",
        "jshift_vec",
    ] {
        let f = p.ir(name).unwrap();
        let opt = optimize_ir(f, &Options::default()).unwrap().after;
        // n = 0: empty arrays where legal (`flip`, `empty_first`, ...),
        // refused before running where an `N-k` or a read needs more.
        for n in [0usize, 1, 2, 3, 7, 64] {
            let args = args_for(f, n);
            let what = format!("{name} n={n}");
            assert_jit_equals_interpreter(f, &args, &format!("{what} (unoptimized)"));
            assert_jit_equals_interpreter(&opt, &args, &format!("{what} (optimized)"));
            let refs: Vec<&Value> = args.iter().collect();
            if let (Ok(a), Ok(b)) = (run(f, &refs), run(&opt, &refs)) {
                for (x, y) in a.iter().zip(&b) {
                    assert!(x.bits_eq(y), "{what}: optimized {y:?} vs unoptimized {x:?}");
                }
            }
        }
    }
}

#[test]
fn sizes_at_the_edges() {
    let p = program();
    let refused = |name: &str, n: usize| {
        let f = p.ir(name).unwrap();
        let args = args_for(f, n);
        let refs: Vec<&Value> = args.iter().collect();
        let e = run(f, &refs).unwrap_err();
        let native = compile(f, &BackendOptions::default()).unwrap();
        assert!(native.call(&refs).is_err(), "{name} n={n}");
        e.message
    };
    // `N-1` rows need N >= 1, `N-2` rows N >= 2; the last element of an
    // empty vector does not exist.
    assert!(refused("shift", 0).contains("`N` >= 1"));
    assert!(refused("rotate", 0).contains("`N` >= 1"));
    assert!(refused("last_rows", 1).contains("`N` >= 2"));
    assert!(refused("last", 0).contains("out of range"));
    // Legal edges: an empty vector reversed, N-1 = 0 rows joined to one.
    let flip = p.ir("flip").unwrap();
    assert_eq!(eval(flip, &args_for(flip, 0))[0].data, Vec::<f64>::new());
    let shift = p.ir("shift").unwrap();
    let one = [Value::f64(&[0.75]), Value::f64(&[3.0])];
    assert_eq!(eval(shift, &one)[0].data, vec![0.75]);
    let rows = p.ir("last_rows").unwrap();
    let args = args_for(rows, 2);
    assert_eq!(eval(rows, &args)[0].data, args[1].data);
}

/// (gradient function, primal loss, number of differentiated parameters).
const GRADS: &[(&str, &str, usize)] = &[
    ("dlast", "last_loss", 1),
    ("dshift", "shift_loss", 2),
    ("drotate", "rotate_loss", 1),
    ("drows", "rows_loss", 2),
    ("dlast_rows", "last_rows_loss", 2),
    ("dflip_rows", "flip_rows_loss", 1),
    ("dfixed", "fixed_loss", 2),
    ("dmirror", "mirror_loss", 1),
];

#[test]
fn gradients_match_finite_differences() {
    let p = program();
    for &(grad, loss, nwrt) in GRADS {
        for n in [1usize, 2, 5] {
            if n < 2 && grad == "dlast_rows" {
                continue; // N-2 rows: refused at N = 1 (see sizes_at_the_edges)
            }
            let args = args_for(p.ir(loss).unwrap(), n);
            check_gradient(&p, grad, loss, nwrt, &args, &format!("{grad} n={n}"));
        }
    }
}

/// (`@jvp` function, primal loss, number of differentiated parameters).
const JVPS: &[(&str, &str, usize)] = &[
    ("jlast", "last_loss", 1),
    ("jshift", "shift_loss", 2),
    ("jrotate", "rotate_loss", 1),
    ("jrows", "rows_loss", 2),
    ("jlast_rows", "last_rows_loss", 2),
    ("jflip_rows", "flip_rows_loss", 1),
    ("jfixed", "fixed_loss", 2),
    ("jmirror", "mirror_loss", 1),
];

#[test]
fn forward_mode_matches_finite_differences() {
    let p = program();
    for &(jvp, loss, nwrt) in JVPS {
        for n in [2usize, 5] {
            let args = args_for(p.ir(loss).unwrap(), n);
            check_jvp(&p, jvp, loss, nwrt, &args, &format!("{jvp} n={n}"));
        }
    }
    // A vector-valued `@jvp`: the tangent of `shift` element by element.
    let j = p.ir("jshift_vec").unwrap();
    let (x, y) = (Value::f64(&[1.0, 2.0, 3.0]), Value::f64(&[0.5, -1.0, 4.0]));
    let (dx, dy) = (
        Value::f64(&[0.1, 0.2, 0.3]),
        Value::f64(&[1.0, 10.0, 100.0]),
    );
    let got = eval(j, &[x, y, dx, dy]).remove(0);
    // d(x[i+1] * y[i]) = dx[i+1] * y[i] + x[i+1] * dy[i].
    assert_eq!(
        got.data,
        vec![0.1, 0.2 * 0.5 + 2.0 * 1.0, -0.3 + 3.0 * 10.0]
    );
}

#[test]
fn misuse_gives_a_clear_diagnostic() {
    for (src, want) in [
        (
            "fn f(x: f64) -> f64 = reverse(x)",
            "`reverse` needs an array (a vector, a matrix, ...: rank 1 or more), but this is a scalar (f64)",
        ),
        (
            "fn f() -> f64 = reverse(2)",
            "`reverse` needs an array (a vector, a matrix, ...: rank 1 or more), but this is a number",
        ),
        (
            "fn f[N](x: f64[N]) -> f64[N] = reverse(x, x)",
            "`reverse` takes 1 argument, but 2 were given",
        ),
        (
            "fn f[N](x: f64[N]) -> f64[N] = concat(x)",
            "`concat` takes 2 arguments, but 1 was given",
        ),
        (
            "fn f[N](x: f64[N], s: f64) -> f64 = +/concat(x, s)",
            "`concat` needs an array (a vector, a matrix, ...: rank 1 or more), but this is a scalar (f64)",
        ),
        (
            "fn f[N](x: f64[N]) -> f64 = +/concat(x > 0, x)",
            "`concat` needs an array (a vector, a matrix, ...: rank 1 or more), but this is bool[N]",
        ),
        (
            "fn f[N](x: f64[N], y: f32[1]) -> f64 = +/concat(y, x)",
            "`concat` joins arrays of one element type, but got f32[1] and f64[N]",
        ),
        (
            "fn f[N](x: f64[N], y: f64[1, 2]) -> f64 = +/concat(y, x)",
            "`concat` joins arrays of one rank, but got f64[1, 2] and f64[N]",
        ),
        (
            "fn f[N](X: f64[N, 3], r: f64[1, 2]) -> f64 = +/concat(r, X)",
            "`concat` joins arrays whose rows have one shape (the same dimensions after the first), but got f64[1, 2] and f64[N, 3]",
        ),
        // Any two lengths add up (see tests/sizes.rs), but to the sum.
        (
            "fn f[N](x: f64[N], y: f64[1]) -> f64[N] = concat(x, y)",
            "`f` is declared to return f64[N], but its body has type f64[N+1]",
        ),
        (
            "fn concat[N](x: f64[N]) -> f64[N] = x",
            "`concat` is a builtin function and cannot be redefined",
        ),
        (
            "fn reverse[N](x: f64[N]) -> f64[N] = x",
            "`reverse` is a builtin function and cannot be redefined",
        ),
        (
            "fn f[N](x: f64[N]) -> f64[N] = concat(x, x)",
            "its body has type f64[2*N]",
        ),
        // A declared result that is not what concat gives.
        (
            "fn f[N](x: f64[N]) -> f64[N] = concat(tabulate[2](i => x[i]), tabulate[N-1](i => x[i]))",
            "its body has type f64[N+1]",
        ),
        (
            "fn f[N](x: f64[N]) -> f64[N] = concat(tabulate[1](i => x[i]), tabulate[N-2](i => x[i]))",
            "f64[N-1]",
        ),
    ] {
        match Program::parse(src) {
            Ok(_) => panic!("accepted: {src}"),
            Err(e) => {
                let text = e.to_string();
                assert!(text.contains(want), "{src}\nwant: {want}\ngot: {text}");
                assert!(text.contains('^'), "{src}: not a source diagnostic: {text}");
            }
        }
    }
}
