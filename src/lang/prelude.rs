//! The prelude: helpers written in egrad's language (`prelude.eg`: `dot`,
//! `outer`, `mean`, `norm`, `logsumexp`, `softmax`, `log_softmax`,
//! `sigmoid`, `softplus`), checked with every program unless it opts out
//! (`ParseOptions::prelude`, `--no-prelude`).
//!
//! The prelude is parsed once per process with its spans from [`BASE`] on,
//! so they never meet a program's: the program's source file has the
//! prelude attached there ([`source_file`]) and a diagnostic that points
//! into the prelude shows `<prelude>:line:col`. The checker resolves names
//! in two scopes (`check::check`): a program's calls go to its own
//! functions, then to the prelude's (a program's function shadows the
//! prelude's of the same name, so programs that define their own `dot` or
//! `mean` mean theirs); the prelude's calls go to the prelude's functions
//! only. A program that calls no prelude function is checked without it
//! ([`called_by`]); otherwise the checker looks only at the prelude
//! functions the program reaches, and every prelude function is generic
//! over its element type, so it is lowered only where it is called. Dumps
//! show the program's syntax tree only.

use super::ast::{ExprKind, FnDef, Module};
use super::parser::parse_at;
use crate::error::span::SourceFile;
use std::sync::OnceLock;

/// The prelude's source text.
pub const SOURCE: &str = include_str!("prelude.eg");

/// The name diagnostics show for the prelude.
pub const NAME: &str = "<prelude>";

/// Where the prelude's spans start: past any program egrad reads (a larger
/// source is refused, see [`fits`]).
pub const BASE: u32 = 1 << 31;

/// The prefix of the prelude's own helpers, which programs do not see.
pub const PRIVATE: &str = "_";

/// The prelude's functions, parsed once (spans from [`BASE`] on). An error
/// is a bug in the prelude (the tests parse and check it).
pub fn items() -> Result<&'static [FnDef], String> {
    static PARSED: OnceLock<Result<Module, String>> = OnceLock::new();
    PARSED
        .get_or_init(|| {
            let (module, errs) = parse_at(SOURCE, BASE);
            match errs.first() {
                None => Ok(module),
                Some(d) => Err(format!(
                    "the prelude does not parse: {}",
                    d.render(&source_file(SourceFile::new("", "")))
                )),
            }
        })
        .as_ref()
        .map(|m| m.items.as_slice())
        .map_err(Clone::clone)
}

/// `file` with the prelude attached at [`BASE`], so that diagnostics
/// pointing into the prelude show it.
pub fn source_file(file: SourceFile) -> SourceFile {
    file.with_attached(BASE, SourceFile::new(NAME, SOURCE))
}

/// Whether a program of `len` bytes leaves room for the prelude's spans.
pub fn fits(len: usize) -> bool {
    len < BASE as usize
}

/// The functions the prelude offers programs, in `prelude.eg`'s order
/// (the tests check this list against the file).
pub const NAMES: &[&str] = &["dot", "outer", "norm"];

/// Whether the prelude offers programs a function of this name.
pub fn exports(name: &str) -> bool {
    NAMES.contains(&name)
}

/// Whether `module` calls a function of the prelude: a name of [`NAMES`]
/// it does not define. Only then does a program need the prelude (which
/// is parsed on first need), so a program that calls none of it is checked
/// exactly as without it.
pub fn called_by(module: &Module) -> bool {
    let own = |name: &str| module.items.iter().any(|f| f.name.name == name);
    let mut called = false;
    for f in &module.items {
        f.body.walk(&mut |e| {
            if let ExprKind::Call { callee, .. } = &e.kind {
                called |= exports(&callee.name) && !own(&callee.name);
            }
        });
    }
    called
}
