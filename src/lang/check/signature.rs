//! Signatures: size, element-type and static parameters, parameter and
//! return types, and the attributes `@grad`, `@value_and_grad`, `@jvp`.

use super::sizes::{dim_size, overflow, DimError};
use super::{plural, Bound, Sig, StaticKind};
use crate::error::span::{Diagnostic, Span};
use crate::lang::ast::*;
use crate::types::size::{Size, Unifier};
use crate::types::{DType, Dim, Type};
use std::collections::HashMap;

/// "the parameters of `f` are `a`, `b`": the note of an attribute that
/// names something else.
pub(super) fn params_note(f: &FnDef) -> String {
    let names: Vec<String> = f
        .params
        .iter()
        .map(|p| format!("`{}`", p.name.name))
        .collect();
    if names.is_empty() {
        format!("`{}` has no parameters", f.name.name)
    } else {
        format!(
            "the parameters of `{}` are {}",
            f.name.name,
            names.join(", ")
        )
    }
}

/// The attributes that give a function its own derivative rules.
pub(super) const CUSTOM_ATTRS: [&str; 2] = ["custom_vjp", "custom_jvp"];

/// Resolve a written non-tuple type against the declared size parameters.
/// The element-type parameters of a function: bracket names used as an
/// element type (`T` in `fn f[T, N](x: T[N])`).
fn generic_names(f: &FnDef) -> Vec<String> {
    fn dtype_names(t: &TypeExpr, out: &mut Vec<String>) {
        match t {
            TypeExpr::Named { dtype, .. } => out.push(dtype.name.clone()),
            TypeExpr::Tuple { elems, .. } => elems.iter().for_each(|e| dtype_names(e, out)),
        }
    }
    let mut used = Vec::new();
    for p in &f.params {
        dtype_names(&p.ty, &mut used);
    }
    dtype_names(&f.ret, &mut used);
    f.size_params
        .iter()
        .filter(|s| used.contains(&s.name))
        .map(|s| s.name.clone())
        .collect()
}

/// Resolve a type; `dtypes` gives the element type of each element-type
/// parameter (a placeholder `f64` stands for one not fixed yet).
fn resolve_type_with(
    t: &TypeExpr,
    sizes: &[Ident],
    dtypes: &HashMap<String, DType>,
    errs: &mut Vec<Diagnostic>,
) -> Option<Type> {
    match t {
        TypeExpr::Tuple { span, .. } => {
            errs.push(Diagnostic::new(
                *span,
                "a tuple type is only allowed as a function's return type",
            ));
            None
        }
        TypeExpr::Named { dtype, dims, .. } => {
            let mut ok = true;
            let d = match DType::from_name(&dtype.name).or_else(|| dtypes.get(&dtype.name).copied())
            {
                Some(d) => Some(d),
                None => {
                    let d = Diagnostic::new(dtype.span, format!("unknown type `{}`", dtype.name))
                        .with_note("the element types are `f32`, `f64`, `i64` and `bool`");
                    let params = dtypes.keys().map(String::as_str);
                    errs.push(match super::unknown::type_help(&dtype.name, params) {
                        Some(h) => d.with_help(h),
                        None => d,
                    });
                    None
                }
            };
            let mut shape = Vec::new();
            for dim in dims {
                let size = dim_size(dim, &mut |id| {
                    if sizes.iter().any(|s| s.name == id.name) {
                        return Some(Size::param(&id.name));
                    }
                    let d =
                        Diagnostic::new(id.span, format!("unknown size parameter `{}`", id.name))
                            .with_note(format!(
                            "declare it in brackets after the function name, as in `fn f[{}](...)`",
                            id.name
                        ));
                    let near =
                        super::unknown::size_help(&id.name, sizes.iter().map(|s| s.name.as_str()));
                    errs.push(match near {
                        Some(h) => d.with_help(h),
                        None => d,
                    });
                    None
                });
                match size.map(|s| (Dim::from_size(&s), s)) {
                    Ok((Some(d), _)) => shape.push(d),
                    Ok((None, s)) => {
                        ok = false;
                        errs.push(Diagnostic::new(
                            dim.span(),
                            format!("the size `{}` is negative ({s})", dim.text()),
                        ));
                    }
                    Err(DimError::Name) => ok = false,
                    Err(DimError::Overflow(span)) => {
                        ok = false;
                        errs.push(overflow(span, dim));
                    }
                }
            }
            if ok {
                d.map(|d| Type::array(d, shape))
            } else {
                None
            }
        }
    }
}

