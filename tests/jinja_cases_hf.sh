#!/bin/bash
# jinja_cases_hf.sh -- tests/data/sft/jinja_cases.json (the cases of
# tests/test_jinja) against jinja2, when it is installed ($ZT_HFREF_PYTHON,
# /opt/hfref/bin/python or python3 with jinja2): scripts/make_jinja_cases.py
# renders every case with transformers' chat-template environment today and
# its output must equal the committed file.
. "$(dirname "$0")/lib.sh"
PY=${ZT_HFREF_PYTHON:-/opt/hfref/bin/python}
[ -x "$PY" ] || PY=$(command -v python3)
[ -n "$PY" ] && "$PY" -c "import jinja2" 2> /dev/null || skip_all "no jinja2 (${PY:-no python3})"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$ZT_SRCDIR" || exit 1
"$PY" scripts/make_jinja_cases.py "$T/jinja_cases.json" > "$T/out" 2> "$T/err"
ok $? "scripts/make_jinja_cases.py runs (jinja2 renders the 'same' cases and raises on the 'error' ones)"
diag "$T/out"
diag "$T/err"
check "tests/data/sft/jinja_cases.json is what the script writes today" cmp -s "$T/jinja_cases.json" tests/data/sft/jinja_cases.json
done_testing
