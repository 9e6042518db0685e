/* SPDX-License-Identifier: MIT */
/*
 * settings.h - txlgen's options and settings: one table shared by the
 * command line and its --help, the JSON config file, a model's recommended
 * settings, --print-config, the REPL's /set and /show and the completion.
 *
 * Precedence: built-in defaults < the model's recommended settings <
 * config file < command line.  Values that default to the model's own
 * (mem_len, ...) are "null" in JSON.
 */
#ifndef TXLGEN_SETTINGS_H
#define TXLGEN_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum color_mode {
	COLOR_AUTO = 0,
	COLOR_ALWAYS = 1,
	COLOR_NEVER = 2,
};

struct strlist {
	char **v;
	int n;
};

#define SEED_RANDOM (-1)   /* seed not set: pick one at start-up */
#define SEED_MAX (((int64_t)1 << 53) - 1) /* exact in a JSON number */

/* Where a setting's value came from (--print-config shows it). */
enum origin {
	ORIGIN_DEFAULT = 0,
	ORIGIN_MODEL,      /* the model file's recommended settings */
	ORIGIN_STATE,      /* --state-in's memory (mem_len) */
	ORIGIN_CONFIG,     /* --config FILE */
	ORIGIN_CLI,        /* the command line */
	ORIGIN_SET,        /* the REPL's /set */
};

#define SETTINGS_MAX 128 /* rows of the table (settings.c) */

/* The programs an option is of (struct setting's progs). */
#define PROG_TXLGEN 1u
#define PROG_SERVER 2u
#define PROG_BOTH (PROG_TXLGEN | PROG_SERVER)

/* The program running, PROG_TXLGEN unless txlgen-server sets it first:
 * the options, config keys and /set names are those of its rows. */
extern unsigned settings_prog;

/** The program's name: "txlgen" or "txlgen-server". */
const char *prog_name(unsigned prog);

struct txlgen_options {
	/* each field is a row of the table in settings.c; these are
	 * settable from the config file */
	char *model;          /* a file or a name along the model path;
				 NULL: TXLGEN_MODEL or the default model */
	char *prompt;         /* prompt file; "-" = stdin; NULL = none */
	char *text;           /* prompt text; NULL = none */
	bool echo;            /* print the prompt before the continuation */
	int n_predict;        /* tokens to generate; -1 = until stopped */
	struct strlist stop;  /* stop strings (not printed) */
	bool ignore_eos;      /* never sample the end-of-sequence token */
	double temp;          /* 0 = greedy */
	int top_k;            /* 0 = off */
	double top_p;         /* 1 = off */
	double min_p;         /* 0 = off */
	double repeat_penalty; /* 1 = off */
	double frequency_penalty; /* OpenAI's; 0 = off */
	double presence_penalty;  /* OpenAI's; 0 = off */
	double typical;       /* locally typical sampling's mass; 1 = off */
	double mirostat_tau;  /* mirostat 2's target surprise; 0 = off */
	double mirostat_eta;  /* its learning rate */
	struct strlist logit_bias; /* "ID=BIAS" or "TEXT=BIAS" */
	int repeat_last_n;
	int64_t seed;         /* SEED_RANDOM or 0..SEED_MAX */
	int mem_len;          /* -1 (TXL_FROM_MODEL) = the model's value */
	int seg_len;          /* -1 = the model's tgt_len */
	int clamp_len;        /* -1 = the model's; 0 = no clamping */
	int same_length;      /* -1 = the model's, 0, 1 */
	int threads;          /* 0 = one per CPU */
	int kv_type;          /* enum txl_kv_type of the memory */
	int mem_init;         /* -1 = the model's, enum txl_mem_init */
	int compute;          /* enum txl_compute of segments' products */
	int kl_ref_kv_type;   /* --kl-ref's memory type (default F32) */
	int kl_ref_compute;   /* --kl-ref's compute (default f32) */
	int score_stride;     /* --score of a model without memory: tokens
				 predicted per window; -1 = seg_len */
	double adapt;         /* output-layer learning rate while reading
				 --score, --prime and prompt text; 0 = off */
	bool read_all;        /* compute every token of a prompt or --prime
				 file, not only its receptive field */
	bool json;            /* NDJSON events instead of text */
	bool stats;           /* statistics on stderr */
	int color;            /* enum color_mode */
	bool unbuffered;      /* flush after every token even into a pipe */
	bool final_newline;   /* end a text without a newline with one */
	bool mmap;            /* map the model file (default: read it whole) */
	struct strlist prime; /* files fed into the memory first */
	char *state_in;       /* memory state to start from */
	char *state_out;      /* memory state saved at the end */

