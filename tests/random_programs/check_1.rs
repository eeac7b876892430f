//! Random programs: inputs and the checks (part 1 of 2). See `random_programs.rs`.

#[allow(unused_imports)]
use super::*;

/// Arguments for `f`: uniform in [-1, 1), `N = n`, `L` the length of the
/// sequences, every other size `m`; the run-time bound `u` from 0 to
/// `U_MAX`; `kind` from -1 to 3, `mode` from 0 to `MODE_MAX`, bools 0 or
/// 1, a seed from 0 to 999, a key of two words below 2^32.
pub(crate) fn inputs(f: &Function, gp: &Generated, rng: &mut Rng) -> Vec<Value> {
    let (n, m) = (gp.n, gp.m);
    f.params
        .iter()
        .map(|p| {
            let t = f.ty(p.var);
            // The parameters of `match` and of random numbers, by name.
            let draw: Option<fn(&mut Rng) -> f64> = match (t.dtype, f.var_name(p.var)) {
                (DType::Bool, _) => Some(|r| r.below(2) as f64),
                (DType::I64, "kind") => Some(|r| r.pick(&KIND_VALUES) as f64),
                (DType::I64, "mode") => Some(|r| r.below(MODE_MAX + 1) as f64),
                (DType::I64, "seed") => Some(|r| r.below(1000) as f64),
                (DType::I64, "key" | "kk") => Some(|r| (r.next_u64() >> 32) as f64),
                _ => None,
            };
            // A run-time count (see `set_count`), a bound, or an index in range.
            let ints_below = match t.dtype {
                _ if draw.is_some() => None,
                DType::I64 if f.var_name(p.var) == "u" && t.shape.is_empty() => {
                    return Value::scalar(t.dtype, rng.below(U_MAX + 1) as f64);
                }
                DType::I64 => match int_range(f.var_name(p.var)) {
                    Some(r) => Some(if r == D::N { n } else { m }),
                    None => return Value::scalar(t.dtype, 0.0),
                },
                _ => None,
            };
            let shape: Vec<usize> = t
                .shape
                .iter()
                .map(|d| match d {
                    Dim::Lit(k) => *k as usize,
                    Dim::Param(name) if name == "N" => n,
                    Dim::Param(name) if name == "L" => gp.l,
                    Dim::Param(_) => m,
                    Dim::Sub(..) | Dim::Rows(..) | Dim::Expr(..) => {
                        panic!("parameters have plain sizes")
                    }
                })
                .collect();
            let len: usize = shape.iter().product();
            let data = match (ints_below, draw) {
                (_, Some(draw)) => (0..len).map(|_| draw(rng)).collect(),
                (Some(r), _) => (0..len).map(|_| rng.below(r) as f64).collect(),
                (None, _) => (0..len).map(|_| rng.uniform(-1.0, 1.0)).collect(),
            };
            Value::array(t.dtype, shape, data)
        })
        .collect()
}

/// A value for the extreme-input check: ordinary, signed zeros, large,
/// tiny, infinite or NaN.
pub(crate) fn wild_value(rng: &mut Rng) -> f64 {
    match rng.below(12) {
        0 => 0.0,
        1 => -0.0,
        2 => rng.pick(&[1e300, -1e300, 1e30, -700.0, 710.0]),
        3 => rng.pick(&[1e-300, -1e-310, 5e-324]),
        4 => f64::INFINITY,
        5 => f64::NEG_INFINITY,
        6 => f64::NAN,
        7 => rng.uniform(-50.0, 50.0),
        _ => rng.uniform(-2.0, 2.0),
    }
}

pub(crate) fn close(a: f64, b: f64, rel: f64) -> bool {
    if a.is_nan() && b.is_nan() {
        return true;
    }
    if a == b {
        return true;
    }
    (a - b).abs() <= rel * 1f64.max(a.abs()).max(b.abs())
}

/// How close `args` are to a kink of `f` (comparisons, `max`, `min`,
/// `abs`, ties of `max/` and `min/`, also in each step of its loops),
/// relative to the values compared; `+inf` if there are none.
pub(crate) fn kink_margin(f: &Function, args: &[Value]) -> f64 {
    kink(f, args).0
}

