//! How far from optimal the default extractor lands: on a corpus of small
//! value-and-gradient programs, at several λ, its price is compared with the
//! exact optimum of `egrad::internals::extract::exact` (exhaustive branch-and-bound).
//!
//! The corpus: the value-and-gradient program of every `@grad` function of
//! `examples/*.eg` and `examples/suite/*.eg`, plus generated ones (chains
//! `x_{k+1} = sin(x_k) · x_k`, and `f64[N]` chains of `exp`, `tanh` and
//! `mul`), each built and saturated as `pipeline::optimize_split` does, and
//! priced at λ ∈ {0, 0.25, 2, 1e6}. A case whose e-graph the exact search
//! cannot finish within [`BUDGET`] search nodes (or that the pipeline itself
//! leaves unoptimized for its size) is skipped and counted.
//!
//! Checked for each case: the default extractor's price ([`greedy_cost`]) is
//! the cost `extract` reports; the exact optimum is a complete acyclic
//! program whose price, recomputed here from the cost model, is its reported
//! cost; it is no dearer than the default extractor's (which seeds the
//! search); and the search seeded with nothing finishes on the same price. At least
//! [`MIN_COMPARED`] cases must be compared. The summary line (`--nocapture`)
//! says how many cases the default extractor got optimal (within 1e-9
//! relative) and the worst ratio; each case where it is not optimal is listed
//! with the classes where the two programs differ.

mod common;

use egg::Language;
use egrad::internals::differentiate::reverse;
use egrad::internals::extract::cost::CostModel;
use egrad::internals::extract::exact::{
    exact_search, exact_search_from, greedy_choice, greedy_cost, ExactResult,
};
use egrad::internals::extract::extract;
use egrad::internals::ir::{parse_functions, Function};
use egrad::internals::pipeline::Options;
use egrad::internals::rewrites::lang::{Analysis, Node, EG};
use egrad::internals::rewrites::rules::RuleSet;
use egrad::internals::rewrites::{insert_split, recompute_rule, saturate, Inserted, Limits};
use egrad::Program;
use std::collections::HashSet;

/// Search nodes the exact search may spend on one case.
const BUDGET: usize = 300_000;
/// Cases that must be compared exactly.
const MIN_COMPARED: usize = 20;
const LAMBDAS: [f64; 4] = [0.0, 0.25, 2.0, 1e6];
/// Relative slack for "optimal" and "no dearer".
const REL: f64 = 1e-9;

/// A value-and-gradient program: its name, the function, where the primal
/// ends.
struct VgProgram {
    name: String,
    vg: Function,
    primal_len: usize,
    /// The function's name, as `Options::function` takes it.
    function: String,
}

fn from_examples() -> Vec<VgProgram> {
    let mut out = Vec::new();
    for path in common::all_example_files() {
        let program = Program::from_file(&path).unwrap();
        for name in program.function_names() {
            let Some(spec) = program.grad_spec(name) else {
                continue;
            };
            let ad = reverse(&spec.primal, &spec.wrt).unwrap();
            let mut vg = ad.value_and_grad.clone();
            vg.name = name.to_string();
            out.push(VgProgram {
                name: format!("{} {name}", path.display()),
                vg,
                primal_len: ad.primal_len,
                function: name.to_string(),
            });
        }
    }
    out
}

fn differentiate(text: &str) -> VgProgram {
    let f = &parse_functions(text).unwrap()[0];
    let wrt: Vec<usize> = (0..f.params.len()).collect();
    let ad = reverse(f, &wrt).unwrap();
    VgProgram {
        name: f.name.clone(),
        vg: ad.value_and_grad,
        primal_len: ad.primal_len,
        function: f.name.clone(),
    }
}

/// `x_{k+1} = sin(x_k) · x_k`, `n` steps.
fn chain(n: usize) -> VgProgram {
    let mut t = format!("fn chain{n}(%x0: f64) -> f64 {{\n");
    for k in 0..n {
        t += &format!("  %s{k}: f64 = sin %x{k}\n");
        t += &format!("  %x{}: f64 = mul %s{k} %x{k}\n", k + 1);
    }
    t += &format!("  ret %x{n}\n}}\n");
    differentiate(&t)
}

