//! Derivative templates: the op table's per-argument rules, kept as data in
//! the rule-pattern syntax (`(mul ?g (cos ?a))`) and instantiated into IR.

use crate::ir::{Builder, VarId};
use crate::ops::{parse_number, Op, OpTypeError};
use crate::types::Type;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

/// A parsed template.
#[derive(Clone, Debug, PartialEq)]
pub enum Template {
    /// `?g`, `?out`, `?a`, `?b`.
    Var(String),
    /// A number; takes the dtype (and shape, by broadcasting) of its context.
    Num(f64),
    App(Op, Vec<Template>),
}

/// A template that does not parse or does not fit the op: a bug in the op
/// table (the table's unit tests parse every template).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TemplateError {
    /// Text after a whole template.
    Trailing(String),
    /// The text ends inside a template.
    UnexpectedEnd,
    /// `(` not followed by an op's name.
    ExpectedOp,
    /// A name that is no op.
    UnknownOp(String),
    /// An op with a payload written without its row number.
    NeedsRow(String),
    /// `(` without its `)`.
    MissingParen,
    /// An op with the wrong number of operands.
    Arity {
        /// The op's name.
        op: String,
        /// How many it takes.
        want: usize,
        /// How many it was given.
        got: usize,
    },
    /// A token that starts no template.
    Unexpected(String),
    /// A template variable the op does not bind.
    Unbound(String),
    /// A number or an op whose type must come from its context, without
    /// one (what it is, printed).
    NoContext(String),
    /// A variable that does not broadcast to the type expected.
    Variable {
        /// The variable.
        var: String,
        /// Why.
        error: OpTypeError,
    },
    /// An op that does not type on its operands.
    Op {
        /// The op's name.
        op: &'static str,
        /// Why.
        error: OpTypeError,
    },
    /// A number that does not broadcast to the type expected.
    Number(OpTypeError),
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TemplateError::Trailing(s) => write!(f, "trailing input in `{s}`"),
            TemplateError::UnexpectedEnd => f.write_str("unexpected end of template"),
            TemplateError::ExpectedOp => f.write_str("expected an op"),
            TemplateError::UnknownOp(name) => write!(f, "unknown op `{name}`"),
            TemplateError::NeedsRow(name) => write!(f, "`{name}` needs a row number"),
            TemplateError::MissingParen => f.write_str("missing `)`"),
            TemplateError::Arity { op, want, got } => {
                write!(f, "`{op}` takes {want} operand(s), got {got}")
            }
            TemplateError::Unexpected(tok) => write!(f, "unexpected `{tok}`"),
            TemplateError::Unbound(v) => write!(f, "unbound ?{v}"),
            TemplateError::NoContext(what) => write!(f, "{what} has no type from context"),
            TemplateError::Variable { var, error } => write!(f, "?{var}: {error}"),
            TemplateError::Op { op, error } => write!(f, "{op}: {error}"),
            TemplateError::Number(error) => write!(f, "{error}"),
        }
    }
}

impl Template {
    pub fn parse(s: &str) -> Result<Template, TemplateError> {
        let toks = tokenize(s);
        let mut pos = 0;
        let t = parse_at(&toks, &mut pos)?;
        if pos != toks.len() {
            return Err(TemplateError::Trailing(s.to_string()));
        }
        Ok(t)
    }

    /// Variables used, in order of first appearance.
    pub fn vars(&self, out: &mut Vec<String>) {
        match self {
            Template::Var(v) => {
                if !out.contains(v) {
                    out.push(v.clone());
                }
            }
            Template::Num(_) => {}
            Template::App(_, cs) => cs.iter().for_each(|c| c.vars(out)),
        }
    }

    /// Emit IR computing this template. `bind` maps template variables to
    /// IR values; `expected` is the type the result must have (the type of
    /// the operand whose cotangent this is).
    pub fn instantiate(
        &self,
        b: &mut Builder,
        bind: &dyn Fn(&str) -> Option<VarId>,
        expected: Option<&Type>,
    ) -> Result<VarId, TemplateError> {
        match self {
            Template::Var(v) => {
                let id = bind(v).ok_or_else(|| TemplateError::Unbound(v.clone()))?;
                match expected {
                    Some(t) if b.ty(id) != t => {
                        b.broadcast_to(id, t)
                            .map_err(|error| TemplateError::Variable {
                                var: v.clone(),
                                error,
                            })
                    }
                    _ => Ok(id),
                }
            }
            Template::Num(x) => {
                let t = expected.ok_or_else(|| TemplateError::NoContext(format!("number {x}")))?;
                let c = b.constant(t.dtype, *x);
                b.broadcast_to(c, t).map_err(TemplateError::Number)
            }
            Template::App(op, cs) => {
                let err = |error: OpTypeError| TemplateError::Op {
                    op: op.name(),
                    error,
                };
                match op {
                    Op::Bcast => {
                        let t =
                            expected.ok_or_else(|| TemplateError::NoContext("`bcast`".into()))?;
                        let s = cs[0].instantiate(b, bind, Some(&Type::scalar(t.dtype)))?;
                        b.push("", Op::Bcast, &[s], Some(t)).map_err(err)
                    }
                    Op::Zero => {
                        let t =
                            expected.ok_or_else(|| TemplateError::NoContext("`zero`".into()))?;
                        b.push("", Op::Zero, &[], Some(t)).map_err(err)
                    }
                    op if op.needs_annotation() => {
                        // Shape-changing ops with a result type: the context's.
                        let t = expected
                            .ok_or_else(|| TemplateError::NoContext(format!("`{}`", op.name())))?;
                        let mut args = Vec::with_capacity(cs.len());
                        for c in cs {
                            args.push(c.instantiate(b, bind, None)?);
                        }
                        b.push("", *op, &args, Some(t)).map_err(err)
                    }
                    op if !op.is_elementwise() || matches!(op, Op::Convert(_)) => {
                        // Reductions, `index`, `matmul`, `transpose`, and a
                        // conversion (to another element type): the
                        // operands' types come from the operands.
                        let mut args = Vec::with_capacity(cs.len());
                        for c in cs {
                            args.push(c.instantiate(b, bind, None)?);
                        }
                        b.push("", *op, &args, None).map_err(err)
                    }
                    _ => {
                        // Element-wise: operands share the result's type; if
                        // the context gives none, a variable operand does.
                        let ctx = match expected {
                            Some(t) => Some(t.clone()),
                            None => cs.iter().find_map(|c| match c {
                                Template::Var(v) => bind(v).map(|id| b.ty(id).clone()),
                                _ => None,
                            }),
                        };
                        let mut args = Vec::with_capacity(cs.len());
                        for c in cs {
                            args.push(c.instantiate(b, bind, ctx.as_ref())?);
                        }
                        b.push("", *op, &args, None).map_err(err)
                    }
                }
            }
        }
    }
}

