//! Loading rewrite rules from `rulesets/*.rules`.
//!
//! One rule a line: `name: LHS => RHS [if GUARD ?var ...]`, patterns in egg's
//! s-expression syntax over the op table's names; `#` starts a comment. A
//! number without a dtype suffix (`1`, `-0.0`) makes the rule generic: it is
//! instantiated once per float dtype (`mul-one/f32`, `mul-one/f64`). Every
//! line is validated at start-up (ops and arity, variables, guards, unique
//! names) and errors name `file:line`.

use super::lang::{Analysis, Node, TypeLit, EG};
use super::rule_types::check_rule_types;
use crate::ops::{parse_number, Lit, Op};
use crate::types::{DType, Type};
use egg::{Applier, Condition, ConditionalApplier, Id, Pattern, Rewrite, Subst, Var};
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
    (
        "rulesets/strength.rules",
        include_str!("../../rulesets/strength.rules"),
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
        match self.line {
            // About the file or folder as a whole.
            0 => write!(f, "{}: {}", self.file, self.message),
            line => write!(f, "{}:{line}: {}", self.file, self.message),
        }
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
    /// The class is a constant ±2^k whose reciprocal ±2^-k is representable
    /// in its dtype (subnormals included), so `x / c` and `x * (1/c)` round
    /// the same real number: dividing by it is multiplying by its reciprocal,
    /// bit for bit.
    Pow2(Var),
    /// The class is a finite constant whose reciprocal, rounded to its
    /// dtype, is finite and normal: dividing by it is multiplying by that
    /// reciprocal within rounding (`x / 1e-320` is not `x · inf`).
    Invertible(Var),
    /// The class is a finite constant.
    Const(Var),
    /// The class is not a constant, neither a scalar nor an array whose
    /// elements are all one constant (a broadcast constant): rules of real
    /// arithmetic that would otherwise also fire on constants (and fold new
    /// ones without end, until rounding or overflow makes two different
    /// constants meet) apply to computed values only.
    Value(Var),
    /// The class is a constant integer `n` with `1 ≤ n ≤ MAX_POWER`: an
    /// exponent that powers may gather into.
    Int(Var),
    /// An [`Guard::Int`] that is even and at least 2.
    Even(Var),
    /// An [`Guard::Int`] that is odd and at least 3.
    Odd(Var),
    /// `type ?t ?a`: not a condition but a binding, so a right side can
    /// name the type of a value (a broadcast constant of `?a`'s shape):
    /// `?t` (first) is bound to the type of `?a` (second). Holds whenever
    /// `?a` has a type.
    TypeOf(Var, Var),
}

/// The largest exponent the power guards accept: powers gather and split
/// only up to it, so saturation adds O(log n) classes per power.
pub const MAX_POWER: f64 = 64.0;

impl Guard {
    /// The variable the guard is about.
    pub fn var(&self) -> Var {
        match self {
            Guard::Nonzero(v)
            | Guard::Invertible(v)
            | Guard::Scalar(v)
            | Guard::Array(v)
            | Guard::Pow2(v)
            | Guard::Const(v)
            | Guard::Value(v)
            | Guard::Int(v)
            | Guard::Even(v)
            | Guard::Odd(v)
            | Guard::TypeOf(_, v) => *v,
        }
    }

    /// Does the guard only hold for a constant (then
    /// [`Guard::accepts_constant`] says which)?
    pub fn needs_constant(&self) -> bool {
        match self {
            Guard::Nonzero(_)
            | Guard::Invertible(_)
            | Guard::Pow2(_)
            | Guard::Const(_)
            | Guard::Int(_)
            | Guard::Even(_)
            | Guard::Odd(_) => true,
            Guard::Scalar(_) | Guard::Array(_) | Guard::Value(_) | Guard::TypeOf(..) => false,
        }
    }

