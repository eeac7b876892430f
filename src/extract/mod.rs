//! Extraction: choose one node per needed e-class so that the whole program
//! (a DAG: a shared value is computed once and priced once) is cheapest under
//! the [`cost::CostModel`], and rebuild it as an IR [`Function`].
//!
//! **The algorithm: local search over whole-program selections.** A
//! selection picks one node per class; the program is what the roots reach,
//! and its price is the sum of the chosen nodes' own costs over the classes
//! reached (each class once: sharing is priced once). Reference counts keep
//! the reached set and the price up to date as choices change.
//!
//! 1. Start from the program as inserted (AD's output, every residual
//!    stored): its first node per class in program order, which is acyclic.
//!    Classes the rules created get the node of least tree cost (ties by
//!    height, so that choice is acyclic too).
//! 2. Visit the classes in id order, over and over until a pass changes
//!    nothing: a reached class switches to the alternative that lowers the
//!    whole program's price most (a residual goes from stored to
//!    recomputed, or back); an unreached class takes the node whose
//!    *marginal* price is least given what is already reached (so a value
//!    the primal computes anyway is free to a pullback that stashes it —
//!    the two-stage pricing store-or-recompute needs). A switch that would
//!    make a cycle is skipped.
//!
//! 3. Leave plateaus (e-graphs up to `ESCAPE_MAX_CLASSES` classes): try up
//!    to `MAX_ESCAPES` switches that keep the price, improve the classes
//!    near each, keep one only if the price then drops (two users of a
//!    shared value that only pay off when both switch).
//!
//! Every kept step is a strict improvement of a finite price, so the search
//! ends; classes and nodes are visited in a fixed order, so it is
//! deterministic.
//! `src/extract/exact.rs`'s exhaustive search measures how far from optimal
//! it lands (see BENCHMARKS.md).

pub mod cost;
pub mod exact;

use crate::ir::{Builder, Function, IrError, VarId};
use crate::ops::OpTypeError;
use crate::rewrites::lang::{Node, EG};
use crate::rewrites::Inserted;
use crate::types::Type;
use cost::{Cost, CostModel};
use egg::{Id, Language};
use indexmap::IndexMap;
use std::collections::HashMap;
use std::fmt;

/// Extraction failed (a bug: every class the roots reach has a program).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExtractError {
    /// A class has no finite, acyclic program.
    NoProgram {
        /// The e-class.
        class: Id,
    },
    /// A residual marker (`stash`, `bwd`) whose child was not emitted.
    MarkerOfNothing {
        /// The e-class.
        class: Id,
        /// The marker, printed.
        node: String,
    },
    /// The chosen node is a type or an input, not a value.
    NotAValue {
        /// The e-class.
        class: Id,
        /// The node, printed.
        node: String,
    },
    /// A value class without a type.
    Untyped {
        /// The e-class.
        class: Id,
    },
    /// The chosen op does not type on its operands.
    OpType {
        /// The e-class.
        class: Id,
        /// Why.
        error: OpTypeError,
    },
    /// The extracted function breaks an invariant of the IR.
    Malformed(IrError),
}

impl fmt::Display for ExtractError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExtractError::NoProgram { class } => write!(f, "class {class} has no acyclic program"),
            ExtractError::MarkerOfNothing { class, node } => {
                write!(f, "class {class}: `{node}` of nothing")
            }
            ExtractError::NotAValue { class, node } => {
                write!(f, "class {class}: `{node}` is not a value")
            }
            ExtractError::Untyped { class } => write!(f, "class {class} has no type"),
            ExtractError::OpType { class, error } => write!(f, "class {class}: {error}"),
            ExtractError::Malformed(e) => write!(f, "extracted program is malformed: {e}"),
        }
    }
}

