/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif-attach: attach a stabledif device to /dev/nbdN through the
 * Linux kernel's NBD driver, with the device's stable_writes flag set
 * before the block device goes live.
 *
 *   stabledif-attach [-n /dev/nbdN] URI
 *   stabledif-attach --dry-run URI
 *   stabledif-attach -d /dev/nbdN
 *
 * The handshake is libnbd's (it reads the export description, i.e. the
 * device profile, stabledif(7) PROFILE); the negotiated socket is then given to the
 * kernel over netlink (knbd.c).  See man/stabledif-attach.pod.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <linux/nbd.h>
#include <libnbd.h>

#include "knbd.h"
#include "profile.h"

/* Not every linux/nbd.h names it. */
#ifndef NBD_FLAG_ROTATIONAL
#define NBD_FLAG_ROTATIONAL (1 << 4)
#endif

/* How long -d waits for the kernel to drop the connection, ms. */
#define DETACH_TIMEOUT_MS 10000

/* Room for one error message. */
#define ERR_MAX 1024

/* Exit status of a usage error (as stabledif-ctl's); other errors exit
 * with EXIT_FAILURE (1). */
#define EXIT_USAGE 2

static const char *progname = "stabledif-attach";

/* What the handshake told us about the export. */
struct export_info {
  struct profile profile;       /* the parsed device profile */
  char profile_line[PROFILE_LINE_MAX]; /* the description as sent */
  uint64_t size;                /* export size, bytes */
  uint64_t flags;               /* NBD transmission flags for the kernel */
  int sock;                     /* negotiated socket (ours), or -1 */
};

/* --help: print the help on stdout and exit 0. */
static void __attribute__ ((noreturn))
usage (void)
{
  printf (
           "Usage: %s [-n /dev/nbdN] URI\n"
           "       %s --dry-run URI\n"
           "       %s -d /dev/nbdN\n"
           "Attach the data view of a stabledif device (an NBD URI such as\n"
           "nbd+unix:///data?socket=PATH or nbd://HOST/data) to /dev/nbdN,\n"
           "with /sys/block/nbdN/queue/stable_writes set from the device\n"
           "profile before the device goes live; -d detaches.\n"
           "\n"
           "  -n, --device=/dev/nbdN  device to use (default: first free)\n"
           "  -d, --detach=/dev/nbdN  detach the device\n"
           "      --dry-run           read the profile, print what would be\n"
           "                          done, touch nothing (no root needed)\n"
           "  -h, --help              this help\n"
           "  -V, --version           print the version\n",
           progname, progname, progname);
  exit (EXIT_SUCCESS);
}

/* Print a usage error FMT as one line on stderr (progname first, a
 * pointer to --help last) and exit EXIT_USAGE. */
static void __attribute__ ((noreturn, format (printf, 1, 2)))
die_usage (const char *fmt, ...)
{
  va_list ap;

  fprintf (stderr, "%s: ", progname);
  va_start (ap, fmt);
  vfprintf (stderr, fmt, ap);
  va_end (ap);
  fprintf (stderr, "; see '%s --help'\n", progname);
  exit (EXIT_USAGE);
}

/* Print one error message and exit 1. */
static void __attribute__ ((noreturn, format (printf, 1, 2)))
die (const char *fmt, ...)
{
  va_list ap;

  fprintf (stderr, "%s: ", progname);
  va_start (ap, fmt);
  vfprintf (stderr, fmt, ap);
  va_end (ap);
  fputc ('\n', stderr);
  exit (EXIT_FAILURE);
}

/* Refuse what the kernel cannot attach, before touching anything. */
static void
check_uri (const char *uri)
{
  if (strncasecmp (uri, "nbds", 4) == 0)
    die ("%s: TLS URIs cannot be attached: the kernel's NBD driver has no "
         "TLS (serve the device on a Unix socket or without TLS)", uri);
}

static void
require_root (void)
{
  if (geteuid () != 0)
    die ("must be run as root: attaching and detaching /dev/nbdN and "
         "writing /sys/block/nbdN/queue/stable_writes need root "
         "(use --dry-run to only read the device profile)");
}

