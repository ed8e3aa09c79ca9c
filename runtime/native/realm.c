/* The native worker's realms (INTERFACE.md): one QuickJS runtime per sandbox realm, with the
 * functions bound into it, its module loader, and the drive loop that runs a script to its end
 * the way jsbox's `_eval_async` did (runtime/sandbox/engine.py). What the bindings mean is the
 * supervisor's business (runtime/js/supervisor.js): each one forwards to a supervisor callback,
 * copying strings and numbers between the two runtimes (no JS object is shared). */
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker.h"

/* Native stack a realm's JS may use: bounds guest recursion (a catchable RangeError "Maximum
 * call stack size exceeded"); engine.py STACK_BYTES. */
#define REALM_STACK_BYTES (1024 * 1024)
/* Smallest heap probe allocation (engine.py heap_exhausted): a tiny heap still gets a real one. */
#define HEAP_PROBE_MIN_BYTES 1024
/* Deadline of the heap probe: it allocates one string, so hitting this means the engine hangs. */
#define HEAP_PROBE_TIMEOUT_MS 1000.0
/* Shortest run timeout (engine.py `run` clamps to 1 ms): a zero budget still gets a deadline. */
#define MIN_RUN_TIMEOUT_MS 1.0
/* Longest `globalThis.__codemode_load__(N)` script text. */
#define LOAD_SCRIPT_CHARS 64

typedef struct Waiter { /* a promise from __codemode_next__ / __codemode_tick__, not settled yet */
    uint32_t id;
    JSValue resolve;
} Waiter;

typedef struct Settlement {
    uint32_t id;
    double value;
    bool tick; /* settles with undefined */
} Settlement;

typedef struct Text { /* a module's UTF-8 source (NUL-terminated), shared by the realms using it */
    size_t refs, len;
    char data[];
} Text;

typedef struct Module {
    char *name;
    Text *text;
} Module;

typedef struct Block { /* the header of each block a realm's runtime holds (realm memory) */
    struct Block *prev, *next;
} Block;

typedef struct Locked { /* the objects lockGraph locked (__codemode_walk__, below) */
    void **slots; /* open addressing on the object's address; NULL: free */
    size_t mask;
    JSValue *list; /* the same objects, referenced, in the order they joined */
    size_t n, cap;
    JSValue *found; /* the last walk's objects, in the JS walk's order, until frozen (borrowed) */
    size_t nfound;
} Locked;

typedef struct Realm {
    struct Realm *next;
    int id;
    JSRuntime *rt;
    JSContext *ctx;
    size_t memory_limit;
    double deadline; /* monotonic ms; INFINITY when nothing of this realm is timed */
    int entered;     /* C frames running this realm's JS */
    bool doomed;     /* freed while entered: destroyed when the last frame leaves */
    Block blocks; /* every block of the realm's runtime (realm memory, below) */
    bool in_arena; /* its runtime's blocks are the arena's instead (realm images, below) */
    Module *modules;
    size_t nmodules;
    Waiter *waiters;
    size_t nwaiters, capwaiters;
    Settlement *queue;
    size_t nqueue, capqueue;
    uint32_t last_promise;
    /* the run (realmRun): the script until the first drive evaluates it, then its value */
    char *script;
    size_t script_len;
    bool started;
    JSValue top;
    int in_a_row; /* settlement rounds applied since the loop last had a turn */
    Locked locked;
} Realm;

static Realm *realms, *running;
static void destroy(Realm *r);
static int last_id;

double realm_running_deadline(void) {
    return running ? running->deadline : INFINITY;
}

static Realm *find_realm(JSValueConst id) {
    int32_t n;
    if (JS_ToInt32(sctx, &n, id)) {
        JS_FreeValue(sctx, JS_GetException(sctx));
        return NULL;
    }
    for (Realm *r = realms; r; r = r->next)
        if (r->id == n) return r;
    return NULL;
}

/* ---- realm memory ---------------------------------------------------------------------------
 * A realm that does not hold the worker's arena (realm images, below: the arena is taken, or
 * could not be reserved) has blocks of its own. Every block its runtime allocates (QuickJS's
 * arenas, its large blocks, the JSRuntime itself) is linked into the realm's list, so that a
 * realm ends by giving all of them back at once: no GC, no JS_FreeRuntime walk over every
 * object, no finalizer; a realm in the arena ends by leaving it. Nothing of a realm lives
 * outside its heap (quickjs.c forbids plain malloc; libregexp, the text codec and
 * SharedArrayBuffer allocate through the runtime; no supervisor value is shared), so this frees
 * what JS_FreeRuntime would, in a few microseconds instead of a third of a millisecond. It also
 * never runs the teardown of QuickJS-ng 0.17 that writes into freed memory: a module whose
 * top-level await or import() never finished (a run that timed out, or was freed, inside one)
 * is freed before the callbacks that point at it, whose finalizer then decrements its reference
 * count (bellard/quickjs#280). */
static void link_block(Realm *r, Block *b) {
    b->prev = &r->blocks;
    b->next = r->blocks.next;
    b->next->prev = b;
    r->blocks.next = b;
}

static void unlink_block(Block *b) {
    b->prev->next = b->next;
    b->next->prev = b->prev;
}

static void *mem_malloc(void *opaque, size_t size) {
    Block *b = size <= SIZE_MAX - sizeof *b ? malloc(sizeof *b + size) : NULL;
    if (!b) return NULL;
    link_block(opaque, b);
    return b + 1;
}

static void *mem_calloc(void *opaque, size_t count, size_t size) {
    if (size && count > (SIZE_MAX - sizeof(Block)) / size) return NULL;
    Block *b = calloc(1, sizeof *b + count * size);
    if (!b) return NULL;
    link_block(opaque, b);
    return b + 1;
}

static void *mem_realloc(void *opaque, void *ptr, size_t size) {
    if (!ptr) return mem_malloc(opaque, size);
    if (size > SIZE_MAX - sizeof(Block)) return NULL;
    Block *b = (Block *)ptr - 1;
    unlink_block(b);
    Block *nb = realloc(b, sizeof *b + size);
    link_block(opaque, nb ? nb : b); /* on failure the old block stays the realm's */
    return nb ? nb + 1 : NULL;
}

static size_t mem_usable_size(const void *ptr) {
    return ptr ? malloc_usable_size((Block *)ptr - 1) - sizeof(Block) : 0;
}

static void mem_free(void *opaque, void *ptr) {
    if (!ptr) return;
    Block *b = (Block *)ptr - 1;
    unlink_block(b);
    free(b);
}

/* ---- module texts ---------------------------------------------------------------------------
 * Every run's realm gets the modules of its table (realmAddModule), whose sources the supervisor
 * holds from run to run as the same strings (supervisor.js `held`). Their UTF-8 is made once and
 * kept while the supervisor's string is the same one: the cache holds a reference to each string
 * it knows (so its address cannot be reused), and keeps only what the last run added (realmRun),
 * as the supervisor keeps only the last run's table. */
typedef struct CachedText {
    JSValue source; /* a supervisor string, referenced */
    Text *text;     /* one reference of the text */
    bool used;      /* added since the last realmRun */
} CachedText;

static CachedText *texts;
static size_t ntexts, captexts;

static void text_release(Text *t) {
    if (t && --t->refs == 0) free(t);
}

/* The UTF-8 of a supervisor string (lone surrogates → U+FFFD), with one reference for the
 * caller; NULL with an exception in the supervisor. */
static Text *text_of(JSValueConst v) {
    bool cacheable = JS_VALUE_GET_TAG(v) == JS_TAG_STRING;
    for (size_t i = 0; cacheable && i < ntexts; i++) {
        if (JS_VALUE_GET_PTR(texts[i].source) == JS_VALUE_GET_PTR(v)) {
            texts[i].used = true;
            texts[i].text->refs++;
            return texts[i].text;
        }
    }
    size_t len;
    const char *s = JS_ToCStringLen(sctx, &len, v);
    if (!s) return NULL;
    Text *t = malloc(sizeof *t + len + 1);
    if (t) {
        t->refs = 1;
        t->len = len;
        memcpy(t->data, s, len + 1);
        wtf8_fix(t->data, len);
    }
    JS_FreeCString(sctx, s);
    if (!t) {
        JS_ThrowOutOfMemory(sctx);
        return NULL;
    }
    if (cacheable && ntexts == captexts) {
        size_t cap = captexts ? 2 * captexts : 16;
        CachedText *grown = realloc(texts, cap * sizeof *grown);
        if (!grown) return t; /* not cached: made again next time */
        texts = grown;
        captexts = cap;
    }
    if (cacheable) {
        t->refs++;
        texts[ntexts++] = (CachedText){JS_DupValue(sctx, v), t, true};
    }
    return t;
}

