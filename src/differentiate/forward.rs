//! Forward mode: the tangent of every value, in one pass in program order.

use super::template::Template;
use crate::lang::ir::{Builder, Function, IrError, Loop, Param, VarId, VarInfo};
use crate::lang::types::{Dim, Type};
use crate::ops::Op;

/// Push the tangents of `f`'s results forward from the tangents of some of
/// its parameters. `tangents` pairs a differentiated parameter with the
/// parameter of `f` that carries its tangent (same type). The result is a
/// function of the same parameters returning the results' tangents (a
/// symbolic zero for a result that does not depend on the differentiated
/// parameters). Each op's JVP template comes from the op table; a value's
/// tangent is the sum of its operands' contributions, so a shared value is
/// differentiated once.
pub fn forward(f: &Function, tangents: &[(usize, usize)], name: &str) -> Result<Function, IrError> {
    f.validate()?;
    for &(p, t) in tangents {
        let (Some(pp), Some(tp)) = (f.params.get(p), f.params.get(t)) else {
            return Err(IrError(format!("`{}`: no parameter {p} or {t}", f.name)));
        };
        if f.ty(pp.var) != f.ty(tp.var) {
            return Err(IrError(format!(
                "`{}`: the tangent of %{} must have its type",
                f.name,
                f.var_name(pp.var)
            )));
        }
    }
    let mut b = Builder::new(name, f.size_params.clone());
    b.copy_loops(f);
    let mut map: Vec<Option<VarId>> = vec![None; f.vars.len()];
    for p in &f.params {
        map[p.var.index()] = Some(b.param(f.var_name(p.var), f.ty(p.var).clone(), p.span));
    }
    let m = |map: &[Option<VarId>], v: VarId| {
        map[v.index()]
            .ok_or_else(|| IrError("forward mode: a value is used before it is defined".into()))
    };
    // Tangents keyed by the primal variable.
    let mut tan: Vec<Option<VarId>> = vec![None; f.vars.len()];
    for &(p, t) in tangents {
        let tv = m(&map, f.params[t].var)?;
        tan[f.params[p].var.index()] = Some(tv);
    }
    for s in &f.stmts {
        let args: Vec<VarId> = s
            .args
            .iter()
            .map(|a| m(&map, *a))
            .collect::<Result<_, _>>()?;
        if let (Op::Loop(l, scan), Some(t)) = (s.op, s.args.first().and_then(|a| tan[a.index()])) {
            if scan && tan[s.args[1].index()].is_some() {
                return Err(IrError(format!(
                    "`{}`: forward mode with respect to the sequence a `scan` reads is not supported yet",
                    f.name
                )));
            }
            let (y, dy) = tangent_loop(&mut b, f, l as usize, &args, t, f.var_name(s.var))?;
            map[s.var.index()] = Some(y);
            tan[s.var.index()] = Some(dy);
            continue;
        }
        if matches!(s.op, Op::LoopTape(..) | Op::LoopVjp(..))
            && s.args.iter().any(|a| tan[a.index()].is_some())
        {
            return Err(IrError(format!(
                "`{}`: forward mode through a loop's gradient is not supported yet",
                f.name
            )));
        }
        let nv = b
            .push(f.var_name(s.var), s.op, &args, Some(f.ty(s.var)))
            .map_err(IrError::from)?;
        map[s.var.index()] = Some(nv);
        if s.op.is_piecewise_constant() {
            continue;
        }
        let rules = s.op.jvp();
        let out_ty = f.ty(s.var).clone();
        let mut total: Option<VarId> = None;
        for (i, a) in s.args.iter().enumerate() {
            let Some(t) = tan[a.index()] else { continue };
            let tmpl = Template::parse(&rules[i])
                .map_err(|e| IrError(format!("JVP of `{}`: {e}", s.op.name())))?;
            let bind = |v: &str| -> Option<VarId> {
                match v {
                    "t" => Some(t),
                    "out" => Some(nv),
                    "a" => args.first().copied(),
                    "b" => args.get(1).copied(),
                    "c" => args.get(2).copied(),
                    _ => None,
                }
            };
            let contrib = tmpl
                .instantiate(&mut b, &bind, Some(&out_ty))
                .map_err(|e| IrError(format!("JVP of `{}`: {e}", s.op.name())))?;
            total = Some(match total {
                Some(prev) => b
                    .push("", Op::Add, &[prev, contrib], None)
                    .map_err(IrError::from)?,
                None => contrib,
            });
        }
        tan[s.var.index()] = total;
    }
    let mut rets = Vec::new();
    for r in &f.rets {
        let t = match tan[r.index()] {
            Some(t) => t,
            None => b
                .push("", Op::Zero, &[], Some(f.ty(*r)))
                .map_err(IrError::from)?,
        };
        rets.push(t);
    }
    let out = super::reverse::prune_dead(&b.finish(rets));
    out.validate()?;
    Ok(out)
}

