/* SPDX-License-Identifier: MIT */
/*
 * settings.c - the option table.
 *
 * Every option and setting is described once, in settings[]: its names,
 * type, range, scope, completion and help.  The command line and --help
 * (cli.c, usage.c), the config file and a model's recommended settings
 * (config.c), --print-config, the REPL's /set and /show and the bash
 * completion (through --list-options) all go through it, so that they
 * accept the same names, types and ranges and give the same messages.
 * Ranges that the library enforces come from txl.h.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "txl.h"

#include "errors.h"
/* the fields of txlgen-server's own options (its rows of the table) */
#include "server-options.h"
#include "settings.h"
#include "text.h"

unsigned settings_prog = PROG_TXLGEN;

const char *
prog_name(unsigned prog)
{
	return prog == PROG_SERVER ? "txlgen-server" : "txlgen";
}

static const char *const color_names[3] = { "auto", "always", "never" };
const char *const compute_names[2] = {
	[TXL_COMPUTE_F32] = "f32", [TXL_COMPUTE_BF16] = "bf16",
};
const char *const mem_init_names[2] = {
	[TXL_MEM_EMPTY] = "empty", [TXL_MEM_ZEROS] = "zeros",
};

#define NAMES_OF(array) \
	static const char *const *array##_of(int *n) \
	{ \
		*n = (int)(sizeof array / sizeof *array); \
		return array; \
	}
NAMES_OF(color_names)
NAMES_OF(compute_names)
NAMES_OF(mem_init_names)

/* txlgen-server's --log-format, by enum log_format */
static const char *const log_names[2] = {
	[LOG_TEXT] = "text", [LOG_JSON] = "json",
};
NAMES_OF(log_names)

/* by enum txl_dtype, NULL for the types of no memory */
static const char *const *
kv_type_names(int *n)
{
	static const char *names[TXL_N_DTYPES];

	for (int i = 0; i < TXL_N_DTYPES; i++)
		names[i] = txl_dtype_uses(i) & TXL_DTYPE_MEMORY ?
			txl_dtype_name(i) : NULL;
	*n = TXL_N_DTYPES;
	return names;
}

/* A row of txlgen: the field of struct txlgen_options (its name is the
 * key and the long option), its type and scope, then what else it has. */
#define ROW_OF(progs_, field, type_, scope_, ...) \
	{ .key = #field, .progs = progs_, \
	  .offset = offsetof(struct txlgen_options, field), \
	  .type = type_, .scope = scope_, __VA_ARGS__ }
#define ROW(...) ROW_OF(PROG_TXLGEN, __VA_ARGS__)
/* a setting of txlgen that txlgen-server takes as the default of its
 * requests (or of its model) */
#define BOTH(...) ROW_OF(PROG_BOTH, __VA_ARGS__)
/* an option of txlgen-server alone, named @p name (its long option with
 * '-' for '_' and its config key): the field of its struct srv_opts
 * (server-options.h) */
#define SERVER(name, field, type_, ...) \
	{ .key = #name, .progs = PROG_SERVER, .in_server = true, \
	  .offset = offsetof(struct srv_opts, field), .type = type_, \
	  .scope = SCOPE_START, __VA_ARGS__ }
/* null is the session's value, the field of the same name of
 * struct txl_session_params */
#define FROM_SESSION(field) \
	.from_session = true, \
	.session_offset = offsetof(struct txl_session_params, field)
/* a heading: shown by the programs of the rows under it */
#define HEAD(title) { .help = title }
/* an option that acts (and sets no field) */
#define ACTION(name, s, act, progs_, help_) \
	{ .key = name, .progs = progs_, .short_opt = s, .scope = SCOPE_CLI, \
	  .action = act, .help = help_ }
#define CLI SCOPE_CLI
#define START SCOPE_START
#define T SCOPE_TURN
#define S SCOPE_SESSION

/*
 * Every option, in --help's order.  A row with a scope other than CLI
 * is also a key of the config file and of /set, in this order in
 * --print-config; one with model_may_set a model may recommend.
 */
