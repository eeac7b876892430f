//! Element types, dimensions and array types; size expressions
//! ([`size`]) and run-time values ([`value`]). The first room: it imports
//! nothing of egrad's but errors.

pub mod size;
pub mod value;

use size::Size;
use std::fmt;

/// Element type of a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// 32-bit IEEE floating point.
    F32,
    /// 64-bit IEEE floating point.
    F64,
    /// A run-time integer (NumPy's semantics, see `ops::Real for i64`).
    /// A scalar `i64` parameter also gives the value of the size parameter
    /// of its name (a loop count).
    I64,
    /// A run-time `bool`, held as an `i64` 0 or 1 (in native code too).
    /// Only parameters, results and conversions have this type: the front
    /// end computes with conditions as masks (`toi64` of a parameter,
    /// `tobool` of a result).
    Bool,
}

impl DType {
    /// The name in source code: `f32`, `f64`, `i64`.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I64 => "i64",
            DType::Bool => "bool",
        }
    }

    /// Held as an integer in native code (`i64` and `bool`): never active
    /// in AD, never rewritten, computed in scalar code.
    pub fn is_int(self) -> bool {
        match self {
            DType::I64 | DType::Bool => true,
            DType::F32 | DType::F64 => false,
        }
    }

    /// The element type named `s` in source code, if any.
    pub fn from_name(s: &str) -> Option<DType> {
        match s {
            "f32" => Some(DType::F32),
            "f64" => Some(DType::F64),
            "i64" => Some(DType::I64),
            "bool" => Some(DType::Bool),
            _ => None,
        }
    }

    /// Size of one element in bytes.
    pub fn bytes(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F64 | DType::I64 | DType::Bool => 8,
        }
    }

    /// Round an f64 to this dtype (the value stays held in an f64).
    pub fn round(self, x: f64) -> f64 {
        match self {
            DType::F32 => x as f32 as f64,
            // Kept as given: a fractional count is refused where it is
            // bound (`interp::bind_args`), not silently truncated.
            DType::F64 | DType::I64 | DType::Bool => x,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Extent assumed for a size parameter whose value is not known when a
/// choice is made (no `--dim`): the cost model's sizes and the checkpoint
/// intervals offered for a loop with a run-time count.
pub const DEFAULT_DIM: u64 = 1000;

/// One dimension of an array type: a literal size or a size parameter
/// (`N` in `fn f[N](x: f32[N])`), bound at call time from argument shapes,
/// or a size expression of them. Every size has one representation (the
/// first variant that can hold it, see [`Dim::from_size`]), so equal sizes
/// are equal `Dim`s.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dim {
    /// A literal size (`f64[3]`).
    Lit(u64),
    /// A size parameter (`N`).
    Param(String),
    /// A size parameter less a constant (`N-1`, the length of `x[1:]`);
    /// arguments are checked to make it non-negative before anything runs.
    Sub(String, u64),
    /// `⌈p/k⌉ + 1`: the rows of a loop's tape keeping every `k`-th of its
    /// `p` states, and its final state.
    Rows(String, u64),
    /// Any other size expression (`N+1`, `2*N`, `M*N`, `M+N-1`), in the
    /// canonical form of `Size`; arguments are checked to make it
    /// non-negative when it has a negative coefficient.
    Expr(Size),
}

impl Dim {
    /// The extent under bound size parameters (None if unbound or negative).
    pub fn extent(&self, dims: &dyn Fn(&str) -> Option<u64>) -> Option<u64> {
        match self {
            Dim::Lit(k) => Some(*k),
            Dim::Param(p) => dims(p),
            Dim::Sub(p, k) => dims(p)?.checked_sub(*k),
            Dim::Rows(p, k) => dims(p)?.div_ceil((*k).max(1)).checked_add(1),
            Dim::Expr(s) => u64::try_from(s.eval(dims)?).ok(),
        }
    }

    /// The size parameters this dimension depends on.
    pub fn params(&self) -> Vec<&str> {
        match self {
            Dim::Lit(_) => Vec::new(),
            Dim::Param(p) | Dim::Sub(p, _) | Dim::Rows(p, _) => vec![p],
            Dim::Expr(s) => s.params(),
        }
    }

    /// Whether the size can be negative for some sizes (`N-1`, `N-M`):
    /// arguments are checked to make it non-negative.
    pub fn may_be_negative(&self) -> bool {
        match self {
            Dim::Lit(_) | Dim::Param(_) | Dim::Rows(..) => false,
            Dim::Sub(..) => true,
            Dim::Expr(s) => s.may_be_negative(),
        }
    }

    /// The dimension holding size `s`: a literal, `N`, `N-k` or else
    /// [`Dim::Expr`] (None for a negative constant).
    pub fn from_size(s: &Size) -> Option<Dim> {
        if let Some(c) = s.as_constant() {
            return u64::try_from(c).ok().map(Dim::Lit);
        }
        let ps = s.params();
        if let [p] = ps.as_slice() {
            let rest = s.sub(&Size::param(p))?;
            match rest.as_constant() {
                Some(0) => return Some(Dim::Param(p.to_string())),
                Some(c) if c < 0 => return Some(Dim::Sub(p.to_string(), c.unsigned_abs())),
                _ => {}
            }
        }
        Some(Dim::Expr(s.clone()))
    }

    /// The size as an expression (None for the rows of a tape keeping
    /// fewer than every state, and for a literal past `i64::MAX`).
    pub fn size(&self) -> Option<Size> {
        match self {
            Dim::Lit(k) => i64::try_from(*k).ok().map(Size::constant),
            Dim::Param(p) => Some(Size::param(p)),
            Dim::Sub(p, k) => Size::param(p).sub(&Size::constant(i64::try_from(*k).ok()?)),
            // Every state and the final one: `p + 1`.
            Dim::Rows(p, 1) => Size::param(p).add(&Size::constant(1)),
            Dim::Rows(..) => None,
            Dim::Expr(s) => Some(s.clone()),
        }
    }

    /// `self + other` (None for tape rows, on overflow, or if negative).
    pub fn plus(&self, other: &Dim) -> Option<Dim> {
        Dim::from_size(&self.size()?.add(&other.size()?)?)
    }

    /// `self * other` (None for tape rows or on overflow).
    pub fn times(&self, other: &Dim) -> Option<Dim> {
        Dim::from_size(&self.size()?.mul(&other.size()?)?)
    }

    /// The number of elements of an array of this shape, as a dimension
    /// (`1` for a scalar; None for tape rows or on overflow).
    pub fn product(shape: &[Dim]) -> Option<Dim> {
        shape.iter().try_fold(Dim::Lit(1), |acc, d| acc.times(d))
    }

    /// This dimension less `k` (None if a literal would go negative).
    pub fn minus(&self, k: u64) -> Option<Dim> {
        if k == 0 {
            return Some(self.clone());
        }
        match self {
            Dim::Lit(n) => n.checked_sub(k).map(Dim::Lit),
            Dim::Param(p) => Some(Dim::Sub(p.clone(), k)),
            Dim::Sub(p, j) => j.checked_add(k).map(|t| Dim::Sub(p.clone(), t)),
            Dim::Rows(..) => None,
            Dim::Expr(_) => {
                Dim::from_size(&self.size()?.sub(&Size::constant(i64::try_from(k).ok()?))?)
            }
        }
    }
}

fn is_name(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_alphanumeric() || c == '_')
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Lit(n) => write!(f, "{n}"),
            Dim::Param(p) => f.write_str(p),
            Dim::Sub(p, k) => write!(f, "{p}-{k}"),
            Dim::Rows(p, k) => write!(f, "ceil({p}/{k})+1"),
            Dim::Expr(s) => write!(f, "{s}"),
        }
    }
}

