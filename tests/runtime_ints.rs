//! Run-time integers and indices in the language: `i64` arrays and
//! arithmetic, conversions, `x[k]` with a run-time `k`, gathers with index
//! arrays, `scatter_add`, their gradients against finite differences, and
//! an index out of range as a clear error at the source line. The JIT
//! must equal the interpreter bit for bit.

mod common;

use common::run_both;
use egrad::internals::ir::interp::run;
use egrad::internals::types::value::Value;
use egrad::internals::types::DType;
use egrad::Program;

fn prog(src: &str) -> Program {
    Program::parse_named("ints.eg", src).unwrap_or_else(|e| panic!("{e}"))
}

fn ints(xs: &[i64]) -> Value {
    Value::array(
        DType::I64,
        vec![xs.len()],
        xs.iter().map(|&x| x as f64).collect(),
    )
}

fn mat(rows: usize, cols: usize, f: impl Fn(usize) -> f64) -> Value {
    Value::array(
        DType::F64,
        vec![rows, cols],
        (0..rows * cols).map(f).collect(),
    )
}

/// Central differences of scalar function `f` (first result) with respect
/// to argument `i`.
fn fd(p: &Program, f: &str, args: &[Value], i: usize) -> Vec<f64> {
    let ir = p.ir(f).unwrap();
    let eval = |a: &[Value]| {
        let refs: Vec<&Value> = a.iter().collect();
        run(ir, &refs).unwrap()[0].as_scalar()
    };
    (0..args[i].len())
        .map(|k| {
            let h = 1e-6;
            let (mut plus, mut minus) = (args.to_vec(), args.to_vec());
            plus[i].data[k] += h;
            minus[i].data[k] -= h;
            (eval(&plus) - eval(&minus)) / (2.0 * h)
        })
        .collect()
}

fn close(got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len());
    for (a, b) in got.iter().zip(want) {
        assert!(
            (a - b).abs() <= 1e-6 * (1.0 + b.abs()),
            "{got:?} vs {want:?}"
        );
    }
}

const SRC: &str = "fn pick[N, M](x: f64[N, 3], idx: i64[M]) -> f64 = +/(sin(x[idx]) .* x[idx])
@grad(x)
fn dpick[N, M](x: f64[N, 3], idx: i64[M]) -> f64[N, 3] = pick(x, idx)
fn row[N](x: f64[N], k: i64) -> f64 = x[k] * x[k - 1]
@grad(x)
fn drow[N](x: f64[N], k: i64) -> f64[N] = row(x, k)
fn spread[N, M](base: f64[N], idx: i64[M], w: f64[M]) -> f64 = +/sin(scatter_add(base, idx, w .* w))
@grad(base, w)
fn dspread[N, M](base: f64[N], idx: i64[M], w: f64[M]) -> (f64[N], f64[M]) = spread(base, idx, w)
fn each[N, M](x: f64[N], idx: i64[M]) -> f64[M] = tabulate[M](i => x[idx[i]] * 2.0)
fn arith[M](a: i64[M], b: i64[M]) -> (i64[M], i64[M], f64) = (a / b + 1, a % b, +/f64(a * 3 - b))
fn clamp[M](a: i64[M]) -> i64[M] = if a < 0 { 0 } else { a }
fn count[N](x: f64[N]) -> f64 = +/f64(x > 0.5)";

#[test]
fn gathers_and_their_gradients() {
    let p = prog(SRC);
    let x = mat(4, 3, |i| (i as f64 * 0.37).cos());
    let idx = ints(&[3, 1, 3, 0]);
    let v = run_both(&p, "pick", &[x.clone(), idx.clone()]).unwrap();
    let want: f64 = [3, 1, 3, 0]
        .iter()
        .flat_map(|&r| (0..3).map(move |c| r * 3 + c))
        .map(|k| x.data[k].sin() * x.data[k])
        .sum();
    assert!((v[0].as_scalar() - want).abs() < 1e-12);
    let g = run_both(&p, "dpick", &[x.clone(), idx.clone()]).unwrap();
    close(&g[0].data, &fd(&p, "pick", &[x, idx], 0));
}

