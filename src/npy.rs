//! NumPy's array files: `.npy` read through a memory map and written, and
//! `.npz` archives (zip files of `.npy` members, as `np.savez` and
//! `np.savez_compressed` write them) read and written.
//!
//! The format is NumPy's own ("NEP 1", `numpy.lib.format`): a magic string
//! `\x93NUMPY`, a version, a header that is a Python dict literal
//! (`{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }`), then
//! the elements. egrad reads the element types it computes with — `<f8`,
//! `<f4`, `<i8` and `|b1` (float64, float32, int64, bool) — in C order.
//! Anything else (another dtype, Fortran order, a truncated file, a header
//! that is not such a dict) is an error that names the file and says what
//! to do.
//!
//! **Without a copy.** An `.npy` file (or an uncompressed `.npz` member)
//! whose elements are `f64`, `f32` or `i64`, little endian on a little
//! endian machine and aligned in the file (NumPy pads the header to 64
//! bytes, so `.npy` files are), is memory mapped and its elements are
//! borrowed in place ([`Array::view`]): a 1 GB argument costs no copy and
//! no read until native code touches it. A `bool` array is widened to the
//! `i64` 0/1 that native code reads, and a member that is compressed or
//! misaligned is decoded into memory; [`Array::is_mapped`] tells which. As
//! with any memory map, the file must not be changed by another process
//! while egrad runs.
//!
//! Written here rather than taken from a crate: the format is small
//! (about as much code as an adapter to a crate's types), the crates that
//! read it either copy every array into their own array type or do not
//! memory map, and the zip members `np.savez` writes are read in place
//! from the same map. Compressed members are inflated with `miniz_oxide`.

use crate::error::{Error, Result};
use crate::types::value::Value;
use crate::types::DType;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

