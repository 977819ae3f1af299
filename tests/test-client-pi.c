/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: libstabledif's _pi calls against the real plugin, one Check
 * test per mode (run by test-client-pi.sh for every format and interval,
 * on a device with an app tag; format none without):
 *
 *   test-client-pi URI MANIFEST
 *
 *  - generated: the library's PI, separate and interleaved (tuples
 *    filled in the caller's buffer in place), with the request's app
 *    tag; one the device does not take is rejected there, naming the
 *    block and the app check, and nothing is stored;
 *  - caller checked: the caller's tuples pass the checks asked and are
 *    stored as they are; a wrong guard, app or ref tag fails the call
 *    with EILSEQ naming the LBA and check, and nothing is stored;
 *  - caller unchecked: a wrong guard, app or ref tag reaches the device,
 *    which rejects it; the message names the block and check; nothing is
 *    stored;
 *  - interleaved reads are verified in place, with the checks asked;
 *  - every stable-page policy with an interleaved buffer changed after
 *    submit: rejected under none (forensics name the bytes), never under
 *    the others, which store the data as it was at submit;
 *  - stabledif_generate_pi makes the tuples a generated write stores, in
 *    both layouts; sent later as the caller's they are stored, and data
 *    changed after they were made is rejected by the device.
 *
 * Every block stored is listed in MANIFEST ("LBA NBLOCKS APP REF", REF
 * -1 for "the LBA"), for test-client-pi.sh to check the stored PI with
 * tests/pi_ref.py, independently of the library.
 */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>

#include <check.h>

#include "test-client-util.h"
#include "pi.h"

static const char *uri;         /* the device */
static const char *manifest;    /* where stored blocks are listed */

/* Per test: the handle and the device's geometry. */
static struct stabledif_handle *h;
static struct pi_params dev;    /* the device's PI parameters */
static uint32_t iv, ts, es;     /* interval, tuple size, extended block */
static uint16_t app;            /* the app tag the device takes */

/* Connect a new handle (each test runs in its own process). */
static void
setup (void)
{
  uint16_t mask;
  int has;

  h = stabledif_create ();
  CHECK (h != NULL, "create");
  OK (stabledif_connect_uri (h, uri));
  dev.format = pi_format_lookup (stabledif_get_format (h));
  CHECK (dev.format != NULL, "unknown format %s", stabledif_get_format (h));
  dev.interval = iv = (uint32_t) stabledif_get_interval (h);
  ts = (uint32_t) stabledif_get_tuple_size (h);
  es = iv + ts;
  has = stabledif_get_app_tag (h, &app, &mask);
  OK (has);
  dev.check_app = has == 1;
  dev.app_tag = app;
  dev.app_mask = mask;
}

static void
teardown (void)
{
  stabledif_close (h);
}

/* List NB blocks at LBA as stored with APP and REF (-1: the LBA). */
static void
stored (uint64_t lba, uint64_t nb, uint16_t tag, int64_t ref)
{
  FILE *fp = fopen (manifest, "a");

  CHECK (fp != NULL, "%s: %s", manifest, strerror (errno));
  fprintf (fp, "%" PRIu64 " %" PRIu64 " %u %" PRId64 "\n", lba, nb,
           (unsigned) tag, ref);
  CHECK (fclose (fp) == 0, "%s", manifest);
}

/* The reference tag the caller's tuples carry in these tests: the LBA
 * where the format checks it, a constant for type 3. */
static const int64_t REF3 = 0x5a5a5a;
static int64_t
caller_ref (void)
{
  return dev.format->type == PI_TYPE_3 ? REF3 : -1;
}

/* Extended blocks at EXT for the data at DATA (NB blocks at LBA): the
 * tuples generated with app tag TAG, ref as caller_ref(). */
