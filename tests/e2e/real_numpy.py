# SPDX-License-Identifier: LGPL-2.1-or-later
"""numpy on OpenBLAS's threads mid-computation (run by runner.py as real_numpy).

    real_numpy.py OUT

A seeded iteration x = tanh(A x + solve(A + 20 I, x) / 10) on 384 x 384
matrices: BLAS's dgemm and LAPACK's solve on 2 OpenBLAS threads (which
mbinds its buffers "local": a vma policy of their own). Each step's
sha256 of x goes to OUT as it is done, so any bit of lost or altered
state (a thread's registers, a buffer, the policy) changes every line
after it. The runner compares OUT with an uninterrupted run's. Prints
SKIP when numpy or a threaded OpenBLAS is not there, PASS at the end.
"""
import os
import sys

# the same partition of the work in both runs: 2 threads, whatever the machine
os.environ["OPENBLAS_NUM_THREADS"] = "2"
try:
    import numpy as np
except ImportError:
    print("SKIP numpy not installed for %s (Debian: python3-numpy)" % sys.executable)
    sys.exit(0)
import hashlib

N, STEPS = 384, 600


def blas_threads():
    """the threads OpenBLAS started (its library mapped, more than one thread)"""
    with open("/proc/self/maps") as f:
        blas = "openblas" in f.read()
    return blas, len(os.listdir("/proc/self/task"))


def main(out):
    rng = np.random.default_rng(12345)
    a = rng.standard_normal((N, N)) / np.sqrt(N)
    x = rng.standard_normal((N, N))
    m = a + 20 * np.eye(N)
    x = a @ x  # starts OpenBLAS's threads
    blas, threads = blas_threads()
    if not blas or threads < 2:
        print("SKIP numpy's BLAS is not a threaded OpenBLAS (libopenblas0-pthread): %s, "
              "%d threads" % ("OpenBLAS" if blas else "not OpenBLAS", threads))
        return 0
    with open(out, "w") as f:
        for i in range(STEPS):
            x = np.tanh(a @ x + 0.1 * np.linalg.solve(m, x))
            f.write("%d %s\n" % (i, hashlib.sha256(x.tobytes()).hexdigest()))
            f.flush()
    print("PASS", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
