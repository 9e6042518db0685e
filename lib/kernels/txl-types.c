/* SPDX-License-Identifier: MIT */
/*
 * txl-types.c - the traits table of the storage types, the kernels it
 * resolves for the instruction set in use, and conversions between types.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "txl-kernels.h"
#include "txl-types.h"

/* A type's kernels on the vector sets: built on x86-64 only (meson.build
 * compiles the vector files there). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ON_X86(...) __VA_ARGS__
#else
#define ON_X86(...)
#endif

/* The kernels of each storage type on each set that has its own:
 * txl-kernels.c (scalar: every kernel of every type), and the vector
 * files, built on x86-64 only. */
extern const struct txl_type_kernels txl_scalar_f32, txl_scalar_f16,
	txl_scalar_bf16, txl_scalar_q8_0, txl_scalar_q4_0, txl_scalar_q4_k;
extern const struct txl_type_kernels txl_avx2_f32, txl_avx2_f16,
	txl_avx2_bf16, txl_avx2_q8_0, txl_avx2_q4_0, txl_avxvnni_q8_0,
	txl_avxvnni_q4_0, txl_avx2_q4_k, txl_avxvnni_q4_k;
extern const struct txl_type_kernels txl_avx512_f32, txl_avx512_f16,
	txl_avx512_bf16, txl_avx512_q8_0, txl_avx512_q4_0,
	txl_avx512vnni_q8_0, txl_avx512vnni_q4_0, txl_avx512_q4_k,
	txl_avx512vnni_q4_k;

/* A type's name and block, from txl-dtype.h, where every type of the list
 * has its block */
