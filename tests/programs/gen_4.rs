//! Random programs: the generator's expressions (part 4 of 7). See `mod.rs`.

#[allow(unused_imports)]
use super::*;

impl Gen<'_> {
    /// A leaf of type `ty` in the body of a nested `tabulate`: an array
    /// read along the index of any level (`x[i]`, `y[j]`, `A[i]`, at
    /// offsets), an element along two of them (`A[i, j]`, `A[j, i]`,
    /// `A[i][j]`), or an index as a number (`f64(i) * 0.25`).
    pub(crate) fn nested_leaf(&mut self, ty: Ty) -> Option<Ex> {
        let mut levels = self.outer.clone();
        levels.push(self.tab.clone()?);
        let last = levels.len() - 1;
        // (text, name read, var, bound, tag)
        let mut cands: Vec<(String, String, bool, f64, Option<&'static str>)> = Vec::new();
        for (li, t) in levels.iter().enumerate() {
            for (base, var, b, off, row) in self.tab_bases(t.len) {
                let name = base
                    .trim_start_matches("transpose(")
                    .trim_start_matches("reverse(")
                    .trim_end_matches(')')
                    .to_string();
                let ix = at_offset(&t.idx, off);
                if row == ty {
                    cands.push((
                        format!("{base}[{ix}]"),
                        name.clone(),
                        var && (li == last || ty != Ty::S),
                        b,
                        (li != last).then_some(NEST_TAGS[2]),
                    ));
                }
                let Ty::V(c) = row else { continue };
                if ty != Ty::S {
                    continue;
                }
                for (lj, t2) in levels.iter().enumerate() {
                    if lj == li {
                        continue;
                    }
                    for o2 in self.offsets(t2.len, c) {
                        let ix2 = at_offset(&t2.idx, o2);
                        let text = if self.rng.chance(0.3) {
                            format!("{base}[{ix}][{ix2}]")
                        } else {
                            format!("{base}[{ix}, {ix2}]")
                        };
                        cands.push((text, name.clone(), false, b, Some(NEST_TAGS[3])));
                    }
                }
            }
        }
        if ty == Ty::S {
            for t in &levels {
                let b = 0.25 * (self.len_bound(t.len) - 1.0).max(0.0);
                cands.push((
                    format!("(f64({}) * 0.25)", t.idx),
                    String::new(),
                    false,
                    b,
                    Some(NEST_TAGS[4]),
                ));
            }
        }
        if cands.is_empty() {
            return None;
        }
        let (text, name, var, b, what) = self.rng.pick(&cands);
        if !name.is_empty() {
            self.mark_used(&name);
        }
        if let Some(what) = what {
            tag(what, &text);
        }
        let mut e = Ex::leaf(text, b, var);
        e.tab = true;
        Some(e)
    }

    /// One of the nested-`tabulate` constructs giving `ty`: a nested
    /// `tabulate`, one inside the current `tabulate`, an indexed stack, or
    /// a `tabulate` of one (None where none fits here).
    pub(crate) fn nest_construct(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        let mut kinds = Vec::new();
        if self.nest {
            if self.tab.is_none() && !self.no_tabulate {
                kinds.push(0);
            }
            if self.tab.is_some() && self.outer.len() < 2 && !matches!(ty, Ty::Mt(..)) {
                kinds.push(1);
            }
        }
        if self.stack_ix {
            if self.tab.is_some() && ty == Ty::S {
                kinds.extend([2, 2]);
            }
            if self.tab.is_none() && !self.no_tabulate && !matches!(ty, Ty::Mt(..)) {
                kinds.push(3);
            }
        }
        if kinds.is_empty() {
            return None;
        }
        match self.rng.pick(&kinds) {
            0 => self.nested_tab(ty, d),
            1 => self.inner_tab(ty, d),
            2 => self.stack_index(d),
            _ => self.stack_tab(ty, d),
        }
    }

    /// A nested `tabulate` written outside any `tabulate`, giving `ty`:
    /// two levels, sometimes three; the outer body sometimes has lets the
    /// inner one reads.
    pub(crate) fn nested_tab(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        if self.tab.is_some() || self.no_tabulate {
            return None;
        }
        let lens = self.nest_lens();
        let (olen, ilen, shape) = match ty {
            Ty::S => {
                let shape = if self.rng.chance(0.5) {
                    NestShape::Flat
                } else {
                    NestShape::RowSums
                };
                (self.rng.pick(&lens), self.rng.pick(&lens), shape)
            }
            Ty::V(l) => (Len::D(l), self.rng.pick(&lens), NestShape::RowSums),
            Ty::Mt(a, b) => (Len::D(a), Len::D(b), NestShape::Matrix),
        };
        // A third level: summed in the inner body, or (a scalar) the
        // element of a rank-3 result.
        let third = match (shape, self.rng.chance(0.25)) {
            (_, false) => 0,
            (NestShape::Flat, true) if self.rng.chance(0.5) => 2,
            _ => 1,
        };
        let i = self.fresh("i");
        self.tab = Some(Tab {
            len: olen,
            idx: i.clone(),
        });
        self.no_tabulate = true;
        let mark = self.env.len();
        // Lets of the outer body (scalars or rows, of `i` mostly).
        let mut lets = String::new();
        let mut names = Vec::new();
        for _ in 0..self.rng.below(3) {
            let mut tys = vec![Ty::S];
            tys.extend(self.tab_rows().into_iter().filter(|t| t.is_array()));
            let t = self.rng.pick(&tys);
            let mut e = self.gen(t, d);
            if !e.tab {
                // Mostly a value of `i`.
                if let Some(l) = self.tab_leaf(t).filter(|_| self.rng.chance(0.8)) {
                    let op = self.rng.pick(&["+", "*", "-"]);
                    let b = if op == "*" { e.b * l.b } else { e.b + l.b };
                    e = Ex::of(format!("({} {op} {})", e.s, l.s), b, false, &[&e, &l]);
                    e = self.bounded(e);
                }
            }
            let u = self.fresh("u");
            let _ = write!(lets, "let {u} = {}; ", e.s);
            self.push_var(&u, &e, t);
            names.push((u, t, e.b, e.tab));
        }
        let inner = self.inner_tab_text(ilen, third, &names, d);
        self.env.truncate(mark);
        self.tab = None;
        self.no_tabulate = false;
        let inner = inner?;
        let reduce = shape == NestShape::RowSums;
        let core = if reduce {
            format!("(+/{})", inner.s)
        } else {
            inner.s.clone()
        };
        let body = if lets.is_empty() {
            core
        } else {
            format!("{{ {lets}{core} }}")
        };
        let tab = format!("tabulate[{}]({i} => {body})", self.len_text(olen));
        tag(NEST_TAGS[0], &tab);
        if third > 0 {
            tag(NEST_TAGS[1], &tab);
        }
        let (ilen_b, olen_b) = (self.len_bound(ilen), self.len_bound(olen));
        let (text, b) = match (ty, shape) {
            (Ty::S, NestShape::Flat) => {
                let rows = if third == 2 { N_MAX as f64 } else { 1.0 };
                (
                    format!("(+/flatten({tab}))"),
                    olen_b * ilen_b * rows * inner.b,
                )
            }
            (Ty::S, _) => (format!("(+/{tab})"), olen_b * ilen_b * inner.b),
            (_, NestShape::RowSums) => (tab, ilen_b * inner.b),
            _ => (tab, inner.b),
        };
        Some(Ex::leaf(text, b, false).not_ts())
    }

    /// `tabulate[len](j => e)` in the body of the current `tabulate`, `e` a
    /// scalar reading along every index (its bound is `e`'s). `lets` are
    /// the lets of the enclosing body (name, type, bound, depends on its
    /// index), some of which `e` reads. With `third` 1, `e` sums a
    /// `tabulate` of its own; with 2, `e` is one (a rank-3 result).
    pub(crate) fn inner_tab_text(
        &mut self,
        len: Len,
        third: u8,
        lets: &[(String, Ty, f64, bool)],
        d: u32,
    ) -> Option<Ex> {
        let cur = self.tab.clone()?;
        let j = self.fresh("j");
        self.outer.push(cur);
        self.tab = Some(Tab {
            len,
            idx: j.clone(),
        });
        let body = match third {
            0 => Some(self.inner_body(&j, lets, d)),
            _ => {
                let l3 = self.rng.pick(&self.nest_lens());
                self.inner_tab_text(l3, 0, &[], d).map(|e| {
                    if third == 2 {
                        e
                    } else {
                        let s = Ex::of(
                            format!("(+/{})", e.s),
                            self.len_bound(l3) * e.b,
                            false,
                            &[&e],
                        );
                        self.bounded(s)
                    }
                })
            }
        };
        self.tab = self.outer.pop();
        let body = body?;
        let mut e = body.clone();
        e.s = format!("tabulate[{}]({j} => {})", self.len_text(len), body.s);
        e.tab = true;
        e.var = false;
        e.ts = false;
        e.k = false;
        tag(NEST_TAGS[0], &e.s);
        if third > 0 {
            tag(NEST_TAGS[1], &e.s);
        }
        Some(e)
    }

    /// The scalar body of an inner `tabulate` whose index is `j`: a
    /// generated scalar made to read along `j`, sometimes with a let of
    /// the enclosing body (`u`, or `u[j]` of a row) and under an `if` on a
    /// comparison of indices.
    pub(crate) fn inner_body(&mut self, j: &str, lets: &[(String, Ty, f64, bool)], d: u32) -> Ex {
        let mut body = self.gen(Ty::S, d);
        if !mentions(&body.s, j) {
            let mut leaf = None;
            for _ in 0..6 {
                match self.nested_leaf(Ty::S) {
                    Some(l) if mentions(&l.s, j) => {
                        leaf = Some(l);
                        break;
                    }
                    _ => {}
                }
            }
            let l = leaf.unwrap_or_else(|| {
                let b = 0.25 * (self.len_bound(self.tab.as_ref().unwrap().len) - 1.0).max(0.0);
                let mut e = Ex::leaf(format!("(f64({j}) * 0.25)"), b, false);
                e.tab = true;
                e
            });
            let op = self.rng.pick(&["+", "*", "-"]);
            let b = if op == "*" {
                body.b * l.b
            } else {
                body.b + l.b
            };
            body = Ex::of(format!("({} {op} {})", body.s, l.s), b, false, &[&body, &l]);
            body = self.bounded(body);
        }
        // A let of the outer body: a scalar, or a row read along `j`.
        if !lets.is_empty() && self.rng.chance(0.6) {
            let (u, t, b, _) = self.rng.pick(lets);
            let len = self.tab.as_ref().unwrap().len;
            let read = match t {
                Ty::S => Some((u.clone(), b)),
                Ty::V(c) => {
                    let offs = self.offsets(len, c);
                    (!offs.is_empty()).then(|| {
                        let o = self.rng.pick(&offs);
                        (format!("{u}[{}]", at_offset(j, o)), b)
                    })
                }
                Ty::Mt(..) => None,
            };
            if let Some((text, b)) = read {
                self.mark_used(&u);
                let op = self.rng.pick(&["+", "*", "-"]);
                let bound = if op == "*" { body.b * b } else { body.b + b };
                let s = format!("({} {op} {text})", body.s);
                tag(NEST_TAGS[5], &s);
                let mut e = Ex::leaf(s, bound, false);
                e.tab = true;
                e.ts = false;
                body = self.bounded(e);
            }
        }
        // An `if` on a comparison of the indices.
        if self.rng.chance(0.25) {
            let levels: Vec<String> = self.outer.iter().map(|t| t.idx.clone()).collect();
            let i = self.rng.pick(&levels);
            let c = match self.rng.below(5) {
                0 => format!("{j} <= {i}"),
                1 => format!("{i} < {j}"),
                2 => format!("{i} != {j}"),
                3 => format!("{j} % 2 == 0"),
                _ => format!("{i} + {j} >= 2"),
            };
            let other = self.gen(Ty::S, d.min(1));
            let s = if self.rng.chance(0.5) {
                format!("(if {c} {{ {} }} else {{ {} }})", body.s, other.s)
            } else {
                format!("(if {c} {{ {} }} else {{ {} }})", other.s, body.s)
            };
            tag(NEST_TAGS[6], &s);
            let mut e = Ex::of(s, body.b.max(other.b), false, &[&body, &other]);
            e.tab = true;
            e.k = false;
            body = e;
        }
        body
    }

    /// A nested `tabulate` in the body of the current `tabulate` (at most
    /// three levels in all): `(+/tabulate[L](j => e))` for a scalar, or
    /// `tabulate[c](j => e)` for a row `f64[c]`.
    pub(crate) fn inner_tab(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        let len = match ty {
            Ty::S => self.rng.pick(&self.nest_lens()),
            Ty::V(c) => Len::D(c),
            Ty::Mt(..) => return None,
        };
        let e = self.inner_tab_text(len, 0, &[], d)?;
        if ty == Ty::S {
            let mut s = Ex::of(
                format!("(+/{})", e.s),
                self.len_bound(len) * e.b,
                false,
                &[&e],
            );
            s.tab = true;
            Some(s.not_ts())
        } else {
            Some(e)
        }
    }

    /// A scalar in the body of a `tabulate`: a row that depends on its
    /// index (a stack), indexed with a static index, the index of a
    /// `tabulate` (where the row is at least as long), a run-time index
    /// (with run-time integers) or an element of an index array at the
    /// index of a `tabulate` (`ix[i]`).
    pub(crate) fn stack_index(&mut self, d: u32) -> Option<Ex> {
        let tab = self.tab.clone()?;
        let mut levels = self.outer.clone();
        levels.push(tab);
        // Rows read along an index, or vectors from outside (times a
        // scalar that depends on the index); mostly a length an index
        // array indexes, where there is one.
        let mut rows: Vec<D> = self
            .tab_rows()
            .into_iter()
            .chain(self.avail())
            .filter_map(|t| match t {
                Ty::V(c) => Some(c),
                _ => None,
            })
            .collect();
        if rows.is_empty() {
            return None;
        }
        // (Not in a loop's step, which reads only what a loop carries.)
        let ints = self.int_ok();
        let indexed: Vec<D> = rows
            .iter()
            .copied()
            .filter(|&c| ints && !self.index_arrays(None, Some(c)).is_empty())
            .collect();
        if !indexed.is_empty() && self.rng.chance(0.7) {
            rows = indexed;
        }
        let c = self.rng.pick(&rows);
        let mut e = self.gen(Ty::V(c), d);
        if !e.tab {
            let l = match self.tab_leaf(Ty::V(c)) {
                Some(l) if self.rng.chance(0.6) => Some(l),
                _ => self.tab_leaf(Ty::S),
            };
            if let Some(l) = l {
                let op = if l.s.contains('[') && self.rng.chance(0.5) {
                    "*"
                } else {
                    self.rng.pick(&["+", "*", "-"])
                };
                let b = if op == "*" { e.b * l.b } else { e.b + l.b };
                e = Ex::of(format!("({} {op} {})", e.s, l.s), b, false, &[&e, &l]);
                e = self.bounded(e);
            }
        }
        let fits: Vec<String> = levels
            .iter()
            .filter(|t| self.offsets(t.len, c).contains(&0))
            .map(|t| t.idx.clone())
            .collect();
        let arrays: Vec<(String, String)> = self
            .index_arrays(None, Some(c))
            .iter()
            .filter(|_| ints)
            .flat_map(|p| {
                levels
                    .iter()
                    .filter(|t| self.offsets(t.len, p.len.unwrap()).contains(&0))
                    .map(|t| (p.name.to_string(), t.idx.clone()))
                    .collect::<Vec<_>>()
            })
            .collect();
        let mut kinds = vec![0];
        if !fits.is_empty() {
            kinds.extend([1, 1]);
        }
        if self.int_ok() {
            kinds.extend([2, 2]);
        }
        if !arrays.is_empty() {
            kinds.extend([3, 3, 3, 3]);
        }
        let (ix, what) = match self.rng.pick(&kinds) {
            0 => (
                self.rng.below(self.known_len(c) as usize).to_string(),
                STACK_TAGS[0],
            ),
            1 => (self.rng.pick(&fits), STACK_TAGS[1]),
            2 => (self.index(c, d), STACK_TAGS[2]),
            _ => {
                let (p, i) = self.rng.pick(&arrays);
                (format!("{p}[{i}]"), STACK_TAGS[3])
            }
        };
        let text = format!("({})[{ix}]", e.s);
        if e.tab {
            tag(what, &text);
        }
        let mut r = Ex::leaf(text, e.b, false).not_ts();
        r.tab = true;
        Some(r)
    }

    /// A `tabulate` (outside any) whose body indexes a stack: a vector,
    /// or its sum for a scalar.
    pub(crate) fn stack_tab(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        if self.tab.is_some() || self.no_tabulate {
            return None;
        }
        let len = match ty {
            Ty::V(l) => Len::D(l),
            Ty::S => self.rng.pick(&self.nest_lens()),
            Ty::Mt(..) => return None,
        };
        let i = self.fresh("i");
        self.tab = Some(Tab {
            len,
            idx: i.clone(),
        });
        self.no_tabulate = true;
        let body = self.stack_index(d).map(|e| {
            if self.rng.chance(0.5) {
                let o = self.gen(Ty::S, d);
                let op = self.rng.pick(&["+", "*", "-"]);
                let b = if op == "*" { e.b * o.b } else { e.b + o.b };
                let mut r = Ex::of(format!("({} {op} {})", e.s, o.s), b, false, &[&e, &o]);
                r.tab = true;
                self.bounded(r)
            } else {
                e
            }
        });
        self.tab = None;
        self.no_tabulate = false;
        let body = body?;
        let tab = format!("tabulate[{}]({i} => {})", self.len_text(len), body.s);
        Some(
            match ty {
                Ty::S => Ex::leaf(format!("(+/{tab})"), self.len_bound(len) * body.b, false),
                _ => Ex::leaf(tab, body.b, false),
            }
            .not_ts(),
        )
    }
}