static void
make_ext (uint8_t *ext, const uint8_t *data, uint64_t nb, uint64_t lba,
          uint16_t tag)
{
  struct pi_params p = dev;
  uint64_t i;

  p.app_tag = tag;
  for (i = 0; i < nb; i++)
    memcpy (ext + i * es, data + i * iv, iv);
  pi_generate_ext (&p, ext, nb, lba);
  if (caller_ref () != -1)
    for (i = 0; i < nb; i++) {
      struct pi_tuple t;
      pi_tuple_decode (dev.format, ext + i * es + iv, &t);
      t.ref = (uint64_t) REF3;
      pi_tuple_encode (dev.format, &t, ext + i * es + iv);
    }
}

/* Split extended blocks into data and packed tuples. */
static void
split (const uint8_t *ext, uint64_t nb, uint8_t *data, uint8_t *tuples)
{
  pi_split_ext (&dev, ext, data, tuples, nb);
}

/* Read NB blocks at LBA as extended blocks (the device's checks). */
static uint8_t *
read_ext (uint64_t lba, uint64_t nb)
{
  uint8_t *ext = xmalloc (nb * es);
  struct stabledif_pi pi = {
    .flags = STABLEDIF_PI_INTERLEAVED | STABLEDIF_PI_CHECK_GUARD |
             STABLEDIF_PI_CHECK_REF, .app_tag = 0, .app_mask = 0,
  };

  OK (stabledif_pread_pi (h, ext, nb * iv, lba * iv, &pi, 0));
  return ext;
}

/* The NB blocks at LBA hold exactly the extended blocks WANT. */
static void
expect_ext (const uint8_t *want, uint64_t lba, uint64_t nb, const char *what)
{
  uint8_t *got = read_ext (lba, nb);

  CHECK (memcmp (got, want, nb * es) == 0, "%s: stored blocks differ",
         what);
  free (got);
}

/* Write a known good state of NB blocks at LBA (generated PI with the
 * device's app tag) and return it as extended blocks. */
static uint8_t *
good_state (uint64_t lba, uint64_t nb, uint64_t seed)
{
  uint8_t *data = xmalloc (nb * iv);
  uint8_t *ext;

  fill_pattern (data, nb * iv, seed);
  OK (stabledif_pwrite (h, data, nb * iv, lba * iv, 0));
  stored (lba, nb, app, dev.format->type == PI_TYPE_3 ? 0 : -1);
  ext = read_ext (lba, nb);
  free (data);
  return ext;
}

/* Set field CHECK (guard, app or ref) of block I's tuple at TUPLE wrong. */
static void
spoil (uint8_t *tuple, enum pi_check check)
{
  struct pi_tuple t;

  pi_tuple_decode (dev.format, tuple, &t);
  switch (check) {
  case PI_CHECK_GUARD: t.guard ^= 1; break;
  case PI_CHECK_APP: t.app ^= 0x0100; break;
  case PI_CHECK_REF: t.ref ^= 1; break;
  case PI_CHECK_OK: break;
  }
  pi_tuple_encode (dev.format, &t, tuple);
}

/* "... check at LBA N" / "... LBA N: ... CHECK check" in a message. */
static void
expect_names (const char *msg, uint64_t lba, enum pi_check check)
{
  char want[64];

  snprintf (want, sizeof want, "LBA %" PRIu64, lba);
  CHECK (msg && strstr (msg, want), "message does not name %s: %s", want,
         msg ? msg : "(none)");
  snprintf (want, sizeof want, "%s check", pi_check_name (check));
  CHECK (strstr (msg, want), "message does not name the %s: %s", want, msg);
}

/* ---- generated PI ---- */

