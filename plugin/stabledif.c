/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: the nbdkit plugin.
 *
 * This file only translates: nbdkit parameters become a struct
 * disk_config, nbdkit callbacks become calls of the disk_* functions of
 * server/disk.h.  Everything the device does (PI checks, views, storage,
 * counters) lives in server/ and common/.
 *
 * Errors: the disk reports each failure once through nbdkit_error (it is
 * the configuration's error function) and sets errno; the callbacks here
 * pass errno on with nbdkit_set_error.
 */
#include <config.h>

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "ctl.h"
#include "disk.h"
#include "pi.h"
#include "profile.h"

/* The default format and size (nbdkit-stabledif-plugin(1)). */
#define DEFAULT_FORMAT "T10-DIF-TYPE1-CRC"
#define DEFAULT_SIZE (UINT64_C (1) << 30)

/* The largest request the plugin advertises (NBD's portable limit). */
#define MAX_REQUEST (UINT32_C (32) * 1024 * 1024)

/* The plugin's configuration and its one disk.  This is the only state
 * the plugin keeps; it is set by .config/.config_complete, the disk is
 * created in .get_ready and closed in .cleanup/.unload. */
static struct {
  struct disk_config cfg;       /* what the disk is created from */
  bool interval_given;          /* interval= was on the command line */
  unsigned given;               /* bit i: config_keys[i] was given */
  char *file;                   /* file= as an absolute path (owned) */
  char *events;                 /* events= as an absolute path (owned) */
  char *ctl_path;               /* ctl= as an absolute path (owned), or
                                   NULL for the default path */
  bool ctl_off;                 /* ctl=none: no control socket */
  struct ctl *ctl;              /* the control socket: bound in .get_ready,
                                   served from .after_fork */
  bool ctl_handed_over;         /* this process forked after binding it:
                                   the child serves it, the file is the
                                   child's to remove */
  struct disk *disk;            /* the disk, from .get_ready on */
  char profile_line[STATS_VIEW_COUNT][PROFILE_LINE_MAX];
                                /* each view's profile line, the export
                                   description (set in .get_ready) */
} plugin = {
  .cfg = {
    .size = DEFAULT_SIZE,
    .interval = 512,
    .log_burst = DISK_PI_LOG_BURST,
    .log_interval = DISK_PI_LOG_INTERVAL_S,
  },
};

/* Connection numbers handed out by .open, from 1 (0 means "none" in
 * events). */
static _Atomic uint64_t next_conn = 1;

/* The list of export names, for messages. */
#define EXPORT_LIST "\"\", data, dif"

static void
stabledif_unload (void)
{
  /* .cleanup normally closed the disk already; this covers the paths
   * where nbdkit unloads without calling .cleanup. */
  ctl_stop (plugin.ctl);
  plugin.ctl = NULL;
  free (plugin.ctl_path);
  plugin.ctl_path = NULL;
  if (plugin.disk) {
    disk_close (plugin.disk);
    plugin.disk = NULL;
  }
  free (plugin.file);
  free (plugin.events);
  plugin.file = plugin.events = NULL;
}

/* The form app-tag= wants, for its messages. */
#define TAG16_WANT "a 16-bit number, decimal or 0x hex"

/* Parse S, one 16-bit number of app-tag= (WHAT names it in messages),
 * decimal or 0x hex, into *OUT; -1 after reporting, in one line, text
 * that is not such a number or a number above 0xffff. */
static int
parse_tag16 (const char *what, const char *s, uint16_t *out)
{
  bool hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  const char *digits = hex ? s + 2 : s;
  unsigned long v;
  char *end;

  if (!(hex ? isxdigit ((unsigned char) *digits)
            : isdigit ((unsigned char) *digits))) {
    nbdkit_error ("%s: '%s' is not a number (want " TAG16_WANT ")",
                  what, s);
    return -1;
  }
  errno = 0;
  v = strtoul (digits, &end, hex ? 16 : 10);
  if (*end != '\0') {
    nbdkit_error ("%s: '%s' is not a number (want " TAG16_WANT ")",
                  what, s);
    return -1;
  }
  if (errno == ERANGE || v > UINT16_MAX) {
    nbdkit_error ("%s: %s is out of range (want a 16-bit number, "
                  "0 to 0xffff)", what, s);
    return -1;
  }
  *out = (uint16_t) v;
  return 0;
}

/* The form size= wants, for its messages. */
#define SIZE_WANT "a number of bytes with an optional suffix: " \
  "b, s (512-byte sectors), K, M, G, T, P or E"

/* The power of two that size suffix C multiplies by (0 for none, 9 for
 * sectors, 10 for K, ... 60 for E, any case), or -1 if C is not one. */
static int
size_suffix_shift (char c)
{
  static const char suffixes[] = "kmgtpe";
  const char *p;

  switch (c) {
  case '\0': case 'b': case 'B': return 0;
  case 's': case 'S': return 9;
  }
  p = c ? strchr (suffixes, c | 0x20) : NULL;
  return p ? 10 * (int) (p - suffixes + 1) : -1;
}

/* Parse S, the value of size=, into *OUT: decimal digits and at most
 * one suffix, the SIZE syntax of nbdkit(1).  -1 after reporting, in one
 * line naming size=, anything else or a size above 2^63-1 bytes (the
 * disk checks 0 and the interval). */
static int
parse_size (const char *s, uint64_t *out)
{
  uint64_t v;
  char *end;
  int shift;

  if (*s < '0' || *s > '9') {
    nbdkit_error ("size: '%s' is not a size (want " SIZE_WANT ")", s);
    return -1;
  }
  errno = 0;
  v = strtoull (s, &end, 10);
  shift = end[0] && end[1] ? -1 : size_suffix_shift (end[0]);
  if (shift == -1) {
    nbdkit_error ("size: '%s' is not a size (want " SIZE_WANT ")", s);
    return -1;
  }
  if (errno == ERANGE || v > (UINT64_C (1) << (63 - shift)) - 1) {
    nbdkit_error ("size: %s is too large (want at most 2^63-1 bytes)", s);
    return -1;
  }
  *out = v << shift;
  return 0;
}

/* app-tag=VALUE[/MASK]: 16-bit values, decimal or 0x hex. */
static int
parse_app_tag (const char *value)
{
  char tag[32];
  const char *slash = strchr (value, '/');
  size_t n = slash ? (size_t) (slash - value) : strlen (value);

  if (n == 0 || n >= sizeof tag) {
    nbdkit_error ("app-tag: expected VALUE[/MASK], got '%s'", value);
    return -1;
  }
  memcpy (tag, value, n);
  tag[n] = '\0';
  if (parse_tag16 ("app-tag", tag, &plugin.cfg.app_tag) == -1)
    return -1;
  plugin.cfg.app_mask = 0xffff;
  if (slash &&
      parse_tag16 ("app-tag mask", slash + 1, &plugin.cfg.app_mask) == -1)
    return -1;
  plugin.cfg.has_app = true;
  return 0;
}

/* The form log-limit= wants, for its messages. */
#define LOG_LIMIT_WANT "want N/SECONDS, such as 10/5, or none"

/* log-limit=N/SECONDS or none: nbdkit logs at most N lines of PI
 * failures per SECONDS (at least 1) seconds, or every one. */
static int
parse_log_limit (const char *value)
{
  char num[32];
  const char *slash = strchr (value, '/');
  size_t n = slash ? (size_t) (slash - value) : 0;
  unsigned burst, secs;

  if (strcmp (value, "none") == 0) {
    plugin.cfg.log_burst = plugin.cfg.log_interval = 0;
    return 0;
  }
  if (slash == NULL || n == 0 || n >= sizeof num) {
    nbdkit_error ("log-limit: '%s' is not a limit (" LOG_LIMIT_WANT ")",
                  value);
    return -1;
  }
  memcpy (num, value, n);
  num[n] = '\0';
  if (nbdkit_parse_unsigned ("log-limit N", num, &burst) == -1 ||
      nbdkit_parse_unsigned ("log-limit SECONDS", slash + 1, &secs) == -1)
    return -1;
  if (secs == 0) {
    nbdkit_error ("log-limit: SECONDS must be at least 1 (or "
                  "log-limit=none to log every PI failure)");
    return -1;
  }
  plugin.cfg.log_burst = burst;
  plugin.cfg.log_interval = secs;
  return 0;
}

/* The PATH of file=, events= or ctl= (KEY) as an absolute path, or NULL
 * after reporting the error.  An empty PATH is refused here, naming the
 * parameter (nbdkit_absolute_path's message does not). */
static char *
config_path (const char *key, const char *value)
{
  if (value[0] == '\0') {
    nbdkit_error ("%s: empty path (want %s=PATH)", key, key);
    return NULL;
  }
  return nbdkit_absolute_path (value);
}

/* The parameters .config knows, in the order of --help.  Each may be
 * given once: a second size= or file= is more likely a mistake in a
 * script than a wish to override the first. */
static const char *const config_keys[] = {
  "size", "format", "interval", "app-tag", "file", "events", "ctl",
  "log-limit", "dirty-log",
};
#define NR_CONFIG_KEYS (sizeof config_keys / sizeof config_keys[0])

/* Note that KEY was given; -1 after reporting it if it was given
 * before.  An unknown KEY is left to the caller (0). */
static int
config_once (const char *key)
{
  size_t i;

  for (i = 0; i < NR_CONFIG_KEYS; i++)
    if (strcmp (key, config_keys[i]) == 0) {
      if (plugin.given & (1u << i)) {
        nbdkit_error ("%s: given more than once (give each parameter "
                      "once)", key);
        return -1;
      }
      plugin.given |= 1u << i;
      break;
    }
  return 0;
}

static int
stabledif_config (const char *key, const char *value)
{
  if (config_once (key) == -1)
    return -1;
  if (strcmp (key, "size") == 0) {
    if (parse_size (value, &plugin.cfg.size) == -1)
      return -1;
  }
  else if (strcmp (key, "format") == 0) {
    const struct pi_format *f = pi_format_lookup (value);
    if (f == NULL) {
      char names[512];
      pi_format_names (names, sizeof names, ",");
      nbdkit_error ("format: unknown PI format '%s' (known: %s)",
                    value, names);
      return -1;
    }
    plugin.cfg.format = f;
  }
  else if (strcmp (key, "interval") == 0) {
    if (nbdkit_parse_uint32_t ("interval", value,
                               &plugin.cfg.interval) == -1)
      return -1;
    plugin.interval_given = true;
  }
  else if (strcmp (key, "app-tag") == 0) {
    if (parse_app_tag (value) == -1)
      return -1;
  }
  else if (strcmp (key, "file") == 0) {
    free (plugin.file);
    plugin.file = config_path (key, value);
    if (plugin.file == NULL)
      return -1;
  }
  else if (strcmp (key, "events") == 0) {
    free (plugin.events);
    plugin.events = config_path (key, value);
    if (plugin.events == NULL)
      return -1;
  }
  else if (strcmp (key, "ctl") == 0) {
    free (plugin.ctl_path);
    plugin.ctl_path = NULL;
    plugin.ctl_off = strcmp (value, "none") == 0;
    if (!plugin.ctl_off &&
        (plugin.ctl_path = config_path (key, value)) == NULL)
      return -1;
  }
  else if (strcmp (key, "log-limit") == 0) {
    if (parse_log_limit (value) == -1)
      return -1;
  }
  else if (strcmp (key, "dirty-log") == 0) {
    int on = nbdkit_parse_bool (value);
    if (on == -1)
      return -1;
    plugin.cfg.no_dirty_log = !on;
  }
  else {
    nbdkit_error ("unknown parameter '%s' (see nbdkit stabledif --help)",
                  key);
    return -1;
  }
  return 0;
}

/* Fill in the defaults that depend on other parameters, then let the
 * disk check the whole configuration (it names the bad parameter). */
static int
stabledif_config_complete (void)
{
  struct disk_config *cfg = &plugin.cfg;

  if (cfg->format == NULL) {
    cfg->format = pi_format_lookup (DEFAULT_FORMAT);
    if (cfg->format == NULL) {
      nbdkit_error ("format: default format %s is not known", DEFAULT_FORMAT);
      return -1;
    }
  }
  if (!plugin.interval_given)
    cfg->interval = pi_default_interval (cfg->format);
  cfg->file = plugin.file;
  cfg->events_path = plugin.events;
  cfg->error = nbdkit_error;

  return disk_config_check (cfg);
}

/* The text of --help, built from the table of PI formats when the
 * plugin is loaded (help_build), so that it names exactly the formats
 * format= accepts.  No trailing newline: nbdkit adds one. */
static char config_help[2048];

/* Column where the description of each parameter starts in --help, and
 * the width the descriptions are wrapped to. */
#define HELP_INDENT 25
#define HELP_WIDTH 72

/* --help being built: text in BUF (LEN bytes, always terminated; cut
 * short if full), USED bytes so far, COL the column the next byte goes
 * to. */
struct help {
  char *buf;                    /* the text */
  size_t len;                   /* bytes of BUF */
  size_t used;                  /* bytes of text in BUF */
  size_t col;                   /* column of the end of the text */
};

/* Append the first N bytes of S (no newlines among them) to H. */
static void
help_put (struct help *h, const char *s, size_t n)
{
  if (h->used + n >= h->len)
    n = h->len - h->used - 1;
  memcpy (h->buf + h->used, s, n);
  h->used += n;
  h->buf[h->used] = '\0';
  h->col += n;
}

/* Start a new line of H indented to the descriptions' column. */
static void
help_newline (struct help *h)
{
  help_put (h, "\n", 1);
  h->col = 0;
  while (h->col < HELP_INDENT)
    help_put (h, " ", 1);
}

/* Append the N bytes of WORD to H after a space, or at the start of a
 * new line if they would run past HELP_WIDTH. */
static void
help_word (struct help *h, const char *word, size_t n)
{
  if (h->col + 1 + n > HELP_WIDTH)
    help_newline (h);
  else if (h->col > HELP_INDENT)
    help_put (h, " ", 1);
  help_put (h, word, n);
}

/* Append TEXT to H word by word, wrapped. */
static void
help_text (struct help *h, const char *text)
{
  while (*text) {
    size_t n = strcspn (text, " ");

    if (n > 0)
      help_word (h, text, n);
    text += n;
    text += strspn (text, " ");
  }
}

/* Start the entry of parameter KEY in H (on a new line unless it is the
 * first) and describe it with TEXT. */
static void
help_entry (struct help *h, const char *key, const char *text)
{
  if (h->used > 0)
    help_put (h, "\n", 1);
  h->col = 0;
  help_put (h, key, strlen (key));
  while (h->col < HELP_INDENT)
    help_put (h, " ", 1);
  help_text (h, text);
}

/* Whether format F has the default interval 4096 (ONLY_4K) or any. */
static bool
help_format_wanted (const struct pi_format *f, bool only_4k)
{
  return !only_4k || pi_default_interval (f) == 4096;
}

/* Append to H the names of the formats of the table in common/pi.c
 * (all of them, or ONLY_4K those whose default interval is 4096),
 * separated by commas, the last one followed by END. */
static void
help_formats (struct help *h, bool only_4k, const char *end)
{
  const struct pi_format *f;
  size_t i, n = 0, k = 0;
  char word[64];

  for (i = 0; (f = pi_format_at (i)) != NULL; i++)
    n += help_format_wanted (f, only_4k);
  for (i = 0; (f = pi_format_at (i)) != NULL; i++) {
    if (!help_format_wanted (f, only_4k))
      continue;
    snprintf (word, sizeof word, "%s%s", f->name, ++k < n ? "," : end);
    help_word (h, word, strlen (word));
  }
}

/* Build config_help.  A constructor: nbdkit copies .config_help when it
 * registers the plugin, before calling .load. */
__attribute__ ((constructor))
static void
help_build (void)
{
  struct help h = { .buf = config_help, .len = sizeof config_help };

  help_entry (&h, "[size=]SIZE", "Data size of the disk (default 1G).");
  help_entry (&h, "format=FORMAT", "PI format (default " DEFAULT_FORMAT "):");
  help_formats (&h, false, ".");
  help_entry (&h, "interval=512|4096",
              "Protection interval in bytes (default 512; 4096 for");
  help_formats (&h, true, ").");
  help_entry (&h, "app-tag=VALUE[/MASK]", "Application tag inserted and "
              "checked, with the bits checked (mask, default 0xffff).");
  help_entry (&h, "file=PATH", "Keep data in PATH and PI in PATH.pi "
              "(default: sparse memory).");
  help_entry (&h, "dirty-log=on|off", "With file=: keep PATH.log, so that "
              "no block fails its PI check after a power cut (default "
              "on).");
  help_entry (&h, "events=PATH", "Append PI failures to PATH as JSON "
              "lines.");
  help_entry (&h, "ctl=PATH|none", "Control socket, mode 0600, in a "
              "directory only you can write (default "
              "$XDG_RUNTIME_DIR/stabledif-PID.sock, else "
              "${TMPDIR:-/tmp}/stabledif-UID/stabledif-PID.sock; see "
              "stabledif-ctl(1)).");
  help_entry (&h, "log-limit=N/SECONDS|none", "Log at most N PI "
              "failures per SECONDS seconds, the rest summed up in one "
              "line (default 10/5; none: log every one).");
}

static void
stabledif_dump_plugin (void)
{
  char names[512];

  pi_format_names (names, sizeof names, ",");
  printf ("stabledif_version=%s\n", PACKAGE_VERSION);
  printf ("stabledif_formats=%s\n", names);
  printf ("stabledif_intervals=512,4096\n");
}

/* pthread_atfork's parent handler, from the control socket's binding
 * on: nbdkit forks to go into the background or to run its --run
 * command, and the child is the server that goes on. */
static void
ctl_note_fork (void)
{
  plugin.ctl_handed_over = true;
}

/* When the process exits (or the plugin is unloaded).  nbdkit exits
 * without .cleanup or .unload when it fails after .get_ready (its own
 * NBD socket cannot be bound, say), which would leave the control
 * socket file behind: remove it here, unless a child took it over.
 * After .cleanup there is nothing left to do. */
__attribute__ ((destructor))
static void
ctl_at_exit (void)
{
  if (!plugin.ctl_handed_over)
    ctl_remove_socket (plugin.ctl);
}

/* Create the control socket (ctl=, or the default path for this
 * process).  Called last in .get_ready, so that the socket exists
 * before nbdkit starts its --run command or reports that it started,
 * and a bad path stops nbdkit before it forks. */
static int
ctl_create (void)
{
  const char *path;

  if (plugin.ctl_off)
    return 0;
  plugin.ctl = ctl_bind (plugin.disk, plugin.ctl_path);
  if (plugin.ctl == NULL)
    return -1;
  if (pthread_atfork (NULL, ctl_note_fork, NULL) != 0) {
    nbdkit_error ("ctl: pthread_atfork failed");
    return -1;
  }
  path = ctl_socket_path (plugin.ctl);
  nbdkit_debug ("control socket: %s", path);
  fprintf (stderr, "nbdkit: stabledif: control socket: %s\n", path);
  return 0;
}

/* Create the disk.  This is .get_ready, not .after_fork, so that a bad
 * store (file= that cannot be opened) stops nbdkit before it forks. */
static int
stabledif_get_ready (void)
{
  struct profile p;
  uint64_t blocks, regions;
  int v;

  plugin.disk = disk_open (&plugin.cfg);
  if (plugin.disk == NULL)
    return -1;
  if (disk_read_only (plugin.disk))
    fprintf (stderr, "nbdkit: stabledif: file=%s cannot be opened for "
             "writing: serving it read-only\n", plugin.cfg.file);
  disk_recovered (plugin.disk, &blocks, &regions);
  if (regions > 0)
    fprintf (stderr, "nbdkit: stabledif: file=%s: recovered %" PRIu64
             " blocks in %" PRIu64 " dirty regions\n", plugin.cfg.file,
             blocks, regions);

  for (v = 0; v < STATS_VIEW_COUNT; ++v) {
    disk_profile (plugin.disk, (enum profile_view) v, &p);
    if (profile_format (&p, plugin.profile_line[v],
                        sizeof plugin.profile_line[v]) == -1) {
      nbdkit_error ("profile line of view %s does not fit",
                    profile_view_name ((enum profile_view) v));
      return -1;
    }
  }
  return ctl_create ();
}

/* Start the control socket thread.  This is .after_fork: a thread
 * started before nbdkit forks into the background would be lost. */
static int
stabledif_after_fork (void)
{
  if (plugin.ctl && ctl_serve (plugin.ctl) == -1)
    return -1;
  return 0;
}

/* Close the disk once every connection is gone.  ctl: the control
 * socket is stopped here, before the disk it serves. */
static void
stabledif_cleanup (void)
{
  ctl_stop (plugin.ctl);
  plugin.ctl = NULL;
  if (plugin.disk) {
    disk_close (plugin.disk);
    plugin.disk = NULL;
  }
}

static int
stabledif_list_exports (int readonly, int is_tls,
                        struct nbdkit_exports *exports)
{
  if (nbdkit_add_export (exports, "",
                         plugin.profile_line[PROFILE_VIEW_DATA]) == -1 ||
      nbdkit_add_export (exports, "data",
                         plugin.profile_line[PROFILE_VIEW_DATA]) == -1 ||
      nbdkit_add_export (exports, "dif",
                         plugin.profile_line[PROFILE_VIEW_DIF]) == -1)
    return -1;
  return 0;
}

static const char *
stabledif_default_export (int readonly, int is_tls)
{
  return "";
}

/* The handle of a connection is its struct disk_io: the view of its
 * export and its connection number. */
static void *
stabledif_open (int readonly)
{
  const char *name = nbdkit_export_name ();
  enum profile_view view;
  struct disk_io *io;

  if (name == NULL)
    name = "";
  if (profile_view_from_export (name, &view) == -1) {
    nbdkit_error ("unknown export '%s' (exports: " EXPORT_LIST ")", name);
    nbdkit_set_error (ENOENT);
    return NULL;
  }

  io = malloc (sizeof *io);
  if (io == NULL) {
    nbdkit_error ("malloc: %m");
    return NULL;
  }
  io->view = view;
  io->conn = atomic_fetch_add (&next_conn, 1);
  return io;
}

static void
stabledif_close (void *handle)
{
  free (handle);
}

static const char *
stabledif_export_description (void *handle)
{
  struct disk_io *io = handle;

  return plugin.profile_line[io->view];
}

static int64_t
stabledif_get_size (void *handle)
{
  struct disk_io *io = handle;

  return (int64_t) disk_view_size (plugin.disk, io->view);
}

/* NBD block sizes must be powers of two, so neither view can advertise
 * the extended block size.  Both say: any alignment is accepted by the
 * server (minimum 1; the dif view then checks extended-block alignment
 * itself and answers EINVAL), the interval is the size without a
 * read-modify-write penalty, and requests up to 32 MiB are welcome (for
 * dif the largest whole number of extended blocks in 32 MiB, so a client
 * splitting at the maximum stays aligned). */
static int
stabledif_block_size (void *handle, uint32_t *minimum, uint32_t *preferred,
                      uint32_t *maximum)
{
  struct disk_io *io = handle;

  *minimum = 1;
  *preferred = disk_preferred_request (plugin.disk);
  *maximum = disk_max_request (plugin.disk, io->view, MAX_REQUEST);
  return 0;
}

/* A file= store that could not be opened for writing serves a
 * read-only disk (nbdkit then refuses writes, zeroes and trims). */
static int
stabledif_can_write (void *handle)
{
  return !disk_read_only (plugin.disk);
}

static int
stabledif_can_flush (void *handle)
{
  return 1;
}

static int
stabledif_can_fua (void *handle)
{
  return NBDKIT_FUA_NATIVE;
}

static int
stabledif_can_trim (void *handle)
{
  return 1;
}

static int
stabledif_can_zero (void *handle)
{
  return 1;
}

static int
stabledif_can_fast_zero (void *handle)
{
  return 1;
}

static int
stabledif_can_multi_conn (void *handle)
{
  return disk_multi_conn (plugin.disk);
}

/* Extents are only meaningful for the data view: in the dif view every
 * block has a tuple, so nothing there reads as zeros. */
static int
stabledif_can_extents (void *handle)
{
  struct disk_io *io = handle;

  return io->view == PROFILE_VIEW_DATA;
}

static int
stabledif_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
                 uint32_t flags)
{
  if (disk_pread (plugin.disk, handle, buf, count, offset) == -1) {
    nbdkit_set_error (errno);
    return -1;
  }
  return 0;
}

