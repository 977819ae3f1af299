/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif-bench: the command line. */
#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "stabledif-bench.h"

/* Defaults (also in the man page). */
#define DEFAULT_THREADS 4
#define DEFAULT_WORKING_SET (16u * 1024 * 1024)
#define DEFAULT_DURATION 5.0
#define DEFAULT_FLUSH_INTERVAL 100
#define DEFAULT_PAGE_SIZE 4096
#define DEFAULT_WRITE_SIZE 512
#define DEFAULT_THINK 20
#define DEFAULT_FORMAT "T10-DIF-TYPE1-CRC"

/* The order of --policy all: the default first, then the two waiting
 * policies, the copying one, and the unsafe one last. */
static const int all_policies[] = {
  STABLEDIF_POLICY_AUTO, STABLEDIF_POLICY_WAIT, STABLEDIF_POLICY_WAIT_SENT,
  STABLEDIF_POLICY_SNAPSHOT, STABLEDIF_POLICY_NONE,
};

static void
usage (FILE *fp)
{
  fprintf (fp,
"Usage: " PROG " [OPTIONS] [URI]\n"
"Model a page cache on a stabledif disk and measure what each stable-page\n"
"policy costs: writer threads dirty hot pages (waiting for stable pages\n"
"first), a flusher writes them back and flushes.  With no URI, starts its\n"
"own nbdkit with the stabledif plugin on a private socket.\n"
"\n"
"Model:\n"
"  -p, --policy LIST          policies to run, comma-separated: auto, wait,\n"
"                             wait-sent, snapshot, none, or all (default)\n"
"  -t, --threads N            writer threads (default %d)\n"
"      --working-set SIZE     bytes of hot pages (default 16M)\n"
"  -d, --duration SECS        seconds per policy (default %.0f, at most %.0f)\n"
"      --flush-interval MS    flusher period, milliseconds (default %d)\n"
"      --page-size SIZE       page size (default %d; a multiple of the\n"
"                             device's protection interval)\n"
"      --write-size SIZE      bytes a writer changes per write (default\n"
"                             %d; 0: the whole page)\n"
"      --think-us USEC        a writer's sleep after each write, the\n"
"                             application's own work (default %d; 0: none,\n"
"                             writers then compete for every CPU)\n"
"      --race-delay-us USEC   library delay between checksum and copy-out\n"
"                             (default 0; widens the window policy none\n"
"                             leaves open)\n"
"      --seed N               random seed of the writers (default 1)\n"
"      --layout L             pages as data with the library's PI\n"
"                             (separate, default), as extended blocks\n"
"                             whose tuples the library fills (interleaved),\n"
"                             or extended blocks whose PI the writers make\n"
"                             with the data, sent unchecked (caller)\n"
"      --connections N        connections per handle, 1 to %d (default 1;\n"
"                             more than one only if the server advertises\n"
"                             multi-conn), each with its own I/O thread\n"
"\n"
"Device:\n"
"  URI                        NBD URI of the dif view, e.g.\n"
"                             nbd+unix:///dif?socket=/tmp/sock\n"
"  -s, --ctl SOCKET           its control socket, for the device's counters\n"
"      --plugin PATH          plugin for our own nbdkit (default:\n"
"                             $STABLEDIF_PLUGIN, the build tree's\n"
"                             stabledif.so, else nbdkit's \"stabledif\")\n"
"      --format FORMAT        PI format of our own device (default\n"
"                             " DEFAULT_FORMAT ")\n"
"      --interval 512|4096    protection interval of our own device\n"
"      --size SIZE            size of our own device (default: the\n"
"                             working set)\n"
"\n"
"Output:\n"
"  -j, --json                 print one JSON document instead of tables\n"
"      --svg FILE             write a latency plot (SVG) to FILE\n"
"      --progress, --no-progress\n"
"                             progress line on stderr (default: if it is a\n"
"                             terminal)\n"
"  -h, --help                 this help\n"
"  -V, --version              print the version\n"
"\n"
"Exit status: 0 every run finished; 1 a run or the device failed; 2 bad\n"
"usage; 130 interrupted (the runs so far are reported).\n",
           DEFAULT_THREADS, DEFAULT_DURATION, BENCH_MAX_DURATION,
           DEFAULT_FLUSH_INTERVAL, DEFAULT_PAGE_SIZE, DEFAULT_WRITE_SIZE,
           DEFAULT_THINK, STABLEDIF_MAX_CONNECTIONS);
}

