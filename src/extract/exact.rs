//! An exact extractor, to measure the default one against: the cheapest
//! acyclic selection by exhaustive branch-and-bound.
//!
//! **The problem** is the default extractor's (see the parent module): pick
//! one node per class; the program is what the roots reach through the
//! picks; its price is the sum, over the classes reached, each class once,
//! of the chosen node's own cost (`CostModel::node_cost`, so a `stash` costs
//! `λ · bytes`, a `bwd` is free over an input and not a program otherwise,
//! an op pays [`STMT_OVERHEAD`](super::cost::STMT_OVERHEAD)). A node of
//! non-finite own cost may not be chosen, and the selection must be acyclic.
//!
//! **The search.**
//!
//! 1. *Candidates.* A node is a candidate if its own cost is finite, it is
//!    not its own child, and every child has some finite acyclic program
//!    (finite least tree cost). A candidate is dropped when another of the
//!    same class *dominates* it: own cost no higher and children a subset
//!    (of two identical ones, the later is dropped). Replacing a dominated
//!    node by its dominator reaches no new class and adds no edge, so it
//!    keeps a selection acyclic and never raises its price: some optimum
//!    uses no dominated node. Only the classes reachable from the roots
//!    through candidates take part.
//! 2. *Branching.* A partial selection decides classes top-down: the roots
//!    are *pending*; the pending class of least id (dense index: classes in
//!    id order) is decided next, trying each candidate in order of the lower
//!    bound it leads to (ties by node order); deciding it makes its
//!    undecided children pending. A choice whose children already reach the
//!    class through decided choices would close a cycle and is skipped
//!    (every edge of the final selection is checked when it is added, so a
//!    complete selection is acyclic; pricing a leaf checks it again). When
//!    nothing is pending the selection is complete: it decides exactly the
//!    classes it reaches. Each acyclic selection of the reached classes is
//!    one leaf, so the search is exhaustive.
//! 3. *Bounding.* Each branch has a lower bound on the price of every
//!    completion; candidates are tried in increasing bound, and a branch
//!    whose bound is not below the incumbent (less a relative 1e-10, which
//!    also covers rounding) is cut, which ends its class's loop. The
//!    incumbent starts as the default extractor's selection at its price.
//!    The bound has three parts:
//!    - the own costs of the decided classes;
//!    - *forced classes*: F(c), what every program of class c reaches, is
//!      the greatest solution of F(c) = {c} ∪ ⋂ over candidates of ⋃ over
//!      their children k of F(k) (any solution is sound: by induction on an
//!      acyclic program's height, the classes it reaches include F of its
//!      root). Let K be the decided classes and F of every pending class:
//!      each undecided class of K will be reached, so it is priced once, at
//!      least at its least own cost — more precisely at
//!    - its least *extra*: over its candidates, own cost plus, for each
//!      child outside K, a share h(k)/s(k) of that child, where s(k) counts
//!      the undecided classes with a candidate that has k as a child and
//!      h(k) is k's least extra in turn (one sweep over the classes,
//!      children first, from h = 0: each value is then at most what the
//!      rule gives from the final values, which is all the argument needs).
//!      Unfolding the shares over a completion, each class outside K that it
//!      reaches is paid a weight that is a sum over its parents in the
//!      completion of their weights over s, at most 1 (its parents there
//!      are among the s), so the sum of the extras is at most what the
//!      completion pays for K's undecided classes and the classes outside K.
//! 4. *Budget.* Each choice tried is one search node; past `budget` of them
//!    the search gives up: [`exact_choice`] returns None, [`exact_search`]
//!    the best selection seen, not proven optimal. A search node costs time
//!    linear in the classes reachable from the roots (the bound), so the
//!    budget bounds the time on a given graph.
//!
//! Classes, candidates and ties are all in fixed orders, so the result and
//! the count of search nodes are deterministic. A leaf is priced from
//! scratch, in class-id order, exactly as [`greedy_cost`] prices the default
//! extractor's selection, so the two are comparable to the last bit.

