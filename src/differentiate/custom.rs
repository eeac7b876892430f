//! Functions with their own derivative rules: `custom R n y x1 .. xn`
//! statements ([`Op::Custom`]), differentiated with rule `R` of the
//! function ([`CustomRule`]) instead of through the statements that made
//! `y`.
//!
//! A rule gives a VJP, a JVP or both. The one missing is the other's
//! transpose, made by reverse mode: the VJP is the gradient of
//! `<jvp(x, dx), g>` with respect to `dx`, and the JVP the gradient of
//! `Σ <vjp(x, g)_i, dx_i>` with respect to `g` (both exact, since a rule
//! is linear in its tangents or cotangent). The rule's statements are
//! copied in where the derivative is needed, so they are differentiated
//! again like any code (a second derivative differentiates the rule).

use super::reverse::reverse;
use super::template::Template;
use super::{AdBug, AdError};
use crate::ir::{Builder, CustomRule, Function, Stmt, VarId};
use crate::ops::Op;
use crate::types::Type;

/// The rule of a `custom` statement `s` of `f`, and the positions (in
/// `s.args`) of its differentiable operands.
fn rule_of<'f>(f: &'f Function, s: &Stmt) -> Result<(&'f CustomRule, Vec<usize>), AdError> {
    let Op::Custom(r, _) = s.op else {
        return Err(AdBug::NotCustom {
            op: s.op.to_string(),
        }
        .into());
    };
    let rule = f.rules.get(r as usize).ok_or_else(|| AdBug::NoRule {
        function: f.name.clone(),
        rule: r as usize,
    })?;
    let active = (1..s.args.len())
        .filter(|&i| !f.ty(s.args[i]).dtype.is_int())
        .collect();
    Ok((rule, active))
}

/// A symbolic zero of type `ty`.
fn zero(b: &mut Builder, ty: &Type) -> Result<VarId, AdError> {
    Ok(b.push("", Op::Zero, &[], Some(ty))?)
}

/// `h` with the parameters marked in `zero` known to be zero (symbolic
/// zero tangents of arguments that are not differentiated): what their
/// zero absorbs is a symbolic zero too, and a sum with one is its other
/// term. So a rule's coefficient of such a tangent is never computed, and
/// a NaN or infinite one there (`log(a) * da` at `a < 0`) does not turn
/// the tangent into NaN, with or without the optimizer, which treats a
/// symbolic zero the same way.
fn with_zero_params(h: &Function, zeros_in: &[bool]) -> Result<Function, AdError> {
    let mut b = Builder::new(h.name.clone(), h.size_params.clone());
    b.copy_loops(h);
    let mut map: Vec<Option<VarId>> = vec![None; h.vars.len()];
    let mut is_zero = vec![false; h.vars.len()];
    for (k, p) in h.params.iter().enumerate() {
        map[p.var.index()] = Some(b.param(h.var_name(p.var), h.ty(p.var).clone(), p.span));
        is_zero[p.var.index()] = zeros_in.get(k).copied().unwrap_or(false);
    }
    let get = |map: &[Option<VarId>], v: VarId| {
        map[v.index()].ok_or_else(|| {
            AdError::from(AdBug::RuleUseBeforeDef {
                function: h.name.clone(),
            })
        })
    };
    for s in &h.stmts {
        let args: Vec<VarId> = s
            .args
            .iter()
            .map(|a| get(&map, *a))
            .collect::<Result<_, _>>()?;
        let zeros: Vec<bool> = s.args.iter().map(|a| is_zero[a.index()]).collect();
        let ty = h.ty(s.var);
        let same = |a: VarId| h.ty(a) == ty;
        let absorbed = s.op == Op::Zero
            || zeros
                .iter()
                .enumerate()
                .any(|(i, &z)| z && s.op.zero_if_arg_zero(i));
        let v = if absorbed {
            is_zero[s.var.index()] = true;
            zero(&mut b, ty)?
        } else {
            match (s.op, &zeros[..]) {
                (Op::Add | Op::Sub, [_, true]) if same(s.args[0]) => args[0],
                (Op::Add, [true, _]) if same(s.args[1]) => args[1],
                (Op::Sub, [true, _]) if same(s.args[1]) => b.push("", Op::Neg, &[args[1]], None)?,
                _ => b.push(h.var_name(s.var), s.op, &args, Some(ty))?,
            }
        };
        map[s.var.index()] = Some(v);
    }
    let rets = h
        .rets
        .iter()
        .map(|r| get(&map, *r))
        .collect::<Result<_, _>>()?;
    Ok(b.finish(rets))
}

/// `h(x1 .. xn, u1 .. uk) -> (r1 .. rm)`, linear in the `u`s, transposed:
/// a function of `(x1 .. xn, u1 .. uk, w1 .. wm)` whose results are the
/// value of `Σ <r_j, w_j>` and then its gradient with respect to each `u`
/// (which does not depend on the `u`s: pass zeros).
fn transposed(h: &Function, n: usize) -> Result<Function, AdError> {
    let mut b = Builder::new(format!("{}.t", h.name), h.size_params.clone());
    let mut params = Vec::new();
    for p in &h.params {
        params.push(b.param(h.var_name(p.var), h.ty(p.var).clone(), p.span));
    }
    let rs = b.inline(h, &params)?;
    let mut total: Option<VarId> = None;
    for (j, &r) in rs.iter().enumerate() {
        let ty = b.ty(r).clone();
        let w = b.param(&format!("w{j}"), ty.clone(), Default::default());
        let prod = b.push("", Op::Mul, &[r, w], None)?;
        let dot = if ty.rank() == 0 {
            prod
        } else {
            b.push("", Op::Sum, &[prod], None)?
        };
        total = Some(match total {
            None => dot,
            Some(t) => b.push("", Op::Add, &[t, dot], None)?,
        });
    }
    let total = total.ok_or_else(|| AdBug::RuleWithoutResults {
        function: h.name.clone(),
    })?;
    let f = b.finish(vec![total]);
    let wrt: Vec<usize> = (n..h.params.len()).collect();
    Ok(reverse(&f, &wrt)?.value_and_grad)
}

