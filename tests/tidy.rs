//! Tidiness the compiler does not check: no Rust file under `src/` or
//! `tests/` is over 1,000 lines, so each stays one job a reader can hold (split a file
//! that grows past it by what its parts do; ARCHITECTURE.md lists where
//! things are).

/// The most lines a file under `src/` or `tests/` may have.
const MAX_LINES: usize = 1000;

fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn no_source_file_is_over_a_thousand_lines() {
    let mut files = Vec::new();
    rust_files(std::path::Path::new("src"), &mut files);
    rust_files(std::path::Path::new("tests"), &mut files);
    assert!(files.len() > 100, "read {} files", files.len());
    let long: Vec<String> = files
        .iter()
        .filter_map(|p| {
            let n = std::fs::read_to_string(p).unwrap().lines().count();
            (n > MAX_LINES).then(|| format!("{}: {n} lines", p.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "over {MAX_LINES} lines:\n{}",
        long.join("\n")
    );
}
