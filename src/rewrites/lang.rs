//! The IR as an egg [`Language`], and the e-class analysis that carries each
//! class's type, folds constants with exact IEEE semantics and absorbs
//! symbolic zeros.

use crate::ops::{Lit, Op};
use crate::types::value::Value;
use crate::types::Type;
use egg::{DidMerge, EGraph, Id, Language, Symbol};
use indexmap::IndexMap;
use smallvec::SmallVec;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Mutex, OnceLock};

/// An e-node: an op from the op table, a function input, a type literal
/// (the annotation child of `bcast` and `zero`), or one of the two residual
/// markers.
///
/// In the e-graph, `bcast` has two children `(bcast x f32[N])` and `zero`
/// one `(zero f32[N])`; every other op has its IR operands.
///
/// **Residual markers.** The pullback reads a primal value `p` as `(bwd p)`:
/// "p, as the pullback obtains it". Its class holds the two ways to obtain
/// it: `(stash p)` (the forward pass stores `p` in the residual buffer; it
/// costs λ · bytes) and, added by the recompute rewrite, `(op (bwd a) ...)`
/// (recompute `p` from its operands as the pullback obtains them). `(bwd x)`
/// of a function input is the input read in place (free); any other `bwd`
/// node is not a program and cannot be extracted. Without the marker a
/// recomputed term would be the primal term itself and the choice would
/// vanish.
///
/// **Interning.** Names and type literals are interned ([`Symbol`],
/// [`TypeLit`]) so that cloning a node, comparing it and taking its
/// [`Language::discriminant`] (hot in saturation) never allocates. The
/// order ([`Ord`], which sorts a class's nodes and so decides which of two
/// equal-cost nodes extraction meets first) compares names by their text and
/// types structurally, never by interning order, which depends on what the
/// process interned before.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Node {
    Op(Op, SmallVec<[Id; 2]>),
    Input(Symbol),
    Ty(TypeLit),
    Bwd([Id; 1]),
    Stash([Id; 1]),
}

impl Node {
    /// Position of the variant, in declaration order.
    fn rank(&self) -> u8 {
        match self {
            Node::Op(..) => 0,
            Node::Input(_) => 1,
            Node::Ty(_) => 2,
            Node::Bwd(_) => 3,
            Node::Stash(_) => 4,
        }
    }
}

/// The order a derived `Ord` would give with `Input(String)` and
/// `Ty(Type)`: variant, then fields; names by text, not by symbol id.
impl Ord for Node {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Node::Op(a, ca), Node::Op(b, cb)) => a.cmp(b).then_with(|| ca.cmp(cb)),
            (Node::Input(a), Node::Input(b)) if a == b => Ordering::Equal,
            (Node::Input(a), Node::Input(b)) => a.as_str().cmp(b.as_str()),
            (Node::Ty(a), Node::Ty(b)) => a.cmp(b),
            (Node::Bwd(a), Node::Bwd(b)) | (Node::Stash(a), Node::Stash(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl PartialOrd for Node {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A type literal, interned: a `Copy` handle to one process-wide copy of
/// the [`Type`] and of its token (the text in an s-expression).
///
/// Equal types share one entry, so equality and hashing look at the entry's
/// address and token only; [`Ord`] compares the types themselves, as
/// `Type`'s derived order does, so no order depends on interning order.
#[derive(Clone, Copy)]
pub struct TypeLit(&'static TypeEntry);

struct TypeEntry {
    ty: Type,
    token: Symbol,
}

impl TypeLit {
    /// The interned literal of `t` (its entry is made on first use).
    pub fn new(t: &Type) -> TypeLit {
        static TABLE: OnceLock<Mutex<HashMap<Type, &'static TypeEntry>>> = OnceLock::new();
        let mut table = TABLE
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(e) = table.get(t) {
            return TypeLit(e);
        }
        // Leaked on purpose: a process meets few distinct types, and a
        // `'static` entry makes the handle `Copy`.
        let e: &'static TypeEntry = Box::leak(Box::new(TypeEntry {
            ty: t.clone(),
            token: Symbol::from(type_token(t)),
        }));
        table.insert(t.clone(), e);
        TypeLit(e)
    }

    /// The type.
    pub fn ty(self) -> &'static Type {
        &self.0.ty
    }

    /// The token (`f64[N]`), interned.
    pub fn token(self) -> Symbol {
        self.0.token
    }
}

