/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif-ctl: look at and poke a running stabledif device through its
 * control socket (stabledif-ctl(1)).
 *
 * Every command sends one or more request lines and turns the JSON
 * replies into tables (or prints them raw with --json, error replies
 * included).  Exit status: 0 success; 1 the device answered with an
 * error, or (check) corruption was seen; 2 usage or connection errors.
 * Every message starts with "stabledif-ctl:", never with argv[0].
 */
#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "ctl-conn.h"

#define PROG "stabledif-ctl"

/* Exit statuses. */
#define EXIT_OK 0               /* success, or check: clean */
#define EXIT_FAIL 1             /* device error reply, or check: corrupt */
#define EXIT_USAGE 2            /* usage or connection error */

/* Everything the command line says. */
struct options {
  const char *socket;           /* -s SOCKET, or NULL to find it */
  bool json;                    /* --json: print raw replies */
  bool follow;                  /* events --follow */
  long long n;                  /* events -n N (-1: all) */
  long long count;              /* watch --count N (-1: until ^C) */
  double interval;              /* watch/follow period, seconds */
  bool n_given, follow_given, count_given, interval_given;
                                /* which command-specific options appeared */
};

/* --json: error replies are printed on stdout as they are, too. */
static bool json_mode;

/* Set by SIGINT/SIGTERM: watch and events --follow stop. */
static volatile sig_atomic_t stop_requested;

static void
on_signal (int sig)
{
  stop_requested = 1;
}

static void
usage (FILE *fp)
{
  fprintf (fp,
"Usage: " PROG " [-s SOCKET] [--json] COMMAND [ARGS]\n"
"Look at and poke a running stabledif device through its control socket.\n"
"\n"
"Commands:\n"
"  status                  profile and key counters\n"
"  counters                every counter\n"
"  events [-n N] [--follow [--interval SECS]]\n"
"                          recent PI failures (the last N); --follow keeps\n"
"                          printing new ones until interrupted\n"
"  reset                   zero the counters and forget the events\n"
"  inject KIND LBA         corrupt stored block LBA (KIND: data, guard,\n"
"                          app, ref; LBA decimal or 0x hex) so that its\n"
"                          next read fails\n"
"  watch [--count N] [--interval SECS]\n"
"                          live rates, refreshed every SECS (default 1)\n"
"  check                   exit 1 if any corruption was seen, else 0\n"
"\n"
"Options:\n"
"  -s, --socket SOCKET     the device's control socket (default: the one\n"
"                          stabledif-*.sock in $XDG_RUNTIME_DIR or in\n"
"                          ${TMPDIR:-/tmp}/stabledif-UID)\n"
"  -j, --json              print the device's JSON replies as they are\n"
"                          (error replies too)\n"
"  -h, --help              this help\n"
"  -V, --version           the version\n"
"\n"
"Options go before the command; events and watch also take theirs\n"
"after it.  The arguments of inject are never options.\n"
"\n"
"Exit status: 0 success; 1 the device refused the request, or check saw\n"
"corruption; 2 usage or connection error.\n");
}

/* Print the usage error FMT as one line on stderr, "stabledif-ctl: "
 * first and a pointer to --help last, and exit 2. */
static void
die_usage (const char *fmt, ...)
  __attribute__ ((format (printf, 1, 2), noreturn));

static void
die_usage (const char *fmt, ...)
{
  va_list ap;

  fprintf (stderr, PROG ": ");
  va_start (ap, fmt);
  vfprintf (stderr, fmt, ap);
  va_end (ap);
  fprintf (stderr, "; see '" PROG " --help'\n");
  exit (EXIT_USAGE);
}

/* ---- talking to the device ---- */

/* The open connection and the path it goes to. */
static struct ctl_conn conn = { .fd = -1 };
static char *conn_path;

/* Connect (finding the socket if none was given); exit 2 on failure. */
static void
connect_device (const struct options *o)
{
  char err[2048];

  if (o->socket)
    conn_path = strdup (o->socket);
  else if ((conn_path = ctl_conn_find (err, sizeof err)) == NULL) {
    fprintf (stderr, PROG ": %s\n", err);
    exit (EXIT_USAGE);
  }
  if (conn_path == NULL) {
    perror (PROG);
    exit (EXIT_USAGE);
  }
  if (ctl_conn_open (&conn, conn_path, err, sizeof err) == -1) {
    fprintf (stderr, PROG ": cannot connect to the control socket %s\n",
             err);
    exit (EXIT_USAGE);
  }
}

/* Report ERR, the failure of request LINE: with the socket's path, and
 * the request unless the server is no control socket at all. */
static void
report_request_error (const char *line, const char *err)
{
  if (conn.foreign)
    fprintf (stderr, PROG ": %s: %s\n", conn_path, err);
  else
    fprintf (stderr, PROG ": %s: '%s': %s\n", conn_path, line, err);
}

