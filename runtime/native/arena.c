/* The realm heap (realm.c "realm images"): one stretch of address space, reserved once per
 * worker, from which a realm's runtime takes every block (QuickJS's own 4 KB arenas and its large
 * blocks). The allocator keeps its state at the start of the stretch, so the bytes below its top
 * are the whole heap, state included: copied once when a realm is ready, copied back to give the
 * next run the same realm, every pointer still valid because the stretch never moves.
 *
 * The allocator is a boundary-tag one, as malloc's: a chunk is a 16-byte header (the previous
 * chunk's size when that one is free; this one's size and whether it and the previous one are in
 * use) and its payload, 16-byte aligned. A freed chunk merges with free neighbours, so freed
 * memory serves a request of any size (a script cannot make the heap grow past its memory limit
 * by freeing one size and asking for another), and waits in a bin by size: 16-byte steps to
 * 1 KiB, then 8 bins per doubling; a request takes the first chunk that fits in its bin, else one
 * of the next bin that has any, else new memory at the top. A free chunk that ends at the top
 * lowers it; big free chunks give their pages back at once. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "worker.h"

/* Address space the heap may span (reserved PROT_NONE: no memory until used), tried in turn
 * where an address-space limit (ulimit -v) refuses the first. The most is 4x the largest memory
 * limit (limits.HARD_MAX_MEMORY_BYTES, 1 GiB). A realm whose limit is above ARENA_LIMIT_SHARE of
 * what was reserved does not use the arena (realm.c), so that the address space cannot run out
 * before its limit: what the heap spans is what is in use, what waits in bins (merged, reusable
 * by any request) and what splitting leaves. */
static const size_t ARENA_RESERVES[] = {(size_t)4 << 30, (size_t)1 << 30, (size_t)256 << 20};
#define ARENA_LIMIT_SHARE 4
/* Memory made usable at a time as the top rises: one mprotect per step. */
#define ARENA_COMMIT_STEP ((size_t)1 << 20)
/* A free chunk this big gives its pages back (madvise) at once, not when the realm ends. */
#define ARENA_RELEASE_MIN ((size_t)256 << 10)

#define HEADER 16      /* prev_size, head */
#define MIN_CHUNK 32   /* a free chunk holds its bin links after its header */
#define C_INUSE ((size_t)1)
#define P_INUSE ((size_t)2)
#define NBINS 256 /* 65 exact bins to 1 KiB, then 8 per doubling to 2^32 */

typedef struct Chunk {
    size_t prev_size; /* the previous chunk's size, when it is free */
    size_t head;      /* this chunk's size (a multiple of 16) | C_INUSE | P_INUSE */
    struct Chunk *next, *prev; /* its bin's list, when free */
} Chunk;

typedef struct Heap { /* at the arena's base, copied with the chunks */
    size_t top;   /* offset of the first byte no chunk holds */
    size_t clean; /* offset from which every byte is zero (>= top): the pages above it were
                   * never written, or were given back */
    size_t live;  /* bytes of the chunks in use */
    Chunk *bins[NBINS];
    uint64_t nonempty[NBINS / 64];
} Heap;

static uint8_t *base;    /* NULL until reserved; MAP_FAILED when that failed */
static size_t reserved;  /* bytes of address space at base */
static size_t committed; /* bytes from base made usable (PROT_READ | PROT_WRITE) */
static size_t page;

#define HEAP ((Heap *)base)
#define HEAP_START ((sizeof(Heap) + 15) & ~(size_t)15)
#define SIZE(c) ((c)->head & ~(size_t)15)
#define OFFSET(c) ((size_t)((uint8_t *)(c) - base))
#define NEXT(c) ((Chunk *)((uint8_t *)(c) + SIZE(c)))

static size_t round_up(size_t n, size_t to) {
    return (n + to - 1) / to * to;
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
    return true;
}

void arena_reset(void) {
    reach(HEAP_START);
    release(0, round_up(HEAP->clean, page)); /* everything, the state's page included */
    memset(base, 0, sizeof(Heap));
    HEAP->top = HEAP->clean = HEAP_START;
}

