#!/bin/bash
# report_browser.sh -- `ztrain report`'s page in a real headless browser
# (issue 46, item 2; optional: SKIPs without chromium or python3).  Chromium
# takes a screenshot of a two-run report, and one of the same page with its
# curves (polylines, markers) removed; the pixels that differ are the curves:
# there must be many (over 2000), and over 300 in each run's colour (#1f77b4,
# #d62728).
. "$(dirname "$0")/lib.sh"
CHROME=${ZT_CHROMIUM:-$(command -v chromium || command -v chromium-browser || command -v google-chrome)}
[ -n "$CHROME" ] && [ -x "$CHROME" ] || skip_all "no chromium (apt-get install chromium)"
command -v python3 > /dev/null || skip_all "no python3 (to read the screenshots)"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
head -c 120000 "$ZT_SRCDIR/data/tinyshakespeare.txt" > corpus.txt
"$ZTRAIN" prep --input corpus.txt --output c > /dev/null || { echo "Bail out! ztrain prep failed"; exit 1; }
for r in a:1e-3 b:3e-3; do
    "$ZTRAIN" train --config "$ZT_SRCDIR/configs/tiny.json" --train c_train.bin --val c_val.bin --threads 1 \
        --sample-tokens 0 --steps 8 --eval-every 4 --eval-batches 1 --ckpt-every 0 --ckpt-dir ck_${r%%:*} \
        --lr "${r#*:}" --metrics "${r%%:*}.jsonl" > "${r%%:*}.out" 2>&1 || { echo "Bail out! training failed"; exit 1; }
done
"$ZTRAIN" report a.jsonl b.jsonl -o r.html > /dev/null
ok $? "ztrain report a.jsonl b.jsonl -o r.html"
grep -v '<polyline \|<circle ' r.html > bare.html
shot() {
    timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
        --user-data-dir="$T/profile" --window-size=1600,1400 --screenshot="$T/$2" "file://$T/$1" > /dev/null 2>&1
    [ -s "$2" ]
}
shot r.html r.png && shot bare.html bare.png
ok $? "chromium --headless --screenshot of the page and of the page without its curves"
out=$(python3 - r.png bare.png <<'PY'
import struct, sys, zlib
def png(path):
    d = open(path, "rb").read()
    assert d[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w = 8, b"", 0
    while pos < len(d):
        n, t = struct.unpack(">I4s", d[pos:pos + 8]); body = d[pos + 8:pos + 8 + n]; pos += 12 + n
        if t == b"IHDR": w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
        elif t == b"IDAT": idat += body
    bpp = {2: 3, 6: 4}[ctype]; raw = zlib.decompress(idat); stride = w * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(h):
        f = raw[i]; line = bytearray(raw[i + 1:i + 1 + stride]); i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0; b = prev[x]; c = prev[x - bpp] if x >= bpp else 0
            if f == 1: line[x] = (line[x] + a) & 255
            elif f == 2: line[x] = (line[x] + b) & 255
            elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line)); prev = line
    return w, h, bpp, rows
w, h, bpp, A = png(sys.argv[1]); _, _, bpp2, B = png(sys.argv[2])
diff, near = 0, {(0x1f, 0x77, 0xb4): 0, (0xd6, 0x27, 0x28): 0}
for y in range(h):
    ra, rb = A[y], B[y]
    if ra == rb: continue
    for x in range(w):
        pa, pb = ra[x * bpp:x * bpp + 3], rb[x * bpp2:x * bpp2 + 3]
        if pa != pb:
            diff += 1
            for c in near:
                if max(abs(pa[k] - c[k]) for k in range(3)) <= 24: near[c] += 1
print("%d %d %d" % (diff, near[(0x1f, 0x77, 0xb4)], near[(0xd6, 0x27, 0x28)]))
PY
)
set -- $out
ok $([ "${1:-0}" -gt 2000 ] && [ "${2:-0}" -gt 300 ] && [ "${3:-0}" -gt 300 ]; echo $?) \
   "the curves are on the screen: $1 pixels differ from the page without them, $2 in run a's colour, $3 in run b's"
done_testing
