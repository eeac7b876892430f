//! Size expressions (`N+1`, `2*N`, `N*M`, `N+M-1`, ...) in one canonical
//! form, and the binding of size parameters from argument shapes that the
//! checker (at a call) and [`interp::bind_args`](crate::ir::interp::bind_args)
//! (at run time) share.
//!
//! A [`Size`] is a polynomial in the size parameters with integer
//! coefficients: a sum of terms, each a coefficient times a product of
//! parameters. The form is canonical — factors sorted, terms sorted (higher
//! degree first, then by their factors, the constant last), equal terms
//! merged, no zero coefficient — so two expressions that are equal for all
//! sizes compare equal (`N*M` and `M*N`, `2*(N+1)` and `2*N+2`).

use super::Dim;
use std::cmp::Reverse;
use std::collections::HashMap;
use std::fmt;

/// One term of a [`Size`]: `coef` times the product of `factors`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Term {
    /// Size parameter names, sorted; a name repeated is a power.
    factors: Vec<String>,
    /// Never zero in a canonical [`Size`].
    coef: i64,
}

/// A size expression in canonical form (see the module docs). Arithmetic
/// returns `None` when a coefficient overflows an `i64`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Size {
    terms: Vec<Term>,
}

impl Size {
    /// The constant `c`.
    pub fn constant(c: i64) -> Size {
        Size::canonical(vec![Term {
            factors: Vec::new(),
            coef: c,
        }])
        .unwrap_or_default()
    }

    /// The size parameter `p`.
    pub fn param(p: &str) -> Size {
        Size {
            terms: vec![Term {
                factors: vec![p.to_string()],
                coef: 1,
            }],
        }
    }

    /// Sort, merge and drop zero terms.
    fn canonical(mut terms: Vec<Term>) -> Option<Size> {
        for t in &mut terms {
            t.factors.sort();
        }
        terms.sort_by(|a, b| {
            (Reverse(a.factors.len()), &a.factors).cmp(&(Reverse(b.factors.len()), &b.factors))
        });
        let mut out: Vec<Term> = Vec::with_capacity(terms.len());
        for t in terms {
            match out.last_mut() {
                Some(last) if last.factors == t.factors => {
                    last.coef = last.coef.checked_add(t.coef)?;
                }
                _ => out.push(t),
            }
        }
        out.retain(|t| t.coef != 0);
        Some(Size { terms: out })
    }

    /// `self + other`.
    pub fn add(&self, other: &Size) -> Option<Size> {
        Size::canonical(self.terms.iter().chain(&other.terms).cloned().collect())
    }

    /// `self - other`.
    pub fn sub(&self, other: &Size) -> Option<Size> {
        self.add(&other.scale(-1)?)
    }

    /// `c * self`.
    pub fn scale(&self, c: i64) -> Option<Size> {
        let mut terms = Vec::with_capacity(self.terms.len());
        for t in &self.terms {
            terms.push(Term {
                factors: t.factors.clone(),
                coef: t.coef.checked_mul(c)?,
            });
        }
        Size::canonical(terms)
    }

    /// `self * other`.
    pub fn mul(&self, other: &Size) -> Option<Size> {
        let mut terms = Vec::with_capacity(self.terms.len() * other.terms.len());
        for a in &self.terms {
            for b in &other.terms {
                let mut factors = a.factors.clone();
                factors.extend(b.factors.iter().cloned());
                terms.push(Term {
                    factors,
                    coef: a.coef.checked_mul(b.coef)?,
                });
            }
        }
        Size::canonical(terms)
    }

    /// The product of dimensions (an element count; `None` for a tape's
    /// rows other than `p + 1`, or on overflow).
    pub fn product(dims: &[Dim]) -> Option<Size> {
        dims.iter()
            .try_fold(Size::constant(1), |n, d| n.mul(&d.size()?))
    }

    /// The value when no size parameter occurs.
    pub fn as_constant(&self) -> Option<i64> {
        match self.terms.as_slice() {
            [] => Some(0),
            [t] if t.factors.is_empty() => Some(t.coef),
            _ => None,
        }
    }

