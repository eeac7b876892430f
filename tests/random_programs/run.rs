//! Random programs: the run over the seed stream. See `random_programs.rs`.

#[allow(unused_imports)]
use super::*;

/// Groups of the run-time integer constructs (tags) counted by program;
/// in a release run at least 5% of the programs must have each of the
/// first three.
pub(crate) const INT_GROUPS: [(&str, &[&str]); 6] = [
    (
        "gathers",
        &[
            "gather x[idx]",
            "gather of matrix rows A[idx]",
            "tabulate over an index array x[idx[i]]",
        ],
    ),
    ("`scatter_add`", &["scatter_add"]),
    ("integer arithmetic", &["integer arithmetic"]),
    (
        "run-time scalar indices",
        &[
            "run-time index x[k]",
            "run-time index of a matrix element A[a, b]",
            "run-time row A[k]",
        ],
    ),
    (
        "conversions",
        &["f64(...) of integers", "i64(...) of a float"],
    ),
    (
        "a helper with an i64 result",
        &["helper with an i64 result"],
    ),
];

/// The features the report counts programs by (the text a program's source
/// contains, or one of its tags), before the tags of the groups of
/// constructs (`NEST_TAGS` and so on).
pub(crate) const FEATURES: &[&str] = &[
    "tabulate[",
    "matmul(",
    "transpose(",
    "iterate(",
    "static n",
    "static c",
    "if ",
    "&&",
    "||",
    "!(",
    "max/",
    "min/",
    "+/",
    "max(",
    "min(",
    "abs(",
    "pow(",
    "log(",
    "sqrt(",
    "exp(",
    "let (",
    "{ let",
    "@grad(s)",
    "fn h",
    "@grad(a",
    "@grad(v",
    "@grad(c",
    "[i",
    "+ 1]",
    "N-1",
    "iterate_until(",
    "@value_and_grad",
    "@jvp(s)",
    "fn jv",
    "[T",
    "generic helper called from the loss",
    "max/ or min/ of a row in tabulate",
    "X[i, k] in tabulate",
    "X[i + c, k] in tabulate",
    "long iterate (a loop)",
    "loop: scalar state",
    "loop: tuple of scalars",
    "loop: vector state",
    "loop: tuple of vectors",
    "loop: tuple of mixed shapes",
    "loop: an i64 counter in a mixed state",
    "loop: reads values from outside",
    "loop: scalar read by a vector state",
    "loop: inside a loop's step",
    "loop: in a helper",
    "loop: run-time count",
    "helper with a run-time count",
    "run-time count passed a literal",
    "scan(",
    "scan (a loop over a sequence)",
    "scan: over a vector",
    "scan: over a matrix",
    "scan: scalar state",
    "scan: vector state",
    "scan: tuple state",
    "scan: reads values from outside",
    "scan: reversed sequence",
    "scan: sequence made by concat",
    "scan: inside a loop's step",
    "scan: unrolled (a state of mixed shapes)",
    "reverse(",
    "reverse",
    "reverse(x)[i] in tabulate",
    "concat(",
    "concat",
    "concat: vectors",
    "concat: rows of matrices",
    "reverse or concat in a loop's step",
    "static k",
    "static recursion (called with a literal depth)",
    ": i64",
    ": i64[",
    "gather x[idx]",
    "gather of matrix rows A[idx]",
    "tabulate over an index array x[idx[i]]",
    "run-time index x[k]",
    "run-time index of a matrix element A[a, b]",
    "run-time row A[k]",
    "scatter_add",
    "scatter_add of matrix rows",
    "integer arithmetic",
    "integer max, min or abs",
    "integer comparison",
    "if on an integer condition",
    "f64(...) of integers",
    "i64(...) of a float",
    "index: an integer % the length",
    "index: an integer clamped to the length",
    "index: i64(...) of a float % the length",
    "index array: integer arithmetic on indices",
    "helper with an i64 result",
    "scan_all(",
    "iterate_until(u, ",
    SEQ_TAGS[0],
    SEQ_TAGS[1],
    SEQ_TAGS[2],
    "sequence: rows are scalars (f64[L])",
    "sequence: rows are vectors (f64[L, B])",
    "sequence: scalar state",
    "sequence: vector state",
    "sequence: tuple state",
    "sequence: the step reads values from outside",
    "sequence: mapped (tanh, sin, reverse, * a value)",
    "sequence: scaled by a value from outside",
    "iterate_until(u, ...): scalar state",
    "iterate_until(u, ...): vector state",
    "iterate_until(u, ...): a threshold on the state",
    "iterate_until(u, ...): a generated condition",
    "iterate_until(u, ...): the step reads values from outside",
];

