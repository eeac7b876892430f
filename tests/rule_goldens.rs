//! A golden test per rewrite rule, generated from the rule set itself (the
//! bundled rules with the fast-math ones, `RuleSet::bundled(true)`): for
//! every rule, a tiny IR function whose body is the rule's left side with
//! inputs for its variables (constants for the ones a `nonzero`/`pow2`
//! guard asks for; types that satisfy the guards, arrays `[N]` where the
//! left side allows, matrices `[N, M]` where only they type it),
//! saturated with the whole rule set the way `rewrites::saturate` does
//! it, then extracted under the default cost model. The test asserts the rule fired (egg's per-iteration `applied`
//! table holds its name) and compares the extracted program with
//! `tests/golden/rules/<rule name, `/` as `.`>.extracted`.
//!
//! Set `UPDATE_GOLDEN=1` to rewrite the expectations (and delete those of
//! rules that no longer exist), then read the diff; never edit them by hand
//! to make the test pass.

mod common;

use egg::{ENodeOrVar, Runner, StopReason, Symbol, Var};
use egrad::internals::extract::cost::CostModel;
use egrad::internals::extract::extract;
use egrad::internals::ir::{parse_functions, Builder, Function, VarId};
use egrad::internals::ops::{Lit, Op};
use egrad::internals::rewrites::lang::Node;
use egrad::internals::rewrites::rules::{Guard, Rule, RuleSet};
use egrad::internals::rewrites::{insert, Inserted, Limits};
use egrad::internals::types::{DType, Type};
use egrad::Span;
use indexmap::IndexMap;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

const DIR: &str = "tests/golden/rules";

/// The golden file of a rule (`mul-one-r/f32` → `mul-one-r.f32.extracted`;
/// rule names have no `.`, so this cannot collide).
fn golden_path(rule: &Rule) -> PathBuf {
    Path::new(DIR).join(format!("{}.extracted", rule.name.replace('/', ".")))
}

/// The dtype of the rule's values: a generic instance's, else a literal's,
/// else f64.
fn dtype_of(rule: &Rule) -> DType {
    rule.dtype.unwrap_or_else(|| {
        [&rule.lhs, &rule.rhs]
            .iter()
            .flat_map(|p| p.ast.as_ref())
            .find_map(|n| match n {
                ENodeOrVar::ENode(Node::Op(Op::Const(l), _)) => Some(l.dtype),
                _ => None,
            })
            .unwrap_or(DType::F64)
    })
}

fn guard_text(g: &Guard) -> String {
    let kind = match g {
        Guard::Nonzero(_) => "nonzero",
        Guard::Invertible(_) => "invertible",
        Guard::Pow2(_) => "pow2",
        Guard::Const(_) => "const",
        Guard::Value(_) => "value",
        Guard::Int(_) => "int",
        Guard::Even(_) => "even",
        Guard::Odd(_) => "odd",
        Guard::Scalar(_) => "scalar",
        Guard::Array(_) => "array",
        Guard::TypeOf(t, a) => return format!("type {t} {a}"),
    };
    format!("{kind} {}", g.var())
}

/// What a pattern node stands for while the function is built.
#[derive(Clone)]
enum Slot {
    Value(VarId),
    Type(Type),
}

/// The shape a variable of a left side is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Scalar,
    /// `[N]`
    Vector,
    /// `[N, M]` (for rules about matrices, such as `transpose`'s)
    Matrix,
}