    /// The size parameters that occur, sorted, each once.
    pub fn params(&self) -> Vec<&str> {
        let mut ps: Vec<&str> = self
            .terms
            .iter()
            .flat_map(|t| t.factors.iter().map(String::as_str))
            .collect();
        ps.sort_unstable();
        ps.dedup();
        ps
    }

    /// The terms: each a coefficient and the parameters it multiplies
    /// (sorted, a name repeated for a power), the constant last.
    pub fn terms(&self) -> impl Iterator<Item = (i64, &[String])> {
        self.terms.iter().map(|t| (t.coef, t.factors.as_slice()))
    }

    /// Whether some coefficient is negative: only then can the size be
    /// negative (size parameters are never).
    pub fn may_be_negative(&self) -> bool {
        self.terms.iter().any(|t| t.coef < 0)
    }

    /// The value under bound size parameters (None if one is unbound or
    /// the value overflows an `i128`).
    pub fn eval(&self, dims: &dyn Fn(&str) -> Option<u64>) -> Option<i128> {
        let mut sum: i128 = 0;
        for t in &self.terms {
            let mut v = i128::from(t.coef);
            for p in &t.factors {
                v = v.checked_mul(i128::from(dims(p)?))?;
            }
            sum = sum.checked_add(v)?;
        }
        Some(sum)
    }

    /// Every parameter `p` replaced by `with(p)` (None if `with` gives
    /// none for a parameter that occurs, or on overflow).
    pub fn substitute(&self, with: &dyn Fn(&str) -> Option<Size>) -> Option<Size> {
        let mut sum = Size::default();
        for t in &self.terms {
            let mut v = Size::constant(t.coef);
            for p in &t.factors {
                v = v.mul(&with(p)?)?;
            }
            sum = sum.add(&v)?;
        }
        Some(sum)
    }

    /// `(c, r)` with `self = c * p + r`, neither mentioning `p`, when `c`
    /// is one term (a number times parameters): then `p = (self - r) / c`
    /// can be read from a value of `self`. None otherwise (`p` squared,
    /// absent, or with a sum for coefficient).
    fn solve_for(&self, p: &str) -> Option<(Size, Size)> {
        let mut coef = Vec::new();
        let mut rest = Vec::new();
        for t in &self.terms {
            match t.factors.iter().filter(|f| *f == p).count() {
                0 => rest.push(t.clone()),
                1 => coef.push(Term {
                    factors: t.factors.iter().filter(|f| *f != p).cloned().collect(),
                    coef: t.coef,
                }),
                _ => return None,
            }
        }
        if coef.len() != 1 {
            return None;
        }
        Some((Size::canonical(coef)?, Size::canonical(rest)?))
    }

    /// `self / d` when `d` is one non-zero term dividing every term
    /// exactly (its coefficient and its factors); None otherwise.
    fn div_exact(&self, d: &Size) -> Option<Size> {
        let [dt] = d.terms.as_slice() else {
            return None;
        };
        let mut terms = Vec::with_capacity(self.terms.len());
        for t in &self.terms {
            if t.coef % dt.coef != 0 {
                return None;
            }
            let mut factors = t.factors.clone();
            for f in &dt.factors {
                let at = factors.iter().position(|g| g == f)?;
                factors.remove(at);
            }
            terms.push(Term {
                factors,
                coef: t.coef / dt.coef,
            });
        }
        Size::canonical(terms)
    }