	unsigned char origin[SETTINGS_MAX]; /* enum origin, per setting */
	void *server;         /* txlgen-server's struct srv_opts, where its
				 own rows (struct setting's in_server) are;
				 NULL in txlgen */

	/* command line only */
	char *config;         /* --config FILE */
	char *score;          /* --score FILE */
	char *tokenize;       /* --tokenize FILE */
	bool ids;             /* --ids: the input is token ids */
	bool interactive;     /* -i */
	bool print_config;    /* --print-config */
	bool info;            /* --info */
	bool list_models;     /* --list-models */
	int64_t n_samples;    /* --n-samples: continuations of one prompt */
	char *score_docs;     /* --score-docs FILE */
	char *field;          /* --field NAME: the documents are JSON Lines */
	bool strict;          /* --strict: a malformed document ends the run */
	int64_t first_line;   /* --first-line: the number of the input's
				 first line */
	int64_t streams;      /* --streams: documents scored at once */
	char *kl_ref;         /* --kl-ref MODEL: --score compares with it */
	char *html;           /* --html OUT: --score's page; "-" = stdout */
	char *part;           /* --part K/N: --score scores that part */
	int64_t part_k, part_n; /* ... parsed; 0 without --part */
	struct strlist score_merge; /* --score-merge PART.json...: the parts */
	bool progress;        /* --progress: the progress line in a log too */
};

/* The most continuations of --n-samples, and documents in flight of
 * --score-docs --streams. */
#define N_STREAMS_MAX 1024

enum setting_type {
	ST_NONE,      /* a heading of --help, or an action (--help, ...) */
	ST_BOOL,      /* bool */
	ST_TRIBOOL,   /* int: -1 null (model's value), 0, 1 */
	ST_INT,       /* int; nullable ones use -1 for null */
	ST_INT64,     /* int64_t */
	ST_SIZE,      /* size_t */
	ST_FLOAT,     /* double */
	ST_SEED,      /* int64_t, SEED_RANDOM for null */
	ST_STRING,    /* char *, NULL for null */
	ST_LIST,      /* struct strlist */
	ST_ENUM,      /* int: the index of a name of choices(); nullable
			 ones use -1 for null */
};

/* Where a setting takes effect when the REPL changes it. */
enum setting_scope {
	SCOPE_CLI,     /* an option of the command line only: no config
			  key, not settable by /set */
	SCOPE_START,   /* only at start-up: not settable by /set */
	SCOPE_TURN,    /* the next generation */
	SCOPE_SESSION, /* shapes the session: recreated */
};

/* What an option does besides setting its value. */
enum setting_action {
	ACT_SET,        /* sets its value (a boolean also has --no-NAME) */
	ACT_ONCE,       /* a boolean without a --no- form (--info, ...) */
	ACT_CONFIG,     /* --config FILE, read before the other options */
	ACT_HELP,
	ACT_VERSION,
	ACT_LIST_TYPES, /* the memory's types, one a line */
	ACT_LIST_OPTIONS, /* every option, one a line (the completion's) */
};

/* What an option's value is, for the completion (--list-options). */
enum setting_arg {
	ARG_TEXT,     /* anything: nothing to complete */
	ARG_FILE,     /* a file */
	ARG_INPUT,    /* a file, or '-' for stdin */
	ARG_MODEL,    /* a file or the name of a model */
	ARG_CONFIG,   /* a JSON file */
};

/*
 * One option: its names, what it sets and how, its range, where the
 * config file and the REPL take it, its completion and its --help.
 * The table (settings.c) lists them in --help's order, with headings.
 */
