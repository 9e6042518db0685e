// SPDX-License-Identifier: MIT
//
// txl-spm.cc - the SentencePiece shim: C entry points over the C++
// library.  Every entry point is noexcept in effect: exceptions become
// error returns and a message for txl_last_error().

#include "txl-spm.h"

#include <climits>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include <sentencepiece_processor.h>

extern "C" enum txl_status txl_fail(enum txl_status status, const char *fmt,
				    ...);

struct txl_spm {
	sentencepiece::SentencePieceProcessor sp;
};

namespace util = sentencepiece::util;

namespace {

// Copy @p s into the caller's buffer: length, or negated length needed.
int
copy_out(const std::string &s, char *buf, size_t cap, bool nul)
{
	if (s.size() > INT_MAX - 1)
		return INT32_MIN;
	size_t need = s.size() + (nul ? 1 : 0);
	if (need > cap)
		return -static_cast<int>(s.size() + (nul ? 1 : 0));
	if (!s.empty())
		std::memcpy(buf, s.data(), s.size());
	if (nul)
		buf[s.size()] = '\0';
	return static_cast<int>(s.size());
}

// Run @p body, turning any exception into an error return (INT32_MIN)
// and a message: nothing C++ may cross into C.
template <class F>
int
guarded(F body) noexcept
{
	try {
		return body();
	} catch (const std::bad_alloc &) {
		txl_fail(TXL_ERR_NOMEM, "tokenizer: out of memory");
	} catch (const std::exception &e) {
		txl_fail(TXL_ERR_INVALID, "tokenizer: %s", e.what());
	} catch (...) {
		txl_fail(TXL_ERR_INVALID, "tokenizer: unknown error");
	}
	return INT32_MIN;
}

/*
 * The normalisation tables of a SentencePiece model are untrusted input:
 * the library uses them as they are (normalizer.cc, Normalizer::Init and
 * NormalizePrefix; darts-clone's DoubleArray::commonPrefixSearch).  A
 * table is a little-endian u32 trie size S, S bytes of double-array units,
 * then a pool of NUL-terminated replacement strings.  For every input
 * byte b at a trie node of base B, the search reads unit B ^ b; when that
 * unit's label is b it moves on to base B' = (B ^ b) ^ offset, and when
 * the unit has a leaf it reads unit B' whose value is an offset into the
 * pool, read up to a NUL.  NormalizePrefix keeps at most 32 matches on
 * the stack but reads as many as the search counts.  So a table is
 * accepted only if from the root every reachable base B has all of
 * B ^ 0 .. B ^ 255 inside the units, every leaf unit and value is inside,
 * each value is followed by a NUL in the pool, the trie has no loop (a
 * trie that darts-clone builds has none) and no path meets more than 32
 * leaves.
 */
class Charsmap {
public:
	Charsmap(const uint8_t *blob, size_t len) : blob_(blob), len_(len) {}
	const char *check();

private:
	uint32_t unit(uint32_t i) const { return units_[i]; }
	static uint32_t offset(uint32_t u)
	{
		return (u >> 10) << ((u & (1u << 9)) >> 6);
	}
	static bool has_leaf(uint32_t u) { return (u >> 8) & 1; }
	static uint32_t label(uint32_t u) { return u & ((1u << 31) | 0xFF); }