#[test]
fn run_time_scalar_indices_and_their_gradients() {
    let p = prog(SRC);
    let x = Value::f64(&[0.5, -1.5, 2.0, 3.0]);
    let k = Value::scalar(DType::I64, 2.0);
    let v = run_both(&p, "row", &[x.clone(), k.clone()]).unwrap();
    assert_eq!(v[0].as_scalar(), 2.0 * -1.5);
    let g = run_both(&p, "drow", &[x.clone(), k.clone()]).unwrap();
    close(&g[0].data, &fd(&p, "row", &[x, k], 0));
}

#[test]
fn scatter_add_and_its_gradients() {
    let p = prog(SRC);
    let base = Value::f64(&[0.1, 0.2, 0.3]);
    let idx = ints(&[2, 0, 2, 2]);
    let w = Value::f64(&[0.5, -0.25, 1.5, 0.75]);
    let args = [base, idx, w];
    let v = run_both(&p, "spread", &args).unwrap();
    let want = (0.1f64 + 0.0625).sin() + 0.2f64.sin() + (0.3f64 + 0.25 + 2.25 + 0.5625).sin();
    assert!((v[0].as_scalar() - want).abs() < 1e-12);
    let g = run_both(&p, "dspread", &args).unwrap();
    close(&g[0].data, &fd(&p, "spread", &args, 0));
    close(&g[1].data, &fd(&p, "spread", &args, 2));
}

#[test]
fn tabulate_reads_rows_through_an_index_array() {
    let p = prog(SRC);
    let x = Value::f64(&[1.0, 2.0, 3.0]);
    let v = run_both(&p, "each", &[x, ints(&[2, 2, 0, 1, 0])]).unwrap();
    assert_eq!(v[0].data, vec![6.0, 6.0, 2.0, 4.0, 2.0]);
}

#[test]
fn integer_arithmetic_conversions_and_conditions() {
    let p = prog(SRC);
    let v = run_both(&p, "arith", &[ints(&[7, -7, 5]), ints(&[2, 2, 0])]).unwrap();
    assert_eq!(v[0].data, vec![4.0, -3.0, 1.0]);
    assert_eq!(v[1].data, vec![1.0, 1.0, 0.0]);
    assert_eq!(v[2].as_scalar(), (21 - 2 - 21 - 2 + 15) as f64);
    let v = run_both(&p, "clamp", &[ints(&[-3, 4, 0])]).unwrap();
    assert_eq!(
        (v[0].dtype, v[0].data.clone()),
        (DType::I64, vec![0.0, 4.0, 0.0])
    );
    let v = run_both(&p, "count", &[Value::f64(&[0.1, 0.7, 0.9])]).unwrap();
    assert_eq!(v[0].as_scalar(), 2.0);
}

#[test]
fn an_index_out_of_range_names_the_line_and_the_index() {
    let p = prog(SRC);
    let x = mat(4, 3, |i| i as f64);
    for bad in [4, -1, 1 << 40] {
        let e = run_both(&p, "pick", &[x.clone(), ints(&[0, bad])]).unwrap_err();
        assert!(e.contains("ints.eg:1:"), "{e}");
        assert!(
            e.contains(&format!(
                "index {bad} is out of range for an array of length 4"
            )),
            "{e}"
        );
        assert!(e.contains('^'), "{e}");
    }
    let e = run_both(
        &p,
        "row",
        &[Value::f64(&[1.0, 2.0]), Value::scalar(DType::I64, 0.0)],
    )
    .unwrap_err();
    assert!(
        e.contains("ints.eg:4:") && e.contains("index -1 is out of range"),
        "{e}"
    );
    let e = run_both(
        &p,
        "dspread",
        &[Value::f64(&[0.0; 3]), ints(&[3]), Value::f64(&[1.0])],
    )
    .unwrap_err();
    assert!(
        e.contains("ints.eg:7:") && e.contains("index 3 is out of range"),
        "{e}"
    );
}

