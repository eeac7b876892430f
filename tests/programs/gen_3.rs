//! Random programs: the generator's expressions (part 3 of 7). See `mod.rs`.

#[allow(unused_imports)]
use super::*;

impl<'r> Gen<'r> {
    /// `iterate(n, init, q => step)`.
    pub(crate) fn iterate(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        let mut init = self.gen(ty, d);
        if init.k {
            init = self.dynamic_scalar();
        }
        let count = match &self.static_count {
            Some(n) if self.rng.chance(0.7) => {
                if self.rng.chance(0.5) {
                    n.clone()
                } else {
                    format!("{n} + 1")
                }
            }
            _ => self.rng.below(4).to_string(),
        };
        let q = self.fresh("q");
        let in_tab = matches!(ty, Ty::Mt(..)) && self.no_tabulate;
        if in_tab {
            self.tab_states.push(q.clone());
        }
        let bound = init.b.max(1.0);
        let mark = self.env.len();
        let mut qe = init.clone();
        qe.b = bound;
        // Inside `tabulate` the state may depend on the index after a step.
        qe.tab |= self.tab.is_some();
        self.push_var(&q, &qe, ty);
        self.no_long += 1;
        let mut step = self.gen(ty, d);
        self.no_long -= 1;
        if !self.env[mark].used {
            let op = self.rng.pick(&["+", "-", "*"]);
            let b = if op == "*" {
                bound * step.b
            } else {
                bound * 0.5 + step.b
            };
            let k = if op == "*" { "" } else { " * 0.5" };
            step = Ex::of(format!("({q}{k} {op} {})", step.s), b, step.var, &[&step]);
            step.tab |= qe.tab;
        }
        self.env.truncate(mark);
        let step = self.fit(step, bound);
        // `iterate_until` selects between the state and its step.
        let until = self.rng.chance(0.3);
        if until {
            let qd = self.fresh("q");
            if in_tab {
                self.tab_states.push(qd.clone());
            }
            let mark = self.env.len();
            self.push_var(&qd, &qe, ty);
            let shape = if ty != Ty::S && self.rng.chance(0.3) {
                ty
            } else {
                Ty::S
            };
            self.no_long += 1;
            let c = self.cond(shape, 1);
            self.no_long -= 1;
            self.env.truncate(mark);
            let mut e = Ex::of(
                format!(
                    "iterate_until({count}, {}, {qd} => {}, {q} => {})",
                    init.s, c.s, step.s
                ),
                bound,
                false,
                &[&init, &step],
            );
            e.k = false;
            e.tab |= c.tab;
            e.ts &= c.ts;
            return Some(e);
        }
        let mut e = Ex::of(
            format!("iterate({count}, {}, {q} => {})", init.s, step.s),
            bound,
            init.var && step.var,
            &[&init, &step],
        );
        e.k = false;
        Some(e)
    }

    /// Whether a long `iterate` (a loop) may be written here: not in
    /// `tabulate` (it would be unrolled), not in a short `iterate`'s step,
    /// at most one loop inside another.
    pub(crate) fn long_ok(&self) -> bool {
        self.tab.is_none() && !self.no_tabulate && self.no_long == 0 && self.in_long <= 1
    }

    /// Enter a loop's step whose state has type `leaf`: the names in scope
    /// (in most steps only those a loop carries along its state: of the
    /// state's type, and scalars next to a vector state), as they are and
    /// unused. Returns the whole environment and the indices kept, for
    /// `leave_step`.
    pub(crate) fn enter_step(&mut self, leaf: Ty, wide_ok: bool) -> (Vec<Var>, Vec<usize>) {
        // Where `wide_ok`, three steps in ten read values of any type (the
        // loop's captures: a matrix or a vector of another length for a
        // vector state, any array for a scalar one); the others only what
        // fits the state's rows. (Not a scan's: its gradient with respect
        // to its sequence does not go through captures yet.)
        let wide = wide_ok && self.rng.chance(0.3);
        self.enter_step_reading(leaf, wide)
    }

    /// [`Self::enter_step`], reading values of any type where `wide`.
    pub(crate) fn enter_step_reading(&mut self, leaf: Ty, wide: bool) -> (Vec<Var>, Vec<usize>) {
        let mut keep: Vec<usize> = self
            .visible()
            .into_iter()
            .filter(|&i| {
                let t = self.env[i].ty;
                wide || t == leaf || (t == Ty::S && matches!(leaf, Ty::V(_)))
            })
            .collect();
        keep.sort_unstable();
        let saved = std::mem::take(&mut self.env);
        self.env = keep
            .iter()
            .map(|&i| Var {
                used: false,
                ..saved[i].clone()
            })
            .collect();
        (saved, keep)
    }