/* A run starts: the texts no realm added since the last run go (the supervisor let them go). */
static void texts_keep_used(void) {
    size_t kept = 0;
    for (size_t i = 0; i < ntexts; i++) {
        if (texts[i].used) {
            texts[i].used = false;
            texts[kept++] = texts[i];
        } else {
            JS_FreeValue(sctx, texts[i].source);
            text_release(texts[i].text);
        }
    }
    ntexts = kept;
}

/* What the realm's blocks hold now (headers included). */
static size_t realm_bytes(Realm *r) {
    if (r->in_arena) return arena_live();
    size_t bytes = 0;
    for (Block *b = r->blocks.next; b != &r->blocks; b = b->next) bytes += malloc_usable_size(b);
    return bytes;
}

static const JSMallocFunctions realm_memory = {mem_calloc, mem_malloc, mem_free, mem_realloc, mem_usable_size};

/* Entering from outside this realm's JS: its stack budget counts from here. */
static void enter(Realm *r) {
    if (r->entered++ == 0) JS_UpdateStackTop(r->rt);
}

/* false: the realm was freed meanwhile (realmFree from a binding) and is gone now. */
static bool leave(Realm *r) {
    if (--r->entered > 0 || !r->doomed) return true;
    destroy(r);
    return false;
}

static int interrupt(JSRuntime *rt, void *opaque) {
    return monotonic_ms() >= ((Realm *)opaque)->deadline;
}

static void run_jobs(Realm *r) {
    JSContext *c;
    int ret;
    while (!r->doomed && (ret = JS_ExecutePendingJob(r->rt, &c)) != 0) {
        if (ret < 0) { /* nobody handles it (jsbox drops it too) */
            JS_FreeValue(c, JS_GetException(c));
            if (monotonic_ms() >= r->deadline) break;
        }
    }
}

/* ---- values crossing to and from the supervisor ------------------------------------------ */
/* String(v) as a supervisor string; JS_EXCEPTION pending in the realm's ctx. The UTF-8 copy of
 * a string can be three times its size: made with the heap limit lifted, so a result as big as
 * the heap still crosses (jsbox: max_value_bytes = memory_limit); String() runs under it. */
static JSValue str_to_sup(JSContext *ctx, JSValueConst v) {
    JSValue s = JS_ToString(ctx, v);
    if (JS_IsException(s)) return s;
    Realm *r = JS_GetRuntimeOpaque(JS_GetRuntime(ctx));
    if (r) JS_SetMemoryLimit(r->rt, 0);
    JSValue out = copy_string(ctx, s, sctx);
    if (r) JS_SetMemoryLimit(r->rt, r->memory_limit);
    JS_FreeValue(ctx, s);
    if (JS_IsException(out) && JS_HasException(sctx)) {
        JS_FreeValue(sctx, JS_GetException(sctx));
        return JS_ThrowOutOfMemory(ctx);
    }
    return out;
}

/* A supervisor primitive as a realm value (objects: undefined); JS_EXCEPTION pending in ctx. */
static JSValue from_sup(JSContext *ctx, JSValueConst v) {
    double d;
    if (JS_IsString(v)) {
        JSValue s = copy_string(sctx, v, ctx);
        if (JS_IsException(s) && JS_HasException(sctx)) {
            JS_FreeValue(sctx, JS_GetException(sctx));
            return JS_ThrowOutOfMemory(ctx);
        }
        return s;
    }
    if (JS_IsNumber(v) && !JS_ToFloat64(sctx, &d, v)) return JS_NewNumber(ctx, d);
    if (JS_IsBool(v)) return JS_NewBool(ctx, JS_ToBool(sctx, v));
    if (JS_IsNull(v)) return JS_NULL;
    return JS_UNDEFINED;
}

/* A realm number as a supervisor number, anything else null. */
static JSValue num_to_sup(JSContext *ctx, JSValueConst v) {
    double d;
    if (JS_IsNumber(v) && !JS_ToFloat64(ctx, &d, v)) return JS_NewNumber(sctx, d);
    return JS_NULL;
}

/* supervisor.<name>(rid, a, b) with a and b owned; its result as a realm value. */
static JSValue forward(Realm *r, const char *name, int argc, JSValue a, JSValue b) {
    JSValue args[3] = {JS_NewInt32(sctx, r->id), a, b};
    JSValue res = sup_call(name, argc + 1, args);
    JS_FreeValue(sctx, a);
    JS_FreeValue(sctx, b);
    if (JS_IsException(res)) /* jsbox's text for a host function that raised */
        return throw_error(r->ctx, "host function failed: ", sup_error_name, strlen(sup_error_name), false);
    JSValue out = from_sup(r->ctx, res);
    JS_FreeValue(sctx, res);
    return out;
}

/* ---- outcomes (supervisor objects) -------------------------------------------------------- */
static JSValue outcome(const char *kind) {
    JSValue o = JS_NewObject(sctx);
    JS_SetPropertyStr(sctx, o, "kind", JS_NewString(sctx, kind));
    return o;
}

/* exc.<name> as a string if it is one (or, `coerce`, if it is not undefined), else `dflt`. */
static JSValue field(JSContext *ctx, JSValueConst exc, const char *name, bool coerce, const char *dflt) {
    JSValue v = JS_GetPropertyStr(ctx, exc, name), s = JS_EXCEPTION;
    if (JS_IsString(v) || (coerce && !JS_IsException(v) && !JS_IsUndefined(v))) s = str_to_sup(ctx, v);
    JS_FreeValue(ctx, v);
    if (!JS_IsException(s)) return s;
    if (JS_HasException(ctx)) JS_FreeValue(ctx, JS_GetException(ctx));
    return JS_NewString(sctx, dflt);
}

/* name, message and stack of a thrown value, into `o` (engine.py _engine_error): an Error's
 * own fields, or for anything else name null and message String(value). */
static void describe(JSContext *ctx, JSValueConst exc, JSValue o) {
    JSValue name = JS_NULL, message, stack;
    if (JS_IsError(exc)) {
        name = field(ctx, exc, "name", true, "Error");
        message = field(ctx, exc, "message", true, "");
        stack = field(ctx, exc, "stack", false, "");
    } else {
        message = str_to_sup(ctx, exc);
        if (JS_IsException(message)) {
            JS_FreeValue(ctx, JS_GetException(ctx));
            message = JS_NewString(sctx, "[object]"); /* jsbox's text for what has no String() */
        }
        stack = JS_NewString(sctx, "");
    }
    JS_SetPropertyStr(sctx, o, "name", name);
    JS_SetPropertyStr(sctx, o, "message", message);
    JS_SetPropertyStr(sctx, o, "stack", stack);
}

/* The outcome of a run that failed with `exc` (owned). */
static JSValue failed(Realm *r, JSValue exc) {
    JSValue o;
    if (monotonic_ms() >= r->deadline) {
        o = outcome("timeout");
    } else {
        o = outcome("error");
        describe(r->ctx, exc, o);
    }
    JS_FreeValue(r->ctx, exc);
    return o;
}

static JSValue succeeded(Realm *r, JSValue value) {
    JSValue o = outcome("ok"), s = JS_NULL;
    if (JS_IsString(value)) {
        s = str_to_sup(r->ctx, value);
        if (JS_IsException(s)) {
            JS_FreeValue(r->ctx, value);
            return failed(r, JS_GetException(r->ctx));
        }
    }
    JS_FreeValue(r->ctx, value);
    JS_SetPropertyStr(sctx, o, "value", s);
    return o;
}

/* The run's outcome once its completion value is settled; JS_UNINITIALIZED until then. */
static JSValue settled(Realm *r) {
    switch (JS_PromiseState(r->ctx, r->top)) {
    case JS_PROMISE_PENDING:
        return JS_UNINITIALIZED;
    case JS_PROMISE_FULFILLED:
        return succeeded(r, JS_PromiseResult(r->ctx, r->top));
    case JS_PROMISE_REJECTED:
        return failed(r, JS_PromiseResult(r->ctx, r->top));
    default: /* not a promise: the value itself */
        return succeeded(r, JS_DupValue(r->ctx, r->top));
    }
}

static void finish(Realm *r, JSValue result) {
    running = NULL;
    JS_FreeValue(r->ctx, r->top);
    r->top = JS_UNDEFINED;
    r->deadline = INFINITY;
    r->in_a_row = 0;
    JSValue args[2] = {JS_NewInt32(sctx, r->id), result};
    JS_FreeValue(sctx, sup_call("onRealmDone", 2, args));
    JS_FreeValue(sctx, result);
}

/* ---- the bound functions ------------------------------------------------------------------ */
#define REALM(ctx) ((Realm *)JS_GetContextOpaque(ctx))
#define ARG(i) (argc > (i) ? argv[i] : JS_UNDEFINED)

static JSValue b_host(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    Realm *r = REALM(ctx);
    if (r->doomed) return JS_UNDEFINED;
    JSValue text = str_to_sup(ctx, ARG(0));
    if (JS_IsException(text)) return text;
    return forward(r, "realmHost", 1, text, JS_UNDEFINED);
}

