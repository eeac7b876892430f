//! Size expressions (`N+1`, `2*N`, `N*M`, `N+M` in types), `concat` of
//! parts of any lengths, `reshape` and `flatten`: what they compute,
//! native code equal to the interpreter bit for bit (plain functions,
//! optimized gradients, forward-mode derivatives), reverse-mode gradients
//! (at two λ) and `@jvp` derivatives against central finite differences,
//! size binding from compound parameter types (values, and the errors that
//! name the parameter), and diagnostics with their place.

mod common;

use common::{assert_jit_equals_interpreter, check_gradient, check_jvp, eval};
use egrad::internals::backend::{compile, BackendOptions};
use egrad::internals::ir::interp::run;
use egrad::internals::ir::Function;
use egrad::internals::ops::Op;
use egrad::internals::pipeline::{optimize_ir, Options};
use egrad::internals::types::value::Value;
use egrad::Program;

const PROGRAM: &str = r#"
// concat: an integer part last, first, none; rows of matrices.
fn append[N](x: f64[N], y: f64[1]) -> f64[N+1] = concat(x, y)
fn prepend[N](x: f64[N], y: f64[2]) -> f64[N+2] = concat(y, x)
fn join[N, M](a: f64[N], b: f64[M]) -> f64[N+M] = concat(a, b)
fn join_rows[N, M, K](A: f64[N, K], B: f64[M, K]) -> f64[N+M, K] = concat(A, B)
fn twice[N](x: f64[N]) -> f64[2*N] = concat(x, x)
// A compound size in a parameter type: bound from it, or checked.
fn diffs1[N](x: f64[N+1]) -> f64[N] = tabulate[N](i => x[i + 1] - x[i])
fn twice_diffs[K](z: f64[K+1]) -> f64[2*K] = twice(diffs1(z))
fn shrink[N](x: f64[N-1]) -> f64[N] = concat(x, tabulate[1](i => x[i]))
// flatten and reshape, rank 2 and 3, of parameters and of computed values.
fn flat[N, M](X: f64[N, M]) -> f64[N*M] = flatten(X)
fn flat3[N, M](X: f64[N, M, 2]) -> f64[N*M*2] = flatten(X)
fn unflat[N, M](x: f64[N*M], y: f64[M]) -> f64[N, M] = reshape[N, M](x) + y
fn pairs[N](x: f64[2*N]) -> f64[N, 2] = reshape[N, 2](x)
fn swap_dims[N, M](X: f64[N, M]) -> f64[M, N] = reshape[M, N](exp(X))
fn gram_flat[N, M](X: f64[N, M]) -> f64[M*M] = flatten(matmul(transpose(X), X))
fn rows_flat[N, M](X: f64[N, M, 2]) -> f64[N, 2*M] = tabulate[N](i => flatten(X[i]) * 2)
fn same[N](x: f64[N]) -> f64[N] = flatten(reshape[N](x))
// A loop (3,000 steps) whose state is an f64[N+1].
fn relax[N](x: f64[N], y: f64[1], a: f64) -> f64[N+1] =
  iterate(3000, concat(x, y), s => 0.999 * s + 0.001 * tanh(a * s + 1))

// Scalar losses: weights w make every position count differently.
fn append_loss[N](x: f64[N], y: f64[1], w: f64[N+1]) -> f64 = +/(sin(append(x, y)) .* w)
fn prepend_loss[N](x: f64[N], y: f64[2], w: f64[N+2]) -> f64 = +/(sin(prepend(x, y)) .* w)
fn join_loss[N, M](a: f64[N], b: f64[M]) -> f64 = +/sin(join(a, b) .* reverse(join(a, b)))
fn join_rows_loss[N, M, K](A: f64[N, K], B: f64[M, K], W: f64[N+M, K]) -> f64 =
  +/(tanh(join_rows(A, B)) .* W)
