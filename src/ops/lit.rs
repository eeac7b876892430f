//! Typed floating-point literals ([`Lit`]) and the number syntax they print and parse.

use crate::types::DType;
use std::fmt;

/// A typed floating-point literal. Holds the value's `f64` bit pattern
/// (already rounded to `dtype`), so `-0.0` and `0.0` and NaNs stay distinct
/// and the literal can be hashed (unlike `NotNan`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Lit {
    pub dtype: DType,
    bits: u64,
}

impl Lit {
    pub fn new(dtype: DType, value: f64) -> Lit {
        Lit {
            dtype,
            bits: dtype.round(value).to_bits(),
        }
    }

    pub fn value(self) -> f64 {
        f64::from_bits(self.bits)
    }

    /// The number alone, shortest round-trip form in the literal's precision.
    pub fn number_text(self) -> String {
        match self.dtype {
            DType::F32 => format!("{:?}", self.value() as f32),
            DType::F64 => format!("{:?}", self.value()),
            DType::I64 | DType::Bool => format!("{}", self.value() as i64),
        }
    }

    /// Parse `2.0f32`, `-0.5f64`, `NaNf32`, `inff64`.
    pub fn parse_suffixed(s: &str) -> Option<Lit> {
        let (num, dtype) = if let Some(n) = s.strip_suffix("f32") {
            (n, DType::F32)
        } else if let Some(n) = s.strip_suffix("f64") {
            (n, DType::F64)
        } else {
            return None;
        };
        parse_number(num).map(|v| Lit::new(dtype, v))
    }
}

/// Parse a decimal float as written by [`Lit::number_text`].
pub fn parse_number(s: &str) -> Option<f64> {
    if s.is_empty() || s.starts_with('+') {
        return None;
    }
    let ok = s.chars().all(|c| c.is_ascii_digit() || ".-eE+".contains(c))
        || matches!(s, "NaN" | "inf" | "-inf");
    if !ok {
        return None;
    }
    s.parse::<f64>().ok()
}

impl fmt::Display for Lit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.number_text(), self.dtype)
    }
}
