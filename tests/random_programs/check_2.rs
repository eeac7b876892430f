//! Random programs: inputs and the checks (part 2 of 2). See `random_programs.rs`.

#[allow(unused_imports)]
use super::*;

pub(crate) fn check_program(gp: &Generated, seed: u64, stats: &mut Stats) -> Result<(), Failure> {
    let p = Program::parse(&gp.source)
        .map_err(|e| Failure(format!("the program does not check:\n{e}")))?;
    let mut rng = Rng(mix(seed ^ 0xA5A5));
    let loss = p.ir("loss").map_err(|e| Failure(e.to_string()))?;
    // 0. The long iterates are loops, not unrolled steps.
    let (in_loss, scans, scan_alls) = check_loops(gp, &p, loss, stats)?;
    // A run-time count: the loss's `n` gives a loop's count (where its own
    // text uses `n`), and every check runs at each of the counts, through
    // the same compiled code.
    let rtc = !gp.rt_counts.is_empty();
    let counts: Vec<u64> = if rtc { gp.rt_counts.clone() } else { vec![0] };
    if rtc {
        check_runtime_counts(gp, &p, loss, stats)?;
    }
    // Inputs of the loss away from its kinks.
    let (args, clear) = clear_inputs(loss, gp, counts[0], &mut rng, stats);
    // 1. JIT == interpreter (bits) on the unoptimized IR; optimized ~ unoptimized.
    for name in p.function_names() {
        let Ok(f) = p.ir(name) else { continue };
        let fargs = if f.param_types() == loss.param_types() {
            args.clone()
        } else {
            inputs(f, gp, &mut rng)
        };
        check_function(name, f, fargs, &counts, &mut rng, stats)?;
        stats.functions += 1;
    }
    // The same program in f32: JIT == interpreter bit for bit (unoptimized
    // and optimized; f32 has no finite-difference or optimizer tolerance).
    // (Not a program calling a native kernel: kernels take `f64`s.)
    if gp.kernel_used {
        stats.skip_f32_kernel = 1;
    } else {
        check_f32(gp, &counts, &mut rng, stats)?;
    }
    if gp.deriv_dropped {
        // egrad rejects the derivatives (see `generate_with`): checks 2 and
        // 3 are skipped, and counted.
        stats.skip_scan_in_loop = 1;
        return Ok(());
    }
    // The loss for finite differences: the JIT where it runs loops.
    let loss_eval = if in_loss > 0 || scans > 0 || scan_alls > 0 || rtc {
        let native = backend::compile(loss, &BackendOptions::default())
            .map_err(|e| Failure(e.to_string()))?;
        Eval::Jit(Box::new(native))
    } else {
        Eval::Interp(loss)
    };
    // 2. and 3. at each count (the other counts' checks counted apart).
    let mut extra = Stats::default();
    for (ci, &count) in counts.iter().enumerate() {
        let (args, clear) = if ci == 0 {
            (args.clone(), clear)
        } else {
            clear_inputs(loss, gp, count, &mut rng, &mut extra)
        };
        let st = if ci == 0 { &mut *stats } else { &mut extra };
        check_derivatives(gp, &p, loss, &loss_eval, args, clear, seed, &mut rng, st).map_err(
            |f| {
                if rtc {
                    Failure(format!("at the run-time count n = {count}: {}", f.0))
                } else {
                    f
                }
            },
        )?;
    }
    stats.rt_checks += extra.grad_checks
        + extra.d2_checks
        + extra.vg_checks
        + extra.jvp_checks
        + extra.hvp_checks
        + extra.d1_loop_checks;
    stats.rt_skips += extra.skip_kink + extra.skip_fd + extra.skip_d2 + extra.skip_jvp;
    Ok(())
}

