/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif-bench: our own nbdkit, when no URI is given.
 *
 * A private directory (mkdtemp) holds nbdkit's Unix socket, the control
 * socket, the pid file and nbdkit's log.  nbdkit runs in the foreground
 * as our child with --exit-with-parent (it dies with us whatever
 * happens), in its own process group (a ^C on the terminal reaches only
 * us: we finish the report, then stop it).  It is ready when it has
 * written its pid file (-P: after the socket is listening) and the
 * control socket exists.  Every wait is bounded.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pi.h"
#include "stabledif-bench.h"

/* How long nbdkit may take to start, and to stop after SIGTERM. */
#define START_TIMEOUT_MS 20000
#define STOP_TIMEOUT_MS 5000

void
serve_find_plugin (const char *explicit_path, char *buf, size_t len)
{
  const char *env = getenv ("STABLEDIF_PLUGIN");
  char exe[PATH_MAX], *slash;
  ssize_t n;

  if (explicit_path) {
    snprintf (buf, len, "%s", explicit_path);
    return;
  }
  if (env && *env) {
    snprintf (buf, len, "%s", env);
    return;
  }
  /* In a build tree the program is TOP/client/stabledif-bench/PROG (or
   * .libs/PROG under it, libtool's), and TOP has the stabledif.so link. */
  n = readlink ("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    slash = strrchr (exe, '/');             /* the program's directory */
    if (slash) {
      *slash = '\0';
      slash = strrchr (exe, '/');
      if (slash && strcmp (slash + 1, ".libs") == 0) {
        *slash = '\0';                      /* libtool's .libs */
        slash = strrchr (exe, '/');
      }
      if (slash) {
        *slash = '\0';                      /* client/ */
        slash = strrchr (exe, '/');
      }
      if (slash) {
        *slash = '\0';                      /* its parent: the build top */
        if (strlen (exe) + sizeof "/stabledif.so" <= len) {
          snprintf (buf, len, "%s/stabledif.so", exe);
          if (access (buf, R_OK) == 0)
            return;
        }
      }
    }
  }
  snprintf (buf, len, "stabledif");
}

/* dl_iterate_phdr callback: append the sanitizer runtimes this process
 * has loaded to the string at DATA (PATH_MAX * 2 bytes). */
static int
find_sanitizer (struct dl_phdr_info *info, size_t size, void *data)
{
  char *list = data;
  const char *base;

  if (info->dlpi_name == NULL || info->dlpi_name[0] != '/')
    return 0;
  base = strrchr (info->dlpi_name, '/') + 1;
  if (strncmp (base, "libasan.so", 10) == 0 ||
      strncmp (base, "libubsan.so", 11) == 0) {
    size_t used = strlen (list);
    snprintf (list + used, PATH_MAX * 2 - used, "%s%s", used ? " " : "",
              info->dlpi_name);
  }
  return 0;
}

/* Whether the plugin file at PATH was linked with AddressSanitizer (its
 * dynamic section names libasan).  A bare name, or a file that cannot be
 * read, is not: nbdkit then reports the problem itself, quickly (with
 * the runtimes preloaded, a failed dlopen deadlocks at exit in some
 * libraries' destructors). */
static bool
plugin_needs_sanitizers (const char *path)
{
  static const char needle[] = "libasan.so";
  struct stat st;
  bool found = false;
  void *map;
  int fd;

  if (strchr (path, '/') == NULL)
    return false;
  fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd == -1)
    return false;
  if (fstat (fd, &st) == 0 && S_ISREG (st.st_mode) && st.st_size > 0) {
    map = mmap (NULL, (size_t) st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map != MAP_FAILED) {
      found = memmem (map, (size_t) st.st_size, needle,
                      sizeof needle - 1) != NULL;
      munmap (map, (size_t) st.st_size);
    }
  }
  close (fd);
  return found;
}

/* Print nbdkit's log (its error messages) to stderr, indented, each
 * line once prefixed "nbdkit: " (nbdkit's own lines already are; the
 * others, e.g. a failed exec or a sanitizer's report, get it). */
static void
print_log (const struct serve *s)
{
  static const char prefix[] = "nbdkit: ";
  FILE *fp = fopen (s->log, "r");
  char line[1024];
  bool line_start = true;       /* LINE begins a line of the log */

  if (fp == NULL)
    return;
  while (fgets (line, sizeof line, fp)) {
    if (line_start)
      fprintf (stderr, "  %s", strncmp (line, prefix, sizeof prefix - 1) == 0
               ? "" : prefix);
    fputs (line, stderr);
    line_start = strchr (line, '\n') != NULL;
  }
  if (!line_start)
    fputc ('\n', stderr);
  fclose (fp);
}

static void
sleep_ms (unsigned ms)
{
  struct timespec ts = { .tv_sec = ms / 1000,
                         .tv_nsec = (long) (ms % 1000) * 1000000 };
  nanosleep (&ts, NULL);
}

