//! The programs of `examples/natural/` (written as users write them, timed
//! against JAX by `benches/natural_table.sh`): each gradient against
//! central differences of its loss, optimized at two λ, native code equal
//! to the interpreter bit for bit.

mod common;

use common::{arr, check_gradient};
use egrad::internals::types::value::Value;
use egrad::internals::types::DType;
use egrad::Program;

fn ints(data: &[i64]) -> Value {
    Value::array(
        DType::I64,
        vec![data.len()],
        data.iter().map(|&k| k as f64).collect(),
    )
}

fn program(name: &str) -> Program {
    Program::from_file(format!("examples/natural/{name}.eg")).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn embedding_mlp_cross_entropy() {
    let (v, d, h, c) = (7, 3, 4, 3);
    let args = vec![
        arr(&[v, d], 1),
        arr(&[d, h], 2),
        arr(&[h], 3),
        arr(&[h, c], 4),
        arr(&[c], 5),
        ints(&[3, 0, 6, 3, 1]),
        ints(&[2, 0, 1, 1, 0]),
    ];
    check_gradient(
        &program("embed_mlp"),
        "embed_mlp_grad",
        "embed_mlp",
        5,
        &args,
        "embed_mlp",
    );
}

#[test]
fn cnn_with_pooling() {
    let (b, f, c) = (2, 2, 3);
    let args = vec![
        arr(&[f, 3, 3], 1),
        arr(&[f], 2),
        arr(&[f * 49, c], 3),
        arr(&[c], 4),
        arr(&[b, 16, 16], 5),
        ints(&[2, 0]),
    ];
    check_gradient(&program("cnn"), "cnn_grad", "cnn", 4, &args, "cnn");
}

#[test]
fn black_scholes_greeks() {
    let n = 6;
    let shift = |v: Value, scale: f64, at: f64| Value {
        data: v.data.iter().map(|x| at + scale * x).collect(),
        ..v
    };
    let args = vec![
        shift(arr(&[n], 1), 20.0, 100.0),
        shift(arr(&[n], 2), 0.1, 0.3),
        shift(arr(&[n], 3), 0.02, 0.03),
        shift(arr(&[n], 4), 0.5, 1.0),
        shift(arr(&[n], 5), 20.0, 100.0),
    ];
    check_gradient(&program("greeks"), "greeks", "book", 4, &args, "greeks");
}

#[test]
fn huber_of_a_hand_written_logsumexp() {
    let (b, k, c) = (9, 4, 5);
    // Targets around the log-sum-exp, so both arms of the Huber loss run.
    let y = Value {
        data: arr(&[b], 3).data.iter().map(|x| 1.6 + 2.0 * x).collect(),
        ..arr(&[b], 3)
    };
    let args = vec![arr(&[k, c], 1), arr(&[b, k], 2), y];
    check_gradient(
        &program("huber_lse"),
        "huber_lse_grad",
        "huber_lse",
        1,
        &args,
        "huber_lse",
    );
}

#[test]
fn gaussian_process_likelihood() {
    let n = 12;
    let num = |x: f64| Value::scalar(DType::F64, x);
    // Points spread over a few length scales, so the kernel matrix is well
    // conditioned and far from diagonal.
    let x = Value {
        data: arr(&[n], 1).data.iter().map(|v| 2.5 * v).collect(),
        ..arr(&[n], 1)
    };
    let args = vec![num(0.9), num(1.3), num(0.1), x, arr(&[n], 2)];
    check_gradient(&program("gp"), "gp_nll_grad", "gp_nll", 3, &args, "gp");
}