/// The margin of `kink_margin` and the statement that has it.
pub(crate) fn kink(f: &Function, args: &[Value]) -> (f64, String) {
    // The sizes, for the loops' bodies.
    let mut sizes: Vec<(String, usize)> = Vec::new();
    for (p, a) in f.params.iter().zip(args) {
        if f.ty(p.var).dtype == DType::I64 {
            // A run-time count: the size of its name.
            sizes.push((f.var_name(p.var).to_string(), a.data[0] as usize));
        }
        for (d, &len) in f.ty(p.var).shape.iter().zip(&a.shape) {
            if let Dim::Param(name) = d {
                sizes.push((name.clone(), len));
            }
        }
    }
    let (margin, at, _) = kink_in(f, &all_values(f), args, &sizes, false);
    (margin, at)
}

/// The extent of `d` at the sizes `sizes` (0 if unbound).
pub(crate) fn extent(d: &Dim, sizes: &[(String, usize)]) -> u64 {
    let size = |n: &str| sizes.iter().find(|(m, _)| m == n).map(|x| x.1 as u64);
    d.extent(&size).unwrap_or(0)
}

/// `f` at the sizes `sizes`: every size in its types (and its loops')
/// made a literal, so that `run` can call a loop's body on its own (its
/// state may have a size such as `N-1`, and sizes come from its caller).
pub(crate) fn at_sizes(f: &Function, sizes: &[(String, usize)]) -> Function {
    let mut g = f.clone();
    for v in &mut g.vars {
        for d in &mut v.ty.shape {
            *d = Dim::Lit(extent(d, sizes));
        }
    }
    for l in &mut g.loops {
        l.count = Dim::Lit(extent(&l.count, sizes));
        l.body = at_sizes(&l.body, sizes);
        l.vjp = l.vjp.as_ref().map(|v| at_sizes(v, sizes));
    }
    g.size_params.clear();
    g
}

/// `f` returning the value of every statement, then its results.
pub(crate) fn all_values(f: &Function) -> Function {
    let mut g = f.clone();
    g.rets = f.stmts.iter().map(|s| s.var).collect();
    g.rets.extend(f.rets.iter().copied());
    g
}

/// Inside a loop a margin counts this many times more: a state that crosses
/// a comparison along its steps comes as close to it as one step moves it
/// (~1e-3), and the finite differences (h = 1e-6) only need it much
/// further than h. Exact ties broken by rounding are still caught.
pub(crate) const LOOP_MARGIN: f64 = 100.0;

