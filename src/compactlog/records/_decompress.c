/*
 * lz4 and zstd records sections decompressed for the bulk read kernel (decode_columns), with the
 * system's liblz4 and libzstd, loaded when first needed: building needs neither library's headers (the
 * few functions used are declared here, as their stable ABI has them), and where a library is missing
 * compressed runs are read the general way.
 *
 * Only the shape Kafka writes is decoded here: an lz4 frame of independent blocks (bytes after its end
 * are not read, as the Python codec reads one frame), or zstd frames back to back with nothing else
 * between them. Anything else, and any error, answers -1: the caller leaves the run to the Python codecs
 * (records/codecs.py), which decode it or name what is wrong.
 *
 * The system's library may be another version than the one the Python codec bundles, and versions
 * differ in what damaged input they notice (zstd 1.5.6 refuses reserved bits 1.5.4 ignores). So only
 * batches whose CRC was verified are decompressed here (the caller's rule, see decode_columns): bytes
 * as their producer wrote them, which every version decodes alike; a damaged batch never gets here.
 */
#define _GNU_SOURCE
#include "_decompress.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#define LZ4_CODEC 3
#define ZSTD_CODEC 4
#define LZ4_MAGIC 0x184D2204u
#define LZ4_INDEPENDENT_BLOCKS 0x20
#define LZ4F_VERSION 100
#define ZSTD_MAGIC 0xFD2FB528u
#define STEP (64 * 1024) /* the least room offered a decoder at a time */

typedef struct {
    const void *src;
    size_t size, pos;
} zstd_in;

typedef struct {
    void *dst;
    size_t size, pos;
} zstd_out;

static struct {
    int tried_lz4, tried_zstd;
    size_t (*lz4_create)(void **, unsigned);
    size_t (*lz4_free)(void *);
    size_t (*lz4_decompress)(void *, void *, size_t *, const void *, size_t *, const void *);
    unsigned (*lz4_is_error)(size_t);
    int (*lz4_version)(void);
    void *(*zstd_create)(void);
    size_t (*zstd_free)(void *);
    size_t (*zstd_decompress)(void *, zstd_out *, zstd_in *);
    unsigned (*zstd_is_error)(size_t);
    size_t (*zstd_frame_size)(const void *, size_t);
    unsigned (*zstd_version)(void);
} lib;

/* The oldest libraries used: zstd's decompression context is its stream since 1.3, and 1.4 is the
 * oldest a supported distribution ships; lz4's frame API is stable since 1.8. */
#define MIN_LZ4_VERSION 10800
#define MIN_ZSTD_VERSION 10400

/* Each symbol of `names` into the pointer at the same place of `slots`; all or none. */
static int bind(const char *soname, int n, const char *const *names, void **const *slots) {
    void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!h) return 0;
    for (int i = 0; i < n; i++) {
        void *f = dlsym(h, names[i]);
        if (!f) {
            for (int j = 0; j < i; j++) *slots[j] = NULL;
            dlclose(h);
            return 0;
        }
        *slots[i] = f;
    }
    return 1; /* the library stays loaded for the life of the process */
}

int can_decompress(int codec) {
    if (codec == LZ4_CODEC) {
        if (!lib.tried_lz4) {
            lib.tried_lz4 = 1;
            static const char *const names[] = {"LZ4F_createDecompressionContext", "LZ4F_freeDecompressionContext",
                                                "LZ4F_decompress", "LZ4F_isError", "LZ4_versionNumber"};
            void **const slots[] = {(void **)&lib.lz4_create, (void **)&lib.lz4_free, (void **)&lib.lz4_decompress,
                                    (void **)&lib.lz4_is_error, (void **)&lib.lz4_version};
            if (bind("liblz4.so.1", 5, names, slots) && lib.lz4_version() < MIN_LZ4_VERSION) lib.lz4_decompress = NULL;
        }
        return lib.lz4_decompress != NULL;
    }
    if (codec == ZSTD_CODEC) {
        if (!lib.tried_zstd) {
            lib.tried_zstd = 1;
            static const char *const names[] = {"ZSTD_createDCtx", "ZSTD_freeDCtx", "ZSTD_decompressStream",
                                                "ZSTD_isError", "ZSTD_findFrameCompressedSize", "ZSTD_versionNumber"};
            void **const slots[] = {(void **)&lib.zstd_create, (void **)&lib.zstd_free, (void **)&lib.zstd_decompress,
                                    (void **)&lib.zstd_is_error, (void **)&lib.zstd_frame_size, (void **)&lib.zstd_version};
            if (bind("libzstd.so.1", 6, names, slots) && lib.zstd_version() < MIN_ZSTD_VERSION) lib.zstd_decompress = NULL;
        }
        return lib.zstd_decompress != NULL;
    }
    return 0;
}

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Room for at least STEP more bytes at the end of the arena. */
static int reserve(arena *a) {
    if (a->cap - a->len >= STEP) return 0;
    size_t cap = a->cap ? a->cap * 2 : 4 * STEP;
    while (cap - a->len < STEP) cap *= 2;
    uint8_t *p = realloc(a->data, cap);
    if (!p) return -1;
    a->data = p;
    a->cap = cap;
    return 0;
}

