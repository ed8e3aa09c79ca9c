/* codemode-worker: the native sandbox worker, a drop-in replacement for the Python worker
 * process (runtime/sandbox/worker.py) with no Python in it. See INTERFACE.md beside this file.
 *
 * This C program is only the shell: process set-up, the poll loop (stdin lines, one timer, the
 * running realm's deadline), the QuickJS runtimes and what crosses between them. The worker's
 * logic (the protocol, runs, the event pump, journal and replay, logs, call screening) is
 * runtime/js/supervisor.js, trusted JavaScript in a runtime of its own in this process, which
 * drives the sandbox realms through the `native` object defined here and in realm.c (the
 * realms, their bindings and drive loop); text.c holds UTF-8 and TextEncoder/TextDecoder.
 *
 *   codemode-worker JS_DIR CONFIG_JSON
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "worker.h"

/* Native stack of the supervisor's JS (no recursion of its own beyond JSON of bounded depth);
 * with a realm's 1 MiB under it (a binding calls back into it) it stays well inside the
 * process's 8 MiB main-thread stack. */
#define SUPERVISOR_STACK_BYTES (2 * 1024 * 1024)
/* CONFIG_JSON's defaults: the Python worker's constants (realm.py, engine.py, protocol.py,
 * limit_bounds.py), used only if a key is missing. */
#define DEFAULT_PRELUDE_TIMEOUT_MS 10000.0
#define DEFAULT_HEAP_PROBE_BYTES (1024.0 * 1024)
#define DEFAULT_RELEASE_THRESHOLD_BYTES (2.0 * 1024 * 1024)
#define DEFAULT_MAX_SETTLED_IN_A_ROW 64
#define DEFAULT_READ_CHUNK_BYTES (256 * 1024)
#define DEFAULT_MAX_MEMORY_BYTES (64.0 * 1024 * 1024)
/* Unhandled supervisor promise rejections remembered until its jobs have run (then printed):
 * bounds what a buggy supervisor can pile up between two callbacks. */
#define MAX_UNHANDLED_REJECTIONS 16
/* A stdin buffer grown past this many read chunks by one long line is freed once empty: a
 * run's modules (megabytes) must not stay resident in an idle worker. */
#define KEPT_INPUT_CHUNKS 4

Config cfg;
JSRuntime *srt;
JSContext *sctx;
Bytecode bc_prelude, bc_errors, bc_host;
char *url_text;
size_t url_len;

static int out_fd;
static JSValue supervisor; /* globalThis.supervisor, set once supervisor.js has run */
static int sup_depth; /* supervisor callbacks on the C stack */
char sup_error_name[64];
static double timer_due = INFINITY;
static bool stdin_open = true, reading;
static uint8_t *inbuf;
static size_t inlen, incap;
static JSValue unhandled[MAX_UNHANDLED_REJECTIONS];
static int nunhandled;

static void die(const char *what, const char *detail) {
    fprintf(stderr, "codemode-worker: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(1);
}

double monotonic_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static char *slurp(const char *dir, const char *name, size_t *len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) die(strerror(errno), path);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (cap - n - 1 == 0) buf = realloc(buf, cap *= 2);
    }
    if (!buf || ferror(f)) die("cannot read", path);
    fclose(f);
    buf[n] = 0; /* JS_Eval wants a NUL after the text */
    *len = n;
    return buf;
}

/* ---- errors and supervisor callbacks ------------------------------------------------------ */
static void print_value(JSContext *ctx, JSValueConst v, const char *where) {
    const char *text = JS_ToCString(ctx, v);
    JSValue stack = JS_IsObject(v) ? JS_GetPropertyStr(ctx, v, "stack") : JS_UNDEFINED;
    const char *st = JS_IsString(stack) ? JS_ToCString(ctx, stack) : NULL;
    fprintf(stderr, "codemode-worker: %s: %s\n%s", where, text ? text : "[unprintable]", st ? st : "");
    JS_FreeCString(ctx, text);
    JS_FreeCString(ctx, st);
    JS_FreeValue(ctx, stack);
    if (JS_HasException(ctx)) JS_FreeValue(ctx, JS_GetException(ctx));
}

void print_exception(JSContext *ctx, const char *where) {
    JSValue exc = JS_GetException(ctx);
    print_value(ctx, exc, where);
    JS_FreeValue(ctx, exc);
}

