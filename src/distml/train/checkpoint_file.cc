#include "distml/train/checkpoint_file.h"

#include <zlib.h>

#include <cstdint>
#include <cstdio>

#include "distml/core/atomic_file.h"
#include "distml/core/error.h"

namespace distml::train {
namespace {

constexpr std::string_view kMagic = "DMLCKPT1";
constexpr std::size_t kHeaderSize = 8 + 8 + 4;  // magic, payload size, crc

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

void write_checked_file(const std::string& path, std::string_view payload) {
  std::string header(kMagic);
  put_le(header, payload.size(), 8);
  put_le(header, crc_of(payload), 4);
  write_file_atomically(path, {header, payload});
}

std::string read_checked_file(const std::string& path) {
  const std::vector<char> bytes = read_whole_file(path);
  const std::string_view file(bytes.data(), bytes.size());
  // A file cut inside the magic still starts like one: call that truncated, not foreign.
  if (file.substr(0, kMagic.size()) != kMagic.substr(0, file.size())) {
    throw CheckpointError(
        cat(path, ": not a distml checkpoint (does not start with ", kMagic, ")"));
  }
  if (file.size() < kHeaderSize) {
    throw CheckpointError(cat(path, ": truncated: expected a ", kHeaderSize, "-byte header, found ",
                              file.size(), " bytes"));
  }
  const std::uint64_t expected = get_le(file.data() + 8, 8);
  const auto stored_crc = static_cast<std::uint32_t>(get_le(file.data() + 16, 4));
  const std::string_view payload = file.substr(kHeaderSize);
  if (payload.size() < expected) {
    throw CheckpointError(
        cat(path, ": truncated: expected ", expected, " payload bytes, found ", payload.size()));
  }
  if (payload.size() > expected) {
    throw CheckpointError(cat(path, ": expected ", expected, " payload bytes, found ",
                              payload.size(), " (extra bytes after the payload)"));
  }
  const std::uint32_t computed_crc = crc_of(payload);
  if (computed_crc != stored_crc) {
    throw CheckpointError(cat(path, ": checksum mismatch: stored crc ", hex32(stored_crc),
                              ", computed ", hex32(computed_crc)));
  }
  return std::string(payload);
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