/// Check 0: the long iterates of the program are loops in its IR (and the
/// loss's `iterate_until` bounded by `u` one counted by `u`), counting its
/// loops and scans; the `loop` statements, `scan` statements and
/// `scan_all` loops of the loss.
pub(crate) fn check_loops(
    gp: &Generated,
    p: &Program,
    loss: &Function,
    stats: &mut Stats,
) -> Result<(usize, usize, usize), Failure> {
    let mut loops = Vec::new();
    for name in p.function_names() {
        if let Ok(f) = p.ir(name) {
            loops_of(f, &mut loops);
            if name.starts_with('h') && loop_stmts(f) > 0 {
                stats.helper_loop_programs = 1;
            }
        }
    }
    for &c in &gp.loop_counts {
        if !loops.iter().any(|&(k, _)| k <= c && c - k <= 3) {
            return Err(Failure(format!(
                "`iterate({c}, ...)` is not a loop in the IR (unrolled); loops: {loops:?}"
            )));
        }
    }
    let in_loss = loop_stmts(loss);
    let scans = scan_stmts(loss);
    if scans > 0 {
        stats.scan_programs = 1;
        stats.scans = scans;
    }
    let scan_alls = scan_all_stmts(loss);
    if scan_alls > 0 {
        stats.scan_all_programs = 1;
        stats.scan_alls = scan_alls;
    }
    stats.until_programs = usize::from(loops_counted_by(loss, "u") > 0);
    if gp.tags.contains(&SEQ_TAGS[2]) && stats.until_programs == 0 {
        return Err(Failure(format!(
            "the loss has an `iterate_until` bounded by `u`, but its IR has no loop counted by `u`:\n{loss}"
        )));
    }
    if in_loss > 0 {
        stats.loop_programs = 1;
        stats.loops = in_loss;
        if loss.loops.iter().any(|l| loop_stmts(&l.body) > 0) {
            stats.nested_loop_programs = 1;
        }
    }
    Ok((in_loss, scans, scan_alls))
}

/// A program with a run-time count: the loss that uses `n` has a loop with
/// a run-time count in its IR; counts those loops (in the loss and in
/// helpers).
pub(crate) fn check_runtime_counts(
    gp: &Generated,
    p: &Program,
    loss: &Function,
    stats: &mut Stats,
) -> Result<(), Failure> {
    let rt = runtime_loops(loss);
    if gp.rt_in_loss && rt == 0 {
        return Err(Failure(format!(
            "the loss uses its run-time count `n`, but its IR has no loop with a run-time count:\n{loss}"
        )));
    }
    if rt > 0 {
        stats.rt_programs = 1;
        stats.rt_loops = rt;
    }
    for name in p.function_names() {
        if let Ok(f) = p.ir(name) {
            if name.starts_with('h') && runtime_loops(f) > 0 {
                stats.rt_helper_programs = 1;
            }
        }
    }
    Ok(())
}

