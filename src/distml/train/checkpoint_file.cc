#include "distml/train/checkpoint_file.h"

#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <fstream>

#include "distml/core/atomic_file.h"
#include "distml/core/error.h"

namespace distml::train {
namespace {

constexpr std::string_view kMagic = "DMLCKPT2";
constexpr std::string_view kMagicV1 = "DMLCKPT1";  // no run id: a 20-byte header
constexpr std::size_t kHeaderSizeV1 = 8 + 8 + 4;   // magic, payload size, crc
constexpr std::size_t kHeaderSize = kHeaderSizeV1 + kRunIdBytes;

std::uint32_t crc_of(std::string_view bytes) {
  return static_cast<std::uint32_t>(
      crc32_z(0, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
}

std::string hex32(std::uint32_t value) {
  char text[11];
  std::snprintf(text, sizeof text, "0x%08x", value);
  return text;
}

void put_le(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

std::uint64_t get_le(const char* in, int bytes) {
  std::uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) {
    value |= std::uint64_t{static_cast<unsigned char>(in[i])} << (8 * i);
  }
  return value;
}

}  // namespace

void write_checked_file(const std::string& path, std::string_view payload,
                        std::string_view run_id) {
  if (run_id.size() > kRunIdBytes)
    throw CheckpointError(cat("cannot write ", path, ": run id '", run_id, "' is longer than ",
                              kRunIdBytes, " bytes"));
  std::string id(run_id);
  id.resize(kRunIdBytes, '\0');
  std::string header(kMagic);
  put_le(header, payload.size(), 8);
  put_le(header,
         crc32_z(crc_of(id), reinterpret_cast<const Bytef*>(payload.data()), payload.size()), 4);
  header += id;
  write_file_atomically(path, {header, payload});
}

namespace {

struct CheckedFile {
  std::string_view run_id;   // the header's, without its padding
  std::string_view checked;  // what the crc covers
  std::string_view payload;
  std::uint64_t expected_size = 0;
  std::uint32_t stored_crc = 0;
};

// The parts of a checked file of either version; CheckpointError when it is none.
CheckedFile parse_checked(std::string_view file, const std::string& path) {
  // A file cut inside the magic still starts like one: call that truncated, not foreign.
  const auto starts_like = [&](std::string_view magic) {
    return file.substr(0, magic.size()) == magic.substr(0, file.size());
  };
  const bool v1 = !starts_like(kMagic) && starts_like(kMagicV1);
  if (!v1 && !starts_like(kMagic)) {
    throw CheckpointError(
        cat(path, ": not a distml checkpoint (does not start with ", kMagic, ")"));
  }
  const std::size_t header = v1 ? kHeaderSizeV1 : kHeaderSize;
  if (file.size() < header) {
    throw CheckpointError(cat(path, ": truncated: expected a ", header, "-byte header, found ",
                              file.size(), " bytes"));
  }
  CheckedFile parts;
  parts.expected_size = get_le(file.data() + 8, 8);
  parts.stored_crc = static_cast<std::uint32_t>(get_le(file.data() + 16, 4));
  parts.checked = file.substr(kHeaderSizeV1);
  parts.payload = file.substr(header);
  if (!v1) {
    parts.run_id = file.substr(kHeaderSizeV1, kRunIdBytes);
    parts.run_id = parts.run_id.substr(0, parts.run_id.find('\0'));
  }
  return parts;
}

}  // namespace

std::string read_checked_file(const std::string& path) {
  const std::vector<char> bytes = read_whole_file(path);
  const CheckedFile file = parse_checked(std::string_view(bytes.data(), bytes.size()), path);
  if (file.payload.size() < file.expected_size) {
    throw CheckpointError(cat(path, ": truncated: expected ", file.expected_size,
                              " payload bytes, found ", file.payload.size()));
  }
  if (file.payload.size() > file.expected_size) {
    throw CheckpointError(cat(path, ": expected ", file.expected_size, " payload bytes, found ",
                              file.payload.size(), " (extra bytes after the payload)"));
  }
  const std::uint32_t computed_crc = crc_of(file.checked);
  if (computed_crc != file.stored_crc) {
    throw CheckpointError(cat(path, ": checksum mismatch: stored crc ", hex32(file.stored_crc),
                              ", computed ", hex32(computed_crc)));
  }
  return std::string(file.payload);
}

std::optional<std::string> checked_file_run_id(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(kHeaderSize, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  try {
    return std::string(parse_checked(head, path).run_id);
  } catch (const CheckpointError&) {
    return std::nullopt;
  }
}

void export_tensors(const std::string& path, const NamedTensors& tensors) {
  std::vector<char> bytes;
  try {
    c10::Dict<std::string, at::Tensor> dict;
    for (const auto& [name, tensor] : tensors) {
      if (dict.contains(name)) {
        throw CheckpointError(cat("cannot export ", path, ": tensor name '", name, "' repeats"));
      }
      // A copy, not a view: saving a view would save the whole storage under it.
      dict.insert(name, tensor.detach().clone(at::MemoryFormat::Contiguous));
    }
    bytes = torch::pickle_save(c10::IValue(dict));
  } catch (const c10::Error& e) {
    throw CheckpointError(cat("cannot export ", path, ": ", e.what_without_backtrace()));
  }
  write_file_atomically(path, {std::string_view(bytes.data(), bytes.size())});
}

NamedTensors import_tensors(const std::string& path) {
  c10::IValue value;
  try {
    value = torch::pickle_load(read_whole_file(path));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    const auto* torch_error = dynamic_cast<const c10::Error*>(&e);
    throw CheckpointError(cat("cannot import ", path, ": ",
                              torch_error ? torch_error->what_without_backtrace() : e.what()));
  }
  if (!value.isGenericDict()) {
    throw CheckpointError(
        cat("cannot import ", path, ": holds a ", value.tagKind(), ", not a dict of tensors"));
  }
  NamedTensors tensors;
  for (const auto& entry : value.toGenericDict()) {
    if (!entry.key().isString() || !entry.value().isTensor()) {
      throw CheckpointError(cat("cannot import ", path, ": an entry is ", entry.key().tagKind(),
                                " -> ", entry.value().tagKind(), ", not name -> tensor"));
    }
    tensors.emplace_back(entry.key().toStringRef(), entry.value().toTensor());
  }
  return tensors;
}

}  // namespace distml::train
