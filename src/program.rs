//! A checked program: what the pipeline and the CLI consume. Parsing,
//! checking and lowering of every function happen in [`Program::parse`],
//! which gives the front end the AD stage ([`Ad`]) to answer the transform
//! attributes with: this is where `lang` and `differentiate` meet.

use crate::differentiate::Ad;
use crate::error::span::{Diagnostics, SourceFile, Span};
use crate::error::Error;
use crate::lang::ast::Module;
use crate::lang::check::{check, CheckError, CheckedFn};
use crate::lang::ir::Function;
use crate::lang::parser::parse;

pub use crate::lang::check::GradSpec;

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
        let file = SourceFile::new(name, source);
        let (ast, errs) = parse(source);
        if !errs.is_empty() {
            return Err(Error::Source(Diagnostics { file, items: errs }));
        }
        match check(&ast, &Ad) {
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
        let path = path.as_ref();
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| Error::io("read", &shown, e))?;
        Program::parse_named(&shown, &text)
    }

    /// The source text and its name, as diagnostics show it.
    pub fn file(&self) -> &SourceFile {
        &self.file
    }

    /// The syntax tree (every node with its span).
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
                let avail = if names.is_empty() {
                    "the program defines no functions".to_string()
                } else {
                    format!("available: {}", names.join(", "))
                };
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

    /// Where parameter `param` of `function` is declared.
    pub fn param_span(&self, function: &str, param: usize) -> Option<Span> {
        self.get(function)
            .and_then(|c| c.ir.params.get(param))
            .map(|p| p.span)
    }
}
