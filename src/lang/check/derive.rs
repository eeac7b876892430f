//! Attributes that stand for other functions, expanded before checking.
//!
//! - **Several transform attributes on one function** (`@grad(w) @grad(b)
//!   fn loss ...`): the function stays the primal, and each attribute
//!   makes a function of its own, named after it ([`derived_name`]), whose
//!   body calls the primal. A single attribute keeps its meaning: the
//!   function it stands on is the derived one (`@grad(w) fn dloss(...) =
//!   loss(...)`).
//! - **`@vmap(x, ...)`**: the function takes the named parameters with a
//!   leading batch axis, and its body is written for one example. The body
//!   becomes `tabulate[B](b => { let x = x[b] ... body })`, which the
//!   checker vectorizes like any `tabulate`.
//!
//! The expansion works on the syntax tree; every node it makes carries the
//! span of the attribute, so errors in the functions it makes point there.

use super::super::ast::*;
use super::signature::params_note;
use crate::error::span::{Diagnostic, Span};

/// The transform attributes that may stand together on one function.
const TRANSFORMS: [&str; 3] = ["grad", "value_and_grad", "jvp"];

/// The name of the function that `attr` (`@grad`, `@value_and_grad` or `@jvp`) makes
/// from the primal `f` when it stands with others on `f`:
/// `@grad(w)` → `df_dw`, `@grad(w, b)` → `df_dw_db`,
/// `@value_and_grad(w)` → `f_and_df_dw`, `@jvp(x)` → `f_jvp_x`.
pub fn derived_name(f: &str, attr: &str, args: &[&str]) -> String {
    let ds: Vec<String> = args.iter().map(|a| format!("d{a}")).collect();
    match attr {
        "value_and_grad" => format!("{f}_and_d{f}_{}", ds.join("_")),
        "jvp" => format!("{f}_jvp_{}", args.join("_")),
        _ => format!("d{f}_{}", ds.join("_")),
    }
}

/// `module` with its compound attributes expanded, and the indices of
/// its items whose attributes are wrong (reported in `errs`): such an
/// item is not checked further, so its body does not add errors that
/// only follow from the attribute's.
pub(super) fn expand(module: &Module, errs: &mut Vec<Diagnostic>) -> (Module, Vec<usize>) {
    let mut items = Vec::with_capacity(module.items.len());
    let mut failed = Vec::new();
    for f in &module.items {
        let vmaps: Vec<&Attr> = f.attrs.iter().filter(|a| a.name.name == "vmap").collect();
        if let Some(first) = vmaps.first() {
            if f.attrs.len() > 1 {
                let other = f
                    .attrs
                    .iter()
                    .find(|a| a.name.name != "vmap")
                    .unwrap_or(first);
                errs.push(
                    Diagnostic::new(
                        if other.span == first.span {
                            f.attrs[1].span
                        } else {
                            other.span
                        },
                        format!("`@vmap` stands alone: `{}` has another attribute", f.name.name),
                    )
                    .with_note("batch a function of its own, and differentiate either one: `@grad` of a function that calls the batched one, or `@vmap` of a function that calls a gradient"),
                );
                failed.push(items.len());
                items.push(FnDef {
                    attrs: Vec::new(),
                    ..f.clone()
                });
                continue;
            }
            match vmap(f, first, errs) {
                Some(g) => items.push(g),
                None => {
                    failed.push(items.len());
                    items.push(FnDef {
                        attrs: Vec::new(),
                        ..f.clone()
                    });
                }
            }
            continue;
        }
        let several = f.attrs.len() > 1
            && f.attrs
                .iter()
                .all(|a| TRANSFORMS.contains(&a.name.name.as_str()));
        if !several {
            items.push(f.clone());
            continue;
        }
        items.push(FnDef {
            attrs: Vec::new(),
            ..f.clone()
        });
        for a in &f.attrs {
            if let Some(g) = derived(f, a, errs) {
                items.push(g);
            }
        }
    }
    (Module { items }, failed)
}

/// Reports each name of `attr` that is not a parameter of `f`; whether
/// there was none.
fn names_params(f: &FnDef, attr: &Attr, errs: &mut Vec<Diagnostic>) -> bool {
    let mut ok = true;
    for a in &attr.args {
        if f.params.iter().any(|p| p.name.name == a.name) {
            continue;
        }
        ok = false;
        errs.push(
            Diagnostic::new(
                a.span,
                format!(
                    "`@{}` names `{}`, which is not a parameter of `{}`",
                    attr.name.name, a.name, f.name.name
                ),
            )
            .with_note(params_note(f)),
        );
    }
    ok
}