/// Check 1 for the function `name` (`f`) at `fargs`, at each of the
/// run-time counts: JIT == interpreter (bits) on the unoptimized IR,
/// optimized ~ unoptimized (also with fast math), JIT == interpreter on the
/// optimized IR, and both on extreme inputs.
pub(crate) fn check_function(
    name: &str,
    f: &Function,
    mut fargs: Vec<Value>,
    counts: &[u64],
    rng: &mut Rng,
    stats: &mut Stats,
) -> Result<(), Failure> {
    let show = show_args;
    let compile_ctx = |m: String| Failure(format!("{name}: {m}"));
    let native = backend::compile(f, &BackendOptions::verified())
        .map_err(|e| compile_ctx(format!("compile: {e}")))?;
    let opt = optimize_ir(f, &Options::default())
        .map_err(|e| compile_ctx(format!("optimize: {e}")))?
        .after;
    let native_opt = backend::compile(&opt, &BackendOptions::verified())
        .map_err(|e| compile_ctx(format!("compile optimized: {e}\n{opt}")))?;
    // With the fast-math rules too (`tests/fast_math.rs` states and
    // justifies the bound).
    let opt_fast = optimize_ir(f, &Options::default().fast_math(true))
        .map_err(|e| compile_ctx(format!("optimize with fast math: {e}")))?
        .after;
    for &count in counts {
        set_count(f, &mut fargs, count);
        let refs: Vec<&Value> = fargs.iter().collect();
        let ctx = |m: String| Failure(format!("{name}: {m}\ninputs:\n  {}", show(&fargs)));
        let want = jit_equals_interpreter(f, &native, &refs, "(unoptimized)", &ctx)?;
        let got_opt = run(&opt, &refs).map_err(|e| ctx(format!("optimized: {e:?}")))?;
        for (k, (g, w)) in got_opt.iter().zip(&want).enumerate() {
            let ok =
                g.shape == w.shape && g.data.iter().zip(&w.data).all(|(a, b)| close(*a, *b, 1e-9));
            if !ok {
                return Err(ctx(format!(
                    "result {k}: optimized {:?} vs unoptimized {:?}\nunoptimized:\n{f}\noptimized:\n{opt}",
                    g.data, w.data
                )));
            }
        }
        if got_opt.iter().zip(&want).any(|(g, w)| !g.bits_eq(w)) {
            stats.opt_not_bitwise += 1;
        }
        let got_fast = run(&opt_fast, &refs).map_err(|e| ctx(format!("fast math: {e:?}")))?;
        for (k, (g, w)) in got_fast.iter().zip(&want).enumerate() {
            let ok = g.shape == w.shape
                && g.data
                    .iter()
                    .zip(&w.data)
                    .all(|(a, b)| !b.is_finite() || close(*a, *b, 1e-9));
            if !ok {
                return Err(ctx(format!(
                    "result {k}: fast math {:?} vs strict {:?}\nstrict:\n{f}\nfast math:\n{opt_fast}",
                    g.data, w.data
                )));
            }
        }
        stats.fast_math_runs += 1;
        let got = native_opt
            .call(&refs)
            .map_err(|e| ctx(format!("jit call optimized: {e:?}")))?;
        for (k, (g, w)) in got.iter().zip(&got_opt).enumerate() {
            if !g.bits_eq(w) {
                return Err(ctx(format!(
                    "result {k}: JIT {:?} vs interpreter {:?} (optimized)\n{opt}",
                    g.data, w.data
                )));
            }
        }
        check_extreme_inputs(&fargs, [(f, &native), (&opt, &native_opt)], rng, &ctx)?;
    }
    Ok(())
}

/// `f` at `refs` by the interpreter and by its native code `native`, bit
/// for bit (a difference is reported with `what` after the values, then
/// `f`). Returns the interpreter's results.
pub(crate) fn jit_equals_interpreter(
    f: &Function,
    native: &backend::CompiledFunction,
    refs: &[&Value],
    what: &str,
    ctx: &dyn Fn(String) -> Failure,
) -> Result<Vec<Value>, Failure> {
    let want = run(f, refs).map_err(|e| ctx(format!("interpreter: {e:?}")))?;
    let got = native
        .call(refs)
        .map_err(|e| ctx(format!("jit call: {e:?}")))?;
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        if !g.bits_eq(w) {
            return Err(ctx(format!(
                "result {k}: JIT {:?} vs interpreter {:?} {what}\n{f}",
                g.data, w.data
            )));
        }
    }
    Ok(want)
}

/// Extreme inputs (signed zeros, huge, tiny, infinities, NaN) drawn in
/// place of the floats of `fargs`: only the JIT against the interpreter,
/// bit for bit, on both programs (unoptimized, optimized) of `pairs`.
pub(crate) fn check_extreme_inputs(
    fargs: &[Value],
    pairs: [(&Function, &backend::CompiledFunction); 2],
    rng: &mut Rng,
    ctx: &dyn Fn(String) -> Failure,
) -> Result<(), Failure> {
    let show = show_args;
    let wild: Vec<Value> = fargs
        .iter()
        .map(|a| {
            if matches!(a.dtype, DType::I64 | DType::Bool) {
                return a.clone();
            }
            let data = a.data.iter().map(|_| wild_value(rng)).collect();
            Value::array(a.dtype, a.shape.clone(), data)
        })
        .collect();
    let wrefs: Vec<&Value> = wild.iter().collect();
    for (which, (f, native)) in ["unoptimized", "optimized"].into_iter().zip(pairs) {
        let what = format!("({which}) on extreme inputs\n{}", show(&wild));
        jit_equals_interpreter(f, native, &wrefs, &what, ctx)?;
    }
    Ok(())
}