static int
stabledif_pwrite (void *handle, const void *buf, uint32_t count,
                  uint64_t offset, uint32_t flags)
{
  bool fua = flags & NBDKIT_FLAG_FUA;

  if (disk_pwrite (plugin.disk, handle, buf, count, offset, fua) == -1) {
    nbdkit_set_error (errno);
    return -1;
  }
  return 0;
}

/* ZERO always releases space (it is fast), so NBDKIT_FLAG_MAY_TRIM and
 * NBDKIT_FLAG_FAST_ZERO need no special handling. */
static int
stabledif_zero (void *handle, uint32_t count, uint64_t offset,
                uint32_t flags)
{
  bool fua = flags & NBDKIT_FLAG_FUA;

  if (disk_zero (plugin.disk, handle, count, offset, fua) == -1) {
    nbdkit_set_error (errno);
    return -1;
  }
  return 0;
}

static int
stabledif_trim (void *handle, uint32_t count, uint64_t offset,
                uint32_t flags)
{
  bool fua = flags & NBDKIT_FLAG_FUA;

  if (disk_trim (plugin.disk, handle, count, offset, fua) == -1) {
    nbdkit_set_error (errno);
    return -1;
  }
  return 0;
}

static int
stabledif_flush (void *handle, uint32_t flags)
{
  if (disk_flush (plugin.disk, handle) == -1) {
    nbdkit_set_error (errno);
    return -1;
  }
  return 0;
}