static JSValue b_log(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    Realm *r = REALM(ctx);
    if (r->doomed) return JS_UNDEFINED;
    JSValue level = str_to_sup(ctx, ARG(0));
    if (JS_IsException(level)) return level;
    JSValue text = str_to_sup(ctx, ARG(1));
    if (JS_IsException(text)) {
        JS_FreeValue(sctx, level);
        return text;
    }
    return forward(r, "realmLog", 2, level, text);
}

static JSValue b_arm(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    Realm *r = REALM(ctx);
    if (r->doomed) return JS_UNDEFINED;
    JSValue out = forward(r, "realmArm", 1, num_to_sup(ctx, ARG(0)), JS_UNDEFINED);
    if (JS_IsException(out)) return out;
    JS_FreeValue(ctx, out);
    return JS_UNDEFINED;
}

static JSValue b_take(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    Realm *r = REALM(ctx);
    if (r->doomed) return JS_UNDEFINED;
    return forward(r, "realmTake", 1, num_to_sup(ctx, ARG(0)), JS_UNDEFINED);
}

static JSValue b_now(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    Realm *r = REALM(ctx);
    if (r->doomed) return JS_UNDEFINED;
    return forward(r, "realmNow", 0, JS_UNDEFINED, JS_UNDEFINED);
}

static JSValue b_url(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    return JS_NewStringLen(ctx, url_text, url_len);
}

/* ---- __codemode_walk__(roots, protos), __codemode_freeze__(), __codemode_locked__() ---------
 * prelude.js lockGraph's object walk and freeze, in C: the JS walk was half of a realm's
 * preparation (bench/speed-footprint.md). The walk follows lockGraph's rules and order exactly
 * (the comments there say why): the objects reachable from the array `roots` through own
 * properties (data values, accessors' get and set) and prototypes, except those locked already;
 * a function's own `length` and `name` are not read; a function's `prototype` holding an object
 * that is not a function is appended to the array `protos`; a leaf built-in function (own keys
 * exactly `length`, `name`; prototype Function.prototype) is found but not walked. The realm
 * keeps the locked set (the JS walk's `locked`: the global object, then every object a walk
 * found). The walk returns how many objects it found; `__codemode_freeze__()` freezes them, in
 * the order the JS walk finds them, once lockGraph has made the override accessors.
 * Nothing here runs JS: JS_GetOwnProperty reads a descriptor without calling its getter, and a
 * Proxy (whose prototype, keys and descriptors are traps) is never looked into. Instead the walk
 * returns undefined, having changed nothing, and lockGraph walks in JS as the Python worker does
 * (from `__codemode_locked__()`, the locked set as a new array), when it meets a Proxy, when the
 * engine fails on the way (that walk meets the failure again and throws what it throws), or when
 * the locked set would hold more than WALK_MAX_OBJECTS. */

/* Objects the locked set may hold (every object a walk stacks or finds is in it, so this bounds
 * a walk's stack and its result too): a fresh realm's intrinsics are ~630, and the URL classes'
 * walk adds a few dozen more. */
#define WALK_MAX_OBJECTS 32768
/* The locked set's first size (slots, a power of 2; doubled when half full). */
#define WALK_FIRST_SLOTS 4096

typedef struct Walk {
    JSContext *ctx;
    Locked *set;
    JSValue *stack, *found; /* borrowed: the locked set holds each one */
    size_t nstack, capstack, nfound, capfound;
} Walk;

static size_t walk_slot(void **slots, size_t mask, void *p) {
    size_t i = (((uintptr_t)p >> 4) * 2654435761u) & mask;
    while (slots[i] && slots[i] != p) i = (i + 1) & mask;
    return i;
}

/* 1: `v` (an object) is new to the locked set, and in it now (referenced); 0: in it already;
 * -1: give up. */
static int locked_add(JSContext *ctx, Locked *set, JSValueConst v) {
    void *p = JS_VALUE_GET_PTR(v);
    size_t i = walk_slot(set->slots, set->mask, p);
    if (set->slots[i]) return 0;
    if (set->n >= WALK_MAX_OBJECTS) return -1;
    if (set->n == set->cap) {
        size_t cap = set->cap ? 2 * set->cap : 1024;
        JSValue *list = js_realloc(ctx, set->list, cap * sizeof *list);
        if (!list) return -1;
        set->list = list;
        set->cap = cap;
    }
    if (2 * (set->n + 1) > set->mask + 1) {
        size_t mask = 2 * set->mask + 1;
        void **slots = js_mallocz(ctx, (mask + 1) * sizeof *slots);
        if (!slots) return -1;
        for (size_t k = 0; k < set->n; k++) {
            void *q = JS_VALUE_GET_PTR(set->list[k]);
            slots[walk_slot(slots, mask, q)] = q;
        }
        js_free(ctx, set->slots);
        set->slots = slots;
        set->mask = mask;
        i = walk_slot(slots, mask, p);
    }
    set->slots[i] = p;
    set->list[set->n++] = JS_DupValue(ctx, v);
    return 1;
}

/* The locked set, made with the global object in it on first use. */
static bool locked_ready(JSContext *ctx, Locked *set) {
    if (set->slots) return true;
    set->slots = js_mallocz(ctx, WALK_FIRST_SLOTS * sizeof(void *));
    if (!set->slots) return false;
    set->mask = WALK_FIRST_SLOTS - 1;
    JSValue global = JS_GetGlobalObject(ctx);
    bool ok = locked_add(ctx, set, global) == 1;
    JS_FreeValue(ctx, global);
    return ok;
}

/* Back to the first `n` objects (a walk that gave up changes nothing). */
static void locked_truncate(JSContext *ctx, Locked *set, size_t n) {
    for (size_t k = n; k < set->n; k++) JS_FreeValue(ctx, set->list[k]);
    set->n = n;
    memset(set->slots, 0, (set->mask + 1) * sizeof *set->slots);
    for (size_t k = 0; k < n; k++) {
        void *q = JS_VALUE_GET_PTR(set->list[k]);
        set->slots[walk_slot(set->slots, set->mask, q)] = q;
    }
}

/* Appends `v` (borrowed) to a list of the walk. */
static bool walk_push(Walk *w, JSValue **list, size_t *n, size_t *cap, JSValueConst v) {
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 256;
        JSValue *grown = js_realloc(w->ctx, *list, c * sizeof *grown);
        if (!grown) return false;
        *list = grown;
        *cap = c;
    }
    (*list)[(*n)++] = v;
    return true;
}

/* `v` (an object) if it is new to the locked set: stacked (to be walked). false: give up. */
static bool walk_reach(Walk *w, JSValueConst v) {
    int fresh = locked_add(w->ctx, w->set, v);
    return fresh == 0 || (fresh == 1 && walk_push(w, &w->stack, &w->nstack, &w->capstack, v));
}

/* 1: `fn` (not a Proxy) has own keys exactly ["length", "name"] and the prototype `fproto`. */
static int walk_is_leaf(JSContext *ctx, JSValueConst fn, JSAtom a_length, JSAtom a_name, JSValueConst fproto) {
    JSPropertyEnum *tab;
    uint32_t len;
    if (JS_GetOwnPropertyNames(ctx, &tab, &len, fn, JS_GPN_STRING_MASK | JS_GPN_SYMBOL_MASK) < 0) return -1;
    bool leaf = len == 2 && tab[0].atom == a_length && tab[1].atom == a_name;
    JS_FreePropertyEnum(ctx, tab, len);
    if (!leaf) return 0;
    JSValue p = JS_GetPrototype(ctx, fn);
    if (JS_IsException(p)) return -1;
    leaf = JS_VALUE_GET_PTR(p) == JS_VALUE_GET_PTR(fproto) && JS_IsObject(p);
    JS_FreeValue(ctx, p);
    return leaf;
}

/* One own property `atom` of `v` (not a Proxy; `is_fn`: a function). false: give up. */
static bool walk_property(Walk *w, JSValueConst v, bool is_fn, JSAtom atom, JSAtom a_length, JSAtom a_name,
                          JSAtom a_prototype, JSValueConst fproto, JSValueConst protos, int64_t *nprotos) {
    JSContext *ctx = w->ctx;
    JSPropertyDescriptor d;
    if (JS_GetOwnProperty(ctx, &d, v, atom) != 1) return false; /* 0: an own key gone, as the JS walk would not expect */
    bool ok = true;
    if (d.flags & JS_PROP_GETSET) {
        if (JS_IsObject(d.getter)) ok = walk_reach(w, d.getter);
        if (ok && JS_IsObject(d.setter)) ok = walk_reach(w, d.setter);
    } else if (JS_IsFunction(ctx, d.value)) {
        int fresh = locked_add(ctx, w->set, d.value), leaf = 0;
        if (fresh == 1 && !JS_IsProxy(d.value)) leaf = walk_is_leaf(ctx, d.value, a_length, a_name, fproto);
        if (fresh < 0 || leaf < 0) ok = false;
        else if (fresh == 1 && leaf) ok = walk_push(w, &w->found, &w->nfound, &w->capfound, d.value);
        else if (fresh == 1) ok = walk_push(w, &w->stack, &w->nstack, &w->capstack, d.value);
    } else if (JS_IsObject(d.value)) {
        if (is_fn && atom == a_prototype)
            ok = JS_DefinePropertyValueUint32(ctx, protos, (uint32_t)(*nprotos)++, JS_DupValue(ctx, d.value), JS_PROP_C_W_E) >= 0;
        if (ok) ok = walk_reach(w, d.value);
    }
    JS_FreeValue(ctx, d.value);
    JS_FreeValue(ctx, d.getter);
    JS_FreeValue(ctx, d.setter);
    return ok;
}

