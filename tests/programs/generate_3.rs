//! Random programs: whole programs and helper functions (part 3 of 3). See `mod.rs`.

#[allow(unused_imports)]
use super::*;

/// A let of the loss that is a nested `tabulate` (if `nest`) or else a
/// `tabulate` indexing a stack (if `stack`), clearing the flag of the one
/// written: whether one was.
pub(crate) fn nest_lets(
    g: &mut Gen,
    body: &mut String,
    lets: &mut Vec<String>,
    nest: &mut bool,
    stack: &mut bool,
) -> bool {
    let avail = g.avail();
    let depth = g.rng.range(1, max_depth()) as u32;
    let made = (0..8).find_map(|_| {
        let ty = g.rng.pick(&avail);
        let e = if *nest {
            g.nested_tab(ty, depth)
        } else {
            g.stack_tab(ty, depth)
        };
        e.map(|e| (e, ty))
    });
    let Some((e, ty)) = made else {
        // (None fits: the flag is cleared all the same.)
        if *nest {
            *nest = false;
        } else {
            *stack = false;
        }
        return false;
    };
    if *nest {
        *nest = false;
    } else {
        *stack = false;
    }
    let e = g.bounded(e);
    let name = g.fresh("a");
    g.bind_let(body, lets, name, &e, ty);
    true
}

/// Whether `text` runs a loop of count `n`: its own `iterate(n, ...)`, or
/// a call passing `n` to one of `rt_helpers`.
pub(crate) fn counts_with_n(text: &str, rt_helpers: &[String]) -> bool {
    text.contains("iterate(n, ")
        || rt_helpers
            .iter()
            .any(|h| text.contains(&format!("{h}(n, ")))
}

/// A helper with an `i64` result, `fn h[N](v: f64[N], k: i64) -> i64`,
/// whose callers pass an index of `v` for `k`: its text, and its name and
/// a bound of its result.
pub(crate) fn gen_int_helper(rng: &mut Rng, k: usize) -> (String, (String, f64)) {
    let name = format!("h{k}");
    let mut g = Gen::new(rng, 1, "K");
    g.fresh = 100 * k;
    g.push_var("v", &Ex::leaf("v", LIMIT, true), Ty::V(D::N));
    g.ints = vec![INT_PARAMS[0]];
    let depth = g.rng.range(1, 3) as u32;
    let e = g.iexpr(depth);
    let text = format!(
        "fn {name}[N](v: f64[N], k: i64) -> i64 = {}",
        g.int_value(&e)
    );
    (text, (name, e.b))
}

/// What helpers may also write (in the programs drawn with it): `match`
/// (`EGRAD_RANDOM_MATCH`), noise drawn from keys (`EGRAD_RANDOM_KEYS`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Newer {
    pub(crate) matches: bool,
    pub(crate) noise: bool,
    /// User primitives may be called at random (`EGRAD_RANDOM_CUSTOM`,
    /// `EGRAD_RANDOM_KERNELS`).
    pub(crate) prims: bool,
}

/// One helper function: its text and how to call it.
pub(crate) fn gen_helper(
    rng: &mut Rng,
    k: usize,
    earlier: &[Helper],
    with_loop: bool,
    rt_param: Option<u64>,
    cat: bool,
    newer: Newer,
) -> Option<(String, Helper)> {
    let name = format!("h{k}");
    let kind = rng.below(12);
    let mut g = Gen::new(rng, 1, "K");
    g.helpers = earlier.to_vec();
    g.fresh = 100 * k;
    g.cat = cat;
    g.matches = newer.matches;
    g.noise = newer.noise;
    g.prims = newer.prims;
    // (A derivative helper of one calling a user primitive.)
    let mut src_prim = false;
    let depth = g.rng.range(1, max_depth()) as u32;
    // A helper with a loop sometimes takes a run-time count `n: i64` first.
    // (a helper of the first four kinds).
    let kind = if rt_param.is_some() { kind % 4 } else { kind };
    g.rt_count = rt_param;
    let (text, params, rets, b, ts) = match kind {
        0..=5 => helper_plain(&mut g, &name, kind, depth, with_loop),
        6..=8 => helper_static_or_pair(&mut g, &name, kind, depth),
        _ => {
            let (body, prim) = helper_derivative(&mut g, &name, earlier)?;
            src_prim = prim;
            body
        }
    };
    let (text, params) = match rt_param {
        Some(c) => {
            let mut ps = vec![HParam::RunCount(c)];
            ps.extend(params);
            let open = text.find('(').unwrap();
            let text = format!("{}(n: i64, {}", &text[..open], &text[open + 1..]);
            tag("helper with a run-time count", "(n: i64, ");
            (text, ps)
        }
        None => (text, params),
    };
    let needs_var = text.contains("max/") || text.contains("min/");
    let uses_n1 = kind == 4;
    let has_loop = g.made_loop;
    let (prim, kernel) = (g.made_prim || src_prim, g.made_kernel);
    // Generic over the element type: `f64` becomes `T` (the f32 copy of the
    // program then specializes it to f32); not with noise (`f64`s), nor
    // calling a user primitive (which has no element-type parameter).
    let generic = kind <= 5
        && rng.chance(0.3)
        && !text.contains("= normal[")
        && !text.contains("= uniform[")
        && !prim;
    let text = if generic {
        generic_helper_text(&text, &name)
    } else {
        text
    };
    Some((
        text,
        Helper {
            name,
            params,
            rets,
            b,
            ts,
            needs_var: needs_var || earlier.iter().any(|h| h.needs_var),
            uses_n1,
            generic,
            has_loop,
            prim,
            kernel,
            tags: Vec::new(),
        },
    ))
}