/// A `gather` checks all its indices where it stands, as the interpreter
/// does: an index out of range is an error even where no element of its
/// row is read (rows of no elements, or a consumer that reads only some
/// rows), in native code too.
#[test]
fn an_index_out_of_range_is_an_error_where_no_element_is_read() {
    let p = prog(
        "fn srow[N, M](A: f64[N, M], k: i64) -> f64[M] = A[k] * 2.0
fn rows[N, M, L](A: f64[N, M], idx: i64[L]) -> f64 = +/A[idx]
fn first[N, L](x: f64[N], idx: i64[L]) -> f64 = x[idx][0]",
    );
    let empty = Value::array(DType::F64, vec![1, 0], vec![]);
    let e = run_both(&p, "srow", &[empty.clone(), Value::scalar(DType::I64, 1.0)]).unwrap_err();
    assert!(
        e.contains("ints.eg:1:") && e.contains("index 1 is out of range"),
        "{e}"
    );
    let v = run_both(&p, "srow", &[empty.clone(), Value::scalar(DType::I64, 0.0)]).unwrap();
    assert!(v[0].data.is_empty());
    let e = run_both(&p, "rows", &[empty, ints(&[0, 5, -1])]).unwrap_err();
    assert!(
        e.contains("ints.eg:2:") && e.contains("index 5 is out of range"),
        "{e}"
    );
    let x = Value::f64(&[1.0, 2.0]);
    let e = run_both(&p, "first", &[x.clone(), ints(&[1, 2])]).unwrap_err();
    assert!(
        e.contains("ints.eg:3:") && e.contains("index 2 is out of range"),
        "{e}"
    );
    let v = run_both(&p, "first", &[x, ints(&[1, 0])]).unwrap();
    assert_eq!(v[0].as_scalar(), 2.0);
}

/// An integer value (`f64(ix)`, a mask of an integer comparison) read at
/// an offset in `tabulate` is computed at the offset inside the loop nest:
/// with SIMD on it ran as vector code (`fpromote` or `fcmp` of an `i64x2`,
/// rejected by Cranelift's verifier, a panic in code generation without
/// it) because the check for integers stopped at the row shift.
#[test]
fn integer_values_read_at_an_offset_in_tabulate() {
    let p = prog(
        "fn shifted[N](ix: i64[N], k: i64) -> f64[N-1] = tabulate[N-1](i => f64(ix)[i + 1] - f64(ix != k)[i])
fn loss[N](x: f64[N], ix: i64[N], k: i64) -> f64 = +/tabulate[N-1](i => f64(ix)[i + 1] * x[i] * sin(x[i + 1]))
@grad(x)
fn dloss[N](x: f64[N], ix: i64[N], k: i64) -> f64[N] = loss(x, ix, k)",
    );
    let (ix, k) = (ints(&[3, 1, 4, 1, 5, 9]), Value::scalar(DType::I64, 1.0));
    let v = run_both(&p, "shifted", &[ix.clone(), k.clone()]).unwrap();
    assert_eq!(v[0].data, vec![0.0, 4.0, 0.0, 5.0, 8.0]);
    let x = Value::f64(&[0.5, -1.5, 2.0, 3.0, -0.25, 1.0]);
    run_both(&p, "loss", &[x.clone(), ix.clone(), k.clone()]).unwrap();
    let g = run_both(&p, "dloss", &[x.clone(), ix.clone(), k.clone()]).unwrap();
    close(&g[0].data, &fd(&p, "loss", &[x, ix, k], 0));
}

#[test]
fn mistakes_with_integers_are_clear() {
    for (src, want) in [
        (
            "fn f[N](x: f64[N], k: f64) -> f64 = x[k]",
            "convert a floating-point index with `i64(...)`",
        ),
        (
            "fn f[N](a: i64[N]) -> f64[N] = sin(a)",
            "`sin` needs floating-point operands",
        ),
        (
            "fn f[N](a: i64[N]) -> i64[N] = a + 0.5",
            "0.5 is not an integer",
        ),
        (
            "fn f[N](a: i64[N], x: f64[N]) -> f64[N] = a * x",
            "write `f64(n)`",
        ),
        (
            "fn f[N](x: f64[N], i: i64[3]) -> f64 = +/scatter_add(x, i, x)",
            "`scatter_add` needs one row per index",
        ),
        (
            "fn f(a: i64[3]) -> f64 = 1.0\n@grad(a)\nfn g(a: i64[3]) -> i64[3] = f(a)",
            "cannot differentiate the i64",
        ),
    ] {
        let e = Program::parse(src).unwrap_err().to_string();
        assert!(e.contains(want) && !e.contains("internal"), "{src}\n{e}");
    }
}
