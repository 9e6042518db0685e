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
	       int32_t *ids, int n_max)
{
	return guarded([&]() -> int {
		std::vector<int> v;
		auto st = spm->sp.Encode(absl::string_view(text, len), &v);
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