/// A helper's text, its parameters, its result types, the bound of its
/// result and whether it may be called in a `tabulate` body (`ts`).
type HelperBody = (String, Vec<HParam>, Vec<Ty>, f64, bool);

/// Declares the helper parameter `nm` of type `t` in `g`: a value bounded
/// by `LIMIT`.
fn helper_param(g: &mut Gen, nm: &str, t: Ty) {
    g.push_var(nm, &Ex::leaf(nm, LIMIT, t.is_array()), t);
}

/// The helper `name` of kind 0 to 5 (`gen_helper`): a body of a single
/// generated expression (with a loop if `with_loop`, for kinds 0 to 3).
fn helper_plain(g: &mut Gen, name: &str, kind: usize, depth: u32, with_loop: bool) -> HelperBody {
    match kind {
        // (v: f64[N], a: f64) -> f64 | f64[N]
        0..=2 => {
            helper_param(g, "v", Ty::V(D::N));
            helper_param(g, "a", Ty::S);
            let rt = if kind == 0 { Ty::S } else { Ty::V(D::N) };
            let e = if with_loop {
                g.with_loop(rt, depth)
            } else {
                g.gen(rt, depth)
            };
            (
                format!(
                    "fn {name}[N](v: f64[N], a: f64) -> {} = {}",
                    g.ty_text(rt),
                    e.s
                ),
                vec![HParam::Dyn(Ty::V(D::N)), HParam::Dyn(Ty::S)],
                vec![rt],
                e.b,
                e.ts,
            )
        }
        // (a: f64, c: f64) -> f64
        3 => {
            helper_param(g, "a", Ty::S);
            helper_param(g, "c", Ty::S);
            let e = if with_loop {
                g.with_loop(Ty::S, depth)
            } else {
                g.gen(Ty::S, depth)
            };
            (
                format!("fn {name}(a: f64, c: f64) -> f64 = {}", e.s),
                vec![HParam::Dyn(Ty::S), HParam::Dyn(Ty::S)],
                vec![Ty::S],
                e.b,
                e.ts,
            )
        }
        // (v: f64[N]) -> f64[N-1]
        4 => {
            g.allow_n1 = true;
            helper_param(g, "v", Ty::V(D::N));
            let e = g.gen(Ty::V(D::N1), depth);
            (
                format!("fn {name}[N](v: f64[N]) -> f64[N-1] = {}", e.s),
                vec![HParam::Dyn(Ty::V(D::N))],
                vec![Ty::V(D::N1)],
                e.b,
                false,
            )
        }
        // (P: f64[N, K], v: f64[K]) -> f64[N]
        _ => {
            helper_param(g, "P", Ty::Mt(D::N, D::M));
            helper_param(g, "v", Ty::V(D::M));
            let e = g.gen(Ty::V(D::N), depth);
            (
                format!(
                    "fn {name}[N, K](P: f64[N, K], v: f64[K]) -> f64[N] = {}",
                    e.s
                ),
                vec![HParam::Dyn(Ty::Mt(D::N, D::M)), HParam::Dyn(Ty::V(D::M))],
                vec![Ty::V(D::N)],
                e.b,
                false,
            )
        }
    }
}

