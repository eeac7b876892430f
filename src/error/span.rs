//! Byte spans, source files and rendered diagnostics.
//!
//! Every AST node carries a [`Span`]; every user-facing error is a
//! [`Diagnostic`] that renders as `file:line:col`, the source line and a caret.

use super::ErrorKind;
use std::fmt;
use std::sync::Arc;

/// A half-open byte range `start..end` into one source file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Span {
    /// The first byte.
    pub start: u32,
    /// One past the last byte.
    pub end: u32,
}

impl Span {
    /// The bytes `start..end` (an `end` before `start` gives an empty span).
    pub fn new(start: usize, end: usize) -> Span {
        Span {
            start: start as u32,
            end: end.max(start) as u32,
        }
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}

/// A named source text. Cheap to clone.
///
/// Another source may be attached at a byte offset past the end of the
/// text ([`SourceFile::with_attached`]): spans from that offset on point
/// into it, so one span space covers a program and code it is checked
/// with (the prelude), and each diagnostic shows the file it points into.
#[derive(Clone, Debug)]
pub struct SourceFile {
    /// The name diagnostics show (the path as the user gave it).
    pub name: Arc<str>,
    /// The whole text.
    pub text: Arc<str>,
    /// The attached source and the offset its spans start at.
    attached: Option<Arc<(u32, SourceFile)>>,
}

impl SourceFile {
    /// A source text and the name diagnostics show for it.
    pub fn new(name: impl Into<Arc<str>>, text: impl Into<Arc<str>>) -> SourceFile {
        SourceFile {
            name: name.into(),
            text: text.into(),
            attached: None,
        }
    }

    /// This file with `other` attached at `base` (at least the length of
    /// this file's text): a span from `base` on points into `other`, at
    /// `span - base`.
    pub fn with_attached(mut self, base: u32, other: SourceFile) -> SourceFile {
        self.attached = Some(Arc::new((base, other)));
        self
    }

