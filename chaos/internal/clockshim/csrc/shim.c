/* redfence clock shim: LD_PRELOAD it to add a millisecond offset, read from
 * the file named by $REDFENCE_CLOCK_OFFSET_FILE, to gettimeofday only. */
#define _GNU_SOURCE
#define gettimeofday redfence_hidden_gettimeofday /* avoid glibc's prototype */
#include <sys/time.h>
#undef gettimeofday
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

static int (*real_gtod)(struct timeval *, void *);
static int fd = -1;

__attribute__((constructor)) static void shim_init(void) {
	real_gtod = (int (*)(struct timeval *, void *))dlsym(RTLD_NEXT, "gettimeofday");
	const char *path = getenv("REDFENCE_CLOCK_OFFSET_FILE");
	if (path != NULL) fd = open(path, O_RDONLY | O_CLOEXEC);
}

/* parse reads optional spaces, an optional sign and leading digits;
 * anything else (or no file) means 0. */
static long long parse(const char *s) {
	long long v = 0, sign = 1;
	while (*s == ' ') s++;
	if (*s == '-' || *s == '+') sign = (*s++ == '-') ? -1 : 1;
	while (*s >= '0' && *s <= '9') v = v * 10 + (*s++ - '0');
	return sign * v;
}

static long long offset_ms(void) {
	char a[32], b[32];
	for (int try = 0; fd >= 0 && try < 3; try++) { /* read twice: no torn value */
		ssize_t na = pread(fd, a, sizeof a - 1, 0), nb = pread(fd, b, sizeof b - 1, 0);
		if (na < 0 || nb < 0) return 0;
		a[na] = b[nb] = 0;
		if (parse(a) == parse(b)) return parse(a);
	}
	return 0;
}

int gettimeofday(struct timeval *tv, void *tz) {
	if (real_gtod == NULL) real_gtod = (int (*)(struct timeval *, void *))dlsym(RTLD_NEXT, "gettimeofday");
	int rc = real_gtod(tv, tz);
	long long off = offset_ms();
	if (rc != 0 || tv == NULL || off == 0) return rc;
	long long us = (long long)tv->tv_sec * 1000000 + tv->tv_usec + off * 1000;
	tv->tv_sec = us / 1000000;
	tv->tv_usec = us % 1000000;
	if (tv->tv_usec < 0) { tv->tv_usec += 1000000; tv->tv_sec--; }
	return rc;
}
