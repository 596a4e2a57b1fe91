#include "distml/data/csv_fields.h"

#include "distml/core/error.h"

namespace distml::data::csv {

std::vector<std::string> split_fields(std::string_view line, char delim, const std::string& path,
                                      std::size_t line_no) {
  std::vector<std::string> fields;
  std::string cur;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c == '"' && trim(cur).empty()) {
      cur.clear();
      quoted = true;
    } else if (c == delim) {
      fields.emplace_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (quoted)
    throw DataError(cat(path, ":", line_no, ": unterminated quoted field in column ",
                        fields.size() + 1, ": expected a closing '\"'"));
  fields.emplace_back(trim(cur));
  return fields;
}

}  // namespace distml::data::csv
