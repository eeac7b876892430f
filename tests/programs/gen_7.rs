//! Random programs: the generator's expressions (part 7 of 7). See `mod.rs`.

#[allow(unused_imports)]
use super::*;

impl Gen<'_> {
    /// `iterate_until(u, init, qd => done, q => step)` of type `ty` (not a
    /// matrix) with the loss's run-time bound `u: i64` (0 to `U_MAX`): a
    /// loop with a scalar or a vector state (summed for a scalar) whose
    /// step reads only what a loop carries and relaxes or drifts like a
    /// long iterate's, stopping where a condition on the state holds: a
    /// threshold on the state (element-wise for a vector), its sum or its
    /// magnitude, or any generated condition.
    pub(crate) fn until_rt(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        if self.tab.is_some() {
            return None;
        }
        let vectors: Vec<Ty> = self
            .avail()
            .into_iter()
            .filter(|t| matches!(t, Ty::V(_)))
            .collect();
        let (leaf, sum) = match ty {
            Ty::S if !vectors.is_empty() && self.rng.chance(0.3) => (self.rng.pick(&vectors), true),
            Ty::S => (Ty::S, false),
            Ty::V(_) => (ty, false),
            Ty::Mt(..) => return None,
        };
        let mut init = self.gen(leaf, d);
        if init.k {
            let s = self.dynamic_scalar();
            init = Ex::of(
                format!("({} + {})", init.s, s.s),
                init.b + s.b,
                init.var,
                &[&init, &s],
            );
        }
        let h = self.rng.pick(&[0.25, 0.5]);
        let form = self.rng.below(3);
        let bound = if form == 2 {
            init.b + h * U_MAX as f64
        } else {
            init.b.max(1.0)
        };
        let (saved, keep) = self.enter_step(leaf, true);
        self.in_long += 1;
        self.no_long += 1;
        let mark = self.env.len();
        let qd = self.fresh("q");
        self.push_var(&qd, &Ex::leaf(qd.clone(), bound, init.var), leaf);
        let crafted = self.rng.chance(0.6);
        let done = if crafted {
            let (what, positive) = match (leaf, self.rng.below(3)) {
                (Ty::S, 0) | (_, 1) => (format!("abs({qd})"), true),
                (Ty::S, _) | (_, 2) => (qd.clone(), false),
                _ => (format!("(+/{qd})"), false),
            };
            self.mark_used(&qd);
            let op = self.rng.pick(&[">", "<"]);
            let c = if positive {
                self.rng.pick(&[0.25, 0.5, 1.0, 1.5])
            } else {
                self.rng.pick(&[0.25, 0.5, 1.0, -0.25, -0.5, -1.0])
            };
            format!("({what} {op} {})", fmt_lit(c))
        } else {
            let shape = if leaf != Ty::S && self.rng.chance(0.3) {
                leaf
            } else {
                Ty::S
            };
            self.cond(shape, 1).s
        };
        self.env.truncate(mark);
        let q = self.fresh("q");
        self.push_var(&q, &Ex::leaf(q.clone(), bound, init.var), leaf);
        let dd = self.rng.range(1, 3) as u32;
        let mut f = self.gen(leaf, dd);
        for _ in 0..3 {
            // (`q + h * (q - q)` would leave the state as it is.)
            if f.s != q {
                break;
            }
            f = self.gen(leaf, dd);
        }
        let step = match form {
            0 => {
                let f = self.fit(f, bound);
                format!("({q} + {h} * ({} - {q}))", f.s)
            }
            1 => {
                let f = self.fit(f, bound);
                format!("({q} - {h} * ({q} - {}))", f.s)
            }
            _ => format!("({q} + {h} * tanh({}))", f.s),
        };
        self.env.truncate(mark);
        self.in_long -= 1;
        self.no_long -= 1;
        let read = self.leave_step(saved, keep);
        let text = format!(
            "iterate_until(u, {}, {qd} => {done}, {q} => {step})",
            init.s
        );
        tag(SEQ_TAGS[2], &text);
        tag(
            if leaf == Ty::S {
                "iterate_until(u, ...): scalar state"
            } else {
                "iterate_until(u, ...): vector state"
            },
            &text,
        );
        tag(
            if crafted {
                "iterate_until(u, ...): a threshold on the state"
            } else {
                "iterate_until(u, ...): a generated condition"
            },
            &text,
        );
        if !read.is_empty() {
            tag(
                "iterate_until(u, ...): the step reads values from outside",
                &text,
            );
        }
        let e = if sum {
            Ex::leaf(format!("(+/{text})"), leaf.len_max() * bound, false)
        } else {
            Ex::leaf(text, bound, false)
        };
        Some(e.not_ts())
    }
}

/// Write the let `what` of the loss (a sequence construct, see `SeqLet`)
/// to `body`, of a type that is available.
pub(crate) fn seq_let(g: &mut Gen, body: &mut String, lets: &mut Vec<String>, what: &SeqLet) {
    let depth = g.rng.range(1, max_depth()) as u32;
    let tys: Vec<Ty> = g
        .avail()
        .into_iter()
        .filter(|t| !matches!(t, Ty::Mt(..)))
        .collect();
    let made = match what {
        SeqLet::Scan(p) => {
            let ty = g.rng.pick(&tys);
            g.seq_scan(p, ty, false, depth).map(|e| (e, ty))
        }
        SeqLet::ScanAll(p) => g.seq_scan(p, Ty::S, true, depth).map(|e| (e, Ty::S)),
        SeqLet::Until => {
            // (Scalar states half of the time: most types in scope are vectors.)
            let ty = if g.rng.chance(0.5) {
                Ty::S
            } else {
                g.rng.pick(&tys)
            };
            g.until_rt(ty, depth).map(|e| (e, ty))
        }
    };
    if let Some((e, ty)) = made {
        let e = g.bounded(e);
        let name = g.fresh("a");
        g.bind_let(body, lets, name, &e, ty);
    }
}
