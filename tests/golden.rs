//! Golden dumps of every stage for every example and every program under
//! `tests/golden/`. Set `UPDATE_GOLDEN=1` to rewrite the expectations (then
//! read the diff); never edit them by hand to make a test pass.
//!
//! Each IR dump also round-trips: print → parse → print is the identity.

mod common;

use egrad::internals::backend;
use egrad::internals::ir::parse_functions;
use egrad::internals::pipeline::{optimize_gradient, optimize_ir, Options};
use egrad::Program;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn inputs() -> Vec<(PathBuf, PathBuf)> {
    let mut out = Vec::new();
    for (dir, golden) in [
        ("examples", "tests/golden/examples"),
        ("tests/golden", "tests/golden"),
    ] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "eg"))
            .collect();
        files.sort();
        for f in files {
            out.push((f, PathBuf::from(golden)));
        }
    }
    out
}

fn dumps(path: &Path) -> Vec<(&'static str, String)> {
    let p = Program::from_file(path).unwrap_or_else(|e| panic!("{e}"));
    let (mut ir, mut ad, mut ex, mut clif) =
        (String::new(), String::new(), String::new(), String::new());
    for name in p.function_names() {
        let f = p.ir(name).unwrap();
        writeln!(ir, ";; fn {name}\n{f}").unwrap();
        let extracted = if p.grad_spec(name).is_some() {
            let g = optimize_gradient(&p, &Options::default().function(name)).unwrap();
            writeln!(ad, ";; fn {name}\n{}\n{}", g.ad.forward, g.ad.pullback).unwrap();
            g.gradient_ir()
        } else {
            optimize_ir(f, &Options::default()).unwrap().after
        };
        writeln!(ex, ";; fn {name}\n{extracted}").unwrap();
        writeln!(
            clif,
            ";; fn {name}\n{}",
            backend::clif_text(&extracted).unwrap()
        )
        .unwrap();
    }
    vec![
        ("ast", p.dump_ast()),
        ("ir", ir),
        ("ad", ad),
        ("extracted", ex),
        ("clif", clif),
    ]
}

#[test]
fn golden_stage_dumps() {
    let bless = std::env::var("UPDATE_GOLDEN").is_ok_and(|v| v == "1");
    let mut failures = Vec::new();
    let mut count = 0;
    for (input, dir) in inputs() {
        let stem = input.file_stem().unwrap().to_string_lossy().to_string();
        let a = dumps(&input);
        let b = dumps(&input);
        assert_eq!(a, b, "{}: dumps are not deterministic", input.display());
        for (stage, text) in a {
            count += 1;
            if matches!(stage, "ir" | "ad" | "extracted") {
                let body: String = text
                    .lines()
                    .filter(|l| !l.starts_with(";;"))
                    .map(|l| format!("{l}\n"))
                    .collect();
                let fs = parse_functions(&body)
                    .unwrap_or_else(|e| panic!("{} {stage}: {e}", input.display()));
                let again: String = fs.iter().map(|f| format!("{f}\n")).collect();
                assert_eq!(
                    again.trim_end(),
                    body.trim_end(),
                    "{} {stage}: print → parse → print differs",
                    input.display()
                );
            }
            let path = dir.join(format!("{stem}.{stage}"));
            common::check_golden(&path, &text, bless, &mut failures);
        }
    }
    assert!(count > 0);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
