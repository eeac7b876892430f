//! The few parts of the zip format that `.npz` archives use.

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
        let start =
            local + 30 + usize::from(u16_at(b, local + 26)?) + usize::from(u16_at(b, local + 28)?);
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
