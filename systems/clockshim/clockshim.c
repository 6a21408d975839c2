/*
 * clockshim: an LD_PRELOAD library that shifts a process's wall clock.
 *
 * gettimeofday, time and clock_gettime on the realtime clocks return the real time plus an offset in
 * nanoseconds. The offset is a native-endian int64 at the start of the file named by
 * LOCKPICK_CLOCK_FILE, memory-mapped shared, so the harness moves the clock of a running process by
 * storing a new value there (with an atomic 8-byte store). Monotonic and CPU clocks are left alone.
 *
 * The real clocks are read with direct system calls, never through libc or dlsym: jemalloc calls
 * clock_gettime while it initialises, and resolving libc's functions at that moment (dlsym may
 * allocate) recurses into the allocator; that is how libfaketime crashes Debian's redis-server.
 * Nothing here allocates: getenv, open, mmap and close do not.
 *
 * A missing file means offset 0; opening is retried at most once a second, so a file created after
 * start-up is picked up.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define NSEC 1000000000LL

/* The mapped offset, or NULL while the file is absent. */
static int64_t *volatile offset_ptr;
/* Monotonic second of the last failed open, +1 (0: never tried). */
static volatile int64_t last_try;

static int real_clock_gettime(clockid_t id, struct timespec *ts) {
    return (int)syscall(SYS_clock_gettime, id, ts);
}

static int64_t *map_offset(void) {
    int64_t *p = __atomic_load_n(&offset_ptr, __ATOMIC_ACQUIRE);
    if (p != NULL) {
        return p;
    }
    struct timespec now;
    if (real_clock_gettime(CLOCK_MONOTONIC, &now) != 0) {
        return NULL;
    }
    int64_t tried = __atomic_load_n(&last_try, __ATOMIC_RELAXED);
    if (tried != 0 && now.tv_sec + 1 - tried < 1) {
        return NULL;
    }
    __atomic_store_n(&last_try, (int64_t)now.tv_sec + 1, __ATOMIC_RELAXED);
    const char *path = getenv("LOCKPICK_CLOCK_FILE");
    if (path == NULL || path[0] == '\0') {
        return NULL;
    }
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return NULL;
    }
    struct stat st;
    if (syscall(SYS_fstat, fd, &st) != 0 || st.st_size < (off_t)sizeof(int64_t)) {
        syscall(SYS_close, fd);
        return NULL;
    }
    void *m = (void *)syscall(SYS_mmap, NULL, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
    syscall(SYS_close, fd);
    if (m == MAP_FAILED) {
        return NULL;
    }
    int64_t *expected = NULL;
    if (!__atomic_compare_exchange_n(&offset_ptr, &expected, (int64_t *)m, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        /* Another thread mapped it first. */
        syscall(SYS_munmap, m, sizeof(int64_t));
        return expected;
    }
    return (int64_t *)m;
}

static int64_t current_offset(void) {
    int64_t *p = map_offset();
    /* The page is 8-byte aligned: an atomic load never sees half of a concurrent store. */
    return p == NULL ? 0 : __atomic_load_n(p, __ATOMIC_RELAXED);
}

static int is_realtime(clockid_t id) {
    switch (id) {
    case CLOCK_REALTIME:
    case CLOCK_REALTIME_COARSE:
#ifdef CLOCK_REALTIME_ALARM
    case CLOCK_REALTIME_ALARM:
#endif
#ifdef CLOCK_TAI
    case CLOCK_TAI:
#endif
        return 1;
    }
    return 0;
}

static void shift(struct timespec *ts, int64_t off) {
    int64_t ns = (int64_t)ts->tv_nsec + off % NSEC;
    int64_t s = (int64_t)ts->tv_sec + off / NSEC;
    if (ns >= NSEC) {
        ns -= NSEC;
        s++;
    } else if (ns < 0) {
        ns += NSEC;
        s--;
    }
    ts->tv_sec = (time_t)s;
    ts->tv_nsec = (long)ns;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
    int rc = real_clock_gettime(id, ts);
    if (rc == 0 && is_realtime(id)) {
        int64_t off = current_offset();
        if (off != 0) {
            shift(ts, off);
        }
    }
    return rc;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    struct timespec ts;
    if (tz != NULL) {
        /* Only the (obsolete) timezone is wanted from the kernel. */
        struct timeval ignored;
        if (syscall(SYS_gettimeofday, &ignored, tz) != 0) {
            return -1;
        }
    }
    if (real_clock_gettime(CLOCK_REALTIME, &ts) != 0) {
        return -1;
    }
    shift(&ts, current_offset());
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = (suseconds_t)(ts.tv_nsec / 1000);
    return 0;
}

time_t time(time_t *out) {
    struct timespec ts;
    if (real_clock_gettime(CLOCK_REALTIME, &ts) != 0) {
        return (time_t)-1;
    }
    shift(&ts, current_offset());
    if (out != NULL) {
        *out = ts.tv_sec;
    }
    return ts.tv_sec;
}