/// The helper `name` of kind 6 to 8 (`gen_helper`): a static count run by
/// `iterate(n, ...)`, static parameters choosing a branch, or a tuple
/// result.
fn helper_static_or_pair(g: &mut Gen, name: &str, kind: usize, depth: u32) -> HelperBody {
    match kind {
        // (static n: i64, v: f64[N], a: f64) -> f64[N] with iterate(n, ...)
        6 => {
            helper_param(g, "v", Ty::V(D::N));
            helper_param(g, "a", Ty::S);
            g.static_count = Some("n".into());
            let e = loop {
                if let Some(e) = g.iterate(Ty::V(D::N), depth) {
                    break e;
                }
            };
            (
                format!(
                    "fn {name}[N](static n: i64, v: f64[N], a: f64) -> f64[N] {{\n  let r = {}\n  r\n}}",
                    e.s
                ),
                vec![HParam::StaticInt, HParam::Dyn(Ty::V(D::N)), HParam::Dyn(Ty::S)],
                vec![Ty::V(D::N)],
                e.b,
                e.ts,
            )
        }
        // (static c: f64, static flag: bool, a: f64, v: f64[N]) -> f64
        7 => {
            let ce = Ex {
                s: "c".into(),
                b: 3.0,
                var: false,
                tab: false,
                ts: true,
                k: true,
            };
            g.push_var("c", &ce, Ty::S);
            helper_param(g, "a", Ty::S);
            helper_param(g, "v", Ty::V(D::N));
            let e1 = g.gen(Ty::S, depth);
            let e2 = g.gen(Ty::S, depth);
            (
                format!(
                    "fn {name}[N](static c: f64, static flag: bool, a: f64, v: f64[N]) -> f64 {{\n  if flag {{ {} }} else {{ {} }}\n}}",
                    e1.s, e2.s
                ),
                vec![
                    HParam::StaticReal,
                    HParam::StaticBool,
                    HParam::Dyn(Ty::S),
                    HParam::Dyn(Ty::V(D::N)),
                ],
                vec![Ty::S],
                e1.b.max(e2.b),
                e1.ts && e2.ts,
            )
        }
        // (v: f64[N], a: f64) -> (f64, f64[N])
        _ => {
            helper_param(g, "v", Ty::V(D::N));
            helper_param(g, "a", Ty::S);
            let e1 = g.gen(Ty::S, depth);
            let e2 = g.gen(Ty::V(D::N), depth);
            (
                format!(
                    "fn {name}[N](v: f64[N], a: f64) -> (f64, f64[N]) = ({}, {})",
                    e1.s, e2.s
                ),
                vec![HParam::Dyn(Ty::V(D::N)), HParam::Dyn(Ty::S)],
                vec![Ty::S, Ty::V(D::N)],
                e1.b.max(e2.b),
                false,
            )
        }
    }
}

/// The helper `name` as a derivative of an earlier scalar helper:
/// `@grad`, `@value_and_grad` or `@jvp`; and whether that helper calls a
/// user primitive. None if no earlier helper fits.
fn helper_derivative(g: &mut Gen, name: &str, earlier: &[Helper]) -> Option<(HelperBody, bool)> {
    let srcs: Vec<&Helper> = earlier
        .iter()
        .filter(|h| {
            !h.has_loop
                && !h.kernel
                && h.rets == vec![Ty::S]
                && h.params.len() == 2
                && matches!(h.params[1], HParam::Dyn(Ty::S))
                && matches!(h.params[0], HParam::Dyn(Ty::S | Ty::V(D::N)))
        })
        .collect();
    if srcs.is_empty() {
        return None;
    }
    let src = srcs[g.rng.below(srcs.len())];
    let src_prim = src.prim;
    let (sizes, p0) = match src.params[0] {
        HParam::Dyn(Ty::V(D::N)) => ("[N]", ("v", Ty::V(D::N), "f64[N]")),
        _ => ("", ("a", Ty::S, "f64")),
    };
    let p1 = if p0.0 == "a" { "c" } else { "a" };
    let head = format!("{name}{sizes}({}: {}, {p1}: f64", p0.0, p0.2);
    let call = format!("{}({}, {p1})", src.name, p0.0);
    let mut params = vec![HParam::Dyn(p0.1), HParam::Dyn(Ty::S)];
    let (text, rets) = match g.rng.below(5) {
        0 => (
            format!("@grad({p1})\nfn {head}) -> f64 = {call}"),
            vec![Ty::S],
        ),
        1 => (
            format!("@grad({})\nfn {head}) -> {} = {call}", p0.0, p0.2),
            vec![p0.1],
        ),
        2 => (
            format!(
                "@grad({}, {p1})\nfn {head}) -> ({}, f64) = {call}",
                p0.0, p0.2
            ),
            vec![p0.1, Ty::S],
        ),
        3 => (
            format!("@value_and_grad({p1})\nfn {head}) -> (f64, f64) = {call}"),
            vec![Ty::S, Ty::S],
        ),
        _ => {
            // Forward mode: the tangent is one more parameter.
            let (t, tt) = if g.rng.chance(0.5) {
                (p1, ("f64", Ty::S))
            } else {
                (p0.0, (p0.2, p0.1))
            };
            params.push(HParam::Dyn(tt.1));
            (
                format!("@jvp({t})\nfn {head}, d{t}: {}) -> f64 = {call}", tt.0),
                vec![Ty::S],
            )
        }
    };
    if src_prim {
        tag(CUSTOM_TAGS[9], &text);
    }
    Some(((text, params, rets, f64::INFINITY, false), src_prim))
}

