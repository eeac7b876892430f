//! Unit tests of the op table.

use super::*;
use crate::types::value::Value;
use crate::types::{DType, Type};

#[test]
fn names_round_trip() {
    for op in ALL_OPS {
        assert_eq!(Op::from_name(op.name()), Some(*op));
        if op.differentiable() {
            assert_eq!(op.vjp().len(), op.arity(), "{op:?}");
        } else {
            assert!(op.vjp().is_empty(), "{op:?}");
        }
    }
}

#[test]
fn literals_keep_sign_of_zero_and_nan() {
    let z = Lit::new(DType::F32, 0.0);
    let nz = Lit::new(DType::F32, -0.0);
    assert_ne!(z, nz);
    assert_eq!(nz.to_string(), "-0.0f32");
    for s in [
        "2.0f32", "-0.5f64", "NaNf32", "inff64", "-inff32", "1e-8f32",
    ] {
        assert_eq!(Lit::parse_suffixed(s).unwrap().to_string(), s);
    }
    assert!(Lit::parse_suffixed("2.0").is_none());
    assert!(Lit::parse_suffixed("xf32").is_none());
}

#[test]
fn f32_eval_rounds_in_f32() {
    let a = Value::scalar(DType::F32, 0.1);
    let b = Value::scalar(DType::F32, 0.2);
    let r = Op::Add.eval(&[&a, &b], DType::F32, &[]);
    assert_eq!(r.as_scalar(), (0.1f32 + 0.2f32) as f64);
}

/// Type rule errors: an op, its operand types, its annotation and the
/// message, word for word (golden tests show them).
const TYPE_RULE_MESSAGES: &[(Op, &[&str], Option<&str>, &str)] = &[
    (Op::Add, &["f64"], None, "`add` takes 2 operand(s), got 1"),
    (Op::Zero, &[], None, "`zero` needs a result type"),
    (Op::Add, &["f64", "bool"], None, "`add` does not take bool operands, got bool"),
    (Op::Pow, &["f64", "i64"], None, "`pow` needs floating-point operands, got i64"),
    (Op::Rem, &["f64", "f64"], None, "`rem` needs i64 operands, got f64"),
    (Op::Add, &["f64", "f32"], None, "`add` needs operands of one type, got f64 and f32"),
    (Op::Threefry0, &["i64", "i64", "i64", "f64"], None, "`threefry0` needs four i64 operands of one shape, got i64, i64, i64 and f64"),
    (Op::Select, &["f64", "f64", "f32"], None, "`select` needs a mask and two operands of one type, got f64, f64 and f32"),
    (Op::Sum, &["f64"], None, "`sum` needs an array operand"),
    (Op::Transpose, &["f64[3]"], None, "`transpose` needs a matrix, got f64[3]"),
    (Op::Reverse, &["f64"], None, "`reverse` needs an array (rank 1 or more), got f64"),
    (Op::Iota, &[], Some("f64[3]"), "`iota` gives an i64 vector, not f64[3]"),
    (Op::Dim(1), &["f64[3]"], None, "`dim` needs an array with an axis 1, got f64[3]"),
    (Op::Bcast, &["f32"], Some("f64[3]"), "`bcast` to f64[3] needs a f64 scalar, got f32"),
    (Op::Slice(0), &["f64[3, 2]"], Some("f64[2, 3]"), "`slice` to f64[2, 3] needs an array of the same rows, got f64[3, 2]"),
    (Op::Index(0), &["f64"], None, "`index` needs an array operand"),
    (Op::Unindex(0), &["f64[3]"], Some("f64[N, 2]"), "`unindex` to f64[N, 2] needs a f64[2] row, got f64[3]"),
    (Op::Spread, &["f64[3]"], Some("f64[N, 2]"), "`spread` to f64[N, 2] needs a vector of its leading length, got f64[3]"),
    (Op::SumTail, &["f64"], None, "`sumtail` needs an array operand"),
    (Op::MatMul, &["f64[3]", "f64[3, 2]"], None, "`matmul` needs matrices [M, K] and [K, N], got f64[3] and f64[3, 2]"),
    (Op::MatMul, &["f64[2, 3]", "f32[3, 2]"], None, "`matmul` needs operands of one element type, got f64[2, 3] and f32[3, 2]"),
    (Op::MatMul, &["f64[2, 3]", "f64[4, 2]"], None, "`matmul` of f64[2, 3] and f64[4, 2]: the inner axes differ: the first operand's axis 1 (its columns) has length 3, the second's axis 0 (its rows) has length 4; they must be equal ([M, K] times [K, N])"),
    (Op::Reshape, &["f64[3]"], Some("f64[2, 2]"), "`reshape` to f64[2, 2] needs an array of as many elements, got f64[3]"),
    (Op::Gather(0), &["f64", "i64[2]"], None, "`gather` needs an array and i64 indices, got f64 and i64[2]"),
    (Op::Scatter(0), &["i64[2]", "f64[3]"], Some("f64[N, 3]"), "`scatter` to f64[N, 3] needs i64 indices and one row of it per index, got i64[2] and f64[3]"),
    (Op::Kernel(999_999, 1), &["f64[3]"], None, "there is no kernel 999999"),
];