START_TEST (test_generated)
{
  const uint64_t lba = 16, nb = 4;
  uint8_t *data = xmalloc (nb * iv), *ext = xmalloc (nb * es);
  uint8_t *want = xmalloc (nb * es), *back = xmalloc (nb * iv);
  uint8_t *tuples = xmalloc (nb * ts + 1);
  struct stabledif_pi pi = { .flags = 0, .app_tag = app };
  struct stabledif_pi rd = { .flags = STABLEDIF_PI_CHECK_ALL,
                             .app_tag = app, .app_mask = 0xffff,
                             .tuples = tuples };
  uint64_t i;

  /* Separate: the plain data buffer, the request's app tag. */
  fill_pattern (data, nb * iv, 1);
  OK (stabledif_pwrite_pi (h, data, nb * iv, lba * iv, &pi, 0));
  stored (lba, nb, app, dev.format->type == PI_TYPE_3 ? 0 : -1);
  OK (stabledif_pread_pi (h, back, nb * iv, lba * iv, &rd, 0));
  CHECK (memcmp (back, data, nb * iv) == 0, "separate: data differs");
  pi_generate_sep (&dev, data, want, nb, lba);
  CHECK (ts == 0 || memcmp (tuples, want, nb * ts) == 0,
         "separate: the tuples read are not the generated ones");

  /* Interleaved: the tuple slots are filled in place and sent. */
  fill_pattern (data, nb * iv, 2);
  for (i = 0; i < nb; i++) {
    memcpy (ext + i * es, data + i * iv, iv);
    memset (ext + i * es + iv, 0xab, ts);
  }
  pi.flags = STABLEDIF_PI_INTERLEAVED;
  OK (stabledif_pwrite_pi (h, ext, nb * iv, (lba + nb) * iv, &pi, 0));
  stored (lba + nb, nb, app, dev.format->type == PI_TYPE_3 ? 0 : -1);
  for (i = 0; i < nb; i++)
    memcpy (want + i * es, data + i * iv, iv);
  pi_generate_ext (&dev, want, nb, lba + nb);
  CHECK (memcmp (ext, want, nb * es) == 0,
         "interleaved: the buffer's tuples were not filled in place");
  expect_ext (want, lba + nb, nb, "interleaved");

  /* An app tag the device does not take: rejected there, nothing
   * stored. */
  if (dev.check_app) {
    uint8_t *before = read_ext (lba, nb);
    pi.flags = 0;
    pi.app_tag = app ^ 0x0f0f;
    FAILS (stabledif_pwrite_pi (h, data, nb * iv, lba * iv, &pi, 0), EIO,
           "rejected by device");
    expect_names (stabledif_get_error (), lba, PI_CHECK_APP);
    expect_ext (before, lba, nb, "rejected app tag");
    free (before);
  }
  free (data); free (ext); free (want); free (back); free (tuples);
}
END_TEST

/* ---- caller PI, checked at submit ---- */