/* Send LINE; return the reply (ok or not), raw text in *RAW if RAW.
 * Exits 2 if the connection fails. */
static json_t *
request_any (const char *line, char **raw)
{
  char err[512];
  json_t *reply;

  if (ctl_conn_request (&conn, line, &reply, raw, err, sizeof err) == -1) {
    report_request_error (line, err);
    exit (EXIT_USAGE);
  }
  return reply;
}

/* The error message of a reply, or NULL if it says ok. */
static const char *
reply_error (json_t *reply)
{
  if (json_is_true (json_object_get (reply, "ok")))
    return NULL;
  return json_string_value (json_object_get (reply, "error"))
    ? : "the device refused the request (no reason given)";
}

/* If REPLY (raw text RAW) is an error reply, report it and return true:
 * with --json the reply line goes to stdout as it is, and in any case
 * the device's message goes to stderr.  Returns false for an ok reply. */
static bool
report_refusal (json_t *reply, const char *raw)
{
  const char *e = reply_error (reply);

  if (e == NULL)
    return false;
  if (json_mode && raw) {
    printf ("%s\n", raw);
    fflush (stdout);
  }
  fprintf (stderr, PROG ": %s\n", e);
  return true;
}

/* Send LINE and return a reply that says ok (raw text in *RAW if RAW);
 * if it does not, reports the refusal (report_refusal) and exits with
 * STATUS. */
static json_t *
request_ok (const char *line, char **raw, int status)
{
  char *text;
  json_t *reply = request_any (line, &text);

  if (report_refusal (reply, text))
    exit (status);
  if (raw)
    *raw = text;
  else
    free (text);
  return reply;
}

/* ---- reading replies ---- */

/* The unsigned integer at the path of keys (NULL-terminated) in J, or 0
 * if it is missing. */
static uint64_t
get_u64 (json_t *j, ...)
{
  const char *key;
  va_list ap;

  va_start (ap, j);
  while ((key = va_arg (ap, const char *)) != NULL)
    j = json_object_get (j, key);
  va_end (ap);
  if (json_is_integer (j) && json_integer_value (j) >= 0)
    return json_integer_value (j);
  return 0;
}

/* The string at KEY in J, or "?". */
static const char *
get_str (json_t *j, const char *key)
{
  return json_string_value (json_object_get (j, key)) ? : "?";
}

/* guard + app + ref of an errors object. */
static uint64_t
sum_checks (json_t *errs)
{
  return get_u64 (errs, "guard", NULL) + get_u64 (errs, "app", NULL) +
         get_u64 (errs, "ref", NULL);
}

/* Bytes in binary units ("1.5 MiB"), into BUF. */
static const char *
human_bytes (double b, char *buf, size_t len)
{
  static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
  size_t u = 0;

  while (b >= 1024 && u + 1 < sizeof unit / sizeof unit[0]) {
    b /= 1024;
    u++;
  }
  if (u == 0)
    snprintf (buf, len, "%.0f B", b);
  else
    snprintf (buf, len, "%.1f %s", b, unit[u]);
  return buf;
}

static const char *const view_names[] = { "data", "dif" };
static const char *const op_names[] = {
  "read", "write", "trim", "zero", "flush"
};
#define NVIEWS 2
#define NOPS 5

/* ---- status ---- */

/* How much corruption a counters object shows; fills the parts. */
struct corruption {
  uint64_t write_errors;        /* host PI rejected (blocks) */
  uint64_t read_errors;         /* stored PI failed (blocks) */
  uint64_t writes_rejected;     /* write requests refused */
  uint64_t reads_failed;        /* read requests failed */
};

static bool
corruption_of (json_t *counters, struct corruption *c)
{
  c->write_errors = sum_checks (json_object_get (counters, "write_errors"));
  c->read_errors = sum_checks (json_object_get (counters, "read_errors"));
  c->writes_rejected = get_u64 (counters, "writes_rejected", NULL);
  c->reads_failed = get_u64 (counters, "reads_failed", NULL);
  return c->write_errors || c->read_errors || c->writes_rejected ||
         c->reads_failed;
}

/* Print the one-line corruption summary. */
static void
print_corruption (json_t *counters)
{
  struct corruption c;
  json_t *we = json_object_get (counters, "write_errors");
  json_t *re = json_object_get (counters, "read_errors");

  if (!corruption_of (counters, &c)) {
    printf ("corruption        none seen\n");
    return;
  }
  printf ("corruption        SEEN: %" PRIu64 " bad block(s) written "
          "(guard %" PRIu64 ", app %" PRIu64 ", ref %" PRIu64 "), "
          "%" PRIu64 " bad block(s) read "
          "(guard %" PRIu64 ", app %" PRIu64 ", ref %" PRIu64 "); "
          "%" PRIu64 " write(s) rejected, %" PRIu64 " read(s) failed\n",
          c.write_errors, get_u64 (we, "guard", NULL),
          get_u64 (we, "app", NULL), get_u64 (we, "ref", NULL),
          c.read_errors, get_u64 (re, "guard", NULL),
          get_u64 (re, "app", NULL), get_u64 (re, "ref", NULL),
          c.writes_rejected, c.reads_failed);
}

