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
use crate::lang::check::{check, expand, CheckError, CheckedFn};
use crate::lang::parser::parse;
use crate::lang::prelude;
use std::sync::OnceLock;

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
    /// Per function with calls kept as calls: its IR with them inlined,
    /// made when first asked for (a chain of calls costs the functions
    /// asked for, not every function with its callees copied in).
    expanded: Vec<OnceLock<Result<Function, String>>>,
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
                expanded: checked.functions.iter().map(|_| OnceLock::new()).collect(),
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
        let text = read_program(path, &shown)?;
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

    /// The IR of the function at `at` in `functions`, its calls inlined.
    fn full_ir(&self, at: usize) -> Result<&Function, Error> {
        let (_, c) = &self.functions[at];
        if !c.has_calls() {
            return Ok(&c.ir);
        }
        let get = |k: usize| self.functions.get(k).map(|(_, c)| c);
        self.expanded[at]
            .get_or_init(|| expand(c, &get))
            .as_ref()
            .map_err(|e| Error::Internal(e.clone()))
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
        match self.functions.iter().position(|(n, _)| n == name) {
            Some(at) => self.full_ir(at),
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

/// Programs are read under this many bytes ([`Program::parse_with`]
/// refuses larger ones: the prelude's spans start there).
const MAX_PROGRAM_BYTES: u64 = prelude::BASE as u64;

/// A program's text, read under [`MAX_PROGRAM_BYTES`] and within the
/// memory limit: a file with no end (`/dev/zero`) was read until the
/// allocator failed or the kernel killed the process.
fn read_program(path: &std::path::Path, shown: &str) -> Result<String, Error> {
    use std::io::Read;
    let io = |e: std::io::Error| Error::io("read", shown, e);
    let mut f = std::fs::File::open(path).map_err(io)?;
    let mut bytes: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    loop {
        let n = match f.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io(e)),
        };
        let len = bytes.len() + n;
        if len as u64 >= MAX_PROGRAM_BYTES {
            return Err(Error::Limit(format!(
                "{shown} has {MAX_PROGRAM_BYTES} bytes or more: egrad reads programs under {MAX_PROGRAM_BYTES} bytes"
            )));
        }
        if len > bytes.capacity() {
            // The vector doubles: its new buffer, and the old one while
            // it is copied.
            let cap = bytes.capacity();
            let need = len.max(2 * cap) + cap;
            crate::ir::memory::check(Some(need as u64), &format!("reading {shown}"))
                .map_err(Error::Limit)?;
        }
        bytes.extend_from_slice(&chunk[..n]);
    }
    String::from_utf8(bytes).map_err(|_| {
        io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lang::check::check_with;

    /// Every function of `source` checked with calls kept as calls
    /// (expanded) or inlined as checked: its IR (and what a transform
    /// differentiated) as text, or the errors; and how many functions kept
    /// a call as a call.
    fn checked(source: &str, defer: bool, max: usize) -> (Vec<String>, usize) {
        let (ast, errs) = parse(source);
        if !errs.is_empty() {
            return (vec![format!("{errs:?}")], 0);
        }
        let prelude_items = if prelude::called_by(&ast) {
            prelude::items().expect("the prelude parses")
        } else {
            &[]
        };
        let checked = match check_with(&ast, prelude_items, &Ad, max, defer) {
            Ok(c) => c,
            Err(CheckError::Source(d)) => return (vec![format!("{d:?}")], 0),
            Err(CheckError::Internal(m)) => return (vec![m], 0),
        };
        let get = |k: usize| checked.functions.get(k).map(|(_, c)| c);
        let mut out = Vec::new();
        let mut kept = 0;
        for (name, c) in &checked.functions {
            let ir = if c.has_calls() {
                kept += 1;
                expand(c, &get).unwrap_or_else(|e| panic!("{name}: {e}"))
            } else {
                c.ir.clone()
            };
            out.push(format!("{name}:\n{ir}"));
            if let Some(g) = &c.grad {
                out.push(format!("primal {:?}:\n{}", g.wrt, g.primal));
            }
            if let Some(j) = &c.jvp {
                out.push(format!("jvp {:?}:\n{}", j.pairs, j.f));
            }
        }
        (out, kept)
    }

    /// Programs whose calls are kept as calls in the corners: results that
    /// are parameters or repeated, names repeated across callee and caller,
    /// sizes `N-1` three levels down, a loop given up and lowered again,
    /// calls inside `tabulate` and loops, rules and gradients of functions
    /// with calls, and the errors a call reports.
    const TRICKY: &[&str] = &[
        // A `bool` result used as a condition: a conversion after the call.
        "fn pos(x: f64) -> bool = x > 0.0
         fn both(x: f64, y: f64) -> (bool, f64) { let t = x * y; (pos(t), t + 1.0) }
         fn f(x: f64, y: f64) -> f64 {
           let (b, t) = both(x, y); let u = t * 2.0;
           if b && !pos(u) { u } else { t }
         }
         @grad(x, y) fn df(x: f64, y: f64) -> (f64, f64) { f(x, y) }",
        "fn h[N](x: f64[N]) -> f64[N] { let t = x * 2.0; let u = t + 1.0; u * t }
         fn same[N](x: f64[N]) -> (f64[N], f64[N]) { let y = h(x) * x; (y, y) }
         fn pass[N](x: f64[N], z: f64) -> (f64[N], f64) { (x, z) }
         fn fwd[N](x: f64[N], z: f64) -> (f64[N], f64) { pass(x, z) }
         fn m(a: f64[4]) -> f64 {
           let (u, v) = same(a); let (w, z) = fwd(u, 3.0); let t = +/w; let u = +/v;
           let (a2, b2) = same(a * 2.0);
           let t = t * u * z; t + +/(h(a)) + +/a2 * +/b2
         }
         @grad(a) fn dm(a: f64[4]) -> f64[4] { m(a) }",
        "fn d1[N](x: f64[N]) -> f64[N-1] = tabulate[N-1](i => x[i + 1] - x[i])
         fn d2[N](x: f64[N]) -> f64[N-2] = d1(d1(x))
         fn d3[N](x: f64[N]) -> f64 { let y = d2(x); +/d1(y) }
         fn top(x: f64[6]) -> f64 = d3(x) + d3(d1(x))",
        "fn d1[N](x: f64[N]) -> f64[N-1] = tabulate[N-1](i => x[i + 1] - x[i])
         fn d3[N](x: f64[N]) -> f64 = +/d1(d1(d1(x)))
         fn bad(x: f64[2]) -> f64 = d3(x)",
        "fn g[N](x: f64[N], a: f64) -> f64 = +/tanh(x * a)
         fn decay[N](n: i64, x: f64[N], a: f64) -> f64 {
           let s = g(x, a);
           let y = +/iterate(n, x, s => s * 0.99 + 0.01 * g(s, a));
           y + s + g(x, 2.0)
         }
         fn twice[N](n: i64, x: f64[N]) -> f64 = decay(n, x, 0.5) + g(x, 0.5)
         @grad(x) fn dtwice[N](n: i64, x: f64[N]) -> f64[N] = twice(n, x)",
        "fn g(x: f64) -> f64 = sin(x) * x
         fn rows[N](x: f64[N]) -> f64[N] = tabulate[N](i => g(x[i]))
         fn u[N](x: f64[N]) -> f64 = +/rows(x) + g(x[0]) + +/iterate(3, x, s => s * g(s[0]))
         @custom_vjp(u_vjp) fn w[N](x: f64[N]) -> f64 = u(x)
         fn u_vjp[N](x: f64[N], c: f64) -> f64[N] = rows(x) * c + g(c)
         fn top[N](x: f64[N]) -> f64 = w(x) + u(x)
         @grad(x) fn dtop[N](x: f64[N]) -> f64[N] = top(x)
         @jvp(x) fn jtop[N](x: f64[N], dx: f64[N]) -> f64 = top(x)",
        "fn n_of[N](x: f64[N]) -> i64 = N + 1
         fn mean[N](x: f64[N]) -> f64 = +/x / N
         fn k[N](x: f64[N]) -> f64 { let n = n_of(x); mean(x) * x[0] / n }
         fn top(x: f64[3]) -> f64 = k(x) + k(x * 2.0)",
        "fn g(x: f64) -> f64 = sin(x)
         fn f(x: f64) -> f64 = g(x)
         fn big(x: f64) -> f64 = f(f(f(f(x))))",
        "fn g(x: f64) -> f64 = sin(x)
         fn f(x: f64) -> f64 = g(x) + y",
    ];

    /// The calls kept as calls give exactly the IR, names included, and
    /// the errors, of every call inlined as it is checked: for every
    /// program of the repository and the corners above, with the
    /// statement limit as it is and low.
    #[test]
    fn calls_kept_as_calls_expand_to_the_inlined_functions() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = Vec::new();
        let mut dirs: Vec<std::path::PathBuf> = ["examples", "tests", "gradbench", "benches"]
            .iter()
            .map(|d| root.join(d))
            .collect();
        while let Some(d) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in entries.flatten() {
                let p = e.path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.extension().is_some_and(|x| x == "eg") {
                    files.push(p);
                }
            }
        }
        files.sort();
        let mut programs: Vec<(String, String)> = files
            .iter()
            .map(|f| (f.display().to_string(), std::fs::read_to_string(f).unwrap()))
            .collect();
        for (k, p) in TRICKY.iter().enumerate() {
            programs.push((format!("TRICKY[{k}]"), p.to_string()));
        }
        let mut kept = 0;
        for (name, text) in &programs {
            let (deferred, k) = checked(text, true, MAX_OPERATIONS);
            let (inlined, _) = checked(text, false, MAX_OPERATIONS);
            assert_eq!(deferred, inlined, "{name}");
            kept += k;
            // Where the statement limit stops a function too.
            let (deferred, _) = checked(text, true, 30);
            let (inlined, _) = checked(text, false, 30);
            assert_eq!(deferred, inlined, "{name}, at most 30 statements");
        }
        assert!(files.len() > 50, "{} programs", files.len());
        assert!(kept > 10, "only {kept} functions kept a call as a call");
        println!("{} programs, {kept} functions with calls kept", files.len());
    }

    /// A chain of functions, each calling the one before, keeps each
    /// function's own statements only: linear in the chain (inlined as
    /// checked, the 2,000 functions held 2 million statements).
    #[test]
    fn a_chain_of_calls_keeps_each_function_once() {
        let n = 2000;
        let mut src = String::from("fn g0(x: f64) -> f64 = sin(x)\n");
        for k in 1..n {
            src.push_str(&format!(
                "fn g{k}(x: f64) -> f64 = sin(g{}(x)) * x\n",
                k - 1
            ));
        }
        let p = Program::parse(&src).unwrap();
        let held: usize = p.functions.iter().map(|(_, c)| c.ir.stmts.len()).sum();
        assert!(held < 4 * n, "{held} statements held for {n} functions");
        // The last one, asked for, has every call inlined.
        let last = p.ir(&format!("g{}", n - 1)).unwrap();
        assert_eq!(last.stmts.len(), 2 * n - 1);
    }
}
