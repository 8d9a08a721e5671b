#!/usr/bin/env python3
"""run_compare.py METRICS_A METRICS_B WEIGHTS_A WEIGHTS_B TOL [STEPS]

Compares two training runs: the per-step losses of their --metrics files
(relative difference) and their final parameters (checkpoints exported with
"ztrain ckpt export --output X.safetensors", fp32; absolute difference).
Exit 0 when both are within TOL, both runs logged the same steps once each
(STEPS of them, when given) and hold the same number of parameters."""
import json
import struct
import sys


def losses(path):
    recs = [json.loads(l) for l in open(path)]
    recs = [(d["step"], d["loss"]) for d in recs if "loss" in d]
    return dict(recs), len(recs)


def weights(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    h.pop("__metadata__", None)
    out = []
    for k in sorted(h):
        s, e = h[k]["data_offsets"]
        out += struct.unpack("<%df" % ((e - s) // 4), b[8 + n + s:8 + n + e])
    return out


def main(argv):
    if len(argv) not in (6, 7):
        print(__doc__, file=sys.stderr)
        return 2
    (a, na), (b, nb) = losses(argv[1]), losses(argv[2])
    wa, wb = weights(argv[3]), weights(argv[4])
    tol = float(argv[5])
    want = int(argv[6]) if len(argv) == 7 else len(a)
    if (not a or sorted(a) != sorted(b) or na != len(a) or nb != len(b) or len(a) != want
            or not wa or len(wa) != len(wb)):
        print("# steps or tensors differ: %d records of steps %s vs %d of %s (want %d), %d vs %d values"
              % (na, sorted(a), nb, sorted(b), want, len(wa), len(wb)))
        return 1
    d = max(abs(a[k] - b[k]) / abs(a[k]) for k in a)
    pd = max(abs(x - y) for x, y in zip(wa, wb))
    print("# max relative loss difference %.2e over %d steps, max parameter difference %.2e over %d values"
          % (d, len(a), pd, len(wa)))
    return 0 if d <= tol and pd <= tol else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