/* A [view][op] table (requests or bytes). */
static void
print_view_op_table (const char *title, json_t *tab, bool bytes)
{
  size_t v, op;
  char h[32];

  printf ("%-10s", title);
  for (op = 0; op < NOPS; op++)
    printf (" %12s", op_names[op]);
  printf ("\n");
  for (v = 0; v < NVIEWS; v++) {
    printf ("  %-8s", view_names[v]);
    for (op = 0; op < NOPS; op++) {
      uint64_t n = get_u64 (tab, view_names[v], op_names[op], NULL);
      if (bytes)
        printf (" %12s", human_bytes (n, h, sizeof h));
      else
        printf (" %12" PRIu64, n);
    }
    printf ("\n");
  }
}

/* The failures-by-connection lines of a counters reply.  The device
 * counts them over the events it still keeps (its ring): the heading
 * says how many of all the events that is. */
static void
print_by_conn (json_t *reply)
{
  json_t *arr = json_object_get (reply, "failures_by_conn"), *e;
  uint64_t kept = 0, all = get_u64 (reply, "last_seq", NULL);
  size_t i;

  if (json_array_size (arr) == 0)
    return;
  json_array_foreach (arr, i, e)
    kept += get_u64 (e, "write_errors", NULL) +
      get_u64 (e, "read_errors", NULL);
  if (kept < all)
    printf ("failures by connection (the last %" PRIu64 " of %" PRIu64
            " events):\n", kept, all);
  else
    printf ("failures by connection (all %" PRIu64 " event%s):\n", kept,
            kept == 1 ? "" : "s");
  json_array_foreach (arr, i, e)
    printf ("  conn %-6" PRIu64 " %" PRIu64 " bad block(s) written, "
            "%" PRIu64 " read; last event %" PRIu64 "\n",
            get_u64 (e, "conn", NULL), get_u64 (e, "write_errors", NULL),
            get_u64 (e, "read_errors", NULL), get_u64 (e, "last_seq", NULL));
}

static int
cmd_status (const struct options *o)
{
  char *raw_p, *raw_c, h[32];
  json_t *prof = request_ok ("profile", &raw_p, EXIT_FAIL);
  json_t *cnt = request_ok ("counters", &raw_c, EXIT_FAIL);
  json_t *views = json_object_get (prof, "views");
  json_t *data = json_object_get (views, "data");
  json_t *dif = json_object_get (views, "dif");
  json_t *c = json_object_get (cnt, "counters");
  json_t *we = json_object_get (c, "write_errors");
  json_t *re = json_object_get (c, "read_errors");

  if (o->json) {
    printf ("{\"ok\":true,\"profile\":%s,\"counters\":%s}\n", raw_p, raw_c);
    goto out;
  }

  printf ("socket            %s\n", conn_path);
  printf ("profile (data)    %s\n", get_str (data, "profile"));
  printf ("profile (dif)     %s\n", get_str (dif, "profile"));
  printf ("format            %s, interval %" PRIu64 ", tuple %" PRIu64
          ", stable_writes %s\n", get_str (dif, "format"),
          get_u64 (dif, "interval", NULL), get_u64 (dif, "tuple", NULL),
          json_is_true (json_object_get (prof, "stable_writes"))
          ? "1 (the device checks host PI)" : "0");
  printf ("size              %" PRIu64 " bytes (%s), %" PRIu64 " blocks; "
          "dif view %" PRIu64 " bytes; store %s%s\n",
          get_u64 (prof, "size", NULL),
          human_bytes (get_u64 (prof, "size", NULL), h, sizeof h),
          get_u64 (prof, "nblocks", NULL), get_u64 (dif, "size", NULL),
          get_str (prof, "store"),
          json_is_true (json_object_get (prof, "read_only"))
          ? " (read-only)" : "");
  printf ("\n");
  print_view_op_table ("requests", json_object_get (c, "requests"), false);
  print_view_op_table ("bytes", json_object_get (c, "bytes"), true);
  printf ("\n");
  printf ("blocks            %" PRIu64 " verified, %" PRIu64 " generated, "
          "%" PRIu64 " escaped, %" PRIu64 " recovered\n",
          get_u64 (c, "blocks", "verified", NULL),
          get_u64 (c, "blocks", "generated", NULL),
          get_u64 (c, "blocks", "escaped", NULL),
          get_u64 (c, "blocks", "recovered", NULL));
  printf ("PI errors         %8s %8s %8s\n", "guard", "app", "ref");
  printf ("  written         %8" PRIu64 " %8" PRIu64 " %8" PRIu64 "\n",
          get_u64 (we, "guard", NULL), get_u64 (we, "app", NULL),
          get_u64 (we, "ref", NULL));
  printf ("  read            %8" PRIu64 " %8" PRIu64 " %8" PRIu64 "\n",
          get_u64 (re, "guard", NULL), get_u64 (re, "app", NULL),
          get_u64 (re, "ref", NULL));
  printf ("writes rejected   %" PRIu64 "\n",
          get_u64 (c, "writes_rejected", NULL));
  printf ("reads failed      %" PRIu64 "\n",
          get_u64 (c, "reads_failed", NULL));
  printf ("injections        %" PRIu64 "\n", get_u64 (c, "injections", NULL));
  printf ("events            last #%" PRIu64 "\n",
          get_u64 (cnt, "last_seq", NULL));
  print_by_conn (cnt);
  print_corruption (c);

 out:
  free (raw_p);
  free (raw_c);
  json_decref (prof);
  json_decref (cnt);
  return EXIT_OK;
}