static JSValue b_walk(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    JSValueConst roots = ARG(0), protos = ARG(1);
    Locked *set = &REALM(ctx)->locked;
    Walk w = {.ctx = ctx, .set = set};
    size_t n0 = set->n;
    JSAtom a_length = JS_NewAtom(ctx, "length"), a_name = JS_NewAtom(ctx, "name");
    JSAtom a_prototype = JS_NewAtom(ctx, "prototype");
    JSValue fproto = JS_GetFunctionProto(ctx), out = JS_UNDEFINED;
    int64_t nroots, nprotos0 = 0, nprotos;
    bool ok = a_length != JS_ATOM_NULL && a_name != JS_ATOM_NULL && a_prototype != JS_ATOM_NULL &&
              JS_IsArray(roots) && JS_IsArray(protos) && JS_GetLength(ctx, roots, &nroots) >= 0 &&
              JS_GetLength(ctx, protos, &nprotos0) >= 0 && locked_ready(ctx, set);
    if (ok) n0 = set->n;
    nprotos = nprotos0;
    for (int64_t i = 0; ok && i < nroots; i++) {
        JSValue x = JS_GetPropertyInt64(ctx, roots, i);
        ok = !JS_IsException(x) && (!JS_IsObject(x) || walk_reach(&w, x));
        JS_FreeValue(ctx, x);
    }
    while (ok && w.nstack > 0) {
        JSValueConst v = w.stack[--w.nstack];
        if (JS_IsProxy(v) || !walk_push(&w, &w.found, &w.nfound, &w.capfound, v)) {
            ok = false;
            break;
        }
        JSValue p = JS_GetPrototype(ctx, v);
        ok = !JS_IsException(p) && (!JS_IsObject(p) || walk_reach(&w, p));
        JS_FreeValue(ctx, p);
        bool is_fn = JS_IsFunction(ctx, v);
        JSPropertyEnum *tab;
        uint32_t len;
        if (!ok || JS_GetOwnPropertyNames(ctx, &tab, &len, v, JS_GPN_STRING_MASK | JS_GPN_SYMBOL_MASK) < 0) {
            ok = false;
            break;
        }
        for (uint32_t k = 0; ok && k < len; k++) {
            JSAtom atom = tab[k].atom;
            if (is_fn && (atom == a_length || atom == a_name)) continue;
            ok = walk_property(&w, v, is_fn, atom, a_length, a_name, a_prototype, fproto, protos, &nprotos);
        }
        JS_FreePropertyEnum(ctx, tab, len);
    }
    if (ok) { /* found: frozen by __codemode_freeze__ */
        js_free(ctx, set->found);
        set->found = w.found;
        set->nfound = w.nfound;
        out = JS_NewInt64(ctx, (int64_t)w.nfound);
        w.found = NULL;
    } else { /* nothing changed: the JS walk starts over */
        if (JS_HasException(ctx)) JS_FreeValue(ctx, JS_GetException(ctx));
        if (nprotos > nprotos0 && JS_SetLength(ctx, protos, nprotos0) < 0) JS_FreeValue(ctx, JS_GetException(ctx));
        if (set->slots) locked_truncate(ctx, set, n0);
    }
    js_free(ctx, w.stack);
    js_free(ctx, w.found);
    JS_FreeAtom(ctx, a_length);
    JS_FreeAtom(ctx, a_name);
    JS_FreeAtom(ctx, a_prototype);
    JS_FreeValue(ctx, fproto);
    return out;
}

/* Freezes what the last walk found (Object.freeze each, in order); throws what freeze throws. */
static JSValue b_freeze(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    Locked *set = &REALM(ctx)->locked;
    JSValue *found = set->found;
    size_t n = set->nfound;
    set->found = NULL;
    set->nfound = 0;
    int ret = 0;
    for (size_t i = 0; i < n && ret >= 0; i++) ret = JS_FreezeObject(ctx, found[i]);
    js_free(ctx, found);
    return ret < 0 ? JS_EXCEPTION : JS_UNDEFINED;
}

/* The locked set as a new array (for the JS walk, once the C walk gave up). */
static JSValue b_locked(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    Locked *set = &REALM(ctx)->locked;
    if (!locked_ready(ctx, set)) return JS_HasException(ctx) ? JS_EXCEPTION : JS_ThrowOutOfMemory(ctx);
    JSValue *copy = js_malloc(ctx, set->n * sizeof *copy);
    if (!copy) return JS_EXCEPTION;
    for (size_t k = 0; k < set->n; k++) copy[k] = JS_DupValue(ctx, set->list[k]);
    JSValue out = JS_NewArrayFrom(ctx, (int)set->n, copy); /* takes the values, even failing */
    js_free(ctx, copy);
    return out;
}

/* __codemode_deep_freeze__(values): host.js deepFreeze of each of the array `values`, whose
 * comments say why: every object reachable from them through own properties (data values,
 * accessors' get and set; not prototypes) frozen, in the order deepFreeze freezes them. It walks
 * first and freezes after, so that meeting a Proxy (whose keys and descriptors are traps), an
 * engine failure or WALK_MAX_OBJECTS returns undefined with nothing changed, and the caller
 * runs deepFreeze itself; else true, or what a freeze throws. */
static JSValue b_deep_freeze(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    JSValueConst values = ARG(0);
    Locked seen = {.mask = 1023}; /* in the order deepFreeze freezes them */
    size_t nstack = 0, capstack = 64;
    JSValue *stack = js_malloc(ctx, capstack * sizeof *stack); /* owned */
    int64_t n = 0;
    bool ok = stack && JS_IsArray(values) && JS_GetLength(ctx, values, &n) >= 0 &&
              (seen.slots = js_mallocz(ctx, (seen.mask + 1) * sizeof(void *))) != NULL;
    for (int64_t i = 0; ok && i < n; i++) {
        JSValue root = JS_GetPropertyInt64(ctx, values, i);
        ok = !JS_IsException(root);
        if (ok) stack[nstack++] = root; /* the stack is empty between roots */
        while (ok && nstack > 0) {
            JSValue v = stack[--nstack];
            int fresh = 0;
            if (JS_IsObject(v)) fresh = JS_IsProxy(v) ? -1 : locked_add(ctx, &seen, v);
            JS_FreeValue(ctx, v); /* the seen list holds it when fresh */
            if (fresh <= 0) {
                ok = fresh == 0;
                continue;
            }
            JSValueConst obj = seen.list[seen.n - 1];
            JSPropertyEnum *tab;
            uint32_t len;
            if (JS_GetOwnPropertyNames(ctx, &tab, &len, obj, JS_GPN_STRING_MASK | JS_GPN_SYMBOL_MASK) < 0) {
                ok = false;
                break;
            }
            for (uint32_t k = 0; ok && k < len; k++) {
                JSPropertyDescriptor d;
                int own = JS_GetOwnProperty(ctx, &d, obj, tab[k].atom);
                ok = own >= 0;
                if (own <= 0) continue;
                if (nstack + 2 > capstack) {
                    JSValue *grown = js_realloc(ctx, stack, (capstack *= 2) * sizeof *stack);
                    ok = grown != NULL;
                    if (ok) stack = grown;
                }
                if (ok && !(d.flags & JS_PROP_GETSET)) {
                    stack[nstack++] = d.value;
                    d.value = JS_UNDEFINED;
                } else if (ok) {
                    stack[nstack++] = d.getter;
                    stack[nstack++] = d.setter;
                    d.getter = d.setter = JS_UNDEFINED;
                }
                JS_FreeValue(ctx, d.value);
                JS_FreeValue(ctx, d.getter);
                JS_FreeValue(ctx, d.setter);
            }
            JS_FreePropertyEnum(ctx, tab, len);
        }
    }
    JSValue out = JS_UNDEFINED;
    if (ok) {
        int ret = 0;
        for (size_t k = 0; k < seen.n && ret >= 0; k++) ret = JS_FreezeObject(ctx, seen.list[k]);
        out = ret < 0 ? JS_EXCEPTION : JS_TRUE;
    } else if (JS_HasException(ctx)) { /* nothing changed: deepFreeze meets it again */
        JS_FreeValue(ctx, JS_GetException(ctx));
    }
    for (size_t k = 0; k < nstack; k++) JS_FreeValue(ctx, stack[k]);
    for (size_t k = 0; k < seen.n; k++) JS_FreeValue(ctx, seen.list[k]);
    js_free(ctx, stack);
    js_free(ctx, seen.list);
    js_free(ctx, seen.slots);
    return out;
}

