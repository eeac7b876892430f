//! Random programs: the generator's expressions (part 5 of 7). See `mod.rs`.

#[allow(unused_imports)]
use super::*;

impl Gen<'_> {
    /// An index array of length `len` whose values index along `range`:
    /// a parameter, or integer arithmetic on one brought back in range.
    pub(crate) fn index_array(&mut self, len: D, range: D, d: u32) -> Option<String> {
        let arrays = self.index_arrays(Some(len), Some(range));
        let any = self.index_arrays(Some(len), None);
        if any.is_empty() {
            return None;
        }
        if !arrays.is_empty() && self.rng.chance(0.6) {
            return Some(self.rng.pick(&arrays).name.to_string());
        }
        // Arithmetic on an index array of this length (whatever it indexes).
        let p = self.rng.pick(&any);
        let e = self.iexpr(d.min(1));
        let n = self.known_len(range);
        let s = match self.rng.below(4) {
            0 => format!("(({} + {}) % {n})", p.name, e.s),
            1 => format!("((2 * {} - {}) % {n})", p.name, e.s),
            2 => format!("(abs({} - {}) % {n})", p.name, e.s),
            _ => format!("min(max({} * {}, 0), {})", p.name, e.s, n - 1),
        };
        tag("integer arithmetic", &s);
        tag("index array: integer arithmetic on indices", &s);
        Some(s)
    }

    /// A float expression of type `ty` made with run-time integers: a
    /// gather, a run-time index, `tabulate` over an index array,
    /// `scatter_add`, `f64(...)` of integers or an `if` on an integer
    /// condition (None where none fits).
    ///
    /// Integer comparisons are never made of values that depend on the
    /// index of `tabulate` (`ix[i] > 1`): egrad mistypes their masks (see
    /// the module doc).
    pub(crate) fn int_float(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        let kind = self.rng.below(10);
        self.int_float_of(ty, d, kind)
    }

    /// `int_float` of kind `kind` (0 to 9: 0 to 3 a run-time index, 4 and
    /// 5 `f64(...)`, 6 `if`, 7 `scatter_add`, 8 `tabulate` over an index
    /// array, 9 a gather or a row at a run-time index).
    pub(crate) fn int_float_of(&mut self, ty: Ty, d: u32, kind: usize) -> Option<Ex> {
        if self.tab.is_some() {
            return self.hoist(|g| g.int_float_of(ty, d, kind));
        }
        let avail = self.avail();
        match (ty, kind) {
            // A run-time index `v[k]`, or an element `A[a, b]` with a
            // run-time index in either position or both.
            (Ty::S, 0..=3) => self.runtime_index(&avail, d),
            // A float from integers.
            (_, 4 | 5) => {
                let (s, b) = match ty {
                    Ty::S => {
                        let e = self.iexpr(d);
                        (format!("f64({})", e.s), e.b)
                    }
                    Ty::V(l) => {
                        let ia = self.index_array(l, D::N, d)?;
                        (format!("f64({ia})"), dim_max(D::N))
                    }
                    Ty::Mt(..) => return None,
                };
                tag("f64(...) of integers", &s);
                let e = Ex::leaf(s, b, false).not_ts();
                let x = self.gen(ty, d);
                let op = self.rng.pick(&["+", "*", "-"]);
                let bound = if op == "*" { b * x.b } else { b + x.b };
                Some(Ex::of(format!("({} {op} {})", e.s, x.s), bound, false, &[&e, &x]).not_ts())
            }
            // `if` on an integer condition (element-wise on an index array
            // of the branches' length).
            (_, 6) => {
                let c = match ty {
                    Ty::V(l) if self.rng.chance(0.5) => {
                        let ia = self.index_array(l, D::N, d)?;
                        let e = self.iexpr(d.min(1));
                        let op = self.rng.pick(&["<", ">", "==", "!=", ">="]);
                        let s = format!("({ia} {op} {})", e.s);
                        tag("integer comparison", &s);
                        s
                    }
                    _ => self.icond(d),
                };
                let a = self.gen(ty, d);
                let b = self.gen(ty, d);
                let s = format!("(if {c} {{ {} }} else {{ {} }})", a.s, b.s);
                tag("if on an integer condition", &s);
                Some(Ex::of(s, a.b.max(b.b), false, &[&a, &b]).not_ts())
            }
            // `scatter_add(x, idx, rows)`.
            (Ty::V(r) | Ty::Mt(r, _), 7) => self.scatter_add_of(ty, r, &avail, d),
            // `tabulate[L](i => v[idx[i]] ...)` over an index array.
            (Ty::V(l) | Ty::Mt(l, _), 8) => self.index_array_tabulate(ty, l, d),
            // A gather `v[idx]` (of a vector's elements or a matrix's
            // rows), or a matrix's row at a run-time index `A[k]`.
            (Ty::V(l) | Ty::Mt(l, _), _) => self.gather_or_row(ty, l, &avail, d),
            _ => None,
        }
    }

    /// `int_float` of kinds 0 to 3: a run-time index `v[k]`, or an
    /// element `A[a, b]` with a run-time index in either position or both,
    /// of an array of a type in `avail`.
    fn runtime_index(&mut self, avail: &[Ty], d: u32) -> Option<Ex> {
        let mut vecs: Vec<Ty> = avail
            .iter()
            .copied()
            .filter(|t| matches!(t, Ty::V(_) | Ty::Mt(..)))
            .collect();
        vecs.retain(|t| !t.uses_n1());
        if vecs.is_empty() {
            return None;
        }
        let t = self.rng.pick(&vecs);
        let v = self.gen(t, d);
        let s = match t {
            Ty::V(r) => {
                let s = format!("{}[{}]", v.s, self.index(r, d));
                tag("run-time index x[k]", &s);
                s
            }
            Ty::Mt(r, c) => {
                let (a, b) = match self.rng.below(3) {
                    0 => (self.index(r, d), self.index(c, d)),
                    1 => (
                        self.index(r, d),
                        self.rng.below(self.known_len(c) as usize).to_string(),
                    ),
                    _ => (
                        self.rng.below(self.known_len(r) as usize).to_string(),
                        self.index(c, d),
                    ),
                };
                let s = format!("{}[{a}, {b}]", v.s);
                tag("run-time index of a matrix element A[a, b]", &s);
                s
            }
            Ty::S => unreachable!(),
        };
        Some(Ex::leaf(s, v.b, false).not_ts())
    }

    /// `int_float` of kind 7: `scatter_add(x, idx, rows)` of type `ty`,
    /// whose index array ranges over `r` (its leading dimension).
    fn scatter_add_of(&mut self, ty: Ty, r: D, avail: &[Ty], d: u32) -> Option<Ex> {
        if r == D::N1 {
            return None;
        }
        let lens: Vec<D> = self
            .index_arrays(None, None)
            .iter()
            .map(|p| p.len.unwrap())
            .collect();
        if lens.is_empty() {
            return None;
        }
        let l = self.rng.pick(&lens);
        let rows_ty = match ty {
            Ty::Mt(_, c) => Ty::Mt(l, c),
            _ => Ty::V(l),
        };
        let ia = self.index_array(l, r, d)?;
        let x = self.gen(ty, d);
        let rows = if self.rng.chance(0.2) {
            Ex::lit(self.rng.pick(LITS))
        } else if avail.contains(&rows_ty) || rows_ty.is_array() {
            self.gen(rows_ty, d)
        } else {
            return None;
        };
        let s = format!("scatter_add({}, {ia}, {})", x.s, rows.s);
        tag("scatter_add", &s);
        if matches!(ty, Ty::Mt(..)) {
            tag("scatter_add of matrix rows", &s);
        }
        Some(Ex::of(s, x.b + dim_max(l) * rows.b, false, &[&x, &rows]).not_ts())
    }

    /// `int_float` of kind 8: `tabulate[L](i => v[idx[i]] ...)` over an
    /// index array of length `l`, of type `ty`.
    fn index_array_tabulate(&mut self, ty: Ty, l: D, d: u32) -> Option<Ex> {
        if self.no_tabulate || l == D::N1 {
            return None;
        }
        let elem = ty.row().unwrap();
        // Values whose rows have type `elem` and an index array of
        // length `l` for them.
        let mut cands: Vec<(usize, IntParam)> = Vec::new();
        for i in self.visible() {
            let v = &self.env[i];
            if v.tab || v.ty.row() != Some(elem) {
                continue;
            }
            for p in self.index_arrays(Some(l), v.ty.lead()) {
                cands.push((i, p));
            }
        }
        if cands.is_empty() {
            return None;
        }
        let (vi, p) = self.rng.pick(&cands);
        let v = self.use_var(vi);
        let i = self.fresh("i");
        let g = format!("{}[{}[{i}]]", v.s, p.name);
        self.tab = Some(Tab {
            len: Len::D(l),
            idx: i.clone(),
        });
        self.no_tabulate = true;
        let rest = self.gen(elem, d);
        self.tab = None;
        self.no_tabulate = false;
        let op = self.rng.pick(&["+", "*", "-"]);
        let conv = if self.rng.chance(0.3) {
            format!(" + f64({}[{i}]) * 0.25", p.name)
        } else {
            String::new()
        };
        let bound = if op == "*" {
            v.b * rest.b
        } else {
            v.b + rest.b
        } + dim_max(D::N) * 0.25;
        let s = format!(
            "tabulate[{}]({i} => {g} {op} {}{conv})",
            self.dim(l),
            rest.s
        );
        tag("tabulate over an index array x[idx[i]]", &s);
        Some(Ex::of(s, bound, false, &[&rest]).not_ts())
    }

    /// `int_float` of an array type `ty` (kinds 0 to 3 and 9): a gather
    /// `v[idx]` of length `l` (of a vector's elements or a matrix's rows),
    /// or a matrix's row at a run-time index `A[k]`.
    fn gather_or_row(&mut self, ty: Ty, l: D, avail: &[Ty], d: u32) -> Option<Ex> {
        if l != D::N1 && self.rng.chance(0.7) {
            let ranges: Vec<D> = self
                .index_arrays(Some(l), None)
                .iter()
                .map(|p| p.range)
                .filter(|&r| match ty {
                    Ty::Mt(_, c) => avail.contains(&Ty::Mt(r, c)),
                    _ => avail.contains(&Ty::V(r)),
                })
                .collect();
            if ranges.is_empty() {
                return None;
            }
            let r = self.rng.pick(&ranges);
            let src = match ty {
                Ty::Mt(_, c) => Ty::Mt(r, c),
                _ => Ty::V(r),
            };
            let x = self.gen(src, d);
            let ia = self.index_array(l, r, d)?;
            let s = format!("{}[{ia}]", x.s);
            tag(
                if src.is_array() && matches!(ty, Ty::Mt(..)) {
                    "gather of matrix rows A[idx]"
                } else {
                    "gather x[idx]"
                },
                &s,
            );
            return Some(Ex::leaf(s, x.b, false).not_ts());
        }
        // A row at a run-time index.
        let Ty::V(c) = ty else { return None };
        let mats: Vec<D> = [D::N, D::M]
            .into_iter()
            .filter(|&r| avail.contains(&Ty::Mt(r, c)))
            .collect();
        if mats.is_empty() {
            return None;
        }
        let r = self.rng.pick(&mats);
        let m = self.gen(Ty::Mt(r, c), d);
        let s = format!("{}[{}]", m.s, self.index(r, d));
        tag("run-time row A[k]", &s);
        Some(Ex::leaf(s, m.b, false).not_ts())
    }
}