    /// Back from a loop's step: the names it read are used. Returns their
    /// types (what the loop reads from outside).
    pub(crate) fn leave_step(&mut self, mut saved: Vec<Var>, keep: Vec<usize>) -> Vec<Ty> {
        let mut read = Vec::new();
        for (j, &i) in keep.iter().enumerate() {
            if self.env[j].used {
                saved[i].used = true;
                read.push(saved[i].ty);
            }
        }
        self.env = saved;
        read
    }

    /// An expression of type `ty` (not a matrix) with a long `iterate` in it.
    pub(crate) fn with_loop(&mut self, ty: Ty, d: u32) -> Ex {
        let Some(l) = self.long_iterate(ty, d) else {
            return self.gen(ty, d);
        };
        if self.rng.chance(0.5) {
            return self.bounded(l);
        }
        let o = self.gen(ty, d.saturating_sub(1));
        let (op, b) = match self.rng.below(3) {
            0 => ("+", l.b + o.b),
            1 => ("-", l.b + o.b),
            _ => ("*", l.b * o.b),
        };
        let (a, c) = if self.rng.chance(0.5) {
            (&l, &o)
        } else {
            (&o, &l)
        };
        let e = Ex::of(
            format!("({} {op} {})", a.s, c.s),
            b,
            l.var || o.var,
            &[a, c],
        );
        self.bounded(e)
    }

    /// A long `iterate` of type `ty` (not a matrix), which egrad lowers to
    /// a loop: a scalar state, a tuple of scalars, a vector state (summed
    /// for a scalar), or a tuple of vectors; sometimes with a loop inside
    /// its step.
    pub(crate) fn long_iterate(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        if !self.long_ok() {
            return None;
        }
        if self.mixed_left > 0 {
            if let Some(e) = self.mixed_iterate(ty, d) {
                self.mixed_left -= 1;
                return Some(e);
            }
        }
        let vectors: Vec<Ty> = self
            .avail()
            .into_iter()
            .filter(|t| matches!(t, Ty::V(_)))
            .collect();
        let (leaf, comps, sum) = match ty {
            Ty::S => match self.rng.below(3) {
                0 if !vectors.is_empty() => {
                    let v = self.rng.pick(&vectors);
                    (v, if self.rng.chance(0.2) { 2 } else { 1 }, true)
                }
                1 => (Ty::S, self.rng.range(2, 4), false),
                _ => (Ty::S, 1, false),
            },
            Ty::V(_) => (ty, if self.rng.chance(0.25) { 2 } else { 1 }, false),
            Ty::Mt(..) => return None,
        };
        self.made_loop = true;
        let (text, bounds, vars) = self.loop_of(&vec![leaf; comps], d);
        let len = leaf.len_max();
        if comps == 1 {
            let e = if sum {
                Ex::leaf(format!("(+/{text})"), len * bounds[0], false)
            } else {
                Ex::leaf(text, bounds[0], vars[0])
            };
            return Some(e.not_ts());
        }
        // A tuple state: one component, or two combined.
        let names: Vec<String> = (0..comps).map(|_| self.fresh("t")).collect();
        let (i, j) = (self.rng.below(comps), self.rng.below(comps));
        let (mut combo, mut b, var) = match self.rng.below(3) {
            _ if i == j => (names[i].clone(), bounds[i], vars[i]),
            0 => (
                format!("({} + {})", names[i], names[j]),
                bounds[i] + bounds[j],
                vars[i] || vars[j],
            ),
            1 => (
                format!("({} - {})", names[i], names[j]),
                bounds[i] + bounds[j],
                vars[i] || vars[j],
            ),
            _ => (
                format!("({} * {})", names[i], names[j]),
                bounds[i] * bounds[j],
                false,
            ),
        };
        if sum {
            combo = format!("(+/{combo})");
            b *= len;
        }
        let text = format!("({{ let ({}) = {text}; {combo} }})", names.join(", "));
        Some(Ex::leaf(text, b, var && !sum).not_ts())
    }

