#!/bin/bash
# hf_moe_ref.sh -- the Mixture of Experts fixtures regenerate from
# transformers bit for bit (optional: SKIPs without torch + transformers;
# ZT_HF_PYTHON picks the Python, default /opt/hfref/bin/python if present).
# scripts/make_hf_fixtures.py rebuilds mixtral (and mixtral_packed),
# qwen2_moe, qwen3_moe, olmoe, mixtral_aux, qwen2_moe_mixed (and
# qwen2_moe_mixed_packed) and qwen3_moe_mixed into a scratch directory; every
# file must equal the committed one (the weights, the reference arrays, the
# configuration), and the reference numbers too, except the generator line;
# scripts/moe_param_counts.py gives tests/fixtures/moe/counts.json again.
. "$(dirname "$0")/lib.sh"
if [ -z "${ZT_HF_PYTHON:-}" ]; then
    if [ -x /opt/hfref/bin/python ]; then ZT_HF_PYTHON=/opt/hfref/bin/python; else ZT_HF_PYTHON=python3; fi
fi
"$ZT_HF_PYTHON" -c 'import torch, transformers' >/dev/null 2>&1 ||
    skip_all "transformers not importable by $ZT_HF_PYTHON"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
FIX="$ZT_SRCDIR/tests/fixtures/hf"
names="mixtral qwen2_moe qwen3_moe olmoe mixtral_aux qwen2_moe_mixed qwen3_moe_mixed"
# shellcheck disable=SC2086
OMP_NUM_THREADS=1 "$ZT_HF_PYTHON" "$ZT_SRCDIR/scripts/make_hf_fixtures.py" "$T" $names > "$T/gen.out" 2>&1
rc=$?
ok $rc "make_hf_fixtures.py regenerates $names"
[ $rc = 0 ] || diag "$T/gen.out"
for n in $names mixtral_packed qwen2_moe_mixed_packed; do
    same=0
    for f in $(cd "$FIX/$n" && ls); do
        cmp -s "$FIX/$n/$f" "$T/$n/$f" || { same=1; echo "# $n/$f differs"; }
    done
    case $n in *_packed) ;; *) false ;; esac || cmp -s "$FIX/$n.ref.safetensors" "$T/$n.ref.safetensors" || same=1
    case $n in *_packed) ;; *) false ;; esac || python3 - "$FIX/$n.ref.json" "$T/$n.ref.json" <<'PY' || same=1
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
a.pop("generator", None)
b.pop("generator", None)
sys.exit(a != b)
PY
    ok $same "$n: the regenerated fixture equals the committed one"
done
# the parameter counts of tests/fixtures/moe (scripts/moe_param_counts.py)
"$ZT_HF_PYTHON" "$ZT_SRCDIR/scripts/moe_param_counts.py" > "$T/counts.json" 2> "$T/counts.err"
ok $([ $? = 0 ] && python3 - "$ZT_SRCDIR/tests/fixtures/moe/counts.json" "$T/counts.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
a.pop("generator", None)
b.pop("generator", None)
sys.exit(a != b)
PY
echo $?) "moe_param_counts.py gives the committed counts"
done_testing
