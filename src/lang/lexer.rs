//! The lexer: source text to tokens with byte spans.
//!
//! Line breaks are significant (they end statements) except inside
//! parentheses or brackets: the lexer keeps a stack of open delimiters and
//! emits a [`Tok::Newline`] only when the innermost one is `{` or there is
//! none. Consecutive line breaks collapse into one token. `//` starts a
//! comment that runs to the end of the line; `#` is reported once (as
//! Python's comment) and its line skipped. `**` and a lone `.` are tokens
//! of their own, which no construct accepts, so that the parser can say
//! what to write instead (`pow(x, 2)`, `exp(x)` for `np.exp(x)`).

use crate::error::span::{Diagnostic, Span};
use std::fmt;

/// One token.
#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    Ident(String),
    /// A number literal: its text, its value, and its value as an integer
    /// if it is written with digits only and fits in a `u64`.
    Num {
        text: String,
        value: f64,
        int: Option<u64>,
    },
    Fn,
    Let,
    If,
    Else,
    Static,
    Match,
    /// `|` between the patterns of a `match` arm.
    Pipe,
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Comma,
    Colon,
    Semi,
    Eq,
    Arrow,
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    DotStar,
    DotSlash,
    /// `**`: no egrad operator, lexed whole so that the parser can say
    /// what to write instead (`pow`).
    StarStar,
    /// `.` alone (not `.*` or `./`): no egrad syntax, lexed so that the
    /// parser can recognize `np.exp(x)`, `x.sum()` and `x.T`.
    Dot,
    /// `+/`, the sum reduction.
    PlusSlash,
    /// `max/` and `min/` (written without a space), the max and min reductions.
    MaxSlash,
    MinSlash,
    /// `=>` in `s => step`.
    FatArrow,
    Lt,
    Le,
    Gt,
    Ge,
    EqEq,
    Ne,
    AndAnd,
    OrOr,
    Bang,
    At,
    Newline,
    Eof,
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Tok::Ident(s) => return write!(f, "`{s}`"),
            Tok::Num { text, .. } => return write!(f, "`{text}`"),
            Tok::Fn => "`fn`",
            Tok::Let => "`let`",
            Tok::If => "`if`",
            Tok::Else => "`else`",
            Tok::Match => "`match`",
            Tok::Pipe => "`|`",
            Tok::Static => "`static`",
            Tok::LParen => "`(`",
            Tok::RParen => "`)`",
            Tok::LBracket => "`[`",
            Tok::RBracket => "`]`",
            Tok::LBrace => "`{`",
            Tok::RBrace => "`}`",
            Tok::Comma => "`,`",
            Tok::Colon => "`:`",
            Tok::Semi => "`;`",
            Tok::Eq => "`=`",
            Tok::Arrow => "`->`",
            Tok::Plus => "`+`",
            Tok::Minus => "`-`",
            Tok::Star => "`*`",
            Tok::Slash => "`/`",
            Tok::Percent => "`%`",
            Tok::DotStar => "`.*`",
            Tok::DotSlash => "`./`",
            Tok::StarStar => "`**`",
            Tok::Dot => "`.`",
            Tok::PlusSlash => "`+/`",
            Tok::MaxSlash => "`max/`",
            Tok::MinSlash => "`min/`",
            Tok::FatArrow => "`=>`",
            Tok::Lt => "`<`",
            Tok::Le => "`<=`",
            Tok::Gt => "`>`",
            Tok::Ge => "`>=`",
            Tok::EqEq => "`==`",
            Tok::Ne => "`!=`",
            Tok::AndAnd => "`&&`",
            Tok::OrOr => "`||`",
            Tok::Bang => "`!`",
            Tok::At => "`@`",
            Tok::Newline => "a line break",
            Tok::Eof => "the end of the file",
        };
        f.write_str(s)
    }
}

/// A token and where it is.
#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    pub tok: Tok,
    pub span: Span,
}