    /// A long `iterate` of type `ty` (a scalar or a vector) whose state is
    /// a tuple of mixed shapes: a vector (`ty`, or one summed for a
    /// scalar), an array of another type (a matrix, a vector of another
    /// length), sometimes a scalar; its step reads anything in scope. Its
    /// value is the first component, sometimes plus another one (summed).
    /// None where no two array types are in scope.
    fn mixed_iterate(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        let arrays: Vec<Ty> = self.avail().into_iter().filter(|t| t.is_array()).collect();
        let first = match ty {
            Ty::V(_) => ty,
            Ty::S => {
                let vectors: Vec<Ty> = arrays
                    .iter()
                    .copied()
                    .filter(|t| matches!(t, Ty::V(_)))
                    .collect();
                if vectors.is_empty() {
                    return None;
                }
                self.rng.pick(&vectors)
            }
            Ty::Mt(..) => return None,
        };
        let seconds: Vec<Ty> = arrays.iter().copied().filter(|&t| t != first).collect();
        if seconds.is_empty() {
            return None;
        }
        let mut leaves = vec![first, self.rng.pick(&seconds)];
        if self.rng.chance(0.4) {
            leaves.push(Ty::S);
        }
        self.made_loop = true;
        let counter = self.rng.chance(0.5);
        self.counter_next = counter;
        let (text, bounds, vars) = self.loop_of(&leaves, d);
        let names: Vec<String> = leaves.iter().map(|_| self.fresh("t")).collect();
        // The counter's name in the pattern (unused after the loop).
        let mut pattern = names.clone();
        if counter {
            pattern.push(self.fresh("t"));
        }
        let summed = |k: usize| match leaves[k] {
            Ty::S => (names[k].clone(), bounds[k]),
            t => (format!("(+/{})", names[k]), bounds[k] * t.len_max()),
        };
        let (mut combo, mut b, mut var) = if ty == Ty::S {
            let (c, b) = summed(0);
            (c, b, false)
        } else {
            (names[0].clone(), bounds[0], vars[0])
        };
        if self.rng.chance(0.5) {
            let (c, bk) = summed(self.rng.range(1, leaves.len()));
            combo = format!("({combo} + {c})");
            b += bk;
            var = false;
        }
        let text = format!("({{ let ({}) = {text}; {combo} }})", pattern.join(", "));
        Some(Ex::leaf(text, b, var).not_ts())
    }

