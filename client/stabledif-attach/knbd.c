/* SPDX-License-Identifier: BSD-3-Clause */
/* stabledif: the Linux kernel's NBD driver over generic netlink and
 * sysfs.  See knbd.h for the contract. */
#include <config.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/genetlink.h>
#include <linux/nbd-netlink.h>
#include <linux/netlink.h>

#include "knbd.h"

extern char **environ;

/* The largest netlink message we build or expect back. */
#define KNBD_MSG_MAX 8192

/* How long one netlink request may take before we give up, seconds. */
#define KNBD_NL_TIMEOUT 30

static void __attribute__ ((format (printf, 3, 4)))
knbd_err (char *err, size_t errlen, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (err, errlen, fmt, ap);
  va_end (ap);
}

int
knbd_parse_device (const char *name, int *index, char *err, size_t errlen)
{
  const char *p = name;
  char *end;
  long n;

  if (strncmp (p, "/dev/", 5) == 0)
    p += 5;
  if (strncmp (p, "nbd", 3) != 0 || p[3] < '0' || p[3] > '9')
    goto bad;
  errno = 0;
  n = strtol (p + 3, &end, 10);
  if (errno != 0 || *end != '\0' || n < 0 || n > INT_MAX)
    goto bad;
  *index = (int) n;
  return 0;

 bad:
  knbd_err (err, errlen, "'%s' is not an NBD device (expected /dev/nbdN)",
            name);
  return -1;
}

/* Whether PATH exists. */
static bool
knbd_path_exists (const char *path)
{
  struct stat st;

  return stat (path, &st) == 0;
}

/* Run PROGRAM with ARGV (no shell), wait for it.  Returns its exit status,
 * or -1 if it could not be started. */
static int
knbd_run (const char *program, char *const argv[])
{
  pid_t pid;
  int status;

  if (posix_spawn (&pid, program, NULL, NULL, argv, environ) != 0)
    return -1;
  while (waitpid (pid, &status, 0) == -1)
    if (errno != EINTR)
      return -1;
  return WIFEXITED (status) ? WEXITSTATUS (status) : 128;
}

int
knbd_module_ready (char *err, size_t errlen)
{
  static const char *const modprobes[] = {
    "/sbin/modprobe", "/usr/sbin/modprobe", "/bin/modprobe",
    "/usr/bin/modprobe",
  };
  char *const argv[] = { (char *) "modprobe", (char *) "nbd", NULL };
  int status = -1;
  size_t i;

  if (knbd_path_exists ("/sys/module/nbd"))
    return 0;
  for (i = 0; i < sizeof modprobes / sizeof modprobes[0]; ++i) {
    if (access (modprobes[i], X_OK) == 0) {
      status = knbd_run (modprobes[i], argv);
      break;
    }
  }
  if (knbd_path_exists ("/sys/module/nbd"))
    return 0;
  if (status == -1)
    knbd_err (err, errlen,
              "the nbd kernel module is not loaded and modprobe was not "
              "found to load it (Linux: CONFIG_BLK_DEV_NBD)");
  else
    knbd_err (err, errlen,
              "the nbd kernel module is not loaded and \"modprobe nbd\" "
              "failed (exit status %d): this kernel has no NBD driver "
              "(Linux: CONFIG_BLK_DEV_NBD)", status);
  return -1;
}

bool
knbd_exists (int index)
{
  char path[64];

  snprintf (path, sizeof path, "/sys/block/nbd%d", index);
  return knbd_path_exists (path);
}

bool
knbd_attached (int index)
{
  char path[64];

  snprintf (path, sizeof path, "/sys/block/nbd%d/pid", index);
  return knbd_path_exists (path);
}

int
knbd_find_free (int *index, char *err, size_t errlen)
{
  DIR *d = opendir ("/sys/block");
  struct dirent *e;
  int best = -1;

  if (d == NULL) {
    knbd_err (err, errlen, "/sys/block: %s", strerror (errno));
    return -1;
  }
  while ((e = readdir (d)) != NULL) {
    char *end;
    long n;

    if (strncmp (e->d_name, "nbd", 3) != 0 ||
        e->d_name[3] < '0' || e->d_name[3] > '9')
      continue;
    n = strtol (e->d_name + 3, &end, 10);
    if (*end != '\0' || n < 0 || n > INT_MAX)
      continue;
    if (!knbd_attached ((int) n) && (best == -1 || n < best))
      best = (int) n;
  }
  closedir (d);
  if (best == -1) {
    knbd_err (err, errlen,
              "no free /dev/nbdN: every NBD device is attached "
              "(load nbd with a larger nbds_max, or name one with -n)");
    return -1;
  }
  *index = best;
  return 0;
}

