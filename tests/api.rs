//! The public surface as a Rust user meets it: only items at the root of
//! the crate (no `internals`). A plain function compiled and called with a
//! matrix, its gradient, argument errors at the parameter, and errors that
//! print the same diagnostic with `{}` and `{:?}` (so `main` returning
//! `egrad::Error` prints it).

use egrad::{
    compile_function, interp, optimize_gradient, Arg, ArgError, ErrorKind, Options, Program, Value,
};

const SRC: &str = "
fn affine[M, N](a: f64[M, N], x: f64[N], b: f64[M]) -> f64[M] = matmul(a, x) + b
fn loss[M, N](a: f64[M, N], x: f64[N], b: f64[M]) -> f64 = +/(affine(a, x, b) .* affine(a, x, b))
fn scale32[N](a: f32[N, 2], s: f32) -> f32[N, 2] = a * s
";

const A: [f64; 6] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
const X: [f64; 3] = [1.0, 0.0, -1.0];
const B: [f64; 2] = [0.5, -0.5];

#[test]
fn a_plain_function_takes_a_matrix() {
    let program = Program::parse(SRC).unwrap();
    let affine = compile_function(&program, &Options::default().function("affine")).unwrap();
    let out = affine
        .call(&[Arg::f64_matrix(&A, 2, 3), Arg::f64(&X), Arg::f64(&B)])
        .unwrap();
    // [1 - 3 + 0.5, 4 - 6 - 0.5]
    assert_eq!(out[0].data, vec![-1.5, -2.5]);
    assert_eq!(out[0].shape, vec![2]);
    // Unoptimized: the same numbers.
    let plain = compile_function(
        &program,
        &Options::default().function("affine").no_optimize(true),
    )
    .unwrap();
    let again = plain
        .call(&[Arg::f64_array(&A, &[2, 3]), Arg::f64(&X), Arg::f64(&B)])
        .unwrap();
    assert_eq!(again[0].data, out[0].data);
    // An f32 matrix.
    let scale = compile_function(&program, &Options::default().function("scale32")).unwrap();
    let m = [1.0f32, 2.0, 3.0, 4.0];
    let out = scale
        .call(&[Arg::f32_matrix(&m, 2, 2), Arg::scalar(0.5)])
        .unwrap();
    assert_eq!(out[0].data, vec![0.5, 1.0, 1.5, 2.0]);
}

#[test]
fn the_gradient_with_respect_to_a_matrix() {
    let program = Program::parse(SRC).unwrap();
    let opts = Options::default().function("loss").wrt(["a"]);
    let grad = optimize_gradient(&program, &opts)
        .unwrap()
        .compile()
        .unwrap();
    let (value, g) = grad
        .value_and_grad(&[Arg::f64_matrix(&A, 2, 3), Arg::f64(&X), Arg::f64(&B)])
        .unwrap();
    // r = A x + b = [-1.5, -2.5]; loss = |r|^2; dloss/dA = 2 r x^T.
    assert_eq!(value.as_scalar(), 1.5 * 1.5 + 2.5 * 2.5);
    assert_eq!(g[0].shape, vec![2, 3]);
    assert_eq!(g[0].data, vec![-3.0, 0.0, 3.0, -5.0, 0.0, 5.0]);
}

#[test]
fn an_array_of_the_wrong_size_is_an_error_at_its_parameter() {
    let program = Program::parse(SRC).unwrap();
    let affine = compile_function(&program, &Options::default().function("affine")).unwrap();
    let e = affine
        .call(&[Arg::f64_matrix(&A, 4, 2), Arg::f64(&X), Arg::f64(&B)])
        .expect_err("6 elements are not a 4 by 2 matrix");
    let text = e.to_string();
    assert!(
        text.contains("argument `a` has 6 elements, but its shape [4, 2] needs 8"),
        "{text}"
    );
    // The caret is under the parameter `a`.
    assert!(
        text.contains("a: f64[M, N]") && text.contains("^^^^"),
        "{text}"
    );
    // A shape that fits but disagrees with another argument: the
    // signature's check, also at a parameter.
    let e = affine
        .call(&[Arg::f64_matrix(&A, 3, 2), Arg::f64(&X), Arg::f64(&B)])
        .expect_err("N = 2 from `a`, but `x` has 3");
    assert!(
        e.to_string()
            .contains("`a` gives 2 (axis 1 of its shape [3, 2]), `x` gives 3 (its length)"),
        "{e}"
    );
    // A shape whose element count overflows is an error too, not a panic.
    let e = affine
        .call(&[
            Arg::f64_array(&A, &[usize::MAX, 2]),
            Arg::f64(&X),
            Arg::f64(&B),
        ])
        .expect_err("no such matrix");
    assert!(
        e.to_string().contains("more than this machine can count"),
        "{e}"
    );
}

#[test]
fn errors_print_their_diagnostic_in_both_forms() {
    let e = Program::parse("fn f(x: f64) -> f64 = x +").unwrap_err();
    assert_eq!(format!("{e:?}"), format!("{e}"));
    assert!(format!("{e:?}").starts_with("error"), "{e:?}");
    let program = Program::parse(SRC).unwrap();
    let e = compile_function(&program, &Options::default())
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::Usage);
    assert_eq!(format!("{e:?}"), format!("{e}"));
}

#[test]
fn an_argument_error_of_the_interpreter_becomes_a_diagnostic() {
    let program = Program::parse(SRC).unwrap();
    let f = program.ir("affine").unwrap();
    let (a, x, b) = (
        Value::array(egrad::DType::F64, vec![2, 3], A.to_vec()),
        Value::f64(&X[..2]),
        Value::f64(&B),
    );
    let e: ArgError = interp::run(f, &[&a, &x, &b]).expect_err("x is too short");
    assert_eq!(e.param, Some(1));
    let text = e.into_error(f, program.file()).to_string();
    assert!(
        text.contains("x: f64[N]") && text.contains("`x` gives 2 (its length)"),
        "{text}"
    );
}

/// Arguments that disagree on a size are both named, each with the axis
/// it gives the size from; one argument that gives a size twice,
/// differently (a non-square matrix for `f64[N, N]`), says so.
#[test]
fn a_size_given_two_ways_names_both() {
    let program =
        Program::parse("fn quad[N](A: f64[N, N], x: f64[N]) -> f64 = +/(x .* matmul(A, x))")
            .unwrap();
    let f = program.ir("quad").unwrap();
    let square = Value::array(egrad::DType::F64, vec![2, 2], vec![1.0; 4]);
    let wide = Value::array(egrad::DType::F64, vec![2, 3], vec![1.0; 6]);
    let e = interp::run(f, &[&wide, &Value::f64(&[1.0, 2.0])]).unwrap_err();
    assert_eq!(e.param, Some(0));
    assert_eq!(
        e.message,
        "argument `A` gives `N` twice, differently: 2 (axis 0) and 3 (axis 1) of its shape [2, 3]"
    );
    let e = interp::run(f, &[&square, &Value::f64(&[1.0, 2.0, 3.0])]).unwrap_err();
    assert_eq!(e.param, Some(1));
    assert_eq!(
        e.message,
        "arguments `A` and `x` disagree on `N`: `A` gives 2 (axis 0 of its shape [2, 2]), `x` gives 3 (its length)"
    );
}
