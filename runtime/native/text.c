/* UTF-8 for the native worker: validation and repair of bytes from the pipe, lone surrogates
 * out of every string that leaves a runtime, and the realms' TextEncoder / TextDecoder (which
 * QuickJS-ng lacks; jsbox provided them, prelude.js and url.js use them). UTF-8 only, as jsbox's:
 * any other label is a RangeError. Unlike jsbox's they follow WHATWG's Encoding standard for
 * what they do support (fatal, ignoreBOM, stream, encodeInto, U+FFFD for invalid bytes and lone
 * surrogates). */
#include <string.h>

#include "worker.h"

/* The lead byte's continuation count and the allowed range of the first continuation byte
 * (WHATWG's "UTF-8 lower/upper boundary": no overlongs, surrogates or code points past
 * U+10FFFF); need 0: not a lead byte. */
static int lead(uint8_t b, uint8_t *lo, uint8_t *hi) {
    *lo = 0x80;
    *hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) return 1;
    if (b >= 0xE0 && b <= 0xEF) {
        if (b == 0xE0) *lo = 0xA0;
        if (b == 0xED) *hi = 0x9F;
        return 2;
    }
    if (b >= 0xF0 && b <= 0xF4) {
        if (b == 0xF0) *lo = 0x90;
        if (b == 0xF4) *hi = 0x8F;
        return 3;
    }
    return 0;
}

ssize_t utf8_repair(const uint8_t *s, size_t n, uint8_t *out, bool fatal, bool stream, size_t *used) {
    size_t i = 0, o = 0;
    while (i < n) {
        uint8_t b = s[i], lo, hi;
        if (b < 0x80) {
            out[o++] = b;
            i++;
            continue;
        }
        int need = lead(b, &lo, &hi);
        size_t j = i + 1;
        bool whole = need > 0;
        for (int k = 0; whole && k < need; k++, j++) {
            if (j >= n) {
                if (stream) { /* the rest comes with the next chunk */
                    *used = i;
                    return o;
                }
                whole = false;
            } else if (s[j] < (k ? 0x80 : lo) || s[j] > (k ? 0xBF : hi)) {
                whole = false;
            }
            if (!whole) break;
        }
        if (whole) {
            memcpy(out + o, s + i, j - i);
            o += j - i;
            i = j;
            continue;
        }
        if (fatal) return -1;
        /* The maximal subpart (lead byte and the continuation bytes that fitted) is one U+FFFD;
         * the byte that broke it starts over. */
        memcpy(out + o, "\xEF\xBF\xBD", 3);
        o += 3;
        i = need > 0 ? j : i + 1;
    }
    *used = n;
    return o;
}

bool utf8_valid(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t b = s[i], lo, hi;
        if (b < 0x80) {
            i++;
            continue;
        }
        int need = lead(b, &lo, &hi);
        if (need == 0 || i + need >= n) return false;
        if (s[i + 1] < lo || s[i + 1] > hi) return false;
        for (int k = 2; k <= need; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF) return false;
        i += need + 1;
    }
    return true;
}

void wtf8_fix(char *s, size_t n) {
    for (size_t i = 0; i + 2 < n; i++) {
        if ((uint8_t)s[i] == 0xED && (uint8_t)s[i + 1] >= 0xA0) {
            memcpy(s + i, "\xEF\xBF\xBD", 3);
            i += 2;
        }
    }
}

JSValue new_string_lossy(JSContext *ctx, const uint8_t *s, size_t n) {
    if (utf8_valid(s, n)) return JS_NewStringLen(ctx, (const char *)s, n);
    uint8_t *out = js_malloc(ctx, 3 * n + 1);
    if (!out) return JS_EXCEPTION;
    size_t used;
    ssize_t len = utf8_repair(s, n, out, false, false, &used);
    JSValue v = JS_NewStringLen(ctx, (const char *)out, len);
    js_free(ctx, out);
    return v;
}

