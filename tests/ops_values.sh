#!/bin/bash
# ops_values.sh -- ztrain and the Slurm plugin parse the shared values with
# one parser (ztrain_resume_check in ztrain_env.h): what the plugin refuses
# (tests/slurm/test_spank_opts: "AUTO", "auto ", " Never"), ztrain refuses
# from every source, instead of taking it as a path (issue 16, item 2).
. "$(dirname "$0")/lib.sh"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
C=(--config "$ZT_SRCDIR/configs/tiny.json" --train x --val '' --print-config)
for v in AUTO "auto " " never" Never; do
    ZTRAIN_RESUME="$v" "$ZTRAIN" train "${C[@]}" > o.txt 2> e.txt; rc=$?
    ok $([ $rc = 2 ] && grep -q "ZTRAIN_RESUME" e.txt; echo $?) "ZTRAIN_RESUME='$v' refused (exit $rc: $(cat e.txt))"
    "$ZTRAIN" train "${C[@]}" --resume "$v" > o.txt 2> e.txt; rc=$?
    ok $([ $rc = 2 ]; echo $?) "--resume '$v' refused (exit $rc)"
done
printf '{"ztrain": {"checkpoint": {"resume": "Auto"}}}' > r.json
"$ZTRAIN" train "${C[@]}" --config r.json > o.txt 2> e.txt; rc=$?
ok $([ $rc = 2 ] && grep -q "r.json" e.txt; echo $?) "\"resume\": \"Auto\" in a file refused (exit $rc)"
for v in auto never autosave/step-1; do
    "$ZTRAIN" train "${C[@]}" --resume "$v" > o.txt 2> e.txt
    ok $? "--resume '$v' accepted"
done
done_testing