/* Whether PATH exists and is not empty (the pid file) / is a socket. */
static bool
file_ready (const char *path, bool socket)
{
  struct stat st;

  if (stat (path, &st) == -1)
    return false;
  return socket ? S_ISSOCK (st.st_mode) : st.st_size > 0;
}

int
serve_check_config (const char *format, uint32_t interval, uint64_t size,
                    uint32_t page_size)
{
  const struct pi_format *f = pi_format_lookup (format);
  uint32_t effective;
  const char *why;
  char names[512];

  if (f == NULL) {
    pi_format_names (names, sizeof names, ", ");
    fprintf (stderr, PROG ": --format %s: unknown PI format (known: %s)\n",
             format, names);
    return -1;
  }
  /* The plugin's default when no --interval is given. */
  effective = interval ? interval : pi_default_interval (f);
  if (!pi_interval_valid (f, effective, &why)) {
    if (interval)
      fprintf (stderr, PROG ": --format %s --interval %" PRIu32 ": %s\n",
               format, interval, why);
    else
      fprintf (stderr, PROG ": --format %s: %s\n", format, why);
    return -1;
  }
  /* Only a --size can fail this: the default size (the working set
   * rounded up to a MiB) is a multiple of either interval. */
  if (size % effective != 0) {
    fprintf (stderr, PROG ": --size %" PRIu64 ": must be a multiple of the "
             "protection interval (%" PRIu32 " bytes)\n", size, effective);
    return -1;
  }
  if (page_size % effective != 0) {
    fprintf (stderr, PROG ": --page-size %" PRIu32 ": must be a multiple of "
             "the protection interval (%" PRIu32 " bytes)\n", page_size,
             effective);
    return -1;
  }
  return 0;
}

/* The child: become nbdkit. */
static void __attribute__ ((noreturn))
exec_nbdkit (const struct serve *s, const char *format, uint64_t size,
             uint32_t interval)
{
  const char *nbdkit = getenv ("NBDKIT");
  char size_arg[64], format_arg[128], interval_arg[32], ctl_arg[320];
  char preload[PATH_MAX * 2] = "";
  const char *argv[16];
  int i = 0, fd;

  if (nbdkit == NULL || *nbdkit == '\0')
    nbdkit = "nbdkit";
  setpgid (0, 0);
  fd = open ("/dev/null", O_RDONLY);
  if (fd >= 0) {
    dup2 (fd, STDIN_FILENO);
    dup2 (fd, STDOUT_FILENO);
    close (fd);
  }
  fd = open (s->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd >= 0) {
    dup2 (fd, STDERR_FILENO);
    close (fd);
  }

  /* An instrumented plugin: nbdkit is not, so it must load the runtimes
   * first for the plugin to load.  They are the ones this (equally
   * instrumented) program has loaded. */
  if (plugin_needs_sanitizers (s->plugin))
    dl_iterate_phdr (find_sanitizer, preload);
  if (preload[0]) {
    const char *old = getenv ("LD_PRELOAD");
    char buf[PATH_MAX * 3];
    snprintf (buf, sizeof buf, "%s%s%s", preload, old && *old ? " " : "",
              old && *old ? old : "");
    setenv ("LD_PRELOAD", buf, 1);
  }

  snprintf (size_arg, sizeof size_arg, "size=%" PRIu64, size);
  snprintf (format_arg, sizeof format_arg, "format=%s", format);
  snprintf (interval_arg, sizeof interval_arg, "interval=%" PRIu32, interval);
  snprintf (ctl_arg, sizeof ctl_arg, "ctl=%s", s->ctl);
  argv[i++] = nbdkit;
  argv[i++] = "-f";
  argv[i++] = "--exit-with-parent";
  argv[i++] = "-U";
  argv[i++] = s->sock;
  argv[i++] = "-P";
  argv[i++] = s->pidfile;
  argv[i++] = s->plugin;
  argv[i++] = size_arg;
  argv[i++] = format_arg;
  if (interval)
    argv[i++] = interval_arg;
  argv[i++] = ctl_arg;
  argv[i] = NULL;
  execvp (nbdkit, (char **) argv);
  fprintf (stderr, "cannot run %s: %s\n", nbdkit, strerror (errno));
  _exit (127);
}

/* The NBD URI of the dif view on the Unix socket PATH, into BUF (LEN
 * bytes): PATH percent-encoded but for unreserved characters and '/',
 * so that a space, '#', '&', '%' or a non-ASCII byte in $TMPDIR reaches
 * libnbd as it is.  Returns -1 if it does not fit. */
