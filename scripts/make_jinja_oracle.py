#!/usr/bin/env python3
"""make_jinja_oracle.py -- jinja2's own test-suite templates rendered in transformers' chat-template
environment: the oracle of io/jinja/ (tests/test_jinja_oracle, issue 45).

What it extracts (Python's ast, from tests/test_*.py of the jinja2 sdist):
  - every string-literal first argument of a call X.from_string(...) or Template(...) (also a name bound
    to a string literal earlier in the same function, and "a" "b" / "a" + "b" concatenations);
  - the string values of dict literals passed to DictLoader({...}) (templates that {% include %} or
    {% extends %} others raise in transformers' environment, which has no loader);
  - the variables of the render calls of those templates: X.from_string(S).render(...) and
    t = X.from_string(S) ... t.render(...) in one function, keyword arguments and a positional dict
    whose values evaluate from literals (list(range(10)), a name bound to a literal in the function);
    tuples become lists, int keys strings, through JSON (the value both sides render with).
Each template gives one entry rendered with the fixed variables alone and one per distinct set of
render-call variables; each template has the messages loop LOOP appended, so that the message path is
exercised in every entry.

How it renders: transformers.utils.chat_template_utils.render_jinja_template (transformers' own
function: its ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks, the AssistantTracker and
loopcontrols extensions, its tojson, raise_exception, strftime_now, dict and namespace), with
conversations=[MESSAGES], add_generation_prompt=False and VARS (+ the entry's variables) as keyword
arguments, exactly the variables the C driver passes to zt_jinja_render.  An exception is recorded as
"raises": "Type: message".

What it drops: templates that are not valid UTF-8 or hold a NUL; templates naming random, lipsum, now or
strftime_now; renderings that differ between two processes with different hash seeds (set order), hold
an object address (" at 0x"), take more than 5 s, or are longer than 64 KiB; duplicates (same template
and variables: the first name is kept).

Usage (the sdist is fetched with pip download when not given; the output is committed):

    python3 -m venv /tmp/v && /tmp/v/bin/pip install transformers jinja2==3.1.6
    /tmp/v/bin/python scripts/make_jinja_oracle.py [--sdist jinja2-3.1.6.tar.gz] tests/data/jinja/oracle.json
"""
import argparse
import ast
import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import tempfile

MESSAGES = [
    {"role": "system", "content": "Answer in one line."},
    {"role": "user", "content": "Is 2 < 3 & \"x\" > 'y'?"},
    {"role": "assistant", "content": "Yes: 2 < 3. Ünïcode ✓"},
]
VARS = {"bos_token": "<s>", "eos_token": "</s>"}
LOOP = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
# names render_jinja_template passes itself (a test's variable of that name is dropped)
RESERVED = {"messages", "tools", "documents", "add_generation_prompt", "conversations", "chat_template",
            "return_assistant_tokens_mask", "continue_final_message"}
NONDETERMINISTIC = re.compile(r"random|lipsum|\bnow\b|strftime_now")
MAX_OUT = 65536


# ---------------------------------------------------------------- extraction

def const_str(node, env):
    """the str value of a literal, a concatenation, an f-string or a name computed from literals (the
    function's parameters included), else None"""
    try:
        v = value_of(node, env)
    except ValueError:
        return None
    return v if isinstance(v, str) else None


SAFE = {"list": list, "range": range, "dict": dict, "tuple": tuple, "str": str, "int": int, "float": float,
        "True": True, "False": False, "None": None}


def value_of(node, env):
    """a render argument's value when it is computed from literals alone (raises ValueError otherwise)"""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    if any(isinstance(n, (ast.Attribute, ast.Lambda, ast.NamedExpr, ast.Starred)) for n in ast.walk(node)):
        raise ValueError("not a literal")
    scope = {}
    for n in names:
        if n in SAFE:
            scope[n] = SAFE[n]
        elif n in env:
            scope[n] = env[n]
        else:
            raise ValueError("unknown name " + n)
    try:
        return eval(compile(ast.Expression(node), "<arg>", "eval"), {"__builtins__": {}}, scope)  # noqa: S307
    except Exception as e:  # noqa: BLE001
        raise ValueError(str(e)) from e


def as_json(v):
    """v through JSON (what the C side sees), or raises ValueError"""
    try:
        return json.loads(json.dumps(v, allow_nan=False, ensure_ascii=False))
    except (TypeError, ValueError, RecursionError) as e:
        raise ValueError(str(e)) from e


