/* jinja_int.h -- internals of the chat-template engine (io/jinja.h, docs/sft.md), shared by the
 * files of io/jinja/ (not installed).
 *
 * lexer (data / {{ }} / {% %} / {# #} with jinja2's whitespace rules under
 * trim_blocks + lstrip_blocks) -> recursive-descent parser to an AST ->
 * evaluator over values none/bool/int/float/string/list/tuple/dict/
 * namespace/range/generator/loop.  Strings carry per-byte marks (the
 * assistant message a byte came from) so that the trained spans survive
 * concatenation, slicing, strip and split.  Parse and render allocate from
 * an arena freed at once; errors unwind with longjmp to the entry point,
 * which owns the arena.
 *
 * A template is untrusted input: every operation is bounds- and
 * overflow-checked (integers are 64-bit: a result outside is refused, never
 * wrapped), every recursion is bounded (the parse nesting limits, the value
 * depth), and one rendering has budgets of output bytes, memory and
 * evaluation steps (jinja.h ZT_JINJA_MAX_*): past one, one error naming the
 * limit and the line.
 *
 *   values.c   the arena, errors and budgets; values, dicts; UTF-8; marked strings, string buffers
 *   lex.c      the lexer: a template's text -> tokens
 *   parse.c    the parser: tokens -> the AST; zt_jinja_parse, zt_jinja_free
 *   ops.c      Python's semantics of the values: numbers, printing (str, repr, tojson), comparisons,
 *              sequences and slices, attributes and items, the operators
 *   filters.c  str / dict / list / loop methods, the global functions, tests and filters
 *   eval.c     evaluation of the AST: expressions, statements; zt_jinja_render
 *
 * What crosses files is named zj_*; the rest of each file is static. */
#ifndef ZT_IO_JINJA_INT_H
#define ZT_IO_JINJA_INT_H
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include "internal.h"
#include "jinja.h"

/* ---------------------------------------------------------------- arena, errors, budgets (values.c) */

typedef struct ablock { struct ablock *next; size_t used, cap; _Alignas(16) unsigned char data[]; } ablock;
typedef struct arena { ablock *head; } arena;

typedef struct jctx {
    arena *ar;
    zt_status *st;
    jmp_buf jb;
    int line;             /* of the construct being evaluated */
    size_t mem;           /* bytes taken from the system */
    long long steps;      /* evaluation steps (rendering) */
} jctx;

void zj_jfail(jctx *c, int code, const char *fmt, ...) __attribute__((noreturn, format(printf, 3, 4)));

#define BUDGET "(ztrain's template budget)"
#define INT64_NOTE "(the template engine's integers are 64-bit)"