/// The run as the environment sets it.
pub(crate) struct RunConfig {
    /// The seeds of the programs, in order.
    pub(crate) seeds: Vec<u64>,
    /// Whether a variable changed which programs run (then the release
    /// run's minimum shares are not asserted).
    pub(crate) overridden: bool,
    /// Print every program (`EGRAD_RANDOM_PRINT`).
    pub(crate) print: bool,
    /// Report every failing program (`EGRAD_RANDOM_KEEP_GOING`).
    pub(crate) keep_going: bool,
}

impl RunConfig {
    /// Read the run's settings from the `EGRAD_RANDOM_*` variables.
    pub(crate) fn from_env() -> RunConfig {
        let base = env_u64("EGRAD_RANDOM_SEED").unwrap_or(0x00E6_4AD5_EED0);
        // 600 programs take about 20 to 30 s on two cores in release (some 1.4
        // times as long as without loops); a debug build is some 25 times slower
        // and runs a sample.
        let default_count = if cfg!(debug_assertions) { 40 } else { 600 };
        let overridden = std::env::var("EGRAD_RANDOM_PROGRAMS").is_ok()
            || std::env::var("EGRAD_RANDOM_PROGRAM_SEED").is_ok()
            || std::env::var("EGRAD_RANDOM_LOOPS").is_ok()
            || std::env::var("EGRAD_RANDOM_NEW").is_ok()
            || std::env::var("EGRAD_RANDOM_INTS").is_ok()
            || std::env::var("EGRAD_RANDOM_SEQ").is_ok()
            || std::env::var("EGRAD_RANDOM_NEST").is_ok()
            || std::env::var("EGRAD_RANDOM_MATCH").is_ok()
            || std::env::var("EGRAD_RANDOM_KEYS").is_ok()
            || std::env::var("EGRAD_RANDOM_CUSTOM").is_ok()
            || std::env::var("EGRAD_RANDOM_KERNELS").is_ok()
            || std::env::var("EGRAD_RANDOM_MIXED").is_ok()
            || std::env::var("EGRAD_RANDOM_FIRST").is_ok();
        let count = env_u64("EGRAD_RANDOM_PROGRAMS").unwrap_or(default_count) as usize;
        // The programs of indices `first..first + count` of the base seed's
        // stream: `scripts/soak.sh` runs a long soak as chunks of it.
        let first = env_u64("EGRAD_RANDOM_FIRST").unwrap_or(0);
        let seeds: Vec<u64> = match env_u64("EGRAD_RANDOM_PROGRAM_SEED") {
            Some(s) => vec![s],
            None => (first..first + count as u64)
                .map(|i| mix(mix(base).wrapping_add(i)))
                .collect(),
        };
        let print = std::env::var("EGRAD_RANDOM_PRINT").is_ok();
        // Report every failing program (one line each) instead of stopping at the first.
        let keep_going = std::env::var("EGRAD_RANDOM_KEEP_GOING").is_ok();
        RunConfig {
            seeds,
            overridden,
            print,
            keep_going,
        }
    }
}