	const uint8_t *blob_;
	size_t len_;
	std::vector<uint32_t> units_;	/* the trie, decoded once */
};

const char *
Charsmap::check()
{
	enum { MAX_LEAVES = 32 };
	if (len_ == 0)
		return nullptr;		/* no table: identity */
	if (len_ <= 4)
		return "is truncated";
	uint32_t size = blob_[0] | (uint32_t)blob_[1] << 8 |
			(uint32_t)blob_[2] << 16 | (uint32_t)blob_[3] << 24;
	if (size > len_ - 4 || size % 4)
		return "has a trie size past its end";
	uint32_t n = size / 4;
	const uint8_t *pool = blob_ + 4 + size;
	size_t pool_len = len_ - 4 - size;
	size_t last_nul = pool_len;	/* none */
	for (size_t i = pool_len; i-- > 0;)
		if (pool[i] == 0) {
			last_nul = i;
			break;
		}
	if (n == 0)
		return "has an empty trie";
	units_.resize(n);
	for (uint32_t i = 0; i < n; i++) {
		const uint8_t *p = blob_ + 4 + 4 * (size_t)i;
		units_[i] = p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
			    (uint32_t)p[3] << 24;
	}
	uint32_t root = offset(unit(0));
	if ((root | 0xFF) >= n)
		return "has a trie root past its end";

	/* The transitions of every base, found in one pass: unit p is the
	 * child of base p ^ label(p) on byte label(p) when its label is a
	 * byte.  (Trying the 256 bytes of each base reached costs 256 reads
	 * a node: a third of a fuzzer's time on an nmt_nfkc table.)  kids of
	 * base B: child[first[B] .. first[B + 1]). */
	std::vector<uint32_t> first(n + 1, 0), child;
	for (uint32_t p = 0; p < n; p++) {
		uint32_t b = label(units_[p]);
		if (b <= 255 && (p ^ b) < n)
			first[(p ^ b) + 1]++;
	}
	for (uint32_t i = 0; i < n; i++)
		first[i + 1] += first[i];
	child.resize(first[n]);
	{
		std::vector<uint32_t> at(first.begin(), first.end() - 1);
		for (uint32_t p = 0; p < n; p++) {
			uint32_t b = label(units_[p]);
			if (b <= 255 && (p ^ b) < n)
				child[at[p ^ b]++] = p;
		}
	}

	/* depth-first over bases; state: 0 new, 1 on the path, 2 done;
	 * most[B] = the most leaves a search from B can meet */
	std::vector<uint8_t> state(n, 0);
	std::vector<uint8_t> most(n, 0);
	struct frame {
		uint32_t base;
		uint32_t k;	/* the next of its kids */
		uint8_t best;
	};
	std::vector<frame> stack;
	stack.push_back({root, first[root], 0});
	state[root] = 1;
	while (!stack.empty()) {
		frame &f = stack.back();
		if (f.k == first[f.base + 1]) {
			uint32_t done = f.base;
			uint8_t best = f.best;
			state[done] = 2;
			most[done] = best;
			stack.pop_back();
			if (!stack.empty()) {
				frame &up = stack.back();
				uint32_t u = unit(child[up.k - 1]);
				int m = best + (has_leaf(u) ? 1 : 0);
				if (m > MAX_LEAVES)
					return "has a path of more than 32 rules";
				if (m > up.best)
					up.best = (uint8_t)m;
			}
			continue;
		}
		/* every kid p = base ^ byte < n, as checked for the base */
		uint32_t p = child[f.k++], u = unit(p);
		uint32_t next = p ^ offset(u);
		if ((next | 0xFF) >= n)
			return "has a trie node past its end";
		if (has_leaf(u)) {
			uint32_t v = unit(next) & ((1u << 31) - 1);
			if (last_nul == pool_len || v > last_nul)
				return "has a rule past the end of its strings";
		}
		if (state[next] == 1)
			return "has a loop";
		if (state[next] == 2) {
			int m = most[next] + (has_leaf(u) ? 1 : 0);
			if (m > MAX_LEAVES)
				return "has a path of more than 32 rules";
			if (m > f.best)
				f.best = (uint8_t)m;
			continue;
		}
		state[next] = 1;
		stack.push_back({next, first[next], 0});
	}
	return nullptr;
}

/* Read a varint at @p *i of @p b[0..len); false if malformed. */
bool
read_varint(const uint8_t *b, size_t len, size_t *i, uint64_t *v)
{
	*v = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		if (*i >= len)
			return false;
		uint8_t c = b[(*i)++];
		*v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return true;
	}
	return false;
}

/*
 * Call @p fn(payload, len) for each length-delimited field @p num of the
 * protobuf message @p b, in order, and @p vfn(value) for each varint
 * field @p num; false if the message is malformed.
 */
template <class F, class V>
bool
each_field(const uint8_t *b, size_t len, uint64_t num, F fn, V vfn)
{
	size_t i = 0;
	while (i < len) {
		uint64_t key, v;
		if (!read_varint(b, len, &i, &key))
			return false;
		switch (key & 7) {
		case 0:
			if (!read_varint(b, len, &i, &v))
				return false;
			if ((key >> 3) == num)
				vfn(v);
			break;
		case 1:
			if (len - i < 8)
				return false;
			i += 8;
			break;
		case 5:
			if (len - i < 4)
				return false;
			i += 4;
			break;
		case 2:
			if (!read_varint(b, len, &i, &v) || v > len - i)
				return false;
			if ((key >> 3) == num)
				fn(b + i, (size_t)v);
			i += (size_t)v;
			break;
		default:
			return false;
		}
	}
	return true;
}