// ---------------------------------------------------------------- `match` and random numbers

/// The `match` constructs (tags, counted by program): any run-time
/// `match`, any static one, then by what is taken apart.
pub(crate) const MATCH_TAGS: [&str; 14] = [
    "match: run-time",
    "match: static",
    "match: on a comparison",
    "match: on an i64 from a float (arms NaN where not taken)",
    "match: on a literal or a static expression",
    "match: on a static parameter",
    "match: on `kind: i64[N]`",
    "match: on `mode: i64`",
    "match: on `robust: bool`",
    "match: on `mask: bool[N]`",
    "match: on an integer expression",
    "match: on an index array",
    "match: an arm never taken is NaN",
    "match: a helper passed `kind`",
];

/// The random-number constructs (tags, counted by program).
pub(crate) const KEY_TAGS: [&str; 11] = [
    "keys: random numbers",
    "keys: normal[...]",
    "keys: uniform[...]",
    "keys: split",
    "keys: random_key(seed) of the run-time `seed`",
    "keys: the parameter `key: i64[2]`",
    "keys: a key an earlier draw gave",
    "keys: a dropout mask",
    "keys: noise in an expression",
    "keys: a helper passed a key",
    "keys: a matrix of noise",
];

/// Which arms a `match` may have besides those of its type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Arms {
    /// Only those (a static `match`: the arm taken is its value).
    Typed,
    /// Numbers too (on an `i64[N]` or a `bool[N]`, where egrad does not
    /// broadcast other scalars, see the module doc).
    Numbers,
    /// Numbers and scalars, broadcast to the type of the others.
    Scalars,
}

