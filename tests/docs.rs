//! Every code block of the user docs (README.md, python/README.md,
//! docs/*.md) is checked, compiled or run by a test:
//! - `eg` blocks type-check and `eg-fail` blocks are rejected with a
//!   diagnostic (here); an `eg FILE` block that names a file of the
//!   repository is that file, word for word;
//! - `sh`, `console` and `c` blocks run here (README.md, docs/language.md)
//!   or in `tests/quickstart.rs` (docs/quickstart.md);
//! - `rust` blocks are doc tests (`src/lib.rs` includes the docs that have
//!   them);
//! - `python` blocks run in `python/tests/test_docs.py`;
//! - `json-schema` blocks validate the CLI's output in `tests/json.rs`;
//! - `text` blocks are diagrams, not code.

#[path = "common/doc_blocks.rs"]
mod doc_blocks;

use doc_blocks::{blocks, user_docs, Shell};
use egrad::Program;
use std::path::Path;

#[test]
fn every_block_is_one_a_test_covers() {
    let lib = std::fs::read_to_string("src/lib.rs").unwrap();
    let py = std::fs::read_to_string("python/tests/test_docs.py").unwrap();
    let mut n = 0;
    for doc in user_docs() {
        for b in blocks(&doc) {
            n += 1;
            let covered = match b.lang.as_str() {
                "eg" | "eg-fail" | "console" | "c" => true,
                // Run here and in tests/quickstart.rs; python/README.md's
                // are the commands test_docs.py knows.
                "sh" => match doc.as_str() {
                    "README.md" | "docs/language.md" | "docs/quickstart.md" => {
                        b.attr.is_none() || b.attr.as_deref() == Some("setup")
                    }
                    _ => py.contains(&format!("\"{doc}\"")),
                },
                "rust" => lib.contains(&format!("include_str!(\"../{doc}\")")),
                "python" => py.contains(&format!("\"{doc}\"")),
                "json-schema" => doc == "docs/json.md",
                "text" => doc == "docs/design.md",
                _ => false,
            };
            assert!(
                covered,
                "{}: a `{}` block no test runs (tag it with a language tests/docs.rs knows)",
                b.at(),
                b.lang
            );
        }
    }
    assert!(n >= 150, "found {n} blocks");
}

#[test]
fn eg_blocks_check_and_eg_fail_blocks_are_rejected() {
    let mut n = 0;
    for doc in user_docs() {
        for b in blocks(&doc) {
            if !b.lang.starts_with("eg") {
                continue;
            }
            n += 1;
            if let Some(file) = b.attr.as_deref().filter(|f| Path::new(f).exists()) {
                let text = std::fs::read_to_string(file).unwrap();
                assert_eq!(
                    b.body.trim(),
                    text.trim(),
                    "{}: differs from {file}",
                    b.at()
                );
            }
            let r = Program::parse_named(&doc, &b.body);
            match b.lang.as_str() {
                "eg" => assert!(
                    r.is_ok(),
                    "{}: should check:\n{}\n{}",
                    b.at(),
                    b.body,
                    r.err().unwrap()
                ),
                "eg-fail" => {
                    let e = r
                        .err()
                        .unwrap_or_else(|| panic!("{}: should fail:\n{}", b.at(), b.body));
                    assert!(e.to_string().contains('^'), "{e}");
                }
                other => panic!("{}: unknown block tag {other}", b.at()),
            }
        }
    }
    assert!(n >= 100, "found {n} blocks");
}

/// The README's commands, run as written: `cargo run --release -- ARGS`
/// runs this build's `egrad ARGS`; the steps that built this test
/// (`cargo test --release`, the runtime library's build) are done
/// already; the batch example is its own test target.
#[test]
fn readme_commands_run() {
    let mut shell = Shell::new("readme");
    shell.prelude = r#"
cargo() {
  case "$*" in
    "run --release -- "*) shift 3; egrad "$@" ;;
    "test --release" | "build --release --example egrad_runtime") ;;
    "run --release --example batch_grads"*) ;;
    *) echo "tests/docs.rs: \`cargo $*\` is not a README command it knows" >&2; return 1 ;;
  esac
}
"#
    .into();
    shell.need_numpy();
    let ran = shell.run_doc("README.md");
    assert!(ran >= 4, "ran {ran} blocks");
    for written in ["grads.npz", "rb.o", "rb.h", "lg.o", "libegrad_runtime.a"] {
        assert!(
            shell.dir.join(written).exists(),
            "the README's commands wrote no {written}"
        );
    }
}

#[test]
fn language_doc_commands_run() {
    let shell = Shell::new("language");
    let ran = shell.run_doc("docs/language.md");
    assert!(ran >= 3, "ran {ran} blocks");
}