    /// `iterate(#C#, init, q => step)` with state components of the types
    /// `leaves` (a tuple if more than one): the text, each component's
    /// bound and `var`. The count and the step size are placeholders that
    /// `calibrate` fills in. Each component relaxes towards a generated
    /// value (`q + h * (f - q)` or `q - h * (q - f)`, bounded by the larger
    /// of the initial value and `f`) or drifts (`q + h * tanh(f)`, by at
    /// most count × h in all), so nothing blows up or vanishes. Where `f`
    /// is `q` a relaxing state stays exactly `q` (with `(1 - h) * q + h * f`
    /// rounding would break ties the step keeps, such as `q != v` with `q`
    /// starting at `v`, at some inputs and not at others).
    pub(crate) fn loop_of(&mut self, leaves: &[Ty], d: u32) -> (String, Vec<f64>, Vec<bool>) {
        let (leaf, comps) = (leaves[0], leaves.len());
        let mixed = leaves.iter().any(|&t| t != leaf);
        // An `i64` step counter after the components (mixed states only).
        let counter = std::mem::take(&mut self.counter_next) && mixed;
        let hc = self.rng.pick(&[0.5, 1.0, 2.0]);
        let nest = self.in_long == 0 && self.nest_left > 0;
        // count × step statements aimed at: above what egrad unrolls, and
        // lower with a loop in a loop (the costs multiply).
        let factor = if nest || self.in_long > 0 {
            self.rng.uniform(1.02, 1.1)
        } else {
            self.rng.uniform(1.2, 2.0)
        };
        // A run-time count (`n`): only a loop that is not inside a loop and
        // runs none itself (its cost is count × step for any count).
        let runtime = match self.rt_count {
            Some(c) if self.in_long == 0 && !nest && self.rng.chance(0.85) => Some(c),
            _ => None,
        };
        let id = LONGS.with(|l| {
            let mut l = l.borrow_mut();
            l.push(LongIt {
                hc,
                target: factor * UNROLL_STMTS as f64,
                runtime,
            });
            l.len() - 1
        });
        // The initial state, from anything in scope, not known at compile
        // time (a constant state would be unrolled step by step).
        let mut inits = Vec::new();
        for &t in leaves {
            let mut e = self.gen(t, d);
            if e.k {
                let s = self.dynamic_scalar();
                e = Ex::of(format!("({} + {})", e.s, s.s), e.b + s.b, e.var, &[&e, &s]);
            }
            inits.push(e);
        }
        let forms: Vec<usize> = (0..comps).map(|_| self.rng.below(3)).collect();
        let bounds: Vec<f64> = inits
            .iter()
            .zip(&forms)
            .map(|(e, &f)| if f == 2 { e.b + hc } else { e.b.max(1.0) })
            .collect();
        let names: Vec<String> = (0..comps).map(|_| self.fresh("q")).collect();
        let cname = if counter {
            self.fresh("q")
        } else {
            String::new()
        };
        // A state of mixed shapes: its step reads anything in scope.
        let (saved, keep) = if mixed {
            self.enter_step_reading(leaf, true)
        } else {
            self.enter_step(leaf, true)
        };
        for (k, name) in names.iter().enumerate() {
            let q = Ex::leaf(name.clone(), bounds[k], inits[k].var);
            self.push_var(name, &q, leaves[k]);
        }
        self.in_long += 1;
        if nest {
            self.nest_left -= 1;
        }
        if runtime.is_some() {
            self.no_long += 1;
        }
        let mut steps = Vec::new();
        let mut vars = Vec::new();
        for (k, q) in names.iter().enumerate() {
            let mut f = self.loop_step_value(leaves[k], nest, k == 0);
            if counter && k == 0 {
                // Scaled by a factor in [0.75, 1] the counter picks, so
                // the bound still holds.
                let s = format!("({} * (1.0 - 0.125 * f64({cname} % 3)))", f.s);
                f = Ex::of(s, f.b, f.var, &[&f]);
            }
            let text = match forms[k] {
                0 => {
                    f = self.fit(f, bounds[k]);
                    format!("({q} + #H{id}# * ({} - {q}))", f.s)
                }
                1 => {
                    f = self.fit(f, bounds[k]);
                    format!("({q} - #H{id}# * ({q} - {}))", f.s)
                }
                _ => format!("({q} + #H{id}# * tanh({}))", f.s),
            };
            vars.push(inits[k].var && f.var);
            steps.push(text);
        }
        self.in_long -= 1;
        if runtime.is_some() {
            self.no_long -= 1;
        }
        let read = self.leave_step(saved, keep);
        let count = if runtime.is_some() {
            "n".to_string()
        } else {
            format!("#C{id}#")
        };
        let text = if comps == 1 {
            format!(
                "iterate({count}, {}, {} => {})",
                inits[0].s, names[0], steps[0]
            )
        } else {
            let mut inits: Vec<&str> = inits.iter().map(|e| e.s.as_str()).collect();
            let mut names = names.clone();
            if counter {
                inits.push("i64(0)");
                steps.push(format!("({cname} + 1)"));
                names.push(cname.clone());
            }
            format!(
                "iterate({count}, ({}), ({}) => ({}))",
                inits.join(", "),
                names.join(", "),
                steps.join(", ")
            )
        };
        self.tag_loop(leaves, &text, &read, runtime.is_some());
        if counter {
            tag("loop: an i64 counter in a mixed state", &text);
        }
        (text, bounds, vars)
    }

    /// The value `f` a step of `loop_of` moves a component of type `leaf`
    /// towards (or drifts by): a generated expression, the mean of a few
    /// where loops nest, with a loop in it in the `first` component where
    /// `nest` (and sometimes a scan).
    fn loop_step_value(&mut self, leaf: Ty, nest: bool, first: bool) -> Ex {
        // Heavier steps where a loop is nested: fewer steps for the same
        // number of statements, which is what makes a loop.
        let dd = if self.in_long > 1 || nest {
            self.rng.range(2, 4)
        } else {
            self.rng.range(1, 3)
        } as u32;
        let inner = if nest && first {
            self.long_iterate(leaf, dd)
        } else {
            None
        };
        // Where loops nest, the mean of a few terms: a loop inside a
        // loop runs count × count steps, and the counts that make loops
        // are smaller for heavier steps.
        let terms = if self.in_long > 1 {
            self.rng.range(3, 5)
        } else if nest {
            self.rng.range(2, 4)
        } else {
            1
        };
        let mut parts: Vec<Ex> = inner.into_iter().collect();
        // Sometimes a scan in the step (programs with the newer
        // constructs only: no draw otherwise).
        if self.scan_left > 0 && self.scan_ok() && self.rng.chance(0.6) {
            if let Some(e) = self.scan_expr(leaf, dd) {
                self.scan_left -= 1;
                parts.push(e);
            }
        }
        while parts.len() < terms {
            let e = self.gen(leaf, dd);
            parts.push(e);
        }
        if parts.len() == 1 {
            parts.pop().unwrap()
        } else {
            let texts: Vec<&str> = parts.iter().map(|e| e.s.as_str()).collect();
            let b = parts.iter().map(|e| e.b).sum::<f64>() / parts.len() as f64;
            let var = parts.iter().any(|e| e.var);
            let refs: Vec<&Ex> = parts.iter().collect();
            Ex::of(
                format!("(({}) / {})", texts.join(" + "), parts.len()),
                b,
                var,
                &refs,
            )
        }
    }

