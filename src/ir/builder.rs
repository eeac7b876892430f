//! Building a function statement by statement: unique variable names,
//! every statement's type checked as it is pushed.

use super::{CustomRule, Function, IrError, Loop, Param, Stmt, VarId, VarInfo};
use crate::error::span::Span;
use crate::ops::{Lit, Op, OpTypeError};
use crate::types::{DType, Type};
use smallvec::SmallVec;
use std::collections::{HashMap, HashSet};

/// Builds a function, keeping variable names unique and checking types.
#[derive(Debug)]
pub struct Builder {
    pub(super) f: Function,
    used: HashSet<String>,
    next_tmp: usize,
    /// Per hint, a `k` below which every `hint.k` is taken: where the
    /// search for a free one starts (from 1 each time, a value used as
    /// often as a program is long was named in quadratic time).
    next_suffix: HashMap<String, usize>,
    /// With [`Builder::record_origins`]: how each variable was named.
    origins: Option<Vec<Origin>>,
}

/// How a variable was named, so that a function can be built again with
/// the same names (the checker's calls kept as calls, inlined later).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The hint [`Builder::fresh`] was given, or with `numbered` the hint
    /// before the checker numbered it (`pred` for `pred.2`).
    pub hint: String,
    /// Whether the checker numbered the hint.
    pub numbered: bool,
}

impl Builder {
    pub fn new(name: impl Into<String>, size_params: Vec<String>) -> Builder {
        Builder {
            f: Function {
                name: name.into(),
                size_params,
                params: Vec::new(),
                vars: Vec::new(),
                stmts: Vec::new(),
                rets: Vec::new(),
                loops: Vec::new(),
                rules: Vec::new(),
            },
            used: HashSet::new(),
            next_tmp: 0,
            next_suffix: HashMap::new(),
            origins: None,
        }
    }

    /// Record from now on how each new variable is named
    /// ([`Builder::origins`]).
    pub fn record_origins(&mut self) {
        self.origins.get_or_insert_with(Vec::new);
    }

    /// How each variable made since [`Builder::record_origins`] was named,
    /// if recording.
    pub fn origins(&self) -> Option<&[Origin]> {
        self.origins.as_deref()
    }

    /// The last variable made was named from `hint` numbered by the
    /// caller (recorded only).
    pub fn note_numbered(&mut self, hint: &str) {
        if let Some(o) = self.origins.as_mut().and_then(|o| o.last_mut()) {
            o.hint = hint.to_string();
            o.numbered = true;
        }
    }

    /// A fresh variable; `hint` is a source name (made unique with `.k`) or
    /// empty for a numbered temporary.
    pub fn fresh(&mut self, hint: &str, ty: Type) -> VarId {
        let name = if hint.is_empty() {
            loop {
                let n = self.next_tmp.to_string();
                self.next_tmp += 1;
                if !self.used.contains(&n) {
                    break n;
                }
            }
        } else if !self.used.contains(hint) {
            hint.to_string()
        } else {
            let next = self.next_suffix.entry(hint.to_string()).or_insert(1);
            loop {
                let n = format!("{hint}.{next}");
                *next += 1;
                if !self.used.contains(&n) {
                    break n;
                }
            }
        };
        self.used.insert(name.clone());
        if let Some(o) = &mut self.origins {
            o.push(Origin {
                hint: hint.to_string(),
                numbered: false,
            });
        }
        let id = VarId(self.f.vars.len() as u32);
        self.f.vars.push(VarInfo { name, ty });
        id
    }

    pub fn param(&mut self, name: &str, ty: Type, span: Span) -> VarId {
        let v = self.fresh(name, ty);
        self.f.params.push(Param { var: v, span });
        v
    }

    pub fn ty(&self, v: VarId) -> &Type {
        self.f.ty(v)
    }

    /// Append `op(args)`; the result type comes from the op's type rule
    /// (`annot` for ops that need one).
    pub fn push(
        &mut self,
        hint: &str,
        op: Op,
        args: &[VarId],
        annot: Option<&Type>,
    ) -> Result<VarId, OpTypeError> {
        let tys: Vec<&Type> = args.iter().map(|a| self.f.ty(*a)).collect();
        let ty = op.result_type(&tys, annot)?;
        let v = self.fresh(hint, ty);
        self.f.stmts.push(Stmt {
            var: v,
            op,
            args: args.iter().copied().collect(),
        });
        Ok(v)
    }

    /// A statement of known result type `ty` (copied from a function
    /// already checked), not typed again.
    pub fn push_typed(&mut self, hint: &str, op: Op, args: &[VarId], ty: Type) -> VarId {
        let v = self.fresh(hint, ty);
        self.f.stmts.push(Stmt {
            var: v,
            op,
            args: args.iter().copied().collect(),
        });
        v
    }

    /// A scalar literal of the given dtype.
    pub fn constant(&mut self, dtype: DType, x: f64) -> VarId {
        let lit = Lit::new(dtype, x);
        let v = self.fresh("", Type::scalar(dtype));
        self.f.stmts.push(Stmt {
            var: v,
            op: Op::Const(lit),
            args: SmallVec::new(),
        });
        v
    }