int
options_parse_size (const char *s, uint64_t *out)
{
  char *end;
  unsigned long long v;
  unsigned shift = 0;

  if (s == NULL || *s < '0' || *s > '9')
    return -1;
  errno = 0;
  v = strtoull (s, &end, 10);
  if (errno != 0)
    return -1;
  switch (*end) {
  case 'k': case 'K': shift = 10; end++; break;
  case 'm': case 'M': shift = 20; end++; break;
  case 'g': case 'G': shift = 30; end++; break;
  case 't': case 'T': shift = 40; end++; break;
  default: break;
  }
  if (shift && strcmp (end, "iB") == 0)
    end += 2;
  else if (strcmp (end, "B") == 0 || strcmp (end, "b") == 0)
    end += 1;
  if (*end != '\0')
    return -1;
  if (shift && v > (UINT64_MAX >> shift))
    return -1;
  *out = (uint64_t) v << shift;
  return 0;
}

/* An unsigned number of OPT in [MIN, MAX]. */
static int
parse_uint (const char *opt, const char *s, unsigned long long min,
            unsigned long long max, unsigned long long *out)
{
  char *end;
  unsigned long long v;

  errno = 0;
  if (*s < '0' || *s > '9')
    goto bad;
  v = strtoull (s, &end, 10);
  if (errno != 0 || *end != '\0')
    goto bad;
  if (v < min || v > max) {
    fprintf (stderr, PROG ": %s %s: out of range (%llu to %llu)\n",
             opt, s, min, max);
    return -1;
  }
  *out = v;
  return 0;
 bad:
  fprintf (stderr, PROG ": %s: \"%s\" is not a number\n", opt, s);
  return -1;
}

/* A size of OPT in [MIN, MAX]. */
static int
parse_size_opt (const char *opt, const char *s, uint64_t min, uint64_t max,
                uint64_t *out)
{
  uint64_t v;

  if (options_parse_size (s, &v) == -1) {
    fprintf (stderr, PROG ": %s: \"%s\" is not a size (a number with an "
             "optional K, M, G or T suffix)\n", opt, s);
    return -1;
  }
  if (v < min || v > max) {
    fprintf (stderr, PROG ": %s %s: out of range (%" PRIu64 " to %" PRIu64
             " bytes)\n", opt, s, min, max);
    return -1;
  }
  *out = v;
  return 0;
}

/* The --policy list. */
static int
parse_policies (const char *s, struct bench_options *o)
{
  char *copy = strdup (s), *tok, *save = NULL;
  int ret = -1;

  if (copy == NULL) {
    perror (PROG ": strdup");
    return -1;
  }
  o->npolicies = 0;
  for (tok = strtok_r (copy, ",", &save); tok != NULL;
       tok = strtok_r (NULL, ",", &save)) {
    if (strcmp (tok, "all") == 0) {
      size_t i;
      for (i = 0; i < sizeof all_policies / sizeof all_policies[0]; i++) {
        if (o->npolicies == BENCH_MAX_POLICIES)
          goto too_many;
        o->policies[o->npolicies++] = all_policies[i];
      }
      continue;
    }
    if (o->npolicies == BENCH_MAX_POLICIES)
      goto too_many;
    /* Our own lookup: the library's sets a per-thread error we do not
     * need here. */
    {
      int p = stabledif_policy_from_name (tok);
      if (p == -1) {
        fprintf (stderr, PROG ": --policy: unknown policy \"%s\" (expected "
                 "auto, wait, wait-sent, snapshot, none or all)\n", tok);
        goto out;
      }
      o->policies[o->npolicies++] = p;
    }
  }
  if (o->npolicies == 0) {
    fprintf (stderr, PROG ": --policy: no policy given\n");
    goto out;
  }
  ret = 0;
  goto out;
 too_many:
  fprintf (stderr, PROG ": --policy: at most %d runs\n", BENCH_MAX_POLICIES);
 out:
  free (copy);
  return ret;
}

