#include "apps/fak/tokenize_cli.h"

#include <fmt/format.h>

#include "core/mapped_file.h"   // ReadFileToString
#include "tokenizer/loader.h"   // LoadTokenizer
#include "tokenizer/unicode.h"  // ValidUtf8PrefixLength

namespace fak {

std::string EscapePiece(std::string_view bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size();) {
    const auto b = static_cast<uint8_t>(bytes[i]);
    if (b >= 0x80) {
      const size_t n = ValidUtf8PrefixLength(bytes.substr(i));
      if (n > 0) {
        out.append(bytes.substr(i, n));
        i += n;
      } else {
        out += fmt::format("\\x{:02x}", b);
        ++i;
      }
      continue;
    }
    switch (b) {
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\\': out += "\\\\"; break;
      case '\'': out += "\\'"; break;
      default:
        if (b < 0x20 || b == 0x7F) {
          out += fmt::format("\\x{:02x}", b);
        } else {
          out.push_back(static_cast<char>(b));
        }
    }
    ++i;
  }
  return out;
}

Status RunTokenize(const TokenizeOptions& options, std::ostream& out) {
  if (options.model.empty()) return InvalidArgument("tokenize: no model given (-m)");
  std::string text = options.text;
  if (!options.file.empty()) {
    FAK_ASSIGN_OR_RETURN(text, ReadFileToString(options.file));
  }
  FAK_ASSIGN_OR_RETURN(const Tokenizer tok, LoadTokenizer(options.model));
  EncodeOptions enc;
  enc.add_special = !options.no_special;
  enc.parse_special = !options.no_special;
  FAK_ASSIGN_OR_RETURN(const std::vector<int32_t> ids, tok.Encode(text, enc));
  if (options.ids_only) {
    out << '[';
    for (size_t i = 0; i < ids.size(); ++i) out << (i ? ", " : "") << ids[i];
    out << "]\n";
    return Status::Ok();
  }
  for (int32_t id : ids) {
    FAK_ASSIGN_OR_RETURN(const std::string bytes, tok.TokenBytes(id));
    out << id << " '" << EscapePiece(bytes) << "'\n";
  }
  return Status::Ok();
}

}  // namespace fak