    /// `v` as a value of type `to`: itself, or a broadcast of a scalar.
    pub fn broadcast_to(&mut self, v: VarId, to: &Type) -> Result<VarId, OpTypeError> {
        if self.ty(v) == to {
            return Ok(v);
        }
        self.push("", Op::Bcast, &[v], Some(to))
    }

    /// Add a loop; its number for `loop`, `looptape` and `loopvjp`.
    pub fn add_loop(&mut self, l: Loop) -> u32 {
        self.f.loops.push(l);
        (self.f.loops.len() - 1) as u32
    }

    /// Take over `f`'s loops and rules (for a pass that copies `f`'s
    /// statements).
    pub fn copy_loops(&mut self, f: &Function) {
        self.f.loops = f.loops.clone();
        self.f.rules = f.rules.clone();
    }

    /// Add a custom rule; its number for `custom`.
    pub fn add_rule(&mut self, r: CustomRule) -> u32 {
        self.f.rules.push(r);
        (self.f.rules.len() - 1) as u32
    }

    /// Values of one type as the rows of `packed` (`T[K, ...]`), or the value
    /// itself when there is one (how a loop carries several values), every
    /// bit kept ([`Self::place`]).
    pub fn pack_rows(&mut self, vs: &[VarId], packed: &Type) -> Result<VarId, OpTypeError> {
        if vs.len() == 1 {
            return Ok(vs[0]);
        }
        let mut acc: Option<VarId> = None;
        for (i, v) in vs.iter().enumerate() {
            let row = self.place(Op::Unindex(i as u64), *v, packed)?;
            acc = Some(match acc {
                None => row,
                Some(a) => self.push("", Op::Add, &[a, row], None)?,
            });
        }
        acc.ok_or(OpTypeError::PackNothing)
    }

    /// Append `f`'s statements applied to `args` (one per parameter), its
    /// loops joining this function's; returns `f`'s results. `f` must be
    /// over this function's size parameters.
    pub fn inline(&mut self, f: &Function, args: &[VarId]) -> Result<Vec<VarId>, IrError> {
        self.inline_replacing(f, args, &[])
    }

    /// [`Self::inline`], with the values of `f`'s statements named in
    /// `known` (`(f's variable, this function's)`) taken as given instead of
    /// computed: a value the caller already has.
    pub fn inline_replacing(
        &mut self,
        f: &Function,
        args: &[VarId],
        known: &[(VarId, VarId)],
    ) -> Result<Vec<VarId>, IrError> {
        let offset = self.f.loops.len() as u32;
        self.f.loops.extend(f.loops.iter().cloned());
        let rule_offset = self.f.rules.len() as u32;
        self.f.rules.extend(f.rules.iter().cloned());
        let mut map: Vec<Option<VarId>> = vec![None; f.vars.len()];
        for (p, a) in f.params.iter().zip(args) {
            map[p.var.index()] = Some(*a);
        }
        let get = |map: &[Option<VarId>], v: VarId| {
            map[v.index()].ok_or_else(|| IrError::InlineUseBeforeDef {
                function: f.name.clone(),
            })
        };
        for s in &f.stmts {
            if let Some(&(_, v)) = known.iter().find(|(k, _)| *k == s.var) {
                map[s.var.index()] = Some(v);
                continue;
            }
            let xs: Vec<VarId> = s
                .args
                .iter()
                .map(|a| get(&map, *a))
                .collect::<Result<_, _>>()?;
            let op = s.op.map_loop(|l| l + offset).map_rule(|r| r + rule_offset);
            let name = f.var_name(s.var);
            let hint = if name.chars().all(|c| c.is_ascii_digit() || c == '.') {
                ""
            } else {
                name
            };
            let v = self.push(hint, op, &xs, Some(f.ty(s.var)))?;
            map[s.var.index()] = Some(v);
        }
        f.rets.iter().map(|r| get(&map, *r)).collect()
    }

    /// Drop the rules numbered `from` on (a lowering attempt given up).
    pub fn truncate_rules(&mut self, from: usize) {
        self.f.rules.truncate(from);
    }

    /// Remove and return the loops numbered `from` on (to move them into a
    /// loop body being built).
    pub fn take_loops(&mut self, from: usize) -> Vec<Loop> {
        self.f.loops.split_off(from)
    }

    /// A mutable loop (to attach its VJP).
    pub fn loop_mut(&mut self, l: usize) -> &mut Loop {
        &mut self.f.loops[l]
    }

    /// Drop statements from `stmts` on and variables from `vars` on (a
    /// lowering attempt given up); the names become free again.
    pub fn truncate(&mut self, stmts: usize, vars: usize) {
        self.f.stmts.truncate(stmts);
        if let Some(o) = &mut self.origins {
            o.truncate(vars);
        }
        for v in self.f.vars.drain(vars..) {
            // `hint.k` is free again: the next search for one starts there.
            if let Some((hint, k)) = v.name.rsplit_once('.') {
                if let (Some(next), Ok(k)) = (self.next_suffix.get_mut(hint), k.parse()) {
                    *next = (*next).min(k);
                }
            }
            self.used.remove(&v.name);
        }
    }

    pub fn finish(mut self, rets: Vec<VarId>) -> Function {
        self.f.rets = rets;
        self.f
    }

    pub fn function(&self) -> &Function {
        &self.f
    }
}