def render_vars(call, env):
    """the variables of a .render(...) call as a JSON-exact dict, or None when one is not a literal"""
    out = {}
    try:
        for a in call.args:
            v = value_of(a, env)
            if not isinstance(v, dict):
                return None
            out.update(v)
        for kw in call.keywords:
            if kw.arg is None:
                v = value_of(kw.value, env)
                if not isinstance(v, dict):
                    return None
                out.update(v)
            else:
                out[kw.arg] = value_of(kw.value, env)
        out = as_json(out)
    except ValueError:
        return None
    if not isinstance(out, dict):
        return None
    return {k: v for k, v in out.items() if k not in RESERVED}


def is_template_call(node):
    f = node.func
    return (isinstance(f, ast.Attribute) and f.attr == "from_string") or \
           (isinstance(f, ast.Name) and f.id == "Template") or \
           (isinstance(f, ast.Attribute) and f.attr == "Template")


def scopes(tree):
    """the module and each function: (node, its statements' nodes in source order, not entering nested
    functions)"""
    out = []

    def collect(root):
        nodes = []
        stack = list(ast.iter_child_nodes(root))
        while stack:
            n = stack.pop()
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            nodes.append(n)
            stack.extend(ast.iter_child_nodes(n))
        nodes.sort(key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))
        return nodes

    out.append((tree, collect(tree)))
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append((n, collect(n)))
    return out


def param_cases(fn, env):
    """the variable sets of a function's @pytest.mark.parametrize decorators (their product; [{}] when
    none); a case whose values are not computed from literals is left out"""
    cases = [{}]
    for d in fn.decorator_list:
        if not (isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr == "parametrize"
                and len(d.args) >= 2):
            continue
        try:
            names = value_of(d.args[0], env)
        except ValueError:
            return []
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        if not isinstance(d.args[1], (ast.List, ast.Tuple)):
            return []
        mine = []
        for el in d.args[1].elts:
            try:
                v = value_of(el, env)
            except ValueError:
                continue
            vals = [v] if len(names) == 1 else list(v)
            if len(vals) == len(names):
                mine.append(dict(zip(names, vals)))
        cases = [dict(c, **m) for c in cases for m in mine]
    return cases


def extract(path):
    """[(name, template, vars or None)] of one test file"""
    fname = os.path.basename(path)
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    found = []
    module_env = {}
    for node in tree.body:   # module-level literal constants
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                module_env[node.targets[0].id] = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError):
                pass
    for root, nodes in scopes(tree):
        cases = param_cases(root, module_env) if isinstance(root, (ast.FunctionDef, ast.AsyncFunctionDef)) \
            else [{}]
        for k, case in enumerate(cases):
            tag = f"[{k}]" if len(cases) > 1 else ""
            found.extend(extract_scope(fname, nodes, dict(module_env, **case), tag))
    return found


def extract_scope(fname, nodes, env, tag):
    """the templates of one function's statements, with env the values known at its start"""
    found = []
    bound = {}   # local name -> (line, template)
    for n in nodes:
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            name = n.targets[0].id
            try:
                env[name] = value_of(n.value, env)
            except ValueError:
                env.pop(name, None)
            if isinstance(n.value, ast.Call) and is_template_call(n.value) and n.value.args:
                s = const_str(n.value.args[0], env)
                if s is not None:
                    bound[name] = (n.value.args[0].lineno, s)
                else:
                    bound.pop(name, None)
            else:
                bound.pop(name, None)
        if not isinstance(n, ast.Call):
            continue
        if is_template_call(n) and n.args:
            s = const_str(n.args[0], env)
            if s is not None:
                found.append((f"{fname}:{n.args[0].lineno}{tag}", s, None))
        f = n.func
        if isinstance(f, ast.Name) and f.id == "DictLoader" and n.args and isinstance(n.args[0], ast.Dict):
            for k, v in zip(n.args[0].keys, n.args[0].values):
                s = const_str(v, env)
                key = const_str(k, env) if k is not None else None
                if s is not None and key is not None:
                    found.append((f"{fname}:{v.lineno}{tag}:{key}", s, None))
        if isinstance(f, ast.Attribute) and f.attr == "render":
            target = None
            if isinstance(f.value, ast.Call) and is_template_call(f.value) and f.value.args:
                s = const_str(f.value.args[0], env)
                if s is not None:
                    target = (f.value.args[0].lineno, s)
            elif isinstance(f.value, ast.Name) and f.value.id in bound:
                target = bound[f.value.id]
            if target is None or not (n.args or n.keywords):
                continue
            v = render_vars(n, env)
            if v:
                found.append((f"{fname}:{target[0]}{tag} render@{n.lineno}", target[1], v))
    return found


# ---------------------------------------------------------------- rendering (worker process)

class Timeout(Exception):
    pass


