/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: the control socket -- requests and their replies.
 *
 * ctl_handle_line turns one request line into one JSON reply line:
 *   {"ok":true, ...}  or  {"ok":false,"error":"..."}
 * It has no socket and no state of its own, so tests and fuzzers call it
 * directly.  Nothing here can change stable_writes or touch files: the
 * only things a request may change are the counters and events (reset)
 * and one stored block (inject).
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ctl.h"
#include "ctl-internal.h"

/* Most tokens a request has (verb + arguments); one more is "too many". */
#define MAX_TOKENS 4

/* Most bytes of a request's token an error reply echoes ("..." follows
 * if there are more), and a buffer that holds them rendered by
 * printable: each byte at most 4 ("\xNN"), then "..." and the NUL. */
#define ECHO_MAX 64
#define ECHO_SIZE (ECHO_MAX * 4 + 16)

/* Room for the names a reply lists (verbs, inject kinds). */
#define NAMES_SIZE 128

/* A request split into tokens (pointers into a private copy). */
struct request {
  char *copy;                   /* the line, with NULs between tokens */
  char *tok[MAX_TOKENS];        /* the tokens */
  size_t ntok;                  /* how many (at most MAX_TOKENS) */
  bool too_many;                /* the line had more than MAX_TOKENS */
};

/* One verb. */
struct verb {
  const char *name;             /* what the client sends */
  const char *usage;            /* name and arguments, for help */
  const char *description;      /* one line for help */
  size_t min_args, max_args;    /* arguments allowed */
  json_t *(*fn) (struct disk *d, const struct request *r); /* the reply */
};

/* ---- replies ---- */

/* Write a printable rendering of S (at most ECHO_MAX bytes of it) into
 * BUF (LEN bytes, at least ECHO_SIZE for all of them):
 * control, non-ASCII and quote characters as \xNN, so error messages
 * that echo input are valid UTF-8 and readable. */
static void
printable (const char *s, char *buf, size_t len)
{
  size_t i, o = 0;

  for (i = 0; s[i] != '\0' && o + 8 < len; i++) {
    unsigned char ch = s[i];

    if (i == ECHO_MAX) {
      o += snprintf (buf + o, len - o, "...");
      break;
    }
    if (ch >= 0x20 && ch < 0x7f && ch != '\\' && ch != '\'')
      buf[o++] = ch;
    else
      o += snprintf (buf + o, len - o, "\\x%02x", ch);
  }
  buf[o] = '\0';
}

/* Append NAME to the list in BUF (LEN bytes, a string), after ", "
 * unless the list is empty; cut short if BUF is full. */
static void
append_name (char *buf, size_t len, const char *name)
{
  size_t used = strlen (buf);

  snprintf (buf + used, len - used, "%s%s", used ? ", " : "", name);
}

/* {"ok":false,"error":MESSAGE}.  NULL on ENOMEM. */
static json_t *
error_reply (const char *fmt, ...)
  __attribute__ ((format (printf, 1, 2)));

static json_t *
error_reply (const char *fmt, ...)
{
  char msg[512];
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (msg, sizeof msg, fmt, ap);
  va_end (ap);
  return json_pack ("{s:b, s:s}", "ok", 0, "error", msg);
}

/* {"ok":true} to which a verb adds its fields.  NULL on ENOMEM. */
static json_t *
ok_reply (void)
{
  return json_pack ("{s:b}", "ok", 1);
}

/* A 64-bit count or LBA as a JSON integer (jansson's are signed). */
static json_t *
uint_json (uint64_t v)
{
  return json_integer (v > (uint64_t) INT64_MAX ? INT64_MAX : (json_int_t) v);
}

/* Parse an unsigned number: decimal, or hex with 0x.  Nothing else is
 * accepted (no sign, no spaces, no suffix).  On failure writes why into
 * WHY (WHYLEN bytes) and returns -1. */
