//! Random programs: whole programs and helper functions (part 1 of 3). See `mod.rs`.

#[allow(unused_imports)]
use super::*;

/// A long `iterate` the generator wrote. Its count (`#C{id}#`) and step
/// size (`#H{id}#`) are placeholders until
/// `calibrate` has lowered the program and seen how many statements the
/// step is: the count is then chosen so that unrolling would just pass
/// `UNROLL_STMTS` (a loop that costs little to run and to differentiate),
/// and h so that count × h is `hc`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LongIt {
    pub(crate) hc: f64,
    /// count × statements of the step aimed at.
    pub(crate) target: f64,
    /// A run-time count (`n`): h is `hc` over this count (the largest the
    /// check runs).
    pub(crate) runtime: Option<u64>,
}

thread_local! {
    /// The long iterates of the program being generated (on this thread),
    /// by id.
    pub(crate) static LONGS: std::cell::RefCell<Vec<LongIt>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `text` with the placeholders of the long iterates filled in with
/// `counts` (by id).
pub(crate) fn fill(text: &str, counts: &[u64]) -> String {
    if !text.contains("#H") {
        return text.to_string();
    }
    let longs = LONGS.with(|l| l.borrow().clone());
    let mut out = text.to_string();
    for (id, (l, &c)) in longs.iter().zip(counts).enumerate() {
        let h = format!("{:.3e}", l.hc / l.runtime.unwrap_or(c) as f64);
        out = out
            .replace(&format!("#C{id}#"), &c.to_string())
            .replace(&format!("#H{id}#"), &h);
    }
    out
}

/// Every loop of `f` and of its loops' bodies with a literal count (the
/// generator writes no run-time counts): (count, statements of the step as
/// egrad weighs them).
pub(crate) fn loops_of(f: &Function, out: &mut Vec<(u64, usize)>) {
    for l in &f.loops {
        // (A scan's count is the length of its sequence, not a long iterate's.)
        if let (Dim::Lit(count), false) = (&l.count, l.is_scan()) {
            let count = *count;
            out.push((count, step_weight(&l.body)));
        }
        loops_of(&l.body, out);
    }
}

/// How many statements egrad counts for one step of a loop with this
/// body (what decides between a loop and unrolling): the body without
/// unpacking and packing its state (the rows `index i` of the parameter,
/// `index 0` of a scalar's row, `unindex` and the `add`s that pack), plus
/// the bodies of the loops it runs. Where a step's own statement looks like
/// packing this is less than egrad counts: the count is then higher than
/// needed, never too low.
pub(crate) fn step_weight(body: &Function) -> usize {
    let s = body.params[0].var;
    let rows: Vec<_> = body
        .stmts
        .iter()
        .filter(|st| matches!(st.op, Op::Index(_)) && st.args[0] == s)
        .map(|st| st.var)
        .collect();
    let scalars = body
        .stmts
        .iter()
        .filter(|st| st.op == Op::Index(0) && rows.contains(&st.args[0]))
        .count();
    let unindex = body
        .stmts
        .iter()
        .filter(|st| matches!(st.op, Op::Unindex(_)))
        .count();
    let overhead = if rows.is_empty() {
        0
    } else {
        rows.len() + scalars + 2 * unindex.saturating_sub(1) + 1
    };
    let nested: usize = body.loops.iter().map(|l| l.body.stmts.len()).sum();
    body.stmts.len().saturating_sub(overhead) + nested
}

/// Statements one run of the loop `l` executes (its loops' included).
pub(crate) fn loop_cost(l: &egrad::internals::ir::Loop) -> u64 {
    let inner: u64 = l.body.loops.iter().map(loop_cost).sum();
    let count = l.count.extent(&|_| None).unwrap_or(0);
    count * (l.body.stmts.len() as u64 + inner)
}

/// Loop counts (by id) for the long iterates of `src` (a program with
/// placeholders): lowered once with long counts to weigh each step, then
/// count ≈ target / weight, lowered again (and raised where egrad unrolled
/// it) until each is a loop. Returns the counts, those the check must
/// find as loops (every long iterate lowered in the first pass, and every
/// one written in `loss_text`) and the statements the loss's loops execute
/// in one evaluation.
pub(crate) fn calibrate(src: &str, loss_text: &str) -> (Vec<u64>, Vec<u64>, u64) {
    let longs = LONGS.with(|l| l.borrow().clone());
    if is_wild() {
        return (wild_counts(longs.len()), Vec::new(), 0);
    }
    let mut counts: Vec<u64> = (0..longs.len() as u64).map(|i| 3000 + 8 * i).collect();
    let present: Vec<usize> = (0..longs.len())
        .filter(|i| src.contains(&format!("#C{i}#")))
        .collect();
    if present.is_empty() {
        return (counts, Vec::new(), 0);
    }
    // The id a loop of `count` stands for (peeled steps make it up to 3
    // less than the count written).
    let owner = |counts: &[u64], count: u64| {
        present
            .iter()
            .copied()
            .find(|&i| counts[i] >= count && counts[i] - count <= 3)
    };
    let lowered = |counts: &[u64]| -> Option<(Vec<(u64, usize)>, u64)> {
        let p = Program::parse(&fill(src, counts)).ok()?;
        let mut loops = Vec::new();
        for name in p.function_names() {
            if let Ok(f) = p.ir(name) {
                loops_of(f, &mut loops);
            }
        }
        let cost = p
            .ir("loss")
            .map_or(0, |f| f.loops.iter().map(loop_cost).sum());
        Some((loops, cost))
    };
    // Counts apart by at least 4, so that each loop has one owner.
    let separate = |counts: &[u64], i: usize, mut c: u64| {
        while present.iter().any(|&j| j != i && counts[j].abs_diff(c) < 4) {
            c += 4;
        }
        c
    };
    let in_loss = |i: usize| loss_text.contains(&format!("#C{i}#"));
    let Some((loops, _)) = lowered(&counts) else {
        let expected = present.iter().map(|&i| counts[i]).collect();
        return (counts, expected, 0);
    };
    let mut weight: Vec<Option<usize>> = vec![None; longs.len()];
    for (c, w) in loops {
        if let Some(i) = owner(&counts, c) {
            weight[i] = Some(weight[i].map_or(w, |x| x.min(w)));
        }
    }
    for &i in &present {
        if let Some(w) = weight[i] {
            let c = (longs[i].target / w.max(1) as f64).ceil() as u64 + 3;
            counts[i] = separate(&counts, i, c);
        }
    }
    let mut cost = 0;
    for _ in 0..8 {
        let Some((loops, c)) = lowered(&counts) else {
            break;
        };
        cost = c;
        let found: Vec<usize> = loops.iter().filter_map(|l| owner(&counts, l.0)).collect();
        let missing: Vec<usize> = present
            .iter()
            .copied()
            .filter(|&i| weight[i].is_some() && !found.contains(&i))
            .collect();
        if missing.is_empty() {
            break;
        }
        for i in missing {
            counts[i] = separate(&counts, i, counts[i] * 5 / 4 + 1);
        }
    }
    let expected = present
        .iter()
        .filter(|&&i| weight[i].is_some() || in_loss(i))
        .map(|&i| counts[i])
        .collect();
    (counts, expected, cost)
}

// ---------------------------------------------------------------- programs

/// A generated program and what to check.
#[derive(Clone, Debug)]
pub(crate) struct Generated {
    pub(crate) source: String,
    pub(crate) n: usize,
    pub(crate) m: usize,
    /// `dloss`'s wrt, as indices of the loss's parameters.
    pub(crate) wrt: Vec<usize>,
    /// The index of the scalar parameter `s` (d1 and d2 exist).
    pub(crate) scalar: Option<usize>,
    /// `hv = @jvp(s) d1` exists.
    pub(crate) hv: bool,
    /// `vg = @value_and_grad(...) loss`, with dloss's wrt, exists.
    pub(crate) vg: bool,
    /// `jv = @jvp(...) loss` exists, with this wrt.
    pub(crate) jv: Option<Vec<usize>>,
    /// Constructs (see `tag`) the program has.
    pub(crate) tags: Vec<&'static str>,
    /// `d2` (and `hv` if chosen) were left out: egrad does not
    /// differentiate a gradient through a loop yet.
    pub(crate) second_dropped: bool,
    /// `hv` was chosen but left out with `d2`.
    pub(crate) hv_dropped: bool,
    /// `d3 = @grad(s) d2` exists (with `d2`, unless refused).
    pub(crate) d3: bool,
    /// `t3 = @grad(s) hv` exists (with `hv`, unless refused).
    pub(crate) t3: bool,
    /// Why `d3` or `t3` was left out, if egrad refused one.
    pub(crate) third_refused: Option<&'static str>,
    /// Counts of the long iterates that must be loops in the IR (up to 3
    /// steps less: steps of a constant state are peeled).
    pub(crate) loop_counts: Vec<u64>,
    /// Statements the loss's loops execute in one evaluation.
    pub(crate) loop_cost: u64,
    /// The loss has a run-time count `n: i64` (its last parameter): the
    /// counts to check it at (the first is the one its step sizes are made
    /// for), else empty.
    pub(crate) rt_counts: Vec<u64>,
    /// The loss's own text runs a loop of count `n` (its own, or a
    /// helper's it passes `n` to).
    pub(crate) rt_in_loss: bool,
    /// The program was drawn with the newer constructs (`scan`, `reverse`
    /// and `concat`, static recursion).
    pub(crate) novel: bool,
    /// The program was drawn with run-time integers.
    pub(crate) ints: bool,
    /// The program was drawn with nested `tabulate`s or indexed stacks.
    pub(crate) nest: bool,
    /// The program was drawn with `match`.
    pub(crate) matches: bool,
    /// The program was drawn with random numbers from keys.
    pub(crate) keys: bool,
    /// The program was drawn with functions with their own derivative
    /// rules, with native kernels.
    pub(crate) custom: bool,
    pub(crate) kernels: bool,
    /// The program calls a native kernel: `d2`, `hv` and `jv` are left
    /// out (`second_dropped`, `hv_dropped`, `jv_kernel`), and its f32 copy
    /// is not checked.
    pub(crate) kernel_used: bool,
    /// `jv` was drawn and left out: the program calls a native kernel.
    pub(crate) jv_kernel: bool,
    /// The helper that recurses through a static depth.
    pub(crate) rec_helper: Option<String>,
    /// The loss's derivatives were left out: egrad rejects them (a scan in
    /// a loop's step, see `generate_with`).
    pub(crate) deriv_dropped: bool,
    /// The length `L` of the sequence parameters (`zs`, `Zs`), if any.
    pub(crate) l: usize,
    /// The program was drawn with the sequence constructs (`scan` and
    /// `scan_all` over a sequence of length `L`, `iterate_until` with a
    /// run-time bound `u`).
    pub(crate) seq: bool,
    /// The indices of the loss's sequence parameters of length `L`.
    pub(crate) seq_params: Vec<usize>,
    /// A sequence of length `L` was drawn among `jv`'s wrt and left out:
    /// forward mode with respect to it is not supported.
    pub(crate) jv_seq_left_out: bool,
    /// `jv` was left out: egrad refuses it (a documented limit, this one).
    pub(crate) jv_refused: Option<&'static str>,
    /// Why `d2` and `hv` were left out (a documented limit, see
    /// `second_dropped`).
    pub(crate) second_refused: Option<&'static str>,
}

/// The documented limit of forward mode an error of egrad reports, if it
/// is one (by its message, `AdLimit` in `src/differentiate/mod.rs`): a
/// gradient through a loop, the sequence of a `scan`, or a use of a
/// loop's gradient forward mode cannot push (the tape `scan_all` reads, or
/// a gradient with respect to a sequence).
pub(crate) fn refused_forward(e: &str) -> Option<&'static str> {
    [
        (
            "differentiating this gradient of a `scan`",
            "a scan's gradient with respect to its sequence",
        ),
        (
            "forward mode through a scan's gradient with respect to its sequence",
            "forward mode through a scan's gradient with respect to its sequence",
        ),
        (
            "forward mode through this use of a loop's gradient",
            "forward mode through a loop's gradient (scan_all's tape, a sequence's gradient)",
        ),
        (
            "this derivative of a loop whose step reads values of other shapes",
            "forward mode through the gradient of a loop with captures (its tape)",
        ),
    ]
    .into_iter()
    .find(|(m, _)| e.contains(m))
    .map(|r| r.1)
}