/* Connect to URI, read and check the profile, fill INFO.  With KEEP,
 * INFO->sock is a duplicate of the negotiated socket for the kernel;
 * otherwise the connection is shut down politely.  On failure returns
 * -1 with the reason in ERR (ERRLEN bytes), everything closed. */
static int
negotiate (const char *uri, bool keep, struct export_info *info,
           char *err, size_t errlen)
{
  struct nbd_handle *h;
  char why[256];
  char *desc = NULL;
  int64_t size;

  info->sock = -1;
  h = nbd_create ();
  if (h == NULL) {
    snprintf (err, errlen, "%s", nbd_get_error ());
    return -1;
  }
  /* The kernel speaks simple replies only, and we need the description
   * (NBD_INFO_DESCRIPTION). */
  if (nbd_set_request_structured_replies (h, false) == -1 ||
      nbd_set_full_info (h, true) == -1 ||
      nbd_set_uri_allow_tls (h, LIBNBD_TLS_DISABLE) == -1 ||
      nbd_connect_uri (h, uri) == -1)
    goto nbd_error;

  desc = nbd_get_export_description (h);
  if (desc == NULL) {
    snprintf (err, errlen, "%s: not a stabledif device: the server sent no "
              "export description (a stabledif device describes itself as "
              "\"%s ...\")", uri, PROFILE_MAGIC);
    goto error;
  }
  if (strncmp (desc, PROFILE_MAGIC, strlen (PROFILE_MAGIC)) != 0 ||
      (desc[strlen (PROFILE_MAGIC)] != ' ' &&
       desc[strlen (PROFILE_MAGIC)] != '\0')) {
    snprintf (err, errlen, "%s: not a stabledif device: its export "
              "description is \"%s\", not a \"%s\" profile",
              uri, desc, PROFILE_MAGIC);
    goto error;
  }
  if (profile_parse (desc, &info->profile, why, sizeof why) == -1) {
    snprintf (err, errlen, "%s: bad stabledif profile \"%s\": %s",
              uri, desc, why);
    goto error;
  }
  snprintf (info->profile_line, sizeof info->profile_line, "%s", desc);

  if (info->profile.view != PROFILE_VIEW_DATA) {
    snprintf (err, errlen, "%s: this export is the %s view (extended "
              "blocks of %" PRIu32 " bytes); the kernel can only attach "
              "the data view (export name \"\" or \"data\")", uri,
              profile_view_name (info->profile.view),
              info->profile.interval + info->profile.tuple);
    goto error;
  }

  size = nbd_get_size (h);
  if (size == -1)
    goto nbd_error;
  info->size = (uint64_t) size;

  info->flags = NBD_FLAG_HAS_FLAGS;
  if (nbd_is_read_only (h) == 1)
    info->flags |= NBD_FLAG_READ_ONLY;
  if (nbd_can_flush (h) == 1)
    info->flags |= NBD_FLAG_SEND_FLUSH;
  if (nbd_can_fua (h) == 1)
    info->flags |= NBD_FLAG_SEND_FUA;
  if (nbd_can_trim (h) == 1)
    info->flags |= NBD_FLAG_SEND_TRIM;
  if (nbd_is_rotational (h) == 1)
    info->flags |= NBD_FLAG_ROTATIONAL;
  if (nbd_can_multi_conn (h) == 1)
    info->flags |= NBD_FLAG_CAN_MULTI_CONN;

  if (keep) {
    /* nbd_close closes its descriptor without a word on the wire; our
     * duplicate keeps the negotiated connection open for the kernel. */
    info->sock = fcntl (nbd_aio_get_fd (h), F_DUPFD_CLOEXEC, 3);
    if (info->sock == -1) {
      snprintf (err, errlen, "%s: duplicating the connection: %s", uri,
                strerror (errno));
      goto error;
    }
  }
  else
    nbd_shutdown (h, 0);
  free (desc);
  nbd_close (h);
  return 0;

 nbd_error:
  snprintf (err, errlen, "%s: %s", uri, nbd_get_error ());
 error:
  free (desc);
  nbd_close (h);
  return -1;
}

