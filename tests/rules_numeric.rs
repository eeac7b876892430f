//! Every rewrite rule checked by numbers: for each loaded rule (the bundled
//! set with the fast-math files), every well-typed assignment of
//! scalar/array shapes to its variables that its guards admit, both sides
//! evaluated with the op table's reference evaluator.
//!
//! - **Exact rules** (every file but the fast-math ones): special values
//!   (±0, ±1, ±inf, quiet and signaling NaN, tiny, huge) and random ones;
//!   both sides must agree bit for bit (NaN matches NaN). Rules about
//!   symbolic zeros compare numerically (±0 equal): a symbolic zero is not
//!   an IEEE value.
//! - **Fast-math rules** (`FAST_MATH_FILES`): finite inputs of moderate size
//!   (no overflow, underflow, inf or NaN: what fast math assumes); wherever
//!   the left side is finite (the rule's domain) the right side must be
//!   finite and agree within a relative tolerance, 1e-12 for f64 and 1e-5
//!   for f32, relative to the largest magnitude either side computes on the
//!   way (so `exp(x) - 1 => expm1(x)` is judged against `exp(x)`, not
//!   against the cancelled difference). At least a tenth of the samples
//!   must fall in the domain.
//! - Constants a guard asks for (`nonzero`, `pow2`) are sampled among the
//!   values the guard accepts.
//!
//! Further tests: every rule is well-typed (where its guards admit the left
//! side, the right side has the same type), each rule fires on its own left
//! side, and the checker rejects rules that are wrong.

use egg::{ENodeOrVar, Id, Language, Pattern, RecExpr, Var};
use egrad::internals::ops::{Lit, Op};
use egrad::internals::rewrites::lang::{Analysis, Node, EG};
use egrad::internals::rewrites::rules::{Guard, Rule, RuleSet, FAST_MATH_FILES};
use egrad::internals::types::value::Value;
use egrad::internals::types::{DType, Dim, Type};
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
    // A `type ?t ?a` variable takes the type of `?a` (`lhs_assignments`).
    type_vars.retain(|t| !rule.type_bindings().iter().any(|(u, _)| u == t));
    (value_vars, type_vars)
}