/// `kink` of `f` at `args` (`all` is `all_values(f)`), walking every step
/// of every loop (inside a loop when `in_loop`); also `f`'s results.
pub(crate) fn kink_in(
    f: &Function,
    all: &Function,
    args: &[Value],
    sizes: &[(String, usize)],
    in_loop: bool,
) -> (f64, String, Option<Vec<Value>>) {
    let refs: Vec<&Value> = args.iter().collect();
    let mut vals = match run(all, &refs) {
        Ok(vals) => vals,
        Err(e) => return (0.0, format!("the interpreter failed: {e:?}"), None),
    };
    let results = vals.split_off(f.stmts.len());
    let scale = if in_loop { LOOP_MARGIN } else { 1.0 };
    let mut value: Vec<Option<&Value>> = vec![None; f.vars.len()];
    for (p, a) in f.params.iter().zip(args) {
        value[p.var.index()] = Some(a);
    }
    for (s, v) in f.stmts.iter().zip(&vals) {
        value[s.var.index()] = Some(v);
    }
    // Masks (0/1 values of comparisons and their combinations) and constants.
    let mut mask = vec![false; f.vars.len()];
    let mut konst = vec![false; f.vars.len()];
    // Values that depend on no float parameter (on integers, bools and
    // constants only, such as numbers drawn from a key): finite
    // differences do not move them, so their comparisons are no kinks.
    let mut fixed = vec![false; f.vars.len()];
    for p in &f.params {
        fixed[p.var.index()] = !matches!(f.ty(p.var).dtype, DType::F32 | DType::F64);
    }
    let mut margin = f64::INFINITY;
    let mut at = String::new();
    for s in &f.stmts {
        let before = margin;
        let args_mask = s.args.iter().any(|a| mask[a.index()])
            && s.args.iter().all(|a| mask[a.index()] || konst[a.index()]);
        let is_cmp = matches!(s.op, Op::Lt | Op::Le | Op::Gt | Op::Ge | Op::Eq | Op::Ne);
        let fixed_args = s.args.iter().all(|a| fixed[a.index()]);
        fixed[s.var.index()] = fixed_args;
        match s.op {
            Op::Const(_) | Op::Zero => konst[s.var.index()] = true,
            Op::Bcast if konst[s.args[0].index()] => konst[s.var.index()] = true,
            _ => {}
        }
        let sel_mask = matches!(s.op, Op::Select)
            && s.args[1..]
                .iter()
                .all(|a| mask[a.index()] || konst[a.index()]);
        if is_cmp || (args_mask && !matches!(s.op, Op::Select)) || sel_mask {
            mask[s.var.index()] = true;
        }
        if let Op::Loop(l, _) | Op::LoopTape(l, _, _) = s.op {
            loop_kink(f, s, l, &value, sizes, &mut margin, &mut at);
            continue;
        }
        if args_mask || s.args.iter().any(|a| mask[a.index()]) {
            continue;
        }
        stmt_margin(f, s, &value, fixed_args, scale, &mut margin);
        if margin < before {
            at = format!(
                "%{} = {} {:?}",
                f.var_name(s.var),
                s.op.name(),
                s.args.iter().map(|a| f.var_name(*a)).collect::<Vec<_>>()
            );
        }
    }
    (margin, at, Some(results))
}

/// The kinks in every step of loop `l`, run by the statement `s` of `f`
/// (`value` holds `f`'s values): lowers `margin` (and sets `at`) where a
/// step comes closer to one.
fn loop_kink(
    f: &Function,
    s: &egrad::internals::ir::Stmt,
    l: u32,
    value: &[Option<&Value>],
    sizes: &[(String, usize)],
    margin: &mut f64,
    at: &mut String,
) {
    // Each step, from the state the loop starts with (also of a
    // loop run for its tape, as `scan_all` is).
    let lp = &f.loops[l as usize];
    let body = at_sizes(&lp.body, sizes);
    let all = all_values(&body);
    let Some(mut state) = value[s.args[0].index()].cloned() else {
        return;
    };
    // A scan's step `t` also reads row `t` of its sequence (the last
    // operand).
    let seq = lp
        .is_scan()
        .then(|| value[s.args[s.args.len() - 1].index()])
        .flatten();
    for step in 0..extent(&lp.count, sizes) {
        let mut step_args = vec![state];
        if let Some(xs) = seq {
            let shape = xs.shape[1..].to_vec();
            let w: usize = shape.iter().product();
            let t = step as usize;
            let data = xs.data[t * w..(t + 1) * w].to_vec();
            step_args.push(Value::array(xs.dtype, shape, data));
        }
        let (m, a, next) = kink_in(&body, &all, &step_args, sizes, true);
        if m < *margin {
            *margin = m;
            *at = format!("step {step} of loop {l}: {a}");
        }
        match next {
            Some(mut next) => state = next.swap_remove(0),
            None => break,
        }
    }
}

