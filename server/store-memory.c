/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: the sparse memory store (see store.h for the contract).
 *
 * The disk is cut into chunks of CHUNK_BYTES of data.  A chunk is
 * allocated on the first write that touches it and holds the data of its
 * blocks followed by their tuples (one allocation).  Chunks hang off a
 * radix tree of pointer pages: the root is sized to the disk (at most
 * 2^ROOT_MAX_BITS pointers), every page below it has 2^LEVEL_BITS
 * pointers (4 KiB).  A 16 TiB disk with 4 KiB intervals has 2^28 chunks:
 * an 8 KiB root and two levels of pages, so it opens with a few KiB and
 * costs memory only where it was written.
 *
 * Locking: the caller's range lock covers whole chunks (store->granule is
 * the number of blocks per chunk), so a chunk is never read and written,
 * allocated or freed by two requests at once.  Tree pages are shared by
 * unrelated requests; they are created lazily with compare-and-swap and
 * never freed before close, and every slot is an atomic pointer, so
 * readers take no lock at all.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"

/* Bytes of data per chunk. */
#define CHUNK_BYTES 65536

/* Bits of the chunk index resolved by each page below the root. */
#define LEVEL_BITS 9
#define LEVEL_SLOTS ((uint64_t) 1 << LEVEL_BITS)

/* The root may resolve up to this many bits itself (32 KiB of pointers). */
#define ROOT_MAX_BITS 12

/* One slot of a tree page: a page one level down, or (in the lowest
 * level) a chunk. */
typedef _Atomic (void *) slot_t;

struct store_memory {
  struct store s;               /* the common part, first */
  uint64_t nchunks;             /* chunks covering the disk */
  uint64_t blocks_per_chunk;    /* CHUNK_BYTES / interval */
  size_t chunk_alloc;           /* bytes of one chunk: data + tuples */
  unsigned levels;              /* tree levels below the root (0: root
                                   slots are chunks) */
  slot_t *root;                 /* 2^root_bits slots */
  uint64_t root_slots;          /* number of slots in root */
};

/* Where the slot for chunk IDX sits at LEVEL (0 = lowest). */
static inline uint64_t
slot_index (uint64_t idx, unsigned level)
{
  return (idx >> (LEVEL_BITS * level)) & (LEVEL_SLOTS - 1);
}

/* The slot that points at chunk IDX, or NULL if a page on the way to it
 * was never created; then *HOLE (if not NULL) is set to the number of
 * chunks from IDX that the missing page would have covered. */
static slot_t *
leaf_slot (struct store_memory *m, uint64_t idx, uint64_t *hole)
{
  slot_t *page = m->root;
  unsigned level = m->levels;
  uint64_t slot = idx >> (LEVEL_BITS * level);

  while (level > 0) {
    slot_t *next = atomic_load_explicit (&page[slot], memory_order_acquire);
    if (next == NULL) {
      if (hole) {
        uint64_t span = (uint64_t) 1 << (LEVEL_BITS * level);
        *hole = span - (idx & (span - 1));
      }
      return NULL;
    }
    page = next;
    level--;
    slot = slot_index (idx, level);
  }
  return &page[slot];
}

/* Find chunk IDX.  Returns it, or NULL if it was never allocated; then
 * *HOLE (if not NULL) is set to the number of chunks from IDX that are
 * certainly unallocated. */
static uint8_t *
chunk_find (struct store_memory *m, uint64_t idx, uint64_t *hole)
{
  slot_t *slot = leaf_slot (m, idx, hole);
  uint8_t *c;

  if (slot == NULL)
    return NULL;
  c = atomic_load_explicit (slot, memory_order_acquire);
  if (c == NULL && hole)
    *hole = 1;
  return c;
}

/* A new chunk: zeros with all-ones PI. */
static uint8_t *
chunk_new (struct store_memory *m)
{
  uint8_t *c = malloc (m->chunk_alloc);

  if (c == NULL)
    return NULL;
  memset (c, 0, CHUNK_BYTES);
  memset (c + CHUNK_BYTES, 0xff, m->chunk_alloc - CHUNK_BYTES);
  return c;
}

/* Find chunk IDX, allocating it (and the pages above it) if needed.
 * Returns NULL on ENOMEM after reporting it. */