/* One layout (INTERLEAVED or separate) of the caller-checked test. */
static void
caller_checked (uint64_t lba, uint32_t layout)
{
  const uint64_t nb = 4;
  uint8_t *data = xmalloc (nb * iv), *ext = xmalloc (nb * es);
  uint8_t *tuples = xmalloc (nb * ts + 1), *sent = xmalloc (nb * es);
  static const enum pi_check bad[] = {
    PI_CHECK_GUARD, PI_CHECK_APP, PI_CHECK_REF,
  };
  static const uint32_t flag[] = {
    STABLEDIF_PI_CHECK_GUARD, STABLEDIF_PI_CHECK_APP, STABLEDIF_PI_CHECK_REF,
  };
  struct stabledif_pi pi = {
    .flags = STABLEDIF_PI_CALLER | STABLEDIF_PI_CHECK_ALL | layout,
    .app_tag = app, .app_mask = 0xffff,
  };
  size_t k;

  /* Good tuples pass every check and are stored as they are. */
  fill_pattern (data, nb * iv, 3 + lba);
  make_ext (ext, data, nb, lba, app);
  memcpy (sent, ext, nb * es);
  split (ext, nb, data, tuples);
  if (layout == 0)
    pi.tuples = tuples;
  OK (stabledif_pwrite_pi (h, layout ? (void *) ext : data, nb * iv,
                           lba * iv, &pi, 0));
  stored (lba, nb, app, caller_ref ());
  CHECK (memcmp (ext, sent, nb * es) == 0,
         "the library changed the caller's tuples");
  expect_ext (sent, lba, nb, "caller checked");

  /* A wrong field, checked: EILSEQ at submit, nothing sent. */
  for (k = 0; k < 3; k++) {
    uint8_t *t = layout ? ext + 2 * es + iv : tuples + 2 * ts;
    struct stabledif_pi one = pi;

    if (bad[k] == PI_CHECK_REF && dev.format->type == PI_TYPE_3)
      continue;                 /* type 3 has no ref tag to check */
    memcpy (ext, sent, nb * es);
    split (ext, nb, data, tuples);
    spoil (t, bad[k]);
    /* Only the check asked for: the others would pass anyway. */
    one.flags = STABLEDIF_PI_CALLER | flag[k] | layout;
    FAILS (stabledif_pwrite_pi (h, layout ? (void *) ext : data, nb * iv,
                                lba * iv, &one, 0), EILSEQ,
           "caller's PI fails");
    expect_names (stabledif_get_error (), lba + 2, bad[k]);
    expect_ext (sent, lba, nb, "caller checked, rejected at submit");
    /* Not asked: not checked at submit (the device then judges it). */
    one.flags = STABLEDIF_PI_CALLER | (STABLEDIF_PI_CHECK_ALL & ~flag[k]) |
      layout;
    if (bad[k] != PI_CHECK_APP || dev.check_app) {
      CHECK (stabledif_pwrite_pi (h, layout ? (void *) ext : data,
                                  nb * iv, lba * iv, &one, 0) == -1 &&
             stabledif_get_errno () == EIO,
             "an unchecked wrong %s was not rejected by the device",
             pi_check_name (bad[k]));
      expect_ext (sent, lba, nb, "caller, device rejected");
    }
  }
  free (data); free (ext); free (tuples); free (sent);
}

START_TEST (test_caller_checked)
{
  if (ts == 0)
    return;
  caller_checked (100, 0);
  caller_checked (120, STABLEDIF_PI_INTERLEAVED);
}
END_TEST

/* ---- caller PI, sent unchecked ---- */

static void
caller_unchecked (uint64_t lba, uint32_t layout)
{
  const uint64_t nb = 4;
  uint8_t *data = xmalloc (nb * iv), *ext = xmalloc (nb * es);
  uint8_t *tuples = xmalloc (nb * ts + 1), *good;
  static const enum pi_check bad[] = {
    PI_CHECK_GUARD, PI_CHECK_APP, PI_CHECK_REF,
  };
  struct stabledif_pi pi = {
    .flags = STABLEDIF_PI_CALLER | layout, .app_tag = 0, .app_mask = 0,
  };
  size_t k;

  good = good_state (lba, nb, 40 + lba);
  for (k = 0; k < 3; k++) {
    uint64_t blk = 1 + k;

    if (bad[k] == PI_CHECK_REF && dev.format->type == PI_TYPE_3)
      continue;                 /* the device checks no ref tag */
    if (bad[k] == PI_CHECK_APP && !dev.check_app)
      continue;                 /* the device checks no app tag */
    fill_pattern (data, nb * iv, 50 + k);
    make_ext (ext, data, nb, lba, app);
    spoil (ext + blk * es + iv, bad[k]);
    split (ext, nb, data, tuples);
    if (layout == 0)
      pi.tuples = tuples;
    FAILS (stabledif_pwrite_pi (h, layout ? (void *) ext : data, nb * iv,
                                lba * iv, &pi, 0), EIO,
           "rejected by device");
    expect_names (stabledif_get_error (), lba + blk, bad[k]);
    expect_ext (good, lba, nb, "caller unchecked, rejected");
  }
  /* Good tuples unchecked: stored as they are. */
  fill_pattern (data, nb * iv, 60 + lba);
  make_ext (ext, data, nb, lba, app);
  split (ext, nb, data, tuples);
  if (layout == 0)
    pi.tuples = tuples;
  OK (stabledif_pwrite_pi (h, layout ? (void *) ext : data, nb * iv,
                           lba * iv, &pi, 0));
  stored (lba, nb, app, caller_ref ());
  expect_ext (ext, lba, nb, "caller unchecked");
  free (data); free (ext); free (tuples); free (good);
}

