/* The device engines' host logic (see comm_plan.h): the rank-ordered reduction's tables,
 * ZeRO-1's shard of a tensor, the rendezvous and the id exchange through it. */
#include "dist/comm_plan.h"

#include "dist/comm.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- the rank-ordered reduction -------------------------------------------------------- */

dt_status dt_comm_plan_make(dt_comm_plan *p, size_t n, int rank, int size, size_t align) {
    memset(p, 0, sizeof *p);
    if (size < 1 || rank < 0 || rank >= size)
        return dt_fail(DT_EINVAL, "the rank-ordered reduction: rank %d of %d (a rank is 0..size-1)", rank, size);
    if (align < 1) return dt_fail(DT_EINVAL, "the rank-ordered reduction: chunk alignment %zu (at least 1)", align);
    p->n = n;
    p->align = align;
    p->rank = rank;
    p->size = size;
    dt_comm_chunk(n, size, rank, align, &p->own_off, &p->own_len);
    /* slots start at multiples of align, as the chunks do, so device copies stay aligned */
    p->slot_stride = (p->own_len + align - 1) / align * align;
    p->staging = p->slot_stride * (size_t)size;
    return DT_OK;
}

void dt_comm_plan_send(const dt_comm_plan *p, int j, size_t *off, size_t *len) {
    dt_comm_chunk(p->n, p->size, j, p->align, off, len);
}

size_t dt_comm_plan_slot(const dt_comm_plan *p, int r) { return p->slot_stride * (size_t)r; }

void dt_comm_shard_in_tensor(size_t n, int size, int rank, size_t t_off, size_t t_len, size_t *lo, size_t *hi) {
    size_t off, len;
    dt_comm_chunk(n, size, rank, DT_COMM_ALIGN, &off, &len);
    size_t a = off > t_off ? off : t_off, b = off + len < t_off + t_len ? off + len : t_off + t_len;
    if (b < a) b = a;
    *lo = a;
    *hi = b;
}

/* ---- the rendezvous -------------------------------------------------------------------- */

#define RV_FORMS "accepted: file:PATH (a file every rank sees) or tcp:HOST:PORT (rank 0's address, port 1-65535)"