/// The dtypes a rule applies to: a generic rule's instance only to its own.
fn rule_dtypes(rule: &Rule) -> Vec<DType> {
    match rule.dtype {
        Some(d) => vec![d],
        None => {
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
    }
}

fn is_fast_math(rule: &Rule) -> bool {
    FAST_MATH_FILES.iter().any(|(f, _)| *f == rule.file)
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
                    ENodeOrVar::ENode(Node::Ty(t)) => Some(t.ty().clone()),
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

fn root(p: &Pattern<Node>) -> usize {
    p.ast.as_ref().len() - 1
}

/// Evaluate every node of a pattern (children come before parents); the
/// last value is the pattern's. Type-annotation nodes get an empty value.
/// `promote` evaluates an f32 pattern in f64 (its literals and inputs are
/// f32 values, so this is the same real computation, rounded less).
fn eval_all(
    p: &Pattern<Node>,
    env: &BTreeMap<Var, Bound>,
    vals: &BTreeMap<Var, Value>,
    promote: bool,
) -> Vec<Value> {
    let ast = p.ast.as_ref();
    let mut out: Vec<Value> = Vec::with_capacity(ast.len());
    for (i, n) in ast.iter().enumerate() {
        let v = match n {
            ENodeOrVar::Var(v) => match vals.get(v) {
                Some(x) if promote => x.cast(DType::F64),
                Some(x) => x.clone(),
                None => Value::f64(&[]),
            },
            ENodeOrVar::ENode(Node::Op(Op::Const(l), _)) if promote => {
                Value::scalar(DType::F64, l.value())
            }
            ENodeOrVar::ENode(Node::Op(op, ch)) => {
                let t = type_of(p, i, env).expect("typed");
                let args: Vec<&Value> = ch[..op.arity()]
                    .iter()
                    .map(|c| &out[usize::from(*c)])
                    .collect();
                let shape = literal_shape(&t);
                let dtype = if promote { DType::F64 } else { t.dtype };
                op.eval(&args, dtype, &shape)
            }
            ENodeOrVar::ENode(Node::Ty(_)) => Value::f64(&[]),
            other => panic!("cannot evaluate {other:?}"),
        };
        out.push(v);
    }
    out
}

const SIGNALING_NAN: f64 = f64::from_bits(0x7FF0_0000_0000_0001);

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
    SIGNALING_NAN,
    7.0,
    0.1,
];

/// Finite, moderate values for fast-math rules.
const MODERATE: &[f64] = &[
    0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -3.25, 3.0, 7.0, 0.1, -0.1, 1e-3,
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
    fn uniform(&mut self, half_width: f64) -> f64 {
        ((self.next() >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 2.0 * half_width
    }
    /// A special value a third of the time, else uniform in [-10, 10].
    fn sample(&mut self) -> f64 {
        let r = self.next();
        if r.is_multiple_of(3) {
            SPECIAL[(r / 3 % SPECIAL.len() as u64) as usize]
        } else {
            self.uniform(10.0)
        }
    }
    /// A moderate value a third of the time, else uniform in [-10, 10].
    fn sample_moderate(&mut self) -> f64 {
        let r = self.next();
        if r.is_multiple_of(3) {
            MODERATE[(r / 3 % MODERATE.len() as u64) as usize]
        } else {
            self.uniform(10.0)
        }
    }
    /// A constant the guard accepts: a sample or ±2^k, whichever passes.
    fn constant(&mut self, guard: &Guard, dtype: DType, fast: bool) -> f64 {
        if matches!(guard, Guard::Int(_) | Guard::Even(_) | Guard::Odd(_)) {
            // Exponents: small integers.
            for _ in 0..10_000 {
                let x = (1 + self.next() % 64) as f64;
                if guard.accepts_constant(Lit::new(dtype, x)) {
                    return x;
                }
            }
        }
        for _ in 0..10_000 {
            let x = match self.next() % 2 {
                0 if fast => self.sample_moderate(),
                0 => self.sample(),
                _ => {
                    let k = (self.next() % 2200) as i32 - 1100;
                    let s = if self.next().is_multiple_of(2) {
                        1.0
                    } else {
                        -1.0
                    };
                    s * 2f64.powi(k)
                }
            };
            let l = Lit::new(dtype, x);
            let moderate = l.value() == 0.0 || (1e-6..1e6).contains(&l.value().abs());
            if guard.accepts_constant(l) && (!fast || moderate) {
                return l.value();
            }
        }
        panic!("no constant satisfies {guard:?}");
    }
}

/// The guards on each variable.
fn guards_on(rule: &Rule, v: Var) -> Vec<&Guard> {
    rule.guards.iter().filter(|g| g.var() == v).collect()
}

/// The extents of `t`, whose dimensions are all literals (the
/// assignments give arrays literal shapes).
fn literal_shape(t: &Type) -> Vec<usize> {
    t.shape
        .iter()
        .map(|d| match d {
            Dim::Lit(n) => *n as usize,
            other => panic!("a sampled type has the size {other:?}"),
        })
        .collect()
}

/// Every scalar / length-3 shape assignment of each dtype the rule applies
/// to that its type guards admit and that types its left side; where none
/// does (a rule about matrices, such as `transpose`'s), every assignment
/// of scalars and 3 x 2 matrices.
fn lhs_assignments(rule: &Rule) -> Vec<BTreeMap<Var, Bound>> {
    let vectors = shaped_assignments(rule, &[Dim::Lit(3)]);
    if !vectors.is_empty() {
        return vectors;
    }
    shaped_assignments(rule, &[Dim::Lit(3), Dim::Lit(2)])
}

/// [`lhs_assignments`] with the arrays of shape `array_shape`.
fn shaped_assignments(rule: &Rule, array_shape: &[Dim]) -> Vec<BTreeMap<Var, Bound>> {
    let (vv, tv) = vars_of(rule);
    let n = vv.len() + tv.len();
    let mut out = Vec::new();
    for dtype in rule_dtypes(rule) {
        'mask: for mask in 0..(1u32 << n) {
            let mut env = BTreeMap::new();
            for (k, v) in vv.iter().chain(tv.iter()).enumerate() {
                let array = mask & (1 << k) != 0;
                for g in guards_on(rule, *v) {
                    let scalar_only = matches!(g, Guard::Scalar(_)) || g.needs_constant();
                    if (array && scalar_only) || (!array && matches!(g, Guard::Array(_))) {
                        continue 'mask;
                    }
                }
                let shape = if array { array_shape.to_vec() } else { vec![] };
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
            for (t, a) in rule.type_bindings() {
                if let Some(Bound::Val(ty)) = env.get(&a).cloned() {
                    env.insert(t, Bound::Ty(ty));
                }
            }
            if type_of(&rule.lhs, root(&rule.lhs), &env).is_some() {
                out.push(env);
            }
        }
    }
    out
}

/// The assignments where both sides have one type.
fn assignments(rule: &Rule) -> Vec<BTreeMap<Var, Bound>> {
    lhs_assignments(rule)
        .into_iter()
        .filter(|env| {
            type_of(&rule.lhs, root(&rule.lhs), env) == type_of(&rule.rhs, root(&rule.rhs), env)
        })
        .collect()
}

fn mentions_zero(rule: &Rule) -> bool {
    rule.lhs
        .ast
        .as_ref()
        .iter()
        .any(|n| matches!(n, ENodeOrVar::ENode(Node::Op(Op::Zero, _))))
}

/// Wherever the guards admit the left side, the right side has its type
/// (else the rule would put an ill-typed node in a class).
fn check_types(rule: &Rule) -> Result<(), String> {
    let envs = lhs_assignments(rule);
    if envs.is_empty() {
        return Err(format!(
            "rule {}: the left side is never well-typed",
            rule.name
        ));
    }
    for env in envs {
        let l = type_of(&rule.lhs, root(&rule.lhs), &env);
        let r = type_of(&rule.rhs, root(&rule.rhs), &env);
        if l != r {
            return Err(format!(
                "rule {} ({}:{}): with {env:?} the left side is {l:?} but the right side is {r:?} \
                 (a right-side literal needs `if scalar ?a`, or a broadcast)",
                rule.name, rule.file, rule.line
            ));
        }
    }
    Ok(())
}

/// Inputs for one sample.
fn inputs(
    rule: &Rule,
    env: &BTreeMap<Var, Bound>,
    rng: &mut Rng,
    fast: bool,
) -> BTreeMap<Var, Value> {
    let mut vals = BTreeMap::new();
    for (v, b) in env {
        let Bound::Val(t) = b else { continue };
        let constant = guards_on(rule, *v).into_iter().find(|g| g.needs_constant());
        let shape = literal_shape(t);
        let n: usize = shape.iter().product();
        let data: Vec<f64> = (0..n)
            .map(|_| match constant {
                Some(g) => rng.constant(g, t.dtype, fast),
                None if fast => rng.sample_moderate(),
                None => rng.sample(),
            })
            .collect();
        vals.insert(*v, Value::array(t.dtype, shape, data));
    }
    vals
}

const SAMPLES: usize = 300;

/// Exact rules: bit for bit on special and random values. Returns the
/// number of samples.
fn check_exact(rule: &Rule, rng: &mut Rng) -> Result<usize, String> {
    check_types(rule)?;
    let mut checked = 0;
    for env in &assignments(rule) {
        for _ in 0..SAMPLES {
            let vals = inputs(rule, env, rng, false);
            let l = eval_all(&rule.lhs, env, &vals, false)
                .pop()
                .expect("a root");
            let r = eval_all(&rule.rhs, env, &vals, false)
                .pop()
                .expect("a root");
            let same = if mentions_zero(rule) {
                l.shape == r.shape
                    && l.data
                        .iter()
                        .zip(&r.data)
                        .all(|(a, b)| a == b || (a.is_nan() && b.is_nan()))
            } else {
                l.bits_eq(&r)
            };
            if !same {
                return Err(format!(
                    "rule {} ({}:{}) changes values: inputs {vals:?}: left {l:?}, right {r:?}",
                    rule.name, rule.file, rule.line
                ));
            }
            checked += 1;
        }
    }
    Ok(checked)
}

fn l_dtype(values: &[Value]) -> DType {
    values.last().map_or(DType::F64, |v| v.dtype)
}

/// For each element of a result of `n` elements, the largest finite
/// magnitude any node computes for it (element-wise values element by
/// element; scalars and reductions count for every element).
fn scales(values: &[Value], n: usize, scale: &mut [f64]) {
    for v in values {
        let finite = |x: &f64| if x.is_finite() { x.abs() } else { 0.0 };
        if v.len() == n {
            for (s, x) in scale.iter_mut().zip(&v.data) {
                *s = s.max(finite(x));
            }
        } else {
            let m = v.data.iter().map(finite).fold(0.0, f64::max);
            for s in scale.iter_mut() {
                *s = s.max(m);
            }
        }
    }
}

/// Fast-math rules: within a relative tolerance wherever the left side is
/// finite. Returns the number of elements compared.
fn check_fast(rule: &Rule, rng: &mut Rng) -> Result<usize, String> {
    check_types(rule)?;
    let (mut compared, mut total) = (0usize, 0usize);
    for env in &assignments(rule) {
        for _ in 0..SAMPLES {
            let vals = inputs(rule, env, rng, true);
            let lv = eval_all(&rule.lhs, env, &vals, false);
            let rv = eval_all(&rule.rhs, env, &vals, false);
            // An f32 left side evaluated in f64: the right side may be
            // closer to it than the f32 left side is (log1p(expm1 x) => x).
            let precise = (l_dtype(&lv) == DType::F32)
                .then(|| eval_all(&rule.lhs, env, &vals, true).pop().expect("a root"));
            let (l, r) = (&lv[lv.len() - 1], &rv[rv.len() - 1]);
            let tol = match l.dtype {
                DType::F32 => 1e-5,
                DType::F64 | DType::I64 | DType::Bool => 1e-12,
            };
            let mut scale = vec![0.0; l.len()];
            scales(&lv, l.len(), &mut scale);
            scales(&rv, l.len(), &mut scale);
            if l.shape != r.shape {
                return Err(format!(
                    "rule {}: shapes {:?} and {:?}",
                    rule.name, l.shape, r.shape
                ));
            }
            for (i, ((a, b), s)) in l.data.iter().zip(&r.data).zip(&scale).enumerate() {
                total += 1;
                if !a.is_finite() {
                    continue;
                }
                compared += 1;
                let close = |a: f64| (a - b).abs() <= tol * s.max(a.abs()).max(b.abs());
                let ok = close(*a) || precise.as_ref().is_some_and(|p| close(p.data[i]));
                if !b.is_finite() || !ok {
                    return Err(format!(
                        "rule {} ({}:{}) is wrong: inputs {vals:?}: left {l:?}, right {r:?}",
                        rule.name, rule.file, rule.line
                    ));
                }
            }
        }
    }
    if compared * 10 < total {
        return Err(format!(
            "rule {}: only {compared} of {total} sampled elements are in its domain",
            rule.name
        ));
    }
    Ok(compared)
}

fn check(rule: &Rule, rng: &mut Rng) -> Result<usize, String> {
    if is_fast_math(rule) {
        check_fast(rule, rng)
    } else {
        check_exact(rule, rng)
    }
}

#[test]
fn every_rule_preserves_values() {
    let set = RuleSet::bundled(true).unwrap();
    let mut rng = Rng(42);
    let (mut exact, mut fast, mut samples) = (0, 0, 0);
    let mut failures = Vec::new();
    for rule in &set.rules {
        match check(rule, &mut rng) {
            Ok(n) => samples += n,
            Err(e) => failures.push(e),
        }
        if is_fast_math(rule) {
            fast += 1;
        } else {
            exact += 1;
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(fast > 0, "no fast-math rule was checked");
    eprintln!("checked {exact} exact and {fast} fast-math rules on {samples} samples");
}

#[test]
fn signaling_nan_is_sampled_and_catches_pow_zero() {
    // A signaling NaN survives as an f64 value (f32 values are held in f64
    // and converting quiets it).
    let v = Value::array(DType::F64, vec![], vec![SIGNALING_NAN]);
    assert_eq!(v.data[0].to_bits(), SIGNALING_NAN.to_bits());
    // IEEE 754 fixes pow(x, ±0) = 1 for quiet NaNs only: libm gives NaN for
    // a signaling one, which is why `pow-zero` is a fast-math rule.
    let mut set = RuleSet::default();
    set.add_file("wrong-exact.rules", "pow-zero: (pow ?a 0.0) => 1\n")
        .unwrap();
    let rule = set.rules.iter().find(|r| r.name == "pow-zero/f64").unwrap();
    let err = check(rule, &mut Rng(1)).unwrap_err();
    assert!(err.contains("NaN"), "{err}");
}

/// Rules that are wrong, each in the set it claims to belong to: the
/// checker must reject every one.
#[test]
fn checker_rejects_wrong_rules() {
    let exact_wrong = "\
add-zero:   (add ?a 0.0) => ?a
mul-zero:   (mul ?a 0.0) => 0.0
sub-self:   (sub ?a ?a) => 0.0 if scalar ?a
reassoc:    (mul (mul ?a ?b) ?c) => (mul ?a (mul ?b ?c))
pow-half:   (pow ?a 0.5) => (sqrt ?a)
div-three:  (div ?a ?c) => (mul ?a (div 1 ?c)) if nonzero ?c
exp-log:    (exp (log ?a)) => ?a
";
    let fast_wrong = "\
exp-mul:    (mul (exp ?a) (exp ?b)) => (exp (mul ?a ?b))
log1p-lin:  (log (add 1 ?a)) => ?a
sqrt-sq:    (sqrt (mul ?a ?a)) => ?a
sq-chain:   (mul (mul ?p ?a) ?a) => (mul ?p ?a)
sin-dbl:    (mul (sin ?a) (cos ?a)) => (sin (add ?a ?a)) if scalar ?a
pythag:     (add (mul (sin ?a) (sin ?a)) (mul (cos ?a) (cos ?a))) => 0.0 if scalar ?a
log-mul:    (log (mul ?a ?b)) => (add (log ?a) (log ?b))
pow-three:  (pow ?a 3) => (mul ?a ?a)
untyped:    (sub ?a ?a) => 0.0
div-const:  (div ?a ?c) => (mul ?a ?c) if nonzero ?c
";
    let mut rng = Rng(7);
    let fast_file = FAST_MATH_FILES[0].0;
    for (file, text) in [("wrong-exact.rules", exact_wrong), (fast_file, fast_wrong)] {
        let mut set = RuleSet::default();
        set.add_file(file, text).unwrap();
        // A wrong rule is caught when one of its dtype instances is (pow
        // in f32 and x*x agree except on some subnormal results).
        let mut caught: BTreeMap<&str, bool> = BTreeMap::new();
        for rule in &set.rules {
            assert_eq!(is_fast_math(rule), file == fast_file);
            let base = rule.name.split('/').next().unwrap();
            *caught.entry(base).or_default() |= check(rule, &mut rng).is_err();
        }
        assert_eq!(caught.len(), text.lines().count());
        for (name, c) in caught {
            assert!(c, "the checker accepts the wrong rule {name} ({file})");
        }
    }
}

#[test]
fn pow2_guard_accepts_exactly_the_invertible_powers_of_two() {
    let g = Guard::Pow2("?c".parse().unwrap());
    for (dtype, x, want) in [
        (DType::F64, 2.0, true),
        (DType::F64, -0.25, true),
        (DType::F64, 1.0, true),
        (DType::F64, 2f64.powi(1023), true),
        (DType::F64, 2f64.powi(-1022), true),
        (DType::F64, 2f64.powi(-1023), true),
        (DType::F64, 2f64.powi(-1024), false),
        (DType::F64, 3.0, false),
        (DType::F64, 0.0, false),
        (DType::F64, -0.0, false),
        (DType::F64, f64::INFINITY, false),
        (DType::F64, f64::NAN, false),
        (DType::F32, 2f64.powi(127), true),
        (DType::F32, 2f64.powi(-126), true),
        (DType::F32, 2f64.powi(-127), true),
        (DType::F32, 2f64.powi(-128), false),
        (DType::F32, 2f64.powi(-149), false),
        (DType::F32, 0.1, false),
    ] {
        assert_eq!(
            g.accepts_constant(Lit::new(dtype, x)),
            want,
            "{dtype} {x:e}"
        );
    }
}

/// The left side instantiated with inputs named after its variables, and
/// constants for the variables a guard wants constant.
fn instantiate(rule: &Rule) -> (RecExpr<Node>, Analysis) {
    let env = assignments(rule).remove(0);
    let mut analysis = Analysis::default();
    let mut expr: RecExpr<Node> = RecExpr::default();
    let mut ids: Vec<Id> = Vec::new();
    for n in rule.lhs.ast.as_ref() {
        let node = match n {
            ENodeOrVar::Var(v) => match &env[v] {
                Bound::Val(t) => {
                    match guards_on(rule, *v).into_iter().find(|g| g.needs_constant()) {
                        Some(g) => {
                            let x = [3.0, 4.0, 0.5]
                                .into_iter()
                                .find(|x| g.accepts_constant(Lit::new(t.dtype, *x)))
                                .expect("a constant for the guard");
                            Node::Op(Op::Const(Lit::new(t.dtype, x)), Default::default())
                        }
                        None => {
                            let name = v.to_string().trim_start_matches('?').to_string();
                            analysis.inputs.insert(name.clone(), t.clone());
                            Node::Input(name.into())
                        }
                    }
                }
                Bound::Ty(t) => Node::Ty(t.into()),
            },
            ENodeOrVar::ENode(e) => e.clone().map_children(|c| ids[usize::from(c)]),
        };
        ids.push(expr.add(node));
    }
    (expr, analysis)
}

#[test]
fn every_rule_fires() {
    let set = RuleSet::bundled(true).unwrap();
    let rewrites = set.rewrites();
    for rule in &set.rules {
        let (expr, analysis) = instantiate(rule);
        let mut eg = EG::new(analysis);
        eg.add_expr(&expr);
        let runner = egg::Runner::default()
            .with_egraph(eg)
            .with_iter_limit(5)
            .run(&rewrites);
        let applied = runner.iterations.iter().any(|it| {
            it.applied
                .contains_key(&egg::Symbol::from(rule.name.as_str()))
        });
        assert!(
            applied,
            "rule {} never fired on its own left side",
            rule.name
        );
    }
}
