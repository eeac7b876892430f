//! Rules are type-checked when loaded: a rule that rewrites a value into
//! one of another type (`(add ?a ?b) => (sum ?a)`) would merge two classes
//! of different types, and the program extracted from them would not type
//! (an internal error far from the rule). The check types both sides as
//! the e-class analysis types their instances (the op table's type rules),
//! for every combination of sample types of the left side's variables
//! (scalars, vectors and matrices of every element type; constants where a
//! guard needs one; type literals where an op takes one), and wants the
//! right side to type, with the left side's type, wherever the left side
//! types and the rule may fire.

use super::lang::Node;
use super::rules::{dtype_allows, Guard, Rule};
use crate::ops::Lit;
use crate::types::{DType, Dim, Type};
use egg::{ENodeOrVar, Id, Var};

/// More combinations than this are not tried (in the order of the
/// samples): a rule with that many variables is not written by hand.
const MAX_COMBINATIONS: usize = 100_000;

/// The types a variable of a rule takes in the check.
fn sample_types() -> Vec<Type> {
    let (n, m) = (Dim::Param("N".into()), Dim::Param("M".into()));
    let shapes = [vec![], vec![n.clone()], vec![m.clone()], vec![n, m]];
    [DType::F64, DType::F32, DType::I64, DType::Bool]
        .iter()
        .flat_map(|&d| shapes.iter().map(move |s| Type::array(d, s.clone())))
        .collect()
}

/// What a variable of the left side stands for in the check.
#[derive(Clone, Debug)]
enum Sample {
    /// A value of this type (an input).
    Value(Type),
    /// A scalar constant.
    Constant(Lit),
    /// A type literal (the annotation of `bcast`, `zero`, ...).
    Type(Type),
}

impl Sample {
    fn show(&self) -> String {
        match self {
            Sample::Value(t) | Sample::Type(t) => t.to_string(),
            Sample::Constant(l) => l.to_string(),
        }
    }
}

/// The variables of `rule`'s left side that stand for type literals: the
/// annotation operand of an op that takes one.
fn type_vars(rule: &Rule) -> Vec<Var> {
    let ast = rule.lhs.ast.as_ref();
    let mut out = Vec::new();
    for node in ast {
        if let ENodeOrVar::ENode(Node::Op(op, ch)) = node {
            if op.needs_annotation() {
                if let Some(ENodeOrVar::Var(v)) = ch.last().map(|c| &ast[usize::from(*c)]) {
                    out.push(*v);
                }
            }
        }
    }
    out
}

/// The samples of variable `v` of `rule`.
fn samples_of(rule: &Rule, v: Var, is_type: bool, types: &[Type]) -> Vec<Sample> {
    let guards: Vec<&Guard> = rule.guards.iter().filter(|g| g.var() == v).collect();
    if is_type {
        return types.iter().cloned().map(Sample::Type).collect();
    }
    if guards.iter().any(|g| g.needs_constant()) {
        let dtypes = match rule.dtype {
            Some(d) => vec![d],
            None => vec![DType::F64, DType::F32],
        };
        return dtypes
            .into_iter()
            .flat_map(|d| [2.0, 3.0, 0.5].map(|x| Lit::new(d, x)))
            .filter(|&l| guards.iter().all(|g| g.accepts_constant(l)))
            .take(1)
            .map(Sample::Constant)
            .collect();
    }
    types
        .iter()
        .filter(|t| {
            guards.iter().all(|g| match g {
                Guard::Scalar(_) => t.is_scalar(),
                Guard::Array(_) => !t.is_scalar(),
                _ => true,
            })
        })
        .cloned()
        .map(Sample::Value)
        .collect()
}

/// Check that `rule` rewrites every value it may match into one of the
/// same type. The error names the variables' types that show it.
pub(crate) fn check_rule_types(rule: &Rule) -> Result<(), String> {
    let types = sample_types();
    let typed_later: Vec<Var> = rule.type_bindings().iter().map(|(t, _)| *t).collect();
    let tvars = type_vars(rule);
    let vars: Vec<Var> = rule
        .lhs
        .vars()
        .into_iter()
        .filter(|v| !typed_later.contains(v))
        .collect();
    let choices: Vec<Vec<Sample>> = vars
        .iter()
        .map(|&v| samples_of(rule, v, tvars.contains(&v), &types))
        .collect();
    if choices.iter().any(Vec::is_empty) {
        return Ok(());
    }
    let mut digit = vec![0usize; vars.len()];
    for _ in 0..MAX_COMBINATIONS {
        let pick: Vec<&Sample> = digit.iter().zip(&choices).map(|(&k, c)| &c[k]).collect();
        check_one(rule, &vars, &pick)?;
        // The next combination, odometer order.
        let mut k = 0;
        loop {
            let Some(d) = digit.get_mut(k) else {
                return Ok(());
            };
            *d += 1;
            if *d < choices[k].len() {
                break;
            }
            *d = 0;
            k += 1;
        }
    }
    Ok(())
}

/// What a pattern node is: `(its type, the type literal it denotes)`,
/// each where it has one; None for a node that does not type.
type Typed = Option<(Option<Type>, Option<Type>)>;