static uint8_t *
chunk_get (struct store_memory *m, uint64_t idx)
{
  slot_t *page = m->root;
  unsigned level = m->levels;
  uint64_t slot = idx >> (LEVEL_BITS * level);

  for (;;) {
    void *p = atomic_load_explicit (&page[slot], memory_order_acquire);
    if (p == NULL) {
      void *fresh = level == 0
        ? (void *) chunk_new (m)
        : calloc (LEVEL_SLOTS, sizeof (slot_t));
      void *expected = NULL;
      if (fresh == NULL) {
        m->s.error ("memory store: cannot allocate memory for LBA %" PRIu64
                    ": %m", idx * m->blocks_per_chunk);
        errno = ENOMEM;
        return NULL;
      }
      /* Another request may have created a shared page meanwhile. */
      if (atomic_compare_exchange_strong_explicit (&page[slot], &expected,
                                                   fresh,
                                                   memory_order_acq_rel,
                                                   memory_order_acquire))
        p = fresh;
      else {
        free (fresh);
        p = expected;
      }
    }
    if (level == 0)
      return p;
    page = p;
    level--;
    slot = slot_index (idx, level);
  }
}

/* The position of block LBA inside its chunk. */
static inline uint64_t
block_in_chunk (const struct store_memory *m, uint64_t lba)
{
  return lba % m->blocks_per_chunk;
}

/* How many of NBLOCKS blocks from LBA lie in LBA's chunk. */
static inline uint64_t
run_in_chunk (const struct store_memory *m, uint64_t lba, uint64_t nblocks)
{
  uint64_t left = m->blocks_per_chunk - block_in_chunk (m, lba);
  return nblocks < left ? nblocks : left;
}

static int
mem_read (struct store *s, uint64_t lba, uint64_t nblocks,
          uint8_t *data, uint8_t *pi)
{
  struct store_memory *m = (struct store_memory *) s;
  const size_t iv = s->geom.interval, tu = s->tuple;

  while (nblocks > 0) {
    uint64_t n = run_in_chunk (m, lba, nblocks);
    uint64_t b = block_in_chunk (m, lba);
    const uint8_t *c = chunk_find (m, lba / m->blocks_per_chunk, NULL);

    if (c) {
      memcpy (data, c + b * iv, n * iv);
      if (pi && tu)
        memcpy (pi, c + CHUNK_BYTES + b * tu, n * tu);
    }
    else {
      memset (data, 0, n * iv);
      if (pi && tu)
        memset (pi, 0xff, n * tu);
    }
    data += n * iv;
    if (pi)
      pi += n * tu;
    lba += n;
    nblocks -= n;
  }
  return 0;
}


/* store_ops.write_in_place: one run per chunk, allocated (with the tree
 * pages above it) on the first write that touches it.  mem_write and
 * mem_write_ext are fills of it. */
static int
mem_write_in_place (struct store *s, uint64_t lba, uint64_t nblocks,
                    store_fill_fn fn, void *opaque, bool fua)
{
  struct store_memory *m = (struct store_memory *) s;
  const size_t iv = s->geom.interval, tu = s->tuple;
  uint64_t idx;

  /* Every chunk first, so that a write that cannot have its memory
   * stores nothing.  (The chunks it did get read as before: zeros with
   * all-ones PI.)  The range lock covers whole chunks, so none of them
   * is freed before the fill below finds it again. */
  for (idx = lba / m->blocks_per_chunk;
       nblocks > 0 && idx <= (lba + nblocks - 1) / m->blocks_per_chunk; idx++)
    if (chunk_get (m, idx) == NULL)
      return -1;

  while (nblocks > 0) {
    uint64_t n = run_in_chunk (m, lba, nblocks);
    uint64_t b = block_in_chunk (m, lba);
    uint8_t *c = chunk_get (m, lba / m->blocks_per_chunk);

    if (c == NULL)
      return -1;
    fn (opaque, lba, n, c + b * iv, c + CHUNK_BYTES + b * tu);
    lba += n;
    nblocks -= n;
  }
  return 0;
}

