//! The house is one-way: each room (a folder or top-level file under `src/`)
//! may name only the rooms its row of [`ALLOWED`] lists, and each row names
//! only rooms above it (so no two rooms import each other). The table is
//! the one in ARCHITECTURE.md ("Rooms"), which must say the same; a
//! `crate::` path in code (a `use` or a path in an expression, grouped
//! `use crate::{a, b}` too) is an arrow.
//! Comments, and unit-test modules at the end of a file, are not: tests may
//! build their inputs with any stage.

use std::collections::BTreeMap;

/// Room → the rooms it may import. `lib.rs` and `internals.rs` (the crate
/// root, which declares every room) and the binary (`main.rs`, `cli.rs`,
/// which use `egrad::`, not `crate::`) are not rooms.
const ALLOWED: &[(&str, &[&str])] = &[
    ("error", &[]),
    // Element types, sizes and values: the first room.
    ("types", &["error"]),
    // Kernels, shared by the interpreter and the generated code.
    ("vmath", &[]),
    ("gemm", &[]),
    ("linalg", &[]),
    // The op table: types its ops with `types` and evaluates them on
    // `types::value`.
    ("ops", &["error", "types", "gemm", "linalg", "vmath"]),
    ("gemv", &["gemm", "ops"]),
    // The runtime library's C exports: what object files call by name.
    ("runtime", &["types", "ops", "gemm", "gemv", "vmath"]),
    // The IR, its interpreter and the memory limit.
    ("ir", &["error", "types", "ops"]),
    // The front end: lowers checked source to `ir`.
    ("lang", &["error", "types", "ops", "ir"]),
    // AD answers the front end's transform requests (`ir::transform`).
    ("differentiate", &["error", "types", "ops", "ir"]),
    // Front end and AD joined: `Program`.
    (
        "program",
        &["error", "types", "ir", "lang", "differentiate"],
    ),
    // The e-graph, extraction from it, and the residual plan.
    ("rewrites", &["error", "types", "ops", "ir"]),
    ("extract", &["error", "types", "ops", "ir", "rewrites"]),
    ("residuals", &["error", "types", "ir"]),
    // The backend never sees the e-graph nor the front end.
    (
        "backend",
        &["error", "types", "ops", "ir", "gemm", "gemv", "vmath"],
    ),
    // Calling compiled code: arguments, argument errors as diagnostics.
    ("call", &["error", "types", "ir", "backend"]),
    // The drivers.
    (
        "pipeline",
        &[
            "error",
            "types",
            "ops",
            "ir",
            "call",
            "program",
            "differentiate",
            "rewrites",
            "extract",
            "residuals",
            "backend",
        ],
    ),
    (
        "aot",
        &[
            "error",
            "types",
            "ops",
            "ir",
            "program",
            "pipeline",
            "residuals",
            "backend",
        ],
    ),
    (
        "cache",
        &[
            "error", "types", "ir", "lang", "program", "pipeline", "extract", "backend", "call",
        ],
    ),
    (
        "explore",
        &[
            "error", "types", "program", "pipeline", "extract", "backend", "call",
        ],
    ),
    ("suite", &["error", "types"]),
    ("npy", &["error", "types"]),
    (
        "gradbench",
        &[
            "error", "types", "ir", "program", "pipeline", "cache", "backend", "call",
        ],
    ),
];

/// The room of a file, by its path under `src/` (`None`: not a room).
fn room(path: &str) -> Option<&str> {
    let rel = path.strip_prefix("src/")?;
    let first = rel.split('/').next()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    match name {
        "lib" | "internals" | "main" | "cli" => None,
        _ => Some(name),
    }
}