/* The room offered next: what the arena has, but never past limit + 1 bytes of this section (one byte
 * more than allowed is how an oversized section is seen). */
static size_t room(const arena *a, size_t start, size_t limit) {
    size_t used = a->len - start, left = limit + 1 - used;
    size_t free_ = a->cap - a->len;
    return free_ < left ? free_ : left;
}

static int64_t lz4_section(const uint8_t *src, size_t n, arena *a, decoders *d, size_t limit) {
    if (n < 7 || le32(src) != LZ4_MAGIC || !(src[4] & LZ4_INDEPENDENT_BLOCKS)) return -1;
    if (!d->lz4 && lib.lz4_is_error(lib.lz4_create(&d->lz4, LZ4F_VERSION))) {
        d->lz4 = NULL;
        return -1;
    }
    size_t start = a->len, at = 0;
    for (;;) {
        if (reserve(a) < 0) break;
        size_t offered = room(a, start, limit), out = offered, in = n - at;
        size_t r = lib.lz4_decompress(d->lz4, a->data + a->len, &out, src + at, &in, NULL);
        if (lib.lz4_is_error(r)) break;
        a->len += out;
        at += in;
        if (a->len - start > limit) break;
        if (r == 0) return (int64_t)(a->len - start); /* the frame's end mark: what follows is not read */
        if (at == n && out < offered) break;         /* wants input that is not there: truncated */
    }
    lib.lz4_free(d->lz4); /* a context left mid-frame is not reused */
    d->lz4 = NULL;
    a->len = start;
    return -1;
}

static int64_t zstd_section(const uint8_t *src, size_t n, arena *a, decoders *d, size_t limit) {
    for (size_t at = 0; at < n;) { /* zstd frames only, back to back (no skippable frame, no gap) */
        size_t size;
        if (n - at < 4 || le32(src + at) != ZSTD_MAGIC) return -1;
        size = lib.zstd_frame_size(src + at, n - at);
        if (lib.zstd_is_error(size) || size == 0) return -1;
        at += size;
    }
    if (!d->zstd && !(d->zstd = lib.zstd_create())) return -1;
    size_t start = a->len;
    zstd_in in = {src, n, 0};
    for (;;) {
        if (reserve(a) < 0) break;
        zstd_out out = {a->data + a->len, room(a, start, limit), 0};
        size_t r = lib.zstd_decompress(d->zstd, &out, &in);
        if (lib.zstd_is_error(r)) break;
        a->len += out.pos;
        if (a->len - start > limit) break;
        if (r == 0 && in.pos == in.size) return (int64_t)(a->len - start); /* every frame decoded and flushed */
        if (in.pos == in.size && out.pos < out.size) break;               /* a frame cut short */
    }
    lib.zstd_free(d->zstd);
    d->zstd = NULL;
    a->len = start;
    return -1;
}

int64_t decompress_section(int codec, const uint8_t *src, size_t n, arena *a, decoders *d, size_t limit) {
    if (codec == LZ4_CODEC && lib.lz4_decompress) return lz4_section(src, n, a, d, limit);
    if (codec == ZSTD_CODEC && lib.zstd_decompress) return zstd_section(src, n, a, d, limit);
    return -1;
}

void decoders_free(decoders *d) {
    if (d->lz4) lib.lz4_free(d->lz4);
    if (d->zstd) lib.zstd_free(d->zstd);
    d->lz4 = d->zstd = NULL;
}

void arena_free(arena *a) {
    free(a->data);
    a->data = NULL;
    a->len = a->cap = 0;
}
