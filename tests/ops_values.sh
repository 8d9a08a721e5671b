#!/bin/bash
# ops_values.sh -- ztrain and the Slurm plugin parse the shared values with
# one parser (ztrain_resume_check in ztrain_env.h): what the plugin refuses
# (tests/slurm/test_spank_opts: "AUTO", "auto ", " Never"), ztrain refuses
# from every source, instead of taking it as a path (issue 16, item 2); the
# site limits hold from every source and without the task's own copy (item 1).
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

# The plugin's root-owned statement (ztrain_env.h): ztrain applies the one of
# its nearest slurmstepd ancestor whatever the environment says, and ignores
# one that is stale (another process's start time) or writable by others.
# A copy of bash named slurmstepd stands in for Slurm's; the file is what
# plugin/zt_stepd.c writes.  Root only (/run/ztrain is root's).
if [ "$(id -u)" = 0 ] && mkdir -p /run/ztrain 2>/dev/null; then
    cp "$(command -v bash)" "$T/slurmstepd"
    # stepd START MODE LIMITS ARGS...: run ztrain train ARGS under the stand-in
    # with a statement "start=START|self" and LIMITS; prints ztrain's exit code
    stepd() {
        "$T/slurmstepd" -c '
            f=/run/ztrain/stepd-$$
            s=$1; [ "$s" = self ] && s=$(sed "s/.*) //" /proc/$$/stat | cut -d" " -f20)
            printf "start=%s\n%s\n" "$s" "$3" > "$f"; chmod "$2" "$f"
            shift 3; "$@" > o.txt 2> e.txt; rc=$?
            rm -f "$f"; echo $rc' _ "$@"
    }
    Z=("$ZTRAIN" train "${C[@]}")
    rc=$(stepd self 0644 "max_stage=1 max_dataloaders=4" env -u ZTRAIN_SITE_LIMITS "${Z[@]}" --stage 3)
    ok $([ "$rc" = 2 ] && grep -q "exceeds the site limit max_stage=1 (stated by the ztrain Slurm plugin in /run/ztrain/stepd-" e.txt; echo $?) \
       "statement of the slurmstepd ancestor: --stage 3 refused without ZTRAIN_SITE_LIMITS (exit $rc: $(cat e.txt))"
    rc=$(stepd self 0644 "max_stage=1 max_dataloaders=4" env ZTRAIN_SITE_LIMITS="max_stage=3" "${Z[@]}" --dataloaders 5)
    ok $([ "$rc" = 2 ] && grep -q "max_dataloaders=4 (stated by the ztrain Slurm plugin in" e.txt; echo $?) \
       "... and with a raised ZTRAIN_SITE_LIMITS (exit $rc)"
    rc=$(stepd self 0644 "max_stage=3" env ZTRAIN_SITE_LIMITS="max_stage=1" "${Z[@]}" --stage 2)
    ok $([ "$rc" = 2 ] && grep -q "max_stage=1 (ZTRAIN_SITE_LIMITS" e.txt; echo $?) \
       "the stricter of the statement and ZTRAIN_SITE_LIMITS holds (exit $rc)"
    rc=$(stepd 1 0644 "max_stage=1" "${Z[@]}" --stage 3)
    ok $([ "$rc" = 0 ]; echo $?) "a stale statement (another process's start time) is ignored (exit $rc)"
    rc=$(stepd self 0666 "max_stage=1" "${Z[@]}" --stage 3)
    ok $([ "$rc" = 0 ]; echo $?) "a statement writable by others is not trusted (exit $rc)"
    rc=$(stepd self 0644 "max_stage=one" "${Z[@]}" --stage 0)
    ok $([ "$rc" = 2 ] && grep -q "site-limit statement /run/ztrain/stepd-.* is value not an integer" e.txt; echo $?) \
       "a malformed trusted statement is refused (exit $rc: $(cat e.txt))"
    rc=$(stepd self 0644 "max_stage=1" "${Z[@]}" --stage 1)
    ok $([ "$rc" = 0 ]; echo $?) "within the stated limits: runs (exit $rc)"
else
    ok 0 "the plugin's statement file # SKIP not root (/run/ztrain is root's)"
fi
done_testing
