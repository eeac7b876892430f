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
//! Written here rather than taken from a crate (issue 37 asked for a
//! maintained crate if one kept this zero-copy path; measured 2026-11-29):
//! - `npyz` reads into its own `Vec`s: every array copied.
//! - `ndarray-npy`'s `ViewNpyExt` does view a mapped `.npy` in place, but
//!   as ndarray's `ArrayView`, and for `.npz` its `NpzReader` copies;
//!   `ndarray-npz`'s `NpzView` views members in place only when each is
//!   aligned for its element type in the archive, and `np.savez` (NumPy
//!   2.4) writes them at odd offsets (at 183, 439 and 665 in a three-array
//!   archive): it refuses such a file until it is re-zipped, so an
//!   `.npz` is copied either way. egrad copies a misaligned member too,
//!   but reads every aligned one in place from the same map.
//! - Those crates add ndarray, the zip crate, a Python-literal parser
//!   (pest) and 30 more crates to the build: 42 s on this 2-core machine
//!   by themselves (`cargo build --release --timings` of a crate with
//!   `ndarray-npy` and its `npz` feature), where the README's first
//!   command has a 5-minute budget from a fresh clone.
//!
//! The format is small (about as much code as an adapter to a crate's
//! types); compressed members are inflated with `miniz_oxide`.

use crate::error::{Error, Result};
use crate::types::value::Value;
use crate::types::DType;
use std::path::Path;
use std::sync::Arc;

mod header;

use header::{bad, parse, shape_text, Header, MAGIC};

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
                .map_err(|err| bad(&member, format!("cannot inflate it: {err}")))?;
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

mod zip;

#[cfg(test)]
mod tests {
    use super::*;

    /// A deflated member that stops half way: one short error, where the
    /// error's debug form printed every byte inflated so far (megabytes).
    #[test]
    fn a_member_that_fails_to_inflate_is_one_short_error() {
        let npy = to_npy(&Value::array(DType::F64, vec![1 << 20], vec![0.0; 1 << 20]));
        let deflated = miniz_oxide::deflate::compress_to_vec(&npy, 6);
        let cut = deflated[..deflated.len() / 2].to_vec();
        let mut zip = zip::write(&[("x.npy".to_string(), cut)]).unwrap();
        // `zip::write` stores: make the member deflated, of the whole
        // array's size and CRC, in its local header and the directory.
        let n = zip.len();
        let dir = u32::from_le_bytes(zip[n - 6..n - 2].try_into().unwrap()) as usize;
        let (size, crc) = (npy.len() as u32, zip::crc32(&npy));
        for (method, crc_at, size_at) in [(8, 14, 22), (dir + 10, dir + 16, dir + 24)] {
            zip[method..method + 2].copy_from_slice(&8u16.to_le_bytes());
            zip[crc_at..crc_at + 4].copy_from_slice(&crc.to_le_bytes());
            zip[size_at..size_at + 4].copy_from_slice(&size.to_le_bytes());
        }
        let path = std::env::temp_dir().join(format!("egrad-cut-{}.npz", std::process::id()));
        std::fs::write(&path, &zip).unwrap();
        let Err(e) = read_npz(&path) else {
            panic!("a truncated member is an error");
        };
        std::fs::remove_file(&path).unwrap();
        let e = e.to_string();
        assert!(
            e.len() < 400,
            "{} bytes: {}",
            e.len(),
            &e[..e.len().min(400)]
        );
        assert!(
            e.contains("x.npy") && e.contains("cannot inflate it"),
            "{e}"
        );
    }

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