const NONE: usize = usize::MAX;
/// Passes of the local search before it stops anyway (it has always
/// converged long before on the programs measured).
const MAX_PASSES: usize = 50;
/// Sideways moves tried to leave a plateau (see [`Selection::escape_plateaus`]).
const MAX_ESCAPES: usize = 32;
/// Plateaus are escaped only in e-graphs up to this many classes: each try
/// walks the selection to rule out cycles, which on a 30k-class graph (an
/// unrolled 1000-step loop) took longer than everything else together.
const ESCAPE_MAX_CLASSES: usize = 4000;

/// The e-graph in dense form: classes in id order, nodes sorted.
pub(crate) struct Graph {
    pub ids: Vec<Id>,
    pub index: HashMap<Id, usize>,
    pub nodes: Vec<Vec<Node>>,
    pub own: Vec<Vec<f64>>,
    pub kids: Vec<Vec<Vec<usize>>>,
    /// The classes with a node that has each class as a child.
    pub parents: Vec<Vec<usize>>,
}

impl Graph {
    pub(crate) fn new(eg: &EG, model: &CostModel) -> Graph {
        let mut ids: Vec<Id> = eg.classes().map(|c| c.id).collect();
        ids.sort();
        let index: HashMap<Id, usize> = ids.iter().enumerate().map(|(i, &id)| (id, i)).collect();
        let mut nodes = Vec::with_capacity(ids.len());
        let mut own = Vec::with_capacity(ids.len());
        let mut kids: Vec<Vec<Vec<usize>>> = Vec::with_capacity(ids.len());
        for &id in &ids {
            let mut ns: Vec<Node> = eg[id].nodes.clone();
            ns.sort();
            own.push(ns.iter().map(|n| model.node_cost(eg, n).flops()).collect());
            kids.push(
                ns.iter()
                    .map(|n| n.children().iter().map(|c| index[&eg.find(*c)]).collect())
                    .collect(),
            );
            nodes.push(ns);
        }
        let mut parents: Vec<Vec<usize>> = vec![Vec::new(); ids.len()];
        for (c, ks) in kids.iter().enumerate() {
            for &k in ks.iter().flatten() {
                if parents[k].last() != Some(&c) {
                    parents[k].push(c);
                }
            }
        }
        Graph {
            ids,
            index,
            nodes,
            own,
            kids,
            parents,
        }
    }

    /// Per class, the node of least tree cost (ties by height, then by
    /// node): always an acyclic choice. `NONE` for a class with no finite
    /// program. Knuth's generalization of Dijkstra's algorithm: a node's
    /// (cost, height) is above each of its children's, so the class of
    /// least tentative (cost, height) is final, and each node is priced
    /// once, when its last child becomes final (re-pricing a class's
    /// parents whenever it improved took quadratic time on long chains).
    fn tree_best(&self) -> Vec<usize> {
        use std::cmp::Reverse;
        let n = self.ids.len();
        let mut best: Vec<(f64, u32, usize)> = vec![(f64::INFINITY, u32::MAX, NONE); n];
        let mut done = vec![false; n];
        // Per node, its children not final yet; per class, the nodes
        // (class, node) that have it as a child, once per occurrence.
        let mut waiting: Vec<Vec<usize>> = self
            .kids
            .iter()
            .map(|ns| ns.iter().map(Vec::len).collect())
            .collect();
        let mut users: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
        for (c, ns) in self.kids.iter().enumerate() {
            for (i, ks) in ns.iter().enumerate() {
                for &k in ks {
                    users[k].push((c, i));
                }
            }
        }
        // (cost's bits, height, class): costs are never negative, so their
        // bits order as they do.
        type Frontier = std::collections::BinaryHeap<Reverse<(u64, u32, usize)>>;
        let mut heap = Frontier::new();
        let offer = |c: usize, i: usize, best: &mut Vec<(f64, u32, usize)>, heap: &mut Frontier| {
            let own = self.own[c][i];
            if !own.is_finite() {
                return;
            }
            let ks = &self.kids[c][i];
            let cost = own + ks.iter().map(|&k| best[k].0).sum::<f64>();
            let height = 1 + ks.iter().map(|&k| best[k].1).max().unwrap_or(0);
            let b = best[c];
            if (cost, height) < (b.0, b.1) || ((cost, height) == (b.0, b.1) && i < b.2) {
                best[c] = (cost, height, i);
                heap.push(Reverse((cost.to_bits(), height, c)));
            }
        };
        for (c, ns) in waiting.iter().enumerate() {
            for (i, &w) in ns.iter().enumerate() {
                if w == 0 {
                    offer(c, i, &mut best, &mut heap);
                }
            }
        }
        while let Some(Reverse((bits, height, c))) = heap.pop() {
            if done[c] || (bits, height) != (best[c].0.to_bits(), best[c].1) {
                continue;
            }
            done[c] = true;
            for &(p, i) in &users[c] {
                waiting[p][i] -= 1;
                if waiting[p][i] == 0 && !done[p] {
                    offer(p, i, &mut best, &mut heap);
                }
            }
        }
        best.into_iter().map(|b| b.2).collect()
    }
}