/// The program with f32 for f64: for each function, at each of the
/// run-time counts, JIT == interpreter bit for bit, unoptimized and
/// optimized.
pub(crate) fn check_f32(
    gp: &Generated,
    counts: &[u64],
    rng: &mut Rng,
    stats: &mut Stats,
) -> Result<(), Failure> {
    let show = show_args;
    let src32 = to_f32(&gp.source);
    let p32 = Program::parse(&src32)
        .map_err(|e| Failure(format!("the f32 variant does not check:\n{e}")))?;
    for name in p32.function_names() {
        let Ok(f) = p32.ir(name) else { continue };
        let mut fargs = inputs(f, gp, rng);
        let compile_ctx =
            |m: String| Failure(format!("{name} (the program with f32 for f64): {m}"));
        let opt = optimize_ir(f, &Options::default())
            .map_err(|e| compile_ctx(format!("optimize: {e}")))?
            .after;
        let natives = [
            backend::compile(f, &BackendOptions::verified())
                .map_err(|e| compile_ctx(format!("compile: {e}")))?,
            backend::compile(&opt, &BackendOptions::verified())
                .map_err(|e| compile_ctx(format!("compile optimized: {e}")))?,
        ];
        for &count in counts {
            set_count(f, &mut fargs, count);
            let refs: Vec<&Value> = fargs.iter().collect();
            let ctx = |m: String| {
                Failure(format!(
                    "{name} (the program with f32 for f64): {m}\ninputs:\n  {}",
                    show(&fargs)
                ))
            };
            for ((which, f), native) in [("unoptimized", f), ("optimized", &opt)]
                .into_iter()
                .zip(&natives)
            {
                jit_equals_interpreter(f, native, &refs, &format!("({which})"), &ctx)?;
            }
        }
        stats.f32_functions += 1;
    }
    Ok(())
}

/// Inputs of `loss` at the run-time count `count` away from its kinks, and
/// whether they are (else the last tried).
pub(crate) fn clear_inputs(
    loss: &Function,
    gp: &Generated,
    count: u64,
    rng: &mut Rng,
    stats: &mut Stats,
) -> (Vec<Value>, bool) {
    let delta = 1e-3;
    let mut args = inputs(loss, gp, rng);
    set_count(loss, &mut args, count);
    for attempt in 0..60 {
        if kink_margin(loss, &args) >= delta {
            if attempt > 0 {
                stats.resampled += 1;
            }
            return (args, true);
        }
        args = inputs(loss, gp, rng);
        set_count(loss, &mut args, count);
    }
    (args, false)
}

pub(crate) fn show_args(args: &[Value]) -> String {
    args.iter()
        .map(|a| format!("{:?} {:?}", a.shape, a.data))
        .collect::<Vec<_>>()
        .join("\n  ")
}

/// Give the run-time count `n` of `f` the value `count`.
pub(crate) fn set_count(f: &Function, args: &mut [Value], count: u64) {
    for (p, a) in f.params.iter().zip(args.iter_mut()) {
        if f.ty(p.var).dtype == DType::I64 && f.var_name(p.var) == "n" {
            *a = Value::scalar(DType::I64, count as f64);
        }
    }
}

/// Loops of `f` (and of its loops' bodies) with a run-time count.
pub(crate) fn runtime_loops(f: &Function) -> usize {
    f.loops
        .iter()
        .map(|l| usize::from(!matches!(l.count, Dim::Lit(_))) + runtime_loops(&l.body))
        .sum()
}

