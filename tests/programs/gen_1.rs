//! Random programs: the generator's expressions (part 1 of 7). See `mod.rs`.

#[allow(unused_imports)]
use super::*;

impl<'r> Gen<'r> {
    pub(crate) fn new(rng: &'r mut Rng, n_min: u64, m_name: &'static str) -> Gen<'r> {
        Gen {
            rng,
            env: Vec::new(),
            helpers: Vec::new(),
            tab: None,
            n_min,
            lit: None,
            m_name,
            allow_n1: n_min >= 2,
            fresh: 0,
            static_count: None,
            no_tabulate: false,
            long_left: 0,
            nest_left: 0,
            in_long: 0,
            no_long: 0,
            made_loop: false,
            rt_count: None,
            only_rt: false,
            only_helper: None,
            seqs: Vec::new(),
            scan_left: 0,
            mixed_left: 0,
            counter_next: false,
            cat: false,
            ints: Vec::new(),
            int_helper: None,
            nest: false,
            stack_ix: false,
            outer: Vec::new(),
            matches: false,
            mparams: Vec::new(),
            noise: false,
            keys: Vec::new(),
            tab_states: Vec::new(),
            prims: false,
            only_prim: false,
            made_prim: false,
            made_kernel: false,
        }
    }

    pub(crate) fn fresh(&mut self, prefix: &str) -> String {
        self.fresh += 1;
        format!("{prefix}{}", self.fresh)
    }

    pub(crate) fn dim(&self, d: D) -> String {
        match (self.lit, d) {
            (Some((n, _)), D::N) => n.to_string(),
            (Some((_, m)), D::M) => m.to_string(),
            (Some((n, _)), D::N1) => (n - 1).to_string(),
            (None, D::N) => "N".into(),
            (None, D::M) => self.m_name.into(),
            (None, D::N1) => "N-1".into(),
        }
    }

    pub(crate) fn ty_text(&self, t: Ty) -> String {
        match t {
            Ty::S => "f64".into(),
            Ty::V(d) => format!("f64[{}]", self.dim(d)),
            Ty::Mt(a, b) => format!("f64[{}, {}]", self.dim(a), self.dim(b)),
        }
    }

    pub(crate) fn min_len(&self, d: D) -> u64 {
        match d {
            D::N => self.n_min,
            D::M | D::N1 => 1,
        }
    }

    /// How many elements `d` has for sure here (all of them with literal sizes).
    pub(crate) fn known_len(&self, d: D) -> u64 {
        match (self.lit, d) {
            (Some((n, _)), D::N) => n,
            (Some((_, m)), D::M) => m,
            (Some((n, _)), D::N1) => n - 1,
            (None, _) => self.min_len(d),
        }
    }

    /// `let name = e` written to `body`, in scope from here, and listed
    /// in `lets`.
    pub(crate) fn bind_let(
        &mut self,
        body: &mut String,
        lets: &mut Vec<String>,
        name: String,
        e: &Ex,
        ty: Ty,
    ) {
        let _ = writeln!(body, "  let {name} = {}", e.s);
        self.push_var(&name, e, ty);
        lets.push(name);
    }

    pub(crate) fn push_var(&mut self, name: &str, e: &Ex, ty: Ty) {
        self.env.push(Var {
            name: name.to_string(),
            ty,
            b: e.b,
            var: e.var,
            tab: e.tab,
            k: e.k,
            used: false,
        });
    }

    /// Names visible here (the latest binding of each name), by index.
    pub(crate) fn visible(&self) -> Vec<usize> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for (i, v) in self.env.iter().enumerate().rev() {
            if !seen.insert(v.name.clone()) {
                continue;
            }
            if v.tab && self.tab.is_none() {
                continue;
            }
            out.push(i);
        }
        out
    }

    pub(crate) fn use_var(&mut self, i: usize) -> Ex {
        self.env[i].used = true;
        let v = &self.env[i];
        Ex {
            s: v.name.clone(),
            b: v.b,
            var: v.var,
            tab: v.tab,
            ts: true,
            k: v.k,
        }
    }

    /// Types that can be built from the names in scope.
    pub(crate) fn avail(&self) -> Vec<Ty> {
        let mut set: Vec<Ty> = vec![Ty::S];
        let add = |t: Ty, set: &mut Vec<Ty>| {
            if !set.contains(&t) {
                set.push(t);
            }
        };
        for i in self.visible() {
            let v = &self.env[i];
            if v.tab {
                continue;
            }
            add(v.ty, &mut set);
            match v.ty {
                Ty::V(D::N) if self.allow_n1 && !self.no_tabulate => add(Ty::V(D::N1), &mut set),
                Ty::Mt(a, b) => {
                    add(Ty::Mt(b, a), &mut set);
                    add(Ty::Mt(a, a), &mut set);
                    add(Ty::Mt(b, b), &mut set);
                    add(Ty::V(a), &mut set);
                    add(Ty::V(b), &mut set);
                }
                _ => {}
            }
        }
        set.retain(|t| self.allow_n1 || !t.uses_n1());
        set
    }

    // ------------------------------------------------------------ leaves

    /// Arrays `base[i + off]` can read inside `tabulate[len]`: (base text,
    /// its var flag, its bound, offset, row type).
    pub(crate) fn tab_bases(&self, len: Len) -> Vec<(String, bool, f64, u64, Ty)> {
        let mut out = Vec::new();
        for i in self.visible() {
            let v = &self.env[i];
            if v.tab {
                continue;
            }
            let mut cands = vec![(v.name.clone(), v.ty)];
            if let Ty::Mt(a, b) = v.ty {
                cands.push((format!("transpose({})", v.name), Ty::Mt(b, a)));
            }
            if self.cat && v.ty.is_array() {
                // `reverse(x)[i]` reads `x` backwards along `i`.
                cands.push((format!("reverse({})", v.name), v.ty));
            }
            for (base, ty) in cands {
                let (Some(lead), Some(row)) = (ty.lead(), ty.row()) else {
                    continue;
                };
                for o in self.offsets(len, lead) {
                    out.push((base.clone(), v.var, v.b, o, row));
                }
            }
        }
        out
    }

    /// The types of the rows the enclosing `tabulate` reads (of every
    /// level, when nested), as `tab_bases` lists them.
    pub(crate) fn tab_rows(&self) -> Vec<Ty> {
        let Some(tab) = &self.tab else {
            return Vec::new();
        };
        let mut rows: Vec<Ty> = self.tab_bases(tab.len).iter().map(|r| r.4).collect();
        for t in &self.outer {
            rows.extend(self.tab_bases(t.len).iter().map(|r| r.4));
        }
        rows
    }

    /// The offsets `o` at which `tabulate[len]` may read `x[i + o]` from
    /// an array whose leading dimension is `lead`.
    pub(crate) fn offsets(&self, len: Len, lead: D) -> Vec<u64> {
        match (len, lead) {
            (Len::D(l), d) if l == d => vec![0],
            (Len::D(D::N1), D::N) => vec![0, 1],
            (Len::Two, D::N) if self.n_min >= 2 => vec![0],
            (Len::N2, D::N) if self.n_min >= 2 => vec![0, 1, 2],
            (Len::N2, D::N1) if self.n_min >= 2 => vec![0, 1],
            // An integer length reads from 0 up to what is there for sure.
            (Len::Lit(k), _) => (0..3).filter(|o| o + k <= self.known_len(lead)).collect(),
            (Len::M1, D::M) => vec![0, 1],
            _ => vec![],
        }
    }

    /// `base[i]` or `base[i + 1]` of type `ty` in the enclosing `tabulate`.
    pub(crate) fn tab_leaf(&mut self, ty: Ty) -> Option<Ex> {
        if !self.outer.is_empty() {
            return self.nested_leaf(ty);
        }
        let tab = self.tab.clone()?;
        let all = self.tab_bases(tab.len);
        let bases: Vec<_> = all.iter().filter(|r| r.4 == ty).cloned().collect();
        // A scalar may also be `X[i, k]`: column `k` (static) along `i`.
        let cols: Vec<_> = all
            .iter()
            .filter(|r| ty == Ty::S && matches!(r.4, Ty::V(_)))
            .cloned()
            .collect();
        if bases.is_empty() && cols.is_empty() {
            return None;
        }
        let col = !cols.is_empty() && (bases.is_empty() || self.rng.chance(0.35));
        let (base, var, b, off, row) = self.rng.pick(if col { &cols } else { &bases });
        let name = base
            .trim_start_matches("transpose(")
            .trim_start_matches("reverse(")
            .trim_end_matches(')');
        self.mark_used(name);
        let i = &tab.idx;
        let ix = match (off, self.rng.below(6)) {
            (0, 0) => format!("{i} + 1 - 1"),
            (0, _) => i.clone(),
            (_, 0) => format!("{off} + {i}"),
            (_, 1) => format!("{i} + {} - 1", off + 1),
            _ => format!("{i} + {off}"),
        };
        let text = match row {
            Ty::V(c) if col => {
                let k = self.rng.below(self.known_len(c) as usize);
                let text = format!("{base}[{ix}, {k}]");
                tag(
                    if off == 0 {
                        "X[i, k] in tabulate"
                    } else {
                        "X[i + c, k] in tabulate"
                    },
                    &text,
                );
                text
            }
            _ => format!("{base}[{ix}]"),
        };
        if base.starts_with("reverse(") {
            tag("reverse(x)[i] in tabulate", &text);
        }
        let mut e = Ex::leaf(text, b, var);
        e.tab = true;
        Some(e)
    }

    /// A leaf of type `ty`: a name, a literal, an index, or the simplest
    /// derived form.
    pub(crate) fn leaf(&mut self, ty: Ty) -> Ex {
        let mut cands: Vec<Ex> = Vec::new();
        let vis = self.visible();
        let mut var_idx = Vec::new();
        for &i in &vis {
            if self.env[i].ty == ty {
                var_idx.push(i);
            }
        }
        if !var_idx.is_empty() && self.rng.chance(0.7) {
            // The most recent binding half of the time (`visible` is newest first).
            let i = if self.rng.chance(0.5) {
                var_idx[0]
            } else {
                self.rng.pick(&var_idx)
            };
            return self.use_var(i);
        }
        for &i in &var_idx {
            let e = self.use_var(i);
            cands.push(e);
        }
        // Rows of the enclosing tabulate.
        if let Some(e) = self.tab_leaf(ty) {
            if self.rng.chance(0.6) {
                return e;
            }
            cands.push(e);
        }
        if ty == Ty::S && (self.rng.chance(0.25) || cands.is_empty()) {
            let x = self.rng.pick(LITS);
            cands.push(Ex::lit(x));
        }
        // Static indices of names.
        for &i in &vis {
            let v = self.env[i].clone();
            if v.tab {
                continue;
            }
            match (v.ty, ty) {
                (Ty::V(d), Ty::S) => {
                    let k = self.rng.below(self.min_len(d) as usize);
                    let mut e = Ex::leaf(format!("{}[{k}]", v.name), v.b, false).not_ts();
                    e.k = v.k;
                    cands.push(e);
                }
                (Ty::Mt(r, c), Ty::V(d)) if c == d => {
                    let k = self.rng.below(self.min_len(r) as usize);
                    cands.push(Ex::leaf(format!("{}[{k}]", v.name), v.b, v.var).not_ts());
                }
                (Ty::Mt(r, c), Ty::V(d)) if r == d => {
                    let k = self.rng.below(self.min_len(c) as usize);
                    cands
                        .push(Ex::leaf(format!("transpose({})[{k}]", v.name), v.b, v.var).not_ts());
                }
                (Ty::Mt(r, c), Ty::S) => {
                    let k = self.rng.below(self.min_len(r) as usize);
                    let j = self.rng.below(self.min_len(c) as usize);
                    cands.push(Ex::leaf(format!("{}[{k}, {j}]", v.name), v.b, false).not_ts());
                }
                _ => {}
            }
        }
        if cands.is_empty() {
            if let Some(e) = self.derive(ty) {
                return e;
            }
            panic!("generator: no leaf of type {ty:?}");
        }
        let e = self.rng.pick(&cands);
        // Mark a picked name used.
        if let Some(i) = vis.iter().find(|&&i| self.env[i].name == e.s) {
            self.env[*i].used = true;
        }
        e
    }

    /// A value of an array type no name has: `N-1` differences, a
    /// transpose, a matrix product.
    pub(crate) fn derive(&mut self, ty: Ty) -> Option<Ex> {
        let vis = self.visible();
        let names: Vec<Var> = vis
            .iter()
            .map(|&i| self.env[i].clone())
            .filter(|v| !v.tab)
            .collect();
        if self.tab.is_some() {
            return self.hoist(|g| g.derive(ty));
        }
        match ty {
            Ty::V(D::N1) => {
                if self.no_tabulate {
                    return None;
                }
                // Differences of a column: `A[i + 1, k] - A[i, k]`.
                let mats: Vec<Var> = names
                    .iter()
                    .filter(|v| matches!(v.ty, Ty::Mt(D::N, _)))
                    .cloned()
                    .collect();
                if !mats.is_empty() && self.rng.chance(0.5) {
                    let v = self.rng.pick(&mats);
                    let Ty::Mt(_, c) = v.ty else { unreachable!() };
                    self.mark_used(&v.name);
                    let k = self.rng.below(self.known_len(c) as usize);
                    let i = self.fresh("i");
                    let len = self.dim(D::N1);
                    let text = format!("{n}[{i} + 1, {k}]", n = v.name);
                    tag("X[i + c, k] in tabulate", &text);
                    return Some(
                        Ex::leaf(
                            format!("tabulate[{len}]({i} => {text} - {n}[{i}, {k}])", n = v.name),
                            2.0 * v.b,
                            v.var,
                        )
                        .not_ts(),
                    );
                }
                let v = names.iter().find(|v| v.ty == Ty::V(D::N))?.clone();
                self.mark_used(&v.name);
                let i = self.fresh("i");
                let len = self.dim(D::N1);
                Some(
                    Ex::leaf(
                        format!(
                            "tabulate[{len}]({i} => {n}[{i} + 1] - {n}[{i}])",
                            n = v.name
                        ),
                        2.0 * v.b,
                        v.var,
                    )
                    .not_ts(),
                )
            }
            Ty::Mt(a, b) => {
                if let Some(v) = names.iter().find(|v| v.ty == Ty::Mt(b, a)).cloned() {
                    self.mark_used(&v.name);
                    return Some(Ex::leaf(format!("transpose({})", v.name), v.b, v.var).not_ts());
                }
                if a == b {
                    // (The states of `tab_states` last: a `matmul` of one
                    // with itself is refused.)
                    let states = names.iter().filter(|v| self.tab_states.contains(&v.name));
                    let order: Vec<Var> = names
                        .iter()
                        .filter(|v| !self.tab_states.contains(&v.name))
                        .chain(states)
                        .cloned()
                        .collect();
                    for v in &order {
                        if let Ty::Mt(r, c) = v.ty {
                            self.mark_used(&v.name);
                            if r == a {
                                return Some(
                                    Ex::leaf(
                                        format!("matmul({n}, transpose({n}))", n = v.name),
                                        dim_max(c) * v.b * v.b,
                                        false,
                                    )
                                    .not_ts(),
                                )
                                .map(|e| self.bounded(e));
                            }
                            if c == a {
                                return Some(
                                    Ex::leaf(
                                        format!("matmul(transpose({n}), {n})", n = v.name),
                                        dim_max(r) * v.b * v.b,
                                        false,
                                    )
                                    .not_ts(),
                                )
                                .map(|e| self.bounded(e));
                            }
                        }
                    }
                }
                None
            }
            Ty::V(d) => {
                for v in &names {
                    if let Ty::Mt(r, c) = v.ty {
                        if c == d {
                            self.mark_used(&v.name);
                            return Some(Ex::leaf(format!("{}[0]", v.name), v.b, v.var).not_ts());
                        }
                        if r == d {
                            self.mark_used(&v.name);
                            return Some(
                                Ex::leaf(format!("transpose({})[0]", v.name), v.b, v.var).not_ts(),
                            );
                        }
                    }
                }
                None
            }
            Ty::S => None,
        }
    }

    pub(crate) fn mark_used(&mut self, name: &str) {
        if let Some(v) = self.env.iter_mut().rev().find(|v| v.name == name) {
            v.used = true;
        }
    }

    /// Run `f` outside the enclosing `tabulate` (values that do not depend
    /// on its index).
    pub(crate) fn hoist<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        let saved = self.tab.take();
        let outer = std::mem::take(&mut self.outer);
        let r = f(self);
        self.tab = saved;
        self.outer = outer;
        r
    }

    // ------------------------------------------------------------ bounds

    /// Keep `e` within LIMIT.
    pub(crate) fn bounded(&mut self, e: Ex) -> Ex {
        self.fit(e, LIMIT)
    }

    /// Keep `e` within `lim`: `tanh`, `sin` or a power-of-two scaling.
    pub(crate) fn fit(&mut self, e: Ex, lim: f64) -> Ex {
        if e.b <= lim || self.wild_unbounded() {
            return e;
        }
        let choice = if e.b.is_finite() {
            self.rng.below(3)
        } else {
            0
        };
        match choice {
            0 => Ex::of(format!("tanh({})", e.s), 1.0, e.var, &[&e]),
            1 if e.b <= 16.0 && lim >= 1.0 => Ex::of(format!("sin({})", e.s), 1.0, e.var, &[&e]),
            _ => {
                let mut k = 1.0;
                while e.b * k > lim {
                    k *= 0.5;
                }
                Ex::of(format!("({} * {})", e.s, fmt_lit(k)), e.b * k, e.var, &[&e])
            }
        }
    }

    // ------------------------------------------------------------ generation

    /// A random expression of type `ty`.
    pub(crate) fn gen(&mut self, ty: Ty, depth: u32) -> Ex {
        if let Some(e) = self.wild_expr(ty, depth) {
            return e;
        }
        // Inside `tabulate`, types other than the scalars and the rows being
        // read are computed outside it.
        if self.tab.is_some() {
            let rows = self.tab_rows();
            if ty != Ty::S && !rows.contains(&ty) {
                return self.hoist(|g| g.gen(ty, depth));
            }
            if self.rng.chance(0.15) {
                return self.hoist(|g| g.gen(ty, depth));
            }
        }
        if depth == 0 || self.rng.chance(0.2) {
            let e = self.leaf(ty);
            return self.bounded(e);
        }
        let d = depth - 1;
        // The newer constructs: drawn only in the programs that have them
        // (the others draw what they drew before).
        if (self.cat || self.scan_left > 0) && self.rng.chance(0.15) {
            if let Some(e) = self.novel(ty, d) {
                return self.bounded(e);
            }
        }
        // Run-time integers, likewise.
        if self.int_ok() && self.rng.chance(0.12) {
            if let Some(e) = self.int_float(ty, d) {
                return self.bounded(e);
            }
        }
        // Nested `tabulate`s and indexed stacks, likewise.
        if (self.nest || self.stack_ix) && self.rng.chance(0.12) {
            if let Some(e) = self.nest_construct(ty, d) {
                return self.bounded(e);
            }
        }
        // `match`, and noise drawn from keys, likewise.
        if self.matches && self.rng.chance(0.1) {
            if let Some(e) = self.match_expr(ty, d) {
                return self.bounded(e);
            }
        }
        if self.noise && self.rng.chance(0.05) {
            if let Some(e) = self.noise_expr(ty, d) {
                return self.bounded(e);
            }
        }
        // User primitives, likewise (more often in loops' steps).
        if self.prims && self.rng.chance(if self.in_long > 0 { 0.2 } else { 0.06 }) {
            if let Some(e) = self.prim_call(ty, d) {
                return self.bounded(e);
            }
        }
        let e = loop {
            let r = self.rng.below(100);
            let e = match r {
                0..=15 => Some(self.binary(ty, d)),
                16..=28 => Some(self.math(ty, d)),
                29..=36 => Some(self.maxmin(ty, d)),
                37..=46 => self.if_expr(ty, d),
                47..=51 => Some(self.block(ty, d)),
                52..=63 => self.call(ty, d),
                64..=69 => {
                    // `long_left` first: without loops nothing more is drawn.
                    if self.long_left > 0
                        && self.in_long == 0
                        && self.long_ok()
                        && self.rng.chance(0.3)
                    {
                        self.long_left -= 1;
                        self.long_iterate(ty, d)
                    } else {
                        self.iterate(ty, d)
                    }
                }
                70..=73 => self.safe_branch(ty, d),
                _ => match ty {
                    Ty::S => self.scalar_special(d),
                    Ty::V(_) | Ty::Mt(..) => self.array_special(ty, d),
                },
            };
            if let Some(e) = e {
                break e;
            }
        };
        self.bounded(e)
    }

    // ------------------------------------------------------------ newer constructs

    /// One of the newer constructs giving `ty`: a `scan`, `reverse` or
    /// `concat` (None where none fits here).
    pub(crate) fn novel(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        let mut kinds = Vec::new();
        if self.scan_left > 0 && self.scan_ok() && !matches!(ty, Ty::Mt(..)) {
            kinds.push(0);
        }
        if self.cat {
            kinds.extend([1, 2]);
        }
        if kinds.is_empty() {
            return None;
        }
        match self.rng.pick(&kinds) {
            0 => {
                let e = self.scan_expr(ty, d);
                self.scan_left -= u32::from(e.is_some());
                e
            }
            1 => self.reverse_expr(ty, d),
            _ => self.concat_expr(ty, d),
        }
    }

    /// The text of a `tabulate` length.
    pub(crate) fn len_text(&self, len: Len) -> String {
        match (len, self.lit) {
            (Len::D(d), _) => self.dim(d),
            (Len::Two, _) => "2".into(),
            (Len::Lit(k), _) => k.to_string(),
            (Len::N2, Some((n, _))) => (n - 2).to_string(),
            (Len::N2, None) => "N-2".into(),
            (Len::M1, Some((_, m))) => (m - 1).to_string(),
            (Len::M1, None) => format!("{}-1", self.m_name),
        }
    }

    /// `reverse(a)` of type `ty`, or for a scalar an element of one
    /// (`reverse(a)[0]` is the last element of `a`). Outside `tabulate`:
    /// `reverse` does not take values that depend on its index.
    pub(crate) fn reverse_expr(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        if self.tab.is_some() {
            return self.hoist(|g| g.reverse_expr(ty, d));
        }
        let e = match ty {
            Ty::S => {
                let arrays: Vec<Ty> = self.avail().into_iter().filter(|t| t.is_array()).collect();
                if arrays.is_empty() {
                    return None;
                }
                let t = self.rng.pick(&arrays);
                let a = self.gen(t, d);
                let lead = t.lead()?;
                let k = self.rng.below(self.min_len(lead) as usize);
                let ix = match t {
                    Ty::Mt(_, c) => format!("{k}, {}", self.rng.below(self.min_len(c) as usize)),
                    _ => k.to_string(),
                };
                Ex::of(format!("reverse({})[{ix}]", a.s), a.b, false, &[&a])
            }
            _ => {
                let a = self.gen(ty, d);
                Ex::of(format!("reverse({})", a.s), a.b, a.var, &[&a])
            }
        };
        tag("reverse", &e.s);
        if self.in_long > 0 {
            tag("reverse or concat in a loop's step", &e.s);
        }
        Some(e.not_ts())
    }

    /// `concat(a, b)` of type `ty` (a scalar: the sum or an element of one):
    /// one part of integer length 1 or 2 (`tabulate[1](i => ...)`), the
    /// other `N-1`, `N-2` or `M-1` long (a `tabulate`, or any value of
    /// type `f64[N-1]`), in either order, so that the lengths add up to
    /// `ty`'s. Outside `tabulate`, like `reverse`.
    pub(crate) fn concat_expr(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        if self.tab.is_some() {
            return self.hoist(|g| g.concat_expr(ty, d));
        }
        if self.no_tabulate {
            return None;
        }
        if ty == Ty::S {
            let arrays: Vec<Ty> = self.avail().into_iter().filter(|t| t.is_array()).collect();
            if arrays.is_empty() {
                return None;
            }
            let t = self.rng.pick(&arrays);
            let a = self.concat_expr(t, d)?;
            let e = if self.rng.chance(0.6) {
                Ex::of(format!("(+/{})", a.s), t.len_max() * a.b, false, &[&a])
            } else {
                let ix = match t {
                    Ty::Mt(..) => "0, 0",
                    _ => "0",
                };
                Ex::of(format!("({})[{ix}]", a.s), a.b, false, &[&a])
            };
            return Some(e.not_ts());
        }
        let (lead, elem) = match ty {
            Ty::V(l) => (l, Ty::S),
            Ty::Mt(l, c) => (l, Ty::V(c)),
            Ty::S => return None,
        };
        let (k, rest) = match lead {
            D::N if self.n_min >= 2 && self.rng.chance(0.3) => (2, Len::N2),
            D::N => (1, Len::D(D::N1)),
            D::M => (1, Len::M1),
            D::N1 if self.allow_n1 && self.n_min >= 2 => (1, Len::N2),
            D::N1 => return None,
        };
        let head = self.tabulate_body(Len::Lit(k), elem, d)?;
        let head = Ex::of(
            format!("tabulate[{k}]({})", head.s),
            head.b,
            false,
            &[&head],
        );
        let whole = ty == Ty::V(D::N) && k == 1 && self.rng.chance(0.3);
        let tail = if whole && self.avail().contains(&Ty::V(D::N1)) {
            self.gen(Ty::V(D::N1), d)
        } else {
            let e = self.tabulate_body(rest, elem, d)?;
            Ex::of(
                format!("tabulate[{}]({})", self.len_text(rest), e.s),
                e.b,
                false,
                &[&e],
            )
        };
        let (a, b) = if self.rng.chance(0.5) {
            (&head, &tail)
        } else {
            (&tail, &head)
        };
        let e = Ex::of(
            format!("concat({}, {})", a.s, b.s),
            a.b.max(b.b),
            false,
            &[a, b],
        )
        .not_ts();
        tag("concat", &e.s);
        tag(
            match ty {
                Ty::Mt(..) => "concat: rows of matrices",
                _ => "concat: vectors",
            },
            &e.s,
        );
        if self.in_long > 0 {
            tag("reverse or concat in a loop's step", &e.s);
        }
        Some(e)
    }

    /// Whether a `scan` may be written here: where a long `iterate` may
    /// (`long_ok`), also in the step of a loop (a long `iterate` or a
    /// scan) that is not inside another.
    pub(crate) fn scan_ok(&self) -> bool {
        self.tab.is_none() && !self.no_tabulate && self.in_long <= 1 && self.no_long == 0
    }
}

impl Gen<'_> {
    /// The lengths a nested `tabulate` may have here.
    pub(crate) fn nest_lens(&self) -> Vec<Len> {
        let mut out = vec![Len::D(D::N)];
        if self.has_dim(D::M) {
            out.push(Len::D(D::M));
        }
        if self.allow_n1 {
            out.push(Len::D(D::N1));
        }
        if self.n_min >= 2 {
            out.push(Len::Two);
        }
        out
    }

    /// The loss has values along `d` (so its size is in scope).
    pub(crate) fn has_dim(&self, d: D) -> bool {
        self.lit.is_some()
            || self.env.iter().any(|v| match v.ty {
                Ty::S => false,
                Ty::V(a) => a == d,
                Ty::Mt(a, b) => a == d || b == d,
            })
    }

    /// An upper bound of a `tabulate` length.
    pub(crate) fn len_bound(&self, len: Len) -> f64 {
        match len {
            Len::D(d) => dim_max(d),
            Len::Two => 2.0,
            Len::N2 => (N_MAX - 2) as f64,
            Len::Lit(k) => k as f64,
            Len::M1 => (M_MAX - 1) as f64,
        }
    }
}
