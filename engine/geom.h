/* geom.h - shard geometry, pure arithmetic: where each float of a unit lies when N ranks
 * share it. A unit is padded to a multiple of N x ZT_SHARD_ALIGN floats and cut into pieces
 * (the ZeRO bucket: one collective each; one piece unless the unit is larger); each piece
 * is split into N equal slices, and rank r's shard is its slice of every piece, in order.
 * No engine, no MPI, no allocation beyond zt_geometry's two arrays. */
#ifndef ZT_ENGINE_GEOM_H
#define ZT_ENGINE_GEOM_H

#include <stddef.h>

#define ZT_SHARD_ALIGN 1024 /* floats: 4 KiB, O_DIRECT-aligned, whole 8-bit Adam blocks */

struct zt_layout;

/* One contiguous run of a rank's shard of a unit: floats [off, off + len) of the padded
 * unit buffer are floats [soff, soff + len) of the rank's shard buffer. */
typedef struct zt_seg {
    size_t off, len, soff;
} zt_seg;

/* one unit: padded floats, floats per piece (the last may be shorter), ranks */
typedef struct zt_geom {
    size_t padded, piece, N;
} zt_geom;

/* Floats per piece of a unit of numel floats over N ranks with the given bucket (0 = whole
 * units); *padded = the unit padded to N x ZT_SHARD_ALIGN. */
size_t zt_geom_piece_for(size_t numel, size_t N, size_t bucket, size_t *padded);
/* Segment k of rank r's shard; 0 past the last. */
int zt_geom_seg(const zt_geom *g, int r, int k, zt_seg *s);

/* Every unit of a layout over N ranks with one bucket. */
typedef struct zt_geometry {
    int n_units;
    size_t N, bucket;
    size_t *padded;   /* per unit: floats incl. padding to N x ZT_SHARD_ALIGN */
    size_t *piece;    /* per unit: floats per piece (a multiple of N x ZT_SHARD_ALIGN) */
} zt_geometry;

/* ZT_E_NOMEM (with the thread's error set) or 0. */
int zt_geometry_init(zt_geometry *g, const struct zt_layout *L, size_t N, size_t bucket);
void zt_geometry_free(zt_geometry *g);
/* unit u's geometry */
zt_geom zt_geometry_unit(const zt_geometry *g, int u);
/* floats of unit u in a buffer that holds the whole unit (shard = 0) or one rank's shard */
size_t zt_geometry_len(const zt_geometry *g, int u, int shard);
/* floats of the largest unit other than `except` (-1: of every unit) */
size_t zt_geometry_max(const zt_geometry *g, int except);
/* floats of the largest shard */
size_t zt_geometry_max_shard(const zt_geometry *g);
/* floats of every unit, padded */
double zt_geometry_total(const zt_geometry *g);
/* Segment k of rank r's shard of unit u; 0 past the last. */
int zt_geometry_seg(const zt_geometry *g, int u, int r, int k, zt_seg *s);
/* Rank r's shard of unit u out of a whole-unit buffer, or back into one; es bytes per
 * element (4: fp32, 2: half-precision parameters). */
void zt_geometry_take(const zt_geometry *g, int u, int r, const void *whole, void *shard,
                      size_t es);
void zt_geometry_put(const zt_geometry *g, int u, int r, const void *shard, void *whole,
                     size_t es);

#endif