JSValue copy_string(JSContext *from, JSValueConst v, JSContext *to) {
    size_t len;
    /* JS_ToCStringLen writes a lone surrogate as its 3-byte WTF-8 form in a fresh buffer (the
     * only case where it is not a plain copy of an ASCII string), so fixing it in place is safe. */
    char *s = (char *)JS_ToCStringLen(from, &len, v);
    if (!s) return JS_EXCEPTION;
    wtf8_fix(s, len);
    JSValue out = JS_NewStringLen(to, s, len);
    JS_FreeCString(from, s);
    return out;
}

/* ---- TextEncoder / TextDecoder ----------------------------------------------------------- */
static JSClassID encoder_class, decoder_class;

typedef struct Decoder {
    bool fatal, ignore_bom;
    bool bom_seen; /* a stream's first code point has been looked at */
    uint8_t npending;
    uint8_t pending[3]; /* an incomplete sequence kept by decode(..., {stream: true}) */
} Decoder;

static void decoder_finalizer(JSRuntime *rt, JSValueConst obj) {
    js_free_rt(rt, JS_GetOpaque(obj, decoder_class));
}

/* `new.target.prototype`, or the class's own when that is not an object (subclassing works). */
static JSValue new_instance(JSContext *ctx, JSValueConst new_target, JSClassID cls) {
    JSValue proto = JS_GetPropertyStr(ctx, new_target, "prototype");
    if (JS_IsException(proto)) return proto;
    if (!JS_IsObject(proto)) {
        JS_FreeValue(ctx, proto);
        proto = JS_GetClassProto(ctx, cls);
    }
    JSValue obj = JS_NewObjectProtoClass(ctx, proto, cls);
    JS_FreeValue(ctx, proto);
    return obj;
}

static JSValue encoder_new(JSContext *ctx, JSValueConst new_target, int argc, JSValueConst *argv) {
    return new_instance(ctx, new_target, encoder_class);
}

static JSValue encoding(JSContext *ctx, JSValueConst this_val) {
    if (JS_GetClassID(this_val) != encoder_class && JS_GetClassID(this_val) != decoder_class)
        return JS_ThrowTypeError(ctx, "not a TextEncoder or TextDecoder");
    return JS_NewString(ctx, "utf-8");
}

static JSValue encode(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    if (JS_GetClassID(this_val) != encoder_class) return JS_ThrowTypeError(ctx, "not a TextEncoder");
    if (argc < 1 || JS_IsUndefined(argv[0])) return JS_NewUint8ArrayCopy(ctx, NULL, 0);
    size_t len;
    char *s = (char *)JS_ToCStringLen(ctx, &len, argv[0]);
    if (!s) return JS_EXCEPTION;
    wtf8_fix(s, len); /* a USVString: lone surrogates are U+FFFD */
    JSValue out = JS_NewUint8ArrayCopy(ctx, (const uint8_t *)s, len);
    JS_FreeCString(ctx, s);
    return out;
}

