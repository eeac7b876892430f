//! Random programs: whole programs and helper functions (part 2 of 3). See `mod.rs`.

#[allow(unused_imports)]
use super::*;

pub(crate) fn generate_with(seed: u64, nest: bool) -> Generated {
    register_kernels();
    TAGS.with(|t| t.borrow_mut().clear());
    LONGS.with(|l| l.borrow_mut().clear());
    let mut rng = Rng(seed);
    let (mut s, c) = draw_constructs(seed);
    let seq = draw_seq_lets(&mut s, &c);
    let h = draw_loss_helpers(&mut rng, &mut s, &c);
    let p = draw_loss_params(&mut rng, &mut s, &c, &seq, &h);
    let mut d = ProgramDraft {
        s,
        c,
        seq,
        h,
        p,
        sizes: String::new(),
        sig: String::new(),
    };
    let mut g = loss_gen(&mut rng, &mut d);
    loss_signature(&g, &mut d);
    let body = loss_body(&mut g, &mut d, nest);
    let (sizes, sig) = (&d.sizes, &d.sig);
    d.h.items
        .push(format!("fn loss{sizes}({sig}) -> f64 {{\n{body}}}"));
    // Loop counts for the steps as written (helpers and the loss).
    let calibrated = calibrate(&d.h.items.join("\n\n"), &body);
    let dv = derivatives(&mut g, &mut d, &calibrated.0, &calibrated.1);
    assemble_generated(&mut rng, d, dv, &body, calibrated)
}

/// The random streams of a program besides its first one (`rng`): each
/// kind of construct added since the first programs draws from a stream of
/// its own, so that a program without it is the program its seed gave
/// before it was generated.
pub(crate) struct ProgramStreams {
    pub(crate) loop_rng: Rng,
    pub(crate) rt_rng: Rng,
    pub(crate) nov_rng: Rng,
    pub(crate) int_rng: Rng,
    pub(crate) seq_rng: Rng,
    pub(crate) nest_rng: Rng,
    pub(crate) match_rng: Rng,
    pub(crate) key_rng: Rng,
    pub(crate) custom_rng: Rng,
    pub(crate) kernel_rng: Rng,
}

/// Which constructs a program has (see `draw_constructs`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ProgramConstructs {
    pub(crate) loopy: bool,
    /// The run-time count `n: i64` the step sizes are made for.
    pub(crate) rt: Option<u64>,
    pub(crate) novel: bool,
    pub(crate) scan_on: bool,
    pub(crate) cat_on: bool,
    pub(crate) rec_on: bool,
    pub(crate) ints_on: bool,
    pub(crate) seq_on: bool,
    pub(crate) seq_scan_on: bool,
    pub(crate) seq_all_on: bool,
    pub(crate) until_on: bool,
    pub(crate) nest_any: bool,
    pub(crate) nest_on: bool,
    pub(crate) stack_on: bool,
    pub(crate) match_on: bool,
    pub(crate) keys_on: bool,
    pub(crate) custom_on: bool,
    pub(crate) kernels_on: bool,
    /// A long `iterate` of the loss has a tuple state of mixed shapes.
    pub(crate) mixed_on: bool,
    pub(crate) newer: Newer,
}

/// The sequences of length `L` of a program (see `draw_seq_lets`).
pub(crate) struct SeqDraw {
    /// The length `L`.
    pub(crate) len: usize,
    /// The sequence lets of the loss.
    pub(crate) kinds: Vec<SeqLet>,
    /// The sequence parameters the lets read.
    pub(crate) params: Vec<SeqParam>,
}

/// The helpers of a program and what the loss takes to call them (see
/// `draw_loss_helpers`).
pub(crate) struct LossHelpers {
    pub(crate) n: usize,
    pub(crate) m: usize,
    /// The program's functions written so far.
    pub(crate) items: Vec<String>,
    pub(crate) helpers: Vec<Helper>,
    /// Helpers that run a loop of count `n` (their own or a callee's).
    pub(crate) rt_helpers: Vec<String>,
    pub(crate) rec_helper: Option<String>,
    pub(crate) int_helper: Option<(String, f64)>,
    /// The loss's parameters that `match` takes apart.
    pub(crate) mparams: Vec<&'static str>,
    /// The loss has a run-time seed `seed: i64`, a key `key: i64[2]`.
    pub(crate) seed_param: bool,
    pub(crate) key_param: bool,
}

