//! The memory limit: how many bytes one run (of the interpreter or of
//! native code, with its arguments' copies, results and scratch) may ask
//! for before egrad refuses it with the number of bytes it would need,
//! instead of letting the allocator abort the process.
//!
//! The default is three quarters of the machine's physical memory
//! (`MemTotal` of `/proc/meminfo`; 16 GiB where that cannot be read). It is
//! process-wide, like a resource limit: [`set_limit`] changes it (the CLI's
//! `--memory-limit`).

use std::sync::atomic::{AtomicU64, Ordering};

/// 0 until set or first read.
static LIMIT: AtomicU64 = AtomicU64::new(0);

/// The default limit: 3/4 of physical memory.
pub fn default_limit() -> u64 {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            kb.checked_mul(1024)
        })
        .unwrap_or(16 << 30);
    total / 4 * 3
}

/// The current limit in bytes.
pub fn limit() -> u64 {
    match LIMIT.load(Ordering::Relaxed) {
        0 => {
            let d = default_limit().max(1);
            LIMIT.store(d, Ordering::Relaxed);
            d
        }
        n => n,
    }
}

/// Set the limit (bytes, at least 1).
pub fn set_limit(bytes: u64) {
    LIMIT.store(bytes.max(1), Ordering::Relaxed);
}

/// `n` bytes as a person reads them: `80000000000 bytes (74.5 GiB)`.
pub fn describe(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} bytes");
    }
    let mut x = n as f64 / 1024.0;
    let mut u = 0;
    while x >= 1024.0 && u + 1 < UNITS.len() {
        x /= 1024.0;
        u += 1;
    }
    format!("{n} bytes ({x:.1} {})", UNITS[u])
}

/// Refuse `what` when it needs `bytes` (`None`: more than a `u64` counts)
/// and that exceeds the limit: the message says how much it needs.
pub fn check(bytes: Option<u64>, what: &str) -> Result<(), String> {
    let limit = limit();
    match bytes {
        Some(b) if b <= limit => Ok(()),
        Some(b) => Err(format!(
            "{what} needs {}, more than the memory limit of {} (--memory-limit; default 3/4 of this machine's memory)",
            describe(b),
            describe(limit)
        )),
        None => Err(format!(
            "{what} needs more than 2^64 bytes, more than the memory limit of {}",
            describe(limit)
        )),
    }
}

/// Bytes of `count` elements of `size` bytes each, `None` on overflow.
pub fn bytes_of(count: usize, size: usize) -> Option<u64> {
    (count as u64).checked_mul(size as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_read_them() {
        assert_eq!(describe(100), "100 bytes");
        assert_eq!(describe(80_000_000_000), "80000000000 bytes (74.5 GiB)");
        assert!(check(Some(1), "x").is_ok());
        let e = check(Some(u64::MAX), "the result").unwrap_err();
        assert!(
            e.starts_with("the result needs 18446744073709551615 bytes"),
            "{e}"
        );
        assert!(check(None, "x").unwrap_err().contains("2^64"));
        assert!(default_limit() > 0);
    }
}
