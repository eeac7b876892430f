//! The call graph: the calls in each body, calls through templates, and a
//! callee-first order that reports each cycle.

use crate::error::span::{Diagnostic, Span};
use crate::lang::ast::*;
use std::collections::{HashMap, HashSet, VecDeque};

pub(super) fn collect_calls(
    e: &Expr,
    by_name: &HashMap<String, usize>,
    out: &mut Vec<(usize, Span)>,
) {
    e.walk(&mut |x| {
        if let ExprKind::Call { callee, .. } = &x.kind {
            if let Some(&i) = by_name.get(&callee.name) {
                out.push((i, x.span));
            }
        }
    });
}

/// The call graph with every call to a template (a function lowered at its
/// call sites) replaced by calls to the non-template functions the template
/// reaches through templates: what must be lowered before each function.
pub(super) fn through_templates(
    calls: &[Vec<(usize, Span)>],
    is_template: &[bool],
) -> Vec<Vec<(usize, Span)>> {
    (0..calls.len())
        .map(|i| {
            let mut out: Vec<(usize, Span)> = Vec::new();
            let mut seen = HashSet::new();
            let mut stack: Vec<(usize, Span)> = calls[i].clone();
            stack.reverse();
            while let Some((c, span)) = stack.pop() {
                if !seen.insert(c) {
                    continue;
                }
                if is_template.get(c).copied().unwrap_or(false) {
                    // Keep the span of the call in `i` for diagnostics.
                    stack.extend(calls[c].iter().rev().map(|&(cc, _)| (cc, span)));
                } else {
                    out.push((c, span));
                }
            }
            out
        })
        .collect()
}

/// Kahn's algorithm; reports each function that lies on a cycle.
pub(super) fn callee_first_order(
    items: &[&FnDef],
    calls: &[Vec<(usize, Span)>],
    defined: &[bool],
    errs: &mut Vec<Diagnostic>,
) -> Vec<usize> {
    let n = calls.len();
    let mut deps: Vec<HashSet<usize>> = calls
        .iter()
        .map(|cs| cs.iter().map(|(c, _)| *c).collect())
        .collect();
    let mut callers: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, d) in deps.iter().enumerate() {
        for &c in d {
            callers[c].push(i);
        }
    }
    let mut queue: VecDeque<usize> = (0..n)
        .filter(|&i| defined[i] && deps[i].is_empty())
        .collect();
    let mut done = vec![false; n];
    let mut order = Vec::new();
    while let Some(i) = queue.pop_front() {
        if done[i] {
            continue;
        }
        done[i] = true;
        order.push(i);
        for &c in &callers[i] {
            deps[c].remove(&i);
            if deps[c].is_empty() && !done[c] && defined[c] {
                queue.push_back(c);
            }
        }
    }
    // Functions left over call themselves or depend on a function that does.
    for start in 0..n {
        if done[start] || !defined[start] {
            continue;
        }
        // BFS from start's callees, looking for start.
        let mut parent: HashMap<usize, usize> = HashMap::new();
        let mut q: VecDeque<usize> = VecDeque::new();
        let mut first_call: HashMap<usize, Span> = HashMap::new();
        for (c, span) in &calls[start] {
            if !done[*c] && !first_call.contains_key(c) {
                first_call.insert(*c, *span);
                parent.insert(*c, start);
                q.push_back(*c);
            }
        }
        let mut found = false;
        while let Some(x) = q.pop_front() {
            if x == start {
                found = true;
                break;
            }
            for (c, _) in &calls[x] {
                if !done[*c] && !parent.contains_key(c) {
                    parent.insert(*c, x);
                    q.push_back(*c);
                }
            }
        }
        if !found {
            continue;
        }
        // Rebuild the path start -> ... -> start.
        let mut path = vec![start];
        let mut x = start;
        let mut guard = 0;
        while let Some(&p) = parent.get(&x) {
            path.push(p);
            if p == start || guard > n {
                break;
            }
            x = p;
            guard += 1;
        }
        path.reverse();
        let first = path.get(1).copied().unwrap_or(start);
        let span = first_call
            .get(&first)
            .copied()
            .unwrap_or(items[start].name.span);
        let names: Vec<&str> = path.iter().map(|&i| items[i].name.name.as_str()).collect();
        let fname = &items[start].name.name;
        let msg = if path.len() <= 2 {
            format!("`{fname}` calls itself")
        } else {
            format!("`{fname}` calls itself through {}", names.join(" -> "))
        };
        errs.push(
            Diagnostic::new(span, msg)
                .with_note("calls are inlined: only a function with static parameters may call itself, with other static values, until a static `if` stops it"),
        );
    }
    order
}