const struct setting settings[] = {
	HEAD("Model and input:"),
	BOTH(model, ST_STRING, START, .short_opt = 'm', .nullable = true,
	    .arg = ARG_MODEL, .metavar = "MODEL",
	    .help = "model file, or the name of one along the model\n"
	    "path (--list-models; default: $TXLGEN_MODEL,\n"
	    "else sotu)",
	    .help_server = "model file, or the name of one along txlgen's\n"
	    "model path (default: sotu)"),
	ROW(prompt, ST_STRING, START, .short_opt = 'f', .alias = "file",
	    .nullable = true, .arg = ARG_INPUT, .metavar = "FILE",
	    .help = "read the prompt from FILE ('-' = stdin);\n"
	    "also spelt --file FILE"),
	ROW(text, ST_STRING, START, .short_opt = 'p', .nullable = true,
	    .metavar = "STRING", .help = "use STRING as the prompt"),
	ROW(echo, ST_BOOL, T,
	    .theirs = "verbose-prompt display-prompt",
	    .help = "print the prompt before the continuation"),
	ROW(prime, ST_LIST, START, .arg = ARG_INPUT, .metavar = "FILE",
	    .help = "feed FILE into the memory first (repeatable;\n"
	    "with --state-out and no prompt: only that)"),
	ROW(read_all, ST_BOOL, T,
	    .help = "compute every token of the prompt and --prime\n"
	    "files (default: only the last ones, which alone\n"
	    "make the memory: the same state, sooner)"),
	ROW(state_in, ST_STRING, START, .nullable = true, .arg = ARG_FILE,
	    .theirs = "prompt-cache",
	    .metavar = "FILE",
	    .help = "start from a saved memory state (with its\n"
	    "mem_len unless --mem-len is given)"),
	ROW(state_out, ST_STRING, START, .nullable = true, .arg = ARG_FILE,
	    .metavar = "FILE", .help = "save the memory state at the end"),
	BOTH(mmap, ST_BOOL, START,
	    .help = "map the model file (default: read it into memory,\n"
	    "where tokens come faster)"),
	ROW(interactive, ST_BOOL, CLI, .short_opt = 'i',
	    .theirs = "conversation interactive-first",
	    .help = "interactive session (REPL)"),

	/*
	 * txlgen-server's own options.  A new one is one row here, on a
	 * field of struct srv_opts (server-options.h) that server/main.c's srv
	 * initialises:
	 *   SERVER(max_foo, max_foo, ST_INT, .min = 1, .max = 1 << 20,
	 *          .metavar = "N", .help = "... (default 8)"),
	 * (option --max-foo, config key "max_foo"; ST_INT for an int field,
	 * ST_SIZE for a size_t, ST_STRING for a char *, ST_BOOL for a bool).
	 */
	HEAD("Listening:"),
	SERVER(host, host, ST_STRING, .metavar = "ADDR",
	       .help = "address to listen on (default 127.0.0.1; another\n"
	       "than a loopback one needs --api-key-file or\n"
	       "--no-api-key)"),
	SERVER(port, port, ST_INT, .max = 65535, .metavar = "N",
	       .help = "port (default 8080; 0 = any free one)"),
	SERVER(api_key_file, api_key_file, ST_STRING, .arg = ARG_FILE,
	       .theirs = "api-key", .metavar = "FILE",
	       .help = "requests must bear the key on FILE's first line\n"
	       "(Authorization: Bearer KEY)"),
	SERVER(no_api_key, no_api_key, ST_BOOL, .action = ACT_ONCE,
	       .help = "listen on a non-loopback address without a key"),
	SERVER(cors_origin, cors_origin, ST_STRING, .metavar = "ORIGIN",
	       .help = "allow browsers of ORIGIN (default: no CORS)"),
	SERVER(max_connections, max_connections, ST_INT, .min = 1,
	       .max = 65536, .metavar = "N",
	       .help = "open connections (default 128)"),
	SERVER(max_connections_per_client, max_per_client, ST_INT, .min = 1,
	       .max = 65536, .metavar = "N",
	       .help = "connections of one address still sending their "
		       "request (default 32)"),
	SERVER(timeout, timeout_s, ST_INT, .min = 1, .max = 86400,
	       .metavar = "S",
	       .help = "close a connection idle S seconds (default 60)"),
	SERVER(request_timeout, request_timeout_s, ST_INT, .min = 1,
	       .max = 86400, .metavar = "S",
	       .help = "a request must arrive whole in S seconds (default 30)"),

	SERVER(log_requests, log_requests, ST_BOOL,
	       .help = "a line on stderr per request (default)"),
	SERVER(log_format, log_format, ST_ENUM, .choices = log_names_of,
	       .metavar = "FORMAT",
	       .help = "the request log's lines: text (default) or json,\n"
	       "one object a line"),

	HEAD("Requests:"),
	SERVER(lenient, lenient, ST_BOOL, .action = ACT_ONCE,
	       .help = "let fields of a request it does not know be\n"
		       "(default: 400, naming the field)"),
	SERVER(parallel, parallel, ST_INT, .min = 1, .max = 256,
	       .theirs = "n-parallel", .metavar = "N",
	       .help = "completions computed together (default 4)"),
	SERVER(max_queue, max_queue, ST_INT, .min = 1, .max = 1 << 20,
	       .metavar = "N",
	       .help = "requests waiting for a slot (default 256)"),
	SERVER(max_body, max_body, ST_SIZE, .min = 64, .max = 1 << 30,
	       .metavar = "BYTES",
	       .help = "largest request body (default 1048576)"),
	SERVER(max_prompt, max_prompt, ST_INT, .min = 1, .max = INT_MAX,
	       .metavar = "N",
	       .help = "most prompt tokens a request (default 131072)"),
	SERVER(max_tokens, max_tokens, ST_INT, .max = INT_MAX,
	       .metavar = "N",
	       .help = "most max_tokens a request (default 65536)"),
	SERVER(max_n, max_n, ST_INT, .min = 1, .max = 1024, .metavar = "N",
	       .help = "most choices n a request (default 16)"),
	SERVER(max_logprob_rows, max_logprob_rows, ST_INT, .max = INT_MAX,
	       .metavar = "N",
	       .help = "most logprobs a request holds: tokens times n\n"
		       "times 1 + logprobs (default 4194304)"),
	SERVER(grace, grace_s, ST_INT, .max = 86400, .metavar = "S",
	       .help = "on SIGTERM, S seconds for running requests\n"
	       "to end (default 10)"),

	HEAD("Sessions:"),
	SERVER(session_dir, session_dir, ST_STRING, .arg = ARG_FILE,
	       .theirs = "slot-save-path", .metavar = "DIR",
	       .help = "keep sessions as state files in DIR"),
	SERVER(max_session_bytes, max_session_bytes, ST_INT, .max = INT_MAX,
	       .metavar = "N",
	       .help = "largest state file written (default 0: any)"),
	SERVER(max_disk_sessions, max_disk_sessions, ST_INT, .max = 1 << 24,
	       .metavar = "N",
	       .help = "state files kept in DIR (default 0: any number)"),
	SERVER(max_sessions, max_sessions, ST_INT, .max = 1 << 20,
	       .metavar = "N",
	       .help = "sessions kept in memory (default 64)"),

	HEAD("Length and stopping:"),
	BOTH(n_predict, ST_INT, T, .short_opt = 'n', .min = -1, .max = INT_MAX,
	    .theirs = "predict max-tokens max-new-tokens",
	    .model_may_set = true, .metavar = "N",
	    .help = "tokens to generate (default 256; -1 = no limit)",
	    .help_server = "max_tokens of a request without one (default\n"
	    "256; -1: 16)"),
	BOTH(stop, ST_LIST, T, .model_may_set = true, .metavar = "STRING",
	    .theirs = "reverse-prompt antiprompt",
	    .help = "stop before STRING (repeatable)"),
	BOTH(ignore_eos, ST_BOOL, T, .model_may_set = true,
	    .help = "never generate the end-of-sequence token"),
	ROW(n_samples, ST_INT64, CLI, .min = 1, .max = N_STREAMS_MAX,
	    .theirs = "num-return-sequences", .metavar = "N",
	    .help = "N continuations of the prompt, read once, each\n"
	    "with its own seed, -n and --stop, computed\n"
	    "together; in the text each but the first after\n"
	    "a line '--- sample I ---' (I from 0)"),

	HEAD("Sampling (a model file may recommend other defaults):"),
	BOTH(temp, ST_FLOAT, T, .max = 100, .model_may_set = true,
	    .theirs = "temperature",
	    .metavar = "T", .help = "temperature (default 0.8; 0 = greedy)"),
	BOTH(top_k, ST_INT, T, .max = INT_MAX, .model_may_set = true,
	    .metavar = "K",
	    .help = "keep the K most likely tokens (default 40; 0 = off)"),
	BOTH(top_p, ST_FLOAT, T, .min_exclusive = true, .max = 1,
	    .model_may_set = true, .metavar = "P",
	    .help = "nucleus sampling (default 0.95; 1 = off)"),
	BOTH(min_p, ST_FLOAT, T, .max = 1, .model_may_set = true,
	    .metavar = "P",
	    .help = "drop tokens below P x the top one (default 0.05)"),
	BOTH(repeat_penalty, ST_FLOAT, T, .min_exclusive = true, .max = 100,
	    .model_may_set = true, .metavar = "X",
	    .help = "penalise recent tokens (default 1 = off)"),
	BOTH(repeat_last_n, ST_INT, T, .max = TXL_REPEAT_LAST_N_MAX,
	    .model_may_set = true, .metavar = "N",
	    .help = "tokens the penalty looks back (default 64)"),
	BOTH(frequency_penalty, ST_FLOAT, T, .min = -2, .max = 2,
	    .model_may_set = true, .metavar = "X",
	    .help = "minus X per time a token was generated (default 0)"),
	BOTH(presence_penalty, ST_FLOAT, T, .min = -2, .max = 2,
	    .model_may_set = true, .metavar = "X",
	    .help = "minus X once a token was generated (default 0)"),
	BOTH(typical, ST_FLOAT, T, .min_exclusive = true, .max = 1,
	    .theirs = "typical-p", .model_may_set = true, .metavar = "P",
	    .help = "locally typical sampling (default 1 = off)"),
	BOTH(mirostat_tau, ST_FLOAT, T, .max = 100, .theirs = "mirostat-ent",
	    .model_may_set = true, .metavar = "TAU",
	    .help = "mirostat 2: target surprise in bits (default 0 = off)"),
	BOTH(mirostat_eta, ST_FLOAT, T, .min_exclusive = true, .max = 1,
	    .theirs = "mirostat-lr", .model_may_set = true, .metavar = "ETA",
	    .help = "mirostat 2's learning rate (default 0.1)"),
	BOTH(logit_bias, ST_LIST, T, .metavar = "ID=BIAS",
	    .help = "add BIAS to token ID, or to TEXT's tokens with\n"
		    "TEXT=BIAS (repeatable; BIAS -inf: never)"),
	BOTH(seed, ST_SEED, T, .short_opt = 's', .nullable = true,
	    .max = (double)SEED_MAX, .metavar = "N",
	    .help = "random seed (default or -1: a new one each run)",
	    .help_server = "seed of a request without one (default or -1:\n"
	    "a new one each request)"),

	HEAD("Transformer-XL (defaults from the model):"),
	BOTH(mem_len, ST_INT, S, .nullable = true, .max = TXL_MEM_LEN_MAX,
	    .theirs = "ctx-size n-ctx context",
	    .model_may_set = true, FROM_SESSION(mem_len), .metavar = "N",
	    .help = "positions kept in the memory"),
	BOTH(seg_len, ST_INT, S, .nullable = true, .min = 1,
	    .theirs = "batch-size ubatch-size",
	    .max = TXL_SEG_LEN_MAX, .model_may_set = true,
	    FROM_SESSION(seg_len), .metavar = "N",
	    .help = "tokens per segment"),
	BOTH(clamp_len, ST_INT, S, .nullable = true, .max = INT_MAX,
	    .model_may_set = true, FROM_SESSION(clamp_len), .metavar = "N",
	    .help = "clamp relative distances to N (0 = none)"),
	BOTH(same_length, ST_TRIBOOL, S, .nullable = true,
	    .model_may_set = true, FROM_SESSION(same_length),
	    .help = "every position sees the same number of keys"),
	BOTH(mem_init, ST_ENUM, S, .nullable = true, .model_may_set = true,
	    FROM_SESSION(mem_init), .choices = mem_init_names_of,
	    .metavar = "HOW",
	    .help = "the memory starts empty (the PyTorch code's\n"
	    "evaluation) or as mem_len zero states (zeros:\n"
	    "the TensorFlow code's and Hugging Face's;\n"
	    "models of that origin recommend it)"),
	BOTH(threads, ST_INT, S, .short_opt = 't', .max = 1024,
	    .theirs = "threads-batch",
	    .metavar = "N",
	    .help = "threads of the kernels and of OpenBLAS\n"
	    "(default 0 = one per CPU; where other work keeps\n"
	    "the CPUs busy, fewer are faster: -t 1 can be\n"
	    "twice as fast on 2 busy cores)"),
	BOTH(kv_type, ST_ENUM, S, .choices = kv_type_names, .metavar = "TYPE",
	    .theirs = "cache-type-k cache-type-v",
	    .help = "the storage type of the memory's K, V and R\n"
	    "(default F32, exact; --list-types lists them,\n"
	    "txlgen(1) says what each trades; any case)"),
	BOTH(compute, ST_ENUM, S, .choices = compute_names_of,
	    .metavar = "TYPE",
	    .help = "products of segments with BF16 weights in f32\n"
	    "(default: exact) or bf16 (activations rounded\n"
	    "to BF16; twice as fast with AVX512_BF16)"),

	HEAD("Scoring and tokens:"),
	ROW(score, ST_STRING, CLI, .arg = ARG_INPUT, .metavar = "FILE",
	    .theirs = "perplexity",
	    .help = "print NLL, perplexity and bits per byte of FILE\n"
	    "('-' = stdin), read as a stream"),
	ROW(part, ST_STRING, CLI, .metavar = "K/N",
	    .help = "--score: score the K-th of N equal runs of the\n"
	    "text's tokens, as one run scores them (after\n"
	    "reading what the first can see; --info says how\n"
	    "much): for many processes or machines"),
	ROW(score_merge, ST_LIST, CLI, .arg = ARG_FILE, .metavar = "PART...",
	    .help = "join the --json outputs of --score --part K/N\n"
	    "into the whole text's summary"),
	ROW(score_docs, ST_STRING, CLI, .arg = ARG_INPUT, .metavar = "FILE",
	    .help = "score each line of FILE ('-' = stdin) as a\n"
	    "document of its own, from an empty memory (or\n"
	    "the --prime one): a JSON object per document, in\n"
	    "input order, read as a stream"),
	ROW(field, ST_STRING, CLI, .metavar = "NAME",
	    .help = "--score-docs reads JSON Lines: score the string\n"
	    "NAME of each object (its \"id\" goes with it)"),
	ROW(strict, ST_BOOL, CLI,
	    .help = "--score-docs: a malformed line ends the run\n"
	    "(exit status 1) instead of being skipped"),
	ROW(first_line, ST_INT64, CLI, .min = 1, .max = (double)SEED_MAX,
	    .metavar = "N",
	    .help = "--score-docs: the number of the input's first\n"
	    "line (default 1), for a part of a larger input"),
	ROW(streams, ST_INT64, CLI, .min = 1, .max = N_STREAMS_MAX,
	    .metavar = "N",
	    .help = "--score-docs: documents scored at once,\n"
	    "computed together (default 8)"),
	ROW(tokenize, ST_STRING, CLI, .arg = ARG_INPUT, .metavar = "FILE",
	    .help = "print the token ids of FILE ('-' = stdin), one\n"
	    "line per line; with --json also the text of each"),
	ROW(score_stride, ST_INT, START, .nullable = true, .min = 1,
	    .max = TXL_SEG_LEN_MAX, .metavar = "S",
	    .help = "models without memory (attn_type 2, 3): score\n"
	    "in windows of seg_len tokens, S predictions per\n"
	    "window (1 = the vanilla Transformer's protocol;\n"
	    "default seg_len = eval.py's segments)"),
	ROW(kl_ref, ST_STRING, CLI, .arg = ARG_MODEL, .metavar = "REF",
	    .help = "with --score: score with the model REF too (a\n"
	    "file or a name, of the same vocabulary) in the\n"
	    "same pass and compare each token's distributions:\n"
	    "KL(REF || model), same top token, change of p"),
	ROW(kl_ref_kv_type, ST_ENUM, START, .choices = kv_type_names,
	    .metavar = "TYPE", .help = "the memory type of REF (default F32)"),
	ROW(kl_ref_compute, ST_ENUM, START, .choices = compute_names_of,
	    .metavar = "TYPE",
	    .help = "the compute of REF: f32 (default) or bf16"),
	ROW(html, ST_STRING, CLI, .arg = ARG_FILE, .metavar = "OUT",
	    .help = "with --score: also write the text as an HTML\n"
	    "page to OUT ('-' = stdout, then alone there):\n"
	    "each token coloured by its rank, the surprisal\n"
	    "plotted, the summary and the settings"),
	ROW(ids, ST_BOOL, CLI,
	    .help = "the --score or --tokenize input is token ids\n"
	    "(--tokenize --ids turns ids back into text)"),
	ROW(adapt, ST_FLOAT, START, .max = TXL_ADAPT_LR_MAX, .metavar = "LR",
	    .help = "learn from the text read (--score, --prime, the\n"
	    "prompt): a gradient step on the output layer\n"
	    "after each segment, learning rate LR (default 0\n"
	    "= off)"),

	HEAD("Output:"),
	ROW(json, ST_BOOL, T,
	    .help = "JSON lines: one object per token, then a summary"),
	ROW(stats, ST_BOOL, T,
	    .theirs_off = "log-disable",
	    .help = "token counts, speed and memory fill on stderr"),
	ROW(progress, ST_BOOL, CLI,
	    .help = "the progress line (of scoring, of priming, of\n"
	    "generation into a file) also where stderr is no\n"
	    "terminal: a line every 5 s, for a log"),
	/* "--color" alone is "--color=always" */
	ROW(color, ST_ENUM, T, .alias = "colour", .choices = color_names_of,
	    .bare = "always", .negated = "never", .metavar = "[=WHEN]",
	    .help = "colour the prompt (and the REPL's output):\n"
	    "auto, always, never"),
	ROW(unbuffered, ST_BOOL, T, .short_opt = 'u',
	    .help = "flush after every token even into a pipe"),
	ROW(final_newline, ST_BOOL, T,
	    .help = "end a text that has no final newline with one\n"
	    "(default, on a terminal and in a pipe alike;\n"
	    "the --no- form writes the generated bytes only)"),

	HEAD("Configuration and information:"),
	BOTH(config, ST_STRING, CLI, .short_opt = 'c', .action = ACT_CONFIG,
	    .arg = ARG_CONFIG, .metavar = "FILE",
	    .help = "read settings from a JSON file"),
	ROW(print_config, ST_BOOL, CLI, .action = ACT_ONCE,
	    .help = "print the effective settings as JSON, with\n"
	    "where each came from, and exit"),
	ROW(info, ST_BOOL, CLI, .action = ACT_ONCE,
	    .help = "describe the model (--json: as JSON) and exit"),
	ROW(list_models, ST_BOOL, CLI, .action = ACT_ONCE,
	    .help = "list the models -m NAME finds (--json: as JSON\n"
	    "lines) and exit"),
	ACTION("help", 'h', ACT_HELP, PROG_BOTH, "show this help and exit"),
	ACTION("version", 'V', ACT_VERSION, PROG_BOTH,
	       "show the version and exit"),
	ACTION("list_types", 0, ACT_LIST_TYPES, PROG_BOTH,
	       "list the --kv-type types, one a line, and exit"),
	ACTION("list_options", 0, ACT_LIST_OPTIONS, PROG_BOTH,
	       "list the options, one a line with what their\n"
	       "values are (for the completion), and exit"),
};
const int n_settings = (int)(sizeof(settings) / sizeof(settings[0]));
_Static_assert(sizeof(settings) / sizeof(settings[0]) <= SETTINGS_MAX,
	       "raise SETTINGS_MAX");