/// Which of the op table's derivative rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// [`Op::vjp`].
    Vjp,
    /// [`Op::jvp`].
    Jvp,
}

/// An op's parsed templates for `rule`, one per operand (each as
/// [`Template::parse`] gives it, error included).
pub type Parsed = Arc<[Result<Template, TemplateError>]>;

/// The op's `rule` templates, parsed once per process and shared: AD meets
/// the same op in statement after statement. The op table's strings are a
/// function of the op alone (its payload included, as in `(pad 2 ?g)`), so
/// the op, payload and all, is the key.
pub fn parsed(op: Op, rule: Rule) -> Parsed {
    static CACHE: OnceLock<Mutex<HashMap<(Op, Rule), Parsed>>> = OnceLock::new();
    let mut cache = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    cache
        .entry((op, rule))
        .or_insert_with(|| {
            let strings = match rule {
                Rule::Vjp => op.vjp(),
                Rule::Jvp => op.jvp(),
            };
            strings.iter().map(|s| Template::parse(s)).collect()
        })
        .clone()
}

fn tokenize(s: &str) -> Vec<String> {
    s.replace('(', " ( ")
        .replace(')', " ) ")
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

fn parse_at(toks: &[String], pos: &mut usize) -> Result<Template, TemplateError> {
    let tok = toks.get(*pos).ok_or(TemplateError::UnexpectedEnd)?;
    *pos += 1;
    if tok == "(" {
        let name = toks.get(*pos).ok_or(TemplateError::ExpectedOp)?;
        *pos += 1;
        let mut op = Op::from_name(name).ok_or_else(|| TemplateError::UnknownOp(name.clone()))?;
        if op.payload().is_some() {
            let k = toks
                .get(*pos)
                .and_then(|t| t.parse::<u64>().ok())
                .ok_or_else(|| TemplateError::NeedsRow(name.clone()))?;
            *pos += 1;
            op = op.with_payload(k);
        }
        let mut cs = Vec::new();
        while toks.get(*pos).map(String::as_str) != Some(")") {
            if *pos >= toks.len() {
                return Err(TemplateError::MissingParen);
            }
            cs.push(parse_at(toks, pos)?);
        }
        *pos += 1;
        if cs.len() != op.arity() {
            return Err(TemplateError::Arity {
                op: name.clone(),
                want: op.arity(),
                got: cs.len(),
            });
        }
        Ok(Template::App(op, cs))
    } else if let Some(v) = tok.strip_prefix('?') {
        Ok(Template::Var(v.to_string()))
    } else if let Some(x) = parse_number(tok) {
        Ok(Template::Num(x))
    } else {
        Err(TemplateError::Unexpected(tok.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::ALL_OPS;

    #[test]
    fn every_vjp_template_parses_and_uses_known_vars() {
        for op in ALL_OPS {
            for t in op.vjp() {
                let parsed = Template::parse(&t).unwrap_or_else(|e| panic!("{op:?}: {e}"));
                let mut vs = Vec::new();
                parsed.vars(&mut vs);
                for v in vs {
                    let ok = match v.as_str() {
                        "g" | "out" => true,
                        "a" => op.arity() >= 1,
                        "b" => op.arity() >= 2,
                        "c" => op.arity() >= 3,
                        _ => false,
                    };
                    assert!(ok, "{op:?}: template `{t}` uses ?{v}");
                }
            }
        }
    }

    #[test]
    fn parsed_once_is_parsed_each_time() {
        let mut ops: Vec<Op> = ALL_OPS.to_vec();
        for op in ALL_OPS {
            if op.payload().is_some() {
                ops.extend([op.with_payload(0), op.with_payload(1), op.with_payload(7)]);
            }
        }
        for op in ops {
            for (rule, strings) in [(Rule::Vjp, op.vjp()), (Rule::Jvp, op.jvp())] {
                let want: Vec<_> = strings.iter().map(|s| Template::parse(s)).collect();
                assert_eq!(parsed(op, rule).to_vec(), want, "{op:?} {rule:?}");
                assert_eq!(parsed(op, rule).to_vec(), want, "{op:?} {rule:?} (cached)");
            }
        }
    }
}
