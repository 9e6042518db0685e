/* SPDX-License-Identifier: MIT */
/*
 * sessions.c - named sessions: a memory that a request leaves for the
 * next one of the same "session", with the ids of the repeat penalty's
 * window.  The most recently used --max-sessions stay in memory; with
 * --session-dir each is also a state file (ID.state, libtxl's, written
 * atomically, the window's ids in it), so that sessions outlive the
 * server.
 * Everything here runs under the scheduler's lock.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine-model.h"
#include "errors.h"
#include "srv.h"

#define ID_MAX 64

static struct srv_session **all;
static int n_all;
static uint64_t clock_now;

bool
session_id_valid(const char *id)
{
	size_t n = strlen(id);

	if (n == 0 || n > ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = id[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '-'))
			return false;
	}
	return true;
}

static char *
path_of(const char *id, const char *ext)
{
	size_t n = strlen(srv.session_dir) + strlen(id) + strlen(ext) + 3;
	char *p = xrealloc(NULL, n);

	snprintf(p, n, "%s/%s%s", srv.session_dir, id, ext);
	return p;
}

static struct srv_session *
find(const char *id)
{
	for (int i = 0; i < n_all; i++)
		if (!strcmp(all[i]->id, id))
			return all[i];
	return NULL;
}

/* Write @p ss to --session-dir if it changed since.  False with *err
 * (malloc'd; NULL: not wanted) if it could not be: it stays dirty, and
 * in memory until a later save succeeds. */
/* The id of state file @p name into @p id, or false if it is none. */
static bool
state_id(const char *name, char id[ID_MAX + 1])
{
	size_t n = strlen(name);

	if (n <= 6 || n - 6 > ID_MAX || strcmp(name + n - 6, ".state"))
		return false;
	memcpy(id, name, n - 6);
	id[n - 6] = 0;
	return session_id_valid(id);
}

/* Room for one more state file under --max-disk-sessions: the least
 * recently used files of sessions not in memory are removed (a session
 * in memory, clean, is its file: it stays).  False with a reason in
 * @p why if none can go. */
static bool
disk_room(char *why, size_t len)
{
	for (;;) {
		DIR *d = opendir(srv.session_dir);
		struct dirent *de;
		char id[ID_MAX + 1], old[ID_MAX + 1] = "";
		struct timespec t_old = { 0 };
		int n = 0;

		if (!d)
			return true;	/* the write will say why */
		while ((de = readdir(d))) {
			struct stat sb;
			const struct srv_session *ss;

			if (!state_id(de->d_name, id))
				continue;
			n++;
			ss = find(id);
			if ((ss && (ss->s || ss->busy)) ||
			    fstatat(dirfd(d), de->d_name, &sb, 0) != 0)
				continue;
			if (!*old || sb.st_mtim.tv_sec < t_old.tv_sec ||
			    (sb.st_mtim.tv_sec == t_old.tv_sec &&
			     sb.st_mtim.tv_nsec < t_old.tv_nsec)) {
				snprintf(old, sizeof(old), "%s", id);
				t_old = sb.st_mtim;
			}
		}
		closedir(d);
		if (n < srv.max_disk_sessions)
			return true;
		if (!*old) {
			snprintf(why, len, "--max-disk-sessions %d: %d state "
				 "files in --session-dir, all of sessions in "
				 "memory", srv.max_disk_sessions, n);
			return false;
		}
		char *path = path_of(old, ".state");

		if (unlink(path) != 0) {
			snprintf(why, len, "--max-disk-sessions %d: cannot "
				 "remove %s: %s", srv.max_disk_sessions, path,
				 strerror(errno));
			free(path);
			return false;
		}
		errmsg("--max-disk-sessions %d: removed session %s, the least "
		       "recently used in --session-dir", srv.max_disk_sessions,
		       old);
		free(path);
	}
}