/// The code of a file without comments and without its unit-test modules
/// (`#[cfg(test)] mod ... { }`); `None` for a file that is a test module as
/// a whole.
fn code(path: &str, text: &str) -> Option<String> {
    if path.ends_with("_test.rs") || path.ends_with("/tests.rs") {
        return None;
    }
    let mut out = String::new();
    let lines: Vec<&str> = text.lines().collect();
    // Brace depth inside a `#[cfg(test)] mod` being skipped.
    let mut skipping: Option<i64> = None;
    for (i, line) in lines.iter().enumerate() {
        let line = match line.find("//") {
            Some(k) => &line[..k],
            None => line,
        };
        if let Some(depth) = skipping.as_mut() {
            *depth += line.matches('{').count() as i64 - line.matches('}').count() as i64;
            if *depth <= 0 && line.contains('}') {
                skipping = None;
            }
            continue;
        }
        if line.trim() == "#[cfg(test)]"
            && lines
                .get(i + 1)
                .is_some_and(|l| l.trim_start().starts_with("mod "))
        {
            // `mod tests;` (a file of its own) or `mod tests {`.
            if lines[i + 1].contains('{') {
                skipping = Some(0);
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    Some(out)
}

/// The first segment of every `crate::` path in `code` (through
/// `crate::internals::`), grouped imports expanded.
fn targets(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(k) = rest.find("crate::") {
        let before = rest[..k].chars().last();
        rest = &rest[k + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue; // `egrad_crate::`, `$crate::`
        }
        let mut path = rest;
        if let Some(p) = path.strip_prefix("internals::") {
            path = p;
        }
        if let Some(group) = path.strip_prefix('{') {
            // Top-level entries of the group.
            let mut depth = 0;
            let mut entry = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.push(first_segment(&entry));
                        entry.clear();
                        continue;
                    }
                    _ => {}
                }
                entry.push(c);
            }
            if !entry.trim().is_empty() {
                out.push(first_segment(&entry));
            }
        } else {
            out.push(first_segment(path));
        }
    }
    out
}

