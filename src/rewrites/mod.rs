//! The e-graph: the IR as an egg language ([`lang`]), rules loaded from
//! `rulesets/*.rules` ([`rules`]), and saturation under explicit limits
//! ([`saturate`]).

pub mod lang;
mod rule_types;
pub mod rules;

use crate::ir::{Function, VarId};
use crate::ops::{Op, VJP_SEQ};
use crate::types::Type;
use egg::{Id, Runner, StopReason};
use indexmap::IndexMap;
use lang::{Analysis, Node, EG};
use smallvec::SmallVec;
use std::time::{Duration, Instant};

/// Saturation limits. They are checked between iterations, so the graph can
/// overshoot the node limit by one iteration's growth.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// Stop when the e-graph has more e-nodes than this.
    pub nodes: usize,
    /// Stop after this many iterations.
    pub iterations: usize,
    /// Stop after this much time.
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
    /// The program as inserted, one `(class, node)` per statement in program
    /// order, a residual's `(stash p)` just before the statement that first
    /// reads it. Taking the first entry of each class is always an acyclic
    /// program (the extractor starts from it); kept canonical by
    /// [`saturate`].
    pub original: Vec<(Id, Node)>,
}

impl Inserted {
    fn canonical(mut self) -> Inserted {
        let eg = &self.egraph;
        self.roots = self.roots.iter().map(|r| eg.find(*r)).collect();
        self.names =
            std::mem::take(&mut self.names)
                .into_iter()
                .fold(IndexMap::new(), |mut m, (id, n)| {
                    m.entry(eg.find(id)).or_insert(n);
                    m
                });
        for (id, n) in &mut self.original {
            *id = eg.find(*id);
            for c in egg::Language::children_mut(n) {
                *c = eg.find(*c);
            }
        }
        self
    }
}

/// Add a function's statements to a fresh e-graph (hash-consing merges
/// structurally equal statements at once).
pub fn insert(f: &Function) -> Inserted {
    insert_split(f, None)
}