const char *const *
setting_names(const struct setting *s, int *n)
{
	return s->choices(n);
}

bool
setting_negatable(const struct setting *s)
{
	return s->action == ACT_SET && (s->type == ST_BOOL ||
		s->type == ST_TRIBOOL || s->negated);
}

const char *
setting_option(const struct setting *s, bool neg, bool alias, char *buf,
	       size_t len)
{
	int n = snprintf(buf, len, "%s%s", neg ? "no-" : "",
			 alias ? s->alias : s->key);

	for (int i = 0; i < n && (size_t)i < len; i++)
		if (buf[i] == '_')
			buf[i] = '-';
	return buf;
}

static const char *const origin_names[] = {
	"default", "model", "state file", "config file", "command line",
	"/set"
};

const char *
origin_name(enum origin from)
{
	return origin_names[from];
}

enum origin
setting_origin(const struct setting *s, const struct txlgen_options *o)
{
	return (enum origin)o->origin[s - settings];
}

void
setting_set_origin(const struct setting *s, struct txlgen_options *o,
		   enum origin from)
{
	o->origin[s - settings] = (unsigned char)from;
}

void
strlist_add(struct strlist *l, const char *s)
{
	l->v = xrealloc(l->v, (size_t)(l->n + 1) * sizeof(*l->v));
	l->v[l->n++] = xstrdup(s);
}