    /// The file a span points into (this one or the attached one) and the
    /// span within that file's text.
    pub fn resolve(&self, span: Span) -> (&SourceFile, Span) {
        match self.attached.as_deref() {
            Some((base, other)) if span.start >= *base => {
                let (inner, local) = other.resolve(Span {
                    start: span.start - base,
                    end: span.end.saturating_sub(*base),
                });
                (inner, local)
            }
            _ => (self, span),
        }
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub fn line_col(&self, offset: u32) -> (usize, usize) {
        let offset = (offset as usize).min(self.text.len());
        let before = &self.text[..floor_char_boundary(&self.text, offset)];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
        let col = before[line_start..].chars().count() + 1;
        (line, col)
    }

    /// `file:line:col` of a span's start (the attached file's name for a
    /// span in it).
    pub fn location(&self, span: Span) -> String {
        let (file, span) = self.resolve(span);
        let (l, c) = file.line_col(span.start);
        format!("{}:{}:{}", file.name, l, c)
    }

    fn line_text(&self, line: usize) -> &str {
        self.text.lines().nth(line - 1).unwrap_or("")
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// A user-facing error (or note) attached to a place in the source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// What kind of error: [`ErrorKind::Type`] unless the maker says
    /// otherwise ([`Diagnostic::syntax`], [`Diagnostic::kind`]).
    pub kind: ErrorKind,
    /// The place the caret points at.
    pub span: Span,
    /// What is wrong, one line.
    pub message: String,
    /// Secondary places: (span, label), e.g. "`N` was bound here".
    pub labels: Vec<(Span, String)>,
    /// Free-standing hints printed after the snippet.
    pub notes: Vec<String>,
    /// What to write instead, printed after the notes (`= help: write
    /// `pow(x, 2)``): the form a habit of another language takes here,
    /// or the name a misspelt one most likely means.
    pub helps: Vec<String>,
}

impl Diagnostic {
    /// A [`ErrorKind::Type`] error at `span`.
    pub fn new(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            kind: ErrorKind::Type,
            span,
            message: message.into(),
            labels: Vec::new(),
            notes: Vec::new(),
            helps: Vec::new(),
        }
    }

    /// A syntax error: the text is not a program.
    pub fn syntax(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic::new(span, message).kind(ErrorKind::Syntax)
    }

    /// A valid construct egrad does not handle yet (a documented limit).
    pub fn unsupported(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic::new(span, message).kind(ErrorKind::Unsupported)
    }

    /// A program past one of egrad's size or depth limits.
    pub fn limit(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic::new(span, message).kind(ErrorKind::Limit)
    }

    /// The same diagnostic with another kind.
    pub fn kind(mut self, kind: ErrorKind) -> Diagnostic {
        self.kind = kind;
        self
    }

    /// Adds a secondary place with its label.
    pub fn with_label(mut self, span: Span, label: impl Into<String>) -> Diagnostic {
        self.labels.push((span, label.into()));
        self
    }

    /// Adds a hint printed after the snippet.
    pub fn with_note(mut self, note: impl Into<String>) -> Diagnostic {
        self.notes.push(note.into());
        self
    }

    /// Adds a line saying what to write instead.
    pub fn with_help(mut self, help: impl Into<String>) -> Diagnostic {
        self.helps.push(help.into());
        self
    }

    /// Render as
    /// ```text
    /// error: message
    ///  --> file:line:col
    ///   |
    /// 3 |   let x = y .* z
    ///   |           ^
    /// ```
    pub fn render(&self, file: &SourceFile) -> String {
        let mut out = format!("error: {}\n", self.message);
        out.push_str(&snippet(file, self.span, None));
        for (span, label) in &self.labels {
            out.push_str(&snippet(file, *span, Some(label)));
        }
        for note in &self.notes {
            out.push_str(&format!("  = note: {note}\n"));
        }
        for help in &self.helps {
            out.push_str(&format!("  = help: {help}\n"));
        }
        out
    }
}

/// The most diagnostics of one file printed; past them one line says how
/// many more there were.
pub const MAX_DIAGNOSTICS: usize = 20;

/// A source line longer than this many characters is shown cut around
/// the caret, with `…` where text is left out.
pub const MAX_LINE_CHARS: usize = 120;

/// Of a long line, how many characters are shown before the caret.
const CONTEXT_BEFORE: usize = 40;

/// The part of `text` (a line of `chars` characters) shown for a caret at
/// character `at` (0-based): the whole line when it is short, else
/// [`MAX_LINE_CHARS`] characters around the caret with `…` at each end
/// cut. Returns the text shown and the character it starts at, less one
/// when a `…` comes first (so the caret's column in the text shown is
/// `at - start`).
fn visible(text: &str, chars: usize, at: usize) -> (String, usize) {
    if chars <= MAX_LINE_CHARS {
        return (text.to_string(), 0);
    }
    let from = at
        .saturating_sub(CONTEXT_BEFORE)
        .min(chars - MAX_LINE_CHARS);
    let to = from + MAX_LINE_CHARS;
    let mut shown = String::new();
    if from > 0 {
        shown.push('…');
    }
    shown.extend(text.chars().skip(from).take(MAX_LINE_CHARS));
    if to < chars {
        shown.push('…');
    }
    (shown, from.saturating_sub(usize::from(from > 0)))
}

fn snippet(file: &SourceFile, span: Span, label: Option<&str>) -> String {
    let (file, span) = file.resolve(span);
    let (line, col) = file.line_col(span.start);
    let text = file.line_text(line);
    let width = line.to_string().len();
    let pad = " ".repeat(width);
    // Caret length: the span's characters on its first line, at least 1.
    let line_chars = text.chars().count();
    let span_chars = {
        let s = span.start as usize;
        let e = (span.end as usize).min(file.text.len());
        let s = floor_char_boundary(&file.text, s.min(file.text.len()));
        let e = floor_char_boundary(&file.text, e.max(s));
        file.text[s..e].chars().take_while(|c| *c != '\n').count()
    };
    let (shown, start) = visible(text, line_chars, col - 1);
    let shown_chars = shown.chars().count();
    // In the text shown: the caret's column, and no caret past its end.
    let caret_col = col - 1 - start;
    let caret_len = span_chars
        .max(1)
        .min(shown_chars.saturating_sub(caret_col).max(1));
    let mut out = String::new();
    out.push_str(&format!("{pad}--> {}:{line}:{col}\n", file.name));
    out.push_str(&format!("{pad} |\n"));
    out.push_str(&format!("{line} | {shown}\n"));
    let indent: String = shown
        .chars()
        .take(caret_col)
        .map(|c| if c == '\t' { '\t' } else { ' ' })
        .collect();
    out.push_str(&format!("{pad} | {indent}{}", "^".repeat(caret_len)));
    if let Some(label) = label {
        out.push(' ');
        out.push_str(label);
    }
    out.push('\n');
    out
}

/// One or more diagnostics from one source file.
#[derive(Clone, Debug)]
pub struct Diagnostics {
    /// The file every item points into.
    pub file: SourceFile,
    /// The diagnostics, in the order they are printed.
    pub items: Vec<Diagnostic>,
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.items.iter().take(MAX_DIAGNOSTICS).enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{}", d.render(&self.file))?;
        }
        match self.items.len().saturating_sub(MAX_DIAGNOSTICS) {
            0 => Ok(()),
            more => writeln!(
                f,
                "\n{more} more error(s) in {} not shown (the first {MAX_DIAGNOSTICS} are)",
                self.file.name
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_and_caret() {
        let f = SourceFile::new("a.eg", "fn f() {\n  let x = yy\n}\n");
        let start = f.text.find("yy").unwrap();
        let d = Diagnostic::new(Span::new(start, start + 2), "unknown name `yy`");
        assert_eq!(
            d.render(&f),
            "error: unknown name `yy`\n --> a.eg:2:11\n  |\n2 |   let x = yy\n  |           ^^\n"
        );
    }

    #[test]
    fn spans_past_the_base_point_into_the_attached_file() {
        let other = SourceFile::new("<prelude>", "fn g() {\n  zz\n}\n");
        let f = SourceFile::new("a.eg", "x").with_attached(100, other);
        let d = Diagnostic::new(Span::new(111, 113), "unknown name `zz`")
            .with_label(Span::new(0, 1), "used here");
        assert_eq!(
            d.render(&f),
            "error: unknown name `zz`\n --> <prelude>:2:3\n  |\n2 |   zz\n  |   ^^\n --> a.eg:1:1\n  |\n1 | x\n  | ^ used here\n"
        );
        assert_eq!(f.location(Span::new(111, 113)), "<prelude>:2:3");
        assert_eq!(f.location(Span::new(0, 1)), "a.eg:1:1");
        // Past the attached text: clamped there, never a panic.
        assert!(d
            .render(&SourceFile::new("a.eg", "x").with_attached(100, SourceFile::new("p", "")))
            .contains("p:1:1"));
    }

    #[test]
    fn long_lines_are_cut_around_the_caret() {
        let line = format!("let a = {}zz{}", "x".repeat(500), "y".repeat(500));
        let f = SourceFile::new("a.eg", line.clone());
        let start = line.find("zz").unwrap();
        let r = Diagnostic::new(Span::new(start, start + 2), "unknown name `zz`").render(&f);
        let lines: Vec<&str> = r.lines().collect();
        assert_eq!(lines[1], " --> a.eg:1:509");
        let shown = lines[3].strip_prefix("1 | ").unwrap();
        assert!(shown.starts_with('…') && shown.ends_with('…'), "{shown}");
        assert_eq!(shown.chars().count(), MAX_LINE_CHARS + 2);
        // The caret is under `zz` in the text shown.
        let caret = lines[4].strip_prefix("  | ").unwrap();
        let at = caret.find('^').unwrap();
        assert_eq!(caret.trim_start(), "^^");
        let under: String = shown.chars().skip(at).take(2).collect();
        assert_eq!(under, "zz");
        // Near either end, one `…` only; a short line is shown whole.
        let r = Diagnostic::new(Span::new(0, 3), "x").render(&f);
        let shown = r.lines().nth(3).unwrap();
        assert!(
            shown.starts_with("1 | let") && shown.ends_with('…'),
            "{shown}"
        );
        let end = line.len();
        let r = Diagnostic::new(Span::new(end - 1, end), "x").render(&f);
        let (shown, caret) = (r.lines().nth(3).unwrap(), r.lines().nth(4).unwrap());
        assert!(
            shown.starts_with("1 | …") && shown.ends_with('y'),
            "{shown}"
        );
        let chars = |s: &str| s.chars().count();
        assert_eq!(
            chars(caret),
            chars(shown),
            "the caret under the last character"
        );
        let r = Diagnostic::new(Span::new(0, 1), "x").render(&SourceFile::new("a.eg", "ab"));
        assert!(r.contains("1 | ab\n  | ^\n"), "{r}");
    }

    #[test]
    fn at_most_twenty_diagnostics_are_shown() {
        let f = SourceFile::new("a.eg", "x\n");
        let items = (0..100).map(|i| Diagnostic::new(Span::new(0, 1), format!("e{i}")));
        let d = Diagnostics {
            file: f,
            items: items.collect(),
        };
        let text = d.to_string();
        assert_eq!(text.matches("error: ").count(), MAX_DIAGNOSTICS);
        assert!(
            text.contains("error: e19\n") && !text.contains("e20"),
            "{text}"
        );
        assert!(text.ends_with("\n80 more error(s) in a.eg not shown (the first 20 are)\n"));
    }

    #[test]
    fn span_past_end_is_clamped() {
        let f = SourceFile::new("a.eg", "x");
        let d = Diagnostic::new(Span::new(5, 9), "eof");
        assert!(d.render(&f).contains("a.eg:1:2"));
    }
}
