#!/bin/bash
# estimate_plot.sh -- `ztrain estimate --plot FILE.svg` (issue 46, item 3):
# the stacked bars are the estimate's own numbers.  For a CPU target, a GPU
# target with --device-memory (the kernels' workspace a segment, the usable
# device memory the limit) and a LoRA run, every bar segment's bytes are the
# --json output's categories of its plan (bar 0: this configuration, then the
# option rows in order), its height is bytes / ymax * the plot's height, the
# segments stack from the axis up, each plan's peak tick is at its peak_bytes
# and the limit line at limit_bytes (all to the 3 decimals of the drawing).
# Also the attention path a GPU estimate assumes (its text line and JSON field).
. "$(dirname "$0")/lib.sh"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1

# check NAME ARGS...: estimate --json --plot NAME.svg ARGS, then compare
check_plot() {
    local name=$1; shift
    "$ZTRAIN" estimate --config "$ZT_SRCDIR/configs/tiny.json" --json --plot "$name.svg" "$@" > "$name.json" 2> "$name.err"
    ok $([ $? = 0 ] && [ -s "$name.svg" ]; echo $?) "$name: ztrain estimate $* --json --plot $name.svg"
    local place=host
    grep -q '"target": "gpu"' "$name.json" && place=device
    # the plans' numbers: "bar category bytes" (nonzero), "bar peak bytes", "limit bytes"
    awk -v place="$place" '
        function cats(bar, ws,  s, n, i, kv) {
            s = $0; sub(/.*"categories": \{/, "", s); sub(/\}.*/, "", s); n = split(s, kv, /, /)
            for (i = 1; i <= n; ++i) { split(kv[i], q, /": /); gsub(/"/, "", q[1]); if (q[2] + 0) print bar, q[1], q[2] }
            if (ws + 0) print bar, "kernel-workspace", ws
        }
        function num(k,  s) { s = $0; if (!sub(".*\"" k "\": ", "", s)) return 0; sub(/[,}].*/, "", s); return s }
        $0 ~ "^  \"" place "\": " { cats(0, place == "device" ? num("kernel_workspace_bytes") : 0); print 0, "peak", num("peak_bytes") }
        /^  "limit_bytes": / { print "limit", "-", num("limit_bytes") }
        /^    \{"stage": / { ++b; cats(b, place == "device" ? num("kernel_workspace_bytes") : 0)
                            print b, "peak", num(place == "device" ? "peak_device_bytes" : "peak_host_bytes") }
    ' "$name.json" | sort > "$name.want"
    # the drawing: the same lines, and the geometry checked against the mapping
    awk 'function at(n,  s) { if (!match($0, n "=\"[^\"]*\"")) return ""; return substr($0, RSTART + length(n) + 2, RLENGTH - length(n) - 3) }
         function bad(m) { print "BAD " m; nbad++ }
         /<g class="plot"/ { Y = at("data-y"); H = at("data-h"); M = at("data-ymax") }
         /<rect class="seg"/ { b = at("data-bar"); v = at("data-bytes"); y = at("y"); h = at("height")
             print b, at("data-cat"), v
             if ((h - v / M * H) ^ 2 > 0.0011 ^ 2) bad("bar " b " " at("data-cat") " height " h " for " v " bytes")
             bot = (b in top) ? top[b] : Y + H
             if ((y + h - bot) ^ 2 > 0.0021 ^ 2) bad("bar " b " " at("data-cat") " does not stack (" y + h " vs " bot ")")
             top[b] = y }
         /<line class="peak"/ { v = at("data-bytes"); print at("data-bar"), "peak", v
             if ((at("y1") - (Y + H - v / M * H)) ^ 2 > 0.0011 ^ 2) bad("peak tick of bar " at("data-bar")) }
         /<line class="limit"/ { v = at("data-bytes"); print "limit", "-", v
             if ((at("y1") - (Y + H - v / M * H)) ^ 2 > 0.0011 ^ 2) bad("limit line") }
         END { if (!M) bad("no plot area") }' "$name.svg" | sort > "$name.got"
    local nb
    nb=$(grep -c '<line class="peak"' "$name.svg")
    ok $(! grep -q BAD "$name.got" && cmp -s "$name.want" <(grep -v BAD "$name.got") && [ "$nb" -gt 1 ] &&
         [ "$nb" = $(($(grep -c '^    {"stage": ' "$name.json") + 1)) ]; echo $?) \
       "$name: $nb bars, $(grep -c 'class="seg"' "$name.svg") segments: bytes, heights, stacking, peaks$(grep -q '"limit_bytes"' "$name.json" && echo ' and limit') are the estimate's$(grep BAD "$name.got" | head -2 | tr '\n' ' ')$(diff "$name.want" <(grep -v BAD "$name.got") | grep '^[<>]' | head -3 | tr '\n' ' ')"
}
check_plot cpu --world-size 4 --memory-limit 2M
check_plot gpu --world-size 2 --device gpu --device-memory 2G
ok $(grep -q 'data-cat="kernel-workspace"' gpu.svg && grep -q '<line class="limit"' gpu.svg; echo $?) \
   "gpu: the kernels' workspace is a segment, the usable device memory the limit"
# without a device the plan assumes ztrain's attention kernels and says so (JSON and text):
# cuDNN's workspace is known only at run time (the run's pre-flight asks the backend)
A="ztrain's kernels (assumed: no device asked; with cuDNN the run's pre-flight counts cuDNN's fused attention and its workspace, known only at run time)"
"$ZTRAIN" estimate --config "$ZT_SRCDIR/configs/tiny.json" --world-size 2 --device gpu > gpu.txt 2>&1
ok $(grep -qF "\"attention_path\": \"$A\", \"categories\"" gpu.json &&
     [ "$(grep -c '^    attention  *(attention in it: ' gpu.txt)" = 1 ] && grep -qF "(attention in it: $A)" gpu.txt &&
     ! grep -q attention_path cpu.json; echo $?) "gpu: the attention path the kernel workspace assumes, text and JSON; cpu: none"
check_plot lora --world-size 2 --lora-r 4
ok $(! grep -q '<line class="limit"' lora.svg && grep -q 'no limit given' lora.svg; echo $?) "lora: no limit given, none drawn"
"$ZTRAIN" estimate --config "$ZT_SRCDIR/configs/tiny.json" --world-size 2 --plot nodir/x.svg > x.out 2> x.err
ok $([ $? = 1 ] && grep -q '^ztrain: error: nodir/x.svg: cannot write the plot: No such file or directory$' x.err; echo $?) \
   "an unwritable plot file: $(cat x.err)"
done_testing
