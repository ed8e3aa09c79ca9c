/* The realm heap (realm.c "realm images"): one stretch of address space, reserved once per
 * worker, from which a realm's runtime takes every block (QuickJS's own 4 KB arenas and its large
 * blocks). The allocator keeps its state at the start of the stretch, so the bytes [base, top)
 * are the whole heap, state included: copied once when a realm is ready, copied back to give the
 * next run the same realm, every pointer still valid because the stretch never moves.
 *
 * Blocks carry a 16-byte header (usable size, flags), so payloads are 16-byte aligned as malloc's.
 * Up to ARENA_SMALL_MAX bytes a block has a size class (16-byte steps to 1 KiB, then 8 classes
 * per doubling) with a free list of its own; larger blocks have their exact size, are reused first
 * fit from an address-ordered free list, merge with free neighbours, and give their pages back
 * when big. New blocks come from the top, which falls again when the last block is freed. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "worker.h"

/* Address space the heap may span (reserved PROT_NONE: no memory until used), tried in turn
 * where an address-space limit (ulimit -v) refuses the first. The most is 4x the largest memory
 * limit (limits.HARD_MAX_MEMORY_BYTES, 1 GiB): room for blocks that free lists of another size
 * class hold. A realm whose limit is above ARENA_LIMIT_SHARE of what was reserved does not use
 * the arena (realm.c), so that running out of address space never comes before its limit. */
static const size_t ARENA_RESERVES[] = {(size_t)4 << 30, (size_t)1 << 30, (size_t)256 << 20};
#define ARENA_LIMIT_SHARE 4
/* Memory made usable at a time as the top rises: one mprotect per step. */
#define ARENA_COMMIT_STEP ((size_t)1 << 20)
/* Largest block with a size class; larger ones are sized exactly (first fit, merged). */
#define ARENA_SMALL_MAX ((size_t)64 << 10)
/* A freed large block this big gives its pages back (madvise) at once, not when the realm ends. */
#define ARENA_RELEASE_MIN ((size_t)256 << 10)
/* Size classes: 64 of 16-byte steps to 1 KiB, then 8 per doubling to ARENA_SMALL_MAX. */
#define ARENA_CLASSES (64 + 6 * 8 + 1)

#define HEADER 16
#define FLAG_LARGE ((size_t)1)
#define FLAG_FREE ((size_t)2)

typedef struct Header {
    size_t size;  /* usable bytes after the header */
    size_t flags; /* FLAG_LARGE, FLAG_FREE */
} Header;

typedef struct Large { /* the payload of a free large block: its place in the free list */
    struct Large *prev, *next;
} Large;

typedef struct Heap { /* at the arena's base, copied with the blocks */
    size_t top;   /* offset of the first byte never handed out (or given back) */
    size_t clean; /* offset from which every byte is known to be zero */
    size_t live;  /* bytes of the blocks in use, headers included */
    void *small[ARENA_CLASSES]; /* free lists, linked through the payloads' first word */
    Large *large; /* free large blocks, by address */
} Heap;

static uint8_t *base;    /* NULL until reserved; MAP_FAILED when that failed */
static size_t reserved;  /* bytes of address space at base */
static size_t committed; /* bytes from base made usable (PROT_READ | PROT_WRITE) */
static size_t touched;   /* highest offset written since the pages were last given back */
static size_t page;

#define HEAP ((Heap *)base)
#define HEAP_START ((sizeof(Heap) + 15) & ~(size_t)15)

static size_t round_up(size_t n, size_t to) {
    return (n + to - 1) / to * to;
}

/* The class of a request of n bytes (1..ARENA_SMALL_MAX) and its usable size. */
static unsigned size_class(size_t n, size_t *size) {
    if (n <= 1024) {
        size_t k = (n + 15) >> 4;
        if (k == 0) k = 1;
        *size = k << 4;
        return (unsigned)k - 1;
    }
    unsigned b = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^b < n <= 2^(b+1) */
    size_t step = ((size_t)1 << b) >> 3;
    size_t k = (n - ((size_t)1 << b) + step - 1) / step; /* 1..8 */
    *size = ((size_t)1 << b) + k * step;
    return 64 + (b - 10) * 8 + (unsigned)k - 1;
}