// ---------------------------------------------------------------- loops

// ---------------------------------------------------------------- run-time integers

/// A run-time `i64` parameter of the loss (`EGRAD_RANDOM_INTS`): a scalar
/// index or an index array, whose values the check draws in range (see
/// `int_range`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct IntParam {
    pub(crate) name: &'static str,
    /// Its length (an index array), or None (a scalar).
    pub(crate) len: Option<D>,
    /// The dimension its values index (each is in `0 .. that length`).
    pub(crate) range: D,
}

/// The run-time integer parameters a loss may have: `k` and `j` index
/// along `N` and `M`, `ix: i64[N]` and `iy: i64[M]` along `N`, `jx:
/// i64[N]` along `M`.
pub(crate) const INT_PARAMS: [IntParam; 5] = [
    IntParam {
        name: "k",
        len: None,
        range: D::N,
    },
    IntParam {
        name: "j",
        len: None,
        range: D::M,
    },
    IntParam {
        name: "ix",
        len: Some(D::N),
        range: D::N,
    },
    IntParam {
        name: "iy",
        len: Some(D::M),
        range: D::N,
    },
    IntParam {
        name: "jx",
        len: Some(D::N),
        range: D::M,
    },
];

/// The dimension an `i64` parameter of this name indexes (its values are
/// drawn in `0 .. that length`), or None (a run-time count `n`).
pub(crate) fn int_range(name: &str) -> Option<D> {
    INT_PARAMS.iter().find(|p| p.name == name).map(|p| p.range)
}

