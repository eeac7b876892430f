//! The parser: tokens to [`Module`], by recursive descent.
//!
//! Grammar (`NL` is a significant line break, see the lexer):
//!
//! ```text
//! module  := { NL | item }
//! item    := { attr NL? } 'fn' IDENT [ '[' gparam {',' gparam} ']' ]
//!            '(' [ param {',' param} ] ')' '->' type ( block | '=' expr )
//! gparam  := IDENT [ ':' IDENT ]
//! attr    := '@' IDENT [ '(' [ IDENT {',' IDENT} ] ')' ]
//! param   := IDENT ':' type
//! type    := IDENT [ '[' dim {',' dim} ']' ] | '(' type {',' type} ')'
//! dim     := dprod { ('+' | '-') dprod }
//! dprod   := datom { '*' datom }
//! datom   := INT | IDENT | '(' dim ')'
//! expr    := mul { ('+' | '-') NL? mul }
//! mul     := unary { ('*' | '/' | '%' | '.*' | './') NL? unary }
//! unary   := ('-' | '+/') unary | primary
//! primary := NUM | IDENT [ '(' [ expr {',' expr} ] ')' ]
//!          | '(' expr {',' expr} ')' | block
//!          | 'tabulate' '[' dim ']' '(' IDENT '=>' expr ')'
//!          | 'reshape' '[' dim {',' dim} ']' '(' expr ')'
//!          | 'match' expr '{' { NL | ',' } { arm (NL | ',') { NL | ',' } } '}'
//! arm     := pat { '|' pat } '=>' NL? expr
//! pat     := ['-'] INT | 'true' | 'false' | '_'
//! block   := '{' { NL | ';' } { stmt (NL | ';') { NL | ';' } } expr { NL | ';' } '}'
//! stmt    := 'let' ( IDENT | '(' IDENT {',' IDENT} ')' ) '=' NL? expr
//! ```
//!
//! A line break after a binary operator or after `=` continues the
//! expression; anywhere else in a block it ends it. Nesting deeper than
//! [`MAX_DEPTH`] is an error (so no input can overflow the stack).

use super::ast::*;
use super::lexer::{lex, Tok, Token};
use crate::error::span::{Diagnostic, Span};

/// Maximum nesting depth of expressions and types (including the length of
/// operator chains, which nest to the left).
pub const MAX_DEPTH: usize = 256;

/// The tightest binary level (multiplicative); its operands are unary.
const TIGHTEST_LEVEL: u8 = 4;

type PResult<T> = Result<T, Diagnostic>;

/// Parse a whole file. Returns the functions that parsed and every error
/// (one per broken item at most, plus lexical errors).
pub fn parse(src: &str) -> (Module, Vec<Diagnostic>) {
    parse_at(src, 0)
}

/// The longest name (of a function, parameter, size or variable), in
/// bytes. Every type that mentions a size carries its name, so a bound
/// keeps compile time linear in the program's size.
pub const MAX_NAME_LEN: usize = 1024;

/// [`parse`] with every span moved `base` bytes on: for a source that
/// shares the span space of another one, attached at `base`
/// ([`crate::error::span::SourceFile::with_attached`]).
pub fn parse_at(src: &str, base: u32) -> (Module, Vec<Diagnostic>) {
    let (mut toks, mut errs) = lex(src);
    let mut long = std::collections::HashSet::new();
    for t in &mut toks {
        if let Tok::Ident(name) = &mut t.tok {
            // Reported at its first use only.
            if name.len() > MAX_NAME_LEN && long.insert(name.clone()) {
                errs.push(Diagnostic::limit(
                    t.span,
                    format!(
                        "this name is {} characters long; a name has at most {MAX_NAME_LEN}",
                        name.len()
                    ),
                ));
            }
            // Later messages quote the name: its start is enough.
            name.truncate(MAX_NAME_LEN);
        }
    }
    if base != 0 {
        let shift = |s: &mut Span| {
            s.start = s.start.saturating_add(base);
            s.end = s.end.saturating_add(base);
        };
        toks.iter_mut().for_each(|t| shift(&mut t.span));
        errs.iter_mut().for_each(|d| {
            shift(&mut d.span);
            d.labels.iter_mut().for_each(|(s, _)| shift(s));
        });
    }
    let mut p = Parser {
        toks,
        pos: 0,
        depth: 0,
        src,
        base,
    };
    let mut items = Vec::new();
    loop {
        p.skip_newlines();
        if p.at(&Tok::Eof) {
            break;
        }
        let start = p.pos;
        match p.item() {
            Ok(f) => items.push(f),
            Err(d) => {
                errs.push(d);
                p.depth = 0;
                // Skip to the next item start, making progress.
                if p.pos == start {
                    p.pos += 1;
                }
                while !p.item_start() {
                    p.pos += 1;
                }
            }
        }
    }
    (Module { items }, errs)
}

