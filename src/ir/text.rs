//! The IR's text form: printed by `Display for Function`, parsed back by
//! [`parse_functions`] (the golden dumps and the tests read it).

use super::{Builder, CustomRule, Function, Loop, VarId};
use crate::error::span::Span;
use crate::ops::{parse_number, Lit, Op};
use crate::types::{Dim, Type};
use indexmap::IndexMap;
use std::fmt;

impl fmt::Display for Function {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fn {}", self.name)?;
        if !self.size_params.is_empty() {
            write!(f, "[{}]", self.size_params.join(", "))?;
        }
        f.write_str("(")?;
        for (i, p) in self.params.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "%{}: {}", self.var_name(p.var), self.ty(p.var))?;
        }
        f.write_str(") -> ")?;
        let rets = self.ret_types();
        if rets.len() == 1 {
            write!(f, "{}", rets[0])?;
        } else {
            f.write_str("(")?;
            for (i, t) in rets.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{t}")?;
            }
            f.write_str(")")?;
        }
        f.write_str(" {\n")?;
        for (i, l) in self.loops.iter().enumerate() {
            let settles = if l.settles { " settles" } else { "" };
            let captures = match l.captures {
                0 => String::new(),
                c => format!(" captures {c}"),
            };
            writeln!(f, "  loop {i} x{}{settles}{captures} {{", l.count)?;
            for part in std::iter::once(&l.body).chain(&l.vjp) {
                for line in part.to_string().lines() {
                    writeln!(f, "    {line}")?;
                }
            }
            f.write_str("  }\n")?;
        }
        for (i, r) in self.rules.iter().enumerate() {
            let parts: Vec<&str> = [("vjp", &r.vjp), ("jvp", &r.jvp)]
                .iter()
                .filter(|(_, p)| p.is_some())
                .map(|(n, _)| *n)
                .collect();
            writeln!(f, "  rule {i} {} {} {{", r.name, parts.join(" "))?;
            for part in r.vjp.iter().chain(&r.jvp) {
                for line in part.to_string().lines() {
                    writeln!(f, "    {line}")?;
                }
            }
            f.write_str("  }\n")?;
        }
        for s in &self.stmts {
            write!(
                f,
                "  %{}: {} = {}",
                self.var_name(s.var),
                self.ty(s.var),
                s.op
            )?;
            for a in &s.args {
                write!(f, " %{}", self.var_name(*a))?;
            }
            f.write_str("\n")?;
        }
        f.write_str("  ret")?;
        for (i, r) in self.rets.iter().enumerate() {
            write!(f, "{} %{}", if i > 0 { "," } else { "" }, self.var_name(*r))?;
        }
        f.write_str("\n}\n")
    }
}

