//! Runtime values: dense row-major arrays of one element type.
//!
//! Elements are held as `f64`; an `f32` value holds numbers that are exactly
//! representable in `f32` (every operation rounds to `f32`), so the reference
//! interpreter computes in the program's own precision.

use super::DType;
use std::fmt;

/// A run-time value: a scalar or an array of one element type.
#[derive(Clone, Debug, PartialEq)]
pub struct Value {
    /// The element type; `data` holds values exactly representable in it.
    pub dtype: DType,
    /// Concrete extents, outermost first; empty for a scalar.
    pub shape: Vec<usize>,
    /// The elements in row-major order, widened to `f64`.
    pub data: Vec<f64>,
}

impl Value {
    /// A scalar, `x` rounded to `dtype`.
    pub fn scalar(dtype: DType, x: f64) -> Value {
        Value {
            dtype,
            shape: Vec::new(),
            data: vec![dtype.round(x)],
        }
    }

    /// An array of extents `shape`, elements row-major, each rounded to `dtype`.
    pub fn array(dtype: DType, shape: Vec<usize>, data: Vec<f64>) -> Value {
        debug_assert_eq!(shape.iter().product::<usize>(), data.len());
        let data = data.into_iter().map(|x| dtype.round(x)).collect();
        Value { dtype, shape, data }
    }

    /// A vector of `f32`.
    pub fn f32(xs: &[f32]) -> Value {
        Value {
            dtype: DType::F32,
            shape: vec![xs.len()],
            data: xs.iter().map(|&x| x as f64).collect(),
        }
    }

    /// A vector of `f64`.
    pub fn f64(xs: &[f64]) -> Value {
        Value {
            dtype: DType::F64,
            shape: vec![xs.len()],
            data: xs.to_vec(),
        }
    }

    /// Whether the shape is empty.
    pub fn is_scalar(&self) -> bool {
        self.shape.is_empty()
    }

    /// The number of elements (1 for a scalar).
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether there are no elements (an array with a zero extent).
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The single element of a scalar (or the first element of an array).
    pub fn as_scalar(&self) -> f64 {
        self.data.first().copied().unwrap_or(f64::NAN)
    }

    /// The same numbers in another precision (rounding when narrowing).
    pub fn cast(&self, dtype: DType) -> Value {
        Value::array(dtype, self.shape.clone(), self.data.clone())
    }

    /// Bitwise equality in the value's own precision (NaNs of equal bits match).
    pub fn bits_eq(&self, other: &Value) -> bool {
        self.dtype == other.dtype
            && self.shape == other.shape
            && self
                .data
                .iter()
                .zip(&other.data)
                .all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()))
    }
}

/// Format one element the way the CLI prints it: shortest round-trip digits,
/// no trailing `.0` for integral values, exponent form for very large/small.
pub fn format_elem(dtype: DType, x: f64) -> String {
    let s = match dtype {
        DType::F32 => fmt_float(
            x as f32 as f64,
            |v| format!("{}", v as f32),
            |v| format!("{:e}", v as f32),
        ),
        DType::F64 => fmt_float(x, |v| format!("{v}"), |v| format!("{v:e}")),
        DType::I64 => format!("{}", x as i64),
        DType::Bool => (x != 0.0).to_string(),
    };
    s
}

fn fmt_float(x: f64, plain: impl Fn(f64) -> String, exp: impl Fn(f64) -> String) -> String {
    let a = x.abs();
    if x == 0.0 || !x.is_finite() || (1e-5..1e16).contains(&a) {
        plain(x)
    } else {
        exp(x)
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_scalar() {
            return f.write_str(&format_elem(self.dtype, self.as_scalar()));
        }
        f.write_str("[")?;
        for (i, x) in self.data.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(&format_elem(self.dtype, *x))?;
        }
        f.write_str("]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_a_user_expects() {
        assert_eq!(
            Value::f32(&[252.0, 315.0, 378.0]).to_string(),
            "[252, 315, 378]"
        );
        assert_eq!(Value::scalar(DType::F32, 0.1).to_string(), "0.1");
        assert_eq!(Value::scalar(DType::F64, 1e-30).to_string(), "1e-30");
        assert_eq!(Value::scalar(DType::F64, -0.0).to_string(), "-0");
    }
}