void *zj_aalloc(jctx *c, size_t n);
void zj_arena_free(arena *a);
char *zj_adup(jctx *c, const char *s, size_t n);
const char *zj_afmt(jctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void zj_tick(jctx *c, long long n);      /* n evaluation steps */
void zj_scan(jctx *c, size_t bytes);    /* the steps of walking so many bytes */

/* ---------------------------------------------------------------- values (values.c) */

enum { V_UNSET = -1, V_UNDEF, V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_LIST, V_DICT, V_NS, V_FUNC, V_RANGE, V_LOOP, V_METHOD,
       V_MACRO };
enum { F_RAISE, F_STRFTIME, F_NAMESPACE, F_DICT, F_RANGE };
/* kinds of V_LIST: list, tuple, a one-shot iterator (generator, reversed...), dict views */
enum { K_LIST, K_TUPLE, K_GEN, K_KEYS, K_VALUES, K_ITEMS };

/* mark of a byte: low 16 bits the assistant message (index + 1) it came
 * from, high 16 bits a message whose (empty) text sat right before it.
 * markup: a |safe string (jinja2's Markup). ncp1: code points + 1 (0: not
 * counted yet). */
typedef struct jstr { const char *p; size_t n; uint32_t *mk; uint32_t tail; int markup; size_t ncp1; } jstr;
struct jlist;
struct jdict;
struct jrange;
struct jloop;
struct jmeth;
struct jmacro;
typedef struct jv {
    int t;
    union {
        int b;
        long long i;
        double f;
        jstr *s;
        struct jlist *l;
        struct jdict *d;
        int fn;
        struct jrange *rg;
        struct jloop *lp;
        struct jmeth *m;
        struct jmacro *mc;
        const char *hint;      /* V_UNDEF: why (NULL: a plain undefined value) */
    };
} jv;
/* what: a K_GEN's Python type (for messages); used: consumed (a second use is refused) */
typedef struct jlist { int n, cap; jv *v; int kind, used; const char *what; } jlist;
typedef struct jdict { int n, cap; jstr **k; jv *v; int *hx; int hcap; } jdict;
typedef struct jrange { long long start, stop, step, n; } jrange;
typedef struct jmeth { jv self; const char *name; } jmeth;

const char *zj_tname(int t);
const char *zj_pyname(jv v);

static inline jv vundef(void) { jv v = {.t = V_UNDEF}; return v; }
static inline jv vundefh(const char *hint) { jv v = {.t = V_UNDEF}; v.hint = hint; return v; }
static inline jv vnone(void) { jv v = {.t = V_NONE}; return v; }
static inline jv vbool(int b) { jv v = {.t = V_BOOL}; v.b = !!b; return v; }
static inline jv vint(long long i) { jv v = {.t = V_INT}; v.i = i; return v; }
static inline jv vfloat(double f) { jv v = {.t = V_FLOAT}; v.f = f; return v; }

jstr *zj_mkstr(jctx *c, const char *p, size_t n);
static inline jv vstr(jstr *s) { jv v = {.t = V_STR}; v.s = s; return v; }

jlist *zj_mklist(jctx *c, int cap);
void zj_lpush(jctx *c, jlist *l, jv v);
static inline jv vlist(jlist *l) { jv v = {.t = V_LIST}; v.l = l; return v; }
static inline jv vlistk(jlist *l, int kind) { l->kind = kind; return vlist(l); }
static inline jv vgen(jlist *l, const char *what) { l->kind = K_GEN; l->what = what; return vlist(l); }
jv zj_pair(jctx *c, jv a, jv b);

/* dicts (insertion order) */
jdict *zj_mkdict(jctx *c);
int zj_dfind(const jdict *d, const char *k, size_t n);
void zj_dset(jctx *c, jdict *d, jstr *k, jv v);

/* s is one of names (NULL-terminated) */
int zj_in_names(const char *const *names, const char *s);

/* ---------------------------------------------------------------- UTF-8, marked strings (values.c) */

int zj_py_space(uint32_t c);
uint32_t zj_u8at(const char *s, size_t n, size_t *len);
size_t zj_u8valid(const unsigned char *s, size_t n);
void zj_u8cache(jstr *s);
size_t zj_u8count(jctx *c, jstr *s);
size_t zj_u8off(jctx *c, jstr *s, size_t i);

jstr *zj_substr(jctx *c, const jstr *s, size_t b, size_t e);

/* a string being built; out: the rendering itself (its limit's message) */
typedef struct sbuf { char *p; uint32_t *mk; size_t n, cap; uint32_t tail; int marked, out; } sbuf;
void zj_sb_reserve(jctx *c, sbuf *b, size_t add);
void zj_sb_put(jctx *c, sbuf *b, const jstr *s);
void zj_sb_raw(jctx *c, sbuf *b, const char *p, size_t n);
void zj_sb_cstr(jctx *c, sbuf *b, const char *p);
jstr *zj_sb_str(jctx *c, sbuf *b);

/* ---------------------------------------------------------------- lexer (lex.c) */

enum { T_EOF, T_DATA, T_VBEGIN, T_VEND, T_BBEGIN, T_BEND, T_NAME, T_STR, T_INT, T_FLOAT, T_OP };

typedef struct tok { int k, line; const char *p; size_t n; long long i; double f; } tok;
/* lpos/lline: the line of a position already seen (line numbers in one pass) */
typedef struct lexer { jctx *c; tok *t; int n, cap; const char *src, *lpos; int lline; } lexer;

jstr *zj_unescape(jctx *c, const char *p, size_t n);
/* src[0, n) -> L->t[0, L->n), the last one T_EOF */
void zj_lex(lexer *L, const char *src, size_t n);

/* ---------------------------------------------------------------- AST (parse.c) */

enum {
    /* statements */
    S_DATA, S_OUT, S_IF, S_FOR, S_SET, S_SETATTR, S_BREAK, S_CONTINUE, S_GEN, S_MACRO, S_CALLBLK, S_SETBLK,
    /* expressions */
    E_CONST, E_NAME, E_ATTR, E_ITEM, E_SLICE, E_CALL, E_FILTER, E_TEST, E_BIN, E_NOT, E_NEG, E_POS, E_AND, E_OR,
    E_COND, E_LIST, E_TUPLE, E_DICT, E_CMP, E_CAT
};

typedef struct node {
    int k, line;
    int h;                         /* height of an expression tree */
    struct node *a, *b, *c, *d;    /* children (meaning per kind) */
    struct node **v;               /* args / elements / operands */
    const char **kw;               /* keyword of each arg (NULL positional) */
    int nv, capv;
    int *ops;                      /* E_CMP: the operator before each of v */
    const char *name, *name2;      /* names (NUL-terminated) */
    int op;                        /* E_BIN operator; E_TEST negated; E_FILTER/E_TEST 1: a name jinja2 lacks */
    jv cst;                        /* E_CONST, S_DATA */
    struct node *next;             /* statement lists; S_IF: elif (the next test of the same if) */
} node;

enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FDIV, OP_MOD, OP_POW, OP_CAT, OP_EQ, OP_NE, OP_LT, OP_GT, OP_LE, OP_GE,
       OP_IN, OP_NOTIN };

