/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif fuzz target: control-socket requests (server/ctl-request.c).
 *
 * The first input byte picks a device configuration (fuzz-common.c); a
 * fresh 16-block memory disk is opened for it, its first 8 blocks
 * written through the data view.  The rest of the input is lines, fed
 * to ctl_handle_line the way the socket thread does (lines longer than
 * CTL_LINE_MAX or holding a NUL never reach it).  A line starting with
 * byte 0x01 is not a request but a harness action that makes the disk
 * record a failure (a rejected dif write or a failed read, on a
 * connection the input chooses), so that events and counters have
 * something to report.  After each request:
 *  - the reply is one line of valid JSON: an object with a boolean "ok",
 *    and a non-empty "error" string when ok is false;
 *  - the configuration, both views' profiles and every stored block are
 *    unchanged, except the one block a successful inject names, which
 *    must then fail a data-view read with the check the kind names;
 *  - no file descriptor was left open.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "ctl.h"
#include "ctl-internal.h"
#include "fuzz-common.h"
#include "fuzz-disk.h"

/* Blocks of the fuzzed disk, and how many start out written. */
#define NBLOCKS 16
#define NWRITTEN 8

/* Most lines handled per input. */
#define MAX_LINES 32

/* server_error_fn: the disk's error reports are expected; drop them. */
static void __attribute__ ((format (printf, 1, 2)))
quiet_error (const char *fmt, ...)
{
}

/* The lowest free file descriptor. */
static int
lowest_free_fd (void)
{
  int fd = open ("/dev/null", O_RDONLY | O_CLOEXEC);

  FUZZ_ASSERT (fd >= 0, "open /dev/null: %s", strerror (errno));
  close (fd);
  return fd;
}

/* Every stored block of D, data then PI, into BUF (the store is read
 * directly: it has no side effects, unlike the disk's views). */
static void
snapshot (struct disk *d, uint8_t *buf)
{
  FUZZ_ASSERT (d->store->ops->read (d->store, 0, d->nblocks, buf,
                                    buf + d->nblocks * d->pi.interval) == 0,
               "store read failed");
}

/* Both views' profile lines of D, joined, into BUF (2 lines). */
static void
profiles (struct disk *d, char *buf)
{
  struct profile p;

  memset (buf, 0, 2 * PROFILE_LINE_MAX);
  disk_profile (d, PROFILE_VIEW_DATA, &p);
  FUZZ_ASSERT (profile_format (&p, buf, PROFILE_LINE_MAX) > 0, "profile");
  disk_profile (d, PROFILE_VIEW_DIF, &p);
  FUZZ_ASSERT (profile_format (&p, buf + PROFILE_LINE_MAX,
                               PROFILE_LINE_MAX) > 0, "profile");
}

/* Whether configurations A and B, and PI parameters PA and PB, are the
 * same field by field. */
static bool
same_config (const struct disk_config *a, const struct disk_config *b,
             const struct pi_params *pa, const struct pi_params *pb)
{
  return a->size == b->size && a->format == b->format &&
    a->interval == b->interval && a->has_app == b->has_app &&
    a->app_tag == b->app_tag && a->app_mask == b->app_mask &&
    a->file == b->file && a->events_path == b->events_path &&
    a->event_ring == b->event_ring && a->error == b->error &&
    pa->format == pb->format && pa->interval == pb->interval &&
    pa->check_app == pb->check_app && pa->app_tag == pb->app_tag &&
    pa->app_mask == pb->app_mask;
}

