/* SPDX-License-Identifier: MIT */
/*
 * txl-info.c - what the library runs on, for --version and bug reports:
 * the kernel set chosen for this CPU, and the BLAS under the sgemm calls.
 */
#include <pthread.h>
#include <stdio.h>

#include <cblas.h>

#include "txl-internal.h"
#include "txl-kernels.h"

const char *
txl_isa_name(void)
{
	return txl_kernels()->name;
}

static char blas_info[512];

static void
describe_blas(void)
{
	snprintf(blas_info, sizeof(blas_info), "%s (core %s)",
		 openblas_get_config(), openblas_get_corename());
}

const char *
txl_blas_info(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, describe_blas);
	return blas_info;
}