/// A syntax or consistency error in IR text, with its 1-based line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IrParseError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for IrParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// Parse one or more functions in the IR text form.
pub fn parse_functions(text: &str) -> Result<Vec<Function>, IrParseError> {
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate().peekable();
    while let Some((ln, line)) = lines.next() {
        let line = line.trim();
        if line.is_empty() || line.starts_with(';') {
            continue;
        }
        let err = |m: &str| IrParseError {
            line: ln + 1,
            message: m.to_string(),
        };
        let header = line
            .strip_prefix("fn ")
            .and_then(|h| h.strip_suffix('{'))
            .ok_or_else(|| err("expected `fn NAME(...) -> T {`"))?
            .trim();
        let open = header.find('(').ok_or_else(|| err("expected `(`"))?;
        let close = header
            .find(") ->")
            .ok_or_else(|| err("expected `) -> T`"))?;
        let (name, sizes) = match header[..open].find('[') {
            Some(i) => {
                let s = header[i + 1..open]
                    .trim()
                    .strip_suffix(']')
                    .ok_or_else(|| err("expected `]`"))?;
                let sizes = s.split(',').map(|x| x.trim().to_string()).collect();
                (header[..i].trim(), sizes)
            }
            None => (header[..open].trim(), Vec::new()),
        };
        let mut b = Builder::new(name, sizes);
        let mut env: IndexMap<String, VarId> = IndexMap::new();
        for p in split_top(&header[open + 1..close]) {
            let (pname, pty) = p
                .split_once(':')
                .ok_or_else(|| err("expected `%name: type`"))?;
            let pname = pname
                .trim()
                .strip_prefix('%')
                .ok_or_else(|| err("expected `%name`"))?;
            let ty = Type::parse(pty).ok_or_else(|| err(&format!("bad type `{}`", pty.trim())))?;
            let v = b.param(pname, ty, Span::default());
            if b.function().var_name(v) != pname {
                return Err(err(&format!("duplicate name %{pname}")));
            }
            env.insert(pname.to_string(), v);
        }
        let mut rets = None;
        while let Some((ln, line)) = lines.next() {
            let line = line.trim();
            let err = |m: &str| IrParseError {
                line: ln + 1,
                message: m.to_string(),
            };
            if line == "}" {
                break;
            }
            if let Some(head) = line.strip_prefix("loop ").and_then(|h| h.strip_suffix('{')) {
                let (l, settles, captures) =
                    parse_loop_header(head, b.function().loops.len()).map_err(|m| err(&m))?;
                let mut parts = parse_block(&mut lines, ln)?;
                if parts.is_empty() || parts.len() > 2 {
                    return Err(err("a loop block holds its body and, optionally, its VJP"));
                }
                let vjp = (parts.len() == 2).then(|| parts.remove(1));
                let body = parts.remove(0);
                b.add_loop(Loop {
                    count: l,
                    body,
                    vjp,
                    settles,
                    captures,
                });
                continue;
            }
            if let Some(head) = line.strip_prefix("rule ").and_then(|h| h.strip_suffix('{')) {
                parse_rule(head, &mut b, &mut lines, ln, &err)?;
                continue;
            }
            if let Some(r) = line.strip_prefix("ret") {
                let mut vs = Vec::new();
                for part in r.split(',') {
                    let n = part
                        .trim()
                        .strip_prefix('%')
                        .ok_or_else(|| err("expected `%name`"))?;
                    vs.push(*env.get(n).ok_or_else(|| err(&format!("unknown %{n}")))?);
                }
                rets = Some(vs);
                continue;
            }
            let (lhs, rhs) = line.split_once('=').ok_or_else(|| err("expected `=`"))?;
            let (vname, vty) = lhs
                .split_once(':')
                .ok_or_else(|| err("expected `%name: type`"))?;
            let vname = vname
                .trim()
                .strip_prefix('%')
                .ok_or_else(|| err("expected `%name`"))?;
            let ty = Type::parse(vty).ok_or_else(|| err(&format!("bad type `{}`", vty.trim())))?;
            let mut words = rhs.split_whitespace();
            let opname = words.next().ok_or_else(|| err("expected an op"))?;
            let op = parse_op(opname, &mut words, &ty, &err)?;
            let mut args = Vec::new();
            for w in words {
                let n = w.strip_prefix('%').ok_or_else(|| err("expected `%name`"))?;
                args.push(*env.get(n).ok_or_else(|| err(&format!("unknown %{n}")))?);
            }
            let v = b
                .push(vname, op, &args, Some(&ty))
                .map_err(|e| err(&e.to_string()))?;
            if b.ty(v) != &ty {
                return Err(err(&format!(
                    "declared {ty} but `{opname}` gives {}",
                    b.ty(v)
                )));
            }
            if b.function().var_name(v) != vname {
                return Err(err(&format!("duplicate name %{vname}")));
            }
            env.insert(vname.to_string(), v);
        }
        let rets = rets.ok_or_else(|| err("function has no `ret`"))?;
        let f = b.finish(rets);
        f.validate().map_err(|e| err(&e.to_string()))?;
        out.push(f);
    }
    Ok(out)
}

/// The op of a statement, `opname` and its numbers from `words`, of
/// declared type `ty` (the constant's dtype).
fn parse_op<'w>(
    opname: &str,
    words: &mut impl Iterator<Item = &'w str>,
    ty: &Type,
    err: &impl Fn(&str) -> IrParseError,
) -> Result<Op, IrParseError> {
    Ok(if opname == "const" {
        let n = words.next().ok_or_else(|| err("expected a number"))?;
        let x = parse_number(n).ok_or_else(|| err(&format!("bad number `{n}`")))?;
        Op::Const(Lit::new(ty.dtype, x))
    } else if opname == "custom" || opname == "kernel" {
        let mut ns = [0u32; 2];
        for slot in &mut ns {
            let w = words.next().unwrap_or("");
            *slot = w
                .parse()
                .map_err(|_| err(&format!("`{opname}` needs 2 numbers, got `{w}`")))?;
        }
        if opname == "custom" {
            Op::Custom(ns[0], ns[1])
        } else {
            Op::Kernel(ns[0], ns[1])
        }
    } else if let Some(want) = match opname {
        "loop" | "scan" => Some(1),
        "looptape" | "scantape" => Some(2),
        "loopvjp" | "scanvjp" => Some(3),
        _ => None,
    } {
        let mut ns = [0u32; 3];
        for slot in ns.iter_mut().take(want) {
            let w = words.next().unwrap_or("");
            *slot = w
                .parse()
                .map_err(|_| err(&format!("`{opname}` needs {want} number(s), got `{w}`")))?;
        }
        let scan = opname.starts_with("scan");
        match want {
            1 => Op::Loop(ns[0], scan),
            2 => Op::LoopTape(ns[0], ns[1], scan),
            _ => Op::LoopVjp(ns[0], ns[1], ns[2], scan),
        }
    } else {
        let op = Op::from_name(opname).ok_or_else(|| err(&format!("unknown op `{opname}`")))?;
        if op.payload().is_some() {
            let n = words.next().ok_or_else(|| err("expected a row number"))?;
            let k: u64 = n
                .parse()
                .map_err(|_| err(&format!("bad row number `{n}`")))?;
            op.with_payload(k)
        } else {
            op
        }
    })
}