static bool
save(struct srv_session *ss, char **err)
{
	char *path, msg[1024], why[512] = "";
	enum txl_status st = TXL_OK;
	int64_t bytes;

	if (!srv.session_dir || !ss->s || !ss->dirty)
		return true;
	path = path_of(ss->id, ".state");
	bytes = txl_session_state_bytes(ss->s, ss->n_recent);
	if (srv.max_session_bytes > 0 && bytes > srv.max_session_bytes)
		snprintf(why, sizeof(why), "its state of %lld bytes is larger "
			 "than --max-session-bytes %d", (long long)bytes,
			 srv.max_session_bytes);
	else if (srv.max_disk_sessions > 0 && access(path, F_OK) != 0)
		disk_room(why, sizeof(why));
	if (!*why)
		st = txl_session_save_recent(ss->s, path, ss->recent,
					     ss->n_recent);
	free(path);
	if (!*why && st == TXL_OK) {
		ss->dirty = false;
		return true;
	}
	snprintf(msg, sizeof(msg), "session %s could not be saved (%s); it "
		 "is kept in memory and saved again at the next chance",
		 ss->id, *why ? why : engine_lib_error(st));
	errmsg("%s", msg);
	if (err)
		*err = xstrdup(msg);
	return false;
}

static void
drop(int i)
{
	txl_session_free(all[i]->s);
	free(all[i]->recent);
	free(all[i]);
	all[i] = all[--n_all];
}

/* Keep at most --max-sessions in memory: the least recently used idle
 * ones go, to --session-dir first where there is one.  One that cannot
 * be written stays (over the limit if it must): dropping it would lose
 * its text. */
static void
evict(void)
{
	for (int i = 0; i < n_all; i++)
		all[i]->tried = false;
	while (n_all > srv.max_sessions) {
		int lru = -1;

		for (int i = 0; i < n_all; i++)
			if (!all[i]->busy && !all[i]->tried &&
			    (lru < 0 || all[i]->used < all[lru]->used))
				lru = i;
		if (lru < 0)
			return;
		all[lru]->tried = true;
		if (save(all[lru], NULL))
			drop(lru);
	}
}

bool
session_reserve(const char *id, int *status, char **err)
{
	struct srv_session *ss = find(id);

	if (ss && ss->busy) {
		*status = 409;
		*err = xstrdup("session is in use by another request; retry "
			       "when it has finished");
		return false;
	}
	if (!ss) {
		ss = xrealloc(NULL, sizeof(*ss));
		memset(ss, 0, sizeof(*ss));
		snprintf(ss->id, sizeof(ss->id), "%s", id);
		all = xrealloc(all, (size_t)(n_all + 1) * sizeof(*all));
		all[n_all++] = ss;
	}
	ss->busy = true;
	ss->used = ++clock_now;
	return true;
}

void
session_unreserve(const char *id)
{
	for (int i = 0; i < n_all; i++)
		if (!strcmp(all[i]->id, id)) {
			all[i]->busy = false;
			if (!all[i]->s)
				drop(i);
			return;
		}
}

struct srv_session *
session_acquire(struct engine *e, const char *id, int *status, char **err)
{
	struct srv_session *ss = find(id);
	struct txl_session_params p;
	enum txl_status st;
	struct stat sb;

	if (!ss || !ss->busy) {
		*status = 500;
		*err = xstrdup("session was not reserved");
		return NULL;
	}
	if (ss->s)
		return ss;
	engine_session_params(e, &p);
	st = engine_session_new(e, &p, &ss->s);
	if (st == TXL_OK && srv.session_dir) {
		char *path = path_of(id, ".state");

		if (stat(path, &sb) == 0) {
			ss->recent = xrealloc(ss->recent,
					      TXL_REPEAT_LAST_N_MAX *
					      sizeof(int32_t));
			st = txl_session_load_recent(ss->s, path, ss->recent,
						     TXL_REPEAT_LAST_N_MAX,
						     &ss->n_recent);
			/* what the file held, not the room to read it */
			ss->recent = xrealloc(ss->recent,
					      (size_t)(ss->n_recent + 1) *
					      sizeof(int32_t));
			/* used now: --max-disk-sessions removes the least
			 * recently used files */
			if (st == TXL_OK)
				(void)utimensat(AT_FDCWD, path, NULL, 0);
		}
		free(path);
	}
	if (st != TXL_OK) {
		char msg[512];

		snprintf(msg, sizeof(msg), "session %s: %s", id,
			 engine_lib_error(st));
		*status = 500;
		*err = xstrdup(msg);
		txl_session_free(ss->s);
		ss->s = NULL;
		ss->busy = false;
		return NULL;
	}
	return ss;
}

