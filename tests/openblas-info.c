/* SPDX-License-Identifier: MIT */
/*
 * openblas-info.c - print the kernel set OpenBLAS chose on this CPU (its
 * core name, which OPENBLAS_CORETYPE overrides) and its build
 * configuration, as .ci/run records them beside the test results.
 * Not a test: it cannot fail.
 */
#include <stdio.h>

#include <cblas.h>

int
main(void)
{
	printf("%s (%s, %d threads)\n", openblas_get_corename(),
	       openblas_get_config(), openblas_get_num_threads());
	return 0;
}