/* The kernel's logical block size for a profile: the protection
 * interval, as a real PI disk formatted with that interval reports. */
static uint64_t
kernel_block_size (const struct profile *p)
{
  long page = sysconf (_SC_PAGESIZE);
  uint64_t bs = p->interval;

  if (bs < 512)
    bs = 512;
  if (page > 0 && bs > (uint64_t) page)
    bs = (uint64_t) page;
  return bs;
}

static void
print_profile (const struct export_info *info)
{
  printf ("  profile: %s\n", info->profile_line);
  printf ("  format: %s, interval %" PRIu32 ", tuple %" PRIu32 " bytes\n",
          info->profile.format->name, info->profile.interval,
          info->profile.tuple);
  printf ("  size: %" PRIu64 " bytes, block size %" PRIu64 "\n",
          info->size, kernel_block_size (&info->profile));
}

static int
do_dry_run (const char *uri)
{
  struct export_info info;
  char err[ERR_MAX];

  check_uri (uri);
  if (negotiate (uri, false, &info, err, sizeof err) == -1)
    die ("%s", err);
  printf ("%s: dry run, nothing attached\n", uri);
  print_profile (&info);
  printf ("  would set /sys/block/nbdN/queue/stable_writes = %d before "
          "attaching\n", info.profile.stable_writes ? 1 : 0);
  return EXIT_SUCCESS;
}

static int
do_attach (const char *uri, const char *device)
{
  struct export_info info;
  struct knbd_attach a;
  char err[ERR_MAX], err2[ERR_MAX];
  int index, before, after = -1, want;
  int r;

  check_uri (uri);
  if (device && knbd_parse_device (device, &index, err, sizeof err) == -1)
    die ("%s", err);
  require_root ();
  if (knbd_module_ready (err, sizeof err) == -1)
    die ("%s", err);

  if (device) {
    if (!knbd_exists (index))
      die ("/dev/nbd%d does not exist (the nbd module creates nbds_max "
           "devices, by default 16: modprobe nbd nbds_max=N)", index);
    if (knbd_attached (index))
      die ("/dev/nbd%d is already attached (detach it with %s -d "
           "/dev/nbd%d)", index, progname, index);
  }
  else if (knbd_find_free (&index, err, sizeof err) == -1)
    die ("%s", err);

  if (negotiate (uri, true, &info, err, sizeof err) == -1)
    die ("%s", err);
  want = info.profile.stable_writes ? 1 : 0;

  /* The flag first: the kernel copies a queue's stable_writes into a
   * filesystem's superblock when it is mounted, so it must be right
   * before anyone (udev, blkid, mount) can open the device. */
  if (knbd_get_stable_writes (index, &before, err, sizeof err) == -1 ||
      knbd_set_stable_writes (index, want, err, sizeof err) == -1)
    die ("%s", err);

  a = (struct knbd_attach) {
    .index = index,
    .sock = info.sock,
    .size = info.size,
    .block_size = kernel_block_size (&info.profile),
    .server_flags = info.flags,
    .backend = uri,
  };
  if (knbd_connect (&a, err, sizeof err) == -1) {
    if (knbd_set_stable_writes (index, before, err2, sizeof err2) == -1)
      fprintf (stderr, "%s: restoring stable_writes: %s\n", progname, err2);
    die ("%s", err);
  }
  close (info.sock);

  /* Prove the flag survived the connect. */
  r = knbd_get_stable_writes (index, &after, err, sizeof err);
  if (r == -1 || after != want) {
    if (knbd_disconnect (index, DETACH_TIMEOUT_MS, err2, sizeof err2) == -1)
      fprintf (stderr, "%s: %s\n", progname, err2);
    if (r == -1)
      die ("%s; detached again", err);
    die ("/dev/nbd%d: stable_writes reads %d after attaching, expected "
         "%d; detached again", index, after, want);
  }

  printf ("/dev/nbd%d: attached %s\n", index, uri);
  print_profile (&info);
  printf ("  /sys/block/nbd%d/queue/stable_writes = %d (set before the "
          "device went live)\n", index, after);
  return EXIT_SUCCESS;
}