pub(crate) fn run_all() {
    register_kernels();
    let start = std::time::Instant::now();
    let config = RunConfig::from_env();
    let results = run_programs(&config.seeds, config.keep_going);
    let mut tally = Tally::new();
    let failures = tally.record_all(results, &config);
    print_soak_summary(
        &tally.stats,
        failures.len(),
        tally.jv_seq_left_out,
        tally.jv_kernel,
        &tally.refused,
    );
    if let Some(f) = failures.first() {
        panic!("{} programs failed; the first:\n{f}", failures.len());
    }
    tally.print_summary(start);
    tally.print_constructs();
    tally.assert_counts(&config);
}

/// One program's index (in the seed order), the program (none if
/// generating it failed) and what happened to it.
pub(crate) type ProgramResult = (usize, Option<Generated>, Outcome);

/// Run the programs of `seeds` on a few threads; the results in seed
/// order. Without `keep_going` the threads stop after the first failing
/// program (in seed order).
pub(crate) fn run_programs(seeds: &[u64], keep_going: bool) -> Vec<ProgramResult> {
    // Programs run on a few threads; results are taken in seed order, and
    // without EGRAD_RANDOM_KEEP_GOING the first failing program (in seed
    // order) is reported.
    let next = AtomicUsize::new(0);
    let first_fail = AtomicUsize::new(usize::MAX);
    // Name each program that takes this many seconds or more
    // (`EGRAD_RANDOM_SLOW`), to find what makes a run slow.
    let slow = env_u64("EGRAD_RANDOM_SLOW");
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 8);
    let mut results: Vec<ProgramResult> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::SeqCst);
                        if i >= seeds.len()
                            || (!keep_going && i > first_fail.load(Ordering::SeqCst))
                        {
                            break;
                        }
                        let began = std::time::Instant::now();
                        let (gp, outcome) = run_one(seeds[i]);
                        let took = began.elapsed();
                        if slow.is_some_and(|s| took.as_secs() >= s) {
                            eprintln!("SLOW {:#x}: {took:.1?}", seeds[i]);
                        }
                        if !matches!(outcome, Outcome::Passed(_)) {
                            first_fail.fetch_min(i, Ordering::SeqCst);
                        }
                        out.push((i, gp, outcome));
                    }
                    out
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_default())
            .collect()
    });
    results.sort_by_key(|r| r.0);
    results
}

/// The report of the failing program of `seed` (`gp`, none if generating
/// it failed), with the message `m`.
pub(crate) fn failure_report(seed: u64, gp: Option<&Generated>, m: &str) -> String {
    match gp {
        Some(gp) => format!(
            "random program failed (seed {seed:#x}; rerun alone with EGRAD_RANDOM_PROGRAM_SEED={seed:#x}), N = {}, M = {}:\n{m}\n--- program ---\n{}",
            gp.n, gp.m, gp.source
        ),
        None => format!("generating the program of seed {seed:#x} failed: {m}"),
    }
}

