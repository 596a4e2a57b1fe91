// Writes a small known dict of tensors with export_tensors, for torch_load_export.sh to read back
// with Python's torch.load. Usage: distml_export_fixture PATH
#include <iostream>

#include "distml/core/error.h"
#include "distml/train/checkpoint_file.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " PATH\n";
    return 2;
  }
  try {
    distml::train::export_tensors(argv[1],
                                  {{"fc.weight", torch::arange(6, torch::kFloat32).reshape({2, 3})},
                                   {"fc.bias", torch::tensor({1.5f, -2.0f})},
                                   {"steps", torch::tensor({7}, torch::kInt64)}});
  } catch (const distml::Error& e) {
    std::cerr << "export_fixture: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
