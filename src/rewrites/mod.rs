//! The e-graph: the IR as an egg language ([`lang`]), rules loaded from
//! `rulesets/*.rules` ([`rules`]), and saturation under explicit limits
//! ([`saturate`]).

pub mod lang;
pub mod rules;

use crate::lang::ir::{Function, VarId};
use egg::{Id, Runner, StopReason};
use indexmap::IndexMap;
use lang::{Analysis, Node, EG};
use smallvec::SmallVec;
use std::time::{Duration, Instant};

/// Saturation limits. They are checked between iterations, so the graph can
/// overshoot the node limit by one iteration's growth.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    pub nodes: usize,
    pub iterations: usize,
    pub time: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            nodes: 20_000,
            iterations: 30,
            time: Duration::from_secs(2),
        }
    }
}

/// A function inserted into an e-graph.
#[derive(Debug)]
pub struct Inserted {
    pub egraph: EG,
    /// The class of each returned value, in order.
    pub roots: Vec<Id>,
    /// A readable name for classes that held a named source value.
    pub names: IndexMap<Id, String>,
}

/// Add a function's statements to a fresh e-graph (hash-consing merges
/// structurally equal statements at once).
pub fn insert(f: &Function) -> Inserted {
    let mut analysis = Analysis::default();
    for p in &f.params {
        analysis
            .inputs
            .insert(f.var_name(p.var).to_string(), f.ty(p.var).clone());
    }
    let mut eg = EG::new(analysis);
    let mut class: Vec<Option<Id>> = vec![None; f.vars.len()];
    let mut names: IndexMap<Id, String> = IndexMap::new();
    let get = |class: &[Option<Id>], v: VarId| class[v.index()].expect("validated IR");
    for p in &f.params {
        let id = eg.add(Node::Input(f.var_name(p.var).to_string()));
        class[p.var.index()] = Some(id);
    }
    for s in &f.stmts {
        let mut ch: SmallVec<[Id; 2]> = s.args.iter().map(|a| get(&class, *a)).collect();
        if s.op.needs_annotation() {
            ch.push(eg.add(Node::Ty(f.ty(s.var).clone())));
        }
        let id = eg.add(Node::Op(s.op, ch));
        class[s.var.index()] = Some(id);
        let name = f.var_name(s.var);
        if !name.chars().all(|c| c.is_ascii_digit()) {
            names.entry(id).or_insert_with(|| name.to_string());
        }
    }
    let roots = f.rets.iter().map(|r| get(&class, *r)).collect();
    Inserted {
        egraph: eg,
        roots,
        names,
    }
}

/// What saturation did.
#[derive(Clone, Debug, PartialEq)]
pub struct SaturationReport {
    pub iterations: usize,
    pub nodes: usize,
    pub classes: usize,
    pub stop_reason: String,
    /// True when the run stopped on a limit rather than saturating.
    pub hit_limit: bool,
    pub time: Duration,
}

/// Run the rules over the e-graph under the limits.
pub fn saturate(
    ins: Inserted,
    rules: &[egg::Rewrite<Node, Analysis>],
    limits: &Limits,
) -> (Inserted, SaturationReport) {
    let start = Instant::now();
    let Inserted {
        egraph,
        roots,
        names,
    } = ins;
    let runner = Runner::default()
        .with_egraph(egraph)
        .with_node_limit(limits.nodes)
        .with_iter_limit(limits.iterations)
        .with_time_limit(limits.time)
        .run(rules);
    let (stop_reason, hit_limit) = match &runner.stop_reason {
        Some(StopReason::Saturated) => ("saturated".to_string(), false),
        Some(StopReason::IterationLimit(n)) => (format!("iteration limit ({n})"), true),
        Some(StopReason::NodeLimit(n)) => (format!("node limit ({n})"), true),
        Some(StopReason::TimeLimit(t)) => (format!("time limit ({t:.3}s)"), true),
        Some(StopReason::Other(s)) => (s.clone(), true),
        None => ("not run".to_string(), true),
    };
    let report = SaturationReport {
        iterations: runner.iterations.len(),
        nodes: runner.egraph.total_number_of_nodes(),
        classes: runner.egraph.number_of_classes(),
        stop_reason,
        hit_limit,
        time: start.elapsed(),
    };
    let egraph = runner.egraph;
    let roots = roots.iter().map(|r| egraph.find(*r)).collect();
    let names = names.into_iter().map(|(id, n)| (egraph.find(id), n)).fold(
        IndexMap::new(),
        |mut m, (id, n)| {
            m.entry(id).or_insert(n);
            m
        },
    );
    (
        Inserted {
            egraph,
            roots,
            names,
        },
        report,
    )
}
