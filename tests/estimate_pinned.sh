#!/bin/bash
# estimate_pinned.sh -- `ztrain estimate --json`'s page-locked host memory:
# model_states.pinned_staging is the staging a GPU run page-locks for its
# asynchronous copies whatever pin_memory says (memplan.h pinned_staging),
# counted in pinned_bytes:
#   gpu, pin_memory off      pinned_bytes = pinned_staging > 0;
#   a larger micro batch     the staging grows by the token arrays' bytes
#                            (inputs and targets, 4 bytes a token each);
#   optimizer offloaded and  pinned_bytes = offloaded_bytes + pinned_staging,
#   pinned                   the staging larger (the update's gradient
#                            slices), the same peak;
#   parameters offloaded     pinned_bytes = offloaded_params_bytes + staging;
#   and pinned
#   cpu target               0 and 0 (nothing can pin).
. "$(dirname "$0")/lib.sh"
need_python3
in_tmpdir
clean_ztrain_env

# est NAME ARGS...: estimate --json of the tiny model on 2 ranks into NAME.json
est() {
    local name=$1; shift
    "$ZTRAIN" estimate --config "$ZT_SRCDIR/configs/tiny.json" --world-size 2 --json "$@" \
        > "$name.json" 2> "$name.err"
    ok $? "$name: ztrain estimate $* --json"
}
PO=(--zero_optimization.offload_optimizer.pin_memory true)
PP=(--zero_optimization.offload_param.pin_memory true)
est gpu --device gpu --micro-batch 2
est gpu4 --device gpu --micro-batch 4
est opt --device gpu --micro-batch 2 --stage 2 --offload optimizer
est optpin --device gpu --micro-batch 2 --stage 2 --offload optimizer "${PO[@]}"
est parpin --device gpu --micro-batch 2 --stage 3 --offload params "${PP[@]}"
est cpu --device cpu --micro-batch 2 "${PO[@]}" "${PP[@]}"

python3 - <<'PY' > checks.txt
import json
j = {n: json.load(open(n + ".json")) for n in ("gpu", "gpu4", "opt", "optpin", "parpin", "cpu")}
ms = {n: j[n]["model_states"] for n in j}
def line(ok, what):
    print(("ok" if ok else "not ok") + " " + what)
g, g4, o, op, pp, c = (ms[n] for n in ("gpu", "gpu4", "opt", "optpin", "parpin", "cpu"))
print("# staging: gpu %d, micro 4 %d, optimizer offloaded %d, pinned %d, params pinned %d, cpu %d" %
      (g["pinned_staging"], g4["pinned_staging"], o["pinned_staging"], op["pinned_staging"],
       pp["pinned_staging"], c["pinned_staging"]))
line(g["pinned_staging"] > 0 and g["pinned_bytes"] == g["pinned_staging"] and
     o["pinned_bytes"] == o["pinned_staging"] == g["pinned_staging"],
     "gpu, pin_memory off: pinned_bytes = pinned_staging > 0 (the optimizer offloaded and not pinned too)")
tok = (j["gpu4"]["run"]["micro_batch"] - j["gpu"]["run"]["micro_batch"]) * j["gpu"]["model"]["context"]
line(tok > 0 and g4["pinned_staging"] - g["pinned_staging"] == 2 * 4 * tok,
     "a larger micro batch: the staging grows by the token arrays (2 x 4 bytes x %d tokens)" % tok)
line(op["offloaded_bytes"] > 0 and op["pinned_bytes"] == op["offloaded_bytes"] + op["pinned_staging"] and
     op["pinned_staging"] > o["pinned_staging"] and j["optpin"]["peak_bytes"] == j["opt"]["peak_bytes"],
     "optimizer offloaded and pinned: pinned_bytes = offloaded_bytes + pinned_staging, the staging larger, the same peak")
line(pp["offloaded_params_bytes"] > 0 and
     pp["pinned_bytes"] == pp["offloaded_params_bytes"] + pp["pinned_staging"] and
     pp["pinned_staging"] > 0,
     "parameters offloaded and pinned: pinned_bytes = offloaded_params_bytes + pinned_staging")
line(c["pinned_bytes"] == 0 and c["pinned_staging"] == 0, "cpu target, pin_memory asked: 0 pinned, 0 staging")
PY
r=$?
while read -r st rest; do
    case $st in
        ok) ok 0 "$rest" ;;
        not) ok 1 "${rest#ok }" ;;
        '#') echo "# $rest" ;;
    esac
done < checks.txt
ok $r "the checks ran (python3 exit $r)"
done_testing
