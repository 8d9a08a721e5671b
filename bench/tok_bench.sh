#!/bin/bash
# tok_bench.sh -- tokenizer throughput: `ztrain prep --tokenizer` against Hugging Face tokenizers'
# encode_batch on the same documents, the same tokenizer.json and the same number of threads, in the same
# run, printing MB/s (UTF-8 bytes of document text per second) and the ratio.
#   bench/tok_bench.sh [TOKENIZER] [THREADS] [REPEAT]      (build first: make)
# TOKENIZER: a tokenizer.json or its directory (default: every fixture in tests/fixtures/tok);
# THREADS: encoding threads for both (default 2; HF's through RAYON_NUM_THREADS);
# REPEAT: copies of data/tinyshakespeare.txt (default 8, about 8.8 MB of text).  The documents are the
# corpus's blank-line separated sections, as JSON Lines.  ztrain's time is the whole `prep` command
# (reading and parsing the JSON Lines, encoding, writing the shard); HF's is encode_batch alone, on
# documents already in memory.  The ids are compared too (prep --doc-sep none: the shard must be the
# concatenation of HF's ids).  HF needs $ZT_HF_PYTHON (default /opt/hfref/bin/python, else python3) with
# `tokenizers`; without it only ztrain's figures are printed.
set -euo pipefail
cd "$(dirname "$0")/.."
toks=${1:-}
threads=${2:-2}
repeat=${3:-8}
ZTRAIN=${ZTRAIN:-./ztrain}
PY=${ZT_HF_PYTHON:-}
if [ -z "$PY" ]; then if [ -x /opt/hfref/bin/python ]; then PY=/opt/hfref/bin/python; else PY=python3; fi; fi
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
python3 - "$repeat" "$T/docs.jsonl" <<'PY'
import json, sys
text = open("data/tinyshakespeare.txt", encoding="utf-8").read()
docs = [d for d in text.split("\n\n") if d]
with open(sys.argv[2], "w", encoding="utf-8") as f:
    for _ in range(int(sys.argv[1])):
        for d in docs:
            f.write(json.dumps({"text": d}) + "\n")
PY
have_hf=0
"$PY" -c 'import tokenizers' > /dev/null 2>&1 && have_hf=1
[ -n "$toks" ] || toks="tests/fixtures/tok/gpt2 tests/fixtures/tok/llama3 tests/fixtures/tok/llama2"
echo "threads $threads, $(wc -l < "$T/docs.jsonl") documents; $(nproc) cores; HF: $([ $have_hf = 1 ] && "$PY" -c 'import tokenizers; print("tokenizers", tokenizers.__version__)' || echo "not installed")"
printf '%-28s %12s %12s %12s %8s %s\n' tokenizer "text MB" "ztrain MB/s" "HF MB/s" ratio "ids"
for tk in $toks; do
    best=
    for r in 1 2 3; do   # best of 3 (the machine may be shared)
        t0=$(date +%s.%N)
        "$ZTRAIN" prep --tokenizer "$tk" --input "$T/docs.jsonl" --output "$T/o" --doc-sep none --val-fraction 0 \
            --threads "$threads" > /dev/null
        t1=$(date +%s.%N)
        s=$(echo "$t1 - $t0" | bc -l)
        if [ -z "$best" ] || [ "$(echo "$s < $best" | bc -l)" = 1 ]; then best=$s; fi
    done
    if [ $have_hf = 1 ]; then
        RAYON_NUM_THREADS=$threads "$PY" - "$tk" "$T/docs.jsonl" "$T/o_train.bin" "$best" <<'PY'
import json, os, struct, sys, time
from tokenizers import Tokenizer
tk, docs_path, shard, zt_s = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
path = os.path.join(tk, "tokenizer.json") if os.path.isdir(tk) else tk
tok = Tokenizer.from_file(path)
docs = [json.loads(l)["text"] for l in open(docs_path, encoding="utf-8")]
mb = sum(len(d.encode("utf-8")) for d in docs) / 1e6
tok.encode_batch(docs[:2000], add_special_tokens=False)        # warm-up
best = None
for _ in range(3):
    t = time.perf_counter()
    enc = tok.encode_batch(docs, add_special_tokens=False)
    dt = time.perf_counter() - t
    best = dt if best is None or dt < best else best
ids = [i for e in enc for i in e.ids]
d = open(shard, "rb").read()
magic, ver, n = struct.unpack("<3i", d[:12])
got = list(struct.unpack("<%d%s" % (n, "H" if magic == 20240520 else "I"), d[1024:]))
print("%-28s %12.2f %12.2f %12.2f %8.2f %s" % (tk[-28:], mb, mb / zt_s, mb / best, best / zt_s,
      "identical" if got == ids else "DIFFERENT"))
PY
    else
        mb=$(python3 -c "import json,sys; print(sum(len(json.loads(l)['text'].encode()) for l in open(sys.argv[1]))/1e6)" "$T/docs.jsonl")
        printf '%-28s %12.2f %12.2f %12s %8s %s\n' "${tk: -28}" "$mb" "$(echo "$mb / $best" | bc -l)" - - -
    fi
done