enum {
  OPT_WORKING_SET = 256, OPT_FLUSH_INTERVAL, OPT_PAGE_SIZE, OPT_WRITE_SIZE,
  OPT_RACE_DELAY, OPT_THINK, OPT_SEED, OPT_PLUGIN, OPT_FORMAT, OPT_INTERVAL,
  OPT_SIZE,
  OPT_SVG, OPT_PROGRESS, OPT_NO_PROGRESS, OPT_CONNECTIONS, OPT_LAYOUT,
};

static const struct option long_options[] = {
  { "policy", required_argument, NULL, 'p' },
  { "threads", required_argument, NULL, 't' },
  { "working-set", required_argument, NULL, OPT_WORKING_SET },
  { "duration", required_argument, NULL, 'd' },
  { "flush-interval", required_argument, NULL, OPT_FLUSH_INTERVAL },
  { "page-size", required_argument, NULL, OPT_PAGE_SIZE },
  { "write-size", required_argument, NULL, OPT_WRITE_SIZE },
  { "race-delay-us", required_argument, NULL, OPT_RACE_DELAY },
  { "think-us", required_argument, NULL, OPT_THINK },
  { "seed", required_argument, NULL, OPT_SEED },
  { "connections", required_argument, NULL, OPT_CONNECTIONS },
  { "layout", required_argument, NULL, OPT_LAYOUT },
  { "ctl", required_argument, NULL, 's' },
  { "socket", required_argument, NULL, 's' },
  { "plugin", required_argument, NULL, OPT_PLUGIN },
  { "format", required_argument, NULL, OPT_FORMAT },
  { "interval", required_argument, NULL, OPT_INTERVAL },
  { "size", required_argument, NULL, OPT_SIZE },
  { "json", no_argument, NULL, 'j' },
  { "svg", required_argument, NULL, OPT_SVG },
  { "progress", no_argument, NULL, OPT_PROGRESS },
  { "no-progress", no_argument, NULL, OPT_NO_PROGRESS },
  { "help", no_argument, NULL, 'h' },
  { "version", no_argument, NULL, 'V' },
  { NULL, 0, NULL, 0 },
};

const char *
layout_name (int l)
{
  switch (l) {
  case BENCH_LAYOUT_INTERLEAVED: return "interleaved";
  case BENCH_LAYOUT_CALLER: return "caller";
  default: return "separate";
  }
}

/* What the options say beyond the values they store in struct
 * bench_options (options_scan fills it in). */
struct scan_state {
  bool self_only;               /* --plugin, --format, --interval or
                                   --size was given: they describe our
                                   own device */
  int progress;                 /* --progress 1, --no-progress 0, neither
                                   -1 */
};

/* Set O to the defaults, before the command line is read. */
static void
options_defaults (struct bench_options *o)
{
  memset (o, 0, sizeof *o);
  o->threads = DEFAULT_THREADS;
  o->working_set = DEFAULT_WORKING_SET;
  o->duration = DEFAULT_DURATION;
  o->flush_interval_ms = DEFAULT_FLUSH_INTERVAL;
  o->page_size = DEFAULT_PAGE_SIZE;
  o->write_size = DEFAULT_WRITE_SIZE;
  o->think_us = DEFAULT_THINK;
  o->format = DEFAULT_FORMAT;
  o->seed = 1;
  o->connections = 1;
  o->layout = BENCH_LAYOUT_SEPARATE;
  memcpy (o->policies, all_policies, sizeof all_policies);
  o->npolicies = sizeof all_policies / sizeof all_policies[0];
}

