/* SPDX-License-Identifier: MIT */
/*
 * optable.c - every command-line option, once: its names, argument,
 * what it sets and its line in --help.  cli.c builds getopt's table from
 * it (with the --no- form of every boolean) and usage.c the help.
 */
#include <getopt.h>
#include <stddef.h>

#include "cli.h"

#define OFF(field) offsetof(struct txlgen_options, field)
#define HEAD(title) { .action = OPT_HELP, .help = title }
#define SET(name_, s, key_, meta, help_) \
	{ .name = name_, .short_opt = s, .has_arg = required_argument, \
	  .action = OPT_SETTING, .key = key_, .metavar = meta, .help = help_ }
#define BOOL(name_, s, key_, help_) \
	{ .name = name_, .short_opt = s, .has_arg = no_argument, \
	  .action = OPT_BOOL, .key = key_, .negatable = true, .help = help_ }
#define FLAG(name_, s, field, neg, help_) \
	{ .name = name_, .short_opt = s, .has_arg = no_argument, \
	  .action = OPT_FLAG, .offset = OFF(field), .negatable = neg, \
	  .help = help_ }
#define STRING(name_, field, meta, help_) \
	{ .name = name_, .has_arg = required_argument, .action = OPT_PATH, \
	  .offset = OFF(field), .metavar = meta, .help = help_ }
#define PATH(name_, field, help_) STRING(name_, field, "FILE", help_)
#define NUMBER(name_, field, lo, hi, meta, help_) \
	{ .name = name_, .has_arg = required_argument, .action = OPT_NUMBER, \
	  .offset = OFF(field), .metavar = meta, .help = help_, .min = lo, \
	  .max = hi }
/* --color and --colour: "--color" alone is "--color=always" */
#define COLOR(name_, help_) \
	{ .name = name_, .has_arg = optional_argument, \
	  .action = OPT_SETTING, .key = "color", .negatable = true, \
	  .metavar = "[=WHEN]", .help = help_ }
#define ACTION(name_, s, act, meta, help_) \
	{ .name = name_, .short_opt = s, .has_arg = meta ? required_argument \
	  : no_argument, .action = act, .metavar = meta, .help = help_ }