/// The kink of the statement `s` of `f` (not a loop; `value` holds `f`'s
/// values, `scale` is `LOOP_MARGIN` inside a loop): lowers `margin` to it.
fn stmt_margin(
    f: &Function,
    s: &egrad::internals::ir::Stmt,
    value: &[Option<&Value>],
    fixed_args: bool,
    scale: f64,
    margin: &mut f64,
) {
    let rel = |a: f64, b: f64| (a - b).abs() / (1.0 + a.abs() + b.abs());
    let arg = |k: usize| value[s.args[k].index()].map(|v| &v.data[..]).unwrap_or(&[]);
    // Integers carry no derivative: their comparisons, `max`, `min`
    // and `abs` are no kinks.
    let int_args = s.args.first().is_some_and(|a| f.ty(*a).dtype == DType::I64);
    match s.op {
        _ if int_args || fixed_args => {}
        // A float truncated to an integer (`i64(e)`) jumps where `e`
        // crosses a nonzero integer.
        Op::Convert(DType::I64) => {
            for a in arg(0) {
                let r = a.round();
                if r != 0.0 {
                    *margin = margin.min(scale * (a - r).abs() / (1.0 + a.abs()));
                }
            }
        }
        // An exact tie here is structural (`a <= a`, `max(a, a)`,
        // `abs(a - a)`): the same on both sides of the kink, so
        // differentiable; only near misses are kinks.
        Op::Lt | Op::Le | Op::Gt | Op::Ge | Op::Max | Op::Min => {
            for (a, b) in arg(0).iter().zip(arg(1)) {
                if a != b {
                    *margin = margin.min(scale * rel(*a, *b));
                }
            }
        }
        Op::Math(Math::Abs) => {
            for a in arg(0) {
                if *a != 0.0 {
                    *margin = margin.min(scale * a.abs());
                }
            }
        }
        Op::MaxTail | Op::MinTail => {
            // Each row as `maxall`/`minall` (the result has one element a row).
            let xs = arg(0);
            let rows = value[s.var.index()].map_or(0, |v| v.data.len());
            if rows > 0 && xs.len() % rows == 0 && xs.len() / rows >= 2 {
                for row in xs.chunks(xs.len() / rows) {
                    let mut r = row.to_vec();
                    r.sort_by(|a, b| a.total_cmp(b));
                    let (a, b) = if s.op == Op::MaxTail {
                        (r[r.len() - 1], r[r.len() - 2])
                    } else {
                        (r[0], r[1])
                    };
                    *margin = margin.min(scale * rel(a, b));
                }
            }
        }
        Op::MaxAll | Op::MinAll => {
            let mut xs: Vec<f64> = arg(0).to_vec();
            if xs.len() >= 2 {
                xs.sort_by(|a, b| a.total_cmp(b));
                let (a, b) = if s.op == Op::MaxAll {
                    (xs[xs.len() - 1], xs[xs.len() - 2])
                } else {
                    (xs[0], xs[1])
                };
                *margin = margin.min(scale * rel(a, b));
            }
        }
        _ => {}
    }
}

/// How finite differences evaluate a function (output 0, a scalar): by
/// the interpreter, or (the loss of a program with loops, which the
/// interpreter runs step by step) by the JIT, which step 1 found
/// bit-identical to it.
pub(crate) enum Eval<'f> {
    Interp(&'f Function),
    Jit(Box<backend::CompiledFunction>),
}

impl Eval<'_> {
    pub(crate) fn at(&self, args: &[Value]) -> f64 {
        let refs: Vec<&Value> = args.iter().collect();
        match self {
            Eval::Interp(f) => run(f, &refs).unwrap()[0].as_scalar(),
            Eval::Jit(native) => native.call(&refs).unwrap()[0].as_scalar(),
        }
    }
}

/// Central differences of `f` in element `k` of argument `i`.
pub(crate) fn central(f: &Eval, args: &[Value], i: usize, k: usize, h: f64) -> f64 {
    let eval = |a: &[Value]| f.at(a);
    let x = args[i].data[k];
    let mut plus = args.to_vec();
    plus[i].data[k] = x + h;
    let mut minus = args.to_vec();
    minus[i].data[k] = x - h;
    (eval(&plus) - eval(&minus)) / (2.0 * h)
}