    /// Parse the text form (`2*N+1`, `M*N`, `N - 1`, `2*(N+1)`): integers,
    /// names, `+`, `-`, `*` and parentheses; canonicalized.
    pub fn parse(s: &str) -> Option<Size> {
        let toks = tokens(s)?;
        let mut pos = 0;
        let v = parse_sum(&toks, &mut pos, 0)?;
        (pos == toks.len()).then_some(v)
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Int(i64),
    Name(String),
    Op(char),
}

fn tokens(s: &str) -> Option<Vec<Token>> {
    let mut out = Vec::new();
    let mut chars = s.char_indices().peekable();
    while let Some(&(i, c)) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c.is_ascii_digit() {
            let mut end = i;
            while let Some(&(j, d)) = chars.peek() {
                if !d.is_ascii_digit() {
                    break;
                }
                end = j + d.len_utf8();
                chars.next();
            }
            out.push(Token::Int(s[i..end].parse().ok()?));
        } else if c.is_alphabetic() || c == '_' {
            let mut end = i;
            while let Some(&(j, d)) = chars.peek() {
                if !(d.is_alphanumeric() || d == '_') {
                    break;
                }
                end = j + d.len_utf8();
                chars.next();
            }
            out.push(Token::Name(s[i..end].to_string()));
        } else if "+-*()".contains(c) {
            out.push(Token::Op(c));
            chars.next();
        } else {
            return None;
        }
    }
    Some(out)
}

/// Parentheses nest at most this deep in the text form.
const MAX_PARENS: usize = 32;

fn parse_sum(toks: &[Token], pos: &mut usize, depth: usize) -> Option<Size> {
    let negate = toks.get(*pos) == Some(&Token::Op('-'));
    if negate {
        *pos += 1;
    }
    let mut v = parse_product(toks, pos, depth)?;
    if negate {
        v = v.scale(-1)?;
    }
    while let Some(Token::Op(c @ ('+' | '-'))) = toks.get(*pos) {
        *pos += 1;
        let r = parse_product(toks, pos, depth)?;
        v = if *c == '+' { v.add(&r)? } else { v.sub(&r)? };
    }
    Some(v)
}

fn parse_product(toks: &[Token], pos: &mut usize, depth: usize) -> Option<Size> {
    let mut v = parse_factor(toks, pos, depth)?;
    while toks.get(*pos) == Some(&Token::Op('*')) {
        *pos += 1;
        v = v.mul(&parse_factor(toks, pos, depth)?)?;
    }
    Some(v)
}

fn parse_factor(toks: &[Token], pos: &mut usize, depth: usize) -> Option<Size> {
    let t = toks.get(*pos)?.clone();
    *pos += 1;
    match t {
        Token::Int(k) => Some(Size::constant(k)),
        Token::Name(n) => Some(Size::param(&n)),
        Token::Op('(') if depth < MAX_PARENS => {
            let v = parse_sum(toks, pos, depth + 1)?;
            (toks.get(*pos) == Some(&Token::Op(')'))).then(|| *pos += 1)?;
            Some(v)
        }
        Token::Op(_) => None,
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.terms.is_empty() {
            return f.write_str("0");
        }
        for (i, t) in self.terms.iter().enumerate() {
            if t.coef < 0 {
                f.write_str("-")?;
            } else if i > 0 {
                f.write_str("+")?;
            }
            let c = t.coef.unsigned_abs();
            if t.factors.is_empty() {
                write!(f, "{c}")?;
                continue;
            }
            if c != 1 {
                write!(f, "{c}*")?;
            }
            f.write_str(&t.factors.join("*"))?;
        }
        Ok(())
    }
}

/// Why an argument's shape does not fit its parameter's (see [`Unifier`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Misfit {
    /// The dimension at this axis differs from what the parameter's type
    /// gives with the sizes bound so far.
    Mismatch(usize),
    /// Reading `param` from this axis gives a negative size.
    Negative(usize, String, Size),
    /// This axis is not a multiple of `param`'s coefficient (`2*N` of odd
    /// length).
    Fraction(usize, String),
    /// `param` cannot be read from this axis (its coefficient is zero at
    /// these sizes, as in `N*M` with `M` = 0) nor from any other.
    Undetermined(usize, String),
}

impl Misfit {
    /// The axis of the argument the misfit is about.
    pub fn axis(&self) -> usize {
        match self {
            Misfit::Mismatch(a)
            | Misfit::Negative(a, ..)
            | Misfit::Fraction(a, _)
            | Misfit::Undetermined(a, _) => *a,
        }
    }
}

/// A dimension to read a size parameter from later (after the plain ones).
#[derive(Clone, Debug)]
struct Pending {
    arg: usize,
    axis: usize,
    pattern: Dim,
    actual: Dim,
}

