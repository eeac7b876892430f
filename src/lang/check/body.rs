//! Lowering a whole function body: its parameters, its declared return
//! type, and `@grad`, `@value_and_grad` and `@jvp` differentiation.

use super::signature::type_list;
use super::{result_expr, CheckedFn, FnCx, Sig, Val};
use super::{GradSpec, JvpSpec};
use crate::error::span::{Diagnostic, Span};
use crate::ir::transform::{Request, TransformError};
use crate::ir::{Builder, VarId};
use crate::lang::ast::*;
use crate::types::DType;

impl<'a> FnCx<'a> {
    /// Lower a function body. `statics` gives the value of every static
    /// parameter (by parameter index); the IR's parameters are the dynamic ones.
    pub(super) fn lower_fn(
        &mut self,
        f: &FnDef,
        sig: &Sig,
        statics: &[(usize, Val)],
    ) -> Option<CheckedFn> {
        self.bind_params(sig, statics);
        // IR parameter index of each source parameter (statics have none).
        let ir_index = ir_indices(sig);
        let body = self.lower(&f.body, &[]);
        let fname = f.name.name.clone();
        if let Some(wrt) = &sig.grad {
            return self.lower_grad(f, sig, wrt, body, &ir_index);
        }
        // An ordinary function: the body must have the declared type.
        let mut rets = self.returned(f, sig, &body)?;
        if !self.errs.is_empty() || self.internal.is_some() {
            return None;
        }
        if let (false, Some(&y)) = (sig.custom.is_empty(), rets.first()) {
            rets[0] = self.attach_rules(f, sig, y)?;
        }
        let b = std::mem::replace(&mut self.b, Builder::new("", Vec::new()));
        let origins = b.origins().map(<[_]>::to_vec);
        let mut ir = b.finish(rets);
        ir.prune_rules();
        if !self.deferred.is_empty() {
            // Validated once its calls are inlined.
            let calls = self.take_calls(&ir, origins.unwrap_or_default());
            return Some(CheckedFn {
                calls,
                ..CheckedFn::inlined(ir)
            });
        }
        if let Err(e) = ir.validate() {
            self.bug(format!("`{fname}`: {e}"));
            return None;
        }
        if let Some(pairs) = &sig.jvp {
            // `@jvp`: the tangents of the results, pushed forward from the
            // trailing tangent parameters.
            let pairs: Vec<(usize, usize)> = pairs
                .iter()
                .filter_map(|&(p, t)| Some((ir_index[p]?, ir_index[t]?)))
                .collect();
            let request = Request::Jvp {
                f: &ir,
                pairs: &pairs,
            };
            return match self.transforms.derive(&fname, request) {
                Ok(d) => Some(CheckedFn {
                    jvp: Some(JvpSpec { f: ir, pairs }),
                    ..CheckedFn::inlined(d.ir)
                }),
                Err(e) => {
                    self.transform_failure(&fname, f.name.span, e);
                    None
                }
            };
        }
        Some(CheckedFn::inlined(ir))
    }

    /// The parameters of a function with signature `sig` bound in the
    /// environment: a static one to its value in `statics` (by parameter
    /// index), a dynamic one to a parameter of the IR.
    fn bind_params(&mut self, sig: &Sig, statics: &[(usize, Val)]) {
        for (k, (name, ty, span)) in sig.params.iter().enumerate() {
            if sig.statics.get(k).copied().flatten().is_some() {
                let v = statics
                    .iter()
                    .find(|(j, _)| *j == k)
                    .map(|(_, v)| v.clone())
                    .unwrap_or(Val::Err);
                self.env.push((name.clone(), v));
                continue;
            }
            let v = self.b.param(name, ty.clone(), *span);
            if sig.is_count(k) {
                self.env.push((name.clone(), Val::Count(name.clone(), v)));
            } else if ty.dtype == DType::Bool {
                // A condition: computed with as an `i64` mask.
                let m = self.mask_as(v, DType::I64);
                self.env.push((name.clone(), Val::Mask(m)));
            } else {
                self.env.push((name.clone(), Val::Var(v)));
            }
        }
    }