/// Checks 2 and 3 (derivatives) of the loss at `args`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn check_derivatives(
    gp: &Generated,
    p: &Program,
    loss: &Function,
    loss_eval: &Eval,
    args: Vec<Value>,
    clear: bool,
    seed: u64,
    rng: &mut Rng,
    stats: &mut Stats,
) -> Result<(), Failure> {
    let show = show_args;
    if !clear {
        if std::env::var("EGRAD_RANDOM_VERBOSE").is_ok() {
            println!("SKIP {seed:#x}: at a kink: {:?}", kink(loss, &args));
        }
        stats.skip_kink += 1;
        return Ok(());
    }
    let refs: Vec<&Value> = args.iter().collect();
    let ctx = |m: String| Failure(format!("{m}\ninputs:\n  {}", show(&args)));
    let lv = run(loss, &refs).unwrap()[0].as_scalar();
    if !lv.is_finite() {
        return Err(ctx(format!("the loss is not finite: {lv}")));
    }
    // 2. The gradient against finite differences of the loss.
    let dloss = p.ir("dloss").map_err(|e| Failure(e.to_string()))?;
    let grads = run(dloss, &refs).map_err(|e| ctx(format!("dloss: {e:?}")))?;
    check_gradient(gp, loss_eval, &args, &grads, stats)?;
    // @value_and_grad: the value and dloss's gradients.
    if gp.vg {
        check_value_and_grad(p, &args, lv, &grads, stats)?;
    }
    // @jvp: the directional derivative, against finite differences along the
    // tangents and against the gradient.
    if let Some(jw) = &gp.jv {
        check_jvp(gp, p, jw, loss_eval, &args, &grads, rng, stats)?;
    }
    // 3. The second derivative in s against finite differences of d1.
    if let Some(si) = gp.scalar {
        check_second_derivatives(gp, p, si, loss_eval, &args, rng, stats)?;
    }
    Ok(())
}

/// Check 2: the gradients `grads` (of `dloss`) at `args` against finite
/// differences of the loss, element by element.
pub(crate) fn check_gradient(
    gp: &Generated,
    loss_eval: &Eval,
    args: &[Value],
    grads: &[Value],
    stats: &mut Stats,
) -> Result<(), Failure> {
    let show = show_args;
    let ctx = |m: String| Failure(format!("{m}\ninputs:\n  {}", show(args)));
    if grads.len() != gp.wrt.len() {
        return Err(ctx(format!(
            "dloss returns {} values for {} parameters",
            grads.len(),
            gp.wrt.len()
        )));
    }
    let mut skipped = false;
    let mut seq_elems = 0;
    for (g, &i) in grads.iter().zip(&gp.wrt) {
        if g.shape != args[i].shape {
            return Err(ctx(format!(
                "gradient of parameter {i} has shape {:?}, the parameter {:?}",
                g.shape, args[i].shape
            )));
        }
        for k in 0..g.len() {
            if fd_compare(loss_eval, args, i, k, g.data[k], "dloss").map_err(|f| ctx(f.0))? {
                stats.grad_elems += 1;
                if gp.seq_params.contains(&i) {
                    seq_elems += 1;
                }
            } else {
                skipped = true;
            }
        }
    }
    if skipped {
        stats.skip_fd += 1;
    } else {
        stats.grad_checks += 1;
        if gp.wrt.iter().any(|i| gp.seq_params.contains(i)) {
            stats.seq_grad_checks += 1;
            stats.seq_grad_elems += seq_elems;
            stats.seq_grad_empty += usize::from(gp.l == 0);
        }
    }
    Ok(())
}

/// `vg` (`@value_and_grad`) at `args` against the loss's value `lv` and
/// `dloss`'s gradients `grads`.
pub(crate) fn check_value_and_grad(
    p: &Program,
    args: &[Value],
    lv: f64,
    grads: &[Value],
    stats: &mut Stats,
) -> Result<(), Failure> {
    let show = show_args;
    let refs: Vec<&Value> = args.iter().collect();
    let ctx = |m: String| Failure(format!("{m}\ninputs:\n  {}", show(args)));
    let vg = p.ir("vg").map_err(|e| Failure(e.to_string()))?;
    let out = run(vg, &refs).map_err(|e| ctx(format!("vg: {e:?}")))?;
    let ok = out.len() == grads.len() + 1
        && close(out[0].as_scalar(), lv, 1e-12)
        && out[1..].iter().zip(grads).all(|(a, b)| {
            a.shape == b.shape
                && a.data
                    .iter()
                    .zip(&b.data)
                    .all(|(x, y)| close(*x, *y, 1e-12))
        });
    if !ok {
        return Err(ctx(format!(
            "vg {:?} vs loss {lv} and dloss {:?}",
            out.iter().map(|v| &v.data).collect::<Vec<_>>(),
            grads.iter().map(|v| &v.data).collect::<Vec<_>>()
        )));
    }
    stats.vg_checks += 1;
    Ok(())
}

