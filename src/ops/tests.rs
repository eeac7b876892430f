//! Unit tests of the op table.

use super::*;
use crate::types::value::Value;
use crate::types::DType;

#[test]
fn names_round_trip() {
    for op in ALL_OPS {
        assert_eq!(Op::from_name(op.name()), Some(*op));
        assert_eq!(op.vjp().len(), op.arity(), "{op:?}");
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
