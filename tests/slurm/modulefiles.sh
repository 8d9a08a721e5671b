#!/bin/bash
# modulefiles.sh -- the Lmod (Lua) and Environment Modules (Tcl) module files
# that "make install" generates: installed for a temporary prefix with
# "make install-modulefiles prefix=... modulefilesdir=...", then really
# loaded with Lmod and, where environment-modules is installed, with Tcl
# modules; uninstall removes them.  Needs a configured build tree.
. "${ZT_SRCDIR:-$(dirname "$0")/../..}/tests/slurm/lib.sh"

[ -f "$ZT_BUILDDIR/Makefile" ] || skip_all "build tree not configured ($ZT_BUILDDIR/Makefile)"
version=$(sed -n 's/^VERSION = //p' "$ZT_BUILDDIR/Makefile")
[ -n "$version" ] || skip_all "no VERSION in $ZT_BUILDDIR/Makefile"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/zt-modules.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
mf=$tmp/modulefiles

make -s -C "$ZT_BUILDDIR" install-modulefiles prefix="$prefix" modulefilesdir="$mf" >"$tmp/log" 2>&1
check "make install-modulefiles prefix=... modulefilesdir=... succeeds" test $? = 0 || diag "$(cat "$tmp/log")"
lua=$mf/ztrain/$version.lua
tcl=$mf/tcl/ztrain/$version
check "Lmod module file $mf/ztrain/$version.lua installed" test -f "$lua"
check "Tcl module file $mf/tcl/ztrain/$version installed" test -f "$tcl"
is "$(cat "$lua" "$tcl" 2>/dev/null | grep -c '@[a-zA-Z_]*@')" 0 "no @placeholders@ left"
like "$(cat "$lua" 2>/dev/null)" "prepend_path(\"PATH\",            \"$prefix/bin\")" "paths expanded for the prefix given to make"
like "$(head -n 1 "$tcl" 2>/dev/null)" "#%Module" "Tcl file starts with the #%Module magic"

# A clean shell for each module system (they both define "module").
clean_bash() { env -i HOME="$tmp" PATH=/usr/local/bin:/usr/bin:/bin TERM=dumb bash --norc --noprofile -c "$1" 2>&1; }

# load_with LABEL INIT_SCRIPT MODULEPATH_DIR: module load ztrain there and
# check the environment it gives
load_with() {
    local label=$1 init=$2 dir=$3 out
    out=$(clean_bash ". $init; module use '$dir'; module load ztrain || exit 1
        echo PATH=\$PATH; echo PKG_CONFIG_PATH=\$PKG_CONFIG_PATH; echo LD_LIBRARY_PATH=\$LD_LIBRARY_PATH
        echo MANPATH=\$MANPATH; echo CPATH=\$CPATH; module -t list 2>&1 | sed 's/^/LIST=/'
        module whatis ztrain 2>&1 | sed 's/^/WHATIS=/'; module help ztrain 2>&1 | sed 's/^/HELP=/'
        module unload ztrain; echo AFTER=\$PATH")
    like "$out" "PATH=$prefix/bin:" "$label: module load ztrain puts <prefix>/bin first in PATH"
    like "$out" "PKG_CONFIG_PATH=$prefix/lib/pkgconfig" "$label: PKG_CONFIG_PATH has <prefix>/lib/pkgconfig"
    like "$out" "LD_LIBRARY_PATH=$prefix/lib" "$label: LD_LIBRARY_PATH has <prefix>/lib"
    like "$out" "MANPATH=$prefix/share/man" "$label: MANPATH has <prefix>/share/man"
    like "$out" "CPATH=$prefix/include" "$label: CPATH has <prefix>/include"
    like "$out" "ztrain/$version" "$label: module list shows ztrain/$version"
    like "$out" "Version: $version" "$label: whatis gives the version"
    like "$out" "ztrain train --config FILE" "$label: module help explains the program"
    unlike "$(printf '%s\n' "$out" | grep '^AFTER=')" "$prefix" "$label: module unload removes the prefix again"
}

lmod_init=/usr/share/lmod/lmod/init/bash
if [ -r "$lmod_init" ]; then
    load_with "Lmod, Lua file" "$lmod_init" "$mf"
    if command -v tclsh >/dev/null 2>&1; then
        load_with "Lmod, Tcl file" "$lmod_init" "$mf/tcl"
    else
        skip "Lmod loading the Tcl file" "tclsh not installed"
    fi
else
    skip "Lmod module load" "Lmod not installed (apt-get install lmod)"
fi

# Environment Modules (Tcl); Debian's package conflicts with lmod, so it is
# often absent where Lmod is installed.
modules_init=/usr/share/modules/init/bash
have_modulecmd=""
for f in /usr/lib/modulecmd.tcl /usr/lib/*/modulecmd.tcl /usr/share/modules/libexec/modulecmd.tcl; do
    [ -e "$f" ] && have_modulecmd=$f
done
if [ -r "$modules_init" ] && [ -n "$have_modulecmd" ]; then
    load_with "Environment Modules, Tcl file" "$modules_init" "$mf/tcl"
else
    skip "Environment Modules loading the Tcl file" \
         "environment-modules not installed (apt-get install environment-modules; conflicts with lmod on Debian)"
fi

make -s -C "$ZT_BUILDDIR" uninstall-modulefiles prefix="$prefix" modulefilesdir="$mf" >>"$tmp/log" 2>&1
check "make uninstall-modulefiles removes both files" test ! -e "$lua" -a ! -e "$tcl"

make -s -C "$ZT_BUILDDIR" install-modulefiles prefix=/opt/ztrain DESTDIR="$tmp/dest" >>"$tmp/log" 2>&1
found=$(cd "$tmp/dest" 2>/dev/null && find . -name "$version.lua" | head -n 1)
like "$(cat "$tmp/dest/$found" 2>/dev/null)" '"/opt/ztrain/bin"' "DESTDIR install: files under DESTDIR name the real prefix (${found#.})"
done_testing
