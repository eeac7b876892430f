//! Random programs: whole programs and helper functions (part 2 of 3). See `mod.rs`.

#[allow(unused_imports)]
use super::*;

pub(crate) fn generate_with(seed: u64, nest: bool) -> Generated {
    register_kernels();
    TAGS.with(|t| t.borrow_mut().clear());
    LONGS.with(|l| l.borrow_mut().clear());
    let mut rng = Rng(seed);
    // Whether and where loops go is drawn from a stream of its own: a
    // program without loops is the program its seed gave before loops
    // were generated.
    let mut loop_rng = Rng(mix(seed ^ 0x100B_5EED));
    let loopy = loop_rng.chance(loop_share());
    // A third of the loop programs have a run-time count `n: i64` (the
    // loss's last parameter): the step sizes are made for `rt`, and the
    // check runs the program at counts `rt`, 0 and 1.
    let mut rt_rng = Rng(mix(seed ^ 0x000C_00A7_C0DE));
    let rt = (loopy && rt_rng.chance(RT_SHARE)).then(|| rt_rng.range(40, 121) as u64);
    // The newer constructs (`scan`; `reverse` and `concat`; static
    // recursion) are drawn from a stream of their own too: a program
    // without them is the program its seed gave before they were generated.
    let mut nov_rng = Rng(mix(seed ^ 0x5CA7_C0CA_7000));
    let novel = nov_rng.chance(novel_share());
    let mut scan_on = novel && nov_rng.chance(0.6);
    let mut cat_on = novel && nov_rng.chance(0.6);
    let mut rec_on = novel && nov_rng.chance(0.5);
    if novel && !(scan_on || cat_on || rec_on) {
        match nov_rng.below(3) {
            0 => scan_on = true,
            1 => cat_on = true,
            _ => rec_on = true,
        }
    }
    // Run-time integers (`i64` parameters of the loss, gathers,
    // `scatter_add`, integer arithmetic) too.
    let mut int_rng = Rng(mix(seed ^ 0x0001_6400_1D5E));
    let ints_on = int_rng.chance(int_share());
    // Sequences of a length `L` of their own (`scan` and `scan_all` over
    // `zs: f64[L]` or `Zs: f64[L, B]`, differentiated with respect to the
    // sequence too) and `iterate_until` with a run-time bound `u: i64`:
    // a stream of their own as well.
    let mut seq_rng = Rng(mix(seed ^ 0x05E9_0F1E_4670));
    let seq_on = seq_rng.chance(seq_share());
    let mut seq_scan_on = seq_on && seq_rng.chance(0.65);
    let mut seq_all_on = seq_on && seq_rng.chance(0.6);
    let mut until_on = seq_on && seq_rng.chance(0.5);
    if seq_on && !(seq_scan_on || seq_all_on || until_on) {
        match seq_rng.below(3) {
            0 => seq_scan_on = true,
            1 => seq_all_on = true,
            _ => until_on = true,
        }
    }
    // Nested `tabulate`s and indexed stacks (values that depend on the
    // index of `tabulate`, indexed): a stream of their own as well.
    let mut nest_rng = Rng(mix(seed ^ 0x7AB5_0F7A_B500));
    let nest_any = nest_rng.chance(nest_share());
    let mut nest_on = nest_any && nest_rng.chance(0.7);
    let mut stack_on = nest_any && nest_rng.chance(0.7);
    if nest_any && !(nest_on || stack_on) {
        if nest_rng.chance(0.5) {
            nest_on = true;
        } else {
            stack_on = true;
        }
    }
    // `match` (on comparisons, static values, integers from floats and
    // run-time parameters of the loss of its own) and random numbers drawn
    // from keys: streams of their own as well.
    let mut match_rng = Rng(mix(seed ^ 0x3A7C_0000_0A75));
    let match_on = match_rng.chance(match_share());
    let mut key_rng = Rng(mix(seed ^ 0x4E15_E000_C0DE));
    let keys_on = key_rng.chance(key_share());
    // User primitives: functions with their own derivative rules, and
    // native kernels (registered from Rust): streams of their own as well.
    let mut custom_rng = Rng(mix(seed ^ 0xC057_0000_9B1E));
    let custom_on = custom_rng.chance(custom_share());
    let mut kernel_rng = Rng(mix(seed ^ 0x6E2E_1000_F00D));
    let kernels_on = kernel_rng.chance(kernel_share());
    let newer = Newer {
        matches: match_on,
        noise: keys_on,
        prims: custom_on || kernels_on,
    };
    let seq_len = seq_rng.range(0, L_MAX + 1);
    let zs = SeqParam {
        name: "zs",
        row: Ty::S,
    };
    let big_zs = SeqParam {
        name: "Zs",
        row: Ty::V(if seq_rng.chance(0.6) { D::M } else { D::N }),
    };
    let mut seq_kinds: Vec<SeqLet> = Vec::new();
    let scans = if seq_scan_on {
        1 + usize::from(seq_rng.chance(0.25))
    } else {
        0
    };
    for _ in 0..scans {
        let p = if seq_rng.chance(0.5) { &zs } else { &big_zs };
        seq_kinds.push(SeqLet::Scan(p.clone()));
    }
    if seq_all_on {
        let p = if seq_rng.chance(0.5) { &zs } else { &big_zs };
        seq_kinds.push(SeqLet::ScanAll(p.clone()));
    }
    if until_on {
        seq_kinds.push(SeqLet::Until);
    }
    // The sequence parameters the lets read.
    let seq_params: Vec<SeqParam> = [&zs, &big_zs]
        .into_iter()
        .filter(|p| {
            seq_kinds
                .iter()
                .any(|k| matches!(k, SeqLet::Scan(q) | SeqLet::ScanAll(q) if q == *p))
        })
        .cloned()
        .collect();
    let n = rng.range(2, 6);
    let m = rng.range(1, 4);
    let mut items: Vec<String> = Vec::new();
    let mut helpers: Vec<Helper> = Vec::new();
    // Helpers that run a loop of count `n` (their own or a callee's).
    let mut rt_helpers: Vec<String> = Vec::new();
    let nh = rng.range(1, 5);
    // The user primitives first (the helpers may call them), from their
    // own streams.
    if custom_on {
        for k in 0..1 + usize::from(custom_rng.chance(0.4)) {
            let (text, h) = gen_prim(&mut custom_rng, k + 1);
            items.push(text);
            helpers.push(h);
        }
    }
    if kernels_on {
        helpers.extend(kernel_helpers(&mut kernel_rng));
    }
    for k in 0..nh {
        let with_loop = loopy && loop_rng.chance(0.25);
        // Some helpers take the run-time count (and then have a loop).
        let rt_param = rt.filter(|_| rt_rng.chance(0.3));
        let with_loop = with_loop || rt_param.is_some();
        if let Some((text, h)) = gen_helper(
            &mut rng,
            k + 1,
            &helpers,
            with_loop,
            rt_param,
            cat_on,
            newer,
        ) {
            if rt_param.is_some() && counts_with_n(&text, &rt_helpers) {
                rt_helpers.push(h.name.clone());
            }
            items.push(text);
            helpers.push(h);
        }
    }
    // A helper that recurses through a static depth, called by the loss.
    let rec_helper = rec_on.then(|| {
        let (text, h) = gen_rec_helper(&mut rng, nh + 1, &helpers, cat_on);
        items.push(text);
        let name = h.name.clone();
        helpers.push(h);
        name
    });
    // A helper with an `i64` result (not among `helpers`: only the
    // integer expressions call it).
    let int_helper = (ints_on && int_rng.chance(0.4)).then(|| {
        let (text, h) = gen_int_helper(&mut int_rng, nh + 2);
        items.push(text);
        h
    });
    // The loss's parameters that `match` takes apart, a helper with a
    // `match`, and one that draws noise from a key it is passed.
    let mparams: Vec<&'static str> = MATCH_PARAMS
        .iter()
        .filter(|p| match_on && match_rng.chance(p.1))
        .map(|p| p.0)
        .collect();
    if match_on && match_rng.chance(0.6) {
        let (text, h) =
            gen_match_helper(&mut match_rng, nh + 3, &helpers, mparams.contains(&"kind"));
        items.push(text);
        helpers.push(h);
    }
    if keys_on && key_rng.chance(0.4) {
        let (text, h) = gen_key_helper(&mut key_rng, nh + 4, &helpers);
        items.push(text);
        helpers.push(h);
    }
    // A run-time seed `seed: i64` and a key `key: i64[2]`, after those.
    let seed_param = keys_on && key_rng.chance(0.4);
    let key_param = keys_on && key_rng.chance(0.3);
    // Loss parameters.
    let has_a = rng.chance(0.45);
    let mut params: Vec<(String, Ty)> = vec![("x".into(), Ty::V(D::N))];
    if rng.chance(0.5) {
        params.push(("y".into(), Ty::V(D::N)));
    }
    if rng.chance(0.85) {
        params.push(("s".into(), Ty::S));
    }
    if rng.chance(0.3) {
        params.push(("t".into(), Ty::S));
    }
    if has_a {
        params.push(("A".into(), Ty::Mt(D::N, D::M)));
        if rng.chance(0.6) {
            params.push(("b".into(), Ty::V(D::M)));
        }
    } else if rng.chance(0.15) {
        params.push(("b".into(), Ty::V(D::M)));
    }
    // Sequences for `scan`: parameters that no derivative takes.
    let mut seqs: Vec<(String, Ty)> = Vec::new();
    if scan_on {
        let r = nov_rng.below(3);
        if r != 1 {
            seqs.push(("xs".into(), Ty::V(D::N)));
        }
        if r != 0 {
            seqs.push(("Xs".into(), Ty::Mt(D::N, D::M)));
        }
        params.extend(seqs.iter().cloned());
    }
    let is_seq = |name: &str| seqs.iter().any(|(nm, _)| nm == name);
    rng.shuffle(&mut params);
    // The sequences of length `L` among them, anywhere (with their rows'
    // type: only their text and `uses_m` look at it).
    for p in &seq_params {
        let at = seq_rng.below(params.len() + 1);
        params.insert(at, (p.name.to_string(), p.row));
    }
    let new_seq = |name: &str| seq_params.iter().any(|p| p.name == name);
    // (A sequence `Zs: f64[L, M]` makes `M` a size, not a value of type
    // `f64[M]` in scope.)
    let m_values = params
        .iter()
        .any(|(nm, t)| !new_seq(nm) && matches!(t, Ty::V(D::M) | Ty::Mt(..)));
    let uses_m = m_values || seq_params.iter().any(|p| p.row == Ty::V(D::M));
    let lit = rng.chance(0.2).then_some((n as u64, m as u64));
    // Run-time integer parameters, after the others (so `wrt` and `jv`
    // index the same parameters): those along `M` where the loss has `M`.
    let mut iparams: Vec<IntParam> = Vec::new();
    if ints_on {
        for p in INT_PARAMS {
            let needs_m = p.len == Some(D::M) || p.range == D::M;
            if (m_values || !needs_m) && int_rng.chance(0.5) {
                iparams.push(p);
            }
        }
        if iparams.is_empty() {
            iparams.push(INT_PARAMS[int_rng.pick(&[0, 2])]);
        }
    }

    let mut g = Gen::new(&mut rng, 2, "M");
    g.lit = lit;
    g.rt_count = rt;
    g.helpers = helpers.clone();
    g.seqs = seqs.clone();
    // (Besides the scan of `scan_let`; one more for a loop's step where
    // there are loops.)
    g.scan_left = if scan_on {
        u32::from(loopy) + nov_rng.below(2) as u32
    } else {
        0
    };
    g.cat = cat_on;
    g.ints = iparams.clone();
    g.int_helper = int_helper.clone();
    g.nest = nest_on;
    g.stack_ix = stack_on;
    g.matches = match_on;
    g.mparams = mparams.clone();
    g.noise = keys_on;
    g.prims = custom_on || kernels_on;
    if seed_param {
        g.keys.push("random_key(seed)".into());
    }
    if key_param {
        g.keys.push("key".into());
    }
    for (name, ty) in &params {
        if !new_seq(name) {
            g.push_var(name, &Ex::leaf(name.clone(), 1.0, ty.is_array()), *ty);
        }
    }
    let mut size_names: Vec<&str> = match (lit, uses_m) {
        (Some(_), _) => vec![],
        (None, true) => vec!["N", "M"],
        (None, false) => vec!["N"],
    };
    if !seq_params.is_empty() {
        size_names.push("L");
    }
    let sizes = if size_names.is_empty() {
        String::new()
    } else {
        format!("[{}]", size_names.join(", "))
    };
    // A parameter's type (a sequence's has the size `L`).
    let ptext = |g: &Gen, (nm, t): &(String, Ty)| match seq_params.iter().find(|p| p.name == nm) {
        Some(p) => p.text(g),
        None => g.ty_text(*t),
    };
    let sig: Vec<String> = params
        .iter()
        .map(|p| format!("{}: {}", p.0, ptext(&g, p)))
        .collect();
    let mut sig = sig.join(", ");
    for p in &iparams {
        match p.len {
            Some(l) => {
                let _ = write!(sig, ", {}: i64[{}]", p.name, g.dim(l));
            }
            None => {
                let _ = write!(sig, ", {}: i64", p.name);
            }
        }
    }
    for p in &mparams {
        let ty = match *p {
            "kind" => format!("i64[{}]", g.dim(D::N)),
            "mode" => "i64".into(),
            "robust" => "bool".into(),
            _ => format!("bool[{}]", g.dim(D::N)),
        };
        let _ = write!(sig, ", {p}: {ty}");
    }
    if seed_param {
        sig.push_str(", seed: i64");
    }
    if key_param {
        sig.push_str(", key: i64[2]");
    }
    if until_on {
        sig.push_str(", u: i64");
    }
    if rt.is_some() {
        sig.push_str(", n: i64");
    }
    let mut body = String::new();
    let nlets = g.rng.range(1, 5);
    let mut lets: Vec<String> = Vec::new();
    // A loop as one of the lets (most loop programs), more at random, and
    // sometimes one inside a loop's step.
    let loop_let = (loopy && loop_rng.chance(0.85)).then(|| loop_rng.below(nlets));
    if loopy {
        g.long_left = loop_rng.below(2) as u32;
        g.nest_left = u32::from(loop_rng.chance(0.3) && nest);
    }
    // With a run-time count, most losses call a helper that takes one (if
    // there is one) in a let.
    let rt_call_let = (rt.is_some() && rt_rng.chance(0.7)).then(|| rt_rng.below(nlets));
    // A scan as one of the lets, and a call of the recursive helper.
    let scan_let = scan_on.then(|| nov_rng.below(nlets));
    let rec_let = rec_helper.as_ref().map(|_| nov_rng.below(nlets));
    // A let made with run-time integers.
    let int_let = ints_on.then(|| int_rng.below(nlets));
    // The sequence lets, each before one of the lets or after them all.
    let seq_slots: Vec<usize> = seq_kinds.iter().map(|_| seq_rng.below(nlets + 1)).collect();
    // A let that is a nested `tabulate`, and one that is a `tabulate`
    // indexing a stack.
    let nest_let = nest_on.then(|| nest_rng.below(nlets));
    let stack_let = stack_on.then(|| nest_rng.below(nlets));
    // A let that is a `match` (on the loss's parameters of its own where it
    // has some), and one or two noise lets (before the let of their slot).
    let match_let = match_on.then(|| match_rng.below(nlets));
    let noise_slots: Vec<usize> = if keys_on {
        let k = 1 + usize::from(key_rng.chance(0.3));
        (0..k).map(|_| key_rng.below(nlets)).collect()
    } else {
        Vec::new()
    };
    // A let that calls a user primitive, and one that calls a kernel.
    let custom_let = custom_on.then(|| custom_rng.below(nlets));
    let kernel_let = kernels_on.then(|| kernel_rng.below(nlets));
    let mut custom_pending = false;
    let mut kernel_pending = false;
    let mut match_pending = false;
    // (From `rec_let` on, until a call is written; likewise the nested
    // `tabulate` and the indexed stack, from their lets on.)
    let mut rec_pending = false;
    let mut nest_pending = false;
    let mut stack_pending = false;
    for li in 0..nlets {
        for (what, _) in seq_kinds.iter().zip(&seq_slots).filter(|k| *k.1 == li) {
            seq_let(&mut g, &mut body, &mut lets, what);
        }
        for _ in noise_slots.iter().filter(|&&k| k == li) {
            noise_let(&mut g, &mut body, &mut lets, uses_m);
        }
        let avail = g.avail();
        rec_pending |= rec_let == Some(li);
        // (From their lets on, until one is written.)
        custom_pending |= custom_let == Some(li);
        kernel_pending |= kernel_let == Some(li);
        if scan_let == Some(li) {
            let tys: Vec<Ty> = avail
                .iter()
                .copied()
                .filter(|t| !matches!(t, Ty::Mt(..)))
                .collect();
            let ty = g.rng.pick(&tys);
            let depth = g.rng.range(1, max_depth()) as u32;
            if let Some(e) = g.scan_expr(ty, depth) {
                let e = g.bounded(e);
                let name = g.fresh("a");
                g.bind_let(&mut body, &mut lets, name, &e, ty);
                continue;
            }
        }
        if rec_pending {
            let depth = g.rng.range(1, max_depth()) as u32;
            g.only_helper = rec_helper.clone();
            if let Some((e, ty)) = g.call_any(false, depth) {
                let name = g.fresh("a");
                g.bind_let(&mut body, &mut lets, name, &e, ty);
                rec_pending = false;
                continue;
            }
        }
        if rt_call_let == Some(li) && loop_let != Some(li) {
            let depth = g.rng.range(1, max_depth()) as u32;
            g.only_rt = true;
            let call = g.call_any(false, depth);
            g.only_rt = false;
            if let Some((e, ty)) = call {
                let name = g.fresh("a");
                g.bind_let(&mut body, &mut lets, name, &e, ty);
                continue;
            }
        }
        if loop_let == Some(li) {
            let tys: Vec<Ty> = avail
                .iter()
                .copied()
                .filter(|t| !matches!(t, Ty::Mt(..)))
                .collect();
            let ty = g.rng.pick(&tys);
            let depth = g.rng.range(1, max_depth()) as u32;
            let e = g.with_loop(ty, depth);
            let name = g.fresh("a");
            g.bind_let(&mut body, &mut lets, name, &e, ty);
            continue;
        }
        if int_let == Some(li) {
            // Mostly a gather, `scatter_add` or `tabulate` over an index
            // array (so that many programs have each), else any kind.
            let depth = g.rng.range(1, max_depth()) as u32;
            let kind = g.rng.pick(&[7, 7, 7, 7, 7, 9, 9, 9, 8, 8]);
            let made = (0..12).find_map(|attempt| {
                let ty = g.rng.pick(&avail);
                let kind = if attempt < 8 { kind } else { g.rng.below(10) };
                g.int_float_of(ty, depth, kind).map(|e| (e, ty))
            });
            if let Some((e, ty)) = made {
                let e = g.bounded(e);
                let name = g.fresh("a");
                g.bind_let(&mut body, &mut lets, name, &e, ty);
                continue;
            }
        }
        match_pending |= match_let == Some(li);
        if match_pending && match_let_of(&mut g, &mut body, &mut lets) {
            match_pending = false;
            continue;
        }
        if custom_pending && prim_let(&mut g, &mut body, &mut lets, false) {
            custom_pending = false;
            continue;
        }
        if kernel_pending && prim_let(&mut g, &mut body, &mut lets, true) {
            kernel_pending = false;
            continue;
        }
        nest_pending |= nest_let == Some(li);
        stack_pending |= stack_let == Some(li);
        if (nest_pending || stack_pending)
            && nest_lets(
                &mut g,
                &mut body,
                &mut lets,
                &mut nest_pending,
                &mut stack_pending,
            )
        {
            continue;
        }
        let r = g.rng.below(10);
        if r < 2 {
            // A tuple-returning helper.
            let tuple_helpers: Vec<Helper> = g
                .helpers
                .iter()
                .filter(|h| h.rets.len() == 2)
                .cloned()
                .collect();
            if !tuple_helpers.is_empty() {
                let h = g.rng.pick(&tuple_helpers);
                // Its params are (v: f64[N], a: f64) or (a: f64, c: f64).
                let mut args = Vec::new();
                for p in &h.params {
                    if let HParam::Dyn(t) = p {
                        let mut a = g.gen(*t, 2);
                        if h.needs_var && t.is_array() && !a.var {
                            a = g.leaf(*t);
                        }
                        args.push(a.s);
                    }
                }
                let call = format!("{}({})", h.name, args.join(", "));
                let (p1, p2) = (g.fresh("a"), g.fresh("a"));
                let _ = writeln!(body, "  let ({p1}, {p2}) = {call}");
                let inf = Ex {
                    s: call,
                    b: f64::INFINITY,
                    var: false,
                    tab: false,
                    ts: true,
                    k: false,
                };
                g.push_var(&p1, &inf, h.rets[0]);
                g.push_var(&p2, &inf, h.rets[1]);
                // Bound them before use.
                for (p, t) in [(p1.clone(), h.rets[0]), (p2.clone(), h.rets[1])] {
                    let _ = writeln!(body, "  let {p} = tanh({p})");
                    let e = Ex::leaf(p.clone(), 1.0, false);
                    g.push_var(&p, &e, t);
                    lets.push(p);
                }
                continue;
            }
        }
        let depth = g.rng.range(1, max_depth()) as u32;
        // Most losses call a helper (half of the time a derivative one).
        let forced = if lets.is_empty() && g.rng.chance(0.75) {
            let deriv = g.rng.chance(0.5);
            g.call_any(deriv, depth)
        } else {
            None
        };
        let (e, ty) = match forced {
            Some(r) => r,
            None => {
                let ty = g.rng.pick(&avail);
                (g.gen(ty, depth), ty)
            }
        };
        // Sometimes shadow an earlier let of the same type.
        let name = match lets
            .iter()
            .rev()
            .find(|l| g.env.iter().rev().find(|v| &v.name == *l).map(|v| v.ty) == Some(ty))
        {
            Some(l) if g.rng.chance(0.2) => l.clone(),
            _ => g.fresh("a"),
        };
        g.bind_let(&mut body, &mut lets, name, &e, ty);
    }
    for (what, _) in seq_kinds.iter().zip(&seq_slots).filter(|k| *k.1 == nlets) {
        seq_let(&mut g, &mut body, &mut lets, what);
    }
    if rec_pending {
        // The scan took the let meant for the call: one more let.
        let depth = g.rng.range(1, max_depth()) as u32;
        g.only_helper = rec_helper.clone();
        if let Some((e, ty)) = g.call_any(false, depth) {
            let name = g.fresh("a");
            g.bind_let(&mut body, &mut lets, name, &e, ty);
        }
    }
    // (Lets that found no slot.)
    if match_pending {
        match_let_of(&mut g, &mut body, &mut lets);
    }
    if custom_pending {
        prim_let(&mut g, &mut body, &mut lets, false);
    }
    if kernel_pending {
        prim_let(&mut g, &mut body, &mut lets, true);
    }
    while nest_pending || stack_pending {
        nest_lets(
            &mut g,
            &mut body,
            &mut lets,
            &mut nest_pending,
            &mut stack_pending,
        );
    }
    let depth = g.rng.range(1, max_depth()) as u32;
    let fin = g.gen(Ty::S, depth);
    let mut result = fin.s.clone();
    // Use every let that nothing used.
    let vis = g.visible();
    for i in vis {
        let v = g.env[i].clone();
        if v.used || !lets.contains(&v.name) {
            continue;
        }
        match v.ty {
            Ty::S => result = format!("{result} + {}", v.name),
            _ => result = format!("{result} + +/{}", v.name),
        }
    }
    let _ = writeln!(body, "  {result}");
    items.push(format!("fn loss{sizes}({sig}) -> f64 {{\n{body}}}"));
    // Loop counts for the steps as written (helpers and the loss).
    let (counts, loop_counts, loop_cost) = calibrate(&items.join("\n\n"), &body);

    // The gradient of a random subset, in a random order.
    // (never a sequence of `scan`).
    let mut wrt: Vec<usize> = (0..params.len())
        .filter(|&i| !is_seq(&params[i].0))
        .collect();
    g.rng.shuffle(&mut wrt);
    let keep = g.rng.range(1, wrt.len() + 1);
    wrt.truncate(keep);
    // Mostly with respect to a sequence of length `L` too, where there is one.
    let seq_idx: Vec<usize> = (0..params.len())
        .filter(|&i| new_seq(&params[i].0))
        .collect();
    if !seq_idx.is_empty() && !wrt.iter().any(|i| seq_idx.contains(i)) && seq_rng.chance(0.85) {
        let i = seq_rng.pick(&seq_idx);
        let at = seq_rng.below(wrt.len() + 1);
        wrt.insert(at, i);
    }
    let mut args: Vec<&str> = params.iter().map(|(nm, _)| nm.as_str()).collect();
    args.extend(iparams.iter().map(|p| p.name));
    args.extend(mparams.iter());
    if seed_param {
        args.push("seed");
    }
    if key_param {
        args.push("key");
    }
    if until_on {
        args.push("u");
    }
    if rt.is_some() {
        args.push("n");
    }
    let args = args.join(", ");
    let names: Vec<&str> = wrt.iter().map(|&i| params[i].0.as_str()).collect();
    let tys: Vec<String> = wrt.iter().map(|&i| ptext(&g, &params[i])).collect();
    let ret = if tys.len() == 1 {
        tys[0].clone()
    } else {
        format!("({})", tys.join(", "))
    };
    items.push(format!(
        "@grad({})\nfn dloss{sizes}({sig}) -> {ret} = loss({args})",
        names.join(", ")
    ));
    let scalar = params.iter().position(|(nm, _)| nm == "s");
    let mut hv = false;
    let mut second: Vec<String> = Vec::new();
    if scalar.is_some() {
        items.push(format!(
            "@grad(s)\nfn d1{sizes}({sig}) -> f64 = loss({args})"
        ));
        second.push(format!("@grad(s)\nfn d2{sizes}({sig}) -> f64 = d1({args})"));
        // A Hessian-vector product: forward over reverse.
        if g.rng.chance(0.5) {
            hv = true;
            second.push(format!(
                "@jvp(s)\nfn hv{sizes}({sig}, ds: f64) -> f64 = d1({args})"
            ));
        }
    }
    // Should egrad refuse a second derivative (through a loop it goes by
    // forward mode), the program has no `d2` and `hv` (and the check
    // counts it).
    let mut second_dropped = false;
    let mut second_refused = None;
    let scans = items.iter().any(|t| t.contains("scan("));
    // A program calling a native kernel has no second derivative (a
    // kernel's VJP has none) and no forward mode (a kernel has none): its
    // `d2`, `hv` and `jv` are left out (and counted), and its f32 copy is
    // not checked (kernels take `f64`s).
    let kernel_used = kernels_on
        && items
            .iter()
            .any(|t| KERNELS.iter().any(|k| t.contains(&format!("{k}("))));
    if kernel_used && !second.is_empty() {
        second_dropped = true;
    } else if (!loop_counts.is_empty() || rt.is_some() || scans || seq_on) && !second.is_empty() {
        let with = [items.as_slice(), second.as_slice()].concat().join("\n\n");
        if let Err(e) = probe(&fill(&with, &counts)) {
            second_refused = refused_forward(&e.to_string());
            second_dropped = second_refused.is_some();
        }
    }
    let hv_dropped = hv && second_dropped;
    if second_dropped {
        hv = false;
    } else {
        items.extend(second);
    }
    // Third derivatives in `s`: reverse three times (`d3 = @grad(s) d2`)
    // and reverse over forward over reverse (`t3 = @grad(s) hv`, the
    // shape that came out as 0 through a loop, issue 32). They take no
    // random number, so a seed gives the program it gave before, plus
    // these. Should egrad refuse one (a documented limit: `unsupported`)
    // or find it too large (a `limit`), it is left out and counted.
    let mut third: Vec<String> = Vec::new();
    if scalar.is_some() && !second_dropped && !kernel_used {
        third.push(format!("@grad(s)\nfn d3{sizes}({sig}) -> f64 = d2({args})"));
        if hv {
            third.push(format!(
                "@grad(s)\nfn t3{sizes}({sig}, ds: f64) -> f64 = hv({args}, ds)"
            ));
        }
    }
    // Each is tried alone (`t3` goes through loops where `d3` stops).
    let mut third_refused = None;
    let mut kept = Vec::new();
    for t in third {
        let with = [items.as_slice(), std::slice::from_ref(&t)]
            .concat()
            .join("\n\n");
        let refused = match probe(&fill(&with, &counts)) {
            Err(e) if e.kind() == ErrorKind::Unsupported => {
                Some("a documented limit of reverse mode")
            }
            Err(e) if e.kind() == ErrorKind::Limit => Some("too many operations"),
            // Anything else is a bug: kept, so the program fails to check.
            _ => None,
        };
        match refused {
            Some(r) => third_refused = Some(r),
            None => kept.push(t),
        }
    }
    let d3 = kept.iter().any(|t| t.contains("fn d3"));
    let t3 = kept.iter().any(|t| t.contains("fn t3"));
    items.extend(kept);
    // The value and the gradient from one sweep.
    let vg = g.rng.chance(0.5);
    if vg {
        items.push(format!(
            "@value_and_grad({})\nfn vg{sizes}({sig}) -> (f64, {}) = loss({args})",
            names.join(", "),
            tys.join(", ")
        ));
    }
    // Forward mode along random tangents of a random subset.
    let jv = g.rng.chance(0.6).then(|| {
        let mut jw: Vec<usize> = (0..params.len())
            .filter(|&i| !is_seq(&params[i].0))
            .collect();
        g.rng.shuffle(&mut jw);
        let keep = g.rng.range(1, jw.len() + 1);
        jw.truncate(keep);
        jw
    });
    // Forward mode with respect to a sequence of length `L` is not
    // supported (an error): such a sequence is left out of `jv`'s wrt (and
    // `jv` with it if it had nothing else), and counted.
    let mut jv_seq_left_out = false;
    let mut jv = jv.and_then(|mut jw| {
        let before = jw.len();
        jw.retain(|i| !seq_idx.contains(i));
        jv_seq_left_out = jw.len() < before;
        (!jw.is_empty()).then_some(jw)
    });
    let jv_kernel = kernel_used && jv.is_some();
    if jv_kernel {
        jv = None;
    }
    let mut jv_refused = None;
    if let Some(jw) = &jv {
        let names: Vec<&str> = jw.iter().map(|&i| params[i].0.as_str()).collect();
        let tans: Vec<String> = jw
            .iter()
            .map(|&i| format!("d{}: {}", params[i].0, ptext(&g, &params[i])))
            .collect();
        items.push(format!(
            "@jvp({})\nfn jv{sizes}({sig}, {}) -> f64 = loss({args})",
            names.join(", "),
            tans.join(", ")
        ));
        // A sequence scaled by a value `jv` takes is still forward mode
        // with respect to the sequence: then `jv` is left out (counted).
        if seq_on {
            if let Err(e) = probe(&fill(&items.join("\n\n"), &counts)) {
                let e = e.to_string();
                jv_refused = refused_forward(&e).filter(|_| e.contains("`jv` cannot"));
                if jv_refused.is_some() {
                    items.pop();
                }
            }
        }
    }
    if jv_refused.is_some() {
        jv = None;
    }
    // A scan in a loop's step over a sequence the loop carries: egrad once
    // rejected every derivative through that loop (fixed, see the module
    // doc); a documented limit it still reports there leaves the loss's
    // derivatives out (counted and printed); its value is still checked.
    let mut deriv_dropped = false;
    let nested_scan = TAGS.with(|t| {
        t.borrow()
            .iter()
            .any(|(name, _)| *name == "scan: inside a loop's step")
    });
    if nested_scan {
        if let Err(e) = probe(&fill(&items.join("\n\n"), &counts)) {
            if e.to_string().contains("is not supported yet") {
                let derivs = ["dloss", "vg", "jv", "d1", "d2", "hv"];
                items.retain(|t| {
                    !derivs.iter().any(|d| {
                        t.contains(&format!("\nfn {d}(")) || t.contains(&format!("\nfn {d}["))
                    })
                });
                deriv_dropped = true;
            }
        }
    }
    rng.shuffle(&mut items);
    let source = fill(&(items.join("\n\n") + "\n"), &counts);
    let mut tags: Vec<&'static str> = TAGS.with(|t| {
        t.borrow()
            .iter()
            .filter(|(_, text)| source.contains(fill(text, &counts).as_str()))
            .map(|(name, _)| *name)
            .collect()
    });
    tags.sort_unstable();
    tags.dedup();
    Generated {
        l: seq_len,
        seq: seq_on,
        seq_params: seq_idx,
        jv_seq_left_out,
        jv_refused,
        second_refused,
        rt_counts: rt.map_or(Vec::new(), |c| vec![c, 0, 1]),
        rt_in_loss: rt.is_some() && counts_with_n(&body, &rt_helpers),
        novel,
        ints: ints_on,
        nest: nest_any,
        matches: match_on,
        keys: keys_on,
        custom: custom_on,
        kernels: kernels_on,
        kernel_used,
        jv_kernel,
        rec_helper,
        deriv_dropped,
        source,
        tags,
        second_dropped,
        hv_dropped,
        d3,
        t3,
        third_refused,
        loop_counts,
        loop_cost,
        hv,
        vg,
        jv,
        n,
        m,
        wrt,
        scalar,
    }
}

/// A let of the loss that is a `match` (on its parameters of its own where
/// it has some): whether one was written.
pub(crate) fn match_let_of(g: &mut Gen, body: &mut String, lets: &mut Vec<String>) -> bool {
    let avail = g.avail();
    let depth = g.rng.range(1, max_depth()) as u32;
    let made = (0..8).find_map(|attempt| {
        let ty = if attempt < 4 && g.mparams.iter().any(|p| *p == "kind" || *p == "mask") {
            Ty::V(D::N)
        } else {
            g.rng.pick(&avail)
        };
        g.match_of(ty, depth, true).map(|e| (e, ty))
    });
    let Some((e, ty)) = made else {
        return false;
    };
    let e = g.bounded(e);
    let name = g.fresh("a");
    g.bind_let(body, lets, name, &e, ty);
    true
}