    /// Tags the loop `text` of `loop_of` (components of the types
    /// `leaves`, reading values of the types `read` from outside; `runtime`
    /// if its count is the run-time `n`).
    fn tag_loop(&self, leaves: &[Ty], text: &str, read: &[Ty], runtime: bool) {
        tag("long iterate (a loop)", text);
        let leaf = leaves[0];
        tag(
            match (leaf, leaves.len()) {
                _ if leaves.iter().any(|&t| t != leaf) => "loop: tuple of mixed shapes",
                (Ty::S, 1) => "loop: scalar state",
                (Ty::S, _) => "loop: tuple of scalars",
                (_, 1) => "loop: vector state",
                _ => "loop: tuple of vectors",
            },
            text,
        );
        if !read.is_empty() {
            tag("loop: reads values from outside", text);
        }
        if leaf != Ty::S && read.contains(&Ty::S) {
            tag("loop: scalar read by a vector state", text);
        }
        if read
            .iter()
            .any(|&t| t != leaf && !(t == Ty::S && leaf != Ty::S))
        {
            tag("loop: reads values of other shapes (captures)", text);
        }
        if self.in_long > 0 {
            tag("loop: inside a loop's step", text);
        }
        if self.m_name == "K" {
            tag("loop: in a helper", text);
        }
        if runtime {
            tag("loop: run-time count", text);
        }
    }

    pub(crate) fn scalar_special(&mut self, d: u32) -> Option<Ex> {
        let avail: Vec<Ty> = self.avail().into_iter().filter(|t| t.is_array()).collect();
        let in_tab = self.tab.clone();
        match self.rng.below(8) {
            // Reductions.
            0..=2 => self.scalar_reduction(&avail, d),
            // A static index of a computed array.
            3 => {
                if avail.is_empty() {
                    return None;
                }
                self.hoist(|g| {
                    let t = g.rng.pick(&avail);
                    let a = g.gen(t, d);
                    let (Ty::V(dd) | Ty::Mt(dd, _)) = t else {
                        return None;
                    };
                    let k = g.rng.below(g.min_len(dd) as usize);
                    let ix = match t {
                        Ty::Mt(_, c) => format!("{k}, {}", g.rng.below(g.min_len(c) as usize)),
                        _ => k.to_string(),
                    };
                    Some(Ex::of(format!("({})[{ix}]", a.s), a.b, false, &[&a]).not_ts())
                })
            }
            // `+/tabulate[2](...)` (the loss has N >= 2).
            4 => {
                if in_tab.is_some() || self.n_min < 2 {
                    return None;
                }
                let e = self.tabulate_body(Len::Two, Ty::S, d)?;
                let r = self.rng.below(3);
                let f = if r == 0 && e.var {
                    "max/"
                } else if r == 1 && e.var {
                    "min/"
                } else {
                    "+/"
                };
                Some(
                    Ex::of(
                        format!("({f}tabulate[2]({}))", e.s),
                        2.0 * e.b,
                        false,
                        &[&e],
                    )
                    .not_ts(),
                )
            }
            // `+/tabulate[N-2](...)`: windows of three, empty when N = 2.
            5 => {
                if in_tab.is_some() || self.n_min < 2 {
                    return None;
                }
                let e = self.tabulate_body(Len::N2, Ty::S, d)?;
                let len = match self.lit {
                    Some((n, _)) => (n - 2).to_string(),
                    None => "N-2".into(),
                };
                Some(
                    Ex::of(
                        format!("(+/tabulate[{len}]({}))", e.s),
                        dim_max(D::N1) * e.b,
                        false,
                        &[&e],
                    )
                    .not_ts(),
                )
            }
            // The sum of a matrix-vector product or of row maxima.
            6 => {
                if in_tab.is_some() {
                    return None;
                }
                let mats: Vec<Ty> = avail
                    .iter()
                    .copied()
                    .filter(|t| matches!(t, Ty::Mt(..)))
                    .collect();
                if mats.is_empty() {
                    return None;
                }
                let m = self.rng.pick(&mats);
                let Ty::Mt(r, c) = m else { return None };
                let e = self.matvec(m, c, r, d)?;
                Some(Ex::of(format!("(+/{})", e.s), dim_max(r) * e.b, false, &[&e]).not_ts())
            }
            _ => Some(self.binary(Ty::S, d)),
        }
    }