/// Does selection `sel` reach class `target` from classes `from`? `mark`
/// and `epoch` are the caller's visited stamps (one per class), reused
/// between calls so a search allocates nothing.
pub(crate) fn reaches(
    g: &Graph,
    sel: &[usize],
    mark: &mut [u32],
    epoch: &mut u32,
    from: &[usize],
    target: usize,
) -> bool {
    *epoch += 1;
    let e = *epoch;
    let mut stack: Vec<usize> = from.to_vec();
    while let Some(c) = stack.pop() {
        if c == target {
            return true;
        }
        if mark[c] == e {
            continue;
        }
        mark[c] = e;
        let i = sel[c];
        if i != NONE {
            stack.extend(g.kids[c][i].iter().copied());
        }
    }
    false
}

/// A whole-program selection with reference counts.
pub(crate) struct Selection<'g> {
    g: &'g Graph,
    pub sel: Vec<usize>,
    rc: Vec<u32>,
    pub total: f64,
    mark: Vec<u32>,
    epoch: u32,
    /// When set, every class whose reference count changes is logged.
    log: Option<Vec<usize>>,
    /// A topological labelling of the selection, kept through every
    /// switch: a chosen node's class is above each of its children, or
    /// [`CYCLIC`] (a class that may reach a cycle of the selection among
    /// the classes no root reaches). A class reaches only classes below it
    /// or cyclic ones, so the cycle test of [`Selection::admissible`]
    /// walks only those (it walked the whole program: quadratic).
    level: Vec<u32>,
}

/// The level of a class that may reach a cycle of the selection.
const CYCLIC: u32 = u32::MAX;

/// A topological labelling of selection `sel`: leaves at 0, each class one
/// above its highest child, [`CYCLIC`] for the classes that reach a cycle.
fn levels(g: &Graph, sel: &[usize]) -> Vec<u32> {
    let n = sel.len();
    let kids = |c: usize| -> &[usize] {
        match sel[c] {
            NONE => &[],
            i => &g.kids[c][i],
        }
    };
    // Kahn's order from the leaves: a class is labelled once all its
    // children are; the ones never labelled reach a cycle.
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut waiting: Vec<usize> = (0..n).map(|c| kids(c).len()).collect();
    for c in 0..n {
        for &k in kids(c) {
            users[k].push(c);
        }
    }
    let mut level = vec![CYCLIC; n];
    let mut ready: Vec<usize> = (0..n).filter(|&c| waiting[c] == 0).collect();
    while let Some(c) = ready.pop() {
        level[c] = kids(c).iter().map(|&k| level[k] + 1).max().unwrap_or(0);
        for &u in &users[c] {
            waiting[u] -= 1;
            if waiting[u] == 0 {
                ready.push(u);
            }
        }
    }
    level
}

