//! Helpers shared by integration tests.

use std::path::PathBuf;

/// Every `examples/*.eg`, sorted.
pub fn example_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir("examples")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "eg"))
        .collect();
    files.sort();
    files
}

/// Every `examples/*.eg` and `examples/suite/*.eg`, sorted.
#[allow(dead_code)]
pub fn all_example_files() -> Vec<PathBuf> {
    let mut files = example_files();
    let mut suite: Vec<PathBuf> = std::fs::read_dir("examples/suite")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "eg"))
        .collect();
    suite.sort();
    files.extend(suite);
    files
}

/// Deterministic arguments for `f`, every size parameter `n`; parameter `k`
/// gets a different smooth sequence in (-0.9, 0.9).
#[allow(dead_code)]
pub fn sample_args(f: &egrad::lang::ir::Function, n: usize) -> Vec<egrad::lang::value::Value> {
    use egrad::lang::types::Dim;
    f.params
        .iter()
        .enumerate()
        .map(|(k, prm)| {
            let t = f.ty(prm.var);
            let shape: Vec<usize> = t
                .shape
                .iter()
                .map(|d| match d {
                    Dim::Lit(m) => *m as usize,
                    Dim::Param(_) => n,
                    Dim::Sub(..) => panic!("parameters have plain sizes"),
                })
                .collect();
            let len: usize = shape.iter().product();
            let data = (0..len)
                .map(|i| ((i * 7 + k * 13) as f64 * 0.37).sin() * 0.9)
                .collect();
            egrad::lang::value::Value::array(t.dtype, shape, data)
        })
        .collect()
}