/// One more than the largest expression depth (`EGRAD_RANDOM_DEPTH`, to
/// hunt with bigger programs; 4 by default).
pub(crate) fn max_depth() -> usize {
    env_u64("EGRAD_RANDOM_DEPTH").map_or(4, |d| d.max(2) as usize)
}

/// The share of programs with long iterates (loops), 0.2 unless
/// `EGRAD_RANDOM_LOOPS` (a number from 0 to 1) says otherwise.
pub(crate) fn loop_share() -> f64 {
    env_share("EGRAD_RANDOM_LOOPS", 0.2)
}

/// The most statements a loss's loops may execute in one evaluation when a
/// loop is nested in another (the interpreter runs some 10⁷ a second, and
/// checking a program evaluates the loss and its derivatives some 100
/// times): more, and the program is generated again without nesting.
pub(crate) const NESTED_COST: u64 = 50_000;

/// The share of programs with the newer constructs (`scan`, `reverse` and
/// `concat`, static recursion), 0.2 unless `EGRAD_RANDOM_NEW` (a number
/// from 0 to 1) says otherwise.
pub(crate) fn novel_share() -> f64 {
    env_share("EGRAD_RANDOM_NEW", 0.2)
}

/// The share of programs with run-time integers (`i64` parameters of the
/// loss, gathers, `scatter_add`, integer arithmetic), 0.3 unless
/// `EGRAD_RANDOM_INTS` (a number from 0 to 1) says otherwise.
pub(crate) fn int_share() -> f64 {
    env_share("EGRAD_RANDOM_INTS", 0.3)
}