/// A `rule K NAME vjp jvp {` block (header words `head`, on line `ln`):
/// its functions read from `lines` and added to `b`.
fn parse_rule<'a>(
    head: &str,
    b: &mut Builder,
    lines: &mut impl Iterator<Item = (usize, &'a str)>,
    ln: usize,
    err: &impl Fn(&str) -> IrParseError,
) -> Result<(), IrParseError> {
    let mut words = head.split_whitespace();
    let k: Option<usize> = words.next().and_then(|w| w.parse().ok());
    let next = b.function().rules.len();
    let name = words.next().unwrap_or("").to_string();
    let kinds: Vec<&str> = words.collect();
    let ok_kinds = matches!(kinds[..], ["vjp"] | ["jvp"] | ["vjp", "jvp"]);
    if k != Some(next) || name.is_empty() || !ok_kinds {
        return Err(err(&format!(
            "expected `rule {next} NAME vjp {{`, `... jvp {{` or `... vjp jvp {{`"
        )));
    }
    let parts = parse_block(lines, ln)?;
    if parts.len() != kinds.len() {
        return Err(err(&format!(
            "the rule block holds {} function(s), its header names {}",
            parts.len(),
            kinds.len()
        )));
    }
    let mut parts = parts.into_iter();
    let vjp = if kinds[0] == "vjp" {
        parts.next()
    } else {
        None
    };
    let jvp = parts.next();
    b.add_rule(CustomRule { name, vjp, jvp });
    Ok(())
}

/// The functions of a nested block (a loop's or a rule's), read up to its
/// closing `}`; `ln` is the header's line.
fn parse_block<'a>(
    lines: &mut impl Iterator<Item = (usize, &'a str)>,
    ln: usize,
) -> Result<Vec<Function>, IrParseError> {
    let mut text = String::new();
    let mut depth = 0usize;
    let mut closed = false;
    for (_, inner) in lines.by_ref() {
        let t = inner.trim();
        if t == "}" && depth == 0 {
            closed = true;
            break;
        }
        if t.ends_with('{') {
            depth += 1;
        } else if t == "}" {
            depth -= 1;
        }
        text.push_str(inner);
        text.push('\n');
    }
    if !closed {
        return Err(IrParseError {
            line: ln + 1,
            message: "block without its closing `}`".to_string(),
        });
    }
    parse_functions(&text).map_err(|e| IrParseError {
        line: ln + 1 + e.line,
        message: e.message,
    })
}

/// `K xN` (then optionally `settles` and `captures C`) of a `loop K xN {`
/// block: the count (a literal or a size parameter), [`Loop::settles`] and
/// [`Loop::captures`], if `K` is the next loop.
fn parse_loop_header(head: &str, next: usize) -> Result<(Dim, bool, usize), String> {
    let mut words = head.split_whitespace().peekable();
    let k: Option<usize> = words.next().and_then(|w| w.parse().ok());
    let n: Option<Dim> = words
        .next()
        .and_then(|w| w.strip_prefix('x'))
        .and_then(|w| Type::parse(&format!("f64[{w}]")))
        .and_then(|t| t.shape.into_iter().next());
    let settles = words.next_if_eq(&"settles").is_some();
    let captures = match words.next() {
        None => Some(0),
        Some("captures") => words.next().and_then(|w| w.parse().ok()),
        Some(_) => None,
    };
    match (k, n, captures, words.next()) {
        (Some(k), Some(n), Some(c), None) if k == next => Ok((n, settles, c)),
        (Some(k), Some(_), Some(_), None) => Err(format!("expected loop {next}, found loop {k}")),
        _ => Err(
            "expected `loop K xN {`, then optionally `settles` and `captures C` before the `{`"
                .to_string(),
        ),
    }
}

/// Split on commas that are not inside brackets.
fn split_top(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '[' | '(' => depth += 1,
            ']' | ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if !s[start..].trim().is_empty() {
        parts.push(&s[start..]);
    }
    parts
}