/* The atoms of the array of strings `names` (*n of them, freed with atoms_free), or NULL with
 * an exception. */
static JSAtom *atoms_of(JSContext *ctx, JSValueConst names, int64_t *n) {
    if (JS_GetLength(ctx, names, n) < 0) return NULL;
    JSAtom *atoms = js_mallocz(ctx, (size_t)(*n ? *n : 1) * sizeof *atoms);
    for (int64_t i = 0; atoms && i < *n; i++) {
        JSValue name = JS_GetPropertyInt64(ctx, names, i);
        atoms[i] = JS_IsException(name) ? JS_ATOM_NULL : JS_ValueToAtom(ctx, name);
        JS_FreeValue(ctx, name);
        if (atoms[i] == JS_ATOM_NULL) {
            while (i-- > 0) JS_FreeAtom(ctx, atoms[i]);
            js_free(ctx, atoms);
            return NULL;
        }
    }
    return atoms;
}

static void atoms_free(JSContext *ctx, JSAtom *atoms, int64_t n) {
    for (int64_t i = 0; i < n; i++) JS_FreeAtom(ctx, atoms[i]);
    js_free(ctx, atoms);
}

/* __codemode_overridable__(protos, names, objectProto): the [proto, key, ...] pairs lockGraph
 * turns into override accessors (prelude.js enableOverride), found without making a descriptor
 * per name: for each of `protos` in order, its own configurable data properties among `names`
 * (in that order), or, for `objectProto`, among all its own string keys (getOwnPropertyNames's
 * order). enableOverride reads each again, so a pair it no longer needs is skipped there. */
static bool overridable_push(JSContext *ctx, JSValueConst out, uint32_t *n, JSValueConst proto, JSAtom key) {
    JSPropertyDescriptor d;
    int own = JS_GetOwnProperty(ctx, &d, proto, key);
    if (own <= 0) return own == 0;
    bool wanted = !(d.flags & JS_PROP_GETSET) && (d.flags & JS_PROP_CONFIGURABLE);
    JS_FreeValue(ctx, d.value);
    JS_FreeValue(ctx, d.getter);
    JS_FreeValue(ctx, d.setter);
    if (!wanted) return true;
    return JS_DefinePropertyValueUint32(ctx, out, (*n)++, JS_DupValue(ctx, proto), JS_PROP_C_W_E) >= 0 &&
           JS_DefinePropertyValueUint32(ctx, out, (*n)++, JS_AtomToValue(ctx, key), JS_PROP_C_W_E) >= 0;
}

static JSValue b_overridable(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    JSValueConst protos = ARG(0), names = ARG(1), object_proto = ARG(2);
    int64_t nprotos, nnames = 0;
    JSAtom *atoms = JS_GetLength(ctx, protos, &nprotos) < 0 ? NULL : atoms_of(ctx, names, &nnames);
    if (!atoms) return JS_EXCEPTION;
    JSValue out = JS_NewArray(ctx);
    bool ok = !JS_IsException(out);
    uint32_t n = 0;
    for (int64_t i = 0; ok && i < nprotos; i++) {
        JSValue proto = JS_GetPropertyInt64(ctx, protos, i);
        ok = !JS_IsException(proto);
        if (ok && JS_IsObject(proto) && JS_IsObject(object_proto) && JS_VALUE_GET_PTR(proto) == JS_VALUE_GET_PTR(object_proto)) {
            JSPropertyEnum *tab;
            uint32_t len;
            if (JS_GetOwnPropertyNames(ctx, &tab, &len, proto, JS_GPN_STRING_MASK) < 0) {
                ok = false;
            } else {
                for (uint32_t k = 0; ok && k < len; k++) ok = overridable_push(ctx, out, &n, proto, tab[k].atom);
                JS_FreePropertyEnum(ctx, tab, len);
            }
        } else if (ok && JS_IsObject(proto)) {
            for (int64_t k = 0; ok && k < nnames; k++) ok = overridable_push(ctx, out, &n, proto, atoms[k]);
        }
        JS_FreeValue(ctx, proto);
    }
    atoms_free(ctx, atoms, nnames);
    if (!ok) {
        JS_FreeValue(ctx, out);
        return JS_EXCEPTION;
    }
    return out;
}

/* __codemode_seal_globals__(skip): prelude.js sealGlobals, whose comments say why: every own
 * property of the global object but those named in the array `skip` made non-configurable, and
 * a data property read-only, unless it is so already; as defineProperty does, throwing what it
 * throws. */
static JSValue b_seal_globals(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    int64_t nskip = 0;
    JSAtom *skip = atoms_of(ctx, ARG(0), &nskip);
    if (!skip) return JS_EXCEPTION;
    JSValue global = JS_GetGlobalObject(ctx);
    JSPropertyEnum *tab = NULL;
    uint32_t len = 0;
    bool ok = JS_GetOwnPropertyNames(ctx, &tab, &len, global, JS_GPN_STRING_MASK | JS_GPN_SYMBOL_MASK) >= 0;
    for (uint32_t k = 0; ok && k < len; k++) {
        JSAtom atom = tab[k].atom;
        bool skipped = false;
        for (int64_t i = 0; !skipped && i < nskip; i++) skipped = skip[i] == atom;
        if (skipped) continue;
        JSPropertyDescriptor d;
        int own = JS_GetOwnProperty(ctx, &d, global, atom);
        if (own < 0) ok = false;
        if (own <= 0) continue;
        bool accessor = d.flags & JS_PROP_GETSET;
        if ((d.flags & JS_PROP_CONFIGURABLE) || (!accessor && (d.flags & JS_PROP_WRITABLE))) {
            int flags = JS_PROP_THROW | JS_PROP_HAS_CONFIGURABLE | JS_PROP_HAS_ENUMERABLE | (d.flags & JS_PROP_ENUMERABLE);
            flags |= accessor ? JS_PROP_HAS_GET | JS_PROP_HAS_SET : JS_PROP_HAS_VALUE | JS_PROP_HAS_WRITABLE;
            ok = JS_DefineProperty(ctx, global, atom, d.value, d.getter, d.setter, flags) >= 0;
        }
        JS_FreeValue(ctx, d.value);
        JS_FreeValue(ctx, d.getter);
        JS_FreeValue(ctx, d.setter);
    }
    if (tab) JS_FreePropertyEnum(ctx, tab, len);
    JS_FreeValue(ctx, global);
    atoms_free(ctx, skip, nskip);
    return ok ? JS_UNDEFINED : JS_EXCEPTION;
}

/* A promise of this realm, remembered with its id until a settlement resolves it. */
static JSValue new_waiter(Realm *r, uint32_t *id) {
    JSValue fns[2], p = JS_NewPromiseCapability(r->ctx, fns);
    if (JS_IsException(p)) return p;
    JS_FreeValue(r->ctx, fns[1]);
    if (r->nwaiters == r->capwaiters) {
        size_t cap = r->capwaiters ? 2 * r->capwaiters : 4;
        Waiter *w = realloc(r->waiters, cap * sizeof *w);
        if (!w) {
            JS_FreeValue(r->ctx, fns[0]);
            JS_FreeValue(r->ctx, p);
            return JS_ThrowOutOfMemory(r->ctx);
        }
        r->waiters = w;
        r->capwaiters = cap;
    }
    *id = ++r->last_promise;
    r->waiters[r->nwaiters++] = (Waiter){*id, fns[0]};
    return p;
}

static bool queue_settlement(Realm *r, uint32_t id, double value, bool tick) {
    if (r->nqueue == r->capqueue) {
        size_t cap = r->capqueue ? 2 * r->capqueue : 4;
        Settlement *q = realloc(r->queue, cap * sizeof *q);
        if (!q) return false;
        r->queue = q;
        r->capqueue = cap;
    }
    r->queue[r->nqueue++] = (Settlement){id, value, tick};
    return true;
}

static JSValue b_next(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    Realm *r = REALM(ctx);
    uint32_t id;
    JSValue p = new_waiter(r, &id);
    if (JS_IsException(p) || r->doomed) return p;
    JSValue out = forward(r, "realmNext", 1, JS_NewInt64(sctx, id), JS_UNDEFINED);
    if (JS_IsException(out)) { /* nobody will settle it: not a wait that keeps the run going */
        if (!r->doomed && r->nwaiters > 0 && r->waiters[r->nwaiters - 1].id == id)
            JS_FreeValue(ctx, r->waiters[--r->nwaiters].resolve);
        JS_FreeValue(ctx, p);
        return out;
    }
    JS_FreeValue(ctx, out);
    return p;
}

