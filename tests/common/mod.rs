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
