//! Unit tests of `modules.rs`.

use super::*;
use crate::program::Program;

#[test]
fn every_shipped_program_compiles_and_has_its_functions() {
    for m in MODULES {
        let Kind::Shipped { source, functions } = &m.kind else {
            continue;
        };
        Program::parse_named(m.name, source).unwrap_or_else(|e| panic!("{}: {e}", m.name));
        assert!(!functions.is_empty(), "{}", m.name);
    }
}

#[test]
fn unknown_modules_and_functions_are_named() {
    let e = find("hello").err().unwrap();
    assert!(e.contains("particle, saddle"), "{e}");
    let e = find("llsq").unwrap().function("hessian").err().unwrap();
    assert!(e.contains("primal, gradient"), "{e}");
}

#[test]
fn inputs_are_checked() {
    let bad = serde_json::json!({"x": [1.0], "n": 1});
    assert!(llsq_call::<false>(&bad).unwrap_err().contains("at least 2"));
    let bad = serde_json::json!({"A": [1.0, 2.0], "ell": 2});
    assert!(det_call::<false>(&bad).unwrap_err().contains("needs 4"));
    let bad = serde_json::json!({"points": [[1.0], [1.0, 2.0]], "centroids": [[1.0]]});
    assert!(kmeans_call::<false>(&bad).unwrap_err().contains("differ"));
    let bad = serde_json::json!({"x": [1.0, "a"]});
    assert!(lse_call::<false>(&bad).unwrap_err().contains("numbers"));
    let bad = serde_json::json!({"start": [1.0, 2.0, 3.0]});
    assert!(saddle_call::<0>(&bad).unwrap_err().contains("2 numbers"));
    let bad = serde_json::json!({"v": 1.0});
    assert!(particle_call::<3>(&bad).unwrap_err().contains("`w`"));
}