/* One host turn (realm.py `tick`): settled once every job queued now has run. */
static JSValue b_tick(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    Realm *r = REALM(ctx);
    uint32_t id;
    JSValue p = new_waiter(r, &id);
    if (!JS_IsException(p) && !queue_settlement(r, id, 0, true)) {
        JS_FreeValue(ctx, p);
        return JS_ThrowOutOfMemory(ctx);
    }
    return p;
}

/* Every queued settlement, in order. false: the realm is gone. */
static bool apply_settlements(Realm *r) {
    Settlement *q = r->queue;
    size_t n = r->nqueue;
    r->queue = NULL;
    r->nqueue = r->capqueue = 0;
    enter(r);
    for (size_t i = 0; i < n && !r->doomed; i++) {
        for (size_t k = 0; k < r->nwaiters; k++) {
            if (r->waiters[k].id != q[i].id) continue;
            JSValue resolve = r->waiters[k].resolve;
            r->waiters[k] = r->waiters[--r->nwaiters];
            JSValue v = q[i].tick ? JS_UNDEFINED : JS_NewNumber(r->ctx, q[i].value);
            JSValue ret = JS_Call(r->ctx, resolve, JS_UNDEFINED, 1, &v);
            if (JS_IsException(ret)) JS_FreeValue(r->ctx, JS_GetException(r->ctx));
            JS_FreeValue(r->ctx, ret);
            JS_FreeValue(r->ctx, resolve);
            break;
        }
    }
    free(q);
    return leave(r);
}

/* ---- modules ------------------------------------------------------------------------------ */
/* Specifiers are the names the host gave (jsbox's static modules): "./x" stays "./x". */
static char *normalize(JSContext *ctx, const char *base, const char *name, void *opaque) {
    return js_strdup(ctx, name);
}

static JSModuleDef *load_module(JSContext *ctx, const char *name, void *opaque) {
    Realm *r = opaque;
    JSValue m = JS_UNDEFINED;
    if (!strcmp(name, "@codemode/errors")) {
        m = JS_ReadObject(ctx, bc_errors.buf, bc_errors.len, JS_READ_OBJ_BYTECODE);
    } else if (!strcmp(name, "@codemode/host")) {
        m = JS_ReadObject(ctx, bc_host.buf, bc_host.len, JS_READ_OBJ_BYTECODE);
    } else {
        for (size_t i = 0; i < r->nmodules && JS_IsUndefined(m); i++)
            if (!strcmp(r->modules[i].name, name))
                m = JS_Eval(ctx, r->modules[i].text->data, r->modules[i].text->len, name,
                            JS_EVAL_TYPE_MODULE | JS_EVAL_FLAG_COMPILE_ONLY);
        if (JS_IsUndefined(m)) {
            throw_error(ctx, "module not found: ", name, strlen(name), true);
            return NULL;
        }
    }
    if (JS_IsException(m)) return NULL;
    JSModuleDef *def = JS_VALUE_GET_PTR(m);
    JS_FreeValue(ctx, m);
    return def;
}

/* ---- native.* (the supervisor's side) ---------------------------------------------------- */
/* A supervisor string's UTF-8 (lone surrogates → U+FFFD), malloc'ed and NUL-terminated. */
static char *sup_utf8(JSValueConst v, size_t *len) {
    const char *s = JS_ToCStringLen(sctx, len, v);
    if (!s) return NULL;
    char *copy = malloc(*len + 1);
    if (copy) {
        memcpy(copy, s, *len + 1);
        wtf8_fix(copy, *len);
    } else {
        JS_ThrowOutOfMemory(sctx);
    }
    JS_FreeCString(sctx, s);
    return copy;
}

static JSValue no_realm(JSValueConst id) {
    char text[32];
    int32_t n = 0;
    JS_ToInt32(sctx, &n, id);
    snprintf(text, sizeof text, "%d", n);
    return throw_error(sctx, "no realm ", text, strlen(text), false);
}

/* prefix + Python's repr() of what a prelude phase returned (`v`, of ctx), as realm.py's
 * messages show it: 'text', None, True, 42. */
static JSValue returned(const char *prefix, JSContext *ctx, JSValueConst v) {
    const char *fixed = JS_IsUndefined(v) || JS_IsNull(v) ? "None" : !JS_IsBool(v) ? NULL : JS_ToBool(ctx, v) ? "True" : "False";
    JSValue s = fixed ? JS_NewString(sctx, fixed) : str_to_sup(ctx, v);
    if (JS_IsException(s)) {
        JS_FreeValue(ctx, JS_GetException(ctx));
        s = JS_NewString(sctx, "?");
    }
    size_t len, plen = strlen(prefix);
    const char *text = JS_ToCStringLen(sctx, &len, s);
    bool quote = JS_IsString(v);
    char *buf = text ? malloc(plen + len + 2) : NULL;
    JSValue out = JS_NewString(sctx, "?");
    if (buf) {
        memcpy(buf, prefix, plen);
        if (quote) buf[plen++] = '\'';
        memcpy(buf + plen, text, len);
        if (quote) buf[plen + len++] = '\'';
        JS_FreeValue(sctx, out);
        out = JS_NewStringLen(sctx, buf, plen + len);
        free(buf);
    }
    JS_FreeCString(sctx, text);
    JS_FreeValue(sctx, s);
    return out;
}

/* The message a failed prelude phase reports (realm.py `create`): the error's; a phase that
 * ran out of time says "EngineTimeout", as the Python worker did (the exception's type name). */
static JSValue phase_error(Realm *r, JSValue exc) {
    JSValue o = failed(r, exc), kind = JS_GetPropertyStr(sctx, o, "kind");
    const char *k = JS_ToCString(sctx, kind);
    JSValue msg = k && !strcmp(k, "timeout") ? JS_NewString(sctx, "EngineTimeout") : JS_GetPropertyStr(sctx, o, "message");
    JS_FreeCString(sctx, k);
    JS_FreeValue(sctx, kind);
    JS_FreeValue(sctx, o);
    return msg;
}

/* Phase A2's report (a JSON text) checked: JS_UNDEFINED when "loaded", else why not. */
static JSValue check_loaded(Realm *r, JSValueConst text) {
    size_t len;
    const char *s = JS_IsString(text) ? JS_ToCStringLen(r->ctx, &len, text) : NULL;
    JSValue report = s ? JS_ParseJSON(sctx, s, len, "<report>") : JS_UNDEFINED, why = JS_UNDEFINED;
    if (s) JS_FreeCString(r->ctx, s);
    if (JS_IsException(report)) JS_FreeValue(sctx, JS_GetException(sctx));
    JSValue status = JS_IsObject(report) ? JS_GetPropertyStr(sctx, report, "status") : JS_UNDEFINED;
    const char *st = JS_IsString(status) ? JS_ToCString(sctx, status) : NULL;
    if (!st || strcmp(st, "loaded")) {
        JSValue error = JS_IsObject(report) ? JS_GetPropertyStr(sctx, report, "error") : JS_UNDEFINED;
        const char *keys[] = {"text", "message"};
        for (int i = 0; i < 2 && JS_IsUndefined(why) && JS_IsObject(error); i++) {
            JSValue v = JS_GetPropertyStr(sctx, error, keys[i]);
            if (JS_ToBool(sctx, v) > 0) why = JS_ToString(sctx, v);
            JS_FreeValue(sctx, v);
        }
        JS_FreeValue(sctx, error);
        if (JS_IsUndefined(why) || JS_IsException(why)) why = returned("prelude phase A2 returned ", r->ctx, text);
    }
    JS_FreeCString(sctx, st);
    JS_FreeValue(sctx, status);
    JS_FreeValue(sctx, report);
    return why;
}

static int install_globals(Realm *r) {
    static const struct {
        const char *name;
        JSCFunction *fn;
        int length;
    } bindings[] = {
        {"__codemode_host__", b_host, 1}, {"__codemode_log__", b_log, 2},   {"__codemode_arm__", b_arm, 1},
        {"__codemode_next__", b_next, 0}, {"__codemode_take__", b_take, 1}, {"__codemode_tick__", b_tick, 0},
        {"__codemode_now__", b_now, 0},   {"__codemode_url__", b_url, 0},  {"__codemode_walk__", b_walk, 2},
        {"__codemode_freeze__", b_freeze, 0}, {"__codemode_locked__", b_locked, 0},
        {"__codemode_overridable__", b_overridable, 3}, {"__codemode_seal_globals__", b_seal_globals, 1},
        {"__codemode_deep_freeze__", b_deep_freeze, 1},
    };
    JSContext *ctx = r->ctx;
    JSValue global = JS_GetGlobalObject(ctx);
    int ret = 0;
    for (size_t i = 0; i < sizeof bindings / sizeof *bindings && ret >= 0; i++)
        ret = JS_SetPropertyStr(ctx, global, bindings[i].name, JS_NewCFunction(ctx, bindings[i].fn, bindings[i].name, bindings[i].length));
    if (ret >= 0) {
        JSValue config = JS_ParseJSON(ctx, cfg.realm_config_json, cfg.realm_config_len, "<config>");
        ret = JS_IsException(config) ? -1 : JS_SetPropertyStr(ctx, global, "__codemode_config__", config);
    }
    JS_FreeValue(ctx, global);
    return ret < 0 ? -1 : text_codec_install(ctx);
}

