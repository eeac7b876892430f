//! Functions with their own derivative rules (`@custom_vjp(rule)`,
//! `@custom_jvp(rule)`): the function's value is its body's, marked by a
//! `custom` statement that carries the rules, so AD differentiates it with
//! them wherever it is inlined ([`crate::ir::CustomRule`]).
//!
//! A VJP rule takes the function's parameters and the cotangent of its
//! result, and returns the cotangent of each floating-point parameter (a
//! tuple if there are several); a JVP rule takes the parameters and the
//! tangent of each floating-point parameter and returns the tangent of the
//! result. Both are ordinary functions over the same size parameters.

use super::signature::type_list;
use super::{FnCx, Sig, Val};
use crate::error::span::Diagnostic;
use crate::ir::{CustomRule, Function, VarId};
use crate::lang::ast::{Expr, FnDef};
use crate::ops::{kernels, Op};
use crate::types::DType;
use crate::types::Type;

/// Types separated by commas.
fn joined(ts: &[Type]) -> String {
    ts.iter()
        .map(Type::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl<'a> FnCx<'a> {
    /// A call of the native kernel `k` ([`crate::ops::kernels`]), typed by
    /// its shape rule.
    pub(super) fn call_kernel(
        &mut self,
        e: &Expr,
        k: u32,
        name: &str,
        args: &[Expr],
        hint: &str,
    ) -> Val {
        let mut xs = Vec::with_capacity(args.len());
        let mut ok = true;
        for a in args {
            let v = self.lower(a, &[]);
            match self.single(v, a.span) {
                Val::Var(x) => xs.push(x),
                Val::Err => ok = false,
                other => {
                    let t = self.describe(&other);
                    self.error(Diagnostic::new(
                        a.span,
                        format!("the native kernel `{name}` takes f64 arrays, but this is {t}"),
                    ));
                    ok = false;
                }
            }
        }
        if !ok {
            return Val::Err;
        }
        self.kernel_on(e, k, name, xs, hint)
    }

    /// [`Self::call_kernel`] on its arguments' values `xs`.
    pub(super) fn kernel_on(
        &mut self,
        e: &Expr,
        k: u32,
        name: &str,
        mut xs: Vec<VarId>,
        hint: &str,
    ) -> Val {
        if xs.iter().any(|x| self.batched.contains(x)) {
            self.error(
                Diagnostic::unsupported(
                    e.span,
                    format!("the native kernel `{name}` is called here on values that depend on the index of `tabulate` (or a batch of `@vmap`): not supported"),
                )
                .with_note("call it on whole arrays"),
            );
            return Val::Err;
        }
        // A builtin kernel (`cholesky`, ...) of `f32` arrays computes in
        // `f64`: its arguments converted, its result rounded back.
        let single = kernels::is_builtin(k) && xs.iter().all(|x| self.ty(*x).dtype == DType::F32);
        if single {
            for x in xs.iter_mut() {
                let Val::Var(w) = self.push_plain("", Op::Convert(DType::F64), &[*x], None) else {
                    return Val::Err;
                };
                *x = w;
            }
        }
        let tys: Vec<Type> = xs.iter().map(|x| self.ty(*x)).collect();
        match kernels::kernel_type(k, &tys) {
            Ok(t) if single => {
                match self.push_plain("", Op::Kernel(k, xs.len() as u32), &xs, Some(&t)) {
                    Val::Var(r) => self.push_plain(hint, Op::Convert(DType::F32), &[r], None),
                    other => other,
                }
            }
            Ok(t) => self.push(hint, Op::Kernel(k, xs.len() as u32), &xs, Some(&t)),
            Err(m) => {
                self.error(Diagnostic::new(e.span, m.to_string()));
                Val::Err
            }
        }
    }

    /// `y`, the value of the function `f` (signature `sig`) being lowered,
    /// marked with its rules; `None` after an error.
    pub(super) fn attach_rules(&mut self, f: &FnDef, sig: &Sig, y: VarId) -> Option<VarId> {
        let fname = &f.name.name;
        let floats: Vec<Type> = sig
            .params
            .iter()
            .map(|p| p.1.clone())
            .filter(|t| !t.dtype.is_int())
            .collect();
        let mut rule = CustomRule {
            name: fname.clone(),
            vjp: None,
            jvp: None,
        };
        let mut ok = true;
        for (is_vjp, name) in &sig.custom {
            let kind = if *is_vjp { "custom_vjp" } else { "custom_jvp" };
            let Some(&j) = self.by_name.get(&name.name) else {
                // Reported with the call graph.
                ok = false;
                continue;
            };
            let (Some(rsig), Some(_)) = (
                self.sigs.get(j).and_then(|s| s.as_ref()),
                self.lowered.get(j).and_then(|c| c.as_ref()),
            ) else {
                if self
                    .sigs
                    .get(j)
                    .and_then(|s| s.as_ref())
                    .is_some_and(Sig::is_template)
                {
                    self.error(Diagnostic::new(
                        name.span,
                        format!("the rule `{}` has static or element-type parameters: a rule is an ordinary function", name.name),
                    ));
                }
                ok = false;
                continue;
            };
            // What the rule must take and give.
            let params: Vec<Type> = sig.params.iter().map(|p| p.1.clone()).collect();
            let (want_params, want_ret) = if *is_vjp {
                let mut ps = params.clone();
                ps.extend(sig.ret.iter().cloned());
                (ps, floats.clone())
            } else {
                let mut ps = params.clone();
                ps.extend(floats.iter().cloned());
                (ps, sig.ret.clone())
            };
            let got_params: Vec<Type> = rsig.params.iter().map(|p| p.1.clone()).collect();
            if got_params != want_params
                || rsig.ret != want_ret
                || rsig.size_params != sig.size_params
            {
                let what = if *is_vjp {
                    "the parameters, then the cotangent of the result; it returns the cotangent of each f32 or f64 parameter"
                } else {
                    "the parameters, then the tangent of each f32 or f64 parameter; it returns the tangent of the result"
                };
                self.error(
                    Diagnostic::new(
                        name.span,
                        format!(
                            "the rule `{}` of `{fname}` must be ({}) -> {}, with `{fname}`'s size parameters, but it is ({}) -> {}",
                            name.name,
                            joined(&want_params),
                            type_list(&want_ret),
                            joined(&got_params),
                            type_list(&rsig.ret),
                        ),
                    )
                    .with_note(format!("a `@{kind}` rule takes {what}")),
                );
                ok = false;
                continue;
            }
            let ir: Function = self.full_ir(j)?.into_owned();
            if *is_vjp {
                rule.vjp = Some(ir);
            } else {
                rule.jvp = Some(ir);
            }
        }
        if !ok {
            return None;
        }
        let xs: Vec<VarId> = self.b.function().params.iter().map(|p| p.var).collect();
        let r = self.b.add_rule(rule);
        let mut args = vec![y];
        args.extend(&xs);
        let ty = self.b.ty(y).clone();
        let n = xs.len() as u32;
        match self.b.push(fname, Op::Custom(r, n), &args, Some(&ty)) {
            Ok(v) => Some(v),
            Err(e) => {
                self.bug(format!("the rules of `{fname}`: {e}"));
                None
            }
        }
    }
}