    /// `scalar_special`'s reductions to a scalar: `+/`, `max/` or `min/` of
    /// a row of the enclosing `tabulate` (or of a product of rows), or
    /// hoisted out of it, of an array of a type in `avail`, or `+/` of a
    /// product of two distinct arrays.
    fn scalar_reduction(&mut self, avail: &[Ty], d: u32) -> Option<Ex> {
        let rows: Vec<Ty> = self
            .tab_rows()
            .into_iter()
            .filter(|t| t.is_array())
            .collect();
        if !rows.is_empty() && self.rng.chance(0.6) {
            // `+/` of a row of the enclosing tabulate.
            let t = self.rng.pick(&rows);
            let a = self.gen(t, d);
            if self.rng.chance(0.3) {
                // `max/` or `min/` of the row (or of a product of
                // rows), with generically distinct elements.
                let b = self.rng.chance(0.5).then(|| self.gen(t, d));
                let (s, bound, var, tab) = match &b {
                    Some(b) => (
                        format!("({} .* {})", a.s, b.s),
                        a.b * b.b,
                        a.var || b.var,
                        a.tab || b.tab,
                    ),
                    None => (a.s.clone(), a.b, a.var, a.tab),
                };
                if var {
                    let f = if self.rng.chance(0.5) { "max/" } else { "min/" };
                    let text = format!("({f}{s})");
                    if tab {
                        tag("max/ or min/ of a row in tabulate", &text);
                    }
                    let parts: Vec<&Ex> = std::iter::once(&a).chain(b.as_ref()).collect();
                    return Some(Ex::of(text, bound, false, &parts).not_ts());
                }
            }
            if self.rng.chance(0.5) {
                let b = self.gen(t, d);
                return Some(Ex::of(
                    format!("(+/({} .* {}))", a.s, b.s),
                    t.len_max() * a.b * b.b,
                    a.var || b.var,
                    &[&a, &b],
                ));
            }
            return Some(Ex::of(
                format!("(+/{})", a.s),
                t.len_max() * a.b,
                a.var,
                &[&a],
            ));
        }
        if avail.is_empty() {
            return None;
        }
        self.hoist(|g| {
            let t = g.rng.pick(avail);
            let a = g.gen(t, d);
            let r = g.rng.below(4);
            let e = if r < 2 && a.var {
                let f = if r == 0 { "max/" } else { "min/" };
                Ex::of(format!("({f}{})", a.s), a.b, false, &[&a]).not_ts()
            } else if r == 2 {
                let (a2, b) = g.distinct(t, t, d);
                Ex::of(
                    format!("(+/({} .* {}))", a2.s, b.s),
                    t.len_max() * a2.b * b.b,
                    false,
                    &[&a2, &b],
                )
            } else {
                Ex::of(format!("(+/{})", a.s), t.len_max() * a.b, false, &[&a])
            };
            Some(e)
        })
    }