/// A generated `i64` scalar expression.
#[derive(Clone, Debug)]
pub(crate) struct IEx {
    /// Source text, always an operand.
    pub(crate) s: String,
    /// An upper bound of its magnitude, whatever the float inputs (a float
    /// becomes an integer only as `i64(tanh(e) * c)`), so integers never
    /// come near 2^53 (see `int_float`).
    pub(crate) b: f64,
    /// Known at compile time (literals only).
    pub(crate) k: bool,
}

/// The largest magnitude of a generated integer before it is wrapped with
/// `% 7`.
pub(crate) const INT_LIMIT: f64 = 500.0;

impl Gen<'_> {
    /// Run-time integers may be written here: the loss has some, and this
    /// is not a loop's (or a scan's) step, which reads from outside only
    /// what a loop carries along its state.
    pub(crate) fn int_ok(&self) -> bool {
        !self.ints.is_empty() && self.in_long == 0
    }

    /// The index arrays of length `len` (any, if None) whose values index
    /// along `range` (any, if None).
    pub(crate) fn index_arrays(&self, len: Option<D>, range: Option<D>) -> Vec<IntParam> {
        self.ints
            .iter()
            .filter(|p| {
                p.len.is_some()
                    && len.is_none_or(|l| p.len == Some(l))
                    && range.is_none_or(|r| p.range == r)
            })
            .copied()
            .collect()
    }

    /// An integer literal from 0 to 5.
    pub(crate) fn int_lit(&mut self) -> IEx {
        let v = self.rng.below(6);
        IEx {
            s: v.to_string(),
            b: v as f64,
            k: true,
        }
    }

    /// A leaf of an integer expression that is known only at run time: a
    /// scalar parameter, an element of an index array, an integer from a
    /// bounded float, or a call of the helper with an `i64` result.
    pub(crate) fn int_leaf(&mut self, d: u32) -> IEx {
        loop {
            match self.rng.below(5) {
                0 | 1 => {
                    let scalars: Vec<IntParam> = self
                        .ints
                        .iter()
                        .filter(|p| p.len.is_none())
                        .copied()
                        .collect();
                    if scalars.is_empty() {
                        continue;
                    }
                    let p = self.rng.pick(&scalars);
                    let b = dim_max(p.range) - 1.0;
                    return IEx {
                        s: p.name.into(),
                        b,
                        k: false,
                    };
                }
                2 => {
                    let arrays = self.index_arrays(None, None);
                    if arrays.is_empty() {
                        continue;
                    }
                    let p = self.rng.pick(&arrays);
                    let c = self.rng.below(self.known_len(p.len.unwrap()) as usize);
                    return IEx {
                        s: format!("{}[{c}]", p.name),
                        b: dim_max(p.range) - 1.0,
                        k: false,
                    };
                }
                3 => return self.float_to_int(d),
                _ => {
                    let Some((h, hb)) = self.int_helper.clone() else {
                        continue;
                    };
                    if !self.avail().contains(&Ty::V(D::N)) {
                        continue;
                    }
                    let v = self.hoist(|g| g.gen(Ty::V(D::N), d.min(1)));
                    // A scalar `i64` parameter is a count: the helper takes a
                    // parameter or a literal, not a computed integer.
                    let k = match self
                        .ints
                        .iter()
                        .find(|p| p.len.is_none() && p.range == D::N)
                    {
                        Some(p) if self.rng.chance(0.8) => p.name.to_string(),
                        _ => self.rng.below(self.known_len(D::N) as usize).to_string(),
                    };
                    let s = format!("{h}({}, {k})", v.s);
                    tag("helper with an i64 result", &s);
                    return IEx { s, b: hb, k: false };
                }
            }
        }
    }

    /// `i64(tanh(e) * c)`: an integer from a float, bounded even for
    /// infinite or NaN `e` (NaN converts to 0).
    pub(crate) fn float_to_int(&mut self, d: u32) -> IEx {
        let e = self.hoist(|g| g.gen(Ty::S, d.min(1)));
        let c = self.rng.pick(&[2.0, 3.0, 4.0, 2.5]);
        let s = format!("i64(tanh({}) * {})", e.s, fmt_lit(c));
        tag("i64(...) of a float", &s);
        // Of a float known at compile time, the integer is too (and may
        // be 0: `i64(tanh(0.5) * 2)`).
        IEx { s, b: c, k: e.k }
    }

    /// A scalar `i64` expression: integer arithmetic, `max`, `min`, `abs`
    /// and `if` on integer conditions, never far from 0.
    pub(crate) fn iexpr(&mut self, d: u32) -> IEx {
        if d == 0 || self.rng.chance(0.25) {
            return if self.rng.chance(0.2) {
                self.int_lit()
            } else {
                self.int_leaf(d)
            };
        }
        let d = d - 1;
        let mut e = match self.rng.below(10) {
            0..=5 => {
                let a = self.iexpr(d);
                let mut b = self.iexpr(d);
                if a.k && b.k {
                    // (Static integers fold at compile time, `/` truncating.)
                    b = self.int_leaf(d);
                }
                let mut op = self.rng.pick(&["+", "-", "*", "/", "%", "+", "*"]);
                if matches!(op, "/" | "%") && b.k {
                    // A divisor known at compile time may be 0, a compile
                    // error (found by the soak, seed 0x903b8640d02b3e15):
                    // keep it away from 0, or add two static integers.
                    if a.k {
                        op = "+";
                    } else {
                        b = IEx {
                            s: format!("(1 + abs({}))", b.s),
                            b: 1.0 + b.b,
                            k: true,
                        };
                    }
                }
                let bound = match op {
                    "+" | "-" => a.b + b.b,
                    "*" => a.b * b.b,
                    "/" => a.b,
                    _ => b.b,
                };
                let s = format!("({} {op} {})", a.s, b.s);
                tag("integer arithmetic", &s);
                IEx {
                    s,
                    b: bound,
                    k: false,
                }
            }
            6 | 7 => {
                let a = self.iexpr(d);
                if self.rng.chance(0.3) {
                    let s = format!("abs({})", a.s);
                    tag("integer max, min or abs", &s);
                    IEx { s, b: a.b, k: a.k }
                } else {
                    let mut b = self.iexpr(d);
                    if a.k && b.k {
                        b = self.int_leaf(d);
                    }
                    let f = if self.rng.chance(0.5) { "max" } else { "min" };
                    let s = format!("{f}({}, {})", a.s, b.s);
                    tag("integer max, min or abs", &s);
                    IEx {
                        s,
                        b: a.b.max(b.b),
                        k: false,
                    }
                }
            }
            _ => {
                let c = self.icond(d);
                let a = self.iexpr(d);
                let b = self.iexpr(d);
                let s = format!(
                    "(if {c} {{ {} }} else {{ {} }})",
                    self.int_value(&a),
                    self.int_value(&b)
                );
                tag("if on an integer condition", &s);
                IEx {
                    s,
                    b: a.b.max(b.b),
                    k: false,
                }
            }
        };
        if e.b > INT_LIMIT {
            e = IEx {
                s: format!("({} % 7)", e.s),
                b: 6.0,
                k: e.k,
            };
        }
        e
    }

    /// The text of `e` where a value is wanted: a scalar `i64` parameter is
    /// a count to egrad, not a value a function or an `if` may give
    /// (`fn f(k: i64) -> i64 = k` and `if c { k } else { k + 1 }` are
    /// errors: see the module doc), so it is written `(k + 0)` there.
    pub(crate) fn int_value(&self, e: &IEx) -> String {
        if self.ints.iter().any(|p| p.len.is_none() && p.name == e.s) {
            format!("({} + 0)", e.s)
        } else {
            e.s.clone()
        }
    }

    /// A comparison of run-time integers.
    pub(crate) fn icond(&mut self, d: u32) -> String {
        let a = self.iexpr(d.min(1));
        let mut b = self.iexpr(d.min(1));
        if a.k && b.k {
            b = self.int_leaf(0);
        }
        let op = self.rng.pick(&["<", "<=", ">", ">=", "==", "!="]);
        let s = format!("({} {op} {})", a.s, b.s);
        tag("integer comparison", &s);
        s
    }

    /// A scalar index of an array whose leading dimension is `range`: in
    /// range whatever the inputs (a parameter drawn in range, `% len` or a
    /// clamp to `0 .. len` with the length known for sure here).
    pub(crate) fn index(&mut self, range: D, d: u32) -> String {
        let len = self.known_len(range);
        loop {
            match self.rng.below(6) {
                0 | 1 => {
                    let ps: Vec<IntParam> = self
                        .ints
                        .iter()
                        .filter(|p| p.len.is_none() && p.range == range)
                        .copied()
                        .collect();
                    if ps.is_empty() {
                        continue;
                    }
                    return self.rng.pick(&ps).name.to_string();
                }
                2 => {
                    let arrays = self.index_arrays(None, Some(range));
                    if arrays.is_empty() {
                        continue;
                    }
                    let p = self.rng.pick(&arrays);
                    let c = self.rng.below(self.known_len(p.len.unwrap()) as usize);
                    return format!("{}[{c}]", p.name);
                }
                3 => {
                    let e = self.iexpr(d);
                    if e.k {
                        continue;
                    }
                    let s = format!("({} % {len})", e.s);
                    tag("index: an integer % the length", &s);
                    return s;
                }
                4 => {
                    let e = if self.rng.chance(0.5) {
                        self.float_to_int(d)
                    } else {
                        self.iexpr(d)
                    };
                    if e.k {
                        continue;
                    }
                    let s = format!("min(max({}, 0), {})", e.s, len - 1);
                    tag("index: an integer clamped to the length", &s);
                    return s;
                }
                _ => {
                    let e = self.float_to_int(d);
                    let s = format!("({} % {len})", e.s);
                    tag("index: i64(...) of a float % the length", &s);
                    return s;
                }
            }
        }
    }
}