/// The type of a `static` parameter: a scalar `i64`, `bool`, `f32` or `f64`.
fn static_kind(t: &TypeExpr, errs: &mut Vec<Diagnostic>) -> Option<StaticKind> {
    if let TypeExpr::Named { dtype, dims, .. } = t {
        if dims.is_empty() {
            match dtype.name.as_str() {
                "i64" => return Some(StaticKind::Int),
                "bool" => return Some(StaticKind::Bool),
                "f32" | "f64" => return Some(StaticKind::Real),
                _ => {}
            }
        }
    }
    errs.push(
        Diagnostic::new(
            t.span(),
            "a static parameter must be a scalar `i64`, `bool`, `f32` or `f64`",
        )
        .with_note("arrays are passed as ordinary (dynamic) parameters"),
    );
    None
}

pub(super) fn signature(f: &FnDef, errs: &mut Vec<Diagnostic>) -> Option<Sig> {
    let generic = generic_names(f);
    // Until it is specialized, an element-type parameter stands for f64.
    let placeholders: HashMap<String, DType> =
        generic.iter().map(|g| (g.clone(), DType::F64)).collect();
    let mut bounds = Vec::new();
    for (name, b) in &f.bounds {
        let Some(&(_, bound)) = Bound::ALL.iter().find(|(n, _)| *n == b.name) else {
            errs.push(
                Diagnostic::new(b.span, format!("unknown bound `{}`", b.name))
                    .with_note("the bounds are `Numeric` (i64, f32 or f64), `Float` (f32 or f64) and `Differentiable` (f32 or f64, the types with derivatives)"),
            );
            continue;
        };
        if !generic.contains(&name.name) {
            errs.push(
                Diagnostic::new(
                    b.span,
                    format!("`{}` is not an element type, so it takes no bound", name.name),
                )
                .with_label(name.span, "a size parameter: no parameter's element type is it")
                .with_note("a bound applies to a name used as an element type, as `T` in `fn f[T: Float, N](x: T[N])`"),
            );
            continue;
        }
        if bounds.iter().any(|(n, _)| *n == name.name) {
            errs.push(Diagnostic::new(
                b.span,
                format!("`{}` has two bounds", name.name),
            ));
            continue;
        }
        bounds.push((name.name.clone(), bound));
    }
    let mut sig = signature_with(f, &placeholders, errs)?;
    sig.generic = generic;
    sig.bounds = bounds;
    Some(sig)
}

/// The signature with the element-type parameters fixed by `dtypes`.
pub(super) fn signature_with(
    f: &FnDef,
    dtypes: &HashMap<String, DType>,
    errs: &mut Vec<Diagnostic>,
) -> Option<Sig> {
    let before = errs.len();
    let all_sizes = &f.size_params;
    // The size parameters proper (without the element-type ones).
    let size_params: Vec<Ident> = all_sizes
        .iter()
        .filter(|s| !dtypes.contains_key(&s.name))
        .cloned()
        .collect();
    // Size parameters.
    let mut seen: HashMap<&str, Span> = HashMap::new();
    for s in &size_params {
        if let Some(first) = seen.insert(&s.name, s.span) {
            errs.push(
                Diagnostic::new(s.span, format!("duplicate size parameter `{}`", s.name))
                    .with_label(first, "first declared here"),
            );
        }
    }
    let (params, statics, unresolved) = resolve_params(f, &size_params, dtypes, errs);
    check_sizes_read(f, dtypes, &size_params, (&params, &unresolved), errs);
    let (ret, ret_tuple) = resolve_ret(f, &size_params, dtypes, errs);
    // Attributes.
    // Its own derivative rules: `@custom_vjp(rule)`, `@custom_jvp(rule)`.
    let (rule_attrs, attrs): (Vec<&Attr>, Vec<&Attr>) = f
        .attrs
        .iter()
        .partition(|a| CUSTOM_ATTRS.contains(&a.name.name.as_str()));
    let custom = custom_rules(f, (&rule_attrs, &attrs), (&ret, ret_tuple), errs);
    let (grad, value_too, jvp) =
        transform_attrs(f, attrs, &params, (&ret, ret_tuple), before, errs);
    if errs.len() > before {
        return None;
    }
    Some(Sig {
        size_params: size_params
            .iter()
            .map(|s| s.name.clone())
            .chain(
                params
                    .iter()
                    .filter(|p| p.1.dtype == DType::I64 && p.1.is_scalar())
                    .filter(|p| !f.params.iter().any(|d| d.is_data && d.name.name == p.0))
                    .map(|p| p.0.clone()),
            )
            .collect(),
        params,
        statics,
        ret,
        ret_tuple,
        grad,
        custom,
        value_too,
        jvp,
        generic: Vec::new(),
        bounds: Vec::new(),
    })
}