static JSValue encode_into(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    if (JS_GetClassID(this_val) != encoder_class) return JS_ThrowTypeError(ctx, "not a TextEncoder");
    size_t n, room;
    const uint16_t *src = JS_ToCStringLenUTF16(ctx, &n, argc > 0 ? argv[0] : JS_UNDEFINED);
    if (!src) return JS_EXCEPTION;
    /* Taken after the string conversion, which may run JS (toString) that detaches the buffer. */
    uint8_t *dst = JS_GetUint8Array(ctx, &room, argc > 1 ? argv[1] : JS_UNDEFINED);
    if (!dst) {
        JS_FreeCStringUTF16(ctx, src);
        return JS_EXCEPTION;
    }
    size_t read = 0, written = 0;
    while (read < n) {
        uint32_t c = src[read];
        int units = 1, bytes;
        if (c >= 0xD800 && c <= 0xDBFF && read + 1 < n && src[read + 1] >= 0xDC00 && src[read + 1] <= 0xDFFF) {
            c = 0x10000 + ((c - 0xD800) << 10) + (src[read + 1] - 0xDC00);
            units = 2;
        } else if (c >= 0xD800 && c <= 0xDFFF) {
            c = 0xFFFD;
        }
        bytes = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
        if (written + bytes > room) break;
        uint8_t *q = dst + written;
        if (bytes == 1) {
            q[0] = c;
        } else if (bytes == 2) {
            q[0] = 0xC0 | (c >> 6);
            q[1] = 0x80 | (c & 0x3F);
        } else if (bytes == 3) {
            q[0] = 0xE0 | (c >> 12);
            q[1] = 0x80 | ((c >> 6) & 0x3F);
            q[2] = 0x80 | (c & 0x3F);
        } else {
            q[0] = 0xF0 | (c >> 18);
            q[1] = 0x80 | ((c >> 12) & 0x3F);
            q[2] = 0x80 | ((c >> 6) & 0x3F);
            q[3] = 0x80 | (c & 0x3F);
        }
        written += bytes;
        read += units;
    }
    JS_FreeCStringUTF16(ctx, src);
    JSValue out = JS_NewObject(ctx);
    if (JS_IsException(out)) return out;
    JS_SetPropertyStr(ctx, out, "read", JS_NewInt64(ctx, read));
    JS_SetPropertyStr(ctx, out, "written", JS_NewInt64(ctx, written));
    return out;
}

/* WHATWG's labels of UTF-8, after trimming ASCII whitespace and lowering ASCII letters. */
static bool utf8_label(const char *s, size_t n) {
    static const char *labels[] = {"unicode-1-1-utf-8", "unicode11utf8", "unicode20utf8", "utf-8", "utf8", "x-unicode20utf8"};
    while (n > 0 && strchr("\t\n\f\r ", s[0]) && s[0]) s++, n--;
    while (n > 0 && strchr("\t\n\f\r ", s[n - 1]) && s[n - 1]) n--;
    for (size_t i = 0; i < sizeof labels / sizeof *labels; i++) {
        size_t k = 0;
        if (strlen(labels[i]) != n) continue;
        while (k < n && (s[k] >= 'A' && s[k] <= 'Z' ? s[k] + 32 : s[k]) == labels[i][k]) k++;
        if (k == n) return true;
    }
    return false;
}

/* options.<name> as a boolean: -1 if reading it threw. */
static int option(JSContext *ctx, JSValueConst options, const char *name) {
    if (!JS_IsObject(options)) return 0;
    JSValue v = JS_GetPropertyStr(ctx, options, name);
    if (JS_IsException(v)) return -1;
    int b = JS_ToBool(ctx, v);
    JS_FreeValue(ctx, v);
    return b;
}

static JSValue decoder_new(JSContext *ctx, JSValueConst new_target, int argc, JSValueConst *argv) {
    if (argc > 0 && !JS_IsUndefined(argv[0])) {
        size_t n;
        const char *label = JS_ToCStringLen(ctx, &n, argv[0]);
        if (!label) return JS_EXCEPTION;
        bool ok = utf8_label(label, n);
        JS_FreeCString(ctx, label);
        if (!ok) return JS_ThrowRangeError(ctx, "only utf-8 is supported"); /* jsbox's text */
    }
    JSValueConst options = argc > 1 ? argv[1] : JS_UNDEFINED;
    if (!JS_IsUndefined(options) && !JS_IsNull(options) && !JS_IsObject(options))
        return JS_ThrowTypeError(ctx, "TextDecoder options must be an object");
    int fatal = option(ctx, options, "fatal");
    int ignore_bom = fatal < 0 ? -1 : option(ctx, options, "ignoreBOM");
    if (ignore_bom < 0) return JS_EXCEPTION;
    JSValue obj = new_instance(ctx, new_target, decoder_class);
    if (JS_IsException(obj)) return obj;
    Decoder *d = js_mallocz(ctx, sizeof *d);
    if (!d) {
        JS_FreeValue(ctx, obj);
        return JS_EXCEPTION;
    }
    d->fatal = fatal;
    d->ignore_bom = ignore_bom;
    JS_SetOpaque(obj, d);
    return obj;
}