impl From<Type> for TypeLit {
    fn from(t: Type) -> TypeLit {
        TypeLit::new(&t)
    }
}

impl From<&Type> for TypeLit {
    fn from(t: &Type) -> TypeLit {
        TypeLit::new(t)
    }
}

impl PartialEq for TypeLit {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for TypeLit {}

impl Hash for TypeLit {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.token.hash(state)
    }
}

impl Ord for TypeLit {
    fn cmp(&self, other: &Self) -> Ordering {
        if self == other {
            Ordering::Equal
        } else {
            self.0.ty.cmp(&other.0.ty)
        }
    }
}

impl PartialOrd for TypeLit {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Debug for TypeLit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.ty.fmt(f)
    }
}

/// Number of e-graph children of an op (IR operands plus a type child).
pub fn egraph_arity(op: &Op) -> usize {
    op.arity() + usize::from(op.needs_annotation())
}

/// Text form of a type inside an s-expression (no spaces).
pub fn type_token(t: &Type) -> String {
    t.to_string().replace(' ', "")
}

impl Language for Node {
    type Discriminant = (u8, Option<Op>, Option<Symbol>);

    fn discriminant(&self) -> Self::Discriminant {
        match self {
            Node::Op(op, _) => (0, Some(*op), None),
            Node::Input(n) => (1, None, Some(*n)),
            Node::Ty(t) => (2, None, Some(t.token())),
            Node::Bwd(_) => (3, None, None),
            Node::Stash(_) => (4, None, None),
        }
    }

    fn matches(&self, other: &Self) -> bool {
        match (self, other) {
            (Node::Op(a, ca), Node::Op(b, cb)) => a == b && ca.len() == cb.len(),
            (Node::Input(a), Node::Input(b)) => a == b,
            (Node::Ty(a), Node::Ty(b)) => a == b,
            (Node::Bwd(_), Node::Bwd(_)) | (Node::Stash(_), Node::Stash(_)) => true,
            _ => false,
        }
    }

    fn children(&self) -> &[Id] {
        match self {
            Node::Op(_, c) => c,
            Node::Bwd(c) | Node::Stash(c) => c,
            Node::Input(_) | Node::Ty(_) => &[],
        }
    }

    fn children_mut(&mut self) -> &mut [Id] {
        match self {
            Node::Op(_, c) => c,
            Node::Bwd(c) | Node::Stash(c) => c,
            Node::Input(_) | Node::Ty(_) => &mut [],
        }
    }
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Node::Op(Op::Const(l), _) => write!(f, "{l}"),
            Node::Op(op, _) => f.write_str(op.name()),
            Node::Input(n) => f.write_str(n.as_str()),
            Node::Ty(t) => f.write_str(t.token().as_str()),
            Node::Bwd(_) => f.write_str("bwd"),
            Node::Stash(_) => f.write_str("stash"),
        }
    }
}

/// Why a pattern token is not an e-node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeParseError {
    /// An op with the wrong number of operands (as the e-graph counts
    /// them: types and static payloads included).
    Arity {
        /// The op's name.
        op: String,
        /// How many it takes.
        want: usize,
        /// How many it was given.
        got: usize,
    },
    /// A name with operands that is no op.
    UnknownOp(String),
    /// A leaf that is no op, literal, type or name.
    NotALeaf(String),
}

impl fmt::Display for NodeParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeParseError::Arity { op, want, got } => {
                write!(f, "`{op}` takes {want} operand(s) here, got {got}")
            }
            NodeParseError::UnknownOp(op) => write!(f, "unknown op `{op}`"),
            NodeParseError::NotALeaf(op) => {
                write!(f, "`{op}` is not an op, a literal, a type or a name")
            }
        }
    }
}

impl egg::FromOp for Node {
    type Error = NodeParseError;

