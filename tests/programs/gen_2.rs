//! Random programs: the generator's expressions (part 2 of 7). See `mod.rs`.

#[allow(unused_imports)]
use super::*;

impl<'r> Gen<'r> {
    /// `scan(xs, init, (q, e) => step)` of type `ty` (not a matrix): a loop
    /// over the rows of a sequence that no derivative takes (a parameter of
    /// `seqs`, sometimes transposed, reversed or mapped), with a scalar, a
    /// vector (summed for a scalar) or a tuple state. With literal sizes,
    /// sometimes an unrolled scan instead (`unrolled_scan`).
    pub(crate) fn scan_expr(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        if !self.scan_ok() || matches!(ty, Ty::Mt(..)) {
            return None;
        }
        // In a loop's step, a sequence the loop carries along its state.
        let vis = self.visible();
        let seqs: Vec<(String, Ty)> = self
            .seqs
            .iter()
            .filter(|(nm, t)| {
                vis.iter()
                    .any(|&i| self.env[i].name == *nm && self.env[i].ty == *t)
            })
            .cloned()
            .collect();
        if self.lit.is_some() && (seqs.is_empty() || self.rng.chance(0.3)) {
            return self.unrolled_scan(ty, d);
        }
        if seqs.is_empty() {
            return None;
        }
        let (name, mut sty) = self.rng.pick(&seqs);
        self.mark_used(&name);
        let mut seq = name.clone();
        if let Ty::Mt(r, c) = sty {
            if self.rng.chance(0.3) {
                seq = format!("transpose({seq})");
                sty = Ty::Mt(c, r);
            }
        }
        let reversed = self.rng.chance(0.2);
        let rotated = !reversed && sty.lead() == Some(D::N) && self.rng.chance(0.15);
        seq = match self.rng.below(5) {
            _ if reversed => format!("reverse({seq})"),
            // Rotated by one row: `concat` of its rows 1.. and row 0.
            _ if rotated => {
                let i = self.fresh("i");
                format!(
                    "concat(tabulate[{}]({i} => {seq}[{i} + 1]), tabulate[1]({i} => {seq}[{i}]))",
                    self.dim(D::N1)
                )
            }
            0 => format!("tanh({seq} * 2)"),
            1 => format!("sin({seq})"),
            _ => seq,
        };
        let row = sty.row()?;
        let vectors: Vec<Ty> = self
            .avail()
            .into_iter()
            .filter(|t| matches!(t, Ty::V(_)))
            .collect();
        let comps: Vec<Ty> = match ty {
            Ty::S => match self.rng.below(4) {
                0 if !vectors.is_empty() => vec![self.rng.pick(&vectors)],
                1 if !vectors.is_empty() => vec![self.rng.pick(&vectors), Ty::S],
                2 => vec![Ty::S, Ty::S],
                _ => vec![Ty::S],
            },
            Ty::V(_) => match self.rng.below(4) {
                0 => vec![ty, Ty::S],
                1 => vec![ty, ty],
                _ => vec![ty],
            },
            Ty::Mt(..) => return None,
        };
        let steps = sty.lead().map_or(1.0, dim_max);
        let (text, bounds, vars, read) = self.scan_of(&seq, row, true, &comps, steps, true, d);
        tag("scan (a loop over a sequence)", &text);
        tag(
            if row == Ty::S {
                "scan: over a vector"
            } else {
                "scan: over a matrix"
            },
            &text,
        );
        tag(
            match (comps.len(), comps[0]) {
                (1, Ty::S) => "scan: scalar state",
                (1, _) => "scan: vector state",
                _ => "scan: tuple state",
            },
            &text,
        );
        if read {
            tag("scan: reads values from outside", &text);
        }
        if reversed {
            tag("scan: reversed sequence", &text);
        }
        if rotated {
            tag("scan: sequence made by concat", &text);
        }
        if self.in_long > 0 {
            tag("scan: inside a loop's step", &text);
        }
        Some(self.untuple(text, &comps, &bounds, &vars, ty))
    }