void
strlist_clear(struct strlist *l)
{
	for (int i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

/* A float default as the short decimal it was written as (0.8, not
 * 0.800000011920929), so that --print-config shows what a user types. */
static double
tidy(float f)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%.7g", (double)f);
	return strtod(buf, NULL);
}

void
options_init(struct txlgen_options *o)
{
	struct txl_sampler_params sp = txl_sampler_params_default();

	memset(o, 0, sizeof(*o));
	o->n_predict = 256;
	o->temp = tidy(sp.temp);
	o->top_k = sp.top_k;
	o->top_p = tidy(sp.top_p);
	o->min_p = tidy(sp.min_p);
	o->repeat_penalty = tidy(sp.repeat_penalty);
	o->repeat_last_n = 64;
	o->typical = tidy(sp.typical_p);
	o->mirostat_eta = tidy(sp.mirostat_eta);
	o->seed = SEED_RANDOM;
	o->mem_len = TXL_FROM_MODEL;
	o->seg_len = TXL_FROM_MODEL;
	o->clamp_len = TXL_FROM_MODEL;
	o->same_length = TXL_FROM_MODEL;
	o->mem_init = TXL_FROM_MODEL;
	o->score_stride = -1;
	o->color = COLOR_AUTO;
	o->final_newline = true;
	o->n_samples = 1;
	o->first_line = 1;
	o->streams = 8;
}

struct txl_sampler_params
options_sampler_params(const struct txlgen_options *o, uint64_t seed)
{
	struct txl_sampler_params sp = txl_sampler_params_default();

	sp.temp = (float)o->temp;
	sp.top_k = o->top_k;
	sp.top_p = (float)o->top_p;
	sp.min_p = (float)o->min_p;
	sp.repeat_penalty = (float)o->repeat_penalty;
	sp.repeat_last_n = o->repeat_last_n;
	sp.frequency_penalty = (float)o->frequency_penalty;
	sp.presence_penalty = (float)o->presence_penalty;
	sp.typical_p = (float)o->typical;
	sp.mirostat_tau = (float)o->mirostat_tau;
	sp.mirostat_eta = (float)o->mirostat_eta;
	sp.seed = seed;
	return sp;
}

void
options_free(struct txlgen_options *o)
{
	for (int i = 0; i < n_settings; i++) {
		void *p;

		if (settings[i].in_server && !o->server)
			continue;
		p = setting_ptr(&settings[i], o);

		if (settings[i].type == ST_STRING) {
			free(*(char **)p);
			*(char **)p = NULL;
		} else if (settings[i].type == ST_LIST) {
			strlist_clear(p);
		}
	}
}

const struct setting *
setting_find(const char *key)
{
	char k[64];
	size_t i;

	for (i = 0; key[i] && i < sizeof(k) - 1; i++)
		k[i] = key[i] == '-' ? '_' : key[i];
	k[i] = '\0';
	if (key[i])
		return NULL;
	for (int j = 0; j < n_settings; j++)
		if (setting_is_key(&settings[j]) && !strcmp(settings[j].key, k))
			return &settings[j];
	return NULL;
}

/* "@p value is out of range (LOW .. HIGH)", the bounds of @p s. */
static void
range_error(const struct setting *s, const char *value, char *err,
	    size_t errlen)
{
	char lo[32], hi[32];

	fmt_number(s->min, lo, sizeof(lo));
	fmt_number(s->max, hi, sizeof(hi));
	snprintf(err, errlen, "%s is out of range (%s%s .. %s%s)", value,
		 s->min_exclusive ? "> " : "", lo, hi,
		 s->type == ST_SEED ? ", or -1 for a random seed" : "");
}

bool
setting_check_range(const struct setting *s, double v, char *err,
		    size_t errlen)
{
	bool low = s->min_exclusive ? !(v > s->min) : !(v >= s->min);
	char a[32];

	if (isnan(v) || low || v > s->max) {
		range_error(s, fmt_number(v, a, sizeof(a)), err, errlen);
		return false;
	}
	return true;
}

/* A whole number: 0, or -1 if @p val is not one, 1 if it is one too
 * large for a long long (and for every setting). */
static int
parse_integer(const char *val, long long *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(val, &end, 10);
	if (end == val || *end != '\0')
		return -1;
	if (errno == ERANGE)
		return 1;
	*out = v;
	return 0;
}

void
setting_set_bool(const struct setting *s, struct txlgen_options *o, bool v)
{
	if (s->type == ST_BOOL)
		*(bool *)setting_ptr(s, o) = v;
	else
		*(int *)setting_ptr(s, o) = v;
}

bool
setting_set_integer(const struct setting *s, struct txlgen_options *o,
		    long long v, const char *text, char *err, size_t errlen)
{
	char buf[32];

	if (s->type == ST_SEED && v == -1) {
		/* llama.cpp's habit: -1 is a random seed */
		*(int64_t *)setting_ptr(s, o) = SEED_RANDOM;
		return true;
	}
	/* the bounds are whole numbers below 2^53, exact in a double */
	if (v < (long long)s->min || (s->min_exclusive && v == s->min) ||
	    v > (long long)s->max) {
		if (!text) {
			snprintf(buf, sizeof(buf), "%lld", v);
			text = buf;
		}
		range_error(s, text, err, errlen);
		return false;
	}
	if (s->type == ST_INT)
		*(int *)setting_ptr(s, o) = (int)v;
	else if (s->type == ST_SIZE)
		*(size_t *)setting_ptr(s, o) = (size_t)v;
	else
		*(int64_t *)setting_ptr(s, o) = (int64_t)v;
	return true;
}

/* Reset a setting to null; false if it has none. */
static bool
setting_reset(const struct setting *s, struct txlgen_options *o)
{
	void *p = setting_ptr(s, o);

	switch (s->type) {
	case ST_STRING:
		free(*(char **)p);
		*(char **)p = NULL;
		return true;
	case ST_LIST:
		strlist_clear(p);
		return true;
	case ST_TRIBOOL:
	case ST_INT:
	case ST_ENUM:
		if (!s->nullable)
			return false;
		*(int *)p = -1;
		return true;
	case ST_SEED:
		*(int64_t *)p = SEED_RANDOM;
		return true;
	default:
		return false;
	}
}

bool
setting_parse(const struct setting *s, struct txlgen_options *o,
	      const char *val, char *err, size_t errlen)
{
	void *p = setting_ptr(s, o);
	double d;
	int k;
	char *end;
	long long iv;

	if (!val) {
		if (setting_reset(s, o))
			return true;
		snprintf(err, errlen, "needs a value");
		return false;
	}

	switch (s->type) {
	case ST_BOOL:
	case ST_TRIBOOL:
		if (!strcmp(val, "true") || !strcmp(val, "1") ||
		    !strcmp(val, "on") || !strcmp(val, "yes"))
			d = 1;
		else if (!strcmp(val, "false") || !strcmp(val, "0") ||
			 !strcmp(val, "off") || !strcmp(val, "no"))
			d = 0;
		else {
			snprintf(err, errlen, "'%s' is not a boolean "
				 "(true or false)", val);
			return false;
		}
		setting_set_bool(s, o, d != 0);
		return true;
	case ST_INT:
	case ST_INT64:
	case ST_SIZE:
	case ST_SEED:
		k = parse_integer(val, &iv);
		if (k) {
			if (k < 0)
				snprintf(err, errlen, "'%s' is not an integer",
					 val);
			else
				range_error(s, val, err, errlen);
			return false;
		}
		return setting_set_integer(s, o, iv, val, err, errlen);
	case ST_FLOAT:
		errno = 0;
		d = strtod(val, &end);
		if (end == val || *end != '\0' || errno == ERANGE ||
		    !isfinite(d)) {
			snprintf(err, errlen, "'%s' is not a number", val);
			return false;
		}
		if (!setting_check_range(s, d, err, errlen))
			return false;
		*(double *)p = d;
		return true;
	case ST_STRING:
		if (!*val && strcmp(s->key, "text")) {
			snprintf(err, errlen, "must not be empty");
			return false;
		}
		free(*(char **)p);
		*(char **)p = xstrdup(val);
		return true;
	case ST_LIST:
		if (!*val) {
			snprintf(err, errlen, "must not be empty");
			return false;
		}
		if (!utf8_valid(val, strlen(val))) {
			snprintf(err, errlen, "is not valid UTF-8");
			return false;
		}
		strlist_add(p, val);
		return true;
	case ST_ENUM: {
		int n;
		const char *const *names = setting_names(s, &n);

		/* any case, as "q8_0" or "BF16" */
		for (int i = 0; i < n; i++) {
			if (names[i] && !strcasecmp(val, names[i])) {
				*(int *)p = i;
				return true;
			}
		}
		int at = snprintf(err, errlen, "'%s' is not one of", val);
		for (int i = 0, listed = 0; i < n && at >= 0 &&
		     (size_t)at < errlen; i++)
			if (names[i])
				at += snprintf(err + at, errlen - (size_t)at,
					       "%s %s", listed++ ? "," : "",
					       names[i]);
		return false;
	}
	case ST_NONE:
		break;
	}
	return false;
}

void
setting_format(const struct setting *s, const struct txlgen_options *o,
	       char *buf, size_t len)
{
	const void *p = setting_ptr(s, o);
	const struct strlist *l;
	size_t at;

	switch (s->type) {
	case ST_BOOL:
		snprintf(buf, len, "%s", *(const bool *)p ? "true" : "false");
		break;
	case ST_TRIBOOL:
		snprintf(buf, len, "%s", *(const int *)p < 0 ? "null" :
			 *(const int *)p ? "true" : "false");
		break;
	case ST_INT:
		if (s->nullable && *(const int *)p < 0)
			snprintf(buf, len, "null");
		else
			snprintf(buf, len, "%d", *(const int *)p);
		break;
	case ST_SEED:
	case ST_INT64:
		if (*(const int64_t *)p < 0)
			snprintf(buf, len, "null");
		else
			snprintf(buf, len, "%lld",
				 (long long)*(const int64_t *)p);
		break;
	case ST_SIZE:
		snprintf(buf, len, "%zu", *(const size_t *)p);
		break;
	case ST_FLOAT:
		snprintf(buf, len, "%g", *(const double *)p);
		break;
	case ST_STRING:
		snprintf(buf, len, "%s", *(char *const *)p ?
			 *(char *const *)p : "null");
		break;
	case ST_LIST:
		l = p;
		at = 0;
		buf[0] = '\0';
		for (int i = 0; i < l->n && at < len; i++)
			at += (size_t)snprintf(buf + at, len - at, "%s\"%s\"",
					       i ? ", " : "", l->v[i]);
		if (!l->n)
			snprintf(buf, len, "(none)");
		break;
	case ST_ENUM: {
		int n;
		if (*(const int *)p < 0)
			snprintf(buf, len, "null");
		else
			snprintf(buf, len, "%s",
				 setting_names(s, &n)[*(const int *)p]);
		break;
	}
	case ST_NONE:
		buf[0] = '\0';
		break;
	}
}