/* ---- counters ---- */

/* Print every leaf of J as "prefix.key value", depth first. */
static void
print_flat (const char *prefix, json_t *j)
{
  const char *key;
  json_t *v;
  size_t i;

  if (json_is_object (j)) {
    json_object_foreach (j, key, v) {
      char name[256];
      snprintf (name, sizeof name, "%s%s%s", prefix, *prefix ? "." : "", key);
      print_flat (name, v);
    }
  }
  else if (json_is_array (j)) {
    json_array_foreach (j, i, v) {
      char name[256];
      snprintf (name, sizeof name, "%s.%zu", prefix, i);
      print_flat (name, v);
    }
  }
  else if (json_is_integer (j))
    printf ("%-32s %" JSON_INTEGER_FORMAT "\n", prefix,
            json_integer_value (j));
  else if (json_is_string (j))
    printf ("%-32s %s\n", prefix, json_string_value (j));
  else if (json_is_boolean (j))
    printf ("%-32s %s\n", prefix, json_is_true (j) ? "true" : "false");
}

static int
cmd_counters (const struct options *o)
{
  char *raw;
  json_t *reply = request_ok ("counters", &raw, EXIT_FAIL);

  if (o->json)
    printf ("%s\n", raw);
  else {
    print_flat ("", json_object_get (reply, "counters"));
    printf ("%-32s %" PRIu64 "\n", "last_seq",
            get_u64 (reply, "last_seq", NULL));
    print_by_conn (reply);
  }
  free (raw);
  json_decref (reply);
  return EXIT_OK;
}

/* ---- events ---- */

static void
print_event_header (void)
{
  printf ("%6s  %-27s %5s %-4s %-5s %12s %-5s %18s %18s %12s %8s\n",
          "SEQ", "TIME", "CONN", "VIEW", "OP", "LBA", "CHECK",
          "EXPECTED", "ACTUAL", "OFFSET", "LENGTH");
}