    fn from_op(op: &str, children: Vec<Id>) -> Result<Self, Self::Error> {
        if let Some(o) = Op::from_name(op) {
            let want = egraph_arity(&o);
            if children.len() != want {
                return Err(NodeParseError::Arity {
                    op: op.to_string(),
                    want,
                    got: children.len(),
                });
            }
            return Ok(Node::Op(o, children.into()));
        }
        if let ("bwd" | "stash", [c]) = (op, children.as_slice()) {
            return Ok(if op == "bwd" {
                Node::Bwd([*c])
            } else {
                Node::Stash([*c])
            });
        }
        if !children.is_empty() {
            return Err(NodeParseError::UnknownOp(op.to_string()));
        }
        if let Some(l) = Lit::parse_suffixed(op) {
            return Ok(Node::Op(Op::Const(l), SmallVec::new()));
        }
        if let Some(t) = Type::parse(op) {
            return Ok(Node::Ty(t.into()));
        }
        if op
            .chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
            && op
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
        {
            return Ok(Node::Input(Symbol::from(op)));
        }
        Err(NodeParseError::NotALeaf(op.to_string()))
    }
}

/// Per-class facts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Data {
    /// Type of the values in the class (None for a type-literal class).
    pub ty: Option<Type>,
    /// The type a type-literal class denotes.
    pub denotes: Option<Type>,
    /// The class's value is this scalar constant.
    pub konst: Option<Lit>,
    /// The class is an array whose every element is this constant: a
    /// broadcast constant, or an element-wise op on such arrays and scalar
    /// constants. No node is added for it (the `bcast-*` rules fold
    /// broadcasts); the `value` guard reads it, so that rules of real
    /// arithmetic never fire on a constant, whatever its shape.
    pub splat: Option<Lit>,
    /// The class is a symbolic zero tangent.
    pub zero: bool,
}

impl Data {
    /// The one number every element of the class's value is, if known: a
    /// scalar constant or an array's splat.
    pub fn uniform(&self) -> Option<Lit> {
        self.konst.or(self.splat)
    }
}

/// The analysis: types of inputs are given; everything else is derived
/// from the op table's type rule and evaluator.
#[derive(Clone, Debug, Default)]
pub struct Analysis {
    pub inputs: IndexMap<String, Type>,
    /// The first merge of two classes holding different constants (scalars
    /// or splats), if any. Every class holds equal values, so two
    /// different constants in one class mean the rules proved a false
    /// equation: no program may be extracted from such an e-graph. Exact
    /// rules never do (they hold bit for bit, and constant folding is the
    /// op table's evaluator); rules of real arithmetic can, through the
    /// rounding of folded constants (`c + 1` folds to `c` past 2^53, `c · c`
    /// to infinity), and one such merge collapses everything computed from
    /// those constants. The pipeline checks it after saturation.
    pub conflict: Option<(Lit, Lit)>,
    /// A merge of +0 and -0 (kept apart from `conflict`: fast math ignores
    /// the sign of zero, exact rules must not).
    pub zero_sign_conflict: bool,
    /// How many constants were folded to an infinity or NaN from finite
    /// ones (`3 · 1e308`). The program as written may do it (then it does
    /// at run time too); a rule of real arithmetic that makes such a fold
    /// (reassociating `x · 1e308 + 2 · x · 1e308` into `x · (3 · 1e308)`)
    /// changes the result, which the pipeline checks by counting.
    pub overflows: usize,
}

/// Two constants that are the same value: equal bits, or both NaN (NaN
/// payloads are not modelled).
fn same_constant(a: Lit, b: Lit) -> bool {
    a == b || (a.value().is_nan() && b.value().is_nan() && a.dtype == b.dtype)
}

pub type EG = EGraph<Node, Analysis>;

impl egg::Analysis<Node> for Analysis {
    type Data = Data;