    /// `i => body` of a `tabulate[len]` whose elements have type `elem`.
    /// Returns the text `i => body`.
    pub(crate) fn tabulate_body(&mut self, len: Len, elem: Ty, d: u32) -> Option<Ex> {
        if self.tab.is_some() || self.no_tabulate {
            return None;
        }
        let bases = self.tab_bases(len);
        if bases.is_empty() {
            return None;
        }
        let idx = self.fresh("i");
        self.tab = Some(Tab {
            len,
            idx: idx.clone(),
        });
        self.no_tabulate = true;
        let rows: Vec<Ty> = bases.iter().map(|r| r.4).collect();
        let mut body = if elem == Ty::S || rows.contains(&elem) {
            self.gen(elem, d)
        } else {
            self.tab = None;
            self.no_tabulate = false;
            return None;
        };
        if !body.tab {
            // Make it depend on the index.
            let s_rows = bases.iter().any(|r| r.4 == Ty::S);
            let leaf_ty = if s_rows { Ty::S } else { elem };
            if let Some(l) = self.tab_leaf(leaf_ty) {
                body = Ex::of(
                    format!("({} + {})", body.s, l.s),
                    body.b + l.b,
                    l.var,
                    &[&body, &l],
                );
                body = self.bounded(body);
            }
        }
        self.tab = None;
        self.no_tabulate = false;
        if !body.tab {
            return None;
        }
        let mut e = body.clone();
        e.s = format!("{idx} => {}", body.s);
        e.tab = false;
        e.ts = false;
        e.k = false;
        Some(e)
    }

    pub(crate) fn array_special(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        if self.tab.is_some() {
            return Some(self.binary(ty, d));
        }
        let avail = self.avail();
        match self.rng.below(5) {
            // tabulate
            0 | 1 => {
                let (len, elem) = match ty {
                    Ty::V(l) => (l, Ty::S),
                    Ty::Mt(l, c) => (l, Ty::V(c)),
                    Ty::S => return None,
                };
                let e = self.tabulate_body(Len::D(len), elem, d)?;
                Some(Ex::of(
                    format!("tabulate[{}]({})", self.dim(len), e.s),
                    e.b,
                    e.var,
                    &[&e],
                ))
                .map(|e| e.not_ts())
            }
            // matrix ops
            2 => match ty {
                Ty::Mt(r, c) => {
                    if self.rng.chance(0.4) && avail.contains(&Ty::Mt(c, r)) {
                        let a = self.gen(Ty::Mt(c, r), d);
                        return Some(
                            Ex::of(format!("transpose({})", a.s), a.b, a.var, &[&a]).not_ts(),
                        );
                    }
                    let ks: Vec<D> = ALL_DIMS
                        .iter()
                        .copied()
                        .filter(|k| {
                            avail.contains(&Ty::Mt(r, *k)) && avail.contains(&Ty::Mt(*k, c))
                        })
                        .collect();
                    if ks.is_empty() {
                        return None;
                    }
                    let k = self.rng.pick(&ks);
                    let a = self.gen(Ty::Mt(r, k), d);
                    let b = self.gen(Ty::Mt(k, c), d);
                    let state = |e: &Ex| self.tab_states.iter().any(|q| mentions(&e.s, q));
                    if state(&a) && state(&b) {
                        return None;
                    }
                    Some(
                        Ex::of(
                            format!("matmul({}, {})", a.s, b.s),
                            dim_max(k) * a.b * b.b,
                            false,
                            &[&a, &b],
                        )
                        .not_ts(),
                    )
                }
                Ty::V(dd) => {
                    // A matrix-vector product, or a row of a matrix.
                    let mats: Vec<Ty> = avail
                        .iter()
                        .copied()
                        .filter(|t| matches!(t, Ty::Mt(r, _) if *r == dd))
                        .collect();
                    if mats.is_empty() {
                        return None;
                    }
                    let m = self.rng.pick(&mats);
                    let Ty::Mt(_, c) = m else { return None };
                    self.matvec(m, c, dd, d)
                }
                Ty::S => None,
            },
            // iterate with a tuple state
            3 => {
                let a = self.gen(Ty::S, d);
                let v = self.gen(ty, d);
                if v.k {
                    return None;
                }
                let (p, q) = (self.fresh("p"), self.fresh("q"));
                let n = self.rng.below(4);
                let mark = self.env.len();
                let mut pa = a.clone();
                pa.b = a.b.max(1.0);
                let mut qv = v.clone();
                qv.b = v.b.max(1.0);
                self.push_var(&p, &pa, Ty::S);
                self.push_var(&q, &qv, ty);
                self.no_long += 1;
                let sa = self.gen(Ty::S, d);
                let sv = self.gen(ty, d);
                self.no_long -= 1;
                self.env.truncate(mark);
                let sa = self.fit(sa, pa.b);
                let sv = self.fit(sv, qv.b);
                let (x, y) = (self.fresh("t"), self.fresh("t"));
                Some(
                    Ex::of(
                        format!(
                            "({{ let ({x}, {y}) = iterate({n}, ({}, {}), ({p}, {q}) => ({}, {})); {y} }})",
                            a.s, v.s, sa.s, sv.s
                        ),
                        qv.b,
                        v.var && sv.var,
                        &[&a, &v, &sa, &sv],
                    )
                    .not_ts(),
                )
            }
            _ => Some(self.binary(ty, d)),
        }
    }