/// A parameter as a signature has it: its name, type and span.
type Param = (String, Type, Span);

/// The parameters of `f` resolved (its size parameters proper
/// `size_params`, its element types fixed by `dtypes`): each one's name,
/// type and span, whether it is static (and its kind), and the sizes named
/// in the parameter types that did not resolve (they count as read).
fn resolve_params(
    f: &FnDef,
    size_params: &[Ident],
    dtypes: &HashMap<String, DType>,
    errs: &mut Vec<Diagnostic>,
) -> (Vec<Param>, Vec<Option<StaticKind>>, Vec<String>) {
    let fname = &f.name.name;
    let all_sizes = &f.size_params;
    let mut seen: HashMap<&str, Span> = HashMap::new();
    let mut params = Vec::new();
    let mut statics = Vec::new();
    let mut unresolved: Vec<String> = Vec::new();
    for p in &f.params {
        if let Some(first) = seen.insert(&p.name.name, p.name.span) {
            errs.push(
                Diagnostic::new(
                    p.name.span,
                    format!("duplicate parameter `{}` in `{fname}`", p.name.name),
                )
                .with_label(first, "first declared here"),
            );
        }
        let runtime_int = matches!(&p.ty, TypeExpr::Named { dtype, dims, .. } if dtype.name == "i64" && dims.is_empty());
        if p.is_data && (p.is_static || !runtime_int) {
            errs.push(
                Diagnostic::new(
                    p.span,
                    format!(
                        "`data` marks a run-time `i64` number as a value (a label, an index) rather than a count, but `{}` is {}",
                        p.name.name,
                        if p.is_static { "static" } else { "not an `i64` number" }
                    ),
                )
                .with_note("arrays and floats are values already: drop `data`"),
            );
            continue;
        }
        if p.is_data {
            // A run-time integer that is a value: no size parameter.
            params.push((p.name.name.clone(), Type::scalar(DType::I64), p.span));
            statics.push(None);
        } else if p.is_static {
            if let Some(k) = static_kind(&p.ty, errs) {
                params.push((p.name.name.clone(), Type::scalar(DType::F64), p.span));
                statics.push(Some(k));
            }
        } else if runtime_int {
            // A run-time integer: the size parameter of its name (a loop
            // count), bound from the argument's value.
            if all_sizes.iter().any(|s| s.name == p.name.name) {
                errs.push(Diagnostic::new(
                    p.name.span,
                    format!(
                        "the `i64` parameter `{}` has the name of a size parameter",
                        p.name.name
                    ),
                ));
            }
            params.push((p.name.name.clone(), Type::scalar(DType::I64), p.span));
            statics.push(None);
        } else if let Some(t) = resolve_type_with(&p.ty, size_params, dtypes, errs) {
            params.push((p.name.name.clone(), t, p.span));
            statics.push(None);
        } else if let TypeExpr::Named { dims, .. } = &p.ty {
            // Its sizes count as read (no second error about them).
            unresolved.extend(dims.iter().flat_map(|d| d.names()).map(|i| i.name.clone()));
        }
    }
    (params, statics, unresolved)
}