/// `jv` (`@jvp` in the parameters `jw`) at `args` along random tangents:
/// against finite differences of the loss along them, and against the
/// gradients `grads` where `dloss` has every parameter of `jv`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn check_jvp(
    gp: &Generated,
    p: &Program,
    jw: &[usize],
    loss_eval: &Eval,
    args: &[Value],
    grads: &[Value],
    rng: &mut Rng,
    stats: &mut Stats,
) -> Result<(), Failure> {
    let show = show_args;
    let ctx = |m: String| Failure(format!("{m}\ninputs:\n  {}", show(args)));
    let jv = p.ir("jv").map_err(|e| Failure(e.to_string()))?;
    let tangents: Vec<Value> = jw
        .iter()
        .map(|&i| {
            let a = &args[i];
            let data = a.data.iter().map(|_| rng.uniform(-1.0, 1.0)).collect();
            Value::array(a.dtype, a.shape.clone(), data)
        })
        .collect();
    let mut all = args.to_vec();
    all.extend(tangents.iter().cloned());
    let all_refs: Vec<&Value> = all.iter().collect();
    let got = run(jv, &all_refs).map_err(|e| ctx(format!("jv: {e:?}")))?[0].as_scalar();
    let along = |h: f64| {
        let shifted = |sign: f64| {
            let mut a = args.to_vec();
            for (t, &i) in tangents.iter().zip(jw) {
                for (x, d) in a[i].data.iter_mut().zip(&t.data) {
                    *x += sign * h * d;
                }
            }
            loss_eval.at(&a)
        };
        (shifted(1.0) - shifted(-1.0)) / (2.0 * h)
    };
    let (fd, fd2) = (along(1e-6), along(1e-7));
    if fd.is_finite() && (fd - fd2).abs() <= 1e-3 * (1.0 + fd.abs()) {
        if (got - fd).abs() > 1e-5 * (1.0 + fd.abs()) {
            return Err(ctx(format!(
                "jv: forward mode {got:e} vs finite differences along the tangents {fd:e} (h/10: {fd2:e})\ntangents: {}",
                show(&tangents)
            )));
        }
        stats.jvp_checks += 1;
    } else {
        stats.skip_jvp += 1;
    }
    // Against the gradient, where dloss has every parameter of jv.
    if jw.iter().all(|i| gp.wrt.contains(i)) {
        let mut dot = 0.0;
        let mut scale = 1.0;
        for (t, i) in tangents.iter().zip(jw) {
            let k = gp.wrt.iter().position(|w| w == i).unwrap();
            for (gx, tx) in grads[k].data.iter().zip(&t.data) {
                dot += gx * tx;
                scale += (gx * tx).abs();
            }
        }
        if (got - dot).abs() > 1e-9 * scale {
            return Err(ctx(format!(
                "jv: forward mode {got:e} vs the gradient along the tangents {dot:e}\ntangents: {}",
                show(&tangents)
            )));
        }
    }
    Ok(())
}