use super::cost::CostModel;
use super::{choose, reaches, Graph, NONE};
use crate::rewrites::lang::Node;
use crate::rewrites::Inserted;
use egg::Id;
use indexmap::IndexMap;
use std::collections::BTreeSet;

/// Relative slack under which a branch cannot beat the incumbent.
const REL_TOL: f64 = 1e-10;

/// What [`exact_search`] found: the optimum, or the best selection seen
/// before the budget ran out.
#[derive(Clone, Debug)]
pub struct ExactResult {
    /// The least price of an acyclic selection (when not `proven`, the least
    /// seen: at most the default extractor's).
    pub cost: f64,
    /// The search finished: `cost` is the optimum.
    pub proven: bool,
    /// Search nodes (choices tried).
    pub nodes_explored: usize,
    /// Classes reachable from the roots through candidates.
    pub classes: usize,
    /// Of those, classes left with more than one candidate.
    pub branching: usize,
    /// The default extractor's price ([`greedy_cost`]).
    pub greedy: f64,
    /// The program of `cost`: each reached class's node, in class-id order.
    pub choice: IndexMap<Id, Node>,
}

/// The default extractor's selection restricted to the classes the roots
/// reach, in class-id order; None when it has no acyclic program.
pub fn greedy_choice(ins: &Inserted, model: &CostModel) -> Option<IndexMap<Id, Node>> {
    let eg = &ins.egraph;
    let g = Graph::new(eg, model);
    let sel = greedy_dense(&g, ins, model);
    let roots = dense_roots(&g, ins);
    reached(&g, &sel, &roots).map(|r| to_choice(&g, &sel, &r))
}

/// Price of the default extractor's program: the sum over the classes its
/// selection reaches, each once, of the chosen node's own cost (infinite
/// when it has no acyclic program).
pub fn greedy_cost(ins: &Inserted, model: &CostModel) -> f64 {
    let g = Graph::new(&ins.egraph, model);
    let sel = greedy_dense(&g, ins, model);
    price(&g, &sel, &dense_roots(&g, ins)).unwrap_or(f64::INFINITY)
}

/// The least price over all acyclic selections (see the module doc), or None
/// when the search needs more than `budget` search nodes (or the roots have
/// no program at all).
pub fn exact_choice(ins: &Inserted, model: &CostModel, budget: usize) -> Option<ExactResult> {
    exact_search(ins, model, budget).filter(|r| r.proven)
}

/// [`exact_choice`], but past the budget it still returns the best selection
/// seen (`proven: false`). None when the roots have no program at all.
pub fn exact_search(ins: &Inserted, model: &CostModel, budget: usize) -> Option<ExactResult> {
    exact_search_from(ins, model, budget, true)
}

/// [`exact_search`], starting from the default extractor's selection as the
/// incumbent or (`from_default` false) from none, so that the search must
/// find every program itself (a check of the search: both must agree). Then
/// None also when the budget runs out before the first complete program.
pub fn exact_search_from(
    ins: &Inserted,
    model: &CostModel,
    budget: usize,
    from_default: bool,
) -> Option<ExactResult> {
    let g = Graph::new(&ins.egraph, model);
    let roots = dense_roots(&g, ins);
    let greedy_sel = greedy_dense(&g, ins, model);
    let greedy = price(&g, &greedy_sel, &roots).unwrap_or(f64::INFINITY);
    let incumbent = (from_default && greedy.is_finite()).then_some(greedy_sel);
    let (sel, proven, s) = search(&g, &roots, incumbent, budget)?;
    let r = reached(&g, &sel, &roots)?;
    Some(ExactResult {
        cost: price(&g, &sel, &roots)?,
        proven,
        nodes_explored: s.explored.min(budget),
        classes: s.classes,
        branching: s.branching,
        greedy,
        choice: to_choice(&g, &sel, &r),
    })
}