/// The function `attr` makes from the primal `f`, or `None` after an
/// error.
fn derived(f: &FnDef, attr: &Attr, errs: &mut Vec<Diagnostic>) -> Option<FnDef> {
    if !names_params(f, attr, errs) {
        return None;
    }
    let at = attr.span;
    let kind = attr.name.name.as_str();
    let args: Vec<&str> = attr.args.iter().map(|a| a.name.as_str()).collect();
    let ident = |name: &str| Ident {
        name: name.to_string(),
        span: at,
    };
    let param_ty = |name: &str| {
        f.params
            .iter()
            .find(|p| p.name.name == name)
            .map(|p| p.ty.clone())
    };
    let wrt_types: Vec<TypeExpr> = args
        .iter()
        .map(|a| param_ty(a).unwrap_or_else(|| f.ret.clone()))
        .collect();
    let tuple = |elems: Vec<TypeExpr>| {
        if elems.len() == 1 {
            elems.into_iter().next().unwrap_or_else(|| f.ret.clone())
        } else {
            TypeExpr::Tuple { elems, span: at }
        }
    };
    let mut params = f.params.clone();
    let ret = match kind {
        "grad" => tuple(wrt_types),
        "value_and_grad" => TypeExpr::Tuple {
            elems: std::iter::once(f.ret.clone()).chain(wrt_types).collect(),
            span: at,
        },
        _ => {
            // `@jvp`: the tangents follow, `dx` for `x`, of its type.
            for (a, ty) in args.iter().zip(wrt_types) {
                let mut name = format!("d{a}");
                while params.iter().any(|p| p.name.name == name) {
                    name.push('_');
                }
                params.push(ParamDecl {
                    name: ident(&name),
                    ty,
                    is_static: false,
                    is_data: false,
                    span: at,
                });
            }
            f.ret.clone()
        }
    };
    let call = Expr {
        kind: ExprKind::Call {
            callee: ident(&f.name.name),
            args: f
                .params
                .iter()
                .map(|p| Expr {
                    kind: ExprKind::Name(p.name.name.clone()),
                    span: at,
                })
                .collect(),
        },
        span: at,
    };
    Some(FnDef {
        attrs: vec![attr.clone()],
        name: ident(&derived_name(&f.name.name, kind, &args)),
        size_params: f.size_params.clone(),
        bounds: f.bounds.clone(),
        params,
        ret,
        body: call,
        span: at,
    })
}

/// `f` under `@vmap(...)`: its body run once per example of the batch;
/// `None` after an error.
fn vmap(f: &FnDef, attr: &Attr, errs: &mut Vec<Diagnostic>) -> Option<FnDef> {
    if attr.args.is_empty() {
        errs.push(Diagnostic::new(
            attr.span,
            "`@vmap` needs the names of the batched parameters, as in `@vmap(x)`",
        ));
        return None;
    }
    if !names_params(f, attr, errs) {
        return None;
    }
    // The batch axis: the leading dimension of every batched parameter.
    let mut batch: Option<(DimExpr, Span)> = None;
    let mut ok = true;
    for (k, a) in attr.args.iter().enumerate() {
        if attr.args[..k].iter().any(|b| b.name == a.name) {
            errs.push(Diagnostic::new(
                a.span,
                format!("`@vmap` names `{}` twice", a.name),
            ));
            ok = false;
            continue;
        }
        let Some(p) = f.params.iter().find(|p| p.name.name == a.name) else {
            continue;
        };
        let lead = match &p.ty {
            TypeExpr::Named { dims, .. } if !p.is_static => dims.first().cloned(),
            _ => None,
        };
        let Some(lead) = lead else {
            errs.push(
                Diagnostic::new(
                    p.ty.span(),
                    format!(
                        "`@vmap` batches `{}` along its first axis, but it has none",
                        a.name
                    ),
                )
                .with_label(a.span, "batched here")
                .with_note("give the batched parameter a leading batch axis, as in `x: f64[B, N]` for examples of type `f64[N]`"),
            );
            ok = false;
            continue;
        };
        match &batch {
            None => batch = Some((lead, p.ty.span())),
            Some((b, at)) if b.text() != lead.text() => {
                errs.push(
                    Diagnostic::new(
                        lead.span(),
                        format!(
                            "the batched parameters must share their first axis, but `{}` has `{}` where the first has `{}`",
                            a.name,
                            lead.text(),
                            b.text()
                        ),
                    )
                    .with_label(*at, "the first batched parameter"),
                );
                ok = false;
            }
            Some(_) => {}
        }
    }
    let (size, _) = batch.filter(|_| ok)?;
    let at = attr.span;
    let index = Ident {
        name: "vmap#example".to_string(),
        span: at,
    };
    let lets = attr
        .args
        .iter()
        .map(|a| Let {
            pattern: Pattern::Name(a.clone()),
            value: Expr {
                kind: ExprKind::Index {
                    base: Box::new(Expr {
                        kind: ExprKind::Name(a.name.clone()),
                        span: a.span,
                    }),
                    indices: vec![Expr {
                        kind: ExprKind::Name(index.name.clone()),
                        span: at,
                    }],
                },
                span: a.span,
            },
            span: a.span,
        })
        .collect();
    let body_span = f.body.span;
    Some(FnDef {
        attrs: Vec::new(),
        body: Expr {
            kind: ExprKind::Tabulate {
                size,
                param: index,
                body: Box::new(Expr {
                    kind: ExprKind::Block(Block {
                        lets,
                        result: Box::new(f.body.clone()),
                    }),
                    span: body_span,
                }),
            },
            span: body_span,
        },
        ..f.clone()
    })
}