/// Binds size parameters from the dimensions of arguments: the checker
/// matches a callee's parameter types with the caller's shapes (actual
/// dimensions in the caller's sizes), `bind_args` with a run-time call's
/// (literal dimensions). First, argument by argument in order, a plain
/// dimension `N` binds `N` (or, bound already, must agree) and a literal
/// must match, and an argument that fails binds nothing; then every other
/// dimension (`N+1`, `2*N`, `N*M`, `N-1`) either is checked, when all its
/// parameters are bound, or binds its one unbound parameter when it occurs
/// there linearly with a coefficient of one term (`N+1` binds `N` to the
/// length less 1, `2*N` to half of it, `N*M` with `M` bound to the length
/// divided by `M`), repeated until nothing changes.
/// [`Unifier::determinable`] is the same procedure on the parameters
/// alone: which size parameters some argument fixes.
#[derive(Clone, Debug, Default)]
pub struct Unifier {
    /// The bound size parameters.
    pub bound: HashMap<String, Dim>,
    /// The argument each parameter was bound from.
    pub from: HashMap<String, usize>,
    pending: Vec<Pending>,
    failed: Vec<usize>,
}

impl Unifier {
    /// A unifier with nothing bound.
    pub fn new() -> Unifier {
        Unifier::default()
    }

    /// Argument `arg` of shape `actual` for a parameter of shape `pattern`
    /// (of the same rank): its plain dimensions now, the others kept for
    /// [`Unifier::finish`].
    pub fn add(&mut self, arg: usize, pattern: &[Dim], actual: &[Dim]) -> Result<(), Misfit> {
        let mut trial = self.bound.clone();
        let mut later = Vec::new();
        for (axis, (pd, ad)) in pattern.iter().zip(actual).enumerate() {
            match pd {
                Dim::Param(p) => match trial.get(p) {
                    Some(b) if b != ad => {
                        self.failed.push(arg);
                        return Err(Misfit::Mismatch(axis));
                    }
                    Some(_) => {}
                    None => {
                        trial.insert(p.clone(), ad.clone());
                    }
                },
                Dim::Lit(_) | Dim::Rows(..) if pd != ad => {
                    self.failed.push(arg);
                    return Err(Misfit::Mismatch(axis));
                }
                Dim::Lit(_) | Dim::Rows(..) => {}
                Dim::Sub(..) | Dim::Expr(_) => later.push(Pending {
                    arg,
                    axis,
                    pattern: pd.clone(),
                    actual: ad.clone(),
                }),
            }
        }
        for (p, _) in trial.iter().filter(|(p, _)| !self.bound.contains_key(*p)) {
            self.from.insert(p.clone(), arg);
        }
        self.bound = trial;
        self.pending.extend(later);
        Ok(())
    }

    /// The other dimensions: each checked or binding its one unbound
    /// parameter, until nothing changes. Returns the misfits, at most one
    /// per argument, with the argument's number.
    pub fn finish(&mut self) -> Vec<(usize, Misfit)> {
        let mut misfits: Vec<(usize, Misfit)> = Vec::new();
        let mut pending = std::mem::take(&mut self.pending);
        loop {
            let before = pending.len();
            let mut keep = Vec::new();
            for d in pending {
                if self.failed.contains(&d.arg) {
                    continue;
                }
                match self.step(&d) {
                    Step::Done => {}
                    Step::Wait => keep.push(d),
                    Step::Misfit(m) => {
                        self.failed.push(d.arg);
                        misfits.push((d.arg, m));
                    }
                }
            }
            pending = keep;
            if pending.len() == before {
                break;
            }
        }
        for d in pending {
            if self.failed.contains(&d.arg) {
                continue;
            }
            let unbound = d
                .pattern
                .params()
                .into_iter()
                .find(|p| !self.bound.contains_key(*p));
            self.failed.push(d.arg);
            misfits.push((
                d.arg,
                Misfit::Undetermined(d.axis, unbound.unwrap_or_default().to_string()),
            ));
        }
        misfits.sort_by_key(|(a, _)| *a);
        misfits
    }

