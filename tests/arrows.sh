#!/bin/bash
# arrows.sh -- the house is one-way: kernels <- libtrain <- {ckpt, io} <- run <- cli;
# the plugin stands apart and shares only libtrain/ztrain_env.h.
#
# Every #include "..." of the tree's sources is resolved the way the build
# resolves it (the including file's directory, then the flat -I list
# libtrain kernels io ckpt run) to the room that owns the header, and must point
# to the same room or a floor below:
#   kernels  -> kernels
#   libtrain -> libtrain kernels
#   io       -> io libtrain kernels          (never ckpt)
#   ckpt     -> ckpt libtrain kernels        (never io)
#   run      -> run io ckpt libtrain kernels (the whole run: ztrain_run.h)
#   cli      -> cli run io ckpt libtrain kernels
#   plugin   -> plugin, and libtrain/ztrain_env.h only
# A room's private headers (libtrain/ctx.h, *_internal.h, *_int.h) stay in
# their room.  Headers found nowhere in the tree (ztconfig.h, generated)
# belong to no room.  One TAP check per source file; a failure names file,
# line, header and the arrow it breaks.
#
# Two rules of the checkpoint room, by name (calls, not includes):
#   - nothing in ckpt/ starts a process (posix_spawn, fork, exec*, system,
#     popen): the scheduler's side (the Slurm requeue) is the runtime's,
#     libtrain/runtime.c;
#   - the save goes one way: the background save (ckpt/ckpt_async.c) calls
#     the save (ckpt_save.c, ckpt_commit.c), which names nothing that
#     ckpt_async.c defines (a deferred save is described by the save's own
#     ck_deferred).
#
# Two rules of the rank layout (libtrain/mesh.h), by name:
#   - libtrain/train.c (and its context, ctx.h) includes no built-in model's
#     header (the header of a file that defines a zt_arch descriptor: gpt.h,
#     llama.h, ...): models are reached through their descriptors (arch.h);
#   - only libtrain/mesh.c asks the comm backends for groups: no other file
#     of libtrain/, ckpt/ or io/ calls a function of libtrain/comm*.h that
#     hands out a new zt_group (zt_group_mpi, _split, _nccl, _host_staged);
#     the backends themselves (libtrain/comm*.c) implement them.
#
# The tree checked: $1, else $ZT_ARROWS_TREE, else $ZT_SRCDIR (the source
# tree under `make check`).
. "$(dirname "$0")/lib.sh"
TREE="${1:-${ZT_ARROWS_TREE:-$ZT_SRCDIR}}"
[ -d "$TREE/libtrain" ] || { echo "1..0 # SKIP no tree at $TREE"; exit 0; }
cd "$TREE" || exit 1

ROOMS="kernels libtrain io ckpt run cli plugin"
allowed() {  # allowed FROM TO: the arrow FROM -> TO is legal
    case "$1:$2" in
    kernels:kernels) return 0 ;;
    libtrain:libtrain|libtrain:kernels) return 0 ;;
    io:io|io:libtrain|io:kernels) return 0 ;;
    ckpt:ckpt|ckpt:libtrain|ckpt:kernels) return 0 ;;
    run:run|run:io|run:ckpt|run:libtrain|run:kernels) return 0 ;;
    cli:cli|cli:run|cli:io|cli:ckpt|cli:libtrain|cli:kernels) return 0 ;;
    plugin:plugin) return 0 ;;
    esac
    return 1
}
room_of() {  # room_of PATH: the top directory
    echo "${1%%/*}"
}
resolve() {  # resolve INCLUDING_FILE HEADER: the tree path of HEADER, or ""
    local dir; dir=$(dirname "$1")
    local d
    for d in "$dir" libtrain kernels io ckpt run; do
        if [ -f "$d/$2" ]; then echo "$d/$2" | sed 's|^\./||'; return; fi
    done
    echo ""
}
private() {  # private HEADER_PATH: only its own room may include it
    case "$(basename "$1")" in
    ctx.h|*_internal.h|*_internal.cuh|*_int.h) return 0 ;;
    esac
    return 1
}