static JSValue decoder_flag(JSContext *ctx, JSValueConst this_val, int magic) {
    Decoder *d = JS_GetOpaque2(ctx, this_val, decoder_class);
    if (!d) return JS_EXCEPTION;
    return JS_NewBool(ctx, magic ? d->ignore_bom : d->fatal);
}

/* The bytes of a BufferSource (ArrayBuffer, SharedArrayBuffer, typed array or DataView), valid
 * until the next JS call; a detached buffer has none. NULL with an exception for anything else. */
static const uint8_t *buffer_bytes(JSContext *ctx, JSValueConst v, size_t *len) {
    size_t size = 0, offset = 0, length = SIZE_MAX; /* SIZE_MAX: the whole buffer */
    JSValue buf;
    if (JS_GetTypedArrayType(v) >= 0) {
        buf = JS_GetTypedArrayBuffer(ctx, v, &offset, &length, NULL);
        if (JS_IsException(buf)) return NULL;
    } else if (JS_IsDataView(v)) {
        /* No C accessor for a DataView: its getters (frozen intrinsics after lockdown); what they
         * return is bounds-checked against the buffer below. */
        int64_t off = 0, n = 0;
        buf = JS_GetPropertyStr(ctx, v, "buffer");
        JSValue o = JS_GetPropertyStr(ctx, v, "byteOffset"), l = JS_GetPropertyStr(ctx, v, "byteLength");
        int bad = JS_IsException(buf) || JS_ToInt64(ctx, &off, o) || JS_ToInt64(ctx, &n, l) || off < 0 || n < 0;
        JS_FreeValue(ctx, o);
        JS_FreeValue(ctx, l);
        if (bad) {
            JS_FreeValue(ctx, buf);
            if (!JS_HasException(ctx)) JS_ThrowRangeError(ctx, "DataView out of bounds");
            return NULL;
        }
        offset = off;
        length = n;
    } else if (JS_IsArrayBuffer(v)) {
        buf = JS_DupValue(ctx, v);
    } else {
        buf = JS_DupValue(ctx, v); /* a SharedArrayBuffer, or not a BufferSource at all */
        if (!JS_GetArrayBuffer(ctx, &size, buf)) {
            JS_FreeValue(ctx, buf);
            JS_FreeValue(ctx, JS_GetException(ctx));
            JS_ThrowTypeError(ctx, "The provided value is not of type '(ArrayBuffer or ArrayBufferView)'");
            return NULL;
        }
    }
    uint8_t *base = JS_GetArrayBuffer(ctx, &size, buf);
    JS_FreeValue(ctx, buf);
    *len = 0;
    if (!base) {
        JS_FreeValue(ctx, JS_GetException(ctx));
        return (const uint8_t *)"";
    }
    if (length == SIZE_MAX) length = size;
    if (offset > size || length > size - offset) {
        JS_ThrowRangeError(ctx, "DataView out of bounds");
        return NULL;
    }
    *len = length;
    return base + offset;
}

