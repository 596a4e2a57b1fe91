// Prints rows [BEGIN, END) of an .npz file's x and y as distml reads them, as one JSON object,
// for npz_check.py to compare with NumPy. Usage: npz_dump FILE BEGIN END
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>

#include "distml/data/npz_reader.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: npz_dump FILE BEGIN END\n";
    return 2;
  }
  try {
    const auto d = distml::data::read_npz_rows(argv[1], std::strtoull(argv[2], nullptr, 10),
                                               std::strtoull(argv[3], nullptr, 10));
    std::cout << nlohmann::json{{"rows", d.num_samples}, {"sample_shape", d.sample_shape},
                                {"x", d.features},       {"labels", d.labels},
                                {"targets", d.targets},  {"target_shape", d.target_shape}}
              << "\n";
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
}
