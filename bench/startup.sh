#!/bin/bash
# startup.sh -- time to the first step (issue 32): from process start to
# the end of the first step, against the target "weight read + one step +
# 1 s", for the SmolLM-135M shape (Llama, hidden 576, 30 layers, 9 heads /
# 3 KV heads, SwiGLU 1536, vocab 49152, tied; 134.5M parameters, 513 MiB
# fp32) on the CPU:
#   init-from   ztrain train --init-from DIR, 1 rank
#   init-from2  the same, 2 ranks, ZeRO stage 3
#   resume      ztrain train resuming from a checkpoint of that model, 1 rank
#
#   bench/startup.sh [THREADS] [ROUNDS] [SEQ]      (defaults 2 2 128)
#
# ZTRAIN=path runs another build (default ./ztrain); ZT_BENCH_BEFORE=path also
# runs a second build (e.g. one of the commit before) in the same rounds,
# alternated with the first, so that a machine whose load changes biases
# neither.  HF_DIR=path reuses a model directory of that shape (else one
# with random weights is made: one training step, `ztrain ckpt export --hf`).
# Per run: T start = seconds from launching the command (mpirun for 2
# ranks) to the training loop's first line ("model: N parameters", printed
# by both builds just before the first step begins); T first = to the first
# step's log line (the end of the first step); read = the load's own time ("init: loaded ...
# in X s" / "checkpoint: resumed ... in X s"); step = the time of the step
# after the first (ms/step: a step with nothing left over from start-up); ratio = T /
# (read + step + 1 s) with T = T first: the target is ratio <= 1.  The run is killed after
# its second step (no final checkpoint).  The new build's "startup:" line
# (rank 0's phases) is printed as is.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-2} rounds=${2:-2} seq=${3:-128}
ZTRAIN=${ZTRAIN:-./ztrain}
[ -x "$ZTRAIN" ] || { echo "startup.sh: $ZTRAIN not built (run make)" >&2; exit 1; }
command -v python3 > /dev/null || { echo "startup.sh: needs python3" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
SHAPE=(--arch llama --n-layer 30 --n-head 9 --n-kv-head 3 --n-embd 576 --intermediate-size 1536
       --vocab 49152 --tie-embeddings true --context 2048)
RUN=(--seq-len "$seq" --train_micro_batch_size_per_gpu 1 --gradient_accumulation_steps 1
     --steps 3 --train "$tmp/tok_train.bin" --val "" --ckpt-every 0 --sample-tokens 0 --log-every 1)
echo "shape: SmolLM-135M (Llama 30 x 576, 9/3 heads, SwiGLU 1536, vocab 49152, tied), fp32, batch 1 x $seq" \
     "tokens; $threads threads per rank (1 rank), $((threads > 1 ? threads / 2 : 1)) per rank (2 ranks); $rounds rounds"
echo "machine: $(nproc --all) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')," \
     "load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$ZTRAIN" prep --input data/tinyshakespeare.txt --output "$tmp/tok" --val-fraction 0 > /dev/null
# the checkpoint the resume mode starts from (step 1), and the model directory
OMP_NUM_THREADS=$threads "$ZTRAIN" train "${SHAPE[@]}" "${RUN[@]}" --steps 1 --threads "$threads" \
    --ckpt-dir "$tmp/ck" > "$tmp/fixture.out" 2>&1 ||
    { echo "startup.sh: the fixture run failed:" >&2; tail -5 "$tmp/fixture.out" >&2; exit 1; }
hf=${HF_DIR:-$tmp/hf}
[ -n "${HF_DIR:-}" ] || "$ZTRAIN" ckpt export "$tmp/ck/step-1" --hf "$hf" > /dev/null
echo "model directory: $hf ($(du -sm "$hf" | cut -f1) MiB); checkpoint $tmp/ck/step-1"

python3 - "$tmp" "$hf" "$threads" "$rounds" "$ZTRAIN" "${ZT_BENCH_BEFORE:-}" "${SHAPE[@]}" -- "${RUN[@]}" <<'PY'
import os, re, shutil, signal, statistics, subprocess, sys, time
tmp, hf, threads, rounds, new, old = sys.argv[1:7]
threads, rounds = int(threads), int(rounds)
rest = sys.argv[7:]
shape, run = rest[:rest.index("--")], rest[rest.index("--") + 1:]
builds = [("after", new)] + ([("before", old)] if old else [])
name_of = {b: n for n, b in builds}
modes = ["init-from", "init-from2", "resume"]

def one(build, mode):
    ck = os.path.join(tmp, "ck_run")
    shutil.rmtree(ck, ignore_errors=True)
    if mode == "resume":
        shutil.copytree(os.path.join(tmp, "ck"), ck)
        args = shape + run + ["--ckpt-dir", ck, "--resume", "auto", "--threads", str(threads)]
    else:
        args = run + ["--init-from", hf, "--ckpt-dir", ck, "--resume", "never"]
    if mode == "init-from2":
        t = max(threads // 2, 1)
        cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", "2", "-x", "OMP_NUM_THREADS=%d" % t,
               build, "train"] + args + ["--stage", "3", "--threads", str(t)]
    else:
        cmd = [build, "train"] + args + ([] if mode == "resume" else ["--threads", str(threads)])
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                         start_new_session=True)
    first = read = step2 = tstart = None
    su = ""
    out = []
    nstep = 0
    for line in p.stdout:
        out.append(line)
        m = re.match(r"init: loaded .* in ([0-9.]+) s", line) or \
            re.match(r"checkpoint: resumed from .* in ([0-9.]+) s", line)
        if m: read = float(m.group(1))
        if line.startswith("startup:"): su = line.strip()
        if line.startswith("model: ") and tstart is None: tstart = time.time() - t0
        m = re.match(r"step +(\d+)/\d+ .*\| +([0-9.]+) ms/step", line)
        if m:
            nstep += 1
            if nstep == 1: first = time.time() - t0
            else:
                step2 = float(m.group(2)) / 1000.0
                break
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    if first is None or read is None or step2 is None:
        sys.exit("startup.sh: %s %s: no first step / read / second step:\n%s" % (build, mode, "".join(out[-8:])))
    print("  %-6s %-10s start %6.2fs first step done %6.2fs read %6.2fs step %6.2fs" %
          (name_of[build], mode, tstart or float("nan"), first, read, step2), flush=True)
    return first, read, step2, su, tstart

res = {}
for r in range(rounds):
    for mode in modes:
        for name, b in (builds if r % 2 == 0 else builds[::-1]):
            res.setdefault((name, mode), []).append(one(b, mode))
print("%-8s %-11s %9s %9s %9s %9s %9s %7s" % ("build", "mode", "T start", "T first", "read", "step",
                                             "budget", "ratio"))
for mode in modes:
    for name, _ in builds:
        v = res[(name, mode)]
        T = statistics.median(x[0] for x in v)
        rd = statistics.median(x[1] for x in v)
        st = statistics.median(x[2] for x in v)
        ratio = statistics.median(x[0] / (x[1] + x[2] + 1.0) for x in v)
        ts = statistics.median(x[4] for x in v)
        print("%-8s %-11s %8.2fs %8.2fs %8.2fs %8.2fs %8.2fs %7.2f" % (name, mode, ts, T, rd, st,
                                                                   rd + st + 1.0, ratio))
for mode in modes:
    su = [x[3] for x in res[("after", mode)] if x[3]]
    if su: print("%s (after, last round): %s" % (mode, su[-1]))
PY