static int
stabledif_extents (void *handle, uint32_t count, uint64_t offset,
                   uint32_t flags, struct nbdkit_extents *extents)
{
  const bool req_one = flags & NBDKIT_FLAG_REQ_ONE;
  uint64_t end = offset + count;

  while (offset < end) {
    bool allocated;
    uint64_t run;

    if (disk_extent (plugin.disk, handle, end - offset, offset,
                     &allocated, &run) == -1) {
      nbdkit_set_error (errno);
      return -1;
    }
    if (run == 0 || run > end - offset)
      run = end - offset;
    if (nbdkit_add_extent (extents, offset, run,
                           allocated ? 0
                           : NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO) == -1)
      return -1;
    offset += run;
    if (req_one)
      break;
  }
  return 0;
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin_ops = {
  .name               = "stabledif",
  .longname           = "stabledif emulated protection-information disk",
  .version            = PACKAGE_VERSION,
  .description        = "A disk that checks T10 DIF / NVMe PI, served "
                        "as a data view and an extended-block dif view",
  .unload             = stabledif_unload,
  .config             = stabledif_config,
  .config_complete    = stabledif_config_complete,
  .config_help        = config_help,
  .magic_config_key   = "size",
  .dump_plugin        = stabledif_dump_plugin,
  .get_ready          = stabledif_get_ready,
  .after_fork         = stabledif_after_fork,
  .cleanup            = stabledif_cleanup,
  .list_exports       = stabledif_list_exports,
  .default_export     = stabledif_default_export,
  .open               = stabledif_open,
  .close              = stabledif_close,
  .export_description = stabledif_export_description,
  .get_size           = stabledif_get_size,
  .block_size         = stabledif_block_size,
  .can_write          = stabledif_can_write,
  .can_flush          = stabledif_can_flush,
  .can_fua            = stabledif_can_fua,
  .can_trim           = stabledif_can_trim,
  .can_zero           = stabledif_can_zero,
  .can_fast_zero      = stabledif_can_fast_zero,
  .can_multi_conn     = stabledif_can_multi_conn,
  .can_extents        = stabledif_can_extents,
  .pread              = stabledif_pread,
  .pwrite             = stabledif_pwrite,
  .zero               = stabledif_zero,
  .trim               = stabledif_trim,
  .flush              = stabledif_flush,
  .extents            = stabledif_extents,
  .errno_is_preserved = 0,
};

NBDKIT_REGISTER_PLUGIN (plugin_ops)