/// The share of programs with the sequence constructs (`scan` and
/// `scan_all` over a sequence of length `L`, `iterate_until` with a run-time
/// bound), 0.15 unless `EGRAD_RANDOM_SEQ` (a number from 0 to 1) says
/// otherwise (they cost some 2.5 times as much to check as the others).
pub(crate) fn seq_share() -> f64 {
    env_share("EGRAD_RANDOM_SEQ", 0.15)
}

/// The share of programs with nested `tabulate`s and indexed stacks, 0.2
/// unless `EGRAD_RANDOM_NEST` (a number from 0 to 1) says otherwise.
pub(crate) fn nest_share() -> f64 {
    env_share("EGRAD_RANDOM_NEST", 0.2)
}

/// The share of programs with `match`, 0.08 unless `EGRAD_RANDOM_MATCH`
/// (a number from 0 to 1) says otherwise.
pub(crate) fn match_share() -> f64 {
    env_share("EGRAD_RANDOM_MATCH", 0.08)
}

/// The share of programs with random numbers drawn from keys, 0.08 unless
/// `EGRAD_RANDOM_KEYS` (a number from 0 to 1) says otherwise.
pub(crate) fn key_share() -> f64 {
    env_share("EGRAD_RANDOM_KEYS", 0.08)
}

/// The share of the loop programs with a run-time count.
pub(crate) const RT_SHARE: f64 = 1.0 / 3.0;

pub(crate) fn generate(seed: u64) -> Generated {
    let gp = generate_with(seed, true);
    if gp.loop_cost > NESTED_COST && gp.tags.contains(&"loop: inside a loop's step") {
        return generate_with(seed, false);
    }
    gp
}