/// The type of a value: an element type and a shape (empty = scalar).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Type {
    /// The element type.
    pub dtype: DType,
    /// The extents, outermost first; empty for a scalar.
    pub shape: Vec<Dim>,
}

impl Type {
    /// A scalar of `dtype`.
    pub fn scalar(dtype: DType) -> Type {
        Type {
            dtype,
            shape: Vec::new(),
        }
    }

    /// An array of `dtype` with extents `shape`.
    pub fn array(dtype: DType, shape: Vec<Dim>) -> Type {
        Type { dtype, shape }
    }

    /// Whether the shape is empty.
    pub fn is_scalar(&self) -> bool {
        self.shape.is_empty()
    }

    /// The number of axes (0 for a scalar).
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// The same shape with another element type.
    pub fn with_dtype(&self, dtype: DType) -> Type {
        Type {
            dtype,
            shape: self.shape.clone(),
        }
    }

    /// Number of elements when every dim is a literal.
    pub fn literal_len(&self) -> Option<u64> {
        self.num_elements(&|_| None)
    }

    /// Number of elements given values for the size parameters
    /// (`None` if a parameter is unbound or the product overflows).
    pub fn num_elements(&self, dims: &dyn Fn(&str) -> Option<u64>) -> Option<u64> {
        let mut n: u64 = 1;
        for d in &self.shape {
            n = n.checked_mul(d.extent(dims)?)?;
        }
        Some(n)
    }