/* The --duration S: a finite number of seconds from BENCH_MIN_DURATION
 * to BENCH_MAX_DURATION.  Returns 0 with *OUT set, or -1 after printing
 * why not. */
static int
parse_duration (const char *s, double *out)
{
  char *end;
  double d;

  errno = 0;
  d = strtod (s, &end);
  if (errno != 0 || end == s || *end != '\0' || !isfinite (d)) {
    fprintf (stderr, PROG ": --duration: \"%s\" is not a number of "
             "seconds\n", s);
    return -1;
  }
  if (d < BENCH_MIN_DURATION || d > BENCH_MAX_DURATION) {
    fprintf (stderr, PROG ": --duration %s: out of range (%.1f to %.0f "
             "seconds)\n", s, BENCH_MIN_DURATION, BENCH_MAX_DURATION);
    return -1;
  }
  *out = d;
  return 0;
}

/* The --interval S: 512 or 4096.  Returns 0 with *OUT set, or -1 after
 * printing why not. */
static int
parse_interval (const char *s, uint32_t *out)
{
  if (strcmp (s, "512") == 0)
    *out = 512;
  else if (strcmp (s, "4096") == 0)
    *out = 4096;
  else {
    fprintf (stderr, PROG ": --interval %s: must be 512 or 4096\n", s);
    return -1;
  }
  return 0;
}

/* An unsigned option OPT with the value S in [MIN, MAX] (MAX fits an
 * unsigned), stored in *OUT.  Returns 0, or -1 after printing why
 * not. */
static int
parse_unsigned_opt (const char *opt, const char *s, unsigned long long min,
                    unsigned long long max, unsigned *out)
{
  unsigned long long v;

  if (parse_uint (opt, s, min, max, &v) == -1)
    return -1;
  *out = (unsigned) v;
  return 0;
}

/* The same for a uint32_t *OUT (MAX fits it). */
static int
parse_u32_opt (const char *opt, const char *s, unsigned long long min,
               unsigned long long max, uint32_t *out)
{
  unsigned long long v;

  if (parse_uint (opt, s, min, max, &v) == -1)
    return -1;
  *out = (uint32_t) v;
  return 0;
}

/* A size option OPT with the value S in [MIN, MAX] bytes, stored in the
 * uint32_t *OUT (MAX fits it).  Returns 0, or -1 after printing why
 * not. */
static int
parse_size32_opt (const char *opt, const char *s, uint64_t min,
                  uint64_t max, uint32_t *out)
{
  uint64_t v;

  if (parse_size_opt (opt, s, min, max, &v) == -1)
    return -1;
  *out = (uint32_t) v;
  return 0;
}

/* If C (a getopt_long code) is one of the options of the model, store
 * its value ARG in O.  Returns 0, -1 after printing an error naming the
 * option, or 1 if C is not a model option. */