/* Prelude phases A and A2 in a fresh realm: JS_UNDEFINED, or why they failed (a supervisor
 * string). */
static JSValue prepare(Realm *r, int max_calls) {
    JSContext *ctx = r->ctx;
    if (install_globals(r) < 0) return phase_error(r, JS_GetException(ctx));
    r->deadline = monotonic_ms() + cfg.prelude_timeout_ms;
    JSValue fn = JS_ReadObject(ctx, bc_prelude.buf, bc_prelude.len, JS_READ_OBJ_BYTECODE);
    JSValue v = JS_IsException(fn) ? fn : JS_EvalFunction(ctx, fn);
    if (JS_IsException(v)) return phase_error(r, JS_GetException(ctx));
    const char *status = JS_IsString(v) ? JS_ToCString(ctx, v) : NULL;
    bool locked = status && !strcmp(status, "locked");
    JS_FreeCString(ctx, status);
    if (!locked) {
        JSValue why = returned("prelude phase A returned ", ctx, v);
        JS_FreeValue(ctx, v);
        return why;
    }
    JS_FreeValue(ctx, v);

    char code[LOAD_SCRIPT_CHARS];
    snprintf(code, sizeof code, "globalThis.__codemode_load__(%d)", max_calls);
    r->deadline = monotonic_ms() + cfg.prelude_timeout_ms;
    v = JS_Eval(ctx, code, strlen(code), "eval_script", JS_EVAL_TYPE_GLOBAL);
    if (JS_IsException(v)) return phase_error(r, JS_GetException(ctx));
    run_jobs(r);
    JSValue why = JS_UNDEFINED, result;
    switch (JS_PromiseState(ctx, v)) {
    case JS_PROMISE_PENDING:
        why = monotonic_ms() >= r->deadline ? JS_NewString(sctx, "EngineTimeout")
                                            : JS_NewString(sctx, "promise never settled (no pending jobs)");
        break;
    case JS_PROMISE_REJECTED:
        why = phase_error(r, JS_PromiseResult(ctx, v));
        break;
    default:
        result = JS_IsPromise(v) ? JS_PromiseResult(ctx, v) : JS_DupValue(ctx, v);
        why = check_loaded(r, result);
        JS_FreeValue(ctx, result);
    }
    JS_FreeValue(ctx, v);
    return why;
}

/* ---- realm images ----------------------------------------------------------------------------
 * A ready realm (prelude phases A and A2 done, @codemode/errors and @codemode/host loaded) costs
 * ~1 ms of CPU to build, and is the same realm every time for the same limits: nothing in it
 * depends on the run (Math.random's seed and Date's base arrive with the run, prelude phase B;
 * QuickJS's own random state is not used). So a realm is built in the worker's arena (arena.c),
 * whose bytes are the whole heap, and a copy of them kept: the next realm with the same limits is
 * that copy written back over the arena (a memcpy of ~0.6 MB), the same realm, every pointer valid
 * because the arena never moves. What lives outside the heap is set again (the Realm, which each
 * runtime and context point to) or copied (the runtime's and context's addresses, the locked
 * set). Only one realm holds the arena at a time: one made while it is taken, or on a machine
 * where it cannot be reserved, gets blocks of its own (realm memory, above) and is built. */
static struct {
    void *bytes; /* NULL: none yet */
    size_t len;
    size_t memory_limit; /* what it was built with */
    int max_calls;
    JSRuntime *rt;
    JSContext *ctx;
    Locked locked;
    uint32_t last_promise;
} image;
static bool arena_taken;

/* Points what the runtime and context hold of their Realm at `r`. */
static void attach(Realm *r) {
    JS_SetRuntimeOpaque(r->rt, r);
    JS_SetInterruptHandler(r->rt, interrupt, r);
    JS_SetModuleLoaderFunc(r->rt, normalize, load_module, r);
    JS_SetContextOpaque(r->ctx, r);
}

/* The copy of a realm just built in the arena, when nothing of the run is in it yet. */
static void keep_image(Realm *r, int max_calls) {
    if (!r->in_arena || r->nwaiters || r->nqueue || r->nmodules || r->script) return;
    arena_drop_image(image.bytes, image.len);
    image.bytes = arena_save(&image.len);
    image.memory_limit = r->memory_limit;
    image.max_calls = max_calls;
    image.rt = r->rt;
    image.ctx = r->ctx;
    image.locked = r->locked;
    image.last_promise = r->last_promise;
}

/* A ready realm from the image, when it was built with these limits and the arena is free. */
static bool from_image(Realm *r, int max_calls) {
    if (!image.bytes || arena_taken || image.memory_limit != r->memory_limit || image.max_calls != max_calls) return false;
    arena_restore(image.bytes, image.len);
    arena_taken = r->in_arena = true;
    r->rt = image.rt;
    r->ctx = image.ctx;
    r->locked = image.locked;
    r->last_promise = image.last_promise;
    attach(r);
    return true;
}

static void destroy(Realm *r) {
    if (r->in_arena) {
        arena_taken = false;
        arena_release_above(image.bytes ? image.len : 0);
    }
    for (Block *b = r->blocks.next, *next; b != &r->blocks; b = next) {
        next = b->next;
        free(b);
    }
    for (size_t i = 0; i < r->nmodules; i++) {
        free(r->modules[i].name);
        text_release(r->modules[i].text);
    }
    free(r->modules);
    free(r->waiters);
    free(r->queue);
    free(r->script);
    free(r);
}

static JSValue n_realm_new(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv) {
    double memory;
    int32_t max_calls;
    if (JS_ToFloat64(c, &memory, ARG(0)) || JS_ToInt32(c, &max_calls, ARG(1))) return JS_EXCEPTION;
    if (!(memory >= 1)) return throw_error(c, "bad memory limit", "", 0, false); /* 0 would be none */
    Realm *r = calloc(1, sizeof *r);
    if (!r) return JS_ThrowOutOfMemory(c);
    r->id = ++last_id;
    r->memory_limit = memory >= (double)SIZE_MAX ? SIZE_MAX : (size_t)memory;
    r->deadline = INFINITY;
    r->top = JS_UNDEFINED;
    r->blocks.prev = r->blocks.next = &r->blocks;
    JSValue why = JS_UNDEFINED;
    if (from_image(r, max_calls)) goto ready;
    if (!arena_taken && arena_fits(r->memory_limit)) {
        arena_reset();
        r->in_arena = arena_taken = true;
        r->rt = JS_NewRuntime2(&arena_memory, NULL);
    } else {
        r->rt = JS_NewRuntime2(&realm_memory, r);
    }
    if (r->rt) {
        JS_SetMemoryLimit(r->rt, r->memory_limit);
        JS_SetMaxStackSize(r->rt, REALM_STACK_BYTES);
        JS_SetCanBlock(r->rt, false);
        r->ctx = JS_NewContext(r->rt);
    }
    if (!r->ctx) {
        why = JS_NewString(sctx, "out of memory");
    } else {
        attach(r);
        enter(r);
        /* No GC while the realm is prepared: its preparation makes no cycles (a full GC right
         * after it frees nothing), so the two that the first threshold (256 KB) ran during it
         * only scanned every intrinsic, ~65 us. Then the threshold QuickJS sets after a GC
         * (js_trigger_gc): the heap and half again. */
        JS_SetGCThreshold(r->rt, SIZE_MAX);
        why = prepare(r, max_calls);
        size_t bytes = realm_bytes(r);
        JS_SetGCThreshold(r->rt, bytes + bytes / 2);
        r->deadline = INFINITY;
        r->entered--; /* not listed yet: nothing can have doomed it */
        if (JS_IsUndefined(why)) keep_image(r, max_calls);
    }
    if (!JS_IsUndefined(why)) {
        destroy(r);
        size_t len;
        const char *s = JS_ToCStringLen(sctx, &len, why);
        throw_error(c, "", s ? s : "?", s ? len : 1, false);
        JS_FreeCString(sctx, s);
        JS_FreeValue(sctx, why);
        return JS_EXCEPTION;
    }
ready:
    r->next = realms;
    realms = r;
    return JS_NewInt32(c, r->id);
}