/* One event, as a table row or (json) a JSON line. */
static void
print_event (json_t *ev, bool json)
{
  if (json) {
    char *s = json_dumps (ev, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (s)
      printf ("%s\n", s);
    free (s);
    return;
  }
  printf ("%6" PRIu64 "  %-27s %5" PRIu64 " %-4s %-5s %12" PRIu64
          " %-5s %18s %18s %12" PRIu64 " %8" PRIu64 "\n",
          get_u64 (ev, "seq", NULL), get_str (ev, "time"),
          get_u64 (ev, "conn", NULL), get_str (ev, "view"),
          get_str (ev, "op"), get_u64 (ev, "lba", NULL),
          get_str (ev, "check"), get_str (ev, "expected"),
          get_str (ev, "actual"), get_u64 (ev, "offset", NULL),
          get_u64 (ev, "length", NULL));
}

/* Fetch every event after SINCE (following "more"), appending them to
 * ALL; returns the next SINCE and adds to *MISSED.  Exits on errors. */
static uint64_t
fetch_events (uint64_t since, json_t *all, uint64_t *missed)
{
  for (;;) {
    char line[64];
    json_t *reply, *evs;
    bool more;

    snprintf (line, sizeof line, "events %" PRIu64, since);
    reply = request_ok (line, NULL, EXIT_FAIL);
    evs = json_object_get (reply, "events");
    json_array_extend (all, evs);
    *missed += get_u64 (reply, "missed", NULL);
    more = json_is_true (json_object_get (reply, "more"));
    /* "next" never goes backwards while there is more to read, so this
     * loop ends. */
    if (more && get_u64 (reply, "next", NULL) <= since)
      more = false;
    since = get_u64 (reply, "next", NULL);
    json_decref (reply);
    if (!more)
      return since;
  }
}

/* Sleep SECS seconds, or less if a signal arrives. */
static void
nap (double secs)
{
  struct timespec ts = {
    .tv_sec = (time_t) secs,
    .tv_nsec = (long) ((secs - (time_t) secs) * 1e9),
  };

  nanosleep (&ts, NULL);        /* EINTR ends it early: fine */
}

static int
cmd_events (const struct options *o)
{
  json_t *all = json_array ();
  uint64_t missed = 0, since;
  size_t i, first = 0;

  if (all == NULL) {
    perror (PROG);
    return EXIT_USAGE;
  }
  since = fetch_events (0, all, &missed);
  if (o->n >= 0 && json_array_size (all) > (size_t) o->n)
    first = json_array_size (all) - o->n;

  if (o->json && !o->follow) {
    json_t *out = json_pack ("{s:b, s:[], s:I, s:I}", "ok", 1, "events",
                             "next", (json_int_t) since,
                             "missed", (json_int_t) missed);
    char *s;

    for (i = first; out && i < json_array_size (all); i++)
      json_array_append (json_object_get (out, "events"),
                         json_array_get (all, i));
    s = out ? json_dumps (out, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    if (s == NULL) {
      perror (PROG);
      return EXIT_USAGE;
    }
    printf ("%s\n", s);
    free (s);
    json_decref (out);
    json_decref (all);
    return EXIT_OK;
  }

  if (!o->json)
    print_event_header ();
  for (i = first; i < json_array_size (all); i++)
    print_event (json_array_get (all, i), o->json);
  fflush (stdout);
  json_decref (all);

  while (o->follow && !stop_requested) {
    char line[64], err[512], *raw;
    json_t *reply, *evs;

    nap (o->interval);
    if (stop_requested)
      break;
    snprintf (line, sizeof line, "events %" PRIu64, since);
    if (ctl_conn_request (&conn, line, &reply, &raw, err, sizeof err) == -1) {
      if (conn.closed) {
        fprintf (stderr, PROG ": the device closed the control socket\n");
        return EXIT_OK;
      }
      report_request_error (line, err);
      return EXIT_USAGE;
    }
    if (report_refusal (reply, raw)) {
      free (raw);
      json_decref (reply);
      return EXIT_FAIL;
    }
    free (raw);
    if (get_u64 (reply, "missed", NULL) && !o->json)
      printf ("(%" PRIu64 " event(s) no longer kept by the device)\n",
              get_u64 (reply, "missed", NULL));
    evs = json_object_get (reply, "events");
    for (i = 0; i < json_array_size (evs); i++)
      print_event (json_array_get (evs, i), o->json);
    fflush (stdout);
    since = get_u64 (reply, "next", NULL);
    json_decref (reply);
  }
  return EXIT_OK;
}

/* ---- reset, inject ---- */

static int
cmd_reset (const struct options *o)
{
  char *raw;
  json_t *reply = request_ok ("reset", &raw, EXIT_FAIL);

  if (o->json)
    printf ("%s\n", raw);
  else
    printf ("counters and events reset\n");
  free (raw);
  json_decref (reply);
  return EXIT_OK;
}

static int
cmd_inject (const struct options *o, const char *kind, const char *lba)
{
  char line[256], *raw;
  json_t *reply;
  int n;

  n = snprintf (line, sizeof line, "inject %s %s", kind, lba);
  if (n < 0 || (size_t) n >= sizeof line)
    die_usage ("inject: arguments too long");
  reply = request_ok (line, &raw, EXIT_FAIL);
  if (o->json)
    printf ("%s\n", raw);
  else
    printf ("injected %s corruption into block %" PRIu64 "\n",
            get_str (reply, "kind"), get_u64 (reply, "lba", NULL));
  free (raw);
  json_decref (reply);
  return EXIT_OK;
}

/* ---- check ---- */

static int
cmd_check (const struct options *o)
{
  char *raw;
  json_t *reply = request_ok ("counters", &raw, EXIT_USAGE);
  json_t *c = json_object_get (reply, "counters");
  struct corruption k;
  bool bad = corruption_of (c, &k);

  if (o->json)
    printf ("%s\n", raw);
  else if (bad)
    print_corruption (c);
  else
    printf ("clean: no PI errors, rejected writes or failed reads\n");
  free (raw);
  json_decref (reply);
  return bad ? EXIT_FAIL : EXIT_OK;
}

/* ---- watch ---- */

/* One sample of the counters. */
struct sample {
  struct timespec t;            /* when (CLOCK_MONOTONIC) */
  uint64_t req[NVIEWS][2];      /* requests: read, write */
  uint64_t bytes[NVIEWS][2];    /* bytes: read, write */
  uint64_t verified, generated, escaped; /* blocks */
  struct corruption bad;        /* error counts */
  uint64_t injections;          /* faults injected */
};

static void
take_sample (json_t *c, struct sample *s)
{
  size_t v, k;

  clock_gettime (CLOCK_MONOTONIC, &s->t);
  for (v = 0; v < NVIEWS; v++)
    for (k = 0; k < 2; k++) {
      s->req[v][k] = get_u64 (c, "requests", view_names[v], op_names[k],
                              NULL);
      s->bytes[v][k] = get_u64 (c, "bytes", view_names[v], op_names[k],
                                NULL);
    }
  s->verified = get_u64 (c, "blocks", "verified", NULL);
  s->generated = get_u64 (c, "blocks", "generated", NULL);
  s->escaped = get_u64 (c, "blocks", "escaped", NULL);
  corruption_of (c, &s->bad);
  s->injections = get_u64 (c, "injections", NULL);
}

/* Rate of a counter between two samples (0 after a reset). */
static double
rate (uint64_t now, uint64_t before, double secs)
{
  return now >= before && secs > 0 ? (now - before) / secs : 0;
}

static void
print_watch_screen (const struct sample *s, const struct sample *p,
                    double secs, unsigned long refresh,
                    const struct options *o)
{
  size_t v, k;
  char h[32];

  printf ("\033[H\033[2J");
  printf (PROG " watch  %s  every %.1fs  refresh %lu  (Ctrl-C stops)\n\n",
          conn_path, o->interval, refresh);
  printf ("%-12s %12s %12s %14s\n", "", "requests/s", "throughput",
          "total requests");
  for (v = 0; v < NVIEWS; v++)
    for (k = 0; k < 2; k++) {
      char label[32];
      snprintf (label, sizeof label, "%s %s", view_names[v], op_names[k]);
      if (p)
        printf ("%-12s %12.0f %10s/s %14" PRIu64 "\n", label,
                rate (s->req[v][k], p->req[v][k], secs),
                human_bytes (rate (s->bytes[v][k], p->bytes[v][k], secs),
                             h, sizeof h), s->req[v][k]);
      else
        printf ("%-12s %12s %12s %14" PRIu64 "\n", label, "-", "-",
                s->req[v][k]);
    }
  printf ("\n%-12s %12s %14s\n", "blocks", "per second", "total");
  printf ("%-12s %12.0f %14" PRIu64 "\n", "verified",
          p ? rate (s->verified, p->verified, secs) : 0, s->verified);
  printf ("%-12s %12.0f %14" PRIu64 "\n", "generated",
          p ? rate (s->generated, p->generated, secs) : 0, s->generated);
  printf ("%-12s %12.0f %14" PRIu64 "\n", "escaped",
          p ? rate (s->escaped, p->escaped, secs) : 0, s->escaped);
  printf ("\n%-22s %8s %8s\n", "corruption", "new", "total");
  printf ("%-22s %8" PRIu64 " %8" PRIu64 "\n", "bad blocks written",
          p && s->bad.write_errors >= p->bad.write_errors
          ? s->bad.write_errors - p->bad.write_errors : 0,
          s->bad.write_errors);
  printf ("%-22s %8" PRIu64 " %8" PRIu64 "\n", "bad blocks read",
          p && s->bad.read_errors >= p->bad.read_errors
          ? s->bad.read_errors - p->bad.read_errors : 0,
          s->bad.read_errors);
  printf ("%-22s %8" PRIu64 " %8" PRIu64 "\n", "writes rejected",
          p && s->bad.writes_rejected >= p->bad.writes_rejected
          ? s->bad.writes_rejected - p->bad.writes_rejected : 0,
          s->bad.writes_rejected);
  printf ("%-22s %8" PRIu64 " %8" PRIu64 "\n", "reads failed",
          p && s->bad.reads_failed >= p->bad.reads_failed
          ? s->bad.reads_failed - p->bad.reads_failed : 0,
          s->bad.reads_failed);
  printf ("%-22s %8s %8" PRIu64 "\n", "injections", "", s->injections);
}

/* One plain line per refresh (not a terminal). */
static void
print_watch_line (const struct sample *s, const struct sample *p,
                  double secs)
{
  char stamp[32], h[NVIEWS][2][32];
  time_t now = time (NULL);
  struct tm tm;
  size_t v, k;

  localtime_r (&now, &tm);
  strftime (stamp, sizeof stamp, "%H:%M:%S", &tm);
  for (v = 0; v < NVIEWS; v++)
    for (k = 0; k < 2; k++)
      human_bytes (p ? rate (s->bytes[v][k], p->bytes[v][k], secs) : 0,
                   h[v][k], sizeof h[v][k]);
  printf ("%s data r %.0f/s %s/s w %.0f/s %s/s  dif r %.0f/s %s/s "
          "w %.0f/s %s/s  verified %.0f/s  bad written %" PRIu64
          " read %" PRIu64 "  rejected %" PRIu64 " failed %" PRIu64 "\n",
          stamp,
          p ? rate (s->req[0][0], p->req[0][0], secs) : 0, h[0][0],
          p ? rate (s->req[0][1], p->req[0][1], secs) : 0, h[0][1],
          p ? rate (s->req[1][0], p->req[1][0], secs) : 0, h[1][0],
          p ? rate (s->req[1][1], p->req[1][1], secs) : 0, h[1][1],
          p ? rate (s->verified, p->verified, secs) : 0,
          s->bad.write_errors, s->bad.read_errors, s->bad.writes_rejected,
          s->bad.reads_failed);
}

static int
cmd_watch (const struct options *o)
{
  bool tty = isatty (STDOUT_FILENO);
  struct sample s, prev;
  bool have_prev = false;
  unsigned long refresh;

  for (refresh = 1; !stop_requested; refresh++) {
    char err[512], *raw;
    json_t *reply;
    double secs;

    if (ctl_conn_request (&conn, "counters", &reply, &raw,
                          err, sizeof err) == -1) {
      if (conn.closed) {
        fprintf (stderr, PROG ": the device closed the control socket\n");
        return EXIT_OK;
      }
      report_request_error ("counters", err);
      return EXIT_USAGE;
    }
    if (report_refusal (reply, raw)) {
      free (raw);
      json_decref (reply);
      return EXIT_FAIL;
    }
    take_sample (json_object_get (reply, "counters"), &s);
    secs = have_prev ? (s.t.tv_sec - prev.t.tv_sec) +
                       (s.t.tv_nsec - prev.t.tv_nsec) / 1e9 : 0;
    if (o->json)
      printf ("%s\n", raw);
    else if (tty)
      print_watch_screen (&s, have_prev ? &prev : NULL, secs, refresh, o);
    else
      print_watch_line (&s, have_prev ? &prev : NULL, secs);
    fflush (stdout);
    free (raw);
    json_decref (reply);
    prev = s;
    have_prev = true;

    if (o->count >= 0 && refresh >= (unsigned long) o->count)
      break;
    nap (o->interval);
  }
  return EXIT_OK;
}

/* ---- main ---- */

/* A non-negative integer option, or die. */
static long long
parse_count (const char *opt, const char *s)
{
  char *end;
  long long v;

  errno = 0;
  v = strtoll (s, &end, 10);
  if (errno || end == s || *end || v < 0)
    die_usage ("%s: expected a number >= 0, got '%s'", opt, s);
  return v;
}

/* Check the arguments of inject before anything is sent: KIND must be
 * one word (the device says which kinds it knows) and LBA a number in
 * the device's syntax, decimal or hexadecimal with 0x, no sign.  Dies
 * with a usage error naming the bad argument. */
static void
check_inject_args (const char *kind, const char *lba)
{
  const char *digits = "0123456789";
  const char *p;

  /* A space or control character would split or end the request line. */
  for (p = kind; *p; p++)
    if ((unsigned char) *p <= ' ' || *p == 0x7f)
      break;
  if (kind[0] == '\0' || *p)
    die_usage ("inject: KIND is not one word (want data, guard, app or ref)");
  p = lba;
  if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
    digits = "0123456789abcdefABCDEF";
    p += 2;
  }
  if (*p == '\0' || p[strspn (p, digits)] != '\0')
    die_usage ("inject %s: LBA '%s' is not a number (want a block "
               "number, decimal or hexadecimal with 0x)", kind, lba);
}

/* Parse the options in ARGV[1..ARGC-1] into O, stopping at the first
 * argument that is not an option (or after "--").  Returns the index of
 * that argument (ARGC if none).  getopt's own messages are off: every
 * error is one line starting with PROG, and exits 2. */
static int
parse_options (int argc, char *argv[], struct options *o)
{
  enum { OPT_FOLLOW = 256, OPT_COUNT, OPT_INTERVAL };
  static const struct option long_opts[] = {
    { "socket", required_argument, NULL, 's' },
    { "json", no_argument, NULL, 'j' },
    { "help", no_argument, NULL, 'h' },
    { "version", no_argument, NULL, 'V' },
    { "follow", no_argument, NULL, 'f' },
    { "count", required_argument, NULL, OPT_COUNT },
    { "interval", required_argument, NULL, OPT_INTERVAL },
    { NULL, 0, NULL, 0 },
  };
  int c;

  optind = 0;                   /* start afresh: this is called twice */
  opterr = 0;
  while ((c = getopt_long (argc, argv, "+:s:jhVfn:", long_opts,
                           NULL)) != -1) {
    switch (c) {
    case 's': o->socket = optarg; break;
    case 'j': o->json = true; break;
    case 'h': usage (stdout); exit (EXIT_OK);
    case 'V': printf (PROG " %s\n", PACKAGE_VERSION); exit (EXIT_OK);
    case 'f': o->follow = o->follow_given = true; break;
    case 'n': o->n = parse_count ("-n", optarg); o->n_given = true; break;
    case OPT_COUNT:
      o->count = parse_count ("--count", optarg);
      if (o->count == 0)
        die_usage ("--count 0: the number of refreshes must be at least 1");
      o->count_given = true;
      break;
    case OPT_INTERVAL: {
      char *end;
      errno = 0;
      o->interval = strtod (optarg, &end);
      if (errno || end == optarg || *end || !(o->interval >= 0.01) ||
          o->interval > 3600)
        die_usage ("--interval: expected seconds from 0.01 to 3600, "
                   "got '%s'", optarg);
      o->interval_given = true;
      break;
    }
    case ':':
      /* optind is past the element that holds the option. */
      if (strncmp (argv[optind - 1], "--", 2) == 0)
        die_usage ("option '%s' needs an argument", argv[optind - 1]);
      die_usage ("option '-%c' needs an argument", optopt);
    default:
      /* optopt 0: an unknown (or ambiguous) long option, and optind is
       * past it.  A known letter: a long option that takes no argument
       * was given one ("--json=1").  Else an unknown letter. */
      if (optopt == 0)
        die_usage ("unknown option '%s'", argv[optind - 1]);
      if (strchr ("jhVf", optopt) && strncmp (argv[optind - 1], "--", 2) == 0)
        die_usage ("option '%s' takes no argument", argv[optind - 1]);
      die_usage ("unknown option '-%c'", optopt);
    }
  }
  return optind;
}

int
main (int argc, char *argv[])
{
  struct options o = { .n = -1, .count = -1, .interval = 1.0 };
  struct sigaction sa = { .sa_handler = on_signal };
  const char *cmd;
  char **args;
  int r, i, nargs;

  /* The options before the command. */
  i = parse_options (argc, argv, &o);
  if (i >= argc)
    die_usage ("no command given");
  cmd = argv[i];
  args = &argv[i + 1];
  nargs = argc - i - 1;

  /* Check the command and its arguments before connecting. */
  if (strcmp (cmd, "status") == 0 || strcmp (cmd, "counters") == 0 ||
      strcmp (cmd, "reset") == 0 || strcmp (cmd, "check") == 0 ||
      strcmp (cmd, "events") == 0 || strcmp (cmd, "watch") == 0) {
    /* Options may follow these commands (events -n 1, watch --count
     * 2); never inject, whose arguments are taken as they are ("inject
     * ref -1" is a bad LBA, not an option). */
    int skip = parse_options (nargs + 1, &argv[i], &o) - 1;

    args += skip;
    nargs -= skip;
    if (nargs != 0)
      die_usage ("%s takes no arguments (got '%s')", cmd, args[0]);
  }
  else if (strcmp (cmd, "inject") == 0) {
    if (nargs != 2)
      die_usage ("inject takes two arguments, KIND and LBA "
                 "(options go before the command)");
    check_inject_args (args[0], args[1]);
  }
  else
    die_usage ("unknown command '%s'", cmd);
  json_mode = o.json;
  if ((o.n_given || o.follow_given) && strcmp (cmd, "events") != 0)
    die_usage ("-n and --follow go with the events command");
  if (o.count_given && strcmp (cmd, "watch") != 0)
    die_usage ("--count goes with the watch command");
  if (o.interval_given && strcmp (cmd, "watch") != 0 && !o.follow)
    die_usage ("--interval goes with watch and events --follow");

  if (o.follow && !o.interval_given)
    o.interval = 0.5;           /* events --follow polls twice a second */

  /* ^C stops watch and --follow cleanly (no SA_RESTART: sleeps end);
   * any other command it just stops, as usual. */
  if (strcmp (cmd, "watch") == 0 || o.follow) {
    sigemptyset (&sa.sa_mask);
    sigaction (SIGINT, &sa, NULL);
    sigaction (SIGTERM, &sa, NULL);
  }
  signal (SIGPIPE, SIG_IGN);

  connect_device (&o);

  if (strcmp (cmd, "status") == 0)
    r = cmd_status (&o);
  else if (strcmp (cmd, "counters") == 0)
    r = cmd_counters (&o);
  else if (strcmp (cmd, "events") == 0)
    r = cmd_events (&o);
  else if (strcmp (cmd, "reset") == 0)
    r = cmd_reset (&o);
  else if (strcmp (cmd, "inject") == 0)
    r = cmd_inject (&o, args[0], args[1]);
  else if (strcmp (cmd, "watch") == 0)
    r = cmd_watch (&o);
  else
    r = cmd_check (&o);

  ctl_conn_close (&conn);
  free (conn_path);
  if (fflush (stdout) == EOF || ferror (stdout)) {
    perror (PROG ": stdout");
    return EXIT_USAGE;
  }
  return r;
}