const struct cli_opt cli_opts[] = {
	HEAD("Model and input:"),
	SET("model", 'm', "model", "MODEL",
	    "model file, or the name of one along the model\n"
	    "path (--list-models; default: $TXLGEN_MODEL,\n"
	    "else sotu)"),
	SET("prompt", 'f', "prompt", "FILE",
	    "read the prompt from FILE ('-' = stdin);\n"
	    "also spelt --file FILE"),
	SET("file", 0, "prompt", "FILE", NULL),
	SET("text", 'p', "text", "STRING", "use STRING as the prompt"),
	BOOL("echo", 0, "echo", "print the prompt before the continuation"),
	SET("prime", 0, "prime", "FILE",
	    "feed FILE into the memory first (repeatable;\n"
	    "with --state-out and no prompt: only that)"),
	BOOL("read-all", 0, "read_all",
	     "compute every token of the prompt and --prime\n"
	     "files (default: only the last ones, which alone\n"
	     "make the memory: the same state, sooner)"),
	SET("state-in", 0, "state_in", "FILE",
	    "start from a saved memory state (with its\n"
	    "mem_len unless --mem-len is given)"),
	SET("state-out", 0, "state_out", "FILE",
	    "save the memory state at the end"),
	BOOL("mmap", 0, "mmap",
	     "map the model file (default: read it into memory,\n"
	     "where tokens come faster)"),
	FLAG("interactive", 'i', interactive, true,
	     "interactive session (REPL)"),

	HEAD("Length and stopping:"),
	SET("n-predict", 'n', "n_predict", "N",
	    "tokens to generate (default 256; -1 = no limit)"),
	SET("stop", 0, "stop", "STRING", "stop before STRING (repeatable)"),
	BOOL("ignore-eos", 0, "ignore_eos",
	     "never generate the end-of-sequence token"),
	NUMBER("n-samples", n_samples, 1, N_STREAMS_MAX, "N",
	       "N continuations of the prompt, read once, each\n"
	       "with its own seed, -n and --stop, computed\n"
	       "together; in the text each but the first after\n"
	       "a line '--- sample I ---' (I from 0)"),

	HEAD("Sampling (a model file may recommend other defaults):"),
	SET("temp", 0, "temp", "T", "temperature (default 0.8; 0 = greedy)"),
	SET("top-k", 0, "top_k", "K",
	    "keep the K most likely tokens (default 40; 0 = off)"),
	SET("top-p", 0, "top_p", "P",
	    "nucleus sampling (default 0.95; 1 = off)"),
	SET("min-p", 0, "min_p", "P",
	    "drop tokens below P x the top one (default 0.05)"),
	SET("repeat-penalty", 0, "repeat_penalty", "X",
	    "penalise recent tokens (default 1 = off)"),
	SET("repeat-last-n", 0, "repeat_last_n", "N",
	    "tokens the penalty looks back (default 64)"),
	SET("seed", 's', "seed", "N",
	    "random seed (default or -1: a new one each run)"),

	HEAD("Transformer-XL (defaults from the model):"),
	SET("mem-len", 0, "mem_len", "N", "positions kept in the memory"),
	SET("seg-len", 0, "seg_len", "N", "tokens per segment"),
	SET("clamp-len", 0, "clamp_len", "N",
	    "clamp relative distances to N (0 = none)"),
	BOOL("same-length", 0, "same_length",
	     "every position sees the same number of keys"),
	SET("mem-init", 0, "mem_init", "HOW",
	    "the memory starts empty (the PyTorch code's\n"
	    "evaluation) or as mem_len zero states (zeros:\n"
	    "the TensorFlow code's and Hugging Face's;\n"
	    "models of that origin recommend it)"),
	SET("threads", 't', "threads", "N",
	    "threads of the kernels and of OpenBLAS\n"
	    "(default 0 = one per CPU; where other work keeps\n"
	    "the CPUs busy, fewer are faster: -t 1 can be\n"
	    "twice as fast on 2 busy cores)"),
	SET("kv-type", 0, "kv_type", "TYPE",
	    "the storage type of the memory's K, V and R\n"
	    "(default F32, exact; --list-types lists them,\n"
	    "txlgen(1) says what each trades; any case)"),
	SET("compute", 0, "compute", "TYPE",
	    "products of segments with BF16 weights in f32\n"
	    "(default: exact) or bf16 (activations rounded\n"
	    "to BF16; twice as fast with AVX512_BF16)"),

	HEAD("Scoring and tokens:"),
	PATH("score", score,
	     "print NLL, perplexity and bits per byte of FILE\n"
	     "('-' = stdin), read as a stream"),
	PATH("score-docs", score_docs,
	     "score each line of FILE ('-' = stdin) as a\n"
	     "document of its own, from an empty memory (or\n"
	     "the --prime one): a JSON object per document, in\n"
	     "input order, read as a stream"),
	STRING("field", field, "NAME",
	       "--score-docs reads JSON Lines: score the string\n"
	       "NAME of each object (its \"id\" goes with it)"),
	FLAG("strict", 0, strict, true,
	     "--score-docs: a malformed line ends the run\n"
	     "(exit status 1) instead of being skipped"),
	NUMBER("first-line", first_line, 1, SEED_MAX, "N",
	       "--score-docs: the number of the input's first\n"
	       "line (default 1), for a part of a larger input"),
	NUMBER("streams", streams, 1, N_STREAMS_MAX, "N",
	       "--score-docs: documents scored at once,\n"
	       "computed together (default 8)"),
	PATH("tokenize", tokenize,
	     "print the token ids of FILE ('-' = stdin), one\n"
	     "line per line; with --json also the text of each"),
	SET("score-stride", 0, "score_stride", "S",
	    "models without memory (attn_type 2, 3): score\n"
	    "in windows of seg_len tokens, S predictions per\n"
	    "window (1 = the vanilla Transformer's protocol;\n"
	    "default seg_len = eval.py's segments)"),
	STRING("kl-ref", kl_ref, "REF",
	       "with --score: score with the model REF too (a\n"
	       "file or a name, of the same vocabulary) in the\n"
	       "same pass and compare each token's distributions:\n"
	       "KL(REF || model), same top token, change of p"),
	SET("kl-ref-kv-type", 0, "kl_ref_kv_type", "TYPE",
	    "the memory type of REF (default F32)"),
	SET("kl-ref-compute", 0, "kl_ref_compute", "TYPE",
	    "the compute of REF: f32 (default) or bf16"),
	FLAG("ids", 0, ids, true,
	     "the --score or --tokenize input is token ids\n"
	     "(--tokenize --ids turns ids back into text)"),
	SET("adapt", 0, "adapt", "LR",
	    "learn from the text read (--score, --prime, the\n"
	    "prompt): a gradient step on the output layer\n"
	    "after each segment, learning rate LR (default 0\n"
	    "= off)"),

	HEAD("Output:"),
	BOOL("json", 0, "json",
	     "JSON lines: one object per token, then a summary"),
	BOOL("stats", 0, "stats",
	     "token counts, speed and memory fill on stderr"),
	COLOR("color", "colour the prompt (and the REPL's output):\n"
	      "auto, always, never"),
	COLOR("colour", NULL),
	BOOL("unbuffered", 'u', "unbuffered",
	     "flush after every token even into a pipe"),
	BOOL("final-newline", 0, "final_newline",
	     "end a text that has no final newline with one\n"
	     "(default, on a terminal and in a pipe alike;\n"
	     "the --no- form writes the generated bytes only)"),

	HEAD("Configuration and information:"),
	ACTION("config", 'c', OPT_CONFIG, "FILE",
	       "read settings from a JSON file"),
	FLAG("print-config", 0, print_config, false,
	     "print the effective settings as JSON, with\n"
	     "where each came from, and exit"),
	FLAG("info", 0, info, false,
	     "describe the model (--json: as JSON) and exit"),
	FLAG("list-models", 0, list_models, false,
	     "list the models -m NAME finds (--json: as JSON\n"
	     "lines) and exit"),
	ACTION("help", 'h', OPT_HELP, NULL, "show this help and exit"),
	ACTION("version", 'V', OPT_VERSION, NULL, "show the version and exit"),
	ACTION("list-types", 0, OPT_LIST_TYPES, NULL,
	       "list the --kv-type types, one a line, and exit"),
};
const int n_cli_opts = (int)(sizeof(cli_opts) / sizeof(cli_opts[0]));

const char cli_help_footer[] =
"A model NAME is NAME.bin in $TXLGEN_MODEL_PATH (directories separated by\n"
"colons), ~/.local/share/txlgen/models ($XDG_DATA_HOME/txlgen/models, where\n"
"txlgen-get installs), or the installed share/txlgen.\n"
"\n"
"Every boolean option has a --no- form (--no-echo, --no-json, --no-color,\n"
"...) that overrides a config file.  Exit status: 0 ok, 1 runtime error,\n"
"2 usage error, 3 bad model or config, 130 interrupted (SIGINT), 143\n"
"terminated (SIGTERM), 129 hangup (SIGHUP).  See txlgen(1).\n";