/* What mem_write and mem_write_ext store, consumed a run at a time. */
struct mem_src {
  const uint8_t *data;          /* the next run's data (separate layout)
                                   or its first extended block */
  const uint8_t *pi;            /* the next run's tuples (separate
                                   layout; unused when tu is 0) */
  size_t iv, tu;                /* interval and tuple bytes */
};

/* store_fill_fn of mem_write: data and packed tuples, each one copy. */
static void
fill_sep (void *opaque, uint64_t lba, uint64_t n, uint8_t *data, uint8_t *pi)
{
  struct mem_src *src = opaque;

  memcpy (data, src->data, n * src->iv);
  src->data += n * src->iv;
  if (src->tu) {
    memcpy (pi, src->pi, n * src->tu);
    src->pi += n * src->tu;
  }
}

/* store_fill_fn of mem_write_ext: each extended block split in two. */
static void
fill_ext (void *opaque, uint64_t lba, uint64_t n, uint8_t *data, uint8_t *pi)
{
  struct mem_src *src = opaque;
  const size_t iv = src->iv, tu = src->tu;
  const uint8_t *ext = src->data;
  uint64_t i;

  /* Locals: the copies could alias *SRC, which would be reloaded. */
  for (i = 0; i < n; i++, ext += iv + tu) {
    memcpy (data + i * iv, ext, iv);
    memcpy (pi + i * tu, ext + iv, tu);
  }
  src->data = ext;
}

/* store_ops.write: a fill of mem_write_in_place, so a -1 (ENOMEM,
 * reported by chunk_get) stores nothing. */
static int
mem_write (struct store *s, uint64_t lba, uint64_t nblocks,
           const uint8_t *data, const uint8_t *pi, bool fua)
{
  struct mem_src src = {
    .data = data, .pi = pi, .iv = s->geom.interval, .tu = s->tuple,
  };

  return mem_write_in_place (s, lba, nblocks, fill_sep, &src, fua);
}

/* store_ops.write_ext: a fill of mem_write_in_place too; a -1 stores
 * nothing. */
static int
mem_write_ext (struct store *s, uint64_t lba, uint64_t nblocks,
               const uint8_t *ext, bool fua)
{
  struct mem_src src = {
    .data = ext, .iv = s->geom.interval, .tu = s->tuple,
  };

  return mem_write_in_place (s, lba, nblocks, fill_ext, &src, fua);
}

/* store_ops.read_ext: blocks of unwritten chunks read as zeros with
 * all-ones tuples, like mem_read. */
static int
mem_read_ext (struct store *s, uint64_t lba, uint64_t nblocks, uint8_t *ext)
{
  struct store_memory *m = (struct store_memory *) s;
  const size_t iv = s->geom.interval, tu = s->tuple;
  uint64_t i;

  while (nblocks > 0) {
    uint64_t n = run_in_chunk (m, lba, nblocks);
    uint64_t b = block_in_chunk (m, lba);
    const uint8_t *c = chunk_find (m, lba / m->blocks_per_chunk, NULL);

    for (i = 0; i < n; i++, ext += iv + tu) {
      if (c) {
        memcpy (ext, c + (b + i) * iv, iv);
        memcpy (ext + iv, c + CHUNK_BYTES + (b + i) * tu, tu);
      }
      else {
        memset (ext, 0, iv);
        memset (ext + iv, 0xff, tu);
      }
    }
    lba += n;
    nblocks -= n;
  }
  return 0;
}


static int
mem_zero (struct store *s, uint64_t lba, uint64_t nblocks, bool fua)
{
  struct store_memory *m = (struct store_memory *) s;
  const size_t iv = s->geom.interval, tu = s->tuple;

  while (nblocks > 0) {
    uint64_t n = run_in_chunk (m, lba, nblocks);
    uint64_t b = block_in_chunk (m, lba);
    uint64_t idx = lba / m->blocks_per_chunk;
    uint8_t *c = chunk_find (m, idx, NULL);
    /* Blocks of this chunk on the disk: fewer in a last, short one. */
    uint64_t in_chunk = s->geom.nblocks - idx * m->blocks_per_chunk;

    if (in_chunk > m->blocks_per_chunk)
      in_chunk = m->blocks_per_chunk;
    if (c == NULL)
      ;                         /* already reads as zeros */
    else if (n == in_chunk) {
      /* The whole chunk: give its memory back.  The range lock keeps
       * everyone else off this chunk, so nobody holds a pointer to it. */
      atomic_store_explicit (leaf_slot (m, idx, NULL), NULL,
                             memory_order_release);
      free (c);
    }
    else {
      memset (c + b * iv, 0, n * iv);
      if (tu)
        memset (c + CHUNK_BYTES + b * tu, 0xff, n * tu);
    }
    lba += n;
    nblocks -= n;
  }
  return 0;
}