    /// Bytes of a value of this type at sizes `dim`, as a real number (a
    /// price, which does not overflow; an extent that cannot be computed,
    /// a negative one, counts 0).
    pub fn bytes_at(&self, dim: &dyn Fn(&str) -> u64) -> f64 {
        let elements: f64 = self
            .shape
            .iter()
            .map(|d| d.extent(&|p| Some(dim(p))).unwrap_or(0) as f64)
            .product();
        elements * self.dtype.bytes() as f64
    }

    /// Parse the text form (`f32`, `f64[N]`, `f32[N, 3]`).
    pub fn parse(s: &str) -> Option<Type> {
        let s = s.trim();
        let (head, rest) = match s.find('[') {
            Some(i) => (&s[..i], Some(&s[i..])),
            None => (s, None),
        };
        let dtype = DType::from_name(head.trim())?;
        let mut shape = Vec::new();
        if let Some(rest) = rest {
            let inner = rest.strip_prefix('[')?.strip_suffix(']')?;
            for part in inner.split(',') {
                let part = part.trim();
                if part.is_empty() {
                    return None;
                }
                if part.chars().all(|c| c.is_ascii_digit()) {
                    shape.push(Dim::Lit(part.parse().ok()?));
                } else if let Some(rows) = part.strip_prefix("ceil(") {
                    let (inner, one) = rows.split_once(")+")?;
                    let (name, k) = inner.split_once('/')?;
                    if one.trim() != "1" || !is_name(name.trim()) {
                        return None;
                    }
                    shape.push(Dim::Rows(name.trim().to_string(), k.trim().parse().ok()?));
                } else {
                    shape.push(Dim::from_size(&Size::parse(part)?)?);
                }
            }
            if shape.is_empty() {
                return None;
            }
        }
        Some(Type { dtype, shape })
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.dtype)?;
        if !self.shape.is_empty() {
            f.write_str("[")?;
            for (i, d) in self.shape.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{d}")?;
            }
            f.write_str("]")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_text_round_trips() {
        for s in [
            "f32",
            "f64[N]",
            "f32[N, 3]",
            "f64[3]",
            "f64[N-1, 2]",
            "f64[ceil(n/4)+1, 2]",
            "f64[N+1]",
            "f64[2*N+1, M*N]",
            "f32[M+N-1, N*N]",
            "i64",
        ] {
            let t = Type::parse(s).unwrap();
            assert_eq!(t.to_string(), s);
        }
        assert!(Type::parse("f16").is_none());
        assert!(Type::parse("f32[]").is_none());
        assert!(Type::parse("f32[N").is_none());
        assert!(Type::parse("f32[N+]").is_none());
        assert!(Type::parse("f32[1-2]").is_none());
        // Canonical forms: the same size written another way.
        assert_eq!(
            Type::parse("f64[N*M, 2*(N+1)]").unwrap().to_string(),
            "f64[M*N, 2*N+2]"
        );
        assert_eq!(
            Type::parse("f64[N+0, 1+2]").unwrap().to_string(),
            "f64[N, 3]"
        );
    }
}