static void release(size_t from, size_t to) { /* give back the whole pages of [from, to) */
    from = round_up(from, page);
    to = to / page * page;
    if (to > from) madvise(base + from, to - from, MADV_DONTNEED);
}

bool arena_fits(size_t memory_limit) {
    if (!base) {
        page = (size_t)sysconf(_SC_PAGESIZE);
        base = MAP_FAILED;
        for (size_t i = 0; i < sizeof ARENA_RESERVES / sizeof *ARENA_RESERVES && base == MAP_FAILED; i++) {
            reserved = ARENA_RESERVES[i];
            base = mmap(NULL, reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        }
    }
    return base != MAP_FAILED && memory_limit <= reserved / ARENA_LIMIT_SHARE;
}

/* Room up to offset `end` (committed as the top rises); false past the reservation. */
static bool reach(size_t end) {
    if (end > reserved) return false;
    if (end > committed) {
        size_t to = round_up(end, ARENA_COMMIT_STEP);
        if (to > reserved) to = reserved;
        if (mprotect(base + committed, to - committed, PROT_READ | PROT_WRITE)) return false;
        committed = to;
    }
    if (end > touched) touched = end;
    return true;
}

void arena_reset(void) {
    reach(HEAP_START);
    release(0, round_up(touched, page)); /* everything, the state's page included: zero again */
    touched = HEAP_START;
    memset(base, 0, sizeof(Heap));
    HEAP->top = HEAP->clean = HEAP_START;
}

/* A new block of `size` usable bytes at the top; NULL past the reservation. */
static Header *from_top(size_t size, bool zero) {
    size_t at = HEAP->top;
    if (size > reserved || !reach(at + HEADER + size)) return NULL;
    HEAP->top = at + HEADER + size;
    Header *h = (Header *)(base + at);
    if (zero && HEAP->clean > at + HEADER) { /* what a fallen top left below `clean` */
        size_t dirty = HEAP->clean - at - HEADER;
        memset(h + 1, 0, dirty < size ? dirty : size);
    }
    if (HEAP->clean < HEAP->top) HEAP->clean = HEAP->top;
    h->size = size;
    return h;
}

static void large_unlink(Large *l) {
    if (l->prev) l->prev->next = l->next;
    else HEAP->large = l->next;
    if (l->next) l->next->prev = l->prev;
}

/* `l` takes the place of `old` in the free list (same neighbours: nothing lies between them). */
static void large_replace(Large *old, Large *l) {
    l->prev = old->prev;
    l->next = old->next;
    if (l->prev) l->prev->next = l;
    else HEAP->large = l;
    if (l->next) l->next->prev = l;
}

static Header *header_of(const void *ptr) {
    return (Header *)((uint8_t *)ptr - HEADER);
}

static void *alloc(size_t n, bool zero) {
    Header *h;
    if (n <= ARENA_SMALL_MAX) {
        size_t size;
        unsigned c = size_class(n, &size);
        void *p = HEAP->small[c];
        if (p) {
            HEAP->small[c] = *(void **)p;
            h = header_of(p);
            if (zero) memset(p, 0, size);
        } else if (!(h = from_top(size, zero))) {
            return NULL;
        }
        h->flags = 0;
    } else {
        size_t size = round_up(n, 16);
        if (size < n) return NULL;
        Large *l = HEAP->large;
        while (l && header_of(l)->size < size) l = l->next;
        if (l) {
            h = header_of(l);
            if (h->size >= size + HEADER + ARENA_SMALL_MAX) { /* split: the rest stays free */
                Header *rest = (Header *)((uint8_t *)(h + 1) + size);
                rest->size = h->size - size - HEADER;
                rest->flags = FLAG_LARGE | FLAG_FREE;
                large_replace(l, (Large *)(rest + 1));
                h->size = size;
            } else {
                large_unlink(l);
            }
            if (zero) memset(h + 1, 0, h->size);
        } else if (!(h = from_top(size, zero))) {
            return NULL;
        }
        h->flags = FLAG_LARGE;
    }
    HEAP->live += HEADER + h->size;
    return h + 1;
}

static void large_free(Header *h) {
    h->flags = FLAG_LARGE | FLAG_FREE;
    Large *l = (Large *)(h + 1), *prev = NULL, *next = HEAP->large;
    while (next && next < l) prev = next, next = next->next;
    l->prev = prev;
    l->next = next;
    if (prev) prev->next = l;
    else HEAP->large = l;
    if (next) next->prev = l;
    /* merged with the free neighbours it touches */
    if (next && (uint8_t *)l + h->size == (uint8_t *)header_of(next)) {
        h->size += HEADER + header_of(next)->size;
        large_unlink(next);
    }
    if (prev && (uint8_t *)prev + header_of(prev)->size == (uint8_t *)h) {
        header_of(prev)->size += HEADER + h->size;
        large_unlink(l);
        h = header_of(prev);
        l = prev;
    }
    size_t start = (size_t)((uint8_t *)h - base), end = start + HEADER + h->size;
    if (end == HEAP->top) { /* the last block: the top falls */
        large_unlink(l);
        HEAP->top = start;
        if (HEAP->clean - start >= ARENA_RELEASE_MIN) {
            release(start, round_up(HEAP->clean, page)); /* past `clean` is zero already */
            HEAP->clean = round_up(start, page);
        }
    } else if (h->size >= ARENA_RELEASE_MIN) {
        release(start + HEADER + sizeof(Large), end);
    }
}

static void free_block(void *ptr) {
    Header *h = header_of(ptr);
    HEAP->live -= HEADER + h->size;
    if (h->flags & FLAG_LARGE) {
        large_free(h);
        return;
    }
    size_t size;
    unsigned c = size_class(h->size, &size);
    *(void **)ptr = HEAP->small[c];
    HEAP->small[c] = ptr;
}

/* ---- JSMallocFunctions (the opaque is unused: there is one heap per worker) --------------- */
static void *a_malloc(void *opaque, size_t size) {
    return alloc(size ? size : 1, false);
}

static void *a_calloc(void *opaque, size_t count, size_t size) {
    if (size && count > SIZE_MAX / size) return NULL;
    size_t total = count * size;
    return alloc(total ? total : 1, true);
}

static void a_free(void *opaque, void *ptr) {
    if (ptr) free_block(ptr);
}

static void *a_realloc(void *opaque, void *ptr, size_t size) {
    if (!ptr) return a_malloc(opaque, size);
    Header *h = header_of(ptr);
    if (size <= h->size) return ptr; /* keeps its block (usable size unchanged) */
    size_t at = (size_t)((uint8_t *)ptr - base), grown = round_up(size, 16);
    if (h->flags & FLAG_LARGE && at + h->size == HEAP->top && grown >= size && reach(at + grown)) {
        HEAP->top = at + grown; /* the last block grows in place */
        if (HEAP->clean < HEAP->top) HEAP->clean = HEAP->top;
        HEAP->live += grown - h->size;
        h->size = grown;
        return ptr;
    }
    void *p = alloc(size, false);
    if (!p) return NULL; /* the old block stays */
    memcpy(p, ptr, h->size);
    free_block(ptr);
    return p;
}

static size_t a_usable_size(const void *ptr) {
    return ptr ? header_of(ptr)->size : 0;
}

const JSMallocFunctions arena_memory = {a_calloc, a_malloc, a_free, a_realloc, a_usable_size};

size_t arena_live(void) {
    return HEAP->live;
}

/* ---- images --------------------------------------------------------------------------------- */
/* The heap's whole pages (its state, its blocks, and what lies above its top in its last page,
 * so that the state's `clean` holds of the copy too). */
void *arena_save(size_t *len) {
    *len = round_up(HEAP->top, page);
    void *image = malloc(*len);
    if (image) memcpy(image, base, *len);
    return image;
}

/* The heap as `image` (arena_save's) left it; every page above it given back (zero again). */
void arena_restore(const void *image, size_t len) {
    memcpy(base, image, len);
    release(len, round_up(touched, page)); /* past `touched` nothing was written */
    touched = len;
}

/* A realm ended: the pages above `keep` (the image's length, 0 without one) go back now, so an
 * idle worker holds no more than its image. */
void arena_release_above(size_t keep) {
    release(keep, round_up(touched, page));
}