/// The run-time parameters of the loss that `match` takes apart
/// (`EGRAD_RANDOM_MATCH`), after the integer ones, with the chance each
/// is drawn: `kind: i64[N]` (values from -1 to 3, see `KIND_VALUES`),
/// `mode: i64` (a count to egrad: from 0 to `MODE_MAX`), `robust: bool`
/// and `mask: bool[N]`.
pub(crate) const MATCH_PARAMS: [(&str, f64); 4] = [
    ("kind", 0.6),
    ("mode", 0.35),
    ("robust", 0.35),
    ("mask", 0.25),
];
pub(crate) const KIND_VALUES: [i64; 5] = [-1, 0, 1, 2, 3];
pub(crate) const MODE_MAX: usize = 3;

/// A bound of the magnitude of a standard normal number egrad draws (Box
/// and Muller's with a 32-bit uniform: at most sqrt(-2 log 2^-32) < 6.67).
pub(crate) const NORMAL_MAX: f64 = 6.7;

/// The seeds of `random_key(c)` keys (one past 2^32: a high word too).
pub(crate) const SEEDS: [u64; 7] = [0, 1, 3, 7, 42, 1234, 4_294_967_301];

/// Patterns of `kind`, `mode` and the integers from a float that the check
/// never draws: their arms are never taken (and NaN).
pub(crate) const NEVER: [&str; 4] = ["7", "-5 | 9", "4 | 11", "-4"];