/* ---- bins ------------------------------------------------------------------------------------ */
static unsigned bin_of(size_t size) { /* sizes of bin i are below those of bin i + 1 */
    if (size <= 1024) return (unsigned)(size >> 4);
    unsigned b = 63 - (unsigned)__builtin_clzll((unsigned long long)size); /* 2^b <= size */
    unsigned i = 64 + (b - 10) * 8 + (unsigned)((size >> (b - 3)) & 7);
    return i < NBINS ? i : NBINS - 1;
}

static void bin_add(Chunk *c) {
    unsigned i = bin_of(SIZE(c));
    c->prev = NULL;
    c->next = HEAP->bins[i];
    if (c->next) c->next->prev = c;
    HEAP->bins[i] = c;
    HEAP->nonempty[i / 64] |= (uint64_t)1 << (i % 64);
}

static void bin_remove(Chunk *c) {
    unsigned i = bin_of(SIZE(c));
    if (c->prev) c->prev->next = c->next;
    else HEAP->bins[i] = c->next;
    if (c->next) c->next->prev = c->prev;
    if (!HEAP->bins[i]) HEAP->nonempty[i / 64] &= ~((uint64_t)1 << (i % 64));
}

/* The first free chunk of at least `size` bytes, or NULL. */
static Chunk *find(size_t size) {
    unsigned i = bin_of(size);
    for (Chunk *c = HEAP->bins[i]; c; c = c->next)
        if (SIZE(c) >= size) return c;
    for (unsigned w = (i + 1) / 64; w < NBINS / 64; w++) { /* any chunk of a later bin fits */
        uint64_t bits = HEAP->nonempty[w];
        if (w == (i + 1) / 64) bits &= ~(uint64_t)0 << ((i + 1) % 64);
        if (bits) return HEAP->bins[w * 64 + (unsigned)__builtin_ctzll(bits)];
    }
    return NULL;
}

/* Chunk `c` (out of any bin) becomes `size` bytes in use; what is left over, if a chunk's worth,
 * goes back free. */
static void take(Chunk *c, size_t size) {
    size_t have = SIZE(c), prev_in_use = c->head & P_INUSE;
    if (have - size >= MIN_CHUNK) {
        c->head = size | C_INUSE | prev_in_use;
        Chunk *rest = NEXT(c);
        rest->head = (have - size) | P_INUSE;
        NEXT(rest)->prev_size = have - size; /* a chunk in use: free ones never touch the top */
        bin_add(rest);
    } else {
        c->head = have | C_INUSE | prev_in_use;
        NEXT(c)->head |= P_INUSE;
    }
}

/* ---- chunks ---------------------------------------------------------------------------------- */
static size_t chunk_size(size_t n) { /* 0: too big */
    if (n > reserved) return 0;
    size_t size = round_up(n + HEADER, 16);
    return size < MIN_CHUNK ? MIN_CHUNK : size;
}

/* A new chunk of `size` bytes at the top (the chunk below it, if any, is in use). */
static Chunk *from_top(size_t size, bool zero) {
    size_t at = HEAP->top;
    if (!reach(at + size)) return NULL;
    Chunk *c = (Chunk *)(base + at);
    if (zero && HEAP->clean > at + HEADER) { /* what a fallen top left below `clean` */
        size_t dirty = HEAP->clean - at - HEADER;
        memset((uint8_t *)c + HEADER, 0, dirty < size - HEADER ? dirty : size - HEADER);
    }
    HEAP->top = at + size;
    if (HEAP->clean < HEAP->top) HEAP->clean = HEAP->top;
    c->head = size | C_INUSE | P_INUSE;
    return c;
}

static void *alloc(size_t n, bool zero) {
    size_t size = chunk_size(n);
    if (!size) return NULL;
    Chunk *c = find(size);
    if (c) {
        bin_remove(c);
        take(c, size);
        if (zero) memset((uint8_t *)c + HEADER, 0, SIZE(c) - HEADER);
    } else if (!(c = from_top(size, zero))) {
        return NULL;
    }
    HEAP->live += SIZE(c);
    return (uint8_t *)c + HEADER;
}