fn first_segment(path: &str) -> String {
    path.trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// Every arrow in `files` ((path, text)) that the table does not allow.
/// `root_items` maps the crate root's re-exports (`crate::Error`) to the
/// room that defines them.
fn violations(
    files: &[(String, String)],
    allowed: &[(&str, &[&str])],
    root_items: &BTreeMap<String, String>,
) -> Vec<String> {
    let table: BTreeMap<&str, &[&str]> = allowed.iter().copied().collect();
    let mut out = Vec::new();
    for (path, text) in files {
        let Some(from) = room(path) else { continue };
        let Some(code) = code(path, text) else {
            continue;
        };
        let Some(may) = table.get(from) else {
            out.push(format!("{path}: room `{from}` is not in the arrows table"));
            continue;
        };
        for t in targets(&code) {
            let to = if table.contains_key(t.as_str()) {
                t.clone()
            } else if let Some(r) = root_items.get(&t) {
                r.clone()
            } else {
                out.push(format!(
                    "{path}: `crate::{t}` is neither a room nor a root item"
                ));
                continue;
            };
            if to != from && !may.contains(&to.as_str()) {
                out.push(format!("{path}: `{from}` imports `{to}` (`crate::{t}`)"));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The names `lib.rs` re-exports with `pub use <room>::...`, by room.
fn root_items(lib: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for stmt in lib.split(';') {
        let Some(k) = stmt.find("pub use ") else {
            continue;
        };
        let path = &stmt[k + "pub use ".len()..];
        let from = first_segment(path);
        let names = match path.find('{') {
            Some(b) => path[b + 1..].trim_end_matches(['}', ' ', '\n']).to_string(),
            None => path.rsplit("::").next().unwrap_or("").to_string(),
        };
        for name in names.split(',') {
            let name = first_segment(name);
            if !name.is_empty() {
                out.insert(name, from.clone());
            }
        }
    }
    out
}

fn read_src(dir: &str, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        let s = p.to_str().unwrap().to_string();
        if p.is_dir() {
            read_src(&s, out);
        } else if s.ends_with(".rs") {
            out.push((s.clone(), std::fs::read_to_string(&p).unwrap()));
        }
    }
}

#[test]
fn every_import_follows_the_arrows() {
    let mut files = Vec::new();
    read_src("src", &mut files);
    assert!(files.len() > 40, "read {} files", files.len());
    let lib = std::fs::read_to_string("src/lib.rs").unwrap();
    let roots = root_items(&lib);
    assert_eq!(roots.get("Program").map(String::as_str), Some("program"));
    assert_eq!(roots.get("Error").map(String::as_str), Some("error"));
    let bad = violations(&files, ALLOWED, &roots);
    assert!(bad.is_empty(), "forbidden arrows:\n{}", bad.join("\n"));
    // Every room on disk is in the table, and the table has no stale rows.
    let rooms: std::collections::BTreeSet<&str> =
        files.iter().filter_map(|(p, _)| room(p)).collect();
    let table: std::collections::BTreeSet<&str> = ALLOWED.iter().map(|r| r.0).collect();
    assert_eq!(rooms, table);
}

#[test]
fn each_room_imports_only_rooms_above_it() {
    for (i, (room, may)) in ALLOWED.iter().enumerate() {
        for m in *may {
            let above = ALLOWED[..i].iter().any(|(r, _)| r == m);
            assert!(above, "`{room}` may import `{m}`, which is not above it");
        }
    }
}

/// The room names in backticks in one cell of a Markdown table row.
fn names(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

#[test]
fn the_map_has_the_same_arrows() {
    let map = std::fs::read_to_string("ARCHITECTURE.md").unwrap();
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    let mut in_rooms = false;
    for line in map.lines() {
        if line.starts_with("## ") {
            in_rooms = line == "## Rooms";
        }
        if !in_rooms || !line.starts_with("| `") {
            continue;
        }
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").collect();
        let rooms = names(cells[0]);
        let may = names(cells[cells.len() - 1]);
        for r in rooms {
            rows.push((r, may.clone()));
        }
    }
    let table: Vec<(String, Vec<String>)> = ALLOWED
        .iter()
        .map(|(r, m)| (r.to_string(), m.iter().map(|s| s.to_string()).collect()))
        .collect();
    assert_eq!(
        rows, table,
        "ARCHITECTURE.md's Rooms table and ALLOWED differ"
    );
}

#[test]
fn the_checker_catches_a_forbidden_import() {
    let roots: BTreeMap<String, String> = [("Error", "error"), ("Program", "program")]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    let file = |p: &str, t: &str| (p.to_string(), t.to_string());
    let files = vec![
        // Allowed: lang → ops and error, a comment naming the backend, a
        // test module using AD.
        file(
            "src/lang/check/body.rs",
            "use crate::ops::Op;\nuse crate::Error;\n// see crate::backend::lower\n#[cfg(test)]\nmod tests {\n    use crate::differentiate::reverse;\n    fn f() {\n    }\n}\nuse crate::extract::cost;\n",
        ),
        // Forbidden: the front end importing AD, in a grouped import that
        // spans lines.
        file(
            "src/lang/check/mod.rs",
            "use crate::{\n    ops::Op,\n    differentiate::reverse,\n};\n",
        ),
        // Forbidden: the backend seeing the e-graph, as a path in code.
        file(
            "src/backend/jit.rs",
            "fn f() { let _ = crate::internals::rewrites::lang::EG::default(); }\n",
        ),
        // Forbidden: the front end reaching AD through a root re-export.
        file("src/lang/program.rs", "use crate::Program;\n"),
        // A room missing from the table.
        file("src/newroom.rs", "use crate::ir;\n"),
    ];
    let bad = violations(&files, ALLOWED, &roots);
    assert_eq!(
        bad,
        vec![
            "src/backend/jit.rs: `backend` imports `rewrites` (`crate::rewrites`)".to_string(),
            "src/lang/check/body.rs: `lang` imports `extract` (`crate::extract`)".to_string(),
            "src/lang/check/mod.rs: `lang` imports `differentiate` (`crate::differentiate`)"
                .to_string(),
            "src/lang/program.rs: `lang` imports `program` (`crate::Program`)".to_string(),
            "src/newroom.rs: room `newroom` is not in the arrows table".to_string(),
        ]
    );
}
