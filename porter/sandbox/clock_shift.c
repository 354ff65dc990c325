/* Preloaded (LD_PRELOAD) into the original's second run of a program by porter (porter/sandbox/clock.py): the
 * wall clock that run reads -- time(), gettimeofday(), clock_gettime() of CLOCK_REALTIME -- is PORTER_CLOCK_SHIFT
 * seconds later than the real one, and runs on at its real pace, so durations are what they are.  A program
 * that prints what it derives from the wall clock (a random seed from time(0), a date) then prints it
 * differently in its two runs, and porter leaves those lines out of every comparison, as it does for whatever
 * else varies between the original's own runs. */
#define _GNU_SOURCE
#define gettimeofday porter_hidden_gettimeofday
#include <sys/time.h>
#undef gettimeofday
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

static long porter_shift(void) {
    static long shift = -1;
    if (shift < 0) {
        const char* s = getenv("PORTER_CLOCK_SHIFT");
        shift = s ? strtol(s, NULL, 10) : 0;
    }
    return shift;
}

typedef int (*clock_gettime_fn)(clockid_t, struct timespec*);
typedef int (*gettimeofday_fn)(struct timeval*, void*);

int clock_gettime(clockid_t id, struct timespec* ts) {
    static clock_gettime_fn real = NULL;
    if (real == NULL) real = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
    int r = real(id, ts);
    if (r == 0 && ts != NULL && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) ts->tv_sec += porter_shift();
    return r;
}

int gettimeofday(struct timeval* tv, void* tz) {
    static gettimeofday_fn real = NULL;
    if (real == NULL) real = (gettimeofday_fn)dlsym(RTLD_NEXT, "gettimeofday");
    int r = real(tv, tz);
    if (r == 0 && tv != NULL) tv->tv_sec += porter_shift();
    return r;
}

time_t time(time_t* out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out != NULL) *out = ts.tv_sec;
    return ts.tv_sec;
}