static int
parse_u64 (const char *s, uint64_t *out, char *why, size_t whylen)
{
  unsigned base = 10;
  uint64_t v = 0;
  const char *p = s;

  if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
    base = 16;
    p += 2;
  }
  if (*p == '\0') {
    snprintf (why, whylen, "not a number");
    return -1;
  }
  for (; *p; p++) {
    unsigned digit;

    if (*p >= '0' && *p <= '9')
      digit = *p - '0';
    else if (base == 16 && *p >= 'a' && *p <= 'f')
      digit = *p - 'a' + 10;
    else if (base == 16 && *p >= 'A' && *p <= 'F')
      digit = *p - 'A' + 10;
    else {
      snprintf (why, whylen, "not a number");
      return -1;
    }
    if (v > (UINT64_MAX - digit) / base) {
      snprintf (why, whylen, "too large");
      return -1;
    }
    v = v * base + digit;
  }
  *out = v;
  return 0;
}

/* ---- verbs ---- */

/* One view: the profile line as the export description says it, the
 * fields parsed back from that line, and the view's size. */
static json_t *
view_json (struct disk *d, enum profile_view view)
{
  struct profile p, parsed;
  char line[PROFILE_LINE_MAX], err[256];
  json_t *j;

  disk_profile (d, view, &p);
  if (profile_format (&p, line, sizeof line) == -1)
    return NULL;
  if (profile_parse (line, &parsed, err, sizeof err) == -1)
    return NULL;                /* cannot happen: we just wrote it */

  j = json_pack ("{s:s, s:s, s:s, s:I, s:I, s:b, s:o}",
                 "profile", line,
                 "view", profile_view_name (parsed.view),
                 "format", parsed.format->name,
                 "interval", (json_int_t) parsed.interval,
                 "tuple", (json_int_t) parsed.tuple,
                 "stable_writes", parsed.stable_writes,
                 "size", uint_json (disk_view_size (d, view)));
  if (j && parsed.has_app &&
      (json_object_set_new (j, "app_tag",
                            json_integer (parsed.app_tag)) == -1 ||
       json_object_set_new (j, "app_mask",
                            json_integer (parsed.app_mask)) == -1)) {
    json_decref (j);
    return NULL;
  }
  return j;
}

static json_t *
verb_profile (struct disk *d, const struct request *r)
{
  struct profile p;
  json_t *reply = ok_reply ();

  if (reply == NULL)
    return NULL;
  disk_profile (d, PROFILE_VIEW_DIF, &p);
  if (json_object_set_new (reply, "stable_writes",
                           json_boolean (p.stable_writes)) == -1 ||
      json_object_set_new (reply, "size", uint_json (d->cfg.size)) == -1 ||
      json_object_set_new (reply, "nblocks", uint_json (d->nblocks)) == -1 ||
      json_object_set_new (reply, "store",
                           json_string (d->store->ops->name)) == -1 ||
      json_object_set_new (reply, "read_only",
                           json_boolean (disk_read_only (d))) == -1 ||
      json_object_set_new (reply, "views",
                           json_pack ("{s:o, s:o}",
                                      "data",
                                      view_json (d, PROFILE_VIEW_DATA),
                                      "dif",
                                      view_json (d, PROFILE_VIEW_DIF)))
      == -1) {
    json_decref (reply);
    return NULL;
  }
  return reply;
}

/* The sequence number of the newest event ever recorded (0: none). */
static uint64_t
last_seq (struct disk *d)
{
  uint64_t seq;

  pthread_mutex_lock (&d->stats.lock);
  seq = d->stats.next_seq - 1;
  pthread_mutex_unlock (&d->stats.lock);
  return seq;
}

/* Failures per connection, counted over the events still in the ring:
 * [{"conn":N, "write_errors":N, "read_errors":N, "last_seq":N}, ...]
 * in connection order.  The counters proper are device-wide; this says
 * who caused the recent failures. */
