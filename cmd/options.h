/* SPDX-License-Identifier: MIT */
/*
 * options.h - txlgen's settings: one table shared by the command line,
 * the JSON config file, --print-config and the REPL's /set and /show.
 *
 * Precedence: built-in defaults < config file < command line.  Values
 * that default to the model's own (mem_len, ...) are "null" in JSON.
 */
#ifndef TXLGEN_OPTIONS_H
#define TXLGEN_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes, documented in txlgen(1). */
enum txlgen_exit {
	EXIT_OK = 0,
	EXIT_RUNTIME = 1,     /* I/O error, bad input, write failure */
	EXIT_USAGE = 2,       /* bad option or value */
	EXIT_BADMODEL = 3,    /* bad or missing model, bad config file */
	EXIT_INTERRUPTED = 130,
};

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

struct txlgen_options {
	/* settable from the config file (see the table in options.c) */
	char *model;          /* NULL: TXLGEN_MODEL or the default model */
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
	int repeat_last_n;
	int64_t seed;         /* SEED_RANDOM or 0..SEED_MAX */
	int mem_len;          /* -1 (TXL_FROM_MODEL) = the model's value */
	int seg_len;          /* -1 = the model's tgt_len */
	int clamp_len;        /* -1 = the model's; 0 = no clamping */
	int same_length;      /* -1 = the model's, 0, 1 */
	int threads;          /* 0 = OpenBLAS's default */
	double adapt;         /* output-layer learning rate while reading
				 --score, --prime and prompt text; 0 = off */
	bool json;            /* NDJSON events instead of text */
	bool stats;           /* statistics on stderr */
	int color;            /* enum color_mode */
	bool unbuffered;      /* flush after every token even into a pipe */
	struct strlist prime; /* files fed into the memory first */
	char *state_in;       /* memory state to start from */
	char *state_out;      /* memory state saved at the end */

	/* command line only */
	char *config;         /* --config FILE */
	char *score;          /* --score FILE */
	bool ids;             /* --ids: --score input is token ids */
	bool interactive;     /* -i */
	bool print_config;    /* --print-config */
};

enum setting_type {
	ST_BOOL,      /* bool */
	ST_TRIBOOL,   /* int: -1 null (model's value), 0, 1 */
	ST_INT,       /* int; nullable ones use -1 for null */
	ST_FLOAT,     /* double */
	ST_SEED,      /* int64_t, SEED_RANDOM for null */
	ST_STRING,    /* char *, NULL for null */
	ST_LIST,      /* struct strlist */
	ST_COLOR,     /* int, enum color_mode */
};

/* Where a setting takes effect when the REPL changes it. */
enum setting_scope {
	SCOPE_START,   /* only at start-up: not settable by /set */
	SCOPE_TURN,    /* the next generation */
	SCOPE_SESSION, /* shapes the session: recreated */
};

struct setting {
	const char *key;        /* JSON key and /set name */
	const char *opt;        /* the long option, for messages */
	enum setting_type type;
	size_t offset;          /* into struct txlgen_options */
	bool nullable;
	bool min_exclusive;     /* value must be > min rather than >= */
	double min, max;
	enum setting_scope scope;
};

extern const struct setting settings[];
extern const int n_settings;

/** The setting named @p key ('-' and '_' alike), or NULL. */
const struct setting *setting_find(const char *key);

/**
 * Set @p s from the text @p val (command line, /set).  On error returns
 * false and writes the reason ("'x' is not a number") to @p err.
 * Lists get @p val appended; @p val NULL resets a nullable setting.
 */
bool setting_parse(const struct setting *s, struct txlgen_options *o,
		   const char *val, char *err, size_t errlen);

/** The setting's value as text, for /show and messages. */
void setting_format(const struct setting *s, const struct txlgen_options *o,
		    char *buf, size_t len);

/** Check @p v against the range of @p s; reason in @p err. */
bool setting_check_range(const struct setting *s, double v, char *err,
			 size_t errlen);

void options_init(struct txlgen_options *o);
void options_free(struct txlgen_options *o);

void strlist_add(struct strlist *l, const char *s);
void strlist_clear(struct strlist *l);

/**
 * Parse the command line: load --config first, then apply the options
 * over it.  Returns EXIT_OK, or the exit code after printing the error;
 * *@p done is set when the program should exit with that code (--help,
 * --version, errors).
 */
int options_parse(struct txlgen_options *o, int argc, char **argv,
		  bool *done);

/** Print the usage summary (--help) to @p f. */
void options_usage(FILE *f);

/** Print "txlgen: MSG" and a newline to stderr, printf-style. */
void errmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* TXLGEN_OPTIONS_H */