impl Gen<'_> {
    /// The text of `match scrutinee { arms }`: arms (pattern, value)
    /// separated by commas or line breaks.
    pub(crate) fn match_text(&mut self, scrutinee: &str, arms: &[(String, String)]) -> String {
        let arms: Vec<String> = arms.iter().map(|(p, e)| format!("{p} => {e}")).collect();
        if self.rng.chance(0.4) {
            format!("(match {scrutinee} {{\n    {}\n  }})", arms.join("\n    "))
        } else {
            format!("(match {scrutinee} {{ {} }})", arms.join(", "))
        }
    }

    /// An arm giving `ty`, and whether it has that type: unless `full`,
    /// sometimes a number or (`Arms::Scalars`) a scalar, which the other
    /// arms broadcast to it. The `last` arm is never a number (nor a
    /// scalar known at compile time): egrad makes the arms after the
    /// first an `if` of their own, where two numbers would take a type of
    /// their own (`i64`, or `f64` in the f32 copy; see the module doc).
    pub(crate) fn arm(&mut self, ty: Ty, d: u32, full: bool, arms: Arms, last: bool) -> (Ex, bool) {
        let scalars = arms == Arms::Scalars;
        let other = ty != Ty::S && !full && arms != Arms::Typed && (scalars || !last);
        let (e, typed) = if other && self.rng.chance(0.3) {
            if scalars && (last || self.rng.chance(0.6)) {
                (self.gen(Ty::S, d), false)
            } else {
                (Ex::lit(self.rng.pick(LITS)), false)
            }
        } else {
            (self.gen(ty, d), true)
        };
        if last && arms != Arms::Typed && e.k && (ty == Ty::S || !typed) {
            return (self.dynamic_scalar(), typed);
        }
        (e, typed)
    }

    /// An arm that is NaN everywhere: `sqrt(-1 - e * e)` (`e` not known
    /// at compile time).
    pub(crate) fn nan_arm(&mut self, ty: Ty) -> String {
        let mut e = self.leaf(ty);
        if e.k && ty == Ty::S {
            e = self.dynamic_scalar();
        }
        format!("sqrt(-1 - {s} * {s})", s = e.s)
    }

    /// The arms of a `match` on an integer whose values are `values`:
    /// one to three groups of them (`1 | 2`), sometimes (if `nan`) an arm
    /// of values never drawn (`NEVER`) that is NaN, then `_`. The arms give
    /// `ty`: returns them, their values, and whether all have the type.
    pub(crate) fn int_arms(
        &mut self,
        ty: Ty,
        d: u32,
        values: &[i64],
        nan: bool,
        kinds: Arms,
    ) -> (Vec<(String, String)>, Vec<Ex>, bool) {
        let mut vals = values.to_vec();
        self.rng.shuffle(&mut vals);
        let groups = self.rng.range(1, 4).min(vals.len());
        let mut arms = Vec::new();
        let mut parts: Vec<Ex> = Vec::new();
        let mut full_all = true;
        let mut any_full = false;
        for g in 0..groups {
            // (Two values where enough are left for the other groups.)
            let take = if vals.len() > groups - g && self.rng.chance(0.4) {
                2
            } else {
                1
            };
            let pats: Vec<String> = vals.drain(..take).map(|v| v.to_string()).collect();
            let (e, full) = self.arm(ty, d, false, kinds, false);
            any_full |= full;
            full_all &= full;
            arms.push((pats.join(" | "), e.s.clone()));
            parts.push(e);
        }
        if nan && self.rng.chance(0.35) {
            let at = self.rng.below(arms.len() + 1);
            let e = self.nan_arm(ty);
            let pat = self.rng.pick(&NEVER).to_string();
            tag(MATCH_TAGS[12], &format!("{pat} => {e}"));
            arms.insert(at, (pat, e));
        }
        let (e, full) = self.arm(ty, d, !any_full, kinds, true);
        full_all &= full;
        arms.push(("_".into(), e.s.clone()));
        parts.push(e);
        (arms, parts, full_all)
    }

    /// A `match` giving `ty` (`EGRAD_RANDOM_MATCH`), of a form drawn among
    /// those that fit here (`params`: preferring those on the loss's
    /// parameters of its own).
    pub(crate) fn match_expr(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        self.match_of(ty, d, false)
    }

    pub(crate) fn match_of(&mut self, ty: Ty, d: u32, params: bool) -> Option<Ex> {
        // The loss's parameters are not read in a loop's step (it reads
        // only what a loop carries).
        let rt = self.in_long == 0;
        let has = |g: &Self, p: &str| rt && g.mparams.contains(&p);
        let mut on_params = Vec::new();
        if has(self, "kind") && ty == Ty::V(D::N) {
            on_params.extend([3, 3]);
        }
        if has(self, "mask") && ty == Ty::V(D::N) {
            on_params.push(4);
        }
        if has(self, "mode") {
            on_params.push(5);
        }
        if has(self, "robust") {
            on_params.push(6);
        }
        let forms = if params && !on_params.is_empty() {
            on_params
        } else {
            let mut f = vec![0, 0, 1, 1, 2];
            f.extend(on_params);
            if self.int_ok() {
                f.push(7);
                if ty == Ty::V(D::N) && !self.index_arrays(Some(D::N), None).is_empty() {
                    f.push(8);
                }
            }
            f
        };
        let form = self.rng.pick(&forms);
        let e = match form {
            0 => self.match_cond(ty, d),
            1 => self.match_from_float(ty, d),
            2 => Some(self.match_static(ty, d)),
            4 | 6 => {
                let (p, which) = if form == 4 {
                    ("mask", MATCH_TAGS[9])
                } else {
                    ("robust", MATCH_TAGS[8])
                };
                let kinds = if form == 4 {
                    Arms::Numbers
                } else {
                    Arms::Scalars
                };
                let e = self.match_bool(p, ty, d, true, kinds);
                tag(which, &e.s);
                Some(e)
            }
            _ => {
                // (Arms never taken, NaN, on the parameters whose values
                // the check draws: `kind` and `mode`.)
                // (On an array, numbers but no other scalars as arms: see
                // the module doc.)
                let (scrutinee, values, which, nan, kinds) = match form {
                    3 => (
                        "kind".to_string(),
                        KIND_VALUES.to_vec(),
                        MATCH_TAGS[6],
                        true,
                        Arms::Numbers,
                    ),
                    5 => (
                        "mode".into(),
                        (0..=MODE_MAX as i64).collect(),
                        MATCH_TAGS[7],
                        true,
                        Arms::Scalars,
                    ),
                    7 => {
                        let e = self.iexpr(d.min(2));
                        if e.k {
                            return None;
                        }
                        (
                            e.s,
                            (-2..=3).collect(),
                            MATCH_TAGS[10],
                            false,
                            Arms::Scalars,
                        )
                    }
                    _ => {
                        let arrays = self.index_arrays(Some(D::N), None);
                        let p = self.rng.pick(&arrays);
                        let len = self.known_len(p.range) as i64;
                        (
                            p.name.into(),
                            (0..len.max(2)).collect(),
                            MATCH_TAGS[11],
                            false,
                            Arms::Numbers,
                        )
                    }
                };
                let (arms, parts, full) = self.int_arms(ty, d, &values, nan, kinds);
                let text = self.match_text(&scrutinee, &arms);
                tag(which, &text);
                let refs: Vec<&Ex> = parts.iter().collect();
                let b = parts.iter().map(|p| p.b).fold(0.0, f64::max);
                let var = full && parts.iter().all(|p| p.var);
                let mut e = Ex::of(text, b, var, &refs);
                e.k = false;
                e.ts = false;
                Some(e)
            }
        }?;
        if form != 2 {
            tag(MATCH_TAGS[0], &e.s);
        }
        Some(e)
    }

    /// `match c { true => a, false => b }` (or `false` first, or `_` for
    /// the second) on a comparison, like `if`.
    pub(crate) fn match_cond(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        let cshape = if ty != Ty::S && self.rng.chance(0.5) {
            ty
        } else {
            Ty::S
        };
        let c = self.cond(cshape, d.min(2));
        let mut e = self.match_bool(&c.s, ty, d, false, Arms::Scalars);
        e.tab |= c.tab;
        e.ts &= c.ts;
        tag(MATCH_TAGS[2], &e.s);
        Some(e)
    }

    /// `match b { true => x, false => y }` on the bool `b`, its arms in
    /// either order, the second sometimes `_` (`rt`: a parameter, not
    /// `ts`).
    pub(crate) fn match_bool(&mut self, b: &str, ty: Ty, d: u32, rt: bool, kinds: Arms) -> Ex {
        let (x, fx) = self.arm(ty, d, false, kinds, false);
        let (y, fy) = self.arm(ty, d, !fx, kinds, true);
        let pats = if self.rng.chance(0.5) {
            ["true", "false"]
        } else {
            ["false", "true"]
        };
        let second = if self.rng.chance(0.3) { "_" } else { pats[1] };
        let arms = vec![
            (pats[0].to_string(), x.s.clone()),
            (second.to_string(), y.s.clone()),
        ];
        let text = self.match_text(b, &arms);
        let mut e = Ex::of(text, x.b.max(y.b), x.var && y.var && fx && fy, &[&x, &y]);
        e.k = false;
        if rt {
            e.ts = false;
        }
        e
    }

    /// `{ let u = e; match i64(tanh(u) * c) { 1 | 2 => sqrt(u), -1 | -2 =>
    /// log(-u), _ => u * 0.5 } }`: each arm is NaN (or infinite) where it is
    /// not taken; sometimes an arm the integer never takes, NaN everywhere.
    pub(crate) fn match_from_float(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        let a = self.gen(ty, d);
        if a.k {
            return None;
        }
        let u = self.fresh("u");
        // |i64(tanh(u) * c)| >= 1 where |u| >= atanh(1 / c): 0.42 or 0.35.
        let c = self.rng.pick(&[2.5, 3.0]);
        let mut arms = vec![
            (
                self.rng.pick(&["1 | 2", "2 | 1"]).to_string(),
                format!("sqrt({u})"),
            ),
            (
                self.rng.pick(&["-1 | -2", "-2 | -1"]).to_string(),
                format!("log(-{u})"),
            ),
        ];
        let zero = self.rng.chance(0.5);
        if zero {
            arms.push(("0".into(), format!("{u} * 0.5")));
        }
        let nan = self.nan_arm(ty);
        if self.rng.chance(0.3) {
            let pat = self.rng.pick(&NEVER).to_string();
            tag(MATCH_TAGS[12], &format!("{pat} => {nan}"));
            arms.push((pat, nan.clone()));
        }
        self.rng.shuffle(&mut arms);
        let last = if !zero {
            format!("{u} * 0.5")
        } else if self.rng.chance(0.5) {
            tag(MATCH_TAGS[12], &format!("_ => {nan}"));
            nan
        } else {
            format!("{u} * 0.25")
        };
        arms.push(("_".into(), last));
        let m = self.match_text(&format!("i64(tanh({u}) * {})", fmt_lit(c)), &arms);
        let text = format!("({{ let {u} = {}; {m} }})", a.s);
        tag(MATCH_TAGS[3], &text);
        let b = a.b.sqrt().max(a.b.ln()).max(1.1).max(a.b * 0.5);
        let mut e = Ex::of(text, b, a.var, &[&a]);
        e.ts = false;
        Some(e)
    }

    /// A `match` on a value known at compile time: a literal or a static
    /// expression (an integer or a bool), or the static count `n` of the
    /// helper being generated (every arm taken by some call). Only the arm
    /// taken is checked: the others are leaves, sometimes of another type.
    pub(crate) fn match_static(&mut self, ty: Ty, d: u32) -> Ex {
        if let Some(n) = self.static_count.clone() {
            if self.rng.chance(0.6) {
                let (arms, parts, full) =
                    self.int_arms(ty, d.min(2), &[0, 1, 2, 3], false, Arms::Typed);
                let text = self.match_text(&n, &arms);
                tag(MATCH_TAGS[5], &text);
                tag(MATCH_TAGS[1], &text);
                let refs: Vec<&Ex> = parts.iter().collect();
                let b = parts.iter().map(|p| p.b).fold(0.0, f64::max);
                return Ex::of(text, b, full && parts.iter().all(|p| p.var), &refs);
            }
        }
        let taken = self.gen(ty, d);
        let other = |g: &mut Self| -> String {
            let t = if g.tab.is_none() && g.rng.chance(0.25) {
                let avail = g.avail();
                g.rng.pick(&avail)
            } else {
                ty
            };
            g.leaf(t).s
        };
        let (scrutinee, arms) = if self.rng.chance(0.3) {
            let (text, v) = self.rng.pick(&[
                ("true", true),
                ("false", false),
                ("1 < 2", true),
                ("2.5 <= 1", false),
            ]);
            let o = other(self);
            let (t, f) = if v {
                (taken.s.clone(), o)
            } else {
                (o, taken.s.clone())
            };
            let mut arms = vec![("true".to_string(), t), ("false".to_string(), f)];
            if self.rng.chance(0.5) {
                arms.reverse();
            }
            (text.to_string(), arms)
        } else {
            let v = self.rng.below(4) as i64;
            let text = match self.rng.below(4) {
                0 if v >= 1 => format!("{} + 1", v - 1),
                1 => format!("2 * {v} - {v}"),
                2 => format!("({v} + 4) % 4"),
                _ => v.to_string(),
            };
            let mut pats: Vec<i64> = vec![-1, 0, 1, 2, 3];
            self.rng.shuffle(&mut pats);
            let mut arms = Vec::new();
            let mut placed = false;
            let k = self.rng.range(1, 4);
            for p in pats.into_iter().take(k) {
                let e = if p == v {
                    placed = true;
                    taken.s.clone()
                } else {
                    other(self)
                };
                arms.push((p.to_string(), e));
            }
            let e = if placed { other(self) } else { taken.s.clone() };
            arms.push(("_".into(), e));
            (text, arms)
        };
        let m = self.match_text(&scrutinee, &arms);
        tag(MATCH_TAGS[4], &m);
        tag(MATCH_TAGS[1], &m);
        Ex { s: m, ..taken }
    }

    /// A key: one in scope (outside loops' steps), or `random_key(c)`.
    pub(crate) fn key_text(&mut self) -> String {
        if self.in_long == 0 && !self.keys.is_empty() && self.rng.chance(0.6) {
            let k = self.rng.pick(&self.keys);
            // (Tagged by a text only a use of that key has.)
            match k.as_str() {
                "key" => tag(KEY_TAGS[5], "key)"),
                "random_key(seed)" => tag(KEY_TAGS[4], &k),
                "kk" => {}
                _ => tag(KEY_TAGS[6], &format!("{k})")),
            }
            return k;
        }
        format!("random_key({})", self.rng.pick(&SEEDS))
    }

    /// `({ let (z, k) = normal[..](key); e + 0.1 * z })`: noise of `ty`
    /// (`f64[2]` for a scalar, its element 0 read) drawn in an expression,
    /// added, multiplied, or (uniform) a dropout mask.
    pub(crate) fn noise_expr(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        let (z, k) = (self.fresh("z"), self.fresh("k"));
        let normal = self.rng.chance(0.6);
        let dims = match ty {
            Ty::S => "2".to_string(),
            Ty::V(a) => self.dim(a),
            Ty::Mt(a, b) => format!("{}, {}", self.dim(a), self.dim(b)),
        };
        let key = self.key_text();
        let x = self.gen(ty, d);
        let zr = if ty == Ty::S {
            format!("{z}[0]")
        } else {
            z.clone()
        };
        let (dist, zb) = if normal {
            ("normal", NORMAL_MAX)
        } else {
            ("uniform", 1.0)
        };
        let (body, b, var) = match self.rng.below(3) {
            0 if !normal => (
                format!("(if {zr} < 0.2 {{ 0 }} else {{ {} * 1.25 }})", x.s),
                x.b * 1.25,
                false,
            ),
            1 => (
                format!("({} * (1 + 0.1 * {zr}))", x.s),
                x.b * (1.0 + 0.1 * zb),
                x.var,
            ),
            _ => (format!("({} + 0.1 * {zr})", x.s), x.b + 0.1 * zb, true),
        };
        let text = format!("({{ let ({z}, {k}) = {dist}[{dims}]({key}); {body} }})");
        tag(KEY_TAGS[0], &text);
        tag(KEY_TAGS[8], &text);
        tag(if normal { KEY_TAGS[1] } else { KEY_TAGS[2] }, &text);
        if body.starts_with("(if ") {
            tag(KEY_TAGS[7], &text);
        }
        let mut e = Ex::of(text, b, var, &[&x]);
        e.k = false;
        e.ts = false;
        Some(e)
    }
}