/// `a_0 = x · w`, `a_{k+1} = exp(a_k) · tanh(a_k)` (every other step times
/// `w` instead of `exp`), summed: `f64[N]` arrays.
fn array_chain(n: usize) -> VgProgram {
    let mut t = format!("fn arrays{n}[N](%x: f64[N], %w: f64[N]) -> f64 {{\n");
    t += "  %a0: f64[N] = mul %x %w\n";
    for k in 0..n {
        t += &format!("  %t{k}: f64[N] = tanh %a{k}\n");
        if k % 2 == 0 {
            t += &format!("  %e{k}: f64[N] = exp %a{k}\n");
            t += &format!("  %a{}: f64[N] = mul %e{k} %t{k}\n", k + 1);
        } else {
            t += &format!("  %a{}: f64[N] = mul %w %t{k}\n", k + 1);
        }
    }
    t += &format!("  %s: f64 = sum %a{n}\n  ret %s\n}}\n");
    differentiate(&t)
}

fn corpus() -> Vec<VgProgram> {
    let mut ps = from_examples();
    ps.extend([1, 2, 3, 4, 6, 8, 12].map(chain));
    ps.extend((1..=6).map(array_chain));
    ps
}

/// The e-graph `optimize_split` extracts from, or None when it would leave
/// the program unoptimized for its size.
fn egraph(p: &VgProgram, rules: &[egg::Rewrite<Node, Analysis>]) -> Option<Inserted> {
    let limits = Limits::default();
    let ins = insert_split(&p.vg, Some(p.primal_len));
    if ins.egraph.total_number_of_nodes() > limits.nodes {
        return None;
    }
    Some(saturate(ins, rules, &limits).0)
}

/// The price of a choice, recomputed from the cost model: every class the
/// roots reach once; panics on a missing class or a cycle.
fn price_of(ins: &Inserted, model: &CostModel, choice: &indexmap::IndexMap<egg::Id, Node>) -> f64 {
    let eg = &ins.egraph;
    let mut done: HashSet<egg::Id> = HashSet::new();
    let mut on_path: HashSet<egg::Id> = HashSet::new();
    let mut total = Vec::new();
    fn visit(
        eg: &EG,
        model: &CostModel,
        choice: &indexmap::IndexMap<egg::Id, Node>,
        c: egg::Id,
        done: &mut HashSet<egg::Id>,
        on_path: &mut HashSet<egg::Id>,
        total: &mut Vec<(egg::Id, f64)>,
    ) {
        let c = eg.find(c);
        if done.contains(&c) {
            return;
        }
        assert!(on_path.insert(c), "class {c} is on a cycle");
        let node = choice
            .get(&c)
            .unwrap_or_else(|| panic!("class {c} has no choice"));
        assert!(eg[c].nodes.contains(node), "class {c} does not hold {node}");
        for k in node.children() {
            visit(eg, model, choice, *k, done, on_path, total);
        }
        on_path.remove(&c);
        done.insert(c);
        total.push((c, model.node_cost(eg, node).flops()));
    }
    for r in &ins.roots {
        visit(eg, model, choice, *r, &mut done, &mut on_path, &mut total);
    }
    total.sort_by_key(|(c, _)| *c);
    total.iter().map(|(_, x)| x).sum()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= REL * a.abs().max(b.abs())
}

/// Where the two programs differ: each class whose node differs (at most
/// `limit` of them, then how many more).
fn differences(ins: &Inserted, model: &CostModel, ex: &ExactResult, limit: usize) -> String {
    let greedy = greedy_choice(ins, model).expect("the default extractor found a program");
    let eg = &ins.egraph;
    let show = |n: &Node| {
        let kids: Vec<String> = n
            .children()
            .iter()
            .map(|k| eg.find(*k).to_string())
            .collect();
        format!(
            "({n}{}{}) = {}",
            if kids.is_empty() { "" } else { " " },
            kids.join(" "),
            model.node_cost(eg, n)
        )
    };
    let mut parts = Vec::new();
    for (c, n) in &greedy {
        match ex.choice.get(c) {
            Some(m) if m == n => {}
            Some(m) => parts.push(format!(
                "class {c}: default {} / exact {}",
                show(n),
                show(m)
            )),
            None => parts.push(format!(
                "class {c}: default {} / exact does not reach it",
                show(n)
            )),
        }
    }
    for (c, m) in &ex.choice {
        if !greedy.contains_key(c) {
            parts.push(format!(
                "class {c}: default does not reach it / exact {}",
                show(m)
            ));
        }
    }
    let more = parts.len().saturating_sub(limit);
    parts.truncate(limit);
    if more > 0 {
        parts.push(format!("and {more} more classes"));
    }
    parts.join("; ")
}

