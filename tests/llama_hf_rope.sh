#!/bin/bash
# llama_hf_rope.sh -- the Llama model's rotary frequencies (zt_llama_inv_freq)
# bitwise equal to transformers' (default and llama3 rope parameters) for a
# few head dims, bases and llama3 settings.  Needs the reference Python stack
# (ZT_HF_PYTHON, default /opt/hfref/bin/python, with torch and transformers);
# skips without it.
. "$(dirname "$0")/lib.sh"
PY=${ZT_HF_PYTHON:-/opt/hfref/bin/python}
[ -x "$PY" ] && "$PY" -c "import torch, transformers" 2> /dev/null ||
    skip_all "no reference Python with torch + transformers ($PY)"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
for spec in "64 10000 none" "128 500000 none" "96 1000000 none" "128 500000 llama3 8 1 4 8192" \
            "64 500000 llama3 32 1 4 8192" "16 10000 llama3 8 1 4 64" "8 10000 llama3 4 2 8 128"; do
    set -- $spec
    "$ZT_BUILDDIR/tests/llama_inv_freq" "$@" > "$T/c.txt"
    "$PY" - "$T/c.txt" "$@" <<'PY' 2> "$T/err.txt"
import struct, sys
path, hd, theta, sc = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
kw = dict(hidden_size=hd, num_attention_heads=1, rope_theta=theta, max_position_embeddings=1 << 17)
if sc == "llama3":
    f, lo, hi, om = (float(x) for x in sys.argv[5:9])
    kw["rope_scaling"] = {"rope_type": "llama3", "factor": f, "low_freq_factor": lo,
                          "high_freq_factor": hi, "original_max_position_embeddings": int(om)}
c = LlamaConfig(**kw)
if sc == "llama3":
    ref = ROPE_INIT_FUNCTIONS["llama3"](c, "cpu")[0].tolist()
else:
    ref = LlamaRotaryEmbedding.compute_default_rope_parameters(config=c, device="cpu")[0].tolist()
mine = [float(x) for x in open(path)]
bad = [i for i, (a, b) in enumerate(zip(mine, ref)) if struct.pack("<f", a) != struct.pack("<f", b)]
print("# %s: %d frequencies, %d differ%s" % (" ".join(sys.argv[2:]), len(ref), len(bad),
      "" if not bad else " (first: %r vs %r)" % (mine[bad[0]], ref[bad[0]])))
sys.exit(0 if len(mine) == len(ref) and not bad else 1)
PY
    rc=$?
    [ $rc = 0 ] || diag "$T/err.txt"
    ok $rc "inv_freq bitwise transformers' for head dim $1, theta $2, scaling ${*:3}"
done
done_testing
