//! Extraction: choose one node per needed e-class so that the whole program
//! (a DAG: a shared value is computed once and priced once) is cheapest under
//! the [`cost::CostModel`], and rebuild it as an IR [`Function`].
//!
//! The extractor is greedy and DAG-aware: each class records the set of
//! classes its current best program uses and the cost of that set; a node's
//! cost is its own plus the cost of the union of its children's sets, so
//! sharing is counted once. A node whose children's sets contain its own
//! class would form a cycle and is skipped. Classes are visited in id order
//! and a choice changes only on a strict improvement, so the result is
//! deterministic.

pub mod cost;

use crate::lang::ir::{Builder, Function, VarId};
use crate::rewrites::lang::{Node, EG};
use crate::rewrites::Inserted;
use cost::{Cost, CostModel};
use egg::{Id, Language};
use indexmap::IndexMap;
use std::collections::BTreeMap;
use std::fmt;

/// Extraction failed: a root has no finite, acyclic program (a bug).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtractError(pub String);

impl fmt::Display for ExtractError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Clone, Debug)]
struct Best {
    node: Node,
    /// Classes the program of this class uses (itself included), with the
    /// cost each contributed when chosen.
    uses: BTreeMap<Id, f64>,
    total: f64,
}

/// Choose the best node of every class reachable from the roots.
pub fn choose(eg: &EG, model: &CostModel) -> IndexMap<Id, Node> {
    let mut classes: Vec<Id> = eg.classes().map(|c| c.id).collect();
    classes.sort();
    // Own cost of every node, computed once.
    let own: IndexMap<Id, Vec<(Node, f64)>> = classes
        .iter()
        .map(|&id| {
            let mut nodes: Vec<(Node, f64)> = eg[id]
                .nodes
                .iter()
                .map(|n| (n.clone(), model.node_cost(eg, n).flops()))
                .collect();
            nodes.sort_by(|a, b| a.0.cmp(&b.0));
            (id, nodes)
        })
        .collect();
    let mut best: IndexMap<Id, Best> = IndexMap::new();
    let max_passes = 4 * classes.len() + 10;
    for _ in 0..max_passes {
        let mut changed = false;
        for &id in &classes {
            for (node, c) in &own[&id] {
                if !c.is_finite() {
                    continue;
                }
                let children: Vec<Id> = node.children().iter().map(|x| eg.find(*x)).collect();
                let Some(kids) = children
                    .iter()
                    .map(|k| best.get(k))
                    .collect::<Option<Vec<&Best>>>()
                else {
                    continue;
                };
                if kids.iter().any(|k| k.uses.contains_key(&id)) {
                    continue; // would be a cycle
                }
                let mut uses: BTreeMap<Id, f64> = BTreeMap::new();
                for k in &kids {
                    for (cid, cc) in &k.uses {
                        uses.entry(*cid).or_insert(*cc);
                    }
                }
                uses.insert(id, *c);
                let total: f64 = uses.values().sum();
                let better = match best.get(&id) {
                    None => true,
                    Some(b) => total < b.total,
                };
                if better {
                    best.insert(
                        id,
                        Best {
                            node: node.clone(),
                            uses,
                            total,
                        },
                    );
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    best.into_iter().map(|(id, b)| (id, b.node)).collect()
}

/// The extracted program and its price.
#[derive(Clone, Debug)]
pub struct Extracted {
    pub function: Function,
    /// DAG cost of the whole program under the model.
    pub cost: Cost,
}

/// Extract the roots of `ins` as an IR function with the signature of
/// `like` (its name, size parameters and parameters).
pub fn extract(
    ins: &Inserted,
    like: &Function,
    model: &CostModel,
) -> Result<Extracted, ExtractError> {
    let eg = &ins.egraph;
    let choice = choose(eg, model);
    let mut b = Builder::new(like.name.clone(), like.size_params.clone());
    let mut var_of: IndexMap<Id, VarId> = IndexMap::new();
    for p in &like.params {
        let v = b.param(like.var_name(p.var), like.ty(p.var).clone(), p.span);
        let id = eg
            .lookup(Node::Input(like.var_name(p.var).to_string()))
            .map(|i| eg.find(i));
        if let Some(id) = id {
            var_of.insert(id, v);
        }
    }
    let mut cost = Cost::ZERO;
    let mut rets = Vec::new();
    for &root in &ins.roots {
        let v = emit(
            eg,
            &choice,
            eg.find(root),
            ins,
            model,
            &mut b,
            &mut var_of,
            &mut cost,
        )?;
        rets.push(v);
    }
    let f = b.finish(rets);
    f.validate()
        .map_err(|e| ExtractError(format!("extracted program is malformed: {e}")))?;
    Ok(Extracted { function: f, cost })
}

#[allow(clippy::too_many_arguments)]
fn emit(
    eg: &EG,
    choice: &IndexMap<Id, Node>,
    id: Id,
    ins: &Inserted,
    model: &CostModel,
    b: &mut Builder,
    var_of: &mut IndexMap<Id, VarId>,
    cost: &mut Cost,
) -> Result<VarId, ExtractError> {
    // Iterative post-order, so deep programs cannot overflow the stack.
    let mut stack: Vec<(Id, bool)> = vec![(id, false)];
    while let Some((c, expanded)) = stack.pop() {
        let c = eg.find(c);
        if var_of.contains_key(&c) {
            continue;
        }
        let node = choice
            .get(&c)
            .ok_or_else(|| ExtractError(format!("class {c} has no acyclic program")))?;
        let Node::Op(op, ch) = node else {
            return Err(ExtractError(format!("class {c}: `{node}` is not a value")));
        };
        let ir_args = &ch[..op.arity()];
        if !expanded {
            stack.push((c, true));
            for a in ir_args.iter().rev() {
                stack.push((*a, false));
            }
            continue;
        }
        let args: Vec<VarId> = ir_args.iter().map(|a| var_of[&eg.find(*a)]).collect();
        let ty = eg[c]
            .data
            .ty
            .clone()
            .ok_or_else(|| ExtractError(format!("class {c} has no type")))?;
        let hint = ins.names.get(&c).map(String::as_str).unwrap_or("");
        let v = b
            .push(hint, *op, &args, Some(&ty))
            .map_err(|e| ExtractError(format!("class {c}: {e}")))?;
        *cost = *cost + model.node_cost(eg, node);
        var_of.insert(c, v);
    }
    Ok(var_of[&eg.find(id)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lang::ir::parse_functions;
    use crate::rewrites::{insert, rules::RuleSet, saturate, Limits};

    #[test]
    fn shared_adjoint_is_priced_once() {
        // x_{k+1} = sin(x_k) * x_k with its gradient: the DAG cost stays
        // linear in the chain length (tree cost would be exponential).
        let mut text = String::from("fn chain(%x0: f64) -> f64 {\n");
        for k in 0..20 {
            text.push_str(&format!("  %s{k}: f64 = sin %x{k}\n"));
            text.push_str(&format!("  %x{}: f64 = mul %s{k} %x{k}\n", k + 1));
        }
        text.push_str("  ret %x20\n}\n");
        let f = &parse_functions(&text).unwrap()[0];
        let r = crate::differentiate::reverse(f, &[0]).unwrap();
        let ins = insert(&r.value_and_grad);
        let rules = RuleSet::builtin().unwrap().rewrites();
        let (ins, rep) = saturate(ins, &rules, &Limits::default());
        assert!(!rep.hit_limit, "{rep:?}");
        let ex = extract(&ins, &r.value_and_grad, &CostModel::default()).unwrap();
        assert!(ex.cost.flops() < 2000.0, "cost {}", ex.cost);
        assert!(ex.function.stmts.len() <= r.value_and_grad.stmts.len());
    }
}