JSValue throw_error(JSContext *ctx, const char *prefix, const char *text, size_t text_len, bool no_stack) {
    JSValue err = JS_NewError(ctx);
    if (JS_IsException(err)) return err;
    size_t plen = strlen(prefix);
    char *buf = malloc(plen + text_len + 1);
    if (!buf) {
        JS_FreeValue(ctx, err);
        return JS_ThrowOutOfMemory(ctx);
    }
    memcpy(buf, prefix, plen);
    memcpy(buf + plen, text, text_len);
    JSValue msg = JS_NewStringLen(ctx, buf, plen + text_len);
    free(buf);
    if (JS_IsException(msg)) {
        JS_FreeValue(ctx, err);
        return msg;
    }
    JS_DefinePropertyValueStr(ctx, err, "message", msg, JS_PROP_WRITABLE | JS_PROP_CONFIGURABLE);
    if (no_stack) /* jsbox's own errors (module not found) had an empty stack */
        JS_DefinePropertyValueStr(ctx, err, "stack", JS_NewString(ctx, ""), JS_PROP_WRITABLE | JS_PROP_CONFIGURABLE);
    return JS_Throw(ctx, err);
}

static void track_rejection(JSContext *ctx, JSValueConst promise, JSValueConst reason, bool is_handled, void *opaque) {
    for (int i = 0; i < nunhandled; i++) {
        if (JS_VALUE_GET_PTR(unhandled[i]) == JS_VALUE_GET_PTR(promise)) {
            if (is_handled) {
                JS_FreeValue(ctx, unhandled[i]);
                unhandled[i] = unhandled[--nunhandled];
            }
            return;
        }
    }
    if (!is_handled && nunhandled < MAX_UNHANDLED_REJECTIONS) unhandled[nunhandled++] = JS_DupValue(ctx, promise);
}

/* The supervisor's promise jobs, once no callback of it is on the stack (its microtasks). */
static void drain_supervisor(void) {
    JSContext *c;
    int ret;
    while ((ret = JS_ExecutePendingJob(srt, &c)) != 0)
        if (ret < 0) print_exception(c, "supervisor job");
    while (nunhandled > 0) {
        JSValue p = unhandled[--nunhandled], reason = JS_PromiseResult(sctx, p);
        print_value(sctx, reason, "unhandled rejection in the supervisor");
        JS_FreeValue(sctx, reason);
        JS_FreeValue(sctx, p);
    }
}

JSValue sup_call(const char *name, int argc, JSValueConst *argv) {
    JSValue fn = JS_GetPropertyStr(sctx, supervisor, name), ret = JS_UNDEFINED;
    if (!JS_IsFunction(sctx, fn)) {
        if (JS_IsException(fn)) JS_FreeValue(sctx, JS_GetException(sctx));
        fprintf(stderr, "codemode-worker: supervisor.%s is not a function\n", name);
    } else {
        sup_depth++;
        ret = JS_Call(sctx, fn, supervisor, argc, argv);
        sup_depth--;
        if (JS_IsException(ret)) { /* as traceback.print_exc in the Python worker: go on */
            char where[64];
            JSValue exc = JS_GetException(sctx);
            JSValue ename = JS_IsObject(exc) ? JS_GetPropertyStr(sctx, exc, "name") : JS_UNDEFINED;
            const char *s = JS_IsString(ename) ? JS_ToCString(sctx, ename) : NULL;
            snprintf(sup_error_name, sizeof sup_error_name, "%s", s ? s : "Error");
            JS_FreeCString(sctx, s);
            JS_FreeValue(sctx, ename);
            snprintf(where, sizeof where, "supervisor.%s", name);
            print_value(sctx, exc, where);
            JS_FreeValue(sctx, exc);
        }
    }
    JS_FreeValue(sctx, fn);
    if (sup_depth == 0) drain_supervisor();
    return ret;
}

/* ---- native.* ------------------------------------------------------------------------------ */
static void write_all(const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(out_fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) { /* the host made the pipe non-blocking: wait for room */
                struct pollfd pfd = {out_fd, POLLOUT, 0};
                poll(&pfd, 1, -1);
                continue;
            }
            die("cannot write to the host", strerror(errno)); /* the host is gone */
        }
        p += w;
        n -= w;
    }
}

static JSValue n_write(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    size_t len;
    char *s = (char *)JS_ToCStringLen(ctx, &len, argc > 0 ? argv[0] : JS_UNDEFINED);
    if (!s) return JS_EXCEPTION;
    wtf8_fix(s, len);
    write_all(s, len);
    JS_FreeCString(ctx, s);
    return JS_UNDEFINED;
}

static JSValue n_exit(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    int32_t code = 0;
    if (argc > 0) JS_ToInt32(ctx, &code, argv[0]);
    exit(code);
}

