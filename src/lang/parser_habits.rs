//! Habits of Python and NumPy (`x ** 2`, `A @ B`, `np.exp(x)`, `x.sum()`,
//! `return`, `for`, slices, `and`, `+=`, `def`, ...): each is one syntax
//! error at the habit, whose help line gives the egrad form, quoting the
//! program's own operands where the form is a local rewrite (`write
//! `pow(x, 2)``). They are looked for only where the parser would stop
//! anyway (a token no egrad construct allows there), so a valid program
//! is parsed exactly as before, and each costs O(1) per token.

use super::{PResult, Parser};
use crate::error::span::{Diagnostic, Span};
use crate::lang::ast::{Expr, ExprKind};
use crate::lang::lexer::Tok;
use crate::lang::suggest::{closest, is_builtin_function};

/// Names that stand for a Python module before a `.` (`np.exp`).
const MODULES: &[&str] = &[
    "np", "numpy", "jnp", "jax", "math", "torch", "lax", "scipy", "onp",
];

/// egrad's keywords, for "did you mean" after a misspelt one.
const KEYWORDS: &[&str] = &["fn", "let", "if", "else", "match", "static"];

/// How an expression is quoted as an operand of a prefix (`+/x`) or a
/// method's receiver: as written if it is one term, else in parentheses.
fn atomic(e: &Expr) -> bool {
    matches!(
        e.kind,
        ExprKind::Name(_)
            | ExprKind::Num { .. }
            | ExprKind::Bool(_)
            | ExprKind::Call { .. }
            | ExprKind::Index { .. }
            | ExprKind::Tuple(_)
            | ExprKind::Tabulate { .. }
            | ExprKind::Reshape { .. }
    )
}

/// A habit's error: `message` at `span`, then `help`.
fn habit(span: Span, message: impl Into<String>, help: impl Into<String>) -> Diagnostic {
    Diagnostic::syntax(span, message).with_help(help)
}