fn twice_loss[K](z: f64[K+1], w: f64[2*K]) -> f64 = +/(exp(twice_diffs(z)) .* w)
fn flat_loss[N, M](X: f64[N, M], w: f64[N*M]) -> f64 = +/(sin(flat(X)) .* w)
fn unflat_loss[N, M](x: f64[N*M], y: f64[M], W: f64[N, M]) -> f64 = +/(sin(unflat(x, y)) .* W)
fn pairs_loss[N](x: f64[2*N], W: f64[N, 2]) -> f64 = +/(cos(pairs(x)) .* W)
fn gram_loss[N, M](X: f64[N, M], w: f64[M*M]) -> f64 = +/(gram_flat(X) .* w)
fn rows_loss[N, M](X: f64[N, M, 2], W: f64[N, 2*M]) -> f64 = +/(sin(rows_flat(X)) .* W)
fn relax_loss[N](x: f64[N], y: f64[1], a: f64, w: f64[N+1]) -> f64 = +/(relax(x, y, a) .* w)

@grad(x, y)
fn dappend[N](x: f64[N], y: f64[1], w: f64[N+1]) -> (f64[N], f64[1]) = append_loss(x, y, w)
@grad(x, y)
fn dprepend[N](x: f64[N], y: f64[2], w: f64[N+2]) -> (f64[N], f64[2]) = prepend_loss(x, y, w)
@grad(a, b)
fn djoin[N, M](a: f64[N], b: f64[M]) -> (f64[N], f64[M]) = join_loss(a, b)
@grad(A, B)
fn djoin_rows[N, M, K](A: f64[N, K], B: f64[M, K], W: f64[N+M, K]) -> (f64[N, K], f64[M, K]) =
  join_rows_loss(A, B, W)
@grad(z)
fn dtwice[K](z: f64[K+1], w: f64[2*K]) -> f64[K+1] = twice_loss(z, w)
@grad(X)
fn dflat[N, M](X: f64[N, M], w: f64[N*M]) -> f64[N, M] = flat_loss(X, w)
@grad(x, y)
fn dunflat[N, M](x: f64[N*M], y: f64[M], W: f64[N, M]) -> (f64[N*M], f64[M]) = unflat_loss(x, y, W)
@grad(x)
fn dpairs[N](x: f64[2*N], W: f64[N, 2]) -> f64[2*N] = pairs_loss(x, W)
@grad(X)
fn dgram[N, M](X: f64[N, M], w: f64[M*M]) -> f64[N, M] = gram_loss(X, w)
@grad(X)
fn drows[N, M](X: f64[N, M, 2], W: f64[N, 2*M]) -> f64[N, M, 2] = rows_loss(X, W)
@grad(x, y, a)
fn drelax[N](x: f64[N], y: f64[1], a: f64, w: f64[N+1]) -> (f64[N], f64[1], f64) =
  relax_loss(x, y, a, w)

// Forward mode: the tangents come last.
@jvp(a, b)
fn jjoin[N, M](a: f64[N], b: f64[M], da: f64[N], db: f64[M]) -> f64 = join_loss(a, b)
@jvp(x, y)
fn junflat[N, M](x: f64[N*M], y: f64[M], W: f64[N, M], dx: f64[N*M], dy: f64[M]) -> f64 =
  unflat_loss(x, y, W)
@jvp(X)
fn jrows[N, M](X: f64[N, M, 2], W: f64[N, 2*M], dX: f64[N, M, 2]) -> f64 = rows_loss(X, W)
@jvp(z)
fn jtwice[K](z: f64[K+1], w: f64[2*K], dz: f64[K+1]) -> f64 = twice_loss(z, w)
"#;

fn program() -> Program {
    Program::parse(PROGRAM).unwrap_or_else(|e| panic!("{e}"))
}

/// The size parameters at `n`: `N` and `K` are `n`, `M` is `n + 1` (so
/// `N*M` and `M*N` are tested where they differ from `N*N`).
fn size(p: &str, n: usize) -> Option<u64> {
    Some(match p {
        "M" => n as u64 + 1,
        _ => n as u64,
    })
}