static int
model_option (struct bench_options *o, int c, const char *arg)
{
  switch (c) {
  case 'p':
    return parse_policies (arg, o);
  case 't':
    return parse_unsigned_opt ("--threads", arg, 1, BENCH_MAX_THREADS,
                               &o->threads);
  case OPT_WORKING_SET:
    return parse_size_opt ("--working-set", arg, 1, BENCH_MAX_WORKING_SET,
                           &o->working_set);
  case 'd':
    return parse_duration (arg, &o->duration);
  case OPT_FLUSH_INTERVAL:
    return parse_unsigned_opt ("--flush-interval", arg, 1,
                               BENCH_MAX_FLUSH_INTERVAL,
                               &o->flush_interval_ms);
  case OPT_PAGE_SIZE:
    return parse_size32_opt ("--page-size", arg, 1, BENCH_MAX_PAGE_SIZE,
                             &o->page_size);
  case OPT_WRITE_SIZE:
    return parse_size32_opt ("--write-size", arg, 0, BENCH_MAX_PAGE_SIZE,
                             &o->write_size);
  case OPT_RACE_DELAY:
    return parse_u32_opt ("--race-delay-us", arg, 0, BENCH_MAX_RACE_DELAY,
                          &o->race_delay_us);
  case OPT_THINK:
    return parse_u32_opt ("--think-us", arg, 0, BENCH_MAX_THINK,
                          &o->think_us);
  case OPT_SEED:
    return parse_unsigned_opt ("--seed", arg, 0, UINT_MAX, &o->seed);
  case OPT_CONNECTIONS:
    return parse_unsigned_opt ("--connections", arg, 1,
                               STABLEDIF_MAX_CONNECTIONS, &o->connections);
  case OPT_LAYOUT:
    for (o->layout = BENCH_LAYOUT_SEPARATE;
         o->layout <= BENCH_LAYOUT_CALLER; o->layout++)
      if (strcmp (arg, layout_name (o->layout)) == 0)
        return 0;
    fprintf (stderr, PROG ": --layout \"%s\": want separate, interleaved "
             "or caller\n", arg);
    return -1;
  default:
    return 1;
  }
}

/* If C (a getopt_long code) is one of the options of the device, store
 * its value ARG in O; those of our own device also set S->self_only.
 * Returns 0, -1 after printing an error naming the option, or 1 if C is
 * not a device option. */
static int
device_option (struct bench_options *o, struct scan_state *s, int c,
               const char *arg)
{
  switch (c) {
  case 's':
    o->ctl = arg;
    return 0;
  case OPT_PLUGIN:
    o->plugin = arg;
    break;
  case OPT_FORMAT:
    o->format = arg;
    break;
  case OPT_INTERVAL:
    if (parse_interval (arg, &o->interval) == -1)
      return -1;
    break;
  case OPT_SIZE:
    if (parse_size_opt ("--size", arg, 1, UINT64_C (1) << 50,
                        &o->size) == -1)
      return -1;
    break;
  default:
    return 1;
  }
  s->self_only = true;
  return 0;
}

/* If C (a getopt_long code) is one of the options of the output, store
 * its value ARG in O or S.  Returns 0, or 1 if C is not an output
 * option. */
static int
output_option (struct bench_options *o, struct scan_state *s, int c,
               const char *arg)
{
  switch (c) {
  case 'j':
    o->json = true;
    return 0;
  case OPT_SVG:
    o->svg = arg;
    return 0;
  case OPT_PROGRESS:
    s->progress = 1;
    return 0;
  case OPT_NO_PROGRESS:
    s->progress = 0;
    return 0;
  default:
    return 1;
  }
}

/* Print that the option getopt_long just refused (optopt, else
 * ARGV[optind - 1]) is unknown, and where help is. */
static void
report_unknown_option (char **argv)
{
  if (optopt)
    fprintf (stderr, PROG ": unknown option -%c\n", optopt);
  else
    fprintf (stderr, PROG ": unknown option %s\n", argv[optind - 1]);
  fprintf (stderr, "Try '" PROG " --help'.\n");
}

/* Read the options of ARGV into O and S, from the first (getopt_long
 * is restarted) to the first operand.  Returns 0 with optind at the
 * first operand, 1 after printing the help or the version, or -1 after
 * printing an error: an option without its argument, an unknown
 * option, a bad value. */
static int
options_scan (int argc, char **argv, struct bench_options *o,
              struct scan_state *s)
{
  int c;