/* Path of nbdN's stable_writes knob. */
static void
knbd_stable_path (int index, char *path, size_t len)
{
  snprintf (path, len, "/sys/block/nbd%d/queue/stable_writes", index);
}

int
knbd_get_stable_writes (int index, int *value, char *err, size_t errlen)
{
  char path[96], buf[16];
  ssize_t r;
  int fd;

  knbd_stable_path (index, path, sizeof path);
  fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd == -1) {
    knbd_err (err, errlen, "%s: %s", path, strerror (errno));
    return -1;
  }
  r = read (fd, buf, sizeof buf - 1);
  if (r == -1) {
    knbd_err (err, errlen, "%s: read: %s", path, strerror (errno));
    close (fd);
    return -1;
  }
  close (fd);
  buf[r] = '\0';
  if (buf[0] != '0' && buf[0] != '1') {
    knbd_err (err, errlen, "%s: unexpected contents '%.*s'", path,
              (int) strcspn (buf, "\n"), buf);
    return -1;
  }
  *value = buf[0] - '0';
  return 0;
}

int
knbd_set_stable_writes (int index, int value, char *err, size_t errlen)
{
  char path[96];
  const char *text = value ? "1\n" : "0\n";
  int fd;

  knbd_stable_path (index, path, sizeof path);
  fd = open (path, O_WRONLY | O_CLOEXEC);
  if (fd == -1) {
    knbd_err (err, errlen, "%s: %s", path, strerror (errno));
    return -1;
  }
  if (write (fd, text, 2) != 2) {
    knbd_err (err, errlen, "%s: writing %d: %s", path, value,
              strerror (errno));
    close (fd);
    return -1;
  }
  if (close (fd) == -1) {
    knbd_err (err, errlen, "%s: writing %d: %s", path, value,
              strerror (errno));
    return -1;
  }
  return 0;
}

/* Read "MAJ:MIN" from the sysfs file PATH into DEV.  Returns 0, or -1 if
 * the file does not exist or is malformed. */
static int
knbd_read_devnum (const char *path, char *dev, size_t devlen)
{
  FILE *f = fopen (path, "re");
  int ok;

  if (f == NULL)
    return -1;
  ok = fgets (dev, (int) devlen, f) != NULL;
  fclose (f);
  if (!ok)
    return -1;
  dev[strcspn (dev, "\n")] = '\0';
  return dev[0] != '\0' ? 0 : -1;
}

/* If the device with "MAJ:MIN" DEV is mounted (per /proc/self/mountinfo),
 * copy the mount point into MNT and return 1; 0 if not; -1 on error. */
static int
knbd_devnum_mounted (const char *dev, char *mnt, size_t mntlen,
                     char *err, size_t errlen)
{
  FILE *f = fopen ("/proc/self/mountinfo", "re");
  char line[4096];
  int found = 0;

  if (f == NULL) {
    knbd_err (err, errlen, "/proc/self/mountinfo: %s", strerror (errno));
    return -1;
  }
  while (!found && fgets (line, sizeof line, f) != NULL) {
    char *save = NULL, *tok;
    int field;
    const char *devfield = NULL, *point = NULL;

    for (field = 1, tok = strtok_r (line, " ", &save);
         tok != NULL && field <= 5;
         ++field, tok = strtok_r (NULL, " ", &save)) {
      if (field == 3)
        devfield = tok;
      else if (field == 5)
        point = tok;
    }
    if (devfield && point && strcmp (devfield, dev) == 0) {
      snprintf (mnt, mntlen, "%s", point);
      found = 1;
    }
  }
  fclose (f);
  return found;
}