#[test]
fn default_extractor_against_exact() {
    let mut rules = RuleSet::builtin().unwrap().rewrites();
    rules.push(recompute_rule());
    let mut compared = 0;
    let mut optimal = 0;
    let mut worst: (f64, String) = (1.0, String::new());
    let mut skipped: Vec<String> = Vec::new();
    let mut explored = 0;
    let (mut cheaper, mut gap) = (0, 0.0f64);
    for p in corpus() {
        let Some(ins) = egraph(&p, &rules) else {
            skipped.extend(LAMBDAS.iter().map(|l| {
                format!(
                    "{} at λ={l}: the pipeline leaves it unoptimized (over the node limit)",
                    p.name
                )
            }));
            continue;
        };
        for l in LAMBDAS {
            let model = Options::default()
                .function(&p.function)
                .lambda(l)
                .cost_model()
                .for_function(&p.vg);
            let case = format!("{} at λ={l}", p.name);
            let greedy = greedy_cost(&ins, &model);
            let extracted = extract(&ins, &p.vg, &model).unwrap();
            assert!(
                close(greedy, extracted.cost.flops()),
                "{case}: greedy_cost {greedy} but extract's cost {}",
                extracted.cost
            );
            let ex = exact_search(&ins, &model, BUDGET).expect("a program exists");
            assert_eq!(ex.greedy, greedy, "{case}");
            assert!(
                ex.cost <= greedy,
                "{case}: best seen {} above the default's {greedy}",
                ex.cost
            );
            if !ex.proven {
                // Too large for the budget: say what the search saw anyway.
                skipped.push(if ex.cost < greedy {
                    format!(
                        "{case}: not finished in {BUDGET} search nodes; it saw a program {:.2}% cheaper than the default's ({} < {greedy}): {}",
                        100.0 * (1.0 - ex.cost / greedy),
                        ex.cost,
                        differences(&ins, &model, &ex, 4)
                    )
                } else {
                    format!("{case}: not finished in {BUDGET} search nodes; it saw nothing cheaper than the default's {greedy}")
                });
                continue;
            }
            explored += ex.nodes_explored;
            let recomputed = price_of(&ins, &model, &ex.choice);
            assert!(
                close(recomputed, ex.cost),
                "{case}: exact cost {} but its program prices {recomputed}",
                ex.cost
            );
            assert!(
                ex.cost <= greedy * (1.0 + REL),
                "{case}: exact {} above the default extractor's {greedy}",
                ex.cost
            );
            // The search on its own, not seeded with the default's program,
            // finishes on the same optimum.
            let alone = exact_search_from(&ins, &model, BUDGET, false).expect("a program exists");
            assert!(alone.proven, "{case}: unseeded search did not finish");
            assert!(
                close(alone.cost, ex.cost),
                "{case}: unseeded search ends at {}, seeded at {}",
                alone.cost,
                ex.cost
            );
            compared += 1;
            if close(ex.cost, greedy) {
                optimal += 1;
            }
            if ex.cost < greedy {
                cheaper += 1;
                gap = gap.max(greedy - ex.cost);
                println!(
                    "{case}: default {greedy}, exact {} (ratio {:.12}, {} search nodes): {}",
                    ex.cost,
                    greedy / ex.cost,
                    ex.nodes_explored,
                    differences(&ins, &model, &ex, 8)
                );
            }
            let ratio = if ex.cost > 0.0 { greedy / ex.cost } else { 1.0 };
            if ratio > worst.0 {
                worst = (ratio, case);
            }
        }
    }
    let worst_at = if worst.1.is_empty() {
        String::new()
    } else {
        format!(" ({})", worst.1)
    };
    println!(
        "extractor quality: {compared} cases, {optimal} optimal, worst ratio {:.3}{worst_at}; {} skipped (too large); exact strictly cheaper in {cheaper} (largest gap {gap} flops); {explored} search nodes",
        worst.0,
        skipped.len()
    );
    for s in &skipped {
        println!("  skipped: {s}");
    }
    assert!(
        compared >= MIN_COMPARED,
        "only {compared} cases compared exactly"
    );
}