static json_t *
by_conn_json (struct disk *d)
{
  size_t max = d->stats.ring_size, n, i, k;
  struct stats_event *ev;
  json_t *arr;

  arr = json_array ();
  if (arr == NULL || max == 0)
    return arr;
  ev = malloc (max * sizeof *ev);
  if (ev == NULL) {
    json_decref (arr);
    return NULL;
  }
  n = stats_events_since (&d->stats, 0, ev, max);

  for (i = 0; i < n; i++) {
    const char *key = ev[i].op == STATS_OP_WRITE ? "write_errors"
                                                 : "read_errors";
    json_t *entry = NULL;
    size_t pos = json_array_size (arr);

    /* Keep the array sorted by connection (it is short). */
    for (k = 0; k < json_array_size (arr); k++) {
      json_t *e = json_array_get (arr, k);
      uint64_t conn = json_integer_value (json_object_get (e, "conn"));
      if (conn == ev[i].conn) {
        entry = e;
        break;
      }
      if (conn > ev[i].conn) {
        pos = k;
        break;
      }
    }
    if (entry == NULL) {
      entry = json_pack ("{s:o, s:i, s:i, s:i}",
                         "conn", uint_json (ev[i].conn),
                         "write_errors", 0, "read_errors", 0, "last_seq", 0);
      if (entry == NULL || json_array_insert_new (arr, pos, entry) == -1)
        goto nomem;
    }
    if (json_object_set_new (entry, key,
                             json_integer (json_integer_value
                                           (json_object_get (entry, key))
                                           + 1)) == -1 ||
        json_object_set_new (entry, "last_seq", uint_json (ev[i].seq)) == -1)
      goto nomem;
  }
  free (ev);
  return arr;

 nomem:
  free (ev);
  json_decref (arr);
  return NULL;
}

static json_t *
verb_counters (struct disk *d, const struct request *r)
{
  struct stats_snapshot snap;
  json_t *reply = ok_reply ();

  if (reply == NULL)
    return NULL;
  stats_snapshot (&d->stats, &snap);
  if (json_object_set_new (reply, "counters",
                           stats_snapshot_json (&snap)) == -1 ||
      json_object_set_new (reply, "last_seq", uint_json (last_seq (d)))
      == -1 ||
      json_object_set_new (reply, "failures_by_conn", by_conn_json (d))
      == -1) {
    json_decref (reply);
    return NULL;
  }
  return reply;
}

static json_t *
verb_events (struct disk *d, const struct request *r)
{
  uint64_t since = 0, next, newest, missed = 0;
  struct stats_event *ev;
  size_t n, i, max;
  char why[64], arg[ECHO_SIZE];
  json_t *reply, *arr;

  if (r->ntok == 2 && parse_u64 (r->tok[1], &since, why, sizeof why) == -1) {
    printable (r->tok[1], arg, sizeof arg);
    return error_reply ("events: bad SINCE '%s': %s "
                        "(want a sequence number, 0 for all)", arg, why);
  }

  max = d->stats.ring_size < CTL_EVENTS_MAX ? d->stats.ring_size
                                            : CTL_EVENTS_MAX;
  ev = malloc ((max ? max : 1) * sizeof *ev);
  if (ev == NULL)
    return NULL;
  n = stats_events_since (&d->stats, since, ev, max);
  newest = last_seq (d);

  /* next: what to ask for next time.  With nothing new it is the newest
   * sequence number, which also resynchronises a client whose SINCE came
   * from another server.  missed: events after SINCE that are no longer
   * kept (the ring wrapped, or reset forgot them). */
  if (n > 0) {
    next = ev[n - 1].seq;
    missed = ev[0].seq - 1 > since ? ev[0].seq - 1 - since : 0;
  }
  else {
    next = newest;
    missed = newest > since ? newest - since : 0;
  }

  reply = ok_reply ();
  arr = json_array ();
  if (reply == NULL || arr == NULL)
    goto nomem;
  for (i = 0; i < n; i++)
    if (json_array_append_new (arr, stats_event_json (&ev[i])) == -1)
      goto nomem;
  free (ev);
  ev = NULL;
  if (json_object_set_new (reply, "events", arr) == -1) {
    arr = NULL;
    goto nomem;
  }
  arr = NULL;
  if (json_object_set_new (reply, "next", uint_json (next)) == -1 ||
      json_object_set_new (reply, "missed", uint_json (missed)) == -1 ||
      json_object_set_new (reply, "more", json_boolean (next < newest))
      == -1)
    goto nomem;
  return reply;

 nomem:
  free (ev);
  json_decref (arr);
  json_decref (reply);
  return NULL;
}