dt_status dt_rendezvous_parse(const char *text, dt_rendezvous *out) {
    memset(out, 0, sizeof *out);
    if (!text || !*text) return dt_fail(DT_EINVAL, "the rendezvous is empty; " RV_FORMS);
    if (!strncmp(text, "file:", 5)) {
        const char *path = text + 5;
        if (!*path) return dt_fail(DT_EINVAL, "rendezvous '%s' names no file; " RV_FORMS, text);
        if (strlen(path) + 32 >= DT_RV_PATH_MAX)
            return dt_fail(DT_EINVAL, "rendezvous '%.64s...': the path is longer than %d bytes", text,
                           DT_RV_PATH_MAX - 32);
        out->kind = DT_RV_FILE;
        snprintf(out->path, sizeof out->path, "%s", path);
        return DT_OK;
    }
    if (!strncmp(text, "tcp:", 4)) {
        const char *h = text + 4, *colon;
        size_t hlen;
        if (*h == '[') { /* [v6-address]:port */
            const char *close = strchr(h, ']');
            if (!close || close[1] != ':')
                return dt_fail(DT_EINVAL, "rendezvous '%s': an IPv6 host is written [ADDRESS]:PORT; " RV_FORMS, text);
            h++;
            hlen = (size_t)(close - h);
            colon = close + 1;
        } else {
            colon = strrchr(h, ':');
            if (!colon) return dt_fail(DT_EINVAL, "rendezvous '%s' names no port; " RV_FORMS, text);
            hlen = (size_t)(colon - h);
            if (memchr(h, ':', hlen))
                return dt_fail(DT_EINVAL, "rendezvous '%s': write an IPv6 host in brackets ([ADDRESS]:PORT); " RV_FORMS,
                               text);
        }
        if (hlen == 0) return dt_fail(DT_EINVAL, "rendezvous '%s' names no host; " RV_FORMS, text);
        if (hlen >= DT_RV_HOST_MAX) return dt_fail(DT_EINVAL, "rendezvous '%.64s...': the host name is too long", text);
        const char *port = colon + 1;
        char *end = NULL;
        errno = 0;
        long v = strtol(port, &end, 10);
        if (!*port || *end || errno || v < 1 || v > 65535 || *port == '+' || *port == '-' || *port == ' ')
            return dt_fail(DT_EINVAL, "rendezvous '%s': port '%s' is not a number in 1-65535; " RV_FORMS, text, port);
        out->kind = DT_RV_TCP;
        memcpy(out->host, h, hlen);
        out->host[hlen] = 0;
        out->port = (int)v;
        return DT_OK;
    }
    return dt_fail(DT_EINVAL, "rendezvous '%s' is neither file: nor tcp:; " RV_FORMS, text);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* What rank 0 publishes: a header, then the id. */
enum { RV_MAGIC = 0x56525444u /* "DTRV" */, RV_HELLO = 0x4f4c4548u /* "HELO" */ };
typedef struct rv_header {
    uint32_t magic, bytes;
    int32_t size, status;  /* status: 0, or what rank 0 refused (TCP) */
    uint64_t nonce;        /* tells this run's file and acknowledgements from an earlier run's */
} rv_header;

/* A value that differs between runs started at different times or by different processes. */
static uint64_t make_nonce(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    x ^= (uint64_t)getpid() << 32;
    x ^= x >> 31; x *= 0x9e3779b97f4a7c15ull; x ^= x >> 29; /* spread the bits */
    return x | 1;
}

/* Writes bytes to path through path.tmp.<pid>, fsync'd and renamed (readers see all or
 * nothing). */
static dt_status write_atomic(const char *path, const void *a, size_t na, const void *b, size_t nb) {
    char tmp[DT_RV_PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return dt_fail(DT_EIO, "rendezvous: cannot write %s (%s): the rendezvous file's directory must exist "
                           "and be writable by every rank", tmp, strerror(errno));
    int bad = fwrite(a, 1, na, f) != na || (nb && fwrite(b, 1, nb, f) != nb);
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) bad = 1;
    if (fclose(f) != 0) bad = 1;
    if (bad || rename(tmp, path) != 0) {
        int e = errno;
        remove(tmp);
        return dt_fail(DT_EIO, "rendezvous: cannot write %s (%s)", path, strerror(e));
    }
    return DT_OK;
}

/* Reads exactly n bytes of path into buf: 1 read, 0 not there, 2 there but shorter, -1
 * error. */
static int read_exact(const char *path, void *buf, size_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) return errno == ENOENT ? 0 : -1;
    size_t got = fread(buf, 1, n, f);
    fclose(f);
    return got == n ? 1 : 2;
}

static void ack_path(char *buf, size_t cap, const char *path, int r) { snprintf(buf, cap, "%s.ack.%d", path, r); }

/* The ranks in 1..size-1 whose flag is 0, as "1, 4, 5 (3 of 7)" (the first few). */
static void missing_ranks(char *buf, size_t cap, const unsigned char *seen, int size) {
    size_t used = 0;
    int count = 0, listed = 0;
    buf[0] = 0;
    for (int r = 1; r < size; r++) {
        if (seen[r]) continue;
        count++;
        if (listed < 8 && used + 16 < cap) {
            used += (size_t)snprintf(buf + used, cap - used, "%s%d", listed ? ", " : "", r);
            listed++;
        }
    }
    if (count > listed && used + 8 < cap) used += (size_t)snprintf(buf + used, cap - used, ", ...");
    if (used + 24 < cap) snprintf(buf + used, cap - used, " (%d of %d)", count, size - 1);
}