  optind = 0;                   /* glibc: start afresh (tests parse often) */
  opterr = 0;
  while ((c = getopt_long (argc, argv, ":p:t:d:s:jhV", long_options,
                           NULL)) != -1) {
    int r;

    switch (c) {
    case 'h':
      usage (stdout);
      return 1;
    case 'V':
      printf (PROG " %s\n", PACKAGE_VERSION);
      return 1;
    case ':':
      fprintf (stderr, PROG ": option %s needs an argument\n",
               argv[optind - 1]);
      fprintf (stderr, "Try '" PROG " --help'.\n");
      return -1;
    }
    r = model_option (o, c, optarg);
    if (r == 1)
      r = device_option (o, s, c, optarg);
    if (r == 1)
      r = output_option (o, s, c, optarg);
    if (r == 1) {
      report_unknown_option (argv);
      return -1;
    }
    if (r == -1)
      return -1;
  }
  return 0;
}

/* The operands after the options (from optind): at most one, the URI,
 * stored in O.  Returns 0, or -1 after printing the first extra one. */
static int
options_operands (int argc, char **argv, struct bench_options *o)
{
  if (optind < argc)
    o->uri = argv[optind++];
  if (optind < argc) {
    fprintf (stderr, PROG ": unexpected argument \"%s\" (only one URI)\n",
             argv[optind]);
    return -1;
  }
  return 0;
}

/* Check the options of O against each other; SELF_ONLY_GIVEN: an option
 * of our own device was given.  Returns 0, or -1 after printing the
 * first conflict. */
static int
check_options (const struct bench_options *o, bool self_only_given)
{
  if (o->page_size < 512 || (o->page_size & (o->page_size - 1)) != 0 ||
      o->page_size > BENCH_MAX_PAGE_SIZE) {
    fprintf (stderr, PROG ": --page-size %" PRIu32 ": must be a power of two "
             "from 512 to %u\n", o->page_size, BENCH_MAX_PAGE_SIZE);
    return -1;
  }
  /* A write size of 0, the whole page, is never larger. */
  if (o->write_size > o->page_size) {
    fprintf (stderr, PROG ": --write-size %" PRIu32 " is larger than the "
             "page size %" PRIu32 "\n", o->write_size, o->page_size);
    return -1;
  }
  if (o->working_set < o->page_size || o->working_set % o->page_size != 0) {
    fprintf (stderr, PROG ": --working-set %" PRIu64 ": must be a non-zero "
             "multiple of the page size %" PRIu32 "\n", o->working_set,
             o->page_size);
    return -1;
  }
  if (o->uri && self_only_given) {
    fprintf (stderr, PROG ": --plugin, --format, --interval and --size "
             "describe the device " PROG " starts itself; they cannot be "
             "used with a URI\n");
    return -1;
  }
  if (o->uri == NULL && o->ctl) {
    fprintf (stderr, PROG ": --ctl names the control socket of the device "
             "at URI; without a URI " PROG " uses its own device's\n");
    return -1;
  }
  if (o->size && o->size < o->working_set) {
    fprintf (stderr, PROG ": --size %" PRIu64 " is smaller than the working "
             "set %" PRIu64 "\n", o->size, o->working_set);
    return -1;
  }
  return 0;
}

/* Fill in the values of O that depend on others, once they are checked:
 * a write size of 0 is the whole page; the progress line is shown if S
 * says so, else if stderr is a terminal. */
static void
options_resolve (struct bench_options *o, const struct scan_state *s)
{
  if (o->write_size == 0)
    o->write_size = o->page_size;
  o->progress = s->progress == -1 ? isatty (STDERR_FILENO) : s->progress;
}

int
options_parse (int argc, char **argv, struct bench_options *o)
{
  struct scan_state s = { .self_only = false, .progress = -1 };
  int r;

  options_defaults (o);
  r = options_scan (argc, argv, o, &s);
  if (r != 0)
    return r;
  if (options_operands (argc, argv, o) == -1 ||
      check_options (o, s.self_only) == -1)
    return -1;
  options_resolve (o, &s);
  return 0;
}