/* Harness action: make D record a failure as connection CONN. */
static void
cause_failure (struct disk *d, struct fuzz_input *in)
{
  const uint8_t what = fuzz_u8 (in);
  const struct disk_io dif = {
    .conn = fuzz_u8 (in), .view = PROFILE_VIEW_DIF,
  };
  const struct disk_io data = { .conn = dif.conn, .view = PROFILE_VIEW_DATA };
  const uint64_t lba = fuzz_u8 (in) % d->nblocks;
  const uint64_t ext = pi_ext_size (&d->pi);
  uint8_t *buf = calloc (1, ext);

  FUZZ_ASSERT (buf != NULL, "out of memory");
  if (what & 1) {
    /* Zero data with a tuple of zeros: the guard passes for CRC-16 (the
     * CRC of zeros is 0) but not the ref for type 1 beyond LBA 0;
     * CRC-64's guard of zeros is not 0.  Rejected or not, it is fine. */
    (void) disk_pwrite (d, &dif, buf, ext, lba * ext, false);
  }
  else {
    /* Reading the block fails if an inject corrupted it. */
    (void) disk_pread (d, &data, buf, d->pi.interval, lba * d->pi.interval);
  }
  free (buf);
}

/* Abort unless REPLY is one valid JSON reply line; returns it parsed. */
static json_t *
check_reply (const char *line, const char *reply)
{
  json_error_t jerr;
  json_t *j, *ok, *e;

  FUZZ_ASSERT (reply != NULL, "no reply to '%s'", line);
  FUZZ_ASSERT (strchr (reply, '\n') == NULL && strchr (reply, '\r') == NULL,
               "reply is more than one line: %s", reply);
  j = json_loads (reply, JSON_REJECT_DUPLICATES, &jerr);
  FUZZ_ASSERT (j != NULL, "reply is not JSON (%s): %s", jerr.text, reply);
  FUZZ_ASSERT (json_is_object (j), "reply is not an object: %s", reply);
  ok = json_object_get (j, "ok");
  FUZZ_ASSERT (json_is_boolean (ok), "reply has no boolean ok: %s", reply);
  if (json_is_false (ok)) {
    e = json_object_get (j, "error");
    FUZZ_ASSERT (json_is_string (e) && json_string_length (e) > 0,
                 "failure reply has no error: %s", reply);
  }
  return j;
}

/* Whether block LBA as stored in SNAP (a snapshot) passes its PI check
 * or escapes it. */
static bool
block_clean (struct disk *d, const uint8_t *snap, uint64_t lba)
{
  const uint64_t iv = d->pi.interval, ts = d->pi.format->tuple_size;

  return pi_verify_block (&d->pi, snap + lba * iv,
                          snap + d->nblocks * iv + lba * ts, lba,
                          NULL, NULL) == PI_CHECK_OK;
}

/* After a successful inject of KIND at LBA: a data-view read of the block
 * fails, and the newest event names that block and, if the block was
 * CLEAN before (it passed or escaped its check), the check KIND names; a
 * block already corrupted may fail an earlier check (guard before app
 * before ref). */
