/* What one locked-down sandbox realm costs on QuickJS-ng's own C API, with no Python in the
 * process: the measurement behind "a native worker" in bench/speed-footprint.md. Not product
 * code; bench/native_worker.py downloads QuickJS-ng's sources, builds this and prints its figures
 * beside the Python worker's.
 *
 * A realm here is what runtime/sandbox/realm.py `Realm.create` builds: a fresh runtime and
 * context with the worker's bindings, prelude phase A (runtime/js/prelude.js: lockdown) and phase
 * A2 (@codemode/errors and @codemode/host loaded), then freed. The bindings are stubs: phase A
 * and A2 only capture them. TextEncoder/TextDecoder, which jsbox provides natively, are stubbed
 * by a two-line class (a native worker would provide them in C).
 *
 *   native_realm DIR times N   N rounds; each round one realm per variant, then the floor
 *                              (a fresh runtime evaluating an empty module); prints one JSON object
 *                              of samples in ms. Variants: "source" (prelude and modules compiled
 *                              from text), "bytecode" (read with JS_ReadObject from what the first
 *                              compile wrote), "cwalk" (bytecode, and prelude_cwalk.js, whose
 *                              lockGraph takes its object walk from __bench_walk below, in C).
 *   native_realm DIR marks N   mean ms between the __bench_mark calls of prelude_marks.js (bytecode)
 *   native_realm DIR rss V     "ready <VmRSS kB>" with one realm of variant V prepared, then
 *                              waits for a line on stdin (an idle worker holding its next realm)
 *
 * DIR holds prelude.js, errors.js, host.js, url.js, and for those variants prelude_cwalk.js and
 * prelude_marks.js (the prelude with the hooks bench/native_worker.py patches in).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "quickjs.h"

/* The worker's limits (runtime/limits.py defaults): heap and stack of one realm. */
#define MEMORY_LIMIT (64 << 20)
#define STACK_LIMIT (512 << 10)
/* Objects the C walk can hold on its stack and in its visited set at once: the intrinsics
 * of a fresh realm are ~630 objects. */
#define WALK_STACK 8192
#define SEEN_BITS 15

enum { SOURCE, BYTECODE, CWALK, VARIANTS };
static const char *VARIANT_NAMES[VARIANTS] = {"source", "bytecode", "cwalk"};

typedef struct {
    char *text;
    size_t len;
    uint8_t *bc;
    size_t bc_len;
} Script;

static Script prelude[VARIANTS], prelude_marks, errors_js, host_js;
static char *url_text;
static size_t url_len;
static int variant;
static JSRuntime *rt;
static JSContext *ctx;

static char *slurp(const char *dir, const char *name, size_t *len, int optional) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (optional) return NULL;
        perror(path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc(n + 1);
    if (fread(buf, 1, n, f) != (size_t)n) {
        perror(path);
        exit(2);
    }
    buf[n] = 0;
    fclose(f);
    *len = n;
    return buf;
}