/// The left side as a function, with `shape` choosing a scalar, a vector
/// `[N]` or a matrix `[N, M]` for each variable; `None` if that is
/// ill-typed or the guards exclude it.
fn build(rule: &Rule, shape: &BTreeMap<Var, Shape>) -> Option<Function> {
    let dtype = dtype_of(rule);
    let scalar = Type::scalar(dtype);
    let vector = Type::parse(&format!("{dtype}[N]")).expect("a type");
    let matrix = Type::parse(&format!("{dtype}[N, M]")).expect("a type");
    let ty = |v: &Var| match shape[v] {
        Shape::Scalar => scalar.clone(),
        Shape::Vector => vector.clone(),
        Shape::Matrix => matrix.clone(),
    };
    for g in &rule.guards {
        let is_array = shape[&g.var()] != Shape::Scalar;
        let ok = match g {
            Guard::Array(_) => is_array,
            Guard::Scalar(_)
            | Guard::Nonzero(_)
            | Guard::Invertible(_)
            | Guard::Pow2(_)
            | Guard::Const(_)
            | Guard::Int(_)
            | Guard::Even(_)
            | Guard::Odd(_) => !is_array,
            Guard::TypeOf(..) | Guard::Value(_) => true,
        };
        if !ok {
            return None;
        }
    }
    let ast = rule.lhs.ast.as_ref();
    // Type variables: the annotation child of an op that needs one.
    let mut type_vars = Vec::new();
    for n in ast {
        if let ENodeOrVar::ENode(Node::Op(op, ch)) = n {
            if let (true, Some(ENodeOrVar::Var(v))) = (
                op.needs_annotation(),
                ch.last().map(|c| &ast[usize::from(*c)]),
            ) {
                type_vars.push(*v);
            }
        }
    }
    let mut sizes = Vec::new();
    if shape.values().any(|s| *s != Shape::Scalar) {
        sizes.push("N".to_string());
    }
    if shape.values().any(|s| *s == Shape::Matrix) {
        sizes.push("M".to_string());
    }
    let mut b = Builder::new("rule", sizes);
    let mut slots: Vec<Slot> = Vec::with_capacity(ast.len());
    let mut bound: BTreeMap<Var, Slot> = BTreeMap::new();
    // Parameters first, in the order the variables appear.
    for v in rule.lhs.vars() {
        if type_vars.contains(&v) {
            bound.insert(v, Slot::Type(ty(&v)));
            continue;
        }
        let constant = rule
            .guards
            .iter()
            .find(|g| g.var() == v && g.needs_constant());
        if constant.is_none() {
            let name = v.to_string().trim_start_matches('?').to_string();
            bound.insert(v, Slot::Value(b.param(&name, ty(&v), Span::default())));
        }
    }
    for n in ast {
        let slot = match n {
            ENodeOrVar::Var(v) => match bound.get(v) {
                Some(s) => s.clone(),
                None => {
                    // A constant the guards accept.
                    let g = rule
                        .guards
                        .iter()
                        .find(|g| g.var() == *v && g.needs_constant())?;
                    let x = [3.0, 4.0, 0.5]
                        .into_iter()
                        .find(|x| g.accepts_constant(Lit::new(dtype, *x)))?;
                    let s = Slot::Value(b.constant(dtype, x));
                    bound.insert(*v, s.clone());
                    s
                }
            },
            ENodeOrVar::ENode(Node::Ty(t)) => Slot::Type(t.ty().clone()),
            ENodeOrVar::ENode(Node::Op(op, ch)) => {
                let args: Option<Vec<VarId>> = ch[..op.arity()]
                    .iter()
                    .map(|c| match &slots[usize::from(*c)] {
                        Slot::Value(v) => Some(*v),
                        Slot::Type(_) => None,
                    })
                    .collect();
                let annot = match op.needs_annotation() {
                    true => match &slots[usize::from(*ch.last()?)] {
                        Slot::Type(t) => Some(t.clone()),
                        Slot::Value(_) => return None,
                    },
                    false => None,
                };
                Slot::Value(b.push("", *op, &args?, annot.as_ref()).ok()?)
            }
            other => panic!("rule {}: `{other}` in a left side", rule.name),
        };
        slots.push(slot);
    }
    let Some(Slot::Value(root)) = slots.last().cloned() else {
        return None;
    };
    let f = b.finish(vec![root]);
    f.validate().ok()?;
    Some(f)
}

/// The left side as a function: the well-typed choice with the most array
/// variables, vectors before matrices (ties: the first in variable
/// order).
fn instantiate(rule: &Rule) -> Function {
    let vars = rule.lhs.vars();
    // Each choice: which variables are arrays (a mask), and which of those
    // are matrices.
    let mut choices: Vec<(u32, u32)> = (0..1u32 << vars.len())
        .flat_map(|arrays| {
            (0..1u32 << vars.len())
                .filter(move |m| m & !arrays == 0)
                .map(move |matrices| (arrays, matrices))
        })
        .collect();
    choices.sort_by_key(|&(a, m)| (std::cmp::Reverse(a.count_ones()), m.count_ones(), a, m));
    for (arrays, matrices) in choices {
        let shape = vars
            .iter()
            .enumerate()
            .map(|(k, v)| {
                let s = match (arrays & (1 << k) != 0, matrices & (1 << k) != 0) {
                    (false, _) => Shape::Scalar,
                    (true, false) => Shape::Vector,
                    (true, true) => Shape::Matrix,
                };
                (*v, s)
            })
            .collect();
        if let Some(f) = build(rule, &shape) {
            return f;
        }
    }
    panic!(
        "rule {}: no well-typed instance of its left side",
        rule.name
    )
}