/// Reports an element-type parameter of `f` (one of `dtypes`) that is no
/// parameter's element type, and a size parameter (of `size_params`) that
/// cannot be read from the types of `params` (the sizes in `unresolved`
/// count as read).
fn check_sizes_read(
    f: &FnDef,
    dtypes: &HashMap<String, DType>,
    size_params: &[Ident],
    (params, unresolved): (&[Param], &[String]),
    errs: &mut Vec<Diagnostic>,
) {
    let fname = &f.name.name;
    let all_sizes = &f.size_params;
    // Every element-type parameter must be the element type of a parameter.
    for s in all_sizes.iter().filter(|s| dtypes.contains_key(&s.name)) {
        let used = f.params.iter().any(|p| {
            matches!(&p.ty, TypeExpr::Named { dtype, .. } if dtype.name == s.name) && !p.is_static
        });
        if !used {
            errs.push(Diagnostic::new(
                s.span,
                format!(
                    "element type `{}` of `{fname}` is not the element type of any parameter, so it cannot be inferred",
                    s.name
                ),
            ));
        }
    }
    // Every size parameter must be read from the parameters' shapes, as
    // `interp::bind_args` and calls do (`size::Unifier`).
    let shapes: Vec<&[Dim]> = params.iter().map(|p| p.1.shape.as_slice()).collect();
    let names: Vec<String> = size_params.iter().map(|s| s.name.clone()).collect();
    for (name, occurs) in Unifier::determinable(&shapes, &names, unresolved) {
        let Some(s) = size_params.iter().find(|s| s.name == name) else {
            continue;
        };
        let d = if occurs {
            Diagnostic::new(
                s.span,
                format!("size parameter `{name}` of `{fname}` cannot be read from the parameter types"),
            )
            .with_note(format!(
                "a size is read from a dimension where it is the only size not known from elsewhere, occurring once and not squared (`{name}`, `{name}+1`, `2*{name}`, or `{name}` times sizes known from other dimensions); give `{name}` a dimension of its own"
            ))
        } else {
            Diagnostic::new(
                s.span,
                format!("size parameter `{name}` of `{fname}` is not used in any parameter type, so it cannot be inferred"),
            )
        };
        errs.push(d);
    }
}

/// The return types of `f` resolved, and whether it returns a tuple.
fn resolve_ret(
    f: &FnDef,
    size_params: &[Ident],
    dtypes: &HashMap<String, DType>,
    errs: &mut Vec<Diagnostic>,
) -> (Vec<Type>, bool) {
    match &f.ret {
        TypeExpr::Tuple { elems, .. } => {
            let mut ret = Vec::new();
            for e in elems {
                if let TypeExpr::Tuple { span, .. } = e {
                    errs.push(Diagnostic::new(
                        *span,
                        "nested tuple types are not supported",
                    ));
                } else if let Some(t) = resolve_type_with(e, size_params, dtypes, errs) {
                    ret.push(t);
                }
            }
            (ret, true)
        }
        t => (
            resolve_type_with(t, size_params, dtypes, errs)
                .into_iter()
                .collect(),
            false,
        ),
    }
}

/// The derivative rules `f` brings (`@custom_vjp(rule)`: `true`,
/// `@custom_jvp(rule)`), from its `rule_attrs`; none (reported) if it is
/// also a derived function (`attrs`), a template, or returns something
/// other than one float value (`ret`, and whether it is a tuple).
fn custom_rules(
    f: &FnDef,
    (rule_attrs, attrs): (&[&Attr], &[&Attr]),
    (ret, ret_tuple): (&[Type], bool),
    errs: &mut Vec<Diagnostic>,
) -> Vec<(bool, Ident)> {
    let fname = &f.name.name;
    let mut custom = Vec::new();
    for (k, a) in rule_attrs.iter().enumerate() {
        let attr = a.name.name.as_str();
        let [rule] = &a.args[..] else {
            errs.push(Diagnostic::new(
                a.span,
                format!("`@{attr}` names one function, the rule, as in `@{attr}({fname}_rule)`"),
            ));
            continue;
        };
        if let Some(first) = rule_attrs[..k].iter().find(|b| b.name.name == attr) {
            errs.push(
                Diagnostic::new(a.span, format!("`{fname}` has two `@{attr}` rules"))
                    .with_label(first.span, "the first one is here"),
            );
            continue;
        }
        custom.push((attr == "custom_vjp", rule.clone()));
    }
    if let (Some(r), Some(t)) = (rule_attrs.first(), attrs.first()) {
        errs.push(
            Diagnostic::new(
                t.span,
                format!("`{fname}` has its own derivative rules, so it cannot also be a derived function"),
            )
            .with_label(r.span, "its rule")
            .with_note(format!("differentiate a function that calls it: `@{}(...) fn d{fname}(...) = {fname}(...)`", t.name.name)),
        );
        custom.clear();
    }
    if let Some(r) = rule_attrs.first().filter(|_| !custom.is_empty()) {
        let template = f.params.iter().any(|p| p.is_static) || !generic_names(f).is_empty();
        let one_float = !ret_tuple
            && ret.len() == 1
            && ret
                .iter()
                .all(|t| matches!(t.dtype, DType::F32 | DType::F64));
        if template {
            errs.push(
                Diagnostic::unsupported(
                    r.span,
                    format!("`{fname}` has static or element-type parameters: a function with its own derivative rules cannot have them yet"),
                )
                .with_note("give the rule to a function of fixed types, and call it from the generic one"),
            );
            custom.clear();
        } else if !one_float && !ret.is_empty() {
            errs.push(
                Diagnostic::unsupported(
                    r.span,
                    format!("`{fname}` returns {}: a function with its own derivative rules returns one f32 or f64 value (a scalar or an array) for now", type_list(ret)),
                ),
            );
            custom.clear();
        }
    }
    custom
}