nfiles=0
for room in $ROOMS; do
    while IFS= read -r f; do
        nfiles=$((nfiles + 1))
        bad=""
        while IFS=: read -r line hdr; do
            [ -n "$hdr" ] || continue
            path=$(resolve "$f" "$hdr")
            [ -n "$path" ] || continue
            to=$(room_of "$path")
            why=""
            if [ "$room" = plugin ] && [ "$path" = libtrain/ztrain_env.h ]; then
                :
            elif ! allowed "$room" "$to"; then
                why="$room may not include a header of $to"
            elif [ "$to" != "$room" ] && private "$path"; then
                why="$path is private to $to"
            fi
            [ -z "$why" ] || bad="$bad$f:$line: #include \"$hdr\" ($path): $why"$'\n'
        done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" |
                 sed 's/^\([0-9]*\):[^"]*"\([^"]*\)".*/\1:\2/')
        if [ -z "$bad" ]; then
            ok 0 "$f"
        else
            ok 1 "$f includes against the arrows"
            printf '%s' "$bad" | sed 's/^/# /'
        fi
    done < <(find "$room" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | sort)
done
[ "$nfiles" -gt 0 ] || ok 1 "source files found under $TREE"

spawns=$(grep -nE '(^|[^A-Za-z0-9_])(posix_spawnp?|fork|vfork|exec[lv]p?e?|system|popen)\(' \
         ckpt/*.c ckpt/*.h)
ok "$([ -z "$spawns" ]; echo $?)" "nothing in ckpt/ starts a process"
[ -z "$spawns" ] || printf '%s\n' "$spawns" | sed 's/^/# /'

# the names ckpt_async.c defines at file scope (not static), and its struct
async_names=$(grep -E '^[a-z][a-z0-9_ *]*[ *][a-z_][a-z0-9_]*\(' ckpt/ckpt_async.c | grep -v '^static' |
              sed -E 's/^[a-z][a-z0-9_ *]*[ *]([a-z_][a-z0-9_]*)\(.*/\1/' | sort -u)
if [ -z "$async_names" ]; then
    ok 1 "ckpt/ckpt_async.c defines functions"
else
    back=$(grep -snwE "zt_ckpt_async|$(echo $async_names | tr ' ' '|')" ckpt/ckpt_save.c ckpt/ckpt_commit.c)
    ok "$([ -z "$back" ]; echo $?)" \
       "the save (ckpt_save.c, ckpt_commit.c) names nothing of the background save's (ckpt_async.c: $(echo $async_names | wc -w) names)"
    [ -z "$back" ] || printf '%s\n' "$back" | sed 's/^/# /'
fi
# the built-in models' headers: those of the files defining a descriptor
model_hdrs=$(grep -lE '^const zt_arch zt_arch_[a-z0-9_]+ *=' libtrain/*.c | sed 's|^libtrain/||; s|\.c$|.h|' |
             sort -u)
if [ -z "$model_hdrs" ]; then
    ok 1 "libtrain/ defines the built-in models' descriptors (zt_arch)"
else
    inc=$(grep -nE "^[[:space:]]*#[[:space:]]*include[[:space:]]*\"($(echo $model_hdrs | tr ' ' '|' |
          sed 's/\./\\./g'))\"" libtrain/train.c libtrain/ctx.h)
    ok "$([ -z "$inc" ]; echo $?)" \
       "libtrain/train.c and ctx.h include no model header ($(echo $model_hdrs))"
    [ -z "$inc" ] || printf '%s\n' "$inc" | sed 's/^/# /'
fi

# the comm backends' group-building functions: those handing out a zt_group **
group_fns=$(cat libtrain/comm*.h | tr '\n' ' ' |
            grep -oE 'zt_group_[a-z0-9_]+\([^)]*zt_group \*\*[^)]*\)' | sed 's/(.*//' | sort -u)
if [ -z "$group_fns" ]; then
    ok 1 "libtrain/comm*.h declares the group-building functions"
else
    calls=$(find libtrain ckpt io -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) \
                 ! -name 'comm*' ! -path libtrain/mesh.c | sort |
            xargs grep -nE "(^|[^A-Za-z0-9_])($(echo $group_fns | tr ' ' '|'))[[:space:]]*\(")
    ok "$([ -z "$calls" ]; echo $?)" \
       "only libtrain/mesh.c builds communicator groups ($(echo $group_fns))"
    [ -z "$calls" ] || printf '%s\n' "$calls" | sed 's/^/# /'
fi
done_testing
