/* Shared by the native worker's units (INTERFACE.md): worker.c (process, loop, `native`,
 * supervisor calls), realm.c (sandbox realms and their drive loop), arena.c (the realm heap),
 * text.c (UTF-8 and TextEncoder/TextDecoder). */
#ifndef CODEMODE_WORKER_H
#define CODEMODE_WORKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "quickjs.h"

/* CONFIG_JSON's numbers the C side reads (worker.c fills it; defaults are the Python worker's). */
typedef struct Config {
    double prelude_timeout_ms;      /* budget of prelude phase A and of phase A2, each */
    double heap_probe_bytes;        /* upper size of the heap probe's allocation */
    double release_threshold_bytes; /* free heap kept by releaseMemory */
    int max_settled_in_a_row;       /* settlement rounds before the loop gets a turn */
    size_t read_chunk_bytes;        /* bytes per read() of stdin */
    double check_memory_bytes;      /* heap limit of checkSyntax's scratch runtime */
    char *realm_config_json;        /* JSON text of config.realmConfig */
    size_t realm_config_len;
} Config;

typedef struct Bytecode {
    uint8_t *buf;
    size_t len;
} Bytecode;

extern Config cfg;
extern JSRuntime *srt; /* the supervisor's runtime */
extern JSContext *sctx;
extern Bytecode bc_prelude, bc_errors, bc_host;
extern char *url_text;
extern size_t url_len;

/* worker.c */
double monotonic_ms(void);
/* supervisor.<name>(...argv): the result (owned), or JS_EXCEPTION if it threw; the exception is
 * printed and cleared (nothing is pending) and its name left in sup_error_name. */
JSValue sup_call(const char *name, int argc, JSValueConst *argv);
extern char sup_error_name[64];
/* Prints (and clears) the pending exception of ctx on stderr, with its stack. */
void print_exception(JSContext *ctx, const char *where);
/* Throws an Error whose message is prefix + text (neither cut, unlike JS_ThrowPlainError's
 * 256-byte buffer); stack "" when `no_stack`. Returns JS_EXCEPTION. */
JSValue throw_error(JSContext *ctx, const char *prefix, const char *text, size_t text_len, bool no_stack);
/* One round of stdin and timer handling without blocking (the drive loop's fairness turn). */
void poll_io_now(void);

/* realm.c */
extern const JSCFunctionListEntry realm_native_funcs[];
extern const size_t realm_native_count;
double realm_running_deadline(void); /* INFINITY when no realm is running */
void realm_drive(void);

/* arena.c: the realm heap, one per worker (realm.c "realm images") */
extern const JSMallocFunctions arena_memory;
/* Whether a realm with this memory limit can use the arena (its address space reserved the first
 * time; false when it cannot be). */
bool arena_fits(size_t memory_limit);
void arena_reset(void);  /* an empty heap */
size_t arena_live(void); /* bytes of the blocks in use */
void *arena_save(size_t *len); /* a read-only copy of the heap (its pages), or NULL */
void arena_drop_image(void *image, size_t len);
void arena_restore(const void *image, size_t len);
void arena_release_above(size_t keep); /* pages above `keep` bytes given back */

/* text.c */
bool utf8_valid(const uint8_t *s, size_t n);
/* WHATWG UTF-8 decode into `out` (room for 3 * n bytes): every maximal invalid subpart becomes
 * U+FFFD. Returns the bytes written, or -1 when `fatal` and the input is invalid. *used: bytes
 * consumed, short of n only when `stream` leaves an incomplete sequence at the end. */
ssize_t utf8_repair(const uint8_t *s, size_t n, uint8_t *out, bool fatal, bool stream, size_t *used);
/* Lone surrogates, as JS_ToCStringLen writes them (ED A0..BF xx), become U+FFFD, in place. */
void wtf8_fix(char *s, size_t n);
/* The JS string of UTF-8 bytes that may be invalid (invalid subparts → U+FFFD). */
JSValue new_string_lossy(JSContext *ctx, const uint8_t *s, size_t n);
/* String(v) in `from` as a string of `to`, lone surrogates → U+FFFD. JS_EXCEPTION: pending in
 * `from` (String threw, or no memory for its UTF-8) or in `to` (no memory for the string). */
JSValue copy_string(JSContext *from, JSValueConst v, JSContext *to);
int text_codec_install(JSContext *ctx);

#endif
