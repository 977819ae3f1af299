/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif fuzz target: the library's extended-block layout
 * (client/libstabledif-layout.c): layout_split, which verifies and
 * splits what a read received, and layout_join / layout_generate, its
 * counterparts on the write side.
 *
 * The first input byte picks a device configuration (fuzz-common.c); then
 * come the LBA of the first block (any 64-bit value, so ref tags wrap),
 * the number of blocks (1-16) and a byte of flags (buffer misaligned, no
 * tuple buffer, no callback); fuzz_build_ext builds the blocks.  Every
 * buffer is allocated to its exact size, so ASan sees any overrun.
 *  - layout_split reports exactly the blocks the reference check fails,
 *    in order, each with an index inside the buffer, its LBA and the
 *    reference's check, expected and actual values; its count and stats
 *    agree; the data and tuples come out split, the input untouched;
 *  - layout_join of them gives the same extended blocks back and reports
 *    exactly the blocks whose guard does not match their data;
 *  - layout_generate's tuples pass the reference check.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "fuzz-common.h"
#include "libstabledif-internal.h"

/* Most blocks per buffer. */
#define MAX_BLOCKS 16

/* What the split callback checks each failure against. */
struct expect {
  const struct pi_params *p;    /* the device */
  const uint8_t *ext;           /* the buffer verified */
  uint64_t nblocks, lba;        /* its blocks and first LBA */
  uint64_t calls;               /* failures reported so far */
  uint64_t next;                /* lowest index the next may have */
};

/* The big-endian guard of LEN bytes at P. */
static uint64_t
guard_field (const uint8_t *p, unsigned len)
{
  uint64_t v = 0;

  while (len-- > 0)
    v = v << 8 | *p++;
  return v;
}

/* pi_error_fn of layout_split. */
static void
on_split_error (void *opaque, const struct pi_error *err)
{
  struct expect *e = opaque;
  const uint64_t es = pi_ext_size (e->p);
  uint64_t want, got, i = err->index;
  bool esc;
  enum pi_check chk;

  FUZZ_ASSERT (i < e->nblocks, "failure names block %llu of a %llu-block "
               "buffer", (unsigned long long) i,
               (unsigned long long) e->nblocks);
  FUZZ_ASSERT (i >= e->next, "failures out of order (%llu after %llu)",
               (unsigned long long) i, (unsigned long long) e->next);
  FUZZ_ASSERT (err->lba == e->lba + i, "failure at index %llu names LBA "
               "%llu, not %llu", (unsigned long long) i,
               (unsigned long long) err->lba,
               (unsigned long long) (e->lba + i));
  chk = fuzz_ref_check (e->p, e->ext + i * es,
                        e->ext + i * es + e->p->interval, e->lba + i,
                        &esc, &want, &got);
  FUZZ_ASSERT (chk != PI_CHECK_OK, "block %llu reported failed (%s) but "
               "passes", (unsigned long long) i, pi_check_name (err->check));
  FUZZ_ASSERT (err->check == chk && err->expected == want &&
               err->actual == got,
               "block %llu: reported %s 0x%llx/0x%llx, reference %s "
               "0x%llx/0x%llx", (unsigned long long) i,
               pi_check_name (err->check),
               (unsigned long long) err->expected,
               (unsigned long long) err->actual, pi_check_name (chk),
               (unsigned long long) want, (unsigned long long) got);
  e->calls++;
  e->next = i + 1;
}