START_TEST (test_caller_unchecked)
{
  if (ts == 0)
    return;
  caller_unchecked (200, 0);
  caller_unchecked (220, STABLEDIF_PI_INTERLEAVED);
}
END_TEST

/* Under snapshot the caller's tuple buffer is the caller's again when
 * the call returns: freed at once, the write still goes, and its
 * rejection (an app tag the device does not take) is explained from the
 * snapshot. */
START_TEST (test_snapshot_tuples_reused)
{
  const uint64_t lba = 260, nb = 4;
  uint8_t *data, *ext, *tuples, *good;
  struct stabledif_pi pi = {
    .flags = STABLEDIF_PI_CALLER | STABLEDIF_PI_CHECK_GUARD,
  };
  struct done d = { .ran = false };

  if (ts == 0 || !dev.check_app)
    return;
  data = xmalloc (nb * iv);
  ext = xmalloc (nb * es);
  good = good_state (lba, nb, 95);
  OK (stabledif_set_policy (h, STABLEDIF_POLICY_SNAPSHOT));
  OK (stabledif_set_race_delay_us (h, 100000));
  fill_pattern (data, nb * iv, 96);
  make_ext (ext, data, nb, lba, app);
  spoil (ext + 2 * es + iv, PI_CHECK_APP);
  tuples = xmalloc (nb * ts);
  split (ext, nb, data, tuples);
  pi.tuples = tuples;
  OK (stabledif_aio_pwrite_pi (h, data, nb * iv, lba * iv, &pi, 0, on_done,
                               &d));
  memset (tuples, 0, nb * ts);
  free (tuples);
  memset (data, 0, nb * iv);
  OK (stabledif_wait_all (h));
  CHECK (d.error == EIO, "error %d: %s", d.error, d.msg);
  expect_names (d.msg, lba + 2, PI_CHECK_APP);
  expect_ext (good, lba, nb, "snapshot, rejected");
  free (data); free (ext); free (good);
}
END_TEST

/* ---- interleaved reads ---- */

START_TEST (test_read_in_place)
{
  const uint64_t lba = 300, nb = 4;
  uint8_t *good = good_state (lba, nb, 70);
  uint8_t *ext = xmalloc ((nb + 1) * es);
  struct stabledif_pi pi = {
    .flags = STABLEDIF_PI_INTERLEAVED | STABLEDIF_PI_CHECK_ALL,
    .app_tag = app, .app_mask = 0xffff,
  };
  char *msg;

  memset (ext, 0xcd, (nb + 1) * es);
  OK (stabledif_pread_pi (h, ext, nb * iv, lba * iv, &pi, 0));
  CHECK (memcmp (ext, good, nb * es) == 0, "interleaved read differs");
  CHECK (ext[nb * es] == 0xcd, "the read wrote past its buffer");
  if (ts == 0)
    goto out;
  /* The app tag of the request is checked in place: block 0 fails. */
  pi.app_tag = app ^ 0x0001;
  FAILS (stabledif_pread_pi (h, ext, nb * iv, lba * iv, &pi, 0), EIO,
         "PI check failed on read");
  msg = strdup (stabledif_get_error ());
  expect_names (msg, lba, PI_CHECK_APP);
  CHECK (strstr (msg, "blocks failed in all"), "not all failures counted: "
         "%s", msg);
  free (msg);
  /* The same through a separate buffer. */
  pi.flags = STABLEDIF_PI_CHECK_APP;
  FAILS (stabledif_pread_pi (h, ext, nb * iv, lba * iv, &pi, 0), EIO,
         "app check");
  /* Checks not asked are not made: the app tag is not looked at, or
   * nothing is verified at all. */
  pi.flags = STABLEDIF_PI_INTERLEAVED | STABLEDIF_PI_CHECK_GUARD |
    STABLEDIF_PI_CHECK_REF;
  OK (stabledif_pread_pi (h, ext, nb * iv, lba * iv, &pi, 0));
  pi.flags = STABLEDIF_PI_INTERLEAVED;
  OK (stabledif_pread_pi (h, ext, nb * iv, lba * iv, &pi, 0));
  CHECK (memcmp (ext, good, nb * es) == 0, "unverified read differs");
  /* Blocks never written escape every check. */
  pi.flags = STABLEDIF_PI_INTERLEAVED | STABLEDIF_PI_CHECK_ALL;
  OK (stabledif_pread_pi (h, ext, nb * iv, 900 * iv, &pi, 0));
 out:
  free (good); free (ext);
}
END_TEST