int
knbd_mounted (int index, char *mnt, size_t mntlen, char *err, size_t errlen)
{
  char path[PATH_MAX], dev[32], dir[64];
  struct dirent *e;
  DIR *d;
  int r;

  snprintf (path, sizeof path, "/sys/block/nbd%d/dev", index);
  if (knbd_read_devnum (path, dev, sizeof dev) == -1) {
    knbd_err (err, errlen, "%s: cannot read the device number", path);
    return -1;
  }
  r = knbd_devnum_mounted (dev, mnt, mntlen, err, errlen);
  if (r != 0)
    return r;

  /* Partitions: /sys/block/nbdN/nbdNpM/dev. */
  snprintf (dir, sizeof dir, "/sys/block/nbd%d", index);
  d = opendir (dir);
  if (d == NULL)
    return 0;
  while (r == 0 && (e = readdir (d)) != NULL) {
    char prefix[32];

    snprintf (prefix, sizeof prefix, "nbd%dp", index);
    if (strncmp (e->d_name, prefix, strlen (prefix)) != 0)
      continue;
    snprintf (path, sizeof path, "%s/%s/dev", dir, e->d_name);
    if (knbd_read_devnum (path, dev, sizeof dev) == 0)
      r = knbd_devnum_mounted (dev, mnt, mntlen, err, errlen);
  }
  closedir (d);
  return r;
}

/* ---- generic netlink ---- */

/* A netlink message being built. */
struct knbd_msg {
  union {
    char buf[KNBD_MSG_MAX];     /* the message */
    struct nlmsghdr align;      /* (forces alignment) */
  } u;
  size_t len;                   /* bytes used */
  bool overflow;                /* an attribute did not fit */
};

/* Start a generic netlink request of family FAMILY, command CMD, with
 * sequence number SEQ (unique among the requests on one socket). */
static void
knbd_msg_init (struct knbd_msg *m, uint16_t family, uint8_t cmd,
               uint8_t version, uint32_t seq)
{
  struct nlmsghdr *nh = &m->u.align;
  struct genlmsghdr *gh;

  memset (m, 0, sizeof *m);
  nh->nlmsg_type = family;
  nh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
  nh->nlmsg_seq = seq;
  m->len = NLMSG_LENGTH (GENL_HDRLEN);
  gh = NLMSG_DATA (nh);
  gh->cmd = cmd;
  gh->version = version;
}

/* Append attribute TYPE with LEN bytes of DATA.  Returns its offset. */
static size_t
knbd_msg_put (struct knbd_msg *m, uint16_t type, const void *data, size_t len)
{
  size_t off = NLMSG_ALIGN (m->len);
  struct nlattr *a;

  if (off + NLA_ALIGN (NLA_HDRLEN + len) > sizeof m->u.buf) {
    m->overflow = true;
    return off;
  }
  a = (struct nlattr *) (m->u.buf + off);
  a->nla_type = type;
  a->nla_len = (uint16_t) (NLA_HDRLEN + len);
  if (len)
    memcpy (m->u.buf + off + NLA_HDRLEN, data, len);
  m->len = off + NLA_ALIGN (NLA_HDRLEN + len);
  return off;
}

static void
knbd_msg_put_u32 (struct knbd_msg *m, uint16_t type, uint32_t v)
{
  knbd_msg_put (m, type, &v, sizeof v);
}

static void
knbd_msg_put_u64 (struct knbd_msg *m, uint16_t type, uint64_t v)
{
  knbd_msg_put (m, type, &v, sizeof v);
}

/* Open a nested attribute; close it with knbd_msg_nest_end. */
static size_t
knbd_msg_nest_start (struct knbd_msg *m, uint16_t type)
{
  return knbd_msg_put (m, type | NLA_F_NESTED, NULL, 0);
}

static void
knbd_msg_nest_end (struct knbd_msg *m, size_t off)
{
  struct nlattr *a = (struct nlattr *) (m->u.buf + off);

  if (!m->overflow)
    a->nla_len = (uint16_t) (m->len - off);
}

/* A reply attribute handler: called for every top-level attribute of
 * every non-error reply message. */
typedef void (*knbd_attr_fn) (void *opaque, const struct nlattr *a);