static JSValue decode(JSContext *ctx, JSValueConst this_val, int argc, JSValueConst *argv) {
    Decoder *d = JS_GetOpaque2(ctx, this_val, decoder_class);
    if (!d) return JS_EXCEPTION;
    int stream = option(ctx, argc > 1 ? argv[1] : JS_UNDEFINED, "stream");
    if (stream < 0) return JS_EXCEPTION;
    size_t n = 0;
    const uint8_t *src = (const uint8_t *)"";
    if (argc > 0 && !JS_IsUndefined(argv[0])) {
        src = buffer_bytes(ctx, argv[0], &n);
        if (!src) return JS_EXCEPTION;
    }
    /* A sequence cut by the previous chunk goes first; from here on no JS runs (`src` stays). */
    size_t total = d->npending + n, used;
    uint8_t *in = js_malloc(ctx, total + 1), *out = js_malloc(ctx, 3 * total + 1);
    if (!in || !out) {
        js_free(ctx, in);
        js_free(ctx, out);
        return JS_EXCEPTION;
    }
    memcpy(in, d->pending, d->npending);
    memcpy(in + d->npending, src, n);
    ssize_t len = utf8_repair(in, total, out, d->fatal, stream, &used);
    d->npending = 0;
    if (len >= 0 && used < total) {
        d->npending = total - used;
        memcpy(d->pending, in + used, d->npending);
    }
    js_free(ctx, in);
    if (len < 0) {
        js_free(ctx, out);
        d->bom_seen = false;
        return JS_ThrowTypeError(ctx, "The encoded data was not valid for encoding utf-8");
    }
    size_t skip = 0;
    if (!d->bom_seen && len > 0) {
        if (!d->ignore_bom && len >= 3 && !memcmp(out, "\xEF\xBB\xBF", 3)) skip = 3;
        d->bom_seen = true;
    }
    if (!stream) d->bom_seen = false; /* the next call starts a new stream */
    JSValue s = JS_NewStringLen(ctx, (const char *)out + skip, len - skip);
    js_free(ctx, out);
    return s;
}

static const JSCFunctionListEntry encoder_proto[] = {
    JS_CGETSET_DEF("encoding", encoding, NULL),
    JS_CFUNC_DEF("encode", 0, encode),
    JS_CFUNC_DEF("encodeInto", 2, encode_into),
    JS_PROP_STRING_DEF("[Symbol.toStringTag]", "TextEncoder", JS_PROP_CONFIGURABLE),
};

static const JSCFunctionListEntry decoder_proto[] = {
    JS_CGETSET_DEF("encoding", encoding, NULL),
    JS_CGETSET_MAGIC_DEF("fatal", decoder_flag, NULL, 0),
    JS_CGETSET_MAGIC_DEF("ignoreBOM", decoder_flag, NULL, 1),
    JS_CFUNC_DEF("decode", 0, decode),
    JS_PROP_STRING_DEF("[Symbol.toStringTag]", "TextDecoder", JS_PROP_CONFIGURABLE),
};

static int install(JSContext *ctx, JSClassID *cls, const char *name, JSClassFinalizer *fin, JSCFunction *ctor,
                   const JSCFunctionListEntry *list, int count) {
    JSRuntime *rt = JS_GetRuntime(ctx);
    /* Class ids are counted per runtime, and only this file makes classes: every realm's
     * runtime gives the same id, taken once. */
    JS_NewClassID(rt, cls);
    JSClassDef def = {.class_name = name, .finalizer = fin};
    if (!JS_IsRegisteredClass(rt, *cls) && JS_NewClass(rt, *cls, &def) < 0) return -1;
    JSValue proto = JS_NewObject(ctx);
    if (JS_IsException(proto)) return -1;
    if (JS_SetPropertyFunctionList(ctx, proto, list, count) < 0) {
        JS_FreeValue(ctx, proto);
        return -1;
    }
    JSValue fn = JS_NewCFunction2(ctx, ctor, name, 0, JS_CFUNC_constructor, 0);
    if (JS_IsException(fn)) {
        JS_FreeValue(ctx, proto);
        return -1;
    }
    JS_SetConstructor(ctx, fn, proto);
    JS_SetClassProto(ctx, *cls, proto);
    JSValue global = JS_GetGlobalObject(ctx);
    int r = JS_DefinePropertyValueStr(ctx, global, name, fn, JS_PROP_WRITABLE | JS_PROP_CONFIGURABLE);
    JS_FreeValue(ctx, global);
    return r < 0 ? -1 : 0;
}

int text_codec_install(JSContext *ctx) {
    if (install(ctx, &encoder_class, "TextEncoder", NULL, (JSCFunction *)encoder_new, encoder_proto,
                sizeof encoder_proto / sizeof *encoder_proto) < 0)
        return -1;
    return install(ctx, &decoder_class, "TextDecoder", decoder_finalizer, (JSCFunction *)decoder_new, decoder_proto,
                   sizeof decoder_proto / sizeof *decoder_proto);
}
