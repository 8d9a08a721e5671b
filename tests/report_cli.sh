#!/bin/bash
# report_cli.sh -- `ztrain report` (issue 46, item 2): two short runs' metrics
# files drawn as one self-contained HTML page.  Structural checks: nothing
# fetched (no script, link, src or URL); per chart and run one polyline whose
# point count is the number of the metrics file's records of that value, and
# whose points, mapped back through the plot area's data-* mapping, are the
# records' steps and values (to the 2 decimals of the coordinates); the
# configurations side by side with the differing learning rate first; errors
# name the file and line.  tests/report_browser.sh looks at it in a browser.
. "$(dirname "$0")/lib.sh"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
head -c 120000 "$ZT_SRCDIR/data/tinyshakespeare.txt" > corpus.txt
"$ZTRAIN" prep --input corpus.txt --output c > /dev/null || { echo "Bail out! ztrain prep failed"; exit 1; }
for r in a:1e-3 b:3e-3; do
    "$ZTRAIN" train --config "$ZT_SRCDIR/configs/tiny.json" --train c_train.bin --val c_val.bin --threads 1 \
        --sample-tokens 0 --steps 12 --eval-every 4 --eval-batches 1 --ckpt-every 0 --ckpt-dir ck_${r%%:*} \
        --lr "${r#*:}" --metrics "${r%%:*}.jsonl" > "${r%%:*}.out" 2>&1
    ok $? "train run ${r%%:*} (lr ${r#*:}) with --metrics ${r%%:*}.jsonl"
done
ok $([ -s a.config.json ] && grep -q '"lr": 0.003,' b.config.json; echo $?) \
   "the trainer wrote each run's configuration next to its metrics file (a.config.json, b.config.json)"
"$ZTRAIN" report a.jsonl b.jsonl -o r.html > rep.out 2>&1
ok $([ $? = 0 ] && grep -q "^report: 2 runs, written to r.html$" rep.out; echo $?) "ztrain report a.jsonl b.jsonl -o r.html"
ok $(! grep -Eiq 'http|<script|<link|src=|url\(|@import' r.html; echo $?) \
   "self-contained: no script, link, src, url() or address"
ok $([ "$(grep -c '<svg ' r.html)" = 6 ] && [ "$(grep -c '<polyline ' r.html)" = 14 ]; echo $?) \
   "6 charts, 14 curves (7 values x 2 runs): $(grep -c '<svg ' r.html) and $(grep -c '<polyline ' r.html)"

# the records: "run metric step value"
for k in 0:a 1:b; do
    for m in loss val_loss lr grad_norm tokens_per_s tflops mem_peak_bytes; do
        sed -n "s/^{\"step\": \([0-9]*\),.*\"$m\": \([-0-9.e+]*\)[,}].*/${k%%:*} $m \1 \2/p" "${k#*:}.jsonl"
    done
done > want.txt
# the drawn points mapped back: "run metric step value tolerance"
awk 'function at(n,  s) { if (!match($0, n "=\"[^\"]*\"")) return ""; s = substr($0, RSTART + length(n) + 2, RLENGTH - length(n) - 3); return s }
     /<g class="plot"/ { X = at("data-x"); Y = at("data-y"); W = at("data-w"); H = at("data-h");
                         x0 = at("data-xmin"); x1 = at("data-xmax"); y0 = at("data-ymin"); y1 = at("data-ymax") }
     /<polyline / { n = split(at("points"), P, " ");
                    for (i = 1; i <= n; ++i) { split(P[i], q, ",");
                        printf "%s %s %.6f %.17g %.17g\n", at("data-run"), at("data-metric"),
                               x0 + (q[1] - X) / W * (x1 - x0), y0 + (Y + H - q[2]) / H * (y1 - y0),
                               (y1 - y0) / H * 0.0051 } }' r.html > got.txt
bad=$(awk 'NR == FNR { k = $1 " " $2; w[k, ++nw[k]] = $3 " " $4; next }
           { k = $1 " " $2; j = ++ng[k]; split(w[k, j], e, " ");
             if (j > nw[k] || (($3 - e[1]) ^ 2) > 0.0004 || (($4 - e[2]) ^ 2) > $5 ^ 2) print k "#" j ": " $3 " " $4 " vs " w[k, j] }
           END { for (k in nw) if (ng[k] != nw[k]) print k ": " ng[k] " points, " nw[k] " records" }' want.txt got.txt)
ok $([ -z "$bad" ] && [ "$(wc -l < got.txt)" = "$(wc -l < want.txt)" ] && [ "$(grep -c ' loss ' want.txt)" = 24 ]; echo $?) \
   "every curve has one point per record, at the record's step and value ($(wc -l < want.txt) records)${bad:+: $(echo "$bad" | head -3 | tr '\n' ';')}"
ok $(grep -q '<tr class="diff"><th>optimizer.params.lr</th><td>0.001</td><td>0.003</td></tr>' r.html; echo $?) \
   "the configurations side by side: the learning rates differ (0.001, 0.003)"
ok $(grep -q '<tr><th>ztrain.steps</th><td>12</td><td>12</td></tr>' r.html; echo $?) "... and the shared keys (ztrain.steps 12, 12)"

# a torn last record (a run killed while writing it) is left out
cp a.jsonl t.jsonl
printf '{"step": 13, "loss": 1.0' >> t.jsonl
"$ZTRAIN" report t.jsonl -o t.html > /dev/null 2>&1
ok $([ $? = 0 ] && [ "$(grep -o 'data-metric="loss" stroke="[^"]*" points="[^"]*"' t.html | tr ' ' '\n' | grep -c ,)" = 12 ]; echo $?) \
   "a torn last record is left out (12 loss points)"
{ head -1 a.jsonl; echo 'not json'; } > bad.jsonl
"$ZTRAIN" report bad.jsonl -o x.html > x.out 2>&1
ok $([ $? = 1 ] && grep -q '^ztrain: error: bad.jsonl:2: not a metrics record (a JSON object with "step")$' x.out; echo $?) \
   "a line that is no record: $(cat x.out)"
"$ZTRAIN" report nosuch.jsonl -o x.html > x.out 2>&1
ok $([ $? = 1 ] && grep -q '^ztrain: error: nosuch.jsonl: cannot read: No such file or directory$' x.out; echo $?) \
   "a missing file: $(cat x.out)"
"$ZTRAIN" report a.jsonl > x.out 2>&1
ok $([ $? = 2 ] && grep -q 'report: -o REPORT.html is required' x.out; echo $?) "no -o: $(cat x.out)"
done_testing
