/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: the stable-page policies and forensics, one request at a
 * time, against the real plugin on a stable_writes=1 device.
 *
 *   test-client-policies URI
 *
 * Each case submits a write with a race delay (copy-out happens that
 * long after the checksum) and then acts on the buffer the way the
 * policy allows, checking the outcome that follows from the policy's
 * contract, not from timing:
 *  - wait: wait_stable returns only after the write completed (its
 *    callback has run); regions that do not overlap never wait; a
 *    policy changed after submit does not release the write's pin;
 *  - wait-sent: after wait_stable the buffer may change and the write
 *    still stores the data as it was at submit;
 *  - snapshot: wait_stable never waits and the write stores the data as
 *    it was at submit;
 *  - none (unsafe): changing the buffer right after submit makes the
 *    device reject the write (EIO); the error and the forensics report
 *    name exactly the blocks and bytes changed; the old data is intact.
 * Also: what callbacks may call, and that close completes requests.
 */
#include <config.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "test-client-util.h"

/* Copy-out happens this long after submit.  The cases that change a
 * buffer without waiting (snapshot, none) rely on doing so within this
 * time after submit; a quarter second is ample for two statements. */
#define DELAY_US 250000

static struct stabledif_handle *h;
static uint32_t iv;

/* ---- callbacks ---- */

/* What the forensics callback saw (one report kept). */
static struct {
  int calls;
  int64_t cookie;
  uint64_t offset, count;
  const void *buf;
  int error;
  bool rejected;
  size_t nblocks;
  uint64_t lba[4];
  size_t nranges[4];
  struct stabledif_byte_range range[4][4];
  uint32_t bytes_changed[4];
  bool guards_differ[4];
} rep;

static void
on_forensics (void *user_data, const struct stabledif_forensics_report *r)
{
  size_t i, j;

  CHECK (user_data == &rep, "forensics user_data");
  rep.calls++;
  rep.cookie = r->cookie;
  rep.offset = r->offset;
  rep.count = r->count;
  rep.buf = r->buf;
  rep.error = r->error;
  rep.rejected = r->rejected;
  rep.nblocks = r->nblocks;
  for (i = 0; i < r->nblocks && i < 4; ++i) {
    rep.lba[i] = r->blocks[i].lba;
    rep.nranges[i] = r->blocks[i].nranges;
    rep.bytes_changed[i] = r->blocks[i].bytes_changed;
    rep.guards_differ[i] =
      r->blocks[i].guard_submit != r->blocks[i].guard_sent;
    for (j = 0; j < r->blocks[i].nranges && j < 4; ++j)
      rep.range[i][j] = r->blocks[i].ranges[j];
  }
}

static void
stats (struct stabledif_stats *st)
{
  OK (stabledif_get_stats (h, st, sizeof *st));
}

/* Read NB blocks at LBA (PI verified by the library) and compare. */
static void
expect_stored (const uint8_t *want, uint64_t lba, uint64_t nb,
               const char *what)
{
  uint8_t *r = xmalloc (nb * iv);

  OK (stabledif_pread (h, r, nb * iv, lba * iv, NULL, 0));
  CHECK (memcmp (r, want, nb * iv) == 0, "%s: stored data differs", what);
  free (r);
}

/* Under POLICY, fill BUF (NB blocks) with pattern SEED and keep a copy
 * in ORIG, take the counters into A, and submit the write of BUF at LBA
 * (its completion recorded in D). */
static void
submit_write (enum stabledif_policy policy, uint8_t *buf, uint8_t *orig,
              uint64_t nb, uint64_t lba, uint64_t seed,
              struct stabledif_stats *a, struct done *d)
{
  OK (stabledif_set_policy (h, policy));
  fill_pattern (buf, nb * iv, seed);
  memcpy (orig, buf, nb * iv);
  stats (a);
  OK (stabledif_aio_pwrite (h, buf, nb * iv, lba * iv, 0, on_done, d));
}

/* ---- cases ---- */