static void free_chunk(Chunk *c) {
    size_t size = SIZE(c);
    HEAP->live -= size;
    if (!(c->head & P_INUSE)) { /* merged with the free chunk before it */
        Chunk *p = (Chunk *)((uint8_t *)c - c->prev_size);
        bin_remove(p);
        size += SIZE(p);
        c = p;
    }
    Chunk *n = (Chunk *)((uint8_t *)c + size);
    if (OFFSET(n) == HEAP->top) { /* the last chunk: the top falls */
        HEAP->top = OFFSET(c);
        if (HEAP->clean - HEAP->top >= ARENA_RELEASE_MIN) {
            release(HEAP->top, round_up(HEAP->clean, page)); /* past `clean` is zero already */
            HEAP->clean = round_up(HEAP->top, page);
        }
        return;
    }
    if (!(n->head & C_INUSE)) { /* and with the free one after it */
        bin_remove(n);
        size += SIZE(n);
        n = (Chunk *)((uint8_t *)c + size);
    }
    c->head = size | P_INUSE; /* free chunks never touch: the one before is in use */
    n->prev_size = size;
    n->head &= ~P_INUSE;
    bin_add(c);
    if (size >= ARENA_RELEASE_MIN) release(OFFSET(c) + sizeof(Chunk), OFFSET(n));
}

/* ---- JSMallocFunctions (the opaque is unused: there is one heap per worker) --------------- */
static void *a_malloc(void *opaque, size_t size) {
    return alloc(size, false);
}

static void *a_calloc(void *opaque, size_t count, size_t size) {
    if (size && count > SIZE_MAX / size) return NULL;
    return alloc(count * size, true);
}

static void a_free(void *opaque, void *ptr) {
    if (ptr) free_chunk((Chunk *)((uint8_t *)ptr - HEADER));
}

static void *a_realloc(void *opaque, void *ptr, size_t n) {
    if (!ptr) return alloc(n, false);
    Chunk *c = (Chunk *)((uint8_t *)ptr - HEADER);
    size_t have = SIZE(c), size = chunk_size(n);
    if (!size) return NULL;
    if (size <= have) return ptr; /* keeps its chunk (usable size unchanged) */
    Chunk *next = NEXT(c);
    if (OFFSET(next) == HEAP->top) { /* the last chunk grows in place */
        if (reach(OFFSET(c) + size)) {
            HEAP->top = OFFSET(c) + size;
            if (HEAP->clean < HEAP->top) HEAP->clean = HEAP->top;
            c->head = size | (c->head & 15);
            HEAP->live += size - have;
            return ptr;
        }
    } else if (!(next->head & C_INUSE) && have + SIZE(next) >= size) { /* or into the free next */
        bin_remove(next);
        c->head = (have + SIZE(next)) | (c->head & P_INUSE);
        take(c, size);
        HEAP->live += SIZE(c) - have;
        return ptr;
    }
    void *p = alloc(n, false);
    if (!p) return NULL; /* the old chunk stays */
    memcpy(p, ptr, have - HEADER);
    free_chunk(c);
    return p;
}

static size_t a_usable_size(const void *ptr) {
    return ptr ? SIZE((const Chunk *)((const uint8_t *)ptr - HEADER)) - HEADER : 0;
}

const JSMallocFunctions arena_memory = {a_calloc, a_malloc, a_free, a_realloc, a_usable_size};

size_t arena_live(void) {
    return HEAP->live;
}

/* ---- images --------------------------------------------------------------------------------- */
/* The heap's whole pages (its state, its chunks, and what lies above its top in its last page,
 * so that the state's `clean` holds of the copy too), in pages of their own made read-only: a
 * realm that corrupted memory through an engine bug still could not change the next runs'. */
void *arena_save(size_t *len) {
    *len = round_up(HEAP->top, page);
    void *image = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (image == MAP_FAILED) return NULL;
    memcpy(image, base, *len);
    mprotect(image, *len, PROT_READ);
    return image;
}

void arena_drop_image(void *image, size_t len) {
    if (image) munmap(image, len);
}

/* A realm ended: the pages above `keep` (a page multiple: the image's length, 0 without one) go
 * back now, so an idle worker holds no more than its image. */
void arena_release_above(size_t keep) {
    release(keep, round_up(HEAP->clean, page));
    if (HEAP->clean > keep) HEAP->clean = keep; /* the heap is dead: only what `clean` says holds */
}

/* The heap as `image` (arena_save's) left it; the pages above it given back (zero again), which
 * makes the copy's `clean` true. */
void arena_restore(const void *image, size_t len) {
    arena_release_above(len);
    memcpy(base, image, len);
}