/// The type rule's messages, word for word (golden tests show them).
#[test]
fn type_rule_messages() {
    let ty = |s: &str| Type::parse(s).unwrap();
    let check = |op: Op, args: &[&str], annot: Option<&str>, want: &str| {
        let tys: Vec<Type> = args.iter().map(|s| ty(s)).collect();
        let refs: Vec<&Type> = tys.iter().collect();
        let annot = annot.map(ty);
        let e = op.result_type(&refs, annot.as_ref()).unwrap_err();
        assert_eq!(e.to_string(), want, "{op:?}: {e:?}");
    };
    for &(op, args, annot, want) in TYPE_RULE_MESSAGES {
        check(op, args, annot, want);
    }
    for scan in [false, true] {
        let n = if scan { 2 } else { 1 };
        check(
            Op::LoopTape(0, 1, scan),
            &["f64[3]", "f64[M]"][..n],
            Some("f64[N, 2]"),
            "`looptape` of a state f64[3] gives rows of that state (keeping every k-th, k > 0), not f64[N, 2]",
        );
        check(
            Op::LoopVjp(0, 1, 0, scan),
            &["f64[N, 3]", "f64[2]", "f64[M]"][..n + 1],
            None,
            "`loopvjp` needs a tape of states, the cotangent of one state (or of the tape, flag 4), k > 0 and flags below 8; got f64[N, 3] and f64[2]",
        );
        check(
            Op::LoopVjp(0, 1, VJP_SEQ, scan),
            &["f64[N, 3]", "f64[3]", "f64[M]"][..n + 1],
            Some("f64[3]"),
            "`loopvjp` with the sequence's cotangent gives rows of the state's and the row's cotangents, not f64[3]",
        );
    }
    let kernel = OpTypeError::WrongResult {
        op: "kernel",
        gives: Gives::Kernel {
            id: 3,
            ty: ty("f64[3]"),
        },
        got: ty("f64[2]"),
    };
    assert_eq!(kernel.to_string(), "`kernel 3` gives f64[3], not f64[2]");
}

/// The builder helpers' messages, word for word.
#[test]
fn part_messages() {
    let t = Type::parse("f64[N, 3]").unwrap();
    let u = Type::parse("f64[2]").unwrap();
    for (part, want) in [
        (Part::TapeOfStates, "a tape of states, not f64[N, 3]"),
        (Part::RowSize, "the rows of f64[N, 3] have no size"),
        (Part::RowParts, "parts of the rows of f64[N, 3]"),
        (Part::Parts, "parts of f64[N, 3]"),
        (Part::Columns, "columns of f64[N, 3]"),
        (Part::LeadingAxes, "the leading axes of f64[N, 3]"),
        (Part::Rows, "the rows of f64[N, 3]"),
        (Part::Size, "the size of f64[N, 3]"),
        (Part::States, "the states of f64[N, 3]"),
    ] {
        assert_eq!(OpTypeError::parts(part, &t).to_string(), want);
    }
    let both = OpTypeError::ConcatColumns { a: t, b: u };
    assert_eq!(both.to_string(), "the columns of f64[N, 3] and f64[2]");
    assert_eq!(
        OpTypeError::NotAScan.to_string(),
        "the sequence of a loop that is not a scan"
    );
    assert_eq!(OpTypeError::PackNothing.to_string(), "packing no values");
}