/// The loss's parameters (see `draw_loss_params`).
pub(crate) struct LossParams {
    /// Its floating-point parameters, in order (the sequences of length
    /// `L` among them).
    pub(crate) params: Vec<(String, Ty)>,
    /// The sequences for `scan`, which no derivative takes.
    pub(crate) seqs: Vec<(String, Ty)>,
    pub(crate) uses_m: bool,
    pub(crate) lit: Option<(u64, u64)>,
    /// Its run-time integer parameters (after the others).
    pub(crate) iparams: Vec<IntParam>,
}

/// What `generate_with` drew for a program, shared by its parts.
pub(crate) struct ProgramDraft {
    pub(crate) s: ProgramStreams,
    pub(crate) c: ProgramConstructs,
    pub(crate) seq: SeqDraw,
    pub(crate) h: LossHelpers,
    pub(crate) p: LossParams,
    /// The loss's sizes (`[N, M]`, or empty) and its signature's
    /// parameters, which its derivatives share.
    pub(crate) sizes: String,
    pub(crate) sig: String,
}

impl ProgramDraft {
    /// `name` is a sequence of `scan`.
    pub(crate) fn is_seq(&self, name: &str) -> bool {
        self.p.seqs.iter().any(|(nm, _)| nm == name)
    }

    /// `name` is a sequence of length `L`.
    pub(crate) fn new_seq(&self, name: &str) -> bool {
        self.seq.params.iter().any(|p| p.name == name)
    }

    /// A parameter's type (a sequence's has the size `L`).
    pub(crate) fn ptext(&self, g: &Gen, (nm, t): &(String, Ty)) -> String {
        match self.seq.params.iter().find(|p| p.name == nm) {
            Some(p) => p.text(g),
            None => g.ty_text(*t),
        }
    }
}

/// Which constructs the program of `seed` has, each drawn from a stream of
/// its own (returned with them, for what the program draws later).
pub(crate) fn draw_constructs(seed: u64) -> (ProgramStreams, ProgramConstructs) {
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
    // A loop whose state is a tuple of mixed shapes (a vector and a matrix
    // or a vector of another length, sometimes a scalar): a stream of its
    // own as well, drawn only for programs with loops.
    let mut mixed_rng = Rng(mix(seed ^ 0x0A1E_D500_5A7E));
    let mixed_on = loopy && mixed_rng.chance(mixed_share());
    let newer = Newer {
        matches: match_on,
        noise: keys_on,
        prims: custom_on || kernels_on,
    };
    let s = ProgramStreams {
        loop_rng,
        rt_rng,
        nov_rng,
        int_rng,
        seq_rng,
        nest_rng,
        match_rng,
        key_rng,
        custom_rng,
        kernel_rng,
    };
    let c = ProgramConstructs {
        loopy,
        rt,
        novel,
        scan_on,
        cat_on,
        rec_on,
        ints_on,
        seq_on,
        seq_scan_on,
        seq_all_on,
        until_on,
        nest_any,
        nest_on,
        stack_on,
        match_on,
        keys_on,
        mixed_on,
        custom_on,
        kernels_on,
        newer,
    };
    (s, c)
}

/// The sequences of length `L` (`zs: f64[L]`, `Zs: f64[L, B]`) and the
/// loss's lets that read them (`scan`, `scan_all`, `iterate_until`), from
/// their stream.
pub(crate) fn draw_seq_lets(s: &mut ProgramStreams, c: &ProgramConstructs) -> SeqDraw {
    let seq_rng = &mut s.seq_rng;
    let (seq_scan_on, seq_all_on, until_on) = (c.seq_scan_on, c.seq_all_on, c.until_on);
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
    SeqDraw {
        len: seq_len,
        kinds: seq_kinds,
        params: seq_params,
    }
}