    /// The `@grad` (or `@value_and_grad`) function `f`, its parameters
    /// `wrt` (by source index; `ir_index` maps them to the IR's): its
    /// lowered `body` made the primal function's scalar result, and the
    /// primal differentiated.
    fn lower_grad(
        &mut self,
        f: &FnDef,
        sig: &Sig,
        wrt: &[usize],
        body: Val,
        ir_index: &[Option<usize>],
    ) -> Option<CheckedFn> {
        let fname = f.name.name.clone();
        let res = result_expr(&f.body).span;
        let ret = match body {
            Val::Var(v) if self.ty(v).is_scalar() => v,
            Val::Const(x) => {
                let d = sig
                    .params
                    .get(wrt[0])
                    .map(|p| p.1.dtype)
                    .unwrap_or(DType::F64);
                self.b.constant(d, x)
            }
            Val::Err => return None,
            other => {
                let t = self.describe(&other);
                self.error(
                    Diagnostic::new(
                        res,
                        format!(
                            "the body of the `@grad` function `{fname}` must be a scalar, but it has type {t}"
                        ),
                    )
                    .with_note("reverse mode differentiates a function with one scalar result"),
                );
                return None;
            }
        };
        if !self.errs.is_empty() || self.internal.is_some() {
            return None;
        }
        let b = std::mem::replace(&mut self.b, Builder::new("", Vec::new()));
        let mut primal = b.finish(vec![ret]);
        primal.prune_rules();
        if let Err(e) = primal.validate() {
            self.bug(format!("primal of `{fname}`: {e}"));
            return None;
        }
        let wrt_ir: Vec<usize> = wrt.iter().filter_map(|&i| ir_index[i]).collect();
        let request = Request::Grad {
            primal: &primal,
            wrt: &wrt_ir,
            value_too: sig.value_too,
        };
        let derived = match self.transforms.derive(&fname, request) {
            Ok(d) => d,
            Err(e) => {
                self.transform_failure(&fname, f.name.span, e);
                return None;
            }
        };
        let ir = derived.ir;
        if sig.value_too {
            let value_ty = ir.ty(ir.rets[0]).clone();
            if sig.ret.first() != Some(&value_ty) {
                self.error(
                    Diagnostic::new(res, format!("the value of `{fname}` has type {value_ty}"))
                        .with_label(
                            f.ret.span(),
                            format!("but the return type says {}", type_list(&sig.ret)),
                        ),
                );
                return None;
            }
            if let Err(e) = ir.validate() {
                self.bug(format!("value and gradient of `{fname}`: {e}"));
                return None;
            }
            return Some(CheckedFn::inlined(ir));
        }
        if let Err(e) = ir.validate() {
            self.bug(format!("gradient of `{fname}`: {e}"));
            return None;
        }
        if !derived.reverse {
            return Some(CheckedFn::inlined(ir));
        }
        Some(CheckedFn {
            grad: Some(GradSpec {
                primal,
                wrt: wrt_ir,
            }),
            ..CheckedFn::inlined(ir)
        })
    }

    /// The results of an ordinary function `f`: its lowered `body`
    /// coerced to the declared return types; `None` if it was an error,
    /// or does not have them (reported).
    fn returned(&mut self, f: &FnDef, sig: &Sig, body: &Val) -> Option<Vec<VarId>> {
        let fname = &f.name.name;
        let res = result_expr(&f.body).span;
        let declared = type_list(&sig.ret);
        let mut rets = Vec::new();
        let mismatch = match (body, sig.ret_tuple) {
            (Val::Err, _) => return None,
            (Val::Tuple(vs), true) if vs.len() == sig.ret.len() => {
                let mut bad = false;
                for (v, t) in vs.iter().zip(&sig.ret) {
                    match self.coerce(v, t) {
                        Some(Val::Var(x)) => rets.push(x),
                        Some(Val::Err) => return None,
                        _ => bad = true,
                    }
                }
                bad
            }
            (Val::Tuple(_), _) => true,
            (v, false) => match sig.ret.first().cloned() {
                Some(t) => match self.coerce(v, &t) {
                    Some(Val::Var(x)) => {
                        rets.push(x);
                        false
                    }
                    Some(_) => return None,
                    None => true,
                },
                None => return None,
            },
            (_, true) => true,
        };
        if mismatch {
            let got = self.describe(body);
            self.error(
                Diagnostic::new(
                    res,
                    format!(
                        "`{fname}` is declared to return {declared}, but its body has type {got}"
                    ),
                )
                .with_label(f.ret.span(), "the return type is declared here"),
            );
            return None;
        }
        Some(rets)
    }

    /// A transform of `fname` failed: a documented limit is the user's error,
    /// reported at the function; anything else is a bug.
    fn transform_failure(&mut self, fname: &str, span: Span, e: TransformError) {
        match e {
            TransformError::Unsupported { why, note } => self.error(
                Diagnostic::unsupported(span, format!("`{fname}` cannot be differentiated: {why}"))
                    .with_note(note),
            ),
            TransformError::Internal(m) => {
                self.bug(m);
            }
        }
    }
}

/// The index among the IR's parameters of each parameter of `sig` (the
/// static ones have none).
fn ir_indices(sig: &Sig) -> Vec<Option<usize>> {
    let mut k = 0;
    sig.statics
        .iter()
        .map(|st| {
            st.is_none().then(|| {
                k += 1;
                k - 1
            })
        })
        .collect()
}
