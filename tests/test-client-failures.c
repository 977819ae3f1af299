/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: how libstabledif reports failures it cannot blame on a
 * changed buffer: the device failing writes or reads by itself (nbdkit's
 * error filter in front of the plugin), and the connection dying.
 *
 *   test-client-failures URI eio-write
 *   test-client-failures URI eio-read
 *   test-client-failures URI lost PIDFILE
 *   test-client-failures URI lost-in-callback PIDFILE SOCKET
 *   test-client-failures URI split-rejected MAX
 *   test-client-failures URI chunks-split|chunks-short|chunks-overlap
 *
 * lost: the program kills the server (its pid is in PIDFILE) while
 * requests are in flight; they must fail, later calls must fail with
 * ENOTCONN, and nothing may hang.  lost-in-callback: a completion
 * callback kills the server (SOCKET is where it listens) and submits
 * more writes, which must fail with ENOTCONN too.
 *
 * chunks-*: the server is tests/nbd-chunky-server.py in that mode, and
 * every read reply comes in chunks shaped on purpose.  libstabledif does
 * not have libnbd zero its read buffers, so it must see for itself
 * whether the chunks filled every byte once: out of order and complete
 * (split) the read works and its data is the server's; half of it
 * (short) or a block filled twice (overlap) fail the read with EIO, a
 * message saying how much was filled, and a read error in the counters.
 */
#include <config.h>

#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

#include "test-client-util.h"

static struct stabledif_handle *h;
static uint32_t iv;

static int reports, report_blocks;
static bool report_rejected;

static void
on_forensics (void *user_data, const struct stabledif_forensics_report *r)
{
  reports++;
  report_blocks = (int) r->nblocks;
  report_rejected = r->rejected;
}

static void
eio_write (void)
{
  uint8_t *b = xmalloc (4 * iv), *back = xmalloc (20 * iv);
  struct stabledif_stats st;
  struct done d = { .ran = false };
  size_t i;
  int k;

  fill_pattern (b, 4 * iv, 1);
  OK (stabledif_set_forensics (h, true));
  OK (stabledif_set_forensics_callback (h, on_forensics, NULL));
  FAILS (stabledif_pwrite (h, b, 4 * iv, 8 * iv, 0), EIO,
         "stabledif_pwrite: write rejected by device (EIO), LBA 8-11: the "
         "data sent matched the guards computed at submit, so the client "
         "cannot name the failing block");
  CHECK (reports == 1 && report_rejected && report_blocks == 0,
         "forensics: %d reports, rejected %d, %d blocks", reports,
         report_rejected, report_blocks);

  /* Asynchronous, with and without a callback. */
  OK (stabledif_aio_pwrite (h, b, iv, 0, 0, on_done, &d));
  OK (stabledif_wait_all (h));
  CHECK (d.ran && d.error == EIO, "callback error %d", d.error);
  CHECK (strstr (d.msg, "stabledif_aio_pwrite: write rejected by device "
                 "(EIO), LBA 0-0") != NULL, "callback message: %s", d.msg);
  OK (stabledif_aio_pwrite (h, b, iv, iv, 0, NULL, NULL));
  OK (stabledif_aio_pwrite (h, b, iv, 2 * iv, 0, NULL, NULL));
  /* The first failure to complete is reported, once. */
  FAILS (stabledif_wait_all (h), EIO, "stabledif_aio_pwrite: write rejected "
         "by device (EIO), LBA ");
  CHECK (strstr (stabledif_get_error (), "LBA 1-1") ||
         strstr (stabledif_get_error (), "LBA 2-2"), "wrong request");
  OK (stabledif_wait_all (h));

  OK (stabledif_get_stats (h, &st, sizeof st));
  CHECK (st.writes == 4 && st.write_errors == 4 && st.rejected_writes == 4,
         "stats: %" PRIu64 " writes, %" PRIu64 " errors, %" PRIu64
         " rejected", st.writes, st.write_errors, st.rejected_writes);
  CHECK (st.mismatches == 0, "mismatches %" PRIu64, st.mismatches);

  /* Without forensics, under wait nothing is checked at copy-out: the
   * rejected write is rechecked over the blocks sent, and none changed.
   * Under snapshot the blocks were built at submit. */
  OK (stabledif_set_forensics (h, false));
  for (k = 0; k < 2; k++) {
    OK (stabledif_set_policy (h, k ? STABLEDIF_POLICY_SNAPSHOT
                              : STABLEDIF_POLICY_WAIT));
    FAILS (stabledif_pwrite (h, b, 4 * iv, 16 * iv, 0), EIO,
           "stabledif_pwrite: write rejected by device (EIO), LBA 16-19: "
           "the data sent matched the guards computed at submit");
  }
  OK (stabledif_get_stats (h, &st, sizeof st));
  CHECK (st.writes == 6 && st.rejected_writes == 6 && st.snapshots == 1 &&
         st.mismatches == 0, "stats: %" PRIu64 " writes, %" PRIu64
         " rejected, %" PRIu64 " snapshots, %" PRIu64 " mismatches",
         st.writes, st.rejected_writes, st.snapshots, st.mismatches);

  /* Nothing of any rejected write was stored: the device reads as never
   * written (zeros, PI escaped), with no PI error. */
  memset (back, 0xee, 20 * iv);
  OK (stabledif_pread (h, back, 20 * iv, 0, NULL, 0));
  for (i = 0; i < 20 * iv; i++)
    CHECK (back[i] == 0, "byte %zu reads 0x%02x after rejected writes", i,
           back[i]);
  OK (stabledif_get_stats (h, &st, sizeof st));
  CHECK (st.read_pi_errors == 0, "PI errors on read");
  free (back);
  free (b);
}