    /// A `scan` whose state no loop can carry (two vectors of different
    /// lengths), over a sequence of integer length (literal sizes): egrad
    /// unrolls it, and then differentiates with respect to the sequence
    /// too, so the sequence is any value (often of differentiated
    /// parameters) and the step reads anything in scope.
    pub(crate) fn unrolled_scan(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        let avail = self.avail();
        let arrays: Vec<Ty> = avail.iter().copied().filter(|t| t.is_array()).collect();
        let vectors: Vec<Ty> = avail
            .iter()
            .copied()
            .filter(|t| matches!(t, Ty::V(_)))
            .collect();
        let other = |g: &Self, a: Ty| -> Vec<Ty> {
            vectors
                .iter()
                .copied()
                .filter(|&b| match (a, b) {
                    (Ty::V(x), Ty::V(y)) => g.known_len(x) != g.known_len(y),
                    _ => false,
                })
                .collect()
        };
        let comps = match ty {
            Ty::S => {
                let firsts: Vec<Ty> = vectors
                    .iter()
                    .copied()
                    .filter(|&a| !other(self, a).is_empty())
                    .collect();
                if firsts.is_empty() {
                    return None;
                }
                let a = self.rng.pick(&firsts);
                let b = self.rng.pick(&other(self, a));
                vec![a, b]
            }
            Ty::V(_) => {
                let bs = other(self, ty);
                if bs.is_empty() {
                    return None;
                }
                vec![ty, self.rng.pick(&bs)]
            }
            Ty::Mt(..) => return None,
        };
        if arrays.is_empty() {
            return None;
        }
        let sty = self.rng.pick(&arrays);
        let seq = self.gen(sty, d.min(2));
        let seq = self.fit(seq, 1.0);
        let row = sty.row()?;
        let steps = sty.lead().map_or(1.0, dim_max);
        let (text, bounds, vars, _) = self.scan_of(&seq.s, row, seq.var, &comps, steps, false, d);
        tag("scan: unrolled (a state of mixed shapes)", &text);
        Some(self.untuple(text, &comps, &bounds, &vars, ty))
    }