static dt_status file_publish(const dt_rendezvous *rv, int size, const void *id, size_t bytes, int timeout_ms) {
    struct stat sb;
    if (lstat(rv->path, &sb) == 0)
        return dt_fail(DT_EINVAL, "rendezvous file:%s exists already (an earlier run's?): remove it, or name a fresh "
                       "path in DETRAIN_RENDEZVOUS; rank 0 writes it anew for every run", rv->path);
    rv_header h = {RV_MAGIC, (uint32_t)bytes, size, 0, make_nonce()};
    dt_status st = write_atomic(rv->path, &h, sizeof h, id, bytes);
    if (st != DT_OK) return st;
    unsigned char *seen = calloc((size_t)size, 1);
    if (!seen) {
        remove(rv->path);
        return dt_fail(DT_ENOMEM, "rendezvous: out of memory");
    }
    int left = size - 1;
    double deadline = now_ms() + timeout_ms;
    char ap[DT_RV_PATH_MAX + 32];
    while (left > 0) {
        for (int r = 1; r < size; r++) {
            uint64_t nonce = 0;
            if (seen[r]) continue;
            ack_path(ap, sizeof ap, rv->path, r);
            if (read_exact(ap, &nonce, sizeof nonce) == 1 && nonce == h.nonce) {
                seen[r] = 1;
                left--;
            }
        }
        if (left == 0 || now_ms() > deadline) break;
        sleep_ms(5);
    }
    for (int r = 1; r < size; r++)
        if (seen[r]) {
            ack_path(ap, sizeof ap, rv->path, r);
            remove(ap);
        }
    remove(rv->path);
    if (left > 0) {
        char miss[160];
        missing_ranks(miss, sizeof miss, seen, size);
        free(seen);
        return dt_fail(DT_EIO, "rendezvous file:%s: rank 0 waited %d ms and ranks %s never read it (did they start, "
                       "with the same DETRAIN_RENDEZVOUS and world size, on a file system they share?)", rv->path,
                       timeout_ms, miss);
    }
    free(seen);
    return DT_OK;
}

static dt_status file_receive(const dt_rendezvous *rv, int rank, int size, void *id, size_t bytes, int timeout_ms) {
    double deadline = now_ms() + timeout_ms;
    unsigned char buf[sizeof(rv_header) + DT_RV_ID_MAX];
    rv_header h;
    for (;;) {
        int got = read_exact(rv->path, buf, sizeof h + bytes);
        if (got < 0) return dt_fail(DT_EIO, "rendezvous: cannot read %s (%s)", rv->path, strerror(errno));
        if (got == 1 || got == 2) { /* written whole and renamed: a short file is not ours */
            memcpy(&h, buf, sizeof h);
            if (got == 2 || h.magic != RV_MAGIC || h.bytes != bytes)
                return dt_fail(DT_ECORRUPT, "rendezvous file:%s is not a detrain rendezvous file of this build (rank "
                               "%d read it): remove it and start every rank again", rv->path, rank);
            if (h.size != size)
                return dt_fail(DT_EMISMATCH, "rendezvous file:%s is for %d ranks, rank %d was launched with a world "
                               "size of %d: start every rank with the same DETRAIN_WORLD_SIZE", rv->path, h.size, rank,
                               size);
            break;
        }
        if (now_ms() > deadline)
            return dt_fail(DT_EIO, "rendezvous file:%s: rank %d waited %d ms and rank 0 never wrote it (did rank 0 "
                           "start, with the same DETRAIN_RENDEZVOUS, on a file system this rank shares?)", rv->path,
                           rank, timeout_ms);
        sleep_ms(5);
    }
    memcpy(id, buf + sizeof h, bytes);
    char ap[DT_RV_PATH_MAX + 32];
    ack_path(ap, sizeof ap, rv->path, rank);
    return write_atomic(ap, &h.nonce, sizeof h.nonce, NULL, 0);
}

/* ---- TCP ------------------------------------------------------------------------------- */

/* Waits for fd to be ready for `events` until deadline: 1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short events, double deadline) {
    for (;;) {
        double left = deadline - now_ms();
        if (left <= 0) return 0;
        struct pollfd p = {fd, events, 0};
        int r = poll(&p, 1, left > 1e6 ? 1000000 : (int)left + 1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == 0) continue; /* re-checks the deadline */
        return 1;
    }
}

/* Sends sbuf or receives into rbuf (the one not NULL) exactly n bytes before deadline: 1
 * done, 0 timed out, -1 closed or error. */
static int io_exact(int fd, const void *sbuf, void *rbuf, size_t n, double deadline) {
    const unsigned char *sp = sbuf;
    unsigned char *rp = rbuf;
    int sending = sbuf != NULL;
    while (n > 0) {
        int w = wait_fd(fd, sending ? POLLOUT : POLLIN, deadline);
        if (w <= 0) return w;
        ssize_t k = sending ? send(fd, sp, n, MSG_NOSIGNAL) : recv(fd, rp, n, 0);
        if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        if (k <= 0) return -1;
        if (sending) sp += k; else rp += k;
        n -= (size_t)k;
    }
    return 1;
}