static int
do_detach (const char *device)
{
  char err[ERR_MAX], mnt[256];
  int index, r;

  if (knbd_parse_device (device, &index, err, sizeof err) == -1)
    die ("%s", err);
  require_root ();
  if (access ("/sys/module/nbd", F_OK) == -1 || !knbd_exists (index))
    die ("/dev/nbd%d does not exist (is the nbd module loaded?)", index);
  if (!knbd_attached (index))
    die ("/dev/nbd%d is not attached", index);
  r = knbd_mounted (index, mnt, sizeof mnt, err, sizeof err);
  if (r == -1)
    die ("%s", err);
  if (r == 1)
    die ("/dev/nbd%d is mounted on %s: unmount it first", index, mnt);

  if (knbd_disconnect (index, DETACH_TIMEOUT_MS, err, sizeof err) == -1)
    die ("%s", err);
  /* Leave the device as the driver creates it, for the next user. */
  if (knbd_set_stable_writes (index, 0, err, sizeof err) == -1)
    die ("/dev/nbd%d: detached, but %s", index, err);
  printf ("/dev/nbd%d: detached (stable_writes reset to 0)\n", index);
  return EXIT_SUCCESS;
}

int
main (int argc, char *argv[])
{
  enum { OPT_DRY_RUN = 256 };
  static const struct option longopts[] = {
    { "device", required_argument, NULL, 'n' },
    { "detach", required_argument, NULL, 'd' },
    { "dry-run", no_argument, NULL, OPT_DRY_RUN },
    { "help", no_argument, NULL, 'h' },
    { "version", no_argument, NULL, 'V' },
    { NULL, 0, NULL, 0 },
  };
  const char *device = NULL, *detach = NULL;
  bool dry_run = false;
  int c;

  /* getopt's own messages would start with argv[0] (a path, perhaps):
   * ours start with progname and are one line. */
  opterr = 0;
  while ((c = getopt_long (argc, argv, ":n:d:hV", longopts, NULL)) != -1) {
    switch (c) {
    case 'n': device = optarg; break;
    case 'd': detach = optarg; break;
    case OPT_DRY_RUN: dry_run = true; break;
    case 'h': usage ();
    case 'V':
      printf ("%s %s\n", progname, PACKAGE_VERSION);
      return EXIT_SUCCESS;
    case ':':
      /* optind is past the element that holds the option. */
      if (strncmp (argv[optind - 1], "--", 2) == 0)
        die_usage ("option '%s' needs an argument", argv[optind - 1]);
      die_usage ("option '-%c' needs an argument (/dev/nbdN)", optopt);
    default:
      /* optopt 0: an unknown (or ambiguous) long option, optind past
       * it; a known letter: a long option without argument given one
       * ("--help=x"); else an unknown letter. */
      if (optopt == 0)
        die_usage ("unknown option '%s'", argv[optind - 1]);
      if ((optopt == 'h' || optopt == 'V' || optopt == OPT_DRY_RUN) &&
          strncmp (argv[optind - 1], "--", 2) == 0)
        die_usage ("option '%s' takes no argument", argv[optind - 1]);
      die_usage ("unknown option '-%c'", optopt);
    }
  }

  /* Unbuffered enough for logs: one line at a time. */
  setvbuf (stdout, NULL, _IOLBF, 0);

  if (detach) {
    if (device)
      die_usage ("-d and -n cannot be used together");
    if (dry_run)
      die_usage ("-d and --dry-run cannot be used together");
    if (optind != argc)
      die_usage ("-d takes no URI (got '%s')", argv[optind]);
    return do_detach (detach);
  }
  if (optind == argc)
    die_usage ("no URI given");
  if (optind < argc - 1)
    die_usage ("one URI only (got '%s' after '%s')", argv[optind + 1],
               argv[optind]);
  if (dry_run) {
    if (device)
      die_usage ("-n and --dry-run cannot be used together");
    return do_dry_run (argv[optind]);
  }
  return do_attach (argv[optind], device);
}
