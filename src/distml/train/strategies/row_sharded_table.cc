#include "distml/train/strategies/row_sharded_table.h"

#include <vector>

#include "distml/core/error.h"
#include "distml/train/strategies/row_sharded_flat.h"
#include "distml/train/tensor_buffer.h"

namespace distml::train {
namespace {

// (row ids, rows) of a gradient, one pair per distinct row.
struct GradientRows {
  torch::Tensor ids, values;
};

GradientRows gradient_rows(const torch::Tensor& gradient, const torch::Tensor& table) {
  if (!gradient.defined())
    return {torch::empty({0}, torch::kLong), torch::empty({0, table.size(1)}, table.options())};
  const auto sparse = (gradient.is_sparse() ? gradient : gradient.to_sparse(1)).coalesce();
  return {sparse.indices()[0].contiguous(), sparse.values().contiguous()};
}

// Elements per rank of blocks of `counts[r]` rows of `per_row` elements each.
std::vector<std::size_t> block_elements(const torch::Tensor& counts, std::int64_t per_row) {
  const auto c = counts.accessor<std::int64_t, 1>();
  std::vector<std::size_t> out;
  for (std::int64_t r = 0; r < c.size(0); ++r) out.push_back(c[r] * per_row);
  return out;
}

}  // namespace

RowShardedTable::RowShardedTable(comm::Communicator& comm, torch::Tensor table, int tag)
    : comm_(comm), table_(std::move(table)), tag_(tag) {
  DML_CHECK(table_.dim() == 2 && table_.is_contiguous(), "a row-sharded table is a contiguous ",
            "[rows, dim] tensor");
}

std::size_t RowShardedTable::step(const torch::Tensor& gradient, double lr) {
  torch::NoGradGuard no_grad;
  const int world = comm_.size(), me = comm_.rank();
  const std::int64_t dim = table_.size(1);
  const std::size_t row_bytes = dim * table_.element_size(), id_bytes = sizeof(std::int64_t);

  // 1. Pairs in owner order; how many each owner gets, and how many each rank sends me.
  GradientRows mine = gradient_rows(gradient, table_);
  const auto owner = mine.ids.remainder(world);
  const auto order = std::get<1>(owner.sort(/*stable=*/c10::optional<bool>(true), 0));
  mine = {mine.ids.index_select(0, order), mine.values.index_select(0, order)};
  const auto send_counts = torch::bincount(owner, {}, world).to(torch::kLong);
  auto recv_counts = torch::empty({world}, torch::kLong);
  comm_.alltoall(buffer_of(send_counts), buffer_of(recv_counts));

  // 2. Pairs to their owners, mine to myself by a copy.
  const auto sent = send_counts.accessor<std::int64_t, 1>();
  const auto got = recv_counts.accessor<std::int64_t, 1>();
  std::vector<GradientRows> incoming(world);
  std::vector<comm::Work> work;
  std::size_t bytes = 2 * world * sizeof(std::int64_t);  // the counts of 1. and 4.
  std::int64_t offset = 0;
  for (int r = 0; r < world; ++r) {
    const auto ids = mine.ids.narrow(0, offset, sent[r]);
    const auto values = mine.values.narrow(0, offset, sent[r]);
    offset += sent[r];
    if (r == me) {
      incoming[r] = {ids, values};
      continue;
    }
    if (sent[r] > 0) {
      work.push_back(comm_.isend(buffer_of(ids), r, tag_));
      work.push_back(comm_.isend(buffer_of(values), r, tag_ + 1));
      bytes += sent[r] * (id_bytes + row_bytes);
    }
    incoming[r] = {torch::empty({got[r]}, torch::kLong),
                   torch::empty({got[r], dim}, table_.options())};
    if (got[r] > 0) {
      work.push_back(comm_.irecv(buffer_of(incoming[r].ids), r, tag_));
      work.push_back(comm_.irecv(buffer_of(incoming[r].values), r, tag_ + 1));
    }
  }
  for (auto& w : work) w.wait();

  // 3. Sum per row in rank order (one order on every run), average, step.
  std::vector<torch::Tensor> ids, values;
  for (const auto& in : incoming) {
    ids.push_back(in.ids);
    values.push_back(in.values);
  }
  const auto unique = torch::_unique2(torch::cat(ids), /*sorted=*/true, /*return_inverse=*/true);
  const torch::Tensor& updated = std::get<0>(unique);
  auto sum = torch::zeros({updated.size(0), dim}, table_.options());
  sum.index_add_(0, std::get<1>(unique), torch::cat(values));
  table_.index_add_(0, updated, sum, -lr / world);

  // 4. Every owner's updated rows to every rank.
  std::int64_t count = updated.size(0);
  auto counts = torch::empty({world}, torch::kLong);
  comm_.allgather(comm::ConstBuffer{&count, 1, comm::DType::i64}, buffer_of(counts));
  const std::int64_t total = counts.sum().item<std::int64_t>();
  auto published_ids = torch::empty({total}, torch::kLong);
  auto published_rows = torch::empty({total, dim}, table_.options());
  comm_.allgatherv(buffer_of(updated), buffer_of(published_ids), block_elements(counts, 1));
  comm_.allgatherv(buffer_of(table_.index_select(0, updated)), buffer_of(published_rows),
                   block_elements(counts, dim));
  table_.index_copy_(0, published_ids, published_rows);
  bytes += count * (id_bytes + row_bytes);
  return bytes;
}

std::size_t step_flat_table(comm::Communicator& comm, comm::Buffer table, std::int64_t dim,
                            comm::ConstBuffer ids, comm::ConstBuffer values, double lr, int tag) {
  if (table.dtype != comm::DType::f32 && table.dtype != comm::DType::f64)
    throw UsageError(cat("a row-sharded table of ", comm::dtype_name(table.dtype),
                         "; float32 or float64 expected"));
  if (ids.dtype != comm::DType::i64 || values.dtype != table.dtype ||
      values.count != ids.count * dim || dim <= 0 || table.count % dim != 0)
    throw UsageError(cat("a row-sharded table's gradient: ", ids.count, " ids of ",
                         comm::dtype_name(ids.dtype), " and ", values.count, " values of ",
                         comm::dtype_name(values.dtype), " for rows of ", dim, " ",
                         comm::dtype_name(table.dtype), "; int64 ids and one row per id expected"));
  const auto type = table.dtype == comm::DType::f32 ? torch::kFloat32 : torch::kFloat64;
  const auto rows = static_cast<std::int64_t>(table.count) / dim;
  const auto count = static_cast<std::int64_t>(ids.count);
  // Read only: from_blob wants a mutable pointer.
  const auto id_tensor = torch::from_blob(const_cast<void*>(ids.data), {1, count}, torch::kLong);
  const auto rows_tensor = torch::from_blob(const_cast<void*>(values.data), {count, dim}, type);
  RowShardedTable sharded(comm, torch::from_blob(table.data, {rows, dim}, type), tag);
  return sharded.step(torch::sparse_coo_tensor(id_tensor, rows_tensor, {rows, dim}), lr);
}

}  // namespace distml::train