    /// `tabulate[r](i => +/(P[i] .* v))` or `matmul` with a one-column matrix.
    pub(crate) fn matvec(&mut self, m: Ty, c: D, r: D, d: u32) -> Option<Ex> {
        if self.no_tabulate {
            return None;
        }
        let mm = self.gen(m, d);
        let v = self.gen(Ty::V(c), d);
        let (w, z, idx) = (self.fresh("w"), self.fresh("z"), self.fresh("i"));
        if (mm.var || v.var) && self.rng.chance(0.4) {
            // The largest (smallest) element of each row: `max/X[i]` with a
            // matrix of distinct elements, or of each row times `v`.
            let f = if self.rng.chance(0.5) { "max/" } else { "min/" };
            let (row, b) = if mm.var && self.rng.chance(0.5) {
                (format!("{f}{w}[{idx}]"), mm.b)
            } else {
                (format!("{f}({w}[{idx}] .* {z})"), mm.b * v.b)
            };
            tag("max/ or min/ of a row in tabulate", &row);
            let text = format!(
                "({{ let {w} = {}; let {z} = {}; tabulate[{}]({idx} => {row}) }})",
                mm.s,
                v.s,
                self.dim(r)
            );
            let e = Ex::of(text, b, false, &[&mm, &v]).not_ts();
            return Some(self.bounded(e));
        }
        let text = if self.rng.chance(0.5) {
            // As a product with a one-column matrix.
            format!(
                "({{ let {w} = {}; let {z} = {}; transpose(matmul({w}, transpose(tabulate[1]({idx} => {z}))))[0] }})",
                mm.s, v.s
            )
        } else {
            format!(
                "({{ let {w} = {}; let {z} = {}; tabulate[{}]({idx} => +/({w}[{idx}] .* {z})) }})",
                mm.s,
                v.s,
                self.dim(r)
            )
        };
        let e = Ex::of(text, dim_max(c) * mm.b * v.b, false, &[&mm, &v]).not_ts();
        Some(self.bounded(e))
    }
}

// ---------------------------------------------------------------- nested tabulates and indexed stacks

/// Whether `text` mentions the name `name` (not as a part of a longer name).
pub(crate) fn mentions(text: &str, name: &str) -> bool {
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    text.match_indices(name).any(|(at, _)| {
        !word(text[..at].chars().next_back()) && !word(text[at + name.len()..].chars().next())
    })
}

/// `i`, or `i + o`: a read at an offset along the index `i`.
pub(crate) fn at_offset(idx: &str, off: u64) -> String {
    if off == 0 {
        idx.to_string()
    } else {
        format!("{idx} + {off}")
    }
}

/// The tags of the nested `tabulate`s (counted by program; in a release
/// run at least 5% of the programs must have the first).
pub(crate) const NEST_TAGS: [&str; 7] = [
    "nested tabulate",
    "nested tabulate: three levels",
    "nested tabulate: reads along an outer index in the inner body",
    "nested tabulate: an element along two indices A[i, j]",
    "nested tabulate: the index of an enclosing tabulate as a number",
    "nested tabulate: a let of the outer body read by the inner one",
    "nested tabulate: if on a comparison of indices",
];

/// The tags of the indexed stacks (values that depend on the index of
/// `tabulate`, indexed): counted by program, and in a release run at least
/// 5% of the programs must have one of them.
pub(crate) const STACK_TAGS: [&str; 4] = [
    "indexed stack: a static index (X[i] .* w)[c]",
    "indexed stack: the index of tabulate (e)[i]",
    "indexed stack: a run-time index (e)[k]",
    "indexed stack: an index array (e)[ix[i]]",
];

/// What a nested `tabulate` written outside any `tabulate` gives.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum NestShape {
    /// `+/flatten(tabulate[..](i => tabulate[..](j => ...)))` (a scalar).
    Flat,
    /// `tabulate[..](i => +/tabulate[..](j => ...))`, a vector (summed
    /// for a scalar).
    RowSums,
    /// `tabulate[..](i => tabulate[..](j => ...))`, a matrix.
    Matrix,
}
