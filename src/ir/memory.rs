//! The memory limit: how many bytes one run (of the interpreter or of
//! native code, with its arguments' copies, results and scratch) may ask
//! for before egrad refuses it with the number of bytes it would need,
//! instead of letting the allocator abort the process.
//!
//! The default is three quarters of the memory this process may use: the
//! least of the machine's physical memory (`MemTotal` of
//! `/proc/meminfo`), the limit of the process's cgroup (v2 `memory.max`,
//! v1 `memory.limit_in_bytes`, of its cgroup and those above it) and the
//! address space left under its address-space limit (`RLIMIT_AS`, less
//! what the process has mapped already); 16 GiB where none can be read.
//! It is process-wide, like a resource limit: [`set_limit`] changes it
//! (the CLI's `--memory-limit`).

use std::sync::atomic::{AtomicU64, Ordering};

/// 0 until set or first read.
static LIMIT: AtomicU64 = AtomicU64::new(0);

/// The default limit: 3/4 of the least of physical memory, the cgroup's
/// limit and the address space left under `RLIMIT_AS`.
pub fn default_limit() -> u64 {
    let usable = [mem_total(), cgroup_limit(), address_space_left()]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(16 << 30);
    usable / 4 * 3
}

/// The machine's physical memory: `MemTotal` of `/proc/meminfo`.
fn mem_total() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    status_bytes(&s, "MemTotal:")
}