    /// Does a scalar constant satisfy the guard? (A type guard: does a
    /// scalar satisfy it.)
    pub fn accepts_constant(&self, l: Lit) -> bool {
        let x = l.value();
        match self {
            Guard::Nonzero(_) => x != 0.0 && !x.is_nan(),
            Guard::Invertible(_) => {
                let r = l.dtype.round(1.0 / x);
                let smallest = match l.dtype {
                    DType::F32 => f32::MIN_POSITIVE as f64,
                    _ => f64::MIN_POSITIVE,
                };
                x.is_finite() && r.is_finite() && r.abs() >= smallest
            }
            Guard::Pow2(_) => {
                // `x` holds a value of `l.dtype`; every f32 value is a
                // normal f64, so only f64 subnormals need the second test.
                let bits = x.abs().to_bits();
                let power_of_two = if bits >> 52 == 0 {
                    bits.count_ones() == 1
                } else {
                    bits & ((1u64 << 52) - 1) == 0
                };
                // 1/x is exact in f64 unless it overflows; it must also be
                // a value of the dtype (not rounded to 0 or inf in f32).
                let r = 1.0 / x;
                x.is_finite() && power_of_two && r.is_finite() && l.dtype.round(r) == r
            }
            Guard::Const(_) => x.is_finite(),
            Guard::Int(_) => x.fract() == 0.0 && (1.0..=MAX_POWER).contains(&x),
            Guard::Even(_) => x % 2.0 == 0.0 && (2.0..=MAX_POWER).contains(&x),
            Guard::Odd(_) => x % 2.0 == 1.0 && (3.0..=MAX_POWER).contains(&x),
            Guard::Scalar(_) | Guard::TypeOf(..) => true,
            Guard::Array(_) | Guard::Value(_) => false,
        }
    }

    fn holds(&self, eg: &EG, subst: &Subst) -> bool {
        let Some(id) = subst.get(self.var()) else {
            return false;
        };
        let d = &eg[*id].data;
        match self {
            Guard::Nonzero(_)
            | Guard::Invertible(_)
            | Guard::Pow2(_)
            | Guard::Const(_)
            | Guard::Int(_)
            | Guard::Even(_)
            | Guard::Odd(_) => d.konst.is_some_and(|l| self.accepts_constant(l)),
            Guard::Scalar(_) => d.ty.as_ref().is_some_and(|t| t.is_scalar()),
            Guard::Array(_) => d.ty.as_ref().is_some_and(|t| !t.is_scalar()),
            Guard::TypeOf(..) => d.ty.is_some(),
            Guard::Value(_) => d.uniform().is_none(),
        }
    }
}

/// May a rule instance of `dtype` (None: not generic) rewrite a class of
/// type `ty`? An instance only its dtype's values; any rule never `i64` or
/// `bool` ones: the rules are real (floating-point) arithmetic, so
/// integers (indices, counts) are left as written.
pub(crate) fn dtype_allows(dtype: Option<DType>, ty: Option<&Type>) -> bool {
    match dtype {
        Some(d) => ty.is_some_and(|t| t.dtype == d),
        None => ty.is_none_or(|t| !t.dtype.is_int()),
    }
}

/// All guards of a rule must hold, and the matched class must have the
/// dtype of a generic rule's instance (and never `i64`: integer division
/// and overflow make real arithmetic's identities false).
#[derive(Clone, Debug)]
struct Guards {
    guards: Vec<Guard>,
    dtype: Option<DType>,
}

impl Condition<Node, Analysis> for Guards {
    fn check(&self, egraph: &mut EG, eclass: Id, subst: &Subst) -> bool {
        dtype_allows(self.dtype, egraph[eclass].data.ty.as_ref())
            && self.guards.iter().all(|g| g.holds(egraph, subst))
    }

    fn vars(&self) -> Vec<Var> {
        self.guards.iter().map(Guard::var).collect()
    }
}

/// A right side whose type variables (`type ?t ?a`) are bound to the type
/// of a matched value before it is instantiated.
#[derive(Clone, Debug)]
struct Rhs {
    pattern: Pattern<Node>,
    types: Vec<(Var, Var)>,
}

impl Applier<Node, Analysis> for Rhs {
    fn apply_one(
        &self,
        egraph: &mut EG,
        eclass: Id,
        subst: &Subst,
        searcher_ast: Option<&egg::PatternAst<Node>>,
        rule_name: egg::Symbol,
    ) -> Vec<Id> {
        let mut subst = subst.clone();
        for (t, a) in &self.types {
            // The guard checked that `?a` is typed.
            let Some(ty) = subst.get(*a).and_then(|id| egraph[*id].data.ty.as_ref()) else {
                return Vec::new();
            };
            let id = egraph.add(Node::Ty(TypeLit::new(ty)));
            subst.insert(*t, id);
        }
        self.pattern
            .apply_one(egraph, eclass, &subst, searcher_ast, rule_name)
    }

    fn get_pattern_ast(&self) -> Option<&egg::PatternAst<Node>> {
        Applier::<Node, Analysis>::get_pattern_ast(&self.pattern)
    }

