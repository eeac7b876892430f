//! Random programs: the generator's expressions (part 6 of 7). See `mod.rs`.

#[allow(unused_imports)]
use super::*;

/// The program for the f32 check: `f64` made `f32`, and each number drawn
/// from a key (`let (z, k) = normal[..](key)`, `uniform[..]`: `f64`s)
/// converted: `; let z = f32(z)` after it.
pub(crate) fn to_f32(source: &str) -> String {
    let src = source.replace("f64", "f32");
    let mut out = String::with_capacity(src.len());
    let mut rest = src.as_str();
    loop {
        let at = ["= normal[", "= uniform["]
            .iter()
            .filter_map(|p| rest.find(p))
            .min();
        let Some(at) = at else {
            out.push_str(rest);
            return out;
        };
        // `let (z, k) ` before it: the name `z`.
        let head = &rest[..at];
        let open = head.rfind("let (").expect("a draw is a `let (z, k) = ...`");
        let name = head[open + 5..]
            .split(',')
            .next()
            .unwrap_or("")
            .trim()
            .to_string();
        // The end of the call: `normal[..](key)`.
        let call = at + rest[at..].find("](").expect("`normal[..](key)`") + 1;
        let mut depth = 0;
        let mut end = call;
        for (i, ch) in rest[call..].char_indices() {
            match ch {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = call + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        out.push_str(&rest[..end]);
        let _ = write!(out, "; let {name} = f32({name})");
        rest = &rest[end..];
    }
}

/// A helper with a `match` (`EGRAD_RANDOM_MATCH`): on a static integer,
/// `fn hK[N](static c: i64, v: f64[N], a: f64) -> T = match c { 0 => ...,
/// 1 | 2 => ..., _ => ... }` (called with 0 to 3), on a static bool
/// (`static flag: bool`), or at run time on the loss's `kind` (`fn
/// hK[N](kind: i64[N], v: f64[N]) -> f64[N]`, if the loss has it).
pub(crate) fn gen_match_helper(
    rng: &mut Rng,
    k: usize,
    earlier: &[Helper],
    kind: bool,
) -> (String, Helper) {
    let name = format!("h{k}");
    let form = if kind && rng.chance(0.4) {
        2
    } else {
        rng.below(2)
    };
    let mut g = Gen::new(rng, 1, "K");
    g.helpers = earlier.iter().filter(|h| !h.has_loop).cloned().collect();
    g.fresh = 100 * k;
    g.matches = true;
    let depth = g.rng.range(1, max_depth()) as u32;
    let arr = |g: &mut Gen, nm: &str, t: Ty| g.push_var(nm, &Ex::leaf(nm, LIMIT, t.is_array()), t);
    let ret = if form == 2 || g.rng.chance(0.5) {
        Ty::V(D::N)
    } else {
        Ty::S
    };
    let (head, m, parts, params): (String, String, Vec<Ex>, Vec<HParam>) = match form {
        0 => {
            arr(&mut g, "v", Ty::V(D::N));
            arr(&mut g, "a", Ty::S);
            // `c` from 0 to 3, or values of it.
            let (scrutinee, values): (&str, Vec<i64>) = match g.rng.below(3) {
                0 => ("c + 1", (1..=4).collect()),
                1 => ("3 - c", (0..=3).collect()),
                _ => ("c", (-1..=3).collect()),
            };
            // (No arm NaN: every arm is taken by some call.)
            let (arms, parts, _) = g.int_arms(ret, depth, &values, false, Arms::Typed);
            let m = g.match_text(scrutinee, &arms);
            tag(MATCH_TAGS[5], &m);
            tag(MATCH_TAGS[1], &m);
            (
                format!("(static c: i64, v: f64[N], a: f64) -> {}", g.ty_text(ret)),
                m,
                parts,
                vec![
                    HParam::StaticInt,
                    HParam::Dyn(Ty::V(D::N)),
                    HParam::Dyn(Ty::S),
                ],
            )
        }
        1 => {
            arr(&mut g, "v", Ty::V(D::N));
            arr(&mut g, "a", Ty::S);
            let b = if g.rng.chance(0.3) { "!flag" } else { "flag" };
            let e = g.match_bool(b, ret, depth, false, Arms::Typed);
            tag(MATCH_TAGS[5], &e.s);
            tag(MATCH_TAGS[1], &e.s);
            (
                format!(
                    "(static flag: bool, v: f64[N], a: f64) -> {}",
                    g.ty_text(ret)
                ),
                e.s.clone(),
                vec![e],
                vec![
                    HParam::StaticBool,
                    HParam::Dyn(Ty::V(D::N)),
                    HParam::Dyn(Ty::S),
                ],
            )
        }
        _ => {
            arr(&mut g, "v", Ty::V(D::N));
            let (arms, parts, _) = g.int_arms(ret, depth, &KIND_VALUES, true, Arms::Numbers);
            let m = g.match_text("kind", &arms);
            tag(MATCH_TAGS[6], &m);
            tag(MATCH_TAGS[0], &m);
            (
                "(kind: i64[N], v: f64[N]) -> f64[N]".to_string(),
                m,
                parts,
                vec![HParam::Kind, HParam::Dyn(Ty::V(D::N))],
            )
        }
    };
    let text = format!("fn {name}[N]{head} = {m}");
    let b = parts.iter().map(|p| p.b).fold(0.0, f64::max);
    let ts = form != 2 && parts.iter().all(|p| p.ts);
    let needs_var = text.contains("max/") || text.contains("min/");
    // Generic over the element type, as `gen_helper` makes some.
    // (Not one calling a user primitive, which has no element-type
    // parameter.)
    let generic = form != 2 && g.rng.chance(0.3) && !g.made_prim;
    let text = if generic {
        text.replace("f64", "T")
            .replacen(&format!("fn {name}["), &format!("fn {name}[T, "), 1)
    } else {
        text
    };
    (
        text,
        Helper {
            name,
            params,
            rets: vec![ret],
            b,
            ts,
            needs_var: needs_var || earlier.iter().any(|h| h.needs_var),
            uses_n1: false,
            generic,
            has_loop: g.made_loop,
            prim: g.made_prim,
            kernel: g.made_kernel,
            tags: Vec::new(),
        },
    )
}

/// A helper that draws noise from a key it is passed (`EGRAD_RANDOM_KEYS`):
/// `fn hK[N](v: f64[N], a: f64, key: i64[2]) -> f64[N] | f64 { let (z, k)
/// = normal[N](key) ... }`, sometimes from a `split` of it, its noise
/// added or a dropout mask.
pub(crate) fn gen_key_helper(rng: &mut Rng, k: usize, earlier: &[Helper]) -> (String, Helper) {
    let name = format!("h{k}");
    let mut g = Gen::new(rng, 1, "K");
    g.helpers = earlier.iter().filter(|h| !h.has_loop).cloned().collect();
    g.fresh = 100 * k;
    // (`kk`, not `key`: the tags tell the loss's `key` by its name.)
    g.keys = vec!["kk".into()];
    for (nm, t) in [("v", Ty::V(D::N)), ("a", Ty::S)] {
        g.push_var(nm, &Ex::leaf(nm, LIMIT, t.is_array()), t);
    }
    let mut lines = String::new();
    let mut key = "kk".to_string();
    if g.rng.chance(0.4) {
        let (a, b) = (g.fresh("k"), g.fresh("k"));
        let line = format!("let ({a}, {b}) = split(kk)");
        let _ = writeln!(lines, "  {line}");
        tag(KEY_TAGS[3], &line);
        g.keys.push(b);
        key = a;
    }
    let normal = g.rng.chance(0.6);
    let (dist, zb) = if normal {
        ("normal", NORMAL_MAX)
    } else {
        ("uniform", 1.0)
    };
    let (z, k3) = (g.fresh("z"), g.fresh("k"));
    let line = format!("let ({z}, {k3}) = {dist}[N]({key})");
    let _ = writeln!(lines, "  {line}");
    tag(KEY_TAGS[0], &line);
    tag(if normal { KEY_TAGS[1] } else { KEY_TAGS[2] }, &line);
    g.keys.push(k3);
    let ze = Ex {
        s: z.clone(),
        b: zb,
        var: true,
        tab: false,
        ts: true,
        k: false,
    };
    g.push_var(&z, &ze, Ty::V(D::N));
    let depth = g.rng.range(1, max_depth()) as u32;
    let x = g.gen(Ty::V(D::N), depth);
    let x = g.bounded(x);
    let (noisy, b) = if !normal && g.rng.chance(0.6) {
        let t = format!("(if {z} < 0.25 {{ 0 }} else {{ {} * 1.25 }})", x.s);
        tag(KEY_TAGS[7], &t);
        (t, x.b * 1.25)
    } else {
        (format!("({} + a * 0.1 * {z})", x.s), x.b + LIMIT * 0.1 * zb)
    };
    let ret = if g.rng.chance(0.5) {
        Ty::V(D::N)
    } else {
        Ty::S
    };
    let fin = if ret == Ty::S {
        let e = Ex::of(format!("(+/{noisy})"), b * N_MAX as f64, false, &[&x]);
        g.bounded(e)
    } else {
        let e = Ex::of(noisy, b, true, &[&x]);
        g.bounded(e)
    };
    let text = format!(
        "fn {name}[N](v: f64[N], a: f64, kk: i64[2]) -> {} {{\n{lines}  {}\n}}",
        g.ty_text(ret),
        fin.s
    );
    let needs_var = text.contains("max/") || text.contains("min/");
    (
        text,
        Helper {
            name,
            params: vec![HParam::Dyn(Ty::V(D::N)), HParam::Dyn(Ty::S), HParam::Key],
            rets: vec![ret],
            b: fin.b,
            ts: false,
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

// ---------------------------------------------------------------- user primitives

/// The user primitives' constructs (tags, counted by program): functions
/// with their own derivative rules (`EGRAD_RANDOM_CUSTOM`) called, and by
/// rule, form and where; native kernels (`EGRAD_RANDOM_KERNELS`) called,
/// and by kernel and where.
pub(crate) const CUSTOM_TAGS: [&str; 13] = [
    "custom: a function with its own derivative rules called",
    "custom: a VJP rule only",
    "custom: a JVP rule only",
    "custom: both rules",
    "custom: element-wise",
    "custom: two parameters (a tuple cotangent)",
    "custom: a reduction to a scalar",
    "custom: on a scalar",
    "custom: on a matrix",
    "custom: differentiated by a derivative helper",
    "custom: called in a loop's step",
    "custom: called by a helper",
    "custom: a body with kinks (stable softplus)",
];

pub(crate) const KERNEL_TAGS: [&str; 6] = [
    "kernels: a native kernel called",
    "kernels: gelu_k (one argument)",
    "kernels: mulsin_k (two arguments)",
    "kernels: on matrices",
    "kernels: called in a loop's step",
    "kernels: called by a helper",
];

/// The element-wise functions the bodies of user primitives apply, by
/// number (see `prim_fun`).
pub(crate) const PRIM_FUNS: usize = 7;

/// The text of `f(u)` and of its derivative `f'(u)` for the operand `u`:
/// `sin`, `tanh`, a square, softplus (also as the stable form, whose
/// body has kinks that cancel), a Gaussian, `u * tanh(u)`.
pub(crate) fn prim_fun(which: usize, u: &str) -> (String, String) {
    let sigmoid = format!("(1 / (1 + exp(-{u})))");
    match which {
        0 => (format!("sin({u})"), format!("cos({u})")),
        1 => (format!("tanh({u})"), format!("(1 - tanh({u}) * tanh({u}))")),
        2 => (format!("({u} * {u})"), format!("(2 * {u})")),
        3 => (format!("log1p(exp({u}))"), sigmoid),
        4 => (format!("(max({u}, 0) + log1p(exp(-abs({u}))))"), sigmoid),
        5 => (
            format!("exp(-{u} * {u})"),
            format!("(-2 * {u} * exp(-{u} * {u}))"),
        ),
        _ => (
            format!("({u} * tanh({u}))"),
            format!("(tanh({u}) + {u} * (1 - tanh({u}) * tanh({u})))"),
        ),
    }
}

/// A bound of `|f(u)|` for `|u| <= b`.
pub(crate) fn prim_bound(which: usize, b: f64) -> f64 {
    match which {
        0 | 1 | 5 => 1.0,
        2 => b * b,
        3 | 4 => b + 1.0,
        _ => b,
    }
}

/// A user primitive `prK` (`EGRAD_RANDOM_CUSTOM`): a function with its own
/// derivative rules (`@custom_vjp(prK_vjp)`, `@custom_jvp(prK_jvp)` or
/// both), whose body applies an element-wise `f` (`prim_fun`) and whose
/// rules are its derivative, written out: element-wise `f(x)` of a scalar,
/// a vector or a matrix; `a * f(x) + sin(a)` of a vector and a scalar
/// (the VJP a tuple); `+/f(x)` of a vector or a matrix; `+/f(a * x)`
/// (which derivative helpers may differentiate: `(v, a) -> f64`). Its
/// text (the primitive and its rules) and how to call it.
pub(crate) fn gen_prim(rng: &mut Rng, k: usize) -> (String, Helper) {
    let name = format!("pr{k}");
    let which = rng.below(PRIM_FUNS);
    let form = rng.below(4);
    let rules = rng.below(3);
    let ty = match form {
        0 => rng.pick(&[Ty::S, Ty::V(D::N), Ty::V(D::N), Ty::Mt(D::N, D::M)]),
        2 => rng.pick(&[Ty::V(D::N), Ty::V(D::N), Ty::Mt(D::N, D::M)]),
        _ => Ty::V(D::N),
    };
    // (A rule sometimes names the derivative in a `let`.)
    let with_let = rng.chance(0.4);
    let (body, vjp, jvp, params, ret, b) = prim_texts(&name, which, form, ty, with_let);
    let (attrs, rule_tag) = prim_attrs(rng, &name, rules);
    let mut text = format!("{attrs}\n{body}");
    if rules != 1 {
        text = format!("{text}\n{vjp}");
    }
    if rules != 0 {
        text = format!("{text}\n{jvp}");
    }
    let tags = gen_prim_tags(which, form, ty, rule_tag);
    (
        wild_rules(text, &name),
        Helper {
            name,
            params,
            rets: vec![ret],
            b,
            ts: false,
            needs_var: false,
            uses_n1: false,
            generic: false,
            has_loop: false,
            prim: true,
            kernel: false,
            tags,
        },
    )
}

/// What `prim_texts` gives: the texts of a user primitive, of its VJP rule
/// and of its JVP rule, its parameters, its result type and a bound of its
/// result.
type PrimTexts = (String, String, String, Vec<HParam>, Ty, f64);

/// A derivative rule's text: `fn {head} = {e}`, or with `with_let` a
/// body that first names the derivative `d` (the text `e` then reads `d`).
fn prim_rule(with_let: bool, head: String, d: &str, e: String) -> String {
    if with_let {
        format!("fn {head} {{\n  let d = {d}\n  {e}\n}}")
    } else {
        format!("fn {head} = {e}")
    }
}

/// The texts of the user primitive `name` (see `gen_prim`) of the form
/// `form` (0 to 3) applying the function `which` (`prim_fun`) to `ty`,
/// and of its rules; how to call it.
fn prim_texts(name: &str, which: usize, form: usize, ty: Ty, with_let: bool) -> PrimTexts {
    let (t, sizes) = match ty {
        Ty::S => ("f64", ""),
        Ty::V(_) => ("f64[N]", "[N]"),
        Ty::Mt(..) => ("f64[N, K]", "[N, K]"),
    };
    let rule = |head: String, d: &str, e: String| prim_rule(with_let, head, d, e);
    let (f, df) = prim_fun(which, "x");
    match form {
        0 => (
            format!("fn {name}{sizes}(x: {t}) -> {t} = {f}"),
            rule(
                format!("{name}_vjp{sizes}(x: {t}, g: {t}) -> {t}"),
                &df,
                if with_let {
                    "g * d".into()
                } else {
                    format!("g * {df}")
                },
            ),
            rule(
                format!("{name}_jvp{sizes}(x: {t}, dx: {t}) -> {t}"),
                &df,
                if with_let {
                    "d * dx".into()
                } else {
                    format!("{df} * dx")
                },
            ),
            vec![HParam::Dyn(ty)],
            ty,
            prim_bound(which, LIMIT),
        ),
        1 => (
            format!("fn {name}[N](x: f64[N], a: f64) -> f64[N] = a * {f} + sin(a)"),
            rule(
                format!("{name}_vjp[N](x: f64[N], a: f64, g: f64[N]) -> (f64[N], f64)"),
                &df,
                format!(
                    "(g * a * {}, +/(g * {f}) + cos(a) * +/g)",
                    if with_let { "d" } else { &df }
                ),
            ),
            rule(
                format!("{name}_jvp[N](x: f64[N], a: f64, dx: f64[N], da: f64) -> f64[N]"),
                &df,
                format!(
                    "a * {} * dx + ({f} + cos(a)) * da",
                    if with_let { "d" } else { &df }
                ),
            ),
            vec![HParam::Dyn(Ty::V(D::N)), HParam::Dyn(Ty::S)],
            Ty::V(D::N),
            LIMIT * prim_bound(which, LIMIT) + 1.0,
        ),
        2 => (
            format!("fn {name}{sizes}(x: {t}) -> f64 = +/{f}"),
            rule(
                format!("{name}_vjp{sizes}(x: {t}, g: f64) -> {t}"),
                &df,
                if with_let {
                    "g * d".into()
                } else {
                    format!("g * {df}")
                },
            ),
            rule(
                format!("{name}_jvp{sizes}(x: {t}, dx: {t}) -> f64"),
                &df,
                if with_let {
                    "+/(d * dx)".into()
                } else {
                    format!("+/({df} * dx)")
                },
            ),
            vec![HParam::Dyn(ty)],
            Ty::S,
            ty.len_max() * prim_bound(which, LIMIT),
        ),
        _ => {
            let (fa, dfa) = prim_fun(which, "(a * x)");
            let d = if with_let {
                "d".to_string()
            } else {
                dfa.clone()
            };
            (
                format!("fn {name}[N](x: f64[N], a: f64) -> f64 = +/{fa}"),
                rule(
                    format!("{name}_vjp[N](x: f64[N], a: f64, g: f64) -> (f64[N], f64)"),
                    &dfa,
                    format!("(g * a * {d}, g * +/(x * {d}))"),
                ),
                rule(
                    format!("{name}_jvp[N](x: f64[N], a: f64, dx: f64[N], da: f64) -> f64"),
                    &dfa,
                    format!("+/({d} * (a * dx + x * da))"),
                ),
                vec![HParam::Dyn(Ty::V(D::N)), HParam::Dyn(Ty::S)],
                Ty::S,
                N_MAX as f64 * prim_bound(which, LIMIT * LIMIT),
            )
        }
    }
}

/// The attributes naming the rules of the user primitive `name` (`rules`:
/// 0 a VJP, 1 a JVP, 2 both, in either order), and the tag of its rules.
fn prim_attrs(rng: &mut Rng, name: &str, rules: usize) -> (String, &'static str) {
    match rules {
        0 => (format!("@custom_vjp({name}_vjp)"), CUSTOM_TAGS[1]),
        1 => (format!("@custom_jvp({name}_jvp)"), CUSTOM_TAGS[2]),
        _ => {
            let (a, b) = (
                format!("@custom_vjp({name}_vjp)"),
                format!("@custom_jvp({name}_jvp)"),
            );
            let sep = if rng.chance(0.5) { " " } else { "\n" };
            if rng.chance(0.5) {
                (format!("{a}{sep}{b}"), CUSTOM_TAGS[3])
            } else {
                (format!("{b}{sep}{a}"), CUSTOM_TAGS[3])
            }
        }
    }
}

/// The tags of a user primitive (see `gen_prim`) applying the function
/// `which` in the form `form` to `ty`, with rules tagged `rule_tag`.
fn gen_prim_tags(which: usize, form: usize, ty: Ty, rule_tag: &'static str) -> Vec<&'static str> {
    let mut tags = vec![
        CUSTOM_TAGS[0],
        rule_tag,
        match form {
            0 => CUSTOM_TAGS[4],
            1 | 3 => CUSTOM_TAGS[5],
            _ => CUSTOM_TAGS[6],
        },
    ];
    if form == 3 {
        tags.push(CUSTOM_TAGS[6]);
    }
    match ty {
        Ty::S => tags.push(CUSTOM_TAGS[7]),
        Ty::Mt(..) => tags.push(CUSTOM_TAGS[8]),
        Ty::V(_) => {}
    }
    if which == 4 {
        tags.push(CUSTOM_TAGS[12]);
    }
    tags
}

/// The native kernels the programs drawn with them call (registered once
/// per process, see `register_kernels`): `gelu_k(x)` (tanh's
/// approximation of GELU) and `mulsin_k(x, y) = x * sin(y)`, element by
/// element on `f64` arrays of any rank >= 1, with their VJPs.
pub(crate) const KERNELS: [&str; 2] = ["gelu_k", "mulsin_k"];

pub(crate) const GELU_C: f64 = 0.797_884_560_802_865_4; // sqrt(2 / pi)

pub(crate) fn kernel_gelu(args: &[&[f64]], out: &mut [f64]) {
    for (o, &x) in out.iter_mut().zip(args[0]) {
        let t = (GELU_C * (x + 0.044715 * x * x * x)).tanh();
        *o = 0.5 * x * (1.0 + t);
    }
}

pub(crate) fn kernel_gelu_vjp(args: &[&[f64]], out: &mut [f64]) {
    for ((o, &x), &g) in out.iter_mut().zip(args[0]).zip(args[1]) {
        let t = (GELU_C * (x + 0.044715 * x * x * x)).tanh();
        let du = GELU_C * (1.0 + 3.0 * 0.044715 * x * x);
        *o = g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du);
    }
}

pub(crate) fn kernel_mulsin(args: &[&[f64]], out: &mut [f64]) {
    for ((o, &x), &y) in out.iter_mut().zip(args[0]).zip(args[1]) {
        *o = x * y.sin();
    }
}

pub(crate) fn kernel_mulsin_dx(args: &[&[f64]], out: &mut [f64]) {
    for ((o, &y), &g) in out.iter_mut().zip(args[1]).zip(args[2]) {
        *o = g * y.sin();
    }
}

pub(crate) fn kernel_mulsin_dy(args: &[&[f64]], out: &mut [f64]) {
    for (((o, &x), &y), &g) in out.iter_mut().zip(args[0]).zip(args[1]).zip(args[2]) {
        *o = g * x * y.cos();
    }
}

pub(crate) fn kernel_same_shape(args: &[egrad::Type]) -> Result<egrad::Type, egrad::ShapeError> {
    if args.iter().any(|a| *a != args[0]) {
        return Err(egrad::ShapeError::Other(format!(
            "the arguments have different types: {}",
            args.iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(args[0].clone())
}

/// Register `KERNELS` (once per process: the test's threads share them).
pub(crate) fn register_kernels() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let k = |name: &str, arity, forward, vjp| egrad::Kernel {
            name: name.into(),
            arity,
            shape: kernel_same_shape,
            forward,
            vjp,
            flops: 20.0,
        };
        egrad::register_kernel(k(KERNELS[0], 1, kernel_gelu, vec![kernel_gelu_vjp]))
            .expect("register gelu_k");
        egrad::register_kernel(k(
            KERNELS[1],
            2,
            kernel_mulsin,
            vec![kernel_mulsin_dx, kernel_mulsin_dy],
        ))
        .expect("register mulsin_k");
    });
}

/// The helpers that call the kernels (`EGRAD_RANDOM_KERNELS`): each on
/// vectors and on matrices (one or both kernels).
pub(crate) fn kernel_helpers(rng: &mut Rng) -> Vec<Helper> {
    let mut out = Vec::new();
    let which: Vec<usize> = match rng.below(3) {
        0 => vec![0],
        1 => vec![1],
        _ => vec![0, 1],
    };
    for w in which {
        for ty in [Ty::V(D::N), Ty::Mt(D::N, D::M)] {
            let mut tags = vec![KERNEL_TAGS[0], KERNEL_TAGS[1 + w]];
            if matches!(ty, Ty::Mt(..)) {
                tags.push(KERNEL_TAGS[3]);
            }
            out.push(Helper {
                name: KERNELS[w].into(),
                params: vec![HParam::Dyn(ty); w + 1],
                rets: vec![ty],
                // (|gelu(x)| <= |x|, |x * sin(y)| <= |x|.)
                b: LIMIT,
                ts: false,
                needs_var: false,
                uses_n1: false,
                generic: false,
                has_loop: false,
                prim: true,
                kernel: true,
                tags,
            });
        }
    }
    out
}

impl Gen<'_> {
    /// A call of a user primitive (or of a helper calling one) giving
    /// `ty`, not in the text of a `tabulate` body.
    pub(crate) fn prim_call(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        if self.tab.is_some() || self.no_tabulate {
            return None;
        }
        self.only_prim = true;
        self.call(ty, d)
    }

    /// Record the tags of a call `text` of `h`, and where it is.
    pub(crate) fn prim_tags(&self, h: &Helper, text: &str) {
        for &t in &h.tags {
            tag(t, text);
        }
        for (first, step, helper) in [
            (CUSTOM_TAGS[0], CUSTOM_TAGS[10], CUSTOM_TAGS[11]),
            (KERNEL_TAGS[0], KERNEL_TAGS[4], KERNEL_TAGS[5]),
        ] {
            if h.tags.contains(&first) {
                if self.in_long > 0 {
                    tag(step, text);
                }
                if self.m_name != "M" {
                    tag(helper, text);
                }
            }
        }
    }
}

/// A let of the loss that calls a user primitive (a kernel if `kernel`)
/// directly: whether one was written.
pub(crate) fn prim_let(
    g: &mut Gen,
    body: &mut String,
    lets: &mut Vec<String>,
    kernel: bool,
) -> bool {
    let mut names: Vec<String> = g
        .helpers
        .iter()
        .filter(|h| {
            let first = if kernel {
                KERNEL_TAGS[0]
            } else {
                CUSTOM_TAGS[0]
            };
            h.tags.contains(&first)
        })
        .map(|h| h.name.clone())
        .collect();
    names.dedup();
    g.rng.shuffle(&mut names);
    for name in names {
        let depth = g.rng.range(1, max_depth()) as u32;
        g.only_helper = Some(name);
        if let Some((e, ty)) = g.call_any(false, depth) {
            let name = g.fresh("a");
            g.bind_let(body, lets, name, &e, ty);
            return true;
        }
    }
    false
}

/// The share of programs an environment variable sets (a number from 0 to
/// 1), or `default`.
pub(crate) fn env_share(var: &str, default: f64) -> f64 {
    std::env::var(var)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default)
}

/// The share of programs with functions with their own derivative rules,
/// 0.07 unless `EGRAD_RANDOM_CUSTOM` (a number from 0 to 1) says otherwise.
pub(crate) fn custom_share() -> f64 {
    env_share("EGRAD_RANDOM_CUSTOM", 0.07)
}

/// The share of programs calling native kernels, 0.07 unless
/// `EGRAD_RANDOM_KERNELS` (a number from 0 to 1) says otherwise.
pub(crate) fn kernel_share() -> f64 {
    env_share("EGRAD_RANDOM_KERNELS", 0.07)
}

/// The share of loop programs whose loss has a loop with a tuple state of
/// mixed shapes, 0.1 unless `EGRAD_RANDOM_MIXED` says otherwise.
pub(crate) fn mixed_share() -> f64 {
    env_share("EGRAD_RANDOM_MIXED", 0.1)
}

// ---------------------------------------------------------------- sequences of their own length

/// The most rows of a sequence parameter of the loss (`zs: f64[L]`,
/// `Zs: f64[L, B]`): `L` is drawn from 0 to this.
pub(crate) const L_MAX: usize = 5;

/// The largest run-time bound `u` of an `iterate_until` (drawn from 0 to
/// this).
pub(crate) const U_MAX: usize = 7;

/// A sequence parameter of the loss with a length `L` of its own, which
/// derivatives take (`EGRAD_RANDOM_SEQ`): `zs: f64[L]` (scalar rows) or
/// `Zs: f64[L, B]` (rows of type `f64[B]`, `B` the loss's `M` or `N`).
/// It is not a name in scope: only `seq_scan` reads it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SeqParam {
    pub(crate) name: &'static str,
    pub(crate) row: Ty,
}

impl SeqParam {
    pub(crate) fn text(&self, g: &Gen) -> String {
        match self.row {
            Ty::V(b) => format!("f64[L, {}]", g.dim(b)),
            _ => "f64[L]".into(),
        }
    }
}

/// A let of the loss made of a sequence construct.
#[derive(Clone, Debug)]
pub(crate) enum SeqLet {
    /// `scan` over a sequence parameter.
    Scan(SeqParam),
    /// `scan_all` over a sequence parameter, reduced to a scalar.
    ScanAll(SeqParam),
    /// `iterate_until` with the run-time bound `u`.
    Until,
}

/// Tags of the sequence constructs (see `SeqLet`) counted by program; in a
/// release run at least 3% of the programs must have each of them.
pub(crate) const SEQ_TAGS: [&str; 3] = [
    "sequence: scan over f64[L] or f64[L, B]",
    "sequence: scan_all over f64[L] or f64[L, B]",
    "iterate_until with a run-time bound u",
];

impl Gen<'_> {
    /// A `scan` of type `ty` (not a matrix) or, with `all`, a scalar made
    /// of a `scan_all` (every state after a step: a sum of the states, of
    /// their squares or of their `tanh`, per component of a tuple state),
    /// over the sequence parameter `p`: `p` itself or mapped (`tanh(zs *
    /// 2)`, `sin(zs)`, `reverse(zs)`, or `zs * tanh(v)` with `v` a scalar
    /// from outside, so that derivatives with respect to `v` also go
    /// through the sequence). The step is `scan_of`'s: a loop's step, which
    /// reads only what a loop carries along its state, and always its row;
    /// each component relaxes or drifts by at most h a step.
    pub(crate) fn seq_scan(&mut self, p: &SeqParam, ty: Ty, all: bool, d: u32) -> Option<Ex> {
        if matches!(ty, Ty::Mt(..)) || self.tab.is_some() {
            return None;
        }
        let name = p.name;
        let seq = match self.rng.below(10) {
            0 => format!("tanh({name} * 2)"),
            1 => format!("sin({name})"),
            2 => format!("reverse({name})"),
            3 => {
                let scalars: Vec<usize> = self
                    .visible()
                    .into_iter()
                    .filter(|&i| self.env[i].ty == Ty::S && !self.env[i].k)
                    .collect();
                if scalars.is_empty() {
                    name.to_string()
                } else {
                    let i = self.rng.pick(&scalars);
                    let v = self.use_var(i);
                    format!("({name} * tanh({}))", v.s)
                }
            }
            _ => name.to_string(),
        };
        let vectors: Vec<Ty> = self
            .avail()
            .into_iter()
            .filter(|t| matches!(t, Ty::V(_)))
            .collect();
        // A vector state is often of the rows' type (a recurrence over
        // the rows).
        let vector = |g: &mut Self| {
            if vectors.contains(&p.row) && g.rng.chance(0.5) {
                p.row
            } else {
                g.rng.pick(&vectors)
            }
        };
        let comps: Vec<Ty> = match (ty, all) {
            (Ty::S, _) => match self.rng.below(5) {
                0 | 1 if !vectors.is_empty() => vec![vector(self)],
                2 if !vectors.is_empty() => vec![vector(self), Ty::S],
                3 => vec![Ty::S, Ty::S],
                _ => vec![Ty::S],
            },
            (Ty::V(_), false) => match self.rng.below(4) {
                0 => vec![ty, Ty::S],
                1 => vec![ty, ty],
                _ => vec![ty],
            },
            _ => return None,
        };
        let (text, bounds, vars, read) =
            self.scan_of(&seq, p.row, true, &comps, L_MAX as f64, true, d);
        let text = if all {
            format!("scan_all{}", text.strip_prefix("scan")?)
        } else {
            text
        };
        let e = if all {
            if comps.len() == 1 && self.rng.chance(0.3) {
                let b = L_MAX as f64 * comps[0].len_max() * bounds[0];
                Ex::leaf(format!("(+/{text})"), b, false)
            } else {
                let names: Vec<String> = comps.iter().map(|_| self.fresh("p")).collect();
                let mut terms = Vec::new();
                let mut b = 0.0;
                for (k, nm) in names.iter().enumerate() {
                    let n = L_MAX as f64 * comps[k].len_max();
                    let (t, tb) = match self.rng.below(4) {
                        0 | 1 => (format!("+/({nm} .* {nm})"), n * bounds[k] * bounds[k]),
                        2 => (format!("+/tanh({nm})"), n),
                        _ => (format!("+/{nm}"), n * bounds[k]),
                    };
                    terms.push(t);
                    b += tb;
                }
                let pat = if names.len() == 1 {
                    names[0].clone()
                } else {
                    format!("({})", names.join(", "))
                };
                Ex::leaf(
                    format!("({{ let {pat} = {text}; {} }})", terms.join(" + ")),
                    b,
                    false,
                )
            }
            .not_ts()
        } else {
            self.untuple(text.clone(), &comps, &bounds, &vars, ty)
        };
        tag(if all { SEQ_TAGS[1] } else { SEQ_TAGS[0] }, &text);
        tag(
            if p.row == Ty::S {
                "sequence: rows are scalars (f64[L])"
            } else {
                "sequence: rows are vectors (f64[L, B])"
            },
            &text,
        );
        tag(
            match (comps.len(), comps[0]) {
                (1, Ty::S) => "sequence: scalar state",
                (1, _) => "sequence: vector state",
                _ => "sequence: tuple state",
            },
            &text,
        );
        if read {
            tag("sequence: the step reads values from outside", &text);
        }
        if seq != name {
            tag("sequence: mapped (tanh, sin, reverse, * a value)", &text);
        }
        if seq.contains("* tanh(") {
            tag("sequence: scaled by a value from outside", &text);
        }
        Some(e)
    }
}
