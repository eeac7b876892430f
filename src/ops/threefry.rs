//! Threefry-2x32 with 20 rounds (Salmon, Moraes, Dror and Shaw, "Parallel
//! random numbers: as easy as 1, 2, 3", SC 2011; the Random123 library):
//! the counter-based generator behind egrad's random numbers. A block is a
//! pure function of a key and a counter, both two 32-bit words, so the
//! interpreter, the JIT and object files compute the same numbers from
//! the same key, in any order, with no state.
//!
//! This function is the reference; the backend lowers the same rounds to
//! Cranelift (`backend::lower::op`), checked against it bit for bit.

/// The rotation of each round, taken in turn (Random123's `R_32x2`).
pub const ROTATIONS: [u32; 8] = [13, 15, 26, 6, 17, 29, 16, 24];

/// The constant of the third key word (Skein's `C240` for 32-bit words).
pub const PARITY: u32 = 0x1BD1_1BDA;

/// Number of rounds: a key word is injected after every fourth.
pub const ROUNDS: u32 = 20;

/// The block of `counter` under `key`: two pseudo-random 32-bit words.
pub fn threefry2x32(key: [u32; 2], counter: [u32; 2]) -> [u32; 2] {
    let ks = [key[0], key[1], PARITY ^ key[0] ^ key[1]];
    let mut x0 = counter[0].wrapping_add(ks[0]);
    let mut x1 = counter[1].wrapping_add(ks[1]);
    for r in 0..ROUNDS {
        x0 = x0.wrapping_add(x1);
        x1 = x1.rotate_left(ROTATIONS[(r % 8) as usize]) ^ x0;
        if r % 4 == 3 {
            let s = r / 4 + 1;
            x0 = x0.wrapping_add(ks[(s % 3) as usize]);
            x1 = x1.wrapping_add(ks[((s + 1) % 3) as usize]).wrapping_add(s);
        }
    }
    [x0, x1]
}

/// Random123's known-answer vectors for threefry2x32_20 (`kat_vectors`;
/// also checked by JAX's `random_test.py`): key, counter, block.
pub const KNOWN_ANSWERS: [([u32; 2], [u32; 2], [u32; 2]); 3] = [
    ([0, 0], [0, 0], [0x6B20_0159, 0x99BA_4EFE]),
    (
        [u32::MAX, u32::MAX],
        [u32::MAX, u32::MAX],
        [0x1CB9_96FC, 0xBB00_2BE7],
    ),
    (
        [0x1319_8A2E, 0x0370_7344],
        [0x243F_6A88, 0x85A3_08D3],
        [0xC492_3A9C, 0x483D_F7A0],
    ),
];

/// The low 32 bits of an `i64` operand, as the ops `threefry0` and
/// `threefry1` read each word (the interpreter holds integers as `f64`).
pub fn word(x: f64) -> u32 {
    (x as i64) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_answers() {
        for (key, counter, want) in KNOWN_ANSWERS {
            assert_eq!(threefry2x32(key, counter), want, "{counter:x?} {key:x?}");
        }
    }

    #[test]
    fn words_of_integers() {
        assert_eq!(word(0.0), 0);
        assert_eq!(word(4_294_967_295.0), u32::MAX);
        assert_eq!(word(4_294_967_296.0), 0);
        assert_eq!(word(-1.0), u32::MAX);
        assert_eq!(word(0x13198A2E as f64), 0x1319_8A2E);
    }
}