/// What a function's transform attributes ask for: the parameters
/// `@grad` differentiates, whether `@value_and_grad` returns the value
/// too, and the (parameter, tangent) pairs of `@jvp`.
type TransformAttrs = (Option<Vec<usize>>, bool, Option<Vec<(usize, usize)>>);

/// The transform attributes of `f` (`@grad`, `@value_and_grad`, `@jvp`)
/// checked against its `params` and return types `ret` (and whether it is
/// a tuple): the parameters differentiated by `@grad`, whether the value
/// is returned too, and the (parameter, tangent) pairs of `@jvp`. The
/// return type is checked only if no error was reported since `before`.
fn transform_attrs(
    f: &FnDef,
    attrs: Vec<&Attr>,
    params: &[Param],
    (ret, ret_tuple): (&[Type], bool),
    before: usize,
    errs: &mut Vec<Diagnostic>,
) -> TransformAttrs {
    let mut grad = None;
    let mut value_too = false;
    let mut jvp = None;
    // Several known attributes were expanded into functions of their own
    // (`derive::expand`), so several here means one of them is unknown.
    let several = attrs.len() > 1;
    for a in attrs {
        let attr = a.name.name.as_str();
        if attr != "grad" && attr != "value_and_grad" && attr != "jvp" {
            let d = Diagnostic::new(a.name.span, format!("unknown attribute `@{attr}`")).with_note(
                "the known attributes are `@grad(p, ...)`, `@value_and_grad(p, ...)`, `@jvp(p, ...)`, `@vmap(p, ...)`, `@custom_vjp(rule)` and `@custom_jvp(rule)`",
            );
            errs.push(match super::unknown::attribute_help(attr) {
                Some(h) => d.with_help(h),
                None => d,
            });
            continue;
        }
        if several {
            continue;
        }
        value_too = attr == "value_and_grad";
        if a.args.is_empty() {
            errs.push(Diagnostic::new(
                a.span,
                format!("`@{attr}` needs the names of the parameters to differentiate, as in `@{attr}(w)`"),
            ));
            continue;
        }
        let Some(wrt) = wrt_params(f, a, params, errs) else {
            continue;
        };
        if attr == "jvp" {
            if let Some(pairs) = jvp_pairs(f, a, &wrt, params, errs) {
                jvp = Some(pairs);
            }
            continue;
        }
        // The declared return type must be the wrt parameters' types.
        if errs.len() == before
            && !grad_returns(f, a, &wrt, params, (ret, ret_tuple, value_too), errs)
        {
            continue;
        }
        grad = Some(wrt);
    }
    (grad, value_too, jvp)
}

/// The indices of the parameters the transform attribute `a` of `f`
/// names; `None` (reported) if one is named twice, is not a parameter of
/// `f`, or has no derivative (an integer, a bool, a static parameter).
fn wrt_params(
    f: &FnDef,
    a: &Attr,
    params: &[Param],
    errs: &mut Vec<Diagnostic>,
) -> Option<Vec<usize>> {
    let fname = &f.name.name;
    let attr = a.name.name.as_str();
    let mut wrt = Vec::new();
    let mut ok = true;
    for arg in &a.args {
        match f.params.iter().position(|p| p.name.name == arg.name) {
            Some(i) if wrt.contains(&i) => {
                ok = false;
                errs.push(Diagnostic::new(
                    arg.span,
                    format!("`@grad` names `{}` twice", arg.name),
                ));
            }
            Some(i) if params.get(i).is_some_and(|p| p.1.dtype.is_int()) => {
                ok = false;
                let d = params[i].1.dtype;
                let what = if d == DType::Bool {
                    "a bool"
                } else {
                    "an integer"
                };
                errs.push(Diagnostic::new(
                    arg.span,
                    format!(
                        "`@{attr}` cannot differentiate the {d} `{}`: {what} has no derivative",
                        arg.name
                    ),
                ));
            }
            Some(i) if f.params[i].is_static => {
                ok = false;
                errs.push(
                    Diagnostic::new(
                        arg.span,
                        format!("`@grad` cannot differentiate the static parameter `{}`", arg.name),
                    )
                    .with_note("a static value is fixed when the function is specialized; only dynamic parameters have derivatives"),
                );
            }
            Some(i) => wrt.push(i),
            None => {
                ok = false;
                let note = params_note(f);
                errs.push(
                    Diagnostic::new(
                        arg.span,
                        format!(
                            "`@grad` names `{}`, which is not a parameter of `{fname}`",
                            arg.name
                        ),
                    )
                    .with_note(note),
                );
            }
        }
    }
    ok.then_some(wrt)
}