/// Branch and bound from an incumbent selection (if any): the best
/// selection, whether the search finished, and the search's counts. None
/// when there is no selection at all.
fn search<'g>(
    g: &'g Graph,
    roots: &[usize],
    incumbent: Option<Vec<usize>>,
    budget: usize,
) -> Option<(Vec<usize>, bool, Search<'g>)> {
    let mut s = Search::new(g, budget);
    if !s.setup(roots) {
        return None;
    }
    if let Some(sel) = &incumbent {
        s.best = price(g, sel, roots)?;
    }
    let proven = s.run(roots);
    let sel = s.best_sel.take().or(incumbent)?;
    Some((sel, proven, s))
}

fn dense_roots(g: &Graph, ins: &Inserted) -> Vec<usize> {
    ins.roots
        .iter()
        .map(|r| g.index[&ins.egraph.find(*r)])
        .collect()
}

/// The default extractor's selection as node indices into `g`.
fn greedy_dense(g: &Graph, ins: &Inserted, model: &CostModel) -> Vec<usize> {
    let eg = &ins.egraph;
    let (choice, _) = choose(eg, model, &ins.roots, &ins.original);
    let mut sel = vec![NONE; g.ids.len()];
    for (id, node) in &choice {
        let c = g.index[&eg.find(*id)];
        sel[c] = g.nodes[c].binary_search(node).unwrap_or(NONE);
    }
    sel
}

/// Which classes `sel` reaches from `roots`; None when it reaches a class
/// without a choice, a node of non-finite cost, or a cycle.
fn reached(g: &Graph, sel: &[usize], roots: &[usize]) -> Option<Vec<bool>> {
    // 0 unseen, 1 on the path, 2 done.
    let mut state = vec![0u8; g.ids.len()];
    for &r in roots {
        if state[r] != 0 {
            continue;
        }
        state[r] = 1;
        let mut stack: Vec<(usize, usize)> = vec![(r, 0)];
        while let Some(&mut (c, ref mut k)) = stack.last_mut() {
            let i = sel[c];
            if i == NONE || !g.own[c][i].is_finite() {
                return None;
            }
            if let Some(&kid) = g.kids[c][i].get(*k) {
                *k += 1;
                match state[kid] {
                    0 => {
                        state[kid] = 1;
                        stack.push((kid, 0));
                    }
                    1 => return None,
                    _ => {}
                }
            } else {
                state[c] = 2;
                stack.pop();
            }
        }
    }
    Some(state.into_iter().map(|s| s == 2).collect())
}

/// The price of a selection: own costs of the reached classes, summed in
/// class-id order.
fn price(g: &Graph, sel: &[usize], roots: &[usize]) -> Option<f64> {
    let r = reached(g, sel, roots)?;
    Some(
        (0..g.ids.len())
            .filter(|&c| r[c])
            .map(|c| g.own[c][sel[c]])
            .sum(),
    )
}

fn to_choice(g: &Graph, sel: &[usize], r: &[bool]) -> IndexMap<Id, Node> {
    (0..g.ids.len())
        .filter(|&c| r[c])
        .map(|c| (g.ids[c], g.nodes[c][sel[c]].clone()))
        .collect()
}

/// A set of classes (dense indices) as bits.
type Bits = Vec<u64>;

fn has(b: &Bits, c: usize) -> bool {
    b[c / 64] >> (c % 64) & 1 == 1
}

fn set(b: &mut Bits, c: usize, on: bool) {
    if on {
        b[c / 64] |= 1 << (c % 64);
    } else {
        b[c / 64] &= !(1 << (c % 64));
    }
}

/// One decided class on the search stack.
struct Frame {
    c: usize,
    /// Candidates with the bound each leads to, increasing.
    order: Vec<(usize, f64)>,
    pos: usize,
    applied: Option<usize>,
    /// The decided classes' price before `c` was decided.
    decided_cost: f64,
}

