//! The `.npy` header: the magic string, the version, the Python dict
//! literal that gives the element type, the order and the shape.

use super::NpyType;
use crate::error::{Error, Result};
use std::fmt;

/// A parsed header: the element type, the shape, the number of elements
/// and where they start.
#[derive(Debug)]
pub(super) struct Header {
    pub(super) dtype: NpyType,
    pub(super) shape: Vec<usize>,
    pub(super) len: usize,
    pub(super) offset: usize,
}

/// An error in the file `name`.
pub(super) fn bad(name: &str, what: impl fmt::Display) -> Error {
    Error::Io {
        path: name.to_string(),
        message: format!("cannot read {name}: {what}"),
    }
}

pub(super) const MAGIC: &[u8] = b"\x93NUMPY";

/// Parse the header of the `.npy` image `b` and check that its elements
/// fit in `b`.
pub(super) fn parse(b: &[u8], name: &str) -> Result<Header> {
    if b.len() < MAGIC.len() || &b[..MAGIC.len()] != MAGIC {
        return Err(bad(
            name,
            "not a .npy file (it does not start with \\x93NUMPY); write it with numpy.save",
        ));
    }
    let (major, minor) = match b.get(6..8) {
        Some(v) => (v[0], v[1]),
        None => return Err(bad(name, "the header is truncated")),
    };
    let (len_bytes, start): (usize, usize) = match major {
        1 => (2, 10),
        2 | 3 => (4, 12),
        _ => {
            return Err(bad(
                name,
                format!("format version {major}.{minor} is not one egrad reads (1.0, 2.0, 3.0)"),
            ))
        }
    };
    let Some(lb) = b.get(8..8 + len_bytes) else {
        return Err(bad(name, "the header is truncated"));
    };
    let hlen = lb
        .iter()
        .rev()
        .fold(0usize, |a, &x| (a << 8) | usize::from(x));
    let Some(text) = start.checked_add(hlen).and_then(|end| b.get(start..end)) else {
        return Err(bad(
            name,
            format!(
                "the header is truncated (it says {hlen} bytes; the file has {})",
                b.len().saturating_sub(start)
            ),
        ));
    };
    let text = std::str::from_utf8(text)
        .map_err(|_| bad(name, "the header is not text (corrupt file?)"))?;
    let dict = DictParser::new(text).dict().map_err(|e| {
        bad(
            name,
            format!("the header `{}` is corrupt: {e}", text.trim_end()),
        )
    })?;
    let mut descr = None;
    let mut fortran = None;
    let mut shape = None;
    for (k, v) in dict {
        match (k.as_str(), v) {
            ("descr", Lit::Str(s)) => descr = Some(s),
            ("fortran_order", Lit::Bool(f)) => fortran = Some(f),
            ("shape", Lit::Tuple(t)) => shape = Some(t),
            ("descr" | "fortran_order" | "shape", v) => {
                return Err(bad(
                    name,
                    format!("the header's `{k}` is {v:?}, which is not NumPy's"),
                ))
            }
            // Later format versions may add keys; NumPy ignores none yet.
            _ => {}
        }
    }
    let (Some(descr), Some(fortran), Some(shape)) = (descr, fortran, shape) else {
        return Err(bad(
            name,
            "the header lacks one of `descr`, `fortran_order`, `shape`",
        ));
    };
    let dtype = npy_type(&descr).ok_or_else(|| {
        bad(
            name,
            format!(
                "its dtype is {} (`{descr}`); egrad reads float64, float32, int64 and bool, little endian: convert with a.astype(np.float64) (or the parameter's type)",
                dtype_name(&descr)
            ),
        )
    })?;
    let len = shape
        .iter()
        .try_fold(1usize, |a, &k| a.checked_mul(k))
        .ok_or_else(|| {
            bad(
                name,
                "its shape has more elements than this machine can count",
            )
        })?;
    if fortran && shape.iter().filter(|&&k| k > 1).count() > 1 {
        return Err(bad(
            name,
            "it is in Fortran (column-major) order; egrad reads C order: save np.ascontiguousarray(a)",
        ));
    }
    let offset = start + hlen;
    let need = len
        .checked_mul(dtype.size())
        .and_then(|n| n.checked_add(offset));
    match need {
        Some(n) if n <= b.len() => {}
        _ => {
            return Err(bad(
                name,
                format!(
                    "the file is truncated: shape {} of {} needs {} bytes of elements, it has {}",
                    shape_text(&shape),
                    dtype_name(&descr),
                    len.saturating_mul(dtype.size()),
                    b.len() - offset
                ),
            ))
        }
    }
    Ok(Header {
        dtype,
        shape,
        len,
        offset,
    })
}

