//! A checked program: what the pipeline and the CLI consume. Parsing,
//! checking and lowering of every function happen in [`Program::parse`],
//! which gives the front end the AD stage ([`Ad`]) to answer the transform
//! attributes with: this is where `lang` and `differentiate` meet. The
//! prelude (`lang::prelude`) is checked with the program unless
//! [`ParseOptions`] says otherwise.

use crate::differentiate::Ad;
use crate::error::span::{Diagnostics, SourceFile, Span};
use crate::error::Error;
use crate::ir::Function;
use crate::lang::ast::Module;
use crate::lang::check::{check, CheckError, CheckedFn};
use crate::lang::parser::parse;
use crate::lang::prelude;

pub use crate::lang::check::{GradSpec, JvpSpec};

/// How a source file is read ([`Program::parse_with`]).
#[derive(Clone, Debug)]
pub struct ParseOptions {
    /// Check the program with the prelude (`dot`, `mean`, `softmax`, ...;
    /// see `docs/language.md`). On by default; a program's own function of
    /// a prelude name replaces the prelude's either way.
    pub prelude: bool,
    /// The most IR operations one function may have after its static
    /// `iterate`s are unrolled and its calls inlined; a larger function is
    /// an `Error::Limit` naming the construct. Compile time is about
    /// linear in this size (a fraction of a millisecond per operation), so
    /// a caller with a time budget can bound it here. Default
    /// [`MAX_OPERATIONS`].
    pub max_operations: usize,
}

/// The default of [`ParseOptions::max_operations`].
pub const MAX_OPERATIONS: usize = crate::lang::check::MAX_STMTS;

impl Default for ParseOptions {
    fn default() -> ParseOptions {
        ParseOptions {
            prelude: true,
            max_operations: MAX_OPERATIONS,
        }
    }
}

impl ParseOptions {
    /// At most `n` IR operations per function (see
    /// [`ParseOptions::max_operations`]).
    pub fn max_operations(mut self, n: usize) -> ParseOptions {
        self.max_operations = n;
        self
    }

    /// With or without the prelude.
    pub fn prelude(mut self, yes: bool) -> ParseOptions {
        self.prelude = yes;
        self
    }
}

/// A parsed, checked and lowered source file.
#[derive(Clone, Debug)]
pub struct Program {
    file: SourceFile,
    ast: Module,
    functions: Vec<(String, CheckedFn)>,
    /// Functions with static parameters, and those parameters' names.
    templates: Vec<(String, Vec<String>)>,
}

impl Program {
    /// Parse and check `source`, named `<input>` in diagnostics.
    pub fn parse(source: &str) -> Result<Program, Error> {
        Program::parse_named("<input>", source)
    }

    /// Parse and check `source`, named `name` in diagnostics.
    pub fn parse_named(name: &str, source: &str) -> Result<Program, Error> {
        Program::parse_with(name, source, &ParseOptions::default())
    }

    /// Parse and check `source`, named `name` in diagnostics, as `options`
    /// say.
    pub fn parse_with(name: &str, source: &str, options: &ParseOptions) -> Result<Program, Error> {
        let mut file = SourceFile::new(name, source);
        if options.prelude && !prelude::fits(source.len()) {
            return Err(Error::Limit(format!(
                "{name} is {} bytes: egrad reads programs under {} bytes",
                source.len(),
                prelude::BASE
            )));
        }
        let (ast, errs) = parse(source);
        if !errs.is_empty() {
            return Err(Error::Source(Diagnostics { file, items: errs }));
        }
        let prelude_items = if options.prelude && prelude::called_by(&ast) {
            file = prelude::source_file(file);
            prelude::items().map_err(Error::Internal)?
        } else {
            &[]
        };
        match check(&ast, prelude_items, &Ad, options.max_operations) {
            Ok(checked) => Ok(Program {
                file,
                ast,
                functions: checked.functions,
                templates: checked.templates,
            }),
            Err(CheckError::Source(items)) => Err(Error::Source(Diagnostics { file, items })),
            Err(CheckError::Internal(m)) => Err(Error::Internal(m)),
        }
    }

    /// Read and check a file; diagnostics name it as `path` was given.
    pub fn from_file(path: impl AsRef<std::path::Path>) -> Result<Program, Error> {
        Program::from_file_with(path, &ParseOptions::default())
    }

    /// Read and check a file as `options` say; diagnostics name it as
    /// `path` was given.
    pub fn from_file_with(
        path: impl AsRef<std::path::Path>,
        options: &ParseOptions,
    ) -> Result<Program, Error> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| Error::io("read", &shown, e))?;
        Program::parse_with(&shown, &text, options)
    }

    /// The source text and its name, as diagnostics show it.
    pub fn file(&self) -> &SourceFile {
        &self.file
    }

    /// The program's syntax tree (every node with its span; not the
    /// prelude's).
    pub fn ast(&self) -> &Module {
        &self.ast
    }

    /// The syntax tree as an indented tree with byte spans.
    pub fn dump_ast(&self) -> String {
        self.ast.dump()
    }

    /// Function names in source order.
    pub fn function_names(&self) -> Vec<&str> {
        self.functions.iter().map(|(n, _)| n.as_str()).collect()
    }

    fn get(&self, name: &str) -> Option<&CheckedFn> {
        self.functions
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, c)| c)
    }

    /// The function's IR as callers see it (the gradient for `@grad`
    /// functions).
    pub fn ir(&self, name: &str) -> Result<&Function, Error> {
        if let Some((_, statics)) = self.templates.iter().find(|(n, _)| n == name) {
            let names: Vec<String> = statics.iter().map(|s| format!("`{s}`")).collect();
            return Err(Error::Usage(format!(
                "`{name}` has static or element-type parameters ({}): it is compiled where it is called, with their values; call it from a function that fixes them",
                names.join(", ")
            )));
        }
        match self.get(name) {
            Some(c) => Ok(&c.ir),
            None => {
                let names: Vec<String> = self
                    .function_names()
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect();
                let mut avail = if names.is_empty() {
                    "the program defines no functions".to_string()
                } else {
                    format!("available: {}", names.join(", "))
                };
                if prelude::exports(name) {
                    avail.push_str(&format!(
                        "; `{name}` is the prelude's, compiled where a function of the program calls it"
                    ));
                }
                Err(Error::Usage(format!(
                    "no function named `{name}` ({avail})"
                )))
            }
        }
    }

    /// For `@grad` functions: the primal being differentiated and the
    /// indices of the parameters differentiated.
    pub fn grad_spec(&self, name: &str) -> Option<&GradSpec> {
        self.get(name).and_then(|c| c.grad.as_ref())
    }

    /// For `@jvp` functions: the function whose results' tangents it
    /// computes, and which parameter each tangent parameter goes with.
    pub fn jvp_spec(&self, name: &str) -> Option<&JvpSpec> {
        self.get(name).and_then(|c| c.jvp.as_ref())
    }

    /// Where parameter `param` of `function` is declared.
    pub fn param_span(&self, function: &str, param: usize) -> Option<Span> {
        self.get(function)
            .and_then(|c| c.ir.params.get(param))
            .map(|p| p.span)
    }
}
