/* SPDX-License-Identifier: BSD-3-Clause */
/* example-write: write to a stabledif disk with libstabledif, keeping a
 * buffer stable the way a page cache would, and read it back with its
 * protection information; then the same with an interleaved buffer
 * (data and tuples together), once with the library's PI and once with
 * the caller's.
 *
 *   nbdkit -U - stabledif size=1M --run './example-write "$uri"'
 *
 * Build: cc example-write.c $(pkg-config --cflags --libs stabledif)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stabledif.h>

#define NBLOCKS 8

/* Print the library's error and exit. */
static void
die (const char *what)
{
  fprintf (stderr, "example-write: %s: %s\n", what, stabledif_get_error ());
  exit (EXIT_FAILURE);
}

/* A big-endian field of N bytes. */
static uint64_t
be (const unsigned char *p, int n)
{
  uint64_t v = 0;

  while (n-- > 0)
    v = (v << 8) | *p++;
  return v;
}

int
main (int argc, char *argv[])
{
  struct stabledif_handle *h;
  struct stabledif_stats st;
  unsigned char *buf, *back, *pi;
  int64_t interval;
  int tuple, i;
  size_t len;

  if (argc != 2) {
    fprintf (stderr, "usage: example-write NBD-URI\n");
    exit (EXIT_FAILURE);
  }

  /* Connect; the URI needs no export name (the library uses "dif"). */
  h = stabledif_create ();
  if (h == NULL)
    die ("create");
  if (stabledif_connect_uri (h, argv[1]) == -1)
    die ("connect");
  interval = stabledif_get_interval (h);
  tuple = stabledif_get_tuple_size (h);
  printf ("device: %s\n", stabledif_get_profile (h));
  printf ("format=%s interval=%" PRIi64 " stable_writes=%d policy=%s\n",
          stabledif_get_format (h), interval,
          stabledif_get_stable_writes (h),
          stabledif_policy_name (stabledif_get_effective_policy (h)));

  len = NBLOCKS * (size_t) interval;
  buf = malloc (len);
  back = malloc (len);
  pi = malloc (NBLOCKS * (size_t) (tuple ? tuple : 1));
  if (!buf || !back || !pi) {
    perror ("malloc");
    exit (EXIT_FAILURE);
  }

  /* Write the buffer asynchronously: PI is computed from it now. */
  memset (buf, 'A', len);
  if (stabledif_aio_pwrite (h, buf, len, 0, 0, NULL, NULL) == -1)
    die ("aio_pwrite");

  /* Before changing the buffer, wait until it is stable: under policy
   * wait (the default on a device that checks PI) this blocks until the
   * write above is done; on a device without PI it returns at once. */
  if (stabledif_wait_stable (h, buf, len) == -1)
    die ("wait_stable");
  memset (buf, 'B', len);
  if (stabledif_pwrite (h, buf, len, len, STABLEDIF_CMD_FLAG_FUA) == -1)
    die ("pwrite");
  if (stabledif_wait_all (h) == -1)
    die ("wait_all");

  /* Read both back: the library verifies the PI of every block.  The
   * first write stored the 'A's -- or, on a device without PI where the
   * default policy does not keep pages stable, possibly some of the
   * newer 'B's: nothing checks that, and nothing needs to. */
  if (stabledif_pread (h, back, len, 0, pi, 0) == -1)
    die ("pread");
  for (i = 0; i < (int) len; ++i)
    if (back[i] != 'A' &&
        (back[i] != 'B' || stabledif_get_stable_writes (h) == 1)) {
      fprintf (stderr, "example-write: byte %d reads back wrong\n", i);
      exit (EXIT_FAILURE);
    }
  for (i = 0; i < NBLOCKS && tuple > 0; ++i) {
    int g = tuple == 8 ? 2 : 8;        /* guard bytes */
    printf ("LBA %d: guard 0x%" PRIx64 " app 0x%" PRIx64 " ref 0x%" PRIx64
            "\n", i, be (pi + i * tuple, g), be (pi + i * tuple + g, 2),
            be (pi + i * tuple + g + 2, tuple - g - 2));
  }
  if (stabledif_pread (h, back, len, len, NULL, 0) == -1)
    die ("pread");
  if (memcmp (back, buf, len) != 0) {
    fprintf (stderr, "example-write: second write reads back wrong\n");
    exit (EXIT_FAILURE);
  }

  stabledif_get_stats (h, &st, sizeof st);
  printf ("writes=%" PRIu64 " reads=%" PRIu64 " waits=%" PRIu64
          " rejected=%" PRIu64 "\n", st.writes, st.reads, st.waits,
          st.rejected_writes);

  /* Interleaved ("extended LBA") buffers, as NVMe and SPDK use them:
   * each block's data followed by its tuple.  The library fills the
   * tuples in place and sends the buffer itself (no copy); then the
   * same blocks go again with the caller's PI -- the tuples just filled
   * -- checked at submit and sent unchanged; a read verifies them in
   * place. */
  if (tuple > 0) {
    const size_t ext = (size_t) interval + (size_t) tuple;
    unsigned char *il = malloc (NBLOCKS * ext), *il2 = malloc (NBLOCKS * ext);
    struct stabledif_pi d = { .flags = STABLEDIF_PI_INTERLEAVED,
                              .app_mask = 0xffff };
    int g = tuple == 8 ? 2 : 8;

    if (!il || !il2) {
      perror ("malloc");
      exit (EXIT_FAILURE);
    }
    if (stabledif_get_app_tag (h, &d.app_tag, NULL) == -1)
      die ("get_app_tag");
    for (i = 0; i < NBLOCKS; ++i)
      memset (il + i * ext, 'C', (size_t) interval);
    if (stabledif_pwrite_pi (h, il, len, 2 * len, &d, 0) == -1)
      die ("pwrite_pi");
    printf ("interleaved LBA %d: guard 0x%" PRIx64 " ref 0x%" PRIx64 "\n",
            2 * NBLOCKS, be (il + interval, g),
            be (il + interval + g + 2, tuple - g - 2));
    d.flags = STABLEDIF_PI_INTERLEAVED | STABLEDIF_PI_CALLER |
      STABLEDIF_PI_CHECK_ALL;
    if (stabledif_pwrite_pi (h, il, len, 2 * len, &d, 0) == -1)
      die ("pwrite_pi (caller PI)");
    d.flags = STABLEDIF_PI_INTERLEAVED | STABLEDIF_PI_CHECK_ALL;
    if (stabledif_pread_pi (h, il2, len, 2 * len, &d, 0) == -1)
      die ("pread_pi");
    if (memcmp (il, il2, NBLOCKS * ext) != 0) {
      fprintf (stderr, "example-write: interleaved blocks read back "
               "wrong\n");
      exit (EXIT_FAILURE);
    }
    printf ("interleaved: written twice, read back verified\n");
    free (il);
    free (il2);
  }

  stabledif_close (h);
  free (buf);
  free (back);
  free (pi);
  printf ("ok\n");
  return EXIT_SUCCESS;
}