static void
eio_read (void)
{
  uint8_t *b = xmalloc (2 * iv);
  struct stabledif_stats st;

  FAILS (stabledif_pread (h, b, 2 * iv, 4 * iv, NULL, 0), EIO,
         "stabledif_pread: the device failed the read of data offset");
  FAILS (stabledif_pread (h, b, 2 * iv, 4 * iv, NULL, 0), EIO,
         "(LBA 4-5): Input/output error");
  OK (stabledif_get_stats (h, &st, sizeof st));
  CHECK (st.reads == 2 && st.read_errors == 2 && st.read_pi_errors == 0,
         "stats: %" PRIu64 " reads, %" PRIu64 " errors", st.reads,
         st.read_errors);
  free (b);
}

/* The process ID in PIDFILE. */
static long
read_pid (const char *pidfile)
{
  FILE *fp = fopen (pidfile, "r");
  long pid;

  CHECK (fp && fscanf (fp, "%ld", &pid) == 1, "reading %s", pidfile);
  fclose (fp);
  return pid;
}

/* Kill the server PID and return once its socket SOCK refuses
 * connections (its process, and with it our connection, is gone).
 * Bounded: 10 s. */
static void
kill_server (long pid, const char *sock)
{
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  int i, fd, r;

  CHECK (kill ((pid_t) pid, SIGKILL) == 0, "kill %ld", pid);
  snprintf (sun.sun_path, sizeof sun.sun_path, "%s", sock);
  for (i = 0; i < 1000; i++) {
    fd = socket (AF_UNIX, SOCK_STREAM, 0);
    CHECK (fd >= 0, "socket");
    r = connect (fd, (struct sockaddr *) &sun, sizeof sun);
    close (fd);
    if (r == -1)
      return;
    usleep (10000);
  }
  CHECK (false, "%s still accepts connections 10 s after kill", sock);
}

static void
lost (const char *pidfile)
{
  uint8_t *b = xmalloc (4 * iv);
  struct done d[3] = { { .ran = false }, { .ran = false }, { .ran = false } };
  long pid;
  int i;

  fill_pattern (b, 4 * iv, 2);
  OK (stabledif_pwrite (h, b, iv, 0, 0));       /* the connection works */

  /* Requests in flight (held back by the race delay) when it dies. */
  OK (stabledif_set_race_delay_us (h, 200000));
  OK (stabledif_aio_pwrite (h, b, iv, iv, 0, on_done, &d[0]));
  OK (stabledif_aio_pread (h, b + iv, iv, 0, NULL, 0, on_done, &d[1]));
  OK (stabledif_aio_flush (h, 0, on_done, &d[2]));

  pid = read_pid (pidfile);
  CHECK (kill ((pid_t) pid, SIGKILL) == 0, "kill %ld", pid);

  OK (stabledif_wait_all (h));
  for (i = 0; i < 3; ++i) {
    CHECK (d[i].ran && d[i].error == ENOTCONN, "request %d: error %d (%s)",
           i, d[i].error, d[i].msg);
    CHECK (strstr (d[i].msg, "connection to the device lost") != NULL,
           "request %d: message: %s", i, d[i].msg);
  }
  printf ("in flight at the loss: %s\n", d[0].msg);

  /* From now on, every request fails at once. */
  FAILS (stabledif_pwrite (h, b, iv, 0, 0), ENOTCONN,
         "stabledif_pwrite: connection to the device lost");
  FAILS (stabledif_aio_pread (h, b, iv, 0, NULL, 0, NULL, NULL), ENOTCONN,
         "connection to the device lost");
  FAILS (stabledif_flush (h, 0), ENOTCONN, "lost");
  /* Waiting for stable pages does not hang either. */
  OK (stabledif_wait_stable (h, b, 4 * iv));
  CHECK (stabledif_get_in_flight (h) == 0, "requests left in flight");
  free (b);
}