    fn vars(&self) -> Vec<Var> {
        let bound: Vec<Var> = self.types.iter().map(|(t, _)| *t).collect();
        let mut vars: Vec<Var> = Applier::<Node, Analysis>::vars(&self.pattern);
        vars.retain(|v| !bound.contains(v));
        vars.extend(self.types.iter().map(|(_, a)| *a));
        vars
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
    /// The instance of a generic rule (`name/f32`) applies only to values of
    /// its dtype: a literal its right side introduces has that dtype even
    /// when nothing on the left side pins it.
    pub dtype: Option<DType>,
}

impl Rule {
    /// The `type ?t ?a` bindings: `(?t, ?a)`.
    pub fn type_bindings(&self) -> Vec<(Var, Var)> {
        self.guards
            .iter()
            .filter_map(|g| match g {
                Guard::TypeOf(t, a) => Some((*t, *a)),
                _ => None,
            })
            .collect()
    }

    pub fn rewrite(&self) -> Rewrite<Node, Analysis> {
        let applier = ConditionalApplier {
            condition: Guards {
                guards: self.guards.clone(),
                dtype: self.dtype,
            },
            applier: Rhs {
                pattern: self.rhs.clone(),
                types: self.type_bindings(),
            },
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
pub const FAST_MATH_FILES: &[(&str, &str)] = &[(
    "rulesets/fastmath.rules",
    include_str!("../../rulesets/fastmath.rules"),
)];

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

    /// Every `*.rules` file of a directory, in file-name order; a file
    /// named like one of [`FAST_MATH_FILES`] (`fastmath.rules`) only when
    /// `fast_math`.
    pub fn load_dir(dir: &Path, fast_math: bool) -> Result<RuleSet, RuleError> {
        let is_fast_math = |p: &Path| {
            FAST_MATH_FILES
                .iter()
                .any(|(f, _)| Path::new(f).file_name() == p.file_name())
        };
        let io_err = |e: std::io::Error| RuleError {
            file: dir.display().to_string(),
            line: 0,
            message: e.to_string(),
        };
        let mut paths: Vec<_> = std::fs::read_dir(dir)
            .map_err(io_err)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "rules"))
            .filter(|p| fast_math || !is_fast_math(p))
            .collect();
        paths.sort();
        let mut set = RuleSet::default();
        for p in paths {
            let text = read_rules_file(&p).map_err(|message| RuleError {
                file: p.display().to_string(),
                line: 0,
                message,
            })?;
            set.add_file(&p.display().to_string(), &text)?;
        }
        // The bundled rules are checked by a test; a folder's when loaded.
        for r in &set.rules {
            check_rule_types(r).map_err(|message| RuleError {
                file: r.file.clone(),
                line: r.line,
                message,
            })?;
        }
        // Optimizing with no rules at all is never what a folder of rules
        // meant: a wrong folder, or files not named `*.rules`.
        if set.rules.is_empty() {
            return Err(RuleError {
                file: dir.display().to_string(),
                line: 0,
                message: format!(
                    "no rules here: a rules folder holds files named `*.rules` with one rule or more ({})",
                    if fast_math {
                        "fastmath.rules included"
                    } else {
                        "fastmath.rules only with --fast-math"
                    }
                ),
            });
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
    let variants: Vec<(String, String, String, Option<DType>)> = if generic {
        [DType::F32, DType::F64]
            .iter()
            .map(|d| {
                (
                    format!("{name}/{d}"),
                    instantiate(&lt, *d),
                    instantiate(&rt, *d),
                    Some(*d),
                )
            })
            .collect()
    } else {
        vec![(
            name.to_string(),
            lhs.trim().to_string(),
            rhs.trim().to_string(),
            None,
        )]
    };
    let mut out = Vec::new();
    for (n, l, r, dtype) in variants {
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
        let typed: Vec<Var> = guards
            .iter()
            .filter_map(|g| match g {
                Guard::TypeOf(t, _) => Some(*t),
                _ => None,
            })
            .collect();
        for t in &typed {
            if bound.contains(t) {
                return Err(format!(
                    "`type {t} ...` binds `{t}`, which the left side binds already"
                ));
            }
        }
        for v in rhs.vars() {
            if !bound.contains(&v) && !typed.contains(&v) {
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
        check_guards(&lhs, &guards)?;
        out.push(Rule {
            name: n,
            file: String::new(),
            line: 0,
            lhs,
            rhs,
            guards: guards.clone(),
            dtype,
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

/// Guards that can never hold are mistakes: a guard on a type annotation
/// (the last child of `bcast`, `zero`, ...), or a variable guarded both as
/// an array and as a scalar (a constant is a scalar).
fn check_guards(lhs: &Pattern<Node>, guards: &[Guard]) -> Result<(), String> {
    let ast = lhs.ast.as_ref();
    for n in ast {
        let egg::ENodeOrVar::ENode(Node::Op(op, ch)) = n else {
            continue;
        };
        if !op.needs_annotation() {
            continue;
        }
        let Some(egg::ENodeOrVar::Var(t)) = ch.last().map(|c| &ast[usize::from(*c)]) else {
            continue;
        };
        if guards.iter().any(|g| g.var() == *t) {
            return Err(format!(
                "guard on `{t}`: it is the type annotation of `{}`, not a value",
                op.name()
            ));
        }
    }
    for g in guards {
        let scalar = matches!(g, Guard::Scalar(_)) || g.needs_constant();
        if scalar
            && guards
                .iter()
                .any(|h| h.var() == g.var() && matches!(h, Guard::Array(_)))
        {
            return Err(format!(
                "guards on `{}` contradict each other: an array is never a scalar or a constant",
                g.var()
            ));
        }
    }
    Ok(())
}

fn parse_guards(text: &str) -> Result<Vec<Guard>, String> {
    let mut out = Vec::new();
    for part in text.split("&&") {
        let words: Vec<&str> = part.split_whitespace().collect();
        if let ["type", t, a] = words.as_slice() {
            let var = |w: &str| -> Result<Var, String> {
                w.parse()
                    .map_err(|_| format!("`type {t} {a}`: `{w}` is not a `?variable`"))
            };
            out.push(Guard::TypeOf(var(t)?, var(a)?));
            continue;
        }
        if words.first() == Some(&"type") {
            return Err(format!(
                "guard `{}`: expected `type ?t ?a` (?t names the type of ?a)",
                part.trim()
            ));
        }
        let [kind, var] = words.as_slice() else {
            return Err(format!("guard `{}`: expected `KIND ?var`", part.trim()));
        };
        let v: Var = var
            .parse()
            .map_err(|_| format!("guard `{}`: `{var}` is not a `?variable`", part.trim()))?;
        out.push(match *kind {
            "nonzero" => Guard::Nonzero(v),
            "invertible" => Guard::Invertible(v),
            "scalar" => Guard::Scalar(v),
            "array" => Guard::Array(v),
            "pow2" => Guard::Pow2(v),
            "const" => Guard::Const(v),
            "value" => Guard::Value(v),
            "int" => Guard::Int(v),
            "even" => Guard::Even(v),
            "odd" => Guard::Odd(v),
            other => {
                return Err(format!(
                    "unknown guard `{other}` (known: nonzero, invertible, pow2, const, value, int, even, odd, scalar, array, type ?t ?a)"
                ))
            }
        });
    }
    Ok(out)
}

/// A rules file's text: a regular file, its size within the memory
/// limit. A `*.rules` link to `/dev/zero` was read until the allocator
/// failed or the kernel killed the process (issue 38).
fn read_rules_file(p: &Path) -> Result<String, String> {
    let meta = std::fs::metadata(p).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    crate::ir::memory::check(Some(meta.len()), "the rules file")?;
    std::fs::read_to_string(p).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_folder_is_the_bundled_set_with_or_without_fast_math() {
        let names = |s: RuleSet| s.rules.into_iter().map(|r| r.name).collect::<Vec<_>>();
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("rulesets");
        for fast in [false, true] {
            let mut a = names(RuleSet::load_dir(&dir, fast).unwrap());
            let mut b = names(RuleSet::bundled(fast).unwrap());
            a.sort();
            b.sort();
            assert_eq!(a, b, "fast math: {fast}");
        }
    }

    #[test]
    fn a_rules_folder_without_rules_is_an_error() {
        let dir = std::env::temp_dir().join(format!("egrad-no-rules-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let e = RuleSet::load_dir(&dir, false).unwrap_err();
        assert!(e.to_string().contains("no rules here"), "{e}");
        // Files of another name, only comments, or fast math alone.
        std::fs::write(
            dir.join("algebra.txt"),
            "add-comm: (add ?a ?b) => (add ?b ?a)\n",
        )
        .unwrap();
        std::fs::write(dir.join("empty.rules"), "# nothing yet\n").unwrap();
        std::fs::write(
            dir.join("fastmath.rules"),
            "fm: (add ?a ?b) => (add ?b ?a)\n",
        )
        .unwrap();
        assert!(RuleSet::load_dir(&dir, false).is_err());
        assert_eq!(RuleSet::load_dir(&dir, true).unwrap().rules.len(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

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
            (
                "r: (mul ?a (bcast ?c ?t)) => ?a if pow2 ?t",
                "type annotation",
            ),
            (
                "r: (neg ?a) => (neg ?a) if array ?a && nonzero ?a",
                "contradict",
            ),
            ("r: (neg ?a) => ?a if shiny ?a", "pow2"),
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

    #[test]
    fn generic_instances_rewrite_only_their_dtype() {
        // Nothing on the left side types the `0.0`: without the dtype
        // check, `sub-self/f32` would put an f32 zero in an f64 class.
        let mut set = RuleSet::default();
        set.add_file("t.rules", "sub-self: (sub ?a ?a) => 0.0 if scalar ?a\n")
            .unwrap();
        let mut a = Analysis::default();
        a.inputs
            .insert("x".into(), crate::types::Type::scalar(DType::F64));
        let mut eg = EG::new(a);
        let e: egg::RecExpr<Node> = "(sub x x)".parse().unwrap();
        let id = eg.add_expr(&e);
        let runner = egg::Runner::default().with_egraph(eg).run(&set.rewrites());
        let applied = |n: &str| {
            runner
                .iterations
                .iter()
                .any(|it| it.applied.contains_key(&egg::Symbol::from(n)))
        };
        assert!(applied("sub-self/f64"));
        assert!(!applied("sub-self/f32"));
        let eg = &runner.egraph;
        assert_eq!(eg[eg.find(id)].data.konst, Some(Lit::new(DType::F64, 0.0)));
    }

    #[test]
    fn exponent_guards_accept_small_integers() {
        let v: Var = "?n".parse().unwrap();
        let ok = |g: Guard, x: f64| g.accepts_constant(Lit::new(DType::F64, x));
        assert!(ok(Guard::Int(v), 1.0) && ok(Guard::Int(v), 64.0));
        assert!(!ok(Guard::Int(v), 0.0) && !ok(Guard::Int(v), 65.0) && !ok(Guard::Int(v), 2.5));
        assert!(ok(Guard::Even(v), 2.0) && !ok(Guard::Even(v), 3.0) && !ok(Guard::Even(v), 0.0));
        assert!(ok(Guard::Odd(v), 3.0) && !ok(Guard::Odd(v), 1.0) && !ok(Guard::Odd(v), 4.0));
        assert!(ok(Guard::Const(v), -0.5) && !ok(Guard::Const(v), f64::INFINITY));
        assert!(!ok(Guard::Value(v), 1.0));
    }

    #[test]
    fn type_bindings_name_a_new_variable() {
        let ok =
            parse_line("r: (add ?a ?a) => (mul ?a (bcast 2.0f64 ?t)) if array ?a && type ?t ?a");
        let rule = &ok.unwrap()[0];
        assert_eq!(
            rule.type_bindings(),
            vec![("?t".parse().unwrap(), "?a".parse().unwrap())]
        );
        // Without the binding, `?t` is unbound; binding a left-side variable
        // is refused.
        let e = parse_line("r: (add ?a ?a) => (mul ?a (bcast 2.0f64 ?t)) if array ?a").unwrap_err();
        assert!(e.contains("not bound"), "{e}");
        let e = parse_line("r: (mul ?a (bcast ?c ?t)) => ?a if type ?t ?a").unwrap_err();
        assert!(e.contains("binds `?t`"), "{e}");
        let e = parse_line("r: (add ?a ?a) => ?a if type ?t").unwrap_err();
        assert!(e.contains("type ?t ?a"), "{e}");
    }

    #[test]
    fn pow2_accepts_invertible_powers_of_two() {
        let g = Guard::Pow2("?c".parse().unwrap());
        let ok = |d: DType, x: f64| g.accepts_constant(Lit::new(d, x));
        assert!(ok(DType::F64, 0.5) && ok(DType::F64, -8.0) && ok(DType::F64, 2f64.powi(-1023)));
        assert!(!ok(DType::F64, 2f64.powi(-1074)) && !ok(DType::F64, 6.0) && !ok(DType::F64, 0.0));
        assert!(ok(DType::F32, 2f64.powi(127)) && !ok(DType::F32, 2f64.powi(-140)));
    }

    #[test]
    fn invertible_needs_a_finite_normal_reciprocal() {
        let g = Guard::Invertible("?c".parse().unwrap());
        let ok = |d: DType, x: f64| g.accepts_constant(Lit::new(d, x));
        assert!(ok(DType::F64, 3.0) && ok(DType::F64, -1e-300) && ok(DType::F64, 1e300));
        assert!(!ok(DType::F64, 1e-320) && !ok(DType::F64, 0.0) && !ok(DType::F64, f64::NAN));
        assert!(!ok(DType::F64, f64::INFINITY) && !ok(DType::F64, 1.7e308));
        assert!(ok(DType::F32, 1e30) && !ok(DType::F32, 1e-39) && !ok(DType::F32, 1e38));
    }
}