    /// The text of `scan(seq, init, (q, e) => step)` over a sequence of at
    /// most `steps` rows of type `row` (generically distinct elements if
    /// `row_var`), with state components `comps` (a
    /// tuple if more than one, taken apart with `let (a, b) = q` in the
    /// step): the text, each component's bound and `var`, and whether the
    /// step reads values from outside. Where the scan is a loop (`carry`)
    /// the step reads only what a loop carries along its state (see
    /// `enter_step`). Each component relaxes towards a generated value or
    /// drifts by at most h a step, as in `loop_of`; a step that does not
    /// read its row is made to.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn scan_of(
        &mut self,
        seq: &str,
        row: Ty,
        row_var: bool,
        comps: &[Ty],
        steps: f64,
        carry: bool,
        d: u32,
    ) -> (String, Vec<f64>, Vec<bool>, bool) {
        let mut inits = Vec::new();
        for &t in comps {
            let mut e = self.gen(t, d);
            if e.k {
                let s = self.dynamic_scalar();
                e = Ex::of(format!("({} + {})", e.s, s.s), e.b + s.b, e.var, &[&e, &s]);
            }
            inits.push(e);
        }
        let h = self.rng.pick(&[0.25, 0.5, 0.75]);
        let forms: Vec<usize> = comps.iter().map(|_| self.rng.below(3)).collect();
        let bounds: Vec<f64> = inits
            .iter()
            .zip(&forms)
            .map(|(e, &f)| {
                if f == 2 {
                    e.b + h * steps
                } else {
                    e.b.max(1.0)
                }
            })
            .collect();
        let leaf = comps
            .iter()
            .copied()
            .find(|t| t.is_array())
            .unwrap_or(Ty::S);
        let saved = carry.then(|| self.enter_step(leaf, false));
        let mark = self.env.len();
        let q = self.fresh("q");
        let names: Vec<String> = if comps.len() == 1 {
            vec![q.clone()]
        } else {
            comps.iter().map(|_| self.fresh("q")).collect()
        };
        for (k, name) in names.iter().enumerate() {
            let e = Ex::leaf(name.clone(), bounds[k], inits[k].var);
            self.push_var(name, &e, comps[k]);
        }
        let e = self.fresh("e");
        self.push_var(
            &e,
            &Ex::leaf(e.clone(), 1.0, row_var && row.is_array()),
            row,
        );
        let row_at = self.env.len() - 1;
        self.in_long += 1;
        let mut fs: Vec<Ex> = Vec::new();
        for &t in comps {
            let dd = self.rng.range(1, 3) as u32;
            fs.push(self.gen(t, dd));
        }
        self.in_long -= 1;
        if !self.env[row_at].used {
            let f = &fs[0];
            let (text, b) = match (comps[0], row) {
                (Ty::V(a), Ty::V(c)) if a == c => (format!("({} .* {e})", f.s), f.b),
                (_, Ty::V(c)) => (format!("({} + +/{e})", f.s), f.b + dim_max(c)),
                _ => (format!("({} + {e})", f.s), f.b + 1.0),
            };
            fs[0] = Ex::of(text, b, f.var, &[f]);
        }
        let mut steps = Vec::new();
        let mut vars = Vec::new();
        for (k, f) in fs.into_iter().enumerate() {
            let q = &names[k];
            vars.push(inits[k].var && f.var);
            let text = match forms[k] {
                0 => {
                    let f = self.fit(f, bounds[k]);
                    format!("({q} + {h} * ({} - {q}))", f.s)
                }
                1 => {
                    let f = self.fit(f, bounds[k]);
                    format!("({q} - {h} * ({q} - {}))", f.s)
                }
                _ => format!("({q} + {h} * tanh({}))", f.s),
            };
            steps.push(text);
        }
        self.env.truncate(mark);
        let read = match saved {
            Some((saved, keep)) => !self.leave_step(saved, keep).is_empty(),
            None => false,
        };
        let text = if comps.len() == 1 {
            format!("scan({seq}, {}, ({q}, {e}) => {})", inits[0].s, steps[0])
        } else {
            let inits: Vec<&str> = inits.iter().map(|e| e.s.as_str()).collect();
            format!(
                "scan({seq}, ({}), ({q}, {e}) => {{ let ({}) = {q}; ({}) }})",
                inits.join(", "),
                names.join(", "),
                steps.join(", ")
            )
        };
        (text, bounds, vars, read)
    }

    /// The value of type `ty` of a scan (or loop) `text` whose state has the
    /// components `comps`: itself (summed for a scalar), or for a tuple
    /// one component or two combined.
    pub(crate) fn untuple(
        &mut self,
        text: String,
        comps: &[Ty],
        bounds: &[f64],
        vars: &[bool],
        ty: Ty,
    ) -> Ex {
        // A component as a value of type `ty` (a vector summed for a scalar).
        let as_ty = |name: &str, k: usize| -> (String, f64, bool) {
            if ty == Ty::S && comps[k] != Ty::S {
                (format!("(+/{name})"), comps[k].len_max() * bounds[k], false)
            } else {
                (name.to_string(), bounds[k], vars[k])
            }
        };
        let e = if comps.len() == 1 {
            let (s, b, var) = as_ty(&text, 0);
            Ex::leaf(s, b, var)
        } else {
            let names: Vec<String> = comps.iter().map(|_| self.fresh("t")).collect();
            let (a, b) = (as_ty(&names[0], 0), as_ty(&names[1], 1));
            // For a vector, the second component is a scalar or a vector of
            // its type (or, unrolled, another length: not alone, not combined).
            let second_ok = ty == Ty::S || comps[1] == ty;
            let combine = ty == Ty::S || comps[1] == ty || comps[1] == Ty::S;
            let (combo, bound, var) = match self.rng.below(4) {
                1 if second_ok => b,
                2 if combine => (format!("({} + {})", a.0, b.0), a.1 + b.1, a.2 || b.2),
                3 if combine => (format!("({} * {})", a.0, b.0), a.1 * b.1, false),
                _ => a,
            };
            Ex::leaf(
                format!("({{ let ({}) = {text}; {combo} }})", names.join(", ")),
                bound,
                var,
            )
        };
        e.not_ts()
    }

    /// Two operands, the second regenerated if it is the same text.
    pub(crate) fn distinct(&mut self, ta: Ty, tb: Ty, d: u32) -> (Ex, Ex) {
        let a = self.gen(ta, d);
        let mut b = self.gen(tb, d);
        for _ in 0..4 {
            if b.s != a.s {
                break;
            }
            b = self.gen(tb, d);
        }
        if b.s == a.s {
            b = Ex::lit(0.75);
        }
        (a, b)
    }

    /// Operand types for an element-wise op giving `ty`: (left, right).
    pub(crate) fn operand_types(&mut self, ty: Ty, rows: bool) -> (Ty, Ty) {
        let other = match ty {
            Ty::S => Ty::S,
            Ty::V(_) => {
                if self.rng.chance(0.3) {
                    Ty::S
                } else {
                    ty
                }
            }
            Ty::Mt(_, c) => {
                let r = self.rng.below(10);
                if r < 3 {
                    Ty::S
                } else if r < 5 && rows && self.avail().contains(&Ty::V(c)) {
                    Ty::V(c)
                } else {
                    ty
                }
            }
        };
        if self.rng.chance(0.5) {
            (ty, other)
        } else {
            (other, ty)
        }
    }

    pub(crate) fn binary(&mut self, ty: Ty, d: u32) -> Ex {
        let (ta, tb) = self.operand_types(ty, true);
        let row_bcast = ta != tb && ta != Ty::S && tb != Ty::S;
        let var_of = |a: &Ex, _: Ty, b: &Ex, _: Ty| a.var || b.var;
        let r = self.rng.below(10);
        let mut e = if r < 7 {
            let (a, b) = self.distinct(ta, tb, d);
            let arrays = ta.is_array() && tb.is_array();
            let (op, bound) = match self.rng.below(4) {
                0 => ("+", a.b + b.b),
                1 => ("-", a.b + b.b),
                _ => (
                    if arrays && self.rng.chance(0.5) {
                        ".*"
                    } else {
                        "*"
                    },
                    a.b * b.b,
                ),
            };
            let var = var_of(&a, ta, &b, tb);
            Ex::of(format!("({} {op} {})", a.s, b.s), bound, var, &[&a, &b])
        } else {
            // A division by something provably away from zero.
            let (a, b) = self.distinct(ta, tb, d);
            let slash = if self.rng.chance(0.3) { "./" } else { "/" };
            let den = match self.rng.below(4) {
                0 => format!("(1 + {b} * {b})", b = b.s),
                1 => format!("(2 + sin({}))", b.s),
                2 => format!("(1.5 + tanh({}))", b.s),
                _ => format!("sqrt(1 + {b} * {b})", b = b.s),
            };
            let var = var_of(&a, ta, &b, tb);
            let bound = a.b * 2.0;
            Ex::of(format!("({} {slash} {den})", a.s), bound, var, &[&a, &b])
        };
        if row_bcast {
            e.ts = false;
        }
        e
    }

    pub(crate) fn math(&mut self, ty: Ty, d: u32) -> Ex {
        let a = self.gen(ty, d);
        let v = a.var;
        let s = &a.s;
        let (text, b) = match self.rng.below(14) {
            0 => (format!("(-{s})"), a.b),
            1 => (format!("tanh({s})"), a.b.min(1.0)),
            2 => (format!("sin({s})"), 1.0),
            3 => (format!("cos({s})"), 1.0),
            4 => (format!("exp(tanh({s}))"), std::f64::consts::E),
            5 => (format!("exp({s} * 0.25)"), (a.b * 0.25).exp()),
            6 => (format!("log(1 + {s} * {s})"), (1.0 + a.b * a.b).ln()),
            7 => (format!("sqrt(1 + {s} * {s})"), (1.0 + a.b * a.b).sqrt()),
            8 => (format!("log1p({s} * {s})"), (1.0 + a.b * a.b).ln()),
            9 => (format!("expm1(tanh({s}))"), 1.72),
            10 => {
                let a2 = self.fit(a.clone(), 3.0);
                let s2 = &a2.s;
                return Ex::of(
                    format!("pow(1 + {s2} * {s2}, 1.5)"),
                    (1.0 + a2.b * a2.b).powf(1.5),
                    v,
                    &[&a2],
                );
            }
            11 => (format!("abs({s})"), a.b),
            12 => (format!("tan(tanh({s}) * 0.5)"), 0.55),
            _ => (format!("sqrt(exp(tanh({s})))"), 1.65),
        };
        Ex::of(text, b, v, &[&a])
    }

    pub(crate) fn maxmin(&mut self, ty: Ty, d: u32) -> Ex {
        let f = if self.rng.chance(0.5) { "max" } else { "min" };
        let (ta, tb) = self.operand_types(ty, false);
        let (a, b) = if self.rng.chance(0.2) {
            let a = self.gen(ty, d);
            (a, Ex::lit(self.rng.pick(LITS)))
        } else {
            self.distinct(ta, tb, d)
        };
        let (a, b) = if self.rng.chance(0.5) { (a, b) } else { (b, a) };
        let arrays_var = |e: &Ex| e.var && !e.k && e.s.parse::<f64>().is_err();
        let var = arrays_var(&a) && arrays_var(&b) && ta == tb;
        Ex::of(
            format!("{f}({}, {})", a.s, b.s),
            a.b.max(b.b),
            var,
            &[&a, &b],
        )
    }

    /// A dynamic condition of shape `shape` (S or the array type).
    pub(crate) fn cond(&mut self, shape: Ty, d: u32) -> Cond {
        let r = self.rng.below(10);
        if r < 3 {
            let d = d.saturating_sub(1);
            let a = self.cond(shape, d);
            let b_shape = if shape != Ty::S && self.rng.chance(0.3) {
                Ty::S
            } else {
                shape
            };
            let b = self.cond(b_shape, d);
            let op = if self.rng.chance(0.5) { "&&" } else { "||" };
            return Cond {
                s: format!("({} {op} {})", a.s, b.s),
                tab: a.tab || b.tab,
                ts: a.ts && b.ts,
            };
        }
        if r == 3 {
            let a = self.cond(shape, d.saturating_sub(1));
            return Cond {
                s: format!("!{}", a.s),
                ..a
            };
        }
        let (ta, tb) = if shape == Ty::S {
            (Ty::S, Ty::S)
        } else {
            self.operand_types(shape, false)
        };
        let dd = d.min(2);
        let (mut a, mut b) = self.distinct(ta, tb, dd);
        if a.k && b.k {
            // Make it dynamic.
            a = self.dynamic_scalar();
            if a.s == b.s {
                b = Ex::lit(0.125);
            }
        }
        let op = self.rng.pick(&["<", "<=", ">", ">=", "<", ">", "!="]);
        Cond {
            s: format!("({} {op} {})", a.s, b.s),
            tab: a.tab || b.tab,
            ts: a.ts && b.ts,
        }
    }

    /// A scalar that is not known at compile time.
    pub(crate) fn dynamic_scalar(&mut self) -> Ex {
        for _ in 0..20 {
            let e = self.leaf(Ty::S);
            if !e.k {
                return e;
            }
        }
        // Every context has an array or a scalar parameter.
        let vis = self.visible();
        for i in vis {
            let v = self.env[i].clone();
            if v.k {
                continue;
            }
            match v.ty {
                Ty::S => return self.use_var(i),
                Ty::V(_) | Ty::Mt(..) => {
                    self.env[i].used = true;
                    return Ex::leaf(format!("(+/{})", v.name), v.b * v.ty.len_max(), false)
                        .not_ts();
                }
            }
        }
        panic!("generator: no dynamic scalar");
    }

    pub(crate) fn if_expr(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        let cshape = if ty != Ty::S && self.rng.chance(0.5) {
            ty
        } else {
            Ty::S
        };
        let c = self.cond(cshape, d.min(2));
        // Branch kinds: 0 the result type, 1 a scalar, 2 a literal.
        let kind = |g: &mut Self| {
            if ty != Ty::S && g.rng.chance(0.3) {
                if g.rng.chance(0.4) {
                    2
                } else {
                    1
                }
            } else {
                0
            }
        };
        let (mut ka, kb) = (kind(self), kind(self));
        // With a scalar condition one branch must have the array type.
        if ty != Ty::S && cshape == Ty::S && ka != 0 && kb != 0 {
            ka = 0;
        }
        let branch = |g: &mut Self, k: u32| -> Ex {
            match k {
                0 => g.gen(ty, d),
                1 => g.gen(Ty::S, d),
                _ => Ex::lit(g.rng.pick(LITS)),
            }
        };
        let a = branch(self, ka);
        let b = branch(self, kb);
        let var = a.var && b.var && ka == 0 && kb == 0;
        let mut e = Ex::of(
            format!("(if {} {{ {} }} else {{ {} }})", c.s, a.s, b.s),
            a.b.max(b.b),
            var,
            &[&a, &b],
        );
        e.k = false;
        e.tab |= c.tab;
        e.ts &= c.ts;
        Some(e)
    }

    /// `if u > t { sqrt(u) } else { ... }`: the untaken branch is NaN.
    pub(crate) fn safe_branch(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        let a = self.gen(ty, d);
        if a.k {
            return None;
        }
        let u = self.fresh("u");
        let (f, thr, b) = if self.rng.chance(0.5) {
            ("sqrt", 0.25, a.b.sqrt().max(a.b * 0.5))
        } else {
            ("log", 0.5, a.b.ln().max(0.7).max(a.b * 0.5))
        };
        Some(Ex::of(
            format!(
                "({{ let {u} = {}; if {u} > {thr} {{ {f}({u}) }} else {{ {u} * 0.5 }} }})",
                a.s
            ),
            b,
            a.var,
            &[&a],
        ))
    }

    pub(crate) fn block(&mut self, ty: Ty, d: u32) -> Ex {
        let avail = self.avail();
        let t1 = if self.rng.chance(0.5) {
            ty
        } else {
            self.rng.pick(&avail)
        };
        let v = self.gen(t1, d);
        let name = self.fresh("u");
        let mark = self.env.len();
        self.push_var(&name, &v, t1);
        let body = self.gen(ty, d);
        // (`leaf` marks every name of the type it wants used, also when it
        // picks another leaf: a body `0.75` may seem to use the name, and
        // the block to depend on the index of a `tabulate` it is in. Read
        // from the text in the programs with run-time integers; the others
        // keep the programs they had.)
        let used = self.env[mark].used && (self.ints.is_empty() || body.s.contains(&name));
        self.env.truncate(mark);
        let mut e = Ex::of(
            format!("({{ let {name} = {}; {} }})", v.s, body.s),
            body.b,
            body.var,
            &[&v, &body],
        );
        if !used {
            e.tab = body.tab;
            e.k = body.k;
        } else {
            e.k = body.k && v.k;
        }
        e
    }

    /// A call of a helper whose (mapped) result type is `ty`.
    pub(crate) fn call(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        self.call_where(Some(ty), false, d).map(|r| r.0)
    }

    /// A call of some helper (a derivative one if `deriv` and there is
    /// one), and its type.
    pub(crate) fn call_any(&mut self, deriv: bool, d: u32) -> Option<(Ex, Ty)> {
        self.call_where(None, deriv, d)
    }

    pub(crate) fn call_where(&mut self, want: Option<Ty>, deriv: bool, d: u32) -> Option<(Ex, Ty)> {
        let avail = self.avail();
        let mut options = self.call_options(want, &avail);
        self.only_rt = false;
        self.only_helper = None;
        self.only_prim = false;
        if deriv && options.iter().any(|o| self.helpers[o.0].b.is_infinite()) {
            options.retain(|o| self.helpers[o.0].b.is_infinite());
        }
        if options.is_empty() {
            return None;
        }
        let (hi, tys, ty) = self.rng.pick(&options);
        let h = self.helpers[hi].clone();
        self.made_loop |= h.has_loop;
        self.made_prim |= h.prim;
        self.made_kernel |= h.kernel;
        let (mut args, mut parts) = self.call_args(&h, &tys, d);
        if h.generic && parts.iter().all(|a| a.k) {
            // `T` is inferred from a typed argument, not from numbers.
            if let Some(k) = h
                .params
                .iter()
                .position(|p| matches!(p, HParam::Dyn(Ty::S)))
            {
                let a = self.dynamic_scalar();
                args[k] = a.s.clone();
                parts.push(a);
            }
        }
        let refs: Vec<&Ex> = parts.iter().collect();
        let text = format!("{}({})", h.name, args.join(", "));
        if h.generic && self.m_name == "M" {
            tag("generic helper called from the loss", &text);
        }
        if h.params.iter().any(|p| matches!(p, HParam::Depth)) {
            tag("static recursion (called with a literal depth)", &text);
        }
        if h.params.iter().any(|p| matches!(p, HParam::Key)) {
            tag(KEY_TAGS[9], &text);
        }
        self.prim_tags(&h, &text);
        let mut e = Ex::of(text, h.b, false, &refs);
        e.ts &= h.ts;
        e.k = false;
        Some((self.bounded(e), ty))
    }

    /// The calls `call_where` may write: each helper (by index) that has
    /// one result, of type `want` if given, with the argument types it is
    /// called with (all in `avail`) and its result type, over every way of
    /// mapping its dimensions.
    fn call_options(&self, want: Option<Ty>, avail: &[Ty]) -> Vec<(usize, Vec<Ty>, Ty)> {
        let mut options = Vec::new();
        // A helper that runs a loop is not called inside `tabulate` (not
        // supported) or a loop's step (the loops' costs would multiply).
        let loop_ok = self.tab.is_none() && !self.no_tabulate && self.in_long == 0;
        for (hi, h) in self.helpers.iter().enumerate() {
            if h.rets.len() != 1 || (h.has_loop && !loop_ok) {
                continue;
            }
            if self.only_rt && !h.params.iter().any(|p| matches!(p, HParam::RunCount(_))) {
                continue;
            }
            // A user primitive is not written in the text of a `tabulate`
            // body (nor a helper calling one).
            if (h.prim && (self.tab.is_some() || self.no_tabulate)) || (self.only_prim && !h.prim) {
                continue;
            }
            if self.only_helper.as_ref().is_some_and(|n| *n != h.name) {
                continue;
            }
            // A helper taking `kind: i64[N]` is passed the loss's, outside
            // loops' steps (which read only what a loop carries).
            let kind = h.params.iter().any(|p| matches!(p, HParam::Kind));
            if kind && !(self.mparams.contains(&"kind") && self.in_long == 0) {
                continue;
            }
            for mn in ALL_DIMS {
                for mk in ALL_DIMS {
                    if h.uses_n1 && (mn != D::N || self.n_min < 2) {
                        continue;
                    }
                    if kind && mn != D::N {
                        continue;
                    }
                    let f = move |x: D| -> Option<D> {
                        match x {
                            D::N => Some(mn),
                            D::M => Some(mk),
                            D::N1 => (mn == D::N).then_some(D::N1),
                        }
                    };
                    let Some(rt) = h.rets[0].map(&f) else {
                        continue;
                    };
                    if want.is_some_and(|ty| rt != ty) || !avail.contains(&rt) {
                        continue;
                    }
                    let mut ok = true;
                    let mut tys = Vec::new();
                    for p in &h.params {
                        if let HParam::Dyn(t) = p {
                            match t.map(&f) {
                                Some(t) if avail.contains(&t) => tys.push(t),
                                _ => ok = false,
                            }
                        }
                    }
                    if ok {
                        options.push((hi, tys, rt));
                    }
                }
            }
        }
        options
    }

    /// The arguments of a call of the helper `h` whose dynamic parameters
    /// have the types `tys`: their texts, and the generated expressions
    /// among them.
    fn call_args(&mut self, h: &Helper, tys: &[Ty], d: u32) -> (Vec<String>, Vec<Ex>) {
        let mut args = Vec::new();
        let mut parts = Vec::new();
        let mut k = 0;
        for p in &h.params {
            match p {
                HParam::Dyn(_) => {
                    let t = tys[k];
                    k += 1;
                    let mut a = self.gen(t, d);
                    if (a.tab && !h.ts) || (h.needs_var && t.is_array() && !a.var) {
                        a = self.hoist(|g| g.gen(t, d));
                        if h.needs_var && t.is_array() && !a.var {
                            a = self.hoist(|g| g.leaf(t));
                        }
                    }
                    if a.b > LIMIT {
                        a = self.bounded(a);
                    }
                    args.push(a.s.clone());
                    parts.push(a);
                }
                HParam::StaticInt => {
                    let n = self.rng.below(4);
                    args.push(match self.rng.below(3) {
                        0 if n >= 1 => format!("{} + 1", n - 1),
                        1 if n >= 1 => format!("2 * {n} - {n}"),
                        _ => n.to_string(),
                    });
                }
                HParam::StaticReal => args.push(fmt_lit(self.rng.pick(LITS))),
                HParam::Depth => args.push(self.rng.range(1, 5).to_string()),
                // (Not `n` in a short `iterate`'s step or condition: with a
                // count of 0 the call is dropped, and the loss would not run
                // the loop of count `n` its text has.)
                HParam::RunCount(most) => match self.rt_count {
                    Some(_) if self.no_long == 0 && self.rng.chance(0.7) => args.push("n".into()),
                    _ => {
                        // A literal count, up to the count the helper's
                        // step size is made for.
                        let k = self.rng.pick(&[0, 1, 3, *most]);
                        tag(
                            "run-time count passed a literal",
                            &format!("{}({k}, ", h.name),
                        );
                        args.push(k.to_string());
                    }
                },
                HParam::StaticBool => args.push(
                    self.rng
                        .pick(&["true", "false", "1 < 2", "2.5 <= 1"])
                        .to_string(),
                ),
                HParam::Kind => {
                    tag(MATCH_TAGS[13], &format!("{}(kind, ", h.name));
                    args.push("kind".into());
                }
                HParam::Key => {
                    let k = self.key_text();
                    args.push(k);
                }
            }
        }
        (args, parts)
    }
}