    fn make(egraph: &mut EG, enode: &Node, _id: Id) -> Data {
        match enode {
            Node::Ty(t) => Data {
                ty: None,
                denotes: Some(t.ty().clone()),
                konst: None,
                splat: None,
                zero: false,
            },
            Node::Input(n) => Data {
                ty: egraph.analysis.inputs.get(n.as_str()).cloned(),
                denotes: None,
                konst: None,
                splat: None,
                zero: false,
            },
            // The same value as the child, however it is obtained.
            Node::Bwd([c]) | Node::Stash([c]) => Data {
                denotes: None,
                ..egraph[*c].data.clone()
            },
            Node::Op(op, ch) => {
                let ir_args = &ch[..op.operand_count(ch.len())];
                let annot = if op.needs_annotation() {
                    ch.last().and_then(|c| egraph[*c].data.denotes.clone())
                } else {
                    None
                };
                let tys: Option<Vec<Type>> =
                    ir_args.iter().map(|c| egraph[*c].data.ty.clone()).collect();
                let ty = tys.and_then(|tys| {
                    let refs: Vec<&Type> = tys.iter().collect();
                    op.result_type(&refs, annot.as_ref()).ok()
                });
                let scalar = ty.as_ref().is_some_and(Type::is_scalar);
                let folded = || {
                    op.is_elementwise()
                        .then(|| fold(egraph, *op, ir_args, ty.as_ref()))
                        .flatten()
                };
                let konst = match op {
                    Op::Const(l) => Some(*l),
                    _ if scalar => folded(),
                    _ => None,
                };
                let splat = match op {
                    Op::Bcast => ir_args.first().and_then(|c| egraph[*c].data.konst),
                    _ if !scalar => folded(),
                    _ => None,
                };
                // A fold of finite constants that overflows (or gives NaN).
                let made = match op {
                    Op::Const(_) | Op::Bcast => None,
                    _ => konst.or(splat),
                };
                if made.is_some_and(|l| !l.value().is_finite())
                    && ir_args.iter().all(|c| {
                        let d = &egraph[*c].data;
                        d.konst.or(d.splat).is_some_and(|l| l.value().is_finite())
                    })
                {
                    egraph.analysis.overflows += 1;
                }
                let zero = matches!(op, Op::Zero)
                    || ir_args
                        .iter()
                        .enumerate()
                        .any(|(i, c)| egraph[*c].data.zero && op.zero_if_arg_zero(i));
                Data {
                    ty,
                    denotes: None,
                    konst,
                    splat,
                    zero,
                }
            }
        }
    }

    fn merge(&mut self, a: &mut Data, b: Data) -> DidMerge {
        let mut changed_a = false;
        let mut changed_b = false;
        if a.ty.is_none() && b.ty.is_some() {
            a.ty = b.ty.clone();
            changed_a = true;
        } else if a.ty.is_some() && b.ty.is_none() {
            changed_b = true;
        }
        if a.denotes.is_none() && b.denotes.is_some() {
            a.denotes = b.denotes.clone();
            changed_a = true;
        } else if a.denotes.is_some() && b.denotes.is_none() {
            changed_b = true;
        }
        for (x, y) in [(a.konst, b.konst), (a.splat, b.splat)] {
            if let (Some(x), Some(y)) = (x, y) {
                if same_constant(x, y) {
                    continue;
                }
                if x.value() == 0.0 && y.value() == 0.0 {
                    self.zero_sign_conflict = true;
                } else if self.conflict.is_none() {
                    self.conflict = Some((x, y));
                }
            }
        }
        if a.konst.is_none() && b.konst.is_some() {
            a.konst = b.konst;
            changed_a = true;
        } else if a.konst.is_some() && b.konst.is_none() {
            changed_b = true;
        }
        if a.splat.is_none() && b.splat.is_some() {
            a.splat = b.splat;
            changed_a = true;
        } else if a.splat.is_some() && b.splat.is_none() {
            changed_b = true;
        }
        if !a.zero && b.zero {
            a.zero = true;
            changed_a = true;
        } else if a.zero && !b.zero {
            changed_b = true;
        }
        DidMerge(changed_a, changed_b)
    }

    fn modify(egraph: &mut EG, id: Id) {
        let data = egraph[id].data.clone();
        if let Some(l) = data.konst {
            let c = egraph.add(Node::Op(Op::Const(l), SmallVec::new()));
            egraph.union(id, c);
        }
        if data.zero {
            if let Some(t) = data.ty {
                let tn = egraph.add(Node::Ty(t.into()));
                let z = egraph.add(Node::Op(Op::Zero, [tn].into_iter().collect()));
                egraph.union(id, z);
            }
        }
    }
}