/* Open a generic netlink socket with a receive timeout. */
static int
knbd_nl_open (char *err, size_t errlen)
{
  struct timeval tv = { .tv_sec = KNBD_NL_TIMEOUT };
  int fd = socket (AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);

  if (fd == -1) {
    knbd_err (err, errlen, "netlink socket: %s", strerror (errno));
    return -1;
  }
  if (setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == -1) {
    knbd_err (err, errlen, "netlink socket: SO_RCVTIMEO: %s",
              strerror (errno));
    close (fd);
    return -1;
  }
  return fd;
}

/* Send M (named WHAT in messages) on FD and read replies until the
 * kernel's acknowledgement.  ON_ATTR sees the attributes of replies.
 * Returns 0, or -1 with errno set to the kernel's error. */
static int
knbd_nl_transact (int fd, struct knbd_msg *m, const char *what,
                  knbd_attr_fn on_attr, void *opaque,
                  char *err, size_t errlen)
{
  struct nlmsghdr *nh = &m->u.align;
  struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
  union {
    char buf[KNBD_MSG_MAX * 2];
    struct nlmsghdr align;
  } reply;

  if (m->overflow) {
    knbd_err (err, errlen, "%s: netlink message too large", what);
    errno = EMSGSIZE;
    return -1;
  }
  nh->nlmsg_len = (uint32_t) m->len;
  if (sendto (fd, m->u.buf, m->len, 0,
              (struct sockaddr *) &kernel, sizeof kernel) == -1) {
    knbd_err (err, errlen, "%s: netlink send: %s", what, strerror (errno));
    return -1;
  }

  for (;;) {
    ssize_t r = recv (fd, reply.buf, sizeof reply.buf, 0);
    struct nlmsghdr *h;
    size_t left;

    if (r == -1) {
      if (errno == EINTR)
        continue;
      knbd_err (err, errlen, "%s: netlink receive: %s", what,
                errno == EAGAIN ? "no answer from the kernel"
                : strerror (errno));
      return -1;
    }
    left = (size_t) r;
    for (h = &reply.align; NLMSG_OK (h, left); h = NLMSG_NEXT (h, left)) {
      if (h->nlmsg_seq != nh->nlmsg_seq)
        continue;
      if (h->nlmsg_type == NLMSG_ERROR) {
        const struct nlmsgerr *e = NLMSG_DATA (h);

        if (e->error == 0)
          return 0;
        errno = -e->error;
        knbd_err (err, errlen, "%s: %s", what, strerror (errno));
        return -1;
      }
      if (h->nlmsg_type == NLMSG_DONE)
        return 0;
      if (on_attr && h->nlmsg_len >= NLMSG_LENGTH (GENL_HDRLEN)) {
        const char *p = (const char *) NLMSG_DATA (h) + GENL_HDRLEN;
        size_t alen = h->nlmsg_len - NLMSG_LENGTH (GENL_HDRLEN);

        while (alen >= NLA_HDRLEN) {
          const struct nlattr *a = (const struct nlattr *) p;
          size_t step = NLA_ALIGN (a->nla_len);

          if (a->nla_len < NLA_HDRLEN || a->nla_len > alen)
            break;
          on_attr (opaque, a);
          if (step >= alen)
            break;
          p += step;
          alen -= step;
        }
      }
    }
  }
}

/* Reply handler of CTRL_CMD_GETFAMILY: pick up the family id. */
static void
knbd_family_attr (void *opaque, const struct nlattr *a)
{
  uint16_t *id = opaque;

  if ((a->nla_type & NLA_TYPE_MASK) == CTRL_ATTR_FAMILY_ID &&
      a->nla_len >= NLA_HDRLEN + sizeof (uint16_t))
    memcpy (id, (const char *) a + NLA_HDRLEN, sizeof *id);
}