static JSValue n_monotonic_ms(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    return JS_NewFloat64(ctx, monotonic_ms());
}

static JSValue n_wall_ms(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return JS_NewFloat64(ctx, ts.tv_sec * 1e3 + ts.tv_nsec / 1e6);
}

static JSValue n_random32x4(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    uint32_t words[4];
    size_t got = 0;
    while (got < sizeof words) {
        ssize_t n = getrandom((char *)words + got, sizeof words - got, 0);
        if (n < 0 && errno != EINTR) {
            FILE *f = fopen("/dev/urandom", "rb"); /* a kernel without getrandom() */
            if (!f || fread(words, 1, sizeof words, f) != sizeof words) die("no source of randomness", NULL);
            fclose(f);
            break;
        }
        if (n > 0) got += n;
    }
    JSValue a = JS_NewArray(ctx);
    for (int i = 0; i < 4; i++) JS_SetPropertyUint32(ctx, a, i, JS_NewUint32(ctx, words[i]));
    return a;
}

static JSValue n_set_timer(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    double delay = 0;
    if (argc > 0 && JS_ToFloat64(ctx, &delay, argv[0])) return JS_EXCEPTION;
    timer_due = monotonic_ms() + (delay > 0 ? delay : 0); /* NaN: at once */
    return JS_UNDEFINED;
}

static JSValue n_clear_timer(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    timer_due = INFINITY;
    return JS_UNDEFINED;
}

/* engine.py release_memory: trim only when a run freed more than a small run's heap (trimming
 * less costs CPU and page faults in the next realm for a few hundred KB of RSS). */
static JSValue n_release_memory(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 info = mallinfo2();
    if ((double)info.fordblks >= cfg.release_threshold_bytes) malloc_trim(0);
#elif defined(__GLIBC__)
    malloc_trim(0);
#endif
    return JS_UNDEFINED;
}

static const JSCFunctionListEntry native_funcs[] = {
    JS_CFUNC_DEF("write", 1, n_write),
    JS_CFUNC_DEF("exit", 1, n_exit),
    JS_CFUNC_DEF("monotonicMs", 0, n_monotonic_ms),
    JS_CFUNC_DEF("wallMs", 0, n_wall_ms),
    JS_CFUNC_DEF("random32x4", 0, n_random32x4),
    JS_CFUNC_DEF("setTimer", 1, n_set_timer),
    JS_CFUNC_DEF("clearTimer", 0, n_clear_timer),
    JS_CFUNC_DEF("releaseMemory", 0, n_release_memory),
};

/* ---- stdin ---------------------------------------------------------------------------------- */
/* protocol.decode_reply's framing of a reply, whose JSON text is passed on without parsing. */
static const char REPLY_PREFIX[] = "{\"op\":\"reply\",\"id\":";
static const char REPLY_SEPARATOR[] = ",\"reply\":";

static void handle_line(const uint8_t *line, size_t n) {
    const size_t plen = sizeof REPLY_PREFIX - 1, slen = sizeof REPLY_SEPARATOR - 1;
    JSValue args[2];
    if (n > plen && !memcmp(line, REPLY_PREFIX, plen) && line[n - 1] == '}') {
        const uint8_t *head = line + plen, *end = line + n - 1;
        const uint8_t *sep = memmem(head, end - head, REPLY_SEPARATOR, slen);
        const uint8_t *body = sep ? sep + slen : NULL;
        double id = 0;
        const uint8_t *p = head;
        for (; sep && p < sep && *p >= '0' && *p <= '9'; p++) id = id * 10 + (*p - '0');
        if (sep && p == sep && sep > head && body < end && utf8_valid(body, end - body)) {
            args[0] = JS_NewNumber(sctx, id);
            args[1] = JS_NewStringLen(sctx, (const char *)body, end - body);
            JS_FreeValue(sctx, sup_call("onReply", 2, args));
            JS_FreeValue(sctx, args[1]);
            return;
        }
    }
    args[0] = new_string_lossy(sctx, line, n);
    if (JS_IsException(args[0])) {
        print_exception(sctx, "reading a line");
        return;
    }
    JS_FreeValue(sctx, sup_call("onLine", 1, args));
    JS_FreeValue(sctx, args[0]);
}

