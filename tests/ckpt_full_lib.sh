# ckpt_full_lib.sh -- the full-disk set-up of tests/ckpt_disk_full.sh and
# tests/ckpt_async_disk_full.sh (sourced after ckpt_lib.sh): the checkpoint
# directory M/ck on a 3 MiB tmpfs at $M (skipped when it cannot be mounted:
# needs root), ztrain.comm_timeout_s left at its default (300 s), GUARD
# the timeout guard of each run.
M="$T/M"
mkdir -p "$M"
mount -t tmpfs -o size=3m tmpfs "$M" 2> mount.err ||
    skip_all "cannot mount a tmpfs ($(head -n 1 mount.err)): needs root"
trap 'cd /; umount "$M" 2> /dev/null; rm -rf "$T"' EXIT
unset ZTRAIN_COMM_TIMEOUT_S
GUARD=120   # timeout guard of each run (the saves end in seconds)

avail() { df -B1 --output=avail "$M" | tail -n 1 | tr -d ' '; }
# leave BYTES: fill M to about BYTES free; FREE the bytes a run will find
# (the run's lock file, checkpoint.dir/.ztrain.lock, takes one block before
# the check)
leave() {
    dd if=/dev/zero of=M/fill bs=4096 count=$((($(avail) - $1) / 4096)) 2> /dev/null
    FREE=$(($(avail) - $(stat -f -c %S "$M")))
}
# stop_fill: with a run started in the background with rank 0 to stop at a
# crash point (ZT_CKPT_CRASH_AT=stop:...@STEP ZT_CKPT_CRASH_RANK=0): wait
# (60 s at most) for rank 0 to stop, fill M, and let rank 0 go on.  pid:
# rank 0's (empty when it never stopped); FILLED: the bytes left
stop_fill() {
    pid=
    for _ in $(seq 600); do
        pid=$(sed -n 's/.*stopping rank 0 (pid \([0-9]*\)).*/\1/p' run.err 2> /dev/null)
        [ -n "$pid" ] && [ "$(ps -o state= -p "$pid" | tr -d ' ')" = T ] && break
        pid=; sleep 0.1
    done
    dd if=/dev/zero of=M/fill bs=4096 2> /dev/null
    FILLED=$(avail)
    [ -n "$pid" ] && kill -CONT "$pid"
}
# fill_during RUN POINT: RUN (run2 or the like: a function taking ENV...)
# in the background with rank 0 stopped at ZT_CKPT_CRASH_AT=stop:POINT
# while the disk is filled (stop_fill), from an empty disk and no run.err;
# RC its exit status, the first lines of its errors as diagnostics
fill_during() {
    rm -f M/fill run.err
    "$1" ZT_CKPT_CRASH_AT=stop:$2 ZT_CKPT_CRASH_RANK=0 &
    local job=$!
    stop_fill
    wait $job
    RC=$?
    diag <(grep -v 'pwritev' run.err | head -n 3)
}
# failed_once REGEX: the run exited 1 with one error, matching REGEX, and no
# watchdog line ("no progress")
failed_once() {
    [ $RC = 1 ] && [ "$(grep -c '^ztrain: error:' run.err)" = 1 ] && ! grep -q 'no progress' run.err &&
        grep -Eq "$1" run.err
}
