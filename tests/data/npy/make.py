"""Write the NumPy fixtures of tests/npy.rs with NumPy itself.

Run from the repository root: `python3 tests/data/npy/make.py`. The files
are checked in so that `cargo test` needs no Python; run this again (and
commit the result) only to change them.
"""
import os

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))


def path(name):
    return os.path.join(here, name)


# examples/loss.eg: w, x f32[N], y f32.
np.save(path("w.npy"), np.array([1.0, 2.0, 3.0], dtype=np.float32))
np.save(path("x.npy"), np.array([4.0, 5.0, 6.0], dtype=np.float32))
np.savez(path("loss.npz"),
         w=np.array([1.0, 2.0, 3.0], dtype=np.float32),
         x=np.array([4.0, 5.0, 6.0], dtype=np.float32),
         y=np.float32(0.5))
np.savez_compressed(path("loss_compressed.npz"),
                    w=np.array([0.5, -1.0, 2.0, 0.25], dtype=np.float32),
                    x=np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32),
                    y=np.float32(-1.5))

# tests/data/npy/mixed.eg: every dtype, matrices, scalars.
rng = np.random.default_rng(7)
np.save(path("W.npy"), rng.standard_normal((5, 3)))
np.save(path("v.npy"), rng.standard_normal(3))
np.save(path("idx.npy"), np.array([4, 0, 2, 2], dtype=np.int64))
np.save(path("mask.npy"), np.array([True, False, True, True, False]))
np.save(path("scale.npy"), np.float64(0.75))

# Refused, each with its own message.
np.save(path("fortran.npy"), np.asfortranarray(rng.standard_normal((5, 3))))
np.save(path("int32.npy"), np.zeros((5, 3), dtype=np.int32))
np.save(path("bigendian.npy"), np.zeros((5, 3), dtype=">f8"))
np.save(path("rank1.npy"), np.zeros(15))
np.save(path("v4.npy"), np.zeros(4))
with open(path("W.npy"), "rb") as f:
    whole = f.read()
with open(path("truncated.npy"), "wb") as f:
    f.write(whole[: len(whole) - 8])
with open(path("corrupt_header.npy"), "wb") as f:
    f.write(whole.replace(b"'shape': (5, 3)", b"'shape': [5, 3]"))
np.savez(path("extra_member.npz"), W=rng.standard_normal((5, 3)), bogus=np.zeros(2))
with open(path("not_npy.npy"), "wb") as f:
    f.write(b"W = [[1, 2, 3]]\n")