/// A `NAME:  N kB` line of `/proc/meminfo` or `/proc/self/status`, in bytes.
fn status_bytes(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

/// The address space left under `RLIMIT_AS`: the soft limit less the
/// process's mapped size (`VmSize`); `None` without a limit.
#[cfg(unix)]
fn address_space_left() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` through a valid pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut r) } != 0 || r.rlim_cur == libc::RLIM_INFINITY
    {
        return None;
    }
    let mapped = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| status_bytes(&s, "VmSize:"))
        .unwrap_or(0);
    // `rlim_t` is `u64` on Linux, not on every Unix.
    #[allow(clippy::useless_conversion)]
    let limit = u64::try_from(r.rlim_cur).ok()?;
    Some(limit.saturating_sub(mapped))
}

#[cfg(not(unix))]
fn address_space_left() -> Option<u64> {
    None
}

/// The memory limit of this process's cgroup (Linux; `None` elsewhere or
/// without one).
fn cgroup_limit() -> Option<u64> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    cgroup_limit_in(&cgroups, &mounts, |p| std::fs::read_to_string(p).ok())
}

/// The least memory limit of the cgroups in `cgroups` (`/proc/self/cgroup`)
/// and those above them, found through `mounts` (`/proc/self/mountinfo`),
/// its files read with `read`: a v2 hierarchy's `memory.max`, a v1 memory
/// controller's `memory.limit_in_bytes`. `max` (and v1's page-rounded
/// 2^63) is no limit.
fn cgroup_limit_in(
    cgroups: &str,
    mounts: &str,
    read: impl Fn(&str) -> Option<String>,
) -> Option<u64> {
    let mut least: Option<u64> = None;
    for line in cgroups.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let (v2, file) = if id == "0" && controllers.is_empty() {
            (true, "memory.max")
        } else if controllers.split(',').any(|c| c == "memory") {
            (false, "memory.limit_in_bytes")
        } else {
            continue;
        };
        let Some((root, point)) = cgroup_mount(mounts, v2) else {
            continue;
        };
        // The cgroup's folder under the mount; in a container that shows
        // only its own part of the hierarchy, whatever of it is there.
        let rel = path.strip_prefix(root).unwrap_or(path).trim_matches('/');
        let mut dir = rel.to_string();
        loop {
            let at = if dir.is_empty() {
                format!("{point}/{file}")
            } else {
                format!("{point}/{dir}/{file}")
            };
            if let Some(n) = read(&at).and_then(|t| t.trim().parse::<u64>().ok()) {
                if n < 1 << 62 {
                    least = Some(least.map_or(n, |l| l.min(n)));
                }
            }
            match dir.rfind('/') {
                Some(i) => dir.truncate(i),
                None if dir.is_empty() => break,
                None => dir.clear(),
            }
        }
    }
    least
}

/// The root and mount point of the cgroup v2 hierarchy (`v2`) or of the
/// v1 memory controller, from `/proc/self/mountinfo`.
fn cgroup_mount(mounts: &str, v2: bool) -> Option<(&str, &str)> {
    mounts.lines().find_map(|l| {
        let fields: Vec<&str> = l.split_whitespace().collect();
        let dash = fields.iter().position(|f| *f == "-")?;
        let (fstype, options) = (*fields.get(dash + 1)?, *fields.get(dash + 3)?);
        let ours = if v2 {
            fstype == "cgroup2"
        } else {
            fstype == "cgroup" && options.split(',').any(|o| o == "memory")
        };
        ours.then_some((*fields.get(3)?, *fields.get(4)?))
    })
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

/// What one allocation may take now: the limit, and under `RLIMIT_AS` 3/4
/// of the address space left (what the process holds already counts there: an
/// allocation past it aborts, whatever the limit says).
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    limit: u64,
    left: Option<u64>,
}

/// The budget now ([`Budget`]); it reads `/proc`, so a loop takes it once.
pub fn budget() -> Budget {
    Budget {
        limit: limit(),
        // A quarter kept back, as the default limit keeps it: for the
        // temporaries an allocation checked here brings with it.
        left: address_space_left().map(|l| l / 4 * 3),
    }
}

impl Budget {
    /// The same budget for a count of bytes that includes `held` bytes
    /// the process holds already (and so has mapped).
    pub fn counting_held(self, held: u64) -> Budget {
        Budget {
            limit: self.limit,
            left: self.left.map(|l| l.saturating_add(held)),
        }
    }

    /// Whether `bytes` fit.
    pub fn allows(&self, bytes: u64) -> bool {
        bytes <= self.limit && self.left.is_none_or(|l| bytes <= l)
    }

    /// Refuse `what` when it needs `bytes` (`None`: more than a `u64`
    /// counts) and they do not fit: the message says how much it needs.
    pub fn check(&self, bytes: Option<u64>, what: &str) -> Result<(), String> {
        let limit = self.limit;
        match (bytes, self.left) {
            (Some(b), _) if self.allows(b) => Ok(()),
            (Some(b), _) if b > limit => Err(format!(
                "{what} needs {}, more than the memory limit of {} (--memory-limit; default 3/4 of the memory this process may use)",
                describe(b),
                describe(limit)
            )),
            (Some(b), left) => Err(format!(
                "{what} needs {}, more than the {} of address space this process may still use (3/4 of what it has left under its address-space limit, RLIMIT_AS)",
                describe(b),
                describe(left.unwrap_or(0))
            )),
            (None, _) => Err(format!(
                "{what} needs more than 2^64 bytes, more than the memory limit of {}",
                describe(limit)
            )),
        }
    }
}

/// Refuse `what` when it needs `bytes` (`None`: more than a `u64` counts)
/// and that does not fit the [`budget`]: the message says how much it
/// needs.
pub fn check(bytes: Option<u64>, what: &str) -> Result<(), String> {
    budget().check(bytes, what)
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

    #[test]
    fn cgroup_limits_are_the_least_of_the_cgroup_and_those_above() {
        let v2_mounts = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n";
        let files = |want: &'static [(&'static str, &'static str)]| {
            move |p: &str| {
                want.iter()
                    .find(|(k, _)| *k == p)
                    .map(|(_, v)| v.to_string())
            }
        };
        let v2 = files(&[
            ("/sys/fs/cgroup/a/b/memory.max", "max\n"),
            ("/sys/fs/cgroup/a/memory.max", "1073741824\n"),
        ]);
        assert_eq!(cgroup_limit_in("0::/a/b\n", v2_mounts, v2), Some(1 << 30));
        let none = files(&[("/sys/fs/cgroup/memory.max", "max\n")]);
        assert_eq!(cgroup_limit_in("0::/\n", v2_mounts, none), None);
        // v1, in a container whose mount shows only its own cgroup.
        let v1_mounts = "35 31 0:32 /docker/x /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n\
                         36 31 0:33 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n";
        let v1 = files(&[
            ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "536870912\n"),
            ("/sys/fs/cgroup/cpu/memory.limit_in_bytes", "1\n"),
        ]);
        let cg = "5:cpu:/docker/x\n4:memory:/docker/x\n0::/\n";
        assert_eq!(cgroup_limit_in(cg, v1_mounts, v1), Some(512 << 20));
        let unlimited = files(&[(
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
            "9223372036854771712\n",
        )]);
        assert_eq!(cgroup_limit_in(cg, v1_mounts, unlimited), None);
    }
}