static void read_stdin(void) {
    size_t chunk = cfg.read_chunk_bytes;
    if (incap - inlen < chunk) { /* doubling: a long line costs O(n) copies, not O(n^2 / chunk) */
        size_t cap = inlen + chunk > 2 * incap ? inlen + chunk : 2 * incap;
        uint8_t *grown = realloc(inbuf, cap);
        if (!grown) die("out of memory reading stdin", NULL);
        inbuf = grown;
        incap = cap;
    }
    ssize_t got = read(0, inbuf + inlen, chunk);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (got <= 0) { /* end of input (or a read error, which ends it too) */
        stdin_open = false;
        free(inbuf);
        inbuf = NULL;
        inlen = incap = 0;
        JS_FreeValue(sctx, sup_call("onEof", 0, NULL));
        return;
    }
    size_t start = inlen, pos = 0;
    inlen += got;
    reading = true;
    for (uint8_t *nl; (nl = memchr(inbuf + start, '\n', inlen - start)) != NULL;) {
        handle_line(inbuf + pos, nl - (inbuf + pos));
        pos = start = nl - inbuf + 1;
    }
    reading = false;
    if (pos > 0) {
        memmove(inbuf, inbuf + pos, inlen - pos);
        inlen -= pos;
    }
    if (inlen == 0 && incap > KEPT_INPUT_CHUNKS * chunk) {
        free(inbuf);
        inbuf = NULL;
        incap = 0;
    }
}

/* Waits up to wait_ms (< 0: until something happens), then handles stdin and the timer. */
static void poll_io(double wait_ms) {
    struct pollfd pfd = {0, POLLIN, 0};
    struct timespec ts, *tsp = NULL;
    bool watch = stdin_open && !reading;
    if (wait_ms >= 0) {
        ts.tv_sec = (time_t)(wait_ms / 1000);
        ts.tv_nsec = (long)fmod(wait_ms * 1e6, 1e9);
        tsp = &ts;
    }
    int n = ppoll(watch ? &pfd : NULL, watch ? 1 : 0, tsp, NULL);
    if (n > 0 && pfd.revents) read_stdin();
    if (monotonic_ms() >= timer_due) {
        timer_due = INFINITY;
        JS_FreeValue(sctx, sup_call("onTimer", 0, NULL));
    }
}

void poll_io_now(void) {
    poll_io(0);
}

/* ---- start-up -------------------------------------------------------------------------------- */
static Bytecode compile(JSContext *ctx, const char *src, size_t len, const char *name, int type) {
    Bytecode bc;
    JSValue f = JS_Eval(ctx, src, len, name, type | JS_EVAL_FLAG_COMPILE_ONLY);
    if (JS_IsException(f)) {
        print_exception(ctx, name);
        die("cannot compile", name);
    }
    /* Debug info is kept: stacks name these files and lines (the host maps frames into them). */
    bc.buf = JS_WriteObject(ctx, &bc.len, f, JS_WRITE_OBJ_BYTECODE);
    JS_FreeValue(ctx, f);
    if (!bc.buf) die("cannot serialize", name);
    /* JS_WriteObject allocated it in ctx's runtime, which is about to go: keep a copy. */
    uint8_t *copy = malloc(bc.len);
    if (!copy) die("out of memory", NULL);
    memcpy(copy, bc.buf, bc.len);
    js_free(ctx, bc.buf);
    bc.buf = copy;
    return bc;
}

static double config_number(JSValueConst obj, const char *name, double dflt) {
    JSValue v = JS_GetPropertyStr(sctx, obj, name);
    double d = dflt;
    if (!JS_IsNumber(v) || JS_ToFloat64(sctx, &d, v) || !isfinite(d)) d = dflt;
    JS_FreeValue(sctx, v);
    return d;
}