/// The counts over the programs of a run.
#[derive(Default)]
pub(crate) struct Tally {
    /// The checks' counts, added up.
    pub(crate) stats: Stats,
    /// Programs drawn with the newer constructs, and how often each is
    /// written (`scan(`, `reverse(`, `concat(`, calls of a recursive helper
    /// from the other functions).
    pub(crate) novel_programs: usize,
    pub(crate) uses: [usize; 4],
    /// Programs drawn with run-time integers, and the programs having each
    /// group of integer constructs (see `INT_GROUPS`).
    pub(crate) int_programs: usize,
    pub(crate) int_groups: [usize; INT_GROUPS.len()],
    /// Programs drawn with the sequence constructs; those with sequences of
    /// length `L`, by `L`; those whose `dloss` takes a sequence; the
    /// derivative functions left out, by reason.
    pub(crate) seq_programs: usize,
    pub(crate) seq_by_len: [usize; L_MAX + 1],
    pub(crate) seq_wrt_programs: usize,
    pub(crate) jv_seq_left_out: usize,
    pub(crate) refused: Vec<(String, usize)>,
    /// Programs drawn with nested `tabulate`s or indexed stacks; those
    /// having a nested `tabulate`, an indexed stack; by tag.
    pub(crate) nest_programs: usize,
    pub(crate) nested_programs: usize,
    pub(crate) stack_programs: usize,
    /// Programs drawn with `match`, with random numbers; those whose
    /// gradient was checked against finite differences with a run-time
    /// `match` in the program, with noise drawn from a key.
    pub(crate) match_programs: usize,
    pub(crate) key_programs: usize,
    pub(crate) match_grad_programs: usize,
    pub(crate) key_grad_programs: usize,
    /// Programs drawn with functions with their own derivative rules, and
    /// those calling one whose gradient (`dloss`), forward mode (`jv`),
    /// second derivative (`d2` or `hv`) were checked; programs drawn with
    /// native kernels, those calling one whose gradient was checked, and
    /// those whose `jv` was left out for it.
    pub(crate) custom_programs: usize,
    pub(crate) custom_grad_programs: usize,
    pub(crate) custom_jv_programs: usize,
    pub(crate) custom_d2_programs: usize,
    pub(crate) kernel_programs: usize,
    pub(crate) kernel_grad_programs: usize,
    pub(crate) jv_kernel: usize,
    /// The programs having each feature (see `FEATURES`).
    pub(crate) features: Vec<(&'static str, usize)>,
}

impl Tally {
    /// Nothing counted yet.
    pub(crate) fn new() -> Tally {
        let features = FEATURES
            .iter()
            .chain(NEST_TAGS.iter())
            .chain(STACK_TAGS.iter())
            .chain(MATCH_TAGS.iter())
            .chain(KEY_TAGS.iter())
            .chain(CUSTOM_TAGS.iter())
            .chain(KERNEL_TAGS.iter())
            .map(|f| (*f, 0))
            .collect();
        Tally {
            features,
            ..Tally::default()
        }
    }

    /// Count the results in seed order (printing each program with
    /// `print`, and a `FAIL` line for each failing one); the failures'
    /// reports. Without `keep_going` it stops at the first failure.
    pub(crate) fn record_all(
        &mut self,
        results: Vec<ProgramResult>,
        config: &RunConfig,
    ) -> Vec<String> {
        let mut failures: Vec<String> = Vec::new();
        for (i, gp, outcome) in results {
            let seed = config.seeds[i];
            if let Some(gp) = &gp {
                self.record_program(gp, seed, config.print);
            }
            match outcome {
                Outcome::Passed(st) => self.record_passed(gp.as_ref(), &st),
                Outcome::Failed(m) => {
                    let first = m.lines().take(2).collect::<Vec<_>>().join(" | ");
                    println!("FAIL {seed:#x}: {first}");
                    failures.push(failure_report(seed, gp.as_ref(), &m));
                    if !config.keep_going {
                        break;
                    }
                }
            }
        }
        failures
    }