/* ---- policies with an interleaved buffer changed after submit ---- */

/* What the forensics callback saw. */
static struct {
  int calls;
  size_t nblocks;
  uint64_t lba;
  size_t nranges;
  struct stabledif_byte_range range;
} rep;

static void
on_forensics (void *user_data, const struct stabledif_forensics_report *r)
{
  (void) user_data;
  rep.calls++;
  rep.nblocks = r->nblocks;
  if (r->nblocks > 0) {
    rep.lba = r->blocks[0].lba;
    rep.nranges = r->blocks[0].nranges;
    if (rep.nranges > 0)
      rep.range = r->blocks[0].ranges[0];
  }
}

/* Under POLICY write NB interleaved blocks at LBA (PI generated, or the
 * caller's checked if CALLER) and change a byte of block 1's data after
 * submit -- after wait_stable where the policy makes the caller wait. */
static void
changed_after_submit (enum stabledif_policy policy, uint64_t lba,
                      bool caller)
{
  const uint64_t nb = 3;
  uint8_t *data = xmalloc (nb * iv), *ext = xmalloc (nb * es);
  uint8_t *orig = xmalloc (nb * es), *good;
  struct stabledif_pi pi = { .flags = STABLEDIF_PI_INTERLEAVED,
                             .app_tag = app, .app_mask = 0xffff };
  struct done d = { .ran = false };

  good = good_state (lba, nb, 80 + lba);
  if (policy == STABLEDIF_POLICY_NONE)
    OK (stabledif_set_unsafe (h, true));
  OK (stabledif_set_policy (h, policy));
  OK (stabledif_set_forensics (h, true));
  OK (stabledif_set_forensics_callback (h, on_forensics, NULL));
  OK (stabledif_set_race_delay_us (h, 200000));
  memset (&rep, 0, sizeof rep);
  fill_pattern (data, nb * iv, 90 + lba);
  make_ext (ext, data, nb, lba, app);
  if (caller)
    pi.flags |= STABLEDIF_PI_CALLER | STABLEDIF_PI_CHECK_ALL;
  OK (stabledif_aio_pwrite_pi (h, ext, nb * iv, lba * iv, &pi, 0, on_done,
                               &d));
  memcpy (orig, ext, nb * es);
  if (policy == STABLEDIF_POLICY_WAIT || policy == STABLEDIF_POLICY_WAIT_SENT)
    OK (stabledif_wait_stable (h, ext, nb * es));
  ext[es + 7] ^= 0xff;          /* block 1, data byte 7 */
  OK (stabledif_wait_all (h));
  CHECK (atomic_load (&d.ran), "no completion");
  if (policy == STABLEDIF_POLICY_NONE) {
    CHECK (d.error == EIO, "under none a changed buffer was not rejected "
           "(error %d)", d.error);
    CHECK (strstr (d.msg, "changed"), "message: %s", d.msg);
    CHECK (rep.calls == 1 && rep.nblocks == 1 && rep.lba == lba + 1 &&
           rep.nranges == 1 && rep.range.offset == 7 &&
           rep.range.length == 1,
           "forensics: %d calls, %zu blocks, LBA %" PRIu64 ", %zu ranges "
           "at %" PRIu32 "+%" PRIu32, rep.calls, rep.nblocks, rep.lba,
           rep.nranges, rep.range.offset, rep.range.length);
    expect_ext (good, lba, nb, "none: rejected");
  }
  else {
    CHECK (d.error == 0, "under %s: %s", stabledif_policy_name (policy),
           d.msg);
    stored (lba, nb, app, caller ? caller_ref ()
            : dev.format->type == PI_TYPE_3 ? 0 : -1);
    expect_ext (orig, lba, nb, stabledif_policy_name (policy));
  }
  OK (stabledif_set_race_delay_us (h, 0));
  OK (stabledif_set_policy (h, STABLEDIF_POLICY_WAIT));
  OK (stabledif_set_unsafe (h, false));
  free (data); free (ext); free (orig); free (good);
}

