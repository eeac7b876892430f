//! Loading rewrite rules from `rulesets/*.rules`.
//!
//! One rule a line: `name: LHS => RHS [if GUARD ?var ...]`, patterns in egg's
//! s-expression syntax over the op table's names; `#` starts a comment. A
//! number without a dtype suffix (`1`, `-0.0`) makes the rule generic: it is
//! instantiated once per float dtype (`mul-one/f32`, `mul-one/f64`). Every
//! line is validated at start-up (ops and arity, variables, guards, unique
//! names) and errors name `file:line`.

use super::lang::{Analysis, Node, EG};
use crate::lang::types::DType;
use crate::ops::{parse_number, Lit, Op};
use egg::{Condition, ConditionalApplier, Id, Pattern, Rewrite, Subst, Var};
use std::collections::HashSet;
use std::fmt;
use std::path::Path;

/// The rule files bundled into the binary (the same files as `rulesets/`).
pub const BUILTIN_FILES: &[(&str, &str)] = &[
    (
        "rulesets/algebra.rules",
        include_str!("../../rulesets/algebra.rules"),
    ),
    (
        "rulesets/zero.rules",
        include_str!("../../rulesets/zero.rules"),
    ),
    (
        "rulesets/broadcast.rules",
        include_str!("../../rulesets/broadcast.rules"),
    ),
];

/// A rule file is malformed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleError {
    pub file: String,
    pub line: usize,
    pub message: String,
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.message)
    }
}

/// A side condition on a matched variable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Guard {
    /// The class is a constant other than ±0 (and not NaN).
    Nonzero(Var),
    /// The class holds scalars.
    Scalar(Var),
    /// The class holds arrays.
    Array(Var),
}

impl Guard {
    fn var(&self) -> Var {
        match self {
            Guard::Nonzero(v) | Guard::Scalar(v) | Guard::Array(v) => *v,
        }
    }

    fn holds(&self, eg: &EG, subst: &Subst) -> bool {
        let Some(id) = subst.get(self.var()) else {
            return false;
        };
        let d = &eg[*id].data;
        match self {
            Guard::Nonzero(_) => d
                .konst
                .is_some_and(|l| l.value() != 0.0 && !l.value().is_nan()),
            Guard::Scalar(_) => d.ty.as_ref().is_some_and(|t| t.is_scalar()),
            Guard::Array(_) => d.ty.as_ref().is_some_and(|t| !t.is_scalar()),
        }
    }
}

/// All guards of a rule must hold.
#[derive(Clone, Debug)]
struct Guards(Vec<Guard>);

impl Condition<Node, Analysis> for Guards {
    fn check(&self, egraph: &mut EG, _eclass: Id, subst: &Subst) -> bool {
        self.0.iter().all(|g| g.holds(egraph, subst))
    }

    fn vars(&self) -> Vec<Var> {
        self.0.iter().map(Guard::var).collect()
    }
}

/// One loaded (dtype-instantiated) rule.
#[derive(Clone, Debug)]
pub struct Rule {
    pub name: String,
    pub file: String,
    pub line: usize,
    pub lhs: Pattern<Node>,
    pub rhs: Pattern<Node>,
    pub guards: Vec<Guard>,
}

impl Rule {
    pub fn rewrite(&self) -> Rewrite<Node, Analysis> {
        let applier = ConditionalApplier {
            condition: Guards(self.guards.clone()),
            applier: self.rhs.clone(),
        };
        // Validated at load time: variables of the RHS are bound by the LHS.
        Rewrite::new(self.name.clone(), self.lhs.clone(), applier)
            .unwrap_or_else(|e| panic!("rule {} was validated at load: {e}", self.name))
    }
}

/// A validated set of rules.
#[derive(Clone, Debug, Default)]
pub struct RuleSet {
    pub rules: Vec<Rule>,
}

/// Bundled rules that are not exact in IEEE arithmetic (they change
/// rounding, or results near overflow): loaded only when fast math is asked
/// for (`--fast-math`, `Options::fast_math`).
pub const FAST_MATH_FILES: &[(&str, &str)] = &[];