/// The types of a pattern's nodes, bottom-up, its variables standing for
/// `var_of`: what the e-class analysis computes for the instantiated
/// pattern ([`crate::rewrites::lang`]'s `make`): an op's type from its
/// operands' and, for ops that take one, the type literal last.
fn pattern_types(ast: &egg::PatternAst<Node>, var_of: &dyn Fn(Var) -> Typed) -> Vec<Typed> {
    let mut out: Vec<Typed> = Vec::with_capacity(ast.as_ref().len());
    for node in ast.as_ref() {
        let t = match node {
            ENodeOrVar::Var(v) => var_of(*v),
            ENodeOrVar::ENode(Node::Ty(t)) => Some((None, Some(t.ty().clone()))),
            ENodeOrVar::ENode(Node::Op(op, ch)) => {
                let ty_of = |c: &Id| out[usize::from(*c)].as_ref().and_then(|t| t.0.clone());
                let annot = if op.needs_annotation() {
                    ch.last()
                        .and_then(|c| out[usize::from(*c)].as_ref().and_then(|t| t.1.clone()))
                } else {
                    None
                };
                let operands: Option<Vec<Type>> =
                    ch[..op.operand_count(ch.len())].iter().map(ty_of).collect();
                operands.and_then(|tys| {
                    let refs: Vec<&Type> = tys.iter().collect();
                    op.result_type(&refs, annot.as_ref())
                        .ok()
                        .map(|t| (Some(t), None))
                })
            }
            ENodeOrVar::ENode(Node::Bwd(_) | Node::Stash(_) | Node::Input(_)) => None,
        };
        out.push(t);
    }
    out
}

/// One combination: `vars[k]` stands for `pick[k]`.
fn check_one(rule: &Rule, vars: &[Var], pick: &[&Sample]) -> Result<(), String> {
    let sample = |v: Var| -> Typed {
        let k = vars.iter().position(|&x| x == v)?;
        Some(match pick[k] {
            Sample::Value(t) => (Some(t.clone()), None),
            Sample::Constant(l) => (Some(Type::scalar(l.dtype)), None),
            Sample::Type(t) => (None, Some(t.clone())),
        })
    };
    let root_type = |types: &[Typed]| types.last().cloned().flatten().and_then(|t| t.0);
    let lhs = pattern_types(&rule.lhs.ast, &sample);
    let Some(lty) = root_type(&lhs) else {
        return Ok(());
    };
    if !dtype_allows(rule.dtype, Some(&lty)) {
        return Ok(());
    }
    let bindings = rule.type_bindings();
    let var_of = |v: Var| -> Typed {
        match bindings.iter().find(|(t, _)| *t == v) {
            Some((_, a)) => Some((None, sample(*a)?.0)),
            None => sample(v),
        }
    };
    let rhs = pattern_types(&rule.rhs.ast, &var_of);
    let rty = root_type(&rhs);
    if rty.as_ref() == Some(&lty) {
        return Ok(());
    }
    let with: Vec<String> = vars
        .iter()
        .zip(pick)
        .map(|(v, s)| format!("{v}: {}", s.show()))
        .collect();
    let right = match rty {
        Some(t) => format!("is {t}"),
        None => format!("does not type{}", first_untyped(&rule.rhs.ast, &rhs)),
    };
    Err(format!(
        "rule `{}` changes a value's type: with {}, its left side is {lty} but its right side {right}",
        rule.name,
        with.join(", ")
    ))
}

/// Where the right side stops typing: the first op whose operands all
/// have types but which does not take them.
fn first_untyped(ast: &egg::PatternAst<Node>, types: &[Typed]) -> String {
    let value = |c: &Id| types[usize::from(*c)].as_ref().and_then(|t| t.0.clone());
    for (node, t) in ast.as_ref().iter().zip(types) {
        if let (ENodeOrVar::ENode(Node::Op(op, ch)), None) = (node, t) {
            let operands: Option<Vec<String>> = ch[..op.operand_count(ch.len())]
                .iter()
                .map(|c| value(c).map(|t| t.to_string()))
                .collect();
            if let Some(operands) = operands {
                return format!(": `{}` does not take ({})", op.name(), operands.join(", "));
            }
        }
    }
    String::new()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rewrites::rules::{RuleSet, BUILTIN_FILES, FAST_MATH_FILES};

    fn one(text: &str) -> Result<(), String> {
        let mut set = RuleSet::default();
        set.add_file("t.rules", text).map_err(|e| e.to_string())?;
        set.rules.iter().try_for_each(check_rule_types)
    }

    #[test]
    fn every_bundled_rule_types() {
        for (file, text) in BUILTIN_FILES.iter().chain(FAST_MATH_FILES) {
            let mut set = RuleSet::default();
            set.add_file(file, text).unwrap();
            for r in &set.rules {
                assert_eq!(check_rule_types(r), Ok(()), "{file}:{}", r.line);
            }
        }
    }

    #[test]
    fn a_rule_that_changes_the_type_is_refused() {
        let e = one("bad: (add ?a ?b) => (sum ?a)").unwrap_err();
        assert!(e.contains("rule `bad` changes a value's type"), "{e}");
        assert!(e.contains("`sum` does not take (f64)"), "{e}");
        let e = one("cast: (mul ?a ?b) => (toi64 ?a)").unwrap_err();
        assert!(e.contains("right side is i64"), "{e}");
        let e = one("mm: (add ?a ?b) => (matmul ?a ?b)").unwrap_err();
        assert!(e.contains("does not type"), "{e}");
        // Generic literals: the instance for each dtype is checked.
        let e = one("scale: (mul ?a 2) => (sum ?a)").unwrap_err();
        assert!(e.contains("scale/"), "{e}");
    }

    #[test]
    fn well_typed_rules_pass() {
        one("c: (mul ?a ?b) => (mul ?b ?a)").unwrap();
        one("n: (neg (neg ?a)) => ?a").unwrap();
        one("b: (add ?a ?a) => (mul ?a (bcast 2 ?t)) if array ?a && type ?t ?a").unwrap();
    }
}