START_TEST (test_policies)
{
  static const enum stabledif_policy pol[] = {
    STABLEDIF_POLICY_WAIT, STABLEDIF_POLICY_WAIT_SENT,
    STABLEDIF_POLICY_SNAPSHOT, STABLEDIF_POLICY_NONE,
  };
  size_t i;

  if (ts == 0)
    return;
  for (i = 0; i < 4; i++) {
    changed_after_submit (pol[i], 400 + 8 * i, false);
    changed_after_submit (pol[i], 440 + 8 * i, true);
  }
}
END_TEST

/* ---- bad descriptions ---- */

START_TEST (test_bad_description)
{
  uint8_t *buf = xmalloc (2 * es), t[32];
  struct stabledif_pi pi = { .flags = 0x100 };

  FAILS (stabledif_pwrite_pi (h, buf, iv, 0, &pi, 0), EINVAL, "pi->flags");
  pi.flags = STABLEDIF_PI_CALLER;
  FAILS (stabledif_pread_pi (h, buf, iv, 0, &pi, 0), EINVAL,
         "STABLEDIF_PI_CALLER");
  if (ts > 0) {
    FAILS (stabledif_pwrite_pi (h, buf, iv, 0, &pi, 0), EINVAL,
           "pi->tuples is NULL");
    pi.flags = 0;
    pi.tuples = t;
    FAILS (stabledif_pwrite_pi (h, buf, iv, 0, &pi, 0), EINVAL,
           "pi->tuples must be NULL");
    pi.flags = STABLEDIF_PI_INTERLEAVED;
    FAILS (stabledif_pread_pi (h, buf, iv, 0, &pi, 0), EINVAL,
           "pi->tuples must be NULL");
  }
  free (buf);
}
END_TEST

/* ---- the caller as the origin: stabledif_generate_pi ---- */

/* generate_pi gives, in both layouts, exactly the tuples the library
 * stores for a generated write; sent later as the caller's they are
 * stored as they are; data changed after they were made reaches the
 * device as a guard mismatch and nothing is stored. */