impl RuleSet {
    /// The rules bundled with egrad.
    pub fn builtin() -> Result<RuleSet, RuleError> {
        Self::bundled(false)
    }

    /// The bundled rules, with the fast-math ones when `fast_math`.
    pub fn bundled(fast_math: bool) -> Result<RuleSet, RuleError> {
        let mut set = RuleSet::default();
        let extra: &[(&str, &str)] = if fast_math { FAST_MATH_FILES } else { &[] };
        for (file, text) in BUILTIN_FILES.iter().chain(extra) {
            set.add_file(file, text)?;
        }
        Ok(set)
    }

    /// Every `*.rules` file of a directory, in file-name order.
    pub fn load_dir(dir: &Path) -> Result<RuleSet, RuleError> {
        let io_err = |e: std::io::Error| RuleError {
            file: dir.display().to_string(),
            line: 0,
            message: e.to_string(),
        };
        let mut paths: Vec<_> = std::fs::read_dir(dir)
            .map_err(io_err)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "rules"))
            .collect();
        paths.sort();
        let mut set = RuleSet::default();
        for p in paths {
            let text = std::fs::read_to_string(&p).map_err(io_err)?;
            set.add_file(&p.display().to_string(), &text)?;
        }
        Ok(set)
    }

    /// Parse and validate one file's rules and add them.
    pub fn add_file(&mut self, file: &str, text: &str) -> Result<(), RuleError> {
        let mut names: HashSet<String> = self.rules.iter().map(|r| r.name.clone()).collect();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let err = |m: String| RuleError {
                file: file.to_string(),
                line: i + 1,
                message: m,
            };
            for rule in parse_line(line).map_err(err)? {
                let rule = Rule {
                    file: file.to_string(),
                    line: i + 1,
                    ..rule
                };
                if !names.insert(rule.name.clone()) {
                    return Err(err(format!("duplicate rule name `{}`", rule.name)));
                }
                self.rules.push(rule);
            }
        }
        Ok(())
    }

    pub fn rewrites(&self) -> Vec<Rewrite<Node, Analysis>> {
        self.rules.iter().map(Rule::rewrite).collect()
    }
}

fn tokens(s: &str) -> Vec<String> {
    s.replace('(', " ( ")
        .replace(')', " ) ")
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// Does the pattern text contain dtype-generic numbers?
fn has_generic_numbers(toks: &[String]) -> bool {
    toks.iter().any(|t| parse_number(t).is_some())
}

fn instantiate(toks: &[String], dtype: DType) -> String {
    toks.iter()
        .map(|t| match parse_number(t) {
            Some(x) => Lit::new(dtype, x).to_string(),
            None => t.clone(),
        })
        .collect::<Vec<_>>()
        .join(" ")
        .replace("( ", "(")
        .replace(" )", ")")
}

fn parse_line(line: &str) -> Result<Vec<Rule>, String> {
    let (name, rest) = line.split_once(':').ok_or("expected `name: LHS => RHS`")?;
    let name = name.trim();
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(format!(
            "bad rule name `{name}` (letters, digits, `-`, `_`)"
        ));
    }
    let (lhs, rest) = rest.split_once("=>").ok_or("expected `=>`")?;
    let (rhs, guard_text) = match rest.split_once(" if ") {
        Some((r, g)) => (r, Some(g)),
        None => (rest, None),
    };
    let guards = match guard_text {
        Some(g) => parse_guards(g)?,
        None => Vec::new(),
    };
    let (lt, rt) = (tokens(lhs), tokens(rhs));
    if lt.is_empty() || rt.is_empty() {
        return Err("empty pattern".into());
    }
    let generic = has_generic_numbers(&lt) || has_generic_numbers(&rt);
    let variants: Vec<(String, String, String)> = if generic {
        [DType::F32, DType::F64]
            .iter()
            .map(|d| {
                (
                    format!("{name}/{d}"),
                    instantiate(&lt, *d),
                    instantiate(&rt, *d),
                )
            })
            .collect()
    } else {
        vec![(
            name.to_string(),
            lhs.trim().to_string(),
            rhs.trim().to_string(),
        )]
    };
    let mut out = Vec::new();
    for (n, l, r) in variants {
        let lhs: Pattern<Node> = l
            .parse()
            .map_err(|e| format!("left side `{}`: {e}", lhs.trim()))?;
        let rhs: Pattern<Node> = r
            .parse()
            .map_err(|e| format!("right side `{}`: {e}", rhs.trim()))?;
        if lhs.ast.as_ref().len() == 1 && lhs.vars().len() == 1 {
            return Err("a left side that is a lone variable matches everything".into());
        }
        let bound = lhs.vars();
        for v in rhs.vars() {
            if !bound.contains(&v) {
                return Err(format!(
                    "`{v}` on the right side is not bound by the left side"
                ));
            }
        }
        for g in &guards {
            if !bound.contains(&g.var()) {
                return Err(format!(
                    "guard variable `{}` is not bound by the left side",
                    g.var()
                ));
            }
        }
        check_no_input_names(&lhs).and(check_no_input_names(&rhs))?;
        out.push(Rule {
            name: n,
            file: String::new(),
            line: 0,
            lhs,
            rhs,
            guards: guards.clone(),
        });
    }
    Ok(out)
}