#[derive(Default, Debug, Clone)]
pub(crate) struct Stats {
    pub(crate) programs: usize,
    pub(crate) functions: usize,
    pub(crate) grad_checks: usize,
    pub(crate) grad_elems: usize,
    pub(crate) d2_checks: usize,
    pub(crate) skip_kink: usize,
    pub(crate) skip_fd: usize,
    pub(crate) skip_d2: usize,
    pub(crate) resampled: usize,
    pub(crate) vg_checks: usize,
    pub(crate) jvp_checks: usize,
    pub(crate) skip_jvp: usize,
    pub(crate) hvp_checks: usize,
    pub(crate) f32_functions: usize,
    pub(crate) opt_not_bitwise: usize,
    /// Runs of a function optimized with fast math, compared with strict.
    pub(crate) fast_math_runs: usize,
    /// Third derivatives against finite differences: `d3` (of `d2`) and
    /// `t3` (of `hv`), and those skipped (not smooth there).
    pub(crate) d3_checks: usize,
    pub(crate) t3_checks: usize,
    pub(crate) skip_d3: usize,
    /// Programs whose loss runs a loop (`loop` statements in its IR).
    pub(crate) loop_programs: usize,
    /// `loop` statements in the losses' IR (loop bodies included).
    pub(crate) loops: usize,
    /// Programs whose loss runs a loop inside a loop's body.
    pub(crate) nested_loop_programs: usize,
    /// Programs with a loop in a helper's own IR.
    pub(crate) helper_loop_programs: usize,
    /// Second derivatives (`d2`) and Hessian-vector products (`hv`) left
    /// out because they would differentiate a gradient through a loop.
    pub(crate) skip_d2_loop: usize,
    pub(crate) skip_hv_loop: usize,
    /// `d1` against finite differences in those programs.
    pub(crate) d1_loop_checks: usize,
    /// Programs whose loss runs a loop with a run-time count, those loops,
    /// programs with one in a helper's own IR.
    pub(crate) rt_programs: usize,
    pub(crate) rt_loops: usize,
    pub(crate) rt_helper_programs: usize,
    /// Derivative checks at the other run-time counts (checked and skipped).
    pub(crate) rt_checks: usize,
    pub(crate) rt_skips: usize,
    /// Programs whose loss runs a `scan` (a loop over a sequence), and
    /// those scans.
    pub(crate) scan_programs: usize,
    pub(crate) scans: usize,
    /// Programs whose derivatives were left out (a scan in a loop's step).
    pub(crate) skip_scan_in_loop: usize,
    /// Programs whose loss runs a `scan_all` (a scan loop run for its
    /// tape), and those loops.
    pub(crate) scan_all_programs: usize,
    pub(crate) scan_alls: usize,
    /// Programs whose loss runs a loop bounded by the run-time `u`.
    pub(crate) until_programs: usize,
    /// Gradient checks (`dloss` against finite differences, not skipped)
    /// with respect to a sequence of length `L`, and the elements of the
    /// sequences compared.
    pub(crate) seq_grad_checks: usize,
    pub(crate) seq_grad_elems: usize,
    /// Those with an empty sequence (`L = 0`).
    pub(crate) seq_grad_empty: usize,
    /// Programs calling a native kernel: their f32 copy not checked, their
    /// `d2` and `hv` left out (`d1` still checked, in `d1_loop_checks`).
    pub(crate) skip_f32_kernel: usize,
    pub(crate) skip_d2_kernel: usize,
    pub(crate) skip_hv_kernel: usize,
}