static void
case_wait (void)
{
  const uint64_t lba = 100, nb = 4;
  uint8_t *buf = xmalloc (nb * iv), *other = xmalloc (iv);
  struct done d = { .ran = false };
  struct stabledif_stats a, b;

  OK (stabledif_set_policy (h, STABLEDIF_POLICY_WAIT));
  fill_pattern (buf, nb * iv, 1);
  stats (&a);
  OK (stabledif_aio_pwrite (h, buf, nb * iv, lba * iv, 0, on_done, &d));
  /* Other memory, an empty region, and the bytes just past the buffer
   * do not overlap the write: no waiting. */
  OK (stabledif_wait_stable (h, other, iv));
  OK (stabledif_wait_stable (h, buf, 0));
  OK (stabledif_wait_stable (h, buf + nb * iv, 1));
  stats (&b);
  CHECK (b.waits == a.waits, "waited on a region no write reads");
  CHECK (b.wait_calls == a.wait_calls + 3, "wait calls not counted");
  /* The last byte of the buffer overlaps: wait until the device
   * answered and the callback returned. */
  OK (stabledif_wait_stable (h, buf + nb * iv - 1, 1));
  CHECK (atomic_load (&d.ran), "wait_stable returned before the write "
         "completed");
  CHECK (d.error == 0, "write failed: %s", d.msg);
  stats (&b);
  CHECK (b.waits == a.waits + 1, "waits %" PRIu64 " -> %" PRIu64,
         a.waits, b.waits);
  CHECK (b.wait_ns > a.wait_ns, "no time waited");
  OK (stabledif_wait_all (h));
  expect_stored (buf, lba, nb, "wait");
  free (buf); free (other);
}

/* A write submitted under wait stays pinned when the policy changes
 * afterwards: wait_stable still waits for it under snapshot or none,
 * and the buffer changed after that is not what the write sent. */
static void
case_policy_changed (enum stabledif_policy later)
{
  const uint64_t lba = later == STABLEDIF_POLICY_NONE ? 150 : 160, nb = 2;
  uint8_t *buf = xmalloc (nb * iv), *orig = xmalloc (nb * iv);
  struct done d = { .ran = false };
  struct stabledif_stats a, b;

  submit_write (STABLEDIF_POLICY_WAIT, buf, orig, nb, lba, 7, &a, &d);
  if (later == STABLEDIF_POLICY_NONE)
    OK (stabledif_set_unsafe (h, true));
  OK (stabledif_set_policy (h, later));
  OK (stabledif_wait_stable (h, buf, nb * iv));
  CHECK (atomic_load (&d.ran), "wait_stable under %s returned before the "
         "write submitted under wait completed",
         stabledif_policy_name (later));
  memset (buf, 0x5a, nb * iv);
  OK (stabledif_wait_all (h));
  CHECK (d.error == 0, "write failed: %s", d.msg);
  stats (&b);
  CHECK (b.waits == a.waits + 1, "waits %" PRIu64 " -> %" PRIu64,
         a.waits, b.waits);
  expect_stored (orig, lba, nb, "policy changed after submit");
  OK (stabledif_set_policy (h, STABLEDIF_POLICY_WAIT));
  OK (stabledif_set_unsafe (h, false));
  free (buf); free (orig);
}

static void
case_wait_sent (void)
{
  const uint64_t lba = 200, nb = 3;
  uint8_t *buf = xmalloc (nb * iv), *orig = xmalloc (nb * iv);
  struct done d = { .ran = false };
  struct stabledif_stats a, b;

  submit_write (STABLEDIF_POLICY_WAIT_SENT, buf, orig, nb, lba, 2, &a, &d);
  OK (stabledif_wait_stable (h, buf + iv, iv));
  /* Copied out: the buffer is the caller's again. */
  memset (buf, 0xee, nb * iv);
  OK (stabledif_wait_all (h));
  CHECK (atomic_load (&d.ran) && d.error == 0, "write failed: %s", d.msg);
  stats (&b);
  CHECK (b.waits == a.waits + 1, "wait-sent did not wait");
  CHECK (b.mismatches == a.mismatches, "data changed before copy-out");
  expect_stored (orig, lba, nb, "wait-sent");
  free (buf); free (orig);
}

static void
case_snapshot (void)
{
  const uint64_t lba = 300, nb = 5;
  uint8_t *buf = xmalloc (nb * iv), *orig = xmalloc (nb * iv);
  struct done d = { .ran = false };
  struct stabledif_stats a, b;

  submit_write (STABLEDIF_POLICY_SNAPSHOT, buf, orig, nb, lba, 3, &a, &d);
  OK (stabledif_wait_stable (h, buf, nb * iv));
  memset (buf, 0x11, nb * iv);  /* long before copy-out */
  OK (stabledif_wait_all (h));
  CHECK (atomic_load (&d.ran) && d.error == 0, "write failed: %s", d.msg);
  stats (&b);
  CHECK (b.waits == a.waits, "snapshot waited");
  CHECK (b.snapshots == a.snapshots + 1, "no snapshot counted");
  CHECK (b.snapshot_bytes == a.snapshot_bytes + nb * iv, "snapshot bytes");
  CHECK (b.mismatches == a.mismatches, "mismatch under snapshot");
  expect_stored (orig, lba, nb, "snapshot");
  free (buf); free (orig);
}

/* Policy none: change bytes right after submit; the device must reject
 * the write and keep the old data.  With BROKEN_WAIT the policy is wait
 * but the caller changes the bytes without calling wait_stable first
 * (breaking its side of the contract): the library does not recompute
 * the guards at copy-out then, but must name the same blocks once the
 * device has rejected the write. */