static double now_ms(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void die(const char *what) {
    JSValue e = JS_GetException(ctx);
    const char *s = JS_ToCString(ctx, e);
    fprintf(stderr, "native_realm: %s: %s\n", what, s ? s : "?");
    exit(3);
}

static JSValue fn_stub(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv) {
    return JS_UNDEFINED;
}

static JSValue fn_url(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv) {
    return JS_NewStringLen(c, url_text, url_len);
}

/* ---- __bench_mark(label): prelude_marks.js's timestamps -------------------------------- */
#define MAX_MARKS 16
static double mark_at[MAX_MARKS], mark_sum[MAX_MARKS];
static char mark_name[MAX_MARKS][32];
static int marks;

static JSValue fn_mark(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv) {
    if (marks < MAX_MARKS) {
        const char *s = JS_ToCString(c, argv[0]);
        snprintf(mark_name[marks], sizeof mark_name[marks], "%s", s ? s : "?");
        JS_FreeCString(c, s);
        mark_at[marks++] = now_ms(CLOCK_MONOTONIC);
    }
    return JS_UNDEFINED;
}

/* ---- __bench_walk(roots, protos, locked): prelude.js lockGraph's walk, in C --------------
 * The objects reachable from `roots` through own properties (data values, accessor functions)
 * and prototypes, skipping those in `locked`; a function's `prototype` value is appended to
 * `protos`. Returns them as an array, in no particular order (lockGraph freezes them all). */
static void *seen[1 << SEEN_BITS];

static int seen_add(void *p) {
    size_t mask = (1 << SEEN_BITS) - 1, i = (((uintptr_t)p >> 4) * 2654435761u) & mask;
    for (;; i = (i + 1) & mask) {
        if (seen[i] == p) return 0;
        if (!seen[i]) {
            seen[i] = p;
            return 1;
        }
    }
}

static JSValue fn_walk(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv) {
    static JSValue stack[WALK_STACK];
    int sp = 0;
    int64_t nroots, nprotos, nlocked;
    uint32_t nfound = 0;
    memset(seen, 0, sizeof seen);
    JS_GetLength(c, argv[0], &nroots);
    JS_GetLength(c, argv[1], &nprotos);
    JS_GetLength(c, argv[2], &nlocked);
    for (int64_t i = 0; i < nlocked; i++) {
        JSValue x = JS_GetPropertyInt64(c, argv[2], i);
        if (JS_IsObject(x)) seen_add(JS_VALUE_GET_PTR(x));
        JS_FreeValue(c, x);
    }
    for (int64_t i = 0; i < nroots; i++) {
        JSValue r = JS_GetPropertyInt64(c, argv[0], i);
        if (JS_IsObject(r) && seen_add(JS_VALUE_GET_PTR(r)) && sp < WALK_STACK) stack[sp++] = r;
        else JS_FreeValue(c, r);
    }
    JSAtom a_length = JS_NewAtom(c, "length"), a_name = JS_NewAtom(c, "name");
    JSAtom a_prototype = JS_NewAtom(c, "prototype");
    JSValue found = JS_NewArray(c);
    while (sp > 0) {
        JSValue v = stack[--sp];
        JSValue p = JS_GetPrototype(c, v);
        if (JS_IsObject(p) && seen_add(JS_VALUE_GET_PTR(p)) && sp < WALK_STACK) stack[sp++] = p;
        else JS_FreeValue(c, p);
        int is_function = JS_IsFunction(c, v);
        JSPropertyEnum *tab;
        uint32_t len;
        if (JS_GetOwnPropertyNames(c, &tab, &len, v, JS_GPN_STRING_MASK | JS_GPN_SYMBOL_MASK) < 0) die("walk");
        for (uint32_t k = 0; k < len; k++) {
            JSAtom atom = tab[k].atom;
            JSPropertyDescriptor d;
            if (is_function && (atom == a_length || atom == a_name)) continue;
            if (JS_GetOwnProperty(c, &d, v, atom) != 1) continue;
            JSValue reached[3] = {d.value, d.getter, d.setter};
            for (int j = 0; j < 3; j++) {
                JSValue x = reached[j];
                if (JS_IsObject(x)) {
                    if (j == 0 && is_function && atom == a_prototype)
                        JS_SetPropertyInt64(c, argv[1], nprotos++, JS_DupValue(c, x));
                    if (seen_add(JS_VALUE_GET_PTR(x)) && sp < WALK_STACK) stack[sp++] = JS_DupValue(c, x);
                }
                JS_FreeValue(c, x);
            }
        }
        JS_FreePropertyEnum(c, tab, len);
        JS_SetPropertyInt64(c, found, nfound++, v);
    }
    JS_FreeAtom(c, a_length);
    JS_FreeAtom(c, a_name);
    JS_FreeAtom(c, a_prototype);
    return found;
}

/* ---- one realm ------------------------------------------------------------------------ */
static JSModuleDef *load_module(JSContext *c, const char *name, void *opaque) {
    Script *s = !strcmp(name, "@codemode/errors") ? &errors_js : !strcmp(name, "@codemode/host") ? &host_js : NULL;
    if (!s) {
        JS_ThrowReferenceError(c, "module not found: %s", name);
        return NULL;
    }
    JSValue m = variant == SOURCE
                    ? JS_Eval(c, s->text, s->len, name, JS_EVAL_TYPE_MODULE | JS_EVAL_FLAG_COMPILE_ONLY)
                    : JS_ReadObject(c, s->bc, s->bc_len, JS_READ_OBJ_BYTECODE);
    if (JS_IsException(m)) return NULL;
    JSModuleDef *def = JS_VALUE_GET_PTR(m);
    JS_FreeValue(c, m);
    return def;
}

static void new_realm(void) {
    static const char *bindings[] = {"__codemode_host__", "__codemode_log__",  "__codemode_arm__", "__codemode_next__",
                                     "__codemode_take__", "__codemode_tick__", "__codemode_now__"};
    static const char *config = "{\"maxPendingTimers\":10000,\"maxLogDepth\":20,\"maxTrackedFailures\":100,"
                                "\"maxReportedFailures\":5,\"maxNameChars\":200,\"maxReportTextChars\":2000}";
    rt = JS_NewRuntime();
    JS_SetMemoryLimit(rt, MEMORY_LIMIT);
    JS_SetMaxStackSize(rt, STACK_LIMIT);
    JS_SetModuleLoaderFunc(rt, NULL, load_module, NULL);
    ctx = JS_NewContext(rt);
    JSValue g = JS_GetGlobalObject(ctx);
    for (size_t i = 0; i < sizeof bindings / sizeof *bindings; i++)
        JS_SetPropertyStr(ctx, g, bindings[i], JS_NewCFunction(ctx, fn_stub, bindings[i], 1));
    JS_SetPropertyStr(ctx, g, "__codemode_url__", JS_NewCFunction(ctx, fn_url, "__codemode_url__", 0));
    JS_SetPropertyStr(ctx, g, "__codemode_config__", JS_ParseJSON(ctx, config, strlen(config), "<config>"));
    JS_SetPropertyStr(ctx, g, "__bench_walk", JS_NewCFunction(ctx, fn_walk, "__bench_walk", 3));
    JS_SetPropertyStr(ctx, g, "__bench_mark", JS_NewCFunction(ctx, fn_mark, "__bench_mark", 1));
    JS_FreeValue(ctx, g);
}

static const char SHIM[] = "globalThis.TextEncoder = class TextEncoder { encode(s) { return new Uint8Array(0); } };"
                           "globalThis.TextDecoder = class TextDecoder { decode(b) { return ''; } };";

static void phase_a(Script *s) {
    JSValue v = JS_Eval(ctx, SHIM, strlen(SHIM), "<shim>", JS_EVAL_TYPE_GLOBAL);
    if (JS_IsException(v)) die("shim");
    JS_FreeValue(ctx, v);
    v = variant == SOURCE ? JS_Eval(ctx, s->text, s->len, "prelude.js", JS_EVAL_TYPE_GLOBAL)
                          : JS_EvalFunction(ctx, JS_ReadObject(ctx, s->bc, s->bc_len, JS_READ_OBJ_BYTECODE));
    if (JS_IsException(v)) die("prelude phase A");
    const char *status = JS_ToCString(ctx, v);
    if (!status || strcmp(status, "locked")) {
        fprintf(stderr, "native_realm: prelude phase A returned %s\n", status ? status : "?");
        exit(3);
    }
    JS_FreeCString(ctx, status);
    JS_FreeValue(ctx, v);
}

static void phase_a2(void) {
    static const char code[] = "globalThis.__codemode_load__(64)";
    JSValue promise = JS_Eval(ctx, code, strlen(code), "<load>", JS_EVAL_TYPE_GLOBAL);
    if (JS_IsException(promise)) die("prelude phase A2");
    JSContext *job_ctx;
    while (JS_ExecutePendingJob(rt, &job_ctx) > 0) {
    }
    if (JS_PromiseState(ctx, promise) != JS_PROMISE_FULFILLED) die("prelude phase A2 did not settle");
    JSValue report = JS_PromiseResult(ctx, promise);
    const char *text = JS_ToCString(ctx, report);
    if (!text || !strstr(text, "\"loaded\"")) {
        fprintf(stderr, "native_realm: prelude phase A2 returned %s\n", text ? text : "?");
        exit(3);
    }
    JS_FreeCString(ctx, text);
    JS_FreeValue(ctx, report);
    JS_FreeValue(ctx, promise);
}

static void free_realm(void) {
    JS_FreeContext(ctx);
    JS_FreeRuntime(rt);
}

static void compile(Script *s, const char *name, int flags) {
    JSValue f = JS_Eval(ctx, s->text, s->len, name, flags | JS_EVAL_FLAG_COMPILE_ONLY);
    if (JS_IsException(f)) die(name);
    s->bc = JS_WriteObject(ctx, &s->bc_len, f, JS_WRITE_OBJ_BYTECODE);
    JS_FreeValue(ctx, f);
}

/* One realm of `v`, built and freed; the wall time of each step into out[0..3], total wall and
 * this thread's CPU into out[4], out[5]. */
static void one_realm(int v, double *out) {
    variant = v;
    double c0 = now_ms(CLOCK_THREAD_CPUTIME_ID), t0 = now_ms(CLOCK_MONOTONIC);
    new_realm();
    double t1 = now_ms(CLOCK_MONOTONIC);
    phase_a(&prelude[v]);
    double t2 = now_ms(CLOCK_MONOTONIC);
    phase_a2();
    double t3 = now_ms(CLOCK_MONOTONIC);
    free_realm();
    double t4 = now_ms(CLOCK_MONOTONIC), c4 = now_ms(CLOCK_THREAD_CPUTIME_ID);
    double steps[6] = {t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0, c4 - c0};
    memcpy(out, steps, sizeof steps);
}

static double floor_run(void) {
    double t0 = now_ms(CLOCK_MONOTONIC);
    JSRuntime *r = JS_NewRuntime();
    JSContext *c = JS_NewContext(r), *job_ctx;
    JS_FreeValue(c, JS_Eval(c, "", 0, "empty.js", JS_EVAL_TYPE_MODULE));
    while (JS_ExecutePendingJob(r, &job_ctx) > 0) {
    }
    JS_FreeContext(c);
    JS_FreeRuntime(r);
    return now_ms(CLOCK_MONOTONIC) - t0;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: native_realm DIR times|marks N | native_realm DIR rss VARIANT\n");
        return 2;
    }
    const char *dir = argv[1], *mode = argv[2];
    prelude[SOURCE].text = slurp(dir, "prelude.js", &prelude[SOURCE].len, 0);
    prelude[BYTECODE] = prelude[SOURCE];
    prelude[CWALK].text = slurp(dir, "prelude_cwalk.js", &prelude[CWALK].len, 1);
    prelude_marks.text = slurp(dir, "prelude_marks.js", &prelude_marks.len, 1);
    errors_js.text = slurp(dir, "errors.js", &errors_js.len, 0);
    host_js.text = slurp(dir, "host.js", &host_js.len, 0);
    url_text = slurp(dir, "url.js", &url_len, 0);
    new_realm(); /* compile once, as a worker would when it starts */
    compile(&prelude[BYTECODE], "prelude.js", JS_EVAL_TYPE_GLOBAL);
    if (prelude[CWALK].text) compile(&prelude[CWALK], "prelude.js", JS_EVAL_TYPE_GLOBAL);
    if (prelude_marks.text) compile(&prelude_marks, "prelude.js", JS_EVAL_TYPE_GLOBAL);
    compile(&errors_js, "@codemode/errors", JS_EVAL_TYPE_MODULE);
    compile(&host_js, "@codemode/host", JS_EVAL_TYPE_MODULE);
    free_realm();
    int variants = prelude[CWALK].text ? VARIANTS : CWALK;

    if (!strcmp(mode, "rss")) {
        int v = 0;
        while (v < variants && strcmp(VARIANT_NAMES[v], argv[3])) v++;
        if (v == variants) return 2;
        variant = v;
        new_realm();
        phase_a(&prelude[v]);
        phase_a2();
        char line[256];
        FILE *status = fopen("/proc/self/status", "r");
        while (fgets(line, sizeof line, status))
            if (!strncmp(line, "VmRSS:", 6)) printf("ready %ld\n", strtol(line + 6, NULL, 10));
        fclose(status);
        fflush(stdout);
        fgets(line, sizeof line, stdin);
        free_realm();
        return 0;
    }
    int n = atoi(argv[3]);
    if (!strcmp(mode, "marks")) {
        if (!prelude_marks.text) return 2;
        variant = BYTECODE;
        int kept = 0;
        for (int i = 0; i < n; i++) {
            new_realm();
            marks = 0;
            phase_a(&prelude_marks);
            phase_a2();
            free_realm();
            for (int k = 1; k < marks; k++) mark_sum[k] += mark_at[k] - mark_at[k - 1];
            kept = marks;
        }
        printf("{");
        for (int k = 1; k < kept; k++) printf("%s\"%s\": %.4f", k > 1 ? ", " : "", mark_name[k], mark_sum[k] / n);
        printf("}\n");
        return 0;
    }
    static const char *steps[] = {"new", "phase_a", "phase_a2", "free", "total", "cpu"};
    double(*samples)[VARIANTS][6] = calloc(n, sizeof *samples);
    double *floor_ms = calloc(n, sizeof *floor_ms);
    for (int i = 0; i < n; i++) {
        for (int v = 0; v < variants; v++) one_realm(v, samples[i][v]);
        floor_ms[i] = floor_run();
    }
    printf("{\"bytecode_bytes\": %zu, \"source_bytes\": %zu, \"floor\": [", prelude[BYTECODE].bc_len,
           prelude[SOURCE].len);
    for (int i = 0; i < n; i++) printf("%s%.4f", i ? "," : "", floor_ms[i]);
    printf("]");
    for (int v = 0; v < variants; v++)
        for (int k = 0; k < 6; k++) {
            printf(", \"%s.%s\": [", VARIANT_NAMES[v], steps[k]);
            for (int i = 0; i < n; i++) printf("%s%.4f", i ? "," : "", samples[i][v][k]);
            printf("]");
        }
    printf("}\n");
    return 0;
}