/* Look up the "nbd" generic netlink family.  Returns its id, or 0. */
static uint16_t
knbd_family (int fd, char *err, size_t errlen)
{
  struct knbd_msg m;
  uint16_t id = 0;

  knbd_msg_init (&m, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 1, 1);
  knbd_msg_put (&m, CTRL_ATTR_FAMILY_NAME, NBD_GENL_FAMILY_NAME,
                sizeof NBD_GENL_FAMILY_NAME);
  if (knbd_nl_transact (fd, &m, "netlink family " NBD_GENL_FAMILY_NAME,
                        knbd_family_attr, &id, err, errlen) == -1) {
    if (errno == ENOENT)
      knbd_err (err, errlen,
                "the kernel has no \"" NBD_GENL_FAMILY_NAME "\" netlink "
                "family: the nbd module is not loaded or too old "
                "(needs Linux >= 4.12)");
    return 0;
  }
  if (id == 0)
    knbd_err (err, errlen, "netlink family " NBD_GENL_FAMILY_NAME
              ": the kernel's answer has no family id");
  return id;
}

/* Open a generic netlink socket and look up the "nbd" family on it.
 * Returns the socket with *FAMILY set, or -1 with ERR filled in. */
static int
knbd_nl_open_nbd (uint16_t *family, char *err, size_t errlen)
{
  int fd = knbd_nl_open (err, errlen);

  if (fd == -1)
    return -1;
  *family = knbd_family (fd, err, errlen);
  if (*family == 0) {
    close (fd);
    return -1;
  }
  return fd;
}

int
knbd_connect (const struct knbd_attach *a, char *err, size_t errlen)
{
  struct knbd_msg m;
  char what[64];
  size_t socks, item;
  uint16_t family;
  int fd, r;

  fd = knbd_nl_open_nbd (&family, err, errlen);
  if (fd == -1)
    return -1;

  knbd_msg_init (&m, family, NBD_CMD_CONNECT, NBD_GENL_VERSION, 2);
  knbd_msg_put_u32 (&m, NBD_ATTR_INDEX, (uint32_t) a->index);
  knbd_msg_put_u64 (&m, NBD_ATTR_SIZE_BYTES, a->size);
  knbd_msg_put_u64 (&m, NBD_ATTR_BLOCK_SIZE_BYTES, a->block_size);
  knbd_msg_put_u64 (&m, NBD_ATTR_SERVER_FLAGS, a->server_flags);
  if (a->backend)
    knbd_msg_put (&m, NBD_ATTR_BACKEND_IDENTIFIER, a->backend,
                  strlen (a->backend) + 1);
  socks = knbd_msg_nest_start (&m, NBD_ATTR_SOCKETS);
  item = knbd_msg_nest_start (&m, NBD_SOCK_ITEM);
  knbd_msg_put_u32 (&m, NBD_SOCK_FD, (uint32_t) a->sock);
  knbd_msg_nest_end (&m, item);
  knbd_msg_nest_end (&m, socks);

  snprintf (what, sizeof what, "/dev/nbd%d: NBD_CMD_CONNECT", a->index);
  r = knbd_nl_transact (fd, &m, what, NULL, NULL, err, errlen);
  if (r == -1 && errno == EBUSY)
    knbd_err (err, errlen, "/dev/nbd%d is already attached (EBUSY)",
              a->index);
  close (fd);
  return r;
}

int
knbd_disconnect (int index, unsigned timeout_ms, char *err, size_t errlen)
{
  struct knbd_msg m;
  char what[64];
  uint16_t family;
  unsigned waited;
  int fd, r;

  fd = knbd_nl_open_nbd (&family, err, errlen);
  if (fd == -1)
    return -1;
  knbd_msg_init (&m, family, NBD_CMD_DISCONNECT, NBD_GENL_VERSION, 2);
  knbd_msg_put_u32 (&m, NBD_ATTR_INDEX, (uint32_t) index);
  snprintf (what, sizeof what, "/dev/nbd%d: NBD_CMD_DISCONNECT", index);
  r = knbd_nl_transact (fd, &m, what, NULL, NULL, err, errlen);
  close (fd);
  if (r == -1)
    return -1;

  /* The driver drops the connection once the last opener has closed the
   * device; wait for that, bounded. */
  for (waited = 0; knbd_attached (index); waited += 10) {
    const struct timespec ts = { .tv_nsec = 10 * 1000 * 1000 };

    if (waited >= timeout_ms) {
      knbd_err (err, errlen,
                "/dev/nbd%d: disconnected, but still held open by another "
                "process after %u ms; the kernel releases it when that "
                "process closes it", index, timeout_ms);
      return -1;
    }
    nanosleep (&ts, NULL);
  }
  return 0;
}