static json_t *
verb_reset (struct disk *d, const struct request *r)
{
  stats_reset (&d->stats);
  return ok_reply ();
}

/* Names of the injection kinds, indexed by enum disk_inject_kind. */
static const char *const inject_names[] = {
  [DISK_INJECT_DATA] = "data",
  [DISK_INJECT_GUARD] = "guard",
  [DISK_INJECT_APP] = "app",
  [DISK_INJECT_REF] = "ref",
};

static json_t *
verb_inject (struct disk *d, const struct request *r)
{
  const struct pi_format *f = d->pi.format;
  enum disk_inject_kind kind;
  char why[64], arg[ECHO_SIZE];
  uint64_t lba;
  size_t i;
  json_t *reply;

  for (i = 0; i < sizeof inject_names / sizeof inject_names[0]; i++)
    if (strcmp (r->tok[1], inject_names[i]) == 0)
      break;
  if (i == sizeof inject_names / sizeof inject_names[0]) {
    char kinds[NAMES_SIZE] = "";

    for (i = 0; i < sizeof inject_names / sizeof inject_names[0]; i++)
      append_name (kinds, sizeof kinds, inject_names[i]);
    printable (r->tok[1], arg, sizeof arg);
    return error_reply ("inject: unknown kind '%s' (kinds: %s)", arg, kinds);
  }
  kind = i;

  if (parse_u64 (r->tok[2], &lba, why, sizeof why) == -1) {
    printable (r->tok[2], arg, sizeof arg);
    return error_reply ("inject: bad LBA '%s': %s", arg, why);
  }
  if (lba >= d->nblocks)
    return error_reply ("inject: LBA %" PRIu64 " out of range "
                        "(the disk has %" PRIu64 " blocks, 0 to %" PRIu64 ")",
                        lba, d->nblocks, d->nblocks - 1);

  /* What the device cannot corrupt in a way a check would see. */
  if (f->tuple_size == 0)
    return error_reply ("inject: format none has no protection "
                        "information to corrupt");
  if (kind == DISK_INJECT_APP && !d->cfg.has_app)
    return error_reply ("inject app: the app tag is not checked on this "
                        "device (start it with app-tag=)");
  if (kind == DISK_INJECT_REF && f->type == PI_TYPE_3)
    return error_reply ("inject ref: format %s does not check the "
                        "ref tag", f->name);
  if (disk_read_only (d))
    return error_reply ("inject: the disk is read-only (its file= store "
                        "could not be opened for writing)");

  errno = 0;
  if (disk_inject (d, kind, lba) == -1) {
    int err = errno;
    return error_reply ("inject %s %" PRIu64 ": %s", inject_names[kind], lba,
                        err ? strerror (err) : "failed");
  }

  reply = ok_reply ();
  if (reply &&
      (json_object_set_new (reply, "kind",
                            json_string (inject_names[kind])) == -1 ||
       json_object_set_new (reply, "lba", uint_json (lba)) == -1)) {
    json_decref (reply);
    return NULL;
  }
  return reply;
}

static json_t *verb_help (struct disk *d, const struct request *r);