/// [`insert`] for a value-and-gradient function whose first `primal_len`
/// statements are the primal and the rest the pullback: every primal value
/// a pullback statement reads is read through the residual marker
/// `(bwd p)`, whose class starts with the one choice AD made, `(stash p)`
/// (see [`lang::Node`]). The recompute rewrite ([`recompute_rule`]) adds the
/// other choice.
pub fn insert_split(f: &Function, primal_len: Option<usize>) -> Inserted {
    // The e-graph holds values: a function with its own derivative rules
    // is its value (differentiated already, if it was to be).
    let plain;
    let (f, primal_len) = if f.has_customs() {
        plain = f.without_customs();
        (&plain, primal_len.map(|n| f.len_without_customs(n)))
    } else {
        (f, primal_len)
    };
    let mut analysis = Analysis::default();
    for p in &f.params {
        analysis
            .inputs
            .insert(f.var_name(p.var).to_string(), f.ty(p.var).clone());
    }
    let mut eg = EG::new(analysis);
    let mut class: Vec<Option<Id>> = vec![None; f.vars.len()];
    let mut names: IndexMap<Id, String> = IndexMap::new();
    let mut original: Vec<(Id, Node)> = Vec::new();
    let get = |class: &[Option<Id>], v: VarId| class[v.index()].expect("validated IR");
    for p in &f.params {
        let id = eg.add(Node::Input(f.var_name(p.var).into()));
        class[p.var.index()] = Some(id);
    }
    let defs = f.definitions();
    let split = primal_len.unwrap_or(f.stmts.len());
    // `(bwd p)` with its stash choice (not for an input: read in place).
    let bwd = |eg: &mut EG, original: &mut Vec<(Id, Node)>, p: Id, input: bool| {
        let b = eg.add(Node::Bwd([p]));
        if !input {
            let st = eg.add(Node::Stash([p]));
            eg.union(b, st);
            original.push((b, Node::Stash([p])));
        }
        b
    };
    // For a pullback value that is a primal value obtained again (a VJP
    // template recomputing `sin x`, say): that primal value's class.
    let mut mirror: Vec<Option<Id>> = vec![None; f.vars.len()];
    for p in &f.params {
        mirror[p.var.index()] = class[p.var.index()];
    }
    for (i, s) in f.stmts.iter().enumerate() {
        let pullback = i >= split;
        let ty_child = |eg: &mut EG| eg.add(Node::Ty(f.ty(s.var).into()));
        if pullback && !s.args.is_empty() {
            // The same op on the same primal values as a primal statement:
            // read that value through the marker, so it can be stored
            // (shared with the primal) or recomputed.
            let mirrored: Option<SmallVec<[Id; 2]>> =
                s.args.iter().map(|a| mirror[a.index()]).collect();
            if let Some(mut ch) = mirrored {
                if s.op.needs_annotation() {
                    ch.push(ty_child(&mut eg));
                }
                if let Some(p) = eg.lookup(Node::Op(s.op, ch)) {
                    let b = bwd(&mut eg, &mut original, p, false);
                    class[s.var.index()] = Some(b);
                    mirror[s.var.index()] = Some(p);
                    continue;
                }
            }
        }
        let mut ch: SmallVec<[Id; 2]> = SmallVec::new();
        for a in &s.args {
            let c = get(&class, *a);
            ch.push(match defs[a.index()] {
                Some(d) if pullback && d < split => bwd(&mut eg, &mut original, c, false),
                None if pullback => bwd(&mut eg, &mut original, c, true),
                _ => c,
            });
        }
        if s.op.needs_annotation() {
            ch.push(ty_child(&mut eg));
        }
        let node = Node::Op(s.op, ch);
        let id = eg.add(node.clone());
        original.push((id, node));
        class[s.var.index()] = Some(id);
        if !pullback {
            mirror[s.var.index()] = Some(id);
        }
        let name = f.var_name(s.var);
        if !name.chars().all(|c| c.is_ascii_digit()) {
            names.entry(id).or_insert_with(|| name.to_string());
        }
    }
    if primal_len.is_some() {
        let class: Vec<Id> = class.iter().map(|c| c.unwrap_or(Id::from(0))).collect();
        checkpoint_choices(&mut eg, f, &class, split, &mut names);
    }
    eg.rebuild();
    let roots = f.rets.iter().map(|r| get(&class, *r)).collect();
    Inserted {
        egraph: eg,
        roots,
        names,
        original,
    }
    .canonical()
}

/// The checkpoint intervals offered for a loop of `n` steps: powers of two
/// up to twice `√n`, and `⌈√n⌉` (where a tape and a segment weigh the same).
pub fn checkpoint_intervals(n: u64) -> Vec<u64> {
    let root = (n as f64).sqrt().ceil() as u64;
    let mut ks: Vec<u64> = std::iter::successors(Some(2u64), |k| Some(k * 2))
        .take_while(|k| *k <= 2 * root && *k < n)
        .collect();
    if root > 1 && root < n && !ks.contains(&root) {
        ks.push(root);
    }
    ks.sort_unstable();
    ks
}