impl<'g> Selection<'g> {
    pub(crate) fn new(g: &'g Graph, sel: Vec<usize>) -> Selection<'g> {
        let n = g.ids.len();
        let level = levels(g, &sel);
        Selection {
            g,
            sel,
            rc: vec![0; n],
            total: 0.0,
            mark: vec![0; n],
            epoch: 0,
            log: None,
            level,
        }
    }

    /// Make node `i` class `c`'s choice for good (reached or not), keeping
    /// the levels a topological labelling: `c` gets one above its new
    /// children, and the classes that choose a node over it rise above it.
    fn choose(&mut self, c: usize, i: usize) {
        if self.live(c) {
            self.switch(c, i);
        } else {
            self.sel[c] = i;
        }
        let g = self.g;
        let sel = &self.sel;
        let level = &mut self.level;
        level[c] = g.kids[c][i]
            .iter()
            .map(|&k| level[k].saturating_add(1))
            .max()
            .unwrap_or(0);
        let mut stack = vec![c];
        while let Some(x) = stack.pop() {
            for &p in &g.parents[x] {
                let j = sel[p];
                if j != NONE
                    && level[p] != CYCLIC
                    && level[p] <= level[x]
                    && g.kids[p][j].contains(&x)
                {
                    level[p] = level[x].saturating_add(1);
                    stack.push(p);
                }
            }
        }
    }

    pub(crate) fn live(&self, c: usize) -> bool {
        self.rc[c] > 0
    }

    pub(crate) fn add_ref(&mut self, c: usize) {
        let mut stack = vec![c];
        while let Some(c) = stack.pop() {
            if let Some(log) = &mut self.log {
                log.push(c);
            }
            self.rc[c] += 1;
            if self.rc[c] == 1 {
                let i = self.sel[c];
                self.total += self.g.own[c][i];
                stack.extend(self.g.kids[c][i].iter().copied());
            }
        }
    }

    fn del_ref(&mut self, c: usize) {
        let mut stack = vec![c];
        while let Some(c) = stack.pop() {
            if let Some(log) = &mut self.log {
                log.push(c);
            }
            self.rc[c] -= 1;
            if self.rc[c] == 0 {
                let i = self.sel[c];
                self.total -= self.g.own[c][i];
                stack.extend(self.g.kids[c][i].iter().copied());
            }
        }
    }

    /// Does the current selection reach `target` from `from`? Only the
    /// classes above `target`, or cyclic ones, can (see [`Selection::level`]).
    fn reaches(&mut self, from: &[usize], target: usize) -> bool {
        let level = &self.level;
        let above = |k: &usize| *k == target || level[*k] == CYCLIC || level[*k] > level[target];
        self.epoch += 1;
        let e = self.epoch;
        let mut stack: Vec<usize> = from.iter().copied().filter(above).collect();
        while let Some(c) = stack.pop() {
            if c == target {
                return true;
            }
            if self.mark[c] == e {
                continue;
            }
            self.mark[c] = e;
            let i = self.sel[c];
            if i != NONE {
                stack.extend(self.g.kids[c][i].iter().copied().filter(above));
            }
        }
        false
    }

    /// Can node `i` of class `c` be chosen: finite, every child has a
    /// program, and no cycle through `c`?
    fn admissible(&mut self, c: usize, i: usize) -> bool {
        let g = self.g;
        g.own[c][i].is_finite()
            && g.kids[c][i].iter().all(|&k| self.sel[k] != NONE)
            && !self.reaches(&g.kids[c][i], c)
    }

    /// Switch a reached class to node `i`.
    fn switch(&mut self, c: usize, i: usize) {
        let old = self.sel[c];
        let g = self.g;
        self.total += g.own[c][i] - g.own[c][old];
        self.sel[c] = i;
        for &k in &g.kids[c][i] {
            self.add_ref(k);
        }
        for &k in &g.kids[c][old] {
            self.del_ref(k);
        }
    }

    /// Change in the whole program's price if reached class `c` took node
    /// `i` (the selection is left as it was). `i` must be admissible.
    pub(crate) fn switch_delta(&mut self, c: usize, i: usize) -> f64 {
        let before = self.total;
        let old = self.sel[c];
        self.switch(c, i);
        let d = self.total - before;
        self.switch(c, old);
        self.total = before;
        d
    }

    /// Price of adding unreached class `c` with node `i` to the program,
    /// given what is already reached. `i` must be admissible.
    fn marginal(&mut self, c: usize, i: usize) -> f64 {
        let before = self.total;
        let old = self.sel[c];
        self.sel[c] = i;
        self.add_ref(c);
        let d = self.total - before;
        self.del_ref(c);
        self.sel[c] = old;
        self.total = before;
        d
    }

    /// The best admissible alternative to class `c`'s current node and the
    /// change it makes (switch delta when reached, marginal price
    /// otherwise, relative to the current node's).
    pub(crate) fn best_alternative(&mut self, c: usize) -> Option<(usize, f64)> {
        let cur = self.sel[c];
        let live = self.live(c);
        let base = if live { 0.0 } else { self.marginal(c, cur) };
        let mut best: Option<(usize, f64)> = None;
        for i in 0..self.g.nodes[c].len() {
            if i == cur || !self.admissible(c, i) {
                continue;
            }
            let d = if live {
                self.switch_delta(c, i)
            } else {
                self.marginal(c, i) - base
            };
            if best.is_none_or(|(_, bd)| d < bd) {
                best = Some((i, d));
            }
        }
        best
    }

    /// Improve until a pass changes nothing.
    fn search(&mut self) {
        let n = self.g.ids.len();
        for _ in 0..MAX_PASSES {
            let mut changed = false;
            for c in 0..n {
                if self.g.nodes[c].len() < 2 || self.sel[c] == NONE {
                    continue;
                }
                // Above the rounding of the running total, far below any real
                // saving (a total of 1e10 flops still sees a 0.01-flop gain).
                let eps = 1e-12 * (1.0 + self.total.abs());
                if let Some((i, d)) = self.best_alternative(c) {
                    if d < -eps {
                        self.choose(c, i);
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }
    }
}

impl Selection<'_> {
    /// Leave plateaus the strict search cannot: try a switch that leaves
    /// the price unchanged, then improve the classes near what it changed
    /// (the classes whose reference count moved, their parents and
    /// grandparents), keep it all only if the price then drops. (Two
    /// `add(a, mul(neg b, c))` sharing one `neg b`: rewriting either alone
    /// as `sub(a, mul(b, c))` saves nothing, both together free the `neg`.)
    /// At most [`MAX_ESCAPES`] tries, in class order, so it stays
    /// deterministic and bounded; a strict search runs again at the end when
    /// one was kept.
    fn escape_plateaus(&mut self) {
        if self.g.ids.len() > ESCAPE_MAX_CLASSES {
            return;
        }
        let mut tries = 0;
        let mut kept = false;
        for c in 0..self.g.ids.len() {
            if self.g.nodes[c].len() < 2 || !self.live(c) {
                continue;
            }
            // A loop's checkpoint choice pays off only together with the
            // primal taking the same tape: every switch is tried there.
            let loop_choice = self.g.nodes[c]
                .iter()
                .any(|n| matches!(n, Node::Op(op, _) if op.is_loop()));
            for i in 0..self.g.nodes[c].len() {
                if tries >= MAX_ESCAPES && !loop_choice {
                    return;
                }
                let eps = 1e-12 * (1.0 + self.total.abs());
                if i == self.sel[c] || !self.admissible(c, i) {
                    continue;
                }
                if self.switch_delta(c, i).abs() > eps && !loop_choice {
                    continue;
                }
                tries += 1;
                let saved = (
                    self.sel.clone(),
                    self.rc.clone(),
                    self.total,
                    self.level.clone(),
                );
                let total = self.total;
                self.log = Some(Vec::new());
                self.choose(c, i);
                let touched = self.log.take().unwrap_or_default();
                let g = self.g;
                let mut near: Vec<usize> = touched
                    .iter()
                    .flat_map(|&k| g.parents[k].iter().copied().chain([k]))
                    .collect();
                near.extend(
                    near.clone()
                        .into_iter()
                        .flat_map(|k| g.parents[k].iter().copied()),
                );
                near.sort_unstable();
                near.dedup();
                // Until nothing near changes (one class's switch can free a
                // value only once another has switched too).
                for _ in 0..4 {
                    let mut changed = false;
                    for &k in &near {
                        if k == c || g.nodes[k].len() < 2 || self.sel[k] == NONE {
                            continue;
                        }
                        if let Some((j, d)) = self.best_alternative(k) {
                            if d < -eps {
                                changed = true;
                                self.choose(k, j);
                            }
                        }
                    }
                    if !changed {
                        break;
                    }
                }
                if self.total < total - eps {
                    kept = true;
                    if loop_choice {
                        continue;
                    }
                    break;
                }
                (self.sel, self.rc, self.total, self.level) = saved;
            }
        }
        if kept {
            self.search();
        }
    }
}

/// The starting selection: the program as inserted, tree-best elsewhere
/// and wherever an inserted node would close a cycle (the rules merge a
/// value with an operand of its own, as `y * 1` with `y`, and the node
/// inserted for it then reads its own class), so it is acyclic.
fn initial<'g>(g: &'g Graph, original: &[(Id, Node)]) -> Selection<'g> {
    let mut s = Selection::new(g, g.tree_best());
    let mut taken = vec![false; g.ids.len()];
    for (id, node) in original {
        let Some(&c) = g.index.get(id) else { continue };
        if taken[c] {
            continue;
        }
        taken[c] = true;
        if let Ok(i) = g.nodes[c].binary_search(node) {
            if i != s.sel[c] && g.own[c][i].is_finite() && !s.reaches(&g.kids[c][i], c) {
                s.choose(c, i);
            }
        }
    }
    s
}

/// A primal value the pullback reads, and how the extractor obtains it.
#[derive(Clone, Debug, PartialEq)]
pub struct ResidualChoice {
    /// A readable name (the source value's, or the class id).
    pub name: String,
    pub ty: Type,
    /// Stored in the residual buffer (else recomputed in the pullback).
    pub stored: bool,
    /// Bytes of the value at the model's sizes.
    pub bytes: f64,
    /// What the current choice costs in the model's unit (`λ · bytes` when
    /// stored; the recomputation's own flops when recomputed).
    pub cost: f64,
    /// How much dearer the whole program would be with the best other
    /// choice (None when there is none).
    pub other: Option<f64>,
}

/// A residual choice with the primal value's class and its own class.
type ChoiceAt = (Id, Id, ResidualChoice);

/// Choose the best node of every class the roots reach; the residual
/// choices among them.
fn choose(
    eg: &EG,
    model: &CostModel,
    roots: &[Id],
    original: &[(Id, Node)],
) -> (IndexMap<Id, Node>, Vec<ChoiceAt>) {
    let g = Graph::new(eg, model);
    let mut s = initial(&g, original);
    let mut rooted = true;
    for r in roots {
        let c = g.index[&eg.find(*r)];
        if s.sel[c] == NONE {
            rooted = false;
        }
    }
    if rooted {
        for r in roots {
            s.add_ref(g.index[&eg.find(*r)]);
        }
        s.search();
        s.escape_plateaus();
    }
    let mut residuals = Vec::new();
    for c in 0..g.ids.len() {
        let is_residual = g.nodes[c].iter().any(|n| matches!(n, Node::Stash(_)));
        if !is_residual || !s.live(c) {
            continue;
        }
        let i = s.sel[c];
        let stored = matches!(g.nodes[c][i], Node::Stash(_));
        let ty = eg[g.ids[c]]
            .data
            .ty
            .clone()
            .unwrap_or_else(|| Type::scalar(crate::types::DType::F64));
        let other = s.best_alternative(c).map(|(_, d)| d);
        let primal = g.nodes[c]
            .iter()
            .find_map(|n| match n {
                Node::Stash([p]) => Some(eg.find(*p)),
                _ => None,
            })
            .unwrap_or(g.ids[c]);
        let an_input = g.nodes[c]
            .iter()
            .zip(&g.own[c])
            .any(|(n, &cost)| matches!(n, Node::Bwd(_)) && cost == 0.0);
        if primal == g.ids[c] || an_input {
            // The pullback's value is the primal value itself (computed
            // from constants only, e.g. a broadcast constant) or an input
            // read in place: no choice.
            continue;
        }
        residuals.push((
            primal,
            g.ids[c],
            ResidualChoice {
                name: String::new(),
                bytes: model.bytes(&ty),
                ty,
                stored,
                cost: g.own[c][i],
                other,
            },
        ));
    }
    let choice = (0..g.ids.len())
        .filter(|&c| s.sel[c] != NONE)
        .map(|c| (g.ids[c], g.nodes[c][s.sel[c]].clone()))
        .collect();
    (choice, residuals)
}

/// The extracted program and its price.
#[derive(Clone, Debug)]
pub struct Extracted {
    pub function: Function,
    /// DAG cost of the whole program under the model (`flops + λ · stored
    /// bytes`).
    pub cost: Cost,
    /// The primal values the pullback reads: stored or recomputed.
    pub residuals: Vec<ResidualChoice>,
}

/// Extract the roots of `ins` as an IR function with the signature of
/// `like` (its name, size parameters and parameters).
pub fn extract(
    ins: &Inserted,
    like: &Function,
    model: &CostModel,
) -> Result<Extracted, ExtractError> {
    let eg = &ins.egraph;
    // Loop ops are priced from `like`'s loops.
    let model = &model.clone().for_function(like);
    let (choice, choices) = choose(eg, model, &ins.roots, &ins.original);
    let mut b = Builder::new(like.name.clone(), like.size_params.clone());
    b.copy_loops(like);
    let mut var_of: IndexMap<Id, VarId> = IndexMap::new();
    for p in &like.params {
        let v = b.param(like.var_name(p.var), like.ty(p.var).clone(), p.span);
        let id = eg
            .lookup(Node::Input(like.var_name(p.var).into()))
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
    // Name each residual after the primal value it stands for, else after
    // its recomputation.
    let residuals = choices
        .into_iter()
        .map(|(p, c, mut r)| {
            r.name = var_of
                .get(&p)
                .or_else(|| var_of.get(&c))
                .map(|v| f.var_name(*v).to_string())
                .unwrap_or_else(|| format!("class{c}"));
            r
        })
        .collect();
    f.validate().map_err(ExtractError::Malformed)?;
    Ok(Extracted {
        function: f,
        cost,
        residuals,
    })
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
        let node = choice.get(&c).ok_or(ExtractError::NoProgram { class: c })?;
        // A residual marker is the value of its child: stored (the
        // pullback reads the forward value) or an input read in place.
        if let Node::Stash([p]) | Node::Bwd([p]) = node {
            let p = eg.find(*p);
            if !expanded {
                stack.push((c, true));
                stack.push((p, false));
                continue;
            }
            let v = *var_of
                .get(&p)
                .ok_or_else(|| ExtractError::MarkerOfNothing {
                    class: c,
                    node: node.to_string(),
                })?;
            *cost = *cost + model.node_cost(eg, node);
            var_of.insert(c, v);
            continue;
        }
        let Node::Op(op, ch) = node else {
            return Err(ExtractError::NotAValue {
                class: c,
                node: node.to_string(),
            });
        };
        let ir_args = &ch[..op.operand_count(ch.len())];
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
            .ok_or(ExtractError::Untyped { class: c })?;
        let hint = ins.names.get(&c).map(String::as_str).unwrap_or("");
        let v = b
            .push(hint, *op, &args, Some(&ty))
            .map_err(|error| ExtractError::OpType { class: c, error })?;
        *cost = *cost + model.node_cost(eg, node);
        var_of.insert(c, v);
    }
    Ok(var_of[&eg.find(id)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::parse_functions;
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
