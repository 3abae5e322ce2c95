/* A Snowflake generator in C for the exec target's tests, written the way
 * docs/exec-target.md tells a user to: stdio protocol, worker ID in
 * $WORKER_ID, "ready" once it takes requests, "time" answered with its
 * clock reading. 41/10/12 layout from 2024-01-01. Built with -DNOCHECK it
 * has no regression check (the negative twin); without, it refuses while
 * its clock is behind the last millisecond it issued in. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const long long epoch_ms = 1704067200000LL;

static long long now_ms(void) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int main(void) {
	const char *w = getenv("WORKER_ID");
	long long worker = w ? atoll(w) : -1;
	if (worker < 0 || worker > 1023) {
		fprintf(stderr, "WORKER_ID must be 0..1023\n");
		return 2;
	}
	long long last = -1, seq = 0;
	char line[64];
	setvbuf(stdout, NULL, _IOFBF, 1 << 16);
	printf("ready\n");
	fflush(stdout);
	while (fgets(line, sizeof line, stdin)) {
		line[strcspn(line, "\r\n")] = 0;
		if (strcmp(line, "time") == 0) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			printf("%lld.%09ld\n", (long long)ts.tv_sec, ts.tv_nsec);
			fflush(stdout);
			continue;
		}
		long n = atol(line);
		if (n < 1 || n > 1000000) {
			printf("error: want a count 1..1000000\n");
			fflush(stdout);
			continue;
		}
		for (long i = 0; i < n; i++) {
			long long ms = now_ms() - epoch_ms;
#ifndef NOCHECK
			if (ms < last) {
				printf("refused: clock moved backwards by %lld ms\n", last - ms);
				break;
			}
#endif
			if (ms == last) {
				seq = (seq + 1) & 4095;
				if (seq == 0) {
					while ((ms = now_ms() - epoch_ms) <= last) {
					}
				}
			} else {
				seq = 0;
			}
			last = ms;
			printf("%lld\n", (ms << 22) | (worker << 12) | seq);
		}
		fflush(stdout);
	}
	return 0;
}