static void
case_changed (bool forensics, bool broken_wait)
{
  const uint64_t lba = (forensics ? 400 : 500) + (broken_wait ? 20 : 0);
  const uint64_t nb = 4;
  uint8_t *old = xmalloc (nb * iv), *buf = xmalloc (nb * iv);
  struct done d = { .ran = false };
  struct stabledif_stats a, b;
  char want[128];
  int64_t cookie;

  /* Known old contents, written safely. */
  OK (stabledif_set_policy (h, STABLEDIF_POLICY_WAIT));
  fill_pattern (old, nb * iv, 40 + forensics);
  OK (stabledif_pwrite (h, old, nb * iv, lba * iv, 0));

  if (!broken_wait) {
    OK (stabledif_set_unsafe (h, true));
    OK (stabledif_set_policy (h, STABLEDIF_POLICY_NONE));
  }
  OK (stabledif_set_forensics (h, forensics));
  memset (&rep, 0, sizeof rep);
  fill_pattern (buf, nb * iv, 50 + forensics);
  stats (&a);
  cookie = stabledif_aio_pwrite (h, buf, nb * iv, lba * iv, 0, on_done, &d);
  CHECK (cookie > 0, "aio_pwrite");
  if (!broken_wait)
    OK (stabledif_wait_stable (h, buf, nb * iv)); /* never waits: none */
  buf[1 * iv + 100] ^= 0x01;                      /* block 1, byte 100 */
  buf[3 * iv + 7] ^= 0xff;                        /* block 3, bytes 7-8 */
  buf[3 * iv + 8] ^= 0xff;
  OK (stabledif_wait_all (h));                    /* the callback has it */

  CHECK (atomic_load (&d.ran), "callback did not run");
  CHECK (d.error == EIO, "write error %d, want EIO (message: %s)", d.error,
         d.msg);
  snprintf (want, sizeof want, "stabledif_aio_pwrite: write rejected by "
            "device (EIO) at LBA %" PRIu64 ": guard check: ", lba + 1);
  CHECK (strstr (d.msg, want) != NULL, "message \"%s\" lacks \"%s\"", d.msg,
         want);
  snprintf (want, sizeof want, "; LBA %" PRIu64 ": guard check: ", lba + 3);
  CHECK (strstr (d.msg, want) != NULL, "message \"%s\" lacks \"%s\"", d.msg,
         want);
  if (forensics) {
    CHECK (strstr (d.msg, "byte 100 (1 byte) changed") != NULL,
           "message lacks the changed byte: %s", d.msg);
    CHECK (strstr (d.msg, "bytes 7-8 (2 bytes) changed") != NULL,
           "message lacks the changed bytes: %s", d.msg);
    CHECK (rep.calls == 1, "forensics callback ran %d times", rep.calls);
    CHECK (rep.cookie == cookie && rep.offset == lba * iv &&
           rep.count == nb * iv && rep.buf == buf, "report identifies the "
           "wrong write");
    CHECK (rep.rejected && rep.error == EIO, "report: not rejected");
    CHECK (rep.nblocks == 2, "report names %zu blocks", rep.nblocks);
    CHECK (rep.lba[0] == lba + 1 && rep.lba[1] == lba + 3, "report blocks "
           "%" PRIu64 ", %" PRIu64, rep.lba[0], rep.lba[1]);
    CHECK (rep.nranges[0] == 1 && rep.range[0][0].offset == 100 &&
           rep.range[0][0].length == 1 && rep.bytes_changed[0] == 1,
           "report: block 1 ranges");
    CHECK (rep.nranges[1] == 1 && rep.range[1][0].offset == 7 &&
           rep.range[1][0].length == 2 && rep.bytes_changed[1] == 2,
           "report: block 3 ranges");
    CHECK (rep.guards_differ[0] && rep.guards_differ[1], "report guards");
  }
  else {
    CHECK (strstr (d.msg, "enable forensics") != NULL,
           "message lacks the hint: %s", d.msg);
    CHECK (rep.calls == 0, "forensics callback ran with forensics off");
  }
  stats (&b);
  CHECK (b.rejected_writes == a.rejected_writes + 1, "rejected writes");
  CHECK (b.write_errors == a.write_errors + 1, "write errors");
  CHECK (b.mismatches == a.mismatches + 1, "mismatches");
  CHECK (b.mismatched_blocks == a.mismatched_blocks + 2, "mismatched blocks");
  CHECK (b.forensics_bytes == a.forensics_bytes + (forensics ? nb * iv : 0),
         "forensics bytes");
  /* Nothing of the rejected write was stored. */
  expect_stored (old, lba, nb, broken_wait ? "wait, contract broken: after "
                 "the rejected write" : "none: after the rejected write");

  OK (stabledif_set_policy (h, STABLEDIF_POLICY_WAIT));
  OK (stabledif_set_unsafe (h, false));
  OK (stabledif_set_forensics (h, false));
  free (old); free (buf);
}