    /// Count what the generated program `gp` (of `seed`) has, printing it
    /// with `print`.
    pub(crate) fn record_program(&mut self, gp: &Generated, seed: u64, print: bool) {
        if print {
            println!(
                "--- seed {seed:#x}, N = {}, M = {}\n{}",
                gp.n, gp.m, gp.source
            );
        }
        for (f, c) in self.features.iter_mut() {
            if gp.source.contains(*f) || gp.tags.contains(f) {
                *c += 1;
            }
        }
        self.novel_programs += usize::from(gp.novel);
        self.seq_programs += usize::from(gp.seq);
        if !gp.seq_params.is_empty() {
            self.seq_by_len[gp.l] += 1;
        }
        self.seq_wrt_programs += usize::from(gp.wrt.iter().any(|i| gp.seq_params.contains(i)));
        self.jv_seq_left_out += usize::from(gp.jv_seq_left_out);
        let reasons = [
            gp.jv_refused.map(|r| format!("`jv`: {r}")),
            gp.second_refused.map(|r| format!("`d2` and `hv`: {r}")),
            gp.third_refused.map(|r| format!("`d3` or `t3`: {r}")),
        ];
        for r in reasons.into_iter().flatten() {
            match self.refused.iter_mut().find(|x| x.0 == r) {
                Some(x) => x.1 += 1,
                None => self.refused.push((r, 1)),
            }
        }
        self.int_programs += usize::from(gp.ints);
        self.nest_programs += usize::from(gp.nest);
        self.match_programs += usize::from(gp.matches);
        self.key_programs += usize::from(gp.keys);
        self.custom_programs += usize::from(gp.custom);
        self.kernel_programs += usize::from(gp.kernels);
        self.jv_kernel += usize::from(gp.jv_kernel);
        self.nested_programs += usize::from(gp.tags.contains(&NEST_TAGS[0]));
        self.stack_programs += usize::from(STACK_TAGS.iter().any(|t| gp.tags.contains(t)));
        for (c, (_, tags)) in self.int_groups.iter_mut().zip(INT_GROUPS) {
            *c += usize::from(tags.iter().any(|t| gp.tags.contains(t)));
        }
        for (k, f) in ["scan(", "reverse(", "concat("].iter().enumerate() {
            self.uses[k] += gp.source.matches(f).count();
        }
        if let Some(h) = &gp.rec_helper {
            // (Less its own recursive call.)
            self.uses[3] += gp
                .source
                .matches(&format!("{h}("))
                .count()
                .saturating_sub(1);
        }
    }

    /// Count the checks of a program that passed (`gp`, none if generating
    /// it failed), whose counts are `st`.
    pub(crate) fn record_passed(&mut self, gp: Option<&Generated>, st: &Stats) {
        if let Some(gp) = gp {
            let checked = usize::from(st.grad_checks > 0);
            if gp.tags.contains(&MATCH_TAGS[0]) {
                self.match_grad_programs += checked;
            }
            if gp.tags.contains(&KEY_TAGS[0]) {
                self.key_grad_programs += checked;
            }
            if gp.tags.contains(&CUSTOM_TAGS[0]) {
                self.custom_grad_programs += checked;
                self.custom_jv_programs += usize::from(st.jvp_checks > 0);
                self.custom_d2_programs += usize::from(st.d2_checks + st.hvp_checks > 0);
            }
            if gp.tags.contains(&KERNEL_TAGS[0]) {
                self.kernel_grad_programs += checked;
            }
        }
        self.stats.add(st)
    }

    /// The programs having the feature `f`.
    pub(crate) fn programs_with(&self, f: &str) -> usize {
        self.features.iter().find(|x| x.0 == f).map_or(0, |x| x.1)
    }

    /// Print the checks' counts: programs and functions checked (with the
    /// time since `start`), derivatives, loops and run-time counts.
    pub(crate) fn print_summary(&self, start: std::time::Instant) {
        let stats = &self.stats;
        println!(
            "random programs: {} checked in {:.1?} ({} functions through JIT/interpreter/optimizer; {} gradients ({} elements) and {} second derivatives against finite differences; skipped: {} at a structural kink, {} non-smooth gradients, {} non-smooth second derivatives; {} resampled away from kinks)",
            stats.programs,
            start.elapsed(),
            stats.functions,
            stats.grad_checks,
            stats.grad_elems,
            stats.d2_checks,
            stats.skip_kink,
            stats.skip_fd,
            stats.skip_d2,
            stats.resampled,
        );
        println!(
            "also: {} value-and-gradient checks, {} forward-mode checks ({} skipped, non-smooth), {} Hessian-vector products, {} functions of the f32 variants through JIT/interpreter; {} functions whose optimized result is not bit-identical (within tolerance)",
            stats.vg_checks, stats.jvp_checks, stats.skip_jvp, stats.hvp_checks, stats.f32_functions, stats.opt_not_bitwise
        );
        println!(
            "loops: {} of {} programs run loops in the loss ({} loops; {} with a loop inside a loop's step; {} with a loop in a helper's own IR); second derivatives left out (egrad refused them): {} `d2` and {} `hv` (`d1` still checked: {} against finite differences)",
            stats.loop_programs,
            stats.programs,
            stats.loops,
            stats.nested_loop_programs,
            stats.helper_loop_programs,
            stats.skip_d2_loop,
            stats.skip_hv_loop,
            stats.d1_loop_checks,
        );
        println!(
            "run-time counts: {} programs run a loop with a run-time count `n` in the loss ({} such loops; {} with one in a helper's own IR), each checked at 3 counts through the same compiled code; at the other counts {} derivative checks passed, {} skipped",
            stats.rt_programs,
            stats.rt_loops,
            stats.rt_helper_programs,
            stats.rt_checks,
            stats.rt_skips,
        );
    }