static JSValue n_realm_add_module(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv) {
    Realm *r = find_realm(ARG(0));
    if (!r) return no_realm(ARG(0));
    size_t name_len;
    char *name = sup_utf8(ARG(1), &name_len);
    Text *text = name ? text_of(ARG(2)) : NULL;
    Module *m = text ? realloc(r->modules, (r->nmodules + 1) * sizeof *m) : NULL;
    if (!m) {
        free(name);
        text_release(text);
        return JS_HasException(c) ? JS_EXCEPTION : JS_ThrowOutOfMemory(c);
    }
    r->modules = m;
    m[r->nmodules++] = (Module){name, text};
    return JS_UNDEFINED;
}

static JSValue n_realm_run(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv) {
    Realm *r = find_realm(ARG(0));
    double timeout;
    if (!r) return no_realm(ARG(0));
    if (running) return throw_error(c, "a realm is already running", "", 0, false);
    if (r->started || r->script) return throw_error(c, "the realm has run already", "", 0, false);
    if (JS_ToFloat64(c, &timeout, ARG(2))) return JS_EXCEPTION;
    r->script = sup_utf8(ARG(1), &r->script_len);
    if (!r->script) return JS_EXCEPTION;
    texts_keep_used();
    r->deadline = monotonic_ms() + fmax(timeout, MIN_RUN_TIMEOUT_MS);
    r->in_a_row = 0;
    running = r; /* evaluated by the loop's next drive, never inside a supervisor callback */
    return JS_UNDEFINED;
}

static JSValue n_settle(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv) {
    Realm *r = find_realm(ARG(0));
    double id, value;
    if (!r || JS_ToFloat64(c, &id, ARG(1)) || JS_ToFloat64(c, &value, ARG(2))) return JS_UNDEFINED;
    if (!(id >= 1 && id <= UINT32_MAX)) return JS_UNDEFINED;
    if (!queue_settlement(r, (uint32_t)id, value, false)) return JS_ThrowOutOfMemory(c);
    return JS_UNDEFINED;
}

/* checkSyntax's loader: compiling a module resolves its imports (QuickJS-ng loads them even
 * when it only compiles), which a parse must not need; each is an empty module. */
static JSModuleDef *load_empty(JSContext *ctx, const char *name, void *opaque) {
    JSValue m = JS_Eval(ctx, "", 0, name, JS_EVAL_TYPE_MODULE | JS_EVAL_FLAG_COMPILE_ONLY);
    if (JS_IsException(m)) return NULL;
    JSModuleDef *def = JS_VALUE_GET_PTR(m);
    JS_FreeValue(ctx, m);
    return def;
}

static JSValue n_check_syntax(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv) {
    size_t len;
    char *code = sup_utf8(ARG(0), &len);
    if (!code) return JS_EXCEPTION;
    JSValue out = JS_NULL;
    JSRuntime *rt = JS_NewRuntime();
    JSContext *ctx = NULL;
    if (rt) {
        JS_SetMemoryLimit(rt, cfg.check_memory_bytes);
        JS_SetMaxStackSize(rt, REALM_STACK_BYTES);
        JS_SetModuleLoaderFunc(rt, normalize, load_empty, NULL);
        ctx = JS_NewContext(rt);
    }
    if (ctx) {
        /* Compile only: nothing runs, and the runtime (with the module it registered) goes. */
        JSValue m = JS_Eval(ctx, code, len, "check", JS_EVAL_TYPE_MODULE | JS_EVAL_FLAG_COMPILE_ONLY);
        if (JS_IsException(m)) {
            JSValue exc = JS_GetException(ctx), o = JS_NewObject(sctx);
            describe(ctx, exc, o);
            out = JS_NewObject(sctx);
            JS_SetPropertyStr(sctx, out, "message", JS_GetPropertyStr(sctx, o, "message"));
            JS_SetPropertyStr(sctx, out, "stack", JS_GetPropertyStr(sctx, o, "stack"));
            JS_FreeValue(sctx, o);
            JS_FreeValue(ctx, exc);
        } else {
            JS_FreeValue(ctx, m);
        }
        JS_FreeContext(ctx);
    }
    if (rt) JS_FreeRuntime(rt);
    free(code);
    return out;
}

static JSValue n_heap_exhausted(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv) {
    Realm *r = find_realm(ARG(0));
    if (!r || r->entered) return JS_FALSE;
    double size = fmax(fmin(cfg.heap_probe_bytes, floor(r->memory_limit / 16.0)), HEAP_PROBE_MIN_BYTES);
    char code[64];
    snprintf(code, sizeof code, "'x'.repeat(%.0f).length", size);
    double saved = r->deadline;
    r->deadline = monotonic_ms() + HEAP_PROBE_TIMEOUT_MS;
    enter(r);
    JSValue v = JS_Eval(r->ctx, code, strlen(code), "eval_script", JS_EVAL_TYPE_GLOBAL);
    /* A probe that ran out of time says nothing of the heap (engine.py: a timeout is False). */
    bool exhausted = JS_IsException(v) && monotonic_ms() < r->deadline;
    JS_FreeValue(r->ctx, exhausted ? JS_GetException(r->ctx) : v);
    r->deadline = saved;
    leave(r);
    return JS_NewBool(c, exhausted);
}

static JSValue n_realm_free(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv) {
    Realm *r = find_realm(ARG(0));
    if (!r) return JS_UNDEFINED;
    for (Realm **p = &realms; *p; p = &(*p)->next) {
        if (*p == r) {
            *p = r->next;
            break;
        }
    }
    if (running == r) running = NULL; /* stopped without onRealmDone */
    if (r->entered) {
        r->doomed = true;
        r->deadline = -INFINITY; /* its JS unwinds at the next interrupt check */
    } else {
        destroy(r);
    }
    return JS_UNDEFINED;
}

const JSCFunctionListEntry realm_native_funcs[] = {
    JS_CFUNC_DEF("realmNew", 2, n_realm_new),
    JS_CFUNC_DEF("realmAddModule", 3, n_realm_add_module),
    JS_CFUNC_DEF("realmRun", 3, n_realm_run),
    JS_CFUNC_DEF("settle", 3, n_settle),
    JS_CFUNC_DEF("checkSyntax", 1, n_check_syntax),
    JS_CFUNC_DEF("realmHeapExhausted", 1, n_heap_exhausted),
    JS_CFUNC_DEF("realmFree", 1, n_realm_free),
};
const size_t realm_native_count = sizeof realm_native_funcs / sizeof *realm_native_funcs;

/* ---- the drive loop ------------------------------------------------------------------------ */
void realm_drive(void) {
    static bool driving; /* the loop's alone: callbacks made from here never drive */
    Realm *r;
    if (driving) return;
    driving = true;
    while ((r = running) != NULL) {
        if (monotonic_ms() >= r->deadline) {
            finish(r, outcome("timeout"));
            continue;
        }
        JSValue result = JS_UNINITIALIZED;
        enter(r);
        if (!r->started) {
            r->started = true;
            JSValue v = JS_Eval(r->ctx, r->script, r->script_len, "eval_script", JS_EVAL_TYPE_GLOBAL);
            free(r->script);
            r->script = NULL;
            if (!JS_IsException(v)) r->top = v;
            else if (r->doomed) JS_FreeValue(r->ctx, JS_GetException(r->ctx));
            else result = failed(r, JS_GetException(r->ctx));
        }
        if (JS_IsUninitialized(result)) {
            run_jobs(r);
            if (!r->doomed) result = settled(r);
            /* still waiting past the deadline: the interrupt stopped a job (jsbox: a timeout) */
            if (JS_IsUninitialized(result) && !r->doomed && monotonic_ms() >= r->deadline) result = outcome("timeout");
        }
        if (!leave(r)) {
            JS_FreeValue(sctx, result);
            continue;
        }
        if (!JS_IsUninitialized(result)) {
            finish(r, result);
            continue;
        }
        JSValue id = JS_NewInt32(sctx, r->id);
        JS_FreeValue(sctx, sup_call("afterTurn", 1, &id));
        if (running != r) continue;
        if (r->nqueue > 0) {
            if (r->in_a_row < cfg.max_settled_in_a_row) {
                r->in_a_row++;
                apply_settlements(r);
            } else {
                r->in_a_row = 0;
                poll_io_now(); /* fairness: the pipe and the timer get their turn */
            }
            continue;
        }
        if (r->nwaiters == 0 && !JS_IsJobPending(r->rt)) {
            JSValue o = outcome("error");
            JS_SetPropertyStr(sctx, o, "name", JS_NewString(sctx, "Error"));
            JS_SetPropertyStr(sctx, o, "message", JS_NewString(sctx, "promise never settled (no pending jobs)"));
            JS_SetPropertyStr(sctx, o, "stack", JS_NewString(sctx, ""));
            finish(r, o);
            continue;
        }
        r->in_a_row = 0;
        break; /* JS waits: for a reply, the timer or the deadline */
    }
    driving = false;
}
