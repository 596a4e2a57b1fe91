// The torch headers every torch-using target shares as one precompiled header.
#pragma once
#include <torch/torch.h>
