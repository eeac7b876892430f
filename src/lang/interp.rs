//! The reference interpreter: runs IR functions on [`Value`]s, one op at a
//! time through the op table's evaluator. It is the oracle the JIT and the
//! rewrite rules are checked against.

use super::ir::Function;
use super::types::{Dim, Type};
use super::value::Value;
use indexmap::IndexMap;
use std::fmt;

/// Concrete values of size parameters, bound from argument shapes.
pub type Dims = IndexMap<String, u64>;

/// A run-time argument does not fit the function's signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgError {
    /// The offending parameter (None: the argument count is wrong).
    pub param: Option<usize>,
    pub message: String,
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Check argument count, dtypes and ranks, and bind every size parameter
/// from the shapes (a parameter seen twice must agree).
pub fn bind_args(f: &Function, args: &[&Value]) -> Result<Dims, ArgError> {
    if args.len() != f.params.len() {
        return Err(ArgError {
            param: None,
            message: format!(
                "`{}` takes {} argument(s), got {}",
                f.name,
                f.params.len(),
                args.len()
            ),
        });
    }
    let mut dims = Dims::new();
    let mut bound_by: IndexMap<String, usize> = IndexMap::new();
    for (i, (p, a)) in f.params.iter().zip(args).enumerate() {
        let name = f.var_name(p.var);
        let ty = f.ty(p.var);
        if a.dtype != ty.dtype {
            return Err(ArgError {
                param: Some(i),
                message: format!("argument `{name}` must be {}, got {}", ty.dtype, a.dtype),
            });
        }
        if a.shape.len() != ty.rank() {
            return Err(ArgError {
                param: Some(i),
                message: format!(
                    "argument `{name}` must be {}, got a value of rank {}",
                    describe_rank(ty),
                    a.shape.len()
                ),
            });
        }
        for (d, &n) in ty.shape.iter().zip(&a.shape) {
            match d {
                Dim::Lit(k) if *k != n as u64 => {
                    return Err(ArgError {
                        param: Some(i),
                        message: format!("argument `{name}` must have length {k}, got {n}"),
                    });
                }
                Dim::Lit(_) => {}
                Dim::Param(p) => match dims.get(p) {
                    Some(&k) if k != n as u64 => {
                        let other = bound_by[p];
                        return Err(ArgError {
                            param: Some(i),
                            message: format!(
                                "argument `{name}` has length {n}, but `{p}` = {k} from argument `{}`",
                                f.var_name(f.params[other].var)
                            ),
                        });
                    }
                    Some(_) => {}
                    None => {
                        dims.insert(p.clone(), n as u64);
                        bound_by.insert(p.clone(), i);
                    }
                },
            }
        }
    }
    for p in &f.size_params {
        if !dims.contains_key(p) {
            // A size parameter no argument mentions: only outputs use it.
            return Err(ArgError {
                param: None,
                message: format!(
                    "size parameter `{p}` of `{}` is not bound by any argument",
                    f.name
                ),
            });
        }
    }
    Ok(dims)
}

fn describe_rank(t: &Type) -> String {
    if t.is_scalar() {
        format!("a {} scalar", t.dtype)
    } else {
        format!("{t}")
    }
}

/// Concrete shape of a type under bound size parameters.
pub fn concrete_shape(t: &Type, dims: &Dims) -> Vec<usize> {
    t.shape
        .iter()
        .map(|d| match d {
            Dim::Lit(k) => *k as usize,
            Dim::Param(p) => dims.get(p).copied().unwrap_or(0) as usize,
        })
        .collect()
}

/// Run `f` on `args`.
pub fn run(f: &Function, args: &[&Value]) -> Result<Vec<Value>, ArgError> {
    let dims = bind_args(f, args)?;
    let mut env: Vec<Option<Value>> = vec![None; f.vars.len()];
    for (p, a) in f.params.iter().zip(args) {
        env[p.var.index()] = Some((*a).clone());
    }
    for s in &f.stmts {
        let ty = f.ty(s.var);
        let shape = concrete_shape(ty, &dims);
        let vals: Vec<&Value> = s
            .args
            .iter()
            .map(|a| {
                env[a.index()]
                    .as_ref()
                    .expect("validated IR: defined before use")
            })
            .collect();
        let v = s.op.eval(&vals, ty.dtype, &shape);
        env[s.var.index()] = Some(v);
    }
    Ok(f.rets
        .iter()
        .map(|r| {
            env[r.index()]
                .clone()
                .expect("validated IR: returns are defined")
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lang::ir::parse_functions;
    use crate::lang::types::DType;

    #[test]
    fn runs_the_seed_loss() {
        let f = &parse_functions(
            "fn loss[N](%w: f32[N], %x: f32[N], %y: f32) -> f32 {
  %0: f32[N] = mul %w %x
  %pred: f32 = sum %0
  %err: f32 = sub %pred %y
  %1: f32 = mul %err %err
  ret %1
}",
        )
        .unwrap()[0];
        let w = Value::f32(&[1.0, 2.0, 3.0]);
        let x = Value::f32(&[4.0, 5.0, 6.0]);
        let y = Value::scalar(DType::F32, 0.5);
        let out = run(f, &[&w, &x, &y]).unwrap();
        assert_eq!(out[0].as_scalar(), 31.5 * 31.5);
        let short = Value::f32(&[4.0, 5.0]);
        let e = run(f, &[&w, &short, &y]).unwrap_err();
        assert_eq!(e.param, Some(1));
        assert!(e.message.contains("`N` = 3 from argument `w`"), "{e}");
    }
}