impl Parser<'_> {
    /// The source text of `span`.
    fn text(&self, span: Span) -> &str {
        let s = span.start.saturating_sub(self.base) as usize;
        let e = span.end.saturating_sub(self.base) as usize;
        self.src.get(s..e).unwrap_or("")
    }

    /// `e` as written, in parentheses unless it is one term.
    fn operand(&self, e: &Expr) -> String {
        let t = self.text(e.span);
        if atomic(e) {
            t.to_string()
        } else {
            format!("({t})")
        }
    }

    /// The token `k` places ahead.
    fn ahead(&self, k: usize) -> &Tok {
        let i = (self.pos + k).min(self.toks.len() - 1);
        &self.toks[i].tok
    }

    /// Whether the parser is at the start of an item after an error: the
    /// end, `fn`, or `@` first on its line (an `@` inside a line is
    /// Python's matrix product, not an attribute).
    pub(super) fn item_start(&self) -> bool {
        let line_start = self.pos == 0
            || matches!(
                self.toks.get(self.pos - 1).map(|t| &t.tok),
                Some(Tok::Newline | Tok::Semi)
            );
        match self.peek() {
            Tok::Eof | Tok::Fn => true,
            Tok::At => line_start,
            _ => false,
        }
    }

    /// Whether the current token may start an expression.
    fn starts_expr(&self) -> bool {
        matches!(
            self.peek(),
            Tok::Ident(_)
                | Tok::Num { .. }
                | Tok::LParen
                | Tok::LBrace
                | Tok::Minus
                | Tok::Bang
                | Tok::PlusSlash
                | Tok::MaxSlash
                | Tok::MinSlash
                | Tok::If
                | Tok::Match
        )
    }

    /// The span from the current token to the last one of its line.
    fn rest_of_line(&self) -> Span {
        let mut k = self.pos;
        while !matches!(self.toks[k].tok, Tok::Newline | Tok::Eof) {
            k += 1;
        }
        self.span()
            .to(self.toks[k.saturating_sub(1).max(self.pos)].span)
    }

    /// At the start of an item, something other than `fn` or `@`: `def`,
    /// `import`, or a misspelt `fn`.
    pub(super) fn habit_item(&self) -> Option<Diagnostic> {
        let Tok::Ident(w) = self.peek() else {
            return None;
        };
        let span = self.span();
        Some(match w.as_str() {
            "def" => habit(
                span,
                "egrad defines functions with `fn`, not `def`",
                "write `fn name[N](x: f64[N]) -> f64 = ...`: parameters and the result have types, and the body is an expression after `=` or a block in braces",
            ),
            "import" | "from" => habit(
                self.rest_of_line(),
                "egrad has no imports",
                "delete this line: the math functions, `matmul` and the prelude (`dot`, `mean`, `softmax`, ...) are always in scope",
            ),
            "class" => habit(span, "egrad has no classes", "write functions with `fn`"),
            w => {
                let near = closest(w, ["fn"]).or(matches!(w, "fun" | "func" | "function").then_some("fn"))?;
                habit(span, format!("unknown keyword `{w}`"), format!("did you mean `{near}`?"))
            }
        })
    }

    /// After `@name` of an attribute, a `.`: a Python decorator
    /// (`@jax.jit`).
    pub(super) fn habit_decorator(&self, at: Span) -> Option<Diagnostic> {
        if !self.at(&Tok::Dot) {
            return None;
        }
        Some(habit(
            at.to(self.rest_of_line()),
            "egrad has no decorators: every function is compiled",
            "delete this line; egrad's attributes are `@grad(p)`, `@value_and_grad(p)`, `@jvp(p)` and `@vmap(p)`",
        ))
    }

    /// A word used as a name where the next token cannot follow a name:
    /// Python's `return`, `not`, `lambda`, `for`, `while`, `print`.
    pub(super) fn habit_word(&mut self, w: &str) -> PResult<()> {
        // `w(...)` is a call, of a function the program may define.
        let next_starts = {
            self.pos += 1;
            let s = self.starts_expr() && !self.at(&Tok::LParen);
            self.pos -= 1;
            s
        };
        if !next_starts {
            return Ok(());
        }
        let span = self.span();
        match w {
            "return" => {
                self.bump();
                let value = self.expr()?;
                Err(habit(
                    span.to(value.span),
                    "egrad has no `return`: a function's value is its body's last expression",
                    format!("write `{}`", self.text(value.span)),
                ))
            }
            "not" => {
                self.bump();
                let operand = self.binary(2)?;
                Err(habit(
                    span.to(operand.span),
                    "egrad writes `not` as `!`",
                    format!("write `!({})`", self.text(operand.span)),
                ))
            }
            "lambda" => {
                let mut k = 1;
                let mut names = Vec::new();
                while let Tok::Ident(n) = self.ahead(k) {
                    names.push(n.clone());
                    k += 1;
                    if !matches!(self.ahead(k), Tok::Comma) {
                        break;
                    }
                    k += 1;
                }
                let form = match names.len() {
                    1 => format!("{} =>", names[0]),
                    _ => format!("({}) =>", names.join(", ")),
                };
                if !matches!(self.ahead(k), Tok::Colon) || names.is_empty() {
                    return Err(habit(span, "egrad has no `lambda`", "write `s => ...`"));
                }
                let colon = self.toks[(self.pos + k).min(self.toks.len() - 1)].span;
                Err(habit(
                    span.to(colon),
                    "egrad writes a step function as `s => ...`, not with `lambda`",
                    format!("write `{form}`"),
                ))
            }
            "for" | "while" => Err(habit(
                self.rest_of_line(),
                format!("egrad has no `{w}` loops"),
                if w == "for" {
                    "an array of values is `tabulate[n](i => ...)`, a sum `+/tabulate[n](i => ...)`; a loop that carries a state is `iterate(n, init, s => ...)`, one over the rows of `xs` is `scan(xs, init, (s, x) => ...)`"
                } else {
                    "a loop that stops when a condition holds is `iterate_until(n, init, s => done, s => step)`, with `n` a bound on its steps"
                },
            )),
            "print" => Err(habit(
                span,
                "egrad has no `print`: functions are pure",
                "return the value, or run the function with `egrad run`",
            )),
            _ => Ok(()),
        }
    }

    /// A call `max(x)` or `min(x)` of one argument: NumPy's reduction.
    pub(super) fn habit_reduction(&self, callee: &str, span: Span, args: &[Expr]) -> PResult<()> {
        if !matches!(callee, "max" | "min") || args.len() != 1 {
            return Ok(());
        }
        Err(habit(
            span,
            format!("`{callee}` of two values is element-wise; of one array it is the reduction `{callee}/`"),
            format!("write `{callee}/{}`", self.operand(&args[0])),
        ))
    }

    /// Inside a chain of binary operators at `lhs`, an operator followed
    /// by `=`: `x += 1`.
    pub(super) fn habit_compound(&mut self, lhs: &Expr) -> PResult<()> {
        let (op, at) = (self.peek().clone(), self.span());
        let eq = self.toks.get(self.pos + 1).map(|t| (&t.tok, t.span));
        let Some((Tok::Eq, eq_span)) = eq else {
            return Ok(());
        };
        if eq_span.start != at.end {
            return Ok(());
        }
        let op = match op {
            Tok::StarStar => "**".to_string(),
            t => t.to_string().trim_matches('`').to_string(),
        };
        self.bump();
        self.bump();
        let rhs = self.expr()?;
        let name = self.text(lhs.span).to_string();
        let span = lhs.span.to(rhs.span);
        let message = format!("egrad has no `{op}=`: a name is bound once, with `let`");
        if !matches!(lhs.kind, ExprKind::Name(_)) {
            return Err(habit(span, message, "arrays are values, never changed in place: build the new one with `tabulate`, `scatter_add` or `concat`"));
        }
        let form = if op == "**" {
            format!("let {name} = pow({name}, {})", self.text(rhs.span))
        } else {
            format!("let {name} = {name} {op} {}", self.operand(&rhs))
        };
        Err(habit(
            span,
            message,
            format!("write `{form}` (a new `{name}` shadows the old)"),
        ))
    }

    /// After an expression, at a binary level: `A @ B` (multiplicative),
    /// `a and b`, `a or b` and `x if c else y` (loosest).
    pub(super) fn habit_after(&mut self, level: u8, lhs: &Expr) -> PResult<()> {
        let word = match self.peek() {
            Tok::Ident(w) => w.as_str(),
            _ => "",
        };
        if level == super::TIGHTEST_LEVEL && self.at(&Tok::At) {
            self.bump();
            let rhs = self.unary()?;
            return Err(habit(
                lhs.span.to(rhs.span),
                "egrad has no `@` operator: the matrix product is `matmul`",
                format!(
                    "write `matmul({}, {})`",
                    self.text(lhs.span),
                    self.text(rhs.span)
                ),
            ));
        }
        if level != 0 {
            return Ok(());
        }
        if matches!(word, "and" | "or") {
            let form = if word == "and" { "&&" } else { "||" };
            return Err(habit(
                self.span(),
                format!("egrad writes `{word}` as `{form}`"),
                format!("write `{form}`"),
            ));
        }
        if self.at(&Tok::If) {
            self.bump();
            let cond = self.expr()?;
            self.expect(&Tok::Else)?;
            let els = self.expr()?;
            return Err(habit(
                lhs.span.to(els.span),
                "egrad's `if` comes first: `if c { a } else { b }`",
                format!(
                    "write `if {} {{ {} }} else {{ {} }}`",
                    self.text(cond.span),
                    self.text(lhs.span),
                    self.text(els.span)
                ),
            ));
        }
        Ok(())
    }

    /// After a term (and its indices): `x ** k`, or a `.` (`np.exp(x)`,
    /// `x.sum()`, `x.T`).
    pub(super) fn habit_postfix(&mut self, e: &Expr) -> PResult<()> {
        let outer = self.parenthesized(e);
        if self.at(&Tok::StarStar) {
            if matches!(self.ahead(1), Tok::Eq) {
                return self.habit_compound(e);
            }
            self.bump();
            let exp = self.unary()?;
            return Err(habit(
                outer.unwrap_or(e.span).to(exp.span),
                "egrad has no `**` operator: powers are `pow(x, k)`",
                format!(
                    "write `pow({}, {})`",
                    self.text(e.span),
                    self.text(exp.span)
                ),
            ));
        }
        if !self.at(&Tok::Dot) {
            return Ok(());
        }
        let mut path = Vec::new();
        let mut end = outer.unwrap_or(e.span);
        while self.at(&Tok::Dot) {
            self.bump();
            let id = self.ident("a name after `.`")?;
            end = id.span;
            path.push(id.name);
        }
        let module = matches!(&e.kind, ExprKind::Name(n) if MODULES.contains(&n.as_str()));
        let args = if self.at(&Tok::LParen) {
            let open = self.bump().span;
            let mut args = Vec::new();
            while !self.at(&Tok::RParen) {
                args.push(self.expr()?);
                if !self.eat(&Tok::Comma) {
                    break;
                }
            }
            end = self.close(&Tok::RParen, open)?;
            Some(args)
        } else {
            None
        };
        let span = outer.unwrap_or(e.span).to(end);
        let name = path.last().cloned().unwrap_or_default();
        if module {
            let m = self.text(e.span).to_string();
            return Err(self.module_habit(span, &m, &name, args.as_deref()));
        }
        let quoted = match outer {
            Some(o) => self.text(o).to_string(),
            None => self.operand(e),
        };
        Err(self.method_habit(span, (e, quoted), &path[0], args.as_deref()))
    }

    /// The span of `e` with its parentheses, if it is written in them and
    /// they close just before the current token (`(x - 1).sum()`).
    fn parenthesized(&self, e: &Expr) -> Option<Span> {
        let close = self.toks.get(self.pos.checked_sub(1)?)?;
        if close.tok != Tok::RParen || close.span.end <= e.span.end {
            return None;
        }
        let mut k = self.pos - 1;
        while k > 0 && self.toks[k].span.start > e.span.start {
            k -= 1;
        }
        let open = self.toks.get(k.checked_sub(1)?)?;
        (open.tok == Tok::LParen && self.toks[k].span.start == e.span.start)
            .then(|| open.span.to(close.span))
    }

    /// `np.f(args)` or `np.c` (`module` is `np`).
    fn module_habit(&self, span: Span, module: &str, f: &str, args: Option<&[Expr]>) -> Diagnostic {
        let message =
            format!("egrad has no modules: `{module}.{f}` is written without `{module}.`");
        let texts: Vec<String> = args
            .unwrap_or_default()
            .iter()
            .map(|a| self.text(a.span).to_string())
            .collect();
        let all = texts.join(", ");
        let one = args.filter(|a| a.len() == 1).map(|a| self.operand(&a[0]));
        let form = match (f, args.map(<[Expr]>::len), one) {
            ("sum", _, Some(x)) => format!("+/{x}"),
            ("max" | "amax", _, Some(x)) => format!("max/{x}"),
            ("min" | "amin", _, Some(x)) => format!("min/{x}"),
            ("maximum" | "fmax", Some(2), _) => format!("max({all})"),
            ("minimum" | "fmin", Some(2), _) => format!("min({all})"),
            ("power" | "float_power", Some(2), _) => format!("pow({all})"),
            ("absolute", Some(1), _) => format!("abs({all})"),
            ("expit", Some(1), _) => format!("sigmoid({all})"),
            ("gammaln", Some(1), _) => format!("lgamma({all})"),
            ("relu", Some(1), _) => format!("max({all}, 0)"),
            ("where", Some(3), _) => {
                format!("if {} {{ {} }} else {{ {} }}", texts[0], texts[1], texts[2])
            }
            ("arange", _, Some(n)) => format!("tabulate[{n}](i => i)"),
            ("pi", None, _) => "3.141592653589793".to_string(),
            ("inf", None, _) => "(1.0 / 0.0)".to_string(),
            ("nan", None, _) => "(0.0 / 0.0)".to_string(),
            ("e", None, _) => "exp(1.0)".to_string(),
            ("det", _, _) => {
                return habit(
                    span,
                    message,
                    "write `slogdet(A)`: the pair `(sign, log(abs(det(A))))`; `logdet(A)` is its second part",
                )
            }
            ("concatenate", _, _) => {
                return habit(
                    span,
                    message,
                    "write `concat(a, b)`: it joins two arrays along their first axis",
                )
            }
            (f, Some(_), _) if is_builtin_function(f) => format!("{f}({all})"),
            _ => {
                let near = closest(
                    f,
                    crate::lang::suggest::builtin_functions()
                        .iter()
                        .map(String::as_str),
                )
                .map(|n| format!("; did you mean `{n}`?"))
                .unwrap_or_default();
                return habit(
                    span,
                    format!("egrad has no modules, and no function `{f}`"),
                    format!(
                        "the builtin functions and the prelude are called by their own names{near}"
                    ),
                );
            }
        };
        habit(span, message, format!("write `{form}`"))
    }

    /// `x.f(args)` or `x.a` on a value `x`: a method or an attribute.
    fn method_habit(
        &self,
        span: Span,
        (x, x_text): (&Expr, String),
        f: &str,
        args: Option<&[Expr]>,
    ) -> Diagnostic {
        let message = format!("egrad has no methods or attributes: `.{f}` is NumPy's");
        let rest: Vec<&str> = args
            .unwrap_or_default()
            .iter()
            .map(|a| self.text(a.span))
            .collect();
        let form = match (f, rest.len(), args.is_some()) {
            ("T", _, false) => format!("transpose({})", self.text(x.span)),
            ("sum", 0, true) => format!("+/{x_text}"),
            ("max", 0, true) => format!("max/{x_text}"),
            ("min", 0, true) => format!("min/{x_text}"),
            ("reshape", n, true) if n > 0 => format!("reshape[{}]({})", rest.join(", "), self.text(x.span)),
            ("shape" | "size" | "ndim", _, false) | ("__len__", _, _) => {
                return habit(
                    span,
                    message,
                    "an array's sizes are its function's size parameters: declare `fn f[N](x: f64[N])` and use `N` (a number: `f64(N)`)",
                )
            }
            ("astype", 1, true) => format!("{}({})", rest[0], self.text(x.span)),
            (f, _, true) if is_builtin_function(f) => {
                let mut all = vec![self.text(x.span)];
                all.extend(rest);
                format!("{f}({})", all.join(", "))
            }
            _ => {
                return habit(
                    span,
                    message,
                    "call a function with the value as its argument, as in `transpose(x)` or `+/x`",
                )
            }
        };
        habit(span, message, format!("write `{form}`"))
    }

    /// In `x[...]`, a `:` at token `colon`: a slice. The whole index is
    /// read (to its `]`) to say what to write.
    pub(super) fn habit_slice(&mut self, base: &Expr, open: usize) -> Diagnostic {
        // The parts between commas, each split at its colons (token ranges).
        let mut parts: Vec<Vec<Vec<Tok>>> = vec![vec![vec![]]];
        let mut k = open + 1;
        let mut depth = 0usize;
        loop {
            let t = &self.toks[k.min(self.toks.len() - 1)];
            match &t.tok {
                Tok::Eof => break,
                Tok::RBracket if depth == 0 => break,
                Tok::LBracket | Tok::LParen => depth += 1,
                Tok::RBracket | Tok::RParen => depth = depth.saturating_sub(1),
                _ => {}
            }
            match &t.tok {
                Tok::Comma if depth == 0 => parts.push(vec![vec![]]),
                Tok::Colon if depth == 0 => parts.last_mut().unwrap().push(vec![]),
                tok => parts
                    .last_mut()
                    .unwrap()
                    .last_mut()
                    .unwrap()
                    .push(tok.clone()),
            }
            k += 1;
        }
        let end = self.toks[k.min(self.toks.len() - 1)].span;
        self.pos = k.min(self.toks.len() - 1);
        let span = base.span.to(end);
        let x = self.text(base.span).to_string();
        let int = |ts: &Vec<Tok>| match ts.as_slice() {
            [] => Some(None),
            [Tok::Num { int: Some(n), .. }] => Some(Some(*n)),
            _ => None,
        };
        let whole = |p: &Vec<Vec<Tok>>| p.len() == 2 && p.iter().all(Vec::is_empty);
        let message = "egrad has no slices";
        let form = match parts.as_slice() {
            // x[a:b], x[:b], x[a:] with integers.
            [p] if p.len() == 2 => match (int(&p[0]), int(&p[1])) {
                (Some(a), Some(Some(b))) if b >= a.unwrap_or(0) => {
                    let a = a.unwrap_or(0);
                    let i = if a == 0 { "i".to_string() } else { format!("i + {a}") };
                    format!("tabulate[{}](i => {x}[{i}])", b - a)
                }
                (Some(Some(a)), Some(None)) => {
                    return habit(span, message, format!("write `tabulate[N-{a}](i => {x}[i + {a}])`, with `N` the length of `{x}` (a size parameter: `{x}: f64[N]`)"))
                }
                _ => return habit(span, message, format!("write `tabulate[L](i => {x}[i + a])` for the `L` elements from `a` on")),
            },
            // x[::-1]
            [p] if p.len() == 3 && p[0].is_empty() && p[1].is_empty() && matches!(p[2].as_slice(), [Tok::Minus, Tok::Num { int: Some(1), .. }]) => {
                format!("reverse({x})")
            }
            // x[:, j]: a column.
            [p, q] if whole(p) && q.len() == 1 => {
                let j: Vec<String> = q[0].iter().map(|t| t.to_string().trim_matches('`').to_string()).collect();
                format!("transpose({x})[{}]", j.join(" "))
            }
            // x[j, :]: a row.
            [p, q] if whole(q) && p.len() == 1 => {
                let j: Vec<String> = p[0].iter().map(|t| t.to_string().trim_matches('`').to_string()).collect();
                format!("{x}[{}]", j.join(" "))
            }
            _ => return habit(span, message, "read rows with `x[i]`, columns with `transpose(x)[j]`, and ranges with `tabulate[L](i => x[i + a])`"),
        };
        habit(span, message, format!("write `{form}`"))
    }

    /// In a block, after the expression `e`, a token that cannot follow
    /// it: `y = ...` (a rebinding without `let`) or `lett y = ...`.
    pub(super) fn habit_statement(&mut self, e: &Expr) -> PResult<()> {
        if self.at(&Tok::Eq) {
            self.bump();
            let value = self.expr()?;
            let span = e.span.to(value.span);
            let message = "egrad binds names with `let`";
            if let ExprKind::Name(n) = &e.kind {
                let form = format!("let {n} = {}", self.text(value.span));
                return Err(habit(
                    span,
                    message,
                    format!("write `{form}` (a new `{n}` shadows the old)"),
                ));
            }
            return Err(habit(
                span,
                "egrad's arrays are values, never changed in place",
                "build the new array with `tabulate`, `scatter_add` or `concat`",
            ));
        }
        if let (ExprKind::Name(w), Tok::Ident(_)) = (&e.kind, self.peek()) {
            if let Some(k) = closest(w, KEYWORDS.iter().copied()) {
                return Err(habit(
                    e.span,
                    format!("unknown keyword `{w}`"),
                    format!("did you mean `{k}`?"),
                ));
            }
        }
        Ok(())
    }

    /// After `if c` (at `start`) or `else`, no `{`: Python's `:`.
    pub(super) fn habit_colon(&self, start: Span) -> Option<Diagnostic> {
        if !self.at(&Tok::Colon) {
            return None;
        }
        Some(habit(
            start.to(self.span()),
            "egrad's `if` has braces, not `:`, and is an expression",
            "write `if c { a } else { b }`: each branch a block in braces that ends with its value",
        ))
    }

    /// After the `then` block of an `if`, no `else`: `elif`, or a
    /// misspelt `else`.
    pub(super) fn habit_else(&mut self) -> Option<Diagnostic> {
        let mut k = self.pos;
        while matches!(self.toks[k].tok, Tok::Newline) {
            k += 1;
        }
        let Tok::Ident(w) = &self.toks[k].tok else {
            return None;
        };
        let span = self.toks[k].span;
        if w == "elif" {
            return Some(habit(
                span,
                "egrad writes `elif` as `else if`",
                "write `else if`",
            ));
        }
        let near = closest(w, ["else"])?;
        Some(habit(
            span,
            format!("unknown keyword `{w}`"),
            format!("did you mean `{near}`?"),
        ))
    }
}