static JSValue read_config(const char *text) {
    JSValue config = JS_ParseJSON(sctx, text, strlen(text), "CONFIG_JSON");
    if (JS_IsException(config) || !JS_IsObject(config)) {
        if (JS_IsException(config)) print_exception(sctx, "CONFIG_JSON");
        die("CONFIG_JSON is not a JSON object", NULL);
    }
    cfg.prelude_timeout_ms = config_number(config, "preludeTimeoutMs", DEFAULT_PRELUDE_TIMEOUT_MS);
    cfg.heap_probe_bytes = config_number(config, "heapProbeBytes", DEFAULT_HEAP_PROBE_BYTES);
    cfg.release_threshold_bytes = config_number(config, "releaseThresholdBytes", DEFAULT_RELEASE_THRESHOLD_BYTES);
    cfg.max_settled_in_a_row = (int)config_number(config, "maxSettledInARow", DEFAULT_MAX_SETTLED_IN_A_ROW);
    double chunk = config_number(config, "readChunkBytes", DEFAULT_READ_CHUNK_BYTES);
    cfg.read_chunk_bytes = chunk >= 1 ? (size_t)chunk : DEFAULT_READ_CHUNK_BYTES;
    JSValue limits = JS_GetPropertyStr(sctx, config, "defaultLimits");
    cfg.check_memory_bytes = JS_IsObject(limits) ? config_number(limits, "maxMemoryBytes", DEFAULT_MAX_MEMORY_BYTES)
                                                 : DEFAULT_MAX_MEMORY_BYTES;
    JS_FreeValue(sctx, limits);
    JSValue realm_config = JS_GetPropertyStr(sctx, config, "realmConfig");
    JSValue json = JS_JSONStringify(sctx, realm_config, JS_UNDEFINED, JS_UNDEFINED);
    size_t len;
    const char *s = JS_IsString(json) ? JS_ToCStringLen(sctx, &len, json) : NULL;
    if (!s) die("CONFIG_JSON has no realmConfig object", NULL);
    cfg.realm_config_json = strdup(s);
    cfg.realm_config_len = len;
    JS_FreeCString(sctx, s);
    JS_FreeValue(sctx, json);
    JS_FreeValue(sctx, realm_config);
    return config;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: codemode-worker JS_DIR CONFIG_JSON\n");
        return 2;
    }
    /* Killed with the host, even while a script runs (the host kills workers, never asks). */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1) return 0; /* the host died before prctl took effect */
    out_fd = dup(1);
    if (out_fd < 0 || dup2(2, 1) < 0) die("cannot set up the protocol fd", strerror(errno));
    signal(SIGPIPE, SIG_IGN); /* a closed pipe is an error from write(), not a silent death */

    const char *dir = argv[1];
    size_t prelude_len, errors_len, host_len, supervisor_len;
    char *prelude = slurp(dir, "prelude.js", &prelude_len);
    char *errors = slurp(dir, "errors.js", &errors_len);
    char *host = slurp(dir, "host.js", &host_len);
    char *supervisor_js = slurp(dir, "supervisor.js", &supervisor_len);
    url_text = slurp(dir, "url.js", &url_len);

    /* Once per process: every realm reads these instead of parsing the sources. The prelude
     * is named as jsbox named scripts, so its frames never match a module's name. */
    JSRuntime *scratch = JS_NewRuntime();
    JSContext *sc = scratch ? JS_NewContext(scratch) : NULL;
    if (!sc) die("out of memory", NULL);
    bc_prelude = compile(sc, prelude, prelude_len, "eval_script", JS_EVAL_TYPE_GLOBAL);
    bc_errors = compile(sc, errors, errors_len, "@codemode/errors", JS_EVAL_TYPE_MODULE);
    bc_host = compile(sc, host, host_len, "@codemode/host", JS_EVAL_TYPE_MODULE);
    JS_FreeContext(sc);
    JS_FreeRuntime(scratch);
    free(prelude);
    free(errors);
    free(host);

    srt = JS_NewRuntime();
    sctx = srt ? JS_NewContext(srt) : NULL;
    if (!sctx) die("out of memory", NULL);
    JS_SetMaxStackSize(srt, SUPERVISOR_STACK_BYTES);
    JS_SetHostPromiseRejectionTracker(srt, track_rejection, NULL);
    JSValue native = JS_NewObject(sctx);
    JS_SetPropertyFunctionList(sctx, native, native_funcs, sizeof native_funcs / sizeof *native_funcs);
    JS_SetPropertyFunctionList(sctx, native, realm_native_funcs, realm_native_count);
    JS_SetPropertyStr(sctx, native, "config", read_config(argv[2]));
    JSValue global = JS_GetGlobalObject(sctx);
    JS_SetPropertyStr(sctx, global, "native", native);
    JSValue v = JS_Eval(sctx, supervisor_js, supervisor_len, "supervisor.js", JS_EVAL_TYPE_GLOBAL);
    free(supervisor_js);
    if (JS_IsException(v)) {
        print_exception(sctx, "supervisor.js");
        die("cannot start the supervisor", NULL);
    }
    JS_FreeValue(sctx, v);
    supervisor = JS_GetPropertyStr(sctx, global, "supervisor");
    JS_FreeValue(sctx, global);
    if (!JS_IsObject(supervisor)) die("supervisor.js did not set globalThis.supervisor", NULL);
    drain_supervisor();

    JS_FreeValue(sctx, sup_call("start", 0, NULL));
    realm_drive();
    for (;;) {
        double due = fmin(timer_due, realm_running_deadline());
        double wait = isinf(due) ? -1 : fmax(0, due - monotonic_ms());
        if (!stdin_open && wait < 0) exit(0); /* nothing can ever happen again */
        poll_io(wait);
        realm_drive();
    }
}