/// Split `src` into tokens (always ending with [`Tok::Eof`]). Bad characters
/// and malformed numbers are reported and skipped, so lexing never fails.
pub fn lex(src: &str) -> (Vec<Token>, Vec<Diagnostic>) {
    let bytes = src.as_bytes();
    let mut toks: Vec<Token> = Vec::new();
    let mut errs = Vec::new();
    // Open delimiters: b'(', b'[' or b'{'.
    let mut open: Vec<u8> = Vec::new();
    let mut i = 0;
    let at = |k: usize| bytes.get(k).copied().unwrap_or(0);
    while i < bytes.len() {
        let c = bytes[i];
        let start = i;
        let push = |tok: Tok, len: usize, toks: &mut Vec<Token>| {
            toks.push(Token {
                tok,
                span: Span::new(start, start + len),
            });
            len
        };
        match c {
            b'\n' => {
                let significant = !matches!(open.last(), Some(b'(') | Some(b'['));
                let last_is_nl = matches!(
                    toks.last(),
                    Some(Token {
                        tok: Tok::Newline,
                        ..
                    })
                );
                if significant && !last_is_nl {
                    push(Tok::Newline, 1, &mut toks);
                }
                i += 1;
            }
            b' ' | b'\t' | b'\r' => i += 1,
            b'/' if at(i + 1) == b'/' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'(' | b'[' | b'{' => {
                open.push(c);
                let t = match c {
                    b'(' => Tok::LParen,
                    b'[' => Tok::LBracket,
                    _ => Tok::LBrace,
                };
                i += push(t, 1, &mut toks);
            }
            b')' | b']' | b'}' => {
                let want = match c {
                    b')' => b'(',
                    b']' => b'[',
                    _ => b'{',
                };
                // Pop up to and including the matching opener, if any; an
                // unmatched closer leaves the stack alone (the parser reports it).
                if let Some(k) = open.iter().rposition(|o| *o == want) {
                    open.truncate(k);
                }
                let t = match c {
                    b')' => Tok::RParen,
                    b']' => Tok::RBracket,
                    _ => Tok::RBrace,
                };
                i += push(t, 1, &mut toks);
            }
            b',' => i += push(Tok::Comma, 1, &mut toks),
            b':' => i += push(Tok::Colon, 1, &mut toks),
            b';' => i += push(Tok::Semi, 1, &mut toks),
            b'=' if at(i + 1) == b'>' => i += push(Tok::FatArrow, 2, &mut toks),
            b'=' if at(i + 1) == b'=' => i += push(Tok::EqEq, 2, &mut toks),
            b'=' => i += push(Tok::Eq, 1, &mut toks),
            b'<' if at(i + 1) == b'=' => i += push(Tok::Le, 2, &mut toks),
            b'<' => i += push(Tok::Lt, 1, &mut toks),
            b'>' if at(i + 1) == b'=' => i += push(Tok::Ge, 2, &mut toks),
            b'>' => i += push(Tok::Gt, 1, &mut toks),
            b'!' if at(i + 1) == b'=' => i += push(Tok::Ne, 2, &mut toks),
            b'!' => i += push(Tok::Bang, 1, &mut toks),
            b'&' if at(i + 1) == b'&' => i += push(Tok::AndAnd, 2, &mut toks),
            b'|' if at(i + 1) == b'|' => i += push(Tok::OrOr, 2, &mut toks),
            b'|' => i += push(Tok::Pipe, 1, &mut toks),
            b'@' => i += push(Tok::At, 1, &mut toks),
            b'*' if at(i + 1) == b'*' => i += push(Tok::StarStar, 2, &mut toks),
            b'*' => i += push(Tok::Star, 1, &mut toks),
            b'/' => i += push(Tok::Slash, 1, &mut toks),
            b'%' => i += push(Tok::Percent, 1, &mut toks),
            b'+' if at(i + 1) == b'/' => i += push(Tok::PlusSlash, 2, &mut toks),
            b'+' => i += push(Tok::Plus, 1, &mut toks),
            b'-' if at(i + 1) == b'>' => i += push(Tok::Arrow, 2, &mut toks),
            b'-' => i += push(Tok::Minus, 1, &mut toks),
            b'.' if at(i + 1) == b'*' => i += push(Tok::DotStar, 2, &mut toks),
            b'.' if at(i + 1) == b'/' => i += push(Tok::DotSlash, 2, &mut toks),
            b'.' => i += push(Tok::Dot, 1, &mut toks),
            // A Python comment: one error, and the rest of the line is
            // skipped as a comment (not lexed into follow-on errors).
            b'#' => {
                errs.push(
                    Diagnostic::syntax(
                        Span::new(i, i + 1),
                        "egrad's comments start with `//`, not `#`",
                    )
                    .with_help("write `//`"),
                );
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'0'..=b'9' => {
                let (tok, j) = lex_number(src, i, &mut errs);
                toks.push(tok);
                i = j;
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let (tok, j) = lex_word(src, i);
                toks.push(tok);
                i = j;
            }
            _ => {
                // One whole (possibly multi-byte) character.
                let ch = src.get(i..).and_then(|s| s.chars().next()).unwrap_or('?');
                let len = ch.len_utf8().max(1);
                errs.push(Diagnostic::syntax(
                    Span::new(i, i + len),
                    format!("unexpected character `{}`", ch.escape_debug()),
                ));
                i += len;
            }
        }
    }
    toks.push(Token {
        tok: Tok::Eof,
        span: Span::new(src.len(), src.len()),
    });
    (toks, errs)
}

/// The number starting at byte `i` of `src`, and the byte after it. A
/// malformed one (`12ab`) or one past f64's range is reported in `errs`.
fn lex_number(src: &str, i: usize, errs: &mut Vec<Diagnostic>) -> (Token, usize) {
    let at = |k: usize| src.as_bytes().get(k).copied().unwrap_or(0);
    let mut j = i;
    while at(j).is_ascii_digit() {
        j += 1;
    }
    let mut is_int = true;
    if at(j) == b'.' && at(j + 1).is_ascii_digit() {
        is_int = false;
        j += 1;
        while at(j).is_ascii_digit() {
            j += 1;
        }
    }
    if matches!(at(j), b'e' | b'E') {
        let k = if matches!(at(j + 1), b'+' | b'-') {
            j + 2
        } else {
            j + 1
        };
        if at(k).is_ascii_digit() {
            is_int = false;
            j = k;
            while at(j).is_ascii_digit() {
                j += 1;
            }
        }
    }
    let mut bad = false;
    while at(j).is_ascii_alphanumeric() || at(j) == b'_' {
        bad = true;
        j += 1;
    }
    // Only ASCII was consumed, so this slice is on char boundaries.
    let text = src.get(i..j).unwrap_or("").to_string();
    let span = Span::new(i, j);
    if bad {
        errs.push(Diagnostic::syntax(span, format!("invalid number `{text}`")));
    }
    let value = if bad {
        0.0
    } else {
        text.parse::<f64>().unwrap_or(0.0)
    };
    // Rust's parse rounds a literal past f64's range to
    // infinity: say so instead of computing with it.
    if !bad && value.is_infinite() {
        errs.push(Diagnostic::syntax(
            span,
            format!(
                "number `{text}` is too large for a float (the largest is about 1.8e308); write `1.0 / 0.0` for infinity"
            ),
        ));
    }
    let int = if is_int && !bad {
        text.parse::<u64>().ok()
    } else {
        None
    };
    (
        Token {
            tok: Tok::Num { text, value, int },
            span,
        },
        j,
    )
}

/// The word (a keyword or a name, or `max/` and `min/`) starting at byte
/// `i` of `src`, and the byte after it.
fn lex_word(src: &str, i: usize) -> (Token, usize) {
    let at = |k: usize| src.as_bytes().get(k).copied().unwrap_or(0);
    let mut j = i;
    while at(j).is_ascii_alphanumeric() || at(j) == b'_' {
        j += 1;
    }
    let word = src.get(i..j).unwrap_or("");
    let tok = match word {
        "fn" => Tok::Fn,
        "let" => Tok::Let,
        "if" => Tok::If,
        "else" => Tok::Else,
        "static" => Tok::Static,
        "match" => Tok::Match,
        // `max/x`, `min/x`: a reduction (a `/` right after the name).
        "max" if at(j) == b'/' && at(j + 1) != b'/' => {
            j += 1;
            Tok::MaxSlash
        }
        "min" if at(j) == b'/' && at(j + 1) != b'/' => {
            j += 1;
            Tok::MinSlash
        }
        w => Tok::Ident(w.to_string()),
    };
    (
        Token {
            tok,
            span: Span::new(i, j),
        },
        j,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<Tok> {
        let (t, e) = lex(src);
        assert!(e.is_empty(), "{e:?}");
        t.into_iter().map(|t| t.tok).collect()
    }

    fn num(text: &str, value: f64, int: Option<u64>) -> Tok {
        Tok::Num {
            text: text.into(),
            value,
            int,
        }
    }

    #[test]
    fn operators_and_numbers() {
        assert_eq!(
            kinds("+/(w .* x) ./ 2.*1e-3 -> 0.5"),
            vec![
                Tok::PlusSlash,
                Tok::LParen,
                Tok::Ident("w".into()),
                Tok::DotStar,
                Tok::Ident("x".into()),
                Tok::RParen,
                Tok::DotSlash,
                num("2", 2.0, Some(2)),
                Tok::DotStar,
                num("1e-3", 1e-3, None),
                Tok::Arrow,
                num("0.5", 0.5, None),
                Tok::Eof
            ]
        );
    }

    #[test]
    fn newlines_inside_parens_are_dropped() {
        assert_eq!(
            kinds("f(a,\n b)\n\n// c\nlet"),
            vec![
                Tok::Ident("f".into()),
                Tok::LParen,
                Tok::Ident("a".into()),
                Tok::Comma,
                Tok::Ident("b".into()),
                Tok::RParen,
                Tok::Newline,
                Tok::Let,
                Tok::Eof
            ]
        );
        assert_eq!(
            kinds("{a\n}"),
            vec![
                Tok::LBrace,
                Tok::Ident("a".into()),
                Tok::Newline,
                Tok::RBrace,
                Tok::Eof
            ]
        );
    }

    #[test]
    fn bad_input_is_reported_not_fatal() {
        let (t, e) = lex("a $ 12x é # 3y\nb");
        assert_eq!(e.len(), 4);
        assert_eq!(e[0].message, "unexpected character `$`");
        assert_eq!(e[1].message, "invalid number `12x`");
        // `#` starts a (Python) comment: one error, the line skipped.
        assert_eq!(e[3].message, "egrad's comments start with `//`, not `#`");
        assert_eq!(t[t.len() - 2].tok, Tok::Ident("b".into()));
        assert_eq!(t.last().map(|t| &t.tok), Some(&Tok::Eof));
    }
}