static void
check_injected (struct disk *d, const char *kind, uint64_t lba, bool clean)
{
  const struct disk_io io = { .conn = 0, .view = PROFILE_VIEW_DATA };
  enum pi_check want = strcmp (kind, "app") == 0 ? PI_CHECK_APP
    : strcmp (kind, "ref") == 0 ? PI_CHECK_REF : PI_CHECK_GUARD;
  struct stats_event ev[16];
  uint8_t *buf = malloc (d->pi.interval);
  size_t n;
  int r;

  FUZZ_ASSERT (buf != NULL, "out of memory");
  errno = 0;
  r = disk_pread (d, &io, buf, d->pi.interval, lba * d->pi.interval);
  FUZZ_ASSERT (r == -1 && errno == EIO,
               "block %llu reads fine after inject %s",
               (unsigned long long) lba, kind);
  free (buf);
  n = stats_events_since (&d->stats, 0, ev, 16);
  FUZZ_ASSERT (n > 0 && ev[n - 1].lba == lba &&
               (ev[n - 1].check == want || !clean),
               "inject %s %llu: read failed the wrong check", kind,
               (unsigned long long) lba);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  struct fuzz_input in = { data, size };
  const struct fuzz_config *c = fuzz_config_pick (fuzz_u8 (&in));
  const struct disk_io dio = { .conn = 1, .view = PROFILE_VIEW_DATA };
  struct disk_config cfg = { 0 };
  struct disk_config cfg0;
  struct pi_params pp, pp0;
  struct disk *d;
  uint8_t *before, *after, *fill;
  char prof0[2 * PROFILE_LINE_MAX], prof[2 * PROFILE_LINE_MAX];
  char *line;
  uint64_t stored, iv, ts, i;
  unsigned nlines;
  int fd0;

  fd0 = lowest_free_fd ();
  fuzz_config_params (c, &pp);
  fuzz_disk_config (c, &pp, NBLOCKS, &cfg);
  cfg.event_ring = 8;           /* small: the ring wraps */
  cfg.error = quiet_error;
  d = disk_open (&cfg);
  FUZZ_ASSERT (d != NULL, "disk_open failed");

  iv = c->interval;
  ts = pp.format->tuple_size;
  stored = NBLOCKS * (iv + ts);
  before = malloc (stored);
  after = malloc (stored);
  fill = malloc (NWRITTEN * iv);
  line = malloc (CTL_LINE_MAX + 1);
  FUZZ_ASSERT (before && after && fill && line, "out of memory");
  for (i = 0; i < NWRITTEN * iv; i++)
    fill[i] = (uint8_t) (i * 7 + i / iv);
  FUZZ_ASSERT (disk_pwrite (d, &dio, fill, NWRITTEN * iv, 0, false) == 0,
               "initial write failed");

  cfg0 = d->cfg;
  pp0 = d->pi;
  profiles (d, prof0);

  for (nlines = 0; nlines < MAX_LINES && in.len > 0; nlines++) {
    const uint8_t *nl = memchr (in.p, '\n', in.len);
    size_t len = nl ? (size_t) (nl - in.p) : in.len;
    struct fuzz_input rest = { in.p + 1, len > 0 ? len - 1 : 0 };
    const char *verb_kind = NULL;
    uint64_t inject_lba = 0;
    json_t *j;
    char *reply;

    if (len > 0 && in.p[0] == 0x01) {
      cause_failure (d, &rest);
      goto next;
    }
    if (len > CTL_LINE_MAX || memchr (in.p, '\0', len) != NULL)
      goto next;                /* the socket thread answers these */
    memcpy (line, in.p, len);
    line[len] = '\0';

    snapshot (d, before);
    reply = ctl_handle_line (d, line);
    j = check_reply (line, reply);

    /* What may have changed: only a block a successful inject named. */
    if (json_is_true (json_object_get (j, "ok")) &&
        json_is_string (json_object_get (j, "kind"))) {
      verb_kind = json_string_value (json_object_get (j, "kind"));
      FUZZ_ASSERT (json_is_integer (json_object_get (j, "lba")),
                   "inject reply without lba: %s", reply);
      inject_lba = json_integer_value (json_object_get (j, "lba"));
      FUZZ_ASSERT (inject_lba < NBLOCKS, "inject reply lba: %s", reply);
    }
    snapshot (d, after);
    for (i = 0; i < NBLOCKS; i++) {
      bool same = memcmp (before + i * iv, after + i * iv, iv) == 0 &&
        memcmp (before + NBLOCKS * iv + i * ts,
                after + NBLOCKS * iv + i * ts, ts) == 0;
      FUZZ_ASSERT (same || (verb_kind && i == inject_lba),
                   "'%s' changed stored block %llu; reply %s", line,
                   (unsigned long long) i, reply);
    }
    FUZZ_ASSERT (same_config (&cfg0, &d->cfg, &pp0, &d->pi) &&
                 d->nblocks == NBLOCKS,
                 "'%s' changed the device configuration", line);
    profiles (d, prof);
    FUZZ_ASSERT (memcmp (prof0, prof, sizeof prof) == 0,
                 "'%s' changed a profile", line);
    if (verb_kind)
      check_injected (d, verb_kind, inject_lba,
                      block_clean (d, before, inject_lba));
    json_decref (j);
    free (reply);

  next:
    if (nl == NULL)
      break;
    in.p = nl + 1;
    in.len -= len + 1;
  }

  free (before);
  free (after);
  free (fill);
  free (line);
  disk_close (d);
  FUZZ_ASSERT (lowest_free_fd () == fd0, "a file descriptor was left open");
  return 0;
}