def on_alarm(signum, frame):
    raise Timeout()


def worker():
    from transformers.utils.chat_template_utils import render_jinja_template
    entries = json.load(sys.stdin)
    signal.signal(signal.SIGALRM, on_alarm)
    results = []
    for e in entries:
        kwargs = dict(VARS)
        kwargs.update(e.get("vars") or {})
        signal.alarm(5)
        try:
            out, _ = render_jinja_template(conversations=[json.loads(json.dumps(MESSAGES))],
                                           chat_template=e["template"], add_generation_prompt=False, **kwargs)
            r = {"expected": out[0]}
        except Timeout:
            r = {"drop": "timeout"}
        except RecursionError:
            r = {"drop": "recursion"}
        except Exception as x:  # noqa: BLE001  (any exception of the template is the oracle's answer)
            r = {"raises": f"{type(x).__name__}: {x}"}
        finally:
            signal.alarm(0)
        results.append(r)
    json.dump(results, sys.stdout, ensure_ascii=False)


def render_in_process(entries, seed):
    env = dict(os.environ, PYTHONHASHSEED=str(seed), TRANSFORMERS_VERBOSITY="error")
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker"], input=json.dumps(entries),
                       capture_output=True, text=True, env=env, check=False)
    if p.returncode != 0:
        sys.exit(f"make_jinja_oracle: the rendering process failed:\n{p.stderr}")
    return json.loads(p.stdout)


# ---------------------------------------------------------------- main

def sdist_tests(sdist, tmp):
    if sdist is None:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:", "--no-deps",
                        "jinja2==" + jinja_version(), "-d", tmp], check=True)
        sdist = os.path.join(tmp, [f for f in os.listdir(tmp) if f.endswith(".tar.gz")][0])
    if os.path.isdir(sdist):
        return sdist, os.path.basename(os.path.abspath(sdist))
    with tarfile.open(sdist) as t:
        t.extractall(tmp, filter="data")
    top = [d for d in os.listdir(tmp) if os.path.isdir(os.path.join(tmp, d))][0]
    return os.path.join(tmp, top, "tests"), top


def jinja_version():
    import jinja2
    return jinja2.__version__


def main():
    if "--worker" in sys.argv:
        worker()
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sdist", help="the jinja2 sdist (.tar.gz) or its tests/ directory; default: pip download")
    ap.add_argument("out", help="the fixture to write (tests/data/jinja/oracle.json)")
    a = ap.parse_args()
    import transformers
    with tempfile.TemporaryDirectory() as tmp:
        tests, source = sdist_tests(a.sdist, tmp)
        raw = []
        for f in sorted(os.listdir(tests)):
            if f.startswith("test_") and f.endswith(".py"):
                raw.extend(extract(os.path.join(tests, f)))
    entries, seen, stats = [], set(), {"extracted": len(raw)}

    def drop(why):
        stats[why] = stats.get(why, 0) + 1

    for name, tmpl, v in raw:
        try:
            tmpl.encode("utf-8")
            if v is not None:
                json.dumps(v, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            drop("not UTF-8")
            continue
        if "\0" in tmpl or (v is not None and "\\u0000" in json.dumps(v)):
            drop("NUL")
            continue
        if NONDETERMINISTIC.search(tmpl):
            drop("random/lipsum/now")
            continue
        key = (tmpl, json.dumps(v, sort_keys=True))
        if key in seen:
            drop("duplicate")
            continue
        seen.add(key)
        e = {"name": name, "template": tmpl + LOOP}
        if v:
            e["vars"] = v
        entries.append(e)
    r1 = render_in_process(entries, 1)
    r2 = render_in_process(entries, 2)
    kept = []
    for e, x, y in zip(entries, r1, r2):
        if x != y:
            drop("differs between processes")
        elif "drop" in x:
            drop(x["drop"])
        elif "expected" in x and (" at 0x" in x["expected"] or len(x["expected"]) > MAX_OUT or
                                  "\0" in x["expected"]):
            drop("address, NUL or longer than 64 KiB")
        elif "raises" in x and "\0" in x["raises"]:
            drop("NUL")
        else:
            e.update(x)
            kept.append(e)
    stats["kept"] = len(kept)
    stats["raises"] = sum("raises" in e for e in kept)
    doc = {
        "generator": "scripts/make_jinja_oracle.py",
        "source": source + "/tests",
        "jinja2": jinja_version(),
        "transformers": transformers.__version__,
        "messages": MESSAGES,
        "vars": VARS,
        "appended": LOOP,
        "stats": stats,
        "entries": kept,
    }
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(json.dumps(stats))


if __name__ == "__main__":
    main()
