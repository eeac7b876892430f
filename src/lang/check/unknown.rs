//! Unknown names, functions, types and sizes: the error, with the egrad
//! form of a Python or NumPy name (`True`, `sum(x)`, `len(x)`, `float`)
//! or "did you mean" the nearest name in scope ([`crate::lang::suggest`]).
//! Suggestions are computed only for the first diagnostics of a body
//! ([`MAX_DIAGNOSTICS`]), so a body full of unknown names stays linear.

use super::FnCx;
use crate::error::span::{Diagnostic, Span, MAX_DIAGNOSTICS};
use crate::lang::ast::{Expr, ExprKind, Ident};
use crate::lang::suggest::{builtin_functions, closest, python_value, type_for};

/// `e` as source text, for the simple expressions a suggestion quotes
/// (names, numbers, indexing and calls of them); `None` otherwise.
fn code(e: &Expr) -> Option<String> {
    Some(match &e.kind {
        ExprKind::Name(n) => n.clone(),
        ExprKind::Num { text, .. } => text.clone(),
        ExprKind::Index { base, indices } => {
            let ks: Option<Vec<String>> = indices.iter().map(code).collect();
            format!("{}[{}]", code(base)?, ks?.join(", "))
        }
        ExprKind::Call { callee, args } => {
            let xs: Option<Vec<String>> = args.iter().map(code).collect();
            format!("{}({})", callee.name, xs?.join(", "))
        }
        _ => return None,
    })
}

/// The egrad form of a call of Python's or NumPy's function `f` (not a
/// function here) with arguments `args`: the message's note and the help.
fn python_call(f: &str, args: &[Expr]) -> Option<(String, String)> {
    let xs: Vec<String> = args
        .iter()
        .map(|a| code(a).unwrap_or_else(|| "...".into()))
        .collect();
    let one = (xs.len() == 1).then(|| xs[0].clone());
    let all = xs.join(", ");
    let write = |form: String| Some((String::new(), format!("write `{form}`")));
    match (f, one) {
        ("sum", Some(x)) => write(format!("+/{x}")),
        ("amax", Some(x)) => write(format!("max/{x}")),
        ("amin", Some(x)) => write(format!("min/{x}")),
        ("maximum", _) if xs.len() == 2 => write(format!("max({all})")),
        ("minimum", _) if xs.len() == 2 => write(format!("min({all})")),
        ("power", _) if xs.len() == 2 => write(format!("pow({all})")),
        ("float", Some(x)) => write(format!("f64({x})")),
        ("int", Some(x)) => write(format!("i64({x})")),
        ("relu", Some(x)) => write(format!("max({x}, 0)")),
        ("arange" | "range", Some(n)) => Some((
            "egrad has no ranges: `tabulate` makes an array from its index".into(),
            format!("write `tabulate[{n}](i => i)`, or `tabulate[{n}](i => ...)` for the values a loop over `i` would compute"),
        )),
        ("where", _) if xs.len() == 3 => write(format!("if {} {{ {} }} else {{ {} }}", xs[0], xs[1], xs[2])),
        ("concatenate", _) => write("concat(a, b)".into()),
        ("len", _) => Some((
            "an array's length is a size parameter".into(),
            "declare it, as `N` in `fn f[N](x: f64[N])`, and use `N` (a number: `f64(N)`)".into(),
        )),
        ("return", Some(x)) => Some((
            "egrad has no `return`: a function's value is its body's last expression".into(),
            format!("write `{x}`"),
        )),
        ("not", Some(x)) => Some(("egrad writes `not` as `!`".into(), format!("write `!{x}`"))),
        ("print", _) => Some((
            "egrad's functions are pure: they have no output but their value".into(),
            "return the value, and run the function with `egrad run`".into(),
        )),
        _ => None,
    }
}

impl FnCx<'_> {
    /// Whether a suggestion is still worth computing for this body.
    fn suggesting(&self) -> bool {
        self.errs.len() < MAX_DIAGNOSTICS
    }

    /// The error for a name `n` at `span` that is no value in scope.
    pub(super) fn unknown_name(&mut self, n: &str, span: Span) -> Diagnostic {
        let d = Diagnostic::new(span, format!("unknown name `{n}`"));
        if let Some((note, help)) = python_value(n) {
            return d.with_note(note).with_help(help);
        }
        if !self.suggesting() {
            return d;
        }
        let values = self
            .env
            .names()
            .chain(self.sizes.iter().map(String::as_str));
        match closest(n, values) {
            Some(near) => d.with_help(format!("did you mean `{near}`?")),
            None => d,
        }
    }

    /// The error for a call of `callee`, which names no function here.
    pub(super) fn unknown_call(&mut self, callee: &Ident, args: &[Expr]) -> Diagnostic {
        let name = callee.name.as_str();
        let d = Diagnostic::new(callee.span, format!("unknown function `{name}`"));
        if let Some((note, help)) = python_call(name, args) {
            let d = if note.is_empty() {
                d
            } else {
                d.with_note(note)
            };
            return d.with_help(help);
        }
        if !self.suggesting() {
            return d;
        }
        let builtins = builtin_functions();
        let names = self
            .by_name
            .keys()
            .map(String::as_str)
            .chain(builtins.iter().map(String::as_str));
        match closest(name, names) {
            Some(near) => d.with_help(format!("did you mean `{near}`?")),
            None => d,
        }
    }
}

/// The help for unknown type `name`, with the element-type parameters
/// `params` in scope: the type it most likely means.
pub(super) fn type_help<'a>(
    name: &str,
    params: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    type_for(name, params).map(|t| format!("did you mean `{t}`?"))
}

/// The help for unknown size parameter `name` among `sizes`.
pub(super) fn size_help<'a>(
    name: &str,
    sizes: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    closest(name, sizes).map(|s| format!("did you mean `{s}`?"))
}

/// The help for unknown attribute `@name`.
pub(super) fn attribute_help(name: &str) -> Option<String> {
    let known = [
        "grad",
        "value_and_grad",
        "jvp",
        "vmap",
        "custom_vjp",
        "custom_jvp",
    ];
    closest(name, known).map(|a| format!("did you mean `@{a}`?"))
}