/// Saturate like `rewrites::saturate` (same runner and limits, but no time
/// limit to speak of, so the result cannot depend on the machine), keeping
/// egg's iteration data. Returns the e-graph as `saturate` would, whether
/// the rule fired, and the stop reason.
fn saturate(
    f: &Function,
    rule: &Rule,
    rewrites: &[egg::Rewrite<Node, egrad::internals::rewrites::lang::Analysis>],
) -> (Inserted, bool, String) {
    let limits = Limits::default();
    let Inserted {
        egraph,
        roots,
        names,
        original,
    } = insert(f);
    let runner = Runner::default()
        .with_egraph(egraph)
        .with_node_limit(limits.nodes)
        .with_iter_limit(limits.iterations)
        .with_time_limit(Duration::from_secs(600))
        .run(rewrites);
    let name = Symbol::from(rule.name.as_str());
    let fired = runner
        .iterations
        .iter()
        .any(|it| it.applied.contains_key(&name));
    let stop = match &runner.stop_reason {
        Some(StopReason::Saturated) => "saturated".to_string(),
        Some(StopReason::IterationLimit(n)) => format!("iteration limit ({n})"),
        Some(StopReason::NodeLimit(n)) => format!("node limit ({n})"),
        Some(StopReason::TimeLimit(_)) => panic!("rule {}: saturation timed out", rule.name),
        Some(StopReason::Other(s)) => s.clone(),
        None => "not run".to_string(),
    };
    let eg = runner.egraph;
    // Canonical ids, as `saturate` leaves them.
    let roots = roots.iter().map(|r| eg.find(*r)).collect();
    let names = names.into_iter().fold(IndexMap::new(), |mut m, (id, n)| {
        m.entry(eg.find(id)).or_insert(n);
        m
    });
    let original = original
        .into_iter()
        .map(|(id, mut n)| {
            for c in egg::Language::children_mut(&mut n) {
                *c = eg.find(*c);
            }
            (eg.find(id), n)
        })
        .collect();
    (
        Inserted {
            egraph: eg,
            roots,
            names,
            original,
        },
        fired,
        stop,
    )
}

fn commented(text: &str) -> String {
    text.lines().map(|l| format!(";; {l}\n")).collect()
}

/// The golden text of one rule.
fn golden(
    rule: &Rule,
    rewrites: &[egg::Rewrite<Node, egrad::internals::rewrites::lang::Analysis>],
) -> String {
    let f = instantiate(rule);
    let (ins, fired, stop) = saturate(&f, rule, rewrites);
    assert!(
        fired,
        "rule {} ({}:{}) did not fire on its own left side:\n{f}",
        rule.name, rule.file, rule.line
    );
    let ex = extract(&ins, &f, &CostModel::default())
        .unwrap_or_else(|e| panic!("rule {}: extraction failed: {e}", rule.name));
    let out = ex.function.to_string();
    // The extracted program prints in the IR text form.
    let again = parse_functions(&out)
        .unwrap_or_else(|e| panic!("rule {}: {e}\n{out}", rule.name))
        .remove(0)
        .to_string();
    assert_eq!(
        again, out,
        "rule {}: print → parse → print differs",
        rule.name
    );
    let guards: Vec<String> = rule.guards.iter().map(guard_text).collect();
    let guards = if guards.is_empty() {
        String::new()
    } else {
        format!(" if {}", guards.join(" && "))
    };
    format!(
        ";; rule {} ({}:{})\n;; {} => {}{guards}\n;; input:\n{};; {stop}, extracted:\n{out}",
        rule.name,
        rule.file,
        rule.line,
        rule.lhs,
        rule.rhs,
        commented(&f.to_string()),
    )
}

#[test]
fn every_rule_has_a_golden() {
    let bless = std::env::var("UPDATE_GOLDEN").is_ok_and(|v| v == "1");
    let set = RuleSet::bundled(true).unwrap();
    let rewrites = set.rewrites();
    let mut failures = Vec::new();
    let mut expected = Vec::new();
    for rule in &set.rules {
        let text = golden(rule, &rewrites);
        assert_eq!(
            text,
            golden(rule, &rewrites),
            "rule {}: not deterministic",
            rule.name
        );
        let path = golden_path(rule);
        expected.push(path.clone());
        common::check_golden(&path, &text, bless, &mut failures);
    }
    // Goldens of rules that no longer exist.
    if let Ok(dir) = std::fs::read_dir(DIR) {
        for e in dir {
            let p = e.unwrap().path();
            if !expected.contains(&p) {
                if bless {
                    std::fs::remove_file(&p).unwrap();
                } else {
                    failures.push(format!(
                        "{} belongs to no rule (run with UPDATE_GOLDEN=1 to delete it)",
                        p.display()
                    ));
                }
            }
        }
    }
    assert!(!expected.is_empty());
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The point of the reassociation rules: a left-to-right product chain
/// x·x·…·x (how `iterate` and `x * x * x * x` come out) becomes squares of
/// squares under fast math, and stays as written without it.
#[test]
fn fast_math_squares_product_chains() {
    use egrad::internals::pipeline::{optimize_ir, Options};
    for (n, fast_muls) in [(4, 2), (8, 3), (6, 3), (20, 5)] {
        let mut text =
            String::from("fn chain[N](%x: f64[N]) -> f64[N] {\n  %p1: f64[N] = mul %x %x\n");
        for k in 2..n {
            text.push_str(&format!("  %p{k}: f64[N] = mul %p{} %x\n", k - 1));
        }
        text.push_str(&format!("  ret %p{}\n}}\n", n - 1));
        let f = &parse_functions(&text).unwrap()[0];
        let muls = |opts: &Options| {
            let g = optimize_ir(f, opts).unwrap().after;
            g.stmts.iter().filter(|s| s.op == Op::Mul).count()
        };
        assert_eq!(muls(&Options::default()), n - 1, "x^{n} without fast math");
        assert_eq!(
            muls(&Options::default().fast_math(true)),
            fast_muls,
            "x^{n} with fast math"
        );
    }
}
