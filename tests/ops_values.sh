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

# the site limits stated by the Slurm plugin hold for every source
export ZTRAIN_SITE_LIMITS="max_stage=1 max_dataloaders=4"
printf '{"zero_optimization": {"stage": 2}}' > s2.json
for a in "--stage 3" "--config s2.json" "--dataloaders 5"; do
    # shellcheck disable=SC2086
    "$ZTRAIN" train "${C[@]}" $a > o.txt 2> e.txt; rc=$?
    ok $([ $rc = 2 ] && grep -q "exceeds the site limit max_" e.txt; echo $?) "site limits: $a refused (exit $rc: $(cat e.txt))"
done
ZTRAIN_STAGE=3 "$ZTRAIN" train "${C[@]}" > o.txt 2> e.txt; rc=$?
ok $([ $rc = 2 ] && grep -q "(env) exceeds the site limit max_stage=1" e.txt; echo $?) "site limits: ZTRAIN_STAGE=3 refused"
"$ZTRAIN" train "${C[@]}" --stage 1 --dataloaders 4 > o.txt 2> e.txt
ok $? "site limits: stage 1 with 4 loaders runs"
ZTRAIN_SITE_LIMITS="max_stage=9" "$ZTRAIN" train "${C[@]}" > o.txt 2> e.txt; rc=$?
ok $([ $rc = 2 ] && grep -q "refusing to run without the site limits" e.txt; echo $?) "a malformed statement is refused, not ignored"
unset ZTRAIN_SITE_LIMITS
done_testing