struct Search<'g> {
    g: &'g Graph,
    budget: usize,
    /// Per class, the candidate nodes (empty: not reachable).
    cand: Vec<Vec<usize>>,
    /// Per class, its least candidate own cost.
    min_own: Vec<f64>,
    /// Per class, the classes every program of it built from candidates
    /// reaches (itself included).
    forced: Vec<Bits>,
    sel: Vec<usize>,
    decided: Bits,
    /// Own costs of the decided classes.
    decided_cost: f64,
    /// References from the roots and decided classes.
    rc: Vec<u32>,
    pending: BTreeSet<usize>,
    best: f64,
    best_sel: Option<Vec<usize>>,
    explored: usize,
    classes: usize,
    branching: usize,
    /// Classes in children-first order (back edges ignored).
    order: Vec<usize>,
    /// Per class, the classes with a candidate that has it as a child.
    parents: Vec<Vec<usize>>,
    /// Scratch for [`Search::bound`]: a lower bound on what a class adds,
    /// and how many classes share it.
    h: Vec<f64>,
    share: Vec<f64>,
    mark: Vec<u32>,
    epoch: u32,
}

impl<'g> Search<'g> {
    fn new(g: &'g Graph, budget: usize) -> Search<'g> {
        let n = g.ids.len();
        let words = n.div_ceil(64);
        Search {
            g,
            budget,
            cand: vec![Vec::new(); n],
            min_own: vec![f64::INFINITY; n],
            forced: Vec::new(),
            sel: vec![NONE; n],
            decided: vec![0; words],
            decided_cost: 0.0,
            rc: vec![0; n],
            pending: BTreeSet::new(),
            best: f64::INFINITY,
            best_sel: None,
            explored: 0,
            classes: 0,
            branching: 0,
            order: Vec::new(),
            parents: vec![Vec::new(); n],
            h: vec![0.0; n],
            share: vec![1.0; n],
            mark: vec![0; n],
            epoch: 0,
        }
    }

    /// Candidates of the classes reachable from the roots, and what each
    /// class forces; false when a root has no program.
    fn setup(&mut self, roots: &[usize]) -> bool {
        let g = self.g;
        let n = g.ids.len();
        let has_program: Vec<bool> = g.tree_best().into_iter().map(|b| b != NONE).collect();
        let mut seen = vec![false; n];
        let mut stack: Vec<usize> = Vec::new();
        for &r in roots {
            if !has_program[r] {
                return false;
            }
            if !seen[r] {
                seen[r] = true;
                stack.push(r);
            }
        }
        let mut reachable = Vec::new();
        while let Some(c) = stack.pop() {
            reachable.push(c);
            let ok: Vec<usize> = (0..g.nodes[c].len())
                .filter(|&i| {
                    g.own[c][i].is_finite()
                        && g.kids[c][i].iter().all(|&k| k != c && has_program[k])
                })
                .collect();
            let sets: Vec<Vec<usize>> = ok
                .iter()
                .map(|&i| {
                    let mut ks = g.kids[c][i].clone();
                    ks.sort_unstable();
                    ks.dedup();
                    ks
                })
                .collect();
            let dominated = |a: usize| {
                (0..ok.len()).any(|b| {
                    let (oa, ob) = (g.own[c][ok[a]], g.own[c][ok[b]]);
                    let subset = sets[b].iter().all(|k| sets[a].binary_search(k).is_ok());
                    let same = oa == ob && sets[a] == sets[b];
                    b != a && ob <= oa && subset && (!same || b < a)
                })
            };
            let cands: Vec<usize> = (0..ok.len())
                .filter(|&a| !dominated(a))
                .map(|a| ok[a])
                .collect();
            self.min_own[c] = cands
                .iter()
                .map(|&i| g.own[c][i])
                .fold(f64::INFINITY, f64::min);
            for &i in &cands {
                for &k in &g.kids[c][i] {
                    if !seen[k] {
                        seen[k] = true;
                        stack.push(k);
                    }
                }
            }
            self.classes += 1;
            if cands.len() > 1 {
                self.branching += 1;
            }
            self.cand[c] = cands;
        }
        reachable.sort_unstable();
        for &c in &reachable {
            for &i in &self.cand[c] {
                for &k in &g.kids[c][i] {
                    if self.parents[k].last() != Some(&c) {
                        self.parents[k].push(c);
                    }
                }
            }
        }
        // Children first: post-order of a depth-first walk from the roots.
        let mut state = vec![0u8; n];
        for &r in roots {
            if state[r] != 0 {
                continue;
            }
            state[r] = 1;
            let mut walk: Vec<(usize, usize, usize)> = vec![(r, 0, 0)];
            while let Some(&mut (c, ref mut i, ref mut k)) = walk.last_mut() {
                let next = match self.cand[c].get(*i) {
                    Some(&node) => match g.kids[c][node].get(*k) {
                        Some(&kid) => {
                            *k += 1;
                            Some(kid)
                        }
                        None => {
                            *i += 1;
                            *k = 0;
                            None
                        }
                    },
                    None => {
                        self.order.push(c);
                        walk.pop();
                        None
                    }
                };
                if let Some(kid) = next {
                    if state[kid] == 0 {
                        state[kid] = 1;
                        walk.push((kid, 0, 0));
                    }
                }
            }
        }
        // What every program of a class reaches: the greatest solution of
        // F(c) = {c} ∪ ⋂_candidates ⋃_children F(k), from "everything" down.
        // Any solution is sound: by induction on an acyclic program's height,
        // the classes it reaches include F of its root.
        let words = n.div_ceil(64);
        let mut all: Bits = vec![0; words];
        for &c in &reachable {
            set(&mut all, c, true);
        }
        let mut forced: Vec<Bits> = vec![Vec::new(); n];
        for &c in &reachable {
            forced[c] = all.clone();
        }
        loop {
            let mut changed = false;
            for &c in &self.order {
                let mut meet = all.clone();
                for &i in &self.cand[c] {
                    let mut join: Bits = vec![0; words];
                    for &k in &g.kids[c][i] {
                        for (j, w) in join.iter_mut().zip(&forced[k]) {
                            *j |= w;
                        }
                    }
                    for (m, j) in meet.iter_mut().zip(&join) {
                        *m &= j;
                    }
                }
                set(&mut meet, c, true);
                if meet != forced[c] {
                    forced[c] = meet;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        self.forced = forced;
        true
    }

    /// The lower bound (see the module doc): the decided classes' own
    /// costs, plus for every undecided class a pending class forces (each
    /// once) its least own cost and what it would newly reach outside those,
    /// every such class's cost shared among the undecided classes that could
    /// reach it directly.
    fn bound(&mut self) -> f64 {
        let words = self.decided.len();
        let mut known: Bits = vec![0; words];
        for &p in &self.pending {
            for (w, f) in known.iter_mut().zip(&self.forced[p]) {
                *w |= f;
            }
        }
        for (w, d) in known.iter_mut().zip(&self.decided) {
            *w |= d;
        }
        for &c in &self.order {
            if !has(&known, c) {
                self.share[c] = self.parents[c]
                    .iter()
                    .filter(|&&q| !has(&self.decided, q))
                    .count() as f64;
                self.h[c] = 0.0;
            }
        }
        // One sweep, children first, from 0: each value is at most what
        // the rule gives from the final ones, which is all the bound needs.
        let mut b = self.decided_cost;
        let order = std::mem::take(&mut self.order);
        for &c in &order {
            if !has(&known, c) {
                self.h[c] = self.least_extra(c, &known);
            }
        }
        for &c in &order {
            if has(&known, c) && !has(&self.decided, c) {
                b += self.least_extra(c, &known);
            }
        }
        self.order = order;
        b
    }

    /// The least, over the candidates of `c`, of its own cost plus the
    /// shares of its children outside `known`.
    fn least_extra(&mut self, c: usize, known: &Bits) -> f64 {
        let g = self.g;
        let mut least = f64::INFINITY;
        for &i in &self.cand[c] {
            self.epoch += 1;
            let e = self.epoch;
            let mut x = g.own[c][i];
            for &k in &g.kids[c][i] {
                if !has(known, k) && self.mark[k] != e {
                    self.mark[k] = e;
                    x += self.h[k] / self.share[k];
                }
            }
            least = least.min(x);
        }
        least
    }

    /// Does the decided part reach `target` from `from`?
    fn reaches(&mut self, from: &[usize], target: usize) -> bool {
        reaches(
            self.g,
            &self.sel,
            &mut self.mark,
            &mut self.epoch,
            from,
            target,
        )
    }

    /// Decide pending class `c` as node `i`.
    fn apply(&mut self, c: usize, i: usize) {
        let g = self.g;
        self.sel[c] = i;
        set(&mut self.decided, c, true);
        self.decided_cost += g.own[c][i];
        self.pending.remove(&c);
        for &k in &g.kids[c][i] {
            self.rc[k] += 1;
            if self.rc[k] == 1 {
                self.pending.insert(k);
            }
        }
    }

    /// Undo [`Search::apply`], restoring the decided price it replaced.
    fn undo(&mut self, c: usize, i: usize, decided_cost: f64) {
        let g = self.g;
        for &k in &g.kids[c][i] {
            self.rc[k] -= 1;
            if self.rc[k] == 0 {
                self.pending.remove(&k);
            }
        }
        self.sel[c] = NONE;
        set(&mut self.decided, c, false);
        self.decided_cost = decided_cost;
        self.pending.insert(c);
    }

    /// The candidates of pending class `c` with the bound each leads to.
    fn frame(&mut self, c: usize) -> Frame {
        let saved = self.decided_cost;
        let cands = self.cand[c].clone();
        let mut order: Vec<(usize, f64)> = cands
            .into_iter()
            .map(|i| {
                self.apply(c, i);
                let b = self.bound();
                self.undo(c, i, saved);
                (i, b)
            })
            .collect();
        order.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        Frame {
            c,
            order,
            pos: 0,
            applied: None,
            decided_cost: saved,
        }
    }

    /// A complete selection: keep it if it beats the incumbent.
    fn leaf(&mut self, roots: &[usize]) {
        if let Some(p) = price(self.g, &self.sel, roots) {
            if p < self.best {
                self.best = p;
                self.best_sel = Some(self.sel.clone());
            }
        }
    }

    /// Branch and bound; false when the budget ran out.
    fn run(&mut self, roots: &[usize]) -> bool {
        for &r in roots {
            self.rc[r] += 1;
            self.pending.insert(r);
        }
        let mut stack: Vec<Frame> = Vec::new();
        loop {
            match self.pending.first() {
                Some(&c) => {
                    let f = self.frame(c);
                    stack.push(f);
                }
                None => self.leaf(roots),
            }
            // Advance to the next choice to try, backtracking as needed.
            loop {
                let Some(mut f) = stack.pop() else {
                    return true;
                };
                if let Some(i) = f.applied.take() {
                    self.undo(f.c, i, f.decided_cost);
                }
                let cut = if self.best.is_finite() {
                    self.best - REL_TOL * self.best.abs()
                } else {
                    f64::INFINITY
                };
                let mut next = None;
                while let Some(&(i, b)) = f.order.get(f.pos) {
                    f.pos += 1;
                    if b >= cut {
                        f.pos = f.order.len();
                        break;
                    }
                    let g = self.g;
                    if self.reaches(&g.kids[f.c][i], f.c) {
                        continue;
                    }
                    next = Some(i);
                    break;
                }
                if let Some(i) = next {
                    self.explored += 1;
                    if self.explored > self.budget {
                        return false;
                    }
                    self.apply(f.c, i);
                    f.applied = Some(i);
                    stack.push(f);
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rewrites::lang::{Analysis, EG};
    use crate::types::Type;

    /// An e-graph of scalar `f64` expressions over inputs `x` and `y`, with
    /// the given classes merged; the roots are expressions by position.
    fn graph(exprs: &[&str], unions: &[(usize, usize)], roots: &[usize]) -> Inserted {
        let mut a = Analysis::default();
        for x in ["x", "y"] {
            a.inputs.insert(x.into(), Type::parse("f64").unwrap());
        }
        let mut eg = EG::new(a);
        let ids: Vec<Id> = exprs
            .iter()
            .map(|e| eg.add_expr(&e.parse().unwrap()))
            .collect();
        for &(a, b) in unions {
            eg.union(ids[a], ids[b]);
        }
        eg.rebuild();
        let roots = roots.iter().map(|&r| eg.find(ids[r])).collect();
        Inserted {
            egraph: eg,
            roots,
            names: IndexMap::new(),
            original: Vec::new(),
        }
    }

    /// The least price by brute force: every finite node of every class the
    /// roots can reach, all combinations.
    fn brute_force(ins: &Inserted, model: &CostModel) -> f64 {
        let g = Graph::new(&ins.egraph, model);
        let roots = dense_roots(&g, ins);
        let mut seen = vec![false; g.ids.len()];
        let mut stack = roots.clone();
        let mut classes = Vec::new();
        while let Some(c) = stack.pop() {
            if std::mem::replace(&mut seen[c], true) {
                continue;
            }
            classes.push(c);
            for ks in &g.kids[c] {
                stack.extend(ks);
            }
        }
        let options: Vec<Vec<usize>> = classes
            .iter()
            .map(|&c| {
                (0..g.nodes[c].len())
                    .filter(|&i| g.own[c][i].is_finite())
                    .collect()
            })
            .collect();
        let mut digit = vec![0usize; classes.len()];
        let mut sel = vec![NONE; g.ids.len()];
        let mut best = f64::INFINITY;
        loop {
            for (j, &c) in classes.iter().enumerate() {
                sel[c] = options[j].get(digit[j]).copied().unwrap_or(NONE);
            }
            if let Some(p) = price(&g, &sel, &roots) {
                best = best.min(p);
            }
            let mut j = 0;
            while j < digit.len() && digit[j] + 1 >= options[j].len() {
                digit[j] = 0;
                j += 1;
            }
            if j == digit.len() {
                return best;
            }
            digit[j] += 1;
        }
    }

    #[test]
    fn sharing_beats_the_cheapest_tree() {
        // The second root is `exp x · exp x` or `sqrt x`: as a tree the
        // product (2 + 21 + 21) is dearer than the root (7), but `exp x` is
        // computed anyway for the first root, so the product costs 2.
        let ins = graph(
            &["(exp x)", "(mul (exp x) (exp x))", "(sqrt x)"],
            &[(1, 2)],
            &[0, 1],
        );
        let model = CostModel::default();
        let ex = exact_choice(&ins, &model, 1000).unwrap();
        assert!(ex.proven);
        assert_eq!(ex.cost, 21.0 + 2.0);
        let g = Graph::new(&ins.egraph, &model);
        let tree = price(&g, &g.tree_best(), &dense_roots(&g, &ins)).unwrap();
        assert_eq!(tree, 21.0 + 7.0, "the cheapest-tree choice takes the root");
        assert!(ex.cost <= greedy_cost(&ins, &model));
        let f = ins.egraph.find(ins.roots[1]);
        assert!(matches!(ex.choice[&f], Node::Op(crate::ops::Op::Mul, _)));
    }

    #[test]
    fn two_classes_must_switch_together() {
        // `exp x + exp y`, where `exp x` is also `sin(x·y) · y` and `exp y`
        // is also `sin(x·y) · x`. Switching either alone pays for
        // `sin(x·y)` (2 + 21 + 2 = 25 > 21); switching both shares it:
        // 2 + 2 + 2 + 21 + 2 = 29 < 2 + 21 + 21 = 44. One class at a time,
        // no step improves.
        let ins = graph(
            &[
                "(add (exp x) (exp y))",
                "(exp x)",
                "(mul (sin (mul x y)) y)",
                "(exp y)",
                "(mul (sin (mul x y)) x)",
            ],
            &[(1, 2), (3, 4)],
            &[0],
        );
        let model = CostModel::default();
        let ex = exact_choice(&ins, &model, 1000).unwrap();
        assert_eq!(ex.cost, 29.0);
        assert_eq!(ex.cost, brute_force(&ins, &model));
        assert!(ex.cost <= greedy_cost(&ins, &model));
    }

    #[test]
    fn a_cycle_is_never_chosen() {
        // `x·y` is also `neg(neg(x·y))`: that loop through the class costs
        // nothing to "choose" if cycles were allowed (`neg` picked for both
        // classes); the program must take the product.
        let ins = graph(
            &["(mul x y)", "(neg (neg (mul x y)))", "(neg (mul x y))"],
            &[(0, 1)],
            &[2],
        );
        let model = CostModel::default();
        let ex = exact_choice(&ins, &model, 1000).unwrap();
        assert_eq!(ex.cost, 2.0 + 2.0);
        assert_eq!(ex.cost, brute_force(&ins, &model));
    }

    #[test]
    fn agrees_with_brute_force_on_random_graphs() {
        // Random scalar e-graphs: each new class gets one to three random
        // nodes over the classes so far (itself included, so cycles occur),
        // small enough to enumerate every selection.
        use crate::ops::{Math, Op};
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        let ops = [
            Op::Add,
            Op::Mul,
            Op::Sub,
            Op::Math(Math::Sin),
            Op::Math(Math::Exp),
            Op::Neg,
            Op::Math(Math::Sqrt),
        ];
        let (mut checked, mut searched) = (0, 0);
        for _ in 0..400 {
            let mut a = Analysis::default();
            for x in ["x", "y"] {
                a.inputs.insert(x.into(), Type::parse("f64").unwrap());
            }
            let mut eg = EG::new(a);
            let mut ids = vec![
                eg.add(Node::Input("x".into())),
                eg.add(Node::Input("y".into())),
            ];
            for _ in 0..6 + next(8) {
                let mut class: Option<Id> = None;
                for _ in 0..1 + next(3) {
                    let op = ops[next(ops.len())];
                    let mut pool = ids.clone();
                    pool.extend(class);
                    let kids = (0..op.arity())
                        .map(|_| eg.find(pool[next(pool.len())]))
                        .collect();
                    let id = eg.add(Node::Op(op, kids));
                    class = Some(match class {
                        Some(c) => {
                            eg.union(c, id);
                            eg.find(c)
                        }
                        None => id,
                    });
                }
                ids.extend(class);
            }
            eg.rebuild();
            let combinations: f64 = eg.classes().map(|c| c.nodes.len() as f64).product();
            if combinations > 300_000.0 {
                continue;
            }
            let last = *ids.last().unwrap();
            let other = ids[2 + next(ids.len() - 2)];
            let ins = Inserted {
                roots: vec![eg.find(last), eg.find(other)],
                egraph: eg,
                names: IndexMap::new(),
                original: Vec::new(),
            };
            for lambda in [0.0, 2.0] {
                let model = CostModel::default().lambda(lambda);
                let want = brute_force(&ins, &model);
                let greedy = greedy_cost(&ins, &model);
                let Some(ex) = exact_choice(&ins, &model, 1_000_000) else {
                    assert!(!want.is_finite() && !greedy.is_finite());
                    continue;
                };
                let graph = || format!("{:?}", ins.egraph.dump());
                assert!(
                    (ex.cost - want).abs() <= 1e-9 * want,
                    "{}: {} vs {want}",
                    graph(),
                    ex.cost
                );
                assert!(ex.cost <= greedy * (1.0 + 1e-9), "{}", graph());
                // The search alone, without the default extractor's
                // program to start from, finds the optimum too.
                let g = Graph::new(&ins.egraph, &model);
                let roots = dense_roots(&g, &ins);
                let (sel, proven, s) = search(&g, &roots, None, 1_000_000).unwrap();
                assert!(proven);
                assert_eq!(price(&g, &sel, &roots), Some(ex.cost), "{}", graph());
                checked += 1;
                searched += s.explored;
            }
        }
        assert!(checked > 200, "only {checked} graphs checked");
        assert!(searched > checked, "the search hardly branched");
    }
}
