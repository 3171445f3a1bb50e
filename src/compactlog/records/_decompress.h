/* Decompression of lz4 and zstd records sections for the bulk read kernel (_decompress.c). */
#ifndef COMPACTLOG_DECOMPRESS_H
#define COMPACTLOG_DECOMPRESS_H
#include <stddef.h>
#include <stdint.h>

/* Where decompressed sections go, one after another: grown as needed, freed by arena_free. */
typedef struct {
    uint8_t *data;
    size_t len, cap;
} arena;

/* Decoder state kept across the sections of one call (made when first needed). */
typedef struct {
    void *lz4, *zstd;
} decoders;

/* Whether sections of codec id `codec` (3 lz4, 4 zstd) can be decompressed here: the library is loaded
 * (the first call loads it; call with the GIL held). */
int can_decompress(int codec);

/* Decompress one section to the end of `a`: its bytes, or -1 when it is not decoded here (a shape the
 * Python codecs must judge, damage, more than `limit` bytes, no memory). Safe without the GIL. */
int64_t decompress_section(int codec, const uint8_t *src, size_t n, arena *a, decoders *d, size_t limit);

void decoders_free(decoders *d);
void arena_free(arena *a);
#endif