static int
uri_for_socket (const char *path, char *buf, size_t len)
{
  static const char hex[] = "0123456789ABCDEF";
  const char *prefix = "nbd+unix:///dif?socket=";
  size_t n = strlen (prefix);
  const unsigned char *p;

  if (n >= len)
    return -1;
  memcpy (buf, prefix, n);
  for (p = (const unsigned char *) path; *p; p++) {
    bool plain = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
      (*p >= '0' && *p <= '9') || strchr ("-._~/", *p) != NULL;

    if (n + (plain ? 1 : 3) >= len)
      return -1;
    if (plain)
      buf[n++] = (char) *p;
    else {
      buf[n++] = '%';
      buf[n++] = hex[*p >> 4];
      buf[n++] = hex[*p & 15];
    }
  }
  buf[n] = '\0';
  return 0;
}

int
serve_start (struct serve *s, const char *plugin, const char *format,
             uint64_t size, uint32_t interval)
{
  const char *tmp = getenv ("TMPDIR");
  unsigned waited = 0;
  int status;

  memset (s, 0, sizeof *s);
  if (tmp == NULL || *tmp != '/')
    tmp = "/tmp";
  if ((size_t) snprintf (s->dir, sizeof s->dir, "%s/stabledif-bench.XXXXXX",
                         tmp) >= sizeof s->dir ||
      strlen (s->dir) + sizeof "/nbdkit.sock" > 100) {
    fprintf (stderr, PROG ": TMPDIR %s is too long for a Unix socket path\n",
             tmp);
    s->dir[0] = '\0';
    return -1;
  }
  if (mkdtemp (s->dir) == NULL) {
    fprintf (stderr, PROG ": creating a directory in %s: %s\n", tmp,
             strerror (errno));
    s->dir[0] = '\0';
    return -1;
  }
  snprintf (s->sock, sizeof s->sock, "%s/nbdkit.sock", s->dir);
  snprintf (s->ctl, sizeof s->ctl, "%s/ctl.sock", s->dir);
  snprintf (s->pidfile, sizeof s->pidfile, "%s/nbdkit.pid", s->dir);
  snprintf (s->log, sizeof s->log, "%s/nbdkit.log", s->dir);
  if (uri_for_socket (s->sock, s->uri, sizeof s->uri) == -1) {
    fprintf (stderr, PROG ": %s: path too long for a URI\n", s->sock);
    serve_stop (s);
    return -1;
  }
  snprintf (s->plugin, sizeof s->plugin, "%s", plugin);

  fflush (NULL);
  s->pid = fork ();
  if (s->pid == -1) {
    fprintf (stderr, PROG ": fork: %s\n", strerror (errno));
    s->pid = 0;
    serve_stop (s);
    return -1;
  }
  if (s->pid == 0)
    exec_nbdkit (s, format, size, interval);
  setpgid (s->pid, s->pid);     /* also in the child: no race either way */

  while (!(file_ready (s->pidfile, false) && file_ready (s->ctl, true))) {
    pid_t w = waitpid (s->pid, &status, WNOHANG);

    if (w == s->pid) {
      s->pid = 0;
      fprintf (stderr, PROG ": nbdkit with plugin %s failed to start "
               "(%s %d):\n", s->plugin,
               WIFEXITED (status) ? "exit status" : "signal",
               WIFEXITED (status) ? WEXITSTATUS (status) : WTERMSIG (status));
      print_log (s);
      serve_stop (s);
      return -1;
    }
    if (waited >= START_TIMEOUT_MS) {
      fprintf (stderr, PROG ": nbdkit with plugin %s did not become ready "
               "in %d s:\n", s->plugin, START_TIMEOUT_MS / 1000);
      print_log (s);
      serve_stop (s);
      return -1;
    }
    sleep_ms (10);
    waited += 10;
  }
  return 0;
}

/* Remove FILE in S's directory if it is there. */
static void
remove_file (const char *path)
{
  if (path[0])
    unlink (path);
}

void
serve_stop (struct serve *s)
{
  if (s->pid > 0) {
    unsigned waited = 0;
    int status;

    kill (s->pid, SIGTERM);
    while (waitpid (s->pid, &status, WNOHANG) == 0) {
      if (waited >= STOP_TIMEOUT_MS) {
        fprintf (stderr, PROG ": nbdkit (pid %ld) did not stop in %d s; "
                 "killing it\n", (long) s->pid, STOP_TIMEOUT_MS / 1000);
        kill (s->pid, SIGKILL);
        waitpid (s->pid, &status, 0);
        break;
      }
      sleep_ms (10);
      waited += 10;
    }
    s->pid = 0;
  }
  if (s->dir[0]) {
    remove_file (s->sock);
    remove_file (s->ctl);
    remove_file (s->pidfile);
    remove_file (s->log);
    if (rmdir (s->dir) == -1 && errno != ENOENT)
      fprintf (stderr, PROG ": removing %s: %s\n", s->dir, strerror (errno));
    s->dir[0] = '\0';
  }
}