static const struct verb verbs[] = {
  { "profile", "profile",
    "the device profile of both views, parsed, with stable_writes and size",
    0, 0, verb_profile },
  { "counters", "counters",
    "all counters, the newest event number and recent failures by "
    "connection", 0, 0, verb_counters },
  { "events", "events [SINCE]",
    "failure events with sequence number above SINCE (default 0), "
    "oldest first", 0, 1, verb_events },
  { "reset", "reset",
    "zero the counters and forget the events (numbering continues)",
    0, 0, verb_reset },
  { "inject", "inject data|guard|app|ref LBA",
    "corrupt the stored block LBA so that its next read fails that check",
    2, 2, verb_inject },
  { "help", "help", "this list", 0, 0, verb_help },
};
#define NVERBS (sizeof verbs / sizeof verbs[0])

static json_t *
verb_help (struct disk *d, const struct request *r)
{
  json_t *reply = ok_reply (), *arr = json_array ();
  size_t i;

  if (reply == NULL || arr == NULL)
    goto nomem;
  for (i = 0; i < NVERBS; i++)
    if (json_array_append_new (arr,
                               json_pack ("{s:s, s:s, s:s}",
                                          "verb", verbs[i].name,
                                          "usage", verbs[i].usage,
                                          "description",
                                          verbs[i].description)) == -1)
      goto nomem;
  if (json_object_set_new (reply, "verbs", arr) == -1) {
    arr = NULL;
    goto nomem;
  }
  return reply;

 nomem:
  json_decref (arr);
  json_decref (reply);
  return NULL;
}

/* ---- dispatch ---- */

/* Split LINE at spaces and tabs into R.  A trailing CR (telnet, Windows
 * clients) is ignored.  Returns -1 on ENOMEM. */
static int
tokenize (const char *line, struct request *r)
{
  char *p, *save = NULL, *t;
  size_t len;

  memset (r, 0, sizeof *r);
  r->copy = strdup (line);
  if (r->copy == NULL)
    return -1;
  len = strlen (r->copy);
  if (len > 0 && r->copy[len - 1] == '\r')
    r->copy[len - 1] = '\0';

  for (p = r->copy; (t = strtok_r (p, " \t", &save)) != NULL; p = NULL) {
    if (r->ntok == MAX_TOKENS) {
      r->too_many = true;
      break;
    }
    r->tok[r->ntok++] = t;
  }
  return 0;
}

/* The reply object for LINE; NULL on ENOMEM. */
static json_t *
handle (struct disk *d, const char *line)
{
  struct request r;
  char arg[ECHO_SIZE], names[NAMES_SIZE];
  json_t *reply;
  size_t i, nargs;

  if (tokenize (line, &r) == -1)
    return NULL;

  if (r.ntok == 0) {
    reply = error_reply ("empty request (try 'help')");
    goto out;
  }
  for (i = 0; i < NVERBS; i++)
    if (strcmp (r.tok[0], verbs[i].name) == 0)
      break;
  if (i == NVERBS) {
    names[0] = '\0';
    for (i = 0; i < NVERBS; i++)
      append_name (names, sizeof names, verbs[i].name);
    printable (r.tok[0], arg, sizeof arg);
    reply = error_reply ("unknown verb '%s' (verbs: %s)", arg, names);
    goto out;
  }
  nargs = r.ntok - 1;
  if (r.too_many || nargs > verbs[i].max_args) {
    reply = error_reply ("%s: too many arguments (usage: %s)",
                         verbs[i].name, verbs[i].usage);
    goto out;
  }
  if (nargs < verbs[i].min_args) {
    reply = error_reply ("%s: missing arguments (usage: %s)",
                         verbs[i].name, verbs[i].usage);
    goto out;
  }
  reply = verbs[i].fn (d, &r);

 out:
  free (r.copy);
  return reply;
}

char *
ctl_handle_line (struct disk *d, const char *line)
{
  json_t *reply = handle (d, line);
  char *s;

  if (reply == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  s = json_dumps (reply, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref (reply);
  if (s == NULL)
    errno = ENOMEM;
  return s;
}