/// The text of the helper `name` made generic over the element type:
/// `f64` becomes `T`, a parameter of the helper.
fn generic_helper_text(text: &str, name: &str) -> String {
    let t = text.replace("f64", "T");
    match t.strip_prefix(&format!("fn {name}[")) {
        Some(rest) => format!("fn {name}[T, {rest}"),
        None => t.replacen(&format!("fn {name}("), &format!("fn {name}[T]("), 1),
    }
}

/// A helper that calls itself through a static value:
/// `fn hK[N](static k: i64, v: f64[N], a: f64) -> T =
/// if k == 0 { base } else { let r = hK(k - 1, v', a'); step }`, where
/// `step` reads `r` (and `k` is sometimes a number in `base` and `step`).
/// The loss calls it with a literal depth from 1 to 4.
pub(crate) fn gen_rec_helper(
    rng: &mut Rng,
    k: usize,
    earlier: &[Helper],
    cat: bool,
) -> (String, Helper) {
    let name = format!("h{k}");
    let mut g = Gen::new(rng, 1, "K");
    // (Not the helpers that run a loop: each level of the recursion would
    // run it again.)
    g.helpers = earlier.iter().filter(|h| !h.has_loop).cloned().collect();
    g.fresh = 100 * k;
    g.cat = cat;
    let depth = g.rng.range(1, max_depth()) as u32;
    let ret = if g.rng.chance(0.5) {
        Ty::S
    } else {
        Ty::V(D::N)
    };
    if g.rng.chance(0.5) {
        // The depth as a number (a static `i64` meeting `f64`s).
        let ke = Ex {
            s: "k".into(),
            b: 4.0,
            var: false,
            tab: false,
            ts: true,
            k: true,
        };
        g.push_var("k", &ke, Ty::S);
    }
    for (nm, t) in [("v", Ty::V(D::N)), ("a", Ty::S)] {
        g.push_var(nm, &Ex::leaf(nm, LIMIT, t.is_array()), t);
    }
    let base = g.gen(ret, depth);
    let base = g.bounded(base);
    // The arguments of the recursive call: the parameters, or values of them.
    let mut parts = vec![base.clone()];
    let mut call_args = Vec::new();
    for (nm, t) in [("v", Ty::V(D::N)), ("a", Ty::S)] {
        if g.rng.chance(0.6) {
            call_args.push(nm.to_string());
        } else {
            let e = g.gen(t, 1);
            let e = g.bounded(e);
            call_args.push(e.s.clone());
            parts.push(e);
        }
    }
    let r = g.fresh("r");
    let mark = g.env.len();
    g.push_var(&r, &Ex::leaf(r.clone(), LIMIT, false), ret);
    let mut step = g.gen(ret, depth);
    if !g.env[mark].used {
        step = Ex::of(
            format!("({} + {r} * 0.5)", step.s),
            step.b + LIMIT * 0.5,
            false,
            &[&step],
        );
    }
    g.env.truncate(mark);
    let step = g.bounded(step);
    parts.push(step.clone());
    let stop = g.rng.pick(&["k == 0", "k <= 0", "k < 1", "0 == k"]);
    if [&base.s, &step.s]
        .iter()
        .any(|s| s.contains("max/") || s.contains("min/"))
    {
        // `max/` of a generated vector could tie: pass `v` itself.
        call_args[0] = "v".into();
    }
    let text = format!(
        "fn {name}[N](static k: i64, v: f64[N], a: f64) -> {} {{\n  if {stop} {{ {} }} else {{\n    let {r} = {name}(k - 1, {})\n    {}\n  }}\n}}",
        g.ty_text(ret),
        base.s,
        call_args.join(", "),
        step.s
    );
    let needs_var = text.contains("max/") || text.contains("min/");
    (
        text,
        Helper {
            name,
            params: vec![HParam::Depth, HParam::Dyn(Ty::V(D::N)), HParam::Dyn(Ty::S)],
            rets: vec![ret],
            b: LIMIT,
            ts: parts.iter().all(|p| p.ts),
            needs_var: needs_var || earlier.iter().any(|h| h.needs_var),
            uses_n1: false,
            generic: false,
            has_loop: g.made_loop,
            prim: g.made_prim,
            kernel: g.made_kernel,
            tags: Vec::new(),
        },
    )
}

// ---------------------------------------------------------------- checking
