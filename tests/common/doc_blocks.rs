//! The fenced code blocks of the user docs, and a shell that runs their
//! commands (`tests/docs.rs`, `tests/quickstart.rs`).
//!
//! A block's info string is its language and, optionally, one word more:
//! `eg FILE` / `c FILE` (the block is that file: written into the shell's
//! folder before the commands after it run), `sh setup` (the build and
//! install steps that gave this test its `egrad`, not run here).

// Each test file uses the part it needs.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// One fenced block of a doc.
#[derive(Clone, Debug)]
pub struct Block {
    /// The doc, from the repository root.
    pub file: String,
    /// The line of the opening fence (1-based).
    pub line: usize,
    /// The first word of the info string (`sh`, `eg`, `rust`, ...).
    pub lang: String,
    /// The second word, if any (`setup`, a file name).
    pub attr: Option<String>,
    /// The lines between the fences, each ending in a newline.
    pub body: String,
}

impl Block {
    /// `file:line`, for messages.
    pub fn at(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

/// Every fenced block of `path` (from the repository root), in order.
pub fn blocks(path: &str) -> Vec<Block> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut out = Vec::new();
    let mut cur: Option<Block> = None;
    for (i, line) in text.lines().enumerate() {
        match (&mut cur, line.strip_prefix("```")) {
            (None, Some(info)) => {
                let mut words = info.split_whitespace();
                cur = Some(Block {
                    file: path.to_string(),
                    line: i + 1,
                    lang: words.next().unwrap_or("").to_string(),
                    attr: words.next().map(str::to_string),
                    body: String::new(),
                });
            }
            (Some(_), Some("")) => out.push(cur.take().unwrap()),
            (Some(b), _) => {
                b.body.push_str(line);
                b.body.push('\n');
            }
            (None, None) => {}
        }
    }
    assert!(cur.is_none(), "{path}: a code block is not closed");
    out
}

/// What `sh setup` blocks may say (a comment after `#` aside): the steps
/// that gave the tests their `egrad` (the build) and CI its Python
/// package, which a test does not run again.
pub const SETUP: &[&str] = &["cargo install --locked --path .", "pip install ./python"];

/// The user docs whose blocks are tested: the READMEs and `docs/`.
pub fn user_docs() -> Vec<String> {
    let mut docs = vec!["README.md".to_string(), "python/README.md".to_string()];
    let mut more: Vec<String> = std::fs::read_dir("docs")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .map(|p| p.display().to_string())
        .collect();
    more.sort();
    docs.extend(more);
    docs
}

/// A folder where a doc's commands run, with this build's `egrad` first on
/// `PATH` and the repository's `examples/`, `tests/` and `python/` linked
/// in (so `egrad run examples/loss.eg` works as it does from a clone).
pub struct Shell {
    pub dir: PathBuf,
    path: String,
    /// Shell functions defined before every command (see `tests/docs.rs`).
    pub prelude: String,
}

impl Shell {
    pub fn new(name: &str) -> Shell {
        let root = std::env::current_dir().unwrap();
        let dir = root.join("target/tmp").join(format!("docs-{name}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for link in ["examples", "tests", "python"] {
            std::os::unix::fs::symlink(root.join(link), dir.join(link)).unwrap();
        }
        let bin = Path::new(env!("CARGO_BIN_EXE_egrad")).parent().unwrap();
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        Shell {
            dir,
            path,
            prelude: String::new(),
        }
    }

    /// Fail with a clear message unless `python3` on this shell's PATH
    /// imports NumPy (the docs' commands read and write `.npz` with it).
    pub fn need_numpy(&self) {
        let (code, text) = self.run("python3 -c 'import numpy'");
        assert_eq!(
            code, 0,
            "the docs' commands need python3 with NumPy on PATH (.ci/run puts its venv first; \
             locally: python3 -m venv v && v/bin/pip install numpy && PATH=$PWD/v/bin:$PATH cargo test ...):\n{text}"
        );
    }

    /// Write a block that names a file (`eg FILE`, `c FILE`) into the folder.
    pub fn write(&self, b: &Block) {
        let name = b.attr.as_deref().expect("a file name");
        std::fs::write(self.dir.join(name), &b.body).unwrap();
    }

    /// Run `script` with bash (`-e -o pipefail`): its exit code and what
    /// it printed, stdout then stderr.
    pub fn run(&self, script: &str) -> (i32, String) {
        let out = Command::new("bash")
            .args(["-e", "-o", "pipefail", "-c"])
            .arg(format!("{}\n{script}", self.prelude))
            .current_dir(&self.dir)
            .env("PATH", &self.path)
            .output()
            .expect("run bash");
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        (out.status.code().unwrap_or(-1), text)
    }

    /// Run a doc's commands in order: its `sh` and `console` blocks, with
    /// the files its `eg FILE` and `c FILE` blocks name written first
    /// (not one of the repository's: that block is checked against it in
    /// `tests/docs.rs`). Its `sh setup` blocks are checked to say only
    /// [`SETUP`]'s steps, not run. Returns how many blocks ran.
    pub fn run_doc(&self, doc: &str) -> usize {
        let mut ran = 0;
        for b in blocks(doc) {
            let named = b.attr.as_deref().filter(|f| !Path::new(f).exists());
            match (b.lang.as_str(), b.attr.as_deref()) {
                ("eg" | "c", Some(_)) if named.is_some() => self.write(&b),
                ("sh", Some("setup")) => {
                    for line in b.body.lines() {
                        let cmd = line.split('#').next().unwrap().trim();
                        assert!(SETUP.contains(&cmd), "{}: `{cmd}` is no setup step", b.at());
                    }
                }
                ("sh", None) => {
                    self.sh(&b);
                    ran += 1;
                }
                ("console", _) => {
                    self.console(&b);
                    ran += 1;
                }
                _ => {}
            }
        }
        ran
    }

    /// Run an `sh` block; it must succeed.
    pub fn sh(&self, b: &Block) {
        let (code, text) = self.run(&b.body);
        assert_eq!(code, 0, "{}: the block failed:\n{}\n{text}", b.at(), b.body);
    }

    /// Run a `console` block: each `$ command` line, whose output must
    /// contain the lines shown under it, in order (a diagnostic is shown by
    /// its first line; a line ending in `...` by its start). A command
    /// succeeds unless its first line shown is an `error:`.
    pub fn console(&self, b: &Block) {
        let mut steps: Vec<(String, Vec<String>)> = Vec::new();
        for line in b.body.lines() {
            match line.strip_prefix("$ ") {
                Some(cmd) => steps.push((cmd.to_string(), Vec::new())),
                None => steps
                    .last_mut()
                    .unwrap_or_else(|| panic!("{}: output before any `$` line", b.at()))
                    .1
                    .push(line.to_string()),
            }
        }
        for (cmd, shown) in steps {
            let (code, text) = self.run(&cmd);
            let fails = shown.first().is_some_and(|l| l.starts_with("error:"));
            assert_eq!(
                code != 0,
                fails,
                "{}: `{cmd}` exited {code}:\n{text}",
                b.at()
            );
            let mut lines = text.lines();
            for want in &shown {
                let want = want.trim_end();
                // `...` at the end: the rest of the line is abridged.
                let fits = |l: &str| match want.strip_suffix("...") {
                    Some(head) => l.starts_with(head),
                    None => l.trim_end() == want,
                };
                assert!(
                    lines.any(fits),
                    "{}: `{cmd}` did not print the line\n{want}\nit printed:\n{text}",
                    b.at()
                );
            }
        }
    }
}