struct setting {
	const char *key;        /* the field of struct txlgen_options (of
				   struct srv_opts with in_server): the
				   JSON key and /set name; the long option is
				   it with '-' for '_'; NULL for a heading */
	unsigned progs;         /* PROG_TXLGEN, PROG_SERVER or both; a
				   heading's are those of its rows */
	bool in_server;         /* offset is into struct srv_opts */
	const char *alias;      /* another long name, not in --help */
	int short_opt;          /* 0: none */
	enum setting_type type;
	size_t offset;          /* into struct txlgen_options */
	enum setting_scope scope;
	enum setting_action action;
	enum setting_arg arg;
	bool nullable;
	bool min_exclusive;     /* value must be > min rather than >= */
	double min, max;        /* ST_INT, ST_INT64, ST_FLOAT, ST_SEED */
	bool model_may_set;     /* allowed in a model's recommended settings */
	bool from_session;      /* null: the session's (the model's) value,
				   at session_offset of txl_session_params */
	size_t session_offset;
	/* ST_ENUM: its names by value (NULL for a value that is none) */
	const char *const *(*choices)(int *n);
	const char *bare;       /* ST_ENUM: the value of the option given
				   without one ("--color"); NULL: it needs one */
	const char *negated;    /* ST_ENUM: the value of --no-NAME, or NULL */
	const char *theirs;     /* other programs' names for it (llama.cpp's
				   above all), space-separated: "did you
				   mean" answers with this one's */
	const char *theirs_off; /* theirs for its --no- form */
	const char *metavar;    /* "FILE"; "[=WHEN]" for an optional one */
	const char *help;       /* --help's lines; a heading's title */
	const char *help_server; /* txlgen-server's --help, if not help */
};

extern const struct setting settings[];
extern const int n_settings;

/** A setting of the config file and /set (not a heading, action or
 *  option of the command line only). */
static inline bool
setting_is_key(const struct setting *s)
{
	return s->key && s->scope != SCOPE_CLI && (s->progs & settings_prog);
}

/** Whether @p s is an option of the program running. */
static inline bool
setting_is_option(const struct setting *s)
{
	return s->key && (s->progs & settings_prog);
}

/** The setting (setting_is_key()) named @p key ('-' and '_' alike), or
 *  NULL. */
const struct setting *setting_find(const char *key);

/** The long option of @p s ("n-predict"; "no-" before it with @p neg,
 *  its alias with @p alias) in @p buf. */
const char *setting_option(const struct setting *s, bool neg, bool alias,
			   char *buf, size_t len);

/** Whether @p s has a --no- form. */
bool setting_negatable(const struct setting *s);

/** The setting's value in @p o. */
static inline void *
setting_ptr(const struct setting *s, const struct txlgen_options *o)
{
	return (char *)(s->in_server ? o->server : (void *)o) + s->offset;
}

/** Where @p s's value in @p o came from. */
enum origin setting_origin(const struct setting *s,
			   const struct txlgen_options *o);
void setting_set_origin(const struct setting *s, struct txlgen_options *o,
			enum origin from);

/** "default", "model", "config file", "command line" or "/set". */
const char *origin_name(enum origin from);

/**
 * Set @p s from the text @p val (command line, /set).  On error returns
 * false and writes the reason ("'x' is not a number") to @p err.
 * Lists get @p val appended; @p val NULL resets a nullable setting.
 */
bool setting_parse(const struct setting *s, struct txlgen_options *o,
		   const char *val, char *err, size_t errlen);

/** Set an integer setting (ST_INT, ST_SEED: -1 is a random seed) to the
 *  whole number @p v, range checked; reason in @p err, quoting @p text
 *  (the number as the user wrote it; NULL: @p v in decimal). */
bool setting_set_integer(const struct setting *s, struct txlgen_options *o,
			 long long v, const char *text, char *err,
			 size_t errlen);

/** Set a boolean (or tri-state) setting. */
void setting_set_bool(const struct setting *s, struct txlgen_options *o,
		      bool v);

/** The setting's value as text, for /show, /set and messages. */
void setting_format(const struct setting *s, const struct txlgen_options *o,
		    char *buf, size_t len);

/** Check @p v against the range of @p s; reason in @p err. */
bool setting_check_range(const struct setting *s, double v, char *err,
			 size_t errlen);

extern const char *const compute_names[2];	/* by enum txl_compute */
extern const char *const mem_init_names[2];	/* by enum txl_mem_init */
/** The names of an ST_ENUM setting's values by value (NULL for a value
 * that is none), and their number in @p n. */
const char *const *setting_names(const struct setting *s, int *n);

/** The sampling settings of @p o (--temp, --top-k, ...) with seed
 *  @p seed: what txlgen's generations and a server's requests sample
 *  with. */
struct txl_sampler_params options_sampler_params(
	const struct txlgen_options *o, uint64_t seed);

void options_init(struct txlgen_options *o);
void options_free(struct txlgen_options *o);

void strlist_add(struct strlist *l, const char *s);
void strlist_clear(struct strlist *l);

#endif /* TXLGEN_SETTINGS_H */