/// A noise let of the loss (`EGRAD_RANDOM_KEYS`): `let (z, k) =
/// normal[..](key)` or `uniform[..]` (of a vector or a matrix), from a key
/// in scope, a `split` of one or `random_key(c)`; `z` stays in scope, and
/// often a let uses it at once: noise added (`x + 0.1 * z`), a
/// reparameterised sample (`x + tanh(y) * z`) or a dropout mask (`if z <
/// 0.2 { 0 } else { x * 1.25 }`).
pub(crate) fn noise_let(g: &mut Gen, body: &mut String, lets: &mut Vec<String>, uses_m: bool) {
    let mut key = g.key_text();
    if g.rng.chance(0.3) {
        let (a, b) = (g.fresh("k"), g.fresh("k"));
        let line = format!("let ({a}, {b}) = split({key})");
        let _ = writeln!(body, "  {line}");
        tag(KEY_TAGS[3], &line);
        g.keys.push(b);
        key = a;
    }
    let mut tys = vec![Ty::V(D::N), Ty::V(D::N), Ty::V(D::N1)];
    if uses_m {
        tys.extend([Ty::V(D::M), Ty::Mt(D::N, D::M), Ty::Mt(D::N, D::M)]);
    }
    let ty = g.rng.pick(&tys);
    let normal = g.rng.chance(0.55);
    let (dist, zb) = if normal {
        ("normal", NORMAL_MAX)
    } else {
        ("uniform", 1.0)
    };
    let dims = match ty {
        Ty::Mt(a, b) => format!("{}, {}", g.dim(a), g.dim(b)),
        Ty::V(a) => g.dim(a),
        Ty::S => unreachable!("noise of a vector or a matrix"),
    };
    let (z, k) = (g.fresh("z"), g.fresh("k"));
    let line = format!("let ({z}, {k}) = {dist}[{dims}]({key})");
    let _ = writeln!(body, "  {line}");
    tag(KEY_TAGS[0], &line);
    tag(if normal { KEY_TAGS[1] } else { KEY_TAGS[2] }, &line);
    if matches!(ty, Ty::Mt(..)) {
        tag(KEY_TAGS[10], &line);
    }
    let ze = Ex {
        s: z.clone(),
        b: zb,
        var: true,
        tab: false,
        ts: true,
        k: false,
    };
    g.push_var(&z, &ze, ty);
    lets.push(z.clone());
    g.keys.push(k);
    let depth = g.rng.range(1, max_depth()) as u32;
    let r = g.rng.below(4);
    if r == 3 {
        return;
    }
    let x = g.gen(ty, depth);
    let x = g.bounded(x);
    let (text, b, var) = match r {
        0 if !normal => {
            let text = format!("if {z} < 0.2 {{ 0 }} else {{ {} * 1.25 }}", x.s);
            tag(KEY_TAGS[7], &text);
            (text, x.b * 1.25, false)
        }
        1 => {
            let sty = if g.rng.chance(0.5) { ty } else { Ty::S };
            let y = g.gen(sty, depth);
            (format!("{} + tanh({}) * {z}", x.s, y.s), x.b + zb, true)
        }
        _ => (format!("{} + 0.1 * {z}", x.s), x.b + 0.1 * zb, true),
    };
    g.mark_used(&z);
    let e = Ex::of(text, b, var, &[&x]);
    let e = g.bounded(Ex {
        s: format!("({})", e.s),
        ..e
    });
    let name = g.fresh("a");
    g.bind_let(body, lets, name, &e, ty);
}