static dt_status resolve(const dt_rendezvous *rv, int passive, struct addrinfo **res) {
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    char port[16];
    snprintf(port, sizeof port, "%d", rv->port);
    int e = getaddrinfo(rv->host, port, &hints, res);
    if (e != 0)
        return dt_fail(DT_EINVAL, "rendezvous tcp:%s:%d: cannot resolve host '%s' (%s)", rv->host, rv->port, rv->host,
                       gai_strerror(e));
    return DT_OK;
}

static void set_nonblock(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK); }

/* Rank 0: listens on HOST:PORT and answers each rank once. */
static dt_status tcp_publish(const dt_rendezvous *rv, int size, const void *id, size_t bytes, int timeout_ms) {
    struct addrinfo *res = NULL;
    dt_status st = resolve(rv, 1, &res);
    if (st != DT_OK) return st;
    int fd = -1, err = 0;
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) { err = errno; continue; }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, size < 128 ? size : 128) != 0) {
            err = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0)
        return dt_fail(DT_EIO, "rendezvous tcp:%s:%d: rank 0 cannot listen there (%s): the host must be rank 0's own "
                       "address and the port free", rv->host, rv->port, strerror(err));
    set_nonblock(fd);
    unsigned char *seen = calloc((size_t)size, 1);
    if (!seen) {
        close(fd);
        return dt_fail(DT_ENOMEM, "rendezvous: out of memory");
    }
    int left = size - 1;
    double deadline = now_ms() + timeout_ms;
    st = DT_OK;
    while (left > 0 && st == DT_OK) {
        int w = wait_fd(fd, POLLIN, deadline);
        if (w <= 0) break;
        int c = accept(fd, NULL, NULL);
        if (c < 0) continue;
        set_nonblock(c);
        rv_header hello, reply = {RV_MAGIC, (uint32_t)bytes, size, 0, 0};
        /* a rank that connects and says nothing costs at most a second of the wait */
        double by = now_ms() + 1000.0 < deadline ? now_ms() + 1000.0 : deadline;
        if (io_exact(c, NULL, &hello, sizeof hello, by) == 1 && hello.magic == RV_HELLO) {
            int r = hello.status; /* a hello carries the rank in status */
            if (hello.size != size) {
                reply.status = 1;
                st = dt_fail(DT_EMISMATCH, "rendezvous tcp:%s:%d: rank %d says the world size is %d, rank 0 has %d: "
                             "start every rank with the same DETRAIN_WORLD_SIZE", rv->host, rv->port, r, hello.size,
                             size);
            } else if (r < 1 || r >= size || seen[r]) {
                reply.status = 2;
                st = dt_fail(DT_EINVAL, "rendezvous tcp:%s:%d: a process says it is rank %d, %s", rv->host, rv->port, r,
                             r < 1 || r >= size ? "not a rank 1..size-1 of this run" : "a rank that came already (two "
                             "processes with the same DETRAIN_RANK?)");
            }
            int sent = io_exact(c, &reply, NULL, sizeof reply, by) == 1 &&
                       (reply.status || io_exact(c, id, NULL, bytes, by) == 1);
            if (sent && !reply.status) {
                seen[r] = 1;
                left--;
            }
        }
        close(c);
    }
    close(fd);
    if (st == DT_OK && left > 0) {
        char miss[160];
        missing_ranks(miss, sizeof miss, seen, size);
        st = dt_fail(DT_EIO, "rendezvous tcp:%s:%d: rank 0 waited %d ms and ranks %s never connected (did they "
                     "start, with the same DETRAIN_RENDEZVOUS, and can they reach this host and port?)", rv->host,
                     rv->port, timeout_ms, miss);
    }
    free(seen);
    return st;
}