    fn step(&mut self, d: &Pending) -> Step {
        let Some(pattern) = d.pattern.size() else {
            return Step::Misfit(Misfit::Mismatch(d.axis));
        };
        let unbound: Vec<&str> = pattern
            .params()
            .into_iter()
            .filter(|p| !self.bound.contains_key(*p))
            .collect();
        let bound = &self.bound;
        let with = |p: &str| bound.get(p).map_or(Some(Size::param(p)), Dim::size);
        let actual = d.actual.size();
        match unbound.as_slice() {
            [] => {
                let want = pattern.substitute(&with);
                if want.is_some() && want == actual {
                    Step::Done
                } else {
                    Step::Misfit(Misfit::Mismatch(d.axis))
                }
            }
            [p] => {
                let Some((coef, rest)) = pattern.solve_for(p) else {
                    return Step::Wait;
                };
                let (Some(coef), Some(rest), Some(actual)) =
                    (coef.substitute(&with), rest.substitute(&with), actual)
                else {
                    return Step::Misfit(Misfit::Mismatch(d.axis));
                };
                let Some(left) = actual.sub(&rest) else {
                    return Step::Misfit(Misfit::Mismatch(d.axis));
                };
                if coef.as_constant() == Some(0) {
                    // `N*M` with `M` = 0: the length must be the rest, and
                    // `N` is left to another argument.
                    return if left.as_constant() == Some(0) {
                        Step::Wait
                    } else {
                        Step::Misfit(Misfit::Mismatch(d.axis))
                    };
                }
                let p = p.to_string();
                let Some(v) = left.div_exact(&coef) else {
                    return Step::Misfit(Misfit::Fraction(d.axis, p));
                };
                let Some(dim) = Dim::from_size(&v) else {
                    return Step::Misfit(Misfit::Negative(d.axis, p, v));
                };
                self.bound.insert(p.clone(), dim);
                self.from.insert(p, d.arg);
                Step::Done
            }
            _ => Step::Wait,
        }
    }

    /// The size parameters among `sizes` that no parameter of shapes
    /// `params` fixes (by the procedure of [`Unifier`], on the parameters
    /// alone): each with whether it occurs in some shape at all.
    pub fn determinable<'a>(
        params: &[&[Dim]],
        sizes: &'a [String],
        bound: &[String],
    ) -> Vec<(&'a str, bool)> {
        let mut known: Vec<&str> = bound.iter().map(String::as_str).collect();
        let mut later = Vec::new();
        for d in params.iter().flat_map(|s| s.iter()) {
            match d {
                Dim::Param(p) => known.push(p),
                _ => later.extend(d.size()),
            }
        }
        loop {
            let mut progress = false;
            for s in &later {
                let unbound: Vec<&str> = s
                    .params()
                    .into_iter()
                    .filter(|p| !known.contains(p))
                    .collect();
                if let [p] = unbound.as_slice() {
                    if s.solve_for(p).is_some() {
                        known.push(p);
                        progress = true;
                    }
                }
            }
            if !progress {
                break;
            }
        }
        let occurs = |p: &str| {
            params
                .iter()
                .flat_map(|s| s.iter())
                .any(|d| d.params().contains(&p))
        };
        sizes
            .iter()
            .filter(|p| !known.contains(&p.as_str()))
            .map(|p| (p.as_str(), occurs(p)))
            .collect()
    }
}