static int
mem_flush (struct store *s)
{
  return 0;                     /* memory is as durable as it gets */
}

static int
mem_extent (struct store *s, uint64_t lba, uint64_t nblocks,
            bool *allocated, uint64_t *run)
{
  struct store_memory *m = (struct store_memory *) s;
  uint64_t done = 0;
  bool first = true, want = false;

  while (done < nblocks) {
    uint64_t at = lba + done;
    uint64_t idx = at / m->blocks_per_chunk;
    uint64_t hole = 1, n;
    bool here = chunk_find (m, idx, &hole) != NULL;

    if (first) {
      want = here;
      first = false;
    }
    else if (here != want)
      break;
    /* Blocks covered by this answer: the rest of this chunk, or of the
     * whole missing subtree. */
    n = (here ? 1 : hole) * m->blocks_per_chunk - block_in_chunk (m, at);
    if (n > nblocks - done)
      n = nblocks - done;
    done += n;
  }
  *allocated = want;
  *run = done;
  return 0;
}

/* Free everything below PAGE (SLOTS slots, LEVEL levels above the
 * chunks); PAGE itself is the caller's. */
static void
free_tree (slot_t *page, unsigned level, uint64_t slots)
{
  uint64_t i;

  for (i = 0; i < slots; i++) {
    void *p = atomic_load_explicit (&page[i], memory_order_relaxed);
    if (p == NULL)
      continue;
    if (level > 0)
      free_tree (p, level - 1, LEVEL_SLOTS);
    free (p);                   /* a page after its children, or a chunk */
  }
}

static void
mem_close (struct store *s)
{
  struct store_memory *m = (struct store_memory *) s;

  free_tree (m->root, m->levels, m->root_slots);
  free (m->root);
  free (m);
}

static const struct store_ops memory_ops = {
  .name = "memory",
  .read = mem_read,
  .write = mem_write,
  .read_ext = mem_read_ext,
  .write_ext = mem_write_ext,
  .write_in_place = mem_write_in_place,
  .zero = mem_zero,
  .flush = mem_flush,
  .extent = mem_extent,
  .close = mem_close,
};

struct store *
store_memory_open (const struct store_geometry *g, server_error_fn error)
{
  struct store_memory *m;
  unsigned bits = 0;

  if (g->interval == 0 || CHUNK_BYTES % g->interval != 0) {
    error ("memory store: interval %" PRIu32 " does not divide the %d-byte "
           "chunk", g->interval, CHUNK_BYTES);
    errno = EINVAL;
    return NULL;
  }

  m = calloc (1, sizeof *m);
  if (m == NULL) {
    error ("memory store: %m");
    return NULL;
  }
  m->s.ops = &memory_ops;
  m->s.geom = *g;
  m->s.tuple = g->format ? g->format->tuple_size : 0;
  m->blocks_per_chunk = CHUNK_BYTES / g->interval;
  m->s.granule = m->blocks_per_chunk;
  m->s.multi_conn = true;
  m->s.error = error;
  m->chunk_alloc = CHUNK_BYTES + m->blocks_per_chunk * m->s.tuple;

  m->nchunks = g->nblocks / m->blocks_per_chunk
    + (g->nblocks % m->blocks_per_chunk != 0);
  while (bits < 64 && ((uint64_t) 1 << bits) < m->nchunks)
    bits++;
  m->levels = bits > ROOT_MAX_BITS
    ? (bits - ROOT_MAX_BITS + LEVEL_BITS - 1) / LEVEL_BITS : 0;
  m->root_slots = (uint64_t) 1 << (bits - LEVEL_BITS * m->levels);
  m->root = calloc (m->root_slots, sizeof (slot_t));
  if (m->root == NULL) {
    error ("memory store: %m");
    free (m);
    return NULL;
  }
  return &m->s;
}
