//! Lowering a whole function body: its parameters, its declared return
//! type, and `@grad`, `@value_and_grad` and `@jvp` differentiation.

use super::signature::type_list;
use super::{result_expr, CheckedFn, FnCx, Sig, Val};
use crate::differentiate::forward;
use crate::differentiate::reverse::{prune_dead, reverse};
use crate::lang::ast::*;
use crate::lang::ir::{Builder, IrError};
use crate::lang::program::GradSpec;
use crate::lang::span::{Diagnostic, Span};
use crate::lang::types::DType;

impl<'a> FnCx<'a> {
    /// Lower a function body. `statics` gives the value of every static
    /// parameter (by parameter index); the IR's parameters are the dynamic ones.
    pub(super) fn lower_fn(
        &mut self,
        f: &FnDef,
        sig: &Sig,
        statics: &[(usize, Val)],
    ) -> Option<CheckedFn> {
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
            if ty.dtype == DType::I64 {
                self.env.push((name.clone(), Val::Count(name.clone(), v)));
            } else {
                self.env.push((name.clone(), Val::Var(v)));
            }
        }
        // IR parameter index of each source parameter (statics have none).
        let ir_index: Vec<Option<usize>> = {
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
        };
        let body = self.lower(&f.body, &[]);
        let fname = f.name.name.clone();
        let res = result_expr(&f.body).span;
        if let Some(wrt) = &sig.grad {
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
            let primal = b.finish(vec![ret]);
            if let Err(e) = primal.validate() {
                self.bug(format!("primal of `{fname}`: {e}"));
                return None;
            }
            let wrt_ir: Vec<usize> = wrt.iter().filter_map(|&i| ir_index[i]).collect();
            let rev = match reverse(&primal, &wrt_ir) {
                Ok(r) => r,
                Err(e) => {
                    // Through a loop's gradient reverse mode stops; for
                    // scalar parameters forward mode gives the gradient.
                    let scalars = wrt_ir
                        .iter()
                        .all(|&i| primal.ty(primal.params[i].var).is_scalar());
                    if e.0.contains("a gradient through a loop") && scalars && !sig.value_too {
                        match crate::differentiate::forward_gradient(&primal, &wrt_ir, &fname) {
                            Ok(ir) => return Some(CheckedFn { ir, grad: None }),
                            Err(e2) => {
                                self.ad_failure("differentiating", &fname, f.name.span, e2);
                                return None;
                            }
                        }
                    }
                    self.ad_failure("differentiating", &fname, f.name.span, e);
                    return None;
                }
            };
            if sig.value_too {
                let mut ir = prune_dead(&rev.value_and_grad);
                ir.name = fname.clone();
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
                return Some(CheckedFn { ir, grad: None });
            }
            let ir = rev.gradient(&fname);
            if let Err(e) = ir.validate() {
                self.bug(format!("gradient of `{fname}`: {e}"));
                return None;
            }
            return Some(CheckedFn {
                ir,
                grad: Some(GradSpec {
                    primal,
                    wrt: wrt_ir,
                }),
            });
        }
        // An ordinary function: the body must have the declared type.
        let declared = type_list(&sig.ret);
        let mut rets = Vec::new();
        let mismatch = match (&body, sig.ret_tuple) {
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
            let got = self.describe(&body);
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
        if !self.errs.is_empty() || self.internal.is_some() {
            return None;
        }
        let b = std::mem::replace(&mut self.b, Builder::new("", Vec::new()));
        let ir = b.finish(rets);
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
            return match forward(&ir, &pairs, &fname) {
                Ok(ir) => Some(CheckedFn { ir, grad: None }),
                Err(e) => {
                    self.ad_failure("forward mode of", &fname, f.name.span, e);
                    None
                }
            };
        }
        Some(CheckedFn { ir, grad: None })
    }

    /// AD failed on `fname`: a limit users can meet (a derivative through a
    /// loop's gradient) is their error, anything else a bug.
    fn ad_failure(&mut self, what: &str, fname: &str, span: Span, e: IrError) {
        if e.0.contains("not supported yet") {
            let why = e.0.rsplit(": ").next().unwrap_or(&e.0).to_string();
            let note = if why.contains("sequence") {
                "the sequence of a `scan` is read, not differentiated; with an integer length and a state that a loop cannot carry, the `scan` is unrolled and differentiated like any expression"
            } else {
                "reverse mode does not go through a loop's gradient (`looptape`/`loopvjp`) yet: use `@jvp` of the gradient (forward over reverse, a Hessian-vector product), or `@grad` with respect to scalar parameters only (done by forward mode), or give the loop a `static` count small enough to unroll"
            };
            self.error(
                Diagnostic::new(span, format!("`{fname}` cannot be differentiated: {why}"))
                    .with_note(note),
            );
        } else {
            self.bug(format!("{what} `{fname}`: {e}"));
        }
    }
}