int
session_release(struct engine *e, struct srv_session *ss,
		const int32_t *recent, int n_recent, bool changed, char **err)
{
	int status = 0;

	(void)e;
	if (changed) {
		ss->recent = xrealloc(ss->recent, (size_t)(n_recent ? n_recent
							  : 1) *
				      sizeof(int32_t));
		if (n_recent)
			memcpy(ss->recent, recent,
			       (size_t)n_recent * sizeof(int32_t));
		ss->n_recent = n_recent;
		ss->dirty = true;
	}
	/* a session changed now, or left unsaved before */
	if (ss->dirty && !save(ss, err))
		status = 507;
	ss->busy = false;
	ss->used = ++clock_now;
	evict();
	return status;
}

void
sessions_fit_memory(struct engine *e)
{
	struct txl_session_params p;
	double each, have, fit;

	engine_session_params(e, &p);
	each = (double)txl_session_bytes(e->mod->model, &p);
	have = engine_available_bytes();
	if (each <= 0 || have <= 0)
		return;
	/* the slots' sessions are made, but not yet touched: they count */
	fit = floor(have / each) - srv.parallel;
	if (fit < 0)
		fit = 0;
	if ((double)srv.max_sessions <= fit)
		return;
	errmsg("--max-sessions %d: %d sessions of %.1f MB with the %d of "
	       "--parallel need %.1f GB, more than the %.1f GB this machine "
	       "has available; capped to %d", srv.max_sessions,
	       srv.max_sessions, each / 1e6, srv.parallel,
	       each * (srv.max_sessions + srv.parallel) / 1e9, have / 1e9,
	       (int)fit);
	srv.max_sessions = (int)fit;
}

int
sessions_count(void)
{
	return n_all;
}

static void
add_entry(cJSON *data, const char *id, const struct srv_session *ss,
	  bool on_disk)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "id", id);
	cJSON_AddStringToObject(o, "object", "session");
	cJSON_AddBoolToObject(o, "in_memory", ss && ss->s);
	cJSON_AddBoolToObject(o, "on_disk", on_disk);
	cJSON_AddBoolToObject(o, "busy", ss && ss->busy);
	if (ss && ss->s) {
		cJSON_AddNumberToObject(o, "n_past",
					(double)txl_session_n_past(ss->s));
		/* of its text, the positions its memory holds, of mem_len */
		cJSON_AddNumberToObject(o, "mem_fill",
					txl_session_mem_fill(ss->s));
		cJSON_AddNumberToObject(o, "mem_len",
					txl_session_get_params(ss->s).mem_len);
	}
	cJSON_AddItemToArray(data, o);
}

char *
sessions_list_json(void)
{
	cJSON *root = cJSON_CreateObject(), *data = cJSON_CreateArray();
	char *out;

	cJSON_AddStringToObject(root, "object", "list");
	for (int i = 0; i < n_all; i++) {
		bool on_disk = false;

		if (srv.session_dir) {
			char *path = path_of(all[i]->id, ".state");

			on_disk = access(path, F_OK) == 0;
			free(path);
		}
		/* a reserved one too: its request is queued or running */
		if (all[i]->s || on_disk || all[i]->busy)
			add_entry(data, all[i]->id, all[i], on_disk);
	}
	if (srv.session_dir) {
		DIR *d = opendir(srv.session_dir);
		struct dirent *de;

		while (d && (de = readdir(d))) {
			char id[ID_MAX + 1];

			if (state_id(de->d_name, id) && !find(id))
				add_entry(data, id, NULL, true);
		}
		if (d)
			closedir(d);
	}
	cJSON_AddItemToObject(root, "data", data);
	out = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	return out;
}

int
session_delete(const char *id)
{
	struct srv_session *ss = find(id);
	bool found = ss != NULL && ss->s != NULL;

	if (ss && ss->busy)
		return 409;
	if (ss)
		for (int i = 0; i < n_all; i++)
			if (all[i] == ss) {
				drop(i);
				break;
			}
	if (srv.session_dir) {
		char *state = path_of(id, ".state");

		found |= unlink(state) == 0;
		free(state);
	}
	return found ? 0 : 404;
}

void
sessions_close(struct engine *e)
{
	int lost = 0;

	(void)e;
	/* every one tried, whatever the others did */
	while (n_all > 0) {
		if (!save(all[n_all - 1], NULL))
			lost++;
		drop(n_all - 1);
	}
	if (lost)
		errmsg("%d session%s could not be saved to --session-dir %s "
		       "(named above): their text since the last save is "
		       "lost", lost, lost == 1 ? "" : "s", srv.session_dir);
	free(all);
	all = NULL;
}