/* ---- callbacks may submit, but not wait ---- */

static uint8_t cb_buf[65536];
static atomic_int cb_sync_errno, cb_wait_errno, cb_stable_errno;
static struct done cb_inner = { .ran = false };

static void
on_done_calls (void *user_data, int error)
{
  /* Synchronous calls and waits would wait for this very thread. */
  if (stabledif_pwrite (h, cb_buf, iv, 0, 0) == -1)
    atomic_store (&cb_sync_errno, stabledif_get_errno ());
  if (stabledif_wait_all (h) == -1)
    atomic_store (&cb_wait_errno, stabledif_get_errno ());
  if (stabledif_wait_stable (h, cb_buf + iv, iv) == -1)
    atomic_store (&cb_stable_errno, stabledif_get_errno ());
  /* Submitting is fine. */
  CHECK (stabledif_aio_pwrite (h, cb_buf, iv, 7 * iv, 0, on_done,
                               &cb_inner) > 0, "aio from a callback");
}

static void
case_callbacks (void)
{
  OK (stabledif_set_policy (h, STABLEDIF_POLICY_WAIT));
  OK (stabledif_set_race_delay_us (h, 0));
  fill_pattern (cb_buf, sizeof cb_buf, 9);
  /* A write of cb_buf+iv is still pinned while its callback runs. */
  OK (stabledif_aio_pwrite (h, cb_buf + iv, iv, 8 * iv, 0, on_done_calls,
                            NULL));
  OK (stabledif_wait_all (h));
  CHECK (atomic_load (&cb_sync_errno) == EDEADLK, "sync call from callback");
  CHECK (atomic_load (&cb_wait_errno) == EDEADLK, "wait_all from callback");
  CHECK (atomic_load (&cb_stable_errno) == EDEADLK, "wait_stable from "
         "callback on a pinned region");
  CHECK (atomic_load (&cb_inner.ran) && cb_inner.error == 0,
         "aio write from a callback");
  expect_stored (cb_buf, 7, 1, "write from a callback");
  OK (stabledif_set_race_delay_us (h, DELAY_US));
}

/* ---- close completes what is in flight ---- */

static void
case_close (const char *uri)
{
  struct stabledif_handle *h2 = stabledif_create ();
  uint8_t *buf = xmalloc (2 * iv);
  struct done d[2] = { { .ran = false }, { .ran = false } };

  OK (stabledif_connect_uri (h2, uri));
  OK (stabledif_set_race_delay_us (h2, DELAY_US));
  fill_pattern (buf, 2 * iv, 77);
  OK (stabledif_aio_pwrite (h2, buf, 2 * iv, 600 * iv, 0, on_done, &d[0]));
  OK (stabledif_aio_flush (h2, 0, on_done, &d[1]));
  stabledif_close (h2);
  CHECK (atomic_load (&d[0].ran) && d[0].error == 0, "write in flight at "
         "close: %s", d[0].msg);
  CHECK (atomic_load (&d[1].ran) && d[1].error == 0, "flush in flight at "
         "close");
  expect_stored (buf, 600, 2, "written before close");
  free (buf);
}

int
main (int argc, char *argv[])
{
  progname = "test-client-policies";
  if (argc != 2) {
    fprintf (stderr, "usage: %s URI\n", progname);
    exit (EXIT_FAILURE);
  }
  h = stabledif_create ();
  CHECK (h != NULL, "create");
  OK (stabledif_connect_uri (h, argv[1]));
  CHECK (stabledif_get_stable_writes (h) == 1, "needs a stable device");
  iv = (uint32_t) stabledif_get_interval (h);
  CHECK (stabledif_get_size (h) >= 1024 * iv, "device too small");
  OK (stabledif_set_race_delay_us (h, DELAY_US));
  OK (stabledif_set_forensics_callback (h, on_forensics, &rep));

  case_wait ();
  case_policy_changed (STABLEDIF_POLICY_SNAPSHOT);
  case_policy_changed (STABLEDIF_POLICY_NONE);
  case_wait_sent ();
  case_snapshot ();
  case_changed (true, false);
  case_changed (false, false);
  case_changed (true, true);
  case_changed (false, true);
  case_callbacks ();
  case_close (argv[1]);

  CHECK (stabledif_get_in_flight (h) == 0, "requests left in flight");
  stabledif_close (h);
  printf ("%s: ok\n", progname);
  return EXIT_SUCCESS;
}