struct Parser<'a> {
    toks: Vec<Token>,
    pos: usize,
    depth: usize,
    /// The source, to quote in what a diagnostic suggests writing.
    src: &'a str,
    /// Where `src`'s spans start ([`parse_at`]).
    base: u32,
}

fn describe(t: &Tok) -> String {
    t.to_string()
}

impl Parser<'_> {
    fn tok(&self) -> &Token {
        // The token list always ends with Eof, and pos never passes it.
        let i = self.pos.min(self.toks.len().saturating_sub(1));
        &self.toks[i]
    }

    fn peek(&self) -> &Tok {
        &self.tok().tok
    }

    fn span(&self) -> Span {
        self.tok().span
    }

    /// Span of the previous token (for node ends).
    fn prev_span(&self) -> Span {
        if self.pos == 0 {
            return self.span();
        }
        let i = (self.pos - 1).min(self.toks.len().saturating_sub(1));
        self.toks[i].span
    }

    fn at(&self, t: &Tok) -> bool {
        self.peek() == t
    }

    fn bump(&mut self) -> Token {
        let t = self.tok().clone();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    /// Whether `[` follows the current token (`tabulate[`, `reshape[`).
    fn bracket_next(&self) -> bool {
        matches!(
            self.toks.get(self.pos + 1).map(|t| &t.tok),
            Some(Tok::LBracket)
        )
    }

    fn eat(&mut self, t: &Tok) -> bool {
        if self.at(t) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn skip_newlines(&mut self) {
        while self.at(&Tok::Newline) {
            self.bump();
        }
    }

    fn error_expected(&self, what: &str) -> Diagnostic {
        Diagnostic::syntax(
            self.span(),
            format!("expected {what}, found {}", describe(self.peek())),
        )
    }

    fn expect(&mut self, t: &Tok) -> PResult<Span> {
        if self.at(t) {
            Ok(self.bump().span)
        } else {
            Err(self.error_expected(&t.to_string()))
        }
    }

    /// The `)` (or `]`) `t` that closes the bracket opened at `open`.
    /// When it is missing, the error points just after the last token
    /// before it (where the bracket should close, not at whatever comes
    /// next, which may be lines later) and labels the opening bracket.
    fn close(&mut self, t: &Tok, open: Span) -> PResult<Span> {
        if self.at(t) {
            return Ok(self.bump().span);
        }
        let prev = self.prev_span();
        let at = if self.pos > 0 && prev.end > open.start {
            Span::new(prev.end as usize, prev.end as usize)
        } else {
            self.span()
        };
        Err(Diagnostic::syntax(
            at,
            format!(
                "expected {t} to close the bracket, found {}",
                describe(self.peek())
            ),
        )
        .with_label(open, format!("this bracket is never closed (with {t})")))
    }

    fn ident(&mut self, what: &str) -> PResult<Ident> {
        match self.peek().clone() {
            Tok::Ident(name) => {
                let span = self.bump().span;
                Ok(Ident { name, span })
            }
            _ => Err(self.error_expected(what)),
        }
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Diagnostic::limit(
                self.span(),
                format!("expression nested too deeply (the limit is {MAX_DEPTH} levels)"),
            ));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    /// `IDENT {',' IDENT}` up to (not including) `close`; may be empty.
    fn ident_list(&mut self, close: &Tok, what: &str) -> PResult<Vec<Ident>> {
        let mut out = Vec::new();
        while !self.at(close) {
            out.push(self.ident(what)?);
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        Ok(out)
    }

    fn item(&mut self) -> PResult<FnDef> {
        let start = self.span();
        let mut attrs = Vec::new();
        while self.at(&Tok::At) {
            let at = self.bump().span;
            let name = self.ident("an attribute name after `@`")?;
            if let Some(d) = self.habit_decorator(at) {
                return Err(d);
            }
            let mut args = Vec::new();
            if self.eat(&Tok::LParen) {
                args = self.ident_list(&Tok::RParen, "a parameter name")?;
                self.expect(&Tok::RParen)?;
            }
            attrs.push(Attr {
                name,
                args,
                span: at.to(self.prev_span()),
            });
            self.skip_newlines();
        }
        if !self.at(&Tok::Fn) {
            return Err(self
                .habit_item()
                .unwrap_or_else(|| self.error_expected("`fn`")));
        }
        self.bump();
        let name = self.ident("a function name")?;
        let mut size_params = Vec::new();
        let mut bounds = Vec::new();
        if self.eat(&Tok::LBracket) {
            while !self.at(&Tok::RBracket) {
                let name = self.ident("a size parameter name")?;
                if self.eat(&Tok::Colon) {
                    let bound = self.ident("a bound, as in `T: Float`")?;
                    bounds.push((name.clone(), bound));
                }
                size_params.push(name);
                if !self.eat(&Tok::Comma) {
                    break;
                }
            }
            self.expect(&Tok::RBracket)?;
        }
        let open = self.expect(&Tok::LParen)?;
        let mut params = Vec::new();
        while !self.at(&Tok::RParen) {
            let static_span = self.at(&Tok::Static).then(|| self.bump().span);
            // `data y: i64`: `data` is a word of its own only before a
            // parameter's name (a parameter may be named `data`).
            let data = matches!((self.peek(), self.toks.get(self.pos + 1).map(|t| &t.tok)),
                (Tok::Ident(w), Some(Tok::Ident(_))) if w == "data");
            let data_span = data.then(|| self.bump().span);
            let pname = self.ident("a parameter name")?;
            self.expect(&Tok::Colon)?;
            let ty = self.ty()?;
            params.push(ParamDecl {
                span: static_span
                    .or(data_span)
                    .unwrap_or(pname.span)
                    .to(ty.span()),
                name: pname,
                ty,
                is_static: static_span.is_some(),
                is_data: data_span.is_some(),
            });
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        self.close(&Tok::RParen, open)?;
        self.skip_newlines();
        self.expect(&Tok::Arrow)?;
        let ret = self.ty()?;
        self.skip_newlines();
        let body = if self.at(&Tok::LBrace) {
            self.block()?
        } else if self.eat(&Tok::Eq) {
            self.skip_newlines();
            self.expr()?
        } else {
            return Err(self.error_expected("`{` or `=` before the function body"));
        };
        if !matches!(self.peek(), Tok::Newline | Tok::Eof | Tok::Semi) {
            return Err(self.error_expected("a line break after the function body"));
        }
        self.eat(&Tok::Semi);
        Ok(FnDef {
            attrs,
            name,
            size_params,
            bounds,
            params,
            ret,
            span: start.to(body.span),
            body,
        })
    }

    fn ty(&mut self) -> PResult<TypeExpr> {
        self.enter()?;
        let r = self.ty_inner();
        self.leave();
        r
    }

    fn ty_inner(&mut self) -> PResult<TypeExpr> {
        let start = self.span();
        if self.eat(&Tok::LParen) {
            let mut elems = vec![self.ty()?];
            while self.eat(&Tok::Comma) {
                if self.at(&Tok::RParen) {
                    break;
                }
                elems.push(self.ty()?);
            }
            let end = self.expect(&Tok::RParen)?;
            if elems.len() == 1 {
                return Ok(elems.remove(0));
            }
            return Ok(TypeExpr::Tuple {
                elems,
                span: start.to(end),
            });
        }
        let dtype = self.ident("a type")?;
        let mut dims = Vec::new();
        let mut span = dtype.span;
        if self.eat(&Tok::LBracket) {
            loop {
                dims.push(self.dim()?);
                if !self.eat(&Tok::Comma) {
                    break;
                }
            }
            span = span.to(self.expect(&Tok::RBracket)?);
        }
        Ok(TypeExpr::Named { dtype, dims, span })
    }

    fn block(&mut self) -> PResult<Expr> {
        self.enter()?;
        let r = self.block_inner();
        self.leave();
        r
    }

    fn skip_separators(&mut self) {
        while matches!(self.peek(), Tok::Newline | Tok::Semi) {
            self.bump();
        }
    }

    fn block_inner(&mut self) -> PResult<Expr> {
        let open = self.expect(&Tok::LBrace)?;
        let mut lets = Vec::new();
        let mut result: Option<Expr> = None;
        self.skip_separators();
        while !self.at(&Tok::RBrace) {
            if let Some(r) = &result {
                return Err(Diagnostic::syntax(
                    r.span,
                    "this expression's value is unused: only the last expression of a block is its value",
                )
                .with_note("start a new statement with `let`, or join the lines with an operator"));
            }
            if self.at(&Tok::Let) {
                lets.push(self.let_stmt()?);
            } else if self.at(&Tok::Eof) {
                return Err(Diagnostic::syntax(open, "this `{` is never closed"));
            } else {
                let e = self.expr()?;
                if !matches!(self.peek(), Tok::Newline | Tok::Semi | Tok::RBrace) {
                    self.habit_statement(&e)?;
                }
                result = Some(e);
            }
            if !matches!(self.peek(), Tok::Newline | Tok::Semi | Tok::RBrace) {
                return Err(self.error_expected("a line break, `;` or `}`"));
            }
            self.skip_separators();
        }
        let close = self.bump().span;
        let span = open.to(close);
        let Some(result) = result else {
            return Err(Diagnostic::syntax(
                span,
                "this block has no value: it must end with an expression",
            ));
        };
        Ok(Expr {
            kind: ExprKind::Block(Block {
                lets,
                result: Box::new(result),
            }),
            span,
        })
    }

    /// A name or a tuple of names `(a, b)` (`let` and step functions).
    fn pattern(&mut self, what: &str) -> PResult<Pattern> {
        if !self.at(&Tok::LParen) {
            return Ok(Pattern::Name(self.ident(what)?));
        }
        let open = self.bump().span;
        let names = self.ident_list(&Tok::RParen, "a name")?;
        let close = self.expect(&Tok::RParen)?;
        if names.is_empty() {
            return Err(Diagnostic::syntax(
                open.to(close),
                "expected at least one name",
            ));
        }
        Ok(Pattern::Tuple(names, open.to(close)))
    }

    fn let_stmt(&mut self) -> PResult<Let> {
        let start = self.expect(&Tok::Let)?;
        let pattern = self.pattern("a name after `let`")?;
        self.expect(&Tok::Eq)?;
        self.skip_newlines();
        let value = self.expr()?;
        Ok(Let {
            pattern,
            span: start.to(value.span),
            value,
        })
    }

    pub fn expr(&mut self) -> PResult<Expr> {
        self.enter()?;
        let r = self.binary(0);
        self.leave();
        r
    }

    fn binop(&self, level: u8) -> Option<(BinOp, &'static str)> {
        match (level, self.peek()) {
            (0, Tok::OrOr) => Some((BinOp::Or, "||")),
            (1, Tok::AndAnd) => Some((BinOp::And, "&&")),
            (2, Tok::Lt) => Some((BinOp::Lt, "<")),
            (2, Tok::Le) => Some((BinOp::Le, "<=")),
            (2, Tok::Gt) => Some((BinOp::Gt, ">")),
            (2, Tok::Ge) => Some((BinOp::Ge, ">=")),
            (2, Tok::EqEq) => Some((BinOp::Eq, "==")),
            (2, Tok::Ne) => Some((BinOp::Ne, "!=")),
            (3, Tok::Plus) => Some((BinOp::Add, "+")),
            (3, Tok::Minus) => Some((BinOp::Sub, "-")),
            (4, Tok::Star) => Some((BinOp::Mul, "*")),
            (4, Tok::DotStar) => Some((BinOp::Mul, ".*")),
            (4, Tok::Slash) => Some((BinOp::Div, "/")),
            (4, Tok::Percent) => Some((BinOp::Rem, "%")),
            (4, Tok::DotSlash) => Some((BinOp::Div, "./")),
            _ => None,
        }
    }

    /// Binary operators by level, loosest first: `||`, `&&`, comparisons,
    /// additive, multiplicative; all left-associative except comparisons,
    /// which do not chain (`a < b < c` is an error).
    fn binary(&mut self, level: u8) -> PResult<Expr> {
        let start = self.span();
        let next = |p: &mut Self| {
            if level < TIGHTEST_LEVEL {
                p.binary(level + 1)
            } else {
                p.unary()
            }
        };
        let mut lhs = next(self)?;
        let saved = self.depth;
        while let Some((op, op_text)) = self.binop(level) {
            // Each link of a chain nests one level deeper (left spine).
            if let Err(e) = self.enter().and_then(|()| self.habit_compound(&lhs)) {
                self.depth = saved;
                return Err(e);
            }
            if level == 2 && matches!(&lhs.kind, ExprKind::Binary { op, .. } if op.is_comparison())
            {
                self.depth = saved;
                return Err(Diagnostic::syntax(
                    self.span(),
                    "comparisons do not chain: write `a < b && b < c`",
                ));
            }
            let op_span = self.bump().span;
            self.skip_newlines();
            let rhs = next(self);
            let rhs = match rhs {
                Ok(r) => r,
                Err(e) => {
                    self.depth = saved;
                    return Err(e);
                }
            };
            lhs = Expr {
                span: start.to(self.prev_span()),
                kind: ExprKind::Binary {
                    op,
                    op_text,
                    op_span,
                    lhs: Box::new(lhs),
                    rhs: Box::new(rhs),
                },
            };
        }
        self.depth = saved;
        self.habit_after(level, &lhs)?;
        Ok(lhs)
    }

    /// Is a lambda (`x =>` or `(a, b) =>`) next?
    fn lambda_ahead(&self) -> bool {
        let kind = |k: usize| self.toks.get(self.pos + k).map(|t| &t.tok);
        match kind(0) {
            Some(Tok::Ident(_)) => matches!(kind(1), Some(Tok::FatArrow)),
            Some(Tok::LParen) => {
                let mut k = 1;
                while matches!(kind(k), Some(Tok::Ident(_)) | Some(Tok::Comma)) {
                    k += 1;
                }
                matches!(kind(k), Some(Tok::RParen)) && matches!(kind(k + 1), Some(Tok::FatArrow))
            }
            _ => false,
        }
    }

    fn lambda(&mut self) -> PResult<Expr> {
        let start = self.span();
        let param = self.pattern("a name")?;
        self.expect(&Tok::FatArrow)?;
        self.skip_newlines();
        let body = self.expr()?;
        Ok(Expr {
            span: start.to(body.span),
            kind: ExprKind::Lambda {
                param,
                body: Box::new(body),
            },
        })
    }

    /// `if c { a } else { b }`, `else if` chains.
    fn if_expr(&mut self) -> PResult<Expr> {
        self.enter()?;
        let r = self.if_inner();
        self.leave();
        r
    }

    fn if_inner(&mut self) -> PResult<Expr> {
        let start = self.expect(&Tok::If)?;
        let cond = self.expr()?;
        if !self.at(&Tok::LBrace) {
            return Err(self
                .habit_colon(start)
                .unwrap_or_else(|| self.error_expected("`{` after the condition of `if`")));
        }
        let then = self.block()?;
        self.skip_newlines_before(&Tok::Else);
        if !self.at(&Tok::Else) {
            if let Some(d) = self.habit_else() {
                return Err(d);
            }
            return Err(Diagnostic::syntax(
                start.to(then.span),
                "this `if` has no `else`: an `if` is an expression, and both branches give its value",
            ));
        }
        let else_span = self.bump().span;
        let els = if self.at(&Tok::If) {
            self.if_expr()?
        } else if self.at(&Tok::LBrace) {
            self.block()?
        } else {
            return Err(self
                .habit_colon(else_span)
                .unwrap_or_else(|| self.error_expected("`{` or `if` after `else`")));
        };
        Ok(Expr {
            span: start.to(els.span),
            kind: ExprKind::If {
                cond: Box::new(cond),
                then: Box::new(then),
                els: Box::new(els),
            },
        })
    }

    fn match_expr(&mut self) -> PResult<Expr> {
        self.enter()?;
        let r = self.match_inner();
        self.leave();
        r
    }

    /// `match v { p | q => e, ... }`: arms end at a line break or `,`.
    fn match_inner(&mut self) -> PResult<Expr> {
        let start = self.expect(&Tok::Match)?;
        let scrutinee = self.expr()?;
        if !self.at(&Tok::LBrace) {
            return Err(self.error_expected("`{` after the value of `match`"));
        }
        let open = self.bump().span;
        let mut arms = Vec::new();
        loop {
            while matches!(self.peek(), Tok::Newline | Tok::Comma) {
                self.bump();
            }
            if self.at(&Tok::RBrace) {
                break;
            }
            if self.at(&Tok::Eof) {
                return Err(Diagnostic::syntax(open, "this `{` is never closed"));
            }
            let mut pats = vec![self.match_pattern()?];
            while self.eat(&Tok::Pipe) {
                pats.push(self.match_pattern()?);
            }
            self.expect(&Tok::FatArrow)?;
            self.skip_newlines();
            let body = self.expr()?;
            if !matches!(self.peek(), Tok::Newline | Tok::Comma | Tok::RBrace) {
                return Err(self.error_expected("a line break, `,` or `}` after the arm"));
            }
            arms.push(Arm {
                span: pats[0].span.to(body.span),
                pats,
                body,
            });
        }
        let close = self.bump().span;
        if arms.is_empty() {
            return Err(Diagnostic::syntax(
                start.to(close),
                "this `match` has no arms: write `pattern => value` for each case",
            ));
        }
        Ok(Expr {
            kind: ExprKind::Match {
                scrutinee: Box::new(scrutinee),
                arms,
            },
            span: start.to(close),
        })
    }

    /// A pattern of `match`: an integer (`3`, `-1`), `true`, `false` or `_`.
    fn match_pattern(&mut self) -> PResult<Pat> {
        let start = self.span();
        let neg = self.eat(&Tok::Minus);
        let kind = match self.peek().clone() {
            Tok::Num { int: Some(k), .. } => {
                let k = i64::try_from(k).ok().map(|k| if neg { -k } else { k });
                let Some(k) = k else {
                    return Err(Diagnostic::syntax(
                        start.to(self.span()),
                        "this pattern is out of the range of `i64`",
                    ));
                };
                PatKind::Int(k)
            }
            Tok::Ident(name) if !neg && (name == "true" || name == "false") => {
                PatKind::Bool(name == "true")
            }
            Tok::Ident(name) if !neg && name == "_" => PatKind::Wild,
            _ => {
                return Err(self.error_expected("a pattern: an integer, `true`, `false` or `_`"));
            }
        };
        let end = self.bump().span;
        Ok(Pat {
            kind,
            span: start.to(end),
        })
    }

    /// Skip line breaks only if `t` follows them (`}\n else {`).
    fn skip_newlines_before(&mut self, t: &Tok) {
        let mut k = self.pos;
        while matches!(self.toks.get(k).map(|x| &x.tok), Some(Tok::Newline)) {
            k += 1;
        }
        if self.toks.get(k).map(|x| &x.tok) == Some(t) {
            self.pos = k;
        }
    }

    fn unary(&mut self) -> PResult<Expr> {
        self.enter()?;
        let r = self.unary_inner();
        self.leave();
        r
    }

    /// A primary expression and any `[...]` indexing after it. Each index
    /// of a chain (`x[0][1][2]`) nests one level deeper, as the links of an
    /// operator chain do: the checker walks it recursively.
    fn postfix(&mut self) -> PResult<Expr> {
        let mut e = self.primary()?;
        let saved = self.depth;
        while self.at(&Tok::LBracket) {
            let link = self.enter().and_then(|()| self.index_link(&e));
            let (indices, end) = link.inspect_err(|_| self.depth = saved)?;
            let base = Box::new(e);
            let span = base.span.to(end);
            e = Expr {
                span,
                kind: ExprKind::Index { base, indices },
            };
        }
        self.depth = saved;
        self.habit_postfix(&e)?;
        Ok(e)
    }

    /// One `[i, ...]` after `base`: its indices and the closing bracket's
    /// span. A `:` in it is a slice (an error saying what to write).
    fn index_link(&mut self, base: &Expr) -> PResult<(Vec<Expr>, Span)> {
        let open = self.pos;
        self.bump();
        let mut indices = Vec::new();
        loop {
            if self.at(&Tok::Colon) {
                return Err(self.habit_slice(base, open));
            }
            indices.push(self.expr()?);
            if self.at(&Tok::Colon) {
                return Err(self.habit_slice(base, open));
            }
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        let end = self.expect(&Tok::RBracket)?;
        Ok((indices, end))
    }

    fn unary_inner(&mut self) -> PResult<Expr> {
        let op = match self.peek() {
            Tok::Minus => Some(UnOp::Neg),
            Tok::PlusSlash => Some(UnOp::Sum),
            Tok::MaxSlash => Some(UnOp::Max),
            Tok::MinSlash => Some(UnOp::Min),
            Tok::Bang => Some(UnOp::Not),
            _ => None,
        };
        if let Some(op) = op {
            let op_span = self.bump().span;
            let operand = self.unary()?;
            return Ok(Expr {
                span: op_span.to(self.prev_span()),
                kind: ExprKind::Unary {
                    op,
                    op_span,
                    operand: Box::new(operand),
                },
            });
        }
        self.postfix()
    }

    fn primary(&mut self) -> PResult<Expr> {
        let start = self.span();
        match self.peek().clone() {
            Tok::Num { text, value, .. } => {
                self.bump();
                Ok(Expr {
                    kind: ExprKind::Num { text, value },
                    span: start,
                })
            }
            Tok::Ident(name) if name == "true" || name == "false" => {
                self.bump();
                Ok(Expr {
                    kind: ExprKind::Bool(name == "true"),
                    span: start,
                })
            }
            Tok::If => self.if_expr(),
            Tok::Match => self.match_expr(),
            Tok::Ident(name) if name == "tabulate" && self.bracket_next() => {
                self.bump();
                self.bump();
                let size = self.dim()?;
                self.expect(&Tok::RBracket)?;
                let open = self.expect(&Tok::LParen)?;
                let param = self.ident("the index name, as in `tabulate[N](i => ...)`")?;
                self.expect(&Tok::FatArrow)?;
                self.skip_newlines();
                let body = self.expr()?;
                let end = self.close(&Tok::RParen, open)?;
                Ok(Expr {
                    kind: ExprKind::Tabulate {
                        size,
                        param,
                        body: Box::new(body),
                    },
                    span: start.to(end),
                })
            }
            Tok::Ident(name) if (name == "uniform" || name == "normal") && self.bracket_next() => {
                let normal = name == "normal";
                let shape = self.named_shape()?;
                let open = self.expect(&Tok::LParen)?;
                let key = self.expr()?;
                let end = self.close(&Tok::RParen, open)?;
                Ok(Expr {
                    kind: ExprKind::Draw {
                        normal,
                        shape,
                        key: Box::new(key),
                    },
                    span: start.to(end),
                })
            }
            Tok::Ident(name) if name == "reshape" && self.bracket_next() => {
                let shape = self.named_shape()?;
                let open = self.expect(&Tok::LParen)?;
                let arg = self.expr()?;
                let end = self.close(&Tok::RParen, open)?;
                Ok(Expr {
                    kind: ExprKind::Reshape {
                        shape,
                        arg: Box::new(arg),
                    },
                    span: start.to(end),
                })
            }
            Tok::Ident(name) => {
                self.habit_word(&name)?;
                self.bump();
                if self.at(&Tok::LParen) {
                    let open = self.bump().span;
                    let mut args = Vec::new();
                    while !self.at(&Tok::RParen) {
                        args.push(if self.lambda_ahead() {
                            self.lambda()?
                        } else {
                            self.expr()?
                        });
                        if !self.eat(&Tok::Comma) {
                            break;
                        }
                    }
                    let end = self.close(&Tok::RParen, open)?;
                    self.habit_reduction(&name, start.to(end), &args)?;
                    return Ok(Expr {
                        kind: ExprKind::Call {
                            callee: Ident { name, span: start },
                            args,
                        },
                        span: start.to(end),
                    });
                }
                Ok(Expr {
                    kind: ExprKind::Name(name),
                    span: start,
                })
            }
            Tok::LParen => {
                let open = self.bump().span;
                let mut elems = vec![self.expr()?];
                while self.eat(&Tok::Comma) {
                    if self.at(&Tok::RParen) {
                        break;
                    }
                    elems.push(self.expr()?);
                }
                let end = self.close(&Tok::RParen, open)?;
                if self.at(&Tok::LParen) {
                    return Err(Diagnostic::syntax(
                        self.span(),
                        "only named functions can be called",
                    ));
                }
                if elems.len() == 1 {
                    return Ok(elems.remove(0));
                }
                Ok(Expr {
                    kind: ExprKind::Tuple(elems),
                    span: start.to(end),
                })
            }
            Tok::LBrace => self.block(),
            Tok::Plus => Err(Diagnostic::syntax(
                start,
                "expected an expression, found `+` (there is no unary plus; `+/` is the sum)",
            )),
            _ => Err(self.error_expected("an expression")),
        }
    }
}

// Dimensions and size expressions (`N`, `2*N+1`, `name[d, ...]`).
#[path = "parser_dims.rs"]
mod dims;

// Python's and NumPy's habits, and what to write instead.
#[path = "parser_habits.rs"]
mod habits;

#[cfg(test)]
#[path = "parser_test.rs"]
mod tests;