/// The cotangent contributions of the `custom` statement `s` of `f`, given
/// the cotangent `g` of its result; `args` are its operands in `b`. One
/// `(position in s.args, contribution)` per differentiable operand.
pub(super) fn vjp(
    b: &mut Builder,
    f: &Function,
    s: &Stmt,
    args: &[VarId],
    g: VarId,
) -> Result<Vec<(usize, VarId)>, AdError> {
    let (rule, active) = rule_of(f, s)?;
    let xs = &args[1..];
    let cts = match (&rule.vjp, &rule.jvp) {
        (Some(vjp), _) => {
            let mut ins = xs.to_vec();
            ins.push(g);
            b.inline(vjp, &ins)?
        }
        (None, Some(jvp)) => {
            let t = transposed(jvp, xs.len())?;
            let mut ins = xs.to_vec();
            for &i in &active {
                let ty = f.ty(s.args[i]).clone();
                ins.push(zero(b, &ty)?);
            }
            ins.push(g);
            b.inline(&t, &ins)?.split_off(1)
        }
        (None, None) => {
            return Err(AdBug::RuleWithoutFunction {
                rule: rule.name.clone(),
            }
            .into())
        }
    };
    if cts.len() != active.len() {
        return Err(AdBug::VjpRuleCount {
            rule: rule.name.clone(),
            got: cts.len(),
            want: active.len(),
        }
        .into());
    }
    Ok(active.into_iter().zip(cts).collect())
}

/// The tangent of the `custom` statement `s` of `f`, given the tangents
/// of its operands (`tangents[i]` for `s.args[i]`, `None` where there is
/// none); `args` are its operands in `b`.
pub(super) fn jvp(
    b: &mut Builder,
    f: &Function,
    s: &Stmt,
    args: &[VarId],
    tangents: &[Option<VarId>],
) -> Result<VarId, AdError> {
    let (rule, active) = rule_of(f, s)?;
    let xs = &args[1..];
    let mut dxs = Vec::with_capacity(active.len());
    for &i in &active {
        dxs.push(match tangents.get(i).copied().flatten() {
            Some(t) => t,
            None => {
                let ty = f.ty(s.args[i]).clone();
                zero(b, &ty)?
            }
        });
    }
    // The tangents that are symbolic zeros (arguments not differentiated).
    let absent: Vec<bool> = active
        .iter()
        .map(|&i| tangents.get(i).copied().flatten().is_none())
        .collect();
    let out = match (&rule.jvp, &rule.vjp) {
        (Some(jvp), _) => {
            let mut zero_params = vec![false; xs.len()];
            zero_params.extend(&absent);
            let jvp = with_zero_params(jvp, &zero_params)?;
            let mut ins = xs.to_vec();
            ins.extend(&dxs);
            b.inline(&jvp, &ins)?
        }
        (None, Some(vjp)) => {
            // Parameters `(x.., g, dx..)`: `g` is a placeholder (the
            // result does not depend on it).
            let mut zero_params = vec![false; xs.len() + 1];
            zero_params.extend(&absent);
            let t = with_zero_params(&transposed(vjp, xs.len())?, &zero_params)?;
            let mut ins = xs.to_vec();
            let gty = f.ty(s.var).clone();
            ins.push(zero(b, &gty)?);
            ins.extend(&dxs);
            b.inline(&t, &ins)?.split_off(1)
        }
        (None, None) => {
            return Err(AdBug::RuleWithoutFunction {
                rule: rule.name.clone(),
            }
            .into())
        }
    };
    match out[..] {
        [t] => Ok(t),
        _ => Err(AdBug::JvpRuleCount {
            rule: rule.name.clone(),
            got: out.len(),
        }
        .into()),
    }
}

/// `contrib` where the cotangent `g` is not zero, and 0 elsewhere, when
/// they have one type (the guard of a value downstream of an `if`'s
/// untaken side: a rule's NaN or infinity there never reaches the
/// gradient); `contrib` itself otherwise.
pub(super) fn guarded(b: &mut Builder, g: VarId, contrib: VarId) -> Result<VarId, AdError> {
    if b.ty(g) != b.ty(contrib) {
        return Ok(contrib);
    }
    let t = Template::App(
        Op::Select,
        vec![
            Template::App(Op::Ne, vec![Template::Var("g".into()), Template::Num(0.0)]),
            Template::Var("c".into()),
            Template::Num(0.0),
        ],
    );
    let ty = b.ty(contrib).clone();
    let bind = |v: &str| match v {
        "g" => Some(g),
        "c" => Some(contrib),
        _ => None,
    };
    t.instantiate(b, &bind, Some(&ty))
        .map_err(|e| AdBug::Guard(Box::new(e)).into())
}