/// `(3, 4)`, as Python writes a shape.
pub(super) fn shape_text(shape: &[usize]) -> String {
    match shape {
        [] => "()".into(),
        [n] => format!("({n},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|k| k.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn npy_type(descr: &str) -> Option<NpyType> {
    let little = cfg!(target_endian = "little");
    Some(match descr {
        "<f8" => NpyType::F64,
        "<f4" => NpyType::F32,
        "<i8" => NpyType::I64,
        "=f8" if little => NpyType::F64,
        "=f4" if little => NpyType::F32,
        "=i8" if little => NpyType::I64,
        "|b1" | "<b1" | "=b1" | ">b1" => NpyType::Bool,
        _ => return None,
    })
}

/// NumPy's name for a `descr`, as far as egrad can tell.
fn dtype_name(descr: &str) -> String {
    let order = match descr.as_bytes().first() {
        Some(b'>') => " big endian",
        _ => "",
    };
    let body = descr.trim_start_matches(['<', '>', '=', '|']);
    let name = match body {
        "f8" => "float64",
        "f4" => "float32",
        "f2" => "float16",
        "i8" => "int64",
        "i4" => "int32",
        "i2" => "int16",
        "i1" => "int8",
        "u8" => "uint64",
        "u4" => "uint32",
        "u2" => "uint16",
        "u1" => "uint8",
        "b1" => "bool",
        "c8" => "complex64",
        "c16" => "complex128",
        _ if body.starts_with('O') => "object",
        _ if body.starts_with('U') || body.starts_with('S') => "a string type",
        _ => return format!("`{descr}`"),
    };
    format!("{name}{order}")
}

/// A value in an `.npy` header.
#[derive(Debug, Clone)]
enum Lit {
    Str(String),
    Bool(bool),
    Tuple(Vec<usize>),
}

/// A parser for the Python dict literals of `.npy` headers.
struct DictParser<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> DictParser<'a> {
    fn new(s: &'a str) -> Self {
        DictParser {
            s: s.as_bytes(),
            i: 0,
        }
    }

    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: u8) -> std::result::Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(format!("expected `{}` at byte {}", c as char, self.i))
        }
    }

    fn dict(&mut self) -> std::result::Result<Vec<(String, Lit)>, String> {
        self.expect(b'{')?;
        let mut out = Vec::new();
        loop {
            if self.eat(b'}') {
                break;
            }
            let k = self.string()?;
            self.expect(b':')?;
            let v = self.value()?;
            out.push((k, v));
            if !self.eat(b',') {
                self.expect(b'}')?;
                break;
            }
        }
        self.ws();
        if self.i != self.s.len() {
            return Err(format!("unexpected text after the dict at byte {}", self.i));
        }
        Ok(out)
    }

    fn string(&mut self) -> std::result::Result<String, String> {
        self.ws();
        let q = match self.s.get(self.i) {
            Some(&q @ (b'\'' | b'"')) => q,
            _ => return Err(format!("expected a string at byte {}", self.i)),
        };
        self.i += 1;
        let start = self.i;
        while self.i < self.s.len() && self.s[self.i] != q {
            if self.s[self.i] == b'\\' {
                return Err("escapes in header strings are not NumPy's".into());
            }
            self.i += 1;
        }
        if self.i == self.s.len() {
            return Err("unterminated string".into());
        }
        let s = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
        self.i += 1;
        Ok(s)
    }

    fn value(&mut self) -> std::result::Result<Lit, String> {
        self.ws();
        match self.s.get(self.i) {
            Some(b'\'' | b'"') => Ok(Lit::Str(self.string()?)),
            Some(b'(') => {
                self.i += 1;
                let mut t = Vec::new();
                loop {
                    if self.eat(b')') {
                        break;
                    }
                    t.push(self.int()?);
                    if !self.eat(b',') {
                        self.expect(b')')?;
                        break;
                    }
                }
                Ok(Lit::Tuple(t))
            }
            _ => {
                for (word, b) in [("True", true), ("False", false)] {
                    if self.s[self.i..].starts_with(word.as_bytes()) {
                        self.i += word.len();
                        return Ok(Lit::Bool(b));
                    }
                }
                Err(format!("unexpected value at byte {}", self.i))
            }
        }
    }

    fn int(&mut self) -> std::result::Result<usize, String> {
        self.ws();
        let start = self.i;
        while self.i < self.s.len() && self.s[self.i].is_ascii_digit() {
            self.i += 1;
        }
        let digits = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
        if digits.is_empty() {
            return Err(format!("expected an extent at byte {start}"));
        }
        // `L` of Python 2's long integers.
        if self.s.get(self.i) == Some(&b'L') {
            self.i += 1;
        }
        digits
            .parse()
            .map_err(|_| format!("extent {digits} is too large"))
    }
}