impl Stats {
    pub(crate) fn add(&mut self, o: &Stats) {
        self.programs += 1;
        self.functions += o.functions;
        self.grad_checks += o.grad_checks;
        self.grad_elems += o.grad_elems;
        self.d2_checks += o.d2_checks;
        self.skip_kink += o.skip_kink;
        self.skip_fd += o.skip_fd;
        self.skip_d2 += o.skip_d2;
        self.resampled += o.resampled;
        self.vg_checks += o.vg_checks;
        self.jvp_checks += o.jvp_checks;
        self.skip_jvp += o.skip_jvp;
        self.hvp_checks += o.hvp_checks;
        self.f32_functions += o.f32_functions;
        self.opt_not_bitwise += o.opt_not_bitwise;
        self.fast_math_runs += o.fast_math_runs;
        self.d3_checks += o.d3_checks;
        self.t3_checks += o.t3_checks;
        self.skip_d3 += o.skip_d3;
        self.loop_programs += o.loop_programs;
        self.loops += o.loops;
        self.nested_loop_programs += o.nested_loop_programs;
        self.helper_loop_programs += o.helper_loop_programs;
        self.skip_d2_loop += o.skip_d2_loop;
        self.skip_hv_loop += o.skip_hv_loop;
        self.d1_loop_checks += o.d1_loop_checks;
        self.rt_programs += o.rt_programs;
        self.rt_loops += o.rt_loops;
        self.rt_helper_programs += o.rt_helper_programs;
        self.rt_checks += o.rt_checks;
        self.rt_skips += o.rt_skips;
        self.scan_programs += o.scan_programs;
        self.scans += o.scans;
        self.skip_scan_in_loop += o.skip_scan_in_loop;
        self.scan_all_programs += o.scan_all_programs;
        self.scan_alls += o.scan_alls;
        self.until_programs += o.until_programs;
        self.seq_grad_checks += o.seq_grad_checks;
        self.seq_grad_elems += o.seq_grad_elems;
        self.seq_grad_empty += o.seq_grad_empty;
        self.skip_f32_kernel += o.skip_f32_kernel;
        self.skip_d2_kernel += o.skip_d2_kernel;
        self.skip_hv_kernel += o.skip_hv_kernel;
    }
}

/// The counts `scripts/soak.sh` adds up over its chunks, one a line:
/// `SOAK run|skip|fail COUNT WHAT` (checks run, skipped with the reason,
/// failed). Printed before a failure is reported, so a failing chunk is
/// counted too.
pub(crate) fn print_soak_summary(
    stats: &Stats,
    failed: usize,
    jv_seq_left_out: usize,
    jv_kernel: usize,
    refused: &[(String, usize)],
) {
    let run = [
        (stats.programs, "programs checked"),
        (
            stats.functions,
            "functions: JIT = interpreter on the unoptimized and the optimized IR, optimizer = unoptimized (also on extreme inputs)",
        ),
        (
            stats.f32_functions,
            "functions of the f32 variants: JIT = interpreter",
        ),
        (
            stats.fast_math_runs,
            "runs of a function optimized with fast math against strict (1e-9 relative)",
        ),
        (
            stats.grad_checks,
            "gradients (`dloss`) against finite differences",
        ),
        (
            stats.grad_elems,
            "gradient elements compared with finite differences",
        ),
        (stats.vg_checks, "value-and-gradient (`vg`) against the loss and `dloss`"),
        (
            stats.jvp_checks,
            "forward mode (`jv`) against finite differences and reverse mode",
        ),
        (stats.d2_checks, "second derivatives (`d2`) against finite differences of `d1`"),
        (stats.hvp_checks, "Hessian-vector products (`hv`) against `d2`"),
        (stats.d3_checks, "third derivatives (`d3`, reverse three times) against finite differences of `d2`"),
        (stats.t3_checks, "third derivatives (`t3`, reverse over forward over reverse) against finite differences of `hv`"),
        (
            stats.d1_loop_checks,
            "`d1` against finite differences where `d2`/`hv` were left out",
        ),
        (
            stats.rt_checks,
            "derivative checks at the run-time counts 0 and 1",
        ),
    ];
    for (n, what) in run {
        println!("SOAK run {n} {what}");
    }
    let mut skip = vec![
        (
            stats.skip_kink,
            "gradient vs finite differences: no inputs away from a kink (structural tie)"
                .to_string(),
        ),
        (
            stats.skip_fd,
            "gradient vs finite differences: not smooth there (steps h and h/10 disagree)"
                .to_string(),
        ),
        (
            stats.skip_d2,
            "second derivative vs finite differences: not smooth there".to_string(),
        ),
        (
            stats.skip_d3,
            "third derivative vs finite differences: not smooth there".to_string(),
        ),
        (
            stats.skip_jvp,
            "forward mode vs finite differences: not smooth there".to_string(),
        ),
        (
            stats.skip_d2_loop,
            "`d2` left out: egrad refused the second derivative (documented limit)".to_string(),
        ),
        (
            stats.skip_hv_loop,
            "`hv` left out: egrad refused the second derivative (documented limit)".to_string(),
        ),
        (
            stats.rt_skips,
            "derivative checks at run-time counts 0 and 1: not smooth there".to_string(),
        ),
        (
            stats.skip_scan_in_loop,
            "derivative checks left out: a scan in a loop's step (documented limit)".to_string(),
        ),
        (
            jv_seq_left_out,
            "`jv` parameter left out: forward mode w.r.t. a scan's sequence (documented limit)"
                .to_string(),
        ),
        (
            stats.skip_f32_kernel,
            "f32 copy not checked: the program calls a native kernel (kernels take f64 only)"
                .to_string(),
        ),
        (
            jv_kernel,
            "`jv` left out: the program calls a native kernel (no forward mode)".to_string(),
        ),
        (
            stats.skip_d2_kernel,
            "`d2` left out: the program calls a native kernel (no second derivative)".to_string(),
        ),
        (
            stats.skip_hv_kernel,
            "`hv` left out: the program calls a native kernel (no second derivative)".to_string(),
        ),
    ];
    for (r, c) in refused {
        skip.push((*c, format!("function left out, egrad refused it: {r}")));
    }
    for (n, what) in skip {
        println!("SOAK skip {n} {}", what.replace('\n', " "));
    }
    println!("SOAK fail {failed} programs failed (JIT/interpreter/optimizer mismatch, wrong derivative, panic or error)");
}