/// Check 3 in the scalar parameter `si`: `d1` against finite differences
/// of the loss, `d2` against finite differences of `d1` (unless left out),
/// `d3` of `d2`, `hv` against `d2` and `t3` of `hv`.
pub(crate) fn check_second_derivatives(
    gp: &Generated,
    p: &Program,
    si: usize,
    loss_eval: &Eval,
    args: &[Value],
    rng: &mut Rng,
    stats: &mut Stats,
) -> Result<(), Failure> {
    let show = show_args;
    let refs: Vec<&Value> = args.iter().collect();
    let ctx = |m: String| Failure(format!("{m}\ninputs:\n  {}", show(args)));
    let d1 = p.ir("d1").map_err(|e| Failure(e.to_string()))?;
    let g1 = run(d1, &refs).map_err(|e| ctx(format!("d1: {e:?}")))?[0].as_scalar();
    let mut ok = fd_compare(loss_eval, args, si, 0, g1, "d1").map_err(|f| ctx(f.0))?;
    if gp.second_dropped {
        // Through a loop or a native kernel: d1 only (d2 and hv are
        // not in the program).
        if gp.kernel_used {
            stats.skip_d2_kernel += 1;
            stats.skip_hv_kernel += usize::from(gp.hv_dropped);
        } else {
            stats.skip_d2_loop += 1;
            stats.skip_hv_loop += usize::from(gp.hv_dropped);
        }
        stats.d1_loop_checks += usize::from(ok);
        return Ok(());
    }
    let d2 = p.ir("d2").map_err(|e| Failure(e.to_string()))?;
    let g2 = run(d2, &refs).map_err(|e| ctx(format!("d2: {e:?}")))?[0].as_scalar();
    ok &= fd_compare(&Eval::Interp(d1), args, si, 0, g2, "d2 against d1").map_err(|f| ctx(f.0))?;
    if ok {
        stats.d2_checks += 1;
    } else {
        stats.skip_d2 += 1;
    }
    // Third order: d3 against finite differences of d2.
    if gp.d3 {
        let d3 = p.ir("d3").map_err(|e| Failure(e.to_string()))?;
        let g3 = run(d3, &refs).map_err(|e| ctx(format!("d3: {e:?}")))?[0].as_scalar();
        if fd_compare(&Eval::Interp(d2), args, si, 0, g3, "d3 against d2").map_err(|f| ctx(f.0))? {
            stats.d3_checks += 1;
        } else {
            stats.skip_d3 += 1;
        }
    }
    // Forward over reverse: hv(ds) = d2 * ds.
    if gp.hv {
        let hv = p.ir("hv").map_err(|e| Failure(e.to_string()))?;
        let ds = rng.uniform(-1.0, 1.0);
        let mut all = args.to_vec();
        all.push(Value::scalar(args[si].dtype, ds));
        let all_refs: Vec<&Value> = all.iter().collect();
        let got = run(hv, &all_refs).map_err(|e| ctx(format!("hv: {e:?}")))?[0].as_scalar();
        if (got - g2 * ds).abs() > 1e-8 * (1.0 + (g2 * ds).abs()) {
            return Err(ctx(format!(
                "hv: forward over reverse {got:e} vs d2 * ds = {g2:e} * {ds}"
            )));
        }
        stats.hvp_checks += 1;
        // Third order: t3 (reverse over forward over reverse) against
        // finite differences of hv.
        if gp.t3 {
            let t3 = p.ir("t3").map_err(|e| Failure(e.to_string()))?;
            let g3 = run(t3, &all_refs).map_err(|e| ctx(format!("t3: {e:?}")))?[0].as_scalar();
            if fd_compare(&Eval::Interp(hv), &all, si, 0, g3, "t3 against hv")
                .map_err(|f| ctx(f.0))?
            {
                stats.t3_checks += 1;
            } else {
                stats.skip_d3 += 1;
            }
        }
    }
    Ok(())
}

/// What happened to one program.
pub(crate) enum Outcome {
    Passed(Box<Stats>),
    /// A check failed, or egrad (or the generator) panicked.
    Failed(String),
}

pub(crate) fn panic_message(e: &(dyn std::any::Any + Send)) -> String {
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(a panic without a message)".into())
}

/// Generate and check the program of `seed`.
pub(crate) fn run_one(seed: u64) -> (Option<Generated>, Outcome) {
    let gp = match std::panic::catch_unwind(|| generate(seed)) {
        Ok(gp) => gp,
        Err(e) => return (None, Outcome::Failed(panic_message(&*e))),
    };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut st = Stats::default();
        check_program(&gp, seed, &mut st).map(|_| st)
    }));
    let outcome = match r {
        Ok(Ok(st)) => Outcome::Passed(Box::new(st)),
        Ok(Err(Failure(m))) => Outcome::Failed(m),
        Err(e) => Outcome::Failed(format!("panicked: {}", panic_message(&*e))),
    };
    (Some(gp), outcome)
}
