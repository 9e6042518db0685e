/* SPDX-License-Identifier: MIT */
/*
 * test-alloc.c - libtxl's aligned buffers (txl-alloc.h): small ones on a
 * cache line, large ones on a 2 MiB boundary, whole and writable, and
 * advised to the kernel as huge pages (the VMA is "THPeligible" in
 * /proc/self/smaps wherever transparent huge pages are not "never"),
 * and given back to the system when freed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "test.h"
#include "txl-alloc.h"

#define MIB ((size_t)1 << 20)

/* The THPeligible flag of the mapping holding p: 0 or 1, or -1 when the
 * kernel does not say. */
static int
thp_eligible(const void *p)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	int inside = 0, flag = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		int v;

		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 &&
		    strchr(line, '-') < strchr(line, ' ')) {
			inside = (uintptr_t)p >= lo && (uintptr_t)p < hi;
			continue;
		}
		if (inside && sscanf(line, "THPeligible: %d", &v) == 1) {
			flag = v;
			break;
		}
	}
	fclose(f);
	return flag;
}

/* whether transparent huge pages are on for madvised memory */
static int
thp_enabled(void)
{
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
	char buf[128] = "";

	if (!f)
		return 0;
	if (!fgets(buf, sizeof buf, f))
		buf[0] = '\0';
	fclose(f);
	return strstr(buf, "[always]") || strstr(buf, "[madvise]");
}

static void
test_small(void)
{
	for (size_t n = 0; n < 3 * 4096; n += 1000) {
		uint8_t *p = txl_alloc_bytes(n);
		CHECK(p != NULL);
		CHECK_EQ((uintptr_t)p % 64, 0);
		memset(p, 0xa5, n);
		free(p);
	}
	float *f = txl_alloc_floats(17);
	CHECK(f != NULL);
	CHECK_EQ((uintptr_t)f % 64, 0);
	free(f);
}

static void
test_large(void)
{
	const size_t sizes[] = { 2 * MIB, 2 * MIB + 1, 5 * MIB + 4097 };

	for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
		const size_t n = sizes[i];
		uint8_t *p = txl_alloc_bytes(n);
		CHECK(p != NULL);
		CHECK_EQ((uintptr_t)p % (2 * MIB), 0);
		memset(p, (int)i + 1, n);
		CHECK_EQ(p[n - 1], i + 1);
		if (thp_enabled()) {
			int e = thp_eligible(p);
			if (e < 0)
				fprintf(stderr, "note: no THPeligible in "
					"/proc/self/smaps\n");
			else
				CHECK_EQ(e, 1);
		}
		free(p);
	}
}

/* After a large buffer is freed, the next ones are still mapped on
 * their own (glibc's threshold did not rise to its size): freed, each
 * goes back to the system instead of staying resident in the heap. */
static void
test_given_back(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	/* the sanitizer's allocator is not glibc's: nothing to count */
	fprintf(stderr, "note: a sanitizer's malloc: not checked\n");
#elif defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
	const size_t sizes[] = { 256 << 10, MIB, 4 * MIB };
	uint8_t *big = txl_alloc_bytes(24 * MIB);

	CHECK(big != NULL);
	memset(big, 1, 24 * MIB);
	free(big);
	for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
		const size_t before = mallinfo2().hblks;
		uint8_t *p = txl_alloc_bytes(sizes[i]);
		uint8_t *q = malloc(sizes[i]);

		CHECK(p != NULL && q != NULL);
		CHECK_EQ(mallinfo2().hblks, before + 2);
		free(p);
		free(q);
		CHECK_EQ(mallinfo2().hblks, before);
	}
#else
	fprintf(stderr, "note: not glibc 2.33 or later: not checked\n");
#endif
}

int
main(void)
{
	if (!thp_enabled())
		fprintf(stderr, "note: transparent huge pages are off; "
			"only the alignment is checked\n");
	RUN(test_small);
	RUN(test_large);
	RUN(test_given_back);
	return 0;
}