/* layout_mismatch_fn of layout_join: count, and check the index. */
static void
on_join_mismatch (void *opaque, uint64_t index, uint64_t guard_submit,
                  uint64_t guard_sent)
{
  struct expect *e = opaque;

  FUZZ_ASSERT (index < e->nblocks && index >= e->next,
               "join mismatch index %llu", (unsigned long long) index);
  FUZZ_ASSERT (guard_submit != guard_sent, "join mismatch with equal guards");
  e->calls++;
  e->next = index + 1;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  struct fuzz_input in = { data, size };
  const struct fuzz_config *c = fuzz_config_pick (fuzz_u8 (&in));
  struct pi_params pp;
  uint64_t lba, n, es, iv, ts, i, failed, ref_failed = 0, ref_escaped = 0;
  uint64_t guard_bad = 0;
  uint8_t flags;
  uint8_t *raw, *ext, *copy, *out, *pi, *ext2, *gen_copy, *gen_pi;
  struct pi_verify_stats st = { 0 };
  struct expect e;

  fuzz_config_params (c, &pp);
  lba = fuzz_u64 (&in);
  n = fuzz_u8 (&in) % MAX_BLOCKS + 1;
  flags = fuzz_u8 (&in);
  iv = pp.interval;
  ts = pp.format->tuple_size;
  es = iv + ts;

  /* The received buffer, at an odd address if asked. */
  raw = malloc (n * es + 1);
  FUZZ_ASSERT (raw != NULL, "out of memory");
  ext = raw + (flags & 1);
  fuzz_build_ext (&pp, &in, ext, n, lba);
  copy = malloc (n * es);
  out = malloc (n * iv);
  pi = ts ? malloc (n * ts) : NULL;
  ext2 = malloc (n * es);
  FUZZ_ASSERT (copy && out && (pi || !ts) && ext2, "out of memory");
  memcpy (copy, ext, n * es);

  for (i = 0; i < n; i++) {
    bool esc;
    uint64_t want, got;
    enum pi_check chk = fuzz_ref_check (&pp, ext + i * es, ext + i * es + iv,
                                        lba + i, &esc, &want, &got);
    if (chk != PI_CHECK_OK)
      ref_failed++;
    else if (esc)
      ref_escaped++;
    /* For join: does the guard field match the data? */
    if (ts && pi_guard_compute (pp.format, ext + i * es, iv) !=
        guard_field (ext + i * es + iv, ts == 8 ? 2 : 8))
      guard_bad++;
  }

  /* Read side: verify and split. */
  e = (struct expect) { .p = &pp, .ext = ext, .nblocks = n, .lba = lba };
  failed = layout_split (&pp, ext, out, (flags & 2) ? NULL : pi, n, lba, &st,
                         (flags & 4) ? NULL : on_split_error, &e);
  FUZZ_ASSERT (failed == ref_failed, "layout_split: %llu failed, reference "
               "%llu (%s/%u)", (unsigned long long) failed,
               (unsigned long long) ref_failed, c->format, (unsigned) iv);
  FUZZ_ASSERT ((flags & 4) || e.calls == failed,
               "layout_split: %llu callbacks for %llu failures",
               (unsigned long long) e.calls, (unsigned long long) failed);
  FUZZ_ASSERT (st.failed == failed && st.escaped == ref_escaped &&
               st.verified + st.escaped == (ts ? n : 0),
               "layout_split stats: verified %llu escaped %llu failed %llu",
               (unsigned long long) st.verified,
               (unsigned long long) st.escaped,
               (unsigned long long) st.failed);
  FUZZ_ASSERT (memcmp (copy, ext, n * es) == 0,
               "layout_split wrote its input");
  for (i = 0; i < n; i++) {
    FUZZ_ASSERT (memcmp (out + i * iv, ext + i * es, iv) == 0,
                 "split data of block %llu wrong", (unsigned long long) i);
    FUZZ_ASSERT ((flags & 2) || ts == 0 ||
                 memcmp (pi + i * ts, ext + i * es + iv, ts) == 0,
                 "split tuple of block %llu wrong", (unsigned long long) i);
  }

  /* Write side: join them back (the tuples come from the input, so a
   * buffer without them is rebuilt from the copy). */
  if (ts && (flags & 2))
    for (i = 0; i < n; i++)
      memcpy (pi + i * ts, ext + i * es + iv, ts);
  e = (struct expect) { .p = &pp, .ext = ext, .nblocks = n, .lba = lba };
  FUZZ_ASSERT (layout_join (&pp, out, pi, ext2, n, true, on_join_mismatch,
                            &e) == guard_bad && e.calls == guard_bad,
               "layout_join: %llu mismatches reported, %llu guards wrong",
               (unsigned long long) e.calls, (unsigned long long) guard_bad);
  FUZZ_ASSERT (memcmp (ext2, ext, n * es) == 0, "layout_join changed blocks");
  /* Without the check: the same blocks, and a recheck of them reports
   * the same guards. */
  memset (ext2, 0, n * es);
  FUZZ_ASSERT (layout_join (&pp, out, pi, ext2, n, false, NULL, NULL) == 0,
               "layout_join without check reported mismatches");
  FUZZ_ASSERT (memcmp (ext2, ext, n * es) == 0,
               "layout_join without check changed blocks");
  e.calls = e.next = 0;
  FUZZ_ASSERT (layout_recheck (&pp, pi, ext2, n, on_join_mismatch, &e)
               == guard_bad && e.calls == guard_bad,
               "layout_recheck: %llu mismatches reported, %llu guards wrong",
               (unsigned long long) e.calls, (unsigned long long) guard_bad);

  /* And generate: what it makes passes the check. */
  gen_copy = malloc (n * iv);
  gen_pi = ts ? malloc (n * ts) : NULL;
  FUZZ_ASSERT (gen_copy && (gen_pi || !ts), "out of memory");
  layout_generate (&pp, out, (flags & 8) ? NULL : gen_copy, gen_pi, n, lba);
  for (i = 0; i < n && ts; i++) {
    bool esc;
    uint64_t want, got;
    FUZZ_ASSERT (fuzz_ref_check (&pp, out + i * iv, gen_pi + i * ts, lba + i,
                                 &esc, &want, &got) == PI_CHECK_OK && !esc,
                 "generated tuple of block %llu fails",
                 (unsigned long long) i);
  }
  FUZZ_ASSERT ((flags & 8) || memcmp (gen_copy, out, n * iv) == 0,
               "layout_generate copied wrong");

  /* A snapshot in the wire format is the data joined with those tuples. */
  memset (ext2, 0, n * es);
  layout_generate_ext (&pp, out, ext2, n, lba);
  for (i = 0; i < n; i++)
    FUZZ_ASSERT (memcmp (ext2 + i * es, out + i * iv, iv) == 0 &&
                 (!ts || memcmp (ext2 + i * es + iv, gen_pi + i * ts, ts)
                  == 0),
                 "layout_generate_ext: block %llu differs",
                 (unsigned long long) i);

  free (raw);
  free (copy);
  free (out);
  free (pi);
  free (ext2);
  free (gen_copy);
  free (gen_pi);
  return 0;
}