template <class F>
bool
each_field(const uint8_t *b, size_t len, uint64_t num, F fn)
{
	return each_field(b, len, num, fn, [](uint64_t) {});
}

/*
 * Check the normalisation tables (ModelProto.normalizer_spec = 3 and
 * denormalizer_spec = 5, their precompiled_charsmap = 2: the last one of
 * each, as protobuf merges repeated messages).  nullptr if they are safe,
 * else what is wrong.
 */
const char *
check_charsmaps(const void *proto, size_t len)
{
	const uint8_t *b = static_cast<const uint8_t *>(proto);
	const char *why = nullptr;
	bool ok = true;

	for (uint64_t spec : {3, 5}) {
		const uint8_t *map = nullptr;
		size_t map_len = 0;
		ok = ok && each_field(b, len, spec, [&](const uint8_t *m,
						       size_t n) {
			ok = ok && each_field(m, n, 2, [&](const uint8_t *c,
							   size_t k) {
				map = c;
				map_len = k;
			});
		});
		if (!ok)
			return nullptr;	/* malformed: the parser refuses it */
		if (map && (why = Charsmap(map, map_len).check()))
			return why;
	}
	return nullptr;
}

} // namespace

extern "C" {

enum txl_status
txl_spm_load(const void *proto, size_t len, struct txl_spm **out)
{
	*out = nullptr;
	// st.ToString() and the exceptions SentencePiece throws for some
	// malformed protos (darts: "zero-length key") hold its source
	// location, which tells the user nothing.
	static const char bad[] =
		"tensor 'tokenizer.model' is not a valid SentencePiece model";
	try {
		// owned until handed out: an exception must not leak it
		const char *why = check_charsmaps(proto, len);
		if (why)
			return txl_fail(TXL_ERR_FORMAT, "tensor 'tokenizer.model': "
					"its normalisation table (precompiled "
					"charsmap) %s", why);
		std::unique_ptr<txl_spm> spm(new txl_spm);
		auto st = spm->sp.LoadFromSerializedProto(
			absl::string_view(static_cast<const char *>(proto), len));
		if (!st.ok())
			return txl_fail(TXL_ERR_FORMAT, "%s", bad);
		*out = spm.release();
		return TXL_OK;
	} catch (const std::bad_alloc &) {
		return txl_fail(TXL_ERR_NOMEM, "out of memory loading tokenizer");
	} catch (...) {
		return txl_fail(TXL_ERR_FORMAT, "%s", bad);
	}
}

bool
txl_spm_describe(const void *proto, size_t len, struct txl_spm_desc *d)
{
	const uint8_t *b = static_cast<const uint8_t *>(proto);
	const auto none = [](const uint8_t *, size_t) {};
	bool ok;

	*d = txl_spm_desc{0, 1, nullptr, 0};
	// the last of a field, as protobuf merges them
	ok = each_field(b, len, 1, [&](const uint8_t *, size_t) {
		if (d->n_pieces < INT_MAX)
			d->n_pieces++;
	});
	ok = ok && each_field(b, len, 2, [&](const uint8_t *m, size_t n) {
		ok = ok && each_field(m, n, 3, none, [&](uint64_t v) {
			d->model_type = v <= INT_MAX ? (int)v : -1;
		});
	});
	ok = ok && each_field(b, len, 3, [&](const uint8_t *m, size_t n) {
		ok = ok && each_field(m, n, 1, [&](const uint8_t *s, size_t k) {
			d->name = reinterpret_cast<const char *>(s);
			d->name_len = k;
		});
	});
	return ok;
}

void
txl_spm_free(struct txl_spm *spm)
{
	delete spm;
}

int
txl_spm_vocab_size(const struct txl_spm *spm)
{
	return spm->sp.GetPieceSize();
}

int
txl_spm_encode(const struct txl_spm *spm, const char *text, size_t len,
	       int32_t *ids, int n_max, enum txl_spm_unk split_unk)
{
	return guarded([&]() -> int {
		std::vector<int> v;
		util::Status st;
		if (split_unk != TXL_SPM_UNK_RUN) {
			// SentencePiece merges a run of unknown pieces into
			// one; a word model's original gives one unknown
			// symbol per word: one per U+2581 word mark; a
			// character model's one per character.
			sentencepiece::ImmutableSentencePieceText spt;
			st = spm->sp.Encode(absl::string_view(text, len),
					    spt.mutable_proto());
			for (size_t i = 0; st.ok() && i < spt.pieces_size();
			     i++) {
				auto p = spt.pieces((int)i);
				size_t k = 1;
				if (spm->sp.IsUnknown((int)p.id())) {
					const std::string &s = p.piece();
					k = 0;
					if (split_unk == TXL_SPM_UNK_PER_CHAR)
						for (unsigned char c : s)
							k += (c & 0xc0) != 0x80;
					else
						for (size_t j = 0; j + 3 <= s.size(); j++)
							k += s.compare(j, 3, "\xE2\x96\x81")
								== 0;
					k = k ? k : 1;
				}
				v.insert(v.end(), k, (int)p.id());
			}
		} else {
			st = spm->sp.Encode(absl::string_view(text, len), &v);
		}
		if (!st.ok()) {
			txl_fail(TXL_ERR_INVALID, "tokenizer: %s",
				 st.error_message());
			return INT32_MIN;
		}
		if (v.size() > static_cast<size_t>(INT_MAX)) {
			txl_fail(TXL_ERR_INVALID, "text too long to tokenize");
			return INT32_MIN;
		}
		int n = static_cast<int>(v.size());
		if (n > n_max)
			return -n;
		for (int i = 0; i < n; i++)
			ids[i] = v[i];
		return n;
	});
}

int
txl_spm_decode(const struct txl_spm *spm, const int32_t *ids, int n,
	       char *buf, size_t cap)
{
	return guarded([&]() -> int {
		std::vector<int> v(ids, ids + n);
		std::string s;
		auto st = spm->sp.Decode(v, &s);
		if (!st.ok()) {
			txl_fail(TXL_ERR_INVALID, "tokenizer: %s",
				 st.error_message());
			return INT32_MIN;
		}
		return copy_out(s, buf, cap, true);
	});
}

int
txl_spm_piece_bytes(const struct txl_spm *spm, int id, char *buf, size_t cap)
{
	return guarded([&]() -> int {
		const auto &sp = spm->sp;
		if (id < 0 || id >= sp.GetPieceSize())
			return INT32_MIN;
		if (sp.IsControl(id))
			return copy_out(std::string(), buf, cap, false);
		const std::string &piece = sp.IdToPiece(id);
		if (sp.IsByte(id)) {
			// "<0xAB>" stands for the byte 0xAB.
			unsigned long b = std::stoul(piece.substr(3, 2), nullptr,
						     16);
			return copy_out(std::string(1, static_cast<char>(b)),
					buf, cap, false);
		}
		if (sp.IsUnknown(id))
			return copy_out(" \xE2\x81\x87 ", buf, cap, false);
		// U+2581 LOWER ONE EIGHTH BLOCK marks a space.
		std::string s;
		for (size_t i = 0; i < piece.size();) {
			if (piece.compare(i, 3, "\xE2\x96\x81") == 0) {
				s.push_back(' ');
				i += 3;
			} else {
				s.push_back(piece[i++]);
			}
		}
		return copy_out(s, buf, cap, false);
	});
}

int
txl_spm_piece(const struct txl_spm *spm, int id, char *buf, size_t cap)
{
	return guarded([&]() -> int {
		if (id < 0 || id >= spm->sp.GetPieceSize())
			return INT32_MIN;
		return copy_out(spm->sp.IdToPiece(id), buf, cap, false);
	});
}

int
txl_spm_is_control(const struct txl_spm *spm, int id)
{
	return id >= 0 && id < spm->sp.GetPieceSize() && spm->sp.IsControl(id);
}

int32_t
txl_spm_bos_id(const struct txl_spm *spm)
{
	return spm->sp.bos_id();
}

int32_t
txl_spm_eos_id(const struct txl_spm *spm)
{
	return spm->sp.eos_id();
}

int32_t
txl_spm_unk_id(const struct txl_spm *spm)
{
	return spm->sp.unk_id();
}

} // extern "C"