/// The program's sizes `n` and `m`, and its helpers: the user primitives,
/// the helpers drawn from `rng` (some with a loop or the run-time count),
/// the recursive helper, the integer helper, a helper with a `match` and
/// one that draws noise from a key; and whether the loss takes a run-time
/// seed and key.
pub(crate) fn draw_loss_helpers(
    rng: &mut Rng,
    s: &mut ProgramStreams,
    c: &ProgramConstructs,
) -> LossHelpers {
    let ProgramConstructs {
        loopy,
        rt,
        cat_on,
        rec_on,
        ints_on,
        match_on,
        keys_on,
        custom_on,
        kernels_on,
        newer,
        ..
    } = *c;
    let ProgramStreams {
        loop_rng,
        rt_rng,
        int_rng,
        match_rng,
        key_rng,
        custom_rng,
        kernel_rng,
        ..
    } = s;
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
            let (text, h) = gen_prim(custom_rng, k + 1);
            items.push(text);
            helpers.push(h);
        }
    }
    if kernels_on {
        helpers.extend(kernel_helpers(kernel_rng));
    }
    for k in 0..nh {
        let with_loop = loopy && loop_rng.chance(0.25);
        // Some helpers take the run-time count (and then have a loop).
        let rt_param = rt.filter(|_| rt_rng.chance(0.3));
        let with_loop = with_loop || rt_param.is_some();
        if let Some((text, h)) =
            gen_helper(rng, k + 1, &helpers, with_loop, rt_param, cat_on, newer)
        {
            if rt_param.is_some() && counts_with_n(&text, &rt_helpers) {
                rt_helpers.push(h.name.clone());
            }
            items.push(text);
            helpers.push(h);
        }
    }
    // A helper that recurses through a static depth, called by the loss.
    let rec_helper = rec_on.then(|| {
        let (text, h) = gen_rec_helper(rng, nh + 1, &helpers, cat_on);
        items.push(text);
        let name = h.name.clone();
        helpers.push(h);
        name
    });
    // A helper with an `i64` result (not among `helpers`: only the
    // integer expressions call it).
    let int_helper = (ints_on && int_rng.chance(0.4)).then(|| {
        let (text, h) = gen_int_helper(int_rng, nh + 2);
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
        let (text, h) = gen_match_helper(match_rng, nh + 3, &helpers, mparams.contains(&"kind"));
        items.push(text);
        helpers.push(h);
    }
    if keys_on && key_rng.chance(0.4) {
        let (text, h) = gen_key_helper(key_rng, nh + 4, &helpers);
        items.push(text);
        helpers.push(h);
    }
    // A run-time seed `seed: i64` and a key `key: i64[2]`, after those.
    let seed_param = keys_on && key_rng.chance(0.4);
    let key_param = keys_on && key_rng.chance(0.3);
    LossHelpers {
        n,
        m,
        items,
        helpers,
        rt_helpers,
        rec_helper,
        int_helper,
        mparams,
        seed_param,
        key_param,
    }
}

