/* Preloaded (LD_PRELOAD) into every run of a program porter compares (porter/sandbox/clock.py): the wall clock a
 * run reads -- time(), gettimeofday(), clock_gettime() of CLOCK_REALTIME -- starts half a second after
 * PORTER_CLOCK_EPOCH when the program starts (the original's second run: nine days later) and runs on at its real
 * pace, so durations are what they are.  What a program derives from the wall clock (a random seed from time(0), a
 * date) is then the same in the original's first run and in every port's, and differs in the original's second,
 * so porter compares it where a port can reproduce it and knows it varies.  (The half second: a read just after
 * the start, or of the coarse clock that lags the precise one by a few milliseconds, is still in EPOCH's second.) */
#define _GNU_SOURCE
#define gettimeofday porter_hidden_gettimeofday
#include <sys/time.h>
#undef gettimeofday
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

/* Nanoseconds added to the real wall clock: PORTER_CLOCK_EPOCH (seconds since 1970) pins the clock to that
 * instant at the moment this library is loaded, the program's start, so that every run of a program porter
 * compares starts at one instant and a time(0)-seeded random draw is the same in each. */
static long long porter_shift_ns = 0;
typedef int (*clock_gettime_fn)(clockid_t, struct timespec*);

__attribute__((constructor)) static void porter_clock_start(void) {
    const char* epoch = getenv("PORTER_CLOCK_EPOCH");
    if (epoch != NULL) {
        clock_gettime_fn real = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
        struct timespec now;
        if (real != NULL && real(CLOCK_REALTIME, &now) == 0)
            porter_shift_ns = strtoll(epoch, NULL, 10) * 1000000000LL + 500000000LL -
                              (now.tv_sec * 1000000000LL + now.tv_nsec);
    }
}

/* seconds and nanoseconds, moved by porter_shift_ns */
static void porter_moved(time_t* sec, long long* nsec) {
    long long total = *nsec + porter_shift_ns % 1000000000LL;
    *sec += (time_t)(porter_shift_ns / 1000000000LL);
    if (total >= 1000000000LL) {
        total -= 1000000000LL;
        *sec += 1;
    } else if (total < 0) {
        total += 1000000000LL;
        *sec -= 1;
    }
    *nsec = total;
}

typedef int (*gettimeofday_fn)(struct timeval*, void*);

int clock_gettime(clockid_t id, struct timespec* ts) {
    static clock_gettime_fn real = NULL;
    if (real == NULL) real = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
    int r = real(id, ts);
    if (r == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) {
        long long nsec = ts->tv_nsec;
        porter_moved(&ts->tv_sec, &nsec);
        ts->tv_nsec = (long)nsec;
    }
    return r;
}

int gettimeofday(struct timeval* tv, void* tz) {
    static gettimeofday_fn real = NULL;
    if (real == NULL) real = (gettimeofday_fn)dlsym(RTLD_NEXT, "gettimeofday");
    int r = real(tv, tz);
    if (r == 0 && tv != NULL) {
        long long nsec = (long long)tv->tv_usec * 1000LL;
        porter_moved(&tv->tv_sec, &nsec);
        tv->tv_usec = (suseconds_t)(nsec / 1000LL);
    }
    return r;
}

time_t time(time_t* out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out != NULL) *out = ts.tv_sec;
    return ts.tv_sec;
}