/* lost-in-callback: a completion callback finds the server dead and
 * submits more writes; the I/O thread issues them after the loss. */
static long cb_pid;
static const char *cb_sock;
static uint8_t *cb_buf;
static struct done later[3];

static void
kill_then_submit (void *user_data, int error)
{
  int i;

  CHECK (error == 0, "first write: error %d", error);
  kill_server (cb_pid, cb_sock);
  for (i = 0; i < 3; i++)
    CHECK (stabledif_aio_pwrite (h, cb_buf, iv, (uint64_t) i * iv, 0,
                                 on_done, &later[i]) > 0,
           "submitting write %d from the callback: %s", i,
           stabledif_get_error ());
}

/* Every write submitted after the loss fails with ENOTCONN and a
 * message that says the connection was lost (not libnbd's EINVAL for a
 * dead handle, nor "the device failed"), whether the I/O thread found
 * the loss sending one of them or before. */
static void
lost_in_callback (const char *pidfile, const char *sock)
{
  int i;

  cb_pid = read_pid (pidfile);
  cb_sock = sock;
  cb_buf = xmalloc (iv);
  fill_pattern (cb_buf, iv, 4);
  OK (stabledif_aio_pwrite (h, cb_buf, iv, 0, 0, kill_then_submit, NULL));
  OK (stabledif_wait_all (h));
  for (i = 0; i < 3; i++) {
    CHECK (atomic_load (&later[i].ran), "write %d: no completion", i);
    CHECK (later[i].error == ENOTCONN, "write %d: error %d (%s)", i,
           later[i].error, later[i].msg);
    CHECK (strstr (later[i].msg, "stabledif_aio_pwrite: connection to the "
                   "device lost") != NULL, "write %d: message: %s", i,
           later[i].msg);
    printf ("after the loss: %s\n", later[i].msg);
  }
  FAILS (stabledif_pwrite (h, cb_buf, iv, 0, 0), ENOTCONN,
         "connection to the device lost");
  CHECK (stabledif_get_in_flight (h) == 0, "requests left in flight");
  free (cb_buf);
}

/* split-rejected: the server takes at most MAX bytes per request, so a
 * longer write goes as several commands; when the data of one command
 * changed after its checksum (policy none), the device rejects that
 * command alone: the write fails with EIO naming the changed block, the
 * blocks of that command keep their old data, those of the others are
 * stored (libstabledif(3), "Nothing of a rejected write is stored when
 * it went to the device as one command"). */
static void
split_rejected (uint64_t max)
{
  const uint64_t per_cmd = max / (iv + (uint64_t) stabledif_get_tuple_size (h));
  const uint64_t nb = 2 * per_cmd + 2;          /* three commands */
  const uint64_t bad = per_cmd + 3;             /* in the second */
  uint8_t *old = xmalloc (nb * iv), *buf = xmalloc (nb * iv);
  uint8_t *back = xmalloc (nb * iv), *want = xmalloc (nb * iv);
  uint8_t *sent = xmalloc (nb * iv);
  char lba[64];

  CHECK (per_cmd >= 1 && per_cmd < 64, "%" PRIu64 " blocks per command",
         per_cmd);
  fill_pattern (old, nb * iv, 5);
  OK (stabledif_pwrite (h, old, nb * iv, 0, 0));

  fill_pattern (buf, nb * iv, 6);
  memcpy (sent, buf, nb * iv);
  OK (stabledif_set_unsafe (h, true));
  OK (stabledif_set_policy (h, STABLEDIF_POLICY_NONE));
  OK (stabledif_set_race_delay_us (h, 200000));
  OK (stabledif_aio_pwrite (h, buf, nb * iv, 0, 0, NULL, NULL));
  buf[bad * iv + 17] ^= 0xff;                   /* long before copy-out */
  sent[bad * iv + 17] ^= 0xff;
  snprintf (lba, sizeof lba, "LBA %" PRIu64, bad);
  FAILS (stabledif_wait_all (h), EIO, "write rejected by device (EIO)");
  CHECK (strstr (stabledif_get_error (), lba) != NULL,
         "the error does not name %s: %s", lba, stabledif_get_error ());
  OK (stabledif_set_race_delay_us (h, 0));

  /* The first and third commands stored (as sent), the second not. */
  memcpy (want, sent, nb * iv);
  memcpy (want + per_cmd * iv, old + per_cmd * iv, per_cmd * iv);
  OK (stabledif_pread (h, back, nb * iv, 0, NULL, 0));
  CHECK (memcmp (back, want, nb * iv) == 0, "stored data: the rejected "
         "command's blocks changed, or another command's were not stored");
  printf ("split write of %" PRIu64 " blocks, %" PRIu64 " per command: "
          "blocks %" PRIu64 "-%" PRIu64 " kept their data\n", nb, per_cmd,
          per_cmd, 2 * per_cmd - 1);
  free (old); free (buf); free (back); free (want); free (sent);
}

