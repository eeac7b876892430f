//! Tidiness the compiler does not check: no Rust file under `src/` or
//! `tests/` is over 1,000 lines, so each stays one job a reader can hold (split a file
//! that grows past it by what its parts do; ARCHITECTURE.md lists where
//! things are), and no function is over 150 lines.

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

/// The most lines a function may have, from its `fn` line to its closing
/// brace (as rust-analyzer's tidy test asks of its own code).
const MAX_FN_LINES: usize = 150;

/// Functions allowed past [`MAX_FN_LINES`], by file and name. Only data
/// tables belong here for good; the rest are functions still to be split
/// (ARCHITECTURE.md, issue 33), and the test fails when one of them is no
/// longer over the limit, so the list only shrinks.
const LONG_FUNCTIONS: &[(&str, &str)] = &[
    // None: no function in src/ or tests/ is over the limit, and no data
    // table is.
];

/// `line` without its comment, string and character literals (enough to
/// count braces in Rust as this repository writes it).
fn code_of(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => break,
            '"' => {
                while let Some(d) = chars.next() {
                    match d {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            // A character literal ('{', '\''), not a lifetime ('a).
            '\'' => {
                let rest: String = chars.clone().take(3).collect();
                let len = if rest.starts_with('\\') {
                    rest.find('\'').map(|k| k + 1)
                } else if rest.chars().nth(1) == Some('\'') {
                    Some(2)
                } else {
                    None
                };
                if let Some(len) = len {
                    for _ in 0..len {
                        chars.next();
                    }
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// The name of the function a line declares (`fn`, with any of `pub`,
/// `pub(crate)`, `const`, `unsafe`, `extern "C"` before it).
fn declared_fn(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    loop {
        let before = rest;
        for prefix in [
            "pub(crate) ",
            "pub(super) ",
            "pub ",
            "const ",
            "unsafe ",
            "async ",
        ] {
            rest = rest.strip_prefix(prefix).unwrap_or(rest);
        }
        rest = rest.strip_prefix("extern \"C\" ").unwrap_or(rest);
        if rest == before {
            break;
        }
    }
    let name = rest.strip_prefix("fn ")?;
    let end = name
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(name.len());
    (end > 0).then(|| &name[..end])
}

/// Every function over [`MAX_FN_LINES`] lines in `text`: (name, first
/// line, length).
fn long_functions(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(name) = declared_fn(line) else {
            continue;
        };
        let mut depth = 0i64;
        let mut opened = false;
        for (j, l) in lines.iter().enumerate().skip(i) {
            let code = code_of(l);
            // A declaration without a body (a trait method, an extern).
            if !opened && code.contains(';') && !code.contains('{') {
                break;
            }
            for c in code.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if opened && depth <= 0 {
                let len = j - i + 1;
                if len > MAX_FN_LINES {
                    out.push((name.to_string(), i + 1, len));
                }
                break;
            }
        }
    }
    out
}

#[test]
fn the_function_measure_counts_braces_outside_literals() {
    let f = "fn f() {\n    let s = \"}}\";\n    let c = '{';\n    // }\n}\n";
    assert!(long_functions(f).is_empty());
    let body: String = (0..MAX_FN_LINES).map(|_| "    x += 1;\n").collect();
    let long = format!("pub(crate) fn g<'a>(x: &'a str) {{\n{body}}}\nfn h() {{}}\n");
    assert_eq!(
        long_functions(&long),
        vec![("g".to_string(), 1, MAX_FN_LINES + 2)]
    );
    assert_eq!(declared_fn("    pub extern \"C\" fn k(x: f64)"), Some("k"));
    assert_eq!(declared_fn("    let fn_x = 1;"), None);
}

#[test]
fn no_function_is_over_150_lines() {
    let mut files = Vec::new();
    rust_files(std::path::Path::new("src"), &mut files);
    rust_files(std::path::Path::new("tests"), &mut files);
    let mut over = Vec::new();
    let mut listed_and_found = Vec::new();
    for p in &files {
        let path = p.display().to_string();
        for (name, line, len) in long_functions(&std::fs::read_to_string(p).unwrap()) {
            if LONG_FUNCTIONS.contains(&(path.as_str(), name.as_str())) {
                listed_and_found.push((path.clone(), name));
            } else {
                over.push(format!("{path}:{line}: `{name}` is {len} lines"));
            }
        }
    }
    assert!(
        over.is_empty(),
        "over {MAX_FN_LINES} lines (split by what the parts do):\n{}",
        over.join("\n")
    );
    let stale: Vec<String> = LONG_FUNCTIONS
        .iter()
        .filter(|(f, n)| !listed_and_found.iter().any(|(g, m)| g == f && m == n))
        .map(|(f, n)| format!("{f}: `{n}`"))
        .collect();
    assert!(
        stale.is_empty(),
        "listed in LONG_FUNCTIONS but no longer over {MAX_FN_LINES} lines (remove them):\n{}",
        stale.join("\n")
    );
}