/// The elements of an array, borrowed in the layout native code reads:
/// `bool` as an `i64` 0 or 1 per element.
#[derive(Clone, Copy, Debug)]
pub enum View<'a> {
    /// `float64` elements.
    F64(&'a [f64]),
    /// `float32` elements.
    F32(&'a [f32]),
    /// `int64` elements.
    I64(&'a [i64]),
    /// `bool` elements, each 0 or 1.
    Bool(&'a [i64]),
}

impl View<'_> {
    /// Element `i`, widened to `f64` (as [`Value`] holds elements).
    pub fn get(&self, i: usize) -> f64 {
        match self {
            View::F64(v) => v[i],
            View::F32(v) => v[i] as f64,
            View::I64(v) | View::Bool(v) => v[i] as f64,
        }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        match self {
            View::F64(v) => v.len(),
            View::F32(v) => v.len(),
            View::I64(v) | View::Bool(v) => v.len(),
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Owned elements in native layout.
#[derive(Clone, Debug)]
enum Owned {
    F64(Vec<f64>),
    F32(Vec<f32>),
    I64(Vec<i64>),
    Bool(Vec<i64>),
}

#[derive(Clone, Debug)]
enum Storage {
    /// `len` elements of the array's dtype at byte `offset` of the map.
    Mapped {
        map: Arc<memmap2::Mmap>,
        offset: usize,
    },
    Owned(Owned),
}

/// An array read from a `.npy` file or an `.npz` member.
#[derive(Clone, Debug)]
pub struct Array {
    /// The element type.
    pub dtype: DType,
    /// The extents, outermost first (empty for a 0-d array).
    pub shape: Vec<usize>,
    len: usize,
    storage: Storage,
}

impl Array {
    /// Read the `.npy` file at `path`, mapping it when its elements can be
    /// used in place.
    pub fn open(path: &Path) -> Result<Array> {
        let (map, shown) = map_file(path, "a .npy file")?;
        let header = parse(&map[..], &shown)?;
        Ok(Array::place(header, Source::Map(map.clone()), 0, &map[..]))
    }

    /// Read a `.npy` image held in memory (an `.npz` member); `name` is
    /// what errors call it.
    pub fn from_bytes(bytes: &[u8], name: &str) -> Result<Array> {
        let header = parse(bytes, name)?;
        Ok(Array::place(header, Source::Copy, 0, bytes))
    }

    /// An array of `value`'s dtype, shape and elements (owned).
    pub fn from_value(value: &Value) -> Array {
        let owned = match value.dtype {
            DType::F64 => Owned::F64(value.data.clone()),
            DType::F32 => Owned::F32(value.data.iter().map(|&x| x as f32).collect()),
            DType::I64 => Owned::I64(value.data.iter().map(|&x| x as i64).collect()),
            DType::Bool => Owned::Bool(value.data.iter().map(|&x| i64::from(x != 0.0)).collect()),
        };
        Array {
            dtype: value.dtype,
            shape: value.shape.clone(),
            len: value.data.len(),
            storage: Storage::Owned(owned),
        }
    }

    /// The array whose header is `h`, its elements `bytes[base + h.offset..]`,
    /// borrowed from the map when `source` is one and the layout allows.
    fn place(h: Header, source: Source, base: usize, bytes: &[u8]) -> Array {
        let data = &bytes[h.offset..h.offset + h.len * h.dtype.size()];
        if let Source::Map(map) = source {
            if h.dtype.in_place() && in_place_ok(data, h.dtype) {
                return Array {
                    dtype: h.dtype.dtype(),
                    shape: h.shape,
                    len: h.len,
                    storage: Storage::Mapped {
                        map,
                        offset: base + h.offset,
                    },
                };
            }
        }
        Array {
            dtype: h.dtype.dtype(),
            shape: h.shape,
            len: h.len,
            storage: Storage::Owned(decode(h.dtype, data)),
        }
    }

    /// Bytes of memory the elements take (0 when mapped from a file).
    pub fn owned_bytes(&self) -> u64 {
        match &self.storage {
            Storage::Mapped { .. } => 0,
            Storage::Owned(o) => {
                let size = match o {
                    Owned::F32(_) => 4,
                    _ => 8,
                };
                self.len as u64 * size
            }
        }
    }

    /// Whether the elements are read in place from a memory map (no copy).
    pub fn is_mapped(&self) -> bool {
        matches!(self.storage, Storage::Mapped { .. })
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The elements, in place.
    pub fn view(&self) -> View<'_> {
        match &self.storage {
            Storage::Owned(Owned::F64(v)) => View::F64(v),
            Storage::Owned(Owned::F32(v)) => View::F32(v),
            Storage::Owned(Owned::I64(v)) => View::I64(v),
            Storage::Owned(Owned::Bool(v)) => View::Bool(v),
            Storage::Mapped { map, offset } => {
                let bytes = &map[*offset..];
                match self.dtype {
                    DType::F64 => View::F64(&cast::<f64>(bytes)[..self.len]),
                    DType::F32 => View::F32(&cast::<f32>(bytes)[..self.len]),
                    DType::I64 => View::I64(&cast::<i64>(bytes)[..self.len]),
                    // Never mapped: widened to i64 when read.
                    DType::Bool => unreachable!("bool arrays are decoded, not mapped"),
                }
            }
        }
    }

    /// A [`Value`] of the same dtype, shape and elements (a copy).
    pub fn to_value(&self) -> Value {
        let v = self.view();
        Value {
            dtype: self.dtype,
            shape: self.shape.clone(),
            data: (0..v.len()).map(|i| v.get(i)).collect(),
        }
    }
}

/// The file at `path` mapped read only, and its name as errors show it;
/// an empty file is not `what`.
fn map_file(path: &Path, what: &str) -> Result<(Arc<memmap2::Mmap>, String)> {
    let shown = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| Error::io("read", &shown, e))?;
    let size = file
        .metadata()
        .map_err(|e| Error::io("read", &shown, e))?
        .len();
    if size == 0 {
        return Err(bad(&shown, format!("the file is empty, not {what}")));
    }
    // SAFETY: the map is read only, and egrad documents that the file must
    // not change while it runs (as every memory map requires); every read
    // of it is bounds-checked against the map's length.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io("map", &shown, e))?;
    Ok((Arc::new(map), shown))
}

/// Where the bytes being read live.
enum Source {
    Map(Arc<memmap2::Mmap>),
    Copy,
}

/// `bytes`, at least `size_of::<T>()`-aligned, as `T`s (trailing bytes
/// dropped). Only for plain number types, where every bit pattern is a
/// value.
fn cast<T: Plain>(bytes: &[u8]) -> &[T] {
    // SAFETY: `T` is a plain number type (`Plain`), so every bit pattern
    // is a valid `T`; `align_to` only hands out the aligned middle, which
    // the caller checked starts at the first byte (`in_place_ok`).
    let (head, mid, _) = unsafe { bytes.align_to::<T>() };
    assert!(head.is_empty(), "a mapped array is aligned (in_place_ok)");
    mid
}

/// Number types for which every bit pattern is a value.
trait Plain: Copy {}
impl Plain for f64 {}
impl Plain for f32 {}
impl Plain for i64 {}

/// Whether `data` can be borrowed as elements of `dtype`: aligned, and the
/// machine is little endian like the file.
fn in_place_ok(data: &[u8], dtype: NpyType) -> bool {
    cfg!(target_endian = "little") && (data.as_ptr() as usize).is_multiple_of(dtype.size())
}

/// The element types egrad reads and writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NpyType {
    F64,
    F32,
    I64,
    Bool,
}

impl NpyType {
    fn size(self) -> usize {
        match self {
            NpyType::F64 | NpyType::I64 => 8,
            NpyType::F32 => 4,
            NpyType::Bool => 1,
        }
    }

    fn dtype(self) -> DType {
        match self {
            NpyType::F64 => DType::F64,
            NpyType::F32 => DType::F32,
            NpyType::I64 => DType::I64,
            NpyType::Bool => DType::Bool,
        }
    }

    fn of(dtype: DType) -> NpyType {
        match dtype {
            DType::F64 => NpyType::F64,
            DType::F32 => NpyType::F32,
            DType::I64 => NpyType::I64,
            DType::Bool => NpyType::Bool,
        }
    }

    /// Can native code read this type in place?
    fn in_place(self) -> bool {
        self != NpyType::Bool
    }

    fn descr(self) -> &'static str {
        match self {
            NpyType::F64 => "<f8",
            NpyType::F32 => "<f4",
            NpyType::I64 => "<i8",
            NpyType::Bool => "|b1",
        }
    }
}

/// Decode little-endian elements into native layout.
fn decode(t: NpyType, data: &[u8]) -> Owned {
    match t {
        NpyType::F64 => Owned::F64(
            data.chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect(),
        ),
        NpyType::F32 => Owned::F32(
            data.chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
                .collect(),
        ),
        NpyType::I64 => Owned::I64(
            data.chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect(),
        ),
        NpyType::Bool => Owned::Bool(data.iter().map(|&b| i64::from(b != 0)).collect()),
    }
}

/// A parsed header: the element type, the shape, the number of elements
/// and where they start.
#[derive(Debug)]
struct Header {
    dtype: NpyType,
    shape: Vec<usize>,
    len: usize,
    offset: usize,
}

/// An error in the file `name`.
fn bad(name: &str, what: impl fmt::Display) -> Error {
    Error::Io {
        path: name.to_string(),
        message: format!("cannot read {name}: {what}"),
    }
}

const MAGIC: &[u8] = b"\x93NUMPY";

/// Parse the header of the `.npy` image `b` and check that its elements
/// fit in `b`.
fn parse(b: &[u8], name: &str) -> Result<Header> {
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
fn shape_text(shape: &[usize]) -> String {
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

/// The `.npy` image of `value`: a version 1.0 header (2.0 when the header
/// would not fit) padded so the elements start at a multiple of 64 bytes,
/// then the elements, little endian.
pub fn to_npy(value: &Value) -> Vec<u8> {
    let t = NpyType::of(value.dtype);
    let dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
        t.descr(),
        shape_text(&value.shape)
    );
    let mut out = Vec::with_capacity(128 + value.data.len() * t.size());
    out.extend_from_slice(MAGIC);
    // Header text + '\n', padded with spaces to a multiple of 64 with the
    // preamble (10 bytes in 1.0, 12 in 2.0).
    let v1 = dict.len() + 1 + 10 <= 65535;
    let pre = if v1 { 10 } else { 12 };
    let total = (pre + dict.len() + 1).div_ceil(64) * 64;
    let hlen = total - pre;
    if v1 {
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&(hlen as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&[2, 0]);
        out.extend_from_slice(&(hlen as u32).to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out.resize(total - 1, b' ');
    out.push(b'\n');
    for &x in &value.data {
        match t {
            NpyType::F64 => out.extend_from_slice(&x.to_le_bytes()),
            NpyType::F32 => out.extend_from_slice(&(x as f32).to_le_bytes()),
            NpyType::I64 => out.extend_from_slice(&(x as i64).to_le_bytes()),
            NpyType::Bool => out.push(u8::from(x != 0.0)),
        }
    }
    out
}

/// Write `value` to the `.npy` file `path`.
pub fn write_npy(path: &Path, value: &Value) -> Result<()> {
    std::fs::write(path, to_npy(value)).map_err(|e| Error::io("write", path.display(), e))
}

/// Write the named arrays to the `.npz` file `path` (uncompressed, as
/// `np.savez` writes; each member `NAME.npy`).
pub fn write_npz(path: &Path, arrays: &[(String, Value)]) -> Result<()> {
    let shown = path.display().to_string();
    let members: Vec<(String, Vec<u8>)> = arrays
        .iter()
        .map(|(k, v)| (format!("{k}.npy"), to_npy(v)))
        .collect();
    let bytes =
        zip::write(&members).map_err(|e| Error::Limit(format!("cannot write {shown}: {e}")))?;
    std::fs::write(path, bytes).map_err(|e| Error::io("write", &shown, e))
}

/// Read every member of the `.npz` file `path`, in archive order, named
/// without the `.npy` suffix. Uncompressed members are mapped in place
/// when aligned, as [`Array::open`] does.
pub fn read_npz(path: &Path) -> Result<Vec<(String, Array)>> {
    let (map, shown) = map_file(path, "a .npz archive")?;
    let entries = zip::entries(&map[..]).map_err(|e| bad(&shown, e))?;
    let mut out = Vec::new();
    for e in entries {
        let Some(key) = e.name.strip_suffix(".npy") else {
            return Err(bad(
                &shown,
                format!(
                    "member `{}` is not a .npy array (write the archive with numpy.savez)",
                    e.name
                ),
            ));
        };
        let member = format!("{shown}, member {}", e.name);
        let array = match e.method {
            zip::Method::Stored => {
                let bytes = &map[e.data.clone()];
                check_crc(bytes, e.crc, &member)?;
                let h = parse(bytes, &member)?;
                Array::place(h, Source::Map(map.clone()), e.data.start, bytes)
            }
            zip::Method::Deflated => {
                let bytes = miniz_oxide::inflate::decompress_to_vec_with_limit(
                    &map[e.data.clone()],
                    e.size,
                )
                .map_err(|err| bad(&member, format!("cannot inflate it: {err:?}")))?;
                if bytes.len() != e.size {
                    return Err(bad(
                        &member,
                        "it inflates to another size than the archive says",
                    ));
                }
                check_crc(&bytes, e.crc, &member)?;
                Array::from_bytes(&bytes, &member)?
            }
        };
        out.push((key.to_string(), array));
    }
    Ok(out)
}

fn check_crc(bytes: &[u8], want: u32, name: &str) -> Result<()> {
    if zip::crc32(bytes) != want {
        return Err(bad(
            name,
            "its CRC-32 does not match the archive's (corrupt file?)",
        ));
    }
    Ok(())
}

/// The few parts of the zip format that `.npz` archives use.
mod zip {
    use std::ops::Range;

    /// How a member is stored.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Method {
        Stored,
        Deflated,
    }

    /// A member of an archive.
    #[derive(Debug)]
    pub struct Entry {
        pub name: String,
        pub method: Method,
        pub crc: u32,
        /// Uncompressed size.
        pub size: usize,
        /// The member's (possibly compressed) bytes in the archive.
        pub data: Range<usize>,
    }

    fn u16_at(b: &[u8], at: usize) -> Result<u16, String> {
        b.get(at..at + 2)
            .map(|s| u16::from_le_bytes([s[0], s[1]]))
            .ok_or_else(|| "the archive is truncated".to_string())
    }

    fn u32_at(b: &[u8], at: usize) -> Result<u32, String> {
        b.get(at..at + 4)
            .map(|s| u32::from_le_bytes(s.try_into().expect("4 bytes")))
            .ok_or_else(|| "the archive is truncated".to_string())
    }

    fn u64_at(b: &[u8], at: usize) -> Result<u64, String> {
        b.get(at..at + 8)
            .map(|s| u64::from_le_bytes(s.try_into().expect("8 bytes")))
            .ok_or_else(|| "the archive is truncated".to_string())
    }

    fn usize_of(x: u64) -> Result<usize, String> {
        usize::try_from(x).map_err(|_| "an offset in the archive is too large".to_string())
    }

    /// The members listed in the central directory of `b`.
    pub fn entries(b: &[u8]) -> Result<Vec<Entry>, String> {
        // The end-of-central-directory record: 22 bytes and a comment of
        // up to 65535, at the end.
        let lo = b.len().saturating_sub(22 + 65535);
        let eocd = (lo..=b.len().saturating_sub(22))
            .rev()
            .find(|&i| b[i..].starts_with(&[0x50, 0x4b, 0x05, 0x06]))
            .ok_or("not a .npz archive (no zip directory; write it with numpy.savez)")?;
        let mut count = u64::from(u16_at(b, eocd + 10)?);
        let mut cd = u64::from(u32_at(b, eocd + 16)?);
        if count == 0xFFFF || cd == 0xFFFF_FFFF {
            // Zip64: the locator just before the record points at the
            // zip64 end record.
            let loc = eocd.checked_sub(20).ok_or("the zip64 locator is missing")?;
            if u32_at(b, loc)? != 0x0706_4b50 {
                return Err("the zip64 locator is missing".into());
            }
            let rec = usize_of(u64_at(b, loc + 8)?)?;
            if u32_at(b, rec)? != 0x0606_4b50 {
                return Err("the zip64 end record is corrupt".into());
            }
            count = u64_at(b, rec + 32)?;
            cd = u64_at(b, rec + 48)?;
        }
        let mut at = usize_of(cd)?;
        let mut out = Vec::new();
        for _ in 0..count {
            if u32_at(b, at)? != 0x0201_4b50 {
                return Err("the zip directory is corrupt".into());
            }
            let flags = u16_at(b, at + 8)?;
            let method = match u16_at(b, at + 10)? {
                0 => Method::Stored,
                8 => Method::Deflated,
                m => {
                    return Err(format!(
                        "a member is compressed with zip method {m}; egrad reads stored and deflated members (numpy.savez, numpy.savez_compressed)"
                    ))
                }
            };
            if flags & 1 != 0 {
                return Err("a member is encrypted".into());
            }
            let crc = u32_at(b, at + 16)?;
            let mut csize = u64::from(u32_at(b, at + 20)?);
            let mut usize_ = u64::from(u32_at(b, at + 24)?);
            let name_len = usize::from(u16_at(b, at + 28)?);
            let extra_len = usize::from(u16_at(b, at + 30)?);
            let comment_len = usize::from(u16_at(b, at + 32)?);
            let mut local = u64::from(u32_at(b, at + 42)?);
            let name = b
                .get(at + 46..at + 46 + name_len)
                .ok_or("the archive is truncated")?;
            let name = String::from_utf8_lossy(name).into_owned();
            // Zip64 extended information: the 0xFFFFFFFF fields, in order.
            let mut e = at + 46 + name_len;
            let extra_end = e + extra_len;
            while e + 4 <= extra_end {
                let id = u16_at(b, e)?;
                let len = usize::from(u16_at(b, e + 2)?);
                if id == 1 {
                    let mut f = e + 4;
                    for field in [&mut usize_, &mut csize, &mut local] {
                        if *field == 0xFFFF_FFFF && f + 8 <= e + 4 + len {
                            *field = u64_at(b, f)?;
                            f += 8;
                        }
                    }
                }
                e += 4 + len;
            }
            let local = usize_of(local)?;
            if u32_at(b, local)? != 0x0403_4b50 {
                return Err(format!("member `{name}`: its local header is corrupt"));
            }
            let start = local
                + 30
                + usize::from(u16_at(b, local + 26)?)
                + usize::from(u16_at(b, local + 28)?);
            let end = start
                .checked_add(usize_of(csize)?)
                .filter(|&end| end <= b.len())
                .ok_or_else(|| format!("member `{name}` is truncated"))?;
            out.push(Entry {
                name,
                method,
                crc,
                size: usize_of(usize_)?,
                data: start..end,
            });
            at = extra_end + comment_len;
        }
        Ok(out)
    }

    /// CRC-32 (IEEE 802.3, reflected), as zip uses.
    pub fn crc32(bytes: &[u8]) -> u32 {
        static TABLE: std::sync::OnceLock<[u32; 256]> = std::sync::OnceLock::new();
        let table = TABLE.get_or_init(|| {
            let mut t = [0u32; 256];
            for (i, slot) in t.iter_mut().enumerate() {
                let mut c = i as u32;
                for _ in 0..8 {
                    c = if c & 1 != 0 {
                        0xEDB8_8320 ^ (c >> 1)
                    } else {
                        c >> 1
                    };
                }
                *slot = c;
            }
            t
        });
        !bytes.iter().fold(!0u32, |c, &x| {
            table[((c ^ u32::from(x)) & 0xFF) as usize] ^ (c >> 8)
        })
    }

    /// An archive of `members` (name, bytes), stored uncompressed. Members
    /// and the archive must stay under 4 GiB (no zip64).
    pub fn write(members: &[(String, Vec<u8>)]) -> Result<Vec<u8>, String> {
        let too_big = || {
            "an .npz archive over 4 GiB is not supported: write each result to its own .npy with --out DIR".to_string()
        };
        let mut out = Vec::new();
        let mut dir = Vec::new();
        for (name, data) in members {
            let offset = u32::try_from(out.len()).map_err(|_| too_big())?;
            let size = u32::try_from(data.len()).map_err(|_| too_big())?;
            let crc = crc32(data);
            let name_len = u16::try_from(name.len()).map_err(|_| "a result name is too long")?;
            // Local header: version 2.0, no flags, stored, DOS time 1980-01-01.
            out.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
            for x in [20u16, 0, 0, 0, 0x21] {
                out.extend_from_slice(&x.to_le_bytes());
            }
            for x in [crc, size, size] {
                out.extend_from_slice(&x.to_le_bytes());
            }
            out.extend_from_slice(&name_len.to_le_bytes());
            out.extend_from_slice(&0u16.to_le_bytes());
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(data);
            // Central directory entry.
            dir.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
            for x in [20u16, 20, 0, 0, 0, 0x21] {
                dir.extend_from_slice(&x.to_le_bytes());
            }
            for x in [crc, size, size] {
                dir.extend_from_slice(&x.to_le_bytes());
            }
            for x in [name_len, 0, 0, 0, 0] {
                dir.extend_from_slice(&x.to_le_bytes());
            }
            dir.extend_from_slice(&0u32.to_le_bytes());
            dir.extend_from_slice(&offset.to_le_bytes());
            dir.extend_from_slice(name.as_bytes());
        }
        let cd = u32::try_from(out.len()).map_err(|_| too_big())?;
        let cd_len = u32::try_from(dir.len()).map_err(|_| too_big())?;
        let count = u16::try_from(members.len()).map_err(|_| "too many results for one .npz")?;
        out.extend_from_slice(&dir);
        out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
        for x in [0u16, 0, count, count] {
            out.extend_from_slice(&x.to_le_bytes());
        }
        out.extend_from_slice(&cd_len.to_le_bytes());
        out.extend_from_slice(&cd.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_is_zips() {
        assert_eq!(zip::crc32(b""), 0);
        assert_eq!(zip::crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn npy_round_trips_every_dtype() {
        for v in [
            Value::array(
                DType::F64,
                vec![2, 3],
                vec![1.0, -2.5, 3.0, 0.0, 1e300, -0.0],
            ),
            Value::array(DType::F32, vec![3], vec![0.1, 2.0, -3.0]),
            Value::array(DType::I64, vec![], vec![7.0]),
            Value::array(DType::Bool, vec![2, 2], vec![1.0, 0.0, 0.0, 1.0]),
            Value::array(DType::F64, vec![0, 4], vec![]),
        ] {
            let bytes = to_npy(&v);
            // The elements start at a multiple of 64, as NumPy aligns them.
            let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
            assert_eq!((10 + hlen) % 64, 0);
            let a = Array::from_bytes(&bytes, "t.npy").unwrap();
            assert_eq!(a.to_value(), v);
            assert!(!a.is_mapped());
        }
    }

    #[test]
    fn npz_round_trips() {
        let a = Value::array(DType::F64, vec![2], vec![1.0, 2.0]);
        let b = Value::array(DType::I64, vec![3], vec![4.0, 5.0, 6.0]);
        let members = vec![
            ("a.npy".to_string(), to_npy(&a)),
            ("b.npy".to_string(), to_npy(&b)),
        ];
        let bytes = zip::write(&members).unwrap();
        let es = zip::entries(&bytes).unwrap();
        assert_eq!(es.len(), 2);
        assert_eq!(es[1].name, "b.npy");
        let got = Array::from_bytes(&bytes[es[1].data.clone()], "b").unwrap();
        assert_eq!(got.to_value(), b);
    }

    #[test]
    fn headers_that_are_not_numpys_are_refused() {
        let v = Value::array(DType::F64, vec![2], vec![1.0, 2.0]);
        let good = to_npy(&v);
        let with_header = |h: &str| {
            let mut b = MAGIC.to_vec();
            b.extend_from_slice(&[1, 0]);
            b.extend_from_slice(&(h.len() as u16).to_le_bytes());
            b.extend_from_slice(h.as_bytes());
            b.extend_from_slice(&good[good.len() - 16..]);
            b
        };
        let err = |b: &[u8]| Array::from_bytes(b, "x.npy").unwrap_err().to_string();
        assert!(err(b"hello").contains("not a .npy file"));
        assert!(err(&good[..20]).contains("truncated"));
        assert!(
            err(&good[..70]).contains("truncated"),
            "{}",
            err(&good[..70])
        );
        assert!(err(&with_header(
            "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }\n"
        ))
        .contains("int32"));
        assert!(err(&with_header(
            "{'descr': '>f8', 'fortran_order': False, 'shape': (2,), }\n"
        ))
        .contains("float64 big endian"));
        assert!(err(&with_header(
            "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 1, 3), }\n"
        ))
        .contains("Fortran"));
        assert!(err(&with_header("{'descr': '<f8', 'shape': (2,), }\n")).contains("lacks"));
        assert!(err(&with_header(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (2,) \n"
        ))
        .contains("corrupt"));
        assert!(err(&with_header(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999,), }\n"
        ))
        .contains("too large"));
        // Fortran order of a vector is the same bytes as C order.
        let ok = with_header("{'descr': '<f8', 'fortran_order': True, 'shape': (2,), }\n");
        assert_eq!(Array::from_bytes(&ok, "x.npy").unwrap().to_value(), v);
    }
}