/// Rules are about ops, not about particular programs: a bare name in a
/// pattern is almost always a misspelt op or a variable missing its `?`.
fn check_no_input_names(p: &Pattern<Node>) -> Result<(), String> {
    for n in p.ast.as_ref() {
        if let egg::ENodeOrVar::ENode(Node::Bwd(_) | Node::Stash(_)) = n {
            return Err(format!(
                "`{n}` is a residual marker of the store-or-recompute choice, not an op for rules"
            ));
        }
        if let egg::ENodeOrVar::ENode(Node::Input(name)) = n {
            return Err(format!(
                "`{name}` is not an op (known: {}); variables start with `?`",
                crate::ops::ALL_OPS
                    .iter()
                    .map(Op::name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    Ok(())
}

fn parse_guards(text: &str) -> Result<Vec<Guard>, String> {
    let mut out = Vec::new();
    for part in text.split("&&") {
        let words: Vec<&str> = part.split_whitespace().collect();
        let [kind, var] = words.as_slice() else {
            return Err(format!("guard `{}`: expected `KIND ?var`", part.trim()));
        };
        let v: Var = var
            .parse()
            .map_err(|_| format!("guard `{}`: `{var}` is not a `?variable`", part.trim()))?;
        out.push(match *kind {
            "nonzero" => Guard::Nonzero(v),
            "scalar" => Guard::Scalar(v),
            "array" => Guard::Array(v),
            other => {
                return Err(format!(
                    "unknown guard `{other}` (known: nonzero, scalar, array)"
                ))
            }
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_rules_load() {
        let set = RuleSet::builtin().unwrap();
        assert!(set.rules.len() > 10);
        assert!(set.rules.iter().any(|r| r.name == "mul-one-r/f32"));
    }

    #[test]
    fn errors_name_file_and_line() {
        let mut s = RuleSet::default();
        let e = s
            .add_file(
                "x.rules",
                "# ok\nfine: (neg (neg ?a)) => ?a\nbad: (frob ?a) => ?a\n",
            )
            .unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.to_string().starts_with("x.rules:3: "), "{e}");
        for (text, want) in [
            ("r: (neg ?a) => ?b", "not bound"),
            ("r: (neg ?a) => ?a if shiny ?a", "unknown guard"),
            ("r: (add ?a) => ?a", "takes 2"),
            ("r: (neg a) => a", "variables start with `?`"),
            ("r (neg ?a) => ?a", "expected `name"),
            ("r: ?a => (neg (neg ?a))", "lone variable"),
        ] {
            let e = RuleSet::default().add_file("y.rules", text).unwrap_err();
            assert!(e.message.contains(want), "{text}: {e}");
        }
        let e = RuleSet::default()
            .add_file(
                "z.rules",
                "r: (neg (neg ?a)) => ?a\nr: (neg (neg ?a)) => ?a\n",
            )
            .unwrap_err();
        assert!(e.message.contains("duplicate"), "{e}");
    }
}