/// `@jvp(p, ...)` (`a`) of `f`: the last parameters carry the tangents,
/// one per name, in order. The pairs (parameter `wrt`, its tangent
/// parameter); `None` (reported) if the tangents are missing or do not
/// have their parameter's type.
fn jvp_pairs(
    f: &FnDef,
    a: &Attr,
    wrt: &[usize],
    params: &[Param],
    errs: &mut Vec<Diagnostic>,
) -> Option<Vec<(usize, usize)>> {
    let fname = &f.name.name;
    // The last parameters carry the tangents, one per name, in order.
    let k = wrt.len();
    let n = f.params.len();
    let first = n.saturating_sub(k);
    let mut pairs = Vec::new();
    for (j, &p) in wrt.iter().enumerate() {
        let t = first + j;
        let bad = n < 2 * k
            || p >= first
            || f.params.get(t).is_none_or(|tp| tp.is_static)
            || params.get(p).map(|x| &x.1) != params.get(t).map(|x| &x.1);
        if bad {
            let pname = &f.params[p].name.name;
            let pty = params.get(p).map(|x| x.1.to_string()).unwrap_or_default();
            let names: Vec<String> = a.args.iter().map(|i| format!("`{}`", i.name)).collect();
            errs.push(
                Diagnostic::new(
                    a.args[j].span,
                    format!(
                        "`@jvp` needs a tangent parameter for `{pname}`: the last {} of `{fname}` must be the tangents of {}, in order",
                        plural(k, "parameter"),
                        names.join(", ")
                    ),
                )
                .with_note(format!("for example `@jvp({pname}) fn {fname}(..., {pname}: {pty}, d{pname}: {pty}) -> ...`")),
            );
            return None;
        }
        pairs.push((p, t));
    }
    Some(pairs)
}

/// Whether `f` returns the types of the parameters `wrt` that `@grad`
/// (`a`) differentiates (after the value, with `value_too`), given its
/// return types `ret` (and whether they are a tuple); if not, reported.
fn grad_returns(
    f: &FnDef,
    a: &Attr,
    wrt: &[usize],
    params: &[Param],
    (ret, ret_tuple, value_too): (&[Type], bool, bool),
    errs: &mut Vec<Diagnostic>,
) -> bool {
    let fname = &f.name.name;
    let want: Vec<Type> = wrt.iter().map(|&i| params[i].1.clone()).collect();
    let fits = if value_too {
        ret_tuple && ret.len() == want.len() + 1 && ret[0].is_scalar() && ret[1..] == want[..]
    } else if want.len() == 1 {
        !ret_tuple && ret == want
    } else {
        ret_tuple && ret == want
    };
    if !fits && value_too {
        let mut all = vec![ret
            .first()
            .filter(|t| t.is_scalar())
            .cloned()
            .unwrap_or(Type::scalar(want[0].dtype))];
        all.extend(want.iter().cloned());
        errs.push(
            Diagnostic::new(
                f.ret.span(),
                format!(
                    "`{fname}` must return {}, the value and then the gradients, because of `@value_and_grad`",
                    type_list(&all)
                ),
            )
            .with_label(a.span, "the value and gradient are requested here"),
        );
        return false;
    }
    if !fits {
        let want_text = type_list(&want);
        let names: Vec<String> = a.args.iter().map(|i| format!("`{}`", i.name)).collect();
        errs.push(
            Diagnostic::new(
                f.ret.span(),
                format!(
                    "`{fname}` must return {want_text}, the {} of {}, because of `@grad`",
                    if names.len() == 1 { "type" } else { "types" },
                    names.join(", ")
                ),
            )
            .with_label(a.span, "the gradient is requested here"),
        );
        return false;
    }
    true
}

pub(super) fn type_list(ts: &[Type]) -> String {
    if ts.len() == 1 {
        ts[0].to_string()
    } else {
        let s: Vec<String> = ts.iter().map(|t| t.to_string()).collect();
        format!("({})", s.join(", "))
    }
}