/* A rank > 0: connects (again and again until rank 0 listens), says its rank, reads the id. */
static dt_status tcp_receive(const dt_rendezvous *rv, int rank, int size, void *id, size_t bytes, int timeout_ms) {
    double deadline = now_ms() + timeout_ms;
    const char *last = "no answer";
    while (now_ms() < deadline) {
        struct addrinfo *res = NULL;
        dt_status st = resolve(rv, 0, &res);
        if (st != DT_OK) return st;
        int fd = -1;
        for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
            fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
            if (fd < 0) continue;
            set_nonblock(fd);
            int c = connect(fd, a->ai_addr, a->ai_addrlen);
            if (c != 0 && errno == EINPROGRESS) {
                int soerr = 0;
                socklen_t len = sizeof soerr;
                double by = now_ms() + 1000.0 < deadline ? now_ms() + 1000.0 : deadline;
                c = wait_fd(fd, POLLOUT, by) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 &&
                    soerr == 0 ? 0 : -1;
            }
            if (c != 0) {
                close(fd);
                fd = -1;
            }
        }
        freeaddrinfo(res);
        if (fd < 0) { /* rank 0 is not listening yet */
            last = "connection refused";
            sleep_ms(20);
            continue;
        }
        rv_header hello = {RV_HELLO, (uint32_t)bytes, size, rank, 0}, reply;
        int ok = io_exact(fd, &hello, NULL, sizeof hello, deadline) == 1 &&
                 io_exact(fd, NULL, &reply, sizeof reply, deadline) == 1;
        if (ok && reply.magic == RV_MAGIC && reply.status == 0 && reply.bytes == bytes &&
            io_exact(fd, NULL, id, bytes, deadline) == 1) {
            close(fd);
            return DT_OK;
        }
        close(fd);
        if (ok && reply.magic == RV_MAGIC && reply.status == 1)
            return dt_fail(DT_EMISMATCH, "rendezvous tcp:%s:%d: rank 0 has a world size of %d, rank %d was launched with "
                           "%d: start every rank with the same DETRAIN_WORLD_SIZE", rv->host, rv->port, reply.size,
                           rank, size);
        if (ok && reply.magic == RV_MAGIC && reply.status == 2)
            return dt_fail(DT_EINVAL, "rendezvous tcp:%s:%d: rank 0 refused rank %d (a rank that came already, or not a "
                           "rank of this run: check DETRAIN_RANK)", rv->host, rv->port, rank);
        if (ok && reply.magic == RV_MAGIC && reply.bytes != bytes)
            return dt_fail(DT_EMISMATCH, "rendezvous tcp:%s:%d: rank 0 sends %u bytes, rank %d expects %zu (another "
                           "build?)", rv->host, rv->port, reply.bytes, rank, bytes);
        if (ok) /* something else listens on that port */
            return dt_fail(DT_EIO, "rendezvous tcp:%s:%d: what answers there is not detrain's rank 0", rv->host,
                           rv->port);
        last = "rank 0 closed the connection";
        sleep_ms(20);
    }
    return dt_fail(DT_EIO, "rendezvous tcp:%s:%d: rank %d waited %d ms for rank 0 (%s): did rank 0 start, with the same "
                   "DETRAIN_RENDEZVOUS, and can this rank reach that host and port?", rv->host, rv->port, rank,
                   timeout_ms, last);
}

dt_status dt_rendezvous_exchange(const dt_rendezvous *rv, int rank, int size, void *id, size_t bytes,
                                 int timeout_ms) {
    if (size < 1 || rank < 0 || rank >= size)
        return dt_fail(DT_EINVAL, "rendezvous: rank %d of %d (a rank is 0..size-1)", rank, size);
    if (bytes > DT_RV_ID_MAX) return dt_fail(DT_EINVAL, "rendezvous: %zu bytes (at most %d)", bytes, DT_RV_ID_MAX);
    if (timeout_ms < 1) return dt_fail(DT_EINVAL, "rendezvous: timeout %d ms (at least 1)", timeout_ms);
    if (size == 1) return DT_OK; /* rank 0 alone: nobody to tell */
    if (rv->kind == DT_RV_FILE)
        return rank == 0 ? file_publish(rv, size, id, bytes, timeout_ms)
                         : file_receive(rv, rank, size, id, bytes, timeout_ms);
    return rank == 0 ? tcp_publish(rv, size, id, bytes, timeout_ms) : tcp_receive(rv, rank, size, id, bytes, timeout_ms);
}