enum Step {
    Done,
    Wait,
    Misfit(Misfit),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t: &str) -> Size {
        Size::parse(t).unwrap_or_else(|| panic!("{t}"))
    }

    #[test]
    fn equal_expressions_have_one_form() {
        assert_eq!(s("N*M"), s("M*N"));
        assert_eq!(s("2*(N+1)"), s("2*N+2"));
        assert_eq!(s("N+M-M"), s("N"));
        assert_eq!(s("(N-1)*2"), s("2*N-2"));
        assert_eq!(s("N*M*2+N"), s("N+2*M*N"));
        assert_eq!(s("N-N"), Size::constant(0));
        for t in [
            "2*N+1",
            "M*N",
            "M+N",
            "2*M*N+N-1",
            "N*N",
            "-N+3",
            "0",
            "7",
            "N-1",
        ] {
            assert_eq!(s(t).to_string(), t);
        }
        assert_eq!(s("N + M").to_string(), "M+N");
        assert!(Size::parse("N+").is_none());
        assert!(Size::parse("2N").is_none());
        assert!(Size::parse("N/2").is_none());
        assert!(Size::parse("(N").is_none());
    }

    #[test]
    fn sizes_evaluate_and_substitute() {
        let dims = |p: &str| match p {
            "N" => Some(4),
            "M" => Some(3),
            _ => None,
        };
        assert_eq!(s("2*M*N+N-1").eval(&dims), Some(27));
        assert_eq!(s("K+1").eval(&dims), None);
        let with = |p: &str| Some(if p == "N" { s("K+1") } else { Size::param(p) });
        assert_eq!(s("2*N").substitute(&with), Some(s("2*K+2")));
        assert!(s("N-1").may_be_negative());
        assert!(!s("N*M+1").may_be_negative());
    }

    fn unify(params: &[&str], actual: &[&str]) -> (Unifier, Vec<(usize, Misfit)>) {
        let dim = |t: &str| Dim::from_size(&s(t)).unwrap();
        let mut u = Unifier::new();
        let mut misfits = Vec::new();
        for (i, (p, a)) in params.iter().zip(actual).enumerate() {
            if let Err(m) = u.add(i, &[dim(p)], &[dim(a)]) {
                misfits.push((i, m));
            }
        }
        misfits.extend(u.finish());
        (u, misfits)
    }

    #[test]
    fn compound_dimensions_bind_or_check() {
        let (u, m) = unify(&["N+1", "2*N"], &["5", "8"]);
        assert!(m.is_empty(), "{m:?}");
        assert_eq!(u.bound["N"], Dim::Lit(4));
        // Bound by the plain dimension first, whatever the order.
        let (u, m) = unify(&["N*M", "M", "N"], &["12", "3", "4"]);
        assert!(m.is_empty(), "{m:?}");
        assert_eq!(u.bound["N"], Dim::Lit(4));
        let (_, m) = unify(&["N", "N+1"], &["3", "5"]);
        assert_eq!(m, vec![(1, Misfit::Mismatch(0))]);
        let (_, m) = unify(&["2*N"], &["5"]);
        assert_eq!(m, vec![(0, Misfit::Fraction(0, "N".into()))]);
        let (_, m) = unify(&["N+1"], &["0"]);
        assert_eq!(
            m,
            vec![(0, Misfit::Negative(0, "N".into(), Size::constant(-1)))]
        );
        let (_, m) = unify(&["N*M", "M"], &["0", "0"]);
        assert_eq!(m, vec![(0, Misfit::Undetermined(0, "N".into()))]);
        // Symbolic: a caller's sizes.
        let (u, m) = unify(&["N+1", "M"], &["K", "2*K"]);
        assert!(m.is_empty(), "{m:?}");
        assert_eq!(u.bound["N"], Dim::Sub("K".into(), 1));
        let (u, m) = unify(&["M*N", "M"], &["2*K*L", "K"]);
        assert!(m.is_empty(), "{m:?}");
        assert_eq!(u.bound["N"], Dim::from_size(&s("2*L")).unwrap());
    }

    #[test]
    fn which_sizes_the_parameters_fix() {
        let dim = |t: &str| Dim::from_size(&s(t)).unwrap();
        let sizes: Vec<String> = ["N", "M", "K"].iter().map(|x| x.to_string()).collect();
        let a = [dim("N+1")];
        let b = [dim("M*N")];
        let left = Unifier::determinable(&[&a, &b], &sizes, &[]);
        assert_eq!(left, vec![("K", false)]);
        let c = [dim("M*N")];
        let left = Unifier::determinable(&[&c], &sizes, &[]);
        assert_eq!(left, vec![("N", true), ("M", true), ("K", false)]);
    }
}