/// What went wrong with a program.
pub(crate) struct Failure(pub(crate) String);

/// FD vs AD for element k of argument i: Ok(true) if compared, Ok(false) if
/// skipped (the two steps disagree: not smooth there).
pub(crate) fn fd_compare(
    primal: &Eval,
    args: &[Value],
    i: usize,
    k: usize,
    ad: f64,
    what: &str,
) -> Result<bool, Failure> {
    let x = args[i].data[k];
    let h = 1e-6 * x.abs().max(1.0);
    let fd = central(primal, args, i, k, h);
    let fd2 = central(primal, args, i, k, h / 10.0);
    if !fd.is_finite() || (fd - fd2).abs() > 1e-3 * (1.0 + fd.abs()) {
        return Ok(false);
    }
    let tol = 1e-5 * (1.0 + fd.abs());
    if (ad - fd).abs() <= tol {
        Ok(true)
    } else {
        Err(Failure(format!(
            "{what}: argument {i} element {k}: AD {ad:e} vs finite differences {fd:e} (h/10: {fd2:e})"
        )))
    }
}

/// `loop` statements of `f` and of its loops' bodies.
pub(crate) fn loop_stmts(f: &Function) -> usize {
    f.stmts
        .iter()
        .filter(|s| matches!(s.op, Op::Loop(_, false)))
        .count()
        + f.loops.iter().map(|l| loop_stmts(&l.body)).sum::<usize>()
}

/// `looptape` statements of scans (a `scan_all`) of `f` and of its loops'
/// bodies.
pub(crate) fn scan_all_stmts(f: &Function) -> usize {
    f.stmts
        .iter()
        .filter(|s| matches!(s.op, Op::LoopTape(_, _, true)))
        .count()
        + f.loops
            .iter()
            .map(|l| scan_all_stmts(&l.body))
            .sum::<usize>()
}

/// Loops of `f` (and of its loops' bodies) whose count is the size `name`.
pub(crate) fn loops_counted_by(f: &Function, name: &str) -> usize {
    f.loops
        .iter()
        .map(|l| {
            usize::from(matches!(&l.count, Dim::Param(p) if p == name))
                + loops_counted_by(&l.body, name)
        })
        .sum()
}

/// `scan` statements (loops over a sequence) of `f` and of its loops' bodies.
pub(crate) fn scan_stmts(f: &Function) -> usize {
    f.stmts
        .iter()
        .filter(|s| matches!(s.op, Op::Loop(_, true)))
        .count()
        + f.loops.iter().map(|l| scan_stmts(&l.body)).sum::<usize>()
}