/// The loss's parameters: the floating-point ones from `rng` (and the
/// sequences of `scan` and of length `L` among them), literal sizes, and
/// the run-time integer ones.
pub(crate) fn draw_loss_params(
    rng: &mut Rng,
    s: &mut ProgramStreams,
    c: &ProgramConstructs,
    seq: &SeqDraw,
    h: &LossHelpers,
) -> LossParams {
    let (n, m) = (h.n, h.m);
    let seq_params = &seq.params;
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
    if c.scan_on {
        let r = s.nov_rng.below(3);
        if r != 1 {
            seqs.push(("xs".into(), Ty::V(D::N)));
        }
        if r != 0 {
            seqs.push(("Xs".into(), Ty::Mt(D::N, D::M)));
        }
        params.extend(seqs.iter().cloned());
    }
    rng.shuffle(&mut params);
    // The sequences of length `L` among them, anywhere (with their rows'
    // type: only their text and `uses_m` look at it).
    for p in seq_params {
        let at = s.seq_rng.below(params.len() + 1);
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
    if c.ints_on {
        for p in INT_PARAMS {
            let needs_m = p.len == Some(D::M) || p.range == D::M;
            if (m_values || !needs_m) && s.int_rng.chance(0.5) {
                iparams.push(p);
            }
        }
        if iparams.is_empty() {
            iparams.push(INT_PARAMS[s.int_rng.pick(&[0, 2])]);
        }
    }
    LossParams {
        params,
        seqs,
        uses_m,
        lit,
        iparams,
    }
}

/// The generator of the loss's text, drawing from `rng`: what the program
/// has, and the loss's parameters in scope.
pub(crate) fn loss_gen<'r>(rng: &'r mut Rng, d: &mut ProgramDraft) -> Gen<'r> {
    let c = d.c;
    let mut g = Gen::new(rng, 2, "M");
    g.lit = d.p.lit;
    g.rt_count = c.rt;
    g.helpers = d.h.helpers.clone();
    g.seqs = d.p.seqs.clone();
    // (Besides the scan of `scan_let`; one more for a loop's step where
    // there are loops.)
    g.mixed_left = u32::from(c.mixed_on);
    g.scan_left = if c.scan_on {
        u32::from(c.loopy) + d.s.nov_rng.below(2) as u32
    } else {
        0
    };
    g.cat = c.cat_on;
    g.ints = d.p.iparams.clone();
    g.int_helper = d.h.int_helper.clone();
    g.nest = c.nest_on;
    g.stack_ix = c.stack_on;
    g.matches = c.match_on;
    g.mparams = d.h.mparams.clone();
    g.noise = c.keys_on;
    g.prims = c.custom_on || c.kernels_on;
    if d.h.seed_param {
        g.keys.push("random_key(seed)".into());
    }
    if d.h.key_param {
        g.keys.push("key".into());
    }
    for (name, ty) in &d.p.params {
        if !d.new_seq(name) {
            g.push_var(name, &Ex::leaf(name.clone(), 1.0, ty.is_array()), *ty);
        }
    }
    g
}

/// The loss's sizes and the parameters of its signature (which its
/// derivatives share), into `d.sizes` and `d.sig`.
pub(crate) fn loss_signature(g: &Gen, d: &mut ProgramDraft) {
    let mut size_names: Vec<&str> = match (d.p.lit, d.p.uses_m) {
        (Some(_), _) => vec![],
        (None, true) => vec!["N", "M"],
        (None, false) => vec!["N"],
    };
    if !d.seq.params.is_empty() {
        size_names.push("L");
    }
    let sizes = if size_names.is_empty() {
        String::new()
    } else {
        format!("[{}]", size_names.join(", "))
    };
    let sig: Vec<String> =
        d.p.params
            .iter()
            .map(|p| format!("{}: {}", p.0, d.ptext(g, p)))
            .collect();
    let mut sig = sig.join(", ");
    for p in &d.p.iparams {
        match p.len {
            Some(l) => {
                let _ = write!(sig, ", {}: i64[{}]", p.name, g.dim(l));
            }
            None => {
                let _ = write!(sig, ", {}: i64", p.name);
            }
        }
    }
    for p in &d.h.mparams {
        let ty = match *p {
            "kind" => format!("i64[{}]", g.dim(D::N)),
            "mode" => "i64".into(),
            "robust" => "bool".into(),
            _ => format!("bool[{}]", g.dim(D::N)),
        };
        let _ = write!(sig, ", {p}: {ty}");
    }
    if d.h.seed_param {
        sig.push_str(", seed: i64");
    }
    if d.h.key_param {
        sig.push_str(", key: i64[2]");
    }
    if d.c.until_on {
        sig.push_str(", u: i64");
    }
    if d.c.rt.is_some() {
        sig.push_str(", n: i64");
    }
    d.sizes = sizes;
    d.sig = sig;
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