/* The data of block LBA on tests/nbd-chunky-server.py. */
static uint8_t
chunky_byte (uint64_t lba, uint32_t i)
{
  return (uint8_t) ((lba * 7 + i * 13) & 0xff);
}

static void
chunks (const char *mode)
{
  enum { LBA = 4, N = 8 };
  uint8_t *b = xmalloc (N * iv);
  struct stabledif_stats st;
  uint64_t k;
  uint32_t i;

  CHECK (iv == 512, "interval %" PRIu32 ", the server has 512", iv);
  memset (b, 0x5a, N * iv);
  if (strcmp (mode, "chunks-split") == 0) {
    OK (stabledif_pread (h, b, N * iv, LBA * iv, NULL, 0));
    for (k = 0; k < N; k++)
      for (i = 0; i < iv; i++)
        CHECK (b[k * iv + i] == chunky_byte (LBA + k, i),
               "block %" PRIu64 " byte %" PRIu32 ": 0x%02x", LBA + k, i,
               b[k * iv + i]);
  }
  else if (strcmp (mode, "chunks-short") == 0)
    FAILS (stabledif_pread (h, b, N * iv, LBA * iv, NULL, 0), EIO,
           "the server's reply to a read at LBA 4 filled 2080 of its 4160 "
           "bytes");
  else if (strcmp (mode, "chunks-overlap") == 0)
    FAILS (stabledif_pread (h, b, N * iv, LBA * iv, NULL, 0), EIO,
           "(chunks overlapped or lay outside it)");
  else
    CHECK (false, "unknown mode %s", mode);
  OK (stabledif_get_stats (h, &st, sizeof st));
  CHECK (st.reads == 1 && st.read_pi_errors == 0 &&
         st.read_errors == (strcmp (mode, "chunks-split") != 0),
         "stats: %" PRIu64 " reads, %" PRIu64 " errors, %" PRIu64
         " PI errors", st.reads, st.read_errors, st.read_pi_errors);
  free (b);
}

int
main (int argc, char *argv[])
{
  progname = "test-client-failures";
  if (argc < 3) {
    fprintf (stderr, "usage: %s URI eio-write|eio-read|lost PIDFILE|"
             "lost-in-callback PIDFILE SOCKET|split-rejected MAX|"
             "chunks-split|chunks-short|chunks-overlap\n", progname);
    exit (EXIT_FAILURE);
  }
  h = stabledif_create ();
  CHECK (h != NULL, "create");
  OK (stabledif_connect_uri (h, argv[1]));
  iv = (uint32_t) stabledif_get_interval (h);

  if (strcmp (argv[2], "eio-write") == 0)
    eio_write ();
  else if (strcmp (argv[2], "eio-read") == 0)
    eio_read ();
  else if (strcmp (argv[2], "lost") == 0 && argc == 4)
    lost (argv[3]);
  else if (strcmp (argv[2], "lost-in-callback") == 0 && argc == 5)
    lost_in_callback (argv[3], argv[4]);
  else if (strcmp (argv[2], "split-rejected") == 0 && argc == 4)
    split_rejected (strtoull (argv[3], NULL, 10));
  else if (strncmp (argv[2], "chunks-", 7) == 0)
    chunks (argv[2]);
  else
    CHECK (false, "unknown mode %s", argv[2]);

  stabledif_close (h);
  printf ("%s: %s: ok\n", progname, argv[2]);
  return EXIT_SUCCESS;
}