/// Loop checkpointing as choices. AD tapes every state of a loop
/// (`looptape L 1`, whose row 0 is the loop's result) and walks the
/// tape back (`loopvjp L 1 0`). For each interval `k` of
/// [`checkpoint_intervals`] this adds a tape keeping every `k`-th state,
/// its row 0 (the final state) as another way to get the result, and its `loopvjp` in
/// both modes (segment buffer, or recompute per state) as another way to
/// get the cotangent, reading the tape through `(bwd ...)` (stored, or
/// recomputed in the pullback). The result can also come from the plain
/// `loop` (when the pullback recomputes its tape).
fn checkpoint_choices(
    eg: &mut EG,
    f: &Function,
    class: &[Id],
    split: usize,
    names: &mut IndexMap<Id, String>,
) {
    let defs = f.definitions();
    for s in &f.stmts[split..] {
        // Plain, or with a scan's sequence cotangent (then `l` is the copy
        // of the taped loop whose VJP also gives the row's cotangent).
        let (l, flags, scan) = match s.op {
            Op::LoopVjp(l, 1, flags @ (0 | VJP_SEQ), scan) => (l, flags, scan),
            _ => continue,
        };
        let (tape, g) = (s.args[0], s.args[1]);
        // A scan's sequence: as the primal reads it, and as the pullback does.
        let seq_fwd: Vec<Id> = Vec::new();
        let seq_bwd: Vec<Id> = s
            .args
            .get(2)
            .map(|a| class[a.index()])
            .into_iter()
            .collect();
        let Some(d) = defs[tape.index()] else {
            continue;
        };
        let def = &f.stmts[d];
        let (Op::LoopTape(tl, 1, _), true) = (def.op, d < split) else {
            continue;
        };
        let seq_fwd: Vec<Id> = if scan {
            def.args
                .get(1)
                .map(|a| class[a.index()])
                .into_iter()
                .collect()
        } else {
            seq_fwd
        };
        // (A walk may run on a copy of the taped loop: a scan's with the
        // sequence's cotangent, or a tangent loop's whose VJP is the
        // tangent of a VJP; the body is the same.)
        let same_body =
            f.loops.get(tl as usize).map(|t| &t.body) == f.loops.get(l as usize).map(|w| &w.body);
        let Some(lp) = f
            .loops
            .get(l as usize)
            .filter(|_| tl == l || flags == VJP_SEQ || same_body)
        else {
            continue;
        };
        // The cotangent rows' type, for the sequence's cotangent.
        let annot: Vec<Id> = if flags == VJP_SEQ {
            match lp.seq_cotangent_type() {
                Some(t) => vec![eg.add(Node::Ty(t.into()))],
                None => continue,
            }
        } else {
            Vec::new()
        };
        let x = class[def.args[0].index()];
        // The primal's result: the tape's row 0.
        let result = f.stmts[..split]
            .iter()
            .find(|r| r.op == Op::Index(0) && r.args[0] == tape)
            .map(|r| class[r.var.index()]);
        let ct = class[s.var.index()];
        let gc = class[g.index()];
        if let Some(y) = result {
            let kids: SmallVec<[Id; 2]> =
                std::iter::once(x).chain(seq_fwd.iter().copied()).collect();
            let plain = eg.add(Node::Op(Op::Loop(tl, scan), kids));
            eg.union(y, plain);
        }
        let st = lp.state();
        // A run-time count: intervals for a count of a thousand.
        let n = lp.static_count().unwrap_or(crate::types::DEFAULT_DIM);
        for k in checkpoint_intervals(n) {
            let rows = lp.tape_rows(k);
            let mut shape = vec![rows];
            shape.extend(st.shape.iter().cloned());
            let ty = eg.add(Node::Ty(Type::array(st.dtype, shape).into()));
            let kids: SmallVec<[Id; 2]> = std::iter::once(x)
                .chain(seq_fwd.iter().copied())
                .chain(std::iter::once(ty))
                .collect();
            let tk = eg.add(Node::Op(Op::LoopTape(tl, k as u32, scan), kids));
            names
                .entry(tk)
                .or_insert_with(|| format!("{}.every{k}", f.var_name(tape)));
            if let Some(y) = result {
                let last = eg.add(Node::Op(Op::Index(0), SmallVec::from_slice(&[tk])));
                eg.union(y, last);
            }
            let read = eg.add(Node::Bwd([tk]));
            let stash = eg.add(Node::Stash([tk]));
            eg.union(read, stash);
            for m in 0..2 {
                let kids: SmallVec<[Id; 2]> = [read, gc]
                    .into_iter()
                    .chain(seq_bwd.iter().copied())
                    .chain(annot.iter().copied())
                    .collect();
                let vjp = eg.add(Node::Op(Op::LoopVjp(l, k as u32, m | flags, scan), kids));
                eg.union(ct, vjp);
            }
        }
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
    saturate_observed(ins, rules, limits, None)
}

/// Told at the start of each saturation iteration: its number (from 1),
/// then the e-graph's e-nodes and e-classes as the iteration finds them.
/// It only watches: saturation runs the same with or without it.
pub type IterationHook = Box<dyn FnMut(usize, usize, usize)>;

/// egg's default match limit of its backoff scheduler.
const DEFAULT_MATCH_LIMIT: usize = 1_000;

/// [`saturate`], telling `hook` (if any) as each iteration starts.
pub fn saturate_observed(
    ins: Inserted,
    rules: &[egg::Rewrite<Node, Analysis>],
    limits: &Limits,
    hook: Option<IterationHook>,
) -> (Inserted, SaturationReport) {
    let start = Instant::now();
    let Inserted {
        egraph,
        roots,
        names,
        original,
    } = ins;
    // egg's backoff scheduler bans a rule for a while once it matches more
    // than its limit (1,000 by default): scaled with the program, a rule
    // that matches once per statement is banned as often in a long program
    // as in a short one, so the iterations do not grow with its length.
    let match_limit = DEFAULT_MATCH_LIMIT.max(egraph.number_of_classes());
    let mut runner = Runner::default()
        .with_scheduler(egg::BackoffScheduler::default().with_initial_match_limit(match_limit))
        .with_egraph(egraph)
        .with_node_limit(limits.nodes)
        .with_iter_limit(limits.iterations)
        .with_time_limit(limits.time);
    if let Some(mut hook) = hook {
        // egg runs hooks once the limits have passed, before searching; a
        // hook that never fails and never touches the graph changes nothing.
        runner = runner.with_hook(move |r| {
            hook(
                r.iterations.len() + 1,
                r.egraph.total_number_of_nodes(),
                r.egraph.number_of_classes(),
            );
            Ok(())
        });
    }
    let runner = runner.run(rules);
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
    (
        Inserted {
            egraph: runner.egraph,
            roots,
            names,
            original,
        }
        .canonical(),
        report,
    )
}

/// The recompute choice as a rewrite: `(bwd (op a b)) => (op (bwd a) (bwd b))`
/// for every op (the annotation child of `bcast`/`zero` is kept as is), and
/// `(bwd c) => c` for a constant. One custom applier serves every op of the
/// op table, so a new op gets its recompute choice without a rule to write.
pub fn recompute_rule() -> egg::Rewrite<Node, Analysis> {
    let searcher: egg::Pattern<Node> = "(bwd ?e)".parse().expect("a valid pattern");
    egg::Rewrite::new("recompute", searcher, Recompute).expect("a valid rewrite")
}

struct Recompute;

impl egg::Applier<Node, Analysis> for Recompute {
    fn apply_one(
        &self,
        egraph: &mut EG,
        eclass: Id,
        subst: &egg::Subst,
        _searcher_ast: Option<&egg::PatternAst<Node>>,
        _rule_name: egg::Symbol,
    ) -> Vec<Id> {
        let e = subst["?e".parse().expect("a valid variable")];
        let nodes: Vec<Node> = egraph[e].nodes.clone();
        let mut changed = Vec::new();
        for n in nodes {
            let Node::Op(op, ch) = n else { continue };
            let k = op.operand_count(ch.len());
            let kids: SmallVec<[Id; 2]> = ch
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    if i < k {
                        egraph.add(Node::Bwd([*c]))
                    } else {
                        *c
                    }
                })
                .collect();
            let id = egraph.add(Node::Op(op, kids));
            if egraph.union(eclass, id) {
                changed.push(id);
            }
        }
        changed
    }
}