/// Arguments for `f` at size `n`, each parameter a different smooth
/// sequence in (-0.9, 0.9); their shapes from the parameter types (so
/// `f64[N*M]` is an `n (n+1)` vector).
fn args_for(f: &Function, n: usize) -> Vec<Value> {
    f.params
        .iter()
        .enumerate()
        .map(|(k, p)| {
            let t = f.ty(p.var);
            let shape: Vec<usize> = t
                .shape
                .iter()
                .map(|d| d.extent(&|p| size(p, n)).unwrap_or(0) as usize)
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
fn sizes_and_values_are_what_they_say() {
    let p = program();
    let ty = |name: &str| {
        p.ir(name)
            .unwrap()
            .ty(p.ir(name).unwrap().rets[0])
            .to_string()
    };
    // Canonical forms: `N+M` is `M+N`, `N*M*2` is `2*M*N`.
    assert_eq!(ty("append"), "f64[N+1]");
    assert_eq!(ty("join"), "f64[M+N]");
    assert_eq!(ty("join_rows"), "f64[M+N, K]");
    assert_eq!(ty("twice_diffs"), "f64[2*K]");
    assert_eq!(ty("flat3"), "f64[2*M*N]");
    assert_eq!(ty("gram_flat"), "f64[M*M]");
    let x = Value::f64(&[1.0, 2.0, 3.0]);
    let one = |name: &str, args: &[Value]| eval(p.ir(name).unwrap(), args).remove(0);
    assert_eq!(
        one("append", &[x.clone(), Value::f64(&[9.0])]).data,
        vec![1.0, 2.0, 3.0, 9.0]
    );
    assert_eq!(
        one("prepend", &[x.clone(), Value::f64(&[8.0, 9.0])]).data,
        vec![8.0, 9.0, 1.0, 2.0, 3.0]
    );
    assert_eq!(
        one("join", &[x.clone(), Value::f64(&[7.0, 8.0])]).data,
        vec![1.0, 2.0, 3.0, 7.0, 8.0]
    );
    assert_eq!(
        one("twice", std::slice::from_ref(&x)).data,
        vec![1.0, 2.0, 3.0, 1.0, 2.0, 3.0]
    );
    assert_eq!(
        one("twice_diffs", &[Value::f64(&[1.0, 2.0, 4.0])]).data,
        vec![1.0, 2.0, 1.0, 2.0]
    );
    assert_eq!(
        one("shrink", &[Value::f64(&[5.0, 6.0])]).data,
        vec![5.0, 6.0, 5.0]
    );
    let m = Value::array(
        egrad::DType::F64,
        vec![2, 3],
        (1..=6).map(f64::from).collect(),
    );
    let f = one("flat", std::slice::from_ref(&m));
    assert_eq!(
        (f.shape, f.data),
        (vec![6], (1..=6).map(f64::from).collect())
    );
    let s = one("swap_dims", std::slice::from_ref(&m));
    assert_eq!(s.shape, vec![3, 2]);
    let u = one(
        "unflat",
        &[
            Value::f64(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            Value::f64(&[10.0, 20.0]),
        ],
    );
    assert_eq!(u.shape, vec![3, 2]);
    assert_eq!(u.data, vec![11.0, 22.0, 13.0, 24.0, 15.0, 26.0]);
    let pr = one("pairs", &[Value::f64(&[1.0, 2.0, 3.0, 4.0])]);
    assert_eq!((pr.shape, pr.data), (vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]));
    let x3 = Value::array(
        egrad::DType::F64,
        vec![2, 2, 2],
        (1..=8).map(f64::from).collect(),
    );
    let r = one("rows_flat", &[x3]);
    assert_eq!(r.shape, vec![2, 4]);
    assert_eq!(
        r.data,
        (1..=8).map(|v| 2.0 * f64::from(v)).collect::<Vec<_>>()
    );
}

#[test]
fn reshape_is_one_op_and_identities_are_none() {
    let p = program();
    let ops = |name: &str| -> Vec<Op> { p.ir(name).unwrap().stmts.iter().map(|s| s.op).collect() };
    assert_eq!(ops("flat"), vec![Op::Reshape]);
    assert_eq!(ops("pairs"), vec![Op::Reshape]);
    // A vector flattened, or reshaped to its own shape: nothing.
    assert!(ops("same").is_empty(), "{:?}", ops("same"));
    // `concat` of two parts of size-parameter lengths: pads and reversals.
    let join = ops("join");
    assert_eq!(
        join.iter().filter(|o| **o == Op::Pad(0)).count(),
        2,
        "{join:?}"
    );
    assert!(join.contains(&Op::Reverse), "{join:?}");
    // The gradient of `flatten` reshapes back.
    let g = p.ir("dflat").unwrap();
    assert!(g.stmts.iter().any(|s| s.op == Op::Reshape), "{g}");
}

#[test]
fn native_code_equals_the_interpreter() {
    let p = program();
    for name in [
        "append",
        "prepend",
        "join",
        "join_rows",
        "twice",
        "diffs1",
        "twice_diffs",
        "shrink",
        "flat",
        "flat3",
        "unflat",
        "pairs",
        "swap_dims",
        "gram_flat",
        "rows_flat",
        "same",
        "relax",
    ] {
        let f = p.ir(name).unwrap();
        let opt = optimize_ir(f, &Options::default()).unwrap().after;
        for n in [0usize, 1, 2, 3, 7, 33] {
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

/// (gradient function, primal loss, number of differentiated parameters).
const GRADS: &[(&str, &str, usize)] = &[
    ("dappend", "append_loss", 2),
    ("dprepend", "prepend_loss", 2),
    ("djoin", "join_loss", 2),
    ("djoin_rows", "join_rows_loss", 2),
    ("dtwice", "twice_loss", 1),
    ("dflat", "flat_loss", 1),
    ("dunflat", "unflat_loss", 2),
    ("dpairs", "pairs_loss", 1),
    ("dgram", "gram_loss", 1),
    ("drows", "rows_loss", 1),
    ("drelax", "relax_loss", 3),
];

#[test]
fn gradients_match_finite_differences() {
    let p = program();
    for &(grad, loss, nwrt) in GRADS {
        for n in [1usize, 2, 5] {
            let args = args_for(p.ir(loss).unwrap(), n);
            check_gradient(&p, grad, loss, nwrt, &args, &format!("{grad} n={n}"));
        }
    }
}

/// (`@jvp` function, primal loss, number of differentiated parameters).
const JVPS: &[(&str, &str, usize)] = &[
    ("jjoin", "join_loss", 2),
    ("junflat", "unflat_loss", 2),
    ("jrows", "rows_loss", 1),
    ("jtwice", "twice_loss", 1),
];

#[test]
fn forward_mode_matches_finite_differences() {
    let p = program();
    for &(jvp, loss, nwrt) in JVPS {
        for n in [1usize, 4] {
            let args = args_for(p.ir(loss).unwrap(), n);
            check_jvp(&p, jvp, loss, nwrt, &args, &format!("{jvp} n={n}"));
        }
    }
}

#[test]
fn compound_parameter_sizes_bind_or_name_the_parameter() {
    let p = program();
    let refused = |name: &str, args: &[Value]| {
        let f = p.ir(name).unwrap();
        let refs: Vec<&Value> = args.iter().collect();
        let e = run(f, &refs).unwrap_err();
        let native = compile(f, &BackendOptions::default()).unwrap();
        let ne = native.call(&refs).unwrap_err();
        assert_eq!(
            ne.message, e.message,
            "{name}: the JIT checks as the interpreter"
        );
        e.message
    };
    // `N+1` of an empty vector: `N` would be -1.
    let e = refused("diffs1", &[Value::f64(&[])]);
    assert!(
        e.contains("argument `x` has length 0, too short for its type f64[N+1]"),
        "{e}"
    );
    // `2*N` of an odd length.
    let e = refused("pairs", &[Value::f64(&[1.0, 2.0, 3.0])]);
    assert!(
        e.contains("argument `x` has length 3") && e.contains("whole number `N`"),
        "{e}"
    );
    // `N*M` checked against `M` from another argument: the parameter is named.
    let e = refused("unflat", &[Value::f64(&[1.0; 5]), Value::f64(&[1.0, 2.0])]);
    assert!(
        e.contains("argument `x` has length 5, but its type f64[M*N] needs a length M*N for a whole number `N` (`M` = 2 from argument `y`)"),
        "{e}"
    );
    // `N*M` with `M` = 0 does not give `N`.
    let e = refused("unflat", &[Value::f64(&[]), Value::f64(&[])]);
    assert!(e.contains("does not give `N`"), "{e}");
    // `N+1` binds `N` and `w: f64[N+1]` is then checked.
    let e = refused(
        "append_loss",
        &[
            Value::f64(&[1.0, 2.0]),
            Value::f64(&[3.0]),
            Value::f64(&[1.0; 4]),
        ],
    );
    assert!(
        e.contains("argument `w` has length 4, but its type f64[N+1] needs N+1 = 3 (`N` = 2 from argument `x`)"),
        "{e}"
    );
    // `N-1` in a parameter binds `N` to the length plus 1.
    let shrink = p.ir("shrink").unwrap();
    assert_eq!(eval(shrink, &[Value::f64(&[4.0])])[0].data, vec![4.0, 4.0]);
}

#[test]
fn diagnostics_point_at_the_size() {
    for (src, want, at) in [
        (
            "fn f[N, M](x: f64[N*M]) -> f64 = +/x",
            "size parameter `N` of `f` cannot be read from the parameter types",
            "1:6",
        ),
        (
            "fn f[N](x: f64[N*N]) -> f64 = +/x",
            "size parameter `N` of `f` cannot be read from the parameter types",
            "1:6",
        ),
        (
            "fn f[N, M](x: f64[N, M]) -> f64 = +/reshape[N, 2*M](x)",
            "`reshape` to f64[N, 2*M] needs 2*M*N elements, but its argument has type f64[N, M] (M*N elements)",
            "1:37",
        ),
        (
            "fn f[N](x: f64[N]) -> f64 = +/reshape(x)",
            "`reshape` needs the new shape in brackets",
            "1:31",
        ),
        (
            "fn f(x: f64) -> f64 = +/flatten(x)",
            "`flatten` needs an array",
            "1:33",
        ),
        (
            "fn f[N](x: f64[N]) -> f64 = +/reshape[K](x)",
            "a dimension of `reshape` must be a size parameter or a static integer, but `K` is neither",
            "1:39",
        ),
        (
            "fn f[N](x: f64[N]) -> f64[N+1] = x",
            "`f` is declared to return f64[N+1], but its body has type f64[N]",
            "1:34",
        ),
        (
            "fn f[N](x: f64[2*N]) -> f64 = +/x\nfn g(x: f64[3]) -> f64 = f(x)",
            "argument `x` of `f` must have type f64[2*N], but it has type f64[3]",
            "2:28",
        ),
        (
            "fn f[N](x: f64[N+2]) -> f64 = +/x\nfn g(x: f64[1]) -> f64 = f(x)",
            "argument `x` of `f` must have type f64[N+2], but it has type f64[1]",
            "2:28",
        ),
        (
            "fn f[N](x: f64[N-N-1]) -> f64 = 0",
            "the size `N-N-1` is negative (-1)",
            "1:16",
        ),
        (
            "fn f[N](x: f64[N+]) -> f64 = 0",
            "expected a dimension",
            "1:18",
        ),
        (
            "fn f[N](static k: i64, x: f64[N]) -> f64 = +/tabulate[2 * k - 5](i => x[i])\nfn g[N](x: f64[N]) -> f64 = f(2, x)",
            "the length of `tabulate` is negative (2*k-5 = -1)",
            "1:55",
        ),
    ] {
        let e = match Program::parse(src) {
            Ok(_) => panic!("{src}: no error"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains(want), "{src}:\n{e}");
        assert!(e.contains(&format!("<input>:{at}")), "{src}: not at {at}:\n{e}");
    }
    // Equal sizes however written: `N*M` is `M*N`, `2*(N+1)` is `2*N+2`,
    // a static size is a number.
    for src in [
        "fn f[N, M](x: f64[N, M]) -> f64[M*N] = flatten(x)",
        "fn f[N](x: f64[N+1]) -> f64[2*N+2] = concat(x, x)\nfn g[N](x: f64[N+1]) -> f64[2*(N+1)] = f(x)",
        "fn f[N](static k: i64, x: f64[N]) -> f64[2, N] = reshape[k, N](concat(x, x))\nfn g[N](x: f64[N]) -> f64[2, N] = f(2, x)",
        "fn f[N](x: f64[N*3]) -> f64[N, 3] = reshape[N, 3](x)",
    ] {
        if let Err(e) = Program::parse(src) {
            panic!("{src}:\n{e}");
        }
    }
}