    /// Print the programs by construct: the newer constructs, sequences,
    /// run-time integers, nested tabulates, `match`, random numbers, user
    /// primitives, native kernels and every feature.
    pub(crate) fn print_constructs(&self) {
        let Tally {
            stats,
            novel_programs,
            uses,
            int_programs,
            int_groups,
            seq_programs,
            seq_by_len,
            seq_wrt_programs,
            jv_seq_left_out,
            refused,
            nest_programs,
            nested_programs,
            stack_programs,
            match_programs,
            key_programs,
            match_grad_programs,
            key_grad_programs,
            custom_programs,
            custom_grad_programs,
            custom_jv_programs,
            custom_d2_programs,
            kernel_programs,
            kernel_grad_programs,
            jv_kernel,
            features,
        } = self;
        let programs_with = |f: &str| self.programs_with(f);
        println!(
            "newer constructs: {novel_programs} programs drawn with them; `scan` in {} programs ({} written, {} unrolled; {} programs run a scan in the loss's IR, {} scans there; these counts include the scans over sequences of length L below; {} programs scan `xs` or `Xs`), `reverse` in {} ({} written), `concat` in {} ({} written), static recursion in {} ({} calls of the recursive helper)",
            programs_with("scan("),
            uses[0],
            programs_with("scan: unrolled (a state of mixed shapes)"),
            stats.scan_programs,
            stats.scans,
            programs_with("scan (a loop over a sequence)"),
            programs_with("reverse("),
            uses[1],
            programs_with("concat("),
            uses[2],
            programs_with("static recursion (called with a literal depth)"),
            uses[3],
        );
        println!(
            "scans in a loop's step: {} programs; derivative checks skipped in {} of them (a documented limit egrad reported)",
            programs_with("scan: inside a loop's step"),
            stats.skip_scan_in_loop,
        );
        println!(
            "sequences of length L: {seq_programs} programs drawn with them; `scan` over one in {} programs, `scan_all` in {} ({} programs run a `scan_all` loop in the loss's IR, {} such loops), `iterate_until` bounded by the run-time `u` in {} ({} with a loop counted by `u` in the loss's IR); programs with sequences by L = 0..{L_MAX}: {seq_by_len:?}; `dloss` takes a sequence in {seq_wrt_programs} programs, {} of them checked against finite differences ({} elements of sequences; {} with L = 0)",
            programs_with(SEQ_TAGS[0]),
            programs_with(SEQ_TAGS[1]),
            stats.scan_all_programs,
            stats.scan_alls,
            programs_with(SEQ_TAGS[2]),
            stats.until_programs,
            stats.seq_grad_checks,
            stats.seq_grad_elems,
            stats.seq_grad_empty,
        );
        let refused_text: Vec<String> = refused.iter().map(|(r, c)| format!("{c} {r}")).collect();
        println!(
            "forward mode left out: {jv_seq_left_out} programs drew a sequence of length L among `jv`'s parameters and left it out (forward mode with respect to a scan's sequence is not supported); derivative functions egrad refuses (documented limits), left out: {}",
            if refused_text.is_empty() {
                "none".to_string()
            } else {
                refused_text.join(", ")
            }
        );
        let groups: Vec<String> = INT_GROUPS
            .iter()
            .zip(int_groups)
            .map(|((what, _), c)| format!("{what} in {c}"))
            .collect();
        println!(
            "run-time integers: {int_programs} programs drawn with them; {}",
            groups.join(", ")
        );
        let by_tag = |tags: &[&str]| -> String {
            tags.iter()
                .map(|t| {
                    format!(
                        "{} {}",
                        programs_with(t),
                        t.split_once(": ").map_or(*t, |x| x.1)
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!(
            "nested tabulates and indexed stacks: {nest_programs} programs drawn with them; a nested `tabulate` in {nested_programs} ({}), an indexed stack in {stack_programs} ({})",
            by_tag(&NEST_TAGS[1..]),
            by_tag(&STACK_TAGS),
        );
        println!(
            "match: {match_programs} programs drawn with it; a run-time `match` in {} ({} of them with a gradient checked against finite differences), a static one in {}; {}",
            programs_with(MATCH_TAGS[0]),
            match_grad_programs,
            programs_with(MATCH_TAGS[1]),
            by_tag(&MATCH_TAGS[2..]),
        );
        println!(
            "random numbers: {key_programs} programs drawn with them; noise drawn from a key in {} ({} of them with a gradient checked against finite differences); {}",
            programs_with(KEY_TAGS[0]),
            key_grad_programs,
            by_tag(&KEY_TAGS[1..]),
        );
        println!(
            "user primitives: {custom_programs} programs drawn with functions with their own derivative rules; one called in {} ({} of them with a gradient, {} with forward mode, {} with a second derivative checked against finite differences); {}",
            programs_with(CUSTOM_TAGS[0]),
            custom_grad_programs,
            custom_jv_programs,
            custom_d2_programs,
            by_tag(&CUSTOM_TAGS[1..]),
        );
        println!(
            "native kernels: {kernel_programs} programs drawn with them; one called in {} ({} of them with a gradient checked against finite differences; left out for them: {} f32 copies, {} `jv`, {} `d2`, {} `hv`); {}",
            programs_with(KERNEL_TAGS[0]),
            kernel_grad_programs,
            stats.skip_f32_kernel,
            jv_kernel,
            stats.skip_d2_kernel,
            stats.skip_hv_kernel,
            by_tag(&KERNEL_TAGS[1..]),
        );
        let cov: Vec<String> = features.iter().map(|(f, c)| format!("`{f}` {c}")).collect();
        println!("programs using: {}", cov.join(", "));
    }

    /// The assertions on the counts: every program checked; in a release
    /// run of the default programs, the minimum shares; few checks skipped.
    pub(crate) fn assert_counts(&self, config: &RunConfig) {
        let stats = &self.stats;
        assert_eq!(
            stats.programs,
            config.seeds.len(),
            "every program must be checked"
        );
        if !config.overridden && !cfg!(debug_assertions) {
            assert!(stats.programs >= 500, "only {} programs", stats.programs);
        }
        let ratio = |skipped: usize, of: usize| skipped as f64 / of.max(1) as f64;
        if !config.overridden && !cfg!(debug_assertions) {
            assert!(
                ratio(stats.loop_programs, stats.programs) >= 0.1,
                "only {} of {} programs have loops",
                stats.loop_programs,
                stats.programs
            );
        }
        if !config.overridden && !cfg!(debug_assertions) {
            self.assert_shares();
        }
        let skips = stats.skip_kink + stats.skip_fd;
        assert!(
            ratio(skips, stats.programs) < 0.2,
            "{skips} of {} gradient checks skipped",
            stats.programs
        );
        let with_s = stats.d2_checks + stats.skip_d2;
        assert!(
            ratio(stats.skip_d2, with_s) < 0.2,
            "{} of {with_s} second-derivative checks skipped",
            stats.skip_d2
        );
        let with_jv = stats.jvp_checks + stats.skip_jvp;
        assert!(
            ratio(stats.skip_jvp, with_jv) < 0.2,
            "{} of {with_jv} forward-mode checks skipped",
            stats.skip_jvp
        );
    }

    /// In a release run of the default programs: the share of programs
    /// with each construct is at least its minimum.
    pub(crate) fn assert_shares(&self) {
        let stats = &self.stats;
        let ratio = |skipped: usize, of: usize| skipped as f64 / of.max(1) as f64;
        let programs_with = |f: &str| self.programs_with(f);
        // The newer constructs are generated (and scans are loops).
        for (what, count) in [
            ("run a scan in the loss", stats.scan_programs),
            (
                "scan `xs` or `Xs` (not counting the sequences of length L)",
                programs_with("scan (a loop over a sequence)"),
            ),
            ("use `reverse`", programs_with("reverse")),
            ("use `concat`", programs_with("concat")),
            (
                "recurse through a static depth",
                programs_with("static recursion (called with a literal depth)"),
            ),
        ] {
            assert!(
                ratio(count, stats.programs) >= 0.05,
                "only {count} of {} programs {what}",
                stats.programs
            );
        }
        // The sequence constructs, and gradients with respect to sequences.
        for (what, count) in [
            ("scan a sequence of length L", programs_with(SEQ_TAGS[0])),
            (
                "`scan_all` a sequence of length L",
                programs_with(SEQ_TAGS[1]),
            ),
            ("run a `scan_all` loop in the loss", stats.scan_all_programs),
            (
                "have an `iterate_until` bounded by `u`",
                programs_with(SEQ_TAGS[2]),
            ),
            (
                "run a loop counted by `u` in the loss",
                stats.until_programs,
            ),
            (
                "check a gradient with respect to a sequence",
                stats.seq_grad_checks,
            ),
        ] {
            assert!(
                ratio(count, stats.programs) >= 0.03,
                "only {count} of {} programs {what}",
                stats.programs
            );
        }
        assert!(
            self.seq_by_len[0] > 0 && stats.seq_grad_empty > 0,
            "no program has an empty sequence (L = 0) with a gradient checked"
        );
        // And the run-time integers.
        for ((what, _), count) in INT_GROUPS.iter().zip(self.int_groups).take(3) {
            assert!(
                ratio(count, stats.programs) >= 0.05,
                "only {count} of {} programs have {what}",
                stats.programs
            );
        }
        // And the nested `tabulate`s and indexed stacks; `match` and
        // random numbers.
        for (what, count) in [
            ("a nested `tabulate`", self.nested_programs),
            ("an indexed stack", self.stack_programs),
        ] {
            assert!(
                ratio(count, stats.programs) >= 0.05,
                "only {count} of {} programs have {what}",
                stats.programs
            );
        }
        for (what, count, share) in [
            ("a run-time `match`", programs_with(MATCH_TAGS[0]), 0.03),
            ("a static `match`", programs_with(MATCH_TAGS[1]), 0.02),
            (
                "a gradient checked through a run-time `match`",
                self.match_grad_programs,
                0.03,
            ),
            ("noise drawn from a key", programs_with(KEY_TAGS[0]), 0.03),
            (
                "a gradient checked with noise drawn from a key",
                self.key_grad_programs,
                0.03,
            ),
            (
                "a function with its own derivative rules called",
                programs_with(CUSTOM_TAGS[0]),
                0.03,
            ),
            (
                "a gradient checked through a function with its own derivative rules",
                self.custom_grad_programs,
                0.03,
            ),
            (
                "a second derivative checked through a function with its own derivative rules",
                self.custom_d2_programs,
                0.01,
            ),
            (
                "a native kernel called",
                programs_with(KERNEL_TAGS[0]),
                0.03,
            ),
            (
                "a gradient checked through a native kernel",
                self.kernel_grad_programs,
                0.03,
            ),
        ] {
            assert!(
                ratio(count, stats.programs) >= share,
                "only {count} of {} programs have {what}",
                stats.programs
            );
        }
    }
}
