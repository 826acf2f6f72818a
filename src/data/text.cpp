// UTF-8 text -> a character-level LM dataset: non-overlapping seq_len-character sequences and, as
// targets, the same shifted by one. The vocabulary (sorted code points, ids from 1; 0 pads) comes from
// the training text via DataMeta. Code points, not grapheme clusters; CRLF is read as LF.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>

#include "core/error.h"
#include "data/loaders.h"

namespace rnntrain {

namespace {

struct Char {
  std::string bytes;  // one UTF-8 encoded code point
  int64_t line;       // 1-based, for messages
};

// Splits UTF-8 text into code points; DataError naming the line of the first invalid byte.
std::vector<Char> split_utf8(const std::string& text, const std::string& path) {
  std::vector<Char> out;
  out.reserve(text.size());
  int64_t line = 1;
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    const size_t len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    bool ok = len > 0 && i + len <= text.size() && b != 0xC0 && b != 0xC1 && b < 0xF5;
    for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(text[i + k]) >> 6) == 0x2;
    if (ok && len > 2) {  // no overlong forms, no surrogates, nothing above U+10FFFF (RFC 3629)
      const auto b1 = static_cast<unsigned char>(text[i + 1]);
      ok = !(b == 0xE0 && b1 < 0xA0) && !(b == 0xED && b1 >= 0xA0) && !(b == 0xF0 && b1 < 0x90) &&
           !(b == 0xF4 && b1 >= 0x90);
    }
    if (!ok)
      throw DataError(fmt::format("{}:{}: invalid UTF-8 (byte 0x{:02x}). Save the text as UTF-8.", path, line, b));
    if (b == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {  // CRLF -> LF
      ++i;
      continue;
    }
    out.push_back({text.substr(i, len), line});
    if (b == '\n') ++line;
    i += len;
  }
  return out;
}

// "'a'", "'\n'" or "U+00E9 'é'" for messages.
std::string describe(const std::string& c) {
  if (c == "\n") return "'\\n'";
  if (c == "\t") return "'\\t'";
  if (c.size() == 1) return fmt::format("'{}'", c);
  uint32_t cp = static_cast<unsigned char>(c[0]) & (0xFF >> (c.size() + 1));
  for (size_t k = 1; k < c.size(); ++k) cp = cp << 6 | (static_cast<unsigned char>(c[k]) & 0x3F);
  return fmt::format("U+{:04X} '{}'", cp, c);
}

}  // namespace

Dataset load_text(const DataSource& src, const std::string& base_dir, DataMeta& meta) {
  const std::string path = source_path(src, base_dir, "text");
  if (src.seq_len < 1)
    throw ConfigError(fmt::format("{}: a text data source needs seq_len >= 1: the characters per training sequence.",
                                  src.loc.str()));
  std::string text = read_file(path, src);
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);  // UTF-8 byte order mark
  const std::vector<Char> chars = split_utf8(text, path);

  if (meta.vocab.empty()) {
    std::set<std::string> distinct;  // byte order of UTF-8 strings is code point order
    for (const auto& c : chars) distinct.insert(c.bytes);
    meta.vocab.assign(1, "");  // id 0: padding
    meta.vocab.insert(meta.vocab.end(), distinct.begin(), distinct.end());
  }
  std::map<std::string, int64_t> id;
  for (size_t i = 1; i < meta.vocab.size(); ++i) id[meta.vocab[i]] = static_cast<int64_t>(i);

  const int64_t C = static_cast<int64_t>(chars.size()), L = src.seq_len;
  if (C < L + 1)
    throw DataError(fmt::format("{}: the text has {} characters, too few for one sequence of seq_len {} plus its "
                                "next character. Use a smaller seq_len or a longer text.", path, C, L));
  std::vector<float> ids(static_cast<size_t>(C));
  for (int64_t i = 0; i < C; ++i) {
    auto it = id.find(chars[i].bytes);
    if (it == id.end())
      throw DataError(fmt::format("{}:{}: character {} does not occur in the training text, so it has no id in the "
                                  "vocabulary ({} characters). Remove or replace it, or train on a text that "
                                  "contains it.", path, chars[i].line, describe(chars[i].bytes),
                                  meta.vocab.size() - 1));
    ids[i] = static_cast<float>(it->second);
  }

  const int64_t N = (C - 1) / L;
  Dataset d;
  d.source = path;
  d.x_name = "character ids";
  d.y_name = "next-character ids";
  d.x = Tensor({N, L});  // x: [N, T] ids of characters n*L .. n*L+L-1
  d.y = Tensor({N, L});  // y: [N, T] ids of the next characters, n*L+1 .. n*L+L
  for (int64_t n = 0; n < N; ++n)
    for (int64_t t = 0; t < L; ++t) {
      d.x[n * L + t] = ids[n * L + t];
      d.y[n * L + t] = ids[n * L + t + 1];
    }
  return d;
}

}  // namespace rnntrain