/// Fold an element-wise op whose operands are constants (scalars or
/// splats) in the result's precision: a scalar result's constant, or an
/// array result's splat (the caller knows which from the type).
fn fold(egraph: &EG, op: Op, args: &[Id], ty: Option<&Type>) -> Option<Lit> {
    let ty = ty?;
    if op.is_loop() {
        return None;
    }
    let vals: Option<Vec<Value>> = args
        .iter()
        .map(|c| {
            egraph[*c]
                .data
                .uniform()
                .map(|l| Value::scalar(l.dtype, l.value()))
        })
        .collect();
    let vals = vals?;
    let refs: Vec<&Value> = vals.iter().collect();
    let r = op.eval(&refs, ty.dtype, &[]);
    Some(Lit::new(ty.dtype, r.as_scalar()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::DType;

    #[test]
    fn folds_constants_exactly_and_keeps_signed_zero() {
        let mut eg = EG::new(Analysis::default());
        let expr: egg::RecExpr<Node> = "(add 0.1f32 0.2f32)".parse().unwrap();
        let id = eg.add_expr(&expr);
        eg.rebuild();
        let k = eg[id].data.konst.unwrap();
        assert_eq!(k.value(), (0.1f32 + 0.2f32) as f64);
        let z: egg::RecExpr<Node> = "(neg 0.0f64)".parse().unwrap();
        let zid = eg.add_expr(&z);
        eg.rebuild();
        assert_eq!(eg[zid].data.konst.unwrap(), Lit::new(DType::F64, -0.0));
        let nan: egg::RecExpr<Node> = "(sub inff64 inff64)".parse().unwrap();
        let nid = eg.add_expr(&nan);
        eg.rebuild();
        assert!(eg[nid].data.konst.unwrap().value().is_nan());
    }

    #[test]
    fn zero_absorbs_through_linear_ops() {
        let mut a = Analysis::default();
        a.inputs.insert("x".into(), Type::parse("f64[N]").unwrap());
        let mut eg = EG::new(a);
        let e: egg::RecExpr<Node> = "(sum (mul x (zero f64[N])))".parse().unwrap();
        let id = eg.add_expr(&e);
        eg.rebuild();
        assert!(eg[id].data.zero);
        assert_eq!(eg[id].data.ty, Some(Type::scalar(DType::F64)));
    }

    #[test]
    fn broadcast_constants_are_splats_and_fold_through_element_wise_ops() {
        let mut a = Analysis::default();
        a.inputs.insert("x".into(), Type::parse("f64[N]").unwrap());
        let mut eg = EG::new(a);
        let two = Lit::new(DType::F64, 2.0);
        let e: egg::RecExpr<Node> = "(add (bcast 1.5f64 f64[N]) (bcast 0.5f64 f64[N]))"
            .parse()
            .unwrap();
        let id = eg.add_expr(&e);
        let x: egg::RecExpr<Node> = "(mul x (bcast 2.0f64 f64[N]))".parse().unwrap();
        let xid = eg.add_expr(&x);
        eg.rebuild();
        assert_eq!(eg[id].data.splat, Some(two));
        assert_eq!(eg[id].data.konst, None, "an array is not a scalar constant");
        assert_eq!(eg[xid].data.uniform(), None, "x is not a constant");
        assert!(eg.analysis.conflict.is_none());
    }

    #[test]
    fn a_merge_of_two_different_constants_is_recorded() {
        let mut eg = EG::new(Analysis::default());
        let a = eg.add_expr(&"(add 1.0f64 1.0f64)".parse().unwrap());
        let b = eg.add_expr(&"3.0f64".parse().unwrap());
        let c = eg.add_expr(&"(mul 1.0f64 2.0f64)".parse().unwrap());
        eg.rebuild();
        eg.union(a, c);
        eg.rebuild();
        assert!(eg.analysis.conflict.is_none(), "2 = 2 is no conflict");
        eg.union(a, b);
        eg.rebuild();
        let (x, y) = eg.analysis.conflict.expect("2 = 3 recorded");
        let mut got = [x.value(), y.value()];
        got.sort_by(f64::total_cmp);
        assert_eq!(got, [2.0, 3.0]);
        // NaN is NaN, whatever its payload.
        let mut eg = EG::new(Analysis::default());
        let n1 = eg.add_expr(&"(sub inff64 inff64)".parse().unwrap());
        let n2 = eg.add_expr(&"(mul 0.0f64 inff64)".parse().unwrap());
        eg.rebuild();
        eg.union(n1, n2);
        eg.rebuild();
        assert!(eg.analysis.conflict.is_none());
        // +0 = -0 is kept apart: fast math may prove it.
        let z1 = eg.add_expr(&"0.0f64".parse().unwrap());
        let z2 = eg.add_expr(&"(neg 0.0f64)".parse().unwrap());
        eg.rebuild();
        eg.union(z1, z2);
        eg.rebuild();
        assert!(eg.analysis.conflict.is_none() && eg.analysis.zero_sign_conflict);
    }
}
