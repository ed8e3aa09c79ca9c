/* Drives the realm heap (runtime/native/arena.c, included whole so its state can be read) the way
 * QuickJS does, at random, and checks after every step what malloc promises: blocks 16-byte
 * aligned, never overlapping, holding what was written until freed (realloc: the old prefix),
 * calloc'ed ones zero, usable sizes at least what was asked, the heap's live count exact. Then
 * images: a copy taken, the heap changed, the copy written back must be that heap again, blocks
 * and contents, and go on working. Then what a script could try against the memory limit:
 * freeing many blocks of one size and asking for another must reuse the memory, not grow the heap.
 *
 *     arena_stress SEED STEPS      exit 0 and "ok ..." on stdout, else a message and exit 1
 *
 * Built and run by tests/runtime/native/test_arena.py. */
#include "arena.c"

#include <stdio.h>

#define SLOTS 1000

typedef struct Slot {
    uint8_t *p;
    size_t n;     /* bytes asked for */
    uint8_t fill; /* every byte of the n */
} Slot;

static Slot slots[SLOTS], saved[SLOTS];
static uint64_t rng;

static uint64_t next_random(void) { /* xorshift64* */
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 2685821657736338717ULL;
}

static void fail(const char *what, size_t step) {
    printf("FAIL at %zu: %s\n", step, what);
    exit(1);
}

/* A size as QuickJS asks: mostly small blocks and 4 KB arenas, some large, a few very large. */
static size_t some_size(void) {
    uint64_t r = next_random() % 1000;
    if (r < 450) return 1 + next_random() % 600;
    if (r < 700) return 3900 + next_random() % 196;
    if (r < 950) return 600 + next_random() % 60000;
    if (r < 995) return 60000 + next_random() % 400000;
    return 400000 + next_random() % (3 << 20);
}

static bool holds(const Slot *s) {
    for (size_t i = 0; i < s->n; i++)
        if (s->p[i] != s->fill) return false;
    return true;
}

static int by_address(const void *a, const void *b) {
    const Slot *x = a, *y = b;
    return x->p < y->p ? -1 : x->p > y->p;
}

static void check_all(size_t step) {
    static Slot sorted[SLOTS];
    size_t k = 0, live = 0;
    for (size_t i = 0; i < SLOTS; i++) {
        if (!slots[i].p) continue;
        if (!holds(&slots[i])) fail("a block lost what was written", step);
        if ((uintptr_t)slots[i].p % 16) fail("a block not 16-byte aligned", step);
        if (a_usable_size(slots[i].p) < slots[i].n) fail("usable size below the size asked", step);
        live += a_usable_size(slots[i].p) + HEADER;
        sorted[k++] = slots[i];
    }
    qsort(sorted, k, sizeof *sorted, by_address);
    for (size_t i = 1; i < k; i++)
        if (sorted[i - 1].p + a_usable_size(sorted[i - 1].p) > sorted[i].p) fail("blocks overlap", step);
    if (live != arena_live()) fail("the live count is wrong", step);
}

static void step_once(size_t step) {
    Slot *s = &slots[next_random() % SLOTS];
    uint8_t fill = (uint8_t)(1 + next_random() % 255);
    if (s->p && next_random() % 3 == 0) { /* realloc: the old prefix kept */
        size_t n = some_size();
        uint8_t *p = a_realloc(NULL, s->p, n);
        if (!p) fail("realloc failed", step);
        size_t kept = n < s->n ? n : s->n;
        for (size_t i = 0; i < kept; i++)
            if (p[i] != s->fill) fail("realloc lost the old contents", step);
        memset(p, s->fill, n);
        s->p = p;
        s->n = n;
    } else if (s->p) {
        if (!holds(s)) fail("a block lost what was written before its free", step);
        a_free(NULL, s->p);
        s->p = NULL;
    } else {
        size_t n = some_size();
        bool zero = next_random() % 2;
        uint8_t *p = zero ? a_calloc(NULL, 1, n) : a_malloc(NULL, n);
        if (!p) fail("allocation failed", step);
        if (zero)
            for (size_t i = 0; i < n; i++)
                if (p[i]) fail("calloc gave memory that is not zero", step);
        memset(p, fill, n);
        *s = (Slot){p, n, fill};
    }
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    rng = 2 * strtoull(argv[1], NULL, 10) + 1;
    size_t steps = strtoull(argv[2], NULL, 10);
    if (!arena_fits(64 << 20)) fail("no arena reserved", 0);
    arena_reset();

    /* 1. random use, with images taken and written back */
    void *image = NULL;
    size_t image_len = 0;
    for (size_t step = 1; step <= steps; step++) {
        step_once(step);
        if (step % 1999 == 0) check_all(step);
        if (step % 5003 == 0) { /* an image of the heap now */
            arena_drop_image(image, image_len);
            image = arena_save(&image_len);
            if (!image) fail("no memory for an image", step);
            memcpy(saved, slots, sizeof slots);
        }
        if (image && step % 5003 == 2500) { /* the heap changed since: back to the image */
            check_all(step);
            arena_release_above(image_len);
            arena_restore(image, image_len);
            memcpy(slots, saved, sizeof slots);
            check_all(step);
        }
    }
    check_all(steps);
    size_t live_end = arena_live(), top_end = HEAP->top;
    arena_drop_image(image, image_len);

    /* 2. a realm's end, then an empty heap */
    arena_reset();
    memset(slots, 0, sizeof slots);
    if (arena_live() != 0 || HEAP->top != HEAP_START) fail("reset left something", 0);

    /* 3. one size freed, another asked for: each round's blocks are freed below a small block
     * that stays (so they cannot just lower the top), and the next round, of another size, must
     * take that memory again: the heap spans the biggest round, not the sum of them. */
    static const size_t sizes[] = {600, 1200, 2500, 4000, 5000, 10000, 40000, 100000, 700, 3000};
    size_t biggest = 0;
    for (size_t round = 0; round < sizeof sizes / sizeof *sizes; round++) {
        size_t count = (8 << 20) / sizes[round];
        if (count > SLOTS - 16) count = SLOTS - 16;
        for (size_t i = 0; i < count; i++) {
            slots[i].p = a_malloc(NULL, sizes[round]);
            if (!slots[i].p) fail("allocation failed", round);
            memset(slots[i].p, 1, sizes[round]);
        }
        if (count * sizes[round] > biggest) biggest = count * sizes[round];
        slots[SLOTS - 1 - round].p = a_malloc(NULL, 64); /* stays */
        for (size_t i = 0; i < count; i++) a_free(NULL, slots[i].p);
        if (HEAP->top > 2 * biggest + (1 << 20)) fail("freed memory was not reused for another size", round);
    }
    for (size_t round = 0; round < sizeof sizes / sizeof *sizes; round++) a_free(NULL, slots[SLOTS - 1 - round].p);
    if (HEAP->top != HEAP_START) fail("the top did not fall back with everything freed", 0);
    if (arena_live() != 0) fail("the live count is not zero with nothing in use", 0);
    printf("ok seed=%s steps=%zu live=%zu top=%zu\n", argv[1], steps, live_end, top_end);
    return 0;
}