START_TEST (test_generate_pi)
{
  const uint64_t lba = 400, nb = 4;
  uint8_t *data = xmalloc (nb * iv), *ext = xmalloc (nb * es);
  uint8_t *tuples = xmalloc (nb * ts + 1), *want_t = xmalloc (nb * ts + 1);
  uint8_t *want_d = xmalloc (nb * iv), *want, *good;
  struct stabledif_pi gen = { .flags = 0, .app_tag = app };
  struct stabledif_pi sep = { .flags = 0, .app_tag = app, .tuples = tuples };
  struct stabledif_pi il = { .flags = STABLEDIF_PI_INTERLEAVED,
                             .app_tag = app };
  uint64_t i;

  /* What a generated write stores... */
  fill_pattern (data, nb * iv, 80);
  OK (stabledif_pwrite_pi (h, data, nb * iv, lba * iv, &gen, 0));
  stored (lba, nb, app, dev.format->type == PI_TYPE_3 ? 0 : -1);
  want = read_ext (lba, nb);
  if (ts == 0) {
    /* No PI: nothing to fill, the buffer is left alone. */
    memcpy (ext, data, nb * iv);
    OK (stabledif_generate_pi (h, ext, nb * iv, lba * iv, &il));
    CHECK (memcmp (ext, data, nb * iv) == 0, "format none: buffer changed");
    goto out;
  }
  split (want, nb, want_d, want_t);
  /* ... is what generate_pi makes, separate ... */
  memset (tuples, 0xee, nb * ts);
  OK (stabledif_generate_pi (h, data, nb * iv, lba * iv, &sep));
  CHECK (memcmp (tuples, want_t, nb * ts) == 0, "separate tuples differ");
  /* ... and interleaved, in place. */
  for (i = 0; i < nb; i++) {
    memcpy (ext + i * es, data + i * iv, iv);
    memset (ext + i * es + iv, 0xee, ts);
  }
  OK (stabledif_generate_pi (h, ext, nb * iv, lba * iv, &il));
  CHECK (memcmp (ext, want, nb * es) == 0, "interleaved blocks differ");

  /* Made now, sent later as the caller's (unchecked): stored as made. */
  fill_pattern (data, nb * iv, 81);
  OK (stabledif_generate_pi (h, data, nb * iv, (lba + nb) * iv, &sep));
  sep.flags = STABLEDIF_PI_CALLER;
  OK (stabledif_pwrite_pi (h, data, nb * iv, (lba + nb) * iv, &sep, 0));
  stored (lba + nb, nb, app, dev.format->type == PI_TYPE_3 ? 0 : -1);
  /* Data changed between making the tuples and sending them: the
   * device rejects the block, the old blocks stay. */
  good = read_ext (lba + nb, nb);
  sep.flags = 0;
  fill_pattern (data, nb * iv, 82);
  OK (stabledif_generate_pi (h, data, nb * iv, (lba + nb) * iv, &sep));
  data[2 * iv + 7] ^= 0x40;
  sep.flags = STABLEDIF_PI_CALLER;
  FAILS (stabledif_pwrite_pi (h, data, nb * iv, (lba + nb) * iv, &sep, 0),
         EIO, "rejected by device");
  expect_names (stabledif_get_error (), lba + nb + 2, PI_CHECK_GUARD);
  expect_ext (good, lba + nb, nb, "generate_pi, data changed");
  free (good);

  /* Bad calls: the layout's buffers, the range, no description. */
  sep.flags = 0;
  sep.tuples = NULL;
  FAILS (stabledif_generate_pi (h, data, nb * iv, 0, &sep), EINVAL,
         "pi->tuples is NULL");
  il.tuples = tuples;
  FAILS (stabledif_generate_pi (h, ext, nb * iv, 0, &il), EINVAL,
         "pi->tuples must be NULL");
  sep.tuples = tuples;
  FAILS (stabledif_generate_pi (h, data, nb * iv, 1, &sep), EINVAL,
         "not a multiple");
  FAILS (stabledif_generate_pi (h, data, nb * iv, 0, NULL), EINVAL,
         "pi is NULL");
 out:
  free (data); free (ext); free (tuples); free (want_t); free (want_d);
  free (want);
}
END_TEST

int
main (int argc, char **argv)
{
  Suite *s = suite_create ("client-pi");
  TCase *tc = tcase_create ("modes");
  SRunner *sr;
  int failed;

  progname = "test-client-pi";
  if (argc != 3) {
    fprintf (stderr, "usage: %s URI MANIFEST\n", progname);
    return EXIT_FAILURE;
  }
  uri = argv[1];
  manifest = argv[2];
  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_set_timeout (tc, 120);
  tcase_add_test (tc, test_generated);
  tcase_add_test (tc, test_caller_checked);
  tcase_add_test (tc, test_caller_unchecked);
  tcase_add_test (tc, test_snapshot_tuples_reused);
  tcase_add_test (tc, test_read_in_place);
  tcase_add_test (tc, test_policies);
  tcase_add_test (tc, test_bad_description);
  tcase_add_test (tc, test_generate_pi);
  suite_add_tcase (s, tc);
  sr = srunner_create (s);
  srunner_run_all (sr, CK_NORMAL);
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