/* jinja2's filters and tests (NULL-terminated) */
extern const char *const zj_jinja_filters[];
extern const char *const zj_jinja_tests[];

struct zt_jinja {
    arena ar;
    node *root;
};

/* ---------------------------------------------------------------- evaluation */

typedef struct scope { struct scope *up; jdict *vars; } scope;
/* a macro (S_MACRO: kw[i] its parameters, v[i] their defaults or NULL, b the body, op the names its body
 * uses: MF_*) with the scope it was defined in; caller: the macro of a call block */
enum { MF_VARARGS = 1, MF_KWARGS = 2, MF_CALLER = 4 };
typedef struct jmacro { node *def; scope *sc; } jmacro;
/* a for loop's `loop` (one object per loop, as jinja2's LoopContext) */
typedef struct jloop { jlist *items; const jrange *rg; int i, n; jlist *chg; int has_chg; } jloop;

typedef struct rctx {
    jctx c;
    sbuf out;
    int brk, cont;        /* loop control pending */
    int calls;            /* macro calls in progress (ZT_JINJA_MAX_CALLS) */
} rctx;

/* ---- Python's semantics of the values (ops.c) */

void zj_undef_fail(rctx *r, jv v, const char *what) __attribute__((noreturn));
int zj_truthy(jv v);

/* numbers */
static inline int isnum(jv v) { return v.t == V_INT || v.t == V_BOOL || v.t == V_FLOAT; }
static inline long long ival(jv v) { return v.t == V_INT ? v.i : v.b; }
static inline double fval(jv v) { return v.t == V_FLOAT ? v.f : (double)ival(v); }
long long zj_ineg(rctx *r, long long a);

jstr *zj_to_str(rctx *r, jv v);
/* json.dumps(v, ensure_ascii, indent, separators, sort_keys) */
typedef struct jsonopt { int indent; const jstr *ind, *isep, *ksep; int sort, ascii; } jsonopt;
void zj_json_into(rctx *r, sbuf *b, jv v, const jsonopt *o, int depth);

/* comparisons: ==; three-way <, > (-1, 0, 1, 2 unordered: NaN); in */
int zj_veq(rctx *r, jv a, jv b, int depth);
int zj_veq_item(rctx *r, jv a, jv b, int depth);
int zj_vcmp(rctx *r, jv a, jv b, const char *op, int depth);
int zj_cmp_holds(int op, int k);
int zj_contains(rctx *r, jv hay, jv x);

/* sequences: an iterator used once; the items of an iterable; x[b:e:s] */
jlist *zj_consume(rctx *r, jv v, const char *what);
jlist *zj_items_of(rctx *r, jv v, const char *what);
jlist *zj_newlist(jctx *c, const jlist *l, int kind);
jv zj_do_slice(rctx *r, jv x, jv vs, jv ve, jv vt, int folded);

/* attributes and items (jinja2's sandboxed getattr / getitem); item i of a loop */
jv zj_getitem(rctx *r, jv x, jv k);
jv zj_getattr_(rctx *r, jv x, const char *name);
jv zj_loop_item(const jloop *lp, int i);

/* the operators: arithmetic, comparison (OP_*) */
jv zj_arith(rctx *r, int op, jv a, jv b);
int zj_compare(rctx *r, int op, jv a, jv b);

/* ---- methods, functions, tests, filters (filters.c) */

typedef struct args { int n; jv v[8]; const char *kw[8]; } args;

jv zj_call_value(rctx *r, jv f, args *a);
int zj_apply_test(rctx *r, const char *t, int unknown, jv x, args *a);
jv zj_apply_filter(rctx *r, const char *f, int unknown, jv x, args *a);

#endif