/// A loop and its tangent as one loop over `[state, tangent]`: the new
/// body runs the old body on the state and its JVP on both. Returns the
/// result and its tangent.
fn tangent_loop(
    b: &mut Builder,
    f: &Function,
    l: usize,
    args: &[VarId],
    dx: VarId,
    name: &str,
) -> Result<(VarId, VarId), IrError> {
    let x = args[0];
    let lp = &f.loops[l];
    let st = lp.state().clone();
    let mut shape = vec![Dim::Lit(2)];
    shape.extend(st.shape.iter().cloned());
    let packed = Type::array(st.dtype, shape);
    let body_jvp = jvp(&lp.body, &[0], &format!("{}.jvp", lp.body.name))?;
    let mut bb = Builder::new(format!("{}.tangent", lp.body.name), f.size_params.clone());
    let p = bb.param("p", packed.clone(), Default::default());
    let s = bb
        .push("s", Op::Index(0), &[p], None)
        .map_err(IrError::from)?;
    let ds = bb
        .push("ds", Op::Index(1), &[p], None)
        .map_err(IrError::from)?;
    // A scan's body also reads a row of the sequence (not differentiated).
    let row = lp
        .row()
        .map(|r| bb.param("x", r.clone(), Default::default()));
    let ins: Vec<VarId> = std::iter::once(s).chain(row).collect();
    let next = bb.inline(&lp.body, &ins)?[0];
    let jvp_ins: Vec<VarId> = ins.iter().copied().chain(std::iter::once(ds)).collect();
    let dnext = bb.inline(&body_jvp, &jvp_ins)?[0];
    let out = bb
        .pack_rows(&[next, dnext], &packed)
        .map_err(IrError::from)?;
    let body = bb.finish(vec![out]);
    let id = b.add_loop(Loop {
        count: lp.count.clone(),
        body,
        vjp: None,
    });
    let p0 = b.pack_rows(&[x, dx], &packed).map_err(IrError::from)?;
    let loop_ins: Vec<VarId> = std::iter::once(p0).chain(args.get(1).copied()).collect();
    let pn = b
        .push("", Op::Loop(id, row.is_some()), &loop_ins, None)
        .map_err(IrError::from)?;
    let y = b
        .push(name, Op::Index(0), &[pn], None)
        .map_err(IrError::from)?;
    let dy = b
        .push("", Op::Index(1), &[pn], None)
        .map_err(IrError::from)?;
    Ok((y, dy))
}

/// Forward mode of `f` with respect to the parameters at `wrt`: a function
/// of `f`'s parameters followed by one tangent per differentiated
/// parameter (named `d<name>`), returning the results' tangents.
pub fn jvp(f: &Function, wrt: &[usize], name: &str) -> Result<Function, IrError> {
    let mut g = f.clone();
    let mut pairs = Vec::new();
    for &i in wrt {
        let p = f
            .params
            .get(i)
            .ok_or_else(|| IrError(format!("`{}`: no parameter {i}", f.name)))?;
        let mut tname = format!("d{}", f.var_name(p.var));
        while g.vars.iter().any(|v| v.name == tname) {
            tname.push('_');
        }
        let var = VarId(g.vars.len() as u32);
        g.vars.push(VarInfo {
            name: tname,
            ty: f.ty(p.var).clone(),
        });
        g.params.push(Param { var, span: p.span });
        pairs.push((i, g.params.len() - 1));
    }
    forward(&g, &pairs, name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lang::interp::run;
    use crate::lang::ir::parse_functions;
    use crate::lang::types::DType;
    use crate::lang::value::Value;
    use crate::ops::ALL_OPS;

    #[test]
    fn every_jvp_template_parses() {
        for op in ALL_OPS {
            let ts = op.jvp();
            assert_eq!(ts.len(), op.arity(), "{op:?}");
            for t in ts {
                Template::parse(&t).unwrap_or_else(|e| panic!("{op:?}: {e}"));
            }
        }
    }

    #[test]
    fn directional_derivative_of_the_seed_loss() {
        let f = &parse_functions(
            "fn loss[N](%w: f64[N], %x: f64[N], %y: f64, %dw: f64[N]) -> f64 {
  %0: f64[N] = mul %w %x
  %pred: f64 = sum %0
  %err: f64 = sub %pred %y
  %1: f64 = mul %err %err
  ret %1
}",
        )
        .unwrap()[0];
        let j = forward(f, &[(0, 3)], "jvp").unwrap();
        let w = Value::f64(&[1.0, 2.0, 3.0]);
        let x = Value::f64(&[4.0, 5.0, 6.0]);
        let y = Value::scalar(DType::F64, 0.5);
        let dw = Value::f64(&[1.0, 0.0, -1.0]);
        // Gradient [252, 315, 378] dotted with dw.
        let out = run(&j, &[&w, &x, &y, &dw]).unwrap();
        assert_eq!(out[0].as_scalar(), 252.0 - 378.0);
    }
}