#define TYPE(N) .name = #N, .block = TXL_##N##_BLOCK, .bytes = TXL_##N##_BYTES
#define HAS_BLOCK(N, number)						\
	_Static_assert(TXL_##N##_BLOCK > 0 && TXL_##N##_BYTES > 0, #N);
TXL_DTYPES(HAS_BLOCK)

const struct txl_type txl_types[TXL_N_DTYPES] = {
	[TXL_F32] = {
		TYPE(F32),
		.act = TXL_ACT_F32, .query_act = TXL_ACT_F32,
		.pack = TXL_PACK_F32,
		.isa = {
			[TXL_ISA_SCALAR] = &txl_scalar_f32,
			ON_X86([TXL_ISA_AVX2] = &txl_avx2_f32,
			       [TXL_ISA_AVX512] = &txl_avx512_f32,)
		},
	},
	[TXL_F16] = {
		TYPE(F16),
		.act = TXL_ACT_F32, .query_act = TXL_ACT_F32,
		.pack = TXL_PACK_F16,
		.isa = {
			[TXL_ISA_SCALAR] = &txl_scalar_f16,
			ON_X86([TXL_ISA_AVX2] = &txl_avx2_f16,
			       [TXL_ISA_AVX512] = &txl_avx512_f16,)
		},
	},
	[TXL_BF16] = {
		TYPE(BF16),
		.act = TXL_ACT_F32, .query_act = TXL_ACT_F32,
		.pack = TXL_PACK_BF16,
		.isa = {
			[TXL_ISA_SCALAR] = &txl_scalar_bf16,
			ON_X86([TXL_ISA_AVX2] = &txl_avx2_bf16,
			       [TXL_ISA_AVX512] = &txl_avx512_bf16,)
		},
	},
	/* GGUF's q8_0 x q8_0: activations in int8 blocks; a query against
	 * the memory in int16 (the keys are the rounded side) */
	[TXL_Q8_0] = {
		TYPE(Q8_0), .pack = TXL_PACK_Q8,
		.act = TXL_ACT_Q8, .query_act = TXL_ACT_Q16,
		.same_floats = TXL_SAME_DOT_Q16 | TXL_SAME_DOT_IL,
		.isa = {
			[TXL_ISA_SCALAR] = &txl_scalar_q8_0,
			ON_X86([TXL_ISA_AVX2] = &txl_avx2_q8_0,
			       [TXL_ISA_AVX2_VNNI] = &txl_avxvnni_q8_0,
			       [TXL_ISA_AVX512] = &txl_avx512_q8_0,
			       [TXL_ISA_AVX512_VNNI] = &txl_avx512vnni_q8_0,)
		},
	},
	/* 4 bits against int8 activations and queries */
	[TXL_Q4_0] = {
		TYPE(Q4_0), .pack = TXL_PACK_Q8,
		.act = TXL_ACT_Q8, .query_act = TXL_ACT_Q8,
		.same_floats = TXL_SAME_DOT_Q8 | TXL_SAME_DOT_IL,
		.isa = {
			[TXL_ISA_SCALAR] = &txl_scalar_q4_0,
			ON_X86([TXL_ISA_AVX2] = &txl_avx2_q4_0,
			       [TXL_ISA_AVX2_VNNI] = &txl_avxvnni_q4_0,
			       [TXL_ISA_AVX512] = &txl_avx512_q4_0,
			       [TXL_ISA_AVX512_VNNI] = &txl_avx512vnni_q4_0,)
		},
	},
	/* super-blocks of 128 in 4 bits, a 6-bit scale and zero point per
	 * 32, against int8 activations and queries; packed as int8 blocks
	 * of 32 (each sub-block's scale and 4 q - z) */
	[TXL_Q4_K] = {
		TYPE(Q4_K), .pack = TXL_PACK_Q8,
		.act = TXL_ACT_Q8, .query_act = TXL_ACT_Q8,
		.same_floats = TXL_SAME_DOT_Q8 | TXL_SAME_DOT_IL,
		.block_ok = txl_q4_k_block_ok,
		.isa = {
			[TXL_ISA_SCALAR] = &txl_scalar_q4_k,
			ON_X86([TXL_ISA_AVX2] = &txl_avx2_q4_k,
			       [TXL_ISA_AVX2_VNNI] = &txl_avxvnni_q4_k,
			       [TXL_ISA_AVX512] = &txl_avx512_q4_k,
			       [TXL_ISA_AVX512_VNNI] = &txl_avx512vnni_q4_k,)
		},
	},
	/* bytes, not numbers: the tokenizer, padding */
	[TXL_U8] = { TYPE(U8) },
};

/* txl.h */
const char *
txl_dtype_name(enum txl_dtype dt)
{
	return (unsigned)dt < TXL_N_DTYPES ? txl_types[dt].name : NULL;
}

/* txl.h */
int
txl_dtype_from_name(const char *name)
{
	for (int i = 0; name && i < TXL_N_DTYPES; i++)
		if (strcasecmp(name, txl_types[i].name) == 0)
			return i;
	return -1;
}

/* txl.h: every type the kernels compute with holds weights and memory */
unsigned
txl_dtype_uses(enum txl_dtype dt)
{
	return (unsigned)dt < TXL_N_DTYPES && txl_dtype_computable(dt) ?
		TXL_DTYPE_WEIGHTS | TXL_DTYPE_MEMORY : 0;
}

bool
txl_dtype_parse(const char *name, enum txl_dtype *dt)
{
	for (int i = 0; i < TXL_N_DTYPES; i++) {
		if (strcmp(name, txl_types[i].name) == 0) {
			*dt = (enum txl_dtype)i;
			return true;
		}
	}
	return false;
}

void
txl_dtype_names(char *buf, size_t cap, bool computable_only,
		bool blocked_too)
{
	const char *names[TXL_N_DTYPES];
	size_t len = 0;
	int n = 0;

	for (int i = 0; i < TXL_N_DTYPES; i++)
		if ((!computable_only || txl_dtype_computable(i)) &&
		    (blocked_too || txl_types[i].block == 1))
			names[n++] = txl_types[i].name;
	buf[0] = '\0';
	for (int i = 0; i < n && len < cap; i++)
		len += (size_t)snprintf(buf + len, cap - len, "%s%s",
					i == 0 ? "" : i == n - 1 ? " or " : ", ",
					names[i]);
}

/* Each slot of the type's kernels from set isa or the nearest set below
 * it that has its own. */
static void
resolve(enum txl_dtype dt, enum txl_isa isa, struct txl_type_kernels *k)
{
	memset(k, 0, sizeof *k);
	for (enum txl_isa i = isa; i != TXL_N_ISA; i = txl_isa_base(i)) {
		const struct txl_type_kernels *s = txl_types[dt].isa[i];

		if (!s)
			continue;
#define TAKE(slot) if (!k->slot) k->slot = s->slot
		TAKE(widen);
		TAKE(narrow);
		TAKE(axpy_rows);
		TAKE(dot);
		TAKE(dot_q8);
		TAKE(dot_q16);
		TAKE(dot_il);
		TAKE(il_pack);
		TAKE(dot_multi);
		TAKE(dot_il_multi);
		TAKE(unpack_q8);
#undef TAKE
	}
}

bool
txl_type_kernels_on(enum txl_dtype dt, enum txl_isa isa,
		    struct txl_type_kernels *out)
{
	if (!txl_kernels_for(isa))
		return false;
	resolve(dt, isa, out);
	return true;
}

static struct txl_type_kernels in_use[TXL_N_DTYPES];
static pthread_once_t in_use_once = PTHREAD_ONCE_INIT;

static void
resolve_in_use(void)
{
	for (int dt = 0; dt < TXL_N_DTYPES; dt++)
		resolve(dt, txl_kernels()->isa, &in_use[dt]);
}

const struct txl_type_kernels *
txl_type_kernels(enum txl_dtype dt)
{
	pthread_once(&in_use_once, resolve_in_use);
	return &in_use[dt];
}

void
txl_widen(float *dst, const void *src, enum txl_dtype dt, size_t n)
{
	txl_type_kernels(dt)->widen(dst, src, n);
}

void
txl_narrow(void *dst, const float *src, enum txl_dtype dt, size_t n)
{
	txl_type_kernels(dt)->narrow(dst, src, n);
}

void
txl_convert(void *dst, enum txl_dtype dd, const void *src, enum txl_dtype sd,
	    size_t n)
{
	/* chunks of whole blocks */
	float buf[1024];
	const uint8_t *s = src;
	uint8_t *d = dst;

	for (size_t i = 0; i < n; i += 1024) {
		const int len = n - i < 1024 ? (int)(n - i) : 1024;

		if (dd == sd) {
			memcpy(d, s, txl_row_bytes(sd, len));
		} else {
			txl_widen(buf, s, sd, (size_t)len);
			txl_narrow(d, buf, dd, (size_t)len);
		}
		s += txl_row_bytes(sd, 1024);
		d += txl_row_bytes(dd, 1024);
	}
}
