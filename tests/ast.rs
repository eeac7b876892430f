//! Golden tests of `Program::dump_ast`: `tests/ast/<name>.eg` against
//! `tests/ast/<name>.ast`. `UPDATE_GOLDEN=1` rewrites the expectations.

use egrad::Program;
use std::path::Path;

#[test]
fn ast_dumps_match() {
    let update = std::env::var("UPDATE_GOLDEN").is_ok_and(|v| v == "1");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ast");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("tests/ast exists")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".eg"))
        .collect();
    names.sort();
    assert!(!names.is_empty());
    let mut failures = Vec::new();
    for name in names {
        let src = std::fs::read_to_string(dir.join(&name)).expect("readable");
        let got = match Program::parse_named(&name, &src) {
            Ok(p) => p.dump_ast(),
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        let path = dir.join(name.replace(".eg", ".ast"));
        if update {
            std::fs::write(&path, &got).expect("writable");
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(got.as_str()) {
            failures.push(format!(
                "{name}: dump differs (UPDATE_GOLDEN=1 to rewrite)\n{got}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
